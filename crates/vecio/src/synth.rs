//! Deterministic synthetic corpus that behaves like real sentence embeddings
//! (`searchd dataset synth`).
//!
//! Uniform random vectors are a poor stand-in for text embeddings: in 384 dimensions they are
//! all nearly orthogonal, every point's nearest neighbours are barely closer than a random
//! point, and approximate search is either hopeless or trivial depending on `n`. Real
//! embeddings (MiniLM, BGE, E5...) instead have a decaying spectrum (a few dozen directions
//! carry most of the variance), topical clusters of very different sizes, a common mean
//! direction (every pair has a positive cosine), and queries that are distributed a little
//! differently from the passages. The generator reproduces those properties.
//!
//! ## Generative process
//!
//! Model (drawn once from the seed, independent of `n`):
//! 1. An orthonormal basis `B` of `rank` directions in `R^dim` (Gram-Schmidt on Gaussian
//!    vectors), plus two more orthonormal unit vectors: the shared *mean direction* `m` and
//!    the *query direction* `q`.
//! 2. A power-law spectrum over the latent axes: axis `j` has variance
//!    `λ_j ∝ (j + 1)^-spectrum_decay`, normalised so `Σ λ_j = 1`. The intrinsic
//!    dimensionality is therefore well below `dim`.
//! 3. `clusters` topic centres `c_k ~ N(0, diag(λ))` in the latent space, and Zipf weights
//!    `w_k ∝ (k + 1)^-cluster_zipf` giving a few huge topics and a long tail of small ones.
//!    Each topic also gets its own *sharpness* `t_k`, log-uniform in
//!    `[1/spread_range, spread_range]`: some topics are tight, others diffuse.
//!
//! Each base vector ("passage"):
//! 1. picks a topic `k` with probability `w_k`,
//! 2. draws a latent point `x = c_k + cluster_spread · t_k · (sqrt(λ) ⊙ z)`, `z ~ N(0, I_rank)`
//!    (approximately: each coordinate is a scaled sum of four uniforms, for speed),
//! 3. maps it to `v = B^T x + mean_weight · m + noise · g / sqrt(dim)`, `g` with independent
//!    zero-mean unit-variance coordinates (uniform, which is cheaper to draw than Gaussian and
//!    indistinguishable after projection; this part stands for everything the low-rank
//!    model misses),
//! 4. is normalised to unit length.
//!
//! Each query is made the same way but with a distribution shift, like short queries
//! against longer passages: its own spread around the topic centre (`query_spread` instead
//! of `cluster_spread`), and an extra common offset `query_shift · q` in a direction the
//! passages do not use. Queries are fresh draws, never copies of base rows.
//!
//! Cost: about `rank · dim` multiply-adds plus `dim + rank` Gaussian draws per vector, so a
//! million 384-d vectors take a few seconds per core.
//!
//! ## How close to real embeddings
//!
//! The defaults were tuned with `examples/synth_stats.rs` against 50k real
//! all-MiniLM-L6-v2 embeddings of dictionary definitions (2k short-word queries). Statistics
//! on 2k base rows (cosines, spectrum) and 200 queries or 200 held-out base rows against 20k
//! base rows (neighbours; `lid` is the MLE local intrinsic dimensionality at k = 20):
//!
//! | statistic | real MiniLM | synth (defaults) | uniform on the sphere |
//! |---|---|---|---|
//! | mean pairwise cosine, base / queries / query-base | 0.139 / 0.183 / 0.110 | 0.131 / 0.177 / 0.108 | 0.000 |
//! | variance in top 10% principal directions | 0.449 | 0.414 | 0.184 |
//! | participation ratio / directions for 90% variance | 115 / 183 | 138 / 195 | 323 / 302 |
//! | queries: top-1 / top-10 similarity, ratio | 0.530 / 0.403, 1.32 | 0.497 / 0.387, 1.32 | 0.203 / 0.167, 1.22 |
//! | queries: local intrinsic dimensionality | 34 | 42 | 128 |
//! | base rows: top-1 / top-10 similarity, ratio | 0.606 / 0.495, 1.23 | 0.599 / 0.451, 1.38 | 0.205 / 0.168, 1.22 |
//! | base rows: local intrinsic dimensionality | 27 | 29 | 124 |
//!
//! HNSW (searchd, M = 16, ef_construction = 200) recall@10 at ef = 16 / 32 / 64 / 128:
//! real 50k: 0.742 / 0.836 / 0.910 / 0.954; synth 50k: 0.816 / 0.885 / 0.927 / 0.958;
//! synth 100k (1000 queries): 0.864 / 0.928 / 0.956 / 0.975.
//!
//! ## Determinism
//!
//! All randomness comes from ChaCha8 streams keyed by `seed`: the model from one stream,
//! base rows in fixed chunks of [`CHUNK_ROWS`] rows each from the stream of its chunk index,
//! queries likewise from a separate range of streams. Chunks are generated in parallel
//! (rayon), and the output is identical whatever the number of threads. As the model does
//! not depend on `n` or `queries`, the first `m` rows for `n > m` equal the rows for `n = m`
//! (same for queries).

use indicatif::ProgressBar;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

/// Rows generated from one random stream. Part of the output format: changing it changes
/// the data for a given seed.
pub const CHUNK_ROWS: usize = 1024;

const MODEL_STREAM: u64 = 0;
const BASE_STREAM: u64 = 1;
const QUERY_STREAM: u64 = 1 << 62;

/// Parameters of [`generate`]. Build with struct update syntax:
/// `SynthParams { n: 100_000, dim: 384, ..SynthParams::default() }`.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthParams {
    /// Number of base vectors.
    pub n: usize,
    /// Dimensions (must be at least 1).
    pub dim: usize,
    /// Number of query vectors.
    pub queries: usize,
    /// Seed: the same parameters and seed give bit-identical output.
    pub seed: u64,
    /// Rank of the structured part (number of latent directions); clamped to `dim`.
    pub rank: usize,
    /// Power-law exponent of the latent spectrum: axis `j` has variance `∝ (j+1)^-decay`.
    pub spectrum_decay: f32,
    /// Number of topic centres.
    pub clusters: usize,
    /// Zipf exponent of the topic sizes (0 = equal sizes).
    pub cluster_zipf: f32,
    /// Sub-topics per topic (0 = none): finer centres around each topic centre, so that
    /// passages have a few close relatives inside a broader topical neighbourhood.
    pub subtopics: usize,
    /// Spread of sub-topic centres around their topic centre, relative to the spread of
    /// topic centres.
    pub subtopic_spread: f32,
    /// Standard deviation of a passage around its topic centre, relative to the spread of
    /// the centres themselves.
    pub cluster_spread: f32,
    /// Per-topic spread multipliers are log-uniform in `[1/spread_range, spread_range]`.
    pub spread_range: f32,
    /// Length of the shared mean direction relative to the (unit) spread of topic centres;
    /// sets the mean pairwise cosine.
    pub mean_weight: f32,
    /// Length of the isotropic full-dimensional noise relative to the topic spread.
    pub noise: f32,
    /// Spread of a query around its topic centre (replaces `cluster_spread`).
    pub query_spread: f32,
    /// Length of the isotropic noise of queries (replaces `noise`).
    pub query_noise: f32,
    /// Length of the common query offset (the query/passage distribution shift).
    pub query_shift: f32,
}

impl Default for SynthParams {
    /// 100k x 384 with 1000 queries, seed 42, and shape parameters tuned so that summary
    /// statistics resemble all-MiniLM-L6-v2 embeddings of English text.
    fn default() -> Self {
        SynthParams {
            n: 100_000,
            dim: 384,
            queries: 1_000,
            seed: 42,
            rank: 128,
            spectrum_decay: 0.3,
            clusters: 4_000,
            cluster_zipf: 0.8,
            subtopics: 8,
            subtopic_spread: 0.6,
            cluster_spread: 0.6,
            spread_range: 1.5,
            mean_weight: 0.6,
            noise: 0.8,
            query_spread: 0.5,
            query_noise: 1.3,
            query_shift: 0.6,
        }
    }
}

/// Generated corpus: `base` is `n x dim`, `queries` is `queries x dim`, row-major, every row
/// of unit length.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthData {
    /// The base vectors ("passages"), `n x dim`, row-major.
    pub base: Vec<f32>,
    /// The query vectors, `queries x dim`, row-major.
    pub queries: Vec<f32>,
    /// Dimensions per vector.
    pub dim: usize,
}

fn stream_rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

fn normal<R: Rng + ?Sized>(rng: &mut R) -> f32 {
    StandardNormal.sample(rng)
}

/// Vectors whose low-rank part is computed together (register tile height).
const GROUP: usize = 4;
/// `out[p][c] += Σ_j xt[j][p] · basis[j][c]` for `p < rows`, where `xt` is `rank x GROUP`
/// (columns past `rows` are zero), `basis` is `rank x dim` and `out` is `rows x dim`.
///
/// Every output element is accumulated separately, in the order of `j`, with a multiply and
/// an add (never a fused multiply-add), so the result is bit-identical whichever vector width
/// the compiler uses: the AVX path below only makes it faster.
fn add_matmul(xt: &[[f32; GROUP]], basis: &[f32], dim: usize, out: &mut [f32], rows: usize) {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        if std::is_x86_feature_detected!("avx") {
            // SAFETY: `add_matmul_avx` only requires the CPU to support AVX, which was
            // checked just above.
            unsafe { add_matmul_avx(xt, basis, dim, out, rows) };
            return;
        }
    }
    add_matmul_tiled::<8>(xt, basis, dim, out, rows)
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx")]
unsafe fn add_matmul_avx(
    xt: &[[f32; GROUP]],
    basis: &[f32],
    dim: usize,
    out: &mut [f32],
    rows: usize,
) {
    add_matmul_tiled::<16>(xt, basis, dim, out, rows)
}

/// The kernel, tiled `GROUP x TILE` so the accumulators stay in registers; the compiler
/// vectorises the inner loops.
#[inline(always)]
fn add_matmul_tiled<const TILE: usize>(
    xt: &[[f32; GROUP]],
    basis: &[f32],
    dim: usize,
    out: &mut [f32],
    rows: usize,
) {
    let full = dim / TILE * TILE;
    for c0 in (0..full).step_by(TILE) {
        let mut acc = [[0f32; TILE]; GROUP];
        for (xj, brow) in xt.iter().zip(basis.chunks_exact(dim)) {
            let b: &[f32; TILE] = brow[c0..c0 + TILE].try_into().unwrap();
            for p in 0..GROUP {
                for c in 0..TILE {
                    acc[p][c] += xj[p] * b[c];
                }
            }
        }
        for (a, o) in acc.iter().zip(out.chunks_exact_mut(dim)).take(rows) {
            for (o, v) in o[c0..c0 + TILE].iter_mut().zip(a) {
                *o += v;
            }
        }
    }
    for c in full..dim {
        for p in 0..rows {
            let mut s = 0f32;
            for (xj, brow) in xt.iter().zip(basis.chunks_exact(dim)) {
                s += xj[p] * brow[c];
            }
            out[p * dim + c] += s;
        }
    }
}

/// Approximately standard normal: the sum of four uniform 16-bit values (Irwin-Hall with
/// n = 4, scaled to unit variance; bounded at ±3.46). One 64-bit draw, no branches: several
/// times cheaper than an exact Gaussian, which matters for the per-vector draws.
fn fast_normal(rng: &mut ChaCha8Rng) -> f32 {
    let r = rng.next_u64();
    let sum = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
    (sum as f32 - 4.0 * 32767.5) * (3f32.sqrt() / 65536.0)
}

/// Fills `out` with independent zero-mean noise of standard deviation `sd`: uniform, from
/// 16 random bits each (four per 64-bit draw). Much cheaper than Gaussian draws, and after
/// summing hundreds of coordinates into inner products the shape does not matter.
fn fill_noise(rng: &mut ChaCha8Rng, out: &mut [f32], sd: f32) {
    // Uniform on (-1/2, 1/2) has variance 1/12.
    let scale = sd * 12f32.sqrt() / 65536.0;
    let offset = 32767.5f32;
    let mut chunks = out.chunks_exact_mut(4);
    for c in &mut chunks {
        let r = rng.next_u64();
        for (i, o) in c.iter_mut().enumerate() {
            *o = (((r >> (16 * i)) & 0xffff) as f32 - offset) * scale;
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let r = rng.next_u64();
        for (i, o) in rest.iter_mut().enumerate() {
            *o = (((r >> (16 * i)) & 0xffff) as f32 - offset) * scale;
        }
    }
}

struct Model {
    dim: usize,
    rank: usize,
    /// `rank x dim`, orthonormal rows.
    basis: Vec<f32>,
    mean_dir: Vec<f32>,
    query_dir: Vec<f32>,
    /// Per-axis standard deviation `sqrt(λ_j)`.
    sd: Vec<f32>,
    /// `(clusters * subs) x rank` latent sub-topic centres.
    centres: Vec<f32>,
    subs: usize,
    /// Per-topic spread multiplier.
    sharpness: Vec<f32>,
    /// Cumulative topic probabilities.
    cdf: Vec<f64>,
}

/// `k` orthonormal vectors in `R^dim` (as many as fit: at most `dim`; the rest are random
/// unit vectors).
fn orthonormal(rng: &mut ChaCha8Rng, k: usize, dim: usize) -> Vec<Vec<f32>> {
    let mut out: Vec<Vec<f32>> = Vec::with_capacity(k);
    for i in 0..k {
        loop {
            let mut v: Vec<f64> = (0..dim).map(|_| normal(rng) as f64).collect();
            if i < dim {
                // Two passes of Gram-Schmidt for numerical orthogonality.
                for _ in 0..2 {
                    for u in &out[..i] {
                        let dot: f64 = v.iter().zip(u).map(|(a, &b)| a * b as f64).sum();
                        for (a, &b) in v.iter_mut().zip(u) {
                            *a -= dot * b as f64;
                        }
                    }
                }
            }
            let norm = v.iter().map(|a| a * a).sum::<f64>().sqrt();
            if norm > 1e-6 {
                out.push(v.iter().map(|a| (a / norm) as f32).collect());
                break;
            }
        }
    }
    out
}

impl Model {
    fn new(p: &SynthParams) -> Model {
        assert!(p.dim > 0, "synth: dim must be at least 1");
        let dim = p.dim;
        let rank = p.rank.clamp(1, dim);
        let clusters = p.clusters.max(1);
        let mut rng = stream_rng(p.seed, MODEL_STREAM);
        // Mean and query directions first so they stay orthogonal to each other even when
        // dim is tiny; then the basis.
        let mut dirs = orthonormal(&mut rng, rank + 2, dim).into_iter();
        let mean_dir = dirs.next().unwrap();
        let query_dir = dirs.next().unwrap();
        let basis: Vec<f32> = dirs.flatten().collect();
        let lam: Vec<f64> = (0..rank)
            .map(|j| ((j + 1) as f64).powf(-(p.spectrum_decay as f64)))
            .collect();
        let total: f64 = lam.iter().sum();
        let sd: Vec<f32> = lam.iter().map(|l| (l / total).sqrt() as f32).collect();
        let ln_range = (p.spread_range.max(1.0) as f64).ln();
        let sharpness: Vec<f32> = (0..clusters)
            .map(|_| (rng.random_range(-1.0..=1.0) * ln_range).exp() as f32)
            .collect();
        let subs = p.subtopics.max(1);
        let sub_sd = if p.subtopics == 0 {
            0.0
        } else {
            p.subtopic_spread
        };
        let mut centres = Vec::with_capacity(clusters * subs * rank);
        let mut topic = vec![0f32; rank];
        for &t in &sharpness {
            for (c, s) in topic.iter_mut().zip(&sd) {
                *c = s * normal(&mut rng);
            }
            for _ in 0..subs {
                for (&c, s) in topic.iter().zip(&sd) {
                    centres.push(c + sub_sd * t * s * normal(&mut rng));
                }
            }
        }
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (0..clusters)
            .map(|k| {
                acc += ((k + 1) as f64).powf(-(p.cluster_zipf as f64));
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Model {
            dim,
            rank,
            basis,
            mean_dir,
            query_dir,
            sd,
            centres,
            sharpness,
            subs,
            cdf,
        }
    }

    fn pick_topic(&self, rng: &mut ChaCha8Rng) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }

    /// Fills `out` (whole rows) with vectors; `query` selects the query distribution.
    fn fill(&self, p: &SynthParams, rng: &mut ChaCha8Rng, out: &mut [f32], query: bool) {
        let (dim, rank) = (self.dim, self.rank);
        let spread = if query {
            p.query_spread
        } else {
            p.cluster_spread
        };
        let noise = if query { p.query_noise } else { p.noise };
        let noise_sd = noise / (dim as f32).sqrt();
        // Latent coordinates of a group of GROUP vectors, transposed (`xt[j][p]`); zero
        // columns pad a short last group.
        let mut xt = vec![[0f32; GROUP]; rank];
        for group in out.chunks_mut(GROUP * dim) {
            let rows = group.len() / dim;
            xt.iter_mut().for_each(|a| *a = [0.0; GROUP]);
            for (i, v) in group.chunks_exact_mut(dim).enumerate() {
                let k = self.pick_topic(rng);
                let f = k * self.subs + rng.random_range(0..self.subs);
                let centre = &self.centres[f * rank..(f + 1) * rank];
                let s = spread * self.sharpness[k];
                for ((xj, &c), &sd) in xt.iter_mut().zip(centre).zip(&self.sd) {
                    xj[i] = c + s * sd * fast_normal(rng);
                }
                // Isotropic noise and the common offsets.
                fill_noise(rng, v, noise_sd);
                for (o, &m) in v.iter_mut().zip(&self.mean_dir) {
                    *o += p.mean_weight * m;
                }
                if query && p.query_shift != 0.0 {
                    for (o, &q) in v.iter_mut().zip(&self.query_dir) {
                        *o += p.query_shift * q;
                    }
                }
            }
            // Low-rank part: V += X B.
            add_matmul(&xt, &self.basis, dim, group, rows);
            for v in group.chunks_exact_mut(dim) {
                let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
                if norm > 0.0 {
                    let inv = 1.0 / norm;
                    v.iter_mut().for_each(|a| *a *= inv);
                } else {
                    v[0] = 1.0;
                }
            }
        }
    }

    fn fill_all(
        &self,
        p: &SynthParams,
        rows: usize,
        first_stream: u64,
        query: bool,
        progress: Option<&ProgressBar>,
    ) -> Vec<f32> {
        let mut data = vec![0f32; rows * self.dim];
        data.par_chunks_mut(CHUNK_ROWS * self.dim)
            .enumerate()
            .for_each(|(c, out)| {
                let mut rng = stream_rng(p.seed, first_stream + c as u64);
                self.fill(p, &mut rng, out, query);
                if let Some(pb) = progress {
                    pb.inc((out.len() / self.dim) as u64);
                }
            });
        data
    }
}

/// Generates the corpus described in the [module docs](self). `progress`, if given, is
/// advanced by one per generated vector (base and queries: `n + queries` in all).
///
/// Panics if `dim == 0`.
pub fn generate(p: &SynthParams, progress: Option<&ProgressBar>) -> SynthData {
    let model = Model::new(p);
    let base = model.fill_all(p, p.n, BASE_STREAM, false, progress);
    let queries = model.fill_all(p, p.queries, QUERY_STREAM, true, progress);
    SynthData {
        base,
        queries,
        dim: p.dim,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_paths_are_bit_identical() {
        let mut rng = stream_rng(5, 0);
        for (rank, dim, rows) in [(128, 384, 4), (7, 37, 3), (1, 5, 1), (64, 100, 2)] {
            let mut xt = vec![[0f32; GROUP]; rank];
            for x in &mut xt {
                for v in x.iter_mut().take(rows) {
                    *v = normal(&mut rng);
                }
            }
            let basis: Vec<f32> = (0..rank * dim).map(|_| normal(&mut rng)).collect();
            let init: Vec<f32> = (0..rows * dim).map(|_| normal(&mut rng)).collect();
            let mut a = init.clone();
            let mut b = init.clone();
            let mut c = init.clone();
            add_matmul(&xt, &basis, dim, &mut a, rows);
            add_matmul_tiled::<8>(&xt, &basis, dim, &mut b, rows);
            add_matmul_tiled::<16>(&xt, &basis, dim, &mut c, rows);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b));
            assert_eq!(bits(&a), bits(&c));
            // And it is the plain product.
            for p in 0..rows {
                for col in 0..dim {
                    let want: f32 = init[p * dim + col]
                        + (0..rank)
                            .map(|j| xt[j][p] * basis[j * dim + col])
                            .sum::<f32>();
                    assert!((a[p * dim + col] - want).abs() < 1e-3);
                }
            }
        }
    }

    #[test]
    fn fast_normal_has_unit_variance() {
        let mut rng = stream_rng(1, 0);
        let n = 200_000;
        let xs: Vec<f32> = (0..n).map(|_| fast_normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f32>() / n as f32;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n as f32;
        assert!(
            mean.abs() < 0.01 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        let mut buf = vec![0f32; n];
        fill_noise(&mut rng, &mut buf, 2.0);
        let var = buf.iter().map(|x| x * x).sum::<f32>() / n as f32;
        assert!((var - 4.0).abs() < 0.08, "{var}");
    }
}
