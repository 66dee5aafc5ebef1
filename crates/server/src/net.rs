//! The accept loop: one hyper HTTP/1.1 connection task per client, header read timeout,
//! per-request bookkeeping (arrival time, peer, counting, debug log), panic guard, and
//! graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use axum::response::IntoResponse;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tower::Service;

use crate::api::{App, Arrival};
use crate::error::{ApiError, Code, Tagged};

/// Which routes count in `/stats` `requests` (the observability endpoints do not, so
/// polling them does not change what they report).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Search,
    Counted,
    Observe,
}

fn kind(path: &str) -> Kind {
    match path {
        "/search" => Kind::Search,
        "/health" | "/ready" | "/stats" | "/metrics" => Kind::Observe,
        _ => Kind::Counted,
    }
}

/// Answer one request: route it, never let a panic escape, count it, log it.
async fn handle(
    app: Arc<App>,
    router: Router,
    peer: SocketAddr,
    mut req: Request<Incoming>,
) -> Result<Response<axum::body::Body>, Infallible> {
    let arrival = Instant::now();
    req.extensions_mut().insert(Arrival(arrival));
    req.extensions_mut().insert(ConnectInfo(peer));
    let k = kind(req.uri().path());
    let log = tracing::enabled!(tracing::Level::DEBUG);
    let what = log.then(|| (req.method().clone(), req.uri().clone()));
    let mut router = router;
    let mut fut = Box::pin(router.call(req));
    let result =
        std::future::poll_fn(
            |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                Ok(Poll::Ready(r)) => Poll::Ready(Ok(r)),
                Ok(Poll::Pending) => Poll::Pending,
                Err(_) => Poll::Ready(Err(())),
            },
        )
        .await;
    let resp = match result {
        Ok(Ok(r)) => r,
        Ok(Err(never)) => match never {},
        Err(()) => {
            tracing::error!("a request handler panicked");
            ApiError::new(Code::Internal, "internal error").into_response()
        }
    };
    let code = resp.extensions().get::<Tagged>().map_or_else(
        || {
            if resp.status().is_success() {
                Code::Ok
            } else {
                Code::Internal
            }
        },
        |t| t.0,
    );
    let took = arrival.elapsed();
    if k != Kind::Observe {
        app.stats.count(code);
    }
    if k == Kind::Search {
        app.stats.record_search(code, arrival, took);
    }
    if let Some((method, uri)) = what {
        tracing::debug!(
            %peer,
            method = %method,
            path = uri.path(),
            status = resp.status().as_u16(),
            code = code.as_str(),
            took_us = took.as_micros() as u64,
            "request"
        );
    }
    Ok(resp)
}

/// Accept connections until `shutdown` resolves, then stop accepting, let in-flight
/// requests finish (idle keep-alive connections are closed), and return.
pub(crate) async fn accept_loop<F: Future>(
    app: Arc<App>,
    listener: TcpListener,
    shutdown: F,
    read_timeout: Duration,
    drain_timeout: Duration,
    io_nice: i32,
) {
    if io_nice != 0 {
        // After the search pool exists (threads inherit their creator's priority).
        if let Err(e) = renice_current_thread(io_nice) {
            tracing::warn!("cannot lower the I/O thread's priority: {e}");
        }
    }
    let router = crate::api::router(app.clone());
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .keep_alive(true);
    let http = Arc::new(http);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut last_accept_warning: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            biased;
            _ = shutdown.as_mut() => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE / ENFILE / ENOBUFS: out of descriptors or memory for now. Keep
                // serving the connections we have; try again shortly.
                if last_accept_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                    tracing::warn!("accept failed: {e}");
                    last_accept_warning = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let router = router.clone();
        let svc =
            hyper::service::service_fn(move |req| handle(app.clone(), router.clone(), peer, req));
        let conn = http.serve_connection(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::trace!(%peer, "connection ended: {e}");
            }
        });
    }
    drop(listener);
    let open = graceful.count();
    tracing::info!(
        open_connections = open,
        inflight = app.inflight(),
        "shutting down: no longer accepting, draining"
    );
    if tokio::time::timeout(drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "connections still open after {} s; stopping anyway",
            drain_timeout.as_secs()
        );
    }
}

/// Lower the calling thread's scheduling priority by `by` (a nice increment). Linux applies
/// `setpriority(PRIO_PROCESS, tid)` to that one thread.
pub fn renice_current_thread(by: i32) -> std::io::Result<()> {
    // SAFETY: gettid/getpriority/setpriority take plain integers.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let cur = libc::getpriority(libc::PRIO_PROCESS, tid);
        if cur == -1 && *libc::__errno_location() != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::setpriority(libc::PRIO_PROCESS, tid, (cur + by).min(19)) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Raise the soft limit on open files to the hard limit, so many idle connections cannot
/// exhaust descriptors. Returns the new soft limit.
pub fn raise_nofile_limit() -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            lim.rlim_cur = lim.rlim_max;
        }
    }
    Ok(lim.rlim_cur)
}
