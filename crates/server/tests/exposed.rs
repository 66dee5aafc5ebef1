//! Exposed safely, over real sockets (CONTRACTS.md "Security and operations"): HTTPS with a
//! test CA (and plain HTTP on the TLS port refused with a clear answer), certificates
//! reloaded when their files change, the `Host` check against DNS rebinding, the audit
//! log, and `--max-reply-bytes`.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use searchd_server::auth::{new_key, Scope};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A test certificate authority.
struct Ca {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

fn ca(name: &str) -> Ca {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, format!("searchd test CA {name}"));
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        issuer: rcgen::Issuer::new(p, key),
    }
}

/// A server certificate for localhost and 127.0.0.1 signed by `ca`, written to `dir`.
fn write_leaf(ca: &Ca, dir: &Path) {
    let p = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &ca.issuer).unwrap();
    // The key first: the server reloads once both changed and parse together.
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
}

fn connector(ca: &Ca) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca.pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
}

/// One HTTP/1.1 request over TLS trusting `ca`: `Ok((status, body))`, or the TLS error.
async fn https(
    ca: &Ca,
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let mut tls = connector(ca)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    // A peer that closes without close_notify is an error for rustls; the reply is there.
    let _ = tls.read_to_end(&mut out).await;
    Ok(split_raw(&out))
}

/// One plain HTTP/1.1 request with the given `Host` (None: no Host header).
async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: Option<&str>,
    extra: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let host = host.map_or_else(String::new, |h| format!("host: {h}\r\n"));
    let req = format!(
        "{method} {path} HTTP/1.1\r\n{host}{extra}connection: close\r\ncontent-length: 0\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    split_raw(&out)
}

fn split_raw(out: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(out);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_serves_with_a_test_ca_and_reloads_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (ca1, ca2) = (ca("one"), ca("two"));
    write_leaf(&ca1, dir.path());
    let f = fixture();
    let mut cfg = f.config();
    cfg.tls = Some((dir.path().join("cert.pem"), dir.path().join("key.pem")));
    let s = TestServer::start_unready(cfg).await;
    let t = Instant::now();
    loop {
        if let Ok((200, _)) = https(&ca1, s.addr, "GET", "/ready", "").await {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "never ready over https"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A search over HTTPS.
    let (st, body) = https(&ca1, s.addr, "POST", "/search", r#"{"qidx": 0, "k": 3}"#)
        .await
        .unwrap();
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["hits"].as_array().unwrap().len(), 3, "{v}");
    // Another CA's client refuses the certificate.
    let err = https(&ca2, s.addr, "GET", "/health", "").await.unwrap_err();
    assert!(
        err.to_lowercase().contains("certificate"),
        "expected a certificate error, got {err}"
    );
    // Plain HTTP on the TLS port: a clear-text 400 saying what to do.
    let (st, body) = raw(s.addr, "GET", "/health", Some("localhost"), "").await;
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("https://"), "{body}");
    // New files: new connections get the new certificate (polled every second).
    write_leaf(&ca2, dir.path());
    let t = Instant::now();
    loop {
        if let Ok((200, _)) = https(&ca2, s.addr, "GET", "/health", "").await {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(https(&ca1, s.addr, "GET", "/health", "").await.is_err());
    // A broken file keeps the certificate in force.
    std::fs::write(dir.path().join("cert.pem"), "not a certificate").unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        https(&ca2, s.addr, "GET", "/health", "").await.unwrap().0,
        200
    );
    s.stop().await.unwrap();
}

#[test]
fn bad_certificate_files_refuse_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, "nothing here").unwrap();
    std::fs::write(&key, "nothing here").unwrap();
    let mut s = searchd_server::ServeSettings {
        collection: vec!["x".into()],
        tls_cert: Some(cert.clone()),
        tls_key: Some(key.clone()),
        ..Default::default()
    };
    let e = searchd_server::ServerConfig::from_settings(&s)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("--tls-cert") && e.contains("no PEM certificate"),
        "{e}"
    );
    write_leaf(&ca("x"), dir.path());
    std::fs::write(&key, "nothing here").unwrap();
    let e = searchd_server::ServerConfig::from_settings(&s)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("--tls-key"), "{e}");
    s.tls_key = None;
    let e = searchd_server::ServerConfig::from_settings(&s)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("go together"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebinding_host_is_refused_without_keys() {
    let f = fixture();
    let mut cfg = f.config();
    cfg.allow_host = vec!["search.internal".into()];
    let s = TestServer::start(cfg).await;
    let a = s.addr;
    // A page served as evil.example whose name now resolves to 127.0.0.1.
    let (st, body) = raw(a, "GET", "/stats", Some("evil.example:8080"), "").await;
    assert_eq!(st, 403, "{body}");
    assert!(
        body.contains("DNS rebinding") && body.contains("--allow-host"),
        "{body}"
    );
    let (st, _) = raw(a, "POST", "/admin/reload", Some("evil.example"), "").await;
    assert_eq!(st, 403);
    // Probes answer whatever the Host; loopback names, addresses and allowed names pass.
    assert_eq!(
        raw(a, "GET", "/health", Some("evil.example"), "").await.0,
        200
    );
    for h in [
        "localhost:1",
        "127.0.0.1",
        "[::1]:80",
        "search.internal:443",
    ] {
        assert_eq!(raw(a, "GET", "/stats", Some(h), "").await.0, 200, "{h}");
    }
    // Without Host (not a browser: browsers always send it) the request is served.
    assert_eq!(raw(a, "GET", "/stats", None, "").await.0, 200);
    s.stop().await.unwrap();

    // With API keys a page cannot call the server anyway: no Host check.
    let dir = tempfile::tempdir().unwrap();
    let (k, entry) = new_key("reader", Scope::Read, None).unwrap();
    std::fs::write(dir.path().join("keys.toml"), entry).unwrap();
    let mut cfg = f.config();
    cfg.api_keys = Some(dir.path().join("keys.toml"));
    let s = TestServer::start(cfg).await;
    let auth = format!("authorization: Bearer {k}\r\n");
    assert_eq!(
        raw(s.addr, "GET", "/stats", Some("search.example"), &auth)
            .await
            .0,
        200
    );
    assert_eq!(
        raw(s.addr, "GET", "/stats", Some("search.example"), "")
            .await
            .0,
        401
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_records_changes_and_refusals_by_key_name() {
    let dir = tempfile::tempdir().unwrap();
    let a = live_collection(dir.path(), "a", 10);
    let mut text = String::new();
    let mut keys = Vec::new();
    for (name, scope) in [("ops-writer", Scope::Write), ("dash-reader", Scope::Read)] {
        let (k, entry) = new_key(name, scope, None).unwrap();
        text.push_str(&entry);
        text.push('\n');
        keys.push(k);
    }
    std::fs::write(dir.path().join("keys.toml"), &text).unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut cfg = live_config(&a, "a");
    cfg.api_keys = Some(dir.path().join("keys.toml"));
    cfg.audit_log = Some((log.clone(), 1 << 20));
    let s = TestServer::start(cfg).await;
    let c = client();
    let send = |key: Option<&str>, path: &str, body: &str| {
        let mut rq = c
            .post(format!("{}{path}", s.url))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(k) = key {
            rq = rq.header("authorization", format!("Bearer {k}"));
        }
        async move { rq.send().await.unwrap().status().as_u16() }
    };
    let v = data(1, DIM, 9);
    let up = serde_json::json!({"docs": [{"id": 77, "vector": v}], "wait": true}).to_string();
    assert_eq!(send(Some(&keys[0]), "/collections/a/docs", &up).await, 200);
    assert_eq!(
        send(Some(&keys[1]), "/collections/a/count", "{}").await,
        200
    );
    assert_eq!(
        send(
            None,
            "/collections/a/delete",
            r#"{"filter":{"match_all":{}}}"#
        )
        .await,
        401
    );
    assert_eq!(send(Some(&keys[1]), "/collections/a/docs", &up).await, 403);
    let metrics = c
        .get(format!("{}/metrics", s.url))
        .header("authorization", format!("Bearer {}", keys[1]))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("searchd_audit_lines_total 3\n"),
        "{metrics}"
    );
    assert!(metrics.ends_with("# EOF\n"));
    s.stop().await.unwrap();

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "the read is not audited: {text}");
    assert_eq!(lines[0]["key"], "ops-writer");
    assert_eq!(lines[0]["route"], "/collections/{name}/docs");
    assert_eq!(lines[0]["collection"], "a");
    assert_eq!(lines[0]["status"], 200);
    assert_eq!(lines[0]["method"], "POST");
    assert!(lines[0]["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert!(lines[0]["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(lines[1]["key"], serde_json::Value::Null);
    assert_eq!(lines[1]["status"], 401);
    assert_eq!(lines[1]["code"], "unauthorized");
    assert_eq!(
        lines[2]["key"],
        serde_json::Value::Null,
        "a refused key is not named"
    );
    assert_eq!(lines[2]["status"], 403);
    for k in &keys {
        assert!(
            !text.contains(k.as_str()),
            "a key leaked into the audit log"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_over_max_reply_bytes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = live_collection(dir.path(), "a", 300);
    let mut cfg = live_config(&a, "a");
    cfg.max_reply_bytes = 4096;
    let s = TestServer::start(cfg).await;
    let c = client();
    let v = data(1, DIM, 5);
    // Refused before any work: 1,000 hits cannot fit 4 KiB.
    let big = serde_json::json!({"vector": v, "k": 1000}).to_string();
    let (st, _, body) = post(&c, &format!("{}/collections/a/search", s.url), &big).await;
    assert_eq!(st, 400, "{body}");
    assert_eq!(body["error"]["code"], "reply_too_large", "{body}");
    // Refused once built: 100 hits with their fields are over 4 KiB.
    let page = r#"{"size": 100, "fields": ["color", "price"]}"#;
    let (st, _, body) = post(&c, &format!("{}/collections/a/scroll", s.url), page).await;
    assert_eq!(st, 400, "{body}");
    assert_eq!(body["error"]["code"], "reply_too_large", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-reply-bytes"),
        "{body}"
    );
    // A small reply passes.
    let small = serde_json::json!({"vector": v, "k": 5}).to_string();
    let (st, _, body) = post(&c, &format!("{}/collections/a/search", s.url), &small).await;
    assert_eq!(st, 200, "{body}");
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admin_keys_see_the_servers_paths() {
    let dir = tempfile::tempdir().unwrap();
    let a = live_collection(dir.path(), "a", 10);
    let mut text = String::new();
    let mut keys = Vec::new();
    for (name, scope) in [("reader", Scope::Read), ("admin", Scope::Admin)] {
        let (k, entry) = new_key(name, scope, None).unwrap();
        text.push_str(&entry);
        text.push('\n');
        keys.push(k);
    }
    std::fs::write(dir.path().join("keys.toml"), &text).unwrap();
    let mut cfg = live_config(&a, "a");
    cfg.api_keys = Some(dir.path().join("keys.toml"));
    let s = TestServer::start(cfg).await;
    let c = client();
    let secret = dir.path().canonicalize().unwrap();
    let secret = secret.to_str().unwrap();
    for p in ["/stats", "/collections", "/collections/a"] {
        let get = |k: &str| {
            c.get(format!("{}{p}", s.url))
                .header("authorization", format!("Bearer {k}"))
                .send()
        };
        let body = get(&keys[0]).await.unwrap().text().await.unwrap();
        assert!(
            !body.contains(secret),
            "{p} shows {secret} to a read key: {body}"
        );
        let body = get(&keys[1]).await.unwrap().text().await.unwrap();
        assert!(
            body.contains(secret),
            "{p} hides the paths from an admin key: {body}"
        );
    }
    s.stop().await.unwrap();
}
