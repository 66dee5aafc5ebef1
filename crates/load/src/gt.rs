//! A minimal reader for exact-neighbour id files (`.npy` int32/int64 2-D,
//! C order, little endian; or `.ivecs`).

use std::path::Path;

use crate::error::LoadError;

/// Row-major matrix of neighbour ids; row = query index.
#[derive(Debug, Clone, PartialEq)]
pub struct IdMatrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<i64>,
}

impl IdMatrix {
    pub fn row(&self, i: usize) -> &[i64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
}

fn gt_err(path: &Path, message: impl Into<String>) -> LoadError {
    LoadError::GroundTruth {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Read a ground-truth id file, choosing the format by extension.
pub fn read_ids(path: &Path) -> Result<IdMatrix, LoadError> {
    let bytes = std::fs::read(path).map_err(|source| LoadError::Input {
        path: path.to_path_buf(),
        source,
    })?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "npy" => parse_npy_ids(&bytes).map_err(|m| gt_err(path, m)),
        "ivecs" => parse_ivecs(&bytes).map_err(|m| gt_err(path, m)),
        _ => Err(gt_err(
            path,
            "unsupported ground-truth format (expected .npy int32/int64 or .ivecs)",
        )),
    }
}

/// Parse `.ivecs`: rows of (i32 count, count × i32), all the same count.
pub fn parse_ivecs(b: &[u8]) -> Result<IdMatrix, String> {
    if b.len() < 4 {
        return Err("not an .ivecs file: too short".into());
    }
    let d = i32::from_le_bytes(b[0..4].try_into().unwrap());
    if d <= 0 || d > 1_000_000 {
        return Err(format!("not an .ivecs file: first row width {d}"));
    }
    let d = d as usize;
    let row_bytes = 4 + 4 * d;
    let rem = b.len() % row_bytes;
    if rem != 0 {
        return Err(format!(
            "truncated .ivecs: {} bytes is not a multiple of the row size {row_bytes}",
            b.len()
        ));
    }
    let rows = b.len() / row_bytes;
    let mut data = Vec::with_capacity(rows * d);
    for r in 0..rows {
        let row = &b[r * row_bytes..(r + 1) * row_bytes];
        let w = i32::from_le_bytes(row[0..4].try_into().unwrap());
        if w as usize != d {
            return Err(format!("row {r} has width {w}, the first row has {d}"));
        }
        data.extend(
            row[4..]
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64),
        );
    }
    Ok(IdMatrix {
        rows,
        cols: d,
        data,
    })
}

fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let pos = header.find(&format!("'{key}'"))?;
    let rest = &header[pos + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

/// Parse a 2-D little-endian int32/int64 `.npy` in C order.
pub fn parse_npy_ids(b: &[u8]) -> Result<IdMatrix, String> {
    if b.len() < 10 || &b[0..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic)".into());
    }
    let major = b[6];
    let (hlen, hstart) = match major {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 => {
            if b.len() < 12 {
                return Err("truncated .npy header".into());
            }
            (
                u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize,
                12,
            )
        }
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let hend = hstart + hlen;
    if b.len() < hend {
        return Err("truncated .npy header".into());
    }
    let header = std::str::from_utf8(&b[hstart..hend]).map_err(|_| "bad .npy header")?;
    let descr = header_value(header, "descr").ok_or("no descr in .npy header")?;
    let descr = descr
        .trim_start_matches(['\'', '"'])
        .split(['\'', '"'])
        .next()
        .unwrap_or("");
    let width = match descr {
        "<i4" | "|i4" => 4,
        "<i8" | "|i8" => 8,
        other => {
            return Err(format!(
                "ids must be int32 or int64 little endian, found dtype '{other}'"
            ))
        }
    };
    let fortran = header_value(header, "fortran_order").ok_or("no fortran_order in .npy header")?;
    if fortran.starts_with("True") {
        return Err("Fortran-order .npy is not supported (save in C order)".into());
    }
    let shape = header_value(header, "shape").ok_or("no shape in .npy header")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or("bad shape in .npy header")?;
    let dims: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad shape '{inner}'"))
        })
        .collect::<Result<_, _>>()?;
    if dims.len() != 2 {
        return Err(format!("expected a 2-D array, found shape ({inner})"));
    }
    let (rows, cols) = (dims[0], dims[1]);
    let need = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(width))
        .ok_or("shape too large")?;
    let payload = &b[hend..];
    if payload.len() < need {
        return Err(format!(
            "truncated .npy: shape ({rows}, {cols}) needs {need} bytes of data, found {}",
            payload.len()
        ));
    }
    let payload = &payload[..need];
    let data: Vec<i64> = if width == 4 {
        payload
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64)
            .collect()
    } else {
        payload
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    Ok(IdMatrix { rows, cols, data })
}

/// Rows of a vector file (`.npy` from its header, `.fvecs` from its size), without
/// reading the data.
pub fn count_rows(path: &Path) -> Result<usize, String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ext == "fvecs" {
        let mut d = [0u8; 4];
        f.read_exact(&mut d).map_err(|e| e.to_string())?;
        let d = i32::from_le_bytes(d);
        if d <= 0 {
            return Err(format!("not an .fvecs file: first row width {d}"));
        }
        let len = f.metadata().map_err(|e| e.to_string())?.len();
        return Ok((len / (4 + 4 * d as u64)) as usize);
    }
    let mut head = vec![0u8; 4096];
    let n = f.read(&mut head).map_err(|e| e.to_string())?;
    head.truncate(n);
    if head.len() < 10 || &head[0..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic)".into());
    }
    let text = String::from_utf8_lossy(&head[10..]);
    let shape = header_value(&text, "shape").ok_or("no shape in .npy header")?;
    let first = shape
        .strip_prefix('(')
        .and_then(|s| s.split([',', ')']).next())
        .ok_or("bad shape in .npy header")?;
    first
        .trim()
        .parse()
        .map_err(|_| format!("bad shape in .npy header: {shape}"))
}

/// Schema of the ground-truth sidecar `FILE.meta.json` written by `searchd gt`.
pub const GT_META_SCHEMA: &str = "searchd.gt.v1";

/// What `searchd gt` records beside a ground-truth file (`FILE.meta.json`): the metric
/// it was computed under, so recall is never checked against another metric's
/// neighbours. Older files have no sidecar and are read as before.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GtMeta {
    pub schema: String,
    /// "cosine", "ip" or "l2".
    pub metric: String,
    /// Neighbours per query.
    pub k: usize,
    /// Query rows.
    pub queries: usize,
    /// Base vectors searched (the index's n).
    pub base_n: usize,
    pub dim: usize,
}

/// The sidecar path of a ground-truth file: `gt.npy` -> `gt.npy.meta.json`.
pub fn meta_path(gt: &Path) -> std::path::PathBuf {
    let mut s = gt.as_os_str().to_owned();
    s.push(".meta.json");
    std::path::PathBuf::from(s)
}

/// Read the sidecar of `gt`: Ok(None) when there is none (an older file).
pub fn read_meta(gt: &Path) -> Result<Option<GtMeta>, String> {
    let p = meta_path(gt);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", p.display())),
    };
    let m: GtMeta = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a ground-truth record: {e}", p.display()))?;
    if m.schema != GT_META_SCHEMA {
        return Err(format!(
            "{}: schema {:?}, expected {GT_META_SCHEMA}",
            p.display(),
            m.schema
        ));
    }
    Ok(Some(m))
}

/// Write the sidecar of `gt` (temporary file, then rename).
pub fn write_meta(gt: &Path, m: &GtMeta) -> std::io::Result<()> {
    let p = meta_path(gt);
    let mut tmp = p.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(m).expect("serialises") + "\n",
    )?;
    std::fs::rename(&tmp, &p)
}

/// Refuse a ground truth computed under another metric than the index's.
pub fn check_metric(gt: &Path, meta: &GtMeta, index_metric: &str) -> Result<(), String> {
    if meta.metric.eq_ignore_ascii_case(index_metric) {
        return Ok(());
    }
    Err(format!(
        "{} was computed under metric {} ({}), but the index uses {index_metric}: recall against it would be wrong; recompute it with searchd gt --metric {index_metric}",
        gt.display(),
        meta.metric,
        meta_path(gt).display()
    ))
}
