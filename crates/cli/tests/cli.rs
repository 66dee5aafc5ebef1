//! End-to-end runs of the real `searchd` binary on tiny seeded data, and its refusals of
//! bad input (one clear line, exit status 2, never a panic).

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;

fn searchd(args: &[&str]) -> Output {
    Command::cargo_bin("searchd")
        .unwrap()
        .args(args)
        .env("SEARCHD_LOG", "warn")
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = searchd(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?} failed: {err}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs a command that must fail on bad input: exit 2, one `error:` line containing
/// `needle`, no panic.
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

/// A hand-written float32 .npy file (n x dim) with the given values.
fn write_npy(path: &Path, n: usize, dim: usize, values: &[f32]) {
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({n}, {dim}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header.as_bytes());
    for v in values {
        b.extend(v.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
}

/// 3000 x 32 synthetic base vectors and 50 queries under `d/data` (seeded).
fn synth(d: &Path, seed: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let data = d.join("data");
    ok(&[
        "dataset",
        "synth",
        "--n",
        "3000",
        "--dim",
        "32",
        "--queries",
        "50",
        "--out",
        p(&data),
        "--seed",
        seed,
    ]);
    (data.join("base.npy"), data.join("queries.npy"))
}

#[test]
fn synth_gt_build_eval_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries) = synth(d, "5");
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
    let gt_ivecs = d.join("gt.ivecs");
    ok(&[
        "gt",
        "--base",
        p(&base),
        "--queries",
        p(&queries),
        "--out",
        p(&gt_ivecs),
        "--k",
        "20",
        "--threads",
        "1",
    ]);
    let a = searchd_vecio::read_ids(&gt).unwrap();
    let b = searchd_vecio::read_ids(&gt_ivecs).unwrap();
    assert_eq!((a.n, a.k), (50, 20));
    assert_eq!(a.data, b.data, "thread count does not change exact results");

    let idx = d.join("idx");
    ok(&[
        "build",
        "--base",
        p(&base),
        "--out",
        p(&idx),
        "--m",
        "8",
        "--ef-construction",
        "64",
    ]);
    let json = d.join("eval.json");
    let out = ok(&[
        "eval",
        "--index",
        p(&idx),
        "--queries",
        p(&queries),
        "--gt",
        p(&gt),
        "--ef",
        "16,128",
        "--min-seconds",
        "0.05",
        "--json",
        p(&json),
    ]);
    assert!(out.contains("recall@10"), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "searchd.eval.v1");
    assert_eq!(doc["k"], 10);
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let r128 = rows[1]["recall_at_10"].as_f64().unwrap();
    assert!(r128 >= 0.9, "recall@10 at ef=128 is {r128}");
    assert!(rows[0]["recall_at_100"].is_null());
    assert!(rows[1]["qps_1thread"].as_f64().unwrap() > 0.0);

    // A flat index is exact: recall 1.
    let flat = d.join("flat");
    ok(&[
        "build",
        "--base",
        p(&base),
        "--out",
        p(&flat),
        "--index",
        "flat",
    ]);
    ok(&[
        "eval",
        "--index",
        p(&flat),
        "--queries",
        p(&queries),
        "--gt",
        p(&gt),
        "--ef",
        "10",
        "--min-seconds",
        "0.01",
        "--json",
        p(&json),
    ]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["rows"][0]["recall_at_10"].as_f64().unwrap(), 1.0);
    assert_eq!(doc["rows"][0]["recall_at_1"].as_f64().unwrap(), 1.0);

    // SQ8 codes: traversal on bytes, rescoring with float32; --oversample is accepted.
    let sq8 = d.join("sq8");
    ok(&[
        "build",
        "--base",
        p(&base),
        "--out",
        p(&sq8),
        "--m",
        "8",
        "--ef-construction",
        "64",
        "--quantization",
        "sq8",
    ]);
    assert!(sq8.join("codes.bin").exists());
    ok(&[
        "eval",
        "--index",
        p(&sq8),
        "--queries",
        p(&queries),
        "--gt",
        p(&gt),
        "--ef",
        "128",
        "--oversample",
        "4",
        "--min-seconds",
        "0.05",
        "--json",
        p(&json),
    ]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = doc["rows"][0]["recall_at_10"].as_f64().unwrap();
    assert!(r >= 0.9, "sq8 recall@10 at ef=128 is {r}");
    assert_eq!(doc["index"]["params"]["quantization"]["kind"], "sq8");
    refused(
        &[
            "eval",
            "--index",
            p(&sq8),
            "--queries",
            p(&queries),
            "--gt",
            p(&gt),
            "--oversample",
            "0.5",
        ],
        "--oversample",
    );
    refused(
        &[
            "eval",
            "--index",
            p(&idx),
            "--queries",
            p(&queries),
            "--gt",
            p(&gt),
            "--oversample",
            "4",
        ],
        "quantized indexes",
    );
    refused(
        &[
            "eval",
            "--index",
            p(&idx),
            "--queries",
            p(&queries),
            "--gt",
            p(&gt),
            "--cold-seconds",
            "1e9",
        ],
        "seconds between 0 and 86400",
    );

    // Existing output needs --force.
    refused(&["build", "--base", p(&base), "--out", p(&idx)], "--force");
    ok(&[
        "build",
        "--base",
        p(&base),
        "--out",
        p(&idx),
        "--force",
        "--threads",
        "1",
    ]);
}

#[test]
fn bad_inputs_get_one_clear_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = d.join("good.npy");
    write_npy(
        &good,
        4,
        3,
        &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0],
    );
    let out = d.join("idx");

    refused(
        &[
            "build",
            "--base",
            p(&d.join("missing.npy")),
            "--out",
            p(&out),
        ],
        "missing.npy",
    );

    let nan = d.join("nan.npy");
    write_npy(&nan, 2, 3, &[1.0, 0.0, 0.0, 0.0, f32::NAN, 0.0]);
    refused(
        &["build", "--base", p(&nan), "--out", p(&out)],
        "row 1, column 1",
    );

    let zero = d.join("zero.npy");
    write_npy(&zero, 2, 3, &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    refused(
        &["build", "--base", p(&zero), "--out", p(&out)],
        "row 1 is all zeros",
    );

    let truncated = d.join("trunc.npy");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() - 5]).unwrap();
    refused(
        &["build", "--base", p(&truncated), "--out", p(&out)],
        "trunc.npy",
    );

    let garbage = d.join("vectors.txt");
    std::fs::write(&garbage, "hello world").unwrap();
    refused(
        &["build", "--base", p(&garbage), "--out", p(&out)],
        "vectors.txt",
    );

    let other_dim = d.join("q2.npy");
    write_npy(&other_dim, 1, 2, &[1.0, 0.0]);
    refused(
        &[
            "gt",
            "--base",
            p(&good),
            "--queries",
            p(&other_dim),
            "--out",
            p(&d.join("gt.npy")),
        ],
        "dimensions",
    );
    refused(
        &[
            "gt",
            "--base",
            p(&good),
            "--queries",
            p(&good),
            "--out",
            p(&d.join("gt.npy")),
            "--k",
            "9",
        ],
        "--k",
    );
    refused(
        &[
            "build",
            "--base",
            p(&good),
            "--out",
            p(&out),
            "--quantization",
            "pq:8",
        ],
        "not divisible by m=8",
    );
    refused(
        &[
            "build",
            "--base",
            p(&good),
            "--out",
            p(&out),
            "--index",
            "tree",
        ],
        "unknown --index",
    );
    // `ingest` takes the same index flags, refused the same way before any input is read.
    refused(
        &[
            "ingest",
            "--docs",
            p(&good),
            "--out",
            p(&out),
            "--index",
            "hnsw",
            "--partitions",
            "4",
        ],
        "--partitions and --overlap apply to --index partitioned",
    );
    refused(
        &[
            "ingest",
            "--docs",
            p(&good),
            "--out",
            p(&out),
            "--index",
            "partitioned",
            "--nlist",
            "4",
        ],
        "a partitioned index takes --partitions",
    );
    assert!(!out.exists(), "no index left behind by failed builds");

    // Index-level refusals through eval.
    ok(&[
        "build",
        "--base",
        p(&good),
        "--out",
        p(&out),
        "--index",
        "flat",
    ]);
    let gt = d.join("gt.npy");
    ok(&[
        "gt",
        "--base",
        p(&good),
        "--queries",
        p(&good),
        "--out",
        p(&gt),
        "--k",
        "2",
    ]);
    refused(
        &[
            "eval",
            "--index",
            p(&out),
            "--queries",
            p(&other_dim),
            "--gt",
            p(&gt),
        ],
        "dimensions",
    );
    refused(
        &[
            "eval",
            "--index",
            p(&out),
            "--queries",
            p(&good),
            "--gt",
            p(&gt),
            "--k",
            "10",
        ],
        "neighbours per query",
    );
    let vectors = out.join("vectors.bin");
    let mut b = std::fs::read(&vectors).unwrap();
    let last = b.len() - 1;
    b[last] ^= 0xff;
    std::fs::write(&vectors, b).unwrap();
    refused(
        &[
            "eval",
            "--index",
            p(&out),
            "--queries",
            p(&good),
            "--gt",
            p(&gt),
            "--k",
            "2",
        ],
        "checksum",
    );
    refused(
        &[
            "eval",
            "--index",
            p(&d.join("nope")),
            "--queries",
            p(&good),
            "--gt",
            p(&gt),
        ],
        "nope",
    );

    // Usage errors are clap's (exit 2 as well).
    let o = searchd(&["build", "--base"]);
    assert_eq!(o.status.code(), Some(2));
    let o = searchd(&[
        "eval",
        "--index",
        "x",
        "--queries",
        "y",
        "--gt",
        "z",
        "--ef",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn demo_smoke_runs_the_whole_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("demo");
    let args = [
        "demo",
        "--dir",
        p(&d),
        "--n",
        "5000",
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
    let out = ok(&args);
    assert!(out.contains("sustainable"), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("report.json")).unwrap()).unwrap();
    assert_eq!(doc["schema"], "searchd.demo.v1");
    assert_eq!(doc["eval"]["schema"], "searchd.eval.v1");
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for s in steps {
        assert!(s["ok"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["error_rate"].as_f64().unwrap(), 0.0, "{s}");
        assert!(s["recall_at_k"].as_f64().unwrap() >= 0.9, "{s}");
    }
    let html = std::fs::read_to_string(d.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Recall gate"));
    // Without --ef the demo serves at the smallest of 64, 128, 256 that passes the gate.
    let gate = &doc["recall_gate"];
    assert_eq!(gate["passed"], true, "{gate}");
    assert_eq!(gate["auto_ef"], true, "{gate}");
    assert!(gate["recall_at_10"].as_f64().unwrap() >= 0.9, "{gate}");
    assert!(
        [64, 128, 256].contains(&gate["ef"].as_u64().unwrap()),
        "{gate}"
    );
    // A second run reuses the data, ground truth and index.
    let o = searchd(&args);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(err.contains("reusing"), "{err}");
    // Progress lines end with a done line (stderr is not a terminal here).
    let first = String::from_utf8_lossy(
        &searchd(&[
            "demo",
            "--dir",
            p(&dir.path().join("d2")),
            "--n",
            "3000",
            "--dim",
            "32",
            "--queries",
            "50",
            "--ef",
            "1",
            "--ef-construction",
            "8",
        ])
        .stderr,
    )
    .to_string();
    assert!(first.contains("build: 3000/3000 done in"), "{first}");
    // A forced ef that misses the gate fails with a hint, and the report says why.
    assert!(
        first.contains("RECALL GATE FAILED") && first.contains("give a larger --ef"),
        "{first}"
    );
    let failed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("d2").join("report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(failed["recall_gate"]["passed"], false, "{failed}");
    assert_eq!(failed["recall_gate"]["ef"], 1, "{failed}");
}

#[test]
fn quantize_placement_and_memory_bench() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries) = synth(d, "6");
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
        "10",
    ]);
    let idx = d.join("idx");
    ok(&[
        "build",
        "--base",
        p(&base),
        "--out",
        p(&idx),
        "--m",
        "8",
        "--ef-construction",
        "64",
    ]);
    let json = d.join("eval.json");
    let eval = |index: &Path, extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "eval",
            "--index",
            p(index),
            "--queries",
            p(&queries),
            "--gt",
            p(&gt),
            "--ef",
            "64",
            "--min-seconds",
            "0.05",
            "--json",
            p(&json),
        ];
        args.extend_from_slice(extra);
        ok(&args);
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    };
    // New codes for the existing graph, then each vector placement.
    // Floors per kind: 32 bits of binary code are coarse (33 distinct distances), so it
    // needs its float32 rescoring most.
    for (q, floor, codes_only) in [
        ("pq:8", 0.85, 0.4),
        ("binary", 0.65, 0.1),
        ("sq8", 0.9, 0.85),
        ("rabitq:4", 0.9, 0.75),
    ] {
        let out = d.join(q.replace(':', ""));
        let text = ok(&[
            "quantize",
            "--index",
            p(&idx),
            "--out",
            p(&out),
            "--quantization",
            q,
        ]);
        assert!(text.contains("quantized"), "{text}");
        for vectors in ["mmap", "ram", "disk"] {
            let doc = eval(
                &out,
                &["--vectors", vectors, "--graph", "ram", "--codes", "ram"],
            );
            let r = doc["rows"][0]["recall_at_10"].as_f64().unwrap();
            assert!(r >= floor, "{q} --vectors {vectors}: recall@10 {r}");
            assert_eq!(doc["index"]["placement"]["vectors"], vectors);
            assert_eq!(doc["index"]["placement"]["graph"], "ram");
            assert!(doc["process"]["rss_bytes"].as_u64().unwrap() > 0);
            assert!(doc["process"]["major_faults"].is_u64());
        }
        // Codes alone: recall is still measured (against the vectors on disk).
        let doc = eval(&out, &["--vectors", "none"]);
        let r = doc["rows"][0]["recall_at_10"].as_f64().unwrap();
        assert!(r >= codes_only, "{q} --vectors none: recall@10 {r}");
        assert_eq!(doc["index"]["vector_bytes"], 0);
    }
    // IVF-PQ: coarse lists, PQ residuals, float32 rescoring; --ef is the lists probed.
    let ivf = d.join("ivf");
    ok(&[
        "build",
        "--base",
        p(&base),
        "--out",
        p(&ivf),
        "--index",
        "ivfpq",
        "--quantization",
        "pq:8",
        "--nlist",
        "32",
    ]);
    let doc = eval(&ivf, &["--ef", "2,32", "--vectors", "disk"]);
    assert_eq!(doc["index"]["kind"], "ivfpq");
    let at = |ef: u64| {
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["ef"] == ef)
            .and_then(|r| r["recall_at_10"].as_f64())
            .unwrap()
    };
    let (r2, r32) = (at(2), at(32));
    assert!(
        r32 >= 0.95 && r2 <= r32,
        "ivfpq recall@10: nprobe 2 {r2}, nprobe 32 {r32}"
    );
    refused(
        &[
            "build",
            "--base",
            p(&base),
            "--out",
            p(&d.join("z")),
            "--index",
            "ivfpq",
        ],
        "--quantization pq:M",
    );
    // Bad input: one clear line, exit 2.
    refused(
        &[
            "quantize",
            "--index",
            p(&idx),
            "--out",
            p(&d.join("x")),
            "--quantization",
            "pq:5",
        ],
        "not divisible",
    );
    refused(
        &[
            "build",
            "--base",
            p(&base),
            "--out",
            p(&d.join("y")),
            "--quantization",
            "pq:x",
        ],
        "unknown --quantization",
    );
    refused(
        &[
            "build",
            "--base",
            p(&base),
            "--out",
            p(&d.join("y")),
            "--quantization",
            "rabitq:9",
        ],
        "rabitq:B with B from 1 to 8",
    );
    refused(
        &[
            "build",
            "--base",
            p(&base),
            "--out",
            p(&d.join("y")),
            "--build-on",
            "pq:8",
        ],
        "float32 or sq8",
    );
    refused(
        &[
            "eval",
            "--index",
            p(&idx),
            "--queries",
            p(&queries),
            "--gt",
            p(&gt),
            "--vectors",
            "disk",
        ],
        "needs a quantized index",
    );
    let pq = d.join("pq8");
    std::fs::rename(pq.join("vectors.bin"), d.join("vectors.bin.moved")).unwrap();
    refused(
        &[
            "eval",
            "--index",
            p(&pq),
            "--queries",
            p(&queries),
            "--gt",
            p(&gt),
        ],
        "vectors.bin is missing",
    );
    std::fs::rename(d.join("vectors.bin.moved"), pq.join("vectors.bin")).unwrap();

    // Memory caps: needs a writable memory cgroup (root); otherwise the refusal must say
    // so clearly.
    let bench_json = d.join("mem.json");
    let sq8 = d.join("sq8");
    let args = [
        "bench",
        "memory",
        "--index",
        p(&sq8),
        "--queries",
        p(&queries),
        "--gt",
        p(&gt),
        "--limits-mb",
        "max,400,1",
        "--min-seconds",
        "0.05",
        "--vectors",
        "disk",
        "--json",
        p(&bench_json),
    ];
    let o = searchd(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(2) && err.contains("cgroup") {
        let why = format!("no memory cgroup for the capped runs: {err}");
        return searchd_testkit::needs::skip(
            searchd_testkit::needs::Need::Cgroup,
            "quantize_placement_and_memory_bench",
            &why,
        );
    }
    assert!(o.status.success(), "{err}");
    searchd_testkit::needs::ran(
        searchd_testkit::needs::Need::Cgroup,
        "quantize_placement_and_memory_bench",
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&bench_json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "searchd.bench-memory.v1");
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in &rows[..2] {
        assert_eq!(row["outcome"], "ok", "{row}");
        assert!(row["recall_at_10"].as_f64().unwrap() >= 0.9, "{row}");
        assert!(row["p99_us"].as_f64().unwrap() > 0.0);
        assert!(row["cgroup_peak_bytes"].as_u64().unwrap() > 0);
    }
    assert!(rows[0]["limit_mb"].is_null());
    assert_eq!(rows[1]["limit_mb"], 400);
    // 1 MB cannot hold the process at all: it is killed, and said to be.
    assert_eq!(rows[2]["killed"], true, "{}", rows[2]);
    refused(
        &[
            "bench",
            "memory",
            "--index",
            p(&sq8),
            "--queries",
            p(&queries),
            "--gt",
            p(&gt),
            "--limits-mb",
            "0",
        ],
        "--limits-mb",
    );
}
