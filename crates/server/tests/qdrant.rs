//! The Qdrant backend against a real Qdrant (no mocks): the same requests to searchd's
//! local engine and to searchd over Qdrant on the same seeded documents must give the same
//! answers (exact search on both sides), before and after the same writes (upserts with
//! integer and string ids, replacements, deletes by id and by filter), ingest
//! create/append/recreate, writes not waited for becoming visible through the response
//! cache, and the error mapping (reads and writes) when Qdrant stops and comes back.
//!
//! The binary comes from `QDRANT_BIN` or a `qdrant` on `PATH` (`.ci/run` sets `QDRANT_BIN` to the workplace's `shared/qdrant/qdrant`); where
//! neither exists the tests print `skipped:` and pass, except under `CI=true`, where they
//! fail.

#![cfg(feature = "qdrant")]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, get_json, TestServer};
use rand::{RngExt, SeedableRng};
use searchd_collection::ingest::{ingest, IngestConfig};
use searchd_collection::LiveDocs;
use searchd_server::qdrant::admin::{ingest_collection, Existing, IngestOptions};
use searchd_server::qdrant::local::{find_binary, LocalQdrant};
use searchd_server::qdrant::QdrantTarget;
use searchd_server::{IndexSource, ServerConfig};
use searchd_testkit::needs::{self, Need};
use serde_json::{json, Value};

const DIM: usize = 16;
const N: usize = 600;

fn qdrant_or_skip(test: &str) -> Option<(LocalQdrant, tempfile::TempDir)> {
    let bin = needs::require(Need::Qdrant, test, find_binary(), "no Qdrant binary")?;
    let dir = tempfile::tempdir().unwrap();
    let q = LocalQdrant::start(&bin, &dir.path().join("qdrant"), Duration::from_secs(60))
        .expect("qdrant starts");
    Some((q, dir))
}

fn rfc3339(day: i64) -> String {
    let months = [31, 29, 31, 30, 31];
    let (mut m, mut d) = (0usize, day);
    while d >= months[m] {
        d -= months[m];
        m += 1;
    }
    format!("2024-{:02}-{:02}T00:00:00Z", m + 1, d + 1)
}

/// Seeded documents with integer ids: keyword (Zipf, 10% missing), float with ties (5%
/// missing), integer with zeros, keyword arrays, bool, datetime.
fn write_docs(path: &Path, seed: u64, ids: std::ops::Range<usize>) -> Vec<Vec<f32>> {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut f = std::fs::File::create(path).unwrap();
    let mut vecs = Vec::new();
    for i in ids {
        let mut v: Vec<f32> = (0..DIM).map(|_| r.random::<f32>() - 0.5).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        let z: f64 = r.random();
        let mut o = json!({"id": i, "vec": v, "text": format!("doc {i}"),
            "stock": if r.random::<f64>() < 0.3 { 0 } else { r.random_range(1..100i64) },
            "tags": (0..r.random_range(0..4usize)).map(|_| format!("t{}", r.random_range(0..8u32))).collect::<Vec<_>>(),
            "active": r.random::<f64>() < 0.5,
            "created": rfc3339(r.random_range(0..100i64))});
        if r.random::<f64>() > 0.1 {
            o["brand"] = json!(format!("b{}", (z * z * 12.0) as u32));
        }
        if r.random::<f64>() > 0.05 {
            o["price"] = json!((r.random::<f64>() * 50.0).round() / 2.0);
        }
        writeln!(f, "{o}").unwrap();
        vecs.push(v);
    }
    vecs
}

fn make_collection(
    dir: &Path,
    name: &str,
    seed: u64,
    ids: std::ops::Range<usize>,
) -> (PathBuf, Vec<Vec<f32>>) {
    let docs = dir.join(format!("{name}.jsonl"));
    let vecs = write_docs(&docs, seed, ids);
    let out = dir.join(name);
    let mut c = IngestConfig::new(&docs, &out);
    c.reader.vector_field = Some("vec".into());
    c.build.threads = 1;
    c.build.kind = searchd_engine::IndexKind::Flat;
    c.lexical = None;
    ingest(&c, None, &|_| {}).unwrap();
    (out, vecs)
}

async fn upload(
    q: &LocalQdrant,
    name: &str,
    coll: &Path,
    existing: Existing,
) -> Result<searchd_server::qdrant::admin::IngestReport, String> {
    let c = Arc::new(LiveDocs::open(coll, &Default::default()).unwrap());
    let opts = IngestOptions {
        existing,
        batch: 100,
        ..IngestOptions::default()
    };
    ingest_collection(&q.grpc_url(), name, c, &opts, Arc::new(|_| {})).await
}

fn qdrant_config(q: &LocalQdrant, name: &str) -> ServerConfig {
    let mut c = ServerConfig::new(IndexSource::Qdrant(QdrantTarget::new(&q.grpc_url(), name)));
    c.name = Some(name.to_string());
    c.threads = 2;
    c.timeout = Duration::from_secs(10);
    c
}

fn local_config(dir: &Path, name: &str) -> ServerConfig {
    let mut c = ServerConfig::new(IndexSource::Path(dir.to_path_buf()));
    c.name = Some(name.to_string());
    c.threads = 2;
    c.timeout = Duration::from_secs(10);
    c
}

async fn post(url: &str, body: &Value) -> (u16, Value) {
    let r = client().post(url).json(body).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

fn ids(v: &Value) -> Vec<Value> {
    v["hits"]
        .as_array()
        .map(|h| h.iter().map(|x| x["id"].clone()).collect())
        .unwrap_or_default()
}

fn filters() -> Vec<Value> {
    vec![
        json!({"match_all": {}}),
        json!({"match_none": {}}),
        json!({"term": {"brand": "b0"}}),
        json!({"terms": {"brand": ["b3", "b7", "nope"]}}),
        json!({"term": {"stock": 0}}),
        json!({"terms": {"stock": [1, 2, 3, 50]}}),
        json!({"term": {"price": 12.5}}),
        json!({"range": {"price": {"gte": 10, "lt": 20}}}),
        json!({"range": {"price": {"gt": 24.5}}}),
        json!({"range": {"stock": {"lte": 10}}}),
        json!({"range": {"created": {"gte": "2024-02-01T00:00:00Z", "lt": "2024-03-01T00:00:00Z"}}}),
        json!({"term": {"created": "2024-01-05T00:00:00Z"}}),
        json!({"term": {"active": true}}),
        json!({"term": {"tags": "t3"}}),
        json!({"exists": {"field": "brand"}}),
        json!({"exists": {"field": "tags"}}),
        json!({"ids": {"values": [1, 5, 9, 200, 599, 100000]}}),
        json!({"bool": {"must_not": [{"exists": {"field": "price"}}]}}),
        json!({"bool": {"filter": [{"term": {"brand": "b1"}}, {"range": {"price": {"lt": 30}}}],
                        "must_not": [{"term": {"active": false}}]}}),
        json!({"bool": {"should": [{"term": {"tags": "t1"}}, {"term": {"tags": "t2"}}, {"term": {"brand": "b2"}}],
                        "minimum_should_match": 2}}),
        json!({"bool": {"should": [{"term": {"tags": "t1"}}, {"range": {"stock": {"gt": 90}}}]}}),
        json!({"bool": {"must": [{"bool": {"should": [{"term": {"brand": "b0"}}, {"term": {"brand": "b1"}}]}}],
                        "should": [{"term": {"active": true}}]}}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_and_qdrant_backends_answer_alike() {
    let Some((q, dir)) = qdrant_or_skip("local_and_qdrant_backends_answer_alike") else {
        return;
    };
    let (coll, vecs) = make_collection(dir.path(), "shop", 7, 0..N);
    let rep = upload(&q, "shop", &coll, Existing::Refuse).await.unwrap();
    assert_eq!(rep.points_in_collection, N as u64);
    let local = TestServer::start(local_config(&coll, "shop")).await;
    let remote = TestServer::start(qdrant_config(&q, "shop")).await;
    let paths = |route: &str| {
        (
            format!("{}/collections/shop/{route}", local.url),
            format!("{}/collections/shop/{route}", remote.url),
        )
    };

    // Searches: vector, id, with every filter; facets over the hits.
    let (ls, rs) = paths("search");
    let mut searched = 0;
    for (qi, f) in filters().iter().enumerate() {
        for body in [
            json!({"vector": vecs[qi * 7 % N], "k": 10, "filter": f, "fields": ["brand", "price"]}),
            json!({"id": qi * 13 % N, "k": 5, "filter": f, "facets": ["tags"]}),
        ] {
            let (a, av) = post(&ls, &body).await;
            let (b, bv) = post(&rs, &body).await;
            assert_eq!((a, b), (200, 200), "{body}: {av} / {bv}");
            assert_eq!(ids(&av), ids(&bv), "{body}");
            for (x, y) in av["hits"]
                .as_array()
                .unwrap()
                .iter()
                .zip(bv["hits"].as_array().unwrap())
            {
                let (sx, sy) = (x["score"].as_f64().unwrap(), y["score"].as_f64().unwrap());
                assert!((sx - sy).abs() < 1e-4, "{body}: score {sx} vs {sy}");
                assert_eq!(x["fields"], y["fields"], "{body}");
            }
            assert_eq!(av["facets"], bv["facets"], "{body}");
            searched += 1;
        }
    }
    assert_eq!(searched, 2 * filters().len());

    // Counts and facets with every filter.
    let (lc, rc) = paths("count");
    let (lf, rf) = paths("facet");
    for f in filters() {
        let (a, av) = post(&lc, &json!({"filter": f})).await;
        let (b, bv) = post(&rc, &json!({"filter": f})).await;
        assert_eq!((a, b), (200, 200), "{f}: {av} / {bv}");
        assert_eq!(av["count"], bv["count"], "count {f}");
        for field in ["brand", "tags"] {
            let body = json!({"field": field, "filter": f, "size": 3});
            let (_, av) = post(&lf, &body).await;
            let (_, bv) = post(&rf, &body).await;
            assert_eq!(av["buckets"], bv["buckets"], "facet {body}");
            assert_eq!(av["other_count"], bv["other_count"], "facet {body}");
        }
    }

    // Sorted pages: walk every page with the cursor, by id and by price both ways.
    let (lp, rp) = paths("scroll");
    for (sort, filter) in [
        (Value::Null, json!({"match_all": {}})),
        (json!([{"price": "asc"}]), json!({"match_all": {}})),
        (
            json!([{"price": "desc"}]),
            json!({"range": {"stock": {"gte": 1}}}),
        ),
        (json!(["stock"]), json!({"exists": {"field": "brand"}})),
        (json!([{"created": "desc"}]), json!({"match_all": {}})),
    ] {
        let mut after = Value::Null;
        let mut pages = 0;
        loop {
            let mut body = json!({"size": 37, "filter": filter, "after": after, "fields": true, "total": true});
            if !sort.is_null() {
                body["sort"] = sort.clone();
            }
            let (a, av) = post(&lp, &body).await;
            let (b, bv) = post(&rp, &body).await;
            assert_eq!((a, b), (200, 200), "{body}: {av} / {bv}");
            assert_eq!(av["hits"], bv["hits"], "page {pages} of {body}");
            assert_eq!(av["next"], bv["next"], "{body}");
            assert_eq!(av["total"], bv["total"], "{body}");
            pages += 1;
            if av["next"].is_null() {
                break;
            }
            after = av["next"].clone();
        }
        assert!(pages > 3, "{sort}");
    }

    // Documents by id, byte for byte.
    for id in [0, 17, 599] {
        let a = client()
            .get(format!("{}/collections/shop/docs/{id}", local.url))
            .send()
            .await
            .unwrap();
        let b = client()
            .get(format!("{}/collections/shop/docs/{id}", remote.url))
            .send()
            .await
            .unwrap();
        assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
        assert_eq!(a.text().await.unwrap(), b.text().await.unwrap());
    }
    let b = client()
        .get(format!("{}/collections/shop/docs/100000", remote.url))
        .send()
        .await
        .unwrap();
    assert_eq!(b.status().as_u16(), 404);
    let (s, _) = post(&rs, &json!({"id": 100000, "k": 3})).await;
    assert_eq!(s, 404);

    // Bad input: the same 400s (searchd's parser), plus what Qdrant cannot express.
    for bad in [
        json!({"vector": vecs[0], "filter": {"term": {"nope": 1}}}),
        json!({"vector": vecs[0], "filter": {"range": {"brand": {"gt": 1}}}}),
        json!({"vector": vecs[0], "facets": ["price"]}),
        json!({"vector": vecs[0], "filter": {"range": {"stock": {"gt": 9007199254740993i64}}}}),
        json!({"vector": [1.0, 2.0]}),
    ] {
        let (b, bv) = post(&rs, &bad).await;
        assert_eq!(b, 400, "{bad}: {bv}");
        assert!(bv["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    let (b, bv) = post(&rp, &json!({"sort": ["brand"]})).await;
    assert_eq!(b, 400, "{bv}");
    assert!(
        bv["error"]["message"].as_str().unwrap().contains("brand"),
        "{bv}"
    );
    let (b, _) = post(&rp, &json!({"sort": ["price", "stock"]})).await;
    assert_eq!(b, 400);
    let (b, _) = post(&rs, &json!({"text": "hello", "mode": "lexical"})).await;
    assert_eq!(b, 400);

    let stats = get_json(&client(), &format!("{}/stats", remote.url)).await;
    assert_eq!(stats["collections"]["shop"]["kind"], "qdrant");
    assert_eq!(stats["collections"]["shop"]["docs"], N);
    local.stop().await.unwrap();
    remote.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_refuses_existing_unless_recreate_or_append() {
    let Some((q, dir)) = qdrant_or_skip("ingest_refuses_existing_unless_recreate_or_append") else {
        return;
    };
    let (a, _) = make_collection(dir.path(), "a", 1, 0..200);
    let (b, _) = make_collection(dir.path(), "b", 2, 200..350);
    let rep = upload(&q, "c", &a, Existing::Refuse).await.unwrap();
    assert_eq!(rep.points_in_collection, 200);
    let err = upload(&q, "c", &b, Existing::Refuse).await.unwrap_err();
    assert!(
        err.contains("--recreate") && err.contains("--append"),
        "{err}"
    );
    let rep = upload(&q, "c", &b, Existing::Append).await.unwrap();
    assert_eq!(rep.points_in_collection, 350);
    let rep = upload(&q, "c", &b, Existing::Recreate).await.unwrap();
    assert_eq!(rep.points_in_collection, 150);
    // The served collection answers for b's documents only.
    let s = TestServer::start(qdrant_config(&q, "c")).await;
    let (st, v) = post(&format!("{}/collections/c/count", s.url), &json!({})).await;
    assert_eq!((st, v["count"].as_u64()), (200, Some(150)));
    s.stop().await.unwrap();
    // Another dimension cannot be appended.
    let docs = dir.path().join("d3.jsonl");
    std::fs::write(&docs, "{\"id\": 1, \"vec\": [1.0, 0.0, 0.0]}\n").unwrap();
    let mut c = IngestConfig::new(&docs, dir.path().join("d3"));
    c.reader.vector_field = Some("vec".into());
    c.build.kind = searchd_engine::IndexKind::Flat;
    c.lexical = None;
    ingest(&c, None, &|_| {}).unwrap();
    let err = upload(&q, "c", &dir.path().join("d3"), Existing::Append)
        .await
        .unwrap_err();
    assert!(err.contains("dimensional"), "{err}");
}

/// The collection as Qdrant's REST API describes it.
async fn collection_info(q: &LocalQdrant, name: &str) -> Value {
    get_json(&client(), &format!("{}/collections/{name}", q.http_url())).await["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_indexing_builds_after_the_upload_and_restores_the_threshold() {
    let Some((q, dir)) =
        qdrant_or_skip("deferred_indexing_builds_after_the_upload_and_restores_the_threshold")
    else {
        return;
    };
    let (a, _) = make_collection(dir.path(), "a", 1, 0..400);
    let (b, _) = make_collection(dir.path(), "b", 2, 400..600);
    // A 1 KB threshold, so these small segments get HNSW graphs (400 x 16 floats = 25 KB).
    let opts = IngestOptions {
        existing: Existing::Refuse,
        batch: 50,
        parallel: 3,
        indexing_threshold_kb: Some(1),
        defer_indexing: true,
        ..IngestOptions::default()
    };
    let coll = Arc::new(LiveDocs::open(&a, &Default::default()).unwrap());
    let rep = ingest_collection(&q.grpc_url(), "d", coll, &opts, Arc::new(|_| {}))
        .await
        .unwrap();
    assert!(rep.deferred_indexing && rep.waited);
    assert_eq!((rep.points_in_collection, rep.indexed_vectors), (400, 400));
    let info = collection_info(&q, "d").await;
    assert_eq!(info["config"]["optimizer_config"]["indexing_threshold"], 1);
    assert_eq!(info["status"], "green");
    // Append, deferred again without a threshold of its own and without waiting: the
    // collection's own threshold (1) comes back, not Qdrant's default, and the indexing
    // finishes after the call returned.
    let opts = IngestOptions {
        existing: Existing::Append,
        indexing_threshold_kb: None,
        wait_indexed: false,
        ..opts
    };
    let coll = Arc::new(LiveDocs::open(&b, &Default::default()).unwrap());
    let rep = ingest_collection(&q.grpc_url(), "d", coll, &opts, Arc::new(|_| {}))
        .await
        .unwrap();
    assert!(!rep.waited && rep.deferred_indexing);
    assert_eq!(rep.index_wait_s, 0.0);
    assert_eq!(rep.points_in_collection, 600);
    let info = collection_info(&q, "d").await;
    assert_eq!(info["config"]["optimizer_config"]["indexing_threshold"], 1);
    let t = Instant::now();
    loop {
        let info = collection_info(&q, "d").await;
        if info["status"] == "green" && info["indexed_vectors_count"] == 600 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "not indexed after 60 s: {info}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every document is searchable: a count over the served collection.
    let s = TestServer::start(qdrant_config(&q, "d")).await;
    let (st, v) = post(&format!("{}/collections/d/count", s.url), &json!({})).await;
    assert_eq!((st, v["count"].as_u64()), (200, Some(600)));
    s.stop().await.unwrap();
}

async fn wait_status(url: &str, want: u16) {
    // Not a timed assertion: the probe runs every second; give it ample time.
    let t = Instant::now();
    loop {
        let s = client()
            .get(url)
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        if s == want {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{url} never answered {want} (last {s})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_qdrant_is_503_and_recovers() {
    let Some((mut q, dir)) = qdrant_or_skip("a_stopped_qdrant_is_503_and_recovers") else {
        return;
    };
    let (a, vecs) = make_collection(dir.path(), "a", 3, 0..100);
    upload(&q, "a", &a, Existing::Refuse).await.unwrap();
    let s = TestServer::start(qdrant_config(&q, "a")).await;
    let search = format!("{}/collections/a/search", s.url);
    let body = json!({"vector": vecs[0], "k": 3});
    let (st, v) = post(&search, &body).await;
    assert_eq!((st, ids(&v)[0].clone()), (200, json!(0)));
    q.stop();
    let (st, v) = post(&search, &body).await;
    assert_eq!(st, 503, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("Qdrant"),
        "{v}"
    );
    let (st, _) = post(&format!("{}/collections/a/count", s.url), &json!({})).await;
    assert_eq!(st, 503);
    // Writes too: 503 at once (well within the write timeout), not a hang.
    let upsert = format!("{}/collections/a/docs", s.url);
    let write = json!({"docs": new_docs(5, &[json!(7000)]), "wait": true});
    let t = Instant::now();
    let (st, v) = post(&upsert, &write).await;
    assert_eq!(st, 503, "{v}");
    let (st, v) = post(
        &format!("{}/collections/a/delete", s.url),
        &json!({"ids": [1], "wait": true}),
    )
    .await;
    assert_eq!(st, 503, "{v}");
    let (st, v) = post(
        &format!("{}/collections/a/delete", s.url),
        &json!({"filter": {"term": {"active": true}}}),
    )
    .await;
    assert_eq!(st, 503, "{v}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    wait_status(&format!("{}/ready", s.url), 503).await;
    q.restart(Duration::from_secs(60)).unwrap();
    wait_status(&format!("{}/ready", s.url), 200).await;
    let t = Instant::now();
    loop {
        let (st, v) = post(&search, &body).await;
        if st == 200 {
            assert_eq!(ids(&v)[0], json!(0));
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "searches never recovered: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The write refused while Qdrant was down goes through now (each channel reconnects
    // on its first call).
    let t = Instant::now();
    loop {
        let (st, v) = post(&upsert, &write).await;
        if st == 200 {
            assert_eq!(v["status"], json!("applied"), "{v}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "writes never recovered: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (st, v) = post(&format!("{}/collections/a/count", s.url), &json!({})).await;
    assert_eq!((st, v["count"].clone()), (200, json!(101)), "{v}");
    s.stop().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_qdrant_or_a_bad_collection_stops_the_server() {
    // Nothing listens on this port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut t = QdrantTarget::new(&format!("http://127.0.0.1:{port}"), "x");
    t.connect_timeout = Duration::from_secs(1);
    let s = TestServer::start_unready(ServerConfig::new(IndexSource::Qdrant(t))).await;
    let e = s.join().await.unwrap_err().to_string();
    assert!(e.contains("cannot reach Qdrant"), "{e}");

    let Some((q, dir)) =
        qdrant_or_skip("an_unreachable_qdrant_or_a_bad_collection_stops_the_server (part 2)")
    else {
        return;
    };
    let s = TestServer::start_unready(qdrant_config(&q, "missing")).await;
    let e = s.join().await.unwrap_err().to_string();
    assert!(e.contains("no collection") && e.contains("ingest"), "{e}");
    // A query matrix of another dimension is refused at start.
    let (a, _) = make_collection(dir.path(), "a", 4, 0..50);
    upload(&q, "a", &a, Existing::Refuse).await.unwrap();
    let mut c = qdrant_config(&q, "a");
    c.queries = Some(searchd_server::QuerySource::Loaded(Arc::new(
        searchd_vecio::Vectors::from_vec(vec![0.5f32; 8], 1, 8),
    )));
    let s = TestServer::start_unready(c).await;
    let e = s.join().await.unwrap_err().to_string();
    assert!(e.contains("8") && e.contains("16"), "{e}");
}

/// Seeded documents to write: `{"id", "vector", "fields"}` with the fields of
/// [`write_docs`] (brand, price, stock, tags, active, created).
fn new_docs(seed: u64, ids: &[Value]) -> Vec<Value> {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    ids.iter()
        .map(|id| {
            let mut v: Vec<f32> = (0..DIM).map(|_| r.random::<f32>() - 0.5).collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= n);
            let fields = json!({
                "brand": format!("b{}", r.random_range(0..4u32)),
                "price": (r.random::<f64>() * 50.0).round() / 2.0,
                "stock": r.random_range(0..100i64),
                "tags": [format!("t{}", r.random_range(0..8u32))],
                "active": r.random::<f64>() < 0.5,
                "created": rfc3339(r.random_range(0..100i64)),
            });
            json!({"id": id, "vector": v, "fields": fields})
        })
        .collect()
}

async fn delete(url: &str) -> (u16, Value) {
    let r = client().delete(url).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn get_text(url: &str) -> (u16, String) {
    let r = client().get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The parts of a write receipt both backends agree on (not `seq` or `took_ms`).
fn receipt(v: &Value) -> Value {
    json!({"status": v["status"], "upserted": v["upserted"], "deleted": v["deleted"],
           "not_found": v["not_found"]})
}

/// The same searches (every filter) and counts on both servers give the same answers.
async fn compare(label: &str, local: &str, remote: &str, probes: &[Vec<f32>]) {
    let (ls, rs) = (
        format!("{local}/collections/w/search"),
        format!("{remote}/collections/w/search"),
    );
    for (i, v) in probes.iter().enumerate() {
        for f in filters() {
            let body = json!({"vector": v, "k": 8, "filter": f, "fields": true});
            let (a, av) = post(&ls, &body).await;
            let (b, bv) = post(&rs, &body).await;
            assert_eq!((a, b), (200, 200), "{label} {body}: {av} / {bv}");
            assert_eq!(ids(&av), ids(&bv), "{label} probe {i} {f}");
            for (x, y) in av["hits"]
                .as_array()
                .unwrap()
                .iter()
                .zip(bv["hits"].as_array().unwrap())
            {
                let (sx, sy) = (x["score"].as_f64().unwrap(), y["score"].as_f64().unwrap());
                assert!((sx - sy).abs() < 1e-4, "{label} {f}: {sx} vs {sy}");
                assert_eq!(x["fields"], y["fields"], "{label} {f}");
            }
        }
    }
    let (lc, rc) = (
        format!("{local}/collections/w/count"),
        format!("{remote}/collections/w/count"),
    );
    for f in filters() {
        let (_, av) = post(&lc, &json!({"filter": f})).await;
        let (_, bv) = post(&rc, &json!({"filter": f})).await;
        assert_eq!(av["count"], bv["count"], "{label} count {f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_qdrant_answer_as_the_local_backend() {
    let Some((q, dir)) = qdrant_or_skip("writes_through_qdrant_answer_as_the_local_backend") else {
        return;
    };
    let (coll, vecs) = make_collection(dir.path(), "w", 11, 0..300);
    upload(&q, "w", &coll, Existing::Refuse).await.unwrap();
    let local = TestServer::start(local_config(&coll, "w")).await;
    let remote = TestServer::start(qdrant_config(&q, "w")).await;
    let both = |route: &str| {
        [
            format!("{}/collections/w/{route}", local.url),
            format!("{}/collections/w/{route}", remote.url),
        ]
    };
    let [lw, rw] = both("docs");
    let [ld, rd] = both("delete");

    // 1. Inserts (integer and string ids) and replacements, waited for.
    let mut ids1: Vec<Value> = (1000..1020).map(|i| json!(i)).collect();
    ids1.extend((0..5).map(|i| json!(i)));
    ids1.extend(["s-0", "s-1", "s-2"].map(|s| json!(s)));
    let docs1 = new_docs(21, &ids1);
    let body = json!({"docs": docs1, "wait": true});
    let (a, av) = post(&lw, &body).await;
    let (b, bv) = post(&rw, &body).await;
    assert_eq!((a, b), (200, 200), "{av} / {bv}");
    assert_eq!(receipt(&av), receipt(&bv));
    assert_eq!(
        (bv["status"].clone(), bv["upserted"].clone()),
        (json!("applied"), json!(28))
    );
    assert!(bv["seq"].as_u64().is_some_and(|s| s > 0), "{bv}");
    let probe = |d: &Value| -> Vec<f32> {
        d["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    let mut probes: Vec<Vec<f32>> = docs1.iter().step_by(4).map(probe).collect();
    probes.push(vecs[7].clone());
    compare("after upserts", &local.url, &remote.url, &probes).await;
    // The new documents are found first by their own vectors, and read back byte for byte.
    let [ls, rs] = both("search");
    for d in [&docs1[0], &docs1[22], &docs1[26]] {
        let (_, v) = post(&rs, &json!({"vector": probe(d), "k": 1})).await;
        assert_eq!(ids(&v), vec![d["id"].clone()], "{v}");
    }
    for id in ["1000", "3", "s-1", "7"] {
        let (a, at) = get_text(&format!("{}/collections/w/docs/{id}", local.url)).await;
        let (b, bt) = get_text(&format!("{}/collections/w/docs/{id}", remote.url)).await;
        assert_eq!((a, b), (200, 200), "{id}: {at} / {bt}");
        assert_eq!(at, bt, "{id}");
    }

    // 2. Replacing by id again (a string and an integer id) keeps one document each.
    let docs2 = new_docs(22, &[json!("s-1"), json!(1000)]);
    let body = json!({"docs": docs2, "wait": true});
    let (a, av) = post(&lw, &body).await;
    let (b, bv) = post(&rw, &body).await;
    assert_eq!((a, b), (200, 200), "{av} / {bv}");
    let (_, c) = post(&both("count")[1], &json!({})).await;
    assert_eq!(c["count"], json!(300 + 20 + 3), "{c}");
    for d in &docs2 {
        let (_, v) = post(
            &rs,
            &json!({"vector": probe(d), "k": 1, "fields": ["brand"]}),
        )
        .await;
        assert_eq!(ids(&v), vec![d["id"].clone()], "{v}");
        assert_eq!(v["hits"][0]["fields"]["brand"], d["fields"]["brand"]);
    }
    probes.extend(docs2.iter().map(probe));
    compare("after replacements", &local.url, &remote.url, &probes).await;

    // 3. Deletes by id: missing ids are reported, not errors.
    let body = json!({"ids": [1, 2, 1000, 99999, "s-0", "nope"], "wait": true});
    let (a, av) = post(&ld, &body).await;
    let (b, bv) = post(&rd, &body).await;
    assert_eq!((a, b), (200, 200), "{av} / {bv}");
    assert_eq!(receipt(&av), receipt(&bv));
    assert_eq!(bv["deleted"], json!(4), "{bv}");
    assert_eq!(bv["not_found"], json!([99999, "nope"]), "{bv}");
    let body = json!({"ids": [123456], "wait": true});
    let (_, bv) = post(&rd, &body).await;
    assert_eq!(
        (bv["deleted"].clone(), bv["not_found"].clone()),
        (json!(0), json!([123456]))
    );
    // One document by its path (an integer id and a string id).
    for id in ["3", "s-2", "777777"] {
        let (a, av) = delete(&format!("{}/collections/w/docs/{id}?wait=true", local.url)).await;
        let (b, bv) = delete(&format!("{}/collections/w/docs/{id}?wait=true", remote.url)).await;
        assert_eq!((a, b), (200, 200), "{id}: {av} / {bv}");
        assert_eq!(receipt(&av), receipt(&bv), "{id}");
    }
    for id in ["1", "1000", "s-0", "3", "s-2"] {
        let (b, bt) = get_text(&format!("{}/collections/w/docs/{id}", remote.url)).await;
        assert_eq!(b, 404, "{id}: {bt}");
    }
    compare("after deletes by id", &local.url, &remote.url, &probes).await;

    // 4. Deletes by filter.
    for f in [
        json!({"term": {"brand": "b1"}}),
        json!({"bool": {"filter": [{"range": {"price": {"lt": 5}}}, {"term": {"active": true}}]}}),
        json!({"term": {"brand": "no-such-brand"}}),
    ] {
        let body = json!({"filter": f, "wait": true});
        let (a, av) = post(&ld, &body).await;
        let (b, bv) = post(&rd, &body).await;
        assert_eq!((a, b), (200, 200), "{f}: {av} / {bv}");
        assert_eq!(receipt(&av), receipt(&bv), "{f}");
        let (_, c) = post(&both("count")[1], &json!({"filter": f})).await;
        assert_eq!(c["count"], json!(0), "{f}");
    }
    compare("after deletes by filter", &local.url, &remote.url, &probes).await;
    let (_, a) = post(&ls, &json!({"vector": vecs[9], "k": 3})).await;
    let (_, b) = post(&rs, &json!({"vector": vecs[9], "k": 3})).await;
    assert_eq!(ids(&a), ids(&b));

    // 5. A field the mapping does not have is kept in the document, not filterable.
    let mut d = new_docs(23, &[json!(5000)]);
    d[0]["fields"]["color"] = json!("red");
    let (b, bv) = post(&rw, &json!({"docs": d, "wait": true})).await;
    assert_eq!(b, 200, "{bv}");
    let (_, bt) = get_text(&format!("{}/collections/w/docs/5000", remote.url)).await;
    assert!(bt.contains("\"color\":\"red\""), "{bt}");
    let (b, bv) = post(
        &rs,
        &json!({"vector": vecs[0], "filter": {"term": {"color": "red"}}}),
    )
    .await;
    assert_eq!(b, 400, "{bv}");
    assert!(
        bv["error"]["message"].as_str().unwrap().contains("color"),
        "{bv}"
    );

    // 6. Bad writes: 400s that name the problem; nothing is written.
    let good = new_docs(24, &[json!(6000)]);
    let mut wrong_type = good.clone();
    wrong_type[0]["fields"]["price"] = json!("cheap");
    let mut wrong_dim = good.clone();
    wrong_dim[0]["vector"] = json!([1.0, 2.0]);
    let mut not_finite = good.clone();
    not_finite[0]["vector"][3] = json!(1e39);
    let mut no_id = good.clone();
    no_id[0].as_object_mut().unwrap().remove("id");
    for (docs, says) in [
        (json!(wrong_type), "price"),
        (json!(wrong_dim), "dimensions"),
        (json!(not_finite), "finite"),
        (json!(no_id), "id"),
        (json!([{"id": 6000}]), "vector"),
    ] {
        let (b, bv) = post(&rw, &json!({"docs": docs, "wait": true})).await;
        assert_eq!(b, 400, "{docs}: {bv}");
        assert!(
            bv["error"]["message"].as_str().unwrap().contains(says),
            "{says}: {bv}"
        );
    }
    let (b, _) = post(&rd, &json!({"filter": {"term": {"nope": 1}}})).await;
    assert_eq!(b, 400);
    let (b, _) = post(&rd, &json!({"ids": [-1]})).await;
    assert_eq!(b, 400);
    let (b, _) = get_text(&format!("{}/collections/w/docs/6000", remote.url)).await;
    assert_eq!(b, 404);
    // `/stats`' document count follows the writes (refreshed by one coalesced count after
    // them, not one per write) and ends equal to the exact count.
    let (_, c) = post(&format!("{}/collections/w/count", remote.url), &json!({})).await;
    let want = c["count"].as_u64().unwrap();
    let t = Instant::now();
    loop {
        let stats = get_json(&client(), &format!("{}/stats", remote.url)).await;
        if stats["collections"]["w"]["docs"].as_u64() == Some(want) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "/stats docs {} != count {want}",
            stats["collections"]["w"]["docs"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    local.stop().await.unwrap();
    remote.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_not_waited_for_become_visible_through_the_cache() {
    let Some((q, dir)) = qdrant_or_skip("writes_not_waited_for_become_visible_through_the_cache")
    else {
        return;
    };
    let (coll, _) = make_collection(dir.path(), "nw", 12, 0..100);
    upload(&q, "nw", &coll, Existing::Refuse).await.unwrap();
    let mut c = qdrant_config(&q, "nw");
    // A long time to live: only the backend's version can make the cache drop a reply.
    c.cache = Some((1 << 20, Duration::from_secs(600)));
    let s = TestServer::start(c).await;
    let count = format!("{}/collections/nw/count", s.url);
    let filter = json!({"filter": {"range": {"stock": {"gte": 0}}}});
    let (_, v) = post(&count, &filter).await;
    let before = v["count"].as_u64().unwrap();
    let (_, v) = post(&count, &filter).await;
    assert_eq!(v["count"].as_u64(), Some(before));
    // A batch large enough that Qdrant takes a while to apply it, so counts land in the
    // window between the acknowledgement and the apply (and get cached there).
    let ids: Vec<Value> = (500..8500).map(|i| json!(i)).collect();
    let (st, v) = post(
        &format!("{}/collections/nw/docs", s.url),
        &json!({"docs": new_docs(31, &ids), "wait": false}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["upserted"], json!(8000));
    // Acknowledged at once; visible (through the cache) once Qdrant applies it.
    let t = Instant::now();
    loop {
        let (_, v) = post(&count, &filter).await;
        if v["count"].as_u64() == Some(before + 8000) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the write never became visible: {v}"
        );
    }
    let (st, v) = post(
        &format!("{}/collections/nw/delete", s.url),
        &json!({"ids": [500, 501], "wait": false}),
    )
    .await;
    assert_eq!((st, v["deleted"].clone()), (200, json!(2)), "{v}");
    let t = Instant::now();
    loop {
        let (_, v) = post(&count, &filter).await;
        if v["count"].as_u64() == Some(before + 7998) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the delete never became visible: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.stop().await.unwrap();
}
