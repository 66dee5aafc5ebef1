#![allow(dead_code)]
//! The contract suite's replies checked against the server's OpenAPI document
//! (`GET /openapi.json`):
//!
//! - the request's path is matched to the document's templated paths (`/{name}/_search`),
//!   a literal segment winning over a parameter as in the router;
//! - the reply's status must be listed for that path and method, with the reply's media
//!   type; a JSON body is validated (JSON Schema 2020-12, the document's
//!   `components.schemas` as the root of its `$ref`s) against that status's schema;
//! - a status with no reply in the document fails the test, with one exception: the
//!   router's fallbacks, which the document cannot list, 404 for a path no template matches
//!   and 405 for a method the path does not take, must be the error shape ([`ERROR`]);
//! - reply schemas are held closed: a key the document does not list fails ([`closed`]);
//! - every check is counted per server, so a test can assert that the validation ran.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

/// The error reply's schema, for the router's fallbacks.
pub const ERROR: &str = "#/components/schemas/ErrorReply";

/// The document, fetched once from the first server asked (it does not depend on the
/// server's configuration).
static DOC: OnceLock<Arc<Value>> = OnceLock::new();

/// Validated replies per server (its base URL).
static COUNTS: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();

fn counts() -> &'static Mutex<HashMap<String, usize>> {
    COUNTS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The document of the server at `base` (`http://127.0.0.1:PORT`).
pub async fn document(c: &reqwest::Client, base: &str) -> Arc<Value> {
    if let Some(d) = DOC.get() {
        return d.clone();
    }
    let r = c.get(format!("{base}/openapi.json")).send().await.unwrap();
    assert_eq!(r.status(), 200, "GET /openapi.json");
    assert_eq!(
        r.headers()["content-type"],
        "application/json",
        "GET /openapi.json"
    );
    let v: Value = r.json().await.unwrap();
    check_document(&v);
    let _ = DOC.set(Arc::new(v));
    DOC.get().unwrap().clone()
}

/// The document is OpenAPI 3.1 with paths and component schemas.
pub fn check_document(doc: &Value) {
    let version = doc["openapi"].as_str().unwrap_or("");
    assert!(version.starts_with("3.1."), "openapi is {version:?}");
    assert!(doc["info"]["version"].is_string(), "info.version");
    assert!(
        doc["paths"].as_object().is_some_and(|p| p.len() >= 30),
        "paths"
    );
    assert!(
        doc["components"]["schemas"]
            .as_object()
            .is_some_and(|s| s.contains_key("ErrorReply")),
        "components.schemas"
    );
}

/// The document's path template for `path`: same number of segments, each literal equal
/// or a `{param}`; of several, the one whose first differing segment is literal.
pub fn template_of<'d>(doc: &'d Value, path: &str) -> Option<&'d str> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut best: Option<(&str, Vec<bool>)> = None;
    for t in doc["paths"].as_object()?.keys() {
        let tsegs: Vec<&str> = t.trim_start_matches('/').split('/').collect();
        if tsegs.len() != segs.len() {
            continue;
        }
        let mut literal = Vec::with_capacity(tsegs.len());
        let fits = tsegs.iter().zip(&segs).all(|(t, s)| {
            let param = t.starts_with('{') && t.ends_with('}');
            literal.push(!param);
            if param {
                !s.is_empty()
            } else {
                t == s
            }
        });
        if fits && best.as_ref().is_none_or(|(_, b)| literal > *b) {
            best = Some((t.as_str(), literal));
        }
    }
    best.map(|(t, _)| t)
}

/// Validate one reply: `method` `url` answered `status` with `content_type` and `body`
/// (the parsed JSON, when it is JSON). Panics naming what does not match.
pub fn check(
    doc: &Value,
    method: &str,
    url: &str,
    status: u16,
    content_type: &str,
    body: Option<&Value>,
) {
    let u = reqwest::Url::parse(url).unwrap();
    let origin = u.origin().ascii_serialization();
    let path = u.path();
    let what = format!("{method} {path} -> {status}");
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let fallback = |expected: u16| {
        assert_eq!(
            status, expected,
            "{what}: not in the OpenAPI document, so only the router's fallback ({expected}) may answer"
        );
        assert_eq!(
            mime, "application/json",
            "{what}: the fallback's media type"
        );
        validate(doc, ERROR, body.expect("a JSON body"), &what);
    };
    match template_of(doc, path) {
        None => fallback(404),
        Some(t) => match doc["paths"][t].get(method.to_ascii_lowercase()) {
            None => fallback(405),
            Some(op) => {
                let Some(reply) = op["responses"].get(status.to_string()) else {
                    panic!(
                        "{what} ({method} {t}): the OpenAPI document lists no reply for status {status}"
                    )
                };
                let content = reply["content"].as_object();
                let Some(media) = content.and_then(|c| c.get(&mime)) else {
                    panic!(
                        "{what} ({method} {t}): media type {mime:?} is not among the documented {:?}",
                        content.map(|c| c.keys().collect::<Vec<_>>())
                    )
                };
                if mime == "application/json" {
                    let body =
                        body.unwrap_or_else(|| panic!("{what}: a JSON reply that is not JSON"));
                    let schema = &media["schema"];
                    let text = schema.to_string();
                    assert!(text != "null", "{what}: no schema");
                    validate_inline(doc, schema, body, &format!("{what} ({method} {t})"));
                }
            }
        },
    }
    *counts().lock().unwrap().entry(origin).or_default() += 1;
}

/// Validate `body` against the component schema at `pointer`.
fn validate(doc: &Value, pointer: &str, body: &Value, what: &str) {
    validate_inline(doc, &serde_json::json!({ "$ref": pointer }), body, what);
}

/// The document's components with every object schema that lists its properties and says
/// nothing of others closed (`additionalProperties: false`): the published document leaves
/// replies open to additions, the suite holds the server to what the document lists, so a
/// reply key added without documenting it fails here.
fn closed(components: &Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(o) => {
                let object = match o.get("type") {
                    Some(Value::String(t)) => t == "object",
                    Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                    _ => false,
                };
                if object
                    && o.get("properties").is_some_and(Value::is_object)
                    && !o.contains_key("additionalProperties")
                {
                    o.insert("additionalProperties".into(), Value::Bool(false));
                }
                o.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut c = components.clone();
    walk(&mut c);
    c
}

/// Validate `body` against `schema`, its `$ref`s resolved in the document's components.
fn validate_inline(doc: &Value, schema: &Value, body: &Value, what: &str) {
    static COMPONENTS: OnceLock<Value> = OnceLock::new();
    let components = COMPONENTS.get_or_init(|| closed(&doc["components"]));
    let mut root = schema.clone();
    if let Some(o) = root.as_object_mut() {
        o.insert("components".into(), components.clone());
    } else {
        panic!("{what}: schema is not an object: {schema}");
    }
    let v = jsonschema::validator_for(&root)
        .unwrap_or_else(|e| panic!("{what}: the document's schema does not compile: {e}"));
    let errors: Vec<String> = v
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: the reply does not match the OpenAPI document:\n  {}\nreply: {body}",
        errors.join("\n  ")
    );
}

/// How many replies of the server at `base` were validated.
pub fn validated(base: &str) -> usize {
    let origin = reqwest::Url::parse(base)
        .unwrap()
        .origin()
        .ascii_serialization();
    counts().lock().unwrap().get(&origin).copied().unwrap_or(0)
}

/// Assert that at least `floor` replies of the server at `base` were validated.
#[track_caller]
pub fn assert_validated(base: &str, floor: usize) {
    let n = validated(base);
    assert!(
        n >= floor,
        "only {n} replies of {base} were validated against the OpenAPI document (want >= {floor})"
    );
}

/// Send `rb`, validate the reply and return it as the common helpers do: status,
/// headers and the JSON body (`Value::Null` for a reply that is not JSON, checked for its
/// media type only).
pub async fn send(
    c: &reqwest::Client,
    rb: reqwest::RequestBuilder,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let (status, headers, text, v) = send_raw(c, rb).await;
    let ct = content_type(&headers);
    if ct.starts_with("application/json") && v.is_none() {
        panic!("reply is not JSON: {text:?} (status {status})");
    }
    (status, headers, v.unwrap_or(Value::Null))
}

/// [`send`], returning the body's text too (for replies that are not JSON).
pub async fn send_raw(
    c: &reqwest::Client,
    rb: reqwest::RequestBuilder,
) -> (u16, reqwest::header::HeaderMap, String, Option<Value>) {
    let req = rb.build().unwrap();
    let method = req.method().as_str().to_string();
    let url = req.url().clone();
    let r = c.execute(req).await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    let ct = content_type(&headers);
    let v = if ct.starts_with("application/json") {
        serde_json::from_str::<Value>(&text).ok()
    } else {
        None
    };
    let base = url.origin().ascii_serialization();
    let doc = document(c, &base).await;
    check(&doc, &method, url.as_str(), status, &ct, v.as_ref());
    (status, headers, text, v)
}

fn content_type(h: &reqwest::header::HeaderMap) -> String {
    h.get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}
