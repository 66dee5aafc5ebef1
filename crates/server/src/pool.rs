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
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Places for admitted requests.
pub(crate) struct Admission {
    shared: Arc<Shared>,
    capacity: usize,
    max_inflight: usize,
    /// Refuse a request that would wait longer than this (`--max-queue-wait-ms`); `None`
    /// bounds the queue by count only.
    max_wait: Option<Duration>,
    /// How long a refusal is held before its 503 is sent (`--refusal-hold-ms`; zero: at
    /// once). See [`Admission::admit`].
    hold: Duration,
}

/// What permits share: the count of admitted requests and the measured rate at which they
/// complete while the server is saturated.
struct Shared {
    admitted: AtomicUsize,
    max_inflight: usize,
    epoch: Instant,
    /// When the last permit was released, ns since `epoch`, shifted left by one; the low
    /// bit says whether requests were still queued after that release (0: never released).
    last_done: AtomicU64,
    /// Mean time between completions in the current busy period, ns as f64 bits: a running
    /// mean over its first [`WINDOW`] samples, then an exponential one over about as many.
    interval_ns: AtomicU64,
    /// Samples in the current busy period (consecutive releases with requests queued
    /// throughout); 0 once a release leaves the queue empty.
    busy: AtomicU64,
    /// When the last sample was taken, ns since `epoch`.
    last_sample_ns: AtomicU64,
    /// Requests refused because their expected wait was over `max_wait`.
    shed_by_wait: AtomicU64,
    /// Refusals being held now ([`Admission::admit`]), and held so far.
    held_now: AtomicUsize,
    held_total: AtomicU64,
    /// Requests waiting in line for a place ([`Admission::admit`]), and their wake-ups:
    /// each release wakes the oldest.
    waiting: AtomicUsize,
    line: tokio::sync::Notify,
}

/// How often a request waiting in line for a place tries again without a wake-up.
const LINE_TICK: Duration = Duration::from_millis(20);

/// Samples the completion-interval mean is taken over (~100 ms at 2,500 completions/s). A
/// memory of 32 followed Qdrant's bursty completions: at 64 closed-loop clients, whose true
/// wait is at most ~25 ms, it refused 0.5% of requests for an expected 54 ms.
const WINDOW: u64 = 256;
/// The wait bound applies only in a busy period of at least this many completions: a
/// server in overload, not one stall. (Without it, a 20-30 ms stall at 500 searches/s set
/// the estimate and refused 0.3% of the next seconds' searches.)
const MIN_BUSY: u64 = 32;
/// ... and only while the last sample is this recent: an estimate from a busy period that
/// has ended says nothing about now.
const FRESH: Duration = Duration::from_millis(100);

impl Shared {
    fn ns(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.epoch).as_nanos() as u64).max(1)
    }
    /// A permit was released at `now`. When requests were still queued (more admitted than
    /// in flight) after the previous release, the server was saturated for the whole time
    /// since it (between two releases the count only grows), so that time is one sample of
    /// the completion interval. Any other gap (the queue ran empty, clients paused after a
    /// `Retry-After`) is never sampled, so a quiet spell does not make the server look slow.
    fn done(&self, now: Instant) {
        let before = self.admitted.fetch_sub(1, Ordering::AcqRel);
        if self.waiting.load(Ordering::Acquire) > 0 {
            self.line.notify_one();
        }
        let queued_after = before.saturating_sub(1) > self.max_inflight;
        let t = self.ns(now);
        let prev = self
            .last_done
            .swap((t << 1) | queued_after as u64, Ordering::AcqRel);
        let (prev_t, prev_queued) = (prev >> 1, prev & 1 == 1);
        if prev_queued && t > prev_t {
            let x = (t - prev_t) as f64;
            let n = self.busy.fetch_add(1, Ordering::AcqRel) + 1;
            let w = 1.0 / n.min(WINDOW) as f64;
            let _ = self
                .interval_ns
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                    let o = if n == 1 { x } else { f64::from_bits(old) };
                    Some((o + (x - o) * w).to_bits())
                });
            self.last_sample_ns.store(t, Ordering::Release);
        }
        if !queued_after {
            self.busy.store(0, Ordering::Release);
        }
    }
    /// The completion interval of the current busy period, when it is one (at least
    /// [`MIN_BUSY`] samples) and still going on (a sample within [`FRESH`]).
    fn interval(&self, now: Instant) -> Option<Duration> {
        if self.busy.load(Ordering::Acquire) < MIN_BUSY {
            return None;
        }
        let last = self.last_sample_ns.load(Ordering::Acquire);
        if self.ns(now).saturating_sub(last) > FRESH.as_nanos() as u64 {
            return None;
        }
        let v = f64::from_bits(self.interval_ns.load(Ordering::Acquire));
        (v > 0.0).then(|| Duration::from_nanos(v as u64))
    }
}

/// One admitted request's place (the seam's type, so it crosses to any backend without
/// wrapping); freed on drop.
pub use searchd_backend::Permit;

impl searchd_backend::Release for Shared {
    fn release(&self) {
        self.done(Instant::now());
    }
}

/// Why a request was refused a place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Refusal {
    /// `max_inflight + queue` requests hold places.
    Full,
    /// The queue ahead would take longer than `--max-queue-wait-ms` to drain at the
    /// measured completion rate (`expected`).
    Wait { expected: Duration },
}

impl Admission {
    pub fn new(max_inflight: usize, queue: usize, max_wait: Option<Duration>) -> Admission {
        Admission {
            shared: Arc::new(Shared {
                admitted: AtomicUsize::new(0),
                max_inflight,
                epoch: Instant::now(),
                last_done: AtomicU64::new(0),
                interval_ns: AtomicU64::new(0.0f64.to_bits()),
                busy: AtomicU64::new(0),
                last_sample_ns: AtomicU64::new(0),
                shed_by_wait: AtomicU64::new(0),
                held_now: AtomicUsize::new(0),
                held_total: AtomicU64::new(0),
                waiting: AtomicUsize::new(0),
                line: tokio::sync::Notify::new(),
            }),
            capacity: max_inflight.saturating_add(queue),
            max_inflight,
            max_wait: max_wait.filter(|d| !d.is_zero()),
            hold: Duration::ZERO,
        }
    }
    /// Hold each refusal this long before it is answered ([`Admission::admit`]).
    pub fn with_hold(mut self, hold: Duration) -> Admission {
        self.hold = hold;
        self
    }
    /// A place, or a refusal answered only after the hold (`--refusal-hold-ms`).
    ///
    /// With a hold, a request that finds no place waits **in line** (FIFO, behind the
    /// requests already waiting: a new arrival never takes a place from them) for as long
    /// as its wait so far plus the expected queueing stays within `--max-queue-wait-ms`
    /// (the hold when there is no wait bound). A place freed while requests wait goes to
    /// the oldest. A request whose wait would go past the bound is refused, but its 503 is
    /// sent only when the hold has passed since it arrived.
    ///
    /// Why: most clients resend a refused request at once (an application's retry loop
    /// ignores `Retry-After`). Answered at once, 256 such clients against ~130 places spun
    /// tens of thousands of refusals a second, and on a shared machine the HTTP work of
    /// refusals and resends came out of the searches' CPU: goodput fell to 0.57 of the
    /// sustainable rate. Held, each client that does not back off comes back at most once
    /// per hold (refusals are bounded by clients / hold, whatever the clients do) and costs
    /// a timer and the connection it already has (both bounded by the connection cap). The
    /// line keeps it fair: a client that was just answered and resends at once cannot take
    /// the freed place ahead of one that has been waiting, so no client starves.
    /// Admitted requests still wait at most the bound, so their latency is unchanged.
    pub async fn admit(&self) -> Result<Permit, Refusal> {
        if self.hold.is_zero() {
            return self.try_admit();
        }
        let arrived = Instant::now();
        let sh = &self.shared;
        if sh.waiting.load(Ordering::Acquire) == 0 {
            if let Ok(p) = self.place(arrived, Duration::ZERO) {
                return Ok(p);
            }
        }
        // One count (in line, held) while the guard lives.
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // How long a request may wait in line: what is left of the wait bound after the
        // expected queueing is checked at each try (`place`), never past the hold.
        let patience = self.max_wait.map_or(self.hold, |m| m.min(self.hold));
        let give_up = arrived + patience;
        let mut refusal = Refusal::Full;
        {
            sh.waiting.fetch_add(1, Ordering::AcqRel);
            let _in_line = Counted(&sh.waiting);
            let mut first = true;
            loop {
                let notified = sh.line.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                // A request that joined behind others does not try at once: the place a
                // release frees is handed to the oldest by the notification.
                if !first || sh.waiting.load(Ordering::Acquire) == 1 {
                    let now = Instant::now();
                    match self.place(now, now - arrived) {
                        Ok(p) => {
                            // A place taken from the line may leave another one free.
                            if sh.waiting.load(Ordering::Acquire) > 1 {
                                sh.line.notify_one();
                            }
                            return Ok(p);
                        }
                        Err(r @ Refusal::Wait { .. }) => {
                            refusal = r;
                            break;
                        }
                        Err(r) => refusal = r,
                    }
                }
                first = false;
                // Woken by a release, or every LINE_TICK in case a wake-up went to a
                // request that left; out of the line at `give_up`.
                let tick = (Instant::now() + LINE_TICK).min(give_up);
                tokio::select! {
                    _ = &mut notified => {}
                    _ = tokio::time::sleep_until(tick.into()) => {}
                }
                if Instant::now() >= give_up {
                    break;
                }
            }
        }
        // Whoever is next in line may use a place this request did not take.
        if sh.waiting.load(Ordering::Acquire) > 0 {
            sh.line.notify_one();
        }
        if matches!(refusal, Refusal::Wait { .. }) {
            sh.shed_by_wait.fetch_add(1, Ordering::Relaxed);
        }
        sh.held_total.fetch_add(1, Ordering::Relaxed);
        sh.held_now.fetch_add(1, Ordering::AcqRel);
        let _held = Counted(&sh.held_now);
        tokio::time::sleep_until((arrived + self.hold).into()).await;
        Err(refusal)
    }
    /// The refusal hold (zero: refusals are answered at once).
    pub fn hold(&self) -> Duration {
        self.hold
    }
    /// Requests waiting in line for a place now, refusals being held now, and refusals
    /// held since start.
    pub fn line(&self) -> (usize, usize, u64) {
        (
            self.shared.waiting.load(Ordering::Acquire),
            self.shared.held_now.load(Ordering::Acquire),
            self.shared.held_total.load(Ordering::Relaxed),
        )
    }
    /// A place, or a refusal at once: when `max_inflight + queue` are taken, or when the
    /// request would have to queue and the requests ahead of it, at the completion rate
    /// measured while the server was saturated, would take longer than `max_wait`
    /// (Little's law: the wait of the newest is about the admitted count times the
    /// interval between completions). Counting alone cannot bound the wait when service
    /// times change (text queries, a remote engine that slows down); the time bound keeps
    /// admitted requests inside the latency target and sheds the rest.
    pub fn try_admit(&self) -> Result<Permit, Refusal> {
        self.try_admit_at(Instant::now())
    }
    fn try_admit_at(&self, now: Instant) -> Result<Permit, Refusal> {
        let r = self.place(now, Duration::ZERO);
        if let Err(Refusal::Wait { .. }) = r {
            self.shared.shed_by_wait.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
    /// A place when one is free and `waited` plus the expected queueing is within the wait
    /// bound.
    fn place(&self, now: Instant, waited: Duration) -> Result<Permit, Refusal> {
        let before = self.shared.admitted.fetch_add(1, Ordering::AcqRel);
        if before >= self.capacity {
            self.shared.admitted.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Full);
        }
        if let (Some(max), true) = (self.max_wait, before >= self.max_inflight) {
            if let Some(iv) = self.shared.interval(now) {
                let expected = iv.saturating_mul((before + 1) as u32) + waited;
                if expected > max {
                    self.shared.admitted.fetch_sub(1, Ordering::AcqRel);
                    return Err(Refusal::Wait { expected });
                }
            }
        }
        Ok(Permit::new(self.shared.clone()))
    }
    fn admitted(&self) -> usize {
        self.shared.admitted.load(Ordering::Relaxed)
    }
    /// Admitted requests counted as in flight (the oldest `max_inflight`).
    pub fn inflight(&self) -> usize {
        self.admitted().min(self.max_inflight)
    }
    /// Admitted requests waiting behind the in-flight ones.
    pub fn queued(&self) -> usize {
        self.admitted().saturating_sub(self.max_inflight)
    }
    /// The measured time between completions under saturation, if measured.
    pub fn completion_interval(&self) -> Option<Duration> {
        let v = f64::from_bits(self.shared.interval_ns.load(Ordering::Acquire));
        (v > 0.0).then(|| Duration::from_nanos(v as u64))
    }
    /// Requests refused by the wait bound so far.
    pub fn shed_by_wait(&self) -> u64 {
        self.shared.shed_by_wait.load(Ordering::Relaxed)
    }
    /// The wait bound, if any.
    pub fn max_wait(&self) -> Option<Duration> {
        self.max_wait
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
    /// The work was still running [`OVERRUN_GRACE`] after its deadline; the caller was
    /// answered without waiting for it.
    Overran,
}

/// How long past its deadline [`Pool::run`] waits for a running job before answering
/// without it ([`JobFailure::Overran`]). Work checks its deadline every few ms; this only
/// bounds the reply when a check comes late (the aggregation bomb on a loaded machine
/// answered 504 up to 385 ms after the deadline).
pub const OVERRUN_GRACE: Duration = Duration::from_millis(100);

type Task = Box<dyn FnOnce(bool) + Send>;

/// A job's state ([`Pool::run`]): waiting for a worker, taken by one, or answered at its
/// deadline before any worker took it.
const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const ABANDONED: u8 = 2;

struct Job {
    deadline: Instant,
    /// Runs the work (argument: the deadline had already passed) and sends the reply.
    task: Task,
    /// [`QUEUED`], [`RUNNING`] once a worker took it, [`ABANDONED`] once its caller was
    /// answered at the deadline instead.
    state: Arc<AtomicU8>,
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
                        let taken = job.state.compare_exchange(
                            QUEUED,
                            RUNNING,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                        if taken.is_err() {
                            // Answered at its deadline while it waited: dropping the task
                            // releases its permit.
                            continue;
                        }
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
    /// was dropped); the permit is released before the value is sent back. A job still
    /// waiting for a worker at its deadline is answered [`JobFailure::NotStarted`] then,
    /// not when a worker frees up (behind jobs that overrun their deadline, that was
    /// seconds late), and is skipped when a worker reaches it.
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
        let (tx, mut rx) = oneshot::channel::<Result<T, JobFailure>>();
        // QUEUED until a worker takes the job (RUNNING) or the caller gives up on it at its
        // deadline (ABANDONED), whichever comes first.
        let state = Arc::new(AtomicU8::new(QUEUED));
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
        let job = Job {
            deadline,
            task,
            state: state.clone(),
        };
        if self.tx.send(job).is_err() {
            return Err(JobFailure::Closed);
        }
        let at = tokio::time::Instant::from_std(deadline);
        if let Ok(out) = tokio::time::timeout_at(at, &mut rx).await {
            return out.unwrap_or(Err(JobFailure::Closed));
        }
        if state
            .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Err(JobFailure::NotStarted);
        }
        // A worker has it: the work checks the deadline itself and stops soon after it. One
        // that overruns it by more than OVERRUN_GRACE (a stretch of work between two checks,
        // a CPU starved by other load) is answered then, so the reply stays bounded in time;
        // its value is dropped when it ends, and its permit (moved into the job) is released
        // only then, so admission still counts it.
        match tokio::time::timeout_at(at + OVERRUN_GRACE, rx).await {
            Ok(out) => out.unwrap_or(Err(JobFailure::Closed)),
            Err(_) => Err(JobFailure::Overran),
        }
    }

    /// Jobs running on a worker right now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` releases `gap` apart with requests queued throughout (max_inflight 1), from `t0`.
    fn saturated(a: &Admission, t0: Instant, n: u64, gap: Duration) -> Instant {
        let ps: Vec<Permit> = (0..n + 3)
            .map(|_| a.try_admit_at(t0).expect("a place"))
            .collect();
        for p in ps {
            std::mem::forget(p);
        }
        let mut t = t0;
        for _ in 0..n + 1 {
            t += gap;
            a.shared.done(t);
        }
        // Two still admitted (one queued): the busy period goes on.
        t
    }

    #[test]
    fn the_count_bound_refuses_past_inflight_plus_queue() {
        let a = Admission::new(2, 1, None);
        let held: Vec<Permit> = (0..3).map(|_| a.try_admit().expect("a place")).collect();
        assert_eq!(a.inflight(), 2);
        assert_eq!(a.queued(), 1);
        assert_eq!(a.try_admit().err(), Some(Refusal::Full));
        drop(held);
        assert_eq!(a.inflight(), 0);
        assert!(a.try_admit().is_ok());
    }

    #[test]
    fn the_wait_bound_refuses_what_would_queue_too_long() {
        let a = Admission::new(1, 1000, Some(Duration::from_millis(10)));
        let t = saturated(&a, a.shared.epoch, MIN_BUSY, Duration::from_millis(2));
        assert_eq!(a.completion_interval(), Some(Duration::from_millis(2)));
        assert_eq!(a.inflight() + a.queued(), 2);
        // The newcomer would wait about (admitted + 1) x 2 ms: 6, 8, 10 ms pass, 12 does not.
        let mut held = Vec::new();
        for want_ms in [6, 8, 10] {
            held.push(
                a.try_admit_at(t)
                    .unwrap_or_else(|r| panic!("{want_ms} ms refused: {r:?}")),
            );
        }
        match a.try_admit_at(t) {
            Err(Refusal::Wait { expected }) => assert_eq!(expected, Duration::from_millis(12)),
            other => panic!("expected a wait refusal, got {:?}", other.map(|_| ())),
        }
        assert_eq!(a.shed_by_wait(), 1);
        // A stale estimate (no completion for longer than FRESH) is not used.
        assert!(a.try_admit_at(t + FRESH + Duration::from_millis(1)).is_ok());
        // Nothing is refused for time while a place in flight is free.
        let b = Admission::new(4, 0, Some(Duration::from_nanos(1)));
        let _p: Vec<Permit> = (0..4).map(|_| b.try_admit().expect("in flight")).collect();
        assert_eq!(b.try_admit().err(), Some(Refusal::Full));
        drop(held);
    }

    #[test]
    fn a_short_stall_is_not_an_overload() {
        let a = Admission::new(1, 1000, Some(Duration::from_millis(10)));
        // Fewer than MIN_BUSY completions, 30 ms apart, with a queue: a stall.
        let t = saturated(&a, a.shared.epoch, MIN_BUSY - 2, Duration::from_millis(30));
        assert!(a.completion_interval().is_some());
        let held: Vec<Permit> = (0..5)
            .map(|_| a.try_admit_at(t).expect("a stall does not shed"))
            .collect();
        drop(held);
    }

    #[test]
    fn a_gap_after_the_queue_ran_empty_is_not_sampled() {
        let a = Admission::new(1, 100, Some(Duration::from_millis(10)));
        let sh = a.shared.clone();
        let e = sh.epoch;
        let ps: Vec<Permit> = (0..3).map(|_| a.try_admit().expect("a place")).collect();
        for p in ps {
            std::mem::forget(p);
        }
        sh.done(e + Duration::from_millis(1)); // 2 left: queued
        sh.done(e + Duration::from_millis(2)); // 1 ms sample; 1 left: none queued
        assert_eq!(a.completion_interval(), Some(Duration::from_millis(1)));
        assert_eq!(sh.busy.load(Ordering::Acquire), 0, "the busy period ended");
        sh.done(e + Duration::from_millis(3)); // the queue was empty since the last release
        assert_eq!(a.completion_interval(), Some(Duration::from_millis(1)));
        // Clients come back after a pause (Retry-After) and queue again: the first release
        // of the new burst is not a sample of a 1 s interval.
        let ps: Vec<Permit> = (0..3).map(|_| a.try_admit().expect("a place")).collect();
        for p in ps {
            std::mem::forget(p);
        }
        sh.done(e + Duration::from_millis(1003));
        assert_eq!(a.completion_interval(), Some(Duration::from_millis(1)));
        sh.done(e + Duration::from_millis(1004)); // queued since the last release: 1 ms
        assert_eq!(a.completion_interval(), Some(Duration::from_millis(1)));
    }

    #[test]
    fn idle_gaps_are_not_sampled() {
        let a = Admission::new(2, 10, Some(Duration::from_millis(10)));
        let sh = a.shared.clone();
        let e = sh.epoch;
        for i in 0..5u64 {
            std::mem::forget(a.try_admit().expect("a place"));
            // Released alone (nothing queued): a quiet server, 1 s between requests.
            sh.done(e + Duration::from_secs(i + 1));
        }
        assert_eq!(a.completion_interval(), None);
        assert_eq!(a.inflight(), 0);
    }

    /// A job waiting behind one that overruns is answered at its own deadline, not when
    /// the worker frees up, and is not run afterwards.
    #[test]
    fn a_queued_job_is_answered_at_its_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let pool = Pool::start(1, None).unwrap();
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        rt.block_on(async {
            let far = Instant::now() + Duration::from_secs(60);
            let slow = pool.run(None, far, || std::thread::sleep(Duration::from_millis(600)));
            let ran2 = ran.clone();
            let t0 = Instant::now();
            let queued = async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let out = pool
                    .run(None, t0 + Duration::from_millis(100), move || {
                        ran2.store(true, Ordering::SeqCst)
                    })
                    .await;
                (out, t0.elapsed())
            };
            let (slow, (out, took)) = tokio::join!(slow, queued);
            assert!(slow.is_ok());
            assert!(matches!(out, Err(JobFailure::NotStarted)), "{out:?}");
            assert!(took < Duration::from_millis(400), "answered after {took:?}");
        });
        // The worker reached the abandoned job after the slow one and skipped it.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!ran.load(Ordering::SeqCst));
    }

    /// A running job that overruns its deadline by more than the grace is answered then,
    /// not when it ends.
    #[test]
    fn a_running_job_that_overruns_is_answered_after_the_grace() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let pool = Pool::start(1, None).unwrap();
        rt.block_on(async {
            let t0 = Instant::now();
            let out = pool
                .run(None, t0 + Duration::from_millis(50), || {
                    std::thread::sleep(Duration::from_millis(800))
                })
                .await;
            let took = t0.elapsed();
            assert!(matches!(out, Err(JobFailure::Overran)), "{out:?}");
            assert!(
                took >= Duration::from_millis(50) + OVERRUN_GRACE,
                "{took:?}"
            );
            assert!(took < Duration::from_millis(600), "answered after {took:?}");
            // One that ends within the grace gives its value.
            let t1 = Instant::now();
            let out = pool.run(None, t1 + Duration::from_millis(900), || 7).await;
            assert_eq!(out.ok(), Some(7));
        });
    }
}
