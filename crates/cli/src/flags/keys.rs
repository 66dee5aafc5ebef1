//! `searchd keys`: API keys for `serve --api-keys FILE` (CONTRACTS.md "Security and
//! operations"). The key is printed once; the file keeps only its hash.

use clap::{Args, Subcommand};
use searchd_server::auth::{new_key, Scope};

use crate::util::CliError;

/// What to do with keys.
#[derive(Subcommand, Debug)]
pub enum KeysCmd {
    /// A new random key: prints the key (once) and the [[key]] table to append to the
    /// --api-keys file (which holds only the key's SHA-256).
    New(NewKeyArgs),
}

/// `searchd keys new`.
#[derive(Args, Debug)]
pub struct NewKeyArgs {
    /// The key's name (shown in logs and refusals, never the key).
    #[arg(long, value_name = "NAME")]
    pub name: String,

    /// What the key may do: read (searches, reads), write (and upserts, deletes) or admin
    /// (and snapshots, reloads).
    #[arg(long, value_parser = Scope::parse, value_name = "read|write|admin")]
    pub scope: Scope,

    /// Only these collections (comma-separated); every collection when left out.
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub collections: Option<Vec<String>>,

    /// Print {"key": ..., "entry": ...} as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Run a `keys` command.
pub fn run(cmd: &KeysCmd) -> Result<(), CliError> {
    match cmd {
        KeysCmd::New(a) => {
            if a.name.trim().is_empty() {
                return Err(CliError::Input("--name is empty".into()));
            }
            if let Some(c) = &a.collections {
                if c.is_empty() || c.iter().any(|s| s.trim().is_empty()) {
                    return Err(CliError::Input(
                        "--collections names an empty collection".into(),
                    ));
                }
            }
            let (key, entry) = new_key(&a.name, a.scope, a.collections.as_deref())
                .map_err(|e| CliError::Io(format!("random source: {e}")))?;
            if a.json {
                println!("{}", serde_json::json!({ "key": key, "entry": entry }));
            } else {
                println!("key (shown once; send it as Authorization: Bearer KEY):\n  {key}\n");
                println!("append to the --api-keys file:\n\n{entry}");
            }
            Ok(())
        }
    }
}
