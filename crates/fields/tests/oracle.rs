//! Random documents and filters against a brute-force oracle over the raw JSON.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use searchd_fields::*;
use serde_json::{json, Map, Value};

const BRANDS: &[&str] = &[
    "acme", "globex", "initech", "umbrella", "hooli", "Zeta", "a", "ä",
];
const TAGS: &[&str] = &["red", "green", "blue", "x", "y"];
const TS: &[&str] = &[
    "2024-01-01T00:00:00Z",
    "2024-01-01T01:00:00+01:00",
    "2024-03-05T10:20:30.5Z",
    "2023-12-31T23:59:59Z",
    "2024-06-01",
];

fn id_of(row: u32) -> DocId {
    if row.is_multiple_of(2) {
        DocId::Int(u64::from(row) * 7)
    } else {
        DocId::Str(format!("d{row}"))
    }
}

/// Zipf-ish pick: index i with weight ~ 1/(i+1).
fn zipf(x: u32, n: usize) -> usize {
    let w: Vec<f64> = (0..n).map(|i| 1.0 / (i as f64 + 1.0)).collect();
    let total: f64 = w.iter().sum();
    let mut t = f64::from(x % 1000) / 1000.0 * total;
    for (i, wi) in w.iter().enumerate() {
        if t < *wi {
            return i;
        }
        t -= wi;
    }
    n - 1
}

fn doc_strategy() -> impl Strategy<Value = Map<String, Value>> {
    (
        any::<u32>(),
        0u8..10,
        prop::collection::vec(0usize..TAGS.len(), 0..4),
        0u8..4,
        0i64..8,
        0u8..6,
        any::<bool>(),
        0usize..TS.len() + 1,
        0u8..4,
    )
        .prop_map(|(b, bm, tags, tm, q, pm, ok, ts, om)| {
            let mut m = Map::new();
            if bm < 8 {
                m.insert("brand".into(), json!(BRANDS[zipf(b, BRANDS.len())]));
            } else if bm == 8 {
                m.insert("brand".into(), Value::Null);
            }
            match tm {
                0 => {}
                1 => {
                    m.insert("tags".into(), json!([]));
                }
                _ => {
                    m.insert(
                        "tags".into(),
                        json!(tags.iter().map(|&i| TAGS[i]).collect::<Vec<_>>()),
                    );
                }
            }
            if pm < 5 {
                m.insert("price".into(), json!((q % 5) as f64 * 0.5));
            }
            if pm % 3 != 0 {
                m.insert("qty".into(), json!(if pm == 1 { 0 } else { q }));
            }
            if om < 3 {
                m.insert("ok".into(), json!(ok));
            }
            if ts < TS.len() {
                m.insert("ts".into(), json!(TS[ts]));
            }
            m.insert("text".into(), json!("some words"));
            m
        })
}

fn first_doc() -> Map<String, Value> {
    json!({"brand": "acme", "tags": ["red", "red", "blue"], "price": 1.5, "qty": 3, "ok": true,
           "ts": TS[0], "text": "t"})
    .as_object()
    .unwrap()
    .clone()
}

#[derive(Clone, Debug)]
enum TF {
    All,
    None,
    Term(&'static str, Value),
    Terms(&'static str, Vec<Value>),
    Range(&'static str, Vec<(&'static str, Value)>),
    Exists(&'static str),
    Ids(Vec<Value>),
    Bool(Vec<TF>, Vec<TF>, Vec<TF>, Vec<TF>, Option<Value>),
}

fn value_for(field: &'static str) -> BoxedStrategy<Value> {
    match field {
        "brand" => (0..BRANDS.len() + 1)
            .prop_map(|i| json!(BRANDS.get(i).copied().unwrap_or("nope")))
            .boxed(),
        "tags" => (0..TAGS.len() + 1)
            .prop_map(|i| json!(TAGS.get(i).copied().unwrap_or("nope")))
            .boxed(),
        "price" => prop_oneof![
            (0i64..6).prop_map(|i| json!(i)),
            (0i64..6).prop_map(|i| json!(i as f64 * 0.5))
        ]
        .boxed(),
        "qty" => prop_oneof![
            (-1i64..9).prop_map(|i| json!(i)),
            (0i64..6).prop_map(|i| json!(i as f64 + 0.5))
        ]
        .boxed(),
        "ok" => prop_oneof![
            any::<bool>().prop_map(|b| json!(b)),
            any::<bool>().prop_map(|b| json!(b.to_string()))
        ]
        .boxed(),
        "ts" => prop_oneof![
            (0..TS.len()).prop_map(|i| json!(TS[i])),
            Just(json!(parse_datetime(TS[2]).unwrap())),
        ]
        .boxed(),
        _ => unreachable!(),
    }
}

const FIELDS: &[&str] = &["brand", "tags", "price", "qty", "ok", "ts"];
const RANGED: &[&str] = &["price", "qty", "ts"];

fn leaf() -> BoxedStrategy<TF> {
    let term = prop::sample::select(FIELDS)
        .prop_flat_map(|f| value_for(f).prop_map(move |v| TF::Term(f, v)));
    let terms = prop::sample::select(FIELDS).prop_flat_map(|f| {
        prop::collection::vec(value_for(f), 0..4).prop_map(move |v| TF::Terms(f, v))
    });
    let range = prop::sample::select(RANGED).prop_flat_map(|f| {
        prop::collection::vec(
            (
                prop::sample::select(&["gte", "gt", "lte", "lt"][..]),
                value_for(f),
            ),
            0..3,
        )
        .prop_map(move |b| {
            // A JSON object keeps the last of duplicate keys.
            let mut m: Vec<(&'static str, Value)> = Vec::new();
            for (op, v) in b {
                m.retain(|x| x.0 != op);
                m.push((op, v));
            }
            TF::Range(f, m)
        })
    });
    let exists = prop::sample::select(FIELDS).prop_map(TF::Exists);
    let ids = prop::collection::vec(
        prop_oneof![
            (0u64..300).prop_map(|i| json!(i)),
            (0u32..60).prop_map(|i| json!(format!("d{i}")))
        ],
        0..5,
    )
    .prop_map(TF::Ids);
    prop_oneof![
        4 => term, 2 => terms, 3 => range, 1 => exists, 1 => ids,
        1 => Just(TF::All), 1 => Just(TF::None)
    ]
    .boxed()
}

fn filter_strategy() -> impl Strategy<Value = TF> {
    leaf().prop_recursive(4, 24, 4, |inner| {
        let v = || prop::collection::vec(inner.clone(), 0..3);
        (
            v(),
            v(),
            v(),
            v(),
            prop_oneof![
                3 => Just(None),
                1 => (-2i64..4).prop_map(|i| Some(json!(i))),
                1 => prop::sample::select(&["50%", "-50%", "100%", "2"][..]).prop_map(|s| Some(json!(s))),
            ],
        )
            .prop_map(|(a, b, c, d, m)| TF::Bool(a, b, c, d, m))
    })
}

fn to_json(f: &TF) -> Value {
    match f {
        TF::All => json!({"match_all": {}}),
        TF::None => json!({"match_none": {}}),
        TF::Term(k, v) => json!({"term": {*k: v}}),
        TF::Terms(k, v) => json!({"terms": {*k: v}}),
        TF::Range(k, b) => {
            let m: Map<String, Value> = b.iter().map(|(o, v)| (o.to_string(), v.clone())).collect();
            json!({"range": {*k: m}})
        }
        TF::Exists(k) => json!({"exists": {"field": k}}),
        TF::Ids(v) => json!({"ids": {"values": v}}),
        TF::Bool(m, fl, s, n, msm) => {
            let mut o = Map::new();
            let list = |v: &Vec<TF>| Value::Array(v.iter().map(to_json).collect());
            if !m.is_empty() {
                o.insert(
                    "must".into(),
                    if m.len() == 1 {
                        to_json(&m[0])
                    } else {
                        list(m)
                    },
                );
            }
            if !fl.is_empty() {
                o.insert("filter".into(), list(fl));
            }
            if !s.is_empty() {
                o.insert("should".into(), list(s));
            }
            if !n.is_empty() {
                o.insert("must_not".into(), list(n));
            }
            if let Some(x) = msm {
                o.insert("minimum_should_match".into(), x.clone());
            }
            json!({ "bool": o })
        }
    }
}

fn flat(v: Option<&Value>) -> Vec<Value> {
    let mut out = Vec::new();
    fn go(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Null => {}
            Value::Array(a) => a.iter().for_each(|x| go(x, out)),
            x => out.push(x.clone()),
        }
    }
    if let Some(v) = v {
        go(v, &mut out);
    }
    out
}

/// A comparable number for a field element or query value.
fn num(field: &str, v: &Value) -> Option<f64> {
    if field == "ts" {
        return match v {
            Value::String(s) => parse_datetime(s).map(|x| x as f64),
            Value::Number(n) => n.as_f64(),
            _ => None,
        };
    }
    match v {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

fn eq(field: &str, elem: &Value, q: &Value) -> bool {
    match field {
        "brand" | "tags" => elem == q,
        "ok" => {
            let qb = match q {
                Value::Bool(b) => *b,
                Value::String(s) => s == "true",
                _ => unreachable!(),
            };
            elem.as_bool() == Some(qb)
        }
        _ => num(field, elem) == num(field, q),
    }
}

fn oracle(f: &TF, doc: &Map<String, Value>, row: u32) -> bool {
    match f {
        TF::All => true,
        TF::None => false,
        TF::Term(k, v) => flat(doc.get(*k)).iter().any(|e| eq(k, e, v)),
        TF::Terms(k, vs) => flat(doc.get(*k))
            .iter()
            .any(|e| vs.iter().any(|v| eq(k, e, v))),
        TF::Range(k, b) => flat(doc.get(*k)).iter().any(|e| {
            let x = num(k, e).unwrap();
            b.iter().all(|(op, v)| {
                let y = num(k, v).unwrap();
                match *op {
                    "gte" => x >= y,
                    "gt" => x > y,
                    "lte" => x <= y,
                    _ => x < y,
                }
            })
        }),
        TF::Exists(k) => !flat(doc.get(*k)).is_empty(),
        TF::Ids(vs) => {
            let id = id_of(row);
            vs.iter().any(|v| match (v, &id) {
                (Value::Number(n), DocId::Int(i)) => n.as_u64() == Some(*i),
                (Value::String(s), DocId::Str(t)) => s == t,
                _ => false,
            })
        }
        TF::Bool(m, fl, s, n, msm) => {
            let k = s.len() as i64;
            let req = match msm {
                None => i64::from(m.is_empty() && fl.is_empty() && !s.is_empty()),
                Some(Value::Number(x)) => {
                    let c = x.as_i64().unwrap();
                    (if c < 0 { k + c } else { c }).max(0)
                }
                Some(Value::String(p)) => {
                    let c = if let Some(q) = p.strip_suffix('%') {
                        k * q.parse::<i64>().unwrap() / 100
                    } else {
                        p.parse::<i64>().unwrap()
                    };
                    (if c < 0 { k + c } else { c }).max(0)
                }
                _ => unreachable!(),
            };
            if req > k {
                return false;
            }
            m.iter().chain(fl).all(|c| oracle(c, doc, row))
                && !n.iter().any(|c| oracle(c, doc, row))
                && s.iter().filter(|c| oracle(c, doc, row)).count() as i64 >= req
        }
    }
}

fn build(docs: &[Map<String, Value>]) -> (tempfile::TempDir, FieldIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut w = FieldsWriter::new(FieldsConfig {
        declared: vec![],
        skip: vec!["text".into()],
    });
    for (i, d) in docs.iter().enumerate() {
        w.add(i as u32, d).unwrap();
    }
    let meta = w.finish(dir.path(), docs.len() as u32).unwrap();
    let idx = FieldIndex::open(dir.path()).unwrap();
    assert_eq!(&meta.schema, idx.schema());
    (dir, idx)
}

fn resolver(n: u32) -> impl Fn(&DocId) -> Option<u32> {
    let m: HashMap<DocId, u32> = (0..n)
        .map(|r| (id_of(r), r))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    move |d| m.get(d).copied()
}

/// The oracle's sort value of one key: (missing?, comparable) — numbers as f64, strings bytes.
#[derive(Clone, Debug, PartialEq, PartialOrd)]
enum OV {
    N(f64),
    S(Vec<u8>),
}

fn oracle_key(doc: &Map<String, Value>, field: &str, desc: bool) -> Option<OV> {
    let vals: Vec<OV> = flat(doc.get(field))
        .iter()
        .map(|v| match field {
            "brand" | "tags" => OV::S(v.as_str().unwrap().as_bytes().to_vec()),
            "ok" => OV::N(if v.as_bool().unwrap() { 1.0 } else { 0.0 }),
            _ => OV::N(num(field, v).unwrap()),
        })
        .collect();
    let it = vals.into_iter();
    if desc {
        it.reduce(|a, b| if b > a { b } else { a })
    } else {
        it.reduce(|a, b| if b < a { b } else { a })
    }
}

fn oracle_order(docs: &[Map<String, Value>], rows: &[u32], keys: &[(&str, bool)]) -> Vec<u32> {
    let mut v = rows.to_vec();
    v.sort_by(|&a, &b| {
        for &(f, desc) in keys {
            let o = if f == "_id" {
                id_of(a).cmp(&id_of(b))
            } else {
                let (x, y) = (
                    oracle_key(&docs[a as usize], f, desc),
                    oracle_key(&docs[b as usize], f, desc),
                );
                match (x, y) {
                    (None, None) => Ordering::Equal,
                    (None, _) => return Ordering::Greater,
                    (_, None) => return Ordering::Less,
                    (Some(x), Some(y)) => x.partial_cmp(&y).unwrap(),
                }
            };
            let o = if desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        id_of(a).cmp(&id_of(b))
    });
    v
}

fn is_exact_leaf(f: &TF) -> bool {
    match f {
        TF::All | TF::None | TF::Term(..) => true,
        TF::Terms(k, _) | TF::Range(k, _) | TF::Exists(k) => *k != "tags",
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn eval_estimate_facet_match_oracle(
        docs in prop::collection::vec(doc_strategy(), 0..120),
        filters in prop::collection::vec(filter_strategy(), 1..6),
    ) {
        let mut docs = docs;
        docs.insert(0, first_doc());
        let (_dir, idx) = build(&docs);
        let n = docs.len() as u32;
        let ids = resolver(n);
        for tf in &filters {
            let fj = to_json(tf);
            let f = Filter::parse(&fj, idx.schema()).unwrap_or_else(|e| panic!("{fj}: {e}"));
            let got = idx.eval(&f, &ids);
            let want: Vec<u32> = (0..n).filter(|&r| oracle(tf, &docs[r as usize], r)).collect();
            prop_assert_eq!(got.iter().collect::<Vec<_>>(), want.clone(), "filter {}", fj);
            // Both ways of an AND: every clause after the first tested row by row, or none.
            for ratio in [0.0, f64::INFINITY] {
                let g = idx.eval_narrowing(&f, &ids, ratio);
                prop_assert_eq!(g.iter().collect::<Vec<_>>(), want.clone(), "filter {} ratio {}", fj, ratio);
            }
            let est = idx.estimate(&f);
            prop_assert!(est <= u64::from(n));
            if is_exact_leaf(tf) {
                prop_assert_eq!(est, want.len() as u64, "estimate of {}", fj);
            }
            for field in ["brand", "tags"] {
                let facet = idx.facet(field, &got).unwrap();
                let mut o: BTreeMap<String, u64> = BTreeMap::new();
                for &r in &want {
                    let mut vs: Vec<String> = flat(docs[r as usize].get(field)).iter().map(|v| v.as_str().unwrap().to_string()).collect();
                    vs.sort();
                    vs.dedup();
                    for v in vs {
                        *o.entry(v).or_insert(0) += 1;
                    }
                }
                let mut f2 = facet.clone();
                f2.sort();
                prop_assert_eq!(f2, o.clone().into_iter().collect::<Vec<_>>());
                // top_buckets over the facet split in two "segments".
                let (a, b) = facet.split_at(facet.len() / 2);
                let size = 3;
                let (buckets, other) = top_buckets(a.iter().cloned().chain(b.iter().cloned()), size);
                let mut all: Vec<(String, u64)> = o.into_iter().collect();
                all.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.as_bytes().cmp(y.0.as_bytes())));
                let want_b: Vec<Bucket> = all.iter().take(size).map(|(v, c)| Bucket { value: v.clone(), count: *c }).collect();
                prop_assert_eq!(buckets, want_b);
                prop_assert_eq!(other, all.iter().skip(size).map(|x| x.1).sum::<u64>());
            }
        }
    }

    #[test]
    fn page_walks_match_oracle_sort(
        docs in prop::collection::vec(doc_strategy(), 0..100),
        filter in filter_strategy(),
        keys in prop::collection::vec((prop::sample::select(&["brand", "tags", "price", "qty", "ok", "ts", "_id"][..]), any::<bool>()), 0..4),
        page in 1usize..8,
    ) {
        let mut docs = docs;
        docs.insert(0, first_doc());
        let (_dir, idx) = build(&docs);
        let n = docs.len() as u32;
        let f = Filter::parse(&to_json(&filter), idx.schema()).unwrap();
        let rows = idx.eval(&f, &resolver(n));
        let sort_json = Value::Array(keys.iter().map(|(k, d)| json!({*k: if *d { "desc" } else { "asc" }})).collect());
        let sk = parse_sort(&sort_json, idx.schema(), "sort").unwrap();
        let want = oracle_order(&docs, &rows.iter().collect::<Vec<_>>(), &keys);
        let mut got = Vec::new();
        let mut cursor: Option<Vec<SortValue>> = None;
        let mut last: Option<Vec<SortValue>> = None;
        loop {
            let p = idx.page(&rows, &sk, cursor.as_deref(), page, &id_of);
            prop_assert!(p.len() <= page);
            if p.is_empty() {
                break;
            }
            for (r, vals) in &p {
                // sort_value agrees with what page returned for field keys.
                for (k, v) in sk.iter().zip(vals) {
                    if let SortBy::Field(_) = k.by {
                        prop_assert_eq!(&idx.sort_value(*r, k), v);
                    }
                }
                if let Some(l) = &last {
                    prop_assert_eq!(compare(&sk, l, vals), Ordering::Less);
                }
                last = Some(vals.clone());
                got.push(*r);
            }
            // Round-trip the cursor through JSON as a client would.
            let next = &p.last().unwrap().1;
            let mut c = Vec::new();
            for (i, v) in next.iter().enumerate() {
                let key = sk.get(i).cloned().unwrap_or(SortKey { by: SortBy::Id, order: Order::Asc });
                c.push(SortValue::from_json(&v.to_json(), &key, idx.schema(), "after").unwrap());
            }
            cursor = Some(c);
        }
        prop_assert_eq!(got, want);
    }
}

#[test]
fn deep_pages_over_10k_rows_equal_the_oracle() {
    let mut x: u64 = 42;
    let mut rnd = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as u32
    };
    let docs: Vec<Map<String, Value>> = (0..10_000)
        .map(|_| {
            let mut m = Map::new();
            let r = rnd();
            if r % 10 != 0 {
                m.insert("price".into(), json!(f64::from(r % 50) * 0.25));
            }
            m.insert("brand".into(), json!(BRANDS[zipf(rnd(), BRANDS.len())]));
            m
        })
        .collect();
    let (_dir, idx) = build(&docs);
    let rows = idx.eval(&Filter::match_all(), &|_| None);
    let keys = [("price", true), ("brand", false)];
    let sk = parse_sort(&json!([{"price": "desc"}, "brand"]), idx.schema(), "sort").unwrap();
    let want = oracle_order(&docs, &rows.iter().collect::<Vec<_>>(), &keys);
    let mut cursor: Option<Vec<SortValue>> = None;
    for p in 0..=300 {
        let page = idx.page(&rows, &sk, cursor.as_deref(), 10, &id_of);
        assert_eq!(
            page.iter().map(|x| x.0).collect::<Vec<_>>(),
            want[p * 10..p * 10 + 10],
            "page {p}"
        );
        cursor = Some(page.last().unwrap().1.clone());
    }
    // A single big page equals the oracle too.
    let all = idx.page(&rows, &sk, None, 20_000, &id_of);
    assert_eq!(all.iter().map(|x| x.0).collect::<Vec<_>>(), want);
}

/// A cursor for the plan comparison: the sort values of some row of the page order (cut to a
/// prefix), or arbitrary JSON values (converted as a client's `search_after` would be).
#[derive(Clone, Debug)]
enum TC {
    None,
    Row(usize, usize),
    Json(Vec<Value>),
}

fn cursor_value() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        (-1i64..8).prop_map(|i| json!(i)),
        (-1i64..8).prop_map(|i| json!(i as f64 * 0.5 + 0.25)),
        (0..BRANDS.len() + TAGS.len() + 2).prop_map(|i| json!(BRANDS
            .iter()
            .chain(TAGS)
            .chain(&["nope", "b"])
            .nth(i)
            .unwrap())),
        any::<bool>().prop_map(|b| json!(b)),
        (0u32..60).prop_map(|i| json!(format!("d{i}"))),
        Just(json!(parse_datetime(TS[0]).unwrap())),
    ]
    .boxed()
}

fn cursor_strategy() -> impl Strategy<Value = TC> {
    prop_oneof![
        1 => Just(TC::None),
        3 => (0usize..200, 0usize..6).prop_map(|(i, l)| TC::Row(i, l)),
        2 => prop::collection::vec(cursor_value(), 0..6).prop_map(TC::Json),
    ]
}

/// Multi-valued numeric fields (absent, null, empty, a scalar or an array with ties).
fn arrays_strategy() -> impl Strategy<Value = (u8, Vec<i64>, u8, Vec<i64>)> {
    (
        0u8..5,
        prop::collection::vec(0i64..6, 0..4),
        0u8..5,
        prop::collection::vec(0i64..5, 0..4),
    )
}

fn add_arrays(m: &mut Map<String, Value>, (nm, nums, fm, fl): (u8, Vec<i64>, u8, Vec<i64>)) {
    match nm {
        0 => {}
        1 => {
            m.insert("nums".into(), Value::Null);
        }
        2 => {
            m.insert("nums".into(), json!(nums.first().copied().unwrap_or(3)));
        }
        _ => {
            m.insert("nums".into(), json!(nums));
        }
    }
    match fm {
        0 => {}
        1 => {
            m.insert(
                "fl".into(),
                json!(fl.first().map_or(-1.5, |&x| x as f64 * 0.5)),
            );
        }
        _ => {
            m.insert(
                "fl".into(),
                json!(fl.iter().map(|&x| x as f64 * 0.5 - 1.0).collect::<Vec<_>>()),
            );
        }
    }
}

const PLAN_KEYS: &[&str] = &[
    "brand", "tags", "price", "qty", "ok", "ts", "nums", "fl", "_id", "_score",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The walk of the first key's value order (and the automatic choice) gives exactly the
    /// scan's pages: rows, order and sort values, from any cursor.
    #[test]
    fn page_plans_agree(
        docs in prop::collection::vec((doc_strategy(), arrays_strategy()), 0..160),
        filter in filter_strategy(),
        keys in prop::collection::vec((prop::sample::select(PLAN_KEYS), any::<bool>()), 1..4),
        cursor in cursor_strategy(),
        size in prop_oneof![1usize..6, 1usize..40, Just(1000usize)],
    ) {
        let mut all_docs = vec![first_doc()];
        for (mut d, a) in docs {
            add_arrays(&mut d, a);
            all_docs.push(d);
        }
        let (_dir, idx) = build(&all_docs);
        let n = all_docs.len() as u32;
        let f = Filter::parse(&to_json(&filter), idx.schema()).unwrap();
        let rows = idx.eval(&f, &resolver(n));
        let sort_json = Value::Array(keys.iter().map(|(k, d)| json!({*k: if *d { "desc" } else { "asc" }})).collect());
        let Ok(sk) = parse_sort(&sort_json, idx.schema(), "sort") else {
            // A field no document has is not in the schema.
            return Ok(());
        };
        let key_at = |i: usize| sk.get(i).cloned().unwrap_or(SortKey { by: SortBy::Id, order: Order::Asc });
        let mut after: Option<Vec<SortValue>> = match &cursor {
            TC::None => None,
            TC::Row(i, l) => {
                let everything = idx.page_with_plan(&rows, &sk, None, usize::MAX, &id_of, PagePlan::Scan);
                everything.get(i % everything.len().max(1)).map(|(_, v)| v[..(*l).min(v.len())].to_vec())
            }
            TC::Json(vs) => vs
                .iter()
                .enumerate()
                .map(|(i, v)| SortValue::from_json(v, &key_at(i), idx.schema(), "after"))
                .collect::<Result<Vec<_>, _>>()
                .ok(),
        };
        // The segment's id order (ids compared by rank, the id walk): the same pages.
        let ids: Vec<DocId> = (0..n).map(id_of).collect();
        let (rank, by_rank) = IdOrder::build(&ids);
        let order = IdOrder { rank: &rank, by_rank: &by_rank };
        for _ in 0..3 {
            let scan = idx.page_with_plan(&rows, &sk, after.as_deref(), size, &id_of, PagePlan::Scan);
            for plan in [PagePlan::Walk, PagePlan::Auto] {
                let got = idx.page_with_plan(&rows, &sk, after.as_deref(), size, &id_of, plan);
                prop_assert_eq!(&got, &scan, "{:?} sort {} after {:?}", plan, sort_json, after);
            }
            for plan in [PagePlan::Scan, PagePlan::Walk, PagePlan::Auto] {
                let got = idx.page_with(&rows, &sk, after.as_deref(), size, &id_of, Some(order), plan);
                prop_assert_eq!(&got, &scan, "ranked {:?} sort {} after {:?}", plan, sort_json, after);
            }
            match scan.last() {
                Some((_, v)) => after = Some(v.clone()),
                None => break,
            }
        }
    }
}
