//! Partitioned indexes: balanced k-means partitions, each with its own HNSW graph, and a
//! search that routes a query to its nearest partitions.
//!
//! Built for indexes larger than memory: a search touches `nprobe` partitions of about
//! `n / K` rows each, so only the partitions queries reach need to be resident.
//!
//! - **Partitions** ([`assign_balanced`]): k-means centroids on a sample
//!   ([`crate::ivf::train_coarse`]), then every row goes to its nearest centroid that still
//!   has room, rows with the clearest preference first, under a cap of
//!   [`BALANCE_SLACK`] times the mean size: the largest partition stays near the median
//!   (an unbalanced k-means at 1M left some partitions 3x the median, and their queries
//!   paid for it in the tail).
//! - **Overlap** (SPANN's closure): a row is also put in up to `overlap` further
//!   partitions among its [`CANDIDATES`] nearest whose centroid is at most
//!   [`BOUNDARY_EPS`] farther (in L2) than its own partition's, while those have room
//!   ([`OVERLAP_ROOM`]); a query near a boundary then finds the row from either side.
//! - **Search** ([`crate::Index::search`] on a partitioned index): score the centroids,
//!   search the `nprobe` nearest partitions' graphs (each with its share of the filter as
//!   an allow set), merge by score and drop the copies overlap made.
//! - **The graph manager** (partitions resident or not under a memory budget) lives with
//!   the index that uses it: `crate::index::part_store`.

use rayon::prelude::*;
use searchd_kernels::Metric;

use crate::error::{Error, Result};

/// Partition size cap: at most `BALANCE_SLACK * n / K` rows are assigned to a partition
/// as their own (before overlap).
pub const BALANCE_SLACK: f64 = 1.2;
/// Nearest centroids considered per row, for its own partition and its overlap copies.
pub const CANDIDATES: usize = 8;
/// Overlap: a further partition takes a copy of a row when its centroid is at most
/// `1 + BOUNDARY_EPS` times as far (L2) as the row's own partition's.
pub const BOUNDARY_EPS: f32 = 0.1;
/// Overlap copies a partition takes: at most this share of the cap per overlap level.
pub const OVERLAP_ROOM: f64 = 0.5;
/// Default partition count: about one per [`ROWS_PER_PARTITION`] rows.
pub const ROWS_PER_PARTITION: usize = 4096;
/// Default partitions probed per search (`nprobe`) when neither the search nor the
/// manifest says.
pub const DEFAULT_NPROBE: usize = 16;

/// Default partition count for `n` rows: `n / ROWS_PER_PARTITION`, at least 1, at most
/// `n`.
pub fn default_partitions(n: usize) -> usize {
    n.div_ceil(ROWS_PER_PARTITION).clamp(1, n.max(1))
}

/// The partitions of a build: members of each (ascending rows) and how many were copies.
pub struct Assignment {
    /// `K x dim` centroids.
    pub centroids: Vec<f32>,
    /// Rows of each partition, ascending.
    pub parts: Vec<Vec<u32>>,
    /// Rows placed in a second (or later) partition.
    pub copies: usize,
}

/// Train `k` centroids on `data` (unit rows under cosine) and assign every row to one
/// partition, balanced, plus up to `overlap` boundary copies. Deterministic for a seed
/// (the parallel parts are exact scans whose result does not depend on threads).
pub fn assign_balanced(
    data: &[f32],
    dim: usize,
    k: usize,
    overlap: usize,
    iters: usize,
    seed: u64,
) -> Result<Assignment> {
    let n = data.len() / dim;
    if k == 0 || k > n {
        return Err(Error::InvalidParam {
            name: "partitions",
            message: format!("must be between 1 and the number of vectors ({n}), got {k}"),
        });
    }
    let centroids = crate::ivf::train_coarse(data, dim, k, iters, seed)?;
    let c = CANDIDATES.min(k);
    let near = crate::exact::knn(Metric::L2, &centroids, data, dim, c, &|_| {});
    // Squared L2 without the row's own norm (constant per row): add it back so ratios
    // between candidates mean distances.
    let norms: Vec<f32> = data
        .par_chunks(dim)
        .map(|r| searchd_kernels::dot(r, r))
        .collect();
    let dist = |row: usize, d: f32| (d + norms[row]).max(0.0).sqrt();
    let cap = ((BALANCE_SLACK * n as f64 / k as f64).ceil() as usize).max(1);
    // Rows with the clearest preference (largest gap between their nearest two centroids)
    // choose first; ties by row.
    let mut order: Vec<u32> = (0..n as u32).collect();
    let gap = |r: usize| {
        let l = &near[r];
        if l.len() < 2 {
            0.0
        } else {
            dist(r, l[1].dist) - dist(r, l[0].dist)
        }
    };
    let gaps: Vec<f32> = (0..n).map(gap).collect();
    order.sort_by(|&a, &b| {
        gaps[b as usize]
            .total_cmp(&gaps[a as usize])
            .then(a.cmp(&b))
    });
    let mut sizes = vec![0usize; k];
    let mut own = vec![u32::MAX; n];
    let mut overflow = Vec::new();
    for &r in &order {
        match near[r as usize]
            .iter()
            .find(|nb| sizes[nb.id as usize] < cap)
        {
            Some(nb) => {
                own[r as usize] = nb.id;
                sizes[nb.id as usize] += 1;
            }
            None => overflow.push(r),
        }
    }
    // Rows whose candidates were all full: the nearest partition with room (k * cap >= n,
    // so there is one).
    for r in overflow {
        let row = &data[r as usize * dim..(r as usize + 1) * dim];
        let best = (0..k)
            .filter(|&p| sizes[p] < cap)
            .map(|p| {
                let cent = &centroids[p * dim..(p + 1) * dim];
                let d: f32 = row.iter().zip(cent).map(|(a, b)| (a - b) * (a - b)).sum();
                (d, p)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, p)| p)
            .expect("k * cap >= n leaves room");
        own[r as usize] = best as u32;
        sizes[best] += 1;
    }
    let mut parts: Vec<Vec<u32>> = vec![Vec::new(); k];
    for (r, &p) in own.iter().enumerate() {
        parts[p as usize].push(r as u32);
    }
    let mut copies = 0;
    if overlap > 0 {
        let room = ((OVERLAP_ROOM * overlap as f64 * cap as f64).ceil() as usize).max(1);
        let mut extra = vec![0usize; k];
        // Rows most on a boundary (smallest gap) copy first: a copy helps them most.
        for &r in order.iter().rev() {
            let (r, l) = (r as usize, &near[r as usize]);
            let home = l.iter().find(|nb| nb.id == own[r]);
            let limit = match home {
                Some(h) => dist(r, h.dist) * (1.0 + BOUNDARY_EPS),
                None => continue,
            };
            let mut placed = 0;
            for nb in l {
                if placed == overlap || dist(r, nb.dist) > limit {
                    break;
                }
                let p = nb.id as usize;
                if nb.id == own[r] || extra[p] >= room {
                    continue;
                }
                parts[p].push(r as u32);
                extra[p] += 1;
                placed += 1;
                copies += 1;
            }
        }
        parts.iter_mut().for_each(|m| m.sort_unstable());
    }
    Ok(Assignment {
        centroids,
        parts,
        copies,
    })
}

/// The `nprobe` partitions nearest `q` (L2 to the centroids), nearest first.
pub(crate) fn route(centroids: &[f32], dim: usize, q: &[f32], nprobe: usize) -> Vec<u32> {
    let mut d: Vec<(f32, u32)> = centroids
        .chunks_exact(dim)
        .enumerate()
        .map(|(p, c)| {
            let cc = searchd_kernels::dot(c, c);
            (cc - 2.0 * searchd_kernels::dot(c, q), p as u32)
        })
        .collect();
    let nprobe = nprobe.clamp(1, d.len().max(1));
    if nprobe < d.len() {
        d.select_nth_unstable_by(nprobe - 1, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        d.truncate(nprobe);
    }
    d.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    d.into_iter().map(|(_, p)| p).collect()
}

/// Sizes of the partitions: (min, median, max).
pub fn size_spread(sizes: &[usize]) -> (usize, usize, usize) {
    let mut s = sizes.to_vec();
    s.sort_unstable();
    match s.len() {
        0 => (0, 0, 0),
        l => (s[0], s[l / 2], s[l - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clustered(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let centres: Vec<f32> = (0..8 * dim).map(|_| rng.random::<f32>() * 4.0).collect();
        let mut out = Vec::with_capacity(n * dim);
        for i in 0..n {
            // Skewed: cluster 0 holds half the rows.
            let c = if i % 2 == 0 { 0 } else { i % 8 };
            for j in 0..dim {
                out.push(centres[c * dim + j] + rng.random::<f32>() - 0.5);
            }
        }
        out
    }

    #[test]
    fn partitions_are_balanced_and_cover_every_row_once_without_overlap() {
        let (n, dim, k) = (4000, 8, 16);
        let data = clustered(n, dim, 1);
        let a = assign_balanced(&data, dim, k, 0, 10, 7).unwrap();
        let sizes: Vec<usize> = a.parts.iter().map(|p| p.len()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), n);
        assert_eq!(a.copies, 0);
        let (_, med, max) = size_spread(&sizes);
        assert!(max <= (BALANCE_SLACK * n as f64 / k as f64).ceil() as usize);
        assert!(max as f64 / med as f64 <= 2.0, "{sizes:?}");
        let mut all: Vec<u32> = a.parts.concat();
        all.sort_unstable();
        assert_eq!(all, (0..n as u32).collect::<Vec<_>>());
    }

    #[test]
    fn overlap_copies_rows_into_other_partitions_only() {
        let (n, dim, k) = (4000, 8, 16);
        let data = clustered(n, dim, 2);
        let a = assign_balanced(&data, dim, k, 1, 10, 7).unwrap();
        let total: usize = a.parts.iter().map(|p| p.len()).sum();
        assert_eq!(total, n + a.copies);
        assert!(a.copies > 0);
        for p in &a.parts {
            assert!(
                p.windows(2).all(|w| w[0] < w[1]),
                "a row twice in one partition"
            );
        }
        // Deterministic.
        let b = assign_balanced(&data, dim, k, 1, 10, 7).unwrap();
        assert_eq!(a.parts, b.parts);
    }

    #[test]
    fn routing_picks_the_nearest_centroids_first() {
        let cents = [0.0, 0.0, 10.0, 0.0, 1.0, 0.0, 5.0, 0.0];
        assert_eq!(route(&cents, 2, &[0.9, 0.0], 3), vec![2, 0, 3]);
        assert_eq!(route(&cents, 2, &[0.9, 0.0], 99).len(), 4);
    }
}
