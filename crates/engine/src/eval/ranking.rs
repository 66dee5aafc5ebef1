//! Ranking quality against judgements (binary relevance): nDCG@k, MRR@k, recall@k, and a
//! paired percentile bootstrap for their intervals. `searchd eval --collection` (the quality
//! lab) scores every retrieval mode with these; the ANN side of `searchd eval` (recall of an
//! index against exact neighbours, speed per ef) is the parent module.

/// nDCG@k with binary gains: `hits[i]` tells whether the hit at rank i+1 is relevant.
pub fn ndcg_at(hits: &[bool], relevant: usize, k: usize) -> f64 {
    if relevant == 0 {
        return 0.0;
    }
    let dcg: f64 = hits
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, r)| **r)
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let idcg: f64 = (0..relevant.min(k))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    dcg / idcg
}

/// MRR@k: 1 / rank of the first relevant hit within k, else 0.
pub fn mrr_at(hits: &[bool], k: usize) -> f64 {
    hits.iter()
        .take(k)
        .position(|r| *r)
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// recall@k: relevant hits in the top k / relevant documents.
pub fn recall_at(hits: &[bool], relevant: usize, k: usize) -> f64 {
    if relevant == 0 {
        return 0.0;
    }
    hits.iter().take(k).filter(|r| **r).count() as f64 / relevant as f64
}

/// A small seeded generator for the bootstrap (splitmix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Percentile bootstrap of the mean of `f(i)` over `n` items (the same resamples for a
/// given seed, so two calls with the same seed are paired).
pub fn bootstrap_mean(n: usize, resamples: usize, seed: u64, f: impl Fn(usize) -> f64) -> [f64; 2] {
    if n == 0 || resamples == 0 {
        return [0.0, 0.0];
    }
    let mut rng = Rng(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| f(rng.below(n))).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (resamples - 1) as f64).round() as usize).min(resamples - 1)];
    [at(0.025), at(0.975)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_hand_computed() {
        // Relevant at ranks 1 and 3, two relevant in all.
        let h = [true, false, true, false];
        let idcg = 1.0 + 1.0 / 3f64.log2();
        let dcg = 1.0 + 1.0 / 4f64.log2(); // rank 3 → log2(4) = 2
        assert!((ndcg_at(&h, 2, 10) - dcg / idcg).abs() < 1e-12);
        assert!((mrr_at(&h, 10) - 1.0).abs() < 1e-12);
        assert!((recall_at(&h, 2, 100) - 1.0).abs() < 1e-12);
        // First relevant at rank 4; three relevant, one found.
        let h = [false, false, false, true];
        assert!((mrr_at(&h, 10) - 0.25).abs() < 1e-12);
        assert!((mrr_at(&h, 3)).abs() < 1e-12, "rank 4 is outside MRR@3");
        assert!((recall_at(&h, 3, 100) - 1.0 / 3.0).abs() < 1e-12);
        let idcg3 = 1.0 + 1.0 / 3f64.log2() + 0.5;
        assert!((ndcg_at(&h, 3, 10) - (1.0 / 5f64.log2()) / idcg3).abs() < 1e-12);
        // Perfect ranking = 1; nothing found = 0; more relevant than k caps the ideal at k.
        assert!((ndcg_at(&[true; 10], 30, 10) - 1.0).abs() < 1e-12);
        assert_eq!(ndcg_at(&[false; 10], 1, 10), 0.0);
        assert_eq!(ndcg_at(&[], 0, 10), 0.0);
        // Hits past k do not count.
        let mut h = vec![false; 10];
        h.push(true);
        assert_eq!(ndcg_at(&h, 1, 10), 0.0);
        assert!((recall_at(&h, 1, 100) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_brackets_the_mean_and_is_paired() {
        let v: Vec<f64> = (0..200).map(|i| (i % 10) as f64 / 10.0).collect();
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let ci = bootstrap_mean(v.len(), 1000, 7, |i| v[i]);
        assert!(ci[0] < m && m < ci[1], "{ci:?} around {m}");
        assert!(ci[1] - ci[0] < 0.2);
        // Same seed, same resamples.
        assert_eq!(ci, bootstrap_mean(v.len(), 1000, 7, |i| v[i]));
        // A constant difference has a zero-width interval at that difference.
        let d = bootstrap_mean(v.len(), 500, 7, |i| (v[i] + 0.1) - v[i]);
        assert!((d[0] - 0.1).abs() < 1e-9 && (d[1] - 0.1).abs() < 1e-9);
    }
}
