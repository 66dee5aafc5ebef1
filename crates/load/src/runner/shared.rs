//! What every worker of a run shares: the serialised requests, how answers are
//! checked, the live counters, and (`--cache cold`) the parts a request is rebuilt from
//! with a fresh nonce per send.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::bodies::{BodySet, PickShared};
use crate::check::Check;
use crate::client::Target;
use crate::gt::IdMatrix;
use crate::stats::LiveStats;

/// Everything fixed for the whole run.
pub(super) struct Shared {
    pub(super) target: Target,
    pub(super) bodies: BodySet,
    /// Whole serialised requests, one per body.
    pub(super) requests: Vec<bytes::Bytes>,
    pub(super) check: Check,
    pub(super) gt: Option<IdMatrix>,
    /// Hit count bound (min(k, n)).
    pub(super) n_count: Option<u64>,
    /// Id bound (--n-max only).
    pub(super) n_ids: Option<u64>,
    pub(super) request_timeout: Duration,
    pub(super) live: LiveStats,
    pub(super) pick: Arc<PickShared>,
    /// Closed loop: wait Retry-After after a 503/429 (`--retry-after honor`).
    pub(super) honor_retry_after: bool,
    /// `--mix`: endpoint of each request (empty otherwise).
    pub(super) mix_ep: Vec<u16>,
    /// `--mix`: endpoint names.
    pub(super) mix_names: Vec<String>,
    /// `--mix`: whether request i is a HEAD (its answer has no body); empty otherwise.
    pub(super) mix_head: Vec<bool>,
    /// `--cache cold`: what each request is made of, to serialise it with a nonce per send.
    pub(super) cold: Option<ColdParts>,
    /// Set on the first Ctrl-C (or by the caller): finish the current step early and stop.
    pub(super) stop: Arc<AtomicBool>,
}

/// The parts of a request, for per-send serialisation (`--cache cold`).
pub(super) struct ReqParts {
    pub(super) method: hyper::Method,
    pub(super) path: String,
    pub(super) with_body: bool,
    pub(super) body: bytes::Bytes,
}

pub(super) struct ColdParts {
    pub(super) parts: Vec<ReqParts>,
    /// Part of each request index; empty: the identity.
    pub(super) part_of: Vec<u32>,
}

/// `--cache cold` nonces: one process-wide counter, started at the Unix time in
/// nanoseconds on first use so that later processes do not repeat earlier keys.
pub(super) static NONCE: AtomicU64 = AtomicU64::new(0);

pub(super) fn init_nonce() {
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
    pub(super) fn head_only(&self, idx: usize) -> bool {
        self.mix_head
            .get(idx)
            .copied()
            .unwrap_or_else(|| self.target.head_only())
    }

    /// The bytes to send for request `idx`: the pre-serialised request, or (cold cache)
    /// the request serialised into `buf` with a fresh nonce.
    #[inline]
    pub(super) fn request<'a>(&'a self, idx: usize, buf: &'a mut Vec<u8>) -> &'a [u8] {
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
pub(super) struct Times {
    pub(super) measure_start: Instant,
    /// `measure_start` as Unix time in seconds (to line the per-second series up with
    /// other clocks: a server's logs, its optimizer's events).
    pub(super) measure_start_unix_s: f64,
    pub(super) end: Instant,
    /// Most per-second samples one worker keeps.
    pub(super) sample_cap: usize,
}
