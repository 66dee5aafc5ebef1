//! `searchd load`'s flags: clap's view of [`searchd_load::LoadConfig`] (the load library takes
//! the plain struct; only this binary parses arguments), with the habits of wrk and oha
//! (`-c`, `-z`/`-d`, `-q`, `-t`, `--port`, a trailing URL) resolved here.

use std::path::PathBuf;
use std::time::Duration;

use searchd_load::config::{Endpoint, Pick, Ramp, Rates};
use searchd_load::{CacheMode, LoadConfig, RetryAfter};

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
/// listens; for an https:// URL, also when the server's certificate does not verify
/// against --ca) and sends one request. Exit status: 0 when some step passed, 1 when
/// none did or the run was aborted, 2 for bad flags or input files, 130 after
/// Ctrl-C (the first Ctrl-C ends the run and still prints the summary and writes
/// the reports, marking the cut step PARTIAL; a second one exits at once).
///
/// Habits from wrk and oha work: -c N (one step of N connections), -z/-d DURATION,
/// -q RATE (open loop), -t THREADS, --port P (http://127.0.0.1:P), and the URL as
/// the last argument.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Base URL of the server under test: http://HOST:PORT, or https://HOST:PORT (TLS;
    /// default port 443; the server's certificate must verify against --ca, else the
    /// system CA bundle, and name HOST), e.g. http://127.0.0.1:8080. Required unless
    /// --port or a trailing URL argument gives it.
    #[arg(
        help_heading = "Target and connections",
        long,
        default_value = "",
        hide_default_value = true
    )]
    pub url: String,

    /// For an https:// --url: the CA certificates (PEM file, one or more) that the
    /// server's certificate must chain to; they replace the system CA bundle. Without
    /// --ca, https trusts /etc/ssl/certs/ca-certificates.crt or
    /// /etc/pki/tls/certs/ca-bundle.crt and is refused (exit 2) when neither exists. With
    /// an http:// URL it is refused (exit 2). A certificate that does not verify stops the
    /// run at the preflight, before any load.
    #[arg(help_heading = "Target and connections", long, value_name = "FILE")]
    pub ca: Option<PathBuf>,

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
    #[arg(help_heading = "Load shape", long, default_value = "POST /search", value_parser = searchd_load::config::parse_endpoint)]
    pub endpoint: Endpoint,

    /// Closed-loop concurrency steps, comma separated (each step = that many
    /// connections, one request in flight on each).
    #[arg(help_heading = "Load shape", long, default_value = searchd_load::config::DEFAULT_RAMP, value_parser = searchd_load::config::parse_ramp,
          conflicts_with_all = ["rate", "rate_ramp"])]
    pub ramp: Ramp,

    /// Open loop at one constant arrival rate (requests/s) instead of a ramp
    /// (also -q, as oha). Sends follow an absolute timeline kept by a dedicated
    /// thread (sleep, then spin on the monotonic clock); latency is measured from
    /// each request's scheduled send time (no coordinated omission), and how late
    /// sends left is reported as the step's send_error_us.
    #[arg(help_heading = "Load shape", long, short_alias = 'q', conflicts_with = "rate_ramp", value_parser = searchd_load::config::parse_rate)]
    pub rate: Option<f64>,

    /// Open loop over several arrival rates (requests/s), comma separated;
    /// stops after the first rate that breaks the SLO.
    #[arg(help_heading = "Load shape", long, value_parser = searchd_load::config::parse_rates)]
    pub rate_ramp: Option<Rates>,

    /// Warm-up time of each step; its measurements are discarded.
    /// Durations: 500ms, 5s, 2m, 1.5s (a bare number is seconds).
    #[arg(help_heading = "Load shape", long, default_value = "5s", value_parser = searchd_load::config::parse_duration)]
    pub warmup: Duration,

    /// Measured time of each step (also -z, as oha, and -d, as wrk).
    #[arg(help_heading = "Load shape", long, short_alias = 'z', short_aliases = ['d'], default_value = "10s", value_parser = searchd_load::config::parse_duration)]
    pub duration: Duration,

    /// Latency SLO: a step passes when its p99 is at most this many ms.
    #[arg(help_heading = "SLO", long, default_value_t = 100.0)]
    pub slo_p99_ms: f64,

    /// Error cap: a step passes when at most this fraction of its requests failed
    /// (every error kind counts: 4xx, 5xx, 503, timeouts, connect, bad answers,
    /// open-loop drops). A step over it is never sustainable nor peak.
    #[arg(help_heading = "SLO", long, default_value_t = 0.01)]
    pub max_error_rate: f64,

    /// Number of distinct queries to rotate over: bodies {"qidx": i, "k": K}
    /// for i in 0..N, rows of the query matrix the server was given
    /// (`serve --queries FILE`). The preflight refuses the run when the server
    /// rejects qidx N-1. (Old name --queries still works; given a .npy/.fvecs
    /// file it uses that file's row count.)
    #[arg(help_heading = "Queries", long = "query-count", alias = "queries", value_name = "N", default_value = "1000",
          value_parser = searchd_load::config::parse_query_count)]
    pub query_count: usize,

    /// How the next query is chosen: uniform, zipf:S (skew S > 0, query 0 the
    /// hottest), seq (round robin), fixed:N (always query N; optimistic: the
    /// server's caches see one query; reported as such).
    #[arg(help_heading = "Queries", long, default_value = "uniform", value_parser = searchd_load::config::parse_pick)]
    pub pick: Pick,

    /// Send these bodies instead: JSON lines, each line sent verbatim (blank
    /// lines skipped). --pick chooses among the lines.
    #[arg(help_heading = "Queries", long)]
    pub body_file: Option<PathBuf>,

    /// Send text queries instead: a JSONL file whose lines hold the query text in
    /// --text-field (as dev-gcide's queries.jsonl); each body is {"text": ..., "k": K}.
    /// Line i (0-based, blank lines skipped) is row i of --gt.
    #[arg(
        help_heading = "Queries",
        long,
        value_name = "FILE.jsonl",
        conflicts_with = "body_file"
    )]
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
    #[arg(help_heading = "Queries", long, value_name = "NAME=FILE:WEIGHT,...", value_parser = searchd_load::mix::parse_mix,
          conflicts_with_all = ["body_file", "text_queries"])]
    pub mix: Option<searchd_load::mix::MixSpec>,

    /// Label the run as measuring a cold or a warm cache (recorded in the report).
    /// `cold`: every request gets a cache key never used before: a unique query
    /// parameter `nonce=N` (process-wide counter) is appended to each request's path
    /// (`?nonce=N`, or `&nonce=N` when the path has a query). searchd's response cache
    /// keys include the query string, so every key is new, while the server ignores the
    /// parameter. Requests are then serialised per send. `warm`: requests are sent as
    /// they are, so repeated bodies can be served from a cache (the warm-up primes it).
    #[arg(help_heading = "Queries", long, value_enum)]
    pub cache: Option<CacheFlag>,

    /// Field of --text-queries lines that holds the text.
    #[arg(help_heading = "Queries", long, default_value = "query")]
    pub text_field: String,

    /// Add "mode" to --text-queries bodies: dense, lexical or hybrid (the server's
    /// default for the collection otherwise). Lexical answers may hold fewer than k hits.
    #[arg(help_heading = "Queries", long, value_name = "MODE", value_parser = ["dense", "lexical", "hybrid"], requires = "text_queries")]
    pub text_mode: Option<String>,

    /// Hits asked for in generated bodies ("k"); each answer must have exactly
    /// min(k, n) hits.
    #[arg(help_heading = "Queries", long, default_value_t = 10)]
    pub k: u32,

    /// Add "ef" to generated bodies (the server's default otherwise).
    #[arg(help_heading = "Queries", long)]
    pub ef: Option<u32>,

    /// Exact neighbour ids (.npy int32/int64 2-D, or .ivecs), row = qidx:
    /// report recall@k of the answers under load (not tie-aware).
    #[arg(help_heading = "Recall", long)]
    pub gt: Option<PathBuf>,

    /// Number of vectors in the index: hit ids must be below it, and answers
    /// must have min(k, n) hits. Default: taken from GET /stats when present.
    #[arg(help_heading = "Recall", long)]
    pub n_max: Option<u64>,

    /// Repeat the whole ramp N times; each step reports the median over trials
    /// with min/max spread of QPS and p99.
    #[arg(help_heading = "Load shape", long, default_value_t = 1)]
    pub trials: u32,

    /// Open loop: size of the connection pool. A request due while every
    /// connection is busy is dropped and counted as such.
    #[arg(help_heading = "Target and connections", long, default_value_t = 256)]
    pub connections: usize,

    /// Open loop: a send later than this past its scheduled time counts as late.
    #[arg(help_heading = "Load shape", long, default_value = "10ms", value_parser = searchd_load::config::parse_duration)]
    pub late_threshold: Duration,

    /// Per-request timeout (connect + send + full answer); counted as `timeout`.
    #[arg(help_heading = "Target and connections", long, default_value = "10s", value_parser = searchd_load::config::parse_duration)]
    pub request_timeout: Duration,

    /// Server process id for RSS and CPU from /proc when the target has no
    /// GET /stats.
    #[arg(help_heading = "Target and connections", long)]
    pub server_pid: Option<u32>,

    /// What a closed-loop slot does after a 503 or 429 answer: `ignore` sends its next
    /// request at once (a client that never backs off, the worst case, as wrk and oha
    /// do); `honor` first waits the answer's Retry-After seconds (a well-behaved
    /// client; at most 10 s and never past the step's end). The open loop is not
    /// affected: its arrivals are scheduled.
    #[arg(help_heading = "Load shape", long, value_enum, default_value_t = RetryAfterFlag::Ignore)]
    pub retry_after: RetryAfterFlag,

    /// Make the library call fail (LoadError::SloFailed) when no step meets the SLO.
    /// `searchd load` always exits 1 then; the flag is kept for old scripts.
    #[arg(help_heading = "SLO", long)]
    pub fail_on_slo: bool,

    /// Seed for query choice (uniform, zipf).
    #[arg(help_heading = "Queries", long, default_value_t = 42)]
    pub seed: u64,

    /// Client threads sending requests (default: all cores). Each runs its own
    /// event loop with its share of the connections, like wrk's threads (also -t).
    #[arg(help_heading = "Target and connections", long, short_alias = 't')]
    pub threads: Option<usize>,

    /// No live progress line and no per-step lines on stderr.
    #[arg(help_heading = "Reports", long)]
    pub quiet: bool,

    /// Write the searchd.load.v1 JSON report here.
    #[arg(help_heading = "Reports", long)]
    pub json: Option<PathBuf>,

    /// Write one CSV row per step here.
    #[arg(help_heading = "Reports", long)]
    pub csv: Option<PathBuf>,

    /// Write an HTML report with inline SVG charts here.
    #[arg(help_heading = "Reports", long)]
    pub html: Option<PathBuf>,
}

/// `--retry-after`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfterFlag {
    Ignore,
    Honor,
}

/// `--cache`: what the run is labelled as measuring.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheFlag {
    /// A unique `nonce` query parameter on every request: no answer can come from a cache.
    Cold,
    /// Requests sent as they are: repeated ones may be served from a cache.
    Warm,
}

impl LoadArgs {
    /// The flags as the load library's configuration; an error (a usage error: exit 2)
    /// when the target is given twice or not at all, or for oha's `-n`.
    pub fn config(&self) -> Result<LoadConfig, String> {
        if self.request_count.is_some() {
            return Err("-n (a number of requests, as oha) is not supported: runs are timed; use --duration (-z) and --warmup".into());
        }
        Ok(LoadConfig {
            url: self.target_url()?,
            ca: self.ca.clone(),
            endpoint: self.endpoint.clone(),
            ramp: match self.concurrency {
                Some(c) => Ramp(vec![c]),
                None => self.ramp.clone(),
            },
            rate: self.rate,
            rate_ramp: self.rate_ramp.clone(),
            warmup: self.warmup,
            duration: self.duration,
            slo_p99_ms: self.slo_p99_ms,
            max_error_rate: self.max_error_rate,
            query_count: self.query_count,
            pick: self.pick,
            body_file: self.body_file.clone(),
            text_queries: self.text_queries.clone(),
            mix: self.mix.clone(),
            cache: self.cache.map(|c| match c {
                CacheFlag::Cold => CacheMode::Cold,
                CacheFlag::Warm => CacheMode::Warm,
            }),
            text_field: self.text_field.clone(),
            text_mode: self.text_mode.clone(),
            k: self.k,
            ef: self.ef,
            gt: self.gt.clone(),
            n_max: self.n_max,
            trials: self.trials,
            connections: self.connections,
            late_threshold: self.late_threshold,
            request_timeout: self.request_timeout,
            server_pid: self.server_pid,
            retry_after: match self.retry_after {
                RetryAfterFlag::Ignore => RetryAfter::Ignore,
                RetryAfterFlag::Honor => RetryAfter::Honor,
            },
            fail_on_slo: self.fail_on_slo,
            seed: self.seed,
            threads: self.threads,
            quiet: self.quiet,
            json: self.json.clone(),
            csv: self.csv.clone(),
            html: self.html.clone(),
        })
    }

    /// The target's base URL: --url, else the trailing URL argument, else --port on
    /// loopback; an error naming the flags when none was given.
    fn target_url(&self) -> Result<String, String> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    #[command(name = "load")]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    fn parse<const N: usize>(flags: [&str; N]) -> Result<LoadArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("load").chain(flags)).map(|c| c.load)
    }

    #[test]
    fn oha_request_count_is_refused_with_a_reason() {
        let e = parse(["--url", "http://x", "-n", "100"])
            .unwrap()
            .config()
            .unwrap_err();
        assert!(e.contains("runs are timed"), "{e}");
    }

    #[test]
    fn flags_defaults_and_conflicts() {
        let a = parse(["--url", "http://127.0.0.1:1"])
            .unwrap()
            .config()
            .unwrap();
        let lib = LoadConfig::new("http://127.0.0.1:1");
        assert_eq!(
            (
                a.ramp.clone(),
                a.warmup,
                a.duration,
                a.slo_p99_ms,
                a.max_error_rate
            ),
            (
                lib.ramp,
                lib.warmup,
                lib.duration,
                lib.slo_p99_ms,
                lib.max_error_rate
            )
        );
        assert_eq!(
            (
                a.query_count,
                a.k,
                a.pick,
                a.request_timeout,
                a.endpoint.clone()
            ),
            (
                lib.query_count,
                lib.k,
                lib.pick,
                lib.request_timeout,
                lib.endpoint
            )
        );
        assert_eq!(
            (
                a.seed,
                a.trials,
                a.connections,
                a.late_threshold,
                a.retry_after
            ),
            (
                lib.seed,
                lib.trials,
                lib.connections,
                lib.late_threshold,
                lib.retry_after
            )
        );
        assert_eq!(
            (a.text_field.as_str(), a.url.as_str()),
            (lib.text_field.as_str(), lib.url.as_str())
        );
        assert_eq!(a.ramp.0, vec![1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256]);
        assert_eq!(a.warmup, Duration::from_secs(5));
        assert_eq!(a.duration, Duration::from_secs(10));
        assert_eq!(a.slo_p99_ms, 100.0);
        assert_eq!(a.max_error_rate, 0.01);
        assert_eq!(a.query_count, 1000);
        assert_eq!(a.k, 10);
        assert_eq!(a.pick, Pick::Uniform);
        assert_eq!(a.request_timeout, Duration::from_secs(10));
        assert_eq!(a.endpoint.to_string(), "POST /search");
        assert!(!a.open_loop());

        let e = parse(["--url", "http://x", "--ramp", "1,2", "--rate", "5"])
            .err()
            .unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        let e = parse(["--url", "http://x", "--ramp", "1,nope"])
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("'nope' is not a positive integer"),
            "{e}"
        );
        let a = parse(["--url", "http://x", "--rate-ramp", "10,20"]).unwrap();
        assert!(a.config().unwrap().open_loop());
    }

    #[test]
    fn old_names_and_wrk_oha_habits() {
        // --queries (the contract's name) is the count, like --query-count.
        let a = parse(["--url", "http://x", "--queries", "50"]).unwrap();
        assert_eq!(a.query_count, 50);
        let a = parse(["--url", "http://x", "--query-count", "7"]).unwrap();
        assert_eq!(a.query_count, 7);
        // A path that is not a vector file: a message saying what the flag means.
        let e = parse(["--url", "http://x", "--queries", "q.jsonl"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("rows of the server's query matrix"), "{e}");
        // A .npy query file: its rows.
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join("q.npy");
        let mut header = "{'descr': '<f4', 'fortran_order': False, 'shape': (37, 4), }".to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend((header.len() as u16).to_le_bytes());
        b.extend(header.as_bytes());
        b.extend(vec![0u8; 37 * 4 * 4]);
        std::fs::write(&q, b).unwrap();
        let a = parse(["--url", "http://x", "--queries", q.to_str().unwrap()]).unwrap();
        assert_eq!(a.query_count, 37);
        // -c N is one step; -z/-d durations; -q rate; -t threads; --port; a trailing URL.
        let a = parse(["-c", "16", "-z", "3s", "-t", "1", "--port", "9"]).unwrap();
        assert_eq!(a.config().unwrap().ramp.0, vec![16]);
        assert_eq!(a.duration, Duration::from_secs(3));
        assert_eq!(a.threads, Some(1));
        assert_eq!(a.config().unwrap().url, "http://127.0.0.1:9");
        let a = parse(["-q", "250", "-d", "2s", "http://h:1"]).unwrap();
        assert_eq!(a.rate, Some(250.0));
        assert_eq!(a.duration, Duration::from_secs(2));
        assert_eq!(a.config().unwrap().url, "http://h:1");
        // No target at all, or two: a clear message.
        let a = parse(["--ramp", "1"]).unwrap();
        assert!(a.config().unwrap_err().contains("--url is required"));
        let a = parse(["--url", "http://a:1", "--port", "2"]).unwrap();
        assert!(a.config().unwrap_err().contains("once"));
        // -c conflicts with an explicit ramp.
        assert!(parse(["--url", "http://x", "-c", "2", "--ramp", "1"]).is_err());
    }

    #[test]
    fn mix_flag_conflicts_and_defaults() {
        let a = parse(["--url", "http://x", "--mix", "a=f.txt:2"]).unwrap();
        assert_eq!(a.mix.unwrap().0.len(), 1);
        assert_eq!(a.cache, None);
        for other in [["--body-file", "b.jsonl"], ["--text-queries", "q.jsonl"]] {
            let e = parse(["--url", "http://x", "--mix", "a=f.txt", other[0], other[1]])
                .err()
                .unwrap();
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{other:?}"
            );
        }
        let e = parse(["--url", "http://x", "--mix", "a=f.txt:0"])
            .err()
            .unwrap();
        assert!(e.to_string().contains("must be > 0"), "{e}");
        let a = parse(["--url", "http://x", "--cache", "cold"]).unwrap();
        assert_eq!(a.config().unwrap().cache, Some(CacheMode::Cold));
        assert!(parse(["--url", "http://x", "--cache", "lukewarm"]).is_err());
    }

    #[test]
    fn ca_flag_reaches_the_config() {
        let a = parse(["--url", "https://127.0.0.1:8443", "--ca", "ca.pem"])
            .unwrap()
            .config()
            .unwrap();
        assert_eq!(a.url, "https://127.0.0.1:8443");
        assert_eq!(a.ca, Some(PathBuf::from("ca.pem")));
        let a = parse(["--url", "http://x"]).unwrap().config().unwrap();
        assert_eq!(a.ca, None);
    }
}
