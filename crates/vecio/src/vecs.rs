//! The TEXMEX `.fvecs` / `.ivecs` / `.bvecs` formats: each row is a little-endian int32
//! dimension `d` followed by `d` values (float32, int32 or uint8). Every row must have the
//! same `d`.

use std::io::Write;
use std::path::Path;

use crate::{atomic, map_file, npy::write_le32, Error, IdMatrix, Result, Vectors};

/// Checks the row structure and returns `(n, d)`.
fn layout(path: &Path, bytes: &[u8], elem: usize, ext: &str) -> Result<(usize, usize)> {
    if bytes.len() < 4 {
        return Err(Error::format(
            path,
            format!(
                "truncated .{ext} file: {} bytes, less than one row header",
                bytes.len()
            ),
        ));
    }
    let d0 = i32::from_le_bytes(bytes[0..4].try_into().unwrap());
    if d0 <= 0 {
        return Err(Error::format(
            path,
            format!("not a valid .{ext} file: row 0 declares dimension {d0}"),
        ));
    }
    let d = d0 as usize;
    let row_bytes = 4 + d * elem;
    let mut off = 0usize;
    let mut row = 0usize;
    while off < bytes.len() {
        if off + 4 > bytes.len() {
            return Err(Error::format(
                path,
                format!(
                    "truncated .{ext} file: row {row} has only {} of its 4 header bytes",
                    bytes.len() - off
                ),
            ));
        }
        let di = i32::from_le_bytes(bytes[off..off + 4].try_into().unwrap());
        if di != d0 {
            return Err(Error::format(
                path,
                format!(
                    "inconsistent .{ext} file: row {row} declares dimension {di}, row 0 declares {d0} (at byte {off})"
                ),
            ));
        }
        if off + row_bytes > bytes.len() {
            return Err(Error::format(
                path,
                format!(
                    "truncated .{ext} file: last row {row} has {} of its {} data bytes",
                    bytes.len() - off - 4,
                    d * elem
                ),
            ));
        }
        off += row_bytes;
        row += 1;
    }
    Ok((row, d))
}

/// Decodes the values of every row with `f`, which maps one element's bytes to a value.
fn decode<T>(bytes: &[u8], n: usize, d: usize, elem: usize, f: impl Fn(&[u8]) -> T) -> Vec<T> {
    let row_bytes = 4 + d * elem;
    let mut out = Vec::with_capacity(n * d);
    for r in 0..n {
        let row = &bytes[r * row_bytes + 4..(r + 1) * row_bytes];
        out.extend(row.chunks_exact(elem).map(&f));
    }
    out
}

/// Rows of an `.fvecs` (`elem` 4) or `.bvecs` (`elem` 1) file, from its row layout alone.
pub(crate) fn count_rows(path: &Path, elem: usize, ext: &str) -> Result<usize> {
    let map = map_file(path)?;
    Ok(layout(path, &map, elem, ext)?.0)
}

pub(crate) fn read_fvecs(path: &Path) -> Result<Vectors> {
    let map = map_file(path)?;
    let (n, d) = layout(path, &map, 4, "fvecs")?;
    let v = decode(&map, n, d, 4, |c| f32::from_le_bytes(c.try_into().unwrap()));
    Ok(Vectors::from_vec(v, n, d))
}

pub(crate) fn read_bvecs(path: &Path) -> Result<Vectors> {
    let map = map_file(path)?;
    let (n, d) = layout(path, &map, 1, "bvecs")?;
    let v = decode(&map, n, d, 1, |c| c[0] as f32);
    Ok(Vectors::from_vec(v, n, d))
}

pub(crate) fn read_ivecs(path: &Path) -> Result<IdMatrix> {
    let map = map_file(path)?;
    let (n, k) = layout(path, &map, 4, "ivecs")?;
    let data = decode(&map, n, k, 4, |c| {
        i32::from_le_bytes(c.try_into().unwrap()) as i64
    });
    Ok(IdMatrix { n, k, data })
}

fn check_writable(path: &Path, n: usize, d: usize, ext: &str) -> Result<i32> {
    if n == 0 {
        return Err(Error::invalid(
            path,
            format!("cannot write 0 rows to .{ext} (the dimension would be lost); use .npy"),
        ));
    }
    i32::try_from(d)
        .map_err(|_| Error::invalid(path, format!("dimension {d} too large for .{ext}")))
}

fn write_rows<T: bytemuck::Pod>(
    path: &Path,
    data: &[T],
    n: usize,
    d: usize,
    ext: &str,
    to_le: fn(&T) -> [u8; 4],
) -> Result<()> {
    let d32 = check_writable(path, n, d, ext)?;
    atomic::write_atomic(path, |w| {
        for row in data.chunks_exact(d) {
            w.write_all(&d32.to_le_bytes())?;
            write_le32(w, row, to_le)?;
        }
        Ok(())
    })
}

pub(crate) fn write_fvecs(path: &Path, data: &[f32], n: usize, d: usize) -> Result<()> {
    write_rows(path, data, n, d, "fvecs", |x| x.to_le_bytes())
}

pub(crate) fn write_ivecs(path: &Path, data: &[i32], n: usize, d: usize) -> Result<()> {
    write_rows(path, data, n, d, "ivecs", |x| x.to_le_bytes())
}
