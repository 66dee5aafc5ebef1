//! `searchd restore`: a snapshot (or any collection) to a new collection directory.

use std::path::PathBuf;

use clap::Args;
use searchd_engine::LoadOptions;

use crate::util::CliError;

/// `searchd restore --snapshot S --out DIR`.
#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// A snapshot directory (`POST /collections/{name}/snapshot` replies with its path).
    #[arg(long, value_name = "DIR")]
    pub snapshot: PathBuf,
    /// The new collection directory (must not exist). Immutable files are hard-linked
    /// when both are on one file system, the write-ahead log is copied.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn restore_cmd(a: &RestoreArgs) -> Result<(), CliError> {
    let t = std::time::Instant::now();
    let docs = searchd_collection::live::restore(&a.snapshot, &a.out, &LoadOptions::default())
        .map_err(|e| {
            if e.is_input() {
                CliError::Input(e.to_string())
            } else {
                CliError::Io(e.to_string())
            }
        })?;
    println!(
        "restored {} documents from {} to {} in {:.2}s (serve it with: searchd serve --collection {})",
        docs,
        a.snapshot.display(),
        a.out.display(),
        t.elapsed().as_secs_f64(),
        a.out.display()
    );
    Ok(())
}
