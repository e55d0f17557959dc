//! The `gpuhash` command.

mod bench;
mod kernels;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "gpuhash", version, about = "GPU/CPU hash tables: benchmarks and tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per run: the size of its largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmark the tables over ops x key width x load x size x scheme, with
    /// hardware limits and CPU peers; writes results.csv, run_info.txt and plots
    Bench(bench::BenchArgs),
    /// Compile the CUDA kernel modules with NVRTC into the disk cache ahead
    /// of use (tables otherwise compile each on first use, seconds apiece)
    Kernels(kernels::KernelsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Kernels(args) => {
            return match kernels::run(args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A run stopped by Ctrl-C is no error: it says how far it got, and
        // exits with the status of a SIGINT.
        Err(e @ bench::BenchError::Interrupted { .. }) => {
            eprintln!("{e}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
