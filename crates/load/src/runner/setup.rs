//! A run's plan, fixed before any load: the target, the bodies (or the `--mix`
//! schedule), the ground truth checked against the bodies and the server's metric,
//! the preflight, the warnings, and the `Shared` state every worker reads.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::preflight::{preflight, validate};
use super::shared::{init_nonce, ColdParts, ReqParts, Shared};
use crate::bodies::{BodySet, PickShared};
use crate::check::Check;
use crate::client::Target;
use crate::config::{LoadConfig, Pick};
use crate::error::LoadError;
use crate::mix::{build_schedule, read_mix_file, MixLine};
use crate::resources::{self, ServerSource};
use crate::stats::LiveStats;

/// What [`plan`] fixed for the run.
pub(super) struct Plan {
    /// The target, resolved.
    pub(super) target: Target,
    /// What every worker reads.
    pub(super) sh: Arc<Shared>,
    /// Where the server's CPU and RSS come from.
    pub(super) server_src: ServerSource,
    /// `--mix`: each endpoint's lines.
    pub(super) mix_lines: Option<Vec<Vec<MixLine>>>,
    /// How many distinct requests `--pick` chooses from.
    pub(super) pick_n: usize,
    /// `--mix` given.
    pub(super) mixed: bool,
    /// A search endpoint without `--mix` (answers checked as search answers).
    pub(super) search: bool,
    /// One repeated request (`--pick fixed`): the figures are optimistic.
    pub(super) optimistic: bool,
    /// `--mix`: lines over all endpoints.
    pub(super) mix_total_lines: usize,
    /// The hit-count bound (`--n-max`, else the server's index size).
    pub(super) n_count: Option<u64>,
    /// Warnings so far.
    pub(super) warnings: Vec<String>,
}

/// Check the settings, read the bodies, mix files and ground truth, preflight the
/// target, and build the shared state; no load is sent.
pub(super) async fn plan(args: &LoadConfig, stop: Arc<AtomicBool>) -> Result<Plan, LoadError> {
    validate(args)?;
    let url = args.url.trim();
    if url.is_empty() {
        return Err(LoadError::usage(
            "--url is required (e.g. --url http://127.0.0.1:8080)",
        ));
    }
    let mut target = Target::new(url, &args.endpoint, args.ca.as_deref())?;
    // --mix: every endpoint's lines, read before any load.
    let mix_lines: Option<Vec<Vec<MixLine>>> = match &args.mix {
        Some(spec) => Some(
            spec.0
                .iter()
                .map(|m| read_mix_file(&m.file, &args.endpoint))
                .collect::<Result<_, _>>()?,
        ),
        None => None,
    };
    let mixed = mix_lines.is_some();
    let search = args.endpoint.is_search() && !mixed;
    let bodies = match (&args.body_file, search) {
        _ if mixed => BodySet::default(),
        (None, true) if args.text_queries.is_some() => BodySet::from_text_queries(
            args.text_queries
                .as_deref()
                .unwrap_or(std::path::Path::new("")),
            &args.text_field,
            args.k,
            args.ef,
            args.text_mode.as_deref(),
        )?,
        (Some(p), _) => BodySet::from_file(p)?,
        (None, true) => BodySet::generated(args.query_count, args.k, args.ef),
        (None, false) => BodySet::empty(),
    };
    // --mix: the seeded schedule; request i of the run is entry i.
    let schedule = mix_lines.as_ref().map(|ls| {
        let weights: Vec<f64> = args
            .mix
            .as_ref()
            .map(|m| m.0.iter().map(|e| e.weight).collect())
            .unwrap_or_default();
        let lens: Vec<usize> = ls.iter().map(|l| l.len()).collect();
        build_schedule(&weights, &lens, args.seed)
    });
    if let Pick::Fixed(i) = args.pick {
        if let Some(sc) = &schedule {
            if i >= sc.len() {
                return Err(LoadError::usage(format!(
                    "--pick fixed:{i} is out of range: the --mix schedule has {} entries (0..{})",
                    sc.len(),
                    sc.len()
                )));
            }
        } else if i >= bodies.len() && search {
            return Err(LoadError::usage(format!(
                "--pick fixed:{i} is out of range: there are {} bodies (0..{})",
                bodies.len(),
                bodies.len()
            )));
        }
    }
    let mut warnings = Vec::new();
    let gt = match (&args.gt, search) {
        (Some(p), true) => {
            let m = crate::gt::read_ids(p)?;
            let max_q = bodies.qidx.iter().flatten().max().copied();
            if let Some(q) = max_q {
                if q as usize >= m.n {
                    return Err(LoadError::GroundTruth {
                        path: p.clone(),
                        message: format!(
                            "has {} rows but the bodies use qidx up to {q} (lower --query-count?)",
                            m.n
                        ),
                    });
                }
            }
            Some(m)
        }
        (Some(_), false) if mixed => {
            warnings.push("--gt ignored: --mix answers are not checked for recall".into());
            None
        }
        (Some(_), false) => {
            warnings.push(format!(
                "--gt ignored: '{}' carries no queries",
                args.endpoint
            ));
            None
        }
        _ => None,
    };
    target.resolve().await;
    let search_bodies = search && args.body_file.is_none();
    preflight(args, &target, &bodies, search_bodies, &mut warnings).await?;
    let (server_src, stats) = resources::detect(&target, args.server_pid).await;
    if let (Some(p), true, Some(metric)) = (
        &args.gt,
        gt.is_some(),
        stats.as_ref().and_then(|s| s.index_metric.as_deref()),
    ) {
        match crate::gt::read_meta(p) {
            Ok(Some(meta)) => crate::gt::check_metric(p, &meta, metric).map_err(|message| {
                LoadError::GroundTruth {
                    path: p.clone(),
                    message,
                }
            })?,
            Ok(None) => warnings.push(format!(
                "{}: no metric recorded (no {}; files from searchd gt record it): recall assumes it matches the index's {metric}",
                p.display(),
                crate::gt::meta_path(p).display()
            )),
            Err(message) => {
                return Err(LoadError::GroundTruth {
                    path: p.clone(),
                    message,
                })
            }
        }
    }
    let n_count = args.n_max.or(stats.as_ref().and_then(|s| s.index_n));
    let optimistic = matches!(args.pick, Pick::Fixed(_)) && (search || mixed);
    let cold = args.cache == Some(crate::config::CacheMode::Cold);
    let mix_total_lines: usize = mix_lines
        .as_ref()
        .map_or(0, |ls| ls.iter().map(|l| l.len()).sum());
    if optimistic {
        let w = format!(
            "--pick {}: one repeated query lets caches flatter the server; these numbers are OPTIMISTIC and are not a capacity figure (rotate queries: --pick uniform|zipf:S|seq)",
            args.pick
        );
        if !args.quiet {
            eprintln!("warning: {w}");
        }
        warnings.push(w);
    } else if mixed && !cold && mix_total_lines < 100 {
        warnings.push(format!(
            "only {mix_total_lines} distinct --mix requests: caches may flatter the server (--cache cold defeats response caches)"
        ));
    } else if search && !cold && bodies.len() < 100 {
        warnings.push(format!(
            "only {} distinct bodies: caches may flatter the server",
            bodies.len()
        ));
    }
    if args.retry_after == crate::config::RetryAfter::Honor && !args.open_loop() {
        warnings.push(
            "--retry-after honor: a slot answered 503/429 waits Retry-After before its next request, so fewer requests are in flight than the concurrency says".into(),
        );
    }
    if server_src == ServerSource::None {
        warnings.push(
            "no server CPU/RSS: the target has no GET /stats with process counters and no --server-pid was given".into(),
        );
    }

    let mut pick_n = bodies.len();
    let mut requests: Vec<bytes::Bytes> =
        bodies.bodies.iter().map(|b| target.serialize(b)).collect();
    let mut parts: Vec<ReqParts> = Vec::new();
    let mut part_of: Vec<u32> = Vec::new();
    let mut mix_ep: Vec<u16> = Vec::new();
    let mut mix_head: Vec<bool> = Vec::new();
    if let (Some(ls), Some(sc)) = (&mix_lines, &schedule) {
        // One serialised request per distinct line, shared by every entry that sends it.
        let mut uniq: std::collections::HashMap<&MixLine, u32> = std::collections::HashMap::new();
        let mut ser: Vec<bytes::Bytes> = Vec::new();
        let ids: Vec<Vec<u32>> = ls
            .iter()
            .map(|lines| {
                lines
                    .iter()
                    .map(|l| {
                        *uniq.entry(l).or_insert_with(|| {
                            let body = l.body.clone().unwrap_or_default();
                            ser.push(target.serialize_to(&l.method, &l.path, l.with_body(), &body));
                            parts.push(ReqParts {
                                method: l.method.clone(),
                                path: l.path.clone(),
                                with_body: l.with_body(),
                                body,
                            });
                            (parts.len() - 1) as u32
                        })
                    })
                    .collect()
            })
            .collect();
        part_of = sc
            .ep
            .iter()
            .zip(&sc.line)
            .map(|(&e, &l)| ids[e as usize][l as usize])
            .collect();
        requests = part_of.iter().map(|&p| ser[p as usize].clone()).collect();
        mix_ep = sc.ep.clone();
        mix_head = part_of
            .iter()
            .map(|&p| parts[p as usize].method == hyper::Method::HEAD)
            .collect();
        pick_n = sc.len();
    } else if cold {
        parts = bodies
            .bodies
            .iter()
            .map(|b| ReqParts {
                method: target.method.clone(),
                path: target.path().to_string(),
                with_body: target.with_body,
                body: b.clone(),
            })
            .collect();
    }
    if cold {
        init_nonce();
    }
    let sh = Arc::new(Shared {
        target: target.clone(),
        bodies,
        requests,
        check: if mixed {
            Check::Mix
        } else if search && args.text_mode.as_deref() == Some("lexical") {
            Check::SearchUpTo
        } else if search {
            Check::Search
        } else {
            Check::StatusOnly
        },
        gt,
        n_count,
        n_ids: args.n_max,
        request_timeout: args.request_timeout,
        live: LiveStats::new(),
        pick: PickShared::new(args.pick, pick_n),
        honor_retry_after: args.retry_after == crate::config::RetryAfter::Honor,
        mix_ep,
        mix_head,
        mix_names: args
            .mix
            .as_ref()
            .map(|m| m.0.iter().map(|e| e.name.clone()).collect())
            .unwrap_or_default(),
        cold: cold.then_some(ColdParts { parts, part_of }),
        stop: stop.clone(),
    });
    Ok(Plan {
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
        warnings,
    })
}
