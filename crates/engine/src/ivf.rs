//! IVF-PQ: an inverted file over coarse k-means lists, with product-quantized residuals.
//!
//! Build: `nlist` coarse centroids by k-means (L2) on a sample; every vector goes to the
//! list of its nearest centroid; the residual `x - c` is product-quantized ([`crate::pq`]),
//! with codebooks trained on residuals (which are smaller and more alike across lists than
//! the vectors, so 256 centroids per subspace cover them better).
//!
//! Search: rank the centroids against the query, scan the `nprobe` best lists, score each
//! code as `<q, c> + <q, decode(residual)>` (one lookup table per query serves every list,
//! because the residual codebooks are shared; only `<q, c>` changes per list), keep the
//! best `oversample x k`, then rescore those with the float32 vectors.
//!
//! `ivf.bin`: 64-byte header [n, dim, nlist, 0, 0, 0], then nlist x dim f32 centroids,
//! nlist + 1 u32 list offsets, and n u32 row ids in list order. `codes.bin` is the PQ
//! layout of `build::write_codes` with its norms and codes in list order (position `j`
//! holds row `ids[j]`), so scanning a list reads codes sequentially.

use searchd_kernels::Metric;

use crate::error::{Error, Result};
use crate::heap::Neighbor;

/// Lloyd iterations of the coarse k-means.
pub const DEFAULT_ITERS: usize = 10;

/// Training rows per coarse centroid (at most [`MAX_SAMPLE`] in all).
pub const SAMPLE_PER_LIST: usize = 64;

/// Most rows the coarse k-means trains on.
pub const MAX_SAMPLE: usize = 131_072;

/// Default list count: about `4 sqrt(n)`, rounded up to a power of two, and at most `n / 8`
/// so lists hold several vectors even for tiny inputs.
pub fn default_nlist(n: usize) -> usize {
    let target = (4.0 * (n as f64).sqrt()).ceil() as usize;
    target.next_power_of_two().min(n / 8).max(1)
}

/// Coarse centroids (`nlist x dim`) by seeded k-means on a sample of `vectors`.
pub fn train_coarse(
    vectors: &[f32],
    dim: usize,
    nlist: usize,
    iters: usize,
    seed: u64,
) -> Result<Vec<f32>> {
    use rand::{RngExt, SeedableRng};
    let n = vectors.len() / dim.max(1);
    if nlist == 0 || nlist > n {
        return Err(Error::InvalidParam {
            name: "nlist",
            message: format!("must be between 1 and the number of vectors ({n}), got {nlist}"),
        });
    }
    if iters == 0 {
        return Err(Error::InvalidParam {
            name: "nlist",
            message: "coarse k-means needs at least 1 iteration".into(),
        });
    }
    let take = (nlist * SAMPLE_PER_LIST).clamp(nlist, MAX_SAMPLE).min(n);
    let sample: Vec<f32> = (0..take)
        .flat_map(|i| {
            let r = i * n / take;
            vectors[r * dim..(r + 1) * dim].iter().copied()
        })
        .collect();
    // Distinct seeded starting rows (partial Fisher-Yates over the sample).
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut pick: Vec<usize> = (0..take).collect();
    for i in 0..nlist {
        let j = rng.random_range(i..take);
        pick.swap(i, j);
    }
    let mut cent: Vec<f32> = pick[..nlist]
        .iter()
        .flat_map(|&r| sample[r * dim..(r + 1) * dim].iter().copied())
        .collect();
    for _ in 0..iters {
        let assign = crate::exact::knn(Metric::L2, &cent, &sample, dim, 1, &|_| {});
        let mut sums = vec![0f64; nlist * dim];
        let mut counts = vec![0usize; nlist];
        // Sums run in row order on one thread: the result does not depend on threads.
        for (i, a) in assign.iter().enumerate() {
            let c = a[0].id as usize;
            counts[c] += 1;
            for (s, &x) in sums[c * dim..(c + 1) * dim]
                .iter_mut()
                .zip(&sample[i * dim..(i + 1) * dim])
            {
                *s += x as f64;
            }
        }
        // Empty lists restart at the sample rows farthest from their centroids.
        let mut far: Vec<(f32, usize)> = assign
            .iter()
            .enumerate()
            .map(|(i, a)| (a[0].dist, i))
            .collect();
        far.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut far = far.into_iter();
        for c in 0..nlist {
            let row = &mut cent[c * dim..(c + 1) * dim];
            if counts[c] == 0 {
                if let Some((_, i)) = far.next() {
                    row.copy_from_slice(&sample[i * dim..(i + 1) * dim]);
                }
            } else {
                for (r, s) in row.iter_mut().zip(&sums[c * dim..(c + 1) * dim]) {
                    *r = (s / counts[c] as f64) as f32;
                }
            }
        }
    }
    Ok(cent)
}

/// The list (nearest centroid, L2) of every row of `vectors`.
pub fn assign(vectors: &[f32], centroids: &[f32], dim: usize) -> Vec<u32> {
    crate::exact::knn(Metric::L2, centroids, vectors, dim, 1, &|_| {})
        .into_iter()
        .map(|a| a[0].id)
        .collect()
}

/// An opened `ivf.bin`, borrowed.
pub(crate) struct IvfView<'a> {
    pub dim: usize,
    pub centroids: &'a [f32],
    pub offsets: &'a [u32],
    pub ids: &'a [u32],
}

impl IvfView<'_> {
    /// Number of coarse lists.
    pub fn nlist(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// The `nprobe` lists to scan for query `q`, best first.
    pub fn probe(&self, metric: Metric, q: &[f32], nprobe: usize) -> Vec<(u32, f32)> {
        let d = self.dim;
        // (ranking key, list, <q, c>)
        let mut keyed: Vec<(f32, u32, f32)> = self
            .centroids
            .chunks_exact(d)
            .enumerate()
            .map(|(l, c)| {
                let ip = searchd_kernels::dot(q, c);
                let key = match metric {
                    Metric::L2 => searchd_kernels::l2sq(q, c),
                    Metric::Cosine | Metric::InnerProduct => -ip,
                };
                (key, l as u32, ip)
            })
            .collect();
        let nprobe = nprobe.clamp(1, keyed.len());
        let cmp =
            |a: &(f32, u32, f32), b: &(f32, u32, f32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        if nprobe < keyed.len() {
            keyed.select_nth_unstable_by(nprobe - 1, cmp);
            keyed.truncate(nprobe);
        }
        keyed.sort_unstable_by(cmp);
        keyed.into_iter().map(|(_, l, ip)| (l, ip)).collect()
    }
}

/// Scan the probed lists: the best `r` positions by approximate distance, as neighbours
/// whose `id` is the row id.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan(
    ivf: &IvfView<'_>,
    metric: Metric,
    probed: &[(u32, f32)],
    lut: &crate::pq::PqQuery,
    codes: &[u8],
    m: usize,
    norms: &[f32],
    query_norm: f32,
    r: usize,
    filter: Option<&dyn Fn(u32) -> bool>,
    deadline: Option<std::time::Instant>,
) -> std::result::Result<Vec<Neighbor>, crate::error::SearchError> {
    let mut top = crate::heap::TopK::new(r);
    for &(l, base_ip) in probed {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(crate::error::SearchError::DeadlineExceeded);
        }
        let (s, e) = (
            ivf.offsets[l as usize] as usize,
            ivf.offsets[l as usize + 1] as usize,
        );
        for j in s..e {
            let id = ivf.ids[j];
            if filter.is_some_and(|f| !f(id)) {
                continue;
            }
            let ip = base_ip + lut.ip(&codes[j * m..(j + 1) * m]);
            let dist = crate::distance::from_ip(metric, ip, norms[j], query_norm);
            if dist < top.bound() {
                top.push(Neighbor { dist, id });
            }
        }
    }
    Ok(top.into_sorted())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blobs(n: usize, dim: usize, k: usize) -> Vec<f32> {
        // k well-separated blobs: centre c has value 10 * c in dimension c % dim.
        (0..n)
            .flat_map(|i| {
                let c = i % k;
                (0..dim).map(move |d| {
                    let centre = if d == c % dim {
                        10.0 * (c + 1) as f32
                    } else {
                        0.0
                    };
                    centre + ((i * 31 + d * 7) % 13) as f32 * 0.01
                })
            })
            .collect()
    }

    #[test]
    fn coarse_kmeans_lists_never_mix_separated_blobs_and_are_deterministic() {
        // Seeded starts at data rows: once every blob holds a starting centroid (with 16
        // starts over 4 blobs, this seed does), Lloyd's iterations keep each centroid in
        // its blob, so no list mixes rows of two blobs.
        let (n, dim, k, nlist) = (2000, 8, 4, 16);
        let v = blobs(n, dim, k);
        let a = train_coarse(&v, dim, nlist, 10, 3).unwrap();
        assert_eq!(a, train_coarse(&v, dim, nlist, 10, 3).unwrap());
        assert!(a.iter().all(|x| x.is_finite()));
        let lists = assign(&v, &a, dim);
        let mut blob_of_list = vec![None; nlist];
        for (i, &l) in lists.iter().enumerate() {
            let blob = i % k;
            let seen = blob_of_list[l as usize].get_or_insert(blob);
            assert_eq!(*seen, blob, "list {l} mixes blobs {seen} and {blob}");
        }
        let mut covered: Vec<usize> = blob_of_list.iter().flatten().copied().collect();
        covered.sort_unstable();
        covered.dedup();
        assert_eq!(covered, vec![0, 1, 2, 3]);
    }

    #[test]
    fn bad_list_counts_are_refused() {
        let v = blobs(100, 4, 2);
        assert!(train_coarse(&v, 4, 0, 5, 1).is_err());
        assert!(train_coarse(&v, 4, 101, 5, 1).is_err());
        assert!(train_coarse(&v, 4, 4, 0, 1).is_err());
        assert_eq!(default_nlist(1_000_000), 4096);
        assert_eq!(default_nlist(50_000), 1024);
        assert_eq!(default_nlist(5), 1);
    }
}
