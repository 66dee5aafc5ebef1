//! Live collections through a real `searchd serve` process: upserts and deletes over HTTP,
//! SIGKILL at random points and restarts (every acknowledged write back, nothing
//! resurrected), bad writes, read-only serving, snapshots and `searchd restore`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DIM: usize = 8;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_searchd")
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn vector(&mut self) -> Vec<f32> {
        (0..DIM)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect()
    }
}

/// One HTTP/1.1 request on a fresh connection: (status, body).
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let b = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
        b.len()
    );
    s.write_all(req.as_bytes())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    // Chunked bodies: the JSON is between the chunk size lines.
    let body = if text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body.lines()
            .filter(|l| !l.chars().all(|c| c.is_ascii_hexdigit()) || l.is_empty())
            .collect::<Vec<_>>()
            .join("")
    } else {
        body
    };
    Ok((status, body))
}

fn json(port: u16, method: &str, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let (s, b) = http(port, method, path, Some(&body.to_string())).unwrap();
    (
        s,
        serde_json::from_str(&b).unwrap_or(serde_json::Value::Null),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// The child is returned to the caller, which kills and waits for it.
#[allow(clippy::zombie_processes)]
fn serve(dir: &Path, extra: &[&str]) -> (Child, u16) {
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--collection"])
        .arg(dir)
        .args([
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--threads",
            "1",
            "--refresh-ms",
            "50",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().unwrap();
    let t = Instant::now();
    loop {
        if let Ok((200, _)) = http(port, "GET", "/ready", None) {
            return (child, port);
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "server did not become ready"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn make_collection(
    d: &Path,
    rng: &mut Rng,
    model: &mut BTreeMap<u64, (String, Vec<f32>)>,
) -> std::path::PathBuf {
    let docs = d.join("docs.jsonl");
    let mut f = std::fs::File::create(&docs).unwrap();
    for id in 0..40u64 {
        let v = rng.vector();
        let color = ["red", "blue"][(id % 2) as usize].to_string();
        writeln!(
            f,
            "{}",
            serde_json::json!({"id": id, "text": format!("doc {id}"), "color": color, "vector": v})
        )
        .unwrap();
        model.insert(id, (color, v));
    }
    drop(f);
    let out = d.join("c");
    let st = Command::new(bin())
        .args(["ingest", "--docs"])
        .arg(&docs)
        .arg("--out")
        .arg(&out)
        .args(["--vector-field", "vector", "--text-field", "text"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    out
}

fn verify(port: u16, model: &BTreeMap<u64, (String, Vec<f32>)>, gone: &[u64], what: &str) {
    let (s, c) = json(port, "POST", "/collections/c/count", &serde_json::json!({}));
    assert_eq!(s, 200, "{what}: {c}");
    assert_eq!(
        c["count"].as_u64(),
        Some(model.len() as u64),
        "{what}: count {c}"
    );
    for (id, (color, _)) in model {
        let (s, b) = http(port, "GET", &format!("/collections/c/docs/{id}"), None).unwrap();
        assert_eq!(s, 200, "{what}: acknowledged id {id} is missing: {b}");
        let v: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert_eq!(
            v["fields"]["color"],
            color.as_str(),
            "{what}: id {id} has an old value"
        );
    }
    for id in gone {
        if !model.contains_key(id) {
            let (s, _) = http(port, "GET", &format!("/collections/c/docs/{id}"), None).unwrap();
            assert_eq!(s, 404, "{what}: deleted id {id} came back");
        }
    }
}

#[test]
fn kill_9_loses_no_acknowledged_write() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng(0xc0ffee);
    let mut model = BTreeMap::new();
    let dir = make_collection(d.path(), &mut rng, &mut model);
    let mut gone: Vec<u64> = Vec::new();
    let mut next = 1000u64;
    for round in 0..6 {
        let (mut child, port) = serve(
            &dir,
            &["--fsync", if round % 2 == 0 { "none" } else { "group" }],
        );
        verify(port, &model, &gone, &format!("round {round} after restart"));
        let ops = 20 + rng.below(40);
        for _ in 0..ops {
            if rng.below(4) == 0 && !model.is_empty() {
                let id = *model
                    .keys()
                    .nth(rng.below(model.len() as u64) as usize)
                    .unwrap();
                let (s, r) = json(
                    port,
                    "POST",
                    "/collections/c/delete",
                    &serde_json::json!({"ids": [id]}),
                );
                assert_eq!(s, 200, "{r}");
                assert_eq!(r["deleted"], 1, "{r}");
                model.remove(&id);
                gone.push(id);
            } else {
                let mut docs = Vec::new();
                for _ in 0..1 + rng.below(3) {
                    let id = if rng.below(2) == 0 && !model.is_empty() {
                        *model
                            .keys()
                            .nth(rng.below(model.len() as u64) as usize)
                            .unwrap()
                    } else {
                        next += 1;
                        next
                    };
                    let color = format!("c{}", rng.below(1000));
                    let v = rng.vector();
                    docs.push(serde_json::json!({"id": id, "text": format!("doc {id}"), "vector": v, "fields": {"color": color}}));
                    model.insert(id, (color, v));
                }
                let wait = rng.below(3) == 0;
                let (s, r) = json(
                    port,
                    "POST",
                    "/collections/c/docs",
                    &serde_json::json!({"docs": docs, "wait": wait}),
                );
                assert_eq!(s, 200, "{r}");
                assert_eq!(
                    r["status"],
                    if wait { "applied" } else { "acknowledged" },
                    "{r}"
                );
            }
        }
        // SIGKILL: no chance to commit or close.
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let (mut child, port) = serve(&dir, &[]);
    verify(port, &model, &gone, "final");
    // Searches see the live documents: the top hit of a stored vector is itself.
    let (id, (_, v)) = model.iter().next().unwrap();
    let (s, r) = json(
        port,
        "POST",
        "/collections/c/search",
        &serde_json::json!({"vector": v, "k": 3}),
    );
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["hits"][0]["id"], *id, "{r}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn bad_writes_read_only_snapshot_and_restore() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng(7);
    let mut model = BTreeMap::new();
    let dir = make_collection(d.path(), &mut rng, &mut model);
    let (mut child, port) = serve(&dir, &["--write-body-limit", "4096"]);
    let v = rng.vector();
    let cases: Vec<(serde_json::Value, u16, &str)> = vec![
        (
            serde_json::json!({"docs": [{"vector": v}]}),
            400,
            "id is missing",
        ),
        (
            serde_json::json!({"docs": [{"id": 1, "vector": [0.1, 0.2]}]}),
            400,
            "dimensions",
        ),
        (
            serde_json::json!({"docs": [{"id": 1, "vector": v, "fields": {"color": {"x": 1}}}]}),
            400,
            "color",
        ),
        (serde_json::json!({"docs": [{"id": 1}]}), 400, "vector"),
        (serde_json::json!({"docs": []}), 400, "empty"),
        (
            serde_json::json!({"docs": [{"id": -3, "vector": v}]}),
            400,
            "non-negative",
        ),
        (
            serde_json::json!({"docs": [{"id": 1, "vector": v, "color": "x"}]}),
            400,
            "unknown field",
        ),
        (serde_json::json!({"documents": []}), 400, "unknown field"),
    ];
    for (body, status, needle) in cases {
        let (s, r) = json(port, "POST", "/collections/c/docs", &body);
        assert_eq!(s, status, "{body} -> {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(needle),
            "{body} -> {r}"
        );
    }
    let (s, b) = http(
        port,
        "POST",
        "/collections/c/docs",
        Some("{\"docs\": [{\"id\": 1, \"vector\": [NaN, 1]}]}"),
    )
    .unwrap();
    assert_eq!(s, 400, "{b}");
    let big = serde_json::json!({"docs": (0..200).map(|i| serde_json::json!({"id": i, "vector": v})).collect::<Vec<_>>()});
    let (s, b) = http(port, "POST", "/collections/c/docs", Some(&big.to_string())).unwrap();
    assert_eq!(s, 413, "{b}");
    // Unknown ids are reported, not an error.
    let (s, r) = json(
        port,
        "POST",
        "/collections/c/delete",
        &serde_json::json!({"ids": [99999, "nope"]}),
    );
    assert_eq!((s, r["deleted"].as_u64()), (200, Some(0)), "{r}");
    assert_eq!(r["not_found"].as_array().map(|a| a.len()), Some(2), "{r}");
    let (s, r) = json(
        port,
        "DELETE",
        "/collections/c/docs/99999",
        &serde_json::json!(null),
    );
    assert_eq!(s, 200, "{r}");
    // A delete by filter, waited for.
    let (s, r) = json(
        port,
        "POST",
        "/collections/c/delete",
        &serde_json::json!({"filter": {"term": {"color": "red"}}, "wait": true}),
    );
    assert_eq!((s, r["deleted"].as_u64()), (200, Some(20)), "{r}");
    let (_, c) = json(port, "POST", "/collections/c/count", &serde_json::json!({}));
    assert_eq!(c["count"], 20, "{c}");
    let (s, r) = json(
        port,
        "POST",
        "/collections/c/delete",
        &serde_json::json!({"filter": {"term": {"nope": 1}}}),
    );
    assert_eq!(s, 400, "{r}");
    // A snapshot, then more writes.
    let (s, snap) = json(
        port,
        "POST",
        "/collections/c/snapshot",
        &serde_json::json!({}),
    );
    assert_eq!(s, 200, "{snap}");
    let snap_path = snap["path"].as_str().unwrap().to_string();
    let (s, r) = json(
        port,
        "POST",
        "/collections/c/docs",
        &serde_json::json!({"docs": [{"id": 5000, "vector": v}], "wait": true}),
    );
    assert_eq!(s, 200, "{r}");
    let (_, c) = json(port, "POST", "/collections/c/count", &serde_json::json!({}));
    assert_eq!(c["count"], 21);
    // A second process on the live directory serves it read-only.
    let (mut second, p2) = serve(&dir, &[]);
    let (s, r) = json(
        p2,
        "POST",
        "/collections/c/docs",
        &serde_json::json!({"docs": [{"id": 6000, "vector": v}]}),
    );
    assert_eq!(s, 409, "{r}");
    assert_eq!(r["error"]["code"], "conflict", "{r}");
    second.kill().unwrap();
    second.wait().unwrap();
    // The snapshot served by another process: the state at the snapshot.
    // (A snapshot directory is named after its collection, sequence number and time: give
    // it the collection's name.)
    let (mut third, p3) = serve(Path::new(&format!("c={snap_path}")), &["--read-only"]);
    let (_, c) = json(p3, "POST", "/collections/c/count", &serde_json::json!({}));
    assert_eq!(c["count"], 20, "{c}");
    let (s, _) = json(
        p3,
        "POST",
        "/collections/c/docs",
        &serde_json::json!({"docs": [{"id": 7, "vector": v}]}),
    );
    assert_eq!(s, 409);
    third.kill().unwrap();
    third.wait().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // restore: a new writable collection.
    let out = d.path().join("restored");
    let o = Command::new(bin())
        .args(["restore", "--snapshot", &snap_path, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(bin())
        .args(["restore", "--snapshot", &snap_path, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "restore over an existing directory"
    );
    let (mut r, p4) = serve(&out, &[]);
    let (_, c) = json(
        p4,
        "POST",
        "/collections/restored/count",
        &serde_json::json!({}),
    );
    assert_eq!(c["count"], 20, "{c}");
    let (s, _) = json(
        p4,
        "POST",
        "/collections/restored/docs",
        &serde_json::json!({"docs": [{"id": 8, "vector": v}], "wait": true}),
    );
    assert_eq!(s, 200);
    r.kill().unwrap();
    r.wait().unwrap();
}

/// `searchd restore` with `--out` inside the snapshot (directly, deeper, through a symlink)
/// is refused as bad input (exit 2) before anything is written, instead of copying the
/// snapshot into itself until the path is too long.
#[test]
fn restore_refuses_an_out_inside_the_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng(11);
    let mut model = BTreeMap::new();
    let snap = make_collection(d.path(), &mut rng, &mut model);
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&snap, &link).unwrap();
    let listing = |p: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let before = listing(&snap);
    for out in [
        snap.join("copy"),
        snap.join("new").join("deeper").join("copy"),
        snap.join("..").join("c").join("copy"),
        link.join("copy"),
    ] {
        let o = Command::new(bin())
            .args(["restore", "--snapshot"])
            .arg(&snap)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", out.display());
        assert!(
            err.contains("inside the snapshot"),
            "{}: {err}",
            out.display()
        );
        assert_eq!(listing(&snap), before, "{}: nothing written", out.display());
    }
    // Beside it: restored.
    let o = Command::new(bin())
        .args(["restore", "--snapshot"])
        .arg(&link)
        .arg("--out")
        .arg(d.path().join("beside"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Copies the tree at `from` to `to` (files and directories only).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// Whether a test that needs a user+mount namespace with a tmpfs may skip here: not under
/// `CI=true`, where it must run (the CI machine has `unshare` and user namespaces).
fn skip_without_namespaces(test: &str, why: &str) {
    searchd_testkit::needs::skip(searchd_testkit::needs::Need::Namespaces, test, why);
}

/// A 4 MiB tmpfs at `D/mnt` in a user and mount namespace of its own (`unshare`, so no root
/// is needed): `sh` mounts it, copies the collection `src` in as `c`, runs `serves` (with
/// `$1` the mount, `$3` the searchd binary, `$4` `D/server.pid`, `$5`... `ports`) and then
/// stays, holding the mount, for a minute. `None` (after [`skip_without_namespaces`]) where
/// `unshare` cannot run.
fn on_tmpfs(test: &str, d: &Path, src: &Path, serves: &str, ports: &[u16]) -> Option<Child> {
    let mnt = d.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=4m searchd-test \"$1\" && cp -a \"$2\" \"$1/c\" || exit 97\n{serves}\nexec sleep 60"
    );
    let spawned = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(script)
        .arg("sh")
        .arg(&mnt)
        .arg(src)
        .arg(bin())
        .arg(d.join("server.pid"))
        .args(ports.iter().map(|p| p.to_string()))
        .env("SEARCHD_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    match spawned {
        Ok(c) => Some(c),
        Err(e) => {
            skip_without_namespaces(test, &format!("cannot run unshare ({e})"));
            None
        }
    }
}

/// Waits for `/ready` on `port`; `Err` with what the holder said if it exited first.
fn ready_on_tmpfs(holder: &mut Child, port: u16) -> Result<(), String> {
    let t = Instant::now();
    loop {
        if let Ok((200, _)) = http(port, "GET", "/ready", None) {
            return Ok(());
        }
        if let Some(st) = holder.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = holder.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(format!("{st}: {}", err.trim()));
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "server on port {port} not ready"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The tmpfs as the process `pid` sees it (through its mount namespace), and its pid read
/// from `file`.
fn tmpfs_of(d: &Path, pidfile: &str) -> (i32, std::path::PathBuf) {
    let pid: i32 = std::fs::read_to_string(d.join(pidfile))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mnt = d.join("mnt");
    let inside = Path::new(&format!("/proc/{pid}/root")).join(mnt.strip_prefix("/").unwrap());
    assert!(inside.join("c").is_dir(), "{}", inside.display());
    (pid, inside)
}

/// A ballast file that takes every free byte of the file system `path` is on.
fn fill_disk(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 1 << 16];
    while f.write_all(&chunk).is_ok() {}
    let small = [0u8; 512];
    while f.write_all(&small).is_ok() {}
}

fn segment_dirs(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("seg-")
        })
        .count()
}

/// A disk that fills mid-write: the server runs on a 4 MiB tmpfs of its own (a user and
/// mount namespace from `unshare`, so no root is needed), a ballast file takes every free
/// byte, and writes must get 507 `insufficient_storage` (never a 500 or a hang), every write
/// acknowledged before stays (visible once refreshes can write again), reads keep
/// answering, writes resume once the ballast is gone, and a SIGKILL after that loses
/// nothing acknowledged.
#[test]
fn a_full_disk_answers_507_loses_nothing_and_writes_resume() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng(23);
    let mut model = BTreeMap::new();
    let src = make_collection(d.path(), &mut rng, &mut model);
    let mnt = d.path().join("mnt");
    let port = free_port();
    // The server runs in the background; the holder stays after it dies, so the test can
    // copy the directory out.
    let serves = r#""$3" serve --collection "$1/c" --addr "127.0.0.1:$5" --threads 1 --refresh-ms 50 --commit-ms 200 &
echo $! > "$4"
wait"#;
    let Some(mut holder) = on_tmpfs(
        "a_full_disk_answers_507_loses_nothing_and_writes_resume",
        d.path(),
        &src,
        serves,
        &[port],
    ) else {
        return;
    };
    if let Err(why) = ready_on_tmpfs(&mut holder, port) {
        return skip_without_namespaces(
            "a_full_disk_answers_507_loses_nothing_and_writes_resume",
            &format!("no user+mount namespace with a tmpfs here ({why})"),
        );
    }
    let (server, inside) = tmpfs_of(d.path(), "server.pid");
    searchd_testkit::needs::ran(
        searchd_testkit::needs::Need::Namespaces,
        "a_full_disk_answers_507_loses_nothing_and_writes_resume",
    );

    let upsert = |rng: &mut Rng, id: u64, color: &str| {
        let v = rng.vector();
        let body = serde_json::json!({"docs": [{"id": id, "text": format!("doc {id} {color}"),
            "vector": v, "fields": {"color": color}}]});
        (json(port, "POST", "/collections/c/docs", &body), v)
    };
    // Fill every free byte.
    let ballast = inside.join("ballast");
    fill_disk(&ballast);
    let mut full = None;
    for i in 0..2000u64 {
        let id = 1000 + i;
        let color = format!("c{i}");
        let ((s, b), v) = upsert(&mut rng, id, &color);
        match s {
            200 => {
                model.insert(id, (color, v));
            }
            507 => {
                full = Some(b);
                break;
            }
            other => panic!("a write on a full disk answered {other}: {b}"),
        }
    }
    let full = full.expect("2,000 upserts on a full 4 MiB disk never got 507");
    assert_eq!(full["error"]["code"], "insufficient_storage", "{full}");
    // Reads still answer (the writes acknowledged on the full disk are in the log; they
    // become visible once a refresh can write their segment).
    let (s, c) = json(port, "POST", "/collections/c/count", &serde_json::json!({}));
    assert_eq!(s, 200, "{c}");
    let (s, b) = json(
        port,
        "POST",
        "/collections/c/search",
        &serde_json::json!({"vector": rng.vector(), "k": 3}),
    );
    assert_eq!(s, 200, "{b}");
    // Space returns: writes resume.
    std::fs::remove_file(&ballast).unwrap();
    let mut resumed = false;
    for i in 0..100u64 {
        let id = 5000 + i;
        let ((s, b), v) = upsert(&mut rng, id, "after");
        if s == 200 {
            model.insert(id, ("after".into(), v));
            resumed = true;
            break;
        }
        assert_eq!(s, 507, "{b}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        resumed,
        "writes did not resume after the disk had room again"
    );
    let (s, b) = json(
        port,
        "POST",
        "/collections/c/docs",
        &serde_json::json!({"docs": [{"id": 7000, "vector": rng.vector(), "fields": {"color": "waited"}}], "wait": true}),
    );
    assert_eq!(s, 200, "{b}");
    model.insert(7000, ("waited".into(), vec![]));
    verify(port, &model, &[], "after the disk had room again");
    // Crash, copy the directory out of the tmpfs, and recover it elsewhere.
    let st = Command::new("kill")
        .args(["-9", &server.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let t = Instant::now();
    while Path::new(&format!("/proc/{server}/stat")).exists()
        && std::fs::read_to_string(format!("/proc/{server}/stat"))
            .map(|s| !s.contains(") Z"))
            .unwrap_or(false)
    {
        assert!(t.elapsed() < Duration::from_secs(10), "server did not die");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The holder's view of the same tmpfs (the server is gone, the sh holding it is not).
    let held =
        Path::new(&format!("/proc/{}/root", holder.id())).join(mnt.strip_prefix("/").unwrap());
    let after = d.path().join("after").join("c");
    copy_tree(&held.join("c"), &after);
    let _ = holder.kill();
    let _ = holder.wait();
    let (mut child, port) = serve(&after, &[]);
    verify(
        port,
        &model,
        &[],
        "after a SIGKILL that followed the full disk",
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A restart while the disk is still full: acknowledged writes only in the write-ahead log
/// (no refresh yet), a ballast file takes every free byte, SIGKILL, and the next `serve`
/// on the same full disk must come up (applying the log needs a segment write, which fails
/// with ENOSPC), serve every acknowledged write read-only (`/ready` 200) and refuse writes
/// with a reason that names the full disk. Before the fix, `serve` exited 2 and every read
/// was down until space returned.
#[test]
fn a_restart_on_a_full_disk_serves_every_acknowledged_write_read_only() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = Rng(31);
    let mut model = BTreeMap::new();
    let src = make_collection(d.path(), &mut rng, &mut model);
    let (port1, port2) = (free_port(), free_port());
    // The first server is killed by the test; the second starts on the disk the test filled.
    let serves = r#""$3" serve --collection "$1/c" --addr "127.0.0.1:$5" --threads 1 --refresh-ms 600000 --commit-ms 600000 &
echo $! > "$4"
wait
"$3" serve --collection "$1/c" --addr "127.0.0.1:$6" --threads 1 &
echo $! > "$4.2"
wait"#;
    let Some(mut holder) = on_tmpfs(
        "a_restart_on_a_full_disk_serves_every_acknowledged_write_read_only",
        d.path(),
        &src,
        serves,
        &[port1, port2],
    ) else {
        return;
    };
    if let Err(why) = ready_on_tmpfs(&mut holder, port1) {
        return skip_without_namespaces(
            "a_restart_on_a_full_disk_serves_every_acknowledged_write_read_only",
            &format!("no user+mount namespace with a tmpfs here ({why})"),
        );
    }
    let (server, inside) = tmpfs_of(d.path(), "server.pid");
    searchd_testkit::needs::ran(
        searchd_testkit::needs::Need::Namespaces,
        "a_restart_on_a_full_disk_serves_every_acknowledged_write_read_only",
    );
    // Acknowledged upserts and deletes, in the log only (refreshes are 10 minutes away).
    let mut gone = Vec::new();
    for i in 0..30u64 {
        if i % 5 == 4 {
            let id = i;
            let (s, b) = json(
                port1,
                "POST",
                "/collections/c/delete",
                &serde_json::json!({"ids": [id]}),
            );
            assert_eq!(s, 200, "{b}");
            model.remove(&id);
            gone.push(id);
        } else {
            let id = if i % 2 == 0 { i } else { 2000 + i };
            let color = format!("new{i}");
            let v = rng.vector();
            let body = serde_json::json!({"docs": [{"id": id, "text": format!("doc {id}"),
                "vector": v, "fields": {"color": color}}]});
            let (s, b) = json(port1, "POST", "/collections/c/docs", &body);
            assert_eq!(s, 200, "{b}");
            model.insert(id, (color, v));
        }
    }
    let wal_only = segment_dirs(&inside.join("c"));
    // Fill every free byte, then crash.
    fill_disk(&inside.join("ballast"));
    assert!(Command::new("kill")
        .args(["-9", &server.to_string()])
        .status()
        .unwrap()
        .success());
    // The second server, on the full disk.
    if let Err(why) = ready_on_tmpfs(&mut holder, port2) {
        panic!("serve did not come up on a full disk: {why}");
    }
    let (server2, inside2) = tmpfs_of(d.path(), "server.pid.2");
    let segs_after = segment_dirs(&inside2.join("c"));
    assert_eq!(
        segs_after, wal_only,
        "the writes were applied to the collection after all: the disk was not full"
    );
    verify(port2, &model, &gone, "a restart on a full disk");
    let (s, b) = json(
        port2,
        "POST",
        "/collections/c/docs",
        &serde_json::json!({"docs": [{"id": 9000, "vector": rng.vector()}]}),
    );
    assert_eq!(s, 409, "a write to the read-only collection: {b}");
    let msg = b.to_string();
    assert!(
        msg.contains("read-only") && msg.contains("disk was full"),
        "{b}"
    );
    let _ = Command::new("kill")
        .args(["-9", &server2.to_string()])
        .status();
    let _ = holder.kill();
    let _ = holder.wait();
}
