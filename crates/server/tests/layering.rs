//! The server crate's shape (issue "One request path"): its modules import each other
//! without a cycle and by module path, the request path runs one way (route modules ->
//! `query`, the one pipeline -> `state` -> `backend`), and no source file is over 1,000
//! lines. The checks are `searchd_testkit::layering`. (`lib.rs` is the crate root: `mod`
//! lines, re-exports, `serve` and `bind`; no module imports from it.)

use std::path::{Path, PathBuf};

use searchd_testkit::layering::{check_acyclic, check_file_sizes};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_module_graph_is_acyclic_and_the_request_path_runs_one_way() {
    let g = check_acyclic(&src());
    let e = &g.edges;
    assert!(
        e.len() >= 20,
        "expected the server's modules: {:?}",
        e.keys()
    );
    let routes = [
        "native", "es", "es_write", "reads", "writes", "admin", "observe", "manage",
    ];
    for route in routes {
        for other in routes {
            assert!(
                other == route || !e[route].contains(other),
                "route module {route} imports route module {other}"
            );
        }
    }
    for route in ["native", "es", "es_write", "reads", "writes"] {
        assert!(e[route].contains("query"), "{route} answers through query");
    }
    for low in ["query", "state", "wire", "backend"] {
        for route in routes {
            assert!(
                !e[low].contains(route),
                "{low} imports route module {route}"
            );
        }
    }
    assert!(
        e["router"].iter().all(|m| m != "net"),
        "router is below net"
    );
}

#[test]
fn no_source_file_is_over_the_limit() {
    check_file_sizes(&src());
}
