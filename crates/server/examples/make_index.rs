//! A synthetic corpus and its HNSW index, without the `searchd` binary (for benchmarks that
//! build only this crate, e.g. `bench/trickle_abuse.py --examples target/debug/examples`):
//!
//! ```text
//! cargo run --release -p searchd-server --example make_index -- OUT_DIR [N] [DIM]
//! ```
//! Writes `OUT_DIR/base.npy`, `OUT_DIR/queries.npy` (1,000 rows) and `OUT_DIR/idx`.

use searchd_engine::{build_index, BuildConfig, IndexKind, Metric};
use searchd_vecio::synth::{generate, SynthParams};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(out) = args.get(1).map(std::path::PathBuf::from) else {
        eprintln!("usage: make_index OUT_DIR [N] [DIM]");
        std::process::exit(2);
    };
    let n = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let dim = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(128);
    let p = SynthParams {
        n,
        dim,
        queries: 1000,
        ..SynthParams::default()
    };
    let d = generate(&p, None);
    std::fs::create_dir_all(&out).unwrap();
    searchd_vecio::write_vectors(&out.join("base.npy"), &d.base, n, dim).unwrap();
    searchd_vecio::write_vectors(&out.join("queries.npy"), &d.queries, 1000, dim).unwrap();
    let cfg = BuildConfig {
        kind: IndexKind::Hnsw,
        metric: Metric::Cosine,
        ..BuildConfig::default()
    };
    build_index(&out.join("idx"), &d.base, dim, &cfg, &|_, _| {}).unwrap();
}
