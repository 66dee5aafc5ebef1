//! What the server holds before admission: a global byte budget for requests being read
//! (headers and bodies, over all connections), the connection cap, the body reader that
//! enforces both with the body limit and the read timeout, the bounded drain behind a 413,
//! the abort of stalled uploads at shutdown, and returning freed memory after bursts.
//!
//! - **Budget** (`--max-pending-bytes`): every byte read from a connection while it has no
//!   request in a handler (headers, and whatever hyper read ahead) is reserved until the
//!   handler starts; a body reserves its declared `Content-Length` before it is read (or
//!   each chunk as it arrives when none is declared), and keeps the reservation while the
//!   request is processed (the `Bytes` own it). The first 16 KiB of each request may use
//!   the whole budget, the rest only three quarters of it, so big uploads leave room for
//!   small requests. A request that cannot reserve gets `503
//!   overloaded` with `Retry-After: 1` and the connection is closed; so many slow uploads
//!   cannot hold more than the budget, whatever their number. A body that could never
//!   reserve its bytes, even with nothing else in flight (larger than three quarters of the
//!   budget), gets `413 body_too_large` naming `--max-pending-bytes` instead: a 503 tells
//!   clients to retry, and that one would be retried forever.
//! - **Connections** (`--max-connections`): past the cap, a connection is served by a
//!   minimal HTTP/1.1 responder (no keep-alive, 8 KiB header buffer, 1 s header timeout)
//!   that answers `/health`, `/healthz`, `/ready`, `/readyz` normally and everything else
//!   `503 overloaded`; at most [`OVERFLOW_MAX`] such connections at once, beyond which new
//!   connections are closed as soon as they are accepted. Probes keep working at the cap.
//! - **413** (`--body-limit`): the server reads and discards up to [`DRAIN_MAX`] bytes of the
//!   rest of the upload (for at most [`DRAIN_TIME`]) before answering, so a client that sends
//!   its whole body before reading (Python `requests`, curl without `Expect`) sees the 413,
//!   not a broken pipe; a larger upload is cut at once. A client that sent `Expect:
//!   100-continue` gets the 413 without sending its body.
//! - **Shutdown**: [`SHUTDOWN_BODY_GRACE`] after SIGTERM, requests still reading their body are
//!   answered `503 shutting_down` and their connections closed, so the drain does not wait
//!   for stalled uploads.
//! - **Memory after bursts**: large body buffers are always `mmap`ped (glibc's
//!   `M_MMAP_THRESHOLD` is pinned at 256 KiB, which stops its dynamic threshold from moving
//!   them into the heap; not in a server with a model, whose tensors would then fault in
//!   their pages on every batch), and after a burst (the budget's peak was large and is back near
//!   zero) `malloc_trim(0)` returns freed heap pages to the kernel.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::header;
use bytes::Bytes;
use http_body_util::BodyExt;

use crate::error::{ApiError, Code};

/// Default `--max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default `--max-pending-bytes` (64 MiB).
pub const DEFAULT_MAX_PENDING_BYTES: usize = 64 << 20;
/// Default `--max-header-bytes` (64 KiB): hyper's read buffer, so the largest request head.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 << 10;
/// Bytes of one request that may use the whole byte budget (the rest may use three
/// quarters of it).
pub const SMALL_REQUEST: usize = 16 << 10;
/// Connections past `--max-connections` answered by the minimal responder at once.
pub const OVERFLOW_MAX: usize = 256;
/// Most bytes of an oversized upload read and discarded before its 413.
pub const DRAIN_MAX: u64 = 8 << 20;
/// Longest time spent discarding an oversized upload before its 413.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);
/// After the shutdown signal, how long a request may still take to receive its body.
pub const SHUTDOWN_BODY_GRACE: Duration = Duration::from_millis(500);

/// Budget and connection counters shared by the accept loop, the connections and the body
/// reader.
pub(crate) struct Limits {
    pub max_connections: usize,
    pub max_pending: usize,
    pub max_header: usize,
    pending: AtomicUsize,
    /// Highest `pending` since the last trim.
    peak: AtomicUsize,
    pub open: AtomicUsize,
    pub overflow: AtomicUsize,
    /// Connections answered by the minimal responder or closed at once (over the cap).
    pub refused_connections: AtomicU64,
    /// Requests refused because the byte budget was spent.
    pub refused_budget: AtomicU64,
    /// Most connections answered by the minimal responder at once (past the cap).
    pub overflow_max: usize,
    /// TLS handshakes that failed, timed out, or met plain HTTP.
    pub tls_failures: AtomicU64,
    pub trims: AtomicU64,
    /// When to trim the heap for growth.
    heap: parking_lot::Mutex<HeapWatch>,
    /// Closed connections still reading off what their client sends (`conn::linger`).
    pub lingering: AtomicUsize,
    stopping: tokio::sync::watch::Sender<bool>,
    pub reload_busy: AtomicBool,
}

/// Descriptors kept for everything but client connections (listener, logs, segment
/// files, the audit log, Qdrant channels, ...).
pub const FILES_KEPT: u64 = 64;

/// `--max-connections` and the overflow responder's share within the open-files limit
/// `nofile`: a cap over it would let accepted connections take the descriptors that
/// `/health`, the log and the collections' files need (with `ulimit -n 200` and 400 held
/// connections, `/health` timed out). Returns `(max_connections, overflow_max)`.
pub fn clamp_to_files(requested: usize, nofile: u64) -> (usize, usize) {
    let room = nofile.saturating_sub(FILES_KEPT).min(usize::MAX as u64) as usize;
    let overflow = OVERFLOW_MAX.min(room / 4);
    (requested.min(room - overflow).max(1), overflow.max(1))
}

impl Limits {
    /// The caps; with `nofile` (the open-files limit) the connection caps are fitted
    /// within it ([`clamp_to_files`]), with a warning when `--max-connections` is lowered.
    pub fn new(
        max_connections: usize,
        max_pending: usize,
        max_header: usize,
        nofile: Option<u64>,
    ) -> Arc<Limits> {
        let (cap, overflow_max) = match nofile {
            Some(n) => clamp_to_files(max_connections, n),
            None => (max_connections, OVERFLOW_MAX),
        };
        if cap < max_connections {
            tracing::warn!(
                "--max-connections {max_connections} is over what the open-files limit ({}) allows: serving at most {cap} connections (raise `ulimit -n` to serve more)",
                nofile.unwrap_or(0)
            );
        }
        Arc::new(Limits {
            max_connections: cap.max(1),
            max_pending: max_pending.max(1),
            max_header: max_header.max(8192),
            pending: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            overflow: AtomicUsize::new(0),
            refused_connections: AtomicU64::new(0),
            refused_budget: AtomicU64::new(0),
            overflow_max,
            tls_failures: AtomicU64::new(0),
            trims: AtomicU64::new(0),
            heap: parking_lot::Mutex::new(HeapWatch::new()),
            lingering: AtomicUsize::new(0),
            stopping: tokio::sync::watch::channel(false).0,
            reload_busy: AtomicBool::new(false),
        })
    }

    /// Bytes of requests being read (or held by handlers) now.
    pub fn pending(&self) -> usize {
        self.pending.load(Relaxed)
    }

    /// The most a request of `total` bytes may hold of the budget: the whole budget for
    /// the first [`SMALL_REQUEST`] bytes, three quarters of it beyond.
    fn ceiling(&self, total: usize) -> usize {
        if total <= SMALL_REQUEST {
            self.max_pending
        } else {
            self.max_pending / 4 * 3
        }
    }

    /// The largest body a request may have and still fit the budget when nothing else is
    /// being read.
    pub fn largest_body(&self) -> usize {
        self.ceiling(usize::MAX)
            .max(self.max_pending.min(SMALL_REQUEST))
    }

    /// The 413 of a body that can never fit the budget (`total`: its declared size, or
    /// what had arrived of it when it went past, then `partial`).
    pub fn never_fits(&self, total: usize, partial: bool) -> ApiError {
        let room = self.largest_body();
        // The budget whose three quarters hold `total`.
        let needed = total.div_ceil(3).saturating_mul(4);
        ApiError::new(
            Code::BodyTooLarge,
            format!(
                "the request body ({}{total} bytes) is larger than one request may hold while it is read: {room} bytes, three quarters of the {} byte budget (serve --max-pending-bytes); raise --max-pending-bytes to at least {needed} bytes, or send smaller requests",
                if partial { "at least " } else { "" },
                self.max_pending
            ),
        )
        .closing()
    }

    /// Take `n` more bytes of the budget for a request that then holds `total` bytes, or
    /// refuse (and count the refusal). The first [`SMALL_REQUEST`] bytes of each request
    /// may use the whole budget; bytes beyond that only its first three quarters, so
    /// large or slow uploads cannot take the room small requests (searches, probes) need.
    pub fn try_reserve(&self, n: usize, total: usize) -> bool {
        if n == 0 {
            return true;
        }
        let ceiling = self.ceiling(total);
        let ok = self
            .pending
            .fetch_update(Relaxed, Relaxed, |p| {
                let next = p.checked_add(n)?;
                (next <= ceiling).then_some(next)
            })
            .map(|prev| self.peak.fetch_max(prev + n, Relaxed))
            .is_ok();
        if !ok {
            self.refused_budget.fetch_add(1, Relaxed);
        }
        ok
    }

    pub fn release(&self, n: usize) {
        if n > 0 {
            self.pending.fetch_sub(n, Relaxed);
        }
    }

    /// The shutdown signal has been given.
    pub fn begin_shutdown(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves [`SHUTDOWN_BODY_GRACE`] after the shutdown signal.
    async fn aborted(&self) {
        let mut rx = self.stopping.subscribe();
        if rx.wait_for(|s| *s).await.is_err() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(SHUTDOWN_BODY_GRACE).await;
    }

    /// The 503 of a request that could not reserve its bytes.
    pub fn over_budget(&self) -> ApiError {
        ApiError::new(
            Code::Overloaded,
            format!(
                "the server is holding its maximum of {} bytes of requests being read (serve --max-pending-bytes); retry later",
                self.max_pending
            ),
        )
        .closing()
    }

    /// The 503 of a connection over `--max-connections`.
    pub fn over_connections(&self) -> ApiError {
        ApiError::new(
            Code::Overloaded,
            format!(
                "the server has its maximum of {} connections open (serve --max-connections); retry later",
                self.max_connections
            ),
        )
        .closing()
    }

    /// Called once a second. Gives freed heap memory back to the kernel after a burst of
    /// uploads (the budget's peak since the last trim was at least 4 MiB and the budget is
    /// now nearly empty), or after work that grew the heap (the process's anonymous
    /// resident memory is [`HEAP_GROWTH`] over its level after the last trim: facets over
    /// many values, large replies, many hits with their fields, which the body budget does
    /// not see; glibc keeps those pages resident once freed, so without a trim the
    /// aggregation bomb's variants left RSS 2x its baseline for good).
    pub fn maybe_trim(self: &Arc<Self>) {
        if !heap_tuning() {
            return;
        }
        let peak = self.peak.load(Relaxed);
        let burst = peak >= 4 << 20 && self.pending() <= 256 << 10;
        if burst {
            self.peak.store(self.pending(), Relaxed);
        }
        let grown = anon_rss().is_some_and(|rss| self.heap.lock().due(rss, Instant::now()));
        if burst || grown {
            self.trims.fetch_add(1, Relaxed);
            let limits = self.clone();
            tokio::task::spawn_blocking(move || {
                trim_heap();
                if let Some(after) = anon_rss() {
                    limits.heap.lock().trimmed(after, grown, Instant::now());
                }
            });
        }
    }
}

/// Growth of anonymous resident memory over its level after the last trim that makes the
/// next tick trim the heap.
pub const HEAP_GROWTH: usize = 32 << 20;
/// A trim that gave back less than this was in vain (the memory is in use): the next one
/// waits twice as long, up to [`HEAP_TRIM_MAX_WAIT`].
const HEAP_TRIM_USEFUL: usize = 8 << 20;
/// Longest wait between two trims while memory stays over the level.
const HEAP_TRIM_MAX_WAIT: Duration = Duration::from_secs(8);

/// When to trim the heap for growth ([`Limits::maybe_trim`]).
#[derive(Debug)]
pub(crate) struct HeapWatch {
    /// The lowest anonymous RSS seen right after a trim (or at the first tick): the
    /// server's own memory. It only goes down, so memory in use during a trim under load
    /// does not become the level that memory freed after the load is measured against.
    level: Option<usize>,
    /// RSS right before the last trim for growth.
    before: usize,
    /// No trim for growth before this.
    next: Option<Instant>,
    /// The wait after a trim: 1 s, doubled after each trim in vain, reset by a useful one.
    wait: Duration,
}

impl HeapWatch {
    pub(crate) const fn new() -> HeapWatch {
        HeapWatch {
            level: None,
            before: 0,
            next: None,
            wait: Duration::from_secs(1),
        }
    }

    /// Whether a trim is due with anonymous RSS `rss` at `now` (and then, that it started).
    pub(crate) fn due(&mut self, rss: usize, now: Instant) -> bool {
        let level = *self.level.get_or_insert(rss);
        if rss < level.saturating_add(HEAP_GROWTH) || self.next.is_some_and(|t| now < t) {
            return false;
        }
        self.before = rss;
        // Until the trim reports, no other one.
        self.next = Some(now + HEAP_TRIM_MAX_WAIT);
        true
    }

    /// A trim ended with anonymous RSS `after`; `grown`: it was a trim for growth
    /// ([`HeapWatch::due`]), not only a burst's.
    pub(crate) fn trimmed(&mut self, after: usize, grown: bool, now: Instant) {
        self.level = Some(self.level.map_or(after, |l| l.min(after)));
        if !grown {
            return;
        }
        self.wait = if self.before.saturating_sub(after) >= HEAP_TRIM_USEFUL {
            Duration::from_secs(1)
        } else {
            (self.wait * 2).min(HEAP_TRIM_MAX_WAIT)
        };
        self.before = after;
        self.next = Some(now + self.wait);
    }
}

/// This process's anonymous resident memory (`RssAnon` of `/proc/self/status`).
fn anon_rss() -> Option<usize> {
    searchd_os::proc::status(searchd_os::proc::Of::This)?
        .rss_anon_bytes
        .map(|b| b as usize)
}

/// With `pin`, pin glibc's mmap threshold (large body buffers then go back to the kernel
/// when freed, instead of fragmenting the heap once the dynamic threshold has grown).
/// Process-wide; called once when a server starts. A server with a model passes `false`:
/// the model's per-batch tensors would each be a fresh mmap (page faults on every batch).
pub(crate) fn tune_allocator(pin: bool) {
    if !heap_tuning() || !pin {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
    }
}

/// The mmap threshold and the trims are on unless `SEARCHD_NO_HEAP_TUNING` is set (a
/// measurement aid: `bench/trickle_abuse.py` compares both).
fn heap_tuning() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SEARCHD_NO_HEAP_TUNING").is_none())
}

/// Return free heap pages to the kernel.
pub(crate) fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A part of the budget, given back when dropped.
pub(crate) struct Reservation {
    limits: Arc<Limits>,
    n: usize,
}

impl Reservation {
    fn take(limits: &Arc<Limits>, n: usize) -> Option<Reservation> {
        limits.try_reserve(n, n).then(|| Reservation {
            limits: limits.clone(),
            n,
        })
    }
    /// Hold at least `total` bytes.
    fn grow_to(&mut self, total: usize) -> bool {
        if total <= self.n {
            return true;
        }
        if self.limits.try_reserve(total - self.n, total) {
            self.n = total;
            true
        } else {
            false
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.limits.release(self.n);
    }
}

/// A body and its part of the budget: the bytes count until the last clone is dropped.
struct Held {
    buf: Vec<u8>,
    _r: Reservation,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

/// Read the whole body of `req` under the body limit, the read timeout, the byte budget and
/// the shutdown grace (the content type was checked by the caller).
pub(crate) async fn read_body(
    limits: &Arc<Limits>,
    read_timeout: Duration,
    req: Request,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let expects_continue = req
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let mut body = req.into_body();
    let too_large = || {
        ApiError::new(
            Code::BodyTooLarge,
            format!(
                "the request body is larger than the limit of {limit} bytes (serve --body-limit; --write-body-limit for writes)"
            ),
        )
        .closing()
    };
    if let Some(len) = declared {
        let never = len > limits.largest_body() as u64;
        if len > limit as u64 || never {
            // Nothing read yet: a client waiting for 100 Continue sends nothing more; one
            // that is already sending gets its upload drained (within bounds) first.
            if !expects_continue && len <= DRAIN_MAX {
                drain(&mut body, DRAIN_MAX).await;
            }
            return Err(if len > limit as u64 {
                too_large()
            } else {
                limits.never_fits(len as usize, false)
            });
        }
    }
    let Some(mut held) = Reservation::take(limits, declared.unwrap_or(0) as usize) else {
        return Err(limits.over_budget());
    };
    let mut buf: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0) as usize);
    let timeout = tokio::time::sleep(read_timeout);
    let aborted = limits.aborted();
    tokio::pin!(timeout, aborted);
    loop {
        let frame = tokio::select! {
            biased;
            f = body.frame() => f,
            _ = &mut timeout => {
                return Err(ApiError::new(
                    Code::RequestTimeout,
                    format!(
                        "the request body did not arrive within {} ms (serve --read-timeout-ms)",
                        read_timeout.as_millis()
                    ),
                )
                .closing())
            }
            _ = &mut aborted => {
                return Err(ApiError::new(
                    Code::ShuttingDown,
                    "the server is shutting down and the request body had not arrived; retry",
                )
                .closing())
            }
        };
        match frame {
            None => break,
            Some(Err(e)) => {
                return Err(ApiError::new(
                    Code::InvalidJson,
                    format!("cannot read the request body: {e}"),
                )
                .closing())
            }
            Some(Ok(f)) => {
                let Ok(data) = f.into_data() else { continue };
                let total = buf.len() + data.len();
                if total > limit {
                    drain(&mut body, DRAIN_MAX.saturating_sub(total as u64)).await;
                    return Err(too_large());
                }
                if total > limits.largest_body() {
                    drain(&mut body, DRAIN_MAX.saturating_sub(total as u64)).await;
                    return Err(limits.never_fits(total, true));
                }
                if !held.grow_to(total) {
                    return Err(limits.over_budget());
                }
                buf.extend_from_slice(&data);
            }
        }
    }
    if buf.is_empty() {
        return Ok(Bytes::new());
    }
    Ok(Bytes::from_owner(Held { buf, _r: held }))
}

/// Read and discard up to `max` more bytes of `body`, for at most [`DRAIN_TIME`].
async fn drain(body: &mut axum::body::Body, max: u64) {
    let mut seen = 0u64;
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        while seen <= max {
            match body.frame().await {
                Some(Ok(f)) => {
                    if let Some(d) = f.data_ref() {
                        seen += d.len() as u64;
                    }
                }
                _ => break,
            }
        }
    })
    .await;
}

#[cfg(test)]
mod file_limit_tests {
    use super::*;

    #[test]
    fn the_connection_cap_fits_the_open_files_limit() {
        // Plenty of descriptors: the cap asked for stands.
        assert_eq!(clamp_to_files(4096, 1 << 20), (4096, OVERFLOW_MAX));
        // ulimit -n 200: 136 descriptors for clients, a quarter for the overflow responder.
        let (cap, over) = clamp_to_files(4096, 200);
        assert_eq!((cap, over), (102, 34));
        assert!(cap as u64 + over as u64 + FILES_KEPT <= 200);
        // Absurdly low limits still serve one connection.
        assert_eq!(clamp_to_files(4096, 10).0, 1);
        assert_eq!(clamp_to_files(10, 1 << 20).0, 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    /// Memory freed after load is trimmed even when a trim under that load found it in use;
    /// trims in vain back off; useful ones keep the pace at a second.
    #[test]
    fn heap_watch_trims_growth_and_backs_off_when_in_vain() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut w = HeapWatch::new();
        assert!(!w.due(100 * MB, s(0)), "the first reading is the level");
        assert!(!w.due(100 * MB + HEAP_GROWTH - 1, s(1)));
        // Under load: 300 MB, in use, so the trim gives nothing back.
        assert!(w.due(300 * MB, s(2)));
        assert!(!w.due(300 * MB, s(2)), "one trim at a time");
        w.trimmed(299 * MB, true, s(3));
        assert!(!w.due(299 * MB, s(4)), "a trim in vain waits 2 s");
        // The load is over; its memory is free but resident: still over the level.
        assert!(w.due(299 * MB, s(5)));
        w.trimmed(110 * MB, true, s(5));
        assert!(!w.due(110 * MB, s(6)), "back within the growth allowed");
        assert!(w.due(200 * MB, s(6)), "a useful trim keeps the pace at 1 s");
        // Memory in use for good: the waits grow to HEAP_TRIM_MAX_WAIT and stay there.
        let mut now = s(6);
        for _ in 0..10 {
            w.trimmed(200 * MB, true, now);
            now += HEAP_TRIM_MAX_WAIT;
            assert!(w.due(200 * MB, now));
        }
        assert_eq!(w.wait, HEAP_TRIM_MAX_WAIT);
        // A burst's trim lowers the level without touching the pace.
        w.trimmed(90 * MB, false, now);
        assert_eq!(w.level, Some(90 * MB));
        assert_eq!(w.wait, HEAP_TRIM_MAX_WAIT);
    }
}
