//! Results: the row type, the terminal table, results.csv and run_info.txt.

use std::fmt::Write as _;
use std::path::Path;

use super::bus::{bus_bound, Traffic};
use super::defaults;
use super::grid::{Case, Sample};
use super::BenchError;

/// One measurement (a table or peer on one case, or one limit).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    pub device: String,
    pub scheme: String,
    pub op: String,
    /// 0 for limits.
    pub key_bits: u32,
    pub value_bits: u32,
    /// None for limits.
    pub load: Option<f64>,
    /// Operations in the timed call (bytes copied for `limit_copy`).
    pub n: u64,
    pub reps: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Billions of operations per second at the median time.
    pub gops: Option<f64>,
    /// 100 * gops / gops of the random-line limit over a table-sized buffer.
    pub pct_of_limit: Option<f64>,
    pub rejected: Option<u64>,
    /// Mean 32-byte buckets probed per stored key (`Stats::mean_probe_buckets`).
    pub probes: Option<f64>,
    /// GB/s moved: probes * 32 bytes per op for tables, measured bytes for limits.
    pub gbytes_s: Option<f64>,
    /// Table slots (0 for limits).
    pub slots: u64,
    /// Bytes of the gpuhash table, or of the limit's buffer.
    pub table_bytes: u64,
    /// Keys per timed call against a prefilled table; `None` for the whole
    /// load in one call (and for limits).
    pub batch: Option<u64>,
    /// Paged tables only (`None` otherwise), from here on.
    /// Table size over device budget.
    pub oversub: Option<u32>,
    /// Pages held in the budget at once.
    pub resident: Option<u32>,
    /// Pages brought in and dirty pages written back by the timed call
    /// (medians over the repetitions).
    pub page_ins: Option<u64>,
    pub write_backs: Option<u64>,
    /// Bytes the timed call must move host to device and back (pages and
    /// the call's inputs and outputs; see `bus::Traffic`).
    pub bus_up_bytes: Option<u64>,
    pub bus_down_bytes: Option<u64>,
    /// Least time those bytes take at the pinned copy rates of the same run
    /// (CUDA only), and 100 * that over `median_ms`.
    pub bus_ms: Option<f64>,
    pub pct_of_bus: Option<f64>,
}

/// What a limit row measured.
pub(crate) struct LimitSpec<'a> {
    pub device: &'a str,
    pub op: &'a str,
    /// Buffer kind: `beyond_llc`, `in_cache` or `table` (table-sized).
    pub scheme: &'a str,
    /// Reads made, or bytes copied.
    pub n: u64,
    pub buffer_bytes: u64,
    /// Things done per repetition (for `gops`), if countable.
    pub ops: Option<u64>,
    /// Bytes read plus written per repetition (for `gbytes_s`).
    pub bytes_moved: Option<f64>,
    pub reps: usize,
}

/// The limit ops that serve as the ceiling of table results: one random
/// line (CPU) or 32-byte sector (GPU) read per operation.
pub(crate) const CEILING_OPS: &[&str] = &["limit_random_line", "limit_random_sector"];

/// Median, minimum and maximum of some milliseconds.
fn spread(ms: &[f64]) -> (f64, f64, f64) {
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (median, v[0], v[n - 1])
}

/// The upper median of some counts (the lower half wins no ties).
fn median_of(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// The traffic of the repetitions of a paged case: their median page
/// counts (the page and input sizes are the same in every repetition).
fn median_traffic(samples: &[Sample]) -> Option<Traffic> {
    let all: Option<Vec<Traffic>> = samples.iter().map(|s| s.traffic).collect();
    let all = all?;
    Some(Traffic {
        page_ins: median_of(all.iter().map(|t| t.page_ins).collect())?,
        write_backs: median_of(all.iter().map(|t| t.write_backs).collect())?,
        ..all[0]
    })
}

/// Per second, in billions, of `count` things done in `ms` milliseconds.
fn giga_per_s(count: f64, ms: f64) -> f64 {
    count / (ms * 1e6)
}

impl Row {
    /// A table or peer measurement.
    pub(crate) fn measurement(
        device: &str,
        scheme: &str,
        case: &Case,
        n: u64,
        samples: &[Sample],
        probes: Option<f64>,
    ) -> Row {
        let ms: Vec<f64> = samples.iter().map(|s| s.ms).collect();
        let (median_ms, min_ms, max_ms) = spread(&ms);
        let traffic = median_traffic(samples);
        Row {
            device: device.into(),
            scheme: scheme.into(),
            op: case.op.name().into(),
            key_bits: case.key_bits,
            value_bits: case.value_bits,
            load: Some(case.load),
            n,
            reps: samples.len(),
            median_ms,
            min_ms,
            max_ms,
            gops: Some(giga_per_s(n as f64, median_ms)),
            pct_of_limit: None,
            rejected: median_of(samples.iter().map(|s| s.rejected).collect()),
            probes,
            gbytes_s: probes.map(|p| giga_per_s(n as f64 * p * defaults::BUCKET_BYTES, median_ms)),
            slots: case.slots,
            table_bytes: case.table_bytes,
            batch: case.batch.keys(),
            oversub: case.paging.map(|p| p.oversub),
            resident: case.paging.map(|p| p.resident),
            page_ins: traffic.map(|t| t.page_ins),
            write_backs: traffic.map(|t| t.write_backs),
            bus_up_bytes: traffic.map(|t| t.up_bytes()),
            bus_down_bytes: traffic.map(|t| t.down_bytes()),
            bus_ms: None,
            pct_of_bus: None,
        }
    }

    /// A limit measurement.
    pub(crate) fn limit(spec: LimitSpec<'_>, ms: &[f64]) -> Row {
        let (median_ms, min_ms, max_ms) = spread(ms);
        Row {
            device: spec.device.into(),
            scheme: spec.scheme.into(),
            op: spec.op.into(),
            key_bits: 0,
            value_bits: 0,
            load: None,
            n: spec.n,
            reps: spec.reps,
            median_ms,
            min_ms,
            max_ms,
            gops: spec.ops.map(|o| giga_per_s(o as f64, median_ms)),
            pct_of_limit: None,
            rejected: None,
            probes: None,
            gbytes_s: spec.bytes_moved.map(|b| giga_per_s(b, median_ms)),
            slots: 0,
            table_bytes: spec.buffer_bytes,
            batch: None,
            oversub: None,
            resident: None,
            page_ins: None,
            write_backs: None,
            bus_up_bytes: None,
            bus_down_bytes: None,
            bus_ms: None,
            pct_of_bus: None,
        }
    }

    pub(crate) fn is_limit(&self) -> bool {
        self.op.starts_with("limit_")
    }
}

/// Fills `pct_of_limit` of every table/peer row from the random-read limit
/// over a buffer of the same size, on the same device, and `bus_ms` and
/// `pct_of_bus` of paged rows from the pinned copy rates of that device.
/// Rows on devices without measured limits keep them empty.
pub(crate) fn attach_limits(rows: &mut [Row], limits: &[Row]) {
    let pinned = |device: &str, op: &str| {
        let l = limits.iter().find(|l| l.op == op && l.scheme == "pinned" && l.device == device);
        l.and_then(|l| l.gbytes_s)
    };
    for r in rows.iter_mut().filter(|r| !r.is_limit()) {
        let rates = (pinned(&r.device, "limit_copy_h2d"), pinned(&r.device, "limit_copy_d2h"));
        if let (Some(up), Some(down), (Some(h2d), Some(d2h))) = (r.bus_up_bytes, r.bus_down_bytes, rates) {
            if let Some(b) = bus_bound(up, down, h2d, d2h, r.median_ms) {
                r.bus_ms = Some(b.ms);
                r.pct_of_bus = Some(100.0 * b.fraction);
            }
        }
        let ceiling = limits.iter().find(|l| {
            CEILING_OPS.contains(&l.op.as_str())
                && l.scheme == "table"
                && l.device == r.device
                && l.table_bytes == r.table_bytes
        });
        if let (Some(l), Some(g)) = (ceiling, r.gops) {
            r.pct_of_limit = l.gops.map(|lg| 100.0 * g / lg);
        }
    }
}

pub(crate) const CSV_HEADER: &str = "device,scheme,op,key_bits,value_bits,load,n,reps,median_ms,min_ms,max_ms,gops,\
                                     pct_of_limit,rejected,probes,gbytes_s,slots,table_bytes,batch,\
                                     oversub,resident,page_ins,write_backs,bus_up_bytes,bus_down_bytes,bus_ms,pct_of_bus";

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_default()
}

/// One CSV line (no field contains a comma or a quote).
pub(crate) fn csv_line(r: &Row) -> String {
    [
        r.device.clone(),
        r.scheme.clone(),
        r.op.clone(),
        r.key_bits.to_string(),
        r.value_bits.to_string(),
        opt(r.load, |l| l.to_string()),
        r.n.to_string(),
        r.reps.to_string(),
        format!("{:.6}", r.median_ms),
        format!("{:.6}", r.min_ms),
        format!("{:.6}", r.max_ms),
        opt(r.gops, |g| format!("{g:.6}")),
        opt(r.pct_of_limit, |p| format!("{p:.3}")),
        opt(r.rejected, |x| x.to_string()),
        opt(r.probes, |p| format!("{p:.4}")),
        opt(r.gbytes_s, |g| format!("{g:.4}")),
        r.slots.to_string(),
        r.table_bytes.to_string(),
        opt(r.batch, |b| b.to_string()),
        opt(r.oversub, |o| o.to_string()),
        opt(r.resident, |o| o.to_string()),
        opt(r.page_ins, |x| x.to_string()),
        opt(r.write_backs, |x| x.to_string()),
        opt(r.bus_up_bytes, |x| x.to_string()),
        opt(r.bus_down_bytes, |x| x.to_string()),
        opt(r.bus_ms, |m| format!("{m:.6}")),
        opt(r.pct_of_bus, |p| format!("{p:.3}")),
    ]
    .join(",")
}

/// The whole CSV of `rows` at once (the run appends it row by row, see
/// `record::CsvAppender`).
#[cfg(test)]
pub(crate) fn csv_text(rows: &[Row]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in rows {
        s.push_str(&csv_line(r));
        s.push('\n');
    }
    s
}

/// `2^20` for powers of two, the plain number otherwise.
pub(crate) fn pretty_count(n: u64) -> String {
    if n.is_power_of_two() && n >= 1024 {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

/// Bytes as KiB/MiB/GiB.
pub(crate) fn pretty_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.0} KiB", b as f64 / 1024.0),
    }
}

/// One line of cells padded to `width`: the first three (labels)
/// left-aligned, numbers right-aligned; no trailing blanks.
fn padded(row: &[String], width: &[usize]) -> String {
    let parts: Vec<String> = row
        .iter()
        .zip(width)
        .enumerate()
        .map(|(i, (c, w))| if i < 3 { format!("{c:<w$}") } else { format!("{c:>w$}") })
        .collect();
    parts.join("  ").trim_end().to_string()
}

/// Columns padded to their widest cell; numbers right-aligned.
fn aligned(header: &[&str], cells: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", padded(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>(), &width));
    for row in cells {
        let _ = writeln!(out, "{}", padded(row, &width));
    }
    out
}

const LIMITS_TITLE: &str =
    "Limits (gops = G random reads/s: 64-byte lines on a CPU, 32-byte sectors on a GPU; GB/s = bytes moved)";
const LIMIT_HEADER: [&str; 7] = ["device", "buffer", "op", "bytes", "median_ms", "gops", "GB/s"];
const RESULT_HEADER: [&str; 15] = [
    "device", "scheme", "op", "key", "value", "load", "batch", "slots", "n", "median_ms", "gops", "%limit", "rejected",
    "probes", "GB/s",
];
/// Widths of the columns printed row by row, before the widest cell is
/// known: wide enough for the usual cells (a wider one shifts its line).
const LIVE_LIMIT_WIDTH: [usize; 7] = [6, 10, 19, 9, 9, 7, 7];
const LIVE_RESULT_WIDTH: [usize; 15] = [6, 10, 16, 3, 5, 4, 5, 5, 10, 9, 7, 6, 8, 6, 6];
/// Columns added after those when the run has paged tables (`--oversub`).
const PAGED_HEADER: [&str; 4] = ["oversub", "page_ins", "write_backs", "%bus"];
const LIVE_PAGED_WIDTH: [usize; 4] = [7, 8, 11, 6];

/// The result columns, with the paged ones when `paged`.
fn result_header(paged: bool) -> Vec<&'static str> {
    let extra: &[&str] = if paged { &PAGED_HEADER } else { &[] };
    RESULT_HEADER.iter().chain(extra).copied().collect()
}

fn live_result_width(paged: bool) -> Vec<usize> {
    let extra: &[usize] = if paged { &LIVE_PAGED_WIDTH } else { &[] };
    LIVE_RESULT_WIDTH.iter().chain(extra).copied().collect()
}

fn limit_cells(r: &Row) -> Vec<String> {
    vec![
        r.device.clone(),
        r.scheme.clone(),
        r.op.clone(),
        pretty_bytes(r.table_bytes),
        format!("{:.3}", r.median_ms),
        opt(r.gops, |g| format!("{g:.3}")),
        opt(r.gbytes_s, |g| format!("{g:.1}")),
    ]
}

fn result_cells(r: &Row, paged: bool) -> Vec<String> {
    let mut cells = vec![
        r.device.clone(),
        r.scheme.clone(),
        r.op.clone(),
        format!("u{}", r.key_bits),
        format!("u{}", r.value_bits),
        opt(r.load, |l| format!("{l:.2}")),
        r.batch.map_or_else(|| "all".to_string(), pretty_count),
        pretty_count(r.slots),
        r.n.to_string(),
        format!("{:.3}", r.median_ms),
        opt(r.gops, |g| format!("{g:.4}")),
        opt(r.pct_of_limit, |p| format!("{p:.1}%")),
        opt(r.rejected, |x| x.to_string()),
        opt(r.probes, |p| format!("{p:.3}")),
        opt(r.gbytes_s, |g| format!("{g:.2}")),
    ];
    if paged {
        cells.extend([
            opt(r.oversub, |o| format!("{o}x")),
            opt(r.page_ins, |x| x.to_string()),
            opt(r.write_backs, |x| x.to_string()),
            opt(r.pct_of_bus, |p| format!("{p:.1}%")),
        ]);
    }
    cells
}

/// The terminal table: limits first, then every measurement.
pub(crate) fn terminal_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let limits: Vec<Vec<String>> = rows.iter().filter(|r| r.is_limit()).map(limit_cells).collect();
    if !limits.is_empty() {
        out.push_str(LIMITS_TITLE);
        out.push('\n');
        out.push_str(&aligned(&LIMIT_HEADER, &limits));
        out.push('\n');
    }
    let paged = rows.iter().any(|r| r.oversub.is_some());
    let results: Vec<Vec<String>> = rows.iter().filter(|r| !r.is_limit()).map(|r| result_cells(r, paged)).collect();
    out.push_str(&aligned(&result_header(paged), &results));
    out
}

/// Lines of a table printed one row at a time, in the columns of
/// [`terminal_table`]: a header before the first limit and before the first
/// result, then one line per row.
#[derive(Default)]
pub(crate) struct LiveTable {
    limits_shown: bool,
    /// Once the first result is shown: whether the paged columns are (a run
    /// is paged in every case or in none).
    results_paged: Option<bool>,
}

impl LiveTable {
    /// The line(s) to print for `r`: its header first if it is the first of
    /// its kind.
    pub(crate) fn lines(&mut self, r: &Row) -> String {
        let fit = |header: &[&str], min: &[usize]| -> Vec<usize> {
            header.iter().zip(min).map(|(h, &m)| h.len().max(m)).collect()
        };
        let head = |header: &[&str], width: &[usize]| padded(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>(), width);
        let mut out = String::new();
        if r.is_limit() {
            let width = fit(&LIMIT_HEADER, &LIVE_LIMIT_WIDTH);
            if !std::mem::replace(&mut self.limits_shown, true) {
                let _ = writeln!(out, "{LIMITS_TITLE}\n{}", head(&LIMIT_HEADER, &width));
            }
            out.push_str(&padded(&limit_cells(r), &width));
        } else {
            let first = self.results_paged.is_none();
            let paged = *self.results_paged.get_or_insert(r.oversub.is_some());
            let header = result_header(paged);
            let width = fit(&header, &live_result_width(paged));
            if first {
                if self.limits_shown {
                    out.push('\n');
                }
                let _ = writeln!(out, "{}", head(&header, &width));
            }
            out.push_str(&padded(&result_cells(r, paged), &width));
        }
        out
    }
}

/// Everything about the machine and the build that the figures depend on.
/// Written when a run starts and again when it ends, so that a run cut short
/// still says what it was.
pub(crate) struct RunInfo {
    pub device: String,
    pub argv: Vec<String>,
    pub settings: Vec<(String, String)>,
    pub started_unix: u64,
    /// `running ...` until the run ends, then how it ended.
    pub status: String,
    /// `None` while the run goes on.
    pub elapsed_s: Option<f64>,
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn first_line_of(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd).args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    out.status.success().then(|| s.lines().next().unwrap_or("").trim().to_string()).filter(|s| !s.is_empty())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

fn mem_total() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().next().map(|l| l.trim_start_matches("MemTotal:").trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

/// The commit of the checkout the run starts in (its working directory),
/// which need not be the binary's own (`built_from`).
fn git_commit() -> String {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    super::commit::describe(git).unwrap_or_else(|| "unknown (not a git checkout)".into())
}

fn driver(device: &str) -> String {
    if device.starts_with("cuda") {
        first_line_of("nvidia-smi", &["--query-gpu=driver_version,name", "--format=csv,noheader"])
            .unwrap_or_else(|| "unknown (nvidia-smi not found)".into())
    } else if device.starts_with("wgpu") {
        wgpu_adapter(device)
    } else {
        "none (host CPU)".into()
    }
}

/// The wgpu adapter a run used: its name, driver and graphics backend.
#[cfg(feature = "wgpu")]
fn wgpu_adapter(device: &str) -> String {
    match device.parse::<gpuhash::Device>().map(gpuhash::backend::wgpu::adapter_info) {
        Ok(Ok(a)) => format!("{} ({:?}, {} {})", a.name, a.backend, a.driver, a.driver_info),
        Ok(Err(e)) => format!("unknown ({e})"),
        Err(e) => format!("unknown ({e})"),
    }
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_adapter(_device: &str) -> String {
    "unknown (built without the wgpu feature)".into()
}

pub(crate) fn write_run_info(path: &Path, info: &RunInfo) -> Result<(), BenchError> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let llc = super::limits::llc_bytes().map(pretty_bytes).unwrap_or_else(|| "unknown".into());
    let mut s = String::new();
    let mut kv = |k: &str, v: &str| {
        let _ = writeln!(s, "{k:<16} {v}");
    };
    kv("command", &info.argv.join(" "));
    kv("status", &info.status.replace('\n', " "));
    kv("started_unix", &info.started_unix.to_string());
    if let Some(elapsed) = info.elapsed_s {
        kv("finished_unix", &unix_now().to_string());
        kv("elapsed_s", &format!("{elapsed:.1}"));
    }
    kv("device", &info.device);
    kv("driver", &driver(&info.device));
    #[cfg(all(feature = "wgpu", not(target_arch = "wasm32")))]
    if let Some(heaps) = super::vkmem::report() {
        kv("vulkan_heaps", &heaps);
    }
    kv("cpu_model", &cpu_model());
    kv("cpu_cores", &cores.to_string());
    kv("rayon_threads", &rayon::current_num_threads().to_string());
    kv("llc", &llc);
    kv("memory", &mem_total());
    kv("os", &first_line_of("uname", &["-srm"]).unwrap_or_else(|| "unknown".into()));
    kv("rustc", env!("GPUHASH_BENCH_RUSTC"));
    kv("crates", &format!("gpuhash {} (cli {}); {}", env!("CARGO_PKG_VERSION"), env!("CARGO_PKG_VERSION"), env!("GPUHASH_BENCH_DEPS")));
    kv("profile", if cfg!(debug_assertions) { "debug (figures are not meaningful)" } else { "release" });
    kv("git_commit", &git_commit());
    kv("built_from", env!("GPUHASH_BENCH_BUILT_FROM"));
    for (k, v) in &info.settings {
        kv(k, v);
    }
    std::fs::write(path, s).map_err(|e| BenchError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_the_middle() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
    }

    #[test]
    fn csv_has_the_header_columns() {
        let spec = LimitSpec {
            device: "cpu",
            op: "limit_copy",
            scheme: "beyond_llc",
            n: 10,
            buffer_bytes: 10,
            ops: None,
            bytes_moved: Some(20.0),
            reps: 1,
        };
        let r = Row::limit(spec, &[1.0]);
        assert_eq!(csv_line(&r).split(',').count(), CSV_HEADER.split(',').count());
    }

    /// A paged find_hit case of 2^16 u32 -> u32 slots at 4x the budget.
    fn paged_case() -> Case {
        use super::super::grid::{Batch, CasePaging, Op};
        Case {
            op: Op::FindHit,
            key_bits: 32,
            value_bits: 32,
            slots: 1 << 16,
            table_bytes: 1 << 19,
            load: 0.5,
            distinct: 1 << 15,
            batch: Batch::All,
            multiplicity: 1,
            mix: defaults::MIX,
            round_ops: 1 << 16,
            paging: Some(CasePaging { oversub: 4, resident: 3 }),
        }
    }

    fn pinned(device: &str, op: &str, gbytes_s: f64) -> Row {
        let spec = LimitSpec {
            device,
            op,
            scheme: "pinned",
            n: 1 << 30,
            buffer_bytes: 1 << 30,
            ops: None,
            bytes_moved: Some(gbytes_s * 1e6),
            reps: 1,
        };
        Row::limit(spec, &[1.0])
    }

    #[test]
    fn paged_rows_get_their_traffic_and_bus_bound() {
        let case = paged_case();
        let page = case.page_bytes().unwrap();
        let traffic = |page_ins| Traffic { page_ins, write_backs: 0, page_bytes: page, io_up: 1 << 17, io_down: 5 << 15 };
        let samples: Vec<Sample> = [(2.0, 9), (1.0, 12), (3.0, 12)]
            .into_iter()
            .map(|(ms, ins)| Sample { ms, rejected: 0, traffic: Some(traffic(ins)) })
            .collect();
        let mut rows = [
            Row::measurement("cuda:0", "linear", &case, 1 << 15, &samples, None),
            Row::measurement("cpu", "linear", &case, 1 << 15, &samples, None),
        ];
        assert_eq!((rows[0].oversub, rows[0].resident), (Some(4), Some(3)));
        assert_eq!((rows[0].page_ins, rows[0].write_backs), (Some(12), Some(0)));
        assert_eq!(rows[0].bus_up_bytes, Some(12 * page + (1 << 17)));
        assert_eq!(rows[0].bus_down_bytes, Some(5 << 15));
        // Pinned copies of 20 GB/s up and 10 down, measured on cuda:0 only.
        let limits = [pinned("cuda:0", "limit_copy_h2d", 20.0), pinned("cuda:0", "limit_copy_d2h", 10.0)];
        attach_limits(&mut rows, &limits);
        let want = (12 * page + (1 << 17)) as f64 / 20.0 / 1e6;
        let got = rows[0].bus_ms.unwrap();
        assert!((got - want).abs() < 1e-12, "{got} {want}");
        assert!((rows[0].pct_of_bus.unwrap() - 100.0 * want / 2.0).abs() < 1e-9);
        assert_eq!((rows[1].bus_ms, rows[1].pct_of_bus), (None, None), "no pinned rates on the CPU");
    }

    #[test]
    fn paged_columns_come_last() {
        // Readers of the columns before `--oversub` find them where they were.
        let old = "device,scheme,op,key_bits,value_bits,load,n,reps,median_ms,min_ms,max_ms,gops,\
                   pct_of_limit,rejected,probes,gbytes_s,slots,table_bytes,batch";
        assert!(CSV_HEADER.starts_with(&format!("{old},oversub,")), "{CSV_HEADER}");
        let case = paged_case();
        let sample = Sample { ms: 1.0, rejected: 0, traffic: Some(Traffic { page_ins: 5, ..Default::default() }) };
        let paged = Row::measurement("cpu", "linear", &case, 10, &[sample], None);
        let fields: Vec<String> = csv_line(&paged).split(',').map(String::from).collect();
        let header: Vec<&str> = CSV_HEADER.split(',').collect();
        assert_eq!(fields.len(), header.len());
        let col = |name: &str| &fields[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!((col("oversub").as_str(), col("resident").as_str(), col("page_ins").as_str()), ("4", "3", "5"));
        assert_eq!(col("pct_of_bus"), "");
        // Unpaged rows leave them empty, and the terminal shows them only
        // for paged runs.
        let plain = Row { oversub: None, resident: None, page_ins: None, write_backs: None, ..paged.clone() };
        assert!(!terminal_table(std::slice::from_ref(&plain)).contains("oversub"));
        let table = terminal_table(std::slice::from_ref(&paged));
        assert!(table.lines().next().unwrap().ends_with("oversub  page_ins  write_backs  %bus"), "{table}");
        let mut live = LiveTable::default();
        assert!(live.lines(&paged).lines().next().unwrap().contains("page_ins"));
        assert!(live.lines(&paged).trim_end().ends_with("4x         5            0"));
    }
}
