//! Counters, the 60-second latency window, process figures from /proc, and the
//! Prometheus exposition. One set of atomics feeds both `/stats` and `/metrics`, so the two
//! always agree.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram as PromHistogram;
use prometheus_client::registry::Registry;

use crate::error::Code;

/// Seconds of history for `latency_ms` and `qps_1m`.
const WINDOW_S: u64 = 60;
/// Histogram range in microseconds (1 us .. 100 s), 2 significant digits (1% error).
const HIST_MAX_US: u64 = 100_000_000;

struct Slot {
    second: u64,
    hist: Histogram<u64>,
}

/// Per-second histograms of successful search latencies, one per second of the last
/// minute (a ring).
struct Window {
    slots: Vec<Slot>,
}

impl Window {
    fn new() -> Window {
        Window {
            slots: (0..WINDOW_S)
                .map(|_| Slot {
                    second: u64::MAX,
                    hist: Histogram::new_with_bounds(1, HIST_MAX_US, 2).expect("valid bounds"),
                })
                .collect(),
        }
    }

    fn record(&mut self, second: u64, us: u64) {
        let slot = &mut self.slots[(second % WINDOW_S) as usize];
        if slot.second != second {
            slot.hist.reset();
            slot.second = second;
        }
        slot.hist.saturating_record(us.clamp(1, HIST_MAX_US));
    }

    /// Merge the slots of the last minute.
    fn merged(&self, now_second: u64) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, HIST_MAX_US, 2).expect("valid bounds");
        for s in &self.slots {
            if s.second != u64::MAX && s.second + WINDOW_S > now_second && s.second <= now_second {
                let _ = h.add(&s.hist);
            }
        }
        h
    }
}

/// A stage of a search, timed separately (`/stats` `stages`, `/metrics`
/// `searchd_search_stage_duration_seconds{stage=...}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Embed,
    Dense,
    Lexical,
    Fuse,
    Rerank,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::Embed,
        Stage::Dense,
        Stage::Lexical,
        Stage::Fuse,
        Stage::Rerank,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Stage::Embed => "embed",
            Stage::Dense => "dense",
            Stage::Lexical => "lexical",
            Stage::Fuse => "fuse",
            Stage::Rerank => "rerank",
        }
    }
}

const STAGE_BUCKETS: [f64; 16] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0,
];

/// Stage histograms, one per `stage` label.
type StageFamily = Family<Vec<(String, String)>, PromHistogram, fn() -> PromHistogram>;

fn stage_histogram() -> PromHistogram {
    PromHistogram::new(STAGE_BUCKETS)
}

/// Everything counted about requests.
pub(crate) struct Stats {
    started: Instant,
    by_code: [AtomicU64; Code::ALL.len()],
    pub reloads: AtomicU64,
    window: Mutex<Window>,
    /// Latency of every `/search` answer, whatever its status.
    search_seconds: PromHistogram,
    /// Time in each stage (every search that ran it): the `stage=...` members of the
    /// registered family, resolved once so recording takes no lookup or allocation.
    stage_seconds: [PromHistogram; Stage::ALL.len()],
    /// The last minute of each stage's times, for `/stats`.
    stage_window: [Mutex<Window>; Stage::ALL.len()],
    /// Every answer by route template and status (`searchd_http_requests_total`).
    http_requests: HttpCounters,
    /// Every answer's latency by route template (`searchd_http_request_duration_seconds`).
    http_seconds: RouteHistograms,
    pub registry: Registry,
}

type HttpCounters = Family<Vec<(&'static str, String)>, Counter>;
type RouteHistograms = Family<Vec<(&'static str, String)>, PromHistogram, fn() -> PromHistogram>;

fn http_histogram() -> PromHistogram {
    PromHistogram::new(STAGE_BUCKETS)
}

/// `/stats` `latency_ms`.
#[derive(serde::Serialize, Default, Debug, Clone, Copy)]
pub struct LatencySummary {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Stats {
    pub fn new() -> Arc<Stats> {
        let search_seconds = PromHistogram::new([
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0,
        ]);
        let mut registry = Registry::default();
        registry.register(
            "searchd_search_request_duration_seconds",
            "Time from the arrival of a POST /search request to its reply, any status",
            search_seconds.clone(),
        );
        let stage_seconds: StageFamily = Family::new_with_constructor(stage_histogram);
        registry.register(
            "searchd_search_stage_duration_seconds",
            "Time spent in one stage of a search (embed, dense, lexical, fuse, rerank)",
            stage_seconds.clone(),
        );
        let http_requests = HttpCounters::default();
        registry.register(
            "searchd_http_requests",
            "Answered HTTP requests by route template (unmatched: no route) and status, every route",
            http_requests.clone(),
        );
        let http_seconds: RouteHistograms = Family::new_with_constructor(http_histogram);
        registry.register(
            "searchd_http_request_duration_seconds",
            "Time from a request's headers to its reply, by route template",
            http_seconds.clone(),
        );
        let stage_seconds = Stage::ALL.map(|st| {
            stage_seconds
                .get_or_create(&vec![("stage".to_string(), st.name().to_string())])
                .clone()
        });
        Arc::new(Stats {
            started: Instant::now(),
            by_code: std::array::from_fn(|_| AtomicU64::new(0)),
            reloads: AtomicU64::new(0),
            window: Mutex::new(Window::new()),
            search_seconds,
            stage_seconds,
            stage_window: std::array::from_fn(|_| Mutex::new(Window::new())),
            http_requests,
            http_seconds,
            registry,
        })
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Count one answered request (every route but /health, /ready, /stats, /metrics).
    pub fn count(&self, code: Code) {
        self.by_code[code.index()].fetch_add(1, Relaxed);
    }

    pub fn get(&self, code: Code) -> u64 {
        self.by_code[code.index()].load(Relaxed)
    }

    /// Record the latency of one `/search` answer.
    pub fn record_search(&self, code: Code, arrival: Instant, took: Duration) {
        self.search_seconds.observe(took.as_secs_f64());
        if code == Code::Ok {
            let second = arrival.saturating_duration_since(self.started).as_secs();
            self.window.lock().record(second, took.as_micros() as u64);
        }
    }

    /// Count one answer by route template and status, and its latency by route.
    pub fn record_http(&self, route: &str, status: u16, took: Duration) {
        let mut s = itoa::Buffer::new();
        self.http_requests
            .get_or_create(&vec![
                ("route", route.to_string()),
                ("status", s.format(status).to_string()),
            ])
            .inc();
        self.http_seconds
            .get_or_create(&vec![("route", route.to_string())])
            .observe(took.as_secs_f64());
    }

    /// Record the time one stage of a search took.
    pub fn record_stage(&self, stage: Stage, us: u64) {
        self.stage_seconds[stage as usize].observe(us as f64 / 1e6);
        let second = self.uptime().as_secs();
        self.stage_window[stage as usize]
            .lock()
            .record(second, us.max(1));
    }

    /// `/stats` `stages`: per stage over the last minute, `{count, p50_ms, p99_ms}`.
    pub fn stages(&self) -> serde_json::Value {
        let now = self.uptime().as_secs();
        let mut o = serde_json::Map::new();
        for st in Stage::ALL {
            let h = self.stage_window[st as usize].lock().merged(now);
            let n = h.len();
            let ms = |q: f64| {
                if n == 0 {
                    0.0
                } else {
                    h.value_at_quantile(q) as f64 / 1000.0
                }
            };
            o.insert(
                st.name().into(),
                serde_json::json!({"count": n, "p50_ms": ms(0.5), "p99_ms": ms(0.99), "mean_ms": if n == 0 { 0.0 } else { h.mean() / 1000.0 }}),
            );
        }
        serde_json::Value::Object(o)
    }

    /// Percentiles and throughput of successful searches over the last minute.
    pub fn window(&self) -> (LatencySummary, f64, u64) {
        let up = self.uptime();
        let now_second = up.as_secs();
        let h = self.window.lock().merged(now_second);
        let n = h.len();
        let ms = |q: f64| {
            if n == 0 {
                0.0
            } else {
                h.value_at_quantile(q) as f64 / 1000.0
            }
        };
        let lat = LatencySummary {
            p50: ms(0.50),
            p95: ms(0.95),
            p99: ms(0.99),
        };
        // The window holds the current (partial) second and the 59 before it.
        let span = up
            .as_secs_f64()
            .min((WINDOW_S - 1) as f64 + up.subsec_nanos() as f64 / 1e9)
            .max(1e-3);
        (lat, n as f64 / span, n)
    }

    pub fn totals(&self) -> RequestTotals {
        let mut t = RequestTotals::default();
        for c in Code::ALL {
            let v = self.get(c);
            t.total += v;
            match c {
                Code::Ok => t.ok += v,
                Code::Overloaded | Code::ShuttingDown => t.rejected += v,
                Code::DeadlineExceeded => t.timeouts += v,
                Code::Internal => t.server_errors += v,
                Code::NotReady => t.not_ready += v,
                _ => {
                    if c.status().is_client_error() {
                        t.client_errors += v;
                    }
                }
            }
        }
        t
    }
}

/// `/stats` `requests`: `total = ok + client_errors + rejected + timeouts + server_errors +
/// not_ready`.
#[derive(serde::Serialize, Default, Debug, Clone, Copy)]
pub struct RequestTotals {
    pub total: u64,
    pub ok: u64,
    /// 4xx answers (bad input, unknown route or id, auth, body too large ...).
    pub client_errors: u64,
    /// 503 `overloaded`: refused by admission control.
    pub rejected: u64,
    /// 504 `deadline_exceeded`.
    pub timeouts: u64,
    /// 500 `internal`.
    pub server_errors: u64,
    /// 503 `not_ready`: searches before the index was loaded.
    pub not_ready: u64,
}

/// Figures about this process, from /proc/self.
#[derive(serde::Serialize, Default, Debug, Clone, Copy)]
pub struct ProcessStats {
    pub rss_bytes: u64,
    pub cpu_seconds: f64,
    pub threads: u64,
}

pub fn process_stats() -> ProcessStats {
    match searchd_os::proc::stat(searchd_os::proc::Of::This) {
        Some(s) => ProcessStats {
            rss_bytes: s.rss_pages * searchd_os::page_size(),
            cpu_seconds: s.cpu_seconds(),
            threads: s.threads,
        },
        None => ProcessStats::default(),
    }
}

/// Live index figures for `/metrics`.
#[derive(Debug, Default, Clone)]
pub(crate) struct IndexFigures {
    pub loaded: bool,
    pub n: u64,
    pub dim: u64,
    pub bytes: u64,
    /// `serve --memory-budget`: the process's pool.
    pub memory: Option<searchd_engine::PoolStats>,
    /// `--collection NAME=DIR:budget=BYTES`: each such collection's own pool, by name.
    pub collection_pools: Vec<(String, searchd_engine::PoolStats)>,
}

/// Write the Prometheus text exposition.
/// Response-cache counters for `/metrics`: hits, misses, inserts, evictions, bytes held.
pub(crate) type CacheFigures = [u64; 5];

/// Audit-log counters for `/metrics`: lines written, lines that could not be.
pub(crate) type AuditFigures = [u64; 2];

/// The cache tiers' figures for `/metrics`: in-process (`--cache-bytes`) and shared
/// (`--cache-redis`), each when on.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CacheTiers {
    pub local: Option<CacheFigures>,
    pub shared: Option<crate::shared::SharedFigures>,
}

pub(crate) fn render_metrics(
    stats: &Stats,
    inflight: usize,
    queued: usize,
    limits: &crate::limits::Limits,
    index: IndexFigures,
    tiers: CacheTiers,
    audit: Option<AuditFigures>,
) -> String {
    let mut out = String::with_capacity(8192);
    if let Err(e) = prometheus_client::encoding::text::encode_registry(&mut out, &stats.registry) {
        tracing::warn!("cannot encode metrics: {e}");
    }
    match encode_live(stats, inflight, queued, limits, index, tiers, audit) {
        Ok(extra) => out.push_str(&extra),
        Err(e) => tracing::warn!("cannot encode metrics: {e}"),
    }
    out.push_str("# EOF\n");
    out
}

fn encode_live(
    stats: &Stats,
    inflight: usize,
    queued: usize,
    limits: &crate::limits::Limits,
    index: IndexFigures,
    tiers: CacheTiers,
    audit: Option<AuditFigures>,
) -> Result<String, std::fmt::Error> {
    let mut out = String::with_capacity(4096);
    // A throwaway registry with one collector: lets the crate's encoder write descriptors
    // for values read now.
    #[derive(Debug)]
    struct Live {
        by_code: Vec<(&'static str, u64)>,
        inflight: i64,
        queued: i64,
        reloads: u64,
        index: IndexFigures,
        uptime: f64,
        process: ProcessStats,
        cache: Option<CacheFigures>,
        /// Open connections, overflow connections, pending bytes, budget, cap.
        conns: [u64; 5],
        /// Refused connections, requests refused for the budget, heap trims, TLS
        /// handshake failures.
        refused: [u64; 4],
        audit: Option<AuditFigures>,
        shared: Option<crate::shared::SharedFigures>,
    }
    impl prometheus_client::collector::Collector for Live {
        fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            {
                let c = ConstCounter::new(0u64);
                let mut m = enc.encode_descriptor(
                    "searchd_requests",
                    "Answered requests (all routes but /health, /ready, /stats, /metrics) by outcome code",
                    None,
                    c.metric_type(),
                )?;
                for (code, v) in &self.by_code {
                    let labels = [("code", *code)];
                    let fam = m.encode_family(&labels)?;
                    ConstCounter::new(*v).encode(fam)?;
                }
            }
            {
                let g = ConstGauge::new(1i64);
                let mut m = enc.encode_descriptor(
                    "searchd_build_info",
                    "Always 1; the labels say which build is running",
                    None,
                    g.metric_type(),
                )?;
                let labels = [
                    ("version", env!("CARGO_PKG_VERSION")),
                    ("arch", std::env::consts::ARCH),
                    ("os", std::env::consts::OS),
                    (
                        "profile",
                        if cfg!(debug_assertions) {
                            "debug"
                        } else {
                            "release"
                        },
                    ),
                ];
                let fam = m.encode_family(&labels)?;
                g.encode(fam)?;
            }
            for (name, help, v) in [
                (
                    "searchd_refused_connections",
                    "Connections over --max-connections (answered by the minimal responder or closed)",
                    self.refused[0],
                ),
                (
                    "searchd_refused_over_budget",
                    "Requests refused with 503 because --max-pending-bytes was spent",
                    self.refused[1],
                ),
                (
                    "searchd_heap_trims",
                    "Times freed heap memory was returned to the kernel after a burst",
                    self.refused[2],
                ),
                (
                    "searchd_tls_handshake_failures",
                    "TLS handshakes that failed, timed out or met plain HTTP (serve --tls-cert)",
                    self.refused[3],
                ),
            ] {
                let c = ConstCounter::new(v);
                let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
                c.encode(m)?;
            }
            if let Some([lines, errors]) = self.audit {
                for (name, help, v) in [
                    ("searchd_audit_lines", "Lines written to --audit-log", lines),
                    (
                        "searchd_audit_errors",
                        "Audit lines that could not be written",
                        errors,
                    ),
                ] {
                    let c = ConstCounter::new(v);
                    let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
                    c.encode(m)?;
                }
            }
            let mut gauge = |name: &str, help: &str, v: f64| -> Result<(), std::fmt::Error> {
                let g = ConstGauge::new(v);
                let m = enc.encode_descriptor(name, help, None, g.metric_type())?;
                g.encode(m)
            };
            gauge(
                "searchd_inflight_searches",
                "Searches admitted (handed to the search pool or running)",
                self.inflight as f64,
            )?;
            gauge(
                "searchd_queued_searches",
                "Searches waiting for admission",
                self.queued as f64,
            )?;
            for (name, help, v) in [
                ("searchd_open_connections", "Connections open (under --max-connections)", self.conns[0]),
                ("searchd_overflow_connections", "Connections over the cap being answered 503", self.conns[1]),
                ("searchd_pending_request_bytes", "Bytes of requests being read or processed (the --max-pending-bytes budget in use)", self.conns[2]),
                ("searchd_max_pending_request_bytes", "The --max-pending-bytes budget", self.conns[3]),
                ("searchd_max_connections", "The --max-connections cap", self.conns[4]),
            ] {
                gauge(name, help, v as f64)?;
            }
            gauge(
                "searchd_index_loaded",
                "1 once an index is loaded",
                if self.index.loaded { 1.0 } else { 0.0 },
            )?;
            gauge(
                "searchd_index_vectors",
                "Vectors in the served index",
                self.index.n as f64,
            )?;
            gauge(
                "searchd_index_dimensions",
                "Dimensions of the served index",
                self.index.dim as f64,
            )?;
            gauge(
                "searchd_index_size_bytes",
                "Bytes of the served index's files",
                self.index.bytes as f64,
            )?;
            if let Some(m) = &self.index.memory {
                for (name, help, v) in [
                    (
                        "searchd_memory_budget_bytes",
                        "serve --memory-budget: the process's budget",
                        m.budget as f64,
                    ),
                    (
                        "searchd_memory_base_bytes",
                        "The budget's base: what the server holds besides its partitioned indexes",
                        m.base as f64,
                    ),
                    (
                        "searchd_memory_pinned_bytes",
                        "The budget's routing pinned by open partitioned indexes",
                        m.pinned as f64,
                    ),
                    (
                        "searchd_memory_partitions_bytes",
                        "The budget's resident partitions",
                        m.resident as f64,
                    ),
                    (
                        "searchd_memory_reserved_bytes",
                        "The budget's bytes reserved by partition loads in flight",
                        m.reserved as f64,
                    ),
                    (
                        "searchd_memory_peak_bytes",
                        "Most of the budget taken at once since start",
                        m.peak as f64,
                    ),
                    (
                        "searchd_partitions_resident",
                        "Partitions resident, every partitioned index",
                        m.totals.partitions_resident as f64,
                    ),
                ] {
                    gauge(name, help, v)?;
                }
            }
            gauge(
                "searchd_uptime_seconds",
                "Seconds since the server started",
                self.uptime,
            )?;
            gauge(
                "process_resident_memory_bytes",
                "Resident set size of the process",
                self.process.rss_bytes as f64,
            )?;
            gauge(
                "process_threads",
                "OS threads of the process",
                self.process.threads as f64,
            )?;
            if let Some(m) = &self.index.memory {
                for (name, help, v) in [
                    (
                        "searchd_partition_loads",
                        "Partitions loaded after a miss (graph manager), every partitioned index",
                        m.totals.loads,
                    ),
                    (
                        "searchd_partition_evictions",
                        "Partitions dropped to keep to --memory-budget",
                        m.totals.evictions,
                    ),
                    (
                        "searchd_partition_skipped_probes",
                        "Probes skipped because their partition was still loading at the deadline",
                        m.totals.skipped_probes,
                    ),
                ] {
                    let c = ConstCounter::new(v);
                    let d = enc.encode_descriptor(name, help, None, c.metric_type())?;
                    c.encode(d)?;
                }
                let c = ConstCounter::new(m.totals.load_seconds);
                let d = enc.encode_descriptor(
                    "searchd_partition_load_seconds",
                    "Seconds spent loading partitions, summed",
                    None,
                    c.metric_type(),
                )?;
                c.encode(d)?;
            }
            // Collections with a budget of their own: one series per collection.
            if !self.index.collection_pools.is_empty() {
                type Pick = fn(&searchd_engine::PoolStats) -> u64;
                let series: [(&str, &str, Pick); 4] = [
                    (
                        "searchd_collection_memory_budget_bytes",
                        "--collection NAME=DIR:budget=BYTES: the collection's own budget",
                        |p| p.budget,
                    ),
                    (
                        "searchd_collection_memory_pinned_bytes",
                        "The collection budget's routing pinned by its open partitioned indexes",
                        |p| p.pinned,
                    ),
                    (
                        "searchd_collection_memory_partitions_bytes",
                        "The collection budget's resident partitions",
                        |p| p.resident,
                    ),
                    (
                        "searchd_collection_memory_peak_bytes",
                        "Most of the collection's budget taken at once since start",
                        |p| p.peak,
                    ),
                ];
                for (name, help, pick) in series {
                    let g = ConstGauge::new(0i64);
                    let mut m = enc.encode_descriptor(name, help, None, g.metric_type())?;
                    for (coll, p) in &self.index.collection_pools {
                        let labels = [("collection", coll.as_str())];
                        let fam = m.encode_family(&labels)?;
                        ConstGauge::new(pick(p) as f64).encode(fam)?;
                    }
                }
            }
            let c = ConstCounter::new(self.reloads);
            let m = enc.encode_descriptor(
                "searchd_index_reloads",
                "Successful /admin/reload swaps",
                None,
                c.metric_type(),
            )?;
            c.encode(m)?;
            if let Some([hits, misses, inserts, evictions, bytes]) = self.cache {
                for (name, help, v) in [
                    (
                        "searchd_cache_hits",
                        "Replies served from the response cache",
                        hits,
                    ),
                    (
                        "searchd_cache_misses",
                        "Cacheable requests not found in the response cache",
                        misses,
                    ),
                    (
                        "searchd_cache_inserts",
                        "Replies stored in the response cache",
                        inserts,
                    ),
                    (
                        "searchd_cache_evictions",
                        "Replies evicted from the response cache for space",
                        evictions,
                    ),
                ] {
                    let c = ConstCounter::new(v);
                    let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
                    c.encode(m)?;
                }
                let g = ConstGauge::new(bytes as f64);
                let m = enc.encode_descriptor(
                    "searchd_cache_size_bytes",
                    "Bytes held by the response cache",
                    None,
                    g.metric_type(),
                )?;
                g.encode(m)?;
            }
            if let Some(f) = self.shared {
                for ((name, help), v) in crate::shared::SharedFigures::NAMES.iter().zip(f.counters)
                {
                    let c = ConstCounter::new(v);
                    let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
                    c.encode(m)?;
                }
                let g = ConstGauge::new(if f.open { 1.0 } else { 0.0 });
                let m = enc.encode_descriptor(
                    "searchd_cache_shared_breaker_open",
                    "1 while the shared tier is off after a Redis failure (reads go uncached)",
                    None,
                    g.metric_type(),
                )?;
                g.encode(m)?;
                let c = ConstCounter::new(f.open_seconds);
                let m = enc.encode_descriptor(
                    "searchd_cache_shared_breaker_open_seconds",
                    "Seconds the shared tier has been off after Redis failures",
                    None,
                    c.metric_type(),
                )?;
                c.encode(m)?;
            }
            let c = ConstCounter::new(self.process.cpu_seconds);
            let m = enc.encode_descriptor(
                "process_cpu_seconds",
                "User and system CPU time of the process",
                None,
                c.metric_type(),
            )?;
            c.encode(m)
        }
    }
    let live = Live {
        by_code: Code::ALL
            .iter()
            .map(|c| (c.as_str(), stats.get(*c)))
            .collect(),
        inflight: inflight as i64,
        queued: queued as i64,
        reloads: stats.reloads.load(Relaxed),
        index,
        uptime: stats.uptime().as_secs_f64(),
        process: process_stats(),
        cache: tiers.local,
        conns: [
            limits.open.load(Relaxed) as u64,
            limits.overflow.load(Relaxed) as u64,
            limits.pending() as u64,
            limits.max_pending as u64,
            limits.max_connections as u64,
        ],
        refused: [
            limits.refused_connections.load(Relaxed),
            limits.refused_budget.load(Relaxed),
            limits.trims.load(Relaxed),
            limits.tls_failures.load(Relaxed),
        ],
        audit,
        shared: tiers.shared,
    };
    let mut reg = Registry::default();
    reg.register_collector(Box::new(live));
    prometheus_client::encoding::text::encode_registry(&mut out, &reg)?;
    Ok(out)
}
