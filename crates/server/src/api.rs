//! Routes and handlers of the HTTP API (CONTRACTS.md "HTTP API").

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use searchd_collection::fusion::{self, Fusion, Normalize};
use searchd_collection::DocId;
use searchd_engine::{LoadOptions, SearchError, MAX_K};
use searchd_vecio::Vectors;
use serde::Deserialize;

use crate::backend::{
    select_fields, BackendError, FacetOutput, FacetSpec, FieldsWanted, LocalBackend, QueryInput,
    ScoredDoc, SearchBackend, SearchRequest, StageTimes,
};
use crate::embedq::{Batcher, EmbedFailure};
use crate::error::{ApiError, Code, Tagged, JSON};
use crate::pool::{Admission, Pool};
use crate::rerank::{RerankFailure, Reranker, MAX_RERANK_TOP};
use crate::stats::{process_stats, IndexFigures, Stage, Stats};

/// Largest `ef` a request may ask for.
pub const MAX_EF: usize = 4096;
/// Default `k`.
pub const DEFAULT_K: usize = 10;

/// When the request's headers had been read (its deadline counts from here).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival(pub Instant);

/// Settings the handlers need.
pub(crate) struct Settings {
    pub ef: usize,
    pub oversample: Option<f32>,
    pub timeout: Duration,
    pub body_limit: usize,
    pub read_timeout: Duration,
    pub admin_token: Option<String>,
    pub reload_root: Option<PathBuf>,
    pub load: LoadOptions,
    pub max_inflight: usize,
    pub queue: usize,
    pub max_queue_wait: Option<std::time::Duration>,
    pub threads: usize,
    pub write_body_limit: usize,
    /// How collections opened by `/admin/reload` take writes (as at start-up).
    pub live: searchd_collection::live::LiveConfig,
}

/// One served collection: its name and its backend, swapped whole on reload.
pub(crate) struct Slot {
    pub name: String,
    pub backend: ArcSwapOption<Box<dyn SearchBackend>>,
    /// Bumped by every swap of the backend (and every write): part of each cache key, so a
    /// cached reply can never outlive the data it was computed from.
    pub generation: std::sync::atomic::AtomicU64,
    /// Why the collection could not be opened at start (a damaged file, a gap in its log):
    /// it answers 503 naming the reason while the other collections serve.
    pub failed: ArcSwapOption<String>,
}

impl Slot {
    /// The slot's backend, or 503: still loading, or failed to open (with the reason).
    pub fn backend_or_503(&self) -> Result<Arc<Box<dyn SearchBackend>>, ApiError> {
        if let Some(b) = self.backend.load_full() {
            return Ok(b);
        }
        Err(match self.failed.load_full() {
            Some(why) => ApiError::new(
                Code::NotReady,
                format!("collection {:?} failed to open: {why}", self.name),
            ),
            None => ApiError::new(
                Code::NotReady,
                "the collection is still loading; retry shortly",
            ),
        })
    }
}

/// What `/ready` says: `None` when every collection is open, else why not (collections
/// that failed to open are named with their reasons).
pub(crate) fn not_ready(app: &App) -> Option<String> {
    let failed: Vec<String> = app
        .slots
        .iter()
        .filter_map(|s| s.failed.load_full().map(|w| format!("{}: {w}", s.name)))
        .collect();
    if !failed.is_empty() {
        return Some(format!(
            "{} failed to open (the others serve): {}",
            if failed.len() == 1 {
                "a collection"
            } else {
                "collections"
            },
            failed.join("; ")
        ));
    }
    if app.slots.iter().all(|s| s.backend.load().is_some()) {
        None
    } else {
        Some("the index is still loading".into())
    }
}

/// Shared state of one server.
pub(crate) struct App {
    /// Served collections; the first is the default behind the v1 routes.
    pub slots: Vec<Arc<Slot>>,
    pub queries: ArcSwapOption<Vectors>,
    /// Where the query matrix came from, for messages.
    pub queries_path: Option<PathBuf>,
    pub cfg: Settings,
    pub admission: Admission,
    pub pool: Arc<Pool>,
    pub embedder: Option<Batcher>,
    pub reranker: Option<Reranker>,
    pub stats: Arc<Stats>,
    /// Byte budget, connection cap, shutdown of uploads, the one-reload-at-a-time flag.
    pub limits: Arc<crate::limits::Limits>,
    /// The response cache (`serve --cache-bytes`); `None` when off.
    pub cache: Option<crate::cache::ResponseCache>,
}

impl App {
    pub fn inflight(&self) -> usize {
        self.admission.inflight()
    }

    pub fn slot(&self, name: &str) -> Result<Arc<Slot>, ApiError> {
        self.slots
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .ok_or_else(|| {
                ApiError::new(
                    Code::NotFound,
                    format!(
                        "no collection named {name:?} (served: {})",
                        self.slots
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    }

    fn figures(&self) -> IndexFigures {
        match self.slots[0].backend.load_full() {
            Some(b) => {
                let (n, dim, bytes) = b.figures();
                IndexFigures {
                    loaded: true,
                    n,
                    dim: dim as u64,
                    bytes,
                }
            }
            None => IndexFigures::default(),
        }
    }
}

pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/search", post(search))
        .route("/collections", get(collections))
        .route("/collections/{name}", get(collection_info))
        .route("/collections/{name}/search", post(collection_search))
        .route(
            "/collections/{name}/docs/{id}",
            get(get_doc).delete(crate::writes::delete_one),
        )
        .route("/collections/{name}/docs", post(crate::writes::upsert))
        .route(
            "/collections/{name}/delete",
            post(crate::writes::delete_many),
        )
        .route(
            "/collections/{name}/snapshot",
            post(crate::writes::snapshot),
        )
        .route("/collections/{name}/count", post(crate::reads::count))
        .route("/collections/{name}/facet", post(crate::reads::facet))
        .route("/collections/{name}/scroll", post(crate::reads::scroll))
        .route(
            "/{name}/_search",
            get(crate::es::search).post(crate::es::search),
        )
        .route(
            "/{name}/_count",
            get(crate::es::count).post(crate::es::count),
        )
        .route("/{name}/_doc/{id}", get(crate::es::get_doc))
        .route("/{name}/_mget", get(crate::es::mget).post(crate::es::mget))
        .route("/health", get(health))
        .route("/healthz", get(health))
        .route("/ready", get(ready))
        .route("/readyz", get(ready))
        .route("/stats", get(stats))
        .route("/metrics", get(metrics))
        .route("/admin/reload", post(reload))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        Code::NotFound,
        format!("no route for {method} {}", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        Code::MethodNotAllowed,
        format!("{} does not accept {method}", uri.path()),
    )
}

pub(crate) fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, JSON);
    r.extensions_mut().insert(Tagged(Code::Ok));
    r
}

async fn health() -> Response {
    json_response(StatusCode::OK, b"{\"status\":\"ok\"}".to_vec())
}

async fn ready(State(app): State<Arc<App>>) -> Response {
    if let Some(why) = not_ready(&app) {
        return ApiError::new(Code::NotReady, why).into_response();
    }
    if let Some(why) = app
        .slots
        .iter()
        .find_map(|s| s.backend.load_full().and_then(|b| b.ready().err()))
    {
        return ApiError::new(Code::NotReady, why).into_response();
    }
    json_response(StatusCode::OK, b"{\"status\":\"ready\"}".to_vec())
}

/// The v1 `/stats` `index` object (kind, n, dim, metric, params, bytes, placement, path) of
/// a backend's info: a bare index's own figures, or a collection's first segment's.
fn v1_index_info(info: &serde_json::Value) -> serde_json::Value {
    let ix = &info["index"];
    if ix.is_null() {
        return info.clone();
    }
    let mut v = serde_json::json!({
        "kind": ix["kind"],
        "n": info["docs"],
        "dim": ix["dim"],
        "metric": ix["metric"],
        "params": ix["params"],
        "bytes": info["bytes"],
        "placement": ix["placement"],
        "path": info["path"],
    });
    if info["kind"] == "collection" {
        v["collection"] = info.clone();
    }
    v
}

async fn stats(State(app): State<Arc<App>>) -> Response {
    let s = &app.stats;
    let (latency, qps, _) = s.window();
    let index = app.slots[0]
        .backend
        .load_full()
        .map(|b| v1_index_info(&b.info()));
    let collections: serde_json::Map<String, serde_json::Value> = app
        .slots
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                match (s.backend.load_full(), s.failed.load_full()) {
                    (Some(b), _) => b.info(),
                    (None, Some(why)) => serde_json::json!({"state": "failed", "reason": *why}),
                    (None, None) => serde_json::Value::Null,
                },
            )
        })
        .collect();
    let v = serde_json::json!({
        "uptime_s": s.uptime().as_secs_f64(),
        "index": index,
        "requests": s.totals(),
        "collections": collections,
        "embedder": app.embedder.as_ref().map(|b| serde_json::json!({"model": b.record, "batching": b.stats.json()})),
        "reranker": app.reranker.as_ref().map(|r| r.info()),
        "cache": app.cache.as_ref().map_or_else(|| serde_json::json!({"enabled": false}), |c| c.json()),
        "stages": s.stages(),
        "inflight": app.inflight(),
        "queued": app.admission.queued(),
        "admission": {
            "shed_by_wait": app.admission.shed_by_wait(),
            "completion_interval_ms": app.admission.completion_interval().map(|d| d.as_secs_f64() * 1e3),
        },
        "running": app.pool.running(),
        "latency_ms": latency,
        "qps_1m": qps,
        "process": process_stats(),
        "reloads": s.reloads.load(Relaxed),
        "config": {
            "threads": app.cfg.threads,
            "max_inflight": app.cfg.max_inflight,
            "queue": app.cfg.queue,
            "max_queue_wait_ms": app.cfg.max_queue_wait.map(|d| d.as_millis() as u64),
            "timeout_ms": app.cfg.timeout.as_millis() as u64,
            "ef": app.cfg.ef,
            "body_limit": app.cfg.body_limit,
        },
    });
    json_response(
        StatusCode::OK,
        serde_json::to_vec(&v).unwrap_or_else(|_| b"{}".to_vec()),
    )
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let text = crate::stats::render_metrics(
        &app.stats,
        app.inflight(),
        app.admission.queued(),
        &app.limits,
        app.figures(),
        app.cache.as_ref().map(|c| {
            let k = c.counters();
            [
                k.hits.load(Relaxed),
                k.misses.load(Relaxed),
                k.inserts.load(Relaxed),
                k.evictions.load(Relaxed),
                c.bytes(),
            ]
        }),
    );
    let mut r = (StatusCode::OK, text).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

// ---------------------------------------------------------------------------------------
// Request bodies

fn is_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let ct = headers.get(header::CONTENT_TYPE);
    let Some(ct) = ct else {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "the request has no Content-Type; send Content-Type: application/json",
        ));
    };
    let s = ct.to_str().unwrap_or("");
    let mime = s
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json")) {
        Ok(())
    } else {
        Err(ApiError::new(
            Code::UnsupportedMediaType,
            format!("Content-Type must be application/json, got {s:?}"),
        ))
    }
}

/// Check the content type and read the whole body, within the size limit, the read
/// timeout and the byte budget (`limits.rs`). Admission happens only after this, so a slow
/// client holds no search slot.
pub(crate) async fn read_body(app: &App, req: Request) -> Result<Bytes, ApiError> {
    read_body_limit(app, req, app.cfg.body_limit).await
}

/// [`read_body`] with another size limit (writes take larger bodies).
pub(crate) async fn read_body_limit(
    app: &App,
    req: Request,
    limit: usize,
) -> Result<Bytes, ApiError> {
    is_json(req.headers())?;
    crate::limits::read_body(app, req, limit).await
}

/// Map a serde_json error to `invalid_json` (not JSON at all) or `invalid_argument` (JSON
/// of the wrong shape).
pub(crate) fn json_error(e: serde_json::Error, body: &[u8]) -> ApiError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Data => ApiError::invalid(format!("invalid request: {e}")),
        Category::Syntax if e.to_string().starts_with("number out of range") => {
            ApiError::invalid(format!("invalid request: {e}"))
        }
        Category::Syntax if non_finite_literal(&e, body) => ApiError::invalid(format!(
            "NaN and infinity are not valid numbers (line {} column {}); vectors must be finite",
            e.line(),
            e.column()
        )),
        _ => ApiError::new(
            Code::InvalidJson,
            format!("the body is not valid JSON: {e}"),
        ),
    }
}

/// Whether a syntax error points at a `NaN` / `Infinity` literal (which some JSON writers
/// emit): that is a non-finite value, an invalid argument rather than garbage.
fn non_finite_literal(e: &serde_json::Error, body: &[u8]) -> bool {
    let line_start = body
        .split(|&b| b == b'\n')
        .take(e.line().saturating_sub(1))
        .map(|l| l.len() + 1)
        .sum::<usize>();
    let at = (line_start + e.column()).saturating_sub(1).min(body.len());
    let from = at.saturating_sub(9);
    let window = &body[from..(at + 9).min(body.len())];
    let w = String::from_utf8_lossy(window);
    w.contains("NaN") || w.contains("Infinity") || w.contains("nan") || w.contains("inf")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchBody {
    /// Parsed as f64 and narrowed afterwards, so a value beyond float32's range becomes a
    /// clear "not a finite number" error whatever serde_json features the build unifies
    /// (with `arbitrary_precision`, parsing 1e39 straight into f32 fails as "out of range").
    #[serde(default)]
    vector: Option<Vec<f64>>,
    #[serde(default)]
    qidx: Option<serde_json::Number>,
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    text: Option<serde_json::Value>,
    #[serde(default)]
    k: Option<serde_json::Number>,
    #[serde(default)]
    ef: Option<serde_json::Number>,
    #[serde(default)]
    fields: Option<serde_json::Value>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    fusion: Option<serde_json::Value>,
    #[serde(default)]
    rerank: Option<serde_json::Value>,
    #[serde(default)]
    filter: Option<serde_json::Value>,
    #[serde(default)]
    facets: Option<serde_json::Value>,
}

/// A non-negative integer field, or a clear message.
pub(crate) fn uint(name: &str, n: &serde_json::Number, what: &str) -> Result<u64, ApiError> {
    n.as_u64()
        .ok_or_else(|| ApiError::invalid(format!("{name} must be {what}, got {n}")))
}

pub(crate) fn ranged(
    name: &str,
    n: &serde_json::Number,
    lo: u64,
    hi: u64,
) -> Result<usize, ApiError> {
    let what = format!("an integer between {lo} and {hi}");
    let v = uint(name, n, &what)?;
    if v < lo || v > hi {
        return Err(ApiError::invalid(format!("{name} must be {what}, got {v}")));
    }
    Ok(v as usize)
}

/// What a search asks for.
enum QuerySpec {
    Vector(Vec<f32>),
    Qidx(u64),
    Id(DocId),
    Text(String),
}

/// How a search retrieves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Dense,
    Lexical,
    Hybrid,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Dense => "dense",
            Mode::Lexical => "lexical",
            Mode::Hybrid => "hybrid",
        }
    }
}

struct SearchSpec {
    query: QuerySpec,
    k: usize,
    ef: usize,
    fields: FieldsWanted,
    /// As asked; `None` picks the default for the query and collection.
    mode: Option<Mode>,
    fusion: Fusion,
    /// Candidates from each side of a hybrid search.
    window: usize,
    /// Rerank the top this many hits.
    rerank: Option<usize>,
    /// The text was cut to [`MAX_TEXT_CHARS`].
    text_cut: bool,
    filter: Option<serde_json::Value>,
    facets: Vec<FacetSpec>,
}

/// The fusion of a hybrid search when the request gives none: RRF with rank constant 60
/// over 100 candidates per side (README "Lexical and hybrid search" gives the measurements
/// behind this choice).
pub const DEFAULT_FUSION: Fusion = fusion::DEFAULT_FUSION;

fn number(name: &str, v: &serde_json::Value) -> Result<f64, ApiError> {
    v.as_f64()
        .filter(|x| x.is_finite())
        .ok_or_else(|| ApiError::invalid(format!("{name} must be a number, got {v}")))
}

pub(crate) fn object<'a>(
    name: &str,
    v: &'a serde_json::Value,
    keys: &[&str],
) -> Result<&'a serde_json::Map<String, serde_json::Value>, ApiError> {
    let Some(o) = v.as_object() else {
        return Err(ApiError::invalid(format!(
            "{name} must be an object, got {v}"
        )));
    };
    if let Some(bad) = o.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "{name}: unknown key {bad:?} (known: {})",
            keys.join(", ")
        )));
    }
    Ok(o)
}

pub(crate) fn int_in(
    name: &str,
    v: &serde_json::Value,
    lo: u64,
    hi: u64,
) -> Result<usize, ApiError> {
    match v {
        serde_json::Value::Number(n) => ranged(name, n, lo, hi),
        other => Err(ApiError::invalid(format!(
            "{name} must be an integer between {lo} and {hi}, got {other}"
        ))),
    }
}

/// `fusion`: `{"method": "rrf", "k": 60, "window": 100}` or `{"method": "weighted",
/// "weights": {"dense": 0.7, "lexical": 0.3}, "normalize": "minmax"|"zscore", "window": 100}`.
fn parse_fusion(v: Option<&serde_json::Value>) -> Result<(Fusion, usize), ApiError> {
    let Some(v) = v else {
        return Ok((DEFAULT_FUSION, fusion::DEFAULT_WINDOW));
    };
    let o = object(
        "fusion",
        v,
        &["method", "k", "window", "weights", "normalize"],
    )?;
    let window = match o.get("window") {
        Some(w) => int_in("fusion.window", w, 1, fusion::MAX_WINDOW as u64)?,
        None => fusion::DEFAULT_WINDOW,
    };
    let method = match o.get("method") {
        None => "rrf",
        Some(serde_json::Value::String(m)) => m.as_str(),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "fusion.method must be \"rrf\" or \"weighted\", got {other}"
            )))
        }
    };
    let f = match method {
        "rrf" => {
            if let Some(k) = ["weights", "normalize"]
                .iter()
                .find(|k| o.contains_key(**k))
            {
                return Err(ApiError::invalid(format!(
                    "fusion.{k} applies to method \"weighted\", not \"rrf\""
                )));
            }
            Fusion::Rrf {
                rank_constant: match o.get("k") {
                    Some(k) => int_in("fusion.k", k, 1, 1_000_000)? as u32,
                    None => fusion::DEFAULT_RANK_CONSTANT,
                },
            }
        }
        "weighted" | "linear" => {
            if o.contains_key("k") {
                return Err(ApiError::invalid(
                    "fusion.k (the RRF rank constant) applies to method \"rrf\", not \"weighted\"",
                ));
            }
            let (dense, lexical) = match o.get("weights") {
                None => (0.5, 0.5),
                Some(w) => {
                    let wo = object("fusion.weights", w, &["dense", "lexical"])?;
                    let get = |side: &str| match wo.get(side) {
                        Some(x) => number(&format!("fusion.weights.{side}"), x),
                        None => Ok(0.0),
                    };
                    (get("dense")?, get("lexical")?)
                }
            };
            let normalize = match o.get("normalize") {
                None => Normalize::MinMax,
                Some(serde_json::Value::String(n)) => Normalize::parse(n).ok_or_else(|| {
                    ApiError::invalid(format!(
                        "fusion.normalize must be \"minmax\" or \"zscore\", got {n:?}"
                    ))
                })?,
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "fusion.normalize must be \"minmax\" or \"zscore\", got {other}"
                    )))
                }
            };
            Fusion::Weighted {
                dense: dense as f32,
                lexical: lexical as f32,
                normalize,
            }
        }
        m => {
            return Err(ApiError::invalid(format!(
                "unknown fusion method {m:?}; methods are \"rrf\" and \"weighted\""
            )))
        }
    };
    f.validate().map_err(ApiError::invalid)?;
    Ok((f, window))
}

/// `rerank`: `{"top": N}` with 1 <= N <= MAX_RERANK_TOP.
fn parse_rerank(v: Option<&serde_json::Value>) -> Result<Option<usize>, ApiError> {
    match v {
        None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => Ok(None),
        Some(v) => {
            let o = object("rerank", v, &["top"])?;
            match o.get("top") {
                None => Err(ApiError::invalid(
                    "rerank needs \"top\": how many of the first hits to rerank",
                )),
                Some(t) => Ok(Some(int_in("rerank.top", t, 1, MAX_RERANK_TOP as u64)?)),
            }
        }
    }
}

/// Query texts longer than this many characters are cut to it (with a warning in the
/// reply) before they are embedded or analysed, so a huge text costs bounded work. The
/// embedder's window (256 tokens for MiniLM) and lexical search (4096 characters, 256
/// distinct terms) read less than this anyway.
pub const MAX_TEXT_CHARS: usize = 8192;

/// A document id from JSON: an unsigned integer or a non-empty string.
pub(crate) fn doc_id(name: &str, v: &serde_json::Value) -> Result<DocId, ApiError> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().map(DocId::Int).ok_or_else(|| {
            ApiError::invalid(format!(
                "{name} must be a document id (a string or an integer >= 0), got {n}"
            ))
        }),
        serde_json::Value::String(s) if !s.is_empty() => Ok(DocId::Str(s.clone())),
        other => Err(ApiError::invalid(format!(
            "{name} must be a document id (a string or an integer >= 0), got {other}"
        ))),
    }
}

pub(crate) fn parse_fields(v: Option<&serde_json::Value>) -> Result<FieldsWanted, ApiError> {
    match v {
        None | Some(serde_json::Value::Bool(false)) | Some(serde_json::Value::Null) => {
            Ok(FieldsWanted::None)
        }
        Some(serde_json::Value::Bool(true)) => Ok(FieldsWanted::All),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str().map(str::to_string).ok_or_else(|| {
                    ApiError::invalid(format!(
                        "fields must be true, false or a list of field names; {x} is not a name"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(FieldsWanted::List),
        Some(other) => Err(ApiError::invalid(format!(
            "fields must be true, false or a list of field names, got {other}"
        ))),
    }
}

fn parse_search(body: &[u8], default_ef: usize) -> Result<SearchSpec, ApiError> {
    let b: SearchBody = serde_json::from_slice(body).map_err(|e| json_error(e, body))?;
    let given: Vec<&str> = [
        ("vector", b.vector.is_some()),
        ("qidx", b.qidx.is_some()),
        ("id", b.id.is_some()),
        ("text", b.text.is_some()),
    ]
    .iter()
    .filter(|(_, g)| *g)
    .map(|(n, _)| *n)
    .collect();
    if given.len() != 1 {
        return Err(ApiError::invalid(if given.is_empty() {
            "give exactly one of vector, qidx, id or text; none was given".to_string()
        } else {
            format!(
                "give exactly one of vector, qidx, id or text; got {}",
                given.join(" and ")
            )
        }));
    }
    let k = match &b.k {
        Some(n) => ranged("k", n, 1, MAX_K as u64)?,
        None => DEFAULT_K,
    };
    let ef = match &b.ef {
        Some(n) => ranged("ef", n, 1, MAX_EF as u64)?,
        None => default_ef,
    };
    let mode = match b.mode.as_deref() {
        None => None,
        Some("dense") => Some(Mode::Dense),
        Some("lexical") => Some(Mode::Lexical),
        Some("hybrid") => Some(Mode::Hybrid),
        Some(m) => {
            return Err(ApiError::invalid(format!(
                "unknown mode {m:?}; modes are \"dense\", \"lexical\" and \"hybrid\""
            )))
        }
    };
    if b.fusion.is_some() && mode.is_some_and(|m| m != Mode::Hybrid) {
        return Err(ApiError::invalid("fusion applies to mode \"hybrid\" only"));
    }
    let (fusion, window) = parse_fusion(b.fusion.as_ref())?;
    let rerank = parse_rerank(b.rerank.as_ref())?;
    if let Some(top) = rerank {
        if top < k {
            return Err(ApiError::invalid(format!(
                "rerank.top ({top}) must be at least k ({k}): the reply is the first k of the reranked hits"
            )));
        }
    }
    let facets = parse_facets(b.facets.as_ref(), "facets")?;
    let fields = parse_fields(b.fields.as_ref())?;
    let mut text_cut = false;
    let query = if let Some(v) = b.vector {
        QuerySpec::Vector(v.into_iter().map(|x| x as f32).collect())
    } else if let Some(q) = &b.qidx {
        QuerySpec::Qidx(uint("qidx", q, "a row number (an integer >= 0)")?)
    } else if let Some(id) = &b.id {
        QuerySpec::Id(doc_id("id", id)?)
    } else if let Some(t) = &b.text {
        let Some(t) = t.as_str() else {
            return Err(ApiError::invalid(format!("text must be a string, got {t}")));
        };
        if t.trim().is_empty() {
            return Err(ApiError::invalid("text is empty"));
        }
        let t = match t.char_indices().nth(MAX_TEXT_CHARS) {
            Some((cut, _)) => {
                text_cut = true;
                &t[..cut]
            }
            None => t,
        };
        QuerySpec::Text(t.to_string())
    } else {
        unreachable!("exactly one was given")
    };
    if !matches!(query, QuerySpec::Text(_)) {
        if let Some(m @ (Mode::Lexical | Mode::Hybrid)) = mode {
            return Err(ApiError::invalid(format!(
                "mode {:?} searches text: give \"text\", not a vector, qidx or id",
                m.name()
            )));
        }
        if rerank.is_some() {
            return Err(ApiError::invalid(
                "rerank scores (query text, document text) pairs: it needs a \"text\" query",
            ));
        }
    }
    Ok(SearchSpec {
        query,
        k,
        ef,
        fields,
        mode,
        fusion,
        window,
        rerank,
        text_cut,
        filter: b.filter,
        facets,
    })
}

/// Largest facet `size`.
pub const MAX_FACET_SIZE: usize = 10_000;
/// Default facet `size` (Elasticsearch's terms aggregation default).
pub const DEFAULT_FACET_SIZE: usize = 10;

/// `"facets"`: a list of field names or `{"field": F, "size": N}` objects.
pub(crate) fn parse_facets(
    v: Option<&serde_json::Value>,
    name: &str,
) -> Result<Vec<FacetSpec>, ApiError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let Some(list) = v.as_array() else {
        return Err(ApiError::invalid(format!(
            "{name} must be a list of field names or {{\"field\": F, \"size\": N}} objects, got {v}"
        )));
    };
    list.iter()
        .enumerate()
        .map(|(i, f)| {
            let at = format!("{name}[{i}]");
            match f {
                serde_json::Value::String(field) => Ok(FacetSpec {
                    name: field.clone(),
                    field: field.clone(),
                    size: DEFAULT_FACET_SIZE,
                }),
                serde_json::Value::Object(_) => {
                    let o = object(&at, f, &["field", "size"])?;
                    let Some(field) = o.get("field").and_then(|x| x.as_str()) else {
                        return Err(ApiError::invalid(format!(
                            "{at}.field must be a field name"
                        )));
                    };
                    let size = match o.get("size") {
                        Some(n) => int_in(&format!("{at}.size"), n, 0, MAX_FACET_SIZE as u64)?,
                        None => DEFAULT_FACET_SIZE,
                    };
                    Ok(FacetSpec {
                        name: field.to_string(),
                        field: field.to_string(),
                        size,
                    })
                }
                other => Err(ApiError::invalid(format!(
                    "{at} must be a field name or {{\"field\": F, \"size\": N}}, got {other}"
                ))),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// POST /search, POST /collections/{name}/search

pub(crate) fn arrival_of(req: &Request) -> Instant {
    req.extensions()
        .get::<Arrival>()
        .map_or_else(Instant::now, |a| a.0)
}

/// What a search answered, for the reply.
pub(crate) struct Answer {
    pub hits: Vec<ScoredDoc>,
    pub mode: Mode,
    pub embed_us: u64,
    pub search_us: u64,
    pub stages: StageTimes,
    pub rerank_us: u64,
    pub truncated: bool,
    /// The query text was cut to the lexical limits.
    pub lexical_truncated: bool,
    /// The query text was cut to [`MAX_TEXT_CHARS`].
    pub text_cut: bool,
    /// Texts embedded together with this one (0 for vector queries).
    pub embed_batch: usize,
    pub plan: Option<String>,
    pub matched: Option<u64>,
    pub facets: Vec<FacetOutput>,
}

async fn search(State(app): State<Arc<App>>, req: Request) -> Response {
    let slot = app.slots[0].clone();
    search_on(&app, &slot, req).await
}

async fn collection_search(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    match app.slot(&name) {
        Ok(slot) => search_on(&app, &slot, req).await,
        Err(e) => e.into_response(),
    }
}

async fn search_on(app: &App, slot: &Slot, req: Request) -> Response {
    let arrival = arrival_of(&req);
    let uri = req.uri().clone();
    let body = match read_body(app, req).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    // The deadline starts when the body has arrived (took_us counts from the headers).
    let body_arrived = Instant::now();
    crate::reads::cached(app, slot, "search", &uri, &body, || async {
        let a = search_inner(app, slot, &body, body_arrived).await?;
        let took = arrival.elapsed().as_micros() as u64;
        Ok(answer_json(&a, took))
    })
    .await
}

pub(crate) fn backend_error(app: &App, e: BackendError) -> ApiError {
    match e {
        BackendError::Invalid(m) => ApiError::invalid(m),
        BackendError::NotFound(m) => ApiError::new(Code::NotFound, m),
        BackendError::Deadline { started } => deadline_error(app, !started),
        BackendError::Overloaded(m) => ApiError::new(Code::Overloaded, m),
        BackendError::Unavailable(m) => ApiError::new(Code::NotReady, m),
        BackendError::Internal(m) => {
            tracing::error!("backend failed: {m}");
            ApiError::new(Code::Internal, m)
        }
        BackendError::Conflict(m) => ApiError::new(Code::Conflict, m),
        BackendError::Storage(m) => {
            tracing::error!("write refused: {m}");
            ApiError::new(Code::InsufficientStorage, m)
        }
    }
}

/// The 503 of a request admission control refused.
pub(crate) fn refused(app: &App, r: crate::pool::Refusal) -> ApiError {
    match r {
        crate::pool::Refusal::Full => overloaded(app),
        crate::pool::Refusal::Wait { expected } => ApiError::new(
            Code::Overloaded,
            format!(
                "the server is at capacity: the requests ahead would take about {} ms, over the {} ms queue-wait bound (--max-queue-wait-ms); retry later",
                expected.as_millis(),
                app.admission.max_wait().map_or(0, |d| d.as_millis())
            ),
        ),
    }
}

pub(crate) fn overloaded(app: &App) -> ApiError {
    ApiError::new(
        Code::Overloaded,
        format!(
            "the server is at capacity ({} searches in flight, {} waiting); retry later",
            app.cfg.max_inflight, app.cfg.queue
        ),
    )
}

/// The mode a text query runs in: as asked when the collection and server can, else the
/// default (hybrid with a model and a lexical index, dense with a model only, lexical with
/// a lexical index only).
fn text_mode(
    asked: Option<Mode>,
    backend: &dyn SearchBackend,
    has_model: bool,
) -> Result<Mode, ApiError> {
    let lexical = backend.can_search_text();
    let no_model = "text queries in mode \"dense\" or \"hybrid\" need a model: start the server with --model DIR";
    match asked {
        Some(Mode::Dense) if !has_model => Err(ApiError::invalid(no_model)),
        Some(Mode::Dense) => Ok(Mode::Dense),
        Some(Mode::Lexical) => lexical.map(|_| Mode::Lexical).map_err(ApiError::invalid),
        Some(Mode::Hybrid) => {
            lexical.map_err(ApiError::invalid)?;
            if has_model {
                Ok(Mode::Hybrid)
            } else {
                Err(ApiError::invalid(no_model))
            }
        }
        None => match (has_model, lexical.is_ok()) {
            (true, true) => Ok(Mode::Hybrid),
            (true, false) => Ok(Mode::Dense),
            (false, true) => Ok(Mode::Lexical),
            (false, false) => Err(ApiError::invalid(
                "text queries need a model (start the server with --model DIR) or a collection with a lexical index",
            )),
        },
    }
}

/// The stored text of a hit (for rerank): the string value of `field` in its fields.
fn hit_text(fields: Option<&[u8]>, field: &str) -> String {
    fields
        .and_then(|f| serde_json::from_slice::<serde_json::Value>(f).ok())
        .and_then(|v| v.get(field).and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_default()
}

async fn search_inner(
    app: &App,
    slot: &Slot,
    body: &[u8],
    body_arrived: Instant,
) -> Result<Answer, ApiError> {
    let deadline = body_arrived + app.cfg.timeout;
    let spec = parse_search(body, app.cfg.ef)?;
    let backend = slot.backend_or_503()?;
    let (_, dim, _) = backend.figures();
    let mut embed_us = 0u64;
    let mut truncated = false;
    let mut embed_batch = 0usize;
    let (query, text) = match spec.query {
        QuerySpec::Text(t) => (None, Some(t)),
        other => (Some(other), None),
    };
    let mode = match &text {
        Some(_) => text_mode(spec.mode, &**backend, app.embedder.is_some())?,
        None => Mode::Dense,
    };
    // Rerank reads each hit's stored text; it needs the model and the field.
    let rerank = match spec.rerank {
        None => None,
        Some(top) => {
            let Some(reranker) = &app.reranker else {
                return Err(ApiError::invalid(
                    "rerank needs a cross-encoder: start the server with --rerank-model DIR",
                ));
            };
            let Some(field) = backend.text_field() else {
                return Err(ApiError::invalid(
                    "rerank reads each hit's stored text, and this collection has no text field",
                ));
            };
            Some((reranker, top, field))
        }
    };
    let query = match query {
        None => None,
        Some(QuerySpec::Vector(v)) => {
            if v.len() != dim {
                return Err(ApiError::invalid(
                    SearchError::Dimension {
                        expected: dim,
                        got: v.len(),
                    }
                    .to_string(),
                ));
            }
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(ApiError::invalid(format!(
                    "vector component {i} is not a finite number (float32 holds magnitudes up to 3.4e38)"
                )));
            }
            Some(QueryInput::Vector(v))
        }
        Some(QuerySpec::Qidx(q)) => {
            let Some(m) = app.queries.load_full() else {
                return Err(ApiError::invalid(
                    "qidx needs a query matrix; this server was started without --queries",
                ));
            };
            if q >= m.n() as u64 {
                return Err(ApiError::invalid(format!(
                    "qidx {q} is out of range: the query matrix has {} rows (0..={})",
                    m.n(),
                    m.n().saturating_sub(1)
                )));
            }
            if m.dim() != dim {
                return Err(ApiError::invalid(format!(
                    "the query matrix has {} dimensions, the index has {dim}",
                    m.dim()
                )));
            }
            Some(QueryInput::Row(m, q as usize))
        }
        Some(QuerySpec::Id(id)) => {
            backend.can_search_by_id().map_err(ApiError::invalid)?;
            Some(QueryInput::Stored(id))
        }
        Some(QuerySpec::Text(_)) => unreachable!("text was taken out above"),
    };
    // Admission control: a place at once, or 503 at once. Text queries hold it while they
    // are embedded (and reranked), so text and vector requests share one budget.
    let permit = app.admission.try_admit().map_err(|r| refused(app, r))?;
    let query = match (query, text.clone()) {
        (Some(q), _) => q,
        (None, Some(t)) if mode == Mode::Lexical => QueryInput::Lexical(t),
        (None, Some(t)) => {
            let Some(batcher) = &app.embedder else {
                return Err(ApiError::invalid(
                    "text queries need a model: start the server with --model DIR",
                ));
            };
            let t0 = Instant::now();
            let e = batcher
                .embed(t.clone(), deadline)
                .await
                .map_err(|f| match f {
                    EmbedFailure::Busy => overloaded(app),
                    EmbedFailure::Deadline => deadline_error(app, true),
                    EmbedFailure::Failed(m) => ApiError::new(Code::Internal, m),
                })?;
            embed_us = t0.elapsed().as_micros() as u64;
            app.stats.record_stage(Stage::Embed, embed_us);
            truncated = e.truncated;
            embed_batch = e.batch;
            if e.vector.len() != dim {
                return Err(ApiError::invalid(format!(
                    "the model makes {}-dimensional vectors, the collection has {dim}",
                    e.vector.len()
                )));
            }
            if mode == Mode::Hybrid {
                QueryInput::Hybrid {
                    text: t,
                    vector: e.vector,
                    fusion: spec.fusion,
                    window: spec.window,
                }
            } else {
                QueryInput::Vector(e.vector)
            }
        }
        (None, None) => unreachable!("one query was given"),
    };
    let (k, fields) = match &rerank {
        // Retrieve the reranked window, with every stored field (the text is read from
        // them; the reply's fields are selected afterwards).
        Some((_, top, _)) => (*top, FieldsWanted::All),
        None => (spec.k, spec.fields.clone()),
    };
    let t1 = Instant::now();
    let out = backend
        .search(SearchRequest {
            query,
            k,
            ef: spec.ef,
            oversample: app.cfg.oversample,
            fields,
            filter: spec.filter.clone(),
            facets: spec.facets.clone(),
            deadline,
            permit: Some(permit),
        })
        .await
        .map_err(|e| backend_error(app, e))?;
    let search_us = t1.elapsed().as_micros() as u64;
    for (stage, us) in [
        (Stage::Dense, out.stages.dense_us),
        (Stage::Lexical, out.stages.lexical_us),
        (Stage::Fuse, out.stages.fuse_us),
    ] {
        if us > 0 || (stage == Stage::Fuse && mode == Mode::Hybrid) {
            app.stats.record_stage(stage, us);
        }
    }
    let mut hits = out.hits;
    let mut rerank_us = 0;
    if let (Some((reranker, _, field)), Some(text)) = (rerank, text) {
        // The admission place was released with the search; rerank is bounded by the
        // reranker's one-at-a-time turn and the deadline instead.
        let passages: Vec<String> = hits
            .iter()
            .map(|h| hit_text(h.fields.as_deref(), &field))
            .collect();
        let t2 = Instant::now();
        let scores = reranker
            .score(text, passages, deadline)
            .await
            .map_err(|f| match f {
                RerankFailure::Deadline => ApiError::new(
                    Code::DeadlineExceeded,
                    format!(
                        "the rerank stage could not finish within the deadline ({} ms)",
                        app.cfg.timeout.as_millis()
                    ),
                ),
                RerankFailure::Failed(m) => ApiError::new(Code::Internal, m),
            })?;
        rerank_us = t2.elapsed().as_micros() as u64;
        app.stats.record_stage(Stage::Rerank, rerank_us);
        if Instant::now() > deadline {
            return Err(ApiError::new(
                Code::DeadlineExceeded,
                format!(
                    "the rerank stage finished after the deadline ({} ms); lower rerank.top",
                    app.cfg.timeout.as_millis()
                ),
            ));
        }
        hits = crate::rerank::reorder(hits, &scores)
            .into_iter()
            .take(spec.k)
            .map(|(mut h, s)| {
                h.score = s;
                h.fields = match &spec.fields {
                    FieldsWanted::All => h.fields,
                    w => h.fields.as_deref().and_then(|f| select_fields(f, w)),
                };
                h
            })
            .collect();
    }
    Ok(Answer {
        hits,
        mode,
        embed_us,
        search_us,
        stages: out.stages,
        rerank_us,
        truncated,
        lexical_truncated: out.lexical_truncated,
        text_cut: spec.text_cut,
        embed_batch,
        plan: out.plan,
        matched: out.matched,
        facets: out.facets,
    })
}

pub(crate) fn deadline_error(app: &App, queued: bool) -> ApiError {
    let ms = app.cfg.timeout.as_millis();
    ApiError::new(
        Code::DeadlineExceeded,
        if queued {
            format!("the request waited past its deadline ({ms} ms) before a search thread was free; it was not started")
        } else {
            format!("the search passed its deadline ({ms} ms) and was stopped")
        },
    )
}

pub(crate) fn write_id(out: &mut Vec<u8>, id: &DocId, ints: &mut itoa::Buffer) {
    match id {
        DocId::Int(v) => out.extend_from_slice(ints.format(*v).as_bytes()),
        DocId::Str(s) => {
            let _ = serde_json::to_writer(&mut *out, s);
        }
    }
}

/// `{"NAME": {"buckets": [{"value": v, "count": n}], "other_count": n}, ...}`.
pub(crate) fn write_facets(out: &mut Vec<u8>, facets: &[FacetOutput]) {
    let mut m = serde_json::Map::new();
    for f in facets {
        m.insert(
            f.name.clone(),
            serde_json::json!({
                "buckets": f.buckets.iter().map(|(v, c)| serde_json::json!({"value": v, "count": c})).collect::<Vec<_>>(),
                "other_count": f.other_count,
            }),
        );
    }
    let _ = serde_json::to_writer(out, &m);
}

const LEXICAL_TRUNCATED: &[u8] = b"\"the query text is longer than lexical search reads (4096 characters, 256 distinct terms); the rest was ignored\"";

/// `{"hits":[{"id":..,"score":..[,"fields":{..}]}],"took_us":..,"timings_us":{..},"mode":..}`
/// written directly into one buffer.
pub(crate) fn answer_json(a: &Answer, took_us: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + a.hits.len() * 40);
    let mut ints = itoa::Buffer::new();
    let mut floats = ryu::Buffer::new();
    out.extend_from_slice(b"{\"hits\":[");
    for (i, h) in a.hits.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"id\":");
        write_id(&mut out, &h.id, &mut ints);
        out.extend_from_slice(b",\"score\":");
        if h.score.is_finite() {
            out.extend_from_slice(floats.format_finite(h.score).as_bytes());
        } else {
            out.extend_from_slice(b"null");
        }
        if let Some(f) = &h.fields {
            out.extend_from_slice(b",\"fields\":");
            out.extend_from_slice(f);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"took_us\":");
    out.extend_from_slice(ints.format(took_us).as_bytes());
    out.extend_from_slice(b",\"timings_us\":{\"embed\":");
    out.extend_from_slice(ints.format(a.embed_us).as_bytes());
    out.extend_from_slice(b",\"search\":");
    out.extend_from_slice(ints.format(a.search_us).as_bytes());
    for (name, us) in [
        (&b",\"dense\":"[..], a.stages.dense_us),
        (b",\"lexical\":", a.stages.lexical_us),
        (b",\"fuse\":", a.stages.fuse_us),
        (b",\"rerank\":", a.rerank_us),
    ] {
        out.extend_from_slice(name);
        out.extend_from_slice(ints.format(us).as_bytes());
    }
    out.push(b'}');
    out.extend_from_slice(b",\"mode\":\"");
    out.extend_from_slice(a.mode.name().as_bytes());
    out.push(b'"');
    if a.embed_batch > 0 {
        out.extend_from_slice(b",\"embed_batch\":");
        out.extend_from_slice(ints.format(a.embed_batch).as_bytes());
    }
    if let Some(p) = &a.plan {
        out.extend_from_slice(b",\"plan\":");
        let _ = serde_json::to_writer(&mut out, p);
    }
    if let Some(m) = a.matched {
        out.extend_from_slice(b",\"matched\":");
        out.extend_from_slice(ints.format(m).as_bytes());
    }
    if !a.facets.is_empty() {
        out.extend_from_slice(b",\"facets\":");
        write_facets(&mut out, &a.facets);
    }
    let mut warnings: Vec<&[u8]> = Vec::new();
    if a.truncated {
        warnings.push(b"\"the query text is longer than the model's window and was truncated\"");
    }
    if a.text_cut {
        warnings.push(
            b"\"the query text is longer than 8192 characters; only the first 8192 were used\"",
        );
    }
    if a.lexical_truncated {
        warnings.push(LEXICAL_TRUNCATED);
    }
    if !warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":[");
        out.extend_from_slice(&warnings.join(&b","[..]));
        out.push(b']');
    }
    out.push(b'}');
    out
}

// ---------------------------------------------------------------------------------------
// GET /collections, /collections/{name}, /collections/{name}/docs/{id}

async fn collections(State(app): State<Arc<App>>) -> Response {
    let list: Vec<serde_json::Value> = app
        .slots
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "ready": s.backend.load().is_some(),
                "info": s.backend.load_full().map(|b| b.info()),
                "state": if s.failed.load().is_some() { "failed" } else if s.backend.load().is_some() { "ok" } else { "loading" },
                "reason": s.failed.load_full().map(|w| (*w).clone()),
            })
        })
        .collect();
    let v = serde_json::json!({ "collections": list, "default": app.slots[0].name });
    json_response(StatusCode::OK, serde_json::to_vec(&v).unwrap_or_default())
}

async fn collection_info(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    match app.slot(&name) {
        Ok(slot) => match slot.backend_or_503() {
            Ok(b) => json_response(
                StatusCode::OK,
                serde_json::to_vec(&serde_json::json!({"name": slot.name, "info": b.info()}))
                    .unwrap_or_default(),
            ),
            Err(e) => e.into_response(),
        },
        Err(e) => e.into_response(),
    }
}

async fn get_doc(
    State(app): State<Arc<App>>,
    Path((name, id)): Path<(String, String)>,
) -> Response {
    let slot = match app.slot(&name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let backend = match slot.backend_or_503() {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    if id.is_empty() {
        return ApiError::invalid("the document id is empty").into_response();
    }
    // A path segment cannot tell "17" from 17: the backend looks up both.
    let doc = DocId::Str(id);
    match backend.get(doc, FieldsWanted::All).await {
        Ok(d) => {
            let mut out = Vec::with_capacity(d.fields.len() + 32);
            let mut ints = itoa::Buffer::new();
            out.extend_from_slice(b"{\"id\":");
            write_id(&mut out, &d.id, &mut ints);
            out.extend_from_slice(b",\"fields\":");
            out.extend_from_slice(&d.fields);
            out.push(b'}');
            json_response(StatusCode::OK, out)
        }
        Err(e) => backend_error(&app, e).into_response(),
    }
}

// ---------------------------------------------------------------------------------------
// POST /admin/reload

/// Equal-time comparison, so the token cannot be guessed byte by byte from timings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn authorize(app: &App, req: &Request) -> Result<(), ApiError> {
    match &app.cfg.admin_token {
        Some(token) => {
            let got = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            match got {
                Some(t) if same(t.as_bytes(), token.as_bytes()) => Ok(()),
                Some(_) => Err(ApiError::new(Code::Unauthorized, "wrong admin token")),
                None => Err(ApiError::new(
                    Code::Unauthorized,
                    "admin routes need the header Authorization: Bearer TOKEN",
                )),
            }
        }
        None => {
            let peer = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0);
            match peer {
                Some(p) if p.ip().is_loopback() => Ok(()),
                _ => Err(ApiError::new(
                    Code::Forbidden,
                    "admin routes are accepted only from loopback when the server has no --admin-token",
                )),
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReloadBody {
    /// An index directory or a collection directory.
    index: PathBuf,
    /// Which served collection to swap (default: the first).
    #[serde(default)]
    collection: Option<String>,
}

/// The canonical form of `requested` when it lies under the configured reload root.
/// A relative path is taken from the root (not the working directory). A path outside the
/// root is 403 whether or not it exists (its `..` are resolved lexically before anything
/// is looked up, and symlinks after), so the admin route cannot probe the machine's files;
/// a path inside the root that cannot be opened is 400.
fn allowed_reload_path(app: &App, requested: &std::path::Path) -> Result<PathBuf, ApiError> {
    let Some(root) = &app.cfg.reload_root else {
        return Ok(requested.to_path_buf());
    };
    let outside = || {
        ApiError::new(
            Code::Forbidden,
            format!(
                "{} is outside the reload root {} (serve --reload-root)",
                requested.display(),
                root.display()
            ),
        )
    };
    let mut lexical = PathBuf::new();
    for c in root.join(requested).components() {
        match c {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    if !lexical.starts_with(root) {
        return Err(outside());
    }
    let canon = lexical
        .canonicalize()
        .map_err(|e| ApiError::invalid(format!("cannot open {}: {e}", lexical.display())))?;
    if !canon.starts_with(root) {
        return Err(outside());
    }
    Ok(canon)
}

/// The one reload that may open an index at a time: taken before the open, released when
/// the open has finished (on its blocking thread), whether or not its client is still there.
struct ReloadTurn(Arc<crate::limits::Limits>);

impl ReloadTurn {
    fn take(limits: &Arc<crate::limits::Limits>) -> Option<ReloadTurn> {
        limits
            .reload_busy
            .compare_exchange(false, true, std::sync::atomic::Ordering::AcqRel, Relaxed)
            .is_ok()
            .then(|| ReloadTurn(limits.clone()))
    }
}

impl Drop for ReloadTurn {
    fn drop(&mut self) {
        self.0
            .reload_busy
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Set when the reload's handler is dropped (its client went away) before it swapped.
struct Abandon(Arc<std::sync::atomic::AtomicBool>, bool);

impl Drop for Abandon {
    fn drop(&mut self) {
        if !self.1 {
            self.0.store(true, Relaxed);
        }
    }
}

async fn reload(State(app): State<Arc<App>>, req: Request) -> Response {
    match reload_inner(&app, req).await {
        Ok(body) => json_response(StatusCode::OK, body),
        Err(e) => e.into_response(),
    }
}

/// Whether two paths name the same directory (symlinks and `..` resolved).
fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// What a collection of `dim` dimensions embedded by `model` must match to replace
/// another: the query matrix and the server's model.
fn check_swap(
    app: &App,
    dim: usize,
    model: Option<&searchd_collection::ModelRecord>,
    shown: &str,
) -> Result<(), ApiError> {
    if let Some(q) = app.queries.load_full() {
        if q.dim() != dim {
            return Err(ApiError::invalid(format!(
                "{shown} has {dim} dimensions but the query matrix{} has {}; refusing to swap",
                app.queries_path
                    .as_ref()
                    .map(|p| format!(" {}", p.display()))
                    .unwrap_or_default(),
                q.dim()
            )));
        }
    }
    if let Some(batcher) = &app.embedder {
        crate::check_model(&batcher.record, model, std::path::Path::new(shown))
            .map_err(|e| ApiError::invalid(format!("{e}; refusing to swap")))?;
    }
    Ok(())
}

/// Open `dir` as start-up does ([`crate::open_path`]): a collection directory live, a bare
/// index directory fixed.
fn open_dir(
    app: &App,
    dir: &std::path::Path,
    shown: &str,
) -> Result<Box<dyn SearchBackend>, ApiError> {
    crate::open_path(dir, &app.cfg.load, &app.cfg.live, &app.pool, None).map_err(|e| {
        let why = match e {
            crate::ServerError::Index(e) => e.to_string(),
            crate::ServerError::Collection(e) => e.to_string(),
            other => other.to_string(),
        };
        ApiError::invalid(format!(
            "cannot open {shown} as an index or collection: {why}"
        ))
    })
}

/// Whether no one holds the lock of the collection directory `dir` (`DIR/LOCK`).
fn lock_free(dir: &std::path::Path) -> bool {
    match std::fs::File::open(dir.join("LOCK")) {
        Ok(f) => f.try_lock().is_ok(),
        Err(_) => true,
    }
}

/// Close a backend that was swapped out (or opened and not swapped in) and, for a live
/// collection, wait until nothing holds it any more, so that its directory's lock is
/// released: a reload of that directory right after must be able to write it. Requests in
/// flight on it finish first, and so does a merge its optimizer had started (logged every
/// 10 s while it runs). Blocking.
fn retire_blocking(b: Arc<Box<dyn SearchBackend>>) {
    let writer = b.writer();
    b.close();
    drop(b);
    let Some(w) = writer else { return };
    let dir = w.dir().to_path_buf();
    let weak = Arc::downgrade(&w);
    drop(w);
    let t = Instant::now();
    let mut next_log = Duration::from_secs(10);
    while weak.strong_count() > 0 {
        if t.elapsed() >= next_log {
            tracing::info!(
                path = %dir.display(),
                waited_s = t.elapsed().as_secs(),
                "waiting for the closed collection to be let go (requests in flight, or a merge)"
            );
            next_log += Duration::from_secs(10);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Its last holder may still be dropping it (the lock goes with it): a moment more.
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until && !lock_free(&dir) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

async fn retire(b: Arc<Box<dyn SearchBackend>>) {
    let _ = tokio::task::spawn_blocking(move || retire_blocking(b)).await;
}

async fn reload_inner(app: &Arc<App>, req: Request) -> Result<Vec<u8>, ApiError> {
    authorize(app, &req)?;
    let body = read_body(app, req).await?;
    let b: ReloadBody = serde_json::from_slice(&body).map_err(|e| json_error(e, &body))?;
    let started = Instant::now();
    let dir = allowed_reload_path(app, &b.index)?;
    let slot = match &b.collection {
        Some(name) => app.slot(name)?,
        None => app.slots[0].clone(),
    };
    // One reload opens an index at a time; searches go on meanwhile on the current one.
    let Some(turn) = ReloadTurn::take(&app.limits) else {
        return Err(ApiError::new(
            Code::Conflict,
            "another reload is opening an index; retry when it has finished",
        ));
    };
    let shown = b.index.display().to_string();
    let live_dir = searchd_collection::is_collection(&dir);
    if live_dir {
        // One writer per directory: not also another collection of this server.
        for other in app.slots.iter().filter(|o| !Arc::ptr_eq(o, &slot)) {
            let writer = other.backend.load_full().and_then(|b| b.writer());
            if writer.is_some_and(|w| same_dir(w.dir(), &dir)) {
                return Err(ApiError::new(
                    Code::Conflict,
                    format!(
                        "{shown} is served by collection {:?}, which takes its writes; a directory is served by one collection at a time (reload {:?} itself, or snapshot it and restore the snapshot into a new directory to serve a copy)",
                        other.name, other.name
                    ),
                ));
            }
        }
        // Checked on the manifest, before anything is closed or opened.
        if let Ok(m) = searchd_collection::Manifest::read(&dir) {
            check_swap(app, m.dim, m.model.as_ref(), &shown)?;
        }
    }
    let current = slot.backend.load_full().and_then(|b| b.writer());
    if live_dir && current.is_some_and(|w| same_dir(w.dir(), &dir)) {
        // The directory the slot writes: closed, then opened again with its log replayed.
        // Detached: a client going away must not leave the slot half way.
        let task = tokio::spawn(reopen(app.clone(), slot, dir, shown, turn, started));
        return task
            .await
            .map_err(|e| ApiError::new(Code::Internal, format!("the reload failed: {e}")))?;
    }
    // Another directory: opened beside the current one, which serves meanwhile. If this
    // handler is dropped (the client went away), the open still finishes on its thread (it
    // cannot be interrupted) but its result is closed there, never swapped.
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut abandon = Abandon(gone.clone(), false);
    let opener = app.clone();
    let what = shown.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let opened = open_dir(&opener, &dir, &what);
        if gone.load(Relaxed) {
            if let Ok(b) = opened {
                retire_blocking(Arc::new(b));
            }
            tracing::info!(path = %what, "reload cancelled: its client went away; nothing swapped");
            return None;
        }
        Some((opened, turn))
    })
    .await
    .map_err(|e| ApiError::new(Code::Internal, format!("the index loader failed: {e}")))?;
    abandon.1 = true;
    let Some((opened, turn)) = opened else {
        return Err(ApiError::new(Code::Internal, "the reload was cancelled"));
    };
    let backend = opened?;
    if let Err(e) = check_swap(app, backend.figures().1, backend.model().as_ref(), &shown) {
        retire(Arc::new(backend)).await;
        drop(turn);
        return Err(e);
    }
    // From the swap on, detached: the previous collection must be closed whatever the
    // client does.
    let task = tokio::spawn(swap_in(app.clone(), slot, backend, shown, turn, started));
    task.await
        .map_err(|e| ApiError::new(Code::Internal, format!("the reload failed: {e}")))
}

/// Swap `backend` into the slot; close the previous one (a live collection commits its
/// writes and lets go of its directory; in-flight requests finish on it first), then reply.
async fn swap_in(
    app: Arc<App>,
    slot: Arc<Slot>,
    backend: Box<dyn SearchBackend>,
    shown: String,
    turn: ReloadTurn,
    started: Instant,
) -> Vec<u8> {
    let info = backend.info();
    let previous = slot.backend.swap(Some(Arc::new(backend)));
    // A collection that had failed to open at start serves from now on.
    slot.failed.store(None);
    slot.generation
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    app.stats.reloads.fetch_add(1, Relaxed);
    let previous_path = previous.as_ref().map(|p| p.info()["path"].clone());
    if let Some(p) = previous {
        retire(p).await;
    }
    drop(turn);
    let took_ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::info!(
        collection = %slot.name,
        path = %shown,
        docs = info["docs"].as_u64().unwrap_or(0),
        dim = info["dim"].as_u64().unwrap_or(0),
        took_ms,
        "reloaded"
    );
    let v = serde_json::json!({
        "collection": slot.name,
        "index": v1_index_info(&info),
        "previous": previous_path,
        "took_ms": took_ms,
    });
    serde_json::to_vec(&v).unwrap_or_default()
}

/// Reload of the directory the slot's live collection writes: close it (every
/// acknowledged write refreshed and committed, the optimizer stopped), serve its last view
/// read-only while it is let go (writes meanwhile: 503 with `Retry-After`), open the
/// directory again (the log after the commit replayed) and swap that in. If the directory
/// cannot be opened again, the last view stays, refusing writes with 409 until a reload
/// succeeds.
async fn reopen(
    app: Arc<App>,
    slot: Arc<Slot>,
    dir: PathBuf,
    shown: String,
    turn: ReloadTurn,
    started: Instant,
) -> Result<Vec<u8>, ApiError> {
    let Some(old) = slot.backend.load_full() else {
        return Err(ApiError::new(
            Code::Internal,
            "the collection is not loaded",
        ));
    };
    let Some(writer) = old.writer() else {
        return Err(ApiError::new(Code::Internal, "the collection is not live"));
    };
    let closing = old.clone();
    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
    let view = writer.view();
    drop(writer);
    let paused = LocalBackend::paused(
        view.clone(),
        app.pool.clone(),
        format!(
            "collection {:?} is being reopened by /admin/reload; retry in a moment",
            slot.name
        ),
        true,
    );
    let previous = slot.backend.swap(Some(Arc::new(Box::new(paused))));
    slot.generation
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    drop(previous);
    retire(old).await;
    let opener = app.clone();
    let (d, what) = (dir.clone(), shown.clone());
    let opened = tokio::task::spawn_blocking(move || open_dir(&opener, &d, &what))
        .await
        .unwrap_or_else(|e| {
            Err(ApiError::new(
                Code::Internal,
                format!("the index loader failed: {e}"),
            ))
        });
    let checked =
        opened.and_then(
            |b| match check_swap(&app, b.figures().1, b.model().as_ref(), &shown) {
                Ok(()) => Ok(b),
                Err(e) => {
                    retire_blocking(Arc::new(b));
                    Err(e)
                }
            },
        );
    match checked {
        Ok(backend) => Ok(swap_in(app, slot, backend, shown, turn, started).await),
        Err(e) => {
            tracing::error!(collection = %slot.name, path = %shown, error = %e.message, "reload could not reopen the collection; it serves its last view and refuses writes");
            let failed = LocalBackend::paused(
                view,
                app.pool.clone(),
                format!(
                    "collection {:?} could not be reopened by /admin/reload ({}); it serves its last view read-only: fix the cause and reload it again, or restart",
                    slot.name, e.message
                ),
                false,
            );
            slot.backend.store(Some(Arc::new(Box::new(failed))));
            slot.generation
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            drop(turn);
            Err(e)
        }
    }
}
