//! A random-weight sentence-transformers BERT written to a directory (WordPiece
//! `tokenizer.json`, `config.json`, safetensors via the `safetensors` crate, pooling and
//! normalize modules), of any [`Shape`]: the tiny one the tests check against a scalar
//! forward pass, and MiniLM-L6's, whose forward pass costs what the real model's does (the
//! `embed` benchmark). Shared by `tests/tiny_model.rs` and `benches/embed.rs`.

#![allow(dead_code)] // each user takes a part

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, TensorView};

/// A BERT's sizes.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub inter: usize,
    pub maxpos: usize,
}

impl Shape {
    /// all-MiniLM-L6-v2's sizes (384 wide, 6 layers of 12 heads, 1,536 intermediate).
    pub const MINILM_L6: Shape = Shape {
        hidden: 384,
        layers: 6,
        heads: 12,
        inter: 1536,
        maxpos: 512,
    };
}

/// LayerNorm epsilon of the written config.
pub const EPS: f64 = 1e-12;

pub const VOCAB: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "on", "mat",
    "run", "##s", "##ning", "##ed", "big", "small", "red", "blue", "and", "is", "was", ",", ".",
    ":", "query", "passage", "fish", "bird", "tree", "house", "walk", "jump", "over", "under",
];

pub fn tokenizer_json() -> String {
    let vocab: serde_json::Map<String, serde_json::Value> = VOCAB
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), serde_json::json!(i)))
        .collect();
    let special = |id: u32, tok: &str| {
        serde_json::json!({"id": id, "special": true, "content": tok, "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": false})
    };
    serde_json::json!({
        "version": "1.0",
        // Deliberately set: the embedder must ignore the file's own truncation/padding.
        "truncation": {"max_length": 8, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 16}, "direction": "Right", "pad_to_multiple_of": null,
            "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": [special(0, "[PAD]"), special(1, "[UNK]"), special(2, "[CLS]"),
            special(3, "[SEP]"), special(4, "[MASK]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
            "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
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
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100, "vocab": vocab}
    })
    .to_string()
}

/// Deterministic xorshift weights in [-scale, scale).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale).collect()
    }
}

/// Weights by name (no prefix), each with its shape.
pub type W = HashMap<String, (Vec<usize>, Vec<f32>)>;

pub fn random_weights(seed: u64, shape: &Shape) -> W {
    let Shape {
        hidden: h,
        layers,
        inter,
        maxpos,
        ..
    } = *shape;
    let mut r = Rng(seed);
    let mut w = W::new();
    let v = VOCAB.len();
    let put = |w: &mut W, n: &str, shape: Vec<usize>, scale: f32, r: &mut Rng| {
        let len = shape.iter().product();
        w.insert(n.to_string(), (shape, r.vec(len, scale)));
    };
    put(
        &mut w,
        "embeddings.word_embeddings.weight",
        vec![v, h],
        1.0,
        &mut r,
    );
    put(
        &mut w,
        "embeddings.position_embeddings.weight",
        vec![maxpos, h],
        0.5,
        &mut r,
    );
    put(
        &mut w,
        "embeddings.token_type_embeddings.weight",
        vec![2, h],
        0.5,
        &mut r,
    );
    let ln = |w: &mut W, p: &str, r: &mut Rng| {
        let g: Vec<f32> = r.vec(h, 0.3).iter().map(|x| 1.0 + x).collect();
        w.insert(format!("{p}.weight"), (vec![h], g));
        w.insert(format!("{p}.bias"), (vec![h], r.vec(h, 0.2)));
    };
    ln(&mut w, "embeddings.LayerNorm", &mut r);
    for l in 0..layers {
        let p = format!("encoder.layer.{l}");
        for (n, o, i) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inter, h),
            ("output.dense", h, inter),
        ] {
            let s = 1.5 / (i as f32).sqrt();
            put(&mut w, &format!("{p}.{n}.weight"), vec![o, i], s, &mut r);
            put(&mut w, &format!("{p}.{n}.bias"), vec![o], 0.1, &mut r);
        }
        ln(&mut w, &format!("{p}.attention.output.LayerNorm"), &mut r);
        ln(&mut w, &format!("{p}.output.LayerNorm"), &mut r);
    }
    // A pooler head sentence-transformers ignores; the embedder must too.
    put(&mut w, "pooler.dense.weight", vec![h, h], 0.1, &mut r);
    put(&mut w, "pooler.dense.bias", vec![h], 0.1, &mut r);
    w
}

pub fn write_safetensors(path: &Path, w: &W, prefix: &str) {
    let bytes: HashMap<String, (Vec<usize>, Vec<u8>)> = w
        .iter()
        .map(|(k, (s, d))| {
            let b: Vec<u8> = d.iter().flat_map(|x| x.to_le_bytes()).collect();
            (format!("{prefix}{k}"), (s.clone(), b))
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
    let out = safetensors::serialize(views, None).unwrap();
    fs::write(path, out).unwrap();
}

pub struct TmpDir(pub PathBuf);
impl TmpDir {
    pub fn new(tag: &str) -> TmpDir {
        let p = std::env::temp_dir().join(format!(
            "searchd-embed-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TmpDir(p)
    }
}
impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub struct Opts<'a> {
    pub prefix: &'a str,
    pub pooling: &'a str,
    pub normalize: bool,
    pub max_seq: usize,
    pub prompts: Option<serde_json::Value>,
}
impl Default for Opts<'_> {
    fn default() -> Self {
        Opts {
            prefix: "",
            pooling: "mean",
            normalize: true,
            max_seq: 32,
            prompts: None,
        }
    }
}

pub fn write_model(dir: &Path, w: &W, o: &Opts, shape: &Shape) {
    let Shape {
        hidden: h,
        layers,
        heads,
        inter,
        maxpos,
    } = *shape;
    let cfg = serde_json::json!({
        "_name_or_path": "tiny-test-bert", "architectures": ["BertModel"], "model_type": "bert",
        "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
        "intermediate_size": inter, "layer_norm_eps": EPS, "max_position_embeddings": maxpos,
        "type_vocab_size": 2, "vocab_size": VOCAB.len(), "hidden_act": "gelu",
        "position_embedding_type": "absolute", "pad_token_id": 0
    });
    fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    fs::write(dir.join("tokenizer.json"), tokenizer_json()).unwrap();
    write_safetensors(&dir.join("model.safetensors"), w, o.prefix);
    fs::write(
        dir.join("sentence_bert_config.json"),
        serde_json::json!({"max_seq_length": o.max_seq, "do_lower_case": false}).to_string(),
    )
    .unwrap();
    let mut mods = vec![
        serde_json::json!({"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}),
        serde_json::json!({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}),
    ];
    if o.normalize {
        mods.push(serde_json::json!({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}));
    }
    fs::write(
        dir.join("modules.json"),
        serde_json::Value::from(mods).to_string(),
    )
    .unwrap();
    fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    fs::write(
        dir.join("1_Pooling/config.json"),
        serde_json::json!({
            "word_embedding_dimension": h,
            "pooling_mode_cls_token": o.pooling == "cls",
            "pooling_mode_mean_tokens": o.pooling == "mean",
            "pooling_mode_max_tokens": o.pooling == "max",
            "pooling_mode_mean_sqrt_len_tokens": false
        })
        .to_string(),
    )
    .unwrap();
    if let Some(p) = &o.prompts {
        fs::write(
            dir.join("config_sentence_transformers.json"),
            serde_json::json!({"prompts": p, "default_prompt_name": null}).to_string(),
        )
        .unwrap();
    }
}
