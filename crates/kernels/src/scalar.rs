//! Scalar reference kernels: obviously correct, used as the oracle in property tests of
//! every implementation (including the portable "scalar" backend, which is a blocked
//! rewrite of these). Deliberately simple: sequential sums, no blocking.

/// Inner product (sequential sum).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Squared Euclidean distance (sequential sum).
pub fn l2sq(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Squared Euclidean norm (sequential sum).
pub fn norm_sq(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum()
}

/// `out[i * nb + j] = dot(q_i, b_j)`, one pair at a time.
pub fn dot_block(q: &[f32], nq: usize, b: &[f32], nb: usize, dim: usize, out: &mut [f32]) {
    for i in 0..nq {
        let qi = &q[i * dim..(i + 1) * dim];
        for j in 0..nb {
            out[i * nb + j] = dot(qi, &b[j * dim..(j + 1) * dim]);
        }
    }
}

/// `out[i * nb + j] = l2sq(q_i, b_j)`, one pair at a time.
pub fn l2sq_block(q: &[f32], nq: usize, b: &[f32], nb: usize, dim: usize, out: &mut [f32]) {
    for i in 0..nq {
        let qi = &q[i * dim..(i + 1) * dim];
        for j in 0..nb {
            out[i * nb + j] = l2sq(qi, &b[j * dim..(j + 1) * dim]);
        }
    }
}

/// `sum(a[i] * b[i])` of unsigned bytes and signed 16-bit weights, in `i32` with
/// wrap-around (exact whenever the true sum fits an `i32`; SQ8 queries are scaled so it
/// does).
pub fn dot_u8_i16(a: &[u8], b: &[i16]) -> i32 {
    a.iter()
        .zip(b)
        .fold(0i32, |s, (&x, &y)| s.wrapping_add(x as i32 * y as i32))
}

/// `sum(v[i] * b[i])` over the 4-bit values `v` packed in `a` (two per byte) and signed
/// 16-bit weights `b` (`b.len() == 2 * a.len()`), in `i32` with wrap-around.
///
/// Packing ([`crate::dot_u4_i16`]): bytes in blocks of 32 (the last block may be shorter);
/// in a block of `w` bytes starting at byte `s`, byte `s + j` holds value `2 * s + j` in its
/// low nibble and value `2 * s + w + j` in its high nibble.
pub fn dot_u4_i16(a: &[u8], b: &[i16]) -> i32 {
    let mut s = 0i32;
    for (blk, bytes) in a.chunks(32).enumerate() {
        let w = bytes.len();
        let base = 64 * blk;
        for (j, &byte) in bytes.iter().enumerate() {
            let lo = (byte & 0x0f) as i32;
            let hi = (byte >> 4) as i32;
            s = s.wrapping_add(lo * b[base + j] as i32);
            s = s.wrapping_add(hi * b[base + w + j] as i32);
        }
    }
    s
}

/// `sum(v[i] * b[i])` over the 4-bit values `v` packed in `a` as [`dot_u4_i16`] packs them
/// and signed 8-bit weights `b` (`b.len() == 2 * a.len()`), in `i32` (always exact: at most
/// `15 * 128` per value).
pub fn dot_u4_i8(a: &[u8], b: &[i8]) -> i32 {
    let mut s = 0i32;
    for (blk, bytes) in a.chunks(32).enumerate() {
        let w = bytes.len();
        let base = 64 * blk;
        for (j, &byte) in bytes.iter().enumerate() {
            s += (byte & 0x0f) as i32 * b[base + j] as i32;
            s += (byte >> 4) as i32 * b[base + w + j] as i32;
        }
    }
    s
}

/// Product-quantizer asymmetric score: `sum_j lut[j * 256 + codes[j]]` (sequential sum).
/// Indexing panics if `lut` is shorter than `codes.len() * 256`.
pub fn pq_adc(lut: &[f32], codes: &[u8]) -> f32 {
    codes
        .iter()
        .enumerate()
        .map(|(j, &c)| lut[j * 256 + c as usize])
        .sum()
}

/// Number of differing bits of two bit strings (`popcount(a ^ b)`), over the shorter length.
pub fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// `out[j] = l2sq(x, column j of cols)` with `cols` dimension-major (`x.len()` rows of
/// `out.len()`), sequential sums.
pub fn l2sq_columns(x: &[f32], cols: &[f32], out: &mut [f32]) {
    let n = out.len();
    for (j, o) in out.iter_mut().enumerate() {
        *o = x
            .iter()
            .enumerate()
            .map(|(d, &v)| (v - cols[d * n + j]) * (v - cols[d * n + j]))
            .sum();
    }
}

/// Index of the first smallest value, NaNs skipped; `None` if `v` is empty or all NaN.
pub fn argmin(v: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &x) in v.iter().enumerate() {
        if !x.is_nan() && best.is_none_or(|(_, b)| x < b) {
            best = Some((i, x));
        }
    }
    best.map(|(i, _)| i)
}
