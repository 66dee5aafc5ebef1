//! The request loops: a closed-loop worker (one per connection, the next request when
//! the last is answered), an open-loop worker (sends what the dispatcher hands it), and
//! the open-loop dispatcher thread (requests due on an absolute timeline).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use searchd_os::thread_cpu_seconds;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::acc::{finish, Acc};
use super::shared::{Shared, Times};
use crate::bodies::Picker;
use crate::client::{request_once_as, Conn, Timer};
use crate::stats::{scheduled_offset_ns, ErrorKind};

/// Pause after a failed connect before the slot tries again (closed loop),
/// so a refusing target is not hammered in a tight loop.
pub(super) const CONNECT_BACKOFF: Duration = Duration::from_millis(20);

/// Longest Retry-After a slot honours (`--retry-after honor`), so a server sending a
/// huge value cannot stall a step.
pub(super) const MAX_RETRY_AFTER_S: u64 = 10;

pub(super) async fn closed_worker(
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

pub(super) struct Job {
    pub(super) sched: Instant,
    pub(super) idx: usize,
    pub(super) record: bool,
}

pub(super) async fn open_worker(
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
pub(super) struct DispatchOut {
    pub(super) late: u64,
    pub(super) dropped: u64,
    pub(super) dropped_ep: Vec<u64>,
    /// CPU seconds the dispatcher thread used in the measured window.
    pub(super) cpu_s: f64,
}
/// Longest single sleep of the dispatcher, so a stop request is seen promptly.
pub(super) const MAX_SLEEP: Duration = Duration::from_millis(10);

/// Longest spin before a send, as a share of the interval between sends: the margin
/// follows the kernel's measured oversleep, which grows on a busy box, and a fixed 1 ms cap
/// spun a whole core at 1,000 req/s (client CPU 90% against 9% at 500/s), taking it from
/// the server being measured. With a tenth of the interval (within 20 us..1 ms) the
/// dispatcher spins at most ~10% of a core at any rate; a wake-up later than that shows as
/// send-time error, which is measured and reported.
pub(super) const SPIN_SHARE: f64 = 0.1;

/// The spin cap for `rate` requests/s (see [`SPIN_SHARE`]).
pub(super) fn max_spin_ns(rate: f64) -> f64 {
    (SPIN_SHARE * 1e9 / rate.max(1e-3)).clamp(20_000.0, 1_000_000.0)
}

/// Sleep-then-spin until `target` on the monotonic clock: sleep until a margin
/// before it (the margin follows a decaying peak of the measured oversleep of the
/// kernel's timer, between 20 us and `max_spin_ns`), then spin. False when `stop` was set meanwhile.
pub(super) fn wait_until(
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
pub(super) fn dispatch_thread(
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
