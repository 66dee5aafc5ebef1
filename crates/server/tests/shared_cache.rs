//! The shared cache tier (`serve --cache-redis`) against real `redis-server` processes
//! (started on a free port without persistence, killed at the end): two front doors over
//! one local collection (the writer and a read-only second process over the same
//! directory) and over one Qdrant collection share replies; a write through one front door
//! acknowledged with `wait: true` is never served stale by the other; Redis killed fails
//! open (200s, `miss`, counted, fast) and after its restart nothing from before is served;
//! a malformed URL is a start error, an unreachable one a warning.
//!
//! `redis-server` comes from `REDIS_SERVER` or `PATH` (Need::Redis: `.ci/run` installs it);
//! the Qdrant test also needs the Qdrant binary (Need::Qdrant).

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{client, get_json, live_collection, live_config, TestServer, DIM};
use searchd_server::{ServeSettings, ServerConfig, ServerError};
use searchd_testkit::needs::{self, Need};
use serde_json::{json, Value};

/// A `redis-server` on 127.0.0.1:PORT, killed when dropped.
struct Redis {
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
}

fn find_redis() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDIS_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("redis-server"))
            .find(|p| p.is_file())
    })
}

impl Redis {
    fn start_or_skip(test: &str) -> Option<Redis> {
        let bin = needs::require(Need::Redis, test, find_redis(), "no redis-server")?;
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut r = Redis {
            bin,
            port,
            child: None,
        };
        r.start();
        Some(r)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn start(&mut self) {
        let child = Command::new(&self.bin)
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "redis never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn post(url: &str, body: &Value) -> (u16, String, Value) {
    let r = client().post(url).json(body).send().await.unwrap();
    let s = r.status().as_u16();
    let how = r
        .headers()
        .get("x-searchd-cache")
        .map(|h| h.to_str().unwrap().to_string())
        .unwrap_or_default();
    (s, how, r.json().await.unwrap_or(Value::Null))
}

fn ids(v: &Value) -> Vec<Value> {
    v["hits"]
        .as_array()
        .map(|h| h.iter().map(|x| x["id"].clone()).collect())
        .unwrap_or_default()
}

async fn shared_stats(url: &str) -> Value {
    get_json(&client(), &format!("{url}/stats")).await["cache"]["shared"].clone()
}

/// Wait until the server's shared tier is connected (its probe runs in the background).
async fn wait_connected(url: &str) {
    let t = Instant::now();
    while shared_stats(url).await["connected"] != json!(true) {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "{url} never connected to Redis: {}",
            shared_stats(url).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn with_tiers(mut c: ServerConfig, redis: &Redis, in_process: bool) -> ServerConfig {
    if in_process {
        c.cache = Some((4 << 20, Duration::from_secs(600)));
    }
    c.cache_redis = Some((redis.url(), Duration::from_secs(600)));
    c
}

fn vector(seed: usize) -> Vec<f32> {
    let v = common::data(1, DIM, 1000 + seed as u64);
    v.to_vec()
}

/// Read `body` through the door at `door` (a miss there), and wait until that door has
/// sent its reply to Redis (the SET is fire-and-forget): a reader asking earlier would
/// compute the reply itself and then answer from its own tier, never `shared-hit`.
async fn miss_and_store(door: &str, search: &str, body: &Value) -> Value {
    let before = shared_stats(door).await["stores"].as_u64().unwrap_or(0);
    let (st, _, v) = post(search, body).await;
    assert_eq!(st, 200, "{v}");
    let t = Instant::now();
    while shared_stats(door).await["stores"].as_u64().unwrap_or(0) <= before {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{door} never stored its reply: {}",
            shared_stats(door).await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    v
}

/// Wait until the door at `door` has stored `n` replies in Redis.
async fn wait_stored(door: &str, n: u64) {
    let t = Instant::now();
    while shared_stats(door).await["stores"].as_u64().unwrap_or(0) < n {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{door} stored fewer than {n} replies"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Read a query until the shared tier answers it (its entry is in Redis already).
async fn until_shared(url: &str, body: &Value) -> Value {
    let t = Instant::now();
    loop {
        let (st, how, v) = post(url, body).await;
        assert_eq!(st, 200, "{v}");
        if how == "shared-hit" {
            return v;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "never a shared hit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_front_doors_over_one_local_collection_share_replies() {
    let Some(redis) =
        Redis::start_or_skip("two_front_doors_over_one_local_collection_share_replies")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let coll = live_collection(dir.path(), "c", 200);
    // A takes the writes; B serves the same directory read-only (its own process would
    // find A's lock and do the same by itself).
    let a = TestServer::start(with_tiers(live_config(&coll, "c"), &redis, true)).await;
    let mut cb = live_config(&coll, "c");
    cb.live.read_only = true;
    let b = TestServer::start(with_tiers(cb, &redis, true)).await;
    wait_connected(&a.url).await;
    wait_connected(&b.url).await;
    let q = json!({"vector": vector(1), "k": 5});
    let (sa, sb) = (
        format!("{}/collections/c/search", a.url),
        format!("{}/collections/c/search", b.url),
    );
    let (st, how, first) = post(&sa, &q).await;
    assert_eq!((st, how.as_str()), (200, "miss"), "{first}");
    wait_stored(&a.url, 1).await;
    // B has never seen the query: it comes from Redis, then from its own tier.
    let shared = until_shared(&sb, &q).await;
    assert_eq!(shared, first, "B serves A's reply byte for byte");
    let (_, how, again) = post(&sb, &q).await;
    assert_eq!((how.as_str(), &again), ("hit", &first));
    let (_, how, _) = post(&sa, &q).await;
    assert_eq!(how, "hit");
    // The same query through another body spelling is the same entry.
    let (_, how, _) = post(&sb, &json!({"k": 5, "vector": vector(1)})).await;
    assert_eq!(how, "hit");
    let s = shared_stats(&b.url).await;
    assert!(s["hits"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["errors"], json!(0), "{s}");

    // A write through A (wait: true): A answers from the new view at once, never the old
    // reply; B (read-only, its view fixed until a reload) answers from its own view, not
    // from an entry computed before the write.
    let near = vector(1);
    let (st, _, v) = post(
        &format!("{}/collections/c/docs", a.url),
        &json!({"docs": [{"id": 5000, "vector": near, "fields": {"color": "red"}}], "wait": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let (_, how, v) = post(&sa, &q).await;
    assert_eq!(how, "miss");
    assert_eq!(ids(&v)[0], json!(5000), "{v}");
    let (_, how, v) = post(&sb, &q).await;
    assert_eq!(how, "miss", "the write's generation change reached B");
    assert_eq!(ids(&v), ids(&first), "B's own (older) view");
    // B reloads the directory: it now sees the write (and never the old reply).
    let r = client()
        .post(format!("{}/admin/reload", b.url))
        .json(&json!({"collection": "c", "index": coll}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let (_, how, v) = post(&sb, &q).await;
    assert_ne!(how, "hit");
    assert_eq!(ids(&v)[0], json!(5000), "{v}");
    assert!(
        shared_stats(&a.url).await["invalidations"]
            .as_u64()
            .unwrap()
            >= 1
    );
    b.stop().await.unwrap();
    a.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_tier_works_alone() {
    let Some(redis) = Redis::start_or_skip("the_redis_tier_works_alone") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let coll = live_collection(dir.path(), "c", 100);
    let a = TestServer::start(with_tiers(live_config(&coll, "c"), &redis, false)).await;
    wait_connected(&a.url).await;
    let sa = format!("{}/collections/c/search", a.url);
    let q = json!({"vector": vector(2), "k": 3});
    let (_, how, first) = post(&sa, &q).await;
    assert_eq!(how, "miss");
    let v = until_shared(&sa, &q).await;
    // The same answer. Not the same bytes: the first reply's store is fire-and-forget, so
    // under load a later miss can compute (other timings) and store the entry first.
    assert_eq!(v["hits"], first["hits"], "{v} vs {first}");
    assert_eq!(v["mode"], first["mode"]);
    let st = get_json(&client(), &format!("{}/stats", a.url)).await;
    assert_eq!(st["cache"]["enabled"], json!(false), "{st}");
    assert_eq!(st["cache"]["shared"]["enabled"], json!(true), "{st}");
    let m = client()
        .get(format!("{}/metrics", a.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains("searchd_cache_shared_hits_total"), "{m}");
    assert!(m.contains("searchd_cache_shared_breaker_open 0"), "{m}");
    a.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_fails_open_and_comes_back() {
    let Some(mut redis) = Redis::start_or_skip("redis_killed_fails_open_and_comes_back") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let coll = live_collection(dir.path(), "c", 200);
    let a = TestServer::start(with_tiers(live_config(&coll, "c"), &redis, true)).await;
    wait_connected(&a.url).await;
    let sa = format!("{}/collections/c/search", a.url);
    let q = json!({"vector": vector(3), "k": 5});
    let (_, how, before) = post(&sa, &q).await;
    assert_eq!(how, "miss");
    let (_, how, _) = post(&sa, &q).await;
    assert_eq!(how, "hit");

    redis.kill();
    // Every request answers, quickly, uncached; the failure is counted.
    for i in 0..40 {
        let t = Instant::now();
        let (st, how, v) = post(&sa, &q).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(how, "miss", "request {i} used a tier while Redis was down");
        assert_eq!(v["hits"], before["hits"]);
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let s = shared_stats(&a.url).await;
    assert!(
        s["errors"].as_u64().unwrap() + s["timeouts"].as_u64().unwrap() >= 1,
        "{s}"
    );
    assert_eq!(s["connected"], json!(false), "{s}");
    assert_eq!(s["breaker_open"], json!(true), "{s}");
    assert!(s["bypassed"].as_u64().unwrap() >= 40, "{s}");
    // A write while Redis is down succeeds; its invalidation waits for Redis.
    let (st, _, v) = post(
        &format!("{}/collections/c/docs", a.url),
        &json!({"docs": [{"id": 7000, "vector": vector(3), "fields": {}}], "wait": true}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let s = shared_stats(&a.url).await;
    assert_eq!(s["invalidation_failures"], json!(1), "{s}");
    assert_eq!(s["pending_invalidations"], json!(1), "{s}");

    redis.start();
    wait_connected(&a.url).await;
    let s = shared_stats(&a.url).await;
    assert_eq!(s["pending_invalidations"], json!(0), "{s}");
    assert!(s["breaker_open_s"].as_f64().unwrap() > 0.5, "{s}");
    // The restarted Redis is empty: the first read sets a generation and goes uncached;
    // then the tier serves again, and never the reply from before the write.
    let t = Instant::now();
    loop {
        let (st, how, v) = post(&sa, &q).await;
        assert_eq!(st, 200);
        assert_eq!(
            ids(&v)[0],
            json!(7000),
            "stale after the restart ({how}): {v}"
        );
        if how == "hit" {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the tier never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_url_is_a_start_error_and_an_unreachable_one_starts() {
    let dir = tempfile::tempdir().unwrap();
    let coll = live_collection(dir.path(), "c", 50);
    for bad in [
        "http://127.0.0.1:6379",
        "redis://",
        "not a url",
        "rediss://h:1",
    ] {
        let s = ServeSettings {
            index: Some(coll.clone()),
            cache_redis: Some(bad.into()),
            ..ServeSettings::default()
        };
        match ServerConfig::from_settings(&s) {
            Err(ServerError::Config(m)) => assert!(m.contains("--cache-redis"), "{bad}: {m}"),
            other => panic!("{bad}: {:?}", other.map(|_| ())),
        }
    }
    // A valid URL where nothing listens: the server starts and serves uncached.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = live_config(&coll, "c");
    c.cache = Some((1 << 20, Duration::from_secs(60)));
    c.cache_redis = Some((format!("redis://127.0.0.1:{port}"), Duration::from_secs(60)));
    let a = TestServer::start(c).await;
    let sa = format!("{}/collections/c/search", a.url);
    let q = json!({"vector": vector(4), "k": 3});
    for _ in 0..3 {
        let t = Instant::now();
        let (st, how, v) = post(&sa, &q).await;
        assert_eq!((st, how.as_str()), (200, "miss"), "{v}");
        assert!(t.elapsed() < Duration::from_secs(1));
    }
    let s = shared_stats(&a.url).await;
    assert_eq!(s["connected"], json!(false), "{s}");
    assert!(s["errors"].as_u64().unwrap() >= 1, "{s}");
    a.stop().await.unwrap();
}

#[cfg(feature = "qdrant")]
mod qdrant {
    use super::*;
    use searchd_server::qdrant::admin::{ingest_collection, Existing, IngestOptions};
    use searchd_server::qdrant::local::{find_binary, LocalQdrant};
    use searchd_server::qdrant::QdrantTarget;
    use searchd_server::IndexSource;
    use std::sync::Arc;

    fn qdrant_or_skip(test: &str) -> Option<(LocalQdrant, tempfile::TempDir)> {
        let bin = needs::require(Need::Qdrant, test, find_binary(), "no Qdrant binary")?;
        let dir = tempfile::tempdir().unwrap();
        let q = LocalQdrant::start(&bin, &dir.path().join("qdrant"), Duration::from_secs(60))
            .expect("qdrant starts");
        Some((q, dir))
    }

    async fn upload(q: &LocalQdrant, name: &str, coll: &Path) {
        let c = Arc::new(searchd_collection::LiveDocs::open(coll, &Default::default()).unwrap());
        let opts = IngestOptions {
            existing: Existing::Refuse,
            batch: 100,
            ..IngestOptions::default()
        };
        ingest_collection(&q.grpc_url(), name, c, &opts, Arc::new(|_| {}))
            .await
            .unwrap();
    }

    fn front_door(q: &LocalQdrant, redis: &Redis) -> ServerConfig {
        let mut c = ServerConfig::new(IndexSource::Qdrant(QdrantTarget::new(&q.grpc_url(), "q")));
        c.name = Some("q".into());
        c.threads = 2;
        c.timeout = Duration::from_secs(10);
        with_tiers(c, redis, true)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_through_one_front_door_is_never_stale_on_the_other() {
        let test = "a_write_through_one_front_door_is_never_stale_on_the_other";
        let Some(mut redis) = Redis::start_or_skip(test) else {
            return;
        };
        let Some((q, dir)) = qdrant_or_skip(test) else {
            return;
        };
        let coll = live_collection(dir.path(), "src", 200);
        upload(&q, "q", &coll).await;
        let a = TestServer::start(front_door(&q, &redis)).await;
        let b = TestServer::start(front_door(&q, &redis)).await;
        wait_connected(&a.url).await;
        wait_connected(&b.url).await;
        let (sa, sb) = (
            format!("{}/collections/q/search", a.url),
            format!("{}/collections/q/search", b.url),
        );
        let count = |u: &str| format!("{u}/collections/q/count");
        let all = json!({});
        // Rounds: warm both tiers of both doors, write through one (alternating), read the
        // other at once: the write must be there, whatever tier answers.
        for round in 0..6usize {
            let (w, r) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
            let (sw, sr) = if round % 2 == 0 {
                (&sa, &sb)
            } else {
                (&sb, &sa)
            };
            let query = json!({"vector": vector(10 + round), "k": 3});
            let old = miss_and_store(&w.url, sw, &query).await;
            until_shared(sr, &query).await;
            let (_, how, _) = post(sr, &query).await;
            assert_eq!(how, "hit");
            let (_, _, n0) = post(&count(&r.url), &all).await;
            let (_, _, _) = post(&count(&w.url), &all).await;
            let id = 9000 + round;
            let (st, _, v) = post(
                &format!("{}/collections/q/docs", w.url),
                &json!({"docs": [{"id": id, "vector": vector(10 + round), "fields": {"color": "red"}}], "wait": true}),
            )
            .await;
            assert_eq!(st, 200, "{v}");
            let (st, how, v) = post(sr, &query).await;
            assert_eq!(st, 200);
            assert_eq!(
                ids(&v)[0],
                json!(id),
                "round {round}: stale ({how}); before {old}"
            );
            let (_, how, n1) = post(&count(&r.url), &all).await;
            assert_eq!(
                n1["count"].as_u64().unwrap(),
                n0["count"].as_u64().unwrap() + 1,
                "round {round}: stale count ({how})"
            );
            // A delete through the reading door, seen by the writing one.
            let (st, _, v) = post(
                &format!("{}/collections/q/delete", r.url),
                &json!({"ids": [id], "wait": true}),
            )
            .await;
            assert_eq!(st, 200, "{v}");
            let (_, how, v) = post(sw, &query).await;
            assert!(
                !ids(&v).contains(&json!(id)),
                "round {round}: deleted doc served ({how})"
            );
        }

        // Redis killed: a write through A cannot be announced; B (which had the reply in
        // its own tier) must not serve it after Redis comes back.
        let query = json!({"vector": vector(50), "k": 3});
        miss_and_store(&a.url, &sa, &query).await;
        until_shared(&sb, &query).await;
        let (_, how, _) = post(&sb, &query).await;
        assert_eq!(how, "hit");
        redis.kill();
        let (st, _, v) = post(
            &format!("{}/collections/q/docs", a.url),
            &json!({"docs": [{"id": 9500, "vector": vector(50), "fields": {}}], "wait": true}),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        for _ in 0..5 {
            let (st, how, v) = post(&sb, &query).await;
            assert_eq!((st, how.as_str()), (200, "miss"));
            assert_eq!(ids(&v)[0], json!(9500));
        }
        redis.start();
        wait_connected(&a.url).await;
        wait_connected(&b.url).await;
        for _ in 0..20 {
            let (st, how, v) = post(&sb, &query).await;
            assert_eq!(st, 200);
            assert_eq!(
                ids(&v)[0],
                json!(9500),
                "stale after Redis restarted ({how})"
            );
        }
        b.stop().await.unwrap();
        a.stop().await.unwrap();
    }
}
