//! Named failpoints: places in the write path where a crash test makes the process die at
//! that instant, as `kill -9` or a power cut could.
//!
//! `SEARCHD_FAILPOINTS=NAME[@N][,NAME[@N]...]` makes the N-th pass (default the first)
//! through failpoint `NAME` abort the process (`SIGABRT`: no destructor runs, nothing more is
//! written; the log's appends are `pwrite`s with no user-space buffer, so what the kernel
//! has is what a killed process leaves). Unset, a failpoint costs one load of an
//! initialised `OnceLock`. Every name is in [`NAMES`]; `crates/cli/tests/crash_loop.rs`
//! dies at each of them under continuous writes and checks every acknowledged operation
//! after the restart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Every failpoint, in the order a write meets them.
pub const NAMES: &[&str] = &[
    // A record is in the log, the writer has not been answered yet.
    "wal.after_append",
    // A new log file exists (rotation), nothing appended to it yet.
    "wal.after_rotate",
    // A refresh wrote its segment's files; the view is not swapped.
    "refresh.after_segment_write",
    // A refresh swapped its view (visible to searches); nothing synced or committed.
    "refresh.after_swap",
    // A merge wrote the merged segment; the view still has the segments it replaces.
    "merge.after_segment_write",
    // A merge swapped the merged segment in; not committed.
    "merge.after_swap",
    // A commit synced the new segments and wrote the deleted sets; the manifest is old.
    "commit.after_deleted_sets",
    // The manifest's temp file is written and synced, not yet renamed over the old one.
    "commit.before_manifest_rename",
    // The new manifest is in place; the log before it is not yet dropped.
    "commit.after_manifest",
    // The log is truncated; merged-away segments and stale deleted sets not yet removed.
    "commit.after_truncate",
    // A snapshot placed the segments; its manifest and log are not written.
    "snapshot.after_segments",
    // Start-up applied the log again (a refresh); the commit of it has not run.
    "open.after_replay",
];

struct Armed {
    name: String,
    left: AtomicU64,
}

fn armed() -> &'static [Armed] {
    static ARMED: OnceLock<Vec<Armed>> = OnceLock::new();
    ARMED.get_or_init(|| {
        let Ok(spec) = std::env::var("SEARCHD_FAILPOINTS") else {
            return Vec::new();
        };
        spec.split(',')
            .filter(|s| !s.trim().is_empty())
            .filter_map(|s| {
                let (name, n) = match s.trim().split_once('@') {
                    Some((a, b)) => (a, b.parse::<u64>().unwrap_or(1).max(1)),
                    None => (s.trim(), 1),
                };
                if !NAMES.contains(&name) {
                    eprintln!("SEARCHD_FAILPOINTS: unknown failpoint {name:?} ignored");
                    return None;
                }
                Some(Armed {
                    name: name.to_string(),
                    left: AtomicU64::new(n),
                })
            })
            .collect()
    })
}

/// Pass failpoint `name`: aborts the process here when it is armed and its count is up.
pub fn hit(name: &'static str) {
    debug_assert!(NAMES.contains(&name), "unlisted failpoint {name}");
    for a in armed() {
        if a.name == name && a.left.fetch_sub(1, Ordering::SeqCst) == 1 {
            eprintln!("failpoint {name}: aborting the process");
            std::process::abort();
        }
    }
}
