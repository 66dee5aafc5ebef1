//! `searchd demo --backend qdrant`: the vector demo with Qdrant as the engine.
//!
//! synthetic data -> exact ground truth -> a Qdrant node started on free loopback ports in
//! a directory of its own (`QDRANT_BIN` or a `qdrant` on `PATH`) -> upload with the
//! ingest path (`searchd_server::qdrant::admin::ingest_points`), wait for green and indexed
//! -> searchd `--backend qdrant` on a free loopback port, in this process -> warm-up +
//! SLO-stopped capacity ramp with recall against the ground truth -> table,
//! DIR/qdrant/report.json and report.html. The node is stopped (by its pid) at the end.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use searchd_collection::DocId;
use searchd_engine::{exact, Metric};
use searchd_server::qdrant::admin::{self, CollectionSpec, Existing, IngestOptions, PointSource};
use searchd_server::qdrant::local::{find_binary, LocalQdrant};
use searchd_server::qdrant::QdrantTarget;

use crate::demo::common::{dir_err, serve_and_ramp, step, RECALL_GATE};
use crate::flags::demo::DemoArgs;
use crate::util::write_json;
use crate::util::{bar, fmt_duration, summary, CliError, CmdResult};

/// Name of the demo's Qdrant collection.
const NAME: &str = "demo";

/// The demo with Qdrant as the engine.
pub fn run(a: &DemoArgs) -> CmdResult {
    let started = Instant::now();
    if a.text {
        return Err(CliError::Input(
            "demo --backend qdrant runs the vector demo; --text is for the local backend".into(),
        ));
    }
    let n = a.n();
    if n < 100 || a.dim == 0 || a.queries == 0 {
        return Err(CliError::Input(
            "--n must be at least 100, --dim and --queries at least 1".into(),
        ));
    }
    let Some(qbin) = find_binary() else {
        return Err(CliError::Input(
            "demo --backend qdrant needs a Qdrant binary: set QDRANT_BIN to it, or put a qdrant executable on PATH".into(),
        ));
    };
    let dir = a.dir.join("qdrant");
    std::fs::create_dir_all(&dir).map_err(|e| dir_err(&dir, e))?;
    let base_path = dir.join("base.npy");
    let queries_path = dir.join("queries.npy");
    let gt_path = dir.join("gt.npy");

    step(&format!(
        "1/6 synthetic data: {n} x {} base, {} queries (seed {})",
        a.dim, a.queries, a.seed
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
    crate::util::done(&pb);
    eprintln!("    {} queries in {}", a.queries, fmt_duration(t.elapsed()));
    let ids: Vec<i32> = truth
        .iter()
        .flat_map(|r| r.iter().map(|x| x.id as i32))
        .collect();
    searchd_vecio::write_ids(&gt_path, &ids, a.queries, k)?;
    crate::commands::write_gt_meta(&gt_path, Metric::Cosine, k, a.queries, n, a.dim)?;

    step(&format!(
        "3/6 Qdrant ({}) on free loopback ports",
        qbin.display()
    ));
    let node_dir = std::env::temp_dir().join(format!("searchd-demo-qdrant-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&node_dir);
    let mut node = LocalQdrant::start(&qbin, &node_dir, Duration::from_secs(120))
        .map_err(|e| CliError::Failed(format!("cannot start Qdrant: {e}")))?;
    eprintln!(
        "    pid {}, gRPC {}, storage {}",
        node.pid().unwrap_or(0),
        node.grpc_url(),
        node_dir.display()
    );
    let out = run_on(a, n, data, &node, &dir, &gt_path, started);
    node.stop();
    let _ = std::fs::remove_dir_all(&node_dir);
    out
}

fn run_on(
    a: &DemoArgs,
    n: usize,
    data: searchd_vecio::synth::SynthData,
    node: &LocalQdrant,
    dir: &Path,
    gt_path: &Path,
    started: Instant,
) -> CmdResult {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    let url = node.grpc_url();
    // Qdrant's recall is measured under load, so this demo does not search for an ef.
    let ef = a.ef.unwrap_or(64);

    step(&format!(
        "4/6 upload into Qdrant collection {NAME:?} (HNSW m=16, ef_construct={}), wait for green and indexed",
        a.ef_construction
    ));
    let dim = a.dim;
    let base = Arc::new(data.base);
    let schema = searchd_collection::Schema::default();
    let source: PointSource = {
        let base = base.clone();
        Arc::new(move |from, to| {
            Ok((from..to)
                .map(|i| {
                    let row = &base[i as usize * dim..(i as usize + 1) * dim];
                    admin::point_of(&DocId::Int(i), row.to_vec(), b"{}", &schema)
                })
                .collect())
        })
    };
    let spec = CollectionSpec {
        dim,
        metric: Metric::Cosine,
        schema: searchd_collection::Schema::default(),
        model: None,
        text_field: None,
    };
    let opts = IngestOptions {
        m: 16,
        ef_construct: a.ef_construction as u64,
        existing: Existing::Recreate,
        wait_timeout: Duration::from_secs(3600),
        ..IngestOptions::default()
    };
    let pb = bar(n as u64, "upload");
    let progress = {
        let pb = pb.clone();
        Arc::new(move |d: u64| pb.set_position(d)) as Arc<dyn Fn(u64) + Send + Sync>
    };
    let rep = rt
        .block_on(admin::ingest_points(
            &url, NAME, &spec, n as u64, source, &opts, progress,
        ))
        .map_err(|e| CliError::Failed(format!("upload into Qdrant failed: {e}")))?;
    crate::util::done(&pb);
    drop(base);
    eprintln!(
        "    {} points: upload {:.1}s, then {:.1}s to green with {} of {} vectors indexed{}",
        rep.points,
        rep.upload_s,
        rep.index_wait_s,
        rep.indexed_vectors,
        rep.points_in_collection,
        if rep.below_indexing_threshold {
            " (the rest in segments below Qdrant's indexing threshold, searched exactly)"
        } else {
            ""
        }
    );

    step("5/6 server with --backend qdrant on a free loopback port, in this process");
    let queries = searchd_vecio::Vectors::from_vec(data.queries, a.queries, dim);
    let mut scfg = searchd_server::ServerConfig::new(searchd_server::IndexSource::Qdrant(
        QdrantTarget::new(&url, NAME),
    ));
    scfg.name = Some(NAME.to_string());
    scfg.queries = Some(searchd_server::QuerySource::Loaded(Arc::new(queries)));
    scfg.ef = ef;
    let report = serve_and_ramp(&rt, scfg, a, gt_path, &format!(" (Qdrant at {url})"))?;
    let json_path = dir.join("report.json");
    let html_path = dir.join("report.html");
    // Recall under load of the first step (every step asks the same queries of the same
    // collection): the recall gate of this demo.
    let recall = report.steps.iter().find_map(|s| s.recall_at_k);
    let mut doc = serde_json::to_value(&report).expect("report serialises");
    doc["schema"] = "searchd.demo.v1".into();
    doc["load_schema"] = searchd_load::SCHEMA.into();
    doc["backend"] = serde_json::json!({
        "kind": "qdrant",
        "qdrant": node.binary,
        "collection": NAME,
        "n": n,
        "dim": dim,
        "hnsw": {"m": 16, "ef_construct": a.ef_construction},
        "ef": ef,
        "ingest": rep,
    });
    write_json(&json_path, &doc)?;
    let top = format!(
        "<h2>searchd over Qdrant</h2><p>{n} x {dim} synthetic vectors (cosine) uploaded into a local Qdrant ({}) with HNSW m=16, ef_construct={}: upload {:.1}s, {:.1}s more to green with {} of {} vectors indexed. searchd serves it with <code>--backend qdrant</code> at ef={}; recall@10 under load {}.</p>\n",
        node.binary.display(),
        a.ef_construction,
        rep.upload_s,
        rep.index_wait_s,
        rep.indexed_vectors,
        rep.points_in_collection,
        ef,
        recall.map_or("not measured".to_string(), |r| format!("{r:.4}"))
    );
    let title = format!("searchd demo over Qdrant: {n} x {dim} synthetic vectors at ef={ef}");
    let html = searchd_load::html::render_html_titled(&report, &title, &top)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    std::fs::write(&html_path, html).map_err(|e| dir_err(&html_path, e))?;
    match &report.sustainable {
        Some(s) => println!(
            "\nsustainable: {:.0} QPS at concurrency {} (p99 {:.1} ms <= {} ms), searchd over Qdrant, ef={}",
            s.qps,
            s.concurrency,
            s.p99_ms.unwrap_or(f64::NAN),
            a.slo_p99_ms,
            ef
        ),
        None => println!("\nno step met the SLO"),
    }
    println!(
        "reports: {} and {}",
        json_path.display(),
        html_path.display()
    );
    match recall {
        Some(r) if r < RECALL_GATE => {
            return Err(CliError::Failed(format!(
                "RECALL GATE FAILED: recall@10 under load at ef={} is {r:.4}, below {RECALL_GATE}",
                ef
            )))
        }
        Some(r) => println!("recall@10 under load {r:.4} passes the {RECALL_GATE} gate"),
        None => {
            return Err(CliError::Failed(
                "no answer was checked against the ground truth (every request failed?)".into(),
            ))
        }
    }
    summary("demo done", started);
    Ok(())
}
