//! Field values converted to their type ([`TypedValue`]) and the number conversions the
//! writer and the filter parser share (Elasticsearch's: a float truncates toward zero, a
//! numeric string parses). Below `writer`, `view` and `filter`, importing none of them.

use serde_json::Value;

/// One value of a field converted to its type, as the field index stores it.
#[derive(Clone, Debug, PartialEq)]
pub enum TypedValue {
    /// Keywords (numbers and bools in a keyword field become their JSON text).
    Keyword(String),
    /// Integers, and datetimes as epoch milliseconds.
    Int(i64),
    /// Floats (numbers and numeric strings in a float field).
    Float(f64),
    /// Bools (`true`/`false`, or the strings `"true"`/`"false"` in a bool field).
    Bool(bool),
}

impl TypedValue {
    /// The value as a number (integers and datetimes widened), for numeric comparisons.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            TypedValue::Int(i) => Some(*i as f64),
            TypedValue::Float(f) => Some(*f),
            TypedValue::Keyword(_) | TypedValue::Bool(_) => None,
        }
    }

    /// The value as JSON (a non-finite float is `null`).
    pub fn to_json(&self) -> Value {
        match self {
            TypedValue::Keyword(s) => Value::String(s.clone()),
            TypedValue::Int(i) => Value::from(*i),
            TypedValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            TypedValue::Bool(b) => Value::Bool(*b),
        }
    }
}

pub(crate) fn num_to_i64(n: &serde_json::Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?.trunc();
    if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        Some(f as i64)
    } else {
        None
    }
}

pub(crate) fn str_to_i64(s: &str) -> Option<i64> {
    if let Ok(i) = s.parse::<i64>() {
        return Some(i);
    }
    let f: f64 = s.parse().ok()?;
    if f.is_finite() {
        num_to_i64(&serde_json::Number::from_f64(f)?)
    } else {
        None
    }
}
