//! Typed fields at 1M rows (`cargo bench -p searchd-fields`): a range filter's row set, a
//! facet over every row and over the filtered rows, and the first and second sorted page
//! of 20 (price desc, then brand) over every row. The data: a skewed `brand` keyword
//! (~1,000 values) and a `price` float, seeded.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use searchd_fields::*;
use serde_json::json;

const N: u32 = 1_000_000;

fn index(dir: &std::path::Path) -> FieldIndex {
    let mut w = FieldsWriter::new(FieldsConfig::default());
    let mut x: u64 = 7;
    for i in 0..N {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (x >> 33) as u32;
        let d = json!({"brand": format!("b{}", (r % 1000) * (r % 1000) / 1000), "price": f64::from(r % 10_000) / 8.0});
        w.add(i, d.as_object().unwrap()).unwrap();
    }
    w.finish(dir, N).unwrap();
    FieldIndex::open(dir).unwrap()
}

fn fields(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let idx = index(dir.path());
    let all = idx.eval(&Filter::match_all(), &|_| None);
    let range = Filter::parse(&json!({"range": {"price": {"gte": 100.0}}}), idx.schema()).unwrap();
    let rows = idx.eval(&range, &|_| None);
    let keys = parse_sort(&json!([{"price": "desc"}, "brand"]), idx.schema(), "sort").unwrap();
    let id = |r: u32| DocId::Int(r.into());
    let first = idx.page(&all, &keys, None, 20, &id);
    let after = first.last().unwrap().1.clone();

    let mut g = c.benchmark_group("fields_1m");
    g.sample_size(20);
    g.bench_function("range_eval", |b| {
        b.iter(|| black_box(idx.eval(black_box(&range), &|_| None)))
    });
    g.bench_function("facet_all", |b| {
        b.iter(|| black_box(idx.facet("brand", black_box(&all)).unwrap()))
    });
    g.bench_function("facet_range", |b| {
        b.iter(|| black_box(idx.facet("brand", black_box(&rows)).unwrap()))
    });
    g.bench_function("page_1", |b| {
        b.iter(|| black_box(idx.page(&all, &keys, None, 20, &id)))
    });
    g.bench_function("page_2", |b| {
        b.iter(|| black_box(idx.page(&all, &keys, Some(&after), 20, &id)))
    });
    g.finish();
}

criterion_group!(benches, fields);
criterion_main!(benches);
