//! A search's knobs and answers, and what the planner decides from them.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::format::IndexKind;
use crate::storage::PartPlacement;

/// Largest `k` a search accepts.
pub const MAX_K: usize = 1000;

/// Largest `oversample` a search accepts.
pub const MAX_OVERSAMPLE: f32 = 100.0;

/// What an index is, for logs, `/stats` and reports.
#[derive(Debug, Clone, Serialize)]
pub struct IndexInfo {
    /// How it finds candidates.
    pub kind: IndexKind,
    /// The metric's name.
    pub metric: &'static str,
    /// Rows.
    pub n: usize,
    /// Dimensions.
    pub dim: usize,
    /// How it was built (the manifest's `params`, as JSON).
    pub params: serde_json::Value,
    /// Bytes of all index files (vectors + graph + id map + codes).
    pub bytes: u64,
    /// Bytes of `vectors.bin` when opened (0 with `--vectors none`).
    pub vector_bytes: u64,
    /// `graph.bin` and `ids.bin` (HNSW), `ivf.bin` (IVF-PQ).
    pub graph_bytes: u64,
    /// `codes.bin` of quantized indexes (0 otherwise).
    pub codes_bytes: u64,
    /// Where each part lives.
    pub placement: PartPlacement,
    /// The index directory.
    pub path: PathBuf,
}

/// How a search treats its filter ([`SearchParams::allow`] and [`SearchParams::filter`]),
/// chosen per index (segment) by [`Index::filter_plan`] or forced by [`SearchParams::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterPlan {
    /// No filter: the plain search.
    Unfiltered,
    /// Score every allowed row (iterating the bitmap) and keep the best `k`: exact, and
    /// the cheapest plan when few rows pass.
    Exact,
    /// Traverse the whole graph (IVF: the probed lists), return only passing rows; the
    /// bound is the `ef`-th passing distance. Best when most rows pass.
    Graph,
    /// Traverse only passing nodes, hopping over a failing neighbour to its neighbours
    /// (ACORN-1). For selective filters that still leave too many rows to scan.
    GraphTwoHop,
}

impl FilterPlan {
    /// The name `plan` takes in requests and reports.
    pub fn name(self) -> &'static str {
        match self {
            FilterPlan::Unfiltered => "unfiltered",
            FilterPlan::Exact => "exact",
            FilterPlan::Graph => "graph",
            FilterPlan::GraphTwoHop => "graphtwohop",
        }
    }
    /// Parse a name written by [`FilterPlan::name`].
    pub fn parse(s: &str) -> Option<FilterPlan> {
        [
            FilterPlan::Unfiltered,
            FilterPlan::Exact,
            FilterPlan::Graph,
            FilterPlan::GraphTwoHop,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

impl std::fmt::Display for FilterPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Planner: a filter passing at most `EXACT_ROWS_PER_EF * ef` rows (and at least
/// [`EXACT_MIN_ROWS`]) is answered by the exact scan of those rows.
///
/// Measured on dev-gcide-50k (384-d, HNSW m=16, 1 thread, `examples/filtered_bench.rs`):
/// see the numbers in the comment of [`Index::filter_plan`].
pub const EXACT_ROWS_PER_EF: usize = 64;
/// See [`EXACT_ROWS_PER_EF`].
pub const EXACT_MIN_ROWS: usize = 8192;
/// Planner: a filter passing at most this fraction of the rows is answered exactly too.
/// Measured on 1M synthetic 384-d vectors (`bench/results/filtered-ann-synth1m.md`): at 1%
/// (10,117 rows) two-hop reached recall@10 only 0.41-0.60 (ef 64-256) and the full graph
/// walk 0.97 at 32 ms, against 5.5 ms and recall 1.0 for the exact scan.
/// Raised from 2% to 3% in session 26: on the same 1M set (`filtered-ann-synth1m-edge-run2.md`)
/// the exact scan of a 4% filter (40,142 rows) took 10.1 ms (recall 1.0) and the full graph
/// walk 4.4 ms (ef 64, recall 0.955), the walk's cost growing as the filter narrows.
pub const EXACT_MAX_SELECTIVITY: f64 = 0.03;
/// Planner: an index of at least this many rows walks the whole graph
/// ([`FilterPlan::Graph`]) for every filter above the exact threshold, never two-hop. At 1M
/// (`filtered-ann-synth1m-edge-run2.md`) the full walk beat the automatic two-hop walk at
/// 10% (0.959 recall at 0.86 ms against 0.951 at 2.4 ms) and at 4% (0.955 at 4.4 ms against
/// 0.911 at 7.1 ms); at 50k two-hop won at 20% (the table of [`Index::filter_plan`]). Where
/// between 50k and 1M the crossover lies was not measured: 250,000 is a guess.
pub const GRAPH_ALWAYS_ROWS: usize = 250_000;
/// Planner: an automatic walk is redone by the exact scan when, after
/// [`crate::hnsw::MIN_PASS_TESTS`] filter tests, fewer than `selectivity /
/// ANTI_CORRELATION` passed ([`crate::hnsw::SearchCtx::min_pass_rate`]).
pub const ANTI_CORRELATION: f64 = 8.0;
/// Automatic two-hop walks widen their list to `ef * min(TWO_HOP_MAX_BOOST,
/// GRAPH_MIN_SELECTIVITY / selectivity)`: at 1M and 10% passing, two-hop gave recall@10
/// 0.885 / 0.946 / 0.971 at ef 64 / 128 / 256, so the request's ef alone loses recall.
pub const TWO_HOP_MAX_BOOST: f64 = 4.0;
/// Cap of a widened walk's list size.
pub(super) const MAX_EF_WALK: usize = 16_384;
/// Planner: with more rows than the exact threshold, a filter passing at least this
/// fraction of the rows walks the whole graph ([`FilterPlan::Graph`]); a more selective
/// one walks the passing subgraph ([`FilterPlan::GraphTwoHop`]).
pub const GRAPH_MIN_SELECTIVITY: f64 = 0.25;
/// Planner: an `allow` set passing at least this fraction of the rows (and no `filter`) is
/// walked like an unfiltered search ([`FilterPlan::Graph`]) however few rows it holds: a
/// live collection's deleted rows make every segment's search "filtered" this way. Measured
/// on 1M synthetic 384-d vectors under writes (`bench/results/search-under-writes-*.md`):
/// a 6,475-row graph segment with 60 deleted rows, scanned exactly by the 8,192-row floor,
/// took most of each search's time.
pub const NEAR_UNFILTERED: f64 = 0.9;

/// One search's knobs.
#[derive(Clone, Copy)]
pub struct SearchParams<'a> {
    /// Number of hits wanted (1..=1000).
    pub k: usize,
    /// HNSW candidate list size; raised to `k` when below it. Ignored by `flat`.
    pub ef: usize,
    /// Stop and return [`SearchError::DeadlineExceeded`] once this instant passes.
    pub deadline: Option<Instant>,
    /// Only internal ids (see [`Index::internal`]) for which this returns true are
    /// returned; others are still traversed.
    pub filter: Option<&'a (dyn Fn(u32) -> bool + Sync)>,
    /// Quantized indexes: rescore the best `ceil(oversample * k)` candidates (at least
    /// `k`) with float32 vectors; `None` = the index's default ([`DEFAULT_OVERSAMPLE`]).
    /// Ignored by float32-only indexes.
    pub oversample: Option<f32>,
    /// Only these stored rows (external ids, the ones [`Hit::id`] returns) may be
    /// returned; ANDed with `filter`. Ids at or past [`Index::len`] are ignored. The
    /// planner ([`Index::filter_plan`]) picks how to search from its size.
    pub allow: Option<&'a roaring::RoaringBitmap>,
    /// Force a [`FilterPlan`] instead of the planner's (benchmarks, tests). A plan the
    /// index cannot run is replaced by the nearest one it can (flat: exact; IVF-PQ: graph
    /// for two-hop); `Unfiltered` with a filter runs `Graph`, so a filtered search never
    /// returns a non-matching row. Forced graph plans never fall back to exact.
    pub plan: Option<FilterPlan>,
    /// Partitioned indexes: partitions probed (`None` = the index's default, its manifest's
    /// `nprobe`). Ignored by other kinds.
    pub nprobe: Option<usize>,
}

impl SearchParams<'_> {
    /// `k` hits with list size `ef`, no filter, deadline or forced plan.
    pub fn new(k: usize, ef: usize) -> SearchParams<'static> {
        SearchParams {
            k,
            ef,
            deadline: None,
            filter: None,
            oversample: None,
            allow: None,
            plan: None,
            nprobe: None,
        }
    }
}

/// What one search did ([`crate::Index::search_detailed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Searched {
    /// The hits, best first.
    pub hits: Vec<Hit>,
    /// The plan that produced them.
    pub plan: FilterPlan,
    /// Partitioned indexes: probes skipped because their partition was still loading at
    /// the deadline (0: a full answer).
    pub skipped_probes: usize,
}

/// One result: the row id in the base file and a higher-is-better score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Hit {
    /// Row of the input (external id).
    pub id: u64,
    /// Higher is better.
    pub score: f32,
}

/// How a graph (or list) search treats the filter, from [`Index::search_with_plan`].
pub(super) struct Walk<F> {
    pub plan: FilterPlan,
    /// Internal id -> passes `allow` and `filter`; `None` for `Unfiltered`.
    pub filter: Option<F>,
    /// Work limit of the walk ([`hnsw::SearchCtx::budget`]).
    pub budget: usize,
    /// A walk that finds fewer rows than this is redone by the exact scan.
    pub want: usize,
    /// [`hnsw::SearchCtx::min_pass_rate`]: a walk through a filter passing far fewer rows
    /// around the query than overall is redone by the exact scan.
    pub min_pass_rate: f64,
}
