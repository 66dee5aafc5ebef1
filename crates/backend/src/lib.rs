//! The seam between searchd's HTTP front door and whatever answers searches: the typed
//! requests and replies every backend takes and gives, and the [`SearchBackend`] trait.
//!
//! The server (`searchd-server`) owns admission control, deadlines, text embedding, JSON and
//! metrics; a [`SearchBackend`] only answers "search this", "read these" and "write these"
//! for one collection. The server's `LocalBackend` runs on searchd's own engine (a
//! collection on the CPU pool); `searchd-qdrant`'s `QdrantBackend` on a Qdrant collection.
//! Both take the same requests, as Qdrant's local and remote shards do.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use searchd_collection::live::{Doc as LiveDoc, LiveCollection};
pub use searchd_collection::request::{
    select_fields, Document, FacetOutput, FacetSpec, FieldsWanted, Page, QueryError, QueryInput,
    ReadOutput, Receipt, ScoredDoc, Search, SearchOutput, SegmentExplain, SortedDoc, StageTimes,
    MAX_RESULT_WINDOW,
};
use searchd_collection::{DocId, ModelRecord};
pub use searchd_fields::{Filter, Schema, SortKey, SortValue};

/// What an admission [`Permit`] gives back when it is dropped (the server's admission
/// control implements it).
pub trait Release: Send + Sync {
    /// The place is free again.
    fn release(&self);
}

/// An admitted request's place: the backend drops it when the work is done, before
/// replying, which frees the place ([`Release::release`]).
pub struct Permit(Arc<dyn Release>);

impl Permit {
    /// A permit that calls `place.release()` when it is dropped.
    pub fn new(place: Arc<dyn Release>) -> Permit {
        Permit(place)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// A boxed, sendable future (the trait stays object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One search, admitted.
pub struct SearchRequest {
    /// What to search: the query, filter, facets and stored fields wanted.
    pub search: Search,
    /// The admission place; the backend drops it when the work is done, before replying.
    pub permit: Option<Permit>,
}

/// One read ([`Page`]), admitted.
pub struct ReadRequest {
    /// What to read: the filter, and a count, facets and/or one sorted page.
    pub page: Page,
    /// The admission place; the backend drops it when the work is done, before replying.
    pub permit: Option<Permit>,
}

/// Why a backend call failed; the server maps each to a status.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendError {
    /// The request is wrong (400 `invalid_argument`).
    Invalid(String),
    /// No such document (404 `not_found`).
    NotFound(String),
    /// The deadline passed; `started` tells whether work had begun (504).
    Deadline {
        /// True when work had begun; false when the deadline passed while it waited.
        started: bool,
    },
    /// The backend is at capacity (503 `overloaded`).
    Overloaded(String),
    /// The backend cannot be reached or is not ready (503 `not_ready`).
    Unavailable(String),
    /// Anything else, including a storage read failure (500 `internal`).
    Internal(String),
    /// A write to a collection that is not open for writing (409 `conflict`).
    Conflict(String),
    /// The disk is full (507 `insufficient_storage`).
    Storage(String),
}

impl From<QueryError> for BackendError {
    fn from(e: QueryError) -> BackendError {
        match e {
            QueryError::Invalid(m) => BackendError::Invalid(m),
            QueryError::NotFound(m) => BackendError::NotFound(m),
            QueryError::Deadline { started } => BackendError::Deadline { started },
            QueryError::Internal(m) => BackendError::Internal(m),
        }
    }
}

/// What answers searches for one collection. Object-safe: served as `Arc<dyn SearchBackend>`.
pub trait SearchBackend: Send + Sync + 'static {
    /// For `/stats`, logs and `/admin/reload` replies.
    fn info(&self) -> serde_json::Value;
    /// Figures for `/metrics` and checks: documents, dimensions, bytes.
    fn figures(&self) -> (u64, usize, u64);
    /// The model that embedded the documents, if any (text queries must use the same).
    fn model(&self) -> Option<ModelRecord>;
    /// The typed fields filters, sorts and facets are checked against (the server parses
    /// every request's filter, sort and cursor once, against this). Default: none, so only
    /// `ids` and `match_all` filters parse.
    fn schema(&self) -> Arc<Schema> {
        Arc::new(Schema::default())
    }
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
    /// Whether the backend can answer now (`/ready`); `Err` says why not (a remote engine
    /// that cannot be reached). Default: ready once loaded.
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }
    /// Answer one search; the request's permit is dropped before the reply.
    fn search(&self, req: SearchRequest) -> BoxFuture<'_, Result<SearchOutput, BackendError>>;
    /// The stored document `id` with the `fields` wanted; [`BackendError::NotFound`] when
    /// there is none.
    fn get(&self, id: DocId, fields: FieldsWanted)
        -> BoxFuture<'_, Result<Document, BackendError>>;
    /// Counts, facets and sorted pages over the documents matching a filter. Default: not
    /// supported.
    fn read(&self, req: ReadRequest) -> BoxFuture<'_, Result<ReadOutput, BackendError>> {
        drop(req);
        Box::pin(async {
            Err(BackendError::Invalid(
                "this backend does not support counts, facets or sorted pages".into(),
            ))
        })
    }
    /// Upserts and deletes (`wait`: return once visible). Default: not supported.
    fn write(&self, op: WriteOp, wait: bool) -> BoxFuture<'_, Result<Receipt, BackendError>> {
        drop((op, wait));
        Box::pin(async {
            Err(BackendError::Conflict(
                "this collection takes no writes (a bare index directory is read-only)".into(),
            ))
        })
    }
    /// A consistent point-in-time copy written to `out`; returns its sequence number.
    fn snapshot(&self, out: std::path::PathBuf) -> BoxFuture<'_, Result<u64, BackendError>> {
        drop(out);
        Box::pin(async {
            Err(BackendError::Conflict(
                "this collection has no snapshots (it is not a live collection)".into(),
            ))
        })
    }
    /// Changes whenever what searches see changes (part of response cache keys).
    fn version(&self) -> u64 {
        0
    }
    /// Names the data this backend answers from, the same in every process that serves the
    /// same data (a local collection's directory and the sequence number of its view; a
    /// remote engine's address and collection), for the cache tier shared between
    /// processes (`serve --cache-redis`). Never a per-process counter. `None` (the
    /// default): this backend's replies are not shared.
    fn shared_key(&self) -> Option<String> {
        None
    }
    /// The writer's and optimizer's figures, for `/stats`.
    fn live_stats(&self) -> Option<serde_json::Value> {
        None
    }
    /// Make everything durable at shutdown.
    fn close(&self) {}
    /// The live collection that takes this backend's writes, if it is one (`/admin/reload`
    /// closes it before its directory is opened again, and waits until it lets go).
    fn writer(&self) -> Option<Arc<LiveCollection>> {
        None
    }
}

/// One write, as the HTTP layer parsed it.
#[derive(Debug)]
pub enum WriteOp {
    /// Insert or replace these documents, by id.
    Upsert(Vec<LiveDoc>),
    /// Delete the documents with these ids.
    Delete(Vec<DocId>),
    /// Delete what the filter matches (never a vacuous filter: the server refuses those).
    DeleteFilter(Filter),
}

/// A shared backend is a backend (the forwarding impl `IndexSource::Backend` serves).
impl SearchBackend for Arc<dyn SearchBackend> {
    fn info(&self) -> serde_json::Value {
        (**self).info()
    }
    fn figures(&self) -> (u64, usize, u64) {
        (**self).figures()
    }
    fn model(&self) -> Option<ModelRecord> {
        (**self).model()
    }
    fn schema(&self) -> Arc<Schema> {
        (**self).schema()
    }
    fn can_search_by_id(&self) -> Result<(), String> {
        (**self).can_search_by_id()
    }
    fn can_search_text(&self) -> Result<(), String> {
        (**self).can_search_text()
    }
    fn text_field(&self) -> Option<String> {
        (**self).text_field()
    }
    fn ready(&self) -> Result<(), String> {
        (**self).ready()
    }
    fn read(&self, req: ReadRequest) -> BoxFuture<'_, Result<ReadOutput, BackendError>> {
        (**self).read(req)
    }
    fn search(&self, req: SearchRequest) -> BoxFuture<'_, Result<SearchOutput, BackendError>> {
        (**self).search(req)
    }
    fn get(
        &self,
        id: searchd_collection::DocId,
        fields: FieldsWanted,
    ) -> BoxFuture<'_, Result<Document, BackendError>> {
        (**self).get(id, fields)
    }
    fn write(&self, op: WriteOp, wait: bool) -> BoxFuture<'_, Result<Receipt, BackendError>> {
        (**self).write(op, wait)
    }
    fn snapshot(&self, out: std::path::PathBuf) -> BoxFuture<'_, Result<u64, BackendError>> {
        (**self).snapshot(out)
    }
    fn version(&self) -> u64 {
        (**self).version()
    }
    fn shared_key(&self) -> Option<String> {
        (**self).shared_key()
    }
    fn live_stats(&self) -> Option<serde_json::Value> {
        (**self).live_stats()
    }
    fn close(&self) {
        (**self).close()
    }
    fn writer(&self) -> Option<Arc<searchd_collection::live::LiveCollection>> {
        (**self).writer()
    }
}
