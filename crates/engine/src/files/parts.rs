//! `partitions.bin`: the routing of a partitioned index ([`crate::partition`]).
//!
//! ```text
//! header   [n, dim, partitions K, members M (sum of partition sizes), 0, 0]
//! payload  K x dim f32 centroids, K + 1 u32 member offsets, M u32 members: partition p's
//!          rows of the index (external ids, ascending) are members[offsets[p]..offsets[p+1]]
//! ```
//! Partition `p`'s own index is the HNSW directory `parts/pNNNNN/` beside this file: its row
//! `j` (its external id) is member `offsets[p] + j`. A row is in one partition, or in more
//! when it lies on a boundary (the build's overlap), so `M >= n`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{DirWriter, Header, Manifest, HEADER_LEN, PARTS_MAGIC};
use crate::storage::{FileBytes, LoadOptions};

/// The file name.
pub const NAME: &str = "partitions.bin";

/// Directory of partition `p`'s index inside the index directory `dir`.
pub fn part_dir(dir: &Path, p: usize) -> PathBuf {
    dir.join("parts").join(format!("p{p:05}"))
}

/// Write `partitions.bin`: `centroids` (K x dim), member `offsets` (K + 1) and `members`.
pub fn write(
    w: &mut DirWriter,
    n: usize,
    dim: usize,
    centroids: &[f32],
    offsets: &[u32],
    members: &[u32],
) -> Result<()> {
    let k = offsets.len().saturating_sub(1);
    let header = Header::new(
        PARTS_MAGIC,
        [n as u64, dim as u64, k as u64, members.len() as u64, 0, 0],
    );
    w.write_file(
        NAME,
        &header,
        &[
            bytemuck::cast_slice(centroids),
            bytemuck::cast_slice(offsets),
            bytemuck::cast_slice(members),
        ],
    )
}

/// An opened, checked `partitions.bin`.
pub struct PartsFile {
    bytes: FileBytes,
    k: usize,
    dim: usize,
    members: usize,
}

impl PartsFile {
    /// Open and check `partitions.bin` of `dir` (placed like the graph, `opts.graph`).
    pub fn open(dir: &Path, manifest: &Manifest, opts: &LoadOptions) -> Result<PartsFile> {
        let (path, bytes) = super::open_checked(dir, manifest, NAME, opts.graph, opts)?;
        let b = bytes.as_bytes();
        let h = Header::parse(&path, b, PARTS_MAGIC)?;
        let [hn, hdim, k, m, _, _] = h.fields;
        let (n, dim) = (manifest.n, manifest.dim);
        if hn as usize != n || hdim as usize != dim || k == 0 || k as usize > n.max(1) {
            return Err(Error::format(
                &path,
                format!("header says {hn} x {hdim} in {k} partitions, the index has {n} x {dim}"),
            ));
        }
        let (k, m) = (k as usize, m as usize);
        let expect = HEADER_LEN + 4 * (k * dim + k + 1 + m);
        if b.len() != expect {
            return Err(Error::Size {
                path,
                expected: expect as u64,
                actual: b.len() as u64,
            });
        }
        let f = PartsFile {
            bytes,
            k,
            dim,
            members: m,
        };
        // Structural check (also without checksums): offsets rise from 0 to M, members in
        // range and ascending within a partition, every row in some partition, centroids
        // finite.
        let offsets = f.offsets();
        let ok_offsets =
            offsets[0] == 0 && offsets[k] as usize == m && offsets.windows(2).all(|w| w[0] <= w[1]);
        if !ok_offsets {
            return Err(Error::format(&path, "member offsets out of range"));
        }
        let mut seen = vec![false; n];
        for p in 0..k {
            let ms = f.members(p);
            if ms.iter().any(|&r| r as usize >= n) || ms.windows(2).any(|w| w[0] >= w[1]) {
                return Err(Error::format(
                    &path,
                    format!("partition {p}'s members are out of range or not ascending"),
                ));
            }
            ms.iter().for_each(|&r| seen[r as usize] = true);
        }
        if let Some(r) = seen.iter().position(|s| !s) {
            return Err(Error::format(&path, format!("row {r} is in no partition")));
        }
        if f.centroids().iter().any(|x| !x.is_finite()) {
            return Err(Error::format(&path, "a centroid is not finite"));
        }
        Ok(f)
    }

    /// Size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes.as_bytes().len() as u64
    }
    /// Number of partitions.
    pub fn partitions(&self) -> usize {
        self.k
    }
    /// The centroids, `K x dim`.
    pub fn centroids(&self) -> &[f32] {
        let b = self.bytes.as_bytes();
        bytemuck::cast_slice(&b[HEADER_LEN..HEADER_LEN + 4 * self.k * self.dim])
    }
    fn offsets(&self) -> &[u32] {
        super::words(
            self.bytes.as_bytes(),
            (HEADER_LEN + 4 * self.k * self.dim, self.k + 1),
        )
    }
    /// Partition `p`'s rows (external ids of the index), ascending.
    pub fn members(&self, p: usize) -> &[u32] {
        let o = self.offsets();
        let all = super::words(
            self.bytes.as_bytes(),
            (
                HEADER_LEN + 4 * (self.k * self.dim + self.k + 1),
                self.members,
            ),
        );
        &all[o[p] as usize..o[p + 1] as usize]
    }
}
