//! HTML report with inline SVG charts drawn by plotters.
//!
//! Order of the page: the verdict and the headline numbers first (sustainable, peak,
//! recall, the open-loop send-time error), then the table and the first answer of every
//! error kind, then the charts a capacity engineer reads (throughput and latency per
//! step, throughput against p99 with the SLO, server CPU and RSS, recall under load,
//! error kinds, a per-second series inside a step, the latency histogram), and the raw
//! JSON last, collapsed. Latency axes are logarithmic and scaled to the data, not to the
//! SLO line (a fast server's lines would otherwise lie on the axis).

use crate::error::LoadError;
use crate::report::{Report, Step};
mod charts;

pub use charts::{
    errors_svg, histogram_svg, latency_svg, per_second_svg, qps_p99_svg, qps_svg, recall_qps_svg,
    recall_svg, server_svg, RecallPoint,
};

/// HTML-escape.
pub fn esc(s: &str) -> String {
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
            "<h3>{lvl}</h3>\n<table class=\"t\"><tr><th>endpoint</th><th>requests</th><th>ok</th><th>errors</th><th>qps</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>mean ms</th><th>max ms</th><th>error kinds</th></tr>\n"
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

/// The stylesheet shared by the load report and `eval --html`.
pub const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}.warn{color:#a40}.svg{margin:1em 0}table.t{border-collapse:collapse;font-size:13px;margin:.5em 0}table.t td,table.t th{border:1px solid #ccc;padding:2px 8px;text-align:right}table.t td.l{text-align:left;font-family:monospace;font-size:12px}.verdict{font-size:1.3em;padding:.6em 1em;border-radius:6px;margin:1em 0}.pass{background:#e3f6e3;border:1px solid #3a3}.fail{background:#fbe4e4;border:1px solid #c33}details{margin:2em 0}summary{cursor:pointer;font-weight:bold}";

fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.prec$}"))
}

/// The headline: verdict, sustainable, peak, recall, send-time error.
fn headline(r: &Report) -> String {
    let verdict = crate::report::verdict(r);
    let class = if r.sustainable.is_some() && !r.interrupted {
        "pass"
    } else {
        "fail"
    };
    let mut out = format!("<div class=\"verdict {class}\">{}</div>\n", esc(&verdict));
    let best = |b: &Option<crate::report::Best>| match b {
        None => "none".to_string(),
        Some(b) => {
            let lvl = match b.rate {
                Some(rate) => format!("rate {rate:.0}/s"),
                None => format!("concurrency {}", b.concurrency),
            };
            format!("{:.1} QPS at {lvl}, p99 {} ms", b.qps, fmt_opt(b.p99_ms, 2))
        }
    };
    out.push_str("<table class=\"t\">\n");
    out.push_str(&format!(
        "<tr><th>sustainable (best step within the SLO)</th><td class=\"l\">{}</td></tr>\n",
        esc(&best(&r.sustainable))
    ));
    out.push_str(&format!(
        "<tr><th>peak (best step within the error cap, any latency)</th><td class=\"l\">{}</td></tr>\n",
        esc(&best(&r.peak))
    ));
    let step = r
        .sustainable_step()
        .or_else(|| r.peak.as_ref().and_then(|p| r.steps.get(p.step)));
    if let Some(rec) = step.and_then(|s| s.recall_at_k) {
        out.push_str(&format!(
            "<tr><th>recall@{} under load (that step)</th><td class=\"l\">{rec:.4}</td></tr>\n",
            r.config.k
        ));
    }
    if r.is_open_loop() {
        let worst = r.steps.iter().filter_map(|s| s.send_error_us).fold(
            None::<crate::stats::SendError>,
            |a, e| match a {
                Some(a) if a.p99_us >= e.p99_us => Some(a),
                _ => Some(e),
            },
        );
        if let Some(e) = worst {
            out.push_str(&format!(
                "<tr><th>open-loop send-time error (worst step)</th><td class=\"l\">p50 {:.1} us, p99 {:.1} us, max {:.1} us (latency is measured from the scheduled time)</td></tr>\n",
                e.p50_us, e.p99_us, e.max_us
            ));
        }
    }
    out.push_str(&format!(
        "<tr><th>SLO</th><td class=\"l\">p99 &le; {} ms and errors &le; {}% per step</td></tr>\n",
        r.config.slo_p99_ms,
        r.config.max_error_rate * 100.0
    ));
    out.push_str("</table>\n");
    out
}

/// The first answer of each error kind, over the whole run.
fn first_errors_table(r: &Report) -> String {
    let mut rows: Vec<(&str, String, &str)> = Vec::new();
    for s in &r.steps {
        let lvl = match s.rate {
            Some(rate) => format!("rate {rate:.0}/s"),
            None => format!("c={}", s.concurrency),
        };
        for (k, m) in s.first_errors.iter() {
            if !rows.iter().any(|r| r.0 == k) {
                rows.push((k, lvl.clone(), m));
            }
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2>First answer of each error kind</h2>\n<table class=\"t\"><tr><th>kind</th><th>first seen</th><th>answer or failure</th></tr>\n",
    );
    for (k, lvl, m) in rows {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>\n",
            esc(k),
            esc(&lvl),
            esc(m)
        ));
    }
    out.push_str("</table>\n");
    out
}

/// The full HTML page.
pub fn render_html(r: &Report) -> Result<String, LoadError> {
    render_html_with(r, "")
}

/// The full HTML page with `top` (HTML) right after the headline, e.g. the demo's
/// recall gate.
pub fn render_html_with(r: &Report, top: &str) -> Result<String, LoadError> {
    render_html_titled(r, &format!("searchd load: {}", r.target), top)
}

/// [`render_html_with`] under the headline `title` instead of the target's URL (the demo's
/// servers listen on an ephemeral port, which says nothing once the report is read).
pub fn render_html_titled(r: &Report, title: &str, top: &str) -> Result<String, LoadError> {
    let mut table = Vec::new();
    crate::report::print_table(r, &mut table).expect("write to Vec");
    let table = String::from_utf8_lossy(&table).into_owned();
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">");
    out.push_str(&format!(
        "<title>{}</title>\n<style>{STYLE}</style></head><body>\n",
        esc(title)
    ));
    out.push_str(&format!(
        "<h1>{}</h1>\n<p>Target {}: {} {} loop{}. Sustainable = best QPS with p99 &le; {} ms and error rate &le; {}%; peak = best QPS within the error cap regardless of latency (not a capacity figure).</p>\n",
        esc(title),
        esc(&r.target),
        esc(if r.mix.is_some() { "--mix" } else { &r.config.endpoint }),
        esc(&r.mode),
        if r.optimistic { ", OPTIMISTIC (one repeated query)" } else { "" },
        r.config.slo_p99_ms,
        r.config.max_error_rate * 100.0
    ));
    out.push_str(&headline(r));
    for w in &r.warnings {
        out.push_str(&format!("<p class=\"warn\">warning: {}</p>\n", esc(w)));
    }
    if let Some(a) = &r.aborted {
        out.push_str(&format!("<p class=\"warn\">aborted: {}</p>\n", esc(a)));
    }
    out.push_str(top);
    out.push_str("<h2>Steps</h2>\n");
    out.push_str(&format!("<pre>{}</pre>\n", esc(&table)));
    out.push_str(&first_errors_table(r));
    if !r.steps.is_empty() {
        out.push_str("<h2>Charts</h2>\n");
        let mut push = |s: String| out.push_str(&format!("<div class=\"svg\">{s}</div>\n"));
        push(qps_svg(r)?);
        push(latency_svg(r)?);
        push(qps_p99_svg(r)?);
        if let Some(s) = server_svg(r)? {
            push(s);
        }
        if let Some(s) = recall_svg(r)? {
            push(s);
        }
        if let Some(s) = errors_svg(r)? {
            push(s);
        }
        let (which, step) = match (r.sustainable_step(), &r.peak) {
            (Some(s), _) => ("sustainable", Some(s)),
            (None, Some(p)) => ("peak (no step met the SLO)", r.steps.get(p.step)),
            _ => ("last", r.steps.last()),
        };
        if let Some(s) = step {
            let lvl = match s.rate {
                Some(rate) => format!("rate {rate:.0}/s"),
                None => format!("concurrency {}", s.concurrency),
            };
            if let Some(svg) =
                per_second_svg(s, &format!("Second by second, {which} step ({lvl})"))?
            {
                push(svg);
            }
            push(histogram_svg(
                s,
                &format!("Latency histogram, {which} step ({lvl})"),
            )?);
        }
    }
    out.push_str(&endpoint_tables(r));
    out.push_str(&format!(
        "<details><summary>Raw JSON report ({})</summary><pre>{}</pre></details>\n</body></html>\n",
        esc(&r.schema),
        esc(&crate::report::to_json(r))
    ));
    Ok(out)
}
