//! The report's charts: inline SVG drawn by plotters, one function per chart (latency axes
//! logarithmic and scaled to the data).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::*;

/// One named, coloured line of a chart: (label, colour, points).
type Series = (String, RGBColor, Vec<(f64, f64)>);

fn plot_err(chart: &str, e: impl std::fmt::Display) -> LoadError {
    LoadError::Plot {
        chart: chart.to_string(),
        message: e.to_string(),
    }
}

fn level(r: &Report, s: &Step) -> f64 {
    if r.is_open_loop() {
        s.rate.unwrap_or(0.0)
    } else {
        s.concurrency as f64
    }
}

/// A log-axis range around positive values, with some room on both sides.
fn log_range(vals: impl IntoIterator<Item = f64>, pad: f64) -> (f64, f64) {
    let v: Vec<f64> = vals
        .into_iter()
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if v.is_empty() {
        return (0.1, 10.0);
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = (lo / pad, hi * pad);
    if hi / lo < 4.0 {
        let mid = (lo * hi).sqrt();
        (mid / 2.0, mid * 2.0)
    } else {
        (lo, hi)
    }
}

/// Tick positions for a log axis over `lo..hi`: 1-2-5 per decade, denser (1..9) when that
/// gives fewer than three, so a range inside one decade (p50 28 ms, p99 48 ms) still gets
/// labels: plotters' own log axis labels only powers of ten there.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && lo.is_finite() && hi.is_finite()) {
        return Vec::new();
    }
    let pick = |mults: &[f64]| -> Vec<f64> {
        let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        let mut v = Vec::new();
        for d in d0..=d1 {
            for m in mults {
                let x = m * 10f64.powi(d);
                if x >= lo && x <= hi {
                    v.push(x);
                }
            }
        }
        v
    };
    let v = pick(&[1.0, 2.0, 5.0]);
    if v.len() >= 3 {
        if v.len() > 12 {
            return pick(&[1.0]);
        }
        return v;
    }
    pick(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

fn x_label(r: &Report) -> &'static str {
    if r.is_open_loop() {
        "offered rate (requests/s, log scale)"
    } else {
        "concurrency (log scale)"
    }
}

/// A number for an axis tick: no float noise, few digits.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 10.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.1}"))
    } else if a >= 0.1 {
        trim(format!("{v:.2}"))
    } else if a >= 0.01 {
        trim(format!("{v:.3}"))
    } else {
        format!("{v:.0e}")
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

const W: u32 = 760;
const H: u32 = 400;
const FONT: (&str, u32) = ("sans-serif", 18);
const LABEL_FONT: (&str, u32) = ("sans-serif", 14);
const GRID: RGBColor = RGBColor(225, 225, 225);
const ORANGE: RGBColor = RGBColor(230, 140, 0);
const GREY: RGBColor = RGBColor(150, 150, 150);

/// Distinct colours for series (error kinds, per-endpoint lines).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Draw into an SVG string of `w` x `h`.
fn svg(
    name: &str,
    w: u32,
    h: u32,
    f: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), LoadError>,
) -> Result<String, LoadError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(name, e))?;
        f(&root)?;
        root.present().map_err(|e| plot_err(name, e))?;
    }
    Ok(out)
}

/// Colour of a step's marker: sustainable green, peak red, other passing blue, failing grey.
fn step_color(r: &Report, i: usize) -> RGBColor {
    if r.sustainable.as_ref().map(|b| b.step) == Some(i) {
        RGBColor(0, 160, 0)
    } else if r.peak.as_ref().map(|b| b.step) == Some(i) {
        RED
    } else if r.steps[i].slo_pass {
        BLUE
    } else {
        GREY
    }
}

/// QPS vs load level (log x); sustainable step green, peak red, failing grey.
pub fn qps_svg(r: &Report) -> Result<String, LoadError> {
    let name = "qps";
    let pts: Vec<(f64, f64)> = r.steps.iter().map(|s| (level(r, s), s.qps)).collect();
    svg(name, W, H, |root| {
        let (x0, x1) = log_range(pts.iter().map(|p| p.0), 1.3);
        let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.15;
        let mut chart = ChartBuilder::on(root)
            .caption("Throughput (ok answers/s) per step", FONT)
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
                0.0..ymax,
            )
            .map_err(|e| plot_err(name, e))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .x_desc(x_label(r))
            .y_desc("QPS")
            .x_labels(10)
            .label_style(LABEL_FONT)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), BLUE.stroke_width(2)))
            .map_err(|e| plot_err(name, e))?;
        chart
            .draw_series(
                pts.iter()
                    .enumerate()
                    .map(|(i, &p)| Circle::new(p, 5, step_color(r, i).filled())),
            )
            .map_err(|e| plot_err(name, e))?;
        Ok(())
    })
}

/// p50 / p95 / p99 vs load level, log y scaled to the data; the SLO line is drawn when
/// it falls inside that range, otherwise named in the caption.
pub fn latency_svg(r: &Report) -> Result<String, LoadError> {
    let name = "latency";
    svg(name, W, H, |root| {
        let xs: Vec<f64> = r.steps.iter().map(|s| level(r, s)).collect();
        let (x0, x1) = log_range(xs.iter().copied(), 1.3);
        let vals = r
            .steps
            .iter()
            .flat_map(|s| [s.latency_ms.p50, s.latency_ms.p99].into_iter().flatten());
        let (y0, y1) = log_range(vals, 1.6);
        let slo = r.config.slo_p99_ms;
        let slo_in = slo >= y0 && slo <= y1;
        let caption = if slo_in {
            "Latency of ok answers (ms, log scale)".to_string()
        } else if slo > y1 {
            format!("Latency of ok answers (ms, log scale); SLO p99 {slo} ms is above")
        } else {
            format!("Latency of ok answers (ms, log scale); SLO p99 {slo} ms is below")
        };
        let mut chart = ChartBuilder::on(root)
            .caption(caption, FONT)
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
                (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
            )
            .map_err(|e| plot_err(name, e))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .x_desc(x_label(r))
            .y_desc("ms")
            .x_labels(10)
            .y_labels(6)
            .label_style(LABEL_FONT)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        type Getter = fn(&Step) -> Option<f64>;
        let series: [(&str, RGBColor, Getter); 3] = [
            ("p50", BLUE, |s| s.latency_ms.p50),
            ("p95", ORANGE, |s| s.latency_ms.p95),
            ("p99", RED, |s| s.latency_ms.p99),
        ];
        for (label, color, get) in series {
            let pts: Vec<(f64, f64)> = r
                .steps
                .iter()
                .filter_map(|s| get(s).filter(|v| *v > 0.0).map(|v| (level(r, s), v)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(|e| plot_err(name, e))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| plot_err(name, e))?;
        }
        if slo_in {
            chart
                .draw_series(LineSeries::new(
                    vec![(x0, slo), (x1, slo)],
                    BLACK.stroke_width(1),
                ))
                .map_err(|e| plot_err(name, e))?
                .label(format!("SLO p99 {slo} ms"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        }
        chart
            .configure_series_labels()
            .label_font(LABEL_FONT)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| plot_err(name, e))?;
        Ok(())
    })
}

/// Throughput against p99 (the capacity curve): each step a point labelled with its
/// level, p99 on a log axis, the SLO line across.
pub fn qps_p99_svg(r: &Report) -> Result<String, LoadError> {
    let name = "qps_p99";
    let pts: Vec<(f64, f64, usize)> = r
        .steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.latency_ms.p99.filter(|p| *p > 0.0).map(|p| (s.qps, p, i)))
        .collect();
    svg(name, W, H, |root| {
        let slo = r.config.slo_p99_ms;
        let (y0, y1) = log_range(pts.iter().map(|p| p.1).chain([slo]), 1.6);
        let xmax = pts.iter().map(|p| p.0).fold(0.0, f64::max).max(1.0) * 1.15;
        let mut chart = ChartBuilder::on(root)
            .caption("Throughput against p99 (each point a step)", FONT)
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                0.0..xmax,
                (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
            )
            .map_err(|e| plot_err(name, e))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .x_desc("QPS (ok answers/s)")
            .y_desc("p99 ms (log scale)")
            .y_labels(6)
            .label_style(LABEL_FONT)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1)),
                BLUE.stroke_width(1),
            ))
            .map_err(|e| plot_err(name, e))?;
        let open = r.is_open_loop();
        chart
            .draw_series(pts.iter().map(|&(x, y, i)| {
                let s = &r.steps[i];
                let label = if open {
                    format!("{}/s", tick(s.rate.unwrap_or(0.0)))
                } else {
                    format!("c={}", s.concurrency)
                };
                EmptyElement::at((x, y))
                    + Circle::new((0, 0), 5, step_color(r, i).filled())
                    + Text::new(label, (6, -16), ("sans-serif", 13))
            }))
            .map_err(|e| plot_err(name, e))?;
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, slo), (xmax, slo)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| plot_err(name, e))?
            .label(format!("SLO p99 {slo} ms"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        chart
            .configure_series_labels()
            .label_font(LABEL_FONT)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| plot_err(name, e))?;
        Ok(())
    })
}

/// One simple line chart of (x, y) points per series over the steps' levels (log x).
#[allow(clippy::too_many_arguments)]
fn level_lines(
    area: &DrawingArea<SVGBackend, Shift>,
    name: &str,
    r: &Report,
    caption: &str,
    y_desc: &str,
    series: &[Series],
    y_range: (f64, f64),
) -> Result<(), LoadError> {
    let xs = series.iter().flat_map(|s| s.2.iter().map(|p| p.0));
    let (x0, x1) = log_range(xs, 1.3);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, FONT)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
            y_range.0..y_range.1,
        )
        .map_err(|e| plot_err(name, e))?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .x_desc(x_label(r))
        .y_desc(y_desc)
        .x_labels(8)
        .label_style(LABEL_FONT)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(|e| plot_err(name, e))?;
    for (label, color, pts) in series {
        let color = *color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| plot_err(name, e))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| plot_err(name, e))?;
    }
    if series.len() > 1 || series.iter().any(|s| !s.0.is_empty()) {
        chart
            .configure_series_labels()
            .label_font(LABEL_FONT)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| plot_err(name, e))?;
    }
    Ok(())
}

/// Server CPU (% of one core) and resident memory (MiB) per step, side by side; None
/// when the server's resources are unknown.
pub fn server_svg(r: &Report) -> Result<Option<String>, LoadError> {
    let name = "server";
    let cpu: Vec<(f64, f64)> = r
        .steps
        .iter()
        .filter_map(|s| s.server.cpu_pct.map(|c| (level(r, s), c)))
        .collect();
    let rss: Vec<(f64, f64)> = r
        .steps
        .iter()
        .filter_map(|s| {
            s.server
                .rss_bytes
                .map(|b| (level(r, s), b as f64 / (1u64 << 20) as f64))
        })
        .collect();
    if cpu.is_empty() && rss.is_empty() {
        return Ok(None);
    }
    let cli: Vec<(f64, f64)> = r
        .steps
        .iter()
        .map(|s| (level(r, s), s.client_cpu_pct))
        .collect();
    svg(name, W, H, |root| {
        let (a, b) = root.split_horizontally(W / 2);
        let cmax = cpu.iter().chain(&cli).map(|p| p.1).fold(100.0, f64::max) * 1.15;
        level_lines(
            &a,
            name,
            r,
            "CPU per step (% of one core)",
            "% of one core",
            &[
                ("server".into(), RED, cpu.clone()),
                ("load generator".into(), BLUE, cli.clone()),
            ],
            (0.0, cmax),
        )?;
        let rmax = rss.iter().map(|p| p.1).fold(1.0, f64::max) * 1.2;
        level_lines(
            &b,
            name,
            r,
            "Server resident memory (MiB)",
            "MiB",
            &[("rss".into(), PALETTE[4], rss.clone())],
            (0.0, rmax),
        )
    })
    .map(Some)
}

/// Recall@k of the answers under load per step; None without `--gt`.
pub fn recall_svg(r: &Report) -> Result<Option<String>, LoadError> {
    let name = "recall";
    let pts: Vec<(f64, f64)> = r
        .steps
        .iter()
        .filter_map(|s| s.recall_at_k.map(|v| (level(r, s), v)))
        .collect();
    if pts.is_empty() {
        return Ok(None);
    }
    let lo = pts.iter().map(|p| p.1).fold(1.0, f64::min);
    let y0 = (lo - (1.0 - lo).max(0.01) * 1.5).max(0.0);
    svg(name, W, H, |root| {
        level_lines(
            root,
            name,
            r,
            &format!("Recall@{} of the answers under load", r.config.k),
            "recall",
            &[(String::new(), PALETTE[2], pts.clone())],
            (y0, 1.0 + (1.0 - y0) * 0.05),
        )
    })
    .map(Some)
}

/// Failed requests per step by kind (only the kinds that occurred); None without errors.
pub fn errors_svg(r: &Report) -> Result<Option<String>, LoadError> {
    let name = "errors";
    let kinds: Vec<&'static str> = crate::stats::ErrorKind::ALL
        .iter()
        .map(|k| k.name())
        .filter(|k| {
            r.steps
                .iter()
                .any(|s| s.errors.iter().any(|(n, c)| n == *k && c > 0))
        })
        .collect();
    if kinds.is_empty() {
        return Ok(None);
    }
    let series: Vec<Series> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let pts = r
                .steps
                .iter()
                .map(|s| {
                    let n = s.errors.iter().find(|(n, _)| n == k).map_or(0, |e| e.1);
                    let share = if s.requests > 0 {
                        n as f64 * 100.0 / s.requests as f64
                    } else {
                        0.0
                    };
                    (level(r, s), share)
                })
                .collect();
            (k.to_string(), PALETTE[i % PALETTE.len()], pts)
        })
        .collect();
    let ymax = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .fold(r.config.max_error_rate * 100.0, f64::max)
        .max(0.1)
        * 1.15;
    svg(name, W, H, |root| {
        level_lines(
            root,
            name,
            r,
            &format!(
                "Errors by kind (% of requests; a step fails above {}%)",
                r.config.max_error_rate * 100.0
            ),
            "% of requests",
            &series,
            (0.0, ymax),
        )
    })
    .map(Some)
}

/// Inside one step, second by second: ok answers (and errors) per second above, p50 and
/// p99 of the answers that finished in that second below (log scale).
pub fn per_second_svg(step: &Step, title: &str) -> Result<Option<String>, LoadError> {
    let name = "per_second";
    // Seconds inside the measured window only: answers to requests still in flight at its
    // end finish in a last, partial second that would read as a collapse.
    let ps: Vec<_> = step
        .per_second
        .iter()
        .filter(|p| (p.t as f64) < step.duration_s.floor().max(1.0))
        .cloned()
        .collect();
    let ps = &ps;
    if ps.is_empty() {
        return Ok(None);
    }
    svg(name, W, 520, |root| {
        let (a, b) = root.split_vertically(250);
        let t1 = ps.iter().map(|p| p.t).max().unwrap_or(0) as f64 + 1.0;
        let ymax = ps
            .iter()
            .map(|p| (p.ok + p.errors) as f64)
            .fold(1.0, f64::max)
            * 1.15;
        let mut c = ChartBuilder::on(&a)
            .caption(title, FONT)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..t1, 0.0..ymax)
            .map_err(|e| plot_err(name, e))?;
        c.configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .y_desc("answers/s")
            .label_style(LABEL_FONT)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        c.draw_series(ps.iter().map(|p| {
            let x = p.t as f64;
            Rectangle::new(
                [(x + 0.1, 0.0), (x + 0.9, p.ok as f64)],
                BLUE.mix(0.6).filled(),
            )
        }))
        .map_err(|e| plot_err(name, e))?
        .label("ok")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], BLUE.mix(0.6).filled()));
        if ps.iter().any(|p| p.errors > 0) {
            c.draw_series(ps.iter().map(|p| {
                let x = p.t as f64;
                Rectangle::new(
                    [(x + 0.1, p.ok as f64), (x + 0.9, (p.ok + p.errors) as f64)],
                    RED.mix(0.7).filled(),
                )
            }))
            .map_err(|e| plot_err(name, e))?
            .label("errors")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], RED.mix(0.7).filled()));
        }
        c.configure_series_labels()
            .label_font(LABEL_FONT)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| plot_err(name, e))?;
        let (y0, y1) = log_range(
            ps.iter()
                .flat_map(|p| [p.p50_ms, p.p99_ms].into_iter().flatten()),
            1.6,
        );
        let mut c = ChartBuilder::on(&b)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                0.0..t1,
                (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
            )
            .map_err(|e| plot_err(name, e))?;
        c.configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .x_desc("second of the measured window")
            .y_desc("ms (log scale)")
            .y_labels(5)
            .label_style(LABEL_FONT)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        type Get = fn(&crate::stats::SecondStat) -> Option<f64>;
        let lines: [(&str, RGBColor, Get); 2] =
            [("p50", BLUE, |p| p.p50_ms), ("p99", RED, |p| p.p99_ms)];
        for (label, color, get) in lines {
            let pts: Vec<(f64, f64)> = ps
                .iter()
                .filter_map(|p| get(p).filter(|v| *v > 0.0).map(|v| (p.t as f64 + 0.5, v)))
                .collect();
            c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(|e| plot_err(name, e))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| plot_err(name, e))?;
        }
        c.configure_series_labels()
            .label_font(LABEL_FONT)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| plot_err(name, e))?;
        Ok(())
    })
    .map(Some)
}

/// Latency histogram of one step: 40 log-spaced bins from the fastest to
/// the slowest answer, so both the body and the tail show.
pub fn histogram_svg(step: &Step, title: &str) -> Result<String, LoadError> {
    let name = "histogram";
    let h = &step.hist;
    svg(name, W, H, |root| {
        const BINS: usize = 40;
        let (lo_us, hi_us) = if h.is_empty() {
            (1.0, 1000.0)
        } else {
            (h.min().max(1) as f64, h.max().max(2) as f64)
        };
        let hi_us = hi_us.max(lo_us * 4.0);
        let ratio = (hi_us / lo_us).powf(1.0 / BINS as f64);
        let edge = |i: usize| lo_us * ratio.powi(i as i32);
        let mut counts = vec![0u64; BINS];
        for v in h.iter_recorded() {
            let x = v.value_iterated_to() as f64;
            let b = ((x / lo_us).ln() / ratio.ln()).floor().max(0.0) as usize;
            counts[b.min(BINS - 1)] += v.count_at_value();
        }
        let ymax = counts.iter().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
        let mut chart = ChartBuilder::on(root)
            .caption(title, FONT)
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (lo_us / 1000.0..hi_us * ratio / 1000.0)
                    .log_scale()
                    .with_key_points(log_ticks(lo_us / 1000.0, hi_us * ratio / 1000.0)),
                0.0..ymax,
            )
            .map_err(|e| plot_err(name, e))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .x_desc("latency ms (log scale)")
            .y_desc("answers")
            .x_labels(8)
            .label_style(LABEL_FONT)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        chart
            .draw_series(counts.iter().enumerate().map(|(i, &c)| {
                Rectangle::new(
                    [(edge(i) / 1000.0, 0.0), (edge(i + 1) / 1000.0, c as f64)],
                    BLUE.mix(0.7).filled(),
                )
            }))
            .map_err(|e| plot_err(name, e))?;
        for (label, q, color) in [("p50", 0.5, RGBColor(0, 160, 0)), ("p99", 0.99, RED)] {
            if h.is_empty() {
                break;
            }
            let x = h.value_at_quantile(q) as f64 / 1000.0;
            chart
                .draw_series(LineSeries::new(
                    vec![(x, 0.0), (x, ymax)],
                    color.stroke_width(2),
                ))
                .map_err(|e| plot_err(name, e))?
                .label(format!("{label} {x:.2} ms"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .label_font(LABEL_FONT)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| plot_err(name, e))?;
        Ok(())
    })
}

/// One point of `searchd eval`'s recall-vs-QPS curve.
#[derive(Debug, Clone, Copy)]
pub struct RecallPoint {
    /// The `ef` search parameter of this point.
    pub ef: usize,
    /// Recall measured at this `ef`.
    pub recall: f64,
    /// Queries per second on one thread.
    pub qps_1thread: f64,
    /// Queries per second on all threads.
    pub qps_all_threads: f64,
}

/// Where an ef label of `chars` characters goes next to the point at pixel (`px`, `py`):
/// the first offset of a few around the point whose rectangle overlaps no label in
/// `placed` (then recorded there), or `None` when all would overprint.
fn free_label_spot(
    placed: &mut Vec<(i32, i32, i32, i32)>,
    px: i32,
    py: i32,
    chars: usize,
) -> Option<(i32, i32)> {
    let (w, h) = (7 * chars as i32 + 2, 15);
    const OFFSETS: [(i32, i32); 6] = [(6, -16), (6, 3), (-60, -16), (-60, 3), (6, -32), (6, 19)];
    for (dx, dy) in OFFSETS {
        let r = (px + dx, py + dy, px + dx + w, py + dy + h);
        let clear = placed
            .iter()
            .all(|q| r.2 <= q.0 || q.2 <= r.0 || r.3 <= q.1 || q.3 <= r.1);
        if clear {
            placed.push(r);
            return Some((dx, dy));
        }
    }
    None
}

/// `searchd eval --html`: QPS (log) against recall, one thread and all threads, each
/// point labelled with its ef where the label has room.
pub fn recall_qps_svg(points: &[RecallPoint], title: &str) -> Result<String, LoadError> {
    let name = "recall_qps";
    svg(name, W, 440, |root| {
        let rmin = points.iter().map(|p| p.recall).fold(1.0, f64::min);
        let x0 = (rmin - (1.0 - rmin).max(0.005) * 0.5).max(0.0);
        let x1 = 1.0 + (1.0 - x0) * 0.05;
        let (y0, y1) = log_range(
            points
                .iter()
                .flat_map(|p| [p.qps_1thread, p.qps_all_threads]),
            1.5,
        );
        let mut chart = ChartBuilder::on(root)
            .caption(title, FONT)
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                x0..x1,
                (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
            )
            .map_err(|e| plot_err(name, e))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .x_desc("recall@10")
            .y_desc("queries/s (log scale)")
            .label_style(LABEL_FONT)
            .x_label_formatter(&|v| format!("{v:.3}"))
            .y_label_formatter(&|v| tick(*v))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        type Get = fn(&RecallPoint) -> f64;
        let series: [(&str, RGBColor, Get); 2] = [
            ("1 thread", BLUE, |p| p.qps_1thread),
            ("all threads", RED, |p| p.qps_all_threads),
        ];
        // Label rectangles already drawn (pixels): an ef label goes to the first free spot
        // around its point, or is left out (the table beside the chart has every ef).
        let mut placed: Vec<(i32, i32, i32, i32)> = Vec::new();
        for (label, color, get) in series {
            let pts: Vec<(f64, f64, usize)> = points
                .iter()
                .filter(|p| get(p) > 0.0)
                .map(|p| (p.recall, get(p), p.ef))
                .collect();
            let spots: Vec<Option<(i32, i32)>> = pts
                .iter()
                .map(|&(x, y, ef)| {
                    let (px, py) = chart.backend_coord(&(x, y));
                    free_label_spot(&mut placed, px, py, format!("ef {ef}").len())
                })
                .collect();
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    color.stroke_width(2),
                ))
                .map_err(|e| plot_err(name, e))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(pts.iter().map(|&(x, y, _)| {
                    EmptyElement::at((x, y)) + Circle::new((0, 0), 4, color.filled())
                }))
                .map_err(|e| plot_err(name, e))?;
            chart
                .draw_series(pts.iter().zip(&spots).filter_map(|(&(x, y, ef), spot)| {
                    spot.map(|off| {
                        EmptyElement::at((x, y))
                            + Text::new(format!("ef {ef}"), off, ("sans-serif", 13))
                    })
                }))
                .map_err(|e| plot_err(name, e))?;
        }
        chart
            .configure_series_labels()
            .label_font(LABEL_FONT)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerLeft)
            .draw()
            .map_err(|e| plot_err(name, e))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::free_label_spot;

    #[test]
    fn ef_labels_never_overprint() {
        let mut placed = Vec::new();
        // Two points at the same pixel: the second label goes elsewhere.
        let a = free_label_spot(&mut placed, 100, 100, 6).unwrap();
        let b = free_label_spot(&mut placed, 100, 100, 6).unwrap();
        assert_ne!(a, b);
        // Many points on one pixel: labels run out instead of overprinting.
        let mut later = Vec::new();
        for _ in 0..10 {
            later.push(free_label_spot(&mut placed, 100, 100, 6));
        }
        assert!(later.iter().any(Option::is_none));
        for (i, p) in placed.iter().enumerate() {
            for q in &placed[i + 1..] {
                let apart = p.2 <= q.0 || q.2 <= p.0 || p.3 <= q.1 || q.3 <= p.1;
                assert!(apart, "labels {p:?} and {q:?} overlap");
            }
        }
        // A point far away gets the first spot.
        assert_eq!(free_label_spot(&mut placed, 400, 300, 6), Some((6, -16)));
    }
}
