//! The CPU pool: a fixed set of OS threads that run searches, fed by one FIFO channel.
//! Searches never run on the async runtime's threads; results come back through a oneshot.
//!
//! Admission control lives here too: at most `max_inflight + queue` searches are admitted
//! at once; the oldest `max_inflight` of them are "in flight", the rest "queued". When a
//! search ends, its worker takes the next job from the FIFO itself, so the pool never
//! waits for the (possibly busy) I/O thread to hand it work: under a flood of requests
//! that are refused, the admitted ones still keep every core busy.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use searchd_engine::{Hit, Index, SearchError, SearchParams};
use searchd_vecio::Vectors;
use tokio::sync::oneshot;

/// What to search for.
pub(crate) enum Query {
    /// A vector from the request body.
    Vector(Vec<f32>),
    /// Row `usize` of the query matrix.
    Row(Arc<Vectors>, usize),
    /// The stored vector of this id, which is left out of the hits ("more like this").
    Stored(u64),
}

pub(crate) struct Job {
    pub index: Arc<Index>,
    pub query: Query,
    pub k: usize,
    pub ef: usize,
    pub oversample: Option<f32>,
    pub deadline: Instant,
    pub reply: oneshot::Sender<Outcome>,
}

pub(crate) enum Outcome {
    Hits(Vec<Hit>),
    Search(SearchError),
    /// The deadline had passed before a worker picked the job up; it was not started.
    NotStarted,
    /// The stored vector of a `Stored` query no longer exists (index swapped in between).
    UnknownId(u64),
    /// The search panicked (a bug); the message is for the log.
    Panicked(String),
}

/// Counters shared by the handle and the workers.
struct Shared {
    /// Jobs admitted and not finished (in the FIFO or running).
    admitted: AtomicUsize,
    /// Jobs running on a worker.
    running: AtomicUsize,
}

/// Handle to the pool. Dropping it closes the channel; the workers then finish what they
/// have and exit.
pub(crate) struct Pool {
    tx: crossbeam_channel::Sender<Job>,
    shared: Arc<Shared>,
    capacity: usize,
    max_inflight: usize,
}

impl Pool {
    pub fn start(
        threads: usize,
        max_inflight: usize,
        queue: usize,
        delay: Option<Duration>,
    ) -> std::io::Result<Pool> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let shared = Arc::new(Shared {
            admitted: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
        });
        for i in 0..threads {
            let rx = rx.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("searchd-search-{i}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        run(job, delay, &shared);
                    }
                })?;
        }
        Ok(Pool {
            tx,
            shared,
            capacity: max_inflight.saturating_add(queue),
            max_inflight,
        })
    }

    /// Admit a job, or give it back at once when `max_inflight + queue` are admitted.
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        let before = self.shared.admitted.fetch_add(1, Ordering::AcqRel);
        if before >= self.capacity {
            self.shared.admitted.fetch_sub(1, Ordering::AcqRel);
            return Err(job);
        }
        self.tx.send(job).map_err(|e| {
            self.shared.admitted.fetch_sub(1, Ordering::AcqRel);
            e.into_inner()
        })
    }

    /// Admitted searches counted as in flight (the oldest `max_inflight`).
    pub fn inflight(&self) -> usize {
        self.admitted().min(self.max_inflight)
    }
    /// Admitted searches waiting behind the in-flight ones.
    pub fn queued(&self) -> usize {
        self.admitted().saturating_sub(self.max_inflight)
    }
    /// Searches running on a worker right now.
    pub fn running(&self) -> usize {
        self.shared.running.load(Ordering::Relaxed)
    }
    fn admitted(&self) -> usize {
        self.shared.admitted.load(Ordering::Relaxed)
    }
}

fn run(job: Job, delay: Option<Duration>, shared: &Shared) {
    let Job {
        index,
        query,
        k,
        ef,
        oversample,
        deadline,
        reply,
    } = job;
    // The client went away while the job waited: do not spend a core on it.
    if reply.is_closed() {
        return finish(shared, reply, None);
    }
    if Instant::now() >= deadline {
        return finish(shared, reply, Some(Outcome::NotStarted));
    }
    shared.running.fetch_add(1, Ordering::Relaxed);
    if let Some(d) = delay {
        std::thread::sleep(d);
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        search(&index, &query, k, ef, oversample, deadline)
    }))
    .unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Outcome::Panicked(msg)
    });
    shared.running.fetch_sub(1, Ordering::Relaxed);
    finish(shared, reply, Some(outcome));
    // `index` (an Arc) drops here: after a reload the old index is freed by the last
    // search that used it.
}

/// Free the job's place, then reply. Freeing first means a client that sends its next
/// request as soon as it has this reply finds the place free.
fn finish(shared: &Shared, reply: oneshot::Sender<Outcome>, outcome: Option<Outcome>) {
    shared.admitted.fetch_sub(1, Ordering::AcqRel);
    if let Some(o) = outcome {
        let _ = reply.send(o);
    }
}

fn search(
    index: &Index,
    query: &Query,
    k: usize,
    ef: usize,
    oversample: Option<f32>,
    deadline: Instant,
) -> Outcome {
    let mut params = SearchParams::new(k, ef.max(k));
    params.deadline = Some(deadline);
    params.oversample = oversample;
    let result = match query {
        Query::Vector(v) => index.search(v, &params),
        Query::Row(m, i) => index.search(m.row(*i), &params),
        Query::Stored(id) => {
            let Some(v) = index.vector(*id) else {
                return Outcome::UnknownId(*id);
            };
            // Leave the query's own row out of its hits. Filters see internal (storage
            // order) ids.
            let Some(own) = index.internal(*id) else {
                return Outcome::UnknownId(*id);
            };
            let not_self = move |i: u32| i != own;
            params.filter = Some(&not_self);
            index.search(&v, &params)
        }
    };
    match result {
        Ok(h) => Outcome::Hits(h),
        Err(e) => Outcome::Search(e),
    }
}
