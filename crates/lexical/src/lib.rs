//! BM25 lexical index of one collection segment, over tantivy.
//!
//! A segment has rows `0..n` (row `r` = document `r`). Its lexical index lives in a directory
//! of its own (e.g. `seg-000000/lexical/`) and maps hits back to those rows:
//!
//! ```text
//! DIR/searchd-lexical.json   {"schema": "searchd.lexical.v1", "format": 1, "analyzer", "docs", "bytes", "k1", "b",
//!                             "files": [{"name", "bytes", "crc32"}, ...]}
//! DIR/meta.json, DIR/*.idx … one tantivy index, merged into ONE segment
//! ```
//!
//! The tantivy schema has a `text` field (indexed with term frequencies, no positions, not
//! stored) analyzed by the crate's own [`Analyzer`], a `row` u64 fast field and a `len` u64
//! fast field (the row's exact number of tokens). The index is sorted by `row` and rows are
//! added densely in order, so tantivy's doc id *is* the row; [`LexicalIndex::open`] checks
//! that against the `row` column once, and the search hot path never reads the column.
//!
//! # Files checked at open
//! `files` lists every file of the tantivy index (lock files aside) with its size and CRC32,
//! taken when the writer finished. [`LexicalIndex::open_with`] refuses a missing file or one
//! of another size, and with `verify` one whose CRC32 differs, naming the file, before
//! tantivy reads anything: a flipped byte in the fieldnorms or postings is an error at open,
//! never different rankings or a panic mid-search. Indexes written before the list existed
//! (no `files`) are checked with tantivy's own per-file footer checksums instead (which do not
//! cover tantivy's `meta.json` and `.managed.json`). [`META_FILE`] itself is checksummed by
//! whoever records the index (a collection's manifest).
//!
//! # Scoring
//! tantivy's BM25 with `k1 = 1.2`, `b = 0.75` (constants in tantivy 0.27, recorded in the meta):
//! `score(d, q) = sum over query terms t of idf(t) * (k1 + 1) * tf / (tf + k1 * (1 - b + b * dl / avgdl))`
//! with `idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))` (Lucene's IDF), `avgdl` = total tokens
//! / documents (exact) and `dl` = the document's token count as a one-byte *fieldnorm*. The
//! fieldnorm is exact below 40 tokens and quantized (roughly 1/8 relative steps) above, so
//! scores of long documents differ slightly from exact BM25. The `(k1 + 1)` factor (which
//! Lucene >= 8 drops) does not change rankings.
//!
//! `N`, `n_t` and `avgdl` are this index's own ([`LexicalIndex::search`]) or given by the
//! caller ([`LexicalIndex::search_query`] with [`Bm25Stats`]): a collection of several
//! segments sums them over its segments, counting only rows not deleted
//! ([`LexicalIndex::doc_freq_among`], [`LexicalIndex::tokens_of`]), so a document scores the
//! same whichever segment holds it. The `len` column makes the deleted rows' token counts
//! exact; indexes written before it fall back to the fieldnorms (exact below 40 tokens).
//!
//! # Queries
//! Query text is never parsed as a query language: it is cut to [`MAX_QUERY_CHARS`]
//! characters, analyzed with the index's analyzer, and the first [`MAX_QUERY_TERMS`] distinct
//! terms are kept (occurrences of other terms are dropped). A term that occurs `m` times in
//! the query counts `m` times (its clause is boosted by `m`): the sum over query tokens, as a
//! Lucene `BooleanQuery` of repeated clauses and `bm25s`' `get_scores` both compute. The
//! query is a disjunction (OR) of the terms. Ties are broken by the lower row.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod analyzer;
mod index;
mod writer;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use analyzer::{tokenize, Analyzer, ENGLISH_STOP_WORDS, MAX_TOKEN_CHARS};
pub use index::{Bm25Stats, LexicalHits, LexicalIndex, LexicalQuery};
pub use writer::LexicalWriter;

/// Query text longer than this many characters is cut (on a character boundary) before it is
/// analyzed; [`LexicalHits::truncated`] says so.
pub const MAX_QUERY_CHARS: usize = 4096;

/// At most this many distinct query terms are used: the first ones in query order; the rest
/// are dropped and [`LexicalHits::truncated`] says so.
pub const MAX_QUERY_TERMS: usize = 256;

/// The file beside the tantivy files that says what the directory holds.
pub const META_FILE: &str = "searchd-lexical.json";
/// `schema` of [`META_FILE`].
pub const META_SCHEMA: &str = "searchd.lexical.v1";
/// The on-disk format this crate writes and reads.
pub const FORMAT: u32 = 1;

/// tantivy's smallest indexing memory budget per thread (15 MB).
pub const MIN_HEAP_BYTES_PER_THREAD: usize = 15_000_000;

/// How a lexical index is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexicalConfig {
    /// Analyzer of the documents (and so of the queries). Default [`Analyzer::Standard`].
    pub analyzer: Analyzer,
    /// tantivy's indexing memory budget over all threads. Default 64 MiB; at least
    /// [`MIN_HEAP_BYTES_PER_THREAD`] per thread. A full budget flushes a tantivy segment;
    /// [`LexicalWriter::finish`] merges them into one.
    pub writer_heap_bytes: usize,
    /// Indexing threads (1..=8). Default 1.
    pub threads: usize,
}

impl Default for LexicalConfig {
    fn default() -> Self {
        LexicalConfig {
            analyzer: Analyzer::Standard,
            writer_heap_bytes: 64 << 20,
            threads: 1,
        }
    }
}

/// What [`LexicalWriter::finish`] wrote; also the content of [`META_FILE`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LexicalMeta {
    /// The analyzer of the documents; queries use the same.
    pub analyzer: Analyzer,
    /// Number of documents (rows `0..docs`).
    pub docs: u64,
    /// Bytes of the tantivy files (the directory without [`META_FILE`]).
    pub bytes: u64,
    /// BM25 `k1` (tantivy's constant).
    pub k1: f32,
    /// BM25 `b` (tantivy's constant).
    pub b: f32,
    /// [`FORMAT`].
    pub format: u32,
    /// Every file of the tantivy index (lock files aside) with its size and CRC32; empty in
    /// indexes written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<LexicalFile>,
}

/// One file of a lexical index, as [`META_FILE`] records it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct LexicalFile {
    /// File name, relative to the index directory.
    pub name: String,
    /// Size in bytes when the writer finished.
    pub bytes: u64,
    /// CRC32 of the file's bytes when the writer finished.
    pub crc32: u32,
}

/// tantivy 0.27's BM25 constants (`tantivy::query::bm25`, not public).
pub(crate) const BM25_K1: f32 = 1.2;
pub(crate) const BM25_B: f32 = 0.75;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file system operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The directory is not a (readable) lexical index of this format.
    #[error("{}: {msg}", path.display())]
    Format {
        /// The index directory, or the file at fault.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// `create` was given a directory that already holds files.
    #[error("{}: directory exists and is not empty", path.display())]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// tantivy failed.
    #[error("{}: tantivy: {source}", path.display())]
    Tantivy {
        /// The index directory.
        path: PathBuf,
        /// tantivy's error.
        #[source]
        source: tantivy::TantivyError,
    },
    /// A configuration value is out of range.
    #[error("invalid lexical config: {0}")]
    InvalidConfig(String),
    /// Rows must be added as 0, 1, 2, ...
    #[error("rows must be added in order 0, 1, 2, ...: expected row {expected}, got {got}")]
    OutOfOrder {
        /// The row that was due next.
        expected: u64,
        /// The row given.
        got: u32,
    },
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn format(path: &Path, msg: impl Into<String>) -> Error {
        Error::Format {
            path: path.to_path_buf(),
            msg: msg.into(),
        }
    }

    pub(crate) fn tantivy(path: &Path, source: tantivy::TantivyError) -> Error {
        Error::Tantivy {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// [`META_FILE`] as written: the meta plus its schema name.
#[derive(Serialize, Deserialize)]
struct MetaFile {
    schema: String,
    #[serde(flatten)]
    meta: LexicalMeta,
}

pub(crate) fn write_meta(dir: &Path, meta: &LexicalMeta) -> Result<()> {
    let file = MetaFile {
        schema: META_SCHEMA.to_string(),
        meta: meta.clone(),
    };
    let path = dir.join(META_FILE);
    let tmp = dir.join(format!("{META_FILE}.tmp"));
    let mut json =
        serde_json::to_vec_pretty(&file).map_err(|e| Error::format(&path, e.to_string()))?;
    json.push(b'\n');
    std::fs::write(&tmp, &json).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
}

pub(crate) fn read_meta(dir: &Path) -> Result<LexicalMeta> {
    let path = dir.join(META_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !dir.is_dir() {
                return Err(Error::io(dir, e));
            }
            return Err(Error::format(
                dir,
                format!("not a searchd lexical index (no {META_FILE})"),
            ));
        }
        Err(e) => return Err(Error::io(&path, e)),
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::format(&path, format!("not JSON: {e}")))?;
    let schema = value.get("schema").and_then(|s| s.as_str());
    if schema != Some(META_SCHEMA) {
        return Err(Error::format(
            &path,
            format!("schema is {schema:?}, expected {META_SCHEMA:?}"),
        ));
    }
    match value.get("format").and_then(|f| f.as_u64()) {
        Some(f) if f == u64::from(FORMAT) => {}
        Some(f) => {
            return Err(Error::format(
                &path,
                format!("format {f} is not supported (this build reads format {FORMAT})"),
            ))
        }
        None => return Err(Error::format(&path, "no numeric \"format\"")),
    }
    let file: MetaFile =
        serde_json::from_value(value).map_err(|e| Error::format(&path, e.to_string()))?;
    Ok(file.meta)
}

/// The files directly in `dir` that make the tantivy index: [`META_FILE`] (and its temp
/// name) and tantivy's lock files (empty, left behind by the writer) excluded; sorted by name.
pub(crate) fn index_files(dir: &Path) -> Result<Vec<LexicalFile>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(META_FILE) || name.ends_with(".lock") {
            continue;
        }
        let path = entry.path();
        let md = entry.metadata().map_err(|e| Error::io(&path, e))?;
        if !md.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        out.push(LexicalFile {
            name,
            bytes: bytes.len() as u64,
            crc32: crc32fast::hash(&bytes),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Checks the files `meta` lists: present, of the recorded size, and (with `verify`) of the
/// recorded CRC32. The error names the file.
pub(crate) fn check_files(dir: &Path, files: &[LexicalFile], verify: bool) -> Result<()> {
    for f in files {
        let path = dir.join(&f.name);
        let md = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        if md.len() != f.bytes {
            return Err(Error::format(
                &path,
                format!(
                    "size is {} bytes, {META_FILE} says {}; the lexical index is truncated or corrupt",
                    md.len(),
                    f.bytes
                ),
            ));
        }
        if verify {
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let crc = crc32fast::hash(&bytes);
            if crc != f.crc32 {
                return Err(Error::format(
                    &path,
                    format!(
                        "CRC32 is {crc:08x}, {META_FILE} says {:08x}; the lexical index is corrupt",
                        f.crc32
                    ),
                ));
            }
        }
    }
    Ok(())
}
