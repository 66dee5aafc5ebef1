//! A low-overhead HTTP/1.1 client: one hyper connection per slot, driven
//! inside the task that uses it (no connection task, no cross-task wake-ups).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::args::Endpoint;
use crate::error::LoadError;
use crate::stats::ErrorKind;

type Io = TokioIo<TcpStream>;
type ReqBody = Full<Bytes>;

/// Where and what to send.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port`, as reported.
    pub base: String,
    host_port: String,
    /// The resolved address, or why it could not be resolved.
    pub addr: Result<SocketAddr, String>,
    host: HeaderValue,
    pub method: Method,
    pub uri: Uri,
    pub with_body: bool,
}

impl Target {
    /// Parse `--url` and `--endpoint` (no I/O).
    pub fn new(url: &str, endpoint: &Endpoint) -> Result<Target, LoadError> {
        let u: Uri = url
            .trim()
            .parse()
            .map_err(|e| LoadError::usage(format!("invalid --url '{url}': {e}")))?;
        match u.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(LoadError::usage(format!(
                    "invalid --url '{url}': scheme '{other}' is not supported (plain http only)"
                )))
            }
            None => {
                return Err(LoadError::usage(format!(
                    "invalid --url '{url}': expected e.g. http://127.0.0.1:8080"
                )))
            }
        }
        let host = u
            .host()
            .ok_or_else(|| LoadError::usage(format!("invalid --url '{url}': no host")))?;
        let port = u.port_u16().unwrap_or(80);
        if !matches!(u.path(), "" | "/") {
            return Err(LoadError::usage(format!(
                "invalid --url '{url}': give the base URL only; the path goes in --endpoint"
            )));
        }
        let host_port = format!("{host}:{port}");
        let host_hdr = HeaderValue::from_str(&host_port)
            .map_err(|_| LoadError::usage(format!("invalid --url '{url}': bad host")))?;
        let uri: Uri = endpoint
            .path
            .parse()
            .map_err(|_| LoadError::usage(format!("invalid endpoint path '{}'", endpoint.path)))?;
        Ok(Target {
            base: format!("http://{host_port}"),
            host_port,
            addr: Err("not resolved yet".into()),
            host: host_hdr,
            method: endpoint.method.clone(),
            uri,
            with_body: endpoint.is_search(),
        })
    }

    /// Resolve the host once (DNS is not part of any measurement). When the
    /// name has several addresses (localhost: ::1 and 127.0.0.1), the first
    /// one that accepts a connection is used.
    pub async fn resolve(&mut self) {
        let addrs: Vec<SocketAddr> = match tokio::net::lookup_host(self.host_port.as_str()).await {
            Ok(it) => it.collect(),
            Err(e) => {
                self.addr = Err(format!("cannot resolve {}: {e}", self.host_port));
                return;
            }
        };
        self.addr = match addrs.as_slice() {
            [] => Err(format!("{}: no address", self.host_port)),
            [one] => Ok(*one),
            many => {
                let mut chosen = many[0];
                for a in many {
                    let probe = tokio::time::timeout(
                        std::time::Duration::from_secs(1),
                        TcpStream::connect(a),
                    );
                    if let Ok(Ok(_)) = probe.await {
                        chosen = *a;
                        break;
                    }
                }
                Ok(chosen)
            }
        };
    }

    /// Build one request around a pre-serialised body.
    #[inline]
    pub fn request(&self, body: &Bytes) -> Request<ReqBody> {
        self.request_to(&self.method, &self.uri, self.with_body, body)
    }

    pub fn request_to(
        &self,
        method: &Method,
        uri: &Uri,
        with_body: bool,
        body: &Bytes,
    ) -> Request<ReqBody> {
        let mut req = Request::new(Full::new(if with_body {
            body.clone()
        } else {
            Bytes::new()
        }));
        *req.method_mut() = method.clone();
        *req.uri_mut() = uri.clone();
        let h = req.headers_mut();
        h.insert(HOST, self.host.clone());
        if with_body {
            h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        req
    }
}

/// One keep-alive HTTP/1.1 connection.
pub struct Conn {
    sender: SendRequest<ReqBody>,
    conn: Pin<Box<Connection<Io, ReqBody>>>,
    done: bool,
}

/// The connection finished while we were waiting on it.
struct Closed;

/// Await `f` while also driving the connection state machine in this task.
async fn drive<F: Future>(
    conn: &mut Pin<Box<Connection<Io, ReqBody>>>,
    done: &mut bool,
    f: F,
) -> Result<F::Output, Closed> {
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(|cx| {
        if !*done && conn.as_mut().poll(cx).is_ready() {
            *done = true;
        }
        match f.as_mut().poll(cx) {
            Poll::Ready(v) => Poll::Ready(Ok(v)),
            Poll::Pending if *done => Poll::Ready(Err(Closed)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

impl Conn {
    /// TCP connect (TCP_NODELAY) and HTTP/1.1 handshake.
    pub async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(s))
            .await
            .map_err(std::io::Error::other)?;
        Ok(Conn {
            sender,
            conn: Box::pin(conn),
            done: false,
        })
    }

    /// Wait until a request can be sent; false when the connection is gone.
    pub async fn ready(&mut self) -> bool {
        if self.done {
            return false;
        }
        if self.sender.is_ready() {
            return true;
        }
        matches!(
            drive(&mut self.conn, &mut self.done, self.sender.ready()).await,
            Ok(Ok(()))
        )
    }

    /// Send one request and read the whole answer.
    pub async fn exchange(&mut self, req: Request<ReqBody>) -> Result<(u16, Bytes), ()> {
        let fut = self.sender.send_request(req);
        let resp = match drive(&mut self.conn, &mut self.done, fut).await {
            Ok(Ok(r)) => r,
            _ => return Err(()),
        };
        let status = resp.status().as_u16();
        let body = resp.into_body();
        match drive(&mut self.conn, &mut self.done, body.collect()).await {
            Ok(Ok(c)) => Ok((status, c.to_bytes())),
            _ => Err(()),
        }
    }
}

/// A per-worker request timer: one tokio `Sleep` re-armed only when the
/// deadline moved by more than a small slack (1/64 of the timeout, at most
/// 20 ms), instead of a timer entry per request. A timeout may thus fire up
/// to that slack early.
pub struct Timer {
    sleep: Pin<Box<Sleep>>,
    slack: std::time::Duration,
}

impl Timer {
    pub fn new(timeout: std::time::Duration) -> Timer {
        Timer {
            sleep: Box::pin(tokio::time::sleep(timeout)),
            slack: (timeout / 64).min(std::time::Duration::from_millis(20)),
        }
    }

    fn arm(&mut self, deadline: Instant) {
        let cur = self.sleep.deadline();
        if deadline < cur || deadline - cur > self.slack {
            self.sleep.as_mut().reset(deadline);
        }
    }

    /// Await `f` unless the armed deadline passes first.
    async fn run<F: Future>(&mut self, f: F) -> Result<F::Output, Elapsed> {
        let mut f = std::pin::pin!(f);
        let sleep = &mut self.sleep;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Ok(v));
            }
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(Elapsed));
            }
            Poll::Pending
        })
        .await
    }
}

/// The request timer fired.
pub struct Elapsed;

/// Send one request on the slot's connection (connecting first when needed),
/// all within `deadline`. On failure the error kind and, for connect errors,
/// the reason. A connection that failed is dropped from the slot.
pub async fn request_once(
    slot: &mut Option<Conn>,
    target: &Target,
    req: Request<ReqBody>,
    deadline: Instant,
    timer: &mut Timer,
) -> Result<(u16, Bytes), (ErrorKind, Option<String>)> {
    timer.arm(deadline);
    let mut fresh = false;
    loop {
        if slot.is_none() {
            let addr = match &target.addr {
                Ok(a) => *a,
                Err(e) => return Err((ErrorKind::Connect, Some(e.clone()))),
            };
            match timer.run(Conn::connect(addr)).await {
                Ok(Ok(c)) => {
                    *slot = Some(c);
                    fresh = true;
                }
                Ok(Err(e)) => {
                    return Err((ErrorKind::Connect, Some(format!("connect {addr}: {e}"))))
                }
                Err(Elapsed) => {
                    return Err((
                        ErrorKind::Connect,
                        Some(format!("connect {addr}: timed out")),
                    ))
                }
            }
        }
        let c = slot.as_mut().expect("connected");
        if c.sender.is_ready() && !c.done {
            break;
        }
        match timer.run(c.ready()).await {
            Ok(true) => break,
            Ok(false) => {
                // Closed by the server since the last answer (e.g. after
                // `Connection: close`): reconnect once, silently.
                *slot = None;
                if fresh {
                    return Err((ErrorKind::Io, None));
                }
            }
            Err(Elapsed) => {
                *slot = None;
                return Err((ErrorKind::Timeout, None));
            }
        }
    }
    let c = slot.as_mut().expect("connected");
    match timer.run(c.exchange(req)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(())) => {
            *slot = None;
            Err((ErrorKind::Io, None))
        }
        Err(Elapsed) => {
            *slot = None;
            Err((ErrorKind::Timeout, None))
        }
    }
}

/// One-off GET on a fresh connection (used for `/stats`); None on any failure.
pub async fn get_once(target: &Target, path: &str, timeout: std::time::Duration) -> Option<Bytes> {
    target.addr.as_ref().ok()?;
    let uri: Uri = path.parse().ok()?;
    let deadline = Instant::now() + timeout;
    let mut slot = None;
    let mut timer = Timer::new(timeout);
    let req = target.request_to(&Method::GET, &uri, false, &Bytes::new());
    match request_once(&mut slot, target, req, deadline, &mut timer).await {
        Ok((200, body)) => Some(body),
        _ => None,
    }
}
