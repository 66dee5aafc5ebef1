//! Quantized indexes (SQ8, PQ, binary): recall against exact search, placement of each
//! part (vectors in RAM, mapped, on disk or absent), re-quantizing an existing graph, and
//! the bad inputs of each.

mod common;

use std::path::{Path, PathBuf};

use searchd_engine::{
    build_index, eval, exact, quantize_index, BuildConfig, Error, HnswParams, Index, IndexKind,
    LoadOptions, Metric, Placement, Quantization, SearchError, SearchParams, VectorPlacement,
};

const DIM: usize = 32;
const N: usize = 3000;
const NQ: usize = 100;

fn data() -> (Vec<f32>, Vec<f32>) {
    let d = common::clustered(N + NQ, DIM, 40, 7);
    let (b, q) = d.split_at(N * DIM);
    (b.to_vec(), q.to_vec())
}

fn build(dir: &Path, name: &str, base: &[f32], metric: Metric, q: Quantization) -> PathBuf {
    let out = dir.join(name);
    let cfg = BuildConfig {
        kind: IndexKind::Hnsw,
        metric,
        hnsw: HnswParams {
            m: 16,
            ef_construction: 100,
            seed: 1,
        },
        threads: 1,
        force: false,
        quantization: q,
        nlist: 0,
        overlap: 0,
        build_on: Default::default(),
    };
    build_index(&out, base, DIM, &cfg, &|_, _| {}).unwrap();
    out
}

/// Mean tie-aware recall@10 of `index` (checked against `checker`'s float32 vectors).
fn recall(index: &Index, checker: &Index, queries: &[f32], ef: usize, over: Option<f32>) -> f64 {
    let metric = checker.metric();
    let prepared: Vec<f32> = queries
        .chunks_exact(DIM)
        .flat_map(|q| checker.prepare_query(q).unwrap())
        .collect();
    let mut stored = vec![0f32; N * DIM];
    for id in 0..N {
        stored[id * DIM..(id + 1) * DIM].copy_from_slice(&checker.vector(id as u64).unwrap());
    }
    let truth = exact::knn(metric, &stored, &prepared, DIM, 10, &|_| {});
    let mut total = 0.0;
    for (i, q) in prepared.chunks_exact(DIM).enumerate() {
        let mut p = SearchParams::new(10, ef);
        p.oversample = over;
        let hits = index.search(q, &p).unwrap();
        assert_eq!(hits.len(), 10);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "sorted");
        let ids: Vec<u64> = hits.iter().map(|h| h.id).collect();
        let t: Vec<i64> = truth[i].iter().map(|n| n.id as i64).collect();
        total += eval::recall_at(checker, q, &t, &ids, 10).unwrap();
    }
    total / NQ as f64
}

/// The float32 index of `base` under `metric` (the reference the coded indexes are checked
/// against), opened.
fn float32(dir: &Path, base: &[f32], metric: Metric) -> Index {
    let out = build(
        dir,
        &format!("f32-{metric:?}"),
        base,
        metric,
        Quantization::None,
    );
    Index::open(&out, &LoadOptions::default()).unwrap()
}

#[test]
fn pq_and_binary_traversal_with_rescoring_keep_recall() {
    let dir = tempfile::tempdir().unwrap();
    let (base, queries) = data();
    for metric in [Metric::Cosine, Metric::L2] {
        let plain = float32(dir.path(), &base, metric);
        let f32_recall = recall(&plain, &plain, &queries, 64, None);
        for (q, floor) in [
            (Quantization::Pq { m: 8 }, 0.90),
            (Quantization::Binary, 0.85),
            (Quantization::Rabitq { bits: 4 }, 0.93),
            (Quantization::Rabitq { bits: 8 }, 0.93),
        ] {
            let out = build(
                dir.path(),
                &format!("{}-{metric:?}", q.name().replace(':', "")),
                &base,
                metric,
                q,
            );
            let idx = Index::open(&out, &LoadOptions::default()).unwrap();
            let r = recall(&idx, &idx, &queries, 64, None);
            assert!(
                r >= floor && r >= f32_recall - 0.1,
                "{metric:?} {}: recall@10 {r:.3} (float32 {f32_recall:.3})",
                q.name()
            );
            // More rescoring never costs much recall, and oversample 1 (no extra
            // candidates) is still a valid search.
            let wide = recall(&idx, &idx, &queries, 64, Some(30.0));
            assert!(
                wide >= r - 0.02,
                "{}: oversample 30 gave {wide:.3} < {r:.3}",
                q.name()
            );
            let narrow = recall(&idx, &idx, &queries, 64, Some(1.0));
            assert!(narrow > 0.3, "{}: oversample 1 gave {narrow:.3}", q.name());
        }
    }
}

#[test]
fn every_placement_gives_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (base, queries) = data();
    let out = build(dir.path(), "sq8", &base, Metric::Cosine, Quantization::Sq8);
    let reference = Index::open(&out, &LoadOptions::default()).unwrap();
    for vectors in [VectorPlacement::Ram, VectorPlacement::Disk] {
        for graph in [Placement::Mmap, Placement::Ram] {
            for codes in [Placement::Mmap, Placement::Ram] {
                for verify in [true, false] {
                    let opts = LoadOptions {
                        verify,
                        ..LoadOptions::with_parts(vectors, Some(graph), Some(codes))
                    };
                    let idx = Index::open(&out, &opts).unwrap();
                    assert_eq!(idx.info().placement, opts.parts());
                    for q in queries.chunks_exact(DIM).take(20) {
                        let p = SearchParams::new(10, 48);
                        assert_eq!(
                            idx.search(q, &p).unwrap(),
                            reference.search(q, &p).unwrap(),
                            "{opts:?}"
                        );
                        assert_eq!(
                            idx.exact_search(q, 10).unwrap(),
                            reference.exact_search(q, 10).unwrap()
                        );
                    }
                    assert_eq!(idx.vector(5).unwrap(), reference.vector(5).unwrap());
                }
            }
        }
    }
    // Without vectors: the codes' own order, and recall checked against the file.
    let opts = LoadOptions::with_parts(VectorPlacement::None, None, None);
    let codes_only = Index::open(&out, &opts).unwrap();
    assert!(!codes_only.has_vectors());
    assert_eq!(codes_only.info().vector_bytes, 0);
    assert!(codes_only.vector(0).is_none());
    assert_eq!(
        codes_only.exact_search(&queries[..DIM], 5),
        Err(SearchError::NoVectors)
    );
    let r = recall(&codes_only, &reference, &queries, 64, None);
    assert!(r > 0.6, "sq8 codes alone: recall@10 {r:.3}");
}

/// RaBitQ-style codes are good enough to answer on their own: recall@10 with no rescoring
/// (`--vectors none`), checked against the float32 index's exact answers, for both bit
/// widths and metrics; 8 bits beat SQ8's 8 bits.
#[test]
fn rabitq_codes_keep_recall_without_rescoring() {
    let dir = tempfile::tempdir().unwrap();
    let (base, queries) = data();
    for metric in [Metric::Cosine, Metric::L2] {
        let checker = float32(dir.path(), &base, metric);
        let codes_only = |q: Quantization| {
            let out = build(
                dir.path(),
                &format!("{}-{metric:?}", q.name().replace(':', "")),
                &base,
                metric,
                q,
            );
            let idx = Index::open(
                &out,
                &LoadOptions::with_parts(VectorPlacement::None, None, None),
            )
            .unwrap();
            recall(&idx, &checker, &queries, 128, None)
        };
        let r4 = codes_only(Quantization::Rabitq { bits: 4 });
        let r8 = codes_only(Quantization::Rabitq { bits: 8 });
        let sq8 = codes_only(Quantization::Sq8);
        eprintln!(
            "{metric:?}: codes alone recall@10 rabitq:4 {r4:.3}, rabitq:8 {r8:.3}, sq8 {sq8:.3}"
        );
        assert!(r4 >= 0.82, "{metric:?} rabitq:4 alone: {r4:.3}");
        assert!(
            r8 >= 0.95 && r8 >= sq8 - 0.01,
            "{metric:?} rabitq:8 alone: {r8:.3} (sq8 {sq8:.3})"
        );
    }
}

#[test]
fn missing_vectors_are_a_clear_error_unless_rescoring_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let (base, queries) = data();
    let out = build(
        dir.path(),
        "bin",
        &base[..600 * DIM],
        Metric::Cosine,
        Quantization::Binary,
    );
    std::fs::remove_file(out.join("vectors.bin")).unwrap();
    for v in [
        VectorPlacement::Mmap,
        VectorPlacement::Ram,
        VectorPlacement::Disk,
    ] {
        let e = Index::open(&out, &LoadOptions::with_parts(v, None, None)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidParam {
                    name: "vectors",
                    ..
                }
            ) && e.to_string().contains("vectors.bin is missing")
                && e.to_string().contains("--vectors none"),
            "{e}"
        );
    }
    let idx = Index::open(
        &out,
        &LoadOptions::with_parts(VectorPlacement::None, None, None),
    )
    .unwrap();
    let hits = idx
        .search(&queries[..DIM], &SearchParams::new(5, 32))
        .unwrap();
    assert_eq!(hits.len(), 5);
    // Float32 indexes search their vectors directly: disk or none is refused.
    let plain = build(
        dir.path(),
        "plain",
        &base[..600 * DIM],
        Metric::Cosine,
        Quantization::None,
    );
    for v in [VectorPlacement::Disk, VectorPlacement::None] {
        let e = Index::open(&plain, &LoadOptions::with_parts(v, None, None)).unwrap_err();
        assert!(e.to_string().contains("needs a quantized index"), "{e}");
    }
}

#[test]
fn quantize_reuses_the_graph_and_matches_a_direct_build() {
    let dir = tempfile::tempdir().unwrap();
    let (base, queries) = data();
    let plain = build(
        dir.path(),
        "plain",
        &base,
        Metric::Cosine,
        Quantization::None,
    );
    for q in [
        Quantization::Sq8,
        Quantization::Pq { m: 8 },
        Quantization::Binary,
        Quantization::Rabitq { bits: 4 },
    ] {
        let direct = build(
            dir.path(),
            &format!("direct-{}", q.name().replace(':', "")),
            &base,
            Metric::Cosine,
            q,
        );
        let requant = dir
            .path()
            .join(format!("requant-{}", q.name().replace(':', "")));
        quantize_index(&plain, &requant, q, false).unwrap();
        let a = Index::open(&direct, &LoadOptions::default()).unwrap();
        let b = Index::open(&requant, &LoadOptions::default()).unwrap();
        assert_eq!(
            a.info().params["quantization"],
            b.info().params["quantization"]
        );
        for qv in queries.chunks_exact(DIM).take(20) {
            let p = SearchParams::new(10, 48);
            assert_eq!(
                a.search(qv, &p).unwrap(),
                b.search(qv, &p).unwrap(),
                "{}",
                q.name()
            );
        }
        // Output exists: refused without force, replaced with it.
        let e = quantize_index(&plain, &requant, q, false).unwrap_err();
        assert!(matches!(e, Error::Exists { .. }), "{e}");
        quantize_index(&plain, &requant, Quantization::None, true).unwrap();
        let c = Index::open(&requant, &LoadOptions::default()).unwrap();
        assert!(c.info().params.get("quantization").is_none());
        assert_eq!(c.info().codes_bytes, 0);
    }
    // The source is untouched.
    assert!(Index::open(&plain, &LoadOptions::default()).is_ok());
    // Flat indexes have no graph to traverse on codes.
    let flat = dir.path().join("flat");
    let cfg = BuildConfig {
        kind: IndexKind::Flat,
        ..Default::default()
    };
    build_index(&flat, &base[..500 * DIM], DIM, &cfg, &|_, _| {}).unwrap();
    let e =
        quantize_index(&flat, &dir.path().join("flat-q"), Quantization::Sq8, false).unwrap_err();
    assert!(e.to_string().contains("flat index"), "{e}");
}

#[test]
fn pq_bad_input_is_refused_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data();
    let cases: [(usize, Quantization, &str); 3] = [
        (1000, Quantization::Pq { m: 5 }, "not divisible"),
        (1000, Quantization::Pq { m: 0 }, "m"),
        // 200 rows cannot train 256 centroids per subspace.
        (200, Quantization::Pq { m: 8 }, "at least 256"),
    ];
    for (i, (n, q, needle)) in cases.into_iter().enumerate() {
        let out = dir.path().join(format!("bad-{i}"));
        let cfg = BuildConfig {
            kind: IndexKind::Hnsw,
            quantization: q,
            ..Default::default()
        };
        let e = build_index(&out, &base[..n * DIM], DIM, &cfg, &|_, _| {}).unwrap_err();
        assert!(e.to_string().contains(needle), "{}: {e}", q.name());
        assert!(!out.exists());
    }
    assert_eq!(
        Quantization::parse("pq:16"),
        Some(Quantization::Pq { m: 16 })
    );
    assert_eq!(
        Quantization::parse("rabitq:4"),
        Some(Quantization::Rabitq { bits: 4 })
    );
    assert_eq!(
        Quantization::parse("rabitq:8").map(|q| q.name()),
        Some("rabitq:8".into())
    );
    assert_eq!(
        Quantization::parse("rabitq:1"),
        Some(Quantization::Rabitq { bits: 1 })
    );
    for bad in [
        "pq", "pq:", "pq:x", "pq:-1", "int4", "rabitq", "rabitq:0", "rabitq:9",
    ] {
        assert_eq!(Quantization::parse(bad), None, "{bad}");
    }
}

#[test]
fn damaged_pq_binary_and_rabitq_codes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data();
    for q in [
        Quantization::Pq { m: 4 },
        Quantization::Binary,
        Quantization::Rabitq { bits: 4 },
    ] {
        let out = build(
            dir.path(),
            &q.name().replace(':', ""),
            &base[..800 * DIM],
            Metric::Cosine,
            q,
        );
        let codes = out.join("codes.bin");
        let mut b = std::fs::read(&codes).unwrap();
        b[100] ^= 0xFF;
        std::fs::write(&codes, &b).unwrap();
        let e = Index::open(&out, &LoadOptions::default()).unwrap_err();
        assert!(matches!(e, Error::Checksum { .. }), "{}: {e}", q.name());
        b.truncate(b.len() - 8);
        std::fs::write(&codes, &b).unwrap();
        let no_verify = LoadOptions {
            verify: false,
            ..Default::default()
        };
        let e = Index::open(&out, &no_verify).unwrap_err();
        assert!(e.to_string().contains("codes.bin"), "{}: {e}", q.name());
        // A centroid or mean turned into NaN is refused even without checksums.
        let mut b = std::fs::read(&codes).unwrap();
        b.extend_from_slice(&[0; 8]);
        b[64..68].copy_from_slice(&f32::NAN.to_le_bytes());
        std::fs::write(&codes, &b).unwrap();
        let e = Index::open(&out, &no_verify).unwrap_err();
        assert!(e.to_string().contains("codes.bin"), "{}: {e}", q.name());
    }
}

/// RaBitQ codes name their rotation in header field 5 (bytes 48..56): an unknown kind, or a
/// structured rotation whose signs are not +-1, is refused with an error naming it.
#[test]
fn rabitq_codes_with_a_bad_rotation_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data();
    let out = build(
        dir.path(),
        "rabitq4",
        &base[..800 * DIM],
        Metric::Cosine,
        Quantization::Rabitq { bits: 4 },
    );
    let codes = out.join("codes.bin");
    let good = std::fs::read(&codes).unwrap();
    assert_eq!(u64::from_le_bytes(good[48..56].try_into().unwrap()), 1);
    let no_verify = LoadOptions {
        verify: false,
        ..Default::default()
    };
    let mut b = good.clone();
    b[48..56].copy_from_slice(&7u64.to_le_bytes());
    std::fs::write(&codes, &b).unwrap();
    let e = Index::open(&out, &no_verify).unwrap_err().to_string();
    assert!(
        e.contains("codes.bin") && e.contains("rotation kind 7"),
        "{e}"
    );
    // The first sign follows the header and the centre (DIM f32).
    let mut b = good;
    let at = 64 + 4 * DIM;
    b[at..at + 4].copy_from_slice(&0.5f32.to_le_bytes());
    std::fs::write(&codes, &b).unwrap();
    let e = Index::open(&out, &no_verify).unwrap_err().to_string();
    assert!(
        e.contains("codes.bin") && e.contains("signs must be 1 or -1"),
        "{e}"
    );
}

fn build_ivf(dir: &Path, name: &str, base: &[f32], metric: Metric, nlist: usize) -> PathBuf {
    let out = dir.join(name);
    let cfg = BuildConfig {
        kind: IndexKind::IvfPq,
        metric,
        quantization: Quantization::Pq { m: 8 },
        nlist,
        threads: 2,
        ..Default::default()
    };
    build_index(&out, base, DIM, &cfg, &|_, _| {}).unwrap();
    out
}

#[test]
fn ivfpq_recall_grows_with_nprobe_and_rescoring_makes_it_exact() {
    let dir = tempfile::tempdir().unwrap();
    let (base, queries) = data();
    for metric in [Metric::Cosine, Metric::L2, Metric::InnerProduct] {
        let out = build_ivf(dir.path(), &format!("ivf-{metric:?}"), &base, metric, 32);
        let idx = Index::open(&out, &LoadOptions::default()).unwrap();
        assert_eq!(idx.info().kind, IndexKind::IvfPq);
        assert_eq!(idx.info().params["nlist"], 32);
        let few = recall(&idx, &idx, &queries, 1, None);
        let half = recall(&idx, &idx, &queries, 16, None);
        let all = recall(&idx, &idx, &queries, 32, Some(50.0));
        assert!(
            few <= half + 0.01,
            "{metric:?}: nprobe 1 {few:.3} > nprobe 16 {half:.3}"
        );
        assert!(half >= 0.9, "{metric:?}: nprobe 16 recall@10 {half:.3}");
        // Every list probed and 500 candidates of 3000 rescored: essentially exact.
        assert!(all >= 0.99, "{metric:?}: nprobe all recall@10 {all:.3}");
    }
    // Same answers whatever the placement; codes alone still answer.
    let out = build_ivf(dir.path(), "ivf-place", &base, Metric::Cosine, 0);
    let a = Index::open(&out, &LoadOptions::default()).unwrap();
    let b = Index::open(
        &out,
        &LoadOptions::with_parts(
            VectorPlacement::Disk,
            Some(Placement::Ram),
            Some(Placement::Ram),
        ),
    )
    .unwrap();
    for q in queries.chunks_exact(DIM).take(20) {
        let p = SearchParams::new(10, 8);
        assert_eq!(a.search(q, &p).unwrap(), b.search(q, &p).unwrap());
    }
    let c = Index::open(
        &out,
        &LoadOptions::with_parts(VectorPlacement::None, None, None),
    )
    .unwrap();
    let r = recall(&c, &a, &queries, 8, None);
    assert!(r > 0.5, "ivfpq codes alone: {r:.3}");
    // A filter is honoured: no hit outside it.
    let even = |i: u32| i.is_multiple_of(2);
    let mut p = SearchParams::new(10, 8);
    p.filter = Some(&even);
    for q in queries.chunks_exact(DIM).take(10) {
        assert!(a
            .search(q, &p)
            .unwrap()
            .iter()
            .all(|h| h.id.is_multiple_of(2)));
    }
}

#[test]
fn ivfpq_bad_input_and_damage_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _) = data();
    let bad = [
        (Quantization::None, 0, "--quantization pq:M"),
        (Quantization::Sq8, 0, "--quantization pq:M"),
        (Quantization::Pq { m: 8 }, 5000, "nlist"),
    ];
    for (i, (q, nlist, needle)) in bad.into_iter().enumerate() {
        let out = dir.path().join(format!("bad-{i}"));
        let cfg = BuildConfig {
            kind: IndexKind::IvfPq,
            quantization: q,
            nlist,
            ..Default::default()
        };
        let e = build_index(&out, &base, DIM, &cfg, &|_, _| {}).unwrap_err();
        assert!(e.to_string().contains(needle), "{e}");
        assert!(!out.exists());
    }
    let out = build_ivf(dir.path(), "ivf", &base[..1000 * DIM], Metric::Cosine, 16);
    let e = quantize_index(&out, &dir.path().join("q"), Quantization::Sq8, false).unwrap_err();
    assert!(e.to_string().contains("ivfpq"), "{e}");
    let ivf = out.join("ivf.bin");
    let mut b = std::fs::read(&ivf).unwrap();
    // The first list offset (after 16 x 32 centroids) must be 0: make it 7.
    let at = 64 + 4 * 16 * DIM;
    b[at] = 7;
    std::fs::write(&ivf, &b).unwrap();
    let e = Index::open(&out, &LoadOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Checksum { .. }), "{e}");
    let no_verify = LoadOptions {
        verify: false,
        ..Default::default()
    };
    let e = Index::open(&out, &no_verify).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}
