//! Qdrant as the engine behind searchd's API (`serve --backend qdrant`).
//!
//! The routes, admission control, deadlines, text embedding and JSON stay in searchd; a
//! [`QdrantBackend`] answers each [`crate::SearchBackend`] call with one or a few gRPC calls
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
//! - **Writes** (the write routes, [`crate::SearchBackend::write`]): documents are checked as a
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

use std::time::Duration;

#[cfg(feature = "qdrant")]
pub mod admin;
#[cfg(feature = "qdrant")]
mod backend;
#[cfg(feature = "qdrant")]
pub mod filter;
pub mod local;

#[cfg(feature = "qdrant")]
pub use backend::{open, point_id, QdrantBackend};

/// Default `--qdrant-channels`: HTTP/2 connections to Qdrant, requests spread round-robin.
pub const DEFAULT_CHANNELS: usize = 2;

/// Which engine answers searches (`serve --backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BackendKind {
    /// searchd's own engine over index and collection directories.
    #[default]
    Local,
    /// A Qdrant collection over gRPC (`--qdrant-url`, `--qdrant-collection`).
    Qdrant,
}

/// `searchd serve` flags of the Qdrant backend.
#[derive(Debug, Clone, clap::Args)]
pub struct QdrantServeArgs {
    /// The engine: `local` (index and collection directories) or `qdrant` (a Qdrant
    /// collection, with --qdrant-url and --qdrant-collection).
    #[arg(long, value_enum, default_value_t = BackendKind::Local)]
    pub backend: BackendKind,
    /// Qdrant's gRPC address (port 6334 by default in Qdrant), e.g. http://127.0.0.1:6334.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:6334")]
    pub qdrant_url: String,
    /// The Qdrant collection to serve (also its name in searchd's routes).
    #[arg(long, value_name = "NAME")]
    pub qdrant_collection: Option<String>,
    /// gRPC channels (HTTP/2 connections) to Qdrant.
    #[arg(long, default_value_t = DEFAULT_CHANNELS, value_name = "N")]
    pub qdrant_channels: usize,
    /// Qdrant API key (sent as the `api-key` header), if the cluster has one.
    #[arg(
        long,
        env = "QDRANT_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub qdrant_api_key: Option<String>,
}

/// Where the Qdrant collection is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdrantTarget {
    pub url: String,
    pub collection: String,
    pub channels: usize,
    pub api_key: Option<String>,
    /// How long the start-up checks wait for Qdrant before giving up.
    pub connect_timeout: Duration,
}

impl QdrantTarget {
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

/// The server configuration for `serve --backend qdrant` (`None` for the local backend):
/// every general flag as for the local backend, the one collection from Qdrant.
pub(crate) fn config_from_args(
    args: &crate::ServeArgs,
) -> Result<Option<crate::ServerConfig>, crate::ServerError> {
    use crate::ServerError;
    let q = &args.qdrant;
    if q.backend == BackendKind::Local {
        if q.qdrant_collection.is_some() {
            return Err(ServerError::Config(
                "--qdrant-collection needs --backend qdrant".into(),
            ));
        }
        return Ok(None);
    }
    if cfg!(not(feature = "qdrant")) {
        return Err(ServerError::Config(
            "this searchd was built without the `qdrant` feature".into(),
        ));
    }
    if args.index.is_some() || !args.collection.is_empty() {
        return Err(ServerError::Config(
            "--backend qdrant serves one Qdrant collection (--qdrant-collection); --index and --collection are for the local backend".into(),
        ));
    }
    let Some(name) = q.qdrant_collection.clone() else {
        return Err(ServerError::Config(
            "--backend qdrant needs --qdrant-collection NAME".into(),
        ));
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
    {
        return Err(ServerError::Config(format!(
            "--qdrant-collection {name:?}: use letters, digits, '-', '_' or '.'"
        )));
    }
    if !(q.qdrant_url.starts_with("http://") || q.qdrant_url.starts_with("https://")) {
        return Err(ServerError::Config(format!(
            "--qdrant-url {:?} must start with http:// or https:// (Qdrant's gRPC port, 6334 by default)",
            q.qdrant_url
        )));
    }
    if q.qdrant_channels == 0 || q.qdrant_channels > 64 {
        return Err(ServerError::Config(format!(
            "--qdrant-channels must be between 1 and 64, got {}",
            q.qdrant_channels
        )));
    }
    // Every other flag as for a local directory; the placeholder is never opened.
    let mut local = args.clone();
    local.qdrant.backend = BackendKind::Local;
    local.qdrant.qdrant_collection = None;
    local.index = Some(std::path::PathBuf::from("."));
    let mut cfg = crate::ServerConfig::from_args(&local)?;
    cfg.index = crate::IndexSource::Qdrant(QdrantTarget {
        url: q.qdrant_url.clone(),
        collection: name.clone(),
        channels: q.qdrant_channels,
        api_key: q.qdrant_api_key.clone(),
        connect_timeout: Duration::from_secs(3),
    });
    cfg.name = Some(name);
    cfg.more.clear();
    Ok(Some(cfg))
}
