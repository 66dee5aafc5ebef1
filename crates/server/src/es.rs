//! Elasticsearch-compatible reads: `/{name}/_search`, `/_count`, `/_doc/{id}`, `/_mget`,
//! a thin translation onto the same backend operations as the native routes, replying in
//! Elasticsearch's response shapes.
//!
//! Supported in `_search`: `query` (the filter language, `match_all`, and one `match` on
//! the text field — alone or as the `must` of a `bool` whose other clauses filter), `knn`
//! (`field`, `query_vector`, `k`, `num_candidates` as the HNSW list size, `filter`),
//! `knn` with a `match` query fused by `rank: {"rrf": {...}}`, `sort`, `search_after`,
//! `from`/`size` (`from + size <= 10000`), `track_total_hits`, `_source` (bool, field list,
//! `includes`/`excludes`) and `aggs`/`aggregations` of type `terms` (`field`, `size`).
//! Anything else is refused up front with a 400 naming it — never ignored.
//!
//! Deviations, documented in docs/queries-and-filters.md: a filter-only query scores every hit 1.0 (like
//! `constant_score`) and orders by `_id` unless sorted; `aggs` with `knn` or `match` count
//! over the returned hits' window (`k`, or `from + size`), as Elasticsearch does for kNN;
//! integer ids are shown as strings in `_id` (Elasticsearch ids are strings).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use searchd_collection::fusion::Fusion;
use searchd_collection::DocId;

use crate::backend::{FacetSpec, FieldsWanted, ReadOutput, MAX_RESULT_WINDOW};
use crate::error::{ApiError, Code};
use crate::es_reply::{large_reply, reply_capacity, write_hit, write_search, TrackTotal};
use crate::query::{
    backend_error, backend_of, explain_json, parse_filter, parse_optional_filter, parse_page,
    perform_search, read_request, run_read, Ask, BodyRule, CommonOptions, JsonObject, Mode, Read,
    SearchSpec, COMMON_KEYS,
};
use crate::state::App;
use crate::wire::json_response;

/// The keys of a `_search` body this layer understands.
const SEARCH_KEYS: &[&str] = &[
    "query",
    "knn",
    "rank",
    "sort",
    "search_after",
    "from",
    "size",
    "track_total_hits",
    "_source",
    "aggs",
    "aggregations",
    "timeout",
];

/// Elasticsearch `_search` keys that exist but are not supported here (named in the 400).
const KNOWN_UNSUPPORTED: &[&str] = &[
    "script_fields",
    "docvalue_fields",
    "stored_fields",
    "fields",
    "highlight",
    "suggest",
    "rescore",
    "collapse",
    "post_filter",
    "min_score",
    "indices_boost",
    "pit",
    "runtime_mappings",
    "profile",
    "version",
    "seq_no_primary_term",
    "track_scores",
    "terminate_after",
    "stats",
    "slice",
    "retriever",
];

fn unsupported(path: &str, what: &str) -> ApiError {
    ApiError::invalid(format!(
        "{path}: {what} is not supported by searchd's Elasticsearch-compatible layer \
         (docs/queries-and-filters.md \"Elasticsearch-compatible reads\" lists what is)"
    ))
}

/// An Elasticsearch body: empty reads as `{}`; keys outside `keys` are refused (as
/// unsupported when Elasticsearch has them).
fn es_body(body: &[u8], keys: &[&str]) -> Result<JsonObject, ApiError> {
    let m = body_object(body)?;
    check_keys(&m, keys, "")?;
    Ok(m)
}

const fn es_rule(keys: &'static [&'static str]) -> BodyRule<'static> {
    BodyRule {
        optional: true,
        keys,
        parse: es_body,
    }
}

/// The body of `_search`: [`SEARCH_KEYS`] and the pipeline's [`COMMON_KEYS`].
pub(crate) fn search_rule() -> BodyRule<'static> {
    static KEYS: std::sync::LazyLock<Vec<&'static str>> =
        std::sync::LazyLock::new(|| SEARCH_KEYS.iter().chain(COMMON_KEYS).copied().collect());
    es_rule(&KEYS)
}
/// The body of `_count`.
pub(crate) const COUNT: BodyRule<'static> = es_rule(&["query"]);
/// The body of `_mget`.
pub(crate) const MGET: BodyRule<'static> = es_rule(&["ids", "docs"]);

fn body_object(body: &[u8]) -> Result<JsonObject, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(other) => Err(ApiError::invalid(format!(
            "the body must be a JSON object, got {other}"
        ))),
        Err(e) => Err(crate::wire::json_error(e, body)),
    }
}

fn check_keys(
    m: &serde_json::Map<String, serde_json::Value>,
    known: &[&str],
    path: &str,
) -> Result<(), ApiError> {
    for k in m.keys() {
        if known.contains(&k.as_str()) {
            continue;
        }
        let at = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        if KNOWN_UNSUPPORTED.contains(&k.as_str()) {
            return Err(unsupported(&at, &format!("{k:?}")));
        }
        return Err(ApiError::invalid(format!(
            "{at}: unknown key {k:?} (known: {})",
            known.join(", ")
        )));
    }
    Ok(())
}

fn usize_at(v: &serde_json::Value, path: &str, max: usize) -> Result<usize, ApiError> {
    match v.as_u64() {
        Some(n) if n as usize <= max => Ok(n as usize),
        _ => Err(ApiError::invalid(format!(
            "{path} must be an integer between 0 and {max}, got {v}"
        ))),
    }
}

/// `_source`: what to return of each hit's stored fields.
#[derive(Debug, Clone)]
enum Source {
    None,
    All,
    Includes(Vec<String>),
    Filter {
        includes: Vec<String>,
        excludes: Vec<String>,
    },
}

fn names(v: &serde_json::Value, path: &str) -> Result<Vec<String>, ApiError> {
    match v {
        serde_json::Value::String(s) => Ok(vec![s.clone()]),
        serde_json::Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::invalid(format!("{path}: {x} is not a field name")))
            })
            .collect(),
        other => Err(ApiError::invalid(format!(
            "{path} must be a field name or a list of names, got {other}"
        ))),
    }
}

fn parse_source(v: Option<&serde_json::Value>) -> Result<Source, ApiError> {
    let Some(v) = v else { return Ok(Source::All) };
    let wild = |n: &[String]| n.iter().any(|x| x.contains('*'));
    let s = match v {
        serde_json::Value::Bool(true) => Source::All,
        serde_json::Value::Bool(false) => Source::None,
        serde_json::Value::Object(o) => {
            check_keys(o, &["includes", "excludes"], "_source")?;
            let includes = match o.get("includes") {
                Some(x) => names(x, "_source.includes")?,
                None => Vec::new(),
            };
            let excludes = match o.get("excludes") {
                Some(x) => names(x, "_source.excludes")?,
                None => Vec::new(),
            };
            if wild(&includes) || wild(&excludes) {
                return Err(unsupported("_source", "a wildcard pattern"));
            }
            Source::Filter { includes, excludes }
        }
        other => {
            let n = names(other, "_source")?;
            if wild(&n) {
                return Err(unsupported("_source", "a wildcard pattern"));
            }
            Source::Includes(n)
        }
    };
    Ok(s)
}

impl Source {
    fn wanted(&self) -> FieldsWanted {
        match self {
            Source::None => FieldsWanted::None,
            Source::Includes(n) => FieldsWanted::List(n.clone()),
            Source::All | Source::Filter { .. } => FieldsWanted::All,
        }
    }
    /// The `_source` of a hit from its stored fields.
    fn render(&self, fields: Option<&[u8]>) -> Option<serde_json::Value> {
        let f = fields?;
        let mut v: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(f).unwrap_or_default();
        if let Source::Filter { includes, excludes } = self {
            if !includes.is_empty() {
                v.retain(|k, _| includes.contains(k));
            }
            v.retain(|k, _| !excludes.contains(k));
        }
        Some(serde_json::Value::Object(v))
    }
}

/// `aggs`: terms aggregations only.
fn parse_aggs(v: Option<&serde_json::Value>, path: &str) -> Result<Vec<FacetSpec>, ApiError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let Some(o) = v.as_object() else {
        return Err(ApiError::invalid(format!(
            "{path} must be an object of named aggregations"
        )));
    };
    let mut out = Vec::new();
    for (name, agg) in o {
        let at = format!("{path}.{name}");
        let Some(a) = agg.as_object() else {
            return Err(ApiError::invalid(format!("{at} must be an object")));
        };
        for (kind, body) in a {
            if kind != "terms" {
                return Err(unsupported(
                    &format!("{at}.{kind}"),
                    &format!("the {kind:?} aggregation (only \"terms\" is)"),
                ));
            }
            let Some(t) = body.as_object() else {
                return Err(ApiError::invalid(format!("{at}.terms must be an object")));
            };
            check_keys(t, &["field", "size"], &format!("{at}.terms"))?;
            let Some(field) = t.get("field").and_then(|f| f.as_str()) else {
                return Err(ApiError::invalid(format!(
                    "{at}.terms.field: give the keyword field"
                )));
            };
            let size = match t.get("size") {
                Some(s) => usize_at(s, &format!("{at}.terms.size"), crate::wire::MAX_FACET_SIZE)?,
                None => crate::wire::DEFAULT_FACET_SIZE,
            };
            out.push(FacetSpec {
                name: name.clone(),
                field: field.to_string(),
                size,
            });
        }
        if a.len() > 1 {
            return Err(unsupported(&at, "sub-aggregations or several types in one"));
        }
    }
    Ok(out)
}

/// What `query` asks for: a text `match` (on the text field) and/or a filter.
struct QueryParts {
    text: Option<String>,
    filter: Option<serde_json::Value>,
}

fn match_text(
    m: &serde_json::Value,
    path: &str,
    text_field: Option<&str>,
) -> Result<String, ApiError> {
    let Some(o) = m.as_object().filter(|o| o.len() == 1) else {
        return Err(ApiError::invalid(format!(
            "{path} must name one field: {{\"match\": {{\"text\": \"...\"}}}}"
        )));
    };
    let (field, q) = o.iter().next().expect("one entry");
    if Some(field.as_str()) != text_field {
        return Err(unsupported(
            &format!("{path}.{field}"),
            &format!(
                "match on {field:?} (only the text field{} has a lexical index)",
                text_field.map(|t| format!(" {t:?}")).unwrap_or_default()
            ),
        ));
    }
    match q {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Object(qo) => {
            check_keys(qo, &["query"], &format!("{path}.{field}"))?;
            qo.get("query")
                .and_then(|x| x.as_str())
                .map(str::to_string)
                .ok_or_else(|| ApiError::invalid(format!("{path}.{field}.query must be a string")))
        }
        other => Err(ApiError::invalid(format!(
            "{path}.{field} must be a string or {{\"query\": \"...\"}}, got {other}"
        ))),
    }
}

fn split_query(
    q: Option<&serde_json::Value>,
    text_field: Option<&str>,
) -> Result<QueryParts, ApiError> {
    let Some(q) = q else {
        return Ok(QueryParts {
            text: None,
            filter: None,
        });
    };
    if let Some(m) = q.get("match") {
        if q.as_object().is_some_and(|o| o.len() == 1) {
            return Ok(QueryParts {
                text: Some(match_text(m, "query.match", text_field)?),
                filter: None,
            });
        }
    }
    // bool whose must holds one match: the match is the query, the rest filters.
    if let Some(b) = q.get("bool").and_then(|b| b.as_object()) {
        let must: Vec<&serde_json::Value> = match b.get("must") {
            Some(serde_json::Value::Array(a)) => a.iter().collect(),
            Some(one) => vec![one],
            None => Vec::new(),
        };
        let n_match = must.iter().filter(|c| c.get("match").is_some()).count();
        if n_match > 1 {
            return Err(unsupported("query.bool.must", "more than one match clause"));
        }
        if n_match == 1 {
            let m = must
                .iter()
                .find(|c| c.get("match").is_some())
                .and_then(|c| c.get("match"))
                .expect("counted");
            let text = match_text(m, "query.bool.must.match", text_field)?;
            let mut rest = b.clone();
            let others: Vec<serde_json::Value> = must
                .into_iter()
                .filter(|c| c.get("match").is_none())
                .cloned()
                .collect();
            rest.insert("must".into(), serde_json::Value::Array(others));
            if rest
                .get("should")
                .is_some_and(|s| !s.as_array().is_some_and(|a| a.is_empty()))
                && !rest.contains_key("minimum_should_match")
            {
                // With a scoring clause, Elasticsearch's should is optional (minimum 0),
                // and optional clauses only change scores, which filters do not have.
                rest.remove("should");
            }
            return Ok(QueryParts {
                text: Some(text),
                filter: Some(serde_json::json!({ "bool": rest })),
            });
        }
    }
    Ok(QueryParts {
        text: None,
        filter: Some(q.clone()),
    })
}

/// `_id` as Elasticsearch shows it (a string).
fn es_id(id: &DocId) -> String {
    match id {
        DocId::Int(v) => v.to_string(),
        DocId::Str(s) => s.clone(),
    }
}

fn shards() -> serde_json::Value {
    serde_json::json!({"total": 1, "successful": 1, "skipped": 0, "failed": 0})
}

fn parse_track(v: Option<&serde_json::Value>) -> Result<TrackTotal, ApiError> {
    match v {
        None | Some(serde_json::Value::Bool(true)) => Ok(TrackTotal::Exact),
        Some(serde_json::Value::Bool(false)) => Ok(TrackTotal::Off),
        Some(serde_json::Value::Number(n)) if n.as_u64().is_some() => {
            Ok(TrackTotal::UpTo(n.as_u64().unwrap_or(0)))
        }
        Some(other) => Err(ApiError::invalid(format!(
            "track_total_hits must be true, false or a count, got {other}"
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// _search

/// The URL parameters of `_search` and `_count`: `size` and `from` (`_search`) go into the
/// body (over its own, as Elasticsearch does); `q` and anything else but harmless output
/// switches is a 400 naming it, never ignored.
fn url_params(query: Option<&str>, m: &mut JsonObject, paging: bool) -> Result<(), ApiError> {
    for kv in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "size" | "from" if paging => {
                let n: u64 = v.parse().map_err(|_| {
                    ApiError::invalid(format!("{k} must be a non-negative integer, got {v:?}"))
                })?;
                m.insert(k.to_string(), n.into());
            }
            // Output switches, and the load lab's cache-busting nonce.
            "pretty" | "human" | "error_trace" | "nonce" | "typed_keys" => {}
            "q" => {
                return Err(unsupported(
                    "q",
                    "the URL query string (Lucene syntax); send a body: {\"query\": {\"match\": {FIELD: TEXT}}}",
                ))
            }
            other => return Err(unsupported(other, &format!("the URL parameter {other:?}"))),
        }
    }
    Ok(())
}

pub(crate) async fn search(rd: Read) -> Result<Vec<u8>, ApiError> {
    let Read {
        app,
        slot,
        backend,
        body: mut m,
        arrival,
        query,
    } = rd;
    url_params(query.as_deref(), &mut m, true)?;
    let from = match m.get("from") {
        Some(v) => usize_at(v, "from", MAX_RESULT_WINDOW)?,
        None => 0,
    };
    let size = match m.get("size") {
        Some(v) => usize_at(v, "size", MAX_RESULT_WINDOW)?,
        None => 10,
    };
    if from + size > MAX_RESULT_WINDOW {
        return Err(ApiError::invalid(format!(
                "from + size must be at most {MAX_RESULT_WINDOW} (index.max_result_window), got {}; page deeper with search_after",
                from + size
            )));
    }
    let source = parse_source(m.get("_source"))?;
    let track = parse_track(m.get("track_total_hits"))?;
    let aggs = match (m.get("aggs"), m.get("aggregations")) {
        (Some(_), Some(_)) => return Err(ApiError::invalid("give aggs or aggregations, not both")),
        (Some(a), None) => parse_aggs(Some(a), "aggs")?,
        (None, a) => parse_aggs(a, "aggregations")?,
    };
    let text_field = backend.text_field();
    let parts = split_query(m.get("query"), text_field.as_deref())?;
    let knn = m.get("knn");
    let deadline = arrival + app.cfg.timeout;
    if knn.is_none() && parts.text.is_none() {
        if m.contains_key("rank") {
            return Err(ApiError::invalid("rank needs knn and a match query"));
        }
        if CommonOptions::parse(|key| m.get(key))?.rerank.is_some() {
            return Err(ApiError::invalid(
                "rerank scores (query text, document text) pairs: it needs a match query",
            ));
        }
        // A filter-only query: an exact sorted page.
        // The total is counted even when not shown: it is a bitmap's size.
        let (sort, after) = (m.get("sort"), m.get("search_after"));
        if sort.is_none() && after.is_some() {
            return Err(ApiError::invalid(
                "search_after needs a sort (e.g. [{\"price\": \"desc\"}, \"_id\"])",
            ));
        }
        let sorted = sort.is_some();
        let schema = backend.schema();
        let (sort, after) = parse_page(&schema, sort, after, "sort", "after")?;
        let r = crate::backend::Page {
            sort,
            after,
            filter: parts
                .filter
                .as_ref()
                .map(|v| parse_filter(&schema, v, "filter"))
                .transpose()?,
            from,
            size,
            fields: source.wanted(),
            total: true,
            facets: aggs,
            ..read_request(&app, arrival)
        };
        let out: ReadOutput = run_read(&app, &**backend, r).await?;
        let index = slot.name.clone();
        let large = large_reply(out.hits.len(), &out.facets);
        return app
            .renders
            .offload_if(deadline, large, move || {
                let score = if sorted {
                    serde_json::Value::Null
                } else {
                    serde_json::json!(1.0)
                };
                let max_score = if sorted || out.hits.is_empty() {
                    serde_json::Value::Null
                } else {
                    serde_json::json!(1.0)
                };
                let mut b = Vec::with_capacity(reply_capacity(out.hits.len(), &out.facets));
                let hits = |b: &mut Vec<u8>| {
                    for (i, h) in out.hits.iter().enumerate() {
                        if i > 0 {
                            b.push(b',');
                        }
                        let src = source.render(h.fields.as_deref());
                        write_hit(b, &index, &h.id, &score, src, sorted.then_some(&h.sort[..]));
                    }
                };
                write_search(
                    &mut b,
                    &max_score,
                    hits,
                    &track,
                    out.total.unwrap_or(0),
                    arrival,
                    &out.facets,
                    None,
                    0,
                );
                b
            })
            .await;
    }
    // A scored search: knn, match, or both fused by rank.rrf.
    if m.get("search_after").is_some() {
        return Err(unsupported(
            "search_after",
            "search_after with knn or match (page with from/size)",
        ));
    }
    if let Some(s) = m.get("sort") {
        let only_score = |x: &serde_json::Value| {
            x == "_score"
                || x.get("_score")
                    .is_some_and(|o| o == "desc" || o.get("order").is_some_and(|d| d == "desc"))
        };
        let ok = match s {
            serde_json::Value::Array(a) => a.iter().all(only_score),
            one => only_score(one),
        };
        if !ok {
            return Err(unsupported(
                "sort",
                "sorting a knn or match search by a field",
            ));
        }
    }
    let common = CommonOptions::parse(|key| m.get(key))?;
    let mut want = from + size;
    let mut ef = app.cfg.ef;
    let mut filter = parts.filter;
    let mut vector: Option<Vec<f32>> = None;
    if let Some(k) = knn {
        let Some(ko) = k.as_object() else {
            return Err(unsupported("knn", "a list of knn clauses"));
        };
        check_keys(
            ko,
            &[
                "field",
                "query_vector",
                "k",
                "num_candidates",
                "filter",
                "similarity",
                "boost",
            ],
            "knn",
        )?;
        for unsup in ["similarity", "boost"] {
            if ko.contains_key(unsup) {
                return Err(unsupported(&format!("knn.{unsup}"), &format!("{unsup:?}")));
            }
        }
        let Some(qv) = ko.get("query_vector").and_then(|v| v.as_array()) else {
            return Err(ApiError::invalid(
                    "knn.query_vector: give the query vector (query_vector_builder is not supported; use the native /search with \"text\")",
                ));
        };
        let mut v = Vec::with_capacity(qv.len());
        for (i, x) in qv.iter().enumerate() {
            let Some(f) = x
                .as_f64()
                .filter(|f| f.is_finite() && f.abs() <= f32::MAX as f64)
            else {
                return Err(ApiError::invalid(format!(
                    "knn.query_vector[{i}] must be a finite number, got {x}"
                )));
            };
            v.push(f as f32);
        }
        let (_, dim, _) = backend.figures();
        if v.len() != dim {
            return Err(ApiError::invalid(format!(
                "knn.query_vector has {} dimensions, the collection has {dim}",
                v.len()
            )));
        }
        // Elasticsearch: the top k are the hits; from/size page within them.
        let k_knn = match ko.get("k") {
            Some(x) => usize_at(x, "knn.k", searchd_engine::MAX_K)?.max(1),
            None => size.max(1),
        };
        want = k_knn;
        if let Some(nc) = ko.get("num_candidates") {
            ef = usize_at(nc, "knn.num_candidates", crate::wire::MAX_EF)?.max(k_knn);
        }
        if let Some(kf) = ko.get("filter") {
            filter = Some(match filter {
                None => kf.clone(),
                Some(f) => serde_json::json!({"bool": {"filter": [f, kf]}}),
            });
        }
        vector = Some(v);
    }
    let mut fusion = searchd_collection::fusion::DEFAULT_FUSION;
    let mut window = searchd_collection::fusion::DEFAULT_WINDOW;
    let (ask, mode) = match (vector, parts.text) {
        (Some(v), None) => {
            if m.get("query").is_some() {
                return Err(unsupported(
                        "query",
                        "knn together with a filter query (Elasticsearch ORs them); put the filter in knn.filter",
                    ));
            }
            (Ask::Vector(v), Mode::Dense)
        }
        (None, Some(t)) => (Ask::Text(t), Mode::Lexical),
        (Some(v), Some(t)) => {
            let Some(rank) = m.get("rank").and_then(|r| r.get("rrf")) else {
                return Err(unsupported(
                        "query",
                        "knn with a match query summed by score; fuse them with \"rank\": {\"rrf\": {}}",
                    ));
            };
            let ro = rank.as_object().cloned().unwrap_or_default();
            check_keys(
                &ro,
                &["rank_constant", "rank_window_size", "window_size"],
                "rank.rrf",
            )?;
            let rank_constant = match ro.get("rank_constant") {
                Some(x) => usize_at(x, "rank.rrf.rank_constant", 1_000_000)? as u32,
                None => searchd_collection::fusion::DEFAULT_RANK_CONSTANT,
            };
            if let Some(x) = ro.get("rank_window_size").or(ro.get("window_size")) {
                window = usize_at(
                    x,
                    "rank.rrf.rank_window_size",
                    searchd_collection::fusion::MAX_WINDOW,
                )?;
            }
            fusion = Fusion::Rrf { rank_constant };
            (Ask::TextAndVector { text: t, vector: v }, Mode::Hybrid)
        }
        (None, None) => unreachable!("handled above"),
    };
    let spec = SearchSpec {
        ask,
        k: want.max(1),
        ef,
        fields: source.wanted(),
        mode: Some(mode),
        fusion,
        window,
        text_cut: false,
        filter,
        facets: aggs,
        common,
    };
    let a = perform_search(&app, &slot, spec, deadline).await?;
    let index = slot.name.clone();
    let large = large_reply(size.min(a.hits.len()), &a.facets);
    app.renders
        .offload_if(deadline, large, move || {
            let total = a.hits.len() as u64;
            let max_score = serde_json::json!(a.hits.first().map(|h| h.score));
            let explain = explain_json(&a);
            let mut b = Vec::with_capacity(reply_capacity(size.min(a.hits.len()), &a.facets));
            let hits = |b: &mut Vec<u8>| {
                for (i, h) in a.hits.iter().skip(from).take(size).enumerate() {
                    if i > 0 {
                        b.push(b',');
                    }
                    let src = source.render(h.fields.as_deref());
                    write_hit(b, &index, &h.id, &serde_json::json!(h.score), src, None);
                }
            };
            write_search(
                &mut b,
                &max_score,
                hits,
                &track,
                total,
                arrival,
                &a.facets,
                explain.as_ref(),
                a.skipped_probes,
            );
            b
        })
        .await
}

// ---------------------------------------------------------------------------------------
// _count

pub(crate) async fn count(mut rd: Read) -> Result<Vec<u8>, ApiError> {
    url_params(rd.query.as_deref(), &mut rd.body, false)?;
    let parts = split_query(rd.body.get("query"), rd.backend.text_field().as_deref())?;
    if parts.text.is_some() {
        return Err(unsupported(
            "query",
            "a match query in _count (count a filter)",
        ));
    }
    let r = crate::backend::Page {
        filter: parse_optional_filter(&**rd.backend, parts.filter.as_ref(), "filter")?,
        total: true,
        ..rd.request()
    };
    let out = rd.run(r).await?;
    let v = serde_json::json!({"count": out.total.unwrap_or(0), "_shards": shards()});
    Ok(serde_json::to_vec(&v).unwrap_or_default())
}

// ---------------------------------------------------------------------------------------
// _doc, _mget

fn doc_json(index: &str, id: &str, found: Option<(&DocId, &[u8])>) -> serde_json::Value {
    match found {
        Some((doc_id, fields)) => serde_json::json!({
            "_index": index,
            "_id": es_id(doc_id),
            "_version": 1,
            "_seq_no": 0,
            "_primary_term": 1,
            "found": true,
            "_source": serde_json::from_slice::<serde_json::Value>(fields).unwrap_or(serde_json::json!({})),
        }),
        None => serde_json::json!({"_index": index, "_id": id, "found": false}),
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
    let backend = match backend_of(&slot) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    if id.is_empty() {
        return ApiError::invalid("the document id is empty").into_response();
    }
    match backend.get(DocId::Str(id.clone()), FieldsWanted::All).await {
        Ok(d) => json_response(
            StatusCode::OK,
            serde_json::to_vec(&doc_json(&slot.name, &id, Some((&d.id, &d.fields))))
                .unwrap_or_default(),
        ),
        Err(crate::backend::BackendError::NotFound(_)) => {
            let mut r = json_response(
                StatusCode::NOT_FOUND,
                serde_json::to_vec(&doc_json(&slot.name, &id, None)).unwrap_or_default(),
            );
            r.extensions_mut()
                .insert(crate::error::Tagged(Code::NotFound));
            r
        }
        Err(e) => backend_error(&app, e).into_response(),
    }
}

/// The keys of an entry of `_mget`'s `docs`.
pub(crate) const MGET_DOC_KEYS: &[&str] = &["_id", "_index"];

/// Most ids one `_mget` may ask for.
pub const MAX_MGET: usize = 10_000;

pub(crate) async fn mget(rd: Read) -> Result<Vec<u8>, ApiError> {
    let Read {
        app,
        slot,
        backend,
        body: m,
        ..
    } = rd;
    let mut ids: Vec<String> = Vec::new();
    let id_str = |v: &serde_json::Value, at: &str| -> Result<String, ApiError> {
        match v {
            serde_json::Value::String(s) if !s.is_empty() => Ok(s.clone()),
            serde_json::Value::Number(n) if n.as_u64().is_some() => Ok(n.to_string()),
            other => Err(ApiError::invalid(format!(
                "{at} must be a document id, got {other}"
            ))),
        }
    };
    match (m.get("ids"), m.get("docs")) {
        (Some(serde_json::Value::Array(a)), None) => {
            for (i, v) in a.iter().enumerate() {
                ids.push(id_str(v, &format!("ids[{i}]"))?);
            }
        }
        (None, Some(serde_json::Value::Array(a))) => {
            for (i, d) in a.iter().enumerate() {
                let at = format!("docs[{i}]");
                let Some(o) = d.as_object() else {
                    return Err(ApiError::invalid(format!("{at} must be an object")));
                };
                check_keys(o, MGET_DOC_KEYS, &at)?;
                if o.get("_index")
                    .is_some_and(|x| x.as_str() != Some(slot.name.as_str()))
                {
                    return Err(unsupported(
                        &format!("{at}._index"),
                        "another index in _mget",
                    ));
                }
                let Some(v) = o.get("_id") else {
                    return Err(ApiError::invalid(format!("{at}._id is missing")));
                };
                ids.push(id_str(v, &format!("{at}._id"))?);
            }
        }
        _ => {
            return Err(ApiError::invalid(
                "give {\"ids\": [...]} or {\"docs\": [{\"_id\": ...}]}",
            ))
        }
    }
    if ids.len() > MAX_MGET {
        return Err(ApiError::invalid(format!(
            "at most {MAX_MGET} ids per _mget, got {}",
            ids.len()
        )));
    }
    let mut docs = Vec::with_capacity(ids.len());
    for id in &ids {
        match backend.get(DocId::Str(id.clone()), FieldsWanted::All).await {
            Ok(d) => docs.push(doc_json(&slot.name, id, Some((&d.id, &d.fields)))),
            Err(crate::backend::BackendError::NotFound(_)) => {
                docs.push(doc_json(&slot.name, id, None))
            }
            Err(e) => return Err(backend_error(&app, e)),
        }
    }
    Ok(serde_json::to_vec(&serde_json::json!({ "docs": docs })).unwrap_or_default())
}
