//! A collection's manifest, `collection.json`: its schema and format, the model, the
//! mapping, the segments with their files and checksums, the log position of the last
//! commit, and the dynamic-mapping setting.

use std::path::Path;

use searchd_fields::Schema;
use searchd_lexical::Analyzer;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::files::{file_meta_of, FileMeta};

/// File name of a collection's manifest.
pub const MANIFEST: &str = "collection.json";
/// `schema` of the manifest.
pub const SCHEMA: &str = "searchd.collection.v1";
/// Manifest format versions this build reads.
pub const FORMATS: std::ops::RangeInclusive<u32> = 1..=2;
/// Manifest format version `ingest` writes (a collection as it was made).
pub const FORMAT: u32 = 1;
/// Manifest format version of a collection that took writes (deleted sets, `wal_seq`):
/// older searchd builds refuse it rather than resurrect deleted documents.
pub const FORMAT_LIVE: u32 = 2;

/// The model that made a collection's vectors (text queries must use the same one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRecord {
    /// The model's name.
    pub name: String,
    /// Checksum of the model's weights file: the identity that is compared.
    pub checksum: String,
    /// Dimension of the vectors it makes.
    pub dim: usize,
    /// Longest input, in tokens; longer texts are truncated.
    pub max_length: usize,
    /// How token embeddings are pooled into one vector (e.g. `mean`).
    pub pooling: String,
    /// Whether the vectors are L2-normalized.
    pub normalize: bool,
    /// Text put before a query before it is embedded, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_prefix: Option<String>,
    /// Text put before a document's text before it is embedded, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passage_prefix: Option<String>,
}

/// Which kinds of ids a collection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdKind {
    /// Unsigned integer ids only.
    Int,
    /// String ids only.
    Str,
    /// Both integer and string ids.
    Mixed,
}

/// One segment in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentMeta {
    /// Directory name under the collection (`seg-000000`).
    pub name: String,
    /// Documents (rows) in the segment, deleted ones included.
    pub docs: u64,
    /// `ids.bin` and `docs.bin` (the index directory has its own manifest and checksums).
    pub files: Vec<FileMeta>,
    /// The segment's BM25 index of the text field, if it has one. Absent in collections
    /// made without one (or before lexical indexes existed): they open, and lexical and
    /// hybrid searches on them are refused with a clear message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lexical: Option<LexicalSegment>,
    /// The segment's field indexes (typed columns and posting sets), if it has them.
    /// Absent in collections made before field indexes existed: they open, and filters on
    /// fields are refused with a clear message (`ids` filters still work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<FieldsSegment>,
    /// The segment's deleted rows (`deleted-GEN.bin`, a checksummed roaring set), when
    /// documents of it were deleted or replaced since it was written (format 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<FileMeta>,
}

/// A segment's field indexes, as the manifest records them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldsSegment {
    /// Directory under the segment (`fields`).
    pub dir: String,
    /// Total size of the field index files, in bytes.
    pub bytes: u64,
    /// Size and CRC32 of each field index file.
    pub files: Vec<FileMeta>,
}

/// A segment's lexical index, as the manifest records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LexicalSegment {
    /// Directory under the segment (`lexical`).
    pub dir: String,
    /// The analyzer the text was indexed with.
    pub analyzer: Analyzer,
    /// Documents indexed.
    pub docs: u64,
    /// Total size of the lexical index, in bytes.
    pub bytes: u64,
    /// Size and CRC32 of the index's `searchd-lexical.json`, which lists the size and CRC32
    /// of each of its other files: together every lexical file is checked at open. Absent
    /// in collections made before; they open (the lexical index then checks what it can).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<FileMeta>,
}

impl LexicalSegment {
    /// The manifest entry of the lexical index just written in `sdir/dir`.
    pub(crate) fn written(
        sdir: &Path,
        dir: &str,
        meta: &searchd_lexical::LexicalMeta,
    ) -> Result<LexicalSegment> {
        Ok(LexicalSegment {
            dir: dir.to_string(),
            analyzer: meta.analyzer,
            docs: meta.docs,
            bytes: meta.bytes,
            meta: Some(file_meta_of(
                &sdir.join(dir).join(searchd_lexical::META_FILE),
            )?),
        })
    }
}

/// `collection.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The manifest format version (one of [`FORMATS`]).
    pub format: u32,
    /// The collection's name.
    pub name: String,
    /// Dimension of the vectors.
    pub dim: usize,
    /// The distance metric of the vectors (as the index names it).
    pub metric: String,
    /// Documents in the collection.
    pub docs: u64,
    /// Which kinds of ids the collection holds.
    pub id_kind: IdKind,
    /// The field whose text was embedded (and will be indexed lexically).
    pub text_field: Option<String>,
    /// The model that embedded `text_field`; `None` when vectors were given.
    pub model: Option<ModelRecord>,
    /// Names of the stored fields seen in the documents, sorted.
    pub fields: Vec<String>,
    /// The typed, indexed fields (declared or inferred at ingest) and the fields left
    /// unindexed with the reason: the collection's mapping, in Elasticsearch's word.
    /// Absent in collections made before field indexes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<Schema>,
    /// The segments, in order.
    pub segments: Vec<SegmentMeta>,
    /// Every write-ahead-log operation up to this sequence number is in the segments (and
    /// their deleted sets); start-up replays the log after it (format 2; 0 before).
    #[serde(default)]
    pub wal_seq: u64,
    /// Number of the next segment directory a live collection creates (format 2).
    #[serde(default)]
    pub next_segment: u64,
    /// How the collection was made (source, counts, timings); informational.
    #[serde(default)]
    pub ingest: serde_json::Value,
    /// What upserts do with fields the mapping does not have (`ingest --dynamic-mapping`);
    /// absent: the server's `--dynamic-mapping` (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<Dynamic>,
    /// Fields added to the mapping (`PUT /collections/{name}/mapping`) whose indexes are
    /// still being built over the segments written before: new segments index them, filters
    /// and facets do not see them until every segment has them (then they move to
    /// `mapping`). Absent when none is being built.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub building: Vec<searchd_fields::FieldSpec>,
    /// CRC32 of the manifest's compact JSON without this field ([`Manifest::to_bytes`]):
    /// an edited or damaged `collection.json` (a changed `wal_seq` would skip log records)
    /// is refused by name. Absent in manifests written before it; those still open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc32: Option<u32>,
}

impl Manifest {
    /// CRC32 of the compact JSON of this manifest without its `crc32` field.
    fn checksum(&self) -> u32 {
        let mut m = self.clone();
        m.crc32 = None;
        crc32fast::hash(&serde_json::to_vec(&m).unwrap_or_default())
    }

    /// The bytes of `collection.json` for this manifest, its checksum included.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut m = self.clone();
        m.crc32 = Some(self.checksum());
        serde_json::to_vec_pretty(&m).unwrap_or_default()
    }

    /// Reads and checks `DIR/collection.json`: its checksum (when recorded), schema and format.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let m: Manifest = serde_json::from_str(&text)
            .map_err(|e| Error::format(&path, format!("invalid manifest: {e}")))?;
        if let Some(want) = m.crc32 {
            let have = m.checksum();
            if have != want {
                return Err(Error::format(
                    &path,
                    format!(
                        "the manifest does not match its checksum (crc32 {have:08x}, recorded {want:08x}): \
                         it was edited or damaged; restore the collection from a snapshot"
                    ),
                ));
            }
        }
        if m.schema != SCHEMA {
            return Err(Error::format(
                &path,
                format!("schema is {:?}, expected {SCHEMA:?}", m.schema),
            ));
        }
        if !FORMATS.contains(&m.format) {
            return Err(Error::format(
                &path,
                format!(
                    "collection format {} is not supported (this searchd reads {}..={})",
                    m.format,
                    FORMATS.start(),
                    FORMATS.end()
                ),
            ));
        }
        Ok(m)
    }
}

/// Elasticsearch's `dynamic` mapping setting for fields that upserts bring. A collection
/// made with one (`ingest --dynamic-mapping`, kept in its manifest) keeps it; for the others
/// [`crate::live::LiveConfig::dynamic`] (`serve --dynamic-mapping`) applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dynamic {
    /// A new field gets the type inferred from the first upsert that has it (as ingest
    /// infers: keyword, integer, float, bool, datetime) and is indexed from then on (filters,
    /// facets, sorting); later values that do not convert are refused (400).
    #[default]
    True,
    /// New fields are stored (in `_source`), not indexed.
    False,
    /// A document with a field the mapping does not have is refused (400).
    Strict,
}

impl Dynamic {
    /// Parses a setting (`true`, `false` or `strict`); `None` for anything else.
    pub fn parse(s: &str) -> Option<Dynamic> {
        match s {
            "true" => Some(Dynamic::True),
            "false" => Some(Dynamic::False),
            "strict" => Some(Dynamic::Strict),
            _ => None,
        }
    }
    /// The setting's name, as [`Dynamic::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Dynamic::True => "true",
            Dynamic::False => "false",
            Dynamic::Strict => "strict",
        }
    }
}
