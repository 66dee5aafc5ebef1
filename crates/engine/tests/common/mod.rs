#![allow(dead_code)]
//! Seeded test data shared by the engine tests.

use rand::{RngExt, SeedableRng};

/// Clustered, unit-length vectors: `clusters` Gaussian blobs, so HNSW has real structure
/// to find (uniform noise in high dimension makes every neighbour equally far).
pub fn clustered(n: usize, dim: usize, clusters: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<f32> = (0..clusters * dim)
        .map(|_| rng.random::<f32>() * 2.0 - 1.0)
        .collect();
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = rng.random_range(0..clusters);
        let mut row: Vec<f32> = (0..dim)
            .map(|j| centres[c * dim + j] + 0.6 * (rng.random::<f32>() * 2.0 - 1.0))
            .collect();
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
        out.extend(row);
    }
    out
}
