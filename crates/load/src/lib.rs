//! `searchd-load`: capacity measurement for servers speaking the searchd
//! HTTP API (`searchd load`).
//!
//! The discipline it enforces: warm up before measuring, rotate queries,
//! stop the ramp at the SLO, keep sustainable / peak / fixed-body numbers
//! apart, and check every answer.
//!
//! ```no_run
//! let args = searchd_load::LoadConfig::new("http://127.0.0.1:8080");
//! let report = searchd_load::run_blocking(&args)?;
//! searchd_load::print_table(&report, &mut std::io::stdout())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod bodies;
pub mod check;
pub mod client;
pub mod client_mode;
pub mod config;
pub mod endpoint;
pub mod error;
pub mod gt;
pub mod html;
pub mod interrupt;
pub mod mix;
pub mod report;
pub mod resources;
mod runner;
pub mod stats;
pub mod tls;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use config::{CacheMode, Endpoint, LoadConfig, Pick, Ramp, Rates, RetryAfter};
pub use error::LoadError;
pub use report::{
    print_table, Best, Config, EndpointStep, Endpoints, MixInfo, Report, ServerStep, Step,
    TrialSpread, SCHEMA,
};
pub use runner::Level;
pub use stats::{ErrorKind, Percentiles, Spread};

/// One request to `url` (`http://host:port`, or `https://host:port` trusted through the
/// system CA bundle) on a fresh connection, with a 10 s timeout: `(status, body)`. For
/// checks around a run (readiness, a document), not for load.
pub async fn simple_request(
    url: &str,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<(u16, Vec<u8>), LoadError> {
    let endpoint = config::parse_endpoint(&format!("{method} {path}")).map_err(LoadError::usage)?;
    let mut target = client::Target::new(url, &endpoint, None)?;
    target.resolve().await;
    client::request_simple(
        &target,
        &endpoint.method,
        path,
        body.as_deref(),
        std::time::Duration::from_secs(10),
    )
    .await
    .map(|(s, b)| (s, b.to_vec()))
    .map_err(|m| LoadError::usage(format!("{method} {url}{path}: {m}")))
}

/// Run the measurement described by `args` until it finishes (see [`run_with_stop`]). Requests are sent from
/// `--threads` dedicated client threads (one single-threaded runtime each,
/// connections split among them); the calling runtime only paces steps,
/// draws progress and samples resources. Target failures are counted in the report,
/// not returned as errors; see [`LoadError`] for what is.
///
/// With `--fail-on-slo` and no passing step this returns
/// [`LoadError::SloFailed`], which still carries the full report.
pub async fn run(args: &LoadConfig) -> Result<Report, LoadError> {
    runner::run_impl(args, Arc::new(AtomicBool::new(false))).await
}

/// [`run`], stopping early once `stop` is set: the current step ends at once (its
/// measured part kept and marked `partial`), no further step starts, and the report
/// says `interrupted`. [`interrupt::install`] sets such a flag on the first Ctrl-C.
pub async fn run_with_stop(args: &LoadConfig, stop: Arc<AtomicBool>) -> Result<Report, LoadError> {
    runner::run_impl(args, stop).await
}

/// The exit status `searchd load` uses for a finished run: 130 when it was
/// interrupted (Ctrl-C), 1 when it was aborted or no step met the SLO, 0 otherwise.
pub fn exit_status(report: &Report) -> i32 {
    if report.interrupted {
        130
    } else if report.aborted.is_some() || report.sustainable.is_none() {
        1
    } else {
        0
    }
}

/// [`run`] on a tokio runtime of its own. (The requests themselves always run
/// on `--threads` client threads of their own, whatever runtime calls [`run`];
/// the calling runtime only paces steps and samples resources.)
pub fn run_blocking(args: &LoadConfig) -> Result<Report, LoadError> {
    run_blocking_with_stop(args, Arc::new(AtomicBool::new(false)))
}

/// [`run_with_stop`] on a tokio runtime of its own.
pub fn run_blocking_with_stop(
    args: &LoadConfig,
    stop: Arc<AtomicBool>,
) -> Result<Report, LoadError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|source| LoadError::Runtime { source })?;
    rt.block_on(run_with_stop(args, stop))
}

fn write_file(path: &Path, data: &[u8]) -> Result<(), LoadError> {
    std::fs::write(path, data).map_err(|source| LoadError::Output {
        path: path.to_path_buf(),
        source,
    })
}

/// Write whichever of `--json`, `--csv`, `--html` were given.
pub fn write_outputs(report: &Report, args: &LoadConfig) -> Result<(), LoadError> {
    if let Some(p) = &args.json {
        let mut s = report::to_json(report);
        s.push('\n');
        write_file(p, s.as_bytes())?;
    }
    if let Some(p) = &args.csv {
        let mut buf = Vec::new();
        report::write_csv(report, &mut buf).expect("write to Vec");
        write_file(p, &buf)?;
    }
    if let Some(p) = &args.html {
        write_file(p, html::render_html(report)?.as_bytes())?;
    }
    Ok(())
}

/// Everything `searchd load` does: run (own runtime), print the table to
/// stdout, write the requested files. On [`LoadError::SloFailed`] the table
/// is printed and the files are written before the error is returned. The
/// caller maps errors to an exit status with [`LoadError::exit_code`].
pub fn run_cli(args: &LoadConfig) -> Result<Report, LoadError> {
    let result = run_blocking_with_stop(args, interrupt::install());
    let report = match &result {
        Ok(r) => r,
        Err(e) => match e.report() {
            Some(r) => r,
            None => return result,
        },
    };
    let mut out = std::io::stdout().lock();
    let _ = print_table(report, &mut out);
    write_outputs(report, args)?;
    result
}
