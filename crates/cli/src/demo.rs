//! `searchd demo`: the whole pipeline on built-in synthetic data, in one process.
//!
//! data -> exact ground truth -> HNSW build -> recall gate -> server on a free loopback
//! port -> warm-up + SLO-stopped capacity ramp -> table, DIR/report.json, DIR/report.html.
//! Every artefact is kept in DIR and reused by the next run when its inputs match.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use searchd_engine::{
    build_index, eval, exact, BuildConfig, HnswParams, Index, IndexKind, LoadOptions, Metric,
};

use crate::commands::write_json;
use crate::util::{bar, fmt_duration, human_bytes, summary, CliError, CmdResult};

/// Recall@10 the demo's index must reach at the serving ef, or the demo fails.
pub(crate) const RECALL_GATE: f64 = 0.90;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Working directory: data, ground truth, index and reports; reused when present.
    #[arg(long, default_value = "searchd-demo")]
    pub dir: PathBuf,
    /// Number of synthetic base vectors [default: 200000; 20000 with --backend qdrant:
    /// Qdrant builds its HNSW graph after the upload, and 20,000 x 384 is ready in about 6 s
    /// on 2 cores].
    #[arg(long)]
    pub n: Option<usize>,
    /// Dimensions.
    #[arg(long, default_value_t = 384)]
    pub dim: usize,
    /// Number of queries (rotated through by the load generator).
    #[arg(long, default_value_t = 1000)]
    pub queries: usize,
    /// ef the server uses (and the recall gate checks).
    #[arg(long, default_value_t = 64)]
    pub ef: usize,
    /// HNSW build candidate list size (lower builds faster, with lower recall).
    #[arg(long, default_value_t = 100)]
    pub ef_construction: usize,
    /// Concurrency steps of the capacity ramp.
    #[arg(long, default_value = "1,2,4,8,16,32,64,128")]
    pub ramp: String,
    /// Warm-up of each ramp step.
    #[arg(long, default_value = "2s")]
    pub warmup: String,
    /// Measured time of each ramp step.
    #[arg(long, default_value = "4s")]
    pub duration: String,
    /// Latency SLO (ms) that stops the ramp.
    #[arg(long, default_value_t = 100.0)]
    pub slo_p99_ms: f64,
    /// Seed of the synthetic data.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The collection path instead: synthetic documents with ids, text and typed fields,
    /// ingested into a collection, served, fetched by id and searched with fields. Vectors
    /// come from the synthetic generator unless --model is given.
    #[arg(long)]
    pub text: bool,
    /// With --text: embed the documents' text and the query texts with this
    /// sentence-transformers model directory, and ramp text queries.
    #[arg(long, value_name = "DIR", requires = "text")]
    pub model: Option<std::path::PathBuf>,
    /// The engine behind the demo's server: `local` (searchd's own, built in DIR) or
    /// `qdrant`: a Qdrant node started on free loopback ports (the binary from QDRANT_BIN
    /// or a qdrant executable on PATH; exit 2 when there is none), the vectors uploaded into it,
    /// searchd serving it with `--backend qdrant`, reports in DIR/qdrant/.
    #[arg(
        long,
        value_enum,
        default_value_t = crate::flags::serve::BackendKind::Local,
        hide_possible_values = true
    )]
    pub backend: crate::flags::serve::BackendKind,
}

/// `--n` of the local demo when not given.
pub const LOCAL_DEMO_N: usize = 200_000;

impl DemoArgs {
    /// `--n`, or the backend's default.
    pub fn n(&self) -> usize {
        self.n.unwrap_or(match self.backend {
            crate::flags::serve::BackendKind::Local => LOCAL_DEMO_N,
            crate::flags::serve::BackendKind::Qdrant => crate::demo_qdrant::QDRANT_DEMO_N,
        })
    }
}

#[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
struct DataStamp {
    n: usize,
    dim: usize,
    queries: usize,
    seed: u64,
    ef_construction: usize,
}

pub(crate) fn step(msg: &str) {
    eprintln!("==> {msg}");
}

pub(crate) fn dir_err(p: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Input(format!("{}: {e}", p.display()))
}

pub fn demo(a: &DemoArgs) -> CmdResult {
    if a.backend == crate::flags::serve::BackendKind::Qdrant {
        return crate::demo_qdrant::demo_qdrant(a);
    }
    if a.text {
        return crate::demo_text::demo_text(a);
    }
    let started = Instant::now();
    let n = a.n();
    if n < 100 || a.dim == 0 || a.queries == 0 {
        return Err(CliError::Input(
            "--n must be at least 100, --dim and --queries at least 1".into(),
        ));
    }
    std::fs::create_dir_all(&a.dir).map_err(|e| dir_err(&a.dir, e))?;
    let stamp = DataStamp {
        n,
        dim: a.dim,
        queries: a.queries,
        seed: a.seed,
        ef_construction: a.ef_construction,
    };
    let stamp_path = a.dir.join("demo-inputs.json");
    let base_path = a.dir.join("base.npy");
    let queries_path = a.dir.join("queries.npy");
    let gt_path = a.dir.join("gt.npy");
    let index_path = a.dir.join("index");
    let reuse = std::fs::read_to_string(&stamp_path)
        .ok()
        .and_then(|s| serde_json::from_str::<DataStamp>(&s).ok())
        .is_some_and(|s| s == stamp)
        && [&base_path, &queries_path, &gt_path]
            .iter()
            .all(|p| p.exists())
        && Index::open(&index_path, &LoadOptions::default()).is_ok();

    if reuse {
        step(&format!(
            "reusing data, ground truth and index in {}",
            a.dir.display()
        ));
    } else {
        let _ = std::fs::remove_file(&stamp_path);
        step(&format!(
            "1/6 synthetic data: {} x {} base, {} queries (seed {})",
            n, a.dim, a.queries, a.seed
        ));
        let data =
            crate::commands::synth_files(n, a.dim, a.queries, a.seed, &base_path, &queries_path)?;

        step("2/6 exact ground truth (top 100, all cores)");
        let k = 100.min(n);
        let pb = bar(a.queries as u64, "gt");
        let t = Instant::now();
        let truth = exact::knn(Metric::Cosine, &data.base, &data.queries, a.dim, k, &|d| {
            pb.set_position(d)
        });
        pb.finish_and_clear();
        eprintln!("    {} queries in {}", a.queries, fmt_duration(t.elapsed()));
        let ids: Vec<i32> = truth
            .iter()
            .flat_map(|r| r.iter().map(|n| n.id as i32))
            .collect();
        searchd_vecio::write_ids(&gt_path, &ids, a.queries, k)?;
        crate::commands::write_gt_meta(&gt_path, Metric::Cosine, k, a.queries, n, a.dim)?;

        step(&format!(
            "3/6 HNSW build (M=16, ef_construction={}, all cores)",
            a.ef_construction
        ));
        let cfg = BuildConfig {
            kind: IndexKind::Hnsw,
            metric: Metric::Cosine,
            hnsw: HnswParams {
                m: 16,
                ef_construction: a.ef_construction,
                seed: a.seed,
            },
            threads: 0,
            force: true,
            ..BuildConfig::default()
        };
        let pb = bar(n as u64, "build");
        let r = build_index(&index_path, &data.base, a.dim, &cfg, &|d, _| {
            pb.set_position(d)
        })?;
        pb.finish_and_clear();
        eprintln!(
            "    {:.1}s, {} on disk",
            r.total_seconds,
            human_bytes(r.bytes)
        );
        std::fs::write(
            &stamp_path,
            serde_json::to_string_pretty(&stamp).expect("json"),
        )
        .map_err(|e| dir_err(&stamp_path, e))?;
    }

    step("4/6 recall gate (exact ground truth, tie-aware)");
    let index = Arc::new(Index::open(&index_path, &LoadOptions::default())?);
    let queries = searchd_vecio::read_vectors(&queries_path)?;
    let gt = searchd_vecio::read_ids(&gt_path)?;
    let mut efs = vec![16, 32, a.ef, 128];
    efs.sort_unstable();
    efs.dedup();
    let cfg = eval::EvalConfig {
        k: 10,
        efs,
        threads: 0,
        min_seconds: 0.3,
        oversample: None,
    };
    println!(
        "{:>6} {:>10} {:>11} {:>9} {:>9} {:>13}",
        "ef", "recall@10", "qps 1 thr", "p50 us", "p99 us", "qps all thr"
    );
    let rows = eval::evaluate(&index, queries.as_slice(), &gt.data, gt.k, &cfg, |r| {
        println!(
            "{:>6} {:>10.4} {:>11.0} {:>9.0} {:>9.0} {:>13.0}",
            r.ef,
            r.recall_at_10.unwrap_or(0.0),
            r.qps_1thread,
            r.p50_us,
            r.p99_us,
            r.qps_all_threads
        );
    })?;
    let served = rows.iter().find(|r| r.ef == a.ef).expect("ef evaluated");
    let recall = served.recall_at_10.unwrap_or(0.0);
    if recall < RECALL_GATE {
        return Err(CliError::Failed(format!(
            "RECALL GATE FAILED: recall@10 at ef={} is {recall:.4}, below {RECALL_GATE}",
            a.ef
        )));
    }
    eprintln!(
        "    recall@10 {recall:.4} at ef={} passes the {RECALL_GATE} gate",
        a.ef
    );

    step("5/6 server on a free loopback port, in this process");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    let mut scfg =
        searchd_server::ServerConfig::new(searchd_server::IndexSource::Loaded(index.clone()));
    scfg.queries = Some(searchd_server::QuerySource::Loaded(Arc::new(queries)));
    scfg.ef = a.ef;
    let report = serve_and_ramp(&rt, scfg, a, &gt_path, "")?;
    let json_path = a.dir.join("report.json");
    let html_path = a.dir.join("report.html");
    let mut doc = serde_json::to_value(&report).expect("report serialises");
    doc["schema"] = "searchd.demo.v1".into();
    doc["load_schema"] = searchd_load::SCHEMA.into();
    doc["eval"] = serde_json::json!({
        "schema": "searchd.eval.v1",
        "index": index.info(),
        "k": 10,
        "rows": rows,
    });
    doc["engine"] = serde_json::json!({ "kernels": searchd_kernels::implementation() });
    write_json(&json_path, &doc)?;
    let html =
        searchd_load::html::render_html_with(&report, &eval_html(&rows, index.info(), recall)?)
            .map_err(|e| CliError::Failed(e.to_string()))?;
    std::fs::write(&html_path, html).map_err(|e| dir_err(&html_path, e))?;
    match &report.sustainable {
        Some(s) => println!(
            "\nsustainable: {:.0} QPS at concurrency {} (p99 {:.1} ms <= {} ms), recall@10 {:.4} at ef={}",
            s.qps,
            s.concurrency,
            s.p99_ms.unwrap_or(f64::NAN),
            a.slo_p99_ms,
            recall,
            a.ef
        ),
        None => println!("\nno step met the SLO"),
    }
    println!(
        "reports: {} and {}",
        json_path.display(),
        html_path.display()
    );
    summary("demo done", started);
    Ok(())
}

/// The demo's recall gate for the top of its report: the table and the recall-vs-QPS curve.
fn eval_html(
    rows: &[eval::EvalRow],
    info: &searchd_engine::IndexInfo,
    recall: f64,
) -> CmdResult<String> {
    let mut s = format!(
        "<h2>Recall gate (in-process engine)</h2><p>{} index, {} x {}, {}; gate recall@10 &ge; {RECALL_GATE}: passed at {recall:.4}.</p>\
         <table class=\"t\"><tr><th>ef</th><th>recall@10</th><th>QPS 1 thread</th><th>p50 &micro;s</th><th>p99 &micro;s</th><th>QPS all threads</th></tr>",
        info.kind.name(),
        info.n,
        info.dim,
        info.metric
    );
    for r in rows {
        s.push_str(&format!(
            "<tr><td>{}</td><td>{:.4}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td></tr>",
            r.ef,
            r.recall_at_10.unwrap_or(0.0),
            r.qps_1thread,
            r.p50_us,
            r.p99_us,
            r.qps_all_threads
        ));
    }
    s.push_str("</table>\n");
    s.push_str(&crate::commands::recall_chart_html(
        rows,
        "Recall@10 against QPS (in process)",
    )?);
    Ok(s)
}

/// Steps 5 and 6 of a demo: serve `scfg` on a free loopback port in this process (on `rt`),
/// wait for `/ready`, ramp with the demo's load settings against the ground truth in
/// `gt_path`, stop the server and print the table. `about` ends the "listening" line.
/// The demo's capacity ramp against `url`: the ramp, warm-up, step length, SLO and query
/// count of `a`; callers set what else they need (`gt`, `endpoint`, `text_queries`).
pub(crate) fn load_config(url: &str, a: &DemoArgs) -> Result<searchd_load::LoadConfig, CliError> {
    use searchd_load::config::{parse_duration, parse_ramp};
    let bad = |what: &str, e: String| CliError::Input(format!("demo load settings: {what}: {e}"));
    let mut c = searchd_load::LoadConfig::new(url);
    c.ramp = parse_ramp(&a.ramp).map_err(|e| bad("--ramp", e))?;
    c.warmup = parse_duration(&a.warmup).map_err(|e| bad("--warmup", e))?;
    c.duration = parse_duration(&a.duration).map_err(|e| bad("--duration", e))?;
    c.slo_p99_ms = a.slo_p99_ms;
    c.query_count = a.queries;
    Ok(c)
}

pub(crate) fn serve_and_ramp(
    rt: &tokio::runtime::Runtime,
    scfg: searchd_server::ServerConfig,
    a: &DemoArgs,
    gt_path: &Path,
    about: &str,
) -> Result<searchd_load::Report, CliError> {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| CliError::Failed(format!("cannot bind a loopback port: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(searchd_server::serve(scfg, listener, async move {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}");
    wait_ready(addr, Duration::from_secs(120))?;
    eprintln!("    listening on {url}, ready{about}");

    step("6/6 capacity ramp: warm-up, rotating queries, stop at the SLO");
    let mut load_args = load_config(&url, a)?;
    load_args.gt = Some(gt_path.to_path_buf());
    let report = rt.block_on(searchd_load::run(&load_args));
    let _ = stop_tx.send(());
    let _ = rt.block_on(server);
    let report = report.map_err(|e| CliError::Failed(e.to_string()))?;

    println!();
    searchd_load::print_table(&report, &mut std::io::stdout().lock())
        .map_err(|e| CliError::Failed(e.to_string()))?;
    Ok(report)
}

/// Poll `GET /ready` until the in-process server answers 200 (it opens the index after it
/// binds), so the load lab's preflight never meets a 503 `not_ready`.
pub(crate) fn wait_ready(addr: std::net::SocketAddr, limit: Duration) -> Result<(), CliError> {
    use std::io::{Read, Write};
    let t = Instant::now();
    loop {
        let ok = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))
            .and_then(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(2)))?;
                s.write_all(b"GET /ready HTTP/1.1\r\nhost: demo\r\nconnection: close\r\n\r\n")?;
                let mut head = [0u8; 12];
                s.read_exact(&mut head)?;
                Ok(&head == b"HTTP/1.1 200")
            })
            .unwrap_or(false);
        if ok {
            return Ok(());
        }
        if t.elapsed() > limit {
            return Err(CliError::Failed(format!(
                "the demo server on {addr} was not ready after {}s",
                limit.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
