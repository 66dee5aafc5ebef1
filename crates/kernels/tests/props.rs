//! Property tests: every backend the running CPU supports (called explicitly through
//! [`Backend::available`], not only the dispatched one) against the scalar reference and
//! against an f64 evaluation, over random lengths, values and block shapes.
//!
//! Tolerance: SIMD paths sum in a different order (and with FMA). For any summation order of
//! `n` terms the rounding error is at most about `(n + 1) * u * sum(|term|)`, `u = 2^-24`, so
//! that (with a little slack) is the bound against the f64 value, and twice it against the
//! scalar reference (which has its own rounding error).

use proptest::prelude::*;
use searchd_kernels::{scalar, Backend};

const U: f64 = (f32::EPSILON as f64) / 2.0;

/// Error bound for an `n`-term f32 sum whose terms have absolute sum `abs_sum`; `extra`
/// counts additional roundings per term (l2sq rounds `a - b` before squaring).
fn bound(n: usize, abs_sum: f64, extra: usize) -> f64 {
    1.01 * (n + 1 + extra) as f64 * U * abs_sum
}

fn dot_f64(a: &[f32], b: &[f32]) -> (f64, f64) {
    a.iter().zip(b).fold((0.0, 0.0), |(s, m), (&x, &y)| {
        let t = x as f64 * y as f64;
        (s + t, m + t.abs())
    })
}

fn l2sq_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum()
}

fn check(what: &str, backend: &Backend, got: f32, reference: f32, exact: f64, tol: f64) {
    assert!(
        (got as f64 - exact).abs() <= tol,
        "{what} [{}]: got {got}, f64 {exact}, tolerance {tol}",
        backend.name()
    );
    assert!(
        (got as f64 - reference as f64).abs() <= 2.0 * tol,
        "{what} [{}]: got {got}, scalar reference {reference}, tolerance {}",
        backend.name(),
        2.0 * tol
    );
}

/// Values in [-scale, scale] for a random scale in {1e-3, 1, 1e3}, with some exact zeros.
fn values(n: usize) -> impl Strategy<Value = Vec<f32>> {
    prop_oneof![Just(1e-3f32), Just(1.0f32), Just(1e3f32)].prop_flat_map(move |scale| {
        proptest::collection::vec(
            prop_oneof![9 => -1.0f32..1.0, 1 => Just(0.0f32)].prop_map(move |x| x * scale),
            n,
        )
    })
}

fn pair(max_len: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (0..max_len).prop_flat_map(|n| (values(n), values(n)))
}

/// (nq, nb, dim, q, b) with q: nq x dim and b: nb x dim.
fn block_case(
    nq: std::ops::Range<usize>,
    nb: std::ops::Range<usize>,
    dim: std::ops::Range<usize>,
) -> impl Strategy<Value = (usize, usize, usize, Vec<f32>, Vec<f32>)> {
    (nq, nb, dim).prop_flat_map(|(nq, nb, dim)| {
        (
            Just(nq),
            Just(nb),
            Just(dim),
            values(nq * dim),
            values(nb * dim),
        )
    })
}

fn check_blocks(nq: usize, nb: usize, dim: usize, q: &[f32], b: &[f32]) {
    let mut ref_dot = vec![0.0; nq * nb];
    let mut ref_l2 = vec![0.0; nq * nb];
    scalar::dot_block(q, nq, b, nb, dim, &mut ref_dot);
    scalar::l2sq_block(q, nq, b, nb, dim, &mut ref_l2);
    let mut out = vec![f32::NAN; nq * nb];
    for &be in Backend::available() {
        out.fill(f32::NAN);
        be.dot_block(q, nq, b, nb, dim, &mut out);
        for i in 0..nq {
            let qi = &q[i * dim..(i + 1) * dim];
            for j in 0..nb {
                let bj = &b[j * dim..(j + 1) * dim];
                let (exact, abs) = dot_f64(qi, bj);
                let k = i * nb + j;
                check(
                    &format!("dot_block {nq}x{nb}x{dim} ({i},{j})"),
                    be,
                    out[k],
                    ref_dot[k],
                    exact,
                    bound(dim, abs, 0),
                );
            }
        }
        out.fill(f32::NAN);
        be.l2sq_block(q, nq, b, nb, dim, &mut out);
        for i in 0..nq {
            let qi = &q[i * dim..(i + 1) * dim];
            for j in 0..nb {
                let bj = &b[j * dim..(j + 1) * dim];
                let exact = l2sq_f64(qi, bj);
                let k = i * nb + j;
                check(
                    &format!("l2sq_block {nq}x{nb}x{dim} ({i},{j})"),
                    be,
                    out[k],
                    ref_l2[k],
                    exact,
                    bound(dim, exact, 3),
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pair_kernels_match_reference((a, b) in pair(1100)) {
        let n = a.len();
        let (exact_dot, abs_dot) = dot_f64(&a, &b);
        let exact_l2 = l2sq_f64(&a, &b);
        let (exact_norm, _) = dot_f64(&a, &a);
        for &be in Backend::available() {
            check("dot", be, be.dot(&a, &b), scalar::dot(&a, &b), exact_dot, bound(n, abs_dot, 0));
            check("l2sq", be, be.l2sq(&a, &b), scalar::l2sq(&a, &b), exact_l2, bound(n, exact_l2, 3));
            check("norm_sq", be, be.norm_sq(&a), scalar::norm_sq(&a), exact_norm, bound(n, exact_norm, 0));
        }
        // The dispatched free functions are one of the above; check the plumbing anyway.
        let active = Backend::active();
        prop_assert_eq!(searchd_kernels::dot(&a, &b).to_bits(), active.dot(&a, &b).to_bits());
        prop_assert_eq!(searchd_kernels::l2sq(&a, &b).to_bits(), active.l2sq(&a, &b).to_bits());
        prop_assert_eq!(searchd_kernels::norm_sq(&a).to_bits(), active.norm_sq(&a).to_bits());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Small query counts: the nq == 1 path and the unpacked (dot-layout) tiles, with every
    /// row / column / dimension remainder.
    #[test]
    fn blocks_small_match_reference((nq, nb, dim, q, b) in block_case(0..14, 0..41, 0..300)) {
        check_blocks(nq, nb, dim, &q, &b);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// Many query rows: the packed (outer-product) path, including partial panels.
    #[test]
    fn blocks_packed_match_reference((nq, nb, dim, q, b) in block_case(128..150, 1..70, 1..140)) {
        check_blocks(nq, nb, dim, &q, &b);
    }
}

/// Shapes typical for the project (and dims straddling the vector widths), deterministic.
#[test]
fn typical_dims() {
    let mut s = 0x1234_5678_u32;
    let mut gen = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    };
    for dim in [1, 7, 8, 9, 15, 16, 17, 31, 33, 50, 64, 100, 128, 384, 768] {
        let (q, b) = (gen(3 * dim), gen(9 * dim));
        check_blocks(3, 9, dim, &q, &b);
        let (q, b) = (gen(130 * dim), gen(21 * dim));
        check_blocks(130, 21, dim, &q, &b);
    }
}

/// Shapes large enough to cross the cache-blocking boundaries: several query blocks and base
/// superblocks in the unpacked path, several query blocks and base chunks (with a partial
/// panel) in the packed path.
#[test]
fn multi_block_shapes() {
    let gen = |n: usize, seed: u32| -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    };
    for (nq, nb, dim) in [(100, 30, 1000), (200, 70, 900), (127, 9, 3000)] {
        check_blocks(nq, nb, dim, &gen(nq * dim, 7), &gen(nb * dim, 11));
    }
}

/// Every implementation the CPU has must be in the list that the tests above iterate.
#[test]
fn all_detected_paths_are_tested() {
    let names: Vec<&str> = Backend::available().iter().map(|b| b.name()).collect();
    eprintln!("backends under test: {names:?}");
    assert_eq!(names.last(), Some(&"scalar"));
    #[cfg(target_arch = "x86_64")]
    {
        // The x86 backends also use `popcnt` (hamming), so they require it too.
        let avx2 = is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("popcnt");
        assert_eq!(names.contains(&"avx2+fma"), avx2);
        assert_eq!(
            names.contains(&"avx512"),
            avx2 && is_x86_feature_detected!("avx512f")
        );
    }
    #[cfg(target_arch = "aarch64")]
    assert_eq!(
        names.contains(&"neon"),
        std::arch::is_aarch64_feature_detected!("neon")
    );
}

#[test]
fn normalize_gives_unit_norm() {
    let mut v: Vec<f32> = (0..384).map(|i| (i as f32 * 0.37).sin()).collect();
    assert!(searchd_kernels::normalize(&mut v));
    assert!((scalar::norm_sq(&v) - 1.0).abs() < 1e-5);
    let mut z = vec![0.0f32; 10];
    assert!(!searchd_kernels::normalize(&mut z));
    assert!(z.iter().all(|&x| x == 0.0));
    let mut inf = vec![f32::INFINITY, 1.0];
    assert!(!searchd_kernels::normalize(&mut inf));
    assert_eq!(inf[1], 1.0);
    // Squares that underflow or overflow float32 are still valid vectors.
    for scale in [1e-30f32, 1e-40, 1e25, 4e37] {
        let mut v: Vec<f32> = (0..384).map(|i| scale * (1.0 + (i % 7) as f32)).collect();
        assert!(searchd_kernels::normalize(&mut v), "scale {scale}");
        let n: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
        assert!((n - 1.0).abs() < 1e-5, "scale {scale}: norm^2 {n}");
    }
}

#[test]
#[should_panic(expected = "length mismatch")]
fn dot_length_mismatch_panics() {
    searchd_kernels::dot(&[1.0, 2.0], &[1.0]);
}

#[test]
#[should_panic(expected = "length mismatch")]
fn l2sq_length_mismatch_panics() {
    searchd_kernels::l2sq(&[1.0], &[]);
}

#[test]
#[should_panic(expected = "q.len() != nq * dim")]
fn dot_block_shape_overflow_panics() {
    // nq * dim wraps to 0 in wrapping arithmetic; must be caught, not "match" an empty q.
    let mut out = [];
    searchd_kernels::dot_block(&[], usize::MAX / 2 + 1, &[], 0, 2, &mut out);
}

#[test]
#[should_panic(expected = "out.len() != nq * nb")]
fn dot_block_bad_out_panics() {
    let mut out = [0.0; 3];
    searchd_kernels::dot_block(&[1.0, 2.0], 1, &[1.0, 2.0, 3.0, 4.0], 2, 2, &mut out);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The SQ8 integer kernel is exact: every backend must give the scalar reference's
    /// value bit for bit, for every length (all remainders of the 32- and 16-wide loops)
    /// and the full range of both operand types, as long as the sum fits an i32 (weights
    /// up to 2^13 at lengths up to 1000: 1000 * 255 * 8192 < 2^31).
    #[test]
    fn dot_u8_i16_is_exact(
        (a, b) in (0usize..1000).prop_flat_map(|n| (
            proptest::collection::vec(any::<u8>(), n),
            proptest::collection::vec(-8192i16..=8192, n),
        ))
    ) {
        let want: i64 = a.iter().zip(&b).map(|(&x, &y)| x as i64 * y as i64).sum();
        prop_assert_eq!(scalar::dot_u8_i16(&a, &b) as i64, want);
        for &be in Backend::available() {
            prop_assert_eq!(be.dot_u8_i16(&a, &b) as i64, want, "backend {}", be.name());
        }
        prop_assert_eq!(searchd_kernels::dot_u8_i16(&a, &b) as i64, want);
    }
}

/// Extremes: all 255 against all +-32767 over short lengths, where no sum overflows.
#[test]
fn dot_u8_i16_extremes() {
    for n in [1usize, 15, 16, 17, 31, 32, 33, 64, 100, 257] {
        let a = vec![255u8; n];
        for w in [i16::MAX, i16::MIN, -1, 1] {
            let b = vec![w; n];
            let want = 255i64 * w as i64 * n as i64;
            for &be in Backend::available() {
                assert_eq!(
                    be.dot_u8_i16(&a, &b) as i64,
                    want,
                    "{} n={n} w={w}",
                    be.name()
                );
            }
        }
    }
}

/// The value at position `i` of 4-bit values packed as [`searchd_kernels::dot_u4_i16`]
/// documents, decoded independently of the reference (byte and nibble from the position).
fn nibble_at(a: &[u8], i: usize) -> u8 {
    let (blk, r) = (i / 64, i % 64);
    let w = (a.len() - 32 * blk).min(32);
    if r < w {
        a[32 * blk + r] & 0x0f
    } else {
        a[32 * blk + r - w] >> 4
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The 4-bit kernel is exact on every backend, for every length (every remainder of the
    /// 32-byte blocks) and the full range of both operands, against a decoding of the
    /// documented packing that does not share the reference's loop.
    #[test]
    fn dot_u4_i16_is_exact(
        (a, b) in (0usize..700).prop_flat_map(|n| (
            proptest::collection::vec(any::<u8>(), n),
            proptest::collection::vec(any::<i16>(), 2 * n),
        ))
    ) {
        let want: i64 = (0..b.len()).map(|i| nibble_at(&a, i) as i64 * b[i] as i64).sum();
        prop_assert_eq!(scalar::dot_u4_i16(&a, &b) as i64, want);
        for &be in Backend::available() {
            prop_assert_eq!(be.dot_u4_i16(&a, &b) as i64, want, "backend {}", be.name());
        }
        prop_assert_eq!(searchd_kernels::dot_u4_i16(&a, &b) as i64, want);
    }
}

/// Extremes: every nibble 15 against all +-32767, and each position alone (a code with one
/// nonzero nibble picks out exactly its weight: the packing, position by position).
#[test]
fn dot_u4_i16_extremes_and_positions() {
    for n in [1usize, 5, 31, 32, 33, 64, 65, 96, 128, 130, 192] {
        let a = vec![0xffu8; n];
        for w in [i16::MAX, i16::MIN, -1, 1] {
            let b = vec![w; 2 * n];
            let want = 15i64 * w as i64 * 2 * n as i64;
            for &be in Backend::available() {
                assert_eq!(be.dot_u4_i16(&a, &b) as i64, want, "{} n={n}", be.name());
            }
        }
        let b: Vec<i16> = (0..2 * n as i16).collect();
        for i in 0..2 * n {
            let mut a = vec![0u8; n];
            let (blk, r) = (i / 64, i % 64);
            let w = (n - 32 * blk).min(32);
            if r < w {
                a[32 * blk + r] = 1;
            } else {
                a[32 * blk + r - w] = 1 << 4;
            }
            for &be in Backend::available() {
                assert_eq!(be.dot_u4_i16(&a, &b), i as i32, "{} n={n} i={i}", be.name());
            }
        }
    }
}

#[test]
#[should_panic(expected = "dot_u4_i16")]
fn dot_u4_i16_length_mismatch_panics() {
    searchd_kernels::dot_u4_i16(&[1, 2], &[1, 2, 3]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The 4-bit by 8-bit kernel is exact on every backend, for every length and the full
    /// range of both operands (`vpmaddubsw` saturates 16-bit pair sums: all-15 nibbles
    /// against -128 or 127 weights must not), against the independent decoding.
    #[test]
    fn dot_u4_i8_is_exact(
        (a, b) in (0usize..700).prop_flat_map(|n| (
            proptest::collection::vec(any::<u8>(), n),
            proptest::collection::vec(any::<i8>(), 2 * n),
        ))
    ) {
        let want: i64 = (0..b.len()).map(|i| nibble_at(&a, i) as i64 * b[i] as i64).sum();
        prop_assert_eq!(scalar::dot_u4_i8(&a, &b) as i64, want);
        for &be in Backend::available() {
            prop_assert_eq!(be.dot_u4_i8(&a, &b) as i64, want, "backend {}", be.name());
        }
        prop_assert_eq!(searchd_kernels::dot_u4_i8(&a, &b) as i64, want);
    }
}

/// Extremes (every nibble 15 against all -128 or all 127: the largest pair sums
/// `vpmaddubsw` forms) and each position alone, on every backend.
#[test]
fn dot_u4_i8_extremes_and_positions() {
    for n in [1usize, 5, 31, 32, 33, 64, 65, 96, 128, 130, 192] {
        let a = vec![0xffu8; n];
        for w in [i8::MAX, i8::MIN, -1, 1] {
            let b = vec![w; 2 * n];
            let want = 15i64 * w as i64 * 2 * n as i64;
            for &be in Backend::available() {
                assert_eq!(be.dot_u4_i8(&a, &b) as i64, want, "{} n={n}", be.name());
            }
        }
        for i in 0..2 * n {
            let b: Vec<i8> = (0..2 * n).map(|j| if j == i { 3 } else { 0 }).collect();
            let mut a = vec![0u8; n];
            let (blk, r) = (i / 64, i % 64);
            let w = (n - 32 * blk).min(32);
            if r < w {
                a[32 * blk + r] = 5;
            } else {
                a[32 * blk + r - w] = 5 << 4;
            }
            for &be in Backend::available() {
                assert_eq!(be.dot_u4_i8(&a, &b), 15, "{} n={n} i={i}", be.name());
            }
        }
    }
}

#[test]
#[should_panic(expected = "dot_u4_i8")]
fn dot_u4_i8_length_mismatch_panics() {
    searchd_kernels::dot_u4_i8(&[1, 2], &[1, 2, 3]);
}

/// (lut, codes) for `m` subspaces: `m * 256` table values, `m` codes over the full byte range.
fn adc_case(max_m: usize) -> impl Strategy<Value = (Vec<f32>, Vec<u8>)> {
    (0..max_m).prop_flat_map(|m| (values(m * 256), proptest::collection::vec(any::<u8>(), m)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The product-quantizer score sums the same `m` table entries on every path, but in a
    /// different order (the unrolled and gather loops keep several partial sums), so the
    /// results may differ by rounding: held to the same `(m + 1) u sum|terms|` bound as the
    /// float kernels above, not to bit equality. Lengths 0..200 cover every remainder of the
    /// 4-wide unrolled loop and the 16/8-wide gather steps.
    #[test]
    fn pq_adc_matches_reference((lut, codes) in adc_case(200)) {
        let m = codes.len();
        let (exact, abs) = codes.iter().enumerate().fold((0.0f64, 0.0f64), |(s, a), (j, &c)| {
            let t = lut[j * 256 + c as usize] as f64;
            (s + t, a + t.abs())
        });
        let reference = scalar::pq_adc(&lut, &codes);
        for &be in Backend::available() {
            check("pq_adc", be, be.pq_adc(&lut, &codes), reference, exact, bound(m, abs, 0));
        }
        prop_assert_eq!(
            searchd_kernels::pq_adc(&lut, &codes).to_bits(),
            Backend::active().pq_adc(&lut, &codes).to_bits()
        );
    }

    /// Hamming distance is integer arithmetic: exact on every path, for every length
    /// (remainders of the 4-word loop) and bit pattern, including all-ones words.
    #[test]
    fn hamming_is_exact(
        (a, b) in (0usize..300).prop_flat_map(|n| (
            proptest::collection::vec(prop_oneof![8 => any::<u64>(), 1 => Just(0u64), 1 => Just(u64::MAX)], n),
            proptest::collection::vec(prop_oneof![8 => any::<u64>(), 1 => Just(0u64), 1 => Just(u64::MAX)], n),
        ))
    ) {
        let want: u64 = a.iter().zip(&b).map(|(x, y)| u64::from((x ^ y).count_ones())).sum();
        prop_assert_eq!(u64::from(scalar::hamming(&a, &b)), want);
        for &be in Backend::available() {
            prop_assert_eq!(u64::from(be.hamming(&a, &b)), want, "backend {}", be.name());
        }
        prop_assert_eq!(u64::from(searchd_kernels::hamming(&a, &b)), want);
    }
}

#[test]
fn hamming_extremes() {
    for n in [0usize, 1, 3, 4, 5, 8, 17, 64] {
        let ones = vec![u64::MAX; n];
        let zeros = vec![0u64; n];
        for &be in Backend::available() {
            assert_eq!(be.hamming(&ones, &zeros), 64 * n as u32, "{}", be.name());
            assert_eq!(be.hamming(&ones, &ones), 0, "{}", be.name());
        }
    }
}

#[test]
#[should_panic(expected = "pq_adc: lut.len() != codes.len() * 256")]
fn pq_adc_short_lut_panics() {
    searchd_kernels::pq_adc(&[0.0; 511], &[0, 0]);
}

#[test]
#[should_panic(expected = "hamming: length mismatch")]
fn hamming_length_mismatch_panics() {
    searchd_kernels::hamming(&[1, 2], &[1]);
}

/// (x, cols, n): a point of `dim` values and `n` points stored column-wise.
fn columns_case() -> impl Strategy<Value = (Vec<f32>, Vec<f32>, usize)> {
    (0usize..20, 0usize..300).prop_flat_map(|(dim, n)| (values(dim), values(dim * n), Just(n)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Column-wise distances: every path within the l2sq rounding bound (FMA and the
    /// reference's plain multiply-add differ by rounding), for every point-count remainder of
    /// the unrolled and single-vector loops and the partial last vector.
    #[test]
    fn l2sq_columns_match_reference((x, cols, n) in columns_case()) {
        let dim = x.len();
        let mut reference = vec![0.0f32; n];
        scalar::l2sq_columns(&x, &cols, &mut reference);
        let mut out = vec![f32::NAN; n];
        for &be in Backend::available() {
            out.fill(f32::NAN);
            be.l2sq_columns(&x, &cols, &mut out);
            for j in 0..n {
                let col: Vec<f32> = (0..dim).map(|d| cols[d * n + j]).collect();
                let exact = l2sq_f64(&x, &col);
                check("l2sq_columns", be, out[j], reference[j], exact, bound(dim, exact, 3));
            }
        }
    }
}

/// The same point in every column gives the same bits in every position (no position- or
/// count-dependent summation order), on every path.
#[test]
fn l2sq_columns_value_independent_of_position() {
    let x: Vec<f32> = (0..7).map(|i| (i as f32 * 0.731).sin()).collect();
    let p: Vec<f32> = (0..7).map(|i| (i as f32 * 1.37).cos()).collect();
    for n in [1usize, 5, 8, 31, 32, 33, 64, 100, 256] {
        let mut cols = vec![0.0f32; 7 * n];
        for d in 0..7 {
            cols[d * n..(d + 1) * n].fill(p[d]);
        }
        for &be in Backend::available() {
            let mut out = vec![0.0f32; n];
            be.l2sq_columns(&x, &cols, &mut out);
            let first = out[0].to_bits();
            assert!(
                out.iter().all(|v| v.to_bits() == first),
                "{} n={n}",
                be.name()
            );
            let mut one = [0.0f32];
            be.l2sq_columns(&x, &p, &mut one);
            assert_eq!(one[0].to_bits(), first, "{} n={n}", be.name());
        }
    }
}

#[test]
#[should_panic(expected = "l2sq_columns: cols.len() != x.len() * out.len()")]
fn l2sq_columns_bad_shape_panics() {
    let mut out = [0.0f32; 3];
    searchd_kernels::l2sq_columns(&[1.0, 2.0], &[0.0; 5], &mut out);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// argmin compares, never rounds: every path must return exactly the reference's index,
    /// for every length remainder, with ties (values from a small set), signed zeros,
    /// infinities and NaNs mixed in.
    #[test]
    fn argmin_matches_reference(
        v in proptest::collection::vec(
            prop_oneof![
                6 => (-4i32..4).prop_map(|x| x as f32),
                2 => -1.0f32..1.0,
                1 => Just(-0.0f32),
                1 => Just(f32::INFINITY),
                1 => Just(f32::NEG_INFINITY),
                1 => Just(f32::NAN),
            ],
            0..300,
        )
    ) {
        let want = scalar::argmin(&v);
        for &be in Backend::available() {
            prop_assert_eq!(be.argmin(&v), want, "backend {}", be.name());
        }
        prop_assert_eq!(searchd_kernels::argmin(&v), want);
    }
}

#[test]
fn argmin_edge_cases() {
    for &be in Backend::available() {
        assert_eq!(be.argmin(&[]), None, "{}", be.name());
        assert_eq!(be.argmin(&[f32::NAN; 40]), None, "{}", be.name());
        assert_eq!(be.argmin(&[f32::INFINITY; 40]), Some(0), "{}", be.name());
        let mut v = vec![f32::NAN; 37];
        v[33] = 5.0;
        assert_eq!(be.argmin(&v), Some(33), "{}", be.name());
        let mut v = vec![1.0f32; 256];
        v[200] = 0.5;
        v[250] = 0.5;
        assert_eq!(be.argmin(&v), Some(200), "{}", be.name());
        // -0.0 == 0.0: the first zero wins whatever its sign.
        assert_eq!(be.argmin(&[1.0, 0.0, -0.0]), Some(1), "{}", be.name());
    }
}
