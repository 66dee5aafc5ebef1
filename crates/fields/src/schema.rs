//! Field types, the per-segment schema, configuration and RFC 3339 parsing.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The type a field is indexed as.
///
/// Serialized in lowercase (`"keyword"`, `"integer"`, `"float"`, `"bool"`, `"datetime"`).
/// [`FromStr`] also accepts the Elasticsearch names `long`, `double`, `boolean` and `date`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// Exact strings (Elasticsearch `keyword`, `ignore_above: 256`).
    Keyword,
    /// Signed 64-bit integers (Elasticsearch `long`).
    Integer,
    /// 64-bit floats (Elasticsearch `double`).
    Float,
    /// Booleans.
    Bool,
    /// Instants, stored as epoch milliseconds (Elasticsearch `date`).
    Datetime,
}

impl FieldType {
    /// The canonical lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Keyword => "keyword",
            FieldType::Integer => "integer",
            FieldType::Float => "float",
            FieldType::Bool => "bool",
            FieldType::Datetime => "datetime",
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FieldType {
    type Err = String;
    fn from_str(s: &str) -> Result<FieldType, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "keyword" => FieldType::Keyword,
            "integer" | "long" => FieldType::Integer,
            "float" | "double" => FieldType::Float,
            "bool" | "boolean" => FieldType::Bool,
            "datetime" | "date" => FieldType::Datetime,
            _ => {
                return Err(format!(
                "unknown field type \"{s}\" (expected keyword, integer, float, bool or datetime)"
            ))
            }
        })
    }
}

/// One indexed field of a segment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldSpec {
    /// The field name (a top-level key of the documents).
    pub name: String,
    /// The indexed type.
    #[serde(rename = "type")]
    pub ty: FieldType,
    /// Some document gave this field as a JSON array (even of one element).
    pub array: bool,
    /// Documents with at least one indexed value.
    pub docs: u64,
    /// Indexed values over all documents (array elements counted one by one, duplicates included;
    /// keyword values over 256 bytes are not counted).
    pub values: u64,
    /// The type came from [`FieldsConfig::declared`] rather than inference.
    pub declared: bool,
}

/// A field seen in the documents (or named in the configuration) that is not indexed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The field name.
    pub name: String,
    /// Why it is not indexed, as a phrase ("object values are not indexed", ...).
    pub reason: String,
}

/// The fields of one segment: indexed ones sorted by name, then the skipped ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    /// Indexed fields, sorted by name.
    pub fields: Vec<FieldSpec>,
    /// Fields that are not indexed and why, sorted by name.
    pub skipped: Vec<Skipped>,
}

impl Schema {
    /// The indexed field called `name`.
    pub fn get(&self, name: &str) -> Option<&FieldSpec> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The skipped field called `name`.
    pub fn skipped(&self, name: &str) -> Option<&Skipped> {
        self.skipped.iter().find(|f| f.name == name)
    }
}

/// How a [`crate::FieldsWriter`] treats fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldsConfig {
    /// Fields with a declared type: no inference, and a value that cannot be converted is an
    /// [`crate::Error::Field`]. Declared fields are in the schema even when no document has them.
    pub declared: Vec<(String, FieldType)>,
    /// Fields never indexed (the id and text fields, vectors, ...); reported in
    /// [`Schema::skipped`] whether or not a document has them.
    pub skip: Vec<String>,
}

/// Parses an RFC 3339 date-time (`2024-05-01T12:30:00Z`, `2024-05-01T12:30:00.123+02:00`,
/// `t`/space as separator and `z` accepted) or a bare full date (`2024-05-01`, midnight UTC, as
/// Elasticsearch's `strict_date_optional_time` does) into epoch milliseconds. Fractions finer than
/// a millisecond are truncated toward the past; leap seconds (`:60`) are refused.
pub fn parse_datetime(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(part.iter().fold(0i64, |a, &d| a * 10 + i64::from(d - b'0')))
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    if b.len() == 10 {
        return Some(days * 86_400_000);
    }
    if !matches!(b[10], b'T' | b't' | b' ') || b.len() < 20 || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        for k in 0..3 {
            let digit = if start + k < i {
                i64::from(b[start + k] - b'0')
            } else {
                0
            };
            millis = millis * 10 + digit;
        }
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let m = oh * 60 + om;
            if *sign == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(secs * 1000 + millis)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_datetime("1970-01-01"), Some(0));
        assert_eq!(parse_datetime("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(parse_datetime("1970-01-01T02:00:00+02:00"), Some(0));
        assert_eq!(
            parse_datetime("2000-03-01T00:00:00Z"),
            Some(951_868_800_000)
        );
        assert_eq!(parse_datetime("1969-12-31T23:59:59.999Z"), Some(-1));
        assert_eq!(parse_datetime("2023-02-29T00:00:00Z"), None);
        assert_eq!(
            parse_datetime("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
        assert_eq!(parse_datetime("2024-01-01T00:00:00"), None);
        assert_eq!(parse_datetime("2024-01-01T24:00:00Z"), None);
        assert_eq!(parse_datetime("hello"), None);
        assert_eq!(parse_datetime("2024-1-01"), None);
    }
}
