//! The Qdrant backend against a real Qdrant (no mocks): the same requests to searchd's
//! local engine and to searchd over Qdrant on the same seeded documents must give the same
//! answers (exact search on both sides), ingest create/append/recreate, and the error
//! mapping when Qdrant stops and comes back.
//!
//! The binary comes from `QDRANT_BIN` or the workplace's `shared/qdrant/qdrant`; where
//! neither exists the tests print `skipped:` and pass.

#![cfg(feature = "qdrant")]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, TestServer};
use rand::{RngExt, SeedableRng};
use searchd_collection::ingest::{ingest, IngestConfig};
use searchd_collection::Collection;
use searchd_server::qdrant::admin::{ingest_collection, Existing, IngestOptions};
use searchd_server::qdrant::local::{find_binary, LocalQdrant};
use searchd_server::qdrant::QdrantTarget;
use searchd_server::{IndexSource, ServerConfig};
use serde_json::{json, Value};

const DIM: usize = 16;
const N: usize = 600;

fn qdrant_or_skip(test: &str) -> Option<(LocalQdrant, tempfile::TempDir)> {
    let Some(bin) = find_binary() else {
        println!(
            "skipped: {test}: no Qdrant binary (set QDRANT_BIN or put it at ../shared/qdrant/qdrant)"
        );
        return None;
    };
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
    let c = Arc::new(Collection::open(coll, &Default::default()).unwrap());
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

    let stats: Value = client()
        .get(format!("{}/stats", remote.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
