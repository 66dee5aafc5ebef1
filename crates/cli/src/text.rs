//! `searchd ingest`, `searchd embed`, and the adapters that put `searchd-embed` behind the
//! collection's and the server's embedder traits.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use parking_lot::Mutex;
use searchd_collection::ingest::{self, Event, IngestConfig};
use searchd_collection::ModelRecord;
use searchd_docs::{FieldSelection, Format, ReaderConfig};
use searchd_embed::{EmbedConfig, Embedder, TextKind};
use searchd_engine::{BuildConfig, HnswParams, Metric};

use crate::util::{self, summary, CliError, CmdResult};

/// `searchd-embed`'s model as the collection's and the server's embedder.
pub struct ModelAdapter(pub Embedder);

impl ModelAdapter {
    pub fn load(
        dir: &std::path::Path,
        threads: usize,
        max_length: Option<usize>,
    ) -> CmdResult<ModelAdapter> {
        let cfg = EmbedConfig {
            threads,
            max_length,
            ..EmbedConfig::default()
        };
        Embedder::load(dir, &cfg)
            .map(ModelAdapter)
            .map_err(|e| CliError::Input(format!("--model {}: {e}", dir.display())))
    }
    pub fn record(&self) -> ModelRecord {
        let i = self.0.info();
        ModelRecord {
            name: i.name.clone(),
            checksum: i.checksum.clone(),
            dim: i.dim,
            max_length: i.max_length,
            pooling: i.pooling.clone(),
            normalize: i.normalize,
            query_prefix: i.query_prefix.clone(),
            passage_prefix: i.passage_prefix.clone(),
        }
    }
}

/// The workspace's one embedder seam (ingest, the server's queries and live upserts).
impl searchd_collection::embed::TextEmbedder for ModelAdapter {
    fn record(&self) -> ModelRecord {
        ModelAdapter::record(self)
    }
    fn embed(
        &self,
        texts: &[&str],
        kind: searchd_collection::embed::TextKind,
    ) -> Result<searchd_collection::embed::Embedded, String> {
        let kind = match kind {
            searchd_collection::embed::TextKind::Query => TextKind::Query,
            searchd_collection::embed::TextKind::Passage => TextKind::Passage,
        };
        self.0
            .embed(texts, kind)
            .map(|e| searchd_collection::embed::Embedded {
                vectors: e.vectors,
                truncated: e.truncated,
            })
            .map_err(|e| e.to_string())
    }
}

#[derive(Args, Debug, Clone)]
pub struct IngestArgs {
    /// Documents: JSONL (one JSON object per line) or Parquet (one row per document).
    #[arg(help_heading = "Input", long, value_name = "FILE")]
    pub docs: PathBuf,
    /// Output collection directory (written under a temporary name, then renamed).
    #[arg(
        help_heading = "Output and fields",
        long,
        value_name = "DIR",
        required_unless_present = "to"
    )]
    pub out: Option<PathBuf>,
    /// Input format (default: from the extension: .jsonl/.ndjson/.json, .parquet).
    #[arg(help_heading = "Input", long, value_parser = ["jsonl", "parquet"])]
    pub format: Option<String>,
    /// Field holding each document's id (a string or an unsigned integer, unique).
    #[arg(help_heading = "Input", long, default_value = "id")]
    pub id_field: String,
    /// Field holding the text to embed (and, later, to index lexically).
    #[arg(help_heading = "Input", long, default_value = "text")]
    pub text_field: String,
    /// Take each document's vector from this field instead of embedding its text.
    #[arg(help_heading = "Input", long, value_name = "F")]
    pub vector_field: Option<String>,
    /// Take the vectors from this matrix (.npy, ...): row i is the i-th document.
    #[arg(help_heading = "Input", long, value_name = "F.npy")]
    pub vectors: Option<PathBuf>,
    /// Sentence-transformers model directory that embeds the text field.
    #[arg(help_heading = "Embedding", long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Stored fields: `all` (default), `none`, or a comma-separated list. The text field
    /// is stored whenever it is kept.
    #[arg(help_heading = "Output and fields", long, default_value = "all")]
    pub fields: String,
    /// Index kind: hnsw, flat, ivfpq or partitioned (as `searchd build`; a partitioned
    /// collection's partitions load on demand under `serve --memory-budget`).
    #[arg(help_heading = "Index", long, default_value = "hnsw")]
    pub index: String,
    /// partitioned: number of partitions (0 = one per 4,096 rows).
    #[arg(help_heading = "Index", long, default_value_t = 0)]
    pub partitions: usize,
    /// partitioned: most further partitions a row near a boundary is copied into.
    #[arg(help_heading = "Index", long, default_value_t = 0)]
    pub overlap: usize,
    /// cosine, ip or l2.
    #[arg(help_heading = "Index", long, default_value = "cosine", value_parser = util::parse_metric)]
    pub metric: Metric,
    #[arg(help_heading = "Index", long, default_value_t = 16)]
    pub m: usize,
    #[arg(help_heading = "Index", long, default_value_t = 200)]
    pub ef_construction: usize,
    /// Vector codes: none, sq8, pq:M or binary (as `searchd build`).
    #[arg(help_heading = "Index", long, default_value = "none")]
    pub quantization: String,
    /// ivfpq: number of coarse lists (0 = about 4 sqrt(n)).
    #[arg(help_heading = "Index", long, default_value_t = 0)]
    pub nlist: usize,
    /// Texts per embedder call (progress is reported after each).
    #[arg(help_heading = "Embedding", long, default_value_t = ingest::DEFAULT_BATCH)]
    pub batch: usize,
    /// Threads for embedding and the index build (0 = one per core).
    #[arg(help_heading = "Index", long, default_value_t = 0)]
    pub threads: usize,
    /// Threads of the index build alone (default: --threads). 1 makes the build
    /// deterministic, so a resumed ingest gives a byte-identical collection.
    #[arg(help_heading = "Index", long, value_name = "N")]
    pub build_threads: Option<usize>,
    /// Embedded documents per checkpoint: a run killed at any point and started again with
    /// the same command resumes from the last one.
    #[arg(help_heading = "Embedding", long, default_value_t = ingest::DEFAULT_CHECKPOINT_EVERY, value_name = "N")]
    pub checkpoint_every: usize,
    /// Token window of the model (default: the model's max_seq_length).
    #[arg(help_heading = "Embedding", long, value_name = "TOKENS")]
    pub max_length: Option<usize>,
    /// Seed of the HNSW level generator.
    #[arg(help_heading = "Index", long, default_value_t = 42)]
    pub seed: u64,
    /// Count and skip bad documents instead of stopping at the first.
    #[arg(help_heading = "Input", long)]
    pub skip_bad: bool,
    /// Replace OUT if it exists, and discard checkpoints of a different run.
    #[arg(help_heading = "Output and fields", long)]
    pub force: bool,
    /// Collection name recorded in its manifest (default: the directory name).
    #[arg(help_heading = "Output and fields", long)]
    pub name: Option<String>,
    /// Write what the run did as JSON (`searchd.ingest.v1`).
    #[arg(help_heading = "Output and fields", long, value_name = "F")]
    pub json: Option<PathBuf>,
    /// Build a BM25 (lexical) index of the text field, for `mode` lexical and hybrid
    /// (the default when documents have text).
    #[arg(help_heading = "Lexical (BM25)", long, overrides_with = "no_lexical")]
    pub lexical: bool,
    /// Do not build the lexical index.
    #[arg(help_heading = "Lexical (BM25)", long)]
    pub no_lexical: bool,
    /// Analyzer of the lexical index: `standard` (Elasticsearch's: Unicode words,
    /// lowercased, no stemming, no stop words) or `english` (standard + English stop words
    /// + Porter2 stemming). Recorded in the collection.
    #[arg(
        help_heading = "Lexical (BM25)",
        long,
        default_value = "standard",
        value_name = "NAME"
    )]
    pub analyzer: String,
    /// Declare a field's type instead of inferring it: NAME=TYPE with TYPE keyword,
    /// integer, float, bool or datetime (arrays of them need no marker). Repeatable or
    /// comma-separated. Values that do not convert make the document bad.
    #[arg(
        help_heading = "Output and fields",
        long = "field-type",
        value_name = "NAME=TYPE",
        value_delimiter = ','
    )]
    pub field_types: Vec<String>,
    /// Build no field indexes (filters on fields, counts, facets and sorted pages then
    /// work on ids only).
    #[arg(help_heading = "Output and fields", long)]
    pub no_field_indexes: bool,
    /// What live upserts do with fields the mapping does not have, as Elasticsearch's
    /// `dynamic` (recorded in the collection): `true` types and indexes them, `false` stores
    /// them without indexing, `strict` refuses them. Default: the server's
    /// `--dynamic-mapping` (true).
    #[arg(help_heading = "Output and fields", long, value_name = "true|false|strict", value_parser = ["true", "false", "strict"])]
    pub dynamic_mapping: Option<String>,
    /// Qdrant as the destination (last in --help, under its heading).
    #[command(flatten)]
    pub qdrant: crate::flags::ingest::QdrantIngestArgs,
}

/// `--field-type NAME=TYPE` pairs.
fn parse_field_types(
    list: &[String],
) -> Result<Vec<(String, searchd_collection::FieldType)>, CliError> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let Some((name, ty)) = s.split_once('=') else {
                return Err(CliError::Input(format!(
                    "--field-type {s:?}: write NAME=TYPE, e.g. price=float"
                )));
            };
            let ty = ty.trim().parse::<searchd_collection::FieldType>().map_err(|_| {
                CliError::Input(format!(
                    "--field-type {s:?}: unknown type {ty:?} (keyword, integer, float, bool, datetime)"
                ))
            })?;
            Ok((name.trim().to_string(), ty))
        })
        .collect()
}

fn reader_config(
    format: Option<&str>,
    id_field: &str,
    text_field: &str,
    vector_field: Option<&str>,
    fields: &str,
) -> ReaderConfig {
    ReaderConfig {
        format: match format {
            Some("jsonl") => Some(Format::Jsonl),
            Some("parquet") => Some(Format::Parquet),
            _ => None,
        },
        id_field: id_field.to_string(),
        text_field: Some(text_field.to_string()),
        vector_field: vector_field.map(str::to_string),
        fields: match fields {
            "all" => FieldSelection::All,
            "none" => FieldSelection::None,
            list => FieldSelection::List(
                list.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect(),
            ),
        },
    }
}

/// Progress for a long phase: a bar on a terminal, a line every 5 s otherwise (CI logs).
struct Progress {
    bar: Mutex<Option<indicatif::ProgressBar>>,
    phase: Mutex<(&'static str, u64, bool, Instant, Instant, u64)>,
    tty: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            bar: Mutex::new(None),
            phase: Mutex::new(("", 0, false, Instant::now(), Instant::now(), 0)),
            tty: std::io::stderr().is_terminal(),
        }
    }
    fn event(&self, e: Event) {
        match e {
            Event::Phase { name, total, bytes } => {
                if let Some(b) = self.bar.lock().take() {
                    b.finish_and_clear();
                }
                *self.phase.lock() = (name, total, bytes, Instant::now(), Instant::now(), 0);
                if self.tty {
                    let b = util::bar(total, name);
                    if bytes {
                        b.set_style(
                            indicatif::ProgressStyle::with_template(
                                "{prefix:>10} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                            )
                            .expect("valid template")
                            .progress_chars("=> "),
                        );
                    }
                    *self.bar.lock() = Some(b);
                } else {
                    eprintln!(
                        "ingest: {name} ({total} {})",
                        if bytes { "bytes" } else { "documents" }
                    );
                }
            }
            Event::Progress { done } => {
                if let Some(b) = &*self.bar.lock() {
                    b.set_position(done);
                }
                let mut p = self.phase.lock();
                p.5 = done;
                if !self.tty && p.4.elapsed().as_secs_f64() >= 5.0 {
                    p.4 = Instant::now();
                    let secs = p.3.elapsed().as_secs_f64().max(1e-9);
                    let rate = done as f64 / secs;
                    let eta = if rate > 0.0 {
                        util::fmt_duration(std::time::Duration::from_secs_f64(
                            (p.1.saturating_sub(done)) as f64 / rate,
                        ))
                    } else {
                        "?".into()
                    };
                    eprintln!(
                        "ingest: {} {done}/{} {} ({rate:.0}/s, eta {eta})",
                        p.0,
                        p.1,
                        if p.2 { "bytes" } else { "docs" }
                    );
                }
            }
            Event::Resumed { docs, chunks } => {
                eprintln!(
                    "ingest: resuming: {docs} documents already embedded ({chunks} checkpoints)"
                );
            }
            Event::Skipped { message } => eprintln!("ingest: skipped: {message}"),
        }
    }
    fn done(&self) {
        if let Some(b) = self.bar.lock().take() {
            b.finish_and_clear();
        }
    }
}

fn collection_error(e: searchd_collection::Error) -> CliError {
    if e.is_input() {
        CliError::Input(e.to_string())
    } else {
        CliError::Io(e.to_string())
    }
}

/// `searchd ingest` into a collection directory (`--to qdrant://` is `qdrant_ingest::run`).
pub fn ingest_cmd(a: &IngestArgs) -> CmdResult {
    let Some(out) = &a.out else {
        return Err(CliError::Input(
            "give --out DIR (or --to qdrant://HOST:6334/NAME)".into(),
        ));
    };
    ingest_to_dir(a, out)
}

/// `ingest` into the collection directory `out`.
pub(crate) fn ingest_to_dir(a: &IngestArgs, out: &std::path::Path) -> CmdResult {
    let started = Instant::now();
    let (kind, nlist) = crate::util::index_kind(&a.index, a.nlist, a.partitions, a.overlap)?;
    let quantization = searchd_engine::Quantization::parse(&a.quantization).ok_or_else(|| {
        CliError::Input(format!(
            "unknown --quantization {:?} (none, sq8, pq:M, binary)",
            a.quantization
        ))
    })?;
    let mut cfg = IngestConfig::new(&a.docs, out);
    cfg.reader = reader_config(
        a.format.as_deref(),
        &a.id_field,
        &a.text_field,
        a.vector_field.as_deref(),
        &a.fields,
    );
    cfg.vectors_file = a.vectors.clone();
    cfg.build = BuildConfig {
        kind,
        metric: a.metric,
        hnsw: HnswParams {
            m: a.m,
            ef_construction: a.ef_construction,
            seed: a.seed,
        },
        threads: a.build_threads.unwrap_or(a.threads),
        force: true,
        quantization,
        nlist,
        overlap: a.overlap,
        build_on: searchd_engine::BuildOn::default(),
    };
    cfg.checkpoint_every = a.checkpoint_every;
    cfg.batch = a.batch;
    cfg.skip_bad = a.skip_bad;
    cfg.force = a.force;
    cfg.name = a.name.clone();
    let analyzer: searchd_collection::Analyzer = a.analyzer.parse().map_err(|_| {
        CliError::Input(format!(
            "unknown --analyzer {:?} (standard, english)",
            a.analyzer
        ))
    })?;
    cfg.lexical = if a.no_lexical && !a.lexical {
        None
    } else {
        Some(searchd_collection::LexicalConfig {
            analyzer,
            ..Default::default()
        })
    };
    cfg.dynamic = a
        .dynamic_mapping
        .as_deref()
        .and_then(searchd_collection::live::Dynamic::parse);
    cfg.field_indexes = if a.no_field_indexes {
        None
    } else {
        Some(searchd_collection::FieldsConfig {
            declared: parse_field_types(&a.field_types)?,
            ..Default::default()
        })
    };
    let model = match &a.model {
        Some(dir) => Some(ModelAdapter::load(dir, a.threads, a.max_length)?),
        None => None,
    };
    let progress = Progress::new();
    let report = ingest::ingest(
        &cfg,
        model
            .as_ref()
            .map(|m| m as &dyn searchd_collection::embed::TextEmbedder),
        &|e| progress.event(e),
    );
    progress.done();
    let report = report.map_err(collection_error)?;
    println!(
        "ingested {} documents ({} skipped) of {} dimensions into {} in {:.1}s (read {:.1}s, embed {:.1}s{}, lexical {:.1}s, fields {:.1}s, build {:.1}s), {}",
        report.docs,
        report.skipped,
        report.dim,
        out.display(),
        report.total_seconds,
        report.read_seconds,
        report.embed_seconds,
        if report.resumed > 0 {
            format!(", {} resumed from checkpoints", report.resumed)
        } else {
            String::new()
        },
        report.lexical_seconds,
        report.fields_seconds,
        report.build_seconds,
        util::human_bytes(report.bytes)
    );
    if let Some(schema) = &report.schema {
        for f in &schema.fields {
            println!(
                "  field {:<20} {}{}{} ({} docs, {} values)",
                f.name,
                f.ty,
                if f.array { "[]" } else { "" },
                if f.declared {
                    ", declared"
                } else {
                    ", inferred"
                },
                f.docs,
                f.values
            );
        }
        for s in &schema.skipped {
            println!("  field {:<20} not indexed: {}", s.name, s.reason);
        }
    }
    if let Some(path) = &a.json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        v["schema"] = "searchd.ingest.v1".into();
        v["out"] = serde_json::json!(out);
        v["peak_rss_bytes"] = serde_json::json!(util::peak_rss_bytes());
        crate::util::write_json(path, &v)?;
    }
    summary("ingest done", started);
    Ok(())
}

#[derive(Args, Debug)]
pub struct EmbedArgs {
    /// Sentence-transformers model directory.
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Texts: JSONL (the text in --text-field) or Parquet.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// Field holding the text (for query files, e.g. `query`).
    #[arg(long, default_value = "text")]
    pub text_field: String,
    /// Output matrix (.npy float32, row i embeds line i).
    #[arg(long, value_name = "F.npy")]
    pub out: PathBuf,
    /// `query` or `passage`: selects the model's prompt prefix, if it has them.
    #[arg(long, default_value = "passage", value_parser = ["query", "passage"])]
    pub kind: String,
    /// Threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Token window of the model (default: the model's max_seq_length).
    #[arg(long, value_name = "TOKENS")]
    pub max_length: Option<usize>,
    /// Texts per embedder call.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
}

pub fn embed_cmd(a: &EmbedArgs) -> CmdResult {
    let started = Instant::now();
    let model = ModelAdapter::load(&a.model, a.threads, a.max_length)?;
    let texts = read_texts(&a.input, &a.text_field)?;
    if texts.is_empty() {
        return Err(CliError::Input(format!("{}: no texts", a.input.display())));
    }
    let kind = if a.kind == "query" {
        TextKind::Query
    } else {
        TextKind::Passage
    };
    let dim = model.0.dim();
    let mut out = Vec::with_capacity(texts.len() * dim);
    let mut truncated = 0usize;
    let pb = util::bar(texts.len() as u64, "embed");
    let t0 = Instant::now();
    for chunk in texts.chunks(a.batch.max(1)) {
        let refs: Vec<&str> = chunk.iter().map(|s| s.as_str()).collect();
        let e = model
            .0
            .embed(&refs, kind)
            .map_err(|e| CliError::Io(format!("embedding failed: {e}")))?;
        truncated += e.truncated.iter().filter(|t| **t).count();
        out.extend_from_slice(&e.vectors);
        pb.inc(chunk.len() as u64);
    }
    crate::util::done(&pb);
    let secs = t0.elapsed().as_secs_f64();
    searchd_vecio::write_vectors(&a.out, &out, texts.len(), dim)?;
    println!(
        "embedded {} texts in {secs:.2}s ({:.1} texts/s, batches of {}; {} truncated to the {}-token window) into {} ({} x {dim})",
        texts.len(),
        texts.len() as f64 / secs.max(1e-9),
        a.batch,
        truncated,
        model.0.info().max_length,
        a.out.display(),
        texts.len()
    );
    summary("embed done", started);
    Ok(())
}

/// A cross-encoder (`--rerank-model`) as the server and `searchd eval` need it.
pub struct RerankAdapter(pub searchd_embed::CrossEncoder);

impl RerankAdapter {
    pub fn load(dir: &std::path::Path, threads: usize) -> CmdResult<RerankAdapter> {
        let cfg = EmbedConfig {
            threads,
            ..EmbedConfig::default()
        };
        searchd_embed::CrossEncoder::load(dir, &cfg)
            .map(RerankAdapter)
            .map_err(|e| CliError::Input(format!("--rerank-model {}: {e}", dir.display())))
    }
}

impl searchd_server::TextRerank for RerankAdapter {
    fn info(&self) -> serde_json::Value {
        let i = self.0.info();
        serde_json::json!({"name": i.name, "checksum": i.checksum, "max_length": i.max_length,
            "activation": i.activation, "threads": self.0.threads()})
    }
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, String> {
        self.0.score(query, passages).map_err(|e| e.to_string())
    }
}

/// Load `--rerank-model` for `serve`, if given.
pub fn serve_reranker(
    model: Option<&std::path::Path>,
    threads: Option<usize>,
) -> CmdResult<Option<Arc<dyn searchd_server::TextRerank>>> {
    match model {
        None => Ok(None),
        Some(dir) => Ok(Some(Arc::new(RerankAdapter::load(
            dir,
            threads.unwrap_or(0),
        )?))),
    }
}

/// Load `--model` for `serve`, if given.
pub fn serve_embedder(
    model: Option<&std::path::Path>,
    threads: Option<usize>,
) -> CmdResult<Option<Arc<dyn searchd_server::TextEmbedder>>> {
    match model {
        None => Ok(None),
        Some(dir) => {
            let m = ModelAdapter::load(dir, threads.unwrap_or(0), None)?;
            Ok(Some(Arc::new(m)))
        }
    }
}

/// The `field` string of every line of a JSONL file, in order; a line without it (or with a
/// non-string) is an error naming the line.
pub fn read_texts(path: &std::path::Path, field: &str) -> CmdResult<Vec<String>> {
    use std::io::BufRead;
    let f = std::fs::File::open(path)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line =
            line.map_err(|e| CliError::Input(format!("{}: line {}: {e}", path.display(), i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| {
            CliError::Input(format!("{}: line {}: not JSON: {e}", path.display(), i + 1))
        })?;
        match v.get(field) {
            Some(serde_json::Value::String(s)) => out.push(s.clone()),
            Some(other) => {
                return Err(CliError::Input(format!(
                    "{}: line {}: field {field:?} must be a string, got {other}",
                    path.display(),
                    i + 1
                )))
            }
            None => {
                return Err(CliError::Input(format!(
                    "{}: line {}: field {field:?} is missing",
                    path.display(),
                    i + 1
                )))
            }
        }
    }
    Ok(out)
}
