//! The server's configuration: [`ServeSettings`] (what `searchd serve` is told, plain
//! values with documented defaults) resolved into a [`ServerConfig`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use searchd_collection::Collection;
use searchd_engine::{Index, LoadOptions, Placement, VectorPlacement};
use searchd_vecio::Vectors;

use crate::backend::SearchBackend;
use crate::error::ServerError;
use searchd_collection::embed::TextEmbedder;

mod qdrant;
pub(crate) use qdrant::qdrant_config_from_settings;
pub use qdrant::{BackendKind, QdrantSettings};

/// Default `--addr`.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// Default `--ef`.
pub const DEFAULT_EF: usize = 64;
/// Default `--timeout-ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 1000;
/// Default `--body-limit` (1 MiB).
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;
/// Default `--read-timeout-ms`: how long a client may take to send a request's headers,
/// and separately its body, before the connection is closed.
pub const DEFAULT_READ_TIMEOUT_MS: u64 = 10_000;
/// Default `--io-nice`.
pub const DEFAULT_IO_NICE: i32 = 0;
/// Default `--max-inflight` is this many searches per search thread. Two per thread keeps
/// one search running and one waiting on every core, so a worker that finishes never waits
/// for the I/O thread to hand it the next query.
pub const INFLIGHT_PER_THREAD: usize = 2;
/// Default `--queue` is this many waiting searches per search thread. A queued search
/// waits about `queue / threads x service time`: at ~0.3 ms a search that is ~10 ms,
/// far inside the 100 ms latency objective, and enough to absorb bursts from a few hundred
/// clients without refusing any.
pub const QUEUE_PER_THREAD: usize = 64;
/// Default `--max-queue-wait-ms`: a request that would wait longer than this behind the
/// admitted ones (at the completion rate measured under saturation) is refused at once.
/// Half the load lab's 100 ms p99 objective, so an accepted request's queueing and its own
/// service stay inside it. A count bound alone does not: in front of Qdrant the 132
/// admitted requests of the default queue waited ~80 ms at Qdrant's 1.6k QPS and the
/// accepted p99 at 4x overload was 153 ms (`bench/results/qdrant-gcide.md`).
pub const DEFAULT_MAX_QUEUE_WAIT_MS: u64 = 50;
/// Default `--refusal-hold-ms`: a refused request's 503 is sent this long after the
/// refusal, so a client that resends at once comes back at most this often (pool.rs
/// `Admission::admit`; chosen by `bench/overload.py`, docs/benchmarks.md "Overload").
pub const DEFAULT_REFUSAL_HOLD_MS: u64 = 100;
/// Largest `--refusal-hold-ms`.
pub const MAX_REFUSAL_HOLD_MS: u64 = 10_000;

/// What `searchd serve` is told, as plain values: its flags (CONTRACTS.md) parsed by the
/// binary (`crates/cli/src/flags/serve.rs`), or any other source (a test, a config file).
/// [`ServeSettings::default`] has every flag's default; [`ServerConfig::from_settings`]
/// checks the values and resolves them into a server's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeSettings {
    /// Index directory to serve (written by `searchd build`); served as the collection
    /// named after the directory, behind the v1 routes.
    pub index: Option<PathBuf>,

    /// Collection directory to serve (written by `searchd ingest`), as `DIR` (named after
    /// the directory) or `NAME=DIR`. Repeat to serve several; the first (after --index, if
    /// given) is the default behind the v1 routes (/search, /stats).
    pub collection: Vec<String>,

    /// The Qdrant backend (`--backend qdrant`).
    pub qdrant: QdrantSettings,

    /// Sentence-transformers model directory for `{"text": ...}` queries (config.json,
    /// model.safetensors, tokenizer.json, pooling config). Must be the model that embedded
    /// the collections (checked against their manifests).
    pub model: Option<PathBuf>,

    /// Cross-encoder model directory (a Hugging Face BertForSequenceClassification with one
    /// label, e.g. cross-encoder/ms-marco-MiniLM-L-6-v2) for `"rerank": {"top": N}`.
    pub rerank_model: Option<PathBuf>,

    /// Text queries: how long the batcher waits for more texts after the first, in
    /// microseconds.
    pub embed_window_us: u64,

    /// Text queries: most texts embedded in one forward pass.
    pub embed_batch: usize,

    /// Threads of the embedder's matrix products (default: one per core).
    pub embed_threads: Option<usize>,

    /// Query matrix (.npy / .fvecs ...) whose rows `{"qidx": N}` requests search for.
    pub queries: Option<PathBuf>,

    /// Address to listen on. Loopback by default; a non-loopback address (0.0.0.0:PORT
    /// serves the network) needs `api_keys`, or `insecure` to serve without keys.
    pub addr: String,

    /// TOML file of API keys (see [`crate::auth`]); with it every route but `/health`,
    /// `/ready`, the console's page and assets and `/openapi.json` needs a key. Default: none.
    pub api_keys: Option<PathBuf>,

    /// Serve a non-loopback address without `api_keys`: anyone who reaches the port can
    /// write and delete. Default: false (such a start is refused).
    pub insecure: bool,

    /// PEM certificate chain: serve HTTPS (rustls) instead of plain HTTP; reloaded with
    /// `tls_key` on SIGHUP and when either file changes.
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,

    /// Host names a request's `Host` header may carry besides loopback ones and the
    /// listening address (`*`: any); others get 403 `forbidden` (without API keys).
    pub allow_host: Vec<String>,

    /// Origins a browser page may call the API from (CORS; `*`: any). Off by default.
    pub cors_origin: Vec<String>,

    /// JSON-lines audit log of writes, admin actions and refusals (`None`: off).
    pub audit_log: Option<PathBuf>,

    /// Size at which the audit log is rotated.
    pub audit_log_max_bytes: u64,

    /// HNSW candidate list size for requests that do not give `ef` (raised to k); for
    /// ivfpq indexes, the number of lists probed.
    pub ef: usize,

    /// Search threads (the CPU pool that runs searches, filters, counts, facets and
    /// pages; connections and embedding have their own threads). Default: one per core
    /// (docs/queries-and-filters.md "Search threads" has the sweep behind it).
    pub threads: Option<usize>,

    /// Threads of the async runtime that handles connections and HTTP (not searches).
    /// Default 1: on small machines the cores are better spent searching. Use 2 or more on
    /// a server exposed to untrusted clients: a reconnect storm on a single I/O thread
    /// slows every client's HTTP (bench/results/trickle-abuse.md).
    pub io_threads: Option<usize>,

    /// Lower the scheduling priority of the I/O thread(s) by this much (nice), so that on a
    /// saturated machine searches get the cores first and a flood of refused requests
    /// cannot starve them. 0 leaves priorities alone.
    pub io_nice: i32,

    /// Searches admitted at once (running or handed to the pool). Default: 2 x threads.
    pub max_inflight: Option<usize>,

    /// Searches that may wait for an in-flight slot; past it requests get an immediate 503
    /// `overloaded` with `Retry-After: 1`. Default: 64 x threads.
    pub queue: Option<usize>,

    /// Refuse (503 `overloaded`, `Retry-After: 1`) a request that would have to queue when
    /// the requests already admitted would take longer than this to complete at the rate
    /// measured while the server was saturated. Bounds queueing by time as well as by
    /// count, whatever the service time (text queries, a remote engine). 0 turns it off.
    pub max_queue_wait_ms: u64,

    /// Hold each refused request this long before its 503 `overloaded` is sent, so clients
    /// that resend at once (ignoring `Retry-After`) come back at most this often instead
    /// of spinning on refusals and taking the searches' CPU. A held refusal holds no place.
    /// 0 answers refusals at once.
    pub refusal_hold_ms: u64,

    /// Deadline of each search from the arrival of its request, queueing included; a search
    /// past it is stopped (or not started) and answered 504 `deadline_exceeded`.
    pub timeout_ms: u64,

    /// Turn on the response cache with this many bytes (e.g. 64MiB, 512KiB, 1000000).
    /// Off by default: with rotating queries it only adds work (docs/queries-and-filters.md "Response cache").
    pub cache_bytes: Option<u64>,

    /// Time to live of a cached reply (both tiers).
    pub cache_ttl_s: u64,

    /// A Redis server (`redis://HOST:PORT[/DB]`) holding a response cache shared by every
    /// searchd process given the same URL, behind the in-process one (`--cache-bytes`) or
    /// alone. Fails open: while Redis is down or slow, reads go uncached, never fail.
    pub cache_redis: Option<String>,

    /// Bearer token required by /admin/* routes. Without it, admin routes are only
    /// accepted from loopback peers.
    pub admin_token: Option<String>,

    /// Largest request body in bytes; larger bodies get 413 `body_too_large`.
    pub body_limit: usize,

    /// Time a client has to send a request's headers, and then its body, before the
    /// connection is closed (slow or stalled clients).
    pub read_timeout_ms: u64,

    /// Where the float32 vectors live: `mmap` (shared page cache), `ram` (private copy),
    /// and for quantized indexes `disk` (rescoring rows read with pread) or `none` (no
    /// rescoring).
    pub vectors: VectorPlacement,

    /// Where the HNSW graph and id map live (default: like --vectors when that is mmap or
    /// ram, mmap otherwise).
    pub graph: Option<Placement>,

    /// Where a quantized index's codes live (default: like --graph's default).
    pub codes: Option<Placement>,

    /// Quantized indexes: rescore the best X*k traversal candidates with float32 vectors
    /// (default: the value recorded in the index, 4).
    pub oversample: Option<f32>,

    /// Pre-fault every mapped page at load so the first queries do not pay page faults.
    pub populate: bool,

    /// Skip the checksum pass over the index files at load (faster start).
    pub no_verify: bool,

    /// Partitioned indexes: partitions probed by searches that do not say (`None`: the
    /// index's default).
    pub nprobe: Option<usize>,

    /// Partitioned indexes: bytes all their resident partitions and routing may take
    /// together, across every collection and segment of the server (one
    /// [`searchd_engine::MemoryPool`] in `load.pool`); `None`: every partition resident.
    pub memory_budget: Option<u64>,

    /// Serve collections without taking writes (writes get 409 `conflict`). A second
    /// process serving a collection that another one writes is read-only by itself.
    pub read_only: bool,

    /// When an acknowledged write is synced to disk: `none` (written to the log before the
    /// reply: survives `kill -9`), `always` (fdatasync before each reply: survives power
    /// loss), `group` (one fdatasync shared by concurrent writers: survives power loss).
    pub fsync: String,

    /// Writes not waited for (`"wait": false`) become visible to searches within this.
    pub refresh_ms: u64,

    /// Threads of the background optimizer's index builds (merges of segments).
    pub optimizer_threads: usize,

    /// Lower the scheduling priority of the optimizer's merge thread (and its index
    /// builds) by this much (nice), so merges take idle cycles and searches keep theirs.
    /// 0 leaves it alone.
    pub optimizer_nice: i32,

    /// Live collections commit (sync segments and deleted sets, write the manifest, drop
    /// the log before it) at least this often while there are changes.
    pub commit_ms: u64,

    /// Segments a refresh or merge writes below this many documents get an exact-scan
    /// index; larger ones the collection's own (an HNSW graph). An exact scan costs one
    /// sequential distance per row: on 1M x 384 a 6,700-row flat segment cost each search
    /// more (1.5 ms) than the whole 1M graph walk (0.6 ms), so small segments become
    /// graphs early (bench/results/segment-cost-synth1m.md).
    pub flat_max: usize,

    /// What upserts do with top-level fields the collection's mapping does not have, as
    /// Elasticsearch's `dynamic`: `true` types them from the first upsert that has them and
    /// indexes them (filters, facets, sorting); `false` stores them without indexing;
    /// `strict` refuses the document (400).
    pub dynamic_mapping: String,

    /// The merger rewrites a segment once this share of its rows is deleted (minor graph
    /// segments, under a tenth of the largest, at 0.1 or this if lower). 1 keeps deleted
    /// rows in large segments until they are merged for another reason.
    pub vacuum_ratio: f64,

    /// Largest body of a write request (`POST .../docs`, `.../delete`): bulk upserts are
    /// larger than searches (1,000 documents of 384 floats are ~4 MB of JSON). One request
    /// may hold at most three quarters of --max-pending-bytes while it is read: a larger
    /// body gets 413 whatever this says.
    pub write_body_limit: usize,

    /// Most buckets one request's aggregations and facets may ask for, summed over all of
    /// them (Elasticsearch's `search.max_buckets`); more is refused with 400
    /// `too_many_buckets` before any work.
    pub max_buckets: usize,

    /// Largest reply body; larger replies are refused with 400 `reply_too_large`.
    pub max_reply_bytes: usize,

    /// `POST /admin/reload` only opens index directories inside this directory
    /// (after resolving symlinks and `..`). Default: the directory that holds `--index`.
    pub reload_root: Option<PathBuf>,

    /// Where `POST /collections` makes collections (each in DIR/NAME, listed in
    /// DIR/searchd-collections.json); start-up serves the collections listed there after the
    /// command line's. Default: the reload root.
    pub data_dir: Option<PathBuf>,

    /// Most connections open at once. Past it, new connections are answered by a minimal
    /// responder: /health, /healthz, /ready and /readyz as usual, everything else 503
    /// `overloaded` (Retry-After: 1), and closed.
    pub max_connections: usize,

    /// Most bytes of requests being read or processed, over all connections (headers and
    /// bodies, e.g. 64MiB). A request that would go past it gets 503 `overloaded` and its
    /// connection is closed, so slow uploads cannot exhaust memory.
    pub max_pending_bytes: u64,

    /// Largest request head (request line and headers) in bytes; larger heads get 431
    /// `headers_too_large`. At least 8192.
    pub max_header_bytes: usize,
}

impl Default for ServeSettings {
    /// The flags' defaults: nothing to serve yet, [`DEFAULT_ADDR`], ef [`DEFAULT_EF`],
    /// threads and admission per core, [`DEFAULT_TIMEOUT_MS`], no cache, 1 MiB bodies,
    /// mmap placement with checksums verified, writes synced by the log (`fsync` none),
    /// refreshes every second, commits every 5 s.
    fn default() -> ServeSettings {
        ServeSettings {
            index: None,
            collection: Vec::new(),
            qdrant: QdrantSettings::default(),
            model: None,
            rerank_model: None,
            embed_window_us: crate::embedq::DEFAULT_EMBED_WINDOW.as_micros() as u64,
            embed_batch: crate::embedq::DEFAULT_EMBED_BATCH,
            embed_threads: None,
            queries: None,
            addr: DEFAULT_ADDR.to_string(),
            api_keys: None,
            insecure: false,
            tls_cert: None,
            tls_key: None,
            allow_host: Vec::new(),
            cors_origin: Vec::new(),
            audit_log: None,
            audit_log_max_bytes: DEFAULT_AUDIT_LOG_MAX_BYTES,
            ef: DEFAULT_EF,
            threads: None,
            io_threads: None,
            io_nice: DEFAULT_IO_NICE,
            max_inflight: None,
            queue: None,
            max_queue_wait_ms: DEFAULT_MAX_QUEUE_WAIT_MS,
            refusal_hold_ms: DEFAULT_REFUSAL_HOLD_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            cache_bytes: None,
            cache_ttl_s: 60,
            cache_redis: None,
            admin_token: None,
            body_limit: DEFAULT_BODY_LIMIT,
            read_timeout_ms: DEFAULT_READ_TIMEOUT_MS,
            vectors: VectorPlacement::Mmap,
            graph: None,
            codes: None,
            oversample: None,
            populate: false,
            memory_budget: None,
            nprobe: None,
            no_verify: false,
            read_only: false,
            fsync: "none".to_string(),
            refresh_ms: 1000,
            optimizer_threads: 1,
            optimizer_nice: 10,
            commit_ms: 5000,
            flat_max: 1_000,
            dynamic_mapping: "true".to_string(),
            vacuum_ratio: 0.3,
            write_body_limit: DEFAULT_WRITE_BODY_LIMIT,
            max_buckets: DEFAULT_MAX_BUCKETS,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            reload_root: None,
            data_dir: None,
            max_connections: crate::limits::DEFAULT_MAX_CONNECTIONS,
            max_pending_bytes: crate::limits::DEFAULT_MAX_PENDING_BYTES as u64,
            max_header_bytes: crate::limits::DEFAULT_MAX_HEADER_BYTES,
        }
    }
}

/// What to serve as one collection.
#[derive(Clone)]
pub enum IndexSource {
    /// Open this index or collection directory (on a blocking thread, after the server
    /// started listening; `/ready` answers 503 until it is open).
    Path(PathBuf),
    /// Serve an index the caller already opened.
    Loaded(Arc<Index>),
    /// Serve a collection the caller already opened.
    Collection(Arc<Collection>),
    /// Serve any backend (another engine, or a test's own).
    Backend(Arc<dyn SearchBackend>),
    /// A Qdrant collection (`serve --backend qdrant`), connected and checked at load.
    Qdrant(searchd_qdrant::QdrantTarget),
}

/// The query matrix behind `{"qidx": N}`.
#[derive(Clone)]
pub enum QuerySource {
    /// Read this vector file at start.
    Path(PathBuf),
    /// Use vectors the caller already has.
    Loaded(Arc<Vectors>),
}

/// Everything [`crate::serve`] needs. Build with [`ServerConfig::new`] (defaults) or
/// [`ServerConfig::from_settings`].
#[derive(Clone)]
pub struct ServerConfig {
    /// The default collection (behind the v1 routes).
    pub index: IndexSource,
    /// Its name (default: the directory's name, or `default`).
    pub name: Option<String>,
    /// More collections, by name.
    pub more: Vec<(String, IndexSource)>,
    /// Embedder for text queries.
    pub embedder: Option<Arc<dyn TextEmbedder>>,
    /// Cross-encoder for `rerank` (none: rerank requests are refused with 400).
    pub reranker: Option<Arc<dyn crate::rerank::TextRerank>>,
    /// Text queries: batching window and largest batch.
    pub embed_window: Duration,
    /// Largest batch of texts per embedder call.
    pub embed_batch: usize,
    /// How to open index directories (at start and on `/admin/reload`).
    pub load: LoadOptions,
    /// Collections with a memory budget of their own (`--collection NAME=DIR:budget=BYTES`):
    /// the partitioned indexes of each share one pool of that many bytes (reloads
    /// included), apart from `load.memory_budget`'s process pool, which then bounds the
    /// rest of the process. Empty: every collection shares the process pool.
    pub collection_budgets: std::collections::BTreeMap<String, u64>,
    /// The query matrix behind `{"qidx": N}` (`None`: such requests are refused).
    pub queries: Option<QuerySource>,
    /// Default `ef` of requests that give none.
    pub ef: usize,
    /// Quantized indexes: `oversample` of every search (`None`: the index's default).
    pub oversample: Option<f32>,
    /// Partitioned indexes: `nprobe` of searches that do not give one (`None`: the
    /// index's default).
    pub nprobe: Option<usize>,
    /// Search threads.
    pub threads: usize,
    /// Searches admitted at once.
    pub max_inflight: usize,
    /// Searches waiting for admission; beyond it, 503 at once.
    pub queue: usize,
    /// Refuse a request whose expected queueing is over this (`None`: count bound only).
    pub max_queue_wait: Option<Duration>,
    /// How long a refusal is held before its 503 (zero: at once).
    pub refusal_hold: Duration,
    /// Deadline of each request from its arrival.
    pub timeout: Duration,
    /// Bearer token required by `/admin/*` routes (`None`: admin routes only from loopback peers).
    pub admin_token: Option<String>,
    /// The API key file (`None`: no keys; see [`crate::auth`]).
    pub api_keys: Option<PathBuf>,
    /// Certificate chain and key files (`None`: plain HTTP; see [`crate::tls`]).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Extra `Host` names accepted (see [`crate::host`]).
    pub allow_host: Vec<String>,
    /// CORS origins (`--cors-origin`; empty: no CORS headers, preflights refused).
    pub cors_origin: Vec<String>,
    /// Audit log file and its rotation size (see [`crate::audit`]).
    pub audit_log: Option<(PathBuf, u64)>,
    /// Largest reply body (`--max-reply-bytes`).
    pub max_reply_bytes: usize,
    /// `/admin/reload` opens only directories under this one (a canonical path).
    /// `None` (the library default) accepts any path; `searchd serve` always sets it.
    pub reload_root: Option<PathBuf>,
    /// Where `POST /collections` makes collections (a canonical path; see
    /// [`crate::manage`]). `None` (the library default): creating is refused with 409;
    /// `searchd serve` sets it (`--data-dir`, default the reload root).
    pub data_dir: Option<PathBuf>,
    /// Largest request body in bytes; larger bodies get 413 `body_too_large`.
    pub body_limit: usize,
    /// Header read timeout, and separately body read timeout.
    pub read_timeout: Duration,
    /// After the shutdown signal, how long to wait for in-flight requests to finish.
    pub drain_timeout: Duration,
    /// Nice increment for the thread that runs the accept loop (see `--io-nice`); 0 = none.
    pub io_nice: i32,
    /// Test and demo aid: every search sleeps this long on its worker before it starts
    /// (the deadline still applies). `None` in production.
    pub search_delay: Option<Duration>,
    /// The response cache: (bytes, time to live); `None` (the default) = off.
    pub cache: Option<(u64, Duration)>,
    /// The shared cache tier: (Redis URL, time to live); `None` (the default) = off.
    pub cache_redis: Option<(String, Duration)>,
    /// How collections take writes (log syncs, refreshes, optimizer, read-only).
    pub live: searchd_collection::live::LiveConfig,
    /// Largest body of a write request.
    pub write_body_limit: usize,
    /// Most buckets of one request's aggregations and facets (`--max-buckets`).
    pub max_buckets: usize,
    /// Connections open at once (`--max-connections`).
    pub max_connections: usize,
    /// Byte budget of requests being read (`--max-pending-bytes`).
    pub max_pending_bytes: usize,
    /// Largest request head (`--max-header-bytes`).
    pub max_header_bytes: usize,
}

/// Default `--write-body-limit`: 48 MiB, the most one request may hold of the default
/// byte budget (three quarters of `--max-pending-bytes` 64 MiB): a larger limit could only
/// be reached by raising the budget too.
pub const DEFAULT_WRITE_BODY_LIMIT: usize = 48 << 20;

/// Default `--max-reply-bytes`: 64 MiB.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 64 << 20;

/// Default `--audit-log-max-bytes`: 64 MiB a file, five old files kept.
pub const DEFAULT_AUDIT_LOG_MAX_BYTES: u64 = 64 << 20;

/// Default `--max-buckets`: Elasticsearch's `search.max_buckets` (65,536).
pub const DEFAULT_MAX_BUCKETS: usize = 65_536;
const _: () = assert!(
    DEFAULT_WRITE_BODY_LIMIT <= crate::limits::DEFAULT_MAX_PENDING_BYTES / 4 * 3
        && DEFAULT_BODY_LIMIT <= crate::limits::DEFAULT_MAX_PENDING_BYTES / 4 * 3
);

/// `--addr` must be HOST:PORT; a bare port or host gets an example of the right form.
fn check_addr(addr: &str) -> Result<(), ServerError> {
    let port_ok = addr
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
    if port_ok {
        return Ok(());
    }
    let example = match addr.parse::<u16>() {
        Ok(p) => format!(
            "127.0.0.1:{p} (this machine only) or 0.0.0.0:{p} (the network, with --api-keys)"
        ),
        Err(_) => format!("{}:8080", addr.trim_end_matches(':')),
    };
    Err(ServerError::Config(format!(
        "--addr {addr:?}: give HOST:PORT, e.g. {example}"
    )))
}

/// Refuse to serve a non-loopback address without API keys unless `insecure` says so
/// (CONTRACTS.md "Security and operations": the secure default).
fn check_exposure(args: &ServeSettings) -> Result<(), ServerError> {
    if args.api_keys.is_some() || args.insecure {
        return Ok(());
    }
    use std::net::ToSocketAddrs as _;
    let addrs: Vec<std::net::SocketAddr> = match args.addr.to_socket_addrs() {
        Ok(a) => a.collect(),
        // An address that does not resolve fails at bind, with its own message.
        Err(_) => return Ok(()),
    };
    if let Some(open) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        return Err(ServerError::Config(format!(
            "--addr {} is reachable from other machines ({}), and without --api-keys anyone who reaches it could write and delete: give --api-keys FILE (searchd keys new makes a key), or --insecure to serve without keys",
            args.addr,
            open.ip()
        )));
    }
    Ok(())
}

/// Append the collections the registry of `data_dir` lists ([`crate::manage::registered`]);
/// a name the command line serves already is a start error naming both.
fn add_registered(
    sources: &mut Vec<(String, PathBuf)>,
    data_dir: &Path,
) -> Result<(), ServerError> {
    for (name, dir) in crate::registry::registered(data_dir)? {
        if let Some((_, d)) = sources.iter().find(|(n, _)| *n == name) {
            return Err(ServerError::Config(format!(
                "two collections are named {name:?}: {} (command line) and {} (made over HTTP, listed in {}); serve the first under another name (--collection NAME=DIR)",
                d.display(),
                dir.display(),
                data_dir.join(crate::registry::REGISTRY).display()
            )));
        }
        sources.push((name, dir));
    }
    Ok(())
}

/// Number of cores this process may use.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl ServerConfig {
    /// Defaults for everything but the index: ef 64, one search thread per core,
    /// max_inflight 2 x threads, queue 64 x threads, 1 s deadline, 1 MiB bodies, mmap with
    /// checksum verification.
    pub fn new(index: IndexSource) -> ServerConfig {
        let threads = available_cores();
        ServerConfig {
            index,
            name: None,
            more: Vec::new(),
            embedder: None,
            reranker: None,
            embed_window: crate::embedq::DEFAULT_EMBED_WINDOW,
            embed_batch: crate::embedq::DEFAULT_EMBED_BATCH,
            load: LoadOptions::default(),
            collection_budgets: std::collections::BTreeMap::new(),
            queries: None,
            ef: DEFAULT_EF,
            oversample: None,
            nprobe: None,
            threads,
            max_inflight: INFLIGHT_PER_THREAD * threads,
            queue: QUEUE_PER_THREAD * threads,
            max_queue_wait: Some(Duration::from_millis(DEFAULT_MAX_QUEUE_WAIT_MS)),
            refusal_hold: Duration::from_millis(DEFAULT_REFUSAL_HOLD_MS),
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
            admin_token: None,
            api_keys: None,
            tls: None,
            allow_host: Vec::new(),
            cors_origin: Vec::new(),
            audit_log: None,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            reload_root: None,
            data_dir: None,
            body_limit: DEFAULT_BODY_LIMIT,
            read_timeout: Duration::from_millis(DEFAULT_READ_TIMEOUT_MS),
            drain_timeout: Duration::from_secs(30),
            io_nice: 0,
            search_delay: None,
            cache: None,
            cache_redis: None,
            live: searchd_collection::live::LiveConfig::default(),
            write_body_limit: DEFAULT_WRITE_BODY_LIMIT,
            max_buckets: DEFAULT_MAX_BUCKETS,
            max_connections: crate::limits::DEFAULT_MAX_CONNECTIONS,
            max_pending_bytes: crate::limits::DEFAULT_MAX_PENDING_BYTES,
            max_header_bytes: crate::limits::DEFAULT_MAX_HEADER_BYTES,
        }
    }

    /// Configuration from `searchd serve`'s settings, checked (a bad value is a
    /// [`ServerError::Config`] naming its flag).
    pub fn from_settings(args: &ServeSettings) -> Result<ServerConfig, ServerError> {
        check_addr(&args.addr)?;
        check_exposure(args)?;
        let mut cfg = ServerConfig::resolve(args)?;
        cfg.api_keys = args.api_keys.clone();
        if let Some(p) = &cfg.api_keys {
            // Read now, so a bad file refuses the start with its message.
            crate::auth::KeyRing::load(p)?;
        }
        match (&args.tls_cert, &args.tls_key) {
            (Some(c), Some(k)) => {
                // Read now, so a bad certificate or key refuses the start with its message.
                crate::tls::load_config(c, k)?;
                cfg.tls = Some((c.clone(), k.clone()));
            }
            (None, None) => {}
            _ => {
                return Err(ServerError::Config(
                    "--tls-cert and --tls-key go together".into(),
                ))
            }
        }
        cfg.allow_host = args.allow_host.clone();
        for o in &args.cors_origin {
            let ok = o == "*"
                || ((o.starts_with("http://") || o.starts_with("https://"))
                    && !o.ends_with('/')
                    && axum::http::HeaderValue::from_str(o).is_ok());
            if !ok {
                return Err(ServerError::Config(format!(
                    "--cors-origin {o:?}: an origin is scheme://host[:port] (no path, no trailing '/'), or *"
                )));
            }
        }
        cfg.cors_origin = args.cors_origin.clone();
        if args.audit_log_max_bytes < 4096 {
            return Err(ServerError::Config(format!(
                "--audit-log-max-bytes must be at least 4096, got {}",
                args.audit_log_max_bytes
            )));
        }
        cfg.audit_log = args
            .audit_log
            .clone()
            .map(|p| (p, args.audit_log_max_bytes));
        if args.max_reply_bytes < 4096 {
            return Err(ServerError::Config(format!(
                "--max-reply-bytes must be at least 4096, got {}",
                args.max_reply_bytes
            )));
        }
        cfg.max_reply_bytes = args.max_reply_bytes;
        Ok(cfg)
    }

    fn resolve(args: &ServeSettings) -> Result<ServerConfig, ServerError> {
        if let Some(cfg) = qdrant_config_from_settings(args)? {
            return Ok(cfg);
        }
        let threads = args.threads.unwrap_or_else(available_cores);
        if threads == 0 {
            return Err(ServerError::Config("--threads must be at least 1".into()));
        }
        if args.ef == 0 || args.ef > crate::wire::MAX_EF {
            return Err(ServerError::Config(format!(
                "--ef must be between 1 and {}, got {}",
                crate::wire::MAX_EF,
                args.ef
            )));
        }
        let max_inflight = args.max_inflight.unwrap_or(INFLIGHT_PER_THREAD * threads);
        if max_inflight == 0 {
            return Err(ServerError::Config(
                "--max-inflight must be at least 1".into(),
            ));
        }
        if args.body_limit == 0 {
            return Err(ServerError::Config(
                "--body-limit must be at least 1".into(),
            ));
        }
        if args.admin_token.as_deref() == Some("") {
            return Err(ServerError::Config(
                "--admin-token (or SEARCHD_ADMIN_TOKEN) is empty".into(),
            ));
        }
        let mut sources: Vec<(String, PathBuf)> = Vec::new();
        let mut budgets = std::collections::BTreeMap::new();
        if let Some(ix) = &args.index {
            sources.push((dir_name(ix), ix.clone()));
        }
        for c in &args.collection {
            // `[NAME=]DIR[:budget=BYTES]` (the command line turns `512MiB` into bytes).
            let (spec, budget) = match c.rsplit_once(":budget=") {
                Some((spec, b)) => match b.parse::<u64>() {
                    Ok(b) if b > 0 => (spec, Some(b)),
                    _ => {
                        return Err(ServerError::Config(format!(
                            "--collection {c}: budget={b} is not a positive number of bytes (--collection NAME=DIR:budget=BYTES, e.g. budget=512MiB)"
                        )))
                    }
                },
                None => (c.as_str(), None),
            };
            let c = spec;
            let (name, dir) = match c.split_once('=') {
                Some((n, d)) if !n.is_empty() && !n.contains('/') => {
                    (n.to_string(), PathBuf::from(d))
                }
                _ => (dir_name(Path::new(c)), PathBuf::from(c)),
            };
            if name.is_empty()
                || !name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
            {
                return Err(ServerError::Config(format!(
                    "--collection {c}: the name {name:?} must be letters, digits, '-', '_' or '.'"
                )));
            }
            crate::registry::check_not_reserved(&name).map_err(|e| {
                ServerError::Config(format!("--collection {c}: {e} (--collection NAME=DIR)"))
            })?;
            if sources.iter().any(|(n, _)| *n == name) {
                return Err(ServerError::Config(format!(
                    "two collections are named {name:?}; name them with --collection NAME=DIR"
                )));
            }
            if let Some(b) = budget {
                budgets.insert(name.clone(), b);
            }
            sources.push((name, dir));
        }
        // Collections created over HTTP (serve --data-dir, default the reload root, which
        // defaults to the first collection's parent directory).
        let explicit_data = match &args.data_dir {
            Some(d) => Some(
                d.canonicalize()
                    .map_err(|e| ServerError::Config(format!("--data-dir {}: {e}", d.display())))?,
            ),
            None => None,
        };
        if let Some(d) = &explicit_data {
            add_registered(&mut sources, d)?;
        }
        let Some((first_name, first_dir)) = sources.first().cloned() else {
            return Err(ServerError::Config(
                "nothing to serve: give --index DIR or --collection DIR (or --data-dir DIR whose searchd-collections.json lists collections made over HTTP)".into(),
            ));
        };
        let mut cfg = ServerConfig::new(IndexSource::Path(first_dir.clone()));
        cfg.name = Some(first_name);
        cfg.collection_budgets = budgets;
        cfg.more = sources[1..]
            .iter()
            .map(|(n, d)| (n.clone(), IndexSource::Path(d.clone())))
            .collect();
        cfg.embed_window = Duration::from_micros(args.embed_window_us);
        if args.embed_batch == 0 {
            return Err(ServerError::Config(
                "--embed-batch must be at least 1".into(),
            ));
        }
        cfg.embed_batch = args.embed_batch;
        cfg.load = LoadOptions {
            populate: args.populate,
            lock: false,
            verify: !args.no_verify,
            memory_budget: args.memory_budget,
            ..LoadOptions::with_parts(args.vectors, args.graph, args.codes)
        };
        cfg.queries = args.queries.clone().map(QuerySource::Path);
        cfg.ef = args.ef;
        if let Some(x) = args.oversample {
            if !(1.0..=searchd_engine::MAX_OVERSAMPLE).contains(&x) {
                return Err(ServerError::Config(format!(
                    "--oversample must be between 1 and {}, got {x}",
                    searchd_engine::MAX_OVERSAMPLE
                )));
            }
        }
        cfg.oversample = args.oversample;
        cfg.nprobe = args.nprobe;
        cfg.threads = threads;
        cfg.max_inflight = max_inflight;
        cfg.queue = args.queue.unwrap_or(QUEUE_PER_THREAD * threads);
        cfg.max_queue_wait =
            (args.max_queue_wait_ms > 0).then(|| Duration::from_millis(args.max_queue_wait_ms));
        if args.refusal_hold_ms > MAX_REFUSAL_HOLD_MS {
            return Err(ServerError::Config(format!(
                "--refusal-hold-ms must be at most {MAX_REFUSAL_HOLD_MS}, got {}",
                args.refusal_hold_ms
            )));
        }
        cfg.refusal_hold = Duration::from_millis(args.refusal_hold_ms);
        cfg.timeout = Duration::from_millis(args.timeout_ms);
        if args.cache_ttl_s == 0 {
            return Err(ServerError::Config(
                "--cache-ttl-s must be at least 1".into(),
            ));
        }
        cfg.cache = args
            .cache_bytes
            .map(|b| (b, Duration::from_secs(args.cache_ttl_s)));
        if let Some(url) = &args.cache_redis {
            crate::shared::check_url(url)?;
            cfg.cache_redis = Some((url.clone(), Duration::from_secs(args.cache_ttl_s)));
        }
        cfg.admin_token = args.admin_token.clone();
        let root = match &args.reload_root {
            Some(r) => r.clone(),
            None => first_dir
                .canonicalize()
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap_or_else(|| PathBuf::from(".")),
        };
        cfg.reload_root =
            Some(root.canonicalize().map_err(|e| {
                ServerError::Config(format!("--reload-root {}: {e}", root.display()))
            })?);
        cfg.data_dir = match explicit_data {
            Some(d) => Some(d),
            None => {
                let d = cfg.reload_root.clone();
                if let Some(d) = &d {
                    let before = sources.len();
                    add_registered(&mut sources, d)?;
                    cfg.more.extend(
                        sources[before..]
                            .iter()
                            .map(|(n, dir)| (n.clone(), IndexSource::Path(dir.clone()))),
                    );
                }
                d
            }
        };
        cfg.body_limit = args.body_limit;
        cfg.read_timeout = Duration::from_millis(args.read_timeout_ms.max(1));
        if !(0..=19).contains(&args.io_nice) {
            return Err(ServerError::Config(format!(
                "--io-nice must be between 0 and 19, got {}",
                args.io_nice
            )));
        }
        cfg.io_nice = args.io_nice;
        cfg.live.read_only = args.read_only;
        cfg.live.fsync = searchd_collection::wal::Fsync::parse(&args.fsync).ok_or_else(|| {
            ServerError::Config(format!(
                "--fsync must be none, always or group, got {:?}",
                args.fsync
            ))
        })?;
        if args.refresh_ms == 0 || args.optimizer_threads == 0 || args.commit_ms == 0 {
            return Err(ServerError::Config(
                "--refresh-ms, --commit-ms and --optimizer-threads must be at least 1".into(),
            ));
        }
        if !(0..=19).contains(&args.optimizer_nice) {
            return Err(ServerError::Config(format!(
                "--optimizer-nice must be between 0 and 19, got {}",
                args.optimizer_nice
            )));
        }
        cfg.live.refresh_interval = Duration::from_millis(args.refresh_ms);
        cfg.live.commit_interval = Duration::from_millis(args.commit_ms);
        cfg.live.optimizer_threads = args.optimizer_threads;
        cfg.live.optimizer_nice = args.optimizer_nice;
        cfg.live.flat_max = args.flat_max;
        cfg.live.dynamic =
            searchd_collection::live::Dynamic::parse(&args.dynamic_mapping).unwrap_or_default();
        if !(args.vacuum_ratio > 0.0 && args.vacuum_ratio <= 1.0) {
            return Err(ServerError::Config(format!(
                "--vacuum-ratio must be in (0, 1], got {}",
                args.vacuum_ratio
            )));
        }
        cfg.live.vacuum_ratio = args.vacuum_ratio;
        cfg.write_body_limit = args.write_body_limit;
        if args.max_buckets == 0 {
            return Err(ServerError::Config(
                "--max-buckets must be at least 1".into(),
            ));
        }
        cfg.max_buckets = args.max_buckets;
        if args.max_connections == 0 {
            return Err(ServerError::Config(
                "--max-connections must be at least 1".into(),
            ));
        }
        if args.max_header_bytes < 8192 {
            return Err(ServerError::Config(format!(
                "--max-header-bytes must be at least 8192, got {}",
                args.max_header_bytes
            )));
        }
        if (args.max_pending_bytes as u128) < args.body_limit as u128 {
            return Err(ServerError::Config(format!(
                "--max-pending-bytes ({}) must be at least --body-limit ({})",
                args.max_pending_bytes, args.body_limit
            )));
        }
        cfg.max_connections = args.max_connections;
        cfg.max_pending_bytes = args.max_pending_bytes.min(usize::MAX as u64) as usize;
        cfg.max_header_bytes = args.max_header_bytes;
        Ok(cfg)
    }
}

/// A collection's default name: its directory's name.
pub(crate) fn dir_name(p: &Path) -> String {
    p.canonicalize()
        .ok()
        .as_deref()
        .unwrap_or(p)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into())
}
