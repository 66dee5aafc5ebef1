//! Scalar reference kernels: obviously correct, used as the fallback and as the oracle in
//! property tests of every SIMD path.

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn l2sq(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

pub fn dot_block(q: &[f32], nq: usize, b: &[f32], nb: usize, dim: usize, out: &mut [f32]) {
    for i in 0..nq {
        let qi = &q[i * dim..(i + 1) * dim];
        for j in 0..nb {
            out[i * nb + j] = dot(qi, &b[j * dim..(j + 1) * dim]);
        }
    }
}
