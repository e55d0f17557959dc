//! SVG plots: one per op and key width, throughput against load factor,
//! one line per device/scheme (and value width or size when those vary),
//! with the random-line limits drawn as dashed ceilings; and for runs with
//! several `--oversub` values, one per op and key width of throughput
//! against table size / device budget, with the bus bound of each line
//! dashed where it is known.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::report::{pretty_bytes, pretty_count, Row, CEILING_OPS};
use super::BenchError;

/// A plotted line: its label and (x, gops) points in x order, and the
/// bus-bound rate at those x where known (drawn dashed, same colour).
struct Series {
    label: String,
    points: Vec<(f64, f64)>,
    bound: Vec<(f64, f64)>,
}

/// What a plot's x axis shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum XAxis {
    Load,
    /// Table size / device budget, on a log2 scale.
    Oversub,
}

impl XAxis {
    fn of(self, r: &Row) -> Option<f64> {
        match self {
            XAxis::Load => r.load,
            XAxis::Oversub => r.oversub.map(f64::from),
        }
    }

    fn desc(self) -> &'static str {
        match self {
            XAxis::Load => "load factor (distinct keys / slots)",
            XAxis::Oversub => "table size / device budget (log2 scale)",
        }
    }

    /// Where `x` is drawn: oversubscription doubles per step, so its axis
    /// is log2 (plotted as the exponent, labelled with the ratio).
    fn place(self, x: f64) -> f64 {
        match self {
            XAxis::Load => x,
            XAxis::Oversub => x.log2(),
        }
    }

    /// The label of a tick at `at` on the drawn axis (oversub only; loads
    /// keep the mesh's own labels).
    fn label(self, at: f64) -> String {
        match self {
            XAxis::Load => at.to_string(),
            XAxis::Oversub => {
                let r = at.exp2();
                if (r - r.round()).abs() < 1e-6 { format!("{}x", r.round()) } else { format!("{r:.1}x") }
            }
        }
    }
}

/// Ceilings drawn on a plot, for each device plotted: the random-read rate
/// over each plotted table's size, and over a buffer beyond the LLC.
fn ceilings(limits: &[&Row], devices: &[&str], table_bytes: &[u64]) -> Vec<(String, f64)> {
    limits
        .iter()
        .filter(|l| CEILING_OPS.contains(&l.op.as_str()) && devices.contains(&l.device.as_str()))
        .filter(|l| l.scheme == "beyond_llc" || (l.scheme == "table" && table_bytes.contains(&l.table_bytes)))
        .filter_map(|l| {
            let unit = if l.op == "limit_random_line" { "line" } else { "sector" };
            let what = if l.scheme == "table" { "table-sized" } else { "beyond LLC" };
            let label = format!("limit: {} random {unit}, {what} ({})", l.device, pretty_bytes(l.table_bytes));
            l.gops.map(|g| (label, g))
        })
        .collect()
}

/// Groups the rows of one plot into lines along `axis`. Value width, size,
/// batch and the other axis (load or oversubscription) join the label only
/// when they vary, to keep legends short.
fn series_of(rows: &[&Row], axis: XAxis) -> Vec<Series> {
    let many = |f: &dyn Fn(&Row) -> u64| rows.iter().map(|r| f(r)).collect::<std::collections::BTreeSet<_>>().len() > 1;
    let (many_values, many_sizes) = (many(&|r| r.value_bits as u64), many(&|r| r.slots));
    let many_batches = many(&|r| r.batch.unwrap_or(0));
    let many_loads = axis != XAxis::Load && many(&|r| r.load.map_or(0, f64::to_bits));
    let many_oversub = axis != XAxis::Oversub && many(&|r| r.oversub.map_or(0, u64::from));
    let mut lines: BTreeMap<String, Points> = BTreeMap::new();
    for r in rows {
        let (Some(x), Some(gops)) = (axis.of(r), r.gops) else { continue };
        let mut label = format!("{} {}", r.device, r.scheme);
        if many_values {
            label += &format!(" u{} values", r.value_bits);
        }
        if many_sizes {
            label += &format!(" {} slots", pretty_count(r.slots));
        }
        if many_batches {
            label += &r.batch.map_or_else(|| " whole load".to_string(), |b| format!(" batch {}", pretty_count(b)));
        }
        if many_loads {
            label += &r.load.map_or_else(String::new, |l| format!(" load {l}"));
        }
        if many_oversub {
            label += &r.oversub.map_or_else(String::new, |o| format!(" {o}x budget"));
        }
        let line = lines.entry(label).or_default();
        line.0.push((x, gops));
        // The bus bound as a rate: the call's operations in the bus-bound time.
        if let Some(ms) = r.bus_ms.filter(|&ms| ms > 0.0 && axis == XAxis::Oversub) {
            line.1.push((x, r.n as f64 / (ms * 1e6)));
        }
    }
    let by_x = |v: &mut Vec<(f64, f64)>| v.sort_by(|a, b| a.0.total_cmp(&b.0));
    lines
        .into_iter()
        .map(|(label, (mut points, mut bound))| {
            by_x(&mut points);
            by_x(&mut bound);
            Series { label, points, bound }
        })
        .collect()
}

fn plot_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Plot(e.to_string())
}

/// Measured points and bus-bound points of one line, as `(x, gops)`.
type Points = (Vec<(f64, f64)>, Vec<(f64, f64)>);

/// Legend entries: label, colour, dashed or not.
type Entry = (String, RGBAColor, bool);

fn draw(path: &Path, title: &str, axis: XAxis, series: &[Series], ceilings: &[(String, f64)]) -> Result<(), BenchError> {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| axis.place(p.0)));
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    // A margin of a few percent of the span keeps end points off the frame.
    let pad = if axis == XAxis::Load { 0.02 } else { 0.15 };
    let (x_lo, x_hi) = if x_lo < x_hi { (x_lo - pad, x_hi + pad) } else { (x_lo - 5.0 * pad, x_lo + 5.0 * pad) };
    // A log axis: peers, tables and ceilings easily span two decades.
    let ys = series.iter().flat_map(|s| s.points.iter().chain(&s.bound).map(|p| p.1)).chain(ceilings.iter().map(|c| c.1));
    let ys: Vec<f64> = ys.filter(|y| *y > 0.0 && y.is_finite()).collect();
    let (y_lo, y_hi) = match ys.iter().copied().reduce(f64::min) {
        Some(lo) => (lo / 1.5, ys.iter().copied().fold(lo, f64::max) * 1.5),
        None => (1e-3, 1.0),
    };

    let root = SVGBackend::new(path, (1180, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let (left, right) = root.split_horizontally(820);
    let mut chart = ChartBuilder::on(&left)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(x_lo..x_hi, (y_lo..y_hi).log_scale())
        .map_err(plot_err)?;
    let x_label = |x: &f64| axis.label(*x);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(axis.desc()).y_desc("G operations/s (log scale)").y_label_formatter(&|y| format!("{y:.3}"));
    if axis == XAxis::Oversub {
        // Labels at whole powers of two only: as many labels as there are
        // of those, so the mesh picks a step of one.
        mesh.x_labels((x_hi.floor() - x_lo.ceil()) as usize + 1).x_label_formatter(&x_label);
    }
    mesh.draw().map_err(plot_err)?;

    let mut legend: Vec<Entry> = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let placed = |v: &[(f64, f64)]| -> Vec<(f64, f64)> { v.iter().map(|&(x, y)| (axis.place(x), y)).collect() };
        let points = placed(&s.points);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
            .map_err(plot_err)?;
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(plot_err)?;
        legend.push((s.label.clone(), color, false));
        if !s.bound.is_empty() {
            chart
                .draw_series(DashedLineSeries::new(placed(&s.bound), 8, 6, color.stroke_width(2)))
                .map_err(plot_err)?;
            legend.push((format!("{}: bus bound", s.label), color, true));
        }
    }
    for (i, (label, g)) in ceilings.iter().enumerate() {
        // Greys from dark to light tell several ceilings apart.
        let grey = (40 + (i * 50) % 160) as u8;
        let color = RGBColor(grey, grey, grey).to_rgba();
        chart
            .draw_series(DashedLineSeries::new([(x_lo, *g), (x_hi, *g)], 8, 6, color.stroke_width(2)))
            .map_err(plot_err)?;
        legend.push((label.clone(), color, true));
    }
    draw_legend(&right, &legend)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// The legend, in its own panel right of the chart so it never hides data.
fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, plotters::coord::Shift>, entries: &[Entry]) -> Result<(), BenchError> {
    let font = ("sans-serif", 14).into_font();
    for (i, (label, color, dashed)) in entries.iter().enumerate() {
        let y = 60 + 24 * i as i32;
        let style = color.stroke_width(2);
        if *dashed {
            for x in [4, 18] {
                area.draw(&PathElement::new(vec![(x, y), (x + 9, y)], style)).map_err(plot_err)?;
            }
        } else {
            area.draw(&PathElement::new(vec![(4, y), (31, y)], style)).map_err(plot_err)?;
        }
        area.draw(&Text::new(label.clone(), (38, y - 7), font.clone())).map_err(plot_err)?;
    }
    Ok(())
}

/// Writes `plot_<op>_u<key bits>.svg` files into `dir`, and
/// `plot_<op>_u<key bits>_oversub.svg` where the rows have more than one
/// oversubscription; returns their paths.
pub(crate) fn write_plots(dir: &Path, rows: &[Row]) -> Result<Vec<PathBuf>, BenchError> {
    let limits: Vec<&Row> = rows.iter().filter(|r| r.is_limit()).collect();
    let mut groups: BTreeMap<(String, u32), Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.is_limit()) {
        groups.entry((r.op.clone(), r.key_bits)).or_default().push(r);
    }
    let mut written = Vec::new();
    for ((op, key_bits), group) in groups {
        let mut table_bytes: Vec<u64> = group.iter().map(|r| r.table_bytes).collect();
        table_bytes.sort_unstable();
        table_bytes.dedup();
        let mut devices: Vec<&str> = group.iter().map(|r| r.device.as_str()).collect();
        devices.sort_unstable();
        devices.dedup();
        let ceilings = ceilings(&limits, &devices, &table_bytes);
        let mut oversubs: Vec<u32> = group.iter().filter_map(|r| r.oversub).collect();
        oversubs.sort_unstable();
        oversubs.dedup();
        let plots = [
            (XAxis::Load, format!("plot_{op}_u{key_bits}.svg"), "load factor"),
            (XAxis::Oversub, format!("plot_{op}_u{key_bits}_oversub.svg"), "table size / device budget"),
        ];
        for (axis, file, versus) in plots {
            let series = series_of(&group, axis);
            if series.is_empty() || (axis == XAxis::Oversub && oversubs.len() < 2) {
                continue;
            }
            let path = dir.join(file);
            let title = format!("{op}, u{key_bits} keys: throughput vs {versus}");
            draw(&path, &title, axis, &series, &ceilings)?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(oversub: u32, load: f64, gops: f64, bus_ms: Option<f64>) -> Row {
        let spec = super::super::report::LimitSpec {
            device: "cuda:0",
            op: "find_hit",
            scheme: "linear",
            n: 1000,
            buffer_bytes: 1 << 20,
            ops: Some(1000),
            bytes_moved: None,
            reps: 1,
        };
        let mut r = Row::limit(spec, &[1.0]);
        (r.load, r.gops, r.oversub, r.bus_ms) = (Some(load), Some(gops), Some(oversub), bus_ms);
        r
    }

    #[test]
    fn oversub_lines_join_their_ratios() {
        let rows = [row(4, 0.5, 1.0, Some(0.002)), row(1, 0.5, 3.0, None), row(1, 0.8, 2.0, None)];
        let refs: Vec<&Row> = rows.iter().collect();
        let by_oversub = series_of(&refs, XAxis::Oversub);
        let labels: Vec<&str> = by_oversub.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["cuda:0 linear load 0.5", "cuda:0 linear load 0.8"]);
        assert_eq!(by_oversub[0].points, [(1.0, 3.0), (4.0, 1.0)]);
        // 1000 operations in 2 µs of bus time: 0.5 G/s.
        assert_eq!(by_oversub[0].bound, [(4.0, 0.5)]);
        // Along the load, the ratio tells the lines apart.
        let by_load = series_of(&refs, XAxis::Load);
        let labels: Vec<&str> = by_load.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["cuda:0 linear 1x budget", "cuda:0 linear 4x budget"]);
        assert!(by_load.iter().all(|s| s.bound.is_empty()));
        assert_eq!((XAxis::Oversub.place(8.0), XAxis::Oversub.label(3.0)), (3.0, "8x".to_string()));
    }
}
