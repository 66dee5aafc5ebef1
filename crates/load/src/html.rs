//! HTML report with inline SVG charts drawn by plotters.

use plotters::prelude::*;

use crate::error::LoadError;
use crate::report::{Report, Step};

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

fn x_range(xs: &[f64]) -> (f64, f64) {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min).max(1e-3);
    let hi = xs.iter().copied().fold(0.0, f64::max).max(lo);
    (lo / 1.3, hi * 1.3)
}

fn x_label(r: &Report) -> &'static str {
    if r.is_open_loop() {
        "offered rate (requests/s, log scale)"
    } else {
        "concurrency (log scale)"
    }
}

const W: u32 = 760;
const H: u32 = 420;

/// QPS vs load level; sustainable step green, peak red.
pub fn qps_svg(r: &Report) -> Result<String, LoadError> {
    let name = "qps";
    let pts: Vec<(f64, f64)> = r.steps.iter().map(|s| (level(r, s), s.qps)).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(name, e))?;
        let (x0, x1) = x_range(&pts.iter().map(|p| p.0).collect::<Vec<_>>());
        let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption("Throughput (ok answers/s)", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..ymax)
            .map_err(|e| plot_err(name, e))?;
        chart
            .configure_mesh()
            .x_desc(x_label(r))
            .y_desc("QPS")
            .x_label_formatter(&|v| format!("{v}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), BLUE.stroke_width(2)))
            .map_err(|e| plot_err(name, e))?;
        let sus = r.sustainable.as_ref().map(|b| b.step);
        let peak = r.peak.as_ref().map(|b| b.step);
        chart
            .draw_series(pts.iter().enumerate().map(|(i, &p)| {
                let c = if Some(i) == sus {
                    GREEN.filled()
                } else if Some(i) == peak {
                    RED.filled()
                } else if r.steps[i].slo_pass {
                    BLUE.filled()
                } else {
                    RGBColor(150, 150, 150).filled()
                };
                Circle::new(p, 5, c)
            }))
            .map_err(|e| plot_err(name, e))?;
        root.present().map_err(|e| plot_err(name, e))?;
    }
    Ok(svg)
}

/// p50 / p95 / p99 vs load level with the SLO line.
pub fn latency_svg(r: &Report) -> Result<String, LoadError> {
    let name = "latency";
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(name, e))?;
        let xs: Vec<f64> = r.steps.iter().map(|s| level(r, s)).collect();
        let (x0, x1) = x_range(&xs);
        let ymax = r
            .steps
            .iter()
            .filter_map(|s| s.latency_ms.p99)
            .fold(r.config.slo_p99_ms, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption("Latency of ok answers (ms)", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x0..x1).log_scale(), 0.0..ymax)
            .map_err(|e| plot_err(name, e))?;
        chart
            .configure_mesh()
            .x_desc(x_label(r))
            .y_desc("ms")
            .x_label_formatter(&|v| format!("{v}"))
            .draw()
            .map_err(|e| plot_err(name, e))?;
        type Getter = fn(&Step) -> Option<f64>;
        let series: [(&str, RGBColor, Getter); 3] = [
            ("p50", BLUE, |s| s.latency_ms.p50),
            ("p95", RGBColor(230, 140, 0), |s| s.latency_ms.p95),
            ("p99", RED, |s| s.latency_ms.p99),
        ];
        for (label, color, get) in series {
            let pts: Vec<(f64, f64)> = r
                .steps
                .iter()
                .filter_map(|s| get(s).map(|v| (level(r, s), v)))
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
        let slo = r.config.slo_p99_ms;
        chart
            .draw_series(LineSeries::new(
                vec![(x0, slo), (x1, slo)],
                BLACK.stroke_width(1),
            ))
            .map_err(|e| plot_err(name, e))?
            .label(format!("SLO p99 {slo} ms"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| plot_err(name, e))?;
        root.present().map_err(|e| plot_err(name, e))?;
    }
    Ok(svg)
}

/// Latency histogram of one step: 40 log-spaced bins from the fastest to
/// the slowest answer, so both the body and the tail show.
pub fn histogram_svg(step: &Step, title: &str) -> Result<String, LoadError> {
    let name = "histogram";
    let h = &step.hist;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(name, e))?;
        const BINS: usize = 40;
        let (lo_us, hi_us) = if h.is_empty() {
            (1.0, 1000.0)
        } else {
            (h.min().max(1) as f64, h.max().max(2) as f64)
        };
        let hi_us = hi_us.max(lo_us * 2.0);
        let ratio = (hi_us / lo_us).powf(1.0 / BINS as f64);
        let edge = |i: usize| lo_us * ratio.powi(i as i32);
        let mut counts = vec![0u64; BINS];
        for v in h.iter_recorded() {
            let x = v.value_iterated_to() as f64;
            let b = ((x / lo_us).ln() / ratio.ln()).floor().max(0.0) as usize;
            counts[b.min(BINS - 1)] += v.count_at_value();
        }
        let ymax = counts.iter().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((lo_us / 1000.0..hi_us / 1000.0).log_scale(), 0.0..ymax)
            .map_err(|e| plot_err(name, e))?;
        chart
            .configure_mesh()
            .x_desc("latency ms (log scale)")
            .y_desc("answers")
            .x_label_formatter(&|v| format!("{v:.3}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
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
        for (label, q, color) in [("p50", 0.5, GREEN), ("p99", 0.99, RED)] {
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
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| plot_err(name, e))?;
        root.present().map_err(|e| plot_err(name, e))?;
    }
    Ok(svg)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `--mix` runs: one small table per step with each endpoint's figures; empty otherwise.
fn endpoint_tables(r: &Report) -> String {
    if r.steps.iter().all(|s| s.endpoints.is_empty()) {
        return String::new();
    }
    let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let mut out = String::from("<h2>Per endpoint</h2>\n");
    for s in &r.steps {
        if s.endpoints.is_empty() {
            continue;
        }
        let lvl = match s.rate {
            Some(rate) => format!("rate {rate:.0}/s"),
            None => format!("concurrency {}", s.concurrency),
        };
        out.push_str(&format!(
            "<h3>{lvl}</h3>\n<table class=\"ep\"><tr><th>endpoint</th><th>requests</th><th>ok</th><th>errors</th><th>qps</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>mean ms</th><th>max ms</th><th>error kinds</th></tr>\n"
        ));
        for (name, e) in &s.endpoints.0 {
            let kinds: Vec<String> = e
                .error_kinds
                .iter()
                .map(|(k, n)| format!("{k}:{n}"))
                .collect();
            out.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                esc(name),
                e.requests,
                e.ok,
                e.errors,
                e.qps,
                f(e.p50_ms),
                f(e.p95_ms),
                f(e.p99_ms),
                f(e.mean_ms),
                f(e.max_ms),
                esc(&kinds.join(" "))
            ));
        }
        out.push_str("</table>\n");
    }
    out
}

/// The full HTML page.
pub fn render_html(r: &Report) -> Result<String, LoadError> {
    let mut table = Vec::new();
    crate::report::print_table(r, &mut table).expect("write to Vec");
    let table = String::from_utf8_lossy(&table).into_owned();
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>searchd load report</title>\n",
    );
    out.push_str("<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}.warn{color:#a40}.svg{margin:1em 0}table.ep{border-collapse:collapse;font-size:13px}table.ep td,table.ep th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style></head><body>\n");
    out.push_str(&format!(
        "<h1>searchd load: {}</h1>\n<p>{} {} loop. Sustainable = best QPS with p99 &le; {} ms and error rate &le; {}%; peak = best QPS regardless (not a capacity figure).</p>\n",
        esc(&r.target),
        esc(&r.config.endpoint),
        esc(&r.mode),
        r.config.slo_p99_ms,
        r.config.max_error_rate * 100.0
    ));
    for w in &r.warnings {
        out.push_str(&format!("<p class=\"warn\">warning: {}</p>\n", esc(w)));
    }
    if let Some(a) = &r.aborted {
        out.push_str(&format!("<p class=\"warn\">aborted: {}</p>\n", esc(a)));
    }
    out.push_str(&format!("<pre>{}</pre>\n", esc(&table)));
    if !r.steps.is_empty() {
        out.push_str(&format!("<div class=\"svg\">{}</div>\n", qps_svg(r)?));
        out.push_str(&format!("<div class=\"svg\">{}</div>\n", latency_svg(r)?));
        let (which, step) = match (r.sustainable_step(), &r.peak) {
            (Some(s), _) => ("sustainable", Some(s)),
            (None, Some(p)) => ("peak (no step met the SLO)", r.steps.get(p.step)),
            _ => ("", None),
        };
        if let Some(s) = step {
            let lvl = match s.rate {
                Some(rate) => format!("rate {rate:.0}/s"),
                None => format!("concurrency {}", s.concurrency),
            };
            out.push_str(&format!(
                "<div class=\"svg\">{}</div>\n",
                histogram_svg(s, &format!("Latency histogram, {which} step ({lvl})"))?
            ));
        }
    }
    out.push_str(&endpoint_tables(r));
    out.push_str(&format!(
        "<h2>JSON</h2><pre>{}</pre>\n</body></html>\n",
        esc(&crate::report::to_json(r))
    ));
    Ok(out)
}
