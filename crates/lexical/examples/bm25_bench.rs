//! Build a lexical index from JSONL documents, then time single-threaded top-k searches.
//!
//! ```text
//! cargo run --release -p searchd-lexical --example bm25_bench -- \
//!     --docs passages.jsonl --text-field text --queries queries.jsonl --query-field query \
//!     --analyzer standard --out /tmp/lexical-idx --repeat 5 --top 10 \
//!     [--json result.json] [--dump-tokens DIR] [--threads 1] [--heap-mb 64]
//! ```
//!
//! `--out` must not exist or be empty. Searches: one warm-up pass over all queries, then
//! `--repeat` passes, each search timed on its own. The result (schema
//! `searchd.bench-lexical.v1`) goes to `--json` (default stdout). `--dump-tokens DIR` writes
//! `DIR/docs.tokens.jsonl` and `DIR/queries.tokens.jsonl` (one JSON array of terms a line:
//! exactly what was indexed / queried) so peers can be fed the same tokenisation.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use searchd_lexical::{tokenize, Analyzer, LexicalConfig, LexicalIndex, LexicalWriter};

struct Args {
    docs: PathBuf,
    text_field: String,
    queries: PathBuf,
    query_field: String,
    analyzer: Analyzer,
    out: PathBuf,
    repeat: usize,
    top: usize,
    json: Option<PathBuf>,
    dump_tokens: Option<PathBuf>,
    threads: usize,
    heap_mb: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut docs = None;
    let mut queries = None;
    let mut out = None;
    let mut a = Args {
        docs: PathBuf::new(),
        text_field: "text".into(),
        queries: PathBuf::new(),
        query_field: "query".into(),
        analyzer: Analyzer::Standard,
        out: PathBuf::new(),
        repeat: 5,
        top: 10,
        json: None,
        dump_tokens: None,
        threads: 1,
        heap_mb: 64,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{v}: {e}"));
        match flag.as_str() {
            "--docs" => docs = Some(PathBuf::from(val()?)),
            "--text-field" => a.text_field = val()?,
            "--queries" => queries = Some(PathBuf::from(val()?)),
            "--query-field" => a.query_field = val()?,
            "--analyzer" => a.analyzer = val()?.parse().map_err(|e| format!("{e}"))?,
            "--out" => out = Some(PathBuf::from(val()?)),
            "--repeat" => a.repeat = num(val()?)?,
            "--top" => a.top = num(val()?)?,
            "--json" => a.json = Some(PathBuf::from(val()?)),
            "--dump-tokens" => a.dump_tokens = Some(PathBuf::from(val()?)),
            "--threads" => a.threads = num(val()?)?,
            "--heap-mb" => a.heap_mb = num(val()?)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    a.docs = docs.ok_or("--docs is required")?;
    a.queries = queries.ok_or("--queries is required")?;
    a.out = out.ok_or("--out is required")?;
    Ok(a)
}

/// Calls `f` with the string `field` of each line of a JSONL file.
fn each_text(
    path: &Path,
    field: &str,
    mut f: impl FnMut(&str) -> Result<(), String>,
) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, line) in BufReader::with_capacity(1 << 20, file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        let text = v
            .get(field)
            .and_then(|t| t.as_str())
            .ok_or_else(|| format!("{}:{}: no string field {field:?}", path.display(), i + 1))?;
        f(text)?;
    }
    Ok(())
}

fn dump_line(w: &mut impl Write, toks: &[String]) -> Result<(), String> {
    serde_json::to_writer(&mut *w, toks).map_err(|e| e.to_string())?;
    w.write_all(b"\n").map_err(|e| e.to_string())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn run(a: Args) -> Result<(), String> {
    let mut dump = match &a.dump_tokens {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let open = |name: &str| {
                let p = dir.join(name);
                std::fs::File::create(&p)
                    .map(|f| BufWriter::with_capacity(1 << 20, f))
                    .map_err(|e| format!("{}: {e}", p.display()))
            };
            Some((open("docs.tokens.jsonl")?, open("queries.tokens.jsonl")?))
        }
        None => None,
    };

    let cfg = LexicalConfig {
        analyzer: a.analyzer,
        writer_heap_bytes: a.heap_mb << 20,
        threads: a.threads,
    };
    // Build time covers reading the JSONL, indexing and merging, not the optional token dump.
    let t0 = Instant::now();
    let mut w = LexicalWriter::create(&a.out, &cfg).map_err(|e| e.to_string())?;
    let mut row = 0u32;
    let mut dump_s = 0.0;
    each_text(&a.docs, &a.text_field, |text| {
        w.add(row, text).map_err(|e| e.to_string())?;
        row += 1;
        if let Some((docs, _)) = dump.as_mut() {
            let t = Instant::now();
            dump_line(docs, &tokenize(a.analyzer, text))?;
            dump_s += t.elapsed().as_secs_f64();
        }
        Ok(())
    })?;
    let meta = w.finish().map_err(|e| e.to_string())?;
    let build_s = t0.elapsed().as_secs_f64() - dump_s;
    eprintln!(
        "built {} docs in {build_s:.2}s, {} bytes ({:.1} MB)",
        meta.docs,
        meta.bytes,
        meta.bytes as f64 / 1e6
    );

    let t = Instant::now();
    let idx = LexicalIndex::open(&a.out).map_err(|e| e.to_string())?;
    let open_s = t.elapsed().as_secs_f64();

    let mut queries = Vec::new();
    each_text(&a.queries, &a.query_field, |q| {
        if let Some((_, qs)) = dump.as_mut() {
            dump_line(qs, &tokenize(a.analyzer, q))?;
        }
        queries.push(q.to_string());
        Ok(())
    })?;
    if let Some((mut d, mut q)) = dump.take() {
        d.flush().map_err(|e| e.to_string())?;
        q.flush().map_err(|e| e.to_string())?;
    }

    // Warm-up pass; it also gives the reported rows.
    let mut results = Vec::with_capacity(queries.len());
    for q in &queries {
        let hits = idx.search(q, a.top, None).map_err(|e| e.to_string())?;
        results.push(hits.hits.iter().map(|h| h.0).collect::<Vec<u32>>());
    }
    let mut times_ms = Vec::with_capacity(queries.len() * a.repeat);
    let mut per_query_ms = vec![0.0f64; queries.len()];
    let mut checksum = 0u64;
    for _ in 0..a.repeat {
        for (i, q) in queries.iter().enumerate() {
            let t = Instant::now();
            let hits = idx.search(q, a.top, None).map_err(|e| e.to_string())?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            times_ms.push(ms);
            per_query_ms[i] += ms / a.repeat as f64;
            checksum = checksum.wrapping_add(hits.hits.len() as u64);
        }
    }
    let mut order: Vec<usize> = (0..queries.len()).collect();
    order.sort_by(|&x, &y| per_query_ms[y].total_cmp(&per_query_ms[x]));
    let slowest: Vec<serde_json::Value> = order
        .iter()
        .take(10)
        .map(|&i| serde_json::json!({"query": queries[i], "mean_ms": per_query_ms[i]}))
        .collect();
    times_ms.sort_by(f64::total_cmp);
    let mean = times_ms.iter().sum::<f64>() / times_ms.len().max(1) as f64;
    let out = serde_json::json!({
        "schema": "searchd.bench-lexical.v1",
        "analyzer": a.analyzer.to_string(),
        "docs": meta.docs,
        "queries": queries.len(),
        "repeat": a.repeat,
        "top": a.top,
        "threads": a.threads,
        "heap_mb": a.heap_mb,
        "build_s": build_s,
        "open_s": open_s,
        "bytes": meta.bytes,
        "p50_ms": percentile(&times_ms, 0.50),
        "p90_ms": percentile(&times_ms, 0.90),
        "p99_ms": percentile(&times_ms, 0.99),
        "mean_ms": mean,
        "searches": times_ms.len(),
        "hits_checksum": checksum,
        "slowest": slowest,
        "results": results,
    });
    eprintln!(
        "{} queries x {}: p50 {:.3} ms, p99 {:.3} ms, mean {:.3} ms",
        queries.len(),
        a.repeat,
        percentile(&times_ms, 0.5),
        percentile(&times_ms, 0.99),
        mean
    );
    let text = serde_json::to_string(&out).map_err(|e| e.to_string())?;
    match &a.json {
        Some(p) => std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?,
        None => println!("{text}"),
    }
    Ok(())
}

fn main() {
    let code = match parse_args().and_then(run) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("bm25_bench: {e}");
            2
        }
    };
    std::process::exit(code);
}
