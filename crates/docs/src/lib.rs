//! `searchd-docs`: documents in, stored documents out.
//!
//! * [`DocReader`] reads documents from JSONL or Parquet files: a user id ([`DocId`]), an
//!   optional text, an optional vector, and the stored fields as one JSON object
//!   ([`Doc::source`]). Every bad input is an [`Error`] that names the file, the line (JSONL,
//!   1-based) or row (Parquet, 0-based) and the field; no input makes it panic.
//! * [`StoreWriter`] / [`StoreReader`] keep the stored fields in a write-once, lz4-compressed,
//!   memory-mapped file, addressed by row (see [`store`] for the layout).
//!
//! The reader does not check for duplicate ids: ids repeat across the files of a collection, so
//! the caller checks them where it sees them all, with [`IdSet`] or its own map.
#![warn(missing_docs)]

mod doc;
mod error;
mod jsonl;
mod pq;
mod reader;
pub mod store;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use doc::{Doc, DocId, FieldSelection, Format, ReaderConfig};
pub use error::{Error, Pos};
pub use reader::DocReader;
pub use store::{StoreInfo, StoreReader, StoreWriter};

/// Remembers the ids seen so far and where, to refuse duplicates with a message naming both
/// places. (A helper: [`DocReader`] does not check duplicates itself.)
#[derive(Debug, Default)]
pub struct IdSet {
    seen: HashMap<DocId, (u32, Pos)>,
    files: Vec<PathBuf>,
}

impl IdSet {
    /// An empty set.
    pub fn new() -> IdSet {
        IdSet::default()
    }

    /// Records `id`, read from `path` at `pos` (its field `field`); a duplicate is
    /// [`Error::DuplicateId`].
    pub fn insert(&mut self, id: &DocId, path: &Path, pos: Pos, field: &str) -> Result<(), Error> {
        if let Some(&(file, first)) = self.seen.get(id) {
            let first_path = &self.files[file as usize];
            let first = if first_path == path {
                first.to_string()
            } else {
                format!("{}: {first}", first_path.display())
            };
            return Err(Error::DuplicateId {
                path: path.to_path_buf(),
                pos,
                field: field.to_string(),
                id: id.to_string(),
                first,
            });
        }
        let file = match self.files.iter().position(|p| p == path) {
            Some(i) => i,
            None => {
                self.files.push(path.to_path_buf());
                self.files.len() - 1
            }
        };
        self.seen.insert(id.clone(), (file as u32, pos));
        Ok(())
    }

    /// Number of distinct ids recorded.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no id was recorded.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}
