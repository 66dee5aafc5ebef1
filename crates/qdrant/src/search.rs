//! The search path: one nearest-neighbour query (`Inner::search`, with the `_id` of string
//! ids fetched for the hits that need it), documents by id (`get`, `get_points`), Qdrant's
//! scores as searchd's, and facets over the hits.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use qdrant_client::qdrant::{
    condition::ConditionOneOf, point_id::PointIdOptions, query::Variant as QueryVariant,
    value::Kind, vector_input, with_payload_selector, Distance, Filter, GetPoints, HasIdCondition,
    PointId, Query, QueryPoints, RetrievedPoint, SearchParams, SearchPoints, VectorInput,
    WithPayloadSelector,
};
use searchd_collection::DocId;

use super::backend::Inner;
use super::conn::secs;
use super::layout::{cond, doc_id_of, fields_of, include, payload_str, point_id, ID_KEY, SRC_KEY};
use searchd_backend::{
    BackendError, Document, FacetOutput, FacetSpec, FieldsWanted, QueryInput, ScoredDoc, Search,
    SearchOutput, SearchRequest, StageTimes,
};

impl Inner {
    fn score(&self, s: f32) -> f32 {
        match self.distance {
            // Qdrant answers the distance; searchd's l2 scores are -(squared distance).
            Distance::Euclid => -(s * s),
            _ => s,
        }
    }

    pub(super) async fn search(&self, req: SearchRequest) -> Result<SearchOutput, BackendError> {
        let SearchRequest {
            search:
                Search {
                    query,
                    k,
                    ef,
                    fields,
                    filter,
                    facets,
                    deadline,
                    ..
                },
            permit,
        } = req;
        self.check_facets(&facets, "facets")?;
        let mut filter = self.translate(filter.as_ref())?;
        let t = Instant::now();
        let input = match query {
            QueryInput::Vector(v) => VectorInput::from(v),
            QueryInput::Row(m, i) => VectorInput::from(m.row(i).to_vec()),
            QueryInput::Stored(id) => {
                let pid = point_id(&id);
                filter
                    .get_or_insert_with(Filter::default)
                    .must_not
                    .push(cond(ConditionOneOf::HasId(HasIdCondition {
                        has_id: vec![pid.clone()],
                    })));
                // Check the document exists first: a clear 404 rather than Qdrant's message.
                let got = self.get_points(vec![pid.clone()], &[], deadline).await?;
                if got.is_empty() {
                    return Err(BackendError::NotFound(format!(
                        "document {id} is not in the collection"
                    )));
                }
                VectorInput {
                    variant: Some(vector_input::Variant::Id(pid)),
                }
            }
            QueryInput::Lexical(_) | QueryInput::Hybrid { .. } => {
                return Err(BackendError::Invalid(
                    "the Qdrant backend searches vectors only (mode \"dense\"); lexical and hybrid need a local collection".into(),
                ))
            }
        };
        // Only the payload the reply needs. A hit's `_id` (string ids only) is fetched after
        // the search for the hits that have one: asking for it on every hit made Qdrant read
        // each hit's payload (the stored document included) and cost it ~0.2 ms of CPU per
        // search (1.0 ms through searchd against 0.74-0.86 ms through its REST API with no
        // payload, `bench/results/qdrant-gcide.md`).
        let mut keys: Vec<&str> = Vec::new();
        if fields != FieldsWanted::None {
            keys.extend([ID_KEY, SRC_KEY]);
        }
        for f in &facets {
            keys.push(&f.field);
        }
        let with_payload = if keys.is_empty() {
            WithPayloadSelector {
                selector_options: Some(with_payload_selector::SelectorOptions::Enable(false)),
            }
        } else {
            include(&keys)
        };
        let params = Some(SearchParams {
            hnsw_ef: Some(ef.max(k) as u64),
            ..SearchParams::default()
        });
        // A vector goes through the Search call, a stored document's id through Query.
        // Qdrant's Query call plans prefetches and fusion before it searches: at 1M x 384 it
        // spent 7-10% more CPU per search than its own REST `points/search` in the same
        // trials, and searchd reached 0.83-0.84x of REST's QPS; through Search, Qdrant's CPU
        // per search equals REST's and searchd reaches 0.97-1.01x
        // (`bench/results/qdrant-synth1m-front-s24.md`, `-front-s25.md`).
        #[allow(deprecated)] // `search`: the client prefers `query`, which costs Qdrant more
        let result = match input.variant {
            Some(vector_input::Variant::Dense(d)) => {
                let msg = SearchPoints {
                    collection_name: self.target.collection.clone(),
                    vector: d.data,
                    filter,
                    limit: k as u64,
                    params,
                    with_payload: Some(with_payload),
                    timeout: Some(secs(deadline)),
                    ..SearchPoints::default()
                };
                self.call(deadline, self.points().search(self.request(msg, deadline)))
                    .await?
                    .result
            }
            variant => {
                let msg = QueryPoints {
                    collection_name: self.target.collection.clone(),
                    query: Some(Query {
                        variant: Some(QueryVariant::Nearest(VectorInput { variant })),
                    }),
                    filter,
                    limit: Some(k as u64),
                    params,
                    with_payload: Some(with_payload),
                    timeout: Some(secs(deadline)),
                    ..QueryPoints::default()
                };
                self.call(deadline, self.points().query(self.request(msg, deadline)))
                    .await?
                    .result
            }
        };
        // Hits with a UUID point id and no `_id` in the payload: documents with string ids.
        let need: Vec<PointId> = result
            .iter()
            .filter(|p| !p.payload.contains_key(ID_KEY))
            .filter_map(|p| p.id.clone())
            .filter(|id| matches!(id.point_id_options, Some(PointIdOptions::Uuid(_))))
            .collect();
        let names: HashMap<String, String> = if need.is_empty() {
            HashMap::new()
        } else {
            self.get_points(need, &[ID_KEY], deadline)
                .await?
                .into_iter()
                .filter_map(|p| {
                    let uuid = match p.id.as_ref()?.point_id_options.as_ref()? {
                        PointIdOptions::Uuid(u) => u.clone(),
                        PointIdOptions::Num(_) => return None,
                    };
                    Some((uuid, payload_str(&p.payload, ID_KEY)?.to_string()))
                })
                .collect()
        };
        drop(permit);
        let dense_us = t.elapsed().as_micros() as u64;
        let facets = facets
            .iter()
            .map(|f| facet_of_hits(f, result.iter().map(|p| &p.payload)))
            .collect();
        let hits = result
            .into_iter()
            .map(|p| {
                let named = match p.id.as_ref().and_then(|i| i.point_id_options.as_ref()) {
                    Some(PointIdOptions::Uuid(u)) => names.get(u).cloned().map(DocId::Str),
                    _ => None,
                };
                ScoredDoc {
                    id: named.unwrap_or_else(|| doc_id_of(p.id.as_ref(), &p.payload)),
                    score: self.score(p.score),
                    fields: fields_of(&p.payload, &fields),
                }
            })
            .collect();
        Ok(SearchOutput {
            hits,
            stages: StageTimes {
                dense_us,
                ..StageTimes::default()
            },
            facets,
            ..SearchOutput::default()
        })
    }

    pub(super) async fn get_points(
        &self,
        ids: Vec<PointId>,
        keys: &[&str],
        deadline: Instant,
    ) -> Result<Vec<RetrievedPoint>, BackendError> {
        let msg = GetPoints {
            collection_name: self.target.collection.clone(),
            ids,
            with_payload: Some(include(keys)),
            timeout: Some(secs(deadline)),
            ..GetPoints::default()
        };
        Ok(self
            .call(deadline, self.points().get(self.request(msg, deadline)))
            .await?
            .result)
    }

    pub(super) async fn get(
        &self,
        id: DocId,
        fields: FieldsWanted,
    ) -> Result<Document, BackendError> {
        let deadline = Instant::now() + Duration::from_secs(5);
        // A path segment cannot tell "17" from 17: look up both.
        let mut ids = vec![point_id(&id)];
        if let DocId::Str(s) = &id {
            if let Ok(n) = s.parse::<u64>() {
                ids.insert(0, PointId::from(n));
            }
        }
        let got = self.get_points(ids, &[ID_KEY, SRC_KEY], deadline).await?;
        let Some(p) = got.into_iter().next() else {
            return Err(BackendError::NotFound(format!(
                "document {id} is not in the collection"
            )));
        };
        let fields = match fields {
            FieldsWanted::None => b"{}".to_vec(),
            w => fields_of(&p.payload, &w).unwrap_or_else(|| b"{}".to_vec()),
        };
        Ok(Document {
            id: doc_id_of(p.id.as_ref(), &p.payload),
            fields,
        })
    }
}

/// Buckets: count descending, then value ascending; the rest in `other_count`.
pub(super) fn top_buckets(spec: &FacetSpec, mut all: Vec<(String, u64)>) -> FacetOutput {
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let other_count = all.iter().skip(spec.size).map(|b| b.1).sum();
    all.truncate(spec.size);
    FacetOutput {
        name: spec.name.clone(),
        field: spec.field.clone(),
        buckets: all,
        other_count,
    }
}

/// A terms facet over the hits' payloads (each document counted once per value).
fn facet_of_hits<'a>(
    spec: &FacetSpec,
    payloads: impl Iterator<Item = &'a HashMap<String, qdrant_client::qdrant::Value>>,
) -> FacetOutput {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for p in payloads {
        let mut vals: Vec<String> = Vec::new();
        match p.get(&spec.field).and_then(|v| v.kind.as_ref()) {
            Some(Kind::StringValue(s)) => vals.push(s.clone()),
            Some(Kind::ListValue(l)) => {
                for x in &l.values {
                    if let Some(Kind::StringValue(s)) = &x.kind {
                        vals.push(s.clone());
                    }
                }
            }
            _ => {}
        }
        vals.sort();
        vals.dedup();
        for v in vals {
            *counts.entry(v).or_default() += 1;
        }
    }
    top_buckets(spec, counts.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facet_buckets_order_and_other_count() {
        let spec = FacetSpec {
            name: "t".into(),
            field: "t".into(),
            size: 2,
        };
        let f = top_buckets(
            &spec,
            vec![
                ("b".into(), 3),
                ("a".into(), 3),
                ("c".into(), 5),
                ("d".into(), 1),
            ],
        );
        assert_eq!(f.buckets, vec![("c".into(), 5), ("a".into(), 3)]);
        assert_eq!(f.other_count, 4);
    }
}
