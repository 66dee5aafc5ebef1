//! The `searchd load` command as a standalone binary (the real CLI flattens
//! the same `LoadArgs`): `cargo run --release -p searchd-load --example load -- --help`

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "load",
    about = "Capacity measurement of a server speaking the searchd HTTP API"
)]
struct Cli {
    #[command(flatten)]
    load: searchd_load::LoadArgs,
}

fn main() {
    let cli = Cli::parse();
    match searchd_load::run_cli(&cli.load) {
        Ok(r) => std::process::exit(searchd_load::exit_status(&r)),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
