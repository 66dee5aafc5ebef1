//! The crate's module layering (issue "One request path"): no import cycle between its
//! top-level modules, imports by module path, a crate root that only declares modules and
//! re-exports, and no source file over 1,000 lines. The checks are `searchd_testkit::layering`.

use std::path::{Path, PathBuf};

use searchd_testkit::layering::{check_acyclic, check_file_sizes, strip_comments};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_module_graph_is_acyclic() {
    let g = check_acyclic(&src());
    assert!(
        g.edges.len() >= 15,
        "expected the crate's modules: {:?}",
        g.edges.keys()
    );
}

#[test]
fn the_crate_root_only_declares_modules_and_reexports() {
    let lib = strip_comments(&std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs"));
    // Crate-level attributes (`#![warn(missing_docs)]`) are not statements.
    let lib: String = lib
        .lines()
        .filter(|l| !l.trim_start().starts_with("#!["))
        .collect::<Vec<_>>()
        .join("\n");
    // Statements end with `;` (a `pub use a::{...};` group spans lines).
    let mut bad = Vec::new();
    for stmt in lib.split(';') {
        let s = stmt.trim();
        if s.is_empty() {
            continue;
        }
        let ok = s.starts_with("pub use ")
            || ((s.starts_with("mod ") || s.starts_with("pub mod ")) && !s.contains('{'));
        if !ok {
            bad.push(s.to_string());
        }
    }
    assert!(bad.is_empty(), "lib.rs defines or imports: {bad:?}");
}

#[test]
fn no_source_file_is_over_the_limit() {
    check_file_sizes(&src());
}
