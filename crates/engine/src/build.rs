//! Building an index directory from vectors in memory.

use std::path::Path;
use std::time::Instant;

use searchd_kernels::Metric;

use crate::error::{Error, Result};
use crate::format::{
    DirWriter, Header, Manifest, GRAPH_MAGIC, IDS_MAGIC, MANIFEST_FORMAT, VECTORS_MAGIC,
};
use crate::hnsw::{self, HnswParams};
use crate::index::IndexKind;

/// What to build. Defaults: HNSW, cosine, M=16, ef_construction=200, seed 42, all cores.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    pub kind: IndexKind,
    pub metric: Metric,
    pub hnsw: HnswParams,
    /// Worker threads; 0 means one per core. With 1, the build is deterministic.
    pub threads: usize,
    /// Replace an existing directory.
    pub force: bool,
    /// Compressed codes stored beside the float32 vectors (HNSW only).
    pub quantization: Quantization,
}

/// Codes an index keeps for traversal (the float32 vectors are always kept, for rescoring).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quantization {
    /// Float32 vectors only.
    #[default]
    None,
    /// One byte per dimension ([`crate::sq8`]); HNSW traversal on codes, the best
    /// `oversample * k` candidates rescored with float32.
    Sq8,
}

impl Quantization {
    pub fn name(self) -> &'static str {
        match self {
            Quantization::None => "none",
            Quantization::Sq8 => "sq8",
        }
    }
    pub fn parse(s: &str) -> Option<Quantization> {
        match s {
            "none" => Some(Quantization::None),
            "sq8" => Some(Quantization::Sq8),
            _ => None,
        }
    }
}

impl Default for BuildConfig {
    fn default() -> Self {
        BuildConfig {
            kind: IndexKind::Hnsw,
            metric: Metric::Cosine,
            hnsw: HnswParams::default(),
            threads: 0,
            force: false,
            quantization: Quantization::None,
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BuildReport {
    pub n: usize,
    pub dim: usize,
    pub graph_seconds: f64,
    pub total_seconds: f64,
    pub bytes: u64,
}

/// Check vectors before building: finite values, and non-zero rows under cosine. Returns
/// the first problem as an [`Error::InvalidInput`] naming the row.
pub fn validate_vectors(data: &[f32], dim: usize, metric: Metric) -> Result<()> {
    if dim == 0 {
        return Err(Error::invalid("vectors have 0 dimensions"));
    }
    if data.is_empty() {
        return Err(Error::invalid("there are no vectors"));
    }
    if !data.len().is_multiple_of(dim) {
        return Err(Error::invalid(format!(
            "{} values is not a whole number of {dim}-dimensional rows",
            data.len()
        )));
    }
    if data.len() / dim > u32::MAX as usize - 1 {
        return Err(Error::invalid("more than 2^32 - 2 vectors"));
    }
    for (i, row) in data.chunks_exact(dim).enumerate() {
        if let Some(j) = row.iter().position(|x| !x.is_finite()) {
            return Err(Error::invalid(format!(
                "row {i}, column {j} is {} (vectors must be finite)",
                row[j]
            )));
        }
        if metric == Metric::Cosine && row.iter().all(|&x| x == 0.0) {
            return Err(Error::invalid(format!(
                "row {i} is all zeros; cosine similarity is undefined for it"
            )));
        }
    }
    Ok(())
}

/// Build an index over `data` (row-major, `dim` columns) into the directory `out`,
/// atomically. `progress(done, total)` is called now and then during the graph build.
pub fn build_index(
    out: &Path,
    data: &[f32],
    dim: usize,
    cfg: &BuildConfig,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<BuildReport> {
    let start = Instant::now();
    validate_vectors(data, dim, cfg.metric)?;
    if cfg.hnsw.m < 2 || cfg.hnsw.m > 2048 {
        return Err(Error::InvalidParam {
            name: "m",
            message: format!("must be between 2 and 2048, got {}", cfg.hnsw.m),
        });
    }
    if cfg.hnsw.ef_construction == 0 {
        return Err(Error::InvalidParam {
            name: "ef_construction",
            message: "must be at least 1".into(),
        });
    }
    if cfg.quantization != Quantization::None && cfg.kind != IndexKind::Hnsw {
        return Err(Error::InvalidParam {
            name: "quantization",
            message: format!(
                "{} codes are used for HNSW traversal; build with --index hnsw",
                cfg.quantization.name()
            ),
        });
    }
    let n = data.len() / dim;
    let mut writer = DirWriter::create(out, cfg.force)?;
    let normalized;
    let data = if cfg.metric == Metric::Cosine {
        let mut v = data.to_vec();
        v.chunks_exact_mut(dim).for_each(|r| {
            searchd_kernels::normalize(r);
        });
        normalized = v;
        &normalized[..]
    } else {
        data
    };

    let mut graph_seconds = 0.0;
    let mut permuted: Vec<f32> = Vec::new();
    let params = match cfg.kind {
        IndexKind::Flat => serde_json::json!({}),
        IndexKind::Hnsw => {
            let t = Instant::now();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(cfg.threads)
                .build()
                .map_err(|e| Error::invalid(format!("cannot start build threads: {e}")))?;
            let total = n as u64;
            let g = pool.install(|| {
                hnsw::build(cfg.metric, data, dim, &cfg.hnsw, cfg.threads == 1, &|d| {
                    progress(d, total)
                })
            });
            // Store nodes in BFS order of the graph for memory locality; `ids.bin` maps
            // internal positions back to row numbers of the input.
            let order = g.bfs_order();
            let g = g.permuted(&order);
            permuted = data_in_order(data, dim, &order);
            graph_seconds = t.elapsed().as_secs_f64();
            write_graph(&mut writer, n, &g)?;
            write_ids(&mut writer, &order)?;
            serde_json::json!({
                "m": cfg.hnsw.m,
                "ef_construction": cfg.hnsw.ef_construction,
                "seed": cfg.hnsw.seed,
                "threads": cfg.threads,
            })
        }
    };
    let stored = if cfg.kind == IndexKind::Hnsw {
        &permuted[..]
    } else {
        data
    };
    let vheader = Header::new(VECTORS_MAGIC, [n as u64, dim as u64, 0, 0, 0, 0]);
    writer.write_file("vectors.bin", &vheader, &[bytemuck::cast_slice(stored)])?;
    let mut params = params;
    if cfg.quantization == Quantization::Sq8 {
        let quant = crate::sq8::Sq8::train(
            stored,
            dim,
            crate::sq8::DEFAULT_SAMPLE,
            crate::sq8::DEFAULT_CLIP,
        )?;
        write_sq8(&mut writer, stored, dim, &quant)?;
        params["quantization"] = serde_json::json!({
            "kind": "sq8",
            "clip": crate::sq8::DEFAULT_CLIP,
            "sample": crate::sq8::DEFAULT_SAMPLE.min(n),
            "oversample": crate::index::DEFAULT_OVERSAMPLE,
        });
    }
    let manifest = Manifest {
        format: MANIFEST_FORMAT.into(),
        format_version: crate::format::FORMAT_VERSION,
        kind: cfg.kind.name().into(),
        metric: cfg.metric.name().into(),
        dim,
        n,
        params,
        files: Vec::new(),
        created_by: concat!("searchd ", env!("CARGO_PKG_VERSION")).into(),
    };
    writer.commit(manifest)?;
    let bytes = std::fs::read_dir(out)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    Ok(BuildReport {
        n,
        dim,
        graph_seconds,
        total_seconds: start.elapsed().as_secs_f64(),
        bytes,
    })
}

/// `codes.bin` (SQ8): header [n, dim, CODES_SQ8], then `lo` (dim f32), `step` (dim f32),
/// the squared norms of the stored float32 vectors (n f32, for l2), then n x dim codes.
fn write_sq8(w: &mut DirWriter, stored: &[f32], dim: usize, q: &crate::sq8::Sq8) -> Result<()> {
    use rayon::prelude::*;
    let n = stored.len() / dim;
    let mut codes = vec![0u8; n * dim];
    codes
        .par_chunks_mut(dim)
        .zip(stored.par_chunks(dim))
        .for_each(|(c, v)| q.encode_into(v, c));
    let norms: Vec<f32> = stored
        .par_chunks(dim)
        .map(searchd_kernels::norm_sq)
        .collect();
    let header = Header::new(
        crate::format::CODES_MAGIC,
        [n as u64, dim as u64, crate::format::CODES_SQ8, 0, 0, 0],
    );
    w.write_file(
        "codes.bin",
        &header,
        &[
            bytemuck::cast_slice(q.lo()),
            bytemuck::cast_slice(q.step()),
            bytemuck::cast_slice(&norms),
            &codes,
        ],
    )
}

fn data_in_order(data: &[f32], dim: usize, order: &[u32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(data.len());
    for &old in order {
        let o = old as usize * dim;
        out.extend_from_slice(&data[o..o + dim]);
    }
    out
}

/// `ids.bin`: n u32 external ids by internal position, then n u32 internal positions by
/// external id.
fn write_ids(w: &mut DirWriter, order: &[u32]) -> Result<()> {
    let mut inverse = vec![0u32; order.len()];
    for (new, &old) in order.iter().enumerate() {
        inverse[old as usize] = new as u32;
    }
    let header = Header::new(IDS_MAGIC, [order.len() as u64, 0, 0, 0, 0, 0]);
    w.write_file(
        "ids.bin",
        &header,
        &[bytemuck::cast_slice(order), bytemuck::cast_slice(&inverse)],
    )
}

fn pad4(bytes: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.resize(bytes.len().div_ceil(4) * 4, 0);
    v
}

fn write_graph(w: &mut DirWriter, n: usize, g: &hnsw::BuiltGraph) -> Result<()> {
    let header = Header::new(
        GRAPH_MAGIC,
        [
            n as u64,
            g.m as u64,
            g.m0 as u64,
            g.entry as u64,
            g.max_level as u64,
            g.upper.len() as u64,
        ],
    );
    let levels = pad4(&g.levels);
    w.write_file(
        "graph.bin",
        &header,
        &[
            bytemuck::cast_slice(&g.level0),
            &levels,
            bytemuck::cast_slice(&g.upper_start),
            bytemuck::cast_slice(&g.upper),
        ],
    )
}
