//! The live documents of a collection, for copying them out (`searchd ingest --docs
//! COLL_DIR --to qdrant://...`, or any other export): every document the collection holds
//! now, once, as its last acknowledged write left it.
//!
//! A segment's rows are not that. Rows deleted or replaced since the segment was written
//! are still in it (its deleted set marks them, [`Collection::live_rows`]), and writes
//! acknowledged since the last commit are only in the write-ahead log. Reading rows with
//! [`Collection::source`] / [`Collection::vector`] row by row brings deleted documents back
//! and the old payload of a replaced one, and misses what only the log holds.
//!
//! [`LiveDocs::open`] opens a collection directory the way a reader does: a read-only
//! [`LiveCollection`] (the last commit, then the log after it applied into a scratch
//! directory; it takes no lock, so it reads a directory a server is writing to) whose view
//! is the current state, and [`LiveDocs::get`] / [`LiveDocs::iter`] read only the rows alive
//! in that view. A writer may commit meanwhile; a commit drops the log files before its
//! sequence number and the segments merged away. The open reads the manifest, then the
//! segments, then the log, so a commit in between can leave it without operations it needed
//! (a gap between the manifest's `wal_seq` and the first operation left in the log: the
//! count of operations replayed falls short of the sequence numbers they span) or without a
//! file (the open fails); either way it is opened again. Once opened, segment files stay
//! readable (mapped, or read into memory) whatever the writer removes.

use std::path::Path;
use std::sync::Arc;

use searchd_docs::DocId;
use searchd_engine::{LoadOptions, SearchError};

use crate::collection::{is_collection, Collection};
use crate::error::{Error, Result};
use crate::live::{LiveCollection, LiveConfig};
use crate::manifest::MANIFEST;
use crate::rows::DocRef;

/// Opens of [`LiveDocs::open`] before it gives up on a directory whose writer keeps
/// committing.
const OPEN_ATTEMPTS: usize = 5;

/// One live document as it is exported.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveDoc {
    /// Where it lives in the view.
    pub doc: DocRef,
    /// The document's own id.
    pub id: DocId,
    /// The stored vector (unit length under cosine).
    pub vector: Vec<f32>,
    /// The stored fields (the JSON object bytes); `None` for a bare index.
    pub source: Option<Vec<u8>>,
}

impl Collection {
    /// The rows alive in this view (not deleted, not replaced by a later write), segment by
    /// segment in row order: each document the view holds, once.
    pub fn live_refs(&self) -> impl Iterator<Item = DocRef> + '_ {
        self.segments.iter().enumerate().flat_map(move |(i, seg)| {
            let rows: Box<dyn Iterator<Item = u64> + '_> = match self.live_rows(i) {
                None => Box::new(0..seg.len() as u64),
                Some(b) => Box::new(b.iter().map(u64::from)),
            };
            rows.map(move |row| DocRef {
                segment: i as u32,
                row,
            })
        })
    }

    /// The document at `r` as it is exported: id, stored vector, stored fields. An error
    /// when `r` is not alive or its vector cannot be read.
    pub fn live_doc(&self, r: DocRef) -> Result<LiveDoc> {
        if !self.is_live(r) {
            return Err(Error::Input(format!(
                "row {} of segment {} is not a live document",
                r.row, r.segment
            )));
        }
        let id = self
            .doc_id(r)
            .cloned()
            .ok_or_else(|| Error::format(&self.dir, format!("row {r:?} has no id")))?;
        let vector = match self.vector(r) {
            Ok(Some(v)) => v.into_owned(),
            Ok(None) => {
                return Err(Error::format(
                    &self.dir,
                    format!("document {id} has no stored vector"),
                ))
            }
            Err(SearchError::NoVectors) => {
                return Err(Error::Input(format!(
                    "{}: the vectors were not opened (--vectors none); an export needs them",
                    self.dir.display()
                )))
            }
            Err(e) => {
                return Err(Error::io(
                    &self.dir,
                    std::io::Error::other(format!("the vector of document {id}: {e}")),
                ))
            }
        };
        Ok(LiveDoc {
            doc: r,
            id,
            vector,
            source: self.source(r)?,
        })
    }
}

/// The live documents of one view of a collection, addressable by position (`0..len`), so
/// an export can cut them into batches. `Send + Sync`.
pub struct LiveDocs {
    view: Arc<Collection>,
    /// Alive rows before each segment, then the total.
    starts: Vec<u64>,
    /// Keeps the segments replayed from the log (in its scratch directory) while the view
    /// is read.
    _live: Option<Arc<LiveCollection>>,
}

impl std::fmt::Debug for LiveDocs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveDocs")
            .field("dir", &self.view.dir())
            .field("docs", &self.len())
            .finish()
    }
}

impl LiveDocs {
    /// The current state of the collection in `dir`: its last commit, the deleted sets, and
    /// the write-ahead log after the commit (see the module doc). `dir` may be served and
    /// written to by another process meanwhile; the result is the state at one point of
    /// its log.
    pub fn open(dir: &Path, opts: &LoadOptions) -> Result<LiveDocs> {
        let cfg = LiveConfig {
            read_only: true,
            background: false,
            // The log's documents go into one flat segment: nothing here searches them,
            // and a graph build would only cost time.
            flat_max: usize::MAX,
            ..LiveConfig::default()
        };
        if !is_collection(dir) {
            return Err(Error::Input(format!(
                "{} is not a collection directory (no {})",
                dir.display(),
                MANIFEST
            )));
        }
        // What the last attempt met: an open that failed (a file a commit dropped while it
        // was being read, or a real fault, which every attempt then meets again), or a log
        // with a gap after the commit it opened.
        let mut last = Error::Input(String::new());
        for attempt in 0..OPEN_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(20 << attempt));
            }
            match LiveCollection::open(dir, opts, cfg.clone()) {
                Ok(live) => {
                    let view = live.view();
                    let committed = view.manifest().map_or(0, |m| m.wal_seq);
                    // Sequence numbers are consecutive: the operations after the commit
                    // were all replayed exactly when their count spans the commit's
                    // sequence number to the view's.
                    let replayed = live.recovery().replayed;
                    if replayed == view.seq().saturating_sub(committed) {
                        return Ok(LiveDocs::with(view, Some(live)));
                    }
                    last = Error::Input(format!(
                        "{}: the write-ahead log after the commit at sequence number {committed} \
                         holds {replayed} of the {} operations up to {}: the others were dropped \
                         (by a writer's commit while it was read, {OPEN_ATTEMPTS} times); take a \
                         snapshot (POST /collections/NAME/snapshot) and read that",
                        dir.display(),
                        view.seq() - committed,
                        view.seq()
                    ));
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The live documents of `view`, which must be the current state itself: a
    /// [`LiveCollection::view`] (kept alive by the caller), or a collection that never took
    /// writes. A [`Collection::open`] of a directory with a write-ahead log is not (it has
    /// the last commit without the log): use [`LiveDocs::open`].
    pub fn of_view(view: Arc<Collection>) -> LiveDocs {
        LiveDocs::with(view, None)
    }

    fn with(view: Arc<Collection>, live: Option<Arc<LiveCollection>>) -> LiveDocs {
        let mut starts = Vec::with_capacity(view.segments.len() + 1);
        let mut n = 0u64;
        for (i, seg) in view.segments.iter().enumerate() {
            starts.push(n);
            n += view.live_rows(i).map_or(seg.len() as u64, |b| b.len());
        }
        starts.push(n);
        LiveDocs {
            view,
            starts,
            _live: live,
        }
    }

    /// The view the documents are read from (its manifest, mapping, model, dim, metric).
    pub fn collection(&self) -> &Arc<Collection> {
        &self.view
    }

    /// Live documents.
    pub fn len(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Whether no document is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the `i`-th live document is (`i < len`).
    pub fn doc_ref(&self, i: u64) -> Option<DocRef> {
        if i >= self.len() {
            return None;
        }
        // The last segment starting at or before i that has rows.
        let s = self.starts.partition_point(|&st| st <= i) - 1;
        let k = i - self.starts[s];
        let row = match self.view.live_rows(s) {
            None => k,
            Some(b) => u64::from(b.select(u32::try_from(k).ok()?)?),
        };
        Some(DocRef {
            segment: s as u32,
            row,
        })
    }

    /// The `i`-th live document.
    pub fn get(&self, i: u64) -> Result<LiveDoc> {
        let r = self.doc_ref(i).ok_or_else(|| {
            Error::Input(format!(
                "live document {i} out of range ({} documents)",
                self.len()
            ))
        })?;
        self.view.live_doc(r)
    }

    /// Every live document, in order.
    pub fn iter(&self) -> impl Iterator<Item = Result<LiveDoc>> + '_ {
        self.view.live_refs().map(|r| self.view.live_doc(r))
    }
}
