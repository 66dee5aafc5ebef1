//! The file format: round trip, corruption and truncation refused.

use searchd_fields::*;
use serde_json::json;

fn write(dir: &std::path::Path) -> FieldsMeta {
    let mut w = FieldsWriter::new(FieldsConfig::default());
    for i in 0..500u32 {
        let d = json!({"k": format!("v{}", i % 7), "n": i, "f": f64::from(i) / 4.0, "b": i % 2 == 0,
                       "t": "2024-01-01T00:00:00Z", "a": [i % 3, i % 5]});
        w.add(i, d.as_object().unwrap()).unwrap();
    }
    w.finish(dir, 510).unwrap()
}

#[test]
fn reopen_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let meta = write(dir.path());
    let bytes = std::fs::read(dir.path().join(FIELDS_FILE)).unwrap();
    assert_eq!(
        meta.files,
        vec![(
            FIELDS_FILE.to_string(),
            bytes.len() as u64,
            crc32fast_hash(&bytes)
        )]
    );
    assert_eq!(meta.bytes, bytes.len() as u64);
    assert!(!dir.path().join("fields.bin.tmp").exists());
    let m2: FieldsMeta = serde_json::from_str(&serde_json::to_string(&meta).unwrap()).unwrap();
    assert_eq!(m2, meta);
    for _ in 0..2 {
        let idx = FieldIndex::open(dir.path()).unwrap();
        assert_eq!(idx.docs(), 510);
        assert_eq!(idx.schema(), &meta.schema);
        let st = idx.stats();
        assert_eq!(st["bytes"], bytes.len() as u64);
        assert_eq!(st["fields"]["k"]["distinct"], 7);
        assert_eq!(st["fields"]["a"]["multi_valued"], true);
        assert!(st["fields"]["k"]["postings_bytes"].as_u64().unwrap() > 0);
        let f = Filter::parse(
            &json!({"bool": {"must": [{"term": {"k": "v3"}}, {"range": {"n": {"lt": 100}}}]}}),
            idx.schema(),
        )
        .unwrap();
        let rows = idx.eval(&f, &|_| None);
        assert_eq!(rows.len(), (0..100).filter(|i| i % 7 == 3).count() as u64);
        let all = idx.eval(&Filter::match_all(), &|_| None);
        assert_eq!(all.len(), 510);
        let facet = idx.facet("k", &all).unwrap();
        assert_eq!(facet.iter().map(|x| x.1).sum::<u64>(), 500);
    }
}

fn crc32fast_hash(b: &[u8]) -> u32 {
    // CRC-32 (IEEE), bitwise, to check the reported checksum independently.
    let mut crc = !0u32;
    for &x in b {
        crc ^= u32::from(x);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn corrupt_and_truncated_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let path = dir.path().join(FIELDS_FILE);
    let good = std::fs::read(&path).unwrap();
    let mut cases: Vec<Vec<u8>> = vec![
        Vec::new(),
        good[..10].to_vec(),
        good[..good.len() / 2].to_vec(),
        good[..good.len() - 1].to_vec(),
    ];
    for pos in [
        0,
        9,
        20,
        good.len() / 3,
        good.len() / 2,
        good.len() - 25,
        good.len() - 15,
        good.len() - 3,
    ] {
        let mut b = good.clone();
        b[pos] ^= 0x41;
        cases.push(b);
    }
    let mut longer = good.clone();
    longer.push(0);
    cases.push(longer);
    for (i, b) in cases.iter().enumerate() {
        std::fs::write(&path, b).unwrap();
        match FieldIndex::open(dir.path()) {
            Err(Error::Format { path: p, message }) => {
                assert_eq!(p, path, "case {i}");
                assert!(!message.is_empty());
                assert!(Error::Format { path: p, message }
                    .to_string()
                    .contains(FIELDS_FILE));
            }
            other => panic!("case {i}: {other:?}"),
        }
    }
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(
        FieldIndex::open(dir.path()),
        Err(Error::Io { .. })
    ));
    std::fs::write(&path, &good).unwrap();
    FieldIndex::open(dir.path()).unwrap();
}

#[test]
fn empty_segment() {
    let dir = tempfile::tempdir().unwrap();
    let meta = FieldsWriter::new(FieldsConfig::default())
        .finish(dir.path(), 0)
        .unwrap();
    assert!(meta.schema.fields.is_empty());
    let idx = FieldIndex::open(dir.path()).unwrap();
    assert_eq!(idx.docs(), 0);
    let all = idx.eval(&Filter::match_all(), &|_| None);
    assert!(all.is_empty());
    assert_eq!(idx.estimate(&Filter::match_all()), 0);
    assert!(idx
        .page(&all, &[], None, 10, &|r| DocId::Int(r.into()))
        .is_empty());
}
