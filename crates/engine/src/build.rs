//! Building an index directory from vectors in memory.

use std::path::Path;
use std::time::Instant;

use searchd_kernels::Metric;

use crate::error::{Error, Result};
use crate::files::codes::{self, Quantization};
use crate::files::{graph, ids, lists, parts, vectors};
use crate::format::{DirWriter, IndexKind, Manifest, Params, MANIFEST_FORMAT};
use crate::hnsw::{self, HnswParams};
use crate::index::Index;

/// What to build. Defaults: HNSW, cosine, M=16, ef_construction=200, seed 42, all cores.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    /// Index kind: flat (exact scan), HNSW graph or IVF-PQ lists.
    pub kind: IndexKind,
    /// Metric searches rank by; under cosine the stored vectors are normalised.
    pub metric: Metric,
    /// HNSW graph parameters; IVF-PQ takes only `seed` (for its k-means) from them.
    pub hnsw: HnswParams,
    /// Worker threads; 0 means one per core. With 1, the build is deterministic.
    pub threads: usize,
    /// Replace an existing directory.
    pub force: bool,
    /// Compressed codes stored beside the float32 vectors (HNSW; IVF-PQ requires PQ).
    pub quantization: Quantization,
    /// IVF-PQ: number of coarse lists (0 = [`crate::ivf::default_nlist`]); partitioned:
    /// number of partitions (0 = [`crate::partition::default_partitions`]).
    pub nlist: usize,
    /// Partitioned: most further partitions a boundary row is copied into (0 = none).
    pub overlap: usize,
    /// HNSW: what insertion walks score (SQ8 codes made for the build, or float32), also
    /// when extending a graph (live merges). Default SQ8.
    pub build_on: crate::hnsw::BuildOn,
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
            overlap: 0,
            build_on: crate::hnsw::BuildOn::Sq8,
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BuildReport {
    /// Vectors indexed.
    pub n: usize,
    /// Dimensions per vector.
    pub dim: usize,
    /// Seconds spent on the search structure (the HNSW graph, or the IVF coarse lists);
    /// 0 for flat indexes and for [`quantize_index`].
    pub graph_seconds: f64,
    /// Wall-clock seconds of the whole build, writing included.
    pub total_seconds: f64,
    /// Total size of the files in the output directory, in bytes.
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
    build_index_from(out, data, dim, cfg, None, progress)
}

/// [`build_index`] of an HNSW index whose graph starts from `base`'s instead of from
/// nothing: row `i < base_rows.len()` of `data` is `base`'s row (external id)
/// `base_rows[i]`, with the same vector; later rows are new. `base`'s rows not listed
/// (deleted ones) leave the graph, which is repaired around them; the new rows are
/// inserted. This is what a live collection's merge pays instead of a whole build when
/// most of what it merges is already one graph (`examples/extend_bench.rs` measures both).
///
/// `base` must be an HNSW index (any codes) with `cfg`'s metric, dimension and `m`, and
/// `cfg.kind` HNSW; anything else is an [`Error::InvalidParam`] (the caller builds instead).
pub fn extend_index(
    out: &Path,
    data: &[f32],
    dim: usize,
    cfg: &BuildConfig,
    base: &Index,
    base_rows: &[u64],
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<BuildReport> {
    let bad = |message: String| Error::InvalidParam {
        name: "base",
        message,
    };
    let view = base.graph_view().ok_or_else(|| {
        bad(format!(
            "a {} index has no graph to extend",
            base.info().kind.name()
        ))
    })?;
    if cfg.kind != IndexKind::Hnsw {
        return Err(bad(format!(
            "only an hnsw build extends a graph, not {}",
            cfg.kind.name()
        )));
    }
    if base.metric() != cfg.metric || base.dim() != dim || view.m != cfg.hnsw.m.max(2) {
        return Err(bad(format!(
            "the base graph ({}, {} dimensions, m {}) differs from the build ({}, {dim}, m {})",
            base.metric().name(),
            base.dim(),
            view.m,
            cfg.metric.name(),
            cfg.hnsw.m
        )));
    }
    if base_rows.len() * dim > data.len() {
        return Err(bad(format!(
            "{} base rows but only {} rows of data",
            base_rows.len(),
            data.len() / dim.max(1)
        )));
    }
    let kept = base_rows
        .iter()
        .map(|&r| {
            base.internal(r)
                .ok_or_else(|| bad(format!("row {r} is not in the base index")))
        })
        .collect::<Result<Vec<u32>>>()?;
    let mut seen = vec![false; base.len()];
    for &k in &kept {
        if std::mem::replace(&mut seen[k as usize], true) {
            return Err(bad("a base row is listed twice".into()));
        }
    }
    build_index_from(out, data, dim, cfg, Some((&view, &kept)), progress)
}

fn build_index_from(
    out: &Path,
    data: &[f32],
    dim: usize,
    cfg: &BuildConfig,
    base: Option<(&hnsw::GraphView<'_>, &[u32])>,
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
    if cfg.kind == IndexKind::Partitioned {
        return build_partitioned(out, data, dim, cfg, progress);
    }
    let n = data.len() / dim;
    let mut writer = DirWriter::create(out, cfg.force)?;
    let normalized;
    let data = if cfg.metric == Metric::Cosine {
        // In huge pages where the OS has them: the build reads rows at random.
        let mut v = crate::hugepage::vec_from(data.len(), |i| data[i]);
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
        IndexKind::Flat | IndexKind::Partitioned => Params::default(),
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
            lists::write(&mut writer, dim, &centroids, &offsets, &order)?;
            graph_seconds = t.elapsed().as_secs_f64();
            ivf_parts = Some((centroids, lists, order));
            Params {
                nlist: Some(nlist),
                iters: Some(crate::ivf::DEFAULT_ITERS),
                seed: Some(seed),
                threads: Some(cfg.threads),
                ..Params::default()
            }
        }
        IndexKind::Hnsw => {
            let t = Instant::now();
            let pool = build_pool(cfg.threads)?;
            let total = n as u64;
            let report = |d| progress(d, total);
            let sequential = cfg.threads == 1;
            let g = pool.install(|| match base {
                Some(b) => hnsw::extend(
                    cfg.metric,
                    data,
                    dim,
                    (&cfg.hnsw, cfg.build_on),
                    b,
                    sequential,
                    &report,
                ),
                None => hnsw::build(
                    cfg.metric,
                    data,
                    dim,
                    &cfg.hnsw,
                    cfg.build_on,
                    sequential,
                    &report,
                ),
            });
            // Store nodes in BFS order of the graph for memory locality; `ids.bin` maps
            // internal positions back to row numbers of the input.
            let order = g.bfs_order();
            let g = g.permuted(&order);
            permuted = data_in_order(data, dim, &order);
            graph_seconds = t.elapsed().as_secs_f64();
            graph::write(&mut writer, n, &g)?;
            ids::write(&mut writer, &order)?;
            Params {
                m: Some(cfg.hnsw.m),
                ef_construction: Some(cfg.hnsw.ef_construction),
                seed: Some(cfg.hnsw.seed),
                threads: Some(cfg.threads),
                ..Params::default()
            }
        }
    };
    let stored = if cfg.kind == IndexKind::Hnsw {
        &permuted[..]
    } else {
        data
    };
    vectors::write(&mut writer, stored, dim)?;
    let mut params = params;
    if let (Some((centroids, lists, order)), Quantization::Pq { m }) =
        (&ivf_parts, cfg.quantization)
    {
        params.quantization = Some(codes::write_residuals(
            &mut writer,
            stored,
            dim,
            m,
            centroids,
            lists,
            order,
        )?);
    } else if cfg.quantization != Quantization::None {
        params.quantization = Some(codes::write(&mut writer, stored, dim, cfg.quantization)?);
    }
    let manifest = Manifest {
        format: MANIFEST_FORMAT.into(),
        format_version: crate::format::FORMAT_VERSION,
        kind: cfg.kind,
        metric: cfg.metric,
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

/// A partitioned index ([`crate::partition`]): `partitions.bin`, the float32 vectors of
/// every row (for exact scans and lookups) and one HNSW index per partition under `parts/`.
fn build_partitioned(
    out: &Path,
    data: &[f32],
    dim: usize,
    cfg: &BuildConfig,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<BuildReport> {
    let start = Instant::now();
    let n = data.len() / dim;
    let k = if cfg.nlist == 0 {
        crate::partition::default_partitions(n)
    } else {
        cfg.nlist
    };
    let mut writer = DirWriter::create(out, cfg.force)?;
    let mut data = data.to_vec();
    if cfg.metric == Metric::Cosine {
        data.chunks_exact_mut(dim).for_each(|r| {
            searchd_kernels::normalize(r);
        });
    }
    let pool = build_pool(cfg.threads)?;
    let assignment = pool.install(|| {
        crate::partition::assign_balanced(
            &data,
            dim,
            k,
            cfg.overlap,
            crate::ivf::DEFAULT_ITERS,
            cfg.hnsw.seed,
        )
    })?;
    let total: u64 = assignment.parts.iter().map(|p| p.len() as u64).sum();
    let mut done = 0u64;
    let part_cfg = BuildConfig {
        kind: IndexKind::Hnsw,
        force: true,
        nlist: 0,
        overlap: 0,
        ..cfg.clone()
    };
    let mut part_quantization = None;
    for (p, members) in assignment.parts.iter().enumerate() {
        let rows = data_in_order(&data, dim, members);
        let dir = crate::files::parts::part_dir(writer.path(), p);
        build_index(&dir, &rows, dim, &part_cfg, &|d, _| {
            progress(done + d, total)
        })?;
        if part_quantization.is_none() {
            part_quantization = Manifest::read(&dir)?.params.quantization;
        }
        done += members.len() as u64;
        progress(done, total);
    }
    let graph_seconds = start.elapsed().as_secs_f64();
    let mut offsets = Vec::with_capacity(k + 1);
    offsets.push(0u32);
    for m in &assignment.parts {
        offsets.push(offsets[offsets.len() - 1] + m.len() as u32);
    }
    let members = assignment.parts.concat();
    parts::write(
        &mut writer,
        n,
        dim,
        &assignment.centroids,
        &offsets,
        &members,
    )?;
    vectors::write(&mut writer, &data, dim)?;
    let params = Params {
        m: Some(cfg.hnsw.m),
        ef_construction: Some(cfg.hnsw.ef_construction),
        iters: Some(crate::ivf::DEFAULT_ITERS),
        seed: Some(cfg.hnsw.seed),
        threads: Some(cfg.threads),
        partitions: Some(k),
        overlap: Some(cfg.overlap),
        copies: Some(assignment.copies),
        nprobe: Some(crate::partition::DEFAULT_NPROBE.min(k)),
        part_quantization,
        ..Params::default()
    };
    writer.commit(Manifest {
        format: MANIFEST_FORMAT.into(),
        format_version: crate::format::FORMAT_VERSION,
        kind: IndexKind::Partitioned,
        metric: cfg.metric,
        dim,
        n,
        params,
        files: Vec::new(),
        created_by: concat!("searchd ", env!("CARGO_PKG_VERSION")).into(),
    })?;
    Ok(BuildReport {
        n,
        dim,
        graph_seconds,
        total_seconds: start.elapsed().as_secs_f64(),
        bytes: dir_bytes(out),
    })
}

/// Bytes of the files under `dir`, recursively.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// The build's worker threads (0 = one per core).
fn build_pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::invalid(format!("cannot start build threads: {e}")))
}

fn data_in_order(data: &[f32], dim: usize, order: &[u32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(data.len());
    for &old in order {
        let o = old as usize * dim;
        out.extend_from_slice(&data[o..o + dim]);
    }
    out
}

/// Give an existing HNSW index new codes (or none) without rebuilding its graph: writes
/// `out` with `src`'s vectors, graph and id map (hard-linked where possible) and a new
/// `codes.bin`, atomically. `out` may be `src` itself (with `force`).
pub fn quantize_index(src: &Path, out: &Path, q: Quantization, force: bool) -> Result<BuildReport> {
    let start = Instant::now();
    let manifest = Manifest::read(src)?;
    if manifest.kind != IndexKind::Hnsw {
        return Err(Error::InvalidParam {
            name: "quantization",
            message: format!(
                "{} is a {} index; codes are used for HNSW traversal",
                src.display(),
                manifest.kind.name()
            ),
        });
    }
    // Opening checks every file (magic, sizes, checksums) before anything is linked.
    let index = crate::index::Index::open(src, &crate::storage::LoadOptions::default())?;
    let stored = index
        .stored_vectors()
        .ok_or_else(|| Error::invalid("the source index has no float32 vectors in memory"))?;
    let dim = manifest.dim;
    let mut writer = DirWriter::create(out, force)?;
    for name in [vectors::NAME, graph::NAME, ids::NAME] {
        if let Some(entry) = manifest.file(name) {
            writer.link_file(name, &src.join(name), entry)?;
        }
    }
    let mut params = manifest.params.clone();
    params.quantization = None;
    if q != Quantization::None {
        params.quantization = Some(codes::write(&mut writer, stored, dim, q)?);
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
