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
            "503 must come within the refusal hold: {:?}",
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

#[test]
fn a_refusal_hold_over_its_limit_refuses_the_start() {
    let s = searchd_server::ServeSettings {
        collection: vec!["x".into()],
        refusal_hold_ms: 10_001,
        ..Default::default()
    };
    let e = searchd_server::ServerConfig::from_settings(&s)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("--refusal-hold-ms must be at most 10000, got 10001"),
        "{e}"
    );
}

/// Closed-loop clients that resend a refused request at once, for `run`: every answer's
/// (client, time since start, status).
async fn retry_loop(s: &TestServer, clients: usize, run: Duration) -> Vec<(usize, Duration, u16)> {
    let c = client();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..clients {
        let c = c.clone();
        let u = url(s, "/search");
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while t0.elapsed() < run {
                let r = c
                    .post(&u)
                    .header("content-type", "application/json")
                    .body(format!(r#"{{"qidx": {}}}"#, i % 4))
                    .send()
                    .await
                    .unwrap();
                let st = r.status().as_u16();
                let _ = r.bytes().await.unwrap();
                got.push((i, t0.elapsed(), st));
            }
            got
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.extend(t.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_resend_at_once_get_steady_answers_and_none_starves() {
    // One search thread, two places, 20 ms searches (50 answers/s), eight clients that
    // resend every 503 at once: 4x the places, the bench's overload at small scale.
    let f = fixture();
    let start = |hold_ms: u64| {
        let mut cfg = f.config();
        cfg.threads = 1;
        cfg.max_inflight = 1;
        cfg.queue = 1;
        cfg.timeout = Duration::from_secs(5);
        cfg.search_delay = Some(Duration::from_millis(20));
        cfg.refusal_hold = Duration::from_millis(hold_ms);
        TestServer::start(cfg)
    };
    let (clients, run) = (8usize, Duration::from_secs(3));
    let s = start(100).await;
    let got = retry_loop(&s, clients, run).await;
    let st = get_json(&client(), &url(&s, "/stats")).await;
    s.stop().await.unwrap();
    let ok: Vec<_> = got.iter().filter(|g| g.2 == 200).collect();
    let refused = got.iter().filter(|g| g.2 == 503).count();
    assert_eq!(ok.len() + refused, got.len(), "only 200 and 503: {got:?}");
    // Steady: answers in every half second (capacity ~25 each).
    for w in 0..6u32 {
        let (a, b) = (
            Duration::from_millis(500) * w,
            Duration::from_millis(500) * (w + 1),
        );
        let n = ok.iter().filter(|g| g.1 >= a && g.1 < b).count();
        assert!(n >= 5, "window {w}: {n} answers (capacity ~25): {st}");
    }
    // No starvation: every client is answered, near its share (~18 each).
    for i in 0..clients {
        let n = ok.iter().filter(|g| g.0 == i).count();
        assert!(n >= 3, "client {i} got {n} answers of {}: {st}", ok.len());
    }
    // Each refusal was held: a client comes back at most once per 100 ms hold, so at most
    // 8 clients x 3 s / 0.1 s = 240 refusals (no spin).
    assert!(refused <= 240, "{refused} refusals: {st}");
    assert_eq!(st["admission"]["refusals_held"], refused as u64, "{st}");
    assert_eq!(st["config"]["refusal_hold_ms"], 100, "{st}");

    // Without the hold the same clients spin on refusals, and a client that was just
    // answered takes the freed place again ahead of the ones refused meanwhile.
    let s = start(0).await;
    let spin = retry_loop(&s, clients, run).await;
    s.stop().await.unwrap();
    let spun = spin.iter().filter(|g| g.2 == 503).count();
    assert!(
        spun > 3 * refused.max(100),
        "refusals without the hold {spun}, with it {refused}"
    );
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
        .write_all(b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"qidx\"")
        .await
        .unwrap();
    // Half the headers, then silence.
    let mut header_staller = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    header_staller
        .write_all(b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-")
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

/// An upsert body of `ids`, each with the vector of document `ids[i] % 40` of the seeded
/// data and a `color`.
fn docs_body(ids: &[u64], color: &str, wait: bool) -> String {
    let vecs = data(40, DIM, 3);
    let docs: Vec<_> = ids
        .iter()
        .map(|&id| {
            let r = (id % 40) as usize;
            serde_json::json!({"id": id, "vector": &vecs[r * DIM..(r + 1) * DIM],
                               "fields": {"color": color}})
        })
        .collect();
    serde_json::json!({"docs": docs, "wait": wait}).to_string()
}

async fn count(c: &reqwest::Client, s: &TestServer, name: &str) -> u64 {
    let (st, _, v) = post(c, &url(s, &format!("/collections/{name}/count")), "{}").await;
    assert_eq!(st, 200, "{v}");
    v["count"].as_u64().unwrap()
}

async fn doc_status(c: &reqwest::Client, s: &TestServer, name: &str, id: u64) -> u16 {
    c.get(url(s, &format!("/collections/{name}/docs/{id}")))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Reload of a live collection keeps it live: acknowledged upserts stay visible, deleted
/// documents stay gone, writes are accepted after; the same directory is reopened with its
/// log replayed, another directory (blue/green: snapshot, restore, reload) is opened live
/// and the old one closed (committed, its lock released).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_of_a_live_collection_keeps_it_live() {
    let dir = tempfile::tempdir().unwrap();
    let blue = live_collection(dir.path(), "coll", 30);
    let s = TestServer::start(live_config(&blue, "coll")).await;
    let c = client();
    let docs = url(&s, "/collections/coll/docs");
    let reload = url(&s, "/admin/reload");
    let body =
        |p: &std::path::Path| serde_json::json!({"index": p, "collection": "coll"}).to_string();
    // Three upserts and a delete, acknowledged (not waited for).
    for id in [1000u64, 1001, 1002] {
        let (st, _, v) = post(&c, &docs, &docs_body(&[id], "new", false)).await;
        assert_eq!(
            (st, v["status"].as_str()),
            (200, Some("acknowledged")),
            "{v}"
        );
    }
    let (st, _, v) = post(&c, &url(&s, "/collections/coll/delete"), r#"{"ids": [5]}"#).await;
    assert_eq!((st, v["deleted"].as_u64()), (200, Some(1)), "{v}");

    // The same directory: reopened, the log replayed.
    let (st, _, v) = post(&c, &reload, &body(&blue)).await;
    assert_eq!(st, 200, "{v}");
    for id in [1000u64, 1001, 1002] {
        assert_eq!(
            doc_status(&c, &s, "coll", id).await,
            200,
            "acknowledged {id} after reload"
        );
    }
    assert_eq!(
        doc_status(&c, &s, "coll", 5).await,
        404,
        "deleted 5 came back"
    );
    assert_eq!(count(&c, &s, "coll").await, 32);
    let (st, _, v) = post(&c, &docs, &docs_body(&[2000], "after", true)).await;
    assert_eq!((st, v["status"].as_str()), (200, Some("applied")), "{v}");
    assert_eq!(count(&c, &s, "coll").await, 33);
    let (st, _, v) = post(
        &c,
        &url(&s, "/collections/coll/delete"),
        r#"{"ids": [6], "wait": true}"#,
    )
    .await;
    assert_eq!((st, v["deleted"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(count(&c, &s, "coll").await, 32);
    // Twice in a row: the first reopened collection lets go of the directory too.
    let (st, _, v) = post(&c, &reload, &body(&blue)).await;
    assert_eq!(st, 200, "{v}");
    let (st, _, v) = post(&c, &docs, &docs_body(&[2001], "after", true)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(count(&c, &s, "coll").await, 33);

    // Blue/green: snapshot, restore into a new directory, reload to it.
    let (st, _, v) = post(&c, &url(&s, "/collections/coll/snapshot"), "{}").await;
    assert_eq!(st, 200, "{v}");
    let green = dir.path().join("green");
    searchd_collection::live::restore(
        std::path::Path::new(v["path"].as_str().unwrap()),
        &green,
        &Default::default(),
    )
    .unwrap();
    let (st, _, v) = post(&c, &reload, &body(&green)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["previous"], serde_json::json!(blue), "{v}");
    assert_eq!(count(&c, &s, "coll").await, 33);
    let (st, _, v) = post(&c, &docs, &docs_body(&[3000], "green", true)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(count(&c, &s, "coll").await, 34);
    // The old directory was closed by the reload: committed and unlocked (another writer
    // may open it), with every write it acknowledged.
    let old = searchd_collection::live::LiveCollection::open(
        &blue,
        &Default::default(),
        searchd_collection::live::LiveConfig {
            background: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(old.read_only_reason(), None);
    assert_eq!(old.view().len(), 33);
    old.close().unwrap();
    drop(old);
    // And back to blue: live again.
    let (st, _, v) = post(&c, &reload, &body(&blue)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(count(&c, &s, "coll").await, 33);
    let (st, _, v) = post(&c, &docs, &docs_body(&[4000], "blue", true)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(count(&c, &s, "coll").await, 34);
    let st = get_json(&c, &url(&s, "/stats")).await;
    assert_eq!(st["reloads"], 4, "{st}");
    s.stop().await.unwrap();
}

/// Snapshot paths: a NUL byte is a 400 (not a 500), a place inside a live collection's
/// directory a 400 (the collection would delete it as debris at its next start, and a
/// snapshot there would copy itself); relative paths and `..` keep their rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_paths_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let coll = live_collection(&root, "coll", 20);
    let mut cfg = live_config(&coll, "coll");
    cfg.reload_root = Some(root.clone());
    let s = TestServer::start(cfg).await;
    let c = client();
    let snap = url(&s, "/collections/coll/snapshot");
    let at = |p: &str| serde_json::json!({ "path": p }).to_string();
    for p in [
        format!("{}/snap\u{0}x", root.display()),
        format!("{}/a\u{0}b/snap", root.display()),
        "rel\u{0}x".to_string(),
    ] {
        let got = post(&c, &snap, &at(&p)).await;
        assert_error(&got, 400, "invalid_argument", "NUL");
    }
    let before: Vec<_> = std::fs::read_dir(&coll)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    for p in [
        coll.join("snap").display().to_string(),
        coll.join("seg-000000").join("snap").display().to_string(),
        "coll/snap".to_string(),
        "other/../coll/snap".to_string(),
        format!("{}/./snap", coll.display()),
    ] {
        let got = post(&c, &snap, &at(&p)).await;
        assert_error(&got, 400, "invalid_argument", "inside the collection");
    }
    let after: Vec<_> = std::fs::read_dir(&coll)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "nothing was written into the collection");
    // `..` out of the root: 403, as before.
    let got = post(&c, &snap, &at("../elsewhere")).await;
    assert_error(&got, 403, "forbidden", "reload root");
    // Relative to the root, and `..` that stays inside it: accepted.
    let (st, _, v) = post(&c, &snap, &at("s1")).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["path"], serde_json::json!(root.join("s1")), "{v}");
    let (st, _, v) = post(&c, &snap, &at("coll/../s2")).await;
    assert_eq!(st, 200, "{v}");
    // No path: next to the collection.
    let (st, _, v) = post(&c, &snap, "{}").await;
    assert_eq!(st, 200, "{v}");
    assert!(
        v["path"].as_str().unwrap().contains("coll.snapshots"),
        "{v}"
    );
    s.stop().await.unwrap();
}

/// Writes keep coming while the collection they go to is reloaded in place: each is
/// acknowledged (200) or refused for a moment (503 with Retry-After, nothing logged), never
/// 409, and every acknowledged one is there after the reloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_during_a_reload_in_place_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let coll = live_collection(dir.path(), "coll", 20);
    let s = TestServer::start(live_config(&coll, "coll")).await;
    let c = client();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (c, u, stop) = (c.clone(), url(&s, "/collections/coll/docs"), stop.clone());
        writers.push(tokio::spawn(async move {
            let (mut acked, mut refused) = (Vec::new(), 0);
            let mut id = 10_000 * (w + 1);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let got = post(&c, &u, &docs_body(&[id], "w", false)).await;
                match got.0 {
                    200 => acked.push(id),
                    503 => {
                        assert_eq!(got.2["error"]["code"], "not_ready", "{}", got.2);
                        assert!(got.1.get("retry-after").is_some());
                        refused += 1;
                    }
                    other => panic!("write {id}: {other} {}", got.2),
                }
                id += 1;
            }
            (acked, refused)
        }));
    }
    let reload = url(&s, "/admin/reload");
    let body = serde_json::json!({"index": &coll}).to_string();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let (st, _, v) = post(&c, &reload, &body).await;
        assert_eq!(st, 200, "{v}");
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked = Vec::new();
    for w in writers {
        let (a, _) = w.await.unwrap();
        acked.extend(a);
    }
    assert!(
        acked.len() > 10,
        "the writers ran ({} acknowledged)",
        acked.len()
    );
    // Visible within the refresh interval.
    let want = 20 + acked.len() as u64;
    let t = Instant::now();
    while count(&c, &s, "coll").await != want {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "acknowledged writes missing"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for id in acked {
        assert_eq!(
            doc_status(&c, &s, "coll", id).await,
            200,
            "acknowledged {id}"
        );
    }
    s.stop().await.unwrap();
}

/// A collection that failed to open at start is served once a reload opens it (live).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_serves_a_collection_that_failed_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let a = live_collection(dir.path(), "a", 10);
    let b = live_collection(dir.path(), "b", 12);
    let m = b.join("collection.json");
    let good = std::fs::read_to_string(&m).unwrap();
    std::fs::write(&m, good.replacen("\"wal_seq\": 0", "\"wal_seq\": 5", 1)).unwrap();
    let mut cfg = live_config(&a, "a");
    cfg.more = vec![("b".into(), searchd_server::IndexSource::Path(b.clone()))];
    let s = TestServer::start_unready(cfg).await;
    let c = client();
    let t = Instant::now();
    while get_json(&c, &url(&s, "/stats")).await["collections"]["b"]["state"] != "failed" {
        assert!(t.elapsed() < Duration::from_secs(20), "b never failed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = c.get(url(&s, "/ready")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    std::fs::write(&m, &good).unwrap();
    let body = serde_json::json!({"index": &b, "collection": "b"}).to_string();
    let (st, _, v) = post(&c, &url(&s, "/admin/reload"), &body).await;
    assert_eq!(st, 200, "{v}");
    let r = c.get(url(&s, "/ready")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(count(&c, &s, "b").await, 12);
    let (st, _, v) = post(
        &c,
        &url(&s, "/collections/b/docs"),
        &docs_body(&[99], "x", true),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(count(&c, &s, "b").await, 13);
    s.stop().await.unwrap();
}
