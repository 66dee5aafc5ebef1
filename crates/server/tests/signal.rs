//! `run_blocking` in this process: serves on its address, and SIGTERM makes it drain and
//! return Ok. (Its own test binary: the signal handler is process-wide.)

mod common;

use std::time::{Duration, Instant};

use common::*;
use searchd_server::{ServeSettings, ServerConfig};

/// `searchd serve --index DIR` plus `edit` (the flags themselves are parsed by the binary;
/// `crates/cli/src/flags/serve.rs` tests that they become these settings).
fn settings(index: &str, edit: impl FnOnce(&mut ServeSettings)) -> ServeSettings {
    let mut s = ServeSettings {
        index: Some(index.into()),
        ..ServeSettings::default()
    };
    edit(&mut s);
    s
}

#[test]
fn sigterm_stops_run_blocking_cleanly() {
    let f = fixture();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let qpath = f.dir.path().join("q.fvecs");
    searchd_vecio::write_vectors(&qpath, f.queries.as_slice(), f.queries.n(), DIM).unwrap();
    let serve = settings(f.index_dir.to_str().unwrap(), |s| {
        s.queries = Some(qpath.clone());
        s.addr = addr.clone();
        s.threads = Some(2);
        s.vectors = searchd_engine::VectorPlacement::Ram;
        s.no_verify = true;
    });
    assert_eq!(serve.timeout_ms, 1000);
    assert_eq!(serve.body_limit, 1 << 20);
    assert_eq!(serve.ef, 64);
    let server = std::thread::spawn(move || searchd_server::run_blocking(&serve));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = client();
        let t = Instant::now();
        loop {
            if let Ok(r) = c.get(format!("http://{addr}/ready")).send().await {
                if r.status() == 200 {
                    break;
                }
            }
            assert!(t.elapsed() < Duration::from_secs(20), "never ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (st, _, v) = post(
            &c,
            &format!("http://{addr}/search"),
            r#"{"qidx": 3, "k": 4}"#,
        )
        .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["hits"].as_array().unwrap().len(), 4);
        let stats = get_json(&c, &format!("http://{addr}/stats")).await;
        assert_eq!(stats["index"]["placement"]["vectors"], "ram");
        assert_eq!(stats["index"]["placement"]["graph"], "ram");
    });
    // SAFETY: kill only sends a signal to this process, whose handler run_blocking installed.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGTERM) }, 0);
    let t = Instant::now();
    while !server.is_finished() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "run_blocking did not return"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server.join().unwrap().unwrap();
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "still listening"
    );
}

#[test]
fn bad_settings_are_config_errors() {
    let err = searchd_server::run_blocking(&settings("/nonexistent", |s| s.threads = Some(0)))
        .unwrap_err();
    assert!(err.to_string().contains("--threads"), "{err}");
    let err = ServerConfig::from_settings(&settings("/x", |s| s.ef = 5000))
        .err()
        .unwrap();
    assert!(err.to_string().contains("--ef"), "{err}");
    let cfg = ServerConfig::from_settings(&settings("/x", |s| {
        s.vectors = searchd_engine::VectorPlacement::Disk;
        s.graph = Some(searchd_engine::Placement::Ram);
    }))
    .unwrap();
    assert_eq!(cfg.load.vectors, searchd_engine::VectorPlacement::Disk);
    assert_eq!(cfg.load.graph, searchd_engine::Placement::Ram);
    // Codes follow the default for vectors off memory: mapped.
    assert_eq!(cfg.load.codes, searchd_engine::Placement::Mmap);
    for bad in [0.5, 1000.0, f32::NAN] {
        let err = ServerConfig::from_settings(&settings("/x", |s| s.oversample = Some(bad)))
            .err()
            .unwrap();
        assert!(err.to_string().contains("--oversample"), "{bad}: {err}");
    }
    let err = ServerConfig::from_settings(&settings("/x", |s| {
        s.reload_root = Some("/nonexistent-root".into())
    }))
    .err()
    .unwrap();
    assert!(err.to_string().contains("--reload-root"), "{err}");
    let err = ServerConfig::from_settings(&settings("/x", |s| s.max_buckets = 0))
        .err()
        .unwrap();
    assert!(err.to_string().contains("--max-buckets"), "{err}");
    let serve = settings("/x", |_| {});
    let cfg = ServerConfig::from_settings(&serve).unwrap();
    assert_eq!(cfg.max_inflight, 2 * cfg.threads);
    assert_eq!(cfg.queue, 64 * cfg.threads);
    assert_eq!(cfg.timeout, Duration::from_secs(1));
    assert_eq!(serve.addr, "127.0.0.1:8080");
    // A missing index directory is a clear error from run_blocking.
    let err = searchd_server::run_blocking(&settings("/nonexistent-index", |s| {
        s.addr = "127.0.0.1:0".into()
    }))
    .unwrap_err();
    assert!(err.to_string().contains("/nonexistent-index"), "{err}");
}
