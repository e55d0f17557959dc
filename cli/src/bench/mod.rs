//! `gpuhash bench`: the benchmark grid, hardware limits, CPU peers, and
//! the reports (terminal lines and table, results.csv, run_info.txt, SVG
//! plots). Each row goes to results.csv and the terminal as soon as it is
//! measured; run_info.txt is written at the start and again at the end.
//!
//! The method is described in BENCHMARKS.md at the repository root.

mod bus;
mod clean;
mod commit;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "wgpu")]
mod wgpu;
#[cfg(all(feature = "wgpu", not(target_arch = "wasm32")))]
mod vkmem;
mod defaults;
mod grid;
mod keys;
mod limits;
mod peers;
mod plot;
mod record;
mod report;

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use gpuhash::{Device, RegionBuild};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use defaults::Preset;
use grid::{Batch, GridSpec, Mix, Op};

/// A comma-separated flag value, parsed item by item.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct List<T>(Vec<T>);

fn list<T>(s: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<List<T>, String> {
    let items: Result<Vec<T>, String> = s.split(',').map(|p| item(p.trim())).collect();
    match items? {
        v if v.is_empty() => Err("empty list".into()),
        v => Ok(List(v)),
    }
}

fn parse_device(s: &str) -> Result<Device, String> {
    s.parse()
}

fn parse_ops(s: &str) -> Result<List<Op>, String> {
    if s == "all" {
        return Ok(List(Op::ALL.to_vec()));
    }
    list(s, |p| {
        Op::parse(p).ok_or_else(|| {
            let names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
            format!("unknown op '{p}' (expected all or some of {})", names.join(","))
        })
    })
}

/// Key or value widths: `u32`, `u64` (or `32`, `64`).
fn parse_bits(s: &str) -> Result<List<u32>, String> {
    list(s, |p| match p.trim_start_matches('u') {
        "32" => Ok(32),
        "64" => Ok(64),
        _ => Err(format!("unknown width '{p}' (expected u32 or u64)")),
    })
}

fn parse_loads(s: &str) -> Result<List<f64>, String> {
    list(s, |p| match p.parse::<f64>() {
        Ok(l) if l > 0.0 && l <= defaults::MAX_LOAD => Ok(l),
        _ => Err(format!("load '{p}' must be a number in (0, {}]", defaults::MAX_LOAD)),
    })
}

/// A count: `1048576`, `2^20`, `1M` / `1Mi` (binary: K = 2^10, M = 2^20,
/// G = 2^30); `None` if malformed or beyond 64 bits.
fn parse_count(p: &str) -> Option<u64> {
    if let Some((base, exp)) = p.split_once('^') {
        return base.parse::<u64>().ok()?.checked_pow(exp.parse::<u32>().ok()?);
    }
    let digits = p.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let mult = match &p[digits.len()..] {
        "" => 1u64,
        "K" | "Ki" | "k" => 1 << 10,
        "M" | "Mi" => 1 << 20,
        "G" | "Gi" => 1 << 30,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// A slot count in the forms of [`parse_count`], within the accepted sizes.
fn parse_size(p: &str) -> Result<u64, String> {
    match parse_count(p) {
        Some(v) if (defaults::MIN_SLOTS..=defaults::MAX_SLOTS).contains(&v) => Ok(v),
        Some(_) => Err(format!("size '{p}' must be between {} and 2^{} slots", defaults::MIN_SLOTS, defaults::MAX_SLOTS.trailing_zeros())),
        None => Err(format!("size '{p}' is not a slot count like 1048576, 2^20 or 1M")),
    }
}

fn parse_sizes(s: &str) -> Result<List<u64>, String> {
    list(s, parse_size)
}

/// Keys per timed call: `all` (the whole load) or a count in the forms of
/// a size (`1048576`, `2^20`, `1M`), from 1 key up.
fn parse_batches(s: &str) -> Result<List<Batch>, String> {
    list(s, |p| {
        if p == "all" {
            return Ok(Batch::All);
        }
        match parse_count(p) {
            Some(n @ 1..=defaults::MAX_SLOTS) => Ok(Batch::Keys(n)),
            _ => Err(format!(
                "batch '{p}' is not all or a key count from 1 to 2^{} like 1048576, 2^20 or 1M",
                defaults::MAX_SLOTS.trailing_zeros()
            )),
        }
    })
}

/// The names `--region-build` takes, and that run_info reports.
const REGION_BUILDS: [(&str, RegionBuild); 4] = [
    ("auto", RegionBuild::Auto),
    ("never", RegionBuild::Never),
    ("always", RegionBuild::Always),
    ("two-pass", RegionBuild::TwoPass),
];

fn parse_region_build(s: &str) -> Result<RegionBuild, String> {
    let known = REGION_BUILDS.iter().find(|(name, _)| *name == s).map(|&(_, r)| r);
    known.ok_or_else(|| format!("region build '{s}' is not one of auto, never, always, two-pass"))
}

fn region_build_name(r: RegionBuild) -> &'static str {
    REGION_BUILDS.iter().find(|&&(_, x)| x == r).map_or("?", |&(name, _)| name)
}

/// `all`, or scheme names as `gpuhash::Scheme` parses them (kept as their
/// canonical names, which label the results).
fn parse_schemes(s: &str) -> Result<List<String>, String> {
    if s == "all" {
        return Ok(List(gpuhash::Scheme::ALL.iter().map(|s| s.name()).collect()));
    }
    list(s, |p| p.parse::<gpuhash::Scheme>().map(|s| s.name()))
}

/// Table size over device budget: counts in the forms of a size (`4`,
/// `2^3`), from 1 (every page fits) up.
fn parse_oversub(s: &str) -> Result<List<u32>, String> {
    list(s, |p| match parse_count(p) {
        Some(r @ 1..=defaults::MAX_OVERSUB) => Ok(r as u32),
        _ => Err(format!("oversub '{p}' must be a whole number from 1 to {}", defaults::MAX_OVERSUB)),
    })
}

/// Decimal or `0x` hexadecimal.
fn parse_seed(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("seed '{s}' is not a 64-bit integer"))
}

/// Arguments of `gpuhash bench`. Axes not given come from the preset.
#[derive(Debug, Args)]
#[command(after_help = defaults::help_text())]
pub(crate) struct BenchArgs {
    /// Device: cpu, cuda, cuda:N, wgpu or wgpu:N [default: the best available]
    #[arg(long, value_parser = parse_device)]
    device: Option<Device>,
    /// Operations, comma-separated, or all: insert, insert_if_absent, find_hit,
    /// find_miss50, find_miss, contains, erase, apply_sum, apply_zipf, apply_hot,
    /// mixed, clean_reinsert, rehash_reinsert (these two at load 0.9 whatever
    /// --loads says)
    #[arg(long, value_parser = parse_ops)]
    ops: Option<List<Op>>,
    /// Key widths, e.g. u32,u64
    #[arg(long, value_parser = parse_bits)]
    keys: Option<List<u32>>,
    /// Value widths, e.g. u32,u64
    #[arg(long, value_parser = parse_bits)]
    values: Option<List<u32>>,
    /// Load factors (distinct keys / slots), e.g. 0.5,0.8,0.95,1.05; above
    /// 1.0 only insert ops run and keys a full table rejects are counted
    #[arg(long, value_parser = parse_loads)]
    loads: Option<List<f64>>,
    /// Table sizes in slots, e.g. 2^20,16M,1048576 (K, M, G are binary)
    #[arg(long, value_parser = parse_sizes)]
    sizes: Option<List<u64>>,
    /// Keys per timed call, e.g. all,2^20: all = the whole load in one call
    /// (inserts into an empty table); N = one call of N keys against a table
    /// prefilled to the load (fresh keys for inserts, stored keys or misses
    /// for lookups and erases; mixed runs only with all)
    #[arg(long = "batch", value_parser = parse_batches, value_name = "N")]
    batches: Option<List<Batch>>,
    /// Table schemes, comma-separated, or all
    #[arg(long, value_parser = parse_schemes)]
    scheme: Option<List<String>>,
    /// When the gpuhash tables take the CUDA region build (large batches of
    /// the linear scheme): auto (the library's default), never (a thread per
    /// key, to measure what the region build gains), always (every batch
    /// large enough, at any load), two-pass (always, with the two-pass
    /// partition); changes nothing on other devices and schemes
    #[arg(long, value_parser = parse_region_build, value_name = "WHEN")]
    region_build: Option<RegionBuild>,
    /// Paged tables (CPU and CUDA): table size / device budget, e.g. 1,2,4,8.
    /// A case of ratio R splits its table (of --sizes slots, as unpaged)
    /// into resident * R pages in host memory, --resident of them held in
    /// the device budget at once; 1 = every page fits (the resident
    /// reference). Rows gain the page-ins and write-backs of the timed call
    /// and, with CUDA limits, the share of the bus-bound rate reached; the
    /// peers do not run. Absent: ordinary tables
    #[arg(long, value_parser = parse_oversub, value_name = "R")]
    oversub: Option<List<u32>>,
    /// Pages held in the device budget at once, with --oversub (3: the upload
    /// of one page, kernels on another and the write-back of a third overlap)
    #[arg(long, requires = "oversub", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=defaults::MAX_RESIDENT as i64))]
    resident: Option<u32>,
    /// wgpu: build the tables portable (the browser's kernels: 32-bit
    /// atomics, no subgroups) on an adapter that has more
    #[arg(long)]
    wgpu_portable: bool,
    /// CUDA: time the async device-buffer calls, enqueued on the table's
    /// stream (`find_device_async` and `contains_device_async` return at
    /// once; inserts and erases include `wait()` for their report), instead
    /// of the calls that return their counts; rows name the scheme `NAME+async`
    #[arg(long)]
    cuda_async: bool,
    /// Timed repetitions per measurement (after one warm-up)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
    reps: Option<u64>,
    /// The quick preset (the default)
    #[arg(long)]
    quick: bool,
    /// The full preset: every op, width and load, tables beyond every cache
    #[arg(long, conflicts_with = "quick")]
    full: bool,
    /// Base seed of the key generator (decimal or 0x hex)
    #[arg(long, value_parser = parse_seed)]
    seed: Option<u64>,
    /// Output directory for results.csv, run_info.txt and the plots
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Occurrences of each distinct key in the apply_sum batch
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 16))]
    multiplicity: Option<u64>,
    /// Split of the mixed op, insert:erase:find percent
    #[arg(long, value_parser = Mix::parse, value_name = "I:E:F")]
    mix: Option<Mix>,
    /// wgpu: milliseconds of GPU work (lookups of the case's keys) right
    /// before each timed call, so the driver's clocks are up again after the
    /// host-side preparation (0: none)
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=60_000))]
    warm_ms: Option<u64>,
    /// Skip the CPU peers (std HashMap, hashbrown, dashmap)
    #[arg(long)]
    no_peers: bool,
    /// Skip the hardware limit measurements
    #[arg(long)]
    no_limits: bool,
}

/// Everything that can stop a benchmark run.
#[derive(Debug)]
pub(crate) enum BenchError {
    /// Flags that parse but do not fit together.
    Usage(String),
    /// The requested device cannot be used.
    Unavailable(gpuhash::Error),
    /// A table operation failed.
    Table { target: String, source: gpuhash::Error },
    /// A table returned a wrong result.
    Check(String),
    Io { path: PathBuf, source: std::io::Error },
    Plot(String),
    /// Ctrl-C stopped the grid early; the outputs hold what was measured.
    Interrupted { done: u64, cases: u64 },
}

impl BenchError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        BenchError::Io { path: path.to_path_buf(), source }
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Usage(m) => write!(f, "{m}"),
            BenchError::Unavailable(e) => write!(f, "{e}"),
            BenchError::Table { target, source } => write!(f, "{target}: {source}"),
            BenchError::Check(m) => write!(f, "wrong result: {m}"),
            BenchError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            BenchError::Plot(m) => write!(f, "plotting failed: {m}"),
            BenchError::Interrupted { done, cases } => {
                write!(f, "stopped by Ctrl-C after {done} of {cases} cases; the outputs hold what was measured")
            }
        }
    }
}

impl std::error::Error for BenchError {}

/// The resolved run: grid, limits and output settings.
struct Settings {
    preset: &'static str,
    grid: GridSpec,
    limits: bool,
    limit_reads: u64,
    out: PathBuf,
}

fn resolve(args: &BenchArgs, device: Device) -> Result<Settings, BenchError> {
    let p: Preset = if args.full { defaults::FULL } else { defaults::QUICK };
    let pick = |flag: &Option<List<u32>>, preset: &[u32]| flag.as_ref().map_or(preset.to_vec(), |l| l.0.clone());
    // Schemes this device cannot run are left out with a note rather than
    // failing the whole run.
    let mut schemes = args.scheme.as_ref().map_or(vec![defaults::SCHEME.to_string()], |l| l.0.clone());
    schemes.retain(|name| match name.parse::<gpuhash::Scheme>().map(|s| device.check_scheme(s)) {
        Ok(Err(e)) => {
            eprintln!("skipped: {e}");
            false
        }
        _ => true,
    });
    if schemes.is_empty() {
        return Err(BenchError::Usage("no scheme left to run on this device".into()));
    }
    let oversub = args.oversub.as_ref().map_or(Vec::new(), |l| l.0.clone());
    let resident = args.resident.unwrap_or(defaults::RESIDENT);
    let paged = !oversub.is_empty();
    if paged && !matches!(device, Device::Cpu | Device::Cuda(_)) {
        return Err(BenchError::Usage(format!("--oversub: paged tables run on the CPU and on CUDA, not on {device}")));
    }
    if paged && !args.no_peers {
        eprintln!("skipped: the peers (--oversub: they have no device budget to oversubscribe)");
    }
    let grid = GridSpec {
        device,
        schemes,
        region_build: args.region_build.unwrap_or_default(),
        wgpu_portable: args.wgpu_portable,
        cuda_async: args.cuda_async,
        peers: !args.no_peers && !paged,
        ops: args.ops.as_ref().map_or(p.ops.to_vec(), |l| l.0.clone()),
        key_bits: pick(&args.keys, p.key_bits),
        value_bits: pick(&args.values, p.value_bits),
        loads: args.loads.as_ref().map_or(p.loads.to_vec(), |l| l.0.clone()),
        sizes: args.sizes.as_ref().map_or(p.sizes.to_vec(), |l| l.0.clone()),
        batches: args.batches.as_ref().map_or(p.batches.to_vec(), |l| l.0.clone()),
        reps: args.reps.map_or(p.reps, |r| r as usize),
        warmup: defaults::WARMUP_REPS,
        warm_ms: args.warm_ms.unwrap_or(defaults::WGPU_WARM_MS),
        seed: args.seed.unwrap_or(defaults::SEED),
        multiplicity: args.multiplicity.unwrap_or(defaults::MULTIPLICITY),
        mix: args.mix.unwrap_or(defaults::MIX),
        round_ops: defaults::MIX_ROUND_OPS,
        oversub,
        resident,
    };
    // Pages below the smallest table would be padded up to it, so the
    // table would no longer be the size asked for.
    if let (Some(&r), Some(&smallest)) = (grid.oversub.iter().max(), grid.sizes.iter().min()) {
        let pages = u64::from(resident) * u64::from(r);
        if smallest / pages < defaults::MIN_SLOTS {
            return Err(BenchError::Usage(format!(
                "{pages} pages (--resident {resident} x --oversub {r}) leave fewer than {} slots per page of a {smallest}-slot table",
                defaults::MIN_SLOTS
            )));
        }
    }
    // The key generator has 2^(bits-1) hit keys; more distinct keys would repeat.
    let max_distinct = grid.cases().iter().map(keys::hit_counters).max().unwrap_or(0);
    if grid.key_bits.contains(&32) && max_distinct > keys::domain_half(32) {
        return Err(BenchError::Usage(format!(
            "u32 keys allow at most 2^31 distinct keys, but the largest load x size (plus batch) asks for {max_distinct}"
        )));
    }
    if grid.cases().is_empty() {
        return Err(BenchError::Usage(
            "nothing to run: loads above 1.0 only apply to insert, insert_if_absent and the apply ops".into(),
        ));
    }
    Ok(Settings {
        preset: p.name,
        grid,
        limits: !args.no_limits,
        limit_reads: p.limit_reads,
        out: args.out.clone().unwrap_or_else(|| PathBuf::from(defaults::OUT_DIR)),
    })
}

/// The device to use, with a note when falling back to the CPU.
fn pick_device(asked: Option<Device>) -> Result<Device, BenchError> {
    match asked {
        Some(d) => d.check_available().map(|_| d).map_err(BenchError::Unavailable),
        None => {
            let d = Device::best_available();
            if d == Device::Cpu {
                let why = Device::Cuda(0).check_available().err().map(|e| e.to_string()).unwrap_or_default();
                eprintln!("note: no GPU available ({why}); benchmarking the CPU backend");
            }
            Ok(d)
        }
    }
}

fn settings_lines(s: &Settings) -> Vec<(String, String)> {
    let g = &s.grid;
    let join = |v: Vec<String>| v.join(",");
    vec![
        ("preset".into(), s.preset.into()),
        ("schemes".into(), g.schemes.join(",")),
        ("region_build".into(), region_build_name(g.region_build).into()),
        ("wgpu_portable".into(), g.wgpu_portable.to_string()),
        ("cuda_async".into(), g.cuda_async.to_string()),
        ("peers".into(), g.peers.to_string()),
        ("limits".into(), s.limits.to_string()),
        ("ops".into(), join(g.ops.iter().map(|o| o.name().to_string()).collect())),
        ("key_bits".into(), join(g.key_bits.iter().map(|b| b.to_string()).collect())),
        ("value_bits".into(), join(g.value_bits.iter().map(|b| b.to_string()).collect())),
        ("loads".into(), join(g.loads.iter().map(|l| l.to_string()).collect())),
        ("sizes".into(), join(g.sizes.iter().map(|&n| report::pretty_count(n)).collect())),
        ("batches".into(), join(g.batches.iter().map(|b| b.label()).collect())),
        ("oversub".into(), match g.oversub.is_empty() {
            true => "none (unpaged tables)".into(),
            false => join(g.oversub.iter().map(|r| r.to_string()).collect()),
        }),
        ("resident".into(), g.resident.to_string()),
        ("reps".into(), format!("{} (+{} warm-up)", g.reps, g.warmup)),
        ("warm_ms".into(), format!("{} (wgpu: GPU work before each timed call)", g.warm_ms)),
        ("seed".into(), format!("{:#x}", g.seed)),
        ("multiplicity".into(), g.multiplicity.to_string()),
        ("mix".into(), format!("{}:{}:{}", g.mix.insert, g.mix.erase, g.mix.find)),
        ("mix_round_ops".into(), g.round_ops.to_string()),
        ("limit_reads".into(), s.limit_reads.to_string()),
        ("out".into(), s.out.display().to_string()),
    ]
}

/// The GPU's own limits (CUDA builds only).
fn measure_gpu_limits(
    device: Device,
    plan: &limits::LimitPlan,
    progress: &ProgressBar,
    rec: &mut record::Recorder,
) -> Result<(), BenchError> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => limits::measure_cuda(i, plan, progress, rec),
        _ => {
            let _ = (plan, progress, rec);
            Ok(())
        }
    }
}

/// The limits, then the grid, every row recorded as it is measured.
fn measure(
    settings: &Settings,
    plan: &limits::LimitPlan,
    cpu_limits: bool,
    gpu_limits: bool,
    progress: &ProgressBar,
    rec: &mut record::Recorder,
    stop: &AtomicBool,
) -> Result<(), BenchError> {
    let device = settings.grid.device;
    if cpu_limits {
        limits::measure_cpu(plan, progress, rec)?;
    }
    if gpu_limits {
        match measure_gpu_limits(device, plan, progress, rec) {
            Ok(()) => {}
            // results.csv could not be written: that stops the run.
            Err(e @ BenchError::Io { .. }) => return Err(e),
            // Without them the run is still useful: its rows only lack pct_of_limit.
            Err(e) => progress.suspend(|| eprintln!("warning: {device} limits not all measured: {e}")),
        }
    }
    grid::run(&settings.grid, progress, rec, stop)
}

/// Makes Ctrl-C stop the grid after the current measurement (the summary,
/// run_info.txt and plots are then written from what was measured); a
/// second Ctrl-C ends the process at once, between two rows of results.csv.
/// Returns the flag the grid checks before each case.
fn stop_on_ctrl_c(progress: &ProgressBar) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, bar) = (stop.clone(), progress.clone());
    let installed = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            record::exit_between_rows(130);
        }
        bar.suspend(|| {
            let _ = writeln!(
                std::io::stderr(),
                "Ctrl-C: stopping after the current measurement (again to quit at once; results.csv keeps every row)"
            );
        });
    });
    if let Err(e) = installed {
        // Ctrl-C then ends the run at once; results.csv still holds every row.
        eprintln!("note: no Ctrl-C handler ({e}); Ctrl-C ends the run at once");
    }
    stop
}

fn progress_bar(total: u64) -> ProgressBar {
    let style = ProgressStyle::with_template("{elapsed_precise} [{bar:32}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()).with_style(style)
}

/// Runs `gpuhash bench`.
pub(crate) fn run(args: BenchArgs) -> Result<(), BenchError> {
    let started = Instant::now();
    let device = pick_device(args.device)?;
    let settings = resolve(&args, device)?;
    let grid = &settings.grid;
    std::fs::create_dir_all(&settings.out).map_err(|e| BenchError::io(&settings.out, e))?;

    let cases = grid.cases();
    let mut table_bytes: Vec<u64> = cases.iter().map(|c| c.table_bytes).collect();
    table_bytes.sort_unstable();
    table_bytes.dedup();
    // CPU limits are the ceilings of CPU rows: the CPU backend and the peers.
    let measure_limits = settings.limits && (device == Device::Cpu || grid.peers);
    let limit_plan = limits::LimitPlan {
        table_bytes,
        reads: settings.limit_reads,
        reps: grid.reps,
        warmup: grid.warmup,
        seed: grid.seed,
    };
    let gpu_limits = settings.limits && matches!(device, Device::Cuda(_));
    if settings.limits && matches!(device, Device::Wgpu | Device::WgpuAdapter(_)) {
        eprintln!("note: no limit kernels for {device} yet; its rows get no pct_of_limit");
    }
    let limit_steps = if measure_limits { limit_plan.steps() } else { 0 }
        + if gpu_limits { 1 + limit_plan.table_bytes.len() as u64 } else { 0 };
    eprintln!(
        "gpuhash bench: {} preset on {device}, {} cases, {} reps (+{} warm-up) each",
        settings.preset,
        cases.len(),
        grid.reps,
        grid.warmup
    );

    let progress = progress_bar(cases.len() as u64 + limit_steps);
    let csv = settings.out.join("results.csv");
    let run_info = settings.out.join("run_info.txt");
    let total = cases.len() as u64;
    let mut info = report::RunInfo {
        device: device.to_string(),
        argv: std::env::args().collect(),
        settings: settings_lines(&settings),
        started_unix: report::unix_now(),
        status: format!("running, {total} cases (if the run has ended, it was cut short: results.csv holds what it measured)"),
        elapsed_s: None,
    };
    report::write_run_info(&run_info, &info)?;
    let mut rec = record::Recorder::create(&csv, progress.clone())?;
    let stop = stop_on_ctrl_c(&progress);
    let measured = measure(&settings, &limit_plan, measure_limits, gpu_limits, &progress, &mut rec, &stop);
    progress.finish_and_clear();

    // The summary, run_info.txt and plots are written from whatever was
    // measured, however the measuring ended.
    let done = rec.cases_done();
    let interrupted = measured.is_ok() && done < total && stop.load(Ordering::SeqCst);
    info.status = match &measured {
        Err(e) => format!("failed after {done} of {total} cases: {e}"),
        Ok(()) if interrupted => format!("stopped by Ctrl-C after {done} of {total} cases"),
        Ok(()) => "complete".into(),
    };
    info.elapsed_s = Some(started.elapsed().as_secs_f64());
    // A closed stdout (its reader gone) must not keep the files below from being written.
    let _ = writeln!(std::io::stdout(), "\n{}", report::terminal_table(rec.rows()));
    let written = report::write_run_info(&run_info, &info).and_then(|()| plot::write_plots(&settings.out, rec.rows()));
    if let Ok(plots) = &written {
        let _ = writeln!(
            std::io::stderr(),
            "wrote {} ({} rows), {} and {} plots in {} ({:.0} s)",
            csv.display(),
            rec.rows().len(),
            run_info.display(),
            plots.len(),
            settings.out.display(),
            started.elapsed().as_secs_f64()
        );
    }
    measured?;
    written?;
    if interrupted {
        return Err(BenchError::Interrupted { done, cases: total });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_every_form() {
        assert_eq!(parse_size("2^20"), Ok(1 << 20));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("4Ki"), Ok(4096));
        assert!(parse_size("1X").is_err());
        assert!(parse_size("2^99").is_err());
        assert!(parse_size("8").is_err());
    }

    #[test]
    fn lists_and_loads() {
        assert_eq!(parse_bits("u32,64"), Ok(List(vec![32, 64])));
        assert!(parse_bits("u16").is_err());
        assert!(parse_loads("0.5,0").is_err());
        assert_eq!(parse_ops("find_hit,erase"), Ok(List(vec![Op::FindHit, Op::Erase])));
        assert!(parse_ops("finds").is_err());
        assert_eq!(Mix::parse("20:10:70"), Ok(defaults::MIX));
        assert!(Mix::parse("20:10:60").is_err());
        assert_eq!(parse_seed("0x10"), Ok(16));
    }

    /// `bench`'s arguments, parsed as the command line would be.
    fn bench_args(argv: &[&str]) -> BenchArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: BenchArgs,
        }
        <Cli as clap::Parser>::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn oversub_parses_and_pages_the_grid() {
        assert_eq!(parse_oversub("1,2,4,8"), Ok(List(vec![1, 2, 4, 8])));
        assert_eq!(parse_oversub("2^3, 3"), Ok(List(vec![8, 3])));
        for bad in ["0", "-1", "1.5", "x", "", "2^20"] {
            assert!(parse_oversub(bad).is_err(), "{bad}");
        }
        // Absent: unpaged tables, the peers run.
        let plain = resolve(&bench_args(&["bench", "--ops", "find_hit"]), Device::Cpu).unwrap();
        assert!(plain.grid.oversub.is_empty() && plain.grid.peers);
        assert!(plain.grid.cases().iter().all(|c| c.paging.is_none()));
        let args = bench_args(&["bench", "--ops", "find_hit", "--keys", "u64", "--sizes", "2^16", "--loads", "0.5", "--oversub", "1,4"]);
        let s = resolve(&args, Device::Cpu).unwrap();
        assert!(!s.grid.peers, "no budget for the peers to oversubscribe");
        let cases = s.grid.cases();
        let pages: Vec<u32> = cases.iter().map(|c| c.paging.unwrap().pages()).collect();
        assert_eq!(pages, [3, 12], "resident 3 by default");
        for c in &cases {
            // The table is the size asked for, whatever the budget; its
            // pages round up to whole 32-byte buckets.
            assert_eq!((c.slots, c.table_bytes), (1 << 16, 1 << 20));
            let pages = u64::from(c.paging.unwrap().pages());
            let page = c.page_bytes().unwrap();
            assert!(page % 32 == 0 && page * pages >= c.table_bytes && page * pages < c.table_bytes + 32 * pages);
        }
        let s = resolve(&bench_args(&["bench", "--oversub", "2", "--resident", "5"]), Device::Cpu).unwrap();
        assert!(s.grid.cases().iter().all(|c| c.paging.map(|p| p.pages()) == Some(10)));
        // --resident alone, out of range, or pages too small for the table.
        let cli = |argv: &[&str]| {
            #[derive(clap::Parser, Debug)]
            struct Cli {
                #[command(flatten)]
                args: BenchArgs,
            }
            <Cli as clap::Parser>::try_parse_from(argv).map(|c| c.args)
        };
        assert!(cli(&["bench", "--resident", "2"]).is_err());
        assert!(cli(&["bench", "--oversub", "2", "--resident", "0"]).is_err());
        let tiny = bench_args(&["bench", "--sizes", "1K", "--oversub", "64", "--resident", "3"]);
        assert!(matches!(resolve(&tiny, Device::Cpu), Err(BenchError::Usage(_))));
    }

    #[test]
    fn batches_parse_and_skip_mixed() {
        assert_eq!(parse_batches("all,2^20,1000"), Ok(List(vec![Batch::All, Batch::Keys(1 << 20), Batch::Keys(1000)])));
        assert_eq!(parse_batches("1"), Ok(List(vec![Batch::Keys(1)])));
        assert!(parse_batches("0").is_err());
        assert!(parse_batches("some").is_err());
        assert_eq!(parse_batches("2^2"), Ok(List(vec![Batch::Keys(4)])));
        let args = bench_args(&["bench", "--batch", "all,2^10", "--ops", "insert,mixed"]);
        let s = resolve(&args, Device::Cpu).unwrap();
        let cases = s.grid.cases();
        let batched: Vec<Op> = cases.iter().filter(|c| c.batch == Batch::Keys(1 << 10)).map(|c| c.op).collect();
        assert!(!batched.is_empty() && batched.iter().all(|&op| op == Op::Insert));
        assert!(cases.iter().any(|c| c.batch == Batch::All && c.op == Op::Mixed));
        assert_eq!(s.grid.batches, vec![Batch::All, Batch::Keys(1 << 10)]);
        // The default is the whole load; the full preset adds 2^20.
        let quick = resolve(&bench_args(&["bench"]), Device::Cpu).unwrap();
        assert_eq!(quick.grid.batches, vec![Batch::All]);
        let full = resolve(&bench_args(&["bench", "--full"]), Device::Cpu).unwrap();
        assert!(full.grid.batches.contains(&Batch::Keys(1 << 20)));
    }

    #[test]
    fn region_build_flag() {
        for (name, r) in REGION_BUILDS {
            assert_eq!(parse_region_build(name), Ok(r));
            assert_eq!(region_build_name(r), name);
        }
        assert!(parse_region_build("on").is_err());
        let s = resolve(&bench_args(&["bench", "--region-build", "never"]), Device::Cpu).unwrap();
        assert_eq!(s.grid.region_build, RegionBuild::Never);
        let s = resolve(&bench_args(&["bench"]), Device::Cpu).unwrap();
        assert_eq!(s.grid.region_build, RegionBuild::Auto, "the library's default");
        assert!(settings_lines(&s).contains(&("region_build".into(), "auto".into())));
    }
}
