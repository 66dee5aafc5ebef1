//! The document against the code: its shape, the parsers' key lists, the routes.

use super::*;

fn doc() -> serde_json::Value {
    serde_json::from_slice(&document_bytes()).unwrap()
}

/// The property names of component schema `name`.
fn props(doc: &serde_json::Value, name: &str) -> Vec<String> {
    let s = &doc["components"]["schemas"][name];
    let mut v: Vec<String> = s["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("schema {name} has no properties: {s}"))
        .keys()
        .cloned()
        .collect();
    v.sort();
    v
}

fn sorted(keys: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn the_document_is_openapi_3_1_with_the_crate_version() {
    let d = doc();
    assert!(
        d["openapi"].as_str().unwrap().starts_with("3.1."),
        "{}",
        d["openapi"]
    );
    assert_eq!(d["info"]["version"], env!("CARGO_PKG_VERSION"));
    let schemes = d["components"]["securitySchemes"].as_object().unwrap();
    assert_eq!(schemes[BEARER]["scheme"], "bearer");
    assert_eq!(schemes[API_KEY]["name"], "api-key");
    assert_eq!(schemes[API_KEY]["in"], "header");
}

#[test]
fn every_schema_reference_resolves() {
    let d = doc();
    let text = d.to_string();
    let schemas = d["components"]["schemas"].as_object().unwrap();
    for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &part[..part.find('"').unwrap()];
        assert!(schemas.contains_key(name), "dangling $ref to {name}");
    }
}

#[test]
fn every_operation_has_a_success_and_the_error_shape() {
    let d = doc();
    for (path, item) in d["paths"].as_object().unwrap() {
        for (method, o) in item.as_object().unwrap() {
            let r = o["responses"].as_object().unwrap();
            assert!(
                r.keys().any(|s| s.starts_with('2')),
                "{method} {path}: no 2xx reply"
            );
            assert!(
                r["401"]["content"]["application/json"]["schema"]["$ref"]
                    .as_str()
                    .is_some_and(|s| s.ends_with("/ErrorReply")),
                "{method} {path}: 401 is not the error shape"
            );
        }
    }
}

#[test]
fn the_error_codes_are_the_contracts() {
    let d = doc();
    let codes = d["components"]["schemas"]["ErrorBody"]["properties"]["code"]["enum"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(codes, Code::ALL.len() - 1);
}

/// A new body key must be documented: the request schemas name exactly the keys the
/// parsers accept.
#[test]
fn request_schemas_name_the_keys_the_parsers_accept() {
    let d = doc();
    let native: Vec<&str> = crate::native::OWN_KEYS
        .iter()
        .chain(crate::query::COMMON_KEYS)
        .copied()
        .collect();
    let es_search = crate::es::search_rule().keys;
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("SearchRequest", native),
        ("Fusion", crate::native::FUSION_KEYS.to_vec()),
        ("FusionWeights", crate::native::FUSION_WEIGHT_KEYS.to_vec()),
        ("Rerank", crate::query::RERANK_KEYS.to_vec()),
        ("FacetSpec", crate::wire::FACET_KEYS.to_vec()),
        ("CountRequest", crate::reads::COUNT.keys.to_vec()),
        ("FacetRequest", crate::reads::FACET.keys.to_vec()),
        ("ScrollRequest", crate::reads::SCROLL.keys.to_vec()),
        ("EsSearchRequest", es_search.to_vec()),
        ("EsCountRequest", crate::es::COUNT.keys.to_vec()),
        ("EsMgetRequest", crate::es::MGET.keys.to_vec()),
        ("EsMgetDoc", crate::es::MGET_DOC_KEYS.to_vec()),
        ("UpsertRequest", crate::writes::UPSERT_KEYS.to_vec()),
        ("Document", crate::writes::DOC_KEYS.to_vec()),
        ("DeleteRequest", crate::writes::DELETE_KEYS.to_vec()),
        ("SnapshotRequest", crate::writes::SNAPSHOT_KEYS.to_vec()),
    ];
    assert_eq!(cases.len(), CLOSED_REQUESTS.len());
    for (schema, keys) in cases {
        assert_eq!(
            props(&d, schema),
            sorted(&keys),
            "schema {schema} and its parser's keys differ"
        );
        assert_eq!(
            d["components"]["schemas"][schema]["additionalProperties"], false,
            "{schema}: its parser refuses other keys, so must its schema (CLOSED_REQUESTS)"
        );
    }
    // serde-parsed bodies carry their schema derive: it names their fields.
    for s in [
        "CreateBody",
        "IndexBody",
        "MappingBody",
        "PutMappingBody",
        "ReloadBody",
    ] {
        assert!(!props(&d, s).is_empty(), "{s}");
    }
}
