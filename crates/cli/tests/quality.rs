//! `searchd eval --collection --qrels` (the quality lab) and `ingest --lexical/--analyzer`
//! as real processes: figures checked against hand-computed values, and refusals of bad
//! input with exit status 2.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn searchd(args: &[&str]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("searchd"))
        .args(args)
        .env("SEARCHD_LOG", "warn")
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = searchd(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn refused(args: &[&str], needle: &str) {
    let o = searchd(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn model(test: &str) -> Option<PathBuf> {
    searchd_testkit::needs::model(test)
}

const DOCS: [&str; 5] = [
    "apple banana",
    "cherry",
    "apple apple cherry",
    "the running dogs",
    "a dog runs",
];

fn write(path: &Path, lines: &[serde_json::Value]) {
    let mut f = std::fs::File::create(path).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

fn docs(dir: &Path) -> PathBuf {
    let path = dir.join("docs.jsonl");
    let lines: Vec<_> = DOCS
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut v = vec![0.1f32; 4];
            v[i % 4] = 1.0;
            serde_json::json!({"id": format!("d{i}"), "text": t, "vector": v})
        })
        .collect();
    write(&path, &lines);
    path
}

/// `searchd ingest` of `docs` into `out` with a flat index; returns `out`.
fn ingest_flat(docs: &Path, out: &Path) -> PathBuf {
    ok(&[
        "ingest",
        "--docs",
        p(docs),
        "--out",
        p(out),
        "--vector-field",
        "vector",
        "--index",
        "flat",
    ]);
    out.to_path_buf()
}

#[test]
fn lexical_quality_is_hand_computable() {
    let dir = tempfile::tempdir().unwrap();
    let d = docs(dir.path());
    let coll = ingest_flat(&d, &dir.path().join("coll"));
    let qrels = dir.path().join("q.jsonl");
    write(
        &qrels,
        &[
            // BM25: d1 (1 word) beats d2 (3 words) for "cherry": rank 1.
            serde_json::json!({"qid": 1, "query": "cherry", "relevant": ["d1"]}),
            // The only hit is d0, which is not the relevant one: 0.
            serde_json::json!({"qid": 2, "query": "banana", "relevant": ["d2"]}),
            // No relevant documents: skipped.
            serde_json::json!({"qid": 3, "query": "apple", "relevant": []}),
            // Two relevant, found at ranks 2 and 1 out of 2 hits for "apple": perfect.
            serde_json::json!({"qid": 4, "query": "apple", "relevant": ["d0", "d2"]}),
        ],
    );
    let json = dir.path().join("quality.json");
    let out = ok(&[
        "eval",
        "--collection",
        p(&coll),
        "--qrels",
        p(&qrels),
        "--mode",
        "lexical",
        "--json",
        p(&json),
    ]);
    assert!(out.contains("lexical"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "searchd.quality.v1");
    assert_eq!(v["queries"], 3);
    let row = &v["rows"][0];
    assert_eq!(row["mode"], "lexical");
    let close = |x: &serde_json::Value, want: f64| (x.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(close(&row["ndcg_at_10"], 2.0 / 3.0), "{row}");
    assert!(close(&row["mrr_at_10"], 2.0 / 3.0), "{row}");
    assert!(close(&row["recall_at_100"], 2.0 / 3.0), "{row}");
    let ci = row["ndcg_at_10_ci95"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() <= 2.0 / 3.0 && ci[1].as_f64().unwrap() >= 2.0 / 3.0);
    assert!(row["p50_us"].as_f64().unwrap() > 0.0);
    assert!(row["qps_1thread"].as_f64().unwrap() > 0.0);

    // The English analyzer stems: "dog" finds "dogs" and "dog" ...
    let coll_en = dir.path().join("coll-en");
    ok(&[
        "ingest",
        "--docs",
        p(&d),
        "--out",
        p(&coll_en),
        "--vector-field",
        "vector",
        "--index",
        "flat",
        "--analyzer",
        "english",
    ]);
    let q2 = dir.path().join("q2.jsonl");
    write(
        &q2,
        &[serde_json::json!({"query": "dog", "relevant": ["d3", "d4"]})],
    );
    let json2 = dir.path().join("q2.json");
    ok(&[
        "eval",
        "--collection",
        p(&coll_en),
        "--qrels",
        p(&q2),
        "--mode",
        "lexical",
        "--json",
        p(&json2),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json2).unwrap()).unwrap();
    assert_eq!(v["analyzer"], "english");
    assert!(close(&v["rows"][0]["recall_at_100"], 1.0), "{v}");
    // ... the standard one does not ("dog" matches only "dog").
    ok(&[
        "eval",
        "--collection",
        p(&coll),
        "--qrels",
        p(&q2),
        "--mode",
        "lexical",
        "--json",
        p(&json2),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json2).unwrap()).unwrap();
    assert_eq!(v["analyzer"], "standard");
    assert!(close(&v["rows"][0]["recall_at_100"], 0.5), "{v}");
}

#[test]
fn bad_quality_lab_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = docs(dir.path());
    let coll = ingest_flat(&d, &dir.path().join("coll"));
    let bare = dir.path().join("bare");
    ok(&[
        "ingest",
        "--docs",
        p(&d),
        "--out",
        p(&bare),
        "--vector-field",
        "vector",
        "--index",
        "flat",
        "--no-lexical",
    ]);
    let q = dir.path().join("q.jsonl");
    write(
        &q,
        &[serde_json::json!({"query": "cherry", "relevant": ["d1"]})],
    );
    let c = p(&coll);
    let qq = p(&q);
    refused(
        &["eval", "--collection", c, "--qrels", qq, "--mode", "dense"],
        "--model",
    );
    refused(
        &["eval", "--collection", c, "--qrels", qq, "--mode", "bm42"],
        "unknown mode",
    );
    refused(
        &[
            "eval",
            "--collection",
            c,
            "--qrels",
            qq,
            "--mode",
            "weighted:0:0",
        ],
        "both 0",
    );
    refused(
        &[
            "eval",
            "--collection",
            c,
            "--qrels",
            qq,
            "--mode",
            "rerank:lexical",
        ],
        "--rerank-model",
    );
    refused(
        &[
            "eval",
            "--collection",
            p(&bare),
            "--qrels",
            qq,
            "--mode",
            "lexical",
        ],
        "no lexical index",
    );
    refused(
        &[
            "eval",
            "--collection",
            c,
            "--qrels",
            qq,
            "--mode",
            "lexical",
            "--rerank-top",
            "999",
        ],
        "--rerank-top",
    );
    refused(&["eval", "--collection", c], "--qrels");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"query\": \"x\", \"relevant\": [-1]}\n").unwrap();
    refused(
        &[
            "eval",
            "--collection",
            c,
            "--qrels",
            p(&bad),
            "--mode",
            "lexical",
        ],
        "line 1",
    );
    std::fs::write(&bad, "{\"relevant\": [1]}\n").unwrap();
    refused(
        &[
            "eval",
            "--collection",
            c,
            "--qrels",
            p(&bad),
            "--mode",
            "lexical",
        ],
        "query",
    );
    refused(
        &[
            "eval",
            "--collection",
            c,
            "--qrels",
            p(&dir.path().join("none.jsonl")),
            "--mode",
            "lexical",
        ],
        "none.jsonl",
    );
    refused(
        &[
            "ingest",
            "--docs",
            p(&d),
            "--out",
            p(&dir.path().join("x")),
            "--vector-field",
            "vector",
            "--analyzer",
            "klingon",
        ],
        "--analyzer",
    );
    // The collection without a lexical index says so in its manifest.
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bare.join("collection.json")).unwrap()).unwrap();
    assert!(m["segments"][0].get("lexical").is_none());
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(coll.join("collection.json")).unwrap()).unwrap();
    assert_eq!(m["segments"][0]["lexical"]["analyzer"], "standard");
}

/// Needs the model: dense, lexical, hybrid end to end on real embeddings; an embedding
/// model given as the cross-encoder is refused.
#[test]
fn dense_and_hybrid_quality_with_the_model() {
    let Some(model) = model("dense_and_hybrid_quality_with_the_model") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docs.jsonl");
    let texts = [
        "The tide rises and falls twice a day because of the moon.",
        "A cat is a small domesticated carnivorous mammal.",
        "Bread is baked from flour, water and yeast.",
        "Volcanoes erupt molten rock called lava.",
        "The violin is a string instrument played with a bow.",
    ];
    let lines: Vec<_> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"id": i, "text": t}))
        .collect();
    write(&path, &lines);
    let coll = dir.path().join("coll");
    ok(&[
        "ingest",
        "--docs",
        p(&path),
        "--out",
        p(&coll),
        "--model",
        p(&model),
        "--index",
        "flat",
    ]);
    let q = dir.path().join("q.jsonl");
    write(
        &q,
        &[
            serde_json::json!({"query": "why are there tides", "relevant": [0]}),
            serde_json::json!({"query": "kitten pet animal", "relevant": [1]}),
            serde_json::json!({"query": "how is bread made", "relevant": [2]}),
            serde_json::json!({"query": "lava eruption", "relevant": [3]}),
            serde_json::json!({"query": "fiddle music", "relevant": [4]}),
        ],
    );
    let json = dir.path().join("quality.json");
    ok(&[
        "eval",
        "--collection",
        p(&coll),
        "--qrels",
        p(&q),
        "--model",
        p(&model),
        "--mode",
        "dense,lexical,hybrid,weighted:0.7:0.3",
        "--json",
        p(&json),
        "--bootstrap",
        "200",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let get = |m: &str| rows.iter().find(|r| r["mode"] == m).unwrap().clone();
    // Dense finds every one of these paraphrases first.
    assert_eq!(get("dense")["mrr_at_10"], 1.0, "{v}");
    assert!(get("hybrid")["vs"]["dense"]["ndcg_at_10_delta"].is_number());
    assert_eq!(
        get("weighted:0.7:0.3")["fusion"],
        "weighted(dense=0.7,lexical=0.3,minmax)"
    );
    refused(
        &[
            "eval",
            "--collection",
            p(&coll),
            "--qrels",
            p(&q),
            "--model",
            p(&model),
            "--mode",
            "rerank",
            "--rerank-model",
            p(&model),
        ],
        "--rerank-model",
    );
}

/// `eval --collection` reads a live collection as a server does: the last commit and the
/// write-ahead log after it. A document only in the log (acknowledged, not yet committed:
/// the writer dropped without `close()`) is found; before, `eval` read only the committed
/// segments and scored it as missing (nDCG@10 0 instead of 1).
#[test]
fn eval_reads_the_write_ahead_log_of_a_live_collection() {
    use searchd_collection::live::{Doc, LiveCollection, LiveConfig};
    let dir = tempfile::tempdir().unwrap();
    let d = docs(dir.path());
    let coll = ingest_flat(&d, &dir.path().join("coll"));
    let live = LiveCollection::open(
        &coll,
        &searchd_engine::LoadOptions::default(),
        LiveConfig {
            background: false,
            ..LiveConfig::default()
        },
    )
    .unwrap();
    live.upsert(
        vec![Doc {
            id: searchd_collection::DocId::Str("d9".into()),
            vector: vec![0.5; 4],
            text: Some("zucchini".into()),
            source: serde_json::to_vec(&serde_json::json!({"text": "zucchini"})).unwrap(),
        }],
        false,
    )
    .unwrap();
    drop(live);
    let qrels = dir.path().join("q.jsonl");
    write(
        &qrels,
        &[serde_json::json!({"qid": 1, "query": "zucchini", "relevant": ["d9"]})],
    );
    let json = dir.path().join("quality.json");
    ok(&[
        "eval",
        "--collection",
        p(&coll),
        "--qrels",
        p(&qrels),
        "--mode",
        "lexical",
        "--json",
        p(&json),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["docs"], 6, "{v}");
    assert_eq!(v["rows"][0]["ndcg_at_10"], 1.0, "{v}");
}
