//! A memory budget shared by several indexes: the pool the graph managers
//! ([`crate::index`]'s partition stores) reserve their loads in. It knows its members only
//! as [`Evictable`], so it sits below the index (the storage options name it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};

use serde::Serialize;

/// What the pool can ask of a member: its eviction candidate and to drop it.
pub(crate) trait Evictable: Send + Sync {
    /// (held by a search, last use, partition) of the member's least recently used
    /// resident partition, preferring one no search holds; `None` when none is resident.
    fn lru_candidate(&self) -> Option<(bool, u64, usize)>;
    /// Drop partition `p` if it is resident; its bytes when it was.
    fn drop_partition(&self, p: usize) -> Option<u64>;
    /// The member's graph manager counters, for the pool's totals.
    fn totals(&self) -> PoolTotals;
}

/// The graph managers' counters summed over a pool's indexes.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct PoolTotals {
    /// Partitions resident now.
    pub partitions_resident: usize,
    /// Partitions loaded after a miss.
    pub loads: u64,
    /// Partitions dropped to keep to the budget.
    pub evictions: u64,
    /// Seconds spent loading, summed.
    pub load_seconds: f64,
    /// Probes skipped because their partition was still loading at the deadline.
    pub skipped_probes: u64,
}

impl std::ops::AddAssign for PoolTotals {
    fn add_assign(&mut self, o: PoolTotals) {
        self.partitions_resident += o.partitions_resident;
        self.loads += o.loads;
        self.evictions += o.evictions;
        self.load_seconds += o.load_seconds;
        self.skipped_probes += o.skipped_probes;
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A memory budget shared by the partitioned indexes opened with it
/// ([`crate::LoadOptions::pool`]): their routing is pinned in it at open, their resident
/// partitions and the loads in flight take the rest, and a load drops the least recently
/// used partition of any index in the pool to make room. Cloning shares the pool.
#[derive(Clone)]
pub struct MemoryPool(pub(crate) Arc<PoolInner>);

pub(crate) struct PoolInner {
    budget: u64,
    pub(crate) acct: Mutex<Acct>,
    /// Signalled when a load ends (its reservation turns resident or is released).
    pub(crate) released: Condvar,
    /// Use order across every index in the pool (least recently used goes first).
    tick: AtomicU64,
    /// The indexes in the pool (dead ones are skipped and pruned).
    stores: Mutex<Vec<Weak<dyn Evictable>>>,
}

/// What a pool's bytes are taken by.
#[derive(Default)]
pub(crate) struct Acct {
    /// What the process holds besides its indexes ([`MemoryPool::set_base`]).
    pub(crate) base: u64,
    /// Routing of the open indexes (resident while they are open).
    pub(crate) pinned: u64,
    /// Resident partitions.
    pub(crate) resident: u64,
    /// Loads in flight.
    pub(crate) reserved: u64,
    /// Most of base + pinned + resident + reserved at once.
    pub(crate) peak: u64,
    pub(crate) indexes: usize,
}

impl Acct {
    pub(crate) fn used(&self) -> u64 {
        self.base + self.pinned + self.resident + self.reserved
    }
    pub(crate) fn note_peak(&mut self) {
        self.peak = self.peak.max(self.used());
    }
}

/// A pool's figures, for `/stats`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct PoolStats {
    /// The budget, bytes.
    pub budget: u64,
    /// Partitioned indexes open in the pool.
    pub indexes: usize,
    /// What the process holds besides its indexes, counted first (the server's resident
    /// set at start).
    pub base: u64,
    /// Routing pinned by the open indexes, bytes.
    pub pinned: u64,
    /// Resident partitions of every index, bytes.
    pub resident: u64,
    /// Bytes reserved by loads in flight.
    pub reserved: u64,
    /// Most bytes taken at once (base + pinned + resident + reserved) since the pool was
    /// made.
    pub peak: u64,
    /// The open indexes' graph manager counters, summed.
    pub totals: PoolTotals,
}

impl std::fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryPool")
            .field("budget", &self.0.budget)
            .finish_non_exhaustive()
    }
}

impl MemoryPool {
    /// A pool of `budget` bytes.
    pub fn new(budget: u64) -> MemoryPool {
        MemoryPool(Arc::new(PoolInner {
            budget,
            acct: Mutex::new(Acct::default()),
            released: Condvar::new(),
            tick: AtomicU64::new(1),
            stores: Mutex::new(Vec::new()),
        }))
    }

    /// The budget, bytes.
    pub fn budget(&self) -> u64 {
        self.0.budget
    }

    /// Count `bytes` the process holds besides its indexes (its code, runtime and buffers)
    /// against the budget, so the budget bounds the whole process. Replaces the previous
    /// base.
    pub fn set_base(&self, bytes: u64) {
        let mut a = lock(&self.0.acct);
        a.base = bytes;
        a.note_peak();
    }

    /// Raise the base to what the process holds besides the pool's indexes, given its
    /// resident set now (`rss`, bytes): called once the indexes opened, when threads,
    /// buffers and open files have taken their share.
    pub fn settle_base(&self, rss: u64) {
        let mut a = lock(&self.0.acct);
        let indexes = a.pinned + a.resident + a.reserved;
        a.base = a.base.max(rss.saturating_sub(indexes));
        a.note_peak();
    }

    /// What the pool holds now.
    pub fn stats(&self) -> PoolStats {
        // The members are read before the accounts are locked, and dropped after (the
        // last reference to an index may be one of these, and dropping it takes the lock).
        let members: Vec<Arc<dyn Evictable>> = lock(&self.0.stores)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut totals = PoolTotals::default();
        for m in &members {
            totals += m.totals();
        }
        let a = lock(&self.0.acct);
        PoolStats {
            totals,
            budget: self.0.budget,
            indexes: a.indexes,
            base: a.base,
            pinned: a.pinned,
            resident: a.resident,
            reserved: a.reserved,
            peak: a.peak,
        }
    }

    /// Add a member (an index's partition store) to the pool's eviction order.
    pub(crate) fn register(&self, member: Weak<dyn Evictable>) {
        lock(&self.0.stores).push(member);
    }

    pub(crate) fn tick(&self) -> u64 {
        self.0.tick.fetch_add(1, Ordering::Relaxed)
    }

    /// Drop the least recently used resident partition of any index in the pool, preferring
    /// one no search holds; false when none is resident. Indexes looked at are pushed to
    /// `keep`, for the caller to drop after it lets go of the accounts (the last reference
    /// to an index may be one of them, and dropping it takes the accounts' lock).
    pub(crate) fn evict_one(&self, acct: &mut Acct, keep: &mut Vec<Arc<dyn Evictable>>) -> bool {
        {
            let mut stores = lock(&self.0.stores);
            stores.retain(|w| w.strong_count() > 0);
            keep.extend(stores.iter().filter_map(Weak::upgrade));
        }
        let victim = keep
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.lru_candidate().map(|(held, used, p)| (held, used, i, p)))
            .min();
        match victim {
            Some((_, _, i, p)) => {
                if let Some(bytes) = keep[i].drop_partition(p) {
                    acct.resident -= bytes;
                }
                true
            }
            None => false,
        }
    }
}
