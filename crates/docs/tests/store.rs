//! The document store: round trips, refusing truncated/corrupt files, bit flips, the v1 fixture.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use searchd_docs::store::BLOCK_SIZE;
use searchd_docs::{Error, StoreReader, StoreWriter};

fn write_store(path: &Path, docs: &[Vec<u8>]) -> searchd_docs::StoreInfo {
    let mut w = StoreWriter::create(path).unwrap();
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(w.add(d).unwrap(), i as u32);
    }
    w.finish().unwrap()
}

fn random_docs(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let len = match rng.random_range(0..100) {
                0..=9 => 0,
                10..=11 => rng.random_range(BLOCK_SIZE..3 * BLOCK_SIZE),
                12..=20 => rng.random_range(1000..BLOCK_SIZE),
                _ => rng.random_range(1..300),
            };
            // Compressible-ish JSON-like text with some random bytes.
            let mut d = format!("{{\"i\":{i},\"t\":\"").into_bytes();
            while d.len() < len {
                if rng.random_bool(0.1) {
                    d.push(rng.random());
                } else {
                    d.extend_from_slice(b"lorem ipsum ");
                }
            }
            d.truncate(len);
            d
        })
        .collect()
}

#[test]
fn round_trip_10k_docs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("docs.bin");
    let docs = random_docs(1, 10_000);
    let info = write_store(&p, &docs);
    assert!(!dir.path().join("docs.bin.tmp").exists());
    assert_eq!(info.docs, 10_000);
    assert_eq!(
        info.raw_bytes,
        docs.iter().map(|d| d.len() as u64).sum::<u64>()
    );
    assert_eq!(info.bytes, std::fs::metadata(&p).unwrap().len());
    assert!(info.bytes < info.raw_bytes, "compresses: {info:?}");
    let r = StoreReader::open(&p).unwrap();
    assert_eq!(r.len(), 10_000);
    assert!(!r.is_empty());
    assert_eq!(r.bytes(), info.bytes);
    r.verify().unwrap();
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(&r.get(i as u32).unwrap(), d, "row {i}");
    }
    // Random access order, from threads (Send + Sync).
    let r = std::sync::Arc::new(r);
    let docs = std::sync::Arc::new(docs);
    let hs: Vec<_> = (0..2)
        .map(|t| {
            let (r, docs) = (r.clone(), docs.clone());
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(100 + t);
                for _ in 0..2000 {
                    let i = rng.random_range(0..docs.len());
                    assert_eq!(r.get(i as u32).unwrap(), docs[i]);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let e = r.get(10_000).unwrap_err().to_string();
    assert!(
        e.contains("row 10000") && e.contains("out of range") && e.contains("docs.bin"),
        "{e}"
    );
}

#[test]
fn edge_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let shapes: Vec<Vec<Vec<u8>>> = vec![
        vec![],
        vec![vec![]],
        vec![vec![]; 1000],
        vec![vec![7u8; 5 * BLOCK_SIZE]],
        vec![
            vec![1u8; BLOCK_SIZE],
            vec![],
            vec![2u8; BLOCK_SIZE - 1],
            vec![3],
            vec![],
        ],
    ];
    for (k, docs) in shapes.iter().enumerate() {
        let p = dir.path().join(format!("s{k}.bin"));
        let info = write_store(&p, docs);
        assert_eq!(info.docs, docs.len() as u64);
        let r = StoreReader::open(&p).unwrap();
        r.verify().unwrap();
        assert_eq!(r.len(), docs.len());
        for (i, d) in docs.iter().enumerate() {
            assert_eq!(&r.get(i as u32).unwrap(), d, "shape {k} row {i}");
        }
        assert!(r.get(docs.len() as u32).is_err());
    }
}

#[test]
fn unfinished_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.bin");
    {
        let mut w = StoreWriter::create(&p).unwrap();
        w.add(b"abc").unwrap();
        assert!(dir.path().join("x.bin.tmp").exists());
    }
    assert!(!dir.path().join("x.bin.tmp").exists());
    assert!(!p.exists());
    let e = StoreReader::open(&p).err().unwrap().to_string();
    assert!(e.contains("x.bin"), "{e}");
}

fn small_store(dir: &Path) -> (PathBuf, Vec<Vec<u8>>) {
    let p = dir.join("small.bin");
    let docs = random_docs(3, 300);
    write_store(&p, &docs);
    (p, docs)
}

#[test]
fn truncated_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = small_store(dir.path());
    let bytes = std::fs::read(&p).unwrap();
    let q = dir.path().join("cut.bin");
    for cut in (0..bytes.len())
        .step_by(97)
        .chain([bytes.len() - 1, bytes.len() - 20])
    {
        std::fs::write(&q, &bytes[..cut]).unwrap();
        let e = StoreReader::open(&q)
            .err()
            .unwrap_or_else(|| panic!("cut {cut} accepted"));
        let msg = e.to_string();
        assert!(
            msg.contains("cut.bin") && msg.contains("corrupt"),
            "cut {cut}: {msg}"
        );
    }
    // Appended bytes too.
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"xx");
    std::fs::write(&q, &longer).unwrap();
    assert!(StoreReader::open(&q).is_err());
}

#[test]
fn unknown_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = small_store(dir.path());
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&p, &bytes).unwrap();
    match StoreReader::open(&p) {
        Err(Error::StoreVersion { found: 2, .. }) => {}
        other => panic!("{:?}", other.err()),
    }
}

/// Every single-bit flip anywhere is refused at open or caught by both `get` and `verify` (but
/// one in the whole-file CRC field, which only `verify` reads); a `get` never returns wrong bytes.
#[test]
fn bit_flips_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    let (p, docs) = small_store(dir.path());
    let bytes = std::fs::read(&p).unwrap();
    let q = dir.path().join("flip.bin");
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut in_get = 0;
    for k in 0..600 {
        let i = if k < 100 {
            rng.random_range(0..bytes.len().min(64))
        } else {
            rng.random_range(0..bytes.len())
        };
        let mut g = bytes.clone();
        g[i] ^= 1 << rng.random_range(0..8);
        std::fs::write(&q, &g).unwrap();
        let Ok(r) = StoreReader::open(&q) else {
            continue;
        };
        assert!(r.verify().is_err(), "flip at byte {i} passed verify");
        let mut failed = false;
        for (row, d) in docs.iter().enumerate() {
            match r.get(row as u32) {
                Ok(got) => assert_eq!(&got, d, "flip at byte {i}: row {row} returned garbage"),
                Err(e) => {
                    let m = e.to_string();
                    assert!(
                        m.contains("corrupt") && m.contains(&format!("row {row}")),
                        "{m}"
                    );
                    failed = true;
                }
            }
        }
        // Only the whole-file CRC itself is read by nothing but `verify`.
        let file_crc_at = bytes.len() - 32 + 16..bytes.len() - 32 + 20;
        assert!(
            failed || file_crc_at.contains(&i),
            "flip at byte {i} undetected by get"
        );
        in_get += 1;
    }
    assert!(
        in_get > 100,
        "most flips land in blocks and are found by get ({in_get})"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn garbage_store_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), magic in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("g.bin");
        let mut bytes = bytes;
        if magic && bytes.len() >= 96 {
            bytes[..8].copy_from_slice(searchd_docs::store::MAGIC);
            let l = bytes.len();
            bytes[l - 8..].copy_from_slice(searchd_docs::store::FOOTER_MAGIC);
        }
        std::fs::write(&p, &bytes).unwrap();
        if let Ok(r) = StoreReader::open(&p) {
            for row in 0..r.len().min(100) {
                let _ = r.get(row as u32);
            }
            let _ = r.verify();
        }
    }

    #[test]
    fn any_docs_round_trip(docs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..2000), 0..40)) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.bin");
        write_store(&p, &docs);
        let r = StoreReader::open(&p).unwrap();
        prop_assert_eq!(r.len(), docs.len());
        for (i, d) in docs.iter().enumerate() {
            prop_assert_eq!(&r.get(i as u32).unwrap(), d);
        }
    }
}

// ---------------------------------------------------------------- format fixture

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.bin")
}

/// The fixed documents of `store-v1.bin`: small and large, empty, JSON and binary, spanning
/// several blocks.
fn fixture_docs() -> Vec<Vec<u8>> {
    let mut docs: Vec<Vec<u8>> = vec![
        br#"{"text":"hello","price":1.50}"#.to_vec(),
        Vec::new(),
        br#"{"tags":["a","b"],"meta":{"x":null}}"#.to_vec(),
        (0..=255u8).collect(),
    ];
    for i in 0..40u32 {
        docs.push(
            format!(
                "{{\"i\":{i},\"text\":\"{}\"}}",
                "word ".repeat(i as usize * 20)
            )
            .into_bytes(),
        );
    }
    docs.push(vec![b'z'; BLOCK_SIZE + 123]);
    docs.push(b"{}".to_vec());
    docs
}

/// Writes `store-v1.bin` when `SEARCHD_DOCS_BLESS=1`; otherwise checks that this build still
/// reads it (a format change that breaks old files fails here) and still writes it
/// byte for byte (a format change at all shows up here: bump VERSION, keep reading v1).
#[test]
fn v1_fixture_still_reads() {
    let path = fixture_path();
    let docs = fixture_docs();
    if std::env::var_os("SEARCHD_DOCS_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_store(&path, &docs);
    }
    let r = StoreReader::open(&path).unwrap();
    r.verify().unwrap();
    assert_eq!(r.len(), docs.len());
    for (i, d) in docs.iter().enumerate() {
        assert_eq!(&r.get(i as u32).unwrap(), d, "fixture row {i}");
    }
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.bin");
    write_store(&fresh, &docs);
    assert!(
        std::fs::read(&fresh).unwrap() == std::fs::read(&path).unwrap(),
        "this build writes v1 differently: if the format changed on purpose, bump VERSION and add a new fixture"
    );
}
