//! A minimal HTTP/1.1 client built for load generation: one keep-alive
//! connection per slot, whole requests serialised once up front (request
//! line, headers and body in one buffer, sent with one write), answers read
//! into a reusable buffer and parsed with `httparse`; the body is handed out
//! as a zero-copy slice of that buffer. Content-Length, chunked and
//! close-delimited bodies and `Connection: close` are handled.
//!
//! Why not hyper's client connection: profiling against wrk on a 2-core box
//! (bench/load_vs_wrk.sh) showed hyper's per-request machinery (dispatch
//! channel, oneshot, header maps, buffer shuffling) at 6-9 us of user CPU per
//! request against wrk's ~1.3 us, and about 0.6-0.75x wrk's request rate;
//! this client needs ~3 us and keeps up with wrk.
//!
//! `https://` targets: the same client over TLS (rustls). Every connection is opened by
//! [`Target::connect`] (TCP with TCP_NODELAY, then the handshake when the target is https),
//! with one `Arc<rustls::ClientConfig>` built when the target is parsed. A connection's
//! stream is a [`Stream`] enum: the plain path costs one match per read or write, no
//! allocation and no dynamic dispatch.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use hyper::{Method, Uri};
use rustls_pki_types::{DnsName, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::config::Endpoint;
use crate::error::LoadError;
use crate::stats::ErrorKind;

/// Where and what to send.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port` or `https://host:port`, as reported.
    pub base: String,
    host_port: String,
    /// The resolved address, or why it could not be resolved.
    pub addr: Result<SocketAddr, String>,
    /// HTTP method of the requests.
    pub method: Method,
    /// Endpoint path (and query) of the requests.
    pub uri: Uri,
    /// Whether requests carry a body (and Content-Length).
    pub with_body: bool,
    /// `https://`: the run's TLS configuration and the name the certificate must carry.
    tls: Option<TlsTarget>,
}

/// How an `https://` target is spoken to.
#[derive(Debug, Clone)]
struct TlsTarget {
    /// Built once per target; every connection shares it.
    config: Arc<rustls::ClientConfig>,
    /// The `--url` host: sent as SNI (a DNS name) and checked against the certificate
    /// (a DNS name or an IP address).
    name: ServerName<'static>,
}

/// The TLS name of a `--url` host: an IP address (`127.0.0.1`, `[::1]`) or a DNS name.
fn server_name(url: &str, host: &str) -> Result<ServerName<'static>, LoadError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    DnsName::try_from(bare.to_string())
        .map(ServerName::DnsName)
        .map_err(|e| LoadError::usage(format!("invalid --url '{url}': host '{host}': {e}")))
}

impl Target {
    /// Parse `--url` and `--endpoint`, and for an `https://` URL build the TLS
    /// configuration: `ca` (`--ca`, PEM) is the root store, else the system CA bundle
    /// ([`crate::tls::SYSTEM_BUNDLES`]). The only I/O is reading those certificates.
    /// Usage errors: a scheme other than http and https, a path in the URL, `ca` with an
    /// `http://` URL, https without `ca` on a system with no CA bundle.
    pub fn new(url: &str, endpoint: &Endpoint, ca: Option<&Path>) -> Result<Target, LoadError> {
        let u: Uri = url
            .trim()
            .parse()
            .map_err(|e| LoadError::usage(format!("invalid --url '{url}': {e}")))?;
        let (scheme, default_port) = match u.scheme_str() {
            Some("http") => ("http", 80),
            Some("https") => ("https", 443),
            Some(other) => {
                return Err(LoadError::usage(format!(
                    "invalid --url '{url}': scheme '{other}' is not supported (http or https)"
                )))
            }
            None => {
                return Err(LoadError::usage(format!(
                    "invalid --url '{url}': expected e.g. http://127.0.0.1:8080 or https://127.0.0.1:8443"
                )))
            }
        };
        let host = u
            .host()
            .ok_or_else(|| LoadError::usage(format!("invalid --url '{url}': no host")))?;
        let port = u.port_u16().unwrap_or(default_port);
        if !matches!(u.path(), "" | "/") {
            return Err(LoadError::usage(format!(
                "invalid --url '{url}': give the base URL only; the path goes in --endpoint"
            )));
        }
        let host_port = format!("{host}:{port}");
        if host_port.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(LoadError::usage(format!("invalid --url '{url}': bad host")));
        }
        let uri: Uri = endpoint
            .path
            .parse()
            .map_err(|_| LoadError::usage(format!("invalid endpoint path '{}'", endpoint.path)))?;
        let tls = match (scheme, ca) {
            ("http", Some(ca)) => {
                return Err(LoadError::usage(format!(
                    "--ca {} is for https:// targets, but --url '{url}' is plain http (use https://{host_port}, or drop --ca)",
                    ca.display()
                )))
            }
            ("http", None) => None,
            _ => Some(TlsTarget {
                name: server_name(url, host)?,
                config: crate::tls::client_config(ca)?,
            }),
        };
        Ok(Target {
            base: format!("{scheme}://{host_port}"),
            host_port,
            addr: Err("not resolved yet".into()),
            method: endpoint.method.clone(),
            uri,
            with_body: endpoint.is_search(),
            tls,
        })
    }

    /// Whether the target is `https://`.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Open a connection to `addr`: TCP (TCP_NODELAY), then, for https, the TLS
    /// handshake. Every connection this crate makes to a target is made here (or by its
    /// two halves, [`connect_tcp`] and [`Target::secure`]).
    pub async fn connect(&self, addr: SocketAddr) -> Result<Conn, ConnectError> {
        let tcp = connect_tcp(addr).await.map_err(ConnectError::Tcp)?;
        self.secure(tcp).await.map_err(ConnectError::Tls)
    }

    /// The second half of [`Target::connect`]: a connected socket as a [`Conn`], through
    /// the TLS handshake when the target is https (at once for http).
    pub async fn secure(&self, tcp: TcpStream) -> io::Result<Conn> {
        let stream = match &self.tls {
            None => Stream::Plain(tcp),
            Some(t) => {
                let connector = tokio_rustls::TlsConnector::from(Arc::clone(&t.config));
                Stream::Tls(Box::new(connector.connect(t.name.clone(), tcp).await?))
            }
        };
        Ok(Conn::new(stream))
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
                    let probe =
                        tokio::time::timeout(std::time::Duration::from_secs(1), connect_tcp(*a));
                    if let Ok(Ok(_)) = probe.await {
                        chosen = *a;
                        break;
                    }
                }
                Ok(chosen)
            }
        };
    }

    /// The whole request for `body` (ignored for GET/HEAD), ready to write.
    pub fn serialize(&self, body: &[u8]) -> Bytes {
        self.serialize_to(&self.method, self.path(), self.with_body, body)
    }

    pub(crate) fn serialize_to(
        &self,
        method: &Method,
        path: &str,
        with_body: bool,
        body: &[u8],
    ) -> Bytes {
        let mut out = Vec::with_capacity(64 + self.host_port.len() + path.len() + body.len());
        self.serialize_into(&mut out, method, path, None, with_body, body);
        Bytes::from(out)
    }

    /// Write the whole request into `out` (cleared first; its capacity is reused). With
    /// `nonce`, the query parameter `nonce=N` is appended to `path` (`?` or `&`).
    pub fn serialize_into(
        &self,
        out: &mut Vec<u8>,
        method: &Method,
        path: &str,
        nonce: Option<u64>,
        with_body: bool,
        body: &[u8],
    ) {
        use std::io::Write;
        out.clear();
        out.extend_from_slice(method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(path.as_bytes());
        if let Some(n) = nonce {
            let sep = if path.contains('?') { '&' } else { '?' };
            let _ = write!(out, "{sep}nonce={n}");
        }
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(self.host_port.as_bytes());
        out.extend_from_slice(b"\r\n");
        if with_body {
            let _ = write!(
                out,
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            );
        }
        out.extend_from_slice(b"\r\n");
        if with_body {
            out.extend_from_slice(body);
        }
    }

    /// Path (and query) of `--endpoint`.
    pub fn path(&self) -> &str {
        self.uri.path_and_query().map_or("/", |p| p.as_str())
    }

    /// Whether answers to this method carry no body.
    pub fn head_only(&self) -> bool {
        self.method == Method::HEAD
    }
}

/// How an exchange failed.
#[derive(Debug, PartialEq, Eq)]
pub enum Fail {
    /// The connection was closed or reset before any byte of the answer
    /// (a keep-alive connection the server had already closed).
    Stale,
    /// Broken mid-answer, or not HTTP.
    Io,
}

const READ_CHUNK: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The first half of [`Target::connect`]: TCP connect with TCP_NODELAY.
pub async fn connect_tcp(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Why [`Target::connect`] failed.
#[derive(Debug)]
pub enum ConnectError {
    /// The TCP connection (refused, unreachable, ...).
    Tcp(io::Error),
    /// The TLS handshake (certificate not trusted, wrong name, not TLS, ...).
    Tls(io::Error),
}

impl ConnectError {
    /// The error with where it happened: `connect ADDR: ...` or `TLS handshake with ADDR: ...`.
    pub fn describe(&self, addr: SocketAddr) -> String {
        match self {
            ConnectError::Tcp(e) => format!("connect {addr}: {e}"),
            ConnectError::Tls(e) => format!("TLS handshake with {addr}: {e}"),
        }
    }
}

/// A connection's byte stream: plain TCP (`http://`) or TLS over TCP (`https://`). Reads
/// and writes are delegated with one match: no allocation, no dynamic dispatch.
pub enum Stream {
    /// `http://`.
    Plain(TcpStream),
    /// `https://` (boxed: the TLS state is large and only this variant carries it).
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// One keep-alive HTTP/1.1 connection (plain or TLS).
pub struct Conn {
    stream: Stream,
    buf: BytesMut,
    /// False once the server said `Connection: close` (or HTTP/1.0).
    pub reusable: bool,
    /// `Retry-After` seconds of the last answer, if it had one.
    pub retry_after: Option<u64>,
}

/// A parsed response head.
#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// Length of the head in bytes (where the body starts).
    pub len: usize,
    /// `Content-Length`, if given.
    pub content_length: Option<usize>,
    /// True when `Transfer-Encoding` includes `chunked`.
    pub chunked: bool,
    /// True when the connection closes after this answer (`Connection: close`, or
    /// HTTP/1.0 without keep-alive).
    pub close: bool,
    /// `Retry-After` in seconds (the HTTP-date form is not used by servers under test and
    /// is ignored).
    pub retry_after: Option<u64>,
}

/// The bytes received are not a valid HTTP/1.x answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolError;

/// Parse a response head from the start of `buf`; Ok(None) when incomplete.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, ProtocolError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut headers);
    let len = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(ProtocolError),
    };
    let mut h = Head {
        status: r.code.ok_or(ProtocolError)?,
        len,
        content_length: None,
        chunked: false,
        close: r.version == Some(0),
        retry_after: None,
    };
    for hd in r.headers.iter() {
        if hd.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(hd.value).map_err(|_| ProtocolError)?;
            h.content_length = Some(v.trim().parse().map_err(|_| ProtocolError)?);
        } else if hd.name.eq_ignore_ascii_case("transfer-encoding") {
            h.chunked = hd
                .value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if hd.name.eq_ignore_ascii_case("retry-after") {
            h.retry_after = std::str::from_utf8(hd.value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
        } else if hd.name.eq_ignore_ascii_case("connection") {
            let v = hd.value;
            if v.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
            {
                h.close = true;
            } else if v
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"keep-alive"))
            {
                h.close = false;
            }
        }
    }
    Ok(Some(h))
}

/// Decode a complete chunked body at the start of `buf`: Ok(Some((body,
/// bytes consumed))) or Ok(None) when more bytes are needed.
pub fn decode_chunked(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, ProtocolError> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let Some(eol) = find_crlf(&buf[pos..]) else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&buf[pos..pos + eol]).map_err(|_| ProtocolError)?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| ProtocolError)?;
        pos += eol + 2;
        if size == 0 {
            // trailers until an empty line
            loop {
                let Some(eol) = find_crlf(&buf[pos..]) else {
                    return Ok(None);
                };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some((out, pos)));
                }
            }
        }
        if buf.len() < pos + size + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&buf[pos..pos + size]);
        if &buf[pos + size..pos + size + 2] != b"\r\n" {
            return Err(ProtocolError);
        }
        pos += size + 2;
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

impl Conn {
    /// A connection over `stream` (made by [`Target::connect`]).
    fn new(stream: Stream) -> Conn {
        Conn {
            stream,
            buf: BytesMut::with_capacity(READ_CHUNK),
            reusable: true,
            retry_after: None,
        }
    }

    async fn read_more(&mut self) -> std::io::Result<usize> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        self.stream.read_buf(&mut self.buf).await
    }

    /// Write one serialised request and read its whole answer.
    pub async fn exchange(&mut self, req: &[u8], head_only: bool) -> Result<(u16, Bytes), Fail> {
        self.buf.clear();
        if self.stream.write_all(req).await.is_err() {
            return Err(Fail::Stale);
        }
        // TLS may keep the last record in its buffer; a TCP socket has nothing to flush.
        if let Stream::Tls(s) = &mut self.stream {
            if s.flush().await.is_err() {
                return Err(Fail::Stale);
            }
        }
        let mut got_any = false;
        let head = loop {
            match parse_head(&self.buf) {
                Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                    self.buf.advance(h.len); // informational: the real answer follows
                }
                Ok(Some(h)) => break h,
                Ok(None) if self.buf.len() > MAX_HEAD_BYTES => return Err(Fail::Io),
                Ok(None) => match self.read_more().await {
                    Ok(0) | Err(_) if !got_any => return Err(Fail::Stale),
                    Ok(0) | Err(_) => return Err(Fail::Io),
                    Ok(_) => got_any = true,
                },
                Err(ProtocolError) => return Err(Fail::Io),
            }
        };
        self.buf.advance(head.len);
        self.retry_after = head.retry_after;
        if head.close {
            self.reusable = false;
        }
        let no_body = head_only || head.status == 204 || head.status == 304;
        let body = if no_body {
            Bytes::new()
        } else if head.chunked {
            loop {
                match decode_chunked(&self.buf) {
                    Ok(Some((b, used))) => {
                        self.buf.advance(used);
                        break Bytes::from(b);
                    }
                    Ok(None) => match self.read_more().await {
                        Ok(0) | Err(_) => return Err(Fail::Io),
                        Ok(_) => {}
                    },
                    Err(ProtocolError) => return Err(Fail::Io),
                }
            }
        } else if let Some(n) = head.content_length {
            while self.buf.len() < n {
                match self.read_more().await {
                    Ok(0) | Err(_) => return Err(Fail::Io),
                    Ok(_) => {}
                }
            }
            self.buf.split_to(n).freeze()
        } else {
            // delimited by the end of the connection
            self.reusable = false;
            loop {
                match self.read_more().await {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(_) => return Err(Fail::Io),
                }
            }
            self.buf.split().freeze()
        };
        Ok((head.status, body))
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
    /// A timer for requests timing out after `timeout`.
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

/// Send one serialised request on the slot's connection (connecting first
/// when needed), all within `deadline`. On failure the error kind and, for
/// connect errors, the reason. A connection that failed, or that the server
/// asked to close, is dropped from the slot. A kept-alive connection found
/// closed before any byte of the answer is replaced once, silently.
pub async fn request_once(
    slot: &mut Option<Conn>,
    target: &Target,
    req: &[u8],
    deadline: Instant,
    timer: &mut Timer,
) -> Result<(u16, Bytes), (ErrorKind, Option<String>)> {
    request_once_as(slot, target, req, target.head_only(), deadline, timer).await
}

/// As [`request_once`], for a request whose method may differ from `--endpoint`'s:
/// `head_only` says whether its answer carries no body (a HEAD request).
pub async fn request_once_as(
    slot: &mut Option<Conn>,
    target: &Target,
    req: &[u8],
    head_only: bool,
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
            match timer.run(target.connect(addr)).await {
                Ok(Ok(c)) => {
                    *slot = Some(c);
                    fresh = true;
                }
                Ok(Err(e)) => return Err((ErrorKind::Connect, Some(e.describe(addr)))),
                Err(Elapsed) => {
                    return Err((
                        ErrorKind::Connect,
                        Some(format!("connect {addr}: timed out")),
                    ))
                }
            }
        }
        let c = slot.as_mut().expect("connected");
        match timer.run(c.exchange(req, head_only)).await {
            Ok(Ok(v)) => {
                if !c.reusable {
                    *slot = None;
                }
                return Ok(v);
            }
            Ok(Err(Fail::Stale)) if !fresh => {
                *slot = None;
            }
            Ok(Err(_)) => {
                *slot = None;
                return Err((ErrorKind::Io, None));
            }
            Err(Elapsed) => {
                *slot = None;
                return Err((ErrorKind::Timeout, None));
            }
        }
    }
}

/// One request on a fresh connection: `(status, body)`, or what went wrong.
pub async fn request_simple(
    target: &Target,
    method: &Method,
    path: &str,
    body: Option<&[u8]>,
    timeout: std::time::Duration,
) -> Result<(u16, Bytes), String> {
    let deadline = Instant::now() + timeout;
    let mut slot = None;
    let mut timer = Timer::new(timeout);
    let req = target.serialize_to(method, path, body.is_some(), body.unwrap_or_default());
    request_once(&mut slot, target, &req, deadline, &mut timer)
        .await
        .map_err(|(kind, why)| why.unwrap_or_else(|| format!("{kind:?}")))
}

/// One-off GET on a fresh connection (used for `/stats`); None on any failure.
pub async fn get_once(target: &Target, path: &str, timeout: std::time::Duration) -> Option<Bytes> {
    target.addr.as_ref().ok()?;
    let deadline = Instant::now() + timeout;
    let mut slot = None;
    let mut timer = Timer::new(timeout);
    let req = target.serialize_to(&Method::GET, path, false, &[]);
    match request_once(&mut slot, target, &req, deadline, &mut timer).await {
        Ok((200, body)) => Some(body),
        _ => None,
    }
}
