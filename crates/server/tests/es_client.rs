//! The official Elasticsearch Python client (PyPI `elasticsearch`, 8.x and 9.x) against a
//! real searchd server (issue "What a user sees", item 6): `info`, `count`, `bulk` (index,
//! create, delete, update with doc; per-item errors), `get`, `mget`, `index`, `delete`,
//! `search` (query, knn, aggs, search_after), `indices.get_mapping`, `cat.indices`.
//! The script (`tests/es_client/check.py`) checks each answer; this test runs it once per
//! client found in `SEARCHD_TEST_ES_PYTHON` (`.ci/es-client.sh` makes them).

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use searchd_testkit::needs::{require, Need};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_elasticsearch_clients_work() {
    let pythons = std::env::var("SEARCHD_TEST_ES_PYTHON")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let Some(pythons) = require(
        Need::EsClient,
        "the_official_elasticsearch_clients_work",
        pythons,
        "SEARCHD_TEST_ES_PYTHON is not set",
    ) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/es_client/check.py");
    let mut clients = 0;
    for python in pythons.split_whitespace() {
        // A fresh collection per client: the script writes.
        let d = tempfile::tempdir().unwrap();
        let coll = live_collection(d.path(), "books", 30);
        let mut cfg = live_config(&coll, "books");
        cfg.timeout = Duration::from_secs(10);
        let s = TestServer::start(cfg).await;
        let (py, sc, url) = (python.to_string(), script.clone(), s.url.clone());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(&py)
                .arg(&sc)
                .arg(&url)
                .arg("books")
                .arg(DIM.to_string())
                .output()
                .unwrap_or_else(|e| panic!("{py}: {e}"))
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{python} {}: {stdout}\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(stdout.trim().lines().last().unwrap())
            .unwrap_or_else(|e| panic!("{e}: {stdout}"));
        assert!(v["ran"].as_array().unwrap().len() >= 17, "{v}");
        println!(
            "elasticsearch client {}: {} checks",
            v["client"],
            v["ran"].as_array().unwrap().len()
        );
        s.stop().await.unwrap();
        clients += 1;
    }
    assert!(clients >= 1, "no python in SEARCHD_TEST_ES_PYTHON");
}

/// URL parameters of `_search` and `_count`: `size` and `from` are honoured (over the
/// body's), `q` and unknown ones are a 400 naming them — never silently ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_url_parameters_are_honoured_or_refused() {
    let d = tempfile::tempdir().unwrap();
    let coll = live_collection(d.path(), "books", 12);
    let s = TestServer::start(live_config(&coll, "books")).await;
    let c = client();
    let get = |q: &str| {
        let (c, u) = (c.clone(), format!("{}/books/_search{q}", s.url));
        async move {
            let r = c.get(u).send().await.unwrap();
            let (code, h, v) = split(r).await;
            assert_eq!(
                h.get("x-elastic-product").map(|v| v.to_str().unwrap()),
                Some("Elasticsearch"),
                "{v}"
            );
            (code, v)
        }
    };
    let (code, v) = get("?size=1").await;
    assert_eq!(
        (code, v["hits"]["hits"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{v}"
    );
    let (code, v) = get("?size=2&from=10&pretty").await;
    assert_eq!(
        (code, v["hits"]["hits"].as_array().map(Vec::len)),
        (200, Some(2)),
        "{v}"
    );
    for (q, needle) in [("?q=tide", "q"), ("?sise=1", "sise"), ("?size=x", "size")] {
        let (code, v) = get(q).await;
        assert_eq!(code, 400, "{q}: {v}");
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains(needle), "{q}: {m}");
    }
    let r = c
        .get(format!("{}/books/_count?size=1", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "_count takes no size");
    s.stop().await.unwrap();
}

/// `--cors-origin`: a preflight from an allowed origin is answered without a key, replies
/// carry the origin; another origin gets no CORS headers. `GET /version`, `?pretty`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_version_and_pretty() {
    let d = tempfile::tempdir().unwrap();
    let coll = live_collection(d.path(), "books", 6);
    let mut cfg = live_config(&coll, "books");
    cfg.cors_origin = vec!["https://app.example.com".into()];
    let s = TestServer::start(cfg).await;
    let c = client();
    let pre = c
        .request(reqwest::Method::OPTIONS, format!("{}/books/_search", s.url))
        .header("origin", "https://app.example.com")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "content-type,authorization",
        )
        .send()
        .await
        .unwrap();
    assert!(pre.status().is_success(), "{}", pre.status());
    assert_eq!(
        pre.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    let r = c
        .post(format!("{}/collections/books/count", s.url))
        .header("origin", "https://app.example.com")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    let other = c
        .post(format!("{}/collections/books/count", s.url))
        .header("origin", "https://evil.example.net")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
    let v = get_json(&c, &format!("{}/version", s.url)).await;
    assert!(v["version"].is_string() && v["git"].is_string(), "{v}");
    let text = c
        .get(format!("{}/collections/books?pretty", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.starts_with("{\n  \""), "{text}");
    s.stop().await.unwrap();
}
