//! Software prefetch of vectors the search is about to read.

/// Ask the CPU to start loading the first `max_lines` cache lines of `row` (the hardware
/// prefetcher follows the sequential rest).
#[inline(always)]
pub fn prefetch_bytes(row: &[u8], max_lines: usize) {
    prefetch_lines_at(row.as_ptr(), row.len().div_ceil(64).min(max_lines));
}

/// [`prefetch_bytes`] for a float32 row.
#[inline(always)]
pub fn prefetch_lines(row: &[f32], max_lines: usize) {
    prefetch_bytes(bytemuck::cast_slice(row), max_lines)
}

/// Ask the CPU to start loading `lines` cache lines from `p` on. Prefetching never faults,
/// so `p` may point anywhere; callers pass the start of data they are about to read.
#[inline(always)]
pub fn prefetch_lines_at(p: *const u8, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        for i in 0..lines {
            // SAFETY: prefetch is a hint that never faults or reads memory architecturally;
            // `wrapping_add` makes no in-bounds claim. SSE is part of the x86_64 baseline.
            unsafe { _mm_prefetch(p.wrapping_add(64 * i) as *const i8, _MM_HINT_T0) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, lines);
    }
}
