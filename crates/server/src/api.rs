//! Routes and handlers of the HTTP API (CONTRACTS.md "HTTP API").

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use searchd_engine::{Hit, Index, LoadOptions, SearchError, MAX_K};
use searchd_vecio::Vectors;
use serde::Deserialize;
use tokio::sync::oneshot;

use crate::error::{ApiError, Code, Tagged, JSON};
use crate::pool::{Job, Outcome, Pool, Query};
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

/// Shared state of one server.
pub(crate) struct App {
    pub index: ArcSwapOption<Index>,
    pub queries: ArcSwapOption<Vectors>,
    /// Where the query matrix came from, for messages.
    pub queries_path: Option<PathBuf>,
    pub cfg: Settings,
    pub pool: Pool,
    pub stats: Arc<Stats>,
    pub reload_lock: tokio::sync::Mutex<()>,
}

impl App {
    pub fn inflight(&self) -> usize {
        self.pool.inflight()
    }

    fn figures(&self) -> IndexFigures {
        match self.index.load_full() {
            Some(ix) => IndexFigures {
                loaded: true,
                n: ix.info().n as u64,
                dim: ix.info().dim as u64,
                bytes: ix.info().bytes,
            },
            None => IndexFigures::default(),
        }
    }
}

pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/search", post(search))
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
    if app.index.load().is_some() {
        json_response(StatusCode::OK, b"{\"status\":\"ready\"}".to_vec())
    } else {
        ApiError::new(Code::NotReady, "the index is still loading").into_response()
    }
}

async fn stats(State(app): State<Arc<App>>) -> Response {
    let s = &app.stats;
    let (latency, qps, _) = s.window();
    let index = app.index.load_full().map(|ix| {
        let i = ix.info();
        serde_json::json!({
            "kind": i.kind,
            "n": i.n,
            "dim": i.dim,
            "metric": i.metric,
            "params": i.params,
            "bytes": i.bytes,
            "placement": i.placement,
            "path": i.path,
        })
    });
    let v = serde_json::json!({
        "uptime_s": s.uptime().as_secs_f64(),
        "index": index,
        "requests": s.totals(),
        "inflight": app.inflight(),
        "queued": app.pool.queued(),
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
    let text =
        crate::stats::render_metrics(&app.stats, app.inflight(), app.pool.queued(), app.figures());
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
    id: Option<serde_json::Number>,
    #[serde(default)]
    k: Option<serde_json::Number>,
    #[serde(default)]
    ef: Option<serde_json::Number>,
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

enum Wanted {
    Vector(Vec<f32>),
    Qidx(u64),
    Id(u64),
}

struct Spec {
    wanted: Wanted,
    k: usize,
    ef: usize,
}

fn parse_search(body: &[u8], default_ef: usize) -> Result<Spec, ApiError> {
    let b: SearchBody = serde_json::from_slice(body).map_err(|e| json_error(e, body))?;
    let given: Vec<&str> = [
        ("vector", b.vector.is_some()),
        ("qidx", b.qidx.is_some()),
        ("id", b.id.is_some()),
    ]
    .iter()
    .filter(|(_, g)| *g)
    .map(|(n, _)| *n)
    .collect();
    if given.len() != 1 {
        return Err(ApiError::invalid(if given.is_empty() {
            "give exactly one of vector, qidx or id; none was given".to_string()
        } else {
            format!(
                "give exactly one of vector, qidx or id; got {}",
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
    let wanted = if let Some(v) = b.vector {
        Wanted::Vector(v.into_iter().map(|x| x as f32).collect())
    } else if let Some(q) = &b.qidx {
        Wanted::Qidx(uint("qidx", q, "a row number (an integer >= 0)")?)
    } else if let Some(id) = &b.id {
        Wanted::Id(uint("id", id, "a vector id (an integer >= 0)")?)
    } else {
        unreachable!("exactly one was given")
    };
    Ok(Spec { wanted, k, ef })
}

// ---------------------------------------------------------------------------------------
// POST /search

fn arrival_of(req: &Request) -> Instant {
    req.extensions()
        .get::<Arrival>()
        .map_or_else(Instant::now, |a| a.0)
}

async fn search(State(app): State<Arc<App>>, req: Request) -> Response {
    let arrival = arrival_of(&req);
    match search_inner(&app, req, arrival).await {
        Ok(hits) => {
            let took = arrival.elapsed().as_micros() as u64;
            json_response(StatusCode::OK, hits_json(&hits, took))
        }
        Err(e) => e.into_response(),
    }
}

async fn search_inner(app: &App, req: Request, arrival: Instant) -> Result<Vec<Hit>, ApiError> {
    let deadline = arrival + app.cfg.timeout;
    let body = read_body(app, req).await?;
    let spec = parse_search(&body, app.cfg.ef)?;
    let Some(index) = app.index.load_full() else {
        return Err(ApiError::new(
            Code::NotReady,
            "the index is still loading; retry shortly",
        ));
    };
    let dim = index.dim();
    let query = match spec.wanted {
        Wanted::Vector(v) => {
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
            Query::Vector(v)
        }
        Wanted::Qidx(q) => {
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
            Query::Row(m, q as usize)
        }
        Wanted::Id(id) => {
            if !index.has_vectors() {
                return Err(ApiError::invalid(
                    "search by id needs the stored vectors; this server opened the index with \
                     --vectors none (search by vector or qidx)",
                ));
            }
            if index.internal(id).is_none() {
                return Err(unknown_id(id, index.len()));
            }
            Query::Stored(id)
        }
    };
    let (tx, rx) = oneshot::channel();
    let job = Job {
        index,
        query,
        k: spec.k,
        ef: spec.ef,
        oversample: app.cfg.oversample,
        deadline,
        reply: tx,
    };
    // Admission control: admitted at once, or 503 at once.
    if app.pool.try_submit(job).is_err() {
        return Err(ApiError::new(
            Code::Overloaded,
            format!(
                "the server is at capacity ({} searches in flight, {} waiting); retry later",
                app.cfg.max_inflight, app.cfg.queue
            ),
        ));
    }
    let outcome = rx
        .await
        .map_err(|_| ApiError::new(Code::Internal, "the search worker dropped the request"))?;
    match outcome {
        Outcome::Hits(h) => Ok(h),
        Outcome::NotStarted => Err(deadline_error(app, true)),
        Outcome::Search(SearchError::DeadlineExceeded) => Err(deadline_error(app, false)),
        Outcome::Search(e @ SearchError::Storage { .. }) => {
            tracing::error!("search failed: {e}");
            Err(ApiError::new(Code::Internal, e.to_string()))
        }
        Outcome::Search(e) => Err(ApiError::invalid(e.to_string())),
        Outcome::UnknownId(id) => Err(unknown_id(id, 0)),
        Outcome::Panicked(msg) => {
            tracing::error!("search panicked: {msg}");
            Err(ApiError::new(
                Code::Internal,
                "the search failed with an internal error",
            ))
        }
    }
}

fn unknown_id(id: u64, n: usize) -> ApiError {
    if n > 0 {
        ApiError::new(
            Code::NotFound,
            format!(
                "id {id} is not in the index (ids are 0..={})",
                n.saturating_sub(1)
            ),
        )
    } else {
        ApiError::new(Code::NotFound, format!("id {id} is not in the index"))
    }
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

/// `{"hits":[{"id":..,"score":..}],"took_us":..}` written directly into one buffer.
pub(crate) fn hits_json(hits: &[Hit], took_us: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + hits.len() * 40);
    let mut ints = itoa::Buffer::new();
    let mut floats = ryu::Buffer::new();
    out.extend_from_slice(b"{\"hits\":[");
    for (i, h) in hits.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"id\":");
        out.extend_from_slice(ints.format(h.id).as_bytes());
        out.extend_from_slice(b",\"score\":");
        if h.score.is_finite() {
            out.extend_from_slice(floats.format_finite(h.score).as_bytes());
        } else {
            out.extend_from_slice(b"null");
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"took_us\":");
    out.extend_from_slice(ints.format(took_us).as_bytes());
    out.push(b'}');
    out
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
    index: PathBuf,
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
    let opened = tokio::task::spawn_blocking(move || Index::open(&dir, &opts))
        .await
        .map_err(|e| ApiError::new(Code::Internal, format!("the index loader failed: {e}")))?;
    let index = opened.map_err(|e| {
        ApiError::invalid(format!(
            "cannot open {} as an index: {e}",
            b.index.display()
        ))
    })?;
    if let Some(q) = app.queries.load_full() {
        if q.dim() != index.dim() {
            return Err(ApiError::invalid(format!(
                "{} has {} dimensions but the query matrix{} has {}; refusing to swap",
                b.index.display(),
                index.dim(),
                app.queries_path
                    .as_ref()
                    .map(|p| format!(" {}", p.display()))
                    .unwrap_or_default(),
                q.dim()
            )));
        }
    }
    let index = Arc::new(index);
    let info = serde_json::to_value(index.info()).unwrap_or_default();
    // In-flight searches keep the previous Arc; it is freed after the last of them.
    let previous = app.index.swap(Some(index));
    app.stats.reloads.fetch_add(1, Relaxed);
    let took_ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::info!(
        path = %b.index.display(),
        n = info["n"].as_u64().unwrap_or(0),
        dim = info["dim"].as_u64().unwrap_or(0),
        took_ms,
        "reloaded index"
    );
    let v = serde_json::json!({
        "index": info,
        "previous": previous.map(|p| p.info().path.clone()),
        "took_ms": took_ms,
    });
    Ok(serde_json::to_vec(&v).unwrap_or_default())
}
