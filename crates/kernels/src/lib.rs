//! Distance kernels for searchd.
//!
//! Every public function here is safe; it dispatches once (at first use) to the best
//! implementation the running CPU supports (AVX-512, AVX2+FMA, NEON, or scalar).
//! The scalar versions in [`scalar`] are the reference every SIMD path is tested against.
//!
//! # Dispatch design
//! * The kernels are written once, generically, in `kernel.rs` against a tiny SIMD
//!   vocabulary (load, masked tail load, fmadd, reductions). Each instruction set supplies
//!   that vocabulary (`x86.rs`: AVX2+FMA, AVX-512F; `arm.rs`: NEON; `kernel::Portable`: plain
//!   Rust) and is instantiated inside `#[target_feature(enable = ...)]` entry points, so loop,
//!   tail and blocking logic is shared and tested once for all paths.
//! * A [`Backend`] is a table of those entry points. Backend tables are private statics and
//!   are only ever handed out (by [`Backend::available`], [`Backend::by_name`],
//!   [`Backend::active`]) after `is_x86_feature_detected!` / `is_aarch64_feature_detected!`
//!   confirmed their features; that invariant is what makes calling them safe.
//! * The choice is made once, on first use, and cached in a `OnceLock`; a hot call is a
//!   load of the cached `&'static Backend` plus one indirect call.
//! * The environment variable [`ENV_OVERRIDE`] (`SEARCHD_KERNELS`) is read at that moment:
//!   `auto` (or unset) picks the best path, `scalar` / `avx2` / `avx512` / `neon` force that
//!   path if the CPU has it (otherwise a warning goes to stderr and the best path is used).
//!   `SEARCHD_KERNELS=scalar` is the way to exercise the fallback path on a modern CPU.
//! * Length mismatches panic (assert) in the safe wrappers, before any unsafe code runs.
//! * The `"scalar"` backend is the same generic code on plain `[f32; 4]` arithmetic (no
//!   intrinsics, no `target_feature`; the compiler may still use baseline SIMD such as SSE2).
//!   The deliberately naive functions in [`scalar`] are separate: they are the test oracle.
//!
//! # `dot_block`: three loop nests, picked by the number of query rows `nq`
//! * `nq == 1` (a matrix-vector product, memory-bound): the single-pair kernel row by row,
//!   one sequential pass over `b` (what the hardware prefetcher handles best).
//! * `nq < 128`: unpacked "dot-product layout" tiles (both operands are row-major with `dim`
//!   contiguous, so no packing): `MR x 4` vector accumulators (AVX2 3x4, AVX-512 4x4, NEON
//!   4x4; the 12-16 independent FMA chains hide FMA latency), each loaded base vector reused
//!   against `MR` queries and each query vector against 4 base rows, each output row of a
//!   tile finished with one transpose-and-add reduction. Query rows in ~192 KiB blocks (L2),
//!   base rows in ~18 KiB superblocks (L1) with the next one software-prefetched.
//! * `nq >= 128`: BLAS-style packed path: base rows are packed (per ~384 KiB block of query
//!   rows) into k-major panels of `2 * LANES` rows, and `6 x 2` vector accumulators
//!   accumulate outer products of broadcast query elements with panel rows: no horizontal
//!   reductions, fewer bytes loaded per FMA, so it gets closer to FMA peak once the packing
//!   is amortised over enough queries.
//!
//! `l2sq_block` uses the same nests with `(q - b)^2` terms (not the `|q|^2 + |b|^2 - 2q.b`
//! expansion, which cancels badly for nearby vectors).
//!
//! # Kernels on codes (plain loops per path, not the generic `Simd` ones)
//! * [`dot_u8_i16`]: SQ8 codes times 16-bit query weights, exact in `i32` (AVX2
//!   `vpmovzxbw` + `vpmaddwd`).
//! * [`pq_adc`]: product-quantizer score, one lookup-table entry per subspace code, summed.
//!   An unrolled four-accumulator loop on every path; the AVX2 `vgatherdps` version measured
//!   ~1.7-2x slower on this crate's test machine (figures on [`pq_adc`]).
//! * [`hamming`]: `popcount(a ^ b)` over `u64` words; `popcnt` on x86_64 (the x86 backends
//!   require it at detection, as every AVX2 CPU has it), `count_ones` elsewhere.
//!
//! [`l2sq_columns`] (one point against many short points stored dimension-major, one lane
//! per point; k-means assignment and PQ encoding) is generic like the float kernels;
//! [`argmin`] (first index of the minimum) has an AVX2 version (`vminps`, then compare and
//! `vmovmskps`) and a portable two-pass one.
//!
//! # Measured (`cargo run --release -p searchd-kernels --example kernel_bench`)
//! AMD EPYC VM, 2 vCPUs, AVX2+FMA (no AVX-512 on this host, so that path is compiled and
//! tested only where the CPU has it), single thread, thread CPU time, best of 3 runs. The
//! host was shared with other builds (load 5-9 on 2 cores), so figures scatter by +-20%;
//! a plain 12-chain FMA loop peaks at ~86-91 GFLOP/s on it.
//!
//! | path     | ns/dot d384 | d128 | d768 | ns/l2sq d384 | dot_block 2000x50000x384 |
//! |----------|-------------|------|------|--------------|--------------------------|
//! | avx2+fma | 18          | 8.5  | 35   | 25           | 69-75 GFLOP/s (~1.05 s)  |
//! | scalar   | 76          | 29   | 147  | 67           | 18-21 GFLOP/s (portable code, SSE2 auto-vectorised) |
//!
//! Other `dot_block` shapes (avx2+fma, x 50000 x 384): 1 query 4.5-5.4 GFLOP/s (~8 ms,
//! memory-bound), 8 queries 22-32, 64 queries 60-76.
//!
//! Crates considered for `dot_block`, same machine, same shapes, best of 3 (CPU time):
//!
//! | queries | this crate | `gemm` 0.19 (no threads) | `matrixmultiply` 0.3.11 |
//! |---------|------------|--------------------------|-------------------------|
//! | 2000    | 64-75      | 50-81                    | 62-63                   |
//! | 64      | 61-71      | 50-56                    | 35-38                   |
//! | 8       | 22-25      | 12-16                    | 11-12                   |
//! | 1       | 4.5-5.4    | 4.3-5.6                  | 1.4-1.5                 |
//!
//! For reference, faiss `IndexFlatIP` (OpenBLAS sgemm, 1 thread) did 2000 x 50000 x 384
//! with k=10 in 1.14-1.32 s CPU (58-67 GFLOP/s), numpy `sgemm` 1.13-1.25 s. The hand-written
//! kernel is on par with `gemm` and BLAS for big batches and clearly ahead for small ones
//! (no packing), so it is used, with no extra dependency.
#![warn(missing_docs)]

#[cfg(target_arch = "aarch64")]
mod arm;
mod kernel;
pub mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::OnceLock;

/// How two vectors are compared. Scores are always "higher is better".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Cosine similarity; vectors are normalised once at build time and queries at search
    /// time, so the kernel is a plain inner product.
    Cosine,
    /// Inner product.
    InnerProduct,
    /// Squared Euclidean distance; the score is its negation.
    L2,
}

impl Metric {
    /// Short name used on the command line and in manifests: `cosine`, `ip`, `l2`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::InnerProduct => "ip",
            Metric::L2 => "l2",
        }
    }

    /// Parse a name as written by [`Metric::name`].
    pub fn parse(s: &str) -> Option<Metric> {
        match s {
            "cosine" | "cos" | "angular" => Some(Metric::Cosine),
            "ip" | "dot" | "inner_product" => Some(Metric::InnerProduct),
            "l2" | "euclidean" => Some(Metric::L2),
            _ => None,
        }
    }

    /// Similarity score of `a` and `b` (higher is better). For cosine both must already be
    /// unit length.
    #[inline]
    pub fn score(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Metric::Cosine | Metric::InnerProduct => dot(a, b),
            Metric::L2 => -l2sq(a, b),
        }
    }
}

/// Inner product of two equal-length slices.
///
/// # Panics
/// If `a.len() != b.len()`.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    Backend::active().dot(a, b)
}

/// Squared Euclidean distance of two equal-length slices.
///
/// # Panics
/// If `a.len() != b.len()`.
#[inline]
pub fn l2sq(a: &[f32], b: &[f32]) -> f32 {
    Backend::active().l2sq(a, b)
}

/// Squared Euclidean norm, `dot(v, v)` reading `v` once.
#[inline]
pub fn norm_sq(v: &[f32]) -> f32 {
    Backend::active().norm_sq(v)
}

/// Scales `v` to unit length. Returns false (and leaves `v` alone) if its norm is zero or
/// not finite. The norm and the scaling are computed in f64, so vectors whose squared
/// components underflow or overflow float32 (every component near 1e-25, or near 1e20)
/// are still normalised instead of being taken for zero or infinite length.
pub fn normalize(v: &mut [f32]) -> bool {
    if v.iter().any(|x| !x.is_finite()) {
        return false;
    }
    let n = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if !n.is_finite() || n == 0.0 {
        return false;
    }
    let inv = 1.0 / n;
    v.iter_mut().for_each(|x| *x = (f64::from(*x) * inv) as f32);
    true
}

/// Block of inner products: `out[i * nb + j] = dot(q_i, b_j)` for the `nq` rows of `q` and
/// the `nb` rows of `b`, all of length `dim`, row-major. This is the GEMM-shaped kernel
/// exact search is built on.
///
/// # Panics
/// If `q.len() != nq * dim`, `b.len() != nb * dim` or `out.len() != nq * nb` (products that
/// overflow `usize` count as mismatches).
pub fn dot_block(q: &[f32], nq: usize, b: &[f32], nb: usize, dim: usize, out: &mut [f32]) {
    Backend::active().dot_block(q, nq, b, nb, dim, out)
}

/// Block of squared Euclidean distances: `out[i * nb + j] = l2sq(q_i, b_j)`, same layout and
/// panics as [`dot_block`]. Same register blocking, computed as `sum((q - b)^2)` (not via
/// norms, so there is no cancellation error).
pub fn l2sq_block(q: &[f32], nq: usize, b: &[f32], nb: usize, dim: usize, out: &mut [f32]) {
    Backend::active().l2sq_block(q, nq, b, nb, dim, out)
}

/// `sum(a[i] * b[i])` of unsigned bytes (SQ8 codes) and signed 16-bit weights (a scaled
/// query), in `i32`. Exact whenever `sum(|a[i] * b[i]|) < 2^31`; wraps around otherwise.
///
/// # Panics
/// If the lengths differ.
#[inline]
pub fn dot_u8_i16(a: &[u8], b: &[i16]) -> i32 {
    Backend::active().dot_u8_i16(a, b)
}

/// `sum(v[i] * b[i])` of 4-bit values `v` packed two to a byte in `a` and signed 16-bit
/// weights `b` (`b.len() == 2 * a.len()`), in `i32` (exact whenever the true sum fits).
///
/// Packing (what [`scalar::dot_u4_i16`] defines): bytes in blocks of 32, the last one possibly
/// shorter; in a block of `w` bytes starting at byte `s`, byte `s + j` holds value `2s + j` in
/// its low nibble and value `2s + w + j` in its high nibble, so one mask and one shift give
/// 32 consecutive values each (RaBitQ-style 4-bit codes, searchd-engine's `rabitq` module).
///
/// # Panics
/// If `b.len() != 2 * a.len()`.
#[inline]
pub fn dot_u4_i16(a: &[u8], b: &[i16]) -> i32 {
    Backend::active().dot_u4_i16(a, b)
}

/// `sum(v[i] * b[i])` of 4-bit values `v` packed as [`dot_u4_i16`] packs them and signed
/// 8-bit weights `b` (`b.len() == 2 * a.len()`), in `i32` (always exact). Half the work of
/// [`dot_u4_i16`] per value, for queries whose weights fit 8 bits.
///
/// # Panics
/// If `b.len() != 2 * a.len()`.
#[inline]
pub fn dot_u4_i8(a: &[u8], b: &[i8]) -> i32 {
    Backend::active().dot_u4_i8(a, b)
}

/// Squared Euclidean distances from `x` to `n = out.len()` points stored column-wise:
/// `out[j] = sum_d (x[d] - cols[d * n + j])^2`, `cols` being `x.len()` rows of `n` values
/// (dimension-major). Meant for many short points (k-means and PQ codebooks: 256 centroids
/// of a few dimensions each), where one vector lane per point beats one call per point. Each
/// distance is summed in dimension order whatever `n` and the point's position, so a point's
/// distance is the same bits in every call on a given path.
///
/// # Panics
/// If `cols.len() != x.len() * out.len()`.
#[inline]
pub fn l2sq_columns(x: &[f32], cols: &[f32], out: &mut [f32]) {
    Backend::active().l2sq_columns(x, cols, out)
}

/// Index of the first smallest value of `v`, NaNs skipped (so the same index a sequential
/// scan with `<` finds); `None` if `v` is empty or all NaN. With [`l2sq_columns`], the
/// nearest of many short points (k-means assignment, PQ encoding).
#[inline]
pub fn argmin(v: &[f32]) -> Option<usize> {
    Backend::active().argmin(v)
}

/// Product-quantizer asymmetric score: `sum_j lut[j * 256 + codes[j]]`, i.e. the sum over
/// the `m = codes.len()` subspaces of the query's lookup-table entry for each code (`lut` is
/// `m` rows of 256 values, row-major).
///
/// The AVX2 backend's entry is an unrolled scalar loop (four independent accumulators), not
/// the `vgatherdps` version (8 subspaces per gather, `x86::pq_adc_avx2_gather`), because the
/// gathers lose on the machine this was tuned on. AMD EPYC (Zen 3) VM, 2 vCPUs shared with
/// other builds, release, ns per call over ~1e6 calls (4096 code rows, table hot),
/// best of 15, range over 4 runs:
///
/// | m  | unrolled (AVX2 entry) | gather | sequential reference |
/// |----|-----------------------|--------|----------------------|
/// | 16 | 7-11                  | 14-24  | 12-25                |
/// | 32 | 13-20                 | 23-38  | 26-53                |
/// | 48 | 19-29                 | 34-52  | 73-77                |
/// | 64 | 28-38                 | 61-66  | 67-105               |
///
/// (Measured by a timing harness since replaced by the `pq_adc` group of `cargo bench -p
/// searchd-kernels`, which times each backend's entry against the scalar reference.)
/// On this CPU one 8-lane gather costs more than the eight independent scalar loads it
/// replaces; CPUs with faster gathers may differ, so the gather path is kept and tested.
///
/// # Panics
/// If `lut.len() != codes.len() * 256`.
#[inline]
pub fn pq_adc(lut: &[f32], codes: &[u8]) -> f32 {
    Backend::active().pq_adc(lut, codes)
}

/// Hamming distance of two equal-length bit strings: `popcount(a ^ b)`, summed over the
/// words. `popcnt` instructions on x86_64 (detected at run time with the AVX2 backend),
/// `count_ones` elsewhere. The count is a `u32`: inputs longer than `2^26` words could wrap.
///
/// # Panics
/// If the lengths differ.
#[inline]
pub fn hamming(a: &[u64], b: &[u64]) -> u32 {
    Backend::active().hamming(a, b)
}

/// Name of the implementation chosen on this CPU (for logs and reports): one of
/// `"avx512"`, `"avx2+fma"`, `"neon"`, `"scalar"`.
pub fn implementation() -> &'static str {
    Backend::active().name()
}

/// Environment variable read once, at first use of any kernel, to override the automatic
/// choice: `auto`, `scalar`, `avx2` (or `avx2+fma`), `avx512`, `neon`.
pub const ENV_OVERRIDE: &str = "SEARCHD_KERNELS";

type PairFn = unsafe fn(&[f32], &[f32]) -> f32;
type NormFn = unsafe fn(&[f32]) -> f32;
type BlockFn = unsafe fn(&[f32], usize, &[f32], usize, usize, &mut [f32]);
type U8I16Fn = unsafe fn(&[u8], &[i16]) -> i32;
type U4I8Fn = unsafe fn(&[u8], &[i8]) -> i32;
type AdcFn = unsafe fn(&[f32], &[u8]) -> f32;
type ColumnsFn = unsafe fn(&[f32], &[f32], &mut [f32]);
type ArgminFn = unsafe fn(&[f32]) -> Option<usize>;
type HammingFn = unsafe fn(&[u64], &[u64]) -> u32;

/// One implementation of all kernels, for one instruction set.
///
/// The free functions of this crate use [`Backend::active`]; the other constructors exist so
/// tests and benchmarks can call every path the CPU supports explicitly.
///
/// Invariant (what makes the safe methods sound): a `&Backend` can only be obtained through
/// [`Backend::available`] and friends, which only return backends whose CPU features were
/// detected at run time.
#[derive(Debug)]
pub struct Backend {
    name: &'static str,
    dot: PairFn,
    l2sq: PairFn,
    norm_sq: NormFn,
    dot_block: BlockFn,
    l2sq_block: BlockFn,
    dot_u8_i16: U8I16Fn,
    dot_u4_i16: U8I16Fn,
    dot_u4_i8: U4I8Fn,
    pq_adc: AdcFn,
    hamming: HammingFn,
    l2sq_columns: ColumnsFn,
    argmin: ArgminFn,
}

/// Defines a backend: entry points instantiating the generic kernels for `$simd`, compiled
/// with `$feat` enabled, and a static table of them.
macro_rules! backend {
    (
        $table:ident, $module:ident, $name:literal, $simd:ty,
        $u8i16:path, $u4i16:path, $u4i8:path, $adc:path, $ham:path, $argmin:path $(, $feat:literal)?
    ) => {
        mod $module {
            use crate::kernel;

            // SAFETY (all six functions): they are only reachable through the backend
            // table below, which is only handed out after its features were detected at run
            // time, and through the safe `Backend` methods, which check the slice lengths
            // first. That is exactly the contract of the generic kernels.
            $(#[target_feature(enable = $feat)])?
            pub(super) unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
                // SAFETY: see above.
                unsafe { kernel::dot::<$simd>(a, b) }
            }
            $(#[target_feature(enable = $feat)])?
            pub(super) unsafe fn l2sq(a: &[f32], b: &[f32]) -> f32 {
                // SAFETY: see above.
                unsafe { kernel::l2sq::<$simd>(a, b) }
            }
            $(#[target_feature(enable = $feat)])?
            pub(super) unsafe fn norm_sq(v: &[f32]) -> f32 {
                // SAFETY: see above.
                unsafe { kernel::norm_sq::<$simd>(v) }
            }
            $(#[target_feature(enable = $feat)])?
            pub(super) unsafe fn dot_block(
                q: &[f32], nq: usize, b: &[f32], nb: usize, dim: usize, out: &mut [f32],
            ) {
                // SAFETY: see above.
                unsafe { kernel::dot_block::<$simd>(q, nq, b, nb, dim, out) }
            }
            $(#[target_feature(enable = $feat)])?
            pub(super) unsafe fn l2sq_block(
                q: &[f32], nq: usize, b: &[f32], nb: usize, dim: usize, out: &mut [f32],
            ) {
                // SAFETY: see above.
                unsafe { kernel::l2sq_block::<$simd>(q, nq, b, nb, dim, out) }
            }
            $(#[target_feature(enable = $feat)])?
            pub(super) unsafe fn l2sq_columns(x: &[f32], cols: &[f32], out: &mut [f32]) {
                // SAFETY: see above.
                unsafe { kernel::l2sq_columns::<$simd>(x, cols, out) }
            }
        }

        static $table: Backend = Backend {
            name: $name,
            dot: $module::dot,
            l2sq: $module::l2sq,
            norm_sq: $module::norm_sq,
            dot_block: $module::dot_block,
            l2sq_block: $module::l2sq_block,
            dot_u8_i16: $u8i16,
            dot_u4_i16: $u4i16,
            dot_u4_i8: $u4i8,
            pq_adc: $adc,
            hamming: $ham,
            l2sq_columns: $module::l2sq_columns,
            argmin: $argmin,
        };
    };
}

#[cfg(target_arch = "x86_64")]
backend!(
    AVX512,
    avx512_entry,
    "avx512",
    crate::x86::Avx512,
    // Every AVX-512F CPU has AVX2; a VNNI (vpdpbusd) path would need i8 query weights and
    // a machine to test it on.
    crate::x86::dot_u8_i16_avx2,
    crate::x86::dot_u4_i16_avx2,
    crate::x86::dot_u4_i8_avx2,
    crate::x86::pq_adc_avx2_unrolled,
    crate::x86::hamming_popcnt,
    crate::x86::argmin_avx2,
    "avx512f,avx2,fma"
);
#[cfg(target_arch = "x86_64")]
backend!(
    AVX2,
    avx2_entry,
    "avx2+fma",
    crate::x86::Avx2,
    crate::x86::dot_u8_i16_avx2,
    crate::x86::dot_u4_i16_avx2,
    crate::x86::dot_u4_i8_avx2,
    crate::x86::pq_adc_avx2_unrolled,
    crate::x86::hamming_popcnt,
    crate::x86::argmin_avx2,
    "avx2,fma"
);
#[cfg(target_arch = "aarch64")]
backend!(
    NEON,
    neon_entry,
    "neon",
    crate::arm::Neon,
    scalar_u8_i16,
    scalar_u4_i16,
    scalar_u4_i8,
    portable_pq_adc,
    portable_hamming,
    portable_argmin,
    "neon"
);
backend!(
    SCALAR,
    scalar_entry,
    "scalar",
    crate::kernel::Portable,
    scalar_u8_i16,
    scalar_u4_i16,
    scalar_u4_i8,
    portable_pq_adc,
    portable_hamming,
    portable_argmin
);

/// The portable integer kernel (the compiler vectorises this loop well on its own).
///
/// # Safety
/// None needed; `unsafe` only to match the table's function type.
unsafe fn scalar_u8_i16(a: &[u8], b: &[i16]) -> i32 {
    scalar::dot_u8_i16(a, b)
}

/// The portable 4-bit kernel (the reference loop; the compiler vectorises the nibble split).
///
/// # Safety
/// None needed; `unsafe` only to match the table's function type.
unsafe fn scalar_u4_i16(a: &[u8], b: &[i16]) -> i32 {
    scalar::dot_u4_i16(a, b)
}

/// The portable 4-bit by 8-bit kernel (the reference loop).
///
/// # Safety
/// None needed; `unsafe` only to match the table's function type.
unsafe fn scalar_u4_i8(a: &[u8], b: &[i8]) -> i32 {
    scalar::dot_u4_i8(a, b)
}

/// Unrolled table lookups, plain Rust (also the NEON backend's: NEON has no gather).
///
/// # Safety
/// None needed; `unsafe` only to match the table's function type.
unsafe fn portable_pq_adc(lut: &[f32], codes: &[u8]) -> f32 {
    kernel::pq_adc_unrolled(lut, codes)
}

/// `count_ones` without `target_feature` (on x86_64 without `popcnt` a bit-twiddling
/// sequence; on aarch64 NEON `cnt`).
///
/// # Safety
/// None needed; `unsafe` only to match the table's function type.
unsafe fn portable_hamming(a: &[u64], b: &[u64]) -> u32 {
    kernel::hamming_unrolled(a, b)
}

/// Two branch-free passes in plain Rust (what the compiler vectorises with baseline SIMD).
///
/// # Safety
/// None needed; `unsafe` only to match the table's function type.
unsafe fn portable_argmin(v: &[f32]) -> Option<usize> {
    kernel::argmin_portable(v)
}

/// All backends the running CPU supports, best first (the last is always `scalar`).
fn detect() -> Vec<&'static Backend> {
    let mut found: Vec<&'static Backend> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx512() {
            found.push(&AVX512);
        }
        if x86::has_avx2() {
            found.push(&AVX2);
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if arm::has_neon() {
            found.push(&NEON);
        }
    }
    found.push(&SCALAR);
    found
}

/// Whether `request` (a value of [`ENV_OVERRIDE`]) names `backend`.
fn names(backend: &Backend, request: &str) -> bool {
    let r = request.trim();
    r.eq_ignore_ascii_case(backend.name)
        || (backend.name == "avx2+fma" && r.eq_ignore_ascii_case("avx2"))
}

/// The backend to use given an override request (`None`, empty or `auto`: the best one).
fn choose(request: Option<&str>, available: &[&'static Backend]) -> &'static Backend {
    let best = available[0];
    match request.map(str::trim) {
        None | Some("") => best,
        Some(r) if r.eq_ignore_ascii_case("auto") => best,
        Some(r) => match available.iter().find(|b| names(b, r)) {
            Some(b) => b,
            None => {
                eprintln!(
                    "searchd-kernels: {ENV_OVERRIDE}={r:?} is not available on this CPU \
                     (available: {}); using {}",
                    available
                        .iter()
                        .map(|b| b.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                    best.name
                );
                best
            }
        },
    }
}

impl Backend {
    /// Every backend the running CPU supports, best first; the last is always `scalar`.
    pub fn available() -> &'static [&'static Backend] {
        static AVAILABLE: OnceLock<Vec<&'static Backend>> = OnceLock::new();
        AVAILABLE.get_or_init(detect)
    }

    /// The available backend called `name` (`"avx512"`, `"avx2+fma"` or `"avx2"`, `"neon"`,
    /// `"scalar"`), if the running CPU supports it.
    pub fn by_name(name: &str) -> Option<&'static Backend> {
        Backend::available()
            .iter()
            .copied()
            .find(|b| names(b, name))
    }

    /// The backend the free functions use: the best available one, unless overridden by
    /// [`ENV_OVERRIDE`]. Chosen on first call, then fixed for the life of the process.
    #[inline]
    pub fn active() -> &'static Backend {
        static ACTIVE: OnceLock<&'static Backend> = OnceLock::new();
        ACTIVE.get_or_init(|| {
            let request = std::env::var(ENV_OVERRIDE).ok();
            choose(request.as_deref(), Backend::available())
        })
    }

    /// `"avx512"`, `"avx2+fma"`, `"neon"` or `"scalar"`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// See [`crate::dot`].
    #[inline]
    pub fn dot(&self, a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len(), "dot: length mismatch");
        // SAFETY: lengths checked above; the backend's features were detected (type invariant).
        unsafe { (self.dot)(a, b) }
    }

    /// See [`crate::l2sq`].
    #[inline]
    pub fn l2sq(&self, a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len(), "l2sq: length mismatch");
        // SAFETY: lengths checked above; the backend's features were detected (type invariant).
        unsafe { (self.l2sq)(a, b) }
    }

    /// See [`crate::norm_sq`].
    #[inline]
    pub fn norm_sq(&self, v: &[f32]) -> f32 {
        // SAFETY: no shape to check; the backend's features were detected (type invariant).
        unsafe { (self.norm_sq)(v) }
    }

    /// See [`crate::dot_u8_i16`].
    #[inline]
    pub fn dot_u8_i16(&self, a: &[u8], b: &[i16]) -> i32 {
        assert_eq!(a.len(), b.len(), "dot_u8_i16: length mismatch");
        // SAFETY: lengths checked above; the backend's features were detected (type invariant).
        unsafe { (self.dot_u8_i16)(a, b) }
    }

    /// See [`crate::dot_u4_i16`].
    #[inline]
    pub fn dot_u4_i16(&self, a: &[u8], b: &[i16]) -> i32 {
        assert_eq!(
            Some(b.len()),
            a.len().checked_mul(2),
            "dot_u4_i16: b.len() != 2 * a.len()"
        );
        // SAFETY: lengths checked above; the backend's features were detected (type invariant).
        unsafe { (self.dot_u4_i16)(a, b) }
    }

    /// See [`crate::dot_u4_i8`].
    #[inline]
    pub fn dot_u4_i8(&self, a: &[u8], b: &[i8]) -> i32 {
        assert_eq!(
            Some(b.len()),
            a.len().checked_mul(2),
            "dot_u4_i8: b.len() != 2 * a.len()"
        );
        // SAFETY: lengths checked above; the backend's features were detected (type invariant).
        unsafe { (self.dot_u4_i8)(a, b) }
    }

    /// See [`crate::l2sq_columns`].
    #[inline]
    pub fn l2sq_columns(&self, x: &[f32], cols: &[f32], out: &mut [f32]) {
        assert_eq!(
            Some(cols.len()),
            x.len().checked_mul(out.len()),
            "l2sq_columns: cols.len() != x.len() * out.len()"
        );
        // SAFETY: shape checked above; the backend's features were detected (type invariant).
        unsafe { (self.l2sq_columns)(x, cols, out) }
    }

    /// See [`crate::argmin`].
    #[inline]
    pub fn argmin(&self, v: &[f32]) -> Option<usize> {
        // SAFETY: no shape to check; the backend's features were detected (type invariant).
        unsafe { (self.argmin)(v) }
    }

    /// See [`crate::pq_adc`].
    #[inline]
    pub fn pq_adc(&self, lut: &[f32], codes: &[u8]) -> f32 {
        assert_eq!(
            Some(lut.len()),
            codes.len().checked_mul(kernel::PQ_KSUB),
            "pq_adc: lut.len() != codes.len() * 256"
        );
        // SAFETY: shape checked above; the backend's features were detected (type invariant).
        unsafe { (self.pq_adc)(lut, codes) }
    }

    /// See [`crate::hamming`].
    #[inline]
    pub fn hamming(&self, a: &[u64], b: &[u64]) -> u32 {
        assert_eq!(a.len(), b.len(), "hamming: length mismatch");
        // SAFETY: lengths checked above; the backend's features were detected (type invariant).
        unsafe { (self.hamming)(a, b) }
    }

    /// See [`crate::dot_block`].
    pub fn dot_block(
        &self,
        q: &[f32],
        nq: usize,
        b: &[f32],
        nb: usize,
        dim: usize,
        out: &mut [f32],
    ) {
        check_block_shape("dot_block", q, nq, b, nb, dim, out);
        // SAFETY: shapes checked above; the backend's features were detected (type invariant).
        unsafe { (self.dot_block)(q, nq, b, nb, dim, out) }
    }

    /// See [`crate::l2sq_block`].
    pub fn l2sq_block(
        &self,
        q: &[f32],
        nq: usize,
        b: &[f32],
        nb: usize,
        dim: usize,
        out: &mut [f32],
    ) {
        check_block_shape("l2sq_block", q, nq, b, nb, dim, out);
        // SAFETY: shapes checked above; the backend's features were detected (type invariant).
        unsafe { (self.l2sq_block)(q, nq, b, nb, dim, out) }
    }
}

/// Panics unless `q` is `nq x dim`, `b` is `nb x dim` and `out` is `nq x nb`. Uses checked
/// multiplication: a wrapped product could otherwise "match" a short slice.
fn check_block_shape(
    what: &str,
    q: &[f32],
    nq: usize,
    b: &[f32],
    nb: usize,
    dim: usize,
    out: &[f32],
) {
    assert_eq!(
        Some(q.len()),
        nq.checked_mul(dim),
        "{what}: q.len() != nq * dim"
    );
    assert_eq!(
        Some(b.len()),
        nb.checked_mul(dim),
        "{what}: b.len() != nb * dim"
    );
    assert_eq!(
        Some(out.len()),
        nq.checked_mul(nb),
        "{what}: out.len() != nq * nb"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choose_honours_override() {
        let avail = Backend::available();
        let best = avail[0];
        assert_eq!(choose(None, avail).name(), best.name());
        assert_eq!(choose(Some("auto"), avail).name(), best.name());
        assert_eq!(choose(Some(""), avail).name(), best.name());
        assert_eq!(choose(Some("scalar"), avail).name(), "scalar");
        assert_eq!(choose(Some(" SCALAR "), avail).name(), "scalar");
        assert_eq!(choose(Some("no-such-isa"), avail).name(), best.name());
        for b in avail {
            assert_eq!(choose(Some(b.name()), avail).name(), b.name());
        }
        if Backend::by_name("avx2+fma").is_some() {
            assert_eq!(choose(Some("avx2"), avail).name(), "avx2+fma");
        }
    }

    #[test]
    fn scalar_always_available_and_last() {
        let avail = Backend::available();
        assert_eq!(avail.last().unwrap().name(), "scalar");
        assert!(avail.iter().any(|b| b.name() == implementation()));
    }
}
