//! Latency of `CrossEncoder::score(query, top N passages)` on real GCIDE texts, with a
//! cross-encoder of exactly the reranker's shape built from an embedding model. Used by
//! `bench/rerank_speed.py`; prints one JSON line.
//!
//! ```text
//! cargo run --release -p searchd-embed --example rerank_bench -- \
//!     --model "$(cat .ci/.model-dir)" --data ../shared/datasets/dev-gcide-50k \
//!     [--threads 2,1] [--ns 10,20,50,100] [--batch 32] [--max-length 512] \
//!     [--seconds 20] [--min-samples 30] [--max-samples 400] [--warmup 3]
//!
//! Calls rotate over the (N, threads) cells; sampling stops after `--max-samples`
//! rounds, or once there are `--min-samples` rounds and `--seconds` x cells have passed.
//! ```
//!
//! The model directory (an all-MiniLM-L6-v2 sentence-transformers dir) gives the encoder
//! weights and tokenizer; a temporary `BertForSequenceClassification` directory is
//! written next to them with its pooler (or a seeded random one when the file has none)
//! and a seeded random one-label classifier. cross-encoder/ms-marco-MiniLM-L-6-v2 has the
//! same shape (6 layers, hidden 384, 12 heads, intermediate 1536, vocab 30522, pooler +
//! 1-label classifier), so this costs what the real reranker costs; the scores themselves
//! are meaningless.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use safetensors::tensor::{Dtype, TensorView};
use searchd_embed::{CrossEncoder, EmbedConfig};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Deterministic xorshift values in [-scale, scale).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn bytes(&mut self, n: usize, scale: f32) -> Vec<u8> {
        (0..n)
            .flat_map(|_| (self.next() * scale).to_le_bytes())
            .collect()
    }
}

/// Writes the cross-encoder directory `out` from the embedding model `model`.
/// Returns whether the pooler came from the file.
fn build_cross_dir(model: &Path, out: &Path) -> Res<bool> {
    std::fs::create_dir_all(out)?;
    let bytes = std::fs::read(model.join("model.safetensors"))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut has_pooler = false;
    let mut hidden = 0;
    for (name, t) in st.tensors() {
        let name = if name.starts_with("bert.") {
            name
        } else {
            format!("bert.{name}")
        };
        has_pooler |= name == "bert.pooler.dense.weight";
        if name == "bert.embeddings.word_embeddings.weight" {
            hidden = t.shape()[1];
        }
        owned.push((name, t.dtype(), t.shape().to_vec(), t.data().to_vec()));
    }
    if hidden == 0 {
        return Err("no embeddings.word_embeddings.weight in model.safetensors".into());
    }
    let mut rng = Rng(0x5eed_cafe_f00d_1234);
    let h = hidden;
    if !has_pooler {
        let s = 1.0 / (h as f32).sqrt();
        owned.push((
            "bert.pooler.dense.weight".into(),
            Dtype::F32,
            vec![h, h],
            rng.bytes(h * h, s),
        ));
        owned.push((
            "bert.pooler.dense.bias".into(),
            Dtype::F32,
            vec![h],
            rng.bytes(h, 0.02),
        ));
    }
    owned.push((
        "classifier.weight".into(),
        Dtype::F32,
        vec![1, h],
        rng.bytes(h, 1.0 / (h as f32).sqrt()),
    ));
    owned.push((
        "classifier.bias".into(),
        Dtype::F32,
        vec![1],
        rng.bytes(1, 0.1),
    ));
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(n, d, s, b)| Ok((n.clone(), TensorView::new(*d, s.clone(), b)?)))
        .collect::<Result<_, safetensors::SafeTensorError>>()?;
    std::fs::write(
        out.join("model.safetensors"),
        safetensors::serialize(views, None)?,
    )?;

    let mut cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model.join("config.json"))?)?;
    let orig = cfg["_name_or_path"].as_str().unwrap_or("model").to_string();
    cfg["_name_or_path"] = format!("rerank-bench ({orig} encoder, random classifier)").into();
    cfg["architectures"] = serde_json::json!(["BertForSequenceClassification"]);
    cfg["id2label"] = serde_json::json!({"0": "LABEL_0"});
    cfg["label2id"] = serde_json::json!({"LABEL_0": 0});
    cfg["sbert_ce_default_activation_function"] = "torch.nn.modules.linear.Identity".into();
    std::fs::write(out.join("config.json"), serde_json::to_vec_pretty(&cfg)?)?;
    std::fs::copy(model.join("tokenizer.json"), out.join("tokenizer.json"))?;
    Ok(has_pooler)
}

/// User+system CPU seconds of all threads of this process, from /proc (Linux).
fn cpu_total() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut total = 0.0;
    for t in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let Some(b) = stat.rfind(')') else { continue };
        let f: Vec<&str> = stat[b + 2..].split(' ').collect();
        total += f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    }
    total / 100.0
}

fn list(s: &str) -> Res<Vec<usize>> {
    Ok(s.split(',')
        .map(|x| x.trim().parse())
        .collect::<Result<_, _>>()?)
}

/// Nearest-rank percentile of sorted `v`.
fn pct(v: &[f64], p: f64) -> f64 {
    let k = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[k.clamp(1, v.len()) - 1]
}

struct Query {
    text: String,
    relevant: Vec<usize>,
}

fn main() -> Res<()> {
    let mut model = None;
    let mut data = None;
    let mut threads = vec![2, 1];
    let mut ns = vec![10, 20, 50, 100];
    let (mut batch, mut max_length) = (32usize, None);
    let (mut seconds, mut min_samples, mut max_samples, mut warmup) = (20.0f64, 30, 400, 3);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut v = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--model" => model = Some(PathBuf::from(v()?)),
            "--data" => data = Some(PathBuf::from(v()?)),
            "--threads" => threads = list(&v()?)?,
            "--ns" => ns = list(&v()?)?,
            "--batch" => batch = v()?.parse()?,
            "--max-length" => max_length = Some(v()?.parse()?),
            "--seconds" => seconds = v()?.parse()?,
            "--min-samples" => min_samples = v()?.parse()?,
            "--max-samples" => max_samples = v()?.parse()?,
            "--warmup" => warmup = v()?.parse()?,
            _ => return Err(format!("unknown argument {a}").into()),
        }
    }
    let model = model.ok_or("--model DIR (an all-MiniLM-L6-v2 model dir) is required")?;
    let data = data.ok_or("--data DIR (dev-gcide-50k) is required")?;

    let mut passages = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(data.join("passages.jsonl"))?).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        passages.push(
            v["text"]
                .as_str()
                .ok_or("passage without text")?
                .to_string(),
        );
    }
    let mut queries = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(data.join("queries.jsonl"))?).lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        queries.push(Query {
            text: v["query"].as_str().ok_or("query without text")?.to_string(),
            relevant: v["relevant"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_u64().map(|x| x as usize))
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    let max_n = ns.iter().copied().max().unwrap_or(1);
    if passages.len() <= max_n || queries.is_empty() {
        return Err("data set too small".into());
    }
    // Sample k: query k (rotating), its judged passages first, then a window of other
    // passages at a rotating offset, N in all: a realistic first-stage top-N mix.
    let pick = |k: usize, n: usize| -> (&str, Vec<&str>) {
        let q = &queries[k % queries.len()];
        let mut ids: Vec<usize> = q
            .relevant
            .iter()
            .copied()
            .filter(|&i| i < passages.len())
            .take(n)
            .collect();
        let mut off = (k * 7919 + 13) % (passages.len() - n);
        while ids.len() < n {
            if !ids.contains(&off) {
                ids.push(off);
            }
            off += 1;
        }
        (
            q.text.as_str(),
            ids.iter().map(|&i| passages[i].as_str()).collect(),
        )
    };

    let tmp = std::env::temp_dir().join(format!("searchd-rerank-bench-{}", std::process::id()));
    let pooler_from_file = build_cross_dir(&model, &tmp)?;

    // Tokens per pair (after truncation to the window) over 400 samples of 10 pairs.
    let t0 = Instant::now();
    let probe = CrossEncoder::load(
        &tmp,
        &EmbedConfig {
            threads: 1,
            max_length,
            batch_size: batch,
        },
    )?;
    let load_s = t0.elapsed().as_secs_f64();
    let window = probe.info().max_length;
    let info = probe.info().clone();
    drop(probe);
    let mut tok = tokenizers::Tokenizer::from_file(tmp.join("tokenizer.json"))?;
    tok.with_padding(None);
    tok.with_truncation(None)?;
    let (mut ntok, mut npairs, mut ntrunc) = (0usize, 0usize, 0usize);
    for k in 0..400 {
        let (q, ps) = pick(k, 10);
        for p in ps {
            let len = tok.encode_fast((q, p), true)?.get_ids().len();
            ntok += len.min(window);
            ntrunc += usize::from(len > window);
            npairs += 1;
        }
    }

    // One encoder per thread count, loaded up front.
    let encoders = threads
        .iter()
        .map(|&t| {
            CrossEncoder::load(
                &tmp,
                &EmbedConfig {
                    threads: t,
                    max_length,
                    batch_size: batch,
                },
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Cells (N, threads) are interleaved call by call: every round makes one call per
    // cell, so load from other jobs on the machine is spread over all cells alike.
    let cells: Vec<(usize, usize)> = ns
        .iter()
        .flat_map(|&n| (0..encoders.len()).map(move |e| (n, e)))
        .collect();
    let mut k = 0usize;
    for _ in 0..warmup {
        for &(n, e) in &cells {
            let (q, ps) = pick(k, n);
            encoders[e].score(q, &ps)?;
            k += 1;
        }
    }
    let mut lat: Vec<Vec<f64>> = vec![Vec::new(); cells.len()];
    let mut cpu: Vec<f64> = vec![0.0; cells.len()];
    let budget = seconds * cells.len() as f64;
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < max_samples && (rounds < min_samples || start.elapsed().as_secs_f64() < budget) {
        for (c, &(n, e)) in cells.iter().enumerate() {
            let (q, ps) = pick(k, n);
            let cpu0 = cpu_total();
            let t1 = Instant::now();
            let s = encoders[e].score(q, &ps)?;
            lat[c].push(t1.elapsed().as_secs_f64() * 1e3);
            cpu[c] += cpu_total() - cpu0;
            assert_eq!(s.len(), n);
            k += 1;
        }
        rounds += 1;
    }
    let mut runs = Vec::new();
    for (c, &(n, e)) in cells.iter().enumerate() {
        let lat = &mut lat[c];
        let busy: f64 = lat.iter().sum::<f64>() / 1e3;
        lat.sort_by(|a, b| a.total_cmp(b));
        let mean = lat.iter().sum::<f64>() / lat.len() as f64;
        let r = serde_json::json!({
            "threads": encoders[e].threads(), "n": n, "samples": lat.len(),
            "p50_ms": pct(lat, 50.0), "p90_ms": pct(lat, 90.0), "p99_ms": pct(lat, 99.0),
            "mean_ms": mean, "min_ms": lat[0], "max_ms": lat[lat.len() - 1],
            "pairs_per_s": (n * lat.len()) as f64 / busy,
            "cpu_seconds_per_wall_second": cpu[c] / busy,
        });
        eprintln!("{r}");
        runs.push(r);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    println!(
        "{}",
        serde_json::json!({
            "model": {"name": info.name, "checksum": info.checksum, "window": window,
                "labels": info.labels, "source_dir": model, "pooler_from_file": pooler_from_file},
            "batch": batch, "warmup": warmup, "seconds_per_n": seconds,
            "min_samples": min_samples, "max_samples": max_samples,
            "load_seconds": load_s,
            "tokens_per_pair": ntok as f64 / npairs as f64,
            "truncated_pairs_fraction": ntrunc as f64 / npairs as f64,
            "data": {"passages": passages.len(), "queries": queries.len()},
            "runs": runs,
        })
    );
    Ok(())
}
