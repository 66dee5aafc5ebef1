//! Reading requests and writing replies: content type, bodies within limits, JSON
//! errors with their paths, ids, field lists, facets, and the admin token check.

use std::net::SocketAddr;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use searchd_collection::DocId;

use crate::backend::{FacetOutput, FacetSpec, FieldsWanted};
use crate::error::{ApiError, Code, Tagged, JSON};
use crate::state::{App, Arrival};

/// Largest `ef` a request may ask for.
pub const MAX_EF: usize = 4096;
/// Default `k`.
pub const DEFAULT_K: usize = 10;

pub(crate) fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, JSON);
    r.extensions_mut().insert(Tagged(Code::Ok));
    r
}

fn is_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let ct = headers.get(header::CONTENT_TYPE);
    let Some(ct) = ct else {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "the request has no Content-Type; send Content-Type: application/json",
        ));
    };
    let s = ct.to_str().unwrap_or("");
    let mime = s
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json")) {
        Ok(())
    } else {
        Err(ApiError::new(
            Code::UnsupportedMediaType,
            format!("Content-Type must be application/json, got {s:?}"),
        ))
    }
}

/// Check the content type and read the whole body, within the size limit, the read
/// timeout and the byte budget (`limits.rs`). Admission happens only after this, so a slow
/// client holds no search slot.
pub(crate) async fn read_body(app: &App, req: Request) -> Result<Bytes, ApiError> {
    read_body_limit(app, req, app.cfg.body_limit).await
}

/// [`read_body`] with another size limit (writes take larger bodies).
pub(crate) async fn read_body_limit(
    app: &App,
    req: Request,
    limit: usize,
) -> Result<Bytes, ApiError> {
    is_json(req.headers())?;
    crate::limits::read_body(&app.limits, app.cfg.read_timeout, req, limit).await
}

/// Map a serde_json error to `invalid_json` (not JSON at all) or `invalid_argument` (JSON
/// of the wrong shape).
pub(crate) fn json_error(e: serde_json::Error, body: &[u8]) -> ApiError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Data => ApiError::invalid(format!("invalid request: {e}")),
        Category::Syntax if e.to_string().starts_with("number out of range") => {
            ApiError::invalid(format!("invalid request: {e}"))
        }
        Category::Syntax if non_finite_literal(&e, body) => ApiError::invalid(format!(
            "NaN and infinity are not valid numbers (line {} column {}); vectors must be finite",
            e.line(),
            e.column()
        )),
        _ => ApiError::new(
            Code::InvalidJson,
            format!("the body is not valid JSON: {e}"),
        ),
    }
}

/// Whether a syntax error points at a `NaN` / `Infinity` literal (which some JSON writers
/// emit): that is a non-finite value, an invalid argument rather than garbage.
fn non_finite_literal(e: &serde_json::Error, body: &[u8]) -> bool {
    let line_start = body
        .split(|&b| b == b'\n')
        .take(e.line().saturating_sub(1))
        .map(|l| l.len() + 1)
        .sum::<usize>();
    let at = (line_start + e.column()).saturating_sub(1).min(body.len());
    let from = at.saturating_sub(9);
    let window = &body[from..(at + 9).min(body.len())];
    let w = String::from_utf8_lossy(window);
    w.contains("NaN") || w.contains("Infinity") || w.contains("nan") || w.contains("inf")
}

/// A non-negative integer field, or a clear message.
pub(crate) fn uint(name: &str, n: &serde_json::Number, what: &str) -> Result<u64, ApiError> {
    n.as_u64()
        .ok_or_else(|| ApiError::invalid(format!("{name} must be {what}, got {n}")))
}

pub(crate) fn ranged(
    name: &str,
    n: &serde_json::Number,
    lo: u64,
    hi: u64,
) -> Result<usize, ApiError> {
    let what = format!("an integer between {lo} and {hi}");
    let v = uint(name, n, &what)?;
    if v < lo || v > hi {
        return Err(ApiError::invalid(format!("{name} must be {what}, got {v}")));
    }
    Ok(v as usize)
}

pub(crate) fn number(name: &str, v: &serde_json::Value) -> Result<f64, ApiError> {
    v.as_f64()
        .filter(|x| x.is_finite())
        .ok_or_else(|| ApiError::invalid(format!("{name} must be a number, got {v}")))
}

pub(crate) fn object<'a>(
    name: &str,
    v: &'a serde_json::Value,
    keys: &[&str],
) -> Result<&'a serde_json::Map<String, serde_json::Value>, ApiError> {
    let Some(o) = v.as_object() else {
        return Err(ApiError::invalid(format!(
            "{name} must be an object, got {v}"
        )));
    };
    if let Some(bad) = o.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(ApiError::invalid(format!(
            "{name}: unknown key {bad:?} (known: {})",
            keys.join(", ")
        )));
    }
    Ok(o)
}

pub(crate) fn int_in(
    name: &str,
    v: &serde_json::Value,
    lo: u64,
    hi: u64,
) -> Result<usize, ApiError> {
    match v {
        serde_json::Value::Number(n) => ranged(name, n, lo, hi),
        other => Err(ApiError::invalid(format!(
            "{name} must be an integer between {lo} and {hi}, got {other}"
        ))),
    }
}

/// Query texts longer than this many characters are cut to it (with a warning in the
/// reply) before they are embedded or analysed, so a huge text costs bounded work. The
/// embedder's window (256 tokens for MiniLM) and lexical search (4096 characters, 256
/// distinct terms) read less than this anyway.
pub const MAX_TEXT_CHARS: usize = 8192;

/// A document id from JSON: an unsigned integer or a non-empty string.
pub(crate) fn doc_id(name: &str, v: &serde_json::Value) -> Result<DocId, ApiError> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().map(DocId::Int).ok_or_else(|| {
            ApiError::invalid(format!(
                "{name} must be a document id (a string or an integer >= 0), got {n}"
            ))
        }),
        serde_json::Value::String(s) if !s.is_empty() => Ok(DocId::Str(s.clone())),
        other => Err(ApiError::invalid(format!(
            "{name} must be a document id (a string or an integer >= 0), got {other}"
        ))),
    }
}

pub(crate) fn parse_fields(v: Option<&serde_json::Value>) -> Result<FieldsWanted, ApiError> {
    match v {
        None | Some(serde_json::Value::Bool(false)) | Some(serde_json::Value::Null) => {
            Ok(FieldsWanted::None)
        }
        Some(serde_json::Value::Bool(true)) => Ok(FieldsWanted::All),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str().map(str::to_string).ok_or_else(|| {
                    ApiError::invalid(format!(
                        "fields must be true, false or a list of field names; {x} is not a name"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(FieldsWanted::List),
        Some(other) => Err(ApiError::invalid(format!(
            "fields must be true, false or a list of field names, got {other}"
        ))),
    }
}

/// Largest facet `size`.
pub const MAX_FACET_SIZE: usize = 10_000;
/// Default facet `size` (Elasticsearch's terms aggregation default).
pub const DEFAULT_FACET_SIZE: usize = 10;

/// The keys of a facet given as an object.
pub(crate) const FACET_KEYS: &[&str] = &["field", "size"];

/// `"facets"`: a list of field names or `{"field": F, "size": N}` objects.
pub(crate) fn parse_facets(
    v: Option<&serde_json::Value>,
    name: &str,
) -> Result<Vec<FacetSpec>, ApiError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let Some(list) = v.as_array() else {
        return Err(ApiError::invalid(format!(
            "{name} must be a list of field names or {{\"field\": F, \"size\": N}} objects, got {v}"
        )));
    };
    list.iter()
        .enumerate()
        .map(|(i, f)| {
            let at = format!("{name}[{i}]");
            match f {
                serde_json::Value::String(field) => Ok(FacetSpec {
                    name: field.clone(),
                    field: field.clone(),
                    size: DEFAULT_FACET_SIZE,
                }),
                serde_json::Value::Object(_) => {
                    let o = object(&at, f, FACET_KEYS)?;
                    let Some(field) = o.get("field").and_then(|x| x.as_str()) else {
                        return Err(ApiError::invalid(format!(
                            "{at}.field must be a field name"
                        )));
                    };
                    let size = match o.get("size") {
                        Some(n) => int_in(&format!("{at}.size"), n, 0, MAX_FACET_SIZE as u64)?,
                        None => DEFAULT_FACET_SIZE,
                    };
                    Ok(FacetSpec {
                        name: field.to_string(),
                        field: field.to_string(),
                        size,
                    })
                }
                other => Err(ApiError::invalid(format!(
                    "{at} must be a field name or {{\"field\": F, \"size\": N}}, got {other}"
                ))),
            }
        })
        .collect()
}

pub(crate) fn arrival_of(req: &Request) -> Instant {
    req.extensions()
        .get::<Arrival>()
        .map_or_else(Instant::now, |a| a.0)
}

pub(crate) fn write_id(out: &mut Vec<u8>, id: &DocId, ints: &mut itoa::Buffer) {
    match id {
        DocId::Int(v) => out.extend_from_slice(ints.format(*v).as_bytes()),
        DocId::Str(s) => {
            let _ = serde_json::to_writer(&mut *out, s);
        }
    }
}

/// `{"NAME": {"buckets": [{"count": n, "value": v}], "other_count": n}, ...}`, written
/// straight into `out` (no `serde_json::Value` tree: thousands of buckets made one several
/// times the size of their JSON). Keys come in the order the `Value` objects this replaced
/// wrote them: sorted, the last of two facets of the same name kept.
pub(crate) fn write_facets(out: &mut Vec<u8>, facets: &[FacetOutput]) {
    let by_name: std::collections::BTreeMap<&str, &FacetOutput> =
        facets.iter().map(|f| (f.name.as_str(), f)).collect();
    let mut ints = itoa::Buffer::new();
    out.push(b'{');
    for (i, (name, f)) in by_name.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, name);
        out.extend_from_slice(b":");
        write_buckets(out, &f.buckets, &mut ints);
        out.extend_from_slice(b",\"other_count\":");
        out.extend_from_slice(ints.format(f.other_count).as_bytes());
        out.push(b'}');
    }
    out.push(b'}');
}

/// `{"buckets":[{"count":n,"value":v},...]` (the object left open for what follows).
pub(crate) fn write_buckets(out: &mut Vec<u8>, buckets: &[(String, u64)], ints: &mut itoa::Buffer) {
    out.extend_from_slice(b"{\"buckets\":[");
    for (j, (v, c)) in buckets.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"count\":");
        out.extend_from_slice(ints.format(*c).as_bytes());
        out.extend_from_slice(b",\"value\":");
        let _ = serde_json::to_writer(&mut *out, v);
        out.push(b'}');
    }
    out.push(b']');
}

pub(crate) fn authorize(app: &App, req: &Request) -> Result<(), ApiError> {
    if app.keys.is_some() {
        // The key gate let this request in, so its key's scope covers the route.
        return match req.extensions().get::<crate::auth::Caller>() {
            Some(_) => Ok(()),
            None => Err(ApiError::new(
                Code::Unauthorized,
                "this route needs an API key",
            )),
        };
    }
    match &app.cfg.admin_token {
        Some(token) => {
            let got = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            match got {
                Some(t) if crate::auth::same(t.as_bytes(), token.as_bytes()) => Ok(()),
                Some(_) => Err(ApiError::new(Code::Unauthorized, "wrong admin token")),
                None => Err(ApiError::new(
                    Code::Unauthorized,
                    "admin routes need the header Authorization: Bearer TOKEN",
                )),
            }
        }
        None => {
            let peer = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0);
            match peer {
                Some(p) if p.ip().is_loopback() => Ok(()),
                _ => Err(ApiError::new(
                    Code::Forbidden,
                    "admin routes are accepted only from loopback when the server has no --admin-token",
                )),
            }
        }
    }
}

/// The v1 `/stats` `index` object (kind, n, dim, metric, params, bytes, placement, path) of
/// a backend's info: a bare index's own figures, or a collection's first segment's.
pub(crate) fn v1_index_info(info: &serde_json::Value) -> serde_json::Value {
    let ix = &info["index"];
    if ix.is_null() {
        return info.clone();
    }
    let mut v = serde_json::json!({
        "kind": ix["kind"],
        "n": info["docs"],
        "dim": ix["dim"],
        "metric": ix["metric"],
        "params": ix["params"],
        "bytes": info["bytes"],
        "placement": ix["placement"],
        "path": info["path"],
    });
    if info["kind"] == "collection" {
        v["collection"] = info.clone();
    }
    v
}

/// A duration in milliseconds with microsecond precision, for JSON (`0.08`, not
/// `0.07993800000000001`).
pub(crate) fn ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod facet_tests {
    use super::*;

    #[test]
    fn direct_facets_are_byte_for_byte_the_value_tree() {
        let facets = vec![
            FacetOutput {
                name: "tags".into(),
                field: "tags".into(),
                buckets: vec![("b\"\u{e9}".into(), 5), ("a".into(), 5)],
                other_count: 9,
            },
            FacetOutput {
                name: "brand".into(),
                field: "brand".into(),
                buckets: vec![],
                other_count: 0,
            },
            FacetOutput {
                name: "tags".into(),
                field: "tags".into(),
                buckets: vec![("c".into(), 1)],
                other_count: 2,
            },
        ];
        let mut m = serde_json::Map::new();
        for f in &facets {
            m.insert(
                f.name.clone(),
                serde_json::json!({
                    "buckets": f.buckets.iter().map(|(v, c)| serde_json::json!({"value": v, "count": c})).collect::<Vec<_>>(),
                    "other_count": f.other_count,
                }),
            );
        }
        let want = serde_json::to_string(&m).unwrap();
        let mut got = Vec::new();
        write_facets(&mut got, &facets);
        assert_eq!(String::from_utf8(got).unwrap(), want);
        let mut got = Vec::new();
        write_facets(&mut got, &[]);
        assert_eq!(got, b"{}");
    }
}
