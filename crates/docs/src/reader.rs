//! Reading documents from JSONL and Parquet files.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::{jsonl, pq};

/// A user's own document id: an unsigned integer or a non-empty string.
///
/// `Display` prints the bare value (`42`, `doc-7`); serde (de)serializes it untagged, as a JSON
/// number or string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DocId {
    Int(u64),
    Str(String),
}

impl fmt::Display for DocId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocId::Int(n) => write!(f, "{n}"),
            DocId::Str(s) => f.write_str(s),
        }
    }
}

impl From<u64> for DocId {
    fn from(n: u64) -> DocId {
        DocId::Int(n)
    }
}

impl From<&str> for DocId {
    fn from(s: &str) -> DocId {
        DocId::Str(s.to_string())
    }
}

impl From<String> for DocId {
    fn from(s: String) -> DocId {
        DocId::Str(s)
    }
}

/// Input file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line (`.jsonl`, `.ndjson`, `.json`).
    Jsonl,
    /// Apache Parquet (`.parquet`).
    Parquet,
}

impl Format {
    /// The format by the file's extension (case-insensitive): `.jsonl`/`.ndjson`/`.json` are
    /// JSONL, `.parquet` is Parquet; anything else is [`Error::UnknownFormat`].
    pub fn from_path(path: &Path) -> Result<Format, Error> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("jsonl" | "ndjson" | "json") => Ok(Format::Jsonl),
            Some("parquet") => Ok(Format::Parquet),
            _ => Err(Error::UnknownFormat {
                path: path.to_path_buf(),
            }),
        }
    }
}

/// Which fields other than the id, text and vector fields to keep in [`Doc::source`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FieldSelection {
    /// Every field (the default).
    #[default]
    All,
    /// No other field (the text field is still kept).
    None,
    /// Only these fields (top-level names), in document order (the text field is still kept).
    List(Vec<String>),
}

impl FieldSelection {
    pub(crate) fn keeps(&self, name: &str) -> bool {
        match self {
            FieldSelection::All => true,
            FieldSelection::None => false,
            FieldSelection::List(l) => l.iter().any(|f| f == name),
        }
    }
}

/// How to read an input file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReaderConfig {
    /// `None`: from the extension ([`Format::from_path`]).
    pub format: Option<Format>,
    /// The id field (required in every document). Default `"id"`.
    pub id_field: String,
    /// The text field (optional in each document). Default `Some("text")`.
    pub text_field: Option<String>,
    /// The vector field (required in every document when set). Default `None`.
    pub vector_field: Option<String>,
    /// The other fields kept in [`Doc::source`]. Default [`FieldSelection::All`].
    pub fields: FieldSelection,
}

impl Default for ReaderConfig {
    fn default() -> ReaderConfig {
        ReaderConfig {
            format: None,
            id_field: "id".to_string(),
            text_field: Some("text".to_string()),
            vector_field: None,
            fields: FieldSelection::All,
        }
    }
}

impl ReaderConfig {
    /// Whether a field (other than the id and vector fields) goes into the source.
    pub(crate) fn in_source(&self, name: &str) -> bool {
        if name == self.id_field || self.vector_field.as_deref() == Some(name) {
            return false;
        }
        self.text_field.as_deref() == Some(name) || self.fields.keeps(name)
    }
}

/// One document as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Doc {
    /// 1-based line (JSONL) or 0-based row (Parquet), for messages.
    pub pos: u64,
    pub id: DocId,
    /// The text field, when configured and present (a JSON `null` counts as absent).
    pub text: Option<String>,
    /// The vector field, when configured (then always `Some`).
    pub vector: Option<Vec<f32>>,
    /// The stored fields as one JSON object: the kept fields ([`FieldSelection`]) and the text
    /// field, without the id and vector fields. JSONL: each value's JSON text byte for byte, in
    /// document order. Parquet: each column value converted to JSON, in schema order.
    pub source: Vec<u8>,
}

/// Reads [`Doc`]s from a JSONL or Parquet file; an `Iterator<Item = Result<Doc, Error>>`.
///
/// A bad document yields an `Err` and reading can go on with the next one (JSONL and Parquet
/// alike); an I/O or Parquet decoding error is final (the iterator ends after it).
pub struct DocReader {
    inner: Inner,
}

enum Inner {
    Jsonl(jsonl::JsonlReader),
    Parquet(pq::ParquetReader),
}

impl DocReader {
    /// Opens `path` for reading with `cfg`.
    pub fn open(path: &Path, cfg: &ReaderConfig) -> Result<DocReader, Error> {
        let format = match cfg.format {
            Some(f) => f,
            None => Format::from_path(path)?,
        };
        let inner = match format {
            Format::Jsonl => Inner::Jsonl(jsonl::JsonlReader::open(path, cfg)?),
            Format::Parquet => Inner::Parquet(pq::ParquetReader::open(path, cfg)?),
        };
        Ok(DocReader { inner })
    }

    /// The file's size in bytes, for progress and ETA.
    pub fn total_bytes(&self) -> u64 {
        match &self.inner {
            Inner::Jsonl(r) => r.total_bytes(),
            Inner::Parquet(r) => r.total_bytes(),
        }
    }

    /// Approximate progress through the file, in bytes (JSONL: exact bytes consumed; Parquet:
    /// the file size times the fraction of rows read).
    pub fn bytes_read(&self) -> u64 {
        match &self.inner {
            Inner::Jsonl(r) => r.bytes_read(),
            Inner::Parquet(r) => r.bytes_read(),
        }
    }

    /// Parquet: the row count from the file's metadata. JSONL: `None`.
    pub fn total_docs_hint(&self) -> Option<u64> {
        match &self.inner {
            Inner::Jsonl(_) => None,
            Inner::Parquet(r) => Some(r.total_rows()),
        }
    }

    /// Skips the next `n` documents without validating them, to resume a load. JSONL: skips `n`
    /// non-blank lines without parsing them; Parquet: skips whole row groups from the metadata,
    /// then rows. Skipping past the end is not an error (the iterator is then exhausted).
    pub fn skip_docs(&mut self, n: u64) -> Result<(), Error> {
        match &mut self.inner {
            Inner::Jsonl(r) => r.skip_docs(n),
            Inner::Parquet(r) => r.skip_docs(n),
        }
    }
}

impl Iterator for DocReader {
    type Item = Result<Doc, Error>;

    fn next(&mut self) -> Option<Result<Doc, Error>> {
        match &mut self.inner {
            Inner::Jsonl(r) => r.next_doc(),
            Inner::Parquet(r) => r.next_doc(),
        }
    }
}
