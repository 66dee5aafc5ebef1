//! Counting: error kinds, latency histograms, SLO logic, best-step selection.

use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

/// Why a request did not count as ok. Every failed request is counted under
/// exactly one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// No full answer within `--request-timeout`.
    Timeout,
    /// TCP connect (or connection setup) failed or timed out.
    Connect,
    /// HTTP 503 Service Unavailable.
    Http503,
    /// HTTP 504 Gateway Timeout.
    Http504,
    /// Any other 4xx status.
    Http4xx,
    /// Any other 5xx status.
    Http5xx,
    /// A status that is neither 200 nor 4xx/5xx (1xx, 2xx other than 200, 3xx).
    HttpOther,
    /// The body is not JSON of the shape `{"hits":[{"id":..,"score":..}],"took_us":..}`.
    BadBody,
    /// Not exactly min(k, n) hits.
    WrongCount,
    /// Scores not sorted best (highest) first.
    Unsorted,
    /// A negative hit id, or one at or above `--n-max`.
    BadId,
    /// The connection broke while sending or receiving.
    Io,
    /// Open loop: the request was due while every connection was busy.
    Dropped,
}

impl ErrorKind {
    /// Every kind, in the fixed report order.
    pub const ALL: [ErrorKind; 13] = [
        ErrorKind::Timeout,
        ErrorKind::Connect,
        ErrorKind::Http503,
        ErrorKind::Http504,
        ErrorKind::Http4xx,
        ErrorKind::Http5xx,
        ErrorKind::HttpOther,
        ErrorKind::BadBody,
        ErrorKind::WrongCount,
        ErrorKind::Unsorted,
        ErrorKind::BadId,
        ErrorKind::Io,
        ErrorKind::Dropped,
    ];
    /// Number of kinds.
    pub const COUNT: usize = Self::ALL.len();

    /// The key used in the JSON `errors` object.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connect => "connect",
            ErrorKind::Http503 => "http_503",
            ErrorKind::Http504 => "http_504",
            ErrorKind::Http4xx => "http_4xx",
            ErrorKind::Http5xx => "http_5xx",
            ErrorKind::HttpOther => "http_other",
            ErrorKind::BadBody => "bad_body",
            ErrorKind::WrongCount => "wrong_count",
            ErrorKind::Unsorted => "unsorted",
            ErrorKind::BadId => "bad_id",
            ErrorKind::Io => "io",
            ErrorKind::Dropped => "dropped",
        }
    }

    fn idx(self) -> usize {
        self as usize
    }
}

/// Per-kind error counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts(pub [u64; ErrorKind::COUNT]);

impl ErrorCounts {
    /// Count one error of kind `k`.
    pub fn add(&mut self, k: ErrorKind) {
        self.0[k.idx()] += 1;
    }
    /// Count `n` errors of kind `k`.
    pub fn add_n(&mut self, k: ErrorKind, n: u64) {
        self.0[k.idx()] += n;
    }
    /// Errors of kind `k`.
    pub fn get(&self, k: ErrorKind) -> u64 {
        self.0[k.idx()]
    }
    /// Errors of all kinds.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// Add the counts of `o`.
    pub fn merge(&mut self, o: &ErrorCounts) {
        for (a, b) in self.0.iter_mut().zip(o.0.iter()) {
            *a += *b;
        }
    }
    /// (name, count) for every kind, zeros included, in a fixed order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        ErrorKind::ALL.iter().map(move |k| (k.name(), self.get(*k)))
    }
}

/// Longest message kept per error kind (the first answer body or failure of that kind).
pub const FIRST_ERROR_CHARS: usize = 300;

/// The first answer (body, or what went wrong) of each error kind: what a server says
/// about a failure usually names the mistake, so it is shown next to the counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FirstErrors(pub [Option<String>; ErrorKind::COUNT]);

impl FirstErrors {
    /// Whether kind `k` already has its first message.
    #[inline]
    pub fn has(&self, k: ErrorKind) -> bool {
        self.0[k.idx()].is_some()
    }
    /// Keep `msg` (truncated) as the first message of kind `k` unless one is kept.
    pub fn note(&mut self, k: ErrorKind, msg: impl Into<String>) {
        if self.0[k.idx()].is_none() {
            self.0[k.idx()] = Some(truncate_message(&msg.into()));
        }
    }
    /// Keep the messages of `o` for kinds that have none yet.
    pub fn merge(&mut self, o: &FirstErrors) {
        for (a, b) in self.0.iter_mut().zip(o.0.iter()) {
            if a.is_none() {
                a.clone_from(b);
            }
        }
    }
    /// (name, message) of the kinds that have one, in the fixed kind order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        ErrorKind::ALL
            .iter()
            .filter_map(move |k| self.0[k.idx()].as_deref().map(|m| (k.name(), m)))
    }
    /// No message is kept.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

/// One line, at most [`FIRST_ERROR_CHARS`] characters (control characters replaced), with
/// "..." when cut.
pub fn truncate_message(s: &str) -> String {
    let mut out = String::new();
    for (n, c) in s.trim().chars().enumerate() {
        if n == FIRST_ERROR_CHARS {
            out.push_str("...");
            return out;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}

/// An answer body as text for [`FirstErrors`] (lossy UTF-8, truncated).
pub fn body_text(status: u16, body: &[u8]) -> String {
    let cut = &body[..body.len().min(FIRST_ERROR_CHARS * 4)];
    let t = String::from_utf8_lossy(cut);
    if t.trim().is_empty() {
        format!("HTTP {status} with an empty body")
    } else {
        format!("HTTP {status}: {}", t.trim())
    }
}

/// Send-time error of an open-loop step: how late sends left against their
/// scheduled time (actual - intended), in microseconds. This is the achieved
/// resolution of the dispatcher; latencies are measured from the intended time,
/// so this lag is included in them.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct SendError {
    /// Median send lag, µs.
    pub p50_us: f64,
    /// 99th percentile send lag, µs.
    pub p99_us: f64,
    /// Largest send lag, µs.
    pub max_us: f64,
    /// Sends measured.
    pub n: u64,
}

/// Nanosecond histogram of send-time errors (3 significant digits).
pub fn new_ns_histogram() -> Histogram<u64> {
    new_histogram()
}

/// [`SendError`] of a nanosecond histogram; None when empty.
pub fn send_error(h: &Histogram<u64>) -> Option<SendError> {
    if h.is_empty() {
        return None;
    }
    Some(SendError {
        p50_us: h.value_at_quantile(0.5) as f64 / 1000.0,
        p99_us: h.value_at_quantile(0.99) as f64 / 1000.0,
        max_us: h.max() as f64 / 1000.0,
        n: h.len(),
    })
}

/// One second of a step's measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct SecondStat {
    /// Seconds since the start of the measured window (this second is [t, t+1)).
    pub t: u32,
    /// Ok answers that finished in this second.
    pub ok: u64,
    /// Errors that finished in this second.
    pub errors: u64,
    /// Latency of the ok answers that finished in this second, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile (see `p50_ms`); None when no ok answer.
    pub p99_ms: Option<f64>,
}

/// Most samples kept per step for the per-second series (8 bytes each).
pub const MAX_SECOND_SAMPLES: usize = 4_000_000;

/// Pack (second, error?, latency us) into one u64 sample.
#[inline]
pub fn pack_sample(sec: u32, err: bool, lat_us: u64) -> u64 {
    ((sec as u64) << 40) | ((err as u64) << 39) | lat_us.min((1 << 39) - 1)
}

/// The per-second series of packed samples (any order).
pub fn second_series(samples: &mut [u64]) -> Vec<SecondStat> {
    samples.sort_unstable();
    let mut out: Vec<SecondStat> = Vec::new();
    let mut i = 0;
    while i < samples.len() {
        let sec = (samples[i] >> 40) as u32;
        let mut j = i;
        while j < samples.len() && (samples[j] >> 40) as u32 == sec {
            j += 1;
        }
        let run = &samples[i..j];
        // Within a second, ok samples (bit 39 clear) sort first, by latency.
        let ok_n = run.iter().take_while(|v| (*v >> 39) & 1 == 0).count();
        let lat = |q: f64| -> Option<f64> {
            if ok_n == 0 {
                return None;
            }
            let r = ((q * ok_n as f64).ceil() as usize).clamp(1, ok_n) - 1;
            Some((run[r] & ((1 << 39) - 1)) as f64 / 1000.0)
        };
        out.push(SecondStat {
            t: sec,
            ok: ok_n as u64,
            errors: (run.len() - ok_n) as u64,
            p50_ms: lat(0.5),
            p99_ms: lat(0.99),
        });
        i = j;
    }
    out
}

/// Latency histogram in microseconds, 3 significant digits, auto-resizing
/// (memory bounded by the largest value, not by the sample count).
pub fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).expect("3 sigfig histogram");
    h.auto(true);
    h
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    /// Median (None: no sample).
    pub p50: Option<f64>,
    /// 95th percentile (None: no sample).
    pub p95: Option<f64>,
    /// 99th percentile (None: no sample).
    pub p99: Option<f64>,
    /// 99.9th percentile (None: no sample).
    pub p999: Option<f64>,
    /// Largest (None: no sample).
    pub max: Option<f64>,
    /// Mean (None: no sample).
    pub mean: Option<f64>,
}

/// Percentiles (ms) of a microsecond histogram; all `None` when it is empty.
pub fn percentiles_ms(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    let q = |p: f64| Some(h.value_at_quantile(p) as f64 / 1000.0);
    Percentiles {
        p50: q(0.50),
        p95: q(0.95),
        p99: q(0.99),
        p999: q(0.999),
        max: Some(h.max() as f64 / 1000.0),
        mean: Some(h.mean() / 1000.0),
    }
}

/// Whether a step meets the SLO: it had at least one ok answer, its p99 is
/// within `slo_p99_ms` and its error rate within `max_error_rate`.
pub fn slo_pass(
    ok: u64,
    p99_ms: Option<f64>,
    error_rate: f64,
    slo_p99_ms: f64,
    max_error_rate: f64,
) -> bool {
    ok > 0 && p99_ms.is_some_and(|p| p <= slo_p99_ms) && error_rate <= max_error_rate
}

/// Error rate = failed / attempted (0 when nothing was attempted).
pub fn error_rate(requests: u64, errors: u64) -> f64 {
    if requests == 0 {
        0.0
    } else {
        errors as f64 / requests as f64
    }
}

/// Index of the best step by QPS among those for which `eligible` holds; ties
/// go to the earlier (lower-load) step. Steps with no ok answer never win.
pub fn best_step<T>(
    steps: &[T],
    qps: impl Fn(&T) -> f64,
    eligible: impl Fn(&T) -> bool,
) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, s) in steps.iter().enumerate() {
        let q = qps(s);
        if !eligible(s) || q <= 0.0 || !q.is_finite() {
            continue;
        }
        let better = match best {
            None => true,
            Some((_, b)) => q > b,
        };
        if better {
            best = Some((i, q));
        }
    }
    best.map(|(i, _)| i)
}

/// Median of a non-empty slice (mean of the two middle values for even length).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Min / median / max of some values.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Spread {
    /// Smallest value.
    pub min: f64,
    /// Median value.
    pub median: f64,
    /// Largest value.
    pub max: f64,
}

/// Min / median / max of `v`; None when `v` is empty.
pub fn spread(v: &[f64]) -> Option<Spread> {
    Some(Spread {
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        median: median(v)?,
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// Open-loop schedule: send time of request `i` at `rate` per second,
/// relative to the start, in nanoseconds.
pub fn scheduled_offset_ns(i: u64, rate: f64) -> u64 {
    (i as f64 * 1e9 / rate).round() as u64
}

const LIVE_BUCKETS: usize = 512;

/// A coarse lock-free latency histogram (log-linear, 16 sub-buckets per
/// power of two, about 6% resolution) shared by all workers of a step, for
/// the live progress line only. Final numbers come from hdrhistogram.
pub struct LiveStats {
    /// Ok answers so far.
    pub ok: AtomicU64,
    /// Errors so far.
    pub errors: AtomicU64,
    buckets: Box<[AtomicU64]>,
}

impl Default for LiveStats {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveStats {
    /// Empty counters.
    pub fn new() -> Self {
        LiveStats {
            ok: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            buckets: (0..LIVE_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn bucket(us: u64) -> usize {
        if us < 16 {
            return us as usize;
        }
        let o = 63 - us.leading_zeros() as usize; // >= 4
        let sub = ((us >> (o - 4)) & 15) as usize;
        (16 + (o - 4) * 16 + sub).min(LIVE_BUCKETS - 1)
    }

    fn bucket_upper(idx: usize) -> u64 {
        if idx < 16 {
            return idx as u64;
        }
        let o = (idx - 16) / 16 + 4;
        let sub = ((idx - 16) % 16) as u64;
        ((16 + sub + 1) << (o - 4)) - 1
    }

    /// Count an ok answer of latency `us` microseconds.
    pub fn record_ok(&self, us: u64) {
        self.ok.fetch_add(1, Ordering::Relaxed);
        self.buckets[Self::bucket(us)].fetch_add(1, Ordering::Relaxed);
    }

    /// Count an error.
    pub fn record_err(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Forget latencies (counters keep running).
    pub fn reset_latency(&self) {
        for b in self.buckets.iter() {
            b.store(0, Ordering::Relaxed);
        }
    }

    /// Approximate quantile in microseconds (bucket upper bound), None if empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Self::bucket_upper(i));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_buckets_are_monotone_and_tight() {
        let mut last = 0;
        for us in [0u64, 1, 15, 16, 17, 31, 32, 100, 1000, 12345, 1 << 30] {
            let b = LiveStats::bucket(us);
            assert!(b >= last);
            last = b;
            let up = LiveStats::bucket_upper(b);
            assert!(up >= us, "{us} -> {b} -> {up}");
            assert!(up as f64 <= us as f64 * 1.07 + 1.0, "{us} -> {up}");
        }
    }
}
