//! What a load run is told ([`LoadConfig`], plain values with documented defaults) and the
//! parsers of its values (durations, ramps, rates, picks, endpoints), which the binary's
//! flags use.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::client_mode::{CacheMode, RetryAfter};
pub use crate::endpoint::{parse_endpoint, Endpoint};

/// Default closed-loop ramp.
pub const DEFAULT_RAMP: &str = "1,2,4,8,16,32,64,96,128,192,256";

/// What `searchd load` measures and how: the flags of `searchd load` (CONTRACTS.md) as plain
/// values, parsed by the binary (`crates/cli/src/flags/load.rs`) or built by a caller
/// (`searchd demo`, tests) from [`LoadConfig::new`], which has every flag's default.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Base URL of the server under test: http://HOST:PORT (default port 80) or
    /// https://HOST:PORT (default port 443; the certificate must verify against --ca,
    /// else the system CA bundle, and name HOST), e.g. http://127.0.0.1:8080.
    pub url: String,

    /// https: the CA certificates (PEM, one or more) that the server's certificate must
    /// chain to; they replace the system CA bundle. Without it https uses the system bundle
    /// (/etc/ssl/certs/ca-certificates.crt or /etc/pki/tls/certs/ca-bundle.crt) and is
    /// refused when there is none. A usage error with an http:// URL.
    pub ca: Option<PathBuf>,

    /// Method and path to load. 'POST /search' sends rotating query bodies and
    /// checks every answer; 'GET /health' (or any GET) sends no body and only
    /// checks for status 200, a bare HTTP ceiling.
    pub endpoint: Endpoint,

    /// Closed-loop concurrency steps (each step = that many connections, one request in
    /// flight on each).
    pub ramp: Ramp,

    /// Open loop at one constant arrival rate (requests/s) instead of a ramp
    /// (also -q, as oha). Sends follow an absolute timeline kept by a dedicated
    /// thread (sleep, then spin on the monotonic clock); latency is measured from
    /// each request's scheduled send time (no coordinated omission), and how late
    /// sends left is reported as the step's send_error_us.
    pub rate: Option<f64>,

    /// Open loop over several arrival rates (requests/s), comma separated;
    /// stops after the first rate that breaks the SLO.
    pub rate_ramp: Option<Rates>,

    /// Warm-up time of each step; its measurements are discarded.
    /// Durations: 500ms, 5s, 2m, 1.5s (a bare number is seconds).
    pub warmup: Duration,

    /// Measured time of each step (also -z, as oha, and -d, as wrk).
    pub duration: Duration,

    /// Latency SLO: a step passes when its p99 is at most this many ms.
    pub slo_p99_ms: f64,

    /// Error cap: a step passes when at most this fraction of its requests failed
    /// (every error kind counts: 4xx, 5xx, 503, timeouts, connect, bad answers,
    /// open-loop drops). A step over it is never sustainable nor peak.
    pub max_error_rate: f64,

    /// Number of distinct queries to rotate over: bodies {"qidx": i, "k": K}
    /// for i in 0..N, rows of the query matrix the server was given
    /// (`serve --queries FILE`). The preflight refuses the run when the server
    /// rejects qidx N-1. (Old name --queries still works; given a .npy/.fvecs
    /// file it uses that file's row count.)
    pub query_count: usize,

    /// How the next query is chosen: uniform, zipf:S (skew S > 0, query 0 the
    /// hottest), seq (round robin), fixed:N (always query N; optimistic: the
    /// server's caches see one query; reported as such).
    pub pick: Pick,

    /// Send these bodies instead: JSON lines, each line sent verbatim (blank
    /// lines skipped). --pick chooses among the lines.
    pub body_file: Option<PathBuf>,

    /// Send text queries instead: a JSONL file whose lines hold the query text in
    /// --text-field (as dev-gcide's queries.jsonl); each body is {"text": ..., "k": K}.
    /// Line i (0-based, blank lines skipped) is row i of --gt.
    pub text_queries: Option<PathBuf>,

    /// Weighted mix of endpoints instead of one: NAME=FILE:WEIGHT, comma separated
    /// (WEIGHT a positive number, 1 when omitted; NAME letters, digits, '_', '-', unique).
    /// Each FILE holds one request per non-blank line: 'GET /collections/t/docs/d17',
    /// 'POST /collections/t/count {"filter": {...}}' (the JSON body follows the path),
    /// or a bare JSON object (sent to --endpoint). The lines are expanded into a seeded
    /// (--seed) schedule of at least 10000 requests, each endpoint drawn by weight and
    /// its lines rotating in order; --pick chooses among the schedule's entries. Each
    /// answer must have a 2xx status and, when not empty, a JSON body; the report
    /// gives every step's figures per endpoint (steps[].endpoints).
    pub mix: Option<crate::mix::MixSpec>,

    /// Label the run as measuring a cold or a warm cache (recorded in the report).
    /// `cold`: every request gets a cache key never used before: a unique query
    /// parameter `nonce=N` (process-wide counter) is appended to each request's path
    /// (`?nonce=N`, or `&nonce=N` when the path has a query). searchd's response cache
    /// keys include the query string, so every key is new, while the server ignores the
    /// parameter. Requests are then serialised per send. `warm`: requests are sent as
    /// they are, so repeated bodies can be served from a cache (the warm-up primes it).
    pub cache: Option<CacheMode>,

    /// Field of --text-queries lines that holds the text.
    pub text_field: String,

    /// Add "mode" to --text-queries bodies: dense, lexical or hybrid (the server's
    /// default for the collection otherwise). Lexical answers may hold fewer than k hits.
    pub text_mode: Option<String>,

    /// Hits asked for in generated bodies ("k"); each answer must have exactly
    /// min(k, n) hits.
    pub k: u32,

    /// Add "ef" to generated bodies (the server's default otherwise).
    pub ef: Option<u32>,

    /// Exact neighbour ids (.npy int32/int64 2-D, or .ivecs), row = qidx:
    /// report recall@k of the answers under load (not tie-aware).
    pub gt: Option<PathBuf>,

    /// Number of vectors in the index: hit ids must be below it, and answers
    /// must have min(k, n) hits. Default: taken from GET /stats when present.
    pub n_max: Option<u64>,

    /// Repeat the whole ramp N times; each step reports the median over trials
    /// with min/max spread of QPS and p99.
    pub trials: u32,

    /// Open loop: size of the connection pool. A request due while every
    /// connection is busy is dropped and counted as such.
    pub connections: usize,

    /// Open loop: a send later than this past its scheduled time counts as late.
    pub late_threshold: Duration,

    /// Per-request timeout (connect + send + full answer); counted as `timeout`.
    pub request_timeout: Duration,

    /// Server process id for RSS and CPU from /proc when the target has no
    /// GET /stats.
    pub server_pid: Option<u32>,

    /// What a closed-loop slot does after a 503 or 429 answer: `ignore` sends its next
    /// request at once (a client that never backs off, the worst case, as wrk and oha
    /// do); `honor` first waits the answer's Retry-After seconds (a well-behaved
    /// client; at most 10 s and never past the step's end). The open loop is not
    /// affected: its arrivals are scheduled.
    pub retry_after: RetryAfter,

    /// Make the library call fail (LoadError::SloFailed) when no step meets the SLO.
    /// `searchd load` always exits 1 then; the flag is kept for old scripts.
    pub fail_on_slo: bool,

    /// Seed for query choice (uniform, zipf).
    pub seed: u64,

    /// Client threads sending requests (default: all cores). Each runs its own
    /// event loop with its share of the connections, like wrk's threads (also -t).
    pub threads: Option<usize>,

    /// No live progress line and no per-step lines on stderr.
    pub quiet: bool,

    /// Write the searchd.load.v1 JSON report here.
    pub json: Option<PathBuf>,

    /// Write one CSV row per step here.
    pub csv: Option<PathBuf>,

    /// Write an HTML report with inline SVG charts here.
    pub html: Option<PathBuf>,
}

impl LoadConfig {
    /// Every flag's default, for the target `url`: endpoint `POST /search`, ramp
    /// [`DEFAULT_RAMP`], 5 s warm-up and 10 s measured per step, p99 SLO 100 ms, error cap
    /// 1%, 1,000 rotating queries picked uniformly (seed 42), k 10, one trial, 256
    /// open-loop connections, 10 ms late threshold, 10 s request timeout, `Retry-After`
    /// ignored, no `--ca` (https trusts the system CA bundle), no reports written.
    pub fn new(url: &str) -> LoadConfig {
        LoadConfig {
            url: url.to_string(),
            ca: None,
            endpoint: parse_endpoint("POST /search").expect("the default endpoint parses"),
            ramp: parse_ramp(DEFAULT_RAMP).expect("the default ramp parses"),
            rate: None,
            rate_ramp: None,
            warmup: Duration::from_secs(5),
            duration: Duration::from_secs(10),
            slo_p99_ms: 100.0,
            max_error_rate: 0.01,
            query_count: 1000,
            pick: Pick::Uniform,
            body_file: None,
            text_queries: None,
            mix: None,
            cache: None,
            text_field: "query".to_string(),
            text_mode: None,
            k: 10,
            ef: None,
            gt: None,
            n_max: None,
            trials: 1,
            connections: 256,
            late_threshold: Duration::from_millis(10),
            request_timeout: Duration::from_secs(10),
            server_pid: None,
            retry_after: RetryAfter::Ignore,
            fail_on_slo: false,
            seed: 42,
            threads: None,
            quiet: false,
            json: None,
            csv: None,
            html: None,
        }
    }

    /// Whether this is an open-loop run (`rate` or `rate_ramp`).
    pub fn open_loop(&self) -> bool {
        self.rate.is_some() || self.rate_ramp.is_some()
    }
}

/// Parse `--query-count`: a positive integer, or (the old `--queries` habit) the path
/// of a query matrix (.npy, .fvecs), whose row count is used.
pub fn parse_query_count(s: &str) -> Result<usize, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<usize>() {
        return Ok(n);
    }
    let path = std::path::Path::new(t);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !path.exists() || !matches!(ext.as_str(), "npy" | "fvecs") {
        return Err(format!(
            "'{s}' is not a number: --query-count (old name --queries) is how many rows of the server's query matrix to rotate over (the server reads the matrix: serve --queries FILE)"
        ));
    }
    searchd_vecio::count_rows(path).map_err(|e| format!("{s}: {e}"))
}

/// Closed-loop concurrency levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ramp(pub Vec<u32>);

/// Open-loop arrival rates (requests/s).
#[derive(Debug, Clone, PartialEq)]
pub struct Rates(pub Vec<f64>);

/// Query choice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pick {
    /// Uniformly random queries.
    Uniform,
    /// Zipf with exponent s over ranks 1..=n; rank r is query r-1.
    Zipf(f64),
    /// Queries in order, wrapping around (one sequence shared by all workers).
    Seq,
    /// Always query n (the last one when n is past the end).
    Fixed(usize),
}

impl fmt::Display for Pick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pick::Uniform => write!(f, "uniform"),
            Pick::Zipf(s) => write!(f, "zipf:{s}"),
            Pick::Seq => write!(f, "seq"),
            Pick::Fixed(n) => write!(f, "fixed:{n}"),
        }
    }
}

/// Parse `5s`, `500ms`, `2m`, `1h`, `250us`, `1.5s`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let err = || format!("invalid duration '{s}': expected e.g. 500ms, 5s, 2m");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(err());
    }
    let v: f64 = num.parse().map_err(|_| err())?;
    let secs = match unit.trim() {
        "" | "s" | "sec" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(err()),
    };
    if !secs.is_finite() || secs > 1e7 {
        return Err(err());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parse a ramp like `1,2,4,8`: positive integers, comma separated.
pub fn parse_ramp(s: &str) -> Result<Ramp, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let p = part.trim();
        let v: u32 = p.parse().map_err(|_| {
            format!("invalid ramp '{s}': '{p}' is not a positive integer (expected e.g. 1,2,4,8)")
        })?;
        if v == 0 {
            return Err(format!(
                "invalid ramp '{s}': concurrency must be at least 1"
            ));
        }
        if v > 100_000 {
            return Err(format!("invalid ramp '{s}': concurrency {v} is too large"));
        }
        out.push(v);
    }
    Ok(Ramp(out))
}

/// Parse one arrival rate (requests/s, > 0).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("invalid rate '{s}': expected requests per second, e.g. 500"))?;
    if !(v.is_finite() && v > 0.0 && v <= 10_000_000.0) {
        return Err(format!("invalid rate '{s}': must be > 0"));
    }
    Ok(v)
}

/// Parse a list of arrival rates like `100,200,400`.
pub fn parse_rates(s: &str) -> Result<Rates, String> {
    s.split(',')
        .map(parse_rate)
        .collect::<Result<Vec<_>, _>>()
        .map(Rates)
        .map_err(|e| format!("invalid rate ramp '{s}': {e}"))
}

/// Parse `uniform`, `zipf:S`, `seq`, `fixed:N`.
pub fn parse_pick(s: &str) -> Result<Pick, String> {
    let t = s.trim();
    let err =
        |why: &str| format!("invalid pick '{s}': {why} (expected uniform, zipf:S, seq or fixed:N)");
    match t.split_once(':') {
        None => match t {
            "uniform" => Ok(Pick::Uniform),
            "seq" => Ok(Pick::Seq),
            "zipf" => Ok(Pick::Zipf(1.0)),
            "fixed" => Ok(Pick::Fixed(0)),
            _ => Err(err("unknown mode")),
        },
        Some(("zipf", v)) => {
            let e: f64 = v
                .parse()
                .map_err(|_| err("zipf exponent is not a number"))?;
            if !(e.is_finite() && e > 0.0) {
                return Err(err("zipf exponent must be > 0"));
            }
            Ok(Pick::Zipf(e))
        }
        Some(("fixed", v)) => v
            .parse()
            .map(Pick::Fixed)
            .map_err(|_| err("fixed index is not a non-negative integer")),
        Some(_) => Err(err("unknown mode")),
    }
}
