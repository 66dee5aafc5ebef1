//! The embedder (`cargo bench -p searchd-embed`): one query (batch of 1, 10 words) and a
//! batch of 32 passages of 60 words, on one thread and on every core.
//!
//! The model: `SEARCHD_BENCH_MODEL=DIR` (a sentence-transformers directory, e.g. the
//! all-MiniLM-L6-v2 `.ci/run` installs) when set; otherwise a random-weight BERT of
//! MiniLM-L6's shape (384 wide, 6 layers, 12 heads, 1,536 intermediate) written by
//! `tests/support/`, whose texts use only its vocabulary (one token a word), so the
//! forward pass costs what the real model's does on texts of that many tokens.
//! (`bench/embed_speed.py` measures the real model on real passages against peers.)

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use searchd_embed::{EmbedConfig, Embedder, TextKind};

#[path = "../tests/support/mod.rs"]
mod support;

use support::{random_weights, write_model, Opts, Shape, TmpDir, VOCAB};

/// Seeded texts of `words` words from the model's vocabulary (no special tokens).
fn texts(n: usize, words: usize, seed: u64) -> Vec<String> {
    let plain: Vec<&str> = VOCAB
        .iter()
        .copied()
        .filter(|w| !w.starts_with('[') && !w.starts_with("##"))
        .collect();
    let mut r = support::Rng(seed);
    (0..n)
        .map(|_| {
            (0..words)
                .map(|_| {
                    plain[((r.next() + 1.0) * 0.5 * plain.len() as f32) as usize % plain.len()]
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn embed(c: &mut Criterion) {
    let generated;
    let dir: PathBuf = match std::env::var_os("SEARCHD_BENCH_MODEL").filter(|p| !p.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            generated = TmpDir::new("bench-minilm");
            let opts = Opts {
                max_seq: 256,
                ..Opts::default()
            };
            write_model(
                &generated.0,
                &random_weights(7, &Shape::MINILM_L6),
                &opts,
                &Shape::MINILM_L6,
            );
            generated.0.clone()
        }
    };
    let queries = texts(64, 10, 0x9E37_79B9_7F4A_7C15);
    let passages = texts(256, 60, 0xD1B5_4A32_D192_ED03);
    let mut g = c.benchmark_group("embed_minilm_l6");
    g.sample_size(20);
    for threads in [1, 0] {
        let label = if threads == 0 {
            "all_cores".to_string()
        } else {
            format!("{threads}_thread")
        };
        let cfg = EmbedConfig {
            threads,
            ..EmbedConfig::default()
        };
        let e = Embedder::load(&dir, &cfg).expect("the bench model loads");
        let mut i = 0;
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("query_10_words/{label}"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                black_box(e.embed(&[queries[i].as_str()], TextKind::Query).unwrap())
            })
        });
        let mut j = 0;
        g.throughput(Throughput::Elements(32));
        g.bench_function(format!("passages_32x60_words/{label}"), |b| {
            b.iter(|| {
                j = (j + 32) % passages.len();
                let batch: Vec<&str> = passages[j..j + 32].iter().map(String::as_str).collect();
                black_box(e.embed(&batch, TextKind::Passage).unwrap())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, embed);
criterion_main!(benches);
