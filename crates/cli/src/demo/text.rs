//! `searchd demo --text`: the collection pipeline on synthetic documents.
//!
//! documents (ids, text, typed fields) -> `ingest` (vectors from the synthetic generator,
//! or embedded from the text with `--model DIR`) -> collection -> recall gate against
//! exact search -> server on a free loopback port -> documents by id, fields, text or
//! vector queries -> capacity ramp -> reports. Runs with no model and no network.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use searchd_collection::ingest::{self, IngestConfig};
use searchd_collection::{Collection, DocRef};
use searchd_engine::{HnswParams, IndexKind, LoadOptions, Metric, SearchParams};

use crate::demo::common::{step, Gate};
use crate::flags::demo::DemoArgs;
use crate::text::ModelAdapter;
use crate::util::write_json;
use crate::util::{fmt_duration, summary, CliError, CmdResult};

/// A small deterministic vocabulary: topic t owns words `w{t}_{j}`-like syllable strings.
fn word(topic: usize, j: usize) -> String {
    const SYL: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ba", "de", "fu", "go", "hi", "jo", "pe",
        "zu",
    ];
    let a = (topic * 7 + j * 3) % 16;
    let b = (topic * 5 + j * 11 + 3) % 16;
    let c = (topic + j * 13 + 7) % 16;
    format!("{}{}{}", SYL[a], SYL[b], SYL[c])
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const TOPICS: usize = 40;
const CATEGORIES: [&str; 5] = ["news", "science", "sports", "travel", "food"];

fn sentence(rng: &mut Rng, topic: usize, words: usize) -> String {
    (0..words)
        .map(|_| {
            if rng.below(5) == 0 {
                word(rng.below(TOPICS), rng.below(20))
            } else {
                word(topic, rng.below(20))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Write `n` documents (and, without a model, their vectors from the synthetic generator)
/// and `q` query texts.
fn write_inputs(
    dir: &Path,
    n: usize,
    q: usize,
    dim: usize,
    seed: u64,
    with_vectors: bool,
) -> CmdResult<Option<Vec<f32>>> {
    let docs = dir.join("docs.jsonl");
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&docs)
            .map_err(|e| CliError::Io(format!("{}: {e}", docs.display())))?,
    );
    let mut rng = Rng(seed);
    let io = |e: std::io::Error| CliError::Io(format!("{}: {e}", docs.display()));
    let vectors = if with_vectors {
        let p = searchd_vecio::synth::SynthParams {
            n,
            dim,
            queries: q,
            seed,
            ..Default::default()
        };
        let d = searchd_vecio::synth::generate(&p, None);
        searchd_vecio::write_vectors(&dir.join("vectors.npy"), &d.base, n, dim)?;
        searchd_vecio::write_vectors(&dir.join("queries.npy"), &d.queries, q, dim)?;
        Some(d.queries)
    } else {
        None
    };
    for i in 0..n {
        let topic = rng.below(TOPICS);
        let len = 8 + rng.below(24);
        let text = sentence(&mut rng, topic, len);
        let doc = serde_json::json!({
            "id": format!("doc-{i:06}"),
            "text": text,
            "category": CATEGORIES[topic % CATEGORIES.len()],
            "year": 1990 + rng.below(35),
            "price": (rng.below(10_000) as f64) / 100.0,
            "in_stock": rng.below(3) != 0,
        });
        writeln!(f, "{doc}").map_err(io)?;
    }
    f.flush().map_err(io)?;
    let qpath = dir.join("queries.jsonl");
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&qpath)
            .map_err(|e| CliError::Io(format!("{}: {e}", qpath.display())))?,
    );
    for _ in 0..q {
        let topic = rng.below(TOPICS);
        let len = 2 + rng.below(3);
        writeln!(
            f,
            "{}",
            serde_json::json!({"query": sentence(&mut rng, topic, len)})
        )
        .map_err(|e| CliError::Io(format!("{}: {e}", qpath.display())))?;
    }
    f.flush()
        .map_err(|e| CliError::Io(format!("{}: {e}", qpath.display())))?;
    Ok(vectors)
}

/// Tie-aware recall@10 of `coll` at `ef` against its exact scan, over `queries`.
fn recall(coll: &Collection, queries: &[f32], dim: usize, ef: usize) -> CmdResult<f64> {
    let seg = &coll.segments()[0];
    let ix = seg.index();
    let nq = queries.len() / dim;
    let mut hit = 0usize;
    for q in queries.chunks_exact(dim) {
        let exact = ix
            .exact_search(q, 10)
            .map_err(|e| CliError::Failed(e.to_string()))?;
        let kth = exact.last().map_or(f32::NEG_INFINITY, |h| h.score);
        let got = ix
            .search(q, &SearchParams::new(10, ef))
            .map_err(|e| CliError::Failed(e.to_string()))?;
        hit += got.iter().filter(|h| h.score >= kth - 1e-6).count().min(10);
    }
    Ok(hit as f64 / (nq * 10) as f64)
}

/// The demo on documents.
pub fn run(a: &DemoArgs) -> CmdResult {
    let started = Instant::now();
    let model = match &a.model {
        Some(dir) => Some(ModelAdapter::load(dir, 0, None)?),
        None => None,
    };
    let n = a.n();
    let dim = model.as_ref().map_or(a.dim, |m| m.0.dim());
    if n < 100 || a.queries == 0 {
        return Err(CliError::Input(
            "--n must be at least 100 and --queries at least 1".into(),
        ));
    }
    let dir = a.dir.join(if model.is_some() {
        "text-model"
    } else {
        "text"
    });
    std::fs::create_dir_all(&dir).map_err(|e| CliError::Io(format!("{}: {e}", dir.display())))?;
    step(&format!(
        "1/6 synthetic documents: {n} with ids, text, category, year, price, in_stock; {} query texts",
        a.queries
    ));
    let query_vectors = write_inputs(&dir, n, a.queries, dim, a.seed, model.is_none())?;

    step(&format!(
        "2/6 ingest: {} -> collection (HNSW M=16, ef_construction={})",
        if model.is_some() {
            "embed the text with --model"
        } else {
            "vectors from the synthetic generator"
        },
        a.ef_construction
    ));
    let coll_dir = dir.join("collection");
    let mut cfg = IngestConfig::new(dir.join("docs.jsonl"), &coll_dir);
    cfg.force = true;
    cfg.build.kind = IndexKind::Hnsw;
    cfg.build.metric = Metric::Cosine;
    cfg.build.hnsw = HnswParams {
        m: 16,
        ef_construction: a.ef_construction,
        seed: a.seed,
    };
    if model.is_none() {
        cfg.vectors_file = Some(dir.join("vectors.npy"));
    }
    let t = Instant::now();
    let pb = crate::util::bar(n as u64, "ingest");
    let report = ingest::ingest(
        &cfg,
        model
            .as_ref()
            .map(|m| m as &dyn searchd_collection::embed::TextEmbedder),
        &|e| {
            if let ingest::Event::Progress { done } = e {
                pb.set_position(done.min(n as u64));
            }
        },
    )
    .map_err(|e| CliError::Failed(e.to_string()))?;
    crate::util::done(&pb);
    eprintln!(
        "    {} documents in {} (embed {:.1}s, build {:.1}s)",
        report.docs,
        fmt_duration(t.elapsed()),
        report.embed_seconds,
        report.build_seconds
    );

    step("3/6 recall gate (exact scan of the collection, tie-aware)");
    let coll = Arc::new(
        Collection::open(&coll_dir, &LoadOptions::default())
            .map_err(|e| CliError::Failed(e.to_string()))?,
    );
    let queries: Vec<f32> = match (&model, query_vectors) {
        (Some(m), _) => {
            let texts = crate::text::read_texts(&dir.join("queries.jsonl"), "query")?;
            let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
            m.0.embed(&refs, searchd_embed::TextKind::Query)
                .map_err(|e| CliError::Failed(e.to_string()))?
                .vectors
        }
        (None, Some(v)) => v,
        (None, None) => unreachable!("vectors are generated without a model"),
    };
    let gate = Gate::pick(a.ef, |ef| {
        let r = recall(&coll, &queries, dim, ef)?;
        println!("recall@10 at ef={ef}: {r:.4}");
        Ok(r)
    })?;
    let (ef, r) = (gate.ef, gate.recall);
    if !gate.passed() {
        let doc = serde_json::json!({"schema": "searchd.demo.v1", "collection": coll.info()});
        return Err(gate.refuse(&dir.join("report.json"), doc));
    }
    eprintln!("    {}", gate.verdict());

    step("4/6 server on a free loopback port, in this process");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| CliError::Failed(format!("cannot bind a loopback port: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let mut scfg =
        searchd_server::ServerConfig::new(searchd_server::IndexSource::Collection(coll.clone()));
    scfg.name = Some("demo".into());
    scfg.ef = ef;
    scfg.queries = Some(searchd_server::QuerySource::Loaded(Arc::new(
        searchd_vecio::Vectors::from_vec(queries.clone(), queries.len() / dim, dim),
    )));
    let model = model.map(Arc::new);
    if let Some(m) = &model {
        scfg.embedder = Some(m.clone() as Arc<dyn searchd_server::TextEmbedder>);
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(searchd_server::serve(scfg, listener, async move {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}");
    crate::demo::common::wait_ready(addr, std::time::Duration::from_secs(120))?;
    eprintln!("    listening on {url}, ready");

    step("5/6 documents by id and searches with fields, checked");
    let first = coll
        .doc_id(DocRef { segment: 0, row: 0 })
        .map(|d| d.to_string())
        .unwrap_or_default();
    let checks = rt.block_on(check_api(&url, &first, model.is_some()));
    let checks = match checks {
        Ok(c) => c,
        Err(e) => {
            let _ = stop_tx.send(());
            let _ = rt.block_on(server);
            return Err(e);
        }
    };
    for c in &checks {
        println!("    {c}");
    }

    step("6/6 capacity ramp: warm-up, rotating queries, stop at the SLO");
    let json_path = dir.join("report.json");
    let html_path = dir.join("report.html");
    let mut load_args = crate::demo::common::load_config(&url, a)?;
    load_args.endpoint = searchd_load::config::parse_endpoint("POST /collections/demo/search")
        .map_err(CliError::Input)?;
    if model.is_some() {
        load_args.text_queries = Some(dir.join("queries.jsonl"));
    }
    let report = rt.block_on(searchd_load::run(&load_args));
    let _ = stop_tx.send(());
    let _ = rt.block_on(server);
    let report = report.map_err(|e| CliError::Failed(e.to_string()))?;
    println!();
    searchd_load::print_table(&report, &mut std::io::stdout().lock())
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let mut doc = serde_json::to_value(&report).expect("report serialises");
    doc["schema"] = "searchd.demo.v1".into();
    doc["load_schema"] = searchd_load::SCHEMA.into();
    doc["collection"] = coll.info();
    doc["recall_at_10"] = r.into();
    doc["recall_gate"] = gate.json();
    doc["checks"] = serde_json::json!(checks);
    write_json(&json_path, &doc)?;
    let top = gate.html(&format!(
        "collection of {} documents, exact scan of the collection, tie-aware",
        coll.len()
    ));
    let title = format!(
        "searchd demo --text: {} documents, {} queries at ef={ef}",
        coll.len(),
        if model.is_some() { "text" } else { "vector" }
    );
    let html = searchd_load::html::render_html_titled(&report, &title, &top)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    std::fs::write(&html_path, html)
        .map_err(|e| CliError::Io(format!("{}: {e}", html_path.display())))?;
    match &report.sustainable {
        Some(s) => println!(
            "\nsustainable: {:.0} QPS of {} queries at concurrency {} (p99 {:.1} ms), recall@10 {r:.4} at ef={}",
            s.qps,
            if model.is_some() { "text" } else { "vector" },
            s.concurrency,
            s.p99_ms.unwrap_or(f64::NAN),
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

/// A few requests a user would make, each checked; returns one line per check.
async fn check_api(url: &str, first_id: &str, text: bool) -> CmdResult<Vec<String>> {
    let fail = |m: String| CliError::Failed(format!("demo API check failed: {m}"));
    let get = |path: String| async move {
        searchd_load::simple_request(url, "GET", &path, None)
            .await
            .map_err(|e| fail(format!("GET {path}: {e}")))
    };
    // Wait for readiness.
    let t = Instant::now();
    loop {
        if let Ok((200, _)) = searchd_load::simple_request(url, "GET", "/ready", None).await {
            break;
        }
        if t.elapsed().as_secs() > 30 {
            return Err(fail("the server never became ready".into()));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut out = Vec::new();
    let (st, body) = get(format!("/collections/demo/docs/{first_id}")).await?;
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if st != 200 || v["id"] != serde_json::json!(first_id) || !v["fields"]["text"].is_string() {
        return Err(fail(format!(
            "GET /collections/demo/docs/{first_id}: {st} {v}"
        )));
    }
    out.push(format!(
        "GET /collections/demo/docs/{first_id} -> 200, fields {}",
        v["fields"]
    ));
    let (st, _) = get("/collections/demo/docs/no-such-doc".into()).await?;
    if st != 404 {
        return Err(fail(format!("an unknown id answered {st}, not 404")));
    }
    out.push("GET /collections/demo/docs/no-such-doc -> 404".into());
    let body = if text {
        serde_json::json!({"text": "kaloka mineru", "k": 3, "fields": ["category", "year"]})
    } else {
        serde_json::json!({"qidx": 0, "k": 3, "fields": ["category", "year"]})
    };
    let (st, resp) = searchd_load::simple_request(
        url,
        "POST",
        "/collections/demo/search",
        Some(serde_json::to_vec(&body).unwrap_or_default()),
    )
    .await
    .map_err(|e| fail(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_slice(&resp).unwrap_or_default();
    let hits = v["hits"].as_array().cloned().unwrap_or_default();
    if st != 200 || hits.len() != 3 || !hits.iter().all(|h| h["fields"]["category"].is_string()) {
        return Err(fail(format!("search with fields: {st} {v}")));
    }
    out.push(format!(
        "POST /collections/demo/search {body} -> 200, first hit {} (timings_us {})",
        hits[0], v["timings_us"]
    ));
    // BM25 over the text field (built by ingest by default): a word of topic 0.
    let body = serde_json::json!({"text": word(0, 0), "mode": "lexical", "k": 3});
    let (st, resp) = searchd_load::simple_request(
        url,
        "POST",
        "/collections/demo/search",
        Some(serde_json::to_vec(&body).unwrap_or_default()),
    )
    .await
    .map_err(|e| fail(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_slice(&resp).unwrap_or_default();
    let hits = v["hits"].as_array().cloned().unwrap_or_default();
    if st != 200 || hits.len() != 3 || v["mode"] != "lexical" {
        return Err(fail(format!("lexical search: {st} {v}")));
    }
    out.push(format!(
        "POST /collections/demo/search {body} -> 200, first hit {} (timings_us {})",
        hits[0], v["timings_us"]
    ));
    Ok(out)
}
