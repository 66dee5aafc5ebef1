//! HNSW search (`cargo bench -p searchd-engine`): one query at ef 64 on a seeded 20,000 x 96
//! index, float32 and SQ8 codes, unfiltered and with a 10% allow-list (the planner's
//! choice). Rotates over 256 queries so caches see a realistic mix.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use searchd_engine::{
    build_index, roaring::RoaringBitmap, BuildConfig, Index, LoadOptions, Quantization,
    SearchParams,
};

const N: usize = 20_000;
const DIM: usize = 96;

/// Clustered data (64 centres plus noise), deterministic (xorshift).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let centres: Vec<f32> = (0..64 * DIM).map(|_| next()).collect();
    let mut out = Vec::with_capacity(n * DIM);
    for i in 0..n {
        let c = &centres[(i % 64) * DIM..(i % 64 + 1) * DIM];
        out.extend(c.iter().map(|x| x + 0.3 * next()));
    }
    out
}

fn open(dir: &std::path::Path, base: &[f32], quantization: Quantization) -> Index {
    let cfg = BuildConfig {
        quantization,
        threads: 2,
        ..BuildConfig::default()
    };
    build_index(dir, base, DIM, &cfg, &|_, _| {}).expect("build");
    Index::open(dir, &LoadOptions::default()).expect("open")
}

fn search(c: &mut Criterion) {
    let base = data(N, 1);
    let queries = data(256, 2);
    let tmp = tempfile::tempdir().unwrap();
    let allow: RoaringBitmap = (0..N as u32).filter(|i| i % 10 == 3).collect();
    let mut g = c.benchmark_group("hnsw");
    for (name, q) in [("f32", Quantization::None), ("sq8", Quantization::Sq8)] {
        let index = open(&tmp.path().join(name), &base, q);
        let mut i = 0;
        g.bench_function(format!("{name}/ef64"), |b| {
            let p = SearchParams::new(10, 64);
            b.iter(|| {
                i = (i + 1) % 256;
                let q = &queries[i * DIM..(i + 1) * DIM];
                black_box(index.search(black_box(q), &p).unwrap())
            })
        });
        g.bench_function(format!("{name}/ef64/allow10pct"), |b| {
            let p = SearchParams {
                allow: Some(&allow),
                ..SearchParams::new(10, 64)
            };
            b.iter(|| {
                i = (i + 1) % 256;
                let q = &queries[i * DIM..(i + 1) * DIM];
                black_box(index.search(black_box(q), &p).unwrap())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, search);
criterion_main!(benches);
