//! The native search routes (`POST /search`, `/collections/{name}/search`) and the
//! collection routes (`GET /collections`, `/collections/{name}`, `/collections/{name}/docs/{id}`):
//! wire shapes only; the work is `query::perform_search`.

use std::sync::{Arc, LazyLock};
use std::time::Instant;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use searchd_collection::fusion::{self, Fusion, Normalize};
use searchd_collection::DocId;
use searchd_engine::MAX_K;
use serde::Deserialize;

use crate::backend::FieldsWanted;
use crate::error::ApiError;
use crate::query::{
    backend_error, cached, explain_json, perform_search, Answer, Ask, CommonOptions, Mode,
    SearchSpec, COMMON_KEYS,
};
use crate::state::{App, Slot};
use crate::wire::{
    arrival_of, doc_id, int_in, json_error, json_response, number, object, parse_facets,
    parse_fields, ranged, read_body, uint, write_facets, write_id, DEFAULT_K, MAX_EF,
    MAX_TEXT_CHARS,
};

/// The native search body. Deserialized by hand so that it takes its own keys and the
/// keys every search route shares ([`COMMON_KEYS`], parsed by `query::CommonOptions`), and
/// refuses any other key as serde's `deny_unknown_fields` would.
#[derive(Default)]
struct SearchBody {
    /// Parsed as f64 and narrowed afterwards, so a value beyond float32's range becomes a
    /// clear "not a finite number" error whatever serde_json features the build unifies
    /// (with `arbitrary_precision`, parsing 1e39 straight into f32 fails as "out of range").
    vector: Option<Vec<f64>>,
    qidx: Option<serde_json::Number>,
    id: Option<serde_json::Value>,
    text: Option<serde_json::Value>,
    k: Option<serde_json::Number>,
    ef: Option<serde_json::Number>,
    fields: Option<serde_json::Value>,
    mode: Option<String>,
    fusion: Option<serde_json::Value>,
    filter: Option<serde_json::Value>,
    facets: Option<serde_json::Value>,
    /// The [`COMMON_KEYS`] given, with their values.
    common: Vec<(String, serde_json::Value)>,
}

/// The native body's own keys.
pub(crate) const OWN_KEYS: &[&str] = &[
    "vector", "qidx", "id", "text", "k", "ef", "fields", "mode", "fusion", "filter", "facets",
];

/// Every key the native body takes (for the unknown-key message).
static SEARCH_BODY_KEYS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| OWN_KEYS.iter().chain(COMMON_KEYS).copied().collect());

impl<'de> Deserialize<'de> for SearchBody {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SearchBody, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = SearchBody;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("struct SearchBody")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<SearchBody, A::Error> {
                use serde::de::Error;
                let mut b = SearchBody::default();
                while let Some(key) = m.next_key::<String>()? {
                    macro_rules! set {
                        ($f:ident) => {{
                            if b.$f.is_some() {
                                return Err(A::Error::duplicate_field(stringify!($f)));
                            }
                            b.$f = m.next_value()?;
                        }};
                    }
                    match key.as_str() {
                        "vector" => set!(vector),
                        "qidx" => set!(qidx),
                        "id" => set!(id),
                        "text" => set!(text),
                        "k" => set!(k),
                        "ef" => set!(ef),
                        "fields" => set!(fields),
                        "mode" => set!(mode),
                        "fusion" => set!(fusion),
                        "filter" => set!(filter),
                        "facets" => set!(facets),
                        other => {
                            let Some(&name) = COMMON_KEYS.iter().find(|&&c| c == other) else {
                                return Err(A::Error::unknown_field(other, &SEARCH_BODY_KEYS));
                            };
                            if b.common.iter().any(|(n, _)| n == name) {
                                return Err(A::Error::duplicate_field(name));
                            }
                            let v: serde_json::Value = m.next_value()?;
                            b.common.push((key, v));
                        }
                    }
                }
                Ok(b)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// The fusion of a hybrid search when the request gives none: RRF with rank constant 60
/// over 100 candidates per side (docs/lexical-and-hybrid.md gives the measurements
/// behind this choice).
pub const DEFAULT_FUSION: Fusion = fusion::DEFAULT_FUSION;

/// The keys of `fusion`.
pub(crate) const FUSION_KEYS: &[&str] = &["method", "k", "window", "weights", "normalize"];
/// The keys of `fusion.weights`.
pub(crate) const FUSION_WEIGHT_KEYS: &[&str] = &["dense", "lexical"];

/// `fusion`: `{"method": "rrf", "k": 60, "window": 100}` or `{"method": "weighted",
/// "weights": {"dense": 0.7, "lexical": 0.3}, "normalize": "minmax"|"zscore", "window": 100}`.
fn parse_fusion(v: Option<&serde_json::Value>) -> Result<(Fusion, usize), ApiError> {
    let Some(v) = v else {
        return Ok((DEFAULT_FUSION, fusion::DEFAULT_WINDOW));
    };
    let o = object("fusion", v, FUSION_KEYS)?;
    let window = match o.get("window") {
        Some(w) => int_in("fusion.window", w, 1, fusion::MAX_WINDOW as u64)?,
        None => fusion::DEFAULT_WINDOW,
    };
    let method = match o.get("method") {
        None => "rrf",
        Some(serde_json::Value::String(m)) => m.as_str(),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "fusion.method must be \"rrf\" or \"weighted\", got {other}"
            )))
        }
    };
    let f = match method {
        "rrf" => {
            if let Some(k) = ["weights", "normalize"]
                .iter()
                .find(|k| o.contains_key(**k))
            {
                return Err(ApiError::invalid(format!(
                    "fusion.{k} applies to method \"weighted\", not \"rrf\""
                )));
            }
            Fusion::Rrf {
                rank_constant: match o.get("k") {
                    Some(k) => int_in("fusion.k", k, 1, 1_000_000)? as u32,
                    None => fusion::DEFAULT_RANK_CONSTANT,
                },
            }
        }
        "weighted" | "linear" => {
            if o.contains_key("k") {
                return Err(ApiError::invalid(
                    "fusion.k (the RRF rank constant) applies to method \"rrf\", not \"weighted\"",
                ));
            }
            let (dense, lexical) = match o.get("weights") {
                None => (0.5, 0.5),
                Some(w) => {
                    let wo = object("fusion.weights", w, FUSION_WEIGHT_KEYS)?;
                    let get = |side: &str| match wo.get(side) {
                        Some(x) => number(&format!("fusion.weights.{side}"), x),
                        None => Ok(0.0),
                    };
                    (get("dense")?, get("lexical")?)
                }
            };
            let normalize = match o.get("normalize") {
                None => Normalize::MinMax,
                Some(serde_json::Value::String(n)) => Normalize::parse(n).ok_or_else(|| {
                    ApiError::invalid(format!(
                        "fusion.normalize must be \"minmax\" or \"zscore\", got {n:?}"
                    ))
                })?,
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "fusion.normalize must be \"minmax\" or \"zscore\", got {other}"
                    )))
                }
            };
            Fusion::Weighted {
                dense: dense as f32,
                lexical: lexical as f32,
                normalize,
            }
        }
        m => {
            return Err(ApiError::invalid(format!(
                "unknown fusion method {m:?}; methods are \"rrf\" and \"weighted\""
            )))
        }
    };
    f.validate().map_err(ApiError::invalid)?;
    Ok((f, window))
}

fn parse_search(body: &[u8], default_ef: usize) -> Result<SearchSpec, ApiError> {
    let b: SearchBody = serde_json::from_slice(body).map_err(|e| json_error(e, body))?;
    let given: Vec<&str> = [
        ("vector", b.vector.is_some()),
        ("qidx", b.qidx.is_some()),
        ("id", b.id.is_some()),
        ("text", b.text.is_some()),
    ]
    .iter()
    .filter(|(_, g)| *g)
    .map(|(n, _)| *n)
    .collect();
    if given.len() != 1 {
        return Err(ApiError::invalid(if given.is_empty() {
            "give exactly one of vector, qidx, id or text; none was given".to_string()
        } else {
            format!(
                "give exactly one of vector, qidx, id or text; got {}",
                given.join(" and ")
            )
        }));
    }
    let k = match &b.k {
        Some(n) => ranged("k", n, 1, MAX_K as u64)?,
        None => DEFAULT_K,
    };
    let ef = match &b.ef {
        Some(n) => ranged("ef", n, 1, MAX_EF as u64)?,
        None => default_ef,
    };
    let mode = match b.mode.as_deref() {
        None => None,
        Some("dense") => Some(Mode::Dense),
        Some("lexical") => Some(Mode::Lexical),
        Some("hybrid") => Some(Mode::Hybrid),
        Some(m) => {
            return Err(ApiError::invalid(format!(
                "unknown mode {m:?}; modes are \"dense\", \"lexical\" and \"hybrid\""
            )))
        }
    };
    if b.fusion.is_some() && mode.is_some_and(|m| m != Mode::Hybrid) {
        return Err(ApiError::invalid("fusion applies to mode \"hybrid\" only"));
    }
    let (fusion, window) = parse_fusion(b.fusion.as_ref())?;
    let common =
        CommonOptions::parse(|key| b.common.iter().find(|(n, _)| n == key).map(|(_, v)| v))?;
    let facets = parse_facets(b.facets.as_ref(), "facets")?;
    let fields = parse_fields(b.fields.as_ref())?;
    let mut text_cut = false;
    let ask = if let Some(v) = b.vector {
        Ask::Vector(v.into_iter().map(|x| x as f32).collect())
    } else if let Some(q) = &b.qidx {
        Ask::Qidx(uint("qidx", q, "a row number (an integer >= 0)")?)
    } else if let Some(id) = &b.id {
        Ask::Id(doc_id("id", id)?)
    } else if let Some(t) = &b.text {
        let Some(t) = t.as_str() else {
            return Err(ApiError::invalid(format!("text must be a string, got {t}")));
        };
        if t.trim().is_empty() {
            return Err(ApiError::invalid("text is empty"));
        }
        let t = match t.char_indices().nth(MAX_TEXT_CHARS) {
            Some((cut, _)) => {
                text_cut = true;
                &t[..cut]
            }
            None => t,
        };
        Ask::Text(t.to_string())
    } else {
        unreachable!("exactly one was given")
    };
    if !matches!(ask, Ask::Text(_)) {
        if let Some(m @ (Mode::Lexical | Mode::Hybrid)) = mode {
            return Err(ApiError::invalid(format!(
                "mode {:?} searches text: give \"text\", not a vector, qidx or id",
                m.name()
            )));
        }
    }
    common.check(&ask, k)?;
    Ok(SearchSpec {
        ask,
        k,
        ef,
        fields,
        mode,
        fusion,
        window,
        text_cut,
        filter: b.filter,
        facets,
        common,
    })
}

// ---------------------------------------------------------------------------------------
// POST /search, POST /collections/{name}/search

pub(crate) async fn search(State(app): State<Arc<App>>, req: Request) -> Response {
    let slot = app.slots()[0].clone();
    search_on(&app, &slot, req).await
}

pub(crate) async fn collection_search(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    match app.slot(&name) {
        Ok(slot) => search_on(&app, &slot, req).await,
        Err(e) => e.into_response(),
    }
}

async fn search_on(app: &App, slot: &Slot, req: Request) -> Response {
    let arrival = arrival_of(&req);
    let uri = req.uri().clone();
    let body = match read_body(app, req).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    // The deadline starts when the body has arrived (took_us counts from the headers).
    let body_arrived = Instant::now();
    cached(app, slot, "search", &uri, &body, || async {
        // A large body (thousands of facets) is parsed off the I/O thread.
        let large = body.len() >= crate::render::OFFLOAD_BODY_BYTES;
        let (b, ef) = (body.clone(), app.cfg.ef);
        let spec = app
            .renders
            .offload_if(body_arrived + app.cfg.timeout, large, move || {
                parse_search(&b, ef)
            })
            .await??;
        let a = perform_search(app, slot, spec, body_arrived + app.cfg.timeout).await?;
        let took = arrival.elapsed().as_micros() as u64;
        Ok(answer_json(&a, took))
    })
    .await
}

const LEXICAL_TRUNCATED: &[u8] = b"\"the query text is longer than lexical search reads (4096 characters, 256 distinct terms); the rest was ignored\"";

/// `{"hits":[{"id":..,"score":..[,"fields":{..}]}],"took_us":..,"timings_us":{..},"mode":..}`
/// written directly into one buffer.
pub(crate) fn answer_json(a: &Answer, took_us: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + a.hits.len() * 40);
    let mut ints = itoa::Buffer::new();
    let mut floats = ryu::Buffer::new();
    out.extend_from_slice(b"{\"hits\":[");
    for (i, h) in a.hits.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"id\":");
        write_id(&mut out, &h.id, &mut ints);
        out.extend_from_slice(b",\"score\":");
        if h.score.is_finite() {
            out.extend_from_slice(floats.format_finite(h.score).as_bytes());
        } else {
            out.extend_from_slice(b"null");
        }
        if let Some(f) = &h.fields {
            out.extend_from_slice(b",\"fields\":");
            out.extend_from_slice(f);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"took_us\":");
    out.extend_from_slice(ints.format(took_us).as_bytes());
    out.extend_from_slice(b",\"timings_us\":{\"embed\":");
    out.extend_from_slice(ints.format(a.embed_us).as_bytes());
    out.extend_from_slice(b",\"search\":");
    out.extend_from_slice(ints.format(a.search_us).as_bytes());
    for (name, us) in [
        (&b",\"dense\":"[..], a.stages.dense_us),
        (b",\"lexical\":", a.stages.lexical_us),
        (b",\"fuse\":", a.stages.fuse_us),
        (b",\"rerank\":", a.rerank_us),
    ] {
        out.extend_from_slice(name);
        out.extend_from_slice(ints.format(us).as_bytes());
    }
    out.push(b'}');
    out.extend_from_slice(b",\"mode\":\"");
    out.extend_from_slice(a.mode.name().as_bytes());
    out.push(b'"');
    if a.embed_batch > 0 {
        out.extend_from_slice(b",\"embed_batch\":");
        out.extend_from_slice(ints.format(a.embed_batch).as_bytes());
    }
    if let Some(p) = &a.plan {
        out.extend_from_slice(b",\"plan\":");
        let _ = serde_json::to_writer(&mut out, p);
    }
    if let Some(m) = a.matched {
        out.extend_from_slice(b",\"matched\":");
        out.extend_from_slice(ints.format(m).as_bytes());
    }
    if !a.facets.is_empty() {
        out.extend_from_slice(b",\"facets\":");
        write_facets(&mut out, &a.facets);
    }
    if a.skipped_probes > 0 {
        // Partitions still loading at the deadline were skipped: the answer comes from the
        // resident ones.
        out.extend_from_slice(
            format!(",\"degraded\":true,\"skipped_probes\":{}", a.skipped_probes).as_bytes(),
        );
    }
    if let Some(e) = explain_json(a) {
        out.extend_from_slice(b",\"explain\":");
        let _ = serde_json::to_writer(&mut out, &e);
    }
    let mut warnings: Vec<&[u8]> = Vec::new();
    if a.truncated {
        warnings.push(b"\"the query text is longer than the model's window and was truncated\"");
    }
    if a.text_cut {
        warnings.push(
            b"\"the query text is longer than 8192 characters; only the first 8192 were used\"",
        );
    }
    if a.lexical_truncated {
        warnings.push(LEXICAL_TRUNCATED);
    }
    if !warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":[");
        out.extend_from_slice(&warnings.join(&b","[..]));
        out.push(b']');
    }
    out.push(b'}');
    out
}

// ---------------------------------------------------------------------------------------
// GET /collections, /collections/{name}, /collections/{name}/docs/{id}

pub(crate) async fn collections(
    State(app): State<Arc<App>>,
    caller: Option<axum::Extension<crate::auth::Caller>>,
) -> Response {
    let slots = app.slots();
    let list: Vec<serde_json::Value> = slots
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "ready": s.backend.load().is_some(),
                "info": s.backend.load_full().map(|b| b.info()),
                "state": if s.failed.load().is_some() { "failed" } else if s.backend.load().is_some() { "ok" } else { "loading" },
                "reason": s.failed.load_full().map(|w| (*w).clone()),
            })
        })
        .collect();
    let mut v = serde_json::json!({ "collections": list, "default": slots[0].name });
    if !crate::auth::sees_paths(app.keys.is_some(), caller.as_deref()) {
        crate::auth::redact_paths(&mut v);
    }
    json_response(StatusCode::OK, serde_json::to_vec(&v).unwrap_or_default())
}

pub(crate) async fn collection_info(
    State(app): State<Arc<App>>,
    caller: Option<axum::Extension<crate::auth::Caller>>,
    Path(name): Path<String>,
) -> Response {
    match app.slot(&name) {
        Ok(slot) => match slot.backend_or_503() {
            Ok(b) => {
                let mut v = serde_json::json!({"name": slot.name, "info": b.info()});
                if !crate::auth::sees_paths(app.keys.is_some(), caller.as_deref()) {
                    crate::auth::redact_paths(&mut v);
                }
                json_response(StatusCode::OK, serde_json::to_vec(&v).unwrap_or_default())
            }
            Err(e) => e.into_response(),
        },
        Err(e) => e.into_response(),
    }
}

pub(crate) async fn get_doc(
    State(app): State<Arc<App>>,
    Path((name, id)): Path<(String, String)>,
) -> Response {
    let slot = match app.slot(&name) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let backend = match slot.backend_or_503() {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    if id.is_empty() {
        return ApiError::invalid("the document id is empty").into_response();
    }
    // A path segment cannot tell "17" from 17: the backend looks up both.
    let doc = DocId::Str(id);
    match backend.get(doc, FieldsWanted::All).await {
        Ok(d) => {
            let mut out = Vec::with_capacity(d.fields.len() + 32);
            let mut ints = itoa::Buffer::new();
            out.extend_from_slice(b"{\"id\":");
            write_id(&mut out, &d.id, &mut ints);
            out.extend_from_slice(b",\"fields\":");
            out.extend_from_slice(&d.fields);
            out.push(b'}');
            json_response(StatusCode::OK, out)
        }
        Err(e) => backend_error(&app, e).into_response(),
    }
}
