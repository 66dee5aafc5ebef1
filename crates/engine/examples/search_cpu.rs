//! Thread-CPU time per query of an index at a few ef values: a tuning aid that stays
//! meaningful on a shared, loaded machine (wall-clock QPS does not).
//!
//! `cargo run --release -p searchd-engine --example search_cpu -- INDEX_DIR QUERIES.f32 DIM [EF...]`
//! where QUERIES.f32 is raw little-endian float32 rows.

use searchd_engine::{Index, LoadOptions, SearchParams};

fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let index = Index::open(args[1].as_ref(), &LoadOptions::default()).expect("index");
    let raw = std::fs::read(&args[2]).expect("queries");
    let dim: usize = args[3].parse().expect("dim");
    let q: Vec<f32> = raw
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let efs: Vec<usize> = args[4..].iter().map(|s| s.parse().unwrap()).collect();
    for ef in efs {
        let p = SearchParams::new(10, ef);
        for _ in 0..2 {
            for r in q.chunks_exact(dim) {
                std::hint::black_box(index.search(r, &p).ok());
            }
        }
        let t = thread_cpu_ns();
        let rounds = 3;
        for _ in 0..rounds {
            for r in q.chunks_exact(dim) {
                std::hint::black_box(index.search(r, &p).ok());
            }
        }
        let per = (thread_cpu_ns() - t) as f64 / (rounds * q.len() / dim) as f64 / 1000.0;
        println!("ef {ef}: {per:.1} us cpu/query");
    }
}
