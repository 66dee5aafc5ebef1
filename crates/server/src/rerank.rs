//! The rerank stage: a cross-encoder scores (query, stored text) pairs of the top hits.
//!
//! A cross-encoder reads the query and a passage together, so it judges relevance better
//! than either retriever, and costs one forward pass per pair: it runs on the top `N` hits
//! only (`rerank: {"top": N}`, at most [`MAX_RERANK_TOP`]). One request's pairs go through
//! the model as batches on the model's own threads; requests take turns (one at a time:
//! the model already uses every core), and a request whose deadline passes while it waits
//! for its turn is answered 504 without being scored.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A cross-encoder as the server needs it (the `searchd` binary adapts `searchd-embed`).
pub trait TextRerank: Send + Sync + 'static {
    /// What was loaded (name, checksum ...), for `/stats`.
    fn info(&self) -> serde_json::Value;
    /// One score per passage for (query, passage), higher is more relevant, input order.
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, String>;
}

/// Largest `rerank.top` accepted: a cross-encoder pass over 200 pairs already takes on the
/// order of a second on two cores (see bench/results/rerank-speed.md).
pub const MAX_RERANK_TOP: usize = 200;

pub(crate) enum RerankFailure {
    Deadline,
    Failed(String),
}

#[derive(Default)]
pub(crate) struct RerankStats {
    pub requests: AtomicU64,
    pub pairs: AtomicU64,
    pub us: AtomicU64,
}

pub(crate) struct Reranker {
    model: Arc<dyn TextRerank>,
    turn: tokio::sync::Semaphore,
    pub stats: RerankStats,
}

impl Reranker {
    pub fn new(model: Arc<dyn TextRerank>) -> Reranker {
        Reranker {
            model,
            turn: tokio::sync::Semaphore::new(1),
            stats: RerankStats::default(),
        }
    }

    pub fn info(&self) -> serde_json::Value {
        let r = self.stats.requests.load(Ordering::Relaxed);
        serde_json::json!({
            "model": self.model.info(),
            "requests": r,
            "pairs": self.stats.pairs.load(Ordering::Relaxed),
            "mean_ms": if r == 0 { 0.0 } else {
                self.stats.us.load(Ordering::Relaxed) as f64 / r as f64 / 1000.0
            },
        })
    }

    /// Scores of `passages` against `query`, within `deadline`.
    pub async fn score(
        &self,
        query: String,
        passages: Vec<String>,
        deadline: Instant,
    ) -> Result<Vec<f32>, RerankFailure> {
        let wait = deadline.saturating_duration_since(Instant::now());
        let permit = match tokio::time::timeout(wait, self.turn.acquire()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Err(RerankFailure::Failed("the reranker is shut down".into())),
            Err(_) => return Err(RerankFailure::Deadline),
        };
        if Instant::now() >= deadline {
            return Err(RerankFailure::Deadline);
        }
        let model = self.model.clone();
        let n = passages.len();
        let t = Instant::now();
        let out = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
            model.score(&query, &refs)
        })
        .await;
        drop(permit);
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        self.stats.pairs.fetch_add(n as u64, Ordering::Relaxed);
        self.stats
            .us
            .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
        match out {
            Ok(Ok(s)) if s.len() == n => Ok(s),
            Ok(Ok(s)) => Err(RerankFailure::Failed(format!(
                "the reranker returned {} scores for {n} passages",
                s.len()
            ))),
            Ok(Err(m)) => Err(RerankFailure::Failed(m)),
            Err(e) => Err(RerankFailure::Failed(format!("the reranker failed: {e}"))),
        }
    }
}

/// Reorder `hits` (already cut to the reranked window) by `scores`, best first; equal
/// scores keep their retrieval order.
pub fn reorder<T>(hits: Vec<T>, scores: &[f32]) -> Vec<(T, f32)> {
    let mut v: Vec<(usize, T, f32)> = hits
        .into_iter()
        .zip(scores.iter().copied())
        .enumerate()
        .map(|(i, (h, s))| (i, h, s))
        .collect();
    v.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(_, h, s)| (h, s)).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reorder_is_stable_and_descending() {
        let out = super::reorder(vec!["a", "b", "c", "d"], &[0.1, 0.9, 0.1, -3.0]);
        assert_eq!(
            out.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec!["b", "a", "c", "d"]
        );
    }
}
