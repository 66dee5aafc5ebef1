//! A BERT cross-encoder (reranker): Hugging Face `BertForSequenceClassification` with one
//! label, as sentence-transformers' `CrossEncoder` runs it. See the crate docs.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;
use tokenizers::{
    EncodeInput, Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy,
};

use crate::bert::{Bert, BertConfig};
use crate::{dir_name, parse, read, read_opt, EmbedConfig, Error, ModelType};

/// What [`CrossEncoder::load`] loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossInfo {
    /// `_name_or_path` of config.json, else the directory's name (its parent's when the
    /// directory is just called `model`).
    pub name: String,
    /// crc32 of `model.safetensors`, 8 lowercase hex digits.
    pub checksum: String,
    /// Effective token window for a whole pair (`[CLS]`, both texts, both `[SEP]`s).
    pub max_length: usize,
    /// Output labels; always 1 (anything else is refused at load).
    pub labels: usize,
    /// The activation sentence-transformers' `CrossEncoder.predict` would apply on top
    /// of the logit (`identity`, `sigmoid`, or the class name lowercased), from the
    /// model's config; sentence-transformers' default for one label is `sigmoid`.
    /// Informational: [`CrossEncoder::score`] always returns the raw logit (every such
    /// activation is monotonic, so rankings are the same).
    pub activation: String,
}

/// A loaded cross-encoder. `Send + Sync`: share it behind an `Arc`; concurrent `score`
/// calls share its thread pool.
pub struct CrossEncoder {
    bert: Bert,
    tokenizer: Tokenizer,
    info: CrossInfo,
    /// Pooler dense weight transposed, `(h, h)` contiguous.
    pool_w_t: Tensor,
    pool_b: Vec<f32>,
    /// Classifier row `(h,)` and bias.
    cls_w: Vec<f32>,
    cls_b: f32,
    batch_size: usize,
    pool: rayon::ThreadPool,
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder")
            .field("info", &self.info)
            .field("batch_size", &self.batch_size)
            .field("threads", &self.pool.current_num_threads())
            .finish()
    }
}

/// The classification fields of a Hugging Face config.json.
#[derive(Deserialize)]
struct ClassifierConfig {
    #[serde(default)]
    architectures: Option<Vec<String>>,
    #[serde(default)]
    num_labels: Option<usize>,
    #[serde(default)]
    id2label: Option<HashMap<String, String>>,
    /// sentence-transformers < 4.
    #[serde(default)]
    sbert_ce_default_activation_function: Option<String>,
    /// sentence-transformers >= 4: `{"activation_fn": "torch.nn.modules...", ...}`.
    #[serde(default)]
    sentence_transformers: Option<StActivation>,
}

#[derive(Deserialize, Default)]
struct StActivation {
    #[serde(default)]
    activation_fn: Option<String>,
}

fn activation_name(class: &str) -> String {
    match class.rsplit('.').next().unwrap_or(class) {
        "Identity" => "identity".into(),
        "Sigmoid" => "sigmoid".into(),
        other => other.to_ascii_lowercase(),
    }
}

/// Removes the first of `names` present and checks its shape.
fn take(
    map: &mut HashMap<String, Tensor>,
    names: &[&str],
    shape: &[usize],
    file: &Path,
) -> Result<Option<Tensor>, Error> {
    let Some(t) = names.iter().find_map(|n| map.remove(*n)) else {
        return Ok(None);
    };
    if t.dims() != shape {
        return Err(Error::Weights {
            path: file.to_path_buf(),
            msg: format!(
                "tensor `{}` has shape {:?}, config.json implies {:?}",
                names[0],
                t.dims(),
                shape
            ),
        });
    }
    Ok(Some(t.to_dtype(DType::F32)?))
}

fn need(t: Option<Tensor>, name: &str, file: &Path) -> Result<Tensor, Error> {
    t.ok_or_else(|| Error::Weights {
        path: file.to_path_buf(),
        msg: format!("tensor `{name}` not found"),
    })
}

impl CrossEncoder {
    /// Loads a Hugging Face `BertForSequenceClassification` directory with one label
    /// (`config.json`, `model.safetensors`, `tokenizer.json`). Reads everything into
    /// memory; no network. Anything that is not such a cross-encoder (a sentence
    /// embedding model, several labels) gives [`Error::NotCrossEncoder`].
    pub fn load(dir: &Path, cfg: &EmbedConfig) -> Result<CrossEncoder, Error> {
        if cfg.batch_size == 0 {
            return Err(Error::InvalidConfig("batch_size must be >= 1".into()));
        }

        // config.json: architecture, then the head.
        let cfg_path = dir.join("config.json");
        let cfg_bytes = read(&cfg_path, "BERT config")?;
        let mt: ModelType = parse(&cfg_path, &cfg_bytes)?;
        match mt.model_type.as_deref() {
            Some("bert") => {}
            other => {
                return Err(Error::UnsupportedModel {
                    path: cfg_path,
                    model_type: other.unwrap_or("<none>").to_string(),
                })
            }
        }
        let ccfg: ClassifierConfig = parse(&cfg_path, &cfg_bytes)?;
        if let Some(archs) = &ccfg.architectures {
            if !archs
                .iter()
                .any(|a| a.ends_with("ForSequenceClassification"))
            {
                return Err(Error::NotCrossEncoder(format!(
                    "{}: architectures {archs:?} has no *ForSequenceClassification (this looks \
                     like an embedding model; a reranker is a BertForSequenceClassification \
                     such as cross-encoder/ms-marco-MiniLM-L-6-v2)",
                    cfg_path.display()
                )));
            }
        }
        let labels = match (&ccfg.id2label, ccfg.num_labels) {
            (Some(m), Some(n)) if m.len() != n => {
                return Err(Error::Config {
                    path: cfg_path,
                    msg: format!("num_labels {n} but id2label has {} entries", m.len()),
                })
            }
            (Some(m), _) => m.len(),
            (None, Some(n)) => n,
            // transformers' PretrainedConfig default.
            (None, None) => 2,
        };
        if labels != 1 {
            return Err(Error::NotCrossEncoder(format!(
                "{}: {labels} labels (num_labels / id2label; 2 is the default when neither is \
                 set); a reranker has exactly one relevance logit",
                cfg_path.display()
            )));
        }
        let bcfg: BertConfig = parse(&cfg_path, &cfg_bytes)?;
        if bcfg.hidden_size == 0 || bcfg.vocab_size == 0 || bcfg.max_position_embeddings < 2 {
            return Err(Error::Config {
                path: cfg_path,
                msg: "hidden_size, vocab_size and max_position_embeddings must be positive".into(),
            });
        }

        // Activation sentence-transformers would apply (informational).
        let st_path = dir.join("config_sentence_transformers.json");
        let st_act = match read_opt(&st_path)? {
            Some(b) => parse::<StActivation>(&st_path, &b)?.activation_fn,
            None => None,
        };
        let activation = st_act
            .or(ccfg.sentence_transformers.and_then(|s| s.activation_fn))
            .or(ccfg.sbert_ce_default_activation_function)
            .map(|a| activation_name(&a))
            .unwrap_or_else(|| "sigmoid".into());

        // Window.
        let max_length = cfg
            .max_length
            .unwrap_or(512)
            .min(bcfg.max_position_embeddings);

        // Tokenizer: its own padding is dropped, truncation is set to the pair window.
        let tok_path = dir.join("tokenizer.json");
        let tok_bytes = read(&tok_path, "tokenizer")?;
        let mut tokenizer = Tokenizer::from_bytes(&tok_bytes)
            .map_err(|e| Error::Tokenizer(format!("{}: {e}", tok_path.display())))?;
        tokenizer.with_padding(None);
        let added = match tokenizer.get_post_processor() {
            Some(p) => tokenizers::PostProcessor::added_tokens(p, true),
            None => 0,
        };
        if added == 0 {
            return Err(Error::Tokenizer(format!(
                "{}: no post_processor adding special tokens to a pair ([CLS] a [SEP] b [SEP])",
                tok_path.display()
            )));
        }
        if max_length <= added {
            return Err(Error::InvalidConfig(format!(
                "max_length {max_length} leaves no room for text next to the pair's {added} \
                 special tokens"
            )));
        }
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| Error::Tokenizer(e.to_string()))?;

        // Weights.
        let st_file = dir.join("model.safetensors");
        let bytes = read(&st_file, "weights")?;
        let checksum = format!("{:08x}", crc32fast::hash(&bytes));
        let mut tensors =
            candle_core::safetensors::load_buffer(&bytes, &Device::Cpu).map_err(|e| {
                Error::Weights {
                    path: st_file.clone(),
                    msg: e.to_string(),
                }
            })?;
        drop(bytes);
        let h = bcfg.hidden_size;
        let f = st_file.as_path();
        let cls_w = take(&mut tensors, &["classifier.weight"], &[labels, h], f)?;
        let cls_b = take(&mut tensors, &["classifier.bias"], &[labels], f)?;
        let (cls_w, cls_b) = match (cls_w, cls_b) {
            (Some(w), Some(b)) => (w, b),
            (None, None) => {
                return Err(Error::NotCrossEncoder(format!(
                    "{}: no `classifier.weight` / `classifier.bias` (a sentence embedding \
                     model, not a sequence-classification head)",
                    st_file.display()
                )))
            }
            (w, _) => {
                let missing = if w.is_none() {
                    "classifier.weight"
                } else {
                    "classifier.bias"
                };
                return Err(Error::Weights {
                    path: st_file.clone(),
                    msg: format!("tensor `{missing}` not found"),
                });
            }
        };
        let pool_w = take(
            &mut tensors,
            &["bert.pooler.dense.weight", "pooler.dense.weight"],
            &[h, h],
            f,
        )?;
        let pool_w = need(pool_w, "bert.pooler.dense.weight", f)?;
        let pool_b = take(
            &mut tensors,
            &["bert.pooler.dense.bias", "pooler.dense.bias"],
            &[h],
            f,
        )?;
        let pool_b = need(pool_b, "bert.pooler.dense.bias", f)?;

        let name = bcfg
            .name_or_path
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| dir_name(dir));
        let bert = Bert::load(bcfg, tensors, &st_file)?;

        let threads = if cfg.threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            cfg.threads
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("searchd-rerank-{i}"))
            .build()
            .map_err(|e| Error::ThreadPool(e.to_string()))?;

        Ok(CrossEncoder {
            bert,
            tokenizer,
            info: CrossInfo {
                name,
                checksum,
                max_length,
                labels,
                activation,
            },
            pool_w_t: pool_w.t()?.contiguous()?,
            pool_b: pool_b.to_vec1()?,
            cls_w: cls_w.flatten_all()?.to_vec1()?,
            cls_b: cls_b.to_vec1::<f32>()?[0],
            batch_size: cfg.batch_size,
            pool,
        })
    }

    /// What was loaded.
    pub fn info(&self) -> &CrossInfo {
        &self.info
    }

    /// Threads in the cross-encoder's pool.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// One relevance score per passage for the pairs `(query, passage)`, in input order;
    /// higher = more relevant. The score is the classifier's raw logit (no sigmoid; see
    /// [`CrossInfo::activation`]), comparable across passages and queries of one model.
    /// Each pair is tokenised by the tokenizer's pair template, `[CLS] query [SEP]
    /// passage [SEP]` with segment id 0 for the first part and 1 for the second, and
    /// truncated longest-first to [`CrossInfo::max_length`]. An empty `passages` gives
    /// an empty `Vec`; empty strings are fine.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, Error> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        self.pool.install(|| self.score_in_pool(query, passages))
    }

    fn score_in_pool(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, Error> {
        let inputs: Vec<EncodeInput> = passages
            .iter()
            .map(|p| EncodeInput::Dual(query.into(), (*p).into()))
            .collect();
        let encs = self
            .tokenizer
            .encode_batch_fast(inputs, true)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let vocab = self.bert.cfg.vocab_size;
        let types = self.bert.cfg.type_vocab_size;
        let window = self.info.max_length;
        let mut seqs: Vec<(Vec<u32>, Vec<u32>)> = Vec::with_capacity(encs.len());
        for e in &encs {
            let (ids, tys) = (e.get_ids(), e.get_type_ids());
            if let Some(&bad) = ids.iter().find(|&&id| id as usize >= vocab) {
                return Err(Error::Tokenizer(format!(
                    "token id {bad} is outside the model's vocab_size {vocab} (tokenizer.json \
                     does not match config.json)"
                )));
            }
            if let Some(&bad) = tys.iter().find(|&&t| t as usize >= types) {
                return Err(Error::Tokenizer(format!(
                    "token type id {bad} is outside the model's type_vocab_size {types}"
                )));
            }
            if ids.is_empty() || ids.len() > window {
                return Err(Error::Tokenizer(format!(
                    "pair encoded to {} tokens, window is {window}",
                    ids.len()
                )));
            }
            seqs.push((ids.to_vec(), tys.to_vec()));
        }
        drop(encs);

        // Longest first, stable so equal lengths keep input order.
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by(|&a, &b| seqs[b].0.len().cmp(&seqs[a].0.len()));

        // Packed batches: the pairs' tokens back to back, no padding anywhere (the pairs
        // of one query vary a lot in length, so padding to the longest would more than
        // double the rows; measured 1.7x-2.6x on GCIDE top-N lists). At most
        // `batch_size` pairs and `batch_size * min(128, window)` tokens per forward.
        let h = self.bert.cfg.hidden_size;
        let max_batch_tokens = self.batch_size * 128.min(window).max(1);
        let mut scores = vec![0f32; seqs.len()];
        let mut start = 0;
        while start < order.len() {
            let mut n = 0;
            let mut tokens = 0;
            while start + n < order.len() && n < self.batch_size {
                let l = seqs[order[start + n]].0.len();
                if n > 0 && tokens + l > max_batch_tokens {
                    break;
                }
                tokens += l;
                n += 1;
            }
            let rows = &order[start..start + n];
            let mut ids = Vec::with_capacity(tokens);
            let mut tys = Vec::with_capacity(tokens);
            let mut lens = Vec::with_capacity(n);
            for &i in rows {
                let (q, t) = &seqs[i];
                ids.extend_from_slice(q);
                tys.extend_from_slice(t);
                lens.push(q.len());
            }
            // (n, h) [CLS] states -> pooler dense -> tanh -> classifier.
            let cls = self.bert.forward_cls_packed(&ids, &tys, &lens)?;
            let pooled = cls
                .matmul(&self.pool_w_t)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            for (r, &i) in rows.iter().enumerate() {
                let row = &pooled[r * h..(r + 1) * h];
                let mut acc = 0f32;
                for ((&x, &b), &w) in row.iter().zip(&self.pool_b).zip(&self.cls_w) {
                    acc += (x + b).tanh() * w;
                }
                scores[i] = acc + self.cls_b;
            }
            start += n;
        }
        Ok(scores)
    }
}
