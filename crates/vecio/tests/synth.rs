//! The synthetic corpus: determinism, unit length, and embedding-like statistics.

use searchd_vecio::synth::{generate, SynthParams, CHUNK_ROWS};

fn params(n: usize, dim: usize, queries: usize, seed: u64) -> SynthParams {
    SynthParams {
        n,
        dim,
        queries,
        seed,
        ..SynthParams::default()
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn same_seed_same_bytes_different_seed_different() {
    let p = params(2 * CHUNK_ROWS + 17, 48, 50, 7);
    let a = generate(&p, None);
    let b = generate(&p, None);
    assert_eq!(a, b);
    let c = generate(
        &SynthParams {
            seed: 8,
            ..p.clone()
        },
        None,
    );
    assert_ne!(a.base, c.base);
    assert_ne!(a.queries, c.queries);
}

#[test]
fn independent_of_thread_count_and_prefix_stable() {
    let p = params(3 * CHUNK_ROWS + 5, 40, CHUNK_ROWS + 3, 3);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| generate(&p, None));
    let three = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap()
        .install(|| generate(&p, None));
    assert_eq!(one, three);
    // The model does not depend on n: a smaller corpus is a prefix of a larger one.
    let small = generate(
        &SynthParams {
            n: 1000,
            queries: 10,
            ..p.clone()
        },
        None,
    );
    assert_eq!(&one.base[..1000 * 40], &small.base[..]);
    assert_eq!(&one.queries[..10 * 40], &small.queries[..]);
}

#[test]
fn rows_are_unit_length_and_shapes_right() {
    for dim in [1, 2, 3, 7, 17, 384] {
        let d = generate(&params(300, dim, 20, 1), None);
        assert_eq!(d.dim, dim);
        assert_eq!(d.base.len(), 300 * dim);
        assert_eq!(d.queries.len(), 20 * dim);
        for r in d.base.chunks_exact(dim).chain(d.queries.chunks_exact(dim)) {
            assert!(r.iter().all(|x| x.is_finite()));
            let norm = dot(r, r).sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "dim {dim}: norm {norm}");
        }
    }
    let empty = generate(&params(0, 8, 0, 1), None);
    assert!(empty.base.is_empty() && empty.queries.is_empty());
}

#[test]
fn progress_counts_every_vector() {
    let pb = indicatif::ProgressBar::hidden();
    generate(&params(2500, 16, 30, 1), Some(&pb));
    assert_eq!(pb.position(), 2530);
}

/// Cheap plausibility check against what real sentence embeddings look like (the tuning is
/// done with `examples/synth_stats.rs` against real all-MiniLM-L6-v2 vectors).
#[test]
fn looks_like_text_embeddings_not_noise() {
    let dim = 384;
    let d = generate(&params(5000, dim, 100, 42), None);
    let rows: Vec<&[f32]> = d.base.chunks_exact(dim).collect();
    // Mean pairwise cosine: positive (common direction), like real embeddings (~0.1-0.3).
    let m = 400;
    let mut s = 0.0;
    let mut c = 0;
    for i in 0..m {
        for j in i + 1..m {
            s += dot(rows[i], rows[j]);
            c += 1;
        }
    }
    let mean_cos = s / c as f32;
    assert!(
        (0.05..0.3).contains(&mean_cos),
        "mean pairwise cosine {mean_cos}"
    );
    // Queries are fresh draws, not copies, but have clearly closer neighbours than average.
    let mut top1 = 0.0;
    for q in d.queries.chunks_exact(dim) {
        let best = rows.iter().map(|r| dot(q, r)).fold(f32::MIN, f32::max);
        assert!(best < 0.999, "a query duplicates a base row");
        top1 += best;
    }
    top1 /= 100.0;
    assert!(
        top1 > mean_cos + 0.2 && top1 < 0.95,
        "mean top-1 similarity {top1} vs mean cosine {mean_cos}"
    );
}
