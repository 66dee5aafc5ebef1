//! Value cursors: the sort values of a page's last hit, which the next page starts after.

use serde_json::Value;

use crate::filter::FilterError;
use crate::schema::Schema;
use crate::sort::{Order, SortBy, SortKey, SortValue};

/// The keys a page is ordered by: `keys`, then `id` ascending unless `id` is among them
/// (so the order is total and a cursor names one place).
pub fn with_tiebreak(keys: &[SortKey]) -> Vec<SortKey> {
    let mut full = keys.to_vec();
    if !keys.iter().any(|k| matches!(k.by, SortBy::Id)) {
        full.push(SortKey {
            by: SortBy::Id,
            order: Order::Asc,
        });
    }
    full
}

/// Parse a value cursor (the `sort` of the last hit of a page) for `keys`: one value per
/// key, plus the implicit id tiebreaker when `id` is not among the keys. Any other length
/// is refused (a cursor of another sort), as Elasticsearch refuses it. Errors name `path`
/// (`after[1]`).
pub fn parse_after(
    v: &Value,
    keys: &[SortKey],
    schema: &Schema,
    path: &str,
) -> Result<Vec<SortValue>, FilterError> {
    let full = with_tiebreak(keys);
    let Some(a) = v.as_array() else {
        return Err(FilterError::new(
            path,
            format!("a cursor is the array of sort values of the last hit, got {v}"),
        ));
    };
    if a.len() != full.len() {
        return Err(FilterError::new(
            path,
            format!(
                "the cursor has {} values but the sort has {} keys (plus the id \
                 tiebreaker: {}); pass the \"sort\" of the last hit of the previous page, \
                 with the same sort",
                a.len(),
                keys.len(),
                full.len()
            ),
        ));
    }
    a.iter()
        .zip(&full)
        .enumerate()
        .map(|(i, (x, k))| SortValue::from_json(x, k, schema, &format!("{path}[{i}]")))
        .collect()
}
