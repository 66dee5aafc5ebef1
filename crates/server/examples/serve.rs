//! `searchd serve` as a standalone binary, for benchmarks and manual checks:
//!
//! ```text
//! cargo run --release -p searchd-server --example serve -- --index DIR --queries Q.npy
//! ```
//! Logging follows RUST_LOG (default `info`; `debug` logs one line per request).

use clap::Parser;

#[derive(Parser)]
#[command(about = "searchd HTTP server")]
struct Cli {
    #[command(flatten)]
    serve: searchd_server::ServeArgs,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if let Err(e) = searchd_server::run_blocking(&cli.serve) {
        eprintln!("searchd serve: {e}");
        std::process::exit(2);
    }
}
