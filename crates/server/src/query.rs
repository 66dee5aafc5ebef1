//! The one query pipeline: every search (native and Elasticsearch routes) runs through
//! [`perform_search`], every filtered read through [`run_read`], every cacheable reply
//! through [`cached`].

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use searchd_collection::fusion::Fusion;
use searchd_collection::DocId;
use searchd_engine::SearchError;

use crate::backend::{
    select_fields, BackendError, FacetOutput, FacetSpec, FieldsWanted, Page, QueryInput,
    ReadOutput, ReadRequest, ScoredDoc, Search, SearchBackend, SearchRequest, SegmentExplain,
    StageTimes,
};
use searchd_fields::{Filter, Schema, SortBy, SortKey, SortValue};

use crate::cache::ResponseCache;
use crate::embedq::EmbedFailure;
use crate::error::{ApiError, Code};
use crate::rerank::{RerankFailure, MAX_RERANK_TOP};
use crate::shared::Lookup;
use crate::state::{App, Slot};
use crate::stats::Stage;
use crate::wire::{int_in, json_response, object, read_body};

/// What a search asks for.
pub(crate) enum Ask {
    Vector(Vec<f32>),
    /// A row of the server's query matrix (`serve --queries`).
    Qidx(u64),
    /// The stored vector of this document (left out of the hits).
    Id(DocId),
    /// A text: embedded, analysed or both, by mode.
    Text(String),
    /// A text and its vector, given together (Elasticsearch's `knn` with a `match` fused by
    /// `rank.rrf`): hybrid without embedding.
    TextAndVector {
        text: String,
        vector: Vec<f32>,
    },
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

/// One search, as every route hands it to [`perform_search`]: the routes translate their
/// wire shapes into this and render the [`Answer`]; everything in between is here.
pub(crate) struct SearchSpec {
    pub ask: Ask,
    pub k: usize,
    pub ef: usize,
    pub fields: FieldsWanted,
    /// As asked; `None` picks the default for the query and collection.
    pub mode: Option<Mode>,
    pub fusion: Fusion,
    /// Candidates from each side of a hybrid search.
    pub window: usize,
    /// The text was cut to [`crate::wire::MAX_TEXT_CHARS`].
    pub text_cut: bool,
    pub filter: Option<serde_json::Value>,
    pub facets: Vec<FacetSpec>,
    /// Options every search route accepts under the same keys ([`COMMON_KEYS`]).
    pub common: CommonOptions,
}

/// Body keys every search route accepts with the same meaning (the native search body and
/// Elasticsearch's `_search`): parsed once, by [`CommonOptions::parse`], and acted on once,
/// in [`perform_search`]. A new search option is added here and nowhere else.
pub(crate) const COMMON_KEYS: &[&str] = &["rerank", "explain", "nprobe"];

/// Largest `nprobe` a search may ask for (a partitioned index clamps it to its partitions).
pub(crate) const MAX_NPROBE: u64 = 65_536;

/// The keys of `rerank`.
pub(crate) const RERANK_KEYS: &[&str] = &["top"];

/// The parsed [`COMMON_KEYS`].
#[derive(Debug, Clone, Default)]
pub(crate) struct CommonOptions {
    /// `"rerank": {"top": N}`: rerank the top N hits with the cross-encoder.
    pub rerank: Option<usize>,
    /// `"explain": true`: the reply carries the plan, per-stage times and per-segment counts.
    pub explain: bool,
    /// `"nprobe": N`: partitions a partitioned index probes (`None`: `serve --nprobe`, else
    /// the index's own default). Other indexes ignore it.
    pub nprobe: Option<usize>,
}

impl CommonOptions {
    /// Parse the common keys of a search body; `get` looks a key up in it.
    pub fn parse<'a>(
        get: impl Fn(&str) -> Option<&'a serde_json::Value>,
    ) -> Result<CommonOptions, ApiError> {
        let rerank = match get("rerank") {
            None | Some(serde_json::Value::Null) | Some(serde_json::Value::Bool(false)) => None,
            Some(v) => {
                let o = object("rerank", v, RERANK_KEYS)?;
                match o.get("top") {
                    None => {
                        return Err(ApiError::invalid(
                            "rerank needs \"top\": how many of the first hits to rerank",
                        ))
                    }
                    Some(t) => Some(int_in("rerank.top", t, 1, MAX_RERANK_TOP as u64)?),
                }
            }
        };
        let explain = match get("explain") {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "explain must be true or false, got {other}"
                )))
            }
        };
        let nprobe = match get("nprobe") {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(int_in("nprobe", v, 1, MAX_NPROBE)?),
        };
        Ok(CommonOptions {
            rerank,
            explain,
            nprobe,
        })
    }

    /// Checks of the options against the rest of the request that need no backend.
    pub fn check(&self, ask: &Ask, k: usize) -> Result<(), ApiError> {
        if let Some(top) = self.rerank {
            if !matches!(ask, Ask::Text(_) | Ask::TextAndVector { .. }) {
                return Err(ApiError::invalid(
                    "rerank scores (query text, document text) pairs: it needs a \"text\" query",
                ));
            }
            if top < k {
                return Err(ApiError::invalid(format!(
                    "rerank.top ({top}) must be at least k ({k}): the reply is the first k of the reranked hits"
                )));
            }
        }
        Ok(())
    }
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
    /// Present when the search asked for `"explain": true`.
    pub explain: Option<Explained>,
    /// Probes a partitioned index skipped at the deadline (not 0: `"degraded": true`).
    pub skipped_probes: u64,
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

/// Run one search: mode, capability and vector checks, admission, embedding, the backend's
/// search, stage histograms, rerank; the [`Answer`] carries the stage times (and the
/// explanation when asked). `deadline` counts from when the body had arrived.
pub(crate) async fn perform_search(
    app: &App,
    slot: &Slot,
    spec: SearchSpec,
    deadline: Instant,
) -> Result<Answer, ApiError> {
    spec.common.check(&spec.ask, spec.k)?;
    let buckets = check_buckets(&spec.facets, app.cfg.max_buckets)?;
    check_reply(spec.k, HIT_BYTES, buckets, app.cfg.max_reply_bytes)?;
    let backend = slot.backend_or_503()?;
    let (_, dim, _) = backend.figures();
    let mut embed_us = 0u64;
    let mut truncated = false;
    let mut embed_batch = 0usize;
    // `text` is the query text of a text search; `given` a vector that came with it.
    let (query, text, given) = match spec.ask {
        Ask::Text(t) => (None, Some(t), None),
        Ask::TextAndVector { text, vector } => (None, Some(text), Some(vector)),
        other => (Some(other), None, None),
    };
    let mode = match (&text, &given) {
        (Some(_), None) => text_mode(spec.mode, &**backend, app.embedder.is_some())?,
        (Some(_), Some(_)) => {
            backend.can_search_text().map_err(ApiError::invalid)?;
            Mode::Hybrid
        }
        (None, _) => Mode::Dense,
    };
    // Rerank reads each hit's stored text; it needs the model and the field.
    let rerank = match spec.common.rerank {
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
    let check_vector = |v: &[f32]| -> Result<(), ApiError> {
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
        Ok(())
    };
    if let Some(v) = &given {
        check_vector(v)?;
    }
    let query = match query {
        None => None,
        Some(Ask::Vector(v)) => {
            check_vector(&v)?;
            Some(QueryInput::Vector(v))
        }
        Some(Ask::Qidx(q)) => {
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
        Some(Ask::Id(id)) => {
            backend.can_search_by_id().map_err(ApiError::invalid)?;
            Some(QueryInput::Stored(id))
        }
        Some(Ask::Text(_) | Ask::TextAndVector { .. }) => {
            unreachable!("text was taken out above")
        }
    };
    // Admission control: a place at once, or 503 (after the refusal hold, pool.rs
    // `Admission::admit`). Text queries hold the place while they are embedded (and
    // reranked), so text and vector requests share one budget.
    let permit = app.admission.admit().await.map_err(|r| refused(app, r))?;
    let query = match (query, text.clone(), given) {
        (Some(q), _, _) => q,
        (None, Some(t), Some(vector)) => QueryInput::Hybrid {
            text: t,
            vector,
            fusion: spec.fusion,
            window: spec.window,
        },
        (None, Some(t), None) if mode == Mode::Lexical => QueryInput::Lexical(t),
        (None, Some(t), None) => {
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
        (None, None, _) => unreachable!("one query was given"),
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
            search: Search {
                query,
                k,
                ef: spec.ef,
                oversample: app.cfg.oversample,
                nprobe: spec.common.nprobe.or(app.cfg.nprobe),
                fields,
                filter: parse_optional_filter(&**backend, spec.filter.as_ref(), "filter")?,
                facets: spec.facets,
                deadline,
                explain: spec.common.explain,
            },
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
        skipped_probes: out.skipped_probes,
        explain: spec.common.explain.then_some(Explained {
            k,
            ef: spec.ef,
            segments: out.segments,
        }),
    })
}

/// What `"explain": true` adds to an [`Answer`] beyond what every answer carries.
pub(crate) struct Explained {
    /// Hits asked of the backend (the rerank window when reranking).
    pub k: usize,
    pub ef: usize,
    pub segments: Vec<SegmentExplain>,
}

/// The reply's `explain` object (CONTRACTS.md Version 3): the plan, the time of every
/// stage, and what each segment contributed. Both search routes render it with this.
pub(crate) fn explain_json(a: &Answer) -> Option<serde_json::Value> {
    let e = a.explain.as_ref()?;
    Some(serde_json::json!({
        "mode": a.mode.name(),
        "plan": a.plan,
        "k": e.k,
        "ef": e.ef,
        "matched": a.matched,
        "stages_us": {
            "embed": a.embed_us,
            "search": a.search_us,
            "dense": a.stages.dense_us,
            "lexical": a.stages.lexical_us,
            "fuse": a.stages.fuse_us,
            "rerank": a.rerank_us,
        },
        "segments": e.segments.iter().map(|s| serde_json::json!({
            "id": s.id,
            "candidates": s.candidates,
            "plan": s.plan,
            "us": s.us,
        })).collect::<Vec<_>>(),
    }))
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

/// Serve `compute` through the response cache tiers (when on): a hit answers at once,
/// without admission or work; a 200 miss is stored. The in-process key is the collection,
/// its generation, `route`, the query string and the canonical body; with the shared tier
/// (`--cache-redis`, `shared.rs`) the generation also carries the collection's generation in
/// Redis, learnt by every read before either tier is consulted (while Redis cannot be
/// asked, no tier is used).
pub(crate) async fn cached<F, Fut>(
    app: &App,
    slot: &Slot,
    route: &str,
    uri: &Uri,
    body: &[u8],
    compute: F,
) -> Response
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Vec<u8>, ApiError>>,
{
    let max = app.cfg.max_reply_bytes;
    let uncached = |compute: F| async move {
        match compute().await.and_then(|b| fits(b, max)) {
            Ok(b) => json_response(StatusCode::OK, b),
            Err(e) => e.into_response(),
        }
    };
    if app.cache.is_none() && app.shared.is_none() {
        return uncached(compute).await;
    }
    // Reloads bump the generation; writes change the backend's version (what a live
    // collection's searches see): both are part of the key.
    let backend = slot.backend.load_full();
    let version = backend.as_ref().map_or(0, |b| b.version());
    let mut generation = slot.generation.load(Ordering::Acquire).wrapping_shl(40) ^ version;
    let Some(request) = ResponseCache::key(&slot.name, 0, route, uri.query(), body) else {
        return uncached(compute).await;
    };
    let identity = match (&app.shared, &backend) {
        (Some(_), Some(b)) => b.shared_key(),
        _ => None,
    };
    let mut shared = None;
    if let (Some(tier), Some(identity)) = (&app.shared, identity) {
        match tier.lookup(&slot.name, &identity, &request).await {
            Lookup::Bypass => {
                let mut r = uncached(compute).await;
                if r.status() == StatusCode::OK {
                    r.headers_mut()
                        .insert("x-searchd-cache", HeaderValue::from_static("miss"));
                }
                return r;
            }
            Lookup::Found {
                generation: g,
                key,
                entry,
            } => {
                generation ^= g;
                shared = Some((tier, g, key, entry));
            }
        }
    }
    let key = ResponseCache::rekey(request, &slot.name, generation);
    if let Some(cache) = &app.cache {
        if let Some(hit) = cache.get(&key) {
            return tagged(hit.to_vec(), "hit");
        }
    }
    if let Some((tier, _, _, entry)) = &shared {
        tier.count(entry.is_some());
        if let Some(reply) = entry {
            if let Some(cache) = &app.cache {
                cache.insert(key, reply.clone());
            }
            return tagged(reply.to_vec(), "shared-hit");
        }
    }
    match compute().await.and_then(|b| fits(b, max)) {
        // A degraded answer (partitions skipped at the deadline) is not kept: the next
        // request may find them resident.
        Ok(b) if degraded(&b) => tagged(b, "miss"),
        Ok(b) => {
            // A swap while computing makes the answer belong to the older generation,
            // which its key already names: it can never be served for the new one.
            if let Some((tier, g, skey, _)) = shared {
                tier.store(skey, g, &b);
            }
            if let Some(cache) = &app.cache {
                cache.insert(key, Bytes::from(b.clone()));
            }
            tagged(b, "miss")
        }
        Err(e) => e.into_response(),
    }
}

/// Whether a search reply says `"degraded":true` (written by `native::reply` before its
/// `explain` and `warnings`, never inside a hit: document fields are escaped JSON values,
/// so the bare key cannot appear at the top level otherwise; a hit that contains the text
/// only costs a cache miss).
fn degraded(body: &[u8]) -> bool {
    const KEY: &[u8] = b",\"degraded\":true,";
    memchr::memmem::find(body, KEY).is_some()
}

/// A 200 JSON reply with its `x-searchd-cache` header.
fn tagged(body: Vec<u8>, how: &'static str) -> Response {
    let mut r = json_response(StatusCode::OK, body);
    r.headers_mut()
        .insert("x-searchd-cache", HeaderValue::from_static(how));
    r
}

/// A reply body within `--max-reply-bytes`, or 400 `reply_too_large` (its memory is freed
/// at once, before anything is sent).
fn fits(body: Vec<u8>, max: usize) -> Result<Vec<u8>, ApiError> {
    if body.len() <= max {
        return Ok(body);
    }
    Err(ApiError::new(
        Code::ReplyTooLarge,
        format!(
            "the reply would be {} bytes, over --max-reply-bytes ({max}): ask for fewer hits (k, size), fewer fields (_source) or fewer buckets",
            body.len()
        ),
    ))
}

/// Refuse, before any work, a request whose reply cannot fit `--max-reply-bytes`: each
/// hit or document costs at least `per_hit` bytes (its id, score and the vector when one
/// is asked for), each bucket at least [`BUCKET_BYTES`].
pub(crate) fn check_reply(
    hits: usize,
    per_hit: usize,
    buckets: usize,
    max: usize,
) -> Result<(), ApiError> {
    let least = hits
        .saturating_mul(per_hit)
        .saturating_add(buckets.saturating_mul(BUCKET_BYTES));
    if least > max {
        return Err(ApiError::new(
            Code::ReplyTooLarge,
            format!(
                "the reply would be at least {least} bytes ({hits} hits, {buckets} buckets), over --max-reply-bytes ({max}): ask for fewer"
            ),
        ));
    }
    Ok(())
}

/// The least a bucket costs in a reply (`{"key":"","doc_count":0}`).
pub(crate) const BUCKET_BYTES: usize = 24;

/// The least a hit costs in a reply (`{"id":"","score":0.0}` and a separator).
pub(crate) const HIT_BYTES: usize = 24;

/// The slot's backend, or 503 while it loads.
pub(crate) fn backend_of(slot: &Slot) -> Result<Arc<Box<dyn SearchBackend>>, ApiError> {
    slot.backend_or_503()
}

/// Run a read on the backend: admission first (503 at capacity), then the pool.
pub(crate) async fn run_read(
    app: &App,
    backend: &dyn SearchBackend,
    page: Page,
) -> Result<ReadOutput, ApiError> {
    let buckets = check_buckets(&page.facets, app.cfg.max_buckets)?;
    check_reply(page.size, HIT_BYTES, buckets, app.cfg.max_reply_bytes)?;
    let permit = app.admission.admit().await.map_err(|r| refused(app, r))?;
    backend
        .read(ReadRequest {
            page,
            permit: Some(permit),
        })
        .await
        .map_err(|e| backend_error(app, e))
}

/// Refuse, before any work, a request whose facets and aggregations ask for more than
/// `max` buckets in all (`--max-buckets`, Elasticsearch's `search.max_buckets`).
fn check_buckets(facets: &[FacetSpec], max: usize) -> Result<usize, ApiError> {
    let asked: usize = facets
        .iter()
        .map(|f| f.size.max(1))
        .fold(0, usize::saturating_add);
    if asked > max {
        return Err(ApiError::new(
            Code::TooManyBuckets,
            format!(
                "the request's {} aggregations/facets ask for {asked} buckets; at most {max} are allowed (--max-buckets)",
                facets.len()
            ),
        ));
    }
    Ok(asked)
}

/// A read of everything with nothing asked for yet, deadline from `arrival`.
pub(crate) fn read_request(app: &App, arrival: Instant) -> Page {
    Page::new(arrival + app.cfg.timeout)
}

/// How a read route takes its body: the keys it knows and the surface's parser (which
/// words the errors as that surface does). With `optional` a request without a body
/// (Elasticsearch clients send GET without one) reads as an empty body instead of a missing
/// Content-Type.
#[derive(Clone, Copy)]
pub(crate) struct BodyRule<'k> {
    pub optional: bool,
    pub keys: &'k [&'k str],
    pub parse: fn(&[u8], &[&str]) -> Result<JsonObject, ApiError>,
}

/// A JSON object body.
pub(crate) type JsonObject = serde_json::Map<String, serde_json::Value>;

/// One admitted read: the parsed body and the collection's backend, timed from `arrival`
/// (when the body had arrived).
pub(crate) struct Read {
    pub app: Arc<App>,
    pub slot: Arc<Slot>,
    pub backend: Arc<Box<dyn SearchBackend>>,
    pub body: JsonObject,
    pub arrival: Instant,
    /// The URL's query string (Elasticsearch routes take `size`, `from`, ...).
    pub query: Option<String>,
}

impl Read {
    /// A read of everything with nothing asked for yet ([`read_request`]).
    pub fn request(&self) -> Page {
        read_request(&self.app, self.arrival)
    }

    /// The body's key `key` as a filter, parsed against the backend's schema (`None`: the
    /// key is absent).
    pub fn filter(&self, key: &str) -> Result<Option<Filter>, ApiError> {
        parse_optional_filter(&**self.backend, self.body.get(key), key)
    }

    /// Run `req` on the backend ([`run_read`]).
    pub async fn run(&self, req: Page) -> Result<ReadOutput, ApiError> {
        run_read(&self.app, &**self.backend, req).await
    }
}

type AppState = axum::extract::State<Arc<App>>;
type CollectionName = axum::extract::Path<String>;
type ResponseFuture = std::pin::Pin<Box<dyn Future<Output = Response> + Send>>;

/// The axum handler of a read route: [`read_route`] around `f` (`route` names it in the
/// cache key).
pub(crate) fn read_handler<F, Fut>(
    route: &'static str,
    rule: BodyRule<'static>,
    f: F,
) -> impl Fn(AppState, CollectionName, Request) -> ResponseFuture + Clone + Send + Sync + 'static
where
    F: Fn(Read) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<u8>, ApiError>> + Send + 'static,
{
    move |axum::extract::State(app), axum::extract::Path(name), req| {
        Box::pin(read_route(app, name, req, route, rule, f))
    }
}

/// A collection read route: slot, body, then the cache around `f`, which gets the parsed
/// body and the backend.
pub(crate) async fn read_route<F, Fut>(
    app: Arc<App>,
    name: String,
    req: Request,
    route: &'static str,
    rule: BodyRule<'static>,
    f: F,
) -> Response
where
    F: FnOnce(Read) -> Fut,
    Fut: Future<Output = Result<Vec<u8>, ApiError>>,
{
    let slot = match app.slot(&name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let uri = req.uri().clone();
    let has_body = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .is_some_and(|v| v != "0")
        || req
            .headers()
            .contains_key(axum::http::header::TRANSFER_ENCODING);
    let body = if rule.optional && !has_body {
        Bytes::new()
    } else {
        match read_body(&app, req).await {
            Ok(b) => b,
            Err(e) => return e.into_response(),
        }
    };
    // Deadlines (and the reported times) start when the body has arrived: upload time is
    // bounded by the read timeout, not the search deadline.
    let arrival = Instant::now();
    let app2 = app.clone();
    let slot2 = slot.clone();
    let body2 = body.clone();
    let query = uri.query().map(str::to_string);
    let parse = rule.parse;
    let keys = rule.keys;
    cached(&app, &slot, route, &uri, &body, move || async move {
        // A large body (a filter of 30,000 terms, thousands of aggregations) is parsed off
        // the I/O thread ([`crate::render`]).
        let large = body2.len() >= crate::render::OFFLOAD_BODY_BYTES;
        let deadline = arrival + app2.cfg.timeout;
        let body = app2
            .renders
            .offload_if(deadline, large, move || parse(&body2, keys))
            .await??;
        let backend = backend_of(&slot2)?;
        f(Read {
            app: app2,
            slot: slot2,
            backend,
            body,
            arrival,
            query,
        })
        .await
    })
    .await
}

// ---------------------------------------------------------------------------------------
// The typed seam: what crosses `SearchBackend` is parsed here, once, against the backend's
// schema, with the JSON paths of the request in the errors.

/// A filter of the filter language (CONTRACTS.md "Filter language"); errors name the path
/// under `path` (`filter.bool.must[1].range.price`).
pub(crate) fn parse_filter(
    schema: &Schema,
    v: &serde_json::Value,
    path: &str,
) -> Result<Filter, ApiError> {
    Filter::parse_at(v, schema, path).map_err(|e| ApiError::invalid(e.to_string()))
}

/// A request's filter when it has one, parsed against the backend's schema (which is
/// fetched only then: searches without a filter pay nothing here).
pub(crate) fn parse_optional_filter(
    backend: &dyn SearchBackend,
    v: Option<&serde_json::Value>,
    path: &str,
) -> Result<Option<Filter>, ApiError> {
    v.map(|v| parse_filter(&backend.schema(), v, path))
        .transpose()
}

/// The filter of a delete: parsed, and refused when it places no condition (it would
/// delete every document by vacuity; `match_all` says so on purpose).
pub(crate) fn parse_delete_filter(
    schema: &Schema,
    v: &serde_json::Value,
) -> Result<Filter, ApiError> {
    let f = parse_filter(schema, v, "filter")?;
    if f.is_vacuous() {
        return Err(ApiError::invalid(
            "filter: this filter places no condition (a range without bounds, an empty bool, or only such clauses), so it would delete every document; a delete refuses it. To delete every document, send {\"filter\": {\"match_all\": {}}}",
        ));
    }
    Ok(f)
}

/// The sort keys and value cursor of a read (a page without a query): `sort` under
/// `sort_path`, `after` under `after_path`. A read has no scores, so `_score` is refused.
pub(crate) fn parse_page(
    schema: &Schema,
    sort: Option<&serde_json::Value>,
    after: Option<&serde_json::Value>,
    sort_path: &str,
    after_path: &str,
) -> Result<(Vec<SortKey>, Option<Vec<SortValue>>), ApiError> {
    let keys = match sort {
        Some(v) => searchd_fields::parse_sort(v, schema, sort_path)
            .map_err(|e| ApiError::invalid(e.to_string()))?,
        None => Vec::new(),
    };
    if keys.iter().any(|k| matches!(k.by, SortBy::Score)) {
        return Err(ApiError::invalid(format!(
            "{sort_path}: _score needs a query (vector or text); a filter alone gives no scores"
        )));
    }
    let after = match after {
        Some(v) => Some(
            searchd_fields::parse_after(v, &keys, schema, after_path)
                .map_err(|e| ApiError::invalid(e.to_string()))?,
        ),
        None => None,
    };
    Ok((keys, after))
}
