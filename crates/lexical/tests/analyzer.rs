//! Analyzer outputs on tricky strings, against what Elasticsearch's `standard` tokenizer
//! (UAX#29) gives.

use searchd_lexical::{tokenize, Analyzer};

fn std_toks(s: &str) -> Vec<String> {
    tokenize(Analyzer::Standard, s)
}

#[test]
fn standard_matches_elasticsearch_standard() {
    let cases: &[(&str, &[&str])] = &[
        ("Don't stop", &["don't", "stop"]),
        ("Don’t stop", &["don’t", "stop"]),
        ("U.S.A.", &["u.s.a"]),
        ("e-mail", &["e", "mail"]),
        ("naïve Café", &["naïve", "café"]),
        ("12.5%", &["12.5"]),
        ("1,000,000 people", &["1,000,000", "people"]),
        (
            "The 2 QUICK Brown-Foxes jumped over the lazy dog's bone.",
            &[
                "the", "2", "quick", "brown", "foxes", "jumped", "over", "the", "lazy", "dog's",
                "bone",
            ],
        ),
        ("hello_world foo.bar", &["hello_world", "foo.bar"]),
        // ":" is a UAX#29 MidLetter, as in Lucene.
        ("text:cat", &["text:cat"]),
        ("AT&T wi-fi, ok?!", &["at", "t", "wi", "fi", "ok"]),
        // Han ideographs and Hiragana: one token per character; Katakana runs stay whole.
        ("東京都", &["東", "京", "都"]),
        ("カタカナ", &["カタカナ"]),
        ("한국어 텍스트", &["한국어", "텍스트"]),
        ("Ελληνικά ΚΕΙΜΕΝΟ", &["ελληνικά", "κειμενο"]),
        (" \u{0B47}x", &["x"]),
        ("", &[]),
        ("   \t\n ... --- !!!", &[]),
    ];
    for (input, want) in cases {
        assert_eq!(std_toks(input), *want, "input {input:?}");
    }
}

#[test]
fn english_drops_stop_words_and_stems() {
    let en = |s: &str| tokenize(Analyzer::English, s);
    assert_eq!(en("running dogs"), vec!["run", "dog"]);
    assert_eq!(en("The dog is in the house"), vec!["dog", "hous"]);
    assert_eq!(en("to be or not to be"), Vec::<String>::new());
    assert_eq!(en("Generalizations CONNECTED"), vec!["general", "connect"]);
    // Standard keeps stop words and does not stem.
    assert_eq!(std_toks("The running dogs"), vec!["the", "running", "dogs"]);
}

#[test]
fn every_stop_word_is_dropped_by_english_only() {
    for w in searchd_lexical::ENGLISH_STOP_WORDS {
        assert!(tokenize(Analyzer::English, w).is_empty(), "{w}");
        assert_eq!(std_toks(w), vec![w.to_string()]);
    }
    assert_eq!(searchd_lexical::ENGLISH_STOP_WORDS.len(), 33);
}

const NNBSP: char = '\u{202f}';

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    #[test]
    fn tokens_are_lowercase_nonempty_and_bounded(s in "\\PC{0,300}") {
        for a in [Analyzer::Standard, Analyzer::English] {
            for t in tokenize(a, &s) {
                proptest::prop_assert!(!t.is_empty());
                proptest::prop_assert!(t.chars().count() <= 3 * searchd_lexical::MAX_TOKEN_CHARS);
                // U+202F NARROW NO-BREAK SPACE is ExtendNumLet in UAX #29 (a thousands
                // separator, "10\u{202f}000"), so the standard tokenizer keeps it inside a
                // token, as Elasticsearch's does; every other whitespace splits.
                let splits = |c: char| c.is_whitespace() && c != NNBSP;
                proptest::prop_assert!(!t.chars().any(splits), "whitespace in {:?}", t);
            }
        }
    }
}
