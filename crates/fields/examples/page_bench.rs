//! Release timings of `FieldIndex::page` (single thread):
//! `cargo run -p searchd-fields --release --example page_bench`.

use std::time::{Duration, Instant};

use searchd_fields::*;
use serde_json::json;

fn build(n: u32) -> (tempfile::TempDir, FieldIndex) {
    let dir = tempfile::tempdir().unwrap();
    let mut w = FieldsWriter::new(FieldsConfig::default());
    let mut x: u64 = 7;
    let mut rnd = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as u32
    };
    for i in 0..n {
        let r = rnd();
        let m = rnd();
        let nums: Vec<u32> = (0..1 + m % 3).map(|j| (m >> (4 + 8 * j)) % 5000).collect();
        let d = json!({
            "brand": format!("b{}", (r % 1000) * (r % 1000) / 1000),
            "price": f64::from(r % 10_000) / 8.0,
            "nums": nums,
        });
        w.add(i, d.as_object().unwrap()).unwrap();
    }
    w.finish(dir.path(), n).unwrap();
    let idx = FieldIndex::open(dir.path()).unwrap();
    (dir, idx)
}

fn sample(n: u32, every: u32) -> RoaringBitmap {
    let mut x: u64 = 99;
    (0..n)
        .filter(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) as u32).is_multiple_of(every)
        })
        .collect()
}

fn time(reps: usize, mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut v = Vec::with_capacity(reps);
    let mut len = 0;
    for _ in 0..reps {
        let t = Instant::now();
        len = std::hint::black_box(f());
        v.push(t.elapsed());
    }
    v.sort();
    (v[v.len() / 2], len)
}

type Case<'a> = (
    String,
    RoaringBitmap,
    &'a [SortKey],
    Option<&'a [SortValue]>,
);

fn main() {
    let id_of = |r: u32| DocId::Int(r.into());
    for n in [10_000u32, 1_000_000] {
        let (_dir, idx) = build(n);
        let s = idx.schema();
        let all = idx.eval(&Filter::match_all(), &|_| None);
        let low = idx.eval(
            &Filter::parse(&json!({"range": {"price": {"lt": 125.0}}}), s).unwrap(),
            &|_| None,
        );
        let k1 = parse_sort(&json!([{"price": "desc"}]), s, "sort").unwrap();
        let k2 = parse_sort(&json!([{"price": "desc"}, "brand"]), s, "sort").unwrap();
        let kb = parse_sort(&json!(["brand", {"price": "desc"}]), s, "sort").unwrap();
        let km = parse_sort(&json!([{"nums": "desc"}]), s, "sort").unwrap();
        let deep = idx.page(&all, &k2, None, 6000, &id_of);
        let deep = deep.last().unwrap().1.clone();
        let reps = if n > 100_000 { 9 } else { 201 };
        let cases: Vec<Case> = vec![
            ("all, price desc".into(), all.clone(), &k1, None),
            ("all, price desc + brand".into(), all.clone(), &k2, None),
            ("10% random, 2 keys".into(), sample(n, 10), &k2, None),
            ("1% random, 2 keys".into(), sample(n, 100), &k2, None),
            ("0.1% random, 2 keys".into(), sample(n, 1000), &k2, None),
            (
                "10% price<125, price desc (adversarial)".into(),
                low,
                &k2,
                None,
            ),
            (
                "all, page 300 (cursor at 6000)".into(),
                all.clone(),
                &k2,
                Some(&deep),
            ),
            ("all, brand asc + price desc".into(), all.clone(), &kb, None),
            (
                "all, nums desc (multi-valued int)".into(),
                all.clone(),
                &km,
                None,
            ),
        ];
        for (name, rows, keys, after) in &cases {
            let ms: Vec<String> = [PagePlan::Scan, PagePlan::Walk, PagePlan::Auto]
                .into_iter()
                .map(|plan| {
                    let (d, _) = time(reps, || {
                        idx.page_with_plan(rows, keys, *after, 20, &id_of, plan)
                            .len()
                    });
                    format!("{:>9.3}", d.as_secs_f64() * 1e3)
                })
                .collect();
            println!(
                "{n:>8} | {name:<42} | {:>8} rows | {} ms (scan | walk | auto)",
                rows.len(),
                ms.join(" | ")
            );
        }
    }
}
