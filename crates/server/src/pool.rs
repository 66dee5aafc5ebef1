//! Admission control and the CPU pool.
//!
//! **Admission** ([`Admission`]) is in front of every backend: at most `max_inflight +
//! queue` requests hold a [`Permit`] at once; the oldest `max_inflight` of them count as
//! "in flight", the rest as "queued". A request that finds no place is refused at once
//! (503). The permit travels with the work and is dropped when the work ends, *before* the
//! reply is sent, so a client that sends its next request as soon as it has a reply finds
//! the place free.
//!
//! **The pool** ([`Pool`]) is a fixed set of OS threads that run CPU work (searches) from
//! one FIFO channel. Searches never run on the async runtime's threads; results come back
//! through a oneshot. When a job ends, its worker takes the next one from the FIFO itself,
//! so the pool never waits for the (possibly busy) I/O thread to hand it work: under a
//! flood of refused requests, the admitted ones still keep every core busy.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Places for admitted requests.
pub(crate) struct Admission {
    admitted: Arc<AtomicUsize>,
    capacity: usize,
    max_inflight: usize,
}

/// One admitted request's place; freed on drop.
pub struct Permit {
    admitted: Arc<AtomicUsize>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Admission {
    pub fn new(max_inflight: usize, queue: usize) -> Admission {
        Admission {
            admitted: Arc::new(AtomicUsize::new(0)),
            capacity: max_inflight.saturating_add(queue),
            max_inflight,
        }
    }
    /// A place, or `None` at once when `max_inflight + queue` are taken.
    pub fn try_admit(&self) -> Option<Permit> {
        let before = self.admitted.fetch_add(1, Ordering::AcqRel);
        if before >= self.capacity {
            self.admitted.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Permit {
            admitted: self.admitted.clone(),
        })
    }
    fn admitted(&self) -> usize {
        self.admitted.load(Ordering::Relaxed)
    }
    /// Admitted requests counted as in flight (the oldest `max_inflight`).
    pub fn inflight(&self) -> usize {
        self.admitted().min(self.max_inflight)
    }
    /// Admitted requests waiting behind the in-flight ones.
    pub fn queued(&self) -> usize {
        self.admitted().saturating_sub(self.max_inflight)
    }
}

/// Why a job produced no value.
#[derive(Debug)]
pub enum JobFailure {
    /// The deadline had passed before a worker picked the job up; it was not started.
    NotStarted,
    /// The work panicked (a bug); the message is for the log.
    Panicked(String),
    /// The pool is shut down.
    Closed,
}

type Task = Box<dyn FnOnce(bool) + Send>;

struct Job {
    deadline: Instant,
    /// Runs the work (argument: the deadline had already passed) and sends the reply.
    task: Task,
}

/// Handle to the pool. Dropping it closes the channel; the workers then finish what they
/// have and exit.
pub struct Pool {
    tx: crossbeam_channel::Sender<Job>,
    running: Arc<AtomicUsize>,
}

impl Pool {
    /// Start `threads` workers; `delay` (tests, demos) sleeps before each job.
    pub fn start(threads: usize, delay: Option<Duration>) -> std::io::Result<Pool> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let running = Arc::new(AtomicUsize::new(0));
        for i in 0..threads {
            let rx = rx.clone();
            let running = running.clone();
            std::thread::Builder::new()
                .name(format!("searchd-search-{i}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        let expired = Instant::now() >= job.deadline;
                        running.fetch_add(1, Ordering::Relaxed);
                        if let (Some(d), false) = (delay, expired) {
                            std::thread::sleep(d);
                        }
                        (job.task)(expired);
                        running.fetch_sub(1, Ordering::Relaxed);
                    }
                })?;
        }
        Ok(Pool { tx, running })
    }

    /// Run `work` on a worker under `permit` and wait for its value. The work is not started
    /// when its deadline passed while it waited, or when the caller went away (the future
    /// was dropped); the permit is released before the value is sent back.
    pub async fn run<T, F>(
        &self,
        permit: Option<Permit>,
        deadline: Instant,
        work: F,
    ) -> Result<T, JobFailure>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<T, JobFailure>>();
        let task: Task = Box::new(move |expired: bool| {
            // The client went away while the job waited: do not spend a core on it.
            if tx.is_closed() {
                drop(permit);
                return;
            }
            let out = if expired {
                Err(JobFailure::NotStarted)
            } else {
                catch_unwind(AssertUnwindSafe(work)).map_err(|p| {
                    JobFailure::Panicked(
                        p.downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "unknown panic".into()),
                    )
                })
            };
            drop(permit);
            let _ = tx.send(out);
        });
        if self.tx.send(Job { deadline, task }).is_err() {
            return Err(JobFailure::Closed);
        }
        rx.await.unwrap_or(Err(JobFailure::Closed))
    }

    /// Jobs running on a worker right now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}
