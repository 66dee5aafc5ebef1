//! Collections managed over HTTP: `POST /collections` creates one, `DELETE
//! /collections/{name}` deletes one, `PUT /collections/{name}/mapping` adds field indexes
//! (built in the background; `/stats` `collections.NAME.live.fields_build` shows progress).
//!
//! - **Where**: collections created over HTTP live in `serve --data-dir` (default: the
//!   reload root), each in `DIR/NAME`, and are listed in the registry `DIR/searchd-collections.json`
//!   (written to a temporary file, synced and renamed), which start-up reads to serve them
//!   again after the command line's collections. Only collections in the registry can be
//!   deleted over HTTP; those named on the command line are the operator's.
//! - **Who**: like `/admin/reload`, with API keys the key's scope decides (create: write,
//!   not limited to collections; delete: admin; mapping: write on the collection); without
//!   keys, a loopback peer or `--admin-token`.
//! - **One at a time**: creates, deletes and reloads take the same turn (409 while another
//!   runs), so two requests cannot race for a name or a directory.
//! - **Crash safety**: a create writes the directory (staged and renamed whole) and then
//!   the registry; a crash between leaves a directory the registry does not list, which a
//!   create of that name refuses (409 naming it) rather than adopt unknown data. A delete
//!   first renames the directory to `DIR/.deleted-NAME-NANOS` (so nothing of it can be served
//!   again), then writes the registry, then removes the files; start-up drops registry
//!   entries whose directory went that way and removes what such a delete left.
//! - **Cache**: every slot takes a generation no slot of the process had
//!   ([`crate::state::fresh_generation`]), so a collection created again under a deleted
//!   one's name never meets its cached replies.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use crate::error::{ApiError, Code};
use crate::registry::{
    check_name, deleted_prefix, read_entries, write_entries, Entry, MAX_COLLECTIONS,
};
use crate::state::{App, Slot};
use crate::wire::{authorize, json_error, json_response, read_body};

// ---------------------------------------------------------------------------------------
// POST /collections

/// The body of `POST /collections`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBody {
    name: String,
    /// Dimension of the vectors (not with `model`: the model's).
    #[serde(default)]
    dim: Option<usize>,
    /// `cosine` (default), `l2` or `ip`.
    #[serde(default)]
    metric: Option<String>,
    /// The server's `--model` by name (or `true`): documents without a vector are embedded.
    #[serde(default)]
    #[schema(value_type = Option<Value>)]
    model: Option<serde_json::Value>,
    /// The field embedded and indexed for BM25 (default `text` with a model).
    #[serde(default)]
    text_field: Option<String>,
    /// Analyzer of the BM25 index (default `standard`).
    #[serde(default)]
    analyzer: Option<String>,
    #[serde(default)]
    index: Option<IndexBody>,
    /// `int` (default: `"777"` and `777` are one document), `str` or `mixed`.
    #[serde(default)]
    id_kind: Option<String>,
    #[serde(default)]
    mapping: Option<MappingBody>,
}

/// `index` of [`CreateBody`].
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IndexBody {
    /// `hnsw` (default) or `flat`.
    #[serde(default)]
    kind: Option<String>,
    /// `none` (default), `sq8`, `pq:M`, `binary` or `rabitq:B` (B = 1..8).
    #[serde(default)]
    quantization: Option<String>,
    #[serde(default)]
    m: Option<usize>,
    #[serde(default)]
    ef_construction: Option<usize>,
}

/// `mapping` of [`CreateBody`].
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MappingBody {
    /// Field name to `{"type": ...}`.
    #[serde(default)]
    #[schema(value_type = Object)]
    properties: serde_json::Map<String, serde_json::Value>,
    /// `true` (default: the server's), `false` or `strict`.
    #[serde(default)]
    #[schema(value_type = Option<Value>)]
    dynamic: Option<serde_json::Value>,
}

/// Largest dimension a created collection may have.
const MAX_DIM: usize = 16_384;

fn parse_properties(
    props: &serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<(String, searchd_fields::FieldType)>, ApiError> {
    if props.len() > 1024 {
        return Err(ApiError::invalid(format!(
            "properties names {} fields; at most 1024 in one request",
            props.len()
        )));
    }
    props
        .iter()
        .map(|(name, spec)| {
            let ty = spec
                .get("type")
                .and_then(|t| t.as_str())
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "properties.{name}: give {{\"type\": T}} with T keyword, integer (long), float (double), bool (boolean) or datetime (date)"
                    ))
                })?;
            if let Some(extra) = spec
                .as_object()
                .and_then(|o| o.keys().find(|k| k.as_str() != "type"))
            {
                return Err(ApiError::invalid(format!(
                    "properties.{name}.{extra}: only \"type\" is supported"
                )));
            }
            let ty: searchd_fields::FieldType = ty
                .parse()
                .map_err(|e| ApiError::invalid(format!("properties.{name}: {e}")))?;
            Ok((name.clone(), ty))
        })
        .collect()
}

fn data_dir(app: &App) -> Result<&Path, ApiError> {
    app.cfg.data_dir.as_deref().ok_or_else(|| {
        ApiError::new(
            Code::Conflict,
            "this server has no data directory for collections made over HTTP: start it with serve --data-dir DIR",
        )
    })
}

fn internal(what: &str, e: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %e, "{what}");
    ApiError::new(Code::Internal, format!("{what}: {e}"))
}

pub(crate) async fn create(
    State(app): State<Arc<App>>,
    req: Request,
) -> Result<Response, ApiError> {
    authorize(&app, &req)?;
    let sees_paths = crate::auth::sees_paths(
        app.keys.is_some(),
        req.extensions().get::<crate::auth::Caller>(),
    );
    let body = read_body(&app, req).await?;
    let b: CreateBody = serde_json::from_slice(&body).map_err(|e| json_error(e, &body))?;
    check_name(&b.name).map_err(ApiError::invalid)?;
    let data = data_dir(&app)?.to_path_buf();
    // The model: the server's, named (or `true`).
    let model = match &b.model {
        None | Some(serde_json::Value::Bool(false)) => None,
        Some(v) => {
            let Some(batcher) = &app.embedder else {
                return Err(ApiError::invalid(
                    "model: this server has no --model to embed documents with",
                ));
            };
            let rec = &batcher.record;
            match v {
                serde_json::Value::Bool(true) => {}
                serde_json::Value::String(s) if *s == rec.name => {}
                other => {
                    return Err(ApiError::invalid(format!(
                        "model: this server embeds with {:?} (give that name or true), not {other}",
                        rec.name
                    )))
                }
            }
            Some(rec.clone())
        }
    };
    let dim = match (&model, b.dim) {
        (Some(m), Some(d)) if d != m.dim => {
            return Err(ApiError::invalid(format!(
                "dim {d} is not the model's ({}); leave it out",
                m.dim
            )))
        }
        (Some(m), _) => m.dim,
        (None, Some(d)) if (1..=MAX_DIM).contains(&d) => d,
        (None, Some(d)) => {
            return Err(ApiError::invalid(format!(
                "dim must be between 1 and {MAX_DIM}, got {d}"
            )))
        }
        (None, None) => {
            return Err(ApiError::invalid(
                "give dim (the vectors' length), or model to embed documents' text",
            ))
        }
    };
    let mut build = searchd_engine::BuildConfig {
        threads: app.cfg.live.optimizer_threads.max(1),
        ..Default::default()
    };
    if let Some(m) = &b.metric {
        build.metric = searchd_engine::Metric::parse(m)
            .ok_or_else(|| ApiError::invalid(format!("metric {m:?}: expected cosine, l2 or ip")))?;
    }
    let ix = b.index.unwrap_or_default();
    match ix.kind.as_deref() {
        None | Some("hnsw") => build.kind = searchd_engine::IndexKind::Hnsw,
        Some("flat") => build.kind = searchd_engine::IndexKind::Flat,
        Some(k) => {
            return Err(ApiError::invalid(format!(
                "index.kind {k:?}: a collection made over HTTP is hnsw or flat (ivfpq needs training data: make it with searchd ingest)"
            )))
        }
    }
    if let Some(q) = &ix.quantization {
        let q = searchd_engine::Quantization::parse(q).ok_or_else(|| {
            ApiError::invalid(format!(
                "index.quantization {q:?}: expected none, sq8, pq:M, binary or rabitq:B (B = 1..8)"
            ))
        })?;
        if let searchd_engine::Quantization::Pq { m } = q {
            if m == 0 || dim % m != 0 {
                return Err(ApiError::invalid(format!(
                    "index.quantization pq:{m}: M must divide the dimension {dim}"
                )));
            }
        }
        build.quantization = q;
    }
    if let Some(m) = ix.m {
        if !(2..=128).contains(&m) {
            return Err(ApiError::invalid(format!(
                "index.m must be between 2 and 128, got {m}"
            )));
        }
        build.hnsw.m = m;
    }
    if let Some(ef) = ix.ef_construction {
        if !(1..=2000).contains(&ef) {
            return Err(ApiError::invalid(format!(
                "index.ef_construction must be between 1 and 2000, got {ef}"
            )));
        }
        build.hnsw.ef_construction = ef;
    }
    let text_field = b
        .text_field
        .clone()
        .or_else(|| model.as_ref().map(|_| "text".to_string()));
    if let Some(t) = &text_field {
        if t.is_empty() || t.starts_with('_') || t.contains('.') {
            return Err(ApiError::invalid(format!(
                "text_field {t:?}: a top-level key, not empty, no '.', not starting with '_'"
            )));
        }
    }
    let analyzer = match &b.analyzer {
        None => searchd_collection::Analyzer::default(),
        Some(a) => a
            .parse()
            .map_err(|e| ApiError::invalid(format!("analyzer {a:?}: {e}")))?,
    };
    let id_kind = match b.id_kind.as_deref() {
        None | Some("int") => searchd_collection::IdKind::Int,
        Some("str") | Some("string") => searchd_collection::IdKind::Str,
        Some("mixed") => searchd_collection::IdKind::Mixed,
        Some(k) => {
            return Err(ApiError::invalid(format!(
                "id_kind {k:?}: expected int, str or mixed"
            )))
        }
    };
    let (fields, dynamic) = match &b.mapping {
        None => (Vec::new(), None),
        Some(m) => {
            let dynamic = match &m.dynamic {
                None => None,
                Some(serde_json::Value::Bool(true)) => {
                    Some(searchd_collection::live::Dynamic::True)
                }
                Some(serde_json::Value::Bool(false)) => {
                    Some(searchd_collection::live::Dynamic::False)
                }
                Some(serde_json::Value::String(s)) => {
                    Some(searchd_collection::live::Dynamic::parse(s).ok_or_else(|| {
                        ApiError::invalid(format!(
                            "mapping.dynamic {s:?}: expected true, false or strict"
                        ))
                    })?)
                }
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "mapping.dynamic {other}: expected true, false or strict"
                    )))
                }
            };
            (parse_properties(&m.properties)?, dynamic)
        }
    };
    for (f, _) in &fields {
        if f.is_empty() || f.contains('.') || f.starts_with('_') || Some(f) == text_field.as_ref() {
            return Err(ApiError::invalid(format!(
                "mapping.properties.{f}: a mapped field is a top-level key of the documents (not empty, no '.', not starting with '_', not the text field)"
            )));
        }
    }
    let mut mapping = searchd_fields::Schema::default();
    searchd_collection::validate::add_fields(&mut mapping, fields);
    let spec = searchd_collection::create::NewCollection {
        name: b.name.clone(),
        dim,
        build,
        id_kind,
        text_field,
        analyzer: Some(analyzer),
        model,
        mapping,
        dynamic,
    };

    let Some(turn) = crate::state::ReloadTurn::take(&app.limits) else {
        return Err(ApiError::new(
            Code::Conflict,
            "another collection change or reload is running; retry when it has finished",
        ));
    };
    if app.slots().iter().any(|s| s.name == b.name) {
        return Err(ApiError::new(
            Code::Conflict,
            format!("a collection named {:?} is served already", b.name),
        ));
    }
    if app.slots().len() >= MAX_COLLECTIONS {
        return Err(ApiError::new(
            Code::Conflict,
            format!("this server serves {MAX_COLLECTIONS} collections, the most it takes"),
        ));
    }
    let dir = data.join(&b.name);
    let app2 = app.clone();
    let name = b.name.clone();
    let opened = tokio::task::spawn_blocking(move || -> Result<Box<dyn crate::backend::SearchBackend>, ApiError> {
        let _turn = turn;
        if dir.exists() {
            return Err(ApiError::new(
                Code::Conflict,
                format!(
                    "the data directory has {:?} already, which no served collection uses (left by an earlier create that did not finish, or put there by hand): remove it or pick another name",
                    name
                ),
            ));
        }
        searchd_collection::create::create(&dir, &spec)
            .map_err(|e| internal("cannot make the collection's directory", e))?;
        let mut entries = read_entries(&data).map_err(|e| internal("cannot read the registry", e))?;
        entries.retain(|e| e.name != name);
        entries.push(Entry {
            name: name.clone(),
            dir: name.clone(),
        });
        write_entries(&data, &entries).map_err(|e| internal("cannot write the registry", e))?;
        let model = app2.embedder.as_ref().map(|b| &b.record);
        crate::open::open_path(&dir, &app2.cfg.load, &app2.cfg.live, &app2.pool, model)
            .map_err(|e| internal("the new collection did not open", e))
    })
    .await
    .map_err(|e| internal("the create task failed", e))??;
    let info = opened.info();
    let slot = Arc::new(Slot::new(b.name.clone()));
    slot.backend.store(Some(Arc::new(opened)));
    // A name used before (deleted, then made again) starts under a fresh shared generation.
    app.changed(&slot).await;
    app.slots.rcu(|s| {
        let mut v = (**s).clone();
        v.push(slot.clone());
        v
    });
    tracing::info!(collection = %b.name, "collection created over HTTP");
    let mut v = serde_json::json!({"acknowledged": true, "collection": b.name, "info": info});
    if !sees_paths {
        crate::auth::redact_paths(&mut v);
    }
    Ok(json_response(
        StatusCode::CREATED,
        serde_json::to_vec(&v).unwrap_or_default(),
    ))
}

// ---------------------------------------------------------------------------------------
// DELETE /collections/{name}

pub(crate) async fn delete(
    State(app): State<Arc<App>>,
    UrlPath(name): UrlPath<String>,
    req: Request,
) -> Result<Response, ApiError> {
    authorize(&app, &req)?;
    let data = data_dir(&app)?.to_path_buf();
    let slot = app.slot(&name)?;
    if Arc::ptr_eq(&slot, &app.slots()[0]) {
        return Err(ApiError::new(
            Code::Conflict,
            format!("{name:?} is the default collection (behind /search and /stats): it cannot be deleted while served; restart without it"),
        ));
    }
    let Some(turn) = crate::state::ReloadTurn::take(&app.limits) else {
        return Err(ApiError::new(
            Code::Conflict,
            "another collection change or reload is running; retry when it has finished",
        ));
    };
    let entries = {
        let data = data.clone();
        tokio::task::spawn_blocking(move || read_entries(&data))
            .await
            .map_err(|e| internal("the delete task failed", e))?
            .map_err(|e| internal("cannot read the registry", e))?
    };
    let Some(entry) = entries.iter().find(|e| e.name == name).cloned() else {
        return Err(ApiError::new(
            Code::Conflict,
            format!("{name:?} was not created over HTTP (it is served from the command line): remove its --collection flag and restart instead"),
        ));
    };
    // Out of the served list first: new requests get 404; requests holding the slot finish
    // on the backend they have, then see it gone (503).
    app.slots.rcu(|s| {
        s.iter()
            .filter(|x| !Arc::ptr_eq(x, &slot))
            .cloned()
            .collect::<Vec<_>>()
    });
    app.changed(&slot).await;
    slot.failed.store(Some(Arc::new(format!(
        "the collection {name:?} was deleted"
    ))));
    let backend = slot.backend.swap(None);
    let gone = name.clone();
    let removed = tokio::task::spawn_blocking(move || -> Result<u64, ApiError> {
        let _turn = turn;
        let name = gone;
        if let Some(b) = backend {
            // Its optimizer stopped and its log closed before the files go.
            b.close();
        }
        let dir = data.join(&entry.dir);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let grave = data.join(format!("{}{nanos}", deleted_prefix(&name)));
        if dir.exists() {
            std::fs::rename(&dir, &grave)
                .map_err(|e| internal("cannot move the collection's directory away", e))?;
            if let Ok(d) = std::fs::File::open(&data) {
                let _ = d.sync_all();
            }
        }
        let rest: Vec<Entry> = entries.into_iter().filter(|e| e.name != name).collect();
        write_entries(&data, &rest).map_err(|e| internal("cannot write the registry", e))?;
        let bytes = dir_bytes(&grave);
        if grave.exists() {
            std::fs::remove_dir_all(&grave)
                .map_err(|e| internal("cannot remove the collection's files", e))?;
        }
        Ok(bytes)
    })
    .await
    .map_err(|e| internal("the delete task failed", e))??;
    tracing::info!(collection = %name, bytes = removed, "collection deleted over HTTP");
    Ok(json_response(
        StatusCode::OK,
        serde_json::to_vec(
            &serde_json::json!({"acknowledged": true, "deleted": name, "bytes_freed": removed}),
        )
        .unwrap_or_default(),
    ))
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

// ---------------------------------------------------------------------------------------
// PUT /collections/{name}/mapping

/// The body of `PUT /collections/{name}/mapping`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PutMappingBody {
    /// Field name to `{"type": ...}`.
    #[schema(value_type = Object)]
    properties: serde_json::Map<String, serde_json::Value>,
}

pub(crate) async fn put_mapping(
    State(app): State<Arc<App>>,
    UrlPath(name): UrlPath<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let slot = app.slot(&name)?;
    let body = read_body(&app, req).await?;
    let b: PutMappingBody = serde_json::from_slice(&body).map_err(|e| json_error(e, &body))?;
    let fields = parse_properties(&b.properties)?;
    let backend = slot.backend_or_503()?;
    let Some(live) = backend.writer() else {
        return Err(ApiError::new(
            Code::Conflict,
            format!("{name:?} takes no mapping changes: it is not a live collection of this server (a bare index, a read-only or paused one, or another backend: with Qdrant, create payload indexes there)"),
        ));
    };
    let change = tokio::task::spawn_blocking(move || live.put_mapping(&fields))
        .await
        .map_err(|e| internal("the mapping task failed", e))?
        .map_err(|e| match e {
            searchd_collection::Error::ReadOnly(m) => ApiError::new(Code::Conflict, m),
            e if e.is_input() => ApiError::invalid(e.to_string()),
            e if e.is_disk_full() => ApiError::new(Code::InsufficientStorage, e.to_string()),
            e => internal("the mapping change failed", e),
        })?;
    app.changed(&slot).await;
    Ok(json_response(
        StatusCode::OK,
        serde_json::to_vec(&serde_json::json!({
            "acknowledged": true,
            "added": change.added,
            "unchanged": change.unchanged,
            "segments_to_build": change.segments_to_build,
            "progress": format!("GET /stats: collections.{name}.live.fields_build"),
        }))
        .unwrap_or_default(),
    ))
}
