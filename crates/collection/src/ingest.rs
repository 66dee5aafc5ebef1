//! `searchd ingest`: documents (JSONL or Parquet) to a collection directory, with
//! checkpoints so that a run killed at any point resumes where it stopped.
//!
//! Phases:
//! 1. **read**: every document is read and checked (ids present, unique, of a valid kind;
//!    vectors of one length and finite; text a string), its stored fields are written to
//!    the staging `docs.bin`, its id and text kept in memory. Fast (no model) and
//!    deterministic, so a resumed run simply does it again.
//! 2. **embed** (with a model): the texts, in chunks of `checkpoint_every` documents. Each
//!    finished chunk is written atomically as `OUT.ingest/emb-NNNNNN.f32` (a checksummed
//!    file); a resumed run loads the chunks it finds and embeds only the rest. This is the
//!    slow part, and the only one worth checkpointing.
//! 3. **lexical** (with a text field, unless turned off): the segment's BM25 index of the
//!    text field ([`searchd_lexical`]), rows in document order.
//! 4. **build**: the vector index of the segment (any kind and codes `searchd build` makes).
//! 5. **commit**: `ids.bin`, `collection.json`, then the staging directory is renamed to
//!    `OUT` and the checkpoint directory removed. `OUT` never exists half-written.
//!
//! `OUT.ingest/plan.json` records what the checkpoints belong to (input file size, mtime and
//! checksums of its head and tail, fields, model); a run with another plan refuses to reuse
//! them (or, with `force`, discards them).

use std::collections::{BTreeSet, HashSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use searchd_docs::{DocId, DocReader, ReaderConfig};
use searchd_engine::BuildConfig;
use serde::{Deserialize, Serialize};

use crate::embed::{TextEmbedder, TextKind};
use crate::error::{Error, Result};
use crate::files::sync_dir;
use crate::manifest::{
    FieldsSegment, IdKind, Manifest, ModelRecord, SegmentMeta, FORMAT, MANIFEST, SCHEMA,
};
use crate::segwrite::{Finish, SegmentWriter, Step};

/// What to ingest and how. Defaults (see [`IngestConfig::new`]): fields as
/// [`ReaderConfig::default`], HNSW M=16 ef_construction=200 cosine, a checkpoint every
/// 10,000 documents, 256 texts per embedder call, bad documents stop the run.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// The documents file (JSONL or Parquet).
    pub docs: PathBuf,
    /// The collection directory to create.
    pub out: PathBuf,
    /// How documents are read: id, text, vector and stored fields.
    pub reader: ReaderConfig,
    /// Vectors from this matrix (`.npy` etc.), row i = document i of the file.
    pub vectors_file: Option<PathBuf>,
    /// The vector index's parameters (HNSW, metric).
    pub build: BuildConfig,
    /// Documents per checkpoint of the embedding phase (at least 1).
    pub checkpoint_every: usize,
    /// Texts per call of the embedder (progress is reported after each).
    pub batch: usize,
    /// Count and skip bad documents instead of stopping at the first.
    pub skip_bad: bool,
    /// Replace an existing `out` and discard checkpoints of another run.
    pub force: bool,
    /// Collection name recorded in the manifest (default: the directory name).
    pub name: Option<String>,
    /// Build a BM25 index of the text field (default: yes, with the `standard` analyzer).
    /// Ignored when there is no text field.
    pub lexical: Option<searchd_lexical::LexicalConfig>,
    /// Typed field indexes of the stored fields (default: yes, every field's type
    /// inferred; the text field is never indexed as a keyword). `None` builds none.
    pub field_indexes: Option<searchd_fields::FieldsConfig>,
    /// The collection's dynamic mapping setting, recorded in its manifest (default: none
    /// recorded; the server's applies).
    pub dynamic: Option<crate::manifest::Dynamic>,
}

/// Default `checkpoint_every`.
pub const DEFAULT_CHECKPOINT_EVERY: usize = 10_000;
/// Default `batch`.
pub const DEFAULT_BATCH: usize = 256;

impl IngestConfig {
    /// The defaults (see [`IngestConfig`]) for ingesting `docs` into `out`.
    pub fn new(docs: impl Into<PathBuf>, out: impl Into<PathBuf>) -> IngestConfig {
        IngestConfig {
            docs: docs.into(),
            out: out.into(),
            reader: ReaderConfig::default(),
            vectors_file: None,
            build: BuildConfig::default(),
            checkpoint_every: DEFAULT_CHECKPOINT_EVERY,
            batch: DEFAULT_BATCH,
            skip_bad: false,
            force: false,
            name: None,
            lexical: Some(searchd_lexical::LexicalConfig::default()),
            field_indexes: Some(searchd_fields::FieldsConfig::default()),
            dynamic: None,
        }
    }
}

/// Progress of a run, for bars and logs.
#[derive(Debug, Clone)]
pub enum Event {
    /// A phase starts; `total` is in documents (or bytes for `read` when the count is
    /// unknown: then `bytes` is true).
    Phase {
        /// The phase: `read`, `embed`, `build`, `lexical` or `fields`.
        name: &'static str,
        /// Its total, in documents (or bytes, see `bytes`).
        total: u64,
        /// Whether `total` is in bytes.
        bytes: bool,
    },
    /// Progress within the phase (same unit as its total).
    Progress {
        /// Done so far in the phase.
        done: u64,
    },
    /// Checkpoints of an earlier run were found: this many documents are already embedded.
    Resumed {
        /// Documents already embedded.
        docs: u64,
        /// Checkpoint chunks found.
        chunks: usize,
    },
    /// A bad document was skipped (`skip_bad`).
    Skipped {
        /// The error that made it bad.
        message: String,
    },
}

/// What a run did.
#[derive(Debug, Clone, Serialize)]
pub struct IngestReport {
    /// Documents in the collection.
    pub docs: u64,
    /// Bad documents skipped (`skip_bad`).
    pub skipped: u64,
    /// Dimension of the vectors.
    pub dim: usize,
    /// Documents embedded in this run (not loaded from checkpoints).
    pub embedded: u64,
    /// Documents whose vectors came from checkpoints of an earlier run.
    pub resumed: u64,
    /// Time reading the documents, in seconds.
    pub read_seconds: f64,
    /// Time embedding texts, in seconds.
    pub embed_seconds: f64,
    /// Time building the vector index, in seconds.
    pub build_seconds: f64,
    /// Time building the lexical index, in seconds.
    pub lexical_seconds: f64,
    /// Time building the field indexes, in seconds.
    pub fields_seconds: f64,
    /// Time of the whole run, in seconds.
    pub total_seconds: f64,
    /// Bytes written: vector index, stored documents, lexical and field indexes.
    pub bytes: u64,
    /// The model that embedded the texts; `None` when vectors were given.
    pub model: Option<ModelRecord>,
    /// The typed fields indexed (declared or inferred) and those left unindexed, with why.
    pub schema: Option<searchd_fields::Schema>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Plan {
    docs: PathBuf,
    size: u64,
    mtime_ns: u128,
    head_crc: u32,
    tail_crc: u32,
    id_field: String,
    text_field: Option<String>,
    checkpoint_every: usize,
    model: Option<ModelRecord>,
    skip_bad: bool,
}

fn fingerprint(path: &Path) -> Result<(u64, u128, u32, u32)> {
    let md = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mtime = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let n = read_up_to(&mut f, &mut buf).map_err(|e| Error::io(path, e))?;
    let head = crc32fast::hash(&buf[..n]);
    let size = md.len();
    let tail_at = size.saturating_sub(1 << 20);
    f.seek(SeekFrom::Start(tail_at))
        .map_err(|e| Error::io(path, e))?;
    let n = read_up_to(&mut f, &mut buf).map_err(|e| Error::io(path, e))?;
    let tail = crc32fast::hash(&buf[..n]);
    Ok((size, mtime, head, tail))
}

fn read_up_to(f: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The checkpoint directory of an ingest into `out`.
pub fn checkpoint_dir(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".ingest");
    out.with_file_name(name)
}

const EMB_MAGIC: &[u8; 8] = b"SDEMB001";

fn chunk_path(work: &Path, c: usize) -> PathBuf {
    work.join(format!("emb-{c:06}.f32"))
}

/// Write a checkpoint chunk atomically: temp file, fsync, rename, fsync the directory.
fn write_chunk(path: &Path, rows: usize, dim: usize, data: &[f32]) -> Result<()> {
    let tmp = path.with_extension("f32.tmp");
    let mut bytes = Vec::with_capacity(16 + data.len() * 4 + 4);
    bytes.extend_from_slice(EMB_MAGIC);
    bytes.extend_from_slice(&(rows as u32).to_le_bytes());
    bytes.extend_from_slice(&(dim as u32).to_le_bytes());
    for x in data {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    {
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(&bytes).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")));
    Ok(())
}

/// A checkpoint chunk if it is whole and of the expected shape; `None` otherwise (then it
/// is embedded again).
fn read_chunk(path: &Path, rows: usize, dim: usize) -> Option<Vec<f32>> {
    let b = std::fs::read(path).ok()?;
    if b.len() != 16 + rows * dim * 4 + 4 || &b[..8] != EMB_MAGIC {
        return None;
    }
    let body = &b[..b.len() - 4];
    let crc = u32::from_le_bytes(b[b.len() - 4..].try_into().ok()?);
    if crc32fast::hash(body) != crc
        || u32::from_le_bytes(b[8..12].try_into().ok()?) as usize != rows
        || u32::from_le_bytes(b[12..16].try_into().ok()?) as usize != dim
    {
        return None;
    }
    Some(
        body[16..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

fn has_chunks(work: &Path) -> bool {
    std::fs::read_dir(work).is_ok_and(|r| {
        r.flatten().any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("emb-") && n.ends_with(".f32")
        })
    })
}

/// Run an ingest. `embedder` is required when vectors come from text (neither
/// `reader.vector_field` nor `vectors_file` is set).
///
/// When it fails, the checkpoint directory is kept only if it holds embedded chunks (the
/// work worth resuming); otherwise it is removed, so a failed run leaves nothing behind.
pub fn ingest(
    cfg: &IngestConfig,
    embedder: Option<&dyn TextEmbedder>,
    events: &(dyn Fn(Event) + Sync),
) -> Result<IngestReport> {
    let result = ingest_inner(cfg, embedder, events);
    if result.is_err() {
        let work = checkpoint_dir(&cfg.out);
        if work.exists() && !has_chunks(&work) {
            let _ = std::fs::remove_dir_all(&work);
        }
    }
    result
}

fn ingest_inner(
    cfg: &IngestConfig,
    embedder: Option<&dyn TextEmbedder>,
    events: &(dyn Fn(Event) + Sync),
) -> Result<IngestReport> {
    let start = Instant::now();
    let out = &cfg.out;
    if out.exists() && !cfg.force {
        return Err(Error::Input(format!(
            "{} already exists; pass --force to replace it",
            out.display()
        )));
    }
    if cfg.checkpoint_every == 0 || cfg.batch == 0 {
        return Err(Error::Input(
            "--checkpoint-every and --batch must be at least 1".into(),
        ));
    }
    let given_vectors = cfg.reader.vector_field.is_some() || cfg.vectors_file.is_some();
    if cfg.reader.vector_field.is_some() && cfg.vectors_file.is_some() {
        return Err(Error::Input(
            "give either --vector-field or --vectors, not both".into(),
        ));
    }
    let embedder = if given_vectors {
        if embedder.is_some() {
            return Err(Error::Input(
                "vectors are given (--vector-field or --vectors) and a model too (--model); give one"
                    .into(),
            ));
        }
        None
    } else {
        match embedder {
            Some(e) => Some(e),
            None => {
                return Err(Error::Input(
                    "no vectors: give --model DIR to embed the text field, or --vector-field / --vectors"
                        .into(),
                ))
            }
        }
    };
    if embedder.is_some() && cfg.reader.text_field.is_none() {
        return Err(Error::Input(
            "embedding needs a text field (--text-field)".into(),
        ));
    }
    let model = embedder.map(|e| e.record());
    let lexical = cfg
        .lexical
        .as_ref()
        .filter(|_| cfg.reader.text_field.is_some());
    let keep_texts = embedder.is_some() || lexical.is_some();
    let work = checkpoint_dir(out);
    let stage = work.join("stage");

    // The plan: what the checkpoints in `work` belong to.
    let (size, mtime_ns, head_crc, tail_crc) = fingerprint(&cfg.docs)?;
    let plan = Plan {
        docs: cfg.docs.canonicalize().unwrap_or_else(|_| cfg.docs.clone()),
        size,
        mtime_ns,
        head_crc,
        tail_crc,
        id_field: cfg.reader.id_field.clone(),
        text_field: cfg.reader.text_field.clone(),
        checkpoint_every: cfg.checkpoint_every,
        model: model.clone(),
        skip_bad: cfg.skip_bad,
    };
    let plan_path = work.join("plan.json");
    if work.exists() {
        let old: Option<Plan> = std::fs::read(&plan_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if old.as_ref() != Some(&plan) {
            if cfg.force || old.is_none() || !has_chunks(&work) {
                std::fs::remove_dir_all(&work).map_err(|e| Error::io(&work, e))?;
            } else {
                return Err(Error::Input(format!(
                    "{} holds checkpoints of another ingest (different input file, fields or model); \
                     delete it or pass --force to start over",
                    work.display()
                )));
            }
        }
    }
    std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    if !plan_path.exists() {
        let tmp = work.join("plan.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&plan).unwrap_or_default())
            .map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &plan_path).map_err(|e| Error::io(&plan_path, e))?;
        sync_dir(&work);
    }
    if stage.exists() {
        std::fs::remove_dir_all(&stage).map_err(|e| Error::io(&stage, e))?;
    }
    let seg_name = "seg-000000";
    let seg_dir = stage.join(seg_name);
    std::fs::create_dir_all(&seg_dir).map_err(|e| Error::io(&seg_dir, e))?;

    // Phase 1: read and check every document; write the stored fields.
    let t_read = Instant::now();
    let mut reader = DocReader::open(&cfg.docs, &cfg.reader)?;
    let (total, by_bytes) = match reader.total_docs_hint() {
        Some(n) => (n, false),
        None => (reader.total_bytes(), true),
    };
    events(Event::Phase {
        name: "read",
        total,
        bytes: by_bytes,
    });
    let file_vectors = match &cfg.vectors_file {
        Some(p) => Some(searchd_vecio::read_vectors(p).map_err(|e| Error::Input(e.to_string()))?),
        None => None,
    };
    let field_config = cfg.field_indexes.clone().map(|mut fc| {
        if let Some(t) = &cfg.reader.text_field {
            if !fc.skip.contains(t) && !fc.declared.iter().any(|(n, _)| n == t) {
                fc.skip.push(t.clone());
            }
        }
        fc
    });
    let mut segment = SegmentWriter::create(&seg_dir, field_config)?;
    let mut seen: HashSet<DocId> = HashSet::new();
    let mut texts: Vec<String> = Vec::new();
    let mut vectors: Vec<f32> = Vec::new();
    let mut dim: Option<usize> = file_vectors.as_ref().map(|v| v.dim());
    let mut fields: BTreeSet<String> = BTreeSet::new();
    let mut skipped = 0u64;
    let mut n_in_file = 0usize;
    let mut n_text = 0usize;
    let (mut n_int, mut n_str) = (0u64, 0u64);
    let docs_name = cfg.docs.display().to_string();
    let mut last_report = Instant::now();
    loop {
        let item = match reader.next() {
            None => break,
            Some(item) => item,
        };
        let file_row = n_in_file;
        n_in_file += 1;
        let checked = item.map_err(Error::from).and_then(|doc| {
            let at = format!("{docs_name}: {} {}", pos_word(by_bytes), doc.pos);
            if seen.contains(&doc.id) {
                return Err(Error::Input(format!(
                    "{at}: id {} appears twice (ids must be unique)",
                    show_id(&doc.id)
                )));
            }
            let vector = if let Some(m) = &file_vectors {
                if file_row >= m.n() {
                    return Err(Error::Input(format!(
                        "{at}: --vectors {} has only {} rows for more documents",
                        cfg.vectors_file
                            .as_ref()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default(),
                        m.n()
                    )));
                }
                Some(m.row(file_row).to_vec())
            } else {
                doc.vector.clone()
            };
            if let Some(v) = &vector {
                let want = *dim.get_or_insert(v.len());
                if v.len() != want {
                    return Err(Error::Input(format!(
                        "{at}: field {:?} has {} dimensions, earlier documents have {want}",
                        cfg.reader.vector_field.as_deref().unwrap_or("vector"),
                        v.len()
                    )));
                }
                if let Some(j) = v.iter().position(|x| !x.is_finite()) {
                    return Err(Error::Input(format!(
                        "{at}: vector component {j} is not a finite number"
                    )));
                }
            }
            if embedder.is_some() && doc.text.is_none() {
                return Err(Error::Input(format!(
                    "{at}: field {:?} is missing; every document needs text to embed",
                    cfg.reader.text_field.as_deref().unwrap_or("text")
                )));
            }
            // The source is the JSON object the reader made; a value that does not fit a
            // declared type makes the document bad (Elasticsearch refuses it too).
            let map: Option<serde_json::Map<String, serde_json::Value>> =
                match segment.indexes_fields() {
                    false => None,
                    true => Some(serde_json::from_slice(&doc.source).map_err(|e| {
                        Error::Input(format!(
                            "{at}: the stored fields are not a JSON object: {e}"
                        ))
                    })?),
                };
            segment
                .add(doc.id.clone(), &doc.source, map.as_ref())
                .map_err(|e| match e {
                    Error::Input(m) => Error::Input(format!("{at}: {m}")),
                    other => other,
                })?;
            Ok((doc, vector, map))
        });
        match checked {
            Ok((doc, vector, map)) => {
                match map {
                    Some(map) => fields.extend(map.into_iter().map(|(k, _)| k)),
                    None => {
                        if let Ok(map) = serde_json::from_slice::<
                            std::collections::BTreeMap<String, serde::de::IgnoredAny>,
                        >(&doc.source)
                        {
                            fields.extend(map.into_keys());
                        }
                    }
                }
                match &doc.id {
                    DocId::Int(_) => n_int += 1,
                    DocId::Str(_) => n_str += 1,
                }
                seen.insert(doc.id);
                if let Some(v) = vector {
                    vectors.extend_from_slice(&v);
                }
                if keep_texts {
                    n_text += usize::from(doc.text.is_some());
                    texts.push(doc.text.unwrap_or_default());
                }
            }
            Err(e) if cfg.skip_bad && e.is_input() && !segment.is_broken() => {
                skipped += 1;
                events(Event::Skipped {
                    message: e.to_string(),
                });
            }
            Err(e) => return Err(e),
        }
        if last_report.elapsed().as_millis() >= 200 {
            last_report = Instant::now();
            events(Event::Progress {
                done: if by_bytes {
                    reader.bytes_read()
                } else {
                    n_in_file as u64
                },
            });
        }
    }
    drop(seen);
    if let Some(m) = &file_vectors {
        if m.n() != n_in_file {
            return Err(Error::Input(format!(
                "--vectors {} has {} rows but {docs_name} has {n_in_file} documents (row i must be document i)",
                cfg.vectors_file.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                m.n()
            )));
        }
    }
    if segment.len() == 0 {
        return Err(Error::Input(format!(
            "{docs_name}: no documents{}",
            if skipped > 0 {
                format!(" ({skipped} bad ones skipped)")
            } else {
                String::new()
            }
        )));
    }
    events(Event::Progress {
        done: if by_bytes {
            reader.total_bytes()
        } else {
            n_in_file as u64
        },
    });
    let read_seconds = t_read.elapsed().as_secs_f64();
    let n = segment.len();

    // Phase 2: embed, in checkpointed chunks.
    let t_embed = Instant::now();
    let (mut embedded, mut resumed) = (0u64, 0u64);
    if let Some(emb) = embedder {
        let d = model.as_ref().map_or(0, |m| m.dim);
        dim = Some(d);
        vectors = Vec::with_capacity(n * d);
        let ce = cfg.checkpoint_every;
        let chunks = n.div_ceil(ce);
        let mut have: Vec<Option<Vec<f32>>> = (0..chunks)
            .map(|c| read_chunk(&chunk_path(&work, c), (n - c * ce).min(ce), d))
            .collect();
        let found = have.iter().filter(|c| c.is_some()).count();
        if found > 0 {
            resumed = have
                .iter()
                .enumerate()
                .filter(|(_, c)| c.is_some())
                .map(|(c, _)| (n - c * ce).min(ce) as u64)
                .sum();
            events(Event::Resumed {
                docs: resumed,
                chunks: found,
            });
        }
        events(Event::Phase {
            name: "embed",
            total: n as u64,
            bytes: false,
        });
        let mut done = resumed;
        events(Event::Progress { done });
        for (c, slot) in have.iter_mut().enumerate() {
            let lo = c * ce;
            let hi = (lo + ce).min(n);
            let chunk = match slot.take() {
                Some(v) => v,
                None => {
                    // Embed the chunk's texts shortest first (by bytes, a proxy for tokens),
                    // so the embedder's batches hold texts of similar length and little
                    // padding, then put the rows back in document order.
                    let mut order: Vec<usize> = (lo..hi).collect();
                    order.sort_by_key(|&i| (texts[i].len(), i));
                    let mut v = vec![0f32; (hi - lo) * d];
                    for part in order.chunks(cfg.batch) {
                        let batch: Vec<&str> = part.iter().map(|&i| texts[i].as_str()).collect();
                        let out = emb
                            .embed(&batch, TextKind::Passage)
                            .map_err(Error::Embed)?
                            .vectors;
                        if out.len() != batch.len() * d {
                            return Err(Error::Embed(format!(
                                "the embedder returned {} values for {} texts of {d} dimensions",
                                out.len(),
                                batch.len()
                            )));
                        }
                        for (j, &i) in part.iter().enumerate() {
                            v[(i - lo) * d..(i - lo + 1) * d]
                                .copy_from_slice(&out[j * d..(j + 1) * d]);
                        }
                        done += part.len() as u64;
                        embedded += part.len() as u64;
                        events(Event::Progress { done });
                    }
                    write_chunk(&chunk_path(&work, c), hi - lo, d, &v)?;
                    v
                }
            };
            vectors.extend_from_slice(&chunk);
        }
    }
    let embed_seconds = t_embed.elapsed().as_secs_f64();
    let dim = dim.unwrap_or(0);

    // Phases 3 and 4: the segment's lexical index, field indexes and vector index, then
    // its ids. Documents without any text get no lexical index (it could match nothing).
    let step = |s: Step| match s {
        Step::Phase { name, total } => events(Event::Phase {
            name,
            total,
            bytes: false,
        }),
        Step::Done(done) => events(Event::Progress { done }),
    };
    let written = segment
        .finish(
            Finish {
                vectors: &vectors,
                dim,
                build: &cfg.build,
                lexical: lexical
                    .filter(|_| n_text > 0)
                    .map(|l| (l, texts.as_slice())),
                base: None,
            },
            &step,
        )
        .map_err(|e| match e {
            Error::Input(message) => Error::Input(format!(
                "{docs_name}: {message} (rows count documents in file order)"
            )),
            other => other,
        })?;
    drop(vectors);
    drop(texts);
    let lexical_meta = written.lexical;
    let fields_meta = written.fields;
    let store_info = written.store;
    let (lexical_seconds, fields_seconds, build_seconds) = (
        written.lexical_seconds,
        written.fields_seconds,
        written.build_seconds,
    );
    let files = written.files;

    // Phase 5: the manifest, then rename into place.
    let name = cfg.name.clone().unwrap_or_else(|| {
        out.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    });
    let total_seconds = start.elapsed().as_secs_f64();
    let manifest = Manifest {
        schema: SCHEMA.into(),
        format: FORMAT,
        name,
        dim,
        metric: cfg.build.metric.name().into(),
        docs: n as u64,
        id_kind: match (n_int, n_str) {
            (_, 0) => IdKind::Int,
            (0, _) => IdKind::Str,
            _ => IdKind::Mixed,
        },
        text_field: cfg.reader.text_field.clone(),
        model: model.clone(),
        fields: fields.into_iter().collect(),
        mapping: fields_meta.as_ref().map(|m| m.schema.clone()),
        segments: vec![SegmentMeta {
            name: seg_name.into(),
            docs: n as u64,
            files,
            lexical: lexical_meta.clone(),
            fields: fields_meta.as_ref().map(FieldsSegment::from_meta),
            deleted: None,
        }],
        wal_seq: 0,
        next_segment: 1,
        ingest: serde_json::json!({
            "source": cfg.docs,
            "skipped": skipped,
            "embedded_by": model.as_ref().map(|m| m.name.clone()),
            "index": {"kind": cfg.build.kind.name(), "quantization": cfg.build.quantization.name(),
                      "m": cfg.build.hnsw.m, "ef_construction": cfg.build.hnsw.ef_construction},
            "stored_bytes": store_info.bytes,
            "stored_raw_bytes": store_info.raw_bytes,
            "lexical": lexical_meta.as_ref().map(|l| serde_json::json!({"analyzer": l.analyzer.to_string(), "bytes": l.bytes, "seconds": lexical_seconds})),
            "fields": fields_meta.as_ref().map(|m| serde_json::json!({"bytes": m.bytes, "seconds": fields_seconds})),
        }),
        dynamic: cfg.dynamic,
        building: Vec::new(),
        crc32: None,
    };
    let mpath = stage.join(MANIFEST);
    std::fs::write(&mpath, manifest.to_bytes()).map_err(|e| Error::io(&mpath, e))?;
    if let Ok(f) = std::fs::File::open(&mpath) {
        let _ = f.sync_all();
    }
    sync_dir(&seg_dir);
    sync_dir(&stage);
    if out.exists() {
        let mut old = out.clone().into_os_string();
        old.push(format!(".old-{}", std::process::id()));
        let old = PathBuf::from(old);
        std::fs::rename(out, &old).map_err(|e| Error::io(out, e))?;
        std::fs::rename(&stage, out).map_err(|e| Error::io(out, e))?;
        let _ = std::fs::remove_dir_all(&old);
    } else {
        std::fs::rename(&stage, out).map_err(|e| Error::io(out, e))?;
    }
    sync_dir(
        out.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(IngestReport {
        docs: n as u64,
        skipped,
        dim,
        embedded,
        resumed,
        read_seconds,
        embed_seconds,
        build_seconds,
        lexical_seconds,
        fields_seconds,
        total_seconds,
        bytes: written.index_bytes
            + store_info.bytes
            + lexical_meta.as_ref().map_or(0, |l| l.bytes)
            + fields_meta.as_ref().map_or(0, |m| m.bytes),
        model,
        schema: fields_meta.map(|m| m.schema),
    })
}

fn pos_word(jsonl: bool) -> &'static str {
    if jsonl {
        "line"
    } else {
        "row"
    }
}

fn show_id(id: &DocId) -> String {
    match id {
        DocId::Int(v) => v.to_string(),
        DocId::Str(s) => format!("{s:?}"),
    }
}
