//! Distances, in one place: every search path ranks by a lower-is-better distance derived
//! from the metric here, whether it compares float32 rows ([`distance`], [`F32Scorer`]),
//! approximate inner products on codes ([`from_ip`], [`IpScorer`]) or bits
//! ([`HammingScorer`]). Scores returned to callers are the negated distance.
//!
//! The kernels themselves (dot products, squared L2, blocked products) are
//! `searchd-kernels`; this module only says how a metric turns them into a distance.

use searchd_kernels::Metric;

use crate::heap::Neighbor;

/// Lower-is-better distance used inside the graph.
#[inline(always)]
pub fn distance(metric: Metric, a: &[f32], b: &[f32]) -> f32 {
    match metric {
        Metric::Cosine | Metric::InnerProduct => -searchd_kernels::dot(a, b),
        Metric::L2 => searchd_kernels::l2sq(a, b),
    }
}

/// Row-major vectors of one dimension.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    /// `n * dim` values: row `i` is `data[i * dim..(i + 1) * dim]`.
    pub data: &'a [f32],
    /// Values per row.
    pub dim: usize,
}

impl<'a> Rows<'a> {
    /// Row `i` (`dim` values). Panics if `i` is out of range.
    #[inline(always)]
    pub fn row(&self, i: u32) -> &'a [f32] {
        let s = i as usize * self.dim;
        &self.data[s..s + self.dim]
    }

    /// Start loading up to `lines` cache lines of row `i` (nothing if `i` is out of range).
    #[inline(always)]
    pub fn prefetch_n(&self, i: u32, lines: usize) {
        let s = i as usize * self.dim;
        if let Some(row) = self.data.get(s..s + self.dim) {
            crate::prefetch::prefetch_lines(row, lines);
        }
    }

    /// Replace each candidate's distance with its exact one to `q` under `metric` (order
    /// kept). Candidates are rows scattered over the whole matrix, each a cache and TLB miss:
    /// the rows [`RESCORE_AHEAD`] candidates ahead are requested while this one is scored, so
    /// their loads overlap the arithmetic.
    pub fn rescore(&self, metric: Metric, q: &[f32], candidates: &mut [Neighbor]) {
        let lines = self.dim.div_ceil(16);
        for c in candidates.iter().take(RESCORE_AHEAD) {
            self.prefetch_n(c.id, lines);
        }
        for j in 0..candidates.len() {
            if let Some(next) = candidates.get(j + RESCORE_AHEAD) {
                self.prefetch_n(next.id, lines);
            }
            candidates[j].dist = distance(metric, q, self.row(candidates[j].id));
        }
    }
}

/// Candidates ahead whose rows [`Rows::rescore`] prefetches.
const RESCORE_AHEAD: usize = 2;

/// Lower-is-better distance from an inner product `ip` of the query with a row, the row's
/// squared norm `norm` and the query's `query_norm` (for l2: `|x|^2 + |q|^2 - 2<q, x>`).
#[inline(always)]
pub fn from_ip(metric: Metric, ip: f32, norm: f32, query_norm: f32) -> f32 {
    match metric {
        Metric::Cosine | Metric::InnerProduct => -ip,
        Metric::L2 => norm + query_norm - 2.0 * ip,
    }
}

/// How far one query is from stored node `id`: float32 rows, or quantized codes.
/// Lower is better.
pub trait Scorer {
    /// Lower-is-better distance from the query to node `id`.
    fn dist(&self, id: u32) -> f32;
    /// Start loading up to `lines` cache lines of `id`'s data.
    fn prefetch_all(&self, id: u32, lines: usize);
    /// Start loading the first cache line of `id`'s data.
    #[inline(always)]
    fn prefetch_first(&self, id: u32) {
        self.prefetch_all(id, 1)
    }
}

/// A float32 query against float32 rows.
pub struct F32Scorer<'a> {
    /// Metric the distance follows.
    pub metric: Metric,
    /// The stored float32 rows.
    pub rows: Rows<'a>,
    /// The prepared query (unit length under cosine), `rows.dim` values.
    pub query: &'a [f32],
}

impl Scorer for F32Scorer<'_> {
    #[inline(always)]
    fn dist(&self, id: u32) -> f32 {
        distance(self.metric, self.query, self.rows.row(id))
    }
    #[inline(always)]
    fn prefetch_all(&self, id: u32, lines: usize) {
        self.rows.prefetch_n(id, lines)
    }
}

/// Traversal distance from an approximate inner product on codes of `len` bytes (SQ8, PQ).
pub struct IpScorer<'a, F: Fn(&[u8]) -> f32> {
    /// Metric that turns the inner product into a distance ([`from_ip`]).
    pub metric: Metric,
    /// Codes of `len` bytes from row 0.
    pub codes: &'a [u8],
    /// Bytes per code.
    pub len: usize,
    /// Squared norms of the rows (l2).
    pub norms: &'a [f32],
    /// The query's squared norm (used by l2).
    pub query_norm: f32,
    /// The approximate inner product of the query with one code.
    pub ip: F,
}

impl<F: Fn(&[u8]) -> f32> Scorer for IpScorer<'_, F> {
    #[inline(always)]
    fn dist(&self, id: u32) -> f32 {
        let s = id as usize * self.len;
        let ip = (self.ip)(&self.codes[s..s + self.len]);
        from_ip(self.metric, ip, self.norms[id as usize], self.query_norm)
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
pub struct HammingScorer<'a> {
    /// Codes of `words` u64 from row 0.
    pub codes: &'a [u64],
    /// u64 words per code.
    pub words: usize,
    /// The query's binary code, `words` words.
    pub query: &'a [u64],
}

impl Scorer for HammingScorer<'_> {
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
