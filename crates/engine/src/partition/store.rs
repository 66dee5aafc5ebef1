//! The graph manager: a partitioned index's partitions, resident or not, under a memory
//! budget ([`crate::LoadOptions::memory_budget`]).
//!
//! Without a budget every partition is opened with the index and stays. With one, none is
//! resident at open; a search asks for its probes ([`PartStore::request`]: each cold one
//! is loaded by a loader thread, once however many searches ask) and then waits for each
//! ([`PartStore::wait`]) no longer than its deadline: a probe still loading then is
//! skipped and the answer says so. Search threads never read partition files themselves.
//! After each load the least recently used partitions are dropped until the resident
//! bytes fit the budget again (a partition a search still holds is freed when it ends).
//! Partitions under a budget are read into private memory (`ram`), so what is resident
//! is exactly what the budget counts.

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
    /// Probes skipped because their partition was still loading at the deadline.
    pub skipped_probes: u64,
}

enum State {
    Cold,
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
    slots: Vec<Slot>,
    tick: AtomicU64,
    counters: Mutex<PartitionStats>,
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
        let store = PartStore {
            budget: opts.memory_budget,
            opts: part_opts,
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
                    store.publish(p, index);
                }
            }
            Some(budget) => {
                let largest = (0..store.dirs.len())
                    .map(|p| store.estimate(p))
                    .collect::<Result<Vec<u64>>>()?
                    .into_iter()
                    .max()
                    .unwrap_or(0);
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

    fn publish(&self, p: usize, index: Index) {
        let bytes = index.info().bytes;
        let tick = self.tick.fetch_add(1, Ordering::Relaxed);
        self.slots[p].used.store(tick, Ordering::Relaxed);
        *lock(&self.slots[p].state) = State::Resident(Arc::new(index), bytes);
        self.slots[p].ready.notify_all();
        let mut c = lock(&self.counters);
        c.resident += 1;
        c.resident_bytes += bytes;
    }

    /// Start loading partition `p` if it is cold (a loader thread; one per partition
    /// however many searches ask).
    pub fn request(self: &Arc<Self>, p: usize) {
        let mut st = lock(&self.slots[p].state);
        if !matches!(*st, State::Cold) {
            return;
        }
        *st = State::Loading;
        drop(st);
        let store = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("searchd-part-{p}"))
            .spawn(move || store.load(p));
        if let Err(e) = spawned {
            self.fail(p, format!("cannot start a loader thread: {e}"));
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
                self.publish(p, index);
                let s = start.elapsed().as_secs_f64();
                {
                    let mut c = lock(&self.counters);
                    c.loads += 1;
                    c.load_seconds += s;
                    c.max_load_seconds = c.max_load_seconds.max(s);
                }
                self.evict_to_budget(p);
            }
            Err(e) => self.fail(p, e.to_string()),
        }
    }

    /// Drop the least recently used resident partitions (never `keep`) until the resident
    /// bytes fit the budget.
    fn evict_to_budget(&self, keep: usize) {
        let Some(budget) = self.budget else { return };
        loop {
            if lock(&self.counters).resident_bytes <= budget {
                return;
            }
            let victim = (0..self.slots.len())
                .filter(|&q| q != keep)
                .filter(|&q| matches!(*lock(&self.slots[q].state), State::Resident(..)))
                .min_by_key(|&q| (self.slots[q].used.load(Ordering::Relaxed), q));
            let Some(q) = victim else { return };
            let mut st = lock(&self.slots[q].state);
            if let State::Resident(_, bytes) = *st {
                *st = State::Cold;
                drop(st);
                let mut c = lock(&self.counters);
                c.resident -= 1;
                c.resident_bytes -= bytes;
                c.evictions += 1;
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
