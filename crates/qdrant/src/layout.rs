//! How searchd lays out a collection in Qdrant: the payload and metadata keys, document id
//! <-> point id ([`point_id`]), the stored document and fields of a point, the collection's
//! vector parameters and `searchd` metadata, and small builders of gRPC messages.

use std::collections::HashMap;

use qdrant_client::qdrant::{
    condition::ConditionOneOf, point_id::PointIdOptions, value::Kind, vectors_config,
    with_payload_selector, Condition, Distance, PayloadIncludeSelector, PointId,
    WithPayloadSelector,
};
use searchd_collection::{DocId, ModelRecord};
use searchd_fields::Schema;

use searchd_backend::{select_fields, FieldsWanted};

/// Payload key of a string document id.
pub const ID_KEY: &str = "_id";
/// Payload key of the stored document (its JSON text, byte for byte).
pub const SRC_KEY: &str = "_src";
/// Collection metadata key of [`SearchdMeta`].
pub const META_KEY: &str = "searchd";

/// What `searchd ingest --to qdrant://` records in the collection's metadata.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SearchdMeta {
    #[serde(default)]
    pub mapping: Option<Schema>,
    #[serde(default)]
    pub model: Option<ModelRecord>,
    #[serde(default)]
    pub metric: Option<String>,
    #[serde(default)]
    pub text_field: Option<String>,
}

fn fnv(seed: u64, s: &[u8]) -> u64 {
    let mut h = seed;
    for &b in s {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The Qdrant point id of a document id: integers as themselves, strings as a UUID made
/// from two FNV-1a hashes of the string (version nibble 8, "custom"), so any process maps a
/// string to the same point.
pub fn point_id(id: &DocId) -> PointId {
    match id {
        DocId::Int(n) => PointId::from(*n),
        DocId::Str(s) => PointId::from(uuid_of(s)),
    }
}

pub(crate) fn uuid_of(s: &str) -> String {
    let a = fnv(0xcbf2_9ce4_8422_2325, s.as_bytes());
    let b = fnv(0x6c62_272e_07bb_0142, s.as_bytes()) ^ a.rotate_left(29);
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&a.to_be_bytes());
    x[8..].copy_from_slice(&b.to_be_bytes());
    x[6] = (x[6] & 0x0f) | 0x80;
    x[8] = (x[8] & 0x3f) | 0x80;
    let h: String = x.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

pub(super) fn payload_str<'a>(
    p: &'a HashMap<String, qdrant_client::qdrant::Value>,
    k: &str,
) -> Option<&'a str> {
    match p.get(k)?.kind.as_ref()? {
        Kind::StringValue(s) => Some(s),
        _ => None,
    }
}

/// The document id of a point.
pub(super) fn doc_id_of(
    id: Option<&PointId>,
    payload: &HashMap<String, qdrant_client::qdrant::Value>,
) -> DocId {
    if let Some(s) = payload_str(payload, ID_KEY) {
        return DocId::Str(s.to_string());
    }
    match id.and_then(|p| p.point_id_options.as_ref()) {
        Some(PointIdOptions::Num(n)) => DocId::Int(*n),
        Some(PointIdOptions::Uuid(u)) => DocId::Str(u.clone()),
        None => DocId::Str(String::new()),
    }
}

pub(super) fn fields_of(
    payload: &HashMap<String, qdrant_client::qdrant::Value>,
    wanted: &FieldsWanted,
) -> Option<Vec<u8>> {
    match wanted {
        FieldsWanted::None => None,
        w => match payload_str(payload, SRC_KEY) {
            Some(src) => select_fields(src.as_bytes(), w),
            None => Some(b"{}".to_vec()),
        },
    }
}

pub(super) fn cond(c: ConditionOneOf) -> Condition {
    Condition {
        condition_one_of: Some(c),
    }
}

pub(super) fn include(keys: &[&str]) -> WithPayloadSelector {
    WithPayloadSelector {
        selector_options: Some(with_payload_selector::SelectorOptions::Include(
            PayloadIncludeSelector {
                fields: keys.iter().map(|k| k.to_string()).collect(),
            },
        )),
    }
}

/// The vector size and distance of a collection's (single, unnamed) vector.
pub(crate) fn vector_params(
    info: &qdrant_client::qdrant::CollectionInfo,
    name: &str,
) -> Result<(usize, Distance), String> {
    let vc = info
        .config
        .as_ref()
        .and_then(|c| c.params.as_ref())
        .and_then(|p| p.vectors_config.as_ref())
        .and_then(|v| v.config.as_ref());
    match vc {
        Some(vectors_config::Config::Params(p)) => Ok((
            p.size as usize,
            Distance::try_from(p.distance).unwrap_or(Distance::UnknownDistance),
        )),
        Some(vectors_config::Config::ParamsMap(_)) => Err(format!(
            "Qdrant collection {name} has named vectors; searchd serves collections with one unnamed dense vector"
        )),
        None => Err(format!("Qdrant collection {name} has no dense vector")),
    }
}

pub(crate) fn read_meta(info: &qdrant_client::qdrant::CollectionInfo) -> Option<SearchdMeta> {
    let v = info.config.as_ref()?.metadata.get(META_KEY)?;
    match v.kind.as_ref()? {
        Kind::StringValue(s) => serde_json::from_str(s).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_ids_map_to_stable_uuids() {
        let a = uuid_of("doc-1");
        assert_eq!(a, uuid_of("doc-1"));
        assert_ne!(a, uuid_of("doc-2"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8");
    }
}
