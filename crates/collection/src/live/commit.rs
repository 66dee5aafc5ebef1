//! A commit: the view's new segments synced, its deleted sets and the manifest written
//! (temp file, fsync, rename, fsync of the directory), the log before it dropped, and the
//! segments merged away removed.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use searchd_engine::roaring::RoaringBitmap;

use super::optimizer::Timer;
use super::{unreachable_manifest, LiveCollection};
use crate::collection::Collection;
use crate::error::{Error, Result};
use crate::files::{sync_tree, FileMeta};
use crate::manifest::{Manifest, FORMAT_LIVE, MANIFEST};

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

pub(super) fn write_manifest(dir: &Path, m: &Manifest) -> Result<()> {
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

impl LiveCollection {
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
                && !inner.manifest_dirty
            {
                inner.last_commit = Instant::now();
                return Ok(());
            }
            inner.manifest_dirty = false;
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
                inner.manifest_dirty = true;
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
    pub(super) fn manifest_for(&self, view: &Collection, dir: &Path) -> Result<Manifest> {
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
}
