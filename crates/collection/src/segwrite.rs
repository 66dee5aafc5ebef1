//! Writing one segment from documents held in memory: what a live collection's refresh
//! (new documents) and its optimizer (merged or vacuumed segments) both do. The files are
//! those `ingest` writes ([`crate`] docs); the directory is written under a temporary name
//! and renamed, so a segment directory is whole or absent. Nothing here syncs: a segment
//! becomes durable when the manifest that lists it is committed
//! ([`crate::files::sync_tree`] first).

use std::path::Path;

use searchd_docs::{DocId, StoreWriter};
use searchd_engine::{BuildConfig, IndexKind};

use crate::error::{Error, Result};
use crate::files::{file_meta_of, FileMeta};
use crate::manifest::{FieldsSegment, LexicalSegment, SegmentMeta};

/// One document of a new segment.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDoc {
    pub id: DocId,
    pub vector: Vec<f32>,
    /// The text field's value (what the lexical index gets).
    pub text: Option<String>,
    /// The stored fields: the JSON object bytes, as `docs.bin` keeps them.
    pub source: Vec<u8>,
}

/// How a collection's segments are made.
#[derive(Debug, Clone)]
pub(crate) struct SegmentSpec {
    pub dim: usize,
    pub build: BuildConfig,
    /// Segments with fewer documents get a flat (exact-scan) index: a graph only pays once
    /// a segment is large ([`crate::live::LiveConfig::flat_max`]).
    pub flat_max: usize,
    pub lexical: Option<searchd_lexical::LexicalConfig>,
    pub fields: Option<searchd_fields::FieldsConfig>,
}

/// Write `docs` (in row order) as segment `name` of the collection in `dir`.
pub(crate) fn write_segment(
    dir: &Path,
    name: &str,
    docs: &[&NewDoc],
    spec: &SegmentSpec,
) -> Result<SegmentMeta> {
    let final_dir = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let r = write_into(&tmp, docs, spec);
    if r.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    let (files, lexical, fields) = r?;
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(|e| Error::io(&final_dir, e))?;
    }
    std::fs::rename(&tmp, &final_dir).map_err(|e| Error::io(&final_dir, e))?;
    Ok(SegmentMeta {
        name: name.to_string(),
        docs: docs.len() as u64,
        files,
        lexical,
        fields,
        deleted: None,
    })
}

type Parts = (Vec<FileMeta>, Option<LexicalSegment>, Option<FieldsSegment>);

fn write_into(sdir: &Path, docs: &[&NewDoc], spec: &SegmentSpec) -> Result<Parts> {
    let n = docs.len();
    let mut store = StoreWriter::create(&sdir.join("docs.bin"))?;
    let mut fw = spec.fields.clone().map(searchd_fields::FieldsWriter::new);
    let mut vectors = Vec::with_capacity(n * spec.dim);
    let mut ids = Vec::with_capacity(n);
    for (row, d) in docs.iter().enumerate() {
        store.add(&d.source)?;
        if let Some(w) = fw.as_mut() {
            let mut map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&d.source).map_err(|e| {
                    Error::Input(format!("stored fields are not a JSON object: {e}"))
                })?;
            // Only the collection's mapped fields are indexed, with their mapped types, so
            // every segment has one schema; other fields are stored, not indexed.
            if let Some(fc) = &spec.fields {
                map.retain(|k, _| fc.declared.iter().any(|(n, _)| n == k));
            }
            w.add(row as u32, &map)
                .map_err(|e| Error::Input(e.to_string()))?;
        }
        if d.vector.len() != spec.dim {
            return Err(Error::Input(format!(
                "a vector has {} dimensions, the collection {}",
                d.vector.len(),
                spec.dim
            )));
        }
        vectors.extend_from_slice(&d.vector);
        ids.push(d.id.clone());
    }
    store.finish()?;
    let lexical = match &spec.lexical {
        Some(lcfg) if docs.iter().any(|d| d.text.is_some()) => {
            let ldir = sdir.join("lexical");
            let mut w = searchd_lexical::LexicalWriter::create(&ldir, lcfg)?;
            for (row, d) in docs.iter().enumerate() {
                w.add(row as u32, d.text.as_deref().unwrap_or(""))?;
            }
            let meta = w.finish()?;
            Some(LexicalSegment::written(sdir, "lexical", &meta)?)
        }
        Some(lcfg) => {
            // No document has text: an empty-text index keeps "every segment has a
            // lexical index" true, so lexical search keeps working on the collection.
            let ldir = sdir.join("lexical");
            let mut w = searchd_lexical::LexicalWriter::create(&ldir, lcfg)?;
            for row in 0..n {
                w.add(row as u32, "")?;
            }
            let meta = w.finish()?;
            Some(LexicalSegment::written(sdir, "lexical", &meta)?)
        }
        None => None,
    };
    let fields = match fw {
        None => None,
        Some(w) => {
            let m = w.finish(&sdir.join("fields"), n as u32)?;
            Some(FieldsSegment {
                dir: "fields".into(),
                bytes: m.bytes,
                files: m
                    .files
                    .iter()
                    .map(|(name, bytes, crc32)| FileMeta {
                        name: name.clone(),
                        bytes: *bytes,
                        crc32: *crc32,
                    })
                    .collect(),
            })
        }
    };
    let mut build = spec.build.clone();
    if n < spec.flat_max {
        build.kind = IndexKind::Flat;
        build.quantization = searchd_engine::Quantization::None;
    }
    build.force = true;
    searchd_engine::build_index(&sdir.join("index"), &vectors, spec.dim, &build, &|_, _| {})
        .map_err(|e| match e {
            searchd_engine::Error::InvalidInput { message } => Error::Input(message),
            other => Error::Engine(other),
        })?;
    let (ids_bytes, ids_crc) = crate::ids::write(&sdir.join("ids.bin"), &ids)?;
    let store_meta = file_meta_of(&sdir.join("docs.bin"))?;
    Ok((
        vec![
            FileMeta {
                name: "ids.bin".into(),
                bytes: ids_bytes,
                crc32: ids_crc,
            },
            store_meta,
        ],
        lexical,
        fields,
    ))
}
