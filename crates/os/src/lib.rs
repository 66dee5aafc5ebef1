//! The operating-system facts and calls searchd makes, in one place: this crate holds the
//! `libc` calls outside the kernels and memory maps, each behind a safe function.
//!
//! * [`proc`]: `/proc/PID/stat` and `/proc/PID/status` of this process, another process or
//!   one of this process's threads, parsed once ([`proc::Stat`], [`proc::Status`]).
//! * CPU clocks: [`clock_ticks`], [`page_size`], [`thread_cpu_seconds`],
//!   [`process_cpu_seconds`], [`gettid`].
//! * Tuning a thread or the process: [`renice_current_thread`], [`raise_nofile_limit`].
//!
//! Off Linux the `/proc` readers return `None` and the Linux-only calls say so.
#![warn(missing_docs)]

pub mod proc;

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of `/proc`'s CPU times; 100
/// where the system does not say.
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf takes a plain integer and only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The memory page size in bytes (`sysconf(_SC_PAGESIZE)`); 4096 where the system does not
/// say.
pub fn page_size() -> u64 {
    // SAFETY: as in `clock_ticks`.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// The kernel id of the calling thread (Linux), e.g. for [`proc::Of::Thread`].
pub fn gettid() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        Some(unsafe { libc::gettid() })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// CPU seconds the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`, nanosecond
/// resolution); 0 if the clock cannot be read.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass, which outlives the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// CPU seconds (user + system) this process has used (`getrusage`, microsecond
/// resolution); 0 if it cannot be read.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: rusage is plain integers, for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we pass, which outlives the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Lower the calling thread's scheduling priority by `by` (nice, capped at 19). On Linux a
/// thread's nice value is its own, and threads it starts inherit it.
#[cfg(target_os = "linux")]
pub fn renice_current_thread(by: i32) -> std::io::Result<()> {
    // SAFETY: gettid takes nothing and cannot fail.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // getpriority may return -1 as a priority: errno, cleared first, tells a failure apart.
    errno::set_errno(errno::Errno(0));
    // SAFETY: getpriority takes and returns plain integers.
    let cur = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    if cur == -1 && errno::errno().0 != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: setpriority takes plain integers.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, (cur + by).min(19)) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Lower the calling thread's scheduling priority: not done off Linux, where a nice value
/// belongs to the whole process.
#[cfg(not(target_os = "linux"))]
pub fn renice_current_thread(_by: i32) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "a thread's own priority is Linux-only",
    ))
}

/// Raise the soft limit on open files to the hard limit, so many idle connections cannot
/// exhaust descriptors. Returns the new soft limit.
pub fn raise_nofile_limit() -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let want = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim.rlim_cur = lim.rlim_max;
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not on every system
    Ok(lim.rlim_cur as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_move_forward() {
        assert!(clock_ticks() > 0.0);
        assert!(page_size() >= 4096);
        let (t0, p0) = (thread_cpu_seconds(), process_cpu_seconds());
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_seconds() > t0);
        assert!(process_cpu_seconds() >= p0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn renice_lowers_this_thread_only() {
        let me = std::thread::spawn(|| {
            renice_current_thread(1).unwrap();
            let tid = gettid().unwrap();
            crate::proc::stat(crate::proc::Of::Thread(tid))
                .unwrap()
                .nice
        })
        .join()
        .unwrap();
        let main = crate::proc::stat(crate::proc::Of::Thread(gettid().unwrap()))
            .unwrap()
            .nice;
        assert_eq!(me, (main + 1).min(19));
    }

    #[test]
    fn nofile_limit_is_raised_to_a_positive_value() {
        assert!(raise_nofile_limit().unwrap() > 0);
    }
}
