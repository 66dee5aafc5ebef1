//! Binary codes: one bit per dimension, the sign of the vector after centring each
//! dimension on its mean. Hamming distance between codes approximates the angle between
//! the centred vectors, so it is a coarse traversal distance (384 dimensions: 48 bytes,
//! a 32x reduction of float32); the best `oversample x k` candidates are rescored with the
//! float32 vectors, which is what makes the final order right.
//!
//! Centring matters: embedding models put most vectors in a narrow cone, where the raw
//! signs of many dimensions are the same for almost every vector and carry no information.

use crate::error::{Error, Result};

/// Most rows used to estimate the means.
pub const DEFAULT_SAMPLE: usize = 100_000;

/// Sign-after-centring binary quantizer.
#[derive(Debug, Clone, PartialEq)]
pub struct Binary {
    mean: Vec<f32>,
}

impl Binary {
    /// Estimate per-dimension means on up to `sample` rows spread evenly over `vectors`
    /// (`n x dim`, row-major; deterministic).
    pub fn train(vectors: &[f32], dim: usize, sample: usize) -> Result<Binary> {
        if dim == 0 || !vectors.len().is_multiple_of(dim) {
            return Err(Error::invalid(format!(
                "binary codes: {} values do not form rows of {dim} dimensions",
                vectors.len()
            )));
        }
        let n = vectors.len() / dim;
        if n == 0 {
            return Err(Error::invalid(
                "binary codes: no vectors to fit the means on",
            ));
        }
        let take = sample.clamp(1, n);
        let mut sum = vec![0f64; dim];
        for i in 0..take {
            let r = i * n / take;
            for (s, &x) in sum.iter_mut().zip(&vectors[r * dim..(r + 1) * dim]) {
                *s += x as f64;
            }
        }
        let mean: Vec<f32> = sum.iter().map(|s| (s / take as f64) as f32).collect();
        if let Some(d) = mean.iter().position(|m| !m.is_finite()) {
            return Err(Error::invalid(format!(
                "binary codes: dimension {d} holds a non-finite value"
            )));
        }
        Ok(Binary { mean })
    }

    /// A quantizer from stored means.
    pub fn from_parts(mean: Vec<f32>) -> Result<Binary> {
        if mean.is_empty() || mean.iter().any(|m| !m.is_finite()) {
            return Err(Error::invalid(
                "binary codes: means are empty or hold a non-finite value",
            ));
        }
        Ok(Binary { mean })
    }

    /// Dimensions of the vectors it encodes.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }
    /// The per-dimension means the vectors are centred on: bit `d` of a code is set when
    /// `v[d] > mean[d]`.
    pub fn mean(&self) -> &[f32] {
        &self.mean
    }
    /// 64-bit words per code.
    pub fn words(&self) -> usize {
        self.mean.len().div_ceil(64)
    }

    /// Code of one vector: bit `d` of the code is set when `v[d] > mean[d]`; padding bits
    /// past `dim` are zero in every code, so they never count in a distance.
    pub fn encode_into(&self, v: &[f32], out: &mut [u64]) {
        out.fill(0);
        for (d, (&x, &m)) in v.iter().zip(&self.mean).enumerate() {
            if x > m {
                out[d / 64] |= 1 << (d % 64);
            }
        }
    }

    /// Code of a query, to compare with [`hamming`].
    pub fn prepare(&self, y: &[f32]) -> Vec<u64> {
        let mut q = vec![0u64; self.words()];
        self.encode_into(y, &mut q);
        q
    }
}

/// Hamming distance between two codes.
#[inline]
pub fn hamming(a: &[u64], b: &[u64]) -> u32 {
    searchd_kernels::hamming(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn data(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        // A cone: every vector shares a large common component, as embeddings do.
        (0..n * dim)
            .map(|i| 0.5 + (i % dim) as f32 * 0.01 + rng.random_range(-0.1f32..0.1))
            .collect()
    }

    #[test]
    fn centring_spreads_bits() {
        let dim = 100;
        let v = data(2000, dim, 1);
        let b = Binary::train(&v, dim, 10_000).unwrap();
        assert_eq!(b.words(), 2);
        let mut code = vec![0u64; 2];
        let mut ones = vec![0usize; dim];
        for row in v.chunks_exact(dim) {
            b.encode_into(row, &mut code);
            assert_eq!(code[1] >> (dim - 64), 0, "padding bits must stay zero");
            for (d, o) in ones.iter_mut().enumerate() {
                *o += ((code[d / 64] >> (d % 64)) & 1) as usize;
            }
        }
        // Without centring every bit would be 1 (all values are positive); with it each
        // dimension splits the rows roughly in half.
        for (d, &o) in ones.iter().enumerate() {
            assert!(
                (600..1400).contains(&o),
                "dimension {d}: {o} of 2000 bits set"
            );
        }
    }

    #[test]
    fn hamming_orders_by_angle() {
        let dim = 128;
        let v = data(500, dim, 2);
        let b = Binary::train(&v, dim, 500).unwrap();
        let q = &v[..dim];
        let qc = b.prepare(q);
        // The query's own code is at distance 0; a far vector (the query mirrored around
        // the mean) at distance dim.
        let mut own = vec![0u64; 2];
        b.encode_into(q, &mut own);
        assert_eq!(hamming(&qc, &own), 0);
        let mirrored: Vec<f32> = q
            .iter()
            .zip(b.mean())
            .map(|(&x, &m)| 2.0 * m - x + if x == m { 1.0 } else { 0.0 })
            .collect();
        let mut far = vec![0u64; 2];
        b.encode_into(&mirrored, &mut far);
        assert_eq!(hamming(&qc, &far), dim as u32);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(Binary::train(&[1.0; 10], 3, 10).is_err());
        assert!(Binary::train(&[], 3, 10).is_err());
        assert!(Binary::train(&[f32::NAN, 1.0], 2, 10).is_err());
        assert!(Binary::from_parts(vec![]).is_err());
        assert!(Binary::from_parts(vec![f32::INFINITY]).is_err());
        assert_eq!(
            Binary::from_parts(vec![0.5, 1.0]).unwrap().mean(),
            &[0.5, 1.0]
        );
    }
}
