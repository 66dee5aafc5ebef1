//! An empty collection, made to take writes (`POST /collections`): a manifest with no
//! segment and the choices the first segments will be written with (index kind and codes,
//! metric, the text field and its analyzer, the model, the mapping, `dynamic`).
//!
//! The directory is written as ingest writes one: into `DIR.create-tmp`, synced, then
//! renamed to `DIR`, so `DIR` never exists half-made.

use std::path::{Path, PathBuf};

use searchd_engine::BuildConfig;

use crate::error::{Error, Result};
use crate::files::sync_dir;
use crate::manifest::{Dynamic, IdKind, Manifest, ModelRecord, FORMAT_LIVE, MANIFEST, SCHEMA};

/// What an empty collection is made with.
#[derive(Debug, Clone)]
pub struct NewCollection {
    /// Its name (recorded in the manifest).
    pub name: String,
    /// Dimension of its vectors (the model's when `model` is given).
    pub dim: usize,
    /// The vector index of its segments: kind, codes, HNSW parameters and metric.
    pub build: BuildConfig,
    /// Which ids it keeps in canonical form ([`crate::live::canonical_id`]).
    pub id_kind: IdKind,
    /// The field whose text is embedded (with `model`) and indexed for BM25.
    pub text_field: Option<String>,
    /// The analyzer of its BM25 index (with `text_field`).
    pub analyzer: Option<searchd_lexical::Analyzer>,
    /// The model documents' texts are embedded with.
    pub model: Option<ModelRecord>,
    /// Typed field indexes declared up front (more join as upserts bring them, per
    /// `dynamic`).
    pub mapping: searchd_fields::Schema,
    /// What upserts do with fields the mapping does not have; `None`: the server's.
    pub dynamic: Option<Dynamic>,
}

/// The temporary directory [`create`] writes before renaming it to `dir`.
pub fn staging_dir(dir: &Path) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(".create-tmp");
    PathBuf::from(s)
}

/// Make the empty collection `spec` in `dir`, which must not exist.
pub fn create(dir: &Path, spec: &NewCollection) -> Result<()> {
    if dir.exists() {
        return Err(Error::Input(format!("{} exists already", dir.display())));
    }
    if spec.dim == 0 {
        return Err(Error::Input("dim must be at least 1".into()));
    }
    let stage = staging_dir(dir);
    if stage.exists() {
        std::fs::remove_dir_all(&stage).map_err(|e| Error::io(&stage, e))?;
    }
    std::fs::create_dir_all(&stage).map_err(|e| Error::io(&stage, e))?;
    let b = &spec.build;
    let manifest = Manifest {
        schema: SCHEMA.into(),
        format: FORMAT_LIVE,
        name: spec.name.clone(),
        dim: spec.dim,
        metric: b.metric.name().into(),
        docs: 0,
        id_kind: spec.id_kind,
        text_field: spec.text_field.clone(),
        model: spec.model.clone(),
        fields: Vec::new(),
        mapping: Some(spec.mapping.clone()),
        segments: Vec::new(),
        wal_seq: 0,
        next_segment: 0,
        ingest: serde_json::json!({
            "source": "created empty (POST /collections)",
            "embedded_by": spec.model.as_ref().map(|m| m.name.clone()),
            "index": {"kind": b.kind.name(), "quantization": b.quantization.name(),
                      "m": b.hnsw.m, "ef_construction": b.hnsw.ef_construction},
            "lexical": spec.analyzer.filter(|_| spec.text_field.is_some())
                .map(|a| serde_json::json!({"analyzer": a.to_string()})),
        }),
        dynamic: spec.dynamic,
        building: Vec::new(),
        crc32: None,
    };
    let mpath = stage.join(MANIFEST);
    let r = (|| -> Result<()> {
        std::fs::write(&mpath, manifest.to_bytes()).map_err(|e| Error::io(&mpath, e))?;
        std::fs::File::open(&mpath)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io(&mpath, e))?;
        sync_dir(&stage);
        std::fs::rename(&stage, dir).map_err(|e| Error::io(dir, e))?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent);
        }
        Ok(())
    })();
    if r.is_err() {
        let _ = std::fs::remove_dir_all(&stage);
    }
    r
}
