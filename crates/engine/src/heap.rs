//! Ordered (distance, id) pairs for the search heaps. Distances are "lower is better"
//! inside the engine (negated similarity for cosine and inner product, squared L2
//! otherwise); they are turned back into higher-is-better scores at the API boundary.

use std::cmp::Ordering;

/// A node and its lower-is-better distance; ordered by distance, then by id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbor {
    /// Lower-is-better distance to the query (see the module docs).
    pub dist: f32,
    /// Row of the vectors searched (inside an index: the internal id, a stored row).
    pub id: u32,
}

impl Eq for Neighbor {}

impl Ord for Neighbor {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        self.dist
            .total_cmp(&other.dist)
            .then_with(|| self.id.cmp(&other.id))
    }
}

impl PartialOrd for Neighbor {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Max-heap by distance: `peek` is the worst kept neighbour.
pub type ResultHeap = std::collections::BinaryHeap<Neighbor>;
/// Min-heap by distance: `pop` is the closest unexpanded candidate.
pub type CandidateHeap = std::collections::BinaryHeap<std::cmp::Reverse<Neighbor>>;

/// Keeps the best `k` neighbours seen, in a max-heap.
pub struct TopK {
    k: usize,
    heap: ResultHeap,
}

impl TopK {
    pub fn new(k: usize) -> TopK {
        TopK {
            k,
            heap: ResultHeap::with_capacity(k + 1),
        }
    }

    /// Worst distance kept, or +inf while fewer than k are held.
    #[inline]
    pub fn bound(&self) -> f32 {
        if self.heap.len() < self.k {
            f32::INFINITY
        } else {
            self.heap.peek().map_or(f32::INFINITY, |n| n.dist)
        }
    }

    #[inline]
    pub fn push(&mut self, n: Neighbor) {
        if self.heap.len() < self.k {
            self.heap.push(n);
        } else if let Some(mut top) = self.heap.peek_mut() {
            if n < *top {
                *top = n;
            }
        }
    }

    /// Best first.
    pub fn into_sorted(self) -> Vec<Neighbor> {
        self.heap.into_sorted_vec()
    }
}
