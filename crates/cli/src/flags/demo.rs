//! `searchd demo`'s flags: clap's view of what the demo runs (the demo itself is
//! `crate::demo`).

use std::path::PathBuf;

use clap::Args;

/// `--n` of the Qdrant demo when not given (the upload and Qdrant's indexing dominate).
pub const QDRANT_DEMO_N: usize = 20_000;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Working directory: data, ground truth, index and reports; reused when present.
    #[arg(help_heading = "Data", long, default_value = "searchd-demo")]
    pub dir: PathBuf,
    /// Number of synthetic base vectors [default: 200000; 20000 with --backend qdrant:
    /// Qdrant builds its HNSW graph after the upload, and 20,000 x 384 is ready in about 6 s
    /// on 2 cores].
    #[arg(help_heading = "Data", long)]
    pub n: Option<usize>,
    /// Dimensions.
    #[arg(help_heading = "Data", long, default_value_t = 384)]
    pub dim: usize,
    /// Number of queries (rotated through by the load generator).
    #[arg(help_heading = "Data", long, default_value_t = 1000)]
    pub queries: usize,
    /// ef the server uses (and the recall gate checks) [default: the smallest of 64, 128
    /// and 256 whose recall@10 passes the gate; 64 with --backend qdrant].
    #[arg(help_heading = "Index and recall gate", long)]
    pub ef: Option<usize>,
    /// HNSW build candidate list size (lower builds faster, with lower recall).
    #[arg(help_heading = "Index and recall gate", long, default_value_t = 100)]
    pub ef_construction: usize,
    /// Concurrency steps of the capacity ramp.
    #[arg(
        help_heading = "Capacity ramp",
        long,
        default_value = "1,2,4,8,16,32,64,128"
    )]
    pub ramp: String,
    /// Warm-up of each ramp step.
    #[arg(help_heading = "Capacity ramp", long, default_value = "2s")]
    pub warmup: String,
    /// Measured time of each ramp step.
    #[arg(help_heading = "Capacity ramp", long, default_value = "4s")]
    pub duration: String,
    /// Latency SLO (ms) that stops the ramp.
    #[arg(help_heading = "Capacity ramp", long, default_value_t = 100.0)]
    pub slo_p99_ms: f64,
    /// Seed of the synthetic data.
    #[arg(help_heading = "Data", long, default_value_t = 42)]
    pub seed: u64,
    /// The collection path instead: synthetic documents with ids, text and typed fields,
    /// ingested into a collection, served, fetched by id and searched with fields. Vectors
    /// come from the synthetic generator unless --model is given.
    #[arg(help_heading = "What runs", long)]
    pub text: bool,
    /// With --text: embed the documents' text and the query texts with this
    /// sentence-transformers model directory, and ramp text queries.
    #[arg(
        help_heading = "What runs",
        long,
        value_name = "DIR",
        requires = "text"
    )]
    pub model: Option<std::path::PathBuf>,
    /// The engine behind the demo's server: `local` (searchd's own, built in DIR) or
    /// `qdrant`: a Qdrant node started on free loopback ports (the binary from QDRANT_BIN
    /// or a qdrant executable on PATH; exit 2 when there is none), the vectors uploaded into it,
    /// searchd serving it with `--backend qdrant`, reports in DIR/qdrant/.
    #[arg(help_heading = "What runs", 
        long,
        value_enum,
        default_value_t = crate::flags::serve::BackendKind::Local,
        hide_possible_values = true
    )]
    pub backend: crate::flags::serve::BackendKind,
}

/// `--n` of the local demo when not given.
pub const LOCAL_DEMO_N: usize = 200_000;

impl DemoArgs {
    /// `--n`, or the backend's default.
    pub fn n(&self) -> usize {
        self.n.unwrap_or(match self.backend {
            crate::flags::serve::BackendKind::Local => LOCAL_DEMO_N,
            crate::flags::serve::BackendKind::Qdrant => QDRANT_DEMO_N,
        })
    }
}
