//! `https://` targets: a test CA and a server certificate for 127.0.0.1 and localhost
//! (rcgen), an in-process HTTPS server (tokio-rustls acceptor + hyper, the same fake
//! `/search` API as e2e.rs serves over plain http), and the library run against it: with
//! `--ca` the run counts answers; a certificate from another CA, or a server that does not
//! speak TLS, stops the preflight with a TLS error; `--ca` with an http:// URL is refused.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};

use searchd_load::{run, LoadConfig, LoadError};

const N: u64 = 500;

/// A test CA: its PEM and the issuer that signs server certificates.
fn new_ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

/// A server certificate for 127.0.0.1 and localhost signed by `ca`: (chain, key).
fn server_cert(
    ca: &Issuer<'static, KeyPair>,
) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    (
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

struct Fake {
    requests: AtomicU64,
    stats: AtomicU64,
}

async fn search(State(st): State<Arc<Fake>>, body: Bytes) -> Json<Value> {
    st.requests.fetch_add(1, Ordering::Relaxed);
    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
    let k = v["k"].as_u64().unwrap_or(10).min(N);
    let q = v["qidx"].as_u64().unwrap_or(0);
    let hits: Vec<Value> = (0..k)
        .map(|j| json!({"id": (q + j) % N, "score": 1.0 - j as f64 * 0.01}))
        .collect();
    Json(json!({"hits": hits, "took_us": 5}))
}

async fn stats(State(st): State<Arc<Fake>>) -> Json<Value> {
    st.stats.fetch_add(1, Ordering::Relaxed);
    Json(json!({
        "uptime_s": 1,
        "index": {"kind": "flat", "n": N, "dim": 4, "metric": "cosine"},
        "process": {"rss_bytes": 1_000_000, "cpu_seconds": 0.5, "threads": 2}
    }))
}

struct HttpsServer {
    port: u16,
    state: Arc<Fake>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The fake searchd API over HTTPS on 127.0.0.1 with a certificate signed by `ca`.
async fn start_https(ca: &Issuer<'static, KeyPair>) -> HttpsServer {
    let (chain, key) = server_cert(ca);
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let state = Arc::new(Fake {
        requests: AtomicU64::new(0),
        stats: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/search", post(search))
        .route("/stats", get(stats))
        .route("/health", get(|| async { "ok" }))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((s, _)) = listener.accept().await else {
                continue;
            };
            let svc = TowerToHyperService::new(app.clone());
            let acceptor = acceptor.clone();
            conns.spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    HttpsServer { port, state, task }
}

fn args(url: &str, ca: &Path, extra: &[&str]) -> LoadConfig {
    let mut a = common::args(url, extra, "100ms", "300ms");
    a.ca = Some(ca.to_path_buf());
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_ca_counts_answers_and_reads_stats() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, ca) = new_ca("searchd test CA");
    let ca_file = write(dir.path(), "ca.pem", &ca_pem);
    let srv = start_https(&ca).await;

    // An IP address host (the certificate's IP SAN), closed loop, two steps.
    let url = format!("https://127.0.0.1:{}", srv.port);
    let r = run(&args(
        &url,
        &ca_file,
        &["--ramp", "1,4", "--query-count", "50"],
    ))
    .await
    .unwrap();
    assert_eq!(r.target, url, "the report's target carries the scheme");
    assert_eq!(r.steps.len(), 2, "{:?}", r.aborted);
    for s in &r.steps {
        assert!(s.ok > 0, "no answers counted: {s:?}");
        assert_eq!(s.error_rate, 0.0, "{s:?}");
    }
    assert!(r.sustainable.is_some());
    let sent = srv.state.requests.load(Ordering::Relaxed);
    let ok: u64 = r.steps.iter().map(|s| s.ok).sum();
    assert!(
        sent >= ok,
        "server saw {sent} requests, the report counts {ok} answers"
    );
    // /stats was read over https too.
    assert_eq!(r.server_source, "stats");
    assert!(srv.state.stats.load(Ordering::Relaxed) > 0);
    let v = serde_json::to_value(&r).unwrap();
    assert!(v["target"].as_str().unwrap().starts_with("https://"));

    // A DNS name host (SNI and the certificate's DNS SAN), open loop.
    let url = format!("https://localhost:{}", srv.port);
    let r = run(&args(
        &url,
        &ca_file,
        &["--rate", "100", "--connections", "4"],
    ))
    .await
    .unwrap();
    assert_eq!(r.target, url);
    assert_eq!(r.mode, "open");
    assert!(r.steps[0].ok > 0, "{:?}", r.steps[0]);
    assert_eq!(r.steps[0].error_rate, 0.0, "{:?}", r.steps[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_ca_fails_the_preflight() {
    let dir = tempfile::tempdir().unwrap();
    let (_, ca) = new_ca("the server's CA");
    let (other_pem, _) = new_ca("some other CA");
    let other = write(dir.path(), "other.pem", &other_pem);
    let srv = start_https(&ca).await;
    let url = format!("https://127.0.0.1:{}", srv.port);
    let started = std::time::Instant::now();
    let e = run(&args(&url, &other, &["--ramp", "1"]))
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, LoadError::Tls { .. }), "{e:?}");
    assert!(m.contains("TLS handshake with") && m.contains(&url), "{m}");
    assert!(m.contains("certificate") && m.contains("--ca"), "{m}");
    assert_eq!(e.exit_code(), 1);
    assert_eq!(
        srv.state.requests.load(Ordering::Relaxed),
        0,
        "no load sent"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_to_a_server_that_does_not_speak_tls_fails_the_preflight() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, _) = new_ca("searchd test CA");
    let ca_file = write(dir.path(), "ca.pem", &ca_pem);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let url = format!("https://127.0.0.1:{port}");
    let e = run(&args(&url, &ca_file, &["--ramp", "1"]))
        .await
        .unwrap_err();
    assert!(matches!(e, LoadError::Tls { .. }), "{e:?}");
    task.abort();
}

#[tokio::test]
async fn ca_with_an_http_url_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, _) = new_ca("searchd test CA");
    let ca_file = write(dir.path(), "ca.pem", &ca_pem);
    // Port 9 (discard): nothing is contacted, the flags are refused first.
    let e = run(&args("http://127.0.0.1:9", &ca_file, &["--ramp", "1"]))
        .await
        .unwrap_err();
    assert!(matches!(e, LoadError::Usage { .. }), "{e:?}");
    assert_eq!(e.exit_code(), 2);
    let m = e.to_string();
    assert!(m.contains("--ca") && m.contains("plain http"), "{m}");

    // Other schemes are still refused, naming both that work.
    let mut a = common::args("ftp://127.0.0.1:9", &[], "100ms", "100ms");
    a.ca = None;
    let e = run(&a).await.unwrap_err();
    assert!(e.to_string().contains("http or https"), "{e}");

    // --ca that is no certificate file: a usage error naming --ca.
    let junk = write(dir.path(), "junk.pem", "hello\n");
    let e = run(&args("https://127.0.0.1:9", &junk, &["--ramp", "1"]))
        .await
        .unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.to_string().contains("--ca"), "{e}");
}
