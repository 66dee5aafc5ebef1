//! `searchd ingest --to qdrant://...` and `searchd serve --backend qdrant` as real processes
//! against a real Qdrant (no mocks): the upload reaches green with every point, a second
//! ingest into the same name is refused unless --append or --recreate, and the server in
//! front answers searches, counts and gets that match a brute-force oracle.
//!
//! The Qdrant binary comes from `QDRANT_BIN` or the workplace's `shared/qdrant/qdrant`;
//! where neither exists the test prints `skipped:` and passes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
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
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let b = body.to_string();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
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
        "GET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
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

#[test]
fn ingest_to_qdrant_then_serve_in_front_of_it() {
    let Some(qbin) = find_binary() else {
        println!("skipped: no Qdrant binary (set QDRANT_BIN or put it at ../shared/qdrant/qdrant)");
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

    let Some(qbin) = find_binary() else {
        println!("skipped: no Qdrant binary (set QDRANT_BIN or put it at ../shared/qdrant/qdrant)");
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
