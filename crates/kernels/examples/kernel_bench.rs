//! Timing of every kernel path available on this CPU (not a test; run it in release):
//!
//! ```text
//! cargo run --release -p searchd-kernels --example kernel_bench [-- NQ NB DIM]
//! ```
//!
//! Prints, per path: ns per `dot` / `l2sq` call (operands hot in L1) for dims 384, 50, 100,
//! 128, 768, and `dot_block` / `l2sq_block` GFLOP/s on NQ x NB x DIM (default
//! 2000 x 50000 x 384), single thread.
//!
//! Times are the thread's CPU time where Linux exposes it (`/proc/thread-self/schedstat`),
//! so that other processes competing for the cores do not inflate them; wall-clock
//! elsewhere. Each figure is the best of a few runs.

use searchd_kernels::Backend;
use std::hint::black_box;
use std::time::Instant;

/// Nanoseconds of CPU time this thread has used (or wall-clock time since the first call,
/// where schedstat is not available). schedstat advances in scheduler ticks, so only
/// intervals of tens of milliseconds or more are measured accurately.
fn now_ns() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or_else(|| start.elapsed().as_nanos() as f64)
}

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

/// Best-of-3 ns per call of `f` on pairs drawn from a pool that fits in L1 (the kernel's own
/// speed, as when a query meets its hottest candidates).
fn ns_per_pair(dim: usize, f: impl Fn(&[f32], &[f32]) -> f32) -> f64 {
    let pool = (16 * 1024 / (8 * dim)).clamp(2, 64);
    let a = data(pool * dim, 1);
    let b = data(pool * dim, 2);
    let rounds = (60_000_000 / (dim * pool * pool)).max(10);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = now_ns();
        let mut s = 0.0f32;
        for _ in 0..rounds {
            for qa in a.chunks_exact(dim) {
                for xb in b.chunks_exact(dim) {
                    s += f(black_box(qa), black_box(xb));
                }
            }
        }
        black_box(s);
        best = best.min((now_ns() - t) / (rounds * pool * pool) as f64);
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
        "active implementation: {}; available: {:?}",
        searchd_kernels::implementation(),
        Backend::available()
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
    );

    for be in Backend::available() {
        let mut line = format!("{:>9}: ns/dot", be.name());
        for d in [384, 50, 100, 128, 768] {
            line += &format!(" d{d}={:.1}", ns_per_pair(d, |a, b| be.dot(a, b)));
        }
        line += &format!(
            " | ns/l2sq d384={:.1}",
            ns_per_pair(384, |a, b| be.l2sq(a, b))
        );
        println!("{line}");
    }

    let q = data(nq * dim, 3);
    let b = data(nb * dim, 4);
    let mut out = vec![0.0f32; nq * nb];
    for be in Backend::available() {
        // The scalar path is several times slower; time a slice of the queries.
        let nq_run = if be.name() == "scalar" {
            nq.min(256)
        } else {
            nq
        };
        let flops = 2.0 * nq_run as f64 * nb as f64 * dim as f64;
        let mut best = f64::INFINITY;
        for _ in 0..2 {
            let t = now_ns();
            be.dot_block(
                &q[..nq_run * dim],
                nq_run,
                &b,
                nb,
                dim,
                &mut out[..nq_run * nb],
            );
            best = best.min(now_ns() - t);
        }
        black_box(&out);
        println!(
            "{:>9}: dot_block  {nq_run}x{nb}x{dim}: {:.3} s, {:.1} GFLOP/s",
            be.name(),
            best * 1e-9,
            flops / best
        );
        // l2sq_block: 3 flops per term (sub, mul, add); reported as 2 for comparability.
        let nq_l2 = nq_run.min(256);
        let t = now_ns();
        be.l2sq_block(
            &q[..nq_l2 * dim],
            nq_l2,
            &b,
            nb,
            dim,
            &mut out[..nq_l2 * nb],
        );
        let s = now_ns() - t;
        println!(
            "{:>9}: l2sq_block {nq_l2}x{nb}x{dim}: {:.3} s, {:.1} GFLOP/s (2 flops/term)",
            be.name(),
            s * 1e-9,
            2.0 * nq_l2 as f64 * nb as f64 * dim as f64 / s
        );
    }
    // Small batches (server-style exact search) on the active path.
    let be = Backend::active();
    for small in [1usize, 8, 64] {
        let flops = 2.0 * small as f64 * nb as f64 * dim as f64;
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = now_ns();
            be.dot_block(
                &q[..small * dim],
                small,
                &b,
                nb,
                dim,
                &mut out[..small * nb],
            );
            best = best.min(now_ns() - t);
        }
        println!(
            "{:>9}: dot_block  {small}x{nb}x{dim}: {:.2} ms, {:.1} GFLOP/s",
            be.name(),
            best * 1e-6,
            flops / best
        );
    }
}
