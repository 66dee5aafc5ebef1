//! Rank fusion: one ranking from a dense and a lexical one.
//!
//! Two methods, as users of Elasticsearch and Qdrant know them:
//!
//! - **RRF** (reciprocal rank fusion, Elasticsearch's `rrf` retriever): a document's score
//!   is `sum over lists of 1 / (rank_constant + rank)`, with 1-based ranks, over the first
//!   `window` hits of each list; a document missing from a list gets nothing from it.
//!   Scores of the inputs are ignored, so their scales do not matter.
//! - **Weighted** (a convex combination, like Elasticsearch's `linear` retriever): each
//!   list's scores are normalised over its own first `window` hits, per query, then summed
//!   with the request's weights. `minmax` maps the list to `[0, 1]` (all-equal scores map to
//!   1); `zscore` subtracts the mean and divides by the standard deviation (all-equal scores
//!   map to 0). A document missing from a list gets that list's lowest normalised value
//!   (0 under `minmax`), i.e. it counts as no better than the worst candidate seen.
//!
//! Ties in the fused score are broken by the better (smaller) best rank in either list,
//! then by segment and row, so the output is deterministic.

use std::collections::HashMap;

use crate::rows::{DocHit, DocRef};

/// Default RRF rank constant (Elasticsearch's `rank_constant`).
pub const DEFAULT_RANK_CONSTANT: u32 = 60;
/// Default candidates taken from each list (at least the request's `k`).
pub const DEFAULT_WINDOW: usize = 100;
/// Largest window accepted.
pub const MAX_WINDOW: usize = 1000;

/// How per-list scores are normalised before a weighted sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalize {
    /// Map each list's scores to `[0, 1]` (all-equal scores map to 1).
    MinMax,
    /// Subtract each list's mean and divide by its standard deviation.
    ZScore,
}

impl Normalize {
    /// The method's name (`minmax`, `zscore`).
    pub fn name(self) -> &'static str {
        match self {
            Normalize::MinMax => "minmax",
            Normalize::ZScore => "zscore",
        }
    }
    /// Parses a method's name (`minmax`/`min_max`, `zscore`/`z_score`/`mean_std`); `None` if unknown.
    pub fn parse(s: &str) -> Option<Normalize> {
        match s {
            "minmax" | "min_max" => Some(Normalize::MinMax),
            "zscore" | "z_score" | "mean_std" => Some(Normalize::ZScore),
            _ => None,
        }
    }
}

/// A fusion method and its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion: `sum over lists of 1 / (rank_constant + rank)`.
    Rrf {
        /// `k` of RRF (at least 1).
        rank_constant: u32,
    },
    /// A weighted sum of the per-list normalised scores.
    Weighted {
        /// Weight of the dense list (finite, at least 0).
        dense: f32,
        /// Weight of the lexical list (finite, at least 0).
        lexical: f32,
        /// How each list's scores are normalised first.
        normalize: Normalize,
    },
}

/// The fusion of a hybrid search that names none (the server's and `searchd eval`'s):
/// RRF with rank constant 60. docs/lexical-and-hybrid.md gives the measurements
/// behind the choice.
pub const DEFAULT_FUSION: Fusion = Fusion::Rrf {
    rank_constant: DEFAULT_RANK_CONSTANT,
};

impl Default for Fusion {
    fn default() -> Self {
        DEFAULT_FUSION
    }
}

impl Fusion {
    /// Check parameters: a rank constant of at least 1; weights finite, non-negative and
    /// not both zero.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Fusion::Rrf { rank_constant: 0 } => {
                Err("fusion.k (the RRF rank constant) must be at least 1".into())
            }
            Fusion::Rrf { .. } => Ok(()),
            Fusion::Weighted { dense, lexical, .. } => {
                if !dense.is_finite() || !lexical.is_finite() || dense < 0.0 || lexical < 0.0 {
                    Err(format!(
                        "fusion weights must be finite and >= 0, got dense {dense} and lexical {lexical}"
                    ))
                } else if dense == 0.0 && lexical == 0.0 {
                    Err("fusion weights are both 0; at least one must be positive".into())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// A short description, for reports (`rrf(k=60)`, `weighted(0.7,0.3,minmax)`).
    pub fn describe(&self) -> String {
        match *self {
            Fusion::Rrf { rank_constant } => format!("rrf(k={rank_constant})"),
            Fusion::Weighted {
                dense,
                lexical,
                normalize,
            } => format!(
                "weighted(dense={dense},lexical={lexical},{})",
                normalize.name()
            ),
        }
    }
}

/// Per-list contribution of a fused hit (for explanations and tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fused {
    /// The document.
    pub doc: DocRef,
    /// Its fused score (higher is better).
    pub score: f32,
    /// 1-based rank in the dense list, if present in its window.
    pub dense_rank: Option<u32>,
    /// 1-based rank in the lexical list, if present in its window.
    pub lexical_rank: Option<u32>,
}

impl Fused {
    /// The document with its fused score.
    pub fn hit(&self) -> DocHit {
        DocHit {
            doc: self.doc,
            score: self.score,
        }
    }
}

fn normalised(hits: &[DocHit], how: Normalize) -> (Vec<f64>, f64) {
    if hits.is_empty() {
        return (Vec::new(), 0.0);
    }
    let s: Vec<f64> = hits.iter().map(|h| h.score as f64).collect();
    match how {
        Normalize::MinMax => {
            let lo = s.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let span = hi - lo;
            if span > 0.0 && span.is_finite() {
                (s.iter().map(|x| (x - lo) / span).collect(), 0.0)
            } else {
                (vec![1.0; s.len()], 1.0)
            }
        }
        Normalize::ZScore => {
            let n = s.len() as f64;
            let mean = s.iter().sum::<f64>() / n;
            let var = s.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
            let sd = var.sqrt();
            if sd > 0.0 && sd.is_finite() {
                let z: Vec<f64> = s.iter().map(|x| (x - mean) / sd).collect();
                let lo = z.iter().copied().fold(f64::INFINITY, f64::min);
                (z, lo)
            } else {
                (vec![0.0; s.len()], 0.0)
            }
        }
    }
}

/// Fuse two rankings (each best first) into the top `k`. Only the first `window` hits of
/// each list take part (`window` is raised to `k` when smaller).
pub fn fuse(
    dense: &[DocHit],
    lexical: &[DocHit],
    fusion: &Fusion,
    window: usize,
    k: usize,
) -> Vec<Fused> {
    let window = window.max(k);
    let dense = &dense[..dense.len().min(window)];
    let lexical = &lexical[..lexical.len().min(window)];
    let mut by_doc: HashMap<DocRef, Fused> = HashMap::with_capacity(dense.len() + lexical.len());
    match *fusion {
        Fusion::Rrf { rank_constant } => {
            let c = rank_constant.max(1) as f64;
            let mut acc: HashMap<DocRef, f64> = HashMap::with_capacity(by_doc.capacity());
            for (list, is_dense) in [(dense, true), (lexical, false)] {
                for (i, h) in list.iter().enumerate() {
                    let rank = i as u32 + 1;
                    *acc.entry(h.doc).or_default() += 1.0 / (c + rank as f64);
                    let e = by_doc.entry(h.doc).or_insert(Fused {
                        doc: h.doc,
                        score: 0.0,
                        dense_rank: None,
                        lexical_rank: None,
                    });
                    if is_dense {
                        e.dense_rank.get_or_insert(rank);
                    } else {
                        e.lexical_rank.get_or_insert(rank);
                    }
                }
            }
            for (d, s) in acc {
                if let Some(f) = by_doc.get_mut(&d) {
                    f.score = s as f32;
                }
            }
        }
        Fusion::Weighted {
            dense: wd,
            lexical: wl,
            normalize,
        } => {
            let (nd, floor_d) = normalised(dense, normalize);
            let (nl, floor_l) = normalised(lexical, normalize);
            let mut parts: HashMap<DocRef, (Option<f64>, Option<f64>)> =
                HashMap::with_capacity(by_doc.capacity());
            for (i, h) in dense.iter().enumerate() {
                let e = by_doc.entry(h.doc).or_insert(Fused {
                    doc: h.doc,
                    score: 0.0,
                    dense_rank: None,
                    lexical_rank: None,
                });
                if e.dense_rank.is_none() {
                    e.dense_rank = Some(i as u32 + 1);
                    parts.entry(h.doc).or_default().0 = Some(nd[i]);
                }
            }
            for (i, h) in lexical.iter().enumerate() {
                let e = by_doc.entry(h.doc).or_insert(Fused {
                    doc: h.doc,
                    score: 0.0,
                    dense_rank: None,
                    lexical_rank: None,
                });
                if e.lexical_rank.is_none() {
                    e.lexical_rank = Some(i as u32 + 1);
                    parts.entry(h.doc).or_default().1 = Some(nl[i]);
                }
            }
            for (d, (a, b)) in parts {
                let a = if dense.is_empty() {
                    0.0
                } else {
                    a.unwrap_or(floor_d)
                };
                let b = if lexical.is_empty() {
                    0.0
                } else {
                    b.unwrap_or(floor_l)
                };
                if let Some(f) = by_doc.get_mut(&d) {
                    f.score = (wd as f64 * a + wl as f64 * b) as f32;
                }
            }
        }
    }
    let mut out: Vec<Fused> = by_doc.into_values().collect();
    let best = |f: &Fused| {
        f.dense_rank
            .unwrap_or(u32::MAX)
            .min(f.lexical_rank.unwrap_or(u32::MAX))
    };
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| best(a).cmp(&best(b)))
            .then_with(|| (a.doc.segment, a.doc.row).cmp(&(b.doc.segment, b.doc.row)))
    });
    out.truncate(k);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(rows: &[(u64, f32)]) -> Vec<DocHit> {
        rows.iter()
            .map(|&(row, score)| DocHit {
                doc: DocRef { segment: 0, row },
                score,
            })
            .collect()
    }
    fn rows(f: &[Fused]) -> Vec<u64> {
        f.iter().map(|x| x.doc.row).collect()
    }
    const RRF60: Fusion = Fusion::Rrf { rank_constant: 60 };

    #[test]
    fn rrf_hand_computed() {
        // dense: 1, 2, 3; lexical: 3, 4, 1
        let d = hits(&[(1, 0.9), (2, 0.8), (3, 0.7)]);
        let l = hits(&[(3, 12.0), (4, 11.0), (1, 2.0)]);
        let f = fuse(&d, &l, &RRF60, 100, 10);
        // 1: 1/61 + 1/63; 3: 1/63 + 1/61 (tie with 1); 2: 1/62; 4: 1/62 (tie with 2)
        let s1 = 1.0 / 61.0 + 1.0 / 63.0;
        let s2 = 1.0 / 62.0;
        assert!((f[0].score as f64 - s1).abs() < 1e-7);
        assert!((f[2].score as f64 - s2).abs() < 1e-7);
        // ties: best rank first (1 is dense rank 1; 3 is lexical rank 1 → same best rank
        // → row order); 2 (dense rank 2) and 4 (lexical rank 2) → row order.
        assert_eq!(rows(&f), vec![1, 3, 2, 4]);
        assert_eq!(f[0].dense_rank, Some(1));
        assert_eq!(f[0].lexical_rank, Some(3));
        assert_eq!(f[3].dense_rank, None);
    }

    #[test]
    fn rrf_disjoint_lists_interleave() {
        let d = hits(&[(1, 0.9), (2, 0.8)]);
        let l = hits(&[(10, 5.0), (20, 4.0)]);
        let f = fuse(&d, &l, &RRF60, 100, 10);
        assert_eq!(rows(&f), vec![1, 10, 2, 20]);
        assert!(f
            .iter()
            .all(|x| x.dense_rank.is_none() || x.lexical_rank.is_none()));
    }

    #[test]
    fn window_smaller_than_k_is_raised_to_k() {
        let d = hits(&[(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6)]);
        let l = hits(&[(4, 9.0), (3, 8.0), (2, 7.0), (1, 6.0)]);
        // window 1 < k 4: every hit of both lists must take part.
        let f = fuse(&d, &l, &RRF60, 1, 4);
        assert_eq!(f.len(), 4);
        assert!(f
            .iter()
            .all(|x| x.dense_rank.is_some() && x.lexical_rank.is_some()));
        // window 2 with k 2: only the first two of each list.
        let f = fuse(&d, &l, &RRF60, 2, 2);
        assert_eq!(rows(&f), vec![1, 4]);
        let f = fuse(&d, &l, &RRF60, 2, 10);
        assert_eq!(f.len(), 4, "window raised to k=10 takes all 4 of each");
    }

    #[test]
    fn empty_sides() {
        let d = hits(&[(1, 0.9), (2, 0.8)]);
        assert_eq!(rows(&fuse(&d, &[], &RRF60, 100, 10)), vec![1, 2]);
        assert_eq!(rows(&fuse(&[], &d, &RRF60, 100, 10)), vec![1, 2]);
        assert!(fuse(&[], &[], &RRF60, 100, 10).is_empty());
        let w = Fusion::Weighted {
            dense: 0.5,
            lexical: 0.5,
            normalize: Normalize::MinMax,
        };
        assert_eq!(rows(&fuse(&[], &d, &w, 100, 10)), vec![1, 2]);
    }

    #[test]
    fn weighted_minmax_hand_computed() {
        let d = hits(&[(1, 0.9), (2, 0.7), (3, 0.5)]); // → 1, 0.5, 0
        let l = hits(&[(3, 10.0), (4, 6.0), (2, 2.0)]); // → 1, 0.5, 0
        let w = Fusion::Weighted {
            dense: 0.6,
            lexical: 0.4,
            normalize: Normalize::MinMax,
        };
        let f = fuse(&d, &l, &w, 100, 10);
        let score = |row| f.iter().find(|x| x.doc.row == row).unwrap().score;
        assert!((score(1) - 0.6).abs() < 1e-6); // 0.6*1 + 0.4*0 (missing → floor 0)
        assert!((score(2) - 0.3).abs() < 1e-6); // 0.6*0.5 + 0.4*0
        assert!((score(3) - 0.4).abs() < 1e-6); // 0.6*0 + 0.4*1
        assert!((score(4) - 0.2).abs() < 1e-6); // 0 + 0.4*0.5
        assert_eq!(rows(&f), vec![1, 3, 2, 4]);
    }

    #[test]
    fn weighted_zscore_and_constant_lists() {
        let d = hits(&[(1, 1.0), (2, 1.0)]);
        let l = hits(&[(2, 3.0), (3, 1.0)]);
        let w = Fusion::Weighted {
            dense: 1.0,
            lexical: 1.0,
            normalize: Normalize::ZScore,
        };
        let f = fuse(&d, &l, &w, 100, 10);
        // dense z = 0, 0 (constant); lexical z = +1, -1; missing lexical → floor -1.
        let score = |row| f.iter().find(|x| x.doc.row == row).unwrap().score;
        assert!((score(2) - 1.0).abs() < 1e-6);
        assert!((score(1) - -1.0).abs() < 1e-6);
        assert!((score(3) - -1.0).abs() < 1e-6);
        assert_eq!(f[0].doc.row, 2);
        // constant list under minmax → all 1
        let w = Fusion::Weighted {
            dense: 1.0,
            lexical: 0.0,
            normalize: Normalize::MinMax,
        };
        let f = fuse(&d, &[], &w, 100, 10);
        assert!(f.iter().all(|x| (x.score - 1.0).abs() < 1e-6));
    }

    #[test]
    fn weights_favouring_one_side_reproduce_it() {
        let d = hits(&[(5, 0.9), (6, 0.8), (7, 0.1)]);
        let l = hits(&[(7, 9.0), (8, 8.0), (5, 1.0)]);
        for norm in [Normalize::MinMax, Normalize::ZScore] {
            let only_dense = Fusion::Weighted {
                dense: 1.0,
                lexical: 0.0,
                normalize: norm,
            };
            assert_eq!(rows(&fuse(&d, &l, &only_dense, 100, 3)), vec![5, 6, 7]);
        }
    }

    #[test]
    fn validation() {
        assert!(Fusion::Rrf { rank_constant: 0 }.validate().is_err());
        assert!(RRF60.validate().is_ok());
        let w = |a, b| Fusion::Weighted {
            dense: a,
            lexical: b,
            normalize: Normalize::MinMax,
        };
        assert!(w(-0.1, 1.0).validate().is_err());
        assert!(w(0.0, 0.0).validate().is_err());
        assert!(w(f32::NAN, 1.0).validate().is_err());
        assert!(w(0.0, 1.0).validate().is_ok());
    }
}
