//! The seam between the HTTP front door and whatever answers searches.
//!
//! The server owns admission control, deadlines, text embedding, JSON and metrics; a
//! [`SearchBackend`] only answers "search this vector" and "get this document". Each served
//! collection is one backend behind an `ArcSwap`, so `/admin/reload` swaps it whole.
//! [`LocalBackend`] runs on searchd's own engine (a [`Collection`] on the CPU pool); a
//! remote engine (Qdrant) implements the same trait.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use searchd_collection::fusion::Fusion;
use searchd_collection::{Collection, DocHit, DocId, HybridError, ModelRecord};
use searchd_engine::{SearchError, SearchParams};
use searchd_vecio::Vectors;

use crate::pool::{JobFailure, Permit, Pool};

/// A boxed, sendable future (the trait stays object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What to search with.
pub enum QueryInput {
    /// A query vector (from the body, or embedded from text by the server).
    Vector(Vec<f32>),
    /// Row of the server's query matrix (`serve --queries`).
    Row(Arc<Vectors>, usize),
    /// The stored vector of this document, which is left out of the hits.
    Stored(DocId),
    /// BM25 over the text field.
    Lexical(String),
    /// Dense (`vector`, embedded from `text`) and lexical (`text`) retrieval, fused.
    Hybrid {
        text: String,
        vector: Vec<f32>,
        fusion: Fusion,
        /// Candidates taken from each side (raised to `k`).
        window: usize,
    },
}

/// Which stored fields a hit or a get returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FieldsWanted {
    /// Ids and scores only.
    #[default]
    None,
    All,
    List(Vec<String>),
}

/// One search, admitted.
pub struct SearchRequest {
    pub query: QueryInput,
    pub k: usize,
    pub ef: usize,
    pub oversample: Option<f32>,
    pub fields: FieldsWanted,
    pub deadline: Instant,
    /// The admission place; the backend drops it when the work is done, before replying.
    pub permit: Option<Permit>,
}

/// Time spent in each stage of a search, in microseconds (0 when the stage did not run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTimes {
    pub dense_us: u64,
    pub lexical_us: u64,
    pub fuse_us: u64,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchOutput {
    pub hits: Vec<ScoredDoc>,
    pub stages: StageTimes,
    /// The query text was cut to the lexical limits (`searchd_lexical::MAX_QUERY_CHARS`).
    pub lexical_truncated: bool,
}

impl From<Vec<ScoredDoc>> for SearchOutput {
    fn from(hits: Vec<ScoredDoc>) -> SearchOutput {
        SearchOutput {
            hits,
            ..SearchOutput::default()
        }
    }
}

/// One hit: the document's own id, a higher-is-better score, fields if asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredDoc {
    pub id: DocId,
    pub score: f32,
    /// A JSON object, when fields were asked for and the backend stores them.
    pub fields: Option<Vec<u8>>,
}

/// A stored document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub id: DocId,
    /// A JSON object (`{}` when the backend stores no fields).
    pub fields: Vec<u8>,
}

/// Why a backend call failed; the server maps each to a status.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendError {
    /// The request is wrong (400 `invalid_argument`).
    Invalid(String),
    /// No such document (404 `not_found`).
    NotFound(String),
    /// The deadline passed; `started` tells whether work had begun (504).
    Deadline { started: bool },
    /// The backend is at capacity (503 `overloaded`).
    Overloaded(String),
    /// The backend cannot be reached or is not ready (503 `not_ready`).
    Unavailable(String),
    /// Anything else, including a storage read failure (500 `internal`).
    Internal(String),
}

/// What answers searches for one collection. Object-safe: served as `Arc<dyn SearchBackend>`.
pub trait SearchBackend: Send + Sync + 'static {
    /// For `/stats`, logs and `/admin/reload` replies.
    fn info(&self) -> serde_json::Value;
    /// Figures for `/metrics` and checks: documents, dimensions, bytes.
    fn figures(&self) -> (u64, usize, u64);
    /// The model that embedded the documents, if any (text queries must use the same).
    fn model(&self) -> Option<ModelRecord>;
    /// Whether stored documents can be searched by id (`{"id": ...}`); `Err` says why not.
    fn can_search_by_id(&self) -> Result<(), String> {
        Ok(())
    }
    /// Whether lexical (BM25) search works here (`mode` lexical and hybrid); `Err` says why
    /// not. Default: it does not.
    fn can_search_text(&self) -> Result<(), String> {
        Err("this collection has no lexical index; use mode \"dense\"".into())
    }
    /// The stored field that holds each document's text (what rerank reads).
    fn text_field(&self) -> Option<String> {
        None
    }
    fn search(&self, req: SearchRequest) -> BoxFuture<'_, Result<SearchOutput, BackendError>>;
    fn get(&self, id: DocId, fields: FieldsWanted)
        -> BoxFuture<'_, Result<Document, BackendError>>;
}

/// searchd's own engine: a [`Collection`] searched on the CPU pool.
pub struct LocalBackend {
    coll: Arc<Collection>,
    pool: Arc<Pool>,
}

impl LocalBackend {
    pub fn new(coll: Arc<Collection>, pool: Arc<Pool>) -> LocalBackend {
        LocalBackend { coll, pool }
    }
    pub fn collection(&self) -> &Arc<Collection> {
        &self.coll
    }
}

/// Keep only the wanted keys of a stored JSON object (values byte for byte).
pub(crate) fn select_fields(source: &[u8], wanted: &FieldsWanted) -> Option<Vec<u8>> {
    match wanted {
        FieldsWanted::None => None,
        FieldsWanted::All => Some(source.to_vec()),
        FieldsWanted::List(keys) => {
            let parsed: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> =
                serde_json::from_slice(source).unwrap_or_default();
            let mut out = Vec::with_capacity(source.len().min(256));
            out.push(b'{');
            let mut first = true;
            for k in keys {
                if let Some(v) = parsed.get(k) {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    serde_json::to_writer(&mut out, k).ok()?;
                    out.push(b':');
                    out.extend_from_slice(v.get().as_bytes());
                }
            }
            out.push(b'}');
            Some(out)
        }
    }
}

fn not_found(coll: &Collection, id: &DocId) -> BackendError {
    BackendError::NotFound(if coll.manifest().is_none() {
        // A bare index: its ids are its rows.
        format!(
            "id {id} is not in the index (ids are 0..={})",
            coll.len().saturating_sub(1)
        )
    } else {
        format!("document {id} is not in the collection")
    })
}

fn storage_error(e: &SearchError) -> BackendError {
    match e {
        SearchError::DeadlineExceeded => BackendError::Deadline { started: true },
        SearchError::Storage { .. } => BackendError::Internal(e.to_string()),
        other => BackendError::Invalid(other.to_string()),
    }
}

fn to_scored(
    coll: &Collection,
    hits: Vec<DocHit>,
    fields: &FieldsWanted,
) -> Result<Vec<ScoredDoc>, BackendError> {
    hits.into_iter()
        .map(|h| {
            let id = coll
                .doc_id(h.doc)
                .cloned()
                .ok_or_else(|| BackendError::Internal(format!("hit {:?} has no id", h.doc)))?;
            let fields = match fields {
                FieldsWanted::None => None,
                w => match coll.source(h.doc) {
                    Ok(Some(src)) => select_fields(&src, w),
                    Ok(None) => Some(b"{}".to_vec()),
                    Err(e) => return Err(BackendError::Internal(e.to_string())),
                },
            };
            Ok(ScoredDoc {
                id,
                score: h.score,
                fields,
            })
        })
        .collect()
}

fn lexical_error(e: searchd_collection::Error) -> BackendError {
    if e.is_input() {
        BackendError::Invalid(e.to_string())
    } else {
        BackendError::Internal(e.to_string())
    }
}

fn micros(t: Instant) -> u64 {
    t.elapsed().as_micros() as u64
}

struct Local<'a> {
    coll: &'a Collection,
    k: usize,
    ef: usize,
    oversample: Option<f32>,
    deadline: Instant,
}

impl Local<'_> {
    /// The request's search parameters for `k` hits.
    fn params(&self, k: usize) -> SearchParams<'static> {
        let mut params = SearchParams::new(k, self.ef.max(k));
        params.deadline = Some(self.deadline);
        params.oversample = self.oversample;
        params
    }

    fn dense(&self, query: &[f32], k: usize) -> Result<Vec<DocHit>, BackendError> {
        self.coll
            .search(query, &self.params(k), None)
            .map_err(|e| storage_error(&e))
    }

    fn run(&self, query: QueryInput) -> Result<(Vec<DocHit>, StageTimes, bool), BackendError> {
        let coll = self.coll;
        let mut st = StageTimes::default();
        let t = Instant::now();
        let dense = |hits| {
            let st = StageTimes {
                dense_us: micros(t),
                ..StageTimes::default()
            };
            Ok((hits, st, false))
        };
        match query {
            QueryInput::Vector(v) => dense(self.dense(&v, self.k)?),
            QueryInput::Row(m, i) => dense(self.dense(m.row(i), self.k)?),
            QueryInput::Stored(id) => {
                let Some(r) = coll.lookup(&id) else {
                    return Err(not_found(coll, &id));
                };
                let v = match coll.vector(r) {
                    Ok(Some(v)) => v,
                    Ok(None) => return Err(not_found(coll, &id)),
                    Err(e) => return Err(storage_error(&e)),
                };
                dense(
                    coll.search(&v, &self.params(self.k), Some(r))
                        .map_err(|e| storage_error(&e))?,
                )
            }
            QueryInput::Lexical(text) => {
                let r = coll
                    .search_lexical(&text, self.k, None)
                    .map_err(lexical_error)?;
                st.lexical_us = micros(t);
                Ok((r.hits, st, r.truncated))
            }
            QueryInput::Hybrid {
                text,
                vector,
                fusion,
                window,
            } => {
                let r = coll
                    .search_hybrid(&text, &vector, &self.params(self.k), &fusion, window)
                    .map_err(|e| match e {
                        HybridError::Dense(e) => storage_error(&e),
                        HybridError::Lexical(e) => lexical_error(e),
                    })?;
                st.dense_us = r.dense_us;
                st.lexical_us = r.lexical_us;
                st.fuse_us = r.fuse_us;
                Ok((r.hits.iter().map(|f| f.hit()).collect(), st, r.truncated))
            }
        }
    }
}

fn search_local(
    coll: &Collection,
    query: QueryInput,
    k: usize,
    ef: usize,
    oversample: Option<f32>,
    deadline: Instant,
    fields: &FieldsWanted,
) -> Result<SearchOutput, BackendError> {
    let local = Local {
        coll,
        k,
        ef,
        oversample,
        deadline,
    };
    let (hits, stages, lexical_truncated) = local.run(query)?;
    Ok(SearchOutput {
        hits: to_scored(coll, hits, fields)?,
        stages,
        lexical_truncated,
    })
}

impl SearchBackend for LocalBackend {
    fn info(&self) -> serde_json::Value {
        self.coll.info()
    }
    fn figures(&self) -> (u64, usize, u64) {
        // Called on every search (for the dimension check): no JSON built here.
        (self.coll.len() as u64, self.coll.dim(), self.coll.bytes())
    }
    fn model(&self) -> Option<ModelRecord> {
        self.coll.model().cloned()
    }
    fn can_search_by_id(&self) -> Result<(), String> {
        if self.coll.has_vectors() {
            Ok(())
        } else {
            Err(
                "search by id needs the stored vectors; this server opened the index with \
                 --vectors none (search by vector or qidx)"
                    .into(),
            )
        }
    }
    fn can_search_text(&self) -> Result<(), String> {
        self.coll.check_lexical().map_err(|e| e.to_string())
    }
    fn text_field(&self) -> Option<String> {
        self.coll.manifest()?.text_field.clone()
    }
    fn search(&self, req: SearchRequest) -> BoxFuture<'_, Result<SearchOutput, BackendError>> {
        let coll = self.coll.clone();
        Box::pin(async move {
            let SearchRequest {
                query,
                k,
                ef,
                oversample,
                fields,
                deadline,
                permit,
            } = req;
            let out = self
                .pool
                .run(permit, deadline, move || {
                    search_local(&coll, query, k, ef, oversample, deadline, &fields)
                })
                .await;
            match out {
                Ok(r) => r,
                Err(JobFailure::NotStarted) => Err(BackendError::Deadline { started: false }),
                Err(JobFailure::Panicked(m)) => {
                    tracing::error!("search panicked: {m}");
                    Err(BackendError::Internal(
                        "the search failed with an internal error".into(),
                    ))
                }
                Err(JobFailure::Closed) => Err(BackendError::Unavailable(
                    "the search pool is shut down".into(),
                )),
            }
        })
    }
    fn get(
        &self,
        id: DocId,
        fields: FieldsWanted,
    ) -> BoxFuture<'_, Result<Document, BackendError>> {
        Box::pin(async move {
            let Some(r) = self.coll.lookup(&id) else {
                return Err(not_found(&self.coll, &id));
            };
            let doc_id = self.coll.doc_id(r).cloned().unwrap_or(id);
            let src = self
                .coll
                .source(r)
                .map_err(|e| BackendError::Internal(e.to_string()))?
                .unwrap_or_else(|| b"{}".to_vec());
            let fields = match fields {
                FieldsWanted::None => b"{}".to_vec(),
                w => select_fields(&src, &w).unwrap_or_else(|| b"{}".to_vec()),
            };
            Ok(Document { id: doc_id, fields })
        })
    }
}
