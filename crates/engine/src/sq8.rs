//! Scalar quantization to 8 bits (SQ8): every dimension gets its own affine map
//! `x ~ lo[d] + step[d] * c` with a code `c` in 0..=255.
//!
//! The range `[lo, hi]` of a dimension comes from quantiles of a sample (by default the
//! 0.1% and 99.9% points), not from its minimum and maximum, so a few outliers do not
//! stretch the step for everybody; values outside the range are clamped.
//!
//! Queries stay in float32 (asymmetric distance): for a query `y`,
//! `<x, y> ~ sum_d lo[d] y[d] + sum_d c[d] (step[d] y[d])`. The first sum is one number
//! per query; the weights `step[d] y[d]` are rounded to `i16` with one per-query scale, so
//! the second sum is an exact integer dot product of bytes and 16-bit weights
//! ([`searchd_kernels::dot_u8_i16`]): 384 dimensions read 384 bytes instead of 1,536.
//! The scale is chosen so the integer sum can never overflow `i32`.

use crate::error::{Error, Result};

/// Quantile of each dimension's sample taken as the low end of its range (and `1 - LOW`
/// as the high end).
pub const DEFAULT_CLIP: f64 = 0.001;

/// Most rows used to fit the ranges.
pub const DEFAULT_SAMPLE: usize = 100_000;

/// Per-dimension affine 8-bit quantizer.
#[derive(Debug, Clone, PartialEq)]
pub struct Sq8 {
    lo: Vec<f32>,
    step: Vec<f32>,
}

/// A query prepared for scoring SQ8 codes (see the module docs).
#[derive(Debug, Clone)]
pub struct Sq8Query {
    weights: Vec<i16>,
    /// `sum_d lo[d] * y[d]`.
    offset: f32,
    /// Undoes the weights' scale.
    inv_scale: f32,
}

impl Sq8 {
    /// Fit ranges on up to `sample` rows of `vectors` (`n x dim`, row-major), spread evenly
    /// over the rows (deterministic), clipping the `clip` and `1 - clip` quantiles.
    pub fn train(vectors: &[f32], dim: usize, sample: usize, clip: f64) -> Result<Sq8> {
        if dim == 0 || !vectors.len().is_multiple_of(dim) {
            return Err(Error::invalid(format!(
                "SQ8: {} values do not form rows of {dim} dimensions",
                vectors.len()
            )));
        }
        let n = vectors.len() / dim;
        if n == 0 {
            return Err(Error::invalid("SQ8: no vectors to fit the quantizer on"));
        }
        if !(0.0..0.5).contains(&clip) {
            return Err(Error::invalid(format!(
                "SQ8: clip quantile {clip} is not in [0, 0.5)"
            )));
        }
        let take = sample.clamp(1, n);
        let rows: Vec<usize> = (0..take).map(|i| i * n / take).collect();
        let mut lo = Vec::with_capacity(dim);
        let mut step = Vec::with_capacity(dim);
        let mut col = Vec::with_capacity(take);
        for d in 0..dim {
            col.clear();
            col.extend(rows.iter().map(|&r| vectors[r * dim + d]));
            if let Some(bad) = col.iter().find(|x| !x.is_finite()) {
                return Err(Error::invalid(format!(
                    "SQ8: dimension {d} holds a non-finite value ({bad})"
                )));
            }
            col.sort_unstable_by(f32::total_cmp);
            let at = |q: f64| col[((col.len() - 1) as f64 * q).round() as usize];
            let (a, b) = (at(clip), at(1.0 - clip));
            lo.push(a);
            // A constant dimension: any positive step maps it to code 0 exactly.
            step.push(if b > a { (b - a) / 255.0 } else { 1.0 });
        }
        Ok(Sq8 { lo, step })
    }

    /// A quantizer from stored parameters (as read back from an index file).
    pub fn from_parts(lo: Vec<f32>, step: Vec<f32>) -> Result<Sq8> {
        if lo.len() != step.len() || lo.is_empty() {
            return Err(Error::invalid("SQ8: lo and step differ in length"));
        }
        if lo.iter().any(|x| !x.is_finite()) || step.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(Error::invalid(
                "SQ8: parameters hold a non-finite value or a step <= 0",
            ));
        }
        Ok(Sq8 { lo, step })
    }

    /// Dimensions of the vectors it encodes.
    pub fn dim(&self) -> usize {
        self.lo.len()
    }
    /// Low end of each dimension's range (the value of code 0).
    pub fn lo(&self) -> &[f32] {
        &self.lo
    }
    /// Each dimension's step between consecutive codes (always > 0).
    pub fn step(&self) -> &[f32] {
        &self.step
    }

    /// Codes of one vector (`v.len() == dim == out.len()`).
    pub fn encode_into(&self, v: &[f32], out: &mut [u8]) {
        for (((o, &x), &lo), &st) in out.iter_mut().zip(v).zip(&self.lo).zip(&self.step) {
            *o = ((x - lo) / st).round().clamp(0.0, 255.0) as u8;
        }
    }

    /// The vector a code stands for.
    pub fn decode_into(&self, c: &[u8], out: &mut [f32]) {
        for (((o, &c), &lo), &st) in out.iter_mut().zip(c).zip(&self.lo).zip(&self.step) {
            *o = lo + st * c as f32;
        }
    }

    /// Prepare a (normalised, if the metric wants it) float32 query.
    pub fn prepare(&self, y: &[f32]) -> Sq8Query {
        let dim = self.dim();
        // Largest weight magnitude such that sum_d 255 * |w_d| < 2^31 for any codes.
        let cap = ((i32::MAX as f64) / (255.0 * dim as f64)).min(i16::MAX as f64);
        let w: Vec<f64> = y
            .iter()
            .zip(&self.step)
            .map(|(&q, &s)| q as f64 * s as f64)
            .collect();
        let max = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 { cap.floor() / max } else { 1.0 };
        let weights = w.iter().map(|x| (x * scale).round() as i16).collect();
        let offset = y
            .iter()
            .zip(&self.lo)
            .map(|(&q, &l)| q as f64 * l as f64)
            .sum::<f64>() as f32;
        Sq8Query {
            weights,
            offset,
            inv_scale: (1.0 / scale) as f32,
        }
    }
}

impl Sq8Query {
    /// Approximate inner product of the query with the vector behind `codes`.
    #[inline]
    pub fn ip(&self, codes: &[u8]) -> f32 {
        self.offset + searchd_kernels::dot_u8_i16(codes, &self.weights) as f32 * self.inv_scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n * dim)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * 0.2
            })
            .collect()
    }

    #[test]
    fn round_trip_error_is_at_most_half_a_step_inside_the_range() {
        let dim = 48;
        let v = data(2000, dim, 7);
        let q = Sq8::train(&v, dim, 2000, 0.0).unwrap();
        let (mut c, mut back) = (vec![0u8; dim], vec![0f32; dim]);
        for row in v.chunks_exact(dim) {
            q.encode_into(row, &mut c);
            q.decode_into(&c, &mut back);
            for d in 0..dim {
                // clip 0: every training value is inside its range.
                let err = (row[d] - back[d]).abs();
                assert!(err <= 0.5 * q.step()[d] * 1.0001 + 1e-7, "dim {d}: {err}");
            }
        }
    }

    #[test]
    fn outliers_are_clamped_not_stretching_the_range() {
        let dim = 4;
        let mut v = data(10_000, dim, 3);
        v[0] = 1000.0; // one huge outlier in dimension 0
        let q = Sq8::train(&v, dim, 10_000, 0.001).unwrap();
        assert!(
            q.lo()[0] + 255.0 * q.step()[0] < 1.0,
            "range stretched: {q:?}"
        );
        let mut c = vec![0u8; dim];
        q.encode_into(&v[..dim], &mut c);
        assert_eq!(c[0], 255);
    }

    #[test]
    fn inner_products_match_the_decoded_vectors() {
        let dim = 384;
        let v = data(500, dim, 11);
        let q = Sq8::train(&v, dim, 500, 0.001).unwrap();
        let y = data(1, dim, 99);
        let p = q.prepare(&y);
        let (mut c, mut back) = (vec![0u8; dim], vec![0f32; dim]);
        for row in v.chunks_exact(dim) {
            q.encode_into(row, &mut c);
            q.decode_into(&c, &mut back);
            let want: f64 = back
                .iter()
                .zip(&y)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum();
            let got = p.ip(&c) as f64;
            // Weight rounding: at most half a unit of the scale per dimension, times 255.
            let bound = dim as f64 * 255.0 * 0.5 * p.inv_scale as f64 + 1e-5;
            assert!(
                (got - want).abs() <= bound,
                "got {got}, want {want}, bound {bound}"
            );
            // And the quantized score is close to the exact one.
            let exact: f64 = row.iter().zip(&y).map(|(&a, &b)| a as f64 * b as f64).sum();
            assert!((got - exact).abs() < 0.02, "got {got}, exact {exact}");
        }
    }

    #[test]
    fn no_overflow_at_the_extremes() {
        // Every code 255 and every weight at the cap: the sum must still fit an i32.
        let dim = 4096;
        let q = Sq8::from_parts(vec![0.0; dim], vec![1.0; dim]).unwrap();
        let p = q.prepare(&vec![1.0; dim]);
        let got = p.ip(&vec![255u8; dim]);
        assert!(
            (got - 255.0 * dim as f32).abs() / (255.0 * dim as f32) < 1e-3,
            "{got}"
        );
        let p = q.prepare(&vec![-1.0; dim]);
        let got = p.ip(&vec![255u8; dim]);
        assert!(
            (got + 255.0 * dim as f32).abs() / (255.0 * dim as f32) < 1e-3,
            "{got}"
        );
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(Sq8::train(&[], 4, 10, 0.001).is_err());
        assert!(Sq8::train(&[1.0, 2.0, 3.0], 2, 10, 0.001).is_err());
        assert!(Sq8::train(&[1.0, f32::NAN], 2, 10, 0.001).is_err());
        assert!(Sq8::train(&[1.0, 2.0], 2, 10, 0.7).is_err());
        assert!(Sq8::from_parts(vec![0.0], vec![0.0]).is_err());
        assert!(Sq8::from_parts(vec![0.0, 1.0], vec![1.0]).is_err());
        // A constant dimension encodes to 0 and decodes exactly.
        let q = Sq8::train(&[0.5, 1.0, 0.5, 2.0], 2, 10, 0.0).unwrap();
        let mut c = [9u8; 2];
        q.encode_into(&[0.5, 1.0], &mut c);
        assert_eq!(c[0], 0);
    }
}
