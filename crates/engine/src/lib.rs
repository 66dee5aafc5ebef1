//! The searchd engine: index files, exact search, HNSW, and recall evaluation.
//!
//! No async runtime, no network, no terminal: callers (CLI, server) own those. Everything
//! here works on `&[f32]` rows and index directories.
//!
//! - [`build::build_index`] writes an index directory atomically ([`format`]): each file by
//!   its own module's writer (`files/`: vectors, graph, ids, codes, lists).
//! - [`Index::open`] reads the typed manifest ([`format::Manifest`]), opens each file with
//!   the same module's reader ([`storage`] places it) and picks the structure a search
//!   walks by index kind; [`Index::search`] answers queries. Distances live in [`distance`].
//! - [`exact::knn`] is the exact ground truth; [`eval`] measures recall and speed.
#![warn(missing_docs)]

pub mod binary;
mod budget;
pub mod build;
pub mod distance;
pub mod error;
pub mod eval;
pub mod exact;
mod files;
pub mod format;
mod heap;
pub mod hnsw;
mod hugepage;
mod index;
pub mod ivf;
pub mod partition;
pub mod pq;
mod prefetch;
pub mod rabitq;
pub mod sq8;
pub mod storage;
mod visited;

pub use budget::{MemoryPool, PoolStats, PoolTotals};
pub use build::{build_index, extend_index, quantize_index, BuildConfig, BuildReport};
pub use error::{Error, Result, SearchError};
pub use files::codes::Quantization;
pub use format::{IndexKind, DEFAULT_OVERSAMPLE};
pub use heap::Neighbor;
pub use hnsw::{take_work, BuildOn, HnswParams, SearchWork};
pub use index::part_store::PartitionStats;
pub use index::{
    FilterPlan, Hit, Index, IndexInfo, SearchParams, Searched, MAX_K, MAX_OVERSAMPLE,
    NEAR_UNFILTERED,
};
/// The bitmap type of [`SearchParams::allow`], re-exported so every crate uses one version.
pub use roaring;
pub use searchd_kernels::Metric;
pub use storage::{LoadOptions, PartPlacement, Placement, VectorPlacement};
