//! Times `synth::generate` for n x dim (default 1M x 384):
//! `cargo run --release -p searchd-vecio --example synth_speed -- [N] [DIM] [THREADS]`.
use std::time::Instant;

use searchd_vecio::synth::{generate, SynthParams};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let n = args.first().copied().unwrap_or(1_000_000);
    let dim = args.get(1).copied().unwrap_or(384);
    if let Some(&t) = args.get(2) {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global()
            .unwrap();
    }
    let p = SynthParams {
        n,
        dim,
        queries: 1000,
        ..SynthParams::default()
    };
    let t = Instant::now();
    let d = generate(&p, None);
    let s = t.elapsed().as_secs_f64();
    println!(
        "{n} x {dim} (+{} queries) on {} threads: {s:.2} s ({:.0} vectors/s)",
        p.queries,
        rayon::current_num_threads(),
        (n + p.queries) as f64 / s
    );
    std::hint::black_box(d);
}
