//! `searchd serve`'s flags: clap's view of [`searchd_server::ServeSettings`] (the server
//! library takes the plain struct; only this binary parses arguments).

use std::path::PathBuf;

use searchd_engine::{Placement, VectorPlacement};
use searchd_server::{QdrantSettings, ServeSettings};

/// Where the float32 vectors of an index live (`--vectors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum VectorsPlacement {
    /// Map the index files: pages are shared through the page cache (one copy for every
    /// process on the machine) and loading is instant.
    #[default]
    Mmap,
    /// Read the index files into private memory.
    Ram,
    /// Quantized indexes: leave the float32 vectors on disk and read the few rows each
    /// search rescores with pread (not part of the resident set).
    Disk,
    /// Quantized indexes: do not open the float32 vectors; answer from the codes alone
    /// (approximate scores, no rescoring).
    None,
}

impl From<VectorsPlacement> for VectorPlacement {
    fn from(p: VectorsPlacement) -> VectorPlacement {
        match p {
            VectorsPlacement::Mmap => VectorPlacement::Mmap,
            VectorsPlacement::Ram => VectorPlacement::Ram,
            VectorsPlacement::Disk => VectorPlacement::Disk,
            VectorsPlacement::None => VectorPlacement::None,
        }
    }
}

/// Where the graph or the codes of an index live (`--graph`, `--codes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PartPlacementArg {
    /// Map the file (shared page cache).
    Mmap,
    /// Read the file into private memory.
    Ram,
}

impl From<PartPlacementArg> for Placement {
    fn from(p: PartPlacementArg) -> Placement {
        match p {
            PartPlacementArg::Mmap => Placement::Mmap,
            PartPlacementArg::Ram => Placement::Ram,
        }
    }
}

/// Flags of `searchd serve` (see CONTRACTS.md); [`ServeArgs::settings`] hands them to the
/// server library as a plain [`ServeSettings`].
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("cache_tier").multiple(true)))]
pub struct ServeArgs {
    // `--config FILE` and `--print-config` (see `super::config`).
    #[command(flatten)]
    pub config_file: super::config::ConfigFileArgs,

    /// Index directory to serve (written by `searchd build`); served as the collection
    /// named after the directory, behind the v1 routes.
    #[arg(help_heading = "What to serve", long, value_name = "DIR", required_unless_present_any = ["collection", "qdrant_collection"])]
    pub index: Option<PathBuf>,

    /// Collection directory to serve (written by `searchd ingest`), as `DIR` (named after
    /// the directory) or `NAME=DIR`. Repeat to serve several; the first (after --index, if
    /// given) is the default behind the v1 routes (/search, /stats). `:budget=BYTES` (e.g.
    /// `NAME=DIR:budget=512MiB`) gives the collection's partitioned indexes a memory budget
    /// of their own, apart from --memory-budget's.
    #[arg(help_heading = "What to serve", long, value_name = "[NAME=]DIR[:budget=BYTES]", value_parser = parse_collection)]
    pub collection: Vec<String>,

    #[command(flatten)]
    pub qdrant: QdrantServeArgs,

    /// Sentence-transformers model directory for `{"text": ...}` queries (config.json,
    /// model.safetensors, tokenizer.json, pooling config). Must be the model that embedded
    /// the collections (checked against their manifests).
    #[arg(help_heading = "What to serve", long, value_name = "DIR")]
    pub model: Option<PathBuf>,

    /// Cross-encoder model directory (a Hugging Face BertForSequenceClassification with one
    /// label, e.g. cross-encoder/ms-marco-MiniLM-L-6-v2) for `"rerank": {"top": N}`.
    #[arg(help_heading = "What to serve", long, value_name = "DIR")]
    pub rerank_model: Option<PathBuf>,

    /// Text queries: how long the batcher waits for more texts after the first, in
    /// microseconds.
    #[arg(
        help_heading = "Embedding",
        long,
        default_value_t = 2000,
        value_name = "US"
    )]
    pub embed_window_us: u64,

    /// Text queries: most texts embedded in one forward pass.
    #[arg(help_heading = "Embedding", long, default_value_t = searchd_server::DEFAULT_EMBED_BATCH, value_name = "N")]
    pub embed_batch: usize,

    /// Threads of the embedder's matrix products (default: one per core).
    #[arg(help_heading = "Embedding", long, value_name = "N")]
    pub embed_threads: Option<usize>,

    /// Query matrix (.npy / .fvecs ...) whose rows `{"qidx": N}` requests search for.
    #[arg(help_heading = "What to serve", long, value_name = "FILE")]
    pub queries: Option<PathBuf>,

    /// Address to listen on. Loopback by default. To serve the network (e.g.
    /// 0.0.0.0:PORT) give --api-keys FILE; a non-loopback address without keys is refused
    /// unless --insecure.
    #[arg(help_heading = "Network and security", long, default_value = searchd_server::DEFAULT_ADDR, value_name = "HOST:PORT")]
    pub addr: String,

    /// Listen on 127.0.0.1:PORT (loopback): a shorthand for --addr 127.0.0.1:PORT.
    #[arg(
        help_heading = "Network and security",
        long,
        value_name = "PORT",
        conflicts_with = "addr"
    )]
    pub port: Option<u16>,

    /// TOML file of API keys (`searchd keys new` makes one): every route but /health and
    /// /ready then needs `Authorization: Bearer KEY` (or `api-key: KEY`) whose scope
    /// (read, write, admin) and collections cover it. Reloaded when the file changes.
    #[arg(
        help_heading = "Network and security",
        long,
        env = "SEARCHD_API_KEYS",
        value_name = "FILE"
    )]
    pub api_keys: Option<PathBuf>,

    /// Serve a non-loopback --addr without --api-keys: anyone who reaches the port can
    /// write and delete.
    #[arg(help_heading = "Network and security", long)]
    pub insecure: bool,

    /// PEM certificate chain: serve HTTPS (TLS 1.2 and 1.3, rustls) instead of plain HTTP.
    /// Reloaded with --tls-key on SIGHUP and when either file changes.
    #[arg(
        help_heading = "Network and security",
        long,
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(
        help_heading = "Network and security",
        long,
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// Host names (or host:port) a request's `Host` header may carry, besides loopback
    /// names and addresses and the listening address. Repeat for several. Any other Host
    /// gets 403 `forbidden` when the server has no API keys (DNS rebinding: a web page whose
    /// name resolves to this server cannot call it). `*` accepts any Host.
    #[arg(help_heading = "Network and security", long, value_name = "HOST")]
    pub allow_host: Vec<String>,

    /// Let browser pages from this origin call the API (CORS), e.g. https://app.example.com.
    /// Repeat for several; `*` allows any. Off by default (no CORS headers).
    #[arg(help_heading = "Network and security", long, value_name = "ORIGIN")]
    pub cors_origin: Vec<String>,

    /// Append one JSON line per write, delete, snapshot, reload, collection change and
    /// refused request (401/403/421) to this file: time, key name (never the key), peer,
    /// method, route, collection, status. Rotated by size (FILE.1 .. FILE.5).
    #[arg(help_heading = "Network and security", long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,

    /// Size at which --audit-log is rotated.
    #[arg(help_heading = "Network and security", long, default_value = "64MiB", value_name = "BYTES", value_parser = parse_bytes)]
    pub audit_log_max_bytes: u64,

    /// HNSW candidate list size for requests that do not give `ef` (raised to k); for
    /// ivfpq indexes, the number of lists probed.
    #[arg(help_heading = "Search", long, default_value_t = searchd_server::DEFAULT_EF)]
    pub ef: usize,

    /// Search threads (the CPU pool that runs searches, filters, counts, facets and
    /// pages; connections and embedding have their own threads). Default: one per core
    /// (docs/queries-and-filters.md "Search threads" has the sweep behind it).
    #[arg(
        help_heading = "Threads and admission",
        long,
        visible_alias = "search-threads",
        value_name = "N"
    )]
    pub threads: Option<usize>,

    /// Threads of the async runtime that handles connections and HTTP (not searches).
    /// Default 1: on small machines the cores are better spent searching. Use 2 or more on
    /// a server exposed to untrusted clients: a reconnect storm on a single I/O thread
    /// slows every client's HTTP (bench/results/trickle-abuse.md).
    #[arg(help_heading = "Threads and admission", long, value_name = "N")]
    pub io_threads: Option<usize>,

    /// Lower the scheduling priority of the I/O thread(s) by this much (nice), so that on a
    /// saturated machine searches get the cores first and a flood of refused requests
    /// cannot starve them. 0 leaves priorities alone.
    #[arg(help_heading = "Threads and admission", long, default_value_t = searchd_server::DEFAULT_IO_NICE, value_name = "N", allow_negative_numbers = false)]
    pub io_nice: i32,

    /// Searches admitted at once (running or handed to the pool). Default: 2 x threads.
    #[arg(help_heading = "Threads and admission", long, value_name = "N")]
    pub max_inflight: Option<usize>,

    /// Searches that may wait for an in-flight slot; past it requests get an immediate 503
    /// `overloaded` with `Retry-After: 1`. Default: 64 x threads.
    #[arg(help_heading = "Threads and admission", long, value_name = "N")]
    pub queue: Option<usize>,

    /// Refuse (503 `overloaded`, `Retry-After: 1`) a request that would have to queue when
    /// the requests already admitted would take longer than this to complete at the rate
    /// measured while the server was saturated. Bounds queueing by time as well as by
    /// count, whatever the service time (text queries, a remote engine). 0 turns it off.
    #[arg(help_heading = "Threads and admission", long, default_value_t = searchd_server::DEFAULT_MAX_QUEUE_WAIT_MS, value_name = "MS")]
    pub max_queue_wait_ms: u64,

    /// Hold each refused request this long before its 503 `overloaded` is sent, so clients
    /// that resend at once (ignoring `Retry-After`) come back at most this often instead
    /// of spinning on refusals and taking the searches' CPU. A held refusal holds no place.
    /// 0 answers refusals at once.
    #[arg(help_heading = "Threads and admission", long, default_value_t = searchd_server::DEFAULT_REFUSAL_HOLD_MS, value_name = "MS")]
    pub refusal_hold_ms: u64,

    /// Deadline of each search from the arrival of its request, queueing included; a search
    /// past it is stopped (or not started) and answered 504 `deadline_exceeded`.
    #[arg(help_heading = "Search", long, default_value_t = searchd_server::DEFAULT_TIMEOUT_MS, value_name = "MS")]
    pub timeout_ms: u64,

    /// Turn on the response cache with this many bytes (e.g. 64MiB, 512KiB, 1000000).
    /// Off by default: with rotating queries it only adds work (docs/queries-and-filters.md "Response cache").
    #[arg(help_heading = "Search", long, value_name = "BYTES", value_parser = parse_bytes, group = "cache_tier")]
    pub cache_bytes: Option<u64>,

    /// Time to live of a cached reply (both tiers).
    #[arg(
        help_heading = "Search",
        long,
        default_value_t = 60,
        value_name = "SECONDS",
        requires = "cache_tier"
    )]
    pub cache_ttl_s: u64,

    /// A response cache in Redis shared by every searchd given the same URL
    /// (`redis://[:PASSWORD@]HOST:PORT[/DB]`), behind --cache-bytes or alone; a write or
    /// reload through any of them invalidates the others' entries. Fails open: while Redis
    /// is down or slow (50 ms), reads go uncached, never fail (docs/operations.md "Shared cache tier").
    #[arg(
        help_heading = "Search",
        long,
        value_name = "URL",
        group = "cache_tier",
        hide_env_values = true
    )]
    pub cache_redis: Option<String>,

    /// Bearer token required by /admin/* routes. Without it, admin routes are only
    /// accepted from loopback peers.
    #[arg(
        help_heading = "Network and security",
        long,
        env = "SEARCHD_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub admin_token: Option<String>,

    /// Largest request body in bytes; larger bodies get 413 `body_too_large`.
    #[arg(help_heading = "Bounded work", long, default_value_t = searchd_server::DEFAULT_BODY_LIMIT, value_name = "BYTES")]
    pub body_limit: usize,

    /// Time a client has to send a request's headers, and then its body, before the
    /// connection is closed (slow or stalled clients).
    #[arg(help_heading = "Bounded work", long, default_value_t = searchd_server::DEFAULT_READ_TIMEOUT_MS, value_name = "MS")]
    pub read_timeout_ms: u64,

    /// Where the float32 vectors live: `mmap` (shared page cache), `ram` (private copy),
    /// and for quantized indexes `disk` (rescoring rows read with pread) or `none` (no
    /// rescoring).
    #[arg(help_heading = "Memory placement", long, value_enum, default_value_t = VectorsPlacement::Mmap)]
    pub vectors: VectorsPlacement,

    /// Where the HNSW graph and id map live (default: like --vectors when that is mmap or
    /// ram, mmap otherwise).
    #[arg(help_heading = "Memory placement", long, value_enum)]
    pub graph: Option<PartPlacementArg>,

    /// Where a quantized index's codes live (default: like --graph's default).
    #[arg(help_heading = "Memory placement", long, value_enum)]
    pub codes: Option<PartPlacementArg>,

    /// Quantized indexes: rescore the best X*k traversal candidates with float32 vectors
    /// (default: the value recorded in the index, 4).
    #[arg(help_heading = "Search", long, value_name = "X")]
    pub oversample: Option<f32>,

    /// Partitioned indexes: partitions probed by searches whose body has no `nprobe`
    /// (default: the value recorded in the index, 16).
    #[arg(help_heading = "Search", long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub nprobe: Option<u32>,

    /// Pre-fault every mapped page at load so the first queries do not pay page faults.
    #[arg(help_heading = "Memory placement", long)]
    pub populate: bool,

    /// Skip the checksum pass over the index files at load (faster start).
    #[arg(help_heading = "Memory placement", long)]
    pub no_verify: bool,

    /// Partitioned indexes: bytes the resident partitions and routing of all of them may
    /// take together, across every collection and segment (e.g. 2GiB). Partitions load on
    /// demand and the least recently used of any index are dropped to stay within it; an
    /// index whose routing and largest partition do not fit next to what the others pin is
    /// refused with the bytes it needs. Default: every partition resident.
    #[arg(help_heading = "Memory placement", long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory_budget: Option<u64>,

    /// Serve collections without taking writes (writes get 409 `conflict`). A second
    /// process serving a collection that another one writes is read-only by itself.
    #[arg(help_heading = "Live writes", long)]
    pub read_only: bool,

    /// When an acknowledged write is synced to disk: `none` (written to the log before the
    /// reply: survives `kill -9`), `always` (fdatasync before each reply: survives power
    /// loss), `group` (one fdatasync shared by concurrent writers: survives power loss).
    #[arg(help_heading = "Live writes", long, default_value = "none", value_parser = ["none", "always", "group"])]
    pub fsync: String,

    /// Writes not waited for (`"wait": false`) become visible to searches within this.
    #[arg(
        help_heading = "Live writes",
        long,
        default_value_t = 1000,
        value_name = "MS"
    )]
    pub refresh_ms: u64,

    /// Threads of the background optimizer's index builds (merges of segments).
    #[arg(
        help_heading = "Live writes",
        long,
        default_value_t = 1,
        value_name = "N"
    )]
    pub optimizer_threads: usize,

    /// Lower the scheduling priority of the optimizer's merge thread (and its index
    /// builds) by this much (nice), so merges take idle cycles and searches keep theirs.
    /// 0 leaves it alone.
    #[arg(
        help_heading = "Live writes",
        long,
        default_value_t = 10,
        value_name = "N"
    )]
    pub optimizer_nice: i32,

    /// Live collections commit (sync segments and deleted sets, write the manifest, drop
    /// the log before it) at least this often while there are changes.
    #[arg(
        help_heading = "Live writes",
        long,
        default_value_t = 5000,
        value_name = "MS"
    )]
    pub commit_ms: u64,

    /// Segments a refresh or merge writes below this many documents get an exact-scan
    /// index; larger ones the collection's own (an HNSW graph). An exact scan costs one
    /// sequential distance per row: on 1M x 384 a 6,700-row flat segment cost each search
    /// more (1.5 ms) than the whole 1M graph walk (0.6 ms), so small segments become
    /// graphs early (bench/results/segment-cost-synth1m.md).
    #[arg(
        help_heading = "Live writes",
        long,
        default_value_t = 1_000,
        value_name = "DOCS"
    )]
    pub flat_max: usize,

    /// What upserts do with top-level fields the collection's mapping does not have, as
    /// Elasticsearch's `dynamic`: `true` types them from the first upsert that has them and
    /// indexes them (filters, facets, sorting); `false` stores them without indexing;
    /// `strict` refuses the document (400).
    #[arg(help_heading = "Live writes", long, default_value = "true", value_name = "true|false|strict", value_parser = ["true", "false", "strict"])]
    pub dynamic_mapping: String,

    /// The merger rewrites a segment once this share of its rows is deleted (minor graph
    /// segments, under a tenth of the largest, at 0.1 or this if lower). 1 keeps deleted
    /// rows in large segments until they are merged for another reason.
    #[arg(
        help_heading = "Live writes",
        long,
        default_value_t = 0.3,
        value_name = "RATIO"
    )]
    pub vacuum_ratio: f64,

    /// Largest body of a write request (`POST .../docs`, `.../delete`): bulk upserts are
    /// larger than searches (1,000 documents of 384 floats are ~4 MB of JSON). One request
    /// may hold at most three quarters of --max-pending-bytes while it is read: a larger
    /// body gets 413 whatever this says.
    #[arg(help_heading = "Bounded work", long, default_value_t = searchd_server::DEFAULT_WRITE_BODY_LIMIT, value_name = "BYTES", value_parser = parse_bytes_usize)]
    pub write_body_limit: usize,

    /// Most buckets one request's aggregations and facets may ask for, summed over all of
    /// them (Elasticsearch's search.max_buckets); more is refused with 400
    /// too_many_buckets before any work.
    #[arg(help_heading = "Bounded work", long, default_value_t = searchd_server::DEFAULT_MAX_BUCKETS, value_name = "N")]
    pub max_buckets: usize,

    /// Largest reply body: a search, page or aggregation whose reply would be larger
    /// (estimated before it is built from k, fields and buckets, and checked while it is
    /// written) is refused with 400 `reply_too_large`.
    #[arg(help_heading = "Bounded work", long, default_value = "64MiB", value_name = "BYTES", value_parser = parse_bytes_usize)]
    pub max_reply_bytes: usize,

    /// `POST /admin/reload` only opens index directories inside this directory
    /// (after resolving symlinks and `..`). Default: the directory that holds `--index`.
    #[arg(help_heading = "What to serve", long, value_name = "DIR")]
    pub reload_root: Option<PathBuf>,

    /// Where `POST /collections` makes collections (each in DIR/NAME, listed in
    /// DIR/searchd-collections.json); start-up serves the collections listed there after the
    /// command line's. Default: the reload root.
    #[arg(help_heading = "What to serve", long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Most connections open at once. Past it, new connections are answered by a minimal
    /// responder: /health, /healthz, /ready and /readyz as usual, everything else 503
    /// `overloaded` (Retry-After: 1), and closed.
    #[arg(help_heading = "Bounded work", long, default_value_t = searchd_server::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    pub max_connections: usize,

    /// Most bytes of requests being read or processed, over all connections (headers and
    /// bodies, e.g. 64MiB). A request that would go past it gets 503 `overloaded` and its
    /// connection is closed, so slow uploads cannot exhaust memory.
    #[arg(help_heading = "Bounded work", long, default_value = "64MiB", value_name = "BYTES", value_parser = parse_bytes)]
    pub max_pending_bytes: u64,

    /// Largest request head (request line and headers) in bytes; larger heads get 431
    /// `headers_too_large`. At least 8192.
    #[arg(help_heading = "Bounded work", long, default_value_t = searchd_server::DEFAULT_MAX_HEADER_BYTES, value_name = "BYTES")]
    pub max_header_bytes: usize,
}

/// Which engine answers searches (`serve --backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BackendKind {
    /// searchd's own engine over index and collection directories.
    #[default]
    Local,
    /// A Qdrant collection over gRPC (`--qdrant-url`, `--qdrant-collection`).
    Qdrant,
}

/// `searchd serve` flags of the Qdrant backend.
#[derive(Debug, Clone, clap::Args)]
pub struct QdrantServeArgs {
    /// The engine: `local` (index and collection directories) or `qdrant` (a Qdrant
    /// collection, with --qdrant-url and --qdrant-collection).
    #[arg(help_heading = "Qdrant backend", long, value_enum, default_value_t = BackendKind::Local)]
    pub backend: BackendKind,
    /// Qdrant's gRPC address (port 6334 by default in Qdrant), e.g. http://127.0.0.1:6334.
    #[arg(
        help_heading = "Qdrant backend",
        long,
        value_name = "URL",
        default_value = "http://127.0.0.1:6334"
    )]
    pub qdrant_url: String,
    /// The Qdrant collection to serve (also its name in searchd's routes).
    #[arg(help_heading = "Qdrant backend", long, value_name = "NAME")]
    pub qdrant_collection: Option<String>,
    /// gRPC channels (HTTP/2 connections) to Qdrant.
    #[arg(help_heading = "Qdrant backend", long, default_value_t = searchd_server::qdrant::DEFAULT_CHANNELS, value_name = "N")]
    pub qdrant_channels: usize,
    /// Qdrant API key (sent as the `api-key` header), if the cluster has one.
    #[arg(
        help_heading = "Qdrant backend",
        long,
        env = "QDRANT_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub qdrant_api_key: Option<String>,
}

impl From<BackendKind> for searchd_server::BackendKind {
    fn from(b: BackendKind) -> searchd_server::BackendKind {
        match b {
            BackendKind::Local => searchd_server::BackendKind::Local,
            BackendKind::Qdrant => searchd_server::BackendKind::Qdrant,
        }
    }
}

impl ServeArgs {
    /// The flags as the server library's settings.
    pub fn settings(&self) -> ServeSettings {
        let q = &self.qdrant;
        ServeSettings {
            index: self.index.clone(),
            collection: self.collection.clone(),
            qdrant: QdrantSettings {
                backend: q.backend.into(),
                qdrant_url: q.qdrant_url.clone(),
                qdrant_collection: q.qdrant_collection.clone(),
                qdrant_channels: q.qdrant_channels,
                qdrant_api_key: q.qdrant_api_key.clone(),
            },
            model: self.model.clone(),
            rerank_model: self.rerank_model.clone(),
            embed_window_us: self.embed_window_us,
            embed_batch: self.embed_batch,
            embed_threads: self.embed_threads,
            queries: self.queries.clone(),
            addr: match self.port {
                Some(port) => format!("127.0.0.1:{port}"),
                None => self.addr.clone(),
            },
            api_keys: self.api_keys.clone(),
            insecure: self.insecure,
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            allow_host: self.allow_host.clone(),
            cors_origin: self.cors_origin.clone(),
            audit_log: self.audit_log.clone(),
            audit_log_max_bytes: self.audit_log_max_bytes,
            ef: self.ef,
            threads: self.threads,
            io_threads: self.io_threads,
            io_nice: self.io_nice,
            max_inflight: self.max_inflight,
            queue: self.queue,
            max_queue_wait_ms: self.max_queue_wait_ms,
            refusal_hold_ms: self.refusal_hold_ms,
            timeout_ms: self.timeout_ms,
            cache_bytes: self.cache_bytes,
            cache_ttl_s: self.cache_ttl_s,
            cache_redis: self.cache_redis.clone(),
            admin_token: self.admin_token.clone(),
            body_limit: self.body_limit,
            read_timeout_ms: self.read_timeout_ms,
            vectors: self.vectors.into(),
            graph: self.graph.map(Into::into),
            codes: self.codes.map(Into::into),
            oversample: self.oversample,
            populate: self.populate,
            no_verify: self.no_verify,
            memory_budget: self.memory_budget,
            nprobe: self.nprobe.map(|n| n as usize),
            read_only: self.read_only,
            fsync: self.fsync.clone(),
            refresh_ms: self.refresh_ms,
            optimizer_threads: self.optimizer_threads,
            optimizer_nice: self.optimizer_nice,
            commit_ms: self.commit_ms,
            flat_max: self.flat_max,
            dynamic_mapping: self.dynamic_mapping.clone(),
            vacuum_ratio: self.vacuum_ratio,
            write_body_limit: self.write_body_limit,
            max_buckets: self.max_buckets,
            max_reply_bytes: self.max_reply_bytes,
            reload_root: self.reload_root.clone(),
            data_dir: self.data_dir.clone(),
            max_connections: self.max_connections,
            max_pending_bytes: self.max_pending_bytes,
            max_header_bytes: self.max_header_bytes,
        }
    }
}

/// `[NAME=]DIR[:budget=BYTES]` with the budget's size in bytes (`512MiB` becomes
/// `536870912`), as the server reads it.
fn parse_collection(s: &str) -> Result<String, String> {
    match s.rsplit_once(":budget=") {
        Some((spec, b)) => match parse_bytes(b) {
            Ok(0) => Err(format!("budget={b}: a budget must be more than 0 bytes")),
            Ok(bytes) => Ok(format!("{spec}:budget={bytes}")),
            Err(e) => Err(format!("budget={b}: {e}")),
        },
        None => Ok(s.to_string()),
    }
}

fn parse_bytes_usize(s: &str) -> Result<usize, String> {
    parse_bytes(s).and_then(|b| usize::try_from(b).map_err(|e| e.to_string()))
}

/// `64MiB`, `512KiB`, `1GiB`, `1000000` (bytes); KB/MB/GB are powers of 1000.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 64MiB, 512KiB, 1000000)"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (use KiB, MiB, GiB)"
            ))
        }
    };
    let v = (x * mult).round();
    if !(1.0..=1e15).contains(&v) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(flags: &[&str]) -> Result<ServeSettings, clap::Error> {
        let argv = std::iter::once("serve").chain(flags.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.serve.settings())
    }

    #[test]
    fn defaults_are_the_librarys() {
        // The flags' defaults and `ServeSettings::default()` agree, field by field.
        let want = ServeSettings {
            index: Some("/x".into()),
            ..ServeSettings::default()
        };
        assert_eq!(parse(&["--index", "/x"]).unwrap(), want);
        assert_eq!(want.addr, "127.0.0.1:8080");
        assert_eq!(
            (want.timeout_ms, want.body_limit, want.ef),
            (1000, 1 << 20, 64)
        );
    }

    #[test]
    fn flags_become_settings() {
        let s = parse(&[
            "--collection",
            "a=/c",
            "--vectors",
            "disk",
            "--graph",
            "ram",
            "--cache-bytes",
            "64MiB",
            "--write-body-limit",
            "1KiB",
            "--backend",
            "qdrant",
            "--qdrant-collection",
            "q",
        ])
        .unwrap();
        assert_eq!(s.collection, vec!["a=/c".to_string()]);
        assert_eq!(s.vectors, VectorPlacement::Disk);
        assert_eq!(s.graph, Some(Placement::Ram));
        assert_eq!(s.codes, None);
        assert_eq!(s.cache_bytes, Some(64 << 20));
        assert_eq!(s.write_body_limit, 1024);
        assert_eq!(s.qdrant.backend, searchd_server::BackendKind::Qdrant);
        assert_eq!(s.qdrant.qdrant_collection.as_deref(), Some("q"));
    }

    #[test]
    fn a_collection_budget_is_read_as_bytes() {
        let s = parse(&["--collection", "a=/c:budget=1MiB", "--collection", "/d"]).unwrap();
        assert_eq!(
            s.collection,
            vec!["a=/c:budget=1048576".to_string(), "/d".into()]
        );
        for bad in ["a=/c:budget=0", "a=/c:budget=lots", "a=/c:budget="] {
            let e = parse(&["--collection", bad]).unwrap_err().to_string();
            assert!(e.contains("budget="), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_flags_are_refused_by_the_parser() {
        assert!(parse(&[]).is_err(), "nothing to serve");
        assert!(parse(&["--index", "/x", "--vectors", "floppy"]).is_err());
        assert!(parse(&["--index", "/x", "--graph", "disk"]).is_err());
        assert!(parse(&["--index", "/x", "--fsync", "sometimes"]).is_err());
        assert!(
            parse(&["--index", "/x", "--cache-ttl-s", "5"]).is_err(),
            "needs --cache-bytes or --cache-redis"
        );
        assert!(parse(&[
            "--index",
            "/x",
            "--cache-ttl-s",
            "5",
            "--cache-redis",
            "redis://h:1"
        ])
        .is_ok());
        assert!(parse(&["--index", "/x", "--cache-bytes", "12 parsecs"]).is_err());
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("512KiB"), Ok(512 << 10));
        assert_eq!(parse_bytes("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_bytes("1000000"), Ok(1_000_000));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("lots").is_err());
    }
}
