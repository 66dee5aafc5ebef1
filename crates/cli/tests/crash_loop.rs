//! The crash loop: a real `searchd serve` on a live collection takes a continuous stream of
//! upserts (batches of 1, 10 or 50 documents over an id space three times the collection,
//! each carrying a version) and deletes (20% of batches), with refreshes, merges, commits
//! and snapshots running, and is killed: with SIGKILL at random moments, and by each named
//! failpoint of the write path (`SEARCHD_FAILPOINTS`, `searchd_collection::failpoint`).
//! After every restart every acknowledged operation is checked: each upserted id holds its
//! last acknowledged version, each deleted id stays deleted, the count matches. The one
//! request in flight at the kill may have landed or not; its ids are accepted in either state.
//!
//! CI runs [`short`] (20 random kills + every failpoint once). The long run behind
//! `bench/crash_loop.sh` is [`long`] (ignored by default; `SEARCHD_CRASH_KILLS`,
//! `SEARCHD_CRASH_FAILPOINT_KILLS`, `SEARCHD_CRASH_DOCS`, `SEARCHD_CRASH_DIM`,
//! `SEARCHD_CRASH_OUT` for the JSON report).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use searchd_collection::failpoint::NAMES as FAILPOINTS;

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
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn vector(&mut self, dim: usize) -> Vec<f32> {
        (0..dim)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) + 1e-3)
            .collect()
    }
}

/// One HTTP/1.1 request on a fresh connection: (status, body), or the I/O error of a
/// server that died under it.
fn http(port: u16, method: &str, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
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
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, body))
}

fn dechunk(mut b: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = b.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        b = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// How one crash loop runs.
#[derive(Clone, Debug)]
struct Plan {
    docs: u64,
    dim: usize,
    random_kills: usize,
    /// Kills at each failpoint.
    failpoint_kills: usize,
    /// Random kill time after the server is ready, milliseconds.
    kill_ms: (u64, u64),
    /// Longest a failpoint run writes before it is killed anyway (the point was not reached).
    failpoint_timeout: Duration,
    flat_max: usize,
    seed: u64,
    /// Where the report is rewritten after every kill (a long run stopped early keeps
    /// what it measured).
    progress: Option<PathBuf>,
    /// Kills at these failpoints instead of `failpoint_kills` at each (a top-up run).
    only: Vec<(String, usize)>,
}

/// What every kill found.
#[derive(Debug, Default, serde::Serialize)]
struct Report {
    kills: usize,
    random_kills: usize,
    failpoint_kills: HashMap<String, usize>,
    /// Failpoint runs the process did not die in (the point was not reached in time).
    failpoint_missed: HashMap<String, usize>,
    acknowledged_ops: u64,
    acknowledged_upserts: u64,
    acknowledged_deletes: u64,
    refused_busy: u64,
    inflight_ops: u64,
    snapshots: u64,
    lost: u64,
    stale: u64,
    resurrected: u64,
    count_mismatches: u64,
    problems: Vec<String>,
    restart_ready_ms: Vec<u64>,
    seconds: f64,
}

/// id -> the acknowledged state: `Some(version)` upserted, `None` deleted.
type Model = HashMap<u64, Option<u64>>;

enum Change {
    Upsert(Vec<(u64, u64)>),
    Delete(Vec<u64>),
}

/// Start a server; `Err` with its exit status when it died before it was ready (a failpoint
/// in the start-up's replay or commit).
fn start(
    dir: &Path,
    plan: &Plan,
    fsync: &str,
    failpoint: Option<String>,
) -> Result<(Child, u16, u64), std::process::ExitStatus> {
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--collection"])
        .arg(dir)
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .args(["--threads", "1", "--refresh-ms", "50", "--commit-ms", "200"])
        .args(["--flat-max", &plan.flat_max.to_string(), "--fsync", fsync])
        .env_remove("SEARCHD_FAILPOINTS")
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.with_extension("log"))
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null()),
        );
    if let Some(fp) = failpoint {
        cmd.env("SEARCHD_FAILPOINTS", fp);
    }
    let mut child = cmd.spawn().unwrap();
    let t = Instant::now();
    loop {
        if let Ok((200, _)) = http(port, "GET", "/ready", "") {
            return Ok((child, port, t.elapsed().as_millis() as u64));
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(st);
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "server not ready after 120 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn make_collection(work: &Path, plan: &Plan, rng: &mut Rng, model: &mut Model) -> PathBuf {
    let docs = work.join("docs.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&docs).unwrap());
    for id in 0..plan.docs {
        let v = rng.vector(plan.dim);
        writeln!(
            f,
            "{}",
            serde_json::json!({"id": id, "text": format!("doc {id}"), "v": 0, "vector": v})
        )
        .unwrap();
        model.insert(id, Some(0));
    }
    drop(f);
    let out = work.join("c");
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

/// Read every id the model knows (and the in-flight change's) and compare. `Err`: the
/// server died while it was read (a failpoint in a background step); nothing was compared.
fn verify(
    port: u16,
    model: &mut Model,
    inflight: Option<&Change>,
    r: &mut Report,
    at: &str,
) -> std::io::Result<()> {
    let mut ids: Vec<u64> = model.keys().copied().collect();
    if let Some(c) = inflight {
        match c {
            Change::Upsert(d) => ids.extend(d.iter().map(|x| x.0)),
            Change::Delete(d) => ids.extend(d),
        }
    }
    ids.sort_unstable();
    ids.dedup();
    let mut got: HashMap<u64, Option<u64>> = HashMap::new();
    for chunk in ids.chunks(500) {
        let body =
            serde_json::json!({ "ids": chunk.iter().map(|i| i.to_string()).collect::<Vec<_>>() });
        let (s, b) = http(port, "POST", "/c/_mget", &body.to_string())?;
        assert_eq!(s, 200, "{at}: _mget: {b}");
        let v: serde_json::Value = serde_json::from_str(&b).unwrap();
        for d in v["docs"].as_array().unwrap() {
            let id: u64 = d["_id"].as_str().unwrap().parse().unwrap();
            let state = if d["found"] == true {
                Some(d["_source"]["v"].as_u64().unwrap_or(u64::MAX))
            } else {
                None
            };
            got.insert(id, state);
        }
    }
    let (s, b) = http(port, "POST", "/collections/c/count", "{}")?;
    assert_eq!(s, 200, "{at}: count: {b}");
    let count: serde_json::Value = serde_json::from_str(&b).unwrap();
    // The change in flight at the kill: each of its ids in its old or its new state.
    if let Some(c) = inflight {
        let new: Vec<(u64, Option<u64>)> = match c {
            Change::Upsert(d) => d.iter().map(|&(i, v)| (i, Some(v))).collect(),
            Change::Delete(ids) => ids.iter().map(|&i| (i, None)).collect(),
        };
        for (id, state) in new {
            if got.get(&id) == Some(&state) {
                model.insert(id, state);
            }
        }
    }
    let mut live = 0u64;
    for id in ids {
        let Some(&want) = model.get(&id) else {
            // An id only the unacknowledged change wrote, and it did not land.
            if let Some(h) = got.get(&id).copied().flatten() {
                r.resurrected += 1;
                r.problems
                    .push(format!("{at}: id {id} was never acknowledged, has {h}"));
            }
            continue;
        };
        let have = got.get(&id).copied().flatten();
        live += want.is_some() as u64;
        let kind = match (want, have) {
            (Some(w), Some(h)) if w == h => continue,
            (None, None) => continue,
            (Some(_), None) => {
                r.lost += 1;
                "lost"
            }
            (Some(_), Some(_)) => {
                r.stale += 1;
                "stale"
            }
            (None, Some(_)) => {
                r.resurrected += 1;
                "resurrected"
            }
        };
        if r.problems.len() < 50 {
            r.problems.push(format!(
                "{at}: id {id} {kind}: want {want:?}, have {have:?}"
            ));
        }
    }
    if count["count"].as_u64() != Some(live) {
        r.count_mismatches += 1;
        if r.problems.len() < 50 {
            r.problems.push(format!(
                "{at}: count {} but {live} acknowledged",
                count["count"]
            ));
        }
    }
    Ok(())
}

fn run(plan: &Plan) -> Report {
    let work = tempfile::tempdir().unwrap();
    let mut rng = Rng(plan.seed | 1);
    let mut model: Model = HashMap::new();
    let dir = make_collection(work.path(), plan, &mut rng, &mut model);
    let id_space = plan.docs * 3;
    let mut version = 0u64;
    let mut r = Report::default();
    let t0 = Instant::now();
    // The kill schedule: random kills and failpoint kills interleaved.
    let mut schedule: Vec<Option<&str>> = vec![None; plan.random_kills];
    for fp in FAILPOINTS {
        let n = if plan.only.is_empty() {
            plan.failpoint_kills
        } else {
            plan.only
                .iter()
                .find(|(name, _)| name == fp)
                .map_or(0, |x| x.1)
        };
        for _ in 0..n {
            schedule.push(Some(fp));
        }
    }
    for i in (1..schedule.len()).rev() {
        schedule.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut inflight: Option<Change> = None;
    // A top-up run (`only`) runs each named point again until it was reached its number of
    // times (at most 4x as many attempts): points a run does not always pass (a snapshot
    // step, start-up's replay) still get their kills.
    let target = |name: &str| plan.only.iter().find(|(n, _)| n == name).map_or(0, |x| x.1);
    let mut attempts: HashMap<&str, usize> = HashMap::new();
    let mut queue: std::collections::VecDeque<Option<&str>> = schedule.into();
    let mut prev: Option<&str> = None;
    let mut k = 0usize;
    loop {
        if let Some(name) = prev.take().filter(|_| !plan.only.is_empty()) {
            let a = attempts.entry(name).or_default();
            *a += 1;
            let got = r.failpoint_kills.get(name).copied().unwrap_or(0);
            let queued = queue.iter().filter(|x| **x == Some(name)).count();
            if got + queued < target(name) && *a < 4 * target(name) {
                queue.push_back(Some(name));
            }
        }
        let Some(this) = queue.pop_front() else {
            break;
        };
        prev = this;
        let fp = &this;
        k += 1;
        let fsync = ["none", "group", "always"][k % 3];
        // Failpoints armed at their 1st-4th pass, so some land mid-stream.
        // Start-up's replay passes its failpoint once per process: armed at the first pass.
        let once = |name: &str| name == "open.after_replay";
        let arm = fp.map(|name| {
            let n = if once(name) { 1 } else { 1 + rng.below(4) };
            format!("{name}@{n}")
        });
        let (mut child, port, ready_ms) = match start(&dir, plan, fsync, arm) {
            Ok(x) => x,
            Err(status) => {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(
                    status.signal(),
                    Some(6),
                    "the server exited at start without a failpoint: {status} (log: {})",
                    dir.with_extension("log").display()
                );
                record_kill(&mut r, *fp, status, false);
                continue;
            }
        };
        r.restart_ready_ms.push(ready_ms);
        if verify(
            port,
            &mut model,
            inflight.as_ref(),
            &mut r,
            &format!("restart {k}"),
        )
        .is_err()
        {
            // A failpoint in a step the start-up left to the background (a merge, a
            // commit) killed it while it was read: a kill like any other; the change in
            // flight is still unresolved.
            let status = child.wait().unwrap();
            record_kill(&mut r, *fp, status, false);
            continue;
        }
        inflight = None;
        // A random kill from another thread; a failpoint kills the process itself (or, if
        // it is not reached in time, this thread does).
        let dead = Arc::new(AtomicBool::new(false));
        let pid = child.id();
        let killer = {
            let dead = dead.clone();
            let wait = match fp {
                None => Duration::from_millis(
                    plan.kill_ms.0 + rng.below(plan.kill_ms.1 - plan.kill_ms.0),
                ),
                // The process came up: start-up's point was not on its path this time.
                Some(name) if once(name) => Duration::from_millis(
                    plan.kill_ms.0 + rng.below(plan.kill_ms.1 - plan.kill_ms.0),
                ),
                Some(_) => plan.failpoint_timeout,
            };
            std::thread::spawn(move || {
                let until = Instant::now() + wait;
                while Instant::now() < until && !dead.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                if !dead.load(Ordering::SeqCst) {
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                    true
                } else {
                    false
                }
            })
        };
        loop {
            let roll = rng.unit();
            if rng.below(40) == 0 {
                // A pause past the commit interval: a commit of an idle log rotates it
                // (the path of `wal.after_rotate`).
                std::thread::sleep(Duration::from_millis(300));
            }
            if roll < 0.01 {
                let out = work.path().join(format!("snap-{k}-{}", rng.next()));
                let body = serde_json::json!({"path": out}).to_string();
                match http(port, "POST", "/collections/c/snapshot", &body) {
                    Ok((200, _)) => {
                        r.snapshots += 1;
                        let _ = std::fs::remove_dir_all(&out);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
                continue;
            }
            let batch = [1u64, 10, 50][rng.below(3) as usize];
            let (path, body, change) = if roll < 0.21 {
                let ids: Vec<u64> = (0..batch).map(|_| rng.below(id_space)).collect();
                let body = serde_json::json!({"ids": ids, "wait": rng.below(5) == 0});
                ("/collections/c/delete", body, Change::Delete(ids))
            } else {
                let mut docs = Vec::new();
                let mut ch = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for _ in 0..batch {
                    let id = rng.below(id_space);
                    if !seen.insert(id) {
                        continue;
                    }
                    version += 1;
                    docs.push(
                        serde_json::json!({"id": id, "text": format!("doc {id} v{version}"),
                        "vector": rng.vector(plan.dim), "fields": {"v": version}}),
                    );
                    ch.push((id, version));
                }
                let body = serde_json::json!({"docs": docs, "wait": rng.below(5) == 0});
                ("/collections/c/docs", body, Change::Upsert(ch))
            };
            match http(port, "POST", path, &body.to_string()) {
                Ok((200, b)) => {
                    r.acknowledged_ops += 1;
                    match change {
                        Change::Upsert(d) => {
                            r.acknowledged_upserts += d.len() as u64;
                            for (id, v) in d {
                                model.insert(id, Some(v));
                            }
                        }
                        Change::Delete(ids) => {
                            let v: serde_json::Value = serde_json::from_str(&b).unwrap();
                            let not_found: Vec<u64> = v["not_found"]
                                .as_array()
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|x| {
                                            x.as_u64().or_else(|| x.as_str()?.parse().ok())
                                        })
                                        .collect()
                                })
                                .unwrap_or_default();
                            for id in ids {
                                let was = model.get(&id).copied().flatten();
                                // A delete that reports an acknowledged document as not
                                // found has lost it (or will resurrect it).
                                if not_found.contains(&id) && was.is_some() {
                                    r.lost += 1;
                                    r.problems.push(format!(
                                        "kill {k}: delete said id {id} is not found, it holds version {was:?}"
                                    ));
                                }
                                if was.is_some() || model.contains_key(&id) {
                                    model.insert(id, None);
                                } else if !not_found.contains(&id) {
                                    r.resurrected += 1;
                                    r.problems.push(format!(
                                        "kill {k}: delete found id {id}, which was never written or is deleted"
                                    ));
                                }
                                r.acknowledged_deletes += 1;
                            }
                        }
                    }
                }
                Ok((503, b)) if b.contains("held back") => {
                    // Write backpressure: refused before the log, not applied.
                    r.refused_busy += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok((s, b)) => {
                    // Not acknowledged: it may have been logged (a 5xx after the append).
                    r.inflight_ops += 1;
                    r.problems
                        .push(format!("kill {k}: write answered {s}: {b}"));
                    inflight = Some(change);
                    break;
                }
                Err(_) => {
                    // The server died with this one in flight.
                    r.inflight_ops += 1;
                    inflight = Some(change);
                    break;
                }
            }
        }
        dead.store(true, Ordering::SeqCst);
        let _ = child.kill();
        let status = child.wait().unwrap();
        let killed_by_us = killer.join().unwrap();
        record_kill(&mut r, *fp, status, killed_by_us);
        if let Some(p) = &plan.progress {
            r.seconds = t0.elapsed().as_secs_f64();
            write_report(p, plan, &r, false);
        }
    }
    let (mut child, port, _) = start(&dir, plan, "none", None).unwrap_or_else(|st| {
        panic!(
            "the server exited at start: {st} (log: {})",
            dir.with_extension("log").display()
        )
    });
    verify(port, &mut model, inflight.as_ref(), &mut r, "final").unwrap();
    let _ = child.kill();
    let _ = child.wait();
    r.seconds = t0.elapsed().as_secs_f64();
    r
}

fn record_kill(
    r: &mut Report,
    fp: Option<&str>,
    status: std::process::ExitStatus,
    killed_by_us: bool,
) {
    r.kills += 1;
    match fp {
        None => r.random_kills += 1,
        Some(name) => {
            // SIGABRT from the failpoint (6), not our SIGKILL (9).
            use std::os::unix::process::ExitStatusExt;
            if status.signal() == Some(6) && !killed_by_us {
                *r.failpoint_kills.entry(name.to_string()).or_default() += 1;
            } else {
                *r.failpoint_missed.entry(name.to_string()).or_default() += 1;
            }
        }
    }
}

fn check(r: &Report) {
    eprintln!(
        "crash loop: {} kills ({} random), {} acknowledged ops ({} upserted docs, {} deletes), {} refused busy, {} in flight, {} snapshots, {:.0} s; failpoints {:?}, missed {:?}",
        r.kills,
        r.random_kills,
        r.acknowledged_ops,
        r.acknowledged_upserts,
        r.acknowledged_deletes,
        r.refused_busy,
        r.inflight_ops,
        r.snapshots,
        r.seconds,
        r.failpoint_kills,
        r.failpoint_missed
    );
    assert!(
        r.lost == 0 && r.stale == 0 && r.resurrected == 0 && r.count_mismatches == 0,
        "{} lost, {} stale, {} resurrected, {} count mismatches: {:#?}",
        r.lost,
        r.stale,
        r.resurrected,
        r.count_mismatches,
        r.problems
    );
    assert!(r.acknowledged_ops > 0, "no write was acknowledged");
}

#[test]
fn short() {
    let plan = Plan {
        docs: 2_000,
        dim: 16,
        random_kills: 20,
        failpoint_kills: 1,
        kill_ms: (100, 1_200),
        failpoint_timeout: Duration::from_secs(20),
        flat_max: 300,
        seed: 0x5eed_c0de,
        progress: None,
        only: Vec::new(),
    };
    let mut r = run(&plan);
    // A failpoint not reached in its run gets further runs until it is (a snapshot step
    // needs a snapshot request, a merge step a merge): every point is killed at least once.
    for _ in 0..3 {
        let missed: Vec<&str> = FAILPOINTS
            .iter()
            .copied()
            .filter(|n| !r.failpoint_kills.contains_key(*n))
            .collect();
        if missed.is_empty() {
            break;
        }
        eprintln!("failpoints not reached yet: {missed:?}; running them again");
        let again = run(&Plan {
            random_kills: 0,
            seed: plan.seed.wrapping_add(r.kills as u64),
            ..plan.clone()
        });
        merge_reports(&mut r, again);
    }
    check(&r);
    for n in FAILPOINTS {
        assert!(
            r.failpoint_kills.get(*n).copied().unwrap_or(0) >= 1,
            "failpoint {n} was never reached: {:?}",
            r.failpoint_missed
        );
    }
}

fn merge_reports(a: &mut Report, b: Report) {
    a.kills += b.kills;
    a.random_kills += b.random_kills;
    for (k, v) in b.failpoint_kills {
        *a.failpoint_kills.entry(k).or_default() += v;
    }
    for (k, v) in b.failpoint_missed {
        *a.failpoint_missed.entry(k).or_default() += v;
    }
    a.acknowledged_ops += b.acknowledged_ops;
    a.acknowledged_upserts += b.acknowledged_upserts;
    a.acknowledged_deletes += b.acknowledged_deletes;
    a.refused_busy += b.refused_busy;
    a.inflight_ops += b.inflight_ops;
    a.snapshots += b.snapshots;
    a.lost += b.lost;
    a.stale += b.stale;
    a.resurrected += b.resurrected;
    a.count_mismatches += b.count_mismatches;
    a.problems.extend(b.problems);
    a.restart_ready_ms.extend(b.restart_ready_ms);
    a.seconds += b.seconds;
}

fn write_report(out: &Path, plan: &Plan, r: &Report, finished: bool) {
    let mut v = serde_json::to_value(r).unwrap();
    v["schema"] = "searchd.bench.crash-loop.v2".into();
    v["finished"] = finished.into();
    v["plan"] = serde_json::json!({
        "docs": plan.docs, "dim": plan.dim, "random_kills": plan.random_kills,
        "failpoint_kills": plan.failpoint_kills, "kill_ms": [plan.kill_ms.0, plan.kill_ms.1],
        "failpoint_timeout_s": plan.failpoint_timeout.as_secs(),
        "flat_max": plan.flat_max, "seed": plan.seed, "failpoints": FAILPOINTS, "only": plan.only,
        "batches": [1, 10, 50], "delete_share": 0.2, "id_space": plan.docs * 3,
        "binary": bin(),
    });
    v["passed"] =
        (r.lost == 0 && r.stale == 0 && r.resurrected == 0 && r.count_mismatches == 0).into();
    std::fs::write(out, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The long run (`bench/crash_loop.sh`): the shape, 20,000 x 384 by default.
#[test]
#[ignore]
fn long() {
    let plan = Plan {
        docs: env_or("SEARCHD_CRASH_DOCS", 20_000),
        dim: env_or("SEARCHD_CRASH_DIM", 384),
        random_kills: env_or("SEARCHD_CRASH_KILLS", 500),
        failpoint_kills: env_or("SEARCHD_CRASH_FAILPOINT_KILLS", 20),
        kill_ms: (300, 2_500),
        failpoint_timeout: Duration::from_secs(env_or("SEARCHD_CRASH_FAILPOINT_TIMEOUT_S", 10)),
        flat_max: env_or("SEARCHD_CRASH_FLAT_MAX", 1_000),
        seed: env_or("SEARCHD_CRASH_SEED", 0x5eed_0001),
        progress: std::env::var_os("SEARCHD_CRASH_OUT").map(PathBuf::from),
        // `SEARCHD_CRASH_ONLY=NAME:N,...`: a top-up run at the failpoints named.
        only: std::env::var("SEARCHD_CRASH_ONLY")
            .unwrap_or_default()
            .split(',')
            .filter_map(|x| {
                let (n, k) = x.split_once(':')?;
                Some((n.to_string(), k.parse().ok()?))
            })
            .collect(),
    };
    let r = run(&plan);
    if let Some(out) = &plan.progress {
        write_report(out, &plan, &r, true);
    }
    check(&r);
}
