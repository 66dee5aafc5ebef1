//! The accept loop: one hyper HTTP/1.1 connection task per client (on a [`Metered`]
//! socket), the connection cap and its minimal responder, header read timeout, per-request
//! bookkeeping (arrival time, peer, counting by code and by route, debug log), JSON bodies
//! for errors made outside our handlers, panic guard, and graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use std::sync::atomic::Ordering::Relaxed;

use axum::extract::{ConnectInfo, MatchedPath};
use axum::http::{Method, Request, Response, StatusCode};
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tower::Service;

use crate::conn::{ConnState, Metered, Sock};
use crate::error::{ApiError, Code, Tagged};
use crate::limits::Limits;
use crate::state::{not_ready, App, Arrival};
use crate::wire::json_response;

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
        "/health" | "/healthz" | "/ready" | "/readyz" | "/stats" | "/metrics" => Kind::Observe,
        // A collection's searches and Elasticsearch-shaped `_search` are searches too
        // (`/stats` `latency_ms`, `qps_1m`, `searchd_search_duration_seconds`).
        p if (p.starts_with("/collections/") && p.ends_with("/search"))
            || p.ends_with("/_search") =>
        {
            Kind::Search
        }
        _ => Kind::Counted,
    }
}

/// The route template a request matched (`/collections/{name}/search`), carried from the
/// router to the response so metrics are labelled by route, never by raw path.
#[derive(Clone)]
pub(crate) struct RouteLabel(pub MatchedPath);

async fn label_route(req: Request<axum::body::Body>, next: Next) -> Response<axum::body::Body> {
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let mut resp = next.run(req).await;
    if let Some(m) = matched {
        resp.extensions_mut().insert(RouteLabel(m));
    }
    resp
}

/// An error reply made outside our handlers (axum's extractors: bad path parameters, ...)
/// becomes the contract's JSON error with the same status.
async fn as_json_error(resp: Response<axum::body::Body>) -> Response<axum::body::Body> {
    let status = resp.status();
    let label = resp.extensions().get::<RouteLabel>().cloned();
    let text = match http_body_util::Limited::new(resp.into_body(), 4096)
        .collect()
        .await
    {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).trim().to_string(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase()
    } else {
        text
    };
    let mut r = ApiError::new(Code::of_status(status), message).into_response();
    *r.status_mut() = status;
    if let Some(l) = label {
        r.extensions_mut().insert(l);
    }
    r
}

/// Answer one request: route it, never let a panic escape, count it, log it.
async fn handle(
    app: Arc<App>,
    router: Router,
    peer: SocketAddr,
    conn: Arc<ConnState>,
    mut req: Request<Incoming>,
) -> Result<Response<axum::body::Body>, Infallible> {
    let arrival = Instant::now();
    conn.enter(&app.limits);
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
    drop(fut);
    let mut resp = match result {
        Ok(Ok(r)) => r,
        Ok(Err(never)) => match never {},
        Err(()) => {
            tracing::error!("a request handler panicked");
            ApiError::new(Code::Internal, "internal error").into_response()
        }
    };
    if resp.extensions().get::<Tagged>().is_none() && !resp.status().is_success() {
        resp = as_json_error(resp).await;
    }
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
    let route = resp
        .extensions()
        .get::<RouteLabel>()
        .map_or("unmatched", |r| r.0.as_str());
    app.stats.record_http(route, resp.status().as_u16(), took);
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
    conn.leave();
    Ok(resp)
}

/// A connection past `--max-connections`: probes are answered, everything else is 503.
async fn overflow(
    app: Arc<App>,
    req: Request<Incoming>,
) -> Result<Response<axum::body::Body>, Infallible> {
    let probe = matches!(*req.method(), Method::GET | Method::HEAD);
    let resp = match req.uri().path() {
        "/health" | "/healthz" if probe => {
            json_response(StatusCode::OK, b"{\"status\":\"ok\"}".to_vec())
        }
        "/ready" | "/readyz" if probe => match not_ready(&app) {
            None => json_response(StatusCode::OK, b"{\"status\":\"ready\"}".to_vec()),
            Some(why) => ApiError::new(Code::NotReady, why).into_response(),
        },
        _ => app.limits.over_connections().into_response(),
    };
    Ok(resp)
}

/// One connection's place under `--max-connections` (or among the overflow ones).
struct Place(Arc<Limits>, bool);

impl Drop for Place {
    fn drop(&mut self) {
        if self.1 {
            self.0.overflow.fetch_sub(1, Relaxed);
        } else {
            self.0.open.fetch_sub(1, Relaxed);
        }
    }
}

/// Accept connections until `shutdown` resolves, then stop accepting, let in-flight
/// requests finish (idle keep-alive connections are closed, uploads still arriving are
/// cut after [`crate::limits::SHUTDOWN_BODY_GRACE`]), and return.
pub(crate) async fn accept_loop<F: Future>(
    app: Arc<App>,
    listener: TcpListener,
    shutdown: F,
    read_timeout: Duration,
    drain_timeout: Duration,
    io_nice: i32,
    tls: Option<Arc<crate::tls::Tls>>,
) {
    if io_nice != 0 {
        // After the search pool exists (threads inherit their creator's priority).
        if let Err(e) = renice_current_thread(io_nice) {
            tracing::warn!("cannot lower the I/O thread's priority: {e}");
        }
    }
    let limits = app.limits.clone();
    let router =
        crate::router::router(app.clone()).route_layer(axum::middleware::from_fn(label_route));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // half_close: a client that shuts down its sending side after the request
    // (shutdown(SHUT_WR)) still gets its answer.
    http.timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .max_buf_size(limits.max_header)
        .half_close(true)
        .keep_alive(true);
    let http = Arc::new(http);
    let mut small = hyper::server::conn::http1::Builder::new();
    small
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(1).min(read_timeout))
        .max_buf_size(8192)
        .keep_alive(false);
    let small = Arc::new(small);
    {
        // Give memory back after bursts.
        let limits = limits.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                limits.maybe_trim();
            }
        });
    }
    let mut shutdown = std::pin::pin!(shutdown);
    let mut last_accept_warning: Option<Instant> = None;
    let mut last_cap_warning: Option<Instant> = None;
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
        if limits.open.fetch_add(1, Relaxed) >= limits.max_connections {
            limits.open.fetch_sub(1, Relaxed);
            limits.refused_connections.fetch_add(1, Relaxed);
            if last_cap_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection cap reached: new connections get 503 (probes are still answered)"
                );
                last_cap_warning = Some(Instant::now());
            }
            if limits.overflow.fetch_add(1, Relaxed) >= limits.overflow_max {
                limits.overflow.fetch_sub(1, Relaxed);
                drop(stream);
                continue;
            }
            let place = Place(limits.clone(), true);
            let app = app.clone();
            let svc = hyper::service::service_fn(move |req| overflow(app.clone(), req));
            let conn = small.serve_connection(TokioIo::new(stream), svc);
            tokio::spawn(async move {
                let _ = conn.await;
                drop(place);
            });
            continue;
        }
        let place = Place(limits.clone(), false);
        let state = Arc::new(ConnState::default());
        let app = app.clone();
        let router = router.clone();
        let svc = hyper::service::service_fn({
            let app = app.clone();
            let state = state.clone();
            move |req| handle(app.clone(), router.clone(), peer, state.clone(), req)
        });
        match &tls {
            None => {
                let io = Metered::new(
                    Sock::Plain(stream),
                    state,
                    limits.clone(),
                    app.stats.clone(),
                );
                let conn = graceful.watch(http.serve_connection(TokioIo::new(io), svc));
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::trace!(%peer, "connection ended: {e}");
                    }
                    drop(place);
                });
            }
            Some(tls) => {
                // The handshake runs on the connection's own task (a slow or silent client
                // holds its place under --max-connections, never the accept loop).
                let acceptor = tls.acceptor();
                let watcher = graceful.watcher();
                let http = http.clone();
                let limits = limits.clone();
                tokio::spawn(async move {
                    let Some(sock) = handshake(acceptor, stream, read_timeout, &app).await else {
                        drop(place);
                        return;
                    };
                    let io = Metered::new(sock, state, limits, app.stats.clone());
                    let conn = watcher.watch(http.serve_connection(TokioIo::new(io), svc));
                    if let Err(e) = conn.await {
                        tracing::trace!(%peer, "connection ended: {e}");
                    }
                    drop(place);
                });
            }
        }
    }
    drop(listener);
    limits.begin_shutdown();
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

/// The TLS handshake of one connection, within `timeout`. A client speaking plain HTTP
/// gets a clear-text 400 saying the port is HTTPS; failures are counted in `/stats`
/// (`tls_handshake_failures`) and logged at debug.
async fn handshake(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    timeout: Duration,
    app: &App,
) -> Option<Sock> {
    let work = async {
        let mut first = [0u8; 1];
        let n = stream.peek(&mut first).await.ok()?;
        if n == 0 {
            return None;
        }
        if first[0] != crate::tls::HANDSHAKE_RECORD {
            use tokio::io::AsyncWriteExt as _;
            let mut stream = stream;
            let _ = stream.write_all(&crate::tls::plain_http_reply()).await;
            let _ = stream.shutdown().await;
            app.limits.tls_failures.fetch_add(1, Relaxed);
            return None;
        }
        match acceptor.accept(stream).await {
            Ok(s) => Some(Sock::Tls(Box::new(s))),
            Err(e) => {
                tracing::debug!("TLS handshake failed: {e}");
                app.limits.tls_failures.fetch_add(1, Relaxed);
                None
            }
        }
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(s) => s,
        Err(_) => {
            app.limits.tls_failures.fetch_add(1, Relaxed);
            None
        }
    }
}

pub use searchd_os::{raise_nofile_limit, renice_current_thread};

#[cfg(test)]
mod tests {
    use super::{kind, Kind};

    #[test]
    fn every_search_route_counts_as_a_search() {
        for p in ["/search", "/collections/docs/search", "/docs/_search"] {
            assert!(kind(p) == Kind::Search, "{p}");
        }
        for p in [
            "/collections/docs/docs",
            "/collections/docs/count",
            "/docs/_count",
        ] {
            assert!(kind(p) == Kind::Counted, "{p}");
        }
        assert!(kind("/stats") == Kind::Observe);
    }
}
