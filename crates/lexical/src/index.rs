//! Opening a lexical index and BM25 top-k search over it.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::columnar::Column;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, BoostQuery, EnableScoring, Occur, Query, TermQuery,
};
use tantivy::schema::{Field, FieldType, IndexRecordOption};
use tantivy::{
    DocId, DocSet, Index, IndexReader, InvertedIndexReader, ReloadPolicy, Score, Searcher, Term,
    TERMINATED,
};

use crate::analyzer::{for_each_token, Analyzer};
use crate::writer::{LEN_FIELD, ROW_FIELD, TEXT_FIELD};
use crate::{check_files, read_meta, Error, LexicalMeta, Result, MAX_QUERY_CHARS, MAX_QUERY_TERMS};

/// An opened (memory-mapped) lexical index. `Send + Sync`: one per segment, shared by all
/// searching threads.
pub struct LexicalIndex {
    dir: PathBuf,
    meta: LexicalMeta,
    text: Field,
    /// Kept so the searcher's generation stays alive; never reloaded (the index is write-once).
    _reader: IndexReader,
    searcher: Searcher,
    /// The text field's postings, fieldnorms and token count of the one tantivy segment
    /// (`None` when the index has no documents).
    seg: Option<SegmentParts>,
}

struct SegmentParts {
    inverted: Arc<InvertedIndexReader>,
    fieldnorms: FieldNormReader,
    /// Exact token count per row; `None` in indexes written before the `len` column.
    lengths: Option<Column<u64>>,
    /// Tokens of all rows (the field's total, as tantivy recorded it).
    tokens: u64,
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

/// Query text analyzed once (cut, tokenized, distinct terms with their counts), to search
/// several indexes of the same analyzer and to gather their statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct LexicalQuery {
    analyzer: Analyzer,
    terms: Vec<(String, u32)>,
    truncated: bool,
}

impl LexicalQuery {
    /// Analyzes `text` as [`LexicalIndex::search`] does (see the crate doc, "Queries").
    pub fn new(analyzer: Analyzer, text: &str) -> LexicalQuery {
        let (terms, truncated) = analyze_query(analyzer, text);
        LexicalQuery {
            analyzer,
            terms,
            truncated,
        }
    }

    /// The analyzer the terms came from.
    pub fn analyzer(&self) -> Analyzer {
        self.analyzer
    }

    /// The distinct terms, in first-occurrence order.
    pub fn terms(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.terms.iter().map(|(t, _)| t.as_str())
    }

    /// Number of distinct terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// No terms (empty text, or stop words only): matches nothing.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The text was cut at [`MAX_QUERY_CHARS`] or its terms at [`MAX_QUERY_TERMS`].
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

/// The corpus statistics of BM25 for one query: documents, tokens (so `avgdl` = tokens /
/// docs) and, per query term (in [`LexicalQuery::terms`] order), the documents holding it.
/// A collection sums them over its segments so that every segment scores alike.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bm25Stats {
    /// Documents (`N`).
    pub docs: u64,
    /// Tokens over all those documents.
    pub tokens: u64,
    /// Per query term, the documents holding it (`n_t`).
    pub doc_freqs: Vec<u64>,
}

impl Bm25Stats {
    /// Adds another part of the corpus (same query).
    pub fn add(&mut self, other: &Bm25Stats) {
        self.docs += other.docs;
        self.tokens += other.tokens;
        if self.doc_freqs.len() < other.doc_freqs.len() {
            self.doc_freqs.resize(other.doc_freqs.len(), 0);
        }
        for (a, b) in self.doc_freqs.iter_mut().zip(&other.doc_freqs) {
            *a += b;
        }
    }
}

/// [`Bm25Stats`] as tantivy asks for them while it builds the query's weights.
struct StatsProvider<'a> {
    query: &'a LexicalQuery,
    stats: &'a Bm25Stats,
}

impl Bm25StatisticsProvider for StatsProvider<'_> {
    fn total_num_tokens(&self, _field: Field) -> tantivy::Result<u64> {
        Ok(self.stats.tokens)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.stats.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let value = term.value();
        let text = value.as_str();
        self.query
            .terms
            .iter()
            .position(|(t, _)| Some(t.as_str()) == text)
            .and_then(|i| self.stats.doc_freqs.get(i).copied())
            .ok_or_else(|| {
                tantivy::TantivyError::InvalidArgument(format!(
                    "no document frequency given for the term {text:?}"
                ))
            })
    }
}

impl LexicalIndex {
    /// Opens the index in `dir` (written by [`crate::LexicalWriter::finish`]), checking every
    /// file's size and CRC32 ([`LexicalIndex::open_with`] with `verify`).
    pub fn open(dir: &Path) -> Result<LexicalIndex> {
        LexicalIndex::open_with(dir, true)
    }

    /// Opens the index in `dir`. The files [`META_FILE`](crate::META_FILE) lists must be there with their
    /// sizes, and with `verify` their CRC32s (an index without the list is checked against
    /// tantivy's own footer checksums instead); an error names the damaged file.
    pub fn open_with(dir: &Path, verify: bool) -> Result<LexicalIndex> {
        let meta = read_meta(dir)?;
        // Before tantivy reads anything: a damaged file could make it panic or misrank.
        check_files(dir, &meta.files, verify)?;
        let t = |e| Error::tantivy(dir, e);
        let index = Index::open_in_dir(dir).map_err(t)?;
        if verify && meta.files.is_empty() {
            let mut damaged: Vec<PathBuf> =
                index.validate_checksum().map_err(t)?.into_iter().collect();
            damaged.sort();
            if let Some(first) = damaged.first() {
                return Err(Error::format(
                    &dir.join(first),
                    "tantivy's checksum of the file does not match; the lexical index is corrupt",
                ));
            }
        }
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
        let has_len = schema.get_field(LEN_FIELD).is_ok();
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
        let seg = match searcher.segment_readers().first() {
            None => None,
            Some(r) => {
                let inverted = r.inverted_index(text).map_err(t)?;
                let tokens = inverted.total_num_tokens();
                let lengths = if has_len {
                    Some(r.fast_fields().u64(LEN_FIELD).map_err(t)?)
                } else {
                    None
                };
                if let Some(col) = &lengths {
                    let sum: u64 = (0..r.max_doc()).map(|d| col.first(d).unwrap_or(0)).sum();
                    if sum != tokens {
                        return Err(Error::format(
                            dir,
                            format!(
                                "the rows' token counts sum to {sum}, the text field holds {tokens} tokens"
                            ),
                        ));
                    }
                }
                Some(SegmentParts {
                    inverted,
                    fieldnorms: r.get_fieldnorms_reader(text).map_err(t)?,
                    lengths,
                    tokens,
                })
            }
        };
        Ok(LexicalIndex {
            dir: dir.to_path_buf(),
            meta,
            text,
            _reader: reader,
            searcher,
            seg,
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

    /// Tokens of all rows.
    pub fn tokens(&self) -> u64 {
        self.seg.as_ref().map_or(0, |s| s.tokens)
    }

    /// Whether [`LexicalIndex::tokens_of`] is exact (the index has the `len` column) rather
    /// than read from the fieldnorms.
    pub fn exact_lengths(&self) -> bool {
        self.seg.as_ref().is_none_or(|s| s.lengths.is_some())
    }

    /// Tokens of the given rows (rows past the end count 0): exact with the `len` column,
    /// otherwise the fieldnorms' values (exact below 40 tokens, rounded down above).
    pub fn tokens_of(&self, rows: impl IntoIterator<Item = u32>) -> u64 {
        let Some(s) = &self.seg else { return 0 };
        let n = self.meta.docs;
        let rows = rows.into_iter().filter(|&r| u64::from(r) < n);
        match &s.lengths {
            Some(col) => rows.map(|r| col.first(r).unwrap_or(0)).sum(),
            None => rows.map(|r| u64::from(s.fieldnorms.fieldnorm(r))).sum(),
        }
    }

    /// Rows holding `term` (an analyzed term, e.g. from [`LexicalQuery::terms`]).
    pub fn doc_freq(&self, term: &str) -> Result<u64> {
        let Some(s) = &self.seg else { return Ok(0) };
        s.inverted
            .doc_freq(&Term::from_field_text(self.text, term))
            .map(u64::from)
            .map_err(|e| Error::io(&self.dir, e))
    }

    /// How many of `rows` (ascending, no repeats) hold `term`. Costs about
    /// `min(rows, doc_freq)` steps: each row seeks the term's postings, which skip whole
    /// blocks of 128 rows; with more rows than postings, the postings are walked instead
    /// and `contains` (which must agree with `rows`) is asked of each.
    pub fn doc_freq_among(
        &self,
        term: &str,
        rows: impl IntoIterator<Item = u32>,
        rows_len: u64,
        contains: &dyn Fn(u32) -> bool,
    ) -> Result<u64> {
        let Some(s) = &self.seg else { return Ok(0) };
        let io = |e| Error::io(&self.dir, e);
        let Some(mut postings) = s
            .inverted
            .read_postings(
                &Term::from_field_text(self.text, term),
                IndexRecordOption::Basic,
            )
            .map_err(io)?
        else {
            return Ok(0);
        };
        let mut n = 0u64;
        if rows_len < u64::from(postings.doc_freq()) {
            for row in rows {
                let doc = if postings.doc() >= row {
                    postings.doc()
                } else {
                    postings.seek(row)
                };
                if doc == TERMINATED {
                    break;
                }
                n += u64::from(doc == row);
            }
        } else {
            let mut doc = postings.doc();
            while doc != TERMINATED {
                n += u64::from(contains(doc));
                doc = postings.advance();
            }
        }
        Ok(n)
    }

    /// This index's own statistics for `query` (all rows).
    pub fn stats(&self, query: &LexicalQuery) -> Result<Bm25Stats> {
        Ok(Bm25Stats {
            docs: self.meta.docs,
            tokens: self.tokens(),
            doc_freqs: query
                .terms()
                .map(|t| self.doc_freq(t))
                .collect::<Result<_>>()?,
        })
    }

    /// BM25 top-`k` rows for `query`, best first, ties by lower row. With `allow`, only rows
    /// for which it returns true are candidates (the predicate runs during collection, so
    /// the result is the true top-`k` among allowed rows). An empty query (or one of stop
    /// words only) or `k = 0` gives no hits. Scores use this index's own statistics.
    pub fn search(
        &self,
        query: &str,
        k: usize,
        allow: Option<&(dyn Fn(u32) -> bool + Sync)>,
    ) -> Result<LexicalHits> {
        self.search_query(
            &LexicalQuery::new(self.meta.analyzer, query),
            k,
            allow,
            None,
        )
    }

    /// [`LexicalIndex::search`] of an analyzed query, scored with `stats` when given (a
    /// whole collection's, so scores compare across its segments) or this index's own.
    /// `stats` must hold the rows this index returns (`docs` > 0, and for each term at
    /// least the allowed rows holding it), as sums over segments of live rows do.
    pub fn search_query(
        &self,
        query: &LexicalQuery,
        k: usize,
        allow: Option<&(dyn Fn(u32) -> bool + Sync)>,
        stats: Option<&Bm25Stats>,
    ) -> Result<LexicalHits> {
        if query.analyzer != self.meta.analyzer {
            return Err(Error::format(
                &self.dir,
                format!(
                    "the query was analyzed as {}, the index as {}",
                    query.analyzer, self.meta.analyzer
                ),
            ));
        }
        let mut out = LexicalHits {
            hits: Vec::new(),
            terms: query.terms.len(),
            truncated: query.truncated,
        };
        if k == 0 || query.terms.is_empty() || self.meta.docs == 0 {
            return Ok(out);
        }
        if let Some(st) = stats {
            // No document holds a term: nothing can match (and avgdl may be 0 / 0).
            if st.docs == 0 || st.doc_freqs.iter().all(|&n| n == 0) {
                return Ok(out);
            }
            if st.doc_freqs.len() != query.terms.len() {
                return Err(Error::format(
                    &self.dir,
                    format!(
                        "statistics for {} terms given for a query of {}",
                        st.doc_freqs.len(),
                        query.terms.len()
                    ),
                ));
            }
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = query
            .terms
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
        let boolean = BooleanQuery::new(clauses);
        let t = |e| Error::tantivy(&self.dir, e);
        let provider = stats.map(|stats| StatsProvider { query, stats });
        let scoring = match &provider {
            Some(p) => EnableScoring::enabled_from_statistics_provider(p, &self.searcher),
            None => EnableScoring::enabled_from_searcher(&self.searcher),
        };
        let weight = boolean.weight(scoring).map_err(t)?;
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
