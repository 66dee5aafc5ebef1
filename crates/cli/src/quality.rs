//! `searchd eval --collection DIR --qrels FILE`: the quality lab.
//!
//! Every query of the judgements file is run in each retrieval mode, in process and on one
//! thread, exactly as the server runs it (the same collection calls, the same fusion, the
//! same cross-encoder), and scored against its relevant documents:
//!
//! - **nDCG@10** with binary gains (`1/log2(rank+1)`, ideal = all relevant first),
//! - **MRR@10** (1 / rank of the first relevant hit in the top 10, else 0),
//! - **recall@100** (relevant documents in the top 100 / relevant documents).
//!
//! The 95% interval of each mean nDCG@10 is a percentile bootstrap over queries
//! (`--bootstrap` resamples, seeded); each mode is also compared with dense and with
//! lexical *paired* (the same resampled queries for both), so "hybrid beats dense" is a
//! statement about the difference, with its own interval. Latency is per query, end to
//! end (embedding the query included), one thread: p50, p99 and the QPS that implies.
//!
//! Modes (`--mode`, comma-separated): `dense`, `lexical`, `hybrid` (the server's default
//! fusion), `rrf[:K]`, `weighted[:DENSE:LEXICAL[:minmax|zscore]]`, and `rerank[:BASE]`
//! (BASE = dense, lexical or hybrid (default), its top `--rerank-top` reranked by
//! `--rerank-model`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use searchd_collection::fusion::{Fusion, Normalize, DEFAULT_WINDOW};
use searchd_collection::{Collection, DocHit, DocId};
use searchd_embed::TextKind;
use searchd_engine::eval::ranking::{bootstrap_mean, mrr_at, ndcg_at, recall_at};
use searchd_engine::{LoadOptions, SearchParams};

use crate::text::{ModelAdapter, RerankAdapter};
use crate::util::{CliError, CmdResult};

/// `searchd.quality.v1`
pub const SCHEMA: &str = "searchd.quality.v1";
/// Hits retrieved per query (recall@100 needs 100).
pub const DEPTH: usize = 100;

#[derive(Args, Debug, Clone)]
pub struct QualityArgs {
    /// Judgements: one `{"qid", "query", "relevant": [ids]}` per line (ids as the
    /// collection's documents have them).
    #[arg(long, value_name = "FILE.jsonl")]
    pub qrels: Option<PathBuf>,
    /// Modes to evaluate, comma-separated: dense, lexical, hybrid, rrf[:K],
    /// weighted[:DENSE:LEXICAL[:minmax|zscore]], rerank[:BASE].
    #[arg(long, default_value = "dense,lexical,hybrid")]
    pub mode: String,
    /// Sentence-transformers model for the queries (dense, hybrid): the one that embedded
    /// the collection.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Cross-encoder for the rerank modes.
    #[arg(long, value_name = "DIR")]
    pub rerank_model: Option<PathBuf>,
    /// Hits reranked per query (rerank modes).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub rerank_top: usize,
    /// Hybrid: candidates from each side.
    #[arg(long, default_value_t = DEFAULT_WINDOW, value_name = "N")]
    pub window: usize,
    /// Only the first N queries (0 = all).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub limit: usize,
    /// Bootstrap resamples for the intervals.
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub bootstrap: usize,
    /// Seed of the bootstrap.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// One judged query.
#[derive(Debug, Clone)]
pub struct Judged {
    pub query: String,
    pub relevant: Vec<DocId>,
}

/// Read a judgements file; a bad line is an error naming it.
pub fn read_qrels(path: &Path) -> CmdResult<Vec<Judged>> {
    use std::io::BufRead;
    let f = std::fs::File::open(path)
        .map_err(|e| CliError::Input(format!("--qrels {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let at = || format!("{}: line {}", path.display(), i + 1);
        let line = line.map_err(|e| CliError::Input(format!("{}: {e}", at())))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| CliError::Input(format!("{}: not JSON: {e}", at())))?;
        let query = v
            .get("query")
            .and_then(|q| q.as_str())
            .ok_or_else(|| CliError::Input(format!("{}: no string \"query\"", at())))?;
        let rel = v
            .get("relevant")
            .and_then(|r| r.as_array())
            .ok_or_else(|| CliError::Input(format!("{}: no \"relevant\" list of ids", at())))?;
        let relevant = rel
            .iter()
            .map(|x| match x {
                serde_json::Value::Number(n) => n.as_u64().map(DocId::Int),
                serde_json::Value::String(s) if !s.is_empty() => Some(DocId::Str(s.clone())),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                CliError::Input(format!(
                    "{}: \"relevant\" must hold ids (strings or integers >= 0)",
                    at()
                ))
            })?;
        out.push(Judged {
            query: query.to_string(),
            relevant,
        });
    }
    Ok(out)
}

/// A mode of the lab.
#[derive(Debug, Clone, PartialEq)]
pub enum LabMode {
    Dense,
    Lexical,
    Hybrid { name: String, fusion: Fusion },
    Rerank { base: Box<LabMode> },
}

impl LabMode {
    pub fn name(&self) -> String {
        match self {
            LabMode::Dense => "dense".into(),
            LabMode::Lexical => "lexical".into(),
            LabMode::Hybrid { name, .. } => name.clone(),
            LabMode::Rerank { base } => format!("rerank:{}", base.name()),
        }
    }
    fn fusion(&self) -> Option<Fusion> {
        match self {
            LabMode::Hybrid { fusion, .. } => Some(*fusion),
            LabMode::Rerank { base } => base.fusion(),
            _ => None,
        }
    }
    fn needs_model(&self) -> bool {
        match self {
            LabMode::Dense | LabMode::Hybrid { .. } => true,
            LabMode::Lexical => false,
            LabMode::Rerank { base } => base.needs_model(),
        }
    }
    fn needs_lexical(&self) -> bool {
        match self {
            LabMode::Lexical | LabMode::Hybrid { .. } => true,
            LabMode::Dense => false,
            LabMode::Rerank { base } => base.needs_lexical(),
        }
    }
}

/// Parse `--mode`.
pub fn parse_modes(s: &str) -> CmdResult<Vec<LabMode>> {
    let bad = |m: &str, why: &str| {
        CliError::Input(format!(
            "--mode {m:?}: {why} (modes: dense, lexical, hybrid, rrf[:K], weighted[:DENSE:LEXICAL[:minmax|zscore]], rerank[:BASE])"
        ))
    };
    let one = |m: &str| -> CmdResult<LabMode> {
        let parts: Vec<&str> = m.split(':').collect();
        let mode = match parts.as_slice() {
            ["dense"] => LabMode::Dense,
            ["lexical"] => LabMode::Lexical,
            ["hybrid"] => LabMode::Hybrid {
                name: "hybrid".into(),
                fusion: Fusion::default(),
            },
            ["rrf", rest @ ..] if rest.len() <= 1 => {
                let k = match rest.first() {
                    Some(k) => k
                        .parse::<u32>()
                        .map_err(|_| bad(m, "K must be an integer"))?,
                    None => 60,
                };
                LabMode::Hybrid {
                    name: format!("rrf:{k}"),
                    fusion: Fusion::Rrf { rank_constant: k },
                }
            }
            ["weighted", rest @ ..] if rest.len() <= 3 && rest.len() != 1 => {
                let w = |i: usize, d: f32| -> CmdResult<f32> {
                    rest.get(i).map_or(Ok(d), |x| {
                        x.parse::<f32>()
                            .map_err(|_| bad(m, "weights must be numbers"))
                    })
                };
                let normalize = match rest.get(2) {
                    None => Normalize::MinMax,
                    Some(n) => Normalize::parse(n)
                        .ok_or_else(|| bad(m, "normalize is minmax or zscore"))?,
                };
                let fusion = Fusion::Weighted {
                    dense: w(0, 0.5)?,
                    lexical: w(1, 0.5)?,
                    normalize,
                };
                LabMode::Hybrid {
                    name: m.to_string(),
                    fusion,
                }
            }
            ["rerank"] => LabMode::Rerank {
                base: Box::new(LabMode::Hybrid {
                    name: "hybrid".into(),
                    fusion: Fusion::default(),
                }),
            },
            ["rerank", base @ ..] => {
                let base = base.join(":");
                let b = parse_modes(&base)?;
                match b.as_slice() {
                    [one] if !matches!(one, LabMode::Rerank { .. }) => LabMode::Rerank {
                        base: Box::new(one.clone()),
                    },
                    _ => return Err(bad(m, "rerank takes one base mode")),
                }
            }
            _ => return Err(bad(m, "unknown mode")),
        };
        if let Some(f) = mode.fusion() {
            f.validate().map_err(|e| bad(m, &e))?;
        }
        Ok(mode)
    };
    let modes: Vec<LabMode> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(one)
        .collect::<CmdResult<_>>()?;
    if modes.is_empty() {
        return Err(CliError::Input("--mode names no mode".into()));
    }
    Ok(modes)
}

/// One mode's results over all queries.
struct ModeRun {
    mode: LabMode,
    ndcg: Vec<f64>,
    mrr: Vec<f64>,
    recall: Vec<f64>,
    us: Vec<u64>,
}

fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)] as f64
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

struct Lab<'a> {
    coll: &'a Collection,
    ef: usize,
    window: usize,
    rerank_top: usize,
    reranker: Option<&'a RerankAdapter>,
    text_field: Option<String>,
}

impl Lab<'_> {
    /// Top `DEPTH` hits of one query in one mode; `vector`/`embed_us` are the query's
    /// embedding and what it cost (counted in dense and hybrid latencies).
    fn run(&self, mode: &LabMode, text: &str, vector: Option<&[f32]>) -> CmdResult<Vec<DocHit>> {
        let params = SearchParams::new(DEPTH, self.ef.max(DEPTH));
        let fail = |e: String| CliError::Io(format!("search failed: {e}"));
        match mode {
            LabMode::Dense => self
                .coll
                .search(vector.unwrap_or_default(), &params, None)
                .map_err(|e| fail(e.to_string())),
            LabMode::Lexical => self
                .coll
                .search_lexical(text, DEPTH, None)
                .map(|r| r.hits)
                .map_err(|e| fail(e.to_string())),
            LabMode::Hybrid { fusion, .. } => self
                .coll
                .search_hybrid(
                    text,
                    vector.unwrap_or_default(),
                    &params,
                    fusion,
                    self.window,
                    None,
                )
                .map(|r| r.hits.iter().map(|f| f.hit()).collect())
                .map_err(|e| fail(e.to_string())),
            LabMode::Rerank { base } => {
                let mut hits = self.run(base, text, vector)?;
                let top = self.rerank_top.min(hits.len());
                let field = self.text_field.as_deref().unwrap_or("text");
                let passages: Vec<String> = hits[..top]
                    .iter()
                    .map(|h| {
                        self.coll
                            .source(h.doc)
                            .ok()
                            .flatten()
                            .and_then(|src| serde_json::from_slice::<serde_json::Value>(&src).ok())
                            .and_then(|v| v.get(field).and_then(|t| t.as_str()).map(str::to_string))
                            .unwrap_or_default()
                    })
                    .collect();
                let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
                let reranker = self.reranker.ok_or_else(|| {
                    CliError::Input("rerank modes need --rerank-model DIR".into())
                })?;
                let scores = reranker
                    .0
                    .score(text, &refs)
                    .map_err(|e| fail(format!("rerank: {e}")))?;
                let head: Vec<DocHit> = hits.drain(..top).collect();
                let mut out: Vec<DocHit> = searchd_server::rerank_order(head, &scores)
                    .into_iter()
                    .map(|(h, s)| DocHit {
                        doc: h.doc,
                        score: s,
                    })
                    .collect();
                out.extend(hits);
                Ok(out)
            }
        }
    }
}

/// Run the lab and write its report.
pub fn run(
    collection: &Path,
    a: &QualityArgs,
    ef: usize,
    threads: usize,
    json: Option<&Path>,
) -> CmdResult {
    let started = Instant::now();
    let qrels_path = a
        .qrels
        .as_deref()
        .ok_or_else(|| CliError::Input("--collection needs --qrels FILE.jsonl".into()))?;
    let modes = parse_modes(&a.mode)?;
    if a.rerank_top == 0 || a.rerank_top > searchd_server::MAX_RERANK_TOP {
        return Err(CliError::Input(format!(
            "--rerank-top must be between 1 and {}",
            searchd_server::MAX_RERANK_TOP
        )));
    }
    if a.window == 0 || a.window > searchd_collection::fusion::MAX_WINDOW {
        return Err(CliError::Input(format!(
            "--window must be between 1 and {}",
            searchd_collection::fusion::MAX_WINDOW
        )));
    }
    let err = |e: searchd_collection::Error| {
        if e.is_input() {
            CliError::Input(e.to_string())
        } else {
            CliError::Io(e.to_string())
        }
    };
    // A collection is read as a server reads it: the last commit plus its write-ahead log
    // (read-only, at one point of the log even while a server writes and commits it), so
    // writes acknowledged but not yet committed are evaluated too. A bare index directory
    // is one segment.
    let (_live, coll) = if searchd_collection::is_collection(collection) {
        let docs =
            searchd_collection::LiveDocs::open(collection, &LoadOptions::default()).map_err(err)?;
        let view = docs.collection().clone();
        (Some(docs), view)
    } else {
        let index = Collection::open_any(collection, &LoadOptions::default()).map_err(err)?;
        (None, std::sync::Arc::new(index))
    };
    if modes.iter().any(LabMode::needs_lexical) {
        coll.check_lexical()
            .map_err(|e| CliError::Input(format!("--mode needs a lexical index: {e}")))?;
    }
    let model = if modes.iter().any(LabMode::needs_model) {
        let dir = a.model.as_deref().ok_or_else(|| {
            CliError::Input("dense and hybrid modes embed the queries: give --model DIR".into())
        })?;
        let m = ModelAdapter::load(dir, threads, None)?;
        let rec = m.record();
        if let Some(cm) = coll.model() {
            if cm.checksum != rec.checksum {
                return Err(CliError::Input(format!(
                    "{} was embedded with model {} (checksum {}), --model is {} (checksum {})",
                    collection.display(),
                    cm.name,
                    cm.checksum,
                    rec.name,
                    rec.checksum
                )));
            }
        }
        Some(m)
    } else {
        None
    };
    let reranker = if modes.iter().any(|m| matches!(m, LabMode::Rerank { .. })) {
        let dir = a
            .rerank_model
            .as_deref()
            .ok_or_else(|| CliError::Input("rerank modes need --rerank-model DIR".into()))?;
        Some(RerankAdapter::load(dir, threads)?)
    } else {
        None
    };
    let mut judged = read_qrels(qrels_path)?;
    judged.retain(|j| !j.relevant.is_empty());
    if a.limit > 0 {
        judged.truncate(a.limit);
    }
    if judged.is_empty() {
        return Err(CliError::Input(format!(
            "{}: no queries with relevant documents",
            qrels_path.display()
        )));
    }
    // Relevant ids as rows of the collection; ids it does not hold still count as relevant.
    let mut unknown = 0usize;
    let relevant: Vec<(std::collections::HashSet<searchd_collection::DocRef>, usize)> = judged
        .iter()
        .map(|j| {
            let refs: std::collections::HashSet<_> =
                j.relevant.iter().filter_map(|id| coll.lookup(id)).collect();
            unknown += j.relevant.len() - refs.len();
            (refs, j.relevant.len())
        })
        .collect();
    let lab = Lab {
        coll: &coll,
        ef,
        window: a.window,
        rerank_top: a.rerank_top,
        reranker: reranker.as_ref(),
        text_field: coll.manifest().and_then(|m| m.text_field.clone()),
    };
    // Embed every query once, one at a time (its cost is part of dense and hybrid latency).
    let mut vectors: Vec<Option<(Vec<f32>, u64)>> = vec![None; judged.len()];
    if let Some(m) = &model {
        let pb = crate::util::bar(judged.len() as u64, "embed");
        // Warm the model (first calls allocate).
        for j in judged.iter().take(8) {
            let _ = m.0.embed(&[j.query.as_str()], TextKind::Query);
        }
        for (i, j) in judged.iter().enumerate() {
            let t = Instant::now();
            let e =
                m.0.embed(&[j.query.as_str()], TextKind::Query)
                    .map_err(|e| CliError::Io(format!("embedding failed: {e}")))?;
            vectors[i] = Some((e.vectors, t.elapsed().as_micros() as u64));
            pb.inc(1);
        }
        crate::util::done(&pb);
    }
    let mut runs = Vec::new();
    for mode in &modes {
        let uses_vector = mode.needs_model();
        // Warm-up pass over a few queries (caches, lazily mapped pages).
        for (i, j) in judged.iter().enumerate().take(50) {
            let v = vectors[i].as_ref().map(|(v, _)| v.as_slice());
            lab.run(mode, &j.query, v)?;
        }
        let pb = crate::util::bar(judged.len() as u64, "eval");
        let mut r = ModeRun {
            mode: mode.clone(),
            ndcg: Vec::with_capacity(judged.len()),
            mrr: Vec::with_capacity(judged.len()),
            recall: Vec::with_capacity(judged.len()),
            us: Vec::with_capacity(judged.len()),
        };
        for (i, j) in judged.iter().enumerate() {
            let (v, embed_us) = match &vectors[i] {
                Some((v, us)) if uses_vector => (Some(v.as_slice()), *us),
                _ => (None, 0),
            };
            let t = Instant::now();
            let hits = lab.run(mode, &j.query, v)?;
            r.us.push(t.elapsed().as_micros() as u64 + embed_us);
            let (rel, n_rel) = &relevant[i];
            let flags: Vec<bool> = hits.iter().map(|h| rel.contains(&h.doc)).collect();
            r.ndcg.push(ndcg_at(&flags, *n_rel, 10));
            r.mrr.push(mrr_at(&flags, 10));
            r.recall.push(recall_at(&flags, *n_rel, DEPTH));
            pb.inc(1);
        }
        crate::util::done(&pb);
        runs.push(r);
    }
    // Report.
    let n = judged.len();
    let find = |name: &str| runs.iter().find(|r| r.mode.name() == name);
    let mut rows = Vec::new();
    println!(
        "quality on {} queries of {} ({} docs; {} relevant ids not in the collection)",
        n,
        qrels_path.display(),
        coll.len(),
        unknown
    );
    println!(
        "{:<34} {:>8} {:>17} {:>8} {:>10} {:>9} {:>9} {:>8}",
        "mode", "nDCG@10", "95% interval", "MRR@10", "recall@100", "p50 ms", "p99 ms", "QPS/1t"
    );
    // Paired differences, printed after the table.
    let mut paired = Vec::new();
    for r in &runs {
        let nd = mean(&r.ndcg);
        let ci = bootstrap_mean(n, a.bootstrap, a.seed, |i| r.ndcg[i]);
        let mut us = r.us.clone();
        us.sort_unstable();
        let total_s = us.iter().sum::<u64>() as f64 / 1e6;
        let mut vs = serde_json::Map::new();
        for other in ["dense", "lexical"] {
            if let Some(o) = find(other).filter(|o| o.mode != r.mode) {
                let d = nd - mean(&o.ndcg);
                let dci = bootstrap_mean(n, a.bootstrap, a.seed, |i| r.ndcg[i] - o.ndcg[i]);
                paired.push(format!(
                    "  {} - {other}: nDCG@10 {d:+.4} (95% interval [{:+.4}, {:+.4}])",
                    r.mode.name(),
                    dci[0],
                    dci[1]
                ));
                vs.insert(
                    other.to_string(),
                    serde_json::json!({"ndcg_at_10_delta": d, "ci95": dci,
                        "significant": dci[0] > 0.0 || dci[1] < 0.0}),
                );
            }
        }
        println!(
            "{:<34} {:>8.4} [{:>7.4}, {:>6.4}] {:>8.4} {:>10.4} {:>9.2} {:>9.2} {:>8.0}",
            r.mode.name(),
            nd,
            ci[0],
            ci[1],
            mean(&r.mrr),
            mean(&r.recall),
            percentile(&us, 0.5) / 1000.0,
            percentile(&us, 0.99) / 1000.0,
            n as f64 / total_s.max(1e-9)
        );
        rows.push(serde_json::json!({
            "mode": r.mode.name(),
            "fusion": r.mode.fusion().map(|f| f.describe()),
            "ndcg_at_10": nd,
            "ndcg_at_10_ci95": ci,
            "mrr_at_10": mean(&r.mrr),
            "recall_at_100": mean(&r.recall),
            "p50_us": percentile(&us, 0.5),
            "p99_us": percentile(&us, 0.99),
            "qps_1thread": n as f64 / total_s.max(1e-9),
            "vs": vs,
        }));
    }
    for line in &paired {
        println!("{line}");
    }
    if let Some(path) = json {
        let v = serde_json::json!({
            "schema": SCHEMA,
            "collection": collection,
            "qrels": qrels_path,
            "queries": n,
            "docs": coll.len(),
            "unknown_relevant_ids": unknown,
            "k": 10,
            "depth": DEPTH,
            "window": a.window,
            "ef": ef.max(DEPTH),
            "rerank_top": a.rerank_top,
            "analyzer": coll.analyzer().map(|x| x.to_string()),
            "model": coll.model(),
            "reranker": reranker.as_ref().map(|r| r.0.info().name.clone()),
            "bootstrap": {"resamples": a.bootstrap, "seed": a.seed, "interval": "percentile 95%, paired across modes"},
            "threads": 1,
            "rows": rows,
            "seconds": started.elapsed().as_secs_f64(),
        });
        crate::util::write_json(path, &v)?;
    }
    crate::util::summary("eval done", started);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        let m =
            parse_modes("dense,lexical,hybrid,rrf:10,weighted:0.7:0.3:zscore,rerank,rerank:dense")
                .unwrap();
        assert_eq!(m.len(), 7);
        assert_eq!(m[3].fusion(), Some(Fusion::Rrf { rank_constant: 10 }));
        assert_eq!(
            m[4].fusion(),
            Some(Fusion::Weighted {
                dense: 0.7,
                lexical: 0.3,
                normalize: Normalize::ZScore
            })
        );
        assert_eq!(
            m[6],
            LabMode::Rerank {
                base: Box::new(LabMode::Dense)
            }
        );
        for bad in [
            "",
            "bm25",
            "rrf:x",
            "rrf:0",
            "weighted:-1:1",
            "weighted:0:0",
            "weighted:1",
            "rerank:rerank",
            "weighted:1:1:l2",
        ] {
            assert!(parse_modes(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
