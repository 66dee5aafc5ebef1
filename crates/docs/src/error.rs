//! The crate's one error type.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in an input file a problem is: a 1-based JSONL line or a 0-based Parquet row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pos {
    /// 1-based line of a JSONL file.
    Line(u64),
    /// 0-based row of a Parquet file.
    Row(u64),
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pos::Line(n) => write!(f, "line {n}"),
            Pos::Row(n) => write!(f, "row {n}"),
        }
    }
}

/// Every error of this crate. Each names the file; input errors also name the line (JSONL,
/// 1-based) or row (Parquet, 0-based) and, where one is involved, the field.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error on `path`.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The input format cannot be told from the file name.
    #[error("{}: cannot tell the input format from the extension (expected .jsonl, .ndjson, .json or .parquet)", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// A JSONL line that is not valid UTF-8.
    #[error("{}: {pos}: invalid UTF-8 at byte {offset} of the line", path.display())]
    InvalidUtf8 {
        /// The file.
        path: PathBuf,
        /// The line.
        pos: Pos,
        /// 0-based byte offset of the first invalid byte within the line.
        offset: usize,
    },
    /// A JSONL line that is not a JSON object (the message is serde's, column is 1-based).
    #[error("{}: {pos}, column {column}: not a JSON object: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The line.
        pos: Pos,
        /// 1-based column of the error within the line.
        column: usize,
        /// serde_json's message, without its trailing position.
        message: String,
    },
    /// A document's field is missing or has a bad value.
    #[error("{}: {pos}: field {field:?} {problem}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The document's line (JSONL) or row (Parquet).
        pos: Pos,
        /// The field's name.
        field: String,
        /// What is wrong with it, e.g. `is missing`.
        problem: String,
    },
    /// A Parquet file whose schema does not fit the configuration.
    #[error("{}: field {field:?}: {problem}", path.display())]
    Schema {
        /// The file.
        path: PathBuf,
        /// The configured field's name.
        field: String,
        /// What is wrong with its column.
        problem: String,
    },
    /// The `parquet` crate failed to read the file (at `pos` when known).
    #[error("{}: {}parquet: {message}", path.display(), pos.map(|p| format!("{p}: ")).unwrap_or_default())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The row, when known; `None` for file-level errors.
        pos: Option<Pos>,
        /// The `parquet` crate's message.
        message: String,
    },
    /// The same id twice in one file (see [`crate::IdSet`]).
    #[error("{}: {pos}: field {field:?}: duplicate id {id} (first seen at {first})", path.display())]
    DuplicateId {
        /// The file.
        path: PathBuf,
        /// The duplicate's line (JSONL) or row (Parquet).
        pos: Pos,
        /// The id field's name.
        field: String,
        /// The duplicate id, as displayed.
        id: String,
        /// Where it was first seen: `line 3`, or `other.jsonl: line 3` in another file.
        first: String,
    },
    /// A document store that is truncated, corrupt or of an unknown version.
    #[error("{}: corrupt document store: {problem}", path.display())]
    StoreCorrupt {
        /// The store file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// A document store of a format version this build cannot read.
    #[error("{}: document store format version {found} is not supported (this build reads {min}..={max})", path.display())]
    StoreVersion {
        /// The store file.
        path: PathBuf,
        /// The version found in the file.
        found: u32,
        /// The oldest version this build reads.
        min: u32,
        /// The newest version this build reads.
        max: u32,
    },
    /// A bad `get`/`add` on a document store: row out of range, corrupt block, too large a doc.
    #[error("{}: row {row}: {problem}", path.display())]
    StoreRow {
        /// The store file.
        path: PathBuf,
        /// The row asked for or being added.
        row: u64,
        /// What went wrong.
        problem: String,
    },
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn field(path: &Path, pos: Pos, field: &str, problem: impl Into<String>) -> Error {
        Error::Field {
            path: path.to_path_buf(),
            pos,
            field: field.to_string(),
            problem: problem.into(),
        }
    }

    pub(crate) fn corrupt(path: &Path, problem: impl Into<String>) -> Error {
        Error::StoreCorrupt {
            path: path.to_path_buf(),
            problem: problem.into(),
        }
    }
}

/// Shortens a value's text for an error message.
pub(crate) fn excerpt(s: &str) -> String {
    const MAX: usize = 60;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}
