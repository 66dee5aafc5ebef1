//! The server under abuse (issue 14, D1-D12): each probe over real sockets against a real
//! server, expecting the documented answer. No timings are asserted: where a probe needs
//! time to pass (a stalled upload, a shutdown), the test waits for a state, not a clock.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use common::*;
use searchd_engine::IndexKind;

fn url(s: &TestServer, path: &str) -> String {
    format!("{}{path}", s.url)
}

/// Send raw bytes on a new connection and read the reply until the server closes.
fn raw(s: &TestServer, bytes: &[u8]) -> String {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Status, lower-cased head and body of a raw reply.
fn parse(reply: &str) -> (u16, String, serde_json::Value) {
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete reply: {reply:?}"));
    let status = head[9..12].parse().unwrap();
    let v =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {reply:?}"));
    (status, head.to_ascii_lowercase(), v)
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

async fn metric(s: &TestServer, name: &str) -> f64 {
    let text = client()
        .get(url(s, "/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics"))
}

/// Wait (without a deadline of its own: the test harness's timeout is the limit) until
/// `cond` holds for the metric.
async fn wait_metric(s: &TestServer, name: &str, cond: impl Fn(f64) -> bool) {
    while !cond(metric(s, name).await) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A request head that promises `len` body bytes, then `sent` of them: a stalled upload.
fn stalled_upload(s: &TestServer, len: usize, sent: usize) -> TcpStream {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        c,
        "POST /search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\r\n"
    )
    .unwrap();
    c.write_all(&vec![b' '; sent]).unwrap();
    c
}

fn read_reply(c: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn errors_hyper_raises_itself_have_json_bodies() {
    let f = fixture();
    run(async {
        let s = TestServer::start(f.config()).await;
        let (st, head, v) = parse(&raw(&s, b"GARBAGE\r\n\r\n"));
        assert_eq!(st, 400, "{v}");
        assert_eq!(v["error"]["code"], "bad_request", "{v}");
        assert!(head.contains("content-type: application/json"), "{head}");

        let big = format!(
            "GET /health HTTP/1.1\r\nhost: localhost\r\nx-big: {}\r\n\r\n",
            "a".repeat(200_000)
        );
        let (st, _, v) = parse(&raw(&s, big.as_bytes()));
        assert_eq!(st, 431, "{v}");
        assert_eq!(v["error"]["code"], "headers_too_large", "{v}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-header-bytes"));

        let bad_header = b"GET /health HTTP/1.1\r\nhost: localhost\r\nbad header\r\n\r\n";
        let (st, _, v) = parse(&raw(&s, bad_header));
        assert_eq!(st, 400, "{v}");
        assert_eq!(v["error"]["code"], "bad_request");

        // Extractor rejections: a path parameter that is not UTF-8.
        let (st, _, v) = parse(&raw(
            &s,
            b"GET /collections/%FF/docs/1 HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
        ));
        assert_eq!(st, 400, "{v}");
        assert_eq!(v["error"]["code"], "invalid_argument", "{v}");

        let (st, _, v) = parse(&raw(
            &s,
            b"DELETE /search HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
        ));
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (405, Some("method_not_allowed"))
        );
        let (st, _, v) = parse(&raw(
            &s,
            b"GET /nowhere HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
        ));
        assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")));

        // The connection still serves everyone else.
        let (st, _, v) = post(&client(), &url(&s, "/search"), r#"{"qidx": 1}"#).await;
        assert_eq!(st, 200, "{v}");
        let m = client()
            .get(url(&s, "/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            m.contains("searchd_requests_total{code=\"bad_request\"} 2"),
            "{m}"
        );
        assert!(m.contains("searchd_requests_total{code=\"headers_too_large\"} 1"));
        s.stop().await.unwrap();
    });
}

#[test]
fn past_the_connection_cap_requests_get_503_and_probes_are_answered() {
    let f = fixture();
    run(async {
        let mut cfg = f.config();
        cfg.max_connections = 2;
        let s = TestServer::start(cfg).await;
        // Take both places with keep-alive connections (a connection that got the minimal
        // responder says `connection: close`: a place was still held by an earlier client).
        let mut held = Vec::new();
        while held.len() < 2 {
            let mut c = TcpStream::connect(s.addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            c.write_all(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n")
                .unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.ends_with(b"}") {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
                got.extend_from_slice(&buf[..n]);
            }
            if !String::from_utf8_lossy(&got)
                .to_ascii_lowercase()
                .contains("connection: close")
            {
                held.push(c);
            }
        }
        let req = b"POST /search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"qidx\": 1}";
        let (st, head, v) = parse(&raw(&s, req));
        assert_eq!(st, 503, "{v}");
        assert_eq!(v["error"]["code"], "overloaded");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--max-connections"),
            "{v}"
        );
        assert!(head.contains("retry-after: 1"), "{head}");
        assert!(head.contains("connection: close"), "{head}");
        for probe in ["/health", "/healthz", "/ready", "/readyz"] {
            let (st, _, v) = parse(&raw(
                &s,
                format!("GET {probe} HTTP/1.1\r\nhost: localhost\r\n\r\n").as_bytes(),
            ));
            assert_eq!(st, 200, "{probe}: {v}");
        }
        drop(held);
        loop {
            let (st, _, v) = post(&client(), &url(&s, "/search"), r#"{"qidx": 1}"#).await;
            if st == 200 {
                break;
            }
            assert_eq!(v["error"]["code"], "overloaded", "{v}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(metric(&s, "searchd_refused_connections_total").await >= 5.0);
        s.stop().await.unwrap();
    });
}

#[test]
fn the_byte_budget_refuses_uploads_with_503_and_frees_when_they_go() {
    let f = fixture();
    run(async {
        let mut cfg = f.config();
        cfg.max_pending_bytes = 4 << 20;
        let s = TestServer::start(cfg).await;
        // Three stalled 1 MiB uploads hold the three quarters of the budget that big
        // requests may use.
        let stalled: Vec<TcpStream> = (0..3).map(|_| stalled_upload(&s, 1 << 20, 1000)).collect();
        wait_metric(&s, "searchd_pending_request_bytes", |v| {
            v >= (3 << 20) as f64
        })
        .await;
        // A fourth is refused at once.
        let mut c = stalled_upload(&s, 1 << 20, 0);
        let (st, head, v) = parse(&read_reply(&mut c));
        assert_eq!(st, 503, "{v}");
        assert_eq!(v["error"]["code"], "overloaded");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--max-pending-bytes"),
            "{v}"
        );
        assert!(head.contains("retry-after: 1"));
        assert!(head.contains("connection: close"));
        // Small requests still have room: probes and searches answer.
        let r = client().get(url(&s, "/health")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let (st, _, v) = post(&client(), &url(&s, "/search"), r#"{"qidx": 1}"#).await;
        assert_eq!(st, 200, "{v}");
        drop(stalled);
        wait_metric(&s, "searchd_pending_request_bytes", |v| {
            v < (1 << 20) as f64
        })
        .await;
        let mut c = stalled_upload(&s, 1 << 20, 0);
        let body = br#"{"qidx": 1}"#;
        let mut padded = body.to_vec();
        padded.resize(1 << 20, b' ');
        c.write_all(&padded).unwrap();
        let (st, _, v) = parse(&read_reply_once(&mut c));
        assert_eq!(st, 200, "{v}");
        assert!(metric(&s, "searchd_refused_over_budget_total").await >= 1.0);
        s.stop().await.unwrap();
    });
}

/// Read one reply on a keep-alive connection (up to its JSON body's end).
fn read_reply_once(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = c.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if n == 0 {
            return text;
        }
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            });
            if len.is_some_and(|l| body.len() >= l) {
                return text;
            }
        }
    }
}

#[test]
fn an_oversized_upload_is_drained_so_the_client_reads_its_413() {
    let f = fixture();
    run(async {
        let s = TestServer::start(f.config()).await;
        let addr = s.addr;
        let (declared, chunked) = tokio::task::spawn_blocking(move || {
            // Declared length over the limit, whole body sent before reading (as Python
            // requests does): the write must not fail and the reply must be the 413.
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let n = 3 << 20;
            write!(c, "POST /search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {n}\r\n\r\n").unwrap();
            c.write_all(&vec![b' '; n]).expect("the upload was cut before its 413");
            let a = read_reply(&mut c);
            // Chunked, no length: found over the limit while reading.
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            write!(c, "POST /search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n").unwrap();
            let chunk = vec![b' '; 64 << 10];
            for _ in 0..32 {
                write!(c, "{:x}\r\n", chunk.len()).unwrap();
                c.write_all(&chunk).expect("the upload was cut before its 413");
                c.write_all(b"\r\n").unwrap();
            }
            c.write_all(b"0\r\n\r\n").unwrap();
            (a, read_reply(&mut c))
        })
        .await
        .unwrap();
        for reply in [declared, chunked] {
            let (st, head, v) = parse(&reply);
            assert_eq!(st, 413, "{v}");
            assert_eq!(v["error"]["code"], "body_too_large");
            assert!(head.contains("connection: close"));
        }
        // Expect: 100-continue: the 413 comes at once, nothing is read.
        let (st, _, v) = parse(&raw(&s, b"POST /search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nexpect: 100-continue\r\ncontent-length: 99999999\r\n\r\n"));
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (413, Some("body_too_large"))
        );
        s.stop().await.unwrap();
    });
}

#[test]
fn a_half_closed_client_gets_its_answer() {
    let f = fixture();
    run(async {
        let mut cfg = f.config();
        // Not an instant answer: the search waits on its worker first.
        cfg.search_delay = Some(Duration::from_millis(200));
        let s = TestServer::start(cfg).await;
        let addr = s.addr;
        let reply = tokio::task::spawn_blocking(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            c.write_all(b"POST /search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 19\r\n\r\n{\"qidx\": 1, \"k\": 3}").unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            read_reply(&mut c)
        })
        .await
        .unwrap();
        let (st, _, v) = parse(&reply);
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["hits"].as_array().unwrap().len(), 3);
        s.stop().await.unwrap();
    });
}

#[test]
fn the_deadline_starts_when_the_body_has_arrived() {
    let f = fixture();
    run(async {
        let mut cfg = f.config();
        cfg.timeout = Duration::from_millis(300);
        let s = TestServer::start(cfg).await;
        let addr = s.addr;
        let reply = tokio::task::spawn_blocking(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let body = br#"{"qidx": 2, "k": 2}"#;
            write!(c, "POST /search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n", body.len()).unwrap();
            c.write_all(&body[..5]).unwrap();
            // A slow upload: longer than the search deadline, well inside the read timeout.
            std::thread::sleep(Duration::from_millis(800));
            c.write_all(&body[5..]).unwrap();
            read_reply(&mut c)
        })
        .await
        .unwrap();
        let (st, _, v) = parse(&reply);
        assert_eq!(st, 200, "{v}");
        s.stop().await.unwrap();
    });
}

#[test]
fn shutdown_cuts_stalled_uploads_instead_of_waiting_for_the_read_timeout() {
    let f = fixture();
    run(async {
        let mut cfg = f.config();
        // Far longer than the harness waits for stop() (20 s).
        cfg.read_timeout = Duration::from_secs(600);
        cfg.drain_timeout = Duration::from_secs(600);
        let mut s = TestServer::start(cfg).await;
        let mut c = stalled_upload(&s, 1000, 10);
        wait_metric(&s, "searchd_pending_request_bytes", |v| v >= 1000.0).await;
        s.trigger_stop();
        let reply = tokio::task::spawn_blocking(move || read_reply(&mut c))
            .await
            .unwrap();
        let (st, head, v) = parse(&reply);
        assert_eq!(st, 503, "{v}");
        assert_eq!(v["error"]["code"], "shutting_down");
        assert!(head.contains("connection: close"));
        s.join().await.unwrap();
    });
}

#[test]
fn reload_paths_outside_the_root_are_403_whether_or_not_they_exist() {
    let f = fixture();
    let root = f.dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    build(&root, "v2", IndexKind::Flat, 300, DIM, 5);
    let outside = f.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    build(&outside, "v3", IndexKind::Flat, 300, DIM, 6);
    run(async {
        let mut cfg = f.config();
        cfg.reload_root = Some(root.canonicalize().unwrap());
        let s = TestServer::start(cfg).await;
        let c = client();
        let u = url(&s, "/admin/reload");
        let body = |p: &str| serde_json::json!({ "index": p }).to_string();
        for p in [
            "../outside/v3".to_string(),
            "../outside/missing".to_string(),
            "../../../../../../etc".to_string(),
            "/definitely/not/here".to_string(),
            outside.join("v3").display().to_string(),
            "v2/../../outside/v3".to_string(),
        ] {
            let got = post(&c, &u, &body(&p)).await;
            assert_error(&got, 403, "forbidden", "outside the reload root");
        }
        // Inside the root, relative to it (not to the working directory).
        let got = post(&c, &u, &body("missing")).await;
        assert_error(&got, 400, "invalid_argument", "cannot open");
        let (st, _, v) = post(&c, &u, &body("v2")).await;
        assert_eq!(st, 200, "{v}");
        let (st, _, v) = post(&c, &u, &body("./v2/../v2")).await;
        assert_eq!(st, 200, "{v}");
        // A symlink inside the root that points outside is refused too.
        std::os::unix::fs::symlink(outside.join("v3"), root.join("link")).unwrap();
        let got = post(&c, &u, &body("link")).await;
        assert_error(&got, 403, "forbidden", "outside the reload root");
        s.stop().await.unwrap();
    });
}

#[test]
fn one_reload_opens_at_a_time_and_an_abandoned_one_does_not_block() {
    let f = fixture();
    let root = f.dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    build(&root, "v2", IndexKind::Hnsw, 3000, DIM, 5);
    run(async {
        let mut cfg = f.config();
        cfg.reload_root = Some(root.canonicalize().unwrap());
        let s = TestServer::start(cfg).await;
        let c = client();
        let u = url(&s, "/admin/reload");
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (c, u) = (c.clone(), u.clone());
            tasks.push(tokio::spawn(async move {
                post(&c, &u, r#"{"index": "v2"}"#).await
            }));
        }
        let mut ok = 0;
        for t in tasks {
            let got = t.await.unwrap();
            if got.0 == 200 {
                ok += 1;
            } else {
                assert_error(&got, 409, "conflict", "another reload");
            }
        }
        assert!(ok >= 1);
        // A client that goes away right after sending: whatever happened to its reload,
        // the next one is not refused for ever.
        drop(raw_no_wait(&s, b"POST /admin/reload HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{\"index\": \"v2\"}"));
        loop {
            let got = post(&c, &u, r#"{"index": "v2"}"#).await;
            if got.0 == 200 {
                break;
            }
            assert_error(&got, 409, "conflict", "another reload");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        s.stop().await.unwrap();
    });
}

fn raw_no_wait(s: &TestServer, bytes: &[u8]) -> TcpStream {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(bytes).unwrap();
    c
}

#[test]
fn tiny_and_huge_but_valid_vectors_are_searched() {
    let f = fixture();
    run(async {
        let s = TestServer::start(f.config()).await;
        let c = client();
        for scale in [1e-30f64, 1e-40, 1e25, 1e37] {
            let v: Vec<f64> = (0..DIM).map(|i| scale * (1.0 + i as f64)).collect();
            let body = serde_json::json!({"vector": v, "k": 3}).to_string();
            let (st, _, v) = post(&c, &url(&s, "/search"), &body).await;
            assert_eq!(st, 200, "scale {scale}: {v}");
            assert_eq!(v["hits"].as_array().unwrap().len(), 3);
        }
        let zero = serde_json::json!({"vector": vec![0.0; DIM]}).to_string();
        let got = post(&c, &url(&s, "/search"), &zero).await;
        assert_error(&got, 400, "invalid_argument", "zero");
        s.stop().await.unwrap();
    });
}

#[test]
fn probes_aliases_route_labels_and_build_info() {
    let f = fixture();
    run(async {
        let s = TestServer::start(f.config()).await;
        let c = client();
        for p in ["/healthz", "/readyz"] {
            let r = c.get(url(&s, p)).send().await.unwrap();
            assert_eq!(r.status(), 200, "{p}");
        }
        let (st, _, _) = post(&c, &url(&s, "/search"), r#"{"qidx": 1}"#).await;
        assert_eq!(st, 200);
        let _ = post(
            &c,
            &url(&s, "/collections/nope-123/search"),
            r#"{"qidx": 1}"#,
        )
        .await;
        let _ = c.get(url(&s, "/random/path/9")).send().await.unwrap();
        let m = c
            .get(url(&s, "/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            m.contains("searchd_http_requests_total{route=\"/search\",status=\"200\"} 1"),
            "{m}"
        );
        assert!(m.contains(
            "searchd_http_requests_total{route=\"/collections/{name}/search\",status=\"404\"} 1"
        ));
        assert!(m.contains("searchd_http_requests_total{route=\"unmatched\",status=\"404\"} 1"));
        assert!(m.lines().any(
            |l| l.starts_with("searchd_http_request_duration_seconds_bucket{")
                && l.contains("route=\"/search\"")
        ));
        assert!(
            !m.contains("nope-123") && !m.contains("/random/path"),
            "raw paths in labels"
        );
        let build = m
            .lines()
            .find(|l| l.starts_with("searchd_build_info{"))
            .expect("build info");
        assert!(build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))));
        assert!(build.ends_with(" 1"), "{build}");
        s.stop().await.unwrap();
    });
}

/// A body under the body limit that can never fit the byte budget (the old defaults: a
/// 64 MiB write limit over a 64 MiB budget, of which one large request may hold three
/// quarters) is a 413 naming what to change, never a 503 that a client honouring
/// Retry-After would retry forever. Scaled down: a 4 MiB budget and write limit, a body
/// of 59/64 of it (the 59 MB upsert of the report).
#[test]
fn a_body_that_can_never_fit_the_budget_is_413_not_503() {
    let f = fixture();
    run(async {
        let mut cfg = f.config();
        cfg.max_pending_bytes = 4 << 20;
        cfg.write_body_limit = 4 << 20;
        let s = TestServer::start(cfg).await;
        let c = client();
        let big = (4usize << 20) / 64 * 59;
        let body = format!("{{\"docs\": [], \"pad\": \"{}\"}}", "x".repeat(big - 23));
        assert_eq!(body.len(), big);
        for _ in 0..3 {
            let got = post(&c, &url(&s, "/collections/default/docs"), &body).await;
            assert_error(&got, 413, "body_too_large", "--max-pending-bytes");
            assert!(got.1.get("retry-after").is_none(), "{:?}", got.1);
        }
        // Chunked, no length: found while reading, the same answer.
        let addr = s.addr;
        let reply = tokio::task::spawn_blocking(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            write!(c, "POST /collections/default/docs HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n").unwrap();
            let chunk = vec![b' '; 64 << 10];
            for _ in 0..59 {
                write!(c, "{:x}\r\n", chunk.len()).unwrap();
                if c.write_all(&chunk).is_err() {
                    break;
                }
                let _ = c.write_all(b"\r\n");
            }
            let _ = c.write_all(b"0\r\n\r\n");
            read_reply(&mut c)
        })
        .await
        .unwrap();
        let (st, _, v) = parse(&reply);
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (413, Some("body_too_large")),
            "{v}"
        );
        // A body that fits is read (and then judged on its content).
        let small = format!(
            "{{\"docs\": [], \"pad\": \"{}\"}}",
            "x".repeat((2 << 20) - 24)
        );
        let got = post(&c, &url(&s, "/collections/default/docs"), &small).await;
        assert_error(&got, 400, "invalid_argument", "unknown field");
        s.stop().await.unwrap();
    });
}

/// `POST /collections/{name}/delete` refuses a filter that matches by vacuity (a range with
/// no bound, an empty bool) with a 400 that says how to delete everything; an explicit
/// `match_all` still deletes everything, and reads keep Elasticsearch's reading of an
/// empty range.
#[test]
fn delete_by_a_vacuous_filter_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let coll = live_collection(dir.path(), "coll", 30);
    run(async {
        let s = TestServer::start(live_config(&coll, "coll")).await;
        let c = client();
        let delete = url(&s, "/collections/coll/delete");
        let count = |body: &'static str| {
            let c = c.clone();
            let u = url(&s, "/collections/coll/count");
            async move {
                let (st, _, v) = post(&c, &u, body).await;
                assert_eq!(st, 200, "{v}");
                v["count"].as_u64().unwrap()
            }
        };
        for f in [
            r#"{"range": {"price": {}}}"#,
            r#"{"range": {"price": {"gte": null, "lt": null}}}"#,
            r#"{"range": {"price": {"boost": 2}}}"#,
            r#"{"bool": {}}"#,
            r#"{"bool": {"must": [], "should": [], "must_not": []}}"#,
            r#"{"bool": {"filter": {"range": {"price": {}}}}}"#,
            r#"{"bool": {"must": [{"match_all": {}}, {"range": {"price": {}}}]}}"#,
            r#"{"bool": {"should": [{"term": {"color": "red"}}, {"bool": {}}]}}"#,
            r#"{"bool": {"must": {"bool": {"must": {"bool": {}}}}}}"#,
            r#"{"bool": {"must_not": {"match_none": {}}}}"#,
        ] {
            let body = format!(r#"{{"filter": {f}, "wait": true}}"#);
            let got = post(&c, &delete, &body).await;
            assert_error(&got, 400, "invalid_argument", r#"{"match_all": {}}"#);
        }
        assert_eq!(count("{}").await, 30, "nothing was deleted");
        // Reads: an empty range matches the documents that have the field.
        assert_eq!(count(r#"{"filter": {"range": {"price": {}}}}"#).await, 20);
        // Filters that constrain are accepted, with an empty range beside them too.
        let got = post(&c, &delete, r#"{"filter": {"bool": {"must": [{"term": {"color": "red"}}, {"range": {"price": {}}}]}}, "wait": true}"#).await;
        assert_eq!(
            (got.0, got.2["deleted"].as_u64()),
            (200, Some(10)),
            "{:?}",
            got.2
        );
        let got = post(
            &c,
            &delete,
            r#"{"filter": {"range": {"price": {"gte": 20}}}, "wait": true}"#,
        )
        .await;
        assert_eq!(
            (got.0, got.2["deleted"].as_u64()),
            (200, Some(3)),
            "{:?}",
            got.2
        );
        assert_eq!(count("{}").await, 17);
        // Everything, said explicitly.
        let got = post(
            &c,
            &delete,
            r#"{"filter": {"match_all": {}}, "wait": true}"#,
        )
        .await;
        assert_eq!(
            (got.0, got.2["deleted"].as_u64()),
            (200, Some(17)),
            "{:?}",
            got.2
        );
        assert_eq!(count("{}").await, 0);
        s.stop().await.unwrap();
    });
}

/// The aggregation bomb of the issue "Exposed safely" (2,000 `terms` aggregations of size
/// 10,000 in one `_search`) and its variants are refused with 400 `too_many_buckets`
/// before any work, on every route that takes facets; a request under the cap is answered.
#[test]
fn too_many_buckets_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let coll = live_collection(dir.path(), "coll", 30);
    run(async {
        let mut cfg = live_config(&coll, "coll");
        cfg.max_buckets = 1_000;
        let s = TestServer::start(cfg).await;
        let c = client();
        let aggs = |n: usize, size: usize| {
            let m: serde_json::Map<String, serde_json::Value> = (0..n)
                .map(|i| {
                    (
                        format!("a{i}"),
                        serde_json::json!({"terms": {"field": "color", "size": size}}),
                    )
                })
                .collect();
            serde_json::Value::Object(m)
        };
        let bomb = serde_json::json!({"size": 0, "aggs": aggs(2_000, 10_000)}).to_string();
        let got = post(&c, &url(&s, "/coll/_search"), &bomb).await;
        assert_error(&got, 400, "too_many_buckets", "--max-buckets");
        let m = got.2["error"]["message"].as_str().unwrap().to_string();
        assert!(m.contains("20000000"), "{m}");
        let got = post(
            &c,
            &url(&s, "/coll/_search"),
            &serde_json::json!({"size": 0, "aggs": aggs(3, 400)}).to_string(),
        )
        .await;
        assert_error(&got, 400, "too_many_buckets", "1200 buckets");
        let got = post(
            &c,
            &url(&s, "/collections/coll/facet"),
            r#"{"field": "color", "size": 5000}"#,
        )
        .await;
        assert_error(&got, 400, "too_many_buckets", "at most 1000");
        let facets: Vec<serde_json::Value> = (0..11)
            .map(|_| serde_json::json!({"field": "color", "size": 100}))
            .collect();
        let got = post(
            &c,
            &url(&s, "/collections/coll/search"),
            &serde_json::json!({"id": 1, "k": 5, "facets": facets}).to_string(),
        )
        .await;
        assert_error(&got, 400, "too_many_buckets", "11 aggregations");
        // Under the cap: answered.
        let (st, _, v) = post(
            &c,
            &url(&s, "/coll/_search"),
            &serde_json::json!({"size": 0, "aggs": aggs(2, 10)}).to_string(),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            v["aggregations"]["a0"]["buckets"].as_array().unwrap().len(),
            3
        );
        let st = get_json(&c, &url(&s, "/stats")).await;
        assert_eq!(st["requests"]["client_errors"], 4, "{st}");
        s.stop().await.unwrap();
    });
}
