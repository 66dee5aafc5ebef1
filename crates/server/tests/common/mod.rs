#![allow(dead_code)]
//! Shared helpers: seeded data, small indexes, an in-process server on 127.0.0.1:0.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use searchd_engine::{build_index, BuildConfig, Index, IndexKind, LoadOptions, Metric};
use searchd_server::{serve, IndexSource, QuerySource, ServerConfig, ServerError};
use searchd_vecio::Vectors;
use tokio::sync::oneshot;

pub const DIM: usize = 16;

/// Seeded clustered unit vectors.
pub fn data(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let clusters = 8;
    let centres: Vec<f32> = (0..clusters * dim)
        .map(|_| rng.random::<f32>() * 2.0 - 1.0)
        .collect();
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = rng.random_range(0..clusters);
        let mut row: Vec<f32> = (0..dim)
            .map(|j| centres[c * dim + j] + 0.5 * (rng.random::<f32>() * 2.0 - 1.0))
            .collect();
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
        out.extend(row);
    }
    out
}

/// Build an index of `n` seeded vectors into `dir/name`.
pub fn build(dir: &Path, name: &str, kind: IndexKind, n: usize, dim: usize, seed: u64) -> PathBuf {
    let out = dir.join(name);
    let cfg = BuildConfig {
        kind,
        metric: Metric::Cosine,
        threads: 1,
        ..BuildConfig::default()
    };
    build_index(&out, &data(n, dim, seed), dim, &cfg, &|_, _| {}).unwrap();
    out
}

pub fn open(dir: &Path) -> Arc<Index> {
    Arc::new(Index::open(dir, &LoadOptions::default()).unwrap())
}

pub fn queries(n: usize, dim: usize, seed: u64) -> Arc<Vectors> {
    Arc::new(Vectors::from_vec(data(n, dim, seed), n, dim))
}

/// A temp dir holding a flat index of 500 x 16 (seed 1) and a query matrix of 20 rows.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub index_dir: PathBuf,
    pub index: Arc<Index>,
    pub queries: Arc<Vectors>,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let index_dir = build(dir.path(), "flat", IndexKind::Flat, 500, DIM, 1);
    let index = open(&index_dir);
    Fixture {
        dir,
        index_dir,
        index,
        queries: queries(20, DIM, 99),
    }
}

impl Fixture {
    pub fn config(&self) -> ServerConfig {
        let mut c = ServerConfig::new(IndexSource::Loaded(self.index.clone()));
        c.queries = Some(QuerySource::Loaded(self.queries.clone()));
        c.threads = 2;
        c.max_inflight = 4;
        c.queue = 16;
        c.drain_timeout = Duration::from_secs(10);
        c
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<Result<(), ServerError>>,
}

impl TestServer {
    /// Start on 127.0.0.1:0 and wait until /ready answers 200.
    pub async fn start(config: ServerConfig) -> TestServer {
        let s = TestServer::start_unready(config).await;
        let c = client();
        let t = Instant::now();
        loop {
            if let Ok(r) = c.get(format!("{}/ready", s.url)).send().await {
                if r.status() == 200 {
                    break;
                }
            }
            assert!(t.elapsed() < Duration::from_secs(20), "server never ready");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s
    }

    pub async fn start_unready(config: ServerConfig) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(serve(config, listener, rx));
        TestServer {
            addr,
            url: format!("http://{addr}"),
            stop: Some(tx),
            handle,
        }
    }

    /// Signal shutdown and wait for serve() to return.
    pub async fn stop(mut self) -> Result<(), ServerError> {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(20), &mut self.handle)
            .await
            .expect("server did not stop")
            .unwrap()
    }

    /// Wait for serve() to return by itself.
    pub async fn join(mut self) -> Result<(), ServerError> {
        tokio::time::timeout(Duration::from_secs(20), &mut self.handle)
            .await
            .expect("server did not stop")
            .unwrap()
    }

    pub fn trigger_stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// POST a JSON body (as text, so tests can send anything).
pub async fn post(
    c: &reqwest::Client,
    url: &str,
    body: &str,
) -> (u16, reqwest::header::HeaderMap, serde_json::Value) {
    let r = c
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    split(r).await
}

pub async fn split(r: reqwest::Response) -> (u16, reqwest::header::HeaderMap, serde_json::Value) {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("reply is not JSON ({e}): {text:?} (status {status})"));
    (status, headers, v)
}

/// Assert an error reply: status, code, and that the message contains `needle`.
#[track_caller]
pub fn assert_error(
    got: &(u16, reqwest::header::HeaderMap, serde_json::Value),
    status: u16,
    code: &str,
    needle: &str,
) {
    let (s, _, v) = got;
    assert_eq!(*s, status, "status for {v}");
    assert_eq!(v["error"]["code"], code, "code in {v}");
    let msg = v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no message in {v}"));
    assert!(
        msg.to_lowercase().contains(&needle.to_lowercase()),
        "message {msg:?} should mention {needle:?}"
    );
}

/// The body of a GET that must answer 200, as text.
pub async fn get_text(c: &reqwest::Client, url: &str) -> String {
    let r = c.get(url).send().await.unwrap();
    assert_eq!(r.status(), 200, "GET {url}");
    r.text().await.unwrap()
}

pub async fn get_json(c: &reqwest::Client, url: &str) -> serde_json::Value {
    let r = c.get(url).send().await.unwrap();
    assert_eq!(r.status(), 200, "GET {url}");
    r.json().await.unwrap()
}

/// A collection directory `dir/name` of `n` documents with ids `0..n`: seeded vectors of
/// [`DIM`] (`vec`), a keyword `color` (red, blue, green in turn) and a float `price` on two
/// documents in three (every third has none). Served from it, it is a live collection.
pub fn live_collection(dir: &Path, name: &str, n: usize) -> PathBuf {
    use std::io::Write as _;
    let docs = dir.join(format!("{name}.jsonl"));
    let mut f = std::fs::File::create(&docs).unwrap();
    let vecs = data(n, DIM, 3);
    for i in 0..n {
        let color = ["red", "blue", "green"][i % 3];
        let mut o = serde_json::json!({
            "id": i,
            "vec": &vecs[i * DIM..(i + 1) * DIM],
            "color": color,
        });
        if i % 3 != 2 {
            o["price"] = serde_json::json!(i as f64 + 0.5);
        }
        writeln!(f, "{o}").unwrap();
    }
    drop(f);
    let out = dir.join(name);
    let mut c = searchd_collection::ingest::IngestConfig::new(&docs, &out);
    c.reader.vector_field = Some("vec".into());
    c.build.threads = 1;
    c.build.kind = IndexKind::Flat;
    c.lexical = None;
    searchd_collection::ingest::ingest(&c, None, &|_| {}).unwrap();
    out
}

/// A server of the one collection `name` at `dir` (live: it takes writes).
pub fn live_config(dir: &Path, name: &str) -> ServerConfig {
    let mut c = ServerConfig::new(IndexSource::Path(dir.to_path_buf()));
    c.name = Some(name.into());
    c.threads = 2;
    c.drain_timeout = Duration::from_secs(10);
    c
}
