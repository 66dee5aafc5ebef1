//! Graphs extended from an existing index ([`extend_index`]): the rows they hold, their
//! recall against a graph built from nothing over the same rows, deleted base rows gone,
//! determinism with one thread, and the bases refused by name.

mod common;

use std::path::Path;

use rand::{RngExt, SeedableRng};
use searchd_engine::{
    build_index, eval, exact, extend_index, BuildConfig, Error, HnswParams, Index, IndexKind,
    LoadOptions, Metric, Quantization, SearchParams,
};

const DIM: usize = 32;

fn cfg(threads: usize, quantization: Quantization) -> BuildConfig {
    BuildConfig {
        kind: IndexKind::Hnsw,
        metric: Metric::Cosine,
        hnsw: HnswParams {
            m: 16,
            ef_construction: 100,
            seed: 3,
        },
        threads,
        force: true,
        quantization,
        nlist: 0,
        overlap: 0,
        build_on: Default::default(),
    }
}

/// Base rows kept (each with probability `keep`, seeded) and the data of the new index:
/// the kept base rows in order, then `new` fresh rows.
fn rows(data: &[f32], n_base: usize, new: usize, keep: f64) -> (Vec<u64>, Vec<f32>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let kept: Vec<u64> = (0..n_base as u64)
        .filter(|_| rng.random::<f64>() < keep)
        .collect();
    let mut out = Vec::new();
    for &r in &kept {
        out.extend_from_slice(&data[r as usize * DIM..(r as usize + 1) * DIM]);
    }
    out.extend_from_slice(&data[n_base * DIM..(n_base + new) * DIM]);
    (kept, out)
}

fn recall(index: &Index, rows: &[f32], queries: &[f32], ef: usize) -> f64 {
    let truth = exact::knn(Metric::Cosine, rows, queries, DIM, 10, &|_| {});
    let mut total = 0.0;
    for (i, q) in queries.chunks_exact(DIM).enumerate() {
        let hits = index.search(q, &SearchParams::new(10, ef)).unwrap();
        let ids: Vec<u64> = hits.iter().map(|h| h.id).collect();
        let t: Vec<i64> = truth[i].iter().map(|n| n.id as i64).collect();
        total += eval::recall_at(index, q, &t, &ids, 10).unwrap();
    }
    total / (queries.len() / DIM) as f64
}

/// The share of rows whose own vector finds that row first (or a row with the same
/// score). Not 1 even for a fresh build: a node every neighbour pruned from its list has
/// no way in (a few in 4,000 in a two-thread build).
fn found_by_own_vector(index: &Index, rows: &[f32]) -> f64 {
    let n = rows.len() / DIM;
    let found = rows
        .chunks_exact(DIM)
        .enumerate()
        .filter(|(i, r)| {
            let hits = index.search(r, &SearchParams::new(1, 64)).unwrap();
            hits[0].id == *i as u64 || hits[0].score >= 1.0 - 1e-5
        })
        .count();
    found as f64 / n as f64
}

fn every_row_finds_itself(index: &Index, rows: &[f32]) {
    let share = found_by_own_vector(index, rows);
    assert!(
        share >= 0.995,
        "{share} of the rows found by their own vector"
    );
}

/// [`extend_index`] of `rows` from `base` into `out`, without progress.
fn extend(out: &Path, rows: &[f32], c: &BuildConfig, base: &Index, kept: &[u64]) {
    extend_index(out, rows, DIM, c, base, kept, &|_, _| {}).unwrap();
}

fn build_base(dir: &Path, data: &[f32], n_base: usize, q: Quantization, threads: usize) -> Index {
    let out = dir.join("base");
    build_index(
        &out,
        &data[..n_base * DIM],
        DIM,
        &cfg(threads, q),
        &|_, _| {},
    )
    .unwrap();
    Index::open(&out, &LoadOptions::default()).unwrap()
}

/// Extends and builds with `threads`; per kept share of the base: (share, recall
/// extended, recall built, own vector extended, own vector built).
fn extended_vs_built(threads: usize) -> Vec<(f64, f64, f64, f64, f64)> {
    let (n_base, new, nq) = (4000, 600, 100);
    let data = common::clustered(n_base + new + nq, DIM, 40, 5);
    let queries = &data[(n_base + new) * DIM..];
    let dir = tempfile::tempdir().unwrap();
    let base = build_base(dir.path(), &data, n_base, Quantization::None, threads);
    let mut out = Vec::new();
    for keep in [1.0, 0.95, 0.75] {
        let (kept, rows) = rows(&data, n_base, new, keep);
        let ext_dir = dir.path().join(format!("ext-{keep}"));
        extend(
            &ext_dir,
            &rows,
            &cfg(threads, Quantization::None),
            &base,
            &kept,
        );
        let ext = Index::open(&ext_dir, &LoadOptions::default()).unwrap();
        assert_eq!(ext.len(), rows.len() / DIM);
        let full_dir = dir.path().join(format!("full-{keep}"));
        build_index(
            &full_dir,
            &rows,
            DIM,
            &cfg(threads, Quantization::None),
            &|_, _| {},
        )
        .unwrap();
        let full = Index::open(&full_dir, &LoadOptions::default()).unwrap();
        out.push((
            keep,
            recall(&ext, &rows, queries, 64),
            recall(&full, &rows, queries, 64),
            found_by_own_vector(&ext, &rows),
            found_by_own_vector(&full, &rows),
        ));
    }
    out
}

/// One thread: the graphs, and so these figures, do not depend on the machine's load, so
/// the extended graph is held close to the fresh build.
#[test]
fn an_extended_graph_holds_its_rows_and_keeps_the_recall_of_a_fresh_build() {
    for (keep, re, rf, fe, ff) in extended_vs_built(1) {
        assert!(
            re >= 0.93 && re >= rf - 0.03,
            "keep {keep}: extended {re} vs built {rf}"
        );
        assert!(
            fe >= 0.995 && fe >= ff - 0.003,
            "keep {keep}: own vector finds {fe} vs {ff}"
        );
    }
}

/// Two threads: insert order depends on scheduling, and under a loaded CI one run in
/// many left 29 of 4,600 rows unreachable by their own vector (0.9937; the fresh build
/// 0.9983, typical runs 0.998-1.0). The bounds here catch a broken concurrent extend,
/// not that scatter.
#[test]
fn a_concurrent_extend_keeps_its_rows_reachable() {
    for (keep, re, rf, fe, _) in extended_vs_built(2) {
        assert!(
            re >= 0.93 && re >= rf - 0.05,
            "keep {keep}: extended {re} vs built {rf}"
        );
        assert!(fe >= 0.985, "keep {keep}: own vector finds {fe}");
    }
}

#[test]
fn a_base_with_almost_every_row_deleted_still_gives_a_connected_graph() {
    // 2% of the base survives: its entry point is almost surely gone and most kept nodes
    // lose every link, so they are inserted again. One thread: the graphs, and so the
    // share found, do not depend on the machine's load.
    let (n_base, new) = (3000, 200);
    let data = common::clustered(n_base + new, DIM, 20, 8);
    let dir = tempfile::tempdir().unwrap();
    let base = build_base(dir.path(), &data, n_base, Quantization::None, 1);
    let (kept, rows) = rows(&data, n_base, new, 0.02);
    let out = dir.path().join("ext");
    extend(&out, &rows, &cfg(1, Quantization::None), &base, &kept);
    every_row_finds_itself(&Index::open(&out, &LoadOptions::default()).unwrap(), &rows);
    // Nothing new, nothing deleted: the same rows in a copy of the graph.
    let all: Vec<u64> = (0..n_base as u64).collect();
    let out = dir.path().join("copy");
    extend(
        &out,
        &data[..n_base * DIM],
        &cfg(1, Quantization::None),
        &base,
        &all,
    );
    every_row_finds_itself(
        &Index::open(&out, &LoadOptions::default()).unwrap(),
        &data[..n_base * DIM],
    );
}

#[test]
fn one_thread_extends_deterministically_and_codes_are_written_for_the_new_index() {
    let (n_base, new) = (2000, 300);
    let data = common::clustered(n_base + new, DIM, 20, 9);
    let dir = tempfile::tempdir().unwrap();
    let base = build_base(dir.path(), &data, n_base, Quantization::Sq8, 2);
    let (kept, rows) = rows(&data, n_base, new, 0.9);
    let mut graphs = Vec::new();
    for run in 0..2 {
        let out = dir.path().join(format!("ext-{run}"));
        extend(&out, &rows, &cfg(1, Quantization::Sq8), &base, &kept);
        graphs.push(std::fs::read(out.join("graph.bin")).unwrap());
        let ext = Index::open(&out, &LoadOptions::default()).unwrap();
        assert!(
            ext.info().codes_bytes as usize >= rows.len(),
            "one byte per dimension"
        );
        every_row_finds_itself(&ext, &rows);
    }
    assert!(graphs[0] == graphs[1], "two one-thread extensions differ");
}

#[test]
fn bases_that_cannot_be_extended_are_refused_by_name() {
    let n = 500;
    let data = common::clustered(n + 10, DIM, 5, 2);
    let dir = tempfile::tempdir().unwrap();
    let flat_dir = dir.path().join("flat");
    let flat_cfg = BuildConfig {
        kind: IndexKind::Flat,
        ..cfg(2, Quantization::None)
    };
    build_index(&flat_dir, &data[..n * DIM], DIM, &flat_cfg, &|_, _| {}).unwrap();
    let flat = Index::open(&flat_dir, &LoadOptions::default()).unwrap();
    let hnsw = build_base(dir.path(), &data, n, Quantization::None, 2);
    let out = dir.path().join("out");
    let all: Vec<u64> = (0..n as u64).collect();
    let refused = |base: &Index, c: &BuildConfig, rows: &[u64], needle: &str| match extend_index(
        &out,
        &data,
        DIM,
        c,
        base,
        rows,
        &|_, _| {},
    ) {
        Err(Error::InvalidParam {
            name: "base",
            message,
        }) => {
            assert!(message.contains(needle), "{message}")
        }
        other => panic!("expected a refusal naming {needle:?}, got {other:?}"),
    };
    refused(&flat, &cfg(2, Quantization::None), &all, "no graph");
    let other_m = BuildConfig {
        hnsw: HnswParams {
            m: 8,
            ..cfg(2, Quantization::None).hnsw
        },
        ..cfg(2, Quantization::None)
    };
    refused(&hnsw, &other_m, &all, "m 16");
    refused(&hnsw, &cfg(2, Quantization::None), &[0, 1, 1], "twice");
    refused(
        &hnsw,
        &cfg(2, Quantization::None),
        &[n as u64],
        "not in the base",
    );
    assert!(!out.exists(), "a refused extension wrote {}", out.display());
}
