//! Product quantization (PQ): a vector of `dim` dimensions is cut into `m` subvectors of
//! `dsub = dim / m` consecutive dimensions, and each subvector is replaced by the index
//! (one byte) of its nearest centroid in that subspace's codebook of [`KSUB`] = 256
//! centroids. A 384-dimensional float32 row (1,536 bytes) becomes `m` bytes.
//!
//! Layout: the codebooks are one `Vec<f32>` of `m * KSUB * dsub` values, `[m][KSUB][dsub]`
//! row-major: centroid `k` of subspace `s` is `centroids[(s * KSUB + k) * dsub..][..dsub]`.
//! Codes are `m` bytes per vector, subspace order; `n` vectors are `n * m` bytes row-major.
//!
//! Codebooks are trained per subspace with k-means (Lloyd) on up to `sample` rows spread
//! evenly over the input, started from a seeded random choice of distinct rows. Subspaces
//! are trained in parallel (rayon), and so are fixed chunks of rows in each assignment step,
//! but every float sum runs in a fixed order on one thread, so the codebooks depend only on
//! the data and the seed, not on the thread count.
//!
//! Queries stay in float32 (asymmetric distance): for a query `y` with subvectors `y_s`,
//! `<x, y> ~ <decode(c), y> = sum_s <y_s, C_s[c_s]>`. The `m * 256` inner products
//! `<y_s, C_s[k]>` are computed once per query into a lookup table ([`Pq::prepare`]), after
//! which scoring a vector is `m` table reads and adds ([`searchd_kernels::pq_adc`]), with no
//! dependence on `dim`. The error is `<y, x - decode(c)>`, at most `|y| |x - decode(c)|`.
//! (Squared L2 follows from it and the norms: `|x - y|^2 = |x|^2 - 2<x, y> + |y|^2`.)

use crate::error::{Error, Result};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Centroids per subspace: every byte value is a code.
pub const KSUB: usize = 256;

/// Most rows used to train the codebooks (k-means cost grows linearly with it; 256 rows per
/// centroid is plenty for 256 centroids).
pub const DEFAULT_SAMPLE: usize = 65_536;

/// Lloyd iterations per subspace (training stops earlier once no assignment changes).
pub const DEFAULT_ITERS: usize = 20;

/// Training parameters: `m` subspaces, at most `sample` training rows, `iters` Lloyd
/// iterations, `seed` for the initial centroids.
#[derive(Debug, Clone, Copy)]
pub struct PqParams {
    /// Subspaces, which is also bytes per code; must divide the dimension.
    pub m: usize,
    /// Most rows used for training (at least [`KSUB`]). Default [`DEFAULT_SAMPLE`].
    pub sample: usize,
    /// Most Lloyd iterations per subspace (at least 1). Default [`DEFAULT_ITERS`].
    pub iters: usize,
    /// Seed of the initial centroid choice. Default 42.
    pub seed: u64,
}

impl PqParams {
    /// `m` subspaces with the default sample, iterations and seed (42).
    pub fn new(m: usize) -> PqParams {
        PqParams {
            m,
            sample: DEFAULT_SAMPLE,
            iters: DEFAULT_ITERS,
            seed: 42,
        }
    }
}

/// A trained product quantizer (see the module docs for the layout).
#[derive(Debug, Clone, PartialEq)]
pub struct Pq {
    dim: usize,
    m: usize,
    /// `[m][KSUB][dsub]`.
    centroids: Vec<f32>,
    /// The same values as `[m][dsub][KSUB]`: the nearest-centroid search
    /// ([`searchd_kernels::l2sq_columns`]) and the lookup table run over the 256 centroids of
    /// a subspace as SIMD lanes, each lane summing its `dsub` terms in order (so a result
    /// does not depend on vector width or on how rows are split over threads).
    transposed: Vec<f32>,
}

/// A query prepared for scoring PQ codes: the inner products of each query subvector with
/// every centroid of its subspace, `[m][KSUB]`.
#[derive(Debug, Clone)]
pub struct PqQuery {
    lut: Vec<f32>,
}

/// Rows per parallel task in the k-means assignment step (fixed, so the split of work never
/// depends on the thread count; each row's assignment is independent anyway).
const ASSIGN_CHUNK: usize = 1024;

/// Relative size of the perturbation that splits a cluster to re-seed an empty one.
const SPLIT_EPS: f32 = 1.0 / 1024.0;

fn param_error(message: String) -> Error {
    Error::InvalidParam {
        name: "pq",
        message,
    }
}

/// Checks that `m` subspaces can split `dim` dimensions evenly.
fn check_shape(dim: usize, m: usize) -> Result<()> {
    if dim == 0 {
        return Err(Error::invalid("PQ: vectors have 0 dimensions"));
    }
    if m == 0 {
        return Err(param_error(
            "m=0 subspaces; m must be at least 1 (bytes per vector)".into(),
        ));
    }
    if !dim.is_multiple_of(m) {
        let divisors: Vec<String> = (1..=dim.min(128))
            .filter(|d| dim.is_multiple_of(*d))
            .map(|d| d.to_string())
            .collect();
        return Err(param_error(format!(
            "dimension {dim} is not divisible by m={m}; pick m among the divisors: {}",
            divisors.join(", ")
        )));
    }
    Ok(())
}

impl Pq {
    /// Train codebooks on `vectors` (`n x dim`, row-major; see the module docs).
    ///
    /// Only the sampled rows are checked for finiteness (as [`crate::sq8::Sq8::train`] does);
    /// index builds validate all input beforehand.
    pub fn train(vectors: &[f32], dim: usize, p: &PqParams) -> Result<Pq> {
        check_shape(dim, p.m)?;
        if p.iters == 0 {
            return Err(param_error(
                "iters=0; k-means needs at least 1 iteration".into(),
            ));
        }
        if p.sample < KSUB {
            return Err(param_error(format!(
                "sample={} training rows is fewer than the {KSUB} centroids of a codebook; \
                 use a sample of at least {KSUB}",
                p.sample
            )));
        }
        if !vectors.len().is_multiple_of(dim) {
            return Err(Error::invalid(format!(
                "PQ: {} values do not form rows of {dim} dimensions",
                vectors.len()
            )));
        }
        let n = vectors.len() / dim;
        if n < KSUB {
            return Err(Error::invalid(format!(
                "PQ: codebooks of {KSUB} centroids need at least {KSUB} training vectors, got {n}"
            )));
        }
        let take = p.sample.min(n);
        let rows: Vec<usize> = (0..take).map(|i| i * n / take).collect();
        for &r in &rows {
            let row = &vectors[r * dim..(r + 1) * dim];
            if let Some(d) = row.iter().position(|x| !x.is_finite()) {
                return Err(Error::invalid(format!(
                    "PQ: training vector {r} holds a non-finite value ({}) in dimension {d}",
                    row[d]
                )));
            }
        }
        let (m, dsub) = (p.m, dim / p.m);
        let books: Vec<Vec<f32>> = (0..m)
            .into_par_iter()
            .map(|s| {
                let mut x = Vec::with_capacity(take * dsub);
                for &r in &rows {
                    x.extend_from_slice(&vectors[r * dim + s * dsub..][..dsub]);
                }
                kmeans(&x, dsub, p.iters, p.seed.wrapping_add(s as u64))
            })
            .collect();
        Ok(Pq::assemble(dim, m, books.concat()))
    }

    /// A quantizer from stored codebooks (`[m][KSUB][dim / m]`, as [`Pq::centroids`] returns
    /// them), e.g. read back from an index file.
    pub fn from_parts(dim: usize, m: usize, centroids: Vec<f32>) -> Result<Pq> {
        check_shape(dim, m)?;
        if Some(centroids.len()) != dim.checked_mul(KSUB) {
            return Err(Error::invalid(format!(
                "PQ: {} centroid values do not match dimension {dim} x {KSUB} centroids = {}",
                centroids.len(),
                dim.saturating_mul(KSUB)
            )));
        }
        if let Some(i) = centroids.iter().position(|x| !x.is_finite()) {
            let dsub = dim / m;
            let (s, k) = (i / (KSUB * dsub), i / dsub % KSUB);
            return Err(Error::invalid(format!(
                "PQ: centroid {k} of subspace {s} holds a non-finite value ({})",
                centroids[i]
            )));
        }
        Ok(Pq::assemble(dim, m, centroids))
    }

    /// Builds the transposed copy; the shape is already checked.
    fn assemble(dim: usize, m: usize, centroids: Vec<f32>) -> Pq {
        let dsub = dim / m;
        let mut transposed = vec![0.0f32; centroids.len()];
        for (book, tb) in centroids
            .chunks_exact(KSUB * dsub)
            .zip(transposed.chunks_exact_mut(KSUB * dsub))
        {
            transpose_book(book, dsub, tb);
        }
        Pq {
            dim,
            m,
            centroids,
            transposed,
        }
    }

    /// Dimensions of the vectors it encodes.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Subspaces, which is also bytes per code.
    pub fn m(&self) -> usize {
        self.m
    }
    /// Dimensions per subspace.
    pub fn dsub(&self) -> usize {
        self.dim / self.m
    }
    /// The codebooks, `[m][KSUB][dsub]`.
    pub fn centroids(&self) -> &[f32] {
        &self.centroids
    }

    /// Codes of one vector: per subspace, the nearest centroid in squared L2 (lowest index
    /// on ties).
    ///
    /// # Panics
    /// If `v.len() != dim` or `out.len() != m`.
    pub fn encode_into(&self, v: &[f32], out: &mut [u8]) {
        assert_eq!(v.len(), self.dim, "PQ encode: vector length != dim");
        assert_eq!(out.len(), self.m, "PQ encode: code length != m");
        let dsub = self.dsub();
        let mut dist = [0.0f32; KSUB];
        for ((o, x), tb) in out
            .iter_mut()
            .zip(v.chunks_exact(dsub))
            .zip(self.transposed.chunks_exact(KSUB * dsub))
        {
            *o = nearest(x, tb, &mut dist).0;
        }
    }

    /// Codes of `n` rows (`vectors` is `n x dim`), `n * m` bytes, encoded in parallel.
    ///
    /// # Panics
    /// If `vectors.len()` is not a multiple of `dim`.
    pub fn encode_all(&self, vectors: &[f32]) -> Vec<u8> {
        assert!(
            vectors.len().is_multiple_of(self.dim),
            "PQ encode: {} values are not rows of {} dimensions",
            vectors.len(),
            self.dim
        );
        let mut out = vec![0u8; vectors.len() / self.dim * self.m];
        out.par_chunks_mut(self.m)
            .zip(vectors.par_chunks(self.dim))
            .with_min_len(64)
            .for_each(|(o, v)| self.encode_into(v, o));
        out
    }

    /// The vector a code stands for (its centroids, concatenated).
    ///
    /// # Panics
    /// If `codes.len() != m` or `out.len() != dim`.
    pub fn decode_into(&self, codes: &[u8], out: &mut [f32]) {
        assert_eq!(codes.len(), self.m, "PQ decode: code length != m");
        assert_eq!(out.len(), self.dim, "PQ decode: output length != dim");
        let dsub = self.dsub();
        for (s, (o, &c)) in out.chunks_exact_mut(dsub).zip(codes).enumerate() {
            o.copy_from_slice(&self.centroids[(s * KSUB + c as usize) * dsub..][..dsub]);
        }
    }

    /// The inner-product lookup table of a (normalised, if the metric wants it) float32
    /// query: `lut[s * KSUB + k] = <y_s, C_s[k]>`.
    ///
    /// # Panics
    /// If `y.len() != dim`.
    pub fn prepare(&self, y: &[f32]) -> PqQuery {
        assert_eq!(y.len(), self.dim, "PQ prepare: query length != dim");
        let dsub = self.dsub();
        let mut lut = vec![0.0f32; self.m * KSUB];
        for ((row, ys), tb) in lut
            .chunks_exact_mut(KSUB)
            .zip(y.chunks_exact(dsub))
            .zip(self.transposed.chunks_exact(KSUB * dsub))
        {
            for (&yd, trow) in ys.iter().zip(tb.chunks_exact(KSUB)) {
                for (l, &c) in row.iter_mut().zip(trow) {
                    *l += yd * c;
                }
            }
        }
        PqQuery { lut }
    }
}

impl PqQuery {
    /// Approximate inner product of the query with the vector behind `codes`.
    ///
    /// # Panics
    /// If `codes.len()` is not the quantizer's `m`.
    #[inline]
    pub fn ip(&self, codes: &[u8]) -> f32 {
        searchd_kernels::pq_adc(&self.lut, codes)
    }

    /// The table, `[m][KSUB]`.
    pub fn lut(&self) -> &[f32] {
        &self.lut
    }
}

/// `book` (`[KSUB][dsub]`) as `[dsub][KSUB]` into `out`.
fn transpose_book(book: &[f32], dsub: usize, out: &mut [f32]) {
    for (k, c) in book.chunks_exact(dsub).enumerate() {
        for (d, &x) in c.iter().enumerate() {
            out[d * KSUB + k] = x;
        }
    }
}

/// Nearest of the `KSUB` centroids of one subspace to `x` (`dsub` values), given that
/// subspace's transposed codebook `tb` (`[dsub][KSUB]`): the code and its squared distance.
/// The first (lowest) index wins ties, as a sequential scan with `<` would pick.
///
/// The distances come from [`searchd_kernels::l2sq_columns`] (one SIMD lane per centroid,
/// each summed in dimension order, not expanded through norms, which cancels for nearby
/// points), so a distance is the same bits wherever it is computed and training and encoding
/// agree exactly. `dist` is scratch space, passed in so callers zero it once, not per call.
#[inline]
fn nearest(x: &[f32], tb: &[f32], dist: &mut [f32; KSUB]) -> (u8, f32) {
    searchd_kernels::l2sq_columns(x, tb, dist);
    // None only if every distance is NaN, which finite inputs never produce.
    let k = searchd_kernels::argmin(dist).unwrap_or(0);
    (k as u8, dist[k])
}

/// k-means with `KSUB` centroids on the rows of `x` (`n x dsub`, `n >= KSUB`); returns the
/// centroids `[KSUB][dsub]`.
///
/// Lloyd iterations: assign every row to its nearest centroid (in parallel over fixed chunks
/// of rows), then move each centroid to the mean of its rows (sequential f64 sums, so the
/// result does not depend on the thread count). A centroid left without rows is re-seeded by
/// splitting the largest cluster: both get its centroid, shifted by a tiny amount in opposite
/// directions, so the next assignment divides that cluster between them. Stops after `iters`
/// updates or once an assignment changes nothing (a fixed point).
fn kmeans(x: &[f32], dsub: usize, iters: usize, seed: u64) -> Vec<f32> {
    let n = x.len() / dsub;
    debug_assert!(n >= KSUB && iters > 0);
    // Distinct rows by a partial Fisher-Yates shuffle.
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    for i in 0..KSUB {
        let j = rng.random_range(i..n);
        order.swap(i, j);
    }
    let mut cent = vec![0.0f32; KSUB * dsub];
    for (c, &r) in cent.chunks_exact_mut(dsub).zip(&order[..KSUB]) {
        c.copy_from_slice(&x[r * dsub..(r + 1) * dsub]);
    }
    let mut tb = vec![0.0f32; KSUB * dsub];
    let mut assign = vec![0u8; n];
    let mut dist = vec![0.0f32; n];
    let mut sums = vec![0.0f64; KSUB * dsub];
    let mut counts = vec![0usize; KSUB];
    let mut sse = vec![0.0f64; KSUB];
    for it in 0..iters {
        transpose_book(&cent, dsub, &mut tb);
        let changed: usize = assign
            .par_chunks_mut(ASSIGN_CHUNK)
            .zip(dist.par_chunks_mut(ASSIGN_CHUNK))
            .zip(x.par_chunks(ASSIGN_CHUNK * dsub))
            .map(|((a, dd), xs)| {
                let mut changed = 0;
                let mut scratch = [0.0f32; KSUB];
                for ((a, dd), xi) in a.iter_mut().zip(dd).zip(xs.chunks_exact(dsub)) {
                    let (k, d) = nearest(xi, &tb, &mut scratch);
                    changed += usize::from(*a != k);
                    *a = k;
                    *dd = d;
                }
                changed
            })
            .sum();
        sums.fill(0.0);
        counts.fill(0);
        sse.fill(0.0);
        for ((&k, &d), xi) in assign.iter().zip(&dist).zip(x.chunks_exact(dsub)) {
            let k = k as usize;
            counts[k] += 1;
            sse[k] += d as f64;
            for (s, &v) in sums[k * dsub..(k + 1) * dsub].iter_mut().zip(xi) {
                *s += v as f64;
            }
        }
        for ((c, s), &cnt) in cent
            .chunks_exact_mut(dsub)
            .zip(sums.chunks_exact(dsub))
            .zip(&counts)
        {
            if cnt > 0 {
                for (c, &s) in c.iter_mut().zip(s) {
                    *c = (s / cnt as f64) as f32;
                }
            }
        }
        // The means just computed are final: splitting now would leave the perturbed copies
        // as codewords without another assignment to pull them apart.
        if it + 1 == iters || (it > 0 && changed == 0) {
            break;
        }
        split_empty(&mut cent, &mut counts, &mut sse, dsub);
    }
    cent
}

/// Re-seeds every empty cluster (in index order) from the currently largest one (lowest
/// index among equals), whose count and error are then shared between the two so the next
/// empty cluster may pick another. The shift per dimension is `SPLIT_EPS * (|c| + sigma)`,
/// `sigma` the cluster's rms spread per dimension, with alternating signs: large enough to
/// survive rounding whatever the scale (even at c = 0), small enough to keep both near the
/// cluster. A cluster of identical rows (sigma 0 at c = 0, or a single row) is not split.
fn split_empty(cent: &mut [f32], counts: &mut [usize], sse: &mut [f64], dsub: usize) {
    for e in 0..KSUB {
        if counts[e] > 0 {
            continue;
        }
        let mut big = 0;
        for k in 1..KSUB {
            if counts[k] > counts[big] {
                big = k;
            }
        }
        if counts[big] < 2 {
            return;
        }
        let sigma = (sse[big] / counts[big] as f64 / dsub as f64).sqrt() as f32;
        for d in 0..dsub {
            let c = cent[big * dsub + d];
            let delta = SPLIT_EPS * (c.abs() + sigma);
            let delta = if d % 2 == 0 { delta } else { -delta };
            cent[e * dsub + d] = c + delta;
            cent[big * dsub + d] = c - delta;
        }
        let half = counts[big] / 2;
        counts[e] = half;
        counts[big] -= half;
        sse[big] /= 2.0;
        sse[e] = sse[big];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uniform values in [-1, 1) (xorshift, deterministic).
    fn data(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n * dim)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
            })
            .collect()
    }

    fn params(m: usize, sample: usize, iters: usize) -> PqParams {
        PqParams {
            sample,
            iters,
            ..PqParams::new(m)
        }
    }

    /// Mean squared reconstruction error per dimension.
    fn mse(pq: &Pq, v: &[f32]) -> f64 {
        let dim = pq.dim();
        let codes = pq.encode_all(v);
        let mut back = vec![0.0f32; dim];
        let mut err = 0.0f64;
        for (row, c) in v.chunks_exact(dim).zip(codes.chunks_exact(pq.m())) {
            pq.decode_into(c, &mut back);
            err += row
                .iter()
                .zip(&back)
                .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
                .sum::<f64>();
        }
        err / v.len() as f64
    }

    fn message(r: Result<Pq>) -> String {
        r.expect_err("should be refused").to_string()
    }

    /// `encode_into` row by row (the reference for `encode_all`).
    fn encode_rows(pq: &Pq, v: &[f32]) -> Vec<u8> {
        let mut out = vec![0u8; v.len() / pq.dim() * pq.m()];
        for (o, row) in out.chunks_exact_mut(pq.m()).zip(v.chunks_exact(pq.dim())) {
            pq.encode_into(row, o);
        }
        out
    }

    fn bits(pq: &Pq) -> Vec<u32> {
        pq.centroids().iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn reconstruction_error_falls_as_m_grows_and_stays_below_the_variance() {
        let dim = 32;
        let v = data(1500, dim, 1);
        let variance = 1.0 / 3.0; // of U(-1, 1), per dimension
        let mut last = f64::INFINITY;
        for m in [1, 2, 4, 8, 16] {
            let pq = Pq::train(&v, dim, &params(m, 1500, 10)).unwrap();
            assert_eq!((pq.m(), pq.dsub(), pq.dim()), (m, dim / m, dim));
            assert_eq!(pq.centroids().len(), m * KSUB * (dim / m));
            let e = mse(&pq, &v);
            eprintln!("m={m}: mse {e:.5} (variance {variance:.5})");
            assert!(e < last, "m={m}: mse {e} did not fall below {last}");
            assert!(e < 0.8 * variance, "m={m}: mse {e}");
            last = e;
        }
        // 256 centroids for 1500 rows in 2-d subspaces: a fine grid.
        assert!(last < 0.02 * variance, "m=16: mse {last}");
    }

    #[test]
    fn lut_inner_product_equals_the_decoded_inner_product() {
        let (dim, m) = (48, 8);
        let v = data(600, dim, 2);
        let pq = Pq::train(&v, dim, &params(m, 600, 5)).unwrap();
        let codes = pq.encode_all(&v);
        let mut back = vec![0.0f32; dim];
        for (qi, y) in data(5, dim, 3).chunks_exact(dim).enumerate() {
            let p = pq.prepare(y);
            assert_eq!(p.lut().len(), m * KSUB);
            for c in codes.chunks_exact(m) {
                pq.decode_into(c, &mut back);
                let (want, abs) = back
                    .iter()
                    .zip(y)
                    .fold((0.0f64, 0.0f64), |(s, a), (&x, &q)| {
                        let t = x as f64 * q as f64;
                        (s + t, a + t.abs())
                    });
                // f32 rounding only: dsub terms per table entry, m entries per sum.
                let tol = 1.01 * (dim + m + 2) as f64 * f32::EPSILON as f64 / 2.0 * abs;
                let got = p.ip(c) as f64;
                assert!(
                    (got - want).abs() <= tol,
                    "query {qi}: {got} vs {want}, tol {tol}"
                );
            }
        }
    }

    #[test]
    fn asymmetric_inner_product_error_is_bounded_by_the_reconstruction_error() {
        let (dim, m) = (64, 16);
        let v = data(1000, dim, 4);
        let pq = Pq::train(&v, dim, &params(m, 1000, 8)).unwrap();
        let codes = pq.encode_all(&v);
        let mut back = vec![0.0f32; dim];
        let (mut err2, mut bound2) = (0.0f64, 0.0f64);
        for y in data(4, dim, 5).chunks_exact(dim) {
            let p = pq.prepare(y);
            let ny = y.iter().map(|&q| (q as f64).powi(2)).sum::<f64>().sqrt();
            for (x, c) in v.chunks_exact(dim).zip(codes.chunks_exact(m)) {
                pq.decode_into(c, &mut back);
                let exact: f64 = x.iter().zip(y).map(|(&a, &b)| a as f64 * b as f64).sum();
                let rerr = x
                    .iter()
                    .zip(&back)
                    .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
                    .sum::<f64>()
                    .sqrt();
                let err = (p.ip(c) as f64 - exact).abs();
                // Cauchy-Schwarz, plus f32 rounding slack.
                assert!(
                    err <= ny * rerr + 1e-4,
                    "err {err} > |y| |x - x^| = {}",
                    ny * rerr
                );
                err2 += err * err;
                bound2 += (ny * rerr).powi(2);
            }
        }
        // The residual is not aligned with the query: on average the error is far below the
        // worst case (about 1/sqrt(dim) of it for unrelated directions).
        let ratio = (err2 / bound2).sqrt();
        eprintln!("rms ip error / rms Cauchy-Schwarz bound = {ratio:.3}");
        assert!(ratio < 0.4, "{ratio}");
    }

    #[test]
    fn training_is_deterministic_whatever_the_thread_count() {
        let dim = 24;
        let v = data(2000, dim, 6);
        // Several chunks of rows per subspace, so the parallel assignment really splits.
        let p = params(6, 2000, 6);
        let pool = |t: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        let one = pool(1).install(|| Pq::train(&v, dim, &p).unwrap());
        let two = pool(2).install(|| Pq::train(&v, dim, &p).unwrap());
        let three = pool(3).install(|| Pq::train(&v, dim, &p).unwrap());
        let default = Pq::train(&v, dim, &p).unwrap();
        assert_eq!(bits(&one), bits(&two));
        assert_eq!(bits(&one), bits(&three));
        assert_eq!(bits(&one), bits(&default));
        assert_eq!(one, default);
        // Encoding in parallel agrees with one row at a time.
        let codes = encode_rows(&two, &v);
        assert_eq!(codes, pool(1).install(|| one.encode_all(&v)));
        assert_eq!(codes, pool(2).install(|| one.encode_all(&v)));
        // Another seed gives other codebooks.
        let other = Pq::train(&v, dim, &PqParams { seed: 7, ..p }).unwrap();
        assert_ne!(bits(&one), bits(&other));
    }

    #[test]
    fn from_parts_round_trips_and_refuses_bad_parts() {
        let dim = 16;
        let v = data(400, dim, 8);
        let pq = Pq::train(&v, dim, &params(4, 400, 3)).unwrap();
        let back = Pq::from_parts(dim, 4, pq.centroids().to_vec()).unwrap();
        assert_eq!(back, pq);
        assert_eq!(back.encode_all(&v), pq.encode_all(&v));

        let msg = message(Pq::from_parts(dim, 4, vec![0.0; dim * KSUB - 1]));
        assert!(
            msg.contains("4095 centroid values do not match dimension 16"),
            "{msg}"
        );
        let msg = message(Pq::from_parts(dim, 3, vec![0.0; dim * KSUB]));
        assert!(msg.contains("not divisible by m=3"), "{msg}");
        let msg = message(Pq::from_parts(dim, 0, vec![0.0; dim * KSUB]));
        assert!(msg.contains("m must be at least 1"), "{msg}");
        let mut bad = pq.centroids().to_vec();
        // Subspace 1 (of dsub 4), centroid 3, dimension 2.
        bad[(KSUB + 3) * 4 + 2] = f32::INFINITY;
        let msg = message(Pq::from_parts(dim, 4, bad));
        assert!(
            msg.contains("centroid 3 of subspace 1 holds a non-finite value (inf)"),
            "{msg}"
        );
    }

    #[test]
    fn bad_training_input_gets_an_actionable_error() {
        let v = data(300, 384, 9);
        let msg = message(Pq::train(&v, 384, &PqParams::new(50)));
        assert!(msg.contains("invalid parameter pq: dimension 384 is not divisible by m=50; pick m among the divisors: 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128"), "{msg}");
        let msg = message(Pq::train(&v, 384, &PqParams::new(0)));
        assert!(msg.contains("m must be at least 1"), "{msg}");
        let msg = message(Pq::train(&v, 384, &params(8, 1000, 0)));
        assert!(msg.contains("iters=0"), "{msg}");
        let msg = message(Pq::train(&v, 384, &params(8, 100, 5)));
        assert!(msg.contains("use a sample of at least 256"), "{msg}");
        let msg = message(Pq::train(&v[..100 * 384], 384, &PqParams::new(8)));
        assert!(
            msg.contains("codebooks of 256 centroids need at least 256 training vectors, got 100"),
            "{msg}"
        );
        let msg = message(Pq::train(&v[..384 * 3 + 1], 384, &PqParams::new(8)));
        assert!(msg.contains("do not form rows of 384 dimensions"), "{msg}");
        let mut nan = v.clone();
        nan[5 * 384 + 7] = f32::NAN;
        let msg = message(Pq::train(&nan, 384, &params(8, 300, 1)));
        assert!(
            msg.contains("training vector 5 holds a non-finite value (NaN) in dimension 7"),
            "{msg}"
        );
        let msg = message(Pq::train(&[], 0, &PqParams::new(8)));
        assert!(msg.contains("0 dimensions"), "{msg}");
    }

    #[test]
    fn clustered_data_reconstructs_near_exactly() {
        let (dim, m) = (16, 4);
        let centers = data(3, dim, 10);
        let noise = data(300, dim, 11);
        let v: Vec<f32> = noise
            .chunks_exact(dim)
            .enumerate()
            .flat_map(|(i, e)| {
                let c = &centers[(i % 3) * dim..][..dim];
                c.iter()
                    .zip(e)
                    .map(|(&c, &e)| c + 1e-3 * e)
                    .collect::<Vec<_>>()
            })
            .collect();
        let pq = Pq::train(&v, dim, &params(m, 300, 10)).unwrap();
        let e = mse(&pq, &v);
        // Noise variance per dimension is 1e-6 / 3; 256 centroids for 300 rows leave most
        // rows their own centroid.
        assert!(e < 1e-7, "mse {e}");
    }

    #[test]
    fn duplicate_rows_leave_empty_clusters_harmless() {
        // 3 distinct rows repeated: 253 centroids can never own a row.
        let dim = 8;
        let distinct = data(3, dim, 12);
        let mut v = Vec::new();
        for i in 0..300 {
            v.extend_from_slice(&distinct[(i % 3) * dim..][..dim]);
        }
        let pq = Pq::train(&v, dim, &params(2, 300, 10)).unwrap();
        assert!(pq.centroids().iter().all(|x| x.is_finite()));
        assert_eq!(mse(&pq, &v), 0.0);
        // All zeros: nothing to split at all.
        let zeros = vec![0.0f32; 300 * dim];
        let pq = Pq::train(&zeros, dim, &params(2, 300, 10)).unwrap();
        assert_eq!(mse(&pq, &zeros), 0.0);
    }

    #[test]
    fn nearest_picks_the_first_minimum() {
        let dsub = 2;
        let mut book = vec![5.0f32; KSUB * dsub];
        for k in [40, 41, 200] {
            book[k * dsub] = 1.0;
            book[k * dsub + 1] = 1.0;
        }
        let mut tb = vec![0.0f32; KSUB * dsub];
        transpose_book(&book, dsub, &mut tb);
        let mut dist = [0.0f32; KSUB];
        assert_eq!(nearest(&[1.0, 1.0], &tb, &mut dist), (40, 0.0));
        assert_eq!(nearest(&[5.0, 5.0], &tb, &mut dist).0, 0);
    }
}
