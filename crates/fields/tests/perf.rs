//! Timing checks at 1M rows; ignored by default (run with
//! `cargo test -p searchd-fields --release --test perf -- --ignored --nocapture`).

use std::time::Instant;

use searchd_fields::*;
use serde_json::json;

#[test]
#[ignore]
fn one_million_rows() {
    let n = 1_000_000u32;
    let dir = tempfile::tempdir().unwrap();
    let mut w = FieldsWriter::new(FieldsConfig::default());
    let mut x: u64 = 7;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (x >> 33) as u32;
        let d = json!({"brand": format!("b{}", (r % 1000) * (r % 1000) / 1000), "price": f64::from(r % 10_000) / 8.0});
        w.add(i, d.as_object().unwrap()).unwrap();
    }
    let t = Instant::now();
    w.finish(dir.path(), n).unwrap();
    println!("finish {:?}", t.elapsed());
    let t = Instant::now();
    let idx = FieldIndex::open(dir.path()).unwrap();
    println!("open {:?}", t.elapsed());
    let all = idx.eval(&Filter::match_all(), &|_| None);
    let f = Filter::parse(&json!({"range": {"price": {"gte": 100.0}}}), idx.schema()).unwrap();
    let t = Instant::now();
    let rows = idx.eval(&f, &|_| None);
    println!("range eval {:?} ({} rows)", t.elapsed(), rows.len());
    for (name, r) in [("all", &all), ("range", &rows)] {
        let t = Instant::now();
        let facet = idx.facet("brand", r).unwrap();
        let el = t.elapsed();
        println!("facet {name} {el:?} ({} values)", facet.len());
        assert!(el.as_millis() < 50, "facet {name} took {el:?}");
    }
    let mut half = roaring::RoaringBitmap::new();
    half.extend((0..n).step_by(2));
    let t = Instant::now();
    idx.facet("brand", &half).unwrap();
    println!("facet half {:?}", t.elapsed());
    let keys = parse_sort(&json!([{"price": "desc"}, "brand"]), idx.schema(), "sort").unwrap();
    let t = Instant::now();
    let p = idx.page(&all, &keys, None, 20, &|r| DocId::Int(r.into()));
    println!("page 20 of 1M {:?}", t.elapsed());
    let t = Instant::now();
    idx.page(&all, &keys, Some(&p.last().unwrap().1), 20, &|r| {
        DocId::Int(r.into())
    });
    println!("page 2 of 1M {:?}", t.elapsed());
}
