//! The search console in a real browser (issue "What a user sees"): Debian's Chromium,
//! headless, driven through WebDriver (`chromedriver`, with the `fantoccini` client). A user
//! loads the console, runs a text query, clicks a facet value and sets a range, sees the
//! hits and counts change, opens a document, closes it, asks for more like it and clears
//! the filters. Every hit list and number the page shows is checked against the API's own
//! answer to the same question (search, count, facet, document), not against numbers
//! written here, and the browser's log must hold no error. A second walk runs against a
//! server with API keys: the page loads without one and works once a key is typed into it.
//!
//! Needs Chromium and chromedriver ([`Need::Browser`]): `SEARCHD_TEST_CHROMIUM` and
//! `SEARCHD_TEST_CHROMEDRIVER`, else `chromium` and `chromedriver` on `PATH`
//! (`bash .ci/browser.sh` installs them). Without them the test is skipped with a visible
//! line, and fails under `CI=true`.
//!
//! Screenshots (PNG) of the three steps go to `SEARCHD_TEST_SCREENSHOTS` (relative to the
//! workspace; the ones in `docs/console/` were made with `SEARCHD_TEST_SCREENSHOTS=docs/console`),
//! else to a directory under the build's target, so a test run leaves the sources alone.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{client, TestServer};
use fantoccini::{Client, ClientBuilder, Locator};
use searchd_server::auth::Scope;
use searchd_server::{IndexSource, ServerConfig};
use searchd_testkit::needs::{self, Need};
use serde_json::{json, Map, Value};

const WORDS: [&str; 16] = [
    "tide", "moon", "river", "stone", "salt", "ember", "cedar", "frost", "harbor", "glass", "dune",
    "wind", "storm", "field", "bell", "shore",
];

/// 240 documents: a BM25-indexed `text`, vectors (the collection needs them; no
/// model is used), keywords `color` and `lang` to facet on, a keyword `isbn` with one value
/// per document (not a facet), and an integer `year`.
fn collection(dir: &Path) -> PathBuf {
    let docs = dir.join("books.jsonl");
    let mut f = std::fs::File::create(&docs).unwrap();
    let n = 240usize;
    let vecs = common::data(n, common::DIM, 5);
    for i in 0..n {
        // 4 to 9 words, picked by a seeded hash of the row.
        let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let words: Vec<&str> = (0..4 + i % 6)
            .map(|_| {
                x ^= x >> 29;
                x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
                WORDS[(x >> 40) as usize % WORDS.len()]
            })
            .collect();
        let o = json!({
            "id": format!("b{i}"),
            "vec": &vecs[i * common::DIM..(i + 1) * common::DIM],
            "text": format!("The {} of the {}", words.join(" "), WORDS[i % WORDS.len()]),
            "color": (["red", "blue", "green", "amber", "red"][i % 5]),
            "lang": (["en", "fr", "de"][(i / 4) % 3]),
            "year": 1990 + (i % 35) as i64,
            // One value per document: an identifier, which the page must not offer as a facet.
            "isbn": format!("978-{i:06}"),
        });
        writeln!(f, "{o}").unwrap();
    }
    drop(f);
    let out = dir.join("books");
    let mut c = searchd_collection::ingest::IngestConfig::new(&docs, &out);
    c.reader.vector_field = Some("vec".into());
    c.build.threads = 1;
    c.build.kind = searchd_engine::IndexKind::Flat;
    searchd_collection::ingest::ingest(&c, None, &|_| {}).unwrap();
    out
}

/// An executable: `var` when set, else the first of `names` on `PATH`.
fn find(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// A chromedriver on a free loopback port, stopped (with the browsers it started) on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start(bin: &Path, log: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let d = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let c = client();
        let t = Instant::now();
        loop {
            if let Ok(r) = c.get(format!("{}/status", d.url)).send().await {
                let v: Value = r.json().await.unwrap_or_default();
                if v["value"]["ready"] == true {
                    return d;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "chromedriver never ready (log: {})",
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SIGTERM first: chromedriver then quits the browsers it started.
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the page shows, read from its hooks: the hits' ids, `#results[data-matched]`, each
/// facet's values with their counts and whether they are checked, the error box, and more.
const SNAPSHOT: &str = r##"
const q = (s) => document.querySelector(s);
const facets = {};
for (const fs of document.querySelectorAll("fieldset.facet[data-field]")) {
  const m = {};
  for (const inp of fs.querySelectorAll("input[data-value]")) {
    const c = inp.closest("li").querySelector(".count");
    const t = c ? c.textContent.replace(/,/g, "") : "";
    m[inp.dataset.value] = { count: /^\d+$/.test(t) ? Number(t) : null, checked: inp.checked };
  }
  facets[fs.dataset.field] = m;
}
const err = q("#error");
const dlg = q("dialog#doc");
const rows = {};
for (const tr of document.querySelectorAll("#doc-fields tbody tr")) {
  const th = tr.querySelector("th");
  if (th) rows[th.textContent] = tr.querySelector("td").textContent;
}
return {
  ready: document.body.dataset.ready === "true",
  hits: [...document.querySelectorAll("#hits li.hit[data-id]")].map((li) => JSON.parse(li.dataset.id)),
  matched: q("#results").dataset.matched ?? null,
  facets,
  hidden_facets: [...document.querySelectorAll("fieldset.facet[data-field]")].filter((fs) => fs.hidden).map((fs) => fs.dataset.field),
  error: err.hidden ? null : err.textContent,
  summary: q("#summary").textContent,
  mode: q("#mode").value,
  query: q("#q").value,
  qps: q("#stat-qps").textContent,
  p50: q("#stat-p50").textContent,
  doc: { open: dlg.open, title: q("#doc-title").textContent, rows },
  keybox: q("#keybox").open,
  explain: q("#explain").hidden ? null : {
    plan: Object.fromEntries([...document.querySelectorAll("#plan div")].map((d) => [d.querySelector("dt").textContent, d.querySelector("dd").textContent])),
    stages: [...document.querySelectorAll("#stages tbody tr")].map((tr) => tr.dataset.stage),
  },
  focus: document.activeElement ? document.activeElement.id || document.activeElement.className : null,
};
"##;

async fn snapshot(b: &Client) -> Value {
    b.execute(SNAPSHOT, vec![]).await.expect("snapshot script")
}

/// Poll the page until `want` holds of its snapshot (20 s at most); the snapshot.
async fn until(b: &Client, what: &str, want: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let s = snapshot(b).await;
        if want(&s) {
            return s;
        }
        if t.elapsed() > Duration::from_secs(20) {
            panic!("{what}: the page never showed it; it shows {s:#}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The page's snapshot agrees with `want` on every key `want` has.
fn agrees(page: &Value, want: &Value) -> bool {
    want.as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| page.get(k) == Some(v))
}

/// The API, asked the questions the page asks.
struct Oracle {
    http: reqwest::Client,
    /// The collection's URL.
    base: String,
    /// The API key, on a server with keys.
    key: Option<String>,
}

impl Oracle {
    fn new(server: &str, key: Option<&str>) -> Oracle {
        Oracle {
            http: client(),
            base: format!("{server}/collections/books"),
            key: key.map(str::to_string),
        }
    }

    async fn send(&self, rq: reqwest::RequestBuilder, what: &str) -> Value {
        let rq = match &self.key {
            Some(k) => rq.bearer_auth(k),
            None => rq,
        };
        let r = rq.send().await.unwrap();
        assert_eq!(r.status(), 200, "{what}");
        r.json().await.unwrap()
    }

    /// `GET` the collection's `path` (`""`: its info).
    async fn get(&self, path: &str) -> Value {
        let rq = self.http.get(format!("{}{path}", self.base));
        self.send(rq, path).await
    }

    async fn post(&self, what: &str, body: Value) -> Value {
        let rq = self.http.post(format!("{}/{what}", self.base)).json(&body);
        self.send(rq, &format!("{what} {body}")).await
    }

    /// The keyword fields the page should facet on (from the mapping).
    async fn facet_fields(&self) -> Vec<String> {
        let info = self.get("").await;
        info["info"]["mapping"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["type"] == "keyword")
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// What the page should show for a search's `query` (`{"text", "mode"}` or `{"id"}`;
    /// none: the first documents by id) and the filters `chosen` (field, clause; a facet
    /// value is a `term`), as a snapshot's keys.
    async fn expect(
        &self,
        query: Option<Value>,
        facet_fields: &[String],
        chosen: &[(&str, Value)],
    ) -> Value {
        let filter = |except: Option<&str>| {
            let must: Vec<Value> = chosen
                .iter()
                .filter(|(f, _)| Some(*f) != except)
                .map(|(_, c)| c.clone())
                .collect();
            match must.len() {
                0 => None,
                1 => Some(must[0].clone()),
                _ => Some(json!({"bool": {"filter": must}})),
            }
        };
        let with = |mut body: Value, f: Option<Value>| {
            if let Some(f) = f {
                body["filter"] = f;
            }
            body
        };
        let hits = match query {
            Some(mut q) => {
                q["k"] = json!(10);
                self.post("search", with(q, filter(None))).await
            }
            None => {
                self.post("scroll", with(json!({"size": 10}), filter(None)))
                    .await
            }
        };
        let ids: Vec<Value> = hits["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].clone())
            .collect();
        let count = self.post("count", with(json!({}), filter(None))).await;
        let mut facets = Map::new();
        for field in facet_fields {
            let r = self
                .post(
                    "facet",
                    with(json!({"field": field, "size": 10}), filter(Some(field))),
                )
                .await;
            let mut m = Map::new();
            for b in r["buckets"].as_array().unwrap() {
                let checked = chosen
                    .iter()
                    .any(|(f, c)| f == field && c["term"][field] == b["value"]);
                m.insert(
                    b["value"].to_string(),
                    json!({"count": b["count"], "checked": checked}),
                );
            }
            facets.insert(field.clone(), Value::Object(m));
        }
        json!({
            "ready": true,
            "hits": ids,
            "matched": count["count"].to_string(),
            "facets": facets,
            "error": null,
        })
    }
}

fn screenshot(dir: &Path, name: &str, png: &[u8]) {
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), png).unwrap();
}

fn screenshot_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    match std::env::var_os("SEARCHD_TEST_SCREENSHOTS").filter(|p| !p.is_empty()) {
        Some(p) => root.join(p),
        None => Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots"),
    }
}

/// The user's walk through the console, against the API's answers.
async fn walk(b: Client, server: String, driver: String, shots: PathBuf) {
    let oracle = Oracle::new(&server, None);
    let info = oracle.get("").await;
    assert!(info["info"]["lexical"].is_object(), "no text index: {info}");
    // The facets the page should offer: the mapping's keyword fields.
    let facet_fields = oracle.facet_fields().await;
    assert!(
        facet_fields.iter().any(|f| f == "color"),
        "{facet_fields:?}"
    );

    // Loading: the collection is picked, the first documents listed, the facets counted.
    b.goto(&format!("{server}/console")).await.unwrap();
    let want = oracle.expect(None, &facet_fields, &[]).await;
    let s = until(&b, "the loaded console", |s| agrees(s, &want)).await;
    assert_eq!(s["mode"], "lexical", "no model: the default mode is BM25");
    // An identifier-like keyword (every value on one document) is not offered as a facet.
    assert_eq!(s["hidden_facets"], json!(["isbn"]), "{s:#}");
    assert_eq!(
        s["facets"].as_object().unwrap().len(),
        facet_fields.len(),
        "{s:#}"
    );
    assert!(
        s["hits"].as_array().unwrap().len() == 10,
        "the first 10 by id: {s:#}"
    );
    // The live statistics have been polled; no search yet, so no latency to show.
    let s = until(&b, "the QPS", |s| {
        s["qps"].as_str().is_some_and(|q| q.parse::<f64>().is_ok())
    })
    .await;
    assert_eq!(
        (&s["qps"], &s["p50"]),
        (&json!("0.00"), &json!("–")),
        "{s:#}"
    );

    // A text query, typed and sent with Enter.
    let text = "harbor cedar";
    let q = b.find(Locator::Css("#q")).await.unwrap();
    q.send_keys(text).await.unwrap();
    q.send_keys(&fantoccini::key::Key::Enter.to_string())
        .await
        .unwrap();
    let lexical = json!({"text": text, "mode": "lexical"});
    let searched = oracle
        .expect(Some(lexical.clone()), &facet_fields, &[])
        .await;
    let hits = searched["hits"].as_array().unwrap().clone();
    assert!(!hits.is_empty(), "the query matches nothing: {searched}");
    let s = until(&b, "the hits of a text query", |s| {
        agrees(s, &searched)
            && s["summary"]
                .as_str()
                .unwrap_or("")
                .contains("hits (lexical)")
    })
    .await;
    assert!(
        s["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("{} hits (lexical)", hits.len())),
        "{s:#}"
    );
    // The plan and timings of the search (`explain`).
    let plan = &s["explain"]["plan"];
    assert_eq!(plan["mode"], "lexical", "{s:#}");
    assert_eq!(plan["k"], "10", "{s:#}");
    assert!(
        !s["explain"]["stages"].as_array().unwrap().is_empty(),
        "{s:#}"
    );
    // The live statistics count the searches (polled every 2 s).
    let s = until(&b, "the QPS of the searches so far", |s| {
        s["qps"].as_str().and_then(|q| q.parse::<f64>().ok()) > Some(0.0)
    })
    .await;
    assert!(
        s["p50"]
            .as_str()
            .is_some_and(|p| p.ends_with("µs") || p.ends_with("ms")),
        "{s:#}"
    );
    screenshot(&shots, "search.png", &b.screenshot().await.unwrap());

    // A facet value: the hits, the match count and the other facets' counts change to the
    // filtered answers; the clicked facet keeps its counts (a facet ignores its own choice).
    let red = b
        .find(Locator::Css(
            r#"fieldset.facet[data-field="color"] input[data-value='"red"']"#,
        ))
        .await
        .unwrap();
    red.click().await.unwrap();
    let red_term = ("color", json!({"term": {"color": "red"}}));
    let filtered = oracle
        .expect(
            Some(lexical.clone()),
            &facet_fields,
            std::slice::from_ref(&red_term),
        )
        .await;
    assert_ne!(
        filtered["matched"], searched["matched"],
        "the filter filters"
    );
    assert_ne!(
        filtered["hits"], searched["hits"],
        "the filter changes the hits"
    );
    until(&b, "the hits and counts with color=red", |s| {
        agrees(s, &filtered)
    })
    .await;
    // Every hit shown is red.
    let colors = b
        .execute(
            r##"return [...document.querySelectorAll("#hits li.hit dl.fields div")]
                .filter((d) => d.querySelector("dt").textContent === "color")
                .map((d) => d.querySelector("dd").textContent);"##,
            vec![],
        )
        .await
        .unwrap();
    let colors = colors.as_array().unwrap();
    assert_eq!(colors.len(), filtered["hits"].as_array().unwrap().len());
    assert!(colors.iter().all(|c| c == "red"), "{colors:?}");
    screenshot(&shots, "facet.png", &b.screenshot().await.unwrap());

    // A range: year from 2005 (sent when the field loses the focus).
    let from = b.find(Locator::Css("#range-min-year")).await.unwrap();
    from.send_keys(&format!("2005{}", fantoccini::key::Key::Tab))
        .await
        .unwrap();
    let chosen = [
        red_term.clone(),
        ("year", json!({"range": {"year": {"gte": 2005}}})),
    ];
    let ranged = oracle
        .expect(Some(lexical.clone()), &facet_fields, &chosen)
        .await;
    assert_ne!(ranged["matched"], filtered["matched"], "the range filters");
    until(&b, "the hits and counts with color=red, year>=2005", |s| {
        agrees(s, &ranged)
    })
    .await;

    // A document: its dialog shows the stored fields, as GET .../docs/{id} answers them.
    let first = ranged["hits"][0].clone();
    let open = b
        .find(Locator::Css("#hits li.hit button.open"))
        .await
        .unwrap();
    open.click().await.unwrap();
    let doc = oracle
        .get(&format!("/docs/{}", first.as_str().unwrap()))
        .await;
    let fields = doc["fields"].as_object().expect("fields").clone();
    assert!(
        fields.contains_key("color") && fields.contains_key("text"),
        "{doc}"
    );
    let s = until(&b, "the document", |s| {
        s["doc"]["open"] == true
            && s["doc"]["rows"]
                .as_object()
                .is_some_and(|r| r.len() == fields.len())
    })
    .await;
    assert_eq!(
        s["doc"]["title"],
        format!("Document {}", first.as_str().unwrap())
    );
    for (k, v) in &fields {
        let shown = s["doc"]["rows"][k]
            .as_str()
            .unwrap_or_else(|| panic!("{k} not shown: {s:#}"));
        match v {
            Value::String(v) => assert_eq!(shown, v, "{k}"),
            v => assert_eq!(&serde_json::from_str::<Value>(shown).unwrap(), v, "{k}"),
        }
    }
    screenshot(&shots, "document.png", &b.screenshot().await.unwrap());

    // Esc closes it; the hit's button has the focus back.
    b.active_element()
        .await
        .unwrap()
        .send_keys(&fantoccini::key::Key::Escape.to_string())
        .await
        .unwrap();
    until(&b, "the document closed", |s| {
        s["doc"]["open"] == false && s["focus"] == "open"
    })
    .await;

    // More like this: the document's neighbours (mode id), under the same filters.
    open.click().await.unwrap();
    until(&b, "the document again", |s| s["doc"]["open"] == true).await;
    b.find(Locator::Css("#doc-similar"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let like = json!({"id": first});
    let similar = oracle
        .expect(Some(like.clone()), &facet_fields, &chosen)
        .await;
    let s = until(&b, "more like the document", |s| {
        agrees(s, &similar) && s["doc"]["open"] == false
    })
    .await;
    assert_eq!(s["mode"], "id");
    assert_eq!(s["query"], first);

    // Clear filters: back to the unfiltered answer.
    b.find(Locator::Css("#reset"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let cleared = oracle.expect(Some(like), &facet_fields, &[]).await;
    until(&b, "the filters cleared", |s| agrees(s, &cleared)).await;

    // Nothing went wrong in the page: no script error, no CSP refusal, no failed fetch.
    let sid = b.session_id().await.unwrap().expect("a session");
    let log: Value = client()
        .post(format!("{driver}/session/{sid}/se/log"))
        .json(&json!({"type": "browser"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bad: Vec<&Value> = log["value"]
        .as_array()
        .map(|a| a.iter().filter(|e| e["level"] == "SEVERE").collect())
        .unwrap_or_default();
    assert!(bad.is_empty(), "the browser's console: {bad:#?}");
}

/// Chromium and chromedriver, or the test's skip (see [`needs`]).
fn browser(test: &str) -> Option<(PathBuf, PathBuf)> {
    let chromium = find("SEARCHD_TEST_CHROMIUM", &["chromium", "chromium-browser"]);
    let driver = find("SEARCHD_TEST_CHROMEDRIVER", &["chromedriver"]);
    let why = match (&chromium, &driver) {
        (None, _) => "no chromium (SEARCHD_TEST_CHROMIUM, or chromium on PATH)",
        (_, None) => "no chromedriver (SEARCHD_TEST_CHROMEDRIVER, or chromedriver on PATH)",
        _ => "",
    };
    needs::require(Need::Browser, test, chromium.zip(driver), why)
}

/// The books collection in `dir`, served (with the key file `keys`, if any).
async fn server(dir: &Path, keys: Option<PathBuf>) -> TestServer {
    let mut cfg = ServerConfig::new(IndexSource::Path(collection(dir)));
    cfg.name = Some("books".into());
    cfg.threads = 2;
    cfg.drain_timeout = Duration::from_secs(10);
    cfg.api_keys = keys;
    TestServer::start(cfg).await
}

/// A browser session (through a chromedriver of its own) for `walk(browser, server URL,
/// chromedriver URL)`; the browser, chromedriver and server are stopped whether the walk
/// passes or not.
async fn in_browser<W, F>(bins: (PathBuf, PathBuf), dir: &Path, server: TestServer, walk: W)
where
    W: FnOnce(Client, String, String) -> F,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let (chromium, driver) = bins;
    let log = dir.join("chromedriver.log");
    let d = Driver::start(&driver, &log).await;
    let caps = json!({
        "browserName": "chrome",
        "goog:loggingPrefs": {"browser": "ALL"},
        "goog:chromeOptions": {
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--hide-scrollbars",
                "--force-color-profile=srgb", "--lang=en-US",
                "--window-size=1280,1000",
                format!("--user-data-dir={}", dir.join("profile").display()),
            ],
        },
    });
    let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
    builder.capabilities(caps.as_object().unwrap().clone());
    let b = builder
        .connect(&d.url)
        .await
        .unwrap_or_else(|e| panic!("no browser session: {e} (log: {})", log.display()));

    // The walk in its own task, so the browser is closed whether it passes or not.
    let walked = tokio::spawn(walk(b.clone(), server.url.clone(), d.url.clone())).await;
    let _ = b.close().await;
    drop(d);
    server.stop().await.unwrap();
    if let Err(e) = walked {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        eprintln!("chromedriver log, last lines:\n{tail}");
        match e.try_into_panic() {
            Ok(p) => std::panic::resume_unwind(p),
            Err(e) => panic!("the walk did not finish: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_searches_filters_and_opens_a_document() {
    let test = "console_browser::a_user_searches_filters_and_opens_a_document";
    let Some(bins) = browser(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), None).await;
    let shots = screenshot_dir();
    let to = shots.clone();
    in_browser(bins, dir.path(), s, move |b, server, driver| {
        walk(b, server, driver, to)
    })
    .await;
    println!("screenshots in {}", shots.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_keys_the_page_loads_and_sends_the_key_typed_into_it() {
    let test = "console_browser::with_keys_the_page_loads_and_sends_the_key_typed_into_it";
    let Some(bins) = browser(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (key, entry) = searchd_server::auth::new_key("reader", Scope::Read, None).unwrap();
    let file = dir.path().join("keys.toml");
    std::fs::write(&file, entry).unwrap();
    let s = server(dir.path(), Some(file)).await;
    in_browser(bins, dir.path(), s, move |b, server, _| async move {
        // The page loads without a key; its API calls are refused, and it asks for one.
        b.goto(&format!("{server}/")).await.unwrap();
        let s = until(&b, "the page asking for a key", |s| {
            s["ready"] == true
                && s["keybox"] == true
                && s["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("unauthorized"))
        })
        .await;
        assert_eq!(s["hits"], json!([]), "{s:#}");
        // The key typed and sent: the collection, its documents and facets, as the API
        // answers them to that key.
        let field = b.find(Locator::Css("#key")).await.unwrap();
        field.send_keys(&key).await.unwrap();
        field
            .send_keys(&fantoccini::key::Key::Enter.to_string())
            .await
            .unwrap();
        let oracle = Oracle::new(&server, Some(&key));
        let facet_fields = oracle.facet_fields().await;
        let want = oracle.expect(None, &facet_fields, &[]).await;
        let s = until(&b, "the console with the key", |s| agrees(s, &want)).await;
        assert_eq!(s["keybox"], false, "{s:#}");
        // Kept in the tab only: session storage, not local storage or the address.
        let kept = b
            .execute(
                "return [sessionStorage.getItem('searchd-key'), localStorage.length, location.href];",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(kept[0], key.as_str());
        assert_eq!(kept[1], 0);
        assert!(!kept[2].as_str().unwrap().contains(&key), "{kept}");
    })
    .await;
}
