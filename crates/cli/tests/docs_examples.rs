//! Every ```` ```sh ```` / ```` ```bash ```` block of README.md and docs/*.md, run against the
//! real `searchd` (this package's binary), so the examples cannot rot.
//!
//! Each page's blocks run in order in one `bash` session (`set -Eeuo pipefail`) in a fresh
//! temporary directory, bounded by [`PAGE_TIMEOUT`]; every process the page starts (servers
//! started with `&`, Qdrant) is in the session's process group, which is killed when the page
//! ends, also on failure or timeout. The session's prelude stands in for what a reader has:
//!
//! * `target/release/searchd` and `searchd` on `PATH` (this test's binary), `B` and `M`
//!   (the README's variables: the binary and the model directory, `SEARCHD_TEST_MODEL`);
//!   `cargo` accepts `build --release` (a no-op) and `run --release -- ARGS` (the binary)
//!   and refuses anything else; `.ci/model.sh` writes `.ci/.model-dir` from
//!   `SEARCHD_TEST_MODEL` (the real script, which CI has already run, installs it);
//! * `searchd load` and `searchd demo` get short steps (`--ramp 1,2 --warmup 200ms
//!   --duration 500ms`), a p99 SLO of 10 s (a debug build on a busy machine) and the demo
//!   `--n 100 --queries 50`; `eval --index` and `bench memory` short timed passes
//!   (`--min-seconds`); each unless the example gives it: the examples are
//!   checked to work, not to measure;
//! * the port: every `8080` in a block becomes a free port (`SEARCHD_ADDR` too, so a
//!   `serve` without `--addr` listens there);
//! * `curl` wraps the real curl: each call's status is recorded; a status >= 400 fails the
//!   block unless the call uses `-f` (the example handles it) or declares it; a reply that
//!   says `application/json` must be JSON.
//!
//! Annotations, readable in the page:
//!
//! * `# -> 200 {"count": 2}` after a command (at the end of its last line, or on the comment
//!   line right after it): its curl call must answer that status and a JSON body of which
//!   the given JSON is a subset (objects: the given keys, recursively; arrays: the first
//!   elements). Text after the JSON is free.
//! * HTML comments before a block, each `<!-- docs-test: ... -->`:
//!   `skip: REASON` (the block is not run), ``skip-line `TEXT`: REASON`` (the commands
//!   containing TEXT are not run), ``replace `FROM` => `TO` `` (literal text replaced before
//!   running, e.g. a placeholder path), `setup` followed by lines of shell run before the
//!   block (files the page assumes the reader has). Every skip is printed and counted; an
//!   annotation that matches nothing fails.
//!
//! A block that uses the model (`$M`, `--model`) needs `SEARCHD_TEST_MODEL`, one that mentions
//! Qdrant needs `QDRANT_BIN` (`searchd_testkit::needs`: skipped with a `skipped:` line in a
//! user's clone, a failure under `CI=true`); the page's later blocks are then skipped too.
//! Each block run appends `docs-examples PAGE#N` to the ledger (`SEARCHD_TEST_LEDGER`).

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use searchd_testkit::needs::{self, Need};
use serde_json::Value;

const TEST: &str = "docs_examples";
const PAGE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
enum Directive {
    Skip(String),
    SkipLine { text: String, reason: String },
    Replace { from: String, to: String },
    Setup(String),
}

#[derive(Debug)]
struct Block {
    /// `README.md#3`: the page and the block's number among its shell blocks.
    name: String,
    /// Line of the opening fence (1-based).
    line: usize,
    /// Lines between the fences.
    body: Vec<String>,
    directives: Vec<Directive>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The text between the first pair of backticks in `s`, and what follows it.
fn backticked(s: &str) -> Option<(String, &str)> {
    let start = s.find('`')? + 1;
    let len = s[start..].find('`')?;
    Some((s[start..start + len].to_string(), &s[start + len + 1..]))
}

fn parse_directive(page: &str, line: usize, text: &str) -> Directive {
    let msg = format!("{page}:{line}: cannot read the annotation `docs-test: {text}`");
    let bad = || -> ! { panic!("{msg}") };
    let text = text.trim();
    if let Some(rest) = text.strip_prefix("skip-line") {
        let (t, rest) = backticked(rest).unwrap_or_else(|| bad());
        let reason = rest.trim().trim_start_matches(':').trim().to_string();
        if reason.is_empty() {
            bad();
        }
        Directive::SkipLine { text: t, reason }
    } else if let Some(rest) = text.strip_prefix("skip:") {
        Directive::Skip(rest.trim().to_string())
    } else if let Some(rest) = text.strip_prefix("replace") {
        let (from, rest) = backticked(rest).unwrap_or_else(|| bad());
        let rest = rest.trim().strip_prefix("=>").unwrap_or_else(|| bad());
        let (to, _) = backticked(rest).unwrap_or_else(|| bad());
        Directive::Replace { from, to }
    } else if let Some(rest) = text.strip_prefix("setup") {
        Directive::Setup(rest.trim_start_matches(':').to_string())
    } else {
        bad()
    }
}

/// The page's shell blocks with the annotations before each.
fn blocks_of(page: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut pending = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        if let Some(rest) = l.strip_prefix("<!-- docs-test:") {
            let start = i + 1;
            let mut body = rest.to_string();
            while !body.contains("-->") {
                i += 1;
                assert!(
                    i < lines.len(),
                    "{page}:{start}: unterminated docs-test comment"
                );
                body.push('\n');
                body.push_str(lines[i]);
            }
            let body = &body[..body.find("-->").unwrap()];
            pending.push(parse_directive(page, start, body));
        } else if l.starts_with("```") {
            let info = l.trim_start_matches('`').trim();
            let start = i + 1;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push(lines[i].to_string());
                i += 1;
            }
            if info == "sh" || info == "bash" {
                out.push(Block {
                    name: format!("{page}#{}", out.len() + 1),
                    line: start,
                    body,
                    directives: std::mem::take(&mut pending),
                });
            } else {
                assert!(
                    pending.is_empty(),
                    "{page}:{start}: docs-test annotation before a ```{info} block"
                );
            }
        }
        i += 1;
    }
    assert!(
        pending.is_empty(),
        "{page}: docs-test annotation after the last block"
    );
    out
}

/// One shell command of a block: its lines (0-based, inclusive) and its `# ->` expectation.
#[derive(Debug)]
struct Cmd {
    first: usize,
    last: usize,
    expect: Option<String>,
}

/// Splits shell text into commands: a command goes on over lines ending in `\`, `|`, `&&`,
/// `||`, inside quotes and inside a here-document. Comment-only lines belong to no command;
/// a comment `# -> ...` on a command's line or right after it is its expectation.
fn commands(lines: &[String]) -> Vec<Cmd> {
    let mut out: Vec<Cmd> = Vec::new();
    let mut cur: Option<Cmd> = None;
    let (mut single, mut double) = (false, false);
    let mut heredoc: Option<String> = None;
    let mut continued = false;
    let mut last_ended: Option<usize> = None; // index in `out` of the command just ended
    for (n, line) in lines.iter().enumerate() {
        if let Some(tag) = &heredoc {
            if line.trim() == tag {
                heredoc = None;
                if let Some(mut c) = cur.take() {
                    c.last = n;
                    out.push(c);
                    last_ended = Some(out.len() - 1);
                }
            }
            continue;
        }
        let in_cmd = single || double || continued;
        let chars: Vec<char> = line.chars().collect();
        let mut code = String::new();
        let mut comment: Option<String> = None;
        let mut pending_tag: Option<String> = None;
        let mut k = 0;
        while k < chars.len() {
            let c = chars[k];
            if single {
                single = c != '\'';
            } else if double {
                if c == '\\' {
                    k += 1;
                } else if c == '"' {
                    double = false;
                }
            } else if c == '\'' {
                single = true;
            } else if c == '"' {
                double = true;
            } else if c == '\\' {
                if k + 1 == chars.len() {
                    code.push(c);
                }
                k += 1;
                k += 1;
                continue;
            } else if c == '#' && (k == 0 || chars[k - 1].is_whitespace() || chars[k - 1] == ';') {
                comment = Some(chars[k + 1..].iter().collect());
                break;
            } else if c == '<' && chars.get(k + 1) == Some(&'<') && chars.get(k + 2) != Some(&'<') {
                let rest: String = chars[k + 2..].iter().collect();
                let rest = rest.trim_start_matches('-').trim_start();
                let tag: String = rest
                    .trim_start_matches(['\'', '"'])
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !tag.is_empty() {
                    pending_tag = Some(tag);
                }
            }
            code.push(c);
            k += 1;
        }
        let has_code = !code.trim().is_empty();
        if !in_cmd && has_code {
            cur = Some(Cmd {
                first: n,
                last: n,
                expect: None,
            });
        }
        let expect = comment
            .as_deref()
            .and_then(|c| c.trim().strip_prefix("->"))
            .map(|s| s.trim().to_string());
        if let Some(e) = expect {
            match (&mut cur, has_code || in_cmd) {
                (Some(c), true) => c.expect = Some(e),
                _ => match last_ended {
                    Some(i) if out[i].expect.is_none() => out[i].expect = Some(e),
                    _ => panic!("`# -> {e}` follows no command"),
                },
            }
        }
        let t = code.trim_end();
        continued =
            !single && !double && (t.ends_with('\\') || t.ends_with('|') || t.ends_with("&&"));
        if pending_tag.is_some() && !single && !double {
            heredoc = pending_tag;
            continue;
        }
        if !single && !double && !continued {
            if let Some(mut c) = cur.take() {
                c.last = n;
                out.push(c);
                last_ended = Some(out.len() - 1);
            } else if has_code {
                last_ended = None;
            }
        }
    }
    if let Some(mut c) = cur.take() {
        c.last = lines.len().saturating_sub(1);
        out.push(c);
    }
    out
}

/// Shell-quoted for bash (single quotes).
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

const PRELUDE: &str = r#"set -Eeuo pipefail
__DOCS_AT=prelude
__DOCS_EXPECT=
if [ -n "${DOCS_EXAMPLES_LOG:-}" ]; then PS4='+ $(date +%T.%3N) '; set -x; fi
trap 'echo "docs-test: FAILED at $__DOCS_AT (exit $?): $BASH_COMMAND" >&2' ERR
mkdir -p target/release .ci "$DOCS_META/bin"
cat > "$DOCS_META/bin/searchd" <<EOF
#!/usr/bin/env bash
# The test's searchd; load, demo, eval and bench memory get short runs unless the example gives them.
real=$DOCS_SEARCHD
has() { local f; for f in "\${@:2}"; do for a in \$1; do case "\$f" in "\$a"|"\$a="*) return 0;; esac; done; done; return 1; }
case "\${1:-}" in
    load) shift; x=()
        has "--ramp --rate --rate-ramp -c --concurrency" "\$@" || x+=(--ramp 1,2)
        has "--warmup" "\$@" || x+=(--warmup 200ms)
        has "--duration -z -d" "\$@" || x+=(--duration 500ms)
        has "--slo-p99-ms" "\$@" || x+=(--slo-p99-ms 10000)
        exec "\$real" load "\${x[@]}" "\$@" ;;
    demo) shift; x=()
        has "--n" "\$@" || x+=(--n 100)
        has "--queries" "\$@" || x+=(--queries 50)
        has "--ramp" "\$@" || x+=(--ramp 1,2)
        has "--warmup" "\$@" || x+=(--warmup 200ms)
        has "--duration" "\$@" || x+=(--duration 500ms)
        has "--slo-p99-ms" "\$@" || x+=(--slo-p99-ms 10000)
        exec "\$real" demo "\${x[@]}" "\$@" ;;
    eval) shift; x=()
        has "--index" "\$@" && ! has "--min-seconds" "\$@" && x+=(--min-seconds 0.1)
        exec "\$real" eval "\${x[@]}" "\$@" ;;
    bench) if [ "\${2:-}" = memory ]; then shift 2; x=()
            has "--min-seconds" "\$@" || x+=(--min-seconds 0.2)
            # Without a memory cgroup (optional in CI, as Need::Cgroup) it is a counted skip.
            rc=0; "\$real" bench memory "\${x[@]}" "\$@" 2> "$DOCS_META/bench-memory.err" || rc=\$?
            cat "$DOCS_META/bench-memory.err" >&2
            if [ \$rc -ne 0 ] && grep -q 'memory cgroup' "$DOCS_META/bench-memory.err"; then
                echo "searchd bench memory: needs a memory cgroup this user may create" >> "$DOCS_META/skipped"
                exit 0
            fi
            exit \$rc
        fi
        exec "\$real" "\$@" ;;
    *) exec "\$real" "\$@" ;;
esac
EOF
chmod +x "$DOCS_META/bin/searchd"
ln -s "$DOCS_META/bin/searchd" target/release/searchd
export PATH="$DOCS_META/bin:$PATH"
export SEARCHD_ADDR="127.0.0.1:$DOCS_PORT"
B=target/release/searchd
M="${SEARCHD_TEST_MODEL:-}"
cat > .ci/model.sh <<'EOF'
# Stands for the repository's .ci/model.sh, which CI has already run: the model directory.
printf '%s\n' "${SEARCHD_TEST_MODEL:?the docs test has no model}" > "$(dirname "$0")/.model-dir"
EOF
cargo() {
    case "$*" in
        "build --release") return 0 ;;
        "run --release -- "*) shift 3; target/release/searchd "$@" ;;
        *) echo "docs-test: 'cargo $*' is not run by the docs test; annotate the block" >&2; return 97 ;;
    esac
}
__docs_has_f() {
    local a
    for a in "$@"; do case "$a" in --fail|--fail-with-body) return 0;; --*) ;; -*f*) return 0;; esac; done
    return 1
}
__docs_stop_jobs() {
    local p
    for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
    wait || true
}
curl() {
    local n d st want="" rc=0
    n=$(( $(cat "$DOCS_META/calls/.n" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$DOCS_META/calls/.n"
    d="$DOCS_META/calls/$(printf %05d "$n")"
    mkdir -p "$d"
    printf '%s\n' "$__DOCS_AT" > "$d/at"
    printf '%s\n' "curl $*" > "$d/args"
    if [ -n "$__DOCS_EXPECT" ]; then
        cp "$DOCS_META/expect/$__DOCS_EXPECT" "$d/expect"
        touch "$DOCS_META/expect/$__DOCS_EXPECT.used"
        read -r want _ < "$d/expect" || true
    fi
    command curl "$@" -D "$d/headers" -o "$d/body" -w '%{http_code}\n%{content_type}\n' > "$d/meta" || rc=$?
    echo "$rc" > "$d/rc"
    if [ -f "$d/body" ]; then cat "$d/body"; fi
    st=$(head -n1 "$d/meta" 2>/dev/null || true)
    if [ -n "$st" ] && [ "$st" != 000 ]; then
        if { [ -n "$want" ] && [ "$st" != "$want" ]; } || { [ -z "$want" ] && [ "$st" -ge 400 ] && ! __docs_has_f "$@"; }; then
            echo "docs-test: $__DOCS_AT: HTTP $st (expected ${want:-below 400}) from curl $*" >&2
            head -c 2000 "$d/body" >&2 2>/dev/null || true
            echo >&2
            touch "$DOCS_META/failed"
            return 1
        fi
    fi
    return $rc
}
"#;

/// A page's script: the prelude, then each block's setup and commands.
struct Script {
    text: String,
    expects: Vec<String>,
    /// (block name, skip reason) for every command or block skipped by an annotation.
    skipped: Vec<(String, String)>,
    blocks: Vec<String>,
}

/// Whether an executable `name` is on `PATH`.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

fn needs_of(text: &str) -> Vec<Need> {
    let mut n = Vec::new();
    if text.contains("$M") || text.contains("--model") {
        n.push(Need::Model);
    }
    if text.to_lowercase().contains("qdrant") {
        n.push(Need::Qdrant);
    }
    n
}

fn have(need: Need) -> bool {
    match need {
        Need::Model => std::env::var_os("SEARCHD_TEST_MODEL").is_some_and(|v| !v.is_empty()),
        Need::Qdrant => std::env::var_os("QDRANT_BIN").is_some_and(|v| !v.is_empty()),
        _ => true,
    }
}

fn script(page: &str, blocks: &[Block], port: u16) -> Script {
    let mut s = Script {
        text: PRELUDE.to_string(),
        expects: Vec::new(),
        skipped: Vec::new(),
        blocks: Vec::new(),
    };
    let mut missing: Option<String> = None;
    for b in blocks {
        let mut body = b.body.join("\n");
        let mut setup = String::new();
        let mut skip = None;
        let mut skip_lines = Vec::new();
        for d in &b.directives {
            match d {
                Directive::Skip(r) => skip = Some(r.clone()),
                Directive::SkipLine { text, reason } => skip_lines.push((text, reason, false)),
                Directive::Replace { from, to } => {
                    assert!(
                        body.contains(from.as_str()),
                        "{}: `replace {from}` matches nothing",
                        b.name
                    );
                    body = body.replace(from.as_str(), to);
                }
                Directive::Setup(t) => setup.push_str(t),
            }
        }
        if let Some(r) = skip {
            s.skipped.push((b.name.clone(), r));
            continue;
        }
        if let Some(why) = &missing {
            s.skipped.push((b.name.clone(), why.clone()));
            continue;
        }
        let all = format!("{setup}\n{body}");
        let lacking: Vec<Need> = needs_of(&all).into_iter().filter(|n| !have(*n)).collect();
        if let Some(&need) = lacking.first() {
            needs::skip(
                need,
                &format!("{TEST} {}", b.name),
                "a docs example needs it",
            );
            let why = format!("needs {} (missing here)", need.name());
            s.skipped.push((b.name.clone(), why.clone()));
            missing = Some(format!("an earlier block of {page} {why}"));
            continue;
        }
        for need in needs_of(&all) {
            needs::ran(need, &format!("{TEST} {}", b.name));
        }
        let port = port.to_string();
        let setup = setup.replace("8080", &port);
        let body = body.replace("8080", &port);
        let _ = writeln!(s.text, "\n# ---- {} (line {})", b.name, b.line);
        let _ = writeln!(s.text, "echo '=== {}' >&2", b.name);
        if !setup.trim().is_empty() {
            let _ = writeln!(s.text, "__DOCS_AT={}", q(&format!("{} setup", b.name)));
            s.text.push_str(&setup);
            s.text.push('\n');
        }
        let lines: Vec<String> = body.lines().map(str::to_string).collect();
        let cmds = commands(&lines);
        let mut line = 0;
        for c in &cmds {
            while line < c.first {
                s.text.push_str(&lines[line]);
                s.text.push('\n');
                line += 1;
            }
            let text = lines[c.first..=c.last].join("\n");
            if let Some(sl) = skip_lines
                .iter_mut()
                .find(|sl| text.contains(sl.0.as_str()))
            {
                sl.2 = true;
                s.skipped.push((
                    format!("{} line {}", b.name, b.line + 1 + c.first),
                    sl.1.clone(),
                ));
                let _ = writeln!(s.text, ": skipped by annotation: {}", q(sl.1));
                line = c.last + 1;
                continue;
            }
            let at = format!("{}:{} ({})", page, b.line + 1 + c.first, b.name);
            let _ = writeln!(s.text, "__DOCS_AT={}", q(&at));
            if let Some(e) = &c.expect {
                s.expects.push(e.clone());
                let _ = writeln!(s.text, "__DOCS_EXPECT={}", s.expects.len());
            }
            while line <= c.last {
                s.text.push_str(&lines[line]);
                s.text.push('\n');
                line += 1;
            }
            if c.expect.is_some() {
                s.text.push_str("__DOCS_EXPECT=\n");
            }
        }
        for l in &lines[line..] {
            s.text.push_str(l);
            s.text.push('\n');
        }
        for sl in &skip_lines {
            assert!(sl.2, "{}: `skip-line {}` matches no command", b.name, sl.0);
        }
        // The block's servers stop with it: the next block may serve on the same port.
        s.text.push_str("__docs_stop_jobs\n");
        let _ = writeln!(s.text, "echo {} >> \"$DOCS_META/done\"", q(&b.name));
        s.blocks.push(b.name.clone());
    }
    s
}

/// Three distinct free loopback ports.
fn free_ports() -> [u16; 3] {
    let l: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    [0, 1, 2].map(|i| l[i].local_addr().unwrap().port())
}

/// Kills the page's process group (the shell and everything it started) when dropped.
struct Group(u32);

impl Group {
    fn signal(&self, sig: &str) -> bool {
        Command::new("kill")
            .args([sig, "--", &format!("-{}", self.0)])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.signal("-TERM") {
            return;
        }
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
            if !self.signal("-0") {
                return;
            }
        }
        self.signal("-KILL");
    }
}

/// `want` is in `got`: objects by the given keys, arrays by their first elements, numbers by
/// value.
fn subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| subset(v, gv))),
        (Value::Array(w), Value::Array(g)) => {
            w.len() <= g.len() && w.iter().zip(g).all(|(a, b)| subset(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => want == got,
    }
}

/// `200 {"count": 2} free text` -> the status and the JSON.
fn parse_expect(e: &str) -> Result<(String, Option<Value>), String> {
    let e = e.trim();
    let (status, rest) = e.split_once(char::is_whitespace).unwrap_or((e, ""));
    if status.len() != 3 || !status.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("`# -> {e}`: no status"));
    }
    let rest = rest.trim_start();
    if !(rest.starts_with('{') || rest.starts_with('[')) {
        return Ok((status.to_string(), None));
    }
    let mut it = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    match it.next() {
        Some(Ok(v)) => Ok((status.to_string(), Some(v))),
        _ => Err(format!("`# -> {e}`: the JSON does not parse")),
    }
}

/// The page's curl calls checked against what they declared: (calls checked, failures).
fn check_calls(meta: &Path) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut fails = Vec::new();
    let Ok(rd) = fs::read_dir(meta.join("calls")) else {
        return (0, fails);
    };
    let mut dirs: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let read = |f: &str| fs::read_to_string(d.join(f)).unwrap_or_default();
        let at = read("at").trim().to_string();
        let args = read("args").trim().to_string();
        let m = read("meta");
        let mut meta_lines = m.lines();
        let status = meta_lines.next().unwrap_or("").trim().to_string();
        let ctype = meta_lines.next().unwrap_or("").trim().to_lowercase();
        let body = fs::read(d.join("body")).unwrap_or_default();
        let expect = read("expect");
        if status.is_empty() || status == "000" {
            if !expect.is_empty() {
                fails.push(format!("{at}: `{args}` got no reply, expected {expect}"));
            }
            continue; // e.g. a readiness poll before the server listens
        }
        checked += 1;
        let parsed = serde_json::from_slice::<Value>(&body);
        // With -f, curl keeps no body of a status >= 400 (exit 22): the example handles it.
        let failed_f = read("rc").trim() == "22";
        if ctype.starts_with("application/json") && !failed_f {
            if let Err(e) = &parsed {
                fails.push(format!(
                    "{at}: `{args}`: reply says {ctype} but is not JSON: {e}"
                ));
            }
        }
        if expect.is_empty() {
            continue;
        }
        match parse_expect(&expect) {
            Err(e) => fails.push(format!("{at}: {e}")),
            Ok((want, json)) => {
                if want != status {
                    fails.push(format!("{at}: `{args}`: HTTP {status}, expected {want}"));
                }
                if let Some(w) = json {
                    match &parsed {
                        Ok(g) if subset(&w, g) => {}
                        _ => fails.push(format!(
                            "{at}: `{args}`: the reply does not contain {w}:\n{}",
                            String::from_utf8_lossy(&body)
                        )),
                    }
                }
            }
        }
    }
    (checked, fails)
}

/// Passages shaped like dev-gcide's (integer ids, a headword), the documents the pages'
/// examples ingest (`passages.jsonl`, `gcide.jsonl`).
const PASSAGES: &str = r#"{"id": 4947, "headword": "Tide", "text": "Tide: the alternate rising and falling of the sea, caused by the attraction of the moon and sun."}
{"id": 4948, "headword": "Tide", "text": "Tide: a stream, current or flood; as, a tide of blood."}
{"id": 4949, "headword": "Tide", "text": "Tide: time; period; season; as, eventide."}
{"id": 4950, "headword": "Tidal", "text": "Tidal: of or pertaining to tides; periodically rising and falling like the tide."}
{"id": 5120, "headword": "Ebb", "text": "Ebb: the reflux of the tide; the return of tide water toward the sea."}
{"id": 5121, "headword": "Flood", "text": "Flood: the flowing in of the tide, opposed to the ebb."}
{"id": 6001, "headword": "Glacier", "text": "Glacier: a field or stream of ice moving slowly down a mountain valley."}
{"id": 6002, "headword": "Harbor", "text": "Harbor: a port or haven for ships, sheltered from the sea."}
{"id": 6003, "headword": "Moon", "text": "Moon: the celestial orb which revolves round the earth."}
{"id": 6004, "headword": "Obsolete", "text": "Obsolete: no longer in use; gone into disuse."}
{"id": 6005, "headword": "Sail", "text": "Sail: an extent of canvas by which the wind is made to drive a vessel."}
{"id": 6006, "headword": "Wave", "text": "Wave: an advancing ridge or swell on the surface of a liquid, as of the sea."}
"#;

/// Query texts with their relevant passages (`searchd eval --qrels`, `load --text-queries`,
/// `embed --text-field query`).
const QUERIES: &str = r#"{"qid": "q1", "query": "how do tides work", "relevant": [4947, 4950]}
{"qid": "q2", "query": "ice moving down a valley", "relevant": [6001]}
{"qid": "q3", "query": "a shelter for ships", "relevant": [6002]}
{"qid": "q4", "query": "the tide going out", "relevant": [5120]}
"#;

/// Products with their own vectors (`vec`) and typed fields (queries-and-filters.md).
const SHOP: &str = r#"{"id": "d1", "sku": "A-100", "brand": "acme", "price": 12.5, "tags": ["red", "sale"], "vec": [0.1, 0.2, 0.3, 0.4]}
{"id": "d2", "sku": "A-101", "brand": "acme", "price": 19.5, "tags": ["red"], "vec": [0.2, 0.1, 0.4, 0.3]}
{"id": "d3", "sku": "A-102", "brand": "acme", "price": 35.0, "tags": ["blue"], "vec": [0.4, 0.3, 0.2, 0.1]}
{"id": "d4", "sku": "B-200", "brand": "bolt", "price": 9.0, "tags": ["red", "green"], "vec": [0.3, 0.3, 0.3, 0.3]}
{"id": "d5", "sku": "B-201", "brand": "bolt", "price": 18.0, "tags": ["green"], "vec": [0.1, 0.4, 0.1, 0.4]}
{"id": "d6", "sku": "C-300", "price": 5.0, "tags": ["blue", "sale"], "vec": [0.4, 0.1, 0.4, 0.1]}
"#;

/// The files the pages' examples assume the reader has, in `dir` (`$DOCS_FIXTURES`).
fn write_fixtures(dir: &Path) {
    fs::write(dir.join("passages.jsonl"), PASSAGES).unwrap();
    fs::write(dir.join("queries.jsonl"), QUERIES).unwrap();
    fs::write(dir.join("shop.jsonl"), SHOP).unwrap();
    write_items_parquet(&dir.join("items.parquet"));
}

/// `items.parquet` (collections.md): sku, title, price and a 4-dimensional `emb`.
fn write_items_parquet(path: &Path) {
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, FloatType};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;
    let schema = parse_message_type(
        "message item {
          REQUIRED BYTE_ARRAY sku (UTF8);
          REQUIRED BYTE_ARRAY title (UTF8);
          REQUIRED DOUBLE price;
          OPTIONAL group emb (LIST) { REPEATED group list { REQUIRED FLOAT element; } }
        }",
    )
    .unwrap();
    let n = 8usize;
    let props = Arc::new(WriterProperties::builder().build());
    let mut w = SerializedFileWriter::new(fs::File::create(path).unwrap(), Arc::new(schema), props)
        .unwrap();
    let mut rg = w.next_row_group().unwrap();
    let skus: Vec<ByteArray> = (0..n)
        .map(|i| ByteArray::from(format!("SKU-{i}").as_str()))
        .collect();
    let titles: Vec<ByteArray> = (0..n)
        .map(|i| ByteArray::from(format!("item number {i}").as_str()))
        .collect();
    let prices: Vec<f64> = (0..n).map(|i| 2.5 * i as f64 + 1.0).collect();
    let embs: Vec<f32> = (0..n * 4)
        .map(|k| ((k * 7 % 11) as f32) / 10.0 + 0.05)
        .collect();
    let mut col = rg.next_column().unwrap().unwrap();
    col.typed::<ByteArrayType>()
        .write_batch(&skus, None, None)
        .unwrap();
    col.close().unwrap();
    let mut col = rg.next_column().unwrap().unwrap();
    col.typed::<ByteArrayType>()
        .write_batch(&titles, None, None)
        .unwrap();
    col.close().unwrap();
    let mut col = rg.next_column().unwrap().unwrap();
    col.typed::<DoubleType>()
        .write_batch(&prices, None, None)
        .unwrap();
    col.close().unwrap();
    let def = vec![2i16; n * 4];
    let rep: Vec<i16> = (0..n * 4).map(|k| i16::from(k % 4 > 0)).collect();
    let mut col = rg.next_column().unwrap().unwrap();
    col.typed::<FloatType>()
        .write_batch(&embs, Some(&def), Some(&rep))
        .unwrap();
    col.close().unwrap();
    rg.close().unwrap();
    w.close().unwrap();
}

struct PageResult {
    run: usize,
    calls: usize,
    skipped: Vec<(String, String)>,
    failure: Option<String>,
}

fn run_page(page: &str, text: &str, fixtures: &Path) -> PageResult {
    let blocks = blocks_of(page, text);
    let ports = free_ports();
    let port = ports[0];
    let s = script(page, &blocks, port);
    let mut r = PageResult {
        run: 0,
        calls: 0,
        skipped: s.skipped.clone(),
        failure: None,
    };
    if s.blocks.is_empty() {
        return r;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let meta = tmp.path().join("meta");
    fs::create_dir_all(&work).unwrap();
    fs::create_dir_all(meta.join("calls")).unwrap();
    fs::create_dir_all(meta.join("expect")).unwrap();
    for (i, e) in s.expects.iter().enumerate() {
        fs::write(meta.join("expect").join((i + 1).to_string()), e).unwrap();
    }
    fs::write(meta.join("page.sh"), &s.text).unwrap();
    let log_path = meta.join("log");
    let log = fs::File::create(&log_path).unwrap();
    let started = Instant::now();
    let mut child = Command::new("bash")
        .arg(meta.join("page.sh"))
        .current_dir(&work)
        .env("DOCS_META", &meta)
        .env("DOCS_PORT", port.to_string())
        .env("DOCS_FIXTURES", fixtures)
        .env("DOCS_PORT_2", ports[1].to_string())
        .env("DOCS_PORT_3", ports[2].to_string())
        .env("DOCS_SEARCHD", env!("CARGO_BIN_EXE_searchd"))
        .env_remove("SEARCHD_CONFIG")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("bash");
    let group = Group(child.id());
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if started.elapsed() > PAGE_TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(group);
    let _ = child.wait();
    for line in fs::read_to_string(meta.join("skipped"))
        .unwrap_or_default()
        .lines()
    {
        let (what, why) = line.split_once(": ").unwrap_or((line, ""));
        needs::skip(Need::Cgroup, &format!("{TEST} {page} {what}"), why);
        r.skipped.push((format!("{page}: {what}"), why.to_string()));
    }
    let done = fs::read_to_string(meta.join("done")).unwrap_or_default();
    let done: Vec<&str> = done.lines().collect();
    r.run = done.len();
    for b in &done {
        record_ledger(b);
    }
    let (calls, mut fails) = check_calls(&meta);
    r.calls = calls;
    match status {
        None => fails.push(format!("timed out after {PAGE_TIMEOUT:?}")),
        Some(st) if !st.success() => fails.push(format!("the page's shell exited with {st}")),
        _ => {}
    }
    for (i, e) in s.expects.iter().enumerate() {
        let done_at = meta.join("expect").join(format!("{}.used", i + 1));
        if status.is_some_and(|st| st.success()) && !done_at.exists() {
            fails.push(format!("`# -> {e}` was checked by no curl call"));
        }
    }
    if meta.join("failed").exists() && fails.is_empty() {
        fails.push("a curl call failed its check".into());
    }
    if done.len() != s.blocks.len() && fails.is_empty() {
        fails.push(format!("ran {} of {} blocks", done.len(), s.blocks.len()));
    }
    println!(
        "{page}: {} of {} blocks run, {calls} curl calls checked in {:.1?}",
        done.len(),
        s.blocks.len(),
        started.elapsed()
    );
    if std::env::var_os("DOCS_EXAMPLES_LOG").is_some() {
        println!("{}", fs::read_to_string(&log_path).unwrap_or_default());
    }
    if !fails.is_empty() {
        let log = fs::read_to_string(&log_path).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(120)..].join("\n");
        r.failure =
            Some(format!(
            "{page}:\n  {}\n--- the page's output (last 120 lines):\n{tail}\n--- the script: {}",
            fails.join("\n  "),
            s.text.lines().skip(PRELUDE.lines().count()).collect::<Vec<_>>().join("\n")
        ));
    }
    r
}

fn record_ledger(block: &str) {
    let Some(path) = std::env::var_os("SEARCHD_TEST_LEDGER").filter(|p| !p.is_empty()) else {
        return;
    };
    let _ = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("docs-examples {block}\n").as_bytes()));
}

fn pages() -> Vec<(String, String)> {
    let root = repo_root();
    let mut out = vec![(
        "README.md".to_string(),
        fs::read_to_string(root.join("README.md")).unwrap(),
    )];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for p in docs {
        let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
        out.push((name, fs::read_to_string(&p).unwrap()));
    }
    out
}

#[test]
fn every_shell_example_in_the_docs_runs() {
    // DOCS_EXAMPLES_ONLY=docs/vectors.md runs one page (while fixing its examples);
    // DOCS_EXAMPLES_LOG=1 prints each page's output, its commands traced with times.
    let only = std::env::var("DOCS_EXAMPLES_ONLY").ok();
    // The examples are shell: they need bash, curl, jq and openssl. A user's machine without
    // one skips the test with a line saying so; CI (CI=true) must have them all.
    let missing: Vec<&str> = ["bash", "curl", "jq", "openssl"]
        .into_iter()
        .filter(|t| !on_path(t))
        .collect();
    if !missing.is_empty() {
        let why = format!("the docs examples need {} on PATH", missing.join(", "));
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "{why} (CI=true: install them)"
        );
        println!("skipped: {why}");
        return;
    }
    let (mut run, mut calls, mut skipped, mut failures) = (0, 0, Vec::new(), Vec::new());
    let fixtures = tempfile::tempdir().unwrap();
    write_fixtures(fixtures.path());
    for (page, text) in pages() {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|p| p == page))
        {
            continue;
        }
        let r = run_page(&page, &text, fixtures.path());
        run += r.run;
        calls += r.calls;
        skipped.extend(r.skipped);
        failures.extend(r.failure);
    }
    for (what, why) in &skipped {
        println!("skipped: {what}: {why}");
    }
    println!(
        "docs examples: {run} blocks run, {calls} curl calls checked, {} skipped",
        skipped.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    if only.is_none() {
        assert!(run > 0, "no docs example ran");
    }
}

#[test]
fn the_command_splitter_finds_expectations() {
    let lines: Vec<String> = [
        "cat > f <<'X'",
        "a # -> 1",
        "X",
        "curl -s a \\",
        "  -d '{\"x\": 1,",
        "  \"y\": 2}'   # -> 200 {\"count\": 2}",
        "# a comment",
        "curl -XPOST b -d '{",
        "  }'",
        "# -> 201 {\"acknowledged\": true}",
        "x | y",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let c = commands(&lines);
    let got: Vec<(usize, usize, Option<&str>)> = c
        .iter()
        .map(|c| (c.first, c.last, c.expect.as_deref()))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 2, None),
            (3, 5, Some("200 {\"count\": 2}")),
            (7, 8, Some("201 {\"acknowledged\": true}")),
            (10, 10, None),
        ]
    );
    assert!(subset(
        &serde_json::json!({"hits": [{"id": "d2"}], "matched": 1}),
        &serde_json::json!({"hits": [{"id": "d2", "score": 0.5}], "matched": 1.0, "mode": "x"})
    ));
    assert!(!subset(
        &serde_json::json!({"count": 2}),
        &serde_json::json!({"count": 3})
    ));
}
