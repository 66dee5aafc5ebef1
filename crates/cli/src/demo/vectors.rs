//! `searchd demo` on vectors: the whole pipeline on built-in synthetic data, in one process.
//!
//! data -> exact ground truth -> HNSW build -> recall gate -> server on a free loopback
//! port -> warm-up + SLO-stopped capacity ramp -> table, DIR/report.json, DIR/report.html.
//! Every artefact is kept in DIR and reused by the next run when its inputs match.

use std::sync::Arc;
use std::time::Instant;

use searchd_engine::{
    build_index, eval, exact, BuildConfig, HnswParams, Index, IndexKind, LoadOptions, Metric,
};

use crate::demo::common::{dir_err, serve_and_ramp, step, Gate, RECALL_GATE};
use crate::flags::demo::DemoArgs;
use crate::util::write_json;
use crate::util::{bar, fmt_duration, human_bytes, summary, CliError, CmdResult};

#[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
struct DataStamp {
    n: usize,
    dim: usize,
    queries: usize,
    seed: u64,
    ef_construction: usize,
}

/// The vector demo on the local engine.
pub fn run(a: &DemoArgs) -> CmdResult {
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
        crate::util::done(&pb);
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
        crate::util::done(&pb);
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
    let mut efs = vec![16, 32];
    efs.extend(a.ef.map_or(crate::demo::common::AUTO_EFS.to_vec(), |ef| vec![ef]));
    efs.sort_unstable();
    efs.dedup();
    let cfg = eval::EvalConfig {
        k: 10,
        efs,
        threads: 0,
        min_seconds: 0.3,
        oversample: None,
        nprobe: None,
        cold_seconds: 0.0,
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
    let gate = Gate::pick(a.ef, |ef| {
        rows.iter()
            .find(|r| r.ef == ef)
            .map(|r| r.recall_at_10.unwrap_or(0.0))
            .ok_or_else(|| CliError::Failed(format!("ef={ef} was not evaluated")))
    })?;
    let (ef, recall) = (gate.ef, gate.recall);
    let eval_doc = serde_json::json!({
        "schema": "searchd.eval.v1",
        "index": index.info(),
        "k": 10,
        "rows": rows,
    });
    if !gate.passed() {
        let doc = serde_json::json!({"schema": "searchd.demo.v1", "eval": eval_doc});
        return Err(gate.refuse(&a.dir.join("report.json"), doc));
    }
    eprintln!("    {}", gate.verdict());

    step("5/6 server on a free loopback port, in this process");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    let mut scfg =
        searchd_server::ServerConfig::new(searchd_server::IndexSource::Loaded(index.clone()));
    scfg.queries = Some(searchd_server::QuerySource::Loaded(Arc::new(queries)));
    scfg.ef = ef;
    let report = serve_and_ramp(&rt, scfg, a, &gt_path, "")?;
    let json_path = a.dir.join("report.json");
    let html_path = a.dir.join("report.html");
    let mut doc = serde_json::to_value(&report).expect("report serialises");
    doc["schema"] = "searchd.demo.v1".into();
    doc["load_schema"] = searchd_load::SCHEMA.into();
    doc["eval"] = eval_doc;
    doc["recall_gate"] = gate.json();
    doc["engine"] = serde_json::json!({ "kernels": searchd_kernels::implementation() });
    write_json(&json_path, &doc)?;
    let html = searchd_load::html::render_html_titled(
        &report,
        &format!(
            "searchd demo: {n} x {} synthetic vectors, HNSW M=16 at ef={ef}",
            a.dim
        ),
        &eval_html(&rows, index.info(), &gate)?,
    )
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
            ef
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
    gate: &Gate,
) -> CmdResult<String> {
    let mut s = format!(
        "<h2>Recall gate (in-process engine)</h2><p>{} index, {} x {}, {}; gate recall@10 &ge; {RECALL_GATE} at the served ef: {}.</p>\
         <table class=\"t\"><tr><th>ef</th><th>recall@10</th><th>QPS 1 thread</th><th>p50 &micro;s</th><th>p99 &micro;s</th><th>QPS all threads</th></tr>",
        info.kind.name(),
        info.n,
        info.dim,
        info.metric,
        searchd_load::html::esc(&gate.verdict())
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
