//! An opened collection (or a bare index seen as one): its segments and, per segment, the
//! rows still alive; dense, lexical and hybrid search over them, and lookups by id.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use searchd_docs::DocId;
use searchd_engine::roaring::RoaringBitmap;
use searchd_engine::{Index, LoadOptions, Metric, SearchError, SearchParams};
use searchd_lexical::{Analyzer, Bm25Stats, LexicalQuery};

use crate::error::{Error, Result};
use crate::fusion;
use crate::ids;
use crate::manifest::{Manifest, ModelRecord, MANIFEST};
use crate::rows::{DocHit, DocRef, Matches};
use crate::segment::{read_live, DeadRows, Segment};

/// What a lexical search found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LexicalResult {
    /// The hits, best (highest BM25 score) first.
    pub hits: Vec<DocHit>,
    /// Distinct query terms searched for (0: the text had no indexable words).
    pub terms: usize,
    /// The query text or its terms were cut to the documented limits.
    pub truncated: bool,
}

/// What [`Collection::search_hybrid`] found, with the time of each stage.
#[derive(Debug, Clone, PartialEq)]
pub struct HybridResult {
    /// The fused hits, best first.
    pub hits: Vec<fusion::Fused>,
    /// Time of the dense search, in microseconds.
    pub dense_us: u64,
    /// Time of the lexical search, in microseconds.
    pub lexical_us: u64,
    /// Time of the fusion, in microseconds.
    pub fuse_us: u64,
    /// The query text was cut to the lexical limits.
    pub truncated: bool,
}

/// Which side of a hybrid search failed.
#[derive(Debug)]
pub enum HybridError {
    /// The dense (vector) search failed.
    Dense(SearchError),
    /// The lexical search failed.
    Lexical(Error),
}

impl std::fmt::Display for HybridError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HybridError::Dense(e) => write!(f, "dense side: {e}"),
            HybridError::Lexical(e) => write!(f, "lexical side: {e}"),
        }
    }
}

impl std::error::Error for HybridError {}

/// An opened collection (or a bare index seen as one). `Send + Sync`.
/// What one segment did in a traced search ([`Collection::search_traced`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRun {
    /// The segment's directory name (`seg-000000`).
    pub name: String,
    /// Hits it offered to the merge.
    pub candidates: usize,
    /// The plan its filtered search ran (`None` without a filter or deleted rows, or when
    /// skipped).
    pub plan: Option<searchd_engine::FilterPlan>,
    /// Wall-clock microseconds of its search.
    pub micros: u64,
    /// Partitioned indexes: probes skipped because their partition was still loading at
    /// the deadline.
    pub skipped_probes: usize,
}

/// An open collection (or bare index): its segments and which of their rows are alive, as of one log sequence number.
pub struct Collection {
    pub(crate) dir: PathBuf,
    pub(crate) manifest: Option<Manifest>,
    pub(crate) segments: Vec<Arc<Segment>>,
    /// Per segment, the rows still alive when some were deleted (`None`: all are). A live
    /// collection ([`live`]) makes a new view with new sets on every change; a segment's
    /// files never change.
    pub(crate) live: Vec<Option<Arc<RoaringBitmap>>>,
    /// Per segment, its deleted rows as a bitset over the index's internal ids, when it has
    /// some and nearly every row is alive ([`DeadRows`]): what an unfiltered dense search
    /// tests instead of the alive set.
    pub(crate) dead: Vec<Option<Arc<DeadRows>>>,
    /// The last write-ahead-log sequence number this view reflects (0 for a static one).
    pub(crate) seq: u64,
    pub(crate) dim: usize,
    pub(crate) metric: Metric,
    /// The manifest's mapping, shared with requests parsed against it ([`schema_of`]).
    pub(crate) schema: Arc<searchd_fields::Schema>,
}

/// The typed fields of a collection with this manifest: its mapping, or none (a collection
/// made before field indexes existed, or a bare index).
pub(crate) fn schema_of(manifest: Option<&Manifest>) -> Arc<searchd_fields::Schema> {
    Arc::new(manifest.and_then(|m| m.mapping.clone()).unwrap_or_default())
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("dir", &self.dir)
            .field("docs", &self.len())
            .finish()
    }
}

/// Whether `dir` holds a collection (rather than a bare index directory).
pub fn is_collection(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
}

impl Collection {
    /// Open a collection directory, or a bare index directory as a one-segment collection.
    pub fn open_any(dir: &Path, opts: &LoadOptions) -> Result<Collection> {
        if is_collection(dir) {
            Collection::open(dir, opts)
        } else {
            Ok(Collection::from_index(Index::open(dir, opts)?))
        }
    }

    /// A bare index as a collection: ids are its row numbers, no stored fields.
    pub fn from_index(index: Index) -> Collection {
        Collection::from_shared_index(Arc::new(index))
    }

    /// [`Collection::from_index`] over an index shared with others.
    pub fn from_shared_index(index: Arc<Index>) -> Collection {
        let n = index.len();
        Collection {
            dir: index.info().path.clone(),
            dim: index.dim(),
            metric: index.metric(),
            manifest: None,
            schema: schema_of(None),
            segments: vec![Arc::new(Segment {
                name: "index".into(),
                index,
                ids: ids::IdMap::rows(n),
                store: None,
                lexical: None,
                fields: None,
                no_fields: searchd_fields::FieldIndex::empty(n as u32),
                deleted_stats: Mutex::new(Vec::new()),
            })],
            live: vec![None],
            dead: vec![None],
            seq: 0,
        }
    }

    /// The next view of this collection's directory: `manifest` with these segments and
    /// alive sets, reflecting the log up to `seq` (a live collection's refresh or merge).
    pub(crate) fn successor(
        &self,
        manifest: Manifest,
        segments: Vec<Arc<Segment>>,
        live: Vec<Option<Arc<RoaringBitmap>>>,
        seq: u64,
    ) -> Collection {
        // A segment whose alive set did not change keeps its bitset (the refresher makes a
        // view per change, and most changes leave the large segments alone).
        let dead = segments
            .iter()
            .zip(&live)
            .map(|(seg, l)| {
                let l = l.as_ref()?;
                let kept = self
                    .segments
                    .iter()
                    .zip(&self.live)
                    .zip(&self.dead)
                    .find(|((s, sl), _)| {
                        Arc::ptr_eq(s, seg) && sl.as_ref().is_some_and(|sl| Arc::ptr_eq(sl, l))
                    })
                    .map(|(_, d)| d.clone());
                match kept {
                    Some(d) => d,
                    None => DeadRows::of(seg, l).map(Arc::new),
                }
            })
            .collect();
        Collection {
            dir: self.dir.clone(),
            schema: schema_of(Some(&manifest)),
            manifest: Some(manifest),
            segments,
            live,
            dead,
            seq,
            dim: self.dim,
            metric: self.metric,
        }
    }

    /// Open the collection in `dir`: the manifest, then each segment's index (placed and
    /// checked as `opts` says), ids and stored fields (checked against the manifest).
    pub fn open(dir: &Path, opts: &LoadOptions) -> Result<Collection> {
        let manifest = Manifest::read(dir)?;
        let metric = Metric::parse(&manifest.metric).ok_or_else(|| {
            Error::format(
                dir.join(MANIFEST),
                format!("unknown metric {:?}", manifest.metric),
            )
        })?;
        let mut segments = Vec::with_capacity(manifest.segments.len());
        let mut live = Vec::with_capacity(manifest.segments.len());
        let mut dead = Vec::with_capacity(manifest.segments.len());
        for meta in &manifest.segments {
            let seg = Segment::open(dir, meta, manifest.dim, opts)?;
            let alive = match &meta.deleted {
                None => None,
                Some(f) => Some(Arc::new(read_live(&dir.join(&meta.name), f, seg.len())?)),
            };
            dead.push(
                alive
                    .as_ref()
                    .and_then(|l| DeadRows::of(&seg, l))
                    .map(Arc::new),
            );
            live.push(alive);
            segments.push(Arc::new(seg));
        }
        Ok(Collection {
            dir: dir.to_path_buf(),
            dim: manifest.dim,
            seq: manifest.wal_seq,
            metric,
            schema: schema_of(Some(&manifest)),
            manifest: Some(manifest),
            segments,
            live,
            dead,
        })
    }
}

impl Collection {
    /// The collection's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// `None` for a bare index.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }
    /// The model that embedded the collection's texts; `None` when vectors were given or for a bare index.
    pub fn model(&self) -> Option<&ModelRecord> {
        self.manifest.as_ref()?.model.as_ref()
    }
    /// The segments, in manifest order (a [`DocRef::segment`] indexes this).
    pub fn segments(&self) -> &[Arc<Segment>] {
        &self.segments
    }
    /// The alive rows of segment `i` when some of its rows were deleted; `None` when all
    /// are alive (or for an unknown segment).
    pub fn live_rows(&self, i: usize) -> Option<&RoaringBitmap> {
        self.live.get(i).and_then(|l| l.as_deref())
    }
    /// Whether the document at `r` exists and was not deleted.
    pub fn is_live(&self, r: DocRef) -> bool {
        let Some(seg) = self.segments.get(r.segment as usize) else {
            return false;
        };
        if r.row >= seg.len() as u64 {
            return false;
        }
        match self.live_rows(r.segment as usize) {
            None => true,
            Some(b) => u32::try_from(r.row).is_ok_and(|row| b.contains(row)),
        }
    }
    /// The last write-ahead-log sequence number this view reflects (0 for a collection
    /// that was never written to).
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Deleted rows still held by segments (a vacuum or merge drops them).
    pub fn deleted(&self) -> u64 {
        self.segments
            .iter()
            .zip(&self.live)
            .map(|(s, l)| l.as_ref().map_or(0, |b| s.len() as u64 - b.len()))
            .sum()
    }
    /// Dimension of the vectors.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// The distance metric of the vectors.
    pub fn metric(&self) -> Metric {
        self.metric
    }
    /// Alive documents.
    pub fn len(&self) -> usize {
        self.segments
            .iter()
            .zip(&self.live)
            .map(|(s, l)| l.as_ref().map_or(s.len(), |b| b.len() as usize))
            .sum()
    }
    /// Whether no document is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether documents have stored fields (collections do; bare indexes do not).
    pub fn has_fields(&self) -> bool {
        self.segments.iter().any(|s| s.store.is_some())
    }
    /// Whether every segment has a lexical (BM25) index, so lexical and hybrid search work.
    pub fn has_lexical(&self) -> bool {
        !self.segments.is_empty() && self.segments.iter().all(|s| s.lexical.is_some())
    }
    /// The analyzer of the lexical index, if there is one.
    pub fn analyzer(&self) -> Option<Analyzer> {
        self.segments
            .first()
            .and_then(|s| s.lexical.as_ref())
            .map(|l| l.meta().analyzer)
    }

    /// Why lexical search cannot run here, or `Ok`.
    pub fn check_lexical(&self) -> Result<()> {
        if self.has_lexical() {
            return Ok(());
        }
        Err(Error::Input(if self.manifest.is_none() {
            "this is a bare vector index: it has no text and no lexical index; use mode \"dense\""
                .into()
        } else {
            format!(
                "collection {} has no lexical index (it was ingested without a text field or with --no-lexical); \
                 use mode \"dense\", or ingest it again with --lexical",
                self.manifest.as_ref().map_or("", |m| m.name.as_str())
            )
        }))
    }

    /// BM25 top-`k` over all segments, best first (see [`searchd_lexical::LexicalIndex::search`]).
    /// `allow` (segment, row) restricts the rows that may be returned. Every segment scores
    /// with the collection's statistics ([`Collection::bm25_stats`]), so a document's score
    /// does not depend on which segment holds it, and equals its score in a fresh build of
    /// the live documents.
    pub fn search_lexical(
        &self,
        query: &str,
        k: usize,
        allow: Option<&(dyn Fn(DocRef) -> bool + Sync)>,
    ) -> Result<LexicalResult> {
        self.check_lexical()?;
        let analyzer = self
            .analyzer()
            .ok_or_else(|| Error::Input("the collection has no lexical index".into()))?;
        let q = LexicalQuery::new(analyzer, query);
        let mut out = LexicalResult {
            hits: Vec::new(),
            terms: q.len(),
            truncated: q.truncated(),
        };
        if k == 0 || q.is_empty() {
            return Ok(out);
        }
        let stats = self.bm25_stats(&q)?;
        for (i, seg) in self.segments.iter().enumerate() {
            let Some(lex) = &seg.lexical else { continue };
            let live = self.live_rows(i);
            if live.is_some_and(|b| b.is_empty()) {
                continue;
            }
            let seg_allow = move |row: u32| {
                live.is_none_or(|b| b.contains(row))
                    && allow.is_none_or(|f| {
                        f(DocRef {
                            segment: i as u32,
                            row: row as u64,
                        })
                    })
            };
            let r = lex.search_query(
                &q,
                k,
                (allow.is_some() || live.is_some())
                    .then_some(&seg_allow as &(dyn Fn(u32) -> bool + Sync)),
                Some(&stats),
            )?;
            out.hits
                .extend(r.hits.into_iter().map(|(row, score)| DocHit {
                    doc: DocRef {
                        segment: i as u32,
                        row: row as u64,
                    },
                    score,
                }));
        }
        if self.segments.len() > 1 {
            out.hits.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then_with(|| (a.doc.segment, a.doc.row).cmp(&(b.doc.segment, b.doc.row)))
            });
            out.hits.truncate(k);
        }
        Ok(out)
    }

    /// The BM25 statistics of `query` over the whole collection, live documents only: the
    /// documents, their tokens, and per query term the documents holding it, summed over
    /// the segments. A segment without deletions reads them from its index (a term
    /// dictionary lookup per term); one with deletions subtracts what its deleted rows
    /// hold: their tokens (exact, from the lexical index's `len` column) once per deleted
    /// set, and per term the deleted rows in its postings, counted once per deleted set
    /// and kept (at most `min(deleted rows, document frequency)` steps).
    ///
    /// Deleted documents are left out, unlike Lucene and Elasticsearch (which count them
    /// until a merge drops them): a live collection then ranks as a fresh build of the same
    /// documents would, however its writes fell into segments.
    pub fn bm25_stats(&self, query: &LexicalQuery) -> Result<Bm25Stats> {
        let mut total = Bm25Stats {
            doc_freqs: vec![0; query.len()],
            ..Bm25Stats::default()
        };
        for (i, seg) in self.segments.iter().enumerate() {
            let Some(lex) = &seg.lexical else { continue };
            let part = match self.live.get(i).and_then(|l| l.as_ref()) {
                None => lex.stats(query)?,
                Some(live) => seg.live_stats(lex, live, query)?,
            };
            total.add(&part);
        }
        Ok(total)
    }

    /// Dense and lexical retrieval of the same query, fused: the first `window` (at least
    /// `params.k`) hits of each side go into [`fusion::fuse`], which keeps `params.k`. The
    /// two sides run one after the other on the calling thread.
    pub fn search_hybrid(
        &self,
        text: &str,
        vector: &[f32],
        params: &SearchParams<'_>,
        how: &fusion::Fusion,
        window: usize,
        allow: Option<&Matches>,
    ) -> std::result::Result<HybridResult, HybridError> {
        let window = window.max(params.k);
        let t = std::time::Instant::now();
        let mut p = *params;
        p.k = window;
        p.ef = p.ef.max(window);
        let (dense, _) = self
            .search_filtered(vector, &p, None, allow)
            .map_err(HybridError::Dense)?;
        let dense_us = t.elapsed().as_micros() as u64;
        if params
            .deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
        {
            return Err(HybridError::Dense(SearchError::DeadlineExceeded));
        }
        let t = std::time::Instant::now();
        let pass = |d: DocRef| allow.is_none_or(|m| m.contains(d));
        let lexical = self
            .search_lexical(
                text,
                window,
                allow.map(|_| &pass as &(dyn Fn(DocRef) -> bool + Sync)),
            )
            .map_err(HybridError::Lexical)?;
        let lexical_us = t.elapsed().as_micros() as u64;
        let t = std::time::Instant::now();
        let hits = fusion::fuse(&dense, &lexical.hits, how, window, params.k);
        Ok(HybridResult {
            hits,
            dense_us,
            lexical_us,
            fuse_us: t.elapsed().as_micros() as u64,
            truncated: lexical.truncated,
        })
    }

    /// Whether every segment opened its float32 vectors (search by stored id needs them).
    pub fn has_vectors(&self) -> bool {
        self.segments.iter().all(|s| s.index.has_vectors())
    }

    /// Where the document `id` lives. A string id that spells an integer also finds the
    /// integer id (URL paths cannot tell them apart), and the other way round.
    pub fn lookup(&self, id: &DocId) -> Option<DocRef> {
        let find = |id: &DocId| {
            self.segments.iter().enumerate().find_map(|(i, s)| {
                s.ids
                    .row(id)
                    .map(|row| DocRef {
                        segment: i as u32,
                        row: row as u64,
                    })
                    .filter(|r| self.is_live(*r))
            })
        };
        find(id).or_else(|| match id {
            DocId::Str(s) => s.parse::<u64>().ok().and_then(|v| find(&DocId::Int(v))),
            DocId::Int(v) => find(&DocId::Str(v.to_string())),
        })
    }

    /// The user's id of a document.
    pub fn doc_id(&self, r: DocRef) -> Option<&DocId> {
        self.segments.get(r.segment as usize)?.ids.id(r.row)
    }

    /// The stored fields of a document, as the JSON object bytes it was given with;
    /// `Ok(None)` for a bare index (no stored fields) or an unknown row. A read failure is
    /// an error, never "not found".
    pub fn source(&self, r: DocRef) -> Result<Option<Vec<u8>>> {
        let Some(seg) = self.segments.get(r.segment as usize) else {
            return Ok(None);
        };
        let Some(store) = &seg.store else {
            return Ok(None);
        };
        let Ok(row) = u32::try_from(r.row) else {
            return Ok(None);
        };
        if row as usize >= store.len() {
            return Ok(None);
        }
        Ok(Some(store.get(row)?))
    }

    /// The stored vector of a document (unit length under cosine). `Ok(None)` when the row
    /// does not exist; an error when the vectors were not opened or cannot be read.
    pub fn vector(&self, r: DocRef) -> std::result::Result<Option<Cow<'_, [f32]>>, SearchError> {
        match self.segments.get(r.segment as usize) {
            Some(seg) => seg.index.try_vector(r.row),
            None => Ok(None),
        }
    }

    /// Top-`k` over all segments, best first. `exclude` leaves one document out (the query
    /// document of a "more like this" search).
    pub fn search(
        &self,
        query: &[f32],
        params: &SearchParams<'_>,
        exclude: Option<DocRef>,
    ) -> std::result::Result<Vec<DocHit>, SearchError> {
        self.search_filtered(query, params, exclude, None)
            .map(|(hits, _)| hits)
    }

    /// [`Collection::search`] restricted to the documents of `allow` (a filter's
    /// [`Matches`]): each segment's engine plans its own search from the size of its row
    /// set (exact scan of the passing rows, or filtered graph traversal); the plan the first
    /// segment that searched actually ran (`exact` when a graph walk fell back to the scan)
    /// is returned with the hits. A returned hit always passes.
    pub fn search_filtered(
        &self,
        query: &[f32],
        params: &SearchParams<'_>,
        exclude: Option<DocRef>,
        allow: Option<&Matches>,
    ) -> std::result::Result<(Vec<DocHit>, Option<searchd_engine::FilterPlan>), SearchError> {
        self.search_traced(query, params, exclude, allow, None)
    }

    /// [`Collection::search_filtered`] that also reports, when `trace` is given, what each
    /// segment did (`"explain": true`): its name, the hits it offered to the merge and the
    /// plan it ran. Segments skipped (nothing alive or nothing passing) report 0 and no plan.
    pub fn search_traced(
        &self,
        query: &[f32],
        params: &SearchParams<'_>,
        exclude: Option<DocRef>,
        allow: Option<&Matches>,
        mut trace: Option<&mut Vec<SegmentRun>>,
    ) -> std::result::Result<(Vec<DocHit>, Option<searchd_engine::FilterPlan>), SearchError> {
        let mut all: Vec<DocHit> = Vec::with_capacity(params.k * self.segments.len());
        let mut plan = None;
        for (i, seg) in self.segments.iter().enumerate() {
            let own = exclude
                .filter(|e| e.segment as usize == i)
                .and_then(|e| seg.index.internal(e.row));
            let mut p = *params;
            // A filter's rows are alive rows already ([`Collection::matches`]); without one,
            // a segment with a few deleted rows is walked testing its dead-row bitset, and
            // one with more passes its alive rows to the planner.
            let mut dead = None;
            let skip = match (allow, self.live_rows(i)) {
                (Some(m), _) => match m.segment(i) {
                    Some(rows) if !rows.is_empty() => {
                        p.allow = Some(rows);
                        false
                    }
                    _ => true,
                },
                (None, Some(live)) if live.is_empty() => true,
                (None, Some(live)) => {
                    dead = self.dead.get(i).and_then(|d| d.as_deref());
                    if dead.is_none() {
                        p.allow = Some(live);
                    }
                    false
                }
                (None, None) => false,
            };
            let pass = move |x: u32| Some(x) != own && dead.is_none_or(|d| !d.contains(x));
            if own.is_some() || dead.is_some() {
                p.filter = Some(&pass);
            }
            if skip {
                if let Some(t) = trace.as_deref_mut() {
                    t.push(SegmentRun {
                        name: seg.name.clone(),
                        candidates: 0,
                        plan: None,
                        micros: 0,
                        skipped_probes: 0,
                    });
                }
                continue;
            }
            let started = trace.is_some().then(std::time::Instant::now);
            let searchd_engine::Searched {
                hits,
                plan: used,
                skipped_probes,
            } = seg.index.search_detailed(query, &p)?;
            if allow.is_some() && plan.is_none() {
                plan = Some(used);
            }
            if let Some(t) = trace.as_deref_mut() {
                t.push(SegmentRun {
                    name: seg.name.clone(),
                    candidates: hits.len(),
                    // Deleted rows make a segment's search a filtered one too.
                    plan: (p.allow.is_some() || dead.is_some()).then_some(used),
                    micros: started.map_or(0, |s| s.elapsed().as_micros() as u64),
                    skipped_probes,
                });
            }
            all.extend(hits.into_iter().map(|h| DocHit {
                doc: DocRef {
                    segment: i as u32,
                    row: h.id,
                },
                score: h.score,
            }));
        }
        if self.segments.len() > 1 {
            all.sort_by(|a, b| b.score.total_cmp(&a.score));
            all.truncate(params.k);
        }
        Ok((all, plan))
    }

    /// Bytes of every segment's index files and stored documents.
    pub fn bytes(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| {
                s.index.info().bytes
                    + s.store.as_ref().map_or(0, |st| st.bytes())
                    + s.lexical.as_ref().map_or(0, |l| l.bytes())
                    + s.fields.as_ref().map_or(0, |f| f.bytes())
            })
            .sum()
    }

    /// What the collection is, for `/stats` and logs.
    pub fn info(&self) -> serde_json::Value {
        // The segment holding most rows describes the collection's index (a live
        // collection's newest segments are small, often flat, while most documents sit in a
        // large HNSW one); every segment is listed in `segment_details`.
        let main = self
            .segments
            .iter()
            .max_by_key(|s| s.len())
            .map(|s| s.index.info());
        let details: Vec<serde_json::Value> = self
            .segments
            .iter()
            .zip(&self.live)
            .map(|(s, l)| {
                let info = s.index.info();
                serde_json::json!({
                    "name": s.name,
                    "kind": info.kind.name(),
                    "rows": s.len(),
                    "deleted": l.as_ref().map_or(0, |b| s.len() as u64 - b.len()),
                    "bytes": info.bytes,
                    // Bytes of each part's files, and where each index part lives.
                    "memory": {
                        "vectors": info.vector_bytes,
                        "graph": info.graph_bytes,
                        "codes": info.codes_bytes,
                        "placement": info.placement,
                        "docs": s.store.as_ref().map_or(0, |st| st.bytes()),
                        "lexical": s.lexical.as_ref().map_or(0, |l| l.bytes()),
                        "fields": s.fields.as_ref().map_or(0, |f| f.bytes()),
                        "partitions": s.index.partition_stats(),
                    },
                })
            })
            .collect();
        serde_json::json!({
            "kind": if self.manifest.is_some() { "collection" } else { "index" },
            "path": self.dir,
            "docs": self.len(),
            "dim": self.dim,
            "metric": self.metric.name(),
            "segments": self.segments.len(),
            "deleted": self.deleted(),
            "seq": self.seq,
            "index": main,
            "segment_details": details,
            "model": self.model(),
            "text_field": self.manifest.as_ref().and_then(|m| m.text_field.clone()),
            "fields": self.manifest.as_ref().map(|m| m.fields.clone()),
            "lexical": self.analyzer().map(|a| serde_json::json!({"analyzer": a.to_string(), "field": self.manifest.as_ref().and_then(|m| m.text_field.clone())})),
            "mapping": self.manifest.as_ref().and_then(|m| m.mapping.as_ref()),
            "field_indexes": self.segments.iter().map(|s| s.fields.as_ref().map(|f| f.stats())).collect::<Vec<_>>(),
            "bytes": self.bytes(),
        })
    }
}
