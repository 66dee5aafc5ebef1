//! `ids.bin`: the row order of the stored vectors when it differs from the input's.
//!
//! ```text
//! header   [n, 0, 0, 0, 0, 0]
//! order    n u32: the external id (input row) of each stored row
//! inverse  n u32: the stored row of each external id
//! ```
//! HNSW indexes store rows in the graph's BFS order for memory locality; filters and
//! results speak external ids, traversal speaks stored rows.

use std::path::Path;

use crate::error::{Error, Result};
use crate::files::words;
use crate::format::{DirWriter, Header, Manifest, HEADER_LEN, IDS_MAGIC};
use crate::storage::{FileBytes, LoadOptions};

/// The file name.
pub const NAME: &str = "ids.bin";

/// `ids.bin`: n u32 external ids by internal position, then n u32 internal positions by
/// external id.
pub fn write(w: &mut DirWriter, order: &[u32]) -> Result<()> {
    let mut inverse = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        inverse[old as usize] = new as u32;
    }
    let header = Header::new(IDS_MAGIC, [order.len() as u64, 0, 0, 0, 0, 0]);
    w.write_file(
        NAME,
        &header,
        &[bytemuck::cast_slice(order), bytemuck::cast_slice(&inverse)],
    )
}

/// An opened, checked `ids.bin`.
pub struct IdMap {
    bytes: FileBytes,
    n: usize,
}

impl IdMap {
    /// Open `ids.bin` of `dir` if the manifest lists it (placed like the graph).
    pub fn open(dir: &Path, manifest: &Manifest, opts: &LoadOptions) -> Result<Option<IdMap>> {
        if manifest.file(NAME).is_none() {
            return Ok(None);
        }
        let (path, bytes) = super::open_checked(dir, manifest, NAME, opts.graph, opts)?;
        check(&path, bytes.as_bytes(), manifest.n)?;
        Ok(Some(IdMap {
            bytes,
            n: manifest.n,
        }))
    }

    /// Size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes.as_bytes().len() as u64
    }

    /// External id of each stored row.
    #[inline]
    pub fn order(&self) -> &[u32] {
        words(self.bytes.as_bytes(), (HEADER_LEN, self.n))
    }

    /// Stored row of each external id.
    #[inline]
    pub fn inverse(&self) -> &[u32] {
        words(self.bytes.as_bytes(), (HEADER_LEN + 4 * self.n, self.n))
    }
}

fn check(path: &Path, b: &[u8], n: usize) -> Result<()> {
    let h = Header::parse(path, b, IDS_MAGIC)?;
    if h.fields[0] as usize != n || b.len() != HEADER_LEN + 8 * n {
        return Err(Error::format(
            path,
            format!("id map for {} rows, the index has {n}", h.fields[0]),
        ));
    }
    let order = words(b, (HEADER_LEN, n));
    let inverse = words(b, (HEADER_LEN + 4 * n, n));
    let consistent = order
        .iter()
        .enumerate()
        .all(|(i, &ext)| (ext as usize) < n && inverse[ext as usize] as usize == i);
    if !consistent {
        return Err(Error::format(path, "id map is not a permutation"));
    }
    Ok(())
}
