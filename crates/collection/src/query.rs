//! Filters, counts, facets and sorted pages over a collection's segments.
//!
//! Each segment has its own field indexes ([`searchd_fields::FieldIndex`]); a filter is
//! parsed once against the collection's schema and evaluated per segment into a row set
//! ([`Matches`]), which then restricts searches (the engine plans each segment from the
//! set's size), is counted, faceted, or paged. Facet counts of segments are summed by
//! value; sorted pages of segments are merged by the same total order each segment uses
//! ([`searchd_fields::compare`]), so the result is exact at any depth.

use searchd_engine::roaring::RoaringBitmap;
use searchd_fields::{FieldIndex, Filter, FilterError, Schema, SortKey, SortValue};

use crate::collection::Collection;
use crate::rows::DocRef;
pub use crate::rows::Matches;

/// One hit of a sorted page: the document and its sort values (the implicit id
/// tiebreaker last).
#[derive(Debug, Clone, PartialEq)]
pub struct PageHit {
    /// The document.
    pub doc: DocRef,
    /// Its sort values, one per sort key, the id tiebreaker last.
    pub sort: Vec<SortValue>,
}

impl Collection {
    /// The typed fields of the collection (the schema of its field indexes). A collection
    /// made before field indexes existed, or a bare index, has none: only `ids` and
    /// `match_all` filters work on it.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// [`Collection::schema`], shared (requests parsed against it keep it).
    pub fn shared_schema(&self) -> std::sync::Arc<Schema> {
        self.schema.clone()
    }

    /// Parse a filter of the filter language against the schema; errors name the path
    /// under `path` (`filter.bool.must[1].range.price`).
    pub fn parse_filter(&self, v: &serde_json::Value, path: &str) -> Result<Filter, FilterError> {
        Filter::parse_at(v, self.schema(), path)
    }

    fn field_index(&self, i: usize) -> &FieldIndex {
        let seg = &self.segments[i];
        seg.fields.as_ref().unwrap_or(&seg.no_fields)
    }

    /// A cheap estimate of how many documents pass (before evaluation).
    pub fn estimate(&self, f: &Filter) -> u64 {
        (0..self.segments.len())
            .map(|i| self.field_index(i).estimate(f))
            .sum()
    }

    /// The documents that pass `f`, per segment (exact).
    pub fn matches(&self, f: &Filter) -> Matches {
        let per_segment = (0..self.segments.len())
            .map(|i| {
                let ids = &self.segments[i].ids;
                let mut b = self.field_index(i).eval(f, &|id| ids.row(id));
                if let Some(live) = self.live_rows(i) {
                    b &= live;
                }
                b
            })
            .collect();
        Matches { per_segment }
    }

    /// Every document.
    pub fn all(&self) -> Matches {
        Matches {
            per_segment: self
                .segments
                .iter()
                .enumerate()
                .map(|(i, s)| match self.live_rows(i) {
                    Some(live) => live.clone(),
                    None => {
                        let mut b = RoaringBitmap::new();
                        b.insert_range(0..s.len() as u32);
                        b
                    }
                })
                .collect(),
        }
    }

    /// Exact terms buckets of a keyword field over `m`: the first `size` by count
    /// descending then value ascending, and the count of the rest.
    pub fn facet(
        &self,
        field: &str,
        m: &Matches,
        size: usize,
    ) -> Result<(Vec<searchd_fields::Bucket>, u64), FilterError> {
        // Values are borrowed from each segment's dictionary and only the `size` kept are
        // copied: a facet over a field of 200,000 distinct values used to make 200,000
        // strings (twice: a list and a merge table) to keep 10.
        let mut parts: Vec<Vec<(&str, u64)>> = Vec::new();
        for i in 0..self.segments.len() {
            let rows = &m.per_segment[i];
            let fi = self.field_index(i);
            if rows.is_empty() && fi.schema().get(field).is_some() {
                continue;
            }
            parts.push(fi.facet_refs(field, rows)?);
        }
        if parts.len() <= 1 {
            // One segment's values are distinct: no merge table.
            let one = parts.pop().unwrap_or_default();
            return Ok(searchd_fields::top_distinct_buckets(one, size));
        }
        Ok(searchd_fields::top_buckets(
            parts.into_iter().flatten(),
            size,
        ))
    }

    /// The exact page of `size` documents of `m` after the cursor `after`, in the order of
    /// `keys` (then id ascending), skipping `from` first.
    pub fn page(
        &self,
        m: &Matches,
        keys: &[SortKey],
        after: Option<&[SortValue]>,
        from: usize,
        size: usize,
    ) -> Vec<PageHit> {
        let want = from + size;
        if want == 0 {
            return Vec::new();
        }
        let full = with_tiebreak(keys);
        let mut all: Vec<PageHit> = Vec::new();
        for i in 0..self.segments.len() {
            let ids = &self.segments[i].ids;
            let id_of = |row: u32| {
                ids.id(row as u64)
                    .cloned()
                    .unwrap_or(searchd_docs::DocId::Int(row as u64))
            };
            let rows = &m.per_segment[i];
            // Ids compare by rank when they matter: a sort on the id, or a tiebreak.
            let got = self.field_index(i).page_with(
                rows,
                keys,
                after,
                want,
                &id_of,
                Some(ids.order()),
                searchd_fields::PagePlan::Auto,
            );
            all.extend(got.into_iter().map(|(row, sort)| PageHit {
                doc: DocRef {
                    segment: i as u32,
                    row: row as u64,
                },
                sort,
            }));
        }
        if self.segments.len() > 1 {
            all.sort_by(|a, b| searchd_fields::compare(&full, &a.sort, &b.sort));
            all.truncate(want);
        }
        all.drain(..from.min(all.len()));
        all
    }
}

pub use searchd_fields::with_tiebreak;
