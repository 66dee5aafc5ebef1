//! Filtered reads without a query: `POST /collections/{name}/count`, `/facet` and
//! `/scroll` (CONTRACTS.md "Serving collections"), and the response-cache wrapper every
//! read route goes through.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::api::{
    backend_error, int_in, json_error, json_response, parse_fields, read_body, refused,
    write_facets, write_id, App, Slot, DEFAULT_FACET_SIZE, MAX_FACET_SIZE,
};
use crate::backend::{
    FacetSpec, FieldsWanted, ReadOutput, ReadRequest, SearchBackend, MAX_RESULT_WINDOW,
};
use crate::cache::ResponseCache;
use crate::error::ApiError;

/// Default page size of `/scroll`.
pub const DEFAULT_PAGE_SIZE: usize = 10;

/// Serve `compute` through the response cache (when it is on): a hit answers at once,
/// without admission or work; a 200 miss is stored. The key is the collection, its
/// generation, `route`, the query string and the canonical body.
pub(crate) async fn cached<F, Fut>(
    app: &App,
    slot: &Slot,
    route: &str,
    uri: &Uri,
    body: &[u8],
    compute: F,
) -> Response
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Vec<u8>, ApiError>>,
{
    let Some(cache) = &app.cache else {
        return match compute().await {
            Ok(b) => json_response(StatusCode::OK, b),
            Err(e) => e.into_response(),
        };
    };
    // Reloads bump the generation; writes change the backend's version (what a live
    // collection's searches see): both are part of the key.
    let version = slot.backend.load_full().map_or(0, |b| b.version());
    let generation = slot.generation.load(Ordering::Acquire).wrapping_shl(40) ^ version;
    let key = ResponseCache::key(&slot.name, generation, route, uri.query(), body);
    if let Some(k) = &key {
        if let Some(hit) = cache.get(k) {
            let mut r = json_response(StatusCode::OK, hit.to_vec());
            r.headers_mut()
                .insert("x-searchd-cache", HeaderValue::from_static("hit"));
            return r;
        }
    }
    match compute().await {
        Ok(b) => {
            // A swap while computing makes the answer belong to the older generation,
            // which its key already names: it can never be served for the new one.
            if let Some(k) = key {
                cache.insert(k, Bytes::from(b.clone()));
            }
            let mut r = json_response(StatusCode::OK, b);
            r.headers_mut()
                .insert("x-searchd-cache", HeaderValue::from_static("miss"));
            r
        }
        Err(e) => e.into_response(),
    }
}

/// The slot's backend, or 503 while it loads.
pub(crate) fn backend_of(slot: &Slot) -> Result<Arc<Box<dyn SearchBackend>>, ApiError> {
    slot.backend_or_503()
}

/// Run a read on the backend: admission first (503 at capacity), then the pool.
pub(crate) async fn run_read(
    app: &App,
    backend: &dyn SearchBackend,
    mut req: ReadRequest,
) -> Result<ReadOutput, ApiError> {
    let permit = app.admission.try_admit().map_err(|r| refused(app, r))?;
    req.permit = Some(permit);
    backend.read(req).await.map_err(|e| backend_error(app, e))
}

fn parse_object(body: &[u8]) -> Result<serde_json::Map<String, serde_json::Value>, ApiError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| json_error(e, body))?;
    match v {
        serde_json::Value::Object(m) => Ok(m),
        other => Err(ApiError::invalid(format!(
            "the body must be a JSON object, got {other}"
        ))),
    }
}

fn unknown_keys(
    m: &serde_json::Map<String, serde_json::Value>,
    known: &[&str],
) -> Result<(), ApiError> {
    match m.keys().find(|k| !known.contains(&k.as_str())) {
        Some(bad) => Err(ApiError::invalid(format!(
            "the body: unknown key {bad:?} (known: {})",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// A read of everything with nothing asked for yet, deadline from `arrival`.
pub(crate) fn read_request(app: &App, arrival: Instant) -> ReadRequest {
    ReadRequest {
        filter: None,
        sort: None,
        after: None,
        from: 0,
        size: 0,
        fields: FieldsWanted::None,
        total: false,
        facets: Vec::new(),
        deadline: arrival + app.cfg.timeout,
        permit: None,
    }
}

/// A collection read route: slot, body, then the cache around `f` (whose `Instant` is when
/// the body had arrived). With
/// `body_optional` a request without a body (Elasticsearch clients send GET without one)
/// reads as an empty body instead of a missing Content-Type.
pub(crate) async fn read_route<F, Fut>(
    app: Arc<App>,
    name: String,
    req: Request,
    route: &'static str,
    body_optional: bool,
    f: F,
) -> Response
where
    F: FnOnce(Arc<App>, Arc<Slot>, Bytes, Instant) -> Fut,
    Fut: Future<Output = Result<Vec<u8>, ApiError>>,
{
    let slot = match app.slot(&name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let uri = req.uri().clone();
    let has_body = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .is_some_and(|v| v != "0")
        || req
            .headers()
            .contains_key(axum::http::header::TRANSFER_ENCODING);
    let body = if body_optional && !has_body {
        Bytes::new()
    } else {
        match read_body(&app, req).await {
            Ok(b) => b,
            Err(e) => return e.into_response(),
        }
    };
    // Deadlines (and the reported times) start when the body has arrived: upload time is
    // bounded by the read timeout, not the search deadline.
    let arrival = Instant::now();
    let app2 = app.clone();
    let slot2 = slot.clone();
    let body2 = body.clone();
    cached(&app, &slot, route, &uri, &body, move || {
        f(app2, slot2, body2, arrival)
    })
    .await
}

// ---------------------------------------------------------------------------------------
// POST /collections/{name}/count

pub(crate) async fn count(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    read_route(
        app,
        name,
        req,
        "count",
        false,
        |app, slot, body, arrival| async move {
            let m = parse_object(&body)?;
            unknown_keys(&m, &["filter"])?;
            let backend = backend_of(&slot)?;
            let mut r = read_request(&app, arrival);
            r.filter = m.get("filter").cloned();
            r.total = true;
            let out = run_read(&app, &**backend, r).await?;
            let took = arrival.elapsed().as_micros() as u64;
            Ok(format!(
                "{{\"count\":{},\"took_us\":{took}}}",
                out.total.unwrap_or(0)
            )
            .into_bytes())
        },
    )
    .await
}

// ---------------------------------------------------------------------------------------
// POST /collections/{name}/facet

pub(crate) async fn facet(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    read_route(app, name, req, "facet", false, |app, slot, body, arrival| async move {
        let m = parse_object(&body)?;
        unknown_keys(&m, &["field", "filter", "size"])?;
        let Some(field) = m.get("field").and_then(|f| f.as_str()) else {
            return Err(ApiError::invalid(
                "field: give the keyword field to count values of, e.g. {\"field\": \"brand\"}",
            ));
        };
        let size = match m.get("size") {
            Some(v) => int_in("size", v, 0, MAX_FACET_SIZE as u64)?,
            None => DEFAULT_FACET_SIZE,
        };
        let backend = backend_of(&slot)?;
        let mut r = read_request(&app, arrival);
        r.filter = m.get("filter").cloned();
        r.total = true;
        r.facets = vec![FacetSpec {
            name: field.to_string(),
            field: field.to_string(),
            size,
        }];
        let out = run_read(&app, &**backend, r).await?;
        let f = out.facets.into_iter().next().unwrap_or_default();
        let took = arrival.elapsed().as_micros() as u64;
        let v = serde_json::json!({
            "buckets": f.buckets.iter().map(|(v, c)| serde_json::json!({"value": v, "count": c})).collect::<Vec<_>>(),
            "other_count": f.other_count,
            "matched": out.total,
            "took_us": took,
        });
        Ok(serde_json::to_vec(&v).unwrap_or_default())
    })
    .await
}

// ---------------------------------------------------------------------------------------
// POST /collections/{name}/scroll

pub(crate) async fn scroll(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    read_route(
        app,
        name,
        req,
        "scroll",
        false,
        |app, slot, body, arrival| async move {
            let m = parse_object(&body)?;
            unknown_keys(
                &m,
                &[
                    "filter", "sort", "size", "after", "fields", "total", "facets",
                ],
            )?;
            let size = match m.get("size") {
                Some(v) => int_in("size", v, 0, MAX_RESULT_WINDOW as u64)?,
                None => DEFAULT_PAGE_SIZE,
            };
            let total = match m.get("total") {
                None => false,
                Some(serde_json::Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "total must be true or false, got {other}"
                    )))
                }
            };
            let backend = backend_of(&slot)?;
            let mut r = read_request(&app, arrival);
            r.filter = m.get("filter").cloned();
            r.sort = m.get("sort").cloned();
            r.after = m.get("after").filter(|a| !a.is_null()).cloned();
            r.size = size;
            r.fields = parse_fields(m.get("fields"))?;
            r.total = total;
            r.facets = crate::api::parse_facets(m.get("facets"), "facets")?;
            let out = run_read(&app, &**backend, r).await?;
            let took = arrival.elapsed().as_micros() as u64;
            Ok(scroll_json(&out, took))
        },
    )
    .await
}

/// `{"hits":[{"id":..,"sort":[..][,"fields":{..}]}],"next":[..]|null[,"total":n][,"facets":{..}],"took_us":n}`
fn scroll_json(out: &ReadOutput, took_us: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(64 + out.hits.len() * 64);
    let mut ints = itoa::Buffer::new();
    b.extend_from_slice(b"{\"hits\":[");
    for (i, h) in out.hits.iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(b"{\"id\":");
        write_id(&mut b, &h.id, &mut ints);
        b.extend_from_slice(b",\"sort\":");
        let _ = serde_json::to_writer(&mut b, &h.sort);
        if let Some(f) = &h.fields {
            b.extend_from_slice(b",\"fields\":");
            b.extend_from_slice(f);
        }
        b.push(b'}');
    }
    b.extend_from_slice(b"],\"next\":");
    let _ = serde_json::to_writer(&mut b, &out.next);
    if let Some(t) = out.total {
        b.extend_from_slice(b",\"total\":");
        b.extend_from_slice(ints.format(t).as_bytes());
    }
    if !out.facets.is_empty() {
        b.extend_from_slice(b",\"facets\":");
        write_facets(&mut b, &out.facets);
    }
    b.extend_from_slice(b",\"took_us\":");
    b.extend_from_slice(ints.format(took_us).as_bytes());
    b.push(b'}');
    b
}
