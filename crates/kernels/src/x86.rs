//! x86_64 instruction sets: AVX2+FMA (8 lanes) and AVX-512F (16 lanes).
//!
//! Only the [`Simd`] primitives live here; the kernels themselves are the generic ones in
//! `kernel.rs`, so both paths share all loop, tail and blocking logic.

// Register-only intrinsics are safe to call where their feature is enabled for the whole
// build (here: AVX2/AVX-512 (e.g. built with `-C target-cpu=native`)), which makes some of the `unsafe` blocks below
// redundant on such builds. They are kept so the same code is correct for every build.
#![allow(unused_unsafe)]

use crate::kernel::Simd;
use std::arch::x86_64::*;

/// AVX2 + FMA. Methods require (see [`Simd`]) a CPU with `avx2` and `fma`.
#[derive(Clone, Copy)]
pub(crate) struct Avx2;

/// AVX-512F. Methods require a CPU with `avx512f` (and `avx2`, `fma`, which every AVX-512F
/// CPU has and which the entry points enable and detect too).
#[derive(Clone, Copy)]
pub(crate) struct Avx512;

/// Whether the running CPU can run [`Avx2`] and the rest of the AVX2 backend (which also
/// uses `popcnt` for [`crate::hamming`]; every AVX2 CPU has it, x86-64-v3 includes it).
pub(crate) fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && has_popcnt()
}

/// Whether the running CPU can run [`Avx512`].
pub(crate) fn has_avx512() -> bool {
    has_avx2() && is_x86_feature_detected!("avx512f")
}

/// Sums of the 8 lanes of each of four vectors, as one 4-lane vector (3 `hadd` + 1 add
/// instead of four separate shuffle-reductions).
///
/// # Safety
/// CPU supports AVX.
#[inline(always)]
unsafe fn hsum4_256(v0: __m256, v1: __m256, v2: __m256, v3: __m256) -> __m128 {
    // SAFETY: register-only AVX intrinsics; the caller guarantees AVX.
    unsafe {
        // t01 = [v0 01, v0 23, v1 01, v1 23 | v0 45, v0 67, v1 45, v1 67]
        let t01 = _mm256_hadd_ps(v0, v1);
        let t23 = _mm256_hadd_ps(v2, v3);
        // t = [v0 0..3, v1 0..3, v2 0..3, v3 0..3 | the same for lanes 4..7]
        let t = _mm256_hadd_ps(t01, t23);
        _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps::<1>(t))
    }
}

/// Sums of the 4 lanes of `v`, in lane 0.
///
/// # Safety
/// CPU supports SSE3 (every AVX CPU does).
#[inline(always)]
unsafe fn hsum_128(v: __m128) -> f32 {
    // SAFETY: register-only SSE intrinsics; the caller guarantees support.
    unsafe {
        let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}

#[inline(always)]
fn to_array(v: __m128) -> [f32; 4] {
    let mut out = [0.0f32; 4];
    // SAFETY: `out` is valid for 4 f32 writes; `_mm_storeu_ps` has no alignment requirement
    // and is SSE, part of the x86_64 baseline.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), v) };
    out
}

impl Simd for Avx2 {
    type V = __m256;
    const LANES: usize = 8;
    // 3 query rows x 4 base rows = 12 accumulators + 3 query vectors + 1 base vector = all 16
    // ymm registers. l2sq needs a temporary for the difference: 2 x 4 (8 + 2 + 1 + 1).
    const MR: usize = 3;
    const MR_L2: usize = 2;

    #[inline(always)]
    unsafe fn zero() -> __m256 {
        // SAFETY: the caller guarantees AVX (trait contract).
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees AVX and that p is valid for 8 reads; loadu has no
        // alignment requirement.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> __m256 {
        debug_assert!(n < 8);
        // SAFETY: the caller guarantees AVX2 and that p is valid for n reads. `vmaskmovps`
        // touches (and can fault on) only the lanes whose mask sign bit is set, which are
        // exactly lanes 0..n, and zeroes the others.
        unsafe {
            let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), lane);
            _mm256_maskload_ps(p, mask)
        }
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        // SAFETY: the caller guarantees AVX.
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: __m256, b: __m256) -> __m256 {
        // SAFETY: the caller guarantees AVX.
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: the caller guarantees FMA.
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn prefetch(p: *const f32) {
        // SAFETY: prefetch is a hint (SSE, x86_64 baseline) and never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast()) }
    }
    const PMR: usize = 6;
    #[inline(always)]
    unsafe fn broadcast(p: *const f32) -> __m256 {
        // SAFETY: the caller guarantees AVX and that p is valid for a read.
        unsafe { _mm256_broadcast_ss(&*p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: the caller guarantees AVX and that p is valid for 8 writes.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn reduce(v: __m256) -> f32 {
        // SAFETY: the caller guarantees AVX.
        unsafe {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            hsum_128(s)
        }
    }
    #[inline(always)]
    unsafe fn reduce4(v: [__m256; 4]) -> [f32; 4] {
        // SAFETY: the caller guarantees AVX.
        to_array(unsafe { hsum4_256(v[0], v[1], v[2], v[3]) })
    }
}

/// Adds the upper 256 bits of `v` to its lower 256 bits.
///
/// # Safety
/// CPU supports AVX-512F.
#[inline(always)]
unsafe fn fold512(v: __m512) -> __m256 {
    // SAFETY: register-only AVX-512F intrinsics (the f64x4 extract is the AVX-512F way to
    // take the upper half; the f32x8 one needs AVX-512DQ); the caller guarantees support.
    unsafe {
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        _mm256_add_ps(_mm512_castps512_ps256(v), hi)
    }
}

impl Simd for Avx512 {
    type V = __m512;
    const LANES: usize = 16;
    // 4 x 4 = 16 accumulators + 4 query vectors + 1 base vector = 21 of 32 zmm registers.
    // (6 x 4 would fit in 31 on paper, but LLVM then spills accumulators in the hot loop.)
    const MR: usize = 4;

    #[inline(always)]
    unsafe fn zero() -> __m512 {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: the caller guarantees AVX-512F and that p is valid for 16 reads; loadu has
        // no alignment requirement.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> __m512 {
        debug_assert!(n < 16);
        // SAFETY: the caller guarantees AVX-512F and that p is valid for n reads. A masked
        // load suppresses faults on, and zeroes, the lanes whose mask bit is clear; exactly
        // bits 0..n are set (n < 16, so the shift does not overflow).
        unsafe {
            let mask: __mmask16 = ((1u32 << n) - 1) as __mmask16;
            _mm512_maskz_loadu_ps(mask, p)
        }
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: __m512, b: __m512) -> __m512 {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        // SAFETY: the caller guarantees AVX-512F.
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn prefetch(p: *const f32) {
        // SAFETY: prefetch is a hint (SSE, x86_64 baseline) and never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast()) }
    }
    const PMR: usize = 6;
    #[inline(always)]
    unsafe fn broadcast(p: *const f32) -> __m512 {
        // SAFETY: the caller guarantees AVX-512F and that p is valid for a read.
        unsafe { _mm512_set1_ps(*p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        // SAFETY: the caller guarantees AVX-512F and that p is valid for 16 writes.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn reduce(v: __m512) -> f32 {
        // SAFETY: the caller guarantees AVX-512F (which implies AVX for the 256/128-bit ops).
        unsafe {
            let s = fold512(v);
            hsum_128(_mm_add_ps(
                _mm256_castps256_ps128(s),
                _mm256_extractf128_ps::<1>(s),
            ))
        }
    }
    #[inline(always)]
    unsafe fn reduce4(v: [__m512; 4]) -> [f32; 4] {
        // SAFETY: the caller guarantees AVX-512F (which implies AVX).
        to_array(unsafe { hsum4_256(fold512(v[0]), fold512(v[1]), fold512(v[2]), fold512(v[3])) })
    }
}

/// Sum of the eight `i32` lanes of `v` (wrapping), for the integer kernels.
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn hsum_epi32(v: __m256i) -> i32 {
    // SAFETY: register-only AVX2 intrinsics; the caller guarantees AVX2.
    unsafe {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        _mm_cvtsi128_si32(s)
    }
}

/// The low and the high nibbles of 32 packed bytes, each as 32 bytes in `0..=15` (the
/// 4-bit codes' block order, [`crate::dot_u4_i16`]).
///
/// # Safety
/// The CPU must support AVX2.
#[inline(always)]
unsafe fn nibbles(v: __m256i) -> (__m256i, __m256i) {
    // SAFETY: register-only AVX2 intrinsics; the caller guarantees AVX2.
    unsafe {
        let mask = _mm256_set1_epi8(0x0f);
        (
            _mm256_and_si256(v, mask),
            _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask),
        )
    }
}

/// [`crate::dot_u4_i16`] with AVX2: per 32-byte block, the low and high nibbles are split
/// with a mask and a 4-bit shift, widened to 16 bits (`vpmovzxbw`) and multiplied with the
/// weights (`vpmaddwd`); a short last block is summed in scalar code.
///
/// # Safety
/// The CPU must support AVX2, and `b.len() == 2 * a.len()` (checked by the caller).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn dot_u4_i16_avx2(a: &[u8], b: &[i16]) -> i32 {
    debug_assert_eq!(b.len(), 2 * a.len());
    let n = a.len();
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: each full block reads bytes i .. i + 32 <= n of `a` and weights 2i .. 2i + 64
    // <= 2n = b.len() of `b`; the unaligned load intrinsics have no alignment requirement;
    // AVX2 is guaranteed by the caller.
    unsafe {
        let mut acc0 = _mm256_setzero_si256();
        let mut acc1 = _mm256_setzero_si256();
        let mut i = 0;
        while i + 32 <= n {
            let (lo, hi) = nibbles(_mm256_loadu_si256(pa.add(i) as *const __m256i));
            let w = pb.add(2 * i);
            let l0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(lo));
            let l1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256::<1>(lo));
            let h0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(hi));
            let h1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256::<1>(hi));
            let p0 = _mm256_madd_epi16(l0, _mm256_loadu_si256(w as *const __m256i));
            let p1 = _mm256_madd_epi16(l1, _mm256_loadu_si256(w.add(16) as *const __m256i));
            let p2 = _mm256_madd_epi16(h0, _mm256_loadu_si256(w.add(32) as *const __m256i));
            let p3 = _mm256_madd_epi16(h1, _mm256_loadu_si256(w.add(48) as *const __m256i));
            acc0 = _mm256_add_epi32(acc0, _mm256_add_epi32(p0, p1));
            acc1 = _mm256_add_epi32(acc1, _mm256_add_epi32(p2, p3));
            i += 32;
        }
        let total = hsum_epi32(_mm256_add_epi32(acc0, acc1));
        total.wrapping_add(crate::scalar::dot_u4_i16(&a[i..], &b[2 * i..]))
    }
}

/// [`crate::dot_u4_i8`] with AVX2: per 32-byte block, the low and high nibbles are split
/// with a mask and a 4-bit shift and multiplied with 32 weights each by `vpmaddubsw`
/// (unsigned byte times signed byte, adjacent pairs summed to 16 bits: at most
/// `2 * 15 * 128`, so it never saturates), the two halves added (at most `4 * 15 * 128`)
/// and widened to 32 bits by `vpmaddwd` with ones; a short last block is summed in scalar
/// code. Half the multiplies and none of the widening of [`dot_u4_i16_avx2`].
///
/// # Safety
/// The CPU must support AVX2, and `b.len() == 2 * a.len()` (checked by the caller).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn dot_u4_i8_avx2(a: &[u8], b: &[i8]) -> i32 {
    debug_assert_eq!(b.len(), 2 * a.len());
    let n = a.len();
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: each full block reads bytes i .. i + 32 <= n of `a` and weights 2i .. 2i + 64
    // <= 2n = b.len() of `b`; the unaligned load intrinsics have no alignment requirement;
    // AVX2 is guaranteed by the caller.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_si256();
        let mut i = 0;
        while i + 32 <= n {
            let (lo, hi) = nibbles(_mm256_loadu_si256(pa.add(i) as *const __m256i));
            let w = pb.add(2 * i);
            let pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(w as *const __m256i));
            let ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(w.add(32) as *const __m256i));
            let s = _mm256_madd_epi16(_mm256_add_epi16(pl, ph), ones);
            acc = _mm256_add_epi32(acc, s);
            i += 32;
        }
        hsum_epi32(acc) + crate::scalar::dot_u4_i8(&a[i..], &b[2 * i..])
    }
}

/// `sum(a[i] * b[i])` for unsigned bytes times signed 16-bit weights (the SQ8 query
/// kernel): bytes widened to 16 bits (`vpmovzxbw`), then `vpmaddwd` multiplies pairs and
/// adds them into 32-bit lanes. Exact (no saturation anywhere) as long as the true sum fits
/// an `i32`; lanes add with wrap-around otherwise, like the scalar reference.
///
/// # Safety
/// CPU supports AVX2; `a.len() == b.len()`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn dot_u8_i16_avx2(a: &[u8], b: &[i16]) -> i32 {
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // SAFETY: every load below reads 16 bytes of `a` / 32 bytes of `b` at offsets
    // `i .. i + 16 <= n` (checked by the loop bounds), so all reads are in bounds; the
    // unaligned load intrinsics have no alignment requirement; AVX2 is guaranteed by the
    // caller.
    unsafe {
        let mut acc0 = _mm256_setzero_si256();
        let mut acc1 = _mm256_setzero_si256();
        let mut i = 0;
        while i + 32 <= n {
            let a0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(pa.add(i) as *const __m128i));
            let a1 = _mm256_cvtepu8_epi16(_mm_loadu_si128(pa.add(i + 16) as *const __m128i));
            let b0 = _mm256_loadu_si256(pb.add(i) as *const __m256i);
            let b1 = _mm256_loadu_si256(pb.add(i + 16) as *const __m256i);
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(a0, b0));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(a1, b1));
            i += 32;
        }
        if i + 16 <= n {
            let a0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(pa.add(i) as *const __m128i));
            let b0 = _mm256_loadu_si256(pb.add(i) as *const __m256i);
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(a0, b0));
            i += 16;
        }
        let mut total = hsum_epi32(_mm256_add_epi32(acc0, acc1));
        while i < n {
            total = total.wrapping_add(*pa.add(i) as i32 * *pb.add(i) as i32);
            i += 1;
        }
        total
    }
}

/// Product-quantizer scoring with hardware gathers: 8 subspaces per `vgatherdps`, indices
/// `256 * lane + code` (codes widened with `vpmovzxbd`) relative to the table of the first of
/// the 8 subspaces, two gathers in flight per step, scalar tail.
///
/// Not in any backend table: on the AMD EPYC (Zen 3) this crate was tuned on it is ~1.7-2x
/// slower than [`pq_adc_avx2_unrolled`] (see [`crate::pq_adc`]). Kept and tested so the
/// choice can be re-checked on CPUs with faster gathers (put it in the AVX2 table and run
/// `cargo bench -p searchd-kernels -- pq_adc`).
///
/// # Safety
/// CPU supports AVX2; `lut.len() == codes.len() * 256`.
#[cfg_attr(not(test), allow(dead_code))]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn pq_adc_avx2_gather(lut: &[f32], codes: &[u8]) -> f32 {
    const K: usize = crate::kernel::PQ_KSUB;
    debug_assert_eq!(lut.len(), codes.len() * K);
    let m = codes.len();
    let (pl, pc) = (lut.as_ptr(), codes.as_ptr());
    // SAFETY: AVX2 is guaranteed by the caller. Code loads read bytes j .. j + 16 (or + 8)
    // with that end <= m. A gather based at table j reads lut[(j + l) * 256 + code] for lanes
    // l < 8 and codes < 256, i.e. below (j + 8) * 256 <= m * 256 = lut.len(); the largest
    // index, 7 * 256 + 255, fits the i32 lanes. The tail reads lut[j * 256 + code] for j < m.
    unsafe {
        let offs = _mm256_setr_epi32(0, 256, 512, 768, 1024, 1280, 1536, 1792);
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut j = 0;
        while j + 16 <= m {
            let c = _mm_loadu_si128(pc.add(j).cast());
            let i0 = _mm256_add_epi32(_mm256_cvtepu8_epi32(c), offs);
            let i1 = _mm256_add_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(c)), offs);
            acc0 = _mm256_add_ps(acc0, _mm256_i32gather_ps::<4>(pl.add(j * K), i0));
            acc1 = _mm256_add_ps(acc1, _mm256_i32gather_ps::<4>(pl.add((j + 8) * K), i1));
            j += 16;
        }
        if j + 8 <= m {
            let c = _mm_loadl_epi64(pc.add(j).cast());
            let i0 = _mm256_add_epi32(_mm256_cvtepu8_epi32(c), offs);
            acc0 = _mm256_add_ps(acc0, _mm256_i32gather_ps::<4>(pl.add(j * K), i0));
            j += 8;
        }
        let acc = _mm256_add_ps(acc0, acc1);
        let mut s = hsum_128(_mm_add_ps(
            _mm256_castps256_ps128(acc),
            _mm256_extractf128_ps::<1>(acc),
        ));
        while j < m {
            s += *pl.add(j * K + *pc.add(j) as usize);
            j += 1;
        }
        s
    }
}

/// [`crate::kernel::pq_adc_unrolled`] compiled for AVX2 (the AVX2 backend's entry; see
/// [`crate::pq_adc`] for why it beats the gathers).
///
/// # Safety
/// CPU supports AVX2; `lut.len() == codes.len() * 256`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn pq_adc_avx2_unrolled(lut: &[f32], codes: &[u8]) -> f32 {
    crate::kernel::pq_adc_unrolled(lut, codes)
}

/// Whether the running CPU has `popcnt` (checked together with AVX2 for the x86 backends).
pub(crate) fn has_popcnt() -> bool {
    is_x86_feature_detected!("popcnt")
}

/// `popcount(a ^ b)` with the `popcnt` instruction (one per word, four independent counts).
///
/// # Safety
/// CPU supports `popcnt`; `a.len() == b.len()`.
#[target_feature(enable = "popcnt")]
pub(crate) unsafe fn hamming_popcnt(a: &[u64], b: &[u64]) -> u32 {
    crate::kernel::hamming_unrolled(a, b)
}

/// [`crate::argmin`] with AVX2: the minimum over 4 x 8 lanes (`vminps`, which returns its
/// second operand, the running minimum, when the new value is NaN), then a compare-equal and
/// `vmovmskps` per 8 values until the first hit.
///
/// # Safety
/// CPU supports AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn argmin_avx2(v: &[f32]) -> Option<usize> {
    let n = v.len();
    let p = v.as_ptr();
    // SAFETY: AVX2 is guaranteed by the caller; every vector load reads v[i .. i + 8] with
    // i + 8 <= n (loop bounds), scalar reads are at i < n, and the store goes to a local
    // array of 8.
    unsafe {
        let inf = _mm256_set1_ps(f32::INFINITY);
        let mut b = [inf; 4];
        let mut i = 0;
        while i + 32 <= n {
            for (u, b) in b.iter_mut().enumerate() {
                *b = _mm256_min_ps(_mm256_loadu_ps(p.add(i + 8 * u)), *b);
            }
            i += 32;
        }
        while i + 8 <= n {
            b[0] = _mm256_min_ps(_mm256_loadu_ps(p.add(i)), b[0]);
            i += 8;
        }
        let all = _mm256_min_ps(_mm256_min_ps(b[0], b[1]), _mm256_min_ps(b[2], b[3]));
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), all);
        let mut min = f32::INFINITY;
        for &x in lanes.iter().chain(&v[i..]) {
            min = if x < min { x } else { min };
        }
        let target = _mm256_set1_ps(min);
        let mut i = 0;
        while i + 8 <= n {
            let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_loadu_ps(p.add(i)), target);
            let mask = _mm256_movemask_ps(eq);
            if mask != 0 {
                return Some(i + mask.trailing_zeros() as usize);
            }
            i += 8;
        }
        v[i..].iter().position(|&x| x == min).map(|l| i + l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random bytes and floats (xorshift).
    fn xorshift(n: usize, seed: u64) -> Vec<u64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            })
            .collect()
    }

    fn case(m: usize, rows: usize, seed: u64) -> (Vec<f32>, Vec<u8>) {
        let lut = xorshift(m * 256, seed)
            .into_iter()
            .map(|x| (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
            .collect();
        let codes = xorshift(m * rows, seed + 1)
            .into_iter()
            .map(|x| (x >> 56) as u8)
            .collect();
        (lut, codes)
    }

    /// The gather path is not in a backend table (see `crate::pq_adc`), so it is held to the
    /// scalar reference here, for every remainder of its 16- and 8-wide steps.
    #[test]
    fn gather_matches_reference() {
        if !has_avx2() {
            return;
        }
        for m in 0..70 {
            let (lut, codes) = case(m, 4, m as u64);
            for c in codes
                .chunks_exact(m.max(1))
                .take(if m == 0 { 1 } else { 4 })
            {
                let c = &c[..m];
                let want = crate::scalar::pq_adc(&lut, c);
                // SAFETY: AVX2 detected above; lut.len() == m * 256 == c.len() * 256.
                let got = unsafe { pq_adc_avx2_gather(&lut, c) };
                // Different summation order: m terms of magnitude <= 1, error <= ~2 m u.
                assert!((got - want).abs() <= 1e-5 * (m as f32 + 1.0), "m={m}");
            }
        }
    }
}
