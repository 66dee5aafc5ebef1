//! Snapshots (a consistent point-in-time copy while writes continue: immutable files
//! hard-linked, the log copied up to a record boundary) and restores.

use std::path::{Path, PathBuf};

use searchd_engine::LoadOptions;

use super::commit::write_manifest;
use super::{LiveCollection, LiveConfig};
use crate::error::{Error, Result};
use crate::files::sync_tree;
use crate::manifest::MANIFEST;

impl LiveCollection {
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
