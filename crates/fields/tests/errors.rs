//! Table-driven bad inputs: every filter / sort / cursor / ingest error with its path.

use searchd_fields::*;
use serde_json::{json, Map, Value};

fn index() -> (tempfile::TempDir, FieldIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut w = FieldsWriter::new(FieldsConfig {
        declared: vec![("code".into(), FieldType::Keyword)],
        skip: vec!["text".into()],
    });
    let docs = [
        json!({"brand": "acme", "price": 1.5, "qty": 2, "ok": true, "ts": "2024-01-01T00:00:00Z",
               "meta": {"a": 1}, "mixed": 1, "code": 7, "text": "hello"}),
        json!({"brand": "globex", "price": 2, "qty": 3, "ok": false, "mixed": "x", "code": "b"}),
    ];
    for (i, d) in docs.iter().enumerate() {
        w.add(i as u32, d.as_object().unwrap()).unwrap();
    }
    w.finish(dir.path(), 2).unwrap();
    let idx = FieldIndex::open(dir.path()).unwrap();
    (dir, idx)
}

#[test]
fn filter_errors_name_their_path() {
    let (_d, idx) = index();
    let s = idx.schema();
    let deep = (0..40).fold(
        json!({"match_all": {}}),
        |f, _| json!({"bool": {"must": f}}),
    );
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"colour": {}}),
            "filter.colour",
            "unknown clause \"colour\"",
        ),
        (
            json!({"term": {"colour": "red"}}),
            "filter.term.colour",
            "unknown field \"colour\"",
        ),
        (
            json!({"term": {"meta": 1}}),
            "filter.term.meta",
            "is not indexed: object values",
        ),
        (
            json!({"term": {"mixed": 1}}),
            "filter.term.mixed",
            "mixed value types (string and number)",
        ),
        (
            json!({"exists": {"field": "text"}}),
            "filter.exists.field",
            "is not indexed: excluded",
        ),
        (
            json!({"term": {"brand": {"a": 1}}}),
            "filter.term.brand.a",
            "unknown term parameter",
        ),
        (
            json!({"term": {"brand": [1]}}),
            "filter.term.brand",
            "must be a string, number or bool",
        ),
        (
            json!({"term": {"brand": null}}),
            "filter.term.brand",
            "found null",
        ),
        (
            json!({"term": {"qty": "abc"}}),
            "filter.term.qty",
            "not a valid integer value",
        ),
        (
            json!({"term": {"ok": "yes"}}),
            "filter.term.ok",
            "not a valid bool value",
        ),
        (
            json!({"term": {"ts": "yesterday"}}),
            "filter.term.ts",
            "not a valid datetime value",
        ),
        (
            json!({"term": {"brand": "a", "qty": 1}}),
            "filter.term",
            "has 2 keys",
        ),
        (
            json!({"term": {"brand": "a"}, "range": {}}),
            "filter",
            "has 2 keys",
        ),
        (json!({}), "filter", "empty a clause object"),
        (
            json!([]),
            "filter",
            "expected a clause object, found an array",
        ),
        (
            json!({"terms": {"brand": "a"}}),
            "filter.terms.brand",
            "needs an array",
        ),
        (
            json!({"terms": {"qty": [1, "x"]}}),
            "filter.terms.qty[1]",
            "not a valid integer",
        ),
        (
            json!({"range": {"brand": {"gte": "a"}}}),
            "filter.range.brand",
            "range is not supported on keyword field \"brand\"",
        ),
        (
            json!({"range": {"ok": {"gte": true}}}),
            "filter.range.ok",
            "range is not supported on bool field",
        ),
        (
            json!({"range": {"price": {"gte": "cheap"}}}),
            "filter.range.price.gte",
            "not a number",
        ),
        (
            json!({"range": {"price": {"from": 1}}}),
            "filter.range.price.from",
            "unknown range parameter",
        ),
        (
            json!({"range": {"ts": {"gte": "soon"}}}),
            "filter.range.ts.gte",
            "not an RFC 3339 datetime",
        ),
        (
            json!({"range": {"price": 3}}),
            "filter.range.price",
            "expected range bounds",
        ),
        (
            json!({"exists": {"field": 3}}),
            "filter.exists.field",
            "must be a string",
        ),
        (json!({"exists": {}}), "filter.exists", "needs a \"field\""),
        (
            json!({"ids": {"values": [1, -1]}}),
            "filter.ids.values[1]",
            "unsigned integer",
        ),
        (
            json!({"ids": {"values": 1}}),
            "filter.ids.values",
            "must be an array",
        ),
        (
            json!({"bool": {"must": [{"match_all": {}}, {"range": {"price": {"gte": "x"}}}]}}),
            "filter.bool.must[1].range.price.gte",
            "not a number",
        ),
        (
            json!({"bool": {"filter": {"term": {"nope": 1}}}}),
            "filter.bool.filter.term.nope",
            "unknown field",
        ),
        (
            json!({"bool": {"should": [], "minimum_should_match": "lots"}}),
            "filter.bool.minimum_should_match",
            "integer or a percentage",
        ),
        (
            json!({"bool": {"shall": []}}),
            "filter.bool.shall",
            "unknown bool parameter",
        ),
        (json!({"bool": []}), "filter.bool", "expected a bool object"),
        (
            json!({"match_all": {"x": 1}}),
            "filter.match_all",
            "takes an empty object",
        ),
        (deep, "filter", "nested deeper than 32"),
    ];
    for (v, path, msg) in cases {
        let e = Filter::parse(&v, s).expect_err(&v.to_string());
        assert!(
            e.path.starts_with(path) && (e.path == path || path == "filter"),
            "{v}: path {} (want {path})",
            e.path
        );
        assert!(
            e.message.contains(msg),
            "{v}: message {:?} (want {msg:?})",
            e.message
        );
        assert_eq!(e.to_string(), format!("{}: {}", e.path, e.message));
    }
    // The depth cap is exact: 32 nested bools parse.
    let ok = (0..MAX_FILTER_DEPTH).fold(
        json!({"match_all": {}}),
        |f, _| json!({"bool": {"must": f}}),
    );
    Filter::parse(&ok, s).unwrap();
    // parse_at uses the given prefix.
    let e = Filter::parse_at(&json!({"term": {"x": 1}}), s, "query").unwrap_err();
    assert_eq!(e.path, "query.term.x");
}

#[test]
fn filter_values_coerce_as_elasticsearch() {
    let (_d, idx) = index();
    let s = idx.schema();
    let count = |v: Value| idx.eval(&Filter::parse(&v, s).unwrap(), &|_| None).len();
    assert_eq!(count(json!({"term": {"price": 2}})), 1); // 2 matches 2.0
    assert_eq!(count(json!({"term": {"qty": "2"}})), 1);
    assert_eq!(count(json!({"term": {"qty": 2.5}})), 0); // decimal on integer: no match
    assert_eq!(count(json!({"term": {"ok": "true"}})), 1);
    assert_eq!(count(json!({"term": {"code": 7}})), 1); // number in a keyword field: its text
    assert_eq!(count(json!({"term": {"code": {"value": "b"}}})), 1);
    assert_eq!(count(json!({"range": {"qty": {"gt": 2.5}}})), 1);
    assert_eq!(count(json!({"range": {"qty": {"gte": 2, "lt": 3}}})), 1);
    assert_eq!(
        count(json!({"range": {"ts": {"gte": 1704067200000i64}}})),
        1
    );
    assert_eq!(count(json!({"range": {"ts": {"lt": "2024-01-01"}}})), 0);
    assert_eq!(count(json!({"range": {"price": {}}})), 2);
    assert_eq!(count(json!({"bool": {}})), 2);
    assert_eq!(
        count(json!({"bool": {"should": [{"term": {"qty": 2}}], "minimum_should_match": 0}})),
        2
    );
    assert_eq!(
        count(json!({"bool": {"should": [{"term": {"qty": 2}}], "minimum_should_match": 2}})),
        0
    );
    assert_eq!(
        count(json!({"bool": {"must_not": {"term": {"qty": 2}}}})),
        1
    );
}

#[test]
fn sort_and_cursor_errors_name_their_path() {
    let (_d, idx) = index();
    let s = idx.schema();
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!("colour"), "sort.colour", "unknown field"),
        (
            json!(["price", {"meta": "asc"}]),
            "sort[1].meta",
            "is not indexed",
        ),
        (json!({"price": "up"}), "sort.price", "order must be"),
        (
            json!({"price": {"order": "sideways"}}),
            "sort.price.order",
            "order must be",
        ),
        (
            json!({"price": {"missing": "_first"}}),
            "sort.price.missing",
            "not supported",
        ),
        (
            json!({"price": {"mode": "avg"}}),
            "sort.price.mode",
            "not supported",
        ),
        (
            json!({"price": {"unmapped_type": "long"}}),
            "sort.price.unmapped_type",
            "unsupported sort option",
        ),
        (
            json!({"price": "asc", "qty": "asc"}),
            "sort",
            "exactly one field",
        ),
        (json!(3), "sort", "expected a field name"),
        (json!("_doc"), "sort._doc", "not supported"),
    ];
    for (v, path, msg) in cases {
        let e = parse_sort(&v, s, "sort").expect_err(&v.to_string());
        assert_eq!(e.path, path, "{v}");
        assert!(e.message.contains(msg), "{v}: {:?}", e.message);
    }
    let keys = parse_sort(&json!(["_score", {"price": {"order": "desc", "missing": "_last", "mode": "max"}}, "_id", "id"]), s, "sort").unwrap();
    assert_eq!(
        keys[0],
        SortKey {
            by: SortBy::Score,
            order: Order::Desc
        }
    );
    assert_eq!(
        keys[1],
        SortKey {
            by: SortBy::Field("price".into()),
            order: Order::Desc
        }
    );
    assert_eq!(keys[2].by, SortBy::Id);
    assert_eq!(
        keys[3],
        SortKey {
            by: SortBy::Id,
            order: Order::Asc
        }
    );

    let k = |f: &str| SortKey {
        by: SortBy::Field(f.into()),
        order: Order::Asc,
    };
    let id = SortKey {
        by: SortBy::Id,
        order: Order::Asc,
    };
    let bad: Vec<(Value, SortKey, &str)> = vec![
        (json!("x"), k("qty"), "an integer"),
        (json!("x"), k("price"), "a number"),
        (json!([1]), k("brand"), "a string"),
        (json!("x"), k("ok"), "a bool"),
        (json!("later"), k("ts"), "epoch milliseconds"),
        (json!(-1), id.clone(), "an id"),
        (json!(1), k("nope"), "unknown field"),
    ];
    for (v, key, msg) in bad {
        let e = SortValue::from_json(&v, &key, s, "after[0]").unwrap_err();
        assert_eq!(e.path, "after[0]");
        assert!(e.message.contains(msg), "{v}: {}", e.message);
    }
    assert_eq!(
        SortValue::from_json(&json!("2024-01-01T00:00:00Z"), &k("ts"), s, "a").unwrap(),
        SortValue::Int(1_704_067_200_000)
    );
    assert_eq!(
        SortValue::from_json(&Value::Null, &k("ts"), s, "a").unwrap(),
        SortValue::Missing
    );
    assert_eq!(
        SortValue::from_json(&json!("d1"), &id, s, "a").unwrap(),
        SortValue::Id(DocId::Str("d1".into()))
    );
}

#[test]
fn facet_errors() {
    let (_d, idx) = index();
    let rows = idx.eval(&Filter::match_all(), &|_| None);
    for (f, msg) in [
        ("price", "keyword fields only"),
        ("nope", "unknown field"),
        ("meta", "not indexed"),
    ] {
        let e = idx.facet(f, &rows).unwrap_err();
        assert_eq!(e.path, "field");
        assert!(e.message.contains(msg), "{f}: {}", e.message);
    }
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[test]
fn declared_type_errors_name_field_row_and_value() {
    let decl = vec![
        ("n".to_string(), FieldType::Integer),
        ("f".to_string(), FieldType::Float),
        ("b".to_string(), FieldType::Bool),
        ("t".to_string(), FieldType::Datetime),
        ("k".to_string(), FieldType::Keyword),
    ];
    let cases = [
        (json!({"n": "abc"}), "n", "\"abc\""),
        (json!({"n": true}), "n", "true"),
        (json!({"f": "x"}), "f", "\"x\""),
        (json!({"b": 1}), "b", "1"),
        (json!({"t": "tomorrow"}), "t", "\"tomorrow\""),
        (json!({"k": {"a": 1}}), "k", "object"),
        (json!({"n": [1, "z"]}), "n", "\"z\""),
        (json!({"n": 1e300}), "n", "1e+300"),
    ];
    for (doc, field, val) in cases {
        let mut w = FieldsWriter::new(FieldsConfig {
            declared: decl.clone(),
            skip: vec![],
        });
        w.add(0, &obj(json!({"n": 1}))).unwrap();
        let e = w.add(5, &obj(doc.clone())).unwrap_err();
        match &e {
            Error::Field {
                field: f,
                row,
                message,
            } => {
                assert_eq!((f.as_str(), *row), (field, 5), "{doc}");
                assert!(message.contains(val), "{doc}: {message}");
            }
            other => panic!("{doc}: {other:?}"),
        }
        assert!(e.to_string().contains("row 5"));
    }
    // Rows must increase.
    let mut w = FieldsWriter::new(FieldsConfig::default());
    w.add(3, &obj(json!({"a": 1}))).unwrap();
    assert!(matches!(
        w.add(3, &obj(json!({"a": 1}))),
        Err(Error::Field { row: 3, .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    assert!(w.finish(dir.path(), 3).is_err());
}

#[test]
fn inference_and_coercion() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(300);
    let mut w = FieldsWriter::new(FieldsConfig {
        declared: vec![
            ("k".into(), FieldType::Keyword),
            ("n".into(), FieldType::Integer),
            ("never".into(), FieldType::Bool),
        ],
        skip: vec!["text".into()],
    });
    let docs = [
        json!({"s": "a", "d": "2024-01-01T00:00:00Z", "i": 1, "f": 1, "b": true, "k": 5, "n": "7", "arr": [["a"], "b"], "nul": null, "e": [], "long": long, "text": "t"}),
        json!({"s": "b", "d": "2024-01-02", "i": -3, "f": 2.5, "b": false, "k": true, "n": 7.9, "arr": "c", "nul": [null], "e": [null], "long": "short"}),
    ];
    for (i, d) in docs.iter().enumerate() {
        w.add(i as u32, d.as_object().unwrap()).unwrap();
    }
    let meta = w.finish(dir.path(), 2).unwrap();
    let s = &meta.schema;
    let ty = |n: &str| s.get(n).map(|f| f.ty);
    assert_eq!(ty("s"), Some(FieldType::Keyword));
    assert_eq!(ty("d"), Some(FieldType::Datetime));
    assert_eq!(ty("i"), Some(FieldType::Integer));
    assert_eq!(ty("f"), Some(FieldType::Float));
    assert_eq!(ty("b"), Some(FieldType::Bool));
    assert_eq!(ty("never"), Some(FieldType::Bool));
    assert!(s.get("never").unwrap().declared && s.get("never").unwrap().docs == 0);
    let arr = s.get("arr").unwrap();
    assert!(arr.array && arr.docs == 2 && arr.values == 3);
    assert!(s.skipped("nul").unwrap().reason.contains("no values"));
    assert!(s.skipped("e").unwrap().reason.contains("no values"));
    assert!(s.skipped("text").is_some());
    assert_eq!(s.get("long").unwrap().docs, 1);
    let idx = FieldIndex::open(dir.path()).unwrap();
    assert_eq!(idx.stats()["fields"]["long"]["ignored_above"], 1);
    let c = |v: Value| {
        idx.eval(&Filter::parse(&v, idx.schema()).unwrap(), &|_| None)
            .len()
    };
    assert_eq!(c(json!({"term": {"k": "5"}})), 1);
    assert_eq!(c(json!({"term": {"k": "true"}})), 1);
    assert_eq!(c(json!({"term": {"n": 7}})), 2); // "7" and 7.9 (truncated)
    assert_eq!(c(json!({"term": {"f": 1}})), 1);
    assert_eq!(
        c(json!({"range": {"d": {"gte": "2024-01-02T00:00:00Z"}}})),
        1
    );
    assert_eq!(c(json!({"exists": {"field": "never"}})), 0);
    assert_eq!(c(json!({"term": {"arr": "a"}})), 1);
    assert_eq!("long".parse::<FieldType>().unwrap(), FieldType::Integer);
    assert_eq!(FieldType::Datetime.to_string(), "datetime");
    assert!("text".parse::<FieldType>().is_err());
    assert_eq!(
        serde_json::to_value(FieldType::Keyword).unwrap(),
        json!("keyword")
    );
}

/// Filters that match by vacuity (what destructive routes refuse) and filters that do not.
#[test]
fn vacuous_filters_are_told_apart() {
    let (_d, idx) = index();
    let s = idx.schema();
    let vacuous = [
        json!({"range": {"price": {}}}),
        json!({"range": {"qty": {"gte": null, "lte": null}}}),
        json!({"range": {"ts": {"boost": 1}}}),
        json!({"bool": {}}),
        json!({"bool": {"must": [], "filter": [], "should": [], "must_not": []}}),
        json!({"bool": {"filter": {"range": {"price": {}}}}}),
        json!({"bool": {"must": [{"match_all": {}}, {"range": {"qty": {}}}]}}),
        json!({"bool": {"should": [{"term": {"brand": "acme"}}, {"bool": {}}]}}),
        json!({"bool": {"must_not": {"match_none": {}}}}),
        json!({"bool": {"must": {"bool": {"must": {"bool": {}}}}}}),
    ];
    for f in vacuous {
        assert!(Filter::parse(&f, s).unwrap().is_vacuous(), "{f}");
    }
    let not_vacuous = [
        json!({"match_all": {}}),
        json!({"bool": {"must": {"match_all": {}}}}),
        json!({"bool": {"must": {"match_all": {}}, "must_not": {"match_none": {}}}}),
        json!({"match_none": {}}),
        json!({"range": {"price": {"gte": 1}}}),
        json!({"range": {"qty": {"lt": 3}}}),
        json!({"range": {"ts": {"gte": "2024-01-01T00:00:00Z"}}}),
        json!({"term": {"brand": "acme"}}),
        json!({"terms": {"brand": []}}),
        json!({"exists": {"field": "brand"}}),
        json!({"ids": {"values": [1]}}),
        json!({"bool": {"must": [{"term": {"brand": "acme"}}, {"range": {"price": {}}}]}}),
        json!({"bool": {"must_not": {"range": {"price": {}}}}}),
        json!({"bool": {"should": [{"term": {"brand": "acme"}}, {"bool": {}}], "minimum_should_match": 2}}),
        json!({"bool": {"should": [{"bool": {}}], "minimum_should_match": 2}}),
    ];
    for f in not_vacuous {
        assert!(!Filter::parse(&f, s).unwrap().is_vacuous(), "{f}");
    }
}
