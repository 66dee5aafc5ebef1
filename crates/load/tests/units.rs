//! Unit tests of the pure parts: parsing, statistics, SLO logic, checking.

use std::path::Path;
use std::time::Duration;

use searchd_load::bodies::{BodySet, PickShared, Picker};
use searchd_load::check::{check_response, check_search_body, check_status, recall_of, Check};
use searchd_load::config::{parse_duration, parse_endpoint, parse_pick, parse_ramp, parse_rates};
use searchd_load::stats::{
    best_step, error_rate, median, new_histogram, percentiles_ms, scheduled_offset_ns, slo_pass,
    spread, LiveStats,
};
use searchd_load::{ErrorKind, LoadError, Pick};

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
    assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
    assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
    for bad in ["", "s", "abc", "5x", "-1s", "1..2s", "5 parsecs"] {
        let e = parse_duration(bad).unwrap_err();
        assert!(e.contains("invalid duration"), "{bad}: {e}");
    }
}

#[test]
fn ramps_parse() {
    assert_eq!(parse_ramp("1,2,4").unwrap().0, vec![1, 2, 4]);
    assert_eq!(parse_ramp(" 8 , 16 ").unwrap().0, vec![8, 16]);
    let e = parse_ramp("1,x,4").unwrap_err();
    assert!(e.contains("'x' is not a positive integer"), "{e}");
    assert!(parse_ramp("0,1").unwrap_err().contains("at least 1"));
    assert!(parse_ramp("").is_err());
    assert!(parse_ramp("1,,2").is_err());
    assert!(parse_ramp("-3").is_err());
    assert_eq!(parse_rates("100,250.5").unwrap().0, vec![100.0, 250.5]);
    assert!(parse_rates("100,0").is_err());
    assert!(parse_rates("fast").is_err());
}

#[test]
fn picks_and_endpoints_parse() {
    assert_eq!(parse_pick("uniform").unwrap(), Pick::Uniform);
    assert_eq!(parse_pick("seq").unwrap(), Pick::Seq);
    assert_eq!(parse_pick("zipf:1.1").unwrap(), Pick::Zipf(1.1));
    assert_eq!(parse_pick("fixed:7").unwrap(), Pick::Fixed(7));
    for bad in [
        "zipf:0",
        "zipf:-1",
        "zipf:x",
        "fixed:x",
        "fixed:-1",
        "random",
        "uniform:3",
    ] {
        assert!(
            parse_pick(bad).unwrap_err().contains("invalid pick"),
            "{bad}"
        );
    }
    let e = parse_endpoint("POST /search").unwrap();
    assert_eq!(e.method, hyper::Method::POST);
    assert_eq!(e.path, "/search");
    assert!(e.is_search());
    let h = parse_endpoint("get /health").unwrap();
    assert_eq!(h.method, hyper::Method::GET);
    assert!(!h.is_search());
    for bad in ["POST", "/search", "POST search", "POST /a /b"] {
        assert!(parse_endpoint(bad).is_err(), "{bad}");
    }
}

#[test]
fn first_errors_keep_the_first_message_of_each_kind() {
    use searchd_load::stats::{truncate_message, FirstErrors, FIRST_ERROR_CHARS};
    let mut f = FirstErrors::default();
    f.note(ErrorKind::Http4xx, "HTTP 400: first");
    f.note(ErrorKind::Http4xx, "HTTP 400: second");
    f.note(ErrorKind::Timeout, "slow");
    let v: Vec<(&str, &str)> = f.iter().collect();
    assert_eq!(
        v,
        vec![("timeout", "slow"), ("http_4xx", "HTTP 400: first")]
    );
    let long = "x".repeat(5000);
    let t = truncate_message(&long);
    assert_eq!(t.chars().count(), FIRST_ERROR_CHARS + 3);
    assert!(truncate_message("a\nb").contains("a b"));
}

#[test]
fn per_second_series_from_packed_samples() {
    use searchd_load::stats::{pack_sample, second_series};
    let mut s = vec![
        pack_sample(1, false, 300),
        pack_sample(0, false, 100),
        pack_sample(0, true, 5),
        pack_sample(0, false, 200),
        pack_sample(1, false, 400),
    ];
    let ps = second_series(&mut s);
    assert_eq!(ps.len(), 2);
    assert_eq!((ps[0].t, ps[0].ok, ps[0].errors), (0, 2, 1));
    assert_eq!(ps[0].p50_ms, Some(0.1));
    assert_eq!(ps[0].p99_ms, Some(0.2));
    assert_eq!((ps[1].t, ps[1].ok, ps[1].errors), (1, 2, 0));
}

#[test]
fn percentiles_from_known_data() {
    let mut h = new_histogram();
    for us in 1..=1000u64 {
        h.record(us * 1000).unwrap(); // 1 ms .. 1000 ms
    }
    let p = percentiles_ms(&h);
    let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() <= b * 0.002 + 0.01;
    assert!(close(p.p50, 500.0), "{p:?}");
    assert!(close(p.p95, 950.0), "{p:?}");
    assert!(close(p.p99, 990.0), "{p:?}");
    assert!(close(p.p999, 999.0), "{p:?}");
    assert!(close(p.max, 1000.0), "{p:?}");
    assert!(close(p.mean, 500.5), "{p:?}");
    let empty = percentiles_ms(&new_histogram());
    assert_eq!(empty.p99, None);
}

#[test]
fn slo_logic() {
    assert!(slo_pass(10, Some(100.0), 0.05, 100.0, 0.05)); // limits are inclusive
    assert!(!slo_pass(10, Some(100.1), 0.0, 100.0, 0.05));
    assert!(!slo_pass(10, Some(1.0), 0.051, 100.0, 0.05));
    assert!(!slo_pass(0, None, 0.0, 100.0, 0.05)); // nothing ok: never passes
    assert_eq!(error_rate(0, 0), 0.0);
    assert_eq!(error_rate(200, 10), 0.05);
}

#[test]
fn sustainable_and_peak_selection() {
    // (qps, passes SLO)
    let steps = [
        (100.0, true),
        (190.0, true),
        (350.0, true),
        (340.0, true),
        (400.0, false),
        (380.0, false),
    ];
    let sus = best_step(&steps, |s| s.0, |s| s.1);
    let peak = best_step(&steps, |s| s.0, |_| true);
    assert_eq!(sus, Some(2));
    assert_eq!(peak, Some(4));
    let none = best_step(&steps, |s| s.0, |_| false);
    assert_eq!(none, None);
    // ties go to the lower load; zero-QPS steps never win
    let tie = [(0.0, true), (10.0, true), (10.0, true)];
    assert_eq!(best_step(&tie, |s| s.0, |s| s.1), Some(1));
    let zero = [(0.0, true)];
    assert_eq!(best_step(&zero, |s| s.0, |s| s.1), None);
}

#[test]
fn medians_and_spread() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    assert_eq!(median(&[]), None);
    let s = spread(&[5.0, 1.0, 3.0]).unwrap();
    assert_eq!((s.min, s.median, s.max), (1.0, 3.0, 5.0));
}

#[test]
fn open_loop_schedule() {
    // 1000/s: request i at i ms
    assert_eq!(scheduled_offset_ns(0, 1000.0), 0);
    assert_eq!(scheduled_offset_ns(1, 1000.0), 1_000_000);
    assert_eq!(scheduled_offset_ns(2500, 1000.0), 2_500_000_000);
    // 3/s: 333.33 ms spacing, no drift after many requests
    assert_eq!(scheduled_offset_ns(3, 3.0), 1_000_000_000);
    assert_eq!(scheduled_offset_ns(3_000_000, 3.0), 1_000_000_000_000_000);
    // monotone
    let v: Vec<u64> = (0..1000).map(|i| scheduled_offset_ns(i, 777.7)).collect();
    assert!(v.windows(2).all(|w| w[1] > w[0]));
}

#[test]
fn live_quantiles_are_close() {
    let l = LiveStats::new();
    for us in 1..=10_000u64 {
        l.record_ok(us);
    }
    let p99 = l.quantile_us(0.99).unwrap() as f64;
    assert!((p99 - 9900.0).abs() / 9900.0 < 0.07, "{p99}");
    l.reset_latency();
    assert_eq!(l.quantile_us(0.5), None);
}

#[test]
fn response_checker() {
    let mut ids = Vec::new();
    let good = br#"{"hits":[{"id":3,"score":0.9},{"id":1,"score":0.9},{"id":7,"score":0.1}],"took_us":12}"#;
    assert_eq!(check_search_body(good, 3, None, &mut ids), Ok(()));
    assert_eq!(ids, vec![3, 1, 7]);
    assert_eq!(check_search_body(good, 3, Some(8), &mut ids), Ok(()));
    assert_eq!(
        check_search_body(good, 3, Some(7), &mut ids),
        Err(ErrorKind::BadId)
    );
    assert_eq!(
        check_search_body(good, 10, None, &mut ids),
        Err(ErrorKind::WrongCount)
    );
    let unsorted = br#"{"hits":[{"id":3,"score":0.1},{"id":1,"score":0.9}],"took_us":1}"#;
    assert_eq!(
        check_search_body(unsorted, 2, None, &mut ids),
        Err(ErrorKind::Unsorted)
    );
    let neg = br#"{"hits":[{"id":-1,"score":0.1}],"took_us":1}"#;
    assert_eq!(
        check_search_body(neg, 1, None, &mut ids),
        Err(ErrorKind::BadId)
    );
    for bad in [
        &b"not json"[..],
        br#"{"hits":[]}"#,   // no took_us
        br#"{"took_us":1}"#, // no hits
        br#"{"hits":[{"id":1.5,"score":1}],"took_us":1}"#,
        br#"{"hits":[{"id":1}],"took_us":1}"#, // no score
        br#"{"hits":{},"took_us":1}"#,
        br#"[]"#,
    ] {
        assert_eq!(
            check_search_body(bad, 1, None, &mut ids),
            Err(ErrorKind::BadBody),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // Collections have string ids: accepted, but not comparable with --gt rows.
    let named = br#"{"hits":[{"id":"a","score":1}],"took_us":1}"#;
    assert_eq!(check_search_body(named, 1, None, &mut ids), Ok(()));
    assert!(ids.is_empty());
    let blank = br#"{"hits":[{"id":"","score":1}],"took_us":1}"#;
    assert_eq!(
        check_search_body(blank, 1, None, &mut ids),
        Err(ErrorKind::BadId)
    );
    let empty = br#"{"hits":[],"took_us":1,"extra":true}"#;
    assert_eq!(check_search_body(empty, 0, None, &mut ids), Ok(()));

    assert_eq!(check_status(200), Ok(()));
    assert_eq!(check_status(503), Err(ErrorKind::Http503));
    assert_eq!(check_status(504), Err(ErrorKind::Http504));
    assert_eq!(check_status(404), Err(ErrorKind::Http4xx));
    assert_eq!(check_status(500), Err(ErrorKind::Http5xx));
    assert_eq!(check_status(204), Err(ErrorKind::HttpOther));
    assert_eq!(
        check_response(Check::StatusOnly, 200, b"garbage", 10, None, &mut ids),
        Ok(())
    );
    assert_eq!(
        check_response(Check::Search, 503, good, 3, None, &mut ids),
        Err(ErrorKind::Http503)
    );
    // Lexical answers: up to k hits (3 of 10 is fine, 0 too), never more, still sorted.
    assert_eq!(
        check_response(Check::SearchUpTo, 200, good, 10, None, &mut ids),
        Ok(())
    );
    assert_eq!(
        check_response(Check::SearchUpTo, 200, good, 2, None, &mut ids),
        Err(ErrorKind::WrongCount)
    );
    assert_eq!(
        check_response(
            Check::SearchUpTo,
            200,
            br#"{"hits":[],"took_us":1}"#,
            10,
            None,
            &mut ids
        ),
        Ok(())
    );
    assert_eq!(
        check_response(
            Check::SearchUpTo,
            200,
            br#"{"hits":[{"id":1,"score":0.1},{"id":2,"score":0.9}],"took_us":1}"#,
            10,
            None,
            &mut ids
        ),
        Err(ErrorKind::Unsorted)
    );
}

#[test]
fn recall_is_plain_overlap() {
    assert_eq!(recall_of(&[1, 2, 3, 4], &[4, 3, 9, 8], 4), 0.5);
    assert_eq!(recall_of(&[1, 2], &[1, 2, 3], 2), 1.0);
    // truth narrower than k: recall@(truth width)
    assert_eq!(recall_of(&[1, 2, 3], &[1, 5], 3), 0.5);
}

fn npy(descr: &str, shape: &str, payload: &[u8]) -> Vec<u8> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend((h.len() as u16).to_le_bytes());
    v.extend(h.as_bytes());
    v.extend(payload);
    v
}

/// Ground truth is read by `searchd-vecio` (the one id reader); the load lab's wrapper
/// keeps the file's path in its error.
#[test]
fn ground_truth_readers() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let read = |name: &str, bytes: &[u8]| searchd_load::gt::read_ids(&file(name, bytes));
    let err = |name: &str, bytes: &[u8]| read(name, bytes).unwrap_err().to_string();
    let p: Vec<u8> = [1i32, 2, 3, 4, 5, 6]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let m = read("a.npy", &npy("<i4", "(3, 2)", &p)).unwrap();
    assert_eq!((m.n, m.k), (3, 2));
    assert_eq!(m.row(1), &[3, 4]);
    let p8: Vec<u8> = [7i64, 8].iter().flat_map(|x| x.to_le_bytes()).collect();
    let m = read("b.npy", &npy("<i8", "(1, 2)", &p8)).unwrap();
    assert_eq!(m.row(0), &[7, 8]);
    let e = err("c.npy", &npy("<f4", "(3, 2)", &p));
    assert!(e.contains("int32") && e.contains("c.npy"), "{e}");
    let e = err("d.npy", &npy("<i4", "(3, 3)", &p));
    assert!(e.contains("d.npy") && e.contains("bytes"), "{e}");
    let e = err("e.npy", &npy("<i4", "(6,)", &p));
    assert!(e.contains("e.npy") && e.contains("2-D"), "{e}");
    let e = err("f.npy", b"hello world");
    assert!(e.contains("f.npy"), "{e}");

    let mut iv = Vec::new();
    for row in [[1i32, 2], [3, 4]] {
        iv.extend(2i32.to_le_bytes());
        for x in row {
            iv.extend(x.to_le_bytes());
        }
    }
    let m = read("g.ivecs", &iv).unwrap();
    assert_eq!((m.n, m.k, m.row(1)), (2, 2, &[3i64, 4][..]));
    let e = err("h.ivecs", &iv[..iv.len() - 2]);
    assert!(e.contains("h.ivecs"), "{e}");
}

#[test]
fn body_file_lines() {
    let text = "{\"qidx\": 3, \"k\": 5}\n\n{\"vector\": [0.1, 0.2]}\n";
    let b = BodySet::from_reader(text.as_bytes(), Path::new("q.jsonl")).unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(b.k, vec![5, 10]);
    assert_eq!(b.qidx, vec![Some(3), None]);
    assert_eq!(b.lines, vec![1, 3]);
    assert_eq!(&b.bodies[0][..], b"{\"qidx\": 3, \"k\": 5}");

    let broken = "{\"qidx\": 1}\n{\"qidx\": 2,\n";
    match BodySet::from_reader(broken.as_bytes(), Path::new("q.jsonl")) {
        Err(e @ LoadError::BodyFile { line: 2, .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with("q.jsonl:2:"), "{msg}");
            assert_eq!(e.exit_code(), 2);
        }
        other => panic!("{other:?}"),
    }
    assert!(BodySet::from_reader("".as_bytes(), Path::new("e")).is_err());
    assert!(BodySet::from_reader("[1,2]\n".as_bytes(), Path::new("e")).is_err());
}

#[test]
fn generated_bodies_and_pickers() {
    let b = BodySet::generated(4, 7, Some(64));
    assert_eq!(&b.bodies[2][..], br#"{"qidx":2,"k":7,"ef":64}"#);

    let mut seq = Picker::new(PickShared::new(Pick::Seq, 4), 1);
    let v: Vec<usize> = (0..9).map(|_| seq.next_index()).collect();
    assert_eq!(v, vec![0, 1, 2, 3, 0, 1, 2, 3, 0]);

    let mut fixed = Picker::new(PickShared::new(Pick::Fixed(2), 4), 1);
    assert!((0..50).all(|_| fixed.next_index() == 2));

    let mut uni = Picker::new(PickShared::new(Pick::Uniform, 10), 7);
    let mut counts = [0usize; 10];
    for _ in 0..10_000 {
        counts[uni.next_index()] += 1;
    }
    assert!(
        counts.iter().all(|&c| (800..1200).contains(&c)),
        "{counts:?}"
    );

    let mut zipf = Picker::new(PickShared::new(Pick::Zipf(1.0), 100), 7);
    let mut zc = [0usize; 100];
    for _ in 0..20_000 {
        zc[zipf.next_index()] += 1;
    }
    // rank 1 gets 1/H(100) ~ 19% of the picks, rank 2 about half of that
    assert!((3300..4400).contains(&zc[0]), "{}", zc[0]);
    assert!(zc[0] > zc[1] && zc[1] > zc[9] && zc[9] > zc[99]);

    // same seed, same sequence
    let mut a = Picker::new(PickShared::new(Pick::Uniform, 1000), 42);
    let mut b2 = Picker::new(PickShared::new(Pick::Uniform, 1000), 42);
    assert!((0..100).all(|_| a.next_index() == b2.next_index()));
}

#[test]
fn http_heads_and_chunked_bodies() {
    use searchd_load::client::{decode_chunked, parse_head};
    let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nContent-Type: application/json\r\n\r\n{\"hits\":[]}")
        .unwrap()
        .unwrap();
    assert_eq!(
        (h.status, h.content_length, h.chunked, h.close),
        (200, Some(12), false, false)
    );
    assert_eq!(h.len, 71);
    assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(), None);
    assert!(parse_head(b"garbage garbage\r\n\r\n").is_err());
    let c = parse_head(
        b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
    )
    .unwrap()
    .unwrap();
    assert!(c.close && c.status == 503);
    let old = parse_head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
    assert!(old.close, "HTTP/1.0 closes unless keep-alive");
    let ka = parse_head(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(!ka.close);
    let ch = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(ch.chunked);

    let body = b"4\r\nWiki\r\n6;ext=1\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
    let (b, used) = decode_chunked(body).unwrap().unwrap();
    assert_eq!(b, b"Wikipedia in \r\n\r\nchunks.");
    assert_eq!(&body[used..], b"NEXT");
    assert_eq!(decode_chunked(&body[..20]).unwrap(), None);
    assert!(decode_chunked(b"zz\r\n").is_err());
    assert!(decode_chunked(b"2\r\nabXY").is_err());
}
