//! What to merge: the optimizer's merge policy as pure functions of the segments' sizes
//! (rows and alive rows), which of them another merge claimed, and the configuration. The
//! merger ([`super::merger`]) reads these from a view and merges what they pick.

use super::LiveConfig;

/// One segment as the merge policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SegStat {
    /// Rows, deleted ones included.
    pub len: usize,
    /// Rows not deleted.
    pub alive: usize,
}

/// The configuration the merge policy reads ([`LiveConfig`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct MergeParams {
    pub flat_max: usize,
    pub merge_factor: usize,
    pub max_segments: usize,
    pub vacuum_ratio: f64,
}

impl MergeParams {
    pub(super) fn of(cfg: &LiveConfig) -> MergeParams {
        MergeParams {
            flat_max: cfg.flat_max,
            merge_factor: cfg.merge_factor,
            max_segments: cfg.max_segments,
            vacuum_ratio: cfg.vacuum_ratio,
        }
    }
}

/// A merged graph segment lends its graph to the merged segment's index
/// ([`searchd_engine::extend_index`]) when at most this share of its rows is deleted.
/// Measured on dev-gcide-50k (`bench/extend_gcide.py`, a 45,000-row graph plus 5,000 new
/// rows, `bench/results/extend-gcide.md`): recall@10 at ef 64 within 0.3 points of a fresh
/// build with 2-5% deleted, 0.7-0.9 points at 10% and 1.3 at 25%, while the extension takes
/// a fifth to a sixth of the build's time.
pub(super) const EXTEND_MAX_DELETED: f64 = 0.10;

/// Whether a merged segment of `rows` rows, next to a largest segment of `largest` rows,
/// gets SQ8 codes for its graph walk (rescored with its float32 vectors) in a collection
/// that has none: a minor graph segment (under a tenth of the largest) is walked by every
/// search right after the large one, with its vectors out of cache, and codes a quarter of
/// their size cut that walk's cost: 110-177 us per search against 162-284 us for a 6,600-row
/// minor graph on 1M under writes (`bench/results/search-under-writes-synth1m-s25-sq8.md`
/// against `-s25.md`), recall@10 after the writes unchanged (0.922).
pub(crate) fn minor_codes(
    rows: usize,
    largest: usize,
    spec: &crate::segwrite::SegmentSpec,
) -> bool {
    rows >= spec.flat_max
        && rows * 10 < largest
        && spec.build.kind == searchd_engine::IndexKind::Hnsw
        && spec.build.quantization == searchd_engine::Quantization::None
}

/// Whether a merge may start its graph from this segment's (a graph index): see
/// [`EXTEND_MAX_DELETED`].
pub(super) fn extends_graph(first: SegStat, is_graph: bool) -> bool {
    is_graph
        && first.len > 0
        && (first.len - first.alive) as f64 <= EXTEND_MAX_DELETED * first.len as f64
}

/// The refresher's flat merge: when `merge_factor` (at least 2) or more small segments
/// (under `flat_max` rows) are not claimed, the smallest of them by alive rows whose alive
/// rows together stay under `flat_max`, if at least two; else nothing. Segment positions,
/// ascending.
pub(super) fn pick_flat_merge(segs: &[SegStat], claimed: &[bool], p: &MergeParams) -> Vec<usize> {
    let claimed = |i: usize| claimed.get(i).copied().unwrap_or(false);
    let alive = |i: usize| segs[i].alive;
    let mut small: Vec<usize> = (0..segs.len())
        .filter(|&i| segs[i].len < p.flat_max && !claimed(i))
        .collect();
    if small.len() < p.merge_factor.max(2) {
        return Vec::new();
    }
    small.sort_by_key(|&i| alive(i));
    let mut pick = Vec::new();
    let mut total = 0;
    for i in small {
        if total + alive(i) >= p.flat_max {
            break;
        }
        total += alive(i);
        pick.push(i);
    }
    if pick.len() < 2 {
        pick.clear();
    }
    pick.sort_unstable();
    pick
}

/// The merger's pick: the unclaimed small segments when there are two or more and their
/// alive rows reach `flat_max` (a graph), with the largest unclaimed minor graph segment
/// that stays minor with them and has at most [`EXTEND_MAX_DELETED`] of its rows deleted
/// (its graph is extended), plus every unclaimed segment whose deleted rows
/// reach its vacuum ratio (`vacuum_ratio`, or for a minor graph segment the lower of it and
/// 1 - [`searchd_engine::NEAR_UNFILTERED`]), the small segments taken along; if that is
/// nothing, three or more unclaimed minor graph segments (at least `flat_max` rows, each
/// under a tenth of the largest); if still nothing and there are more than `max_segments`
/// segments, the `merge_factor` (at least 2) smallest unclaimed ones by alive rows. A lone
/// segment with nothing deleted is not picked. Segment positions, ascending and distinct.
pub(super) fn pick_merge(segs: &[SegStat], claimed: &[bool], p: &MergeParams) -> Vec<usize> {
    let claimed = |i: usize| claimed.get(i).copied().unwrap_or(false);
    let n = segs.len();
    let alive = |i: usize| segs[i].alive;
    let small: Vec<usize> = (0..n)
        .filter(|&i| segs[i].len < p.flat_max && !claimed(i))
        .collect();
    let small_docs: usize = small.iter().map(|&i| alive(i)).sum();
    let mut pick: Vec<usize> = Vec::new();
    let largest = (0..n).map(|i| segs[i].len).max().unwrap_or(0);
    let is_minor = |len: usize| len >= p.flat_max && len * 10 < largest;
    if small.len() >= 2 && small_docs >= p.flat_max {
        pick.extend(&small);
        // The small segments join the largest minor graph segment that stays minor with
        // them and has few deleted rows: the merge extends its graph (see
        // [`EXTEND_MAX_DELETED`]), costing the insertion of the small segments' rows, and
        // searches keep one minor graph to walk instead of one more per merge.
        let host = (0..n)
            .filter(|&i| {
                let s = segs[i];
                is_minor(s.len)
                    && !claimed(i)
                    && extends_graph(s, true)
                    && (s.alive + small_docs) * 10 < largest
            })
            .max_by_key(|&i| (segs[i].len, std::cmp::Reverse(i)));
        pick.extend(host);
    }
    // Minor graph segments (at least `flat_max` rows, each under a tenth of the largest)
    // are vacuumed sooner: once their deleted rows take them below the planner's
    // near-unfiltered share, each search scans their live rows exactly instead of
    // walking their graph (a 5,390-row graph with 863 deleted rows: ~4,500 sequential
    // distances, about as much as the whole 1M walk). Rewriting a minor segment is
    // cheap; rewriting the large one is not, so it keeps `vacuum_ratio`.
    let minor_ratio = (1.0 - searchd_engine::NEAR_UNFILTERED).min(p.vacuum_ratio);
    #[allow(clippy::needless_range_loop)] // `i` is the segment's position (what is picked)
    for i in 0..n {
        let len = segs[i].len;
        if len > 0 && !pick.contains(&i) && !claimed(i) {
            let dead = len - alive(i);
            let ratio = if is_minor(len) {
                minor_ratio
            } else {
                p.vacuum_ratio
            };
            if dead > 0 && dead as f64 >= ratio * len as f64 {
                pick.push(i);
                // Take the small segments along: one rewrite instead of several.
                for &j in &small {
                    if !pick.contains(&j) {
                        pick.push(j);
                    }
                }
            }
        }
    }
    // Minor graph segments (each under a tenth of the largest) cost a graph search each
    // per query: three or more become one.
    if pick.is_empty() {
        let minor: Vec<usize> = (0..n)
            .filter(|&i| is_minor(segs[i].len) && !claimed(i))
            .collect();
        if minor.len() >= 3 {
            pick.extend(minor);
        }
    }
    if pick.is_empty() && n > p.max_segments {
        let mut by_size: Vec<usize> = (0..n).filter(|&i| !claimed(i)).collect();
        by_size.sort_by_key(|&i| alive(i));
        pick.extend(by_size.into_iter().take(p.merge_factor.max(2)));
    }
    pick.sort_unstable();
    pick.dedup();
    // A single segment with nothing deleted is not worth rewriting.
    if pick.len() == 1 && alive(pick[0]) == segs[pick[0]].len {
        pick.clear();
    }
    pick
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`LiveConfig::default`]'s: flat_max 1,000, merge_factor 8, max_segments 12,
    /// vacuum_ratio 0.3.
    fn params() -> MergeParams {
        MergeParams::of(&LiveConfig::default())
    }

    fn full(lens: &[usize]) -> Vec<SegStat> {
        lens.iter()
            .map(|&len| SegStat { len, alive: len })
            .collect()
    }

    fn none(n: usize) -> Vec<bool> {
        vec![false; n]
    }

    #[test]
    fn defaults_are_what_the_tests_assume() {
        let p = params();
        assert_eq!(
            (p.flat_max, p.merge_factor, p.max_segments, p.vacuum_ratio),
            (1_000, 8, 12, 0.3)
        );
    }

    #[test]
    fn nothing_to_do() {
        let p = params();
        assert!(pick_flat_merge(&[], &[], &p).is_empty());
        assert!(pick_merge(&[], &[], &p).is_empty());
        // One large segment with nothing deleted, a few small ones under flat_max together.
        let segs = full(&[50_000, 10, 20, 30]);
        assert!(pick_flat_merge(&segs, &none(4), &p).is_empty());
        assert!(pick_merge(&segs, &none(4), &p).is_empty());
        // Empty segments are never vacuumed.
        let segs = full(&[50_000, 0]);
        assert!(pick_merge(&segs, &none(2), &p).is_empty());
    }

    #[test]
    fn flat_merge_needs_merge_factor_small_segments() {
        let p = params();
        let seven = full(&[100_000, 10, 10, 10, 10, 10, 10, 10]);
        assert!(pick_flat_merge(&seven, &none(8), &p).is_empty());
        let eight = full(&[100_000, 10, 10, 10, 10, 10, 10, 10, 10]);
        assert_eq!(
            pick_flat_merge(&eight, &none(9), &p),
            vec![1, 2, 3, 4, 5, 6, 7, 8]
        );
        // merge_factor below 2 counts as 2.
        let p1 = MergeParams {
            merge_factor: 1,
            ..params()
        };
        assert!(pick_flat_merge(&full(&[10]), &none(1), &p1).is_empty());
        assert_eq!(pick_flat_merge(&full(&[10, 20]), &none(2), &p1), vec![0, 1]);
    }

    #[test]
    fn flat_merge_takes_the_smallest_by_alive_rows_under_flat_max() {
        let p = MergeParams {
            merge_factor: 2,
            ..params()
        };
        // Alive rows 400, 100, 300, 250 (sizes under flat_max): 100 + 250 + 300 = 650, and
        // 400 more would reach 1,000.
        let segs = vec![
            SegStat {
                len: 400,
                alive: 400,
            },
            SegStat {
                len: 900,
                alive: 100,
            },
            SegStat {
                len: 300,
                alive: 300,
            },
            SegStat {
                len: 250,
                alive: 250,
            },
        ];
        assert_eq!(pick_flat_merge(&segs, &none(4), &p), vec![1, 2, 3]);
        // Only one would fit: nothing.
        let segs = full(&[900, 900, 950]);
        assert!(pick_flat_merge(&segs, &none(3), &p).is_empty());
        // Segments of flat_max rows or more are not small, whatever their alive rows.
        let segs = vec![
            SegStat {
                len: 1_000,
                alive: 1,
            },
            SegStat { len: 5, alive: 5 },
            SegStat { len: 6, alive: 6 },
        ];
        assert_eq!(pick_flat_merge(&segs, &none(3), &p), vec![1, 2]);
    }

    #[test]
    fn claimed_segments_are_skipped() {
        let p = params();
        let segs = full(&[10; 9]);
        let mut claimed = none(9);
        claimed[4] = true;
        assert_eq!(
            pick_flat_merge(&segs, &claimed, &p),
            vec![0, 1, 2, 3, 5, 6, 7, 8]
        );
        claimed[5] = true;
        assert!(pick_flat_merge(&segs, &claimed, &p).is_empty());
        // A segment due for a vacuum is not picked while claimed.
        let segs = vec![
            SegStat {
                len: 10_000,
                alive: 5_000,
            },
            SegStat {
                len: 20_000,
                alive: 20_000,
            },
        ];
        assert_eq!(pick_merge(&segs, &none(2), &p), vec![0]);
        assert!(pick_merge(&segs, &[true, false], &p).is_empty());
        // Claimed small segments are neither merged nor taken along.
        let segs = vec![
            SegStat {
                len: 600,
                alive: 600,
            },
            SegStat {
                len: 600,
                alive: 600,
            },
            SegStat {
                len: 600,
                alive: 600,
            },
        ];
        assert_eq!(pick_merge(&segs, &[false, true, false], &p), vec![0, 2]);
        assert!(pick_merge(&segs, &[false, true, true], &p).is_empty());
    }

    #[test]
    fn small_segments_reaching_flat_max_become_a_graph() {
        let p = params();
        let segs = full(&[50_000, 600, 400]);
        assert_eq!(pick_merge(&segs, &none(3), &p), vec![1, 2]);
        // Under flat_max together: left to the flat merges.
        let segs = full(&[50_000, 600, 300]);
        assert!(pick_merge(&segs, &none(3), &p).is_empty());
        // Alive rows count, not rows (and under vacuum_ratio deleted, no vacuum either).
        let segs = vec![
            SegStat {
                len: 50_000,
                alive: 50_000,
            },
            SegStat {
                len: 700,
                alive: 500,
            },
            SegStat {
                len: 700,
                alive: 499,
            },
        ];
        assert!(pick_merge(&segs, &none(3), &p).is_empty());
        // One small segment alone is not a merge.
        let segs = full(&[50_000, 999]);
        assert!(pick_merge(&segs, &none(2), &p).is_empty());
    }

    #[test]
    fn vacuum_at_the_deleted_fraction() {
        let p = params();
        // The largest segment: vacuum_ratio (0.3).
        let at = vec![SegStat {
            len: 10_000,
            alive: 7_000,
        }];
        assert_eq!(pick_merge(&at, &none(1), &p), vec![0]);
        let under = vec![SegStat {
            len: 10_000,
            alive: 7_001,
        }];
        assert!(pick_merge(&under, &none(1), &p).is_empty());
        // Small segments go along with a vacuumed one.
        let segs = vec![
            SegStat {
                len: 10_000,
                alive: 7_000,
            },
            SegStat {
                len: 20_000,
                alive: 20_000,
            },
            SegStat { len: 10, alive: 10 },
            SegStat { len: 20, alive: 20 },
        ];
        assert_eq!(pick_merge(&segs, &none(4), &p), vec![0, 2, 3]);
    }

    #[test]
    fn minor_graph_segments_are_vacuumed_sooner() {
        let p = params();
        // 5,000 rows beside 100,000: minor; its ratio is min(1 - NEAR_UNFILTERED, 0.3).
        let ratio = (1.0 - searchd_engine::NEAR_UNFILTERED).min(p.vacuum_ratio);
        let dead = (ratio * 5_000.0).ceil() as usize;
        assert!(dead < 1_500);
        let segs = |dead: usize| {
            vec![
                SegStat {
                    len: 100_000,
                    alive: 100_000,
                },
                SegStat {
                    len: 5_000,
                    alive: 5_000 - dead,
                },
            ]
        };
        assert_eq!(pick_merge(&segs(dead), &none(2), &p), vec![1]);
        assert!(pick_merge(&segs(dead - 1), &none(2), &p).is_empty());
        // Not minor (a tenth of the largest or more): vacuum_ratio.
        let big = |dead: usize| {
            vec![
                SegStat {
                    len: 50_000,
                    alive: 50_000,
                },
                SegStat {
                    len: 5_000,
                    alive: 5_000 - dead,
                },
            ]
        };
        assert!(pick_merge(&big(dead), &none(2), &p).is_empty());
        assert_eq!(pick_merge(&big(1_500), &none(2), &p), vec![1]);
    }

    #[test]
    fn three_minor_graph_segments_become_one() {
        let p = params();
        let segs = full(&[100_000, 5_000, 2_000, 1_000]);
        assert_eq!(pick_merge(&segs, &none(4), &p), vec![1, 2, 3]);
        let two = full(&[100_000, 5_000, 2_000, 999]);
        assert!(pick_merge(&two, &none(4), &p).is_empty());
        let mut claimed = none(4);
        claimed[2] = true;
        assert!(pick_merge(&segs, &claimed, &p).is_empty());
    }

    #[test]
    fn past_max_segments_the_smallest_merge() {
        let p = params();
        // Thirteen graph segments of similar size (none minor, nothing deleted).
        let mut lens: Vec<usize> = (0..13).map(|i| 2_000 + 100 * i).collect();
        lens.reverse();
        let segs = full(&lens);
        assert_eq!(
            pick_merge(&segs, &none(13), &p),
            vec![5, 6, 7, 8, 9, 10, 11, 12]
        );
        // Twelve: nothing.
        assert!(pick_merge(&segs[..12], &none(12), &p).is_empty());
        // Claimed ones are left out of the smallest.
        let mut claimed = none(13);
        claimed[12] = true;
        assert_eq!(
            pick_merge(&segs, &claimed, &p),
            vec![4, 5, 6, 7, 8, 9, 10, 11]
        );
    }

    #[test]
    fn small_segments_join_the_largest_minor_graph_that_stays_minor() {
        let p = params();
        // A 100k graph, minor graphs of 3,000 and 5,000 rows, two small segments (1,200).
        let segs = full(&[100_000, 3_000, 5_000, 600, 600]);
        assert_eq!(pick_merge(&segs, &none(5), &p), vec![2, 3, 4]);
        // Claimed by another merge: the next largest.
        let claimed = vec![false, false, true, false, false];
        assert_eq!(pick_merge(&segs, &claimed, &p), vec![1, 3, 4]);
        // A minor graph with more than a tenth deleted is not extended (a vacuum takes it).
        let mut segs = full(&[100_000, 5_000, 600, 600]);
        segs[1].alive = 4_400;
        assert_eq!(pick_merge(&segs, &none(4), &p), vec![1, 2, 3]);
        segs[1].alive = 4_600;
        assert_eq!(pick_merge(&segs, &none(4), &p), vec![1, 2, 3]);
        // One that would stop being minor with them is left alone.
        let segs = full(&[100_000, 9_000, 600, 600]);
        assert_eq!(pick_merge(&segs, &none(4), &p), vec![2, 3]);
    }
}
