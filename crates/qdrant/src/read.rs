//! Reads without a query vector: exact counts, facets by Qdrant's facet API, and sorted,
//! paged reads (`Inner::read`) by point id or by one numeric field ([`PagePlan`]) with
//! value cursors, from Qdrant's scroll and `order_by`.

use std::time::Instant;

use qdrant_client::qdrant::{
    condition::ConditionOneOf, point_id::PointIdOptions, r#match::MatchValue, value::Kind,
    Condition, CountPoints, Direction, FacetCounts, FieldCondition, Filter, IsEmptyCondition,
    Match, OrderBy, PointId, Range, RetrievedPoint, ScrollPoints,
};
use searchd_collection::DocId;
use searchd_fields::{FieldType, Order, Schema, SortBy, SortKey, SortValue, TypedValue};

use super::backend::Inner;
use super::conn::secs;
use super::layout::{cond, doc_id_of, fields_of, include, point_id, ID_KEY, SRC_KEY};
use super::search::top_buckets;
use searchd_backend::{
    BackendError, FacetOutput, FacetSpec, FieldsWanted, ReadOutput, ReadRequest, SortedDoc,
    MAX_RESULT_WINDOW,
};

/// Buckets asked of Qdrant's facet API (all of them, so `other_count` is exact).
const FACET_LIMIT: u64 = 1_000_000;

impl Inner {
    pub(super) async fn count(
        &self,
        filter: Option<Filter>,
        deadline: Instant,
    ) -> Result<u64, BackendError> {
        let msg = CountPoints {
            collection_name: self.target.collection.clone(),
            filter,
            exact: Some(true),
            timeout: Some(secs(deadline)),
            ..CountPoints::default()
        };
        Ok(self
            .call(deadline, self.points().count(self.request(msg, deadline)))
            .await?
            .result
            .map_or(0, |r| r.count))
    }

    async fn facet(
        &self,
        spec: &FacetSpec,
        filter: Option<Filter>,
        deadline: Instant,
    ) -> Result<FacetOutput, BackendError> {
        let msg = FacetCounts {
            collection_name: self.target.collection.clone(),
            key: spec.field.clone(),
            filter,
            limit: Some(FACET_LIMIT),
            exact: Some(true),
            timeout: Some(secs(deadline)),
            ..FacetCounts::default()
        };
        let res = self
            .call(deadline, self.points().facet(self.request(msg, deadline)))
            .await?;
        use qdrant_client::qdrant::facet_value::Variant as V;
        let all: Vec<(String, u64)> = res
            .hits
            .into_iter()
            .filter_map(|h| {
                let v = match h.value?.variant? {
                    V::StringValue(s) => s,
                    V::IntegerValue(i) => i.to_string(),
                    V::BoolValue(b) => b.to_string(),
                };
                Some((v, h.count))
            })
            .collect();
        Ok(top_buckets(spec, all))
    }

    async fn scroll_raw(
        &self,
        filter: Filter,
        order_by: Option<OrderBy>,
        offset: Option<PointId>,
        limit: usize,
        keys: &[&str],
        deadline: Instant,
    ) -> Result<Vec<RetrievedPoint>, BackendError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let msg = ScrollPoints {
            collection_name: self.target.collection.clone(),
            filter: Some(filter),
            offset,
            limit: Some(limit.min(u32::MAX as usize) as u32),
            with_payload: Some(include(keys)),
            order_by,
            timeout: Some(secs(deadline)),
            ..ScrollPoints::default()
        };
        Ok(self
            .call(deadline, self.points().scroll(self.request(msg, deadline)))
            .await?
            .result)
    }

    pub(super) async fn read(&self, req: ReadRequest) -> Result<ReadOutput, BackendError> {
        let ReadRequest { page: req, permit } = req;
        if req.from + req.size > MAX_RESULT_WINDOW {
            return Err(BackendError::Invalid(format!(
                "from + size must be at most {MAX_RESULT_WINDOW}, got {}; page deeper with a cursor (after / search_after)",
                req.from + req.size
            )));
        }
        self.check_facets(&req.facets, "facets")?;
        let plan = PagePlan::of(&self.schema, &req.sort)?;
        let filter = self.translate(req.filter.as_ref())?;
        let cursor = match &req.after {
            Some(a) => Some(plan.cursor(a)?),
            None => None,
        };
        let deadline = req.deadline;
        let total = if req.total {
            Some(self.count(filter.clone(), deadline).await?)
        } else {
            None
        };
        let mut facets = Vec::new();
        for f in &req.facets {
            facets.push(self.facet(f, filter.clone(), deadline).await?);
        }
        let mut hits = Vec::new();
        let mut next = None;
        if req.size > 0 {
            let need = req.from + req.size;
            let base = filter.unwrap_or_default();
            let mut keys = vec![ID_KEY];
            if req.fields != FieldsWanted::None {
                keys.push(SRC_KEY);
            }
            let page = match &plan {
                PagePlan::ById => {
                    self.page_by_id(base, cursor.and_then(|c| c.1), need, &keys, deadline)
                        .await?
                }
                PagePlan::ByField { field, ty, order } => {
                    keys.push(field);
                    self.page_by_field(base, field, *ty, *order, cursor, need, &keys, deadline)
                        .await?
                }
            };
            let full = page.len() >= need;
            for (sort, p) in page.into_iter().skip(req.from).take(req.size) {
                hits.push(SortedDoc {
                    id: doc_id_of(p.id.as_ref(), &p.payload),
                    sort,
                    fields: fields_of(&p.payload, &req.fields),
                });
            }
            if full {
                next = hits.last().map(|h| h.sort.clone());
            }
        }
        drop(permit);
        Ok(ReadOutput {
            hits,
            next,
            total,
            facets,
        })
    }

    async fn page_by_id(
        &self,
        filter: Filter,
        after: Option<DocId>,
        need: usize,
        keys: &[&str],
        deadline: Instant,
    ) -> Result<Vec<(Vec<serde_json::Value>, RetrievedPoint)>, BackendError> {
        let offset = after.as_ref().map(point_id);
        let extra = usize::from(offset.is_some());
        let mut got = self
            .scroll_raw(filter, None, offset.clone(), need + extra, keys, deadline)
            .await?;
        if let (Some(o), Some(first)) = (&offset, got.first()) {
            if first.id.as_ref() == Some(o) {
                got.remove(0);
            }
        }
        got.truncate(need);
        Ok(got
            .into_iter()
            .map(|p| {
                let id = doc_id_of(p.id.as_ref(), &p.payload);
                (vec![id_json(&id)], p)
            })
            .collect())
    }

    #[allow(clippy::too_many_arguments)]
    async fn page_by_field(
        &self,
        filter: Filter,
        field: &str,
        ty: FieldType,
        order: Order,
        cursor: Option<(Option<TypedValue>, Option<DocId>)>,
        need: usize,
        keys: &[&str],
        deadline: Instant,
    ) -> Result<Vec<(Vec<serde_json::Value>, RetrievedPoint)>, BackendError> {
        let and = |extra: Condition| {
            let mut f = filter.clone();
            f.must.push(extra);
            f
        };
        let value_of = |p: &RetrievedPoint| num_of(p.payload.get(field), ty);
        let mut out: Vec<(Option<TypedValue>, RetrievedPoint)> = Vec::new();
        let in_values = !matches!(cursor, Some((None, _)));
        if in_values {
            if let Some((Some(v), cid)) = &cursor {
                // Ties of the cursor's value after its id.
                let offset = cid.as_ref().map(point_id);
                let mut ties = self
                    .scroll_raw(
                        and(eq(field, v)),
                        None,
                        offset.clone(),
                        need + 1,
                        keys,
                        deadline,
                    )
                    .await?;
                if let (Some(o), Some(first)) = (&offset, ties.first()) {
                    if first.id.as_ref() == Some(o) {
                        ties.remove(0);
                    }
                }
                out.extend(ties.into_iter().map(|p| (Some(v.clone()), p)));
            }
            if out.len() < need {
                let beyond = match &cursor {
                    Some((Some(v), _)) => beyond(field, v, order),
                    _ => exists(field),
                };
                let want = need - out.len();
                let ob = OrderBy {
                    key: field.to_string(),
                    direction: Some(match order {
                        Order::Asc => Direction::Asc as i32,
                        Order::Desc => Direction::Desc as i32,
                    }),
                    start_from: None,
                };
                let batch = self
                    .scroll_raw(and(beyond.clone()), Some(ob), None, want, keys, deadline)
                    .await?;
                let full = batch.len() >= want;
                let mut batch: Vec<(Option<TypedValue>, RetrievedPoint)> =
                    batch.into_iter().map(|p| (value_of(&p), p)).collect();
                if full {
                    // Qdrant orders ties arbitrarily: the last value's ties come by id.
                    let last = batch.last().and_then(|b| b.0.clone());
                    batch.retain(|b| b.0 != last);
                    if let Some(l) = last {
                        let mut f = filter.clone();
                        f.must.push(beyond);
                        f.must.push(eq(field, &l));
                        let ties = self
                            .scroll_raw(f, None, None, want - batch.len(), keys, deadline)
                            .await?;
                        sort_batch(&mut batch, order);
                        batch.extend(ties.into_iter().map(|p| (Some(l.clone()), p)));
                    }
                } else {
                    sort_batch(&mut batch, order);
                }
                out.extend(batch);
            }
        }
        if out.len() < need {
            // Documents without a value come last, by id.
            let offset = match &cursor {
                Some((None, Some(cid))) => Some(point_id(cid)),
                _ => None,
            };
            let extra = usize::from(offset.is_some());
            let mut f = filter.clone();
            f.must.push(cond(ConditionOneOf::IsEmpty(IsEmptyCondition {
                key: field.to_string(),
            })));
            let mut missing = self
                .scroll_raw(
                    f,
                    None,
                    offset.clone(),
                    need - out.len() + extra,
                    keys,
                    deadline,
                )
                .await?;
            if let (Some(o), Some(first)) = (&offset, missing.first()) {
                if first.id.as_ref() == Some(o) {
                    missing.remove(0);
                }
            }
            out.extend(missing.into_iter().map(|p| (None, p)));
        }
        out.truncate(need);
        Ok(out
            .into_iter()
            .map(|(v, p)| {
                let id = doc_id_of(p.id.as_ref(), &p.payload);
                (
                    vec![
                        v.map_or(serde_json::Value::Null, |v| v.to_json()),
                        id_json(&id),
                    ],
                    p,
                )
            })
            .collect())
    }
}

fn id_json(id: &DocId) -> serde_json::Value {
    match id {
        DocId::Int(n) => serde_json::Value::from(*n),
        DocId::Str(s) => serde_json::Value::String(s.clone()),
    }
}

/// A point's value of a numeric sort field (the first of an array).
fn num_of(v: Option<&qdrant_client::qdrant::Value>, ty: FieldType) -> Option<TypedValue> {
    let k = v?.kind.as_ref()?;
    let x = match k {
        Kind::IntegerValue(i) => TypedValue::Int(*i),
        Kind::DoubleValue(f) => TypedValue::Float(*f),
        Kind::ListValue(l) => return l.values.first().and_then(|x| num_of(Some(x), ty)),
        _ => return None,
    };
    Some(match (ty, x) {
        (FieldType::Float, TypedValue::Int(i)) => TypedValue::Float(i as f64),
        (_, x) => x,
    })
}

fn num(v: &Option<TypedValue>) -> f64 {
    v.as_ref().and_then(TypedValue::as_f64).unwrap_or(f64::NAN)
}

fn sort_batch(b: &mut [(Option<TypedValue>, RetrievedPoint)], order: Order) {
    b.sort_by(|x, y| {
        let (a, c) = (num(&x.0), num(&y.0));
        let by_value = match order {
            Order::Asc => a.total_cmp(&c),
            Order::Desc => c.total_cmp(&a),
        };
        by_value.then_with(|| id_order(x.1.id.as_ref(), y.1.id.as_ref()))
    });
}

pub(super) fn id_order(a: Option<&PointId>, b: Option<&PointId>) -> std::cmp::Ordering {
    let key = |p: Option<&PointId>| match p.and_then(|p| p.point_id_options.as_ref()) {
        Some(PointIdOptions::Num(n)) => (0u8, *n, String::new()),
        Some(PointIdOptions::Uuid(u)) => (1, 0, u.clone()),
        None => (2, 0, String::new()),
    };
    key(a).cmp(&key(b))
}

fn field_cond(key: &str) -> FieldCondition {
    FieldCondition {
        key: key.to_string(),
        ..FieldCondition::default()
    }
}

fn eq(field: &str, v: &TypedValue) -> Condition {
    let mut f = field_cond(field);
    match v {
        TypedValue::Int(i) => {
            f.r#match = Some(Match {
                match_value: Some(MatchValue::Integer(*i)),
            })
        }
        other => {
            let x = other.as_f64().unwrap_or(f64::NAN);
            f.range = Some(Range {
                gte: Some(x),
                lte: Some(x),
                ..Range::default()
            })
        }
    }
    cond(ConditionOneOf::Field(f))
}

fn beyond(field: &str, v: &TypedValue, order: Order) -> Condition {
    let mut f = field_cond(field);
    let x = v.as_f64().unwrap_or(f64::NAN);
    f.range = Some(match order {
        Order::Asc => Range {
            gt: Some(x),
            ..Range::default()
        },
        Order::Desc => Range {
            lt: Some(x),
            ..Range::default()
        },
    });
    cond(ConditionOneOf::Field(f))
}

fn exists(field: &str) -> Condition {
    cond(ConditionOneOf::Filter(Filter {
        must_not: vec![cond(ConditionOneOf::IsEmpty(IsEmptyCondition {
            key: field.to_string(),
        }))],
        ..Filter::default()
    }))
}

/// How a sorted page is read from Qdrant.
enum PagePlan {
    /// Point id order (Qdrant's scroll order).
    ById,
    /// One numeric field (Qdrant's `order_by`), then the id.
    ByField {
        field: String,
        ty: FieldType,
        order: Order,
    },
}

impl PagePlan {
    /// The plan for parsed sort keys (the server refused `_score` already).
    fn of(schema: &Schema, keys: &[SortKey]) -> Result<PagePlan, BackendError> {
        let bad = |m: String| Err(BackendError::Invalid(m));
        match keys {
            [] => Ok(PagePlan::ById),
            [k] if k.by == SortBy::Id => {
                if k.order == Order::Desc {
                    bad("sort: the Qdrant backend pages by id in ascending order only".into())
                } else {
                    Ok(PagePlan::ById)
                }
            }
            [k] | [k, _] => {
                if let [_, second] = keys {
                    if !(second.by == SortBy::Id && second.order == Order::Asc) {
                        return bad("sort: the Qdrant backend sorts by one field (then the id, ascending); several sort keys cannot be expressed in Qdrant's order_by".into());
                    }
                }
                let SortBy::Field(name) = &k.by else {
                    return bad("sort: unsupported key".into());
                };
                let spec = schema.get(name);
                match spec {
                    Some(s)
                        if matches!(s.ty, FieldType::Integer | FieldType::Float | FieldType::Datetime)
                            && !s.array =>
                    {
                        Ok(PagePlan::ByField {
                            field: name.clone(),
                            ty: s.ty,
                            order: k.order,
                        })
                    }
                    Some(s) => bad(format!(
                        "sort: \"{name}\" is a {}{} field; the Qdrant backend sorts by single-valued integer, float or datetime fields (Qdrant's order_by)",
                        if s.array { "multi-valued " } else { "" },
                        s.ty
                    )),
                    None => bad(format!("sort: unknown field \"{name}\"")),
                }
            }
            _ => bad("sort: the Qdrant backend sorts by one field (then the id, ascending); several sort keys cannot be expressed in Qdrant's order_by".into()),
        }
    }

    /// A value cursor, parsed for this sort by the server (`[id]` for id order, `[value
    /// or null, id]` for a field; the lengths were checked against the keys).
    fn cursor(&self, a: &[SortValue]) -> Result<(Option<TypedValue>, Option<DocId>), BackendError> {
        let bad = |m: &str| BackendError::Invalid(format!("after: {m}"));
        let id = |x: &SortValue| match x {
            SortValue::Id(id) => Ok(id.clone()),
            _ => Err(bad("the last value must be a document id")),
        };
        match (self, a) {
            (PagePlan::ById, [i]) => Ok((None, Some(id(i)?))),
            (PagePlan::ByField { ty, .. }, [v, i]) => {
                let n = match (v, ty) {
                    (SortValue::Missing, _) => None,
                    (SortValue::Int(i), FieldType::Float) => Some(TypedValue::Float(*i as f64)),
                    (SortValue::Int(i), _) => Some(TypedValue::Int(*i)),
                    (SortValue::Float(f), FieldType::Float) => Some(TypedValue::Float(*f)),
                    (SortValue::Float(_), _) => return Err(bad("the value must be an integer")),
                    _ => return Err(bad("the first value must be a number or null")),
                };
                Ok((n, Some(id(i)?)))
            }
            (PagePlan::ById, _) => Err(bad("must have 1 value (the id) for this sort")),
            (PagePlan::ByField { .. }, _) => Err(bad(
                "must have 2 values (the field's value and the id) for this sort",
            )),
        }
    }
}
