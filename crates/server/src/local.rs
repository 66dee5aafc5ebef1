//! searchd's own engine behind the seam: [`LocalBackend`] answers each
//! [`SearchBackend`] call over a [`Collection`] (fixed, or a live collection's current
//! view) on the CPU pool.

use std::sync::Arc;

use searchd_collection::live::LiveCollection;
use searchd_collection::{Collection, DocId, ModelRecord};
use searchd_fields::Schema;

use crate::backend::{
    BackendError, BoxFuture, Document, FieldsWanted, ReadOutput, ReadRequest, Receipt,
    SearchBackend, SearchOutput, SearchRequest, WriteOp,
};
use crate::pool::{JobFailure, Pool};

/// searchd's own engine: a [`Collection`] searched on the CPU pool.
pub struct LocalBackend {
    src: Source,
    pool: Arc<Pool>,
    /// The directory's canonical path, found once (for [`SearchBackend::shared_key`]).
    root: std::sync::OnceLock<String>,
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
    /// A fixed (read-only) collection searched on `pool`.
    pub fn new(coll: Arc<Collection>, pool: Arc<Pool>) -> LocalBackend {
        LocalBackend {
            src: Source::Fixed(coll),
            pool,
            root: std::sync::OnceLock::new(),
        }
    }
    /// A live collection: each request runs on the view current when it starts.
    pub fn live(live: Arc<LiveCollection>, pool: Arc<Pool>) -> LocalBackend {
        LocalBackend {
            src: Source::Live(live),
            pool,
            root: std::sync::OnceLock::new(),
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
            root: std::sync::OnceLock::new(),
        }
    }
    /// The collection as searches see it now.
    pub fn collection(&self) -> Arc<Collection> {
        match &self.src {
            Source::Fixed(c) | Source::Paused { view: c, .. } => c.clone(),
            Source::Live(l) => l.view(),
        }
    }
    /// The live collection, if this backend serves one (`None` when fixed or paused).
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
    /// The directory (canonical) and the sequence number of the view: a process serving the
    /// same directory read-only at the same sequence number answers from the same data.
    fn shared_key(&self) -> Option<String> {
        let view = self.collection();
        let root = self.root.get_or_init(|| {
            let dir = view.dir();
            dir.canonicalize()
                .unwrap_or_else(|_| dir.to_path_buf())
                .display()
                .to_string()
        });
        Some(format!("local:{root}@{}", view.seq()))
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
            let SearchRequest { search, permit } = req;
            let deadline = search.deadline;
            let out = self
                .pool
                .run(permit, deadline, move || {
                    coll.query(search).map_err(BackendError::from)
                })
                .await;
            pool_outcome(out)
        })
    }
    fn read(&self, req: ReadRequest) -> BoxFuture<'_, Result<ReadOutput, BackendError>> {
        let coll = self.collection();
        Box::pin(async move {
            let ReadRequest { page, permit } = req;
            let deadline = page.deadline;
            let out = self
                .pool
                .run(permit, deadline, move || {
                    coll.read(&page).map_err(BackendError::from)
                })
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
        Box::pin(async move { coll.document(id, &fields).map_err(BackendError::from) })
    }
}

/// A pool job's outcome as a backend result.
fn pool_outcome<T>(out: Result<Result<T, BackendError>, JobFailure>) -> Result<T, BackendError> {
    match out {
        Ok(r) => r,
        Err(JobFailure::NotStarted) => Err(BackendError::Deadline { started: false }),
        Err(JobFailure::Overran) => Err(BackendError::Deadline { started: true }),
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
