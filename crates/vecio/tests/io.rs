//! Readers and writers: round trips, hand-made numpy-compatible files, and every bad input
//! giving the right error variant with the path in a one-line message.

use std::fs;
use std::path::{Path, PathBuf};

use half::f16;
use searchd_vecio::{
    read_ids, read_vectors, read_vectors_hdf5_default, write_ids, write_vectors, Error, Vectors,
};

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// A .npy file as numpy writes it: magic, version, header length, dict padded to 64.
fn npy_bytes(version: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let prefix = if version == 1 { 10 } else { 12 };
    let total = (prefix + dict.len() + 1).div_ceil(64) * 64;
    let mut out = b"\x93NUMPY".to_vec();
    out.push(version);
    out.push(0);
    let hlen = total - prefix;
    if version == 1 {
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out.extend_from_slice(data);
    out
}

fn dict(descr: &str, shape: &str) -> String {
    format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
}

fn put(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn sample(n: usize, dim: usize) -> Vec<f32> {
    (0..n * dim).map(|i| (i as f32 * 0.37).sin()).collect()
}

/// Asserts the error is `variant`, names the path, is one line, and mentions `needle`.
#[track_caller]
fn check_err(e: Error, variant: &str, path: &Path, needle: &str) {
    let msg = e.to_string();
    let got = match &e {
        Error::Io { .. } => "Io",
        Error::Format { .. } => "Format",
        Error::Unsupported { .. } => "Unsupported",
        Error::Invalid { .. } => "Invalid",
    };
    assert_eq!(got, variant, "wrong variant for: {msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "message lacks the path: {msg}"
    );
    assert!(!msg.contains('\n'), "not one line: {msg:?}");
    assert!(
        msg.to_lowercase().contains(&needle.to_lowercase()),
        "message lacks {needle:?}: {msg}"
    );
    assert_eq!(e.path(), path);
}

#[test]
fn npy_f32_round_trip_is_mmap_and_numpy_compatible() {
    let d = dir();
    let p = d.path().join("v.npy");
    let data = sample(7, 5);
    write_vectors(&p, &data, 7, 5).unwrap();
    let bytes = fs::read(&p).unwrap();
    // Exactly what numpy writes for np.save(p, a.astype('<f4')).
    assert_eq!(
        bytes,
        npy_bytes(1, &dict("<f4", "(7, 5)"), &f32_bytes(&data))
    );
    let v = read_vectors(&p).unwrap();
    assert!(v.is_mmap());
    assert_eq!((v.n(), v.dim()), (7, 5));
    assert_eq!(v.as_slice(), &data[..]);
    assert_eq!(v.row(3), &data[15..20]);
    assert_eq!(v.into_owned(), data);
}

#[test]
fn npy_header_versions_2_and_3() {
    let d = dir();
    let data = sample(3, 4);
    for version in [2u8, 3] {
        let p = put(
            d.path(),
            &format!("v{version}.npy"),
            &npy_bytes(version, &dict("<f4", "(3, 4)"), &f32_bytes(&data)),
        );
        let v = read_vectors(&p).unwrap();
        assert_eq!(v.as_slice(), &data[..]);
    }
}

#[test]
fn npy_f16_is_decoded() {
    let d = dir();
    let vals: Vec<f32> = vec![0.5, -1.25, 3.0, 0.0, 65504.0, -0.000_061_035_156];
    let bytes: Vec<u8> = vals
        .iter()
        .flat_map(|&x| f16::from_f32(x).to_bits().to_le_bytes())
        .collect();
    let p = put(
        d.path(),
        "h.npy",
        &npy_bytes(1, &dict("<f2", "(2, 3)"), &bytes),
    );
    let v = read_vectors(&p).unwrap();
    assert!(!v.is_mmap());
    assert_eq!((v.n(), v.dim()), (2, 3));
    assert_eq!(v.as_slice(), &vals[..]);
}

#[test]
fn npy_unaligned_data_and_other_dtypes() {
    let d = dir();
    // A header whose length is not a multiple of 4 (not numpy's padding, but legal).
    let data = sample(2, 3);
    let dct = dict("<f4", "(2, 3)") + " \n";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(dct.len() as u16).to_le_bytes());
    bytes.extend_from_slice(dct.as_bytes());
    assert_ne!(bytes.len() % 4, 0);
    bytes.extend_from_slice(&f32_bytes(&data));
    let p = put(d.path(), "unaligned.npy", &bytes);
    let v = read_vectors(&p).unwrap();
    assert!(!v.is_mmap());
    assert_eq!(v.as_slice(), &data[..]);
    // Odd offset for f16 too.
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let dct = dict("<f2", "(1, 2)") + "  \n";
    bytes.extend_from_slice(&(dct.len() as u16).to_le_bytes());
    bytes.extend_from_slice(dct.as_bytes());
    bytes.extend(
        [1.5f32, -2.0]
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_bits().to_le_bytes()),
    );
    let p = put(d.path(), "unaligned16.npy", &bytes);
    assert_eq!(read_vectors(&p).unwrap().as_slice(), &[1.5, -2.0]);
    // uint8 and float64.
    let p = put(
        d.path(),
        "u8.npy",
        &npy_bytes(1, &dict("|u1", "(2, 2)"), &[0, 7, 200, 255]),
    );
    assert_eq!(
        read_vectors(&p).unwrap().as_slice(),
        &[0.0, 7.0, 200.0, 255.0]
    );
    let f8: Vec<u8> = [0.25f64, -8.5]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let p = put(
        d.path(),
        "f8.npy",
        &npy_bytes(1, &dict("<f8", "(1, 2)"), &f8),
    );
    assert_eq!(read_vectors(&p).unwrap().as_slice(), &[0.25, -8.5]);
    // Python 2 style `3L` integers and double-quoted keys.
    let p = put(
        d.path(),
        "py2.npy",
        &npy_bytes(
            1,
            "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L, 3L), }",
            &f32_bytes(&data),
        ),
    );
    assert_eq!(read_vectors(&p).unwrap().as_slice(), &data[..]);
}

#[test]
fn npy_ids_i32_and_i64() {
    let d = dir();
    let p = d.path().join("gt.npy");
    let ids: Vec<i32> = vec![1, 2, 3, -1, 5, 6];
    write_ids(&p, &ids, 2, 3).unwrap();
    assert_eq!(
        fs::read(&p).unwrap(),
        npy_bytes(
            1,
            &dict("<i4", "(2, 3)"),
            &ids.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>()
        )
    );
    let m = read_ids(&p).unwrap();
    assert_eq!((m.n, m.k), (2, 3));
    assert_eq!(m.row(1), &[-1, 5, 6]);
    let big: Vec<i64> = vec![1 << 40, 7, -3, 0];
    let bytes: Vec<u8> = big.iter().flat_map(|x| x.to_le_bytes()).collect();
    let p = put(
        d.path(),
        "gt64.npy",
        &npy_bytes(1, &dict("<i8", "(2, 2)"), &bytes),
    );
    let m = read_ids(&p).unwrap();
    assert_eq!(m.data, big);
    assert_eq!(m.row(0), &[1 << 40, 7]);
}

#[test]
fn fvecs_ivecs_bvecs_round_trips() {
    let d = dir();
    let data = sample(4, 3);
    let p = d.path().join("v.fvecs");
    write_vectors(&p, &data, 4, 3).unwrap();
    let bytes = fs::read(&p).unwrap();
    assert_eq!(bytes.len(), 4 * (4 + 12));
    assert_eq!(&bytes[0..4], &3i32.to_le_bytes());
    let v = read_vectors(&p).unwrap();
    assert_eq!((v.n(), v.dim()), (4, 3));
    assert_eq!(v.as_slice(), &data[..]);

    let p = d.path().join("gt.ivecs");
    let ids: Vec<i32> = (0..10).collect();
    write_ids(&p, &ids, 2, 5).unwrap();
    let m = read_ids(&p).unwrap();
    assert_eq!((m.n, m.k), (2, 5));
    assert_eq!(m.data, (0..10).map(i64::from).collect::<Vec<_>>());

    let mut b = Vec::new();
    for row in [[1u8, 2, 3], [250, 0, 9]] {
        b.extend_from_slice(&3i32.to_le_bytes());
        b.extend_from_slice(&row);
    }
    let p = put(d.path(), "v.bvecs", &b);
    let v = read_vectors(&p).unwrap();
    assert_eq!(v.as_slice(), &[1.0, 2.0, 3.0, 250.0, 0.0, 9.0]);
}

#[test]
fn uppercase_extension_and_sniffing() {
    let d = dir();
    let data = sample(2, 2);
    let npy = npy_bytes(1, &dict("<f4", "(2, 2)"), &f32_bytes(&data));
    let p = put(d.path(), "V.NPY", &npy);
    assert_eq!(read_vectors(&p).unwrap().as_slice(), &data[..]);
    // Unknown extension, .npy content: recognised by its magic.
    let p = put(d.path(), "vectors.bin", &npy);
    assert_eq!(read_vectors(&p).unwrap().as_slice(), &data[..]);
}

#[test]
fn npy_bad_inputs() {
    let d = dir();
    let data = f32_bytes(&sample(3, 4));
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "truncated.npy",
            npy_bytes(1, &dict("<f4", "(3, 4)"), &data[..40]),
            "Format",
            "truncated",
        ),
        (
            "header_cut.npy",
            npy_bytes(1, &dict("<f4", "(3, 4)"), &data)[..30].to_vec(),
            "Format",
            "truncated",
        ),
        (
            "magic.npy",
            b"PK\x03\x04 this is a zip".to_vec(),
            "Format",
            "bad magic",
        ),
        ("short.npy", b"\x93NUM".to_vec(), "Format", "truncated"),
        ("empty.npy", Vec::new(), "Format", "empty"),
        (
            "complex.npy",
            npy_bytes(1, &dict("<c8", "(3, 4)"), &data),
            "Unsupported",
            "dtype '<c8'",
        ),
        (
            "big_endian.npy",
            npy_bytes(1, &dict(">f4", "(3, 4)"), &data),
            "Unsupported",
            "big-endian",
        ),
        (
            "fortran.npy",
            npy_bytes(
                1,
                "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }",
                &data,
            ),
            "Unsupported",
            "fortran",
        ),
        (
            "one_d.npy",
            npy_bytes(1, &dict("<f4", "(12,)"), &data),
            "Format",
            "1-D",
        ),
        (
            "three_d.npy",
            npy_bytes(1, &dict("<f4", "(1, 3, 4)"), &data),
            "Format",
            "3-D",
        ),
        (
            "dim0.npy",
            npy_bytes(1, &dict("<f4", "(3, 0)"), &[]),
            "Format",
            "dimension 0",
        ),
        (
            "trailing.npy",
            npy_bytes(1, &dict("<f4", "(2, 4)"), &data),
            "Format",
            "unexpected bytes",
        ),
        (
            "version9.npy",
            {
                let mut b = npy_bytes(1, &dict("<f4", "(3, 4)"), &data);
                b[6] = 9;
                b
            },
            "Unsupported",
            "version 9.0",
        ),
        (
            "garbled.npy",
            npy_bytes(1, "{'descr': '<f4', 'fortran_order': Fa", &data),
            "Format",
            "malformed",
        ),
        (
            "ids_as_vectors.npy",
            npy_bytes(1, &dict("<i4", "(3, 4)"), &data),
            "Unsupported",
            "ids",
        ),
    ];
    for (name, bytes, variant, needle) in cases {
        let p = put(d.path(), name, &bytes);
        let e = read_vectors(&p).expect_err(name);
        check_err(e, variant, &p, needle);
    }
    // Floats are not ids.
    let p = put(
        d.path(),
        "f.npy",
        &npy_bytes(1, &dict("<f4", "(3, 4)"), &data),
    );
    check_err(
        read_ids(&p).unwrap_err(),
        "Unsupported",
        &p,
        "not an id matrix",
    );
}

#[test]
fn vecs_bad_inputs() {
    let d = dir();
    let mut good = Vec::new();
    for _ in 0..3 {
        good.extend_from_slice(&2i32.to_le_bytes());
        good.extend_from_slice(&f32_bytes(&[1.0, 2.0]));
    }
    let mut inconsistent = good.clone();
    inconsistent[12..16].copy_from_slice(&3i32.to_le_bytes());
    let mut inconsistent_even = good.clone(); // same total size as a valid file
    inconsistent_even[24..28].copy_from_slice(&5i32.to_le_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.fvecs", Vec::new(), "empty"),
        ("cut.fvecs", good[..good.len() - 3].to_vec(), "truncated"),
        (
            "cut_header.fvecs",
            good[..good.len() - 10].to_vec(),
            "truncated",
        ),
        ("tiny.fvecs", vec![1, 0], "truncated"),
        ("dims.fvecs", inconsistent, "row 1 declares dimension 3"),
        (
            "dims_even.fvecs",
            inconsistent_even,
            "row 2 declares dimension 5",
        ),
        ("zero.fvecs", 0i32.to_le_bytes().to_vec(), "dimension 0"),
        (
            "negative.fvecs",
            (-4i32).to_le_bytes().repeat(5),
            "dimension -4",
        ),
    ];
    for (name, bytes, needle) in cases {
        let p = put(d.path(), name, &bytes);
        check_err(read_vectors(&p).unwrap_err(), "Format", &p, needle);
    }
    let p = put(d.path(), "cut.ivecs", &good[..good.len() - 1]);
    check_err(read_ids(&p).unwrap_err(), "Format", &p, "truncated");
    let p = put(d.path(), "cut.bvecs", &[2, 0, 0, 0, 1]);
    check_err(read_vectors(&p).unwrap_err(), "Format", &p, "truncated");
    // Wrong kind of file for the call.
    let p = put(d.path(), "x.ivecs", &good);
    check_err(read_vectors(&p).unwrap_err(), "Unsupported", &p, "ids");
    let p = put(d.path(), "x.fvecs", &good);
    check_err(
        read_ids(&p).unwrap_err(),
        "Unsupported",
        &p,
        "not integer ids",
    );
}

#[test]
fn unknown_and_missing_files() {
    let d = dir();
    let p = put(d.path(), "notes.txt", b"hello, these are not vectors");
    check_err(
        read_vectors(&p).unwrap_err(),
        "Unsupported",
        &p,
        "unknown vector file format",
    );
    let p = put(d.path(), "noext", b"\x00\x01\x02");
    check_err(
        read_vectors(&p).unwrap_err(),
        "Unsupported",
        &p,
        "no extension",
    );
    let p = put(d.path(), "empty.dat", b"");
    check_err(read_vectors(&p).unwrap_err(), "Unsupported", &p, "empty");
    let p = d.path().join("missing.npy");
    check_err(read_vectors(&p).unwrap_err(), "Io", &p, "no such file");
    let p = d.path().join("missing.bin");
    check_err(read_ids(&p).unwrap_err(), "Io", &p, "no such file");
}

#[cfg(not(feature = "hdf5"))]
#[test]
fn hdf5_without_feature_says_how_to_enable() {
    let d = dir();
    let p = put(d.path(), "glove.hdf5", b"\x89HDF\r\n\x1a\nrest");
    check_err(
        read_vectors(&p).unwrap_err(),
        "Unsupported",
        &p,
        "--features hdf5",
    );
    check_err(
        read_vectors_hdf5_default(&p, "test").unwrap_err(),
        "Unsupported",
        &p,
        "--features hdf5",
    );
    // `file.hdf5#name` names the file, not the whole string.
    let with_name = d.path().join("glove.hdf5#train");
    check_err(
        read_ids(&with_name).unwrap_err(),
        "Unsupported",
        &p,
        "libhdf5-dev",
    );
    // Sniffed HDF5 content behind an unknown extension.
    let p = put(d.path(), "data.bin", b"\x89HDF\r\n\x1a\nrest");
    check_err(
        read_vectors(&p).unwrap_err(),
        "Unsupported",
        &p,
        "--features hdf5",
    );
}

#[cfg(feature = "hdf5")]
#[test]
fn hdf5_ann_benchmarks_layout() {
    let d = dir();
    let p = d.path().join("ann.hdf5");
    {
        let f = hdf5::File::create(&p).unwrap();
        let train: Vec<f32> = sample(5, 3);
        f.new_dataset::<f32>()
            .shape((5, 3))
            .create("train")
            .unwrap()
            .write_raw(&train)
            .unwrap();
        f.new_dataset::<f32>()
            .shape((2, 3))
            .create("test")
            .unwrap()
            .write_raw(&[1f32, 2., 3., 4., 5., 6.])
            .unwrap();
        f.new_dataset::<i32>()
            .shape((2, 2))
            .create("neighbors")
            .unwrap()
            .write_raw(&[4i32, 1, 0, 3])
            .unwrap();
        f.new_dataset::<f32>()
            .shape((7,))
            .create("flat")
            .unwrap()
            .write_raw(&[0f32; 7])
            .unwrap();
    }
    let v = read_vectors(&p).unwrap();
    assert_eq!((v.n(), v.dim()), (5, 3));
    assert_eq!(v.as_slice(), &sample(5, 3)[..]);
    let q = read_vectors_hdf5_default(&p, "test").unwrap();
    assert_eq!(q.as_slice(), &[1., 2., 3., 4., 5., 6.]);
    let named = PathBuf::from(format!("{}#test", p.display()));
    assert_eq!(read_vectors(&named).unwrap().n(), 2);
    let ids = read_ids(&p).unwrap();
    assert_eq!((ids.n, ids.k, ids.data.clone()), (2, 2, vec![4, 1, 0, 3]));
    let bad = PathBuf::from(format!("{}#nope", p.display()));
    check_err(
        read_vectors(&bad).unwrap_err(),
        "Format",
        &p,
        "no dataset 'nope'",
    );
    let flat = PathBuf::from(format!("{}#flat", p.display()));
    check_err(read_vectors(&flat).unwrap_err(), "Format", &p, "2-D");
    let garbage = put(d.path(), "garbage.h5", b"not hdf5 at all");
    check_err(
        read_vectors(&garbage).unwrap_err(),
        "Format",
        &garbage,
        "hdf5",
    );
}

#[test]
fn writer_argument_errors() {
    let d = dir();
    let p = d.path().join("v.npy");
    check_err(
        write_vectors(&p, &[1.0, 2.0, 3.0], 2, 2).unwrap_err(),
        "Invalid",
        &p,
        "3 values",
    );
    check_err(
        write_vectors(&p, &[], 3, 0).unwrap_err(),
        "Invalid",
        &p,
        "dim = 0",
    );
    check_err(
        write_ids(&p, &[1, 2], 1, 3).unwrap_err(),
        "Invalid",
        &p,
        "2 values",
    );
    let p = d.path().join("v.csv");
    check_err(
        write_vectors(&p, &[1.0], 1, 1).unwrap_err(),
        "Unsupported",
        &p,
        ".npy",
    );
    let p = d.path().join("v.fvecs");
    check_err(
        write_ids(&p, &[1], 1, 1).unwrap_err(),
        "Unsupported",
        &p,
        ".ivecs",
    );
    check_err(
        write_vectors(&p, &[], 0, 4).unwrap_err(),
        "Invalid",
        &p,
        "0 rows",
    );
    let p = d.path().join("no/such/dir/v.npy");
    check_err(
        write_vectors(&p, &[1.0], 1, 1).unwrap_err(),
        "Io",
        &p,
        "no such file",
    );
    assert_eq!(
        fs::read_dir(d.path()).unwrap().count(),
        0,
        "nothing left behind"
    );
}

#[test]
fn atomic_writes_leave_no_temp_files_and_keep_old_content_on_failure() {
    let d = dir();
    let p = d.path().join("base.npy");
    write_vectors(&p, &sample(10, 4), 10, 4).unwrap();
    let first = fs::read(&p).unwrap();
    // Replace while the old file is mapped: the mapping keeps the old data.
    let old = read_vectors(&p).unwrap();
    write_vectors(&p, &sample(20, 4)[40..], 10, 4).unwrap();
    assert_eq!(old.as_slice(), &sample(10, 4)[..]);
    assert_ne!(fs::read(&p).unwrap(), first);
    // A failing write leaves the current file as it was.
    let current = fs::read(&p).unwrap();
    assert!(write_vectors(&p, &[1.0; 3], 2, 2).is_err());
    assert_eq!(fs::read(&p).unwrap(), current);
    write_ids(&d.path().join("gt.ivecs"), &[1, 2], 1, 2).unwrap();
    let names: Vec<String> = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names_sorted = names.clone();
    names_sorted.sort();
    assert_eq!(names_sorted, vec!["base.npy", "gt.ivecs"], "{names:?}");
}

#[test]
fn concurrent_writers_to_one_name_never_expose_a_partial_file() {
    let d = dir();
    let p = d.path().join("v.npy");
    let data = sample(2000, 16);
    write_vectors(&p, &data, 2000, 16).unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..5 {
                    write_vectors(&p, &data, 2000, 16).unwrap();
                }
            });
        }
        s.spawn(|| {
            for _ in 0..20 {
                // Every read sees a complete file.
                let v = read_vectors(&p).unwrap();
                assert_eq!(v.n(), 2000);
            }
        });
    });
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
}

#[test]
fn non_finite_values_are_located_not_rejected() {
    let d = dir();
    let p = d.path().join("nan.npy");
    let mut data = sample(4, 3);
    data[2 * 3 + 1] = f32::NAN;
    data[3 * 3] = f32::INFINITY;
    write_vectors(&p, &data, 4, 3).unwrap();
    let v = read_vectors(&p).unwrap();
    assert_eq!(v.find_non_finite(), Some((2, 1)));
    check_err(
        v.ensure_finite(&p).unwrap_err(),
        "Invalid",
        &p,
        "row 2, column 1 is NaN",
    );
    let ok = Vectors::from_vec(sample(2, 2), 2, 2);
    assert_eq!(ok.find_non_finite(), None);
    assert!(ok.ensure_finite(&p).is_ok());
    let inf = Vectors::from_vec(vec![0.0, f32::NEG_INFINITY], 1, 2);
    assert_eq!(inf.find_non_finite(), Some((0, 1)));
}

#[test]
#[should_panic(expected = "from_vec")]
fn from_vec_length_mismatch_panics() {
    let _ = Vectors::from_vec(vec![1.0; 5], 2, 3);
}

#[test]
fn zero_rows_npy_is_valid() {
    let d = dir();
    let p = d.path().join("empty_rows.npy");
    write_vectors(&p, &[], 0, 8).unwrap();
    let v = read_vectors(&p).unwrap();
    assert_eq!((v.n(), v.dim(), v.as_slice().len()), (0, 8, 0));
}

#[test]
fn real_dev_dataset_if_present() {
    let dir = Path::new("/work/shared/datasets/dev-gcide-50k");
    let base = dir.join("base.f16.npy");
    if !base.exists() {
        eprintln!("skipping: {} not present", base.display());
        return;
    }
    let t = std::time::Instant::now();
    let v = read_vectors(&base).unwrap();
    eprintln!("read {} x {} f16 in {:?}", v.n(), v.dim(), t.elapsed());
    assert_eq!((v.n(), v.dim()), (50_000, 384));
    assert!(!v.is_mmap());
    assert_eq!(v.find_non_finite(), None);
    for i in [0, 1, 49_999] {
        let norm: f32 = v.row(i).iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-2, "row {i} norm {norm}");
    }
    let q = read_vectors(&dir.join("queries.f16.npy")).unwrap();
    assert_eq!((q.n(), q.dim()), (2_000, 384));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn round_trips(n in 1usize..40, dim in 1usize..20, seed in any::<u32>()) {
            let d = dir();
            let data: Vec<f32> = (0..n * dim)
                .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / 1e6 - 2000.0)
                .collect();
            for name in ["v.npy", "v.fvecs"] {
                let p = d.path().join(name);
                write_vectors(&p, &data, n, dim).unwrap();
                let v = read_vectors(&p).unwrap();
                prop_assert_eq!((v.n(), v.dim()), (n, dim));
                prop_assert_eq!(v.as_slice(), &data[..]);
            }
            let ids: Vec<i32> = data.iter().map(|&x| x as i32).collect();
            for name in ["g.npy", "g.ivecs"] {
                let p = d.path().join(name);
                write_ids(&p, &ids, n, dim).unwrap();
                let m = read_ids(&p).unwrap();
                prop_assert_eq!((m.n, m.k), (n, dim));
                prop_assert_eq!(m.data, ids.iter().map(|&x| x as i64).collect::<Vec<_>>());
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), prefix in any::<bool>()) {
            let d = dir();
            let mut b = if prefix { b"\x93NUMPY\x01\x00".to_vec() } else { Vec::new() };
            b.extend_from_slice(&bytes);
            for name in ["g.npy", "g.fvecs", "g.bvecs", "g.dat"] {
                let p = put(d.path(), name, &b);
                let _ = read_vectors(&p);
                let _ = read_ids(&p);
            }
        }
    }
}

#[test]
fn count_rows_reads_only_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<f32> = (0..7 * 3).map(|i| i as f32).collect();
    for name in ["v.npy", "v.fvecs"] {
        let p = dir.path().join(name);
        searchd_vecio::write_vectors(&p, &data, 7, 3).unwrap();
        assert_eq!(searchd_vecio::count_rows(&p).unwrap(), 7, "{name}");
    }
    let p = dir.path().join("bad.npy");
    std::fs::write(&p, b"not a numpy file").unwrap();
    let e = searchd_vecio::count_rows(&p).unwrap_err().to_string();
    assert!(e.contains("bad.npy"), "{e}");
}
