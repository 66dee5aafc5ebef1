//! `searchd serve --config FILE`, `SEARCHD_<FLAG>` and `--print-config` as a real process:
//! precedence (flag > environment > file > default), errors that name the key, secrets
//! never printed, the printed file accepted back, and a server started from a file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_searchd")
}

/// `searchd ARGS` with no SEARCHD_ variable but `env`'s.
fn searchd(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    c.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SEARCHD_") || k == "QDRANT_API_KEY" {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().copied()).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `key = value` lines of a printed configuration (comments left out).
fn values(toml: &str) -> Vec<&str> {
    toml.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect()
}

#[test]
fn flag_beats_environment_beats_file_beats_default() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("searchd.toml");
    std::fs::write(
        &file,
        "index = \"/srv/idx\"\nmax_connections = 100\ntimeout_ms = 50\nread_timeout_ms = 900\n\
         collection = [\"a=/x\", \"/y\"]\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let o = searchd(
        &[
            "serve",
            "--config",
            f,
            "--read-timeout-ms",
            "700",
            "--print-config",
        ],
        &[
            ("SEARCHD_TIMEOUT_MS", "60"),
            ("SEARCHD_READ_TIMEOUT_MS", "800"),
            ("SEARCHD_INSECURE", "1"),
            ("SEARCHD_ADMIN_TOKEN", "tok-secret-1"),
            ("SEARCHD_LOG", "debug"),
        ],
    );
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v = values(&out);
    for want in [
        "index = \"/srv/idx\"",
        "max_connections = 100",
        "timeout_ms = 60",
        "read_timeout_ms = 700",
        "insecure = true",
        "collection = [\"a=/x\", \"/y\"]",
        "admin_token = \"<redacted>\"",
    ] {
        assert!(v.contains(&want), "{want} not in\n{out}");
    }
    assert!(!out.contains("tok-secret-1"), "a secret printed:\n{out}");
    for (key, by) in [
        ("max_connections", "file"),
        ("timeout_ms", "env SEARCHD_TIMEOUT_MS"),
        ("read_timeout_ms", "flag"),
    ] {
        let at = out.find(&format!("\n{key} = ")).unwrap();
        let about = out[..at].lines().last().unwrap();
        assert!(about.ends_with(&format!("set by {by})")), "{key}: {about}");
    }
    // SEARCHD_CONFIG names the file as --config does; the command line replaces a repeatable
    // flag's list instead of adding to it.
    let o = searchd(
        &["serve", "--collection", "/z", "--print-config"],
        &[("SEARCHD_CONFIG", f)],
    );
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(values(&out).contains(&"collection = [\"/z\"]"), "{out}");
    assert!(values(&out).contains(&"max_connections = 100"), "{out}");

    // The environment reaches serve only, and a bad value there is serve's usage error.
    let o = searchd(
        &["keys", "new", "--name", "x", "--scope", "read", "--json"],
        &[("SEARCHD_TIMEOUT_MS", "soon"), ("SEARCHD_NAME", "y")],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("name = \\\"x\\\""),
        "{}",
        text(&o.stdout)
    );
    let o = searchd(
        &["serve", "--index", "/x", "--print-config"],
        &[("SEARCHD_TIMEOUT_MS", "soon")],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("--timeout-ms") && err.contains("SEARCHD_TIMEOUT_MS"),
        "{err}"
    );
    // An empty variable counts as unset.
    let o = searchd(
        &["serve", "--index", "/x", "--print-config"],
        &[("SEARCHD_MODEL", ""), ("SEARCHD_INSECURE", "")],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(values(&text(&o.stdout))
        .iter()
        .all(|l| !l.starts_with("model")));
}

#[test]
fn unknown_keys_exit_2_naming_the_key_and_print_config_round_trips() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.toml");
    std::fs::write(&bad, "index = \"/x\"\nmax_conections = 10\n").unwrap();
    let o = searchd(&["serve", "--config", bad.to_str().unwrap()], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("unknown key `max_conections`")
            && err.contains("bad.toml")
            && err.contains("`max_connections`"),
        "{err}"
    );
    std::fs::write(&bad, "index = \"/x\"\nmax_connections = \"many\"\n").unwrap();
    let o = searchd(&["serve", "--config", bad.to_str().unwrap()], &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`max_connections`") && err.contains("bad.toml"),
        "{err}"
    );

    // Printed with a secret, written back in, read again: the same settings.
    let o = searchd(
        &[
            "serve",
            "--collection",
            "docs=/srv/docs",
            "--max-connections",
            "321",
            "--cache-bytes",
            "1MiB",
            "--cache-ttl-s",
            "9",
            "--vacuum-ratio",
            "0.25",
            "--print-config",
        ],
        &[
            ("SEARCHD_ADMIN_TOKEN", "tok-secret-2"),
            ("SEARCHD_POPULATE", "true"),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let printed = text(&o.stdout);
    assert!(!printed.contains("tok-secret-2"));
    let file = d.path().join("printed.toml");
    std::fs::write(&file, printed.replace("\"<redacted>\"", "\"tok-secret-2\"")).unwrap();
    let o = searchd(
        &[
            "serve",
            "--config",
            file.to_str().unwrap(),
            "--print-config",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let again = text(&o.stdout);
    assert_eq!(values(&again), values(&printed), "{again}");
    assert!(values(&again).contains(&"populate = true"), "{again}");
}

/// A small index under `d`.
fn index(d: &Path) -> String {
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let data = d.join("data");
    let ok = |args: &[&str]| {
        let o = searchd(args, &[("SEARCHD_LOG", "warn")]);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    };
    ok(&[
        "dataset",
        "synth",
        "--n",
        "500",
        "--dim",
        "8",
        "--queries",
        "4",
        "--out",
        &s(&data),
    ]);
    let idx = d.join("idx");
    ok(&[
        "build",
        "--base",
        &s(&data.join("base.npy")),
        "--out",
        &s(&idx),
        "--index",
        "flat",
    ]);
    s(&idx)
}

#[test]
fn a_server_started_from_a_file_applies_it_and_logs_where_each_setting_came_from() {
    let d = tempfile::tempdir().unwrap();
    let idx = index(d.path());
    let file = d.path().join("searchd.toml");
    std::fs::write(
        &file,
        format!(
            "index = {idx:?}\naddr = \"127.0.0.1:0\"\nmax_connections = 100\n\
             admin_token = \"tok-secret-3\"\nmax_buckets = 999\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(bin())
        .args(["serve", "--max-buckets", "1234"])
        .env("SEARCHD_CONFIG", &file)
        .env("SEARCHD_MAX_CONNECTIONS", "77")
        .env("SEARCHD_LOG", "info")
        .env_remove("SEARCHD_ADMIN_TOKEN")
        .env_remove("SEARCHD_API_KEYS")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 {
            let _ = child.kill();
            panic!("exited: {lines:#?}");
        }
        let done = l.contains("ready: listening on http://");
        lines.push(l.trim_end().to_string());
        if done {
            break;
        }
    }
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = err.read_to_string(&mut sink);
    });
    let all = lines.join("\n");
    let config = lines
        .iter()
        .find(|l| l.contains("configuration: "))
        .unwrap_or_else(|| panic!("no configuration line:\n{all}"));
    for want in [
        "max_connections=77 (env SEARCHD_MAX_CONNECTIONS)",
        "max_buckets=1234 (flag)",
        "addr=\"127.0.0.1:0\" (file)",
        "admin_token=\"<redacted>\" (file)",
    ] {
        assert!(config.contains(want), "{want} not in {config}");
    }
    assert!(!all.contains("tok-secret-3"), "a secret logged:\n{all}");
    let last = lines.last().unwrap();
    let at = last.find("http://").unwrap() + 7;
    let addr: String = last[at..]
        .chars()
        .take_while(|c| !(c.is_whitespace() || *c == ',' || *c == '"'))
        .collect();
    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.lines()
            .any(|l| l == "searchd_max_connections 77" || l == "searchd_max_connections 77.0"),
        "{out}"
    );
}
