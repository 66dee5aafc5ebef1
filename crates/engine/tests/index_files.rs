//! Index directory round trips, and every corruption case refused with its own error.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use searchd_engine::{
    build_index, exact, BuildConfig, Error, HnswParams, Index, IndexKind, LoadOptions, Metric,
    Placement, SearchError, SearchParams,
};

const DIM: usize = 16;

fn build(dir: &Path, kind: IndexKind, n: usize, threads: usize) -> PathBuf {
    let data = common::clustered(n, DIM, 10, 3);
    let out = dir.join(format!("{}-{n}-{threads}", kind.name()));
    let cfg = BuildConfig {
        kind,
        hnsw: HnswParams {
            m: 8,
            ef_construction: 64,
            seed: 9,
        },
        threads,
        ..Default::default()
    };
    build_index(&out, &data, DIM, &cfg, &|_, _| {}).unwrap();
    out
}

fn no_verify() -> LoadOptions {
    LoadOptions {
        verify: false,
        ..Default::default()
    }
}

fn patch(path: &Path, offset: usize, bytes: &[u8]) {
    let mut b = std::fs::read(path).unwrap();
    b[offset..offset + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, b).unwrap();
}

#[test]
fn round_trip_mmap_and_ram_give_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [IndexKind::Flat, IndexKind::Hnsw] {
        let out = build(dir.path(), kind, 1500, 2);
        assert!(out.join("manifest.json").exists());
        let a = Index::open(&out, &LoadOptions::default()).unwrap();
        let b = Index::open(
            &out,
            &LoadOptions {
                populate: true,
                ..LoadOptions::all(Placement::Ram)
            },
        )
        .unwrap();
        assert_eq!(a.len(), 1500);
        assert_eq!(a.dim(), DIM);
        assert_eq!(a.info().kind, kind);
        let q = a.vector(17).unwrap().to_vec();
        let p = SearchParams::new(10, 32);
        let ha = a.search(&q, &p).unwrap();
        assert_eq!(ha, b.search(&q, &p).unwrap());
        assert_eq!(ha[0].id, 17, "a stored vector finds itself first");
        assert!((ha[0].score - 1.0).abs() < 1e-5);
        assert!(a.vector(1500).is_none());
    }
}

#[test]
fn flat_index_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Flat, 2000, 2);
    let idx = Index::open(&out, &LoadOptions::default()).unwrap();
    let queries = common::clustered(20, DIM, 10, 99);
    let base = common::clustered(2000, DIM, 10, 3);
    let normalized: Vec<f32> = base
        .chunks_exact(DIM)
        .flat_map(|r| idx.prepare_query(r).unwrap())
        .collect();
    let prepared: Vec<f32> = queries
        .chunks_exact(DIM)
        .flat_map(|r| idx.prepare_query(r).unwrap())
        .collect();
    let truth = exact::knn(Metric::Cosine, &normalized, &prepared, DIM, 10, &|_| {});
    for (i, q) in queries.chunks_exact(DIM).enumerate() {
        let hits = idx.search(q, &SearchParams::new(10, 0)).unwrap();
        let ids: Vec<u32> = hits.iter().map(|h| h.id as u32).collect();
        let want: Vec<u32> = truth[i].iter().map(|n| n.id).collect();
        assert_eq!(ids, want);
        let exact_ids: Vec<u32> = idx
            .exact_search(q, 10)
            .unwrap()
            .iter()
            .map(|h| h.id as u32)
            .collect();
        assert_eq!(exact_ids, want);
    }
}

#[test]
fn single_thread_build_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let a = build(&dir.path().join("a"), IndexKind::Hnsw, 1200, 1);
    let b = build(&dir.path().join("b"), IndexKind::Hnsw, 1200, 1);
    assert_eq!(
        std::fs::read(a.join("graph.bin")).unwrap(),
        std::fs::read(b.join("graph.bin")).unwrap()
    );
}

#[test]
fn ef_below_k_is_raised_and_filter_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Hnsw, 1500, 2);
    let idx = Index::open(&out, &LoadOptions::default()).unwrap();
    let q = idx.vector(3).unwrap().to_vec();
    assert_eq!(idx.search(&q, &SearchParams::new(50, 5)).unwrap().len(), 50);
    // Filters see internal ids; allow the internal ids of even external ids.
    let mut allowed = vec![false; idx.len()];
    for ext in (0..idx.len() as u64).step_by(2) {
        allowed[idx.internal(ext).unwrap() as usize] = true;
    }
    let even = |id: u32| allowed[id as usize];
    let p = SearchParams {
        filter: Some(&even),
        ..SearchParams::new(20, 64)
    };
    let hits = idx.search(&q, &p).unwrap();
    assert_eq!(hits.len(), 20);
    assert!(hits.iter().all(|h| h.id % 2 == 0));
}

#[test]
fn bad_queries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Hnsw, 500, 2);
    let idx = Index::open(&out, &LoadOptions::default()).unwrap();
    let p = SearchParams::new(10, 10);
    assert_eq!(
        idx.search(&[1.0; DIM - 1], &p),
        Err(SearchError::Dimension {
            expected: DIM,
            got: DIM - 1
        })
    );
    let mut q = vec![1.0; DIM];
    q[4] = f32::NAN;
    assert_eq!(idx.search(&q, &p), Err(SearchError::NonFinite { index: 4 }));
    assert_eq!(idx.search(&[0.0; DIM], &p), Err(SearchError::ZeroVector));
    assert!(matches!(
        idx.search(&[1.0; DIM], &SearchParams::new(0, 10)),
        Err(SearchError::BadK { .. })
    ));
    assert!(matches!(
        idx.search(&[1.0; DIM], &SearchParams::new(1001, 10)),
        Err(SearchError::BadK { .. })
    ));
}

#[test]
fn passed_deadline_stops_the_search() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [IndexKind::Hnsw, IndexKind::Flat] {
        let out = build(dir.path(), kind, 6000, 2);
        let idx = Index::open(&out, &LoadOptions::default()).unwrap();
        let p = SearchParams {
            deadline: Some(Instant::now() - Duration::from_millis(1)),
            ..SearchParams::new(100, 1000)
        };
        let q = idx.vector(0).unwrap().to_vec();
        assert_eq!(idx.search(&q, &p), Err(SearchError::DeadlineExceeded));
    }
}

#[test]
fn bad_vectors_are_refused_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("idx");
    let mut data = common::clustered(100, DIM, 4, 1);
    data[7 * DIM + 3] = f32::INFINITY;
    let e = build_index(&out, &data, DIM, &BuildConfig::default(), &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("row 7, column 3"), "{e}");
    let mut data = common::clustered(100, DIM, 4, 1);
    data[5 * DIM..6 * DIM].fill(0.0);
    let e = build_index(&out, &data, DIM, &BuildConfig::default(), &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("row 5 is all zeros"), "{e}");
    let e = build_index(
        &out,
        &data[..DIM * 3 + 1],
        DIM,
        &BuildConfig::default(),
        &|_, _| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("whole number"), "{e}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no partial index"
    );
}

#[test]
fn existing_output_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Flat, 100, 1);
    let data = common::clustered(100, DIM, 4, 1);
    let cfg = BuildConfig {
        kind: IndexKind::Flat,
        ..Default::default()
    };
    let e = build_index(&out, &data, DIM, &cfg, &|_, _| {}).unwrap_err();
    assert!(matches!(e, Error::Exists { .. }), "{e}");
    let cfg = BuildConfig { force: true, ..cfg };
    build_index(&out, &data, DIM, &cfg, &|_, _| {}).unwrap();
    Index::open(&out, &LoadOptions::default()).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "old index and temporary directory are gone");
}

#[test]
fn corrupt_payload_fails_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Hnsw, 300, 1);
    patch(&out.join("vectors.bin"), 200, &[0xAB, 0xCD]);
    let e = Index::open(&out, &LoadOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Checksum { .. }), "{e}");
    assert!(e.to_string().contains("vectors.bin"), "{e}");
    // Without verification the payload change is accepted (it is structurally valid).
    Index::open(&out, &no_verify()).unwrap();
}

#[test]
fn truncated_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Hnsw, 300, 1);
    let g = out.join("graph.bin");
    let len = std::fs::metadata(&g).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&g)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let e = Index::open(&out, &no_verify()).unwrap_err();
    assert!(matches!(e, Error::Size { .. }), "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
}

#[test]
fn bad_magic_and_version_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Hnsw, 300, 1);
    patch(&out.join("graph.bin"), 0, b"NOTANIDX");
    let e = Index::open(&out, &no_verify()).unwrap_err();
    assert!(
        matches!(e, Error::Format { .. }) && e.to_string().contains("bad magic"),
        "{e}"
    );

    let out = build(&dir.path().join("v"), IndexKind::Hnsw, 300, 1);
    patch(&out.join("vectors.bin"), 8, &7u32.to_le_bytes());
    let e = Index::open(&out, &no_verify()).unwrap_err();
    assert!(matches!(e, Error::Version { found: 7, .. }), "{e}");

    let m = out.join("manifest.json");
    let text = std::fs::read_to_string(&m).unwrap();
    std::fs::write(
        &m,
        text.replace("\"format_version\": 1", "\"format_version\": 99"),
    )
    .unwrap();
    let e = Index::open(&out, &no_verify()).unwrap_err();
    assert!(matches!(e, Error::Version { found: 99, .. }), "{e}");
}

#[test]
fn damaged_links_are_refused_even_without_verification() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Hnsw, 300, 1);
    // First level-0 link of node 0 (after the 64-byte header and the count word).
    patch(&out.join("graph.bin"), 64 + 4, &u32::MAX.to_le_bytes());
    let e = Index::open(&out, &no_verify()).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}

#[test]
fn missing_or_garbage_manifest_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let e = Index::open(&dir.path().join("nope"), &LoadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("not found"), "{e}");
    let out = build(dir.path(), IndexKind::Flat, 50, 1);
    std::fs::write(out.join("manifest.json"), "{\"hello\": 1}").unwrap();
    let e = Index::open(&out, &LoadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("manifest is not valid"), "{e}");
    std::fs::remove_file(out.join("manifest.json")).unwrap();
    let e = Index::open(&out, &LoadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("manifest.json"), "{e}");
}

#[test]
fn hnsw_ids_are_input_rows_and_id_map_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = build(dir.path(), IndexKind::Hnsw, 800, 1);
    let idx = Index::open(&out, &LoadOptions::default()).unwrap();
    let data = common::clustered(800, DIM, 10, 3);
    for row in [0usize, 1, 399, 799] {
        let q = &data[row * DIM..(row + 1) * DIM];
        let hits = idx.search(q, &SearchParams::new(1, 64)).unwrap();
        assert_eq!(hits[0].id, row as u64, "row {row} finds itself");
        let stored = idx.vector(row as u64).unwrap();
        let want = idx.prepare_query(q).unwrap();
        assert_eq!(stored, &want[..]);
    }
    // Corrupt the inverse map: the index refuses to open even without checksums.
    let len = std::fs::metadata(out.join("ids.bin")).unwrap().len() as usize;
    patch(&out.join("ids.bin"), len - 4, &0u32.to_le_bytes());
    let e = Index::open(&out, &no_verify()).unwrap_err();
    assert!(e.to_string().contains("not a permutation"), "{e}");
}

#[test]
fn sq8_index_round_trip_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = common::clustered(600, DIM, 10, 3);
    let out = dir.path().join("sq8");
    let cfg = BuildConfig {
        kind: IndexKind::Hnsw,
        quantization: searchd_engine::Quantization::Sq8,
        ..Default::default()
    };
    build_index(&out, &data, DIM, &cfg, &|_, _| {}).unwrap();
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["params"]["quantization"]["kind"], "sq8");
    assert!(m["files"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["name"] == "codes.bin"));
    for opts in [LoadOptions::default(), no_verify()] {
        let idx = Index::open(&out, &opts).unwrap();
        let q = &data[..DIM];
        let hits = idx.search(q, &SearchParams::new(5, 32)).unwrap();
        assert_eq!(hits.len(), 5);
        // The query is row 0: rescoring with float32 puts it first with score ~1.
        assert_eq!(hits[0].id, 0);
        assert!((hits[0].score - 1.0).abs() < 1e-5, "{hits:?}");
        let mut p = SearchParams::new(5, 32);
        for bad in [0.5f32, 1000.0, f32::NAN] {
            p.oversample = Some(bad);
            assert!(
                matches!(idx.search(q, &p), Err(SearchError::BadOversample { .. })),
                "oversample {bad}"
            );
        }
        assert!(idx.info().codes_bytes > 0);
        assert_eq!(
            idx.info().bytes,
            idx.info().vector_bytes + idx.info().graph_bytes + idx.info().codes_bytes
        );
    }
    // A damaged codes.bin is refused: checksum with verification, size/header without.
    let codes = out.join("codes.bin");
    patch(&codes, 200, &[0xAB; 8]);
    let e = Index::open(&out, &LoadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("codes.bin"), "{e}");
    let len = std::fs::metadata(&codes).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&codes)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let e = Index::open(&out, &no_verify()).unwrap_err();
    assert!(e.to_string().contains("codes.bin"), "{e}");
    // SQ8 is refused for flat indexes.
    let cfg = BuildConfig {
        kind: IndexKind::Flat,
        quantization: searchd_engine::Quantization::Sq8,
        ..Default::default()
    };
    let e = build_index(&dir.path().join("flat-sq8"), &data, DIM, &cfg, &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("hnsw"), "{e}");
    assert!(!dir.path().join("flat-sq8").exists());
}
