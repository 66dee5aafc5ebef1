//! The search console (`GET /`, `/console`; issue "What a user sees"): the page and its
//! assets are served from the binary with their content types, caching and a strict CSP;
//! `GET /` with Elasticsearch's media type is still ES's root. The page in a real browser:
//! `console_browser.rs`.

mod common;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use common::{client, TestServer};
use searchd_server::{IndexSource, ServerConfig};
use serde_json::{json, Value};

const WORDS: [&str; 16] = [
    "tide", "moon", "river", "stone", "salt", "ember", "cedar", "frost", "harbor", "glass", "dune",
    "wind", "storm", "field", "bell", "shore",
];

/// A collection of 300 documents: text (BM25-indexed), vectors, a keyword `color`, a
/// keyword `lang`, a float `price`, an integer `year` and a date `published`.
fn collection(dir: &Path) -> PathBuf {
    let docs = dir.join("books.jsonl");
    let mut f = std::fs::File::create(&docs).unwrap();
    let vecs = common::data(300, common::DIM, 5);
    for i in 0..300usize {
        let words: Vec<&str> = (0..6)
            .map(|j| WORDS[(i * 7 + j * j * 3 + j) % WORDS.len()])
            .collect();
        let color = ["red", "blue", "green", "amber"][i % 4];
        let lang = ["en", "fr", "de"][(i / 4) % 3];
        let o = json!({
            "id": format!("b{i}"),
            "vec": &vecs[i * common::DIM..(i + 1) * common::DIM],
            "text": format!("The {} of the {}", words.join(" "), WORDS[i % WORDS.len()]),
            "title": format!("Book {i}: {} and {}", WORDS[i % 16], WORDS[(i / 16) % 16]),
            "color": color,
            "lang": lang,
            "price": (i % 50) as f64 + 0.99,
            "year": 1990 + (i % 35) as i64,
            "published": format!("20{:02}-{:02}-{:02}", 10 + i % 15, 1 + i % 12, 1 + i % 28),
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

fn config(coll: PathBuf) -> ServerConfig {
    let mut c = ServerConfig::new(IndexSource::Path(coll));
    c.name = Some("books".into());
    c.threads = 2;
    c.drain_timeout = std::time::Duration::from_secs(10);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_and_its_assets_are_served_with_a_strict_csp() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(config(collection(dir.path()))).await;
    let c = client();
    for path in ["/", "/console"] {
        let r = c.get(format!("{}{path}", s.url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        let h = r.headers().clone();
        assert_eq!(h["content-type"], "text/html; charset=utf-8", "{path}");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("http"),
            "{csp}"
        );
        assert_eq!(h["cache-control"], "no-cache");
        assert_eq!(h["x-content-type-options"], "nosniff");
        let etag = h["etag"].to_str().unwrap().to_string();
        let body = r.text().await.unwrap();
        assert!(body.starts_with("<!doctype html>"), "{body:.60}");
        assert!(body.contains("/console/console.js") && body.contains("/console/console.css"));
        // Nothing from elsewhere, nothing inline.
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "external URL in the page"
        );
        assert!(!body.contains("<style") && !body.contains("style=") && !body.contains("onclick"));
        // Unchanged: 304 with the same ETag.
        let r = c
            .get(format!("{}{path}", s.url))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304, "{path} with If-None-Match");
    }
    for (path, ct, needle) in [
        (
            "/console/console.js",
            "text/javascript; charset=utf-8",
            "use strict",
        ),
        ("/console/console.css", "text/css; charset=utf-8", ":root"),
    ] {
        let r = c.get(format!("{}{path}", s.url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], ct, "{path}");
        assert_eq!(r.headers()["cache-control"], "no-cache", "{path}");
        let body = r.text().await.unwrap();
        assert!(body.contains(needle), "{path}");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path}: external URL"
        );
    }
    // An Elasticsearch client still gets ES's root.
    let r = c
        .get(format!("{}/", s.url))
        .header(
            "accept",
            "application/vnd.elasticsearch+json; compatible-with=8",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-elastic-product"], "Elasticsearch");
    let v: Value = r.json().await.unwrap();
    assert!(v["version"]["number"].is_string(), "{v}");
    // Other methods and unknown assets are the API's usual errors.
    let r = c.post(format!("{}/console", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 405);
    let r = c
        .get(format!("{}/console/nope.js", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    s.stop().await.unwrap();
}
