//! What a worker counts: the accumulator of one worker (merged into a step's), and
//! `finish`, which checks one answer and counts it.

use hdrhistogram::Histogram;
use tokio::time::Instant;

use super::shared::{Shared, Times};
use crate::check::{check_response, recall_of};
use crate::stats::{
    body_text, new_histogram, new_ns_histogram, pack_sample, ErrorCounts, ErrorKind, FirstErrors,
    MAX_SECOND_SAMPLES,
};

/// What one worker (or a whole step) counted.
pub(super) struct Acc {
    pub(super) hist: Histogram<u64>,
    pub(super) ok: u64,
    pub(super) errors: ErrorCounts,
    pub(super) recall_sum: f64,
    pub(super) recall_n: u64,
    pub(super) last_done: Option<Instant>,
    pub(super) connect_err: Option<String>,
    /// The first answer or failure of each error kind.
    pub(super) first: FirstErrors,
    /// Open loop: send-time error (actual - scheduled), ns.
    pub(super) send_ns: Histogram<u64>,
    /// Packed (second, error?, latency) samples for the per-second series.
    pub(super) samples: Vec<u64>,
    /// `--mix`: per endpoint.
    pub(super) eps: Vec<EpAcc>,
}

/// One endpoint's counts (`--mix`).
pub(super) struct EpAcc {
    pub(super) hist: Histogram<u64>,
    pub(super) ok: u64,
    pub(super) errors: ErrorCounts,
}

impl Acc {
    pub(super) fn new(endpoints: usize) -> Self {
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
    pub(super) fn merge(&mut self, o: Acc) {
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
    pub(super) fn requests(&self) -> u64 {
        self.ok + self.errors.total()
    }
}

pub(super) type Outcome = Result<(u16, bytes::Bytes), (ErrorKind, Option<String>)>;

/// Check and count one finished request.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish(
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
pub(super) fn describe(kind: ErrorKind, status: u16, body: &[u8], expect: usize) -> String {
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
pub(super) fn describe_failure(kind: ErrorKind, sh: &Shared) -> String {
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
