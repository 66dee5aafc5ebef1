//! A step's figures over its trials: the `Step` of the report from the raw results.

use super::step::StepRaw;
use crate::config::LoadConfig;
use crate::report::{EndpointStep, Endpoints, ServerStep, Step, TrialSpread};
use crate::stats::{
    error_rate, median, new_histogram, new_ns_histogram, percentiles_ms, second_series, send_error,
    slo_pass, spread, ErrorCounts, FirstErrors, Percentiles,
};

pub(super) fn aggregate(raws: &[StepRaw], args: &LoadConfig, names: &[String]) -> Step {
    let first = &raws[0];
    let mut errors = ErrorCounts::default();
    let (mut ok, mut recall_sum, mut recall_n, mut late, mut dropped) = (0, 0.0, 0, 0, 0);
    let mut hist = new_histogram();
    let mut send_ns = new_ns_histogram();
    let mut first_err = FirstErrors::default();
    for r in raws {
        errors.merge(&r.acc.errors);
        first_err.merge(&r.acc.first);
        send_ns
            .add(&r.acc.send_ns)
            .expect("auto-resizing histogram");
        ok += r.acc.ok;
        recall_sum += r.acc.recall_sum;
        recall_n += r.acc.recall_n;
        late += r.late;
        dropped += r.dropped;
        hist.add(&r.acc.hist).expect("auto-resizing histogram");
    }
    let requests = ok + errors.total();
    let er = error_rate(requests, errors.total());
    let qps_v: Vec<f64> = raws.iter().map(|r| r.qps()).collect();
    let rps_v: Vec<f64> = raws
        .iter()
        .map(|r| r.acc.requests() as f64 / r.window_s)
        .collect();
    let per: Vec<Percentiles> = raws.iter().map(|r| percentiles_ms(&r.acc.hist)).collect();
    let med = |f: fn(&Percentiles) -> Option<f64>| {
        let v: Vec<f64> = per.iter().filter_map(f).collect();
        median(&v)
    };
    let latency_ms = if raws.len() == 1 {
        per[0]
    } else {
        Percentiles {
            p50: med(|p| p.p50),
            p95: med(|p| p.p95),
            p99: med(|p| p.p99),
            p999: med(|p| p.p999),
            max: per.iter().filter_map(|p| p.max).reduce(f64::max),
            mean: med(|p| p.mean),
        }
    };
    let p99_v: Vec<f64> = per.iter().filter_map(|p| p.p99).collect();
    let srv_cpu: Vec<f64> = raws.iter().filter_map(|r| r.server.cpu_pct).collect();
    let partial = raws.iter().any(|r| r.partial);
    // The per-second series of the first trial (trials are repeats of the same step).
    let mut samples = first_samples(raws);
    let per_second = second_series(&mut samples);
    let cli_cpu: Vec<f64> = raws.iter().map(|r| r.client_cpu_pct).collect();
    Step {
        concurrency: first.concurrency,
        measure_start_unix_s: first.measure_start_unix_s,
        rate: first.rate,
        duration_s: median(&raws.iter().map(|r| r.window_s).collect::<Vec<_>>()).unwrap_or(0.0),
        requests,
        ok,
        errors,
        error_rate: er,
        qps: median(&qps_v).unwrap_or(0.0),
        latency_ms,
        recall_at_k: (recall_n > 0).then(|| recall_sum / recall_n as f64),
        server: ServerStep {
            rss_bytes: raws.iter().filter_map(|r| r.server.rss_bytes).max(),
            cpu_pct: median(&srv_cpu),
            source: first.server.source.clone(),
        },
        slo_pass: !partial
            && slo_pass(ok, latency_ms.p99, er, args.slo_p99_ms, args.max_error_rate),
        partial,
        first_errors: first_err,
        send_error_us: send_error(&send_ns),
        per_second,
        rps: median(&rps_v).unwrap_or(0.0),
        late,
        dropped,
        client_cpu_pct: median(&cli_cpu).unwrap_or(0.0),
        client_saturated: raws.iter().any(|r| r.client_saturated),
        trials: TrialSpread {
            n: raws.len() as u32,
            qps: spread(&qps_v).expect("at least one trial"),
            p99_ms: spread(&p99_v),
        },
        note: raws.iter().find_map(|r| r.note.clone()),
        endpoints: endpoint_steps(raws, names),
        hist,
    }
}

pub(super) fn first_samples(raws: &[StepRaw]) -> Vec<u64> {
    raws.first()
        .map(|r| r.acc.samples.clone())
        .unwrap_or_default()
}

/// Per-endpoint figures (`--mix`) over trials: counts summed, latency percentiles and
/// qps the median over trials (max: the largest).
pub(super) fn endpoint_steps(raws: &[StepRaw], names: &[String]) -> Endpoints {
    let mut out = Vec::with_capacity(names.len());
    for (e, name) in names.iter().enumerate() {
        let mut errors = ErrorCounts::default();
        let mut ok = 0;
        let mut per = Vec::new();
        let mut qps = Vec::new();
        for r in raws {
            let Some(a) = r.acc.eps.get(e) else { continue };
            errors.merge(&a.errors);
            ok += a.ok;
            per.push(percentiles_ms(&a.hist));
            qps.push(a.ok as f64 / r.window_s.max(1e-9));
        }
        let med = |f: fn(&Percentiles) -> Option<f64>| {
            let v: Vec<f64> = per.iter().filter_map(f).collect();
            median(&v)
        };
        out.push((
            name.clone(),
            EndpointStep {
                requests: ok + errors.total(),
                ok,
                errors: errors.total(),
                error_kinds: errors.iter().filter(|(_, n)| *n > 0).collect(),
                p50_ms: med(|p| p.p50),
                p95_ms: med(|p| p.p95),
                p99_ms: med(|p| p.p99),
                mean_ms: med(|p| p.mean),
                max_ms: per.iter().filter_map(|p| p.max).reduce(f64::max),
                qps: median(&qps).unwrap_or(0.0),
            },
        ));
    }
    Endpoints(out)
}
