//! Collections over HTTP (CONTRACTS.md "Security and operations"): `POST /collections`
//! creates one that takes writes at once and is served again after a restart,
//! `PUT /collections/{name}/mapping` adds a field index built over the older segments in the
//! background (`/stats` shows it), `DELETE /collections/{name}` removes it for good (nothing of
//! it comes back when the name is created again), and keys gate all three.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use searchd_server::auth::{new_key, Scope};
use searchd_server::{ServeSettings, ServerConfig};

fn url(s: &TestServer, path: &str) -> String {
    format!("{}{path}", s.url)
}

async fn send(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    key: Option<&str>,
    body: &str,
) -> (u16, serde_json::Value) {
    let mut rq = c.request(method, url);
    if !body.is_empty() {
        rq = rq
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    if let Some(k) = key {
        rq = rq.header("authorization", format!("Bearer {k}"));
    }
    let r = rq.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

#[track_caller]
fn refused(got: &(u16, serde_json::Value), status: u16, code: &str, needle: &str) {
    assert_eq!(got.0, status, "{}", got.1);
    assert_eq!(got.1["error"]["code"], code, "{}", got.1);
    let m = got.1["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains(needle), "{m:?} should mention {needle:?}");
}

fn settings(coll: &Path, data: &Path) -> ServerConfig {
    let mut c = ServerConfig::from_settings(&ServeSettings {
        collection: vec![format!("coll={}", coll.display())],
        data_dir: Some(data.to_path_buf()),
        refresh_ms: 50,
        ..ServeSettings::default()
    })
    .unwrap();
    c.threads = 2;
    c.drain_timeout = Duration::from_secs(10);
    c
}

fn docs(ids: std::ops::Range<u64>, shelf: &str) -> String {
    let v = data(ids.end as usize, DIM, 11);
    let docs: Vec<serde_json::Value> = ids
        .map(|i| {
            let color = ["red", "blue"][i as usize % 2];
            serde_json::json!({
                "id": i,
                "vector": &v[i as usize * DIM..(i as usize + 1) * DIM],
                "fields": {"color": color, "year": 2000 + i, "shelf": shelf},
            })
        })
        .collect();
    serde_json::json!({"docs": docs, "wait": true}).to_string()
}

async fn count(
    c: &reqwest::Client,
    s: &TestServer,
    name: &str,
    filter: serde_json::Value,
) -> (u16, serde_json::Value) {
    send(
        c,
        reqwest::Method::POST,
        &url(s, &format!("/collections/{name}/count")),
        None,
        &serde_json::json!({ "filter": filter }).to_string(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collections_are_created_filled_mapped_restarted_and_deleted_over_http() {
    let d = tempfile::tempdir().unwrap();
    let coll = live_collection(d.path(), "coll", 30);
    let data: PathBuf = d.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let s = TestServer::start(settings(&coll, &data)).await;
    let c = client();
    let post = |path: &str, body: serde_json::Value| {
        let (c, u) = (c.clone(), url(&s, path));
        async move { send(&c, reqwest::Method::POST, &u, None, &body.to_string()).await }
    };

    // Bad bodies: clear 400s, nothing made.
    for (body, needle) in [
        (
            serde_json::json!({"name": "_x", "dim": 8}),
            "invalid collection name",
        ),
        // The server's own routes: GET /console would never reach this collection.
        (
            serde_json::json!({"name": "console", "dim": 8}),
            "taken by the server's route /console",
        ),
        (serde_json::json!({"name": "b"}), "give dim"),
        (serde_json::json!({"name": "b", "dim": 0}), "dim must be"),
        (
            serde_json::json!({"name": "b", "dim": 8, "metric": "hamming"}),
            "metric",
        ),
        (
            serde_json::json!({"name": "b", "dim": 8, "index": {"kind": "ivfpq"}}),
            "ivfpq",
        ),
        (
            serde_json::json!({"name": "b", "dim": 8, "index": {"quantization": "pq:3"}}),
            "divide",
        ),
        (
            serde_json::json!({"name": "b", "dim": 8, "colour": 1}),
            "unknown field",
        ),
        (
            serde_json::json!({"name": "b", "dim": 8, "model": true}),
            "no --model",
        ),
        (
            serde_json::json!({"name": "b", "dim": 8, "mapping": {"properties": {"x": {"type": "blob"}}}}),
            "unknown field type",
        ),
    ] {
        refused(
            &post("/collections", body).await,
            400,
            "invalid_argument",
            needle,
        );
    }
    assert!(!data.join("b").exists());

    // Create: 201, listed, served at once (empty), then filled.
    let made = post(
        "/collections",
        serde_json::json!({"name": "books", "dim": DIM, "index": {"kind": "hnsw", "m": 8},
            "mapping": {"dynamic": false, "properties": {"color": {"type": "keyword"}}}}),
    )
    .await;
    assert_eq!(made.0, 201, "{}", made.1);
    assert_eq!(made.1["collection"], "books");
    refused(
        &post(
            "/collections",
            serde_json::json!({"name": "books", "dim": DIM}),
        )
        .await,
        409,
        "conflict",
        "served already",
    );
    let list = get_json(&c, &url(&s, "/collections")).await;
    let names: Vec<&str> = list["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["coll", "books"]);
    assert_eq!(
        count(&c, &s, "books", serde_json::json!({"match_all": {}}))
            .await
            .1["count"],
        0
    );
    let up = post(
        "/collections/books/docs",
        serde_json::from_str(&docs(0..40, "a")).unwrap(),
    )
    .await;
    assert_eq!(up.0, 200, "{}", up.1);
    let red = count(
        &c,
        &s,
        "books",
        serde_json::json!({"term": {"color": "red"}}),
    )
    .await;
    assert_eq!(red.1["count"], 20, "{}", red.1);
    // `year` is stored only (dynamic false): not filterable yet.
    let year = serde_json::json!({"range": {"year": {"gte": 2030}}});
    assert_eq!(count(&c, &s, "books", year.clone()).await.0, 400);

    // Add its index: acknowledged at once, built in the background, then exact.
    let put = |body: serde_json::Value| {
        let (c, u) = (c.clone(), url(&s, "/collections/books/mapping"));
        async move { send(&c, reqwest::Method::PUT, &u, None, &body.to_string()).await }
    };
    refused(
        &put(serde_json::json!({"properties": {"color": {"type": "integer"}}})).await,
        400,
        "invalid_argument",
        "cannot change",
    );
    let added = put(serde_json::json!({"properties": {"year": {"type": "long"}}})).await;
    assert_eq!(added.0, 200, "{}", added.1);
    assert_eq!(added.1["added"], serde_json::json!(["year"]));
    assert!(
        added.1["segments_to_build"].as_u64().unwrap() >= 1,
        "{}",
        added.1
    );
    let t = Instant::now();
    loop {
        let st = get_json(&c, &url(&s, "/stats")).await;
        let fb = &st["collections"]["books"]["live"]["fields_build"];
        assert!(fb.is_object(), "{st}");
        if fb["done"] == true {
            break;
        }
        assert!(fb["failed"].is_null(), "{fb}");
        assert!(t.elapsed() < Duration::from_secs(60), "never built: {fb}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = count(&c, &s, "books", year.clone()).await;
    assert_eq!(got.1["count"], 10, "{}", got.1);

    // A restart serves it again from the registry, with its documents and mapping.
    s.stop().await.unwrap();
    let s = TestServer::start(settings(&coll, &data)).await;
    assert_eq!(count(&c, &s, "books", year.clone()).await.1["count"], 10);

    // Delete: the default collection and unknown names are refused; books goes for good.
    let del = |name: &str| {
        let (c, u) = (c.clone(), url(&s, &format!("/collections/{name}")));
        async move { send(&c, reqwest::Method::DELETE, &u, None, "").await }
    };
    refused(&del("coll").await, 409, "conflict", "default collection");
    refused(&del("nope").await, 404, "not_found", "no collection named");
    let gone = del("books").await;
    assert_eq!(gone.0, 200, "{}", gone.1);
    assert!(!data.join("books").exists());
    refused(
        &count(&c, &s, "books", serde_json::json!({"match_all": {}})).await,
        404,
        "not_found",
        "books",
    );
    let reg = std::fs::read_to_string(data.join("searchd-collections.json")).unwrap();
    assert!(!reg.contains("books"), "{reg}");
    // Made again under its name: empty (nothing deleted comes back, not even a cached reply).
    let again = send(
        &c,
        reqwest::Method::POST,
        &url(&s, "/collections"),
        None,
        &serde_json::json!({"name": "books", "dim": DIM}).to_string(),
    )
    .await;
    assert_eq!(again.0, 201, "{}", again.1);
    assert_eq!(
        count(&c, &s, "books", serde_json::json!({"match_all": {}}))
            .await
            .1["count"],
        0
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_gate_collection_management() {
    let d = tempfile::tempdir().unwrap();
    let coll = live_collection(d.path(), "coll", 9);
    let data = d.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut text = String::new();
    let mut keys = Vec::new();
    for (name, scope, cols) in [
        ("reader", Scope::Read, None),
        ("coll-writer", Scope::Write, Some(vec!["coll".to_string()])),
        ("writer", Scope::Write, None),
        ("admin", Scope::Admin, None),
    ] {
        let (k, entry) = new_key(name, scope, cols.as_deref()).unwrap();
        text.push_str(&entry);
        text.push('\n');
        keys.push(k);
    }
    let kf = d.path().join("keys.toml");
    std::fs::write(&kf, text).unwrap();
    let mut cfg = settings(&coll, &data);
    cfg.api_keys = Some(kf);
    let s = TestServer::start(cfg).await;
    let c = client();
    let create = serde_json::json!({"name": "k1", "dim": DIM}).to_string();
    let u = url(&s, "/collections");
    refused(
        &send(&c, reqwest::Method::POST, &u, None, &create).await,
        401,
        "unauthorized",
        "key",
    );
    for k in [&keys[0], &keys[1]] {
        refused(
            &send(&c, reqwest::Method::POST, &u, Some(k), &create).await,
            403,
            "forbidden",
            "",
        );
    }
    let ok = send(&c, reqwest::Method::POST, &u, Some(&keys[2]), &create).await;
    assert_eq!(ok.0, 201, "{}", ok.1);
    // A write key without admin sees no paths.
    assert!(
        !ok.1.to_string().contains(data.to_str().unwrap()),
        "{}",
        ok.1
    );
    let mapping = serde_json::json!({"properties": {"n": {"type": "integer"}}}).to_string();
    let mu = url(&s, "/collections/k1/mapping");
    refused(
        &send(&c, reqwest::Method::PUT, &mu, Some(&keys[0]), &mapping).await,
        403,
        "forbidden",
        "",
    );
    refused(
        &send(&c, reqwest::Method::PUT, &mu, Some(&keys[1]), &mapping).await,
        403,
        "forbidden",
        "",
    );
    assert_eq!(
        send(&c, reqwest::Method::PUT, &mu, Some(&keys[2]), &mapping)
            .await
            .0,
        200
    );
    let du = url(&s, "/collections/k1");
    refused(
        &send(&c, reqwest::Method::DELETE, &du, Some(&keys[2]), "").await,
        403,
        "forbidden",
        "",
    );
    let del = send(&c, reqwest::Method::DELETE, &du, Some(&keys[3]), "").await;
    assert_eq!(del.0, 200, "{}", del.1);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_data_dir_refuses_to_create() {
    let d = tempfile::tempdir().unwrap();
    let coll = live_collection(d.path(), "coll", 6);
    let s = TestServer::start(live_config(&coll, "coll")).await;
    let got = send(
        &client(),
        reqwest::Method::POST,
        &url(&s, "/collections"),
        None,
        &serde_json::json!({"name": "x", "dim": DIM}).to_string(),
    )
    .await;
    refused(&got, 409, "conflict", "--data-dir");
    s.stop().await.unwrap();
}

/// A delete that stopped after moving the directory away (a crash) is finished at start:
/// the registry entry goes, the files go, the name is free.
#[test]
fn start_up_finishes_an_interrupted_delete() {
    let d = tempfile::tempdir().unwrap();
    let data = d.path();
    std::fs::create_dir(data.join(".deleted-gone-123")).unwrap();
    std::fs::write(data.join(".deleted-gone-123/x"), b"old").unwrap();
    std::fs::create_dir(data.join("kept")).unwrap();
    std::fs::write(
        data.join("searchd-collections.json"),
        r#"{"schema":"searchd.collections.v1","collections":[{"name":"gone","dir":"gone"},{"name":"kept","dir":"kept"}]}"#,
    )
    .unwrap();
    let got = searchd_server::registry::registered(data).unwrap();
    assert_eq!(got, vec![("kept".to_string(), data.join("kept"))]);
    assert!(!data.join(".deleted-gone-123").exists());
    let reg = std::fs::read_to_string(data.join("searchd-collections.json")).unwrap();
    assert!(!reg.contains("gone"), "{reg}");
    // A registry that is not ours is a clear error.
    std::fs::write(data.join("searchd-collections.json"), "{}").unwrap();
    let e = searchd_server::registry::registered(data)
        .unwrap_err()
        .to_string();
    assert!(e.contains("searchd-collections.json"), "{e}");
}

/// `--addr 18082` (a bare port) is refused with an example of the right form.
#[test]
fn an_address_without_a_port_gets_an_example() {
    for (addr, needle) in [
        ("18082", "127.0.0.1:18082"),
        ("localhost", "localhost:8080"),
    ] {
        let e = ServerConfig::from_settings(&ServeSettings {
            addr: addr.into(),
            collection: vec!["x".into()],
            ..ServeSettings::default()
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains(needle), "{addr}: {e}");
    }
}
