//! The `_search` reply of the Elasticsearch routes, written straight into one buffer: a
//! reply of 10,000 hits with `_source` and 60,000 buckets built as a `serde_json::Value`
//! tree first took several times its 5 MB of JSON and hundreds of ms of the I/O thread
//! (`bench/results/agg-bomb.notes.md`). The bytes are those of the tree this replaced:
//! keys in the order a `serde_json` object writes them (sorted), values serialised by
//! `serde_json` (strings, scores, sort values, `_source`).

use std::collections::BTreeMap;
use std::time::Instant;

use crate::backend::FacetOutput;
use searchd_collection::DocId;

/// `track_total_hits`: exact (`true`, the default here), none (`false`), or up to N.
pub(crate) enum TrackTotal {
    Exact,
    Off,
    UpTo(u64),
}

pub(crate) fn total_json(track: &TrackTotal, n: u64) -> Option<serde_json::Value> {
    match track {
        TrackTotal::Off => None,
        TrackTotal::Exact => Some(serde_json::json!({"value": n, "relation": "eq"})),
        TrackTotal::UpTo(cap) if n > *cap => {
            Some(serde_json::json!({"value": cap, "relation": "gte"}))
        }
        TrackTotal::UpTo(_) => Some(serde_json::json!({"value": n, "relation": "eq"})),
    }
}

/// `_shards` of a reply, keys in the order a `serde_json::Value` object writes them (sorted).
const SHARDS: &[u8] = br#"{"failed":0,"skipped":0,"successful":1,"total":1}"#;

/// `aggregations`: `{NAME: {"buckets": [{"doc_count": n, "key": k}], "doc_count_error_upper_bound":
/// 0, "sum_other_doc_count": n}}`, written straight into `out` (60,000 buckets as a
/// `serde_json::Value` tree were several times their JSON's size). Keys come in the order
/// the `Value` objects this replaced wrote them: sorted, the last of two equal names kept.
pub(crate) fn write_aggs(out: &mut Vec<u8>, facets: &[FacetOutput]) {
    let by_name: BTreeMap<&str, &FacetOutput> =
        facets.iter().map(|f| (f.name.as_str(), f)).collect();
    let mut ints = itoa::Buffer::new();
    out.push(b'{');
    for (i, (name, f)) in by_name.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, name);
        out.extend_from_slice(b":{\"buckets\":[");
        for (j, (k, c)) in f.buckets.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"doc_count\":");
            out.extend_from_slice(ints.format(*c).as_bytes());
            out.extend_from_slice(b",\"key\":");
            write_str(out, k);
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"doc_count_error_upper_bound\":0,\"sum_other_doc_count\":");
        out.extend_from_slice(ints.format(f.other_count).as_bytes());
        out.push(b'}');
    }
    out.push(b'}');
}

/// A JSON string (serde_json's escaping; writing to a `Vec` cannot fail).
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A small JSON value (a score, a sort list, a total).
pub(crate) fn write_value<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let _ = serde_json::to_writer(&mut *out, v);
}

/// One hit: `{"_id": .., "_index": .., "_score": ..[, "_source": {..}][, "sort": [..]]}`.
pub(crate) fn write_hit(
    out: &mut Vec<u8>,
    index: &str,
    id: &DocId,
    score: &serde_json::Value,
    source: Option<serde_json::Value>,
    sort: Option<&[serde_json::Value]>,
) {
    out.extend_from_slice(b"{\"_id\":");
    match id {
        DocId::Int(v) => {
            out.push(b'"');
            out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes());
            out.push(b'"');
        }
        DocId::Str(s) => write_str(out, s),
    }
    out.extend_from_slice(b",\"_index\":");
    write_str(out, index);
    out.extend_from_slice(b",\"_score\":");
    write_value(out, score);
    if let Some(src) = source {
        out.extend_from_slice(b",\"_source\":");
        write_value(out, &src);
    }
    if let Some(s) = sort {
        out.extend_from_slice(b",\"sort\":");
        write_value(out, s);
    }
    out.push(b'}');
}

/// A `_search` reply: `took`, `timed_out`, `_shards`, `hits` (`max_score`, the page written
/// by `hits`, `total` as `track_total_hits` asks), `aggregations` when there are facets and
/// `explain` when given; written straight into one buffer, keys in the order of the
/// `serde_json::Value` tree this replaced (so the bytes are the same). `skipped_probes`:
/// partitions a partitioned index skipped at the deadline; not 0, the reply says
/// `"timed_out": true` (Elasticsearch's word for partial results), `"degraded": true` and
/// `"skipped_probes"`, as native replies do.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_search(
    out: &mut Vec<u8>,
    max_score: &serde_json::Value,
    hits: impl FnOnce(&mut Vec<u8>),
    track: &TrackTotal,
    total: u64,
    arrival: Instant,
    facets: &[FacetOutput],
    explain: Option<&serde_json::Value>,
    skipped_probes: u64,
) {
    out.extend_from_slice(b"{\"_shards\":");
    out.extend_from_slice(SHARDS);
    if !facets.is_empty() {
        out.extend_from_slice(b",\"aggregations\":");
        write_aggs(out, facets);
    }
    if skipped_probes > 0 {
        // Followed by a comma (`hits` comes after): what the reply cache looks for.
        out.extend_from_slice(b",\"degraded\":true");
    }
    if let Some(e) = explain {
        out.extend_from_slice(b",\"explain\":");
        write_value(out, e);
    }
    out.extend_from_slice(b",\"hits\":{\"hits\":[");
    hits(out);
    out.extend_from_slice(b"],\"max_score\":");
    write_value(out, max_score);
    if let Some(t) = total_json(track, total) {
        out.extend_from_slice(b",\"total\":");
        write_value(out, &t);
    }
    if skipped_probes > 0 {
        out.extend_from_slice(b"},\"skipped_probes\":");
        out.extend_from_slice(itoa::Buffer::new().format(skipped_probes).as_bytes());
        out.extend_from_slice(b",\"timed_out\":true,\"took\":");
    } else {
        out.extend_from_slice(b"},\"timed_out\":false,\"took\":");
    }
    out.extend_from_slice(
        itoa::Buffer::new()
            .format(arrival.elapsed().as_millis() as u64)
            .as_bytes(),
    );
    out.push(b'}');
}

/// Bytes to reserve for a reply of `hits` hits and `facets`.
pub(crate) fn reply_capacity(hits: usize, facets: &[FacetOutput]) -> usize {
    let buckets: usize = facets.iter().map(|f| f.buckets.len()).sum();
    256 + hits * 96 + buckets * 48
}

/// Whether a reply is large enough to render off the I/O thread ([`crate::render`]).
pub(crate) fn large_reply(hits: usize, facets: &[FacetOutput]) -> bool {
    let buckets: usize = facets.iter().map(|f| f.buckets.len()).sum();
    hits + buckets >= crate::render::OFFLOAD_ITEMS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `serde_json::Value` rendering the direct writers replaced, kept to check that
    /// the bytes did not change.
    fn value_reply(
        max_score: serde_json::Value,
        hits: Vec<serde_json::Value>,
        track: &TrackTotal,
        total: u64,
        took: u64,
        facets: &[FacetOutput],
        explain: Option<&serde_json::Value>,
    ) -> serde_json::Value {
        let mut hits_obj = serde_json::json!({"max_score": max_score, "hits": hits});
        if let Some(t) = total_json(track, total) {
            hits_obj["total"] = t;
        }
        let mut v = serde_json::json!({
            "took": took,
            "timed_out": false,
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": hits_obj,
        });
        if !facets.is_empty() {
            let mut m = serde_json::Map::new();
            for f in facets {
                m.insert(
                    f.name.clone(),
                    serde_json::json!({
                        "doc_count_error_upper_bound": 0,
                        "sum_other_doc_count": f.other_count,
                        "buckets": f.buckets.iter().map(|(k, c)| serde_json::json!({"key": k, "doc_count": c})).collect::<Vec<_>>(),
                    }),
                );
            }
            v["aggregations"] = serde_json::Value::Object(m);
        }
        if let Some(e) = explain {
            v["explain"] = e.clone();
        }
        v
    }

    #[test]
    fn the_direct_reply_is_byte_for_byte_the_value_tree() {
        let facets = [
            FacetOutput {
                name: "z\"name".into(),
                field: "f".into(),
                buckets: vec![("a\u{e9}\n".into(), 3), ("b".into(), 1)],
                other_count: 7,
            },
            FacetOutput {
                name: "a".into(),
                field: "f".into(),
                buckets: vec![],
                other_count: 0,
            },
            // A second facet of the same name: the last one is kept, as a map does.
            FacetOutput {
                name: "a".into(),
                field: "g".into(),
                buckets: vec![("x".into(), 2)],
                other_count: 1,
            },
        ];
        let ids = [DocId::Int(42), DocId::Str("d\"1".into())];
        let sources = [
            Some(serde_json::json!({"title": "T\u{e9}", "n": 1.5, "tags": ["a", "b"], "z": null})),
            Some(serde_json::json!({})),
            None,
        ];
        let explains = [None, Some(serde_json::json!({"mode": "dense", "k": 3}))];
        for (source, explain) in sources.iter().zip(explains.iter().cycle()) {
            for sorted in [false, true] {
                for track in [TrackTotal::Exact, TrackTotal::Off, TrackTotal::UpTo(1)] {
                    for fs in [&facets[..], &[]] {
                        let score = if sorted {
                            serde_json::Value::Null
                        } else {
                            serde_json::json!(0.25f32)
                        };
                        let sort = vec![serde_json::json!(3), serde_json::json!("k")];
                        let old_hits: Vec<serde_json::Value> = ids
                            .iter()
                            .map(|id| {
                                let mut o = serde_json::json!({
                                    "_index": "idx",
                                    "_id": match id {
                                        DocId::Int(v) => v.to_string(),
                                        DocId::Str(s) => s.clone(),
                                    },
                                    "_score": score,
                                });
                                if let Some(src) = source {
                                    o["_source"] = src.clone();
                                }
                                if sorted {
                                    o["sort"] = serde_json::Value::Array(sort.clone());
                                }
                                o
                            })
                            .collect();
                        let max = serde_json::json!(Some(0.5f32));
                        let want = serde_json::to_vec(&value_reply(
                            max.clone(),
                            old_hits,
                            &track,
                            2,
                            0,
                            fs,
                            explain.as_ref(),
                        ))
                        .unwrap();
                        let mut got = Vec::new();
                        write_search(
                            &mut got,
                            &max,
                            |b| {
                                for (i, id) in ids.iter().enumerate() {
                                    if i > 0 {
                                        b.push(b',');
                                    }
                                    let src = source.clone();
                                    write_hit(
                                        b,
                                        "idx",
                                        id,
                                        &score,
                                        src,
                                        sorted.then_some(&sort[..]),
                                    );
                                }
                            },
                            &track,
                            2,
                            Instant::now(),
                            fs,
                            explain.as_ref(),
                            0,
                        );
                        assert_eq!(
                            String::from_utf8(got).unwrap(),
                            String::from_utf8(want).unwrap()
                        );
                    }
                }
            }
        }
    }

    /// A partial answer (probes skipped at the deadline) says so in Elasticsearch's words
    /// and in searchd's, with the marker the reply cache refuses to keep.
    #[test]
    fn a_degraded_search_reply_is_timed_out_and_says_what_was_skipped() {
        let mut b = Vec::new();
        write_search(
            &mut b,
            &serde_json::json!(1.0),
            |_| {},
            &TrackTotal::Exact,
            0,
            Instant::now(),
            &[],
            None,
            3,
        );
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["timed_out"], true, "{v}");
        assert_eq!(v["degraded"], true, "{v}");
        assert_eq!(v["skipped_probes"], 3, "{v}");
        assert!(
            String::from_utf8(b)
                .unwrap()
                .contains(",\"degraded\":true,"),
            "the cache's marker"
        );
    }
}
