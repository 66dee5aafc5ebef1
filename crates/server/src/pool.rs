//! The CPU pool: a fixed set of OS threads that run searches, fed by a channel. Searches
//! never run on the async runtime's threads; results come back through a oneshot.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use searchd_engine::{Hit, Index, SearchError, SearchParams};
use searchd_vecio::Vectors;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

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
    pub deadline: Instant,
    pub reply: oneshot::Sender<Outcome>,
    /// Admission slot, released when the worker is done with the job.
    pub permit: OwnedSemaphorePermit,
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

/// Handle to the pool. Dropping the last handle closes the channel; the workers then finish
/// what they have and exit.
pub(crate) struct Pool {
    tx: crossbeam_channel::Sender<Job>,
}

impl Pool {
    pub fn start(threads: usize, delay: Option<Duration>) -> std::io::Result<Pool> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("searchd-search-{i}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        run(job, delay);
                    }
                })?;
        }
        Ok(Pool { tx })
    }

    /// Hand a job to the workers. Never blocks: the number of jobs is bounded by admission.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        self.tx.send(job).map_err(|e| e.into_inner())
    }
}

fn run(job: Job, delay: Option<Duration>) {
    let Job {
        index,
        query,
        k,
        ef,
        deadline,
        reply,
        permit,
    } = job;
    // The client went away while the job waited: do not spend a core on it.
    if reply.is_closed() {
        return;
    }
    if Instant::now() >= deadline {
        drop(permit);
        let _ = reply.send(Outcome::NotStarted);
        return;
    }
    if let Some(d) = delay {
        std::thread::sleep(d);
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| search(&index, &query, k, ef, deadline)))
        .unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Outcome::Panicked(msg)
        });
    drop(permit);
    let _ = reply.send(outcome);
    // `index` (an Arc) drops here: after a reload the old index is freed by the last
    // search that used it.
}

fn search(index: &Index, query: &Query, k: usize, ef: usize, deadline: Instant) -> Outcome {
    let mut params = SearchParams::new(k, ef.max(k));
    params.deadline = Some(deadline);
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
            index.search(v, &params)
        }
    };
    match result {
        Ok(h) => Outcome::Hits(h),
        Err(e) => Outcome::Search(e),
    }
}
