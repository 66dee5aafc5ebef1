//! NumPy `.npy` files: header versions 1.0, 2.0 and 3.0; 2-D C-order arrays.
//!
//! Layout: magic `\x93NUMPY`, major and minor version bytes, header length (u16 LE for
//! version 1, u32 LE for 2 and 3), then a Python dict literal such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 384), }` padded with spaces and
//! a newline, then the raw data.

use std::io::Write;
use std::path::Path;

use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};

use crate::{atomic, map_file, Error, IdMatrix, Result, Vectors, NPY_MAGIC};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    F4,
    F2,
    F8,
    U1,
    I4,
    I8,
}

impl Dtype {
    fn size(self) -> usize {
        match self {
            Dtype::U1 => 1,
            Dtype::F2 => 2,
            Dtype::F4 | Dtype::I4 => 4,
            Dtype::F8 | Dtype::I8 => 8,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Header {
    pub dtype: Dtype,
    pub descr: String,
    pub n: usize,
    pub cols: usize,
    pub data_offset: usize,
}

/// Python literal values that appear in .npy headers.
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Str(String),
    Int(u64),
    Bool(bool),
    None,
    Tuple(Vec<Lit>),
    List(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }

    /// Comma-separated items up to `close`; returns them and whether a comma followed the
    /// last one (to tell `(3,)` from `(3)`).
    fn seq(&mut self, close: u8) -> std::result::Result<(Vec<Lit>, bool), String> {
        let mut items = Vec::new();
        let mut trailing = false;
        loop {
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok((items, trailing));
            }
            items.push(self.value()?);
            trailing = false;
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    trailing = true;
                }
                Some(c) if c == close => {}
                _ => {
                    return Err(format!(
                        "expected ',' or '{}' at byte {}",
                        close as char, self.i
                    ))
                }
            }
        }
    }

    fn value(&mut self) -> std::result::Result<Lit, String> {
        match self.peek() {
            None => Err("unexpected end of header".into()),
            Some(q @ (b'\'' | b'"')) => {
                self.i += 1;
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i] != q {
                    self.i += 1;
                }
                if self.i >= self.s.len() {
                    return Err("unterminated string".into());
                }
                let v = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                self.i += 1;
                Ok(Lit::Str(v))
            }
            Some(b'(') => {
                self.i += 1;
                let (items, trailing) = self.seq(b')')?;
                if items.len() == 1 && !trailing {
                    // `(x)` is just x in Python.
                    Ok(items.into_iter().next().unwrap())
                } else {
                    Ok(Lit::Tuple(items))
                }
            }
            Some(b'[') => {
                self.i += 1;
                Ok(Lit::List(self.seq(b']')?.0))
            }
            Some(b'{') => {
                self.i += 1;
                let mut entries = Vec::new();
                loop {
                    if self.peek() == Some(b'}') {
                        self.i += 1;
                        return Ok(Lit::Dict(entries));
                    }
                    let k = self.value()?;
                    self.expect(b':')?;
                    let v = self.value()?;
                    entries.push((k, v));
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {}
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
                    }
                }
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                let v = text
                    .parse::<u64>()
                    .map_err(|_| format!("number {text} is too large"))?;
                // Python 2 era numpy wrote long integers as `3L`.
                if self.s.get(self.i) == Some(&b'L') {
                    self.i += 1;
                }
                Ok(Lit::Int(v))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.i;
                while self.i < self.s.len() && self.s[self.i].is_ascii_alphanumeric() {
                    self.i += 1;
                }
                match &self.s[start..self.i] {
                    b"True" => Ok(Lit::Bool(true)),
                    b"False" => Ok(Lit::Bool(false)),
                    b"None" => Ok(Lit::None),
                    w => Err(format!("unexpected word '{}'", String::from_utf8_lossy(w))),
                }
            }
            Some(b'-') => Err("negative number in header".into()),
            Some(c) => Err(format!(
                "unexpected character '{}' at byte {}",
                c.escape_ascii(),
                self.i
            )),
        }
    }
}

fn shape_text(shape: &[u64]) -> String {
    match shape {
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn parse_dtype(path: &Path, descr: &str) -> Result<Dtype> {
    let (order, code) = match descr.as_bytes().first() {
        Some(b'<' | b'>' | b'|' | b'=') => (descr.as_bytes()[0], &descr[1..]),
        _ => (b'=', descr),
    };
    let dtype = match code {
        "f4" => Dtype::F4,
        "f2" | "e" => Dtype::F2,
        "f8" => Dtype::F8,
        "u1" | "B" => Dtype::U1,
        "i4" => Dtype::I4,
        "i8" => Dtype::I8,
        _ => {
            return Err(Error::unsupported(
                path,
                format!(
                    "unsupported dtype '{descr}' (supported: float32 '<f4', float16 '<f2', float64 '<f8', uint8 '|u1' for vectors; int32 '<i4', int64 '<i8' for ids)"
                ),
            ))
        }
    };
    if order == b'>' && dtype.size() > 1 {
        return Err(Error::unsupported(
            path,
            format!(
                "big-endian dtype '{descr}' is not supported; convert with a.astype('<{code}')"
            ),
        ));
    }
    if order == b'=' && cfg!(target_endian = "big") && dtype.size() > 1 {
        return Err(Error::unsupported(
            path,
            format!("native-order dtype '{descr}' on a big-endian machine is not supported"),
        ));
    }
    Ok(dtype)
}

/// Parses and validates the header of a whole .npy file held in `bytes`: a 2-D, C-order
/// array of a known dtype whose data is exactly as long as the shape says.
pub(crate) fn parse_header(path: &Path, bytes: &[u8]) -> Result<Header> {
    if !bytes.starts_with(NPY_MAGIC) {
        if NPY_MAGIC.starts_with(bytes) {
            return Err(Error::format(
                path,
                "truncated .npy file (only part of the magic)",
            ));
        }
        let shown: String = bytes[..bytes.len().min(8)].escape_ascii().to_string();
        return Err(Error::format(
            path,
            format!("not a .npy file: bad magic (expected \\x93NUMPY, found \"{shown}\")"),
        ));
    }
    if bytes.len() < 10 {
        return Err(Error::format(path, "truncated .npy header"));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(Error::format(path, "truncated .npy header"));
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        _ => {
            return Err(Error::unsupported(
                path,
                format!(
                    ".npy format version {major}.{minor} is not supported (1.0, 2.0 and 3.0 are)"
                ),
            ))
        }
    };
    let end = start + hlen;
    if end > bytes.len() {
        return Err(Error::format(
            path,
            format!(
                "truncated .npy header: it declares {hlen} bytes, the file has {}",
                bytes.len() - start
            ),
        ));
    }
    let bad_header = |msg: String| Error::format(path, format!("malformed .npy header: {msg}"));
    let mut parser = Parser {
        s: &bytes[start..end],
        i: 0,
    };
    let dict = match parser.value().map_err(bad_header)? {
        Lit::Dict(d) => d,
        _ => return Err(bad_header("not a dict".into())),
    };
    let get = |key: &str| {
        dict.iter()
            .find(|(k, _)| *k == Lit::Str(key.to_string()))
            .map(|(_, v)| v)
    };
    let descr = match get("descr") {
        Some(Lit::Str(s)) => s.clone(),
        Some(Lit::List(_)) => {
            return Err(Error::unsupported(
                path,
                "structured (record) dtype is not supported; expected a plain numeric array",
            ))
        }
        _ => return Err(bad_header("missing or invalid 'descr'".into())),
    };
    let fortran = match get("fortran_order") {
        Some(Lit::Bool(b)) => *b,
        _ => return Err(bad_header("missing or invalid 'fortran_order'".into())),
    };
    let shape: Vec<u64> = match get("shape") {
        Some(Lit::Tuple(items)) => items
            .iter()
            .map(|x| match x {
                Lit::Int(v) => Ok(*v),
                _ => Err(bad_header("non-integer in 'shape'".into())),
            })
            .collect::<Result<_>>()?,
        Some(Lit::Int(v)) => vec![*v],
        _ => return Err(bad_header("missing or invalid 'shape'".into())),
    };
    let dtype = parse_dtype(path, &descr)?;
    if fortran {
        return Err(Error::unsupported(
            path,
            "fortran_order is True (column-major) which is not supported; save a C-order array (np.ascontiguousarray)",
        ));
    }
    if shape.len() != 2 {
        return Err(Error::format(
            path,
            format!(
                "expected a 2-D array (n, dim), found {}-D shape {}",
                shape.len(),
                shape_text(&shape)
            ),
        ));
    }
    if shape[1] == 0 {
        return Err(Error::format(
            path,
            format!("shape {} has dimension 0", shape_text(&shape)),
        ));
    }
    let too_big = || Error::format(path, format!("shape {} is too large", shape_text(&shape)));
    let n = usize::try_from(shape[0]).map_err(|_| too_big())?;
    let cols = usize::try_from(shape[1]).map_err(|_| too_big())?;
    let need = n
        .checked_mul(cols)
        .and_then(|x| x.checked_mul(dtype.size()))
        .ok_or_else(too_big)?;
    let have = bytes.len() - end;
    if have < need {
        return Err(Error::format(
            path,
            format!(
                "truncated: shape {} of '{descr}' needs {need} data bytes, the file has {have}",
                shape_text(&shape)
            ),
        ));
    }
    if have > need {
        return Err(Error::format(
            path,
            format!(
                "{} unexpected bytes after the data of shape {} '{descr}'",
                have - need,
                shape_text(&shape)
            ),
        ));
    }
    Ok(Header {
        dtype,
        descr,
        n,
        cols,
        data_offset: end,
    })
}

/// Decodes little-endian float16 bytes into f32 (uses F16C where available).
fn decode_f16(src: &[u8], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), dst.len() * 2);
    if cfg!(target_endian = "little") {
        if let Ok(bits) = bytemuck::try_cast_slice::<u8, u16>(src) {
            bits.reinterpret_cast::<f16>().convert_to_f32_slice(dst);
            return;
        }
    }
    // Unaligned (or big-endian host): go through a small buffer.
    const BLOCK: usize = 4096;
    let mut buf = [0u16; BLOCK];
    for (s, d) in src.chunks(BLOCK * 2).zip(dst.chunks_mut(BLOCK)) {
        let m = d.len();
        for (b, c) in buf[..m].iter_mut().zip(s.chunks_exact(2)) {
            *b = u16::from_le_bytes([c[0], c[1]]);
        }
        buf[..m].reinterpret_cast::<f16>().convert_to_f32_slice(d);
    }
}

pub(crate) fn read_vectors(path: &Path) -> Result<Vectors> {
    let map = map_file(path)?;
    let h = parse_header(path, &map)?;
    let (n, dim) = (h.n, h.cols);
    let data = &map[h.data_offset..];
    match h.dtype {
        Dtype::F4 => {
            if cfg!(target_endian = "little")
                && h.data_offset % 4 == 0
                && bytemuck::try_cast_slice::<u8, f32>(data).is_ok()
            {
                let offset = h.data_offset;
                return Ok(Vectors::from_mmap(map, offset, n, dim));
            }
            let v = data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok(Vectors::from_vec(v, n, dim))
        }
        Dtype::F2 => {
            let mut v = vec![0f32; n * dim];
            decode_f16(data, &mut v);
            Ok(Vectors::from_vec(v, n, dim))
        }
        Dtype::F8 => {
            let v = data
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()) as f32)
                .collect();
            Ok(Vectors::from_vec(v, n, dim))
        }
        Dtype::U1 => Ok(Vectors::from_vec(
            data.iter().map(|&b| b as f32).collect(),
            n,
            dim,
        )),
        Dtype::I4 | Dtype::I8 => Err(Error::unsupported(
            path,
            format!(
                "integer dtype '{}' holds ids, not vectors (expected float32 '<f4' or float16 '<f2')",
                h.descr
            ),
        )),
    }
}

pub(crate) fn read_ids(path: &Path) -> Result<IdMatrix> {
    let map = map_file(path)?;
    let h = parse_header(path, &map)?;
    let data = &map[h.data_offset..];
    let v: Vec<i64> = match h.dtype {
        Dtype::I4 => data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64)
            .collect(),
        Dtype::I8 => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        _ => {
            return Err(Error::unsupported(
                path,
                format!(
                    "dtype '{}' is not an id matrix (expected int32 '<i4' or int64 '<i8')",
                    h.descr
                ),
            ))
        }
    };
    Ok(IdMatrix {
        n: h.n,
        k: h.cols,
        data: v,
    })
}

/// The header bytes (magic .. newline) for a 2-D C-order array; total length is a
/// multiple of 64 so the data that follows is aligned.
pub(crate) fn header_bytes(descr: &str, n: usize, cols: usize) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n}, {cols}), }}");
    let pad_to = |prefix: usize| {
        let unpadded = prefix + dict.len() + 1;
        unpadded.div_ceil(64) * 64
    };
    let (version, prefix) = if pad_to(10) - 10 <= u16::MAX as usize {
        (1u8, 10)
    } else {
        (2u8, 12)
    };
    let total = pad_to(prefix);
    let hlen = total - prefix;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(NPY_MAGIC);
    out.push(version);
    out.push(0);
    if version == 1 {
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

/// Writes `values` as little-endian bytes of 4-byte scalars.
pub(crate) fn write_le32<T: bytemuck::Pod>(
    w: &mut impl Write,
    values: &[T],
    to_le: impl Fn(&T) -> [u8; 4],
) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        return w.write_all(bytemuck::cast_slice(values));
    }
    let mut buf = Vec::with_capacity(64 * 1024);
    for chunk in values.chunks(16 * 1024) {
        buf.clear();
        for x in chunk {
            buf.extend_from_slice(&to_le(x));
        }
        w.write_all(&buf)?;
    }
    Ok(())
}

pub(crate) fn write_f32(path: &Path, data: &[f32], n: usize, dim: usize) -> Result<()> {
    atomic::write_atomic(path, |w| {
        w.write_all(&header_bytes("<f4", n, dim))?;
        write_le32(w, data, |x| x.to_le_bytes())
    })
}

pub(crate) fn write_i32(path: &Path, data: &[i32], n: usize, k: usize) -> Result<()> {
    atomic::write_atomic(path, |w| {
        w.write_all(&header_bytes("<i4", n, k))?;
        write_le32(w, data, |x| x.to_le_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_parses() {
        for (n, d) in [(0, 1), (3, 4), (1_000_000, 384), (usize::MAX / 64, 3)] {
            let h = header_bytes("<f4", n, d);
            assert_eq!(h.len() % 64, 0);
            assert_eq!(*h.last().unwrap(), b'\n');
            let mut file = h.clone();
            if n * d < 100 {
                file.resize(h.len() + n * d * 4, 0);
                let parsed = parse_header(Path::new("x.npy"), &file).unwrap();
                assert_eq!((parsed.n, parsed.cols, parsed.data_offset), (n, d, h.len()));
            }
        }
    }

    #[test]
    fn parser_handles_variants() {
        let mut p = Parser {
            s: b"{\"descr\": \"<f2\", \"shape\": (2L, 3L), 'fortran_order': False}",
            i: 0,
        };
        let v = p.value().unwrap();
        match v {
            Lit::Dict(d) => {
                assert_eq!(d.len(), 3);
                assert_eq!(d[1].1, Lit::Tuple(vec![Lit::Int(2), Lit::Int(3)]));
            }
            _ => panic!(),
        }
        let mut p = Parser { s: b"(5,)", i: 0 };
        assert_eq!(p.value().unwrap(), Lit::Tuple(vec![Lit::Int(5)]));
        let mut p = Parser { s: b"()", i: 0 };
        assert_eq!(p.value().unwrap(), Lit::Tuple(vec![]));
    }
}
