//! The graph manager: a partitioned index's partitions, resident or not, under a memory
//! budget ([`crate::LoadOptions::memory_budget`] or a shared [`crate::LoadOptions::pool`]).
//!
//! Without a budget every partition is opened with the index and stays. With one, none is
//! resident at open; a search asks for its next probes ([`PartStore::request`]: each cold
//! one is queued, once however many searches ask) and then waits for each
//! ([`PartStore::wait`]) no longer than its deadline: a probe still loading then is
//! skipped and the answer says so. Search threads never read partition files themselves.
//!
//! At most [`MAX_LOADERS`] loader threads read partitions (they exist while there is
//! work). Before a load starts, the loader reserves the partition's bytes: the least
//! recently used resident partitions are dropped until what the pool holds (its base, the
//! routing, resident partitions, loads in flight) and this one fit the budget, so loads in
//! flight never push memory past it. A dropped
//! partition a search still holds is freed when that search leaves it (at most one
//! partition per search thread: the overshoot is bounded by the search threads times the
//! largest partition). Partitions under a budget are read into private memory (`ram`), so
//! what is resident is exactly what the budget counts.
//!
//! The budget is a [`MemoryPool`]: indexes opened with the same pool
//! ([`crate::LoadOptions::pool`], one per server under `serve --memory-budget`) share it, so
//! one budget holds for the whole process. Each index pins its routing in the pool at open;
//! a load anywhere may drop the least recently used partition of any index in the pool.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Instant;

use serde::Serialize;

use crate::budget::{lock, Evictable, MemoryPool, PoolTotals};
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
    /// The budget (`None`: every partition resident).
    pool: Option<MemoryPool>,
    /// What this index pinned in the pool at open (its routing), given back on drop.
    pinned: u64,
    /// Bytes each partition takes when resident (from its manifest; empty without a
    /// budget).
    sizes: Vec<u64>,
    slots: Vec<Slot>,
    counters: Mutex<PartitionStats>,
    loader: Mutex<Loader>,
    load_times: Mutex<LoadTimes>,
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
}

impl PartStore {
    /// The store of the partitions in `dirs` (partition `p`'s index in `dirs[p]`, holding
    /// `sizes[p]` rows). `routing_bytes`: what the index keeps resident besides its
    /// partitions, pinned in the budget's pool while the index is open. Without a budget
    /// every partition is opened now; with one, a pool that cannot hold what is pinned in it
    /// (this routing included) and the largest partition is refused, naming the bytes it
    /// needs.
    pub fn open(
        dirs: Vec<PathBuf>,
        opts: &LoadOptions,
        routing_bytes: u64,
        quantized_parts: bool,
    ) -> Result<Arc<PartStore>> {
        let pool = opts
            .pool
            .clone()
            .or_else(|| opts.memory_budget.map(MemoryPool::new));
        let budget = pool.is_some();
        let mut part_opts = LoadOptions {
            memory_budget: None,
            pool: None,
            ..opts.clone()
        };
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
            pool: None,
            pinned: 0,
            sizes: Vec::new(),
            opts: part_opts,
            loader: Mutex::new(Loader::default()),
            load_times: Mutex::new(LoadTimes::default()),
            slots,
            counters: Mutex::new(PartitionStats {
                partitions: dirs.len(),
                budget_bytes: pool.as_ref().map(MemoryPool::budget),
                ..PartitionStats::default()
            }),
            dirs,
        };
        let Some(pool) = pool else {
            for p in 0..store.dirs.len() {
                let index = Index::open(&store.dirs[p], &store.opts)?;
                store.publish(p, index, None, 0);
            }
            return Ok(Arc::new(store));
        };
        store.sizes = (0..store.dirs.len())
            .map(|p| store.estimate(p))
            .collect::<Result<Vec<u64>>>()?;
        let largest = store.sizes.iter().copied().max().unwrap_or(0);
        {
            let mut a = lock(&pool.0.acct);
            let need = a.base + a.pinned + routing_bytes + largest;
            if pool.budget() < need {
                let others = if a.base + a.pinned > 0 {
                    format!(
                        " next to the {} bytes the process and the other open indexes pin",
                        a.base + a.pinned
                    )
                } else {
                    String::new()
                };
                return Err(Error::InvalidParam {
                    name: "memory_budget",
                    message: format!(
                        "{} bytes cannot hold this index's routing ({routing_bytes} bytes) \
                         and its largest partition ({largest} bytes){others}: it needs at \
                         least {need}",
                        pool.budget()
                    ),
                });
            }
            a.pinned += routing_bytes;
            a.indexes += 1;
            a.note_peak();
        }
        store.pinned = routing_bytes;
        store.pool = Some(pool.clone());
        let store = Arc::new(store);
        let member: Weak<dyn Evictable> = Arc::downgrade(&store) as Weak<dyn Evictable>;
        pool.register(member);
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

    /// The pool's use order (only evictions read it: without a budget nothing is dropped).
    fn tick(&self) -> u64 {
        self.pool.as_ref().map_or(0, MemoryPool::tick)
    }

    /// Make partition `p` resident. The accounts and counters change before the state
    /// does, so a search (or an eviction) that finds it resident sees it counted. `load`:
    /// its read time, when it was loaded on demand; `reserved`: the bytes its load reserved
    /// in the pool, which now turn resident.
    fn publish(&self, p: usize, index: Index, load: Option<std::time::Duration>, reserved: u64) {
        // Under a budget, what the load reserved: the files read into memory (the index's
        // own byte count includes rescoring vectors left on disk).
        let bytes = self.sizes.get(p).copied().unwrap_or(index.info().bytes);
        if let Some(pool) = &self.pool {
            let mut a = lock(&pool.0.acct);
            a.reserved -= reserved;
            a.resident += bytes;
            a.note_peak();
        }
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
        self.slots[p].used.store(self.tick(), Ordering::Relaxed);
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
            self.load(p, reserved);
            if let Some(pool) = &self.pool {
                pool.0.released.notify_all();
            }
        }
    }

    /// Make room for partition `p` in the pool and reserve its bytes (returned: the load
    /// turns them resident or gives them back). Drops the pool's least recently used
    /// partitions; when loads in flight hold the room, waits for them.
    fn reserve(&self, p: usize) -> u64 {
        let Some(pool) = &self.pool else {
            return 0;
        };
        let need = self.sizes[p];
        // Declared before the accounts' guard, so these drop after it.
        let mut keep: Vec<Arc<dyn Evictable>> = Vec::new();
        let mut a = lock(&pool.0.acct);
        loop {
            if a.used() + need <= pool.budget() {
                break;
            }
            if pool.evict_one(&mut a, &mut keep) {
                continue;
            }
            if a.reserved == 0 {
                // Nothing left to drop and nothing loading (the pool was checked at open
                // to hold the largest partition next to what is pinned): load anyway.
                break;
            }
            a = pool.0.released.wait(a).unwrap_or_else(|e| e.into_inner());
        }
        a.reserved += need;
        a.note_peak();
        need
    }

    fn fail(&self, p: usize, message: String) {
        *lock(&self.slots[p].state) = State::Failed(message);
        self.slots[p].ready.notify_all();
    }

    fn load(&self, p: usize, reserved: u64) {
        let start = Instant::now();
        let verified = self.slots[p].verified.load(Ordering::Relaxed);
        let opts = LoadOptions {
            verify: self.opts.verify && !verified,
            ..self.opts.clone()
        };
        match Index::open(&self.dirs[p], &opts) {
            Ok(index) => {
                self.slots[p].verified.store(true, Ordering::Relaxed);
                self.publish(p, index, Some(start.elapsed()), reserved);
            }
            Err(e) => {
                if let Some(pool) = &self.pool {
                    lock(&pool.0.acct).reserved -= reserved;
                }
                self.fail(p, e.to_string())
            }
        }
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
                    slot.used.store(self.tick(), Ordering::Relaxed);
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

impl Evictable for PartStore {
    fn totals(&self) -> PoolTotals {
        let c = lock(&self.counters);
        PoolTotals {
            partitions_resident: c.resident,
            loads: c.loads,
            evictions: c.evictions,
            load_seconds: c.load_seconds,
            skipped_probes: c.skipped_probes,
        }
    }

    /// This index's eviction candidate: (held by a search, last use, partition) of its
    /// least recently used resident partition, preferring one no search holds.
    fn lru_candidate(&self) -> Option<(bool, u64, usize)> {
        (0..self.slots.len())
            .filter_map(|q| match &*lock(&self.slots[q].state) {
                State::Resident(index, _) => Some((
                    Arc::strong_count(index) > 1,
                    self.slots[q].used.load(Ordering::Relaxed),
                    q,
                )),
                _ => None,
            })
            .min()
    }

    /// Drop partition `q` if it is resident; its bytes when it was (the caller takes them
    /// off the pool's accounts, whose lock it holds).
    fn drop_partition(&self, q: usize) -> Option<u64> {
        let mut st = lock(&self.slots[q].state);
        let State::Resident(_, bytes) = *st else {
            return None;
        };
        *st = State::Cold;
        drop(st);
        let mut c = lock(&self.counters);
        c.resident -= 1;
        c.resident_bytes -= bytes;
        c.evictions += 1;
        Some(bytes)
    }
}

impl Drop for PartStore {
    /// Give the pool back this index's routing and resident partitions.
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            let resident = lock(&self.counters).resident_bytes;
            let mut a = lock(&pool.0.acct);
            a.pinned -= self.pinned;
            a.resident -= resident;
            a.indexes -= 1;
        }
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
