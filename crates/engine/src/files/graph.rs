//! `graph.bin`: the HNSW links.
//!
//! ```text
//! header   [n, m, m0, entry point, max level, upper-level words]
//! level0   n x (1 + m0) u32: each node's link count, then its links (padded with 0)
//! levels   n u8: each node's top level (padded to 4 bytes)
//! upper_start  n + 1 u32: each node's first (1 + m)-word block in `upper` (level 1)
//! upper    (1 + m)-word blocks: one per node and level above 0, count then links
//! ```
//! Node ids are stored rows (see `ids.bin`). The reader checks every link is in range, so a
//! damaged file opened without checksums is refused instead of sending a search out of
//! bounds.

use std::path::Path;

use crate::error::{Error, Result};
use crate::files::words;
use crate::format::{DirWriter, Header, Manifest, GRAPH_MAGIC, HEADER_LEN};
use crate::hnsw::{BuiltGraph, GraphView};
use crate::storage::{FileBytes, LoadOptions};

/// The file name.
pub const NAME: &str = "graph.bin";

fn pad4(bytes: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.resize(bytes.len().div_ceil(4) * 4, 0);
    v
}

/// Write a built (and permuted) graph of `n` nodes as `graph.bin`.
pub fn write(w: &mut DirWriter, n: usize, g: &BuiltGraph) -> Result<()> {
    let header = Header::new(
        GRAPH_MAGIC,
        [
            n as u64,
            g.m as u64,
            g.m0 as u64,
            g.entry as u64,
            g.max_level as u64,
            g.upper.len() as u64,
        ],
    );
    let levels = pad4(&g.levels);
    w.write_file(
        NAME,
        &header,
        &[
            bytemuck::cast_slice(&g.level0),
            &levels,
            bytemuck::cast_slice(&g.upper_start),
            bytemuck::cast_slice(&g.upper),
        ],
    )
}

/// An opened `graph.bin`.
pub struct GraphFile {
    bytes: FileBytes,
    layout: GraphLayout,
}

impl GraphFile {
    /// Open and check `graph.bin` of `dir` (placed like the graph, `opts.graph`).
    pub fn open(dir: &Path, manifest: &Manifest, opts: &LoadOptions) -> Result<GraphFile> {
        let (path, bytes) = super::open_checked(dir, manifest, NAME, opts.graph, opts)?;
        let layout = parse(&path, bytes.as_bytes(), manifest.n)?;
        Ok(GraphFile { bytes, layout })
    }

    /// Size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes.as_bytes().len() as u64
    }

    /// The links, borrowed, for [`crate::hnsw::search`].
    #[inline]
    pub fn view(&self) -> GraphView<'_> {
        let (b, l) = (self.bytes.as_bytes(), &self.layout);
        GraphView {
            m: l.m,
            m0: l.m0,
            entry: l.entry,
            max_level: l.max_level,
            level0: words(b, l.level0),
            levels: &b[l.levels.0..l.levels.0 + l.levels.1],
            upper_start: words(b, l.upper_start),
            upper: words(b, l.upper),
        }
    }
}

/// Where things are in `graph.bin`: (byte offset, element count) per section.
struct GraphLayout {
    m: usize,
    m0: usize,
    entry: u32,
    max_level: usize,
    level0: (usize, usize),
    levels: (usize, usize),
    upper_start: (usize, usize),
    upper: (usize, usize),
}

fn parse(path: &Path, b: &[u8], n: usize) -> Result<GraphLayout> {
    let h = Header::parse(path, b, GRAPH_MAGIC)?;
    let [hn, m, m0, entry, max_level, upper_words] = h.fields;
    let bad = |msg: String| Error::format(path, msg);
    if hn as usize != n {
        return Err(bad(format!("graph has {hn} nodes, the vectors {n}")));
    }
    if !(2..=4096).contains(&m) || m0 < m || m0 > 8192 || max_level > 15 {
        return Err(bad(format!(
            "implausible parameters m={m} m0={m0} max_level={max_level}"
        )));
    }
    let (m, m0) = (m as usize, m0 as usize);
    let mut off = HEADER_LEN;
    let mut take = |len_words: usize, unit: usize| {
        let start = off;
        off += (len_words * unit).div_ceil(4) * 4;
        (start, len_words)
    };
    let level0 = take(n * (m0 + 1), 4);
    let levels = take(n, 1);
    let upper_start = take(n + 1, 4);
    let upper = take(upper_words as usize, 4);
    if off != b.len() {
        return Err(Error::Size {
            path: path.to_path_buf(),
            expected: off as u64,
            actual: b.len() as u64,
        });
    }
    let layout = GraphLayout {
        m,
        m0,
        entry: entry as u32,
        max_level: max_level as usize,
        level0,
        levels,
        upper_start,
        upper,
    };
    // Structural check, so a damaged file opened with --no-verify is refused here rather
    // than making a search index out of bounds. One sequential pass over the links.
    if n > 0 && entry as usize >= n {
        return Err(bad(format!("entry point {entry} out of range")));
    }
    let l0 = words(b, layout.level0);
    for node in l0.chunks_exact(m0 + 1) {
        let c = node[0] as usize;
        if c > m0 || node[1..=c].iter().any(|&id| id as usize >= n) {
            return Err(bad("level-0 links out of range".into()));
        }
    }
    let lv = &b[layout.levels.0..layout.levels.0 + n];
    let us = words(b, layout.upper_start);
    let up = words(b, layout.upper);
    let blocks = up.len() / (m + 1);
    for i in 0..n {
        if lv[i] as u64 > max_level || us[i] as usize + lv[i] as usize != us[i + 1] as usize {
            return Err(bad(format!("level table inconsistent at node {i}")));
        }
    }
    if us[n] as usize != blocks || up.len() != blocks * (m + 1) {
        return Err(bad("upper-level table size mismatch".into()));
    }
    for blk in up.chunks_exact(m + 1) {
        let c = blk[0] as usize;
        if c > m || blk[1..=c].iter().any(|&id| id as usize >= n) {
            return Err(bad("upper-level links out of range".into()));
        }
    }
    if n > 0 && lv[entry as usize] as u64 != max_level {
        return Err(bad("entry point is not on the top level".into()));
    }
    Ok(layout)
}
