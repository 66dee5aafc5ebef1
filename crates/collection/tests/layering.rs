//! The crate's module layering (issue "One request path"): no import cycle between its
//! top-level modules, imports by module path, a crate root that only declares modules and
//! re-exports, and no source file over 1,000 lines. The checks are `searchd_testkit::layering`.

use std::path::{Path, PathBuf};

use searchd_testkit::layering::{check_acyclic, check_file_sizes, check_root_only_declares};

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
    check_root_only_declares(&src());
}

#[test]
fn no_source_file_is_over_the_limit() {
    check_file_sizes(&src());
}
