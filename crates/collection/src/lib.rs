//! # searchd-collection
//!
//! A **collection** is a directory of documents with the users' own ids, stored fields and
//! vectors, made of one or more immutable **segments**:
//!
//! ```text
//! DIR/collection.json        manifest: schema, format, dim, metric, model, fields, segments (files + CRC32)
//! DIR/seg-000000/index/      the segment's vector index: an index directory as `searchd build` writes it
//! DIR/seg-000000/ids.bin     the users' ids in row order ([`ids`])
//! DIR/seg-000000/docs.bin    stored fields, compressed in blocks, mapped ([`searchd_docs::StoreReader`])
//! DIR/seg-000000/lexical/    optional: BM25 index of the text field ([`searchd_lexical`], tantivy)
//! ```
//!
//! Row `r` of a segment is the same document in all three files: the index returns rows
//! (its "ids"), `ids.bin` turns them into users' ids, `docs.bin` holds their fields. Later
//! parts (payload indexes, a lexical index, tombstones, new appendable segments) are more
//! files in a segment directory and more entries in the manifest's segment list; the
//! manifest's `format` is read as a range so that old collections keep opening.
//!
//! A bare index directory (`searchd build`) opens as a one-segment collection whose ids are
//! its row numbers and which has no stored fields ([`Collection::open_any`]), so the server
//! has one kind of thing to serve.
//!
//! [`ingest`] makes collections from JSONL or Parquet, with checkpoints.
#![warn(missing_docs)]

mod answer;
mod collection;
pub mod create;
pub mod embed;
mod error;
pub mod export;
pub mod failpoint;
mod files;
pub mod fusion;
mod ids;
pub mod ingest;
pub mod live;
mod manifest;
pub mod paths;
pub mod query;
pub mod request;
mod rows;
mod segment;
mod segwrite;
pub mod validate;
pub mod wal;

pub use collection::{
    is_collection, Collection, HybridError, HybridResult, LexicalResult, SegmentRun,
};
pub use error::{Error, Result};
pub use export::{LiveDoc, LiveDocs};
pub use files::FileMeta;
pub use manifest::{
    FieldsSegment, IdKind, LexicalSegment, Manifest, ModelRecord, SegmentMeta, FORMAT, FORMATS,
    FORMAT_LIVE, MANIFEST, SCHEMA,
};
pub use query::{Matches, PageHit};
pub use rows::{DocHit, DocRef};
pub use searchd_docs::DocId;
pub use searchd_fields::{
    Bucket, FieldType, FieldsConfig, Filter, FilterError, Order, Schema, SortBy, SortKey, SortValue,
};
pub use searchd_lexical::{Analyzer, Bm25Stats, LexicalConfig, LexicalQuery};
pub use segment::Segment;
