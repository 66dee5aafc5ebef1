//! Summary statistics that tell text-embedding-like data from noise, for tuning
//! `searchd_vecio::synth` against real embeddings.
//!
//! ```text
//! cargo run --release -p searchd-vecio --example synth_stats -- real BASE.npy QUERIES.npy
//! cargo run --release -p searchd-vecio --example synth_stats -- synth [key=value ...]
//! ```
//! `key` is a `SynthParams` field (`n`, `rank`, `spectrum_decay`, `clusters`, `cluster_zipf`,
//! `cluster_spread`, `spread_range`, `mean_weight`, `noise`, `query_spread`, `query_shift`,
//! `seed`); `graph=1` also builds a small navigable-graph index on 20k rows and reports its
//! recall@10 (a cheap stand-in for HNSW).
//!
//! Reported:
//! - `cos_bb`: mean pairwise cosine of 2k base rows; `cos_qq`, `cos_qb` likewise for queries
//! - `var_top10pct`: fraction of variance in the top 10% principal directions (2k rows);
//!   `pr`: participation ratio (Σλ)²/Σλ², an effective number of dimensions
//! - for 200 queries (and 200 held-out base rows) against 20k base rows, by brute force:
//!   mean top-1 and top-10 similarity, their ratio, relative contrast (mean distance over
//!   nearest distance) and the MLE local intrinsic dimensionality at k = 20.

use std::path::Path;
use std::time::Instant;

use searchd_vecio::synth::{generate, SynthParams};

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // 8 accumulators so the compiler vectorises.
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

fn normalise(data: &mut [f32], dim: usize) {
    for r in data.chunks_exact_mut(dim) {
        let n = dot(r, r).sqrt();
        if n > 0.0 {
            r.iter_mut().for_each(|x| *x /= n);
        }
    }
}

fn mean_pairwise(a: &[f32], b: &[f32], dim: usize, same: bool) -> f64 {
    let (na, nb) = (a.len() / dim, b.len() / dim);
    let (mut s, mut c) = (0f64, 0u64);
    for i in 0..na {
        let ra = &a[i * dim..(i + 1) * dim];
        for j in 0..nb {
            if same && j <= i {
                continue;
            }
            s += dot(ra, &b[j * dim..(j + 1) * dim]) as f64;
            c += 1;
        }
    }
    s / c as f64
}

/// Eigenvalues of a symmetric matrix (cyclic Jacobi).
fn eigenvalues(mut a: Vec<f64>, n: usize) -> Vec<f64> {
    for _sweep in 0..30 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * a[i * n + j])
            .sum();
        if off < 1e-18 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() < 1e-15 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a[k * n + p];
                    let akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let apk = a[p * n + k];
                    let aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
            }
        }
    }
    let mut ev: Vec<f64> = (0..n).map(|i| a[i * n + i]).collect();
    ev.sort_by(|x, y| y.partial_cmp(x).unwrap());
    ev
}

fn spectrum(rows: &[f32], dim: usize) -> (f64, f64, f64) {
    let n = rows.len() / dim;
    let mut mean = vec![0f64; dim];
    for r in rows.chunks_exact(dim) {
        for (m, &x) in mean.iter_mut().zip(r) {
            *m += x as f64 / n as f64;
        }
    }
    let mut cov = vec![0f64; dim * dim];
    let mut c = vec![0f64; dim];
    for r in rows.chunks_exact(dim) {
        for (ci, (&x, m)) in c.iter_mut().zip(r.iter().zip(&mean)) {
            *ci = x as f64 - m;
        }
        for i in 0..dim {
            let ci = c[i];
            let row = &mut cov[i * dim..(i + 1) * dim];
            for (v, &cj) in row.iter_mut().zip(&c) {
                *v += ci * cj;
            }
        }
    }
    let ev = eigenvalues(cov, dim);
    let total: f64 = ev.iter().sum();
    let top = ev[..dim.div_ceil(10)].iter().sum::<f64>() / total;
    let pr = total * total / ev.iter().map(|x| x * x).sum::<f64>();
    let mut acc = 0.0;
    let k90 = ev
        .iter()
        .position(|x| {
            acc += x;
            acc >= 0.9 * total
        })
        .unwrap()
        + 1;
    (top, pr, k90 as f64)
}

struct NnStats {
    top1: f64,
    top10: f64,
    ratio: f64,
    rc: f64,
    lid: f64,
}

fn nn_stats(queries: &[f32], base: &[f32], dim: usize) -> NnStats {
    let nq = queries.len() / dim;
    let (mut top1, mut top10, mut ratio, mut rc, mut lid) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let k = 20;
    for q in queries.chunks_exact(dim) {
        let mut sims: Vec<f32> = base.chunks_exact(dim).map(|b| dot(q, b)).collect();
        let mean_d: f64 = sims
            .iter()
            .map(|&s| (2.0 - 2.0 * s as f64).max(0.0).sqrt())
            .sum::<f64>()
            / sims.len() as f64;
        sims.select_nth_unstable_by(k, |a, b| b.partial_cmp(a).unwrap());
        let mut best = sims[..k].to_vec();
        best.sort_by(|a, b| b.partial_cmp(a).unwrap());
        top1 += best[0] as f64;
        top10 += best[9] as f64;
        ratio += best[0] as f64 / best[9] as f64;
        let d: Vec<f64> = best
            .iter()
            .map(|&s| (2.0 - 2.0 * s as f64).max(1e-12).sqrt())
            .collect();
        rc += mean_d / d[0];
        let dk = d[k - 1];
        let m: f64 = d[..k - 1].iter().map(|x| (x / dk).ln()).sum::<f64>() / (k - 1) as f64;
        lid += -1.0 / m;
    }
    let nq = nq as f64;
    NnStats {
        top1: top1 / nq,
        top10: top10 / nq,
        ratio: ratio / nq,
        rc: rc / nq,
        lid: lid / nq,
    }
}

/// Tiny navigable graph (one layer, HNSW-style neighbour selection), recall@10 at `ef`.
fn graph_recall(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    m: usize,
    efc: usize,
    efs: &[usize],
) -> Vec<f64> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    #[derive(PartialEq, PartialOrd, Clone, Copy)]
    struct F(f32);
    impl Eq for F {}
    #[allow(clippy::derive_ord_xor_partial_ord)]
    impl Ord for F {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            self.partial_cmp(o).unwrap()
        }
    }
    let n = base.len() / dim;
    let row = |i: usize| &base[i * dim..(i + 1) * dim];
    let mmax = 2 * m;
    let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
    let search = |adj: &Vec<Vec<u32>>,
                  q: &[f32],
                  ef: usize,
                  limit: usize,
                  visited: &mut Vec<u32>,
                  epoch: u32| {
        let entry = 0usize;
        let mut cand = BinaryHeap::new(); // max-heap by sim
        let mut res: BinaryHeap<Reverse<(F, u32)>> = BinaryHeap::new(); // min-heap
        let s = dot(q, row(entry));
        visited[entry] = epoch;
        cand.push((F(s), entry as u32));
        res.push(Reverse((F(s), entry as u32)));
        while let Some((F(s), c)) = cand.pop() {
            if res.len() >= ef && s < res.peek().unwrap().0 .0 .0 {
                break;
            }
            for &nb in &adj[c as usize] {
                let nb = nb as usize;
                if nb >= limit || visited[nb] == epoch {
                    continue;
                }
                visited[nb] = epoch;
                let sn = dot(q, row(nb));
                if res.len() < ef || sn > res.peek().unwrap().0 .0 .0 {
                    cand.push((F(sn), nb as u32));
                    res.push(Reverse((F(sn), nb as u32)));
                    if res.len() > ef {
                        res.pop();
                    }
                }
            }
        }
        let mut out: Vec<(f32, u32)> = res.into_iter().map(|Reverse((F(s), i))| (s, i)).collect();
        out.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
        out
    };
    let select = |cands: &[(f32, u32)], m: usize| -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        for &(s, c) in cands {
            if out.len() >= m {
                break;
            }
            let ok = out
                .iter()
                .all(|&o| dot(row(c as usize), row(o as usize)) < s);
            if ok {
                out.push(c);
            }
        }
        out
    };
    let mut visited = vec![0u32; n];
    let mut epoch = 0u32;
    for i in 1..n {
        epoch += 1;
        let cands = search(&adj, row(i), efc, i, &mut visited, epoch);
        let nbrs = select(&cands, m);
        for &nb in &nbrs {
            let nbu = nb as usize;
            adj[nbu].push(i as u32);
            if adj[nbu].len() > mmax {
                let mut cs: Vec<(f32, u32)> = adj[nbu]
                    .iter()
                    .map(|&x| (dot(row(nbu), row(x as usize)), x))
                    .collect();
                cs.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
                adj[nbu] = select(&cs, mmax);
            }
        }
        adj[i] = nbrs;
    }
    let nq = queries.len() / dim;
    let truth: Vec<Vec<u32>> = queries
        .chunks_exact(dim)
        .map(|q| {
            let mut s: Vec<(f32, u32)> = (0..n).map(|i| (dot(q, row(i)), i as u32)).collect();
            s.select_nth_unstable_by(10, |a, b| b.0.partial_cmp(&a.0).unwrap());
            s[..10].iter().map(|x| x.1).collect()
        })
        .collect();
    efs.iter()
        .map(|&ef| {
            let mut hit = 0;
            for (qi, q) in queries.chunks_exact(dim).enumerate() {
                epoch += 1;
                let r = search(&adj, q, ef.max(10), n, &mut visited, epoch);
                hit += r[..10].iter().filter(|x| truth[qi].contains(&x.1)).count();
            }
            hit as f64 / (nq * 10) as f64
        })
        .collect()
}

fn report(label: &str, base: &[f32], queries: &[f32], dim: usize, graph: bool) {
    let nb = base.len() / dim;
    let b2k = &base[..2000.min(nb) * dim];
    let q200 = &queries[..200.min(queries.len() / dim) * dim];
    let cos_bb = mean_pairwise(b2k, b2k, dim, true);
    let cos_qq = mean_pairwise(q200, q200, dim, true);
    let cos_qb = mean_pairwise(q200, b2k, dim, false);
    let (top, pr, k90) = spectrum(b2k, dim);
    let b20k = &base[..20_000.min(nb) * dim];
    let held = &base[20_000.min(nb) * dim..(20_200.min(nb)) * dim];
    let qs = nn_stats(q200, b20k, dim);
    println!("{label}");
    println!(
        "  cos_bb {cos_bb:.3}  cos_qq {cos_qq:.3}  cos_qb {cos_qb:.3}  var_top10pct {top:.3}  pr {pr:.1}  k90 {k90}"
    );
    println!(
        "  queries->base20k: top1 {:.3} top10 {:.3} ratio {:.3} rc {:.3} lid {:.1}",
        qs.top1, qs.top10, qs.ratio, qs.rc, qs.lid
    );
    if !held.is_empty() {
        let bs = nn_stats(held, b20k, dim);
        println!(
            "  base->base20k:    top1 {:.3} top10 {:.3} ratio {:.3} rc {:.3} lid {:.1}",
            bs.top1, bs.top10, bs.ratio, bs.rc, bs.lid
        );
    }
    if graph {
        let t = Instant::now();
        let efs = [10, 16, 32, 64];
        let r = graph_recall(b20k, q200, dim, 8, 64, &efs);
        println!(
            "  graph(20k, M=8, efc=64) recall@10 at ef {:?}: {:?} ({:.1}s)",
            efs,
            r.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>(),
            t.elapsed().as_secs_f64()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(|s| s.as_str()) {
        Some("real") => {
            let b = searchd_vecio::read_vectors(Path::new(&args[1])).unwrap();
            let q = searchd_vecio::read_vectors(Path::new(&args[2])).unwrap();
            let dim = b.dim();
            let graph = args.iter().any(|a| a == "graph=1");
            let (mut b, mut q) = (b.into_owned(), q.into_owned());
            normalise(&mut b, dim);
            normalise(&mut q, dim);
            report(&format!("real {}", args[1]), &b, &q, dim, graph);
        }
        Some("synth") => {
            let mut p = SynthParams {
                n: 20_200,
                queries: 200,
                ..SynthParams::default()
            };
            let mut graph = false;
            for kv in &args[1..] {
                let (k, v) = kv.split_once('=').expect("key=value");
                let f = || v.parse::<f32>().unwrap();
                let u = || v.parse::<usize>().unwrap();
                match k {
                    "n" => p.n = u(),
                    "dim" => p.dim = u(),
                    "seed" => p.seed = u() as u64,
                    "rank" => p.rank = u(),
                    "spectrum_decay" => p.spectrum_decay = f(),
                    "clusters" => p.clusters = u(),
                    "cluster_zipf" => p.cluster_zipf = f(),
                    "subtopics" => p.subtopics = u(),
                    "subtopic_spread" => p.subtopic_spread = f(),
                    "cluster_spread" => p.cluster_spread = f(),
                    "spread_range" => p.spread_range = f(),
                    "mean_weight" => p.mean_weight = f(),
                    "noise" => p.noise = f(),
                    "query_spread" => p.query_spread = f(),
                    "query_shift" => p.query_shift = f(),
                    "query_noise" => p.query_noise = f(),
                    "graph" => graph = v == "1",
                    _ => panic!("unknown key {k}"),
                }
            }
            let t = Instant::now();
            let d = generate(&p, None);
            let gen = t.elapsed();
            report(
                &format!("synth {p:?} ({:.2}s)", gen.as_secs_f64()),
                &d.base,
                &d.queries,
                d.dim,
                graph,
            );
        }
        _ => eprintln!("usage: synth_stats real BASE QUERIES | synth [key=value...]"),
    }
}
