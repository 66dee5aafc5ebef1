//! Reading documents from JSONL and Parquet files.

use std::path::Path;

use crate::doc::{Doc, Format, ReaderConfig};
use crate::error::Error;
use crate::{jsonl, pq};

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
