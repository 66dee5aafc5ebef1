//! `searchd load`, `gt`, `eval` and `build` as a user meets them: real `searchd serve`
//! processes on loopback, real `searchd load` processes, exit statuses and files. No
//! assertion depends on how fast anything runs.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `searchd` binary under test.
fn cmd() -> Command {
    use assert_cmd::prelude::CommandCargoExt;
    Command::cargo_bin("searchd").unwrap()
}

fn searchd(args: &[&str]) -> Output {
    cmd()
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

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` on a fresh connection: the status, or None when nothing answers.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, buf))
}

/// 2000 x 16 synthetic vectors (50 queries), exact top-20 ground truth, a flat index.
struct Data {
    _dir: tempfile::TempDir,
    d: PathBuf,
    queries: PathBuf,
    gt: PathBuf,
    idx: PathBuf,
}

fn data() -> Data {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let data = d.join("data");
    ok(&[
        "dataset",
        "synth",
        "--n",
        "2000",
        "--dim",
        "16",
        "--queries",
        "50",
        "--out",
        p(&data),
        "--seed",
        "3",
    ]);
    let (base, queries) = (data.join("base.npy"), data.join("queries.npy"));
    let gt = d.join("gt.npy");
    ok(&[
        "gt",
        "--base",
        p(&base),
        "--queries",
        p(&queries),
        "--out",
        p(&gt),
        "--k",
        "20",
    ]);
    let idx = d.join("idx");
    ok(&[
        "build",
        "--base",
        p(&base),
        "--out",
        p(&idx),
        "--index",
        "flat",
    ]);
    Data {
        _dir: dir,
        d,
        queries,
        gt,
        idx,
    }
}

/// A `searchd serve` child, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(d: &Data) -> Server {
    let port = free_port();
    let child = cmd()
        .args([
            "serve",
            "--index",
            p(&d.idx),
            "--queries",
            p(&d.queries),
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--threads",
            "1",
        ])
        .env("SEARCHD_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while http_get(port, "/ready").map(|r| r.0) != Some(200) {
        assert!(t.elapsed() < Duration::from_secs(60), "server never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    Server { child, port }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn load_preflight_exit_codes_flags_and_first_errors() {
    let d = data();
    let srv = serve(&d);
    let url = format!("http://127.0.0.1:{}", srv.port);

    // A closed port: refused by the preflight, non-zero, one clear line, no report.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let o = searchd(&["load", "--url", &closed, "--ramp", "1,2", "--warmup", "5s"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot reach"), "{err}");
    // A host that does not resolve.
    let o = searchd(&[
        "load",
        "--url",
        "http://no-such-host.invalid:80",
        "--ramp",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot reach"));

    // The server's query matrix has 50 rows: 100 queries are refused at start, naming
    // the qidx and repeating the server's message.
    let o = searchd(&[
        "load",
        "--url",
        &url,
        "--query-count",
        "100",
        "--ramp",
        "1",
        "--warmup",
        "0s",
        "--duration",
        "200ms",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("qidx 99") && err.contains("--query-count"),
        "{err}"
    );
    assert!(err.contains("HTTP 400"), "{err}");

    // A passing run: old flag names and wrk/oha habits work; exit 0; recall under load.
    let j = srv_json(&d, "ok.json");
    let port = srv.port.to_string();
    let o = searchd(&[
        "load",
        "--port",
        &port,
        "--queries",
        "50",
        "-c",
        "2",
        "-z",
        "300ms",
        "--warmup",
        "100ms",
        "--gt",
        p(&d.gt),
        "--json",
        p(&j),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("verdict: PASS"), "{out}");
    let doc = json(&j);
    assert_eq!(doc["schema"], "searchd.load.v1");
    assert_eq!(doc["config"]["ramp"], serde_json::json!([2]));
    assert_eq!(doc["steps"][0]["errors"]["http_4xx"], 0);
    assert!(doc["steps"][0]["recall_at_k"].as_f64().unwrap() > 0.99);
    assert!(doc["steps"][0]["per_second"].as_array().is_some());
    // --queries given the query file: its row count.
    let o = searchd(&[
        "load",
        &url,
        "--queries",
        p(&d.queries),
        "--ramp",
        "1",
        "-d",
        "200ms",
        "--warmup",
        "0s",
        "--json",
        p(&j),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&j)["config"]["queries"], 50);
    // oha's -n is not a silent no-op.
    let o = searchd(&["load", &url, "-n", "1000"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--duration"));

    // Every answer an error: non-zero exit, no peak, and the server's own message shown
    // (a qidx past the server's query matrix: the client cannot know the matrix size,
    // so only the server's 400 can say what is wrong).
    let bodies = d.d.join("bad.jsonl");
    std::fs::write(&bodies, "{\"qidx\": 999999, \"k\": 5}\n").unwrap();
    let o = searchd(&[
        "load",
        "--url",
        &url,
        "--body-file",
        p(&bodies),
        "--ramp",
        "1",
        "--warmup",
        "0s",
        "--duration",
        "200ms",
        "--json",
        p(&j),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("first http_4xx: HTTP 400"), "{out}");
    assert!(out.contains("verdict: FAIL"), "{out}");
    let doc = json(&j);
    assert!(
        doc["peak"].is_null() && doc["sustainable"].is_null(),
        "{doc}"
    );
    let first = doc["steps"][0]["first_errors"]["http_4xx"]
        .as_str()
        .unwrap();
    assert!(first.contains("invalid_argument"), "{first}");
}

fn srv_json(d: &Data, name: &str) -> PathBuf {
    d.d.join(name)
}

#[test]
fn first_ctrl_c_writes_the_partial_report_and_exits_130() {
    let d = data();
    let srv = serve(&d);
    let j = d.d.join("int.json");
    let h = d.d.join("int.html");
    let mut child = cmd()
        .args([
            "load",
            "--url",
            &format!("http://127.0.0.1:{}", srv.port),
            "--query-count",
            "50",
            "--ramp",
            "1,2,4,8",
            "--warmup",
            "0s",
            "--duration",
            "1h",
            "--json",
            p(&j),
            "--html",
            p(&h),
        ])
        .env("SEARCHD_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // stderr is not a terminal here, so there is no progress to watch: wait until the
    // server has answered some of the step's requests (it counts them).
    let t = Instant::now();
    loop {
        let served = http_get(srv.port, "/stats")
            .and_then(|(_, b)| {
                let body = b.split("\r\n\r\n").nth(1)?.to_string();
                let v: serde_json::Value = serde_json::from_str(&body).ok()?;
                v["requests"]["total"].as_u64()
            })
            .unwrap_or(0);
        if served > 200 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "no load arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{out}\n{err}");
    assert!(out.contains("INTERRUPTED"), "{out}");
    let doc = json(&j);
    assert_eq!(doc["interrupted"], true, "{doc}");
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "the 1 h step never finished: {doc}");
    assert_eq!(steps[0]["partial"], true);
    assert_eq!(steps[0]["slo_pass"], false);
    assert!(steps[0]["ok"].as_u64().unwrap() > 0);
    assert!(doc["sustainable"].is_null());
    let html = std::fs::read_to_string(&h).unwrap();
    assert!(html.contains("INTERRUPTED"));
}

#[test]
fn ground_truth_records_its_metric_and_eval_refuses_another() {
    let d = data();
    // The sidecar says what the file was computed under.
    let meta = json(Path::new(&format!("{}.meta.json", p(&d.gt))));
    assert_eq!(meta["schema"], "searchd.gt.v1");
    assert_eq!(meta["metric"], "cosine");
    assert_eq!(meta["k"], 20);
    // Ground truth under l2 against the cosine index: refused with the reason.
    let base = d.d.join("data/base.npy");
    let gt_l2 = d.d.join("gt-l2.npy");
    ok(&[
        "gt",
        "--base",
        p(&base),
        "--queries",
        p(&d.queries),
        "--out",
        p(&gt_l2),
        "--k",
        "20",
        "--metric",
        "l2",
    ]);
    let o = searchd(&[
        "eval",
        "--index",
        p(&d.idx),
        "--queries",
        p(&d.queries),
        "--gt",
        p(&gt_l2),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("metric l2") && err.contains("cosine"), "{err}");
    // load refuses it too (the server's /stats names the index's metric).
    let srv = serve(&d);
    let o = searchd(&[
        "load",
        "--url",
        &format!("http://127.0.0.1:{}", srv.port),
        "--query-count",
        "50",
        "--gt",
        p(&gt_l2),
        "--ramp",
        "1",
        "--warmup",
        "0s",
        "--duration",
        "100ms",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("metric l2"), "{err}");
    // An old file without the sidecar is still read (with a warning).
    std::fs::remove_file(format!("{}.meta.json", p(&d.gt))).unwrap();
    let html = d.d.join("eval.html");
    let o = searchd(&[
        "eval",
        "--index",
        p(&d.idx),
        "--queries",
        p(&d.queries),
        "--gt",
        p(&d.gt),
        "--ef",
        "10",
        "--min-seconds",
        "0.01",
        "--html",
        p(&html),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("records no metric"));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("Recall@10 against QPS"));
}

#[test]
fn build_removes_dead_temp_dirs_and_prints_progress_lines_off_a_terminal() {
    let d = data();
    let base = d.d.join("data/base.npy");
    let out = d.d.join("idx2");
    // A temp dir of a build that died (no such pid) and one of a live process (ours).
    let dead = d.d.join("idx2.tmp-4000000");
    let live = d.d.join(format!("idx2.tmp-{}", std::process::id()));
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("vectors.bin"), b"half").unwrap();
    std::fs::create_dir_all(&live).unwrap();
    let o = searchd(&["build", "--base", p(&base), "--out", p(&out), "--m", "8"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!dead.exists(), "the dead build's temp dir is removed");
    assert!(live.exists(), "a live process's temp dir is left alone");
    assert!(err.contains("no longer running"), "{err}");
    // stderr is a pipe: plain progress lines instead of a bar.
    assert!(err.contains("build: 0/2000 started"), "{err}");
    assert!(out.join("manifest.json").exists());
}
