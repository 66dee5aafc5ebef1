//! `searchd ingest --to qdrant://...` and `searchd serve --backend qdrant` as real processes
//! against a real Qdrant (no mocks): the upload reaches green with every point, a second
//! ingest into the same name is refused unless --append or --recreate, and the server in
//! front answers searches, counts and gets that match a brute-force oracle.
//!
//! A live collection with upserts (new ids and replacements) and deletes, some committed, some
//! only in the write-ahead log, is snapshotted, restored and exported to Qdrant, from the
//! live directory and from the restored one: the same documents, versions and counts in the
//! live server, the restored collection served, and the Qdrant points.
//!
//! The Qdrant binary comes from `QDRANT_BIN` or a `qdrant` on `PATH` (`.ci/run` sets `QDRANT_BIN` to the workplace's `shared/qdrant/qdrant`);
//! where neither exists the tests print `skipped:` and pass, except under `CI=true`, where
//! they fail.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use searchd_server::qdrant::local::{find_binary, LocalQdrant};

const DIM: usize = 8;
const N: usize = 60;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_searchd")
}

fn run(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .env("SEARCHD_LOG", "warn")
        .output()
        .unwrap()
}

fn post(port: u16, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    request(port, "POST", path, &body.to_string())
}

fn get(port: u16, path: &str) -> (u16, serde_json::Value) {
    request(port, "GET", path, "")
}

fn request(port: u16, method: &str, path: &str, b: &str) -> (u16, serde_json::Value) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
        b.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1;
    let start = body.find('{').unwrap_or(0);
    let end = body.rfind('}').map_or(body.len(), |e| e + 1);
    (status, serde_json::from_str(&body[start..end]).unwrap())
}

/// Whether `GET /ready` answers 200 (the port accepts before the collection is open).
fn ready(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if write!(
        s,
        "GET /ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace().nth(1) == Some("200")
}

fn vector(i: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..DIM)
        .map(|d| {
            (((i * 31 + d * 17) % 23) as f32 - 11.0) / 7.0 + if d == i % DIM { 2.0 } else { 0.0 }
        })
        .collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn write_docs(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    for i in 0..N {
        let color = ["red", "green", "blue"][i % 3];
        writeln!(
            f,
            "{}",
            serde_json::json!({"id": i, "text": format!("doc {i} {color}"), "color": color, "n": i, "vector": vector(i)})
        )
        .unwrap();
    }
}

/// The Qdrant binary; `None` (the test is skipped) where there is none, but under
/// `CI=true` a missing binary fails the test.
fn qdrant_binary(test: &str) -> Option<PathBuf> {
    searchd_testkit::needs::require(
        searchd_testkit::needs::Need::Qdrant,
        test,
        find_binary(),
        "no Qdrant binary",
    )
}

#[test]
fn ingest_to_qdrant_then_serve_in_front_of_it() {
    let Some(qbin) = qdrant_binary("ingest_to_qdrant_then_serve_in_front_of_it") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let q = LocalQdrant::start(&qbin, &d.path().join("qdrant"), Duration::from_secs(60))
        .expect("qdrant starts");
    let docs = d.path().join("docs.jsonl");
    write_docs(&docs);
    let grpc = q.grpc_url();
    let to = format!("qdrant://{}/t", grpc.trim_start_matches("http://"));
    let base = [
        "ingest",
        "--docs",
        docs.to_str().unwrap(),
        "--vector-field",
        "vector",
        "--field-type",
        "n=integer",
        "--to",
        &to,
    ];
    let o = run(&base);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!("uploaded {N} documents")), "{out}");
    // The same name again: refused (a usage error, exit 2) unless told what to do.
    let o = run(&base);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already has a collection"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut again: Vec<&str> = base.to_vec();
    again.push("--recreate");
    let o = run(&again);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A bad target is a clear usage error.
    let o = run(&[
        "ingest",
        "--docs",
        docs.to_str().unwrap(),
        "--to",
        "qdrant://nohost",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no collection name"));

    // searchd in front of it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut srv = Command::new(bin())
        .args([
            "serve",
            "--backend",
            "qdrant",
            "--qdrant-url",
            &grpc,
            "--qdrant-collection",
            "t",
            "--addr",
            &format!("127.0.0.1:{port}"),
        ])
        .env("SEARCHD_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    // Ready, not merely listening: searches before the collection is open get 503.
    while !ready(port) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "server did not become ready"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in [0usize, 7, 33] {
        let qv = vector(i);
        let (s, r) = post(
            port,
            "/collections/t/search",
            &serde_json::json!({"vector": qv, "k": 5, "filter": {"term": {"color": "red"}}}),
        );
        assert_eq!(s, 200, "{r}");
        // Oracle: cosine over the red documents.
        let mut want: Vec<(f32, usize)> = (0..N)
            .filter(|j| j % 3 == 0)
            .map(|j| {
                (
                    vector(j).iter().zip(&qv).map(|(a, b)| a * b).sum::<f32>(),
                    j,
                )
            })
            .collect();
        want.sort_by(|a, b| b.0.total_cmp(&a.0));
        let got: Vec<u64> = r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_u64().unwrap())
            .collect();
        assert_eq!(got.len(), 5, "{r}");
        let kth = want[4].0;
        for g in &got {
            let score: f32 = vector(*g as usize)
                .iter()
                .zip(&qv)
                .map(|(a, b)| a * b)
                .sum();
            assert!(
                *g % 3 == 0 && score >= kth - 1e-5,
                "hit {g} not in the top 5: {r}"
            );
        }
    }
    let (s, r) = post(
        port,
        "/collections/t/count",
        &serde_json::json!({"filter": {"range": {"n": {"gte": 10, "lt": 40}}}}),
    );
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["count"], 30, "{r}");
    let (s, r) = post(port, "/t/_mget", &serde_json::json!({"ids": [3, 4000]}));
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["docs"][0]["found"], true, "{r}");
    assert_eq!(r["docs"][0]["_source"]["color"], "red", "{r}");
    assert_eq!(r["docs"][1]["found"], false, "{r}");
    srv.kill().unwrap();
    srv.wait().unwrap();
}

#[test]
fn demo_on_qdrant_runs_end_to_end_or_exits_2_without_a_binary() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("demo");
    let args = [
        "demo",
        "--backend",
        "qdrant",
        "--dir",
        dir.to_str().unwrap(),
        "--n",
        "3000",
        "--dim",
        "32",
        "--queries",
        "100",
        "--ramp",
        "1,2",
        "--warmup",
        "200ms",
        "--duration",
        "400ms",
    ];
    // No binary: a clear usage error, exit 2.
    let o = Command::new(bin())
        .args(args)
        .env("SEARCHD_LOG", "warn")
        .env("QDRANT_BIN", d.path().join("no-such-qdrant"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("QDRANT_BIN"), "{err}");

    let Some(qbin) = qdrant_binary("demo_on_qdrant_runs_end_to_end_or_exits_2_without_a_binary")
    else {
        return;
    };
    let child = Command::new(bin())
        .args(args)
        .env("SEARCHD_LOG", "warn")
        .env("QDRANT_BIN", &qbin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains("sustainable") && out.contains("passes the 0.9 gate"),
        "{out}"
    );
    assert!(err.contains("upload into Qdrant"), "{err}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("qdrant/report.json")).unwrap())
            .unwrap();
    assert_eq!(doc["schema"], "searchd.demo.v1");
    assert_eq!(doc["backend"]["kind"], "qdrant");
    assert_eq!(doc["backend"]["ingest"]["points_in_collection"], 3000);
    for s in doc["steps"].as_array().unwrap() {
        assert!(s["ok"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["error_rate"].as_f64().unwrap(), 0.0, "{s}");
        assert!(s["recall_at_k"].as_f64().unwrap() >= 0.9, "{s}");
    }
    assert!(dir.join("qdrant/report.html").is_file());
    // The node was stopped and its directory removed.
    assert!(!std::env::temp_dir()
        .join(format!("searchd-demo-qdrant-{pid}"))
        .exists());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `searchd serve` process, killed (by its pid) and reaped on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(collection: &str, extra: &[&str]) -> Server {
        let port = free_port();
        let child = Command::new(bin())
            .args(["serve", "--collection", collection, "--threads", "1"])
            .args(["--addr", &format!("127.0.0.1:{port}")])
            .args(extra)
            .env("SEARCHD_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = Server { child, port };
        let t = Instant::now();
        while !ready(port) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "server did not become ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const COLORS: [&str; 3] = ["red", "green", "blue"];

/// id -> version: what every copy of the collection must hold.
type Versions = BTreeMap<u64, u64>;

fn vector_of(id: u64, version: u64) -> Vec<f32> {
    vector((id + 1000 * version) as usize)
}

fn upsert(port: u16, model: &mut Versions, docs: &[(u64, u64)], wait: bool) {
    let body = serde_json::json!({
        "docs": docs.iter().map(|&(id, v)| serde_json::json!({
            "id": id,
            "text": format!("doc {id} v{v}"),
            "vector": vector_of(id, v),
            "fields": {"color": COLORS[id as usize % 3], "version": v},
        })).collect::<Vec<_>>(),
        "wait": wait,
    });
    let (s, r) = post(port, "/collections/c/docs", &body);
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        r["status"],
        if wait { "applied" } else { "acknowledged" },
        "{r}"
    );
    model.extend(docs.iter().copied());
}

fn delete(port: u16, model: &mut Versions, ids: &[u64], wait: bool) {
    let (s, r) = post(
        port,
        "/collections/c/delete",
        &serde_json::json!({"ids": ids, "wait": wait}),
    );
    assert_eq!(s, 200, "{r}");
    for id in ids {
        model.remove(id);
    }
}

/// Every document a searchd server holds, by `/scroll` and `/count`.
fn served(port: u16, name: &str) -> Versions {
    let (s, r) = post(
        port,
        &format!("/collections/{name}/scroll"),
        &serde_json::json!({"size": 1000, "fields": ["version"]}),
    );
    assert_eq!(s, 200, "{r}");
    assert!(r["next"].is_null(), "{r}");
    let mut out = Versions::new();
    for h in r["hits"].as_array().unwrap() {
        let id = h["id"].as_u64().unwrap();
        let v = h["fields"]["version"].as_u64().unwrap();
        assert!(out.insert(id, v).is_none(), "{name}: {id} twice: {r}");
    }
    let (s, c) = post(
        port,
        &format!("/collections/{name}/count"),
        &serde_json::json!({}),
    );
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["count"].as_u64(), Some(out.len() as u64), "{name}: {c}");
    out
}

/// Every point of a Qdrant collection, by its REST API: the version in the typed payload
/// and in the stored document must agree, and the vector must be that version's.
fn in_qdrant(q: &LocalQdrant, name: &str) -> Versions {
    let (s, r) = post(
        q.http_port,
        &format!("/collections/{name}/points/scroll"),
        &serde_json::json!({"limit": 1000, "with_payload": true, "with_vector": true}),
    );
    assert_eq!(s, 200, "{r}");
    assert!(r["result"]["next_page_offset"].is_null(), "{r}");
    let mut out = Versions::new();
    for p in r["result"]["points"].as_array().unwrap() {
        let id = p["id"].as_u64().unwrap();
        let v = p["payload"]["version"].as_u64().unwrap();
        let src: serde_json::Value =
            serde_json::from_str(p["payload"]["_src"].as_str().unwrap()).unwrap();
        assert_eq!(src["version"].as_u64(), Some(v), "{name}: point {p}");
        let got: Vec<f64> = p["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let want = vector_of(id, v);
        assert_eq!(got.len(), want.len(), "{name}: point {id}");
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - *b as f64).abs() < 1e-4,
                "{name}: point {id} v{v} has another version's vector: {got:?}"
            );
        }
        assert!(out.insert(id, v).is_none(), "{name}: point {id} twice");
    }
    let (s, c) = post(
        q.http_port,
        &format!("/collections/{name}/points/count"),
        &serde_json::json!({"exact": true}),
    );
    assert_eq!(s, 200, "{c}");
    assert_eq!(
        c["result"]["count"].as_u64(),
        Some(out.len() as u64),
        "{name}: {c}"
    );
    out
}

fn export(coll: &Path, q: &LocalQdrant, name: &str, model: &Versions) {
    let to = format!(
        "qdrant://{}/{name}",
        q.grpc_url().trim_start_matches("http://")
    );
    let o = run(&["ingest", "--docs", coll.to_str().unwrap(), "--to", &to]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}\n{err}");
    assert!(
        out.contains(&format!("uploaded {} documents", model.len())),
        "export of {} to {name}: {out}",
        coll.display()
    );
}

#[test]
fn a_live_collection_snapshot_restore_and_export_hold_the_same_documents() {
    let test = "a_live_collection_snapshot_restore_and_export_hold_the_same_documents";
    let Some(qbin) = qdrant_binary(test) else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let q = LocalQdrant::start(&qbin, &d.path().join("qdrant"), Duration::from_secs(60))
        .expect("qdrant starts");
    let docs = d.path().join("docs.jsonl");
    {
        let mut f = std::fs::File::create(&docs).unwrap();
        for id in 0..N as u64 {
            let color = COLORS[id as usize % 3];
            writeln!(
                f,
                "{}",
                serde_json::json!({"id": id, "text": format!("doc {id} v0"), "color": color, "version": 0, "vector": vector_of(id, 0)})
            )
            .unwrap();
        }
    }
    let coll = d.path().join("c");
    let o = run(&[
        "ingest",
        "--docs",
        docs.to_str().unwrap(),
        "--out",
        coll.to_str().unwrap(),
        "--vector-field",
        "vector",
        "--text-field",
        "text",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut model: Versions = (0..N as u64).map(|id| (id, 0)).collect();
    let spec = coll.to_str().unwrap();

    // 1. Replacements, new ids and deletes, committed: segments with deleted sets.
    {
        let a = Server::start(spec, &["--refresh-ms", "50", "--commit-ms", "100"]);
        upsert(
            a.port,
            &mut model,
            &[(0, 1), (1, 1), (2, 1), (3, 1), (60, 1), (61, 1)],
            true,
        );
        delete(a.port, &mut model, &[10, 11, 12, 13, 2], true);
        let t = Instant::now();
        loop {
            let (_, info) = get(a.port, "/collections/c");
            let seq = &info["info"]["live"]["seq"];
            if seq["logged"].as_u64().unwrap() > 0 && seq["committed"] == seq["logged"] {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "no commit: {info}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(coll.join("collection.json")).unwrap()).unwrap();
    assert!(
        manifest["segments"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["deleted"].is_object()),
        "the commit wrote deleted sets: {manifest}"
    );

    // 2. A server that neither refreshes nor commits on its own: writes waited for are
    // applied in its view but only in the log on disk; the others only logged.
    let b = Server::start(spec, &["--refresh-ms", "600000", "--commit-ms", "600000"]);
    upsert(
        b.port,
        &mut model,
        &[(1, 2), (4, 1), (62, 1), (10, 2)],
        true,
    );
    delete(b.port, &mut model, &[20, 21, 60], true);
    upsert(b.port, &mut model, &[(5, 1), (63, 1), (1, 3)], false);
    delete(b.port, &mut model, &[22, 61, 4], false);
    upsert(b.port, &mut model, &[(21, 3)], false);
    let (_, info) = get(b.port, "/collections/c");
    assert_eq!(info["info"]["live"]["pending"]["ops"], 3, "{info}");
    assert!(
        info["info"]["live"]["seq"]["committed"].as_u64()
            < info["info"]["live"]["seq"]["logged"].as_u64(),
        "{info}"
    );

    // The live directory exported while its server runs: its current state.
    export(&coll, &q, "live", &model);
    // A snapshot of it, restored.
    let (s, snap) = post(b.port, "/collections/c/snapshot", &serde_json::json!({}));
    assert_eq!(s, 200, "{snap}");
    let restored = d.path().join("restored");
    let o = run(&[
        "restore",
        "--snapshot",
        snap["path"].as_str().unwrap(),
        "--out",
        restored.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("restored {} documents", model.len())),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    export(&restored, &q, "restored", &model);

    // The same documents and versions everywhere: the live server (its pending writes made
    // visible by a write waited for, one that leaves a document as it is; a delete of an
    // absent id is not logged, so it refreshes nothing), the restored collection served,
    // both Qdrant copies.
    let at_snapshot = model.clone();
    upsert(b.port, &mut model, &[(62, 1)], true);
    assert_eq!(model, at_snapshot);
    assert_eq!(served(b.port, "c"), model, "live server");
    drop(b);
    let c = Server::start(restored.to_str().unwrap(), &[]);
    assert_eq!(
        served(c.port, "restored"),
        model,
        "restored collection served"
    );
    drop(c);
    assert_eq!(
        in_qdrant(&q, "live"),
        model,
        "Qdrant copy of the live directory"
    );
    assert_eq!(
        in_qdrant(&q, "restored"),
        model,
        "Qdrant copy of the restored snapshot"
    );
}
