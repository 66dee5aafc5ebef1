//! Rankings equal a brute-force BM25 (same formula, same tokenizer, tantivy's fieldnorm
//! quantization) over a seeded random corpus, with and without an `allow` predicate.

use std::collections::HashMap;

use searchd_lexical::{tokenize, Analyzer, LexicalConfig, LexicalIndex, LexicalWriter};
use tantivy::fieldnorm::FieldNormReader;

/// splitmix64: small, seeded, good enough for test data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf(1) over `vocab` words.
struct Zipf {
    cdf: Vec<f64>,
}
impl Zipf {
    fn new(n: usize) -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (0..n)
            .map(|i| {
                acc += 1.0 / (i as f64 + 1.0);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }
    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

fn word(i: usize) -> String {
    // Mixed case and a digit now and then, so the analyzer matters.
    match i % 7 {
        0 => format!("W{i}ord"),
        3 => format!("term{i}"),
        _ => format!("w{i}x"),
    }
}

struct Corpus {
    texts: Vec<String>,
    queries: Vec<String>,
}

fn corpus(seed: u64) -> Corpus {
    let mut rng = Rng(seed);
    let zipf = Zipf::new(400);
    let texts = (0..500)
        .map(|d| {
            // Lengths 0..90: some docs empty, many past the 40 tokens where fieldnorms quantize.
            let len = if d % 50 == 7 { 0 } else { 1 + rng.below(90) };
            (0..len)
                .map(|_| word(zipf.sample(&mut rng)))
                .collect::<Vec<_>>()
                .join(if d % 2 == 0 { " " } else { ", " })
        })
        .collect();
    let queries = (0..50)
        .map(|q| {
            let n = 1 + rng.below(5);
            let mut words: Vec<String> = (0..n)
                .map(|_| {
                    if rng.below(3) == 0 {
                        word(rng.below(400))
                    } else {
                        word(zipf.sample(&mut rng))
                    }
                })
                .collect();
            if q % 10 == 3 {
                let w = words[0].clone();
                words.push(w.to_uppercase()); // a repeated term
            }
            words.join(" ")
        })
        .collect();
    Corpus { texts, queries }
}

struct Brute {
    docs: Vec<HashMap<String, u32>>,
    dl: Vec<f64>,
    df: HashMap<String, u64>,
    avgdl: f64,
}

impl Brute {
    fn new(texts: &[String]) -> Brute {
        let mut docs = Vec::new();
        let mut dl = Vec::new();
        let mut df: HashMap<String, u64> = HashMap::new();
        let mut total = 0u64;
        for t in texts {
            let toks = tokenize(Analyzer::Standard, t);
            total += toks.len() as u64;
            // tantivy stores the length as a one-byte fieldnorm (rounded down to its table).
            let norm = FieldNormReader::id_to_fieldnorm(FieldNormReader::fieldnorm_to_id(
                toks.len() as u32,
            ));
            dl.push(f64::from(norm));
            let mut tf: HashMap<String, u32> = HashMap::new();
            for tok in toks {
                *tf.entry(tok).or_default() += 1;
            }
            for term in tf.keys() {
                *df.entry(term.clone()).or_default() += 1;
            }
            docs.push(tf);
        }
        let avgdl = total as f64 / texts.len() as f64;
        Brute {
            docs,
            dl,
            df,
            avgdl,
        }
    }

    /// Top-k by score (sum over query tokens, repeats counted), ties by lower row.
    fn top(&self, query: &str, k: usize, allow: impl Fn(u32) -> bool) -> Vec<(u32, f64)> {
        let (k1, b) = (1.2, 0.75);
        let n = self.docs.len() as f64;
        let qtoks = tokenize(Analyzer::Standard, query);
        let mut scored: Vec<(u32, f64)> = Vec::new();
        for (row, tf) in self.docs.iter().enumerate() {
            if !allow(row as u32) {
                continue;
            }
            let mut s = 0.0;
            let mut hit = false;
            for q in &qtoks {
                if let Some(&f) = tf.get(q) {
                    hit = true;
                    let f = f64::from(f);
                    let dfq = self.df[q] as f64;
                    let idf = (1.0 + (n - dfq + 0.5) / (dfq + 0.5)).ln();
                    s +=
                        idf * (k1 + 1.0) * f / (f + k1 * (1.0 - b + b * self.dl[row] / self.avgdl));
                }
            }
            if hit {
                scored.push((row as u32, s));
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        scored
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-4 * a.abs().max(b.abs()).max(1.0)
}

fn check(idx: &LexicalIndex, brute: &Brute, q: &str, allow: Option<&(dyn Fn(u32) -> bool + Sync)>) {
    let k = 10;
    let got = idx.search(q, k, allow).unwrap();
    let all = brute.top(q, usize::MAX, |r| allow.is_none_or(|f| f(r)));
    let want = &all[..all.len().min(k)];
    assert_eq!(got.hits.len(), want.len(), "query {q:?}");
    let brute_score: HashMap<u32, f64> = all.iter().copied().collect();
    for (i, (&(row, score), &(wrow, wscore))) in got.hits.iter().zip(want).enumerate() {
        assert!(
            close(f64::from(score), wscore),
            "query {q:?} rank {i}: {score} vs {wscore}"
        );
        if let Some(f) = allow {
            assert!(f(row));
        }
        assert!(
            close(brute_score[&row], f64::from(score)),
            "query {q:?} row {row}"
        );
        // Rows must be identical unless the expected score ties (within float noise) another.
        let tied = all.iter().filter(|(_, s)| close(*s, wscore)).count() > 1;
        if !tied {
            assert_eq!(row, wrow, "query {q:?} rank {i}");
        }
    }
    let rows: Vec<u32> = got.hits.iter().map(|h| h.0).collect();
    let mut dedup = rows.clone();
    dedup.sort_unstable();
    dedup.dedup();
    assert_eq!(dedup.len(), rows.len(), "duplicate rows for {q:?}");
}

#[test]
fn ranking_equals_brute_force_bm25() {
    let c = corpus(42);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lexical");
    let mut w = LexicalWriter::create(&dir, &LexicalConfig::default()).unwrap();
    for (row, t) in c.texts.iter().enumerate() {
        w.add(row as u32, t).unwrap();
    }
    w.finish().unwrap();
    let idx = LexicalIndex::open(&dir).unwrap();
    let brute = Brute::new(&c.texts);
    let even = |r: u32| r.is_multiple_of(2);
    let sparse = |r: u32| r % 17 == 3;
    let nothing = |_: u32| false;
    for q in &c.queries {
        check(&idx, &brute, q, None);
        check(&idx, &brute, q, Some(&even));
        check(&idx, &brute, q, Some(&sparse));
        assert!(idx.search(q, 10, Some(&nothing)).unwrap().hits.is_empty());
    }
}
