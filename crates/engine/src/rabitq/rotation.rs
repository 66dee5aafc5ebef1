//! The random orthogonal rotation `P` RaBitQ codes are taken in.
//!
//! Two kinds, told apart by `codes.bin`'s header (field 5, [`Rotation::kind_code`]):
//! - [`Rotation::Dense`] (code 0, every file written before the structured kind): a
//!   `dim x dim` Gaussian matrix orthonormalised by Gram-Schmidt. A query costs `dim^2`
//!   multiply-adds and reads `4 dim^2` bytes (384: 147k and 590 KB, ~10 us, 8-15% of a
//!   4-bit search at ef 64-128 on dev-gcide-50k).
//! - [`Rotation::Fht`] (code 1, what [`super::Rabitq::train`] draws): [`FHT_ROUNDS`] rounds
//!   of random sign flips, a normalised Walsh-Hadamard transform on a power-of-two window
//!   (alternately the first and the last `h` coordinates, `h` the largest power of two
//!   `<= dim`, so any dimension is covered without padding the codes) and a Kac step that
//!   turns each coordinate of the first half with its partner in the second by 45 degrees.
//!   Every step is orthogonal and its own inverse, so the whole is orthogonal and its
//!   transpose is the steps in reverse order. `dim log dim` operations a query; stored as
//!   the `FHT_ROUNDS x dim` signs (+1 / -1 as f32). The same construction as the RaBitQ
//!   library's FHT-Kac rotator (written here from its description).

use crate::error::{Error, Result};

/// Rounds of (signs, Hadamard window, Kac step) in a structured rotation. Four already rank
/// as well as a dense rotation on dev-gcide-50k (4-bit codes by brute force, recall@10
/// 0.938 / 0.940 / 0.938 for 4 / 6 / 8 rounds against 0.941 dense: within the draw's
/// noise), but leave some basis vectors of 384 and 768 dimensions poorly spread (largest
/// entry 0.34 and 0.30, a Gaussian rotation's ~0.25 and ~0.19); six spread them like a
/// Gaussian one (0.26, 0.26) for a few hundred more additions a query.
pub const FHT_ROUNDS: usize = 6;

/// A rotation of `dim`-dimensional vectors.
#[derive(Debug, Clone, PartialEq)]
pub enum Rotation {
    /// `dim x dim`, row-major: rotated coordinate `i` is `<rows[i], x>`.
    Dense(Vec<f32>),
    /// `FHT_ROUNDS x dim` signs (each +1 or -1).
    Fht(Vec<f32>),
}

/// `x` turned by a normalised Walsh-Hadamard transform (`x.len()` a power of two).
fn hadamard(x: &mut [f32]) {
    let n = x.len();
    let mut h = 1;
    while h < n {
        for block in x.chunks_exact_mut(2 * h) {
            let (a, b) = block.split_at_mut(h);
            for (p, q) in a.iter_mut().zip(b.iter_mut()) {
                let (s, d) = (*p + *q, *p - *q);
                *p = s;
                *q = d;
            }
        }
        h *= 2;
    }
    let scale = 1.0 / (n as f32).sqrt();
    x.iter_mut().for_each(|v| *v *= scale);
}

/// Coordinate `i` and `i + dim/2` turned by 45 degrees, for every `i < dim/2` (an odd
/// dimension's last coordinate is left as it is).
fn kac(x: &mut [f32]) {
    let half = x.len() / 2;
    let (a, b) = x.split_at_mut(half);
    let r = std::f32::consts::FRAC_1_SQRT_2;
    for (p, q) in a.iter_mut().zip(b.iter_mut()) {
        let (s, d) = ((*p + *q) * r, (*p - *q) * r);
        *p = s;
        *q = d;
    }
}

/// The Hadamard window of `round`: the first `h` coordinates in even rounds, the last `h`
/// in odd ones.
fn window(dim: usize, round: usize) -> std::ops::Range<usize> {
    let h = 1usize << (usize::BITS - 1 - dim.leading_zeros());
    if round.is_multiple_of(2) {
        0..h
    } else {
        dim - h..dim
    }
}

impl Rotation {
    /// A dense Gaussian rotation drawn from `seed` (Box-Muller on a seeded ChaCha stream,
    /// modified Gram-Schmidt in f64).
    pub fn dense(dim: usize, seed: u64) -> Rotation {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut m: Vec<f64> = Vec::with_capacity(dim * dim);
        while m.len() < dim * dim {
            let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
            let u2: f64 = rng.random::<f64>();
            let r = (-2.0 * u1.ln()).sqrt();
            let t = std::f64::consts::TAU * u2;
            m.push(r * t.cos());
            m.push(r * t.sin());
        }
        m.truncate(dim * dim);
        for i in 0..dim {
            let (done, rest) = m.split_at_mut(i * dim);
            let row = &mut rest[..dim];
            for prev in done.chunks_exact(dim) {
                let p: f64 = row.iter().zip(prev).map(|(a, b)| a * b).sum();
                row.iter_mut().zip(prev).for_each(|(a, b)| *a -= p * b);
            }
            let norm = row.iter().map(|a| a * a).sum::<f64>().sqrt();
            // A Gaussian row is independent of the previous ones with probability 1.
            row.iter_mut().for_each(|a| *a /= norm);
        }
        Rotation::Dense(m.into_iter().map(|x| x as f32).collect())
    }

    /// A structured rotation with signs drawn from `seed`.
    pub fn fht(dim: usize, seed: u64) -> Rotation {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        Rotation::Fht(
            (0..FHT_ROUNDS * dim)
                .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
                .collect(),
        )
    }

    /// The header code of this kind (`codes.bin` field 5).
    pub fn kind_code(&self) -> u64 {
        match self {
            Rotation::Dense(_) => 0,
            Rotation::Fht(_) => 1,
        }
    }

    /// Floats stored after the centre in `codes.bin` for a rotation of kind `code`.
    pub fn stored_len(code: u64, dim: usize) -> Option<usize> {
        match code {
            0 => dim.checked_mul(dim),
            1 => dim.checked_mul(FHT_ROUNDS),
            _ => None,
        }
    }

    /// The stored floats.
    pub fn params(&self) -> &[f32] {
        match self {
            Rotation::Dense(m) => m,
            Rotation::Fht(s) => s,
        }
    }

    /// A rotation from its header code and stored floats, checked.
    pub fn from_parts(code: u64, dim: usize, params: Vec<f32>) -> Result<Rotation> {
        let Some(want) = Rotation::stored_len(code, dim) else {
            return Err(Error::invalid(format!(
                "rabitq codes: unknown rotation kind {code}"
            )));
        };
        if params.len() != want {
            return Err(Error::invalid(format!(
                "rabitq codes: a rotation of {} values for {dim} dimensions (kind {code} wants {want})",
                params.len()
            )));
        }
        match code {
            0 if params.iter().all(|x| x.is_finite()) => Ok(Rotation::Dense(params)),
            0 => Err(Error::invalid(
                "rabitq codes: the rotation holds a non-finite value",
            )),
            _ if params.iter().all(|&x| x == 1.0 || x == -1.0) => Ok(Rotation::Fht(params)),
            _ => Err(Error::invalid(
                "rabitq codes: a structured rotation's signs must be 1 or -1",
            )),
        }
    }

    /// `out = P v` (`v.len() == out.len() == dim`).
    pub fn apply(&self, v: &[f32], out: &mut [f32]) {
        let dim = v.len();
        match self {
            Rotation::Dense(m) => {
                for (o, row) in out.iter_mut().zip(m.chunks_exact(dim)) {
                    *o = searchd_kernels::dot(row, v);
                }
            }
            Rotation::Fht(signs) => {
                out.copy_from_slice(v);
                for (round, s) in signs.chunks_exact(dim).enumerate() {
                    out.iter_mut().zip(s).for_each(|(x, s)| *x *= s);
                    hadamard(&mut out[window(dim, round)]);
                    kac(out);
                }
            }
        }
    }

    /// `out = P^T v`, the inverse (`v.len() == out.len() == dim`).
    pub fn apply_transpose(&self, v: &[f32], out: &mut [f32]) {
        let dim = v.len();
        match self {
            Rotation::Dense(m) => {
                out.fill(0.0);
                for (&a, row) in v.iter().zip(m.chunks_exact(dim)) {
                    out.iter_mut().zip(row).for_each(|(o, r)| *o += a * r);
                }
            }
            Rotation::Fht(signs) => {
                out.copy_from_slice(v);
                for (round, s) in signs.chunks_exact(dim).enumerate().rev() {
                    kac(out);
                    hadamard(&mut out[window(dim, round)]);
                    out.iter_mut().zip(s).for_each(|(x, s)| *x *= s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matrix of `r` (column j = P e_j), row-major.
    fn matrix(r: &Rotation, dim: usize) -> Vec<f64> {
        let mut m = vec![0f64; dim * dim];
        let mut e = vec![0f32; dim];
        let mut out = vec![0f32; dim];
        for j in 0..dim {
            e.fill(0.0);
            e[j] = 1.0;
            r.apply(&e, &mut out);
            for i in 0..dim {
                m[i * dim + j] = out[i] as f64;
            }
        }
        m
    }

    #[test]
    fn both_kinds_are_orthogonal_and_their_transpose_inverts_them() {
        for dim in [1usize, 2, 3, 7, 16, 50, 64, 100, 384] {
            for r in [Rotation::fht(dim, 9), Rotation::dense(dim, 9)] {
                let m = matrix(&r, dim);
                for i in 0..dim {
                    for k in 0..dim {
                        let d: f64 = (0..dim).map(|j| m[i * dim + j] * m[k * dim + j]).sum();
                        let want = if i == k { 1.0 } else { 0.0 };
                        assert!((d - want).abs() < 1e-4, "dim {dim} ({i},{k}) {d}");
                    }
                }
                let v: Vec<f32> = (0..dim).map(|i| (i as f32 * 0.37).sin()).collect();
                let (mut p, mut back) = (vec![0f32; dim], vec![0f32; dim]);
                r.apply(&v, &mut p);
                r.apply_transpose(&p, &mut back);
                for (a, b) in v.iter().zip(&back) {
                    assert!((a - b).abs() < 1e-4, "dim {dim}");
                }
            }
        }
    }

    /// A structured rotation spreads a single coordinate's energy over every dimension,
    /// as a dense one does: no rotated coordinate of a basis vector keeps much of it.
    #[test]
    fn the_structured_rotation_spreads_every_direction() {
        for dim in [64usize, 100, 384, 768] {
            let r = Rotation::fht(dim, 3);
            let m = matrix(&r, dim);
            let max = m.iter().fold(0f64, |a, x| a.max(x.abs()));
            // A dense Gaussian rotation's largest entry is about sqrt(2 ln(dim^2) / dim).
            let bound = 1.6 * (2.0 * ((dim * dim) as f64).ln() / dim as f64).sqrt();
            assert!(max < bound, "dim {dim}: largest entry {max} >= {bound}");
        }
    }

    #[test]
    fn stored_parts_are_checked() {
        assert!(Rotation::from_parts(2, 4, vec![1.0; 16]).is_err());
        assert!(Rotation::from_parts(1, 4, vec![1.0; 15]).is_err());
        assert!(Rotation::from_parts(1, 4, vec![0.5; 16]).is_err());
        assert!(Rotation::from_parts(0, 2, vec![f32::NAN; 4]).is_err());
        let r = Rotation::fht(4, 1);
        assert_eq!(Rotation::from_parts(1, 4, r.params().to_vec()).unwrap(), r);
    }
}
