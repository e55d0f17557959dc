//! Rows as they are measured: each is appended to results.csv (header
//! first, flushed after every row), printed as one terminal line, and kept
//! for the summary table and the plots written at the end. A run cut short
//! (a time limit, Ctrl-C, an error) leaves a valid results.csv with every
//! row measured before.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indicatif::ProgressBar;

use super::report::{attach_limits, csv_line, LiveTable, Row, CSV_HEADER};
use super::BenchError;

/// Held while a line goes to results.csv, so that [`exit_between_rows`]
/// never ends the process half-way through one.
static WRITING: Mutex<()> = Mutex::new(());

/// Ends the process with `code`, but not in the middle of a CSV line.
pub(crate) fn exit_between_rows(code: i32) -> ! {
    let _held = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    std::process::exit(code)
}

/// results.csv, written a line at a time: the header when created, then one
/// line per [`append`](CsvAppender::append), each in a single write on the
/// unbuffered file, so the file always ends with a whole row and needs no
/// closing call.
pub(crate) struct CsvAppender {
    file: File,
    path: PathBuf,
}

impl CsvAppender {
    /// Creates (or empties) `path` and writes the header.
    pub(crate) fn create(path: &Path) -> Result<Self, BenchError> {
        let file = File::create(path).map_err(|e| BenchError::io(path, e))?;
        let mut csv = CsvAppender { file, path: path.to_path_buf() };
        csv.write_line(CSV_HEADER)?;
        Ok(csv)
    }

    /// Appends one row.
    pub(crate) fn append(&mut self, row: &Row) -> Result<(), BenchError> {
        self.write_line(&csv_line(row))
    }

    fn write_line(&mut self, line: &str) -> Result<(), BenchError> {
        let _held = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        let text = format!("{line}\n");
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|e| BenchError::io(&self.path, e))
    }
}

/// Takes every row as it is measured: limits first, then results, whose
/// `pct_of_limit` comes from the limits recorded before them.
pub(crate) struct Recorder {
    csv: CsvAppender,
    progress: ProgressBar,
    /// Where the terminal lines go: stdout (no output in tests).
    out: Box<dyn Write>,
    live: LiveTable,
    rows: Vec<Row>,
    cases_done: u64,
}

impl Recorder {
    /// Starts results.csv at `path`; lines print above `progress`.
    pub(crate) fn create(path: &Path, progress: ProgressBar) -> Result<Self, BenchError> {
        Self::with_output(path, progress, Box::new(std::io::stdout()))
    }

    fn with_output(path: &Path, progress: ProgressBar, out: Box<dyn Write>) -> Result<Self, BenchError> {
        Ok(Recorder { csv: CsvAppender::create(path)?, progress, out, live: LiveTable::default(), rows: Vec::new(), cases_done: 0 })
    }

    /// Records one measured row: its `pct_of_limit` (for a table or peer
    /// row), its CSV line, its terminal line.
    pub(crate) fn record(&mut self, mut row: Row) -> Result<(), BenchError> {
        attach_limits(std::slice::from_mut(&mut row), &self.rows);
        self.csv.append(&row)?;
        let text = self.live.lines(&row);
        let out = &mut self.out;
        // A closed stdout (its reader gone) must not stop the measurements.
        self.progress.suspend(|| {
            let _ = writeln!(out, "{text}").and_then(|()| out.flush());
        });
        self.rows.push(row);
        Ok(())
    }

    /// Counts one grid case as fully recorded.
    pub(crate) fn case_done(&mut self) {
        self.cases_done += 1;
    }

    pub(crate) fn cases_done(&self) -> u64 {
        self.cases_done
    }

    /// Every row recorded so far, in order.
    pub(crate) fn rows(&self) -> &[Row] {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::super::report::{csv_text, LimitSpec};
    use super::*;

    fn limit(op: &str, table_bytes: u64, gops: f64) -> Row {
        let spec = LimitSpec {
            device: "cpu",
            op,
            scheme: "table",
            n: 1000,
            buffer_bytes: table_bytes,
            ops: Some(1000),
            bytes_moved: Some(64_000.0),
            reps: 3,
        };
        let mut r = Row::limit(spec, &[1.0, 2.0, 3.0]);
        r.gops = Some(gops);
        r
    }

    fn result(scheme: &str, table_bytes: u64, gops: f64) -> Row {
        Row {
            scheme: scheme.into(),
            op: "find_hit".into(),
            key_bits: 32,
            value_bits: 32,
            load: Some(0.5),
            rejected: Some(0),
            probes: Some(1.25),
            slots: table_bytes / 8,
            ..limit("find_hit", table_bytes, gops)
        }
    }

    fn temp_csv(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuhash-bench-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("results.csv")
    }

    #[test]
    fn rows_survive_a_writer_that_never_finishes() {
        let path = temp_csv("appender");
        let rows = [limit("limit_random_line", 1 << 20, 2.0), result("linear", 1 << 20, 1.0), result("std", 1 << 20, 0.5)];
        {
            let mut csv = CsvAppender::create(&path).unwrap();
            for r in &rows {
                csv.append(r).unwrap();
            }
            // Dropped here with no closing call, as a run cut short would leave it.
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, csv_text(&rows), "the same file the whole-run writer made");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], CSV_HEADER);
        let columns = CSV_HEADER.split(',').count();
        let col = |name: &str| CSV_HEADER.split(',').position(|h| h == name).unwrap();
        for (line, row) in lines[1..].iter().zip(&rows) {
            let fields: Vec<&str> = line.split(',').collect();
            assert_eq!(fields.len(), columns, "{line}");
            assert_eq!(fields[col("op")], row.op);
            assert_eq!(fields[col("n")].parse::<u64>().unwrap(), row.n);
            assert_eq!(fields[col("median_ms")].parse::<f64>().unwrap(), 2.0);
            assert_eq!(fields[col("table_bytes")].parse::<u64>().unwrap(), 1 << 20);
        }
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn results_get_the_limits_recorded_before_them() {
        let path = temp_csv("recorder");
        let mut rec = Recorder::with_output(&path, ProgressBar::hidden(), Box::new(std::io::sink())).unwrap();
        rec.record(limit("limit_random_line", 1 << 20, 2.0)).unwrap();
        rec.record(limit("limit_random_line", 1 << 22, 4.0)).unwrap();
        rec.record(result("linear", 1 << 20, 1.0)).unwrap();
        rec.case_done();
        rec.record(result("linear", 1 << 24, 1.0)).unwrap();
        rec.case_done();
        let pct: Vec<Option<f64>> = rec.rows().iter().map(|r| r.pct_of_limit).collect();
        assert_eq!(pct, [None, None, Some(50.0), None]);
        assert_eq!(rec.cases_done(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, csv_text(rec.rows()));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn live_lines_start_with_their_headers() {
        let mut live = LiveTable::default();
        let first = live.lines(&limit("limit_random_line", 1 << 20, 2.0));
        assert_eq!(first.lines().count(), 3, "title, header, row:\n{first}");
        assert_eq!(live.lines(&limit("limit_copy", 1 << 20, 2.0)).lines().count(), 1);
        let result_lines = live.lines(&result("linear", 1 << 20, 1.0));
        assert!(result_lines.lines().nth(1).unwrap().starts_with("device"), "{result_lines}");
        assert_eq!(live.lines(&result("std", 1 << 20, 1.0)).lines().count(), 1);
    }
}
