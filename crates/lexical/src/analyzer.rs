//! The analyzers: text -> the terms that are indexed and queried.
//!
//! Both analyzers start from the same tokenizer, modelled on Elasticsearch's `standard`
//! tokenizer (Lucene's `StandardTokenizer`):
//!
//! 1. Unicode word segmentation (UAX#29) through `unicode-segmentation`'s
//!    `unicode_word_indices()`: a "word" is a UAX#29 segment holding at least one alphabetic
//!    or numeric character, so punctuation and whitespace segments are dropped, digits are
//!    kept, `don't` and `U.S.A` stay whole (`'` and `.` between letters do not break),
//!    `12.5` stays whole (`.` between digits), `e-mail` is two words, and each Han ideograph
//!    or Hiragana character is its own word while Katakana and Hangul runs stay together.
//! 2. Words longer than [`MAX_TOKEN_CHARS`] (255) characters are **split** at 255-character
//!    intervals, as Elasticsearch's `max_token_length` does (not dropped). Lucene counts
//!    UTF-16 units where this counts `char`s; they agree outside the supplementary planes.
//! 3. Lowercasing per character (`char::to_lowercase`), which differs from Lucene's
//!    `Character.toLowerCase` only for the few characters whose full lower-case mapping is
//!    more than one character (e.g. U+0130).
//!
//! A segment that starts with whitespace (UAX#29 rule WB4 attaches combining marks to a
//! preceding space, e.g. `" \u{0B47}"`) is dropped, as Lucene treats it as whitespace.
//!
//! Known differences from Elasticsearch's `standard`: emoji are not tokens (Lucene 7+ emits
//! them as `<EMOJI>` tokens); everything else above follows UAX#29 as Lucene does.
//!
//! [`Analyzer::English`] adds, in Elasticsearch's order: an English possessive filter
//! (trailing `'s`, `’s` or `＇s` removed), the stop words of Lucene's `EnglishAnalyzer`
//! ([`ENGLISH_STOP_WORDS`], the 33 words of Elasticsearch's `_english_`), and the Snowball
//! English (Porter2) stemmer of tantivy's `Stemmer`. Elasticsearch's `english` analyzer uses
//! the original Porter stemmer (`porter_stem`); Porter2 differs on some words.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tantivy::tokenizer::{
    Language, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer,
};
use unicode_segmentation::{UnicodeSegmentation, UnicodeWordIndices};

use crate::Error;

/// Longest token, in characters; longer words are split at this many characters.
pub const MAX_TOKEN_CHARS: usize = 255;

/// The stop words of [`Analyzer::English`]: Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`,
/// which is also Elasticsearch's `_english_` list.
pub const ENGLISH_STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Which analyzer turns text into terms, at indexing and at query time alike.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "lowercase")]
pub enum Analyzer {
    /// Elasticsearch's `standard`: UAX#29 words, lowercased; no stemming, no stop words.
    #[default]
    Standard,
    /// `Standard` + English possessives removed + Lucene's English stop words + Porter2 stemming.
    English,
}

impl Analyzer {
    /// The name the analyzer is registered under in the tantivy index (and its schema).
    pub(crate) fn tokenizer_name(self) -> &'static str {
        match self {
            Analyzer::Standard => "searchd_standard",
            Analyzer::English => "searchd_english",
        }
    }

    pub(crate) fn from_tokenizer_name(name: &str) -> Option<Analyzer> {
        [Analyzer::Standard, Analyzer::English]
            .into_iter()
            .find(|a| a.tokenizer_name() == name)
    }

    /// A fresh tantivy analyzer (cheap: clones a cached one).
    pub(crate) fn text_analyzer(self) -> TextAnalyzer {
        static STANDARD: OnceLock<TextAnalyzer> = OnceLock::new();
        static ENGLISH: OnceLock<TextAnalyzer> = OnceLock::new();
        match self {
            Analyzer::Standard => STANDARD
                .get_or_init(|| TextAnalyzer::builder(StandardTokenizer::default()).build())
                .clone(),
            Analyzer::English => ENGLISH
                .get_or_init(|| {
                    TextAnalyzer::builder(StandardTokenizer::default())
                        .filter(EnglishPossessive)
                        .filter(StopWordFilter::remove(
                            ENGLISH_STOP_WORDS.iter().map(|w| w.to_string()),
                        ))
                        .filter(Stemmer::new(Language::English))
                        .build()
                })
                .clone(),
        }
    }
}

impl fmt::Display for Analyzer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Analyzer::Standard => "standard",
            Analyzer::English => "english",
        })
    }
}

impl FromStr for Analyzer {
    type Err = Error;

    /// `standard` or `english` (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Analyzer, Error> {
        if s.eq_ignore_ascii_case("standard") {
            Ok(Analyzer::Standard)
        } else if s.eq_ignore_ascii_case("english") {
            Ok(Analyzer::English)
        } else {
            Err(Error::InvalidConfig(format!(
                "unknown analyzer {s:?} (expected \"standard\" or \"english\")"
            )))
        }
    }
}

/// Exactly the terms `analyzer` indexes for (or queries with) `text`, in order, repeats kept.
pub fn tokenize(analyzer: Analyzer, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(analyzer, text, |t| out.push(t.to_string()));
    out
}

/// Calls `f` with each term of `text`, in order.
pub(crate) fn for_each_token(analyzer: Analyzer, text: &str, mut f: impl FnMut(&str)) {
    let mut ta = analyzer.text_analyzer();
    let mut stream = ta.token_stream(text);
    while stream.advance() {
        f(&stream.token().text);
    }
}

/// The tokenizer shared by both analyzers (see the module doc).
#[derive(Clone, Default)]
pub(crate) struct StandardTokenizer {
    token: Token,
}

pub(crate) struct StandardTokenStream<'a> {
    words: UnicodeWordIndices<'a>,
    /// The rest of a word longer than [`MAX_TOKEN_CHARS`], still to be emitted.
    pending: Option<(usize, &'a str)>,
    token: &'a mut Token,
}

impl Tokenizer for StandardTokenizer {
    type TokenStream<'a> = StandardTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> StandardTokenStream<'a> {
        self.token.reset();
        StandardTokenStream {
            words: text.unicode_word_indices(),
            pending: None,
            token: &mut self.token,
        }
    }
}

impl TokenStream for StandardTokenStream<'_> {
    fn advance(&mut self) -> bool {
        let (offset, word) = match self.pending.take() {
            Some(p) => p,
            None => loop {
                match self.words.next() {
                    // UAX#29 rule WB4 glues combining marks to a preceding space; such a
                    // segment is whitespace to Lucene, not a word.
                    Some((_, w)) if w.starts_with(char::is_whitespace) => continue,
                    Some(w) => break w,
                    None => return false,
                }
            },
        };
        // A word of at most 255 bytes has at most 255 chars: no need to count them.
        let cut = if word.len() <= MAX_TOKEN_CHARS {
            word.len()
        } else {
            word.char_indices()
                .nth(MAX_TOKEN_CHARS)
                .map_or(word.len(), |(i, _)| i)
        };
        if cut < word.len() {
            self.pending = Some((offset + cut, &word[cut..]));
        }
        let piece = &word[..cut];
        let text = &mut self.token.text;
        text.clear();
        if piece.is_ascii() {
            text.push_str(piece);
            text.make_ascii_lowercase();
        } else {
            for c in piece.chars() {
                text.extend(c.to_lowercase());
            }
        }
        self.token.offset_from = offset;
        self.token.offset_to = offset + cut;
        self.token.position = self.token.position.wrapping_add(1);
        self.token.position_length = 1;
        true
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

/// Lucene's `EnglishPossessiveFilter`: removes a trailing `'s` (also with U+2019 or U+FF07).
/// Runs after lowercasing here, so `'S` is covered too.
#[derive(Clone)]
struct EnglishPossessive;

impl TokenFilter for EnglishPossessive {
    type Tokenizer<T: Tokenizer> = EnglishPossessiveFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> EnglishPossessiveFilter<T> {
        EnglishPossessiveFilter { inner: tokenizer }
    }
}

#[derive(Clone)]
struct EnglishPossessiveFilter<T> {
    inner: T,
}

impl<T: Tokenizer> Tokenizer for EnglishPossessiveFilter<T> {
    type TokenStream<'a> = EnglishPossessiveStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        EnglishPossessiveStream {
            tail: self.inner.token_stream(text),
        }
    }
}

struct EnglishPossessiveStream<T> {
    tail: T,
}

impl<T: TokenStream> TokenStream for EnglishPossessiveStream<T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let text = &mut self.tail.token_mut().text;
        if let Some(rest) = text.strip_suffix('s') {
            for apostrophe in ['\'', '\u{2019}', '\u{FF07}'] {
                if let Some(stem) = rest.strip_suffix(apostrophe) {
                    let len = stem.len();
                    text.truncate(len);
                    break;
                }
            }
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in [Analyzer::Standard, Analyzer::English] {
            assert_eq!(a.to_string().parse::<Analyzer>().unwrap(), a);
            assert_eq!(Analyzer::from_tokenizer_name(a.tokenizer_name()), Some(a));
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{a}\""));
        }
        assert!("porter".parse::<Analyzer>().is_err());
        assert_eq!(Analyzer::default(), Analyzer::Standard);
    }

    #[test]
    fn long_words_are_split_at_255_chars() {
        let word = "é".repeat(600);
        let toks = tokenize(Analyzer::Standard, &word);
        let lens: Vec<usize> = toks.iter().map(|t| t.chars().count()).collect();
        assert_eq!(lens, vec![255, 255, 90]);
        let word = "a".repeat(255);
        assert_eq!(tokenize(Analyzer::Standard, &word), vec![word.clone()]);
    }

    #[test]
    fn possessives() {
        assert_eq!(
            tokenize(Analyzer::English, "John's dog’s it's"),
            vec!["john", "dog"]
        );
    }
}
