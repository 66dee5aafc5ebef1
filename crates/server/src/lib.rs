//! # searchd-server
//!
//! The HTTP front door of searchd (CONTRACTS.md "HTTP API"): axum 0.8 routes served by a
//! hand-written hyper 1 accept loop on a small tokio runtime, with searches on a dedicated
//! CPU pool.
//!
//! ## Shape
//!
//! - **I/O**: a tokio runtime with `--io-threads` workers (default 1) accepts connections,
//!   parses HTTP and JSON, and writes replies. It never runs a search.
//! - **CPU pool**: `--threads` OS threads (default: one per core) fed by a channel; each
//!   job carries an `Arc` of the index it was admitted against, its deadline and a
//!   oneshot for the result. A search that panics is caught and answered 500 `internal`.
//! - **Admission**: at most `--max-inflight` (default 2 x threads) searches are in flight
//!   and `--queue` (default 64 x threads) more may wait behind them, in one FIFO that the
//!   pool's workers pull from themselves (a finished search never waits for the I/O thread
//!   to hand over the next one). Past that, `503 overloaded` with `Retry-After: 1` at once.
//!   Admission happens only after the whole body has been read, so slow clients hold no
//!   place. `/stats` reports `inflight` (the oldest `max_inflight` admitted), `queued` and
//!   `running` (on a core now).
//! - **Priorities**: `--io-nice N` lowers the I/O thread's scheduling priority below the
//!   search pool's, so that on a saturated machine a flood of refused requests cannot take
//!   the cores from admitted searches (default 0: unchanged).
//! - **Deadlines**: each request's deadline is `--timeout-ms` after its body has fully
//!   arrived (upload time is bounded by `--read-timeout-ms` instead, so a slow upload is
//!   not a 504). Time queued counts; a job whose deadline passed while it waited is not
//!   started; the engine checks the deadline inside its search loop. Both answer `504
//!   deadline_exceeded`. `--timeout-ms 0` therefore answers every search with 504.
//! - **Reload**: `POST /admin/reload {"index": "DIR"}` opens DIR on a blocking thread beside
//!   the current index and swaps an `ArcSwap`; in-flight searches finish on the old index,
//!   which is freed by the last of them. One reload opens an index at a time (a second
//!   gets `409 conflict` at once); when the handler is dropped (its connection failed)
//!   before the open finished, the opened index is freed without being swapped. A
//!   collection directory opens live ([`open::open_path`], as at start). Reloading the directory
//!   a live collection already writes closes it, serves its last view (writes 503) until
//!   nothing holds it and its lock is free, then opens it again with its log replayed; a
//!   swapped-out live collection is closed and let go before the reply (blue/green).
//!   Relative paths are taken from `--reload-root`; paths outside it are 403 whether or
//!   not they exist. The operator chooses the paths: the endpoint only
//!   opens index directories (a path that is not one is refused with 400
//!   `invalid_argument` and the engine's message) and no endpoint returns file contents.
//!   With `--admin-token` (or `SEARCHD_ADMIN_TOKEN`) admin routes need `Authorization:
//!   Bearer TOKEN` (else 401); without a token they are accepted only from loopback peers
//!   (else 403 `forbidden`).
//! - **Slow clients**: headers must arrive within `--read-timeout-ms` (hyper's header read
//!   timeout; this also closes idle keep-alive connections after that long), and the body
//!   within the same time again (else 408 `request_timeout` and the connection closes). The
//!   open-files soft limit is raised to the hard limit at start, so thousands of idle
//!   connections do not starve the others.
//! - **Before admission** (`limits.rs`): at most `--max-connections` connections (past it
//!   a minimal responder answers probes and 503s the rest), and a byte budget
//!   `--max-pending-bytes` over everything being read (request heads and bodies); a request
//!   past it gets `503 overloaded` and its connection is closed. Request heads are at most
//!   `--max-header-bytes` (431). A 413 drains a bounded part of the upload first. Clients
//!   that half-close their socket after the request still get the answer (so a client
//!   that closes its socket entirely is only noticed when the reply cannot be written).
//! - **Errors of the HTTP layer**: hyper's own replies to unparsable requests (400, 414,
//!   431) and axum's extractor rejections carry the contract's JSON error body too
//!   (`bad_request`, `uri_too_long`, `headers_too_large`, ...).
//! - **Shutdown**: after SIGTERM, requests still receiving their body are answered `503
//!   shutting_down` after a 0.5 s grace; in-flight searches finish (up to the drain
//!   timeout).
//! - **`{"id": N}`** ("more like this") searches with the stored vector of N and leaves N
//!   itself out of the hits (it would always be first with the best possible score); other
//!   rows with an identical vector are still returned.
//! - **`took_us`** is the time from the arrival of the request's headers to the reply,
//!   queueing included.
//!
//! Errors beyond the contract's table (added, none renamed): 400 `bad_request` (not
//! HTTP), 401 `unauthorized`, 403 `forbidden`, 408 `request_timeout`, 409 `conflict` (a
//! reload while another opens), 414 `uri_too_long`, 431 `headers_too_large`, 500
//! `internal`, 503 `not_ready` (a search before the index is loaded; has `Retry-After`),
//! 503 `shutting_down`.
//!
//! `/stats` `requests` counts every answered request except those to `/health`, `/ready`,
//! `/stats` and `/metrics` (and their `/healthz`, `/readyz` aliases); `latency_ms` and `qps_1m` are over successful searches of the
//! last 60 s. `/metrics` is OpenMetrics text (which Prometheus reads) and is produced from
//! the same counters.
#![warn(missing_docs)]

mod admin;
mod audit;
pub mod auth;
pub mod backend;
mod cache;
mod config;
mod conn;
mod console;
mod embedq;
mod error;
mod es;
mod es_reply;
mod es_write;
mod host;
mod limits;
mod local;
mod manage;
mod native;
mod net;
mod observe;
mod open;
mod openapi;
mod pool;
pub mod registry;
mod upsert;
/// Qdrant as the engine (`serve --backend qdrant`): the `searchd-qdrant` crate.
pub use searchd_qdrant as qdrant;
mod query;
mod reads;
mod render;
mod rerank;
mod router;
mod shared;
mod state;
mod stats;
mod tls;
mod wire;
mod writes;

use std::future::Future;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use tokio::net::TcpListener;

pub use backend::{
    BackendError, BoxFuture, Document, FieldsWanted, QueryInput, ReadOutput, ReadRequest,
    ScoredDoc, SearchBackend, SearchOutput, SearchRequest, StageTimes, WriteOp,
};
pub use embedq::{DEFAULT_EMBED_BATCH, DEFAULT_EMBED_WINDOW};
pub use local::LocalBackend;
pub use pool::Permit;
pub use rerank::{reorder as rerank_order, TextRerank, MAX_RERANK_TOP};
pub use searchd_collection::embed::{Embedded, TextEmbedder, TextKind};

pub use config::{
    available_cores, BackendKind, IndexSource, QdrantSettings, QuerySource, ServeSettings,
    ServerConfig, DEFAULT_ADDR, DEFAULT_BODY_LIMIT, DEFAULT_EF, DEFAULT_IO_NICE,
    DEFAULT_MAX_BUCKETS, DEFAULT_MAX_QUEUE_WAIT_MS, DEFAULT_READ_TIMEOUT_MS,
    DEFAULT_REFUSAL_HOLD_MS, DEFAULT_TIMEOUT_MS, DEFAULT_WRITE_BODY_LIMIT, INFLIGHT_PER_THREAD,
    QUEUE_PER_THREAD,
};
pub use error::{Code, ServerError};
pub use limits::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_PENDING_BYTES, DRAIN_MAX,
    SHUTDOWN_BODY_GRACE,
};
pub use net::{raise_nofile_limit, renice_current_thread};
pub use wire::{DEFAULT_K, MAX_EF};

/// User + system CPU seconds of this process so far (from /proc/self/stat).
pub fn process_cpu_seconds() -> f64 {
    stats::process_stats().cpu_seconds
}

/// Default `--io-threads`: tokio workers for connections and HTTP. One is enough to
/// parse and answer well over 20,000 requests/s, and on a small machine every other core
/// is better spent searching.
pub const DEFAULT_IO_THREADS: usize = 1;

/// Serve `config` on `listener` until `shutdown` resolves; then stop accepting, let
/// in-flight requests finish (up to `config.drain_timeout`) and return `Ok(())`.
///
/// Runs inside a tokio runtime (with the time and I/O drivers enabled). Starts accepting at
/// once: with [`IndexSource::Path`] the index (and the query matrix) are opened on a blocking
/// thread meanwhile, `/ready` answers 503 and searches 503 `not_ready` until then; if that
/// open fails, the server stops and this returns the error.
pub async fn serve<F>(
    mut config: ServerConfig,
    listener: TcpListener,
    shutdown: F,
) -> Result<(), ServerError>
where
    F: Future + Send,
{
    if config.threads == 0 {
        return Err(ServerError::Config("threads must be at least 1".into()));
    }
    if config.max_inflight == 0 {
        return Err(ServerError::Config(
            "max_inflight must be at least 1".into(),
        ));
    }
    // One budget for the whole process: every partitioned index the server opens (every
    // collection's, every segment's, reloads included) shares this pool. A pool the caller
    // made (a library server) is the caller's to account for; the server's own counts the
    // process's resident set as its base.
    let own_pool = match (&config.load.pool, config.load.memory_budget) {
        (None, Some(budget)) => {
            let pool = searchd_engine::MemoryPool::new(budget);
            config.load.pool = Some(pool.clone());
            Some(pool)
        }
        _ => None,
    };
    if let Some(pool) = &own_pool {
        // The budget bounds the process: what it holds before any index opens (code,
        // runtime, the model if any) is counted first.
        let base = stats::process_stats().rss_bytes;
        pool.set_base(base);
        tracing::info!(
            budget = pool.budget(),
            base,
            "memory budget: one pool for every partitioned index of the process"
        );
    }
    // A collection with its own budget (`--collection NAME=DIR:budget=BYTES`) gets a pool of
    // its own, kept for its reloads; the process pool above bounds the rest.
    let collection_pools: std::collections::BTreeMap<String, searchd_engine::MemoryPool> = config
        .collection_budgets
        .iter()
        .map(|(name, &budget)| {
            tracing::info!(collection = %name, budget, "memory budget of its own");
            (name.clone(), searchd_engine::MemoryPool::new(budget))
        })
        .collect();
    let nofile = match raise_nofile_limit() {
        Ok(n) => Some(n),
        Err(e) => {
            tracing::warn!("cannot raise the open-files limit: {e}");
            None
        }
    };
    // A model's tensors are large allocations made and freed for every batch: under the
    // pinned threshold each one is a fresh mmap whose pages fault in again (embedding ran
    // 1.5x slower, bench/results/one-path-text-upserts.json); with a model the dynamic
    // threshold stays and the trims alone give memory back after bursts.
    limits::tune_allocator(config.embedder.is_none() && config.reranker.is_none());
    {
        // A body limit over what one request may hold of the byte budget cannot be
        // reached: such bodies get 413 naming --max-pending-bytes. Say so at start.
        let room = config.max_pending_bytes / 4 * 3;
        for (flag, limit) in [
            ("--body-limit", config.body_limit),
            ("--write-body-limit", config.write_body_limit),
        ] {
            if limit > room && limit > limits::SMALL_REQUEST {
                tracing::warn!(
                    "{flag} {limit} is over what one request may hold of --max-pending-bytes {} (three quarters: {room}); bodies over {room} bytes get 413: raise --max-pending-bytes to at least {} to take them",
                    config.max_pending_bytes,
                    limit.div_ceil(3).saturating_mul(4)
                );
            }
        }
    }
    let addr = listener.local_addr()?;
    let pool = Arc::new(
        pool::Pool::start(config.threads, config.search_delay).map_err(ServerError::Runtime)?,
    );
    let queries_path = match &config.queries {
        Some(QuerySource::Path(p)) => Some(p.clone()),
        _ => None,
    };
    let embedder = match &config.embedder {
        Some(e) => Some(
            embedq::Batcher::start(
                e.clone(),
                config.embed_window,
                config.embed_batch,
                config.max_inflight.saturating_add(config.queue),
            )
            .map_err(ServerError::Runtime)?,
        ),
        None => None,
    };
    let first_name = config.name.clone().unwrap_or_else(|| match &config.index {
        IndexSource::Path(p) => config::dir_name(p),
        _ => "default".into(),
    });
    let mut slots = vec![Arc::new(state::Slot::new(first_name))];
    for (name, _) in &config.more {
        if slots.iter().any(|s| s.name == *name) {
            return Err(ServerError::Config(format!(
                "two collections are named {name:?}"
            )));
        }
        slots.push(Arc::new(state::Slot::new(name.clone())));
    }
    let keys = match &config.api_keys {
        Some(p) => {
            let k = Arc::new(auth::Keys::open(p)?);
            k.watch();
            Some(k)
        }
        None => None,
    };
    let tls = match &config.tls {
        Some((cert, key)) => {
            let t = Arc::new(tls::Tls::open(cert, key)?);
            t.watch();
            Some(t)
        }
        None => None,
    };
    let app = Arc::new(state::App {
        scheme: if tls.is_some() { "https" } else { "http" },
        audit: match &config.audit_log {
            Some((p, max)) => Some(Arc::new(audit::Audit::open(p, *max)?)),
            None => None,
        },
        keys,
        slots: arc_swap::ArcSwap::from_pointee(slots),
        queries: ArcSwapOption::empty(),
        queries_path,
        cfg: state::Settings {
            ef: config.ef,
            oversample: config.oversample,
            nprobe: config.nprobe,
            timeout: config.timeout,
            body_limit: config.body_limit,
            read_timeout: config.read_timeout,
            admin_token: config.admin_token.clone(),
            reload_root: config.reload_root.clone(),
            load: config.load.clone(),
            collection_pools: collection_pools.clone(),
            max_inflight: config.max_inflight,
            queue: config.queue,
            max_queue_wait: config.max_queue_wait,
            threads: config.threads,
            write_body_limit: config.write_body_limit,
            max_buckets: config.max_buckets,
            allow_host: config.allow_host.clone(),
            max_reply_bytes: config.max_reply_bytes,
            cors_origin: config.cors_origin.clone(),
            live: config.live.clone(),
            data_dir: config.data_dir.clone(),
        },
        admission: pool::Admission::new(config.max_inflight, config.queue, config.max_queue_wait)
            .with_hold(config.refusal_hold),
        // As many large renders at once as searches: renders are CPU work like them.
        renders: render::Renders::new(config.threads, config.timeout),
        pool,
        embedder,
        reranker: config.reranker.clone().map(rerank::Reranker::new),
        stats: stats::Stats::new(),
        limits: limits::Limits::new(
            config.max_connections,
            config.max_pending_bytes,
            config.max_header_bytes,
            nofile,
        ),
        cache: config
            .cache
            .map(|(bytes, ttl)| cache::ResponseCache::new(bytes, ttl)),
        shared: match &config.cache_redis {
            Some((url, ttl)) => Some(shared::SharedTier::start(url, *ttl)?),
            None => None,
        },
    });

    // Load in the background while already answering /health and /ready.
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<ServerError>();
    let (read_timeout, drain_timeout, io_nice) =
        (config.read_timeout, config.drain_timeout, config.io_nice);
    {
        let app = app.clone();
        // Moved, not cloned: the loader task holds the only other reference to a
        // caller-supplied index, so a reload can free it.
        tokio::spawn(async move {
            let pool = app.pool.clone();
            let model = app.embedder.as_ref().map(|b| b.record.clone());
            let loaded = tokio::task::spawn_blocking(move || {
                open::load(&config, &collection_pools, pool, model.as_ref())
            })
            .await;
            match loaded {
                Ok(Ok((backends, queries))) => {
                    app.queries.store(queries.clone());
                    let mut served = Vec::new();
                    for (slot, backend) in app.slots().iter().zip(backends) {
                        match backend {
                            Ok(backend) => {
                                let line = describe(&slot.name, &backend.info());
                                tracing::info!("opened {line}");
                                served.push(line);
                                slot.backend.store(Some(Arc::new(backend)));
                            }
                            Err(e) => {
                                tracing::error!(collection = %slot.name, error = %e, "the collection failed to open; the others serve, it answers 503 naming the reason");
                                slot.failed.store(Some(Arc::new(e.to_string())));
                            }
                        }
                    }
                    if let Some(pool) = &own_pool {
                        // What the open server holds besides its partitioned indexes
                        // (threads, buffers, other collections' files read in) is
                        // counted in the budget before searches load partitions.
                        pool.settle_base(stats::process_stats().rss_bytes);
                        let p = pool.stats();
                        tracing::info!(
                            budget = p.budget,
                            base = p.base,
                            pinned = p.pinned,
                            "memory budget: process base and routing counted"
                        );
                    }
                    tracing::info!(
                        "{}",
                        ready_line(&app, addr, &served, queries.as_ref().map(|q| q.n()))
                    );
                }
                Ok(Err(e)) => {
                    let _ = failed_tx.send(e);
                }
                Err(e) => {
                    let _ = failed_tx.send(ServerError::Config(format!("loader failed: {e}")));
                }
            }
        });
    }
    tracing::info!(
        "bound {addr}; opening {} (GET /health answers now, /ready once it is open)",
        plural(app.slots().len(), "collection")
    );

    let mut failed: Option<ServerError> = None;
    let failed_ref = &mut failed;
    let stop = async move {
        tokio::select! {
            _ = shutdown => {}
            Some(e) = async { failed_rx.await.ok() } => {
                // (A successful load drops the sender: that branch then never matches.)
                *failed_ref = Some(e);
            }
        }
    };
    net::accept_loop(
        app.clone(),
        listener,
        stop,
        read_timeout,
        drain_timeout,
        io_nice,
        tls,
    )
    .await;
    // Live collections: make every write durable in the segments before exiting (their
    // logs hold the writes anyway; this makes the next start fast).
    for slot in app.slots().iter() {
        if let Some(b) = slot.backend.load_full() {
            let _ = tokio::task::spawn_blocking(move || b.close()).await;
        }
    }
    tracing::info!("searchd stopped");
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `NAME (KIND, N docs x DIM, METRIC, SIZE, PATH)` from a backend's info, for the logs.
fn describe(name: &str, info: &serde_json::Value) -> String {
    let s = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "?".into(),
        other => other.to_string(),
    };
    let index = if info["index"].is_object() {
        &info["index"]
    } else {
        info
    };
    let mb = info["bytes"].as_u64().unwrap_or(0) as f64 / (1024.0 * 1024.0);
    format!(
        "{name} ({} {}, {} docs x {} dims, {}, {mb:.1} MiB, {})",
        s(&info["kind"]),
        s(&index["kind"]),
        info["docs"].as_u64().or(info["n"].as_u64()).unwrap_or(0),
        info["dim"].as_u64().or(index["dim"].as_u64()).unwrap_or(0),
        s(if info["metric"].is_null() {
            &index["metric"]
        } else {
            &info["metric"]
        }),
        s(&info["path"]),
    )
}

/// The one line that says the server is serving: where, what, and its limits.
fn ready_line(
    app: &state::App,
    addr: std::net::SocketAddr,
    served: &[String],
    queries: Option<usize>,
) -> String {
    let c = &app.cfg;
    let mut extra = format!(
        "{} search threads, {} in flight + {} queued, {} ms deadline, ef {}, {} connections, {} MiB pending",
        c.threads,
        c.max_inflight,
        c.queue,
        c.timeout.as_millis(),
        c.ef,
        app.limits.max_connections,
        app.limits.max_pending >> 20,
    );
    if let Some(n) = queries {
        extra.push_str(&format!(", {n} query rows"));
    }
    if app.embedder.is_some() {
        extra.push_str(", text queries on");
    }
    format!(
        "ready: listening on {}://{addr}, serving {}: {} ({extra})",
        app.scheme,
        plural(served.len(), "collection"),
        served.join("; ")
    )
}

/// Resolve `addr` (`host:port`; a name such as `localhost:8080` is looked up) and bind.
pub async fn bind(addr: &str) -> Result<TcpListener, ServerError> {
    let bind_err = |source| ServerError::Bind {
        addr: addr.to_string(),
        source,
    };
    let addrs: Vec<_> = tokio::net::lookup_host(addr)
        .await
        .map_err(bind_err)?
        .collect();
    let mut last = None;
    for a in addrs {
        match listen(a) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(bind_err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no address to bind")
    })))
}

/// Connections the kernel may queue before `accept` (it caps this at
/// `net.core.somaxconn`). tokio's default of 1,024 overflowed under a reconnect storm of
/// ~2,700 connections/s (bench/trickle_abuse.py): a dropped SYN is retried by the client
/// after 1 s, so a `/health` probe took 1.03 s.
const LISTEN_BACKLOG: u32 = 8192;

fn listen(a: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let s = if a.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As std's and tokio's `bind` do on Unix: a restarted server can reuse its port while
    // old connections sit in TIME_WAIT.
    s.set_reuseaddr(true)?;
    s.bind(a)?;
    s.listen(LISTEN_BACKLOG)
}

/// Resolves on SIGTERM or SIGINT. A second signal while draining exits the process at once
/// (status 130).
pub async fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!("{name}: shutting down");
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            tracing::warn!("second signal: exiting without draining");
            std::process::exit(130);
        });
    })
}

/// `searchd serve`: build the runtime (`--io-threads` workers), raise the open-files limit,
/// bind `--addr`, install SIGTERM/SIGINT handling and serve until a signal; returns `Ok`
/// after a graceful drain.
pub fn run_blocking(args: &ServeSettings) -> Result<(), ServerError> {
    run_blocking_with(args, None, None)
}

/// [`run_blocking`] with an embedder for text queries (the binary loads `--model`) and a
/// cross-encoder for rerank (`--rerank-model`).
pub fn run_blocking_with(
    args: &ServeSettings,
    embedder: Option<Arc<dyn TextEmbedder>>,
    reranker: Option<Arc<dyn TextRerank>>,
) -> Result<(), ServerError> {
    let mut config = ServerConfig::from_settings(args)?;
    config.embedder = embedder;
    config.reranker = reranker;
    if let Err(e) = raise_nofile_limit() {
        tracing::warn!("cannot raise the open-files limit: {e}");
    }
    let io_threads = args.io_threads.unwrap_or(DEFAULT_IO_THREADS).max(1);
    let io_nice = config.io_nice;
    // One I/O thread: a current-thread runtime, so accepting, HTTP and replies all run on
    // the thread that called us, with no work-stealing machinery between them. More: a
    // multi-thread runtime whose workers run the connections while this thread accepts.
    // Either way the search pool is started from this thread, before any renice.
    let mut builder = if io_threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(io_threads);
        if io_nice != 0 {
            b.on_thread_start(move || {
                let _ = net::renice_current_thread(io_nice);
            });
        }
        b
    };
    let rt = builder
        .max_blocking_threads(4)
        .thread_name("searchd-io")
        .enable_all()
        .build()
        .map_err(ServerError::Runtime)?;
    rt.block_on(async move {
        let listener = bind(&args.addr).await?;
        let shutdown = shutdown_signal().await?;
        serve(config, listener, shutdown).await
    })
}
