//! `--plot FILE.svg`: throughput against number of waiters, one line per
//! contender (solid: the waiters spread over at most `--clients` clients;
//! dashed, in the same colour: one client per waiter), and below it what
//! that throughput costs: the least-served waiter's share of the most-served
//! one's (least/most; 0 = someone starved).
//!
//! plotters' SVG backend writes text as SVG `<text>` elements, and without the
//! `ttf` feature it lays text out with a crude estimate instead of font files:
//! no font library is needed, and the viewer picks the font.

use std::path::Path;

use anyhow::anyhow;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::model::{require_svg, ContenderKind, Report, Sweep};

impl Report {
    /// Draw the throughput sweep (acquisitions/s against waiters, one colour
    /// per contender: a solid line over `--clients` clients, a dashed one
    /// with one client per waiter) as SVG to `path`. Without a sweep, the
    /// contended results are drawn as single points.
    ///
    /// # Errors
    /// When `path` does not end in `.svg` (only SVG can be drawn: no bitmap
    /// or font libraries are built in), or the file cannot be written.
    pub fn write_plot(&self, path: &Path) -> anyhow::Result<()> {
        draw(self, path)
    }
}

/// Colours by contender, fixed so plots of different runs compare.
fn colour(kind: ContenderKind) -> RGBColor {
    match kind {
        ContenderKind::Lock => RGBColor(0x1f, 0x77, 0xb4),
        ContenderKind::Fair => RGBColor(0x2c, 0xa0, 0x2c),
        ContenderKind::RawPoll => RGBColor(0xd6, 0x27, 0x28),
        ContenderKind::Rslock => RGBColor(0xff, 0x7f, 0x0e),
        ContenderKind::Redisson => RGBColor(0x00, 0x5f, 0x5f),
        ContenderKind::RedissonFair => RGBColor(0x8f, 0x00, 0x5f),
        ContenderKind::Rw => RGBColor(0x94, 0x67, 0xbd),
        ContenderKind::Sem => RGBColor(0x8c, 0x56, 0x4b),
        ContenderKind::SemPoll => RGBColor(0xe3, 0x77, 0xc2),
        // Never in the contended sweep; listed so every kind has one.
        ContenderKind::LockIncr => RGBColor(0x6b, 0xae, 0xd6),
        ContenderKind::LockGuarded => RGBColor(0x08, 0x30, 0x6b),
        ContenderKind::Multi => RGBColor(0x7f, 0x7f, 0x7f),
        ContenderKind::Redlock => RGBColor(0xbc, 0xbd, 0x22),
        ContenderKind::Rslock3 => RGBColor(0x17, 0xbe, 0xcf),
    }
}

/// One line: a contender in one sweep, its points (waiters,
/// acquisitions/s, least/most).
type Series = Vec<(ContenderKind, Sweep, Vec<(f64, f64, f64)>)>;

/// Series to draw: the sweep when there is one (the one-client-per-waiter
/// sweep apart, when it has runs of its own), else the contended results.
fn series(report: &Report) -> Series {
    let mut out: Series = Vec::new();
    let mut add = |kind: ContenderKind, sweep: Sweep, waiters: u32, rate: f64, lm: f64| {
        let point = (f64::from(waiters), rate, lm);
        match out.iter_mut().find(|(k, s, _)| *k == kind && *s == sweep) {
            Some((_, _, points)) => points.push(point),
            None => out.push((kind, sweep, vec![point])),
        }
    };
    if report.sweep.is_empty() {
        for r in &report.results {
            if let Some(rate) = r.acquisitions_per_s {
                if r.scenario == crate::model::ScenarioKind::Contended {
                    let lm = r.fairness.as_ref().map_or(0.0, |f| f.min_max_ratio);
                    add(r.contender, Sweep::Spread, r.workers, rate, lm);
                }
            }
        }
    } else {
        let sweeps: &[Sweep] = if report.has_own_client_sweep() {
            &[Sweep::Spread, Sweep::OwnClient]
        } else {
            &[Sweep::Spread]
        };
        for &sweep in sweeps {
            for p in report.sweep_points(sweep) {
                add(
                    p.contender,
                    sweep,
                    p.waiters,
                    p.acquisitions_per_s,
                    p.min_max_ratio,
                );
            }
        }
    }
    for (_, _, points) in &mut out {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Dash and gap lengths of the one-client-per-waiter lines, in pixels.
const DASH: (i32, i32) = (8, 5);

/// Draw one series on `chart`: a solid line with filled dots for the
/// waiters spread over `--clients` clients, a dashed one with open dots for
/// one client per waiter (dots only above `--clients` waiters: below, the
/// points are the solid line's). `y` picks the value drawn.
fn draw_line<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    (sweep, c, points): (Sweep, RGBColor, &[(f64, f64, f64)]),
    y: fn(&(f64, f64, f64)) -> f64,
    shared_up_to: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let line: Vec<(f64, f64)> = points.iter().map(|p| (p.0, y(p))).collect();
    match sweep {
        Sweep::Spread => {
            chart.draw_series(LineSeries::new(line.iter().copied(), c.stroke_width(2)))?;
            chart.draw_series(line.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        }
        Sweep::OwnClient => {
            chart.draw_series(DashedLineSeries::new(
                line.iter().copied(),
                DASH.0,
                DASH.1,
                c.stroke_width(2),
            ))?;
            chart.draw_series(
                line.iter()
                    .filter(|p| p.0 > shared_up_to)
                    .map(|&p| Circle::new(p, 4, c.stroke_width(2))),
            )?;
        }
    }
    Ok(())
}

/// Draw the plot of `report` to `path`, which must end in `.svg`: acquisitions
/// per second on top, least/most served below, both against the waiters.
/// Each contender has one colour: a solid line for the waiters spread over
/// at most `--clients` clients, a dashed one for one client per waiter.
///
/// The x axis is log2 of the waiter count (1, 2, 4, 8, 16 evenly spaced);
/// labels are drawn only at whole powers of two.
pub(crate) fn draw(report: &Report, path: &Path) -> anyhow::Result<()> {
    require_svg(path).map_err(|reason| anyhow!("{}: {reason}", path.display()))?;
    let frame = Frame::of(report);
    let err = |e: String| anyhow!("drawing {}: {e}", path.display());
    let root = SVGBackend::new(path, (900, 820)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (top, bottom) = root.split_vertically(540);
    draw_throughput(&top, report, &frame).map_err(err)?;
    draw_fairness(&bottom, &frame).map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// What both panels share: the series (x on a log2 scale), the axes'
/// ranges.
struct Frame {
    series: Series,
    /// Up to this x (--clients waiters) the two sweeps share their runs.
    shared_up_to: f64,
    /// Whether the one-client-per-waiter sweep is drawn too.
    two_sweeps: bool,
    /// The x range, with a margin.
    x: std::ops::Range<f64>,
    /// The throughput panel's top, with room for the legend.
    y_max: f64,
}

impl Frame {
    fn of(report: &Report) -> Frame {
        let series: Series = series(report)
            .into_iter()
            .map(|(k, sweep, points)| {
                let points = points
                    .into_iter()
                    .map(|(w, r, lm)| (w.log2(), r, lm))
                    .collect();
                (k, sweep, points)
            })
            .collect();
        let two_sweeps = series.iter().any(|(_, s, _)| *s == Sweep::OwnClient);
        let xs = series.iter().flat_map(|(_, _, p)| p.iter().map(|q| q.0));
        let x_max = xs.clone().fold(0.0_f64, f64::max).max(1.0);
        let x_min = xs.fold(x_max, f64::min).min(x_max - 1.0).max(0.0);
        // Headroom above the highest point for the legend in the upper
        // right: about 3.5% of the panel per entry (a contender, and solid
        // and dashed).
        let entries: f64 = series
            .iter()
            .filter(|(_, s, _)| *s == Sweep::Spread)
            .map(|_| 1.0)
            .sum::<f64>()
            + if two_sweeps { 2.0 } else { 0.0 };
        let legend_share = 0.055 + 0.035 * entries;
        let y_max = series
            .iter()
            .flat_map(|(_, _, p)| p.iter().map(|q| q.1))
            .fold(0.0_f64, f64::max)
            .max(1.0)
            * (1.0 / (1.0 - legend_share.min(0.5))).max(1.15);
        Frame {
            series,
            shared_up_to: f64::from(report.settings.clients.max(1)).log2(),
            two_sweeps,
            x: (x_min - 0.2)..(x_max + 0.2),
            y_max,
        }
    }
}

/// An x label: the waiter count at whole powers of two, else nothing.
fn x_label(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{}", x.round().exp2())
    } else {
        String::new()
    }
}

/// One panel's chart on `area`: its caption (and font size) over the waiters
/// across (`frame.x`, labelled at whole powers of two) and 0 to `y_top` up,
/// the y axis named `y_desc` and labelled with `y_decimals` decimals.
fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    (caption, font): (&str, u32),
    frame: &Frame,
    (y_top, y_desc, y_decimals): (f64, &str, usize),
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>, String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", font))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(frame.x.clone(), 0.0..y_top)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("waiters on one name")
        .y_desc(y_desc)
        .disable_x_mesh()
        .x_labels(24)
        .x_label_formatter(&x_label)
        .y_label_formatter(&|y| format!("{y:.y_decimals$}"))
        .draw()
        .map_err(e)?;
    Ok(chart)
}

/// The upper panel: acquisitions/s against waiters, with the legend.
fn draw_throughput(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    report: &Report,
    frame: &Frame,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let caption = format!(
        "deadbolt bench: contended throughput (Redis {}, {} CPUs{})",
        report.redis.version,
        report.host.cpus,
        if report.host.pinned { ", pinned" } else { "" }
    );
    let mut chart = panel(
        area,
        (&caption, 20),
        frame,
        (frame.y_max, "acquisitions / s", 0),
    )?;
    for (kind, sweep, points) in &frame.series {
        let c = colour(*kind);
        draw_line(&mut chart, (*sweep, c, points), |p| p.1, frame.shared_up_to).map_err(e)?;
        if *sweep == Sweep::Spread {
            // The legend: one entry per contender, by its colour.
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                .map_err(e)?
                .label(kind.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
    }
    if frame.two_sweeps {
        // And what solid and dashed mean.
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(e)?
            .label(format!("solid: {}", report.sweep_label(Sweep::Spread)))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(e)?
            .label("dashed: one client per waiter")
            .legend(|(x, y)| {
                DashedPathElement::new(vec![(x, y), (x + 20, y)], 5, 3, BLACK.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)
}

/// The lower panel, what the throughput costs: least-served over
/// most-served waiter (1 = every waiter served alike, 0 = one starved).
fn draw_fairness(area: &DrawingArea<SVGBackend<'_>, Shift>, frame: &Frame) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let mut fair = panel(
        area,
        ("least-served waiter / most-served (higher is fairer)", 16),
        frame,
        (1.05, "least / most", 1),
    )?;
    for (kind, sweep, points) in &frame.series {
        draw_line(
            &mut fair,
            (*sweep, colour(*kind), points),
            |p| p.2,
            frame.shared_up_to,
        )
        .map_err(e)?;
    }
    Ok(())
}
