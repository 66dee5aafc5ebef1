//! Crash-safe file replacement: write a temporary file in the destination directory, fsync
//! it, rename it over the final name, fsync the directory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Removes the temporary file unless the write completed.
struct TempGuard {
    path: PathBuf,
    done: bool,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Calls `write` with a buffered writer to a temporary file next to `path`, then makes it
/// durable and renames it to `path`. On any error (or panic in `write`) the temporary file
/// is removed and `path` is untouched.
pub(crate) fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<()> {
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::invalid(path, "not a file path (it has no file name)"))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| Error::io(path, e))?;
    let mut guard = TempGuard {
        path: tmp.clone(),
        done: false,
    };
    let mut w = BufWriter::with_capacity(1 << 20, file);
    write(&mut w).map_err(|e| Error::io(path, e))?;
    let file = w
        .into_inner()
        .map_err(|e| Error::io(path, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(path, e))?;
    drop(file);
    fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    guard.done = true;
    // Make the rename itself durable. Not possible on every platform; best effort.
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
