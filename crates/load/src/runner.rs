//! Running steps: closed-loop workers (one loop per connection), open-loop
//! dispatcher plus connection pool, ramps, trials, aggregation.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::bodies::{BodySet, PickShared, Picker};
use crate::check::{check_response, recall_of, Check};
use crate::client::{request_once_as, Conn, Target, Timer};
use crate::config::{LoadConfig, Pick};
use crate::error::LoadError;
use crate::gt::IdMatrix;
use crate::mix::{build_schedule, read_mix_file, MixLine};
use crate::report::{
    endpoint_line, Best, ClientInfo, Config, EndpointStep, Endpoints, MixInfo, Report, ServerStep,
    Step, TrialSpread, SCHEMA,
};
use crate::resources::{self, ServerSource};
use crate::stats::{
    best_step, body_text, error_rate, median, new_histogram, new_ns_histogram, pack_sample,
    percentiles_ms, scheduled_offset_ns, second_series, send_error, slo_pass, spread, ErrorCounts,
    ErrorKind, FirstErrors, LiveStats, Percentiles, MAX_SECOND_SAMPLES,
};

/// Pause after a failed connect before the slot tries again (closed loop),
/// so a refusing target is not hammered in a tight loop.
const CONNECT_BACKOFF: Duration = Duration::from_millis(20);

/// Longest Retry-After a slot honours (`--retry-after honor`), so a server sending a
/// huge value cannot stall a step.
const MAX_RETRY_AFTER_S: u64 = 10;

/// One load level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Level {
    /// Closed loop with this many concurrent requests.
    Closed(u32),
    /// Open loop at this arrival rate (requests/s).
    Open(f64),
}

/// Everything fixed for the whole run.
struct Shared {
    target: Target,
    bodies: BodySet,
    /// Whole serialised requests, one per body.
    requests: Vec<bytes::Bytes>,
    check: Check,
    gt: Option<IdMatrix>,
    /// Hit count bound (min(k, n)).
    n_count: Option<u64>,
    /// Id bound (--n-max only).
    n_ids: Option<u64>,
    request_timeout: Duration,
    live: LiveStats,
    pick: Arc<PickShared>,
    /// Closed loop: wait Retry-After after a 503/429 (`--retry-after honor`).
    honor_retry_after: bool,
    /// `--mix`: endpoint of each request (empty otherwise).
    mix_ep: Vec<u16>,
    /// `--mix`: endpoint names.
    mix_names: Vec<String>,
    /// `--mix`: whether request i is a HEAD (its answer has no body); empty otherwise.
    mix_head: Vec<bool>,
    /// `--cache cold`: what each request is made of, to serialise it with a nonce per send.
    cold: Option<ColdParts>,
    /// Set on the first Ctrl-C (or by the caller): finish the current step early and stop.
    stop: Arc<AtomicBool>,
}

/// The parts of a request, for per-send serialisation (`--cache cold`).
struct ReqParts {
    method: hyper::Method,
    path: String,
    with_body: bool,
    body: bytes::Bytes,
}

struct ColdParts {
    parts: Vec<ReqParts>,
    /// Part of each request index; empty: the identity.
    part_of: Vec<u32>,
}

/// `--cache cold` nonces: one process-wide counter, started at the Unix time in
/// nanoseconds on first use so that later processes do not repeat earlier keys.
static NONCE: AtomicU64 = AtomicU64::new(0);

fn init_nonce() {
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        .max(1);
    let _ = NONCE.compare_exchange(0, base, Ordering::Relaxed, Ordering::Relaxed);
}

impl Shared {
    /// Whether the answer to request `idx` carries no body.
    #[inline]
    fn head_only(&self, idx: usize) -> bool {
        self.mix_head
            .get(idx)
            .copied()
            .unwrap_or_else(|| self.target.head_only())
    }

    /// The bytes to send for request `idx`: the pre-serialised request, or (cold cache)
    /// the request serialised into `buf` with a fresh nonce.
    #[inline]
    fn request<'a>(&'a self, idx: usize, buf: &'a mut Vec<u8>) -> &'a [u8] {
        match &self.cold {
            None => &self.requests[idx],
            Some(c) => {
                let p = &c.parts[c.part_of.get(idx).map_or(idx, |&i| i as usize)];
                let n = NONCE.fetch_add(1, Ordering::Relaxed);
                self.target
                    .serialize_into(buf, &p.method, &p.path, Some(n), p.with_body, &p.body);
                buf
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Times {
    measure_start: Instant,
    /// `measure_start` as Unix time in seconds (to line the per-second series up with
    /// other clocks: a server's logs, its optimizer's events).
    measure_start_unix_s: f64,
    end: Instant,
    /// Most per-second samples one worker keeps.
    sample_cap: usize,
}

/// What one worker (or a whole step) counted.
struct Acc {
    hist: Histogram<u64>,
    ok: u64,
    errors: ErrorCounts,
    recall_sum: f64,
    recall_n: u64,
    last_done: Option<Instant>,
    connect_err: Option<String>,
    /// The first answer or failure of each error kind.
    first: FirstErrors,
    /// Open loop: send-time error (actual - scheduled), ns.
    send_ns: Histogram<u64>,
    /// Packed (second, error?, latency) samples for the per-second series.
    samples: Vec<u64>,
    /// `--mix`: per endpoint.
    eps: Vec<EpAcc>,
}

/// One endpoint's counts (`--mix`).
struct EpAcc {
    hist: Histogram<u64>,
    ok: u64,
    errors: ErrorCounts,
}

impl Acc {
    fn new(endpoints: usize) -> Self {
        Acc {
            hist: new_histogram(),
            ok: 0,
            errors: ErrorCounts::default(),
            recall_sum: 0.0,
            recall_n: 0,
            last_done: None,
            connect_err: None,
            first: FirstErrors::default(),
            send_ns: new_ns_histogram(),
            samples: Vec::new(),
            eps: (0..endpoints)
                .map(|_| EpAcc {
                    hist: new_histogram(),
                    ok: 0,
                    errors: ErrorCounts::default(),
                })
                .collect(),
        }
    }
    fn merge(&mut self, o: Acc) {
        self.hist.add(&o.hist).expect("auto-resizing histogram");
        self.ok += o.ok;
        self.errors.merge(&o.errors);
        self.recall_sum += o.recall_sum;
        self.recall_n += o.recall_n;
        self.last_done = match (self.last_done, o.last_done) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if self.connect_err.is_none() {
            self.connect_err = o.connect_err;
        }
        self.first.merge(&o.first);
        self.send_ns
            .add(&o.send_ns)
            .expect("auto-resizing histogram");
        if self.samples.len() < MAX_SECOND_SAMPLES {
            let room = MAX_SECOND_SAMPLES - self.samples.len();
            self.samples
                .extend_from_slice(&o.samples[..o.samples.len().min(room)]);
        }
        if self.eps.len() < o.eps.len() {
            self.eps.resize_with(o.eps.len(), || EpAcc {
                hist: new_histogram(),
                ok: 0,
                errors: ErrorCounts::default(),
            });
        }
        for (a, b) in self.eps.iter_mut().zip(o.eps) {
            a.hist.add(&b.hist).expect("auto-resizing histogram");
            a.ok += b.ok;
            a.errors.merge(&b.errors);
        }
    }
    fn requests(&self) -> u64 {
        self.ok + self.errors.total()
    }
}

type Outcome = Result<(u16, bytes::Bytes), (ErrorKind, Option<String>)>;

/// Check and count one finished request.
#[allow(clippy::too_many_arguments)]
fn finish(
    sh: &Shared,
    acc: &mut Acc,
    idx: usize,
    res: Outcome,
    origin: Instant,
    record: bool,
    ids: &mut Vec<i64>,
    t: &Times,
) {
    let done = Instant::now();
    let lat_us = done.saturating_duration_since(origin).as_micros() as u64;
    let verdict = match res {
        Ok((status, body)) => {
            let k = sh.bodies.k.get(idx).copied().unwrap_or(0) as u64;
            let expect = sh.n_count.map_or(k, |n| k.min(n)) as usize;
            check_response(sh.check, status, &body, expect, sh.n_ids, ids).map_err(|kind| {
                if record && !acc.first.has(kind) {
                    acc.first.note(kind, describe(kind, status, &body, expect));
                }
                (kind, None)
            })
        }
        Err(e) => Err(e),
    };
    if record && acc.samples.len() < t.sample_cap {
        let sec = done.saturating_duration_since(t.measure_start).as_secs() as u32;
        acc.samples.push(pack_sample(sec, verdict.is_err(), lat_us));
    }
    let ep = if record {
        sh.mix_ep.get(idx).map(|&e| e as usize)
    } else {
        None
    };
    match verdict {
        Ok(()) => {
            sh.live.record_ok(lat_us);
            if record {
                acc.ok += 1;
                acc.hist
                    .record(lat_us.max(1))
                    .expect("auto-resizing histogram");
                if let Some(e) = ep.and_then(|e| acc.eps.get_mut(e)) {
                    e.ok += 1;
                    e.hist
                        .record(lat_us.max(1))
                        .expect("auto-resizing histogram");
                }
                if let (Some(gt), Some(q)) = (&sh.gt, sh.bodies.qidx.get(idx).copied().flatten()) {
                    if (q as usize) < gt.n {
                        acc.recall_sum +=
                            recall_of(ids, gt.row(q as usize), sh.bodies.k[idx] as usize);
                        acc.recall_n += 1;
                    }
                }
            }
        }
        Err((kind, msg)) => {
            sh.live.record_err();
            if record {
                acc.errors.add(kind);
                if let Some(e) = ep.and_then(|e| acc.eps.get_mut(e)) {
                    e.errors.add(kind);
                }
                if !acc.first.has(kind) {
                    acc.first.note(
                        kind,
                        msg.clone().unwrap_or_else(|| describe_failure(kind, sh)),
                    );
                }
                if msg.is_some() && acc.connect_err.is_none() {
                    acc.connect_err = msg;
                }
            }
        }
    }
    if record {
        acc.last_done = Some(acc.last_done.map_or(done, |d| d.max(done)));
    }
}

/// What a check failure of `kind` found, with the answer's body.
fn describe(kind: ErrorKind, status: u16, body: &[u8], expect: usize) -> String {
    let what = match kind {
        ErrorKind::BadBody => "not a search answer".to_string(),
        ErrorKind::WrongCount => format!("not {expect} hits"),
        ErrorKind::Unsorted => "scores not sorted best first".to_string(),
        ErrorKind::BadId => "a negative or out-of-range id".to_string(),
        _ => String::new(),
    };
    let b = body_text(status, body);
    if what.is_empty() {
        b
    } else {
        format!("{what}: {b}")
    }
}

/// The message of a failure that has no answer body.
fn describe_failure(kind: ErrorKind, sh: &Shared) -> String {
    match kind {
        ErrorKind::Timeout => format!(
            "no full answer within --request-timeout {:?}",
            sh.request_timeout
        ),
        ErrorKind::Io => "the connection broke while sending or receiving".into(),
        ErrorKind::Connect => "connection failed".into(),
        _ => kind.name().into(),
    }
}

async fn closed_worker(
    sh: Arc<Shared>,
    t: Times,
    mut slot: Option<Conn>,
    mut picker: Picker,
) -> (Option<Conn>, Acc) {
    let mut acc = Acc::new(sh.mix_names.len());
    let mut ids = Vec::with_capacity(16);
    let mut timer = Timer::new(sh.request_timeout);
    let mut buf = Vec::new();
    loop {
        let start = Instant::now();
        if start >= t.end || sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let record = start >= t.measure_start;
        let idx = picker.next_index();
        let req = sh.request(idx, &mut buf);
        let res = request_once_as(
            &mut slot,
            &sh.target,
            req,
            sh.head_only(idx),
            start + sh.request_timeout,
            &mut timer,
        )
        .await;
        let connect_failed = matches!(res, Err((ErrorKind::Connect, _)));
        let backoff = match &res {
            Ok((503 | 429, _)) if sh.honor_retry_after => slot
                .as_ref()
                .and_then(|c| c.retry_after)
                .map(|s| Duration::from_secs(s.min(MAX_RETRY_AFTER_S))),
            _ => None,
        };
        finish(&sh, &mut acc, idx, res, start, record, &mut ids, &t);
        let wait = if connect_failed {
            Some(CONNECT_BACKOFF)
        } else {
            backoff
        };
        if let Some(w) = wait {
            let now = Instant::now();
            if now < t.end {
                tokio::time::sleep(w.min(t.end - now)).await;
            }
        }
    }
    (slot, acc)
}

struct Job {
    sched: Instant,
    idx: usize,
    record: bool,
}

async fn open_worker(
    sh: Arc<Shared>,
    id: usize,
    mut rx: mpsc::Receiver<Job>,
    idle: Arc<Mutex<Vec<usize>>>,
    mut slot: Option<Conn>,
    t: Times,
) -> (Option<Conn>, Acc) {
    let mut acc = Acc::new(sh.mix_names.len());
    let mut ids = Vec::with_capacity(16);
    let mut timer = Timer::new(sh.request_timeout);
    let mut buf = Vec::new();
    while let Some(job) = rx.recv().await {
        let now = Instant::now();
        if job.record {
            let lag = now.saturating_duration_since(job.sched).as_nanos() as u64;
            acc.send_ns
                .record(lag.max(1))
                .expect("auto-resizing histogram");
        }
        let deadline = now + sh.request_timeout;
        let req = sh.request(job.idx, &mut buf);
        let res = request_once_as(
            &mut slot,
            &sh.target,
            req,
            sh.head_only(job.idx),
            deadline,
            &mut timer,
        )
        .await;
        finish(
            &sh, &mut acc, job.idx, res, job.sched, job.record, &mut ids, &t,
        );
        idle.lock().expect("idle pool").push(id);
    }
    (slot, acc)
}

/// What the open-loop dispatcher counted within the measured window.
struct DispatchOut {
    late: u64,
    dropped: u64,
    dropped_ep: Vec<u64>,
    /// CPU seconds the dispatcher thread used in the measured window.
    cpu_s: f64,
}

use searchd_os::thread_cpu_seconds;

/// Longest single sleep of the dispatcher, so a stop request is seen promptly.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// Longest spin before a send, as a share of the interval between sends: the margin
/// follows the kernel's measured oversleep, which grows on a busy box, and a fixed 1 ms cap
/// spun a whole core at 1,000 req/s (client CPU 90% against 9% at 500/s), taking it from
/// the server being measured. With a tenth of the interval (within 20 us..1 ms) the
/// dispatcher spins at most ~10% of a core at any rate; a wake-up later than that shows as
/// send-time error, which is measured and reported.
const SPIN_SHARE: f64 = 0.1;

/// The spin cap for `rate` requests/s (see [`SPIN_SHARE`]).
fn max_spin_ns(rate: f64) -> f64 {
    (SPIN_SHARE * 1e9 / rate.max(1e-3)).clamp(20_000.0, 1_000_000.0)
}

/// Sleep-then-spin until `target` on the monotonic clock: sleep until a margin
/// before it (the margin follows a decaying peak of the measured oversleep of the
/// kernel's timer, between 20 us and `max_spin_ns`), then spin. False when `stop` was set meanwhile.
fn wait_until(
    target: std::time::Instant,
    stop: &AtomicBool,
    overshoot_ns: &mut f64,
    max_spin_ns: f64,
) -> bool {
    loop {
        let now = std::time::Instant::now();
        if now >= target {
            return true;
        }
        let rem = target - now;
        let margin = Duration::from_nanos((*overshoot_ns + 20_000.0).min(max_spin_ns) as u64);
        if rem > margin {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let want = (rem - margin).min(MAX_SLEEP);
            let before = std::time::Instant::now();
            std::thread::sleep(want);
            let over = before.elapsed().saturating_sub(want).as_nanos() as f64;
            // A decaying peak, not a mean: the margin has to cover the late wake-ups
            // (a vCPU descheduled for ~1 ms), which a mean of mostly-prompt ones hides.
            *overshoot_ns = over.max(0.995 * *overshoot_ns);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The open-loop dispatcher, on a thread of its own: request i is due at
/// `t0 + i / rate` on an absolute timeline (so lateness never accumulates), handed
/// at its due time to an idle connection (`txs[j]` is pool slot j), or dropped and
/// counted when every connection is busy. Tokio's timer has millisecond
/// granularity, so the waiting is done here with [`wait_until`] on
/// `std::time::Instant`; the workers measure latency from the scheduled time and
/// record how late each send left (the achieved resolution).
#[allow(clippy::too_many_arguments)]
fn dispatch_thread(
    t0: Instant,
    t: Times,
    rate: f64,
    txs: Vec<mpsc::Sender<Job>>,
    idle: Arc<Mutex<Vec<usize>>>,
    mut picker: Picker,
    late_threshold: Duration,
    sh: Arc<Shared>,
) -> DispatchOut {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack (1 ns: sleeps
    // end as close to their deadline as the kernel can).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let (t0s, ms, end) = (t0.into_std(), t.measure_start.into_std(), t.end.into_std());
    let mut out = DispatchOut {
        late: 0,
        dropped: 0,
        dropped_ep: vec![0u64; sh.mix_names.len()],
        cpu_s: 0.0,
    };
    let mut cpu0: Option<f64> = None;
    let mut overshoot = 50_000.0;
    let spin_cap = max_spin_ns(rate);
    let mut i: u64 = 0;
    loop {
        let sched = t0s + Duration::from_nanos(scheduled_offset_ns(i, rate));
        if sched >= end || sh.stop.load(Ordering::Relaxed) {
            break;
        }
        if !wait_until(sched, &sh.stop, &mut overshoot, spin_cap) {
            break;
        }
        let now = std::time::Instant::now();
        let record = sched >= ms;
        if record && cpu0.is_none() {
            cpu0 = Some(thread_cpu_seconds());
        }
        if record && now.duration_since(sched) > late_threshold {
            out.late += 1;
        }
        let idx = picker.next_index();
        let free = idle.lock().expect("idle pool").pop();
        let job = Job {
            sched: Instant::from_std(sched),
            idx,
            record,
        };
        match free {
            // Capacity 1 and the slot is idle: this cannot be full.
            Some(j) => {
                let _ = txs[j].try_send(job);
            }
            None => {
                sh.live.record_err();
                if record {
                    out.dropped += 1;
                    if let Some(&e) = sh.mix_ep.get(idx) {
                        out.dropped_ep[e as usize] += 1;
                    }
                }
            }
        }
        i += 1;
    }
    if let Some(c0) = cpu0 {
        out.cpu_s = (thread_cpu_seconds() - c0).max(0.0);
    }
    out
}

/// Client threads: one single-threaded runtime per thread, like wrk's
/// event loops (no work stealing, no cross-thread wake-ups). A connection
/// lives on one shard for the whole run: slot i on shard i % n.
struct Shards {
    handles: Vec<tokio::runtime::Handle>,
    /// Kernel thread ids of the client threads (Linux), so the client's CPU can be
    /// measured apart from a server running in the same process (`searchd demo`).
    tids: Vec<i32>,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    joins: Vec<std::thread::JoinHandle<()>>,
}

impl Shards {
    fn start(n: usize) -> std::io::Result<Shards> {
        let mut sh = Shards {
            handles: Vec::new(),
            tids: Vec::new(),
            stops: Vec::new(),
            joins: Vec::new(),
        };
        for i in 0..n.max(1) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let (tid_tx, tid_rx) = std::sync::mpsc::channel::<Option<i32>>();
            sh.handles.push(rt.handle().clone());
            sh.stops.push(stop_tx);
            sh.joins.push(
                std::thread::Builder::new()
                    .name(format!("searchd-load-{i}"))
                    .spawn(move || {
                        let _ = tid_tx.send(resources::current_tid());
                        let _ = rt.block_on(stop_rx);
                    })?,
            );
            if let Ok(Some(t)) = tid_rx.recv() {
                sh.tids.push(t);
            }
        }
        if sh.tids.len() != sh.handles.len() {
            sh.tids.clear();
        }
        Ok(sh)
    }

    fn spawn<F>(&self, slot: usize, f: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handles[slot % self.handles.len()].spawn(f)
    }
}

impl Drop for Shards {
    fn drop(&mut self) {
        for s in self.stops.drain(..) {
            let _ = s.send(());
        }
        for j in self.joins.drain(..) {
            let _ = j.join();
        }
    }
}

/// One step's raw result (one trial).
struct StepRaw {
    concurrency: u32,
    measure_start_unix_s: f64,
    rate: Option<f64>,
    window_s: f64,
    acc: Acc,
    server: ServerStep,
    client_cpu_pct: f64,
    client_saturated: bool,
    late: u64,
    dropped: u64,
    note: Option<String>,
    /// Cut short by a stop request (Ctrl-C): fewer seconds measured than asked.
    partial: bool,
}

impl StepRaw {
    fn qps(&self) -> f64 {
        self.acc.ok as f64 / self.window_s
    }
    fn error_rate(&self) -> f64 {
        error_rate(self.acc.requests(), self.acc.errors.total())
    }
    fn p99(&self) -> Option<f64> {
        percentiles_ms(&self.acc.hist).p99
    }
    fn all_connect_errors(&self) -> bool {
        let n = self.acc.requests();
        n > 0 && self.acc.ok == 0 && self.acc.errors.get(ErrorKind::Connect) == n
    }
}

struct Runner<'a> {
    args: &'a LoadConfig,
    sh: Arc<Shared>,
    server_src: ServerSource,
    pb: ProgressBar,
    /// Connections kept across steps (closed: one per concurrency slot;
    /// open: the pool).
    pool: Vec<Option<Conn>>,
    threads: usize,
    /// Declared after `pool`: connections are dropped before their runtimes.
    shards: Shards,
}

/// How long a stopped step waits for its in-flight requests before abandoning them.
const STOP_GRACE: Duration = Duration::from_secs(2);

impl Runner<'_> {
    fn say(&self, line: String) {
        if self.args.quiet {
            return;
        }
        if self.pb.is_hidden() {
            eprintln!("{line}");
        } else {
            self.pb.println(line);
        }
    }

    fn stopped(&self) -> bool {
        self.sh.stop.load(Ordering::Relaxed)
    }

    /// Live progress until `until` (or a stop request); returns nothing, just draws.
    async fn watch(&self, label: &str, phase: &str, phase_start: Instant, until: Instant) {
        let live = &self.sh.live;
        let mut last_ok = live.ok.load(Ordering::Relaxed);
        let mut last_t = Instant::now();
        let total = until.saturating_duration_since(phase_start).as_secs_f64();
        loop {
            let now = Instant::now();
            if now >= until || self.stopped() {
                break;
            }
            tokio::time::sleep((until - now).min(Duration::from_millis(100))).await;
            let now = Instant::now();
            let ok = live.ok.load(Ordering::Relaxed);
            let dt = now.duration_since(last_t).as_secs_f64().max(1e-6);
            if dt < 0.25 && now < until {
                continue;
            }
            let qps = (ok - last_ok) as f64 / dt;
            last_ok = ok;
            last_t = now;
            let p99 = live
                .quantile_us(0.99)
                .map(|u| format!("{:.2}", u as f64 / 1000.0))
                .unwrap_or_else(|| "-".into());
            let errs = live.errors.load(Ordering::Relaxed);
            self.pb.set_message(format!(
                "{label} {phase} {:.1}/{:.1}s  qps {qps:.0}  p99~{p99} ms  errors {errs}",
                now.saturating_duration_since(phase_start).as_secs_f64(),
                total
            ));
        }
    }

    async fn sample_window(&self) -> (Option<resources::ServerSample>, Instant, f64) {
        let s = resources::sample(self.server_src, &self.sh.target).await;
        (
            s,
            Instant::now(),
            resources::client_cpu_seconds(&self.shards.tids),
        )
    }

    /// One step; None when a stop request came before its measured window began.
    async fn run_step(&mut self, level: Level, seed: u64) -> Option<StepRaw> {
        let args = self.args;
        let label = match level {
            Level::Closed(c) => format!("c={c}"),
            Level::Open(r) => format!("rate={r:.0}/s"),
        };
        let t0 = Instant::now();
        let t0_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let workers_n = match level {
            Level::Closed(c) => c as usize,
            Level::Open(_) => args.connections,
        };
        let t = Times {
            measure_start: t0 + args.warmup,
            measure_start_unix_s: t0_unix_s + args.warmup.as_secs_f64(),
            end: t0 + args.warmup + args.duration,
            sample_cap: (MAX_SECOND_SAMPLES / workers_n.max(1)).max(1000),
        };
        self.sh.live.reset_latency();
        self.sh.live.errors.store(0, Ordering::Relaxed);

        type Worker = tokio::task::JoinHandle<(Option<Conn>, Acc)>;
        let mut workers: Vec<(usize, Worker)> = Vec::new();
        let mut disp: Option<tokio::sync::oneshot::Receiver<DispatchOut>> = None;
        let (concurrency, rate) = match level {
            Level::Closed(c) => {
                let c = c as usize;
                while self.pool.len() < c {
                    self.pool.push(None);
                }
                for i in 0..c {
                    let picker = Picker::new(
                        self.sh.pick.clone(),
                        seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    );
                    let w = closed_worker(self.sh.clone(), t, self.pool[i].take(), picker);
                    workers.push((i, self.shards.spawn(i, w)));
                }
                (c as u32, None)
            }
            Level::Open(r) => {
                let n = args.connections;
                while self.pool.len() < n {
                    self.pool.push(None);
                }
                // One pool of idle connections over all client threads (slot i lives
                // on shard i % threads); slot 0 first.
                let idle = Arc::new(Mutex::new((0..n).rev().collect::<Vec<_>>()));
                let mut txs = Vec::with_capacity(n);
                for slot in 0..n {
                    let (tx, rx) = mpsc::channel(1);
                    txs.push(tx);
                    let w = open_worker(
                        self.sh.clone(),
                        slot,
                        rx,
                        idle.clone(),
                        self.pool[slot].take(),
                        t,
                    );
                    workers.push((slot, self.shards.spawn(slot, w)));
                }
                let picker = Picker::new(self.sh.pick.clone(), seed);
                let (tx, rx) = tokio::sync::oneshot::channel();
                let sh = self.sh.clone();
                let late_threshold = args.late_threshold;
                let spawned = std::thread::Builder::new()
                    .name("searchd-load-dispatch".into())
                    .spawn(move || {
                        let out = dispatch_thread(t0, t, r, txs, idle, picker, late_threshold, sh);
                        let _ = tx.send(out);
                    });
                match spawned {
                    Ok(_) => disp = Some(rx),
                    Err(e) => tracing::error!("cannot start the dispatcher thread: {e}"),
                }
                (n as u32, Some(r))
            }
        };

        self.watch(&label, "warm-up", t0, t.measure_start).await;
        let in_warmup = self.stopped();
        self.sh.live.reset_latency();
        let s0 = self.sample_window().await;
        self.watch(&label, "measure", t.measure_start, t.end).await;
        let measured_until = Instant::now().min(t.end);
        let partial = self.stopped() && measured_until < t.end;
        let s1 = self.sample_window().await;

        let (mut late, mut dropped, mut disp_cpu) = (0, 0, 0.0);
        let mut dropped_ep = vec![0u64; self.sh.mix_names.len()];
        if let Some(rx) = disp {
            match rx.await {
                Ok(d) => {
                    late = d.late;
                    dropped = d.dropped;
                    disp_cpu = d.cpu_s;
                    for (a, b) in dropped_ep.iter_mut().zip(d.dropped_ep) {
                        *a += b;
                    }
                }
                Err(_) => tracing::error!("the dispatcher thread failed"),
            }
        }
        let mut acc = Acc::new(self.sh.mix_names.len());
        let grace = Instant::now() + STOP_GRACE;
        let mut abandoned = 0usize;
        for (slot, mut h) in workers {
            let res = if self.stopped() {
                match tokio::time::timeout_at(grace, &mut h).await {
                    Ok(r) => r,
                    Err(_) => {
                        h.abort();
                        abandoned += 1;
                        continue;
                    }
                }
            } else {
                h.await
            };
            match res {
                Ok((conn, a)) => {
                    self.pool[slot] = conn;
                    acc.merge(a);
                }
                Err(e) => tracing::error!("worker {slot} failed: {e}"),
            }
        }
        if in_warmup {
            return None;
        }
        acc.errors.add_n(ErrorKind::Dropped, dropped);
        if dropped > 0 {
            acc.first.note(
                ErrorKind::Dropped,
                format!(
                    "a request was due while all {} connections were busy (raise --connections, or the server is over capacity)",
                    args.connections
                ),
            );
        }
        for (e, n) in acc.eps.iter_mut().zip(dropped_ep) {
            e.errors.add_n(ErrorKind::Dropped, n);
        }
        let mut raw = self.finish_step(
            concurrency,
            rate,
            t,
            measured_until,
            acc,
            late,
            dropped,
            s0,
            s1,
            disp_cpu,
        );
        if partial {
            raw.partial = true;
            let mut n = format!(
                "PARTIAL: interrupted after {:.1} of {:.1} s",
                measured_until
                    .saturating_duration_since(t.measure_start)
                    .as_secs_f64(),
                args.duration.as_secs_f64()
            );
            if abandoned > 0 {
                n.push_str(&format!(
                    "; {abandoned} connections with a request in flight were abandoned"
                ));
            }
            raw.note = Some(match raw.note.take() {
                Some(o) => format!("{n}; {o}"),
                None => n,
            });
        }
        Some(raw)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_step(
        &self,
        concurrency: u32,
        rate: Option<f64>,
        t: Times,
        measured_until: Instant,
        acc: Acc,
        late: u64,
        dropped: u64,
        s0: (Option<resources::ServerSample>, Instant, f64),
        s1: (Option<resources::ServerSample>, Instant, f64),
        extra_cpu_s: f64,
    ) -> StepRaw {
        let dur = measured_until
            .saturating_duration_since(t.measure_start)
            .as_secs_f64()
            .max(1e-3);
        let window_s = acc
            .last_done
            .map(|d| d.saturating_duration_since(t.measure_start).as_secs_f64())
            .unwrap_or(0.0)
            .max(dur);
        let span = s1.1.saturating_duration_since(s0.1).as_secs_f64().max(1e-3);
        let cpu_pct = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b >= a => Some((b - a) / span * 100.0),
            _ => None,
        };
        let server = ServerStep {
            rss_bytes: s1
                .0
                .and_then(|s| s.rss_bytes)
                .or(s0.0.and_then(|s| s.rss_bytes)),
            cpu_pct: cpu_pct(
                s0.0.and_then(|s| s.cpu_seconds),
                s1.0.and_then(|s| s.cpu_seconds),
            ),
            source: self.server_src.name().to_string(),
        };
        let client_cpu_pct = ((s1.2 - s0.2 + extra_cpu_s) / span * 100.0).max(0.0);
        let limit = self.threads.min(resources::cores()).max(1) as f64 * 100.0;
        let note = if acc.requests() == 0 {
            Some("no request was started in the measured window (answers slower than warm-up + duration?)".to_string())
        } else if acc.ok == 0 {
            Some("no ok answer".to_string())
        } else {
            None
        };
        StepRaw {
            concurrency,
            measure_start_unix_s: t.measure_start_unix_s,
            rate,
            window_s,
            acc,
            server,
            client_cpu_pct,
            client_saturated: client_cpu_pct >= 0.9 * limit,
            late,
            dropped,
            note,
            partial: false,
        }
    }
}

fn aggregate(raws: &[StepRaw], args: &LoadConfig, names: &[String]) -> Step {
    let first = &raws[0];
    let mut errors = ErrorCounts::default();
    let (mut ok, mut recall_sum, mut recall_n, mut late, mut dropped) = (0, 0.0, 0, 0, 0);
    let mut hist = new_histogram();
    let mut send_ns = new_ns_histogram();
    let mut first_err = FirstErrors::default();
    for r in raws {
        errors.merge(&r.acc.errors);
        first_err.merge(&r.acc.first);
        send_ns
            .add(&r.acc.send_ns)
            .expect("auto-resizing histogram");
        ok += r.acc.ok;
        recall_sum += r.acc.recall_sum;
        recall_n += r.acc.recall_n;
        late += r.late;
        dropped += r.dropped;
        hist.add(&r.acc.hist).expect("auto-resizing histogram");
    }
    let requests = ok + errors.total();
    let er = error_rate(requests, errors.total());
    let qps_v: Vec<f64> = raws.iter().map(|r| r.qps()).collect();
    let rps_v: Vec<f64> = raws
        .iter()
        .map(|r| r.acc.requests() as f64 / r.window_s)
        .collect();
    let per: Vec<Percentiles> = raws.iter().map(|r| percentiles_ms(&r.acc.hist)).collect();
    let med = |f: fn(&Percentiles) -> Option<f64>| {
        let v: Vec<f64> = per.iter().filter_map(f).collect();
        median(&v)
    };
    let latency_ms = if raws.len() == 1 {
        per[0]
    } else {
        Percentiles {
            p50: med(|p| p.p50),
            p95: med(|p| p.p95),
            p99: med(|p| p.p99),
            p999: med(|p| p.p999),
            max: per.iter().filter_map(|p| p.max).reduce(f64::max),
            mean: med(|p| p.mean),
        }
    };
    let p99_v: Vec<f64> = per.iter().filter_map(|p| p.p99).collect();
    let srv_cpu: Vec<f64> = raws.iter().filter_map(|r| r.server.cpu_pct).collect();
    let partial = raws.iter().any(|r| r.partial);
    // The per-second series of the first trial (trials are repeats of the same step).
    let mut samples = first_samples(raws);
    let per_second = second_series(&mut samples);
    let cli_cpu: Vec<f64> = raws.iter().map(|r| r.client_cpu_pct).collect();
    Step {
        concurrency: first.concurrency,
        measure_start_unix_s: first.measure_start_unix_s,
        rate: first.rate,
        duration_s: median(&raws.iter().map(|r| r.window_s).collect::<Vec<_>>()).unwrap_or(0.0),
        requests,
        ok,
        errors,
        error_rate: er,
        qps: median(&qps_v).unwrap_or(0.0),
        latency_ms,
        recall_at_k: (recall_n > 0).then(|| recall_sum / recall_n as f64),
        server: ServerStep {
            rss_bytes: raws.iter().filter_map(|r| r.server.rss_bytes).max(),
            cpu_pct: median(&srv_cpu),
            source: first.server.source.clone(),
        },
        slo_pass: !partial
            && slo_pass(ok, latency_ms.p99, er, args.slo_p99_ms, args.max_error_rate),
        partial,
        first_errors: first_err,
        send_error_us: send_error(&send_ns),
        per_second,
        rps: median(&rps_v).unwrap_or(0.0),
        late,
        dropped,
        client_cpu_pct: median(&cli_cpu).unwrap_or(0.0),
        client_saturated: raws.iter().any(|r| r.client_saturated),
        trials: TrialSpread {
            n: raws.len() as u32,
            qps: spread(&qps_v).expect("at least one trial"),
            p99_ms: spread(&p99_v),
        },
        note: raws.iter().find_map(|r| r.note.clone()),
        endpoints: endpoint_steps(raws, names),
        hist,
    }
}

fn first_samples(raws: &[StepRaw]) -> Vec<u64> {
    raws.first()
        .map(|r| r.acc.samples.clone())
        .unwrap_or_default()
}

/// Per-endpoint figures (`--mix`) over trials: counts summed, latency percentiles and
/// qps the median over trials (max: the largest).
fn endpoint_steps(raws: &[StepRaw], names: &[String]) -> Endpoints {
    let mut out = Vec::with_capacity(names.len());
    for (e, name) in names.iter().enumerate() {
        let mut errors = ErrorCounts::default();
        let mut ok = 0;
        let mut per = Vec::new();
        let mut qps = Vec::new();
        for r in raws {
            let Some(a) = r.acc.eps.get(e) else { continue };
            errors.merge(&a.errors);
            ok += a.ok;
            per.push(percentiles_ms(&a.hist));
            qps.push(a.ok as f64 / r.window_s.max(1e-9));
        }
        let med = |f: fn(&Percentiles) -> Option<f64>| {
            let v: Vec<f64> = per.iter().filter_map(f).collect();
            median(&v)
        };
        out.push((
            name.clone(),
            EndpointStep {
                requests: ok + errors.total(),
                ok,
                errors: errors.total(),
                error_kinds: errors.iter().filter(|(_, n)| *n > 0).collect(),
                p50_ms: med(|p| p.p50),
                p95_ms: med(|p| p.p95),
                p99_ms: med(|p| p.p99),
                mean_ms: med(|p| p.mean),
                max_ms: per.iter().filter_map(|p| p.max).reduce(f64::max),
                qps: median(&qps).unwrap_or(0.0),
            },
        ));
    }
    Endpoints(out)
}

/// How long the preflight waits for a TCP connection before calling the target unreachable.
const PREFLIGHT_CONNECT: Duration = Duration::from_millis(800);

/// Before any load: connect once (a closed port or a black-holed host fails here, in
/// under a second), then send one request: the body with the largest qidx (so a query
/// matrix with fewer rows than --query-count is refused now, not half-way through) or
/// the first body. A 4xx answer to generated or text-query bodies refuses the run with
/// the server's message; any other failure becomes a warning and the run goes on.
async fn preflight(
    args: &LoadConfig,
    target: &Target,
    bodies: &BodySet,
    search_bodies: bool,
    warnings: &mut Vec<String>,
) -> Result<(), LoadError> {
    let unreachable = |message: String| LoadError::Unreachable {
        target: target.base.clone(),
        message,
    };
    let addr = target.addr.clone().map_err(unreachable)?;
    match tokio::time::timeout(PREFLIGHT_CONNECT, Conn::connect(addr)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(unreachable(format!("connect {addr}: {e}"))),
        Err(_) => {
            return Err(unreachable(format!(
                "connect {addr}: no answer within {} ms",
                PREFLIGHT_CONNECT.as_millis()
            )))
        }
    }
    if args.mix.is_some() {
        return Ok(());
    }
    let idx = match args.pick {
        Pick::Fixed(i) => i,
        _ => bodies
            .qidx
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.map(|q| (q, i)))
            .max()
            .map_or(0, |(_, i)| i),
    };
    let body = bodies.bodies.get(idx).cloned().unwrap_or_default();
    let req = if args.cache == Some(crate::config::CacheMode::Cold) {
        init_nonce();
        let mut buf = Vec::new();
        let n = NONCE.fetch_add(1, Ordering::Relaxed);
        target.serialize_into(
            &mut buf,
            &target.method,
            target.path(),
            Some(n),
            target.with_body,
            &body,
        );
        bytes::Bytes::from(buf)
    } else {
        target.serialize(&body)
    };
    let mut timer = Timer::new(args.request_timeout);
    let res = request_once_as(
        &mut None,
        target,
        &req,
        target.head_only(),
        Instant::now() + args.request_timeout,
        &mut timer,
    )
    .await;
    match res {
        Ok((status, answer)) if (400..500).contains(&status) && status != 429 && search_bodies => {
            let what = match bodies.qidx.get(idx).copied().flatten() {
                Some(q) if args.text_queries.is_none() => format!(
                    "{} {} with qidx {q} (the last of --query-count {})",
                    target.method,
                    target.path(),
                    args.query_count
                ),
                _ => format!("the first request to {} {}", target.method, target.path()),
            };
            let hint = if args.text_queries.is_none() && bodies.qidx.iter().any(Option::is_some) {
                "; if its query matrix has fewer rows, lower --query-count (and the server needs serve --queries FILE)"
            } else {
                ""
            };
            Err(LoadError::Refused {
                message: format!(
                    "the server refused {what}: {}{hint}",
                    body_text(status, &answer)
                ),
            })
        }
        Ok((status, _)) if (200..300).contains(&status) => Ok(()),
        Ok((status, answer)) => {
            warnings.push(format!(
                "preflight: {} {} answered {}",
                target.method,
                target.path(),
                body_text(status, &answer)
            ));
            Ok(())
        }
        Err((kind, msg)) => {
            warnings.push(format!(
                "preflight: {} {} failed: {}",
                target.method,
                target.path(),
                msg.unwrap_or_else(|| kind.name().to_string())
            ));
            Ok(())
        }
    }
}

/// Check the values one by one and together (each message names its flag).
pub(crate) fn validate(args: &LoadConfig) -> Result<(), LoadError> {
    let u = LoadError::usage;
    if !(args.slo_p99_ms.is_finite() && args.slo_p99_ms > 0.0) {
        return Err(u("--slo-p99-ms must be > 0"));
    }
    if !(0.0..=1.0).contains(&args.max_error_rate) {
        return Err(u("--max-error-rate must be between 0 and 1"));
    }
    if args.duration.is_zero() {
        return Err(u("--duration must be > 0"));
    }
    if args.request_timeout.is_zero() {
        return Err(u("--request-timeout must be > 0"));
    }
    if args.trials == 0 || args.trials > 1000 {
        return Err(u("--trials must be between 1 and 1000"));
    }
    if args.connections == 0 || args.connections > 100_000 {
        return Err(u("--connections must be between 1 and 100000"));
    }
    if !(1..=1000).contains(&args.k) {
        return Err(u("--k must be between 1 and 1000"));
    }
    if args.query_count == 0 {
        return Err(u("--query-count must be at least 1"));
    }
    if args.ramp.0.is_empty() {
        return Err(u("--ramp needs at least one concurrency"));
    }
    if args.body_file.is_some() && !args.endpoint.is_search() {
        return Err(LoadError::usage(format!(
            "--body-file needs an endpoint that takes a body (e.g. 'POST /search'), not '{}'",
            args.endpoint
        )));
    }
    Ok(())
}

fn levels(args: &LoadConfig) -> Vec<Level> {
    if let Some(r) = args.rate {
        vec![Level::Open(r)]
    } else if let Some(rs) = &args.rate_ramp {
        rs.0.iter().map(|&r| Level::Open(r)).collect()
    } else {
        args.ramp.0.iter().copied().map(Level::Closed).collect()
    }
}

/// The whole run (see [`crate::run`]).
pub(crate) async fn run_impl(
    args: &LoadConfig,
    stop: Arc<AtomicBool>,
) -> Result<Report, LoadError> {
    let started = Instant::now();
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    validate(args)?;
    let url = args.url.trim();
    if url.is_empty() {
        return Err(LoadError::usage(
            "--url is required (e.g. --url http://127.0.0.1:8080)",
        ));
    }
    let mut target = Target::new(url, &args.endpoint)?;
    // --mix: every endpoint's lines, read before any load.
    let mix_lines: Option<Vec<Vec<MixLine>>> = match &args.mix {
        Some(spec) => Some(
            spec.0
                .iter()
                .map(|m| read_mix_file(&m.file, &args.endpoint))
                .collect::<Result<_, _>>()?,
        ),
        None => None,
    };
    let mixed = mix_lines.is_some();
    let search = args.endpoint.is_search() && !mixed;
    let bodies = match (&args.body_file, search) {
        _ if mixed => BodySet::default(),
        (None, true) if args.text_queries.is_some() => BodySet::from_text_queries(
            args.text_queries
                .as_deref()
                .unwrap_or(std::path::Path::new("")),
            &args.text_field,
            args.k,
            args.ef,
            args.text_mode.as_deref(),
        )?,
        (Some(p), _) => BodySet::from_file(p)?,
        (None, true) => BodySet::generated(args.query_count, args.k, args.ef),
        (None, false) => BodySet::empty(),
    };
    // --mix: the seeded schedule; request i of the run is entry i.
    let schedule = mix_lines.as_ref().map(|ls| {
        let weights: Vec<f64> = args
            .mix
            .as_ref()
            .map(|m| m.0.iter().map(|e| e.weight).collect())
            .unwrap_or_default();
        let lens: Vec<usize> = ls.iter().map(|l| l.len()).collect();
        build_schedule(&weights, &lens, args.seed)
    });
    if let Pick::Fixed(i) = args.pick {
        if let Some(sc) = &schedule {
            if i >= sc.len() {
                return Err(LoadError::usage(format!(
                    "--pick fixed:{i} is out of range: the --mix schedule has {} entries (0..{})",
                    sc.len(),
                    sc.len()
                )));
            }
        } else if i >= bodies.len() && search {
            return Err(LoadError::usage(format!(
                "--pick fixed:{i} is out of range: there are {} bodies (0..{})",
                bodies.len(),
                bodies.len()
            )));
        }
    }
    let mut warnings = Vec::new();
    let gt = match (&args.gt, search) {
        (Some(p), true) => {
            let m = crate::gt::read_ids(p)?;
            let max_q = bodies.qidx.iter().flatten().max().copied();
            if let Some(q) = max_q {
                if q as usize >= m.n {
                    return Err(LoadError::GroundTruth {
                        path: p.clone(),
                        message: format!(
                            "has {} rows but the bodies use qidx up to {q} (lower --query-count?)",
                            m.n
                        ),
                    });
                }
            }
            Some(m)
        }
        (Some(_), false) if mixed => {
            warnings.push("--gt ignored: --mix answers are not checked for recall".into());
            None
        }
        (Some(_), false) => {
            warnings.push(format!(
                "--gt ignored: '{}' carries no queries",
                args.endpoint
            ));
            None
        }
        _ => None,
    };
    target.resolve().await;
    let search_bodies = search && args.body_file.is_none();
    preflight(args, &target, &bodies, search_bodies, &mut warnings).await?;
    let (server_src, stats) = resources::detect(&target, args.server_pid).await;
    if let (Some(p), true, Some(metric)) = (
        &args.gt,
        gt.is_some(),
        stats.as_ref().and_then(|s| s.index_metric.as_deref()),
    ) {
        match crate::gt::read_meta(p) {
            Ok(Some(meta)) => crate::gt::check_metric(p, &meta, metric).map_err(|message| {
                LoadError::GroundTruth {
                    path: p.clone(),
                    message,
                }
            })?,
            Ok(None) => warnings.push(format!(
                "{}: no metric recorded (no {}; files from searchd gt record it): recall assumes it matches the index's {metric}",
                p.display(),
                crate::gt::meta_path(p).display()
            )),
            Err(message) => {
                return Err(LoadError::GroundTruth {
                    path: p.clone(),
                    message,
                })
            }
        }
    }
    let n_count = args.n_max.or(stats.as_ref().and_then(|s| s.index_n));
    let optimistic = matches!(args.pick, Pick::Fixed(_)) && (search || mixed);
    let cold = args.cache == Some(crate::config::CacheMode::Cold);
    let mix_total_lines: usize = mix_lines
        .as_ref()
        .map_or(0, |ls| ls.iter().map(|l| l.len()).sum());
    if optimistic {
        let w = format!(
            "--pick {}: one repeated query lets caches flatter the server; these numbers are OPTIMISTIC and are not a capacity figure (rotate queries: --pick uniform|zipf:S|seq)",
            args.pick
        );
        if !args.quiet {
            eprintln!("warning: {w}");
        }
        warnings.push(w);
    } else if mixed && !cold && mix_total_lines < 100 {
        warnings.push(format!(
            "only {mix_total_lines} distinct --mix requests: caches may flatter the server (--cache cold defeats response caches)"
        ));
    } else if search && !cold && bodies.len() < 100 {
        warnings.push(format!(
            "only {} distinct bodies: caches may flatter the server",
            bodies.len()
        ));
    }
    if args.retry_after == crate::config::RetryAfter::Honor && !args.open_loop() {
        warnings.push(
            "--retry-after honor: a slot answered 503/429 waits Retry-After before its next request, so fewer requests are in flight than the concurrency says".into(),
        );
    }
    if server_src == ServerSource::None {
        warnings.push(
            "no server CPU/RSS: the target has no GET /stats with process counters and no --server-pid was given".into(),
        );
    }

    let mut pick_n = bodies.len();
    let mut requests: Vec<bytes::Bytes> =
        bodies.bodies.iter().map(|b| target.serialize(b)).collect();
    let mut parts: Vec<ReqParts> = Vec::new();
    let mut part_of: Vec<u32> = Vec::new();
    let mut mix_ep: Vec<u16> = Vec::new();
    let mut mix_head: Vec<bool> = Vec::new();
    if let (Some(ls), Some(sc)) = (&mix_lines, &schedule) {
        // One serialised request per distinct line, shared by every entry that sends it.
        let mut uniq: std::collections::HashMap<&MixLine, u32> = std::collections::HashMap::new();
        let mut ser: Vec<bytes::Bytes> = Vec::new();
        let ids: Vec<Vec<u32>> = ls
            .iter()
            .map(|lines| {
                lines
                    .iter()
                    .map(|l| {
                        *uniq.entry(l).or_insert_with(|| {
                            let body = l.body.clone().unwrap_or_default();
                            ser.push(target.serialize_to(&l.method, &l.path, l.with_body(), &body));
                            parts.push(ReqParts {
                                method: l.method.clone(),
                                path: l.path.clone(),
                                with_body: l.with_body(),
                                body,
                            });
                            (parts.len() - 1) as u32
                        })
                    })
                    .collect()
            })
            .collect();
        part_of = sc
            .ep
            .iter()
            .zip(&sc.line)
            .map(|(&e, &l)| ids[e as usize][l as usize])
            .collect();
        requests = part_of.iter().map(|&p| ser[p as usize].clone()).collect();
        mix_ep = sc.ep.clone();
        mix_head = part_of
            .iter()
            .map(|&p| parts[p as usize].method == hyper::Method::HEAD)
            .collect();
        pick_n = sc.len();
    } else if cold {
        parts = bodies
            .bodies
            .iter()
            .map(|b| ReqParts {
                method: target.method.clone(),
                path: target.path().to_string(),
                with_body: target.with_body,
                body: b.clone(),
            })
            .collect();
    }
    if cold {
        init_nonce();
    }
    let sh = Arc::new(Shared {
        target: target.clone(),
        bodies,
        requests,
        check: if mixed {
            Check::Mix
        } else if search && args.text_mode.as_deref() == Some("lexical") {
            Check::SearchUpTo
        } else if search {
            Check::Search
        } else {
            Check::StatusOnly
        },
        gt,
        n_count,
        n_ids: args.n_max,
        request_timeout: args.request_timeout,
        live: LiveStats::new(),
        pick: PickShared::new(args.pick, pick_n),
        honor_retry_after: args.retry_after == crate::config::RetryAfter::Honor,
        mix_ep,
        mix_head,
        mix_names: args
            .mix
            .as_ref()
            .map(|m| m.0.iter().map(|e| e.name.clone()).collect())
            .unwrap_or_default(),
        cold: cold.then_some(ColdParts { parts, part_of }),
        stop: stop.clone(),
    });
    let threads = args.threads.unwrap_or_else(resources::cores).max(1);
    let shards = Shards::start(threads).map_err(|source| LoadError::Runtime { source })?;
    let pb = if args.quiet {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        pb.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("template"));
        pb.enable_steady_tick(Duration::from_millis(120));
        pb
    };
    let mut runner = Runner {
        args,
        sh,
        server_src,
        pb,
        pool: Vec::new(),
        threads,
        shards,
    };

    let lv = levels(args);
    let mut raws: Vec<Vec<StepRaw>> = lv.iter().map(|_| Vec::new()).collect();
    let mut aborted: Option<String> = None;
    let mut interrupted = false;
    'trials: for trial in 0..args.trials {
        for (li, &level) in lv.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'trials;
            }
            let seed = args.seed ^ ((trial as u64) << 40) ^ ((li as u64) << 20);
            let Some(raw) = runner.run_step(level, seed).await else {
                interrupted = true;
                break 'trials;
            };
            let pass = slo_pass(
                raw.acc.ok,
                raw.p99(),
                raw.error_rate(),
                args.slo_p99_ms,
                args.max_error_rate,
            );
            let lvl = match level {
                Level::Closed(c) => format!("c={c:<4}"),
                Level::Open(r) => format!("rate={r:.0}/s"),
            };
            runner.say(format!(
                "{}{lvl} qps {:>9.1}  p99 {:>8} ms  errors {:>5.2}%  {}",
                if args.trials > 1 {
                    format!("trial {}/{} ", trial + 1, args.trials)
                } else {
                    String::new()
                },
                raw.qps(),
                raw.p99()
                    .map(|p| format!("{p:.2}"))
                    .unwrap_or_else(|| "-".into()),
                raw.error_rate() * 100.0,
                if raw.partial {
                    "PARTIAL (interrupted)"
                } else if pass {
                    "ok"
                } else {
                    "SLO broken: ramp stops"
                }
            ));
            for (name, e) in &endpoint_steps(std::slice::from_ref(&raw), &runner.sh.mix_names).0 {
                runner.say(endpoint_line(name, e));
            }
            let all_connect = raw.all_connect_errors();
            let why = raw.acc.connect_err.clone().unwrap_or_default();
            let was_partial = raw.partial;
            raws[li].push(raw);
            if was_partial || stop.load(Ordering::Relaxed) {
                interrupted = true;
                break 'trials;
            }
            if all_connect {
                aborted = Some(if li == 0 {
                    format!("no connection to {} could be made: {why}", target.base)
                } else {
                    format!(
                        "{} refused every connection from step {lvl} on: {why}",
                        target.base
                    )
                });
                break 'trials;
            }
            if !pass {
                break;
            }
        }
    }
    runner.pb.finish_and_clear();

    let steps: Vec<Step> = raws
        .iter()
        .filter(|r| !r.is_empty())
        .map(|r| aggregate(r, args, &runner.sh.mix_names))
        .collect();
    let mk = |i: usize| {
        let s: &Step = &steps[i];
        Best {
            concurrency: s.concurrency,
            rate: s.rate,
            qps: s.qps,
            p99_ms: s.latency_ms.p99,
            step: i,
        }
    };
    let sustainable = best_step(&steps, |s| s.qps, |s| s.slo_pass && !s.partial).map(mk);
    // Peak: best QPS regardless of latency, but never a step over the error cap (a step
    // answering half its requests with errors is no throughput figure) nor a partial one.
    let peak = best_step(
        &steps,
        |s| s.qps,
        |s| s.ok > 0 && !s.partial && s.error_rate <= args.max_error_rate,
    )
    .map(mk);
    if interrupted && aborted.is_none() {
        aborted = Some(match steps.iter().find(|s| s.partial) {
            Some(_) => "interrupted by Ctrl-C (SIGINT): the last step is PARTIAL".to_string(),
            None => {
                "interrupted by Ctrl-C (SIGINT) before the next step measured anything".to_string()
            }
        });
    }
    if steps.iter().any(|s| s.client_saturated) {
        warnings.push(
            "the load generator was near its CPU limit in some steps (client_saturated): those numbers may measure the client, not the server".into(),
        );
    }
    let open = args.open_loop();
    let report = Report {
        schema: SCHEMA.to_string(),
        target: target.base.clone(),
        config: Config {
            endpoint: args.endpoint.to_string(),
            ramp: (!open).then(|| args.ramp.0.clone()),
            rates: open.then(|| {
                lv.iter()
                    .filter_map(|l| match l {
                        Level::Open(r) => Some(*r),
                        _ => None,
                    })
                    .collect()
            }),
            warmup_s: args.warmup.as_secs_f64(),
            duration_s: args.duration.as_secs_f64(),
            slo_p99_ms: args.slo_p99_ms,
            max_error_rate: args.max_error_rate,
            queries: (search && args.body_file.is_none() && args.text_queries.is_none())
                .then_some(args.query_count),
            pick: args.pick.to_string(),
            body_file: args.body_file.as_ref().map(|p| p.display().to_string()),
            text_queries: args.text_queries.as_ref().map(|p| p.display().to_string()),
            text_mode: args.text_mode.clone(),
            bodies: if mixed { mix_total_lines } else { pick_n },
            k: args.k,
            ef: args.ef,
            gt: args.gt.as_ref().map(|p| p.display().to_string()),
            n_max: n_count,
            trials: args.trials,
            connections: args.connections,
            late_threshold_ms: args.late_threshold.as_secs_f64() * 1e3,
            request_timeout_s: args.request_timeout.as_secs_f64(),
            seed: args.seed,
            server_pid: args.server_pid,
            fail_on_slo: args.fail_on_slo,
            retry_after: args.retry_after,
        },
        steps,
        sustainable,
        peak,
        mode: if open { "open" } else { "closed" }.into(),
        optimistic,
        aborted,
        interrupted,
        warnings,
        server_source: server_src.name().into(),
        client: ClientInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            cores: resources::cores(),
            threads,
        },
        started_unix_s,
        elapsed_s: started.elapsed().as_secs_f64(),
        cache: args.cache,
        mix: args.mix.as_ref().map(|m| {
            m.0.iter()
                .zip(mix_lines.as_deref().unwrap_or_default())
                .map(|(e, ls)| MixInfo {
                    name: e.name.clone(),
                    file: e.file.display().to_string(),
                    weight: e.weight,
                    lines: ls.len(),
                })
                .collect()
        }),
    };
    if args.fail_on_slo && report.sustainable.is_none() {
        return Err(LoadError::SloFailed {
            slo_p99_ms: args.slo_p99_ms,
            max_error_rate: args.max_error_rate,
            report: Box::new(report),
        });
    }
    Ok(report)
}
