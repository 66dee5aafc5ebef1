//! The socket under each hyper connection: counts the bytes read outside handlers against
//! the byte budget (headers, read-ahead), and rewrites the bare replies hyper's parser sends
//! by itself (400 bad request line, 414, 431) into the contract's JSON errors.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::error::{raw_reply, Code};
use crate::limits::Limits;
use crate::stats::Stats;

/// What a connection's handler and its socket share.
#[derive(Default)]
pub(crate) struct ConnState {
    /// A request of this connection is in a handler (its body bytes are the body reader's).
    pub in_request: AtomicBool,
    /// Budget bytes held for what was read outside handlers.
    pub held: AtomicUsize,
}

impl ConnState {
    /// A handler starts: the bytes read for its head are no longer pending.
    pub fn enter(&self, limits: &Limits) {
        self.in_request.store(true, Relaxed);
        limits.release(self.held.swap(0, Relaxed));
    }
    pub fn leave(&self) {
        self.in_request.store(false, Relaxed);
    }
}

/// A client's socket: plain TCP, or TLS over it (`serve --tls-cert`).
pub(crate) enum Sock {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Sock {
    /// Best-effort write of a whole small reply without waiting (plain sockets only: on
    /// TLS the bytes would have to be encrypted, and the connection is just closed).
    fn try_write(&self, buf: &[u8]) {
        if let Sock::Plain(s) = self {
            let _ = s.try_write(buf);
        }
    }
}

impl AsyncRead for Sock {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Sock::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Sock::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Sock {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Sock::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Sock::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Sock::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Sock::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Sock::Plain(s) => s.is_write_vectored(),
            Sock::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Sock::Plain(s) => Pin::new(s).poll_flush(cx),
            Sock::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Sock::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Sock::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

pub(crate) struct Metered {
    /// `Some` until dropped (then it may be handed to [`linger`]).
    io: Option<Sock>,
    /// The server is closing this connection (an error reply of ours, or hyper shutting it
    /// down) while the client had not finished sending: linger before the close.
    closing: bool,
    /// The client closed its sending side.
    eof: bool,
    conn: Arc<ConnState>,
    limits: Arc<Limits>,
    stats: Arc<Stats>,
    /// Our reply in place of hyper's bare one, and how much of it is written.
    pending: Option<(Vec<u8>, usize)>,
}

impl Metered {
    pub fn new(io: Sock, conn: Arc<ConnState>, limits: Arc<Limits>, stats: Arc<Stats>) -> Metered {
        Metered {
            io: Some(io),
            closing: false,
            eof: false,
            conn,
            limits,
            stats,
            pending: None,
        }
    }

    fn io(&mut self) -> &mut Sock {
        self.io
            .as_mut()
            .expect("the socket is there until the connection is dropped")
    }

    /// Write what is left of our replacement reply.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((buf, at)) = &mut self.pending {
            if *at >= buf.len() {
                self.pending = None;
                break;
            }
            let io = self.io.as_mut().expect("the socket is there until dropped");
            let n = ready!(Pin::new(io).poll_write(cx, &buf[*at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *at += n;
        }
        Poll::Ready(Ok(()))
    }

    /// If `head` is hyper's own reply to a request it could not parse, queue ours instead.
    fn rewrite(&mut self, head: &[u8]) -> bool {
        let Some(code) = hyper_error(head) else {
            return false;
        };
        let message = match code {
            Code::HeadersTooLarge => format!(
                "the request's headers are larger than the limit of {} bytes (serve --max-header-bytes)",
                self.limits.max_header
            ),
            Code::UriTooLong => "the request target (URI) is too long".to_string(),
            _ => "the request is not valid HTTP/1.1 (malformed request line or header)".to_string(),
        };
        self.stats.count(code);
        self.pending = Some((raw_reply(code, &message), 0));
        self.closing = true;
        true
    }
}

/// The code of a bare reply hyper's parser writes (`HTTP/1.1 400 Bad Request`,
/// `content-length: 0`, no content type: our handlers always send one).
fn hyper_error(head: &[u8]) -> Option<Code> {
    if head.len() < 16 || !head.starts_with(b"HTTP/1.") {
        return None;
    }
    let code = match &head[9..13] {
        b"400 " => Code::BadRequest,
        b"414 " => Code::UriTooLong,
        b"431 " => Code::HeadersTooLarge,
        _ => return None,
    };
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    let h = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
    (h.contains("\r\ncontent-length: 0") && !h.contains("\r\ncontent-type:")).then_some(code)
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.limits.release(self.conn.held.swap(0, Relaxed));
        if let Some(io) = self.io.take() {
            if self.closing && !self.eof && self.limits.lingering.load(Relaxed) < LINGER_MAX {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    self.limits.lingering.fetch_add(1, Relaxed);
                    rt.spawn(linger(io, self.limits.clone()));
                }
            }
        }
    }
}

/// Close a connection the server gave up on without resetting it: closing a socket with
/// unread data makes the kernel send RST, and a client still sending would then lose the
/// reply it has not read yet. Send FIN, read and discard what the client still sends (at
/// most 1 MiB, for at most 0.5 s), then close. At most [`LINGER_MAX`] at once (past that a
/// connection is closed at once).
async fn linger(io: Sock, limits: Arc<Limits>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut io = io;
    let _ = io.shutdown().await;
    let mut scratch = [0u8; 2048];
    let mut seen = 0usize;
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), async {
        while seen < 1 << 20 {
            match io.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen += n,
            }
        }
    })
    .await;
    limits.lingering.fetch_sub(1, Relaxed);
}

/// Connections lingering at once.
const LINGER_MAX: usize = 1024;

impl AsyncRead for Metered {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let room = buf.remaining() > 0;
        ready!(Pin::new(this.io()).poll_read(cx, buf))?;
        let n = buf.filled().len() - before;
        if n == 0 && room {
            this.eof = true;
        }
        if n > 0 && !this.conn.in_request.load(Relaxed) {
            let total = this.conn.held.load(Relaxed) + n;
            if this.limits.try_reserve(n, total) {
                this.conn.held.fetch_add(n, Relaxed);
            } else {
                // Over the budget while reading a request head: answer 503 (best effort:
                // no reply is in progress, the socket's send buffer is empty) and close.
                let reply = raw_reply(Code::Overloaded, &this.limits.over_budget().message);
                this.io().try_write(&reply);
                this.closing = true;
                this.stats.count(Code::Overloaded);
                buf.set_filled(before);
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "byte budget spent",
                )));
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if this.rewrite(buf) {
            // Ours replaces all of hyper's bytes; what is not written now is by flush.
            let _ = this.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(this.io()).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if let Some(first) = bufs.iter().find(|b| !b.is_empty()) {
            if this.rewrite(first) {
                let _ = this.poll_pending(cx)?;
                return Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()));
            }
        }
        Pin::new(this.io()).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.as_ref().is_some_and(|io| io.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(this.io()).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        // hyper closes the connection (after a reply with `connection: close`, say): what
        // the client still sends is read off by `linger` after the drop, not reset.
        this.closing = true;
        Pin::new(this.io()).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_hypers_bare_replies_only() {
        let bare =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(hyper_error(bare), Some(Code::HeadersTooLarge));
        let bad = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hyper_error(bad), Some(Code::BadRequest));
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hyper_error(ours), None);
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hyper_error(ok), None);
        assert_eq!(hyper_error(b"{\"hits\":[]}"), None);
    }
}
