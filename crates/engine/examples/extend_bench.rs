//! A graph extended by new rows ([`searchd_engine::extend_index`]) against one built from
//! nothing over the same rows: build time and recall, the way a live collection's merge
//! meets them (a large graph segment plus new rows, some of its rows deleted).
//!
//! ```text
//! cargo run --release -p searchd-engine --example extend_bench -- \
//!     --base base.npy --queries queries.npy --index DIR [--new 5000] [--deleted 0.1] \
//!     [--nq 1000] [--efs 32,64,128] [--threads 0]
//! ```
//!
//! Builds `DIR/base` (HNSW m=16, ef_construction=200, cosine) over every row but the last
//! `--new` when it does not exist. Then, for the rows kept (the base's rows minus a seeded
//! `--deleted` share) plus the new ones: `DIR/full` built from nothing and `DIR/extended`
//! from the base's graph, each timed (wall) with `--threads` threads (0 = all cores).
//! Recall@10 (tie-aware: a hit counts when its score is at least the exact 10th score
//! minus 1e-6) of both against exact search over the same rows, at each ef, and the share
//! of new rows whose own vector finds them first. One JSON line per index.

use std::path::PathBuf;
use std::time::Instant;

use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use searchd_engine::{build_index, extend_index, BuildConfig, Index, LoadOptions, SearchParams};

const K: usize = 10;

/// The rows scaled to unit length, as a cosine index stores them.
fn unit_rows(v: &[f32], dim: usize) -> Vec<f32> {
    let mut out = v.to_vec();
    out.chunks_exact_mut(dim).for_each(|r| {
        searchd_kernels::normalize(r);
    });
    out
}

fn main() {
    let (mut base, mut queries, mut index) = (PathBuf::new(), PathBuf::new(), PathBuf::new());
    let (mut new, mut deleted, mut nq, mut threads) = (5000usize, 0.1f64, 1000usize, 0usize);
    let mut efs = vec![32usize, 64, 128];
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--base" => base = v.into(),
            "--queries" => queries = v.into(),
            "--index" => index = v.into(),
            "--new" => new = v.parse().expect("--new"),
            "--deleted" => deleted = v.parse().expect("--deleted"),
            "--nq" => nq = v.parse().expect("--nq"),
            "--threads" => threads = v.parse().expect("--threads"),
            "--efs" => efs = v.split(',').map(|x| x.parse().expect("--efs")).collect(),
            other => panic!("unknown flag {other}"),
        }
    }
    let b = searchd_vecio::read_vectors(&base).expect("base");
    let dim = b.dim();
    let data = unit_rows(b.as_slice(), dim);
    let n = b.n();
    let split = n - new;
    let q = searchd_vecio::read_vectors(&queries).expect("queries");
    let nq = nq.min(q.n());
    let qs = unit_rows(&q.as_slice()[..nq * dim], dim);
    let cfg = BuildConfig {
        threads,
        force: true,
        ..BuildConfig::default()
    };
    let base_dir = index.join("base");
    if !base_dir.join("manifest.json").exists() {
        let t = Instant::now();
        build_index(&base_dir, &data[..split * dim], dim, &cfg, &|_, _| {}).expect("base");
        eprintln!("built base in {:.1}s", t.elapsed().as_secs_f64());
    }
    let base_index = Index::open(&base_dir, &LoadOptions::default()).expect("open base");
    // Kept base rows (seeded), then the new rows.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let kept: Vec<u64> = (0..split as u64)
        .filter(|_| rng.random::<f64>() >= deleted)
        .collect();
    let rows: Vec<usize> = kept.iter().map(|&r| r as usize).chain(split..n).collect();
    let mut vecs = Vec::with_capacity(rows.len() * dim);
    for &r in &rows {
        vecs.extend_from_slice(&data[r * dim..(r + 1) * dim]);
    }
    let gt: Vec<f32> = qs
        .par_chunks(dim)
        .map(|qv| {
            let mut s: Vec<f32> = vecs
                .chunks(dim)
                .map(|r| r.iter().zip(qv).map(|(a, b)| a * b).sum::<f32>())
                .collect();
            s.select_nth_unstable_by(K - 1, |a, b| b.total_cmp(a));
            s[K - 1]
        })
        .collect();
    for kind in ["full", "extended"] {
        let dir = index.join(kind);
        let t = Instant::now();
        let report = if kind == "full" {
            build_index(&dir, &vecs, dim, &cfg, &|_, _| {})
        } else {
            extend_index(&dir, &vecs, dim, &cfg, &base_index, &kept, &|_, _| {})
        }
        .expect("build");
        let seconds = t.elapsed().as_secs_f64();
        let idx = Index::open(&dir, &LoadOptions::default()).expect("open");
        let mut recalls = Vec::new();
        for &ef in &efs {
            let p = SearchParams::new(K, ef);
            let found: usize = qs
                .chunks(dim)
                .zip(&gt)
                .map(|(qv, &tenth)| {
                    let hits = idx.search(qv, &p).expect("search");
                    hits.iter()
                        .filter(|h| h.score >= tenth - 1e-6)
                        .count()
                        .min(K)
                })
                .sum();
            recalls.push(format!("\"{ef}\": {:.4}", found as f64 / (nq * K) as f64));
        }
        let p = SearchParams::new(K, 64);
        let fresh = (kept.len()..rows.len()).step_by(((n - split) / 1000).max(1));
        let (mut first, mut asked) = (0usize, 0usize);
        for i in fresh {
            let qv = &vecs[i * dim..(i + 1) * dim];
            let hits = idx.search(qv, &p).expect("search");
            asked += 1;
            if hits
                .first()
                .is_some_and(|h| h.id == i as u64 || h.score >= 1.0 - 1e-5)
            {
                first += 1;
            }
        }
        println!(
            "{{\"index\": \"{kind}\", \"rows\": {}, \"base_rows\": {split}, \"kept\": {}, \"new\": {}, \"threads\": {threads}, \"build_seconds\": {seconds:.2}, \"graph_seconds\": {:.2}, \"recall_at_ef\": {{{}}}, \"new_rows_found_first\": {:.4}}}",
            rows.len(),
            kept.len(),
            n - split,
            report.graph_seconds,
            recalls.join(", "),
            first as f64 / asked.max(1) as f64
        );
    }
}
