//! Files of a collection as the manifest records them ([`FileMeta`]: size and CRC32), and
//! making them durable (`fsync` of files, trees and directories). Shared by ingest, the
//! segment writer, the write-ahead log and live collections.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One file of a segment, with its size and checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// The file's name in the segment directory.
    pub name: String,
    /// Its size, in bytes.
    pub bytes: u64,
    /// CRC32 of its contents.
    pub crc32: u32,
}

/// Checks a file against its manifest entry: its size always, its CRC32 when `verify`.
pub(crate) fn check_file(path: &Path, f: &FileMeta, verify: bool) -> Result<()> {
    let md = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if md.len() != f.bytes {
        return Err(Error::format(
            path,
            format!(
                "size is {} bytes, the manifest says {}; the collection is truncated or corrupt",
                md.len(),
                f.bytes
            ),
        ));
    }
    if verify {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let crc = crc32fast::hash(&bytes);
        if crc != f.crc32 {
            return Err(Error::format(
                path,
                format!(
                    "CRC32 is {crc:08x}, the manifest says {:08x}; the collection is corrupt",
                    f.crc32
                ),
            ));
        }
    }
    Ok(())
}

pub(crate) fn file_meta_of(path: &Path) -> Result<FileMeta> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    Ok(FileMeta {
        name: path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        bytes: bytes.len() as u64,
        crc32: crc32fast::hash(&bytes),
    })
}

pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// fsync every file under `path` and the directories themselves (a segment before the
/// manifest that lists it is committed).
pub(crate) fn sync_tree(path: &Path) -> Result<()> {
    let md = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if md.is_dir() {
        for e in std::fs::read_dir(path).map_err(|e| Error::io(path, e))? {
            let e = e.map_err(|e| Error::io(path, e))?;
            sync_tree(&e.path())?;
        }
    }
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    f.sync_all().map_err(|e| Error::io(path, e))
}
