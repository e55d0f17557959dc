//! The `gpuhash` command.

mod bench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "gpuhash", version, about = "GPU/CPU hash tables: benchmarks and tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmark the tables over ops x key width x load x size x scheme, with
    /// hardware limits and CPU peers; writes results.csv, run_info.txt and plots
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(args),
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
