//! The binary's module layering (issue "The engine by file format"): no import cycle between
//! its top-level modules (`commands`, `text`, `quality`, `qdrant_ingest`, `demo`, `flags`,
//! ...; `write_json` lives in `util`, clap views in `flags`, the demos in one `demo/` folder
//! whose `mod.rs` only dispatches), imports by module path, no source file over 1,000 lines.
//! The checks are `searchd_testkit::layering`.

use std::path::{Path, PathBuf};

use searchd_testkit::layering::{check_acyclic, check_file_sizes};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_module_graph_is_acyclic() {
    let g = check_acyclic(&src());
    assert!(
        g.edges.len() >= 8,
        "expected the binary's modules: {:?}",
        g.edges.keys()
    );
    assert!(
        !g.edges["flags"].contains("demo") && !g.edges["util"].contains("commands"),
        "flags and util sit below the commands: {:?} {:?}",
        g.edges["flags"],
        g.edges["util"]
    );
}

#[test]
fn no_source_file_is_over_the_limit() {
    check_file_sizes(&src());
}
