//! Recall and speed of an index against exact ground truth.
//!
//! Recall is tie-aware, as in ann-benchmarks: a returned id counts when its exact score is
//! at least the exact k-th best score minus 1e-6, so neighbours with equal scores are not
//! counted as misses.

pub mod ranking;

use std::time::Instant;

use rayon::prelude::*;

use crate::index::{Index, SearchParams};

/// Slack for tie-aware recall.
pub const TIE_EPSILON: f32 = 1e-6;

/// Tie-aware recall@`at` of `found` (ids, best first) for `query` (already prepared:
/// normalised under cosine) given exact neighbour ids `truth` (best first).
/// Returns None when `truth` has fewer than `at` ids.
pub fn recall_at(
    index: &Index,
    query: &[f32],
    truth: &[i64],
    found: &[u64],
    at: usize,
) -> Option<f64> {
    if at == 0 || truth.len() < at {
        return None;
    }
    let metric = index.metric();
    let kth = truth[at - 1];
    let kth_vec = index.vector(u64::try_from(kth).ok()?)?;
    let threshold = metric.score(query, &kth_vec) - TIE_EPSILON;
    let hits = found
        .iter()
        .take(at)
        .filter(|&&id| {
            index
                .vector(id)
                .is_some_and(|v| metric.score(query, &v) >= threshold)
        })
        .count();
    Some(hits as f64 / at as f64)
}

/// One row of `searchd eval`: the `searchd.eval.v1` row.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EvalRow {
    /// The search `ef` of this row (HNSW candidate list size; IVF-PQ lists probed).
    pub ef: usize,
    /// Mean tie-aware recall@1 over the queries; `None` when `k` is 0 or the ground truth
    /// has no ids.
    pub recall_at_1: Option<f64>,
    /// Mean tie-aware recall@10 over the queries; `None` when `k` or the ground truth per
    /// query is shorter than 10.
    pub recall_at_10: Option<f64>,
    /// Mean tie-aware recall@100 over the queries; `None` when `k` or the ground truth per
    /// query is shorter than 100.
    pub recall_at_100: Option<f64>,
    /// Queries per second on one thread, one query at a time.
    pub qps_1thread: f64,
    /// Median single-thread query latency, in microseconds.
    pub p50_us: f64,
    /// 99th-percentile single-thread query latency, in microseconds.
    pub p99_us: f64,
    /// Queries per second with every pool thread searching in its own loop.
    pub qps_all_threads: f64,
    /// Threads used for `qps_all_threads`.
    pub threads: usize,
    /// Partitioned indexes: partitions probed ([`EvalConfig::nprobe`]; absent: the index's
    /// default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nprobe: Option<usize>,
    /// Graph indexes: distances computed per query in the single-thread pass (codes or
    /// float32 rows read, every level; [`crate::hnsw::SearchWork`]). Absent when the searches
    /// walked no graph (flat, IVF-PQ, exact scans).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distances_per_query: Option<f64>,
    /// Graph indexes: neighbour lists read per query in the single-thread pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expansions_per_query: Option<f64>,
    /// The cold pass ([`EvalConfig::cold_seconds`]), on the first row only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold: Option<ColdPass>,
}

/// Searches on one thread straight after the index opened, before anything warmed it
/// (with the page cache dropped first, the first minute a cold server serves).
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct ColdPass {
    /// How long it ran.
    pub seconds: f64,
    /// Queries answered (in rotation from the first).
    pub queries: usize,
    /// Queries per second.
    pub qps: f64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th-percentile latency, microseconds.
    pub p99_us: f64,
}

/// Evaluation settings.
#[derive(Debug, Clone)]
pub struct EvalConfig {
    /// Hits asked per query. Default 10.
    pub k: usize,
    /// The `ef` values to evaluate, one [`EvalRow`] each, in order. Default 16, 32, 64,
    /// 128, 256.
    pub efs: Vec<usize>,
    /// Threads for the all-thread throughput (0 = one per core).
    pub threads: usize,
    /// Minimum seconds each timed pass runs (queries are repeated, in rotation, until then).
    pub min_seconds: f64,
    /// Quantized indexes: rescore `oversample * k` candidates (`None`: the index default).
    pub oversample: Option<f32>,
    /// Partitioned indexes: partitions probed (`None`: the index default).
    pub nprobe: Option<usize>,
    /// Seconds of the cold pass run before anything else (0: none): one thread searches
    /// the queries in rotation with the first `ef`, and the first row reports it as
    /// [`EvalRow::cold`]; the warm figures follow the usual warm-up pass.
    pub cold_seconds: f64,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            k: 10,
            efs: vec![16, 32, 64, 128, 256],
            threads: 0,
            min_seconds: 1.0,
            oversample: None,
            nprobe: None,
            cold_seconds: 0.0,
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One thread searching `prepared` in rotation, one query at a time, until it has run
/// `min_queries` queries and `seconds` have passed: the latencies (microseconds, sorted),
/// the seconds it took and the graph work it did.
fn one_thread(
    index: &Index,
    prepared: &[Vec<f32>],
    params: &SearchParams<'_>,
    min_queries: usize,
    seconds: f64,
) -> (Vec<f64>, f64, crate::hnsw::SearchWork) {
    crate::hnsw::take_work();
    let mut lat_us = Vec::with_capacity(min_queries);
    let t0 = Instant::now();
    while lat_us.len() < min_queries || t0.elapsed().as_secs_f64() < seconds {
        let q = &prepared[lat_us.len() % prepared.len()];
        let t = Instant::now();
        let r = index.search(q, params);
        lat_us.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(r.ok());
    }
    let took = t0.elapsed().as_secs_f64();
    let work = crate::hnsw::take_work();
    lat_us.sort_by(f64::total_cmp);
    (lat_us, took, work)
}

/// Evaluate `index` on `queries` (nq x dim, raw) against `gt` (nq x gt_k exact ids).
/// `on_row` is called after each ef, for live output.
pub fn evaluate(
    index: &Index,
    queries: &[f32],
    gt: &[i64],
    gt_k: usize,
    cfg: &EvalConfig,
    on_row: impl FnMut(&EvalRow),
) -> crate::error::Result<Vec<EvalRow>> {
    evaluate_checked(index, index, queries, gt, gt_k, cfg, on_row)
}

/// [`evaluate`], with recall checked against the vectors of `checker` (the same index
/// directory opened with its float32 vectors, for an `index` opened without them).
pub fn evaluate_checked(
    index: &Index,
    checker: &Index,
    queries: &[f32],
    gt: &[i64],
    gt_k: usize,
    cfg: &EvalConfig,
    mut on_row: impl FnMut(&EvalRow),
) -> crate::error::Result<Vec<EvalRow>> {
    if !checker.has_vectors() || checker.len() != index.len() || checker.dim() != index.dim() {
        return Err(crate::error::Error::invalid(
            "recall needs the index's float32 vectors (open the checker with --vectors disk, mmap or ram)",
        ));
    }
    let dim = index.dim();
    let nq = queries.len() / dim;
    if nq == 0 {
        return Err(crate::error::Error::invalid("there are no queries"));
    }
    if gt.len() / gt_k.max(1) < nq {
        return Err(crate::error::Error::invalid(format!(
            "ground truth has {} rows, there are {nq} queries",
            gt.len() / gt_k.max(1)
        )));
    }
    let prepared: Vec<Vec<f32>> = queries
        .chunks_exact(dim)
        .enumerate()
        .map(|(i, q)| {
            index
                .prepare_query(q)
                .map_err(|e| crate::error::Error::invalid(format!("query {i}: {e}")))
        })
        .collect::<crate::error::Result<_>>()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cfg.threads)
        .build()
        .map_err(|e| crate::error::Error::invalid(format!("cannot start threads: {e}")))?;
    let mut rows = Vec::new();
    let params_at = |ef: usize| SearchParams {
        oversample: cfg.oversample,
        nprobe: cfg.nprobe,
        ..SearchParams::new(cfg.k, ef)
    };
    let mut cold = match cfg.efs.first() {
        Some(&ef) if cfg.cold_seconds > 0.0 => {
            let (lat_us, seconds, _) =
                one_thread(index, &prepared, &params_at(ef), 0, cfg.cold_seconds);
            Some(ColdPass {
                seconds,
                queries: lat_us.len(),
                qps: lat_us.len() as f64 / seconds.max(1e-9),
                p50_us: percentile(&lat_us, 50.0),
                p99_us: percentile(&lat_us, 99.0),
            })
        }
        _ => None,
    };
    for &ef in &cfg.efs {
        let params = params_at(ef);
        // Recall (and warm-up: one full pass touches what the timed passes will touch).
        let found: Vec<Vec<u64>> = pool.install(|| {
            prepared
                .par_iter()
                .map(|q| {
                    index
                        .search(q, &params)
                        .map(|h| h.into_iter().map(|h| h.id).collect())
                        .unwrap_or_default()
                })
                .collect()
        });
        let mean = |at: usize| -> Option<f64> {
            if cfg.k < at {
                return None;
            }
            let mut sum = 0.0;
            for (i, f) in found.iter().enumerate() {
                sum += recall_at(checker, &prepared[i], &gt[i * gt_k..(i + 1) * gt_k], f, at)?;
            }
            Some(sum / nq as f64)
        };
        let (r1, r10, r100) = (mean(1), mean(10), mean(100));

        // Single thread: per-query latency, rotating through all queries.
        let (lat_us, seconds, work) = one_thread(index, &prepared, &params, nq, cfg.min_seconds);
        let qps1 = lat_us.len() as f64 / seconds;
        let per_query = |x: u64| (x > 0).then(|| x as f64 / lat_us.len().max(1) as f64);

        // All threads: every pool thread runs its own closed loop over its own rotating
        // share of the queries (thread i starts at query i * nq / threads) until one
        // shared deadline, with no barrier per pass of the query set (a `par_iter` per
        // pass left threads idle at every pass's tail and re-split the work each time).
        // Each thread reports its count and its own end time; QPS = all answers / the
        // time from the common start to the last thread's end.
        let threads = pool.current_num_threads().max(1);
        let window = std::time::Duration::from_secs_f64(cfg.min_seconds.max(0.0));
        let t1 = Instant::now();
        let deadline = t1 + window;
        let per_thread: Vec<(usize, Instant)> = pool.broadcast(|ctx| {
            let mut i = ctx.index() * nq / threads;
            let mut n = 0usize;
            // At least one full share, then until the deadline.
            while n < nq.div_ceil(threads) || Instant::now() < deadline {
                std::hint::black_box(index.search(&prepared[i % nq], &params).ok());
                i += 1;
                n += 1;
            }
            (n, Instant::now())
        });
        let done: usize = per_thread.iter().map(|p| p.0).sum();
        let end = per_thread.iter().map(|p| p.1).max().unwrap_or(t1);
        let qps_all = done as f64 / end.duration_since(t1).as_secs_f64().max(1e-9);
        let row = EvalRow {
            ef,
            recall_at_1: r1,
            recall_at_10: r10,
            recall_at_100: r100,
            qps_1thread: qps1,
            p50_us: percentile(&lat_us, 50.0),
            p99_us: percentile(&lat_us, 99.0),
            qps_all_threads: qps_all,
            threads: pool.current_num_threads(),
            nprobe: cfg.nprobe,
            distances_per_query: per_query(work.distances),
            expansions_per_query: per_query(work.expansions),
            cold: cold.take(),
        };
        on_row(&row);
        rows.push(row);
    }
    Ok(rows)
}
