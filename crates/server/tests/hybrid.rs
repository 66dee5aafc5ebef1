//! Lexical, hybrid and rerank through HTTP, on a seeded collection of 400 documents:
//! hybrid replies must equal RRF / weighted fusion of the server's own dense and lexical
//! replies (fused here, independently of the server's code), rerank must reorder the
//! window by the cross-encoder's scores, and every bad input is a clear 400 (or 504 for a
//! rerank past the deadline), never a 500.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{client, TestServer};
use rand::{RngExt, SeedableRng};
use searchd_collection::embed::{Embedded, TextEmbedder, TextKind};
use searchd_collection::ingest::{ingest, IngestConfig};
use searchd_collection::{Analyzer, LexicalConfig, ModelRecord};
use searchd_server::{IndexSource, ServerConfig, TextRerank};
use serde_json::{json, Value};

const DIM: usize = 16;
const WORDS: [&str; 24] = [
    "tide", "moon", "river", "stone", "salt", "ember", "cedar", "frost", "harbor", "glass", "dune",
    "wind", "lights", "rain", "storm", "field", "bell", "tower", "green", "night", "ship", "sail",
    "anchor", "shore",
];

fn hash_vec(text: &str) -> Vec<f32> {
    let mut v = vec![0.02f32; DIM];
    for w in text.split_whitespace() {
        let h = w.bytes().fold(1469598103934665603u64, |h, b| {
            (h ^ b as u64).wrapping_mul(1099511628211)
        });
        v[(h % DIM as u64) as usize] += 1.0;
        v[((h >> 20) % DIM as u64) as usize] += 0.5;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

struct Hash;
fn record() -> ModelRecord {
    ModelRecord {
        name: "hash".into(),
        checksum: "cc".into(),
        dim: DIM,
        max_length: 64,
        pooling: "mean".into(),
        normalize: true,
        query_prefix: None,
        passage_prefix: None,
    }
}
impl TextEmbedder for Hash {
    fn record(&self) -> ModelRecord {
        record()
    }
    fn embed(&self, texts: &[&str], _kind: TextKind) -> Result<Embedded, String> {
        Ok(Embedded {
            vectors: texts.iter().flat_map(|t| hash_vec(t)).collect(),
            truncated: vec![false; texts.len()],
        })
    }
}

/// A stand-in cross-encoder with a known answer: the number of distinct query words in
/// the passage, minus a hundredth per passage word (the real model's stage is checked
/// against a reference forward pass in searchd-embed's tests).
struct Overlap {
    calls: AtomicUsize,
    delay: Duration,
}
fn overlap(query: &str, passage: &str) -> f32 {
    let q: std::collections::HashSet<&str> = query.split_whitespace().collect();
    let words: Vec<&str> = passage.split_whitespace().collect();
    let p: std::collections::HashSet<&str> = words.iter().copied().collect();
    q.intersection(&p).count() as f32 - 0.01 * words.len() as f32
}
impl TextRerank for Overlap {
    fn info(&self) -> Value {
        json!({"name": "overlap"})
    }
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        Ok(passages.iter().map(|p| overlap(query, p)).collect())
    }
}

fn texts() -> Vec<String> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    (0..400)
        .map(|_| {
            let n = rng.random_range(3..12);
            (0..n)
                .map(|_| {
                    // Zipf-ish: low indexes far more often.
                    let r: f64 = rng.random();
                    WORDS[((r * r * r) * WORDS.len() as f64) as usize % WORDS.len()]
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn make(dir: &std::path::Path, analyzer: Analyzer) -> std::path::PathBuf {
    let docs = dir.join(format!("docs-{analyzer}.jsonl"));
    let mut f = std::fs::File::create(&docs).unwrap();
    for (i, t) in texts().iter().enumerate() {
        writeln!(f, "{}", json!({"id": format!("d{i}"), "text": t, "n": i})).unwrap();
    }
    drop(f);
    let out = dir.join(format!("c-{analyzer}"));
    let mut c = IngestConfig::new(&docs, &out);
    c.build.threads = 1;
    c.build.kind = searchd_engine::IndexKind::Flat;
    c.lexical = Some(LexicalConfig {
        analyzer,
        ..Default::default()
    });
    ingest(&c, Some(&Hash), &|_| {}).unwrap();
    out
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    let r = client().post(url).json(&body).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap())
}

fn ids(v: &Value) -> Vec<String> {
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

fn scores(v: &Value) -> Vec<f64> {
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect()
}

/// RRF over id lists, written here from the definition (1-based ranks).
fn rrf(lists: &[Vec<String>], c: f64) -> HashMap<String, f64> {
    let mut s = HashMap::new();
    for l in lists {
        for (i, id) in l.iter().enumerate() {
            *s.entry(id.clone()).or_insert(0.0) += 1.0 / (c + (i + 1) as f64);
        }
    }
    s
}

fn server(coll: std::path::PathBuf, rerank: Option<Arc<dyn TextRerank>>) -> ServerConfig {
    let mut c = ServerConfig::new(IndexSource::Path(coll));
    c.threads = 2;
    c.embedder = Some(Arc::new(Hash));
    c.reranker = rerank;
    c.timeout = Duration::from_millis(500);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_equals_fusion_of_dense_and_lexical() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(server(make(dir.path(), Analyzer::Standard), None)).await;
    let u = format!("{}/search", s.url);
    let queries = [
        "tide moon",
        "salt harbor glass",
        "anchor",
        "storm night ship",
        "river",
    ];
    for q in queries {
        let window = 30;
        let (st, d) = post(&u, json!({"text": q, "mode": "dense", "k": window})).await;
        assert_eq!(st, 200, "{d}");
        let (st, l) = post(&u, json!({"text": q, "mode": "lexical", "k": window})).await;
        assert_eq!(st, 200, "{l}");
        assert_eq!(l["mode"], json!("lexical"));
        assert!(!ids(&l).is_empty(), "{q}: lexical found nothing");
        // Lexical hits all contain a query word, best first.
        let sc = scores(&l);
        assert!(sc.windows(2).all(|w| w[0] >= w[1]), "{sc:?}");
        // RRF, k=60 and k=5, window 30, top 10.
        for c in [60u32, 5] {
            let (st, h) = post(
                &u,
                json!({"text": q, "mode": "hybrid", "k": 10,
                       "fusion": {"method": "rrf", "k": c, "window": window}}),
            )
            .await;
            assert_eq!(st, 200, "{h}");
            let want = rrf(&[ids(&d), ids(&l)], c as f64);
            let got = ids(&h);
            assert_eq!(got.len(), 10.min(want.len()));
            for (id, score) in got.iter().zip(scores(&h)) {
                assert!(
                    (want[id] - score).abs() < 1e-6,
                    "{q}: {id} scored {score}, RRF gives {}",
                    want[id]
                );
            }
            // Descending, and nothing left out scores higher than the last one returned.
            let last = *scores(&h).last().unwrap();
            let better_missing = want
                .iter()
                .filter(|(id, s)| !got.contains(id) && **s > last + 1e-6)
                .count();
            assert_eq!(
                better_missing, 0,
                "{q}: a better fused document was left out"
            );
            assert!(h["timings_us"]["fuse"].as_u64().is_some());
            assert_eq!(h["mode"], json!("hybrid"));
        }
        // Weighted with all weight on one side reproduces that side.
        let (_, h) = post(
            &u,
            json!({"text": q, "mode": "hybrid", "k": 10,
                   "fusion": {"method": "weighted", "weights": {"dense": 1, "lexical": 0}, "window": window}}),
        )
        .await;
        let dense10: Vec<String> = ids(&d).into_iter().take(10).collect();
        assert_eq!(ids(&h), dense10, "{q}: weighted dense=1 must equal dense");
        // Min-max weighted: check the scores against the definition.
        let (_, h) = post(
            &u,
            json!({"text": q, "mode": "hybrid", "k": 10,
                   "fusion": {"method": "weighted", "weights": {"dense": 0.3, "lexical": 0.7}, "normalize": "minmax", "window": window}}),
        )
        .await;
        let norm = |v: &Value| -> HashMap<String, f64> {
            let sc = scores(v);
            let (lo, hi) = sc
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
            ids(v)
                .into_iter()
                .zip(sc)
                .map(|(id, x)| (id, if hi > lo { (x - lo) / (hi - lo) } else { 1.0 }))
                .collect()
        };
        let (nd, nl) = (norm(&d), norm(&l));
        for (id, score) in ids(&h).iter().zip(scores(&h)) {
            let want =
                0.3 * nd.get(id).copied().unwrap_or(0.0) + 0.7 * nl.get(id).copied().unwrap_or(0.0);
            assert!((want - score).abs() < 1e-4, "{q}: {id} {score} vs {want}");
        }
    }
    // Per-stage figures in /stats and /metrics.
    let st: Value = client()
        .get(format!("{}/stats", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for stage in ["embed", "dense", "lexical", "fuse"] {
        assert!(
            st["stages"][stage]["count"].as_u64().unwrap() > 0,
            "{stage}: {}",
            st["stages"]
        );
    }
    assert_eq!(st["stages"]["rerank"]["count"], json!(0));
    let m = client()
        .get(format!("{}/metrics", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains("searchd_search_stage_duration_seconds_count{stage=\"lexical\"}"),
        "{m}"
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerank_reorders_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(Overlap {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let s = TestServer::start(server(
        make(dir.path(), Analyzer::Standard),
        Some(model.clone()),
    ))
    .await;
    let u = format!("{}/search", s.url);
    let all = texts();
    let mut pairs = 0;
    for q in ["tide moon salt", "harbor glass", "storm ship anchor"] {
        for mode in ["dense", "lexical", "hybrid"] {
            let (_, base) = post(
                &u,
                json!({"text": q, "mode": mode, "k": 20, "fields": true}),
            )
            .await;
            let (st, r) = post(
                &u,
                json!({"text": q, "mode": mode, "k": 5, "rerank": {"top": 20}, "fields": ["n"]}),
            )
            .await;
            assert_eq!(st, 200, "{r}");
            // The expected order: the base's top 20 sorted by the model's score (stable).
            pairs += ids(&base).len();
            let mut want: Vec<(usize, String, f32)> = ids(&base)
                .into_iter()
                .enumerate()
                .map(|(i, id)| {
                    let n: usize = id[1..].parse().unwrap();
                    (i, id, overlap(q, &all[n]))
                })
                .collect();
            want.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
            let want_ids: Vec<String> = want.iter().take(5).map(|w| w.1.clone()).collect();
            assert_eq!(ids(&r), want_ids, "{q} {mode}");
            for (h, w) in r["hits"].as_array().unwrap().iter().zip(&want) {
                assert!((h["score"].as_f64().unwrap() - w.2 as f64).abs() < 1e-6);
                // Only the asked fields come back, though the text was read.
                let n: usize = w.1[1..].parse().unwrap();
                assert_eq!(h["fields"], json!({"n": n}));
            }
            assert!(r["timings_us"]["rerank"].as_u64().is_some());
        }
    }
    // fields false: no fields at all.
    let (_, r) = post(&u, json!({"text": "tide", "k": 3, "rerank": {"top": 10}})).await;
    assert!(r["hits"][0].get("fields").is_none(), "{r}");
    let calls = model.calls.load(Ordering::SeqCst);
    assert_eq!(calls, 10);
    // Bad rerank requests.
    for (body, want) in [
        (
            json!({"text": "tide", "rerank": {"top": 201}}),
            "between 1 and 200",
        ),
        (
            json!({"text": "tide", "rerank": {"top": 0}}),
            "between 1 and 200",
        ),
        (
            json!({"text": "tide", "k": 10, "rerank": {"top": 5}}),
            "at least k",
        ),
        (json!({"text": "tide", "rerank": {}}), "top"),
        (
            json!({"text": "tide", "rerank": {"top": 5, "model": "x"}}),
            "unknown key",
        ),
        (json!({"text": "tide", "rerank": 3}), "object"),
        (
            json!({"vector": hash_vec("tide"), "rerank": {"top": 10}}),
            "text",
        ),
    ] {
        let (st, v) = post(&u, body.clone()).await;
        assert_eq!(st, 400, "{body}: {v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains(want), "{body}: {m:?} should mention {want:?}");
    }
    assert_eq!(
        model.calls.load(Ordering::SeqCst),
        calls,
        "refused requests are not scored"
    );
    let st: Value = client()
        .get(format!("{}/stats", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(st["stages"]["rerank"]["count"], json!(10));
    assert_eq!(st["reranker"]["pairs"], json!(pairs + 10));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerank_without_a_model_and_past_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let coll = make(dir.path(), Analyzer::Standard);
    let s = TestServer::start(server(coll.clone(), None)).await;
    let (st, v) = post(
        &format!("{}/search", s.url),
        json!({"text": "tide", "rerank": {"top": 10}}),
    )
    .await;
    assert_eq!(st, 400);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--rerank-model"));
    s.stop().await.unwrap();

    // A cross-encoder slower than the deadline: 504, and requests queued behind it are
    // not started after their deadline.
    let slow = Arc::new(Overlap {
        calls: AtomicUsize::new(0),
        delay: Duration::from_millis(700),
    });
    let s = TestServer::start(server(coll, Some(slow.clone()))).await;
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let url = format!("{}/search", s.url);
        tasks.push(tokio::spawn(async move {
            post(&url, json!({"text": "tide", "rerank": {"top": 10}})).await
        }));
    }
    for t in tasks {
        let (st, v) = t.await.unwrap();
        assert!(st == 504 || st == 200, "{st} {v}");
        if st == 504 {
            assert_eq!(v["error"]["code"], json!("deadline_exceeded"));
        }
    }
    assert!(
        slow.calls.load(Ordering::SeqCst) <= 1,
        "only one rerank can start within a 500 ms deadline when each takes 700 ms"
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lexical_bad_and_edge_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(server(make(dir.path(), Analyzer::English), None)).await;
    let u = format!("{}/search", s.url);
    // Only stop words: an empty result, not an error.
    let (st, v) = post(&u, json!({"text": "the and of", "mode": "lexical"})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["hits"], json!([]));
    // Hybrid with a stop-word-only text: the dense side alone.
    let (st, v) = post(&u, json!({"text": "the and of", "mode": "hybrid", "k": 3})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(ids(&v).len(), 3);
    // English stemming: "storms" finds documents with "storm".
    let (_, v) = post(&u, json!({"text": "storms", "mode": "lexical", "k": 3})).await;
    assert_eq!(ids(&v).len(), 3, "{v}");
    // A 100k-character text: answered, cut to the documented limits, and said so.
    let long = "tide ".repeat(20_000);
    let (st, v) = post(&u, json!({"text": long, "mode": "hybrid"})).await;
    assert_eq!(st, 200, "{v}");
    let w = v["warnings"].to_string();
    assert!(w.contains("8192") && w.contains("4096"), "{w}");
    let many: String = (0..5000).map(|i| format!("w{i} ")).collect();
    let (st, v) = post(&u, json!({"text": many, "mode": "lexical"})).await;
    assert_eq!(st, 200, "{v}");
    assert!(
        v["warnings"].to_string().contains("256 distinct terms"),
        "{v}"
    );
    for (body, want) in [
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": {"method": "borda"}}),
            "unknown fusion method",
        ),
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": {"method": "weighted", "weights": {"dense": -1, "lexical": 1}}}),
            ">= 0",
        ),
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": {"method": "weighted", "weights": {"dense": 0, "lexical": 0}}}),
            "both 0",
        ),
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": {"method": "weighted", "weights": {"dense": 1, "bm25": 1}}}),
            "unknown key",
        ),
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": {"method": "weighted", "normalize": "l2"}}),
            "minmax",
        ),
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": {"method": "rrf", "k": 0}}),
            "between 1",
        ),
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": {"method": "rrf", "weights": {}}}),
            "weighted",
        ),
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": {"window": 5000}}),
            "between 1 and 1000",
        ),
        (
            json!({"text": "tide", "mode": "hybrid", "fusion": "rrf"}),
            "object",
        ),
        (
            json!({"text": "tide", "mode": "lexical", "fusion": {"method": "rrf"}}),
            "only",
        ),
        (
            json!({"vector": hash_vec("tide"), "mode": "lexical"}),
            "give \"text\"",
        ),
        (json!({"id": "d1", "mode": "hybrid"}), "give \"text\""),
    ] {
        let (st, v) = post(&u, body.clone()).await;
        assert_eq!(st, 400, "{body}: {v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains(want), "{body}: {m:?} should mention {want:?}");
    }
    s.stop().await.unwrap();
}

fn es_ids(v: &Value) -> Vec<String> {
    v["hits"]["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits.hits in {v}"))
        .iter()
        .map(|h| h["_id"].as_str().unwrap().to_string())
        .collect()
}

fn es_scores(v: &Value) -> Vec<f64> {
    v["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_score"].as_f64().unwrap())
        .collect()
}

/// The Elasticsearch-shaped `_search` scored searches answer as the native ones: a `match`
/// on the text field is the native lexical search (ids and BM25 scores), `knn` (the query's
/// vector) with a `match` fused by `rank.rrf` is the native hybrid search of the same text
/// with the same RRF constant and window, and `from`/`size` page within `knn.k`. (The
/// redesign of issue "One request path" moves both routes onto one pipeline; this pins what
/// they answer today.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elasticsearch_match_and_knn_rrf_equal_the_native_searches() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = server(make(dir.path(), Analyzer::Standard), None);
    cfg.name = Some("c".into());
    let s = TestServer::start(cfg).await;
    let native = format!("{}/search", s.url);
    let es = format!("{}/c/_search", s.url);
    for q in [
        "tide moon",
        "salt harbor glass",
        "anchor",
        "storm night ship",
    ] {
        // match alone = lexical.
        let (st, l) = post(&native, json!({"text": q, "mode": "lexical", "k": 10})).await;
        assert_eq!(st, 200, "{l}");
        let (st, e) = post(
            &es,
            json!({"query": {"match": {"text": q}}, "size": 10, "_source": false}),
        )
        .await;
        assert_eq!(st, 200, "{e}");
        assert!(!es_ids(&e).is_empty(), "{q}: match found nothing");
        assert_eq!(es_ids(&e), ids(&l), "{q}: match vs lexical ids");
        for (a, b) in es_scores(&e).iter().zip(scores(&l)) {
            assert!((a - b).abs() < 1e-6, "{q}: match score {a} vs lexical {b}");
        }
        // knn + match + rank.rrf = hybrid RRF of the same text (the embedder gives the
        // query vector the native route would compute).
        for (c, window) in [(60u32, 30usize), (5, 50)] {
            let (st, h) = post(
                &native,
                json!({"text": q, "mode": "hybrid", "k": 10,
                       "fusion": {"method": "rrf", "k": c, "window": window}}),
            )
            .await;
            assert_eq!(st, 200, "{h}");
            let fused = |from: usize, size: usize| {
                json!({"knn": {"field": "vector", "query_vector": hash_vec(q), "k": 10,
                               "num_candidates": 100},
                       "query": {"match": {"text": q}},
                       "rank": {"rrf": {"rank_constant": c, "rank_window_size": window}},
                       "from": from, "size": size, "_source": false})
            };
            let (st, e) = post(&es, fused(0, 10)).await;
            assert_eq!(st, 200, "{e}");
            assert_eq!(es_ids(&e), ids(&h), "{q}: knn+match rrf vs hybrid ids");
            for (a, b) in es_scores(&e).iter().zip(scores(&h)) {
                assert!((a - b).abs() < 1e-6, "{q}: rrf score {a} vs hybrid {b}");
            }
            // from/size page within the k fused hits.
            let (st, p) = post(&es, fused(3, 4)).await;
            assert_eq!(st, 200, "{p}");
            let all = ids(&h);
            assert_eq!(es_ids(&p), all[3.min(all.len())..7.min(all.len())].to_vec());
        }
    }
    // knn and match without rank.rrf: refused with a message that says how to fuse them.
    let (st, e) = post(
        &es,
        json!({"knn": {"field": "vector", "query_vector": hash_vec("tide"), "k": 5},
               "query": {"match": {"text": "tide"}}}),
    )
    .await;
    assert_eq!(st, 400, "{e}");
    assert!(e.to_string().contains("rank"), "{e}");
    s.stop().await.unwrap();
}

/// One pipeline behind both search routes (issue "One request path"): a common option
/// (`explain`, `rerank`) given to `POST /search` and to `POST /{name}/_search` is acted on
/// the same way, and Elasticsearch searches count in the stage histograms of `/stats`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_rerank_work_alike_through_the_native_and_elasticsearch_routes() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(Overlap {
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
    });
    let mut cfg = server(make(dir.path(), Analyzer::Standard), Some(model));
    cfg.name = Some("c".into());
    let s = TestServer::start(cfg).await;
    let native = format!("{}/search", s.url);
    let es = format!("{}/c/_search", s.url);
    let stats = || async { common::get_json(&client(), &format!("{}/stats", s.url)).await };
    let count = |st: &Value, stage: &str| st["stages"][stage]["count"].as_u64().unwrap_or(0);
    let q = "tide moon salt";

    // explain: the same object, with the same keys and plan, on both routes.
    let (st, n) = post(
        &native,
        json!({"text": q, "mode": "lexical", "k": 5, "explain": true}),
    )
    .await;
    assert_eq!(st, 200, "{n}");
    let (st, e) = post(
        &es,
        json!({"query": {"match": {"text": q}}, "size": 5, "_source": false, "explain": true}),
    )
    .await;
    assert_eq!(st, 200, "{e}");
    assert_eq!(es_ids(&e), ids(&n));
    for x in [&n["explain"], &e["explain"]] {
        assert_eq!(x["mode"], "lexical", "{x}");
        assert_eq!(x["k"], 5, "{x}");
        for stage in ["embed", "search", "dense", "lexical", "fuse", "rerank"] {
            assert!(x["stages_us"][stage].is_u64(), "{stage}: {x}");
        }
        assert!(x["segments"].is_array(), "{x}");
    }
    // A filtered dense search explains its plan and how many documents passed.
    let filter = json!({"range": {"n": {"lt": 40}}});
    let (st, n) = post(
        &native,
        json!({"vector": hash_vec(q), "k": 5, "filter": filter, "explain": true}),
    )
    .await;
    assert_eq!(st, 200, "{n}");
    let (st, e) = post(
        &es,
        json!({"knn": {"field": "vector", "query_vector": hash_vec(q), "k": 5, "filter": filter},
               "size": 5, "_source": false, "explain": true}),
    )
    .await;
    assert_eq!(st, 200, "{e}");
    assert_eq!(es_ids(&e), ids(&n));
    for x in [&n["explain"], &e["explain"]] {
        assert_eq!(x["mode"], "dense", "{x}");
        assert_eq!(x["matched"], 40, "{x}");
        assert!(x["plan"].is_string(), "{x}");
        // One segment (an ingested collection): it offered the 5 hits, with the plan.
        let segs = x["segments"].as_array().unwrap();
        assert_eq!(segs.len(), 1, "{x}");
        assert!(segs[0]["id"].as_str().unwrap().starts_with("seg-"), "{x}");
        assert_eq!(segs[0]["candidates"], 5, "{x}");
        assert_eq!(segs[0]["plan"], x["plan"], "{x}");
    }
    assert_eq!(n["explain"]["plan"], e["explain"]["plan"]);
    // Without explain (or explain false), neither reply has it; a non-boolean is a 400.
    let (_, n) = post(&native, json!({"text": q, "k": 5, "explain": false})).await;
    assert!(n.get("explain").is_none(), "{n}");
    let (_, e) = post(&es, json!({"query": {"match": {"text": q}}})).await;
    assert!(e.get("explain").is_none(), "{e}");
    for url in [&native, &es] {
        let body = if url == &native {
            json!({"text": q, "explain": "yes"})
        } else {
            json!({"query": {"match": {"text": q}}, "explain": "yes"})
        };
        let (st, v) = post(url, body).await;
        assert_eq!(st, 400, "{v}");
        assert!(
            v.to_string().contains("explain must be true or false"),
            "{v}"
        );
    }

    // rerank: the same hits and scores through both routes; ES searches count in /stats.
    let before = stats().await;
    let (st, n) = post(
        &native,
        json!({"text": q, "mode": "lexical", "k": 5, "rerank": {"top": 20}}),
    )
    .await;
    assert_eq!(st, 200, "{n}");
    let (st, e) = post(
        &es,
        json!({"query": {"match": {"text": q}}, "size": 5, "_source": false,
               "rerank": {"top": 20}}),
    )
    .await;
    assert_eq!(st, 200, "{e}");
    assert_eq!(es_ids(&e), ids(&n));
    for (a, b) in es_scores(&e).iter().zip(scores(&n)) {
        assert!((a - b).abs() < 1e-6, "rerank score {a} vs {b}");
    }
    // A rerank window below the page is refused on both routes with one message.
    let (st, v) = post(
        &es,
        json!({"query": {"match": {"text": q}}, "size": 10, "rerank": {"top": 5}}),
    )
    .await;
    assert_eq!(st, 400, "{v}");
    assert!(v.to_string().contains("must be at least k"), "{v}");
    let after = stats().await;
    assert_eq!(count(&after, "rerank"), count(&before, "rerank") + 2);
    assert_eq!(count(&after, "lexical"), count(&before, "lexical") + 2);
    // ES knn alone records a dense stage.
    let (st, _) = post(
        &es,
        json!({"knn": {"field": "vector", "query_vector": hash_vec(q), "k": 3}}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(count(&stats().await, "dense"), count(&after, "dense") + 1);
    s.stop().await.unwrap();
}
