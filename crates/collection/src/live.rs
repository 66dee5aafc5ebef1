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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use searchd_docs::DocId;
use searchd_engine::roaring::RoaringBitmap;
use searchd_engine::{BuildConfig, IndexKind, LoadOptions, Metric, Quantization};

use crate::collection::{is_collection, Collection};
use crate::error::{Error, Result};
use crate::files::sync_tree;
use crate::files::FileMeta;
use crate::manifest::{IdKind, Manifest, FORMAT_LIVE, MANIFEST, SCHEMA};
use crate::rows::DocRef;
use crate::segment::Segment;
use crate::segwrite::{write_segment, NewDoc, SegmentSpec};
use crate::validate::{add_fields, check_docs, check_fields, DocRules};
use crate::wal::{Fsync, Recovery, Wal};

pub use crate::manifest::Dynamic;
pub use crate::segwrite::NewDoc as Doc;

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

/// One logged operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Upsert(Vec<NewDoc>),
    Delete(Vec<DocId>),
}

const OP_UPSERT: u8 = 1;
const OP_DELETE: u8 = 2;

fn put_id(b: &mut Vec<u8>, id: &DocId) {
    match id {
        DocId::Int(v) => {
            b.push(0);
            b.extend_from_slice(&v.to_le_bytes());
        }
        DocId::Str(s) => {
            b.push(1);
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        }
    }
}

impl Op {
    /// The log payload of the operation.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Op::Upsert(docs) => {
                b.push(OP_UPSERT);
                b.extend_from_slice(&(docs.len() as u32).to_le_bytes());
                for d in docs {
                    put_id(&mut b, &d.id);
                    b.extend_from_slice(&(d.vector.len() as u32).to_le_bytes());
                    for x in &d.vector {
                        b.extend_from_slice(&x.to_le_bytes());
                    }
                    b.extend_from_slice(&(d.source.len() as u32).to_le_bytes());
                    b.extend_from_slice(&d.source);
                }
            }
            Op::Delete(ids) => {
                b.push(OP_DELETE);
                b.extend_from_slice(&(ids.len() as u32).to_le_bytes());
                for id in ids {
                    put_id(&mut b, id);
                }
            }
        }
        b
    }

    /// Decode a payload; `text_field` names the stored field the lexical index gets.
    pub fn decode(b: &[u8], text_field: Option<&str>) -> std::result::Result<Op, String> {
        struct R<'a>(&'a [u8]);
        impl R<'_> {
            fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
                if self.0.len() < n {
                    return Err("truncated operation".into());
                }
                let (a, rest) = self.0.split_at(n);
                self.0 = rest;
                Ok(a)
            }
            fn u32(&mut self) -> std::result::Result<u32, String> {
                Ok(u32::from_le_bytes(
                    self.take(4)?.try_into().unwrap_or_default(),
                ))
            }
            fn id(&mut self) -> std::result::Result<DocId, String> {
                match self.take(1)?[0] {
                    0 => Ok(DocId::Int(u64::from_le_bytes(
                        self.take(8)?.try_into().unwrap_or_default(),
                    ))),
                    1 => {
                        let n = self.u32()? as usize;
                        String::from_utf8(self.take(n)?.to_vec())
                            .map(DocId::Str)
                            .map_err(|_| "an id is not UTF-8".to_string())
                    }
                    t => Err(format!("unknown id tag {t}")),
                }
            }
        }
        let mut r = R(b);
        let kind = r.take(1)?[0];
        let n = r.u32()? as usize;
        match kind {
            OP_UPSERT => {
                let mut docs = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    let id = r.id()?;
                    let dim = r.u32()? as usize;
                    let raw = r.take(dim * 4)?;
                    let vector = raw
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    let sl = r.u32()? as usize;
                    let source = r.take(sl)?.to_vec();
                    let text = text_of(&source, text_field);
                    docs.push(NewDoc {
                        id,
                        vector,
                        text,
                        source,
                    });
                }
                Ok(Op::Upsert(docs))
            }
            OP_DELETE => {
                let mut ids = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    ids.push(r.id()?);
                }
                Ok(Op::Delete(ids))
            }
            k => Err(format!("unknown operation kind {k}")),
        }
    }
}

/// The text field's string value in a stored JSON object.
pub(crate) fn text_of(source: &[u8], text_field: Option<&str>) -> Option<String> {
    let f = text_field?;
    let v: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(source).ok()?;
    match v.get(f) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Receipt {
    /// The operation's sequence number in the log (0: nothing was logged).
    pub seq: u64,
    /// Visible to searches when the call returned (`wait`).
    pub applied: bool,
    /// Deletes: ids that did not exist (not an error).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_found: Vec<DocId>,
    /// Deletes: ids that existed and are now deleted.
    pub deleted: u64,
    /// Upserts: documents written.
    pub upserted: u64,
}

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
}

/// A collection that takes writes. `Send + Sync`; searches use [`LiveCollection::view`].
pub struct LiveCollection {
    dir: PathBuf,
    /// Where segments of a read-only process's replayed log go (never the collection).
    scratch: Option<tempdir::Scratch>,
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

/// One step of a refresh, merge or commit, timed by phase.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Event {
    /// `refresh`, `flat_merge`, `graph_merge` or `commit`.
    pub kind: &'static str,
    /// When it started, Unix time in milliseconds.
    pub start_unix_ms: u64,
    /// Its whole duration, milliseconds.
    pub ms: f64,
    /// Documents written (refreshes and merges).
    pub docs: u64,
    /// Segments read (merges).
    #[serde(skip_serializing_if = "is_zero")]
    pub segments: usize,
    /// The niceness the step ran at (graph merges).
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub nice: i32,
    /// Milliseconds per phase, in order (`read`, `write`, `open`, `swap`, `sync`, ...).
    pub phases: Vec<(&'static str, f64)>,
}

fn is_zero(x: &usize) -> bool {
    *x == 0
}
fn is_zero_i32(x: &i32) -> bool {
    *x == 0
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Times the phases of one optimizer step.
struct Timer {
    start: Instant,
    start_unix_ms: u64,
    last: Instant,
    phases: Vec<(&'static str, f64)>,
}

impl Timer {
    fn new() -> Timer {
        let now = Instant::now();
        Timer {
            start: now,
            start_unix_ms: unix_ms(),
            last: now,
            phases: Vec::new(),
        }
    }
    /// The phase that ends now.
    fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.phases
            .push((name, (now - self.last).as_secs_f64() * 1e3));
        self.last = now;
    }
    fn event(self, kind: &'static str, docs: u64, segments: usize, nice: i32) -> Event {
        Event {
            kind,
            start_unix_ms: self.start_unix_ms,
            ms: self.start.elapsed().as_secs_f64() * 1e3,
            docs,
            segments,
            nice,
            phases: self.phases,
        }
    }
}

mod tempdir {
    use std::path::{Path, PathBuf};
    /// A private directory removed on drop.
    pub struct Scratch(PathBuf);
    impl Scratch {
        pub fn new() -> std::io::Result<Scratch> {
            let base = std::env::temp_dir();
            for i in 0..1000u32 {
                let p = base.join(format!("searchd-replay-{}-{i}", std::process::id()));
                if std::fs::create_dir(&p).is_ok() {
                    return Ok(Scratch(p));
                }
            }
            Err(std::io::Error::other("no scratch directory could be made"))
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn write_deleted(sdir: &Path, seq: u64, live: &RoaringBitmap, rows: usize) -> Result<FileMeta> {
    let mut deleted = RoaringBitmap::new();
    deleted.insert_range(0..rows as u32);
    deleted -= live;
    let mut b = Vec::with_capacity(deleted.serialized_size());
    deleted
        .serialize_into(&mut b)
        .map_err(|e| Error::io(sdir, e))?;
    let name = format!("deleted-{seq:020}.bin");
    let p = sdir.join(&name);
    let tmp = sdir.join(format!("{name}.tmp"));
    {
        let f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        use std::io::Write;
        (&f).write_all(&b).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::rename(&tmp, &p).map_err(|e| Error::io(&p, e))?;
    Ok(FileMeta {
        name,
        bytes: b.len() as u64,
        crc32: crc32fast::hash(&b),
    })
}

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

fn write_manifest(dir: &Path, m: &Manifest) -> Result<()> {
    let path = dir.join(MANIFEST);
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    {
        let f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        use std::io::Write;
        (&f).write_all(&m.to_bytes())
            .map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    }
    crate::failpoint::hit("commit.before_manifest_rename");
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    crate::files::sync_dir(dir);
    Ok(())
}

fn spec_of(
    m: &Manifest,
    cfg: &LiveConfig,
    analyzer: Option<searchd_lexical::Analyzer>,
) -> SegmentSpec {
    let ix = &m.ingest["index"];
    let mut build = BuildConfig {
        metric: Metric::parse(&m.metric).unwrap_or(Metric::Cosine),
        threads: cfg.optimizer_threads.max(1),
        ..BuildConfig::default()
    };
    if let Some(k) = ix["kind"].as_str().and_then(IndexKind::parse) {
        build.kind = k;
    }
    if build.kind == IndexKind::Flat {
        // A collection built flat stays exact as it grows.
        build.kind = IndexKind::Flat;
    }
    if let Some(q) = ix["quantization"].as_str().and_then(Quantization::parse) {
        build.quantization = q;
    }
    if let Some(v) = ix["m"].as_u64() {
        build.hnsw.m = v as usize;
    }
    if let Some(v) = ix["ef_construction"].as_u64() {
        build.hnsw.ef_construction = v as usize;
    }
    let fields = m.mapping.as_ref().map(|s| searchd_fields::FieldsConfig {
        declared: s.fields.iter().map(|f| (f.name.clone(), f.ty)).collect(),
        skip: m.text_field.iter().cloned().collect(),
    });
    SegmentSpec {
        dim: m.dim,
        build,
        flat_max: cfg.flat_max,
        lexical: analyzer.map(|a| searchd_lexical::LexicalConfig {
            analyzer: a,
            writer_heap_bytes: searchd_lexical::MIN_HEAP_BYTES_PER_THREAD,
            threads: 1,
        }),
        fields,
    }
}

/// Remove what a killed process left: temp files and directories, segment directories no
/// manifest lists, deleted sets no manifest lists.
fn clean_leftovers(dir: &Path, m: &Manifest) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let listed: std::collections::HashSet<&str> =
        m.segments.iter().map(|s| s.name.as_str()).collect();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let stale = name.ends_with(".tmp")
            || name.contains(".tmp-")
            || (name.starts_with("seg-") && !listed.contains(name.as_str()));
        if stale {
            let r = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            r.map_err(|e| Error::io(&path, e))?;
            removed.push(path);
        }
    }
    for s in &m.segments {
        let sdir = dir.join(&s.name);
        let Ok(rd) = std::fs::read_dir(&sdir) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("deleted-") && s.deleted.as_ref().is_none_or(|d| d.name != name) {
                let _ = std::fs::remove_file(e.path());
                removed.push(e.path());
            }
        }
    }
    Ok(removed)
}

impl LiveCollection {
    /// Open the collection in `dir` for writing (or read-only): the last commit, then the
    /// log after it applied again. A second process on the same directory opens it
    /// read-only (the first holds `DIR/LOCK`).
    ///
    /// When applying the log fails because the disk is full, the collection opens read-only
    /// instead, the log's operations applied in a scratch directory (as a second process
    /// does): reads see every acknowledged write, writes are refused until a restart with
    /// free space.
    pub fn open(dir: &Path, opts: &LoadOptions, cfg: LiveConfig) -> Result<Arc<LiveCollection>> {
        match Self::open_with(dir, opts, cfg.clone(), None) {
            Err(e) if e.is_disk_full() && !cfg.read_only => {
                tracing::warn!(error = %e, "the disk is full: the write-ahead log is applied in a scratch directory and the collection served read-only");
                let why = format!(
                    "the disk was full when the write-ahead log was applied ({e}); every acknowledged write is served from a scratch copy, writes are refused until a restart with free space"
                );
                Self::open_with(
                    dir,
                    opts,
                    LiveConfig {
                        read_only: true,
                        ..cfg
                    },
                    Some(why),
                )
            }
            r => r,
        }
    }

    fn open_with(
        dir: &Path,
        opts: &LoadOptions,
        cfg: LiveConfig,
        read_only_why: Option<String>,
    ) -> Result<Arc<LiveCollection>> {
        if !is_collection(dir) {
            return Err(Error::Input(format!(
                "{} is not a collection directory (no {MANIFEST})",
                dir.display()
            )));
        }
        let mut read_only_reason = cfg
            .read_only
            .then(|| read_only_why.unwrap_or_else(|| "opened with --read-only".to_string()));
        let mut lock = None;
        if read_only_reason.is_none() {
            let p = dir.join("LOCK");
            match std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&p)
            {
                Ok(f) => match f.try_lock() {
                    Ok(()) => lock = Some(f),
                    Err(_) => {
                        read_only_reason = Some(format!(
                            "another process holds {} (it takes the writes); this one serves it read-only",
                            p.display()
                        ))
                    }
                },
                Err(e) => {
                    read_only_reason = Some(format!("{}: {e}; serving read-only", p.display()))
                }
            }
        }
        let read_only = read_only_reason.is_some();
        let manifest = Manifest::read(dir)?;
        if !read_only {
            let removed = clean_leftovers(dir, &manifest)?;
            if !removed.is_empty() {
                tracing::info!(
                    removed = removed.len(),
                    "removed files a stopped process left (temp files, uncommitted segments)"
                );
            }
        }
        let coll = Collection::open(dir, opts)?;
        let mut cfg = cfg;
        cfg.read_only = read_only;
        if !read_only && !coll.has_vectors() {
            read_only_reason = Some(
                "the collection's float vectors are not loaded (--vectors none): merges need them; serving read-only"
                    .into(),
            );
        }
        let read_only = read_only_reason.is_some();
        let (wal, replay, recovery) =
            Wal::open(&dir.join("wal"), manifest.wal_seq, cfg.fsync, read_only)?;
        if let Some(cut) = &recovery.cut {
            tracing::warn!(cut = %cut, "write-ahead log: cut at the last good record");
        }
        let text_field = manifest.text_field.clone();
        let mut pending = Vec::with_capacity(replay.len());
        let mut pending_docs = 0;
        for (seq, payload) in &replay {
            let op = Op::decode(payload, text_field.as_deref()).map_err(|e| {
                Error::format(
                    dir.join("wal"),
                    format!("operation {seq} cannot be read: {e}"),
                )
            })?;
            if let Op::Upsert(d) = &op {
                pending_docs += d.len();
            }
            pending.push((*seq, op));
        }
        let spec = spec_of(&manifest, &cfg, coll.analyzer());
        // The log's upserts were checked against the mapping as it grew; growing it again
        // in log order gives the same types.
        let mut mapping = manifest.mapping.clone();
        let dynamic = manifest.dynamic.unwrap_or(cfg.dynamic);
        if dynamic == Dynamic::True {
            if let Some(m) = mapping.as_mut() {
                for (_, op) in &pending {
                    if let Op::Upsert(docs) = op {
                        let (_, new) = check_fields(m, manifest.text_field.as_deref(), docs);
                        add_fields(m, new);
                    }
                }
            }
        }
        let scratch = if read_only && !pending.is_empty() {
            Some(tempdir::Scratch::new().map_err(|e| Error::io(std::env::temp_dir(), e))?)
        } else {
            None
        };
        let seq0 = coll.seq();
        let live = Arc::new(LiveCollection {
            dir: dir.to_path_buf(),
            scratch,
            opts: *opts,
            spec,
            text_field,
            id_kind: manifest.id_kind,
            mapping: Mutex::new(mapping),
            dynamic,
            view: RwLock::new(Arc::new(coll)),
            inner: Mutex::new(Inner {
                wal,
                pending,
                pending_docs,
                pending_ids: HashMap::new(),
                inflight_ids: HashMap::new(),
                next_segment: manifest.next_segment.max(manifest.segments.len() as u64),
                committed_seq: manifest.wal_seq,
                unsynced: Vec::new(),
                obsolete: Vec::new(),
                claimed: Vec::new(),
                last_commit: Instant::now(),
                last_error: None,
            }),
            refresh_lock: Mutex::new(()),
            gc_lock: Mutex::new(()),
            applied: Mutex::new(seq0),
            applied_cv: Condvar::new(),
            committed: Mutex::new(None),
            wake: Arc::new((Mutex::new(false), Condvar::new())),
            stop: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(Vec::new()),
            counters: Counters::default(),
            events: Mutex::new(std::collections::VecDeque::new()),
            recovery,
            read_only_reason,
            _lock: lock,
            cfg,
        });
        {
            let v = live.view();
            let m = v.manifest.clone().unwrap_or_else(unreachable_manifest);
            *live.committed.lock().unwrap_or_else(|p| p.into_inner()) = Some((v, m));
        }
        {
            let mut inner = live.lock_inner();
            let Inner {
                pending,
                pending_ids,
                ..
            } = &mut *inner;
            for (_, op) in pending.iter() {
                note_ids(pending_ids, op);
            }
        }
        // The replayed operations become visible before the first search.
        live.refresh()?;
        if !live.is_read_only() {
            if live.recovery.replayed > 0 {
                crate::failpoint::hit("open.after_replay");
                live.commit()?;
            }
            if live.cfg.background {
                // Two threads: refreshes and commits must never wait for a merge (a graph
                // build of a large segment takes minutes on one thread).
                let mut hs = Vec::new();
                for merger in [false, true] {
                    let me = Arc::downgrade(&live);
                    let (wake, stop) = (live.wake.clone(), live.stop.clone());
                    hs.push(
                        std::thread::Builder::new()
                            .name(
                                if merger {
                                    "searchd-merger"
                                } else {
                                    "searchd-refresher"
                                }
                                .into(),
                            )
                            .spawn(move || optimizer_loop(me, wake, stop, merger))
                            .map_err(|e| Error::io(dir, e))?,
                    );
                }
                *live.thread.lock().unwrap_or_else(|p| p.into_inner()) = hs;
            }
        }
        Ok(live)
    }

    fn lock_inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, e: Event) {
        tracing::debug!(kind = e.kind, ms = e.ms, docs = e.docs, phases = ?e.phases, "optimizer step");
        let mut ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if ev.len() >= MAX_EVENTS {
            ev.pop_front();
        }
        ev.push_back(e);
    }

    /// The optimizer's recent steps, oldest first.
    pub fn events(&self) -> Vec<Event> {
        let ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        ev.iter().cloned().collect()
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
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn is_read_only(&self) -> bool {
        self.read_only_reason.is_some()
    }
    /// Why writes are refused, if they are.
    pub fn read_only_reason(&self) -> Option<&str> {
        self.read_only_reason.as_deref()
    }
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }
    pub fn config(&self) -> &LiveConfig {
        &self.cfg
    }

    fn check_writable(&self) -> Result<()> {
        match &self.read_only_reason {
            Some(r) => Err(Error::ReadOnly(format!(
                "collection {} is read-only: {r}",
                self.dir.display()
            ))),
            None => Ok(()),
        }
    }

    /// Check documents before they are logged: dimensions, finite components, a non-zero
    /// vector under cosine, a JSON object of stored fields whose mapped fields convert.
    pub fn validate(&self, docs: &[NewDoc]) -> Result<()> {
        let mapping = self.lock_mapping();
        self.validate_with(docs, mapping.as_ref()).map(|_| ())
    }

    fn lock_mapping(&self) -> std::sync::MutexGuard<'_, Option<searchd_fields::Schema>> {
        self.mapping.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`Self::validate`] against `mapping`; returns the fields the documents bring that it
    /// does not have, with their inferred types.
    fn validate_with(
        &self,
        docs: &[NewDoc],
        mapping: Option<&searchd_fields::Schema>,
    ) -> Result<Vec<(String, searchd_fields::FieldType)>> {
        let view = self.view();
        check_docs(
            docs,
            &DocRules {
                dim: view.dim(),
                cosine: view.metric() == Metric::Cosine,
                mapping,
                text_field: self.text_field.as_deref(),
                dynamic: self.dynamic,
            },
        )
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

    /// Insert or replace documents by id. Acknowledged (logged) when this returns; with
    /// `wait`, also visible to searches.
    pub fn upsert(&self, mut docs: Vec<NewDoc>, wait: bool) -> Result<Receipt> {
        self.check_writable()?;
        if docs.is_empty() {
            return Err(Error::Input("docs is empty: nothing to write".into()));
        }
        for d in &mut docs {
            d.id = canonical_id(self.id_kind, std::mem::replace(&mut d.id, DocId::Int(0)));
        }
        {
            // The mapping lock is held from the check to the growth, so two upserts
            // bringing one new field agree on its type (the first one decides).
            let mut mapping = self.lock_mapping();
            let new = self.validate_with(&docs, mapping.as_ref())?;
            if let (Some(m), Dynamic::True) = (mapping.as_mut(), self.dynamic) {
                add_fields(m, new);
            }
        }
        let n = docs.len() as u64;
        let op = Op::Upsert(docs);
        let seq = self.log(op)?;
        self.counters.docs_upserted.fetch_add(n, Relaxed);
        let applied = self.finish_write(seq, wait)?;
        Ok(Receipt {
            seq,
            applied,
            not_found: Vec::new(),
            deleted: 0,
            upserted: n,
        })
    }

    /// Delete documents by id. Ids that do not exist are reported, not an error; when none
    /// exists nothing is logged.
    pub fn delete(&self, ids: Vec<DocId>, wait: bool) -> Result<Receipt> {
        self.check_writable()?;
        let (found, not_found) = {
            // The view is read under the writers' lock: a refresh swaps the view and
            // forgets the ids it applied (`inflight_ids`) under it, so an id written by
            // that refresh is either still in flight here or in the view. (Read before the
            // lock, a refresh in between made a just-written id look absent: the delete
            // answered `not_found` and the document stayed.)
            let inner = self.lock_inner();
            let view = self.view();
            let exists = |id: &DocId| {
                inner
                    .pending_ids
                    .get(id)
                    .or_else(|| inner.inflight_ids.get(id))
                    .copied()
                    .unwrap_or_else(|| lookup_exact(&view, id).is_some())
            };
            let mut found: Vec<DocId> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let mut not_found = Vec::new();
            for id in ids {
                // The collection's form of the id, or the form given when only that one
                // exists (written before ids were put in one form).
                let canon = canonical_id(self.id_kind, id.clone());
                let hit = [canon, id.clone()].into_iter().find(|c| exists(c));
                match hit {
                    Some(c) if seen.insert(c.clone()) => found.push(c),
                    Some(_) => {}
                    None => not_found.push(id),
                }
            }
            (found, not_found)
        };
        if found.is_empty() {
            return Ok(Receipt {
                seq: 0,
                applied: true,
                not_found,
                deleted: 0,
                upserted: 0,
            });
        }
        let n = found.len() as u64;
        let seq = self.log(Op::Delete(found))?;
        self.counters.docs_deleted.fetch_add(n, Relaxed);
        let applied = self.finish_write(seq, wait)?;
        Ok(Receipt {
            seq,
            applied,
            not_found,
            deleted: n,
            upserted: 0,
        })
    }

    /// Delete every document that passes `f` (evaluated on a fresh refresh, as
    /// Elasticsearch's delete-by-query runs on a refreshed snapshot).
    pub fn delete_by_filter(&self, f: &searchd_fields::Filter, wait: bool) -> Result<Receipt> {
        self.check_writable()?;
        self.refresh()?;
        let view = self.view();
        let m = view.matches(f);
        let mut ids = Vec::with_capacity(m.len() as usize);
        for (i, seg) in view.segments().iter().enumerate() {
            if let Some(rows) = m.segment(i) {
                for r in rows {
                    if let Some(id) = seg.ids.id(r as u64) {
                        ids.push(id.clone());
                    }
                }
            }
        }
        self.delete(ids, wait)
    }

    /// Write backpressure, as Lucene stalls indexing threads when merges fall behind: while
    /// the view holds more than twice `max_segments` segments (the merger, at full priority
    /// past `max_segments`, is not keeping up with the writes), a write waits for the count
    /// to come down, and after [`WRITE_STALL`] is refused with [`Error::Busy`] (503 with
    /// `Retry-After`). Every segment is one more search per query: unbounded writes made
    /// searches collapse (1,000 docs/s on 2 cores: 40 segments, search p50 353 ms,
    /// `bench/results/search-under-writes-synth1m-1000docs.md`).
    fn throttle(&self) -> Result<()> {
        let limit = self.cfg.max_segments.saturating_mul(2).max(4);
        let over = || self.view().segments.len() > limit;
        if !over() {
            return Ok(());
        }
        let until = Instant::now() + WRITE_STALL;
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            if !over() {
                return Ok(());
            }
        }
        self.counters.throttled.fetch_add(1, Relaxed);
        Err(Error::Busy(format!(
            "writes are held back: the collection has {} segments (limit {limit}) while the optimizer merges; retry later",
            self.view().segments.len()
        )))
    }

    fn log(&self, op: Op) -> Result<u64> {
        self.throttle()?;
        let payload = op.encode();
        let (seq, group, docs) = {
            let mut inner = self.lock_inner();
            let seq = inner.wal.append(&payload).inspect_err(|_| {
                self.counters.errors.fetch_add(1, Relaxed);
            })?;
            let docs = match &op {
                Op::Upsert(d) => d.len(),
                Op::Delete(_) => 0,
            };
            note_ids(&mut inner.pending_ids, &op);
            inner.pending.push((seq, op));
            inner.pending_docs += docs;
            let group = (inner.wal.fsync() == Fsync::Group).then(|| inner.wal.group());
            (seq, group, inner.pending_docs)
        };
        if let Some(g) = group {
            g.wait(seq)
                .map_err(|e| Error::io(self.dir.join("wal"), e))?;
        }
        self.counters.writes.fetch_add(1, Relaxed);
        if docs >= self.cfg.refresh_docs {
            self.wake_optimizer();
        }
        Ok(seq)
    }

    fn finish_write(&self, seq: u64, wait: bool) -> Result<bool> {
        if !wait {
            return Ok(false);
        }
        // A refresh that started before this write was logged does not include it: run
        // (or wait for) one that does.
        loop {
            if self.applied_seq() >= seq {
                return Ok(true);
            }
            self.refresh()?;
        }
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

    /// Make every acknowledged write visible: collapse the pending operations into one new
    /// segment plus deleted rows, and swap in a new view.
    pub fn refresh(&self) -> Result<()> {
        let _r = self.refresh_lock.lock().unwrap_or_else(|p| p.into_inner());
        let t = Instant::now();
        let mut timer = Timer::new();
        let (ops, name) = {
            let mut inner = self.lock_inner();
            if inner.pending.is_empty() {
                return Ok(());
            }
            let ops = std::mem::take(&mut inner.pending);
            inner.pending_docs = 0;
            inner.inflight_ids = std::mem::take(&mut inner.pending_ids);
            let name = format!("seg-{:06}", inner.next_segment);
            inner.next_segment += 1;
            (ops, name)
        };
        let upto = ops.last().map_or(0, |(s, _)| *s);
        // The last operation per id wins.
        let mut order: Vec<DocId> = Vec::new();
        let mut latest: HashMap<DocId, Option<NewDoc>> = HashMap::new();
        for (_, op) in ops {
            match op {
                Op::Upsert(docs) => {
                    for d in docs {
                        if !latest.contains_key(&d.id) {
                            order.push(d.id.clone());
                        }
                        latest.insert(d.id.clone(), Some(d));
                    }
                }
                Op::Delete(ids) => {
                    for id in ids {
                        if !latest.contains_key(&id) {
                            order.push(id.clone());
                        }
                        latest.insert(id, None);
                    }
                }
            }
        }
        let docs: Vec<&NewDoc> = order
            .iter()
            .filter_map(|id| latest.get(id).and_then(|d| d.as_ref()))
            .collect();
        let base = self
            .scratch
            .as_ref()
            .map_or(self.dir.as_path(), |s| s.path());
        let ndocs = docs.len() as u64;
        timer.lap("collapse");
        let new_seg = if docs.is_empty() {
            None
        } else {
            let spec = self.spec_now();
            let built = write_segment(base, &name, &docs, &spec).and_then(|meta| {
                timer.lap("write");
                let seg = Segment::open(base, &meta, self.spec.dim, &self.opts)?;
                timer.lap("open");
                crate::failpoint::hit("refresh.after_segment_write");
                Ok((meta, seg))
            });
            match built {
                Ok(x) => Some(x),
                Err(e) => {
                    // Put the operations back: they are in the log, a later refresh
                    // retries them.
                    self.counters.errors.fetch_add(1, Relaxed);
                    let mut inner = self.lock_inner();
                    inner.last_error = Some(e.to_string());
                    let back: Vec<(u64, Op)> = latest_back(order, latest, upto);
                    let mut rest = std::mem::take(&mut inner.pending);
                    let mut all = back;
                    all.append(&mut rest);
                    inner.pending = all;
                    let inflight = std::mem::take(&mut inner.inflight_ids);
                    for (k, v) in inflight {
                        inner.pending_ids.entry(k).or_insert(v);
                    }
                    return Err(e);
                }
            }
        };
        // The view gets the mapping as it is now: it has every field of its documents.
        let mapping_now = self.mapping();
        let old_view = {
            let mut inner = self.lock_inner();
            let cur = self.view();
            let mut live: Vec<Option<RoaringBitmap>> = (0..cur.segments.len())
                .map(|i| cur.live_rows(i).cloned())
                .collect();
            let mut changed = vec![false; cur.segments.len()];
            for id in &order {
                if let Some(r) = lookup_exact(&cur, id) {
                    let i = r.segment as usize;
                    let l = live[i].get_or_insert_with(|| {
                        let mut b = RoaringBitmap::new();
                        b.insert_range(0..cur.segments[i].len() as u32);
                        b
                    });
                    l.remove(r.row as u32);
                    changed[i] = true;
                }
            }
            let mut manifest = cur.manifest.clone().unwrap_or_else(unreachable_manifest);
            if mapping_now.is_some() {
                manifest.mapping = mapping_now;
            }
            let mut segments = cur.segments.clone();
            let mut lives: Vec<Option<Arc<RoaringBitmap>>> = live
                .into_iter()
                .zip(&changed)
                .zip(&cur.live)
                .map(|((l, c), old)| if *c { l.map(Arc::new) } else { old.clone() })
                .collect();
            if let Some((meta, seg)) = new_seg {
                manifest.segments.push(meta);
                segments.push(Arc::new(seg));
                lives.push(None);
                if self.scratch.is_none() {
                    inner.unsynced.push(name);
                }
            }
            manifest.next_segment = inner.next_segment;
            let next = Collection {
                dir: cur.dir.clone(),
                manifest: Some(manifest),
                segments,
                live: lives,
                seq: upto,
                dim: cur.dim,
                metric: cur.metric,
            };
            let old = self.set_view(next);
            inner.inflight_ids.clear();
            old
        };
        timer.lap("swap");
        crate::failpoint::hit("refresh.after_swap");
        // Released outside the writers' lock (see `set_view`).
        drop(old_view);
        *self.applied.lock().unwrap_or_else(|p| p.into_inner()) = upto;
        self.applied_cv.notify_all();
        self.record(timer.event("refresh", ndocs, 0, 0));
        self.counters.refreshes.fetch_add(1, Relaxed);
        self.counters
            .refresh_us
            .fetch_add(t.elapsed().as_micros() as u64, Relaxed);
        Ok(())
    }

    /// Make the current view durable: sync its new segments, write the deleted sets and
    /// the manifest, drop the log before it and the segments merged away.
    pub fn commit(&self) -> Result<()> {
        if self.is_read_only() {
            return Ok(());
        }
        let _g = self.gc_lock.lock().unwrap_or_else(|p| p.into_inner());
        let t = Instant::now();
        let mut timer = Timer::new();
        let (view, unsynced, obsolete) = {
            let mut inner = self.lock_inner();
            let v = self.view();
            if v.seq <= inner.committed_seq
                && inner.obsolete.is_empty()
                && inner.unsynced.is_empty()
            {
                inner.last_commit = Instant::now();
                return Ok(());
            }
            (
                v,
                std::mem::take(&mut inner.unsynced),
                std::mem::take(&mut inner.obsolete),
            )
        };
        let r = self.commit_view(&view, &unsynced, &mut timer);
        let mut inner = self.lock_inner();
        match r {
            Err(e) => {
                inner.unsynced.extend(unsynced);
                inner.obsolete.extend(obsolete);
                inner.last_error = Some(e.to_string());
                self.counters.errors.fetch_add(1, Relaxed);
                Err(e)
            }
            Ok(manifest) => {
                *self.committed.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((view.clone(), manifest.clone()));
                inner.committed_seq = view.seq;
                inner.last_commit = Instant::now();
                inner.wal.truncate_through(view.seq)?;
                drop(inner);
                crate::failpoint::hit("commit.after_truncate");
                timer.lap("truncate");
                let listed: std::collections::HashSet<&str> =
                    manifest.segments.iter().map(|s| s.name.as_str()).collect();
                for name in obsolete {
                    if !listed.contains(name.as_str()) {
                        let _ = std::fs::remove_dir_all(self.dir.join(&name));
                    }
                }
                for s in &manifest.segments {
                    let sdir = self.dir.join(&s.name);
                    if let Ok(rd) = std::fs::read_dir(&sdir) {
                        for e in rd.flatten() {
                            let n = e.file_name().to_string_lossy().into_owned();
                            if n.starts_with("deleted-")
                                && s.deleted.as_ref().is_none_or(|d| d.name != n)
                            {
                                let _ = std::fs::remove_file(e.path());
                            }
                        }
                    }
                }
                timer.lap("cleanup");
                self.record(timer.event("commit", 0, unsynced.len(), 0));
                self.counters.commits.fetch_add(1, Relaxed);
                self.counters
                    .commit_us
                    .fetch_add(t.elapsed().as_micros() as u64, Relaxed);
                Ok(())
            }
        }
    }

    /// Write a manifest for `view` into `dir` (segments already there).
    fn manifest_for(&self, view: &Collection, dir: &Path) -> Result<Manifest> {
        let mut m = view.manifest.clone().unwrap_or_else(unreachable_manifest);
        let committed = self.committed.lock().unwrap_or_else(|p| p.into_inner());
        // The file of a deleted set unchanged since the last commit (same segment, same
        // bitmap) is still right; a snapshot writes its own.
        let unchanged = |i: usize| -> Option<FileMeta> {
            let (cv, cm) = committed.as_ref().filter(|_| dir == self.dir)?;
            let j = cv
                .segments
                .iter()
                .position(|s| Arc::ptr_eq(s, &view.segments[i]))?;
            match (&view.live[i], &cv.live[j]) {
                (Some(a), Some(b)) if Arc::ptr_eq(a, b) => cm.segments[j].deleted.clone(),
                _ => None,
            }
        };
        for (i, s) in m.segments.iter_mut().enumerate() {
            s.deleted = match view.live_rows(i) {
                None => None,
                Some(l) => match unchanged(i) {
                    Some(d) => Some(d),
                    None => Some(write_deleted(
                        &dir.join(&s.name),
                        view.seq,
                        l,
                        view.segments[i].len(),
                    )?),
                },
            };
        }
        m.format = FORMAT_LIVE;
        m.wal_seq = view.seq;
        m.docs = view.len() as u64;
        Ok(m)
    }

    fn commit_view(
        &self,
        view: &Collection,
        unsynced: &[String],
        timer: &mut Timer,
    ) -> Result<Manifest> {
        for name in unsynced {
            let p = self.dir.join(name);
            if p.exists() {
                sync_tree(&p)?;
            }
        }
        timer.lap("sync_segments");
        let m = self.manifest_for(view, &self.dir)?;
        timer.lap("deleted_sets");
        for s in &m.segments {
            crate::files::sync_dir(&self.dir.join(&s.name));
        }
        timer.lap("sync_dirs");
        crate::failpoint::hit("commit.after_deleted_sets");
        write_manifest(&self.dir, &m)?;
        crate::failpoint::hit("commit.after_manifest");
        timer.lap("manifest");
        // The live view keeps its manifest (for the next commit) in step.
        Ok(m)
    }

    /// One optimizer step, as the two background threads take them: a cheap flat merge
    /// if one is due, else a graph build or vacuum. Returns whether it merged.
    pub fn optimize(&self) -> Result<bool> {
        Ok(self.flat_merge_step()? || self.graph_merge_step()?)
    }

    /// The refresher's merge (after a refresh): when `merge_factor` or more small segments
    /// exist, the smallest of them whose documents stay under `flat_max` are rewritten as one
    /// exact-scan segment. It only copies rows (no graph), so it runs at full priority and
    /// keeps the count of small segments bounded however slow graph builds are.
    pub fn flat_merge_step(&self) -> Result<bool> {
        if self.is_read_only() {
            return Ok(false);
        }
        let v0 = self.view();
        let Some((pick, names)) = self.claim(&v0, |v, claimed| self.pick_flat_merge(v, claimed))
        else {
            return Ok(false);
        };
        let r = self.merge(&v0, &pick, "flat_merge", 0);
        self.release(&names);
        r.map(|_| true)
    }

    /// The merger's step: small segments that together pass `flat_max` become one graph
    /// segment, segments with `vacuum_ratio` deleted rows are rewritten (minor graph
    /// segments, each under a tenth of the largest, at 1 - [`searchd_engine::NEAR_UNFILTERED`] = 10%), three
    /// or more minor graph segments become one, and past
    /// `max_segments` the smallest are merged. The build runs on a thread of its own niced
    /// by `optimizer_nice`, unless the optimizer is behind (more than `max_segments`
    /// segments): then at full priority, since every extra segment makes each search dearer.
    /// (The refresher's flat merges keep small segments few, so that is rare; a threshold on
    /// the documents in small segments ran builds at full priority beside the searches most
    /// of the time at `flat_max` 1,000.)
    pub fn graph_merge_step(&self) -> Result<bool> {
        if self.is_read_only() {
            return Ok(false);
        }
        let v0 = self.view();
        let Some((pick, names)) = self.claim(&v0, |v, claimed| self.pick_merge(v, claimed)) else {
            return Ok(false);
        };
        let behind = v0.segments.len() > self.cfg.max_segments;
        let nice = if behind { 0 } else { self.cfg.optimizer_nice };
        let r = std::thread::scope(|sc| {
            let h = std::thread::Builder::new()
                .name("searchd-build".into())
                .spawn_scoped(sc, || {
                    // Threads the index build starts inherit this priority.
                    if nice != 0 {
                        if let Err(e) = crate::sys::renice_current_thread(nice) {
                            tracing::warn!(error = %e, "could not lower the merge's priority");
                        }
                    }
                    self.merge(&v0, &pick, "graph_merge", nice)
                });
            match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(Error::Input("the merge thread panicked".into()))),
                Err(e) => Err(Error::io(&self.dir, e)),
            }
        });
        self.release(&names);
        r.map(|_| true)
    }

    /// Picks under the lock and claims the picked segments' names: `(picked rows of the
    /// view, their names for [`Self::release`])`; `None` when nothing is due.
    fn claim(
        &self,
        v: &Collection,
        pick: impl FnOnce(&Collection, &dyn Fn(usize) -> bool) -> Vec<usize>,
    ) -> Option<(Vec<usize>, Vec<String>)> {
        let names = seg_names(v);
        let mut inner = self.lock_inner();
        let picked = {
            let claimed = |i: usize| inner.claimed.iter().any(|c| Some(c) == names.get(i));
            pick(v, &claimed)
        };
        if picked.is_empty() {
            return None;
        }
        let mine: Vec<String> = picked
            .iter()
            .filter_map(|&i| names.get(i).cloned())
            .collect();
        inner.claimed.extend(mine.iter().cloned());
        Some((picked, mine))
    }

    fn release(&self, names: &[String]) {
        let mut inner = self.lock_inner();
        inner.claimed.retain(|c| !names.contains(c));
    }

    fn pick_flat_merge(&self, v: &Collection, claimed: &dyn Fn(usize) -> bool) -> Vec<usize> {
        let alive = |i: usize| alive_rows(v, i);
        let mut small: Vec<usize> = (0..v.segments.len())
            .filter(|&i| v.segments[i].len() < self.cfg.flat_max && !claimed(i))
            .collect();
        if small.len() < self.cfg.merge_factor.max(2) {
            return Vec::new();
        }
        small.sort_by_key(|&i| alive(i));
        let mut pick = Vec::new();
        let mut total = 0;
        for i in small {
            if total + alive(i) >= self.cfg.flat_max {
                break;
            }
            total += alive(i);
            pick.push(i);
        }
        if pick.len() < 2 {
            pick.clear();
        }
        pick.sort_unstable();
        pick
    }

    fn pick_merge(&self, v: &Collection, claimed: &dyn Fn(usize) -> bool) -> Vec<usize> {
        let n = v.segments.len();
        let alive = |i: usize| alive_rows(v, i);
        let small: Vec<usize> = (0..n)
            .filter(|&i| v.segments[i].len() < self.cfg.flat_max && !claimed(i))
            .collect();
        let small_docs: usize = small.iter().map(|&i| alive(i)).sum();
        let mut pick: Vec<usize> = Vec::new();
        if small.len() >= 2 && small_docs >= self.cfg.flat_max {
            pick.extend(&small);
        }
        // Minor graph segments (at least `flat_max` rows, each under a tenth of the largest)
        // are vacuumed sooner: once their deleted rows take them below the planner's
        // near-unfiltered share, each search scans their live rows exactly instead of
        // walking their graph (a 5,390-row graph with 863 deleted rows: ~4,500 sequential
        // distances, about as much as the whole 1M walk). Rewriting a minor segment is
        // cheap; rewriting the large one is not, so it keeps `vacuum_ratio`.
        let largest = (0..n).map(|i| v.segments[i].len()).max().unwrap_or(0);
        let is_minor = |len: usize| len >= self.cfg.flat_max && len * 10 < largest;
        let minor_ratio = (1.0 - searchd_engine::NEAR_UNFILTERED).min(self.cfg.vacuum_ratio);
        for i in 0..n {
            let len = v.segments[i].len();
            if len > 0 && !pick.contains(&i) && !claimed(i) {
                let dead = len - alive(i);
                let ratio = if is_minor(len) {
                    minor_ratio
                } else {
                    self.cfg.vacuum_ratio
                };
                if dead > 0 && dead as f64 >= ratio * len as f64 {
                    pick.push(i);
                    // Take the small segments along: one rewrite instead of several.
                    for &j in &small {
                        if !pick.contains(&j) {
                            pick.push(j);
                        }
                    }
                }
            }
        }
        // Minor graph segments (each under a tenth of the largest) cost a graph search each
        // per query: three or more become one.
        if pick.is_empty() {
            let minor: Vec<usize> = (0..n)
                .filter(|&i| is_minor(v.segments[i].len()) && !claimed(i))
                .collect();
            if minor.len() >= 3 {
                pick.extend(minor);
            }
        }
        if pick.is_empty() && n > self.cfg.max_segments {
            let mut by_size: Vec<usize> = (0..n).filter(|&i| !claimed(i)).collect();
            by_size.sort_by_key(|&i| alive(i));
            pick.extend(by_size.into_iter().take(self.cfg.merge_factor.max(2)));
        }
        pick.sort_unstable();
        pick.dedup();
        // A single segment with nothing deleted is not worth rewriting.
        if pick.len() == 1 && alive(pick[0]) == v.segments[pick[0]].len() {
            pick.clear();
        }
        pick
    }

    fn merge(&self, v0: &Collection, pick: &[usize], kind: &'static str, nice: i32) -> Result<()> {
        let t = Instant::now();
        let mut timer = Timer::new();
        self.counters.merging.store(true, Relaxed);
        self.counters.merge_started_ms.store(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            Relaxed,
        );
        let r = self.merge_inner(v0, pick, &mut timer);
        self.counters.merging.store(false, Relaxed);
        if r.is_err() {
            self.counters.errors.fetch_add(1, Relaxed);
        }
        let moved = r?;
        self.record(timer.event(kind, moved, pick.len(), nice));
        self.counters.merges.fetch_add(1, Relaxed);
        self.counters.merged_docs.fetch_add(moved, Relaxed);
        self.counters
            .merge_us
            .fetch_add(t.elapsed().as_micros() as u64, Relaxed);
        Ok(())
    }

    fn merge_inner(&self, v0: &Collection, pick: &[usize], timer: &mut Timer) -> Result<u64> {
        // Read the alive documents of the picked segments, as of v0.
        let mut docs: Vec<NewDoc> = Vec::new();
        let mut maps: Vec<Vec<u32>> = Vec::with_capacity(pick.len());
        for &i in pick {
            let seg = &v0.segments[i];
            let mut map = vec![u32::MAX; seg.len()];
            #[allow(clippy::needless_range_loop)] // `row` is the row number, not just an index
            for row in 0..seg.len() {
                let r = DocRef {
                    segment: i as u32,
                    row: row as u64,
                };
                if !v0.is_live(r) {
                    continue;
                }
                let id = seg
                    .ids
                    .id(row as u64)
                    .cloned()
                    .ok_or_else(|| Error::format(&self.dir, "a row without an id"))?;
                let vector = v0
                    .vector(r)
                    .map_err(|e| Error::Input(format!("merge: {e}")))?
                    .ok_or_else(|| Error::format(&self.dir, "a row without a vector"))?
                    .into_owned();
                let source = v0.source(r)?.unwrap_or_else(|| b"{}".to_vec());
                let text = text_of(&source, self.text_field.as_deref());
                map[row] = docs.len() as u32;
                docs.push(NewDoc {
                    id,
                    vector,
                    text,
                    source,
                });
            }
            maps.push(map);
        }
        let name = {
            let mut inner = self.lock_inner();
            let name = format!("seg-{:06}", inner.next_segment);
            inner.next_segment += 1;
            name
        };
        let refs: Vec<&NewDoc> = docs.iter().collect();
        timer.lap("read");
        let new_seg = if refs.is_empty() {
            None
        } else {
            let meta = write_segment(&self.dir, &name, &refs, &self.spec_now())?;
            timer.lap("write");
            let seg = Segment::open(&self.dir, &meta, self.spec.dim, &self.opts)?;
            timer.lap("open");
            crate::failpoint::hit("merge.after_segment_write");
            Some((meta, seg))
        };
        let moved = docs.len() as u64;
        drop(docs);
        // Swap: the picked segments (still in the view: they are claimed, so no other
        // merge removes them) leave; rows deleted since v0 are deleted in the merged one.
        let _r = self.refresh_lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut inner = self.lock_inner();
        timer.lap("wait_refresh");
        let cur = self.view();
        let mut merged_live: Option<RoaringBitmap> = None;
        let mut gone = Vec::new();
        for (k, &i) in pick.iter().enumerate() {
            let seg0 = &v0.segments[i];
            let j = cur
                .segments
                .iter()
                .position(|s| Arc::ptr_eq(s, seg0))
                .ok_or_else(|| Error::format(&self.dir, "a merged segment left the view"))?;
            gone.push(j);
            if let Some(l1) = cur.live_rows(j) {
                for (row, &to) in maps[k].iter().enumerate() {
                    if to != u32::MAX && !l1.contains(row as u32) {
                        let ml = merged_live.get_or_insert_with(|| {
                            let mut b = RoaringBitmap::new();
                            b.insert_range(0..moved as u32);
                            b
                        });
                        ml.remove(to);
                    }
                }
            }
        }
        let mut manifest = cur.manifest.clone().unwrap_or_else(unreachable_manifest);
        let mut segments = Vec::new();
        let mut lives = Vec::new();
        let mut metas = Vec::new();
        for j in 0..cur.segments.len() {
            if gone.contains(&j) {
                inner.obsolete.push(manifest.segments[j].name.clone());
                continue;
            }
            segments.push(cur.segments[j].clone());
            lives.push(cur.live[j].clone());
            metas.push(manifest.segments[j].clone());
        }
        if let Some((meta, seg)) = new_seg {
            // The merged segment goes first: it holds the oldest documents.
            segments.insert(0, Arc::new(seg));
            lives.insert(0, merged_live.map(Arc::new));
            metas.insert(0, meta);
            inner.unsynced.push(name);
        }
        manifest.segments = metas;
        manifest.next_segment = inner.next_segment;
        let next = Collection {
            dir: cur.dir.clone(),
            manifest: Some(manifest),
            segments,
            live: lives,
            seq: cur.seq,
            dim: cur.dim,
            metric: cur.metric,
        };
        let old = self.set_view(next);
        timer.lap("swap");
        crate::failpoint::hit("merge.after_swap");
        drop(old);
        timer.lap("drop_old");
        Ok(moved)
    }

    /// Write a consistent point-in-time copy of the collection to `out` (which must not
    /// exist) while writes continue: immutable files hard-linked (copied across file
    /// systems), the log copied up to a record boundary. `out` opens as a collection
    /// (the copied log is applied at open). Returns the sequence number it holds.
    pub fn snapshot(&self, out: &Path) -> Result<u64> {
        crate::paths::check_nul(out)?;
        if out.exists() {
            return Err(Error::Exists {
                path: out.to_path_buf(),
            });
        }
        // Inside the collection's directory, the start-up's cleaning would take it for
        // debris, and the next snapshot would copy it.
        if crate::paths::is_inside(out, &self.dir)? {
            return Err(Error::Input(format!(
                "{} is inside the collection directory {}: write snapshots outside it",
                out.display(),
                self.dir.display()
            )));
        }
        let _g = self.gc_lock.lock().unwrap_or_else(|p| p.into_inner());
        let (view, wal_files, wal_len, seq) = {
            let inner = self.lock_inner();
            let (files, len) = inner.wal.extent();
            (self.view(), files, len, inner.wal.next_seq() - 1)
        };
        let tmp = {
            let mut n = out.as_os_str().to_owned();
            n.push(format!(".tmp-{}", std::process::id()));
            PathBuf::from(n)
        };
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        let r = (|| -> Result<()> {
            std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
            let base = self
                .scratch
                .as_ref()
                .map_or(self.dir.as_path(), |s| s.path());
            let m = view
                .manifest
                .as_ref()
                .ok_or_else(|| Error::Input("not a collection".into()))?;
            for s in &m.segments {
                let from = if self.dir.join(&s.name).exists() {
                    self.dir.join(&s.name)
                } else {
                    base.join(&s.name)
                };
                // Deleted sets are written for the view below.
                place_tree(&from, &tmp.join(&s.name), true, &|n| {
                    n.starts_with("deleted-") || n.ends_with(".tmp")
                })?;
            }
            crate::failpoint::hit("snapshot.after_segments");
            let manifest = self.manifest_for(&view, &tmp)?;
            let wdir = tmp.join("wal");
            std::fs::create_dir_all(&wdir).map_err(|e| Error::io(&wdir, e))?;
            let last = wal_files.len().saturating_sub(1);
            for (i, f) in wal_files.iter().enumerate() {
                let to = wdir.join(f.file_name().unwrap_or_default());
                let mut b = std::fs::read(f).map_err(|e| Error::io(f, e))?;
                if i == last {
                    b.truncate(wal_len as usize);
                }
                std::fs::write(&to, &b).map_err(|e| Error::io(&to, e))?;
            }
            write_manifest(&tmp, &manifest)?;
            sync_tree(&tmp)?;
            Ok(())
        })();
        if let Err(e) = r {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, out).map_err(|e| Error::io(out, e))?;
        crate::files::sync_dir(out.parent().unwrap_or(Path::new(".")));
        Ok(seq)
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
        crc32: None,
    }
}

/// Rebuild pending operations from a collapsed batch (a refresh that failed).
fn latest_back(
    order: Vec<DocId>,
    mut latest: HashMap<DocId, Option<NewDoc>>,
    seq: u64,
) -> Vec<(u64, Op)> {
    let mut ups = Vec::new();
    let mut dels = Vec::new();
    for id in order {
        match latest.remove(&id).flatten() {
            Some(d) => ups.push(d),
            None => dels.push(id),
        }
    }
    let mut out = Vec::new();
    if !dels.is_empty() {
        out.push((seq, Op::Delete(dels)));
    }
    if !ups.is_empty() {
        out.push((seq, Op::Upsert(ups)));
    }
    out
}

fn note_ids(map: &mut HashMap<DocId, bool>, op: &Op) {
    match op {
        Op::Upsert(docs) => {
            for d in docs {
                map.insert(d.id.clone(), true);
            }
        }
        Op::Delete(ids) => {
            for id in ids {
                map.insert(id.clone(), false);
            }
        }
    }
}

/// An id in the form the collection keeps: in a collection of integer ids a string that
/// spells one (`"777"`, as Elasticsearch clients always send ids) is that integer, and in
/// a collection of string ids an integer is its decimal string. Mixed collections keep ids
/// as given (either form may already exist there).
pub fn canonical_id(kind: IdKind, id: DocId) -> DocId {
    match (kind, id) {
        (IdKind::Int, DocId::Str(s)) => match s.parse::<u64>() {
            Ok(v) if v.to_string() == s => DocId::Int(v),
            _ => DocId::Str(s),
        },
        (IdKind::Str, DocId::Int(v)) => DocId::Str(v.to_string()),
        (_, id) => id,
    }
}

/// Where the alive copy of exactly this id is (no int/string equivalence).
fn lookup_exact(c: &Collection, id: &DocId) -> Option<DocRef> {
    c.segments.iter().enumerate().find_map(|(i, s)| {
        s.ids
            .row(id)
            .map(|row| DocRef {
                segment: i as u32,
                row: row as u64,
            })
            .filter(|r| c.is_live(*r))
    })
}

/// Put every file of the tree `from` at `to`: hard-linked when `link` (copied when linking
/// is not possible, e.g. across file systems), else copied; entries whose name `skip`
/// accepts are left out.
fn place_tree(from: &Path, to: &Path, link: bool, skip: &dyn Fn(&str) -> bool) -> Result<()> {
    let md = std::fs::metadata(from).map_err(|e| Error::io(from, e))?;
    if md.is_dir() {
        std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
        for e in std::fs::read_dir(from).map_err(|e| Error::io(from, e))? {
            let e = e.map_err(|e| Error::io(from, e))?;
            let n = e.file_name();
            if !skip(&n.to_string_lossy()) {
                place_tree(&e.path(), &to.join(&n), link, skip)?;
            }
        }
        Ok(())
    } else if link && std::fs::hard_link(from, to).is_ok() {
        Ok(())
    } else {
        std::fs::copy(from, to)
            .map(|_| ())
            .map_err(|e| Error::io(from, e))
    }
}

/// Copy a snapshot (or any collection) to `out` as a new collection: checked by opening
/// it first, immutable files hard-linked, the log copied. `out` must not exist.
pub fn restore(snapshot: &Path, out: &Path, opts: &LoadOptions) -> Result<u64> {
    crate::paths::check_nul(out)?;
    if out.exists() {
        return Err(Error::Exists {
            path: out.to_path_buf(),
        });
    }
    // A copy inside its source would copy itself, level after level, until the path is
    // too long.
    if snapshot.is_dir() && crate::paths::is_inside(out, snapshot)? {
        return Err(Error::Input(format!(
            "{} is inside the snapshot {}: restore into a directory outside it",
            out.display(),
            snapshot.display()
        )));
    }
    // Check it opens, with its log, without changing it.
    let check = LiveCollection::open(
        snapshot,
        opts,
        LiveConfig {
            read_only: true,
            background: false,
            ..LiveConfig::default()
        },
    )?;
    let docs = check.view().len() as u64;
    drop(check);
    let tmp = {
        let mut n = out.as_os_str().to_owned();
        n.push(format!(".tmp-{}", std::process::id()));
        PathBuf::from(n)
    };
    let r = (|| -> Result<()> {
        std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        for e in std::fs::read_dir(snapshot).map_err(|e| Error::io(snapshot, e))? {
            let e = e.map_err(|e| Error::io(snapshot, e))?;
            let n = e.file_name();
            let ns = n.to_string_lossy();
            if ns == "LOCK" || ns.ends_with(".tmp") {
                continue;
            }
            let to = tmp.join(&n);
            // The log and the manifest change in the copy: copied; the rest never does.
            let link = !(ns == "wal" || ns == MANIFEST);
            place_tree(&e.path(), &to, link, &|_| false)?;
        }
        sync_tree(&tmp)
    })();
    if let Err(e) = r {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, out).map_err(|e| Error::io(out, e))?;
    crate::files::sync_dir(out.parent().unwrap_or(Path::new(".")));
    Ok(docs)
}

/// The refresher's (or with `merger` the merger's) loop. It waits between steps holding only
/// a `Weak` of the collection, so dropping the last handle elsewhere ends the collection (its
/// `Drop` sets `stop`) and then this thread; it holds the collection only while it works.
/// (Holding it across the wait kept the collection alive forever once the two threads took
/// turns: each upgraded while the other held it.)
fn optimizer_loop(
    me: std::sync::Weak<LiveCollection>,
    wake: Arc<(Mutex<bool>, Condvar)>,
    stop: Arc<AtomicBool>,
    merger: bool,
) {
    let tick = match me.upgrade() {
        Some(_) if merger => Duration::from_millis(500),
        Some(live) => live.cfg.refresh_interval.min(Duration::from_millis(200)),
        None => return,
    };
    let mut last_refresh = Instant::now();
    loop {
        if stop.load(Relaxed) {
            return;
        }
        if merger {
            std::thread::sleep(tick);
        } else {
            let (m, cv) = &*wake;
            let g = m.lock().unwrap_or_else(|p| p.into_inner());
            let (mut g, _) = cv
                .wait_timeout_while(g, tick, |woken| !*woken)
                .unwrap_or_else(|p| p.into_inner());
            *g = false;
        }
        if stop.load(Relaxed) {
            return;
        }
        let Some(live) = me.upgrade() else { return };
        if merger {
            if let Err(e) = live.graph_merge_step() {
                tracing::warn!(error = %e, "merge failed; retried later");
            }
            continue;
        }
        let (pending_docs, since_commit, dirty) = {
            let inner = live.lock_inner();
            (
                inner.pending_docs,
                inner.last_commit.elapsed(),
                !inner.pending.is_empty(),
            )
        };
        if (dirty && last_refresh.elapsed() >= live.cfg.refresh_interval)
            || pending_docs >= live.cfg.refresh_docs
        {
            last_refresh = Instant::now();
            if let Err(e) = live.refresh() {
                tracing::warn!(error = %e, "refresh failed; the writes stay in the log and are retried");
            }
        }
        if let Err(e) = live.flat_merge_step() {
            tracing::warn!(error = %e, "merge failed; retried later");
        }
        if since_commit >= live.cfg.commit_interval {
            if let Err(e) = live.commit() {
                tracing::warn!(error = %e, "commit failed; retried later");
            }
        }
    }
}
