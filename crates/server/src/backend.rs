//! The seam between the HTTP front door and whatever answers searches: the typed requests,
//! replies and [`SearchBackend`] trait of `searchd-backend`, which the local backend
//! ([`crate::local::LocalBackend`]) and the Qdrant backend (`searchd-qdrant`) both take.
//! Each served collection is one backend behind an `ArcSwap`, so `/admin/reload` swaps it
//! whole.

pub use searchd_backend::*;
