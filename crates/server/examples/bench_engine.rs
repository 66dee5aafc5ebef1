//! The engine's in-process speed, for comparison with the server over HTTP:
//! builds an HNSW index from a base file if DIR does not exist yet, then measures
//! single-thread and all-thread `Index::search` throughput on the query file (the same
//! call the server's pool makes, query preparation included) and recall@10 against exact
//! search.
//!
//! ```text
//! cargo run --release -p searchd-server --example bench_engine -- \
//!   BASE.npy QUERIES.npy INDEX_DIR [EF=64] [THREADS=cores] [SECONDS=5]
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use searchd_engine::{build_index, BuildConfig, Index, LoadOptions, SearchParams};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 3 {
        eprintln!("usage: bench_engine BASE QUERIES INDEX_DIR [EF] [THREADS] [SECONDS]");
        std::process::exit(2);
    }
    let ef: usize = a.get(3).map_or(64, |s| s.parse().unwrap());
    let threads: usize = a
        .get(4)
        .map_or_else(searchd_server::available_cores, |s| s.parse().unwrap());
    let secs: f64 = a.get(5).map_or(5.0, |s| s.parse().unwrap());
    let dir = Path::new(&a[2]);
    if !dir.exists() {
        let base = searchd_vecio::read_vectors(Path::new(&a[0])).unwrap();
        let t = Instant::now();
        build_index(
            dir,
            base.as_slice(),
            base.dim(),
            &BuildConfig::default(),
            &|_, _| {},
        )
        .unwrap();
        eprintln!(
            "built {} x {} in {:.1} s",
            base.n(),
            base.dim(),
            t.elapsed().as_secs_f64()
        );
    }
    let opts = LoadOptions {
        populate: true,
        ..LoadOptions::default()
    };
    let index = Index::open(dir, &opts).unwrap();
    let queries = searchd_vecio::read_vectors(Path::new(&a[1])).unwrap();
    let nq = queries.n();
    let params = SearchParams::new(10, ef);

    // recall@10 on the first 300 queries, against the engine's exact scan
    let sample = nq.min(300);
    let mut hit = 0;
    for i in 0..sample {
        let truth = index.exact_search(queries.row(i), 10).unwrap();
        let got = index.search(queries.row(i), &params).unwrap();
        hit += truth
            .iter()
            .filter(|t| got.iter().any(|g| g.id == t.id))
            .count();
    }
    let recall = hit as f64 / (sample * 10) as f64;

    // single thread
    let mut lat = Vec::new();
    let t0 = Instant::now();
    let mut i = 0;
    while t0.elapsed().as_secs_f64() < secs.min(3.0) {
        let t = Instant::now();
        std::hint::black_box(index.search(queries.row(i % nq), &params).unwrap());
        lat.push(t.elapsed());
        i += 1;
    }
    let qps1 = i as f64 / t0.elapsed().as_secs_f64();
    lat.sort();
    let pct =
        |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6;

    // all threads, closed loop (with the process CPU time it took, which other jobs on a
    // shared machine do not disturb)
    let cpu0 = searchd_server::process_cpu_seconds();
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let t1 = Instant::now();
    std::thread::scope(|s| {
        for w in 0..threads {
            let (index, queries, done, stop) = (&index, &queries, &done, &stop);
            s.spawn(move || {
                let mut j = w * 7919;
                while !stop.load(Ordering::Relaxed) {
                    std::hint::black_box(index.search(queries.row(j % nq), &params).unwrap());
                    j += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    let qps_all = done.load(Ordering::Relaxed) as f64 / t1.elapsed().as_secs_f64();
    let cpu_us = (searchd_server::process_cpu_seconds() - cpu0) * 1e6
        / done.load(Ordering::Relaxed).max(1) as f64;
    println!(
        "{{\"ef\": {ef}, \"recall_at_10\": {recall:.4}, \"qps_1thread\": {qps1:.0}, \"p50_us\": {:.0}, \"p99_us\": {:.0}, \"threads\": {threads}, \"qps_all_threads\": {qps_all:.0}, \"cpu_us_per_query\": {cpu_us:.1}}}",
        pct(0.5),
        pct(0.99)
    );
}
