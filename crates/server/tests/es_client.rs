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
