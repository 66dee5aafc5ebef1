//! Index directories written by format version 1 (committed under
//! `tests/fixtures/format-v1/`, one per index kind and code kind) still open and answer as
//! they did when they were written: the same ids, the same scores.
//!
//! The fixtures were written by this file with `SEARCHD_WRITE_FIXTURES=1 cargo test -p
//! searchd-engine --test format_fixture` at the commit that introduced them (a code kind
//! added later, such as `rabitq` and its structured rotation, wrote only its own: existing directories are skipped); they
//! must not be rewritten by a later format change (that is what they guard). A new format version adds
//! its own `format-vN/` beside them.

mod common;

use std::path::{Path, PathBuf};

use searchd_engine::{
    build_index, BuildConfig, HnswParams, Index, IndexKind, LoadOptions, Metric, Quantization,
    SearchParams, VectorPlacement,
};

const N: usize = 600;
const DIM: usize = 16;
const QUERIES: usize = 6;
const K: usize = 10;
const EF: usize = 64;

/// (directory name, kind, metric, codes, IVF lists).
const CASES: &[(&str, IndexKind, Metric, Quantization, usize)] = &[
    (
        "flat-cosine",
        IndexKind::Flat,
        Metric::Cosine,
        Quantization::None,
        0,
    ),
    (
        "hnsw-cosine",
        IndexKind::Hnsw,
        Metric::Cosine,
        Quantization::None,
        0,
    ),
    (
        "hnsw-l2-sq8",
        IndexKind::Hnsw,
        Metric::L2,
        Quantization::Sq8,
        0,
    ),
    (
        "hnsw-ip-pq4",
        IndexKind::Hnsw,
        Metric::InnerProduct,
        Quantization::Pq { m: 4 },
        0,
    ),
    (
        "hnsw-cosine-binary",
        IndexKind::Hnsw,
        Metric::Cosine,
        Quantization::Binary,
        0,
    ),
    (
        "hnsw-l2-rabitq4",
        IndexKind::Hnsw,
        Metric::L2,
        Quantization::Rabitq { bits: 4 },
        0,
    ),
    // Written after the structured rotation replaced the dense one for new RaBitQ codes
    // (`codes.bin` header field 5 = 1): "hnsw-l2-rabitq4" above holds the dense kind.
    (
        "hnsw-cosine-rabitq4-fht",
        IndexKind::Hnsw,
        Metric::Cosine,
        Quantization::Rabitq { bits: 4 },
        0,
    ),
    (
        "ivfpq-l2-pq4",
        IndexKind::IvfPq,
        Metric::L2,
        Quantization::Pq { m: 4 },
        8,
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v1")
}

fn queries() -> Vec<f32> {
    common::clustered(QUERIES, DIM, 5, 7)
}

/// Every query's hits as `[[id, score], ...]`.
fn answers(index: &Index) -> Vec<Vec<(u64, f32)>> {
    queries()
        .chunks_exact(DIM)
        .map(|q| {
            index
                .search(q, &SearchParams::new(K, EF))
                .expect("search")
                .into_iter()
                .map(|h| (h.id, h.score))
                .collect()
        })
        .collect()
}

/// Writes the fixtures that do not exist yet (a new code kind adds its own; existing ones
/// are never rewritten).
fn write_fixtures() {
    let data = common::clustered(N, DIM, 5, 3);
    for &(name, kind, metric, quantization, nlist) in CASES {
        let dir = root().join(name);
        if dir.exists() {
            continue;
        }
        let cfg = BuildConfig {
            kind,
            metric,
            hnsw: HnswParams {
                m: 8,
                ef_construction: 64,
                ..HnswParams::default()
            },
            threads: 1,
            force: true,
            quantization,
            nlist,
            overlap: 0,
            build_on: Default::default(),
        };
        build_index(&dir, &data, DIM, &cfg, &|_, _| {}).expect("build");
        let index = Index::open(&dir, &LoadOptions::default()).expect("open");
        let json = serde_json::to_string_pretty(&answers(&index)).expect("json");
        std::fs::write(root().join(format!("{name}.expected.json")), json + "\n")
            .expect("write expected");
    }
}

fn expected(name: &str) -> Vec<Vec<(u64, f32)>> {
    let path = root().join(format!("{name}.expected.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).expect("expected answers")
}

/// Same scores position by position (within float noise: kernels are picked at run time),
/// and the same ids wherever the score does not tie with a neighbour's.
fn same(name: &str, got: &[Vec<(u64, f32)>], want: &[Vec<(u64, f32)>]) {
    assert_eq!(got.len(), want.len(), "{name}: query count");
    for (qi, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "{name} query {qi}: hit count");
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a.1 - b.1).abs() <= 1e-4 * (1.0 + b.1.abs()),
                "{name} query {qi} hit {i}: score {} was {}",
                a.1,
                b.1
            );
            let tie = |j: usize| w.get(j).is_some_and(|o| (o.1 - b.1).abs() <= 1e-4);
            let tied = (i > 0 && tie(i - 1)) || tie(i + 1);
            assert!(
                a.0 == b.0 || tied,
                "{name} query {qi} hit {i}: id {} was {}",
                a.0,
                b.0
            );
        }
    }
}

#[test]
fn format_v1_indexes_open_and_answer_as_written() {
    if std::env::var_os("SEARCHD_WRITE_FIXTURES").is_some() {
        write_fixtures();
    }
    for &(name, kind, metric, quantization, _) in CASES {
        let dir = root().join(name);
        let mut placements = vec![VectorPlacement::Mmap, VectorPlacement::Ram];
        if quantization != Quantization::None {
            // Rows read with pread when rescoring: quantized indexes only.
            placements.push(VectorPlacement::Disk);
        }
        for vectors in placements {
            let opts = LoadOptions {
                vectors,
                verify: true,
                ..LoadOptions::default()
            };
            let index = Index::open(&dir, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(index.info().kind, kind, "{name}");
            assert_eq!(index.metric(), metric, "{name}");
            assert_eq!((index.len(), index.dim()), (N, DIM), "{name}");
            same(name, &answers(&index), &expected(name));
        }
    }
}
