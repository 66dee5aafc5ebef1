//! `run_blocking` in this process: serves on its address, and SIGTERM makes it drain and
//! return Ok. (Its own test binary: the signal handler is process-wide.)

mod common;

use std::time::{Duration, Instant};

use clap::Parser;
use common::*;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    serve: searchd_server::ServeArgs,
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
    let cli = Cli::try_parse_from([
        "serve",
        "--index",
        f.index_dir.to_str().unwrap(),
        "--queries",
        qpath.to_str().unwrap(),
        "--addr",
        &addr,
        "--threads",
        "2",
        "--vectors",
        "ram",
        "--no-verify",
    ])
    .unwrap();
    assert_eq!(cli.serve.timeout_ms, 1000);
    assert_eq!(cli.serve.body_limit, 1 << 20);
    assert_eq!(cli.serve.ef, 64);
    let server = std::thread::spawn(move || searchd_server::run_blocking(&cli.serve));

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
fn bad_flags_are_config_errors() {
    let cli = Cli::try_parse_from(["serve", "--index", "/nonexistent", "--threads", "0"]).unwrap();
    let err = searchd_server::run_blocking(&cli.serve).unwrap_err();
    assert!(err.to_string().contains("--threads"), "{err}");
    let cli = Cli::try_parse_from(["serve", "--index", "/x", "--ef", "5000"]).unwrap();
    let err = searchd_server::ServerConfig::from_args(&cli.serve)
        .err()
        .unwrap();
    assert!(err.to_string().contains("--ef"), "{err}");
    assert!(Cli::try_parse_from(["serve", "--index", "/x", "--vectors", "floppy"]).is_err());
    assert!(Cli::try_parse_from(["serve", "--index", "/x", "--graph", "disk"]).is_err());
    let cli = Cli::try_parse_from([
        "serve",
        "--index",
        "/x",
        "--vectors",
        "disk",
        "--graph",
        "ram",
    ])
    .unwrap();
    let cfg = searchd_server::ServerConfig::from_args(&cli.serve).unwrap();
    assert_eq!(cfg.load.vectors, searchd_engine::VectorPlacement::Disk);
    assert_eq!(cfg.load.graph, searchd_engine::Placement::Ram);
    // Codes follow the default for vectors off memory: mapped.
    assert_eq!(cfg.load.codes, searchd_engine::Placement::Mmap);
    for bad in ["0.5", "1000", "NaN"] {
        let cli = Cli::try_parse_from(["serve", "--index", "/x", "--oversample", bad]).unwrap();
        let err = searchd_server::ServerConfig::from_args(&cli.serve)
            .err()
            .unwrap();
        assert!(err.to_string().contains("--oversample"), "{bad}: {err}");
    }
    let cli = Cli::try_parse_from([
        "serve",
        "--index",
        "/x",
        "--reload-root",
        "/nonexistent-root",
    ])
    .unwrap();
    let err = searchd_server::ServerConfig::from_args(&cli.serve)
        .err()
        .unwrap();
    assert!(err.to_string().contains("--reload-root"), "{err}");
    let cli = Cli::try_parse_from(["serve", "--index", "/x"]).unwrap();
    let cfg = searchd_server::ServerConfig::from_args(&cli.serve).unwrap();
    assert_eq!(cfg.max_inflight, 2 * cfg.threads);
    assert_eq!(cfg.queue, 64 * cfg.threads);
    assert_eq!(cfg.timeout, Duration::from_secs(1));
    assert_eq!(cli.serve.addr, "127.0.0.1:8080");
    // A missing index directory is a clear error from run_blocking.
    let cli = Cli::try_parse_from([
        "serve",
        "--index",
        "/nonexistent-index",
        "--addr",
        "127.0.0.1:0",
    ])
    .unwrap();
    let err = searchd_server::run_blocking(&cli.serve).unwrap_err();
    assert!(err.to_string().contains("/nonexistent-index"), "{err}");
}
