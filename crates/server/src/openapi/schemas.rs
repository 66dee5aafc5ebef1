//! Schema types of the wire shapes the server parses or writes by hand. They are never
//! built: they describe (fields, types, which are always present) and are checked against
//! the parsers' key lists and the contract suite's replies.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

// ------------------------------------------------------------------ shared pieces

/// An error reply. On Elasticsearch-shaped requests (a path segment starting with `_`, or
/// Elasticsearch's media type in `Accept`) it also carries Elasticsearch's `status`, and
/// its error `type`, `reason` and `root_cause`.
#[derive(ToSchema)]
pub struct ErrorReply {
    pub error: ErrorBody,
    /// The HTTP status (Elasticsearch-shaped requests only).
    pub status: Option<u16>,
}

/// What went wrong.
#[derive(ToSchema)]
pub struct ErrorBody {
    /// One of the contract's codes.
    #[schema(schema_with = super::error_code_schema)]
    pub code: String,
    pub message: String,
    /// Elasticsearch's error type, e.g. `illegal_argument_exception` (Elasticsearch-shaped
    /// requests only).
    #[schema(rename = "type")]
    pub kind: Option<String>,
    /// The message again, under Elasticsearch's name (Elasticsearch-shaped requests only).
    pub reason: Option<String>,
    /// `[{"type", "reason"}]` (Elasticsearch-shaped requests only).
    pub root_cause: Option<Vec<EsRootCause>>,
}

/// One of Elasticsearch's root causes.
#[derive(ToSchema)]
pub struct EsRootCause {
    #[schema(rename = "type")]
    pub kind: String,
    pub reason: String,
}

/// A document id: an unsigned integer or a non-empty string.
#[derive(ToSchema, Serialize)]
#[serde(untagged)]
pub enum DocId {
    Int(u64),
    Str(String),
}

/// `true` (every stored field), `false` (none) or a list of field names.
#[derive(ToSchema, Serialize)]
#[serde(untagged)]
pub enum FieldsParam {
    All(bool),
    List(Vec<String>),
}

/// A facet: a keyword field's name, or `{"field", "size"}`.
#[derive(ToSchema, Serialize)]
#[serde(untagged)]
pub enum FacetParam {
    Field(String),
    Sized(FacetSpec),
}

/// A facet with its number of buckets.
#[derive(ToSchema, Serialize)]
pub struct FacetSpec {
    pub field: String,
    /// Buckets (0..=10000, default 10).
    #[schema(required = false, minimum = 0, maximum = 10000)]
    pub size: u32,
}

/// A filter of the filter language (docs/queries-and-filters.md).
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct Filter(BTreeMap<String, Value>);

/// A field's value counts.
#[derive(ToSchema)]
pub struct Facet {
    pub buckets: Vec<Bucket>,
    /// Documents with a value outside the buckets.
    pub other_count: u64,
}

/// One value and how many documents have it.
#[derive(ToSchema)]
pub struct Bucket {
    pub count: u64,
    pub value: String,
}

// ------------------------------------------------------------------ native search

/// How a hybrid search fuses its two lists.
#[derive(ToSchema)]
pub struct Fusion {
    #[schema(required = false)]
    pub method: FusionMethod,
    /// RRF rank constant (1..=1000000).
    #[schema(required = false, minimum = 1)]
    pub k: u32,
    /// Candidates from each side.
    #[schema(required = false, minimum = 1)]
    pub window: u32,
    /// `weighted` only.
    #[schema(required = false)]
    pub weights: FusionWeights,
    /// `weighted` only.
    #[schema(required = false)]
    pub normalize: Normalize,
}

/// `rrf` (default) or `weighted` (`linear` is its alias).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum FusionMethod {
    Rrf,
    Weighted,
    Linear,
}

/// The weights of a weighted fusion (a side left out weighs 0).
#[derive(ToSchema)]
pub struct FusionWeights {
    #[schema(required = false)]
    pub dense: f64,
    #[schema(required = false)]
    pub lexical: f64,
}

/// Score normalisation of a weighted fusion.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum Normalize {
    Minmax,
    Zscore,
}

/// How a search retrieves.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum Mode {
    Dense,
    Lexical,
    Hybrid,
}

/// Rerank the first `top` hits with the cross-encoder.
#[derive(ToSchema)]
pub struct Rerank {
    #[schema(minimum = 1)]
    pub top: u32,
}

/// The body of `POST /search` and `/collections/{name}/search`: exactly one of
/// `vector`, `qidx`, `id`, `text`.
#[derive(ToSchema)]
pub struct SearchRequest {
    #[schema(required = false)]
    pub vector: Vec<f64>,
    /// A row of the server's query matrix (`serve --queries`).
    #[schema(required = false)]
    pub qidx: u64,
    /// Search with this document's stored vector (it is left out of the hits).
    #[schema(required = false)]
    pub id: DocId,
    #[schema(required = false)]
    pub text: String,
    /// Hits (default 10).
    #[schema(required = false, minimum = 1)]
    pub k: u32,
    #[schema(required = false, minimum = 1, maximum = 4096)]
    pub ef: u32,
    #[schema(required = false)]
    pub fields: FieldsParam,
    #[schema(required = false)]
    pub mode: Mode,
    #[schema(required = false)]
    pub fusion: Fusion,
    #[schema(required = false)]
    pub filter: Filter,
    #[schema(required = false)]
    pub facets: Vec<FacetParam>,
    /// `null` or `false`: no rerank.
    #[schema(required = false)]
    pub rerank: Option<Rerank>,
    /// The reply carries `explain`.
    #[schema(required = false)]
    pub explain: Option<bool>,
    /// Partitioned indexes: partitions probed (default: `serve --nprobe`, else the index's).
    #[schema(required = false, minimum = 1, maximum = 65536)]
    pub nprobe: Option<u64>,
}

/// One hit of a native search.
#[derive(ToSchema)]
pub struct Hit {
    pub id: DocId,
    /// `null` when not finite.
    #[schema(required = true)]
    pub score: Option<f64>,
    /// The stored fields asked for.
    #[schema(required = false, value_type = Object)]
    pub fields: Value,
}

/// Time per stage, microseconds.
#[derive(ToSchema)]
pub struct Timings {
    pub embed: u64,
    pub search: u64,
    pub dense: u64,
    pub lexical: u64,
    pub fuse: u64,
    pub rerank: u64,
}

/// The reply of a native search.
#[derive(ToSchema)]
pub struct SearchReply {
    pub hits: Vec<Hit>,
    pub took_us: u64,
    pub timings_us: Timings,
    pub mode: Mode,
    /// Texts embedded together with this one.
    #[schema(required = false)]
    pub embed_batch: u64,
    /// The filter's plan.
    #[schema(required = false)]
    pub plan: String,
    /// Documents the filter matched.
    #[schema(required = false)]
    pub matched: u64,
    #[schema(required = false)]
    pub facets: BTreeMap<String, Facet>,
    #[schema(required = false)]
    pub explain: Explain,
    /// Present (true) when a partitioned index under `--memory-budget` skipped probes whose
    /// partitions were still loading at the deadline: the hits come from the resident ones.
    #[schema(required = false)]
    pub degraded: bool,
    /// How many probes were skipped (with `degraded`).
    #[schema(required = false)]
    pub skipped_probes: u64,
    #[schema(required = false)]
    pub warnings: Vec<String>,
}

/// `"explain": true`: the plan, stage times, per-segment contributions.
#[derive(ToSchema)]
pub struct Explain {
    pub mode: Mode,
    #[schema(required = true)]
    pub plan: Option<String>,
    pub k: u64,
    pub ef: u64,
    #[schema(required = true)]
    pub matched: Option<u64>,
    pub stages_us: Timings,
    pub segments: Vec<SegmentExplain>,
}

/// What one segment contributed.
#[derive(ToSchema)]
pub struct SegmentExplain {
    #[schema(value_type = Value)]
    pub id: Value,
    pub candidates: u64,
    #[schema(required = true)]
    pub plan: Option<String>,
    /// Wall-clock microseconds of the segment's search.
    pub us: u64,
}

// ------------------------------------------------------------------ native reads

/// The body of `/count`.
#[derive(ToSchema)]
pub struct CountRequest {
    #[schema(required = false)]
    pub filter: Filter,
}

/// Documents the filter matched.
#[derive(ToSchema)]
pub struct CountReply {
    pub count: u64,
    pub took_us: u64,
}

/// The body of `/facet`.
#[derive(ToSchema)]
pub struct FacetRequest {
    /// The keyword field.
    pub field: String,
    #[schema(required = false)]
    pub filter: Filter,
    #[schema(required = false, minimum = 0, maximum = 10000)]
    pub size: u32,
}

/// The buckets of `/facet`.
#[derive(ToSchema)]
pub struct FacetReply {
    pub buckets: Vec<Bucket>,
    #[schema(required = true)]
    pub matched: Option<u64>,
    pub other_count: u64,
    pub took_us: u64,
}

/// The body of `/scroll`.
#[derive(ToSchema)]
pub struct ScrollRequest {
    #[schema(required = false)]
    pub filter: Filter,
    /// Sort keys (field names, `{"FIELD": "asc"|"desc"}`).
    #[schema(required = false, value_type = Value)]
    pub sort: Value,
    #[schema(required = false, minimum = 0)]
    pub size: u32,
    /// The `next` of the previous page.
    #[schema(required = false)]
    pub after: Option<Vec<Value>>,
    #[schema(required = false)]
    pub fields: FieldsParam,
    /// Count every match (`total`).
    #[schema(required = false)]
    pub total: bool,
    #[schema(required = false)]
    pub facets: Vec<FacetParam>,
}

/// One document of a page.
#[derive(ToSchema)]
pub struct ScrollHit {
    pub id: DocId,
    pub sort: Vec<Value>,
    #[schema(required = false, value_type = Object)]
    pub fields: Value,
}

/// A page of `/scroll`.
#[derive(ToSchema)]
pub struct ScrollReply {
    pub hits: Vec<ScrollHit>,
    /// The cursor of the next page (`null`: the last page).
    #[schema(required = true)]
    pub next: Option<Vec<Value>>,
    #[schema(required = false)]
    pub total: u64,
    #[schema(required = false)]
    pub facets: BTreeMap<String, Facet>,
    pub took_us: u64,
}

// ------------------------------------------------------------------ collections

/// Whether a collection serves.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum CollectionState {
    Ok,
    Loading,
    Failed,
}

/// One served collection.
#[derive(ToSchema)]
pub struct CollectionEntry {
    pub name: String,
    pub ready: bool,
    /// Its figures (`null` while it loads).
    #[schema(required = true, value_type = Option<Object>)]
    pub info: Option<Value>,
    pub state: CollectionState,
    /// Why it failed.
    #[schema(required = true)]
    pub reason: Option<String>,
}

/// `GET /collections`.
#[derive(ToSchema)]
pub struct CollectionsReply {
    pub collections: Vec<CollectionEntry>,
    /// The collection `/search` serves.
    pub default: String,
}

/// `GET /collections/{name}`.
#[derive(ToSchema)]
pub struct CollectionInfoReply {
    pub name: String,
    #[schema(value_type = Object)]
    pub info: Value,
}

/// `GET /collections/{name}/docs/{id}`.
#[derive(ToSchema)]
pub struct DocReply {
    pub id: DocId,
    #[schema(value_type = Object)]
    pub fields: Value,
}

/// `POST /collections` replied.
#[derive(ToSchema)]
pub struct CreateReply {
    pub acknowledged: bool,
    pub collection: String,
    #[schema(value_type = Object)]
    pub info: Value,
}

/// `DELETE /collections/{name}` replied.
#[derive(ToSchema)]
pub struct DeleteCollectionReply {
    pub acknowledged: bool,
    pub deleted: String,
    pub bytes_freed: u64,
}

/// `PUT /collections/{name}/mapping` replied.
#[derive(ToSchema)]
pub struct PutMappingReply {
    pub acknowledged: bool,
    pub added: Vec<String>,
    pub unchanged: Vec<String>,
    pub segments_to_build: u64,
    /// Where the build's progress shows.
    pub progress: String,
}

// ------------------------------------------------------------------ native writes

/// A document to write.
#[derive(ToSchema)]
pub struct Document {
    pub id: DocId,
    /// Embedded with the server's model when there is no vector.
    #[schema(required = false)]
    pub text: Option<String>,
    #[schema(required = false)]
    pub vector: Option<Vec<f64>>,
    #[schema(required = false, value_type = Option<Object>)]
    pub fields: Option<Value>,
}

/// `POST /collections/{name}/docs`.
#[derive(ToSchema)]
pub struct UpsertRequest {
    pub docs: Vec<Document>,
    /// Reply once the write is visible.
    #[schema(required = false)]
    pub wait: Option<bool>,
}

/// `POST /collections/{name}/delete`: `ids` or `filter`.
#[derive(ToSchema)]
pub struct DeleteRequest {
    #[schema(required = false)]
    pub ids: Vec<DocId>,
    #[schema(required = false)]
    pub filter: Filter,
    #[schema(required = false)]
    pub wait: Option<bool>,
}

/// Whether a write is visible yet.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum WriteStatus {
    /// Visible to searches.
    Applied,
    /// Logged.
    Acknowledged,
}

/// What a native write did.
#[derive(ToSchema)]
pub struct WriteReceipt {
    /// The write's sequence number.
    pub seq: u64,
    pub status: WriteStatus,
    pub took_ms: f64,
    /// An upsert: documents written.
    #[schema(required = false)]
    pub upserted: u64,
    /// A delete: documents deleted.
    #[schema(required = false)]
    pub deleted: u64,
    /// A delete by id: the ids that were not there.
    #[schema(required = false)]
    pub not_found: Vec<DocId>,
}

/// `POST /collections/{name}/snapshot` (the body is optional).
#[derive(ToSchema)]
pub struct SnapshotRequest {
    /// Where (inside the reload root); default beside the collection.
    #[schema(required = false)]
    pub path: Option<String>,
}

/// A snapshot written.
#[derive(ToSchema)]
pub struct SnapshotReply {
    pub path: String,
    pub seq: u64,
    pub took_ms: f64,
}

/// `POST /admin/reload` replied.
#[derive(ToSchema)]
pub struct ReloadReply {
    pub collection: String,
    /// The new index's figures.
    #[schema(value_type = Object)]
    pub index: Value,
    /// The directory served before.
    #[schema(required = true, value_type = Value)]
    pub previous: Value,
    pub took_ms: f64,
}

// ------------------------------------------------------------------ operations

/// `GET /version`.
#[derive(ToSchema)]
pub struct VersionReply {
    pub version: String,
    pub git: String,
    pub features: Vec<String>,
}

/// `GET /health`.
#[derive(ToSchema)]
pub struct HealthReply {
    #[schema(schema_with = ok_status)]
    pub status: String,
}

/// `GET /ready`.
#[derive(ToSchema)]
pub struct ReadyReply {
    #[schema(schema_with = ready_status)]
    pub status: String,
}

fn ok_status() -> utoipa::openapi::ObjectBuilder {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["ok"]))
}

fn ready_status() -> utoipa::openapi::ObjectBuilder {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some(["ready"]))
}

/// `GET /stats` (docs/http-api.md describes each part).
#[derive(ToSchema)]
pub struct StatsReply {
    pub uptime_s: f64,
    /// Every part of every segment with its bytes and placement (`parts`), the bytes
    /// resident in private memory (`resident`), `serve --memory-budget` (`budget`, one for
    /// the process) with its pool's accounts (`pool`: base, pinned, resident, reserved,
    /// peak) and the graph managers' totals (`partitions`).
    #[schema(value_type = Object)]
    pub memory: Value,
    /// The first collection's index (v1 shape); `null` while it loads.
    #[schema(required = true, value_type = Option<Object>)]
    pub index: Option<Value>,
    #[schema(value_type = Object)]
    pub requests: Value,
    /// Every collection's figures by name.
    #[schema(value_type = Object)]
    pub collections: Value,
    #[schema(required = true, value_type = Option<Object>)]
    pub embedder: Option<Value>,
    #[schema(required = true, value_type = Option<Object>)]
    pub reranker: Option<Value>,
    #[schema(value_type = Object)]
    pub cache: Value,
    #[schema(value_type = Object)]
    pub stages: Value,
    pub inflight: u64,
    pub queued: u64,
    #[schema(value_type = Object)]
    pub admission: Value,
    pub running: u64,
    #[schema(value_type = Object)]
    pub latency_ms: Value,
    pub qps_1m: f64,
    #[schema(value_type = Object)]
    pub process: Value,
    pub reloads: u64,
    #[schema(value_type = Object)]
    pub config: Value,
}

// ------------------------------------------------------------------ Elasticsearch

/// The body of `_search` (docs/queries-and-filters.md "Elasticsearch-compatible reads").
#[derive(ToSchema)]
pub struct EsSearchRequest {
    /// `match`, `bool`, `term(s)`, `range`, `exists`, `ids`, `match_all`, ...
    #[schema(required = false, value_type = Object)]
    pub query: Value,
    /// `{"field", "query_vector", "k", "num_candidates", "filter"}`.
    #[schema(required = false, value_type = Object)]
    pub knn: Value,
    /// `{"rrf": {"rank_constant", "rank_window_size"}}`.
    #[schema(required = false, value_type = Object)]
    pub rank: Value,
    #[schema(required = false, value_type = Value)]
    pub sort: Value,
    #[schema(required = false)]
    pub search_after: Vec<Value>,
    #[schema(required = false, minimum = 0)]
    pub from: u32,
    #[schema(required = false, minimum = 0)]
    pub size: u32,
    /// `true`, `false` or a count.
    #[schema(required = false, value_type = Value)]
    pub track_total_hits: Value,
    /// `true`, `false`, a field list or `{"includes", "excludes"}`.
    #[schema(required = false, value_type = Value)]
    pub _source: Value,
    /// `terms` aggregations.
    #[schema(required = false, value_type = Object)]
    pub aggs: Value,
    /// Alias of `aggs`.
    #[schema(required = false, value_type = Object)]
    pub aggregations: Value,
    /// Accepted; the server's deadline applies.
    #[schema(required = false, value_type = Value)]
    pub timeout: Value,
    #[schema(required = false)]
    pub rerank: Option<Rerank>,
    #[schema(required = false)]
    pub explain: Option<bool>,
    /// Partitioned indexes: partitions probed.
    #[schema(required = false, minimum = 1, maximum = 65536)]
    pub nprobe: Option<u64>,
}

/// `_shards` of a reply.
#[derive(ToSchema)]
pub struct EsShards {
    pub total: u64,
    pub successful: u64,
    #[schema(required = false)]
    pub skipped: u64,
    pub failed: u64,
}

/// One hit of `_search`.
#[derive(ToSchema)]
pub struct EsHit {
    pub _id: String,
    pub _index: String,
    #[schema(required = true)]
    pub _score: Option<f64>,
    #[schema(required = false, value_type = Object)]
    pub _source: Value,
    #[schema(required = false)]
    pub sort: Vec<Value>,
}

/// `eq` or `gte`.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum EsRelation {
    Eq,
    Gte,
}

/// `hits.total`.
#[derive(ToSchema)]
pub struct EsTotal {
    pub value: u64,
    pub relation: EsRelation,
}

/// `hits` of `_search`.
#[derive(ToSchema)]
pub struct EsHits {
    pub hits: Vec<EsHit>,
    #[schema(required = true)]
    pub max_score: Option<f64>,
    /// Absent with `track_total_hits: false`.
    #[schema(required = false)]
    pub total: EsTotal,
}

/// One bucket of a `terms` aggregation.
#[derive(ToSchema)]
pub struct EsBucket {
    pub doc_count: u64,
    pub key: String,
}

/// A `terms` aggregation's result.
#[derive(ToSchema)]
pub struct EsAggregation {
    pub buckets: Vec<EsBucket>,
    pub doc_count_error_upper_bound: u64,
    pub sum_other_doc_count: u64,
}

/// The reply of `_search`.
#[derive(ToSchema)]
pub struct EsSearchReply {
    pub _shards: EsShards,
    #[schema(required = false)]
    pub aggregations: BTreeMap<String, EsAggregation>,
    #[schema(required = false)]
    pub explain: Explain,
    pub hits: EsHits,
    pub timed_out: bool,
    /// Milliseconds.
    pub took: u64,
}

/// The body of `_count`.
#[derive(ToSchema)]
pub struct EsCountRequest {
    #[schema(required = false, value_type = Object)]
    pub query: Value,
}

/// The reply of `_count`.
#[derive(ToSchema)]
pub struct EsCountReply {
    pub count: u64,
    pub _shards: EsShards,
}

/// One id of `_mget`'s `docs`.
#[derive(ToSchema)]
pub struct EsMgetDoc {
    pub _id: DocId,
    /// Only the URL's index.
    #[schema(required = false)]
    pub _index: String,
}

/// The body of `_mget`: `ids` or `docs`.
#[derive(ToSchema)]
pub struct EsMgetRequest {
    #[schema(required = false)]
    pub ids: Vec<DocId>,
    #[schema(required = false)]
    pub docs: Vec<EsMgetDoc>,
}

/// A document of `_doc` and `_mget` (found: with `_source`; not found: `found: false`).
#[derive(ToSchema)]
pub struct EsDoc {
    pub _index: String,
    pub _id: String,
    pub found: bool,
    #[schema(required = false)]
    pub _version: u64,
    #[schema(required = false)]
    pub _seq_no: u64,
    #[schema(required = false)]
    pub _primary_term: u64,
    #[schema(required = false, value_type = Object)]
    pub _source: Value,
}

/// The reply of `_mget`.
#[derive(ToSchema)]
pub struct EsMgetReply {
    pub docs: Vec<EsDoc>,
}

/// What a write did.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum EsResult {
    Created,
    Updated,
    Deleted,
    NotFound,
}

/// `_shards` of a write.
#[derive(ToSchema)]
pub struct EsWriteShards {
    pub total: u64,
    pub successful: u64,
    pub failed: u64,
}

/// The reply of a one-document write (`_doc`).
#[derive(ToSchema)]
pub struct EsWriteReply {
    pub _index: String,
    pub _id: String,
    pub _version: u64,
    pub result: EsResult,
    pub _shards: EsWriteShards,
    pub _seq_no: u64,
    pub _primary_term: u64,
}

/// Elasticsearch's error of a refused `_bulk` item.
#[derive(ToSchema)]
pub struct EsItemError {
    /// `mapper_parsing_exception`, `index_not_found_exception`, ...
    #[schema(rename = "type")]
    pub kind: String,
    pub reason: String,
}

/// One `_bulk` item's outcome: a write's reply and its `status`, or an `error`.
#[derive(ToSchema)]
pub struct EsBulkOutcome {
    pub _index: String,
    pub _id: String,
    pub status: u16,
    #[schema(required = false)]
    pub _version: u64,
    #[schema(required = false)]
    pub result: EsResult,
    #[schema(required = false)]
    pub _shards: EsWriteShards,
    #[schema(required = false)]
    pub _seq_no: u64,
    #[schema(required = false)]
    pub _primary_term: u64,
    #[schema(required = false)]
    pub error: EsItemError,
}

/// One `_bulk` item, under its action's name.
#[derive(ToSchema)]
#[schema(max_properties = 1, min_properties = 1)]
pub struct EsBulkItem {
    #[schema(required = false)]
    pub index: EsBulkOutcome,
    #[schema(required = false)]
    pub create: EsBulkOutcome,
    #[schema(required = false)]
    pub update: EsBulkOutcome,
    #[schema(required = false)]
    pub delete: EsBulkOutcome,
}

/// The reply of `_bulk`.
#[derive(ToSchema)]
pub struct EsBulkReply {
    pub took: u64,
    /// Whether any item failed.
    pub errors: bool,
    pub items: Vec<EsBulkItem>,
}

/// A collection's mapping in Elasticsearch's words.
#[derive(ToSchema)]
pub struct EsMappings {
    /// Field name to `{"type": ...}` (`keyword`, `long`, `double`, `boolean`, `date`,
    /// `text`, `dense_vector`).
    #[schema(value_type = Object)]
    pub properties: Value,
}

/// `GET /{name}/_mapping`: the index name to its mappings.
#[derive(ToSchema)]
pub struct EsMappingReply(BTreeMap<String, EsIndexMappings>);

/// The mappings of one index.
#[derive(ToSchema)]
pub struct EsIndexMappings {
    pub mappings: EsMappings,
}

/// `GET /{name}`: the index name to its description.
#[derive(ToSchema)]
pub struct EsIndexReply(BTreeMap<String, EsIndex>);

/// One index.
#[derive(ToSchema)]
pub struct EsIndex {
    #[schema(value_type = Object)]
    pub aliases: Value,
    pub mappings: EsMappings,
    #[schema(value_type = Object)]
    pub settings: Value,
}

/// A row of `GET /_cat/indices?format=json` (figures as strings, as Elasticsearch).
#[derive(ToSchema)]
pub struct EsCatIndex {
    pub health: String,
    pub status: String,
    pub index: String,
    pub uuid: String,
    pub pri: String,
    pub rep: String,
    #[schema(rename = "docs.count")]
    pub docs_count: String,
    #[schema(rename = "docs.deleted")]
    pub docs_deleted: String,
    #[schema(rename = "store.size")]
    pub store_size: String,
    #[schema(rename = "pri.store.size")]
    pub pri_store_size: String,
}

/// `GET /` to an Elasticsearch client.
#[derive(ToSchema)]
pub struct EsRoot {
    pub name: String,
    pub cluster_name: String,
    pub cluster_uuid: String,
    #[schema(value_type = Object)]
    pub version: Value,
    pub tagline: String,
}
