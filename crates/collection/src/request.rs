//! The questions a collection answers and its answers: a search ([`Search`]) or a read
//! without a query ([`Page`]: a count, facets, a sorted page), each over every segment, with
//! hits carrying ids and stored fields. Collections answer them
//! ([`Collection::answer`](crate::Collection::answer), [`Collection::read`](crate::Collection::read));
//! searchd's server sends the same types to every backend (`searchd-backend` re-exports them),
//! as Qdrant's local and remote shards take the same requests.

use std::sync::Arc;
use std::time::Instant;

use searchd_fields::{Filter, SortKey, SortValue};
use searchd_vecio::Vectors;

use crate::fusion::Fusion;
use searchd_docs::DocId;

/// One search: a query, its filter and facets, the stored fields wanted.
pub struct Search {
    /// What to search with.
    pub query: QueryInput,
    /// Hits to return.
    pub k: usize,
    /// Search beam width of the dense index (raised to `k`).
    pub ef: usize,
    /// Oversampling factor passed to the index's search parameters (`None`: the index's default).
    pub oversample: Option<f32>,
    /// Partitioned indexes: partitions probed (`None`: the index's default).
    pub nprobe: Option<usize>,
    /// The stored fields each hit returns.
    pub fields: FieldsWanted,
    /// The filter (CONTRACTS.md "Filter language"), parsed and checked by the server
    /// against the collection's schema.
    pub filter: Option<Filter>,
    /// Terms facets over the hits the search returns (the query's top `k`, after the
    /// filter, as Elasticsearch computes aggregations of a kNN search).
    pub facets: Vec<FacetSpec>,
    /// When the search must be answered by.
    pub deadline: Instant,
    /// Report what each segment contributed ([`SearchOutput::segments`]).
    pub explain: bool,
}

/// A read of the documents that match a filter, without a query: an exact count, terms
/// facets, and/or one sorted page (`/count`, `/facet`, `/scroll` and Elasticsearch's
/// `_search` without `knn` or `match`).
pub struct Page {
    /// Parsed against the collection's schema.
    pub filter: Option<Filter>,
    /// Sort keys (`[{"price": "desc"}, "id"]` parsed; never `_score`, which needs a
    /// query); empty: by id.
    pub sort: Vec<SortKey>,
    /// The sort values of the last hit of the previous page (a value cursor, one per key of
    /// [`Page::sort`] with the id tiebreaker).
    pub after: Option<Vec<SortValue>>,
    /// Hits skipped before the page (Elasticsearch's `from`).
    pub from: usize,
    /// Hits in the page (0: no page, only counts and facets).
    pub size: usize,
    /// The stored fields each hit returns.
    pub fields: FieldsWanted,
    /// Count every matching document.
    pub total: bool,
    /// Terms facets over every matching document.
    pub facets: Vec<FacetSpec>,
    /// When the read must be answered by.
    pub deadline: Instant,
}

impl Page {
    /// A read of everything with nothing asked for yet, due by `deadline`.
    pub fn new(deadline: Instant) -> Page {
        Page {
            filter: None,
            sort: Vec::new(),
            after: None,
            from: 0,
            size: 0,
            fields: FieldsWanted::None,
            total: false,
            facets: Vec::new(),
            deadline,
        }
    }
}

/// Why a question could not be answered.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryError {
    /// The question is wrong for this collection (a client error).
    Invalid(String),
    /// No such document.
    NotFound(String),
    /// The deadline passed; `started` tells whether work had begun.
    Deadline {
        /// Whether work had begun when the deadline passed.
        started: bool,
    },
    /// A storage read failed, or a hit had no id.
    Internal(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Invalid(m) | QueryError::NotFound(m) | QueryError::Internal(m) => {
                f.write_str(m)
            }
            QueryError::Deadline { .. } => f.write_str("the deadline passed"),
        }
    }
}

impl std::error::Error for QueryError {}

/// What to search with.
pub enum QueryInput {
    /// A query vector (from the body, or embedded from text by the server).
    Vector(Vec<f32>),
    /// Row of the server's query matrix (`serve --queries`).
    Row(Arc<Vectors>, usize),
    /// The stored vector of this document, which is left out of the hits.
    Stored(DocId),
    /// BM25 over the text field.
    Lexical(String),
    /// Dense (`vector`, embedded from `text`) and lexical (`text`) retrieval, fused.
    Hybrid {
        /// The query text, for the lexical side.
        text: String,
        /// The query vector, for the dense side.
        vector: Vec<f32>,
        /// How the two ranked lists are fused.
        fusion: Fusion,
        /// Candidates taken from each side (raised to `k`).
        window: usize,
    },
}

/// Which stored fields a hit or a get returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FieldsWanted {
    /// Ids and scores only.
    #[default]
    None,
    /// Every stored field.
    All,
    /// Only these keys of the stored object (missing keys are left out).
    List(Vec<String>),
}

/// One terms facet asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FacetSpec {
    /// Name of the facet in the reply (the field, or an Elasticsearch aggregation name).
    pub name: String,
    /// A keyword field.
    pub field: String,
    /// Buckets returned (the rest is summed in `other_count`).
    pub size: usize,
}

/// Exact terms buckets: count descending, then value ascending.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FacetOutput {
    /// Name of the facet, as asked ([`FacetSpec::name`]).
    pub name: String,
    /// The keyword field counted.
    pub field: String,
    /// `(value, document count)` pairs, at most [`FacetSpec::size`].
    pub buckets: Vec<(String, u64)>,
    /// Documents counted in values that were not returned (Elasticsearch's
    /// `sum_other_doc_count`).
    pub other_count: u64,
}

/// One hit of a sorted page.
#[derive(Debug, Clone, PartialEq)]
pub struct SortedDoc {
    /// The document's own id.
    pub id: DocId,
    /// Its sort values (JSON: numbers, strings, booleans, datetimes as epoch milliseconds,
    /// `null` for a missing value), the implicit `id` tiebreaker last.
    pub sort: Vec<serde_json::Value>,
    /// The wanted stored fields as a JSON object, when fields were asked for.
    pub fields: Option<Vec<u8>>,
}

/// What a [`ReadRequest`] found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadOutput {
    /// The page's hits, in sort order.
    pub hits: Vec<SortedDoc>,
    /// The cursor for the next page: the last hit's sort values, when the page was full.
    pub next: Option<Vec<serde_json::Value>>,
    /// Documents that match the filter, when [`Page::total`] asked for them.
    pub total: Option<u64>,
    /// The facets asked for.
    pub facets: Vec<FacetOutput>,
}

/// Time spent in each stage of a search, in microseconds (0 when the stage did not run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTimes {
    /// Dense (vector) search.
    pub dense_us: u64,
    /// Lexical (BM25) search.
    pub lexical_us: u64,
    /// Fusing the dense and lexical lists (hybrid search).
    pub fuse_us: u64,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchOutput {
    /// The hits, best first.
    pub hits: Vec<ScoredDoc>,
    /// Time spent in each stage.
    pub stages: StageTimes,
    /// The query text was cut to the lexical limits (`searchd_lexical::MAX_QUERY_CHARS`).
    pub lexical_truncated: bool,
    /// How a filtered dense search ran (`exact`, `graph`, `graph_two_hop`; the first
    /// segment's plan), for the reply and tests.
    pub plan: Option<String>,
    /// Documents that pass the filter (exact), when there was one.
    pub matched: Option<u64>,
    /// The facets asked for.
    pub facets: Vec<FacetOutput>,
    /// What each segment contributed, when the request asked to explain (empty otherwise,
    /// and from backends without segments).
    pub segments: Vec<SegmentExplain>,
    /// Partitioned indexes under a memory budget: probes skipped because their partition
    /// was still loading at the deadline. Not 0: a degraded answer, from the partitions
    /// that were resident.
    pub skipped_probes: u64,
}

/// One segment's part in a search (`"explain": true`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SegmentExplain {
    /// The segment's name in the collection's manifest.
    pub id: String,
    /// Hits the segment offered to the merge.
    pub candidates: u64,
    /// How its filtered dense search ran (`exact`, `graph`, `graph_two_hop`), if filtered
    /// (a segment with deleted rows searches its alive rows as a filter).
    pub plan: Option<String>,
    /// Wall-clock microseconds of its search.
    pub us: u64,
}

impl From<Vec<ScoredDoc>> for SearchOutput {
    fn from(hits: Vec<ScoredDoc>) -> SearchOutput {
        SearchOutput {
            hits,
            ..SearchOutput::default()
        }
    }
}

/// One hit: the document's own id, a higher-is-better score, fields if asked.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredDoc {
    /// The document's own id.
    pub id: DocId,
    /// Higher is better; the scale depends on the metric or the fusion.
    pub score: f32,
    /// A JSON object, when fields were asked for and the backend stores them.
    pub fields: Option<Vec<u8>>,
}

/// A stored document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The document's own id.
    pub id: DocId,
    /// A JSON object (`{}` when the backend stores no fields).
    pub fields: Vec<u8>,
}

/// Keep only the wanted keys of a stored JSON object (values byte for byte).
pub fn select_fields(source: &[u8], wanted: &FieldsWanted) -> Option<Vec<u8>> {
    match wanted {
        FieldsWanted::None => None,
        FieldsWanted::All => Some(source.to_vec()),
        FieldsWanted::List(keys) => {
            let parsed: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> =
                serde_json::from_slice(source).unwrap_or_default();
            let mut out = Vec::with_capacity(source.len().min(256));
            out.push(b'{');
            let mut first = true;
            for k in keys {
                if let Some(v) = parsed.get(k) {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    serde_json::to_writer(&mut out, k).ok()?;
                    out.push(b':');
                    out.extend_from_slice(v.get().as_bytes());
                }
            }
            out.push(b'}');
            Some(out)
        }
    }
}

/// Largest `from + size` of a sorted page (Elasticsearch's `index.max_result_window`).
pub const MAX_RESULT_WINDOW: usize = 10_000;

/// What a write did, whichever backend took it (the live collection's log sequence
/// number, or the remote engine's operation id).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Receipt {
    /// The operation's sequence number in the log (0: nothing was logged).
    pub seq: u64,
    /// Visible to searches when the call returned (`wait`).
    pub applied: bool,
    /// Deletes: ids that did not exist (not an error).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_found: Vec<DocId>,
    /// Deletes: ids that existed and are now deleted.
    pub deleted: u64,
    /// Upserts: documents written.
    pub upserted: u64,
}

impl Receipt {
    /// Nothing was written (every id to delete was `not_found`, or no document matched).
    pub fn nothing(not_found: Vec<DocId>) -> Receipt {
        Receipt {
            seq: 0,
            applied: true,
            not_found,
            deleted: 0,
            upserted: 0,
        }
    }

    /// `n` documents upserted as operation `seq`.
    pub fn upserted(seq: u64, applied: bool, n: u64) -> Receipt {
        Receipt {
            seq,
            applied,
            not_found: Vec::new(),
            deleted: 0,
            upserted: n,
        }
    }

    /// `n` documents deleted as operation `seq`.
    pub fn deleted(seq: u64, applied: bool, n: u64, not_found: Vec<DocId>) -> Receipt {
        Receipt {
            seq,
            applied,
            not_found,
            deleted: n,
            upserted: 0,
        }
    }
}
