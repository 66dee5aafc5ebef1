//! The filter planner: which [`FilterPlan`] a search takes, from the rows its filter
//! allows (see [`Index::filter_plan`] for the rule and the measurements behind it).

use crate::format::IndexKind;
use crate::index::params::{
    FilterPlan, SearchParams, EXACT_MAX_SELECTIVITY, EXACT_MIN_ROWS, EXACT_ROWS_PER_EF,
    GRAPH_ALWAYS_ROWS, GRAPH_MIN_SELECTIVITY, MAX_EF_WALK, NEAR_UNFILTERED, TWO_HOP_MAX_BOOST,
};
use crate::index::Index;

impl Index {
    /// Rows of [`SearchParams::allow`] that exist in this index (`None` without `allow`).
    pub fn allowed_rows(&self, p: &SearchParams<'_>) -> Option<usize> {
        let n = u32::try_from(self.info.n).unwrap_or(u32::MAX);
        p.allow.map(|a| a.range_cardinality(..n) as usize)
    }

    /// The plan [`Index::search`] takes for `p` (before any fallback: an automatically
    /// planned graph walk that runs over its budget, or finds fewer than `k` rows, is
    /// finished by the exact scan; [`Index::search_with_plan`] reports that).
    ///
    /// Rule, with `s` allowed rows out of `n` (see [`EXACT_ROWS_PER_EF`],
    /// [`EXACT_MIN_ROWS`], [`GRAPH_MIN_SELECTIVITY`]):
    /// no filter, or `allow` holding every row without `filter`: `Unfiltered`;
    /// `allow` holding at least [`NEAR_UNFILTERED`] of the rows without `filter`: `Graph`;
    /// `s <= max(EXACT_MIN_ROWS, EXACT_ROWS_PER_EF * max(ef, k), EXACT_MAX_SELECTIVITY * n)`:
    /// `Exact`;
    /// `s / n >= GRAPH_MIN_SELECTIVITY` or `n >= GRAPH_ALWAYS_ROWS`: `Graph`; otherwise
    /// `GraphTwoHop`. A `filter`
    /// without `allow` (unknown selectivity) is `Graph`. Flat indexes always scan
    /// (`Exact`), IVF-PQ has no two-hop (`Graph`).
    ///
    /// Measured on dev-gcide-50k (50k x 384, HNSW m=16 efc=200, one thread, thread-CPU
    /// time per query, 500 queries, `examples/filtered_bench.rs`; full tables in
    /// `bench/results/filtered-ann-gcide.md`). Cheapest plan reaching recall@10 >= 0.95:
    ///
    /// | allowed rows | exact scan | graph | two-hop |
    /// |---|---|---|---|
    /// | 4,926 (10%) | 374 us (1.0) | 1453 us (ef 32, 0.951) | 1920 us (ef 128, 0.978) |
    /// | 10,028 (20%) | 2069 us (1.0) | 1545 us (ef 64, 0.966) | 958 us (ef 128, 0.959) |
    /// | 14,796 (30%) | 5604 us (1.0) | 1026 us (ef 64, 0.958) | 2885 us (ef 256, 0.987) |
    /// | 25,060 (50%) | 10230 us (1.0) | 1627 us (ef 128, 0.974) | 2611 us (ef 256, 0.977) |
    ///
    /// So exact wins up to between 5k and 10k rows at ef <= 128 (and ~10-16k at ef 256,
    /// where two-hop costs 2055 us at 20%): `EXACT_MIN_ROWS = 8192`, `EXACT_ROWS_PER_EF =
    /// 64`. Two-hop beats the full walk at 20% and loses at 30%:
    /// `GRAPH_MIN_SELECTIVITY = 0.25`. At 1% and 0.1% (531 and 51 rows) the scan takes
    /// 43 us and 6 us, while forced graph walks took 6-40 ms (they visit most of the
    /// graph before `ef` rows pass) and two-hop did not reach 0.95 below ef 256.
    /// These scans were in external-id order; they now read rows in storage order.
    pub fn filter_plan(&self, p: &SearchParams<'_>) -> FilterPlan {
        let filtered = p.allow.is_some() || p.filter.is_some();
        let plan = match p.plan {
            Some(FilterPlan::Exact) => FilterPlan::Exact,
            Some(_) if !filtered => FilterPlan::Unfiltered,
            Some(FilterPlan::Unfiltered) => FilterPlan::Graph,
            Some(forced) => forced,
            None => self.auto_plan(p),
        };
        match (self.info.kind, plan) {
            (IndexKind::Flat, FilterPlan::Unfiltered) => FilterPlan::Unfiltered,
            (IndexKind::Flat, _) => FilterPlan::Exact,
            (IndexKind::IvfPq, FilterPlan::GraphTwoHop) => FilterPlan::Graph,
            (_, plan) => plan,
        }
    }

    pub(super) fn auto_plan(&self, p: &SearchParams<'_>) -> FilterPlan {
        let Some(s) = self.allowed_rows(p) else {
            return if p.filter.is_some() {
                FilterPlan::Graph
            } else {
                FilterPlan::Unfiltered
            };
        };
        let n = self.info.n;
        if s >= n && p.filter.is_none() {
            return FilterPlan::Unfiltered;
        }
        // Nearly every row passes (a live collection's deleted rows): the walk costs what an
        // unfiltered one does, which beats scanning the rows even on a segment of a few
        // thousand (the exact floor below is for selective filters).
        if p.filter.is_none() && s as f64 >= NEAR_UNFILTERED * n as f64 {
            return FilterPlan::Graph;
        }
        if s <= EXACT_MIN_ROWS.max(EXACT_ROWS_PER_EF.saturating_mul(p.ef.max(p.k)))
            || (s as f64) <= EXACT_MAX_SELECTIVITY * n as f64
        {
            return FilterPlan::Exact;
        }
        if s as f64 >= GRAPH_MIN_SELECTIVITY * n as f64 || n >= GRAPH_ALWAYS_ROWS {
            FilterPlan::Graph
        } else {
            FilterPlan::GraphTwoHop
        }
    }

    /// The list size of a graph walk: `ef`, widened for automatically planned two-hop walks
    /// by [`TWO_HOP_MAX_BOOST`] rules (forced plans keep the asked `ef`, so benchmarks
    /// measure what they ask for).
    pub(super) fn walk_ef(&self, p: &SearchParams<'_>, plan: FilterPlan, ef: usize) -> usize {
        if plan != FilterPlan::GraphTwoHop || p.plan.is_some() {
            return ef;
        }
        let Some(s) = self.allowed_rows(p) else {
            return ef;
        };
        let sel = (s as f64 / self.info.n.max(1) as f64).max(1e-9);
        let boost = (GRAPH_MIN_SELECTIVITY / sel).clamp(1.0, TWO_HOP_MAX_BOOST);
        ((ef as f64 * boost).ceil() as usize).min(MAX_EF_WALK)
    }
}
