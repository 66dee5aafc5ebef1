//! Text queries: the server's embedder behind dynamic micro-batching.
//!
//! Concurrent text requests are gathered by one batching thread: it takes the first waiting
//! text, then keeps collecting for at most `window` (or until `max_batch` texts), drops
//! texts whose client left or whose deadline passed, and embeds the rest in one call. One
//! forward pass over 16 short queries costs far less than 16 passes of one, so under load
//! the batch grows by itself and at low load a lone query waits at most `window`.
//!
//! The queue is bounded (`capacity`); a text that finds it full is refused at once (503),
//! like a search that finds no admission place. The request keeps its admission permit
//! while it waits here, so text and vector requests share one budget and one deadline.
//!
//! The embedder runs its matrix products on its own threads (`searchd-embed` sizes them);
//! the batching thread only waits for it, so the CPUs are shared between the embedder and
//! the search pool, not oversubscribed by a second pool per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use searchd_collection::embed::{TextEmbedder, TextKind};
use searchd_collection::ModelRecord;
use tokio::sync::{oneshot, Semaphore};

/// Texts per embedder call when a live upsert's passages are embedded (ingest's default
/// batch): one call per chunk, the deadline checked between chunks.
pub const PASSAGE_CHUNK: usize = 256;

/// Defaults of the batcher: a 2 ms window, batches of at most 32 texts.
pub const DEFAULT_EMBED_WINDOW: Duration = Duration::from_millis(2);
/// Largest batch of the batcher by default (texts).
pub const DEFAULT_EMBED_BATCH: usize = 32;

/// One embedded query.
pub(crate) struct Embedded {
    pub vector: Vec<f32>,
    pub truncated: bool,
    /// Texts in the batch this one was embedded with.
    pub batch: usize,
}

pub(crate) enum EmbedFailure {
    /// The queue is full.
    Busy,
    /// The deadline passed before the text was embedded.
    Deadline,
    Failed(String),
}

struct Item {
    text: String,
    deadline: Instant,
    reply: oneshot::Sender<Result<Embedded, EmbedFailure>>,
}

/// Counters for `/stats` and `/metrics`.
#[derive(Default)]
pub(crate) struct BatchStats {
    pub batches: AtomicU64,
    pub texts: AtomicU64,
    pub max_batch: AtomicU64,
    /// Batches by size: 1, 2, 3-4, 5-8, 9-16, 17-32, 33+.
    pub by_size: [AtomicU64; 7],
    pub embed_us: AtomicU64,
    /// Passages of live upserts embedded, and the time spent on them.
    pub passages: AtomicU64,
    pub passage_us: AtomicU64,
}

impl BatchStats {
    pub fn json(&self) -> serde_json::Value {
        let b = self.batches.load(Ordering::Relaxed);
        let t = self.texts.load(Ordering::Relaxed);
        let labels = ["1", "2", "3-4", "5-8", "9-16", "17-32", "33+"];
        let sizes: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .zip(&self.by_size)
            .map(|(l, c)| (l.to_string(), c.load(Ordering::Relaxed).into()))
            .collect();
        serde_json::json!({
            "batches": b,
            "texts": t,
            "mean_batch": if b > 0 { t as f64 / b as f64 } else { 0.0 },
            "max_batch": self.max_batch.load(Ordering::Relaxed),
            "batch_sizes": sizes,
            "embed_ms_total": self.embed_us.load(Ordering::Relaxed) as f64 / 1e3,
            "passages": {
                "texts": self.passages.load(Ordering::Relaxed),
                "embed_ms_total": self.passage_us.load(Ordering::Relaxed) as f64 / 1e3,
            },
        })
    }
}

/// Handle to the batching thread.
pub(crate) struct Batcher {
    tx: crossbeam_channel::Sender<Item>,
    pub stats: Arc<BatchStats>,
    pub record: ModelRecord,
    /// The model itself, for the passages of live upserts (embedded in chunks, one
    /// request's passages at a time: [`Batcher::embed_passages`]).
    model: Arc<dyn TextEmbedder>,
    passage_turn: Arc<Semaphore>,
}

impl Batcher {
    pub fn start(
        embedder: Arc<dyn TextEmbedder>,
        window: Duration,
        max_batch: usize,
        capacity: usize,
    ) -> std::io::Result<Batcher> {
        let (tx, rx) = crossbeam_channel::bounded::<Item>(capacity.max(1));
        let stats = Arc::new(BatchStats::default());
        let record = embedder.record();
        let model = embedder.clone();
        let st = stats.clone();
        let max_batch = max_batch.max(1);
        std::thread::Builder::new()
            .name("searchd-embed".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut items = vec![first];
                    let until = Instant::now() + window;
                    while items.len() < max_batch {
                        let left = until.saturating_duration_since(Instant::now());
                        match rx.recv_timeout(left) {
                            Ok(it) => items.push(it),
                            Err(_) => break,
                        }
                    }
                    run_batch(&*embedder, items, &st);
                }
            })?;
        Ok(Batcher {
            tx,
            stats,
            record,
            model,
            passage_turn: Arc::new(Semaphore::new(1)),
        })
    }

    /// Embed the passages of one write (documents upserted without a vector) with the
    /// passage prompt, as ingest does: in chunks of [`PASSAGE_CHUNK`] on a blocking thread,
    /// one write's passages at a time (a second write waits for its turn, within
    /// `deadline`), the deadline checked before each chunk. Row-major vectors.
    pub async fn embed_passages(
        &self,
        texts: Vec<String>,
        deadline: Instant,
    ) -> Result<Vec<f32>, EmbedFailure> {
        let left = deadline.saturating_duration_since(Instant::now());
        // The turn is moved into the blocking job: a write whose client leaves does not let
        // a second write's passages start while its own are still being embedded.
        let turn = match tokio::time::timeout(left, self.passage_turn.clone().acquire_owned()).await
        {
            Ok(Ok(t)) => t,
            Ok(Err(_)) => return Err(EmbedFailure::Failed("the embedder is closed".into())),
            Err(_) => return Err(EmbedFailure::Deadline),
        };
        let model = self.model.clone();
        let st = self.stats.clone();
        let job = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            // Shortest first (by bytes, a proxy for tokens), as ingest embeds: texts of one
            // call are padded to the longest, so similar lengths together waste least.
            let mut order: Vec<usize> = (0..texts.len()).collect();
            order.sort_by_key(|&i| texts[i].len());
            let mut sorted = Vec::new();
            for chunk in order.chunks(PASSAGE_CHUNK) {
                if Instant::now() >= deadline {
                    return Err(EmbedFailure::Deadline);
                }
                let refs: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
                let t = Instant::now();
                let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    model.embed(&refs, TextKind::Passage)
                }))
                .unwrap_or_else(|_| Err("the embedder panicked".into()))
                .map_err(EmbedFailure::Failed)?;
                st.passage_us
                    .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
                st.passages.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                sorted.extend_from_slice(&e.vectors);
            }
            // Back to the request's order (a wrong count of values is the embedder's fault).
            let n = order.len();
            if n > 0 && sorted.len() % n != 0 {
                return Err(EmbedFailure::Failed(
                    "the embedder returned a wrong number of values".into(),
                ));
            }
            let dim = sorted.len().checked_div(n).unwrap_or(0);
            let mut out = vec![0f32; sorted.len()];
            for (k, &i) in order.iter().enumerate() {
                out[i * dim..(i + 1) * dim].copy_from_slice(&sorted[k * dim..(k + 1) * dim]);
            }
            Ok(out)
        });
        job.await
            .map_err(|_| EmbedFailure::Failed("the embedder panicked".into()))?
    }

    /// Embed one query text under `deadline`.
    pub async fn embed(&self, text: String, deadline: Instant) -> Result<Embedded, EmbedFailure> {
        let (reply, rx) = oneshot::channel();
        match self.tx.try_send(Item {
            text,
            deadline,
            reply,
        }) {
            Ok(()) => {}
            Err(crossbeam_channel::TrySendError::Full(_)) => return Err(EmbedFailure::Busy),
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                return Err(EmbedFailure::Failed("the embedder thread stopped".into()))
            }
        }
        rx.await.unwrap_or(Err(EmbedFailure::Failed(
            "the embedder thread stopped".into(),
        )))
    }
}

fn run_batch(embedder: &dyn TextEmbedder, items: Vec<Item>, st: &BatchStats) {
    let now = Instant::now();
    let mut live = Vec::with_capacity(items.len());
    for it in items {
        if it.reply.is_closed() {
            continue;
        }
        if now >= it.deadline {
            let _ = it.reply.send(Err(EmbedFailure::Deadline));
            continue;
        }
        live.push(it);
    }
    if live.is_empty() {
        return;
    }
    let n = live.len();
    let texts: Vec<&str> = live.iter().map(|i| i.text.as_str()).collect();
    let t = Instant::now();
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        embedder
            .embed(&texts, TextKind::Query)
            .map(|e| (e.vectors, e.truncated))
    }))
    .unwrap_or_else(|_| Err("the embedder panicked".into()));
    st.embed_us
        .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
    st.batches.fetch_add(1, Ordering::Relaxed);
    st.texts.fetch_add(n as u64, Ordering::Relaxed);
    st.max_batch.fetch_max(n as u64, Ordering::Relaxed);
    let bucket = match n {
        1 => 0,
        2 => 1,
        3..=4 => 2,
        5..=8 => 3,
        9..=16 => 4,
        17..=32 => 5,
        _ => 6,
    };
    st.by_size[bucket].fetch_add(1, Ordering::Relaxed);
    match out {
        Ok((vectors, truncated)) if n > 0 && vectors.len() % n == 0 => {
            let dim = vectors.len() / n;
            for (i, it) in live.into_iter().enumerate() {
                let _ = it.reply.send(Ok(Embedded {
                    vector: vectors[i * dim..(i + 1) * dim].to_vec(),
                    truncated: truncated.get(i).copied().unwrap_or(false),
                    batch: n,
                }));
            }
        }
        Ok(_) => {
            for it in live {
                let _ = it.reply.send(Err(EmbedFailure::Failed(
                    "the embedder returned a wrong number of values".into(),
                )));
            }
        }
        Err(e) => {
            tracing::error!("embedding failed: {e}");
            for it in live {
                let _ = it.reply.send(Err(EmbedFailure::Failed(e.clone())));
            }
        }
    }
}
