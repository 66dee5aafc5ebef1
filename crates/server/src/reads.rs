//! Filtered reads without a query: `POST /collections/{name}/count`, `/facet` and
//! `/scroll` (CONTRACTS.md "Serving collections"): wire shapes only; the work is
//! `query::run_read` behind `query::read_route` (slot, body, response cache).

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::response::Response;

use crate::backend::{FacetSpec, ReadOutput, MAX_RESULT_WINDOW};
use crate::error::ApiError;
use crate::query::{read_route, BodyRule, JsonObject};
use crate::state::App;
use crate::wire::{
    int_in, json_error, parse_facets, parse_fields, write_facets, write_id, DEFAULT_FACET_SIZE,
    MAX_FACET_SIZE,
};

/// Default page size of `/scroll`.
pub const DEFAULT_PAGE_SIZE: usize = 10;

/// The native read routes' body: a JSON object with only `keys`.
fn native_body(body: &[u8], keys: &[&str]) -> Result<JsonObject, ApiError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| json_error(e, body))?;
    let m = match v {
        serde_json::Value::Object(m) => m,
        other => {
            return Err(ApiError::invalid(format!(
                "the body must be a JSON object, got {other}"
            )))
        }
    };
    if let Some(bad) = m.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "the body: unknown key {bad:?} (known: {})",
            keys.join(", ")
        )));
    }
    Ok(m)
}

fn rule(keys: &'static [&'static str]) -> BodyRule<'static> {
    BodyRule {
        optional: false,
        keys,
        parse: native_body,
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
        rule(&["filter"]),
        |rd| async move {
            let mut r = rd.request();
            r.filter = rd.body.get("filter").cloned();
            r.total = true;
            let out = rd.run(r).await?;
            let took = rd.arrival.elapsed().as_micros() as u64;
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
    let keys = rule(&["field", "filter", "size"]);
    read_route(app, name, req, "facet", keys, |rd| async move {
        let m = &rd.body;
        let Some(field) = m.get("field").and_then(|f| f.as_str()) else {
            return Err(ApiError::invalid(
                "field: give the keyword field to count values of, e.g. {\"field\": \"brand\"}",
            ));
        };
        let size = match m.get("size") {
            Some(v) => int_in("size", v, 0, MAX_FACET_SIZE as u64)?,
            None => DEFAULT_FACET_SIZE,
        };
        let mut r = rd.request();
        r.filter = m.get("filter").cloned();
        r.total = true;
        r.facets = vec![FacetSpec {
            name: field.to_string(),
            field: field.to_string(),
            size,
        }];
        let out = rd.run(r).await?;
        let f = out.facets.into_iter().next().unwrap_or_default();
        let took = rd.arrival.elapsed().as_micros() as u64;
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

const SCROLL_KEYS: &[&str] = &[
    "filter", "sort", "size", "after", "fields", "total", "facets",
];

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
        rule(SCROLL_KEYS),
        |rd| async move {
            let m = &rd.body;
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
            let mut r = rd.request();
            r.filter = m.get("filter").cloned();
            r.sort = m.get("sort").cloned();
            r.after = m.get("after").filter(|a| !a.is_null()).cloned();
            r.size = size;
            r.fields = parse_fields(m.get("fields"))?;
            r.total = total;
            r.facets = parse_facets(m.get("facets"), "facets")?;
            let out = rd.run(r).await?;
            let took = rd.arrival.elapsed().as_micros() as u64;
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
