//! searchd's own engine behind the seam: [`LocalBackend`] answers each
//! [`SearchBackend`] call over a [`Collection`] (fixed, or a live collection's current
//! view) on the CPU pool.

use std::sync::Arc;
use std::time::Instant;

use searchd_collection::live::LiveCollection;
use searchd_collection::{
    Collection, DocHit, DocId, DocRef, FilterError, HybridError, Matches, ModelRecord, SegmentRun,
};
use searchd_engine::{FilterPlan, SearchError, SearchParams};
use searchd_fields::{Filter, Schema};

use crate::backend::{
    select_fields, BackendError, BoxFuture, Document, FacetOutput, FacetSpec, FieldsWanted,
    QueryInput, ReadOutput, ReadRequest, Receipt, ScoredDoc, SearchBackend, SearchOutput,
    SearchRequest, SegmentExplain, SortedDoc, StageTimes, WriteOp, MAX_RESULT_WINDOW,
};
use crate::pool::{JobFailure, Pool};

/// searchd's own engine: a [`Collection`] searched on the CPU pool.
pub struct LocalBackend {
    src: Source,
    pool: Arc<Pool>,
}

/// What a local backend serves: a fixed collection (a bare index, or one opened
/// read-only), or a live one whose view changes with writes.
enum Source {
    Fixed(Arc<Collection>),
    Live(Arc<LiveCollection>),
    /// The last view of a live collection that `/admin/reload` closed to open its directory
    /// again: reads answer from it, writes and snapshots are refused with the message
    /// (503 with `Retry-After` while the reopening runs, 409 if it failed).
    Paused {
        view: Arc<Collection>,
        why: String,
        transient: bool,
    },
}

impl LocalBackend {
    pub fn new(coll: Arc<Collection>, pool: Arc<Pool>) -> LocalBackend {
        LocalBackend {
            src: Source::Fixed(coll),
            pool,
        }
    }
    /// A live collection: each request runs on the view current when it starts.
    pub fn live(live: Arc<LiveCollection>, pool: Arc<Pool>) -> LocalBackend {
        LocalBackend {
            src: Source::Live(live),
            pool,
        }
    }
    /// A live collection's last view, served read-only while its directory is reopened
    /// (`transient`: writes get 503 with `Retry-After`) or after that failed (409); `why`
    /// is the message of the refused writes.
    pub fn paused(
        view: Arc<Collection>,
        pool: Arc<Pool>,
        why: String,
        transient: bool,
    ) -> LocalBackend {
        LocalBackend {
            src: Source::Paused {
                view,
                why,
                transient,
            },
            pool,
        }
    }
    /// The collection as searches see it now.
    pub fn collection(&self) -> Arc<Collection> {
        match &self.src {
            Source::Fixed(c) | Source::Paused { view: c, .. } => c.clone(),
            Source::Live(l) => l.view(),
        }
    }
    pub fn live_collection(&self) -> Option<&Arc<LiveCollection>> {
        match &self.src {
            Source::Live(l) => Some(l),
            _ => None,
        }
    }
    /// Why writes are refused while paused (`None`: not paused).
    fn paused_error(&self) -> Option<BackendError> {
        match &self.src {
            Source::Paused {
                why,
                transient: true,
                ..
            } => Some(BackendError::Unavailable(why.clone())),
            Source::Paused { why, .. } => Some(BackendError::Conflict(why.clone())),
            _ => None,
        }
    }
}

fn write_error(e: searchd_collection::Error) -> BackendError {
    if e.is_disk_full() {
        BackendError::Storage(format!(
            "{e}; the write was refused and nothing acknowledged before it is lost; writes resume once space is freed"
        ))
    } else if matches!(e, searchd_collection::Error::ReadOnly(_)) {
        BackendError::Conflict(e.to_string())
    } else if matches!(e, searchd_collection::Error::Busy(_)) {
        BackendError::Overloaded(e.to_string())
    } else if e.is_input() {
        BackendError::Invalid(e.to_string())
    } else {
        BackendError::Internal(e.to_string())
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
    /// The filter's matching documents, when there is a filter.
    allow: Option<&'a Matches>,
    /// Trace what each segment does (`"explain": true`).
    explain: bool,
}

/// What [`Local::run`] found.
struct Found {
    hits: Vec<DocHit>,
    stages: StageTimes,
    lexical_truncated: bool,
    plan: Option<FilterPlan>,
    /// Per segment, when explaining a dense search.
    segments: Vec<SegmentRun>,
}

impl Local<'_> {
    /// The request's search parameters for `k` hits.
    fn params(&self, k: usize) -> SearchParams<'static> {
        let mut params = SearchParams::new(k, self.ef.max(k));
        params.deadline = Some(self.deadline);
        params.oversample = self.oversample;
        params
    }

    fn dense(
        &self,
        query: &[f32],
        k: usize,
        exclude: Option<DocRef>,
    ) -> Result<Found, BackendError> {
        let t = Instant::now();
        let mut segments = Vec::new();
        let (hits, plan) = self
            .coll
            .search_traced(
                query,
                &self.params(k),
                exclude,
                self.allow,
                self.explain.then_some(&mut segments),
            )
            .map_err(|e| storage_error(&e))?;
        Ok(Found {
            hits,
            stages: StageTimes {
                dense_us: micros(t),
                ..StageTimes::default()
            },
            lexical_truncated: false,
            plan,
            segments,
        })
    }

    fn run(&self, query: QueryInput) -> Result<Found, BackendError> {
        let coll = self.coll;
        let t = Instant::now();
        match query {
            QueryInput::Vector(v) => self.dense(&v, self.k, None),
            QueryInput::Row(m, i) => self.dense(m.row(i), self.k, None),
            QueryInput::Stored(id) => {
                let Some(r) = coll.lookup(&id) else {
                    return Err(not_found(coll, &id));
                };
                let v = match coll.vector(r) {
                    Ok(Some(v)) => v,
                    Ok(None) => return Err(not_found(coll, &id)),
                    Err(e) => return Err(storage_error(&e)),
                };
                self.dense(&v, self.k, Some(r))
            }
            QueryInput::Lexical(text) => {
                let allow = self.allow;
                let pass = move |d: DocRef| allow.is_none_or(|m| m.contains(d));
                let r = coll
                    .search_lexical(
                        &text,
                        self.k,
                        allow.map(|_| &pass as &(dyn Fn(DocRef) -> bool + Sync)),
                    )
                    .map_err(lexical_error)?;
                Ok(Found {
                    hits: r.hits,
                    stages: StageTimes {
                        lexical_us: micros(t),
                        ..StageTimes::default()
                    },
                    lexical_truncated: r.truncated,
                    plan: None,
                    segments: Vec::new(),
                })
            }
            QueryInput::Hybrid {
                text,
                vector,
                fusion,
                window,
            } => {
                let r = coll
                    .search_hybrid(
                        &text,
                        &vector,
                        &self.params(self.k),
                        &fusion,
                        window,
                        self.allow,
                    )
                    .map_err(|e| match e {
                        HybridError::Dense(e) => storage_error(&e),
                        HybridError::Lexical(e) => lexical_error(e),
                    })?;
                Ok(Found {
                    hits: r.hits.iter().map(|f| f.hit()).collect(),
                    stages: StageTimes {
                        dense_us: r.dense_us,
                        lexical_us: r.lexical_us,
                        fuse_us: r.fuse_us,
                    },
                    lexical_truncated: r.truncated,
                    plan: None,
                    segments: Vec::new(),
                })
            }
        }
    }
}

fn filter_error(e: FilterError) -> BackendError {
    BackendError::Invalid(e.to_string())
}

/// Evaluate a request's filter (`None`: no filter).
fn matches_of(coll: &Collection, filter: Option<&Filter>) -> Option<Matches> {
    filter.map(|f| coll.matches(f))
}

/// Check every facet's field before any work (a facet on a non-keyword field is a 400).
fn check_facets(coll: &Collection, facets: &[FacetSpec], path: &str) -> Result<(), BackendError> {
    let empty = Matches::of_docs(coll.segments().len(), std::iter::empty());
    for f in facets {
        coll.facet(&f.field, &empty, 0)
            .map_err(|e| BackendError::Invalid(format!("{path}: {}", e.message)))?;
    }
    Ok(())
}

fn facets_over(
    coll: &Collection,
    facets: &[FacetSpec],
    m: &Matches,
) -> Result<Vec<FacetOutput>, BackendError> {
    facets
        .iter()
        .map(|f| {
            let (buckets, other_count) = coll.facet(&f.field, m, f.size).map_err(filter_error)?;
            Ok(FacetOutput {
                name: f.name.clone(),
                field: f.field.clone(),
                buckets: buckets.into_iter().map(|b| (b.value, b.count)).collect(),
                other_count,
            })
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn search_local(
    coll: &Collection,
    query: QueryInput,
    k: usize,
    ef: usize,
    oversample: Option<f32>,
    deadline: Instant,
    fields: &FieldsWanted,
    filter: Option<&Filter>,
    facets: &[FacetSpec],
    explain: bool,
) -> Result<SearchOutput, BackendError> {
    check_facets(coll, facets, "facets")?;
    let allow = matches_of(coll, filter);
    let local = Local {
        coll,
        k,
        ef,
        oversample,
        deadline,
        allow: allow.as_ref(),
        explain,
    };
    let found = local.run(query)?;
    let facets = if facets.is_empty() {
        Vec::new()
    } else {
        let m = Matches::of_docs(coll.segments().len(), found.hits.iter().map(|h| h.doc));
        facets_over(coll, facets, &m)?
    };
    Ok(SearchOutput {
        hits: to_scored(coll, found.hits, fields)?,
        stages: found.stages,
        lexical_truncated: found.lexical_truncated,
        plan: found.plan.map(|p| p.to_string()),
        segments: found
            .segments
            .into_iter()
            .map(|r| SegmentExplain {
                id: r.name,
                candidates: r.candidates as u64,
                plan: r.plan.map(|p| p.to_string()),
            })
            .collect(),
        matched: allow.as_ref().map(|m| m.len()),
        facets,
    })
}

fn read_local(coll: &Collection, req: &ReadRequest) -> Result<ReadOutput, BackendError> {
    if req.from + req.size > MAX_RESULT_WINDOW {
        return Err(BackendError::Invalid(format!(
            "from + size must be at most {MAX_RESULT_WINDOW}, got {}; page deeper with a cursor (after / search_after)",
            req.from + req.size
        )));
    }
    check_facets(coll, &req.facets, "facets")?;
    let keys = &req.sort;
    let after = req.after.as_deref();
    let m = match matches_of(coll, req.filter.as_ref()) {
        Some(m) => m,
        None => coll.all(),
    };
    if Instant::now() >= req.deadline {
        return Err(BackendError::Deadline { started: true });
    }
    let page = coll.page(&m, keys, after, req.from, req.size);
    let full = page.len() == req.size && req.size > 0;
    let mut hits = Vec::with_capacity(page.len());
    for h in page {
        let id = coll
            .doc_id(h.doc)
            .cloned()
            .ok_or_else(|| BackendError::Internal(format!("hit {:?} has no id", h.doc)))?;
        let fields = match &req.fields {
            FieldsWanted::None => None,
            w => match coll.source(h.doc) {
                Ok(Some(src)) => select_fields(&src, w),
                Ok(None) => Some(b"{}".to_vec()),
                Err(e) => return Err(BackendError::Internal(e.to_string())),
            },
        };
        hits.push(SortedDoc {
            id,
            sort: h.sort.iter().map(|v| v.to_json()).collect(),
            fields,
        });
    }
    let next = if full {
        hits.last().map(|h| h.sort.clone())
    } else {
        None
    };
    Ok(ReadOutput {
        hits,
        next,
        total: req.total.then(|| m.len()),
        facets: facets_over(coll, &req.facets, &m)?,
    })
}

impl SearchBackend for LocalBackend {
    fn info(&self) -> serde_json::Value {
        let mut v = self.collection().info();
        if let (Some(l), Some(o)) = (self.live_collection(), v.as_object_mut()) {
            o.insert("live".into(), l.stats());
        }
        v
    }
    fn version(&self) -> u64 {
        self.collection().seq()
    }
    fn live_stats(&self) -> Option<serde_json::Value> {
        self.live_collection().map(|l| l.stats())
    }
    fn close(&self) {
        if let Some(l) = self.live_collection() {
            if let Err(e) = l.close() {
                tracing::error!(error = %e, "closing the live collection failed (its log keeps the writes)");
            }
        }
    }
    fn writer(&self) -> Option<Arc<LiveCollection>> {
        self.live_collection().cloned()
    }
    fn ready(&self) -> Result<(), String> {
        // Paused, its view may lack writes acknowledged while it was being closed.
        match &self.src {
            Source::Paused { why, .. } => Err(why.clone()),
            _ => Ok(()),
        }
    }
    fn write(&self, op: WriteOp, wait: bool) -> BoxFuture<'_, Result<Receipt, BackendError>> {
        let live = self.live_collection().cloned();
        let paused = self.paused_error();
        Box::pin(async move {
            if let Some(e) = paused {
                return Err(e);
            }
            let Some(live) = live else {
                return Err(BackendError::Conflict(
                    "this is a bare index directory, not a collection: it takes no writes (ingest it as a collection)".into(),
                ));
            };
            if let Some(r) = live.read_only_reason() {
                return Err(BackendError::Conflict(format!(
                    "the collection is read-only: {r}"
                )));
            }
            // Logging (and a sync) and refreshes block: off the I/O threads.
            tokio::task::spawn_blocking(move || {
                match op {
                    WriteOp::Upsert(docs) => live.upsert(docs, wait),
                    WriteOp::Delete(ids) => live.delete(ids, wait),
                    WriteOp::DeleteFilter(f) => live.delete_by_filter(&f, wait),
                }
                .map(Receipt::from)
                .map_err(write_error)
            })
            .await
            .map_err(|e| BackendError::Internal(format!("the write task failed: {e}")))?
        })
    }
    fn snapshot(&self, out: std::path::PathBuf) -> BoxFuture<'_, Result<u64, BackendError>> {
        let live = self.live_collection().cloned();
        let paused = self.paused_error();
        Box::pin(async move {
            if let Some(e) = paused {
                return Err(e);
            }
            let Some(live) = live else {
                return Err(BackendError::Conflict(
                    "this is a bare index directory, not a live collection: copy the directory instead".into(),
                ));
            };
            tokio::task::spawn_blocking(move || live.snapshot(&out).map_err(write_error))
                .await
                .map_err(|e| BackendError::Internal(format!("the snapshot task failed: {e}")))?
        })
    }
    fn figures(&self) -> (u64, usize, u64) {
        // Called on every search (for the dimension check): no JSON built here.
        let c = self.collection();
        (c.len() as u64, c.dim(), c.bytes())
    }
    fn model(&self) -> Option<ModelRecord> {
        self.collection().model().cloned()
    }
    fn schema(&self) -> Arc<Schema> {
        self.collection().shared_schema()
    }
    fn can_search_by_id(&self) -> Result<(), String> {
        if self.collection().has_vectors() {
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
        self.collection().check_lexical().map_err(|e| e.to_string())
    }
    fn text_field(&self) -> Option<String> {
        self.collection().manifest()?.text_field.clone()
    }
    fn search(&self, req: SearchRequest) -> BoxFuture<'_, Result<SearchOutput, BackendError>> {
        let coll = self.collection();
        Box::pin(async move {
            let SearchRequest {
                query,
                k,
                ef,
                oversample,
                fields,
                filter,
                facets,
                deadline,
                permit,
                explain,
            } = req;
            let out = self
                .pool
                .run(permit, deadline, move || {
                    search_local(
                        &coll,
                        query,
                        k,
                        ef,
                        oversample,
                        deadline,
                        &fields,
                        filter.as_ref(),
                        &facets,
                        explain,
                    )
                })
                .await;
            pool_outcome(out)
        })
    }
    fn read(&self, mut req: ReadRequest) -> BoxFuture<'_, Result<ReadOutput, BackendError>> {
        let coll = self.collection();
        Box::pin(async move {
            let permit = req.permit.take();
            let deadline = req.deadline;
            let out = self
                .pool
                .run(permit, deadline, move || read_local(&coll, &req))
                .await;
            pool_outcome(out)
        })
    }
    fn get(
        &self,
        id: DocId,
        fields: FieldsWanted,
    ) -> BoxFuture<'_, Result<Document, BackendError>> {
        let coll = self.collection();
        Box::pin(async move {
            let Some(r) = coll.lookup(&id) else {
                return Err(not_found(&coll, &id));
            };
            let doc_id = coll.doc_id(r).cloned().unwrap_or(id);
            let src = coll
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

/// A pool job's outcome as a backend result.
fn pool_outcome<T>(out: Result<Result<T, BackendError>, JobFailure>) -> Result<T, BackendError> {
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
}
