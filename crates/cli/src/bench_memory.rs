//! `searchd bench memory`: how search behaves when memory is short.
//!
//! For each cap, a child process runs `searchd eval` inside its own memory cgroup (v2 if
//! the machine's unified hierarchy has the memory controller, v1 otherwise), so what the
//! cap limits is exactly what the searcher touches: its anonymous memory and the page-cache
//! pages it faults in. The page cache is dropped before every run when this process may
//! (root), so each run starts cold and pages cached by an earlier run, which the kernel
//! charges to the cgroup that first touched them, cannot make a small cap look big.
//!
//! The child joins the cgroup before it execs (`sh -c 'echo $$ > cgroup.procs; exec ...'`),
//! so nothing it allocates escapes the cap.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use crate::commands::OpenArgs;
use crate::util::write_json;
use crate::util::{summary, CliError, CmdResult};

#[derive(Args, Debug)]
pub struct MemoryArgs {
    /// Index directory.
    #[arg(long)]
    pub index: PathBuf,
    /// Query vectors.
    #[arg(long)]
    pub queries: PathBuf,
    /// Exact neighbour ids (from `searchd gt`).
    #[arg(long)]
    pub gt: PathBuf,
    /// Memory caps in MB, comma-separated; `max` runs without a cap (still in a cgroup, so
    /// its peak is measured the same way).
    #[arg(long, value_delimiter = ',', required = true)]
    pub limits_mb: Vec<String>,
    /// HNSW candidate list size.
    #[arg(long, default_value_t = 64)]
    pub ef: u16,
    /// Neighbours per query.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Threads of the all-thread pass (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Minimum seconds of each timed pass in the child.
    #[arg(long, default_value_t = 5.0)]
    pub min_seconds: f64,
    /// Quantized indexes: rescore the best X*k candidates.
    #[arg(long)]
    pub oversample: Option<f32>,
    /// Partitioned indexes: partitions probed per search (default: the index's).
    #[arg(long)]
    pub nprobe: Option<u32>,
    /// A run that takes longer than this is killed and reported as timed out (a cap far
    /// below the working set can make every query a disk read).
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
    /// Seconds of the cold pass of each run (`eval --cold-seconds`): one thread searches
    /// straight after the index opens in the child, the page cache dropped first; rows
    /// carry `cold` next to the warm figures. 0: none.
    #[arg(long, default_value_t = 0.0)]
    pub cold_seconds: f64,
    /// Keep the page cache between runs (by default it is dropped when allowed).
    #[arg(long)]
    pub no_drop_caches: bool,
    /// Cgroup directory to create the per-run cgroups under (default: the root of the
    /// memory hierarchy found).
    #[arg(long)]
    pub cgroup_parent: Option<PathBuf>,
    /// Write the searchd.bench-memory.v1 JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub open: OpenArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Version {
    V1,
    V2,
}

/// One memory cgroup made for one run; removed on drop.
struct Cgroup {
    path: PathBuf,
    version: Version,
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The `oom_kill` counter of a cgroup (`memory.events` in v2, `memory.oom_control` in v1).
fn oom_kills(cg: &Cgroup) -> u64 {
    let file = match cg.version {
        Version::V2 => "memory.events",
        Version::V1 => "memory.oom_control",
    };
    std::fs::read_to_string(cg.path.join(file))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Find a memory cgroup hierarchy this process can create groups in.
fn find_hierarchy(parent: Option<&Path>) -> Result<(PathBuf, Version), CliError> {
    let v2_root = Path::new("/sys/fs/cgroup");
    let has_v2_memory = |p: &Path| {
        std::fs::read_to_string(p.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "memory"))
    };
    let candidates: Vec<(PathBuf, Version)> = match parent {
        Some(p) if p.join("cgroup.controllers").exists() => vec![(p.to_path_buf(), Version::V2)],
        Some(p) => vec![(p.to_path_buf(), Version::V1)],
        None => {
            let mut c = Vec::new();
            if has_v2_memory(v2_root) {
                c.push((v2_root.to_path_buf(), Version::V2));
            }
            let v1 = v2_root.join("memory");
            if v1.join("memory.limit_in_bytes").exists() {
                c.push((v1, Version::V1));
            }
            c
        }
    };
    let mut tried = Vec::new();
    for (dir, version) in candidates {
        let probe = dir.join(format!("searchd-probe-{}", std::process::id()));
        match std::fs::create_dir(&probe) {
            Ok(()) => {
                let limit_file = match version {
                    Version::V2 => "memory.max",
                    Version::V1 => "memory.limit_in_bytes",
                };
                let usable = probe.join(limit_file).exists();
                let _ = std::fs::remove_dir(&probe);
                if usable {
                    return Ok((dir, version));
                }
                tried.push(format!(
                    "{} (no {limit_file} in a new group; for v2 enable +memory in cgroup.subtree_control)",
                    dir.display()
                ));
            }
            Err(e) => tried.push(format!("{} ({e})", dir.display())),
        }
    }
    Err(CliError::Input(if tried.is_empty() {
        "no memory cgroup hierarchy found (looked for /sys/fs/cgroup with the memory \
         controller, v2, and /sys/fs/cgroup/memory, v1); pass --cgroup-parent"
            .into()
    } else {
        format!(
            "cannot create a memory cgroup: tried {}; run as root or delegate a cgroup to \
             this user and pass it as --cgroup-parent",
            tried.join(", ")
        )
    }))
}

impl Cgroup {
    fn create(
        parent: &Path,
        version: Version,
        name: &str,
        limit: Option<u64>,
    ) -> Result<Cgroup, CliError> {
        let path = parent.join(name);
        if path.exists() {
            let _ = std::fs::remove_dir(&path);
        }
        std::fs::create_dir(&path)
            .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
        let cg = Cgroup { path, version };
        let set = |file: &str, value: &str| {
            write(&cg.path.join(file), value)
                .map_err(|e| CliError::Input(format!("{}: {e}", cg.path.join(file).display())))
        };
        if let Some(bytes) = limit {
            match version {
                Version::V2 => {
                    set("memory.max", &bytes.to_string())?;
                    // No swap: the cap is on memory, not a push into swap.
                    if cg.path.join("memory.swap.max").exists() {
                        set("memory.swap.max", "0")?;
                    }
                }
                Version::V1 => {
                    set("memory.limit_in_bytes", &bytes.to_string())?;
                    if cg.path.join("memory.memsw.limit_in_bytes").exists() {
                        // Fails harmlessly where swap accounting is off.
                        let _ = set("memory.memsw.limit_in_bytes", &bytes.to_string());
                    }
                }
            }
        }
        Ok(cg)
    }

    /// Highest memory charged to the group (v2 `memory.peak` needs Linux 5.19).
    fn peak(&self) -> Option<u64> {
        match self.version {
            Version::V2 => read_u64(&self.path.join("memory.peak")),
            Version::V1 => read_u64(&self.path.join("memory.max_usage_in_bytes")),
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // The group is empty once the child is reaped; the kernel may need a moment to
        // notice.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::warn!("could not remove cgroup {}", self.path.display());
    }
}

/// Drop clean page-cache pages (needs root); false if not allowed.
fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    write(Path::new("/proc/sys/vm/drop_caches"), "3").is_ok()
}

/// One cap's outcome: the `searchd.bench-memory.v1` row.
#[derive(Debug, Clone, Serialize)]
struct Row {
    /// Cap in MB (`None`: no cap).
    limit_mb: Option<u64>,
    /// `ok`, `oom-killed`, `timeout` or `failed`.
    outcome: String,
    killed: bool,
    recall_at_10: Option<f64>,
    qps_1thread: Option<f64>,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    qps_all_threads: Option<f64>,
    /// The child's resident set at the end, and its peak.
    rss_bytes: Option<u64>,
    peak_rss_bytes: Option<u64>,
    /// Highest memory the cgroup was charged (resident set plus page cache it faulted in).
    cgroup_peak_bytes: Option<u64>,
    major_faults: Option<u64>,
    minor_faults: Option<u64>,
    seconds: f64,
    /// Last lines the child wrote to stderr, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Partitioned indexes: the graph manager's loads, evictions and resident bytes at
    /// the end of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    partitions: Option<serde_json::Value>,
    /// The cold pass (`--cold-seconds`): queries, qps, p50_us, p99_us.
    #[serde(skip_serializing_if = "Option::is_none")]
    cold: Option<serde_json::Value>,
}

fn parse_limit(s: &str) -> Result<Option<u64>, CliError> {
    let s = s.trim();
    if s == "max" || s == "none" {
        return Ok(None);
    }
    match s.parse::<u64>() {
        Ok(mb) if mb >= 1 => Ok(Some(mb)),
        _ => Err(CliError::Input(format!(
            "--limits-mb takes whole megabytes >= 1 or `max`, got {s:?}"
        ))),
    }
}

pub fn run(a: &MemoryArgs) -> CmdResult {
    let started = Instant::now();
    let limits: Vec<Option<u64>> = a
        .limits_mb
        .iter()
        .map(|s| parse_limit(s))
        .collect::<Result<_, _>>()?;
    // Only the manifest is read here: opening the index in this process would fault its
    // pages into the page cache under this process's cgroup, not the child's.
    let manifest = searchd_engine::format::Manifest::read(&a.index)?;
    let index_bytes: u64 = manifest.files.iter().map(|f| f.bytes).sum();
    for p in [&a.queries, &a.gt] {
        if !p.exists() {
            return Err(CliError::Input(format!("{}: no such file", p.display())));
        }
    }
    let (parent, version) = find_hierarchy(a.cgroup_parent.as_deref())?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Input(format!("cannot find the searchd executable: {e}")))?;
    let work = std::env::temp_dir().join(format!("searchd-bench-memory-{}", std::process::id()));
    std::fs::create_dir_all(&work)
        .map_err(|e| CliError::Input(format!("{}: {e}", work.display())))?;
    let _cleanup = RemoveDir(work.clone());

    println!(
        "index {} ({}, {} x {}, {:.0} MB on disk), ef={}, k={}, vectors={} graph={} codes={}, cgroup {:?} under {}",
        a.index.display(),
        manifest.kind,
        manifest.n,
        manifest.dim,
        index_bytes as f64 / 1e6,
        a.ef,
        a.k,
        a.open.vectors,
        a.open.graph.as_deref().unwrap_or("default"),
        a.open.codes.as_deref().unwrap_or("default"),
        version,
        parent.display()
    );
    println!(
        "{:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "cap MB",
        "outcome",
        "recall@10",
        "qps(1)",
        "p50 us",
        "p99 us",
        "RSS MB",
        "peak MB",
        "cg peak MB",
        "maj faults"
    );
    let mut rows = Vec::new();
    let mut dropped_all = !a.no_drop_caches;
    for (i, limit) in limits.iter().enumerate() {
        if !a.no_drop_caches && !drop_caches() {
            if dropped_all {
                tracing::warn!("cannot drop the page cache (needs root): runs may start warm");
            }
            dropped_all = false;
        }
        let row = run_one(a, &exe, &work, &parent, version, i, *limit)?;
        let mb = |b: Option<u64>| b.map_or("-".into(), |b| format!("{:.0}", b as f64 / 1e6));
        let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |v| format!("{v:.p$}"));
        println!(
            "{:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
            limit.map_or("none".into(), |l| l.to_string()),
            row.outcome,
            f(row.recall_at_10, 4),
            f(row.qps_1thread, 0),
            f(row.p50_us, 0),
            f(row.p99_us, 0),
            mb(row.rss_bytes),
            mb(row.peak_rss_bytes),
            mb(row.cgroup_peak_bytes),
            row.major_faults.map_or("-".into(), |v| v.to_string()),
        );
        if let Some(c) = &row.cold {
            println!(
                "{:>8} cold: {} queries, {:.1} q/s, p50 {:.0} us, p99 {:.0} us (the first {:.0} s)",
                "",
                c["queries"],
                c["qps"].as_f64().unwrap_or(0.0),
                c["p50_us"].as_f64().unwrap_or(0.0),
                c["p99_us"].as_f64().unwrap_or(0.0),
                c["seconds"].as_f64().unwrap_or(0.0)
            );
        }
        rows.push(row);
    }
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "schema": "searchd.bench-memory.v1",
            "index": a.index,
            "kind": manifest.kind,
            "n": manifest.n,
            "dim": manifest.dim,
            "params": manifest.params,
            "index_bytes": index_bytes,
            "files": manifest.files.iter().map(|f| (f.name.clone(), f.bytes)).collect::<std::collections::BTreeMap<_, _>>(),
            "placement": {
                "vectors": a.open.vectors,
                "graph": a.open.graph,
                "codes": a.open.codes,
                "populate": a.open.populate,
            },
            "ef": a.ef,
            "k": a.k,
            "oversample": a.oversample,
            "nprobe": a.nprobe,
            "memory_budget": a.open.memory_budget,
            "min_seconds": a.min_seconds,
            "cold_seconds": a.cold_seconds,
            "cgroup": { "version": version, "parent": parent },
            "page_cache_dropped": dropped_all,
            "rows": rows,
        });
        write_json(path, &doc)?;
    }
    summary("bench memory done", started);
    Ok(())
}

struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_one(
    a: &MemoryArgs,
    exe: &Path,
    work: &Path,
    parent: &Path,
    version: Version,
    i: usize,
    limit_mb: Option<u64>,
) -> Result<Row, CliError> {
    let name = format!("searchd-bench-{}-{i}", std::process::id());
    let cg = Cgroup::create(parent, version, &name, limit_mb.map(|m| m * 1_000_000))?;
    let json = work.join(format!("eval-{i}.json"));
    let stderr_path = work.join(format!("eval-{i}.stderr"));
    let stderr = std::fs::File::create(&stderr_path)
        .map_err(|e| CliError::Input(format!("{}: {e}", stderr_path.display())))?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
        .arg(&cg.path)
        .arg(exe)
        .arg("eval")
        .arg("--index")
        .arg(&a.index)
        .arg("--queries")
        .arg(&a.queries)
        .arg("--gt")
        .arg(&a.gt)
        .args(["--k", &a.k.to_string()])
        .args(["--ef", &a.ef.to_string()])
        .args(["--threads", &a.threads.to_string()])
        .args(["--min-seconds", &a.min_seconds.to_string()])
        .arg("--json")
        .arg(&json)
        .args(["--vectors", &a.open.vectors])
        // Verifying checksums reads every byte of every file once, which would fault the
        // whole index in; it is not what is measured here.
        .arg("--no-verify");
    if let Some(g) = &a.open.graph {
        cmd.args(["--graph", g]);
    }
    if let Some(c) = &a.open.codes {
        cmd.args(["--codes", c]);
    }
    if a.open.populate {
        cmd.arg("--populate");
    }
    if let Some(x) = a.oversample {
        cmd.args(["--oversample", &x.to_string()]);
    }
    if let Some(x) = a.nprobe {
        cmd.args(["--nprobe", &x.to_string()]);
    }
    if let Some(b) = a.open.memory_budget {
        cmd.args(["--memory-budget", &b.to_string()]);
    }
    if a.cold_seconds > 0.0 {
        cmd.args(["--cold-seconds", &a.cold_seconds.to_string()]);
    }
    let t = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .env("SEARCHD_LOG", "warn")
        .spawn()
        .map_err(|e| CliError::Input(format!("cannot start the child process: {e}")))?;
    let deadline = t + Duration::from_secs(a.timeout_s);
    let (status, timed_out) = loop {
        match child.try_wait() {
            Ok(Some(s)) => break (Some(s), false),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                break (child.wait().ok(), true);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(CliError::Failed(format!("waiting for the child: {e}"))),
        }
    };
    let seconds = t.elapsed().as_secs_f64();
    let oom = oom_kills(&cg) > 0;
    #[cfg(unix)]
    let signalled = status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s));
    #[cfg(not(unix))]
    let signalled: Option<i32> = None;
    let ok = status.is_some_and(|s| s.success());
    let outcome = if timed_out {
        "timeout"
    } else if oom || signalled == Some(9) {
        "oom-killed"
    } else if ok {
        "ok"
    } else {
        "failed"
    };
    let doc: Option<serde_json::Value> = if ok {
        std::fs::read_to_string(&json)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
    } else {
        None
    };
    let row0 = doc.as_ref().map(|d| &d["rows"][0]);
    let num = |key: &str| row0.and_then(|r| r[key].as_f64());
    let proc_u64 = |key: &str| doc.as_ref().and_then(|d| d["process"][key].as_u64());
    let error = (outcome == "failed").then(|| {
        let text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(3).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    });
    Ok(Row {
        limit_mb,
        outcome: outcome.into(),
        killed: outcome == "oom-killed" || outcome == "timeout",
        recall_at_10: num("recall_at_10"),
        qps_1thread: num("qps_1thread"),
        p50_us: num("p50_us"),
        p99_us: num("p99_us"),
        qps_all_threads: num("qps_all_threads"),
        rss_bytes: proc_u64("rss_bytes"),
        peak_rss_bytes: proc_u64("peak_rss_bytes"),
        cgroup_peak_bytes: cg.peak(),
        major_faults: proc_u64("major_faults"),
        minor_faults: proc_u64("minor_faults"),
        seconds,
        error,
        partitions: doc
            .as_ref()
            .map(|d| d["partitions"].clone())
            .filter(|p| !p.is_null()),
        cold: row0.map(|r| r["cold"].clone()).filter(|c| !c.is_null()),
    })
}
