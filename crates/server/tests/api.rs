//! The HTTP contract: happy paths against exact search, every error of the table, the
//! observability endpoints. Every reply these tests receive is validated against the
//! server's OpenAPI document (`GET /openapi.json`, `contract/mod.rs`), and each test asserts
//! how many were.

mod common;
mod contract;

use common::*;
use searchd_engine::Metric;

/// POST a JSON body (as text, so tests can send anything); the reply is validated against
/// the OpenAPI document (this shadows `common::post`).
async fn post(
    c: &reqwest::Client,
    url: &str,
    body: &str,
) -> (u16, reqwest::header::HeaderMap, serde_json::Value) {
    contract::send(
        c,
        c.post(url)
            .header("content-type", "application/json")
            .body(body.to_string()),
    )
    .await
}

/// GET a 200 JSON reply, validated against the OpenAPI document (this shadows
/// `common::get_json`).
async fn get_json(c: &reqwest::Client, url: &str) -> serde_json::Value {
    let (st, _, v) = contract::send(c, c.get(url)).await;
    assert_eq!(st, 200, "GET {url}");
    v
}

fn url(s: &TestServer, path: &str) -> String {
    format!("{}{path}", s.url)
}

fn exact_ids(index: &searchd_engine::Index, q: &[f32], k: usize) -> Vec<u64> {
    index
        .exact_search(q, k)
        .unwrap()
        .iter()
        .map(|h| h.id)
        .collect()
}

fn ids(v: &serde_json::Value) -> Vec<u64> {
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_u64().unwrap())
        .collect()
}

fn scores(v: &serde_json::Value) -> Vec<f64> {
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_modes_match_exact_search() {
    let f = fixture();
    let s = TestServer::start(f.config()).await;
    let c = client();
    let search = url(&s, "/search");

    // vector mode, default k = 10
    let q = data(1, DIM, 1234);
    let body = serde_json::json!({ "vector": q }).to_string();
    let (st, h, v) = post(&c, &search, &body).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(ids(&v), exact_ids(&f.index, &q, 10));
    let sc = scores(&v);
    assert!(
        sc.windows(2).all(|w| w[0] >= w[1]),
        "sorted best first: {sc:?}"
    );
    assert!(sc[0] <= 1.0001 && sc[0] > 0.0);
    assert!(v["took_us"].as_u64().is_some());
    // exact scores
    let q_prep = f.index.prepare_query(&q).unwrap();
    for hit in v["hits"].as_array().unwrap() {
        let id = hit["id"].as_u64().unwrap();
        let want = Metric::Cosine.score(&q_prep, &f.index.vector(id).unwrap());
        assert!((hit["score"].as_f64().unwrap() - want as f64).abs() < 1e-5);
    }

    // explicit k and ef
    let body = serde_json::json!({ "vector": q, "k": 37, "ef": 4096 }).to_string();
    let (st, _, v) = post(&c, &search, &body).await;
    assert_eq!(st, 200);
    assert_eq!(ids(&v), exact_ids(&f.index, &q, 37));

    // k larger than the index: every vector, once
    let (st, _, v) = post(&c, &search, r#"{"qidx": 0, "k": 1000}"#).await;
    assert_eq!(st, 200);
    assert_eq!(ids(&v).len(), 500);

    // qidx mode == vector mode with that row
    for qi in [0usize, 7, 19] {
        let (st, _, v) = post(&c, &search, &format!(r#"{{"qidx": {qi}, "k": 5}}"#)).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(ids(&v), exact_ids(&f.index, f.queries.row(qi), 5));
    }

    // id mode: the stored vector as query, the id itself left out
    for id in [0u64, 123, 499] {
        let (st, _, v) = post(&c, &search, &format!(r#"{{"id": {id}, "k": 8}}"#)).await;
        assert_eq!(st, 200, "{v}");
        let got = ids(&v);
        assert!(
            !got.contains(&id),
            "id {id} excluded from its own hits: {got:?}"
        );
        let want: Vec<u64> = exact_ids(&f.index, &f.index.vector(id).unwrap(), 9)
            .into_iter()
            .filter(|&x| x != id)
            .take(8)
            .collect();
        assert_eq!(got, want);
    }
    // keep-alive: many requests on one client work
    for _ in 0..50 {
        let (st, _, _) = post(&c, &search, r#"{"qidx": 3}"#).await;
        assert_eq!(st, 200);
    }
    contract::assert_validated(&s.url, 59);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_contract_errors() {
    let f = fixture();
    let mut cfg = f.config();
    cfg.body_limit = 4096;
    let s = TestServer::start(cfg).await;
    let c = client();
    let search = url(&s, "/search");
    let q16 = serde_json::to_string(&data(1, DIM, 5)).unwrap();
    let q15 = serde_json::to_string(&data(1, DIM - 1, 5)).unwrap();

    // (body, status, code, message needle)
    let cases: Vec<(String, u16, &str, &str)> = vec![
        // not JSON
        (
            r#"{"vector": [1, 2"#.into(),
            400,
            "invalid_json",
            "line 1 column",
        ),
        ("hello".into(), 400, "invalid_json", "line 1 column 1"),
        ("".into(), 400, "invalid_json", "EOF"),
        (r#"{"qidx": 1,}"#.into(), 400, "invalid_json", "column"),
        // wrong shape
        ("[1, 2, 3]".into(), 400, "invalid_argument", "invalid type"),
        (r#""qidx""#.into(), 400, "invalid_argument", "invalid type"),
        (
            r#"{"qidx": 1, "foo": 2}"#.into(),
            400,
            "invalid_argument",
            "unknown field `foo`",
        ),
        (
            r#"{"qidx": 1, "qidx": 2}"#.into(),
            400,
            "invalid_argument",
            "duplicate field",
        ),
        (
            r#"{"vector": "abc"}"#.into(),
            400,
            "invalid_argument",
            "invalid type",
        ),
        (
            r#"{"vector": [1, "x"]}"#.into(),
            400,
            "invalid_argument",
            "invalid type",
        ),
        (
            r#"{"vector": [1, null]}"#.into(),
            400,
            "invalid_argument",
            "invalid type",
        ),
        // dimensions, NaN, infinity, huge numbers, zero
        (
            format!(r#"{{"vector": {q15}}}"#),
            400,
            "invalid_argument",
            "vector has 15 dimensions, the index has 16",
        ),
        (
            r#"{"vector": []}"#.into(),
            400,
            "invalid_argument",
            "vector has 0 dimensions",
        ),
        (
            r#"{"vector": [NaN, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}"#.into(),
            400,
            "invalid_argument",
            "NaN",
        ),
        (
            r#"{"vector": [1, Infinity, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}"#.into(),
            400,
            "invalid_argument",
            "infinity",
        ),
        (
            r#"{"vector": [1, -Infinity, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}"#.into(),
            400,
            "invalid_argument",
            "infinity",
        ),
        (
            r#"{"vector": [1e999, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}"#.into(),
            400,
            "invalid_argument",
            "out of range",
        ),
        (
            r#"{"vector": [1, 1e39, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}"#.into(),
            400,
            "invalid_argument",
            "component 1 is not a finite number",
        ),
        (
            r#"{"vector": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}"#.into(),
            400,
            "invalid_argument",
            "zero length",
        ),
        // k / ef
        (
            r#"{"qidx": 1, "k": 0}"#.into(),
            400,
            "invalid_argument",
            "k must be an integer between 1 and 1000, got 0",
        ),
        (
            r#"{"qidx": 1, "k": 1001}"#.into(),
            400,
            "invalid_argument",
            "k must be an integer between 1 and 1000, got 1001",
        ),
        (
            r#"{"qidx": 1, "k": -1}"#.into(),
            400,
            "invalid_argument",
            "got -1",
        ),
        (
            r#"{"qidx": 1, "k": 2.5}"#.into(),
            400,
            "invalid_argument",
            "got 2.5",
        ),
        (
            r#"{"qidx": 1, "k": 1e30}"#.into(),
            400,
            "invalid_argument",
            "k must be",
        ),
        (
            r#"{"qidx": 1, "k": 99999999999999999999999999}"#.into(),
            400,
            "invalid_argument",
            "k must be",
        ),
        (
            r#"{"qidx": 1, "k": 1e999}"#.into(),
            400,
            "invalid_argument",
            "out of range",
        ),
        (
            r#"{"qidx": 1, "k": "10"}"#.into(),
            400,
            "invalid_argument",
            "invalid type",
        ),
        (
            r#"{"qidx": 1, "ef": 4097}"#.into(),
            400,
            "invalid_argument",
            "ef must be an integer between 1 and 4096, got 4097",
        ),
        (
            r#"{"qidx": 1, "ef": 0}"#.into(),
            400,
            "invalid_argument",
            "ef must be",
        ),
        (
            r#"{"qidx": 1, "ef": -5}"#.into(),
            400,
            "invalid_argument",
            "ef must be",
        ),
        // qidx
        (
            r#"{"qidx": 20}"#.into(),
            400,
            "invalid_argument",
            "qidx 20 is out of range: the query matrix has 20 rows",
        ),
        (
            r#"{"qidx": -1}"#.into(),
            400,
            "invalid_argument",
            "qidx must be",
        ),
        (
            r#"{"qidx": 1.5}"#.into(),
            400,
            "invalid_argument",
            "qidx must be",
        ),
        // exactly one of
        (
            r#"{}"#.into(),
            400,
            "invalid_argument",
            "exactly one of vector, qidx, id or text; none",
        ),
        (
            r#"{"k": 5}"#.into(),
            400,
            "invalid_argument",
            "none was given",
        ),
        (
            format!(r#"{{"vector": {q16}, "qidx": 1}}"#),
            400,
            "invalid_argument",
            "vector and qidx",
        ),
        (
            r#"{"qidx": 1, "id": 2}"#.into(),
            400,
            "invalid_argument",
            "qidx and id",
        ),
        // id
        (
            r#"{"id": 500}"#.into(),
            404,
            "not_found",
            "id 500 is not in the index",
        ),
        (
            r#"{"id": 18446744073709551615}"#.into(),
            404,
            "not_found",
            "not in the index",
        ),
        (
            r#"{"id": -3}"#.into(),
            400,
            "invalid_argument",
            "id must be",
        ),
        (
            r#"{"id": 99999999999999999999999}"#.into(),
            400,
            "invalid_argument",
            "id must be",
        ),
    ];
    for (body, status, code, needle) in &cases {
        let got = post(&c, &search, body).await;
        assert_eq!(got.0, *status, "body {body}: {}", got.2);
        assert_error(&got, *status, code, needle);
    }

    // 413: over the limit (Content-Length known)
    let big = format!(r#"{{"vector": [{}]}}"#, vec!["0.125"; 2000].join(","));
    let got = post(&c, &search, &big).await;
    assert_error(&got, 413, "body_too_large", "limit of 4096 bytes");

    // 415
    let got = contract::send(
        &c,
        c.post(&search)
            .header("content-type", "text/plain")
            .body(r#"{"qidx":1}"#),
    )
    .await;
    assert_error(&got, 415, "unsupported_media_type", "application/json");
    let got = contract::send(&c, c.post(&search).body(r#"{"qidx":1}"#)).await;
    assert_error(&got, 415, "unsupported_media_type", "no Content-Type");
    let got = contract::send(
        &c,
        c.post(&search)
            .header("content-type", "application/json; charset=utf-8")
            .body(r#"{"qidx":1}"#),
    )
    .await;
    assert_eq!(got.0, 200);

    // 404 / 405
    let got = contract::send(&c, c.get(url(&s, "/nope/x/y"))).await;
    assert_error(&got, 404, "not_found", "no route for GET /nope/x/y");
    // `GET /{index}` is Elasticsearch's index metadata route.
    let got = contract::send(&c, c.get(url(&s, "/nope"))).await;
    assert_error(&got, 404, "not_found", "no collection named \"nope\"");
    let got = contract::send(
        &c,
        c.post(url(&s, "/search/x"))
            .header("content-type", "application/json")
            .body("{}"),
    )
    .await;
    assert_error(&got, 404, "not_found", "/search/x");
    let got = contract::send(&c, c.get(&search)).await;
    let allow = got.1.get("allow").map(|v| v.to_str().unwrap().to_string());
    assert_error(
        &got,
        405,
        "method_not_allowed",
        "/search does not accept GET",
    );
    assert_eq!(allow.as_deref(), Some("POST"));
    let got = contract::send(&c, c.delete(url(&s, "/health"))).await;
    assert_error(&got, 405, "method_not_allowed", "DELETE");
    let got = contract::send(&c, c.get(url(&s, "/admin/reload"))).await;
    assert_error(&got, 405, "method_not_allowed", "GET");

    // The server is still fine.
    let (st, _, _) = post(&c, &search, r#"{"qidx": 2}"#).await;
    assert_eq!(st, 200);
    contract::assert_validated(&s.url, cases.len() + 11);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qidx_without_queries_is_invalid() {
    let f = fixture();
    let mut cfg = f.config();
    cfg.queries = None;
    let s = TestServer::start(cfg).await;
    let c = client();
    let got = post(&c, &url(&s, "/search"), r#"{"qidx": 0}"#).await;
    assert_error(&got, 400, "invalid_argument", "--queries");
    contract::assert_validated(&s.url, 1);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_body_over_the_limit_is_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let f = fixture();
    let mut cfg = f.config();
    cfg.body_limit = 1000;
    let s = TestServer::start(cfg).await;
    let mut tcp = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let chunk = "x".repeat(600);
    let req = format!(
        "POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len(),
        chunk.len()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(5), tcp.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"code\":\"body_too_large\""), "{text}");
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let ct = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    let doc = contract::document(&client(), &s.url).await;
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    contract::check(&doc, "POST", &url(&s, "/search"), 413, &ct, Some(&v));
    contract::assert_validated(&s.url, 1);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_ready_stats_and_metrics() {
    let f = fixture();
    let s = TestServer::start(f.config()).await;
    let c = client();
    let search = url(&s, "/search");
    let h = get_json(&c, &url(&s, "/health")).await;
    assert_eq!(h["status"], "ok");
    let r = get_json(&c, &url(&s, "/ready")).await;
    assert_eq!(r["status"], "ready");

    for _ in 0..5 {
        assert_eq!(post(&c, &search, r#"{"qidx": 1}"#).await.0, 200);
    }
    assert_eq!(post(&c, &search, r#"{"qidx": 100}"#).await.0, 400);
    assert_eq!(post(&c, &search, r#"nope"#).await.0, 400);
    assert_eq!(post(&c, &search, r#"{"id": 100000}"#).await.0, 404);
    assert_eq!(contract::send(&c, c.get(url(&s, "/nothing"))).await.0, 404);
    // observability requests are not counted
    let _ = get_json(&c, &url(&s, "/health")).await;

    let st = get_json(&c, &url(&s, "/stats")).await;
    assert!(st["uptime_s"].as_f64().unwrap() >= 0.0);
    assert_eq!(st["index"]["kind"], "flat");
    assert_eq!(st["index"]["n"], 500);
    assert_eq!(st["index"]["dim"], 16);
    assert_eq!(st["index"]["metric"], "cosine");
    assert!(st["index"]["params"].is_object());
    assert!(st["index"]["bytes"].as_u64().unwrap() >= 500 * 16 * 4);
    let rq = &st["requests"];
    assert_eq!(rq["total"], 9, "{st}");
    assert_eq!(rq["ok"], 5);
    assert_eq!(rq["client_errors"], 4);
    assert_eq!(rq["rejected"], 0);
    assert_eq!(rq["timeouts"], 0);
    assert_eq!(st["inflight"], 0);
    let lat = &st["latency_ms"];
    for p in ["p50", "p95", "p99"] {
        assert!(lat[p].as_f64().unwrap() > 0.0, "{lat}");
    }
    assert!(lat["p50"].as_f64() <= lat["p99"].as_f64());
    assert!(st["qps_1m"].as_f64().unwrap() > 0.0);
    let p = &st["process"];
    assert!(p["rss_bytes"].as_u64().unwrap() > 1 << 20);
    assert!(p["cpu_seconds"].as_f64().unwrap() >= 0.0);
    assert!(p["threads"].as_u64().unwrap() >= 3);

    // /metrics: parse every sample line, and check the counters agree with /stats.
    let (status, headers, text, _) = contract::send_raw(&c, c.get(url(&s, "/metrics"))).await;
    assert_eq!(status, 200);
    let ct = headers["content-type"].to_str().unwrap().to_string();
    assert!(
        ct.contains("openmetrics-text") || ct.contains("text/plain"),
        "{ct}"
    );
    let mut samples = std::collections::HashMap::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad line {line:?}"));
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let name_ok = name
            .split('{')
            .next()
            .unwrap()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        assert!(name_ok, "bad metric name in {line:?}");
        samples.insert(name.to_string(), v);
    }
    assert!(text.contains("# TYPE searchd_requests counter"), "{text}");
    assert_eq!(
        samples[r#"searchd_requests_total{code="ok"}"#], 5.0,
        "{text}"
    );
    assert_eq!(
        samples[r#"searchd_requests_total{code="invalid_argument"}"#],
        1.0
    );
    assert_eq!(
        samples[r#"searchd_requests_total{code="invalid_json"}"#],
        1.0
    );
    assert_eq!(samples[r#"searchd_requests_total{code="not_found"}"#], 2.0);
    assert_eq!(samples[r#"searchd_requests_total{code="overloaded"}"#], 0.0);
    assert_eq!(
        samples[r#"searchd_requests_total{code="deadline_exceeded"}"#],
        0.0
    );
    assert_eq!(
        samples["searchd_search_request_duration_seconds_count"],
        8.0
    );
    assert_eq!(
        samples[r#"searchd_search_request_duration_seconds_bucket{le="+Inf"}"#],
        8.0
    );
    assert_eq!(samples["searchd_inflight_searches"], 0.0);
    assert_eq!(samples["searchd_index_vectors"], 500.0);
    assert_eq!(
        samples["searchd_index_size_bytes"],
        st["index"]["bytes"].as_f64().unwrap()
    );
    assert!(samples["process_resident_memory_bytes"] > 1e6);
    assert!(samples.contains_key("process_cpu_seconds_total"));
    contract::assert_validated(&s.url, 14);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_index_path_stops_the_server_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = searchd_server::ServerConfig::new(searchd_server::IndexSource::Path(
        dir.path().join("missing"),
    ));
    cfg.threads = 1;
    let s = TestServer::start_unready(cfg).await;
    let err = s.join().await.unwrap_err();
    assert!(
        matches!(err, searchd_server::ServerError::Index(_)),
        "{err}"
    );
    assert!(err.to_string().contains("missing"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_index_and_queries_from_paths() {
    let f = fixture();
    let qpath = f.dir.path().join("q.npy");
    searchd_vecio::write_vectors(&qpath, f.queries.as_slice(), f.queries.n(), DIM).unwrap();
    let mut cfg =
        searchd_server::ServerConfig::new(searchd_server::IndexSource::Path(f.index_dir.clone()));
    cfg.queries = Some(searchd_server::QuerySource::Path(qpath));
    cfg.threads = 1;
    let s = TestServer::start(cfg).await;
    let c = client();
    let (st, _, v) = post(&c, &url(&s, "/search"), r#"{"qidx": 4, "k": 3}"#).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(ids(&v), exact_ids(&f.index, f.queries.row(4), 3));
    contract::assert_validated(&s.url, 1);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn id_mode_on_hnsw_excludes_the_id_itself() {
    // HNSW stores rows in graph order: ids in requests and replies are still input rows.
    let dir = tempfile::tempdir().unwrap();
    let index = open(&build(
        dir.path(),
        "h",
        searchd_engine::IndexKind::Hnsw,
        2000,
        DIM,
        11,
    ));
    let mut cfg =
        searchd_server::ServerConfig::new(searchd_server::IndexSource::Loaded(index.clone()));
    cfg.threads = 1;
    let s = TestServer::start(cfg).await;
    let c = client();
    let mut overlap = 0;
    for id in [0u64, 1, 17, 999, 1999] {
        let body = format!(r#"{{"id": {id}, "k": 10, "ef": 400}}"#);
        let (st, _, v) = post(&c, &url(&s, "/search"), &body).await;
        assert_eq!(st, 200, "{v}");
        let got = ids(&v);
        assert_eq!(got.len(), 10);
        assert!(!got.contains(&id), "id {id} in its own hits {got:?}");
        let want: Vec<u64> = exact_ids(&index, &index.vector(id).unwrap(), 11)
            .into_iter()
            .filter(|&x| x != id)
            .take(10)
            .collect();
        overlap += got.iter().filter(|g| want.contains(g)).count();
        // vector mode with the same stored vector finds the id itself first
        let body =
            serde_json::json!({ "vector": index.vector(id).unwrap().to_vec(), "k": 1, "ef": 400 });
        let (st, _, v) = post(&c, &url(&s, "/search"), &body.to_string()).await;
        assert_eq!(st, 200);
        assert_eq!(ids(&v), vec![id]);
    }
    assert!(overlap >= 48, "recall of id mode too low: {overlap}/50");
    contract::assert_validated(&s.url, 10);
    s.stop().await.unwrap();
}

#[tokio::test]
async fn quantized_index_served_from_disk_or_codes_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sq8");
    let cfg = searchd_engine::BuildConfig {
        threads: 1,
        quantization: searchd_engine::Quantization::Sq8,
        ..Default::default()
    };
    let base = data(1500, DIM, 12);
    searchd_engine::build_index(&out, &base, DIM, &cfg, &|_, _| {}).unwrap();
    let c = client();
    for vectors in [
        searchd_engine::VectorPlacement::Disk,
        searchd_engine::VectorPlacement::None,
    ] {
        let opts = searchd_engine::LoadOptions::with_parts(vectors, None, None);
        let index = std::sync::Arc::new(searchd_engine::Index::open(&out, &opts).unwrap());
        let mut cfg =
            searchd_server::ServerConfig::new(searchd_server::IndexSource::Loaded(index.clone()));
        cfg.threads = 1;
        let s = TestServer::start(cfg).await;
        let body = serde_json::json!({ "vector": &base[..DIM], "k": 3 });
        let (st, _, v) = post(&c, &url(&s, "/search"), &body.to_string()).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(ids(&v)[0], 0, "{vectors:?}: row 0 finds itself: {v}");
        let stats = get_json(&c, &url(&s, "/stats")).await;
        assert_eq!(stats["index"]["placement"]["vectors"], vectors.name());
        let (st, _, v) = post(&c, &url(&s, "/search"), r#"{"id": 5, "k": 3}"#).await;
        match vectors {
            searchd_engine::VectorPlacement::None => {
                // A client mistake given this server's setup: 400 saying why, not 500.
                assert_eq!(st, 400, "{v}");
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("--vectors none"),
                    "{v}"
                );
            }
            _ => {
                assert_eq!(st, 200, "{v}");
                assert!(!ids(&v).contains(&5));
            }
        }
        contract::assert_validated(&s.url, 3);
        s.stop().await.unwrap();
    }
}

/// A partitioned index of `base` in `out`: 8 partitions, overlap 1, one build thread.
fn build_partitioned(out: &std::path::Path, base: &[f32]) {
    let cfg = searchd_engine::BuildConfig {
        kind: searchd_engine::IndexKind::Partitioned,
        threads: 1,
        nlist: 8,
        overlap: 1,
        ..Default::default()
    };
    searchd_engine::build_index(out, base, DIM, &cfg, &|_, _| {}).unwrap();
}

/// `--collection NAME=DIR:budget=BYTES`: that collection's partitioned index draws on a pool
/// of its own (kept across a reload), the others on the process pool; `/stats` shows both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_with_a_budget_of_its_own_keeps_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let base = data(2000, DIM, 13);
    let (a, b) = (root.join("a"), root.join("b"));
    for d in [&a, &b] {
        build_partitioned(d, &base);
    }
    let settings = searchd_server::ServeSettings {
        collection: vec![
            format!("a={}", a.display()),
            format!("b={}:budget={}", b.display(), 32u64 << 20),
        ],
        memory_budget: Some(512 << 20),
        ..searchd_server::ServeSettings::default()
    };
    let mut cfg = searchd_server::ServerConfig::from_settings(&settings).unwrap();
    cfg.threads = 1;
    cfg.reload_root = Some(root.clone());
    let s = TestServer::start(cfg).await;
    let c = client();
    for name in ["a", "b"] {
        let body = serde_json::json!({ "vector": &base[..DIM], "k": 3, "nprobe": 8 });
        let (st, _, v) = post(
            &c,
            &url(&s, &format!("/collections/{name}/search")),
            &body.to_string(),
        )
        .await;
        assert_eq!(st, 200, "{name}: {v}");
        assert_eq!(ids(&v)[0], 0, "{name}: {v}");
    }
    let check = |stats: &serde_json::Value| {
        let mem = &stats["memory"];
        // The process pool holds a's index only, b's pool holds b's.
        assert_eq!(mem["pool"]["indexes"], 1, "{mem}");
        let own = &mem["collection_budgets"]["b"];
        assert_eq!(own["budget"], 32u64 << 20, "{mem}");
        assert_eq!(own["pool"]["indexes"], 1, "{mem}");
        assert!(own["pool"]["resident"].as_u64().unwrap() > 0, "{mem}");
        assert!(own["pool"]["peak"].as_u64().unwrap() <= 32 << 20, "{mem}");
        assert_eq!(own["pool"]["base"], 0, "{mem}");
        assert!(mem["collection_budgets"].get("a").is_none(), "{mem}");
    };
    check(&get_json(&c, &url(&s, "/stats")).await);
    // `/metrics` has one series per collection with a budget of its own.
    let metrics = get_text(&c, &url(&s, "/metrics")).await;
    assert!(
        metrics.contains(&format!(
            "searchd_collection_memory_budget_bytes{{collection=\"b\"}} {}",
            32u64 << 20
        )),
        "{metrics}"
    );
    let resident = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("searchd_collection_memory_partitions_bytes{collection=\"b\"} ")
        })
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no partitions series for b:\n{metrics}"));
    assert!(resident > 0.0, "{metrics}");
    assert!(!metrics.contains("collection=\"a\""), "{metrics}");
    // A reload of b opens it under its own pool again (the old index gives its bytes back).
    let (st, _, v) = post(
        &c,
        &url(&s, "/admin/reload"),
        &serde_json::json!({ "index": b, "collection": "b" }).to_string(),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let body = serde_json::json!({ "vector": &base[..DIM], "k": 3, "nprobe": 8 });
    let (st, _, v) = post(&c, &url(&s, "/collections/b/search"), &body.to_string()).await;
    assert_eq!(st, 200, "{v}");
    check(&get_json(&c, &url(&s, "/stats")).await);
    s.stop().await.unwrap();
    // Bad budgets are refused by name.
    for bad in ["x", "0", "-5"] {
        let settings = searchd_server::ServeSettings {
            collection: vec![format!("b={}:budget={bad}", b.display())],
            ..searchd_server::ServeSettings::default()
        };
        let e = searchd_server::ServerConfig::from_settings(&settings)
            .err()
            .unwrap();
        assert!(e.to_string().contains("budget="), "{bad}: {e}");
    }
}

/// A partitioned index under a memory budget serves like any other: hits found through
/// partitions loaded on demand, and `/stats` shows the graph manager's work per segment.
#[tokio::test]
async fn partitioned_index_served_under_a_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("part");
    let base = data(2000, DIM, 12);
    build_partitioned(&out, &base);
    // The pool the server would make for `serve --memory-budget`, shared with the index
    // this test opens itself.
    let opts = searchd_engine::LoadOptions {
        memory_budget: Some(64 << 20),
        pool: Some(searchd_engine::MemoryPool::new(64 << 20)),
        ..Default::default()
    };
    let index = std::sync::Arc::new(searchd_engine::Index::open(&out, &opts).unwrap());
    let mut cfg =
        searchd_server::ServerConfig::new(searchd_server::IndexSource::Loaded(index.clone()));
    cfg.threads = 1;
    // The options the index was opened with (what `serve --memory-budget` sets).
    cfg.load = opts.clone();
    let s = TestServer::start(cfg).await;
    let c = client();
    for row in [0usize, 777, 1999] {
        let body = serde_json::json!({ "vector": &base[row * DIM..(row + 1) * DIM], "k": 3 });
        let (st, _, v) = post(&c, &url(&s, "/search"), &body.to_string()).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(ids(&v)[0], row as u64, "row {row} finds itself: {v}");
        assert!(
            v.get("degraded").is_none(),
            "no deadline pressure here: {v}"
        );
    }
    // `nprobe` in the body: every partition probed finds each row; a bad value is a 400.
    for row in [5usize, 1500] {
        let body = serde_json::json!({
            "vector": &base[row * DIM..(row + 1) * DIM], "k": 3, "nprobe": 8
        });
        let (st, _, v) = post(&c, &url(&s, "/search"), &body.to_string()).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            ids(&v)[0],
            row as u64,
            "row {row} with every partition probed: {v}"
        );
    }
    for bad in [
        serde_json::json!(0),
        serde_json::json!("8"),
        serde_json::json!(1 << 20),
    ] {
        let body = serde_json::json!({ "vector": &base[..DIM], "k": 3, "nprobe": bad });
        let (st, _, v) = post(&c, &url(&s, "/search"), &body.to_string()).await;
        assert_eq!(st, 400, "nprobe {bad}: {v}");
        assert!(v.to_string().contains("nprobe"), "{v}");
    }
    let stats = get_json(&c, &url(&s, "/stats")).await;
    let seg = &stats["collections"]["default"]["segment_details"][0];
    assert_eq!(seg["kind"], "partitioned", "{stats}");
    assert_eq!(
        seg["memory"]["partitions"]["resident"], 8,
        "nprobe 8 loaded all (the budget holds them): {stats}"
    );
    // The process-level breakdown: the partitions' part is resident, and is the sum of
    // the segment's figures.
    let mem = &stats["memory"];
    assert_eq!(mem["budget"], 64 << 20, "{mem}");
    assert_eq!(mem["budget_scope"], "process", "{mem}");
    // The pool's accounts: the routing pinned and the partitions (the caller made this
    // pool, so the process's base is its to count: `serve` counts its own).
    let pool = &mem["pool"];
    assert_eq!(pool["indexes"], 1, "{mem}");
    assert_eq!(pool["base"], 0, "{mem}");
    assert!(pool["pinned"].as_u64().unwrap() > 0, "{mem}");
    assert!(
        pool["peak"].as_u64().unwrap() <= 64 << 20,
        "the pool kept to its budget: {mem}"
    );
    assert_eq!(mem["partitions"]["resident"], 8, "{mem}");
    let part_bytes = seg["memory"]["partitions"]["resident_bytes"]
        .as_u64()
        .unwrap();
    assert!(part_bytes > 0, "{mem}");
    assert_eq!(mem["partitions"]["resident_bytes"], part_bytes, "{mem}");
    assert_eq!(pool["resident"], part_bytes, "{mem}");
    assert!(pool["totals"]["loads"].as_u64().unwrap() >= 1, "{mem}");
    // `/metrics` carries the budget's accounts and the graph managers' counters.
    let metrics = get_text(&c, &url(&s, "/metrics")).await;
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"))
    };
    assert_eq!(value("searchd_memory_budget_bytes"), (64u64 << 20) as f64);
    assert_eq!(value("searchd_memory_partitions_bytes"), part_bytes as f64);
    assert_eq!(value("searchd_partitions_resident"), 8.0);
    assert!(value("searchd_partition_loads_total") >= 1.0, "{metrics}");
    assert!(
        value("searchd_partition_load_seconds_total") > 0.0,
        "{metrics}"
    );
    assert_eq!(value("searchd_partition_evictions_total"), 0.0);
    let listed = mem["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == "partitions")
        .unwrap_or_else(|| panic!("no partitions part: {mem}"));
    assert_eq!(listed["bytes"], part_bytes, "{mem}");
    assert_eq!(listed["collection"], "default", "{mem}");
    assert!(mem["resident"].as_u64().unwrap() >= part_bytes, "{mem}");
    let parts = &seg["memory"]["partitions"];
    assert_eq!(parts["partitions"], 8, "{stats}");
    assert!(parts["loads"].as_u64().unwrap() >= 1, "{stats}");
    assert_eq!(parts["budget_bytes"], 64 << 20, "{stats}");
    contract::assert_validated(&s.url, 3);
    s.stop().await.unwrap();
}

/// Every operation of the OpenAPI document reaches a handler of the router (no fallback
/// 404 "no route for" or 405), and its reply matches the document: the document-to-router
/// half of the check `router.rs` makes from the router's side. Writes are sent to a
/// collection that does not exist, so they change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_operation_is_routed_and_answers_as_documented() {
    let f = fixture();
    let s = TestServer::start(f.config()).await;
    let c = client();
    let doc = contract::document(&c, &s.url).await;
    let name = get_json(&c, &url(&s, "/collections")).await["default"]
        .as_str()
        .unwrap()
        .to_string();
    let mut probed = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let m: reqwest::Method = method.to_uppercase().parse().unwrap();
            let reads = m == reqwest::Method::GET
                || [
                    "/search", "/count", "/facet", "/scroll", "_search", "_count", "_mget",
                ]
                .iter()
                .any(|r| path.ends_with(r));
            let collection = if reads {
                name.as_str()
            } else {
                "openapi-probe-missing"
            };
            let concrete = path.replace("{name}", collection).replace("{id}", "1");
            let mut rb = c.request(m.clone(), url(&s, &concrete));
            if m != reqwest::Method::GET && m != reqwest::Method::DELETE {
                rb = rb.header("content-type", "application/json").body("{}");
            }
            let (status, _, _, v) = contract::send_raw(&c, rb).await;
            let fallback = status == 405
                || (status == 404
                    && v.as_ref().is_some_and(|v| {
                        v["error"]["message"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("no route for"))
                    }));
            assert!(
                !fallback,
                "{method} {path} ({concrete}): the router has no such route: {status} {v:?}"
            );
            probed += 1;
        }
    }
    assert!(probed >= 45, "{probed} operations probed");
    contract::assert_validated(&s.url, probed);
    s.stop().await.unwrap();
}

/// The validation is not vacuous: a reply missing a required key, one with a key the
/// document does not list, a wrong type, an undocumented status and a fallback with another
/// status all fail it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_validation_refuses_what_the_document_does_not_describe() {
    let f = fixture();
    let s = TestServer::start(f.config()).await;
    let c = client();
    let doc = contract::document(&c, &s.url).await;
    contract::check_document(&doc);
    let search = url(&s, "/search");
    let (st, _, good) = post(&c, &search, r#"{"qidx": 1, "k": 2}"#).await;
    assert_eq!(st, 200);
    let fails = |method: &'static str, u: String, status: u16, body: serde_json::Value| {
        let doc = doc.clone();
        std::panic::catch_unwind(move || {
            contract::check(&doc, method, &u, status, "application/json", Some(&body))
        })
        .is_err()
    };
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("timings_us");
    assert!(
        fails("POST", search.clone(), 200, missing),
        "a required key missing"
    );
    let mut extra = good.clone();
    extra["surprise"] = serde_json::json!(1);
    assert!(
        fails("POST", search.clone(), 200, extra),
        "an undocumented key"
    );
    let mut wrong = good.clone();
    wrong["mode"] = serde_json::json!("sideways");
    assert!(
        fails("POST", search.clone(), 200, wrong),
        "a value outside the enum"
    );
    assert!(
        fails("POST", search.clone(), 418, good.clone()),
        "an undocumented status"
    );
    let err = serde_json::json!({"error": {"code": "nope", "message": "x"}});
    assert!(
        fails("POST", search.clone(), 400, err),
        "an error code outside the table"
    );
    let not_found = serde_json::json!({"error": {"code": "not_found", "message": "x"}});
    assert!(
        fails("GET", url(&s, "/a/b/c/d/e"), 400, not_found.clone()),
        "a fallback other than 404"
    );
    assert!(!fails("GET", url(&s, "/a/b/c/d/e"), 404, not_found));
    assert!(!fails("POST", search, 200, good));
    s.stop().await.unwrap();
}

/// The replies of writes, collection management and the Elasticsearch layer, on a live
/// collection, validated against the OpenAPI document (the other tests serve a bare index).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_manage_and_elasticsearch_replies_match_the_openapi_document() {
    let d = tempfile::tempdir().unwrap();
    let coll = live_collection(d.path(), "docs", 30);
    let data_dir = d.path().join("data");
    std::fs::create_dir(&data_dir).unwrap();
    let mut cfg = live_config(&coll, "docs");
    cfg.data_dir = Some(std::fs::canonicalize(&data_dir).unwrap());
    let s = TestServer::start(cfg).await;
    let c = client();
    let v = data(3, DIM, 77);
    let vec0 = serde_json::json!(&v[..DIM]);
    let json = |m: reqwest::Method, path: &str, body: serde_json::Value| {
        c.request(m, url(&s, path))
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    use reqwest::Method as M;
    let expect =
        |got: (u16, reqwest::header::HeaderMap, serde_json::Value), want: u16, what: &str| {
            assert_eq!(got.0, want, "{what}: {}", got.2);
            got.2
        };
    // Native writes and reads.
    let body = serde_json::json!({"docs": [{"id": 100, "vector": vec0, "fields": {"color": "red", "price": 1.5}}], "wait": true});
    let r = expect(
        contract::send(&c, json(M::POST, "/collections/docs/docs", body)).await,
        200,
        "upsert",
    );
    assert_eq!(r["upserted"], 1);
    let body = serde_json::json!({"vector": vec0, "k": 3, "fields": true, "facets": ["color"], "explain": true, "filter": {"term": {"color": "red"}}});
    let r = expect(
        contract::send(&c, json(M::POST, "/collections/docs/search", body)).await,
        200,
        "search",
    );
    assert!(r["explain"].is_object() && r["facets"].is_object(), "{r}");
    let body = serde_json::json!({"field": "color", "filter": {"exists": {"field": "price"}}});
    expect(
        contract::send(&c, json(M::POST, "/collections/docs/facet", body)).await,
        200,
        "facet",
    );
    let body = serde_json::json!({"size": 2, "fields": ["color"], "total": true, "facets": [{"field": "color", "size": 2}], "sort": ["price"]});
    expect(
        contract::send(&c, json(M::POST, "/collections/docs/scroll", body)).await,
        200,
        "scroll",
    );
    let body = serde_json::json!({"filter": {"term": {"color": "blue"}}});
    expect(
        contract::send(&c, json(M::POST, "/collections/docs/count", body)).await,
        200,
        "count",
    );
    expect(
        contract::send(&c, c.get(url(&s, "/collections/docs/docs/100"))).await,
        200,
        "doc",
    );
    expect(
        contract::send(&c, c.get(url(&s, "/collections/docs"))).await,
        200,
        "info",
    );
    // Elasticsearch reads.
    let body = serde_json::json!({"query": {"match_all": {}}, "aggs": {"c": {"terms": {"field": "color"}}}, "size": 2, "sort": [{"price": "desc"}], "_source": ["color"]});
    let r = expect(
        contract::send(&c, json(M::POST, "/docs/_search", body)).await,
        200,
        "_search",
    );
    assert!(r["aggregations"]["c"]["buckets"].is_array(), "{r}");
    let body = serde_json::json!({"knn": {"field": "vec", "query_vector": vec0, "k": 3, "num_candidates": 10}, "explain": true, "track_total_hits": false});
    expect(
        contract::send(&c, json(M::POST, "/docs/_search", body)).await,
        200,
        "knn",
    );
    let body = serde_json::json!({"query": {"term": {"color": "red"}}});
    expect(
        contract::send(&c, json(M::POST, "/docs/_count", body)).await,
        200,
        "_count",
    );
    let body = serde_json::json!({"ids": ["1", "9999"]});
    let r = expect(
        contract::send(&c, json(M::POST, "/docs/_mget", body)).await,
        200,
        "_mget",
    );
    assert_eq!(r["docs"][1]["found"], false, "{r}");
    expect(
        contract::send(&c, c.get(url(&s, "/docs/_doc/1"))).await,
        200,
        "_doc",
    );
    expect(
        contract::send(&c, c.get(url(&s, "/docs/_doc/9999"))).await,
        404,
        "_doc missing",
    );
    // Errors of Elasticsearch-shaped requests carry Elasticsearch's shape beside searchd's.
    let body = serde_json::json!({"query": {"no_such_query": {}}});
    let r = expect(
        contract::send(&c, json(M::POST, "/docs/_search", body.clone())).await,
        400,
        "_search bad query",
    );
    assert_eq!(r["status"], 400, "{r}");
    assert_eq!(r["error"]["code"], "invalid_argument", "{r}");
    assert_eq!(r["error"]["type"], "illegal_argument_exception", "{r}");
    assert_eq!(r["error"]["reason"], r["error"]["message"], "{r}");
    assert_eq!(
        r["error"]["root_cause"][0]["type"], "illegal_argument_exception",
        "{r}"
    );
    let r = expect(
        contract::send(&c, json(M::POST, "/nope/_search", body)).await,
        404,
        "_search unknown index",
    );
    assert_eq!(r["error"]["type"], "index_not_found_exception", "{r}");
    // Native routes keep searchd's shape alone.
    let r = expect(
        contract::send(
            &c,
            json(
                M::POST,
                "/collections/docs/search",
                serde_json::json!({"k": 0}),
            ),
        )
        .await,
        400,
        "native bad search",
    );
    assert!(
        r.get("status").is_none() && r["error"].get("type").is_none(),
        "{r}"
    );
    expect(
        contract::send(&c, c.get(url(&s, "/docs"))).await,
        200,
        "index",
    );
    expect(
        contract::send(&c, c.get(url(&s, "/docs/_mapping"))).await,
        200,
        "_mapping",
    );
    expect(
        contract::send(&c, c.get(url(&s, "/_cat/indices?format=json"))).await,
        200,
        "_cat",
    );
    let root = c.get(url(&s, "/")).header(
        "accept",
        "application/vnd.elasticsearch+json; compatible-with=8",
    );
    expect(contract::send(&c, root).await, 200, "ES root");
    // Elasticsearch writes.
    let src = serde_json::json!({"vec": &v[DIM..2 * DIM], "color": "blue"});
    expect(
        contract::send(&c, json(M::PUT, "/docs/_doc/200?refresh=true", src.clone())).await,
        201,
        "index new",
    );
    expect(
        contract::send(&c, json(M::PUT, "/docs/_doc/200?refresh=true", src)).await,
        200,
        "index again",
    );
    let ndjson = [
        serde_json::json!({"index": {"_index": "docs", "_id": "201"}}),
        serde_json::json!({"vec": &v[2 * DIM..], "color": "green"}),
        serde_json::json!({"delete": {"_index": "docs", "_id": "2"}}),
        serde_json::json!({"update": {"_index": "docs", "_id": "424242"}}),
        serde_json::json!({"doc": {"color": "red"}}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect::<String>();
    let bulk = c
        .post(url(&s, "/_bulk?refresh=wait_for"))
        .header("content-type", "application/x-ndjson")
        .body(ndjson);
    let r = expect(contract::send(&c, bulk).await, 200, "_bulk");
    assert_eq!(r["items"].as_array().unwrap().len(), 3, "{r}");
    expect(
        contract::send(&c, c.delete(url(&s, "/docs/_doc/200"))).await,
        200,
        "delete",
    );
    expect(
        contract::send(&c, c.delete(url(&s, "/docs/_doc/200"))).await,
        404,
        "delete again",
    );
    // Native deletes, snapshot.
    expect(
        contract::send(
            &c,
            c.delete(url(&s, "/collections/docs/docs/100?wait=true")),
        )
        .await,
        200,
        "delete one",
    );
    let body = serde_json::json!({"ids": [1, 9999], "wait": true});
    let r = expect(
        contract::send(&c, json(M::POST, "/collections/docs/delete", body)).await,
        200,
        "delete many",
    );
    assert!(r["not_found"].is_array(), "{r}");
    expect(
        contract::send(&c, c.post(url(&s, "/collections/docs/snapshot"))).await,
        200,
        "snapshot",
    );
    // Collections over HTTP.
    let body = serde_json::json!({"name": "made", "dim": DIM, "index": {"kind": "flat"}, "mapping": {"properties": {"color": {"type": "keyword"}}}});
    expect(
        contract::send(&c, json(M::POST, "/collections", body)).await,
        201,
        "create",
    );
    let body = serde_json::json!({"properties": {"size": {"type": "integer"}}});
    expect(
        contract::send(&c, json(M::PUT, "/collections/made/mapping", body)).await,
        200,
        "mapping",
    );
    expect(
        contract::send(&c, c.get(url(&s, "/collections"))).await,
        200,
        "list",
    );
    expect(
        contract::send(&c, c.delete(url(&s, "/collections/made"))).await,
        200,
        "delete collection",
    );
    contract::assert_validated(&s.url, 29);
    s.stop().await.unwrap();
}
