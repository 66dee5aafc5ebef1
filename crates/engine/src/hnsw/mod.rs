//! Hierarchical Navigable Small World graphs (Malkov & Yashunin, 2016).
//!
//! Build: levels are drawn up front from a seeded RNG, node 0 becomes the first entry
//! point, and the remaining nodes are inserted in parallel on a rayon pool. Links live in
//! flat arrays of `AtomicU32` (count followed by ids, fixed capacity per node and level):
//! writers hold the node's mutex, readers read without locks. Every id ever written is a
//! valid node id, so a reader racing a writer sees a slightly stale but valid list. With
//! one thread the insertion order, and so the graph, is fully determined by `--seed`.
//!
//! Search: greedy descent through the upper levels, then a best-first search with `ef`
//! candidates at level 0, with the per-thread visited sets of [`crate::visited`], prefetch
//! of the next neighbours' vectors, a deadline checked every few expansions, and an
//! optional filter on internal ids (filtered-out nodes are traversed but never returned).

use std::time::Instant;

use crate::distance::Scorer;
use crate::error::SearchError;
use crate::heap::{CandidateHeap, Neighbor, ResultHeap};
use crate::visited::{with_visited, VisitedSet};

/// Build parameters. Defaults are the ones the reference study used.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct HnswParams {
    /// Links per node on upper levels; level 0 keeps up to `2 * m`. Default 16.
    pub m: usize,
    /// Candidate list size while inserting. Default 200.
    pub ef_construction: usize,
    /// Seed of the level generator. Default 42.
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams {
            m: 16,
            ef_construction: 200,
            seed: 42,
        }
    }
}

/// Read access to a graph's links, shared by the builder (atomic arrays) and the frozen,
/// possibly memory-mapped, graph.
pub(crate) trait Links: Sync {
    /// Neighbours of `id` at `level` (the node must exist at that level).
    fn neighbors<'s>(&'s self, level: usize, id: u32, buf: &'s mut Vec<u32>) -> &'s [u32];
    fn len(&self) -> usize;
    /// Start loading the head of `id`'s level-0 list (a candidate about to be expanded).
    #[inline(always)]
    fn prefetch_level0(&self, _id: u32) {}
}

/// Start loading the first two cache lines of `words[base..]` (a link list's count and
/// first ids), if in range.
#[inline(always)]
fn prefetch_list<T>(words: &[T], base: usize) {
    if let Some(head) = words.get(base..) {
        crate::prefetch::prefetch_lines_at(head.as_ptr() as *const u8, 2);
    }
}

/// The read-only graph, as stored in `graph.bin`.
pub(crate) struct GraphView<'a> {
    pub m: usize,
    pub m0: usize,
    pub entry: u32,
    pub max_level: usize,
    /// n x (1 + m0): count, then ids.
    pub level0: &'a [u32],
    pub levels: &'a [u8],
    /// Per node: index of its first (m + 1)-word block in `upper` (level 1).
    pub upper_start: &'a [u32],
    pub upper: &'a [u32],
}

impl Links for GraphView<'_> {
    #[inline(always)]
    fn neighbors<'s>(&'s self, level: usize, id: u32, _buf: &'s mut Vec<u32>) -> &'s [u32] {
        let (words, base) = if level == 0 {
            (self.level0, id as usize * (self.m0 + 1))
        } else {
            let block = self.upper_start[id as usize] as usize + level - 1;
            (self.upper, block * (self.m + 1))
        };
        let count = words[base] as usize;
        &words[base + 1..base + 1 + count]
    }
    fn len(&self) -> usize {
        self.levels.len()
    }
    #[inline(always)]
    fn prefetch_level0(&self, id: u32) {
        prefetch_list(self.level0, id as usize * (self.m0 + 1));
    }
}

/// Everything a search needs besides the graph.
pub(crate) struct SearchCtx<F: Fn(u32) -> bool, S: Scorer> {
    pub scorer: S,
    pub deadline: Option<Instant>,
    pub filter: Option<F>,
    /// Level 0 walks only nodes that pass `filter`, reaching past a failing neighbour to
    /// its own neighbours (ACORN-1 style); see [`search_layer_two_hop`].
    pub two_hop: bool,
    /// Give up (`Ok(None)`) once this many work units were spent at level 0: one per
    /// distance, one per 16 filter tests. `usize::MAX` = no limit. The planner sets it to
    /// the cost of the exact scan it would fall back to, so a graph walk through a filter
    /// that fails almost everywhere never costs much more than that scan.
    pub budget: usize,
    /// Give up (`Ok(None)`) once [`MIN_PASS_TESTS`] filter tests at level 0 found fewer than
    /// this share passing. `0.0` = never. The planner sets it to a fraction of the filter's
    /// selectivity: a filter that passes far fewer rows around the query than overall is
    /// anti-correlated with it (its rows lie elsewhere), and the walk's `ef` nearest passing
    /// rows are then far from the true ones: at 1M rows, a filter passing the 10% of rows
    /// least similar to the queries got recall@10 0.21-0.57 from automatic walks.
    pub min_pass_rate: f64,
}

/// Filter tests a walk makes before [`SearchCtx::min_pass_rate`] is checked, once: these
/// first tests are the query's neighbourhood (a uniform filter passing 10% gives ~51
/// passes in 512; the check fires below a fraction of that). Checked once only because a
/// walk that found a way into the passing rows' region then sees most of them pass, which
/// says nothing about whether that region is near the query.
pub(crate) const MIN_PASS_TESTS: usize = 512;

/// Whether the first [`MIN_PASS_TESTS`] tests (`tests`, `passed` so far) fell below the
/// floor; `checked` makes it a one-time decision.
#[inline]
fn too_few_pass(min_rate: f64, tests: usize, passed: usize, checked: &mut bool) -> bool {
    if *checked || min_rate <= 0.0 || tests < MIN_PASS_TESTS {
        return false;
    }
    *checked = true;
    (passed as f64) < min_rate * tests as f64
}

impl<F: Fn(u32) -> bool, S: Scorer> SearchCtx<F, S> {
    /// A context without filter, deadline or budget.
    pub fn plain(scorer: S) -> Self {
        SearchCtx {
            scorer,
            deadline: None,
            filter: None,
            two_hop: false,
            budget: usize::MAX,
            min_pass_rate: 0.0,
        }
    }

    #[inline(always)]
    fn passes(&self, id: u32) -> bool {
        self.filter.as_ref().is_none_or(|f| f(id))
    }

    #[inline(always)]
    fn check_deadline(&self) -> Result<(), SearchError> {
        if let Some(d) = self.deadline {
            if Instant::now() >= d {
                return Err(SearchError::DeadlineExceeded);
            }
        }
        Ok(())
    }
}

/// Cache lines of each neighbour's vector prefetched ahead of its distance computation.
/// `SEARCHD_PREFETCH_LINES` overrides the default of 32 lines (a whole 512-d row; thread-CPU
/// time per query at ef=64..128 on dev-gcide-50k was 5-20% lower than with 1 or 4 lines,
/// measured with `examples/search_cpu.rs`). A tuning knob,
/// not a correctness setting.
fn prefetch_lines() -> usize {
    static L: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *L.get_or_init(|| {
        std::env::var("SEARCHD_PREFETCH_LINES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(32)
    })
}

/// What the graph searches run on one thread have done: distances scored and nodes
/// expanded (neighbour lists read), at every level. Counted per search and added once at
/// its end, so the walk's loop pays nothing per step; read (and reset) with [`take_work`].
/// `searchd eval` turns it into bytes touched per query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchWork {
    /// Distances computed (codes or float32 rows read).
    pub distances: u64,
    /// Nodes whose neighbour list was read.
    pub expansions: u64,
}

thread_local! {
    static WORK: std::cell::Cell<SearchWork> = const {
        std::cell::Cell::new(SearchWork { distances: 0, expansions: 0 })
    };
}

/// The work of this thread's graph searches since the last call (builds count too).
pub fn take_work() -> SearchWork {
    WORK.with(|w| w.take())
}

fn add_work(distances: usize, expansions: usize) {
    WORK.with(|w| {
        let mut v = w.get();
        v.distances += distances as u64;
        v.expansions += expansions as u64;
        w.set(v);
    });
}

/// How many expansions between deadline checks (an `Instant::now()` costs ~20 ns; an
/// expansion costs ~1 us at 384 dimensions).
const DEADLINE_EVERY: u32 = 16;

/// Best-first search at one level from `entry`, keeping `ef` results that pass the
/// filter (every node is traversed). `Ok(None)`: the budget ran out.
pub(crate) fn search_layer<L: Links, F: Fn(u32) -> bool, S: Scorer>(
    links: &L,
    ctx: &SearchCtx<F, S>,
    entry: &[Neighbor],
    ef: usize,
    level: usize,
    visited: &mut VisitedSet,
) -> Result<Option<ResultHeap>, SearchError> {
    let mut candidates = CandidateHeap::with_capacity(ef * 2);
    let mut results = ResultHeap::with_capacity(ef + 1);
    let mut buf = Vec::new();
    let mut fresh: Vec<u32> = Vec::with_capacity(64);
    for &e in entry {
        visited.insert(e.id);
        candidates.push(std::cmp::Reverse(e));
        if ctx.filter.as_ref().is_none_or(|f| f(e.id)) {
            results.push(e);
        }
    }
    let mut bound = if results.len() >= ef {
        results.peek().map_or(f32::INFINITY, |n| n.dist)
    } else {
        f32::INFINITY
    };
    let mut steps = 0u32;
    let mut work = 0usize;
    let (mut tests, mut passed, mut checked) = (0usize, 0usize, false);
    while let Some(std::cmp::Reverse(c)) = candidates.pop() {
        if c.dist > bound {
            break;
        }
        steps += 1;
        if steps.is_multiple_of(DEADLINE_EVERY) {
            ctx.check_deadline()?;
        }
        if too_few_pass(ctx.min_pass_rate, tests, passed, &mut checked) {
            return Ok(None);
        }
        let nbrs = links.neighbors(level, c.id, &mut buf);
        fresh.clear();
        for &n in nbrs {
            if visited.insert(n) {
                ctx.scorer.prefetch_first(n);
                fresh.push(n);
            }
        }
        work += fresh.len();
        if work > ctx.budget {
            return Ok(None);
        }
        let lines = prefetch_lines();
        if let Some(&first) = fresh.first() {
            ctx.scorer.prefetch_all(first, lines);
        }
        for (i, &n) in fresh.iter().enumerate() {
            if let Some(&next) = fresh.get(i + 1) {
                ctx.scorer.prefetch_all(next, lines);
            }
            let d = ctx.scorer.dist(n);
            if d < bound || results.len() < ef {
                if level == 0 {
                    links.prefetch_level0(n);
                }
                candidates.push(std::cmp::Reverse(Neighbor { dist: d, id: n }));
                tests += 1;
                if ctx.passes(n) {
                    passed += 1;
                    results.push(Neighbor { dist: d, id: n });
                    if results.len() > ef {
                        results.pop();
                    }
                    if results.len() >= ef {
                        bound = results.peek().map_or(f32::INFINITY, |n| n.dist);
                    }
                }
            }
        }
    }
    add_work(work, steps as usize);
    Ok(Some(results))
}

/// Level-0 search through the subgraph of nodes that pass the filter (ACORN-1, Patel et
/// al. 2024, without its denser build): expanding a node scores its passing neighbours
/// and, for each failing neighbour, that neighbour's passing neighbours, until `2 * m`
/// (the level-0 degree) new passing nodes are collected. Only passing nodes become
/// candidates, so the bound is the `ef`-th passing distance, as in an unfiltered search,
/// and a selective filter no longer makes the walk visit most of the graph. A failing
/// node is marked visited only once it has been hopped through, so it stays available as
/// a bridge from later expansions.
pub(crate) fn search_layer_two_hop<L: Links, F: Fn(u32) -> bool, S: Scorer>(
    links: &L,
    ctx: &SearchCtx<F, S>,
    entry: &[Neighbor],
    ef: usize,
    visited: &mut VisitedSet,
) -> Result<Option<ResultHeap>, SearchError> {
    let mut candidates = CandidateHeap::with_capacity(ef * 2);
    let mut results = ResultHeap::with_capacity(ef + 1);
    let (mut buf, mut buf2) = (Vec::new(), Vec::new());
    let mut fresh: Vec<u32> = Vec::with_capacity(64);
    let mut hop: Vec<u32> = Vec::with_capacity(64);
    for &e in entry {
        visited.insert(e.id);
        candidates.push(std::cmp::Reverse(e));
        if ctx.passes(e.id) {
            results.push(e);
        }
    }
    let mut bound = f32::INFINITY;
    if results.len() >= ef {
        bound = results.peek().map_or(f32::INFINITY, |n| n.dist);
    }
    let mut steps = 0u32;
    let mut work = 0usize;
    let mut tests = 0usize;
    // Every node scored passed the filter: `work` is also the walk's passing count.
    let mut checked = false;
    let lines = prefetch_lines();
    while let Some(std::cmp::Reverse(c)) = candidates.pop() {
        if c.dist > bound {
            break;
        }
        steps += 1;
        if steps.is_multiple_of(DEADLINE_EVERY) {
            ctx.check_deadline()?;
        }
        if too_few_pass(ctx.min_pass_rate, tests, work, &mut checked) {
            return Ok(None);
        }
        let nbrs = links.neighbors(0, c.id, &mut buf);
        let cap = nbrs.len().max(8);
        fresh.clear();
        hop.clear();
        for &n in nbrs {
            if visited.contains(n) {
                continue;
            }
            tests += 1;
            if ctx.passes(n) {
                visited.insert(n);
                ctx.scorer.prefetch_first(n);
                fresh.push(n);
            } else {
                hop.push(n);
            }
        }
        for &h in &hop {
            if fresh.len() >= cap {
                break;
            }
            if !visited.insert(h) {
                continue;
            }
            for &n in links.neighbors(0, h, &mut buf2) {
                if visited.contains(n) {
                    continue;
                }
                tests += 1;
                if ctx.passes(n) {
                    visited.insert(n);
                    ctx.scorer.prefetch_first(n);
                    fresh.push(n);
                    if fresh.len() >= cap {
                        break;
                    }
                }
            }
        }
        work += fresh.len();
        if work + tests / 16 > ctx.budget {
            return Ok(None);
        }
        if let Some(&first) = fresh.first() {
            ctx.scorer.prefetch_all(first, lines);
        }
        for (i, &n) in fresh.iter().enumerate() {
            if let Some(&next) = fresh.get(i + 1) {
                ctx.scorer.prefetch_all(next, lines);
            }
            let d = ctx.scorer.dist(n);
            if d < bound || results.len() < ef {
                let nb = Neighbor { dist: d, id: n };
                candidates.push(std::cmp::Reverse(nb));
                results.push(nb);
                if results.len() > ef {
                    results.pop();
                }
                if results.len() >= ef {
                    bound = results.peek().map_or(f32::INFINITY, |n| n.dist);
                }
            }
        }
    }
    add_work(work, steps as usize);
    Ok(Some(results))
}

/// Greedy descent at one upper level: move to the closest neighbour until none is closer.
fn greedy<L: Links, F: Fn(u32) -> bool, S: Scorer>(
    links: &L,
    ctx: &SearchCtx<F, S>,
    mut cur: Neighbor,
    level: usize,
) -> Neighbor {
    let mut buf = Vec::new();
    loop {
        let mut changed = false;
        let nbrs = links.neighbors(level, cur.id, &mut buf);
        add_work(nbrs.len(), 1);
        for &n in nbrs {
            ctx.scorer.prefetch_first(n);
        }
        for &n in nbrs {
            let d = ctx.scorer.dist(n);
            if d < cur.dist {
                cur = Neighbor { dist: d, id: n };
                changed = true;
            }
        }
        if !changed {
            return cur;
        }
    }
}

/// Full k-NN search on a graph. Returns up to `k` neighbours, best first; `Ok(None)` when
/// the budget of `ctx` ran out.
pub(crate) fn search<L: Links, F: Fn(u32) -> bool, S: Scorer>(
    links: &L,
    entry: u32,
    max_level: usize,
    ctx: &SearchCtx<F, S>,
    k: usize,
    ef: usize,
) -> Result<Option<Vec<Neighbor>>, SearchError> {
    if links.len() == 0 {
        return Ok(Some(Vec::new()));
    }
    let ef = ef.max(k);
    let mut cur = Neighbor {
        dist: ctx.scorer.dist(entry),
        id: entry,
    };
    for level in (1..=max_level).rev() {
        cur = greedy(links, ctx, cur, level);
    }
    let results = with_visited(links.len(), |v| {
        if ctx.two_hop {
            search_layer_two_hop(links, ctx, &[cur], ef, v)
        } else {
            search_layer(links, ctx, &[cur], ef, 0, v)
        }
    })?;
    Ok(results.map(|r| {
        let mut out = r.into_sorted_vec();
        out.truncate(k);
        out
    }))
}

mod build;
pub(crate) use build::extend;
pub use build::{build, BuildOn, BuiltGraph};

#[cfg(test)]
mod pass_rate_tests {
    use super::*;

    /// A chain: node `i` links to `i - 4 ..= i + 4`; the distance is the position.
    struct Chain(usize);
    impl Links for Chain {
        fn neighbors<'s>(&'s self, _level: usize, id: u32, buf: &'s mut Vec<u32>) -> &'s [u32] {
            buf.clear();
            let i = id as i64;
            buf.extend(
                (i - 4..=i + 4)
                    .filter(|&j| j != i && j >= 0 && j < self.0 as i64)
                    .map(|j| j as u32),
            );
            buf
        }
        fn len(&self) -> usize {
            self.0
        }
    }
    struct Pos;
    impl Scorer for Pos {
        fn dist(&self, id: u32) -> f32 {
            id as f32
        }
        fn prefetch_all(&self, _id: u32, _lines: usize) {}
    }

    fn walk(two_hop: bool, min_pass_rate: f64, pass_from: u32) -> Option<Vec<Neighbor>> {
        let filter = move |i: u32| i >= pass_from;
        let ctx = SearchCtx {
            scorer: Pos,
            deadline: None,
            filter: Some(filter),
            two_hop,
            budget: usize::MAX,
            min_pass_rate,
        };
        search(&Chain(5000), 0, 0, &ctx, 10, 10).unwrap()
    }

    #[test]
    fn a_walk_that_meets_too_few_passing_rows_gives_up() {
        // Only rows from 3000 on pass: the walk from row 0 tests thousands that fail first.
        let found = walk(false, 0.0, 3000).expect("no floor: the walk finishes");
        assert_eq!(found.first().map(|n| n.id), Some(3000));
        assert!(
            walk(false, 0.05, 3000).is_none(),
            "the floor stops the walk"
        );
        // Every other row passing is well above a 5% floor.
        let found = walk(false, 0.05, 0).expect("a filter that passes everything");
        assert_eq!(found.len(), 10);
        // Two-hop: the failing rows are bridges; no passing row is within two hops, so the
        // walk ends empty either way (the planner's `want` then hands over to the scan).
        assert_eq!(walk(true, 0.0, 3000).map(|f| f.len()), Some(0));
    }
}
