//! BM25 top-10 (`cargo bench -p searchd-lexical`) on a seeded 50,000-document corpus of
//! 30 words each from a Zipf-like vocabulary of 5,000 words: two-, four- and eight-term
//! queries rotating over 256 of each, with and without a predicate admitting 10% of rows.
//! (`examples/bm25_bench.rs` runs the same measurement on a real corpus against peers.)

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use searchd_lexical::{LexicalConfig, LexicalIndex, LexicalWriter};

struct Words(u64);

impl Words {
    /// A word id skewed towards small ids (the square of a uniform draw).
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        (u * u * 5000.0) as u64
    }

    fn text(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| format!("w{}", self.next()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn bm25(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut words = Words(0x9E37_79B9_7F4A_7C15);
    let mut w = LexicalWriter::create(dir.path(), &LexicalConfig::default()).unwrap();
    for row in 0..50_000u32 {
        w.add(row, &words.text(30)).unwrap();
    }
    w.finish().unwrap();
    let index = LexicalIndex::open(dir.path()).unwrap();
    let tenth = |row: u32| row % 10 == 3;
    let mut g = c.benchmark_group("bm25_50k");
    for terms in [2, 4, 8] {
        let queries: Vec<String> = (0..256).map(|_| words.text(terms)).collect();
        let mut i = 0;
        g.bench_function(format!("{terms}_terms"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(index.search(black_box(&queries[i]), 10, None).unwrap())
            })
        });
        g.bench_function(format!("{terms}_terms/allow10pct"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(
                    index
                        .search(black_box(&queries[i]), 10, Some(&tenth))
                        .unwrap(),
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bm25);
criterion_main!(benches);
