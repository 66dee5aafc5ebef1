//! Opening a live collection: the lock, the last commit, the write-ahead log after it
//! applied again (in a scratch directory when read-only), leftovers of a stopped process
//! removed, and the optimizer threads started.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

use searchd_engine::{BuildConfig, IndexKind, LoadOptions, Metric, Quantization};

use super::ops::note_ids;
use super::optimizer::optimizer_loop;
use super::{unreachable_manifest, Counters, Dynamic, Inner, LiveCollection, LiveConfig, Op};
use crate::collection::{is_collection, Collection};
use crate::error::{Error, Result};
use crate::manifest::{Manifest, MANIFEST};
use crate::segwrite::SegmentSpec;
use crate::validate::{add_fields, check_fields};
use crate::wal::Wal;

pub(super) mod tempdir {
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
        // A collection made empty (POST /collections) records its analyzer in the manifest
        // until a segment has one.
        let analyzer = coll.analyzer().or_else(|| {
            manifest.ingest["lexical"]["analyzer"]
                .as_str()
                .and_then(|a| a.parse().ok())
        });
        let spec = spec_of(&manifest, &cfg, analyzer);
        // The log's upserts were checked against the mapping as it grew; growing it again
        // in log order gives the same types.
        let mut mapping = manifest.mapping.clone();
        if let Some(m) = mapping.as_mut() {
            // Fields whose indexes are being built: new segments index them already.
            for b in &manifest.building {
                m.skipped.retain(|s| s.name != b.name);
                if m.get(&b.name).is_none() {
                    m.fields.push(b.clone());
                }
            }
            m.fields.sort_by(|a, b| a.name.cmp(&b.name));
        }
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
            opts: opts.clone(),
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
                manifest_dirty: false,
                fields_failed: None,
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
}
