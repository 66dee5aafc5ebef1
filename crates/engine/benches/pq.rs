//! Product quantization (`cargo bench -p searchd-engine --bench pq`): training the codebooks
//! (k-means per subspace, which is where `nearest` spends its time), encoding every row, and
//! the asymmetric-distance scan of a query's table over every code. Seeded 8,192 x 96 rows
//! (m = 12, 24, 48); replaces the `#[ignore]` timing tests `nearest_timing` and
//! `pq_training_timing`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use searchd_engine::pq::{Pq, PqParams};

const N: usize = 8192;
const DIM: usize = 96;

/// Deterministic values in [-1, 1) (xorshift).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn pq(c: &mut Criterion) {
    let rows = data(N * DIM, 1);
    let mut g = c.benchmark_group("pq");
    g.sample_size(10);
    for m in [12, 24, 48] {
        let params = PqParams::new(m);
        g.throughput(Throughput::Elements(N as u64));
        g.bench_with_input(BenchmarkId::new("train", m), &m, |b, _| {
            b.iter(|| Pq::train(black_box(&rows), DIM, &params).expect("train"))
        });
        let quant = Pq::train(&rows, DIM, &params).expect("train");
        g.bench_with_input(BenchmarkId::new("encode", m), &m, |b, _| {
            b.iter(|| quant.encode_all(black_box(&rows)))
        });
        let codes = quant.encode_all(&rows);
        let query = quant.prepare(&rows[..DIM]);
        g.bench_with_input(BenchmarkId::new("scan", m), &m, |b, &m| {
            b.iter(|| {
                codes
                    .chunks_exact(m)
                    .map(|c| query.ip(black_box(c)))
                    .sum::<f32>()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, pq);
criterion_main!(benches);
