//! DocReader: JSONL and Parquet round trips, every bad input, skip_docs, garbage.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::data_type::{
    BoolType, ByteArray, ByteArrayType, DoubleType, FloatType, Int32Type, Int64Type,
};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use searchd_docs::{Doc, DocId, DocReader, Error, FieldSelection, Format, ReaderConfig};

fn write(dir: &Path, name: &str, body: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn read_all(path: &Path, cfg: &ReaderConfig) -> Vec<Result<Doc, Error>> {
    DocReader::open(path, cfg).unwrap().collect()
}

fn ok_docs(path: &Path, cfg: &ReaderConfig) -> Vec<Doc> {
    read_all(path, cfg)
        .into_iter()
        .map(|d| d.unwrap())
        .collect()
}

fn src(d: &Doc) -> &str {
    std::str::from_utf8(&d.source).unwrap()
}

fn vec_cfg() -> ReaderConfig {
    ReaderConfig {
        vector_field: Some("emb".to_string()),
        ..ReaderConfig::default()
    }
}

// ---------------------------------------------------------------- JSONL

#[test]
fn jsonl_round_trip_preserves_raw_values() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        r#"{"id": 1, "text": "hello", "price": 1.50, "tags": ["a", "b"], "n": null, "meta": {"x": [1, {"y": 2e3}]}, "when": "2024-02-29T12:34:56Z", "ok": true}"#,
        r#"{"text":"caf\u00e9 \"q\"","id":"doc-2","emb_ignored":[1,2]}"#,
        "",
        "   ",
        r#"{"id": 18446744073709551615}"#,
        r#"{"id":"x","text":null}"#,
    ];
    let p = write(dir.path(), "a.jsonl", lines.join("\n").as_bytes());
    let docs = ok_docs(&p, &ReaderConfig::default());
    assert_eq!(docs.len(), 4);
    assert_eq!(docs[0].pos, 1);
    assert_eq!(docs[0].id, DocId::Int(1));
    assert_eq!(docs[0].text.as_deref(), Some("hello"));
    assert_eq!(docs[0].vector, None);
    assert_eq!(
        src(&docs[0]),
        r#"{"text":"hello","price":1.50,"tags":["a", "b"],"n":null,"meta":{"x": [1, {"y": 2e3}]},"when":"2024-02-29T12:34:56Z","ok":true}"#
    );
    assert_eq!(docs[1].id, DocId::Str("doc-2".into()));
    assert_eq!(docs[1].text.as_deref(), Some("café \"q\""));
    assert_eq!(
        src(&docs[1]),
        r#"{"text":"caf\u00e9 \"q\"","emb_ignored":[1,2]}"#
    );
    assert_eq!(docs[2].pos, 5, "blank lines count for line numbers");
    assert_eq!(docs[2].id, DocId::Int(u64::MAX));
    assert_eq!(src(&docs[2]), "{}");
    assert_eq!(docs[3].text, None, "null text is absent");
    assert_eq!(src(&docs[3]), r#"{"text":null}"#);
    // Every source is valid JSON.
    for d in &docs {
        serde_json::from_slice::<serde_json::Value>(&d.source).unwrap();
    }
    assert_eq!(docs[1].id.to_string(), "doc-2");
    assert_eq!(docs[0].id.to_string(), "1");
}

#[test]
fn jsonl_vector_crlf_and_field_selection() {
    let dir = tempfile::tempdir().unwrap();
    let body = "{\"id\":7,\"emb\":[0.5,-1,2e2],\"a\":1,\"b\":2,\"text\":\"t\"}\r\n{\"id\":8,\"emb\":[],\"b\":3}\r\n";
    let p = write(dir.path(), "v.ndjson", body.as_bytes());
    let docs = ok_docs(&p, &vec_cfg());
    assert_eq!(docs[0].vector.as_deref(), Some(&[0.5f32, -1.0, 200.0][..]));
    assert_eq!(src(&docs[0]), r#"{"a":1,"b":2,"text":"t"}"#);
    assert_eq!(docs[1].vector.as_deref(), Some(&[][..]));

    let cfg = ReaderConfig {
        fields: FieldSelection::List(vec!["b".into()]),
        ..vec_cfg()
    };
    let docs = ok_docs(&p, &cfg);
    assert_eq!(src(&docs[0]), r#"{"b":2,"text":"t"}"#);
    let cfg = ReaderConfig {
        fields: FieldSelection::None,
        ..vec_cfg()
    };
    let docs = ok_docs(&p, &cfg);
    assert_eq!(src(&docs[0]), r#"{"text":"t"}"#);
    assert_eq!(src(&docs[1]), "{}");
    let cfg = ReaderConfig {
        text_field: None,
        id_field: "b".into(),
        ..ReaderConfig::default()
    };
    let docs = ok_docs(&p, &cfg);
    assert_eq!(docs[0].id, DocId::Int(2));
    assert_eq!(docs[0].text, None);
    assert_eq!(
        src(&docs[0]),
        r#"{"id":7,"emb":[0.5,-1,2e2],"a":1,"text":"t"}"#
    );
}

/// Reads a one-line file (after `pre` blank lines) and returns the error message.
fn jsonl_err(line: &str, cfg: &ReaderConfig) -> String {
    let dir = tempfile::tempdir().unwrap();
    let body = format!("\n\n{line}\n");
    let p = write(dir.path(), "bad.jsonl", body.as_bytes());
    let mut r = DocReader::open(&p, cfg).unwrap();
    let e = r.next().unwrap().unwrap_err().to_string();
    assert!(e.contains("bad.jsonl"), "{e}");
    assert!(e.contains("line 3"), "{e}");
    e
}

#[test]
fn jsonl_bad_inputs_name_line_and_field() {
    let d = ReaderConfig::default();
    let cases: &[(&str, &str)] = &[
        (r#"{"text":"x"}"#, r#"field "id" is missing"#),
        (
            r#"{"id":null}"#,
            r#"field "id" must be a string or an unsigned integer, got null"#,
        ),
        (r#"{"id":""}"#, r#"field "id" is an empty string"#),
        (
            r#"{"id":-3}"#,
            r#"field "id" must be a string or an unsigned integer, got -3"#,
        ),
        (r#"{"id":1.5}"#, "got 1.5"),
        (r#"{"id":1e3}"#, "got 1e3"),
        (r#"{"id":18446744073709551616}"#, "got 18446744073709551616"),
        (r#"{"id":true}"#, "got true"),
        (r#"{"id":{"a":1}}"#, r#"got {"a":1}"#),
        (
            r#"{"id":1,"text":12}"#,
            r#"field "text" must be a string, got 12"#,
        ),
        (
            r#"{"id":1,"text":["a"]}"#,
            r#"field "text" must be a string"#,
        ),
        (r#"{"id":1,"id":2}"#, r#"field "id" appears more than once"#),
        (r#"[1,2]"#, "not a JSON object"),
        (r#""just a string""#, "not a JSON object"),
        (r#"{"id":1"#, "column"),
        (r#"{"id":1} trailing"#, "column 10"),
    ];
    for (line, want) in cases {
        let e = jsonl_err(line, &d);
        assert!(e.contains(want), "{line}: {e}");
    }
    let v = vec_cfg();
    let cases: &[(&str, &str)] = &[
        (r#"{"id":1}"#, r#"field "emb" is missing"#),
        (
            r#"{"id":1,"emb":null}"#,
            r#"field "emb" must be an array of numbers, got null"#,
        ),
        (r#"{"id":1,"emb":"1,2"}"#, r#"field "emb" must be an array"#),
        (
            r#"{"id":1,"emb":[1,"x",3]}"#,
            r#"field "emb" component 1 must be a finite number, got "x""#,
        ),
        (
            r#"{"id":1,"emb":[1,2,null]}"#,
            "component 2 must be a finite number, got null",
        ),
        (r#"{"id":1,"emb":[[1]]}"#, "component 0"),
        (
            r#"{"id":1,"emb":[1,1e39]}"#,
            "component 1 must be a finite number",
        ),
        (r#"{"id":1,"emb":[1,NaN]}"#, "not a JSON object"),
    ];
    for (line, want) in cases {
        let e = jsonl_err(line, &v);
        assert!(e.contains(want), "{line}: {e}");
    }
}

#[test]
fn jsonl_invalid_utf8_and_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = b"{\"id\":1}\n{\"id\":\"a\xff\"}\n".to_vec();
    body.extend_from_slice(b"{\"id\":3}");
    let p = write(dir.path(), "u.jsonl", &body);
    let all = read_all(&p, &ReaderConfig::default());
    assert_eq!(all.len(), 3);
    let e = all[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("UTF-8"), "{e}");
    assert_eq!(
        all[2].as_ref().unwrap().id,
        DocId::Int(3),
        "reading goes on after a bad line"
    );
    assert_eq!(all[2].as_ref().unwrap().pos, 3);
}

#[test]
fn jsonl_skip_docs_and_progress() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = String::new();
    for i in 0..1000u64 {
        if i % 7 == 0 {
            body.push_str("  \n");
        }
        body.push_str(&format!("{{\"id\":{i},\"text\":\"doc {i}\"}}\n"));
    }
    body.push_str("{\"id\":1000}"); // no final newline
    let p = write(dir.path(), "s.jsonl", body.as_bytes());
    let cfg = ReaderConfig::default();
    let all = ok_docs(&p, &cfg);
    assert_eq!(all.len(), 1001);
    for skip in [0u64, 1, 6, 7, 500, 999, 1000, 1001, 5000] {
        let mut r = DocReader::open(&p, &cfg).unwrap();
        assert_eq!(r.total_docs_hint(), None);
        assert_eq!(r.total_bytes(), body.len() as u64);
        r.skip_docs(skip).unwrap();
        let rest: Vec<Doc> = r.by_ref().map(|d| d.unwrap()).collect();
        assert_eq!(
            rest.len() as u64,
            1001u64.saturating_sub(skip),
            "skip {skip}"
        );
        if let Some(first) = rest.first() {
            assert_eq!(
                first, &all[skip as usize],
                "skip {skip}: same doc, same line number"
            );
        }
        assert_eq!(r.bytes_read(), body.len() as u64);
    }
    // skip in two steps, after reading some
    let mut r = DocReader::open(&p, &cfg).unwrap();
    r.next().unwrap().unwrap();
    r.skip_docs(10).unwrap();
    r.skip_docs(5).unwrap();
    assert_eq!(r.next().unwrap().unwrap(), all[16]);
    assert!(r.bytes_read() > 0 && r.bytes_read() < r.total_bytes());
}

#[test]
fn format_from_path() {
    assert_eq!(
        Format::from_path(Path::new("a.jsonl")).unwrap(),
        Format::Jsonl
    );
    assert_eq!(
        Format::from_path(Path::new("a.NDJSON")).unwrap(),
        Format::Jsonl
    );
    assert_eq!(
        Format::from_path(Path::new("a.json")).unwrap(),
        Format::Jsonl
    );
    assert_eq!(
        Format::from_path(Path::new("x/a.parquet")).unwrap(),
        Format::Parquet
    );
    let e = Format::from_path(Path::new("a.csv"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("a.csv"), "{e}");
    assert!(Format::from_path(Path::new("noext")).is_err());
    let e = DocReader::open(Path::new("/nonexistent/a.jsonl"), &ReaderConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("/nonexistent/a.jsonl"), "{e}");
}

#[test]
fn doc_id_serde_untagged() {
    let ids = vec![DocId::Int(5), DocId::Str("x".into())];
    let s = serde_json::to_string(&ids).unwrap();
    assert_eq!(s, r#"[5,"x"]"#);
    assert_eq!(serde_json::from_str::<Vec<DocId>>(&s).unwrap(), ids);
}

#[test]
fn id_set_reports_duplicates() {
    let mut s = searchd_docs::IdSet::new();
    let a = Path::new("a.jsonl");
    s.insert(&DocId::Int(1), a, searchd_docs::Pos::Line(1), "id")
        .unwrap();
    s.insert(&DocId::Str("1".into()), a, searchd_docs::Pos::Line(2), "id")
        .unwrap();
    let e = s
        .insert(
            &DocId::Int(1),
            Path::new("b.jsonl"),
            searchd_docs::Pos::Line(9),
            "id",
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("b.jsonl: line 9") && e.contains("a.jsonl: line 1") && e.contains("\"id\""),
        "{e}"
    );
    assert_eq!(s.len(), 2);
}

// ---------------------------------------------------------------- Parquet

/// One leaf column's values and levels (levels omitted when the column's max level is 0).
enum Vals {
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    Bytes(Vec<ByteArray>),
}

struct Leaf {
    vals: Vals,
    def: Vec<i16>,
    rep: Vec<i16>,
}

fn req<T>(v: Vec<T>, f: impl Fn(Vec<T>) -> Vals) -> Leaf {
    Leaf {
        vals: f(v),
        def: vec![],
        rep: vec![],
    }
}

fn opt<T>(v: Vec<Option<T>>, f: impl Fn(Vec<T>) -> Vals) -> Leaf {
    let def = v.iter().map(|x| i16::from(x.is_some())).collect();
    Leaf {
        vals: f(v.into_iter().flatten().collect()),
        def,
        rep: vec![],
    }
}

/// An OPTIONAL LIST of OPTIONAL elements (3-level): max def 3, max rep 1.
fn list<T>(v: Vec<Option<Vec<Option<T>>>>, f: impl Fn(Vec<T>) -> Vals) -> Leaf {
    let (mut vals, mut def, mut rep) = (vec![], vec![], vec![]);
    for row in v {
        match row {
            None => {
                def.push(0);
                rep.push(0);
            }
            Some(items) if items.is_empty() => {
                def.push(1);
                rep.push(0);
            }
            Some(items) => {
                for (i, it) in items.into_iter().enumerate() {
                    rep.push(i16::from(i > 0));
                    match it {
                        Some(x) => {
                            def.push(3);
                            vals.push(x);
                        }
                        None => def.push(2),
                    }
                }
            }
        }
    }
    Leaf {
        vals: f(vals),
        def,
        rep,
    }
}

fn strs(v: Vec<&str>) -> Vals {
    Vals::Bytes(v.into_iter().map(ByteArray::from).collect())
}

fn write_parquet(path: &Path, schema: &str, groups: Vec<Vec<Leaf>>) {
    let schema = Arc::new(parse_message_type(schema).unwrap());
    let props = Arc::new(WriterProperties::builder().build());
    let mut w = SerializedFileWriter::new(File::create(path).unwrap(), schema, props).unwrap();
    for leaves in groups {
        let mut rg = w.next_row_group().unwrap();
        for leaf in leaves {
            let mut col = rg.next_column().unwrap().unwrap();
            let def = (!leaf.def.is_empty()).then_some(&leaf.def[..]);
            let rep = (!leaf.rep.is_empty()).then_some(&leaf.rep[..]);
            match &leaf.vals {
                Vals::I32(v) => col.typed::<Int32Type>().write_batch(v, def, rep),
                Vals::I64(v) => col.typed::<Int64Type>().write_batch(v, def, rep),
                Vals::F32(v) => col.typed::<FloatType>().write_batch(v, def, rep),
                Vals::F64(v) => col.typed::<DoubleType>().write_batch(v, def, rep),
                Vals::Bool(v) => col.typed::<BoolType>().write_batch(v, def, rep),
                Vals::Bytes(v) => col.typed::<ByteArrayType>().write_batch(v, def, rep),
            }
            .unwrap();
            col.close().unwrap();
        }
        assert!(
            rg.next_column().unwrap().is_none(),
            "schema has more columns"
        );
        rg.close().unwrap();
    }
    w.close().unwrap();
}

const FULL_SCHEMA: &str = "
message doc {
  REQUIRED BYTE_ARRAY id (UTF8);
  OPTIONAL BYTE_ARRAY text (UTF8);
  OPTIONAL group emb (LIST) { REPEATED group list { OPTIONAL FLOAT element; } }
  OPTIONAL INT64 n;
  OPTIONAL DOUBLE score;
  OPTIONAL BOOLEAN flag;
  OPTIONAL INT64 ts (TIMESTAMP(MILLIS,true));
  OPTIONAL INT64 tsu (TIMESTAMP(MICROS,true));
  OPTIONAL INT32 day (DATE);
  OPTIONAL group tags (LIST) { REPEATED group list { OPTIONAL BYTE_ARRAY element (UTF8); } }
  OPTIONAL group meta { OPTIONAL BYTE_ARRAY a (UTF8); OPTIONAL INT32 b; }
}";

#[test]
fn parquet_round_trip_every_type() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("full.parquet");
    // meta: row 0 {a:"x", b:1}; row 1 null; row 2 {a: null, b: 2}
    let meta_a = Leaf {
        vals: strs(vec!["x"]),
        def: vec![2, 0, 1],
        rep: vec![],
    };
    let meta_b = Leaf {
        vals: Vals::I32(vec![1, 2]),
        def: vec![2, 0, 2],
        rep: vec![],
    };
    write_parquet(
        &p,
        FULL_SCHEMA,
        vec![vec![
            req(vec!["a", "b", "c"], strs),
            opt(vec![Some("hello \"w\""), None, Some("")], strs),
            list(
                vec![
                    Some(vec![Some(0.5), Some(-1.0)]),
                    Some(vec![]),
                    Some(vec![Some(3.0)]),
                ],
                Vals::F32,
            ),
            opt(vec![Some(-5i64), None, Some(i64::MAX)], Vals::I64),
            opt(vec![Some(0.1f64), Some(2.5), None], Vals::F64),
            opt(vec![Some(true), Some(false), None], Vals::Bool),
            opt(vec![Some(1_709_210_096_123i64), None, Some(-1)], Vals::I64),
            opt(vec![Some(1_709_210_096_123_456i64), None, None], Vals::I64),
            opt(vec![Some(19_782i32), None, Some(0)], Vals::I32),
            list(
                vec![Some(vec![Some("t1"), None, Some("t2")]), None, Some(vec![])],
                strs,
            ),
            meta_a,
            meta_b,
        ]],
    );
    let mut r = DocReader::open(&p, &vec_cfg()).unwrap();
    assert_eq!(r.total_docs_hint(), Some(3));
    assert_eq!(r.total_bytes(), std::fs::metadata(&p).unwrap().len());
    assert_eq!(r.bytes_read(), 0);
    let docs: Vec<Doc> = r.by_ref().map(|d| d.unwrap()).collect();
    assert_eq!(r.bytes_read(), r.total_bytes());
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[0].pos, 0);
    assert_eq!(docs[2].pos, 2);
    assert_eq!(docs[0].id, DocId::Str("a".into()));
    assert_eq!(docs[0].text.as_deref(), Some("hello \"w\""));
    assert_eq!(docs[1].text, None);
    assert_eq!(docs[2].text.as_deref(), Some(""));
    assert_eq!(docs[0].vector.as_deref(), Some(&[0.5f32, -1.0][..]));
    assert_eq!(docs[1].vector.as_deref(), Some(&[][..]));
    assert_eq!(
        src(&docs[0]),
        r#"{"text":"hello \"w\"","n":-5,"score":0.1,"flag":true,"ts":"2024-02-29T12:34:56.123Z","tsu":"2024-02-29T12:34:56.123456Z","day":"2024-02-29","tags":["t1",null,"t2"],"meta":{"a":"x","b":1}}"#
    );
    assert_eq!(src(&docs[1]), r#"{"score":2.5,"flag":false}"#);
    assert_eq!(
        src(&docs[2]),
        r#"{"text":"","n":9223372036854775807,"ts":"1969-12-31T23:59:59.999Z","day":"1970-01-01","tags":[],"meta":{"b":2}}"#
    );
    // Selection: only "flag" (plus text), with a projection.
    let cfg = ReaderConfig {
        fields: FieldSelection::List(vec!["flag".into(), "nope".into()]),
        ..vec_cfg()
    };
    let docs = ok_docs(&p, &cfg);
    assert_eq!(src(&docs[0]), r#"{"text":"hello \"w\"","flag":true}"#);
    assert_eq!(docs[0].vector.as_deref(), Some(&[0.5f32, -1.0][..]));
    let cfg = ReaderConfig {
        fields: FieldSelection::None,
        text_field: None,
        ..vec_cfg()
    };
    let docs = ok_docs(&p, &cfg);
    assert_eq!(src(&docs[0]), "{}");
    assert_eq!(docs[0].text, None);
}

#[test]
fn parquet_integer_ids_of_every_width() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "REQUIRED INT32 id;",
            req(vec![0i32, 7, i32::MAX], Vals::I32),
            vec![0u64, 7, i32::MAX as u64],
        ),
        (
            "REQUIRED INT64 id;",
            req(vec![1i64, i64::MAX], Vals::I64),
            vec![1, i64::MAX as u64],
        ),
        (
            "REQUIRED INT64 id (INTEGER(64,false));",
            req(vec![-1i64, 3], Vals::I64),
            vec![u64::MAX, 3],
        ),
        (
            "REQUIRED INT32 id (INTEGER(32,false));",
            req(vec![-1i32], Vals::I32),
            vec![u32::MAX as u64],
        ),
    ];
    for (i, (col, leaf, want)) in cases.into_iter().enumerate() {
        let p = dir.path().join(format!("ids{i}.parquet"));
        write_parquet(&p, &format!("message m {{ {col} }}"), vec![vec![leaf]]);
        let docs = ok_docs(&p, &ReaderConfig::default());
        let got: Vec<DocId> = docs.iter().map(|d| d.id.clone()).collect();
        let want: Vec<DocId> = want.into_iter().map(DocId::Int).collect();
        assert_eq!(got, want, "{col}");
        assert!(docs.iter().all(|d| d.source == b"{}" && d.text.is_none()));
    }
}

fn pq_errs(path: &Path, cfg: &ReaderConfig) -> Vec<String> {
    read_all(path, cfg)
        .into_iter()
        .filter_map(|d| d.err().map(|e| e.to_string()))
        .collect()
}

#[test]
fn parquet_bad_inputs_name_row_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.parquet");
    write_parquet(
        &p,
        "message m { OPTIONAL INT64 id; OPTIONAL INT32 text; OPTIONAL group emb (LIST) { REPEATED group list { OPTIONAL DOUBLE element; } } }",
        vec![vec![
            opt(vec![Some(1), None, Some(-3), Some(4), Some(5), Some(6), Some(7)], Vals::I64),
            opt(vec![None, None, None, Some(12), None, None, None], Vals::I32),
            list(
                vec![
                    Some(vec![Some(1.0)]),
                    Some(vec![]),
                    Some(vec![]),
                    Some(vec![]),
                    None,
                    Some(vec![Some(1.0), Some(f64::NAN)]),
                    Some(vec![Some(1.0), Some(1e300), None]),
                ],
                Vals::F64,
            ),
        ]],
    );
    let errs = pq_errs(&p, &vec_cfg());
    let want = [
        r#"row 1: field "id" is missing"#,
        r#"row 2: field "id" must be a string or an unsigned integer, got -3"#,
        r#"row 3: field "text" must be a string, got 12"#,
        r#"row 4: field "emb" is missing"#,
        r#"row 5: field "emb" component 1 must be a finite number, got NaN"#,
        r#"row 6: field "emb" component 1 must be a finite number"#,
    ];
    assert_eq!(errs.len(), want.len(), "{errs:#?}");
    for (e, w) in errs.iter().zip(want) {
        assert!(e.contains("bad.parquet") && e.contains(w), "{e} / {w}");
    }
    // A vector column that is not a list; a missing id column; an empty string id.
    let p2 = dir.path().join("bad2.parquet");
    write_parquet(
        &p2,
        "message m { REQUIRED BYTE_ARRAY id (UTF8); REQUIRED FLOAT emb; }",
        vec![vec![
            req(vec!["", "ok"], strs),
            req(vec![1.0f32, 2.0], Vals::F32),
        ]],
    );
    let e = DocReader::open(&p2, &vec_cfg()).err().unwrap().to_string();
    assert!(
        e.contains("bad2.parquet") && e.contains("\"emb\"") && e.contains("LIST"),
        "{e}"
    );
    let cfg = ReaderConfig {
        id_field: "key".into(),
        ..ReaderConfig::default()
    };
    let e = DocReader::open(&p2, &cfg).err().unwrap().to_string();
    assert!(e.contains("\"key\"") && e.contains("no such column"), "{e}");
    let errs = pq_errs(&p2, &ReaderConfig::default());
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].contains(r#"row 0: field "id" is an empty string"#),
        "{}",
        errs[0]
    );
}

#[test]
fn parquet_skip_docs_across_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("groups.parquet");
    let mut groups = vec![];
    let mut next = 0i64;
    for size in [10usize, 1, 25, 7] {
        let ids: Vec<i64> = (next..next + size as i64).collect();
        let texts: Vec<String> = ids.iter().map(|i| format!("t{i}")).collect();
        next += size as i64;
        groups.push(vec![
            req(ids, Vals::I64),
            req(texts.iter().map(|s| s.as_str()).collect(), strs),
        ]);
    }
    write_parquet(
        &p,
        "message m { REQUIRED INT64 id; REQUIRED BYTE_ARRAY text (UTF8); }",
        groups,
    );
    let cfg = ReaderConfig::default();
    let all = ok_docs(&p, &cfg);
    assert_eq!(all.len(), 43);
    for (i, d) in all.iter().enumerate() {
        assert_eq!(d.id, DocId::Int(i as u64));
        assert_eq!(d.pos, i as u64);
    }
    for skip in [0u64, 1, 9, 10, 11, 12, 35, 36, 42, 43, 100] {
        let mut r = DocReader::open(&p, &cfg).unwrap();
        r.skip_docs(skip).unwrap();
        let rest: Vec<Doc> = r.by_ref().map(|d| d.unwrap()).collect();
        assert_eq!(rest.len() as u64, 43u64.saturating_sub(skip), "skip {skip}");
        if let Some(f) = rest.first() {
            assert_eq!(f, &all[skip as usize]);
        }
    }
    let mut r = DocReader::open(&p, &cfg).unwrap();
    r.next().unwrap().unwrap();
    r.skip_docs(10).unwrap();
    assert!(r.bytes_read() > 0);
    r.skip_docs(1).unwrap();
    assert_eq!(r.next().unwrap().unwrap().id, DocId::Int(12));
}

#[test]
fn parquet_seeded_random_round_trip() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rand.parquet");
    let n = 300;
    let ids: Vec<String> = (0..n)
        .map(|i| format!("id-{i}-{}", rng.random::<u32>()))
        .collect();
    let texts: Vec<Option<String>> = (0..n)
        .map(|_| {
            rng.random_bool(0.8).then(|| {
                (0..rng.random_range(0..40))
                    .map(|_| rng.random_range('a'..='z'))
                    .collect()
            })
        })
        .collect();
    let vecs: Vec<Option<Vec<Option<f32>>>> = (0..n)
        .map(|_| {
            Some(
                (0..4)
                    .map(|_| Some(rng.random_range(-1.0f32..1.0)))
                    .collect(),
            )
        })
        .collect();
    let nums: Vec<Option<i64>> = (0..n)
        .map(|_| rng.random_bool(0.5).then(|| rng.random()))
        .collect();
    write_parquet(
        &p,
        "message m { REQUIRED BYTE_ARRAY id (UTF8); OPTIONAL BYTE_ARRAY text (UTF8); OPTIONAL group emb (LIST) { REPEATED group list { OPTIONAL FLOAT element; } } OPTIONAL INT64 n; }",
        vec![vec![
            req(ids.iter().map(|s| s.as_str()).collect(), strs),
            opt(texts.iter().map(|t| t.as_deref()).collect(), strs),
            list(vecs.clone(), Vals::F32),
            opt(nums.clone(), Vals::I64),
        ]],
    );
    let docs = ok_docs(&p, &vec_cfg());
    assert_eq!(docs.len(), n);
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(d.id, DocId::Str(ids[i].clone()));
        assert_eq!(d.text, texts[i]);
        let want: Vec<f32> = vecs[i]
            .as_ref()
            .unwrap()
            .iter()
            .map(|x| x.unwrap())
            .collect();
        assert_eq!(d.vector.as_ref().unwrap(), &want);
        let v: serde_json::Value = serde_json::from_slice(&d.source).unwrap();
        assert_eq!(v.get("text").and_then(|t| t.as_str()), texts[i].as_deref());
        assert_eq!(v.get("n").and_then(|t| t.as_i64()), nums[i]);
        assert!(v.get("id").is_none() && v.get("emb").is_none());
    }
}

// ---------------------------------------------------------------- garbage never panics

fn drain(path: &Path, cfg: &ReaderConfig) {
    if let Ok(mut r) = DocReader::open(path, cfg) {
        let _ = r.skip_docs(1);
        for _ in r.by_ref().take(10_000) {}
        let _ = r.bytes_read();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn garbage_jsonl_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "g.jsonl", &bytes);
        drain(&p, &ReaderConfig::default());
        drain(&p, &vec_cfg());
    }

    #[test]
    fn jsonish_lines_never_panic(lines in proptest::collection::vec(
        prop_oneof![
            Just("{\"id\":".to_string()),
            "[-0-9eE.]{0,8}".prop_map(String::from),
            Just("\"emb\":[1,".to_string()),
            Just("\"text\":".to_string()),
            Just("null,".to_string()),
            Just("}".to_string()),
            Just("\n".to_string()),
            Just("\"\\u00e9\"".to_string()),
        ], 0..40)) {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "g.jsonl", lines.concat().as_bytes());
        drain(&p, &vec_cfg());
    }
}

#[test]
fn garbage_parquet_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.parquet");
    write_parquet(
        &good,
        "message m { REQUIRED INT64 id; OPTIONAL BYTE_ARRAY text (UTF8); OPTIONAL group emb (LIST) { REPEATED group list { OPTIONAL FLOAT element; } } }",
        vec![vec![
            req((0..50).collect(), Vals::I64),
            opt((0..50).map(|i| (i % 3 != 0).then_some("some text here")).collect(), strs),
            list((0..50).map(|i| Some(vec![Some(i as f32), None])).collect(), Vals::F32),
        ]],
    );
    let bytes = std::fs::read(&good).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let p = dir.path().join("g.parquet");
    // Pure garbage, with and without the magic.
    for len in [0usize, 3, 8, 12, 100] {
        let mut g: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        std::fs::write(&p, &g).unwrap();
        drain(&p, &vec_cfg());
        if len >= 8 {
            g[..4].copy_from_slice(b"PAR1");
            let l = g.len();
            g[l - 4..].copy_from_slice(b"PAR1");
            std::fs::write(&p, &g).unwrap();
            drain(&p, &vec_cfg());
        }
    }
    // Truncations and byte flips of a real file.
    for cut in (0..bytes.len()).step_by(37) {
        std::fs::write(&p, &bytes[..cut]).unwrap();
        drain(&p, &vec_cfg());
    }
    for _ in 0..300 {
        let mut g = bytes.clone();
        for _ in 0..rng.random_range(1..4) {
            let i = rng.random_range(0..g.len());
            g[i] ^= 1 << rng.random_range(0..8);
        }
        std::fs::write(&p, &g).unwrap();
        drain(&p, &vec_cfg());
        drain(&p, &ReaderConfig::default());
    }
}

#[test]
fn parquet_binary_decimal_and_float_columns() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("misc.parquet");
    write_parquet(
        &p,
        "message m { REQUIRED INT64 id; OPTIONAL BYTE_ARRAY blob; OPTIONAL BYTE_ARRAY plain; OPTIONAL INT32 price (DECIMAL(5,2)); OPTIONAL FLOAT f; OPTIONAL DOUBLE d; }",
        vec![vec![
            req(vec![1i64, 2], Vals::I64),
            Leaf { vals: Vals::Bytes(vec![ByteArray::from(vec![0xffu8, 0, 1])]), def: vec![1, 0], rep: vec![] },
            opt(vec![Some("utf8 anyway"), None], strs),
            opt(vec![Some(-12345i32), Some(7)], Vals::I32),
            opt(vec![Some(0.1f32), Some(f32::NAN)], Vals::F32),
            opt(vec![Some(f64::INFINITY), Some(1e300)], Vals::F64),
        ]],
    );
    let docs = ok_docs(&p, &ReaderConfig::default());
    assert_eq!(
        src(&docs[0]),
        r#"{"blob":"/wAB","plain":"utf8 anyway","price":-123.45,"f":0.1}"#
    );
    assert_eq!(src(&docs[1]), r#"{"price":0.07,"d":1e+300}"#);
}

#[test]
fn jsonl_byte_order_mark_on_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "bom.jsonl",
        "\u{feff}{\"id\":1}\n{\"id\":2}\n".as_bytes(),
    );
    let docs = ok_docs(&p, &ReaderConfig::default());
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0].id, DocId::Int(1));
}
