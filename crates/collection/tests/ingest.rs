//! Ingest round trips, resume after an interrupted run, and bad documents.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use searchd_collection::embed::{Embedded, TextEmbedder, TextKind};
use searchd_collection::ingest::{checkpoint_dir, ingest, Event, IngestConfig};
use searchd_collection::{Collection, DocId, IdKind, ModelRecord};
use searchd_engine::{IndexKind, LoadOptions, SearchParams};

const DIM: usize = 16;

/// A deterministic "model": a hashed bag of words, normalised. Fails on call `fail_at`
/// (counting from 0) to simulate a crash in the middle of the embedding phase.
struct HashEmbedder {
    calls: AtomicUsize,
    fail_at: Option<usize>,
}

impl HashEmbedder {
    fn new(fail_at: Option<usize>) -> HashEmbedder {
        HashEmbedder {
            calls: AtomicUsize::new(0),
            fail_at,
        }
    }
}

fn hash_vec(text: &str) -> Vec<f32> {
    let mut v = vec![0.01f32; DIM];
    for w in text.split_whitespace() {
        let h = w.bytes().fold(1469598103934665603u64, |h, b| {
            (h ^ b as u64).wrapping_mul(1099511628211)
        });
        v[(h % DIM as u64) as usize] += 1.0;
        v[((h >> 20) % DIM as u64) as usize] -= 0.5;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

impl TextEmbedder for HashEmbedder {
    fn record(&self) -> ModelRecord {
        ModelRecord {
            name: "hash-test".into(),
            checksum: "0123abcd".into(),
            dim: DIM,
            max_length: 128,
            pooling: "mean".into(),
            normalize: true,
            query_prefix: None,
            passage_prefix: None,
        }
    }
    fn embed(&self, texts: &[&str], kind: TextKind) -> Result<Embedded, String> {
        assert_eq!(kind, TextKind::Passage, "ingest embeds passages");
        let c = self.calls.fetch_add(1, Ordering::SeqCst);
        if Some(c) == self.fail_at {
            return Err("simulated crash".into());
        }
        Ok(Embedded {
            vectors: texts.iter().flat_map(|t| hash_vec(t)).collect(),
            truncated: vec![false; texts.len()],
        })
    }
}

const WORDS: [&str; 12] = [
    "tide", "moon", "river", "stone", "wind", "salt", "glass", "ember", "frost", "cedar", "dune",
    "harbor",
];

fn write_docs(path: &Path, n: usize) {
    let mut f = std::fs::File::create(path).unwrap();
    for i in 0..n {
        let text: Vec<&str> = (0..6)
            .map(|j| WORDS[(i * 7 + j * 5 + i / 3) % 12])
            .collect();
        let id = if i % 3 == 0 {
            format!("\"doc-{i}\"")
        } else {
            (1000 + i).to_string()
        };
        writeln!(
            f,
            r#"{{"id": {id}, "text": "{} {i}", "price": 1.50, "tags": ["a", "b{}"], "ok": {}, "when": "2024-01-0{}T00:00:00Z", "none": null}}"#,
            text.join(" "),
            i % 4,
            i % 2 == 0,
            1 + i % 9
        )
        .unwrap();
    }
}

fn config(docs: &Path, out: &Path) -> IngestConfig {
    let mut c = IngestConfig::new(docs, out);
    c.checkpoint_every = 7;
    c.batch = 3;
    c.build.threads = 1;
    c.build.hnsw.m = 8;
    c.build.hnsw.ef_construction = 50;
    c
}

fn quiet(_: Event) {}

#[test]
fn jsonl_round_trip_with_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs.jsonl");
    write_docs(&docs, 60);
    let out = dir.path().join("coll");
    let emb = HashEmbedder::new(None);
    let report = ingest(&config(&docs, &out), Some(&emb), &quiet).unwrap();
    assert_eq!(report.docs, 60);
    assert_eq!(report.embedded, 60);
    assert_eq!(report.resumed, 0);
    assert!(!checkpoint_dir(&out).exists(), "checkpoints are removed");

    let c = Collection::open(&out, &LoadOptions::default()).unwrap();
    assert_eq!(c.len(), 60);
    assert_eq!(c.dim(), DIM);
    let m = c.manifest().unwrap();
    assert_eq!(m.id_kind, IdKind::Mixed);
    assert_eq!(m.model.as_ref().unwrap().checksum, "0123abcd");
    assert_eq!(
        m.fields,
        vec!["none", "ok", "price", "tags", "text", "when"]
    );
    // Stored fields come back byte for byte ("1.50" stays "1.50").
    let r = c.lookup(&DocId::Str("doc-3".into())).unwrap();
    let src = String::from_utf8(c.source(r).unwrap().unwrap()).unwrap();
    assert!(
        src.contains(r#""price":1.50"#) || src.contains(r#""price": 1.50"#),
        "{src}"
    );
    assert!(src.contains(r#""tags""#), "{src}");
    assert!(
        !src.contains(r#""id""#),
        "the id is not a stored field: {src}"
    );
    // Integer ids found by integer and by their string spelling (URL paths).
    let a = c.lookup(&DocId::Int(1001)).unwrap();
    assert_eq!(c.lookup(&DocId::Str("1001".into())), Some(a));
    assert_eq!(c.doc_id(a), Some(&DocId::Int(1001)));
    assert!(c.lookup(&DocId::Int(5)).is_none());
    // Every document finds itself first with its own text's vector.
    let texts: Vec<String> = std::fs::read_to_string(&docs)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let mut found = 0;
    for (i, t) in texts.iter().enumerate() {
        let hits = c
            .search(&hash_vec(t), &SearchParams::new(1, 64), None)
            .unwrap();
        let want = c
            .lookup(&if i % 3 == 0 {
                DocId::Str(format!("doc-{i}"))
            } else {
                DocId::Int(1000 + i as u64)
            })
            .unwrap();
        // Texts can collide under the toy model; the top score must equal the own one.
        let own = c.vector(want).unwrap().unwrap();
        let best = hits[0].score;
        let own_score: f32 = own.iter().zip(hash_vec(t)).map(|(a, b)| a * b).sum();
        assert!((best - own_score).abs() < 1e-4 || hits[0].doc == want);
        found += (hits[0].doc == want) as usize;
    }
    assert!(found >= 40, "only {found} of 60 found themselves");
    // "More like this" leaves the query document out.
    let hits = c
        .search(
            &c.vector(a).unwrap().unwrap(),
            &SearchParams::new(5, 64),
            Some(a),
        )
        .unwrap();
    assert!(hits.iter().all(|h| h.doc != a));
}

#[test]
fn interrupted_embedding_resumes_and_yields_the_same_collection() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs.jsonl");
    write_docs(&docs, 50);
    // Reference: one uninterrupted run.
    let clean = dir.path().join("clean");
    ingest(
        &config(&docs, &clean),
        Some(&HashEmbedder::new(None)),
        &quiet,
    )
    .unwrap();

    // Crash inside the 3rd chunk (chunks of 7 docs, 3 texts per call: call 7 is in chunk 3).
    let out = dir.path().join("coll");
    let err = ingest(
        &config(&docs, &out),
        Some(&HashEmbedder::new(Some(7))),
        &quiet,
    )
    .unwrap_err();
    assert!(err.to_string().contains("simulated crash"), "{err}");
    assert!(!out.exists(), "nothing half-written at the output path");
    let work = checkpoint_dir(&out);
    let chunks = std::fs::read_dir(&work)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("emb-")
        })
        .count();
    assert_eq!(chunks, 2, "two whole chunks were checkpointed");
    // A torn temporary file (as a kill -9 mid-write leaves) is ignored.
    std::fs::write(work.join("emb-000002.f32.tmp"), b"torn").unwrap();

    let resumed_embedder = HashEmbedder::new(None);
    let r = ingest(&config(&docs, &out), Some(&resumed_embedder), &quiet).unwrap();
    assert_eq!(r.resumed, 14);
    assert_eq!(r.embedded, 36);
    assert_eq!(r.docs, 50);

    let a = Collection::open(&clean, &LoadOptions::default()).unwrap();
    let b = Collection::open(&out, &LoadOptions::default()).unwrap();
    assert_eq!(a.len(), b.len());
    for seg_row in 0..a.len() as u64 {
        let r = searchd_collection::DocRef {
            segment: 0,
            row: seg_row,
        };
        assert_eq!(a.doc_id(r), b.doc_id(r));
        assert_eq!(a.source(r).unwrap(), b.source(r).unwrap());
        assert_eq!(a.vector(r).unwrap(), b.vector(r).unwrap());
    }
    // Deterministic build (one thread): identical answers.
    for w in WORDS {
        let q = hash_vec(w);
        let p = SearchParams::new(10, 32);
        assert_eq!(
            a.search(&q, &p, None).unwrap(),
            b.search(&q, &p, None).unwrap()
        );
    }
}

#[test]
fn checkpoints_of_another_input_are_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs.jsonl");
    write_docs(&docs, 30);
    let out = dir.path().join("coll");
    let _ = ingest(
        &config(&docs, &out),
        Some(&HashEmbedder::new(Some(4))),
        &quiet,
    )
    .unwrap_err();
    write_docs(&docs, 31);
    let err = ingest(&config(&docs, &out), Some(&HashEmbedder::new(None)), &quiet).unwrap_err();
    assert!(
        err.to_string().contains("checkpoints of another ingest"),
        "{err}"
    );
    let mut c = config(&docs, &out);
    c.force = true;
    let r = ingest(&c, Some(&HashEmbedder::new(None)), &quiet).unwrap();
    assert_eq!((r.docs, r.resumed), (31, 0));
}

#[test]
fn given_vectors_and_a_flat_index() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs.jsonl");
    let mut f = std::fs::File::create(&docs).unwrap();
    for i in 0..20 {
        let v: Vec<f32> = (0..4).map(|j| ((i * 4 + j) as f32).sin() + 1.1).collect();
        writeln!(f, r#"{{"key": "k{i}", "emb": {:?}, "n": {i}}}"#, v).unwrap();
    }
    drop(f);
    let out = dir.path().join("c");
    let mut c = config(&docs, &out);
    c.reader.id_field = "key".into();
    c.reader.vector_field = Some("emb".into());
    c.build.kind = IndexKind::Flat;
    let r = ingest(&c, None, &quiet).unwrap();
    assert_eq!((r.docs, r.dim), (20, 4));
    let coll = Collection::open(&out, &LoadOptions::default()).unwrap();
    assert!(coll.model().is_none());
    assert_eq!(coll.manifest().unwrap().id_kind, IdKind::Str);
    let r7 = coll.lookup(&DocId::Str("k7".into())).unwrap();
    let v = coll.vector(r7).unwrap().unwrap().to_vec();
    let hits = coll.search(&v, &SearchParams::new(1, 1), None).unwrap();
    assert_eq!(hits[0].doc, r7);
    let src = String::from_utf8(coll.source(r7).unwrap().unwrap()).unwrap();
    assert!(
        !src.contains("emb"),
        "the vector is not a stored field: {src}"
    );
}

fn ingest_err(lines: &[&str], setup: impl Fn(&mut IngestConfig), model: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("bad.jsonl");
    std::fs::write(&docs, lines.join("\n")).unwrap();
    let out = dir.path().join("out");
    let mut c = config(&docs, &out);
    setup(&mut c);
    let emb = HashEmbedder::new(None);
    let e = ingest(&c, model.then_some(&emb as &dyn TextEmbedder), &quiet).unwrap_err();
    assert!(e.is_input(), "{e} is bad input");
    assert!(!out.exists(), "nothing written for {lines:?}");
    e.to_string()
}

#[test]
fn bad_documents_are_named() {
    let vec_field = |c: &mut IngestConfig| c.reader.vector_field = Some("v".into());
    type Setup = Box<dyn Fn(&mut IngestConfig)>;
    let cases: Vec<(Vec<&str>, Setup, bool, &str)> = vec![
        (
            vec![
                r#"{"id": 1, "text": "a"}"#,
                r#"{"id": 2, "text": "b"}"#,
                r#"{"id": 1, "text": "c"}"#,
            ],
            Box::new(|_| {}),
            true,
            "line 3",
        ),
        (
            vec![r#"{"id": 1, "text": "a"}"#, r#"{"text": "b"}"#],
            Box::new(|_| {}),
            true,
            "line 2",
        ),
        (
            vec![r#"{"id": "", "text": "a"}"#],
            Box::new(|_| {}),
            true,
            "empty",
        ),
        (
            vec![r#"{"id": 1, "text": 12}"#],
            Box::new(|_| {}),
            true,
            "text",
        ),
        (vec![r#"{"id": 1}"#], Box::new(|_| {}), true, "needs text"),
        (
            vec![r#"{"id": 1, "v": [1, 2]}"#, r#"{"id": 2, "v": [1, 2, 3]}"#],
            Box::new(vec_field),
            false,
            "3 dimensions",
        ),
        (
            vec![r#"{"id": 1, "v": [1, "x"]}"#],
            Box::new(vec_field),
            false,
            "line 1",
        ),
        (
            vec![r#"{"id": 1, "text": "a"}"#],
            Box::new(|_| {}),
            false,
            "--model",
        ),
        (vec![], Box::new(|_| {}), true, "no documents"),
    ];
    for (lines, setup, model, want) in cases {
        let msg = ingest_err(&lines, setup, model);
        assert!(
            msg.contains(want),
            "{lines:?}: {msg:?} should mention {want:?}"
        );
    }
}

#[test]
fn skip_bad_counts_and_skips() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("d.jsonl");
    std::fs::write(
        &docs,
        "{\"id\": 1, \"text\": \"a b\"}\n{\"id\": 1, \"text\": \"dup\"}\n{\"text\": \"no id\"}\n{\"id\": 3, \"text\": \"c d\"}\n",
    )
    .unwrap();
    let out = dir.path().join("o");
    let mut c = config(&docs, &out);
    c.skip_bad = true;
    c.build.kind = IndexKind::Flat;
    let r = ingest(&c, Some(&HashEmbedder::new(None)), &quiet).unwrap();
    assert_eq!((r.docs, r.skipped), (2, 2));
}

#[test]
fn an_existing_output_is_refused_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("d.jsonl");
    write_docs(&docs, 5);
    let out = dir.path().join("o");
    std::fs::create_dir(&out).unwrap();
    let mut c = config(&docs, &out);
    c.build.kind = IndexKind::Flat;
    let e = ingest(&c, Some(&HashEmbedder::new(None)), &quiet).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    c.force = true;
    ingest(&c, Some(&HashEmbedder::new(None)), &quiet).unwrap();
    assert!(Collection::open(&out, &LoadOptions::default()).is_ok());
}

mod parquet_input {
    use std::fs::File;
    use std::sync::Arc;

    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, FloatType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use searchd_collection::ingest::{ingest, IngestConfig};
    use searchd_collection::{Collection, DocId, IdKind};
    use searchd_engine::{IndexKind, LoadOptions, SearchParams};

    /// Levels of an OPTIONAL LIST of REQUIRED elements, every row present and non-empty.
    fn list_levels(rows: &[usize]) -> (Vec<i16>, Vec<i16>) {
        let (mut def, mut rep) = (vec![], vec![]);
        for &len in rows {
            for i in 0..len {
                def.push(2);
                rep.push(i16::from(i > 0));
            }
        }
        (def, rep)
    }

    #[test]
    fn parquet_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docs.parquet");
        let schema = Arc::new(
            parse_message_type(
                "message doc {
                  REQUIRED INT64 id;
                  REQUIRED BYTE_ARRAY text (UTF8);
                  OPTIONAL group v (LIST) { REPEATED group list { REQUIRED FLOAT element; } }
                  OPTIONAL DOUBLE price;
                  OPTIONAL group tags (LIST) { REPEATED group list { REQUIRED BYTE_ARRAY element (UTF8); } }
                }",
            )
            .unwrap(),
        );
        let n = 30usize;
        let mut w = SerializedFileWriter::new(
            File::create(&path).unwrap(),
            schema,
            Arc::new(WriterProperties::builder().build()),
        )
        .unwrap();
        let mut rg = w.next_row_group().unwrap();
        let ids: Vec<i64> = (0..n as i64).map(|i| 100 + i).collect();
        let texts: Vec<ByteArray> = (0..n)
            .map(|i| ByteArray::from(format!("text {i}").as_str()))
            .collect();
        let vecs: Vec<f32> = (0..n * 4).map(|k| ((k * 7 % 11) as f32) + 0.5).collect();
        let prices: Vec<f64> = (0..n).map(|i| i as f64 * 0.25).collect();
        let tags: Vec<ByteArray> = (0..n * 2)
            .map(|k| ByteArray::from(format!("t{}", k % 3).as_str()))
            .collect();
        let mut col = rg.next_column().unwrap().unwrap();
        col.typed::<Int64Type>()
            .write_batch(&ids, None, None)
            .unwrap();
        col.close().unwrap();
        let mut col = rg.next_column().unwrap().unwrap();
        col.typed::<ByteArrayType>()
            .write_batch(&texts, None, None)
            .unwrap();
        col.close().unwrap();
        let (def, rep) = list_levels(&vec![4; n]);
        let mut col = rg.next_column().unwrap().unwrap();
        col.typed::<FloatType>()
            .write_batch(&vecs, Some(&def), Some(&rep))
            .unwrap();
        col.close().unwrap();
        let mut col = rg.next_column().unwrap().unwrap();
        col.typed::<DoubleType>()
            .write_batch(&prices, Some(&vec![1; n]), None)
            .unwrap();
        col.close().unwrap();
        let (def, rep) = list_levels(&vec![2; n]);
        let mut col = rg.next_column().unwrap().unwrap();
        col.typed::<ByteArrayType>()
            .write_batch(&tags, Some(&def), Some(&rep))
            .unwrap();
        col.close().unwrap();
        rg.close().unwrap();
        w.close().unwrap();

        let out = dir.path().join("coll");
        let mut c = IngestConfig::new(&path, &out);
        c.reader.vector_field = Some("v".into());
        c.build.kind = IndexKind::Flat;
        let r = ingest(&c, None, &|_| {}).unwrap();
        assert_eq!((r.docs, r.dim), (n as u64, 4));
        let coll = Collection::open(&out, &LoadOptions::default()).unwrap();
        assert_eq!(coll.manifest().unwrap().id_kind, IdKind::Int);
        let d = coll.lookup(&DocId::Int(107)).unwrap();
        let src: serde_json::Value =
            serde_json::from_slice(&coll.source(d).unwrap().unwrap()).unwrap();
        assert_eq!(
            src,
            serde_json::json!({"text": "text 7", "price": 1.75, "tags": ["t2", "t0"]})
        );
        let v = coll.vector(d).unwrap().unwrap().to_vec();
        let hits = coll.search(&v, &SearchParams::new(1, 1), None).unwrap();
        assert_eq!(coll.doc_id(hits[0].doc), Some(&DocId::Int(107)));
    }
}
