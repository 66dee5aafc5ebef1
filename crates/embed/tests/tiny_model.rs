//! Tests that need no real model: a tiny random-weight BERT (written by `support/`) checked against
//! a plain scalar forward pass, and bad model directories giving the right errors.

use std::fs;
use std::path::Path;

use searchd_embed::{EmbedConfig, Embedder, Error, TextKind};

mod support;

use support::{
    random_weights as weights_of, write_model as write_model_of, write_safetensors, Opts, Shape,
    TmpDir, EPS, VOCAB, W,
};

const H: usize = 32;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const INTER: usize = 64;
const MAXPOS: usize = 40;
/// The tests' model.
const TINY: Shape = Shape {
    hidden: H,
    layers: LAYERS,
    heads: HEADS,
    inter: INTER,
    maxpos: MAXPOS,
};

fn random_weights(seed: u64) -> W {
    weights_of(seed, &TINY)
}

fn write_model(dir: &Path, w: &W, o: &Opts) {
    write_model_of(dir, w, o, &TINY)
}

// ---------------------------------------------------------------- scalar reference

fn erf(x: f64) -> f64 {
    // Abramowitz & Stegun 7.1.26 is only 1.5e-7; use the series / continued fraction
    // split for ~1e-15 instead.
    if x.abs() < 2.5 {
        let mut sum = x;
        let mut term = x;
        let x2 = x * x;
        for n in 1..80 {
            term *= -x2 / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc continued fraction (Lentz), for |x| >= 2.5.
        let z = x.abs();
        let mut f = z;
        let mut c = z;
        let mut d = 0.0;
        for n in 1..200 {
            let an = n as f64 / 2.0;
            d = 1.0 / (z + an * d);
            c = z + an / c;
            let delta = c * d;
            f *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        let erfc = (-z * z).exp() / (f * std::f64::consts::PI.sqrt());
        (1.0 - erfc) * x.signum()
    }
}

fn layer_norm(x: &mut [f64], g: &[f32], b: &[f32]) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let inv = 1.0 / (var + EPS).sqrt();
    for (i, v) in x.iter_mut().enumerate() {
        *v = (*v - mean) * inv * g[i] as f64 + b[i] as f64;
    }
}

fn dense(w: &W, name: &str, x: &[f64]) -> Vec<f64> {
    let (shape, wt) = &w[&format!("{name}.weight")];
    let bias = &w[&format!("{name}.bias")].1;
    let (o, i) = (shape[0], shape[1]);
    assert_eq!(i, x.len());
    (0..o)
        .map(|r| bias[r] as f64 + (0..i).map(|c| wt[r * i + c] as f64 * x[c]).sum::<f64>())
        .collect()
}

/// Plain loops, f64, no padding at all: the sequence is exactly `ids`.
fn reference(w: &W, ids: &[u32], pooling: &str, normalize: bool) -> Vec<f32> {
    let n = ids.len();
    let g = |k: &str| &w[k].1;
    let mut x: Vec<Vec<f64>> = (0..n)
        .map(|t| {
            let mut v: Vec<f64> = (0..H)
                .map(|c| {
                    g("embeddings.word_embeddings.weight")[ids[t] as usize * H + c] as f64
                        + g("embeddings.position_embeddings.weight")[t * H + c] as f64
                        + g("embeddings.token_type_embeddings.weight")[c] as f64
                })
                .collect();
            layer_norm(
                &mut v,
                g("embeddings.LayerNorm.weight"),
                g("embeddings.LayerNorm.bias"),
            );
            v
        })
        .collect();
    let hd = H / HEADS;
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}");
        let q: Vec<Vec<f64>> = x
            .iter()
            .map(|v| dense(w, &format!("{p}.attention.self.query"), v))
            .collect();
        let k: Vec<Vec<f64>> = x
            .iter()
            .map(|v| dense(w, &format!("{p}.attention.self.key"), v))
            .collect();
        let vv: Vec<Vec<f64>> = x
            .iter()
            .map(|v| dense(w, &format!("{p}.attention.self.value"), v))
            .collect();
        let mut ctx = vec![vec![0f64; H]; n];
        for head in 0..HEADS {
            let r = head * hd..(head + 1) * hd;
            for i in 0..n {
                let scores: Vec<f64> = (0..n)
                    .map(|j| r.clone().map(|c| q[i][c] * k[j][c]).sum::<f64>() / (hd as f64).sqrt())
                    .collect();
                let m = scores.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in r.clone() {
                    ctx[i][c] = (0..n).map(|j| e[j] / z * vv[j][c]).sum();
                }
            }
        }
        for t in 0..n {
            let mut a = dense(w, &format!("{p}.attention.output.dense"), &ctx[t]);
            for c in 0..H {
                a[c] += x[t][c];
            }
            layer_norm(
                &mut a,
                g(&format!("{p}.attention.output.LayerNorm.weight")),
                g(&format!("{p}.attention.output.LayerNorm.bias")),
            );
            let inter: Vec<f64> = dense(w, &format!("{p}.intermediate.dense"), &a)
                .into_iter()
                .map(|u| 0.5 * u * (1.0 + erf(u / std::f64::consts::SQRT_2)))
                .collect();
            let mut o = dense(w, &format!("{p}.output.dense"), &inter);
            for c in 0..H {
                o[c] += a[c];
            }
            layer_norm(
                &mut o,
                g(&format!("{p}.output.LayerNorm.weight")),
                g(&format!("{p}.output.LayerNorm.bias")),
            );
            x[t] = o;
        }
    }
    let mut out: Vec<f64> = match pooling {
        "cls" => x[0].clone(),
        "max" => (0..H)
            .map(|c| x.iter().map(|v| v[c]).fold(f64::MIN, f64::max))
            .collect(),
        _ => (0..H)
            .map(|c| x.iter().map(|v| v[c]).sum::<f64>() / n as f64)
            .collect(),
    };
    if normalize {
        let norm = out.iter().map(|v| v * v).sum::<f64>().sqrt();
        out.iter_mut().for_each(|v| *v /= norm);
    }
    out.into_iter().map(|v| v as f32).collect()
}

fn ids_of(words: &str) -> Vec<u32> {
    let mut ids = vec![2u32];
    for wd in words.split_whitespace() {
        ids.push(VOCAB.iter().position(|v| *v == wd).unwrap_or(1) as u32);
    }
    ids.push(3);
    ids
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

// Texts of mixed lengths; each maps word-for-word onto VOCAB (no sub-word splits), so
// `ids_of` gives exactly the tokenizer's ids.
const TEXTS: &[&str] = &[
    "the cat sat on the mat",
    "dog",
    "",
    "a big red dog and a small blue bird walk over the tree and under the house",
    "fish",
    "the bird was on the house , the cat was under the tree .",
    "jump",
    "a dog is a dog is a dog",
];

fn check_against_reference(o: Opts, batch_size: usize, threads: usize) {
    let dir = TmpDir::new(&format!("ref-{}-{}-{}", o.pooling, batch_size, threads));
    let w = random_weights(0x9e37_79b9_7f4a_7c15);
    write_model(&dir.0, &w, &o);
    let cfg = EmbedConfig {
        threads,
        batch_size,
        ..Default::default()
    };
    let e = Embedder::load(&dir.0, &cfg).unwrap();
    assert_eq!(e.dim(), H);
    assert_eq!(e.info().pooling, o.pooling);
    assert_eq!(e.info().normalize, o.normalize);
    assert_eq!(e.info().name, "tiny-test-bert");
    assert_eq!(e.info().max_length, o.max_seq);
    assert_eq!(e.info().checksum.len(), 8);
    let out = e.embed(TEXTS, TextKind::Passage).unwrap();
    assert_eq!(out.len(), TEXTS.len());
    assert_eq!(out.vectors.len(), TEXTS.len() * H);
    let mut total = 0;
    for (i, t) in TEXTS.iter().enumerate() {
        let ids = ids_of(t);
        total += ids.len();
        assert_eq!(e.count_tokens(t).unwrap(), ids.len(), "{t:?}");
        let want = reference(&w, &ids, o.pooling, o.normalize);
        let d = max_diff(out.row(i), &want);
        assert!(d < 1e-4, "row {i} ({t:?}): max abs diff {d}");
        assert!(!out.truncated[i]);
    }
    assert_eq!(out.tokens, total);
}

#[test]
fn forward_matches_scalar_reference_mean_normalized() {
    check_against_reference(Opts::default(), 32, 2);
}

#[test]
fn forward_matches_scalar_reference_small_batches_one_thread() {
    check_against_reference(Opts::default(), 3, 1);
}

#[test]
fn forward_matches_scalar_reference_cls_prefixed_weights() {
    check_against_reference(
        Opts {
            prefix: "bert.",
            pooling: "cls",
            normalize: false,
            ..Default::default()
        },
        2,
        0,
    );
}

#[test]
fn forward_matches_scalar_reference_max() {
    check_against_reference(
        Opts {
            pooling: "max",
            ..Default::default()
        },
        4,
        2,
    );
}

#[test]
fn truncation_keeps_cls_and_sep() {
    let dir = TmpDir::new("trunc");
    let w = random_weights(7);
    write_model(&dir.0, &w, &Opts::default());
    let e = Embedder::load(
        &dir.0,
        &EmbedConfig {
            max_length: Some(6),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(e.info().max_length, 6);
    let long = "a big red dog and a small blue bird";
    let out = e.embed(&[long, "dog"], TextKind::Query).unwrap();
    assert_eq!(out.truncated, vec![true, false]);
    assert_eq!(e.count_tokens(long).unwrap(), 11);
    let full = ids_of(long);
    let mut cut = full[..5].to_vec();
    cut.push(3);
    let want = reference(&w, &cut, "mean", true);
    assert!(max_diff(out.row(0), &want) < 1e-4);
    assert_eq!(out.tokens, 6 + 3);
}

#[test]
fn prompts_are_applied_by_kind() {
    let dir = TmpDir::new("prompts");
    let w = random_weights(11);
    write_model(
        &dir.0,
        &w,
        &Opts {
            prompts: Some(serde_json::json!({"query": "query : ", "document": ""})),
            ..Default::default()
        },
    );
    let e = Embedder::load(&dir.0, &EmbedConfig::default()).unwrap();
    assert_eq!(e.info().query_prefix.as_deref(), Some("query : "));
    assert_eq!(e.info().passage_prefix, None);
    let q = e.embed(&["cat"], TextKind::Query).unwrap();
    let p = e.embed(&["query : cat", "cat"], TextKind::Passage).unwrap();
    assert!(max_diff(q.row(0), p.row(0)) < 1e-6);
    assert!(max_diff(q.row(0), p.row(1)) > 1e-3);
    let want = reference(&w, &ids_of("query : cat"), "mean", true);
    assert!(max_diff(q.row(0), &want) < 1e-4);
}

#[test]
fn empty_input_gives_empty_embedding() {
    let dir = TmpDir::new("empty");
    write_model(&dir.0, &random_weights(3), &Opts::default());
    let e = Embedder::load(&dir.0, &EmbedConfig::default()).unwrap();
    let out = e.embed(&[], TextKind::Passage).unwrap();
    assert!(out.is_empty());
    assert!(out.vectors.is_empty());
    assert_eq!(out.dim, H);
    assert_eq!(out.tokens, 0);
}

#[test]
fn shared_across_threads() {
    let dir = TmpDir::new("arc");
    write_model(&dir.0, &random_weights(5), &Opts::default());
    let e = std::sync::Arc::new(Embedder::load(&dir.0, &EmbedConfig::default()).unwrap());
    let solo = e.embed(TEXTS, TextKind::Passage).unwrap();
    let hs: Vec<_> = (0..3)
        .map(|_| {
            let e = e.clone();
            std::thread::spawn(move || e.embed(TEXTS, TextKind::Passage).unwrap())
        })
        .collect();
    for h in hs {
        assert!(max_diff(&h.join().unwrap().vectors, &solo.vectors) < 1e-6);
    }
}

// ---------------------------------------------------------------- bad directories

fn good_dir(tag: &str) -> TmpDir {
    let d = TmpDir::new(tag);
    write_model(&d.0, &random_weights(1), &Opts::default());
    d
}

fn load_err(dir: &Path) -> Error {
    Embedder::load(dir, &EmbedConfig::default()).expect_err("load should fail")
}

#[test]
fn missing_tokenizer_is_named() {
    let d = good_dir("no-tok");
    fs::remove_file(d.0.join("tokenizer.json")).unwrap();
    let e = load_err(&d.0);
    assert!(
        matches!(e, Error::MissingFile { ref path, .. } if path.ends_with("tokenizer.json")),
        "{e}"
    );
    assert!(e.to_string().contains("tokenizer.json"), "{e}");
}

#[test]
fn missing_pooling_config_is_named() {
    let d = good_dir("no-pool");
    fs::remove_file(d.0.join("1_Pooling/config.json")).unwrap();
    let e = load_err(&d.0);
    assert!(
        matches!(e, Error::MissingFile { ref path, .. } if path.ends_with("1_Pooling/config.json")),
        "{e}"
    );
    assert!(e.to_string().contains("1_Pooling"), "{e}");
}

#[test]
fn missing_weights_are_named() {
    let d = good_dir("no-st");
    fs::remove_file(d.0.join("model.safetensors")).unwrap();
    let e = load_err(&d.0);
    assert!(matches!(e, Error::MissingFile { .. }), "{e}");
    assert!(e.to_string().contains("model.safetensors"), "{e}");
}

#[test]
fn missing_config_is_named() {
    let d = good_dir("no-cfg");
    fs::remove_file(d.0.join("config.json")).unwrap();
    let e = load_err(&d.0);
    assert!(matches!(e, Error::MissingFile { .. }), "{e}");
    assert!(e.to_string().contains("config.json"), "{e}");
}

#[test]
fn unsupported_model_type_is_refused() {
    let d = good_dir("roberta");
    let p = d.0.join("config.json");
    let s = fs::read_to_string(&p)
        .unwrap()
        .replace("\"bert\"", "\"roberta\"");
    fs::write(&p, s).unwrap();
    let e = load_err(&d.0);
    assert!(
        matches!(e, Error::UnsupportedModel { ref model_type, .. } if model_type == "roberta"),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("config.json") && msg.contains("roberta"),
        "{msg}"
    );
}

#[test]
fn corrupt_config_is_a_config_error() {
    let d = good_dir("corrupt");
    fs::write(
        d.0.join("config.json"),
        "{\"model_type\": \"bert\", \"hidden_size\": ",
    )
    .unwrap();
    let e = load_err(&d.0);
    assert!(
        matches!(e, Error::Config { ref path, .. } if path.ends_with("config.json")),
        "{e}"
    );
    // Valid JSON, missing fields.
    fs::write(d.0.join("config.json"), "{\"model_type\": \"bert\"}").unwrap();
    let e = load_err(&d.0);
    assert!(matches!(e, Error::Config { .. }), "{e}");
}

#[test]
fn corrupt_tokenizer_and_pooling_are_errors() {
    let d = good_dir("corrupt-tok");
    fs::write(d.0.join("tokenizer.json"), "not json").unwrap();
    assert!(matches!(load_err(&d.0), Error::Tokenizer(_)));
    let d = good_dir("bad-pool");
    fs::write(
        d.0.join("1_Pooling/config.json"),
        "{\"pooling_mode_cls_token\": true, \"pooling_mode_mean_tokens\": true}",
    )
    .unwrap();
    assert!(matches!(load_err(&d.0), Error::Config { .. }));
}

#[test]
fn bad_weights_are_errors() {
    let d = good_dir("trunc-st");
    let p = d.0.join("model.safetensors");
    let b = fs::read(&p).unwrap();
    fs::write(&p, &b[..b.len() / 2]).unwrap();
    assert!(matches!(load_err(&d.0), Error::Weights { .. }));

    let d = good_dir("missing-tensor");
    let mut w = random_weights(1);
    w.remove("encoder.layer.1.output.dense.weight");
    write_safetensors(&d.0.join("model.safetensors"), &w, "");
    let e = load_err(&d.0);
    assert!(matches!(e, Error::Weights { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("encoder.layer.1.output.dense.weight"),
        "{e}"
    );

    let d = good_dir("wrong-shape");
    let mut w = random_weights(1);
    w.insert(
        "encoder.layer.0.intermediate.dense.bias".into(),
        (vec![3], vec![0.0; 3]),
    );
    write_safetensors(&d.0.join("model.safetensors"), &w, "");
    assert!(matches!(load_err(&d.0), Error::Weights { .. }));
}

#[test]
fn unsupported_module_and_bad_config_values() {
    let d = good_dir("dense-module");
    fs::write(
        d.0.join("modules.json"),
        r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
            {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
            {"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"}]"#,
    )
    .unwrap();
    let e = load_err(&d.0);
    assert!(e.to_string().contains("Dense"), "{e}");

    let d = good_dir("cfg-values");
    let bad = |c: EmbedConfig| Embedder::load(&d.0, &c).expect_err("bad config");
    assert!(matches!(
        bad(EmbedConfig {
            batch_size: 0,
            ..Default::default()
        }),
        Error::InvalidConfig(_)
    ));
    assert!(matches!(
        bad(EmbedConfig {
            max_length: Some(1),
            ..Default::default()
        }),
        Error::InvalidConfig(_)
    ));
}

#[test]
fn token_id_outside_vocab_is_an_error_not_a_panic() {
    let d = good_dir("big-id");
    let p = d.0.join("tokenizer.json");
    let mut t: serde_json::Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
    t["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
        "id": 100, "special": false, "content": "zzextra", "single_word": false,
        "lstrip": false, "rstrip": false, "normalized": false}));
    fs::write(&p, t.to_string()).unwrap();
    let e = Embedder::load(&d.0, &EmbedConfig::default()).unwrap();
    assert!(e.embed(&["the cat"], TextKind::Passage).is_ok());
    let err = e
        .embed(&["the zzextra cat"], TextKind::Passage)
        .unwrap_err();
    assert!(matches!(err, Error::Tokenizer(_)), "{err}");
    assert!(err.to_string().contains("vocab_size"), "{err}");
}
