//! The write pipeline of upserts, behind the native route (`writes.rs`) and the
//! Elasticsearch-shaped ones (`es_write.rs`): documents without a vector are embedded with
//! the server's model in one batch, then one backend write.

use std::time::{Duration, Instant};

use searchd_collection::live::Doc;
use searchd_collection::DocId;
use serde_json::Value;

use crate::backend::{Receipt, SearchBackend, WriteOp};
use crate::embedq::EmbedFailure;
use crate::error::{ApiError, Code};
use crate::query::backend_error;
use crate::state::App;

/// Most documents one upsert request may carry (native `docs`, `_bulk` operations).
pub const MAX_DOCS_PER_WRITE: usize = 10_000;

/// A parsed upsert document; `vector` is `None` when it is to be embedded from `text`.
pub(crate) struct Incoming {
    pub id: DocId,
    pub vector: Option<Vec<f32>>,
    pub text: Option<String>,
    pub fields: serde_json::Map<String, Value>,
}

/// Upsert parsed documents (the native route's and the Elasticsearch-shaped ones'):
/// documents without a vector are embedded together with the server's model, then one
/// write; the slot's cache generation moves on.
pub(crate) async fn upsert_docs(
    app: &App,
    slot: &crate::state::Slot,
    backend: &dyn SearchBackend,
    incoming: Vec<Incoming>,
    wait: bool,
) -> Result<Receipt, ApiError> {
    let deadline = Instant::now() + app.cfg.timeout.max(Duration::from_secs(30));
    // Documents without a vector are embedded together, with the passage prompt (as ingest
    // embeds them), in one batch per request.
    let missing: Vec<usize> = (0..incoming.len())
        .filter(|&i| incoming[i].vector.is_none())
        .collect();
    let mut embedded = Vec::new();
    if !missing.is_empty() {
        let texts = missing
            .iter()
            .map(|&i| passage_text(app, backend, incoming[i].text.as_deref(), i))
            .collect::<Result<Vec<String>, ApiError>>()?;
        embedded = embed_passages(app, texts, deadline).await?;
    }
    let dim = if missing.is_empty() {
        0
    } else {
        embedded.len() / missing.len()
    };
    let mut rows = embedded.chunks(dim.max(1));
    let mut out = Vec::with_capacity(incoming.len());
    for d in incoming {
        let vector = match d.vector {
            Some(v) => v,
            None => rows.next().map(<[f32]>::to_vec).unwrap_or_default(),
        };
        out.push(Doc {
            id: d.id,
            vector,
            text: d.text,
            source: serde_json::to_vec(&d.fields).unwrap_or_else(|_| b"{}".to_vec()),
        });
    }
    let r = backend
        .write(WriteOp::Upsert(out), wait)
        .await
        .map_err(|e| backend_error(app, e))?;
    app.changed(slot).await;
    Ok(r)
}

/// The text of `docs[i]`, which came without a vector, checked to be embeddable by the
/// server's model into this collection's space.
fn passage_text(
    app: &App,
    backend: &dyn SearchBackend,
    text: Option<&str>,
    i: usize,
) -> Result<String, ApiError> {
    let Some(text) = text else {
        return Err(ApiError::invalid(format!(
            "docs[{i}] has neither a vector nor text to embed"
        )));
    };
    let Some(batcher) = &app.embedder else {
        return Err(ApiError::invalid(format!(
            "docs[{i}] has no vector and this server has no --model to embed its text; give \"vector\""
        )));
    };
    match backend.model() {
        Some(m) if m.checksum == batcher.record.checksum => Ok(text.to_string()),
        _ => Err(ApiError::invalid(format!(
            "docs[{i}] has no vector, and the collection's vectors were not made by the server's --model; give \"vector\""
        ))),
    }
}

/// Embed one write's passages (every text checked by [`passage_text`]).
async fn embed_passages(
    app: &App,
    texts: Vec<String>,
    deadline: Instant,
) -> Result<Vec<f32>, ApiError> {
    let Some(batcher) = &app.embedder else {
        return Err(ApiError::invalid(
            "this server has no --model to embed texts",
        ));
    };
    match batcher.embed_passages(texts, deadline).await {
        Ok(v) => Ok(v),
        Err(EmbedFailure::Busy) => Err(ApiError::new(
            Code::Overloaded,
            "the embedder queue is full; retry",
        )),
        Err(EmbedFailure::Deadline) => Err(ApiError::new(
            Code::DeadlineExceeded,
            "embedding the documents took longer than the deadline",
        )),
        Err(EmbedFailure::Failed(m)) => Err(ApiError::new(
            Code::Internal,
            format!("embedding failed: {m}"),
        )),
    }
}

/// Delete one document by the id a path gave (the native route's and Elasticsearch's):
/// a path cannot tell `"17"` from `17`, so the one that exists is deleted.
pub(crate) async fn delete_by_id(
    app: &App,
    slot: &crate::state::Slot,
    backend: &dyn SearchBackend,
    id: DocId,
    wait: bool,
) -> Result<Receipt, ApiError> {
    let target = match backend
        .get(id.clone(), crate::backend::FieldsWanted::None)
        .await
    {
        Ok(d) => d.id,
        Err(_) => id,
    };
    let r = backend
        .write(WriteOp::Delete(vec![target]), wait)
        .await
        .map_err(|e| backend_error(app, e))?;
    app.changed(slot).await;
    Ok(r)
}
