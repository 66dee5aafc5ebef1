//! One immutable segment of a collection: its vector index, the ids of its rows, stored
//! fields, lexical and field indexes, opened and checked against its manifest entry; and
//! its deleted set ([`read_live`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use searchd_engine::roaring::RoaringBitmap;
use searchd_engine::{Index, LoadOptions};
use searchd_lexical::{Bm25Stats, LexicalQuery};

use crate::error::{Error, Result};
use crate::files::{check_file, FileMeta};
use crate::ids;
use crate::manifest::SegmentMeta;

/// One immutable segment: an index, the ids of its rows, and (for collections) their
/// stored fields.
pub struct Segment {
    /// Its directory name in the collection (`seg-000000`; `index` for a bare index).
    pub(crate) name: String,
    pub(crate) index: Arc<Index>,
    pub(crate) ids: ids::IdMap,
    pub(crate) store: Option<searchd_docs::StoreReader>,
    pub(crate) lexical: Option<searchd_lexical::LexicalIndex>,
    pub(crate) fields: Option<searchd_fields::FieldIndex>,
    /// What filters see on a segment without field indexes (ids and match_all only).
    pub(crate) no_fields: searchd_fields::FieldIndex,
    /// BM25 statistics of the deleted rows under the last deleted sets seen (see
    /// [`crate::Collection::bm25_stats`]).
    pub(crate) deleted_stats: Mutex<Vec<DeletedStats>>,
}

/// What a segment's deleted rows hold, for BM25 statistics over live rows only: computed
/// once per deleted set (a view's `Arc`, held here so its address stays unique), terms on
/// demand.
pub(crate) struct DeletedStats {
    live: Arc<RoaringBitmap>,
    deleted: RoaringBitmap,
    /// Tokens of the deleted rows.
    tokens: u64,
    /// Deleted rows holding each term asked for so far.
    doc_freqs: HashMap<String, u64>,
}

/// Deleted sets a segment keeps statistics for: the current view's, and the previous one's
/// while searches on it finish.
const DELETED_STATS_SETS: usize = 2;

/// Terms whose deleted document frequency a segment keeps per deleted set; past this the
/// map starts over (a query costs at most `min(deleted rows, document frequency)` per term
/// to count again).
const DELETED_STATS_TERMS: usize = 16_384;

impl Segment {
    /// The segment's vector index.
    pub fn index(&self) -> &Index {
        &self.index
    }
    /// Rows in the segment (deleted ones included).
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    /// Whether the segment has no rows.
    pub fn is_empty(&self) -> bool {
        self.ids.len() == 0
    }
    /// Its lexical (BM25) index; `None` when it has none.
    pub fn lexical(&self) -> Option<&searchd_lexical::LexicalIndex> {
        self.lexical.as_ref()
    }
    /// Its field indexes; `None` when it has none.
    pub fn fields(&self) -> Option<&searchd_fields::FieldIndex> {
        self.fields.as_ref()
    }

    /// BM25 statistics of `query` over this segment's rows in `live`
    /// ([`crate::Collection::bm25_stats`]).
    pub(crate) fn live_stats(
        &self,
        lex: &searchd_lexical::LexicalIndex,
        live: &Arc<RoaringBitmap>,
        query: &LexicalQuery,
    ) -> Result<Bm25Stats> {
        let mut sets = self.deleted_stats.lock().unwrap_or_else(|e| e.into_inner());
        let at = match sets.iter().position(|d| Arc::ptr_eq(&d.live, live)) {
            Some(at) => at,
            None => {
                let mut deleted = RoaringBitmap::new();
                deleted.insert_range(0..lex.len() as u32);
                deleted -= live.as_ref();
                let tokens = lex.tokens_of(deleted.iter());
                if sets.len() >= DELETED_STATS_SETS {
                    sets.remove(0);
                }
                sets.push(DeletedStats {
                    live: Arc::clone(live),
                    deleted,
                    tokens,
                    doc_freqs: HashMap::new(),
                });
                sets.len() - 1
            }
        };
        let d = &mut sets[at];
        let mut doc_freqs = Vec::with_capacity(query.len());
        for term in query.terms() {
            let all = lex.doc_freq(term)?;
            let dead = match d.doc_freqs.get(term) {
                Some(&n) => n,
                None => {
                    let n = if all == 0 {
                        0
                    } else {
                        let deleted = &d.deleted;
                        lex.doc_freq_among(term, deleted.iter(), deleted.len(), &|r| {
                            deleted.contains(r)
                        })?
                    };
                    if d.doc_freqs.len() >= DELETED_STATS_TERMS {
                        d.doc_freqs.clear();
                    }
                    d.doc_freqs.insert(term.to_string(), n);
                    n
                }
            };
            doc_freqs.push(all.saturating_sub(dead));
        }
        Ok(Bm25Stats {
            docs: live.len(),
            tokens: lex.tokens().saturating_sub(d.tokens),
            doc_freqs,
        })
    }
}

impl Segment {
    /// Open one segment of the collection in `dir` as its manifest entry says.
    pub(crate) fn open(
        dir: &Path,
        meta: &SegmentMeta,
        dim: usize,
        opts: &LoadOptions,
    ) -> Result<Segment> {
        {
            let sdir = dir.join(&meta.name);
            let index = Index::open(&sdir.join("index"), opts)?;
            for f in &meta.files {
                let p = sdir.join(&f.name);
                let md = std::fs::metadata(&p).map_err(|e| Error::io(&p, e))?;
                if md.len() != f.bytes {
                    return Err(Error::format(
                        &p,
                        format!(
                            "size is {} bytes, the manifest says {}; the collection is truncated or corrupt",
                            md.len(),
                            f.bytes
                        ),
                    ));
                }
            }
            let ids = ids::IdMap::read(&sdir.join("ids.bin"))?;
            // The id order sorted pages compare ids by, built here (collection open, or the
            // merger and refresh threads that open new segments) rather than by a request.
            ids.order();
            let store_path = sdir.join("docs.bin");
            let store = searchd_docs::StoreReader::open(&store_path)?;
            let docs = meta.docs as usize;
            for (what, n) in [
                ("index", index.len()),
                ("ids.bin", ids.len()),
                ("docs.bin", store.len()),
            ] {
                if n != docs {
                    return Err(Error::format(
                        &sdir,
                        format!(
                            "{what} holds {n} documents, the manifest says {docs}; the collection is corrupt"
                        ),
                    ));
                }
            }
            if index.dim() != dim {
                return Err(Error::format(
                    &sdir,
                    format!(
                        "index has {} dimensions, the manifest says {}",
                        index.dim(),
                        dim
                    ),
                ));
            }
            let lexical = match &meta.lexical {
                None => None,
                Some(lm) => {
                    let ldir = sdir.join(&lm.dir);
                    if let Some(f) = &lm.meta {
                        check_file(&ldir.join(&f.name), f, opts.verify)?;
                    }
                    let lex = searchd_lexical::LexicalIndex::open_with(&ldir, opts.verify)?;
                    if lex.len() != docs || lex.meta().analyzer != lm.analyzer {
                        return Err(Error::format(
                            sdir.join(&lm.dir),
                            format!(
                                "lexical index holds {} documents analysed as {}, the manifest says {docs} as {}",
                                lex.len(),
                                lex.meta().analyzer,
                                lm.analyzer
                            ),
                        ));
                    }
                    Some(lex)
                }
            };
            let fields = match &meta.fields {
                None => None,
                Some(fm) => {
                    let fdir = sdir.join(&fm.dir);
                    let fi = searchd_fields::FieldIndex::open(&fdir)?;
                    if fi.docs() as usize != docs {
                        return Err(Error::format(
                            &fdir,
                            format!(
                                "field indexes hold {} documents, the manifest says {docs}; the collection is corrupt",
                                fi.docs()
                            ),
                        ));
                    }
                    Some(fi)
                }
            };
            Ok(Segment {
                name: meta.name.clone(),
                index: Arc::new(index),
                ids,
                store: Some(store),
                lexical,
                fields,
                no_fields: searchd_fields::FieldIndex::empty(docs as u32),
                deleted_stats: Mutex::new(Vec::new()),
            })
        }
    }
}

/// The least share of alive rows for which a segment's deleted rows are walked past (as
/// [`DeadRows`]) rather than planned as a filter. The filter planner scans a segment of at
/// most 8,192 passing rows exactly, which for deleted rows made a minor graph between 10%
/// deleted and its vacuum (at 10%, once the merger gets to it) cost 733 us per search on
/// 5,325 alive of 5,970 rows against 279 us for a walk of a 5,615-row graph
/// (`search-under-writes-synth1m-s24-dead90-run1.md`). A walk needs about 1/alive times
/// the visits of an unfiltered one, a scan alive x rows: at 75% alive the walk costs at most
/// 1.33x an unfiltered one, and deleted rows past 25% are vacuumed (`vacuum_ratio`, 30%
/// for the large segments) soon after.
pub(crate) const DEAD_ROWS_MIN_ALIVE: f64 = 0.75;

/// A segment's deleted rows as one bit per internal id of its vector index, for segments
/// whose alive rows are at least [`DEAD_ROWS_MIN_ALIVE`] of them. A graph walk then tests a
/// node with one load from a bitset of `n / 8` bytes, instead of mapping the node to its
/// row and looking the row up in the alive set: on 1M rows with 0.8% deleted that lookup
/// made every search ~20% dearer (`bench/results/search-under-writes-synth1m-s24-run1.md`).
/// The planner sees a filter of unknown selectivity and walks the graph.
pub(crate) struct DeadRows {
    bits: Vec<u64>,
}

impl DeadRows {
    /// The bitset of `seg`'s rows not in `live`; `None` when fewer than
    /// [`DEAD_ROWS_MIN_ALIVE`] of its rows are alive (the planner then weighs the alive set
    /// as a filter) or none is deleted.
    pub(crate) fn of(seg: &Segment, live: &RoaringBitmap) -> Option<DeadRows> {
        let n = seg.index.len();
        if n == 0 || live.len() >= n as u64 || (live.len() as f64) < DEAD_ROWS_MIN_ALIVE * n as f64
        {
            return None;
        }
        let mut dead = RoaringBitmap::new();
        dead.insert_range(0..n as u32);
        dead -= live;
        let mut bits = vec![0u64; n.div_ceil(64)];
        for row in &dead {
            if let Some(i) = seg.index.internal(u64::from(row)) {
                bits[i as usize / 64] |= 1 << (i % 64);
            }
        }
        Some(DeadRows { bits })
    }

    /// Whether internal id `i` is a deleted row.
    #[inline]
    pub(crate) fn contains(&self, i: u32) -> bool {
        self.bits
            .get(i as usize / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
}

/// Read a segment's deleted set file and return its alive rows.
pub(crate) fn read_live(sdir: &Path, f: &FileMeta, rows: usize) -> Result<RoaringBitmap> {
    let p = sdir.join(&f.name);
    let b = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
    if b.len() as u64 != f.bytes || crc32fast::hash(&b) != f.crc32 {
        return Err(Error::format(
            &p,
            "the deleted-rows file does not match its size or checksum in the manifest; the collection is corrupt",
        ));
    }
    let deleted = RoaringBitmap::deserialize_from(&b[..])
        .map_err(|e| Error::format(&p, format!("unreadable deleted-rows set: {e}")))?;
    let mut live = RoaringBitmap::new();
    live.insert_range(0..rows as u32);
    live -= deleted;
    Ok(live)
}
