//! `searchd dataset synth`, `gt`, `build` and `eval`: thin wrappers that read files, call
//! the engine, and print.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use searchd_engine::{
    build_index, eval, exact, BuildConfig, BuildOn, HnswParams, Index, IndexKind, LoadOptions,
    Metric, Placement, Quantization, VectorPlacement,
};

use crate::util::{self, bar, load_vectors, summary, write_json, CliError, CmdResult};

#[derive(Subcommand, Debug)]
pub enum DatasetCmd {
    /// Deterministic synthetic corpus that behaves like text embeddings (clustered,
    /// anisotropic, unit length): DIR/base.npy and DIR/queries.npy, float32.
    Synth(SynthArgs),
}

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Number of base vectors.
    #[arg(long, default_value_t = 200_000)]
    pub n: usize,
    /// Dimensions.
    #[arg(long, default_value_t = 384)]
    pub dim: usize,
    /// Number of query vectors.
    #[arg(long, default_value_t = 1000)]
    pub queries: usize,
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Seed; the same seed gives identical files.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Generate the synthetic corpus (with a progress bar) and write base and query files.
/// Returns the data, which the demo goes on to use.
pub fn synth_files(
    n: usize,
    dim: usize,
    queries: usize,
    seed: u64,
    base_path: &std::path::Path,
    queries_path: &std::path::Path,
) -> CmdResult<searchd_vecio::synth::SynthData> {
    let p = searchd_vecio::synth::SynthParams {
        n,
        dim,
        queries,
        seed,
        ..Default::default()
    };
    let pb = bar((n + queries) as u64, "synth");
    let data = searchd_vecio::synth::generate(&p, Some(&pb));
    crate::util::done(&pb);
    searchd_vecio::write_vectors(base_path, &data.base, n, dim)?;
    searchd_vecio::write_vectors(queries_path, &data.queries, queries, dim)?;
    Ok(data)
}

pub fn synth(a: &SynthArgs) -> CmdResult {
    let started = Instant::now();
    if a.n == 0 || a.dim == 0 || a.queries == 0 {
        return Err(CliError::Input(
            "--n, --dim and --queries must be at least 1".into(),
        ));
    }
    std::fs::create_dir_all(&a.out)
        .map_err(|e| CliError::Input(format!("{}: {e}", a.out.display())))?;
    let base = a.out.join("base.npy");
    let queries = a.out.join("queries.npy");
    synth_files(a.n, a.dim, a.queries, a.seed, &base, &queries)?;
    println!(
        "wrote {} ({} x {}) and {} ({} x {})",
        base.display(),
        a.n,
        a.dim,
        queries.display(),
        a.queries,
        a.dim
    );
    summary("synth done", started);
    Ok(())
}

#[derive(Args, Debug)]
pub struct GtArgs {
    /// Base vectors (.npy, .fvecs, .bvecs, .hdf5).
    #[arg(long)]
    pub base: PathBuf,
    /// Query vectors.
    #[arg(long)]
    pub queries: PathBuf,
    /// Output: exact neighbour ids, int32 .npy (or .ivecs by extension).
    #[arg(long)]
    pub out: PathBuf,
    /// Neighbours per query.
    #[arg(long, default_value_t = 100)]
    pub k: usize,
    /// cosine, ip or l2.
    #[arg(long, default_value = "cosine", value_parser = util::parse_metric)]
    pub metric: Metric,
    /// Threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

fn normalized_copy(v: &searchd_vecio::Vectors, metric: Metric, what: &str) -> CmdResult<Vec<f32>> {
    let mut data = v.as_slice().to_vec();
    if metric == Metric::Cosine {
        for (i, r) in data.chunks_exact_mut(v.dim()).enumerate() {
            if !searchd_kernels::normalize(r) {
                return Err(CliError::Input(format!(
                    "{what} row {i} is all zeros; cosine similarity is undefined for it"
                )));
            }
        }
    }
    Ok(data)
}

pub fn gt(a: &GtArgs) -> CmdResult {
    let started = Instant::now();
    let base = load_vectors(&a.base, "train")?;
    let queries = load_vectors(&a.queries, "test")?;
    if base.dim() != queries.dim() {
        return Err(CliError::Input(format!(
            "{} has {} dimensions, {} has {}",
            a.base.display(),
            base.dim(),
            a.queries.display(),
            queries.dim()
        )));
    }
    if a.k == 0 || a.k > base.n() {
        return Err(CliError::Input(format!(
            "--k must be between 1 and the number of base vectors ({}), got {}",
            base.n(),
            a.k
        )));
    }
    let dim = base.dim();
    let b = normalized_copy(&base, a.metric, "base")?;
    let q = normalized_copy(&queries, a.metric, "query")?;
    let pool = util::pool(a.threads)?;
    let pb = bar(queries.n() as u64, "gt");
    let t = Instant::now();
    let res = pool.install(|| exact::knn(a.metric, &b, &q, dim, a.k, &|d| pb.set_position(d)));
    let secs = t.elapsed().as_secs_f64();
    crate::util::done(&pb);
    let ids: Vec<i32> = res
        .iter()
        .flat_map(|r| r.iter().map(|n| n.id as i32))
        .collect();
    searchd_vecio::write_ids(&a.out, &ids, queries.n(), a.k)?;
    write_gt_meta(&a.out, a.metric, a.k, queries.n(), base.n(), dim)?;
    println!(
        "exact top-{} of {} queries over {} x {} in {secs:.2}s ({:.0} queries/s, {} threads) -> {}",
        a.k,
        queries.n(),
        base.n(),
        dim,
        queries.n() as f64 / secs,
        pool.current_num_threads(),
        a.out.display()
    );
    summary("gt done", started);
    Ok(())
}

/// Record beside a ground-truth file the metric (and shape) it was computed under
/// (`FILE.meta.json`), so `eval` and `load` can refuse it against an index of another
/// metric.
pub fn write_gt_meta(
    out: &std::path::Path,
    metric: Metric,
    k: usize,
    queries: usize,
    base_n: usize,
    dim: usize,
) -> CmdResult {
    let meta = searchd_load::gt::GtMeta {
        schema: searchd_load::gt::GT_META_SCHEMA.to_string(),
        metric: metric.name().to_string(),
        k,
        queries,
        base_n,
        dim,
    };
    searchd_load::gt::write_meta(out, &meta).map_err(|e| {
        CliError::Io(format!(
            "{}: {e}",
            searchd_load::gt::meta_path(out).display()
        ))
    })
}

/// Refuse a ground truth whose recorded metric (or base size) is not the index's; a file
/// without a record (older `searchd gt`) is accepted with a warning.
pub fn check_gt_meta(gt: &std::path::Path, metric: Metric, n: usize) -> CmdResult {
    match searchd_load::gt::read_meta(gt).map_err(CliError::Input)? {
        Some(m) => {
            searchd_load::gt::check_metric(gt, &m, metric.name()).map_err(CliError::Input)?;
            if m.base_n != n {
                return Err(CliError::Input(format!(
                    "{} was computed over {} base vectors, the index has {n}: it belongs to another data set",
                    gt.display(),
                    m.base_n
                )));
            }
            Ok(())
        }
        None => {
            eprintln!(
                "warning: {} records no metric (no {}); recall assumes it was computed under {}",
                gt.display(),
                searchd_load::gt::meta_path(gt).display(),
                metric.name()
            );
            Ok(())
        }
    }
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// Base vectors (.npy, .fvecs, .bvecs, .hdf5).
    #[arg(long)]
    pub base: PathBuf,
    /// Output index directory (written to a temporary name, then renamed).
    #[arg(long)]
    pub out: PathBuf,
    /// Index kind: hnsw, flat (exact), ivfpq (coarse lists with PQ residual codes and
    /// float32 rescoring; needs --quantization pq:M; searches probe `ef` lists) or
    /// partitioned (balanced k-means partitions, one HNSW graph each; searches probe the
    /// `nprobe` nearest, walking each with `ef`).
    #[arg(long, default_value = "hnsw")]
    pub index: String,
    /// ivfpq: number of coarse lists (0 = about 4 sqrt(n), a power of two).
    #[arg(long, default_value_t = 0)]
    pub nlist: usize,
    /// partitioned: number of partitions (0 = one per 4,096 rows).
    #[arg(long, default_value_t = 0)]
    pub partitions: usize,
    /// partitioned: most further partitions a row near a boundary is copied into (its
    /// centroid at most 10% farther than its own partition's).
    #[arg(long, default_value_t = 0)]
    pub overlap: usize,
    /// cosine, ip or l2.
    #[arg(long, default_value = "cosine", value_parser = util::parse_metric)]
    pub metric: Metric,
    /// HNSW links per node (level 0 keeps 2*M).
    #[arg(long, default_value_t = 16)]
    pub m: usize,
    /// HNSW candidate list size while inserting.
    #[arg(long, default_value_t = 200)]
    pub ef_construction: usize,
    /// Vector codes for HNSW traversal: none (float32), sq8 (one byte per dimension),
    /// pq:M (product quantization, M bytes per vector; M must divide the dimension) or
    /// binary (one bit per dimension). The float32 vectors are kept for rescoring.
    #[arg(long, default_value = "none")]
    pub quantization: String,
    /// What HNSW insertion walks score: sq8 (codes made for the build and dropped after it:
    /// a quarter of the bytes per distance, the same recall in less time; the candidates
    /// each walk finds are rescored with float32 before links are chosen) or float32.
    #[arg(long, default_value = "sq8", value_parser = parse_build_on)]
    pub build_on: BuildOn,
    /// Build threads (0 = one per core; 1 = deterministic for a given --seed).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Seed of the HNSW level generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub force: bool,
}

/// `OUT.tmp-PID`, where an index directory is written before it is renamed to `OUT`.
fn tmp_dir(out: &std::path::Path, pid: u32) -> Option<PathBuf> {
    let name = out.file_name()?;
    let mut t = name.to_os_string();
    t.push(format!(".tmp-{pid}"));
    Some(out.with_file_name(t))
}

/// Remove the `OUT.tmp-PID` directories left by builds that died (their pid no longer
/// runs); a live build's directory is left alone. Returns what was removed.
pub fn remove_dead_tmp_dirs(out: &std::path::Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Some(name) = out.file_name().and_then(|n| n.to_str()) else {
        return removed;
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = format!("{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return removed;
    };
    for e in entries.flatten() {
        let fname = e.file_name();
        let Some(pid) = fname
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || searchd_os::proc::alive(pid) {
            continue;
        }
        let path = e.path();
        if path.is_dir() && std::fs::remove_dir_all(&path).is_ok() {
            eprintln!(
                "removed {} (left by build process {pid}, which is no longer running)",
                path.display()
            );
            removed.push(path);
        }
    }
    removed
}

/// On the first Ctrl-C, remove this process's `OUT.tmp-PID` and exit with status 130
/// (a second Ctrl-C exits at once). The index directory itself only ever appears
/// complete (it is renamed into place), so nothing else is left behind.
fn clean_up_on_interrupt(out: &std::path::Path) {
    let stop = searchd_load::interrupt::install_with(
        b"\ninterrupted: removing the unfinished index (Ctrl-C again to quit at once)\n",
    );
    let Some(tmp) = tmp_dir(out, std::process::id()) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("searchd-interrupt".into())
        .spawn(move || loop {
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                // Writer threads may still create files for a moment: retry.
                for _ in 0..50 {
                    match std::fs::remove_dir_all(&tmp) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            std::thread::sleep(std::time::Duration::from_millis(20))
                        }
                        _ => break,
                    }
                }
                eprintln!("interrupted: no index was written");
                std::process::exit(130);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        });
}

pub fn build(a: &BuildArgs) -> CmdResult {
    let started = Instant::now();
    remove_dead_tmp_dirs(&a.out);
    clean_up_on_interrupt(&a.out);
    let (kind, nlist) = util::index_kind(&a.index, a.nlist, a.partitions, a.overlap)?;
    let quantization = parse_quantization(&a.quantization)?;
    let base = load_vectors(&a.base, "train")?;
    let cfg = BuildConfig {
        kind,
        metric: a.metric,
        hnsw: HnswParams {
            m: a.m,
            ef_construction: a.ef_construction,
            seed: a.seed,
        },
        threads: a.threads,
        force: a.force,
        quantization,
        nlist,
        overlap: a.overlap,
        build_on: a.build_on,
    };
    let pb = bar(base.n() as u64, "build");
    // A partitioned build counts rows of its partitions (copies included).
    let report = build_index(&a.out, base.as_slice(), base.dim(), &cfg, &|d, total| {
        pb.set_length(total);
        pb.set_position(d)
    })
    .map_err(|e| {
        pb.finish_and_clear();
        CliError::from(e)
    })?;
    crate::util::done(&pb);
    println!(
        "built {} index over {} x {} ({}) in {:.1}s (graph {:.1}s) -> {} ({})",
        kind.name(),
        report.n,
        report.dim,
        a.metric.name(),
        report.total_seconds,
        report.graph_seconds,
        a.out.display(),
        util::human_bytes(report.bytes)
    );
    summary("build done", started);
    Ok(())
}

fn parse_build_on(s: &str) -> Result<BuildOn, String> {
    BuildOn::parse(s).ok_or_else(|| format!("unknown --build-on {s:?} (float32 or sq8)"))
}

fn parse_quantization(s: &str) -> CmdResult<Quantization> {
    Quantization::parse(s).ok_or_else(|| {
        CliError::Input(format!(
            "unknown --quantization {s:?} (none, sq8, pq:M with M dividing the dimension, binary, rabitq:B with B from 1 to 8)"
        ))
    })
}

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// Existing HNSW index directory.
    #[arg(long)]
    pub index: PathBuf,
    /// Output index directory: the source's vectors, graph and id map (hard-linked where
    /// the filesystem allows, copied otherwise) plus the new codes.
    #[arg(long)]
    pub out: PathBuf,
    /// Codes to add: sq8, pq:M, binary, rabitq:B (B = 1..8 bits per dimension), or none (drop the codes).
    #[arg(long)]
    pub quantization: String,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub force: bool,
}

/// `searchd quantize`: new codes for an existing graph, without rebuilding it.
pub fn quantize(a: &QuantizeArgs) -> CmdResult {
    let started = Instant::now();
    remove_dead_tmp_dirs(&a.out);
    clean_up_on_interrupt(&a.out);
    let q = parse_quantization(&a.quantization)?;
    let report = searchd_engine::quantize_index(&a.index, &a.out, q, a.force)?;
    println!(
        "quantized {} ({} x {}) with {} in {:.1} s -> {} ({})",
        a.index.display(),
        report.n,
        report.dim,
        q.name(),
        report.total_seconds,
        a.out.display(),
        util::human_bytes(report.bytes)
    );
    summary("quantize done", started);
    Ok(())
}

/// How to open an index: shared by eval and bench memory.
#[derive(Args, Debug, Clone)]
pub struct OpenArgs {
    /// Where the float32 vectors live: mmap (shared page cache), ram (private copy); for
    /// quantized indexes also disk (rescoring rows read with pread, outside the resident
    /// set) or none (no rescoring; recall is then checked against the file on disk).
    #[arg(long, default_value = "mmap", value_parser = ["mmap", "ram", "disk", "none"])]
    pub vectors: String,
    /// Where the graph and id map live: mmap or ram (default: like --vectors when that is
    /// mmap or ram, mmap otherwise).
    #[arg(long, value_parser = ["mmap", "ram"])]
    pub graph: Option<String>,
    /// Where a quantized index's codes live: mmap or ram (default: like --graph's default).
    #[arg(long, value_parser = ["mmap", "ram"])]
    pub codes: Option<String>,
    /// Pre-fault every mapped page at open (MAP_POPULATE).
    #[arg(long)]
    pub populate: bool,
    /// mlock the index in memory.
    #[arg(long)]
    pub lock: bool,
    /// Skip the CRC32 check of every file at open.
    #[arg(long)]
    pub no_verify: bool,
    /// Partitioned indexes: bytes the resident partitions and routing may take (e.g.
    /// 512MiB); partitions load on demand, least recently used dropped. Default: all
    /// resident.
    #[arg(long, value_name = "BYTES", value_parser = crate::flags::serve::parse_bytes)]
    pub memory_budget: Option<u64>,
}

impl OpenArgs {
    pub fn options(&self) -> LoadOptions {
        let part = |p: &Option<String>| p.as_deref().and_then(Placement::parse);
        LoadOptions {
            populate: self.populate,
            lock: self.lock,
            verify: !self.no_verify,
            memory_budget: self.memory_budget,
            ..LoadOptions::with_parts(
                VectorPlacement::parse(&self.vectors).unwrap_or_default(),
                part(&self.graph),
                part(&self.codes),
            )
        }
    }
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// Index directory (ANN evaluation: recall against exact neighbours).
    #[arg(
        long,
        required_unless_present = "collection",
        conflicts_with = "collection"
    )]
    pub index: Option<PathBuf>,
    /// Query vectors.
    #[arg(long, required_unless_present = "collection")]
    pub queries: Option<PathBuf>,
    /// Exact neighbour ids (from `searchd gt`).
    #[arg(long, required_unless_present = "collection")]
    pub gt: Option<PathBuf>,
    /// Collection directory (quality lab: nDCG@10, MRR@10, recall@100 per retrieval mode
    /// against `--qrels` judgements; writes `searchd.quality.v1`).
    #[arg(long, value_name = "DIR", requires = "qrels")]
    pub collection: Option<PathBuf>,
    #[command(flatten)]
    pub quality: crate::quality::QualityArgs,
    /// Neighbours per query.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Comma-separated ef values to sweep (ivfpq indexes: lists probed, nprobe).
    #[arg(long, default_value = "16,32,64,128,256", value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub ef: Vec<u16>,
    /// Threads for the all-thread throughput column (0 = one per core). Every thread
    /// runs its own closed loop over a rotating share of the queries for --min-seconds
    /// (no barrier between passes), so for a CPU-bound search the figure approaches
    /// threads x the single-thread QPS; it is the in-process ceiling the server's HTTP
    /// throughput is compared with.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Rescore the best X*k candidates with float32 vectors (quantized indexes only).
    #[arg(long)]
    pub oversample: Option<f32>,
    /// Comma-separated partitions probed per search, each swept over every --ef
    /// (partitioned indexes only; default: the index's).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub nprobe: Vec<u32>,
    /// Seconds of each timed measurement (single thread, then all threads), per ef.
    #[arg(long, default_value_t = 1.0)]
    pub min_seconds: f64,
    /// Search on one thread for this many seconds straight after opening, before the
    /// warm-up (the first --ef and --nprobe): the cold figures (`cold` in the first JSON
    /// row) next to the warm ones. `bench memory` drops the page cache before each run.
    #[arg(long, default_value_t = 0.0, value_parser = parse_cold_seconds)]
    pub cold_seconds: f64,
    /// Write the searchd.eval.v1 JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an HTML page with the table and the recall@10-vs-QPS curve (one thread and
    /// all threads, each point an ef) here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub open: OpenArgs,
}

/// The recall-vs-QPS chart of eval rows as an HTML fragment (inline SVG).
pub fn recall_chart_html(rows: &[eval::EvalRow], title: &str) -> CmdResult<String> {
    let pts: Vec<searchd_load::html::RecallPoint> = rows
        .iter()
        .filter_map(|r| {
            r.recall_at_10
                .map(|recall| searchd_load::html::RecallPoint {
                    ef: r.ef,
                    recall,
                    qps_1thread: r.qps_1thread,
                    qps_all_threads: r.qps_all_threads,
                })
        })
        .collect();
    if pts.is_empty() {
        return Ok(String::new());
    }
    let svg = searchd_load::html::recall_qps_svg(&pts, title)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    Ok(format!("<div class=\"svg\">{svg}</div>\n"))
}

/// `eval --html`: the table and the recall-vs-QPS curve.
fn eval_page(
    index_dir: &std::path::Path,
    info: &searchd_engine::IndexInfo,
    k: usize,
    nq: usize,
    rows: &[eval::EvalRow],
) -> CmdResult<String> {
    use searchd_load::html::esc;
    let f = |r: Option<f64>| r.map_or("-".to_string(), |v| format!("{v:.4}"));
    let mut s = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>searchd eval</title><style>{}</style></head><body>\n\
         <h1>searchd eval: {}</h1>\n<p>{} index, {} x {}, {}; {nq} queries, k={k}; recall is tie-aware. \
         All-thread QPS: every thread searches its own rotating share of the queries for the whole timed window.</p>\n",
        searchd_load::html::STYLE,
        esc(&index_dir.display().to_string()),
        info.kind.name(),
        info.n,
        info.dim,
        info.metric
    );
    s.push_str(&recall_chart_html(rows, "Recall@10 against QPS")?);
    s.push_str("<table class=\"t\"><tr><th>ef</th><th>recall@1</th><th>recall@10</th><th>recall@100</th><th>QPS 1 thread</th><th>p50 &micro;s</th><th>p99 &micro;s</th><th>QPS all threads</th><th>threads</th></tr>\n");
    for r in rows {
        s.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td></tr>\n",
            r.ef,
            f(r.recall_at_1),
            f(r.recall_at_10),
            f(r.recall_at_100),
            r.qps_1thread,
            r.p50_us,
            r.p99_us,
            r.qps_all_threads,
            r.threads
        ));
    }
    s.push_str("</table>\n</body></html>\n");
    Ok(s)
}

fn parse_cold_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: seconds between 0 and 86400")),
    }
}

pub fn eval_cmd(a: &EvalArgs) -> CmdResult {
    if let Some(c) = &a.collection {
        // One --ef value is used as given; the default sweep means the server's default.
        let ef = match a.ef.as_slice() {
            [one] => *one as usize,
            _ => searchd_server::DEFAULT_EF,
        };
        return crate::quality::run(c, &a.quality, ef, a.threads, a.json.as_deref());
    }
    let (Some(index_dir), Some(queries_path), Some(gt_path)) = (&a.index, &a.queries, &a.gt) else {
        return Err(CliError::Input(
            "give --index, --queries and --gt (ANN recall), or --collection and --qrels (retrieval quality)".into(),
        ));
    };
    let started = Instant::now();
    let opts = a.open.options();
    let index = Index::open(index_dir, &opts)?;
    // Recall is checked against the float32 vectors; when the searching index was opened
    // without them, a second handle reads them from disk (outside the resident set).
    let checker = if index.has_vectors() {
        None
    } else {
        Some(Index::open(
            index_dir,
            &LoadOptions {
                vectors: VectorPlacement::Disk,
                ..opts
            },
        )?)
    };
    if let Some(x) = a.oversample {
        if index.info().params.get("quantization").is_none() {
            return Err(CliError::Input(
                "--oversample applies to quantized indexes; this index stores float32 vectors only"
                    .into(),
            ));
        }
        if !(1.0..=searchd_engine::MAX_OVERSAMPLE).contains(&x) {
            return Err(CliError::Input(format!(
                "--oversample must be between 1 and {}, got {x}",
                searchd_engine::MAX_OVERSAMPLE
            )));
        }
    }
    if !a.nprobe.is_empty() && index.info().kind != IndexKind::Partitioned {
        return Err(CliError::Input(
            "--nprobe applies to partitioned indexes (ivfpq probes `--ef` lists)".into(),
        ));
    }
    let queries = load_vectors(queries_path, "test")?;
    check_gt_meta(gt_path, index.metric(), index.len())?;
    let gt = searchd_vecio::read_ids(gt_path)?;
    if queries.dim() != index.dim() {
        return Err(CliError::Input(format!(
            "{} has {} dimensions, the index has {}",
            queries_path.display(),
            queries.dim(),
            index.dim()
        )));
    }
    if gt.n < queries.n() {
        return Err(CliError::Input(format!(
            "{} has {} rows, {} has {} queries",
            gt_path.display(),
            gt.n,
            queries_path.display(),
            queries.n()
        )));
    }
    if gt.k < a.k {
        return Err(CliError::Input(format!(
            "{} has {} neighbours per query, --k is {}",
            gt_path.display(),
            gt.k,
            a.k
        )));
    }
    if a.k == 0 || a.k > searchd_engine::MAX_K {
        return Err(CliError::Input(format!(
            "--k must be between 1 and {}",
            searchd_engine::MAX_K
        )));
    }
    if let Some(bad) = gt
        .data
        .iter()
        .find(|&&id| id < 0 || id as usize >= index.len())
    {
        return Err(CliError::Input(format!(
            "{}: id {bad} is out of range for an index of {} vectors",
            gt_path.display(),
            index.len()
        )));
    }
    let info = index.info();
    println!(
        "index {} ({} x {}, {}, {}), {} queries, k={}",
        index_dir.display(),
        info.n,
        info.dim,
        info.kind.name(),
        info.metric,
        queries.n(),
        a.k
    );
    println!(
        "{:>6} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>12}",
        "ef",
        "recall@1",
        "recall@10",
        "recall@100",
        "qps(1 thr)",
        "p50 us",
        "p99 us",
        "qps(all thr)"
    );
    let fmt = |r: Option<f64>| r.map_or("-".to_string(), |v| format!("{v:.4}"));
    let nprobes: Vec<Option<usize>> = if a.nprobe.is_empty() {
        vec![None]
    } else {
        a.nprobe.iter().map(|&n| Some(n as usize)).collect()
    };
    let mut rows = Vec::new();
    for (i, nprobe) in nprobes.into_iter().enumerate() {
        if let Some(n) = nprobe {
            println!("nprobe {n}:");
        }
        let cfg = eval::EvalConfig {
            k: a.k,
            efs: a.ef.iter().map(|&e| e as usize).collect(),
            threads: a.threads,
            min_seconds: a.min_seconds,
            oversample: a.oversample,
            nprobe,
            cold_seconds: if i == 0 { a.cold_seconds } else { 0.0 },
        };
        rows.extend(eval::evaluate_checked(
            &index,
            checker.as_ref().unwrap_or(&index),
            queries.as_slice(),
            &gt.data,
            gt.k,
            &cfg,
            |r| {
                if let Some(c) = &r.cold {
                    println!(
                        "cold: {} queries in {:.1} s on one thread ({:.1} q/s), p50 {:.0} us, p99 {:.0} us",
                        c.queries, c.seconds, c.qps, c.p50_us, c.p99_us
                    );
                }
                println!(
                    "{:>6} {:>9} {:>9} {:>9} {:>11.0} {:>9.0} {:>9.0} {:>12.0}",
                    r.ef,
                    fmt(r.recall_at_1),
                    fmt(r.recall_at_10),
                    fmt(r.recall_at_100),
                    r.qps_1thread,
                    r.p50_us,
                    r.p99_us,
                    r.qps_all_threads
                );
            },
        )?);
    }
    let process = util::process_memory();
    let partitions = index.partition_stats();
    if let Some(s) = &partitions {
        println!(
            "partitions: {} of {} resident ({:.1} MiB{}), {} loads (mean {:.2} ms, max {:.1} ms), {} evictions, {} probes skipped",
            s.resident,
            s.partitions,
            s.resident_bytes as f64 / (1 << 20) as f64,
            s.budget_bytes
                .map_or(String::new(), |b| format!(" of a {:.1} MiB budget", b as f64 / (1 << 20) as f64)),
            s.loads,
            1e3 * s.load_seconds / s.loads.max(1) as f64,
            1e3 * s.max_load_seconds,
            s.evictions,
            s.skipped_probes
        );
    }
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "schema": "searchd.eval.v1",
            "index": info,
            "partitions": partitions,
            "k": a.k,
            "queries": queries.n(),
            "threads": rows.first().map(|r| r.threads),
            "kernels": searchd_kernels::implementation(),
            "rows": rows,
            "process": process,
        });
        write_json(path, &doc)?;
    }
    if let Some(path) = &a.html {
        let page = eval_page(index_dir, info, a.k, queries.n(), &rows)?;
        std::fs::write(path, page)
            .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    }
    summary("eval done", started);
    Ok(())
}

/// `searchd load`: run, print the table, write the requested files. A report is printed
/// and written whatever the outcome; the exit status then says it: 0 when some step met
/// the SLO, 1 when none did or the run was aborted, 130 after Ctrl-C (the first Ctrl-C
/// ends the run early, a second one exits at once).
pub fn load(flags: &crate::flags::load::LoadArgs) -> CmdResult {
    let started = Instant::now();
    let a = &flags.config().map_err(CliError::Input)?;
    let stop = searchd_load::interrupt::install();
    let report = match searchd_load::run_blocking_with_stop(a, stop) {
        Ok(r) => r,
        Err(searchd_load::LoadError::SloFailed { report, .. }) => *report,
        Err(e) => {
            return Err(match e.exit_code() {
                2 => CliError::Input(e.to_string()),
                _ => CliError::Failed(e.to_string()),
            })
        }
    };
    {
        let mut out = std::io::stdout().lock();
        searchd_load::print_table(&report, &mut out)
            .map_err(|e| CliError::Failed(format!("cannot print the table: {e}")))?;
    }
    searchd_load::write_outputs(&report, a).map_err(|e| CliError::Failed(e.to_string()))?;
    summary("load done", started);
    match searchd_load::exit_status(&report) {
        0 => Ok(()),
        130 => {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            eprintln!("error: interrupted (Ctrl-C); the reports hold the finished steps");
            std::process::exit(130)
        }
        _ => Err(CliError::Failed(searchd_load::report::verdict(&report))),
    }
}
