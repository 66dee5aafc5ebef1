//! Documents by address: where a document lives in a collection's segments ([`DocRef`]),
//! a scored one ([`DocHit`]), and the rows of each segment that pass a filter ([`Matches`]).

use searchd_engine::roaring::RoaringBitmap;

/// Where a document lives: segment number and row in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DocRef {
    /// Index of the segment in the collection's segment list.
    pub segment: u32,
    /// Row of the document in that segment.
    pub row: u64,
}

/// One search result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DocHit {
    /// The document.
    pub doc: DocRef,
    /// Higher is better (as [`searchd_engine::Hit::score`]).
    pub score: f32,
}

/// The rows of each segment that pass a filter.
#[derive(Debug, Clone, PartialEq)]
pub struct Matches {
    pub(crate) per_segment: Vec<RoaringBitmap>,
}

impl Matches {
    /// Number of matching documents (exact).
    pub fn len(&self) -> u64 {
        self.per_segment.iter().map(|b| b.len()).sum()
    }
    /// Whether no document matches.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The matching rows of segment `i` (empty for an unknown segment).
    pub fn segment(&self, i: usize) -> Option<&RoaringBitmap> {
        self.per_segment.get(i)
    }
    /// Whether `d` is one of the matching documents.
    pub fn contains(&self, d: DocRef) -> bool {
        self.per_segment
            .get(d.segment as usize)
            .is_some_and(|b| u32::try_from(d.row).is_ok_and(|r| b.contains(r)))
    }
    /// The set of the given documents (facets over a query's hits).
    pub fn of_docs(segments: usize, docs: impl IntoIterator<Item = DocRef>) -> Matches {
        let mut per_segment = vec![RoaringBitmap::new(); segments];
        for d in docs {
            if let (Some(b), Ok(r)) = (
                per_segment.get_mut(d.segment as usize),
                u32::try_from(d.row),
            ) {
                b.insert(r);
            }
        }
        Matches { per_segment }
    }
}
