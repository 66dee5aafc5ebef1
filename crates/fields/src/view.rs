//! Public, read-only views of a parsed [`Filter`] and of the typed values of a document's
//! field, for engines other than the field index (the Qdrant backend translates filters
//! into its own and stores the same typed values as payload).

use serde_json::Value;

use crate::filter::{Filter, Node};
use crate::schema::FieldType;
use crate::value::TypedValue;
use crate::DocId;

/// A parsed filter clause. Values are already converted to the field's type (datetimes
/// are epoch milliseconds in `Int` and `IntRange`).
#[derive(Clone, Debug, PartialEq)]
pub enum FilterView {
    /// `match_all`.
    All,
    /// `match_none` (or a `bool` that can never match).
    None,
    /// A keyword field equal to one of the values.
    Keyword(String, Vec<String>),
    /// An integer or datetime field equal to one of the values.
    Int(String, Vec<i64>),
    /// A float field equal to one of the values.
    Float(String, Vec<f64>),
    /// A bool field equal to one of the values.
    Bool(String, Vec<bool>),
    /// An integer or datetime field within inclusive bounds.
    IntRange(String, i64, i64),
    /// A float field within (value, inclusive) bounds.
    FloatRange(String, Option<(f64, bool)>, Option<(f64, bool)>),
    /// At least one non-null value.
    Exists(String),
    /// The document's id is one of these.
    Ids(Vec<DocId>),
    /// `bool`: every `must`, at least `min_should` of `should`, none of `must_not`.
    And {
        /// Clauses that must all match (`must` and `filter`).
        must: Vec<FilterView>,
        /// Clauses of which at least `min_should` must match.
        should: Vec<FilterView>,
        /// Clauses none of which may match.
        must_not: Vec<FilterView>,
        /// How many `should` clauses must match: `minimum_should_match` resolved (without
        /// it, 1 when there are `should` but no `must` clauses, else 0); at most `should.len()`.
        min_should: usize,
    },
}

fn view(n: &Node) -> FilterView {
    match n {
        Node::All => FilterView::All,
        Node::None => FilterView::None,
        Node::Keyword(f, v) => FilterView::Keyword(f.clone(), v.clone()),
        Node::Int(f, v) => FilterView::Int(f.clone(), v.clone()),
        Node::Float(f, v) => FilterView::Float(f.clone(), v.clone()),
        Node::Bool(f, v) => FilterView::Bool(f.clone(), v.clone()),
        Node::IntRange(f, lo, hi) => FilterView::IntRange(f.clone(), *lo, *hi),
        Node::FloatRange(f, lo, hi) => FilterView::FloatRange(f.clone(), *lo, *hi),
        Node::Exists(f) => FilterView::Exists(f.clone()),
        Node::Ids(ids) => FilterView::Ids(ids.clone()),
        Node::And(must, should, not, required) => FilterView::And {
            must: must.iter().map(view).collect(),
            should: should.iter().map(view).collect(),
            must_not: not.iter().map(view).collect(),
            min_should: *required,
        },
    }
}

impl Filter {
    /// The parsed clause tree.
    pub fn view(&self) -> FilterView {
        view(&self.node)
    }
}

/// The values of a document's field as the field index would index them: arrays
/// flattened, nulls dropped, each scalar coerced to `ty` as Elasticsearch does (values
/// that cannot be are left out), keywords over 256 bytes left out (`ignore_above`).
pub fn typed_values(ty: FieldType, v: &Value) -> Vec<TypedValue> {
    let mut flat = Vec::new();
    let mut object = false;
    crate::writer::flatten_pub(v, &mut flat, &mut object);
    flat.iter()
        .filter_map(|x| crate::writer::convert(ty, x))
        .filter(|t| !matches!(t, TypedValue::Keyword(s) if s.len() > crate::IGNORE_ABOVE))
        .collect()
}
