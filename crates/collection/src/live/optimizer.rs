//! The optimizer's two background threads ([`optimizer_loop`]: the refresher and the
//! merger) and the record of their steps ([`Event`], timed by phase with a [`Timer`]).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{LiveCollection, MAX_EVENTS};

/// One step of a refresh, merge or commit, timed by phase.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Event {
    /// `refresh`, `flat_merge`, `graph_merge` or `commit`.
    pub kind: &'static str,
    /// When it started, Unix time in milliseconds.
    pub start_unix_ms: u64,
    /// Its whole duration, milliseconds.
    pub ms: f64,
    /// Documents written (refreshes and merges).
    pub docs: u64,
    /// Segments read (merges).
    #[serde(skip_serializing_if = "is_zero")]
    pub segments: usize,
    /// The niceness the step ran at (graph merges).
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub nice: i32,
    /// Merges: documents whose graph links came from the first merged segment's graph
    /// (the merged index extended it instead of building from nothing).
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub reused: u64,
    /// Milliseconds per phase, in order (`read`, `write`, `open`, `swap`, `sync`, ...).
    pub phases: Vec<(&'static str, f64)>,
}

fn is_zero(x: &usize) -> bool {
    *x == 0
}

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

fn is_zero_i32(x: &i32) -> bool {
    *x == 0
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Times the phases of one optimizer step.
pub(super) struct Timer {
    start: Instant,
    start_unix_ms: u64,
    last: Instant,
    phases: Vec<(&'static str, f64)>,
}

impl Timer {
    pub(super) fn new() -> Timer {
        let now = Instant::now();
        Timer {
            start: now,
            start_unix_ms: unix_ms(),
            last: now,
            phases: Vec::new(),
        }
    }
    /// The phase that ends now.
    pub(super) fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.phases
            .push((name, (now - self.last).as_secs_f64() * 1e3));
        self.last = now;
    }
    pub(super) fn event(self, kind: &'static str, docs: u64, segments: usize, nice: i32) -> Event {
        Event {
            kind,
            start_unix_ms: self.start_unix_ms,
            ms: self.start.elapsed().as_secs_f64() * 1e3,
            docs,
            segments,
            nice,
            reused: 0,
            phases: self.phases,
        }
    }
}

impl LiveCollection {
    pub(super) fn record(&self, e: Event) {
        tracing::debug!(kind = e.kind, ms = e.ms, docs = e.docs, phases = ?e.phases, "optimizer step");
        let mut ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if ev.len() >= MAX_EVENTS {
            ev.pop_front();
        }
        ev.push_back(e);
    }

    /// The optimizer's recent steps, oldest first.
    pub fn events(&self) -> Vec<Event> {
        let ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        ev.iter().cloned().collect()
    }
}

/// The refresher's (or with `merger` the merger's) loop. It waits between steps holding only
/// a `Weak` of the collection, so dropping the last handle elsewhere ends the collection (its
/// `Drop` sets `stop`) and then this thread; it holds the collection only while it works.
/// (Holding it across the wait kept the collection alive forever once the two threads took
/// turns: each upgraded while the other held it.)
pub(super) fn optimizer_loop(
    me: std::sync::Weak<LiveCollection>,
    wake: Arc<(Mutex<bool>, Condvar)>,
    stop: Arc<AtomicBool>,
    merger: bool,
) {
    let tick = match me.upgrade() {
        Some(_) if merger => Duration::from_millis(500),
        Some(live) => live.cfg.refresh_interval.min(Duration::from_millis(200)),
        None => return,
    };
    let mut last_refresh = Instant::now();
    loop {
        if stop.load(Relaxed) {
            return;
        }
        if merger {
            std::thread::sleep(tick);
        } else {
            let (m, cv) = &*wake;
            let g = m.lock().unwrap_or_else(|p| p.into_inner());
            let (mut g, _) = cv
                .wait_timeout_while(g, tick, |woken| !*woken)
                .unwrap_or_else(|p| p.into_inner());
            *g = false;
        }
        if stop.load(Relaxed) {
            return;
        }
        let Some(live) = me.upgrade() else { return };
        if merger {
            match live.fields_build_step() {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "building a field index failed"),
            }
            if let Err(e) = live.graph_merge_step() {
                tracing::warn!(error = %e, "merge failed; retried later");
            }
            continue;
        }
        let (pending_docs, since_commit, dirty) = {
            let inner = live.lock_inner();
            (
                inner.pending_docs,
                inner.last_commit.elapsed(),
                !inner.pending.is_empty(),
            )
        };
        if (dirty && last_refresh.elapsed() >= live.cfg.refresh_interval)
            || pending_docs >= live.cfg.refresh_docs
        {
            last_refresh = Instant::now();
            if let Err(e) = live.refresh() {
                tracing::warn!(error = %e, "refresh failed; the writes stay in the log and are retried");
            }
        }
        if let Err(e) = live.flat_merge_step() {
            tracing::warn!(error = %e, "merge failed; retried later");
        }
        if since_commit >= live.cfg.commit_interval {
            if let Err(e) = live.commit() {
                tracing::warn!(error = %e, "commit failed; retried later");
            }
        }
    }
}
