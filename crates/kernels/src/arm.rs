//! aarch64 NEON (4 lanes). Only the [`Simd`] primitives live here; the kernels are the
//! generic ones in `kernel.rs`.

// Register-only intrinsics are safe to call where their feature is enabled for the whole
// build (here: NEON, the default on aarch64 targets), which makes some of the `unsafe` blocks below
// redundant on such builds. They are kept so the same code is correct for every build.
#![allow(unused_unsafe)]

use crate::kernel::Simd;
use std::arch::aarch64::*;

/// NEON. Methods require (see [`Simd`]) a CPU with `neon` (baseline on aarch64 Linux, but
/// still detected at run time).
#[derive(Clone, Copy)]
pub(crate) struct Neon;

/// Whether the running CPU can run [`Neon`].
pub(crate) fn has_neon() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

impl Simd for Neon {
    type V = float32x4_t;
    const LANES: usize = 4;
    // 4 x 4 = 16 accumulators + 4 query vectors + 1 base vector = 21 of 32 registers.
    const MR: usize = 4;

    #[inline(always)]
    unsafe fn zero() -> float32x4_t {
        // SAFETY: the caller guarantees NEON.
        unsafe { vdupq_n_f32(0.0) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> float32x4_t {
        // SAFETY: the caller guarantees NEON and that p is valid for 4 reads; vld1q has no
        // alignment requirement beyond that of f32.
        unsafe { vld1q_f32(p) }
    }
    #[inline(always)]
    unsafe fn load_partial(p: *const f32, n: usize) -> float32x4_t {
        debug_assert!(n < 4);
        let mut buf = [0.0f32; 4];
        // SAFETY: the caller guarantees p is valid for n (< 4) reads, and NEON; buf holds 4.
        unsafe {
            std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
            vld1q_f32(buf.as_ptr())
        }
    }
    #[inline(always)]
    unsafe fn add(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: the caller guarantees NEON.
        unsafe { vaddq_f32(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // SAFETY: the caller guarantees NEON.
        unsafe { vsubq_f32(a, b) }
    }
    #[inline(always)]
    unsafe fn fmadd(a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        // SAFETY: the caller guarantees NEON. vfmaq_f32(c, a, b) = c + a * b, fused.
        unsafe { vfmaq_f32(c, a, b) }
    }
    // 6 x 2 = 12 accumulators + 2 panel vectors + 1 broadcast = 15 of 32 registers.
    const PMR: usize = 6;
    #[inline(always)]
    unsafe fn broadcast(p: *const f32) -> float32x4_t {
        // SAFETY: the caller guarantees NEON and that p is valid for a read.
        unsafe { vld1q_dup_f32(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: float32x4_t) {
        // SAFETY: the caller guarantees NEON and that p is valid for 4 writes.
        unsafe { vst1q_f32(p, v) }
    }
    #[inline(always)]
    unsafe fn reduce(v: float32x4_t) -> f32 {
        // SAFETY: the caller guarantees NEON.
        unsafe { vaddvq_f32(v) }
    }
}
