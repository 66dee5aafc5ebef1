//! Per-thread "visited" sets for graph search, reused across queries.
//!
//! A set is an array of u16 epochs: clearing it is one increment, and only every 65,535th
//! query pays for a real clear. Sets live in a thread-local pool so server threads and
//! rayon workers never allocate per query.

use std::cell::RefCell;

pub struct VisitedSet {
    marks: Vec<u16>,
    epoch: u16,
}

impl VisitedSet {
    fn new(n: usize) -> VisitedSet {
        VisitedSet {
            marks: vec![0; n],
            epoch: 0,
        }
    }

    fn reset(&mut self, n: usize) {
        if self.marks.len() < n {
            self.marks = vec![0; n];
            self.epoch = 0;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
    }

    /// Whether `id` is marked.
    #[inline(always)]
    pub fn contains(&self, id: u32) -> bool {
        self.marks[id as usize] == self.epoch
    }

    /// Marks `id`; returns true if it was not marked before.
    #[inline(always)]
    pub fn insert(&mut self, id: u32) -> bool {
        let slot = &mut self.marks[id as usize];
        if *slot == self.epoch {
            false
        } else {
            *slot = self.epoch;
            true
        }
    }
}

thread_local! {
    static POOL: RefCell<Vec<VisitedSet>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` with a cleared visited set able to hold ids `0..n`.
pub fn with_visited<R>(n: usize, f: impl FnOnce(&mut VisitedSet) -> R) -> R {
    let mut set = POOL
        .with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| VisitedSet::new(n));
    set.reset(n);
    let r = f(&mut set);
    POOL.with(|p| p.borrow_mut().push(set));
    r
}
