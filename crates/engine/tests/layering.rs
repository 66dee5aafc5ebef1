//! The engine's module layering (issue "The engine by file format"): no import cycle
//! between its top-level modules (`build` writes through `files`, `index` reads through
//! `files`, neither imports the other's internals), imports by module path, a crate root
//! that only declares modules and re-exports, and no source file over 1,000 lines. The
//! checks are `searchd_testkit::layering`.

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
    // The file readers and writers do not reach up into the index or the build.
    for low in ["files", "format", "distance", "hnsw", "ivf"] {
        let up = &g.edges[low];
        assert!(
            !up.contains("index") && !up.contains("build"),
            "{low} imports {up:?}"
        );
    }
}

#[test]
fn the_crate_root_only_declares_modules_and_reexports() {
    check_root_only_declares(&src());
}

#[test]
fn no_source_file_is_over_the_limit() {
    check_file_sizes(&src());
}
