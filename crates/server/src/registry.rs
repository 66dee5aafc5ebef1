//! The registry of collections made over HTTP: `DATA_DIR/searchd-collections.json`, read at start
//! ([`registered`], by `config.rs`) and written by [`crate::manage`] (to a temporary file,
//! synced, renamed, the directory synced). See `manage.rs` for the crash-safety argument.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::ServerError;

/// The registry file in the data directory.
pub const REGISTRY: &str = "searchd-collections.json";
const REGISTRY_SCHEMA: &str = "searchd.collections.v1";
/// Most collections one server serves (a bound on what creates can add).
pub const MAX_COLLECTIONS: usize = 1024;

#[derive(serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Registry {
    schema: String,
    collections: Vec<Entry>,
}

#[derive(serde::Serialize, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub name: String,
    /// The directory, relative to the data directory.
    pub dir: String,
}

fn registry_path(data_dir: &Path) -> PathBuf {
    data_dir.join(REGISTRY)
}

pub(crate) fn read_entries(data_dir: &Path) -> Result<Vec<Entry>, String> {
    let p = registry_path(data_dir);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", p.display())),
    };
    let r: Registry = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
    if r.schema != REGISTRY_SCHEMA {
        return Err(format!(
            "{}: schema {:?}, expected {REGISTRY_SCHEMA:?}",
            p.display(),
            r.schema
        ));
    }
    Ok(r.collections)
}

pub(crate) fn write_entries(data_dir: &Path, entries: &[Entry]) -> std::io::Result<()> {
    let p = registry_path(data_dir);
    let tmp = data_dir.join(format!("{REGISTRY}.tmp"));
    let body = serde_json::to_vec_pretty(&Registry {
        schema: REGISTRY_SCHEMA.into(),
        collections: entries.to_vec(),
    })
    .map_err(std::io::Error::other)?;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &p)?;
    std::fs::File::open(data_dir)?.sync_all()
}

pub(crate) fn deleted_prefix(name: &str) -> String {
    format!(".deleted-{name}-")
}

/// The collections the registry of `data_dir` lists, as `(name, directory)`, for start-up.
/// Entries whose directory a delete had renamed away are dropped (and the registry
/// rewritten), and what such deletes left is removed.
pub fn registered(data_dir: &Path) -> Result<Vec<(String, PathBuf)>, ServerError> {
    let mut entries = read_entries(data_dir)
        .map_err(|e| ServerError::Config(format!("--data-dir: the collection registry {e}")))?;
    let leftovers: Vec<PathBuf> = std::fs::read_dir(data_dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(".deleted-"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    let before = entries.len();
    entries.retain(|e| {
        let gone = !data_dir.join(&e.dir).exists()
            && leftovers.iter().any(|l| {
                l.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&deleted_prefix(&e.name)))
            });
        !gone
    });
    if entries.len() != before {
        write_entries(data_dir, &entries).map_err(|e| {
            ServerError::Config(format!(
                "--data-dir: cannot rewrite {}: {e}",
                registry_path(data_dir).display()
            ))
        })?;
    }
    for l in leftovers {
        if let Err(e) = std::fs::remove_dir_all(&l) {
            tracing::warn!(path = %l.display(), error = %e, "cannot remove what a collection delete left");
        }
    }
    Ok(entries
        .into_iter()
        .map(|e| {
            let dir = data_dir.join(&e.dir);
            (e.name, dir)
        })
        .collect())
}

/// Names of the server's own top-level routes (`GET /console`, `/stats`, ...): a collection
/// with one of them would be shadowed on Elasticsearch's `GET /{index}` (and
/// `collections` on `/{index}/_search`), so no collection may have them.
pub const RESERVED_NAMES: [&str; 12] = [
    "admin",
    "collections",
    "console",
    "health",
    "healthz",
    "metrics",
    "openapi.json",
    "ready",
    "readyz",
    "search",
    "stats",
    "version",
];

/// `Err` naming the route when `name` is one of [`RESERVED_NAMES`].
pub fn check_not_reserved(name: &str) -> Result<(), String> {
    if RESERVED_NAMES.contains(&name) {
        return Err(format!(
            "the collection name {name:?} is taken by the server's route /{name}; choose another (reserved: {})",
            RESERVED_NAMES.join(", ")
        ));
    }
    Ok(())
}

/// A name a collection may have: letters, digits, `-`, `_`, `.`, not starting with `_`,
/// `-` or `.` (Elasticsearch-shaped routes `/{name}/_search` and `/_cat` stay apart), and
/// not one of [`RESERVED_NAMES`].
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with(['_', '-', '.']);
    if ok {
        check_not_reserved(name)
    } else {
        Err(format!(
            "invalid collection name {name:?}: 1 to 128 letters, digits, '-', '_' or '.', not starting with '_', '-' or '.'"
        ))
    }
}
