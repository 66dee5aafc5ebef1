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
    /// Compressed codes stored beside the float32 vectors (HNSW; IVF-PQ requires PQ).
    pub quantization: Quantization,
    /// IVF-PQ: number of coarse lists (0 = [`crate::ivf::default_nlist`]).
    pub nlist: usize,
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
    /// Product quantization with `m` subspaces of 256 centroids ([`crate::pq`]): `m` bytes
    /// per vector.
    Pq { m: usize },
    /// One bit per dimension, sign after centring ([`crate::binary`]).
    Binary,
}

impl Quantization {
    /// The name `--quantization` takes: `none`, `sq8`, `pq:M`, `binary`.
    pub fn name(self) -> String {
        match self {
            Quantization::None => "none".into(),
            Quantization::Sq8 => "sq8".into(),
            Quantization::Pq { m } => format!("pq:{m}"),
            Quantization::Binary => "binary".into(),
        }
    }
    pub fn parse(s: &str) -> Option<Quantization> {
        match s {
            "none" => Some(Quantization::None),
            "sq8" => Some(Quantization::Sq8),
            "binary" => Some(Quantization::Binary),
            _ => {
                let m = s.strip_prefix("pq:")?.parse().ok()?;
                Some(Quantization::Pq { m })
            }
        }
    }
    /// Default `oversample` recorded in the manifest: coarser codes need more candidates
    /// rescored to keep recall@10 >= 0.95 (measured on dev-gcide-50k and synth 1M, see the
    /// README's memory and quantization section).
    pub fn default_oversample(self) -> f32 {
        match self {
            Quantization::None | Quantization::Sq8 => crate::index::DEFAULT_OVERSAMPLE,
            Quantization::Pq { .. } => 24.0,
            Quantization::Binary => 64.0,
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
            nlist: 0,
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
    if cfg.kind == IndexKind::IvfPq && !matches!(cfg.quantization, Quantization::Pq { .. }) {
        return Err(Error::InvalidParam {
            name: "quantization",
            message: "--index ivfpq stores product-quantized residuals: pass --quantization pq:M \
                      (M dividing the dimension, e.g. pq:64 for 384 dimensions)"
                .into(),
        });
    }
    if cfg.quantization != Quantization::None && cfg.kind == IndexKind::Flat {
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
    let mut ivf_parts = None;
    let params = match cfg.kind {
        IndexKind::Flat => serde_json::json!({}),
        IndexKind::IvfPq => {
            let t = Instant::now();
            let pool = build_pool(cfg.threads)?;
            let nlist = if cfg.nlist == 0 {
                crate::ivf::default_nlist(n)
            } else {
                cfg.nlist
            };
            let seed = cfg.hnsw.seed;
            let (centroids, lists) = pool.install(|| -> Result<_> {
                let c =
                    crate::ivf::train_coarse(data, dim, nlist, crate::ivf::DEFAULT_ITERS, seed)?;
                let lists = crate::ivf::assign(data, &c, dim);
                Ok((c, lists))
            })?;
            progress(n as u64, n as u64);
            // Rows in list order (stable: by row within a list).
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_by_key(|&r| lists[r as usize]);
            let mut offsets = vec![0u32; nlist + 1];
            for &l in &lists {
                offsets[l as usize + 1] += 1;
            }
            for l in 0..nlist {
                offsets[l + 1] += offsets[l];
            }
            let header = Header::new(
                crate::format::IVF_MAGIC,
                [n as u64, dim as u64, nlist as u64, 0, 0, 0],
            );
            writer.write_file(
                "ivf.bin",
                &header,
                &[
                    bytemuck::cast_slice(&centroids),
                    bytemuck::cast_slice(&offsets),
                    bytemuck::cast_slice(&order),
                ],
            )?;
            graph_seconds = t.elapsed().as_secs_f64();
            ivf_parts = Some((centroids, lists, order));
            serde_json::json!({
                "nlist": nlist,
                "iters": crate::ivf::DEFAULT_ITERS,
                "seed": seed,
                "threads": cfg.threads,
            })
        }
        IndexKind::Hnsw => {
            let t = Instant::now();
            let pool = build_pool(cfg.threads)?;
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
    if let (Some((centroids, lists, order)), Quantization::Pq { m }) =
        (&ivf_parts, cfg.quantization)
    {
        params["quantization"] =
            write_ivf_codes(&mut writer, stored, dim, m, centroids, lists, order)?;
    } else if cfg.quantization != Quantization::None {
        params["quantization"] = write_codes(&mut writer, stored, dim, cfg.quantization)?;
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

/// Train the quantizer, write `codes.bin` and return the manifest's `quantization` entry.
///
/// `codes.bin`: header [n, dim, kind, kind parameter (PQ: m), 0, 0]; the quantizer's
/// parameters (SQ8: `lo` and `step`, dim f32 each; PQ: m x 256 x dim/m f32 centroids;
/// binary: dim f32 means); the squared norms of the stored float32 vectors (n f32, for l2);
/// then n codes (SQ8: dim bytes; PQ: m bytes; binary: ceil(dim/64) little-endian u64). PQ
/// and binary codes start on a 64-byte boundary (zero padding), so binary codes can be
/// read as `u64` straight from the mapping.
pub(crate) fn write_codes(
    w: &mut DirWriter,
    stored: &[f32],
    dim: usize,
    q: Quantization,
) -> Result<serde_json::Value> {
    use rayon::prelude::*;
    let n = stored.len() / dim;
    let norms: Vec<f32> = stored
        .par_chunks(dim)
        .map(searchd_kernels::norm_sq)
        .collect();
    let header = |kind: u64, param: u64| {
        Header::new(
            crate::format::CODES_MAGIC,
            [n as u64, dim as u64, kind, param, 0, 0],
        )
    };
    let oversample = q.default_oversample();
    match q {
        Quantization::None => Err(Error::invalid("no quantization to write")),
        Quantization::Sq8 => {
            let quant = crate::sq8::Sq8::train(
                stored,
                dim,
                crate::sq8::DEFAULT_SAMPLE,
                crate::sq8::DEFAULT_CLIP,
            )?;
            let mut codes = vec![0u8; n * dim];
            codes
                .par_chunks_mut(dim)
                .zip(stored.par_chunks(dim))
                .for_each(|(c, v)| quant.encode_into(v, c));
            w.write_file(
                "codes.bin",
                &header(crate::format::CODES_SQ8, 0),
                &[
                    bytemuck::cast_slice(quant.lo()),
                    bytemuck::cast_slice(quant.step()),
                    bytemuck::cast_slice(&norms),
                    &codes,
                ],
            )?;
            Ok(serde_json::json!({
                "kind": "sq8",
                "clip": crate::sq8::DEFAULT_CLIP,
                "sample": crate::sq8::DEFAULT_SAMPLE.min(n),
                "oversample": oversample,
            }))
        }
        Quantization::Pq { m } => {
            let params = crate::pq::PqParams::new(m);
            let quant = crate::pq::Pq::train(stored, dim, &params)?;
            let codes = quant.encode_all(stored);
            write_pq_file(w, &quant, &params, &norms, &codes, false)
        }
        Quantization::Binary => {
            let quant = crate::binary::Binary::train(stored, dim, crate::binary::DEFAULT_SAMPLE)?;
            let words = quant.words();
            let mut codes = vec![0u64; n * words];
            codes
                .par_chunks_mut(words)
                .zip(stored.par_chunks(dim))
                .for_each(|(c, v)| quant.encode_into(v, c));
            let le: Vec<u64> = codes.iter().map(|w| w.to_le()).collect();
            let before = 4 * dim + 4 * n;
            let pad = vec![0u8; codes_padding(before)];
            w.write_file(
                "codes.bin",
                &header(crate::format::CODES_BINARY, 0),
                &[
                    bytemuck::cast_slice(quant.mean()),
                    bytemuck::cast_slice(&norms),
                    &pad,
                    bytemuck::cast_slice(&le),
                ],
            )?;
            Ok(serde_json::json!({
                "kind": "binary",
                "sample": crate::binary::DEFAULT_SAMPLE.min(n),
                "oversample": oversample,
            }))
        }
    }
}

/// The build's worker threads (0 = one per core).
fn build_pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::invalid(format!("cannot start build threads: {e}")))
}

/// IVF-PQ `codes.bin`: the PQ layout of [`write_codes`], with codebooks trained on the
/// residuals `x - centroid(list(x))` and norms and codes in list order (see [`crate::ivf`]).
fn write_ivf_codes(
    w: &mut DirWriter,
    stored: &[f32],
    dim: usize,
    m: usize,
    centroids: &[f32],
    lists: &[u32],
    order: &[u32],
) -> Result<serde_json::Value> {
    use rayon::prelude::*;
    let n = order.len();
    let residual_into = |r: usize, out: &mut [f32]| {
        let c = lists[r] as usize;
        for ((o, x), c) in out
            .iter_mut()
            .zip(&stored[r * dim..(r + 1) * dim])
            .zip(&centroids[c * dim..(c + 1) * dim])
        {
            *o = x - c;
        }
    };
    // Only the rows `Pq::train` would sample (evenly spread over list order) are
    // materialised: the same codebooks as training on all n residuals, without an n x dim
    // copy (1.5 GB at 1M x 384).
    let params = crate::pq::PqParams::new(m);
    let take = params.sample.min(n);
    let mut sample = vec![0f32; take * dim];
    sample
        .par_chunks_mut(dim)
        .enumerate()
        .for_each(|(i, out)| residual_into(order[i * n / take] as usize, out));
    let quant = crate::pq::Pq::train(&sample, dim, &params)?;
    drop(sample);
    let mut codes = vec![0u8; n * m];
    codes.par_chunks_mut(m).zip(order.par_iter()).for_each_init(
        || vec![0f32; dim],
        |buf, (out, &r)| {
            residual_into(r as usize, buf);
            quant.encode_into(buf, out);
        },
    );
    let norms: Vec<f32> = order
        .par_iter()
        .map(|&r| searchd_kernels::norm_sq(&stored[r as usize * dim..(r as usize + 1) * dim]))
        .collect();
    write_pq_file(w, &quant, &params, &norms, &codes, true)
}

/// `codes.bin` of PQ codes (layout in [`write_codes`]) and the manifest entry; `residual`
/// says the codes are of IVF residuals, in list order.
fn write_pq_file(
    w: &mut DirWriter,
    quant: &crate::pq::Pq,
    params: &crate::pq::PqParams,
    norms: &[f32],
    codes: &[u8],
    residual: bool,
) -> Result<serde_json::Value> {
    let (n, dim, m) = (norms.len(), quant.dim(), quant.m());
    let before = 4 * quant.centroids().len() + 4 * n;
    let pad = vec![0u8; codes_padding(before)];
    let header = Header::new(
        crate::format::CODES_MAGIC,
        [
            n as u64,
            dim as u64,
            crate::format::CODES_PQ,
            m as u64,
            0,
            0,
        ],
    );
    w.write_file(
        "codes.bin",
        &header,
        &[
            bytemuck::cast_slice(quant.centroids()),
            bytemuck::cast_slice(norms),
            &pad,
            codes,
        ],
    )?;
    let mut entry = serde_json::json!({
        "kind": "pq",
        "m": m,
        "centroids": crate::pq::KSUB,
        "sample": params.sample.min(n),
        "iters": params.iters,
        "seed": params.seed,
        "oversample": Quantization::Pq { m }.default_oversample(),
    });
    if residual {
        entry["residual"] = true.into();
    }
    Ok(entry)
}

/// Zero bytes after `payload_before` bytes of payload (which follow the 64-byte header)
/// so the codes start on a 64-byte boundary.
pub(crate) fn codes_padding(payload_before: usize) -> usize {
    payload_before.next_multiple_of(64) - payload_before
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

/// Give an existing HNSW index new codes (or none) without rebuilding its graph: writes
/// `out` with `src`'s vectors, graph and id map (hard-linked where possible) and a new
/// `codes.bin`, atomically. `out` may be `src` itself (with `force`).
pub fn quantize_index(src: &Path, out: &Path, q: Quantization, force: bool) -> Result<BuildReport> {
    let start = Instant::now();
    let manifest = Manifest::read(src)?;
    if manifest.kind != IndexKind::Hnsw.name() {
        return Err(Error::InvalidParam {
            name: "quantization",
            message: format!(
                "{} is a {} index; codes are used for HNSW traversal",
                src.display(),
                manifest.kind
            ),
        });
    }
    // Opening checks every file (magic, sizes, checksums) before anything is linked.
    let index = crate::Index::open(src, &crate::LoadOptions::default())?;
    let stored = index
        .stored_vectors()
        .ok_or_else(|| Error::invalid("the source index has no float32 vectors in memory"))?;
    let dim = manifest.dim;
    let mut writer = DirWriter::create(out, force)?;
    for name in ["vectors.bin", "graph.bin", "ids.bin"] {
        if let Some(entry) = manifest.file(name) {
            writer.link_file(name, &src.join(name), entry)?;
        }
    }
    let mut params = manifest.params.clone();
    if let Some(obj) = params.as_object_mut() {
        obj.remove("quantization");
    }
    if q != Quantization::None {
        params["quantization"] = write_codes(&mut writer, stored, dim, q)?;
    }
    let n = manifest.n;
    writer.commit(Manifest {
        params,
        files: Vec::new(),
        created_by: concat!("searchd ", env!("CARGO_PKG_VERSION")).into(),
        ..manifest
    })?;
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
        graph_seconds: 0.0,
        total_seconds: start.elapsed().as_secs_f64(),
        bytes,
    })
}
