//! The `searchd.load.v1` report and its renderings (table, CSV, JSON).

use std::io::Write;

use hdrhistogram::Histogram;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::stats::{ErrorCounts, FirstErrors, Percentiles, SecondStat, SendError, Spread};

/// Schema id of the JSON report.
pub const SCHEMA: &str = "searchd.load.v1";

/// The whole result of a run: `searchd.load.v1` (see docs/schemas).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Always "searchd.load.v1".
    pub schema: String,
    /// Base URL loaded, scheme included: e.g. "http://127.0.0.1:8080" or
    /// "https://search.example:8443".
    pub target: String,
    /// Effective settings.
    pub config: Config,
    /// One entry per load level reached (medians when `--trials` > 1).
    pub steps: Vec<Step>,
    /// Best-QPS step with p99 within the SLO and error rate within the cap;
    /// null when none passes.
    pub sustainable: Option<Best>,
    /// Best-QPS step regardless of SLO; null when no step had an ok answer.
    pub peak: Option<Best>,
    /// "closed" (concurrency ramp) or "open" (constant arrival rate).
    pub mode: String,
    /// True for `--pick fixed:N`: one repeated query flatters caches, so these
    /// numbers are optimistic and must not be quoted as capacity.
    pub optimistic: bool,
    /// Why the run stopped early (partial results kept), null otherwise.
    pub aborted: Option<String>,
    /// The run was stopped by Ctrl-C (SIGINT): finished steps are complete, the last one
    /// may be `partial`.
    pub interrupted: bool,
    /// Human-readable caveats (optimistic mode, saturated client, ...).
    pub warnings: Vec<String>,
    /// Where server RSS/CPU came from: "stats", "proc" or "none".
    pub server_source: String,
    /// The load generator itself.
    pub client: ClientInfo,
    /// Unix time the run started.
    pub started_unix_s: f64,
    /// Wall time of the whole run.
    pub elapsed_s: f64,
    /// `--cache`: "cold" (a unique nonce on every request), "warm", or null when not given.
    pub cache: Option<crate::client_mode::CacheMode>,
    /// `--mix` endpoints, in the order given; absent without `--mix`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mix: Option<Vec<MixInfo>>,
}

/// One endpoint of `--mix`.
#[derive(Debug, Clone, Serialize)]
pub struct MixInfo {
    /// Endpoint name.
    pub name: String,
    /// The file of its request lines.
    pub file: String,
    /// Relative weight: its share of the requests.
    pub weight: f64,
    /// Requests (non-blank lines) in the file.
    pub lines: usize,
}

/// One endpoint's share of a step (`--mix`): counts summed over trials, latency of ok
/// answers (medians over trials, max the largest), qps = ok / window (median).
#[derive(Debug, Clone, Serialize)]
pub struct EndpointStep {
    /// Requests started in the window (ok + errors).
    pub requests: u64,
    /// Ok answers.
    pub ok: u64,
    /// Failed requests, all kinds.
    pub errors: u64,
    /// Failed requests by kind, non-zero kinds only.
    pub error_kinds: std::collections::BTreeMap<&'static str, u64>,
    /// Median latency, ms; None when no ok answer.
    pub p50_ms: Option<f64>,
    /// 95th percentile latency, ms; None when no ok answer.
    pub p95_ms: Option<f64>,
    /// 99th percentile latency, ms; None when no ok answer.
    pub p99_ms: Option<f64>,
    /// Mean latency, ms; None when no ok answer.
    pub mean_ms: Option<f64>,
    /// Largest latency, ms; None when no ok answer.
    pub max_ms: Option<f64>,
    /// Ok answers per second.
    pub qps: f64,
}

/// Per-endpoint figures of a step, in `--mix` order; serialised as an object keyed by
/// endpoint name.
#[derive(Debug, Clone, Default)]
pub struct Endpoints(pub Vec<(String, EndpointStep)>);

impl Endpoints {
    /// No endpoint (not a `--mix` run).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The figures of the endpoint called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&EndpointStep> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, e)| e)
    }
}

impl Serialize for Endpoints {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// The text line of one endpoint under its step.
pub fn endpoint_line(name: &str, e: &EndpointStep) -> String {
    let mut kinds: Vec<(&str, u64)> = e.error_kinds.iter().map(|(k, v)| (*k, *v)).collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    let kinds = kinds
        .iter()
        .take(3)
        .map(|(k, n)| format!("{k}:{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "{:>8} {name:<16} ok {:>8}  errors {:>6}  p50 {:>8}  p95 {:>8}  p99 {:>8} ms  {}",
        "",
        e.ok,
        e.errors,
        fmt_opt(e.p50_ms, 2),
        fmt_opt(e.p95_ms, 2),
        fmt_opt(e.p99_ms, 2),
        kinds
    )
    .trim_end()
    .to_string()
}

/// Effective settings of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Method and path loaded, e.g. `POST /search`.
    pub endpoint: String,
    /// Closed loop: the concurrency steps; None in open loop.
    pub ramp: Option<Vec<u32>>,
    /// Open loop: the arrival rates (requests/s); None in closed loop.
    pub rates: Option<Vec<f64>>,
    /// Warm-up of each step, s.
    pub warmup_s: f64,
    /// Measured time of each step, s.
    pub duration_s: f64,
    /// SLO: largest passing p99, ms.
    pub slo_p99_ms: f64,
    /// SLO: largest passing error rate (0..=1).
    pub max_error_rate: f64,
    /// Distinct `qidx` queries rotated over; None when bodies come from a file.
    pub queries: Option<usize>,
    /// How the next query is chosen (`--pick`).
    pub pick: String,
    /// `--body-file`, when given.
    pub body_file: Option<String>,
    /// `--text-queries` file (text bodies), when given.
    pub text_queries: Option<String>,
    /// `--text-mode` (the `mode` of text bodies), when given.
    #[serde(default)]
    pub text_mode: Option<String>,
    /// Number of distinct bodies rotated over.
    pub bodies: usize,
    /// Hits asked per query.
    pub k: u32,
    /// `ef` sent with each query; None: the server's default.
    pub ef: Option<u32>,
    /// `--gt` file, when given.
    pub gt: Option<String>,
    /// Upper bound on ids and on the hit count (from --n-max or GET /stats).
    pub n_max: Option<u64>,
    /// Times the whole ramp was repeated.
    pub trials: u32,
    /// Open loop: size of the connection pool.
    pub connections: usize,
    /// Open loop: a send later than this past its schedule counts as late, ms.
    pub late_threshold_ms: f64,
    /// Timeout of each request, s.
    pub request_timeout_s: f64,
    /// Seed of the query picker.
    pub seed: u64,
    /// `--server-pid`, when given.
    pub server_pid: Option<u32>,
    /// `--fail-on-slo` was given.
    pub fail_on_slo: bool,
    /// "ignore" or "honor" (`--retry-after`).
    pub retry_after: crate::client_mode::RetryAfter,
}

/// The load generator's environment.
#[derive(Debug, Clone, Serialize)]
pub struct ClientInfo {
    /// Version of the load generator.
    pub version: String,
    /// Cores available to the load generator.
    pub cores: usize,
    /// Async runtime worker threads.
    pub threads: usize,
}

/// One load level.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Closed loop: requests in flight (= connections). Open loop: size of
    /// the connection pool.
    pub concurrency: u32,
    /// Open loop: offered arrival rate (requests/s); null in closed loop.
    pub rate: Option<f64>,
    /// Measured window in seconds (from the end of warm-up to the last
    /// answer of a request started within `--duration`).
    pub duration_s: f64,
    /// Requests started in the window (ok + errors), summed over trials.
    pub requests: u64,
    /// Ok answers, summed over trials.
    pub ok: u64,
    /// Failed requests by kind (every kind present, zeros included).
    pub errors: ErrorCounts,
    /// Failed / all requests (0..=1).
    pub error_rate: f64,
    /// Ok answers per second (median over trials).
    pub qps: f64,
    /// Latency of ok answers in ms (closed loop: from send; open loop: from
    /// the scheduled send time). Null when no ok answer.
    pub latency_ms: Percentiles,
    /// Mean recall@k of ok answers against `--gt` (NOT tie-aware: an id
    /// counts only when it is among the first k exact ids); null without --gt.
    pub recall_at_k: Option<f64>,
    /// Server resources during the window.
    pub server: ServerStep,
    /// The step met the SLO.
    pub slo_pass: bool,
    /// All requests (ok + failed) per second.
    pub rps: f64,
    /// Open loop: sends later than `--late-threshold` past their schedule.
    pub late: u64,
    /// Open loop: requests not sent because no connection was free (also
    /// counted in `errors.dropped`).
    pub dropped: u64,
    /// CPU used by the load generator during the window, % of one core.
    pub client_cpu_pct: f64,
    /// The load generator was near its CPU limit: numbers may be client-bound.
    pub client_saturated: bool,
    /// Spread of QPS and p99 over trials.
    pub trials: TrialSpread,
    /// Why this step has no latency numbers, or other remarks.
    pub note: Option<String>,
    /// Cut short by Ctrl-C: fewer seconds were measured than `--duration`. A partial step
    /// never passes the SLO and is never `sustainable` or `peak`.
    pub partial: bool,
    /// The first answer (status and body, truncated) or failure message of each error
    /// kind that occurred, keyed like `errors`.
    pub first_errors: FirstErrors,
    /// Open loop: how late sends left against their scheduled time (actual - intended),
    /// in microseconds: the dispatcher's achieved resolution. Latencies are measured
    /// from the intended time, so this lag is part of them. Null in closed loop.
    pub send_error_us: Option<SendError>,
    /// Second by second inside the measured window (first trial): ok answers, errors
    /// and the latency of the ok answers that finished in that second.
    pub per_second: Vec<SecondStat>,
    /// Unix time (s) of the start of the measured window of the first trial: second `t`
    /// of `per_second` is `[start + t, start + t + 1)`.
    pub measure_start_unix_s: f64,
    /// `--mix` runs: the step's figures per endpoint, keyed by name; absent otherwise.
    #[serde(skip_serializing_if = "Endpoints::is_empty")]
    pub endpoints: Endpoints,
    /// Latency histogram of ok answers (not serialised).
    #[serde(skip)]
    pub hist: Histogram<u64>,
}

/// Server resources during a step.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerStep {
    /// Resident memory at the end of the window; null when unknown.
    pub rss_bytes: Option<u64>,
    /// CPU over the window, % of one core; null when unknown.
    pub cpu_pct: Option<f64>,
    /// "stats", "proc" or "none".
    pub source: String,
}

/// Spread over trials.
#[derive(Debug, Clone, Serialize)]
pub struct TrialSpread {
    /// Trials that reached this step.
    pub n: u32,
    /// QPS over trials.
    pub qps: Spread,
    /// p99 over trials, ms; None when no trial has a p99.
    pub p99_ms: Option<Spread>,
}

/// A chosen step (`sustainable` or `peak`).
#[derive(Debug, Clone, Serialize)]
pub struct Best {
    /// The step's concurrency.
    pub concurrency: u32,
    /// The step's arrival rate (open loop); None in closed loop.
    pub rate: Option<f64>,
    /// The step's ok answers per second.
    pub qps: f64,
    /// The step's p99 latency, ms; None when no ok answer.
    pub p99_ms: Option<f64>,
    /// Index into `steps`.
    pub step: usize,
}

impl Serialize for FirstErrors {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.iter() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for ErrorCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(crate::stats::ErrorKind::COUNT))?;
        for (k, v) in self.iter() {
            m.serialize_entry(k, &v)?;
        }
        m.end()
    }
}

fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) => format!("{x:.prec$}"),
        None => "-".into(),
    }
}

fn top_errors(e: &ErrorCounts) -> String {
    let mut v: Vec<(&str, u64)> = e.iter().filter(|(_, n)| *n > 0).collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    v.iter()
        .take(3)
        .map(|(k, n)| format!("{k}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Report {
    /// The sustainable step, if one passed the SLO.
    pub fn sustainable_step(&self) -> Option<&Step> {
        self.sustainable
            .as_ref()
            .and_then(|b| self.steps.get(b.step))
    }
    /// The run was open loop (`--rate` or `--rate-ramp`).
    pub fn is_open_loop(&self) -> bool {
        self.mode == "open"
    }
}

/// Print the final table (plus sustainable/peak, warnings, abort reason).
pub fn print_table(r: &Report, w: &mut impl Write) -> std::io::Result<()> {
    let open = r.is_open_loop();
    writeln!(
        w,
        "searchd load: {} {}  ({} loop, warm-up {}s, measure {}s, SLO p99 <= {} ms, errors <= {}%{})",
        r.target,
        if r.mix.is_some() {
            "--mix"
        } else {
            r.config.endpoint.as_str()
        },
        r.mode,
        r.config.warmup_s,
        r.config.duration_s,
        r.config.slo_p99_ms,
        r.config.max_error_rate * 100.0,
        if r.config.trials > 1 {
            format!(", median of {} trials", r.config.trials)
        } else {
            String::new()
        }
    )?;
    if let Some(c) = r.cache {
        let what = match c {
            crate::client_mode::CacheMode::Cold => {
                "cold (a unique nonce query parameter on every request)"
            }
            crate::client_mode::CacheMode::Warm => "warm (requests repeat; caches may answer them)",
        };
        writeln!(w, "cache: {what}")?;
    }
    if let Some(mix) = &r.mix {
        let parts: Vec<String> = mix
            .iter()
            .map(|m| format!("{}={}:{} ({} lines)", m.name, m.file, m.weight, m.lines))
            .collect();
        writeln!(w, "mix: {}", parts.join(", "))?;
    }
    let lvl = if open { "rate/s" } else { "conc" };
    writeln!(
        w,
        "{lvl:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8} {:>8} {:>4}  errors",
        "qps",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "err%",
        "recall",
        "srv cpu%",
        "srv MiB",
        "cli cpu%",
        "SLO"
    )?;
    let mut shown: Vec<&str> = Vec::new();
    for s in &r.steps {
        let level = if open {
            format!("{:.0}", s.rate.unwrap_or(0.0))
        } else {
            s.concurrency.to_string()
        };
        let mut extra = top_errors(&s.errors);
        if open && s.late > 0 {
            extra.push_str(&format!(" late:{}", s.late));
        }
        if s.client_saturated {
            extra.push_str(" CLIENT-SATURATED");
        }
        if let Some(n) = &s.note {
            extra.push_str(&format!(" ({n})"));
        }
        writeln!(
            w,
            "{level:>8} {:>10.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7.2} {:>7} {:>8} {:>8} {:>8.0} {:>4}  {}",
            s.qps,
            fmt_opt(s.latency_ms.p50, 2),
            fmt_opt(s.latency_ms.p95, 2),
            fmt_opt(s.latency_ms.p99, 2),
            fmt_opt(s.latency_ms.p999, 2),
            fmt_opt(s.latency_ms.max, 2),
            s.error_rate * 100.0,
            fmt_opt(s.recall_at_k, 3),
            fmt_opt(s.server.cpu_pct, 0),
            fmt_opt(s.server.rss_bytes.map(|b| b as f64 / (1 << 20) as f64), 0),
            s.client_cpu_pct,
            if s.partial {
                "PART"
            } else if s.slo_pass {
                "ok"
            } else {
                "FAIL"
            },
            extra.trim()
        )?;
        for (name, e) in &s.endpoints.0 {
            writeln!(w, "{}", endpoint_line(name, e))?;
        }
        if let Some(e) = &s.send_error_us {
            writeln!(
                w,
                "{:>8} send-time error (actual - scheduled): p50 {:.1} us  p99 {:.1} us  max {:.1} us",
                "", e.p50_us, e.p99_us, e.max_us
            )?;
        }
        for (kind, msg) in s.first_errors.iter() {
            if shown.contains(&kind) {
                continue;
            }
            shown.push(kind);
            writeln!(w, "{:>8} first {kind}: {msg}", "")?;
        }
    }
    let best = |b: &Option<Best>| match b {
        None => "none".to_string(),
        Some(b) => {
            let lvl = match b.rate {
                Some(rate) => format!("rate {rate:.0}/s"),
                None => format!("concurrency {}", b.concurrency),
            };
            format!(
                "{:.1} QPS at {lvl} (p99 {} ms)",
                b.qps,
                fmt_opt(b.p99_ms, 2)
            )
        }
    };
    writeln!(w, "sustainable: {}", best(&r.sustainable))?;
    writeln!(
        w,
        "peak:        {}   (peak is not sustainable unless they coincide)",
        best(&r.peak)
    )?;
    for warn in &r.warnings {
        writeln!(w, "warning: {warn}")?;
    }
    if let Some(a) = &r.aborted {
        writeln!(w, "aborted: {a}")?;
    }
    writeln!(w, "verdict: {}", verdict(r))?;
    Ok(())
}

/// One line: whether the run found a sustainable step, and if not why.
pub fn verdict(r: &Report) -> String {
    let base = match (&r.sustainable, r.steps.is_empty()) {
        (Some(b), _) => {
            let lvl = match b.rate {
                Some(rate) => format!("rate {rate:.0}/s"),
                None => format!("concurrency {}", b.concurrency),
            };
            format!(
                "PASS: {:.1} QPS sustainable at {lvl} (p99 {} ms <= {} ms, errors <= {}%)",
                b.qps,
                fmt_opt(b.p99_ms, 2),
                r.config.slo_p99_ms,
                r.config.max_error_rate * 100.0
            )
        }
        (None, true) => "FAIL: no step was measured".to_string(),
        (None, false) => format!(
            "FAIL: no step met the SLO (p99 <= {} ms with errors <= {}%)",
            r.config.slo_p99_ms,
            r.config.max_error_rate * 100.0
        ),
    };
    if r.interrupted {
        format!("{base}; INTERRUPTED (Ctrl-C): results are partial")
    } else if r.aborted.is_some() {
        format!("{base}; ABORTED")
    } else {
        base
    }
}

/// CSV with a header and one row per step.
pub fn write_csv(r: &Report, w: &mut impl Write) -> std::io::Result<()> {
    let kinds: Vec<&str> = crate::stats::ErrorKind::ALL
        .iter()
        .map(|k| k.name())
        .collect();
    write!(
        w,
        "concurrency,rate,duration_s,requests,ok,error_rate,qps,rps,p50_ms,p95_ms,p99_ms,p999_ms,max_ms,mean_ms,recall_at_k,server_rss_bytes,server_cpu_pct,client_cpu_pct,client_saturated,late,dropped,slo_pass,trials,qps_min,qps_max,p99_min_ms,p99_max_ms"
    )?;
    for k in &kinds {
        write!(w, ",err_{k}")?;
    }
    writeln!(w)?;
    let o = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
    for s in &r.steps {
        write!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            s.concurrency,
            o(s.rate),
            s.duration_s,
            s.requests,
            s.ok,
            s.error_rate,
            s.qps,
            s.rps,
            o(s.latency_ms.p50),
            o(s.latency_ms.p95),
            o(s.latency_ms.p99),
            o(s.latency_ms.p999),
            o(s.latency_ms.max),
            o(s.latency_ms.mean),
            o(s.recall_at_k),
            s.server
                .rss_bytes
                .map(|b| b.to_string())
                .unwrap_or_default(),
            o(s.server.cpu_pct),
            s.client_cpu_pct,
            s.client_saturated,
            s.late,
            s.dropped,
            s.slo_pass,
            s.trials.n,
            s.trials.qps.min,
            s.trials.qps.max,
            o(s.trials.p99_ms.map(|p| p.min)),
            o(s.trials.p99_ms.map(|p| p.max)),
        )?;
        for (_, v) in s.errors.iter() {
            write!(w, ",{v}")?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// The JSON report as a string (pretty-printed).
pub fn to_json(r: &Report) -> String {
    serde_json::to_string_pretty(r).expect("report serialises")
}
