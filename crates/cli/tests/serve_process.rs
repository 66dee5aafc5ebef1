//! `searchd serve` as a real process (issue 14): its log lines follow the terminal (no
//! colour into a pipe, `--log-format json`), the ready line is a plain sentence printed
//! after the index is open and the socket bound, and abuse probes get the documented
//! answers over real sockets.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_searchd")
}

fn ok(args: &[&str]) {
    let o = Command::new(bin())
        .args(args)
        .env("SEARCHD_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A small index under `d`: (index dir, query file).
fn index(d: &Path) -> (String, String) {
    let data = d.join("data");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    ok(&[
        "dataset",
        "synth",
        "--n",
        "2000",
        "--dim",
        "16",
        "--queries",
        "20",
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
    (s(&idx), s(&data.join("queries.npy")))
}

struct Server {
    child: Child,
    lines: Vec<String>,
    addr: String,
}

impl Server {
    /// Start `searchd serve` on a free port with stderr piped (not a terminal) and read its
    /// log until the ready line.
    fn start(d: &Path, extra: &[&str]) -> Server {
        let (idx, q) = index(d);
        let mut child = Command::new(bin())
            .args([
                "serve",
                "--index",
                &idx,
                "--queries",
                &q,
                "--addr",
                "127.0.0.1:0",
            ])
            .args(extra)
            .env_remove("SEARCHD_LOG")
            .env_remove("NO_COLOR")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut lines = Vec::new();
        loop {
            let mut l = String::new();
            assert!(err.read_line(&mut l).unwrap() > 0, "exited: {lines:#?}");
            let done = l.contains("ready: listening on http://");
            lines.push(l.trim_end().to_string());
            if done {
                break;
            }
        }
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = err.read_to_string(&mut sink);
        });
        let last = lines.last().unwrap();
        let at = last.find("http://").unwrap() + 7;
        let addr = last[at..]
            .split(|c: char| c == ',' || c.is_whitespace() || c == '"')
            .next()
            .unwrap()
            .to_string();
        Server { child, lines, addr }
    }

    fn raw(&self, bytes: &[u8]) -> String {
        let mut c = TcpStream::connect(&self.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(bytes).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json_body(reply: &str) -> (u16, serde_json::Value) {
    let (head, body) = reply.split_once("\r\n\r\n").expect("a whole reply");
    (
        head[9..12].parse().unwrap(),
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {reply:?}")),
    )
}

#[test]
fn text_logs_have_no_colour_in_a_pipe_and_a_plain_ready_line_after_the_open() {
    let d = tempfile::tempdir().unwrap();
    let s = Server::start(d.path(), &[]);
    let all = s.lines.join("\n");
    assert!(!all.contains('\u{1b}'), "ANSI escapes in a pipe:\n{all}");
    let ready = s.lines.last().unwrap();
    assert!(
        ready.contains("serving 1 collection: idx (index flat, 2000 docs x 16 dims, cosine"),
        "{ready}"
    );
    assert!(
        !ready.contains("Object {") && !ready.contains("String(") && !ready.contains("\\\""),
        "{ready}"
    );
    // "listening" only once the index is open: the line that says it is the last.
    let first_listening = s
        .lines
        .iter()
        .position(|l| l.contains("listening"))
        .unwrap();
    let opened = s
        .lines
        .iter()
        .position(|l| l.contains("opened idx"))
        .expect("an opened line");
    assert!(opened < first_listening, "{all}");
    assert_eq!(first_listening, s.lines.len() - 1, "{all}");

    // Abuse probes against the real process.
    let (st, v) = json_body(&s.raw(b"NOT HTTP\r\n\r\n"));
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (400, Some("bad_request")),
        "{v}"
    );
    let (st, v) =
        json_body(&s.raw(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n"));
    assert_eq!(st, 200, "{v}");
    let n = 3 << 20;
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(c, "POST /search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {n}\r\n\r\n").unwrap();
    c.write_all(&vec![b' '; n])
        .expect("upload cut before the 413");
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let (st, v) = json_body(&String::from_utf8_lossy(&out));
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (413, Some("body_too_large"))
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let d = tempfile::tempdir().unwrap();
    let s = Server::start(d.path(), &["--log-format", "json"]);
    for l in &s.lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}"));
        assert!(v["timestamp"].is_string() && v["level"].is_string(), "{l}");
        assert!(v["message"].is_string(), "{l}");
    }
    let ready: serde_json::Value = serde_json::from_str(s.lines.last().unwrap()).unwrap();
    assert_eq!(ready["level"], "INFO");
    assert!(ready["message"]
        .as_str()
        .unwrap()
        .starts_with("ready: listening on http://127.0.0.1:"));
}

#[test]
fn a_reserved_collection_name_and_port_with_addr_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let (idx, _) = index(d.path());
    let console = format!("console={idx}");
    for (args, needle) in [
        (
            vec!["serve", "--collection", console.as_str()],
            "taken by the server's route /console",
        ),
        (
            vec![
                "serve",
                "--index",
                &idx,
                "--port",
                "1",
                "--addr",
                "127.0.0.1:9",
            ],
            "cannot be used with",
        ),
    ] {
        let o = Command::new(bin())
            .args(&args)
            .env("SEARCHD_LOG", "warn")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn a_network_address_without_keys_exits_2_and_keys_new_makes_a_usable_entry() {
    let d = tempfile::tempdir().unwrap();
    let (idx, _) = index(d.path());
    let o = Command::new(bin())
        .args(["serve", "--index", &idx, "--addr", "0.0.0.0:0"])
        .env("SEARCHD_LOG", "warn")
        .env_remove("SEARCHD_API_KEYS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--api-keys") && err.contains("--insecure"),
        "{err}"
    );
    // `keys new --json`: a key and the [[key]] table holding its hash, not the key.
    let o = Command::new(bin())
        .args(["keys", "new", "--name", "ops", "--scope", "admin", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let key = v["key"].as_str().unwrap();
    let entry = v["entry"].as_str().unwrap();
    assert!(
        entry.contains("name = \"ops\"") && entry.contains("scope = \"admin\""),
        "{entry}"
    );
    assert!(!entry.contains(key), "the file must not hold the key");
    assert!(
        entry.contains(&searchd_server::auth::hash_of(key)),
        "{entry}"
    );
    let o = Command::new(bin())
        .args(["keys", "new", "--name", "x", "--scope", "root"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown scope"));
    for (flag, value, needle) in [
        ("--name", " ", "--name is empty"),
        (
            "--collections",
            "a,,b",
            "--collections names an empty collection",
        ),
    ] {
        let mut args = vec!["keys", "new", "--scope", "read"];
        if flag != "--name" {
            args.extend(["--name", "x"]);
        }
        args.extend([flag, value]);
        let o = Command::new(bin()).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
