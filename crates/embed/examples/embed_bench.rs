//! Times `Embedder::embed` over the first N texts of a JSONL file (`"text"` field) and
//! prints one JSON line. Used by `bench/embed_speed.py`.
//!
//! ```text
//! cargo run --release -p searchd-embed --example embed_bench -- --model DIR \
//!     --data passages.jsonl [--n 5000] [--threads 2] [--batch 32] [--max-length 128] \
//!     [--out-vectors FILE.f32] [--repeat 1]
//! ```

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

use searchd_embed::{EmbedConfig, Embedder, TextKind};

/// (name, user+system seconds) of every thread of this process, from /proc (Linux).
fn thread_cpu() -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(a), Some(b)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[a + 1..b].to_string();
        let f: Vec<&str> = stat[b + 2..].split(' ').collect();
        // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the ") ".
        let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        out.push((name, ticks / 100.0));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn cpu_total() -> f64 {
    thread_cpu().iter().map(|t| t.1).sum()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut model = None;
    let mut data = None;
    let mut out_vectors = None;
    let (mut n, mut threads, mut batch, mut max_length, mut repeat) = (5000usize, 2, 32, 128, 1);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut v = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--model" => model = Some(PathBuf::from(v()?)),
            "--data" => data = Some(PathBuf::from(v()?)),
            "--out-vectors" => out_vectors = Some(PathBuf::from(v()?)),
            "--n" => n = v()?.parse()?,
            "--threads" => threads = v()?.parse()?,
            "--batch" => batch = v()?.parse()?,
            "--max-length" => max_length = v()?.parse()?,
            "--repeat" => repeat = v()?.parse()?,
            _ => return Err(format!("unknown argument {a}").into()),
        }
    }
    let model = model.ok_or("--model DIR is required")?;
    let data = data.ok_or("--data FILE.jsonl is required")?;
    let mut texts = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(&data)?).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        texts.push(
            v["text"]
                .as_str()
                .ok_or("line without \"text\"")?
                .to_string(),
        );
        if texts.len() >= n {
            break;
        }
    }
    let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
    let t0 = Instant::now();
    let e = Embedder::load(
        &model,
        &EmbedConfig {
            threads,
            max_length: Some(max_length),
            batch_size: batch,
        },
    )?;
    let load_s = t0.elapsed().as_secs_f64();
    e.embed(&refs[..refs.len().min(64)], TextKind::Passage)?;
    let cpu0 = cpu_total();
    let mut best = f64::INFINITY;
    let mut all = Vec::new();
    let mut out = None;
    for _ in 0..repeat {
        let t = Instant::now();
        let o = e.embed(&refs, TextKind::Passage)?;
        let s = t.elapsed().as_secs_f64();
        all.push(s);
        best = best.min(s);
        out = Some(o);
    }
    let cpu_s = cpu_total() - cpu0;
    let wall: f64 = all.iter().sum();
    let out = out.ok_or("--repeat must be >= 1")?;
    if let Some(p) = out_vectors {
        let mut f = std::io::BufWriter::new(std::fs::File::create(p)?);
        for x in &out.vectors {
            f.write_all(&x.to_le_bytes())?;
        }
    }
    let j = serde_json::json!({
        "texts": refs.len(),
        "seconds": best,
        "all_seconds": all,
        "passages_per_s": refs.len() as f64 / best,
        "tokens": out.tokens,
        "truncated": out.truncated.iter().filter(|&&t| t).count(),
        "threads": e.threads(),
        "batch": batch,
        "max_length": e.info().max_length,
        "load_seconds": load_s,
        "cpu_seconds": cpu_s,
        "cpu_seconds_per_wall_second": cpu_s / wall,
        "thread_cpu_seconds": thread_cpu().into_iter().map(|(n, c)| serde_json::json!([n, c])).collect::<Vec<_>>(),
        "model": e.info().name,
        "checksum": e.info().checksum,
    });
    println!("{j}");
    Ok(())
}
