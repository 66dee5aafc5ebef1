//! Filtered reads without a query: `POST /collections/{name}/count`, `/facet` and
//! `/scroll` (CONTRACTS.md "Serving collections"): wire shapes only; the router serves each
//! through `query::read_handler` (slot, body by its [`BodyRule`], response cache), the work
//! is `query::run_read`.

use crate::backend::{FacetSpec, ReadOutput, MAX_RESULT_WINDOW};
use crate::error::ApiError;
use crate::query::{parse_page, BodyRule, JsonObject, Read};
use crate::wire::{
    int_in, json_error, parse_facets, parse_fields, write_buckets, write_facets, write_id,
    DEFAULT_FACET_SIZE, MAX_FACET_SIZE,
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

const fn rule(keys: &'static [&'static str]) -> BodyRule<'static> {
    BodyRule {
        optional: false,
        keys,
        parse: native_body,
    }
}

/// The body of `/count`.
pub(crate) const COUNT: BodyRule<'static> = rule(&["filter"]);
/// The body of `/facet`.
pub(crate) const FACET: BodyRule<'static> = rule(&["field", "filter", "size"]);
/// The body of `/scroll`.
pub(crate) const SCROLL: BodyRule<'static> = rule(&[
    "filter", "sort", "size", "after", "fields", "total", "facets",
]);

pub(crate) async fn count(rd: Read) -> Result<Vec<u8>, ApiError> {
    let mut r = rd.request();
    r.filter = rd.filter("filter")?;
    r.total = true;
    let out = rd.run(r).await?;
    let took = rd.arrival.elapsed().as_micros() as u64;
    Ok(format!(
        "{{\"count\":{},\"took_us\":{took}}}",
        out.total.unwrap_or(0)
    )
    .into_bytes())
}

// ---------------------------------------------------------------------------------------
// POST /collections/{name}/facet

pub(crate) async fn facet(rd: Read) -> Result<Vec<u8>, ApiError> {
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
    let deadline = r.deadline;
    r.filter = rd.filter("filter")?;
    r.total = true;
    r.facets = vec![FacetSpec {
        name: field.to_string(),
        field: field.to_string(),
        size,
    }];
    let out = rd.run(r).await?;
    let f = out.facets.into_iter().next().unwrap_or_default();
    let large = f.buckets.len() >= crate::render::OFFLOAD_ITEMS;
    let arrival = rd.arrival;
    rd.app
        .renders
        .offload_if(deadline, large, move || {
            // `{"buckets":[..],"matched":n|null,"other_count":n,"took_us":n}`: the keys in the
            // order of the `serde_json::Value` object this replaced.
            let mut b = Vec::with_capacity(96 + f.buckets.len() * 48);
            let mut ints = itoa::Buffer::new();
            write_buckets(&mut b, &f.buckets, &mut ints);
            b.extend_from_slice(b",\"matched\":");
            match out.total {
                Some(t) => b.extend_from_slice(ints.format(t).as_bytes()),
                None => b.extend_from_slice(b"null"),
            }
            b.extend_from_slice(b",\"other_count\":");
            b.extend_from_slice(ints.format(f.other_count).as_bytes());
            b.extend_from_slice(b",\"took_us\":");
            b.extend_from_slice(ints.format(arrival.elapsed().as_micros() as u64).as_bytes());
            b.push(b'}');
            b
        })
        .await
}

// ---------------------------------------------------------------------------------------
// POST /collections/{name}/scroll

pub(crate) async fn scroll(rd: Read) -> Result<Vec<u8>, ApiError> {
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
    (r.sort, r.after) = parse_page(
        &rd.backend.schema(),
        m.get("sort"),
        m.get("after").filter(|a| !a.is_null()),
        "sort",
        "after",
    )?;
    r.filter = rd.filter("filter")?;
    r.size = size;
    r.fields = parse_fields(m.get("fields"))?;
    r.total = total;
    r.facets = parse_facets(m.get("facets"), "facets")?;
    let deadline = r.deadline;
    let out = rd.run(r).await?;
    let large = out.hits.len() >= crate::render::OFFLOAD_ITEMS;
    let arrival = rd.arrival;
    rd.app
        .renders
        .offload_if(deadline, large, move || {
            scroll_json(&out, arrival.elapsed().as_micros() as u64)
        })
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
