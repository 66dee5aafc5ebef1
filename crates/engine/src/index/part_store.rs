//! The graph manager: a partitioned index's partitions, resident or not, under a memory
//! budget ([`crate::LoadOptions::memory_budget`]).
//!
//! Without a budget every partition is opened with the index and stays. With one, none is
//! resident at open; a search asks for its next probes ([`PartStore::request`]: each cold
//! one is queued, once however many searches ask) and then waits for each
//! ([`PartStore::wait`]) no longer than its deadline: a probe still loading then is
//! skipped and the answer says so. Search threads never read partition files themselves.
//!
//! At most [`MAX_LOADERS`] loader threads read partitions (they exist while there is
//! work). Before a load starts, the loader reserves the partition's bytes: the least
//! recently used resident partitions are dropped until resident + reserved + this one fit
//! the budget (less the routing), so loads in flight never push memory past it. A dropped
//! partition a search still holds is freed when that search leaves it (at most one
//! partition per search thread: the overshoot is bounded by the search threads times the
//! largest partition). Partitions under a budget are read into private memory (`ram`), so
//! what is resident is exactly what the budget counts.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result, SearchError};
use crate::format::Manifest;
use crate::index::Index;
use crate::storage::{LoadOptions, Placement, VectorPlacement};

/// What the manager has done, for `/stats` and reports.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PartitionStats {
    /// Partitions of the index.
    pub partitions: usize,
    /// Partitions resident now.
    pub resident: usize,
    /// Bytes of the resident partitions.
    pub resident_bytes: u64,
    /// Most bytes of partitions resident at once since open (loads reserve their room
    /// before they read, so under a budget this stays within it, less the routing).
    pub peak_bytes: u64,
    /// The budget for partitions (`None`: all resident).
    pub budget_bytes: Option<u64>,
    /// Partitions loaded since open (after a miss).
    pub loads: u64,
    /// Partitions dropped to keep to the budget.
    pub evictions: u64,
    /// Seconds spent loading, summed.
    pub load_seconds: f64,
    /// Slowest load, seconds.
    pub max_load_seconds: f64,
    /// 99th percentile of the load times, milliseconds (the upper edge of its bucket in a
    /// histogram with buckets 2^(i/4) ms wide: within 19%).
    pub load_ms_p99: f64,
    /// Probes skipped because their partition was still loading at the deadline.
    pub skipped_probes: u64,
}

/// Loader threads at most: partitions load in parallel with the searches, but a load
/// reserves its bytes first, so more loaders would only add reservations to the budget.
pub const MAX_LOADERS: usize = 2;

enum State {
    Cold,
    /// Queued or being read by a loader.
    Loading,
    Resident(Arc<Index>, u64),
    Failed(String),
}

struct Slot {
    state: Mutex<State>,
    ready: Condvar,
    used: AtomicU64,
    /// Its files' checksums were checked by an earlier load (files are write-once, so
    /// later loads skip the pass over every byte).
    verified: std::sync::atomic::AtomicBool,
}

/// The partitions of one partitioned index.
pub(crate) struct PartStore {
    dirs: Vec<PathBuf>,
    opts: LoadOptions,
    budget: Option<u64>,
    /// The budget less the routing: what resident and loading partitions may take.
    part_budget: u64,
    /// Bytes each partition takes when resident (from its manifest; empty without a
    /// budget).
    sizes: Vec<u64>,
    slots: Vec<Slot>,
    tick: AtomicU64,
    counters: Mutex<PartitionStats>,
    loader: Mutex<Loader>,
    load_times: Mutex<LoadTimes>,
    /// Signalled when a load ends (its reservation is released).
    released: Condvar,
}

/// Load times, in buckets growing by 2^(1/4) from 1/64 ms (the last one open-ended).
struct LoadTimes {
    counts: [u64; LOAD_BUCKETS],
    total: u64,
}

const LOAD_BUCKETS: usize = 96;

impl Default for LoadTimes {
    fn default() -> Self {
        LoadTimes {
            counts: [0; LOAD_BUCKETS],
            total: 0,
        }
    }
}

impl LoadTimes {
    fn upper_ms(i: usize) -> f64 {
        2f64.powf((i as f64 + 1.0) / 4.0) / 64.0
    }

    fn record(&mut self, d: std::time::Duration) {
        let ms = d.as_secs_f64() * 1e3;
        let i = (0..LOAD_BUCKETS - 1)
            .find(|&i| ms <= Self::upper_ms(i))
            .unwrap_or(LOAD_BUCKETS - 1);
        self.counts[i] += 1;
        self.total += 1;
    }

    /// The upper edge of the bucket holding quantile `q` (0 with no loads).
    fn quantile_ms(&self, q: f64) -> f64 {
        let want = (q * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if c > 0 && seen >= want {
                return Self::upper_ms(i);
            }
        }
        0.0
    }
}

/// The loaders' queue.
#[derive(Default)]
struct Loader {
    pending: VecDeque<usize>,
    /// Loader threads running.
    threads: usize,
    /// Bytes reserved by loads in flight.
    reserved: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PartStore {
    /// The store of the partitions in `dirs` (partition `p`'s index in `dirs[p]`, holding
    /// `sizes[p]` rows). `routing_bytes`: what the index keeps resident besides its
    /// partitions, counted against the budget. Without a budget every partition is opened
    /// now; with one, a budget that cannot hold the routing and the largest partition is
    /// refused, naming the bytes it needs.
    pub fn open(
        dirs: Vec<PathBuf>,
        opts: &LoadOptions,
        routing_bytes: u64,
        quantized_parts: bool,
    ) -> Result<PartStore> {
        let mut part_opts = LoadOptions {
            memory_budget: None,
            ..*opts
        };
        let budget = opts.memory_budget.is_some();
        if budget {
            part_opts.graph = Placement::Ram;
            part_opts.codes = Placement::Ram;
        }
        // `--vectors` places the index's own vectors. A partition walks its float32
        // vectors unless it has codes, so those stay in memory; with codes they follow
        // `--vectors` (disk: read to rescore).
        part_opts.vectors = match (opts.vectors.in_memory(), quantized_parts, budget) {
            (Some(_), _, true) => VectorPlacement::Ram,
            (Some(_), _, false) => opts.vectors,
            (None, false, true) => VectorPlacement::Ram,
            (None, false, false) => VectorPlacement::Mmap,
            (None, true, _) => opts.vectors,
        };
        let slots = (0..dirs.len())
            .map(|_| Slot {
                state: Mutex::new(State::Cold),
                ready: Condvar::new(),
                used: AtomicU64::new(0),
                verified: std::sync::atomic::AtomicBool::new(false),
            })
            .collect();
        let mut store = PartStore {
            budget: opts.memory_budget,
            part_budget: 0,
            sizes: Vec::new(),
            opts: part_opts,
            loader: Mutex::new(Loader::default()),
            load_times: Mutex::new(LoadTimes::default()),
            released: Condvar::new(),
            slots,
            tick: AtomicU64::new(1),
            counters: Mutex::new(PartitionStats {
                partitions: dirs.len(),
                budget_bytes: opts.memory_budget,
                ..PartitionStats::default()
            }),
            dirs,
        };
        match store.budget {
            None => {
                for p in 0..store.dirs.len() {
                    let index = Index::open(&store.dirs[p], &store.opts)?;
                    store.publish(p, index, None);
                }
            }
            Some(budget) => {
                store.sizes = (0..store.dirs.len())
                    .map(|p| store.estimate(p))
                    .collect::<Result<Vec<u64>>>()?;
                let largest = store.sizes.iter().copied().max().unwrap_or(0);
                let need = routing_bytes + largest;
                if budget < need {
                    return Err(Error::InvalidParam {
                        name: "memory_budget",
                        message: format!(
                            "{budget} bytes cannot hold this index's routing ({routing_bytes} \
                             bytes) and its largest partition ({largest} bytes): it needs at \
                             least {need}"
                        ),
                    });
                }
                store.part_budget = budget - routing_bytes;
            }
        }
        Ok(store)
    }

    /// Bytes partition `p` takes when resident, from its manifest's file sizes.
    fn estimate(&self, p: usize) -> Result<u64> {
        let m = Manifest::read(&self.dirs[p])?;
        let vectors_resident = self.opts.vectors.in_memory().is_some();
        Ok(m.files
            .iter()
            .filter(|f| vectors_resident || f.name != crate::files::vectors::NAME)
            .map(|f| f.bytes)
            .sum())
    }

    /// Make partition `p` resident. The counters change before the state does, so a
    /// search that found it resident sees it counted. `load`: its read time, when it was
    /// loaded on demand.
    fn publish(&self, p: usize, index: Index, load: Option<std::time::Duration>) {
        // Under a budget, what the load reserved: the files read into memory (the index's
        // own byte count includes rescoring vectors left on disk).
        let bytes = self.sizes.get(p).copied().unwrap_or(index.info().bytes);
        {
            let mut c = lock(&self.counters);
            c.resident += 1;
            c.resident_bytes += bytes;
            c.peak_bytes = c.peak_bytes.max(c.resident_bytes);
            if let Some(d) = load {
                let s = d.as_secs_f64();
                c.loads += 1;
                c.load_seconds += s;
                c.max_load_seconds = c.max_load_seconds.max(s);
                let mut h = lock(&self.load_times);
                h.record(d);
                c.load_ms_p99 = h.quantile_ms(0.99);
            }
        }
        let tick = self.tick.fetch_add(1, Ordering::Relaxed);
        self.slots[p].used.store(tick, Ordering::Relaxed);
        *lock(&self.slots[p].state) = State::Resident(Arc::new(index), bytes);
        self.slots[p].ready.notify_all();
    }

    /// Queue partition `p` for loading if it is cold (once however many searches ask),
    /// starting a loader thread if fewer than [`MAX_LOADERS`] run.
    pub fn request(self: &Arc<Self>, p: usize) {
        let mut st = lock(&self.slots[p].state);
        if !matches!(*st, State::Cold) {
            return;
        }
        *st = State::Loading;
        drop(st);
        let mut q = lock(&self.loader);
        q.pending.push_back(p);
        if q.threads >= MAX_LOADERS {
            return;
        }
        q.threads += 1;
        drop(q);
        let store = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("searchd-part-loader".into())
            .spawn(move || store.loader_thread());
        if let Err(e) = spawned {
            let mut q = lock(&self.loader);
            q.threads -= 1;
            if q.threads == 0 {
                // Nobody will take the queue: fail what waits there.
                let pending: Vec<usize> = q.pending.drain(..).collect();
                drop(q);
                for p in pending {
                    self.fail(p, format!("cannot start a loader thread: {e}"));
                }
            }
        }
    }

    /// Load queued partitions until the queue is empty, then end (the thread holds the
    /// store only while there is work).
    fn loader_thread(&self) {
        loop {
            let p = {
                let mut q = lock(&self.loader);
                match q.pending.pop_front() {
                    Some(p) => p,
                    None => {
                        q.threads -= 1;
                        return;
                    }
                }
            };
            let reserved = self.reserve(p);
            self.load(p);
            let mut q = lock(&self.loader);
            q.reserved -= reserved;
            drop(q);
            self.released.notify_all();
        }
    }

    /// Make room for partition `p` under the budget and reserve its bytes (returned, to
    /// release after the load). Drops least recently used partitions; when loads in
    /// flight hold the room, waits for them.
    fn reserve(&self, p: usize) -> u64 {
        if self.budget.is_none() {
            return 0;
        }
        let need = self.sizes[p];
        let mut q = lock(&self.loader);
        loop {
            let resident = lock(&self.counters).resident_bytes;
            if resident + q.reserved + need <= self.part_budget {
                q.reserved += need;
                return need;
            }
            if self.evict_one() {
                continue;
            }
            if q.reserved == 0 {
                // Nothing left to drop and nothing loading (the budget was checked at
                // open to hold the largest partition): load anyway.
                q.reserved += need;
                return need;
            }
            q = self.released.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn fail(&self, p: usize, message: String) {
        *lock(&self.slots[p].state) = State::Failed(message);
        self.slots[p].ready.notify_all();
    }

    fn load(&self, p: usize) {
        let start = Instant::now();
        let verified = self.slots[p].verified.load(Ordering::Relaxed);
        let opts = LoadOptions {
            verify: self.opts.verify && !verified,
            ..self.opts
        };
        match Index::open(&self.dirs[p], &opts) {
            Ok(index) => {
                self.slots[p].verified.store(true, Ordering::Relaxed);
                self.publish(p, index, Some(start.elapsed()));
            }
            Err(e) => self.fail(p, e.to_string()),
        }
    }

    /// Drop the least recently used resident partition, preferring one no search holds
    /// now; false when none is resident.
    fn evict_one(&self) -> bool {
        let victim = (0..self.slots.len())
            .filter_map(|q| match &*lock(&self.slots[q].state) {
                State::Resident(index, _) => Some((
                    Arc::strong_count(index) > 1,
                    self.slots[q].used.load(Ordering::Relaxed),
                    q,
                )),
                _ => None,
            })
            .min();
        let Some((_, _, q)) = victim else {
            return false;
        };
        let mut st = lock(&self.slots[q].state);
        if let State::Resident(_, bytes) = *st {
            *st = State::Cold;
            drop(st);
            let mut c = lock(&self.counters);
            c.resident -= 1;
            c.resident_bytes -= bytes;
            c.evictions += 1;
        }
        true
    }

    /// Partition `p`'s index once it is resident; `Ok(None)` when `deadline` passes first
    /// (the probe is skipped). Without a deadline this waits for the load.
    pub fn wait(
        self: &Arc<Self>,
        p: usize,
        deadline: Option<Instant>,
    ) -> std::result::Result<Option<Arc<Index>>, SearchError> {
        let slot = &self.slots[p];
        let mut st = lock(&slot.state);
        loop {
            match &*st {
                State::Resident(index, _) => {
                    let tick = self.tick.fetch_add(1, Ordering::Relaxed);
                    slot.used.store(tick, Ordering::Relaxed);
                    return Ok(Some(Arc::clone(index)));
                }
                State::Failed(message) => {
                    let message = format!("partition {p}: {message}");
                    // The next search tries again.
                    *st = State::Cold;
                    return Err(SearchError::Storage { message });
                }
                State::Cold => {
                    drop(st);
                    self.request(p);
                    st = lock(&slot.state);
                }
                State::Loading => match deadline {
                    None => st = slot.ready.wait(st).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let left = d.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            lock(&self.counters).skipped_probes += 1;
                            return Ok(None);
                        }
                        st = slot
                            .ready
                            .wait_timeout(st, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                },
            }
        }
    }

    /// What the manager has done so far.
    pub fn stats(&self) -> PartitionStats {
        lock(&self.counters).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::LoadTimes;
    use std::time::Duration;

    #[test]
    fn load_time_quantiles_come_from_the_bucket_edges() {
        let mut h = LoadTimes::default();
        assert_eq!(h.quantile_ms(0.99), 0.0, "no loads");
        for _ in 0..99 {
            h.record(Duration::from_millis(3));
        }
        h.record(Duration::from_secs(1));
        let p99 = h.quantile_ms(0.99);
        assert!((3.0..3.0 * 1.19).contains(&p99), "{p99}");
        let max = h.quantile_ms(1.0);
        assert!((1000.0..1190.0).contains(&max), "{max}");
        h.record(Duration::from_secs(100_000));
        assert!(
            h.quantile_ms(1.0) > 200_000.0,
            "the last bucket is open-ended"
        );
    }
}
