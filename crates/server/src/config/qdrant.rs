//! The Qdrant backend's settings (`serve --backend qdrant`) resolved into a [`ServerConfig`].

use super::{IndexSource, ServeSettings, ServerConfig};
use crate::error::ServerError;
use std::time::Duration;

/// Which engine answers searches (`serve --backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// searchd's own engine over index and collection directories.
    #[default]
    Local,
    /// A Qdrant collection over gRPC (`--qdrant-url`, `--qdrant-collection`).
    Qdrant,
}

/// The Qdrant backend's part of [`ServeSettings`].
#[derive(Debug, Clone, PartialEq)]
pub struct QdrantSettings {
    /// The engine: `local` (index and collection directories) or `qdrant` (a Qdrant
    /// collection, with --qdrant-url and --qdrant-collection).
    pub backend: BackendKind,
    /// Qdrant's gRPC address (port 6334 by default in Qdrant), e.g. http://127.0.0.1:6334.
    pub qdrant_url: String,
    /// The Qdrant collection to serve (also its name in searchd's routes).
    pub qdrant_collection: Option<String>,
    /// gRPC channels (HTTP/2 connections) to Qdrant.
    pub qdrant_channels: usize,
    /// Qdrant API key (sent as the `api-key` header), if the cluster has one.
    pub qdrant_api_key: Option<String>,
}

impl Default for QdrantSettings {
    /// The local backend; Qdrant's default gRPC address, [`searchd_qdrant::DEFAULT_CHANNELS`].
    fn default() -> QdrantSettings {
        QdrantSettings {
            backend: BackendKind::Local,
            qdrant_url: "http://127.0.0.1:6334".to_string(),
            qdrant_collection: None,
            qdrant_channels: searchd_qdrant::DEFAULT_CHANNELS,
            qdrant_api_key: None,
        }
    }
}

/// The server configuration for `serve --backend qdrant` (`None` for the local backend):
/// every general flag as for the local backend, the one collection from Qdrant.
pub(crate) fn qdrant_config_from_settings(
    args: &ServeSettings,
) -> Result<Option<ServerConfig>, ServerError> {
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
    let mut cfg = ServerConfig::from_settings(&local)?;
    cfg.index = IndexSource::Qdrant(searchd_qdrant::QdrantTarget {
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
