//! How a collection answers a [`Search`] or a [`Page`]: the one entry point of each
//! ([`Collection::query`], [`Collection::read`], [`Collection::document`]) walks every
//! segment (filter, query, merge, facets, page) and returns hits with ids and stored fields,
//! so callers never walk segments or call accessors one by one.

use std::time::Instant;

use searchd_engine::{FilterPlan, SearchError, SearchParams};
use searchd_fields::{Filter, FilterError};

use crate::collection::{Collection, HybridError, SegmentRun};
use crate::query::Matches;
use crate::request::{
    select_fields, Document, FacetOutput, FacetSpec, FieldsWanted, Page, QueryError, QueryInput,
    ReadOutput, ScoredDoc, Search, SearchOutput, SegmentExplain, SortedDoc, StageTimes,
    MAX_RESULT_WINDOW,
};
use crate::rows::{DocHit, DocRef};
use searchd_docs::DocId;

fn not_found(coll: &Collection, id: &DocId) -> QueryError {
    QueryError::NotFound(if coll.manifest().is_none() {
        // A bare index: its ids are its rows.
        format!(
            "id {id} is not in the index (ids are 0..={})",
            coll.len().saturating_sub(1)
        )
    } else {
        format!("document {id} is not in the collection")
    })
}

fn storage_error(e: &SearchError) -> QueryError {
    match e {
        SearchError::DeadlineExceeded => QueryError::Deadline { started: true },
        SearchError::Storage { .. } => QueryError::Internal(e.to_string()),
        other => QueryError::Invalid(other.to_string()),
    }
}

fn to_scored(
    coll: &Collection,
    hits: Vec<DocHit>,
    fields: &FieldsWanted,
) -> Result<Vec<ScoredDoc>, QueryError> {
    hits.into_iter()
        .map(|h| {
            let id = coll
                .doc_id(h.doc)
                .cloned()
                .ok_or_else(|| QueryError::Internal(format!("hit {:?} has no id", h.doc)))?;
            let fields = match fields {
                FieldsWanted::None => None,
                w => match coll.source(h.doc) {
                    Ok(Some(src)) => select_fields(&src, w),
                    Ok(None) => Some(b"{}".to_vec()),
                    Err(e) => return Err(QueryError::Internal(e.to_string())),
                },
            };
            Ok(ScoredDoc {
                id,
                score: h.score,
                fields,
            })
        })
        .collect()
}

fn lexical_error(e: crate::error::Error) -> QueryError {
    if e.is_input() {
        QueryError::Invalid(e.to_string())
    } else {
        QueryError::Internal(e.to_string())
    }
}

fn micros(t: Instant) -> u64 {
    t.elapsed().as_micros() as u64
}

struct Searcher<'a> {
    coll: &'a Collection,
    k: usize,
    ef: usize,
    oversample: Option<f32>,
    nprobe: Option<usize>,
    deadline: Instant,
    /// The filter's matching documents, when there is a filter.
    allow: Option<&'a Matches>,
    /// Trace what each segment does (`"explain": true`).
    explain: bool,
}

/// What [`Searcher::run`] found.
struct Found {
    hits: Vec<DocHit>,
    stages: StageTimes,
    lexical_truncated: bool,
    plan: Option<FilterPlan>,
    /// Per segment, when explaining a dense search.
    segments: Vec<SegmentRun>,
    /// Probes skipped by partitioned segments (a degraded answer).
    skipped_probes: u64,
}

impl Searcher<'_> {
    /// The request's search parameters for `k` hits.
    fn params(&self, k: usize) -> SearchParams<'static> {
        let mut params = SearchParams::new(k, self.ef.max(k));
        params.deadline = Some(self.deadline);
        params.oversample = self.oversample;
        params.nprobe = self.nprobe;
        params
    }

    fn dense(&self, query: &[f32], k: usize, exclude: Option<DocRef>) -> Result<Found, QueryError> {
        let t = Instant::now();
        // Always traced (a few words per segment): a degraded answer is reported whether or
        // not the request asked to explain.
        let mut segments = Vec::new();
        let (hits, plan) = self
            .coll
            .search_traced(
                query,
                &self.params(k),
                exclude,
                self.allow,
                Some(&mut segments),
            )
            .map_err(|e| storage_error(&e))?;
        let skipped_probes = segments.iter().map(|s| s.skipped_probes as u64).sum();
        if !self.explain {
            segments.clear();
        }
        Ok(Found {
            hits,
            stages: StageTimes {
                dense_us: micros(t),
                ..StageTimes::default()
            },
            lexical_truncated: false,
            plan,
            segments,
            skipped_probes,
        })
    }

    fn run(&self, query: QueryInput) -> Result<Found, QueryError> {
        let coll = self.coll;
        let t = Instant::now();
        match query {
            QueryInput::Vector(v) => self.dense(&v, self.k, None),
            QueryInput::Row(m, i) => self.dense(m.row(i), self.k, None),
            QueryInput::Stored(id) => {
                let Some(r) = coll.lookup(&id) else {
                    return Err(not_found(coll, &id));
                };
                let v = match coll.vector(r) {
                    Ok(Some(v)) => v,
                    Ok(None) => return Err(not_found(coll, &id)),
                    Err(e) => return Err(storage_error(&e)),
                };
                self.dense(&v, self.k, Some(r))
            }
            QueryInput::Lexical(text) => {
                let allow = self.allow;
                let pass = move |d: DocRef| allow.is_none_or(|m| m.contains(d));
                let r = coll
                    .search_lexical(
                        &text,
                        self.k,
                        allow.map(|_| &pass as &(dyn Fn(DocRef) -> bool + Sync)),
                    )
                    .map_err(lexical_error)?;
                Ok(Found {
                    hits: r.hits,
                    stages: StageTimes {
                        lexical_us: micros(t),
                        ..StageTimes::default()
                    },
                    lexical_truncated: r.truncated,
                    plan: None,
                    segments: Vec::new(),
                    skipped_probes: 0,
                })
            }
            QueryInput::Hybrid {
                text,
                vector,
                fusion,
                window,
            } => {
                let r = coll
                    .search_hybrid(
                        &text,
                        &vector,
                        &self.params(self.k),
                        &fusion,
                        window,
                        self.allow,
                    )
                    .map_err(|e| match e {
                        HybridError::Dense(e) => storage_error(&e),
                        HybridError::Lexical(e) => lexical_error(e),
                    })?;
                Ok(Found {
                    hits: r.hits.iter().map(|f| f.hit()).collect(),
                    stages: StageTimes {
                        dense_us: r.dense_us,
                        lexical_us: r.lexical_us,
                        fuse_us: r.fuse_us,
                    },
                    lexical_truncated: r.truncated,
                    plan: None,
                    segments: Vec::new(),
                    skipped_probes: 0,
                })
            }
        }
    }
}

fn filter_error(e: FilterError) -> QueryError {
    QueryError::Invalid(e.to_string())
}

/// Evaluate a request's filter (`None`: no filter).
fn matches_of(coll: &Collection, filter: Option<&Filter>) -> Option<Matches> {
    filter.map(|f| coll.matches(f))
}

/// Check every facet's field before any work (a facet on a non-keyword field is a 400).
fn check_facets(coll: &Collection, facets: &[FacetSpec], path: &str) -> Result<(), QueryError> {
    let empty = Matches::of_docs(coll.segments().len(), std::iter::empty());
    for f in facets {
        coll.facet(&f.field, &empty, 0)
            .map_err(|e| QueryError::Invalid(format!("{path}: {}", e.message)))?;
    }
    Ok(())
}

/// Each facet over `m`; the deadline is checked before each one, so a request of many
/// facets stops at its deadline instead of running them all.
fn facets_over(
    coll: &Collection,
    facets: &[FacetSpec],
    m: &Matches,
    deadline: Instant,
) -> Result<Vec<FacetOutput>, QueryError> {
    facets
        .iter()
        .map(|f| {
            if Instant::now() >= deadline {
                return Err(QueryError::Deadline { started: true });
            }
            let (buckets, other_count) = coll.facet(&f.field, m, f.size).map_err(filter_error)?;
            Ok(FacetOutput {
                name: f.name.clone(),
                field: f.field.clone(),
                buckets: buckets.into_iter().map(|b| (b.value, b.count)).collect(),
                other_count,
            })
        })
        .collect()
}

impl Collection {
    /// Answer a search over every segment: the filter evaluated per segment, the query
    /// run (dense, lexical or hybrid), facets over the hits, and each hit with its id and
    /// the stored fields asked for.
    pub fn query(&self, q: Search) -> Result<SearchOutput, QueryError> {
        let Search {
            query,
            k,
            ef,
            oversample,
            nprobe,
            fields,
            filter,
            facets,
            deadline,
            explain,
        } = q;
        let coll = self;
        let (filter, facets, fields) = (filter.as_ref(), &facets[..], &fields);
        check_facets(coll, facets, "facets")?;
        let allow = matches_of(coll, filter);
        let local = Searcher {
            coll,
            k,
            ef,
            oversample,
            nprobe,
            deadline,
            allow: allow.as_ref(),
            explain,
        };
        let found = local.run(query)?;
        let facets = if facets.is_empty() {
            Vec::new()
        } else {
            let m = Matches::of_docs(coll.segments().len(), found.hits.iter().map(|h| h.doc));
            facets_over(coll, facets, &m, deadline)?
        };
        Ok(SearchOutput {
            hits: to_scored(coll, found.hits, fields)?,
            stages: found.stages,
            lexical_truncated: found.lexical_truncated,
            plan: found.plan.map(|p| p.to_string()),
            segments: found
                .segments
                .into_iter()
                .map(|r| SegmentExplain {
                    id: r.name,
                    candidates: r.candidates as u64,
                    plan: r.plan.map(|p| p.to_string()),
                    us: r.micros,
                })
                .collect(),
            matched: allow.as_ref().map(|m| m.len()),
            facets,
            skipped_probes: found.skipped_probes,
        })
    }

    /// Answer a read without a query over every segment: the exact count, facets and/or
    /// sorted page of the documents the filter matches, hits with ids and stored fields.
    pub fn read(&self, req: &Page) -> Result<ReadOutput, QueryError> {
        let coll = self;
        if req.from + req.size > MAX_RESULT_WINDOW {
            return Err(QueryError::Invalid(format!(
            "from + size must be at most {MAX_RESULT_WINDOW}, got {}; page deeper with a cursor (after / search_after)",
            req.from + req.size
        )));
        }
        check_facets(coll, &req.facets, "facets")?;
        let keys = &req.sort;
        let after = req.after.as_deref();
        let m = match matches_of(coll, req.filter.as_ref()) {
            Some(m) => m,
            None => coll.all(),
        };
        if Instant::now() >= req.deadline {
            return Err(QueryError::Deadline { started: true });
        }
        let page = coll.page(&m, keys, after, req.from, req.size);
        let full = page.len() == req.size && req.size > 0;
        let mut hits = Vec::with_capacity(page.len());
        for (i, h) in page.into_iter().enumerate() {
            // Reading and selecting stored fields of up to 10,000 hits takes long enough
            // (hundreds of ms) to carry a request well past its deadline.
            if i % 256 == 255 && Instant::now() >= req.deadline {
                return Err(QueryError::Deadline { started: true });
            }
            let id = coll
                .doc_id(h.doc)
                .cloned()
                .ok_or_else(|| QueryError::Internal(format!("hit {:?} has no id", h.doc)))?;
            let fields = match &req.fields {
                FieldsWanted::None => None,
                w => match coll.source(h.doc) {
                    Ok(Some(src)) => select_fields(&src, w),
                    Ok(None) => Some(b"{}".to_vec()),
                    Err(e) => return Err(QueryError::Internal(e.to_string())),
                },
            };
            hits.push(SortedDoc {
                id,
                sort: h.sort.iter().map(|v| v.to_json()).collect(),
                fields,
            });
        }
        let next = if full {
            hits.last().map(|h| h.sort.clone())
        } else {
            None
        };
        Ok(ReadOutput {
            hits,
            next,
            total: req.total.then(|| m.len()),
            facets: facets_over(coll, &req.facets, &m, req.deadline)?,
        })
    }

    /// The stored document `id` with the fields asked for (`{}` for none).
    pub fn document(&self, id: DocId, fields: &FieldsWanted) -> Result<Document, QueryError> {
        let coll = self;
        let Some(r) = coll.lookup(&id) else {
            return Err(not_found(coll, &id));
        };
        let doc_id = coll.doc_id(r).cloned().unwrap_or(id);
        let src = coll
            .source(r)
            .map_err(|e| QueryError::Internal(e.to_string()))?
            .unwrap_or_else(|| b"{}".to_vec());
        let fields = match fields {
            FieldsWanted::None => b"{}".to_vec(),
            w => select_fields(&src, w).unwrap_or_else(|| b"{}".to_vec()),
        };
        Ok(Document { id: doc_id, fields })
    }
}
