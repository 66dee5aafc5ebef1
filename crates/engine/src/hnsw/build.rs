//! Building HNSW graphs: from nothing ([`build`]) or from an existing graph ([`extend`]),
//! the neighbour selection heuristic, and the BFS layout of a built graph.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use parking_lot::{Mutex, RwLock};
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
use searchd_kernels::Metric;

use super::{greedy, prefetch_list, search_layer, GraphView, HnswParams, Links, SearchCtx};
use crate::distance::{distance, F32Scorer, IpScorer, Rows, Scorer};
use crate::heap::Neighbor;
use crate::visited::with_visited;

/// Neighbour selection heuristic (algorithm 4 of the paper, without extending or keeping
/// pruned candidates): walk candidates from closest, keep one only if it is closer to the
/// base point than to every neighbour already kept. This keeps links pointing in diverse
/// directions, which is what makes the graph navigable on clustered data.
fn select_heuristic(
    metric: Metric,
    rows: Rows<'_>,
    candidates: &mut Vec<Neighbor>,
    max: usize,
) -> Vec<Neighbor> {
    candidates.sort_unstable();
    if candidates.len() <= max {
        return std::mem::take(candidates);
    }
    let mut kept: Vec<Neighbor> = Vec::with_capacity(max);
    for &c in candidates.iter() {
        if kept.len() >= max {
            break;
        }
        let cv = rows.row(c.id);
        let good = kept
            .iter()
            .all(|k| distance(metric, cv, rows.row(k.id)) >= c.dist);
        if good {
            kept.push(c);
        }
    }
    kept
}

/// Graph under construction.
struct Builder<'a> {
    metric: Metric,
    rows: Rows<'a>,
    m: usize,
    m0: usize,
    ef_construction: usize,
    levels: Vec<u8>,
    upper_start: Vec<u32>,
    level0: Vec<AtomicU32>,
    upper: Vec<AtomicU32>,
    locks: Vec<Mutex<()>>,
    /// (entry point, its level)
    entry: RwLock<(u32, usize)>,
    /// SQ8 codes of every row: insertion walks score these instead of the float32 rows
    /// ([`BuildOn::Sq8`]); the neighbour choice stays on float32.
    walk: Option<WalkCodes>,
}

/// What an insertion's walk scores while building ([`build`]). Default SQ8: the same
/// recall as float32 walks in 0.52-0.55x their build time on dev-gcide-50k (384 dimensions)
/// and 0.66-0.87x on GloVe 390k x 50, 2 threads (`bench/results/build-time-*.md`), for
/// `n x dim` bytes of codes during the build.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildOn {
    /// The float32 rows.
    Float32,
    /// SQ8 codes of the rows, made for the build and dropped after it (a quarter of the
    /// bytes per distance; the candidates the walk finds are rescored with float32 before
    /// the neighbour selection, so links are chosen on exact distances).
    #[default]
    Sq8,
}

impl BuildOn {
    /// Parse `float32` or `sq8`.
    pub fn parse(s: &str) -> Option<BuildOn> {
        match s.trim().to_ascii_lowercase().as_str() {
            "float32" | "f32" => Some(BuildOn::Float32),
            "sq8" => Some(BuildOn::Sq8),
            _ => None,
        }
    }
}

/// SQ8 codes of the rows being built, and their squared norms (l2).
struct WalkCodes {
    sq8: crate::sq8::Sq8,
    codes: Vec<u8>,
    norms: Vec<f32>,
}

impl WalkCodes {
    fn new(data: &[f32], dim: usize) -> Option<WalkCodes> {
        let sq8 = crate::sq8::Sq8::train(data, dim, crate::sq8::DEFAULT_SAMPLE, 0.001).ok()?;
        let mut codes = crate::hugepage::vec_from(data.len(), |_| 0u8);
        codes
            .par_chunks_mut(dim)
            .zip(data.par_chunks(dim))
            .for_each(|(c, v)| sq8.encode_into(v, c));
        let norms = data.par_chunks(dim).map(searchd_kernels::norm_sq).collect();
        Some(WalkCodes { sq8, codes, norms })
    }
}

impl Links for Builder<'_> {
    #[inline]
    fn neighbors<'s>(&'s self, level: usize, id: u32, buf: &'s mut Vec<u32>) -> &'s [u32] {
        let (words, base, cap) = self.slot(level, id);
        let count = (words[base].load(Relaxed) as usize).min(cap);
        buf.clear();
        buf.extend(
            words[base + 1..base + 1 + count]
                .iter()
                .map(|w| w.load(Relaxed)),
        );
        buf
    }
    fn len(&self) -> usize {
        self.levels.len()
    }
    #[inline(always)]
    fn prefetch_level0(&self, id: u32) {
        prefetch_list(&self.level0, id as usize * (self.m0 + 1));
    }
}

impl<'a> Builder<'a> {
    fn slot(&self, level: usize, id: u32) -> (&[AtomicU32], usize, usize) {
        if level == 0 {
            (&self.level0, id as usize * (self.m0 + 1), self.m0)
        } else {
            let block = self.upper_start[id as usize] as usize + level - 1;
            (&self.upper, block * (self.m + 1), self.m)
        }
    }

    fn set_links(&self, level: usize, id: u32, ids: &[Neighbor]) {
        let (words, base, cap) = self.slot(level, id);
        let count = ids.len().min(cap);
        for (i, n) in ids.iter().take(count).enumerate() {
            words[base + 1 + i].store(n.id, Relaxed);
        }
        words[base].store(count as u32, Relaxed);
    }

    /// Add a back link `from -> to`, pruning `from`'s list with the heuristic when full.
    fn add_link(&self, level: usize, from: u32, to: u32, dist: f32) {
        let _guard = self.locks[from as usize].lock();
        let (words, base, cap) = self.slot(level, from);
        let count = (words[base].load(Relaxed) as usize).min(cap);
        let existing = &words[base + 1..base + 1 + count];
        if existing.iter().any(|w| w.load(Relaxed) == to) {
            return;
        }
        if count < cap {
            words[base + 1 + count].store(to, Relaxed);
            words[base].store(count as u32 + 1, Relaxed);
            return;
        }
        let fv = self.rows.row(from);
        let mut cands: Vec<Neighbor> = existing
            .iter()
            .map(|w| {
                let id = w.load(Relaxed);
                Neighbor {
                    dist: distance(self.metric, fv, self.rows.row(id)),
                    id,
                }
            })
            .collect();
        cands.push(Neighbor { dist, id: to });
        let kept = select_heuristic(self.metric, self.rows, &mut cands, cap);
        self.set_links(level, from, &kept);
    }

    fn insert(&self, id: u32) {
        let level = self.levels[id as usize] as usize;
        // A node that will become the new top holds the entry lock for its whole
        // insertion, as in hnswlib; this happens O(log n) times.
        let mut entry_guard = None;
        let (ep, max_level) = {
            let e = self.entry.read();
            *e
        };
        if level > max_level {
            let g = self.entry.write();
            entry_guard = Some(g);
        }
        let (ep, max_level) = match &entry_guard {
            Some(g) => **g,
            None => (ep, max_level),
        };
        let q = self.rows.row(id);
        match &self.walk {
            None => {
                let ctx = SearchCtx::<fn(u32) -> bool, _>::plain(F32Scorer {
                    metric: self.metric,
                    rows: self.rows,
                    query: q,
                });
                self.insert_with(id, level, (ep, max_level), &ctx, false);
            }
            Some(w) => {
                let prepared = w.sq8.prepare(q);
                let ctx = SearchCtx::<fn(u32) -> bool, _>::plain(IpScorer {
                    metric: self.metric,
                    codes: &w.codes,
                    len: self.rows.dim,
                    norms: &w.norms,
                    query_norm: searchd_kernels::norm_sq(q),
                    ip: |c: &[u8]| prepared.ip(c),
                });
                self.insert_with(id, level, (ep, max_level), &ctx, true);
            }
        }
        if let Some(mut g) = entry_guard {
            if level > g.1 {
                *g = (id, level);
            }
        }
    }

    /// Link node `id` (top level `level`) from entry point `ep` of a graph whose top level
    /// is `max_level`, walking with `ctx`'s scorer. With `rescore` (approximate scores) the
    /// candidates each level's walk finds are rescored with float32 before the selection.
    fn insert_with<S: Scorer>(
        &self,
        id: u32,
        level: usize,
        (ep, max_level): (u32, usize),
        ctx: &SearchCtx<fn(u32) -> bool, S>,
        rescore: bool,
    ) {
        let q = self.rows.row(id);
        let mut cur = Neighbor {
            dist: ctx.scorer.dist(ep),
            id: ep,
        };
        for l in ((level + 1)..=max_level).rev() {
            cur = greedy(self, ctx, cur, l);
        }
        let mut entry_points = vec![cur];
        for l in (0..=level.min(max_level)).rev() {
            let found = with_visited(self.len(), |v| {
                search_layer(self, ctx, &entry_points, self.ef_construction, l, v)
            })
            .expect("no deadline while building")
            .expect("no budget while building");
            let mut cands: Vec<Neighbor> = found.into_vec();
            cands.retain(|n| n.id != id);
            cands.sort_unstable();
            // The next level's walk starts from these, on the walk's own scores.
            entry_points = cands.clone();
            if rescore {
                self.rows.rescore(self.metric, q, &mut cands);
                cands.sort_unstable();
            }
            let selected = select_heuristic(self.metric, self.rows, &mut cands, self.m);
            {
                let _g = self.locks[id as usize].lock();
                self.set_links(l, id, &selected);
            }
            for n in &selected {
                self.add_link(l, n.id, id, n.dist);
            }
            if entry_points.is_empty() {
                entry_points.push(cur);
            }
        }
    }
}

/// A built graph in plain arrays, ready to be written to `graph.bin`.
pub struct BuiltGraph {
    /// Most links per node on levels above 0.
    pub m: usize,
    /// Most links per node on level 0 (`2 * m`).
    pub m0: usize,
    /// The entry point of searches: a node on the top level.
    pub entry: u32,
    /// The top level (the entry point's).
    pub max_level: usize,
    /// n x (1 + m0): each node's level-0 link count, then its links (padded with 0).
    pub level0: Vec<u32>,
    /// Each node's top level (0..=15).
    pub levels: Vec<u8>,
    /// n + 1 entries: each node's first (1 + m)-word block in `upper` (its level 1).
    pub upper_start: Vec<u32>,
    /// (1 + m)-word blocks, one per node and level above 0: link count, then links.
    pub upper: Vec<u32>,
}

/// Draw `n` node levels from a seeded RNG (`floor(-ln(U) / ln(m))`, at most 15).
fn draw_levels(n: usize, m: usize, seed: u64) -> Vec<u8> {
    let ml = 1.0 / (m as f64).ln();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let u: f64 = rng.random::<f64>();
            let l = (-(1.0 - u).ln() * ml).floor();
            l.min(15.0) as u8
        })
        .collect()
}

impl<'a> Builder<'a> {
    /// An empty graph over `data` with these node levels, entry point `entry`.
    fn empty(
        metric: Metric,
        data: &'a [f32],
        dim: usize,
        params: &HnswParams,
        levels: Vec<u8>,
        entry: (u32, usize),
        on: BuildOn,
    ) -> Builder<'a> {
        let n = levels.len();
        let m = params.m.max(2);
        let m0 = 2 * m;
        let mut upper_start = Vec::with_capacity(n + 1);
        let mut blocks = 0u32;
        for &l in &levels {
            upper_start.push(blocks);
            blocks += l as u32;
        }
        upper_start.push(blocks);
        let zeros = |len: usize| crate::hugepage::vec_from(len, |_| AtomicU32::new(0));
        Builder {
            metric,
            rows: Rows { data, dim },
            m,
            m0,
            ef_construction: params.ef_construction.max(m),
            level0: zeros(n * (m0 + 1)),
            upper: zeros(blocks as usize * (m + 1)),
            upper_start,
            locks: (0..n).map(|_| Mutex::new(())).collect(),
            entry: RwLock::new(entry),
            levels,
            walk: match on {
                BuildOn::Float32 => None,
                // SQ8 that cannot be fitted (a non-finite value) leaves the build on float32.
                BuildOn::Sq8 => WalkCodes::new(data, dim),
            },
        }
    }

    /// Insert nodes `from..n` (in parallel unless `sequential`), reporting progress.
    fn insert_all(&self, from: usize, sequential: bool, progress: &(dyn Fn(u64) + Sync)) {
        let n = self.levels.len();
        let done = std::sync::atomic::AtomicU64::new(from as u64);
        let step = |i: usize| {
            self.insert(i as u32);
            let d = done.fetch_add(1, Relaxed) + 1;
            if d.is_multiple_of(1024) {
                progress(d);
            }
        };
        if sequential {
            (from..n).for_each(step);
        } else {
            (from..n).into_par_iter().for_each(step);
        }
        progress(n as u64);
    }

    fn finish(self) -> BuiltGraph {
        let (entry, max_level) = *self.entry.read();
        BuiltGraph {
            m: self.m,
            m0: self.m0,
            entry,
            max_level,
            level0: self.level0.into_iter().map(AtomicU32::into_inner).collect(),
            levels: self.levels,
            upper_start: self.upper_start,
            upper: self.upper.into_iter().map(AtomicU32::into_inner).collect(),
        }
    }
}

/// Build an HNSW graph over `data` (n rows of `dim`), on the current rayon pool.
/// `progress` is called with the number of nodes inserted so far, now and then.
pub fn build(
    metric: Metric,
    data: &[f32],
    dim: usize,
    params: &HnswParams,
    on: BuildOn,
    sequential: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> BuiltGraph {
    let n = data.len() / dim;
    let levels = draw_levels(n, params.m.max(2), params.seed);
    let entry = (0, levels.first().copied().unwrap_or(0) as usize);
    let b = Builder::empty(metric, data, dim, params, levels, entry, on);
    if n > 1 {
        b.insert_all(1, sequential, progress);
    } else {
        progress(n as u64);
    }
    b.finish()
}

/// Build a graph over `data` (n rows of `dim`) from an existing one instead of from
/// nothing: row `i < kept.len()` of `data` is node `kept[i]` of `base` (same vector), the
/// rows after them are new and inserted as in [`build`]. Base nodes not in `kept` (deleted
/// rows) leave the graph: a kept node that linked to one keeps its other links and fills
/// each vacated slot with the nearest of the removed node's own kept links (in the spirit
/// of FreshDiskANN's delete consolidation; re-selecting whole lists with the heuristic lost
/// more recall), so the graph stays navigable around the hole. A kept node left without
/// level-0 links is inserted again. The cost is the
/// insertion of the new rows plus the repairs, against inserting every row. `base` must
/// have `params.m` (the caller checks; links are copied as they are).
pub(crate) fn extend(
    metric: Metric,
    data: &[f32],
    dim: usize,
    (params, on): (&HnswParams, BuildOn),
    (base, kept): (&GraphView<'_>, &[u32]),
    sequential: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> BuiltGraph {
    let n = data.len() / dim;
    let nk = kept.len().min(n);
    if nk == 0 {
        return build(
            metric,
            data,
            dim,
            params,
            BuildOn::Float32,
            sequential,
            progress,
        );
    }
    let mut new_of = vec![u32::MAX; base.levels.len()];
    for (i, &o) in kept[..nk].iter().enumerate() {
        new_of[o as usize] = i as u32;
    }
    let mut levels: Vec<u8> = kept[..nk]
        .iter()
        .map(|&o| base.levels[o as usize])
        .collect();
    // New rows draw their levels from a stream of their own (seed + base size), so a
    // graph extended twice does not repeat the first extension's levels.
    levels.extend(draw_levels(
        n - nk,
        params.m.max(2),
        params.seed ^ (base.levels.len() as u64).rotate_left(17),
    ));
    let entry = match new_of.get(base.entry as usize) {
        Some(&e) if e != u32::MAX => (e, base.max_level),
        _ => {
            // The top node was deleted: the kept node on the highest level (first of them).
            let (i, l) = levels[..nk]
                .iter()
                .enumerate()
                .max_by_key(|&(i, &l)| (l, std::cmp::Reverse(i)))
                .map(|(i, &l)| (i as u32, l as usize))
                .unwrap_or((0, 0));
            (i, l)
        }
    };
    let b = Builder::empty(metric, data, dim, params, levels, entry, on);
    // Copy the kept nodes' links, repairing around removed ones. Each node writes only
    // its own lists and reads only `base`, so nodes are independent.
    let orphans: Vec<u32> = (0..nk as u32)
        .into_par_iter()
        .filter_map(|i| {
            let old = kept[i as usize];
            let mut buf = Vec::new();
            let mut buf2 = Vec::new();
            let mut orphan = false;
            for level in 0..=b.levels[i as usize] as usize {
                // Keep the surviving links as they are; fill each slot a removed node
                // vacated with the nearest of that node's own kept links.
                let links = base.neighbors(level, old, &mut buf);
                let cap = if level == 0 { b.m0 } else { b.m };
                let mut chosen: Vec<Neighbor> = Vec::with_capacity(cap);
                let mut vacated = 0usize;
                for &o in links {
                    match new_of[o as usize] {
                        u32::MAX => vacated += 1,
                        id => chosen.push(Neighbor { dist: 0.0, id }),
                    }
                }
                if vacated > 0 {
                    let me = b.rows.row(i);
                    let mut repl: Vec<Neighbor> = Vec::new();
                    for &o in links.iter().filter(|&&o| new_of[o as usize] == u32::MAX) {
                        for &o2 in base.neighbors(level, o, &mut buf2) {
                            let id = new_of[o2 as usize];
                            if id != u32::MAX
                                && id != i
                                && !chosen.iter().any(|c| c.id == id)
                                && !repl.iter().any(|c| c.id == id)
                            {
                                repl.push(Neighbor {
                                    dist: distance(metric, me, b.rows.row(id)),
                                    id,
                                });
                            }
                        }
                    }
                    repl.sort_unstable();
                    chosen.extend(repl.into_iter().take(vacated));
                    chosen.truncate(cap);
                }
                if level == 0 && chosen.is_empty() && nk > 1 {
                    orphan = true;
                }
                b.set_links(level, i, &chosen);
            }
            orphan.then_some(i)
        })
        .collect();
    progress(nk as u64);
    for &i in &orphans {
        b.insert(i);
    }
    b.insert_all(nk, sequential, progress);
    b.finish()
}

impl BuiltGraph {
    /// A breadth-first order of the level-0 graph from the entry point (nodes it cannot
    /// reach follow in id order): `order[new] = old`. Laying nodes out in this order puts a
    /// node's neighbours near each other in memory, so a search touches fewer distinct
    /// pages and cache lines than in input order (which for real data is arbitrary, e.g.
    /// alphabetical).
    pub fn bfs_order(&self) -> Vec<u32> {
        let n = self.levels.len();
        let mut order = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        let push = |id: u32, order: &mut Vec<u32>, seen: &mut Vec<bool>| {
            if !seen[id as usize] {
                seen[id as usize] = true;
                order.push(id);
            }
        };
        if n > 0 {
            push(self.entry, &mut order, &mut seen);
        }
        let mut head = 0;
        let mut next_root = 0u32;
        while order.len() < n {
            if head == order.len() {
                while seen[next_root as usize] {
                    next_root += 1;
                }
                push(next_root, &mut order, &mut seen);
            }
            let id = order[head] as usize;
            head += 1;
            let base = id * (self.m0 + 1);
            let count = self.level0[base] as usize;
            for &nb in &self.level0[base + 1..base + 1 + count] {
                push(nb, &mut order, &mut seen);
            }
        }
        order
    }

    /// The same graph with node `order[new]` renamed `new`.
    pub fn permuted(&self, order: &[u32]) -> BuiltGraph {
        let n = order.len();
        let mut old_to_new = vec![0u32; n];
        for (new, &old) in order.iter().enumerate() {
            old_to_new[old as usize] = new as u32;
        }
        let w0 = self.m0 + 1;
        let mut level0 = vec![0u32; n * w0];
        let mut levels = vec![0u8; n];
        let mut upper_start = Vec::with_capacity(n + 1);
        let mut upper = Vec::with_capacity(self.upper.len());
        let w = self.m + 1;
        for (new, &old) in order.iter().enumerate() {
            let old = old as usize;
            let src = &self.level0[old * w0..(old + 1) * w0];
            let dst = &mut level0[new * w0..(new + 1) * w0];
            dst[0] = src[0];
            for (d, s) in dst[1..=src[0] as usize].iter_mut().zip(&src[1..]) {
                *d = old_to_new[*s as usize];
            }
            levels[new] = self.levels[old];
            upper_start.push((upper.len() / w) as u32);
            let first = self.upper_start[old] as usize;
            for block in first..first + self.levels[old] as usize {
                let src = &self.upper[block * w..(block + 1) * w];
                upper.push(src[0]);
                upper.extend(src[1..].iter().enumerate().map(|(i, &id)| {
                    if i < src[0] as usize {
                        old_to_new[id as usize]
                    } else {
                        0
                    }
                }));
            }
        }
        upper_start.push((upper.len() / w) as u32);
        BuiltGraph {
            m: self.m,
            m0: self.m0,
            entry: old_to_new[self.entry as usize],
            max_level: self.max_level,
            level0,
            levels,
            upper_start,
            upper,
        }
    }
}
