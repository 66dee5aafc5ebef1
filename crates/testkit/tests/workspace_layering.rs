//! Every crate of the workspace: no import cycle between its top-level modules, and no
//! source file over `MAX_LINES` lines outside `kernels` (whose per-ISA modules are long by
//! nature). No exception: the last one (`load/src/runner.rs`, 1,767 lines) is now the
//! `runner/` folder.
//!
//! The crates with a layering test of their own (engine, collection, server, cli) check more
//! there (imports by module path, a crate root that only declares and re-exports).

use std::path::{Path, PathBuf};

use searchd_testkit::layering::{find_cycle, graph, rust_files, MAX_LINES};

fn crates() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("crates/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    out.sort();
    out
}

#[test]
fn no_crate_has_a_module_cycle() {
    let all = crates();
    assert!(all.len() >= 14, "expected the workspace's crates: {all:?}");
    for c in all {
        let g = graph(&c.join("src"));
        if let Some(cycle) = find_cycle(&g.edges) {
            panic!("{}: import cycle {}", c.display(), cycle.join(" -> "));
        }
    }
}

#[test]
fn no_source_file_is_over_the_limit_outside_kernels() {
    let mut over = Vec::new();
    for c in crates() {
        if c.ends_with("kernels") {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&c.join("src"), &mut files);
        for f in files {
            let n = std::fs::read_to_string(&f).expect("source").lines().count();
            let name = c
                .file_name()
                .expect("crate dir")
                .to_string_lossy()
                .into_owned();
            let inside = f.strip_prefix(&c).expect("under the crate");
            let rel = Path::new("crates").join(name).join(inside);
            if n > MAX_LINES {
                over.push(format!("{} ({n} lines, limit {MAX_LINES})", rel.display()));
            }
        }
    }
    assert!(over.is_empty(), "files over the limit: {over:?}");
}
