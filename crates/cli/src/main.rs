//! `searchd`: dense retrieval with its capacity lab built in. This binary is thin: each
//! subcommand parses flags and calls a library crate.
#![forbid(unsafe_code)]

mod bench_memory;
mod commands;
mod demo;
mod flags;
mod qdrant_ingest;
mod quality;
mod restore;
mod text;
mod util;

use clap::{Parser, Subcommand};

use flags::config::Effective;

/// Dense-vector search server with its capacity lab built in.
///
/// Typical workflow on your own vectors: `gt` (exact neighbours), `build` (index),
/// `eval` (recall and speed per ef), `serve` (HTTP API), `load` (capacity ramp).
/// On your own documents: `ingest` (JSONL/Parquet to a collection, embedding the text with
/// `--model`), `serve --collection DIR --model DIR`, `load --text-queries`.
/// `searchd demo` runs all of it on built-in synthetic data (`demo --text` for documents).
#[derive(Parser, Debug)]
#[command(name = "searchd", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
    /// Log filter (tracing env-filter syntax), e.g. info, debug, searchd_server=debug.
    #[arg(long, global = true, env = "SEARCHD_LOG", default_value = "info")]
    log: String,
    /// Log lines as text (coloured only when stderr is a terminal and NO_COLOR is unset)
    /// or as one JSON object per line (`{"timestamp", "level", "target", "message", ...fields}`).
    #[arg(long, global = true, env = "SEARCHD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The whole pipeline on built-in synthetic data: data, exact ground truth, HNSW
    /// build, recall gate, server on a free loopback port, capacity ramp, report.
    Demo(Box<flags::demo::DemoArgs>),
    /// Make data sets.
    #[command(subcommand)]
    Dataset(commands::DatasetCmd),
    /// Exact top-k neighbours (ground truth) by a multi-threaded blocked scan.
    Gt(commands::GtArgs),
    /// Build an index directory (hnsw or flat).
    Build(commands::BuildArgs),
    /// New codes (sq8, pq:M, binary, none) for an existing HNSW index, without rebuilding
    /// its graph.
    Quantize(commands::QuantizeArgs),
    /// Recall@1/10/100 and speed of an index for each ef.
    Eval(Box<commands::EvalArgs>),
    /// Measurements that need more than one process.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Documents (JSONL or Parquet) to a collection: ids, stored fields, vectors (given or
    /// embedded from text by --model), index; checkpointed, so a killed run resumes.
    Ingest(Box<text::IngestArgs>),
    /// Embed texts (JSONL) into a vector matrix (.npy), e.g. query files.
    Embed(Box<text::EmbedArgs>),
    /// Capacity measurement of any server speaking the searchd HTTP API: SLO-stopped
    /// closed-loop ramp or open-loop constant rate, every response checked.
    Load(Box<flags::load::LoadArgs>),
    /// HTTP JSON search API over index and collection directories: vector and text
    /// queries, documents by id, admission control, deadlines, /health /ready /stats
    /// /metrics, atomic reload.
    Serve(Box<flags::serve::ServeArgs>),
    /// API keys for `serve --api-keys FILE`.
    #[command(subcommand)]
    Keys(flags::keys::KeysCmd),
    /// A snapshot of a live collection (`POST /collections/{name}/snapshot`) to a new
    /// collection directory, checked by opening it first.
    Restore(restore::RestoreArgs),
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// Search under memory caps: `searchd eval` in a child process inside a memory cgroup
    /// (v2 or v1) per cap, page cache dropped between runs when allowed; reports resident
    /// set, page faults, QPS, p50/p99 latency, recall and OOM kills per cap.
    Memory(Box<bench_memory::MemoryArgs>),
}

fn main() {
    // `serve` also reads SEARCHD_<FLAG> and `--config FILE` (flags/config.rs).
    let (cli, serve_config) = match flags::config::parse::<Cli>(std::env::args_os().collect()) {
        Ok(parsed) => parsed,
        Err(e) => e.exit(),
    };
    // The demo prints its own progress; the in-process server's info lines would only
    // interleave with it, unless the user asked for them.
    let log = if matches!(cli.cmd, Command::Demo(_))
        && std::env::var_os("SEARCHD_LOG").is_none()
        && cli.log == "info"
    {
        "warn"
    } else {
        cli.log.as_str()
    };
    let filter = tracing_subscriber::EnvFilter::try_new(log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.event_format(JsonLines).init(),
    }
    let result = match &cli.cmd {
        Command::Dataset(commands::DatasetCmd::Synth(a)) => commands::synth(a),
        Command::Gt(a) => commands::gt(a),
        Command::Build(a) => commands::build(a),
        Command::Quantize(a) => commands::quantize(a),
        Command::Eval(a) => commands::eval_cmd(a),
        Command::Bench(BenchCmd::Memory(a)) => bench_memory::run(a),
        Command::Load(a) => commands::load(a),
        Command::Ingest(a) if a.qdrant.to.is_some() => qdrant_ingest::run(a),
        Command::Ingest(a) => text::ingest_cmd(a),
        Command::Embed(a) => text::embed_cmd(a),
        Command::Serve(a) if a.config_file.print_config => {
            print!(
                "{}",
                serve_config
                    .as_ref()
                    .map(Effective::to_toml)
                    .unwrap_or_default()
            );
            Ok(())
        }
        Command::Serve(a) => {
            if let Some(c) = &serve_config {
                tracing::info!("configuration: {}", c.summary());
            }
            text::serve_embedder(a.model.as_deref(), a.embed_threads).and_then(|embedder| {
                let reranker = text::serve_reranker(a.rerank_model.as_deref(), a.embed_threads)?;
                searchd_server::run_blocking_with(&a.settings(), embedder, reranker).map_err(|e| {
                    match e {
                        searchd_server::ServerError::Runtime(_)
                        | searchd_server::ServerError::Io(_) => util::CliError::Io(e.to_string()),
                        e => util::CliError::Input(e.to_string()),
                    }
                })
            })
        }
        Command::Demo(a) => demo::demo(a),
        Command::Restore(a) => restore::restore_cmd(a),
        Command::Keys(c) => flags::keys::run(c),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}

/// `--log-format json`: one JSON object per event, `{"timestamp": RFC 3339, "level",
/// "target", "message", ...the event's fields}` (values as JSON numbers, booleans or
/// strings).
struct JsonLines;

#[derive(Default)]
struct JsonFields(serde_json::Map<String, serde_json::Value>);

impl tracing::field::Visit for JsonFields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JsonLines
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::time::FormatTime;
        let mut ts = String::new();
        tracing_subscriber::fmt::time::SystemTime
            .format_time(&mut tracing_subscriber::fmt::format::Writer::new(&mut ts))?;
        let meta = event.metadata();
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        let mut o = serde_json::Map::new();
        o.insert("timestamp".into(), ts.into());
        o.insert("level".into(), meta.level().as_str().into());
        o.insert("target".into(), meta.target().into());
        if let Some(m) = fields.0.remove("message") {
            o.insert("message".into(), m);
        }
        o.extend(fields.0);
        writeln!(writer, "{}", serde_json::Value::Object(o))
    }
}
