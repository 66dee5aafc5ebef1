//! Timing of every kernel path available on this CPU (not a test; run it in release):
//!
//! ```text
//! cargo run --release -p searchd-kernels --example kernel_bench [-- NQ NB DIM]
//! ```
//!
//! Prints ns per `dot`/`l2sq` call at dim 384 (a few other dims too) and `dot_block`
//! GFLOP/s on NQ x NB x DIM (default 2000 x 50000 x 384), single thread, per path.

use searchd_kernels::Backend;
use std::hint::black_box;
use std::time::Instant;

/// Deterministic pseudo-random data in [-1, 1) (xorshift; no dependency needed).
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

/// ns per call of `f` over a pool of vectors (pool fits in L1/L2, like HNSW's hot set).
fn ns_per_pair(dim: usize, f: impl Fn(&[f32], &[f32]) -> f32) -> f64 {
    let pool = 64;
    let a = data(pool * dim, 1);
    let b = data(pool * dim, 2);
    let iters = (40_000_000 / dim.max(1)).max(1000);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        let mut s = 0.0f32;
        for it in 0..iters {
            let i = (it * 7) % pool;
            let j = (it * 13 + 5) % pool;
            s += f(
                black_box(&a[i * dim..(i + 1) * dim]),
                black_box(&b[j * dim..(j + 1) * dim]),
            );
        }
        black_box(s);
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (nq, nb, dim) = match args[..] {
        [nq, nb, dim] => (nq, nb, dim),
        _ => (2000, 50_000, 384),
    };
    println!(
        "active implementation: {}",
        searchd_kernels::implementation()
    );
    let dims = [384, 50, 100, 128, 768];

    for be in Backend::available() {
        let mut line = format!("{:>9}: ns/dot", be.name());
        for &d in &dims {
            line += &format!(" d{d}={:.2}", ns_per_pair(d, |a, b| be.dot(a, b)));
        }
        line += &format!(
            " | ns/l2sq d384={:.2}",
            ns_per_pair(384, |a, b| be.l2sq(a, b))
        );
        println!("{line}");
    }

    let q = data(nq * dim, 3);
    let b = data(nb * dim, 4);
    let mut out = vec![0.0f32; nq * nb];
    let flops = 2.0 * nq as f64 * nb as f64 * dim as f64;
    for be in Backend::available() {
        // The scalar path is ~10x slower; time a slice of the queries so the run stays short.
        let nq_run = if be.name() == "scalar" {
            nq.min(200)
        } else {
            nq
        };
        let reps = if be.name() == "scalar" { 1 } else { 2 };
        let mut best = f64::INFINITY;
        for _ in 0..reps {
            let t = Instant::now();
            be.dot_block(
                &q[..nq_run * dim],
                nq_run,
                &b,
                nb,
                dim,
                &mut out[..nq_run * nb],
            );
            best = best.min(t.elapsed().as_secs_f64());
        }
        black_box(&out);
        let gflops = flops * (nq_run as f64 / nq as f64) / best / 1e9;
        println!(
            "{:>9}: dot_block {nq_run}x{nb}x{dim}: {:.3} s, {gflops:.1} GFLOP/s",
            be.name(),
            best
        );
        let t = Instant::now();
        let nq_l2 = nq_run.min(200);
        be.l2sq_block(
            &q[..nq_l2 * dim],
            nq_l2,
            &b,
            nb,
            dim,
            &mut out[..nq_l2 * nb],
        );
        let s = t.elapsed().as_secs_f64();
        println!(
            "{:>9}: l2sq_block {nq_l2}x{nb}x{dim}: {:.3} s, {:.1} GFLOP/s (3 flop/term counted as 2)",
            be.name(),
            s,
            2.0 * nq_l2 as f64 * nb as f64 * dim as f64 / s / 1e9
        );
    }
}
