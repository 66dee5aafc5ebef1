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
use http_body_util::{BodyExt, LengthLimitError, Limited};
use searchd_collection::{Collection, DocId};
use searchd_engine::{LoadOptions, SearchError, MAX_K};
use searchd_vecio::Vectors;
use serde::Deserialize;

use crate::backend::{
    BackendError, FieldsWanted, LocalBackend, QueryInput, ScoredDoc, SearchBackend, SearchRequest,
};
use crate::embedq::{Batcher, EmbedFailure};
use crate::error::{ApiError, Code, Tagged, JSON};
use crate::pool::{Admission, Pool};
use crate::stats::{process_stats, IndexFigures, Stats};

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
    pub threads: usize,
}

/// One served collection: its name and its backend, swapped whole on reload.
pub(crate) struct Slot {
    pub name: String,
    pub backend: ArcSwapOption<Box<dyn SearchBackend>>,
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
    pub stats: Arc<Stats>,
    pub reload_lock: tokio::sync::Mutex<()>,
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
        .route("/collections/{name}/docs/{id}", get(get_doc))
        .route("/health", get(health))
        .route("/ready", get(ready))
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

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, JSON);
    r.extensions_mut().insert(Tagged(Code::Ok));
    r
}

async fn health() -> Response {
    json_response(StatusCode::OK, b"{\"status\":\"ok\"}".to_vec())
}

async fn ready(State(app): State<Arc<App>>) -> Response {
    if app.slots.iter().all(|s| s.backend.load().is_some()) {
        json_response(StatusCode::OK, b"{\"status\":\"ready\"}".to_vec())
    } else {
        ApiError::new(Code::NotReady, "the index is still loading").into_response()
    }
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
                s.backend
                    .load_full()
                    .map_or(serde_json::Value::Null, |b| b.info()),
            )
        })
        .collect();
    let v = serde_json::json!({
        "uptime_s": s.uptime().as_secs_f64(),
        "index": index,
        "requests": s.totals(),
        "collections": collections,
        "embedder": app.embedder.as_ref().map(|b| serde_json::json!({"model": b.record, "batching": b.stats.json()})),
        "inflight": app.inflight(),
        "queued": app.admission.queued(),
        "running": app.pool.running(),
        "latency_ms": latency,
        "qps_1m": qps,
        "process": process_stats(),
        "reloads": s.reloads.load(Relaxed),
        "config": {
            "threads": app.cfg.threads,
            "max_inflight": app.cfg.max_inflight,
            "queue": app.cfg.queue,
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
        app.figures(),
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

/// Check the content type and read the whole body, within the size limit and the read
/// timeout. Admission happens only after this, so a slow client holds no search slot.
async fn read_body(app: &App, req: Request) -> Result<Bytes, ApiError> {
    is_json(req.headers())?;
    let limit = app.cfg.body_limit;
    let too_large = || {
        ApiError::new(
            Code::BodyTooLarge,
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    };
    if let Some(len) = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > limit as u64 {
            return Err(too_large());
        }
    }
    let body = Limited::new(req.into_body(), limit);
    match tokio::time::timeout(app.cfg.read_timeout, body.collect()).await {
        Err(_) => Err(ApiError::new(
            Code::RequestTimeout,
            format!(
                "the request body did not arrive within {} ms",
                app.cfg.read_timeout.as_millis()
            ),
        )),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Ok(Err(e)) => Err(ApiError::new(
            Code::InvalidJson,
            format!("cannot read the request body: {e}"),
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

/// Map a serde_json error to `invalid_json` (not JSON at all) or `invalid_argument` (JSON
/// of the wrong shape).
fn json_error(e: serde_json::Error, body: &[u8]) -> ApiError {
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
    filter: Option<serde_json::Value>,
}

/// A non-negative integer field, or a clear message.
fn uint(name: &str, n: &serde_json::Number, what: &str) -> Result<u64, ApiError> {
    n.as_u64()
        .ok_or_else(|| ApiError::invalid(format!("{name} must be {what}, got {n}")))
}

fn ranged(name: &str, n: &serde_json::Number, lo: u64, hi: u64) -> Result<usize, ApiError> {
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

struct SearchSpec {
    query: QuerySpec,
    k: usize,
    ef: usize,
    fields: FieldsWanted,
}

/// Longest query text accepted, in bytes (the embedder's window is far shorter; this only
/// bounds the tokenizer's work).
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// A document id from JSON: an unsigned integer or a non-empty string.
fn doc_id(name: &str, v: &serde_json::Value) -> Result<DocId, ApiError> {
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

fn parse_fields(v: Option<&serde_json::Value>) -> Result<FieldsWanted, ApiError> {
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
    match b.mode.as_deref() {
        None | Some("dense") => {}
        Some(m @ ("lexical" | "hybrid")) => {
            return Err(ApiError::invalid(format!(
                "mode {m:?} needs a lexical index, which this collection does not have; use mode \"dense\""
            )))
        }
        Some(m) => {
            return Err(ApiError::invalid(format!(
                "unknown mode {m:?}; modes are \"dense\", \"lexical\" and \"hybrid\""
            )))
        }
    }
    if b.filter.is_some() {
        return Err(ApiError::invalid(
            "filter: this collection has no field indexes, so filters are not supported on it",
        ));
    }
    let fields = parse_fields(b.fields.as_ref())?;
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
        if t.len() > MAX_TEXT_BYTES {
            return Err(ApiError::invalid(format!(
                "text is {} bytes; the limit is {MAX_TEXT_BYTES}",
                t.len()
            )));
        }
        QuerySpec::Text(t.to_string())
    } else {
        unreachable!("exactly one was given")
    };
    Ok(SearchSpec {
        query,
        k,
        ef,
        fields,
    })
}

// ---------------------------------------------------------------------------------------
// POST /search, POST /collections/{name}/search

fn arrival_of(req: &Request) -> Instant {
    req.extensions()
        .get::<Arrival>()
        .map_or_else(Instant::now, |a| a.0)
}

/// What a search answered, for the reply.
pub(crate) struct Answer {
    pub hits: Vec<ScoredDoc>,
    pub embed_us: u64,
    pub search_us: u64,
    pub truncated: bool,
    /// Texts embedded together with this one (0 for vector queries).
    pub embed_batch: usize,
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
    match search_inner(app, slot, req, arrival).await {
        Ok(a) => {
            let took = arrival.elapsed().as_micros() as u64;
            json_response(StatusCode::OK, answer_json(&a, took))
        }
        Err(e) => e.into_response(),
    }
}

fn backend_error(app: &App, e: BackendError) -> ApiError {
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
    }
}

fn overloaded(app: &App) -> ApiError {
    ApiError::new(
        Code::Overloaded,
        format!(
            "the server is at capacity ({} searches in flight, {} waiting); retry later",
            app.cfg.max_inflight, app.cfg.queue
        ),
    )
}

async fn search_inner(
    app: &App,
    slot: &Slot,
    req: Request,
    arrival: Instant,
) -> Result<Answer, ApiError> {
    let deadline = arrival + app.cfg.timeout;
    let body = read_body(app, req).await?;
    let spec = parse_search(&body, app.cfg.ef)?;
    let Some(backend) = slot.backend.load_full() else {
        return Err(ApiError::new(
            Code::NotReady,
            "the index is still loading; retry shortly",
        ));
    };
    let (_, dim, _) = backend.figures();
    let mut embed_us = 0u64;
    let mut truncated = false;
    let mut embed_batch = 0usize;
    // Admission control: a place at once, or 503 at once. Text queries hold it while they
    // are embedded, so text and vector requests share one budget.
    let (query, text) = match spec.query {
        QuerySpec::Text(t) => (None, Some(t)),
        other => (Some(other), None),
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
    let permit = app.admission.try_admit().ok_or_else(|| overloaded(app))?;
    let query = match (query, text) {
        (Some(q), _) => q,
        (None, Some(t)) => {
            let Some(batcher) = &app.embedder else {
                return Err(ApiError::invalid(
                    "text queries need a model: start the server with --model DIR",
                ));
            };
            let t0 = Instant::now();
            let e = batcher.embed(t, deadline).await.map_err(|f| match f {
                EmbedFailure::Busy => overloaded(app),
                EmbedFailure::Deadline => deadline_error(app, true),
                EmbedFailure::Failed(m) => ApiError::new(Code::Internal, m),
            })?;
            embed_us = t0.elapsed().as_micros() as u64;
            truncated = e.truncated;
            embed_batch = e.batch;
            if e.vector.len() != dim {
                return Err(ApiError::invalid(format!(
                    "the model makes {}-dimensional vectors, the collection has {dim}",
                    e.vector.len()
                )));
            }
            QueryInput::Vector(e.vector)
        }
        (None, None) => unreachable!("one query was given"),
    };
    let t1 = Instant::now();
    let hits = backend
        .search(SearchRequest {
            query,
            k: spec.k,
            ef: spec.ef,
            oversample: app.cfg.oversample,
            fields: spec.fields,
            deadline,
            permit: Some(permit),
        })
        .await
        .map_err(|e| backend_error(app, e))?;
    Ok(Answer {
        hits,
        embed_us,
        search_us: t1.elapsed().as_micros() as u64,
        truncated,
        embed_batch,
    })
}

fn deadline_error(app: &App, queued: bool) -> ApiError {
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

fn write_id(out: &mut Vec<u8>, id: &DocId, ints: &mut itoa::Buffer) {
    match id {
        DocId::Int(v) => out.extend_from_slice(ints.format(*v).as_bytes()),
        DocId::Str(s) => {
            let _ = serde_json::to_writer(&mut *out, s);
        }
    }
}

/// `{"hits":[{"id":..,"score":..[,"fields":{..}]}],"took_us":..,"timings_us":{..}}`
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
    out.push(b'}');
    if a.embed_batch > 0 {
        out.extend_from_slice(b",\"embed_batch\":");
        out.extend_from_slice(ints.format(a.embed_batch).as_bytes());
    }
    if a.truncated {
        out.extend_from_slice(
            b",\"warnings\":[\"the query text is longer than the model's window and was truncated\"]",
        );
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
            })
        })
        .collect();
    let v = serde_json::json!({ "collections": list, "default": app.slots[0].name });
    json_response(StatusCode::OK, serde_json::to_vec(&v).unwrap_or_default())
}

async fn collection_info(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    match app.slot(&name) {
        Ok(slot) => match slot.backend.load_full() {
            Some(b) => json_response(
                StatusCode::OK,
                serde_json::to_vec(&serde_json::json!({"name": slot.name, "info": b.info()}))
                    .unwrap_or_default(),
            ),
            None => {
                ApiError::new(Code::NotReady, "the collection is still loading").into_response()
            }
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
    let Some(backend) = slot.backend.load_full() else {
        return ApiError::new(Code::NotReady, "the collection is still loading").into_response();
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

fn authorize(app: &App, req: &Request) -> Result<(), ApiError> {
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
/// Refused: paths that do not exist (400) and paths outside the root (403), so the admin
/// route cannot be used to probe or open files elsewhere on the machine.
fn allowed_reload_path(app: &App, requested: &std::path::Path) -> Result<PathBuf, ApiError> {
    let Some(root) = &app.cfg.reload_root else {
        return Ok(requested.to_path_buf());
    };
    let canon = requested
        .canonicalize()
        .map_err(|e| ApiError::invalid(format!("cannot open {}: {e}", requested.display())))?;
    if !canon.starts_with(root) {
        return Err(ApiError::new(
            Code::Forbidden,
            format!(
                "{} is outside the reload root {} (serve --reload-root)",
                requested.display(),
                root.display()
            ),
        ));
    }
    Ok(canon)
}

async fn reload(State(app): State<Arc<App>>, req: Request) -> Response {
    match reload_inner(&app, req).await {
        Ok(body) => json_response(StatusCode::OK, body),
        Err(e) => e.into_response(),
    }
}

async fn reload_inner(app: &App, req: Request) -> Result<Vec<u8>, ApiError> {
    authorize(app, &req)?;
    let body = read_body(app, req).await?;
    let b: ReloadBody = serde_json::from_slice(&body).map_err(|e| json_error(e, &body))?;
    // One reload at a time; searches go on meanwhile on the current index.
    let _one = app.reload_lock.lock().await;
    let started = Instant::now();
    let opts = app.cfg.load;
    let dir = allowed_reload_path(app, &b.index)?;
    let slot = match &b.collection {
        Some(name) => app.slot(name)?,
        None => app.slots[0].clone(),
    };
    let opened = tokio::task::spawn_blocking(move || Collection::open_any(&dir, &opts))
        .await
        .map_err(|e| ApiError::new(Code::Internal, format!("the index loader failed: {e}")))?;
    let coll = opened.map_err(|e| {
        ApiError::invalid(format!(
            "cannot open {} as an index or collection: {e}",
            b.index.display()
        ))
    })?;
    if let Some(q) = app.queries.load_full() {
        if q.dim() != coll.dim() {
            return Err(ApiError::invalid(format!(
                "{} has {} dimensions but the query matrix{} has {}; refusing to swap",
                b.index.display(),
                coll.dim(),
                app.queries_path
                    .as_ref()
                    .map(|p| format!(" {}", p.display()))
                    .unwrap_or_default(),
                q.dim()
            )));
        }
    }
    if let Some(batcher) = &app.embedder {
        crate::check_model(&batcher.record, coll.model(), &b.index)
            .map_err(|e| ApiError::invalid(format!("{e}; refusing to swap")))?;
    }
    let backend: Box<dyn SearchBackend> =
        Box::new(LocalBackend::new(Arc::new(coll), app.pool.clone()));
    let info = backend.info();
    // In-flight searches keep the previous Arc; it is freed after the last of them.
    let previous = slot.backend.swap(Some(Arc::new(backend)));
    app.stats.reloads.fetch_add(1, Relaxed);
    let took_ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::info!(
        collection = %slot.name,
        path = %b.index.display(),
        docs = info["docs"].as_u64().unwrap_or(0),
        dim = info["dim"].as_u64().unwrap_or(0),
        took_ms,
        "reloaded"
    );
    let v = serde_json::json!({
        "collection": slot.name,
        "index": v1_index_info(&info),
        "previous": previous.map(|p| p.info()["path"].clone()),
        "took_ms": took_ms,
    });
    Ok(serde_json::to_vec(&v).unwrap_or_default())
}
