//! Distance kernels, per backend this CPU has (`cargo bench -p searchd-kernels`): one
//! `dot` / `l2sq` call on operands hot in L1 at the dimensions searchd serves, and the
//! blocked `dot_block` (queries x rows, as exact search and ground truth run it), and the PQ
//! table lookup `pq_adc`, and the 4-bit code kernels `dot_u4_i16` / `dot_u4_i8` (RaBitQ
//! codes of 4,096 rows).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use searchd_kernels::Backend;

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

fn pairs(c: &mut Criterion) {
    let mut g = c.benchmark_group("pair");
    for dim in [50, 128, 384, 768] {
        let a = data(dim, 1);
        let b = data(dim, 2);
        g.throughput(Throughput::Elements(dim as u64));
        for be in Backend::available() {
            g.bench_with_input(
                BenchmarkId::new(format!("dot/{}", be.name()), dim),
                &dim,
                |bn, _| bn.iter(|| be.dot(black_box(&a), black_box(&b))),
            );
            g.bench_with_input(
                BenchmarkId::new(format!("l2sq/{}", be.name()), dim),
                &dim,
                |bn, _| bn.iter(|| be.l2sq(black_box(&a), black_box(&b))),
            );
        }
    }
    g.finish();
}

fn blocks(c: &mut Criterion) {
    let (nq, nb, dim) = (64, 4096, 384);
    let q = data(nq * dim, 3);
    let b = data(nb * dim, 4);
    let mut out = vec![0.0f32; nq * nb];
    let mut g = c.benchmark_group("dot_block");
    g.throughput(Throughput::Elements((2 * nq * nb * dim) as u64));
    g.sample_size(20);
    for be in Backend::available() {
        g.bench_function(format!("{}/{nq}x{nb}x{dim}", be.name()), |bn| {
            bn.iter(|| be.dot_block(black_box(&q), nq, black_box(&b), nb, dim, &mut out))
        });
    }
    g.finish();
}

/// PQ asymmetric distance: one code of `m` bytes against a query's `m x 256` table, per
/// backend, over 4,096 codes (the IVF-PQ scan and PQ-coded HNSW walks run this).
fn pq_adc(c: &mut Criterion) {
    let rows = 4096;
    let mut g = c.benchmark_group("pq_adc");
    g.throughput(Throughput::Elements(rows as u64));
    for m in [16, 32, 48, 64] {
        let lut = data(m * 256, 5);
        let codes: Vec<u8> = data(m * rows, 6)
            .iter()
            .map(|x| ((x + 1.0) * 127.9) as u8)
            .collect();
        for be in Backend::available() {
            g.bench_with_input(BenchmarkId::new(be.name(), m), &m, |bn, &m| {
                bn.iter(|| {
                    codes
                        .chunks_exact(m)
                        .map(|c| be.pq_adc(black_box(&lut), black_box(c)))
                        .sum::<f32>()
                })
            });
        }
    }
    g.finish();
}

/// 4-bit codes (RaBitQ-style rows of `dim / 2` bytes) against 16-bit and 8-bit weights.
fn u4(c: &mut Criterion) {
    let rows = 4096;
    let mut g = c.benchmark_group("u4");
    g.throughput(Throughput::Elements(rows as u64));
    for dim in [128usize, 384, 768] {
        let bytes = dim / 2;
        let codes: Vec<u8> = data(bytes * rows, 7)
            .iter()
            .map(|x| ((x + 1.0) * 127.9) as u8)
            .collect();
        let w = data(dim, 8);
        let w16: Vec<i16> = w.iter().map(|x| (x * 32767.0) as i16).collect();
        let w8: Vec<i8> = w.iter().map(|x| (x * 127.0) as i8).collect();
        for be in Backend::available() {
            g.bench_with_input(
                BenchmarkId::new(format!("i16/{}", be.name()), dim),
                &dim,
                |bn, _| {
                    bn.iter(|| {
                        codes
                            .chunks_exact(bytes)
                            .map(|c| be.dot_u4_i16(black_box(c), black_box(&w16)))
                            .fold(0i32, i32::wrapping_add)
                    })
                },
            );
            g.bench_with_input(
                BenchmarkId::new(format!("i8/{}", be.name()), dim),
                &dim,
                |bn, _| {
                    bn.iter(|| {
                        codes
                            .chunks_exact(bytes)
                            .map(|c| be.dot_u4_i8(black_box(c), black_box(&w8)))
                            .fold(0i32, i32::wrapping_add)
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group!(benches, pairs, blocks, pq_adc, u4);
criterion_main!(benches);
