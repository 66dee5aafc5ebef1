//! The OpenAPI 3.1 document of the HTTP API, served at `GET /openapi.json` (CONTRACTS.md
//! "What a user sees").
//!
//! - **Schemas** are derived (`utoipa::ToSchema`) from the request types where the server
//!   parses with serde (`manage.rs` `CreateBody`, `PutMappingBody`, `admin.rs` `ReloadBody`)
//!   and, where requests are parsed by hand against key lists and replies are written by hand
//!   (`wire.rs`, `native.rs`, `reads.rs`, `es_reply.rs`, ...), from the types of
//!   [`schemas`], which describe those shapes: field names, types, which are always there, the
//!   enums. Error replies are [`schemas::ErrorReply`], its `code` one of [`Code::ALL`].
//! - **Paths** come from one table ([`operations`]): method, path, request body, query
//!   parameters, replies per status. Path parameters (`{name}`, `{id}`) are taken from the
//!   path itself.
//! - **Drift** is caught by tests: every `.route(..)` of `router.rs` and every method it
//!   takes must be in the document (`router.rs` tests), the request-body schemas must name
//!   exactly the keys the parsers accept (tests below), and the contract suite
//!   (`tests/api.rs`) validates every JSON reply it receives against the document.
//!
//! The document is built once and kept as bytes ([`document_bytes`]).

use std::sync::OnceLock;

use bytes::Bytes;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{
    Content, ContentBuilder, InfoBuilder, ObjectBuilder, OpenApi, Ref, RefOr, Required,
    ResponseBuilder, Schema, Type,
};
use utoipa::OpenApi as _;

use crate::error::Code;

/// The document as JSON bytes, built on first use.
pub(crate) fn document_bytes() -> Bytes {
    static DOC: OnceLock<Bytes> = OnceLock::new();
    DOC.get_or_init(|| Bytes::from(serde_json::to_vec(&document()).unwrap_or_default()))
        .clone()
}

/// `GET /openapi.json`.
pub(crate) async fn serve() -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut r = (axum::http::StatusCode::OK, document_bytes()).into_response();
    r.headers_mut()
        .insert(axum::http::header::CONTENT_TYPE, crate::error::JSON);
    r.extensions_mut().insert(crate::error::Tagged(Code::Ok));
    r
}

/// The component schemas (nested ones are collected by utoipa).
#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(
    schemas::ErrorReply,
    schemas::SearchRequest,
    schemas::SearchReply,
    schemas::CountRequest,
    schemas::CountReply,
    schemas::FacetRequest,
    schemas::FacetReply,
    schemas::ScrollRequest,
    schemas::ScrollReply,
    schemas::CollectionsReply,
    schemas::CollectionInfoReply,
    schemas::DocReply,
    schemas::UpsertRequest,
    schemas::DeleteRequest,
    schemas::WriteReceipt,
    schemas::SnapshotRequest,
    schemas::SnapshotReply,
    crate::manage::CreateBody,
    schemas::CreateReply,
    schemas::DeleteCollectionReply,
    crate::manage::PutMappingBody,
    schemas::PutMappingReply,
    crate::admin::ReloadBody,
    schemas::ReloadReply,
    schemas::EsSearchRequest,
    schemas::EsSearchReply,
    schemas::EsCountRequest,
    schemas::EsCountReply,
    schemas::EsMgetRequest,
    schemas::EsMgetReply,
    schemas::EsDoc,
    schemas::EsWriteReply,
    schemas::EsBulkReply,
    schemas::EsIndexReply,
    schemas::EsMappingReply,
    schemas::EsCatIndex,
    schemas::EsRoot,
    schemas::VersionReply,
    schemas::HealthReply,
    schemas::ReadyReply,
    schemas::StatsReply,
)))]
struct Components;

/// Security scheme names (`components.securitySchemes`).
const BEARER: &str = "bearer";
const API_KEY: &str = "api_key";

/// How a route is reached with `--api-keys` (`auth::need`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// A key (or, for admin routes without keys, `--admin-token` or a loopback peer).
    Key,
    /// Open: no key asked (`/health`, `/ready`, the console, this document).
    Open,
}

/// A reply body: JSON of a component schema, or other media.
#[derive(Clone, Copy)]
enum Reply {
    Json(&'static str),
    /// JSON of an inline schema (a free-form object).
    AnyJson,
    Text(&'static str),
}

/// A request body.
#[derive(Clone, Copy)]
enum Body {
    /// JSON of a component schema; `required: false` when the route reads without one.
    Json(&'static str, bool),
    /// A free-form JSON object (an Elasticsearch `_source`).
    Object,
    /// NDJSON (`_bulk`).
    Ndjson,
}

/// The type of a query parameter.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int,
    Bool,
}

/// A query parameter: name, schema type, description.
#[derive(Clone, Copy)]
struct Query(&'static str, Ty, &'static str);

const PRETTY: Query = Query(
    "pretty",
    Ty::Str,
    "Indent the JSON reply (`?pretty`, `?pretty=true`).",
);
const WAIT: Query = Query(
    "wait",
    Ty::Bool,
    "`true`: reply once the write is visible to searches; else once it is logged.",
);
const REFRESH: Query = Query(
    "refresh",
    Ty::Str,
    "`true` or `wait_for`: reply once the write is visible; `false` (default): once it is logged.",
);
/// Accepted and ignored by Elasticsearch-shaped writes (any other parameter is a 400).
const ES_WRITE_SWITCHES: [Query; 3] = [
    Query("timeout", Ty::Str, "Accepted and ignored."),
    Query("human", Ty::Str, "Accepted and ignored."),
    Query("error_trace", Ty::Str, "Accepted and ignored."),
];
/// `q` of `_search` and `_count`: documented because Elasticsearch has it; refused.
const ES_Q: Query = Query(
    "q",
    Ty::Str,
    "Not supported: 400 naming it (send a body query, `{\"query\": {\"match\": {FIELD: TEXT}}}`). Any parameter not listed here is a 400 too.",
);
const ES_SIZE: Query = Query("size", Ty::Int, "Hits per page (over the body's `size`).");
const ES_FROM: Query = Query("from", Ty::Int, "Hits to skip (over the body's `from`).");
const ES_SWITCHES: [Query; 4] = [
    Query("human", Ty::Str, "Accepted and ignored."),
    Query("error_trace", Ty::Str, "Accepted and ignored."),
    Query("typed_keys", Ty::Str, "Accepted and ignored."),
    Query("nonce", Ty::Str, "Accepted and ignored (cache busting)."),
];
const FORMAT: Query = Query(
    "format",
    Ty::Str,
    "`json`: the rows as JSON; else a text table.",
);

/// One operation of the table.
struct Op {
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
    access: Access,
    body: Option<Body>,
    query: Vec<Query>,
    /// Success replies (status, body).
    ok: Vec<(u16, Vec<Reply>)>,
    /// Error statuses beyond those of every route ([`COMMON_ERRORS`]); all answer
    /// [`schemas::ErrorReply`] unless `special` says otherwise.
    errors: &'static [u16],
    /// Statuses answered with another shape (or with either).
    special: Vec<(u16, Vec<Reply>)>,
}

/// Errors any route may answer: the gate (401/403: keys, `Host`), the connection layer
/// (400 `bad_request`, 408, 414, 431), 500, 503 (`overloaded`, `not_ready`, `shutting_down`).
const COMMON_ERRORS: &[u16] = &[400, 401, 403, 408, 414, 431, 500, 503];
/// Routes that read a body add these.
const BODY_ERRORS: &[u16] = &[404, 413, 415];
/// Searches and reads (deadline).
const READ_ERRORS: &[u16] = &[404, 413, 415, 504];
/// Writes (409: a reload or reopen in progress; 507: disk full).
const WRITE_ERRORS: &[u16] = &[404, 409, 413, 415, 504, 507];

fn op(
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    tag: &'static str,
    summary: &'static str,
) -> Op {
    Op {
        method,
        path,
        id,
        tag,
        summary,
        access: Access::Key,
        body: None,
        query: vec![PRETTY],
        ok: Vec::new(),
        errors: &[],
        special: Vec::new(),
    }
}

impl Op {
    fn open(mut self) -> Op {
        self.access = Access::Open;
        self
    }
    fn body(mut self, b: Body) -> Op {
        self.body = Some(b);
        self
    }
    fn query(mut self, q: &[Query]) -> Op {
        self.query.extend_from_slice(q);
        self
    }
    fn reply(mut self, status: u16, r: &[Reply]) -> Op {
        self.ok.push((status, r.to_vec()));
        self
    }
    fn errors(mut self, e: &'static [u16]) -> Op {
        self.errors = e;
        self
    }
    fn special(mut self, status: u16, r: &[Reply]) -> Op {
        self.special.push((status, r.to_vec()));
        self
    }
}

use HttpMethod::{Delete, Get, Post, Put};
use Reply::{AnyJson, Json, Text};

/// Every operation of the API, in the order of `router.rs`.
fn operations() -> Vec<Op> {
    let search_body = Body::Json("SearchRequest", true);
    let es_search = |m, id| {
        op(
            m,
            "/{name}/_search",
            id,
            "elasticsearch",
            "Search a collection (Elasticsearch `_search`)",
        )
        .body(Body::Json("EsSearchRequest", false))
        .query(&[ES_SIZE, ES_FROM, ES_Q])
        .query(&ES_SWITCHES)
        .reply(200, &[Json("EsSearchReply")])
        .errors(READ_ERRORS)
    };
    let es_count = |m, id| {
        op(
            m,
            "/{name}/_count",
            id,
            "elasticsearch",
            "Count the documents a query matches (Elasticsearch `_count`)",
        )
        .body(Body::Json("EsCountRequest", false))
        .query(&[ES_Q])
        .query(&ES_SWITCHES)
        .reply(200, &[Json("EsCountReply")])
        .errors(READ_ERRORS)
    };
    let es_index = |m, id| {
        op(
            m,
            "/{name}/_doc/{id}",
            id,
            "elasticsearch",
            "Index one document (its body is the `_source`)",
        )
        .body(Body::Object)
        .query(&[REFRESH])
        .query(&ES_WRITE_SWITCHES)
        .reply(200, &[Json("EsWriteReply")])
        .reply(201, &[Json("EsWriteReply")])
        .errors(WRITE_ERRORS)
    };
    let bulk = |m, path, id| {
        op(
            m,
            path,
            id,
            "elasticsearch",
            "Apply index, create, update and delete operations (NDJSON)",
        )
        .body(Body::Ndjson)
        .query(&[REFRESH])
        .query(&ES_WRITE_SWITCHES)
        .reply(200, &[Json("EsBulkReply")])
        .errors(WRITE_ERRORS)
    };
    let es_mget = |m, id| {
        op(
            m,
            "/{name}/_mget",
            id,
            "elasticsearch",
            "Get documents by id (Elasticsearch `_mget`)",
        )
        .body(Body::Json("EsMgetRequest", false))
        .query(&ES_SWITCHES)
        .reply(200, &[Json("EsMgetReply")])
        .errors(READ_ERRORS)
    };
    vec![
        op(
            Post,
            "/search",
            "search",
            "search",
            "Search the first collection (v1)",
        )
        .body(search_body)
        .reply(200, &[Json("SearchReply")])
        .errors(READ_ERRORS),
        op(
            Get,
            "/collections",
            "listCollections",
            "collections",
            "List the served collections",
        )
        .reply(200, &[Json("CollectionsReply")]),
        op(
            Post,
            "/collections",
            "createCollection",
            "collections",
            "Create a collection",
        )
        .body(Body::Json("CreateBody", true))
        .reply(201, &[Json("CreateReply")])
        .errors(&[409, 413, 415, 507]),
        op(
            Get,
            "/collections/{name}",
            "getCollection",
            "collections",
            "A collection's figures",
        )
        .reply(200, &[Json("CollectionInfoReply")])
        .errors(&[404]),
        op(
            Delete,
            "/collections/{name}",
            "deleteCollection",
            "collections",
            "Delete a collection created over HTTP",
        )
        .reply(200, &[Json("DeleteCollectionReply")])
        .errors(&[404, 409]),
        op(
            Put,
            "/collections/{name}/mapping",
            "putMapping",
            "collections",
            "Add field indexes to a collection",
        )
        .body(Body::Json("PutMappingBody", true))
        .reply(200, &[Json("PutMappingReply")])
        .errors(WRITE_ERRORS),
        op(
            Post,
            "/collections/{name}/search",
            "collectionSearch",
            "search",
            "Search a collection",
        )
        .body(search_body)
        .reply(200, &[Json("SearchReply")])
        .errors(READ_ERRORS),
        op(
            Get,
            "/collections/{name}/docs/{id}",
            "getDoc",
            "documents",
            "Get a document",
        )
        .reply(200, &[Json("DocReply")])
        .errors(&[404]),
        op(
            Delete,
            "/collections/{name}/docs/{id}",
            "deleteDoc",
            "documents",
            "Delete a document",
        )
        .query(&[WAIT])
        .reply(200, &[Json("WriteReceipt")])
        .errors(&[404, 409, 504, 507]),
        op(
            Post,
            "/collections/{name}/docs",
            "upsertDocs",
            "documents",
            "Insert or replace documents",
        )
        .body(Body::Json("UpsertRequest", true))
        .reply(200, &[Json("WriteReceipt")])
        .errors(WRITE_ERRORS),
        op(
            Post,
            "/collections/{name}/delete",
            "deleteDocs",
            "documents",
            "Delete documents by id or filter",
        )
        .body(Body::Json("DeleteRequest", true))
        .reply(200, &[Json("WriteReceipt")])
        .errors(WRITE_ERRORS),
        op(
            Post,
            "/collections/{name}/snapshot",
            "snapshot",
            "collections",
            "Write a snapshot of a live collection (the body is optional)",
        )
        .body(Body::Json("SnapshotRequest", false))
        .reply(200, &[Json("SnapshotReply")])
        .errors(WRITE_ERRORS),
        op(
            Post,
            "/collections/{name}/count",
            "count",
            "search",
            "Count the documents a filter matches",
        )
        .body(Body::Json("CountRequest", true))
        .reply(200, &[Json("CountReply")])
        .errors(READ_ERRORS),
        op(
            Post,
            "/collections/{name}/facet",
            "facet",
            "search",
            "Count the values of a keyword field",
        )
        .body(Body::Json("FacetRequest", true))
        .reply(200, &[Json("FacetReply")])
        .errors(READ_ERRORS),
        op(
            Post,
            "/collections/{name}/scroll",
            "scroll",
            "search",
            "Page through the documents a filter matches, in sort order",
        )
        .body(Body::Json("ScrollRequest", true))
        .reply(200, &[Json("ScrollReply")])
        .errors(READ_ERRORS),
        es_search(Get, "esSearchGet"),
        es_search(Post, "esSearch"),
        es_count(Get, "esCountGet"),
        es_count(Post, "esCount"),
        op(
            Get,
            "/{name}/_doc/{id}",
            "esGetDoc",
            "elasticsearch",
            "Get a document (Elasticsearch `_doc`)",
        )
        .reply(200, &[Json("EsDoc")])
        .special(404, &[Json("EsDoc"), Json("ErrorReply")]),
        es_index(Put, "esIndexDoc"),
        es_index(Post, "esIndexDocPost"),
        op(
            Delete,
            "/{name}/_doc/{id}",
            "esDeleteDoc",
            "elasticsearch",
            "Delete a document (Elasticsearch `_doc`)",
        )
        .query(&[REFRESH])
        .query(&ES_WRITE_SWITCHES)
        .reply(200, &[Json("EsWriteReply")])
        .errors(&[409, 504, 507])
        .special(404, &[Json("EsWriteReply"), Json("ErrorReply")]),
        bulk(Post, "/{name}/_bulk", "esBulkIndex"),
        bulk(Put, "/{name}/_bulk", "esBulkIndexPut"),
        bulk(Post, "/_bulk", "esBulk"),
        bulk(Put, "/_bulk", "esBulkPut"),
        op(
            Get,
            "/{name}/_mapping",
            "esGetMapping",
            "elasticsearch",
            "A collection's mapping (Elasticsearch `_mapping`)",
        )
        .reply(200, &[Json("EsMappingReply")])
        .errors(&[404]),
        op(
            Get,
            "/{name}",
            "esGetIndex",
            "elasticsearch",
            "A collection as an Elasticsearch index",
        )
        .reply(200, &[Json("EsIndexReply")])
        .errors(&[404]),
        op(
            Get,
            "/_cat/indices",
            "esCatIndices",
            "elasticsearch",
            "The collections as Elasticsearch `_cat/indices` rows",
        )
        .query(&[FORMAT])
        .reply(200, &[Json("EsCatIndices"), Text("text/plain")]),
        op(
            Get,
            "/",
            "root",
            "console",
            "The search console's page; Elasticsearch's root to a client that asks for `application/vnd.elasticsearch+json` (which needs a key)",
        )
        .open()
        .reply(200, &[Text("text/html"), Json("EsRoot")])
        .reply(304, &[]),
        op(
            Get,
            "/console",
            "console",
            "console",
            "The search console's page",
        )
        .open()
        .reply(200, &[Text("text/html")])
        .reply(304, &[]),
        op(
            Get,
            "/console/console.js",
            "consoleScript",
            "console",
            "The console's script",
        )
        .open()
        .reply(200, &[Text("text/javascript")])
        .reply(304, &[]),
        op(
            Get,
            "/console/console.css",
            "consoleStyle",
            "console",
            "The console's style sheet",
        )
        .open()
        .reply(200, &[Text("text/css")])
        .reply(304, &[]),
        op(
            Get,
            "/version",
            "version",
            "operations",
            "The build's version, git commit and features",
        )
        .reply(200, &[Json("VersionReply")]),
        es_mget(Get, "esMgetGet"),
        es_mget(Post, "esMget"),
        op(
            Get,
            "/health",
            "health",
            "operations",
            "Liveness probe",
        )
        .open()
        .reply(200, &[Json("HealthReply")]),
        op(
            Get,
            "/healthz",
            "healthz",
            "operations",
            "Liveness probe (alias of /health)",
        )
        .open()
        .reply(200, &[Json("HealthReply")]),
        op(
            Get,
            "/ready",
            "ready",
            "operations",
            "Readiness probe: 200 once every collection serves",
        )
        .open()
        .reply(200, &[Json("ReadyReply")]),
        op(
            Get,
            "/readyz",
            "readyz",
            "operations",
            "Readiness probe (alias of /ready)",
        )
        .open()
        .reply(200, &[Json("ReadyReply")]),
        op(
            Get,
            "/stats",
            "stats",
            "operations",
            "Counters, latencies and every collection's figures",
        )
        .reply(200, &[Json("StatsReply")]),
        op(
            Get,
            "/metrics",
            "metrics",
            "operations",
            "OpenMetrics text (Prometheus)",
        )
        .reply(200, &[Text("application/openmetrics-text")]),
        op(
            Post,
            "/admin/reload",
            "reload",
            "operations",
            "Open a collection again (or another directory) and swap it in",
        )
        .body(Body::Json("ReloadBody", true))
        .reply(200, &[Json("ReloadReply")])
        .errors(&[404, 409, 413, 415]),
        op(
            Get,
            "/openapi.json",
            "openapi",
            "operations",
            "This document",
        )
        .open()
        .reply(200, &[AnyJson]),
    ]
}

fn schema_ref(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

/// The content map of one reply: JSON schemas of the same media type become a `oneOf`.
fn contents(replies: &[Reply]) -> Vec<(String, Content)> {
    let mut json: Vec<RefOr<Schema>> = Vec::new();
    let mut out = Vec::new();
    for r in replies {
        match r {
            Json(name) if *name == "EsCatIndices" => json.push(
                utoipa::openapi::schema::ArrayBuilder::new()
                    .items(schema_ref("EsCatIndex"))
                    .into(),
            ),
            Json(name) => json.push(schema_ref(name)),
            AnyJson => json.push(ObjectBuilder::new().schema_type(Type::Object).into()),
            Text(mime) => out.push((
                (*mime).to_string(),
                ContentBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                    .build(),
            )),
        }
    }
    let schema = match json.len() {
        0 => None,
        1 => json.pop(),
        _ => Some(
            json.into_iter()
                .fold(utoipa::openapi::schema::OneOfBuilder::new(), |b, s| {
                    b.item(s)
                })
                .into(),
        ),
    };
    if let Some(s) = schema {
        out.insert(
            0,
            (
                "application/json".to_string(),
                ContentBuilder::new().schema(Some(s)).build(),
            ),
        );
    }
    out
}

fn response(description: &str, replies: &[Reply]) -> utoipa::openapi::Response {
    let mut b = ResponseBuilder::new().description(description);
    for (mime, c) in contents(replies) {
        b = b.content(mime, c);
    }
    b.build()
}

/// The reason phrase of a status, for the description of its reply.
fn reason(status: u16) -> String {
    let codes: Vec<&str> = Code::ALL
        .iter()
        .filter(|c| **c != Code::Ok && c.status().as_u16() == status)
        .map(|c| c.as_str())
        .collect();
    if codes.is_empty() {
        "error".to_string()
    } else {
        format!("error: {}", codes.join(", "))
    }
}

fn operation(o: &Op) -> utoipa::openapi::path::Operation {
    let mut b = OperationBuilder::new()
        .operation_id(Some(o.id))
        .summary(Some(o.summary))
        .tag(o.tag);
    // Path parameters from the template.
    for seg in o.path.split('/') {
        if let Some(p) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            let what = match p {
                "name" => "The collection (an Elasticsearch index name on `_` routes).",
                "id" => {
                    "The document id (a path segment: `17` finds the document of id 17 or \"17\")."
                }
                _ => "",
            };
            b = b.parameter(
                ParameterBuilder::new()
                    .name(p)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .description(Some(what))
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String))),
            );
        }
    }
    for q in &o.query {
        b = b.parameter(
            ParameterBuilder::new()
                .name(q.0)
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(q.2))
                .schema(Some(ObjectBuilder::new().schema_type(match q.1 {
                    Ty::Str => Type::String,
                    Ty::Int => Type::Integer,
                    Ty::Bool => Type::Boolean,
                }))),
        );
    }
    if let Some(body) = o.body {
        let rb = match body {
            Body::Json(name, required) => RequestBodyBuilder::new()
                .required(Some(if required {
                    Required::True
                } else {
                    Required::False
                }))
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(schema_ref(name))).build(),
                ),
            Body::Object => RequestBodyBuilder::new()
                .description(Some("The document's `_source`: its one top-level array of `dim` numbers is the vector; without one, the collection's text field is embedded."))
                .required(Some(Required::True))
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(ObjectBuilder::new().schema_type(Type::Object)))
                        .build(),
                ),
            Body::Ndjson => RequestBodyBuilder::new()
                .description(Some("NDJSON: an action line (`index`, `create`, `update`, `delete`: `{\"_index\", \"_id\"}`) and, but for `delete`, a source line (`update`: `{\"doc\": {..}}`). Also taken as `application/json` and `application/vnd.elasticsearch+x-ndjson`."))
                .required(Some(Required::True))
                .content(
                    "application/x-ndjson",
                    ContentBuilder::new()
                        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                        .build(),
                ),
        };
        b = b.request_body(Some(rb.build()));
    }
    for (status, replies) in &o.ok {
        let what = if *status == 304 {
            "not modified (`If-None-Match` named the asset's `ETag`)"
        } else {
            "success"
        };
        b = b.response(status.to_string(), response(what, replies));
    }
    let mut errs: Vec<u16> = COMMON_ERRORS.iter().chain(o.errors).copied().collect();
    if o.body.is_some() {
        errs.extend_from_slice(BODY_ERRORS);
    }
    errs.sort_unstable();
    errs.dedup();
    for s in errs {
        if o.special.iter().any(|(x, _)| *x == s) {
            continue;
        }
        b = b.response(s.to_string(), response(&reason(s), &[Json("ErrorReply")]));
    }
    for (status, replies) in &o.special {
        b = b.response(status.to_string(), response(&reason(*status), replies));
    }
    if o.access == Access::Open {
        // An empty requirement: no key needed.
        b = b.securities(Some([SecurityRequirement::default()]));
    }
    b.build()
}

/// The whole document.
pub(crate) fn document() -> OpenApi {
    let mut doc = Components::openapi();
    doc.info = InfoBuilder::new()
        .title("searchd")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "searchd's HTTP API: native search and collection routes, an Elasticsearch-compatible layer, probes and figures. \
             Errors are `{\"error\": {\"code\", \"message\"}}` with the codes of docs/CONTRACTS.md. \
             With `serve --api-keys`, every route but the probes, the console and this document needs a key \
             (`Authorization: Bearer KEY` or `api-key: KEY`); without keys, admin routes need `--admin-token` \
             (as a bearer token) or a loopback peer. Every JSON route takes `?pretty`.",
        ))
        .build();
    for o in operations() {
        doc.paths
            .add_path_operation(o.path, vec![o.method.clone()], operation(&o));
    }
    if let Some(c) = doc.components.as_mut() {
        // The parsers refuse keys they do not know: the request schemas say so.
        for name in CLOSED_REQUESTS {
            if let Some(RefOr::T(Schema::Object(o))) = c.schemas.get_mut(*name) {
                o.additional_properties = Some(Box::new(
                    utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
                ));
            }
        }
        c.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`serve --api-keys`), or the admin token (`--admin-token`) on admin routes",
                    ))
                    .build(),
            ),
        );
        c.add_security_scheme(
            API_KEY,
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "api-key",
                "An API key (`serve --api-keys`), Qdrant's header",
            ))),
        );
    }
    doc.security = Some(vec![
        SecurityRequirement::new(BEARER, Vec::<String>::new()),
        SecurityRequirement::new(API_KEY, Vec::<String>::new()),
    ]);
    doc
}

/// Request-body schemas whose parser refuses unknown keys (`additionalProperties: false`);
/// the serde-parsed bodies (`deny_unknown_fields`) are closed by their derive.
const CLOSED_REQUESTS: &[&str] = &[
    "SearchRequest",
    "Fusion",
    "FusionWeights",
    "Rerank",
    "FacetSpec",
    "CountRequest",
    "FacetRequest",
    "ScrollRequest",
    "EsSearchRequest",
    "EsCountRequest",
    "EsMgetRequest",
    "EsMgetDoc",
    "UpsertRequest",
    "Document",
    "DeleteRequest",
    "SnapshotRequest",
];

/// The `code` of an error reply: every code of the contract's table but `ok`.
fn error_code_schema() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(
            Code::ALL
                .iter()
                .filter(|c| **c != Code::Ok)
                .map(|c| c.as_str()),
        ))
}

/// Schema types of the wire shapes the server parses or writes by hand. They are never
/// built: they describe (fields, types, which are always present) and are checked against
/// the parsers' key lists and the contract suite's replies.
#[allow(dead_code)]
pub(crate) mod schemas {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde_json::Value;
    use utoipa::ToSchema;

    // ------------------------------------------------------------------ shared pieces

    /// An error reply.
    #[derive(ToSchema)]
    pub struct ErrorReply {
        pub error: ErrorBody,
    }

    /// What went wrong.
    #[derive(ToSchema)]
    pub struct ErrorBody {
        /// One of the contract's codes.
        #[schema(schema_with = super::error_code_schema)]
        pub code: String,
        pub message: String,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> serde_json::Value {
        serde_json::from_slice(&document_bytes()).unwrap()
    }

    /// The property names of component schema `name`.
    fn props(doc: &serde_json::Value, name: &str) -> Vec<String> {
        let s = &doc["components"]["schemas"][name];
        let mut v: Vec<String> = s["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("schema {name} has no properties: {s}"))
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }

    fn sorted(keys: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn the_document_is_openapi_3_1_with_the_crate_version() {
        let d = doc();
        assert!(
            d["openapi"].as_str().unwrap().starts_with("3.1."),
            "{}",
            d["openapi"]
        );
        assert_eq!(d["info"]["version"], env!("CARGO_PKG_VERSION"));
        let schemes = d["components"]["securitySchemes"].as_object().unwrap();
        assert_eq!(schemes[BEARER]["scheme"], "bearer");
        assert_eq!(schemes[API_KEY]["name"], "api-key");
        assert_eq!(schemes[API_KEY]["in"], "header");
    }

    #[test]
    fn every_schema_reference_resolves() {
        let d = doc();
        let text = d.to_string();
        let schemas = d["components"]["schemas"].as_object().unwrap();
        for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(schemas.contains_key(name), "dangling $ref to {name}");
        }
    }

    #[test]
    fn every_operation_has_a_success_and_the_error_shape() {
        let d = doc();
        for (path, item) in d["paths"].as_object().unwrap() {
            for (method, o) in item.as_object().unwrap() {
                let r = o["responses"].as_object().unwrap();
                assert!(
                    r.keys().any(|s| s.starts_with('2')),
                    "{method} {path}: no 2xx reply"
                );
                assert!(
                    r["401"]["content"]["application/json"]["schema"]["$ref"]
                        .as_str()
                        .is_some_and(|s| s.ends_with("/ErrorReply")),
                    "{method} {path}: 401 is not the error shape"
                );
            }
        }
    }

    #[test]
    fn the_error_codes_are_the_contracts() {
        let d = doc();
        let codes = d["components"]["schemas"]["ErrorBody"]["properties"]["code"]["enum"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(codes, Code::ALL.len() - 1);
    }

    /// A new body key must be documented: the request schemas name exactly the keys the
    /// parsers accept.
    #[test]
    fn request_schemas_name_the_keys_the_parsers_accept() {
        let d = doc();
        let native: Vec<&str> = crate::native::OWN_KEYS
            .iter()
            .chain(crate::query::COMMON_KEYS)
            .copied()
            .collect();
        let es_search = crate::es::search_rule().keys;
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("SearchRequest", native),
            ("Fusion", crate::native::FUSION_KEYS.to_vec()),
            ("FusionWeights", crate::native::FUSION_WEIGHT_KEYS.to_vec()),
            ("Rerank", crate::query::RERANK_KEYS.to_vec()),
            ("FacetSpec", crate::wire::FACET_KEYS.to_vec()),
            ("CountRequest", crate::reads::COUNT.keys.to_vec()),
            ("FacetRequest", crate::reads::FACET.keys.to_vec()),
            ("ScrollRequest", crate::reads::SCROLL.keys.to_vec()),
            ("EsSearchRequest", es_search.to_vec()),
            ("EsCountRequest", crate::es::COUNT.keys.to_vec()),
            ("EsMgetRequest", crate::es::MGET.keys.to_vec()),
            ("EsMgetDoc", crate::es::MGET_DOC_KEYS.to_vec()),
            ("UpsertRequest", crate::writes::UPSERT_KEYS.to_vec()),
            ("Document", crate::writes::DOC_KEYS.to_vec()),
            ("DeleteRequest", crate::writes::DELETE_KEYS.to_vec()),
            ("SnapshotRequest", crate::writes::SNAPSHOT_KEYS.to_vec()),
        ];
        assert_eq!(cases.len(), CLOSED_REQUESTS.len());
        for (schema, keys) in cases {
            assert_eq!(
                props(&d, schema),
                sorted(&keys),
                "schema {schema} and its parser's keys differ"
            );
            assert_eq!(
                d["components"]["schemas"][schema]["additionalProperties"], false,
                "{schema}: its parser refuses other keys, so must its schema (CLOSED_REQUESTS)"
            );
        }
        // serde-parsed bodies carry their schema derive: it names their fields.
        for s in [
            "CreateBody",
            "IndexBody",
            "MappingBody",
            "PutMappingBody",
            "ReloadBody",
        ] {
            assert!(!props(&d, s).is_empty(), "{s}");
        }
    }
}
