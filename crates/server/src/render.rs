//! Large replies rendered, and large bodies parsed, off the I/O threads.
//!
//! The server's sockets are served by `--io-threads` async threads (one by default), and any
//! CPU work done on them delays every other request, `/health` included. Searches and reads
//! already run on the search pool; what was left on the I/O thread was turning a large
//! result into JSON (10,000 hits with `_source` and 60,000 buckets: 5 MB) and parsing a
//! large body (a 750 KB `terms` filter): tens to hundreds of ms each, which the aggregation
//! bomb turned into a `/health` p99 of 300 ms (`bench/results/agg-bomb.notes.md`).
//!
//! [`Renders::offload`] runs such work on a blocking thread instead, holding one of [`Renders`]'
//! permits: at most that many large renders (and their reply buffers) at once, so a burst
//! of large replies queues for a permit instead of all being built together. The wait for
//! a permit is bounded by the request's deadline: past it the request is answered 504
//! `deadline_exceeded` at once, so the reply is still on time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::error::{ApiError, Code};

/// A body at least this large is parsed off the I/O thread (a 64 KiB JSON body takes about
/// a millisecond to parse; a 750 KB one tens, with its allocations).
pub(crate) const OFFLOAD_BODY_BYTES: usize = 64 * 1024;

/// A reply of at least this many hits and buckets together is rendered off the I/O thread
/// (below it, the hand-off costs more than the render).
pub(crate) const OFFLOAD_ITEMS: usize = 512;

/// The permits for large renders and parses, and the deadline they are bounded by (for
/// the 504's message).
pub(crate) struct Renders {
    sem: Arc<Semaphore>,
    timeout_ms: u128,
}

impl Renders {
    /// `permits` large renders at once (at least one); `timeout` is `--timeout-ms`.
    pub fn new(permits: usize, timeout: Duration) -> Renders {
        Renders {
            sem: Arc::new(Semaphore::new(permits.max(1))),
            timeout_ms: timeout.as_millis(),
        }
    }

    /// [`Renders::offload`] when `large`, else `work` right here (small work costs less
    /// than a hand-off).
    pub async fn offload_if<T, F>(
        &self,
        deadline: Instant,
        large: bool,
        work: F,
    ) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        if large {
            self.offload(deadline, work).await
        } else {
            Ok(work())
        }
    }

    /// Run `work` on a blocking thread under one of the permits, waiting for a permit at
    /// most until `deadline` (then 504). A render that panics (a bug) is a 500, never a
    /// crash.
    pub async fn offload<T, F>(&self, deadline: Instant, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let at = tokio::time::Instant::from_std(deadline);
        // `timeout_at` polls the acquisition first: a free permit is taken even at the
        // deadline.
        let permit = match tokio::time::timeout_at(at, self.sem.clone().acquire_owned()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => {
                return Err(ApiError::new(
                    Code::Internal,
                    "the render permits are closed (the server is shutting down)",
                ))
            }
            Err(_) => {
                return Err(ApiError::new(
                    Code::DeadlineExceeded,
                    format!(
                        "the reply was not rendered before the deadline ({} ms): other large replies were being rendered; retry, or ask for fewer hits, fields or buckets",
                        self.timeout_ms
                    ),
                ))
            }
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await
        .map_err(|e| {
            tracing::error!("rendering a reply failed: {e}");
            ApiError::new(
                Code::Internal,
                "rendering the reply failed with an internal error",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_render_waiting_past_its_deadline_is_a_504_and_a_panic_a_500() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let r = Renders::new(1, Duration::from_millis(100));
            // Work runs off this thread and its value comes back.
            let here = std::thread::current().id();
            let there = r
                .offload(Instant::now() + Duration::from_secs(5), move || {
                    std::thread::current().id()
                })
                .await
                .unwrap();
            assert_ne!(here, there);
            // With the only permit held, a render waits until its deadline, then is a 504.
            let held = r.sem.clone().acquire_owned().await.unwrap();
            assert_eq!(r.sem.available_permits(), 0);
            let t0 = Instant::now();
            let e = r
                .offload(t0 + Duration::from_millis(50), || 1)
                .await
                .unwrap_err();
            assert_eq!(e.code, Code::DeadlineExceeded);
            assert!(t0.elapsed() < Duration::from_millis(500));
            drop(held);
            // A panicking render is an internal error, and gives its permit back.
            let e = r
                .offload(Instant::now() + Duration::from_secs(5), || -> u8 {
                    panic!("a bug")
                })
                .await
                .unwrap_err();
            assert_eq!(e.code, Code::Internal);
            assert_eq!(r.sem.available_permits(), 1);
        });
    }
}
