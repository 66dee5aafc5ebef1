//! The one segment writer: every segment's files (`docs.bin`, `ids.bin`, `fields/`,
//! `lexical/`, `index/`; [`crate`] docs) are written by a [`SegmentWriter`], whether
//! `searchd ingest` streams a file into the first segment, or a live collection's refresh
//! (new documents) or optimizer (merged or vacuumed segments) writes one from memory
//! ([`write_segment`]). Documents go in one at a time ([`SegmentWriter::add`]: stored
//! fields and the field indexes); the vectors and texts, which ingest only has after
//! embedding, come with [`SegmentWriter::finish`] (lexical index, vector index, ids).
//! [`write_segment`] writes under a temporary name and renames, so a segment directory is
//! whole or absent. Nothing here syncs: a segment becomes durable when the manifest that
//! lists it is committed ([`crate::files::sync_tree`] first).

use std::path::{Path, PathBuf};

use searchd_docs::{DocId, StoreInfo, StoreWriter};
use searchd_engine::{BuildConfig, IndexKind};

use crate::error::{Error, Result};
use crate::files::{file_meta_of, FileMeta};
use crate::manifest::{FieldsSegment, LexicalSegment, SegmentMeta};

/// A step of [`SegmentWriter::finish`], for progress bars: a phase starts (`total` rows),
/// or `done` rows of it are done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Phase { name: &'static str, total: u64 },
    Done(u64),
}

/// Writes one segment's files into a directory, a document at a time.
pub(crate) struct SegmentWriter {
    dir: PathBuf,
    store: StoreWriter,
    fields: Option<searchd_fields::FieldsWriter>,
    ids: Vec<DocId>,
    /// The store failed after a document's fields were indexed: the segment is unusable.
    broken: bool,
}

/// What the vectors and texts of a finished segment are and how they are indexed.
pub(crate) struct Finish<'a, T: AsRef<str>> {
    /// Row-major, `rows x dim`.
    pub vectors: &'a [f32],
    pub dim: usize,
    pub build: &'a BuildConfig,
    /// The lexical index and each row's text (`""` for none).
    pub lexical: Option<(&'a searchd_lexical::LexicalConfig, &'a [T])>,
    /// Start the HNSW graph from this one instead of from nothing ([`GraphBase`]).
    pub base: Option<GraphBase<'a>>,
}

/// An existing graph a new segment's HNSW index starts from (a merge's largest input):
/// the new segment's first `rows.len()` rows are `index`'s rows `rows` (same vectors),
/// in order. See [`searchd_engine::extend_index`].
#[derive(Clone, Copy)]
pub(crate) struct GraphBase<'a> {
    pub index: &'a searchd_engine::Index,
    pub rows: &'a [u64],
}

/// What [`SegmentWriter::finish`] wrote.
pub(crate) struct Written {
    /// `ids.bin` and `docs.bin`.
    pub files: Vec<FileMeta>,
    pub store: StoreInfo,
    pub lexical: Option<LexicalSegment>,
    pub fields: Option<searchd_fields::FieldsMeta>,
    /// Bytes of the vector index.
    pub index_bytes: u64,
    pub lexical_seconds: f64,
    pub fields_seconds: f64,
    pub build_seconds: f64,
}

impl FieldsSegment {
    /// The manifest's record of a segment's field indexes written in `fields/`.
    pub(crate) fn from_meta(m: &searchd_fields::FieldsMeta) -> FieldsSegment {
        FieldsSegment {
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
        }
    }
}

impl SegmentWriter {
    /// Start a segment in `dir` (which exists); `fields`: the field indexes to build.
    pub fn create(dir: &Path, fields: Option<searchd_fields::FieldsConfig>) -> Result<Self> {
        Ok(SegmentWriter {
            dir: dir.to_path_buf(),
            store: StoreWriter::create(&dir.join("docs.bin"))?,
            fields: fields.map(searchd_fields::FieldsWriter::new),
            ids: Vec::new(),
            broken: false,
        })
    }

    /// Whether [`SegmentWriter::add`] wants each document's fields.
    pub fn indexes_fields(&self) -> bool {
        self.fields.is_some()
    }

    /// Documents added so far.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether a failed [`SegmentWriter::add`] left the segment unusable (its error was not
    /// the document's fault).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Add one document: `source` is what `docs.bin` stores; `fields` the object its field
    /// indexes get (parsed from `source` when `None`). A value that does not fit a declared
    /// type is [`Error::Input`] and leaves the segment as it was.
    pub fn add(
        &mut self,
        id: DocId,
        source: &[u8],
        fields: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<()> {
        if self.broken {
            return Err(Error::Input(
                "the segment writer failed earlier".to_string(),
            ));
        }
        if let Some(w) = self.fields.as_mut() {
            let parsed;
            let map = match fields {
                Some(m) => m,
                None => {
                    parsed = serde_json::from_slice(source).map_err(|e| {
                        Error::Input(format!("the stored fields are not a JSON object: {e}"))
                    })?;
                    &parsed
                }
            };
            w.add(self.ids.len() as u32, map)
                .map_err(|e| Error::Input(e.to_string()))?;
        }
        if let Err(e) = self.store.add(source) {
            self.broken = self.fields.is_some();
            return Err(e.into());
        }
        self.ids.push(id);
        Ok(())
    }

    /// Write the rest: the lexical index, the field indexes, the vector index and the ids.
    pub fn finish<T: AsRef<str>>(
        self,
        f: Finish<'_, T>,
        step: &(dyn Fn(Step) + Sync),
    ) -> Result<Written> {
        use std::time::Instant;
        if self.broken {
            return Err(Error::Input(
                "the segment writer failed earlier".to_string(),
            ));
        }
        let n = self.ids.len();
        if f.vectors.len() != n * f.dim {
            return Err(Error::Input(format!(
                "{} vector values for {n} documents of {} dimensions",
                f.vectors.len(),
                f.dim
            )));
        }
        let sdir = &self.dir;
        let store = self.store.finish()?;

        let t = Instant::now();
        let lexical = match f.lexical {
            None => None,
            Some((lcfg, texts)) => {
                step(Step::Phase {
                    name: "lexical",
                    total: n as u64,
                });
                let mut w = searchd_lexical::LexicalWriter::create(&sdir.join("lexical"), lcfg)?;
                for row in 0..n {
                    w.add(row as u32, texts.get(row).map_or("", |t| t.as_ref()))?;
                    if row % 10_000 == 9_999 {
                        step(Step::Done(row as u64 + 1));
                    }
                }
                let meta = w.finish()?;
                step(Step::Done(n as u64));
                Some(LexicalSegment::written(sdir, "lexical", &meta)?)
            }
        };
        let lexical_seconds = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let fields = match self.fields {
            None => None,
            Some(w) => {
                step(Step::Phase {
                    name: "fields",
                    total: n as u64,
                });
                let meta = w.finish(&sdir.join("fields"), n as u32)?;
                step(Step::Done(n as u64));
                Some(meta)
            }
        };
        let fields_seconds = t.elapsed().as_secs_f64();

        let t = Instant::now();
        step(Step::Phase {
            name: "build",
            total: n as u64,
        });
        let progress = |done: u64, _total: u64| step(Step::Done(done));
        let out = sdir.join("index");
        let fresh = || searchd_engine::build_index(&out, f.vectors, f.dim, f.build, &progress);
        let built = match f.base {
            Some(b) if f.build.kind == IndexKind::Hnsw => {
                match searchd_engine::extend_index(
                    &out, f.vectors, f.dim, f.build, b.index, b.rows, &progress,
                ) {
                    // A base the build cannot start from (another m, a flat index): build.
                    Err(searchd_engine::Error::InvalidParam { message, .. }) => {
                        tracing::debug!(%message, "graph not reused");
                        fresh()
                    }
                    r => r,
                }
            }
            _ => fresh(),
        }
        .map_err(|e| match e {
            searchd_engine::Error::InvalidInput { message } => Error::Input(message),
            other => Error::Engine(other),
        })?;
        let build_seconds = t.elapsed().as_secs_f64();

        let (ids_bytes, ids_crc) = crate::ids::write(&sdir.join("ids.bin"), &self.ids)?;
        let files = vec![
            FileMeta {
                name: "ids.bin".into(),
                bytes: ids_bytes,
                crc32: ids_crc,
            },
            file_meta_of(&sdir.join("docs.bin"))?,
        ];
        Ok(Written {
            files,
            store,
            lexical,
            fields,
            index_bytes: built.bytes,
            lexical_seconds,
            fields_seconds,
            build_seconds,
        })
    }
}

/// One document of a new segment.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDoc {
    /// The document's own id.
    pub id: DocId,
    /// Its vector (of the collection's dimension).
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

/// Write `docs` (in row order) as segment `name` of the collection in `dir`; a graph
/// index starts from `base`'s graph when given (its rows are the first documents).
pub(crate) fn write_segment(
    dir: &Path,
    name: &str,
    docs: &[&NewDoc],
    spec: &SegmentSpec,
    base: Option<GraphBase<'_>>,
) -> Result<SegmentMeta> {
    let final_dir = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let r = write_into(&tmp, docs, spec, base);
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

fn write_into(
    sdir: &Path,
    docs: &[&NewDoc],
    spec: &SegmentSpec,
    base: Option<GraphBase<'_>>,
) -> Result<Parts> {
    let mut w = SegmentWriter::create(sdir, spec.fields.clone())?;
    let mut vectors = Vec::with_capacity(docs.len() * spec.dim);
    for d in docs {
        if d.vector.len() != spec.dim {
            return Err(Error::Input(format!(
                "a vector has {} dimensions, the collection {}",
                d.vector.len(),
                spec.dim
            )));
        }
        if let Some(fc) = &spec.fields {
            // Only the collection's mapped fields are indexed, with their mapped types, so
            // every segment has one schema; other fields are stored, not indexed.
            let mut map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&d.source).map_err(|e| {
                    Error::Input(format!("stored fields are not a JSON object: {e}"))
                })?;
            map.retain(|k, _| fc.declared.iter().any(|(n, _)| n == k));
            w.add(d.id.clone(), &d.source, Some(&map))?;
        } else {
            w.add(d.id.clone(), &d.source, None)?;
        }
        vectors.extend_from_slice(&d.vector);
    }
    let mut build = spec.build.clone();
    if docs.len() < spec.flat_max {
        build.kind = IndexKind::Flat;
        build.quantization = searchd_engine::Quantization::None;
    }
    build.force = true;
    // Every segment of a collection with a lexical index has one (empty texts when no
    // document has text), so lexical search keeps working on the collection.
    let texts: Vec<&str> = docs
        .iter()
        .map(|d| d.text.as_deref().unwrap_or(""))
        .collect();
    let written = w.finish(
        Finish {
            vectors: &vectors,
            dim: spec.dim,
            build: &build,
            lexical: spec.lexical.as_ref().map(|l| (l, texts.as_slice())),
            base,
        },
        &|_| {},
    )?;
    Ok((
        written.files,
        written.lexical,
        written.fields.as_ref().map(FieldsSegment::from_meta),
    ))
}
