//! What every demo shares: the recall gate, step lines, the server-and-ramp stage and its
//! load configuration.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::flags::demo::DemoArgs;
use crate::util::CliError;

/// Recall@10 the demo's index must reach at the serving ef, or the demo fails.
pub(crate) const RECALL_GATE: f64 = 0.90;

/// The ef values the demo tries when `--ef` is not given, smallest first: it serves at the
/// first whose recall@10 passes [`RECALL_GATE`].
pub(crate) const AUTO_EFS: [usize; 3] = [64, 128, 256];

/// The recall gate's verdict: the ef served and its recall, and every ef tried.
pub(crate) struct Gate {
    /// The ef the server uses.
    pub ef: usize,
    /// Recall@10 at `ef`.
    pub recall: f64,
    /// Every (ef, recall@10) measured, in the order tried.
    pub tried: Vec<(usize, f64)>,
    /// Whether `ef` was chosen by the demo (no `--ef`).
    pub auto: bool,
}

impl Gate {
    /// Pick the ef: `--ef` when given, else the smallest of [`AUTO_EFS`] whose recall passes
    /// (`recall_at` measures one ef; measured lazily, in order).
    pub(crate) fn pick(
        explicit: Option<usize>,
        mut recall_at: impl FnMut(usize) -> Result<f64, CliError>,
    ) -> Result<Gate, CliError> {
        let candidates: Vec<usize> = match explicit {
            Some(ef) => vec![ef],
            None => AUTO_EFS.to_vec(),
        };
        let mut tried = Vec::new();
        for &ef in &candidates {
            let r = recall_at(ef)?;
            tried.push((ef, r));
            if r >= RECALL_GATE {
                break;
            }
        }
        let &(ef, recall) = tried.last().expect("at least one ef is tried");
        Ok(Gate {
            ef,
            recall,
            tried,
            auto: explicit.is_none(),
        })
    }

    /// Whether the served ef passes the gate.
    pub(crate) fn passed(&self) -> bool {
        self.recall >= RECALL_GATE
    }

    /// One line for the terminal and the report: the verdict, and on failure what to change.
    pub(crate) fn verdict(&self) -> String {
        let tried = self
            .tried
            .iter()
            .map(|(ef, r)| format!("{r:.4} at ef={ef}"))
            .collect::<Vec<_>>()
            .join(", ");
        if self.passed() {
            let how = if self.auto && self.tried.len() > 1 {
                format!(" (chosen: the smallest of {AUTO_EFS:?} that passes; recall@10 {tried})")
            } else if self.auto {
                " (the default)".to_string()
            } else {
                " (--ef)".to_string()
            };
            format!(
                "recall@10 {:.4} at ef={} passes the {RECALL_GATE} gate{how}",
                self.recall, self.ef
            )
        } else {
            let hint = if self.auto {
                "raise --ef-construction (the graph's quality) or give a larger --ef"
            } else {
                "give a larger --ef (or leave it out: the demo then tries 64, 128 and 256), or raise --ef-construction"
            };
            format!("RECALL GATE FAILED: recall@10 {tried}, below {RECALL_GATE}: {hint}")
        }
    }

    /// A failed gate: `doc` written to `json_path` with the gate in it (the report says what
    /// was measured and why the demo stopped), and the error to exit with.
    pub(crate) fn refuse(&self, json_path: &Path, mut doc: serde_json::Value) -> CliError {
        doc["recall_gate"] = self.json();
        if let Err(e) = crate::util::write_json(json_path, &doc) {
            return e;
        }
        CliError::Failed(format!(
            "{} (report: {})",
            self.verdict(),
            json_path.display()
        ))
    }

    /// The gate as JSON for `report.json`.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "threshold": RECALL_GATE,
            "k": 10,
            "ef": self.ef,
            "recall_at_10": self.recall,
            "passed": self.passed(),
            "auto_ef": self.auto,
            "tried": self.tried.iter().map(|(ef, r)| serde_json::json!({"ef": ef, "recall_at_10": r})).collect::<Vec<_>>(),
        })
    }

    /// The gate as an HTML section for `report.html`.
    pub(crate) fn html(&self, what: &str) -> String {
        let mut s = format!(
            "<h2>Recall gate</h2><p>{what}; gate recall@10 &ge; {RECALL_GATE} at the served ef: <b>{}</b>.</p>\
             <table class=\"t\"><tr><th>ef</th><th>recall@10</th><th></th></tr>",
            searchd_load::html::esc(&self.verdict())
        );
        for (ef, r) in &self.tried {
            s.push_str(&format!(
                "<tr><td>{ef}</td><td>{r:.4}</td><td>{}</td></tr>",
                if *ef == self.ef { "served" } else { "" }
            ));
        }
        s.push_str("</table>\n");
        s
    }
}

/// Print a stage line.
pub(crate) fn step(msg: &str) {
    eprintln!("==> {msg}");
}

/// An error about file or directory `p`.
pub(crate) fn dir_err(p: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Input(format!("{}: {e}", p.display()))
}

/// The demo's capacity ramp against `url`: the ramp, warm-up, step length, SLO and query
/// count of `a`; callers set what else they need (`gt`, `endpoint`, `text_queries`).
pub(crate) fn load_config(url: &str, a: &DemoArgs) -> Result<searchd_load::LoadConfig, CliError> {
    use searchd_load::config::{parse_duration, parse_ramp};
    let bad = |what: &str, e: String| CliError::Input(format!("demo load settings: {what}: {e}"));
    let mut c = searchd_load::LoadConfig::new(url);
    c.ramp = parse_ramp(&a.ramp).map_err(|e| bad("--ramp", e))?;
    c.warmup = parse_duration(&a.warmup).map_err(|e| bad("--warmup", e))?;
    c.duration = parse_duration(&a.duration).map_err(|e| bad("--duration", e))?;
    c.slo_p99_ms = a.slo_p99_ms;
    c.query_count = a.queries;
    Ok(c)
}

/// Steps 5 and 6 of a demo: serve `scfg` on a free loopback port in this process (on `rt`),
/// wait for `/ready`, ramp with the demo's load settings against the ground truth in
/// `gt_path`, stop the server and print the table. `about` ends the "listening" line.
pub(crate) fn serve_and_ramp(
    rt: &tokio::runtime::Runtime,
    scfg: searchd_server::ServerConfig,
    a: &DemoArgs,
    gt_path: &Path,
    about: &str,
) -> Result<searchd_load::Report, CliError> {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| CliError::Failed(format!("cannot bind a loopback port: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(searchd_server::serve(scfg, listener, async move {
        let _ = stop_rx.await;
    }));
    let url = format!("http://{addr}");
    wait_ready(addr, Duration::from_secs(120))?;
    eprintln!("    listening on {url}, ready{about}");

    step("6/6 capacity ramp: warm-up, rotating queries, stop at the SLO");
    let mut load_args = load_config(&url, a)?;
    load_args.gt = Some(gt_path.to_path_buf());
    let report = rt.block_on(searchd_load::run(&load_args));
    let _ = stop_tx.send(());
    let _ = rt.block_on(server);
    let report = report.map_err(|e| CliError::Failed(e.to_string()))?;

    println!();
    searchd_load::print_table(&report, &mut std::io::stdout().lock())
        .map_err(|e| CliError::Failed(e.to_string()))?;
    Ok(report)
}

/// Poll `GET /ready` until the in-process server answers 200 (it opens the index after it
/// binds), so the load lab's preflight never meets a 503 `not_ready`.
pub(crate) fn wait_ready(addr: std::net::SocketAddr, limit: Duration) -> Result<(), CliError> {
    use std::io::{Read, Write};
    let t = Instant::now();
    loop {
        let ok = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))
            .and_then(|mut s| {
                s.set_read_timeout(Some(Duration::from_secs(2)))?;
                s.write_all(b"GET /ready HTTP/1.1\r\nhost: demo\r\nconnection: close\r\n\r\n")?;
                let mut head = [0u8; 12];
                s.read_exact(&mut head)?;
                Ok(&head == b"HTTP/1.1 200")
            })
            .unwrap_or(false);
        if ok {
            return Ok(());
        }
        if t.elapsed() > limit {
            return Err(CliError::Failed(format!(
                "the demo server on {addr} was not ready after {}s",
                limit.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
