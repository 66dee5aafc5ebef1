//! Sorting: sort keys, sort values, cursors, pages and facet buckets.

use std::cmp::Ordering;
use std::collections::HashMap;

use roaring::RoaringBitmap;
use serde::Serialize;
use serde_json::Value;

use crate::filter::{datetime_value, field_type, float_value, kind, FilterError};
use crate::format::Column;
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
pub fn top_buckets(
    counts: impl IntoIterator<Item = (String, u64)>,
    size: usize,
) -> (Vec<Bucket>, u64) {
    let mut m: HashMap<String, u64> = HashMap::new();
    for (v, c) in counts {
        *m.entry(v).or_insert(0) += c;
    }
    let mut all: Vec<Bucket> = m
        .into_iter()
        .filter(|(_, c)| *c > 0)
        .map(|(value, count)| Bucket { value, count })
        .collect();
    let by = |a: &Bucket, b: &Bucket| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.value.as_bytes().cmp(b.value.as_bytes()))
    };
    if all.len() > size && size > 0 {
        all.select_nth_unstable_by(size - 1, by);
    }
    let other: u64 = if all.len() > size {
        all[size..].iter().map(|b| b.count).sum()
    } else {
        0
    };
    all.truncate(size);
    all.sort_by(by);
    (all, other)
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
fn cmp_entries(
    keys: &[SortKey],
    implicit_id: bool,
    a: &[K],
    a_id: &mut dyn FnMut() -> DocId,
    b: &[K],
    b_id: Option<&DocId>,
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
    /// prefix only (rows tying the prefix are excluded). `Score` keys tie every row. One pass
    /// with a bounded buffer (amortised O(n + size log size)); `id_of` is called only for rows
    /// that could enter the page.
    pub fn page(
        &self,
        rows: &RoaringBitmap,
        keys: &[SortKey],
        after: Option<&[SortValue]>,
        size: usize,
        id_of: &dyn Fn(u32) -> DocId,
    ) -> Vec<(u32, Vec<SortValue>)> {
        if size == 0 || rows.is_empty() {
            return Vec::new();
        }
        let implicit = !keys.iter().any(|k| k.by == SortBy::Id);
        let nk = keys.len();
        let cursor: Option<(Vec<K>, Option<DocId>, usize)> = after.map(|a| {
            let mut ks = Vec::with_capacity(nk);
            let mut id = None;
            for (i, v) in a.iter().enumerate().take(nk + usize::from(implicit)) {
                match keys.get(i) {
                    Some(key) if key.by != SortBy::Id => ks.push(self.cursor_key(v, key)),
                    _ => {
                        if i < nk {
                            ks.push(K::Id);
                        }
                        id = match v {
                            SortValue::Id(d) => Some(d.clone()),
                            SortValue::Str(s) => Some(DocId::Str(s.clone())),
                            SortValue::Int(n) if *n >= 0 => Some(DocId::Int(*n as u64)),
                            _ => None,
                        };
                    }
                }
            }
            let len = a.len().min(nk + usize::from(implicit));
            ks.resize(nk, K::Missing);
            (ks, id, len)
        });
        let full = nk + usize::from(implicit);
        struct Cand {
            row: u32,
            keys: Vec<K>,
            id: DocId,
        }
        let cmp = |a: &Cand, b: &Cand| {
            cmp_entries(
                keys,
                implicit,
                &a.keys,
                &mut || a.id.clone(),
                &b.keys,
                Some(&b.id),
                full,
            )
        };
        let mut buf: Vec<Cand> = Vec::with_capacity(size.min(1 << 16) * 2);
        let mut thr: Option<Cand> = None;
        let mut scratch = vec![K::Missing; nk];
        let cols: Vec<Option<&Column>> = keys
            .iter()
            .map(|k| match &k.by {
                SortBy::Field(f) => self.col(f),
                _ => None,
            })
            .collect();
        for row in rows {
            for ((s, key), col) in scratch.iter_mut().zip(keys).zip(&cols) {
                *s = key_of_col(*col, row, key);
            }
            let mut id: Option<DocId> = None;
            let mut get_id = || id.get_or_insert_with(|| id_of(row)).clone();
            if let Some((ck, cid, clen)) = &cursor {
                if cmp_entries(
                    keys,
                    implicit,
                    &scratch,
                    &mut get_id,
                    ck,
                    cid.as_ref(),
                    *clen,
                ) != Ordering::Greater
                {
                    continue;
                }
            }
            if let Some(t) = &thr {
                if cmp_entries(
                    keys,
                    implicit,
                    &scratch,
                    &mut get_id,
                    &t.keys,
                    Some(&t.id),
                    full,
                ) != Ordering::Less
                {
                    continue;
                }
            }
            let id = get_id();
            buf.push(Cand {
                row,
                keys: scratch.clone(),
                id,
            });
            if buf.len() >= size.saturating_mul(2).max(size + 1024) {
                buf.select_nth_unstable_by(size - 1, cmp);
                buf.truncate(size);
                let w = &buf[size - 1];
                thr = Some(Cand {
                    row: w.row,
                    keys: w.keys.clone(),
                    id: w.id.clone(),
                });
            }
        }
        buf.sort_by(cmp);
        buf.truncate(size);
        buf.into_iter()
            .map(|c| {
                let mut vals: Vec<SortValue> = keys
                    .iter()
                    .zip(&c.keys)
                    .map(|(key, k)| match key.by {
                        SortBy::Id => SortValue::Id(c.id.clone()),
                        _ => self.to_value(*k, key),
                    })
                    .collect();
                if implicit {
                    vals.push(SortValue::Id(c.id));
                }
                (c.row, vals)
            })
            .collect()
    }
}

fn key_of_col(col: Option<&Column>, row: u32, key: &SortKey) -> K {
    if !matches!(key.by, SortBy::Field(_)) {
        return if key.by == SortBy::Id { K::Id } else { K::Nil };
    }
    let desc = key.order == Order::Desc;
    match col {
        None => K::Missing,
        Some(Column::Keyword(c)) => {
            let r = c.row(row);
            let o = if desc { r.last() } else { r.first() };
            o.map_or(K::Missing, |&o| K::O(2 * u64::from(o) + 1))
        }
        Some(Column::Int(c)) => {
            let r = c.row(row);
            let o = if desc { r.last() } else { r.first() };
            o.map_or(K::Missing, |&v| K::I(v))
        }
        Some(Column::Float(c)) => {
            let r = c.row(row);
            let o = if desc { r.last() } else { r.first() };
            o.map_or(K::Missing, |&v| K::F(v))
        }
        Some(Column::Bool(c)) => {
            let (t, f) = (c.t.contains(row), c.f.contains(row));
            match (t, f) {
                (false, false) => K::Missing,
                (true, true) => K::B(desc),
                (t, _) => K::B(t),
            }
        }
    }
}
