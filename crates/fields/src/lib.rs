//! Elasticsearch-style typed fields of one immutable segment.
//!
//! * [`FieldsWriter`] takes the documents' fields (row 0, 1, 2, ...), infers or applies the
//!   declared types, and writes the segment's field file ([`FieldsMeta`] says what was written).
//! * [`FieldIndex`] opens it: posting bitmaps per keyword value, value-sorted numeric columns
//!   for ranges, per-row columns for facets and sorting.
//! * [`Filter`] is the filter language of `docs/CONTRACTS.md` (Version 2), parsed against a
//!   [`Schema`]; [`FieldIndex::estimate`] and [`FieldIndex::eval`] turn it into a cardinality
//!   estimate and an exact row bitmap.
//! * [`FieldIndex::facet`] + [`top_buckets`] give terms facets; [`parse_sort`],
//!   [`FieldIndex::page`] and [`compare`] give exact sorted pages with `search_after` cursors.
//!
//! # Semantics (Elasticsearch's, with the choices made where it leaves room)
//!
//! **Values.** A field's value is a string, number, bool, RFC 3339 datetime string, or an
//! array of those (nested arrays are flattened). `null`, an empty array, or an array of only
//! nulls means the document does not have the field. Only top-level keys are fields: an object
//! value makes the whole field skipped (no dotted sub-fields, unlike Elasticsearch's object
//! mapping).
//!
//! **Inference** (fields not declared), over all documents of the segment:
//! all strings and every one a datetime ([`parse_datetime`]: RFC 3339, or a bare `YYYY-MM-DD`
//! as Elasticsearch's date detection accepts) → `datetime`; other strings → `keyword`; all
//! numbers written as JSON integers that fit `i64` → `integer`; any other number (`5.0`, `0.5`,
//! integers beyond `i64`) → `float`; bools → `bool`. Mixed kinds (number and string, ...) →
//! [`Skipped`] with a reason naming the kinds. A field with no values at all is skipped with
//! the reason "no values". Fields in [`FieldsConfig::skip`] are always reported skipped.
//!
//! **Declared types** win over inference and coerce as Elasticsearch does (`coerce: true`):
//! keyword takes strings, numbers (their JSON text) and bools (`"true"`/`"false"`); integer
//! takes integers, floats (truncated toward zero) and numeric strings; float takes numbers and
//! numeric strings; bool takes `true`/`false`/`"true"`/`"false"`; datetime takes RFC 3339
//! strings and epoch-millisecond numbers. Anything else (including an object) is an
//! [`Error::Field`] naming field, row and value: Elasticsearch rejects the document.
//!
//! **Keywords** longer than 256 bytes are not indexed (`ignore_above: 256`); they are counted
//! in [`FieldIndex::stats`] as `ignored_above` and not in [`FieldSpec::values`].
//! Keywords compare bytewise (Lucene's order). Floats store `-0.0` as `0.0`.
//! Datetimes are stored and shown as epoch milliseconds.
//!
//! **Filters** — see [`Filter`] for the language and its paths. Choices: unknown fields are
//! errors (the contract), not Elasticsearch's silent no-match; `range` on keyword or bool is an
//! error; `term` with a decimal on an integer field, or an integer beyond `i64`, matches
//! nothing (as Elasticsearch's `long` does); `ids` values are matched as given (a string
//! `"17"` is not the integer id `17`); `minimum_should_match` follows Lucene's
//! `calculateMinShouldMatch` (integer, negative integer, `"N%"`, `"-N%"`, rounding toward zero),
//! and a value above the number of `should` clauses matches nothing.
//!
//! **Sorting** — see [`parse_sort`] and [`compare`]: fields ascend by default and `_score`
//! descends; a multi-valued field sorts by its minimum ascending and its maximum descending
//! (Elasticsearch's default `mode`); missing values sort last in both directions (only
//! `"missing": "_last"` is accepted); the document id is the implicit final tiebreaker.
//! `_score` keys are ignored by [`FieldIndex::page`] (all rows tie on them and their sort value
//! is [`SortValue::Missing`]); the integrator's search path orders by score itself.
//! A page either scans every row's keys or, when the first key is a keyword, integer, float or
//! datetime field and that looks cheaper, walks that field's value-sorted index from the
//! cursor and stops once the page is full ([`PagePlan`]); both give the same page.
//!
//! # Files
//!
//! One file per segment, `fields.bin` ([`FIELDS_FILE`]), written to `fields.bin.tmp`, fsync'd,
//! renamed and the directory fsync'd. Layout (little-endian): an 8-byte magic `SDFIELDS`, a
//! `u32` format version and a `u32` of zero; the body (the schema as JSON, then one section per
//! field in schema order); a footer of the body length (`u64`), the CRC32 of everything before
//! the footer (`u32`) and the magic `SDFEND01`. [`FieldIndex::open`] checks all of it and refuses
//! a truncated or corrupted file with [`Error::Format`] naming it.
//!
//! Sections: keyword — sorted dictionary, one serialized roaring bitmap per value, per-row
//! distinct value ordinals as CSR (offsets + ordinals), presence bitmap, ignored count;
//! integer/datetime/float — per-row sorted distinct values as CSR, `(value, row)` pairs sorted
//! by value (then row) as two arrays, presence bitmap; bool — the `true` and `false` bitmaps.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod cursor;
mod filter;
mod format;
mod index;
mod schema;
mod sort;
mod value;
mod view;
mod writer;

use std::path::PathBuf;

pub use cursor::{parse_after, with_tiebreak};
pub use filter::{Filter, FilterError, MAX_FILTER_DEPTH};
pub use index::FieldIndex;
pub use roaring::RoaringBitmap;
pub use schema::{parse_datetime, FieldSpec, FieldType, FieldsConfig, Schema, Skipped};
pub use searchd_docs::DocId;
pub use sort::{
    compare, parse_sort, top_buckets, top_distinct_buckets, Bucket, IdOrder, Order, PagePlan,
    SortBy, SortKey, SortValue,
};
pub use value::TypedValue;
pub use view::{typed_values, FilterView};
pub use writer::{FieldsMeta, FieldsWriter};

/// The name of the segment's field file inside its directory.
pub const FIELDS_FILE: &str = "fields.bin";

/// Keyword values longer than this many bytes are not indexed (Elasticsearch `ignore_above`).
pub const IGNORE_ABOVE: usize = 256;

/// Errors of writing and opening field files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is not a valid field file (bad magic, version, checksum, truncated, ...).
    #[error("{}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A document's value cannot be indexed (a declared type it does not convert to, rows out
    /// of order, ...).
    #[error("row {row}: field \"{field}\": {message}")]
    Field {
        /// The field name.
        field: String,
        /// The row of the document.
        row: u32,
        /// What is wrong, quoting the value.
        message: String,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
