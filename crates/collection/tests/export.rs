//! The live documents of a collection ([`LiveDocs`]): after upserts (new ids and
//! replacements) and deletes, some committed into segments and deleted sets, some applied
//! but only in the write-ahead log, some only logged (not yet refreshed), an export reads
//! each live document once with its last version: no deleted row, no replaced row, and
//! every logged operation, while the writer still holds the directory.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use searchd_collection::ingest::{ingest, IngestConfig};
use searchd_collection::live::{Doc, LiveCollection, LiveConfig};
use searchd_collection::{Collection, DocId, LiveDocs};
use searchd_engine::LoadOptions;

const DIM: usize = 8;
const N: u64 = 30;

fn vector(id: u64, version: u64) -> Vec<f32> {
    let v: Vec<f32> = (0..DIM)
        .map(|d| ((id * 7 + version * 13 + d as u64 * 5) % 17) as f32 - 8.0 + 0.5)
        .collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

fn source(id: u64, version: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"text": format!("doc {id}"), "version": version}))
        .unwrap()
}

fn doc(id: u64, version: u64) -> Doc {
    Doc {
        id: DocId::Int(id),
        vector: vector(id, version),
        text: Some(format!("doc {id}")),
        source: source(id, version),
    }
}

/// id -> version of what must be exported.
type Model = BTreeMap<u64, u64>;

fn make_collection(dir: &Path) -> Model {
    let docs = dir.join("docs.jsonl");
    let mut f = std::fs::File::create(&docs).unwrap();
    for id in 0..N {
        writeln!(
            f,
            "{}",
            serde_json::json!({"id": id, "text": format!("doc {id}"), "version": 0, "vector": vector(id, 0)})
        )
        .unwrap();
    }
    drop(f);
    let mut cfg = IngestConfig::new(&docs, dir.join("c"));
    cfg.reader.vector_field = Some("vector".into());
    cfg.reader.text_field = Some("text".into());
    cfg.build.threads = 1;
    ingest(&cfg, None, &|_| {}).unwrap();
    (0..N).map(|id| (id, 0)).collect()
}

fn upsert(live: &LiveCollection, model: &mut Model, docs: &[(u64, u64)], wait: bool) {
    live.upsert(docs.iter().map(|&(id, v)| doc(id, v)).collect(), wait)
        .unwrap();
    for &(id, v) in docs {
        model.insert(id, v);
    }
}

fn delete(live: &LiveCollection, model: &mut Model, ids: &[u64], wait: bool) {
    live.delete(ids.iter().map(|&id| DocId::Int(id)).collect(), wait)
        .unwrap();
    for id in ids {
        model.remove(id);
    }
}

/// The exported documents must be exactly the model: each id once, its last version's
/// payload and vector, positions and iteration in the same order.
fn check(docs: &LiveDocs, model: &Model, what: &str) {
    assert_eq!(docs.len(), model.len() as u64, "{what}: count");
    let mut seen = BTreeMap::new();
    for (i, d) in docs.iter().enumerate() {
        let d = d.unwrap();
        assert_eq!(
            docs.get(i as u64).unwrap(),
            d,
            "{what}: get({i}) and iter agree"
        );
        let DocId::Int(id) = d.id else {
            panic!("{what}: id {:?}", d.id)
        };
        let src: serde_json::Value = serde_json::from_slice(d.source.as_ref().unwrap()).unwrap();
        let version = src["version"].as_u64().unwrap();
        assert!(seen.insert(id, version).is_none(), "{what}: {id} twice");
        for (a, b) in d.vector.iter().zip(vector(id, version)) {
            assert!((a - b).abs() < 1e-5, "{what}: vector of {id} v{version}");
        }
    }
    assert_eq!(&seen, model, "{what}: ids and versions");
    assert!(docs.doc_ref(docs.len()).is_none());
    assert!(docs.get(docs.len()).is_err());
}

fn cfg() -> LiveConfig {
    LiveConfig {
        background: false,
        ..LiveConfig::default()
    }
}

#[test]
fn live_docs_skip_deleted_and_replaced_rows_and_include_the_log() {
    let d = tempfile::tempdir().unwrap();
    let mut model = make_collection(d.path());
    let dir = d.path().join("c");
    let opts = LoadOptions::default();
    let live = LiveCollection::open(&dir, &opts, cfg()).unwrap();

    // Committed: replacements and deletes in segments and deleted sets.
    upsert(&live, &mut model, &[(0, 1), (1, 1), (2, 1), (3, 1)], true);
    delete(&live, &mut model, &[10, 11, 12], true);
    live.commit().unwrap();
    // Applied by the writer but only in the log on disk (no commit since).
    upsert(&live, &mut model, &[(100, 1), (1, 2), (4, 1)], true);
    delete(&live, &mut model, &[20, 0], true);
    // Only logged: not even refreshed.
    upsert(&live, &mut model, &[(101, 1), (2, 2), (25, 1)], false);
    delete(&live, &mut model, &[3, 25, 21], false);
    upsert(&live, &mut model, &[(21, 3), (102, 1)], false);
    assert_eq!(
        live.stats()["pending"]["ops"],
        3,
        "operations still pending"
    );

    // What the old export read: every row of every segment of the last commit.
    let stale = Collection::open(&dir, &opts).unwrap();
    let rows: usize = stale.segments().iter().map(|s| s.len()).sum();
    assert!(rows > model.len(), "segments hold deleted rows ({rows})");
    assert!(
        stale.lookup(&DocId::Int(100)).is_none(),
        "100 is only in the log"
    );

    // The writer still holds the directory: the export reads it as a second process would.
    let docs = LiveDocs::open(&dir, &opts).unwrap();
    check(&docs, &model, "open while the writer holds it");
    // The writer's own view, once refreshed, is the same state.
    live.refresh().unwrap();
    let view = LiveDocs::of_view(live.view());
    check(&view, &model, "the writer's view");
    let refs: Vec<_> = live.view().live_refs().collect();
    assert_eq!(refs.len(), model.len());
    assert!(refs.iter().all(|r| live.view().is_live(*r)));
    drop(docs);

    // After a clean close everything is committed; the same documents.
    live.close().unwrap();
    drop(live);
    check(
        &LiveDocs::open(&dir, &opts).unwrap(),
        &model,
        "after the close",
    );
    // A collection that never took writes: every row.
    let fresh = d.path().join("fresh");
    {
        let docs = d.path().join("docs.jsonl");
        let mut cfg = IngestConfig::new(&docs, &fresh);
        cfg.reader.vector_field = Some("vector".into());
        cfg.reader.text_field = Some("text".into());
        cfg.build.threads = 1;
        ingest(&cfg, None, &|_| {}).unwrap();
    }
    let all: Model = (0..N).map(|id| (id, 0)).collect();
    check(&LiveDocs::open(&fresh, &opts).unwrap(), &all, "fresh");
    // Not a collection: a clear input error.
    let e = LiveDocs::open(d.path(), &opts).unwrap_err();
    assert!(
        e.is_input() && e.to_string().contains("not a collection"),
        "{e}"
    );
}

#[test]
fn live_docs_of_a_collection_whose_rows_are_all_deleted_is_empty() {
    let d = tempfile::tempdir().unwrap();
    let mut model = make_collection(d.path());
    let dir = d.path().join("c");
    let opts = LoadOptions::default();
    let live = LiveCollection::open(&dir, &opts, cfg()).unwrap();
    let all: Vec<u64> = (0..N).collect();
    delete(&live, &mut model, &all, true);
    live.commit().unwrap();
    // A segment with every row deleted sits between two live ones.
    upsert(&live, &mut model, &[(200, 1)], true);
    upsert(&live, &mut model, &[(201, 1)], true);
    delete(&live, &mut model, &[200], true);
    upsert(&live, &mut model, &[(202, 1)], true);
    live.commit().unwrap();
    let docs = LiveDocs::open(&dir, &opts).unwrap();
    check(&docs, &model, "empty segments in between");
    delete(&live, &mut model, &[201, 202], true);
    live.close().unwrap();
    let docs = LiveDocs::open(&dir, &opts).unwrap();
    assert!(docs.is_empty());
    assert_eq!(docs.iter().count(), 0);
}

/// A reader that opens the directory while a writer logs, refreshes, commits (dropping log
/// files) and merges (dropping segments) gets, every time, the state after some prefix of
/// the writer's operations: never a mix, never an error.
#[test]
fn live_docs_opened_while_a_writer_commits_and_merges_is_one_point_of_the_log() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    const STEPS: u64 = 150;
    let d = tempfile::tempdir().unwrap();
    let model = make_collection(d.path());
    let dir = d.path().join("c");
    let opts = LoadOptions::default();
    let live = LiveCollection::open(
        &dir,
        &opts,
        LiveConfig {
            background: false,
            flat_max: 40,
            merge_factor: 3,
            ..LiveConfig::default()
        },
    )
    .unwrap();
    // states[k]: the documents after the writer's k-th operation.
    let states = Mutex::new(vec![model.clone()]);
    let done = AtomicBool::new(false);
    let mut seen: Vec<Model> = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut model = model.clone();
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for step in 1..=STEPS {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let wait = step % 3 == 0;
                if step % 4 == 0 && !model.is_empty() {
                    let id = *model.keys().nth((x % model.len() as u64) as usize).unwrap();
                    delete(&live, &mut model, &[id], wait);
                } else {
                    upsert(&live, &mut model, &[(x % 50, step)], wait);
                }
                if step % 7 == 0 {
                    live.commit().unwrap();
                }
                if step % 11 == 0 {
                    live.optimize().unwrap();
                    live.commit().unwrap();
                }
                states.lock().unwrap().push(model.clone());
            }
            done.store(true, Ordering::SeqCst);
        });
        while !done.load(Ordering::SeqCst) || seen.len() < 3 {
            let docs = LiveDocs::open(&dir, &opts).unwrap();
            let mut got = Model::new();
            for doc in docs.iter() {
                let doc = doc.unwrap();
                let DocId::Int(id) = doc.id else { panic!() };
                let src: serde_json::Value =
                    serde_json::from_slice(doc.source.as_ref().unwrap()).unwrap();
                let v = src["version"].as_u64().unwrap();
                assert!(got.insert(id, v).is_none(), "{id} twice");
            }
            assert_eq!(docs.len(), got.len() as u64);
            seen.push(got);
        }
    });
    let states = states.into_inner().unwrap();
    let merged = live.stats()["optimizer"]["merges"].as_u64().unwrap();
    assert!(merged > 0, "the writer merged segments");
    for (i, got) in seen.iter().enumerate() {
        assert!(
            states.contains(got),
            "read {i} of {} is not the state after any prefix of the writes: {got:?}",
            seen.len()
        );
    }
    eprintln!("{} reads, {merged} merges", seen.len());
}

/// Operations missing between the commit a read opened and the first one left in the log
/// (what a writer's commit can do to a reader between its reads of the manifest and of the
/// log) make the read fail, never silently leave them out.
#[test]
fn a_gap_in_the_log_after_the_commit_is_an_error_not_a_silent_loss() {
    let d = tempfile::tempdir().unwrap();
    let mut model = make_collection(d.path());
    let dir = d.path().join("c");
    let opts = LoadOptions::default();
    let first_manifest = std::fs::read(dir.join("collection.json")).unwrap();
    let live = LiveCollection::open(&dir, &opts, cfg()).unwrap();
    upsert(&live, &mut model, &[(100, 1), (101, 1), (102, 1)], true);
    // The commit drops the log of operations 1-3 (they are in its segment now).
    live.commit().unwrap();
    upsert(&live, &mut model, &[(103, 1), (104, 1)], false);
    drop(live);
    check(&LiveDocs::open(&dir, &opts).unwrap(), &model, "consistent");
    // The manifest of before that commit, with the log of after it: 1-3 are nowhere.
    std::fs::write(dir.join("collection.json"), &first_manifest).unwrap();
    // Caught by the log's continuity check at open (the log starts after the commit's
    // `wal_seq` + 1), or by LiveDocs' own count of the operations it replayed.
    let e = LiveDocs::open(&dir, &opts).unwrap_err().to_string();
    assert!(
        e.contains("operations 1..=1 are missing")
            || e.contains("holds 1 of the 2 operations up to 2: the others were dropped"),
        "{e}"
    );
}
