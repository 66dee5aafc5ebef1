//! Operations: admission control, deadlines, hot reload under load, admin auth, graceful
//! shutdown, slow clients, many idle connections.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use searchd_engine::IndexKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn url(s: &TestServer, path: &str) -> String {
    format!("{}{path}", s.url)
}

/// Fire `n` concurrent searches; return (status, retry-after, elapsed) of each.
async fn burst(
    s: &TestServer,
    n: usize,
    body: &'static str,
) -> Vec<(u16, Option<String>, Duration)> {
    let c = client();
    let mut tasks = Vec::new();
    for _ in 0..n {
        let c = c.clone();
        let u = url(s, "/search");
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let r = c
                .post(u)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let st = r.status().as_u16();
            let ra = r
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            let v: serde_json::Value = r.json().await.unwrap();
            if st == 503 {
                assert_eq!(v["error"]["code"], "overloaded", "{v}");
                assert!(v["error"]["message"].as_str().unwrap().contains("capacity"));
            }
            (st, ra, t.elapsed())
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_control_rejects_at_once_past_the_queue() {
    let f = fixture();
    let mut cfg = f.config();
    cfg.threads = 1;
    cfg.max_inflight = 1;
    cfg.queue = 0;
    cfg.search_delay = Some(Duration::from_millis(400));
    let s = TestServer::start(cfg).await;
    let got = burst(&s, 6, r#"{"qidx": 1}"#).await;
    let ok = got.iter().filter(|g| g.0 == 200).count();
    let rejected: Vec<_> = got.iter().filter(|g| g.0 == 503).collect();
    assert_eq!(ok, 1, "{got:?}");
    assert_eq!(rejected.len(), 5, "{got:?}");
    for r in &rejected {
        assert_eq!(r.1.as_deref(), Some("1"), "Retry-After");
        assert!(
            r.2 < Duration::from_millis(300),
            "503 must be immediate: {:?}",
            r.2
        );
    }
    let c = client();
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["requests"]["ok"], 1, "{st}");
    assert_eq!(st["requests"]["rejected"], 5, "{st}");
    assert_eq!(st["requests"]["total"], 6, "{st}");
    assert_eq!(st["inflight"], 0);
    s.stop().await.unwrap();

    // With a queue of 2: one runs, two wait their turn, the rest are refused.
    let mut cfg = f.config();
    cfg.threads = 1;
    cfg.max_inflight = 1;
    cfg.queue = 2;
    cfg.timeout = Duration::from_secs(5);
    cfg.search_delay = Some(Duration::from_millis(250));
    let s = TestServer::start(cfg).await;
    let got = burst(&s, 7, r#"{"qidx": 2}"#).await;
    let ok = got.iter().filter(|g| g.0 == 200).count();
    let rejected = got.iter().filter(|g| g.0 == 503).count();
    assert_eq!((ok, rejected), (3, 4), "{got:?}");
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["requests"]["rejected"], 4);
    assert_eq!(st["requests"]["ok"], 3);
    assert_eq!(st["queued"], 0);
    let m = c
        .get(url(&s, "/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains("searchd_requests_total{code=\"overloaded\"} 4"),
        "{m}"
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_answer_504() {
    let f = fixture();
    let c = client();
    // timeout 0: the deadline has passed before any worker can start the search.
    let mut cfg = f.config();
    cfg.timeout = Duration::ZERO;
    let s = TestServer::start(cfg).await;
    let got = post(&c, &url(&s, "/search"), r#"{"qidx": 1}"#).await;
    assert_error(&got, 504, "deadline_exceeded", "not started");
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["requests"]["timeouts"], 1, "{st}");
    s.stop().await.unwrap();

    // A search that starts in time but runs past its deadline is stopped inside the
    // engine's loop (10,000 rows: the flat scan checks its deadline every 4096 rows).
    let dir = tempfile::tempdir().unwrap();
    let big = open(&build(dir.path(), "big", IndexKind::Flat, 10_000, DIM, 3));
    let mut cfg = searchd_server::ServerConfig::new(searchd_server::IndexSource::Loaded(big));
    cfg.threads = 1;
    cfg.timeout = Duration::from_millis(150);
    cfg.search_delay = Some(Duration::from_millis(400));
    let s = TestServer::start(cfg).await;
    let q = serde_json::json!({ "vector": data(1, DIM, 8) }).to_string();
    let t = Instant::now();
    let got = post(&c, &url(&s, "/search"), &q).await;
    assert_error(&got, 504, "deadline_exceeded", "was stopped");
    assert!(t.elapsed() < Duration::from_secs(2));
    // Queued past the deadline: behind a slow search, with a short deadline.
    let s2 = {
        let mut cfg = f.config();
        cfg.threads = 1;
        cfg.max_inflight = 1;
        cfg.queue = 4;
        cfg.timeout = Duration::from_millis(200);
        cfg.search_delay = Some(Duration::from_millis(150));
        TestServer::start(cfg).await
    };
    let got = burst(&s2, 3, r#"{"qidx": 1}"#).await;
    let codes: Vec<u16> = got.iter().map(|g| g.0).collect();
    assert!(codes.contains(&200) && codes.contains(&504), "{codes:?}");
    let st = get_json(&c, &url(&s2, "/stats")).await;
    assert_eq!(
        st["requests"]["timeouts"].as_u64().unwrap(),
        codes.iter().filter(|&&c| c == 504).count() as u64
    );
    s.stop().await.unwrap();
    s2.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_under_load_fails_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let a = build(dir.path(), "a", IndexKind::Flat, 2000, DIM, 1);
    let b = build(dir.path(), "b", IndexKind::Hnsw, 2000, DIM, 2);
    let first = open(&a);
    let weak = Arc::downgrade(&first);
    let mut cfg = searchd_server::ServerConfig::new(searchd_server::IndexSource::Loaded(first));
    cfg.queries = Some(searchd_server::QuerySource::Loaded(queries(50, DIM, 7)));
    cfg.threads = 2;
    let s = TestServer::start(cfg).await;
    let c = client();

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut loaders = Vec::new();
    for w in 0..4u64 {
        let c = c.clone();
        let u = url(&s, "/search");
        let stop = stop.clone();
        loaders.push(tokio::spawn(async move {
            let mut n = 0u64;
            let mut bad = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body = format!(r#"{{"qidx": {}, "k": 10}}"#, (n * 7 + w) % 50);
                let r = c
                    .post(&u)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                if r.status() != 200 {
                    bad.push((r.status().as_u16(), r.text().await.unwrap()));
                } else {
                    let v: serde_json::Value = r.json().await.unwrap();
                    assert_eq!(v["hits"].as_array().unwrap().len(), 10);
                }
                n += 1;
            }
            (n, bad)
        }));
    }
    let reload = url(&s, "/admin/reload");
    for i in 0..6 {
        tokio::time::sleep(Duration::from_millis(120)).await;
        let target = if i % 2 == 0 { &b } else { &a };
        let body = serde_json::json!({ "index": target }).to_string();
        let (st, _, v) = post(&c, &reload, &body).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["index"]["n"], 2000);
    }
    tokio::time::sleep(Duration::from_millis(120)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for l in loaders {
        let (n, bad) = l.await.unwrap();
        assert!(bad.is_empty(), "failed requests during reloads: {bad:?}");
        total += n;
    }
    assert!(total > 50, "the load loop ran ({total} requests)");
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["reloads"], 6);
    assert_eq!(st["index"]["kind"], "flat");
    // The first index object is freed once no search holds it (the worker drops its Arc
    // just after sending the last reply that used it).
    let t = Instant::now();
    while weak.upgrade().is_some() {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the replaced index was not dropped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Now serving b: answers are b's.
    let (_, _, v) = post(&c, &reload, &serde_json::json!({ "index": &b }).to_string()).await;
    assert_eq!(v["index"]["kind"], "hnsw");
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["index"]["kind"], "hnsw");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_refuses_what_is_not_an_index() {
    let f = fixture();
    let s = TestServer::start(f.config()).await;
    let c = client();
    let reload = url(&s, "/admin/reload");
    let not_index = f.dir.path().to_path_buf();
    let got = post(
        &c,
        &reload,
        &serde_json::json!({ "index": not_index }).to_string(),
    )
    .await;
    assert_error(&got, 400, "invalid_argument", "manifest.json");
    let got = post(
        &c,
        &reload,
        &serde_json::json!({ "index": "/etc/passwd" }).to_string(),
    )
    .await;
    assert_error(
        &got,
        400,
        "invalid_argument",
        "cannot open /etc/passwd as an index",
    );
    let got = post(&c, &reload, r#"{"path": "x"}"#).await;
    assert_error(&got, 400, "invalid_argument", "unknown field");
    let got = post(&c, &reload, r#"{"index": 3}"#).await;
    assert_error(&got, 400, "invalid_argument", "invalid type");
    let got = post(&c, &reload, r#"{"index": "#).await;
    assert_error(&got, 400, "invalid_json", "EOF");
    // A different dimension than the query matrix is refused.
    let other = build(f.dir.path(), "dim8", IndexKind::Flat, 100, 8, 4);
    let got = post(
        &c,
        &reload,
        &serde_json::json!({ "index": other }).to_string(),
    )
    .await;
    assert_error(&got, 400, "invalid_argument", "dimensions");
    // Still serving the original.
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["index"]["n"], 500);
    assert_eq!(st["reloads"], 0);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_stays_inside_the_reload_root() {
    let f = fixture();
    let root = f.dir.path().join("served");
    std::fs::create_dir(&root).unwrap();
    let inside = build(&root, "inside", IndexKind::Flat, 300, DIM, 5);
    let outside = build(f.dir.path(), "outside", IndexKind::Flat, 200, DIM, 6);
    let mut cfg = f.config();
    cfg.reload_root = Some(root.canonicalize().unwrap());
    let s = TestServer::start(cfg).await;
    let c = client();
    let reload = url(&s, "/admin/reload");
    // Outside the root, also when spelled through `..` from inside it: 403.
    for p in [outside.clone(), root.join("..").join("outside")] {
        let got = post(&c, &reload, &serde_json::json!({ "index": p }).to_string()).await;
        assert_error(&got, 403, "forbidden", "outside the reload root");
    }
    let got = post(
        &c,
        &reload,
        &serde_json::json!({ "index": "/etc" }).to_string(),
    )
    .await;
    assert_error(&got, 403, "forbidden", "outside the reload root");
    // A path that does not exist: 400, nothing opened.
    let got = post(
        &c,
        &reload,
        &serde_json::json!({ "index": root.join("nope") }).to_string(),
    )
    .await;
    assert_error(&got, 400, "invalid_argument", "nope");
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["reloads"], 0);
    // Inside: accepted.
    let (st, _, v) = post(
        &c,
        &reload,
        &serde_json::json!({ "index": inside }).to_string(),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["index"]["n"], 300);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_is_required_when_set() {
    let f = fixture();
    let mut cfg = f.config();
    cfg.admin_token = Some("s3cret".into());
    let s = TestServer::start(cfg).await;
    let c = client();
    let reload = url(&s, "/admin/reload");
    let body = serde_json::json!({ "index": &f.index_dir }).to_string();
    let send = |auth: Option<&'static str>| {
        let mut rq = c
            .post(&reload)
            .header("content-type", "application/json")
            .body(body.clone());
        if let Some(a) = auth {
            rq = rq.header("authorization", a);
        }
        rq.send()
    };
    let got = split(send(None).await.unwrap()).await;
    assert_error(&got, 401, "unauthorized", "Authorization: Bearer");
    assert!(got.1.contains_key("www-authenticate"));
    let got = split(send(Some("Bearer nope")).await.unwrap()).await;
    assert_error(&got, 401, "unauthorized", "wrong admin token");
    let got = split(send(Some("Basic s3cret")).await.unwrap()).await;
    assert_error(&got, 401, "unauthorized", "Bearer");
    let got = split(send(Some("Bearer s3cret")).await.unwrap()).await;
    assert_eq!(got.0, 200, "{}", got.2);
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["requests"]["client_errors"], 3);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_drains_in_flight_searches() {
    let f = fixture();
    let mut cfg = f.config();
    cfg.search_delay = Some(Duration::from_millis(400));
    let mut s = TestServer::start(cfg).await;
    let c = client();
    let u = url(&s, "/search");
    let mut inflight = Vec::new();
    for i in 0..3 {
        let c = c.clone();
        let u = u.clone();
        inflight.push(tokio::spawn(async move {
            let r = c
                .post(u)
                .header("content-type", "application/json")
                .body(format!(r#"{{"qidx": {i}}}"#))
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    s.trigger_stop();
    // New connections are refused soon after the signal.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let fresh = reqwest::Client::new();
    assert!(
        fresh.get(url(&s, "/health")).send().await.is_err(),
        "still accepting"
    );
    for t in inflight {
        assert_eq!(t.await.unwrap(), 200, "in-flight search was not drained");
    }
    s.join().await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
}

async fn read_all(tcp: &mut tokio::net::TcpStream, limit: Duration) -> (String, bool) {
    let mut buf = Vec::new();
    let closed = matches!(
        tokio::time::timeout(limit, tcp.read_to_end(&mut buf)).await,
        Ok(Ok(_)) | Ok(Err(_))
    );
    (String::from_utf8_lossy(&buf).into_owned(), closed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_clients_hold_no_slot_and_are_cut_off() {
    let f = fixture();
    let mut cfg = f.config();
    cfg.threads = 1;
    cfg.max_inflight = 1;
    cfg.queue = 0;
    cfg.read_timeout = Duration::from_millis(600);
    let s = TestServer::start(cfg).await;
    let c = client();

    // Half a body, then silence.
    let mut body_staller = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    body_staller
        .write_all(b"POST /search HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"qidx\"")
        .await
        .unwrap();
    // Half the headers, then silence.
    let mut header_staller = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    header_staller
        .write_all(b"POST /search HTTP/1.1\r\nHost: t\r\nContent-")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The single search slot is free for others.
    for _ in 0..5 {
        let got = post(&c, &url(&s, "/search"), r#"{"qidx": 1}"#).await;
        assert_eq!(got.0, 200, "{}", got.2);
    }
    let t = Instant::now();
    let (text, closed) = read_all(&mut body_staller, Duration::from_secs(5)).await;
    assert!(closed, "body staller not disconnected");
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request_timeout"), "{text}");
    let (_, closed) = read_all(&mut header_staller, Duration::from_secs(5)).await;
    assert!(closed, "header staller not disconnected");
    assert!(t.elapsed() < Duration::from_secs(3));
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_connections_do_not_block_others() {
    let _ = searchd_server::raise_nofile_limit();
    let f = fixture();
    let s = TestServer::start(f.config()).await;
    let n = 2000;
    let mut idle = Vec::with_capacity(n);
    for i in 0..n {
        match tokio::net::TcpStream::connect(s.addr).await {
            Ok(t) => idle.push(t),
            Err(e) => panic!("connection {i} failed: {e}"),
        }
    }
    // Some of them even sent half a request.
    for t in idle.iter_mut().step_by(10) {
        t.write_all(b"POST /search HTTP/1.1\r\n").await.unwrap();
    }
    let c = client();
    let t = Instant::now();
    for i in 0..50 {
        let got = post(
            &c,
            &url(&s, "/search"),
            &format!(r#"{{"qidx": {}}}"#, i % 20),
        )
        .await;
        assert_eq!(got.0, 200);
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let h = get_json(&c, &url(&s, "/health")).await;
    assert_eq!(h["status"], "ok");
    drop(idle);
    s.stop().await.unwrap();
}
