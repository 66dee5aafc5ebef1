//! An opened index directory: the public search entry point.

use std::path::{Path, PathBuf};
use std::time::Instant;

use searchd_kernels::Metric;
use serde::Serialize;

use crate::error::{Error, Result, SearchError};
use crate::format::{self, Header, Manifest, GRAPH_MAGIC, HEADER_LEN, VECTORS_MAGIC};
use crate::hnsw::{self, F32Scorer, GraphView, Rows, SearchCtx};
use crate::storage::{FileBytes, LoadOptions, Placement};

/// Largest `k` a search accepts.
pub const MAX_K: usize = 1000;

/// Quantized indexes rescore the best `oversample * k` candidates of the traversal with
/// float32 vectors; this is the default `oversample` (a search may ask for another).
pub const DEFAULT_OVERSAMPLE: f32 = 4.0;

/// Largest `oversample` a search accepts.
pub const MAX_OVERSAMPLE: f32 = 100.0;

/// Index kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// Exact scan of every vector.
    Flat,
    /// HNSW graph over float32 vectors.
    Hnsw,
}

impl IndexKind {
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Flat => "flat",
            IndexKind::Hnsw => "hnsw",
        }
    }
    pub fn parse(s: &str) -> Option<IndexKind> {
        match s {
            "flat" => Some(IndexKind::Flat),
            "hnsw" => Some(IndexKind::Hnsw),
            _ => None,
        }
    }
}

/// What an index is, for logs, `/stats` and reports.
#[derive(Debug, Clone, Serialize)]
pub struct IndexInfo {
    pub kind: IndexKind,
    pub metric: &'static str,
    pub n: usize,
    pub dim: usize,
    pub params: serde_json::Value,
    /// Bytes of all index files (vectors + graph + id map + codes).
    pub bytes: u64,
    pub vector_bytes: u64,
    /// `graph.bin` and `ids.bin`.
    pub graph_bytes: u64,
    /// `codes.bin` of quantized indexes (0 otherwise).
    pub codes_bytes: u64,
    pub placement: Placement,
    pub path: PathBuf,
}

/// One search's knobs.
#[derive(Clone, Copy)]
pub struct SearchParams<'a> {
    /// Number of hits wanted (1..=1000).
    pub k: usize,
    /// HNSW candidate list size; raised to `k` when below it. Ignored by `flat`.
    pub ef: usize,
    /// Stop and return [`SearchError::DeadlineExceeded`] once this instant passes.
    pub deadline: Option<Instant>,
    /// Only internal ids (see [`Index::internal`]) for which this returns true are
    /// returned; others are still traversed.
    pub filter: Option<&'a (dyn Fn(u32) -> bool + Sync)>,
    /// Quantized indexes: rescore the best `ceil(oversample * k)` candidates (at least
    /// `k`) with float32 vectors; `None` = the index's default ([`DEFAULT_OVERSAMPLE`]).
    /// Ignored by float32-only indexes.
    pub oversample: Option<f32>,
}

impl SearchParams<'_> {
    pub fn new(k: usize, ef: usize) -> SearchParams<'static> {
        SearchParams {
            k,
            ef,
            deadline: None,
            filter: None,
            oversample: None,
        }
    }
}

/// One result: the row id in the base file and a higher-is-better score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Hit {
    pub id: u64,
    pub score: f32,
}

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

/// An opened, immutable index. `Send + Sync`: share it behind an `Arc` between threads.
pub struct Index {
    info: IndexInfo,
    metric: Metric,
    vectors: FileBytes,
    graph: Option<(FileBytes, GraphLayout)>,
    /// Row order of the stored vectors when it differs from the input's (see `ids.bin`).
    ids: Option<FileBytes>,
    /// SQ8 codes (`codes.bin`) and their quantizer, for quantized indexes.
    sq8: Option<(FileBytes, Sq8Layout, crate::sq8::Sq8)>,
}

/// Byte ranges inside `codes.bin`.
struct Sq8Layout {
    norms: (usize, usize),
    codes: usize,
    /// Default `oversample` recorded at build time.
    oversample: f32,
}

fn words(bytes: &[u8], (start, len): (usize, usize)) -> &[u32] {
    bytemuck::cast_slice(&bytes[start..start + 4 * len])
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("info", &self.info).finish()
    }
}

impl Index {
    /// Open the index directory `dir`: read the manifest, map (or read) each file, check
    /// magic, version, sizes and, if `opts.verify`, checksums.
    pub fn open(dir: &Path, opts: &LoadOptions) -> Result<Index> {
        let manifest = Manifest::read(dir)?;
        let mpath = dir.join(format::MANIFEST);
        let kind = IndexKind::parse(&manifest.kind).ok_or_else(|| {
            Error::format(&mpath, format!("unknown index kind {:?}", manifest.kind))
        })?;
        let metric = Metric::parse(&manifest.metric).ok_or_else(|| {
            Error::format(&mpath, format!("unknown metric {:?}", manifest.metric))
        })?;
        let (n, dim) = (manifest.n, manifest.dim);
        let open_file = |name: &str| -> Result<(PathBuf, FileBytes)> {
            let entry = manifest
                .file(name)
                .ok_or_else(|| Error::format(&mpath, format!("manifest lists no {name}")))?;
            let path = dir.join(name);
            let fb = FileBytes::open(&path, opts)?;
            format::check_file(&path, fb.as_bytes(), entry, opts.verify)?;
            Ok((path, fb))
        };

        let (vpath, vectors) = open_file("vectors.bin")?;
        let h = Header::parse(&vpath, vectors.as_bytes(), VECTORS_MAGIC)?;
        if h.fields[0] as usize != n || h.fields[1] as usize != dim || h.fields[2] != 0 {
            return Err(Error::format(
                &vpath,
                format!(
                    "header says {} x {} (dtype {}), manifest says {n} x {dim} float32",
                    h.fields[0], h.fields[1], h.fields[2]
                ),
            ));
        }
        let expect = HEADER_LEN + 4 * n * dim;
        if vectors.as_bytes().len() != expect {
            return Err(Error::Size {
                path: vpath,
                expected: expect as u64,
                actual: vectors.as_bytes().len() as u64,
            });
        }
        let vector_bytes = vectors.as_bytes().len() as u64;

        let graph = if kind == IndexKind::Hnsw {
            let (gpath, g) = open_file("graph.bin")?;
            let layout = parse_graph(&gpath, g.as_bytes(), n)?;
            Some((g, layout))
        } else {
            None
        };
        let ids = if manifest.file("ids.bin").is_some() {
            let (ipath, ib) = open_file("ids.bin")?;
            check_ids(&ipath, ib.as_bytes(), n)?;
            Some(ib)
        } else {
            None
        };
        let sq8 = match manifest
            .params
            .get("quantization")
            .and_then(|q| q.get("kind"))
        {
            None => None,
            Some(k) if k == "sq8" => {
                if kind != IndexKind::Hnsw {
                    return Err(Error::format(&mpath, "sq8 codes on a non-HNSW index"));
                }
                let (cpath, cb) = open_file("codes.bin")?;
                let oversample = manifest.params["quantization"]["oversample"]
                    .as_f64()
                    .map_or(DEFAULT_OVERSAMPLE, |x| x as f32);
                let (layout, quant) = parse_sq8(&cpath, cb.as_bytes(), n, dim, oversample)?;
                Some((cb, layout, quant))
            }
            Some(other) => {
                return Err(Error::format(
                    &mpath,
                    format!("unknown quantization {other} (this searchd knows sq8)"),
                ))
            }
        };
        let graph_bytes = graph.as_ref().map_or(0, |(g, _)| g.as_bytes().len() as u64)
            + ids.as_ref().map_or(0, |i| i.as_bytes().len() as u64);
        let codes_bytes = sq8
            .as_ref()
            .map_or(0, |(c, _, _)| c.as_bytes().len() as u64);
        let info = IndexInfo {
            kind,
            metric: metric.name(),
            n,
            dim,
            params: manifest.params.clone(),
            bytes: vector_bytes + graph_bytes + codes_bytes,
            vector_bytes,
            graph_bytes,
            codes_bytes,
            placement: opts.placement,
            path: dir.to_path_buf(),
        };
        Ok(Index {
            info,
            metric,
            vectors,
            graph,
            ids,
            sq8,
        })
    }

    /// External id (row of the input file) of stored row `internal`.
    #[inline]
    fn external(&self, internal: u32) -> u64 {
        match &self.ids {
            Some(ids) => words(ids.as_bytes(), (HEADER_LEN, self.info.n))[internal as usize] as u64,
            None => internal as u64,
        }
    }

    /// Stored row (internal id) of external id `id`, if it exists. Filters
    /// ([`SearchParams::filter`]) take internal ids: metadata for filtering is meant to be
    /// laid out in storage order, so the hot loop needs no id translation.
    pub fn internal(&self, id: u64) -> Option<u32> {
        let id = usize::try_from(id).ok().filter(|&i| i < self.info.n)?;
        Some(match &self.ids {
            Some(ids) => words(ids.as_bytes(), (HEADER_LEN + 4 * self.info.n, self.info.n))[id],
            None => id as u32,
        })
    }

    pub fn info(&self) -> &IndexInfo {
        &self.info
    }
    pub fn metric(&self) -> Metric {
        self.metric
    }
    pub fn dim(&self) -> usize {
        self.info.dim
    }
    pub fn len(&self) -> usize {
        self.info.n
    }
    pub fn is_empty(&self) -> bool {
        self.info.n == 0
    }

    /// All stored vectors, row-major (unit length under cosine), in storage order: for
    /// HNSW indexes that is the graph's locality order, not the input's; use
    /// [`Index::vector`] to look up by id.
    pub fn stored_vectors(&self) -> &[f32] {
        bytemuck::cast_slice(&self.vectors.as_bytes()[HEADER_LEN..])
    }

    /// The stored vector of row `id` (normalised under cosine), if it exists.
    pub fn vector(&self, id: u64) -> Option<&[f32]> {
        let row = self.internal(id)? as usize;
        let d = self.info.dim;
        Some(&self.stored_vectors()[row * d..(row + 1) * d])
    }

    fn graph_view(&self) -> Option<GraphView<'_>> {
        let (g, l) = self.graph.as_ref()?;
        let b = g.as_bytes();
        Some(GraphView {
            m: l.m,
            m0: l.m0,
            entry: l.entry,
            max_level: l.max_level,
            level0: words(b, l.level0),
            levels: &b[l.levels.0..l.levels.0 + l.levels.1],
            upper_start: words(b, l.upper_start),
            upper: words(b, l.upper),
        })
    }

    /// Check a query and bring it to the form the index compares (unit length under cosine).
    pub fn prepare_query(&self, query: &[f32]) -> std::result::Result<Vec<f32>, SearchError> {
        if query.len() != self.info.dim {
            return Err(SearchError::Dimension {
                expected: self.info.dim,
                got: query.len(),
            });
        }
        if let Some(index) = query.iter().position(|x| !x.is_finite()) {
            return Err(SearchError::NonFinite { index });
        }
        let mut q = query.to_vec();
        if self.metric == Metric::Cosine && !searchd_kernels::normalize(&mut q) {
            return Err(SearchError::ZeroVector);
        }
        Ok(q)
    }

    /// Exact top-`k` by scanning every stored vector (single thread), whatever the index
    /// kind: the reference an approximate answer is checked against.
    pub fn exact_search(
        &self,
        query: &[f32],
        k: usize,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        let q = self.prepare_query(query)?;
        let found = crate::exact::scan_one(
            self.metric,
            self.stored_vectors(),
            self.info.dim,
            &q,
            k.max(1),
            None,
            None,
        )?;
        Ok(self.hits(found))
    }

    fn hits(&self, found: Vec<crate::Neighbor>) -> Vec<Hit> {
        found
            .into_iter()
            .map(|n| Hit {
                id: self.external(n.id),
                score: -n.dist,
            })
            .collect()
    }

    /// Top-`k` search. Scores are higher-is-better: similarity for cosine and inner
    /// product, negative squared distance for l2. Hits are sorted best first.
    pub fn search(
        &self,
        query: &[f32],
        p: &SearchParams<'_>,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        if p.k == 0 || p.k > MAX_K {
            return Err(SearchError::BadK {
                got: p.k,
                max: MAX_K,
            });
        }
        let q = self.prepare_query(query)?;
        let rows = Rows {
            data: self.stored_vectors(),
            dim: self.info.dim,
        };
        if let (Some(g), Some((cb, layout, quant))) = (self.graph_view(), &self.sq8) {
            let over = p.oversample.unwrap_or(layout.oversample);
            if !(1.0..=MAX_OVERSAMPLE).contains(&over) {
                return Err(SearchError::BadOversample {
                    got: over,
                    max: MAX_OVERSAMPLE,
                });
            }
            let r = ((p.k as f32 * over).ceil() as usize).max(p.k);
            let b = cb.as_bytes();
            let pq = quant.prepare(&q);
            let ctx = SearchCtx {
                scorer: Sq8Scorer {
                    metric: self.metric,
                    codes: &b[layout.codes..],
                    norms: bytemuck::cast_slice(
                        &b[layout.norms.0..layout.norms.0 + 4 * layout.norms.1],
                    ),
                    dim: self.info.dim,
                    query: &pq,
                    query_norm: searchd_kernels::norm_sq(&q),
                },
                deadline: p.deadline,
                filter: p.filter,
            };
            let candidates = hnsw::search(&g, g.entry, g.max_level, &ctx, r, p.ef.max(r))?;
            // Rescore with the float32 vectors: the order returned is exact.
            let mut exact: Vec<crate::Neighbor> = candidates
                .iter()
                .map(|c| crate::Neighbor {
                    dist: hnsw::distance(self.metric, &q, rows.row(c.id)),
                    id: c.id,
                })
                .collect();
            exact.sort_unstable();
            exact.truncate(p.k);
            return Ok(self.hits(exact));
        }
        let found = match self.graph_view() {
            Some(g) => {
                let ctx = SearchCtx {
                    scorer: F32Scorer {
                        metric: self.metric,
                        rows,
                        query: &q,
                    },
                    deadline: p.deadline,
                    filter: p.filter,
                };
                hnsw::search(&g, g.entry, g.max_level, &ctx, p.k, p.ef)?
            }
            None => crate::exact::scan_one(
                self.metric,
                rows.data,
                rows.dim,
                &q,
                p.k,
                p.filter.map(|f| f as &dyn Fn(u32) -> bool),
                p.deadline,
            )?,
        };
        Ok(self.hits(found))
    }
}

/// Traversal distance on SQ8 codes (see [`crate::sq8`]).
struct Sq8Scorer<'a> {
    metric: Metric,
    codes: &'a [u8],
    norms: &'a [f32],
    dim: usize,
    query: &'a crate::sq8::Sq8Query,
    query_norm: f32,
}

impl hnsw::Scorer for Sq8Scorer<'_> {
    #[inline(always)]
    fn dist(&self, id: u32) -> f32 {
        let s = id as usize * self.dim;
        let ip = self.query.ip(&self.codes[s..s + self.dim]);
        match self.metric {
            Metric::Cosine | Metric::InnerProduct => -ip,
            Metric::L2 => self.norms[id as usize] + self.query_norm - 2.0 * ip,
        }
    }
    #[inline(always)]
    fn prefetch_all(&self, id: u32, lines: usize) {
        let s = id as usize * self.dim;
        if let Some(row) = self.codes.get(s..s + self.dim) {
            crate::prefetch::prefetch_bytes(row, lines);
        }
    }
}

/// Check `codes.bin` of an SQ8 index and read its quantizer.
fn parse_sq8(
    path: &Path,
    b: &[u8],
    n: usize,
    dim: usize,
    oversample: f32,
) -> Result<(Sq8Layout, crate::sq8::Sq8)> {
    let h = Header::parse(path, b, format::CODES_MAGIC)?;
    if h.fields[0] as usize != n || h.fields[1] as usize != dim || h.fields[2] != format::CODES_SQ8
    {
        return Err(Error::format(
            path,
            format!(
                "header says {} x {} codes of kind {}, the index has {n} x {dim} sq8",
                h.fields[0], h.fields[1], h.fields[2]
            ),
        ));
    }
    let expect = HEADER_LEN + 8 * dim + 4 * n + n * dim;
    if b.len() != expect {
        return Err(Error::Size {
            path: path.to_path_buf(),
            expected: expect as u64,
            actual: b.len() as u64,
        });
    }
    let f32s = |start: usize, len: usize| -> Vec<f32> {
        bytemuck::cast_slice::<u8, f32>(&b[start..start + 4 * len]).to_vec()
    };
    let lo = f32s(HEADER_LEN, dim);
    let step = f32s(HEADER_LEN + 4 * dim, dim);
    let quant =
        crate::sq8::Sq8::from_parts(lo, step).map_err(|e| Error::format(path, e.to_string()))?;
    let norms = (HEADER_LEN + 8 * dim, n);
    Ok((
        Sq8Layout {
            norms,
            codes: norms.0 + 4 * n,
            oversample,
        },
        quant,
    ))
}

fn check_ids(path: &Path, b: &[u8], n: usize) -> Result<()> {
    let h = Header::parse(path, b, crate::format::IDS_MAGIC)?;
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

fn parse_graph(path: &Path, b: &[u8], n: usize) -> Result<GraphLayout> {
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
