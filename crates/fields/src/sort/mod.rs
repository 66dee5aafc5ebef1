//! Sorting: sort keys, sort values, cursors, pages and facet buckets.

mod page;

use page::{cost, key_of_col, Cand, IdKey, Req, RowSet, Walk};
pub use page::{IdOrder, PagePlan};

use std::cmp::Ordering;
use std::collections::HashMap;

use roaring::RoaringBitmap;
use serde::Serialize;
use serde_json::Value;

use crate::filter::{datetime_value, field_type, float_value, kind, FilterError};
use crate::format::{Column, KeywordCol, NumCol};
use crate::schema::{FieldType, Schema};
use crate::{DocId, FieldIndex};

/// A sort direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Smallest first.
    Asc,
    /// Largest first.
    Desc,
}

/// What a sort key orders by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// An indexed field.
    Field(String),
    /// The document id (`_id` or `id`).
    Id,
    /// The search score (`_score`); ignored by [`FieldIndex::page`].
    Score,
}

/// One sort key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortKey {
    /// What to order by.
    pub by: SortBy,
    /// Which way.
    pub order: Order,
}

/// One sort value of a row (and of a cursor).
#[derive(Clone, Debug, PartialEq)]
pub enum SortValue {
    /// The row has no value (always sorts last).
    Missing,
    /// An integer, or a datetime in epoch milliseconds.
    Int(i64),
    /// A float.
    Float(f64),
    /// A keyword.
    Str(String),
    /// A bool (`false < true`).
    Bool(bool),
    /// A document id.
    Id(DocId),
}

impl SortValue {
    /// The value as Elasticsearch shows it in `sort` / accepts in `search_after`: numbers,
    /// strings, bools, datetimes as epoch milliseconds, ids as themselves, missing as `null`.
    pub fn to_json(&self) -> Value {
        match self {
            SortValue::Missing => Value::Null,
            SortValue::Int(i) => Value::from(*i),
            SortValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            SortValue::Str(s) => Value::String(s.clone()),
            SortValue::Bool(b) => Value::Bool(*b),
            SortValue::Id(DocId::Int(i)) => Value::from(*i),
            SortValue::Id(DocId::Str(s)) => Value::String(s.clone()),
        }
    }

    /// Parses one cursor value for `key` (`path` names it in errors). `null` is
    /// [`SortValue::Missing`]; integer fields take integers (or integer strings), float fields
    /// numbers, datetime fields epoch milliseconds or RFC 3339 strings, keyword fields strings
    /// (numbers and bools by their JSON text), bool fields bools (or 0/1), ids strings or
    /// unsigned integers. A `_score` key takes any number (or null) and yields `Missing`.
    pub fn from_json(
        v: &Value,
        key: &SortKey,
        schema: &Schema,
        path: &str,
    ) -> Result<SortValue, FilterError> {
        if v.is_null() {
            return Ok(SortValue::Missing);
        }
        let bad =
            |what: &str| FilterError::new(path, format!("expected {what}, found {}", kind(v)));
        match &key.by {
            SortBy::Score => match v {
                Value::Number(_) => Ok(SortValue::Missing),
                _ => Err(bad("a number (the score)")),
            },
            SortBy::Id => match v {
                Value::String(s) if !s.is_empty() => Ok(SortValue::Id(DocId::Str(s.clone()))),
                Value::Number(n) if n.as_u64().is_some() => {
                    Ok(SortValue::Id(DocId::Int(n.as_u64().unwrap())))
                }
                _ => Err(bad("an id (a non-empty string or an unsigned integer)")),
            },
            SortBy::Field(f) => match field_type(schema, f, path)? {
                FieldType::Keyword => match v {
                    Value::String(s) => Ok(SortValue::Str(s.clone())),
                    Value::Number(_) | Value::Bool(_) => Ok(SortValue::Str(v.to_string())),
                    _ => Err(bad("a string")),
                },
                FieldType::Integer => match v {
                    Value::Number(n) if n.as_i64().is_some() => {
                        Ok(SortValue::Int(n.as_i64().unwrap()))
                    }
                    Value::Number(n) => Ok(SortValue::Float(n.as_f64().unwrap_or(0.0))),
                    Value::String(s) => s
                        .trim()
                        .parse()
                        .map(SortValue::Int)
                        .map_err(|_| bad("an integer")),
                    _ => Err(bad("an integer")),
                },
                FieldType::Float => match v {
                    Value::Number(n) if n.as_i64().is_some() && !n.is_f64() => {
                        Ok(SortValue::Float(n.as_i64().unwrap() as f64))
                    }
                    _ => float_value(v)
                        .filter(|_| !v.is_boolean())
                        .map(|f| SortValue::Float(if f == 0.0 { 0.0 } else { f }))
                        .ok_or_else(|| bad("a number")),
                },
                FieldType::Datetime => datetime_value(v)
                    .map(SortValue::Int)
                    .ok_or_else(|| bad("epoch milliseconds or an RFC 3339 datetime")),
                FieldType::Bool => match v {
                    Value::Bool(b) => Ok(SortValue::Bool(*b)),
                    Value::Number(n) if n.as_u64() == Some(0) => Ok(SortValue::Bool(false)),
                    Value::Number(n) if n.as_u64() == Some(1) => Ok(SortValue::Bool(true)),
                    Value::String(s) if s == "true" || s == "false" => {
                        Ok(SortValue::Bool(s == "true"))
                    }
                    _ => Err(bad("a bool")),
                },
            },
        }
    }
}

/// Parses an Elasticsearch `sort`: `"price"`, `{"price": "desc"}`,
/// `{"price": {"order": "desc"}}`, `"_id"`/`"id"`, `"_score"`, or an array of those. Fields
/// ascend by default, `_score` descends. Accepted options: `order`, `missing: "_last"` (the
/// only behaviour: missing values sort last both ways) and `mode` equal to the default (`min`
/// ascending, `max` descending); any other option or value is an error naming it. Unknown or
/// skipped fields are errors with the element's path (`sort[1]`).
pub fn parse_sort(v: &Value, schema: &Schema, path: &str) -> Result<Vec<SortKey>, FilterError> {
    match v {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| sort_key(x, schema, &format!("{path}[{i}]")))
            .collect(),
        x => Ok(vec![sort_key(x, schema, path)?]),
    }
}

fn sort_by(name: &str, schema: &Schema, path: &str) -> Result<SortBy, FilterError> {
    Ok(match name {
        "_id" | "id" => SortBy::Id,
        "_score" => SortBy::Score,
        "_doc" => {
            return Err(FilterError::new(
                path,
                "sorting by \"_doc\" is not supported",
            ))
        }
        f => {
            field_type(schema, f, path)?;
            SortBy::Field(f.to_string())
        }
    })
}

fn parse_order(v: &Value, path: &str) -> Result<Order, FilterError> {
    match v.as_str() {
        Some(s) if s.eq_ignore_ascii_case("asc") => Ok(Order::Asc),
        Some(s) if s.eq_ignore_ascii_case("desc") => Ok(Order::Desc),
        _ => Err(FilterError::new(
            path,
            format!("order must be \"asc\" or \"desc\", found {v}"),
        )),
    }
}

fn sort_key(v: &Value, schema: &Schema, path: &str) -> Result<SortKey, FilterError> {
    let (name, spec) = match v {
        Value::String(s) => (s.as_str(), None),
        Value::Object(o) if o.len() == 1 => {
            let (k, x) = o.iter().next().unwrap();
            (k.as_str(), Some(x))
        }
        Value::Object(o) => {
            return Err(FilterError::new(
                path,
                format!(
                    "a sort object has exactly one field, found {} keys",
                    o.len()
                ),
            ))
        }
        _ => {
            return Err(FilterError::new(
                path,
                format!(
                    "expected a field name or {{field: order}}, found {}",
                    kind(v)
                ),
            ))
        }
    };
    let p = format!("{path}.{name}");
    let by = sort_by(name, schema, &p)?;
    let mut order = if by == SortBy::Score {
        Order::Desc
    } else {
        Order::Asc
    };
    let mut mode = None;
    match spec {
        None => {}
        Some(Value::String(_)) => order = parse_order(spec.unwrap(), &p)?,
        Some(Value::Object(o)) => {
            for (k, x) in o {
                let kp = format!("{p}.{k}");
                match k.as_str() {
                    "order" => order = parse_order(x, &kp)?,
                    "missing" if x.as_str() == Some("_last") => {}
                    "missing" => {
                        return Err(FilterError::new(
                            kp,
                            format!("\"missing\": {x} is not supported; missing values always sort last (\"_last\")"),
                        ))
                    }
                    "mode" => mode = Some((x, kp)),
                    _ => {
                        return Err(FilterError::new(
                            kp,
                            format!("unsupported sort option \"{k}\" (supported: order, missing: \"_last\", mode)"),
                        ))
                    }
                }
            }
        }
        Some(x) => {
            return Err(FilterError::new(
                p,
                format!(
                    "expected \"asc\", \"desc\" or an options object, found {}",
                    kind(x)
                ),
            ))
        }
    }
    if let Some((m, mp)) = mode {
        let want = if order == Order::Asc { "min" } else { "max" };
        if m.as_str() != Some(want) {
            return Err(FilterError::new(
                mp,
                format!("\"mode\": {m} is not supported; a multi-valued field sorts by its min ascending and its max descending"),
            ));
        }
    }
    Ok(SortKey { by, order })
}

fn rank(v: &SortValue) -> u8 {
    match v {
        SortValue::Int(_) | SortValue::Float(_) => 0,
        SortValue::Str(_) => 1,
        SortValue::Bool(_) => 2,
        SortValue::Id(_) => 3,
        SortValue::Missing => 4,
    }
}

fn cmp_int_float(a: i64, b: f64) -> Ordering {
    if b.is_nan() {
        return Ordering::Less;
    }
    if b >= 9.223_372_036_854_776e18 {
        return Ordering::Less;
    }
    if b < -9.223_372_036_854_776e18 {
        return Ordering::Greater;
    }
    let t = b.trunc() as i64;
    a.cmp(&t).then_with(|| {
        let frac = b - b.trunc();
        0.0f64.partial_cmp(&frac).unwrap_or(Ordering::Equal)
    })
}

/// Ascending comparison of two values of one key; Missing is handled by the caller.
fn cmp_value(a: &SortValue, b: &SortValue) -> Ordering {
    use SortValue::*;
    match (a, b) {
        (Int(x), Int(y)) => x.cmp(y),
        (Float(x), Float(y)) => x.total_cmp(y),
        (Int(x), Float(y)) => cmp_int_float(*x, *y),
        (Float(x), Int(y)) => cmp_int_float(*y, *x).reverse(),
        (Str(x), Str(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bool(x), Bool(y)) => x.cmp(y),
        (Id(x), Id(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

fn cmp_one(order: Order, a: &SortValue, b: &SortValue) -> Ordering {
    match (a, b) {
        (SortValue::Missing, SortValue::Missing) => Ordering::Equal,
        (SortValue::Missing, _) => Ordering::Greater,
        (_, SortValue::Missing) => Ordering::Less,
        _ => {
            let o = cmp_value(a, b);
            if order == Order::Desc {
                o.reverse()
            } else {
                o
            }
        }
    }
}

/// The total order of [`FieldIndex::page`]: the values of `keys` in turn (missing last in
/// both directions; floats by total order; integers and floats numerically across segments;
/// ids `Int < Str`, integers numerically, strings bytewise), then — for positions beyond
/// `keys` — the implicit id tiebreaker ascending. Compares the common prefix of `a` and `b`.
pub fn compare(keys: &[SortKey], a: &[SortValue], b: &[SortValue]) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let order = keys.get(i).map_or(Order::Asc, |k| k.order);
        let o = match keys.get(i).map(|k| &k.by) {
            Some(SortBy::Score) => Ordering::Equal,
            _ => cmp_one(order, x, y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// A facet bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// The keyword value.
    pub value: String,
    /// Documents with it.
    pub count: u64,
}

/// Merges `counts` (summing duplicate values, e.g. from several segments), orders them by count
/// descending then value ascending (bytewise), and returns the first `size` buckets and the sum
/// of the counts not returned (`other_count`, Elasticsearch's `sum_other_doc_count`).
///
/// The values may be owned or borrowed (`&str` from a field's dictionary): only the `size`
/// kept become `String`s, so a facet over a field of many distinct values does not copy
/// every value to keep a few.
pub fn top_buckets<K>(counts: impl IntoIterator<Item = (K, u64)>, size: usize) -> (Vec<Bucket>, u64)
where
    K: AsRef<str> + Into<String> + Eq + std::hash::Hash,
{
    let mut m: HashMap<K, u64> = HashMap::new();
    for (v, c) in counts {
        *m.entry(v).or_insert(0) += c;
    }
    top_distinct_buckets(m, size)
}

/// [`top_buckets`] of counts whose values are already distinct (one segment's facet): no
/// merge, so no hash table over every value.
pub fn top_distinct_buckets<K>(
    counts: impl IntoIterator<Item = (K, u64)>,
    size: usize,
) -> (Vec<Bucket>, u64)
where
    K: AsRef<str> + Into<String>,
{
    let mut all: Vec<(K, u64)> = counts.into_iter().filter(|(_, c)| *c > 0).collect();
    let by = |a: &(K, u64), b: &(K, u64)| {
        b.1.cmp(&a.1)
            .then_with(|| a.0.as_ref().as_bytes().cmp(b.0.as_ref().as_bytes()))
    };
    if all.len() > size && size > 0 {
        all.select_nth_unstable_by(size - 1, by);
    }
    let other: u64 = if all.len() > size {
        all[size..].iter().map(|b| b.1).sum()
    } else {
        0
    };
    all.truncate(size);
    all.sort_by(by);
    let buckets = all
        .into_iter()
        .map(|(value, count)| Bucket {
            value: value.into(),
            count,
        })
        .collect();
    (buckets, other)
}

/// A compact per-row key: keyword ordinals are `2 * ord + 1`, so a cursor string not in the
/// dictionary can sit between two ordinals (`2 * insertion point`).
#[derive(Clone, Copy, Debug)]
enum K {
    Missing,
    I(i64),
    F(f64),
    O(u64),
    B(bool),
    /// A score key, or an id key (compared through the ids).
    Nil,
    Id,
}

fn k_rank(k: &K) -> u8 {
    match k {
        K::I(_) | K::F(_) => 0,
        K::O(_) => 1,
        K::B(_) => 2,
        K::Nil | K::Id => 3,
        K::Missing => 4,
    }
}

#[inline]
fn cmp_k(order: Order, a: &K, b: &K) -> Ordering {
    let o = match (a, b) {
        (K::Missing, K::Missing) => return Ordering::Equal,
        (K::Missing, _) => return Ordering::Greater,
        (_, K::Missing) => return Ordering::Less,
        (K::I(x), K::I(y)) => x.cmp(y),
        (K::F(x), K::F(y)) => x.total_cmp(y),
        (K::I(x), K::F(y)) => cmp_int_float(*x, *y),
        (K::F(x), K::I(y)) => cmp_int_float(*y, *x).reverse(),
        (K::O(x), K::O(y)) => x.cmp(y),
        (K::B(x), K::B(y)) => x.cmp(y),
        _ => k_rank(a).cmp(&k_rank(b)),
    };
    if order == Order::Desc {
        o.reverse()
    } else {
        o
    }
}

/// Compares two entries; ids are fetched only when the keys tie up to an id position.
/// `b_len` limits how many positions `b` has (a short cursor): positions beyond tie.
#[inline]
fn cmp_entries(
    keys: &[SortKey],
    implicit_id: bool,
    a: &[K],
    a_id: &mut impl FnMut() -> IdKey,
    b: &[K],
    b_id: Option<&IdKey>,
    b_len: usize,
) -> Ordering {
    for (i, key) in keys.iter().enumerate() {
        if i >= b_len {
            return Ordering::Equal;
        }
        if let SortBy::Id = key.by {
            let Some(bid) = b_id else {
                return Ordering::Equal;
            };
            let o = a_id().cmp(bid);
            return if key.order == Order::Desc {
                o.reverse()
            } else {
                o
            };
        }
        let o = cmp_k(key.order, &a[i], &b[i]);
        if o != Ordering::Equal {
            return o;
        }
    }
    if implicit_id && b_len > keys.len() {
        if let Some(bid) = b_id {
            return a_id().cmp(bid);
        }
    }
    Ordering::Equal
}

impl FieldIndex {
    /// The value `row` sorts by under `key`: the smallest value ascending and the largest
    /// descending for multi-valued fields; datetimes as epoch milliseconds. `Id` and `Score`
    /// keys (and fields this segment does not have) give [`SortValue::Missing`]; the id comes
    /// from the caller's `id_of` in [`FieldIndex::page`].
    pub fn sort_value(&self, row: u32, key: &SortKey) -> SortValue {
        let k = self.key_of(row, key);
        self.to_value(k, key)
    }

    fn key_of(&self, row: u32, key: &SortKey) -> K {
        let col = match &key.by {
            SortBy::Field(f) => self.col(f),
            _ => None,
        };
        key_of_col(col, row, key)
    }

    fn to_value(&self, k: K, key: &SortKey) -> SortValue {
        match k {
            K::Missing | K::Nil | K::Id => SortValue::Missing,
            K::I(i) => SortValue::Int(i),
            K::F(f) => SortValue::Float(f),
            K::B(b) => SortValue::Bool(b),
            K::O(o) => match &key.by {
                SortBy::Field(f) => match self.col(f) {
                    Some(Column::Keyword(c)) => {
                        SortValue::Str(c.dict[((o - 1) / 2) as usize].clone())
                    }
                    _ => SortValue::Missing,
                },
                _ => SortValue::Missing,
            },
        }
    }

    /// A cursor value as a compact key of this segment.
    fn cursor_key(&self, v: &SortValue, key: &SortKey) -> K {
        match v {
            SortValue::Missing => K::Missing,
            SortValue::Int(i) => K::I(*i),
            SortValue::Float(f) => K::F(*f),
            SortValue::Bool(b) => K::B(*b),
            SortValue::Id(_) => K::Id,
            SortValue::Str(s) => match &key.by {
                SortBy::Field(f) => match self.col(f) {
                    Some(Column::Keyword(c)) => {
                        let p = c.dict.partition_point(|d| d.as_bytes() < s.as_bytes());
                        let exact = c.dict.get(p).is_some_and(|d| d == s);
                        K::O(2 * p as u64 + u64::from(exact))
                    }
                    // A string where this segment has no keyword column: after all numbers.
                    _ => K::O(0),
                },
                _ => K::Nil,
            },
        }
    }

    /// The exact first `size` rows of `rows` strictly after the cursor `after`, in the order of
    /// [`compare`] over `keys` plus the implicit id tiebreaker (ascending, when `Id` is not among
    /// `keys`). Each row comes with its sort values: one per key, then the id when it is
    /// implicit — ready to be the next cursor. A cursor shorter than that compares on its
    /// prefix only (rows tying the prefix are excluded). `Score` keys tie every row. `id_of` is
    /// called only for rows that could enter the page.
    ///
    /// Chooses per call between a scan of every row and a walk of the first key's value order
    /// ([`PagePlan::Auto`]); see [`FieldIndex::page_with_plan`].
    pub fn page(
        &self,
        rows: &RoaringBitmap,
        keys: &[SortKey],
        after: Option<&[SortValue]>,
        size: usize,
        id_of: &dyn Fn(u32) -> DocId,
    ) -> Vec<(u32, Vec<SortValue>)> {
        self.page_with_plan(rows, keys, after, size, id_of, PagePlan::Auto)
    }

    /// [`FieldIndex::page`] with the way of finding the page given; every plan returns the same
    /// rows, in the same order, with the same sort values.
    ///
    /// * The scan computes every row's sort keys and keeps the best in a bounded buffer:
    ///   amortised O(rows + size log size), independent of the cursor.
    /// * The walk needs a first key on a keyword, integer, float or datetime field. It visits
    ///   that field's values in sort order — the value-sorted `(value, row)` arrays, or the
    ///   sorted dictionary and its postings — from the cursor's first value (binary search),
    ///   taking the rows in `rows`. Each run of equal first values is ordered by the other keys
    ///   (and the id) as the scan does; the walk stops after the run that fills the page. A
    ///   multi-valued row is taken only at its sort value (its min ascending, its max
    ///   descending). Rows in `rows` without the field come last, ordered by the other keys.
    ///   Cost: about `size * values / matching` entries visited, plus the runs of equal values
    ///   at the start and the end.
    ///
    /// [`PagePlan::Auto`] estimates both (a cost model in nanoseconds measured on 1M rows) and,
    /// when walking, gives up and scans once the walk has cost as much as the scan would (rows
    /// correlated with the sort order, or the page falling among the rows without the field):
    /// at worst about twice the scan.
    pub fn page_with_plan(
        &self,
        rows: &RoaringBitmap,
        keys: &[SortKey],
        after: Option<&[SortValue]>,
        size: usize,
        id_of: &dyn Fn(u32) -> DocId,
        plan: PagePlan,
    ) -> Vec<(u32, Vec<SortValue>)> {
        self.page_with(rows, keys, after, size, id_of, None, plan)
    }

    /// [`FieldIndex::page_with_plan`] with the segment's [`IdOrder`] when the caller has one:
    /// the same page, with ids compared by rank (never fetched for rows that do not enter the
    /// page) and, for a first key on the id, a walk of the rows in id order (about
    /// `size * docs / matching` rows visited) when that costs less than the scan.
    #[allow(clippy::too_many_arguments)]
    pub fn page_with(
        &self,
        rows: &RoaringBitmap,
        keys: &[SortKey],
        after: Option<&[SortValue]>,
        size: usize,
        id_of: &dyn Fn(u32) -> DocId,
        order: Option<IdOrder>,
        plan: PagePlan,
    ) -> Vec<(u32, Vec<SortValue>)> {
        if size == 0 || rows.is_empty() {
            return Vec::new();
        }
        let req = Req::new(self, keys, after, id_of, order);
        if req.cursor.as_ref().is_some_and(|c| c.len == 0) {
            // An empty cursor ties every row on its (empty) prefix: nothing is after it.
            return Vec::new();
        }
        let by_id = keys.first().is_some_and(|k| k.by == SortBy::Id);
        let walked = match (plan, order, Walk::of(req.cols.first().copied().flatten())) {
            (PagePlan::Scan, _, _) => None,
            (_, Some(o), _) if by_id => {
                let scan = rows.len() as f64 * cost::ID_SCAN_NS;
                let walk =
                    size as f64 * f64::from(self.docs.max(1)) / rows.len() as f64 * cost::VISIT_NS;
                if plan == PagePlan::Walk || walk < scan {
                    Self::walk_ids(&req, o, rows, size)
                } else {
                    None
                }
            }
            (_, _, None) => None,
            (PagePlan::Walk, _, Some(w)) => self.walk(&req, &w, rows, size, None),
            (PagePlan::Auto, _, Some(w)) => {
                let (walk, scan) = self.walk_estimate(&req, &w, rows, size);
                if walk < scan {
                    self.walk(&req, &w, rows, size, Some(scan))
                } else {
                    None
                }
            }
        };
        let page = walked.unwrap_or_else(|| req.top(rows.iter(), size, None));
        page.into_iter()
            .map(|c| {
                let id = (req.id_of)(c.row);
                let mut vals: Vec<SortValue> = keys
                    .iter()
                    .zip(&c.keys)
                    .map(|(key, k)| match key.by {
                        SortBy::Id => SortValue::Id(id.clone()),
                        _ => self.to_value(*k, key),
                    })
                    .collect();
                if req.implicit {
                    vals.push(SortValue::Id(id));
                }
                (c.row, vals)
            })
            .collect()
    }

    /// The page of a sort whose first key is the id: the rows of `rows` in id order from the
    /// cursor on. Ids are unique, so the first key decides and the other keys only give the
    /// sort values. `None` when the cursor has no id (nothing is after it; the scan says so).
    fn walk_ids(req: &Req, o: IdOrder, rows: &RoaringBitmap, size: usize) -> Option<Vec<Cand>> {
        let n = o.by_rank.len() as u64;
        let desc = req.keys[0].order == Order::Desc;
        // Ranks strictly after the cursor: `2r + 1 > key` ascending, `< key` descending.
        let (lo, hi) = match &req.cursor {
            None => (0, n),
            Some(c) => match &c.id {
                Some(IdKey::Rank(k)) if desc => (0, (k / 2).min(n)),
                Some(IdKey::Rank(k)) => (k.div_ceil(2).min(n), n),
                _ => return None,
            },
        };
        let mut set = RowSet::new(rows);
        let mut out = Vec::with_capacity(size.min(1 << 16));
        let mut take = |r: u64| {
            let row = o.by_rank[r as usize];
            if set.contains(row) {
                let keys = req
                    .keys
                    .iter()
                    .zip(&req.cols)
                    .map(|(key, col)| key_of_col(*col, row, key))
                    .collect();
                out.push(Cand {
                    row,
                    keys,
                    id: IdKey::Rank(2 * r + 1),
                });
            }
            out.len() >= size
        };
        if desc {
            for r in (lo..hi).rev() {
                if take(r) {
                    break;
                }
            }
        } else {
            for r in lo..hi {
                if take(r) {
                    break;
                }
            }
        }
        Some(out)
    }

    /// The walk's first position in walk order: the first whose first key is not before the
    /// cursor's (0 without a cursor).
    fn walk_start(req: &Req, w: &Walk, at: &dyn Fn(usize) -> usize) -> usize {
        let Some(c) = &req.cursor else { return 0 };
        let order = req.keys[0].order;
        let (mut lo, mut hi) = (0, w.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cmp_k(order, &w.key(at(mid)), &c.keys[0]) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Estimated costs of (walk, scan) in nanoseconds ([`cost`]). The scan computes the sort
    /// keys of all `rows`; the walk visits about `size * entries / matching` entries plus the
    /// first run of equal values, computes the keys of the matching ones, and — when that
    /// reaches the end of the values — the keys of the rows without the field too.
    fn walk_estimate(&self, req: &Req, w: &Walk, rows: &RoaringBitmap, size: usize) -> (f64, f64) {
        let nk = req.keys.len().max(1) as f64;
        let m = rows.len() as f64;
        let scan = m * nk * cost::scan_row_ns(rows, self.docs);
        // Rows of `rows` with the field; most fields are on every row, sparing the intersection.
        let present = w.present();
        let matching = if present.len() == u64::from(self.docs) && rows.max() < Some(self.docs) {
            m
        } else {
            rows.intersection_len(present) as f64
        };
        if matching == 0.0 {
            return (f64::INFINITY, scan);
        }
        let n = w.len();
        let desc = req.keys[0].order == Order::Desc;
        let at = |p: usize| if desc { n - 1 - p } else { p };
        let start = Self::walk_start(req, w, &at);
        let entries = w.entries() as f64;
        let left = entries * (n - start) as f64 / n.max(1) as f64;
        let first_run = if start < n {
            w.run_entries(at(start)) as f64
        } else {
            0.0
        };
        let visits = (first_run + size as f64 * entries / matching).min(left);
        let mut walk = visits * cost::VISIT_NS
            + visits * matching / entries * nk * cost::random_key_ns(self.docs);
        if visits >= left {
            walk += (m - matching) * nk * cost::scan_row_ns(rows, self.docs);
        }
        (walk, scan)
    }

    /// The page by walking the first key's values (see [`FieldIndex::page_with_plan`]); `None`
    /// when the cost passes `limit` (then the caller scans).
    fn walk(
        &self,
        req: &Req,
        w: &Walk,
        rows: &RoaringBitmap,
        size: usize,
        limit: Option<f64>,
    ) -> Option<Vec<Cand>> {
        let per_row = cost::random_key_ns(self.docs) * req.keys.len().max(1) as f64;
        let n = w.len();
        let desc = req.keys[0].order == Order::Desc;
        let at = |p: usize| if desc { n - 1 - p } else { p };
        let mut p = Self::walk_start(req, w, &at);
        let mut out: Vec<Cand> = Vec::with_capacity(size.min(1 << 16));
        let mut set = RowSet::new(rows);
        let mut spent = 0.0;
        while p < n && out.len() < size {
            let k = w.key(at(p));
            let mut q = p + 1;
            while q < n && w.same(at(q), &k) {
                q += 1;
            }
            let (lo, hi) = if desc { (at(q - 1), at(p) + 1) } else { (p, q) };
            let (members, visits) = w.members(lo, hi, &mut set);
            spent += visits * cost::VISIT_NS + per_row * members.len() as f64;
            if !members.is_empty() {
                out.extend(req.top(members, size - out.len(), Some(k)));
            }
            if limit.is_some_and(|l| spent > l) {
                return None;
            }
            p = q;
        }
        if out.len() < size {
            let missing = rows - w.present();
            out.extend(req.top(missing.iter(), size - out.len(), None));
        }
        Some(out)
    }
}

#[cfg(test)]
mod bucket_tests {
    use super::*;

    #[test]
    fn borrowed_and_distinct_buckets_match_the_owned_merge() {
        let a = [("b", 2u64), ("a", 2), ("c", 5), ("d", 0), ("e", 1)];
        let b = [("c", 1u64), ("f", 3)];
        let owned: Vec<(String, u64)> = a
            .iter()
            .chain(b.iter())
            .map(|(v, c)| (v.to_string(), *c))
            .collect();
        for size in 0..8 {
            let want = top_buckets(owned.clone(), size);
            assert_eq!(top_buckets(a.iter().chain(b.iter()).copied(), size), want);
            // One segment: distinct values, no merge.
            let one = top_buckets(a.iter().copied(), size);
            assert_eq!(top_distinct_buckets(a.iter().copied(), size), one);
        }
        let (top, other) = top_buckets(a.iter().chain(b.iter()).copied(), 2);
        let got: Vec<(&str, u64)> = top.iter().map(|x| (x.value.as_str(), x.count)).collect();
        assert_eq!(got, [("c", 6), ("f", 3)]);
        assert_eq!(other, 5);
    }
}
