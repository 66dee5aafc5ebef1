//! An opened index directory: the public search entry point.
//!
//! [`Index::open`] reads the manifest and opens each file with its reader
//! ([`crate::files`]); the index kind decides the [`Structure`] a search walks. The search
//! itself is split by concern: [`plan`] (which filter plan), [`scan`] (exact scans),
//! [`quantized`] (searches on codes, rescored); the float32 HNSW walk and the dispatch are
//! here.

mod params;
pub(crate) mod part_store;
mod partitioned;
mod plan;
mod quantized;
mod scan;

use std::borrow::Cow;
use std::path::Path;

use searchd_kernels::Metric;

pub use params::{
    FilterPlan, Hit, IndexInfo, SearchParams, Searched, MAX_K, MAX_OVERSAMPLE, NEAR_UNFILTERED,
};

use crate::distance::{F32Scorer, Rows};
use crate::error::{Error, Result, SearchError};
use crate::files::codes::Codes;
use crate::files::graph::GraphFile;
use crate::files::ids::IdMap;
use crate::files::lists::ListsFile;
use crate::files::parts::PartsFile;
use crate::files::vectors::Vectors;
use crate::format::{self, CodeKind, IndexKind, Manifest, HEADER_LEN};
use crate::heap::Neighbor;
use crate::hnsw::{self, SearchCtx};
use crate::index::part_store::PartStore;
use crate::storage::LoadOptions;
use params::Walk;

/// An opened, immutable index. `Send + Sync`: share it behind an `Arc` between threads.
pub struct Index {
    info: IndexInfo,
    metric: Metric,
    vectors: Vectors,
    /// Row order of the stored vectors when it differs from the input's (`ids.bin`).
    ids: Option<IdMap>,
    structure: Structure,
}

/// How an index finds candidates: one arm per [`IndexKind`], holding the files it walks.
/// A new index kind is a new arm (and, if it has a file of its own, a module in
/// [`crate::files`]); a new code kind needs no arm here.
enum Structure {
    /// Scan the float32 vectors.
    Flat,
    /// Walk `graph.bin`, scoring float32 vectors, or `codes` when quantized.
    Hnsw {
        graph: GraphFile,
        codes: Option<Codes>,
    },
    /// Probe the nearest lists of `ivf.bin`, scoring PQ residual codes.
    IvfPq { lists: ListsFile, codes: Codes },
    /// Route to the nearest partitions of `partitions.bin` and search their graphs
    /// (`parts[p]` is partition `p`'s index, its rows `routing.members(p)`).
    Partitioned {
        routing: PartsFile,
        store: std::sync::Arc<PartStore>,
        /// Partitions probed when the search does not say (the manifest's `nprobe`).
        nprobe: usize,
    },
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("info", &self.info).finish()
    }
}

impl Index {
    /// Open the index directory `dir`: read the manifest, map (or read) each file, check
    /// magic, version, sizes and, if `opts.verify`, checksums.
    pub fn open(dir: &Path, opts: &LoadOptions) -> Result<Index> {
        let manifest = Manifest::read(dir)?;
        let mpath = dir.join(format::MANIFEST);
        let (kind, metric, n, dim) = (manifest.kind, manifest.metric, manifest.n, manifest.dim);
        let quantization = manifest.params.quantization.as_ref();
        // A partitioned index searches its partitions' vectors: its own are for exact
        // scans and lookups, and may stay on disk. Under a memory budget they do unless
        // asked into private memory: mapped, they would fill the process's resident set
        // (the checksum pass alone touches every page) next to the budgeted partitions.
        let budgeted = opts.memory_budget.is_some() || opts.pool.is_some();
        let own_opts;
        let vector_opts = if kind == IndexKind::Partitioned
            && budgeted
            && opts.vectors == crate::storage::VectorPlacement::Mmap
        {
            own_opts = LoadOptions {
                vectors: crate::storage::VectorPlacement::Disk,
                ..opts.clone()
            };
            &own_opts
        } else {
            opts
        };
        let vectors = Vectors::open(
            dir,
            &manifest,
            vector_opts,
            quantization.is_some() || kind == IndexKind::Partitioned,
        )?;
        let structure = match (kind, quantization) {
            (IndexKind::Flat, None) => Structure::Flat,
            (IndexKind::Flat, Some(q)) => {
                return Err(Error::format(
                    &mpath,
                    format!("{} codes on a flat index", q.kind.name()),
                ))
            }
            (IndexKind::Hnsw, q) => Structure::Hnsw {
                graph: GraphFile::open(dir, &manifest, opts)?,
                codes: q
                    .map(|q| Codes::open(dir, &manifest, q, opts))
                    .transpose()?,
            },
            (IndexKind::IvfPq, Some(q)) if q.kind == CodeKind::Pq => Structure::IvfPq {
                lists: ListsFile::open(dir, &manifest, opts)?,
                codes: Codes::open(dir, &manifest, q, opts)?,
            },
            (IndexKind::Partitioned, None) => {
                let routing = PartsFile::open(dir, &manifest, opts)?;
                let dirs: Vec<_> = (0..routing.partitions())
                    .map(|p| crate::files::parts::part_dir(dir, p))
                    .collect();
                // Each partition's manifest matches its routing (the partitions themselves
                // may open later, under a memory budget).
                for (p, pdir) in dirs.iter().enumerate() {
                    let m = Manifest::read(pdir)?;
                    let want = routing.members(p).len();
                    if m.n != want
                        || m.dim != dim
                        || m.metric != metric
                        || m.kind != IndexKind::Hnsw
                    {
                        return Err(Error::format(
                            &mpath,
                            format!(
                                "partition {p} holds a {} index of {} x {} ({}), the routing \
                                 says hnsw of {want} x {dim} ({})",
                                m.kind.name(),
                                m.n,
                                m.dim,
                                m.metric.name(),
                                metric.name()
                            ),
                        ));
                    }
                }
                let resident_vectors = if vectors.in_memory().is_some()
                    && opts.vectors == crate::storage::VectorPlacement::Ram
                {
                    (HEADER_LEN + 4 * n * dim) as u64
                } else {
                    0
                };
                let store = PartStore::open(
                    dirs,
                    opts,
                    routing.len_bytes() + resident_vectors,
                    manifest.params.part_quantization.is_some(),
                )?;
                let nprobe = manifest
                    .params
                    .nprobe
                    .unwrap_or(crate::partition::DEFAULT_NPROBE);
                Structure::Partitioned {
                    routing,
                    store,
                    nprobe,
                }
            }
            (IndexKind::Partitioned, Some(q)) => {
                return Err(Error::format(
                    &mpath,
                    format!(
                        "{} codes on a partitioned index (its partitions hold the codes)",
                        q.kind.name()
                    ),
                ))
            }
            (IndexKind::IvfPq, q) => {
                return Err(Error::format(
                    &mpath,
                    format!(
                        "ivfpq index without pq codes ({})",
                        q.map_or("none", |q| q.kind.name())
                    ),
                ))
            }
        };
        let ids = IdMap::open(dir, &manifest, opts)?;
        let vector_bytes = if vectors.opened() {
            (HEADER_LEN + 4 * n * dim) as u64
        } else {
            0
        };
        let (graph_bytes, codes_bytes) = match &structure {
            Structure::Flat => (0, 0),
            Structure::Hnsw { graph, codes } => (
                graph.len_bytes(),
                codes.as_ref().map_or(0, |c| c.len_bytes()),
            ),
            Structure::IvfPq { lists, codes } => (lists.len_bytes(), codes.len_bytes()),
            // The partitions' bytes are in `Index::partition_stats` (they come and go).
            Structure::Partitioned { routing, .. } => (routing.len_bytes(), 0),
        };
        let graph_bytes = graph_bytes + ids.as_ref().map_or(0, |i| i.len_bytes());
        let info = IndexInfo {
            kind,
            metric: metric.name(),
            n,
            dim,
            params: serde_json::to_value(&manifest.params).unwrap_or_default(),
            bytes: vector_bytes + graph_bytes + codes_bytes,
            vector_bytes,
            graph_bytes,
            codes_bytes,
            placement: vector_opts.parts(),
            path: dir.to_path_buf(),
        };
        Ok(Index {
            info,
            metric,
            vectors,
            ids,
            structure,
        })
    }

    /// External id (row of the input file) of stored row `internal`.
    #[inline]
    fn external(&self, internal: u32) -> u64 {
        match &self.ids {
            Some(ids) => ids.order()[internal as usize] as u64,
            None => internal as u64,
        }
    }

    /// Stored row (internal id) of external id `id`, if it exists. Filters
    /// ([`SearchParams::filter`]) take internal ids: metadata for filtering is meant to be
    /// laid out in storage order, so the hot loop needs no id translation.
    pub fn internal(&self, id: u64) -> Option<u32> {
        let id = usize::try_from(id).ok().filter(|&i| i < self.info.n)?;
        Some(match &self.ids {
            Some(ids) => ids.inverse()[id],
            None => id as u32,
        })
    }

    /// The HNSW graph's links, for builds that start from them ([`crate::build::extend_index`]).
    pub(crate) fn graph_view(&self) -> Option<crate::hnsw::GraphView<'_>> {
        match &self.structure {
            Structure::Hnsw { graph, .. } => Some(graph.view()),
            _ => None,
        }
    }

    /// A partitioned index's graph manager: resident partitions and bytes, loads,
    /// evictions, skipped probes. `None` for other kinds.
    pub fn partition_stats(&self) -> Option<crate::index::part_store::PartitionStats> {
        match &self.structure {
            Structure::Partitioned { store, .. } => Some(store.stats()),
            _ => None,
        }
    }

    /// What the index is.
    pub fn info(&self) -> &IndexInfo {
        &self.info
    }
    /// The metric searches use.
    pub fn metric(&self) -> Metric {
        self.metric
    }
    /// Dimensions.
    pub fn dim(&self) -> usize {
        self.info.dim
    }
    /// Rows.
    pub fn len(&self) -> usize {
        self.info.n
    }
    /// Whether it holds no rows.
    pub fn is_empty(&self) -> bool {
        self.info.n == 0
    }
    /// Whether the float32 vectors were opened (everything but `--vectors none`).
    pub fn has_vectors(&self) -> bool {
        self.vectors.opened()
    }

    /// All stored vectors, row-major (unit length under cosine), in storage order, when
    /// they are in memory (`--vectors mmap|ram`): for HNSW indexes that is the graph's
    /// locality order, not the input's; use [`Index::vector`] to look up by id.
    pub fn stored_vectors(&self) -> Option<&[f32]> {
        self.vectors.in_memory()
    }

    /// The stored vector of row `id` (normalised under cosine), if it exists and the
    /// vectors were opened. Borrowed from memory, or read from disk (`--vectors disk`).
    ///
    /// A read failure is `None` here; [`Index::try_vector`] tells it apart from "no such id".
    pub fn vector(&self, id: u64) -> Option<Cow<'_, [f32]>> {
        self.try_vector(id).ok().flatten()
    }

    /// The stored vector of row `id`: `Ok(None)` when there is no such row,
    /// [`SearchError::NoVectors`] when the index was opened without its vectors, and
    /// [`SearchError::Storage`] when reading it failed (a disk error is not "not found").
    pub fn try_vector(&self, id: u64) -> std::result::Result<Option<Cow<'_, [f32]>>, SearchError> {
        let Some(row) = self.internal(id) else {
            return Ok(None);
        };
        self.vectors.row(row as usize, self.info.dim).map(Some)
    }

    /// The float32 rows in memory, or [`SearchError::NoVectors`].
    #[inline]
    fn rows(&self) -> std::result::Result<Rows<'_>, SearchError> {
        Ok(Rows {
            data: self.vectors.in_memory().ok_or(SearchError::NoVectors)?,
            dim: self.info.dim,
        })
    }

    /// Check a query and bring it to the form the index compares (unit length under cosine).
    pub fn prepare_query(&self, query: &[f32]) -> std::result::Result<Vec<f32>, SearchError> {
        if query.len() != self.info.dim {
            return Err(SearchError::Dimension {
                expected: self.info.dim,
                got: query.len(),
            });
        }
        if let Some(index) = query.iter().position(|x| !x.is_finite()) {
            return Err(SearchError::NonFinite { index });
        }
        let mut q = query.to_vec();
        if self.metric == Metric::Cosine && !searchd_kernels::normalize(&mut q) {
            return Err(SearchError::ZeroVector);
        }
        Ok(q)
    }

    pub(super) fn hits(&self, found: Vec<Neighbor>) -> Vec<Hit> {
        found
            .into_iter()
            .map(|n| Hit {
                id: self.external(n.id),
                score: -n.dist,
            })
            .collect()
    }

    /// Top-`k` search. Scores are higher-is-better: similarity for cosine and inner
    /// product, negative squared distance for l2. Hits are sorted best first.
    ///
    /// Quantized indexes traverse the graph on their codes, then rescore the best
    /// `oversample * k` candidates with the float32 vectors; opened with `--vectors none`
    /// they return the codes' order and approximate scores (for binary codes, minus the
    /// Hamming distance).
    ///
    /// With [`SearchParams::allow`] or [`SearchParams::filter`], only rows passing both are
    /// returned, searched by the plan [`Index::filter_plan`] picks.
    pub fn search(
        &self,
        query: &[f32],
        p: &SearchParams<'_>,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        self.search_with_plan(query, p).map(|(hits, _)| hits)
    }

    /// [`Index::search`], also returning the plan that produced the hits (`Exact` when an
    /// automatically planned graph walk fell back to the exact scan).
    pub fn search_with_plan(
        &self,
        query: &[f32],
        p: &SearchParams<'_>,
    ) -> std::result::Result<(Vec<Hit>, FilterPlan), SearchError> {
        self.search_detailed(query, p).map(|s| (s.hits, s.plan))
    }

    /// [`Index::search`] with what it did: the plan, and the probes a partitioned index
    /// skipped because their partitions were still loading at the deadline (a degraded
    /// answer, from the partitions that were resident).
    pub fn search_detailed(
        &self,
        query: &[f32],
        p: &SearchParams<'_>,
    ) -> std::result::Result<Searched, SearchError> {
        self.search_inner(query, p)
            .map(|(hits, plan, skipped_probes)| Searched {
                hits,
                plan,
                skipped_probes,
            })
    }

    fn search_inner(
        &self,
        query: &[f32],
        p: &SearchParams<'_>,
    ) -> std::result::Result<(Vec<Hit>, FilterPlan, usize), SearchError> {
        if p.k == 0 || p.k > MAX_K {
            return Err(SearchError::BadK {
                got: p.k,
                max: MAX_K,
            });
        }
        let q = self.prepare_query(query)?;
        let plan = self.filter_plan(p);
        if plan != FilterPlan::Unfiltered && p.allow.is_some_and(|a| a.is_empty()) {
            return Ok((Vec::new(), plan, 0));
        }
        let n = self.info.n;
        let ext: Option<&[u32]> = self.ids.as_ref().map(|ids| ids.order());
        // Internal id -> passes both filters.
        let pass = |i: u32| {
            p.filter.is_none_or(|f| f(i))
                && p.allow
                    .is_none_or(|a| a.contains(ext.map_or(i, |e| e[i as usize])))
        };
        let auto = p.plan.is_none();
        let allowed = self.allowed_rows(p);
        let walk = Walk {
            plan,
            filter: (plan != FilterPlan::Unfiltered).then_some(&pass),
            budget: if auto && plan != FilterPlan::Unfiltered {
                allowed.unwrap_or(n).max(p.k)
            } else {
                usize::MAX
            },
            // Fewer than this from a graph walk means it missed rows the scan would find.
            want: if plan == FilterPlan::Unfiltered || !auto {
                0
            } else {
                allowed.unwrap_or(n).min(p.k)
            },
            // Automatic walks through filters under GRAPH_MIN_SELECTIVITY only: a broader
            // filter's exact scan would cost too much to fall back to.
            min_pass_rate: match (auto, plan, allowed) {
                (true, FilterPlan::GraphTwoHop | FilterPlan::Graph, Some(s))
                    if (s as f64) < params::GRAPH_MIN_SELECTIVITY * n as f64 =>
                {
                    s as f64 / n.max(1) as f64 / params::ANTI_CORRELATION
                }
                _ => 0.0,
            },
        };
        // The fallback of a walk that could not finish: float32 when the index has it.
        let exact = || {
            self.exact_filtered(&q, p, &pass, false)
                .map(|h| (h, FilterPlan::Exact, 0))
        };
        if plan == FilterPlan::Exact && self.vectors.opened() {
            // Planned: an automatic scan may read codes.
            return self
                .exact_filtered(&q, p, &pass, p.plan.is_none())
                .map(|h| (h, plan, 0));
        }
        let found = match &self.structure {
            Structure::Hnsw {
                graph,
                codes: Some(codes),
            } => {
                return match self.search_codes(&graph.view(), codes, &q, p, &walk)? {
                    Some(hits) => Ok((hits, plan, 0)),
                    None => exact(),
                };
            }
            Structure::Partitioned {
                routing,
                store,
                nprobe,
            } => {
                let filtered = plan != FilterPlan::Unfiltered;
                let nprobe = p.nprobe.unwrap_or(*nprobe);
                let (hits, skipped) = self.search_partitions(
                    routing,
                    store,
                    &q,
                    p,
                    nprobe,
                    filtered.then_some(&pass),
                )?;
                return Ok((hits, plan, skipped));
            }
            Structure::IvfPq { lists, codes } => {
                return match self.search_ivf(&lists.view(), codes, &q, p, &walk)? {
                    Some(hits) => Ok((hits, plan, 0)),
                    None => exact(),
                };
            }
            Structure::Hnsw { graph, codes: None } => {
                let g = graph.view();
                let ctx = SearchCtx {
                    scorer: F32Scorer {
                        metric: self.metric,
                        rows: self.rows()?,
                        query: &q,
                    },
                    deadline: p.deadline,
                    filter: walk.filter,
                    two_hop: plan == FilterPlan::GraphTwoHop,
                    budget: walk.budget,
                    min_pass_rate: walk.min_pass_rate,
                };
                match hnsw::search(
                    &g,
                    g.entry,
                    g.max_level,
                    &ctx,
                    p.k,
                    self.walk_ef(p, plan, p.ef),
                )? {
                    Some(found) if found.len() >= walk.want => found,
                    _ => return exact(),
                }
            }
            Structure::Flat => {
                if plan != FilterPlan::Unfiltered {
                    return exact();
                }
                let rows = self.rows()?;
                crate::exact::scan_one(self.metric, rows.data, rows.dim, &q, p.k, None, p.deadline)?
            }
        };
        Ok((self.hits(found), plan, 0))
    }
}
