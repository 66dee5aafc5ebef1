//! Live collections: upserts and deletes through a write-ahead log, new documents in new
//! small segments, deletes as per-segment deleted sets, a background optimizer that merges
//! segments, commits that make it all durable, and snapshots.
//!
//! ```text
//! DIR/collection.json       the last commit: segments, their deleted sets, wal_seq (format 2)
//! DIR/wal/SEQ.log           the write-ahead log ([`crate::wal`]): operations after wal_seq
//! DIR/seg-NNNNNN/           immutable segments (as ingest writes them)
//! DIR/seg-NNNNNN/deleted-SEQ.bin   rows of the segment deleted or replaced (roaring, CRC32)
//! DIR/LOCK                  held (flock) by the one process that writes
//! ```
//!
//! The life of a write:
//! 1. **acknowledged**: the operation is appended to the log (and synced, per [`Fsync`])
//!    and kept in the pending list. It survives `kill -9` from here on.
//! 2. **applied** (a *refresh*, Elasticsearch's word): pending operations are collapsed
//!    (the last per id wins), the upserted documents written as one new segment (flat
//!    index while small), and every earlier copy of a written or deleted id marked deleted
//!    in its segment. A new view (an immutable [`Collection`]) is swapped in; searches that
//!    started on the old view finish on it. Refreshes run when a writer waits
//!    (`wait: true`), every [`LiveConfig::refresh_interval`], or when
//!    [`LiveConfig::refresh_docs`] are pending.
//! 3. **committed**: the optimizer thread syncs new segments and deleted sets, then writes
//!    the manifest (temp file, fsync, rename, fsync of the directory) with the view's
//!    sequence number, and drops the log files before it. Start-up opens the last commit
//!    and applies the log after it again, so replay is idempotent: an operation at or
//!    before `wal_seq` is never applied twice.
//!
//! The optimizer (a refresher thread for refreshes and commits, a merger thread whose index
//! builds use [`LiveConfig::optimizer_threads`])
//! merges small segments into larger ones (a graph once they pass
//! [`LiveConfig::flat_max`]), vacuums segments with many deleted rows, and commits. A
//! merge reads a view, builds the merged segment without any lock, then swaps it in,
//! carrying over rows deleted while it ran.

mod commit;
mod mapping;
mod merge_policy;
mod merger;
mod open;
mod ops;
mod optimizer;
mod refresh;
mod snapshot;
mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use searchd_docs::DocId;
use searchd_engine::LoadOptions;

use crate::collection::Collection;
use crate::error::Result;
use crate::manifest::{IdKind, Manifest, FORMAT_LIVE, SCHEMA};
use crate::segwrite::SegmentSpec;
use crate::wal::{Fsync, Recovery, Wal};

pub use crate::manifest::Dynamic;
pub use crate::segwrite::NewDoc as Doc;
pub use mapping::MappingChange;
pub use ops::{canonical_id, Op};
pub use optimizer::Event;
pub use snapshot::restore;

/// How a live collection behaves. Defaults in [`LiveConfig::default`].
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// When acknowledged writes are synced (default [`Fsync::None`]: survives `kill -9`).
    pub fsync: Fsync,
    /// Open without taking writes (409 for writes); also what a second process gets.
    pub read_only: bool,
    /// Writes not waited for become visible within this (default 1 s, as Elasticsearch).
    pub refresh_interval: Duration,
    /// A refresh runs as soon as this many documents are pending (default 10,000).
    pub refresh_docs: usize,
    /// Segments smaller than this get a flat (exact-scan) index (default 1,000). An exact
    /// scan reads every row: on 1M x 384 a 6,700-row flat segment cost each search more
    /// (1.5 ms) than the 1M graph walk (0.6 ms).
    pub flat_max: usize,
    /// Small segments merged together once this many exist (default 8).
    pub merge_factor: usize,
    /// Past this many segments, the smallest `merge_factor` are merged (default 12).
    pub max_segments: usize,
    /// A segment with at least this share of deleted rows is rewritten (default 0.3).
    pub vacuum_ratio: f64,
    /// The optimizer commits at least this often while there are changes (default 5 s).
    pub commit_interval: Duration,
    /// Threads of the optimizer's index builds (default 1: a bounded budget).
    pub optimizer_threads: usize,
    /// Graph builds of the merger run this much nicer (their index build threads inherit
    /// it), so they use idle cycles and searches keep theirs, except when the optimizer is
    /// behind (see [`LiveCollection::graph_merge_step`]) (default 10).
    pub optimizer_nice: i32,
    /// Run the optimizer thread (refreshes on interval, merges, commits). Tests turn it
    /// off to drive each step themselves.
    pub background: bool,
    /// What upserts do with top-level fields the mapping does not have (default
    /// [`Dynamic::True`], as Elasticsearch's `dynamic`).
    pub dynamic: Dynamic,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            fsync: Fsync::None,
            read_only: false,
            refresh_interval: Duration::from_secs(1),
            refresh_docs: 10_000,
            flat_max: 1_000,
            merge_factor: 8,
            max_segments: 12,
            vacuum_ratio: 0.3,
            commit_interval: Duration::from_secs(5),
            optimizer_threads: 1,
            optimizer_nice: 10,
            background: true,
            dynamic: Dynamic::True,
        }
    }
}

pub use crate::request::Receipt;

/// Counters of the writer and the optimizer, for `/stats`.
#[derive(Debug, Default)]
struct Counters {
    writes: AtomicU64,
    docs_upserted: AtomicU64,
    docs_deleted: AtomicU64,
    refreshes: AtomicU64,
    refresh_us: AtomicU64,
    merges: AtomicU64,
    merged_docs: AtomicU64,
    merge_us: AtomicU64,
    commits: AtomicU64,
    commit_us: AtomicU64,
    errors: AtomicU64,
    /// Writes refused by [`LiveCollection::throttle`].
    throttled: AtomicU64,
    merging: AtomicBool,
    merge_started_ms: AtomicU64,
}

struct Inner {
    wal: Wal,
    pending: Vec<(u64, Op)>,
    pending_docs: usize,
    /// Whether each id written by pending (or being refreshed) operations exists after them.
    pending_ids: HashMap<DocId, bool>,
    inflight_ids: HashMap<DocId, bool>,
    next_segment: u64,
    committed_seq: u64,
    /// Segments written by refreshes or merges and not yet synced.
    unsynced: Vec<String>,
    /// Segments merged away: removed from disk after the next commit.
    obsolete: Vec<String>,
    /// Segments a merge is reading now (by name): the refresher's flat merges and the
    /// merger's graph builds never pick the same one.
    claimed: Vec<String>,
    last_commit: Instant,
    last_error: Option<String>,
    /// The view's manifest changed without new operations (a mapping change): the next
    /// commit writes it even if nothing else changed.
    manifest_dirty: bool,
    /// Why building the indexes of fields added to the mapping stopped (a value that does
    /// not convert to the declared type); `None` while it runs or when it is done.
    fields_failed: Option<String>,
}

/// A collection that takes writes. `Send + Sync`; searches use [`LiveCollection::view`].
pub struct LiveCollection {
    dir: PathBuf,
    /// Where segments of a read-only process's replayed log go (never the collection).
    scratch: Option<open::tempdir::Scratch>,
    opts: LoadOptions,
    cfg: LiveConfig,
    spec: SegmentSpec,
    text_field: Option<String>,
    /// The kind of ids the collection was made with: ids in writes are put in its form
    /// ([`canonical_id`]), so `"777"` and `777` are one document.
    id_kind: IdKind,
    /// The mapping as it grows ([`Dynamic`]): fields added by upserts join it before their
    /// documents are logged; segments are written with it and views carry it.
    mapping: Mutex<Option<searchd_fields::Schema>>,
    /// The collection's dynamic setting, else the configuration's.
    dynamic: Dynamic,
    view: RwLock<Arc<Collection>>,
    inner: Mutex<Inner>,
    /// One refresh at a time (writers do not wait on it).
    refresh_lock: Mutex<()>,
    /// One optimizer step (merge or commit) at a time, and snapshots against deletions.
    gc_lock: Mutex<()>,
    applied: Mutex<u64>,
    applied_cv: Condvar,
    /// The last committed view and the manifest written for it: a deleted set whose
    /// bitmap is the same `Arc` as then keeps its file (commits run under `gc_lock`).
    committed: Mutex<Option<(Arc<Collection>, Manifest)>>,
    /// Shared with the optimizer threads, which wait on them without holding the collection.
    wake: Arc<(Mutex<bool>, Condvar)>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Vec<std::thread::JoinHandle<()>>>,
    counters: Counters,
    /// The optimizer's recent steps with wall-clock times (`/stats` `live.events`), so a
    /// latency series can be set against what the background threads were doing.
    events: Mutex<std::collections::VecDeque<Event>>,
    recovery: Recovery,
    read_only_reason: Option<String>,
    _lock: Option<std::fs::File>,
}

/// How long a write waits for the optimizer before it is refused ([`LiveCollection::throttle`]).
pub const WRITE_STALL: Duration = Duration::from_secs(1);

/// Most optimizer steps kept for `/stats` (`live.events`).
pub const MAX_EVENTS: usize = 512;

/// The view's segment names, in segment order.
fn seg_names(v: &Collection) -> Vec<String> {
    v.manifest
        .as_ref()
        .map(|m| m.segments.iter().map(|s| s.name.clone()).collect())
        .unwrap_or_default()
}

/// Rows of segment `i` of `v` not deleted.
fn alive_rows(v: &Collection, i: usize) -> usize {
    v.live_rows(i)
        .map_or(v.segments[i].len(), |b| b.len() as usize)
}

impl LiveCollection {
    fn lock_inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current view: an immutable collection that searches run on.
    pub fn view(&self) -> Arc<Collection> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
    /// Swap in a new view; returns the old one. The caller drops it after the write lock
    /// is released (it is, on return): unmapping and freeing the segments a merge replaced
    /// must not block the searches that read the view.
    fn set_view(&self, c: Collection) -> Arc<Collection> {
        let new = Arc::new(c);
        std::mem::replace(
            &mut *self.view.write().unwrap_or_else(|p| p.into_inner()),
            new,
        )
    }
    /// The collection's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// Whether writes are refused (see [`LiveCollection::read_only_reason`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only_reason.is_some()
    }
    /// Why writes are refused, if they are.
    pub fn read_only_reason(&self) -> Option<&str> {
        self.read_only_reason.as_deref()
    }
    /// What start-up found in the write-ahead log.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }
    /// The configuration it was opened with.
    pub fn config(&self) -> &LiveConfig {
        &self.cfg
    }

    fn lock_mapping(&self) -> std::sync::MutexGuard<'_, Option<searchd_fields::Schema>> {
        self.mapping.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The segment spec with the mapping as it is now.
    fn spec_now(&self) -> SegmentSpec {
        let mut spec = self.spec.clone();
        if let (Some(f), Some(m)) = (spec.fields.as_mut(), self.lock_mapping().as_ref()) {
            f.declared = m.fields.iter().map(|f| (f.name.clone(), f.ty)).collect();
        }
        spec
    }

    /// The mapping as it is now (the view's may be older).
    pub fn mapping(&self) -> Option<searchd_fields::Schema> {
        self.lock_mapping().clone()
    }

    /// The last sequence number visible to searches.
    pub fn applied_seq(&self) -> u64 {
        *self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake_optimizer(&self) {
        let (m, cv) = &*self.wake;
        *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_one();
    }

    /// Refresh and commit, and stop the optimizer (at shutdown).
    pub fn close(&self) -> Result<()> {
        self.stop.store(true, Relaxed);
        self.wake_optimizer();
        let mut hs = std::mem::take(&mut *self.thread.lock().unwrap_or_else(|p| p.into_inner()));
        // Join the refresher; a merge in progress is left to finish or die with the
        // process: its segment is not in any committed manifest until a commit lists it,
        // so the state on disk stays the one committed here.
        if !hs.is_empty() {
            let _ = hs.remove(0).join();
        }
        if self.is_read_only() {
            return Ok(());
        }
        self.refresh()?;
        self.commit()
    }

    /// What `/stats` shows of the writer and the optimizer.
    pub fn stats(&self) -> serde_json::Value {
        let view = self.view();
        let inner = self.lock_inner();
        let c = &self.counters;
        serde_json::json!({
            "read_only": self.read_only_reason,
            "fsync": self.cfg.fsync.name(),
            "seq": {"logged": inner.wal.next_seq() - 1, "applied": view.seq, "committed": inner.committed_seq},
            "pending": {"ops": inner.pending.len(), "docs": inner.pending_docs},
            "wal": {"files": inner.wal.files(), "bytes": inner.wal.bytes(), "syncs": inner.wal.group().syncs()},
            "segments": view.segments.iter().enumerate().map(|(i, s)| serde_json::json!({
                "docs": s.len(),
                "deleted": s.len() - alive_rows(&view, i),
                "index": s.index.info().kind,
            })).collect::<Vec<_>>(),
            "writes": c.writes.load(Relaxed),
            "docs_upserted": c.docs_upserted.load(Relaxed),
            "docs_deleted": c.docs_deleted.load(Relaxed),
            "refreshes": c.refreshes.load(Relaxed),
            "refresh_seconds": c.refresh_us.load(Relaxed) as f64 / 1e6,
            "optimizer": {
                "merging": c.merging.load(Relaxed),
                "merges": c.merges.load(Relaxed),
                "merged_docs": c.merged_docs.load(Relaxed),
                "merge_seconds": c.merge_us.load(Relaxed) as f64 / 1e6,
                "commits": c.commits.load(Relaxed),
                "commit_seconds": c.commit_us.load(Relaxed) as f64 / 1e6,
                "threads": self.cfg.optimizer_threads,
            },
            "errors": c.errors.load(Relaxed),
            "throttled_writes": c.throttled.load(Relaxed),
            "last_error": inner.last_error,
            "events": self.events(),
            "fields_build": mapping::build_stats(&view, inner.fields_failed.as_deref()),
            "recovery": self.recovery,
        })
    }
}

impl Drop for LiveCollection {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

fn unreachable_manifest() -> Manifest {
    // A live collection always has a manifest (open checks it); this keeps the code total.
    Manifest {
        schema: SCHEMA.into(),
        format: FORMAT_LIVE,
        name: String::new(),
        dim: 0,
        metric: "cosine".into(),
        docs: 0,
        id_kind: IdKind::Int,
        text_field: None,
        model: None,
        fields: Vec::new(),
        mapping: None,
        segments: Vec::new(),
        wal_seq: 0,
        next_segment: 0,
        ingest: serde_json::Value::Null,
        dynamic: None,
        building: Vec::new(),
        crc32: None,
    }
}
