//! The one text-embedder seam of the workspace: ingest embeds passages through it, the
//! server embeds queries (batched) and the passages of live upserts through it, and the
//! `searchd` binary adapts `searchd-embed`'s model to it once.

use crate::manifest::ModelRecord;

/// Which side of retrieval a text is on: models with instruction prompts prefix queries
/// and passages differently (`searchd-embed` reads the prefixes from the model directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// Text embedded as a search query.
    Query,
    /// Text embedded as a document passage.
    Passage,
}

/// Vectors of a batch of texts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Embedded {
    /// `texts.len() * dim` floats, row-major.
    pub vectors: Vec<f32>,
    /// Per text: was it cut to the model's window.
    pub truncated: Vec<bool>,
}

/// A text embedder.
pub trait TextEmbedder: Send + Sync + 'static {
    /// Identity of the model, recorded in a collection and checked against it.
    fn record(&self) -> ModelRecord;
    /// Embed `texts` as `kind` (with the model's prefix for that kind).
    fn embed(&self, texts: &[&str], kind: TextKind) -> Result<Embedded, String>;
}
