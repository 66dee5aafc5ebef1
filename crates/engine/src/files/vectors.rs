//! `vectors.bin`: the float32 vectors.
//!
//! ```text
//! header   [n, dim, dtype = 0 (float32), 0, 0, 0]
//! payload  n x dim little-endian f32, row-major, in storage order (HNSW: the graph's
//!          locality order, see `ids.bin`); unit length under cosine
//! ```
//! Opened where `--vectors` says: mapped or read into memory, left on disk and read row by
//! row (quantized indexes), or not at all (quantized indexes answering from their codes).

use std::borrow::Cow;
use std::path::Path;

use crate::error::{Error, Result, SearchError};
use crate::format::{DirWriter, Header, Manifest, HEADER_LEN, VECTORS_MAGIC};
use crate::storage::{DiskRows, FileBytes, LoadOptions, VectorPlacement};

/// The file name.
pub const NAME: &str = "vectors.bin";

/// Write `stored` (row-major, `dim` columns) as `vectors.bin`.
pub fn write(w: &mut DirWriter, stored: &[f32], dim: usize) -> Result<()> {
    let n = stored.len() / dim.max(1);
    let header = Header::new(VECTORS_MAGIC, [n as u64, dim as u64, 0, 0, 0, 0]);
    w.write_file(NAME, &header, &[bytemuck::cast_slice(stored)])
}

/// The float32 vectors, wherever `--vectors` put them.
pub enum Vectors {
    /// Mapped or read into memory.
    Mem(FileBytes),
    /// Read row by row with `pread`.
    Disk(DiskRows),
    /// Not opened (`--vectors none`): a quantized index answers from its codes alone.
    Absent,
}

impl Vectors {
    /// Open `vectors.bin` of `dir` as `opts.vectors` says. `quantized`: the index has codes
    /// to traverse, so the vectors may stay on disk or be left out.
    pub fn open(
        dir: &Path,
        manifest: &Manifest,
        opts: &LoadOptions,
        quantized: bool,
    ) -> Result<Vectors> {
        let (n, dim) = (manifest.n, manifest.dim);
        let vpath = dir.join(NAME);
        // Without codes the vectors are what HNSW and flat search traverse, so they must
        // be in memory.
        if !quantized && opts.vectors.in_memory().is_none() {
            return Err(Error::InvalidParam {
                name: "vectors",
                message: format!(
                    "--vectors {} needs a quantized index (build --quantization sq8|pq:M|binary): \
                     this index searches its float32 vectors directly, so they must be in \
                     memory (mmap or ram)",
                    opts.vectors.name()
                ),
            });
        }
        if opts.vectors != VectorPlacement::None && !vpath.exists() {
            return Err(Error::InvalidParam {
                name: "vectors",
                message: format!(
                    "{} is missing: rescoring needs the float32 vectors; restore the file, or \
                     open with --vectors none to answer from the codes alone (approximate scores)",
                    vpath.display()
                ),
            });
        }
        let expect = HEADER_LEN + 4 * n * dim;
        let check_header = |bytes: &[u8], len: u64| -> Result<()> {
            let h = Header::parse(&vpath, bytes, VECTORS_MAGIC)?;
            if h.fields[0] as usize != n || h.fields[1] as usize != dim || h.fields[2] != 0 {
                return Err(Error::format(
                    &vpath,
                    format!(
                        "header says {} x {} (dtype {}), manifest says {n} x {dim} float32",
                        h.fields[0], h.fields[1], h.fields[2]
                    ),
                ));
            }
            if len != expect as u64 {
                return Err(Error::Size {
                    path: vpath.clone(),
                    expected: expect as u64,
                    actual: len,
                });
            }
            Ok(())
        };
        Ok(match opts.vectors {
            VectorPlacement::Mmap | VectorPlacement::Ram => {
                let placement = opts.vectors.in_memory().unwrap_or_default();
                let (_, fb) = super::open_checked(dir, manifest, NAME, placement, opts)?;
                check_header(fb.as_bytes(), fb.as_bytes().len() as u64)?;
                Vectors::Mem(fb)
            }
            VectorPlacement::Disk => {
                let e = manifest.required(dir, NAME)?;
                let len = std::fs::metadata(&vpath)
                    .map_err(|err| Error::io(&vpath, err))?
                    .len();
                if len != e.bytes {
                    return Err(Error::Size {
                        path: vpath,
                        expected: e.bytes,
                        actual: len,
                    });
                }
                check_header(&crate::storage::read_prefix(&vpath, HEADER_LEN)?, len)?;
                if opts.verify {
                    let (_, crc) = crate::storage::file_crc32(&vpath)?;
                    if crc != e.crc32 {
                        return Err(Error::Checksum {
                            path: vpath,
                            expected: e.crc32,
                            actual: crc,
                        });
                    }
                }
                Vectors::Disk(DiskRows::open(&vpath, HEADER_LEN as u64, n, dim)?)
            }
            VectorPlacement::None => Vectors::Absent,
        })
    }

    /// Whether the vectors were opened (everything but `--vectors none`).
    pub fn opened(&self) -> bool {
        !matches!(self, Vectors::Absent)
    }

    /// All rows, when they are in memory.
    #[inline]
    pub fn in_memory(&self) -> Option<&[f32]> {
        match self {
            Vectors::Mem(fb) => Some(bytemuck::cast_slice(&fb.as_bytes()[HEADER_LEN..])),
            Vectors::Disk(_) | Vectors::Absent => None,
        }
    }

    /// Row `row` (a stored row, `dim` wide): borrowed from memory or read from disk.
    pub fn row(&self, row: usize, dim: usize) -> std::result::Result<Cow<'_, [f32]>, SearchError> {
        match self {
            Vectors::Mem(_) => {
                let all = self.in_memory().unwrap_or_default();
                Ok(Cow::Borrowed(&all[row * dim..(row + 1) * dim]))
            }
            Vectors::Disk(rows) => {
                let mut v = vec![0f32; dim];
                read_row(rows, row, &mut v)?;
                Ok(Cow::Owned(v))
            }
            Vectors::Absent => Err(SearchError::NoVectors),
        }
    }
}

/// Read stored row `row` of `rows` into `out`, a read failure as a storage error.
pub fn read_row(
    rows: &DiskRows,
    row: usize,
    out: &mut [f32],
) -> std::result::Result<(), SearchError> {
    rows.read_row(row, out)
        .map_err(|e| storage_error(rows.path(), e))
}

/// A failed read of `path` as the search error a caller reports.
pub fn storage_error(path: &Path, e: std::io::Error) -> SearchError {
    SearchError::Storage {
        message: format!("{}: {e}", path.display()),
    }
}
