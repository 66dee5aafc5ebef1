//! One step of a run: the client threads (`Shards`), the step's raw result
//! (`StepRaw`), and the `Runner` that starts a step's workers, draws its progress,
//! samples the server and the client, and collects the counts.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::ProgressBar;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::acc::Acc;
use super::shared::{Shared, Times};
use super::workers::{closed_worker, dispatch_thread, open_worker, DispatchOut};
use crate::bodies::Picker;
use crate::client::Conn;
use crate::config::LoadConfig;
use crate::report::ServerStep;
use crate::resources::{self, ServerSource};
use crate::stats::{error_rate, percentiles_ms, ErrorKind, MAX_SECOND_SAMPLES};

/// One load level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Level {
    /// Closed loop with this many concurrent requests.
    Closed(u32),
    /// Open loop at this arrival rate (requests/s).
    Open(f64),
}

/// Client threads: one single-threaded runtime per thread, like wrk's
/// event loops (no work stealing, no cross-thread wake-ups). A connection
/// lives on one shard for the whole run: slot i on shard i % n.
pub(super) struct Shards {
    pub(super) handles: Vec<tokio::runtime::Handle>,
    /// Kernel thread ids of the client threads (Linux), so the client's CPU can be
    /// measured apart from a server running in the same process (`searchd demo`).
    pub(super) tids: Vec<i32>,
    pub(super) stops: Vec<tokio::sync::oneshot::Sender<()>>,
    pub(super) joins: Vec<std::thread::JoinHandle<()>>,
}

impl Shards {
    pub(super) fn start(n: usize) -> std::io::Result<Shards> {
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

    pub(super) fn spawn<F>(&self, slot: usize, f: F) -> tokio::task::JoinHandle<F::Output>
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
pub(super) struct StepRaw {
    pub(super) concurrency: u32,
    pub(super) measure_start_unix_s: f64,
    pub(super) rate: Option<f64>,
    pub(super) window_s: f64,
    pub(super) acc: Acc,
    pub(super) server: ServerStep,
    pub(super) client_cpu_pct: f64,
    pub(super) client_saturated: bool,
    pub(super) late: u64,
    pub(super) dropped: u64,
    pub(super) note: Option<String>,
    /// Cut short by a stop request (Ctrl-C): fewer seconds measured than asked.
    pub(super) partial: bool,
}

impl StepRaw {
    pub(super) fn qps(&self) -> f64 {
        self.acc.ok as f64 / self.window_s
    }
    pub(super) fn error_rate(&self) -> f64 {
        error_rate(self.acc.requests(), self.acc.errors.total())
    }
    pub(super) fn p99(&self) -> Option<f64> {
        percentiles_ms(&self.acc.hist).p99
    }
    pub(super) fn all_connect_errors(&self) -> bool {
        let n = self.acc.requests();
        n > 0 && self.acc.ok == 0 && self.acc.errors.get(ErrorKind::Connect) == n
    }
}

pub(super) struct Runner<'a> {
    pub(super) args: &'a LoadConfig,
    pub(super) sh: Arc<Shared>,
    pub(super) server_src: ServerSource,
    pub(super) pb: ProgressBar,
    /// Connections kept across steps (closed: one per concurrency slot;
    /// open: the pool).
    pub(super) pool: Vec<Option<Conn>>,
    pub(super) threads: usize,
    /// Declared after `pool`: connections are dropped before their runtimes.
    pub(super) shards: Shards,
}

/// How long a stopped step waits for its in-flight requests before abandoning them.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(2);

impl Runner<'_> {
    pub(super) fn say(&self, line: String) {
        if self.args.quiet {
            return;
        }
        if self.pb.is_hidden() {
            eprintln!("{line}");
        } else {
            self.pb.println(line);
        }
    }

    pub(super) fn stopped(&self) -> bool {
        self.sh.stop.load(Ordering::Relaxed)
    }

    /// Live progress until `until` (or a stop request); returns nothing, just draws.
    pub(super) async fn watch(
        &self,
        label: &str,
        phase: &str,
        phase_start: Instant,
        until: Instant,
    ) {
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

    pub(super) async fn sample_window(&self) -> (Option<resources::ServerSample>, Instant, f64) {
        let s = resources::sample(self.server_src, &self.sh.target).await;
        (
            s,
            Instant::now(),
            resources::client_cpu_seconds(&self.shards.tids),
        )
    }

    /// One step; None when a stop request came before its measured window began.
    pub(super) async fn run_step(&mut self, level: Level, seed: u64) -> Option<StepRaw> {
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
    pub(super) fn finish_step(
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
