//! Cross-encoder tests that need no real model: a tiny random-weight
//! `BertForSequenceClassification` written here (WordPiece tokenizer.json with a pair
//! template, config.json, safetensors with pooler and a one-label classifier) checked
//! against a plain scalar f64 forward pass, and directories that are not cross-encoders
//! giving clear errors. `SEARCHD_TEST_MODEL` (an embedding model) adds one refusal test.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, TensorView};
use searchd_embed::{CrossEncoder, EmbedConfig, Error};

const H: usize = 32;
const LAYERS: usize = 2;
const HEADS: usize = 4;
const INTER: usize = 64;
const MAXPOS: usize = 40;
const EPS: f64 = 1e-12;

const VOCAB: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "on", "mat",
    "run", "##s", "##ning", "##ed", "big", "small", "red", "blue", "and", "is", "was", ",", ".",
    ":", "query", "passage", "fish", "bird", "tree", "house", "walk", "jump", "over", "under",
];

fn tokenizer_json(with_post_processor: bool) -> String {
    let vocab: serde_json::Map<String, serde_json::Value> = VOCAB
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), serde_json::json!(i)))
        .collect();
    let special = |id: u32, tok: &str| {
        serde_json::json!({"id": id, "special": true, "content": tok, "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": false})
    };
    let post = if with_post_processor {
        serde_json::json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}})
    } else {
        serde_json::Value::Null
    };
    serde_json::json!({
        "version": "1.0",
        // Deliberately set: the cross-encoder must use its own window and no padding.
        "truncation": {"max_length": 8, "strategy": "OnlySecond", "stride": 0},
        "padding": {"strategy": {"Fixed": 16}, "direction": "Right", "pad_to_multiple_of": null,
            "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"),
            special(3, "[SEP]"), special(4, "[MASK]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
            "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100, "vocab": vocab}
    })
    .to_string()
}

/// Deterministic xorshift weights in [-scale, scale).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale).collect()
    }
}

/// Weights by full name (as written to the file), each with its shape.
type W = HashMap<String, (Vec<usize>, Vec<f32>)>;

/// A random BertForSequenceClassification with `labels` outputs; encoder and pooler
/// under `prefix` (HF writes `bert.`), the classifier never prefixed.
fn random_weights(seed: u64, prefix: &str, labels: usize) -> W {
    let mut r = Rng(seed);
    let mut w = W::new();
    let v = VOCAB.len();
    let mut put = |n: &str, shape: Vec<usize>, scale: f32, r: &mut Rng| {
        let len = shape.iter().product();
        w.insert(n.to_string(), (shape, r.vec(len, scale)));
    };
    let p = prefix;
    put(
        &format!("{p}embeddings.word_embeddings.weight"),
        vec![v, H],
        1.0,
        &mut r,
    );
    put(
        &format!("{p}embeddings.position_embeddings.weight"),
        vec![MAXPOS, H],
        0.5,
        &mut r,
    );
    // Two segment rows, independently random, so segment ids change the result.
    put(
        &format!("{p}embeddings.token_type_embeddings.weight"),
        vec![2, H],
        1.0,
        &mut r,
    );
    let mut lns: Vec<(String, Vec<f32>, Vec<f32>)> = Vec::new();
    let mut ln = |name: String, r: &mut Rng| {
        let g: Vec<f32> = r.vec(H, 0.3).iter().map(|x| 1.0 + x).collect();
        let b = r.vec(H, 0.2);
        lns.push((name, g, b));
    };
    ln(format!("{p}embeddings.LayerNorm"), &mut r);
    for l in 0..LAYERS {
        let lp = format!("{p}encoder.layer.{l}");
        for (n, o, i) in [
            ("attention.self.query", H, H),
            ("attention.self.key", H, H),
            ("attention.self.value", H, H),
            ("attention.output.dense", H, H),
            ("intermediate.dense", INTER, H),
            ("output.dense", H, INTER),
        ] {
            let s = 1.5 / (i as f32).sqrt();
            put(&format!("{lp}.{n}.weight"), vec![o, i], s, &mut r);
            put(&format!("{lp}.{n}.bias"), vec![o], 0.1, &mut r);
        }
        ln(format!("{lp}.attention.output.LayerNorm"), &mut r);
        ln(format!("{lp}.output.LayerNorm"), &mut r);
    }
    put(
        &format!("{p}pooler.dense.weight"),
        vec![H, H],
        2.0 / (H as f32).sqrt(),
        &mut r,
    );
    put(&format!("{p}pooler.dense.bias"), vec![H], 0.2, &mut r);
    put(
        "classifier.weight",
        vec![labels, H],
        3.0 / (H as f32).sqrt(),
        &mut r,
    );
    put("classifier.bias", vec![labels], 0.5, &mut r);
    for (n, g, b) in lns {
        w.insert(format!("{n}.weight"), (vec![H], g));
        w.insert(format!("{n}.bias"), (vec![H], b));
    }
    w
}

fn write_safetensors(path: &Path, w: &W) {
    let bytes: HashMap<String, (Vec<usize>, Vec<u8>)> = w
        .iter()
        .map(|(k, (s, d))| {
            let b: Vec<u8> = d.iter().flat_map(|x| x.to_le_bytes()).collect();
            (k.clone(), (s.clone(), b))
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(k, (s, b))| {
            (
                k.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

struct TmpDir(PathBuf);
impl TmpDir {
    fn new(tag: &str) -> TmpDir {
        let p = std::env::temp_dir().join(format!(
            "searchd-cross-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TmpDir(p)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}
impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn config(labels: usize) -> serde_json::Value {
    let id2label: serde_json::Map<String, serde_json::Value> = (0..labels)
        .map(|i| (i.to_string(), serde_json::json!(format!("LABEL_{i}"))))
        .collect();
    serde_json::json!({
        "_name_or_path": "tiny-test-cross", "architectures": ["BertForSequenceClassification"],
        "model_type": "bert", "hidden_size": H, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "intermediate_size": INTER, "layer_norm_eps": EPS,
        "max_position_embeddings": MAXPOS, "type_vocab_size": 2, "vocab_size": VOCAB.len(),
        "hidden_act": "gelu", "position_embedding_type": "absolute", "pad_token_id": 0,
        "id2label": id2label
    })
}

const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// A cross-encoder directory: config.json, tokenizer.json, model.safetensors.
fn write_cross(dir: &Path, w: &W, cfg: &serde_json::Value) {
    fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    fs::write(dir.join("tokenizer.json"), tokenizer_json(true)).unwrap();
    write_safetensors(&dir.join("model.safetensors"), w);
}

fn good_dir(tag: &str) -> (TmpDir, W) {
    let d = TmpDir::new(tag);
    let w = random_weights(SEED, "bert.", 1);
    write_cross(&d.0, &w, &config(1));
    (d, w)
}

fn load(dir: &Path, threads: usize, batch_size: usize, max_length: Option<usize>) -> CrossEncoder {
    CrossEncoder::load(
        dir,
        &EmbedConfig {
            threads,
            max_length,
            batch_size,
        },
    )
    .unwrap()
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

/// BertForSequenceClassification in plain f64 loops, no padding: the sequence is exactly
/// `ids` with segment ids `types`. Returns the single logit.
fn reference(w: &W, ids: &[u32], types: &[u32]) -> f64 {
    assert_eq!(ids.len(), types.len());
    let n = ids.len();
    let g = |k: &str| &w[&format!("bert.{k}")].1;
    let mut x: Vec<Vec<f64>> = (0..n)
        .map(|t| {
            let mut v: Vec<f64> = (0..H)
                .map(|c| {
                    g("embeddings.word_embeddings.weight")[ids[t] as usize * H + c] as f64
                        + g("embeddings.position_embeddings.weight")[t * H + c] as f64
                        + g("embeddings.token_type_embeddings.weight")[types[t] as usize * H + c]
                            as f64
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
        let p = format!("bert.encoder.layer.{l}");
        let proj = |name: &str, x: &[Vec<f64>]| -> Vec<Vec<f64>> {
            x.iter()
                .map(|v| dense(w, &format!("{p}.{name}"), v))
                .collect()
        };
        let q = proj("attention.self.query", &x);
        let k = proj("attention.self.key", &x);
        let vv = proj("attention.self.value", &x);
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
                &w[&format!("{p}.attention.output.LayerNorm.weight")].1,
                &w[&format!("{p}.attention.output.LayerNorm.bias")].1,
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
                &w[&format!("{p}.output.LayerNorm.weight")].1,
                &w[&format!("{p}.output.LayerNorm.bias")].1,
            );
            x[t] = o;
        }
    }
    let pooled: Vec<f64> = dense(w, "bert.pooler.dense", &x[0])
        .into_iter()
        .map(f64::tanh)
        .collect();
    let logit = dense(w, "classifier", &pooled);
    assert_eq!(logit.len(), 1);
    logit[0]
}

fn words(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .map(|wd| VOCAB.iter().position(|v| *v == wd).unwrap_or(1) as u32)
        .collect()
}

/// The `tokenizers` crate's LongestFirst rule for a pair (what Hugging Face fast
/// tokenizers, hence sentence-transformers, use) with `budget` = window minus the 3
/// special tokens: if only the longer text has to give, it keeps what the shorter leaves;
/// otherwise both get half, the odd token going to the longer (the second on a tie).
fn longest_first(a: usize, b: usize, budget: usize) -> (usize, usize) {
    if a + b <= budget {
        return (a, b);
    }
    let (short, long) = (a.min(b), a.max(b));
    let (mut ns, mut nl) = (short, long.min(budget.saturating_sub(short).max(short)));
    if ns + nl > budget {
        ns = budget / 2;
        nl = ns + budget % 2;
    }
    if a > b {
        (nl, ns)
    } else {
        (ns, nl)
    }
}

/// `[CLS] a [SEP] b [SEP]` with segment ids, truncated to `window`.
fn pair_ids(query: &str, passage: &str, window: usize) -> (Vec<u32>, Vec<u32>) {
    let (a, b) = (words(query), words(passage));
    let (na, nb) = longest_first(a.len(), b.len(), window - 3);
    let mut ids = vec![2u32];
    ids.extend_from_slice(&a[..na]);
    ids.push(3);
    let first = ids.len();
    ids.extend_from_slice(&b[..nb]);
    ids.push(3);
    let mut types = vec![0u32; first];
    types.resize(ids.len(), 1);
    (ids, types)
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

// Passages of very different lengths; each maps word-for-word onto VOCAB (no sub-word
// splits), so `words` gives exactly the tokenizer's ids. The 39-word one needs truncation
// at the default window (40 = max_position_embeddings).
const LONG: &str = "a big red dog and a small blue bird walk over the tree and under the house , \
                    the cat sat on the mat and the fish was under the big blue tree . a dog is a \
                    dog";
const PASSAGES: &[&str] = &[
    "the cat sat on the mat",
    "dog",
    "",
    "a big red dog and a small blue bird walk over the tree and under the house",
    LONG,
    "fish",
    "the bird was on the house , the cat was under the tree .",
    "jump",
    "a dog is a dog is a dog",
    "cat",
    "the cat sat on the mat",
];

const QUERIES: &[&str] = &["cat", "the big dog", "", "a small bird walk over the house"];

fn check_against_reference(tag: &str, threads: usize, batch_size: usize, window: Option<usize>) {
    let (d, w) = good_dir(tag);
    let ce = load(&d.0, threads, batch_size, window);
    let win = window.unwrap_or(MAXPOS);
    assert_eq!(ce.info().max_length, win);
    let mut truncated = 0;
    let (mut worst, mut lo, mut hi) = (0f64, f64::MAX, f64::MIN);
    for q in QUERIES {
        let got = ce.score(q, PASSAGES).unwrap();
        assert_eq!(got.len(), PASSAGES.len());
        for (i, p) in PASSAGES.iter().enumerate() {
            let (ids, types) = pair_ids(q, p, win);
            if ids.len() < words(q).len() + words(p).len() + 3 {
                truncated += 1;
            }
            assert!(ids.len() <= win);
            let want = reference(&w, &ids, &types);
            let diff = (got[i] as f64 - want).abs();
            worst = worst.max(diff);
            lo = lo.min(want);
            hi = hi.max(want);
            assert!(
                diff < 1e-4,
                "query {q:?} passage {i} {p:?}: got {} want {want} (diff {diff:.2e})",
                got[i]
            );
        }
    }
    assert!(
        truncated > 0,
        "the pairs should include some that need truncation"
    );
    assert!(
        hi - lo > 0.5,
        "scores barely vary ({lo}..{hi}): a weak test"
    );
    println!("{tag}: max |diff| {worst:.2e}, logits {lo:.3}..{hi:.3}, {truncated} truncated");
}

#[test]
fn scores_match_scalar_reference() {
    check_against_reference("ref", 2, 8, None);
}

#[test]
fn scores_match_scalar_reference_one_by_one() {
    check_against_reference("ref1", 1, 1, None);
}

#[test]
fn truncation_is_longest_first_within_the_window() {
    // window 12 = 9 text tokens: both long (half each), only the passage long, only the
    // query long, and tie lengths.
    check_against_reference("trunc12", 2, 4, Some(12));
    assert_eq!(longest_first(2, 15, 9), (2, 7));
    assert_eq!(longest_first(12, 3, 9), (6, 3));
    assert_eq!(longest_first(10, 10, 9), (4, 5));
    assert_eq!(longest_first(20, 6, 9), (5, 4));
    assert_eq!(longest_first(3, 6, 9), (3, 6));
    // A window larger than the position table is capped by it.
    let (d, _) = good_dir("cap");
    assert_eq!(load(&d.0, 1, 4, Some(4096)).info().max_length, MAXPOS);
}

#[test]
fn batching_and_sorting_do_not_change_scores() {
    let (d, _) = good_dir("batch");
    let one = load(&d.0, 1, 1, None);
    let eight = load(&d.0, 2, 8, None);
    let three = load(&d.0, 2, 3, None);
    for q in QUERIES {
        let a = one.score(q, PASSAGES).unwrap();
        let b = eight.score(q, PASSAGES).unwrap();
        let c = three.score(q, PASSAGES).unwrap();
        assert!(
            max_diff(&a, &b) < 1e-5,
            "batch 1 vs 8: {:e}",
            max_diff(&a, &b)
        );
        assert!(
            max_diff(&a, &c) < 1e-5,
            "batch 1 vs 3: {:e}",
            max_diff(&a, &c)
        );
        // Each pair alone gives its batched score.
        for (i, p) in PASSAGES.iter().enumerate() {
            let solo = eight.score(q, &[p]).unwrap();
            assert!((solo[0] - b[i]).abs() < 1e-5, "{q:?} / {p:?}");
        }
    }
}

#[test]
fn order_is_preserved() {
    let (d, _) = good_dir("order");
    let ce = load(&d.0, 2, 4, None);
    let fwd = ce.score("the big dog", PASSAGES).unwrap();
    let rev: Vec<&str> = PASSAGES.iter().rev().copied().collect();
    let mut back = ce.score("the big dog", &rev).unwrap();
    back.reverse();
    assert!(max_diff(&fwd, &back) < 1e-5);
    // Same passage twice (first and last) gives the same score; different ones differ.
    assert!((fwd[0] - fwd[PASSAGES.len() - 1]).abs() < 1e-6);
    assert!((fwd[0] - fwd[1]).abs() > 1e-3);
}

#[test]
fn segment_ids_matter() {
    let (d, w) = good_dir("segments");
    let ce = load(&d.0, 2, 8, None);
    let q = "the big dog";
    let p = "the cat sat on the mat";
    let got = ce.score(q, &[p]).unwrap()[0] as f64;
    let (ids, types) = pair_ids(q, p, MAXPOS);
    assert!(types.contains(&1) && types[0] == 0);
    let right = reference(&w, &ids, &types);
    let all_zero = reference(&w, &ids, &vec![0; ids.len()]);
    assert!((got - right).abs() < 1e-4);
    assert!(
        (got - all_zero).abs() > 1e-2,
        "segment ids made no difference: {got} vs {all_zero}"
    );
    // Swapping query and passage is a different input.
    let swapped = ce.score(p, &[q]).unwrap()[0] as f64;
    assert!((got - swapped).abs() > 1e-3);
}

#[test]
fn empty_inputs() {
    let (d, w) = good_dir("empty");
    let ce = load(&d.0, 2, 8, None);
    assert!(ce.score("the cat", &[]).unwrap().is_empty());
    let s = ce.score("", &["", "cat"]).unwrap();
    assert_eq!(s.len(), 2);
    assert!((s[0] as f64 - reference(&w, &[2, 3, 3], &[0, 0, 1])).abs() < 1e-4);
}

#[test]
fn info_and_activation() {
    let (d, _) = good_dir("info");
    let ce = load(&d.0, 1, 8, None);
    let i = ce.info();
    assert_eq!(i.name, "tiny-test-cross");
    assert_eq!(i.labels, 1);
    assert_eq!(i.max_length, MAXPOS);
    assert_eq!(i.activation, "sigmoid");
    assert_eq!(i.checksum.len(), 8);
    let crc = format!(
        "{:08x}",
        crc32fast_reference(&fs::read(d.path("model.safetensors")).unwrap())
    );
    assert_eq!(i.checksum, crc);
    assert_eq!(ce.threads(), 1);

    for (key, value, want) in [
        (
            "sbert_ce_default_activation_function",
            serde_json::json!("torch.nn.modules.linear.Identity"),
            "identity",
        ),
        (
            "sentence_transformers",
            serde_json::json!({"activation_fn": "torch.nn.modules.activation.Sigmoid",
                "version": "4.0.1"}),
            "sigmoid",
        ),
    ] {
        let mut c = config(1);
        c[key] = value;
        fs::write(d.path("config.json"), c.to_string()).unwrap();
        assert_eq!(load(&d.0, 1, 8, None).info().activation, want);
    }
    // num_labels alone (no id2label) and unprefixed weights are fine too; so is a 2-row
    // token type table being the only segment info.
    let mut c = config(1);
    c.as_object_mut().unwrap().remove("id2label");
    c["num_labels"] = serde_json::json!(1);
    c.as_object_mut().unwrap().remove("_name_or_path");
    fs::write(d.path("config.json"), c.to_string()).unwrap();
    let w = random_weights(SEED, "", 1);
    write_safetensors(&d.path("model.safetensors"), &w);
    let ce2 = load(&d.0, 1, 8, None);
    assert!(ce2.info().name.starts_with("searchd-cross-test-info"));
    assert!(
        max_diff(
            &ce.score("dog", PASSAGES).unwrap(),
            &ce2.score("dog", PASSAGES).unwrap()
        ) < 1e-6
    );
}

/// Bitwise CRC-32 (IEEE), to check `checksum` without depending on crc32fast.
fn crc32fast_reference(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[test]
fn send_sync_and_shared_across_threads() {
    fn check<T: Send + Sync>() {}
    check::<CrossEncoder>();
    let (d, _) = good_dir("arc");
    let ce = std::sync::Arc::new(load(&d.0, 2, 4, None));
    let solo = ce.score("the big dog", PASSAGES).unwrap();
    let hs: Vec<_> = (0..3)
        .map(|_| {
            let ce = ce.clone();
            std::thread::spawn(move || ce.score("the big dog", PASSAGES).unwrap())
        })
        .collect();
    for h in hs {
        assert!(max_diff(&h.join().unwrap(), &solo) < 1e-6);
    }
}

// ---------------------------------------------------------------- not a cross-encoder

fn load_err(dir: &Path) -> Error {
    CrossEncoder::load(dir, &EmbedConfig::default()).expect_err("load should fail")
}

fn assert_not_cross(e: &Error, needle: &str) {
    assert!(matches!(e, Error::NotCrossEncoder(_)), "{e}");
    assert!(e.to_string().contains(needle), "{e}");
}

#[test]
fn sentence_embedding_model_dir_is_refused() {
    // What sentence-transformers saves for an embedding model: BertModel, no classifier.
    let d = TmpDir::new("st-embed");
    let mut w = random_weights(SEED, "", 1);
    w.remove("classifier.weight");
    w.remove("classifier.bias");
    let mut c = config(1);
    c["architectures"] = serde_json::json!(["BertModel"]);
    c.as_object_mut().unwrap().remove("id2label");
    write_cross(&d.0, &w, &c);
    fs::write(
        d.path("modules.json"),
        r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
            {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]"#,
    )
    .unwrap();
    let e = load_err(&d.0);
    assert_not_cross(&e, "BertModel");
    assert!(e.to_string().contains("config.json"), "{e}");

    // No architectures at all: refused by the missing classifier instead.
    c.as_object_mut().unwrap().remove("architectures");
    c["num_labels"] = serde_json::json!(1);
    fs::write(d.path("config.json"), c.to_string()).unwrap();
    assert_not_cross(&load_err(&d.0), "classifier.weight");

    // Claims BertForSequenceClassification but has no head.
    fs::write(d.path("config.json"), config(1).to_string()).unwrap();
    assert_not_cross(&load_err(&d.0), "classifier");
}

#[test]
fn label_counts_other_than_one_are_refused() {
    let d = TmpDir::new("labels");
    write_cross(&d.0, &random_weights(SEED, "bert.", 3), &config(3));
    assert_not_cross(&load_err(&d.0), "3 labels");
    // Neither num_labels nor id2label: transformers' default of 2.
    let mut c = config(1);
    c.as_object_mut().unwrap().remove("id2label");
    write_cross(&d.0, &random_weights(SEED, "bert.", 2), &c);
    assert_not_cross(&load_err(&d.0), "2 labels");
    c["num_labels"] = serde_json::json!(2);
    fs::write(d.path("config.json"), c.to_string()).unwrap();
    assert_not_cross(&load_err(&d.0), "2 labels");
    // Inconsistent num_labels / id2label.
    let mut c = config(1);
    c["num_labels"] = serde_json::json!(2);
    fs::write(d.path("config.json"), c.to_string()).unwrap();
    assert!(matches!(load_err(&d.0), Error::Config { .. }));
}

#[test]
fn missing_files_are_named() {
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        let (d, _) = good_dir(&format!("missing-{f}"));
        fs::remove_file(d.path(f)).unwrap();
        let e = load_err(&d.0);
        assert!(
            matches!(e, Error::MissingFile { ref path, .. } if path.ends_with(f)),
            "{f}: {e}"
        );
        assert!(e.to_string().contains(f), "{e}");
    }
}

#[test]
fn non_bert_model_type_is_refused() {
    let (d, _) = good_dir("roberta");
    let mut c = config(1);
    c["model_type"] = serde_json::json!("roberta");
    c["architectures"] = serde_json::json!(["RobertaForSequenceClassification"]);
    fs::write(d.path("config.json"), c.to_string()).unwrap();
    let e = load_err(&d.0);
    assert!(
        matches!(e, Error::UnsupportedModel { ref model_type, .. } if model_type == "roberta"),
        "{e}"
    );
    c.as_object_mut().unwrap().remove("model_type");
    fs::write(d.path("config.json"), c.to_string()).unwrap();
    assert!(matches!(load_err(&d.0), Error::UnsupportedModel { .. }));
}

#[test]
fn bad_head_weights_are_errors() {
    let (d, w) = good_dir("no-pooler");
    let mut w2 = w.clone();
    w2.remove("bert.pooler.dense.weight");
    write_safetensors(&d.path("model.safetensors"), &w2);
    let e = load_err(&d.0);
    assert!(matches!(e, Error::Weights { .. }), "{e}");
    assert!(e.to_string().contains("pooler.dense.weight"), "{e}");

    let mut w2 = w.clone();
    w2.remove("classifier.bias");
    write_safetensors(&d.path("model.safetensors"), &w2);
    let e = load_err(&d.0);
    assert!(matches!(e, Error::Weights { .. }), "{e}");
    assert!(e.to_string().contains("classifier.bias"), "{e}");

    let mut w2 = w.clone();
    w2.insert(
        "classifier.weight".into(),
        (vec![1, H - 1], vec![0.0; H - 1]),
    );
    write_safetensors(&d.path("model.safetensors"), &w2);
    assert!(matches!(load_err(&d.0), Error::Weights { .. }));

    let mut w2 = w.clone();
    w2.remove("bert.encoder.layer.1.output.dense.weight");
    write_safetensors(&d.path("model.safetensors"), &w2);
    let e = load_err(&d.0);
    assert!(
        e.to_string()
            .contains("encoder.layer.1.output.dense.weight"),
        "{e}"
    );

    let b = fs::read(d.path("model.safetensors")).unwrap();
    fs::write(d.path("model.safetensors"), &b[..b.len() / 2]).unwrap();
    assert!(matches!(load_err(&d.0), Error::Weights { .. }));
}

#[test]
fn bad_configs_and_tokenizers_are_errors() {
    let (d, _) = good_dir("cfgs");
    let bad = |c: EmbedConfig| CrossEncoder::load(&d.0, &c).expect_err("bad config");
    assert!(matches!(
        bad(EmbedConfig {
            batch_size: 0,
            ..Default::default()
        }),
        Error::InvalidConfig(_)
    ));
    // 3 tokens are all special: no room for text.
    for m in [0, 1, 3] {
        assert!(matches!(
            bad(EmbedConfig {
                max_length: Some(m),
                ..Default::default()
            }),
            Error::InvalidConfig(_)
        ));
    }
    let ce = load(&d.0, 1, 2, Some(4));
    let s = ce.score("the big dog", &["cat", LONG]).unwrap();
    assert_eq!(s.len(), 2);

    fs::write(d.path("tokenizer.json"), tokenizer_json(false)).unwrap();
    let e = load_err(&d.0);
    assert!(matches!(e, Error::Tokenizer(_)), "{e}");
    assert!(e.to_string().contains("post_processor"), "{e}");
    fs::write(d.path("tokenizer.json"), "not json").unwrap();
    assert!(matches!(load_err(&d.0), Error::Tokenizer(_)));
    fs::write(d.path("config.json"), "{\"model_type\": \"bert\", ").unwrap();
    assert!(matches!(load_err(&d.0), Error::Config { .. }));
}

#[test]
fn token_id_outside_vocab_is_an_error_not_a_panic() {
    let (d, _) = good_dir("big-id");
    let p = d.path("tokenizer.json");
    let mut t: serde_json::Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
    t["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
        "id": 100, "special": false, "content": "zzextra", "single_word": false,
        "lstrip": false, "rstrip": false, "normalized": false}));
    fs::write(&p, t.to_string()).unwrap();
    let ce = load(&d.0, 1, 8, None);
    assert!(ce.score("the", &["cat"]).is_ok());
    let err = ce.score("the", &["the zzextra cat"]).unwrap_err();
    assert!(matches!(err, Error::Tokenizer(_)), "{err}");
    assert!(err.to_string().contains("vocab_size"), "{err}");
}

#[test]
fn real_embedding_model_is_not_a_cross_encoder() {
    let Some(dir) = searchd_testkit::needs::model("real_embedding_model_is_not_a_cross_encoder")
    else {
        return;
    };
    let e = load_err(&dir);
    assert_not_cross(&e, "BertModel");
}
