//! Exact (brute-force) k-nearest-neighbour search: the ground truth every ANN result is
//! checked against, and the `flat` index kind.
//!
//! Batch search is GEMM-shaped: a tile of queries is scored against a block of base rows
//! with [`searchd_kernels::dot_block`], so each base row loaded from memory is reused
//! against every query of the tile. Tiles run in parallel on the current rayon pool.

use rayon::prelude::*;
use searchd_kernels::Metric;

use crate::heap::{Neighbor, TopK};

/// Queries per tile and base rows per block. 64 x 1024 x 4 B = 256 KiB of scores per tile
/// (L2-sized), and a 1024 x 384 block of base rows is 1.5 MiB, shared by the whole tile.
const QUERY_TILE: usize = 64;
const BASE_BLOCK: usize = 1024;

/// Exact top-`k` neighbours of every query. `base` is n x dim, `queries` nq x dim, both
/// row-major; for cosine both must already be unit length. Returns nq lists, best first
/// (ties broken by lower id). `progress` is called with the number of queries finished.
pub fn knn(
    metric: Metric,
    base: &[f32],
    queries: &[f32],
    dim: usize,
    k: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Vec<Neighbor>> {
    let n = base.len() / dim;
    let k = k.min(n);
    // ||b||^2 for L2: dist = ||q||^2 + ||b||^2 - 2 q.b ; ||q||^2 is constant per query.
    let norms: Vec<f32> = if metric == Metric::L2 {
        base.par_chunks(dim)
            .map(|r| searchd_kernels::dot(r, r))
            .collect()
    } else {
        Vec::new()
    };
    let done = std::sync::atomic::AtomicU64::new(0);
    let tiles: Vec<Vec<Vec<Neighbor>>> = queries
        .par_chunks(QUERY_TILE * dim)
        .map(|qtile| {
            let tq = qtile.len() / dim;
            let mut tops: Vec<TopK> = (0..tq).map(|_| TopK::new(k)).collect();
            let mut scores = vec![0f32; tq * BASE_BLOCK];
            for (bi, block) in base.chunks(BASE_BLOCK * dim).enumerate() {
                let nb = block.len() / dim;
                let out = &mut scores[..tq * nb];
                searchd_kernels::dot_block(qtile, tq, block, nb, dim, out);
                let first = (bi * BASE_BLOCK) as u32;
                for (qi, top) in tops.iter_mut().enumerate() {
                    let row = &out[qi * nb..(qi + 1) * nb];
                    let mut bound = top.bound();
                    for (j, &s) in row.iter().enumerate() {
                        let dist = match metric {
                            Metric::L2 => norms[first as usize + j] - 2.0 * s,
                            _ => -s,
                        };
                        if dist <= bound {
                            top.push(Neighbor {
                                dist,
                                id: first + j as u32,
                            });
                            bound = top.bound();
                        }
                    }
                }
            }
            let d = done.fetch_add(tq as u64, std::sync::atomic::Ordering::Relaxed) + tq as u64;
            progress(d);
            tops.into_iter()
                .enumerate()
                .map(|(qi, t)| {
                    let mut v = t.into_sorted();
                    if metric == Metric::L2 {
                        // Report true squared distances, not the shifted ones.
                        let q = &qtile[qi * dim..(qi + 1) * dim];
                        let qn = searchd_kernels::dot(q, q);
                        v.iter_mut()
                            .for_each(|nb| nb.dist = (nb.dist + qn).max(0.0));
                    }
                    v
                })
                .collect()
        })
        .collect();
    tiles.into_iter().flatten().collect()
}

/// Exact top-`k` for one query, single-threaded, with an optional filter and deadline
/// check. Used by the `flat` index kind.
pub(crate) fn scan_one(
    metric: Metric,
    base: &[f32],
    dim: usize,
    query: &[f32],
    k: usize,
    filter: Option<&dyn Fn(u32) -> bool>,
    deadline: Option<std::time::Instant>,
) -> Result<Vec<Neighbor>, crate::error::SearchError> {
    let mut top = TopK::new(k);
    for (i, row) in base.chunks_exact(dim).enumerate() {
        if i % 4096 == 4095 {
            if let Some(d) = deadline {
                if std::time::Instant::now() >= d {
                    return Err(crate::error::SearchError::DeadlineExceeded);
                }
            }
        }
        if filter.is_some_and(|f| !f(i as u32)) {
            continue;
        }
        let dist = crate::distance::distance(metric, query, row);
        top.push(Neighbor { dist, id: i as u32 });
    }
    Ok(top.into_sorted())
}
