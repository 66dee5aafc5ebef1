//! What a reader yields and how it is configured: [`Doc`], [`DocId`], [`ReaderConfig`]
//! ([`Format`], [`FieldSelection`]). The format readers (`jsonl`, `pq`) build these; the
//! [`crate::DocReader`] (`reader`) dispatches to them.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// A user's own document id: an unsigned integer or a non-empty string.
///
/// `Display` prints the bare value (`42`, `doc-7`); serde (de)serializes it untagged, as a JSON
/// number or string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DocId {
    /// A non-negative integer id.
    Int(u64),
    /// A non-empty string id.
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
    /// The document's id, from the id field.
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
