//! The filter language: parsing into an AST checked against a [`Schema`].

use std::fmt;

use serde_json::{Map, Value};

use crate::schema::{parse_datetime, FieldType, Schema};
use crate::value::str_to_i64;
use crate::DocId;

/// The deepest `bool` nesting a filter may have (a `bool` inside 32 `bool`s is refused), so a
/// hostile body cannot exhaust the stack.
pub const MAX_FILTER_DEPTH: usize = 32;

/// A filter error: where in the request (`filter.bool.must[1].range.price.gte`) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// The JSON path of the offending value, starting with the prefix given to
    /// [`Filter::parse_at`].
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl FilterError {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> FilterError {
        FilterError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for FilterError {}

/// A parsed filter (the Elasticsearch query-DSL subset of `docs/CONTRACTS.md`).
///
/// Clauses: `{"term": {F: v}}` (or `{F: {"value": v}}`), `{"terms": {F: [v, ...]}}`,
/// `{"range": {F: {"gte"|"gt"|"lte"|"lt": v}}}`, `{"exists": {"field": F}}`,
/// `{"ids": {"values": [...]}}`, `{"bool": {"must"|"filter"|"should"|"must_not": clause or
/// [clauses], "minimum_should_match": N}}`, `{"match_all": {}}`, `{"match_none": {}}`.
/// A `boost` key is accepted and ignored wherever Elasticsearch allows one (filters do not
/// score). Values are converted to the field's type while parsing, so evaluation never fails;
/// a filter should be evaluated on the segment whose schema it was parsed with (a field whose
/// column has another type there matches nothing).
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    pub(crate) node: Node,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    All,
    None,
    Keyword(String, Vec<String>),
    Int(String, Vec<i64>),
    Float(String, Vec<f64>),
    Bool(String, Vec<bool>),
    /// Inclusive bounds.
    IntRange(String, i64, i64),
    /// (value, inclusive) bounds.
    FloatRange(String, Option<(f64, bool)>, Option<(f64, bool)>),
    Exists(String),
    Ids(Vec<DocId>),
    And(Vec<Node>, Vec<Node>, Vec<Node>, usize),
}

impl Filter {
    /// The filter matching every row.
    pub fn match_all() -> Filter {
        Filter { node: Node::All }
    }

    /// [`Filter::parse_at`] with the path prefix `filter`.
    pub fn parse(v: &Value, schema: &Schema) -> Result<Filter, FilterError> {
        Filter::parse_at(v, schema, "filter")
    }

    /// Parses `v` against `schema`; error paths start with `path` (`"query"` for the
    /// Elasticsearch `_search` body, for instance).
    pub fn parse_at(v: &Value, schema: &Schema, path: &str) -> Result<Filter, FilterError> {
        Ok(Filter {
            node: clause(v, schema, path, 0)?,
        })
    }

    /// Whether this is `match_all` (so callers can skip evaluation).
    pub fn is_match_all(&self) -> bool {
        self.node == Node::All
    }

    /// Whether the filter matches by vacuity: it places no condition (every document
    /// matches, or every document that has some field) and the request did not say
    /// `match_all`. A range without bounds, an empty `bool`, a `must_not` of `match_none`,
    /// or a `bool` made only of those. Reads accept them (Elasticsearch does: an empty
    /// range is an `exists`); destructive requests refuse them, since such a filter is
    /// far more often a template with missing values than a wish to delete everything.
    pub fn is_vacuous(&self) -> bool {
        self.node.reach() == Reach::Vacuous
    }
}

/// How much a filter (or one clause of it) constrains ([`Filter::is_vacuous`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Some documents may not match.
    Constrained,
    /// Every document matches, because the request said `match_all`.
    Everything,
    /// Every document (or every one with a field) matches without the request saying so.
    Vacuous,
}

impl Node {
    fn reach(&self) -> Reach {
        match self {
            Node::All => Reach::Everything,
            Node::FloatRange(_, None, None) | Node::IntRange(_, i64::MIN, i64::MAX) => {
                Reach::Vacuous
            }
            Node::And(must, should, not, msm) => {
                // A must_not excludes something unless it is match_none.
                if not.iter().any(|n| *n != Node::None) {
                    return Reach::Constrained;
                }
                let mut parts = Vec::new();
                for m in must {
                    match m.reach() {
                        Reach::Constrained => return Reach::Constrained,
                        r => parts.push(r),
                    }
                }
                if *msm > 0 {
                    // The shoulds pass every document when `msm` of them do.
                    let open: Vec<Reach> = should
                        .iter()
                        .map(Node::reach)
                        .filter(|r| *r != Reach::Constrained)
                        .collect();
                    if open.len() < *msm {
                        return Reach::Constrained;
                    }
                    parts.extend(open);
                }
                if parts.is_empty() || parts.contains(&Reach::Vacuous) {
                    Reach::Vacuous
                } else {
                    Reach::Everything
                }
            }
            _ => Reach::Constrained,
        }
    }
}

fn one_key<'a>(
    v: &'a Value,
    path: &str,
    what: &str,
) -> Result<(&'a String, &'a Value), FilterError> {
    let obj = v.as_object().ok_or_else(|| {
        FilterError::new(path, format!("expected {what} object, found {}", kind(v)))
    })?;
    let mut it = obj.iter();
    match (it.next(), it.next()) {
        (Some(kv), None) => Ok(kv),
        (None, _) => Err(FilterError::new(path, format!("empty {what} object"))),
        (Some(_), Some(_)) => Err(FilterError::new(
            path,
            format!(
                "{what} object has {} keys ({}); expected exactly one",
                obj.len(),
                obj.keys()
                    .map(|k| format!("\"{k}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The field part of term/terms/range: one field key, plus an ignored `boost`.
fn field_key<'a>(
    v: &'a Value,
    path: &str,
    what: &str,
) -> Result<(&'a String, &'a Value), FilterError> {
    if let Some(obj) = v.as_object() {
        if obj.len() == 2 && obj.contains_key("boost") {
            let (k, x) = obj.iter().find(|(k, _)| *k != "boost").unwrap();
            return Ok((k, x));
        }
    }
    one_key(v, path, what)
}

pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The type of an indexed field, or an error saying it is unknown or why it is not indexed.
pub(crate) fn field_type(
    schema: &Schema,
    name: &str,
    path: &str,
) -> Result<FieldType, FilterError> {
    if let Some(f) = schema.get(name) {
        return Ok(f.ty);
    }
    if let Some(s) = schema.skipped(name) {
        return Err(FilterError::new(
            path,
            format!("field \"{name}\" is not indexed: {}", s.reason),
        ));
    }
    Err(FilterError::new(path, format!("unknown field \"{name}\"")))
}

fn clause(v: &Value, schema: &Schema, path: &str, depth: usize) -> Result<Node, FilterError> {
    let (name, body) = one_key(v, path, "a clause")?;
    let p = format!("{path}.{name}");
    match name.as_str() {
        "match_all" | "match_none" => {
            let ok = body.as_object().is_some_and(|o| o.keys().all(|k| k == "boost"));
            if !ok {
                return Err(FilterError::new(p, format!("{name} takes an empty object")));
            }
            Ok(if name == "match_all" { Node::All } else { Node::None })
        }
        "term" => {
            let (field, val) = field_key(body, &p, "a term")?;
            let fp = format!("{p}.{field}");
            let ty = field_type(schema, field, &fp)?;
            let (val, vp) = match val {
                Value::Object(o) => {
                    let mut value = None;
                    for (k, x) in o {
                        match k.as_str() {
                            "value" => value = Some(x),
                            "boost" => {}
                            _ => {
                                return Err(FilterError::new(
                                    format!("{fp}.{k}"),
                                    format!("unknown term parameter \"{k}\""),
                                ))
                            }
                        }
                    }
                    let value = value
                        .ok_or_else(|| FilterError::new(&fp, "term object needs a \"value\""))?;
                    (value, format!("{fp}.value"))
                }
                x => (x, fp.clone()),
            };
            values(field, ty, std::slice::from_ref(val), &vp, false)
        }
        "terms" => {
            let (field, val) = field_key(body, &p, "a terms")?;
            let fp = format!("{p}.{field}");
            let ty = field_type(schema, field, &fp)?;
            let arr = val
                .as_array()
                .ok_or_else(|| FilterError::new(&fp, format!("terms needs an array of values, found {}", kind(val))))?;
            values(field, ty, arr, &fp, true)
        }
        "range" => {
            let (field, val) = field_key(body, &p, "a range")?;
            let fp = format!("{p}.{field}");
            range(field, field_type(schema, field, &fp)?, val, &fp)
        }
        "exists" => {
            let obj = body
                .as_object()
                .ok_or_else(|| FilterError::new(&p, format!("expected {{\"field\": F}}, found {}", kind(body))))?;
            let mut field = None;
            for (k, x) in obj {
                match k.as_str() {
                    "field" => field = Some(x),
                    "boost" => {}
                    _ => return Err(FilterError::new(format!("{p}.{k}"), format!("unknown exists parameter \"{k}\""))),
                }
            }
            let fp = format!("{p}.field");
            let f = field
                .ok_or_else(|| FilterError::new(&p, "exists needs a \"field\""))?
                .as_str()
                .ok_or_else(|| FilterError::new(&fp, "the field name must be a string"))?;
            field_type(schema, f, &fp)?;
            Ok(Node::Exists(f.to_string()))
        }
        "ids" => {
            let obj = body
                .as_object()
                .ok_or_else(|| FilterError::new(&p, format!("expected {{\"values\": [...]}}, found {}", kind(body))))?;
            let mut vals = None;
            for (k, x) in obj {
                match k.as_str() {
                    "values" => vals = Some(x),
                    "boost" => {}
                    _ => return Err(FilterError::new(format!("{p}.{k}"), format!("unknown ids parameter \"{k}\""))),
                }
            }
            let vp = format!("{p}.values");
            let arr = vals
                .ok_or_else(|| FilterError::new(&p, "ids needs \"values\""))?
                .as_array()
                .ok_or_else(|| FilterError::new(&vp, "ids values must be an array"))?;
            let mut ids = Vec::with_capacity(arr.len());
            for (i, x) in arr.iter().enumerate() {
                ids.push(match x {
                    Value::String(s) if !s.is_empty() => DocId::Str(s.clone()),
                    Value::Number(n) if n.as_u64().is_some() => DocId::Int(n.as_u64().unwrap()),
                    _ => {
                        return Err(FilterError::new(
                            format!("{vp}[{i}]"),
                            format!("an id is a non-empty string or an unsigned integer, found {x}"),
                        ))
                    }
                });
            }
            ids.sort();
            ids.dedup();
            Ok(Node::Ids(ids))
        }
        "bool" => {
            if depth >= MAX_FILTER_DEPTH {
                return Err(FilterError::new(
                    p,
                    format!("bool clauses nested deeper than {MAX_FILTER_DEPTH} levels"),
                ));
            }
            let obj = body
                .as_object()
                .ok_or_else(|| FilterError::new(&p, format!("expected a bool object, found {}", kind(body))))?;
            bool_clause(obj, schema, &p, depth + 1)
        }
        _ => Err(FilterError::new(
            p,
            format!(
                "unknown clause \"{name}\" (expected term, terms, range, exists, ids, bool, match_all or match_none)"
            ),
        )),
    }
}

fn bool_clause(
    obj: &Map<String, Value>,
    schema: &Schema,
    p: &str,
    depth: usize,
) -> Result<Node, FilterError> {
    let (mut must, mut should, mut not) = (Vec::new(), Vec::new(), Vec::new());
    let mut msm: Option<(&Value, String)> = None;
    for (k, x) in obj {
        let kp = format!("{p}.{k}");
        let list = match k.as_str() {
            "must" | "filter" => &mut must,
            "should" => &mut should,
            "must_not" => &mut not,
            "minimum_should_match" => {
                msm = Some((x, kp));
                continue;
            }
            "boost" => continue,
            _ => {
                return Err(FilterError::new(
                    kp,
                    format!("unknown bool parameter \"{k}\" (expected must, filter, should, must_not or minimum_should_match)"),
                ))
            }
        };
        match x {
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    list.push(clause(c, schema, &format!("{kp}[{i}]"), depth)?);
                }
            }
            c => list.push(clause(c, schema, &kp, depth)?),
        }
    }
    let n = should.len() as i64;
    let required = match msm {
        None => i64::from(must.is_empty() && !should.is_empty()),
        Some((v, vp)) => {
            let bad = || {
                FilterError::new(&vp, format!("minimum_should_match must be an integer or a percentage like \"75%\", found {v}"))
            };
            let (num, pct) = match v {
                Value::Number(x) => (x.as_i64().ok_or_else(bad)?, false),
                Value::String(s) => {
                    let s = s.trim();
                    match s.strip_suffix('%') {
                        Some(q) => (q.trim().parse::<i64>().map_err(|_| bad())?, true),
                        None => (s.parse::<i64>().map_err(|_| bad())?, false),
                    }
                }
                _ => return Err(bad()),
            };
            let calc = if pct {
                n.saturating_mul(num.clamp(-100_000, 100_000)) / 100
            } else {
                num
            };
            let r = if calc < 0 { n + calc } else { calc };
            r.max(0)
        }
    };
    if required > n {
        return Ok(Node::None);
    }
    Ok(Node::And(must, should, not, required as usize))
}

/// Converts term/terms values to the field's type.
fn values(
    field: &str,
    ty: FieldType,
    vals: &[Value],
    path: &str,
    many: bool,
) -> Result<Node, FilterError> {
    let at = |i: usize| {
        if many {
            format!("{path}[{i}]")
        } else {
            path.to_string()
        }
    };
    let check = |i: usize, v: &Value| -> Result<(), FilterError> {
        if matches!(v, Value::Object(_) | Value::Array(_) | Value::Null) {
            return Err(FilterError::new(
                at(i),
                format!(
                    "a term value must be a string, number or bool, found {}",
                    kind(v)
                ),
            ));
        }
        Ok(())
    };
    let mismatch = |i: usize, v: &Value| {
        FilterError::new(
            at(i),
            format!("{v} is not a valid {ty} value for field \"{field}\""),
        )
    };
    let f = field.to_string();
    match ty {
        FieldType::Keyword => {
            let mut out = Vec::new();
            for (i, v) in vals.iter().enumerate() {
                check(i, v)?;
                out.push(match v {
                    Value::String(s) => s.clone(),
                    x => x.to_string(),
                });
            }
            Ok(Node::Keyword(f, out))
        }
        FieldType::Integer | FieldType::Datetime => {
            let mut out = Vec::new();
            for (i, v) in vals.iter().enumerate() {
                check(i, v)?;
                let x = if ty == FieldType::Datetime {
                    datetime_value(v).ok_or_else(|| mismatch(i, v))?
                } else {
                    match int_exact(v) {
                        Some(Some(x)) => x,
                        Some(None) => continue, // decimal part or out of range: matches nothing
                        None => return Err(mismatch(i, v)),
                    }
                };
                out.push(x);
            }
            Ok(Node::Int(f, out))
        }
        FieldType::Float => {
            let mut out = Vec::new();
            for (i, v) in vals.iter().enumerate() {
                check(i, v)?;
                let x = float_value(v).ok_or_else(|| mismatch(i, v))?;
                out.push(if x == 0.0 { 0.0 } else { x });
            }
            Ok(Node::Float(f, out))
        }
        FieldType::Bool => {
            let mut out = Vec::new();
            for (i, v) in vals.iter().enumerate() {
                check(i, v)?;
                out.push(match v {
                    Value::Bool(b) => *b,
                    Value::String(s) if s == "true" => true,
                    Value::String(s) if s == "false" => false,
                    _ => return Err(mismatch(i, v)),
                });
            }
            Ok(Node::Bool(f, out))
        }
    }
}

/// An integer term value: `Some(Some(i))` exact, `Some(None)` a number that no integer equals,
/// `None` not a number at all.
fn int_exact(v: &Value) -> Option<Option<i64>> {
    let f = match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Some(Some(i));
            }
            n.as_f64()?
        }
        Value::String(s) => {
            let s = s.trim();
            if let Ok(i) = s.parse::<i64>() {
                return Some(Some(i));
            }
            let f: f64 = s.parse().ok()?;
            if !f.is_finite() {
                return None;
            }
            f
        }
        _ => return None,
    };
    if f.fract() != 0.0 || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        return Some(None);
    }
    Some(Some(f as i64))
}

pub(crate) fn float_value(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

/// A datetime value: an RFC 3339 string or epoch milliseconds (truncated).
pub(crate) fn datetime_value(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => parse_datetime(s).or_else(|| str_to_i64(s.trim())),
        Value::Number(n) => crate::value::num_to_i64(n),
        _ => None,
    }
}

fn range(field: &str, ty: FieldType, v: &Value, path: &str) -> Result<Node, FilterError> {
    if matches!(ty, FieldType::Keyword | FieldType::Bool) {
        return Err(FilterError::new(
            path,
            format!("range is not supported on {ty} field \"{field}\""),
        ));
    }
    let obj = v.as_object().ok_or_else(|| {
        FilterError::new(
            path,
            format!("expected range bounds {{\"gte\": ..}}, found {}", kind(v)),
        )
    })?;
    // Inclusive bounds as f64 with flags, or as integers.
    let mut lo: Option<(f64, bool)> = None;
    let mut hi: Option<(f64, bool)> = None;
    let mut ilo = i64::MIN;
    let mut ihi = i64::MAX;
    for (k, x) in obj {
        let kp = format!("{path}.{k}");
        let (is_lo, incl) = match k.as_str() {
            "gte" => (true, true),
            "gt" => (true, false),
            "lte" => (false, true),
            "lt" => (false, false),
            "boost" => continue,
            _ => {
                return Err(FilterError::new(
                    kp,
                    format!("unknown range parameter \"{k}\" (expected gte, gt, lte or lt)"),
                ))
            }
        };
        if x.is_null() {
            continue; // Elasticsearch: a null bound is unbounded
        }
        match ty {
            FieldType::Float => {
                let f = float_value(x)
                    .ok_or_else(|| FilterError::new(&kp, format!("{x} is not a number")))?;
                let b = (if f == 0.0 { 0.0 } else { f }, incl);
                if is_lo {
                    lo = Some(match lo {
                        Some(o) if tighter_lo(o, b) => o,
                        _ => b,
                    });
                } else {
                    hi = Some(match hi {
                        Some(o) if tighter_hi(o, b) => o,
                        _ => b,
                    });
                }
            }
            _ => {
                // Integers and datetimes: exact integer arithmetic in i128; a fractional bound
                // rounds toward the inside of the range.
                let b: i128 = if ty == FieldType::Datetime {
                    let d = datetime_value(x).ok_or_else(|| {
                        FilterError::new(
                            &kp,
                            format!("{x} is not an RFC 3339 datetime or epoch milliseconds"),
                        )
                    })? as i128;
                    adjust(d, is_lo, incl)
                } else {
                    match x {
                        Value::Number(n) if n.as_i64().is_some() => {
                            adjust(n.as_i64().unwrap() as i128, is_lo, incl)
                        }
                        Value::String(s) if s.trim().parse::<i64>().is_ok() => {
                            adjust(s.trim().parse::<i64>().unwrap() as i128, is_lo, incl)
                        }
                        _ => {
                            let f = float_value(x).ok_or_else(|| {
                                FilterError::new(&kp, format!("{x} is not a number"))
                            })?;
                            let r = match (is_lo, incl) {
                                (true, true) => f.ceil(),
                                (true, false) => f.floor() + 1.0,
                                (false, true) => f.floor(),
                                (false, false) => f.ceil() - 1.0,
                            };
                            r.clamp(-1e19, 1e19) as i128
                        }
                    }
                };
                if is_lo {
                    if b > i64::MAX as i128 {
                        return Ok(Node::None);
                    }
                    ilo = ilo.max(b.max(i64::MIN as i128) as i64);
                } else {
                    if b < i64::MIN as i128 {
                        return Ok(Node::None);
                    }
                    ihi = ihi.min(b.min(i64::MAX as i128) as i64);
                }
            }
        }
    }
    Ok(match ty {
        FieldType::Float => Node::FloatRange(field.to_string(), lo, hi),
        _ => Node::IntRange(field.to_string(), ilo, ihi),
    })
}

fn tighter_lo(a: (f64, bool), b: (f64, bool)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && !a.1)
}

fn tighter_hi(a: (f64, bool), b: (f64, bool)) -> bool {
    a.0 < b.0 || (a.0 == b.0 && !a.1)
}

fn adjust(b: i128, is_lo: bool, incl: bool) -> i128 {
    match (is_lo, incl) {
        (true, false) => b + 1,
        (false, false) => b - 1,
        _ => b,
    }
}
