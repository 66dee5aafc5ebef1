//! `ivf.bin`: the coarse lists of an IVF-PQ index ([`crate::ivf`]).
//!
//! ```text
//! header   [n, dim, nlist, 0, 0, 0]
//! payload  nlist x dim f32 coarse centroids, nlist + 1 u32 list offsets, n u32 row ids
//!          in list order
//! ```
//! `codes.bin` of an IVF-PQ index holds its norms and codes in the same list order
//! (position `j` is row `ids[j]`), so scanning a list reads codes sequentially.

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::{DirWriter, Header, Manifest, HEADER_LEN, IVF_MAGIC};
use crate::ivf::IvfView;
use crate::storage::{FileBytes, LoadOptions};

/// The file name.
pub const NAME: &str = "ivf.bin";

/// Write `ivf.bin`: `centroids` (nlist x dim), list `offsets` (nlist + 1) and the rows in
/// list `order` (n).
pub fn write(
    w: &mut DirWriter,
    dim: usize,
    centroids: &[f32],
    offsets: &[u32],
    order: &[u32],
) -> Result<()> {
    let nlist = offsets.len().saturating_sub(1);
    let header = Header::new(
        IVF_MAGIC,
        [order.len() as u64, dim as u64, nlist as u64, 0, 0, 0],
    );
    w.write_file(
        NAME,
        &header,
        &[
            bytemuck::cast_slice(centroids),
            bytemuck::cast_slice(offsets),
            bytemuck::cast_slice(order),
        ],
    )
}

/// An opened, checked `ivf.bin`.
pub struct ListsFile {
    bytes: FileBytes,
    layout: IvfLayout,
    dim: usize,
}

impl ListsFile {
    /// Open and check `ivf.bin` of `dir` (placed like the graph, `opts.graph`).
    pub fn open(dir: &Path, manifest: &Manifest, opts: &LoadOptions) -> Result<ListsFile> {
        let (path, bytes) = super::open_checked(dir, manifest, NAME, opts.graph, opts)?;
        let layout = parse(&path, bytes.as_bytes(), manifest.n, manifest.dim)?;
        Ok(ListsFile {
            bytes,
            layout,
            dim: manifest.dim,
        })
    }

    /// Size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes.as_bytes().len() as u64
    }

    /// The lists, borrowed, for [`crate::ivf::scan`].
    pub fn view(&self) -> IvfView<'_> {
        self.layout.view(self.bytes.as_bytes(), self.dim)
    }
}

/// Check `ivf.bin` and return the byte ranges of centroids, offsets and ids.
fn parse(path: &Path, b: &[u8], n: usize, dim: usize) -> Result<IvfLayout> {
    let h = Header::parse(path, b, IVF_MAGIC)?;
    let [hn, hdim, nlist, _, _, _] = h.fields;
    if hn as usize != n || hdim as usize != dim || nlist == 0 || nlist as usize > n.max(1) {
        return Err(Error::format(
            path,
            format!("header says {hn} x {hdim} in {nlist} lists, the index has {n} x {dim}"),
        ));
    }
    let nlist = nlist as usize;
    let centroids = (HEADER_LEN, nlist * dim);
    let offsets = (centroids.0 + 4 * nlist * dim, nlist + 1);
    let ids = (offsets.0 + 4 * (nlist + 1), n);
    let expect = ids.0 + 4 * n;
    if b.len() != expect {
        return Err(Error::Size {
            path: path.to_path_buf(),
            expected: expect as u64,
            actual: b.len() as u64,
        });
    }
    let layout = IvfLayout {
        centroids,
        offsets,
        ids,
    };
    // Structural check (also without checksums): offsets rise from 0 to n, ids in range,
    // centroids finite. One pass.
    let v = layout.view(b, dim);
    let ok_offsets = v.offsets[0] == 0
        && v.offsets[nlist] as usize == n
        && v.offsets.windows(2).all(|w| w[0] <= w[1]);
    if !ok_offsets || v.ids.iter().any(|&i| i as usize >= n) {
        return Err(Error::format(path, "list offsets or row ids out of range"));
    }
    if v.centroids.iter().any(|x| !x.is_finite()) {
        return Err(Error::format(path, "a coarse centroid is not finite"));
    }
    Ok(layout)
}

/// Byte ranges (start, element count) inside `ivf.bin`.
struct IvfLayout {
    centroids: (usize, usize),
    offsets: (usize, usize),
    ids: (usize, usize),
}

impl IvfLayout {
    fn view<'a>(&self, b: &'a [u8], dim: usize) -> IvfView<'a> {
        let f = |(s, len): (usize, usize)| &b[s..s + 4 * len];
        IvfView {
            dim,
            centroids: bytemuck::cast_slice(f(self.centroids)),
            offsets: bytemuck::cast_slice(f(self.offsets)),
            ids: bytemuck::cast_slice(f(self.ids)),
        }
    }
}
