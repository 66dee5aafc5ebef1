//! Transparent huge pages for the large, randomly read buffers of a build.
//!
//! A graph build reads rows, codes and link lists at random over tens to hundreds of
//! megabytes: with 4 KiB pages most reads also miss the TLB. Linux backs anonymous memory
//! with 2 MiB pages where asked (`MADV_HUGEPAGE`; the common `madvise` THP setting does
//! nothing without it). The advice only changes how pages are backed, never their content.

/// `(0..n).map(f)` collected into memory advised for huge pages (where the OS has them),
/// touching the pages only after the advice so the first faults can take 2 MiB pages.
pub(crate) fn vec_from<T>(n: usize, f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise(v.as_ptr() as *const u8, n * std::mem::size_of::<T>());
    v.extend((0..n).map(f));
    v
}

/// Advise the pages fully inside `[ptr, ptr + len)` for huge pages (Linux; elsewhere, and
/// for short ranges, nothing).
fn advise(ptr: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        if len < HUGE {
            return;
        }
        let page = 4096usize;
        let start = (ptr as usize).next_multiple_of(page);
        let end = (ptr as usize + len) / page * page;
        if end > start {
            // SAFETY: madvise only reads the range's page-table state; `start..end` lies
            // within the allocation `ptr..ptr + len` the caller owns (rounded inwards to
            // whole pages), and MADV_HUGEPAGE never changes the memory's contents. A failure
            // (no THP in this kernel) is ignored: the advice is only a hint.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (ptr, len);
    }
}
