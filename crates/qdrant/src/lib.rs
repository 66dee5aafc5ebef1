//! Qdrant as the engine behind searchd's API (`serve --backend qdrant`), for users who
//! outgrow one machine.
//!
//! The routes, admission control, deadlines, text embedding and JSON stay in searchd's
//! server, which hands this crate the same typed requests (`searchd-backend`) as its local
//! backend; a [`QdrantBackend`] (feature `grpc`, on by default) answers each
//! [`searchd_backend::SearchBackend`] call with one or a few gRPC calls
//! to a Qdrant collection over a small pool of HTTP/2 channels (`--qdrant-channels`).
//!
//! - **Layout of a collection written by `searchd ingest --to qdrant://...`** ([`admin`]):
//!   one unnamed dense vector per point; integer document ids are the point ids, string ids
//!   map to a UUID made from the string ([`point_id`]) and are kept in the payload key
//!   `_id`; the stored document is kept byte for byte as the string payload `_src` (what
//!   `fields` and `/docs/{id}` return); each field of the mapping is a top-level payload key
//!   holding its values converted to the field's type exactly as searchd's field index does
//!   (datetimes as epoch milliseconds, keywords over 256 bytes left out), with a payload index
//!   of the matching kind created before the upload. The collection's metadata key `searchd`
//!   holds the mapping, the model record, the metric and the text field as JSON.
//! - **Filters** are parsed against that mapping with searchd's own parser (same 400s, same
//!   paths) and translated clause by clause ([`filter`]).
//! - **Writes** (the write routes, [`searchd_backend::SearchBackend::write`]): documents are checked as a
//!   local live collection checks them (vector length, finite, not all zero under cosine,
//!   each mapped field's values convertible to its type; 400s naming document and field),
//!   then written as one upsert in the layout above ([`admin::point_of`]); fields not in the
//!   mapping stay in `_src` only (filters on them: 400 unknown field). Deletes by id retrieve
//!   the ids first to report `not_found`; deletes by filter count the matches, then delete by
//!   the translated filter. `wait` is Qdrant's `wait`; `seq` its operation id. The backend's
//!   version changes with every write and again once a write not known to be visible is (a
//!   `wait=true` no-op delete queued behind it), so the response cache never serves a reply
//!   older than a write.
//! - **Errors**: gRPC `InvalidArgument`/`FailedPrecondition` -> 400, `NotFound` -> 404,
//!   `DeadlineExceeded` or the deadline passing on our side -> 504, `ResourceExhausted` ->
//!   503 `overloaded`, `Unavailable` and any other failure -> 503 `not_ready`. While Qdrant
//!   is unreachable `/ready` answers 503; a background probe every second flips it back.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::time::Duration;

/// Why the Qdrant backend could not start: a start-up message (the CLI exits 2).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Qdrant cannot be reached, or its collection does not fit the server's model.
    #[error("{0}")]
    Config(String),
}

#[cfg(feature = "grpc")]
pub mod admin;
#[cfg(feature = "grpc")]
mod backend;
#[cfg(feature = "grpc")]
mod conn;
#[cfg(feature = "grpc")]
pub mod filter;
#[cfg(feature = "grpc")]
mod layout;
pub mod local;
#[cfg(feature = "grpc")]
mod read;
#[cfg(feature = "grpc")]
mod search;
#[cfg(feature = "grpc")]
mod write;

#[cfg(feature = "grpc")]
pub use backend::{open, QdrantBackend};
#[cfg(feature = "grpc")]
pub use layout::point_id;

/// Default `--qdrant-channels`: HTTP/2 connections to Qdrant, requests spread round-robin.
pub const DEFAULT_CHANNELS: usize = 2;

/// Where a Qdrant collection served by searchd lives, and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdrantTarget {
    /// Qdrant's gRPC address (port 6334 by default), e.g. `http://127.0.0.1:6334`.
    pub url: String,
    /// Name of the Qdrant collection.
    pub collection: String,
    /// HTTP/2 connections to open (requests spread round-robin; 0 counts as 1).
    pub channels: usize,
    /// Sent as the `api-key` header of every request (`None`: no key).
    pub api_key: Option<String>,
    /// How long the start-up checks wait for Qdrant before giving up.
    pub connect_timeout: Duration,
}

impl QdrantTarget {
    /// A target with the defaults: [`DEFAULT_CHANNELS`] channels, no API key, a 3 s connect timeout.
    pub fn new(url: &str, collection: &str) -> QdrantTarget {
        QdrantTarget {
            url: url.to_string(),
            collection: collection.to_string(),
            channels: DEFAULT_CHANNELS,
            api_key: None,
            connect_timeout: Duration::from_secs(3),
        }
    }
}
