//! Times `read_vectors` on a file: `cargo run --release -p searchd-vecio --example read_speed -- FILE`.
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: read_speed FILE");
    for _ in 0..3 {
        let t = Instant::now();
        let v = searchd_vecio::read_vectors(std::path::Path::new(&path)).unwrap();
        println!(
            "{} x {} (mmap: {}) in {:.1} ms",
            v.n(),
            v.dim(),
            v.is_mmap(),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}
