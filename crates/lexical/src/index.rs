//! Opening a lexical index and BM25 top-k search over it.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};

use tantivy::query::{BooleanQuery, BoostQuery, EnableScoring, Occur, Query, TermQuery};
use tantivy::schema::{Field, FieldType, IndexRecordOption};
use tantivy::{DocId, Index, IndexReader, ReloadPolicy, Score, Searcher, Term};

use crate::analyzer::{for_each_token, Analyzer};
use crate::writer::{ROW_FIELD, TEXT_FIELD};
use crate::{read_meta, Error, LexicalMeta, Result, MAX_QUERY_CHARS, MAX_QUERY_TERMS};

/// An opened (memory-mapped) lexical index. `Send + Sync`: one per segment, shared by all
/// searching threads.
pub struct LexicalIndex {
    dir: PathBuf,
    meta: LexicalMeta,
    text: Field,
    /// Kept so the searcher's generation stays alive; never reloaded (the index is write-once).
    _reader: IndexReader,
    searcher: Searcher,
}

/// Result of [`LexicalIndex::search`].
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LexicalHits {
    /// `(row, BM25 score)`, best first; equal scores by lower row first.
    pub hits: Vec<(u32, f32)>,
    /// Distinct analyzed query terms used (whether or not they occur in the index).
    pub terms: usize,
    /// The query text was cut at [`MAX_QUERY_CHARS`] or its terms at [`MAX_QUERY_TERMS`].
    pub truncated: bool,
}

impl LexicalIndex {
    /// Opens the index in `dir` (written by [`crate::LexicalWriter::finish`]).
    pub fn open(dir: &Path) -> Result<LexicalIndex> {
        let meta = read_meta(dir)?;
        let t = |e| Error::tantivy(dir, e);
        let index = Index::open_in_dir(dir).map_err(t)?;
        let schema = index.schema();
        let text = schema
            .get_field(TEXT_FIELD)
            .map_err(|_| Error::format(dir, "tantivy schema has no \"text\" field"))?;
        let tokenizer = match schema.get_field_entry(text).field_type() {
            FieldType::Str(opts) => opts
                .get_indexing_options()
                .map(|i| i.tokenizer().to_string()),
            _ => None,
        }
        .ok_or_else(|| Error::format(dir, "\"text\" is not an indexed text field"))?;
        match Analyzer::from_tokenizer_name(&tokenizer) {
            Some(a) if a == meta.analyzer => {}
            Some(a) => {
                return Err(Error::format(
                    dir,
                    format!(
                        "analyzer mismatch: searchd-lexical.json says {}, the tantivy index was \
                         built with {a}",
                        meta.analyzer
                    ),
                ))
            }
            None => {
                return Err(Error::format(
                    dir,
                    format!("the tantivy index uses an unknown tokenizer {tokenizer:?}"),
                ))
            }
        }
        index
            .tokenizers()
            .register(&tokenizer, meta.analyzer.text_analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(t)?;
        let searcher = reader.searcher();
        check_rows(dir, &searcher, meta.docs)?;
        Ok(LexicalIndex {
            dir: dir.to_path_buf(),
            meta,
            text,
            _reader: reader,
            searcher,
        })
    }

    /// What the writer recorded.
    pub fn meta(&self) -> &LexicalMeta {
        &self.meta
    }

    /// Number of documents (rows).
    pub fn len(&self) -> usize {
        self.meta.docs as usize
    }

    /// No documents.
    pub fn is_empty(&self) -> bool {
        self.meta.docs == 0
    }

    /// Bytes of the index files.
    pub fn bytes(&self) -> u64 {
        self.meta.bytes
    }

    /// BM25 top-`k` rows for `query`, best first, ties by lower row. With `allow`, only rows
    /// for which it returns true are candidates (the predicate runs during collection, so
    /// the result is the true top-`k` among allowed rows). An empty query (or one of stop
    /// words only) or `k = 0` gives no hits.
    pub fn search(
        &self,
        query: &str,
        k: usize,
        allow: Option<&(dyn Fn(u32) -> bool + Sync)>,
    ) -> Result<LexicalHits> {
        let (terms, truncated) = analyze_query(self.meta.analyzer, query);
        let mut out = LexicalHits {
            hits: Vec::new(),
            terms: terms.len(),
            truncated,
        };
        if k == 0 || terms.is_empty() || self.meta.docs == 0 {
            return Ok(out);
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|(term, count)| {
                let tq = TermQuery::new(
                    Term::from_field_text(self.text, term),
                    IndexRecordOption::WithFreqs,
                );
                let q: Box<dyn Query> = if *count == 1 {
                    Box::new(tq)
                } else {
                    // Boosting keeps the TermScorer (so block-max WAND) underneath.
                    Box::new(BoostQuery::new(Box::new(tq), *count as Score))
                };
                (Occur::Should, q)
            })
            .collect();
        let query = BooleanQuery::new(clauses);
        let t = |e| Error::tantivy(&self.dir, e);
        let weight = query
            .weight(EnableScoring::enabled_from_searcher(&self.searcher))
            .map_err(t)?;
        let mut top = TopK::new(k.min(self.len()));
        for reader in self.searcher.segment_readers() {
            // `open` checked: one segment whose doc ids are the rows.
            let alive = reader.alive_bitset();
            let threshold = top.threshold();
            let mut collect = |doc: DocId, score: Score| -> Score {
                let allowed = alive.is_none_or(|a| a.is_alive(doc)) && allow.is_none_or(|f| f(doc));
                if allowed {
                    top.push(doc, score)
                } else {
                    top.threshold()
                }
            };
            weight
                .for_each_pruning(threshold, reader, &mut collect)
                .map_err(t)?;
        }
        out.hits = top.into_sorted();
        Ok(out)
    }
}

/// The index must be one segment (or none, when empty) whose doc ids are the rows.
fn check_rows(dir: &Path, searcher: &Searcher, docs: u64) -> Result<()> {
    let readers = searcher.segment_readers();
    let max_doc: u64 = readers.iter().map(|r| u64::from(r.max_doc())).sum();
    if max_doc != docs {
        return Err(Error::format(
            dir,
            format!("searchd-lexical.json says {docs} documents, the tantivy index has {max_doc}"),
        ));
    }
    if readers.len() > 1 {
        return Err(Error::format(
            dir,
            format!("{} tantivy segments, expected one", readers.len()),
        ));
    }
    for reader in readers {
        let rows = reader
            .fast_fields()
            .u64(ROW_FIELD)
            .map_err(|e| Error::tantivy(dir, e))?;
        for doc in 0..reader.max_doc() {
            if rows.first(doc) != Some(u64::from(doc)) {
                return Err(Error::format(
                    dir,
                    format!(
                        "tantivy doc {doc} holds row {:?}: doc ids do not match rows",
                        rows.first(doc)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Cuts and analyzes query text: distinct terms in first-occurrence order with their counts,
/// and whether anything was cut.
pub(crate) fn analyze_query(analyzer: Analyzer, query: &str) -> (Vec<(String, u32)>, bool) {
    let mut truncated = false;
    let query = match query.char_indices().nth(MAX_QUERY_CHARS) {
        Some((cut, _)) => {
            truncated = true;
            &query[..cut]
        }
        None => query,
    };
    let mut terms: Vec<(String, u32)> = Vec::new();
    for_each_token(analyzer, query, |tok| {
        // Queries have few distinct terms (at most MAX_QUERY_TERMS): a linear scan beats hashing.
        if let Some(entry) = terms.iter_mut().find(|(t, _)| t == tok) {
            entry.1 = entry.1.saturating_add(1);
        } else if terms.len() < MAX_QUERY_TERMS {
            terms.push((tok.to_string(), 1));
        } else {
            truncated = true;
        }
    });
    (terms, truncated)
}

/// A hit in the top-k heap; `Ord` puts the *worst* hit on top of the max-heap: lower score
/// is worse, and on equal scores the higher row is worse.
#[derive(Clone, Copy, Debug)]
struct Hit {
    score: Score,
    doc: DocId,
}

impl PartialEq for Hit {
    fn eq(&self, other: &Hit) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Hit {}
impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Hit) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Hit {
    fn cmp(&self, other: &Hit) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.doc.cmp(&other.doc))
    }
}

/// Top-k by score, ties to the lower doc id. Fed in increasing doc order by
/// `for_each_pruning`, which only offers docs scoring strictly above the threshold; a later
/// doc with a score equal to the k-th one would lose the tie anyway.
struct TopK {
    k: usize,
    heap: BinaryHeap<Hit>,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.min(1 << 16)),
        }
    }

    fn threshold(&self) -> Score {
        if self.heap.len() < self.k {
            Score::NEG_INFINITY
        } else {
            self.heap.peek().map_or(Score::NEG_INFINITY, |h| h.score)
        }
    }

    fn push(&mut self, doc: DocId, score: Score) -> Score {
        let hit = Hit { score, doc };
        if self.heap.len() < self.k {
            self.heap.push(hit);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if hit < *worst {
                *worst = hit;
            }
        }
        self.threshold()
    }

    fn into_sorted(self) -> Vec<(u32, f32)> {
        // Ascending by `Ord` = best first.
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|h| (h.doc, h.score))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topk_keeps_best_and_breaks_ties_by_doc() {
        let mut top = TopK::new(3);
        for (doc, score) in [(0, 1.0), (1, 3.0), (2, 2.0), (3, 3.0), (4, 2.0), (5, 5.0)] {
            top.push(doc, score);
        }
        assert_eq!(top.into_sorted(), vec![(5, 5.0), (1, 3.0), (3, 3.0)]);
        let mut top = TopK::new(2);
        top.push(7, 1.0);
        top.push(2, 1.0);
        top.push(9, 1.0);
        assert_eq!(top.into_sorted(), vec![(2, 1.0), (7, 1.0)]);
    }

    #[test]
    fn query_terms_are_deduplicated_with_counts() {
        let (terms, truncated) = analyze_query(Analyzer::Standard, "b a b B c a b");
        assert!(!truncated);
        assert_eq!(
            terms,
            vec![
                ("b".to_string(), 4),
                ("a".to_string(), 2),
                ("c".to_string(), 1)
            ]
        );
        let many: String = (0..300).map(|i| format!("w{i} ")).collect();
        let (terms, truncated) = analyze_query(Analyzer::Standard, &many);
        assert!(truncated);
        assert_eq!(terms.len(), MAX_QUERY_TERMS);
        assert_eq!(terms[0].0, "w0");
    }
}
