//! `--mix` (weighted mix of endpoints) and `--cache cold|warm`: parsing, and runs
//! against an in-process axum server that records every request target it sees.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::{json, Value};

use searchd_load::config::parse_endpoint;
use searchd_load::mix::{build_schedule, mix_lines_from_reader, parse_mix, parse_mix_line};
use searchd_load::{run, LoadConfig, LoadError, Report};

// ---------------------------------------------------------------- parsing

#[test]
fn mix_specs_parse() {
    let m = parse_mix("search=q.txt:3,get=docs.txt:1.5,count=c.txt").unwrap();
    let got: Vec<(&str, &str, f64)> =
        m.0.iter()
            .map(|e| (e.name.as_str(), e.file.to_str().unwrap(), e.weight))
            .collect();
    assert_eq!(
        got,
        vec![
            ("search", "q.txt", 3.0),
            ("get", "docs.txt", 1.5),
            ("count", "c.txt", 1.0)
        ]
    );
    let m = parse_mix(" a-1_B = dir/x.txt : 2 ").unwrap();
    assert_eq!(m.0[0].name, "a-1_B");
    assert_eq!(m.0[0].file, PathBuf::from("dir/x.txt"));
    assert_eq!(m.0[0].weight, 2.0);
    for (bad, needle) in [
        ("a=x.txt:0", "must be > 0"),
        ("a=x.txt:-1", "must be > 0"),
        ("a=x.txt:heavy", "is not a number"),
        ("a=x.txt:inf", "must be > 0"),
        ("a=x.txt:NaN", "must be > 0"),
        ("a=x.txt,a=y.txt", "duplicate name 'a'"),
        ("a=", "has no file"),
        ("a=:3", "has no file"),
        ("x.txt", "no '='"),
        ("=x.txt", "name ''"),
        ("a b=x.txt", "name 'a b'"),
        ("a=x.txt,,b=y.txt", "empty entry"),
        ("", "empty entry"),
    ] {
        let e = parse_mix(bad).unwrap_err();
        assert!(
            e.contains("invalid mix") && e.contains(needle),
            "{bad}: {e}"
        );
    }
}

#[test]
fn mix_lines_parse_in_three_forms() {
    let ep = parse_endpoint("POST /search").unwrap();
    let l = parse_mix_line("GET /collections/t/docs/d17", &ep).unwrap();
    assert_eq!(l.method, hyper::Method::GET);
    assert_eq!(l.path, "/collections/t/docs/d17");
    assert_eq!(l.body, None);
    assert!(!l.with_body());
    let l = parse_mix_line(
        "POST /collections/t/count {\"filter\": {\"year\": {\"gte\": 2000}}}",
        &ep,
    )
    .unwrap();
    assert_eq!(l.method, hyper::Method::POST);
    assert_eq!(l.path, "/collections/t/count");
    assert_eq!(
        l.body.as_deref(),
        Some(&b"{\"filter\": {\"year\": {\"gte\": 2000}}}"[..])
    );
    let l = parse_mix_line("  {\"qidx\": 3, \"k\": 5}  ", &ep).unwrap();
    assert_eq!(l.method, hyper::Method::POST);
    assert_eq!(l.path, "/search");
    assert_eq!(l.body.as_deref(), Some(&b"{\"qidx\": 3, \"k\": 5}"[..]));
    for m in ["put", "DELETE", "HEAD"] {
        let l = parse_mix_line(&format!("{m} /x?y=1"), &ep).unwrap();
        assert_eq!(l.method.as_str(), m.to_ascii_uppercase());
        assert_eq!(l.path, "/x?y=1");
    }
    let get = parse_endpoint("GET /health").unwrap();
    for (line, e, needle) in [
        ("FETCH /x", &ep, "unknown method 'FETCH'"),
        ("PATCH /x {}", &ep, "unknown method"),
        ("GET x/y", &ep, "must start with '/'"),
        ("GET", &ep, "needs a path"),
        ("POST /c {\"a\": ", &ep, "not valid JSON"),
        ("POST /c nope", &ep, "not valid JSON"),
        ("GET /c {\"a\": 1}", &ep, "GET takes no body"),
        ("{\"a\": ", &ep, "not valid JSON"),
        ("{\"k\": 1} x", &ep, "not valid JSON"),
        ("{\"k\": 1}", &get, "needs an --endpoint that takes a body"),
    ] {
        let err = parse_mix_line(line, e).unwrap_err();
        assert!(err.contains(needle), "{line}: {err}");
    }
}

#[test]
fn mix_files_name_the_bad_line() {
    let ep = parse_endpoint("POST /search").unwrap();
    let text = "GET /a\n\n  \nPOST /b {\"x\": 1}\n{\"k\": 2}\n";
    let ls = mix_lines_from_reader(text.as_bytes(), Path::new("m.txt"), &ep).unwrap();
    assert_eq!(ls.len(), 3);
    for (text, line, needle) in [
        ("GET /a\n\nGRAB /b\n", 3, "unknown method"),
        ("GET /a\nGET b\n", 2, "must start with '/'"),
        (
            "POST /a {\"x\": 1}\nPOST /a {\"x\": \n",
            2,
            "not valid JSON",
        ),
    ] {
        match mix_lines_from_reader(text.as_bytes(), Path::new("m.txt"), &ep) {
            Err(e @ LoadError::BodyFile { .. }) => {
                let msg = e.to_string();
                assert!(msg.starts_with(&format!("m.txt:{line}: ")), "{msg}");
                assert!(msg.contains(needle), "{msg}");
                assert_eq!(e.exit_code(), 2);
            }
            other => panic!("{text:?}: expected BodyFile, got {other:?}"),
        }
    }
    let e = mix_lines_from_reader("\n \n".as_bytes(), Path::new("m.txt"), &ep).unwrap_err();
    assert!(matches!(e, LoadError::Usage { .. }), "{e}");
    assert!(e.to_string().contains("m.txt"), "{e}");
}

#[test]
fn schedules_follow_weights_and_use_every_line() {
    let s = build_schedule(&[3.0, 1.0], &[5, 2], 42);
    assert_eq!(s.len(), 10_000);
    let n0 = s.ep.iter().filter(|&&e| e == 0).count();
    assert_eq!(n0, 7_500);
    // lines rotate in order within an endpoint
    let l0: Vec<u32> =
        s.ep.iter()
            .zip(&s.line)
            .filter(|(&e, _)| e == 0)
            .map(|(_, &l)| l)
            .take(7)
            .collect();
    assert_eq!(l0, vec![0, 1, 2, 3, 4, 0, 1]);
    // seeded: same seed, same schedule; another seed, another order
    assert_eq!(s, build_schedule(&[3.0, 1.0], &[5, 2], 42));
    assert_ne!(s.ep, build_schedule(&[3.0, 1.0], &[5, 2], 43).ep);
    // a light endpoint with many lines still gets every line
    let s = build_schedule(&[100.0, 1.0], &[1, 500], 1);
    let used: std::collections::HashSet<u32> =
        s.ep.iter()
            .zip(&s.line)
            .filter(|(&e, _)| e == 1)
            .map(|(_, &l)| l)
            .collect();
    assert_eq!(used.len(), 500);
    // more lines than the minimum: at least one entry per line
    let s = build_schedule(&[1.0], &[12_345], 1);
    assert_eq!(s.len(), 12_345);
    // a tiny weight still gets an entry
    let s = build_schedule(&[1.0, 1e-9], &[1, 1], 1);
    assert!(s.ep.contains(&1));
}

// ---------------------------------------------------------------- server

#[derive(Default)]
struct Seen {
    targets: Mutex<Vec<String>>,
}

fn note(st: &Seen, uri: &Uri) {
    st.targets.lock().unwrap().push(
        uri.path_and_query()
            .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string()),
    );
}

async fn fast_doc(State(st): State<Arc<Seen>>, uri: Uri) -> Json<Value> {
    note(&st, &uri);
    Json(json!({"id": uri.path(), "fields": {"year": 2001}}))
}

async fn slow_count(State(st): State<Arc<Seen>>, uri: Uri, body: Bytes) -> Response {
    note(&st, &uri);
    tokio::time::sleep(Duration::from_millis(4)).await;
    match serde_json::from_slice::<Value>(&body) {
        Ok(_) => Json(json!({"count": 17})).into_response(),
        Err(_) => StatusCode::BAD_REQUEST.into_response(),
    }
}

async fn fail(State(st): State<Arc<Seen>>, uri: Uri) -> Response {
    note(&st, &uri);
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(json!({"error": "boom"})),
    )
        .into_response()
}

async fn garbage(State(st): State<Arc<Seen>>, uri: Uri) -> &'static str {
    note(&st, &uri);
    "this is not json"
}

async fn empty(State(st): State<Arc<Seen>>, uri: Uri) -> StatusCode {
    note(&st, &uri);
    StatusCode::NO_CONTENT
}

async fn search(State(st): State<Arc<Seen>>, uri: Uri, body: Bytes) -> Json<Value> {
    note(&st, &uri);
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let k = v["k"].as_u64().unwrap_or(10);
    let hits: Vec<Value> = (0..k)
        .map(|j| json!({"id": j, "score": 1.0 - j as f64 * 0.01}))
        .collect();
    Json(json!({"hits": hits, "took_us": 3}))
}

struct TestServer {
    url: String,
    seen: Arc<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    fn targets(&self) -> Vec<String> {
        self.seen.targets.lock().unwrap().clone()
    }
    fn clear(&self) {
        self.seen.targets.lock().unwrap().clear();
    }
}

async fn start_server() -> TestServer {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/docs/{id}", get(fast_doc))
        .route("/count", post(slow_count))
        .route("/fail", post(fail).get(fail))
        .route("/garbage", get(garbage))
        .route("/empty", post(empty))
        .route("/search", post(search))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((s, _)) = listener.accept().await else {
                continue;
            };
            let svc = TowerToHyperService::new(app.clone());
            conns.spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    TestServer { url, seen, task }
}

fn args(url: &str, extra: &[&str]) -> LoadConfig {
    common::args(url, extra, "100ms", "300ms")
}

fn schema_check(r: &Report) -> Value {
    let schema: Value = serde_json::from_str(include_str!(
        "../../../docs/schemas/searchd.load.v1.schema.json"
    ))
    .unwrap();
    let v = serde_json::to_value(r).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "schema violations: {errors:#?}\n{v:#}");
    v
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

// ---------------------------------------------------------------- runs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mix_splits_by_weight_and_reports_per_endpoint() {
    let srv = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let docs = write(
        dir.path(),
        "docs.txt",
        "GET /docs/d1\nGET /docs/d2\n\nGET /docs/d3\n",
    );
    let count = write(
        dir.path(),
        "count.txt",
        "POST /count {\"filter\": {\"year\": 2001}}\nPOST /count {\"filter\": {}}\n",
    );
    let mix = format!("get={docs}:3,count={count}:1");
    let html_p = dir.path().join("r.html");
    let a = args(
        &srv.url,
        &[
            "--mix",
            &mix,
            "--ramp",
            "8",
            "--duration",
            "800ms",
            "--slo-p99-ms",
            "1000",
            "--html",
            html_p.to_str().unwrap(),
        ],
    );
    let r = run(&a).await.unwrap();
    let v = schema_check(&r);
    assert_eq!(v["cache"], Value::Null);
    let mix_info = v["mix"].as_array().unwrap();
    assert_eq!(mix_info.len(), 2);
    assert_eq!(mix_info[0]["name"], "get");
    assert_eq!(mix_info[0]["weight"], 3.0);
    assert_eq!(mix_info[0]["lines"], 3);
    assert_eq!(mix_info[1]["name"], "count");
    assert_eq!(mix_info[1]["lines"], 2);
    assert_eq!(r.config.bodies, 5);
    assert_eq!(r.config.queries, None);

    let s = &r.steps[0];
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    let g = s.endpoints.get("get").unwrap();
    let c = s.endpoints.get("count").unwrap();
    assert_eq!(g.requests + c.requests, s.requests);
    assert_eq!(g.ok + c.ok, s.ok);
    assert!(s.requests > 1500, "only {} requests", s.requests);
    let share = g.requests as f64 / s.requests as f64;
    assert!((share - 0.75).abs() <= 0.75 * 0.15, "get share {share}");
    assert!(c.p50_ms.unwrap() > g.p50_ms.unwrap(), "{g:?} {c:?}");
    assert!(c.mean_ms.unwrap() > g.mean_ms.unwrap(), "{g:?} {c:?}");
    assert!(c.p50_ms.unwrap() >= 4.0, "{c:?}");
    assert!(g.qps > c.qps);
    assert!(g.error_kinds.is_empty() && c.error_kinds.is_empty());
    let js = &v["steps"][0]["endpoints"];
    assert_eq!(js.as_object().unwrap().len(), 2);
    for key in [
        "requests",
        "ok",
        "errors",
        "error_kinds",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "mean_ms",
        "max_ms",
        "qps",
    ] {
        assert!(js["get"].get(key).is_some(), "endpoints.get.{key} missing");
    }

    // every line was sent, bodies and methods as written
    let targets = srv.targets();
    for t in ["/docs/d1", "/docs/d2", "/docs/d3", "/count"] {
        assert!(targets.iter().any(|x| x == t), "{t} never sent");
    }
    assert!(!targets.iter().any(|t| t.contains("nonce")));

    let mut table = Vec::new();
    searchd_load::print_table(&r, &mut table).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(table.contains("mix: get="), "{table}");
    let ep_lines: Vec<&str> = table
        .lines()
        .filter(|l| l.trim_start().starts_with("get ") || l.trim_start().starts_with("count "))
        .collect();
    assert_eq!(ep_lines.len(), 2, "{table}");
    assert!(ep_lines[0].contains("p99"), "{table}");
    searchd_load::write_outputs(&r, &a).unwrap();
    let html = std::fs::read_to_string(&html_p).unwrap();
    assert!(html.contains("Per endpoint") && html.contains("<td>count</td>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mix_counts_errors_per_endpoint() {
    let srv = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.txt",
        "GET /docs/a\nPOST /empty\nHEAD /docs/h\n",
    );
    let bad = write(dir.path(), "bad.txt", "POST /fail {\"x\": 1}\nGET /fail\n");
    let junk = write(dir.path(), "junk.txt", "GET /garbage\n");
    let bare = write(dir.path(), "bare.txt", "{\"qidx\": 1, \"k\": 3}\n");
    let mix = format!("good={good}:2,bad={bad},junk={junk}:1,bare={bare}:1");
    let r = run(&args(
        &srv.url,
        &["--mix", &mix, "--ramp", "2", "--max-error-rate", "1"],
    ))
    .await
    .unwrap();
    let v = schema_check(&r);
    let s = &r.steps[0];
    let e = |n: &str| s.endpoints.get(n).unwrap().clone();
    let (good, bad, junk, bare) = (e("good"), e("bad"), e("junk"), e("bare"));
    assert!(good.ok > 10 && good.errors == 0, "{good:?}");
    assert_eq!(good.ok, good.requests);
    assert!(bad.requests > 5 && bad.ok == 0, "{bad:?}");
    assert_eq!(bad.errors, bad.requests);
    assert_eq!(bad.error_kinds.get("http_5xx"), Some(&bad.requests));
    assert_eq!(bad.error_kinds.len(), 1);
    assert_eq!((bad.p50_ms, bad.max_ms, bad.qps), (None, None, 0.0));
    assert!(junk.requests > 2 && junk.ok == 0, "{junk:?}");
    assert_eq!(junk.error_kinds.get("bad_body"), Some(&junk.requests));
    assert!(bare.ok > 2 && bare.errors == 0, "{bare:?}");
    assert_eq!(
        s.errors.total(),
        bad.errors + junk.errors,
        "step errors are the endpoints' errors"
    );
    assert_eq!(
        v["steps"][0]["endpoints"]["bad"]["error_kinds"]["http_5xx"],
        bad.requests
    );
    assert!(v["steps"][0]["endpoints"]["good"]["error_kinds"]
        .as_object()
        .unwrap()
        .is_empty());
    let t = srv.targets();
    assert!(
        t.iter().any(|x| x == "/search"),
        "bare JSON goes to --endpoint"
    );
    assert!(t.iter().any(|x| x == "/empty"));
    assert!(
        t.iter().any(|x| x == "/docs/h"),
        "HEAD sent (and its bodiless answer read)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mix_trials_sum_counts_and_open_loop_drops_per_endpoint() {
    let srv = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let a_f = write(dir.path(), "a.txt", "GET /docs/x\n");
    let b_f = write(dir.path(), "b.txt", "POST /count {}\n");
    let mix = format!("a={a_f}:1,b={b_f}:1");
    let r = run(&args(
        &srv.url,
        &[
            "--mix",
            &mix,
            "--ramp",
            "2",
            "--trials",
            "2",
            "--duration",
            "200ms",
        ],
    ))
    .await
    .unwrap();
    schema_check(&r);
    let s = &r.steps[0];
    assert_eq!(s.trials.n, 2);
    let sum: u64 = s.endpoints.0.iter().map(|(_, e)| e.requests).sum();
    assert_eq!(sum, s.requests, "summed over trials like the step");

    // open loop, 2 connections at 800/s against a 4 ms endpoint: drops, per endpoint too
    let r = run(&args(
        &srv.url,
        &[
            "--mix",
            &mix,
            "--rate",
            "800",
            "--connections",
            "2",
            "--max-error-rate",
            "1",
        ],
    ))
    .await
    .unwrap();
    schema_check(&r);
    let s = &r.steps[0];
    assert!(s.dropped > 0, "{s:?}");
    let dropped: u64 = s
        .endpoints
        .0
        .iter()
        .map(|(_, e)| e.error_kinds.get("dropped").copied().unwrap_or(0))
        .sum();
    assert_eq!(dropped, s.dropped);
    let sum: u64 = s.endpoints.0.iter().map(|(_, e)| e.requests).sum();
    assert_eq!(sum, s.requests);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mix_file_problems_fail_before_any_load() {
    let srv = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.txt", "GET /docs/a\n");
    let broken = write(
        dir.path(),
        "broken.txt",
        "GET /docs/a\nPOST /count {\"x\":\n",
    );
    let empty = write(dir.path(), "empty.txt", "\n\n");
    let missing = dir.path().join("missing.txt");
    let missing = missing.to_str().unwrap();

    let e = run(&args(
        &srv.url,
        &["--mix", &format!("a={good},b={broken}:2")],
    ))
    .await
    .unwrap_err();
    assert!(matches!(e, LoadError::BodyFile { line: 2, .. }), "{e}");
    assert!(e.to_string().contains("broken.txt:2:"), "{e}");
    assert_eq!(e.exit_code(), 2);

    let e = run(&args(&srv.url, &["--mix", &format!("a={good},b={empty}")]))
        .await
        .unwrap_err();
    assert!(matches!(e, LoadError::Usage { .. }), "{e}");
    assert!(e.to_string().contains("empty.txt"), "{e}");

    let e = run(&args(&srv.url, &["--mix", &format!("a={missing}:3")]))
        .await
        .unwrap_err();
    assert!(matches!(e, LoadError::Input { .. }), "{e}");
    assert!(e.to_string().contains("missing.txt"), "{e}");
    assert_eq!(e.exit_code(), 2);

    let e = run(&args(
        &srv.url,
        &["--mix", &format!("a={good}"), "--pick", "fixed:10000"],
    ))
    .await
    .unwrap_err();
    assert!(matches!(e, LoadError::Usage { .. }), "{e}");
    assert!(srv.targets().is_empty(), "no load was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_cache_makes_every_request_target_unique() {
    let srv = start_server().await;
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "m.txt",
        "GET /docs/a\nGET /docs/b?fields=year\nPOST /count {\"filter\": {}}\n",
    );
    let mix = format!("m={f}");

    // cold + mix
    let r = run(&args(
        &srv.url,
        &["--mix", &mix, "--ramp", "2", "--cache", "cold"],
    ))
    .await
    .unwrap();
    let v = schema_check(&r);
    assert_eq!(v["cache"], "cold");
    assert_eq!(r.steps[0].errors.total(), 0, "{:?}", r.steps[0].errors);
    let t = srv.targets();
    assert!(t.len() > 20);
    let uniq: std::collections::HashSet<&String> = t.iter().collect();
    assert_eq!(uniq.len(), t.len(), "a target repeated");
    assert!(t.iter().all(|x| x.contains("nonce=")), "{t:?}");
    assert!(t.iter().any(|x| x.starts_with("/docs/a?nonce=")));
    assert!(t
        .iter()
        .any(|x| x.starts_with("/docs/b?fields=year&nonce=")));
    assert!(t.iter().any(|x| x.starts_with("/count?nonce=")));
    let mut table = Vec::new();
    searchd_load::print_table(&r, &mut table).unwrap();
    assert!(String::from_utf8(table).unwrap().contains("cache: cold"));

    // cold + generated qidx bodies, open loop too
    srv.clear();
    for level in [["--ramp", "2"], ["--rate", "300"]] {
        let r = run(&args(
            &srv.url,
            &[
                level[0],
                level[1],
                "--cache",
                "cold",
                "--queries",
                "5",
                "--k",
                "3",
            ],
        ))
        .await
        .unwrap();
        schema_check(&r);
        assert!(r.steps[0].ok > 10, "{:?}", r.steps[0]);
        assert_eq!(
            r.steps[0].ok, r.steps[0].requests,
            "{:?}",
            r.steps[0].errors
        );
        assert!(r.steps[0].endpoints.is_empty());
    }
    let t = srv.targets();
    let uniq: std::collections::HashSet<&String> = t.iter().collect();
    assert_eq!(uniq.len(), t.len(), "a target repeated");
    assert!(t.iter().all(|x| x.starts_with("/search?nonce=")), "{t:?}");

    // warm: sent as written, no nonce
    srv.clear();
    let r = run(&args(
        &srv.url,
        &["--mix", &mix, "--ramp", "2", "--cache", "warm"],
    ))
    .await
    .unwrap();
    let v = schema_check(&r);
    assert_eq!(v["cache"], "warm");
    let t = srv.targets();
    assert!(t.len() > 20);
    assert!(!t.iter().any(|x| x.contains("nonce")), "{t:?}");
    assert!(t.iter().any(|x| x == "/docs/b?fields=year"));

    // no --cache, no --mix: no nonce, no endpoints, no mix key
    srv.clear();
    let r = run(&args(&srv.url, &["--ramp", "1", "--queries", "5"]))
        .await
        .unwrap();
    let v = schema_check(&r);
    assert_eq!(v["cache"], Value::Null);
    assert!(v.get("mix").is_none());
    assert!(v["steps"][0].get("endpoints").is_none());
    assert!(!srv.targets().iter().any(|x| x.contains("nonce")));
}

#[test]
fn mix_answers_are_checked_for_2xx_and_json() {
    use searchd_load::check::check_mix_answer;
    assert_eq!(check_mix_answer(200, b"{\"count\": 3}"), Ok(()));
    assert_eq!(check_mix_answer(201, b"[1, 2]"), Ok(()));
    assert_eq!(check_mix_answer(204, b""), Ok(()));
    assert_eq!(check_mix_answer(200, b"  \n"), Ok(()));
    assert_eq!(
        check_mix_answer(200, b"{\"a\":"),
        Err(searchd_load::ErrorKind::BadBody)
    );
    assert_eq!(
        check_mix_answer(200, b"not json"),
        Err(searchd_load::ErrorKind::BadBody)
    );
    assert_eq!(
        check_mix_answer(500, b"{}"),
        Err(searchd_load::ErrorKind::Http5xx)
    );
    assert_eq!(
        check_mix_answer(503, b"{}"),
        Err(searchd_load::ErrorKind::Http503)
    );
    assert_eq!(
        check_mix_answer(404, b""),
        Err(searchd_load::ErrorKind::Http4xx)
    );
    assert_eq!(
        check_mix_answer(302, b""),
        Err(searchd_load::ErrorKind::HttpOther)
    );
}
