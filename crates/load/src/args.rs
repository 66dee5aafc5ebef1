//! Command-line flags of `searchd load` and the parsers behind them.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// Default closed-loop ramp.
pub const DEFAULT_RAMP: &str = "1,2,4,8,16,32,64,96,128,192,256";

/// Capacity measurement of a server speaking the searchd HTTP API.
///
/// Closed loop (default): for each concurrency of `--ramp`, keep that many
/// requests in flight (one keep-alive connection each) for `--warmup`
/// (discarded) and then `--duration` (measured); stop after the first step
/// whose p99 exceeds `--slo-p99-ms` or whose error rate exceeds
/// `--max-error-rate`. Open loop (`--rate` / `--rate-ramp`): send at a constant
/// arrival rate, latency measured from the scheduled send time.
///
/// Every response is checked (status, JSON shape, hit count, score order);
/// failures are counted per kind, never dropped, and the first answer of each
/// kind is shown. A step passes when its p99 is within --slo-p99-ms and at most
/// --max-error-rate of its requests failed; a step over the error cap is never
/// sustainable nor peak.
///
/// Before any load, a preflight connects (failing within a second when nothing
/// listens) and sends one request. Exit status: 0 when some step passed, 1 when
/// none did or the run was aborted, 2 for bad flags or input files, 130 after
/// Ctrl-C (the first Ctrl-C ends the run and still prints the summary and writes
/// the reports, marking the cut step PARTIAL; a second one exits at once).
///
/// Habits from wrk and oha work: -c N (one step of N connections), -z/-d DURATION,
/// -q RATE (open loop), -t THREADS, --port P (http://127.0.0.1:P), and the URL as
/// the last argument.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Base URL of the server under test (plain http), e.g. http://127.0.0.1:8080.
    /// Required unless --port or a trailing URL argument gives it.
    #[arg(long, default_value = "", hide_default_value = true)]
    pub url: String,

    /// The target as wrk/oha take it: a trailing URL (base URL only; the path goes in
    /// --endpoint).
    #[arg(hide = true, value_name = "URL")]
    pub url_arg: Option<String>,

    /// Shorthand for --url http://127.0.0.1:PORT.
    #[arg(long, hide = true, value_name = "PORT")]
    pub port: Option<u16>,

    /// One closed-loop step of N connections (as wrk/oha -c): the same as --ramp N.
    #[arg(short = 'c', long = "concurrency", hide = true, value_name = "N",
          conflicts_with_all = ["ramp", "rate", "rate_ramp"],
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub concurrency: Option<u32>,

    /// oha's request count (-n): not supported, runs are timed (--duration).
    #[arg(short = 'n', hide = true, value_name = "N")]
    pub request_count: Option<String>,

    /// Method and path to load. 'POST /search' sends rotating query bodies and
    /// checks every answer; 'GET /health' (or any GET) sends no body and only
    /// checks for status 200, a bare HTTP ceiling.
    #[arg(long, default_value = "POST /search", value_parser = parse_endpoint)]
    pub endpoint: Endpoint,

    /// Closed-loop concurrency steps, comma separated (each step = that many
    /// connections, one request in flight on each).
    #[arg(long, default_value = DEFAULT_RAMP, value_parser = parse_ramp,
          conflicts_with_all = ["rate", "rate_ramp"])]
    pub ramp: Ramp,

    /// Open loop at one constant arrival rate (requests/s) instead of a ramp
    /// (also -q, as oha). Sends follow an absolute timeline kept by a dedicated
    /// thread (sleep, then spin on the monotonic clock); latency is measured from
    /// each request's scheduled send time (no coordinated omission), and how late
    /// sends left is reported as the step's send_error_us.
    #[arg(long, short_alias = 'q', conflicts_with = "rate_ramp", value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Open loop over several arrival rates (requests/s), comma separated;
    /// stops after the first rate that breaks the SLO.
    #[arg(long, value_parser = parse_rates)]
    pub rate_ramp: Option<Rates>,

    /// Warm-up time of each step; its measurements are discarded.
    /// Durations: 500ms, 5s, 2m, 1.5s (a bare number is seconds).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub warmup: Duration,

    /// Measured time of each step (also -z, as oha, and -d, as wrk).
    #[arg(long, short_alias = 'z', short_aliases = ['d'], default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Latency SLO: a step passes when its p99 is at most this many ms.
    #[arg(long, default_value_t = 100.0)]
    pub slo_p99_ms: f64,

    /// Error cap: a step passes when at most this fraction of its requests failed
    /// (every error kind counts: 4xx, 5xx, 503, timeouts, connect, bad answers,
    /// open-loop drops). A step over it is never sustainable nor peak.
    #[arg(long, default_value_t = 0.01)]
    pub max_error_rate: f64,

    /// Number of distinct queries to rotate over: bodies {"qidx": i, "k": K}
    /// for i in 0..N, rows of the query matrix the server was given
    /// (`serve --queries FILE`). The preflight refuses the run when the server
    /// rejects qidx N-1. (Old name --queries still works; given a .npy/.fvecs
    /// file it uses that file's row count.)
    #[arg(long = "query-count", alias = "queries", value_name = "N", default_value = "1000",
          value_parser = parse_query_count)]
    pub query_count: usize,

    /// How the next query is chosen: uniform, zipf:S (skew S > 0, query 0 the
    /// hottest), seq (round robin), fixed:N (always query N; optimistic: the
    /// server's caches see one query; reported as such).
    #[arg(long, default_value = "uniform", value_parser = parse_pick)]
    pub pick: Pick,

    /// Send these bodies instead: JSON lines, each line sent verbatim (blank
    /// lines skipped). --pick chooses among the lines.
    #[arg(long)]
    pub body_file: Option<PathBuf>,

    /// Send text queries instead: a JSONL file whose lines hold the query text in
    /// --text-field (as dev-gcide's queries.jsonl); each body is {"text": ..., "k": K}.
    /// Line i (0-based, blank lines skipped) is row i of --gt.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "body_file")]
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
    #[arg(long, value_name = "NAME=FILE:WEIGHT,...", value_parser = crate::mix::parse_mix,
          conflicts_with_all = ["body_file", "text_queries"])]
    pub mix: Option<crate::mix::MixSpec>,

    /// Label the run as measuring a cold or a warm cache (recorded in the report).
    /// `cold`: every request gets a cache key never used before: a unique query
    /// parameter `nonce=N` (process-wide counter) is appended to each request's path
    /// (`?nonce=N`, or `&nonce=N` when the path has a query). searchd's response cache
    /// keys include the query string, so every key is new, while the server ignores the
    /// parameter. Requests are then serialised per send. `warm`: requests are sent as
    /// they are, so repeated bodies can be served from a cache (the warm-up primes it).
    #[arg(long, value_enum)]
    pub cache: Option<CacheMode>,

    /// Field of --text-queries lines that holds the text.
    #[arg(long, default_value = "query")]
    pub text_field: String,

    /// Add "mode" to --text-queries bodies: dense, lexical or hybrid (the server's
    /// default for the collection otherwise). Lexical answers may hold fewer than k hits.
    #[arg(long, value_name = "MODE", value_parser = ["dense", "lexical", "hybrid"], requires = "text_queries")]
    pub text_mode: Option<String>,

    /// Hits asked for in generated bodies ("k"); each answer must have exactly
    /// min(k, n) hits.
    #[arg(long, default_value_t = 10)]
    pub k: u32,

    /// Add "ef" to generated bodies (the server's default otherwise).
    #[arg(long)]
    pub ef: Option<u32>,

    /// Exact neighbour ids (.npy int32/int64 2-D, or .ivecs), row = qidx:
    /// report recall@k of the answers under load (not tie-aware).
    #[arg(long)]
    pub gt: Option<PathBuf>,

    /// Number of vectors in the index: hit ids must be below it, and answers
    /// must have min(k, n) hits. Default: taken from GET /stats when present.
    #[arg(long)]
    pub n_max: Option<u64>,

    /// Repeat the whole ramp N times; each step reports the median over trials
    /// with min/max spread of QPS and p99.
    #[arg(long, default_value_t = 1)]
    pub trials: u32,

    /// Open loop: size of the connection pool. A request due while every
    /// connection is busy is dropped and counted as such.
    #[arg(long, default_value_t = 256)]
    pub connections: usize,

    /// Open loop: a send later than this past its scheduled time counts as late.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub late_threshold: Duration,

    /// Per-request timeout (connect + send + full answer); counted as `timeout`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Server process id for RSS and CPU from /proc when the target has no
    /// GET /stats.
    #[arg(long)]
    pub server_pid: Option<u32>,

    /// What a closed-loop slot does after a 503 or 429 answer: `ignore` sends its next
    /// request at once (a client that never backs off, the worst case, as wrk and oha
    /// do); `honor` first waits the answer's Retry-After seconds (a well-behaved
    /// client; at most 10 s and never past the step's end). The open loop is not
    /// affected: its arrivals are scheduled.
    #[arg(long, value_enum, default_value_t = RetryAfter::Ignore)]
    pub retry_after: RetryAfter,

    /// Make the library call fail (LoadError::SloFailed) when no step meets the SLO.
    /// `searchd load` always exits 1 then; the flag is kept for old scripts.
    #[arg(long)]
    pub fail_on_slo: bool,

    /// Seed for query choice (uniform, zipf).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Client threads sending requests (default: all cores). Each runs its own
    /// event loop with its share of the connections, like wrk's threads (also -t).
    #[arg(long, short_alias = 't')]
    pub threads: Option<usize>,

    /// No live progress line and no per-step lines on stderr.
    #[arg(long)]
    pub quiet: bool,

    /// Write the searchd.load.v1 JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Write one CSV row per step here.
    #[arg(long)]
    pub csv: Option<PathBuf>,

    /// Write an HTML report with inline SVG charts here.
    #[arg(long)]
    pub html: Option<PathBuf>,
}

#[derive(Parser)]
#[command(name = "load")]
struct Standalone {
    #[command(flatten)]
    args: LoadArgs,
}

impl LoadArgs {
    /// All defaults, for the given target URL.
    pub fn new(url: &str) -> Self {
        Self::try_parse_from(["--url", url]).expect("defaults parse")
    }

    /// Parse flags (without the program name), e.g.
    /// `LoadArgs::try_parse_from(["--url", "http://127.0.0.1:8080", "--ramp", "1,2"])`.
    pub fn try_parse_from<I, T>(flags: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let argv = std::iter::once(std::ffi::OsString::from("load"))
            .chain(flags.into_iter().map(Into::into));
        Standalone::try_parse_from(argv).map(|s| s.args)
    }

    /// Whether this is an open-loop run (`--rate` or `--rate-ramp`).
    pub fn open_loop(&self) -> bool {
        self.rate.is_some() || self.rate_ramp.is_some()
    }

    /// The target's base URL: --url, else the trailing URL argument, else --port on
    /// loopback; an error naming the flags when none was given.
    pub fn target_url(&self) -> Result<String, String> {
        if !self.url.trim().is_empty() {
            if self.url_arg.is_some() || self.port.is_some() {
                return Err("give the target once: --url, a trailing URL or --port".into());
            }
            return Ok(self.url.trim().to_string());
        }
        match (&self.url_arg, self.port) {
            (Some(_), Some(_)) => {
                Err("give the target once: --url, a trailing URL or --port".into())
            }
            (Some(u), None) => Ok(u.trim().to_string()),
            (None, Some(p)) => Ok(format!("http://127.0.0.1:{p}")),
            (None, None) => Err("--url is required (e.g. --url http://127.0.0.1:8080)".into()),
        }
    }

    /// The closed-loop concurrency steps: `-c N` or `--ramp`.
    pub fn ramp_levels(&self) -> Vec<u32> {
        match self.concurrency {
            Some(c) => vec![c],
            None => self.ramp.0.clone(),
        }
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
    crate::gt::count_rows(path).map_err(|e| format!("{s}: {e}"))
}

/// Client behaviour after `503`/`429` (see `--retry-after`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RetryAfter {
    Ignore,
    Honor,
}

/// `--cache`: what the run is labelled as measuring.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// A unique `nonce` query parameter on every request: no answer can come from a cache.
    Cold,
    /// Requests sent as they are: repeated ones may be served from a cache.
    Warm,
}

/// `METHOD /path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub method: hyper::Method,
    pub path: String,
}

impl Endpoint {
    /// True when requests carry a query body and answers get the full check.
    pub fn is_search(&self) -> bool {
        self.method != hyper::Method::GET && self.method != hyper::Method::HEAD
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
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
    Uniform,
    /// Zipf with exponent s over ranks 1..=n; rank r is query r-1.
    Zipf(f64),
    Seq,
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

/// Parse `POST /search`, `GET /health`.
pub fn parse_endpoint(s: &str) -> Result<Endpoint, String> {
    let err = |why: &str| {
        format!("invalid endpoint '{s}': {why} (expected e.g. 'POST /search' or 'GET /health')")
    };
    let mut it = s.split_whitespace();
    let (Some(m), Some(p), None) = (it.next(), it.next(), it.next()) else {
        return Err(err("needs a method and a path"));
    };
    let method = hyper::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
        .map_err(|_| err("bad method"))?;
    if !p.starts_with('/') {
        return Err(err("path must start with /"));
    }
    p.parse::<hyper::Uri>().map_err(|_| err("bad path"))?;
    Ok(Endpoint {
        method,
        path: p.to_string(),
    })
}
