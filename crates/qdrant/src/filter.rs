//! The filter language, parsed by searchd against the collection's mapping, as a Qdrant
//! filter.
//!
//! | searchd | Qdrant |
//! |---|---|
//! | `term`/`terms` on keyword, integer, bool | `match` `keyword(s)` / `integer(s)` / `boolean` (several bools: `should`) |
//! | `term`/`terms` on float | `range` `gte = lte = v` (several: `should`) |
//! | `range` | `range` (floats; integer bounds beyond 2^53 are refused: not exact in a double) |
//! | datetimes | integers (epoch ms) in collections searchd wrote; `datetime_range` on a Qdrant `datetime` index |
//! | `exists` | `must_not` `is_empty` (missing, null and `[]` are all "not existing" on both sides) |
//! | `ids` | `has_id` (ids mapped as the upload did, [`super::point_id`]) |
//! | `bool` | `must` + `must_not`, `should` (`minimum_should_match` 1) or `min_should` (> 1); `should` ignored when 0 are required |
//! | `match_all` / `match_none` | no condition / `must_not` of an empty filter |

use std::collections::HashSet;

use qdrant_client::qdrant::{
    condition::ConditionOneOf, r#match::MatchValue, Condition, DatetimeRange, FieldCondition,
    Filter, HasIdCondition, IsEmptyCondition, Match, MinShould, Range, RepeatedIntegers,
    RepeatedStrings,
};
use searchd_fields::FilterView;

/// Largest integer a double holds exactly (Qdrant's ranges are doubles).
const EXACT_INT: i64 = 1 << 53;

/// Translation context: which fields are Qdrant `datetime` indexes (RFC 3339 payload).
#[derive(Debug, Clone, Default)]
pub struct Translator {
    /// Names of the fields indexed in Qdrant as `datetime` (values sent as RFC 3339).
    pub native_datetime: HashSet<String>,
}

fn cond(c: ConditionOneOf) -> Condition {
    Condition {
        condition_one_of: Some(c),
    }
}

fn field(key: &str) -> FieldCondition {
    FieldCondition {
        key: key.to_string(),
        ..FieldCondition::default()
    }
}

fn matching(key: &str, m: MatchValue) -> Condition {
    let mut f = field(key);
    f.r#match = Some(Match {
        match_value: Some(m),
    });
    cond(ConditionOneOf::Field(f))
}

fn ranged(key: &str, r: Range) -> Condition {
    let mut f = field(key);
    f.range = Some(r);
    cond(ConditionOneOf::Field(f))
}

fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

fn dt_range(key: &str, gte: Option<i64>, lte: Option<i64>) -> Condition {
    let mut f = field(key);
    f.datetime_range = Some(DatetimeRange {
        gte: gte.map(timestamp),
        lte: lte.map(timestamp),
        ..DatetimeRange::default()
    });
    cond(ConditionOneOf::Field(f))
}

/// A filter whose conditions are all `should` (any of them).
fn any_of(c: Vec<Condition>) -> Condition {
    if c.len() == 1 {
        return c.into_iter().next().expect("one");
    }
    cond(ConditionOneOf::Filter(Filter {
        should: c,
        ..Filter::default()
    }))
}

/// Matches nothing.
pub fn nothing() -> Filter {
    Filter {
        must_not: vec![cond(ConditionOneOf::Filter(Filter::default()))],
        ..Filter::default()
    }
}

fn exact_int(f: &str, v: i64) -> Result<f64, String> {
    if !(-EXACT_INT..=EXACT_INT).contains(&v) {
        return Err(format!(
            "filter: range on \"{f}\" with the bound {v} cannot be expressed in Qdrant (its ranges are doubles, exact only up to 2^53)"
        ));
    }
    Ok(v as f64)
}

impl Translator {
    /// One clause as one Qdrant condition. `Err` names what Qdrant cannot express.
    pub fn condition(
        &self,
        v: &FilterView,
        id: &dyn Fn(&searchd_fields::DocId) -> qdrant_client::qdrant::PointId,
    ) -> Result<Condition, String> {
        Ok(match v {
            FilterView::All => cond(ConditionOneOf::Filter(Filter::default())),
            FilterView::None => cond(ConditionOneOf::Filter(nothing())),
            FilterView::Keyword(f, vals) => match vals.as_slice() {
                [one] => matching(f, MatchValue::Keyword(one.clone())),
                _ => matching(
                    f,
                    MatchValue::Keywords(RepeatedStrings {
                        strings: vals.clone(),
                    }),
                ),
            },
            FilterView::Int(f, vals) if self.native_datetime.contains(f) => any_of(
                vals.iter()
                    .map(|&ms| dt_range(f, Some(ms), Some(ms)))
                    .collect(),
            ),
            FilterView::Int(f, vals) => match vals.as_slice() {
                [one] => matching(f, MatchValue::Integer(*one)),
                _ => matching(
                    f,
                    MatchValue::Integers(RepeatedIntegers {
                        integers: vals.clone(),
                    }),
                ),
            },
            FilterView::Float(f, vals) => any_of(
                vals.iter()
                    .map(|&x| {
                        ranged(
                            f,
                            Range {
                                gte: Some(x),
                                lte: Some(x),
                                ..Range::default()
                            },
                        )
                    })
                    .collect(),
            ),
            FilterView::Bool(f, vals) => any_of(
                vals.iter()
                    .map(|&b| matching(f, MatchValue::Boolean(b)))
                    .collect(),
            ),
            FilterView::IntRange(f, lo, hi) if self.native_datetime.contains(f) => dt_range(
                f,
                (*lo != i64::MIN).then_some(*lo),
                (*hi != i64::MAX).then_some(*hi),
            ),
            FilterView::IntRange(f, lo, hi) => ranged(
                f,
                Range {
                    gte: if *lo == i64::MIN {
                        None
                    } else {
                        Some(exact_int(f, *lo)?)
                    },
                    lte: if *hi == i64::MAX {
                        None
                    } else {
                        Some(exact_int(f, *hi)?)
                    },
                    ..Range::default()
                },
            ),
            FilterView::FloatRange(f, lo, hi) => {
                let mut r = Range::default();
                match lo {
                    Some((x, true)) => r.gte = Some(*x),
                    Some((x, false)) => r.gt = Some(*x),
                    None => {}
                }
                match hi {
                    Some((x, true)) => r.lte = Some(*x),
                    Some((x, false)) => r.lt = Some(*x),
                    None => {}
                }
                ranged(f, r)
            }
            FilterView::Exists(f) => cond(ConditionOneOf::Filter(Filter {
                must_not: vec![cond(ConditionOneOf::IsEmpty(IsEmptyCondition {
                    key: f.clone(),
                }))],
                ..Filter::default()
            })),
            FilterView::Ids(ids) => cond(ConditionOneOf::HasId(HasIdCondition {
                has_id: ids.iter().map(id).collect(),
            })),
            FilterView::And { .. } => cond(ConditionOneOf::Filter(self.filter(v, id)?)),
        })
    }

    /// A whole filter.
    pub fn filter(
        &self,
        v: &FilterView,
        id: &dyn Fn(&searchd_fields::DocId) -> qdrant_client::qdrant::PointId,
    ) -> Result<Filter, String> {
        match v {
            FilterView::All => Ok(Filter::default()),
            FilterView::None => Ok(nothing()),
            FilterView::And {
                must,
                should,
                must_not,
                min_should,
            } => {
                let all = |xs: &[FilterView]| {
                    xs.iter()
                        .map(|x| self.condition(x, id))
                        .collect::<Result<Vec<_>, _>>()
                };
                let mut out = Filter {
                    must: all(must)?,
                    must_not: all(must_not)?,
                    ..Filter::default()
                };
                match *min_should {
                    0 => {}
                    n if n > should.len() => return Ok(nothing()),
                    1 => out.should = all(should)?,
                    n => {
                        out.min_should = Some(MinShould {
                            conditions: all(should)?,
                            min_count: n as u64,
                        })
                    }
                }
                Ok(out)
            }
            other => Ok(Filter {
                must: vec![self.condition(other, id)?],
                ..Filter::default()
            }),
        }
    }
}
