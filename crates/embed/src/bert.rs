//! A compact BERT encoder forward pass on candle-core / candle-nn (CPU, f32).
//!
//! Only what a sentence-transformers encoder or a cross-encoder needs: embeddings (word +
//! position + token type; type 0 throughout unless segment ids are given) with LayerNorm,
//! then `num_hidden_layers` post-LN transformer blocks. Q, K and V
//! are fused into one `(h, 3h)` matmul at load time and every weight is stored transposed
//! and contiguous, so each linear layer is one gemm over all `batch x seq` rows.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use crate::ops::{embed_norm, Act, Attention, BiasAct, BiasResidualNorm, Seqs};
use crate::Error;

/// The fields of a Hugging Face `config.json` that the forward pass uses.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct BertConfig {
    #[serde(default, rename = "_name_or_path")]
    pub name_or_path: Option<String>,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    pub vocab_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

fn default_eps() -> f64 {
    1e-12
}
fn default_type_vocab() -> usize {
    2
}
fn default_act() -> String {
    "gelu".to_string()
}

struct Linear {
    /// `(in, out)`, contiguous.
    w_t: Tensor,
    b: Vec<f32>,
}

struct Norm {
    g: Vec<f32>,
    b: Vec<f32>,
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    inter: Linear,
    out: Linear,
    out_norm: Norm,
}

pub(crate) struct Bert {
    pub cfg: BertConfig,
    act: Act,
    word: Vec<f32>,
    pos: Vec<f32>,
    /// Token type table, `(type_vocab_size, h)` row-major.
    types: Vec<f32>,
    emb_norm: Norm,
    layers: Vec<Layer>,
    device: Device,
}

/// Looks a tensor up under `name` or `bert.name`.
struct Weights<'a> {
    map: HashMap<String, Tensor>,
    file: &'a Path,
}

impl Weights<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor, Error> {
        let t = self
            .map
            .get(name)
            .or_else(|| self.map.get(&format!("bert.{name}")))
            .ok_or_else(|| Error::Weights {
                path: self.file.to_path_buf(),
                msg: format!("tensor `{name}` (or `bert.{name}`) not found"),
            })?;
        if t.dims() != shape {
            return Err(Error::Weights {
                path: self.file.to_path_buf(),
                msg: format!(
                    "tensor `{name}` has shape {:?}, config.json implies {:?}",
                    t.dims(),
                    shape
                ),
            });
        }
        Ok(t.to_dtype(DType::F32)?)
    }

    /// LayerNorm weight/bias, also under the old `gamma`/`beta` names.
    fn norm(&self, prefix: &str, h: usize) -> Result<Norm, Error> {
        let has = |n: &str| {
            self.map.contains_key(&format!("{prefix}.{n}"))
                || self.map.contains_key(&format!("bert.{prefix}.{n}"))
        };
        let (g, b) = if !has("weight") && has("gamma") {
            ("gamma", "beta")
        } else {
            ("weight", "bias")
        };
        Ok(Norm {
            g: self.get(&format!("{prefix}.{g}"), &[h])?.to_vec1()?,
            b: self.get(&format!("{prefix}.{b}"), &[h])?.to_vec1()?,
        })
    }

    fn linear(&self, prefix: &str, out: usize, inp: usize) -> Result<Linear, Error> {
        let w = self.get(&format!("{prefix}.weight"), &[out, inp])?;
        let b = self.get(&format!("{prefix}.bias"), &[out])?.to_vec1()?;
        Ok(Linear {
            w_t: w.t()?.contiguous()?,
            b,
        })
    }
}

impl Bert {
    pub(crate) fn load(
        cfg: BertConfig,
        tensors: HashMap<String, Tensor>,
        file: &Path,
    ) -> Result<Bert, Error> {
        let act = match cfg.hidden_act.as_str() {
            "gelu" => Act::GeluErf,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Act::GeluTanh,
            "relu" => Act::Relu,
            other => {
                return Err(Error::Config {
                    path: file.with_file_name("config.json"),
                    msg: format!("unsupported hidden_act `{other}`"),
                })
            }
        };
        if let Some(p) = &cfg.position_embedding_type {
            if p != "absolute" {
                return Err(Error::Config {
                    path: file.with_file_name("config.json"),
                    msg: format!("unsupported position_embedding_type `{p}` (only absolute)"),
                });
            }
        }
        let h = cfg.hidden_size;
        if cfg.num_attention_heads == 0
            || (h / cfg.num_attention_heads) * cfg.num_attention_heads != h
        {
            return Err(Error::Config {
                path: file.with_file_name("config.json"),
                msg: format!(
                    "hidden_size {h} is not a multiple of num_attention_heads {}",
                    cfg.num_attention_heads
                ),
            });
        }
        let w = Weights { map: tensors, file };
        let word = w.get("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?;
        let pos = w.get(
            "embeddings.position_embeddings.weight",
            &[cfg.max_position_embeddings, h],
        )?;
        let types = w.get(
            "embeddings.token_type_embeddings.weight",
            &[cfg.type_vocab_size, h],
        )?;
        if cfg.type_vocab_size == 0 {
            return Err(Error::Config {
                path: file.with_file_name("config.json"),
                msg: "type_vocab_size must be positive".into(),
            });
        }
        let types = types.flatten_all()?.to_vec1()?;
        let word = word.flatten_all()?.to_vec1()?;
        let pos = pos.flatten_all()?.to_vec1()?;
        let emb_norm = w.norm("embeddings.LayerNorm", h)?;
        let i = cfg.intermediate_size;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for l in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let q = w.linear(&format!("{p}.attention.self.query"), h, h)?;
            let k = w.linear(&format!("{p}.attention.self.key"), h, h)?;
            let v = w.linear(&format!("{p}.attention.self.value"), h, h)?;
            let qkv = Linear {
                w_t: Tensor::cat(&[&q.w_t, &k.w_t, &v.w_t], 1)?.contiguous()?,
                b: [q.b, k.b, v.b].concat(),
            };
            layers.push(Layer {
                qkv,
                attn_out: w.linear(&format!("{p}.attention.output.dense"), h, h)?,
                attn_norm: w.norm(&format!("{p}.attention.output.LayerNorm"), h)?,
                inter: w.linear(&format!("{p}.intermediate.dense"), i, h)?,
                out: w.linear(&format!("{p}.output.dense"), h, i)?,
                out_norm: w.norm(&format!("{p}.output.LayerNorm"), h)?,
            });
        }
        Ok(Bert {
            cfg,
            act,
            word,
            pos,
            types,
            emb_norm,
            layers,
            device: Device::Cpu,
        })
    }

    /// Runs the encoder on `b` sequences of `s` token ids each (row-major `ids`, padded
    /// with anything), `lens[r]` real tokens in row `r`, all of token type 0. Returns the
    /// last hidden state, `b x s x h` row-major.
    pub(crate) fn forward(
        &self,
        ids: &[u32],
        lens: &[usize],
        s: usize,
    ) -> candle_core::Result<Vec<f32>> {
        let starts: Vec<usize> = (0..lens.len()).map(|r| r * s).collect();
        let seqs = Seqs {
            starts: &starts,
            lens,
            rows: lens.len() * s,
        };
        self.run(ids, None, seqs, false)?
            .flatten_all()?
            .to_vec1::<f32>()
    }

    /// Runs the encoder on packed sequences: `ids` and `type_ids` (each `< vocab_size` /
    /// `< type_vocab_size`) are the `lens[0]` tokens of sequence 0, then the `lens[1]` of
    /// sequence 1, and so on, with no padding. Returns only the first (`[CLS]`) row of
    /// the last hidden state per sequence, `(b, h)`. The last layer's attention output
    /// and feed-forward run on those `b` rows only; every layer before it is needed in
    /// full.
    pub(crate) fn forward_cls_packed(
        &self,
        ids: &[u32],
        type_ids: &[u32],
        lens: &[usize],
    ) -> candle_core::Result<Tensor> {
        let mut starts = Vec::with_capacity(lens.len());
        let mut rows = 0;
        for &l in lens {
            starts.push(rows);
            rows += l;
        }
        if ids.len() != rows || type_ids.len() != rows || lens.contains(&0) {
            candle_core::bail!("packed forward: {} ids for lens {lens:?}", ids.len());
        }
        let seqs = Seqs {
            starts: &starts,
            lens,
            rows,
        };
        self.run(ids, Some(type_ids), seqs, true)
    }

    fn run(
        &self,
        ids: &[u32],
        type_ids: Option<&[u32]>,
        seqs: Seqs<'_>,
        cls_only: bool,
    ) -> candle_core::Result<Tensor> {
        let h = self.cfg.hidden_size;
        let nh = self.cfg.num_attention_heads;
        let hd = h / nh;
        let eps = self.cfg.layer_norm_eps as f32;
        let dev = &self.device;

        let x = embed_norm(
            ids,
            type_ids,
            seqs,
            &self.word,
            &self.pos,
            &self.types,
            &self.emb_norm.g,
            &self.emb_norm.b,
            eps,
        );
        let mut x = Tensor::from_vec(x, (seqs.rows, h), dev)?;
        // The first row of each sequence out of `(rows, h)`.
        let first: Vec<u32> = seqs.starts.iter().map(|&st| st as u32).collect();
        let first = Tensor::from_vec(first, seqs.starts.len(), dev)?;
        let cls_rows = |x: &Tensor| x.index_select(&first, 0);
        let n_layers = self.layers.len();
        if cls_only && n_layers == 0 {
            return cls_rows(&x);
        }
        for (li, layer) in self.layers.iter().enumerate() {
            let last_cls = cls_only && li + 1 == n_layers;
            let attn = Attention {
                seqs,
                heads: nh,
                scale: 1.0 / (hd as f32).sqrt(),
                cls_only: last_cls,
            };
            // (rows, 3h): q | k | v per row.
            let qkv = x.matmul(&layer.qkv.w_t)?.apply_op1_no_bwd(&BiasAct {
                bias: &layer.qkv.b,
                act: Act::None,
            })?;
            // (rows, h), or (b, h) for the [CLS] rows only.
            let ctx = qkv.apply_op1_no_bwd(&attn)?;
            let resid = if last_cls { cls_rows(&x)? } else { x };
            let a = ctx.matmul(&layer.attn_out.w_t)?.apply_op2_no_bwd(
                &resid,
                &BiasResidualNorm {
                    bias: &layer.attn_out.b,
                    gamma: &layer.attn_norm.g,
                    beta: &layer.attn_norm.b,
                    eps,
                },
            )?;
            let i = a.matmul(&layer.inter.w_t)?.apply_op1_no_bwd(&BiasAct {
                bias: &layer.inter.b,
                act: self.act,
            })?;
            x = i.matmul(&layer.out.w_t)?.apply_op2_no_bwd(
                &a,
                &BiasResidualNorm {
                    bias: &layer.out.b,
                    gamma: &layer.out_norm.g,
                    beta: &layer.out_norm.b,
                    eps,
                },
            )?;
        }
        Ok(x)
    }

    /// Padded-window sanity: the largest sequence the position table allows.
    pub(crate) fn max_positions(&self) -> usize {
        self.cfg.max_position_embeddings
    }
}
