//! Typed fields through HTTP: filtered search (every plan, checked against brute force),
//! counts, facets, sorted pages with cursors, the Elasticsearch-compatible reads, the
//! response cache and its invalidation on reload, and the bad inputs of each.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::{client, TestServer};
use rand::{RngExt, SeedableRng};
use searchd_collection::ingest::{ingest, IngestConfig};
use searchd_server::{IndexSource, ServerConfig};
use serde_json::{json, Value};

const DIM: usize = 16;
const N: usize = 1200;

struct Doc {
    id: String,
    vec: Vec<f32>,
    brand: Option<String>,
    price: Option<f64>,
    stock: i64,
    tags: Vec<String>,
    active: bool,
    created_ms: i64,
}

fn corpus(seed: u64) -> Vec<Doc> {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..N)
        .map(|i| {
            let mut v: Vec<f32> = (0..DIM).map(|_| r.random::<f32>() - 0.5).collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= n);
            // Zipf-ish brands: b0 is common, b19 rare; 10% missing.
            let z: f64 = r.random();
            let brand = (r.random::<f64>() > 0.1).then(|| format!("b{}", (z * z * 20.0) as u32));
            let price =
                (r.random::<f64>() > 0.05).then(|| (r.random::<f64>() * 50.0).round() / 2.0);
            let stock = if r.random::<f64>() < 0.3 {
                0
            } else {
                r.random_range(1..100i64)
            };
            let ntags = r.random_range(0..4usize);
            let tags = (0..ntags)
                .map(|_| format!("t{}", r.random_range(0..8u32)))
                .collect();
            Doc {
                id: format!("d{i}"),
                vec: v,
                brand,
                price,
                stock,
                tags,
                active: r.random::<f64>() < 0.5,
                created_ms: 1_704_067_200_000 + r.random_range(0..100i64) * 86_400_000,
            }
        })
        .collect()
}

fn rfc3339(ms: i64) -> String {
    // Days since 2024-01-01 (a leap year) to a date, good for the first 100 days.
    let days = (ms - 1_704_067_200_000) / 86_400_000;
    let months = [31, 29, 31, 30, 31];
    let (mut m, mut d) = (0usize, days);
    while d >= months[m] {
        d -= months[m];
        m += 1;
    }
    format!("2024-{:02}-{:02}T00:00:00Z", m + 1, d + 1)
}

fn make(dir: &Path, name: &str, docs: &[Doc], kind: searchd_engine::IndexKind) -> PathBuf {
    let path = dir.join(format!("{name}.jsonl"));
    let mut f = std::fs::File::create(&path).unwrap();
    for d in docs {
        let mut o = json!({"id": d.id, "vec": d.vec, "stock": d.stock, "tags": d.tags,
                           "active": d.active, "created": rfc3339(d.created_ms),
                           "text": format!("doc {}", d.id)});
        if let Some(b) = &d.brand {
            o["brand"] = json!(b);
        }
        if let Some(p) = d.price {
            o["price"] = json!(p);
        }
        writeln!(f, "{o}").unwrap();
    }
    drop(f);
    let out = dir.join(name);
    let mut c = IngestConfig::new(&path, &out);
    c.reader.vector_field = Some("vec".into());
    c.build.threads = 1;
    c.build.kind = kind;
    c.lexical = None;
    let report = ingest(&c, None, &|_| {}).unwrap();
    let schema = report.schema.expect("field indexes are built by default");
    let ty = |n: &str| schema.get(n).map(|f| f.ty.to_string());
    assert_eq!(ty("brand").as_deref(), Some("keyword"));
    assert_eq!(ty("price").as_deref(), Some("float"));
    assert_eq!(ty("stock").as_deref(), Some("integer"));
    assert_eq!(ty("tags").as_deref(), Some("keyword"));
    assert_eq!(ty("active").as_deref(), Some("bool"));
    assert_eq!(ty("created").as_deref(), Some("datetime"));
    assert!(
        schema.get("text").is_none(),
        "the text field is not a keyword"
    );
    out
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    let r = client().post(url).json(&body).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap())
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The filters of the test, each with its oracle predicate.
#[allow(clippy::type_complexity)]
fn filters() -> Vec<(Value, Box<dyn Fn(&Doc) -> bool>)> {
    vec![
        (
            json!({"term": {"brand": "b0"}}),
            Box::new(|d: &Doc| d.brand.as_deref() == Some("b0")),
        ),
        (
            json!({"term": {"brand": "b17"}}),
            Box::new(|d: &Doc| d.brand.as_deref() == Some("b17")),
        ),
        (
            json!({"range": {"price": {"gte": 10, "lt": 12.5}}}),
            Box::new(|d: &Doc| d.price.is_some_and(|p| (10.0..12.5).contains(&p))),
        ),
        (
            json!({"terms": {"tags": ["t1", "t2"]}}),
            Box::new(|d: &Doc| d.tags.iter().any(|t| t == "t1" || t == "t2")),
        ),
        (
            json!({"bool": {"filter": [{"term": {"active": true}}, {"range": {"stock": {"gt": 0}}}],
                            "must_not": [{"exists": {"field": "brand"}}]}}),
            Box::new(|d: &Doc| d.active && d.stock > 0 && d.brand.is_none()),
        ),
        (
            json!({"bool": {"should": [{"term": {"tags": "t7"}}, {"range": {"created": {"lt": "2024-01-05T00:00:00Z"}}}]}}),
            Box::new(|d: &Doc| {
                d.tags.iter().any(|t| t == "t7")
                    || d.created_ms < 1_704_067_200_000 + 4 * 86_400_000
            }),
        ),
        (
            json!({"ids": {"values": ["d1", "d5", "nope"]}}),
            Box::new(|d: &Doc| d.id == "d1" || d.id == "d5"),
        ),
        (json!({"match_all": {}}), Box::new(|_: &Doc| true)),
    ]
}

fn config(dir: &Path, docs: &[Doc]) -> ServerConfig {
    let hnsw = make(dir, "shop", docs, searchd_engine::IndexKind::Hnsw);
    let mut c = ServerConfig::new(IndexSource::Path(hnsw));
    c.name = Some("shop".into());
    c.threads = 2;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_search_counts_facets_pages() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus(7);
    let s = TestServer::start(config(dir.path(), &docs)).await;
    let u = format!("{}/collections/shop", s.url);
    let mut recall_sum = 0.0;
    let mut recall_n = 0;
    for (fi, (f, pred)) in filters().iter().enumerate() {
        let pass: Vec<&Doc> = docs.iter().filter(|d| pred(d)).collect();
        // Count.
        let (st, v) = post(&format!("{u}/count"), json!({"filter": f})).await;
        assert_eq!(st, 200, "{f}: {v}");
        assert_eq!(v["count"], json!(pass.len()), "count of {f}");
        // Facet over brand: exact, count desc then value asc.
        let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
        for d in &pass {
            if let Some(b) = &d.brand {
                *counts.entry(b.clone()).or_default() += 1;
            }
        }
        let mut want: Vec<(String, u64)> = counts.into_iter().collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let (st, v) = post(
            &format!("{u}/facet"),
            json!({"field": "brand", "filter": f, "size": 5}),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        let got: Vec<(String, u64)> = v["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["value"].as_str().unwrap().to_string(),
                    b["count"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            want.iter().take(5).cloned().collect::<Vec<_>>(),
            "facet of {f}"
        );
        assert_eq!(
            v["other_count"],
            json!(want.iter().skip(5).map(|x| x.1).sum::<u64>())
        );
        // Sorted pages: price desc (missing last), then id asc; walk with the cursor.
        let mut order: Vec<&Doc> = pass.clone();
        order.sort_by(|a, b| {
            let pa = a.price.map(|p| -p).unwrap_or(f64::INFINITY);
            let pb = b.price.map(|p| -p).unwrap_or(f64::INFINITY);
            pa.total_cmp(&pb).then(a.id.as_bytes().cmp(b.id.as_bytes()))
        });
        let mut walked: Vec<String> = Vec::new();
        let mut after: Option<Value> = None;
        loop {
            let mut body = json!({"filter": f, "sort": [{"price": "desc"}], "size": 97});
            if let Some(a) = &after {
                body["after"] = a.clone();
            }
            let (st, v) = post(&format!("{u}/scroll"), body).await;
            assert_eq!(st, 200, "{v}");
            let hits = v["hits"].as_array().unwrap();
            walked.extend(hits.iter().map(|h| h["id"].as_str().unwrap().to_string()));
            if v["next"].is_null() {
                break;
            }
            assert_eq!(v["next"], hits.last().unwrap()["sort"]);
            after = Some(v["next"].clone());
        }
        let want_ids: Vec<String> = order.iter().map(|d| d.id.clone()).collect();
        assert_eq!(walked, want_ids, "cursor walk of {f}");
        // Filtered kNN: never a non-matching hit; recall against exact filtered search.
        for q in 0..8 {
            let query = &docs[(q * 131 + fi * 17) % N].vec;
            let (st, v) = post(
                &format!("{u}/search"),
                json!({"vector": query, "k": 10, "filter": f, "ef": 64}),
            )
            .await;
            assert_eq!(st, 200, "{v}");
            let hits: Vec<String> = v["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["id"].as_str().unwrap().to_string())
                .collect();
            for h in &hits {
                let d = docs.iter().find(|d| &d.id == h).unwrap();
                assert!(pred(d), "{h} does not pass {f}");
            }
            let mut exact: Vec<(f32, &str)> = pass
                .iter()
                .map(|d| (cos(query, &d.vec), d.id.as_str()))
                .collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let want_n = exact.len().min(10);
            assert_eq!(hits.len(), want_n, "{f}: hits {hits:?}");
            if want_n > 0 {
                let kth = exact[want_n - 1].0 - 1e-5;
                let good = hits
                    .iter()
                    .filter(|h| {
                        let d = docs.iter().find(|d| &d.id == *h).unwrap();
                        cos(query, &d.vec) >= kth
                    })
                    .count();
                recall_sum += good as f64 / want_n as f64;
                recall_n += 1;
            }
            assert_eq!(v["matched"], json!(pass.len()), "{v}");
            assert!(v["plan"].is_string(), "{v}");
        }
    }
    let recall = recall_sum / recall_n as f64;
    assert!(recall >= 0.95, "filtered recall@10 {recall}");

    // Facets over a query's hits.
    let (st, v) = post(
        &format!("{u}/search"),
        json!({"vector": docs[3].vec, "k": 20, "facets": ["brand", {"field": "tags", "size": 2}]}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let total: u64 = v["facets"]["brand"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum::<u64>()
        + v["facets"]["brand"]["other_count"].as_u64().unwrap();
    let with_brand = v["hits"].as_array().unwrap().len() as u64; // upper bound
    assert!(total <= with_brand, "{v}");
    assert!(v["facets"]["tags"]["buckets"].as_array().unwrap().len() <= 2);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elasticsearch_reads() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus(11);
    let s = TestServer::start(config(dir.path(), &docs)).await;
    let u = &s.url;
    let f = json!({"bool": {"filter": [{"range": {"stock": {"gte": 1}}}], "must_not": [{"term": {"brand": "b0"}}]}});
    let pass: Vec<&Doc> = docs
        .iter()
        .filter(|d| d.stock >= 1 && d.brand.as_deref() != Some("b0"))
        .collect();
    let (st, v) = post(&format!("{u}/shop/_count"), json!({"query": f})).await;
    assert_eq!((st, v["count"].clone()), (200, json!(pass.len())), "{v}");
    let (st, v) = post(
        &format!("{u}/shop/_search"),
        json!({"query": f, "sort": [{"stock": "asc"}, "_id"], "size": 3, "from": 2,
               "_source": ["stock"], "track_total_hits": true,
               "aggs": {"by_brand": {"terms": {"field": "brand", "size": 3}}}}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["hits"]["total"],
        json!({"value": pass.len(), "relation": "eq"})
    );
    let mut order = pass.clone();
    order.sort_by(|a, b| {
        a.stock
            .cmp(&b.stock)
            .then(a.id.as_bytes().cmp(b.id.as_bytes()))
    });
    let ids: Vec<&str> = v["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        order[2..5]
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>()
    );
    let h0 = &v["hits"]["hits"][0];
    assert_eq!(h0["_source"], json!({"stock": order[2].stock}));
    assert_eq!(h0["sort"], json!([order[2].stock, order[2].id]));
    assert_eq!(h0["_index"], "shop");
    let b = &v["aggregations"]["by_brand"];
    assert!(
        b["buckets"][0]["key"].is_string() && b["buckets"][0]["doc_count"].is_u64(),
        "{b}"
    );
    assert!(b["sum_other_doc_count"].is_u64());
    // search_after continues where the page ended.
    let (st, v2) = post(
        &format!("{u}/shop/_search"),
        json!({"query": f, "sort": [{"stock": "asc"}, "_id"], "size": 2, "search_after": h0["sort"]}),
    )
    .await;
    assert_eq!(st, 200, "{v2}");
    assert_eq!(v2["hits"]["hits"][0]["_id"], json!(order[3].id));
    // knn with a filter.
    let (st, v) = post(
        &format!("{u}/shop/_search"),
        json!({"knn": {"field": "vec", "query_vector": docs[9].vec, "k": 5, "num_candidates": 50, "filter": f}}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["hits"]["hits"].as_array().unwrap().len(), 5);
    assert!(v["hits"]["hits"][0]["_score"].as_f64().is_some());
    // _doc and _mget.
    let r = client()
        .get(format!("{u}/shop/_doc/d3"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["found"].clone(), v["_id"].clone()),
        (json!(true), json!("d3"))
    );
    assert_eq!(v["_source"]["stock"], json!(docs[3].stock));
    let r = client()
        .get(format!("{u}/shop/_doc/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["found"], json!(false));
    let (st, v) = post(&format!("{u}/shop/_mget"), json!({"ids": ["d1", "zz"]})).await;
    assert_eq!(st, 200);
    assert_eq!(v["docs"][0]["found"], json!(true));
    assert_eq!(v["docs"][1]["found"], json!(false));
    // Unsupported features: a 400 naming them, before any work.
    for (body, needle) in [
        (
            json!({"aggs": {"x": {"avg": {"field": "price"}}}}),
            "aggs.x.avg",
        ),
        (json!({"script_fields": {}}), "script_fields"),
        (json!({"query": {"nested": {"path": "x"}}}), "nested"),
        (json!({"from": 9995, "size": 10}), "10000"),
        (json!({"query": {"match": {"brand": "x"}}}), "match"),
    ] {
        let (st, v) = post(&format!("{u}/shop/_search"), body.clone()).await;
        assert_eq!(st, 400, "{body}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{body}: {msg}");
    }
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus(3);
    let s = TestServer::start(config(dir.path(), &docs)).await;
    let u = format!("{}/collections/shop", s.url);
    let mut deep = json!({"term": {"brand": "b1"}});
    for _ in 0..40 {
        deep = json!({"bool": {"must": [deep]}});
    }
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "count",
            json!({"filter": {"term": {"colour": "red"}}}),
            "colour",
        ),
        (
            "count",
            json!({"filter": {"range": {"brand": {"gte": "a"}}}}),
            "filter.range.brand",
        ),
        (
            "count",
            json!({"filter": {"term": {"brand": {"x": 1}}}}),
            "filter.term.brand",
        ),
        (
            "count",
            json!({"filter": {"range": {"created": {"gte": "yesterday"}}}}),
            "filter.range.created",
        ),
        ("count", json!({"filter": {"bogus": {}}}), "bogus"),
        ("count", json!({"filter": deep}), "deeper than 32"),
        ("facet", json!({"field": "price"}), "price"),
        (
            "scroll",
            json!({"sort": [{"price": "desc"}], "after": [1, 2, 3]}),
            "after",
        ),
        ("scroll", json!({"size": 20000}), "size"),
        ("scroll", json!({"sort": ["_score"]}), "_score"),
        (
            "search",
            json!({"vector": docs[0].vec, "filter": {"term": {"nope": 1}}}),
            "nope",
        ),
        (
            "search",
            json!({"vector": docs[0].vec, "facets": ["price"]}),
            "price",
        ),
    ];
    for (route, body, needle) in cases {
        let (st, v) = post(&format!("{u}/{route}"), body.clone()).await;
        assert_eq!(st, 400, "{route} {body}: {v}");
        assert_eq!(v["error"]["code"], "invalid_argument");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.to_lowercase().contains(&needle.to_lowercase()),
            "{route} {body}: {msg}"
        );
    }
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_cache_hits_and_reload_invalidates() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus(5);
    let mut c = config(dir.path(), &docs);
    c.cache = Some((1 << 20, std::time::Duration::from_secs(60)));
    let s = TestServer::start(c).await;
    let u = format!("{}/collections/shop", s.url);
    let body = json!({"filter": {"term": {"brand": "b0"}}});
    let send = |b: Value| {
        let url = format!("{u}/count");
        async move {
            let r = client().post(url).json(&b).send().await.unwrap();
            let h = r
                .headers()
                .get("x-searchd-cache")
                .map(|v| v.to_str().unwrap().to_string());
            let v: Value = r.json().await.unwrap();
            (h, v)
        }
    };
    let (h1, v1) = send(body.clone()).await;
    let (h2, v2) = send(json!({ "filter" : { "term" : { "brand" : "b0" } } })).await;
    assert_eq!(h1.as_deref(), Some("miss"));
    assert_eq!(h2.as_deref(), Some("hit"), "the canonical body is the key");
    assert_eq!(v1["count"], v2["count"]);
    // A reload of another collection with other data: never the old answer.
    let other: Vec<Doc> = corpus(99);
    let dir2 = make(dir.path(), "shop2", &other, searchd_engine::IndexKind::Flat);
    let r = client()
        .post(format!("{}/admin/reload", s.url))
        .json(&json!({"index": dir2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let (h3, v3) = send(body.clone()).await;
    assert_eq!(h3.as_deref(), Some("miss"));
    let want = other
        .iter()
        .filter(|d| d.brand.as_deref() == Some("b0"))
        .count();
    assert_eq!(v3["count"], json!(want));
    let st: Value = client()
        .get(format!("{}/stats", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(st["cache"]["hits"], json!(1), "{}", st["cache"]);
    assert_eq!(st["cache"]["misses"], json!(2));
    let m = client()
        .get(format!("{}/metrics", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains("searchd_cache_hits_total 1"), "{m}");
    s.stop().await.unwrap();
}
