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
pub(crate) mod schemas;

#[cfg(test)]
mod tests;
