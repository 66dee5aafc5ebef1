//! An opened index directory: the public search entry point.

use std::path::{Path, PathBuf};
use std::time::Instant;

use searchd_kernels::Metric;
use serde::Serialize;

use crate::error::{Error, Result, SearchError};
use crate::format::{self, Header, Manifest, GRAPH_MAGIC, HEADER_LEN, VECTORS_MAGIC};
use crate::hnsw::{self, F32Scorer, GraphView, Rows, SearchCtx};
use std::borrow::Cow;

use crate::storage::{DiskRows, FileBytes, LoadOptions, PartPlacement, Placement, VectorPlacement};

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
    /// Inverted file of coarse k-means lists with product-quantized residuals
    /// ([`crate::ivf`]); `ef` of a search is the number of lists probed.
    IvfPq,
}

impl IndexKind {
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Flat => "flat",
            IndexKind::Hnsw => "hnsw",
            IndexKind::IvfPq => "ivfpq",
        }
    }
    pub fn parse(s: &str) -> Option<IndexKind> {
        match s {
            "flat" => Some(IndexKind::Flat),
            "hnsw" => Some(IndexKind::Hnsw),
            "ivfpq" => Some(IndexKind::IvfPq),
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
    /// `graph.bin` and `ids.bin` (HNSW), `ivf.bin` (IVF-PQ).
    pub graph_bytes: u64,
    /// `codes.bin` of quantized indexes (0 otherwise).
    pub codes_bytes: u64,
    /// Where each part lives.
    pub placement: PartPlacement,
    pub path: PathBuf,
}

/// How a search treats its filter ([`SearchParams::allow`] and [`SearchParams::filter`]),
/// chosen per index (segment) by [`Index::filter_plan`] or forced by [`SearchParams::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterPlan {
    /// No filter: the plain search.
    Unfiltered,
    /// Score every allowed row (iterating the bitmap) and keep the best `k`: exact, and
    /// the cheapest plan when few rows pass.
    Exact,
    /// Traverse the whole graph (IVF: the probed lists), return only passing rows; the
    /// bound is the `ef`-th passing distance. Best when most rows pass.
    Graph,
    /// Traverse only passing nodes, hopping over a failing neighbour to its neighbours
    /// (ACORN-1). For selective filters that still leave too many rows to scan.
    GraphTwoHop,
}

impl FilterPlan {
    pub fn name(self) -> &'static str {
        match self {
            FilterPlan::Unfiltered => "unfiltered",
            FilterPlan::Exact => "exact",
            FilterPlan::Graph => "graph",
            FilterPlan::GraphTwoHop => "graphtwohop",
        }
    }
    pub fn parse(s: &str) -> Option<FilterPlan> {
        [
            FilterPlan::Unfiltered,
            FilterPlan::Exact,
            FilterPlan::Graph,
            FilterPlan::GraphTwoHop,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

impl std::fmt::Display for FilterPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Planner: a filter passing at most `EXACT_ROWS_PER_EF * ef` rows (and at least
/// [`EXACT_MIN_ROWS`]) is answered by the exact scan of those rows.
///
/// Measured on dev-gcide-50k (384-d, HNSW m=16, 1 thread, `examples/filtered_bench.rs`):
/// see the numbers in the comment of [`Index::filter_plan`].
pub const EXACT_ROWS_PER_EF: usize = 64;
/// See [`EXACT_ROWS_PER_EF`].
pub const EXACT_MIN_ROWS: usize = 8192;
/// Planner: a filter passing at most this fraction of the rows is answered exactly too.
/// Measured on 1M synthetic 384-d vectors (`bench/results/filtered-ann-synth1m.md`): at 1%
/// (10,117 rows) two-hop reached recall@10 only 0.41-0.60 (ef 64-256) and the full graph
/// walk 0.97 at 32 ms, against 5.5 ms and recall 1.0 for the exact scan.
pub const EXACT_MAX_SELECTIVITY: f64 = 0.02;
/// Automatic two-hop walks widen their list to `ef * min(TWO_HOP_MAX_BOOST,
/// GRAPH_MIN_SELECTIVITY / selectivity)`: at 1M and 10% passing, two-hop gave recall@10
/// 0.885 / 0.946 / 0.971 at ef 64 / 128 / 256, so the request's ef alone loses recall.
pub const TWO_HOP_MAX_BOOST: f64 = 4.0;
/// Cap of a widened walk's list size.
const MAX_EF_WALK: usize = 16_384;
/// Planner: with more rows than the exact threshold, a filter passing at least this
/// fraction of the rows walks the whole graph ([`FilterPlan::Graph`]); a more selective
/// one walks the passing subgraph ([`FilterPlan::GraphTwoHop`]).
pub const GRAPH_MIN_SELECTIVITY: f64 = 0.25;
/// Planner: an `allow` set passing at least this fraction of the rows (and no `filter`) is
/// walked like an unfiltered search ([`FilterPlan::Graph`]) however few rows it holds: a
/// live collection's deleted rows make every segment's search "filtered" this way. Measured
/// on 1M synthetic 384-d vectors under writes (`bench/results/search-under-writes-*.md`):
/// a 6,475-row graph segment with 60 deleted rows, scanned exactly by the 8,192-row floor,
/// took most of each search's time.
pub const NEAR_UNFILTERED: f64 = 0.9;

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
    /// Only these stored rows (external ids, the ones [`Hit::id`] returns) may be
    /// returned; ANDed with `filter`. Ids at or past [`Index::len`] are ignored. The
    /// planner ([`Index::filter_plan`]) picks how to search from its size.
    pub allow: Option<&'a roaring::RoaringBitmap>,
    /// Force a [`FilterPlan`] instead of the planner's (benchmarks, tests). A plan the
    /// index cannot run is replaced by the nearest one it can (flat: exact; IVF-PQ: graph
    /// for two-hop); `Unfiltered` with a filter runs `Graph`, so a filtered search never
    /// returns a non-matching row. Forced graph plans never fall back to exact.
    pub plan: Option<FilterPlan>,
}

impl SearchParams<'_> {
    pub fn new(k: usize, ef: usize) -> SearchParams<'static> {
        SearchParams {
            k,
            ef,
            deadline: None,
            filter: None,
            oversample: None,
            allow: None,
            plan: None,
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
    vectors: Vectors,
    graph: Option<(FileBytes, GraphLayout)>,
    /// Row order of the stored vectors when it differs from the input's (see `ids.bin`).
    ids: Option<FileBytes>,
    /// Compressed codes (`codes.bin`) of quantized indexes.
    codes: Option<Codes>,
    /// Coarse lists of IVF-PQ indexes (`ivf.bin`).
    ivf: Option<(FileBytes, crate::ivf::IvfLayout)>,
}

/// The float32 vectors, wherever `--vectors` put them.
enum Vectors {
    Mem(FileBytes),
    Disk(DiskRows),
    /// Not opened (`--vectors none`): a quantized index answers from its codes alone.
    Absent,
}

/// `codes.bin` of a quantized index: its bytes, where things are in them, its quantizer.
struct Codes {
    bytes: FileBytes,
    quant: Quantizer,
    /// Squared norms of the float32 vectors (n f32), for l2.
    norms: (usize, usize),
    /// Byte offset of row 0's code.
    start: usize,
    /// Bytes per code.
    len: usize,
    /// Default `oversample` recorded at build time.
    oversample: f32,
}

enum Quantizer {
    Sq8(crate::sq8::Sq8),
    Pq(crate::pq::Pq),
    Binary(crate::binary::Binary),
}

impl Codes {
    fn norms(&self) -> &[f32] {
        let (s, n) = self.norms;
        bytemuck::cast_slice(&self.bytes.as_bytes()[s..s + 4 * n])
    }
    fn rows(&self) -> &[u8] {
        &self.bytes.as_bytes()[self.start..]
    }
}

fn words(bytes: &[u8], (start, len): (usize, usize)) -> &[u32] {
    bytemuck::cast_slice(&bytes[start..start + 4 * len])
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("info", &self.info).finish()
    }
}

/// Rows per positioned read when an exact scan streams `--vectors disk` rows.
const DISK_SCAN_ROWS: usize = 4096;

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
        let entry = |name: &str| {
            manifest
                .file(name)
                .ok_or_else(|| Error::format(&mpath, format!("manifest lists no {name}")))
        };
        let open_file = |name: &str, placement: Placement| -> Result<(PathBuf, FileBytes)> {
            let entry = entry(name)?;
            let path = dir.join(name);
            let fb = FileBytes::open(&path, placement, opts)?;
            format::check_file(&path, fb.as_bytes(), entry, opts.verify)?;
            Ok((path, fb))
        };
        let quantization = manifest
            .params
            .get("quantization")
            .and_then(|q| q.get("kind"))
            .map(|k| k.as_str().unwrap_or("?").to_string());

        // The float32 vectors. Without codes they are what HNSW and flat search traverse,
        // so they must be in memory.
        let vpath = dir.join("vectors.bin");
        if quantization.is_none() && opts.vectors.in_memory().is_none() {
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
        let check_vheader = |bytes: &[u8], len: u64| -> Result<()> {
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
        let vectors = match opts.vectors {
            VectorPlacement::Mmap | VectorPlacement::Ram => {
                let placement = opts.vectors.in_memory().unwrap_or_default();
                let (_, fb) = open_file("vectors.bin", placement)?;
                check_vheader(fb.as_bytes(), fb.as_bytes().len() as u64)?;
                Vectors::Mem(fb)
            }
            VectorPlacement::Disk => {
                let e = entry("vectors.bin")?;
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
                check_vheader(&crate::storage::read_prefix(&vpath, HEADER_LEN)?, len)?;
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
        };
        let vector_bytes = match &vectors {
            Vectors::Absent => 0,
            _ => expect as u64,
        };

        let graph = if kind == IndexKind::Hnsw {
            let (gpath, g) = open_file("graph.bin", opts.graph)?;
            let layout = parse_graph(&gpath, g.as_bytes(), n)?;
            Some((g, layout))
        } else {
            None
        };
        let ivf = if kind == IndexKind::IvfPq {
            let (path, b) = open_file("ivf.bin", opts.graph)?;
            let layout = crate::ivf::parse(&path, b.as_bytes(), n, dim)?;
            Some((b, layout))
        } else {
            None
        };
        let ids = if manifest.file("ids.bin").is_some() {
            let (ipath, ib) = open_file("ids.bin", opts.graph)?;
            check_ids(&ipath, ib.as_bytes(), n)?;
            Some(ib)
        } else {
            None
        };
        let codes = match quantization {
            None if kind == IndexKind::IvfPq => {
                return Err(Error::format(&mpath, "ivfpq index without pq codes"))
            }
            None => None,
            Some(q) => {
                let fits = match kind {
                    IndexKind::Hnsw => true,
                    IndexKind::IvfPq => q == "pq",
                    IndexKind::Flat => false,
                };
                if !fits {
                    return Err(Error::format(
                        &mpath,
                        format!("{q} codes on a {} index", kind.name()),
                    ));
                }
                let expected = match q.as_str() {
                    "sq8" => format::CODES_SQ8,
                    "pq" => format::CODES_PQ,
                    "binary" => format::CODES_BINARY,
                    other => {
                        return Err(Error::format(
                            &mpath,
                            format!(
                            "unknown quantization {other:?} (this searchd knows sq8, pq, binary)"
                        ),
                        ))
                    }
                };
                let (cpath, cb) = open_file("codes.bin", opts.codes)?;
                let oversample = manifest.params["quantization"]["oversample"]
                    .as_f64()
                    .map_or(DEFAULT_OVERSAMPLE, |x| x as f32);
                Some(parse_codes(&cpath, cb, n, dim, expected, oversample)?)
            }
        };
        let graph_bytes = graph.as_ref().map_or(0, |(g, _)| g.as_bytes().len() as u64)
            + ids.as_ref().map_or(0, |i| i.as_bytes().len() as u64)
            + ivf.as_ref().map_or(0, |(b, _)| b.as_bytes().len() as u64);
        let codes_bytes = codes
            .as_ref()
            .map_or(0, |c| c.bytes.as_bytes().len() as u64);
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
            placement: opts.parts(),
            path: dir.to_path_buf(),
        };
        Ok(Index {
            info,
            metric,
            vectors,
            graph,
            ids,
            codes,
            ivf,
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
    /// Whether the float32 vectors were opened (everything but `--vectors none`).
    pub fn has_vectors(&self) -> bool {
        !matches!(self.vectors, Vectors::Absent)
    }

    /// All stored vectors, row-major (unit length under cosine), in storage order, when
    /// they are in memory (`--vectors mmap|ram`): for HNSW indexes that is the graph's
    /// locality order, not the input's; use [`Index::vector`] to look up by id.
    pub fn stored_vectors(&self) -> Option<&[f32]> {
        match &self.vectors {
            Vectors::Mem(fb) => Some(bytemuck::cast_slice(&fb.as_bytes()[HEADER_LEN..])),
            Vectors::Disk(_) | Vectors::Absent => None,
        }
    }

    /// The stored vector of row `id` (normalised under cosine), if it exists and the
    /// vectors were opened. Borrowed from memory, or read from disk (`--vectors disk`).
    ///
    /// A read failure is `None` here; [`Index::try_vector`] tells it apart from "no such id".
    pub fn vector(&self, id: u64) -> Option<Cow<'_, [f32]>> {
        self.try_vector(id).ok().flatten()
    }

    /// The stored vector of row `id`: `Ok(None)` when there is no such row,
    /// [`SearchError::NoVectors`] when the index was opened without its vectors, and
    /// [`SearchError::Storage`] when reading it failed (a disk error is not "not found").
    pub fn try_vector(&self, id: u64) -> std::result::Result<Option<Cow<'_, [f32]>>, SearchError> {
        let Some(row) = self.internal(id) else {
            return Ok(None);
        };
        let row = row as usize;
        let d = self.info.dim;
        match &self.vectors {
            Vectors::Mem(_) => Ok(self
                .stored_vectors()
                .map(|all| Cow::Borrowed(&all[row * d..(row + 1) * d]))),
            Vectors::Disk(rows) => {
                let mut v = vec![0f32; d];
                rows.read_row(row, &mut v)
                    .map_err(|e| SearchError::Storage {
                        message: format!("{}: {e}", rows.path().display()),
                    })?;
                Ok(Some(Cow::Owned(v)))
            }
            Vectors::Absent => Err(SearchError::NoVectors),
        }
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
        let k = k.max(1);
        let dim = self.info.dim;
        let found = match &self.vectors {
            Vectors::Mem(_) => crate::exact::scan_one(
                self.metric,
                self.stored_vectors().unwrap_or_default(),
                dim,
                &q,
                k,
                None,
                None,
            )?,
            Vectors::Disk(rows) => {
                let mut buf = vec![0f32; DISK_SCAN_ROWS * dim];
                let mut best: Vec<crate::Neighbor> = Vec::new();
                for first in (0..self.info.n).step_by(DISK_SCAN_ROWS) {
                    let count = DISK_SCAN_ROWS.min(self.info.n - first);
                    let chunk = &mut buf[..count * dim];
                    rows.read_rows(first, count, chunk)
                        .map_err(|e| SearchError::Storage {
                            message: format!("{}: {e}", rows.path().display()),
                        })?;
                    let part = crate::exact::scan_one(self.metric, chunk, dim, &q, k, None, None)?;
                    best.extend(part.into_iter().map(|mut nb| {
                        nb.id += first as u32;
                        nb
                    }));
                    best.sort_unstable();
                    best.truncate(k);
                }
                best
            }
            Vectors::Absent => return Err(SearchError::NoVectors),
        };
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
    ///
    /// Quantized indexes traverse the graph on their codes, then rescore the best
    /// `oversample * k` candidates with the float32 vectors; opened with `--vectors none`
    /// they return the codes' order and approximate scores (for binary codes, minus the
    /// Hamming distance).
    ///
    /// With [`SearchParams::allow`] or [`SearchParams::filter`], only rows passing both are
    /// returned, searched by the plan [`Index::filter_plan`] picks.
    pub fn search(
        &self,
        query: &[f32],
        p: &SearchParams<'_>,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        self.search_with_plan(query, p).map(|(hits, _)| hits)
    }

    /// Rows of [`SearchParams::allow`] that exist in this index (`None` without `allow`).
    pub fn allowed_rows(&self, p: &SearchParams<'_>) -> Option<usize> {
        let n = u32::try_from(self.info.n).unwrap_or(u32::MAX);
        p.allow.map(|a| a.range_cardinality(..n) as usize)
    }

    /// The plan [`Index::search`] takes for `p` (before any fallback: an automatically
    /// planned graph walk that runs over its budget, or finds fewer than `k` rows, is
    /// finished by the exact scan; [`Index::search_with_plan`] reports that).
    ///
    /// Rule, with `s` allowed rows out of `n` (see [`EXACT_ROWS_PER_EF`],
    /// [`EXACT_MIN_ROWS`], [`GRAPH_MIN_SELECTIVITY`]):
    /// no filter, or `allow` holding every row without `filter`: `Unfiltered`;
    /// `allow` holding at least [`NEAR_UNFILTERED`] of the rows without `filter`: `Graph`;
    /// `s <= max(EXACT_MIN_ROWS, EXACT_ROWS_PER_EF * max(ef, k), EXACT_MAX_SELECTIVITY * n)`:
    /// `Exact`;
    /// `s / n >= GRAPH_MIN_SELECTIVITY`: `Graph`; otherwise `GraphTwoHop`. A `filter`
    /// without `allow` (unknown selectivity) is `Graph`. Flat indexes always scan
    /// (`Exact`), IVF-PQ has no two-hop (`Graph`).
    ///
    /// Measured on dev-gcide-50k (50k x 384, HNSW m=16 efc=200, one thread, thread-CPU
    /// time per query, 500 queries, `examples/filtered_bench.rs`; full tables in
    /// `bench/results/filtered-ann-gcide.md`). Cheapest plan reaching recall@10 >= 0.95:
    ///
    /// | allowed rows | exact scan | graph | two-hop |
    /// |---|---|---|---|
    /// | 4,926 (10%) | 374 us (1.0) | 1453 us (ef 32, 0.951) | 1920 us (ef 128, 0.978) |
    /// | 10,028 (20%) | 2069 us (1.0) | 1545 us (ef 64, 0.966) | 958 us (ef 128, 0.959) |
    /// | 14,796 (30%) | 5604 us (1.0) | 1026 us (ef 64, 0.958) | 2885 us (ef 256, 0.987) |
    /// | 25,060 (50%) | 10230 us (1.0) | 1627 us (ef 128, 0.974) | 2611 us (ef 256, 0.977) |
    ///
    /// So exact wins up to between 5k and 10k rows at ef <= 128 (and ~10-16k at ef 256,
    /// where two-hop costs 2055 us at 20%): `EXACT_MIN_ROWS = 8192`, `EXACT_ROWS_PER_EF =
    /// 64`. Two-hop beats the full walk at 20% and loses at 30%:
    /// `GRAPH_MIN_SELECTIVITY = 0.25`. At 1% and 0.1% (531 and 51 rows) the scan takes
    /// 43 us and 6 us, while forced graph walks took 6-40 ms (they visit most of the
    /// graph before `ef` rows pass) and two-hop did not reach 0.95 below ef 256.
    /// These scans were in external-id order; they now read rows in storage order.
    pub fn filter_plan(&self, p: &SearchParams<'_>) -> FilterPlan {
        let filtered = p.allow.is_some() || p.filter.is_some();
        let plan = match p.plan {
            Some(FilterPlan::Exact) => FilterPlan::Exact,
            Some(_) if !filtered => FilterPlan::Unfiltered,
            Some(FilterPlan::Unfiltered) => FilterPlan::Graph,
            Some(forced) => forced,
            None => self.auto_plan(p),
        };
        match (self.info.kind, plan) {
            (IndexKind::Flat, FilterPlan::Unfiltered) => FilterPlan::Unfiltered,
            (IndexKind::Flat, _) => FilterPlan::Exact,
            (IndexKind::IvfPq, FilterPlan::GraphTwoHop) => FilterPlan::Graph,
            (_, plan) => plan,
        }
    }

    fn auto_plan(&self, p: &SearchParams<'_>) -> FilterPlan {
        let Some(s) = self.allowed_rows(p) else {
            return if p.filter.is_some() {
                FilterPlan::Graph
            } else {
                FilterPlan::Unfiltered
            };
        };
        let n = self.info.n;
        if s >= n && p.filter.is_none() {
            return FilterPlan::Unfiltered;
        }
        // Nearly every row passes (a live collection's deleted rows): the walk costs what an
        // unfiltered one does, which beats scanning the rows even on a segment of a few
        // thousand (the exact floor below is for selective filters).
        if p.filter.is_none() && s as f64 >= NEAR_UNFILTERED * n as f64 {
            return FilterPlan::Graph;
        }
        if s <= EXACT_MIN_ROWS.max(EXACT_ROWS_PER_EF.saturating_mul(p.ef.max(p.k)))
            || (s as f64) <= EXACT_MAX_SELECTIVITY * n as f64
        {
            return FilterPlan::Exact;
        }
        if s as f64 >= GRAPH_MIN_SELECTIVITY * n as f64 {
            FilterPlan::Graph
        } else {
            FilterPlan::GraphTwoHop
        }
    }

    /// [`Index::search`], also returning the plan that produced the hits (`Exact` when an
    /// automatically planned graph walk fell back to the exact scan).
    pub fn search_with_plan(
        &self,
        query: &[f32],
        p: &SearchParams<'_>,
    ) -> std::result::Result<(Vec<Hit>, FilterPlan), SearchError> {
        if p.k == 0 || p.k > MAX_K {
            return Err(SearchError::BadK {
                got: p.k,
                max: MAX_K,
            });
        }
        let q = self.prepare_query(query)?;
        let plan = self.filter_plan(p);
        if plan != FilterPlan::Unfiltered && p.allow.is_some_and(|a| a.is_empty()) {
            return Ok((Vec::new(), plan));
        }
        let n = self.info.n;
        let ext: Option<&[u32]> = self
            .ids
            .as_ref()
            .map(|ids| words(ids.as_bytes(), (HEADER_LEN, n)));
        // Internal id -> passes both filters.
        let pass = |i: u32| {
            p.filter.is_none_or(|f| f(i))
                && p.allow
                    .is_none_or(|a| a.contains(ext.map_or(i, |e| e[i as usize])))
        };
        let auto = p.plan.is_none();
        let walk = Walk {
            plan,
            filter: (plan != FilterPlan::Unfiltered).then_some(&pass),
            budget: if auto && plan != FilterPlan::Unfiltered {
                self.allowed_rows(p).unwrap_or(n).max(p.k)
            } else {
                usize::MAX
            },
            // Fewer than this from a graph walk means it missed rows the scan would find.
            want: if plan == FilterPlan::Unfiltered || !auto {
                0
            } else {
                self.allowed_rows(p).unwrap_or(n).min(p.k)
            },
        };
        let exact = || {
            self.exact_filtered(&q, p, &pass)
                .map(|h| (h, FilterPlan::Exact))
        };
        if plan == FilterPlan::Exact && self.has_vectors() {
            return exact();
        }
        if let (Some(g), Some(codes)) = (self.graph_view(), &self.codes) {
            return match self.search_codes(&g, codes, &q, p, &walk)? {
                Some(hits) => Ok((hits, plan)),
                None => exact(),
            };
        }
        if let (Some((ib, layout)), Some(codes)) = (&self.ivf, &self.codes) {
            let view = layout.view(ib.as_bytes(), self.info.dim);
            return match self.search_ivf(&view, codes, &q, p, &walk)? {
                Some(hits) => Ok((hits, plan)),
                None => exact(),
            };
        }
        let rows = Rows {
            data: self.stored_vectors().ok_or(SearchError::NoVectors)?,
            dim: self.info.dim,
        };
        let found = match self.graph_view() {
            Some(g) => {
                let ctx = SearchCtx {
                    scorer: F32Scorer {
                        metric: self.metric,
                        rows,
                        query: &q,
                    },
                    deadline: p.deadline,
                    filter: walk.filter,
                    two_hop: plan == FilterPlan::GraphTwoHop,
                    budget: walk.budget,
                };
                match hnsw::search(
                    &g,
                    g.entry,
                    g.max_level,
                    &ctx,
                    p.k,
                    self.walk_ef(p, plan, p.ef),
                )? {
                    Some(found) if found.len() >= walk.want => found,
                    _ => return exact(),
                }
            }
            None => {
                if plan != FilterPlan::Unfiltered {
                    return exact();
                }
                crate::exact::scan_one(self.metric, rows.data, rows.dim, &q, p.k, None, p.deadline)?
            }
        };
        Ok((self.hits(found), plan))
    }

    /// Exact top-`k` over the rows passing `pass` (with `allow`: iterating its rows, not
    /// testing every row), on the float32 vectors when they were opened, else on the codes.
    fn exact_filtered(
        &self,
        q: &[f32],
        p: &SearchParams<'_>,
        pass: &dyn Fn(u32) -> bool,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        let found = match &self.vectors {
            Vectors::Mem(_) => {
                let scorer = F32Scorer {
                    metric: self.metric,
                    rows: Rows {
                        data: self.stored_vectors().ok_or(SearchError::NoVectors)?,
                        dim: self.info.dim,
                    },
                    query: q,
                };
                self.scan_rows(&scorer, p, pass)?
            }
            Vectors::Disk(disk) => {
                let mut v = vec![0f32; self.info.dim];
                let scorer = |i: u32| -> std::result::Result<f32, SearchError> {
                    disk.read_row(i as usize, &mut v)
                        .map_err(|e| SearchError::Storage {
                            message: format!("{}: {e}", disk.path().display()),
                        })?;
                    Ok(hnsw::distance(self.metric, q, &v))
                };
                self.scan_rows_with(scorer, p, pass)?
            }
            Vectors::Absent => {
                // Codes only: the scan runs inside the code-specific search.
                let walk = Walk {
                    plan: FilterPlan::Exact,
                    filter: Some(pass),
                    budget: usize::MAX,
                    want: 0,
                };
                if let (Some(g), Some(codes)) = (self.graph_view(), &self.codes) {
                    return Ok(self
                        .search_codes(&g, codes, q, p, &walk)?
                        .unwrap_or_default());
                }
                if let (Some((ib, layout)), Some(codes)) = (&self.ivf, &self.codes) {
                    let view = layout.view(ib.as_bytes(), self.info.dim);
                    return Ok(self
                        .search_ivf(&view, codes, q, p, &walk)?
                        .unwrap_or_default());
                }
                return Err(SearchError::NoVectors);
            }
        };
        Ok(self.hits(found))
    }

    /// Exact top-`k` with an in-memory scorer: allowed rows in chunks, prefetched ahead.
    fn scan_rows<S: hnsw::Scorer>(
        &self,
        scorer: &S,
        p: &SearchParams<'_>,
        pass: &dyn Fn(u32) -> bool,
    ) -> std::result::Result<Vec<crate::Neighbor>, SearchError> {
        const CHUNK: usize = 32;
        let mut top = crate::heap::TopK::new(p.k);
        let mut chunk = [0u32; CHUNK];
        let mut rounds = 0u32;
        let lines = self.info.dim.div_ceil(16);
        let mut next = self.candidate_rows(p);
        loop {
            if rounds.is_multiple_of(32) {
                check_deadline(p.deadline)?;
            }
            rounds += 1;
            let mut len = 0;
            for i in next.by_ref() {
                if pass(i) {
                    scorer.prefetch_first(i);
                    chunk[len] = i;
                    len += 1;
                    if len == CHUNK {
                        break;
                    }
                }
            }
            if len == 0 {
                break;
            }
            for (j, &i) in chunk[..len].iter().enumerate() {
                if let Some(&n) = chunk[..len].get(j + 1) {
                    scorer.prefetch_all(n, lines);
                }
                top.push(crate::Neighbor {
                    dist: scorer.dist(i),
                    id: i,
                });
            }
        }
        Ok(top.into_sorted())
    }

    /// [`Index::scan_rows`] with a fallible scorer (rows read from disk).
    fn scan_rows_with(
        &self,
        mut score: impl FnMut(u32) -> std::result::Result<f32, SearchError>,
        p: &SearchParams<'_>,
        pass: &dyn Fn(u32) -> bool,
    ) -> std::result::Result<Vec<crate::Neighbor>, SearchError> {
        let mut top = crate::heap::TopK::new(p.k);
        for (j, i) in self.candidate_rows(p).enumerate() {
            if j % 1024 == 0 {
                check_deadline(p.deadline)?;
            }
            if pass(i) {
                top.push(crate::Neighbor {
                    dist: score(i)?,
                    id: i,
                });
            }
        }
        Ok(top.into_sorted())
    }

    /// Internal ids an exact scan visits, ascending: the rows of `allow`, or every row.
    ///
    /// When rows are permuted (`ids.bin`), the allowed rows are first marked in a bitset of
    /// internal ids (n/8 bytes, O(s) writes) and read back in storage order, so the scan
    /// reads the vectors front to back instead of in random order: on dev-gcide-50k a 50%
    /// filter's scan took 10.2 ms of CPU in external-id order (memory-bound, ~400 ns a
    /// row) and much less in storage order (see the comment of [`Index::filter_plan`]).
    fn candidate_rows<'s>(&'s self, p: &SearchParams<'s>) -> Box<dyn Iterator<Item = u32> + 's> {
        let n = self.info.n;
        let Some(a) = p.allow else {
            return Box::new(0..n as u32);
        };
        let inside = a.iter().take_while(move |&e| (e as usize) < n);
        match &self.ids {
            None => Box::new(inside),
            Some(ids) => {
                let inverse = words(ids.as_bytes(), (HEADER_LEN + 4 * n, n));
                let mut bits = vec![0u64; n.div_ceil(64)];
                for e in inside {
                    let i = inverse[e as usize] as usize;
                    bits[i / 64] |= 1 << (i % 64);
                }
                Box::new(bits.into_iter().enumerate().flat_map(|(w, mut word)| {
                    std::iter::from_fn(move || {
                        (word != 0).then(|| {
                            let b = word.trailing_zeros();
                            word &= word - 1;
                            (w * 64) as u32 + b
                        })
                    })
                }))
            }
        }
    }

    /// Graph search on the codes (or, for [`FilterPlan::Exact`], a scan of the allowed
    /// rows' codes), rescored. `None`: the walk ran over its budget or found too few.
    fn search_codes<F: Fn(u32) -> bool>(
        &self,
        g: &GraphView<'_>,
        codes: &Codes,
        q: &[f32],
        p: &SearchParams<'_>,
        walk: &Walk<F>,
    ) -> std::result::Result<Option<Vec<Hit>>, SearchError> {
        let r = self.candidates_wanted(codes, p)?;
        let rescore = self.has_vectors();
        let ef = p.ef.max(r);
        let rows = codes.rows();
        let query_norm = searchd_kernels::norm_sq(q);
        let candidates = match &codes.quant {
            Quantizer::Sq8(quant) => {
                let prepared = quant.prepare(q);
                self.traverse(
                    g,
                    p,
                    walk,
                    r,
                    ef,
                    self.ip_scorer(codes, query_norm, |c| prepared.ip(c)),
                )?
            }
            Quantizer::Pq(quant) => {
                let prepared = quant.prepare(q);
                self.traverse(
                    g,
                    p,
                    walk,
                    r,
                    ef,
                    self.ip_scorer(codes, query_norm, |c| prepared.ip(c)),
                )?
            }
            Quantizer::Binary(quant) => {
                let prepared = quant.prepare(q);
                self.traverse(
                    g,
                    p,
                    walk,
                    r,
                    ef,
                    HammingScorer {
                        codes: bytemuck::cast_slice(&rows[..self.info.n * codes.len]),
                        words: codes.len / 8,
                        query: &prepared,
                    },
                )?
            }
        };
        match candidates {
            Some(c) if c.len() >= walk.want => self.finish(q, c, p.k, rescore).map(Some),
            _ => Ok(None),
        }
    }

    /// HNSW search of `r` candidates with list size `ef`, with one scorer type
    /// (monomorphised per code kind, so the distance inlines into the traversal loop).
    fn traverse<S: hnsw::Scorer, F: Fn(u32) -> bool>(
        &self,
        g: &GraphView<'_>,
        p: &SearchParams<'_>,
        walk: &Walk<F>,
        r: usize,
        ef: usize,
        scorer: S,
    ) -> std::result::Result<Option<Vec<crate::Neighbor>>, SearchError> {
        if walk.plan == FilterPlan::Exact {
            let pass = |i: u32| walk.filter.as_ref().is_none_or(|f| f(i));
            let scan = SearchParams { k: r, ..*p };
            return self.scan_rows(&scorer, &scan, &pass).map(Some);
        }
        let ctx = SearchCtx {
            scorer,
            deadline: p.deadline,
            filter: walk.filter.as_ref(),
            two_hop: walk.plan == FilterPlan::GraphTwoHop,
            budget: walk.budget,
        };
        hnsw::search(
            g,
            g.entry,
            g.max_level,
            &ctx,
            r,
            self.walk_ef(p, walk.plan, ef),
        )
    }

    /// The list size of a graph walk: `ef`, widened for automatically planned two-hop walks
    /// by [`TWO_HOP_MAX_BOOST`] rules (forced plans keep the asked `ef`, so benchmarks
    /// measure what they ask for).
    fn walk_ef(&self, p: &SearchParams<'_>, plan: FilterPlan, ef: usize) -> usize {
        if plan != FilterPlan::GraphTwoHop || p.plan.is_some() {
            return ef;
        }
        let Some(s) = self.allowed_rows(p) else {
            return ef;
        };
        let sel = (s as f64 / self.info.n.max(1) as f64).max(1e-9);
        let boost = (GRAPH_MIN_SELECTIVITY / sel).clamp(1.0, TWO_HOP_MAX_BOOST);
        ((ef as f64 * boost).ceil() as usize).min(MAX_EF_WALK)
    }

    fn ip_scorer<'a, F: Fn(&[u8]) -> f32>(
        &self,
        codes: &'a Codes,
        query_norm: f32,
        ip: F,
    ) -> IpScorer<'a, F> {
        IpScorer {
            metric: self.metric,
            codes: codes.rows(),
            len: codes.len,
            norms: codes.norms(),
            query_norm,
            ip,
        }
    }

    /// Rescoring depth for a quantized search: `ceil(oversample * k)` candidates (just `k`
    /// when there are no float32 vectors to rescore with).
    fn candidates_wanted(
        &self,
        codes: &Codes,
        p: &SearchParams<'_>,
    ) -> std::result::Result<usize, SearchError> {
        let over = p.oversample.unwrap_or(codes.oversample);
        if !(1.0..=MAX_OVERSAMPLE).contains(&over) {
            return Err(SearchError::BadOversample {
                got: over,
                max: MAX_OVERSAMPLE,
            });
        }
        Ok(if self.has_vectors() {
            ((p.k as f32 * over).ceil() as usize).max(p.k)
        } else {
            p.k
        })
    }

    /// IVF-PQ: scan the `ef` nearest lists (every list for [`FilterPlan::Exact`]), skipping
    /// rows that fail the filter, then rescore. `None`: too few rows passed (the caller
    /// falls back to the exact scan).
    fn search_ivf<F: Fn(u32) -> bool>(
        &self,
        ivf: &crate::ivf::IvfView<'_>,
        codes: &Codes,
        q: &[f32],
        p: &SearchParams<'_>,
        walk: &Walk<F>,
    ) -> std::result::Result<Option<Vec<Hit>>, SearchError> {
        let r = self.candidates_wanted(codes, p)?;
        let Quantizer::Pq(quant) = &codes.quant else {
            return Err(SearchError::Storage {
                message: "ivfpq index without pq codes".into(),
            });
        };
        let nprobe = if walk.plan == FilterPlan::Exact {
            ivf.nlist()
        } else {
            p.ef
        };
        let probed = ivf.probe(self.metric, q, nprobe);
        let lut = quant.prepare(q);
        let filter = walk.filter.as_ref().map(|f| f as &dyn Fn(u32) -> bool);
        let candidates = crate::ivf::scan(
            ivf,
            self.metric,
            &probed,
            &lut,
            codes.rows(),
            codes.len,
            codes.norms(),
            searchd_kernels::norm_sq(q),
            r,
            filter,
            p.deadline,
        )?;
        if candidates.len() < walk.want {
            return Ok(None);
        }
        self.finish(q, candidates, p.k, self.has_vectors())
            .map(Some)
    }

    /// The best `k` of `candidates` (ids are stored rows), rescored with the float32
    /// vectors when `rescore`, so the returned order and scores are exact.
    fn finish(
        &self,
        q: &[f32],
        candidates: Vec<crate::Neighbor>,
        k: usize,
        rescore: bool,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        if !rescore {
            let mut c = candidates;
            c.truncate(k);
            return Ok(self.hits(c));
        }
        let mut exact: Vec<crate::Neighbor> = Vec::with_capacity(candidates.len());
        match &self.vectors {
            Vectors::Mem(_) => {
                let rows = Rows {
                    data: self.stored_vectors().ok_or(SearchError::NoVectors)?,
                    dim: self.info.dim,
                };
                exact.extend(candidates.iter().map(|c| crate::Neighbor {
                    dist: hnsw::distance(self.metric, q, rows.row(c.id)),
                    id: c.id,
                }));
            }
            Vectors::Disk(disk) => {
                let mut v = vec![0f32; self.info.dim];
                for c in &candidates {
                    disk.read_row(c.id as usize, &mut v)
                        .map_err(|e| SearchError::Storage {
                            message: format!("{}: {e}", disk.path().display()),
                        })?;
                    exact.push(crate::Neighbor {
                        dist: hnsw::distance(self.metric, q, &v),
                        id: c.id,
                    });
                }
            }
            Vectors::Absent => return Err(SearchError::NoVectors),
        }
        exact.sort_unstable();
        exact.truncate(k);
        Ok(self.hits(exact))
    }
}

/// How a graph (or list) search treats the filter, from [`Index::search_with_plan`].
struct Walk<F> {
    plan: FilterPlan,
    /// Internal id -> passes `allow` and `filter`; `None` for `Unfiltered`.
    filter: Option<F>,
    /// Work limit of the walk ([`hnsw::SearchCtx::budget`]).
    budget: usize,
    /// A walk that finds fewer rows than this is redone by the exact scan.
    want: usize,
}

fn check_deadline(deadline: Option<Instant>) -> std::result::Result<(), SearchError> {
    match deadline {
        Some(d) if Instant::now() >= d => Err(SearchError::DeadlineExceeded),
        _ => Ok(()),
    }
}

/// Traversal distance from an approximate inner product on codes of `len` bytes (SQ8, PQ).
struct IpScorer<'a, F: Fn(&[u8]) -> f32> {
    metric: Metric,
    codes: &'a [u8],
    len: usize,
    norms: &'a [f32],
    query_norm: f32,
    ip: F,
}

impl<F: Fn(&[u8]) -> f32> hnsw::Scorer for IpScorer<'_, F> {
    #[inline(always)]
    fn dist(&self, id: u32) -> f32 {
        let s = id as usize * self.len;
        let ip = (self.ip)(&self.codes[s..s + self.len]);
        match self.metric {
            Metric::Cosine | Metric::InnerProduct => -ip,
            Metric::L2 => self.norms[id as usize] + self.query_norm - 2.0 * ip,
        }
    }
    #[inline(always)]
    fn prefetch_all(&self, id: u32, lines: usize) {
        let s = id as usize * self.len;
        if let Some(row) = self.codes.get(s..s + self.len) {
            crate::prefetch::prefetch_bytes(row, lines);
        }
    }
}

/// Traversal distance on binary codes: the Hamming distance (whatever the metric; it
/// approximates the angle between centred vectors, and rescoring restores the metric).
struct HammingScorer<'a> {
    codes: &'a [u64],
    words: usize,
    query: &'a [u64],
}

impl hnsw::Scorer for HammingScorer<'_> {
    #[inline(always)]
    fn dist(&self, id: u32) -> f32 {
        let s = id as usize * self.words;
        crate::binary::hamming(self.query, &self.codes[s..s + self.words]) as f32
    }
    #[inline(always)]
    fn prefetch_all(&self, id: u32, lines: usize) {
        let s = id as usize * self.words;
        if let Some(row) = self.codes.get(s..s + self.words) {
            crate::prefetch::prefetch_bytes(bytemuck::cast_slice(row), lines);
        }
    }
}

/// Check `codes.bin` (layout in `build::write_codes`) and read its quantizer.
fn parse_codes(
    path: &Path,
    bytes: FileBytes,
    n: usize,
    dim: usize,
    expected_kind: u64,
    oversample: f32,
) -> Result<Codes> {
    let b = bytes.as_bytes();
    let h = Header::parse(path, b, format::CODES_MAGIC)?;
    let [hn, hdim, kind, param, _, _] = h.fields;
    if hn as usize != n || hdim as usize != dim || kind != expected_kind {
        return Err(Error::format(
            path,
            format!(
                "header says {hn} x {hdim} codes of kind {kind}, the index has {n} x {dim} of kind {expected_kind}"
            ),
        ));
    }
    let f32s = |start: usize, len: usize| -> Result<Vec<f32>> {
        b.get(start..start + 4 * len)
            .map(|s| bytemuck::cast_slice::<u8, f32>(s).to_vec())
            .ok_or_else(|| Error::format(path, "file ends inside the quantizer parameters"))
    };
    let bad = |e: Error| Error::format(path, e.to_string());
    // (quantizer, bytes of its parameters, bytes per code, codes 64-byte aligned)
    let (quant, params, len, aligned) = match kind {
        format::CODES_SQ8 => {
            let lo = f32s(HEADER_LEN, dim)?;
            let step = f32s(HEADER_LEN + 4 * dim, dim)?;
            let q = crate::sq8::Sq8::from_parts(lo, step).map_err(bad)?;
            (Quantizer::Sq8(q), 8 * dim, dim, false)
        }
        format::CODES_PQ => {
            let m = param as usize;
            if m == 0 || m > dim || !dim.is_multiple_of(m) {
                return Err(Error::format(
                    path,
                    format!("pq m={m} does not divide dimension {dim}"),
                ));
            }
            let c = f32s(HEADER_LEN, crate::pq::KSUB * dim)?;
            let q = crate::pq::Pq::from_parts(dim, m, c).map_err(bad)?;
            (Quantizer::Pq(q), 4 * crate::pq::KSUB * dim, m, true)
        }
        format::CODES_BINARY => {
            let q = crate::binary::Binary::from_parts(f32s(HEADER_LEN, dim)?).map_err(bad)?;
            let len = 8 * q.words();
            (Quantizer::Binary(q), 4 * dim, len, true)
        }
        other => return Err(Error::format(path, format!("unknown code kind {other}"))),
    };
    let norms = (HEADER_LEN + params, n);
    let mut start = norms.0 + 4 * n;
    if aligned {
        start += crate::build::codes_padding(params + 4 * n);
    }
    let expect = start + n * len;
    if b.len() != expect {
        return Err(Error::Size {
            path: path.to_path_buf(),
            expected: expect as u64,
            actual: b.len() as u64,
        });
    }
    Ok(Codes {
        bytes,
        quant,
        norms,
        start,
        len,
        oversample,
    })
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
