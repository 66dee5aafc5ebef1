//! Ctrl-C for `searchd load`: the first SIGINT asks the run to stop (the current step
//! ends, the summary is printed and the reports are written, exit status 130); a second
//! SIGINT exits at once with status 130.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
static COUNT: AtomicUsize = AtomicUsize::new(0);
static MESSAGE: OnceLock<&'static [u8]> = OnceLock::new();

extern "C" fn on_sigint(_sig: libc::c_int) {
    // Only async-signal-safe work here: atomics, write(2), _exit(2).
    let n = COUNT.fetch_add(1, Ordering::SeqCst);
    if n == 0 {
        if let Some(f) = STOP.get() {
            f.store(true, Ordering::SeqCst);
        }
        let msg: &[u8] = MESSAGE.get().copied().unwrap_or(
            b"\ninterrupted: finishing the current step (Ctrl-C again to quit at once)\n",
        );
        // SAFETY: write(2) on stderr with a valid buffer is async-signal-safe.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
        }
    } else {
        // SAFETY: _exit(2) is async-signal-safe and never returns.
        unsafe { libc::_exit(130) }
    }
}

/// [`install`], printing `message` on the first Ctrl-C instead of the load lab's.
pub fn install_with(message: &'static [u8]) -> Arc<AtomicBool> {
    let _ = MESSAGE.set(message);
    install()
}

/// Install the SIGINT handler (once per process) and return the flag it sets.
pub fn install() -> Arc<AtomicBool> {
    let flag = STOP
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: installs a handler that only touches atomics and async-signal-safe
        // calls; the sigaction struct is zeroed then filled.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigint as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        }
    });
    flag
}

/// Whether a Ctrl-C arrived since [`install`].
pub fn requested() -> bool {
    STOP.get().is_some_and(|f| f.load(Ordering::SeqCst))
}
