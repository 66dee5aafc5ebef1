//! BM25 scores against the formula, computed by hand on a tiny corpus; reopen gives the same.

use searchd_lexical::{Analyzer, LexicalConfig, LexicalIndex, LexicalWriter};

const DOCS: [&str; 5] = [
    "the quick brown fox",
    "the lazy dog",
    "quick quick fox jumps",
    "dog dog dog",
    "",
];

fn build(dir: &std::path::Path) -> LexicalIndex {
    let mut w = LexicalWriter::create(dir, &LexicalConfig::default()).unwrap();
    for (row, text) in DOCS.iter().enumerate() {
        w.add(row as u32, text).unwrap();
    }
    let meta = w.finish().unwrap();
    assert_eq!(meta.docs, 5);
    assert_eq!(meta.analyzer, Analyzer::Standard);
    assert_eq!((meta.k1, meta.b, meta.format), (1.2, 0.75, 1));
    assert!(meta.bytes > 0);
    LexicalIndex::open(dir).unwrap()
}

/// tantivy's BM25: Lucene's IDF, `(k1 + 1)` kept, avgdl = total tokens / docs.
fn bm25(tf: f64, dl: f64, avgdl: f64, n: f64, big_n: f64) -> f64 {
    let (k1, b) = (1.2, 0.75);
    let idf = (1.0 + (big_n - n + 0.5) / (n + 0.5)).ln();
    idf * (k1 + 1.0) * tf / (tf + k1 * (1.0 - b + b * dl / avgdl))
}

#[test]
fn scores_match_the_formula() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(&tmp.path().join("lexical"));
    assert_eq!(idx.len(), 5);
    let avgdl = 14.0 / 5.0;
    // "quick" is in docs 0 (tf 1, dl 4) and 2 (tf 2, dl 4); "dog" in 1 (tf 1, dl 3) and 3 (tf 3, dl 3).
    let expect = [
        (3, bm25(3.0, 3.0, avgdl, 2.0, 5.0)),
        (2, bm25(2.0, 4.0, avgdl, 2.0, 5.0)),
        (1, bm25(1.0, 3.0, avgdl, 2.0, 5.0)),
        (0, bm25(1.0, 4.0, avgdl, 2.0, 5.0)),
    ];
    let got = idx.search("Quick DOG", 10, None).unwrap();
    assert_eq!(got.terms, 2);
    assert!(!got.truncated);
    assert_eq!(got.hits.len(), 4, "{got:?}");
    for ((row, score), (erow, escore)) in got.hits.iter().zip(expect) {
        assert_eq!(*row, erow, "{got:?}");
        assert!(
            (f64::from(*score) - escore).abs() < 1e-5 * escore,
            "{score} vs {escore}"
        );
    }
    // Two terms that each match one doc: a sum over both.
    let got = idx.search("fox jumps", 1, None).unwrap();
    let e = bm25(1.0, 4.0, avgdl, 2.0, 5.0) + bm25(1.0, 4.0, avgdl, 1.0, 5.0);
    assert_eq!(got.hits[0].0, 2);
    assert!((f64::from(got.hits[0].1) - e).abs() < 1e-5 * e);
}

#[test]
fn repeated_query_terms_count_each_time() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = build(&tmp.path().join("lexical"));
    let once = idx.search("lazy", 1, None).unwrap().hits[0];
    let thrice = idx.search("lazy lazy LAZY", 1, None).unwrap();
    assert_eq!(thrice.terms, 1);
    assert_eq!(thrice.hits[0].0, once.0);
    assert!((thrice.hits[0].1 - 3.0 * once.1).abs() < 1e-5 * once.1);
}

#[test]
fn ties_go_to_the_lower_row() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lexical");
    let mut w = LexicalWriter::create(&dir, &LexicalConfig::default()).unwrap();
    for row in 0..50u32 {
        w.add(
            row,
            if row % 3 == 0 {
                "alpha beta"
            } else {
                "gamma beta"
            },
        )
        .unwrap();
    }
    w.finish().unwrap();
    let idx = LexicalIndex::open(&dir).unwrap();
    let hits = idx.search("alpha", 5, None).unwrap().hits;
    let rows: Vec<u32> = hits.iter().map(|h| h.0).collect();
    assert_eq!(rows, vec![0, 3, 6, 9, 12]);
    let rows: Vec<u32> = idx
        .search("beta", 4, None)
        .unwrap()
        .hits
        .iter()
        .map(|h| h.0)
        .collect();
    assert_eq!(rows, vec![0, 1, 2, 3]);
    // k larger than the index.
    assert_eq!(idx.search("beta", 1 << 40, None).unwrap().hits.len(), 50);
}

#[test]
fn reopen_gives_identical_results_and_is_shareable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lexical");
    let first = build(&dir);
    let queries = [
        "quick",
        "dog fox",
        "the",
        "lazy brown jumps",
        "nothing here",
    ];
    let before: Vec<_> = queries
        .iter()
        .map(|q| first.search(q, 3, None).unwrap())
        .collect();
    drop(first);
    let again = std::sync::Arc::new(LexicalIndex::open(&dir).unwrap());
    let after: Vec<_> = queries
        .iter()
        .map(|q| again.search(q, 3, None).unwrap())
        .collect();
    assert_eq!(before, after);
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let idx = again.clone();
            std::thread::spawn(move || idx.search("dog fox", 3, None).unwrap())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), after[1]);
    }
}

#[test]
fn english_index_stems_documents_and_queries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lexical");
    let cfg = LexicalConfig {
        analyzer: Analyzer::English,
        ..LexicalConfig::default()
    };
    let mut w = LexicalWriter::create(&dir, &cfg).unwrap();
    w.add(0, "The dogs were running in the park").unwrap();
    w.add(1, "A cat sleeps").unwrap();
    w.finish().unwrap();
    let idx = LexicalIndex::open(&dir).unwrap();
    assert_eq!(idx.meta().analyzer, Analyzer::English);
    let got = idx.search("run DOG", 10, None).unwrap();
    assert_eq!(got.terms, 2);
    assert_eq!(got.hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0]);
    assert_eq!(idx.search("sleeping cats", 10, None).unwrap().hits[0].0, 1);
}

#[test]
fn multi_threaded_build_with_several_segments_keeps_rows() {
    // 2 threads x 15 MB flushes several tantivy segments on ~40k docs; they interleave rows.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lexical");
    let cfg = LexicalConfig {
        writer_heap_bytes: 30_000_000,
        threads: 2,
        ..LexicalConfig::default()
    };
    let mut w = LexicalWriter::create(&dir, &cfg).unwrap();
    let n = 40_000u32;
    for row in 0..n {
        let text = format!("row{row} common w{} w{}", row % 97, row % 1013);
        w.add(row, &text).unwrap();
    }
    w.finish().unwrap();
    let idx = LexicalIndex::open(&dir).unwrap();
    assert_eq!(idx.len(), n as usize);
    for row in [0u32, 1, 17, 20_000, 39_999] {
        let hits = idx.search(&format!("row{row}"), 1, None).unwrap().hits;
        assert_eq!(hits[0].0, row);
    }
}
