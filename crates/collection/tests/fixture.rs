//! A collection written by format version 1, committed under `tests/fixtures/collection-v1`,
//! must keep opening with the same contents: a change that breaks old collections fails
//! here. Re-create it (only on purpose, with a format version bump) with
//! `SEARCHD_BLESS=1 cargo test -p searchd-collection --test fixture`.

use std::path::PathBuf;

use searchd_collection::ingest::{ingest, IngestConfig};
use searchd_collection::{Collection, DocId, IdKind};
use searchd_engine::{IndexKind, LoadOptions, SearchParams};

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/collection-v1")
}

const DOCS: &str = r#"{"id": "alpha", "v": [1.0, 0.0, 0.0, 0.0], "title": "First", "n": 1.50}
{"id": 7, "v": [0.0, 1.0, 0.0, 0.0], "title": "Seven", "tags": ["x", "y"]}
{"id": "gamma", "v": [0.0, 0.0, 1.0, 0.0], "when": "2024-05-01T12:00:00Z", "ok": true}
{"id": 42, "v": [0.6, 0.8, 0.0, 0.0], "title": null}
"#;

#[test]
fn version_1_collection_still_opens() {
    let dir = fixture_dir();
    if std::env::var_os("SEARCHD_BLESS").is_some() {
        let tmp = tempfile::tempdir().unwrap();
        let docs = tmp.path().join("docs.jsonl");
        std::fs::write(&docs, DOCS).unwrap();
        let mut c = IngestConfig::new(&docs, &dir);
        c.reader.vector_field = Some("v".into());
        c.build.kind = IndexKind::Flat;
        c.force = true;
        c.name = Some("fixture".into());
        ingest(&c, None, &|_| {}).unwrap();
        // The manifest records the temp source path; keep the fixture stable.
        let mp = dir.join("collection.json");
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
        m["ingest"]["source"] = "docs.jsonl".into();
        std::fs::write(&mp, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    }
    let c = Collection::open(&dir, &LoadOptions::default()).unwrap();
    let m = c.manifest().unwrap();
    assert_eq!(
        (m.format, m.docs, m.dim, m.id_kind),
        (1, 4, 4, IdKind::Mixed)
    );
    assert_eq!(m.name, "fixture");
    let src = |id: DocId| {
        let r = c.lookup(&id).unwrap();
        String::from_utf8(c.source(r).unwrap().unwrap()).unwrap()
    };
    assert_eq!(
        src(DocId::Str("alpha".into())),
        r#"{"title":"First","n":1.50}"#
    );
    assert_eq!(src(DocId::Int(7)), r#"{"title":"Seven","tags":["x", "y"]}"#);
    assert_eq!(
        src(DocId::Str("gamma".into())),
        r#"{"when":"2024-05-01T12:00:00Z","ok":true}"#
    );
    assert_eq!(src(DocId::Int(42)), r#"{"title":null}"#);
    let hits = c
        .search(&[0.0, 1.0, 0.0, 0.0], &SearchParams::new(2, 2), None)
        .unwrap();
    let ids: Vec<_> = hits
        .iter()
        .map(|h| c.doc_id(h.doc).unwrap().clone())
        .collect();
    assert_eq!(ids, vec![DocId::Int(7), DocId::Int(42)]);
    assert!((hits[1].score - 0.8).abs() < 1e-6);
}
