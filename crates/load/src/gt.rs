//! Ground truth for the load lab: exact-neighbour id files are read by `searchd-vecio`
//! (the one reader of `.npy` int32/int64 and `.ivecs` id matrices), and `searchd gt`'s
//! `FILE.meta.json` sidecar says which metric they were computed under.

use std::path::Path;

use crate::error::LoadError;

/// Row-major matrix of neighbour ids; row = query index (`n` rows of `k`).
pub use searchd_vecio::IdMatrix;

/// Read a ground-truth id file (`.npy` int32/int64 2-D, or `.ivecs`).
pub fn read_ids(path: &Path) -> Result<IdMatrix, LoadError> {
    searchd_vecio::read_ids(path).map_err(|e| LoadError::GroundTruth {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Schema of the ground-truth sidecar `FILE.meta.json` written by `searchd gt`.
pub const GT_META_SCHEMA: &str = "searchd.gt.v1";

/// What `searchd gt` records beside a ground-truth file (`FILE.meta.json`): the metric
/// it was computed under, so recall is never checked against another metric's
/// neighbours. Older files have no sidecar and are read as before.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GtMeta {
    /// Always [`GT_META_SCHEMA`].
    pub schema: String,
    /// "cosine", "ip" or "l2".
    pub metric: String,
    /// Neighbours per query.
    pub k: usize,
    /// Query rows.
    pub queries: usize,
    /// Base vectors searched (the index's n).
    pub base_n: usize,
    /// Vector dimension.
    pub dim: usize,
}

/// The sidecar path of a ground-truth file: `gt.npy` -> `gt.npy.meta.json`.
pub fn meta_path(gt: &Path) -> std::path::PathBuf {
    let mut s = gt.as_os_str().to_owned();
    s.push(".meta.json");
    std::path::PathBuf::from(s)
}

/// Read the sidecar of `gt`: Ok(None) when there is none (an older file).
pub fn read_meta(gt: &Path) -> Result<Option<GtMeta>, String> {
    let p = meta_path(gt);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", p.display())),
    };
    let m: GtMeta = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a ground-truth record: {e}", p.display()))?;
    if m.schema != GT_META_SCHEMA {
        return Err(format!(
            "{}: schema {:?}, expected {GT_META_SCHEMA}",
            p.display(),
            m.schema
        ));
    }
    Ok(Some(m))
}

/// Write the sidecar of `gt` (temporary file, then rename).
pub fn write_meta(gt: &Path, m: &GtMeta) -> std::io::Result<()> {
    let p = meta_path(gt);
    let mut tmp = p.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(m).expect("serialises") + "\n",
    )?;
    std::fs::rename(&tmp, &p)
}

/// Refuse a ground truth computed under another metric than the index's.
pub fn check_metric(gt: &Path, meta: &GtMeta, index_metric: &str) -> Result<(), String> {
    if meta.metric.eq_ignore_ascii_case(index_metric) {
        return Ok(());
    }
    Err(format!(
        "{} was computed under metric {} ({}), but the index uses {index_metric}: recall against it would be wrong; recompute it with searchd gt --metric {index_metric}",
        gt.display(),
        meta.metric,
        meta_path(gt).display()
    ))
}
