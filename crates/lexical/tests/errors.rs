//! Bad input gives errors or empty results, never panics.

use searchd_lexical::{
    Analyzer, Error, LexicalConfig, LexicalIndex, LexicalWriter, MAX_QUERY_CHARS,
};

fn small_index(dir: &std::path::Path, analyzer: Analyzer) -> LexicalIndex {
    let cfg = LexicalConfig {
        analyzer,
        ..LexicalConfig::default()
    };
    let mut w = LexicalWriter::create(dir, &cfg).unwrap();
    w.add(0, "the cat sat on the mat").unwrap();
    w.add(1, "").unwrap();
    w.add(2, "a dog and a cat").unwrap();
    w.finish().unwrap();
    LexicalIndex::open(dir).unwrap()
}

#[test]
fn empty_and_stop_word_queries_and_k_zero_give_no_hits() {
    let tmp = tempfile::tempdir().unwrap();
    let std_idx = small_index(&tmp.path().join("std"), Analyzer::Standard);
    let en_idx = small_index(&tmp.path().join("en"), Analyzer::English);
    for idx in [&std_idx, &en_idx] {
        for q in ["", "   \t\n", "?!... ---"] {
            let h = idx.search(q, 10, None).unwrap();
            assert!(h.hits.is_empty() && h.terms == 0 && !h.truncated, "{q:?}");
        }
        assert!(idx.search("cat", 0, None).unwrap().hits.is_empty());
        assert!(idx.search("zebra", 10, None).unwrap().hits.is_empty());
    }
    let h = en_idx.search("the and of a to", 10, None).unwrap();
    assert!(h.hits.is_empty());
    assert_eq!(h.terms, 0);
    // Standard keeps stop words, so the same query finds documents.
    assert!(!std_idx
        .search("the and of a to", 10, None)
        .unwrap()
        .hits
        .is_empty());
    // Query syntax is not syntax here.
    for q in [
        "cat AND",
        "\"cat",
        "text: cat",
        "cat^2 (dog",
        "-cat +dog ~ *",
    ] {
        assert!(
            !std_idx.search(q, 10, None).unwrap().hits.is_empty(),
            "{q:?}"
        );
    }
}

#[test]
fn huge_query_is_bounded_and_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = small_index(&tmp.path().join("lexical"), Analyzer::Standard);
    let q = "cat ".repeat(25_000); // 100k chars
    let t = std::time::Instant::now();
    let h = idx.search(&q, 10, None).unwrap();
    assert!(h.truncated);
    assert_eq!(h.terms, 1);
    assert_eq!(h.hits.len(), 2);
    assert!(t.elapsed().as_secs() < 5);
    // Many distinct terms: cut at MAX_QUERY_TERMS.
    let q: String = (0..100_000).map(|i| format!("w{i} ")).collect();
    let h = idx.search(&q, 10, None).unwrap();
    assert!(h.truncated);
    assert_eq!(h.terms, searchd_lexical::MAX_QUERY_TERMS);
    // Multi-byte text cut on a char boundary.
    let q = "é".repeat(MAX_QUERY_CHARS + 10);
    assert!(idx.search(&q, 10, None).unwrap().truncated);
    let q = "é".repeat(MAX_QUERY_CHARS);
    assert!(!idx.search(&q, 10, None).unwrap().truncated);
}

#[test]
fn rows_out_of_order_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = LexicalWriter::create(&tmp.path().join("l"), &LexicalConfig::default()).unwrap();
    assert!(matches!(
        w.add(1, "x"),
        Err(Error::OutOfOrder {
            expected: 0,
            got: 1
        })
    ));
    w.add(0, "x").unwrap();
    assert!(matches!(
        w.add(0, "x"),
        Err(Error::OutOfOrder {
            expected: 1,
            got: 0
        })
    ));
    assert!(matches!(
        w.add(5, "x"),
        Err(Error::OutOfOrder {
            expected: 1,
            got: 5
        })
    ));
    w.add(1, "y").unwrap();
    assert_eq!(w.finish().unwrap().docs, 2);
}

#[test]
fn bad_configs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    let small = LexicalConfig {
        writer_heap_bytes: 10_000_000,
        ..LexicalConfig::default()
    };
    let err = LexicalWriter::create(&dir, &small).err().unwrap();
    assert!(matches!(err, Error::InvalidConfig(_)));
    assert!(err.to_string().contains("15000000"), "{err}");
    let split = LexicalConfig {
        writer_heap_bytes: 20_000_000,
        threads: 2,
        ..LexicalConfig::default()
    };
    assert!(matches!(
        LexicalWriter::create(&dir, &split),
        Err(Error::InvalidConfig(_))
    ));
    for threads in [0, 9] {
        let c = LexicalConfig {
            threads,
            ..LexicalConfig::default()
        };
        assert!(matches!(
            LexicalWriter::create(&dir, &c),
            Err(Error::InvalidConfig(_))
        ));
    }
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("x"), b"x").unwrap();
    assert!(matches!(
        LexicalWriter::create(&dir, &LexicalConfig::default()),
        Err(Error::NotEmpty { .. })
    ));
}

#[test]
fn opening_what_is_not_an_index_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    // Missing directory.
    let missing = tmp.path().join("missing");
    let err = LexicalIndex::open(&missing).err().unwrap();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(err.to_string().contains("missing"));
    // A directory of something else.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("data.txt"), b"hello").unwrap();
    let err = LexicalIndex::open(&other).err().unwrap();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("other") && msg.contains("not a searchd lexical index"),
        "{msg}"
    );
    // Garbage json.
    std::fs::write(other.join("searchd-lexical.json"), b"{not json").unwrap();
    assert!(matches!(
        LexicalIndex::open(&other),
        Err(Error::Format { .. })
    ));
    std::fs::write(
        other.join("searchd-lexical.json"),
        br#"{"schema":"x.y","format":1}"#,
    )
    .unwrap();
    assert!(matches!(
        LexicalIndex::open(&other),
        Err(Error::Format { .. })
    ));
}

fn edit_json(dir: &std::path::Path, key: &str, value: serde_json::Value) {
    let path = dir.join("searchd-lexical.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    v[key] = value;
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn unknown_format_analyzer_mismatch_and_doc_count_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    drop(small_index(&dir, Analyzer::Standard));
    let json = dir.join("searchd-lexical.json");
    let original = std::fs::read(&json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&original).unwrap();
    assert_eq!(v["schema"], "searchd.lexical.v1");
    assert_eq!(v["format"], 1);
    assert_eq!(v["analyzer"], "standard");

    edit_json(&dir, "format", 99.into());
    let err = LexicalIndex::open(&dir).err().unwrap();
    assert!(matches!(err, Error::Format { .. }));
    assert!(err.to_string().contains("format 99"), "{err}");

    std::fs::write(&json, &original).unwrap();
    edit_json(&dir, "analyzer", "english".into());
    let err = LexicalIndex::open(&dir).err().unwrap();
    assert!(err.to_string().contains("analyzer mismatch"), "{err}");

    std::fs::write(&json, &original).unwrap();
    edit_json(&dir, "analyzer", "klingon".into());
    assert!(matches!(
        LexicalIndex::open(&dir),
        Err(Error::Format { .. })
    ));

    std::fs::write(&json, &original).unwrap();
    edit_json(&dir, "docs", 7.into());
    let err = LexicalIndex::open(&dir).err().unwrap();
    assert!(err.to_string().contains("7 documents"), "{err}");

    std::fs::write(&json, &original).unwrap();
    assert_eq!(LexicalIndex::open(&dir).unwrap().len(), 3);
}

#[test]
fn empty_index_opens_and_searches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    let meta = LexicalWriter::create(&dir, &LexicalConfig::default())
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!(meta.docs, 0);
    let idx = LexicalIndex::open(&dir).unwrap();
    assert!(idx.is_empty());
    assert!(idx.search("anything", 10, None).unwrap().hits.is_empty());
    // An index of only empty texts.
    let dir = tmp.path().join("m");
    let mut w = LexicalWriter::create(&dir, &LexicalConfig::default()).unwrap();
    for row in 0..3 {
        w.add(row, "").unwrap();
    }
    w.finish().unwrap();
    let idx = LexicalIndex::open(&dir).unwrap();
    assert_eq!(idx.len(), 3);
    assert!(idx.search("anything", 10, None).unwrap().hits.is_empty());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    #[test]
    fn arbitrary_queries_never_panic(q in "\\PC{0,200}", k in 0usize..20) {
        use std::sync::OnceLock;
        static IDX: OnceLock<(tempfile::TempDir, LexicalIndex)> = OnceLock::new();
        let (_, idx) = IDX.get_or_init(|| {
            let tmp = tempfile::tempdir().unwrap();
            let idx = small_index(&tmp.path().join("l"), Analyzer::English);
            (tmp, idx)
        });
        let h = idx.search(&q, k, None).unwrap();
        proptest::prop_assert!(h.hits.len() <= k.min(3));
        for w in h.hits.windows(2) {
            proptest::prop_assert!(w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0));
        }
    }
}

/// A flipped byte in any file of the tantivy index (fieldnorms, postings, `.idx`, term
/// dictionary, store, meta.json) is refused at open with the file's name, never read as
/// different rankings or a panic mid-search; a truncated file is refused even without
/// `verify`, by its size. (Before the files were listed with their CRC32s, a flip in the
/// fieldnorms changed rankings silently and one in `.idx` panicked inside tantivy.)
#[test]
fn a_damaged_file_is_refused_at_open_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    drop(small_index(&dir, Analyzer::Standard));
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            p.is_file() && !name.starts_with("searchd-lexical.json") && !name.ends_with(".lock")
        })
        .collect();
    files.sort();
    let exts: std::collections::BTreeSet<String> = files
        .iter()
        .filter_map(|p| p.extension().map(|e| e.to_string_lossy().into_owned()))
        .collect();
    for want in ["fieldnorm", "idx", "term", "json"] {
        assert!(exts.contains(want), "no .{want} file among {files:?}");
    }
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let original = std::fs::read(path).unwrap();
        assert!(!original.is_empty(), "{name} is empty");
        // A flip at the start, the middle and the end of the file.
        for at in [0, original.len() / 2, original.len() - 1] {
            let mut bad = original.clone();
            bad[at] ^= 0x10;
            std::fs::write(path, &bad).unwrap();
            let err = LexicalIndex::open_with(&dir, true)
                .err()
                .unwrap_or_else(|| panic!("a flipped byte at {at} of {name} was not detected"));
            assert!(matches!(err, Error::Format { .. }), "{name}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(&name) && msg.contains("CRC32"), "{msg}");
        }
        // Truncated: refused by size, also without verify.
        std::fs::write(path, &original[..original.len() - 1]).unwrap();
        for verify in [false, true] {
            let err = LexicalIndex::open_with(&dir, verify).err().unwrap();
            let msg = err.to_string();
            assert!(msg.contains(&name) && msg.contains("size"), "{msg}");
        }
        // Missing: refused, naming it.
        std::fs::remove_file(path).unwrap();
        let err = LexicalIndex::open_with(&dir, false).err().unwrap();
        assert!(err.to_string().contains(&name), "{err}");
        std::fs::write(path, &original).unwrap();
        assert_eq!(LexicalIndex::open_with(&dir, true).unwrap().len(), 3);
    }
}
