//! The one operating-system call this crate makes itself: lowering a thread's priority.

/// Lower the calling thread's scheduling priority by `by` (nice, capped at 19). On Linux a
/// thread's nice value is its own, and threads it starts inherit it.
pub fn renice_current_thread(by: i32) -> std::io::Result<()> {
    // SAFETY: gettid/getpriority/setpriority take and return plain integers; errno is the
    // calling thread's own.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let cur = libc::getpriority(libc::PRIO_PROCESS, tid);
        if cur == -1 && *libc::__errno_location() != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::setpriority(libc::PRIO_PROCESS, tid, (cur + by).min(19)) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
