//! Filtered ANN benchmark: every filter plan, forced and automatic, against exact filtered
//! ground truth, on one thread.
//!
//! ```text
//! cargo run --release -p searchd-engine --example filtered_bench -- \
//!     --base base.f16.npy --queries queries.f16.npy --index DIR --out DIR \
//!     [--nq 1000] [--efs 16,32,64,128,256] [--seed 7] [--quantization none|sq8|pq:M|binary]
//!     [--filters NAME,...] [--forced-min-sel 0.04]
//! ```
//!
//! Builds the index (HNSW m=16, ef_construction=200, cosine) into `--index` when it does
//! not exist yet. Filters are seeded sets of external row ids: uniform random rows passing
//! with probability 50%, 10%, 1%, 0.1%, and the AND of two independent 20% sets (~4%);
//! on request (`--filters`) also 20%, 30%, 0.05%, and sets tied to the queries: `near-1pct`
//! (the 1% of rows most similar to some query) and `far-1pct` / `far-10pct` (the rows least
//! similar to every query).
//! Writes into `--out`:
//! - `filter-NAME.u32`: the allowed rows, little-endian u32, ascending;
//! - `gt-NAME.ids.i32` / `gt-NAME.scores.f32`: exact filtered top-10 per query (nq x 10,
//!   -1 / -inf padded), by brute force over the base file;
//! - `queries.f32`: the nq queries used (unit length), `nq x dim` little-endian f32;
//! - `filters.json`: the list of filters, and `results.json`: one record per run.
//!
//! Recall@10 is tie-aware: a hit counts when it passes the filter and its score is at least
//! the 10th exact score minus 1e-6. Latency is wall-clock per query after one warm-up pass,
//! queries in rotation.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use searchd_engine::roaring::RoaringBitmap;
use searchd_engine::{
    build_index, BuildConfig, FilterPlan, Index, LoadOptions, Quantization, SearchParams,
};

const K: usize = 10;

struct Args {
    base: PathBuf,
    queries: PathBuf,
    index: PathBuf,
    out: PathBuf,
    nq: usize,
    efs: Vec<usize>,
    seed: u64,
    quantization: Quantization,
    filters: Option<Vec<String>>,
    /// Forced graph plans only for filters passing at least this share (1M runs: a forced
    /// walk through a 0.05% filter takes ~0.5 s a query).
    forced_min_sel: f64,
}

fn parse_args() -> Args {
    let mut a = Args {
        base: PathBuf::new(),
        queries: PathBuf::new(),
        index: PathBuf::new(),
        out: PathBuf::new(),
        nq: 1000,
        efs: vec![16, 32, 64, 128, 256],
        seed: 7,
        quantization: Quantization::None,
        filters: None,
        forced_min_sel: 0.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--base" => a.base = v.into(),
            "--queries" => a.queries = v.into(),
            "--index" => a.index = v.into(),
            "--out" => a.out = v.into(),
            "--nq" => a.nq = v.parse().expect("--nq"),
            "--efs" => a.efs = v.split(',').map(|x| x.parse().expect("--efs")).collect(),
            "--seed" => a.seed = v.parse().expect("--seed"),
            "--quantization" => a.quantization = Quantization::parse(&v).expect("--quantization"),
            "--filters" => a.filters = Some(v.split(',').map(String::from).collect()),
            "--forced-min-sel" => a.forced_min_sel = v.parse().expect("--forced-min-sel"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!a.base.as_os_str().is_empty(), "--base is required");
    assert!(!a.queries.as_os_str().is_empty(), "--queries is required");
    assert!(!a.index.as_os_str().is_empty(), "--index is required");
    assert!(!a.out.as_os_str().is_empty(), "--out is required");
    a
}

fn unit_rows(v: &[f32], dim: usize) -> Vec<f32> {
    let mut out = v.to_vec();
    for r in out.chunks_exact_mut(dim) {
        let n = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            r.iter_mut().for_each(|x| *x /= n);
        }
    }
    out
}

fn random_set(n: usize, p: f64, seed: u64) -> RoaringBitmap {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n as u32).filter(|_| rng.random::<f64>() < p).collect()
}

/// Exact filtered top-K (score, id) per query, best first.
fn ground_truth(
    base: &[f32],
    dim: usize,
    queries: &[f32],
    allow: &RoaringBitmap,
) -> Vec<Vec<(f32, u32)>> {
    let rows: Vec<u32> = allow.iter().collect();
    queries
        .par_chunks(dim)
        .map(|q| {
            let mut best: Vec<(f32, u32)> = Vec::with_capacity(K + 1);
            for &r in &rows {
                let s = searchd_kernels::dot(q, &base[r as usize * dim..(r as usize + 1) * dim]);
                if best.len() < K || s > best[K - 1].0 {
                    let pos = best.partition_point(|b| b.0 >= s);
                    best.insert(pos, (s, r));
                    best.truncate(K);
                }
            }
            best
        })
        .collect()
}

/// Each row's highest similarity to any of the queries.
fn closeness(base: &[f32], dim: usize, queries: &[f32]) -> Vec<f32> {
    base.par_chunks(dim)
        .map(|r| {
            queries
                .chunks_exact(dim)
                .map(|q| searchd_kernels::dot(q, r))
                .fold(f32::NEG_INFINITY, f32::max)
        })
        .collect()
}

fn write_u32(path: &Path, v: impl Iterator<Item = u32>) {
    let bytes: Vec<u8> = v.flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write");
}

fn write_f32(path: &Path, v: impl Iterator<Item = f32>) {
    let bytes: Vec<u8> = v.flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write");
}

fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

struct Run {
    nq: usize,
    cpu_p50_us: f64,
    cpu_p99_us: f64,
    cpu_mean_us: f64,
    recall: f64,
    qps: f64,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
    violations: usize,
    plans: std::collections::BTreeMap<String, usize>,
}

fn run(
    index: &Index,
    queries: &[f32],
    dim: usize,
    params: &SearchParams<'_>,
    allow: Option<&RoaringBitmap>,
    gt: &[Vec<(f32, u32)>],
) -> Run {
    let nq = queries.len() / dim;
    // Warm-up pass.
    for q in queries.chunks_exact(dim) {
        std::hint::black_box(index.search(q, params).ok());
    }
    let mut lat = Vec::with_capacity(nq);
    let mut cpu = Vec::with_capacity(nq);
    let mut found = 0usize;
    let mut wanted = 0usize;
    let mut violations = 0usize;
    let mut plans = std::collections::BTreeMap::new();
    let start = Instant::now();
    for (qi, q) in queries.chunks_exact(dim).enumerate() {
        let t = Instant::now();
        let c = thread_cpu_us();
        let (hits, plan) = index.search_with_plan(q, params).expect("search");
        cpu.push(thread_cpu_us() - c);
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        *plans.entry(plan.to_string()).or_insert(0) += 1;
        let truth = &gt[qi];
        wanted += truth.len();
        let kth = truth.last().map_or(f32::NEG_INFINITY, |t| t.0);
        for h in hits.iter().take(K) {
            let ok = allow.is_none_or(|a| a.contains(h.id as u32));
            if !ok {
                violations += 1;
            } else if h.score >= kth - 1e-6 {
                found += 1;
            }
        }
    }
    let total = start.elapsed().as_secs_f64();
    let cpu_mean_us = cpu.iter().sum::<f64>() / nq as f64;
    lat.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    let at = |v: &[f64], p: f64| v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1];
    let pct = |p: f64| at(&lat, p);
    Run {
        nq,
        cpu_p50_us: at(&cpu, 0.50),
        cpu_p99_us: at(&cpu, 0.99),
        cpu_mean_us,
        recall: if wanted == 0 {
            1.0
        } else {
            found.min(wanted) as f64 / wanted as f64
        },
        qps: nq as f64 / total,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        mean_us: lat.iter().sum::<f64>() / nq as f64,
        violations,
        plans,
    }
}

fn main() {
    let a = parse_args();
    std::fs::create_dir_all(&a.out).expect("out dir");
    let base = searchd_vecio::read_vectors(&a.base).expect("base");
    let dim = base.dim();
    let n = base.n();
    let base = unit_rows(base.as_slice(), dim);
    let queries = searchd_vecio::read_vectors(&a.queries).expect("queries");
    assert_eq!(queries.dim(), dim);
    let nq = a.nq.min(queries.n());
    let queries = unit_rows(&queries.as_slice()[..nq * dim], dim);
    write_f32(&a.out.join("queries.f32"), queries.iter().copied());

    if !a.index.join("manifest.json").exists() {
        let t = Instant::now();
        let cfg = BuildConfig {
            quantization: a.quantization,
            ..BuildConfig::default()
        };
        build_index(&a.index, &base, dim, &cfg, &|_, _| {}).expect("build");
        eprintln!(
            "built {} in {:.1}s",
            a.index.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let index = Index::open(&a.index, &LoadOptions::default()).expect("open");
    assert_eq!(index.len(), n);

    // One thread for the searches (the ground truth above uses the rayon pool).
    let mut filters: Vec<(String, f64, RoaringBitmap)> = vec![
        ("50pct".into(), 0.5, random_set(n, 0.5, a.seed)),
        ("10pct".into(), 0.1, random_set(n, 0.1, a.seed + 1)),
        ("1pct".into(), 0.01, random_set(n, 0.01, a.seed + 2)),
        ("0.1pct".into(), 0.001, random_set(n, 0.001, a.seed + 3)),
    ];
    let (fa, fb) = (
        random_set(n, 0.2, a.seed + 4),
        random_set(n, 0.2, a.seed + 5),
    );
    // The two fields of the AND, for peers that filter on payload fields.
    write_u32(&a.out.join("filter-and-20x20.a.u32"), fa.iter());
    write_u32(&a.out.join("filter-and-20x20.b.u32"), fb.iter());
    filters.push(("and-20x20".into(), 0.04, fa & fb));
    filters.push(("20pct".into(), 0.2, random_set(n, 0.2, a.seed + 6)));
    filters.push(("30pct".into(), 0.3, random_set(n, 0.3, a.seed + 7)));
    filters.push(("0.05pct".into(), 0.0005, random_set(n, 0.0005, a.seed + 8)));
    // Filters tied to where the queries are (on request): the rows nearest to some query
    // (correlated: each query's neighbourhood passes) and the rows farthest from every query
    // (anti-correlated: the graph around a query holds no passing row; what breaks graph
    // filtering).
    let wanted = |name: &str| {
        a.filters
            .as_ref()
            .is_some_and(|k| k.iter().any(|x| x == name))
    };
    if ["near-1pct", "far-1pct", "far-10pct"]
        .iter()
        .any(|f| wanted(f))
    {
        let t = Instant::now();
        let close = closeness(&base, dim, &queries);
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by(|&x, &y| close[y as usize].total_cmp(&close[x as usize]));
        let top = |p: f64| -> RoaringBitmap {
            order[..(n as f64 * p) as usize].iter().copied().collect()
        };
        let bottom = |p: f64| -> RoaringBitmap {
            order[n - (n as f64 * p) as usize..]
                .iter()
                .copied()
                .collect()
        };
        filters.push(("near-1pct".into(), 0.01, top(0.01)));
        filters.push(("far-1pct".into(), 0.01, bottom(0.01)));
        filters.push(("far-10pct".into(), 0.1, bottom(0.1)));
        eprintln!(
            "query closeness of {n} rows in {:.1}s",
            t.elapsed().as_secs_f64()
        );
    }
    if let Some(keep) = &a.filters {
        filters.retain(|f| keep.contains(&f.0));
    }

    if a.filters.is_none() {
        // The default set; the others only on request (planner crossover runs, 1M runs).
        filters.retain(|f| !["20pct", "30pct", "0.05pct"].contains(&f.0.as_str()));
    }
    let mut manifest = Vec::new();
    let mut records = Vec::new();
    let unfiltered_gt = ground_truth(&base, dim, &queries, &(0..n as u32).collect());
    for &ef in &a.efs {
        let p = SearchParams::new(K, ef);
        let r = run(&index, &queries, dim, &p, None, &unfiltered_gt);
        eprintln!(
            "unfiltered ef={ef:4} recall={:.4} qps={:8.0} p50={:7.1}us p99={:7.1}us cpu p50={:7.1}us p99={:7.1}us",
            r.recall, r.qps, r.p50_us, r.p99_us, r.cpu_p50_us, r.cpu_p99_us
        );
        records.push(record("none", 1.0, n, "unfiltered", ef, &r));
    }
    for (name, sel, allow) in &filters {
        let t = Instant::now();
        let gt = ground_truth(&base, dim, &queries, allow);
        eprintln!(
            "filter {name}: {} rows ({:.3}%), ground truth in {:.1}s",
            allow.len(),
            100.0 * allow.len() as f64 / n as f64,
            t.elapsed().as_secs_f64()
        );
        write_u32(&a.out.join(format!("filter-{name}.u32")), allow.iter());
        write_u32(
            &a.out.join(format!("gt-{name}.ids.i32")),
            gt.iter()
                .flat_map(|g| (0..K).map(move |i| g.get(i).map_or(u32::MAX, |x| x.1))),
        );
        write_f32(
            &a.out.join(format!("gt-{name}.scores.f32")),
            gt.iter()
                .flat_map(|g| (0..K).map(move |i| g.get(i).map_or(f32::NEG_INFINITY, |x| x.0))),
        );
        manifest.push(serde_json::json!({
            "name": name, "selectivity": sel, "rows": allow.len(),
            "file": format!("filter-{name}.u32"),
            "gt_ids": format!("gt-{name}.ids.i32"), "gt_scores": format!("gt-{name}.scores.f32"),
        }));
        let plans: [(&str, Option<FilterPlan>); 4] = [
            ("exact", Some(FilterPlan::Exact)),
            ("graph", Some(FilterPlan::Graph)),
            ("graphtwohop", Some(FilterPlan::GraphTwoHop)),
            ("auto", None),
        ];
        for (label, plan) in plans {
            if matches!(plan, Some(FilterPlan::Graph | FilterPlan::GraphTwoHop))
                && *sel < a.forced_min_sel
            {
                continue;
            }
            let efs: &[usize] = if plan == Some(FilterPlan::Exact) {
                &[K]
            } else {
                &a.efs
            };
            for &ef in efs {
                let p = SearchParams {
                    allow: Some(allow),
                    plan,
                    ..SearchParams::new(K, ef)
                };
                // A forced full-graph walk through a selective filter takes ~10-40 ms a
                // query: run those on the first 200 queries only.
                let sub = if plan.is_some_and(|p| p != FilterPlan::Exact) && *sel <= 0.011 {
                    200.min(nq)
                } else {
                    nq
                };
                let r = run(
                    &index,
                    &queries[..sub * dim],
                    dim,
                    &p,
                    Some(allow),
                    &gt[..sub],
                );
                eprintln!(
                    "  {label:12} ef={ef:4} nq={} recall={:.4} qps={:8.0} p50={:7.1}us p99={:7.1}us cpu p50={:7.1}us p99={:7.1}us bad={} plans={:?}",
                    r.nq, r.recall, r.qps, r.p50_us, r.p99_us, r.cpu_p50_us, r.cpu_p99_us, r.violations, r.plans
                );
                assert_eq!(
                    r.violations, 0,
                    "a filtered search returned a non-matching row"
                );
                records.push(record(name, *sel, allow.len() as usize, label, ef, &r));
            }
        }
    }
    std::fs::write(
        a.out.join("filters.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "n": n, "dim": dim, "nq": nq, "k": K, "seed": a.seed, "filters": manifest,
        }))
        .unwrap(),
    )
    .unwrap();
    std::fs::write(
        a.out.join("results.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "index": index.info(), "runs": records,
        }))
        .unwrap(),
    )
    .unwrap();
}

fn record(
    filter: &str,
    sel: f64,
    rows: usize,
    plan: &str,
    ef: usize,
    r: &Run,
) -> serde_json::Value {
    serde_json::json!({
        "filter": filter, "selectivity": sel, "rows": rows, "plan": plan, "ef": ef,
        "nq": r.nq, "recall": r.recall, "qps": r.qps, "p50_us": r.p50_us, "p99_us": r.p99_us,
        "cpu_p50_us": r.cpu_p50_us, "cpu_p99_us": r.cpu_p99_us, "cpu_mean_us": r.cpu_mean_us,
        "cpu_qps": 1e6 / r.cpu_mean_us,
        "mean_us": r.mean_us, "violations": r.violations, "plans_used": r.plans,
    })
}
