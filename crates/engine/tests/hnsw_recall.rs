//! HNSW against exact search on seeded data, with a stated recall floor per configuration.

mod common;

use searchd_engine::{
    build_index, eval, exact, BuildConfig, BuildOn, HnswParams, Index, IndexKind, LoadOptions,
    Metric, Quantization, SearchParams,
};

/// Recall@10 with the default build (insertion walks on SQ8 codes).
fn recall_for(metric: Metric, m: usize, efc: usize, ef: usize, threads: usize) -> f64 {
    recall_with(
        metric,
        m,
        efc,
        ef,
        threads,
        Quantization::None,
        None,
        BuildOn::default(),
    )
}

/// Recall@10 of a float32 HNSW index whose insertion walks scored `on`.
fn recall_built_on(metric: Metric, on: BuildOn, ef: usize) -> f64 {
    recall_with(metric, 16, 100, ef, 1, Quantization::None, None, on)
}

#[allow(clippy::too_many_arguments)]
fn recall_with(
    metric: Metric,
    m: usize,
    efc: usize,
    ef: usize,
    threads: usize,
    quantization: Quantization,
    oversample: Option<f32>,
    build_on: BuildOn,
) -> f64 {
    let (n, nq, dim, k) = (4000, 100, 32, 10);
    let data = common::clustered(n + nq, dim, 40, 7);
    let (base, queries) = data.split_at(n * dim);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("idx");
    let cfg = BuildConfig {
        kind: IndexKind::Hnsw,
        metric,
        hnsw: HnswParams {
            m,
            ef_construction: efc,
            seed: 1,
        },
        threads,
        force: false,
        quantization,
        nlist: 0,
        overlap: 0,
        build_on,
    };
    build_index(&out, base, dim, &cfg, &|_, _| {}).unwrap();
    let index = Index::open(&out, &LoadOptions::default()).unwrap();
    let prepared: Vec<f32> = queries
        .chunks_exact(dim)
        .flat_map(|q| index.prepare_query(q).unwrap())
        .collect();
    // Exact neighbours over the input rows (ids are input row numbers, as the index's).
    let stored: Vec<f32> = base
        .chunks_exact(dim)
        .flat_map(|r| match metric {
            Metric::Cosine => index.prepare_query(r).unwrap(),
            _ => r.to_vec(),
        })
        .collect();
    let truth = exact::knn(metric, &stored, &prepared, dim, k, &|_| {});
    let mut total = 0.0;
    for (i, q) in prepared.chunks_exact(dim).enumerate() {
        let mut p = SearchParams::new(k, ef);
        p.oversample = oversample;
        let hits = index.search(q, &p).unwrap();
        assert_eq!(hits.len(), k);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "sorted");
        let ids: Vec<u64> = hits.iter().map(|h| h.id).collect();
        let t: Vec<i64> = truth[i].iter().map(|n| n.id as i64).collect();
        total += eval::recall_at(&index, q, &t, &ids, k).unwrap();
    }
    total / nq as f64
}

#[test]
fn cosine_m16_ef64_recall_above_095() {
    let r = recall_for(Metric::Cosine, 16, 100, 64, 2);
    assert!(r >= 0.95, "recall@10 {r}");
}

#[test]
fn l2_m8_ef32_recall_above_090() {
    let r = recall_for(Metric::L2, 8, 64, 32, 2);
    assert!(r >= 0.90, "recall@10 {r}");
}

#[test]
fn ip_single_thread_recall_above_095() {
    let r = recall_for(Metric::InnerProduct, 16, 100, 128, 1);
    assert!(r >= 0.95, "recall@10 {r}");
}

#[test]
fn higher_ef_does_not_lower_recall_much() {
    let lo = recall_for(Metric::Cosine, 8, 64, 10, 2);
    let hi = recall_for(Metric::Cosine, 8, 64, 200, 2);
    assert!(hi >= lo - 0.01 && hi >= 0.97, "ef10 {lo} ef200 {hi}");
}

#[test]
fn sq8_traversal_with_rescoring_keeps_recall() {
    // Traversal on one-byte codes, best 4k rescored with float32 (the default).
    for metric in [Metric::Cosine, Metric::InnerProduct, Metric::L2] {
        let f32_recall = recall_for(metric, 16, 100, 64, 2);
        let sq8 = recall_with(
            metric,
            16,
            100,
            64,
            2,
            Quantization::Sq8,
            None,
            BuildOn::default(),
        );
        assert!(
            sq8 >= 0.93,
            "{metric:?}: sq8 recall@10 {sq8} (float32 {f32_recall})"
        );
        assert!(
            sq8 >= f32_recall - 0.03,
            "{metric:?}: sq8 {sq8} vs float32 {f32_recall}"
        );
    }
    // Oversample 1 (no extra candidates) can only be worse than 8.
    let lo = recall_with(
        Metric::Cosine,
        16,
        100,
        64,
        2,
        Quantization::Sq8,
        Some(1.0),
        BuildOn::default(),
    );
    let hi = recall_with(
        Metric::Cosine,
        16,
        100,
        64,
        2,
        Quantization::Sq8,
        Some(8.0),
        BuildOn::default(),
    );
    assert!(hi >= lo && hi >= 0.95, "oversample 1: {lo}, 8: {hi}");
}

/// A graph whose insertion walks scored SQ8 codes (rescoring their candidates with float32
/// before the links are chosen) is as good as the float32-built one: same recall within
/// 0.02 under every metric.
#[test]
fn building_on_sq8_codes_keeps_recall() {
    for metric in [Metric::Cosine, Metric::L2, Metric::InnerProduct] {
        let f32_built = recall_built_on(metric, BuildOn::Float32, 32);
        let sq8_built = recall_built_on(metric, BuildOn::Sq8, 32);
        assert!(
            sq8_built >= f32_built - 0.02 && sq8_built >= 0.85,
            "{metric:?}: recall@10 at ef 32 built on sq8 {sq8_built} vs float32 {f32_built}"
        );
    }
    assert_eq!(BuildOn::parse("SQ8"), Some(BuildOn::Sq8));
    assert_eq!(BuildOn::parse("float32"), Some(BuildOn::Float32));
    assert_eq!(BuildOn::parse("pq:8"), None);
}
