//! A run: its plan (`setup`), then the steps of each trial (`step`, whose workers are in
//! `workers` and count into `acc`), then the report (`aggregate` per step).
//!
//! Modules, lowest first: `shared` (what every worker reads), `acc` (counting one
//! answer), `workers` (request loops and the open-loop dispatcher), `step` (client
//! threads and one step), `aggregate` (a step over trials), `preflight` (checks before
//! any load), `setup` (the plan); this file runs the trials and assembles the report.

mod acc;
mod aggregate;
mod preflight;
mod setup;
mod shared;
mod step;
mod workers;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::time::Instant;

use crate::config::LoadConfig;
use crate::error::LoadError;
use crate::report::{endpoint_line, Best, ClientInfo, Config, MixInfo, Report, Step, SCHEMA};
use crate::resources;
use crate::stats::{best_step, slo_pass};
use aggregate::{aggregate, endpoint_steps};
use setup::{plan, Plan};
pub use step::Level;
use step::{Runner, Shards, StepRaw};

/// The levels of one trial: the open-loop rate(s), else the closed-loop ramp.
fn levels(args: &LoadConfig) -> Vec<Level> {
    if let Some(r) = args.rate {
        vec![Level::Open(r)]
    } else if let Some(rs) = &args.rate_ramp {
        rs.0.iter().map(|&r| Level::Open(r)).collect()
    } else {
        args.ramp.0.iter().copied().map(Level::Closed).collect()
    }
}

/// The whole run (see [`crate::run`]).
pub(crate) async fn run_impl(
    args: &LoadConfig,
    stop: Arc<AtomicBool>,
) -> Result<Report, LoadError> {
    let started = Instant::now();
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let Plan {
        target,
        sh,
        server_src,
        mix_lines,
        pick_n,
        mixed,
        search,
        optimistic,
        mix_total_lines,
        n_count,
        mut warnings,
    } = plan(args, stop.clone()).await?;
    let threads = args.threads.unwrap_or_else(resources::cores).max(1);
    let shards = Shards::start(threads).map_err(|source| LoadError::Runtime { source })?;
    let pb = if args.quiet {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        pb.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("template"));
        pb.enable_steady_tick(Duration::from_millis(120));
        pb
    };
    let mut runner = Runner {
        args,
        sh,
        server_src,
        pb,
        pool: Vec::new(),
        threads,
        shards,
    };

    let lv = levels(args);
    let mut raws: Vec<Vec<StepRaw>> = lv.iter().map(|_| Vec::new()).collect();
    let mut aborted: Option<String> = None;
    let mut interrupted = false;
    'trials: for trial in 0..args.trials {
        for (li, &level) in lv.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'trials;
            }
            let seed = args.seed ^ ((trial as u64) << 40) ^ ((li as u64) << 20);
            let Some(raw) = runner.run_step(level, seed).await else {
                interrupted = true;
                break 'trials;
            };
            let pass = slo_pass(
                raw.acc.ok,
                raw.p99(),
                raw.error_rate(),
                args.slo_p99_ms,
                args.max_error_rate,
            );
            let lvl = match level {
                Level::Closed(c) => format!("c={c:<4}"),
                Level::Open(r) => format!("rate={r:.0}/s"),
            };
            runner.say(format!(
                "{}{lvl} qps {:>9.1}  p99 {:>8} ms  errors {:>5.2}%  {}",
                if args.trials > 1 {
                    format!("trial {}/{} ", trial + 1, args.trials)
                } else {
                    String::new()
                },
                raw.qps(),
                raw.p99()
                    .map(|p| format!("{p:.2}"))
                    .unwrap_or_else(|| "-".into()),
                raw.error_rate() * 100.0,
                if raw.partial {
                    "PARTIAL (interrupted)"
                } else if pass {
                    "ok"
                } else {
                    "SLO broken: ramp stops"
                }
            ));
            for (name, e) in &endpoint_steps(std::slice::from_ref(&raw), &runner.sh.mix_names).0 {
                runner.say(endpoint_line(name, e));
            }
            let all_connect = raw.all_connect_errors();
            let why = raw.acc.connect_err.clone().unwrap_or_default();
            let was_partial = raw.partial;
            raws[li].push(raw);
            if was_partial || stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'trials;
            }
            if all_connect {
                aborted = Some(if li == 0 {
                    format!("no connection to {} could be made: {why}", target.base)
                } else {
                    format!(
                        "{} refused every connection from step {lvl} on: {why}",
                        target.base
                    )
                });
                break 'trials;
            }
            if !pass {
                break;
            }
        }
    }
    runner.pb.finish_and_clear();

    let steps: Vec<Step> = raws
        .iter()
        .filter(|r| !r.is_empty())
        .map(|r| aggregate(r, args, &runner.sh.mix_names))
        .collect();
    let mk = |i: usize| {
        let s: &Step = &steps[i];
        Best {
            concurrency: s.concurrency,
            rate: s.rate,
            qps: s.qps,
            p99_ms: s.latency_ms.p99,
            step: i,
        }
    };
    let sustainable = best_step(&steps, |s| s.qps, |s| s.slo_pass && !s.partial).map(mk);
    // Peak: best QPS regardless of latency, but never a step over the error cap (a step
    // answering half its requests with errors is no throughput figure) nor a partial one.
    let peak = best_step(
        &steps,
        |s| s.qps,
        |s| s.ok > 0 && !s.partial && s.error_rate <= args.max_error_rate,
    )
    .map(mk);
    if interrupted && aborted.is_none() {
        aborted = Some(match steps.iter().find(|s| s.partial) {
            Some(_) => "interrupted by Ctrl-C (SIGINT): the last step is PARTIAL".to_string(),
            None => {
                "interrupted by Ctrl-C (SIGINT) before the next step measured anything".to_string()
            }
        });
    }
    if steps.iter().any(|s| s.client_saturated) {
        warnings.push(
            "the load generator was near its CPU limit in some steps (client_saturated): those numbers may measure the client, not the server".into(),
        );
    }
    let open = args.open_loop();
    let report = Report {
        schema: SCHEMA.to_string(),
        target: target.base.clone(),
        config: Config {
            endpoint: args.endpoint.to_string(),
            ramp: (!open).then(|| args.ramp.0.clone()),
            rates: open.then(|| {
                lv.iter()
                    .filter_map(|l| match l {
                        Level::Open(r) => Some(*r),
                        _ => None,
                    })
                    .collect()
            }),
            warmup_s: args.warmup.as_secs_f64(),
            duration_s: args.duration.as_secs_f64(),
            slo_p99_ms: args.slo_p99_ms,
            max_error_rate: args.max_error_rate,
            queries: (search && args.body_file.is_none() && args.text_queries.is_none())
                .then_some(args.query_count),
            pick: args.pick.to_string(),
            body_file: args.body_file.as_ref().map(|p| p.display().to_string()),
            text_queries: args.text_queries.as_ref().map(|p| p.display().to_string()),
            text_mode: args.text_mode.clone(),
            bodies: if mixed { mix_total_lines } else { pick_n },
            k: args.k,
            ef: args.ef,
            gt: args.gt.as_ref().map(|p| p.display().to_string()),
            n_max: n_count,
            trials: args.trials,
            connections: args.connections,
            late_threshold_ms: args.late_threshold.as_secs_f64() * 1e3,
            request_timeout_s: args.request_timeout.as_secs_f64(),
            seed: args.seed,
            server_pid: args.server_pid,
            fail_on_slo: args.fail_on_slo,
            retry_after: args.retry_after,
        },
        steps,
        sustainable,
        peak,
        mode: if open { "open" } else { "closed" }.into(),
        optimistic,
        aborted,
        interrupted,
        warnings,
        server_source: server_src.name().into(),
        client: ClientInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            cores: resources::cores(),
            threads,
        },
        started_unix_s,
        elapsed_s: started.elapsed().as_secs_f64(),
        cache: args.cache,
        mix: args.mix.as_ref().map(|m| {
            m.0.iter()
                .zip(mix_lines.as_deref().unwrap_or_default())
                .map(|(e, ls)| MixInfo {
                    name: e.name.clone(),
                    file: e.file.display().to_string(),
                    weight: e.weight,
                    lines: ls.len(),
                })
                .collect()
        }),
    };
    if args.fail_on_slo && report.sustainable.is_none() {
        return Err(LoadError::SloFailed {
            slo_p99_ms: args.slo_p99_ms,
            max_error_rate: args.max_error_rate,
            report: Box::new(report),
        });
    }
    Ok(report)
}
