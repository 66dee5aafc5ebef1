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
    None,
}

impl ServerSource {
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
    pub rss_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
}

/// What `GET /stats` told us (None fields when absent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatsInfo {
    pub sample: ServerSample,
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

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// RSS and CPU seconds of a process from /proc (Linux).
pub fn proc_sample(pid: u32) -> Option<ServerSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok();
    let rss = status.as_deref().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    let cpu = stat.as_deref().and_then(parse_proc_stat_cpu);
    if rss.is_none() && cpu.is_none() {
        return None;
    }
    Some(ServerSample {
        rss_bytes: rss,
        cpu_seconds: cpu,
    })
}

/// utime + stime in seconds from the text of /proc/PID/stat.
pub fn parse_proc_stat_cpu(stat: &str) -> Option<f64> {
    // Fields after the command name (which may contain spaces) start at field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

/// Kernel id of the calling thread (Linux), for [`client_cpu_seconds`].
pub fn current_tid() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        Some(unsafe { libc::gettid() })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// CPU seconds used so far by the load generator's client threads `tids` (from
/// /proc/self/task/TID/stat), so a server in the same process is not counted as client
/// work. Falls back to the whole process when the threads are unknown or unreadable.
pub fn client_cpu_seconds(tids: &[i32]) -> f64 {
    if !tids.is_empty() {
        let mut total = 0.0;
        let mut all = true;
        for t in tids {
            match std::fs::read_to_string(format!("/proc/self/task/{t}/stat"))
                .ok()
                .as_deref()
                .and_then(parse_proc_stat_cpu)
            {
                Some(c) => total += c,
                None => all = false,
            }
        }
        if all {
            return total;
        }
    }
    self_cpu_seconds()
}

/// CPU seconds (user + system) used so far by this process.
pub fn self_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return 0.0;
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
}

/// Cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
