//! Filtered reads without a query: `POST /collections/{name}/count`, `/facet` and
//! `/scroll` (CONTRACTS.md "Serving collections"): wire shapes only; the work is
//! `query::run_read` behind `query::read_route` (slot, body, response cache).

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::response::Response;

use crate::backend::{FacetSpec, ReadOutput, MAX_RESULT_WINDOW};
use crate::error::ApiError;
use crate::query::{backend_of, read_request, read_route, run_read};
use crate::state::App;
use crate::wire::{
    int_in, json_error, parse_facets, parse_fields, write_facets, write_id, DEFAULT_FACET_SIZE,
    MAX_FACET_SIZE,
};

/// Default page size of `/scroll`.
pub const DEFAULT_PAGE_SIZE: usize = 10;

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
            r.facets = parse_facets(m.get("facets"), "facets")?;
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
