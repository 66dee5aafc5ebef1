//! `searchd ingest`'s Qdrant flags (`--to qdrant://...` and what goes with it): clap's view
//! of the upload options `qdrant_ingest` hands to the Qdrant admin library.

use clap::Args;
use searchd_server::qdrant::admin;

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Qdrant (--to qdrant://...)")]
pub struct QdrantIngestArgs {
    /// Write the documents into a Qdrant collection (its gRPC port): qdrant://HOST:6334/NAME.
    /// With --out as well, the local collection is kept there too. --docs may also be an
    /// existing searchd collection directory.
    #[arg(long, value_name = "qdrant://HOST:6334/NAME")]
    pub to: Option<String>,
    /// Qdrant: shards of the collection.
    #[arg(long, default_value_t = 1, value_name = "N", requires = "to")]
    pub shards: u32,
    /// Qdrant: replication factor (copies of each shard).
    #[arg(long, default_value_t = 1, value_name = "N", requires = "to")]
    pub replicas: u32,
    /// Qdrant: replicas that must acknowledge each write.
    #[arg(long, default_value_t = 1, value_name = "N", requires = "to")]
    pub write_consistency: u32,
    /// Qdrant: keep vectors, the HNSW graph and payloads on disk (memory-mapped).
    #[arg(long, requires = "to")]
    pub on_disk: bool,
    /// Qdrant: delete an existing collection of that name first.
    #[arg(long, requires = "to", conflicts_with = "append")]
    pub recreate: bool,
    /// Qdrant: add the documents to an existing collection (same dimension, distance, model).
    #[arg(long, requires = "to")]
    pub append: bool,
    /// Qdrant: points per upsert (the default is the best of a measured sweep, see
    /// bench/results/qdrant-synth1m.md).
    #[arg(long, default_value_t = admin::DEFAULT_UPLOAD_BATCH, value_name = "N", requires = "to")]
    pub upload_batch: usize,
    /// Qdrant: upserts in flight.
    #[arg(long, default_value_t = admin::DEFAULT_UPLOAD_PARALLEL, value_name = "N", requires = "to")]
    pub upload_parallel: usize,
    /// Qdrant: the optimizer's indexing_threshold in KB (default: Qdrant's, 10,000; segments
    /// below it are searched exactly and not HNSW-indexed).
    #[arg(long, value_name = "KB", requires = "to")]
    pub indexing_threshold_kb: Option<u64>,
    /// Qdrant: longest wait for the collection to be green with every vector indexed.
    #[arg(long, default_value_t = 3600, value_name = "S", requires = "to")]
    pub wait_timeout_s: u64,
    /// Qdrant: upload with HNSW indexing switched off, then switch it on and let Qdrant build
    /// each segment's graph once (its bulk-upload advice), instead of indexing while points
    /// arrive.
    #[arg(long, requires = "to")]
    pub defer_indexing: bool,
    /// Qdrant: return once every upsert is applied, without waiting for green and fully
    /// indexed (the indexing goes on in Qdrant; searches meanwhile are slower and exact on
    /// the unindexed segments).
    #[arg(long, requires = "to")]
    pub no_wait: bool,
}
