//! Elasticsearch-shaped writes and index metadata, so applications and the official clients
//! written for Elasticsearch can point at searchd (CONTRACTS.md "What a user sees"):
//!
//! - `PUT|POST /{index}/_doc/{id}` indexes one document (its body is the `_source`),
//!   `DELETE /{index}/_doc/{id}` deletes one;
//! - `POST /_bulk` and `POST /{index}/_bulk` (NDJSON: `index`, `create`, `update` with `doc`,
//!   `delete`), applied in order: consecutive upserts to one index go as one write;
//! - `GET /{index}`, `GET /{index}/_mapping`, `GET /_cat/indices`, and `GET /` for a client
//!   that asks for Elasticsearch's media type (the root shape, `version.number` 8.x).
//!
//! A `_source` becomes a searchd document: its one top-level array of `dim` numbers (any
//! name, as `knn.field` is any name) is the vector and is not stored; without one, the
//! collection's text field is embedded by the server's `--model`. `?refresh=true` or
//! `wait_for` waits until the write is visible (`"wait": true`); without it the reply comes
//! once the write is logged. Every reply of these routes (and of `es.rs`'s) carries
//! `X-Elastic-Product: Elasticsearch`, which the official clients check
//! ([`crate::router`] adds it).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use searchd_collection::DocId;
use serde_json::{json, Map, Value};

use crate::backend::{BackendError, FieldsWanted, SearchBackend};
use crate::error::{ApiError, Code};
use crate::query::{backend_error, backend_of};
use crate::state::{App, Slot};
use crate::upsert::{delete_by_id, upsert_docs, Incoming};
use crate::wire::json_response;

/// The Elasticsearch version searchd's root answers with (the 8.x wire shapes it speaks).
pub const ES_VERSION: &str = "8.15.0";

/// Most operations one `_bulk` may carry (as the native upsert's documents).
pub const MAX_BULK_OPS: usize = crate::upsert::MAX_DOCS_PER_WRITE;

fn ok(status: StatusCode, v: &Value) -> Response {
    json_response(status, serde_json::to_vec(v).unwrap_or_default())
}

/// `?refresh=` (and `?pretty`, `?timeout`, ignored as harmless) of a write; anything else
/// is a 400 naming it.
fn refresh_of(uri: &Uri) -> Result<bool, ApiError> {
    let mut wait = false;
    for kv in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|s| !s.is_empty())
    {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "refresh" => {
                wait = match v {
                    "" | "true" | "wait_for" => true,
                    "false" => false,
                    other => {
                        return Err(ApiError::invalid(format!(
                            "refresh must be true, false or wait_for, got {other:?}"
                        )))
                    }
                }
            }
            "pretty" | "timeout" | "error_trace" | "human" => {}
            other => {
                return Err(ApiError::invalid(format!(
                    "query parameter {other:?} is not supported here (refresh is)"
                )))
            }
        }
    }
    Ok(wait)
}

/// An id from a URL or an action line: the collection's canonical form is applied by the
/// write (`"777"` is 777 in an integer-id collection).
fn id_of(s: &str) -> Result<DocId, ApiError> {
    if s.is_empty() || s.len() > 512 {
        return Err(ApiError::invalid("a document id is 1 to 512 bytes"));
    }
    Ok(DocId::Str(s.to_string()))
}

/// A `_source` as a searchd document (see the module documentation).
fn doc_of(
    id: DocId,
    mut src: Map<String, Value>,
    dim: usize,
    text_field: Option<&str>,
) -> Result<Incoming, ApiError> {
    let vector_keys: Vec<String> = src
        .iter()
        .filter(|(_, v)| {
            v.as_array()
                .is_some_and(|a| a.len() == dim && a.iter().all(Value::is_number))
        })
        .map(|(k, _)| k.clone())
        .collect();
    let vector = match vector_keys.as_slice() {
        [] => None,
        [k] => {
            let a = src.remove(k).unwrap_or(Value::Null);
            let mut v = Vec::with_capacity(dim);
            for x in a.as_array().into_iter().flatten() {
                match x.as_f64().filter(|f| f.is_finite() && f.abs() <= f32::MAX as f64) {
                    Some(f) => v.push(f as f32),
                    None => {
                        return Err(ApiError::invalid(format!(
                            "{k}: the vector's values must be finite numbers"
                        )))
                    }
                }
            }
            Some(v)
        }
        many => {
            return Err(ApiError::invalid(format!(
                "the document has {} arrays of {dim} numbers ({}): searchd takes one vector per document",
                many.len(),
                many.join(", ")
            )))
        }
    };
    let text = text_field
        .and_then(|tf| src.get(tf))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Incoming {
        id,
        vector,
        text,
        fields: src,
    })
}

/// Elasticsearch's error body for a refused `_bulk` item.
fn es_error(e: &ApiError) -> Value {
    let kind = match e.code {
        Code::InvalidArgument | Code::InvalidJson => "mapper_parsing_exception",
        code => es_error_type(code),
    };
    json!({"type": kind, "reason": e.message})
}

/// Elasticsearch's `error.type` for a reply of `code` (what its clients read to tell
/// errors apart; the HTTP status picks their exception class).
pub(crate) fn es_error_type(code: Code) -> &'static str {
    match code {
        Code::InvalidJson => "x_content_parse_exception",
        Code::InvalidArgument | Code::BadRequest => "illegal_argument_exception",
        Code::NotFound => "index_not_found_exception",
        Code::Conflict => "version_conflict_engine_exception",
        Code::Unauthorized | Code::Forbidden => "security_exception",
        Code::Overloaded | Code::NotReady | Code::ShuttingDown => "es_rejected_execution_exception",
        Code::DeadlineExceeded | Code::RequestTimeout => "timeout_exception",
        Code::BodyTooLarge => "content_too_long_exception",
        Code::UnsupportedMediaType => "media_type_header_exception",
        Code::MethodNotAllowed => "method_not_allowed_exception",
        _ => "exception",
    }
}

fn item(index: &str, id: &str, seq: u64, result: &str, status: u16) -> Value {
    json!({
        "_index": index, "_id": id, "_version": 1, "result": result,
        "_shards": {"total": 1, "successful": 1, "failed": 0},
        "_seq_no": seq, "_primary_term": 1, "status": status,
    })
}

async fn exists(app: &App, backend: &dyn SearchBackend, id: &DocId) -> Result<bool, ApiError> {
    match backend.get(id.clone(), FieldsWanted::None).await {
        Ok(_) => Ok(true),
        Err(BackendError::NotFound(_)) => Ok(false),
        Err(e) => Err(backend_error(app, e)),
    }
}

/// A served collection and its backend.
type Served = (Arc<Slot>, Arc<Box<dyn SearchBackend>>);

fn slot_and_backend(app: &App, index: &str) -> Result<Served, ApiError> {
    let slot = app.slot(index)?;
    let backend = backend_of(&slot)?;
    Ok((slot, backend))
}

/// `PUT|POST /{index}/_doc/{id}`
pub(crate) async fn index_doc(
    State(app): State<Arc<App>>,
    Path((index, id)): Path<(String, String)>,
    uri: Uri,
    req: Request,
) -> Result<Response, ApiError> {
    let wait = refresh_of(&uri)?;
    let (slot, backend) = slot_and_backend(&app, &index)?;
    let body = crate::wire::read_body_limit(&app, req, app.cfg.write_body_limit).await?;
    let src: Map<String, Value> = match serde_json::from_slice(&body) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(ApiError::invalid("the document must be a JSON object")),
        Err(e) => return Err(crate::wire::json_error(e, &body)),
    };
    let doc_id = id_of(&id)?;
    let (_, dim, _) = backend.figures();
    let doc = doc_of(doc_id.clone(), src, dim, backend.text_field().as_deref())?;
    let existed = exists(&app, &**backend, &doc_id).await?;
    let r = upsert_docs(&app, &slot, &**backend, vec![doc], wait).await?;
    let (result, status) = if existed {
        ("updated", StatusCode::OK)
    } else {
        ("created", StatusCode::CREATED)
    };
    Ok(single(&index, &id, r.seq, result, status))
}

/// The reply of a single-document write: a `_bulk` item without its `status`.
fn single(index: &str, id: &str, seq: u64, result: &str, status: StatusCode) -> Response {
    let mut v = item(index, id, seq, result, status.as_u16());
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    ok(status, &v)
}

/// `DELETE /{index}/_doc/{id}`
pub(crate) async fn delete_doc(
    State(app): State<Arc<App>>,
    Path((index, id)): Path<(String, String)>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let wait = refresh_of(&uri)?;
    let (slot, backend) = slot_and_backend(&app, &index)?;
    let r = delete_by_id(&app, &slot, &**backend, id_of(&id)?, wait).await?;
    let (result, status) = if r.deleted > 0 {
        ("deleted", StatusCode::OK)
    } else {
        ("not_found", StatusCode::NOT_FOUND)
    };
    Ok(single(&index, &id, r.seq, result, status))
}

/// One parsed `_bulk` operation.
enum BulkOp {
    /// `index` (`create: false`) or `create`: the whole `_source`.
    Put {
        create: bool,
        src: Map<String, Value>,
    },
    /// `update` with `doc`: merged into the stored `_source`.
    Update(Map<String, Value>),
    Delete,
}

struct Bulk {
    action: &'static str,
    index: String,
    id: String,
    op: BulkOp,
}

fn parse_bulk(body: &[u8], default_index: Option<&str>) -> Result<Vec<Bulk>, ApiError> {
    let text =
        std::str::from_utf8(body).map_err(|_| ApiError::invalid("the _bulk body is not UTF-8"))?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let mut out = Vec::new();
    while let Some((n, line)) = lines.next() {
        if out.len() >= MAX_BULK_OPS {
            return Err(ApiError::invalid(format!(
                "more than {MAX_BULK_OPS} operations in one _bulk; split it"
            )));
        }
        let at = |what: &str| ApiError::invalid(format!("_bulk line {}: {what}", n + 1));
        let action: Map<String, Value> = match serde_json::from_str(line) {
            Ok(Value::Object(m)) if m.len() == 1 => m,
            _ => return Err(at(
                "an action line is one object: {\"index\"|\"create\"|\"update\"|\"delete\": {...}}",
            )),
        };
        let (name, meta) = action.into_iter().next().unwrap_or_default();
        let action: &'static str = match name.as_str() {
            "index" => "index",
            "create" => "create",
            "update" => "update",
            "delete" => "delete",
            other => return Err(at(&format!("unknown action {other:?}"))),
        };
        let Some(meta) = meta.as_object() else {
            return Err(at("the action's metadata must be an object"));
        };
        if let Some(k) = meta
            .keys()
            .find(|k| !["_index", "_id"].contains(&k.as_str()))
        {
            return Err(at(&format!("{k} is not supported (_index and _id are)")));
        }
        let index = match (meta.get("_index").and_then(Value::as_str), default_index) {
            (Some(i), _) => i.to_string(),
            (None, Some(d)) => d.to_string(),
            (None, None) => return Err(at("no _index (and none in the URL)")),
        };
        let id = match meta.get("_id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return Err(at("an _id is needed (searchd does not make ids)")),
        };
        let op = if action == "delete" {
            BulkOp::Delete
        } else {
            let Some((m, src)) = lines.next() else {
                return Err(at("the action has no source line after it"));
            };
            let src: Map<String, Value> = match serde_json::from_str(src) {
                Ok(Value::Object(o)) => o,
                _ => {
                    return Err(ApiError::invalid(format!(
                        "_bulk line {}: the source must be a JSON object",
                        m + 1
                    )))
                }
            };
            match action {
                "update" => {
                    if let Some(k) = src.keys().find(|k| k.as_str() != "doc") {
                        return Err(ApiError::invalid(format!(
                            "_bulk line {}: update takes {{\"doc\": {{...}}}}; {k} is not supported",
                            m + 1
                        )));
                    }
                    match src.get("doc") {
                        Some(Value::Object(d)) => BulkOp::Update(d.clone()),
                        _ => {
                            return Err(ApiError::invalid(format!(
                                "_bulk line {}: update needs \"doc\": an object",
                                m + 1
                            )))
                        }
                    }
                }
                _ => BulkOp::Put {
                    create: action == "create",
                    src,
                },
            }
        };
        out.push(Bulk {
            action,
            index,
            id,
            op,
        });
    }
    if out.is_empty() {
        return Err(ApiError::invalid("the _bulk body has no operation"));
    }
    Ok(out)
}

/// The NDJSON body of `_bulk` (`application/x-ndjson`, JSON, or the Elasticsearch client's
/// `application/vnd.elasticsearch+x-ndjson`).
async fn read_ndjson(app: &App, req: Request) -> Result<bytes::Bytes, ApiError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let fine = ct == "application/x-ndjson"
        || ct == "application/json"
        || (ct.starts_with("application/") && (ct.ends_with("+x-ndjson") || ct.ends_with("+json")));
    if !fine {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            format!("_bulk takes Content-Type: application/x-ndjson, got {ct:?}"),
        ));
    }
    crate::limits::read_body(
        &app.limits,
        app.cfg.read_timeout,
        req,
        app.cfg.write_body_limit,
    )
    .await
}

/// `POST /_bulk`
pub(crate) async fn bulk_any(
    State(app): State<Arc<App>>,
    uri: Uri,
    req: Request,
) -> Result<Response, ApiError> {
    bulk(app, None, uri, req).await
}

/// `POST /{index}/_bulk`
pub(crate) async fn bulk_index(
    State(app): State<Arc<App>>,
    Path(index): Path<String>,
    uri: Uri,
    req: Request,
) -> Result<Response, ApiError> {
    bulk(app, Some(index), uri, req).await
}

async fn bulk(
    app: Arc<App>,
    index: Option<String>,
    uri: Uri,
    req: Request,
) -> Result<Response, ApiError> {
    let t = Instant::now();
    let wait = refresh_of(&uri)?;
    if let Some(i) = &index {
        app.slot(i)?;
    }
    let caller = req.extensions().get::<crate::auth::Caller>().cloned();
    let body = read_ndjson(&app, req).await?;
    let ops = parse_bulk(&body, index.as_deref())?;
    // With API keys, every index the lines name must be one the key may write (the gate
    // checked the URL's only).
    if let Some(c) = &caller {
        if let Some(o) = ops.iter().find(|o| !c.may_write(&o.index)) {
            return Err(ApiError::new(
                Code::Forbidden,
                format!("key {:?} may not write index {:?}", c.key, o.index),
            ));
        }
    }
    let mut items: Vec<Option<Value>> = vec![None; ops.len()];
    let mut i = 0;
    while i < ops.len() {
        // A run: consecutive index/create/update ops on one index, or one delete.
        let mut j = i + 1;
        if !matches!(ops[i].op, BulkOp::Delete) {
            while j < ops.len()
                && ops[j].index == ops[i].index
                && !matches!(ops[j].op, BulkOp::Delete)
                && !ops[i..j].iter().any(|o| o.id == ops[j].id)
            {
                j += 1;
            }
        }
        let run = &ops[i..j];
        let results = apply_run(&app, run, wait).await;
        for (k, r) in results.into_iter().enumerate() {
            let o = &run[k];
            items[i + k] = Some(match r {
                Ok((seq, result, status)) => {
                    json!({ o.action: item(&o.index, &o.id, seq, result, status) })
                }
                Err(e) => json!({ o.action: {
                    "_index": o.index, "_id": o.id, "status": e.code.status().as_u16(), "error": es_error(&e),
                }}),
            });
        }
        i = j;
    }
    let errors = items.iter().flatten().any(|v| {
        v.as_object()
            .and_then(|o| o.values().next())
            .is_some_and(|x| x.get("error").is_some())
    });
    Ok(ok(
        StatusCode::OK,
        &json!({
            "took": t.elapsed().as_millis() as u64,
            "errors": errors,
            "items": items.into_iter().flatten().collect::<Vec<_>>(),
        }),
    ))
}

type ItemResult = Result<(u64, &'static str, u16), ApiError>;

/// Apply one run of `_bulk` operations: per-item checks, then one write.
async fn apply_run(app: &App, run: &[Bulk], wait: bool) -> Vec<ItemResult> {
    let all = |e: ApiError| run.iter().map(|_| Err(e.clone())).collect::<Vec<_>>();
    let (slot, backend) = match slot_and_backend(app, &run[0].index) {
        Ok(x) => x,
        Err(e) => return all(e),
    };
    if let BulkOp::Delete = run[0].op {
        let o = &run[0];
        let r = async {
            let r = delete_by_id(app, &slot, &**backend, id_of(&o.id)?, wait).await?;
            Ok(if r.deleted > 0 {
                (r.seq, "deleted", 200)
            } else {
                (r.seq, "not_found", 404)
            })
        }
        .await;
        return vec![r];
    }
    let (_, dim, _) = backend.figures();
    let text_field = backend.text_field();
    let mut out: Vec<ItemResult> = Vec::with_capacity(run.len());
    let mut docs = Vec::new();
    let mut which = Vec::new();
    for (k, o) in run.iter().enumerate() {
        let r = async {
            let id = id_of(&o.id)?;
            let existed = exists(app, &**backend, &id).await?;
            let doc = match &o.op {
                BulkOp::Put { create: true, .. } if existed => {
                    return Err(ApiError::new(
                        Code::Conflict,
                        format!("[{}]: version conflict, document already exists", o.id),
                    ))
                }
                BulkOp::Put { src, .. } => doc_of(id, src.clone(), dim, text_field.as_deref())?,
                BulkOp::Update(part) => {
                    update_doc(app, &**backend, id, part, dim, text_field.as_deref()).await?
                }
                BulkOp::Delete => unreachable_delete()?,
            };
            Ok((doc, existed))
        }
        .await;
        match r {
            Ok((doc, existed)) => {
                docs.push(doc);
                which.push(k);
                out.push(Ok((
                    0,
                    if existed { "updated" } else { "created" },
                    if existed { 200 } else { 201 },
                )));
            }
            Err(e) => out.push(Err(e)),
        }
    }
    if docs.is_empty() {
        return out;
    }
    match upsert_docs(app, &slot, &**backend, docs, wait).await {
        Ok(r) => {
            for k in which {
                if let Ok((seq, _, _)) = &mut out[k] {
                    *seq = r.seq;
                }
            }
        }
        Err(e) => {
            for k in which {
                out[k] = Err(e.clone());
            }
        }
    }
    out
}

fn unreachable_delete() -> Result<Incoming, ApiError> {
    Err(ApiError::new(Code::Internal, "a delete in an upsert run"))
}

/// `update` with `doc`: the stored `_source` with `part`'s keys replaced; the stored vector
/// unless `part` brings one (or changes the text, which is embedded again).
async fn update_doc(
    app: &App,
    backend: &dyn SearchBackend,
    id: DocId,
    part: &Map<String, Value>,
    dim: usize,
    text_field: Option<&str>,
) -> Result<Incoming, ApiError> {
    let stored = match backend.get(id.clone(), FieldsWanted::All).await {
        Ok(d) => d,
        Err(BackendError::NotFound(_)) => {
            return Err(ApiError::new(
                Code::NotFound,
                format!(
                    "[{}]: document missing",
                    match &id {
                        DocId::Int(v) => v.to_string(),
                        DocId::Str(s) => s.clone(),
                    }
                ),
            ))
        }
        Err(e) => return Err(backend_error(app, e)),
    };
    let mut src: Map<String, Value> = serde_json::from_slice(&stored.fields).unwrap_or_default();
    let text_changed = text_field.is_some_and(|tf| part.contains_key(tf));
    for (k, v) in part {
        src.insert(k.clone(), v.clone());
    }
    let mut doc = doc_of(stored.id.clone(), src, dim, text_field)?;
    if doc.vector.is_none() && !text_changed {
        // Keep the stored vector (a live collection of this server has it).
        let v = backend.writer().and_then(|live| {
            let view = live.view();
            let r = view.lookup(&stored.id)?;
            view.vector(r).ok().flatten().map(|c| c.into_owned())
        });
        match v {
            Some(v) => doc.vector = Some(v),
            None if doc.text.is_some() => {}
            None => {
                return Err(ApiError::invalid(
                    "update: this backend cannot give back the stored vector; send the vector (or the text to embed) in doc",
                ))
            }
        }
    }
    Ok(doc)
}

// ---------------------------------------------------------------------------------------
// GET /{index}, /{index}/_mapping, /_cat/indices, /

/// The collection's mapping in Elasticsearch's words.
fn es_mapping(backend: &dyn SearchBackend) -> Value {
    let schema = backend.schema();
    let mut props = Map::new();
    for f in &schema.fields {
        let ty = match f.ty {
            searchd_fields::FieldType::Keyword => "keyword",
            searchd_fields::FieldType::Integer => "long",
            searchd_fields::FieldType::Float => "double",
            searchd_fields::FieldType::Bool => "boolean",
            searchd_fields::FieldType::Datetime => "date",
        };
        props.insert(f.name.clone(), json!({"type": ty}));
    }
    if let Some(tf) = backend.text_field() {
        props.insert(tf, json!({"type": "text"}));
    }
    let (_, dim, _) = backend.figures();
    let info = backend.info();
    let similarity = match info["metric"].as_str().or(info["index"]["metric"].as_str()) {
        Some("l2") => "l2_norm",
        Some("ip") => "max_inner_product",
        _ => "cosine",
    };
    props.insert(
        "vector".into(),
        json!({"type": "dense_vector", "dims": dim, "index": true, "similarity": similarity}),
    );
    json!({"properties": props})
}

/// `GET /{index}/_mapping`
pub(crate) async fn get_mapping(
    State(app): State<Arc<App>>,
    Path(index): Path<String>,
) -> Result<Response, ApiError> {
    let (_, backend) = slot_and_backend(&app, &index)?;
    Ok(ok(
        StatusCode::OK,
        &json!({ index.as_str(): {"mappings": es_mapping(&**backend)} }),
    ))
}

/// `GET /{index}`
pub(crate) async fn get_index(
    State(app): State<Arc<App>>,
    Path(index): Path<String>,
) -> Result<Response, ApiError> {
    let (_, backend) = slot_and_backend(&app, &index)?;
    Ok(ok(
        StatusCode::OK,
        &json!({ index.as_str(): {
            "aliases": {},
            "mappings": es_mapping(&**backend),
            "settings": {"index": {"number_of_shards": "1", "number_of_replicas": "0", "provided_name": index}},
        }}),
    ))
}

/// `GET /_cat/indices` (`?format=json`, else a text table).
pub(crate) async fn cat_indices(State(app): State<Arc<App>>, uri: Uri) -> Response {
    let json_format = uri
        .query()
        .unwrap_or("")
        .split('&')
        .any(|kv| kv == "format=json");
    let rows: Vec<Value> = app
        .slots()
        .iter()
        .map(|s| {
            let (health, docs, bytes) = match s.backend.load_full() {
                Some(b) => {
                    let (n, _, bytes) = b.figures();
                    ("green", n, bytes)
                }
                None => ("red", 0, 0),
            };
            json!({
                "health": health, "status": "open", "index": s.name, "uuid": s.name,
                "pri": "1", "rep": "0", "docs.count": docs.to_string(), "docs.deleted": "0",
                "store.size": bytes.to_string(), "pri.store.size": bytes.to_string(),
            })
        })
        .collect();
    if json_format {
        return ok(StatusCode::OK, &Value::Array(rows));
    }
    let mut text = String::new();
    for r in &rows {
        text.push_str(&format!(
            "{} {} {} {} 1 0 {} 0 {}\n",
            r["health"].as_str().unwrap_or(""),
            r["status"].as_str().unwrap_or(""),
            r["index"].as_str().unwrap_or(""),
            r["uuid"].as_str().unwrap_or(""),
            r["docs.count"].as_str().unwrap_or(""),
            r["store.size"].as_str().unwrap_or(""),
        ));
    }
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// Whether a request asks for Elasticsearch's media type (the official clients do).
pub(crate) fn wants_es(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/vnd.elasticsearch+json"))
}

/// `GET /` for an Elasticsearch client: the root shape.
pub(crate) fn es_root() -> Response {
    ok(
        StatusCode::OK,
        &json!({
            "name": "searchd",
            "cluster_name": "searchd",
            "cluster_uuid": "searchd",
            "version": {
                "number": ES_VERSION,
                "build_flavor": "default",
                "build_type": "searchd",
                "build_hash": env!("CARGO_PKG_VERSION"),
                "lucene_version": "n/a",
                "minimum_wire_compatibility_version": "7.17.0",
                "minimum_index_compatibility_version": "7.0.0",
            },
            "tagline": "You Know, for Search",
        }),
    )
}
