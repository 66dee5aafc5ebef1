//! Collections through HTTP: text queries (with an in-test embedder), documents by id,
//! stored fields, several collections in one server, a second backend implementation
//! behind the same routes, and the model check.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{client, get_json, split, TestServer};
use searchd_collection::embed::{Embedded, TextEmbedder, TextKind};
use searchd_collection::ingest::{ingest, IngestConfig};
use searchd_collection::{DocId, ModelRecord};
use searchd_server::{
    BackendError, BoxFuture, Document, FieldsWanted, IndexSource, QueryInput, ScoredDoc,
    SearchBackend, SearchOutput, SearchRequest, ServerConfig,
};
use serde_json::{json, Value};

const DIM: usize = 8;

fn hash_vec(text: &str) -> Vec<f32> {
    let mut v = vec![0.05f32; DIM];
    for w in text.split_whitespace() {
        let h = w.bytes().fold(1469598103934665603u64, |h, b| {
            (h ^ b as u64).wrapping_mul(1099511628211)
        });
        v[(h % DIM as u64) as usize] += 1.0;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn record(checksum: &str) -> ModelRecord {
    ModelRecord {
        name: "hash".into(),
        checksum: checksum.into(),
        dim: DIM,
        max_length: 4,
        pooling: "mean".into(),
        normalize: true,
        query_prefix: None,
        passage_prefix: None,
    }
}

/// Hash "model"; texts of more than 6 words count as truncated. With `prefixed`, it
/// prefixes queries with "query:" and passages with "passage:" (as instruction-tuned models
/// do), so a passage and a query of the same text get different vectors.
struct Hash {
    checksum: &'static str,
    /// Query batches embedded.
    batches: AtomicUsize,
    /// Passage batches embedded (ingest and live upserts).
    passage_batches: AtomicUsize,
    prefixed: bool,
}

fn hash(checksum: &'static str) -> Hash {
    Hash {
        checksum,
        batches: AtomicUsize::new(0),
        passage_batches: AtomicUsize::new(0),
        prefixed: false,
    }
}

impl TextEmbedder for Hash {
    fn record(&self) -> ModelRecord {
        let mut r = record(self.checksum);
        if self.prefixed {
            r.query_prefix = Some("query: ".into());
            r.passage_prefix = Some("passage: ".into());
        }
        r
    }
    fn embed(&self, texts: &[&str], kind: TextKind) -> Result<Embedded, String> {
        let prefix = match (self.prefixed, kind) {
            (false, _) => "",
            (true, TextKind::Query) => "query: ",
            (true, TextKind::Passage) => "passage: ",
        };
        match kind {
            TextKind::Query => self.batches.fetch_add(1, Ordering::SeqCst),
            TextKind::Passage => self.passage_batches.fetch_add(1, Ordering::SeqCst),
        };
        Ok(Embedded {
            vectors: texts
                .iter()
                .flat_map(|t| hash_vec(&format!("{prefix}{t}")))
                .collect(),
            truncated: texts
                .iter()
                .map(|t| t.split_whitespace().count() > 6)
                .collect(),
        })
    }
}

const TEXTS: [&str; 6] = [
    "the tide rises with the moon",
    "a river of stone and salt",
    "ember glow in cedar wood",
    "frost on the harbor glass",
    "dune wind over the salt flats",
    "moon and tide and harbor lights",
];

/// A collection of `TEXTS`; with `lexical`, also its BM25 index (the ingest default).
fn make_collection(dir: &std::path::Path, name: &str, lexical: bool) -> std::path::PathBuf {
    make_collection_with(dir, name, lexical, &hash("aa"))
}

/// [`make_collection`] embedded by `model`.
fn make_collection_with(
    dir: &std::path::Path,
    name: &str,
    lexical: bool,
    model: &Hash,
) -> std::path::PathBuf {
    let docs = dir.join(format!("{name}.jsonl"));
    let mut f = std::fs::File::create(&docs).unwrap();
    for (i, t) in TEXTS.iter().enumerate() {
        let id = if i % 2 == 0 {
            json!(format!("doc-{i}"))
        } else {
            json!(i)
        };
        writeln!(
            f,
            "{}",
            json!({"id": id, "text": t, "year": 1990 + i, "tags": ["x", format!("t{i}")]})
        )
        .unwrap();
    }
    drop(f);
    let out = dir.join(name);
    let mut c = IngestConfig::new(&docs, &out);
    c.build.threads = 1;
    c.build.kind = searchd_engine::IndexKind::Flat;
    if !lexical {
        c.lexical = None;
    }
    ingest(&c, Some(model), &|_| {}).unwrap();
    out
}

fn config(dir: &std::path::Path, embed: Option<Arc<dyn TextEmbedder>>) -> ServerConfig {
    // books has a lexical index, poems has not.
    let a = make_collection(dir, "books", true);
    let b = make_collection(dir, "poems", false);
    let mut c = ServerConfig::new(IndexSource::Path(a));
    c.name = Some("books".into());
    c.more = vec![("poems".into(), IndexSource::Path(b))];
    c.threads = 2;
    c.embedder = embed;
    c
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    let r = client().post(url).json(&body).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_search_docs_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    let embed = Arc::new(hash("aa"));
    let s = TestServer::start(config(dir.path(), Some(embed.clone()))).await;
    let u = &s.url;

    // A text query finds the document with the same text first; ids keep their kinds.
    let (st, v) = post(
        &format!("{u}/collections/books/search"),
        json!({"text": TEXTS[3], "k": 3, "fields": ["year"]}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["hits"][0]["id"], json!(3));
    assert_eq!(v["hits"][0]["fields"], json!({"year": 1993}));
    assert!(v["timings_us"]["embed"].as_u64().is_some());
    assert!(v["timings_us"]["search"].as_u64().is_some());
    assert!(v.get("warnings").is_none());
    let (_, v) = post(
        &format!("{u}/search"),
        json!({"text": TEXTS[0], "k": 1, "fields": true}),
    )
    .await;
    assert_eq!(v["hits"][0]["id"], json!("doc-0"));
    assert_eq!(v["hits"][0]["fields"]["text"], json!(TEXTS[0]));
    assert_eq!(v["hits"][0]["fields"]["tags"], json!(["x", "t0"]));
    // Longer than the (toy) window: answered, and said so.
    let (st, v) = post(
        &format!("{u}/search"),
        json!({"text": "one two three four five six seven"}),
    )
    .await;
    assert_eq!(st, 200);
    assert!(
        v["warnings"][0].as_str().unwrap().contains("truncated"),
        "{v}"
    );

    // Vector and "more like this" queries, by string and integer id.
    let (st, v) = post(
        &format!("{u}/collections/poems/search"),
        json!({"vector": hash_vec(TEXTS[4]), "k": 2}),
    )
    .await;
    assert_eq!((st, v["hits"][0]["id"].clone()), (200, json!("doc-4")));
    let (st, v) = post(&format!("{u}/search"), json!({"id": "doc-0", "k": 5})).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["id"] != json!("doc-0")));
    let (st, _) = post(&format!("{u}/search"), json!({"id": 1, "k": 2})).await;
    assert_eq!(st, 200);
    let (st, v) = post(&format!("{u}/search"), json!({"id": "nope"})).await;
    assert_eq!((st, v["error"]["code"].clone()), (404, json!("not_found")));

    // Documents by id, fields exactly as given.
    let r = client()
        .get(format!("{u}/collections/books/docs/doc-2"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v,
        json!({"id": "doc-2", "fields": {"text": TEXTS[2], "year": 1992, "tags": ["x", "t2"]}})
    );
    let v: Value = client()
        .get(format!("{u}/collections/books/docs/5"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["id"], json!(5));
    let r = client()
        .get(format!("{u}/collections/books/docs/77"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = client()
        .get(format!("{u}/collections/nope/docs/1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("books, poems"),
        "{v}"
    );

    // Bad requests: 400 with a message, never a 500.
    for (body, want) in [
        (json!({"text": ""}), "empty"),
        (json!({"text": "   "}), "empty"),
        (json!({"text": 5}), "must be a string"),
        (json!({"text": "a", "vector": [1.0]}), "exactly one"),
        (json!({"text": "a", "mode": "fuzzy"}), "unknown mode"),
        (json!({"text": "a", "fields": 3}), "fields must be"),
        (
            json!({"text": "a", "filter": {"term": {"colour": 1}}}),
            "colour",
        ),
        (json!({"id": -3}), "document id"),
    ] {
        let (st, v) = post(&format!("{u}/collections/books/search"), body.clone()).await;
        assert_eq!(st, 400, "{body}: {v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains(want), "{body}: {m:?} should mention {want:?}");
    }
    // Lexical and hybrid need the lexical index, which poems lacks; the message names it.
    for mode in ["lexical", "hybrid"] {
        let (st, v) = post(
            &format!("{u}/collections/poems/search"),
            json!({"text": "tide", "mode": mode}),
        )
        .await;
        assert_eq!(st, 400, "{v}");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.contains("no lexical index"), "{m}");
    }
    // Text on poems defaults to dense (model, no lexical index), on books to hybrid.
    let (_, v) = post(
        &format!("{u}/collections/poems/search"),
        json!({"text": "tide"}),
    )
    .await;
    assert_eq!(v["mode"], json!("dense"), "{v}");
    let (_, v) = post(
        &format!("{u}/collections/books/search"),
        json!({"text": "tide"}),
    )
    .await;
    assert_eq!(v["mode"], json!("hybrid"), "{v}");

    // Concurrent text queries are batched.
    let before = embed.batches.load(Ordering::SeqCst);
    let mut tasks = Vec::new();
    for i in 0..24 {
        let url = format!("{u}/search");
        tasks.push(tokio::spawn(async move {
            post(&url, json!({"text": TEXTS[i % 6], "k": 1})).await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().0, 200);
    }
    let batches = embed.batches.load(Ordering::SeqCst) - before;
    assert!(
        batches < 24,
        "24 concurrent texts took {batches} forward passes"
    );

    // /stats and /collections describe both collections and the batching.
    let st: Value = client()
        .get(format!("{u}/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(st["index"]["n"], json!(6));
    assert_eq!(st["collections"]["poems"]["docs"], json!(6));
    assert!(st["embedder"]["batching"]["texts"].as_u64().unwrap() >= 27);
    let cl: Value = client()
        .get(format!("{u}/collections"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cl["default"], json!("books"));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_without_a_model_and_a_model_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(config(dir.path(), None)).await;
    // poems has no lexical index: a text query needs the model.
    let (st, v) = post(
        &format!("{}/collections/poems/search", s.url),
        json!({"text": "tide"}),
    )
    .await;
    assert_eq!(st, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("--model"),
        "{v}"
    );
    // books has one: without a model, text is searched lexically; dense and hybrid are
    // refused naming --model.
    let (st, v) = post(&format!("{}/search", s.url), json!({"text": "tide"})).await;
    assert_eq!((st, v["mode"].clone()), (200, json!("lexical")), "{v}");
    assert_eq!(v["hits"][0]["id"], json!("doc-0"), "{v}");
    for mode in ["dense", "hybrid"] {
        let (st, v) = post(
            &format!("{}/search", s.url),
            json!({"text": "tide", "mode": mode}),
        )
        .await;
        assert_eq!(st, 400, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("--model"));
    }
    s.stop().await.unwrap();

    // Collections embedded by model "aa" refuse a server whose model is "bb".
    let dir = tempfile::tempdir().unwrap();
    let other = Arc::new(hash("bb"));
    let s = TestServer::start_unready(config(dir.path(), Some(other))).await;
    let err = s.join().await.unwrap_err().to_string();
    assert!(
        err.contains("embedded with model") && err.contains("bb"),
        "{err}"
    );
}

/// A second backend: a fixed answer, to prove the routes, admission and JSON only need
/// the trait.
struct Canned {
    searches: AtomicUsize,
}

impl SearchBackend for Canned {
    fn info(&self) -> Value {
        json!({"kind": "canned", "docs": 2, "dim": DIM, "metric": "cosine", "path": "/canned", "bytes": 0})
    }
    fn figures(&self) -> (u64, usize, u64) {
        (2, DIM, 0)
    }
    fn model(&self) -> Option<ModelRecord> {
        None
    }
    fn search(&self, req: SearchRequest) -> BoxFuture<'_, Result<SearchOutput, BackendError>> {
        self.searches.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            match req.search.query {
                QueryInput::Stored(DocId::Str(s)) if s == "slow" => {
                    Err(BackendError::Deadline { started: true })
                }
                QueryInput::Stored(_) => Err(BackendError::Unavailable("upstream down".into())),
                _ => Ok(vec![
                    ScoredDoc {
                        id: DocId::Str("a".into()),
                        score: 0.9,
                        fields: (req.search.fields != FieldsWanted::None)
                            .then(|| b"{\"x\":1}".to_vec()),
                    },
                    ScoredDoc {
                        id: DocId::Int(7),
                        score: 0.5,
                        fields: None,
                    },
                ]
                .into()),
            }
        })
    }
    fn get(&self, id: DocId, _f: FieldsWanted) -> BoxFuture<'_, Result<Document, BackendError>> {
        Box::pin(async move {
            match id {
                DocId::Str(s) if s == "a" => Ok(Document {
                    id: DocId::Str(s),
                    fields: b"{\"x\":1}".to_vec(),
                }),
                other => Err(BackendError::NotFound(format!("no {other}"))),
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_backend_behind_the_same_routes() {
    let canned = Arc::new(Canned {
        searches: AtomicUsize::new(0),
    });
    let mut c = ServerConfig::new(IndexSource::Backend(canned.clone()));
    c.name = Some("remote".into());
    c.threads = 1;
    let s = TestServer::start(c).await;
    let u = &s.url;
    let (st, v) = post(
        &format!("{u}/collections/remote/search"),
        json!({"vector": vec![0.1; DIM], "fields": true}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(
        v["hits"],
        json!([{"id": "a", "score": 0.9, "fields": {"x": 1}}, {"id": 7, "score": 0.5}])
    );
    let (st, _) = post(&format!("{u}/search"), json!({"vector": vec![0.1; 3]})).await;
    assert_eq!(st, 400, "the dimension is checked in front of any backend");
    let (st, v) = post(&format!("{u}/search"), json!({"id": "slow"})).await;
    assert_eq!(
        (st, v["error"]["code"].clone()),
        (504, json!("deadline_exceeded"))
    );
    let (st, v) = post(&format!("{u}/search"), json!({"id": "x"})).await;
    assert_eq!((st, v["error"]["code"].clone()), (503, json!("not_ready")));
    let v: Value = client()
        .get(format!("{u}/collections/remote/docs/a"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v, json!({"id": "a", "fields": {"x": 1}}));
    let r = client()
        .get(format!("{u}/collections/remote/docs/b"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(canned.searches.load(Ordering::SeqCst), 3);
    let st: Value = client()
        .get(format!("{u}/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(st["requests"]["ok"].as_u64().unwrap() >= 1);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_collection_is_served_as_failed_while_the_others_serve() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), None);
    // poems' manifest is damaged: the checksum no longer matches.
    let m = dir.path().join("poems/collection.json");
    let text = std::fs::read_to_string(&m).unwrap();
    assert!(text.contains("\"wal_seq\": 0"), "{text}");
    std::fs::write(&m, text.replacen("\"wal_seq\": 0", "\"wal_seq\": 5", 1)).unwrap();
    let s = TestServer::start_unready(c).await;
    let cl = client();
    // /ready stays 503 and names the failed collection and why.
    let t = std::time::Instant::now();
    let why = loop {
        let r = cl.get(format!("{}/ready", s.url)).send().await.unwrap();
        let (code, _, v) = split(r).await;
        assert_eq!(code, 503, "{v}");
        let msg = v["error"]["reason"]
            .as_str()
            .or(v["error"].as_str())
            .unwrap_or("")
            .to_string();
        let msg = if msg.is_empty() { v.to_string() } else { msg };
        if msg.contains("poems") {
            break msg;
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{v}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(why.contains("checksum"), "{why}");
    // books serves; poems answers 503 with the reason; /stats names it.
    let (code, v) = post(&format!("{}/collections/books/count", s.url), json!({})).await;
    assert_eq!(
        (code, v["count"].as_u64()),
        (200, Some(TEXTS.len() as u64)),
        "{v}"
    );
    let (code, v) = post(&format!("{}/collections/poems/count", s.url), json!({})).await;
    assert_eq!(code, 503, "{v}");
    assert!(v.to_string().contains("failed to open"), "{v}");
    // The reason without the server's paths (the temporary directory's name stays out).
    let tmp = dir.path().to_string_lossy().to_string();
    assert!(!v.to_string().contains(&tmp), "{v}");
    let st = get_json(&cl, &format!("{}/stats", s.url)).await;
    assert!(
        st["collections"]["poems"]["state"] == "failed"
            && st["collections"]["poems"]["reason"]
                .as_str()
                .is_some_and(|w| w.contains("checksum")),
        "{st}"
    );
    s.stop().await.unwrap();
}

/// An upsert over HTTP without a vector: the server embeds the document's text with its
/// model (as a passage), so the stored vector is the embedder's output (a search by that
/// vector finds the document first at cosine 1) and the text is in the lexical index. A
/// document without text or vector is a 400 naming its place in the request (`docs[0]`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_without_a_vector_is_embedded_by_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let embed: Arc<dyn TextEmbedder> = Arc::new(hash("aa"));
    let s = TestServer::start(config(dir.path(), Some(embed))).await;
    let u = &s.url;
    let text = "quiet lanterns above the ferry";
    let (st, v) = post(
        &format!("{u}/collections/books/docs"),
        json!({"docs": [{"id": "new-1", "text": text, "fields": {"year": 2001}}], "wait": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = post(
        &format!("{u}/collections/books/search"),
        json!({"vector": hash_vec(text), "k": 1}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["hits"][0]["id"], json!("new-1"), "{v}");
    let score = v["hits"][0]["score"].as_f64().unwrap();
    assert!((score - 1.0).abs() < 1e-4, "cosine {score}: {v}");
    let (st, v) = post(
        &format!("{u}/collections/books/search"),
        json!({"text": "lanterns ferry", "mode": "lexical", "k": 3}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["hits"][0]["id"], json!("new-1"), "{v}");
    let (st, v) = post(
        &format!("{u}/collections/books/docs"),
        json!({"docs": [{"id": "new-2", "fields": {"year": 2002}}]}),
    )
    .await;
    assert_eq!(st, 400, "{v}");
    assert!(v.to_string().contains("docs[0]"), "{v}");
    s.stop().await.unwrap();
}

/// Live upserts without vectors are embedded as ingest embeds: with the passage prompt of a
/// model whose query and passage prompts differ, and in one embedder call per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upserts_are_embedded_with_the_passage_prompt_in_one_batch_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let prefixed = || Hash {
        prefixed: true,
        ..hash("pp")
    };
    let coll = make_collection_with(dir.path(), "notes", true, &prefixed());
    let model = Arc::new(prefixed());
    let mut cfg = ServerConfig::new(IndexSource::Path(coll));
    cfg.name = Some("notes".into());
    cfg.threads = 2;
    cfg.embedder = Some(model.clone());
    let s = TestServer::start(cfg).await;
    let u = &s.url;
    let texts = [
        "quiet lanterns above the ferry",
        "copper kettles in the rain",
        "a map of the northern islands",
    ];
    let docs: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": format!("n{i}"), "text": t}))
        .collect();
    let before = model.passage_batches.load(Ordering::SeqCst);
    let (st, v) = post(
        &format!("{u}/collections/notes/docs"),
        json!({"docs": docs, "wait": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        model.passage_batches.load(Ordering::SeqCst),
        before + 1,
        "three documents, one embedder call"
    );
    for (i, t) in texts.iter().enumerate() {
        // The stored vector is the passage embedding (what ingest would have stored).
        let (st, v) = post(
            &format!("{u}/collections/notes/search"),
            json!({"vector": hash_vec(&format!("passage: {t}")), "k": 1}),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["hits"][0]["id"], json!(format!("n{i}")), "{v}");
        let score = v["hits"][0]["score"].as_f64().unwrap();
        assert!((score - 1.0).abs() < 1e-4, "cosine {score}: {v}");
    }
    // explain shows the segments a search went through: the ingested one and the one the
    // upsert made visible, each with the hits it offered.
    let search_url = format!("{u}/collections/notes/search");
    let explained =
        json!({"vector": hash_vec(&format!("passage: {}", texts[0])), "k": 3, "explain": true});
    let (st, v) = post(&search_url, explained.clone()).await;
    assert_eq!(st, 200, "{v}");
    let segs = v["explain"]["segments"].as_array().unwrap();
    assert!(segs.len() >= 2, "{v}");
    let offered: u64 = segs.iter().map(|s| s["candidates"].as_u64().unwrap()).sum();
    assert!(offered >= 3, "{v}");
    assert!(
        segs.iter().all(|s| s["plan"].is_null()),
        "no filter, nothing deleted, no plan: {v}"
    );
    // Each segment's own time, within the dense stage's.
    let spent: u64 = segs.iter().map(|s| s["us"].as_u64().unwrap()).sum();
    assert!(
        spent <= v["explain"]["stages_us"]["dense"].as_u64().unwrap() + 1,
        "{v}"
    );
    // A deleted row makes its segment's search a filtered one on its alive rows, and
    // explain names the plan it took.
    let (st, v) = post(
        &format!("{u}/collections/notes/delete"),
        json!({"ids": ["n1"], "wait": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = post(&search_url, explained).await;
    assert_eq!(st, 200, "{v}");
    let segs = v["explain"]["segments"].as_array().unwrap();
    assert_eq!(
        segs.iter().filter(|s| s["plan"] == "exact").count(),
        1,
        "the upsert's segment, 2 of 3 rows alive, is scanned: {v}"
    );
    s.stop().await.unwrap();
}
