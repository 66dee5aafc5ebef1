//! Run the load generator against `GET /health` at one fixed concurrency and
//! print the request rate; used by bench/load_vs_wrk.sh to compare with wrk.
//!
//! `cargo run --release -p searchd-load --example loadgen_health -- \
//!     --url http://127.0.0.1:PORT --connections 64 --duration 10s --threads 2`

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 64)]
    connections: u32,
    #[arg(long, default_value = "10s")]
    duration: String,
    #[arg(long, default_value = "2s")]
    warmup: String,
    #[arg(long, default_value_t = 2)]
    threads: usize,
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn main() {
    let cli = Cli::parse();
    let c = cli.connections.to_string();
    let t = cli.threads.to_string();
    let mut flags = vec![
        "--url",
        &cli.url,
        "--endpoint",
        "GET /health",
        "--ramp",
        &c,
        "--warmup",
        &cli.warmup,
        "--duration",
        &cli.duration,
        "--threads",
        &t,
        "--slo-p99-ms",
        "1000000",
    ];
    let json;
    if let Some(p) = &cli.json {
        json = p.display().to_string();
        flags.extend(["--json", json.as_str()]);
    }
    let args = match searchd_load::LoadArgs::try_parse_from(flags) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    match searchd_load::run_cli(&args) {
        Ok(r) => {
            let s = &r.steps[0];
            println!(
                "loadgen: {:.0} requests/s ({} ok, {} errors) at {} connections",
                s.rps,
                s.ok,
                s.errors.total(),
                s.concurrency
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
