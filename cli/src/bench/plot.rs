//! SVG plots: one per op and key width, throughput against load factor,
//! one line per device/scheme (and value width or size when those vary),
//! with the random-line limits drawn as dashed ceilings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::report::{pretty_bytes, pretty_count, Row, CEILING_OPS};
use super::BenchError;

/// A plotted line: its label and (load, gops) points in load order.
struct Series {
    label: String,
    points: Vec<(f64, f64)>,
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

/// Groups the rows of one plot into lines. Value width, size and batch join
/// the label only when they vary, to keep legends short.
fn series_of(rows: &[&Row]) -> Vec<Series> {
    let many = |f: &dyn Fn(&Row) -> u64| rows.iter().map(|r| f(r)).collect::<std::collections::BTreeSet<_>>().len() > 1;
    let (many_values, many_sizes) = (many(&|r| r.value_bits as u64), many(&|r| r.slots));
    let many_batches = many(&|r| r.batch.unwrap_or(0));
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        let (Some(load), Some(gops)) = (r.load, r.gops) else { continue };
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
        lines.entry(label).or_default().push((load, gops));
    }
    lines
        .into_iter()
        .map(|(label, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { label, points }
        })
        .collect()
}

fn plot_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Plot(e.to_string())
}

/// Legend entries: label, colour, dashed or not.
type Entry = (String, RGBAColor, bool);

fn draw(path: &Path, title: &str, series: &[Series], ceilings: &[(String, f64)]) -> Result<(), BenchError> {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (x_lo, x_hi) = if x_lo < x_hi { (x_lo - 0.02, x_hi + 0.02) } else { (x_lo - 0.1, x_lo + 0.1) };
    // A log axis: peers, tables and ceilings easily span two decades.
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).chain(ceilings.iter().map(|c| c.1));
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
    chart
        .configure_mesh()
        .x_desc("load factor (distinct keys / slots)")
        .y_desc("G operations/s (log scale)")
        .y_label_formatter(&|y| format!("{y:.3}"))
        .draw()
        .map_err(plot_err)?;

    let mut legend: Vec<Entry> = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .map_err(plot_err)?;
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(plot_err)?;
        legend.push((s.label.clone(), color, false));
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

/// Writes `plot_<op>_u<key bits>.svg` files into `dir`; returns their paths.
pub(crate) fn write_plots(dir: &Path, rows: &[Row]) -> Result<Vec<PathBuf>, BenchError> {
    let limits: Vec<&Row> = rows.iter().filter(|r| r.is_limit()).collect();
    let mut groups: BTreeMap<(String, u32), Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.is_limit()) {
        groups.entry((r.op.clone(), r.key_bits)).or_default().push(r);
    }
    let mut written = Vec::new();
    for ((op, key_bits), group) in groups {
        let series = series_of(&group);
        if series.is_empty() {
            continue;
        }
        let mut table_bytes: Vec<u64> = group.iter().map(|r| r.table_bytes).collect();
        table_bytes.sort_unstable();
        table_bytes.dedup();
        let mut devices: Vec<&str> = group.iter().map(|r| r.device.as_str()).collect();
        devices.sort_unstable();
        devices.dedup();
        let path = dir.join(format!("plot_{op}_u{key_bits}.svg"));
        let title = format!("{op}, u{key_bits} keys: throughput vs load factor");
        draw(&path, &title, &series, &ceilings(&limits, &devices, &table_bytes))?;
        written.push(path);
    }
    Ok(written)
}
