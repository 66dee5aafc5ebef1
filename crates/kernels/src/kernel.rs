//! Generic kernels, written once against the tiny [`Simd`] vocabulary and instantiated per
//! instruction set (see `x86.rs`, `arm.rs` and [`Portable`] below).
//!
//! Every function here is `#[inline(always)]` so that, when it is instantiated inside a
//! `#[target_feature(enable = ...)]` entry point, the whole kernel (including the intrinsics
//! behind the `Simd` methods) is compiled for that instruction set.
//!
//! # Safety contract shared by everything in this module
//! The `unsafe fn`s here may only be called
//! 1. on a CPU that supports the instruction set of `S` (see the backend constructors in
//!    `lib.rs`, which only hand out backends whose features were detected), and
//! 2. with slices whose lengths satisfy the documented shape (`a.len() == b.len()`,
//!    `q.len() == nq * dim`, ...). The public wrappers in `lib.rs` assert this (with overflow
//!    checked multiplication) before calling in; the kernels only `debug_assert!` it.
//!
//! Given those two facts, every raw-pointer access below stays inside its slice: loops only
//! issue full-width loads at offsets `k` with `k + S::LANES <= len`, and the single tail load
//! is a `load_partial` of exactly `len - k` elements.

/// The handful of SIMD operations the kernels need. Implemented by zero-sized marker types;
/// `V` is the native vector of `LANES` f32 lanes.
///
/// # Safety (for callers of every method)
/// The running CPU must support the instruction set the implementing type stands for, and
/// pointer arguments must be valid for reads of the number of `f32`s stated per method.
pub(crate) trait Simd {
    type V: Copy;
    /// f32 lanes per vector.
    const LANES: usize;
    /// Query rows per `dot_block` micro-kernel tile (the tile is `MR x NR`).
    const MR: usize;
    /// The same for `l2sq_block`, whose tile needs one more live vector (the difference).
    const MR_L2: usize = Self::MR;
    /// Query rows per packed (outer-product) tile; the tile is `PMR x 2 * LANES`.
    const PMR: usize;

    /// All lanes zero.
    unsafe fn zero() -> Self::V;
    /// Loads `LANES` f32 from `p` (no alignment requirement).
    unsafe fn load(p: *const f32) -> Self::V;
    /// Loads `n` f32 from `p` (`0 < n < LANES`); the other lanes are zero. Reads nothing
    /// beyond `p + n`.
    unsafe fn load_partial(p: *const f32, n: usize) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// `a * b + c`, fused where the instruction set has it.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// Hints that the 64-byte line at `p` will be read soon (into L2). Any address is fine:
    /// prefetches never fault. Default: no-op.
    #[inline(always)]
    unsafe fn prefetch(_p: *const f32) {}
    /// Sum of all lanes.
    unsafe fn reduce(v: Self::V) -> f32;
    /// All lanes set to `*p`.
    unsafe fn broadcast(p: *const f32) -> Self::V;
    /// Stores `LANES` f32 to `p` (no alignment requirement).
    unsafe fn store(p: *mut f32, v: Self::V);
    /// Sums of all lanes of four vectors at once (implementations override this with a
    /// transpose-and-add that is cheaper than four separate reductions).
    #[inline(always)]
    unsafe fn reduce4(v: [Self::V; 4]) -> [f32; 4] {
        // SAFETY: same contract as the caller's.
        unsafe {
            [
                Self::reduce(v[0]),
                Self::reduce(v[1]),
                Self::reduce(v[2]),
                Self::reduce(v[3]),
            ]
        }
    }
}

/// Base rows per micro-kernel tile. Fixed at 4 so that one row of a tile's outputs is one
/// `reduce4` and one contiguous 4-float store.
pub(crate) const NR: usize = 4;

/// Independent accumulators in the single-pair kernels (hides FMA latency: with 4 chains of
/// latency ~4 cycles the loop is bound by its 2 loads per FMA, not by the FMA chain).
const UNROLL: usize = 4;

/// Shared body of `dot`/`l2sq`/`norm_sq`: `OP` picks the per-lane term.
const OP_DOT: u8 = 0;
const OP_L2: u8 = 1;

#[inline(always)]
unsafe fn term<S: Simd, const OP: u8>(x: S::V, y: S::V, acc: S::V) -> S::V {
    // SAFETY: forwarded contract (CPU supports S).
    unsafe {
        if OP == OP_L2 {
            let d = S::sub(x, y);
            S::fmadd(d, d, acc)
        } else {
            S::fmadd(x, y, acc)
        }
    }
}

/// `sum(term(a_i, b_i))` over two equal-length slices.
///
/// # Safety
/// See the module docs: CPU supports `S`, and `a.len() == b.len()`.
#[inline(always)]
unsafe fn pair<S: Simd, const OP: u8>(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len();
    let w = S::LANES;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: CPU supports S (caller). All loads are at offsets k with k + w <= n (full) or
    // exactly n - k elements (partial), and both slices have length n.
    unsafe {
        let mut acc = [S::zero(); UNROLL];
        let mut k = 0;
        while k + UNROLL * w <= n {
            for (u, acc) in acc.iter_mut().enumerate() {
                let o = k + u * w;
                *acc = term::<S, OP>(S::load(pa.add(o)), S::load(pb.add(o)), *acc);
            }
            k += UNROLL * w;
        }
        // Remaining full vectors rotate through the accumulators to keep chains short.
        let mut u = 0;
        while k + w <= n {
            acc[u] = term::<S, OP>(S::load(pa.add(k)), S::load(pb.add(k)), acc[u]);
            k += w;
            u += 1;
        }
        if k < n {
            let r = n - k;
            let last = UNROLL - 1;
            acc[last] = term::<S, OP>(
                S::load_partial(pa.add(k), r),
                S::load_partial(pb.add(k), r),
                acc[last],
            );
        }
        S::reduce(S::add(S::add(acc[0], acc[1]), S::add(acc[2], acc[3])))
    }
}

/// Inner product. # Safety: see module docs.
#[inline(always)]
pub(crate) unsafe fn dot<S: Simd>(a: &[f32], b: &[f32]) -> f32 {
    // SAFETY: forwarded contract.
    unsafe { pair::<S, OP_DOT>(a, b) }
}

/// Squared Euclidean distance. # Safety: see module docs.
#[inline(always)]
pub(crate) unsafe fn l2sq<S: Simd>(a: &[f32], b: &[f32]) -> f32 {
    // SAFETY: forwarded contract.
    unsafe { pair::<S, OP_L2>(a, b) }
}

/// Squared Euclidean norm (one load per element instead of `dot(v, v)`'s two).
/// # Safety: see module docs.
#[inline(always)]
pub(crate) unsafe fn norm_sq<S: Simd>(v: &[f32]) -> f32 {
    let n = v.len();
    let w = S::LANES;
    let p = v.as_ptr();
    // SAFETY: CPU supports S (caller); loads stay inside v as in `pair`.
    unsafe {
        let mut acc = [S::zero(); UNROLL];
        let mut k = 0;
        while k + UNROLL * w <= n {
            for (u, acc) in acc.iter_mut().enumerate() {
                let x = S::load(p.add(k + u * w));
                *acc = S::fmadd(x, x, *acc);
            }
            k += UNROLL * w;
        }
        let mut u = 0;
        while k + w <= n {
            let x = S::load(p.add(k));
            acc[u] = S::fmadd(x, x, acc[u]);
            k += w;
            u += 1;
        }
        if k < n {
            let x = S::load_partial(p.add(k), n - k);
            acc[UNROLL - 1] = S::fmadd(x, x, acc[UNROLL - 1]);
        }
        S::reduce(S::add(S::add(acc[0], acc[1]), S::add(acc[2], acc[3])))
    }
}

/// One `M x N` micro-kernel tile: for the `M` query rows starting at `q` and the `N` base rows
/// starting at `b` (row stride `dim`), writes `term`-sums to `out[i * ldo + j]`.
///
/// One vector accumulator per (query, base) pair, so each loaded base vector is reused
/// against `M` queries and each query vector against `N` base rows; the `M * N` independent
/// FMA chains hide FMA latency. The lanes of each accumulator are summed once at the end.
///
/// # Safety
/// CPU supports `S`; `q` valid for `M * dim` reads, `b` for `N * dim` reads, and
/// `out[i * ldo + j]` writable for `i < M`, `j < N`.
// Index loops over the const tile bounds read most clearly as a register tile.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn tile<S: Simd, const OP: u8, const M: usize, const N: usize>(
    q: *const f32,
    b: *const f32,
    dim: usize,
    out: *mut f32,
    ldo: usize,
) {
    let w = S::LANES;
    // SAFETY: per the function contract; every load is at row offset k with k + w <= dim, or
    // a partial load of exactly dim - k elements.
    unsafe {
        let mut acc = [[S::zero(); N]; M];
        let mut k = 0;
        while k + w <= dim {
            // Hold the M query vectors, stream the N base vectors one at a time: M * N
            // accumulators + M + 1 live vectors (AVX2 3x4: exactly the 16 ymm registers; a
            // spilled accumulator would put a store-to-load forward into the FMA chain).
            let mut qv = [S::zero(); M];
            for (i, qv) in qv.iter_mut().enumerate() {
                *qv = S::load(q.add(i * dim + k));
            }
            for j in 0..N {
                let bv = S::load(b.add(j * dim + k));
                for i in 0..M {
                    acc[i][j] = term::<S, OP>(qv[i], bv, acc[i][j]);
                }
            }
            k += w;
        }
        if k < dim {
            let r = dim - k;
            let mut bv = [S::zero(); N];
            for (j, bv) in bv.iter_mut().enumerate() {
                *bv = S::load_partial(b.add(j * dim + k), r);
            }
            for (i, acc) in acc.iter_mut().enumerate() {
                let qv = S::load_partial(q.add(i * dim + k), r);
                for j in 0..N {
                    acc[j] = term::<S, OP>(qv, bv[j], acc[j]);
                }
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            let o = out.add(i * ldo);
            if N == 4 {
                let s = S::reduce4([acc[0], acc[1], acc[2], acc[3]]);
                for (j, s) in s.iter().enumerate() {
                    *o.add(j) = *s;
                }
            } else {
                for (j, a) in acc.iter().enumerate() {
                    *o.add(j) = S::reduce(*a);
                }
            }
        }
    }
}

/// Tile with a run-time row count `m` (`1..=MAX_MR`), for the last rows of a query block.
///
/// # Safety
/// As [`tile`] with `M = m`.
#[inline(always)]
unsafe fn tile_rows<S: Simd, const OP: u8, const N: usize>(
    m: usize,
    q: *const f32,
    b: *const f32,
    dim: usize,
    out: *mut f32,
    ldo: usize,
) {
    // SAFETY: forwarded contract with M = m.
    unsafe {
        match m {
            1 => tile::<S, OP, 1, N>(q, b, dim, out, ldo),
            2 => tile::<S, OP, 2, N>(q, b, dim, out, ldo),
            3 => tile::<S, OP, 3, N>(q, b, dim, out, ldo),
            4 => tile::<S, OP, 4, N>(q, b, dim, out, ldo),
            5 => tile::<S, OP, 5, N>(q, b, dim, out, ldo),
            6 => tile::<S, OP, 6, N>(q, b, dim, out, ldo),
            _ => unreachable!("tile rows {m} > MAX_MR"),
        }
    }
}

/// Largest `Simd::MR` / `Simd::PMR` supported by [`tile_rows`] / [`ptile_rows`].
pub(crate) const MAX_MR: usize = 6;

/// Below this many query rows `dot_block` uses the unpacked dot-product-layout kernel
/// ([`block_direct`]); from here on, packing the base rows into panels pays for itself
/// ([`block_packed`]). Measured crossover on AVX2 (Zen 3, dim 384): ~100-150 rows.
const PACK_MIN_NQ: usize = 128;

/// Bytes of query rows kept hot (in L2) by [`block_direct`].
const QUERY_BLOCK_BYTES: usize = 192 * 1024;

/// Bytes of base rows kept hot (in L1) by [`block_direct`] while a query tile runs over them.
const BASE_L1_BYTES: usize = 18 * 1024;

/// Bytes of packed base panels kept hot (in L2) by [`block_packed`].
const PACKED_CHUNK_BYTES: usize = 128 * 1024;

/// Bytes of query rows per block in [`block_packed`]: the query tiles of a block run over
/// each packed chunk, so a block must stay in L2 (re-reading all of 2000 x 384 queries from
/// L3 for every chunk cost ~20%); each extra block re-packs the base rows (~5% at this size).
const PACKED_QUERY_BLOCK_BYTES: usize = 384 * 1024;

/// `out[i * nb + j] = sum_k term(q[i][k], b[j][k])`: picks the loop nest for the shape.
///
/// # Safety
/// See module docs: CPU supports `S`, `q.len() == nq * dim`, `b.len() == nb * dim`,
/// `out.len() == nq * nb`.
#[inline(always)]
unsafe fn block<S: Simd, const OP: u8>(
    q: &[f32],
    nq: usize,
    b: &[f32],
    nb: usize,
    dim: usize,
    out: &mut [f32],
) {
    debug_assert!(q.len() == nq * dim && b.len() == nb * dim && out.len() == nq * nb);
    if nq == 0 || nb == 0 {
        return;
    }
    if dim == 0 {
        out.fill(0.0);
        return;
    }
    // SAFETY (all three): forwarded contract.
    if nq == 1 {
        // Memory-bound matrix-vector product: one sequential pass over `b` with the
        // single-pair kernel is what the hardware prefetcher likes best (measured faster
        // than 1 x 4 / 1 x 8 tiles).
        for (o, row) in out.iter_mut().zip(b.chunks_exact(dim)) {
            *o = unsafe { pair::<S, OP>(q, row) };
        }
    } else if nq < PACK_MIN_NQ {
        unsafe { block_direct::<S, OP>(q, nq, b, nb, dim, out) }
    } else {
        unsafe { block_packed::<S, OP>(q, nq, b, nb, dim, out) }
    }
}

/// Unpacked loop nest around [`tile`]: query rows in blocks of ~`QUERY_BLOCK_BYTES` (stay in
/// L2); within a block, base rows in superblocks of ~`BASE_L1_BYTES` (stay in L1 while every
/// `MR`-row query tile of the block runs over them, `NR` base rows per tile). The next
/// superblock is prefetched into L2 a little at a time, spread over the query tiles.
///
/// # Safety
/// As [`block`], plus `nq, nb, dim > 0`.
#[inline(always)]
unsafe fn block_direct<S: Simd, const OP: u8>(
    q: &[f32],
    nq: usize,
    b: &[f32],
    nb: usize,
    dim: usize,
    out: &mut [f32],
) {
    const { assert!(S::MR >= 1 && S::MR <= MAX_MR && S::MR_L2 >= 1 && S::MR_L2 <= MAX_MR) };
    let mr = if OP == OP_L2 { S::MR_L2 } else { S::MR };
    // Query rows per block: what fits the budget, evened out over the blocks (a small last
    // block would stream all of `b` for a handful of rows).
    let max_rows = (QUERY_BLOCK_BYTES / (dim * 4)).max(1);
    let rows_per_block = nq.div_ceil(nq.div_ceil(max_rows)).div_ceil(mr) * mr;
    let sb_rows = (BASE_L1_BYTES / (dim * 4)).max(1).div_ceil(NR) * NR;
    let (pq, pb, po) = (q.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    let mut i0 = 0;
    while i0 < nq {
        let i1 = nq.min(i0 + rows_per_block);
        let tiles = (i1 - i0).div_ceil(mr);
        let mut j0 = 0;
        while j0 < nb {
            let j1 = nb.min(j0 + sb_rows);
            // Element range of the next superblock, prefetched in `tiles` equal steps.
            let pf_end = nb.min(j1 + sb_rows) * dim;
            let mut pf_at = j1 * dim;
            let pf_step = ((pf_end - pf_at) / tiles).div_ceil(16) * 16;
            let mut i = i0;
            while i < i1 {
                let m = mr.min(i1 - i);
                // SAFETY: rows i..i + m <= i1 <= nq of q, rows j..j + n <= j1 <= nb of b and
                // outputs (i.., j..) inside out, given the slice lengths the caller
                // guarantees; the CPU supports S (caller). Prefetches are hints to addresses
                // inside b and never fault.
                unsafe {
                    let stop = pf_end.min(pf_at + pf_step);
                    while pf_at < stop {
                        S::prefetch(pb.add(pf_at));
                        pf_at += 16;
                    }
                    let qi = pq.add(i * dim);
                    let oi = po.add(i * nb);
                    let mut j = j0;
                    while j + NR <= j1 {
                        tile_rows::<S, OP, NR>(m, qi, pb.add(j * dim), dim, oi.add(j), nb);
                        j += NR;
                    }
                    while j < j1 {
                        tile_rows::<S, OP, 1>(m, qi, pb.add(j * dim), dim, oi.add(j), nb);
                        j += 1;
                    }
                }
                i += m;
            }
            j0 = j1;
        }
        i0 = i1;
    }
}

/// One packed tile: `M` query rows (row-major, stride `dim`, read one element at a time and
/// broadcast) against a panel of `2 * LANES` base rows packed k-major
/// (`panel[k * 2 * LANES + c] = b[c][k]`). Accumulates outer products, `M x 2` vector
/// accumulators, so there are no horizontal reductions and the outputs are stored as
/// vectors. Writes the first `ncols` columns of each output row.
///
/// # Safety
/// CPU supports `S`; `q` valid for `M * dim` reads; `panel` for `dim * 2 * LANES` reads;
/// `out[i * ldo + c]` writable for `i < M`, `c < ncols <= 2 * LANES <= 64`.
#[inline(always)]
unsafe fn ptile<S: Simd, const OP: u8, const M: usize>(
    q: *const f32,
    dim: usize,
    panel: *const f32,
    out: *mut f32,
    ldo: usize,
    ncols: usize,
) {
    let w = S::LANES;
    // SAFETY: per the function contract; k < dim throughout.
    unsafe {
        let mut acc = [[S::zero(); 2]; M];
        for k in 0..dim {
            let b0 = S::load(panel.add(k * 2 * w));
            let b1 = S::load(panel.add(k * 2 * w + w));
            for (i, acc) in acc.iter_mut().enumerate() {
                let a = S::broadcast(q.add(i * dim + k));
                acc[0] = term::<S, OP>(a, b0, acc[0]);
                acc[1] = term::<S, OP>(a, b1, acc[1]);
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            let o = out.add(i * ldo);
            if ncols == 2 * w {
                S::store(o, acc[0]);
                S::store(o.add(w), acc[1]);
            } else {
                let mut tmp = [0.0f32; 64];
                S::store(tmp.as_mut_ptr(), acc[0]);
                S::store(tmp.as_mut_ptr().add(w), acc[1]);
                std::ptr::copy_nonoverlapping(tmp.as_ptr(), o, ncols);
            }
        }
    }
}

/// [`ptile`] with a run-time row count `m` (`1..=MAX_MR`).
///
/// # Safety
/// As [`ptile`] with `M = m`.
#[inline(always)]
unsafe fn ptile_rows<S: Simd, const OP: u8>(
    m: usize,
    q: *const f32,
    dim: usize,
    panel: *const f32,
    out: *mut f32,
    ldo: usize,
    ncols: usize,
) {
    // SAFETY: forwarded contract with M = m.
    unsafe {
        match m {
            1 => ptile::<S, OP, 1>(q, dim, panel, out, ldo, ncols),
            2 => ptile::<S, OP, 2>(q, dim, panel, out, ldo, ncols),
            3 => ptile::<S, OP, 3>(q, dim, panel, out, ldo, ncols),
            4 => ptile::<S, OP, 4>(q, dim, panel, out, ldo, ncols),
            5 => ptile::<S, OP, 5>(q, dim, panel, out, ldo, ncols),
            6 => ptile::<S, OP, 6>(q, dim, panel, out, ldo, ncols),
            _ => unreachable!("tile rows {m} > MAX_MR"),
        }
    }
}

/// Packs base rows `b[c0 .. c0 + nc]` (`nc <= w2`) k-major into `panel` (`dim * w2` long):
/// `panel[k * w2 + c] = b[c0 + c][k]`, zero for the missing columns `nc..w2`.
fn pack_panel(panel: &mut [f32], b: &[f32], c0: usize, nc: usize, w2: usize, dim: usize) {
    debug_assert!(nc <= w2 && panel.len() == dim * w2);
    for c in 0..w2 {
        if c < nc {
            let row = &b[(c0 + c) * dim..(c0 + c + 1) * dim];
            for (dst, &x) in panel.chunks_exact_mut(w2).zip(row) {
                dst[c] = x;
            }
        } else {
            for dst in panel.chunks_exact_mut(w2) {
                dst[c] = 0.0;
            }
        }
    }
}

/// Packed (BLAS-style) loop nest around [`ptile`]: query rows in blocks of
/// ~`PACKED_QUERY_BLOCK_BYTES` (stay in L2); for each block, base rows a chunk of
/// ~`PACKED_CHUNK_BYTES` at a time are packed into k-major panels of `2 * LANES` rows (stay
/// in L2), then every `PMR`-row query tile of the block runs over all panels of the chunk
/// (the tile's query rows stay in L1). Each base row is packed once per query block, so this
/// only pays off for many query rows.
///
/// # Safety
/// As [`block`], plus `nq, nb, dim > 0`.
#[inline(always)]
unsafe fn block_packed<S: Simd, const OP: u8>(
    q: &[f32],
    nq: usize,
    b: &[f32],
    nb: usize,
    dim: usize,
    out: &mut [f32],
) {
    const { assert!(S::PMR >= 1 && S::PMR <= MAX_MR && 2 * S::LANES <= 64) };
    let w2 = 2 * S::LANES;
    let mr = S::PMR;
    let panel_len = dim * w2;
    let panels_per_chunk = (PACKED_CHUNK_BYTES / (panel_len * 4)).max(1);
    let chunk_rows = panels_per_chunk * w2;
    // 64-byte aligned panel buffer, so the panel loads never split a cache line.
    let mut buf = vec![0.0f32; panels_per_chunk * panel_len + 16];
    let off = buf.as_ptr().align_offset(64).min(16);
    let panels = &mut buf[off..off + panels_per_chunk * panel_len];
    let (pq, po) = (q.as_ptr(), out.as_mut_ptr());
    // Query rows per block (evened out as in `block_direct`).
    let max_rows = (PACKED_QUERY_BLOCK_BYTES / (dim * 4)).max(mr);
    let rows_per_block = nq.div_ceil(nq.div_ceil(max_rows)).div_ceil(mr) * mr;
    let mut i0 = 0;
    while i0 < nq {
        let i1 = nq.min(i0 + rows_per_block);
        let mut j0 = 0;
        while j0 < nb {
            let j1 = nb.min(j0 + chunk_rows);
            let npan = (j1 - j0).div_ceil(w2);
            for (p, panel) in panels.chunks_exact_mut(panel_len).take(npan).enumerate() {
                let c0 = j0 + p * w2;
                pack_panel(panel, b, c0, w2.min(j1 - c0), w2, dim);
            }
            let mut i = i0;
            while i < i1 {
                let m = mr.min(i1 - i);
                for p in 0..npan {
                    let c0 = j0 + p * w2;
                    // SAFETY: rows i..i + m <= nq of q; panel p < npan <= panels_per_chunk lies
                    // inside `panels`; outputs (i.., c0..c0 + nc) with c0 + nc <= j1 <= nb lie
                    // inside out (lengths guaranteed by the caller); the CPU supports S (caller).
                    unsafe {
                        ptile_rows::<S, OP>(
                            m,
                            pq.add(i * dim),
                            dim,
                            panels.as_ptr().add(p * panel_len),
                            po.add(i * nb + c0),
                            nb,
                            w2.min(j1 - c0),
                        );
                    }
                }
                i += m;
            }
            j0 = j1;
        }
        i0 = i1;
    }
}

/// Block of inner products. # Safety: see [`block`].
#[inline(always)]
pub(crate) unsafe fn dot_block<S: Simd>(
    q: &[f32],
    nq: usize,
    b: &[f32],
    nb: usize,
    dim: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded contract.
    unsafe { block::<S, OP_DOT>(q, nq, b, nb, dim, out) }
}

/// Block of squared Euclidean distances. # Safety: see [`block`].
#[inline(always)]
pub(crate) unsafe fn l2sq_block<S: Simd>(
    q: &[f32],
    nq: usize,
    b: &[f32],
    nb: usize,
    dim: usize,
    out: &mut [f32],
) {
    // SAFETY: forwarded contract.
    unsafe { block::<S, OP_L2>(q, nq, b, nb, dim, out) }
}

/// Portable implementation on `[f32; 4]`: plain Rust arithmetic (separate multiply and add,
/// since `f32::mul_add` is a slow libm call without hardware FMA). Compilers turn it into
/// baseline SIMD (SSE2 on x86_64) where they can. This is the "scalar" backend: always
/// available, and what `SEARCHD_KERNELS=scalar` selects.
#[derive(Clone, Copy)]
pub(crate) struct Portable;

type F4 = [f32; 4];

impl Simd for Portable {
    type V = F4;
    const LANES: usize = 4;
    const MR: usize = 3;
    const MR_L2: usize = 2;

    #[inline(always)]
    unsafe fn zero() -> F4 {
        [0.0; 4]
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> F4 {
        // SAFETY: caller guarantees p is valid for 4 reads; read_unaligned has no alignment
        // requirement.
        unsafe { p.cast::<F4>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> F4 {
        let mut v = [0.0; 4];
        // SAFETY: caller guarantees p is valid for n < 4 reads.
        let src = unsafe { std::slice::from_raw_parts(p, n) };
        v[..n].copy_from_slice(src);
        v
    }
    #[inline(always)]
    unsafe fn add(a: F4, b: F4) -> F4 {
        std::array::from_fn(|i| a[i] + b[i])
    }
    #[inline(always)]
    unsafe fn sub(a: F4, b: F4) -> F4 {
        std::array::from_fn(|i| a[i] - b[i])
    }
    #[inline(always)]
    unsafe fn fmadd(a: F4, b: F4, c: F4) -> F4 {
        std::array::from_fn(|i| a[i] * b[i] + c[i])
    }
    #[inline(always)]
    unsafe fn reduce(v: F4) -> f32 {
        (v[0] + v[2]) + (v[1] + v[3])
    }
    const PMR: usize = 3;
    #[inline(always)]
    unsafe fn broadcast(p: *const f32) -> F4 {
        // SAFETY: caller guarantees p is valid for a read.
        [unsafe { *p }; 4]
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: F4) {
        // SAFETY: caller guarantees p is valid for 4 writes.
        unsafe { p.cast::<F4>().write_unaligned(v) }
    }
}

/// Vectors of points per block in [`l2sq_columns`]: each accumulator is a chain of
/// dependent FMAs (one per dimension), and with only a few dimensions per call the chains
/// are short, so more of them hide the FMA latency better: 8 (not 4) made a PQ nearest-
/// centroid search (6 dimensions x 256 points, with `argmin`) ~15-20% faster on Zen 3.
/// 8 accumulators, the broadcast and a difference fit the 16 AVX2 registers.
const COLS_UNROLL: usize = 8;

/// `out[j] = sum_d (x[d] - cols[d * n + j])^2` for the `n = out.len()` points stored as
/// columns of `cols` (`x.len()` rows of `n`): a query against many short points laid out
/// dimension-major (k-means assignment, PQ encoding). Lanes run over points, so each
/// distance is accumulated in dimension order `d = 0, 1, ...` whatever the lane width or
/// blocking: the value for a point does not depend on `n` or on where it sits in `cols`.
/// Blocks of `COLS_UNROLL` vectors of points keep their sums in registers across all of `x`.
///
/// # Safety
/// CPU supports `S`; `cols.len() == x.len() * out.len()`.
#[inline(always)]
pub(crate) unsafe fn l2sq_columns<S: Simd>(x: &[f32], cols: &[f32], out: &mut [f32]) {
    let (dim, n, w) = (x.len(), out.len(), S::LANES);
    debug_assert_eq!(cols.len(), dim * n);
    let (px, pc, po) = (x.as_ptr(), cols.as_ptr(), out.as_mut_ptr());
    // SAFETY: CPU supports S (caller). Column loads read cols[d * n + j .. + w] with
    // d < dim and j + w <= n (full) or exactly n - j values (partial), inside the
    // dim * n values of cols; x reads are at d < dim; stores write out[j .. j + w] with
    // j + w <= n, or n - j values through a local buffer.
    unsafe {
        let mut j = 0;
        while j + COLS_UNROLL * w <= n {
            let mut acc = [S::zero(); COLS_UNROLL];
            for d in 0..dim {
                let xd = S::broadcast(px.add(d));
                for (u, acc) in acc.iter_mut().enumerate() {
                    let t = S::sub(xd, S::load(pc.add(d * n + j + u * w)));
                    *acc = S::fmadd(t, t, *acc);
                }
            }
            for (u, acc) in acc.iter().enumerate() {
                S::store(po.add(j + u * w), *acc);
            }
            j += COLS_UNROLL * w;
        }
        while j < n {
            let lanes = w.min(n - j);
            let mut acc = S::zero();
            for d in 0..dim {
                let xd = S::broadcast(px.add(d));
                let c = if lanes == w {
                    S::load(pc.add(d * n + j))
                } else {
                    S::load_partial(pc.add(d * n + j), lanes)
                };
                let t = S::sub(xd, c);
                acc = S::fmadd(t, t, acc);
            }
            if lanes == w {
                S::store(po.add(j), acc);
            } else {
                let mut tmp = [0.0f32; 64];
                S::store(tmp.as_mut_ptr(), acc);
                std::ptr::copy_nonoverlapping(tmp.as_ptr(), po.add(j), lanes);
            }
            j += lanes;
        }
    }
}

/// Centroids per product-quantizer subspace: one lookup table row per byte value.
pub(crate) const PQ_KSUB: usize = 256;

/// `sum_j lut[j * 256 + codes[j]]` with four independent accumulators (a chain of dependent
/// adds would cap the loop at one table read per add latency, ~3 cycles). Safe code: the
/// fixed-size chunks let the compiler see that `256 * u + code < 1024`, so the lookups carry
/// no bounds checks. Summation order: accumulator `u` takes subspaces `u, u + 4, ...`, then
/// `(acc0 + acc1) + (acc2 + acc3)`, then the tail in order.
///
/// Callers guarantee `lut.len() == codes.len() * 256`.
#[inline(always)]
pub(crate) fn pq_adc_unrolled(lut: &[f32], codes: &[u8]) -> f32 {
    debug_assert_eq!(lut.len(), codes.len() * PQ_KSUB);
    let (tables, _) = lut.as_chunks::<{ 4 * PQ_KSUB }>();
    let (groups, tail) = codes.as_chunks::<4>();
    let mut acc = [0.0f32; 4];
    for (t, c) in tables.iter().zip(groups) {
        for (u, acc) in acc.iter_mut().enumerate() {
            *acc += t[u * PQ_KSUB + c[u] as usize];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    let done = groups.len() * 4;
    for (j, &c) in tail.iter().enumerate() {
        s += lut[(done + j) * PQ_KSUB + c as usize];
    }
    s
}

/// `popcount(a ^ b)` over equal-length slices, four words per step into independent
/// counters. Compiled inside a `popcnt` entry point this is one `popcnt` per word; elsewhere
/// `count_ones` is the compiler's bit-twiddling fallback (or NEON `cnt` on aarch64).
#[inline(always)]
pub(crate) fn hamming_unrolled(a: &[u64], b: &[u64]) -> u32 {
    debug_assert_eq!(a.len(), b.len());
    let (ga, ta) = a.as_chunks::<4>();
    let (gb, tb) = b.as_chunks::<4>();
    let mut acc = [0u32; 4];
    for (x, y) in ga.iter().zip(gb) {
        for ((acc, x), y) in acc.iter_mut().zip(x).zip(y) {
            *acc += (x ^ y).count_ones();
        }
    }
    let tail: u32 = ta.iter().zip(tb).map(|(x, y)| (x ^ y).count_ones()).sum();
    acc.iter().sum::<u32>() + tail
}

/// First index of the smallest value (NaNs skipped) in two passes that compile to SIMD
/// without target features: a lane-wise minimum, then a search for the first block of 16
/// holding it. (A single "if smaller, remember the index" pass compiles to a data-dependent
/// branch per element, which mispredicts on unordered data.)
#[inline(always)]
pub(crate) fn argmin_portable(v: &[f32]) -> Option<usize> {
    const W: usize = 16;
    let (blocks, tail) = v.as_chunks::<W>();
    let mut low = [f32::INFINITY; W];
    for block in blocks {
        for (l, &x) in low.iter_mut().zip(block) {
            // `x < l` is false for NaN, so NaNs never enter.
            *l = if x < *l { x } else { *l };
        }
    }
    let min = low
        .iter()
        .chain(tail)
        .fold(f32::INFINITY, |m, &x| if x < m { x } else { m });
    let b = blocks
        .iter()
        .position(|block| block.iter().fold(false, |f, &x| f | (x == min)));
    match b {
        Some(b) => blocks[b].iter().position(|&x| x == min).map(|l| b * W + l),
        None => tail
            .iter()
            .position(|&x| x == min)
            .map(|l| blocks.len() * W + l),
    }
}
