//! Small helpers shared by the commands: errors with exit codes, progress bars, file
//! loading with clear messages, and the end-of-command summary line.

use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use searchd_vecio::Vectors;

/// A command's failure and the exit status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input: a file that cannot be read or is malformed, a bad argument value.
    /// Exit status 2, like a usage error.
    #[error("{0}")]
    Input(String),
    /// The command ran but its check failed (recall gate, SLO). Exit status 1.
    #[error("{0}")]
    Failed(String),
    /// An I/O or runtime failure that is not the input's fault (disk full, a read error,
    /// a crashed component). Exit status 3.
    #[error("{0}")]
    Io(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) => 2,
            CliError::Failed(_) => 1,
            CliError::Io(_) => 3,
        }
    }
}

impl From<searchd_vecio::Error> for CliError {
    fn from(e: searchd_vecio::Error) -> Self {
        match e {
            // A missing file is the user's path, not a failing disk.
            searchd_vecio::Error::Io { ref source, .. }
                if source.kind() != std::io::ErrorKind::NotFound =>
            {
                CliError::Io(e.to_string())
            }
            e => CliError::Input(e.to_string()),
        }
    }
}

impl From<searchd_engine::Error> for CliError {
    fn from(e: searchd_engine::Error) -> Self {
        match e {
            // A missing file is the user's path, not a failing disk.
            searchd_engine::Error::Io { ref source, .. }
                if source.kind() != std::io::ErrorKind::NotFound =>
            {
                CliError::Io(e.to_string())
            }
            e => CliError::Input(e.to_string()),
        }
    }
}

pub type CmdResult<T = ()> = Result<T, CliError>;

/// A progress bar on stderr. When stderr is not a terminal (CI, a log file) the bar is
/// not drawn; instead one plain line (`build: 12000/100000 (12.0%), 3400/s, eta 26s`) is
/// printed at the start and then every `SEARCHD_PROGRESS_SECS` seconds (default 5, as ingest),
/// and [`done`] prints the last one (`build: 100000/100000 done in 26.1s, 3800/s`).
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(
            "{prefix:>10} [{bar:40}] {human_pos}/{human_len} {per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb.set_prefix(what.to_string());
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        progress_lines(&pb, what);
    }
    pb
}

/// The end of a [`bar`]'s work: the bar is cleared, and where it was not drawn the plain
/// progress lines end with a `done` line, so a log never stops at `0/N started`.
pub fn done(pb: &ProgressBar) {
    pb.finish_and_clear();
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return;
    }
    let (pos, secs) = (pb.position(), pb.elapsed().as_secs_f64());
    let rate = if secs > 0.0 {
        format!(", {:.0}/s", pos as f64 / secs)
    } else {
        String::new()
    };
    eprintln!(
        "{}: {pos}/{} done in {}{rate}",
        pb.prefix(),
        pb.length().unwrap_or(pos),
        fmt_duration(pb.elapsed())
    );
}

/// Plain progress lines for a bar that is not drawn (see [`bar`]).
fn progress_lines(pb: &ProgressBar, what: &str) {
    let every = std::env::var("SEARCHD_PROGRESS_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .map_or(Duration::from_secs(5), Duration::from_secs_f64);
    let total = pb.length().unwrap_or(0);
    eprintln!("{what}: 0/{total} started");
    let weak = pb.downgrade();
    let what = what.to_string();
    let _ = std::thread::Builder::new()
        .name("searchd-progress".into())
        .spawn(move || {
            let t0 = Instant::now();
            let mut next = every;
            loop {
                std::thread::sleep(Duration::from_millis(100).min(every));
                let Some(pb) = weak.upgrade() else { return };
                if pb.is_finished() {
                    return;
                }
                if t0.elapsed() < next {
                    continue;
                }
                next += every;
                let (pos, len) = (pb.position(), pb.length().unwrap_or(0));
                let secs = t0.elapsed().as_secs_f64().max(1e-9);
                let rate = pos as f64 / secs;
                let eta = if rate > 0.0 && len > pos {
                    format!(
                        ", eta {}",
                        fmt_duration(Duration::from_secs_f64((len - pos) as f64 / rate))
                    )
                } else {
                    String::new()
                };
                let pct = if len > 0 {
                    pos as f64 * 100.0 / len as f64
                } else {
                    0.0
                };
                eprintln!("{what}: {pos}/{len} ({pct:.1}%), {rate:.0}/s{eta}");
            }
        });
}

/// Read a float matrix and reject NaN/infinity with the file and position named.
pub fn load_vectors(path: &Path, hdf5_default: &str) -> CmdResult<Vectors> {
    let v = searchd_vecio::read_vectors_hdf5_default(path, hdf5_default)?;
    if let Some((r, c)) = v.find_non_finite() {
        return Err(CliError::Input(format!(
            "{}: row {r}, column {c} is not a finite number",
            path.display()
        )));
    }
    Ok(v)
}

/// Peak resident memory of this process (VmHWM), in bytes, where /proc has it.
pub fn peak_rss_bytes() -> Option<u64> {
    searchd_os::proc::status(searchd_os::proc::Of::This)?.peak_rss_bytes
}

pub fn human_bytes(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// The one-line summary every long command ends with.
pub fn summary(what: &str, started: Instant) {
    let mem = peak_rss_bytes()
        .map(|b| format!(", peak memory {}", human_bytes(b)))
        .unwrap_or_default();
    eprintln!("{what} in {}{mem}", fmt_duration(started.elapsed()));
}

pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    }
}

/// A rayon pool with `threads` workers (0 = one per core).
pub fn pool(threads: usize) -> CmdResult<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| CliError::Input(format!("cannot start {threads} threads: {e}")))
}

/// Parse a metric name for clap.
pub fn parse_metric(s: &str) -> Result<searchd_engine::Metric, String> {
    searchd_engine::Metric::parse(s).ok_or_else(|| format!("unknown metric {s:?} (cosine, ip, l2)"))
}

/// This process's memory and page faults, from /proc (Linux; `null` fields elsewhere):
/// resident set now and at peak, its anonymous and file-backed parts, and major/minor
/// faults so far. A major fault is a read from disk, the cost that appears once a memory
/// cap no longer holds what a search touches.
pub fn process_memory() -> serde_json::Value {
    use searchd_os::proc::{self, Of};
    let status = proc::status(Of::This).unwrap_or_default();
    let stat = proc::stat(Of::This);
    serde_json::json!({
        "rss_bytes": status.rss_bytes,
        "peak_rss_bytes": status.peak_rss_bytes,
        "rss_anon_bytes": status.rss_anon_bytes,
        "rss_file_bytes": status.rss_file_bytes,
        "minor_faults": stat.map(|s| s.minor_faults),
        "major_faults": stat.map(|s| s.major_faults),
    })
}

/// Write JSON to a temporary file and rename it into place.
pub fn write_json(path: &std::path::Path, doc: &serde_json::Value) -> CmdResult {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let text = serde_json::to_string_pretty(doc).expect("JSON serialises");
    std::fs::write(&tmp, text + "\n")
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            CliError::Input(format!("{}: {e}", path.display()))
        })
}

/// `--index KIND` with its list flags, as `build` and `ingest` take them: the kind and the
/// `BuildConfig::nlist` it builds with (`--partitions` for a partitioned index, `--nlist`
/// otherwise); flags that do not apply to the kind are refused.
pub(crate) fn index_kind(
    index: &str,
    nlist: usize,
    partitions: usize,
    overlap: usize,
) -> Result<(searchd_engine::IndexKind, usize), CliError> {
    let kind = searchd_engine::IndexKind::parse(index).ok_or_else(|| {
        CliError::Input(format!(
            "unknown --index {index:?} (hnsw, flat, ivfpq, partitioned)"
        ))
    })?;
    if kind != searchd_engine::IndexKind::Partitioned && (partitions != 0 || overlap != 0) {
        return Err(CliError::Input(
            "--partitions and --overlap apply to --index partitioned".into(),
        ));
    }
    if kind == searchd_engine::IndexKind::Partitioned && nlist != 0 {
        return Err(CliError::Input(
            "--nlist applies to --index ivfpq; a partitioned index takes --partitions".into(),
        ));
    }
    let lists = if kind == searchd_engine::IndexKind::Partitioned {
        partitions
    } else {
        nlist
    };
    Ok((kind, lists))
}
