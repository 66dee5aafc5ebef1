//! Server and client resource usage per step.

use std::time::Duration;

use crate::client::{get_once, Target};

/// Where server RSS / CPU come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerSource {
    /// The target's `GET /stats` (`process.rss_bytes`, `process.cpu_seconds`).
    Stats,
    /// `/proc/PID/status` and `/proc/PID/stat` of `--server-pid`.
    Proc(u32),
    /// No server numbers.
    None,
}

impl ServerSource {
    /// Short name: `stats`, `proc` or `none`.
    pub fn name(&self) -> &'static str {
        match self {
            ServerSource::Stats => "stats",
            ServerSource::Proc(_) => "proc",
            ServerSource::None => "none",
        }
    }
}

/// One reading of the server's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerSample {
    /// Resident set size in bytes.
    pub rss_bytes: Option<u64>,
    /// CPU seconds (user + system) used so far.
    pub cpu_seconds: Option<f64>,
}

/// What `GET /stats` told us (None fields when absent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatsInfo {
    /// `process.rss_bytes` and `process.cpu_seconds`.
    pub sample: ServerSample,
    /// `index.n`: vectors in the index.
    pub index_n: Option<u64>,
    /// `index.metric` ("cosine", "ip", "l2").
    pub index_metric: Option<String>,
}

/// Parse the parts of a `/stats` body we use.
pub fn parse_stats(body: &[u8]) -> Option<StatsInfo> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let p = v.get("process");
    Some(StatsInfo {
        sample: ServerSample {
            rss_bytes: p.and_then(|p| p.get("rss_bytes")).and_then(|x| x.as_u64()),
            cpu_seconds: p
                .and_then(|p| p.get("cpu_seconds"))
                .and_then(|x| x.as_f64()),
        },
        index_n: v
            .get("index")
            .and_then(|i| i.get("n"))
            .and_then(|x| x.as_u64()),
        index_metric: v
            .get("index")
            .and_then(|i| i.get("metric"))
            .and_then(|x| x.as_str())
            .map(str::to_string),
    })
}

/// Fetch `GET /stats` once.
pub async fn fetch_stats(target: &Target) -> Option<StatsInfo> {
    let body = get_once(target, "/stats", Duration::from_secs(2)).await?;
    parse_stats(&body)
}

/// Decide where server numbers come from: `/stats` when it reports process
/// CPU, else `--server-pid`, else nowhere.
pub async fn detect(target: &Target, pid: Option<u32>) -> (ServerSource, Option<StatsInfo>) {
    let stats = fetch_stats(target).await;
    let src = match (&stats, pid) {
        (Some(s), _) if s.sample.cpu_seconds.is_some() => ServerSource::Stats,
        (_, Some(pid)) => ServerSource::Proc(pid),
        _ => ServerSource::None,
    };
    (src, stats)
}

/// Read the server's counters now.
pub async fn sample(src: ServerSource, target: &Target) -> Option<ServerSample> {
    match src {
        ServerSource::Stats => fetch_stats(target).await.map(|s| s.sample),
        ServerSource::Proc(pid) => proc_sample(pid),
        ServerSource::None => None,
    }
}

/// RSS and CPU seconds of a process from /proc (Linux).
pub fn proc_sample(pid: u32) -> Option<ServerSample> {
    use searchd_os::proc::{self, Of};
    let rss = proc::status(Of::Process(pid)).and_then(|s| s.rss_bytes);
    let cpu = proc::stat(Of::Process(pid)).map(|s| s.cpu_seconds());
    if rss.is_none() && cpu.is_none() {
        return None;
    }
    Some(ServerSample {
        rss_bytes: rss,
        cpu_seconds: cpu,
    })
}

/// Kernel id of the calling thread (Linux), for [`client_cpu_seconds`].
pub fn current_tid() -> Option<i32> {
    searchd_os::gettid()
}

/// CPU seconds used so far by the load generator's client threads `tids` (from
/// /proc/self/task/TID/stat), so a server in the same process is not counted as client
/// work. Falls back to the whole process when the threads are unknown or unreadable.
pub fn client_cpu_seconds(tids: &[i32]) -> f64 {
    use searchd_os::proc::{self, Of};
    if !tids.is_empty() {
        let per: Option<Vec<f64>> = tids
            .iter()
            .map(|&t| proc::stat(Of::Thread(t)).map(|s| s.cpu_seconds()))
            .collect();
        if let Some(per) = per {
            return per.iter().sum();
        }
    }
    self_cpu_seconds()
}

/// CPU seconds (user + system) used so far by this process.
pub fn self_cpu_seconds() -> f64 {
    searchd_os::process_cpu_seconds()
}

/// Cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
