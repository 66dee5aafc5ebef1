//! What every demo shares: the recall gate, step lines, the server-and-ramp stage and its
//! load configuration.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::flags::demo::DemoArgs;
use crate::util::CliError;

/// Recall@10 the demo's index must reach at the serving ef, or the demo fails.
pub(crate) const RECALL_GATE: f64 = 0.90;

/// Print a stage line.
pub(crate) fn step(msg: &str) {
    eprintln!("==> {msg}");
}

/// An error about file or directory `p`.
pub(crate) fn dir_err(p: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Input(format!("{}: {e}", p.display()))
}

/// The demo's capacity ramp against `url`: the ramp, warm-up, step length, SLO and query
/// count of `a`; callers set what else they need (`gt`, `endpoint`, `text_queries`).
pub(crate) fn load_config(url: &str, a: &DemoArgs) -> Result<searchd_load::LoadConfig, CliError> {
    use searchd_load::config::{parse_duration, parse_ramp};
    let bad = |what: &str, e: String| CliError::Input(format!("demo load settings: {what}: {e}"));
    let mut c = searchd_load::LoadConfig::new(url);
    c.ramp = parse_ramp(&a.ramp).map_err(|e| bad("--ramp", e))?;
    c.warmup = parse_duration(&a.warmup).map_err(|e| bad("--warmup", e))?;
    c.duration = parse_duration(&a.duration).map_err(|e| bad("--duration", e))?;
    c.slo_p99_ms = a.slo_p99_ms;
    c.query_count = a.queries;
    Ok(c)
}

/// Steps 5 and 6 of a demo: serve `scfg` on a free loopback port in this process (on `rt`),
/// wait for `/ready`, ramp with the demo's load settings against the ground truth in
/// `gt_path`, stop the server and print the table. `about` ends the "listening" line.
pub(crate) fn serve_and_ramp(
    rt: &tokio::runtime::Runtime,
    scfg: searchd_server::ServerConfig,
    a: &DemoArgs,
    gt_path: &Path,
    about: &str,
) -> Result<searchd_load::Report, CliError> {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| CliError::Failed(format!("cannot bind a loopback port: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(searchd_server::serve(scfg, listener, async move {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}");
    wait_ready(addr, Duration::from_secs(120))?;
    eprintln!("    listening on {url}, ready{about}");

    step("6/6 capacity ramp: warm-up, rotating queries, stop at the SLO");
    let mut load_args = load_config(&url, a)?;
    load_args.gt = Some(gt_path.to_path_buf());
    let report = rt.block_on(searchd_load::run(&load_args));
    let _ = stop_tx.send(());
    let _ = rt.block_on(server);
    let report = report.map_err(|e| CliError::Failed(e.to_string()))?;

    println!();
    searchd_load::print_table(&report, &mut std::io::stdout().lock())
        .map_err(|e| CliError::Failed(e.to_string()))?;
    Ok(report)
}

/// Poll `GET /ready` until the in-process server answers 200 (it opens the index after it
/// binds), so the load lab's preflight never meets a 503 `not_ready`.
pub(crate) fn wait_ready(addr: std::net::SocketAddr, limit: Duration) -> Result<(), CliError> {
    use std::io::{Read, Write};
    let t = Instant::now();
    loop {
        let ok = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))
            .and_then(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(2)))?;
                s.write_all(b"GET /ready HTTP/1.1\r\nhost: demo\r\nconnection: close\r\n\r\n")?;
                let mut head = [0u8; 12];
                s.read_exact(&mut head)?;
                Ok(&head == b"HTTP/1.1 200")
            })
            .unwrap_or(false);
        if ok {
            return Ok(());
        }
        if t.elapsed() > limit {
            return Err(CliError::Failed(format!(
                "the demo server on {addr} was not ready after {}s",
                limit.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
