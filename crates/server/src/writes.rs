//! Write routes (CONTRACTS.md "Version 2", writes and snapshot):
//!
//! - `POST /collections/{name}/docs` `{"docs": [{"id", "text"?, "vector"?, "fields"?}], "wait"?}`
//!   upserts (insert or replace by id). A document without a vector is embedded from its
//!   text with the server's `--model` (which must be the collection's).
//! - `DELETE /collections/{name}/docs/{id}[?wait=true]`
//! - `POST /collections/{name}/delete` `{"ids": [...]}` or `{"filter": {...}}`, `"wait"?`
//! - `POST /collections/{name}/snapshot` `{"path"?}` (an admin route: token or loopback)
//!
//! Replies: `{"seq", "status": "acknowledged" | "applied", ...}`. Acknowledged means in the
//! write-ahead log (and synced per `--fsync`); applied means visible to searches.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use searchd_collection::DocId;
use serde_json::Value;

use crate::backend::{Receipt, WriteOp};
use crate::error::{ApiError, Code};
use crate::query::{backend_error, backend_of, parse_delete_filter};
use crate::state::App;
use crate::upsert::{delete_by_id, upsert_docs, Incoming};
use crate::wire::{authorize, json_error, json_response, read_body_limit};

pub use crate::upsert::MAX_DOCS_PER_WRITE;

/// The keys of an upsert's body.
pub(crate) const UPSERT_KEYS: &[&str] = &["docs", "wait"];
/// The keys of a document of an upsert.
pub(crate) const DOC_KEYS: &[&str] = &["id", "text", "vector", "fields"];
/// The keys of a delete's body.
pub(crate) const DELETE_KEYS: &[&str] = &["ids", "filter", "wait"];
/// The keys of a snapshot's body.
pub(crate) const SNAPSHOT_KEYS: &[&str] = &["path"];

fn receipt_json(r: &Receipt, took: Duration) -> Vec<u8> {
    let mut v = serde_json::json!({
        "seq": r.seq,
        "status": if r.applied { "applied" } else { "acknowledged" },
        "took_ms": crate::wire::ms(took),
    });
    if let Some(o) = v.as_object_mut() {
        if r.upserted > 0 {
            o.insert("upserted".into(), r.upserted.into());
        } else {
            o.insert("deleted".into(), r.deleted.into());
            o.insert(
                "not_found".into(),
                serde_json::to_value(&r.not_found).unwrap_or(Value::Null),
            );
        }
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

fn parse_id(v: &Value, at: &str) -> Result<DocId, ApiError> {
    match v {
        Value::Number(n) => n.as_u64().map(DocId::Int).ok_or_else(|| {
            ApiError::invalid(format!(
                "{at} must be a non-negative integer or a string, got {n}"
            ))
        }),
        Value::String(s) if s.is_empty() => Err(ApiError::invalid(format!("{at} is empty"))),
        Value::String(s) => Ok(DocId::Str(s.clone())),
        Value::Null => Err(ApiError::invalid(format!("{at} is missing"))),
        other => Err(ApiError::invalid(format!(
            "{at} must be a non-negative integer or a string, got {other}"
        ))),
    }
}

fn parse_wait(v: Option<&Value>) -> Result<bool, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ApiError::invalid(format!(
            "wait must be true or false, got {other}"
        ))),
    }
}

fn body_object(body: &[u8], known: &[&str]) -> Result<serde_json::Map<String, Value>, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| json_error(e, body))?;
    let Value::Object(o) = v else {
        return Err(ApiError::invalid("the body must be a JSON object"));
    };
    if let Some(k) = o.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "unknown field {k:?} (expected {})",
            known.join(", ")
        )));
    }
    Ok(o)
}

fn parse_doc(v: &Value, i: usize, text_field: Option<&str>) -> Result<Incoming, ApiError> {
    let at = format!("docs[{i}]");
    let Value::Object(o) = v else {
        return Err(ApiError::invalid(format!("{at} must be an object")));
    };
    if let Some(k) = o.keys().find(|k| !DOC_KEYS.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "{at}: unknown field {k:?} (a document has id, text, vector and fields)"
        )));
    }
    let id = parse_id(o.get("id").unwrap_or(&Value::Null), &format!("{at}.id"))?;
    let vector = match o.get("vector") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for (j, x) in a.iter().enumerate() {
                let f = x.as_f64().ok_or_else(|| {
                    ApiError::invalid(format!("{at}.vector[{j}] is not a number"))
                })?;
                out.push(f as f32);
            }
            Some(out)
        }
        Some(_) => {
            return Err(ApiError::invalid(format!(
                "{at}.vector must be an array of numbers"
            )))
        }
    };
    let text = match o.get("text") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::invalid(format!("{at}.text must be a string"))),
    };
    let mut fields = match o.get("fields") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(f)) => f.clone(),
        Some(_) => return Err(ApiError::invalid(format!("{at}.fields must be an object"))),
    };
    if let (Some(t), Some(tf)) = (&text, text_field) {
        fields.insert(tf.to_string(), Value::String(t.clone()));
    }
    let text = text.or_else(|| {
        text_field
            .and_then(|tf| fields.get(tf))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    });
    Ok(Incoming {
        id,
        vector,
        text,
        fields,
    })
}

/// `POST /collections/{name}/docs`
pub(crate) async fn upsert(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    let t = Instant::now();
    match upsert_inner(&app, &name, req, t).await {
        Ok(b) => json_response(StatusCode::OK, b),
        Err(e) => e.into_response(),
    }
}

async fn upsert_inner(
    app: &App,
    name: &str,
    req: Request,
    t: Instant,
) -> Result<Vec<u8>, ApiError> {
    let slot = app.slot(name)?;
    let body = read_body_limit(app, req, app.cfg.write_body_limit).await?;
    let backend = backend_of(&slot)?;
    let o = body_object(&body, UPSERT_KEYS)?;
    let wait = parse_wait(o.get("wait"))?;
    let Some(Value::Array(docs)) = o.get("docs") else {
        return Err(ApiError::invalid("docs must be an array of documents"));
    };
    if docs.is_empty() {
        return Err(ApiError::invalid("docs is empty: nothing to write"));
    }
    if docs.len() > MAX_DOCS_PER_WRITE {
        return Err(ApiError::invalid(format!(
            "{} documents in one request; at most {MAX_DOCS_PER_WRITE}",
            docs.len()
        )));
    }
    let text_field = backend.text_field();
    let mut incoming = Vec::with_capacity(docs.len());
    for (i, d) in docs.iter().enumerate() {
        incoming.push(parse_doc(d, i, text_field.as_deref())?);
    }
    let r = upsert_docs(app, &slot, &**backend, incoming, wait).await?;
    Ok(receipt_json(&r, t.elapsed()))
}

/// `?wait=true|false` of a query string (absent: false).
fn wait_of(uri: &Uri) -> Result<bool, ApiError> {
    let mut wait = false;
    for kv in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|s| !s.is_empty())
    {
        let (k, v) = kv.split_once('=').unwrap_or((kv, "true"));
        wait = match (k, v) {
            ("wait", "true") | ("wait", "") => true,
            ("wait", "false") => false,
            ("wait", other) => {
                return Err(ApiError::invalid(format!(
                    "wait must be true or false, got {other:?}"
                )))
            }
            // Output only (the router indents the reply).
            ("pretty", _) => wait,
            (other, _) => {
                return Err(ApiError::invalid(format!(
                    "unknown query parameter {other:?} (expected wait)"
                )))
            }
        };
    }
    Ok(wait)
}

/// `DELETE /collections/{name}/docs/{id}`
pub(crate) async fn delete_one(
    State(app): State<Arc<App>>,
    Path((name, id)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    let t = Instant::now();
    let r = async {
        let wait = wait_of(&uri)?;
        let slot = app.slot(&name)?;
        let backend = backend_of(&slot)?;
        if id.is_empty() {
            return Err(ApiError::invalid("the document id is empty"));
        }
        let r = delete_by_id(&app, &slot, &**backend, DocId::Str(id.clone()), wait).await?;
        Ok(receipt_json(&r, t.elapsed()))
    }
    .await;
    match r {
        Ok(b) => json_response(StatusCode::OK, b),
        Err(e) => e.into_response(),
    }
}

/// `POST /collections/{name}/delete`
pub(crate) async fn delete_many(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    let t = Instant::now();
    let r = async {
        let slot = app.slot(&name)?;
        let body = read_body_limit(&app, req, app.cfg.write_body_limit).await?;
        let backend = backend_of(&slot)?;
        let o = body_object(&body, DELETE_KEYS)?;
        let wait = parse_wait(o.get("wait"))?;
        let op = match (o.get("ids"), o.get("filter")) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid("give ids or filter, not both"));
            }
            (Some(Value::Array(ids)), None) => {
                if ids.is_empty() {
                    return Err(ApiError::invalid("ids is empty: nothing to delete"));
                }
                let mut out = Vec::with_capacity(ids.len());
                for (i, v) in ids.iter().enumerate() {
                    out.push(parse_id(v, &format!("ids[{i}]"))?);
                }
                WriteOp::Delete(out)
            }
            (Some(_), None) => return Err(ApiError::invalid("ids must be an array of ids")),
            (None, Some(f)) => WriteOp::DeleteFilter(parse_delete_filter(&backend.schema(), f)?),
            (None, None) => return Err(ApiError::invalid("give ids or filter")),
        };
        let r = backend
            .write(op, wait)
            .await
            .map_err(|e| backend_error(&app, e))?;
        app.changed(&slot).await;
        Ok(receipt_json(&r, t.elapsed()))
    }
    .await;
    match r {
        Ok(b) => json_response(StatusCode::OK, b),
        Err(e) => e.into_response(),
    }
}

/// Refuse a snapshot path inside the directory of a live collection (this one's or
/// another's): its start-up would take the snapshot for debris, and its own snapshots would
/// copy it.
fn outside_live_dirs(app: &App, out: &std::path::Path) -> Result<(), ApiError> {
    for s in app.slots().iter() {
        let Some(w) = s.backend.load_full().and_then(|b| b.writer()) else {
            continue;
        };
        if searchd_collection::paths::is_inside(out, w.dir()).unwrap_or(false) {
            return Err(ApiError::invalid(format!(
                "path {} is inside the collection directory {} (of collection {:?}); write snapshots outside it (by default they go to {}.snapshots beside it)",
                out.display(),
                w.dir().display(),
                s.name,
                w.dir().display()
            )));
        }
    }
    Ok(())
}

/// `POST /collections/{name}/snapshot`: written next to the collection
/// (`DIR.snapshots/NAME-SEQ-UNIXMS`, so hard links work) unless `path` names a place
/// inside the reload root.
pub(crate) async fn snapshot(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    let t = Instant::now();
    let r = async {
        authorize(&app, &req)?;
        let slot = app.slot(&name)?;
        // A body-less POST (`curl -X POST .../snapshot`) needs no Content-Type.
        let has_body = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .is_some_and(|v| v != "0")
            || req
                .headers()
                .contains_key(axum::http::header::TRANSFER_ENCODING);
        let body = if has_body {
            read_body_limit(&app, req, app.cfg.body_limit).await?
        } else {
            bytes::Bytes::new()
        };
        let backend = backend_of(&slot)?;
        let o = if body.is_empty() {
            serde_json::Map::new()
        } else {
            body_object(&body, SNAPSHOT_KEYS)?
        };
        let info = backend.info();
        let dir = std::path::PathBuf::from(info["path"].as_str().unwrap_or("."));
        let out = match o.get("path") {
            None | Some(Value::Null) => {
                let ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                let mut base = dir.clone().into_os_string();
                base.push(".snapshots");
                let out = std::path::PathBuf::from(base).join(format!(
                    "{}-{}-{ms}",
                    slot.name,
                    backend.version()
                ));
                outside_live_dirs(&app, &out)?;
                out
            }
            Some(Value::String(p)) => {
                let p = std::path::PathBuf::from(p);
                searchd_collection::paths::check_nul(&p)
                    .map_err(|e| ApiError::invalid(format!("path: {e}")))?;
                let root = app.cfg.reload_root.clone();
                let abs = match &root {
                    Some(r) if p.is_relative() => r.join(&p),
                    _ => p.clone(),
                };
                outside_live_dirs(&app, &abs)?;
                let parent = abs.parent().map(|x| x.to_path_buf()).unwrap_or_default();
                let ok = match (&root, parent.canonicalize()) {
                    (Some(r), Ok(c)) => c.starts_with(r),
                    (None, Ok(_)) => true,
                    _ => false,
                };
                if !ok {
                    return Err(ApiError::new(
                        Code::Forbidden,
                        "path must be inside the reload root (an existing directory there)",
                    ));
                }
                abs
            }
            Some(_) => return Err(ApiError::invalid("path must be a string")),
        };
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| ApiError::new(Code::Internal, format!("{}: {e}", parent.display())))?;
        }
        let seq = backend
            .snapshot(out.clone())
            .await
            .map_err(|e| backend_error(&app, e))?;
        let v = serde_json::json!({
            "path": out,
            "seq": seq,
            "took_ms": crate::wire::ms(t.elapsed()),
        });
        Ok(serde_json::to_vec(&v).unwrap_or_default())
    }
    .await;
    match r {
        Ok(b) => json_response(StatusCode::OK, b),
        Err(e) => e.into_response(),
    }
}
