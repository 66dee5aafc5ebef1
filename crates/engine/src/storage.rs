//! Where an index file's bytes live: mapped from the page cache (shared by every process
//! that opens the same file) or copied into private memory. Everything above this module
//! sees only `&[u8]` and typed views of it.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

/// Placement of an index file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Map the file: pages come from the page cache and are shared between processes.
    #[default]
    Mmap,
    /// Read the file into private, anonymous memory.
    Ram,
}

impl Placement {
    pub fn parse(s: &str) -> Option<Placement> {
        match s {
            "mmap" => Some(Placement::Mmap),
            "ram" => Some(Placement::Ram),
            _ => None,
        }
    }
}

/// How to bring an index into memory.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    pub placement: Placement,
    /// Pre-fault every page at open (`MAP_POPULATE`), so the first queries do not pay for
    /// page faults.
    pub populate: bool,
    /// `mlock` the mapping so it cannot be evicted (needs RLIMIT_MEMLOCK).
    pub lock: bool,
    /// Check every file's CRC32 against the manifest (reads every byte once).
    pub verify: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            placement: Placement::Mmap,
            populate: false,
            lock: false,
            verify: true,
        }
    }
}

/// 64-byte aligned owned buffer, so typed views of RAM-placed files are as aligned as
/// mapped ones.
struct AlignedBuf {
    words: Vec<Line>,
    len: usize,
}

#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The bytes of one index file.
pub struct FileBytes {
    inner: Inner,
}

enum Inner {
    Mmap(memmap2::Mmap),
    Ram(AlignedBuf),
}

impl FileBytes {
    /// Open `path` with the given placement.
    pub fn open(path: &Path, opts: &LoadOptions) -> Result<FileBytes> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len() as usize;
        let inner = match opts.placement {
            Placement::Mmap => {
                if len == 0 {
                    return Err(Error::format(path, "file is empty"));
                }
                let mut mo = memmap2::MmapOptions::new();
                if opts.populate {
                    mo.populate();
                }
                // SAFETY: this is the crate's only mapping of a file. Index files are
                // written once into a temporary directory and renamed into place; searchd
                // never modifies or truncates them afterwards. The operator must not
                // modify index files while a process has them open (documented in the
                // README): a truncation would turn reads into SIGBUS, which is the same
                // contract every mmap-based database (LMDB, tantivy) has.
                let map = unsafe { mo.map(&file) }.map_err(|e| Error::io(path, e))?;
                #[cfg(unix)]
                {
                    let _ = map.advise(memmap2::Advice::Random);
                }
                if opts.lock {
                    map.lock().map_err(|e| Error::io(path, e))?;
                }
                Inner::Mmap(map)
            }
            Placement::Ram => {
                use std::io::Read;
                let mut buf = AlignedBuf {
                    words: vec![Line([0; 64]); len.div_ceil(64)],
                    len,
                };
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf.words);
                (&file)
                    .read_exact(&mut bytes[..len])
                    .map_err(|e| Error::io(path, e))?;
                Inner::Ram(buf)
            }
        };
        Ok(FileBytes { inner })
    }

    /// Wrap bytes that are already in memory (used by builders and tests).
    pub fn from_vec(data: &[u8]) -> FileBytes {
        let mut buf = AlignedBuf {
            words: vec![Line([0; 64]); data.len().div_ceil(64)],
            len: data.len(),
        };
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf.words);
        bytes[..data.len()].copy_from_slice(data);
        FileBytes {
            inner: Inner::Ram(buf),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match &self.inner {
            Inner::Mmap(m) => m,
            Inner::Ram(b) => &bytemuck::cast_slice(&b.words)[..b.len],
        }
    }

    pub fn is_mmap(&self) -> bool {
        matches!(self.inner, Inner::Mmap(_))
    }
}
