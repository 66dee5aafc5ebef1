//! API keys over real sockets (CONTRACTS.md "Security and operations"): every mutating
//! route refuses without a write key, a read key cannot write, a key for collection A
//! cannot touch B, the key file reloads without a restart, and a non-loopback address
//! without keys is refused at start.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use searchd_server::auth::{new_key, Scope};
use searchd_server::{ServeSettings, ServerConfig};

fn url(s: &TestServer, path: &str) -> String {
    format!("{}{path}", s.url)
}

/// A key file of `keys` (name, scope, collections); returns its path and the keys.
fn key_file(dir: &Path, keys: &[(&str, Scope, Option<&[&str]>)]) -> (PathBuf, Vec<String>) {
    let mut text = String::new();
    let mut out = Vec::new();
    for (name, scope, cols) in keys {
        let cols: Option<Vec<String>> = cols.map(|c| c.iter().map(|s| s.to_string()).collect());
        let (k, entry) = new_key(name, *scope, cols.as_deref()).unwrap();
        text.push_str(&entry);
        text.push('\n');
        out.push(k);
    }
    let p = dir.join("keys.toml");
    std::fs::write(&p, text).unwrap();
    (p, out)
}

/// One request; `key` as `Authorization: Bearer` (or `api-key` when `qdrant_header`).
async fn send(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    key: Option<&str>,
    qdrant_header: bool,
    body: &str,
) -> (u16, serde_json::Value) {
    let mut rq = c.request(method, url);
    if !body.is_empty() {
        rq = rq
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    if let Some(k) = key {
        rq = if qdrant_header {
            rq.header("api-key", k)
        } else {
            rq.header("authorization", format!("Bearer {k}"))
        };
    }
    let r = rq.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

fn upsert_body(id: u64) -> String {
    let v = data(1, DIM, 7);
    serde_json::json!({"docs": [{"id": id, "vector": v, "fields": {"color": "defaced"}}], "wait": true})
        .to_string()
}

async fn count(c: &reqwest::Client, s: &TestServer, key: &str, name: &str) -> u64 {
    let u = url(s, &format!("/collections/{name}/count"));
    let (st, v) = send(c, reqwest::Method::POST, &u, Some(key), false, "{}").await;
    assert_eq!(st, 200, "{v}");
    v["count"].as_u64().unwrap()
}

#[track_caller]
fn refused(got: &(u16, serde_json::Value), status: u16, code: &str, needle: &str) {
    assert_eq!(got.0, status, "{}", got.1);
    assert_eq!(got.1["error"]["code"], code, "{}", got.1);
    let m = got.1["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains(needle), "{m:?} should mention {needle:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_gate_every_route_by_scope_and_collection() {
    let dir = tempfile::tempdir().unwrap();
    let a = live_collection(dir.path(), "a", 10);
    let b = live_collection(dir.path(), "b", 12);
    let (file, k) = key_file(
        dir.path(),
        &[
            ("reader", Scope::Read, None),
            ("writer-a", Scope::Write, Some(&["a"])),
            ("admin", Scope::Admin, None),
        ],
    );
    let (reader, writer_a, admin) = (k[0].as_str(), k[1].as_str(), k[2].as_str());
    let mut cfg = live_config(&a, "a");
    cfg.more = vec![("b".into(), searchd_server::IndexSource::Path(b))];
    cfg.api_keys = Some(file);
    let s = TestServer::start(cfg).await;
    let c = client();
    use reqwest::Method as M;

    // The probes stay open.
    for p in ["/health", "/ready"] {
        assert_eq!(
            send(&c, M::GET, &url(&s, p), None, false, "").await.0,
            200,
            "{p}"
        );
    }
    // So do the console (its page and assets hold no data; the page sends the key its
    // user types) and the OpenAPI document, but not Elasticsearch's root, which `GET /` is
    // for an ES client.
    for p in [
        "/",
        "/console",
        "/console/console.js",
        "/console/console.css",
        "/openapi.json",
    ] {
        let r = c.get(url(&s, p)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{p} without a key");
    }
    let r = c
        .get(url(&s, "/"))
        .header(
            "accept",
            "application/vnd.elasticsearch+json; compatible-with=8",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "Elasticsearch's root without a key");
    // The delete-everything probe of the issue, without a key and with a wrong one.
    let wipe = r#"{"filter": {"match_all": {}}, "wait": true}"#;
    let del = url(&s, "/collections/a/delete");
    refused(
        &send(&c, M::POST, &del, None, false, wipe).await,
        401,
        "unauthorized",
        "API key",
    );
    refused(
        &send(&c, M::POST, &del, Some("sdk_guess"), false, wipe).await,
        401,
        "unauthorized",
        "unknown API key",
    );
    // Every other route needs a key too: reads, the Elasticsearch shapes, unknown paths.
    for (m, p, body) in [
        (M::POST, "/collections/a/search", "{}"),
        (M::POST, "/collections/a/count", "{}"),
        (M::GET, "/collections/a/docs/1", ""),
        (M::POST, "/a/_search", "{}"),
        (M::GET, "/stats", ""),
        (M::GET, "/metrics", ""),
        (M::GET, "/collections", ""),
        (M::POST, "/collections/a/docs", "{}"),
        (M::DELETE, "/collections/a/docs/1", ""),
        (M::POST, "/collections/a/snapshot", "{}"),
        (M::POST, "/admin/reload", "{}"),
        (M::GET, "/no/such/route", ""),
    ] {
        let got = send(&c, m.clone(), &url(&s, p), None, false, body).await;
        assert_eq!(got.0, 401, "{m} {p}: {}", got.1);
    }

    // A read key reads everything and changes nothing.
    assert_eq!(count(&c, &s, reader, "a").await, 10);
    assert_eq!(count(&c, &s, reader, "b").await, 12);
    for p in ["/stats", "/collections", "/collections/b", "/a/_search"] {
        let got = send(&c, M::GET, &url(&s, p), Some(reader), false, "").await;
        assert_eq!(got.0, 200, "GET {p}: {}", got.1);
    }
    refused(
        &send(&c, M::POST, &del, Some(reader), false, wipe).await,
        403,
        "forbidden",
        "scope read",
    );
    refused(
        &send(
            &c,
            M::POST,
            &url(&s, "/collections/a/docs"),
            Some(reader),
            true,
            &upsert_body(1),
        )
        .await,
        403,
        "forbidden",
        "needs write",
    );
    refused(
        &send(
            &c,
            M::POST,
            &url(&s, "/collections/a/snapshot"),
            Some(reader),
            false,
            "{}",
        )
        .await,
        403,
        "forbidden",
        "needs admin",
    );

    // A write key for a writes a (Qdrant's header works too), not b, and not the routes
    // that span every collection.
    let got = send(
        &c,
        M::POST,
        &url(&s, "/collections/a/docs"),
        Some(writer_a),
        true,
        &upsert_body(100),
    )
    .await;
    assert_eq!(got.0, 200, "{}", got.1);
    refused(
        &send(
            &c,
            M::POST,
            &url(&s, "/collections/b/docs"),
            Some(writer_a),
            false,
            &upsert_body(100),
        )
        .await,
        403,
        "forbidden",
        "may not use collection \"b\"",
    );
    refused(
        &send(
            &c,
            M::POST,
            &url(&s, "/collections/b/delete"),
            Some(writer_a),
            false,
            wipe,
        )
        .await,
        403,
        "forbidden",
        "\"b\"",
    );
    refused(
        &send(&c, M::GET, &url(&s, "/stats"), Some(writer_a), false, "").await,
        403,
        "forbidden",
        "spans every collection",
    );
    let got = send(
        &c,
        M::POST,
        &url(&s, "/collections/a/search"),
        Some(writer_a),
        false,
        r#"{"id": 1, "k": 3}"#,
    )
    .await;
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(count(&c, &s, reader, "a").await, 11);
    assert_eq!(count(&c, &s, reader, "b").await, 12, "b untouched");

    // The admin key snapshots (admin routes take keys instead of --admin-token).
    let got = send(
        &c,
        M::POST,
        &url(&s, "/collections/a/snapshot"),
        Some(admin),
        false,
        "{}",
    )
    .await;
    assert_eq!(got.0, 200, "{}", got.1);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_file_reloads_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let a = live_collection(dir.path(), "a", 5);
    let (file, k) = key_file(dir.path(), &[("reader", Scope::Read, None)]);
    let mut cfg = live_config(&a, "a");
    cfg.api_keys = Some(file.clone());
    let s = TestServer::start(cfg).await;
    let c = client();
    let docs = url(&s, "/collections/a/docs");
    let (writer, entry) = new_key("writer", Scope::Write, None).unwrap();
    let got = send(
        &c,
        reqwest::Method::POST,
        &docs,
        Some(&writer),
        false,
        &upsert_body(50),
    )
    .await;
    assert_eq!(got.0, 401, "{}", got.1);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&entry);
    std::fs::write(&file, &text).unwrap();
    let t = Instant::now();
    loop {
        let got = send(
            &c,
            reqwest::Method::POST,
            &docs,
            Some(&writer),
            false,
            &upsert_body(50),
        )
        .await;
        if got.0 == 200 {
            break;
        }
        assert_eq!(got.0, 401, "{}", got.1);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the new key was never taken"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A broken file keeps the keys in force.
    std::fs::write(&file, "[[key]]\nname = \"half written").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let got = send(
        &c,
        reqwest::Method::POST,
        &url(&s, "/collections/a/count"),
        Some(&k[0]),
        false,
        "{}",
    )
    .await;
    assert_eq!(got.0, 200, "{}", got.1);
    let got = send(
        &c,
        reqwest::Method::POST,
        &docs,
        Some(&writer),
        false,
        &upsert_body(51),
    )
    .await;
    assert_eq!(got.0, 200, "{}", got.1);
    s.stop().await.unwrap();
}

#[test]
fn a_non_loopback_address_without_keys_is_refused() {
    let f = fixture();
    let settings = |addr: &str, keys: Option<PathBuf>, insecure: bool| ServeSettings {
        index: Some(f.index_dir.clone()),
        addr: addr.into(),
        api_keys: keys,
        insecure,
        ..ServeSettings::default()
    };
    let m = match ServerConfig::from_settings(&settings("0.0.0.0:8080", None, false)) {
        Ok(_) => panic!("0.0.0.0 without keys was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(m.contains("--api-keys") && m.contains("--insecure"), "{m}");
    assert!(ServerConfig::from_settings(&settings("0.0.0.0:8080", None, true)).is_ok());
    assert!(ServerConfig::from_settings(&settings("127.0.0.1:8080", None, false)).is_ok());
    assert!(ServerConfig::from_settings(&settings("localhost:8080", None, false)).is_ok());
    let (file, _) = key_file(f.dir.path(), &[("ops", Scope::Admin, None)]);
    assert!(ServerConfig::from_settings(&settings("0.0.0.0:8080", Some(file), false)).is_ok());
    // A key file that does not parse refuses the start, naming the file.
    let bad = f.dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[key]]\nname = \"x\"\nhash = \"nope\"\nscope = \"read\"\n",
    )
    .unwrap();
    let m = match ServerConfig::from_settings(&settings("0.0.0.0:8080", Some(bad), false)) {
        Ok(_) => panic!("a bad key file was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(m.contains("bad.toml") && m.contains("hash must be"), "{m}");
    // A file without keys refuses the start too (it would lock everyone out).
    let empty = f.dir.path().join("empty.toml");
    std::fs::write(&empty, "# no keys yet\n").unwrap();
    let m = match ServerConfig::from_settings(&settings("0.0.0.0:8080", Some(empty), false)) {
        Ok(_) => panic!("an empty key file was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(m.contains("empty.toml") && m.contains("no [[key]]"), "{m}");
}
