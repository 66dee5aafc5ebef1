//! Before any load: the settings checked (`validate`), and one connection (with its TLS
//! handshake for https) and one request to the target (`preflight`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::shared::{init_nonce, NONCE};
use crate::bodies::BodySet;
use crate::client::{connect_tcp, request_once_as, Target, Timer};
use crate::config::{LoadConfig, Pick};
use crate::error::LoadError;
use crate::stats::body_text;

/// How long the preflight waits for a TCP connection before calling the target unreachable.
pub(super) const PREFLIGHT_CONNECT: Duration = Duration::from_millis(800);

/// Before any load: connect once (a closed port or a black-holed host fails here, in
/// under a second; for https a certificate that does not verify fails here too, as
/// [`LoadError::Tls`], within --request-timeout), then send one request on that
/// connection: the body with the largest qidx (so a query matrix with fewer rows than
/// --query-count is refused now, not half-way through) or the first body. A 4xx answer to generated or text-query bodies refuses the run with
/// the server's message; any other failure becomes a warning and the run goes on.
pub(super) async fn preflight(
    args: &LoadConfig,
    target: &Target,
    bodies: &BodySet,
    search_bodies: bool,
    warnings: &mut Vec<String>,
) -> Result<(), LoadError> {
    let unreachable = |message: String| LoadError::Unreachable {
        target: target.base.clone(),
        message,
    };
    let addr = target.addr.clone().map_err(unreachable)?;
    let tcp = match tokio::time::timeout(PREFLIGHT_CONNECT, connect_tcp(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(unreachable(format!("connect {addr}: {e}"))),
        Err(_) => {
            return Err(unreachable(format!(
                "connect {addr}: no answer within {} ms",
                PREFLIGHT_CONNECT.as_millis()
            )))
        }
    };
    let tls_failed = |message: String| LoadError::Tls {
        target: target.base.clone(),
        message,
    };
    let conn = match tokio::time::timeout(args.request_timeout, target.secure(tcp)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(tls_failed(e.to_string())),
        Err(_) => {
            return Err(tls_failed(format!(
                "no handshake within --request-timeout {} ms",
                args.request_timeout.as_millis()
            )))
        }
    };
    if args.mix.is_some() {
        return Ok(());
    }
    let idx = match args.pick {
        Pick::Fixed(i) => i,
        _ => bodies
            .qidx
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.map(|q| (q, i)))
            .max()
            .map_or(0, |(_, i)| i),
    };
    let body = bodies.bodies.get(idx).cloned().unwrap_or_default();
    let req = if args.cache == Some(crate::config::CacheMode::Cold) {
        init_nonce();
        let mut buf = Vec::new();
        let n = NONCE.fetch_add(1, Ordering::Relaxed);
        target.serialize_into(
            &mut buf,
            &target.method,
            target.path(),
            Some(n),
            target.with_body,
            &body,
        );
        bytes::Bytes::from(buf)
    } else {
        target.serialize(&body)
    };
    let mut timer = Timer::new(args.request_timeout);
    let res = request_once_as(
        &mut Some(conn),
        target,
        &req,
        target.head_only(),
        Instant::now() + args.request_timeout,
        &mut timer,
    )
    .await;
    match res {
        Ok((status, answer)) if (400..500).contains(&status) && status != 429 && search_bodies => {
            let what = match bodies.qidx.get(idx).copied().flatten() {
                Some(q) if args.text_queries.is_none() => format!(
                    "{} {} with qidx {q} (the last of --query-count {})",
                    target.method,
                    target.path(),
                    args.query_count
                ),
                _ => format!("the first request to {} {}", target.method, target.path()),
            };
            let hint = if args.text_queries.is_none() && bodies.qidx.iter().any(Option::is_some) {
                "; if its query matrix has fewer rows, lower --query-count (and the server needs serve --queries FILE)"
            } else {
                ""
            };
            Err(LoadError::Refused {
                message: format!(
                    "the server refused {what}: {}{hint}",
                    body_text(status, &answer)
                ),
            })
        }
        Ok((status, _)) if (200..300).contains(&status) => Ok(()),
        Ok((status, answer)) => {
            warnings.push(format!(
                "preflight: {} {} answered {}",
                target.method,
                target.path(),
                body_text(status, &answer)
            ));
            Ok(())
        }
        Err((kind, msg)) => {
            warnings.push(format!(
                "preflight: {} {} failed: {}",
                target.method,
                target.path(),
                msg.unwrap_or_else(|| kind.name().to_string())
            ));
            Ok(())
        }
    }
}

/// Check the values one by one and together (each message names its flag).
pub(crate) fn validate(args: &LoadConfig) -> Result<(), LoadError> {
    let u = LoadError::usage;
    if !(args.slo_p99_ms.is_finite() && args.slo_p99_ms > 0.0) {
        return Err(u("--slo-p99-ms must be > 0"));
    }
    if !(0.0..=1.0).contains(&args.max_error_rate) {
        return Err(u("--max-error-rate must be between 0 and 1"));
    }
    if args.duration.is_zero() {
        return Err(u("--duration must be > 0"));
    }
    if args.request_timeout.is_zero() {
        return Err(u("--request-timeout must be > 0"));
    }
    if args.trials == 0 || args.trials > 1000 {
        return Err(u("--trials must be between 1 and 1000"));
    }
    if args.connections == 0 || args.connections > 100_000 {
        return Err(u("--connections must be between 1 and 100000"));
    }
    if !(1..=1000).contains(&args.k) {
        return Err(u("--k must be between 1 and 1000"));
    }
    if args.query_count == 0 {
        return Err(u("--query-count must be at least 1"));
    }
    if args.ramp.0.is_empty() {
        return Err(u("--ramp needs at least one concurrency"));
    }
    if args.body_file.is_some() && !args.endpoint.is_search() {
        return Err(LoadError::usage(format!(
            "--body-file needs an endpoint that takes a body (e.g. 'POST /search'), not '{}'",
            args.endpoint
        )));
    }
    Ok(())
}
