//! Parquet input, through the `parquet` crate's record (row) API.

use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::serialized_reader::ReadOptionsBuilder;
use parquet::record::reader::RowIter;
use parquet::record::{Field, Row};
use parquet::schema::types::Type;

use crate::doc::{Doc, DocId, FieldSelection, ReaderConfig};
use crate::error::{excerpt, Error, Pos};

pub(crate) struct ParquetReader {
    path: PathBuf,
    cfg: ReaderConfig,
    total_bytes: u64,
    total_rows: u64,
    /// Row count of each row group of the file.
    group_rows: Vec<u64>,
    projection: Option<Type>,
    iter: Option<RowIter<'static>>,
    /// The 0-based row the next document comes from.
    row: u64,
    done: bool,
}

fn pq_err(path: &Path, pos: Option<Pos>, e: impl std::fmt::Display) -> Error {
    Error::Parquet {
        path: path.to_path_buf(),
        pos,
        message: e.to_string(),
    }
}

/// The `parquet` crate panics on some malformed files and on column types its record API does
/// not convert (`unimplemented!`); the panic is caught and becomes this error.
fn panicked(path: &Path, pos: Option<Pos>, payload: Box<dyn std::any::Any + Send>) -> Error {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown".to_string());
    pq_err(
        path,
        pos,
        format!(
            "malformed file or unsupported column type (the decoder panicked: {})",
            excerpt(&what)
        ),
    )
}

/// Opens the file, keeping only the row groups from `first_group` on.
fn open_file(path: &Path, first_group: usize) -> Result<SerializedFileReader<File>, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let opts = ReadOptionsBuilder::new()
        .with_predicate(Box::new(move |_, i| i >= first_group))
        .build();
    // The decoder has panicked on malformed metadata in the past: keep it from taking the
    // process down.
    match catch_unwind(AssertUnwindSafe(|| {
        SerializedFileReader::new_with_options(file, opts)
    })) {
        Ok(r) => r.map_err(|e| pq_err(path, None, e)),
        Err(p) => Err(panicked(path, None, p)),
    }
}

impl ParquetReader {
    pub(crate) fn open(path: &Path, cfg: &ReaderConfig) -> Result<ParquetReader, Error> {
        let total_bytes = std::fs::metadata(path)
            .map_err(|e| Error::io(path, e))?
            .len();
        let reader = open_file(path, 0)?;
        let meta = reader.metadata();
        let group_rows: Vec<u64> = meta
            .row_groups()
            .iter()
            .map(|g| g.num_rows().max(0) as u64)
            .collect();
        let total_rows = meta.file_metadata().num_rows().max(0) as u64;
        let root = meta.file_metadata().schema();
        let column = |name: &str| root.get_fields().iter().find(|f| f.name() == name).cloned();

        let schema_err = |field: &str, problem: &str| Error::Schema {
            path: path.to_path_buf(),
            field: field.to_string(),
            problem: problem.to_string(),
        };
        let Some(id_col) = column(&cfg.id_field) else {
            return Err(schema_err(
                &cfg.id_field,
                "no such column in the Parquet schema",
            ));
        };
        if id_col.is_group() {
            return Err(schema_err(
                &cfg.id_field,
                "must be a string or integer column, not a group",
            ));
        }
        if let Some(v) = &cfg.vector_field {
            match column(v) {
                None => return Err(schema_err(v, "no such column in the Parquet schema")),
                Some(c) if !c.is_group() => {
                    return Err(schema_err(v, "must be a LIST column of FLOAT or DOUBLE"))
                }
                Some(_) => {}
            }
        }
        let projection = match &cfg.fields {
            FieldSelection::All => None,
            _ => {
                let keep: Vec<Arc<Type>> = root
                    .get_fields()
                    .iter()
                    .filter(|f| {
                        let n = f.name();
                        n == cfg.id_field
                            || cfg.vector_field.as_deref() == Some(n)
                            || cfg.in_source(n)
                    })
                    .cloned()
                    .collect();
                Type::group_type_builder(root.name())
                    .with_fields(keep)
                    .build()
                    .ok()
            }
        };
        let mut r = ParquetReader {
            path: path.to_path_buf(),
            cfg: cfg.clone(),
            total_bytes,
            total_rows,
            group_rows,
            projection,
            iter: None,
            row: 0,
            done: false,
        };
        drop(reader);
        r.iter = Some(r.row_iter(0)?);
        Ok(r)
    }

    /// A row iterator over the row groups from `first_group` on, projected when a projection
    /// is set. `project` checks the projection against the file schema; should it refuse, every
    /// column is read (the values are filtered per row anyway).
    fn row_iter(&self, first_group: usize) -> Result<RowIter<'static>, Error> {
        if let Some(p) = &self.projection {
            let it = RowIter::from_file_into(Box::new(open_file(&self.path, first_group)?));
            if let Ok(projected) = it.project(Some(p.clone())) {
                return Ok(projected);
            }
        }
        Ok(RowIter::from_file_into(Box::new(open_file(
            &self.path,
            first_group,
        )?)))
    }

    pub(crate) fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    pub(crate) fn total_rows(&self) -> u64 {
        self.total_rows
    }

    pub(crate) fn bytes_read(&self) -> u64 {
        if self.total_rows == 0 {
            return if self.done { self.total_bytes } else { 0 };
        }
        let frac = (self.row.min(self.total_rows)) as f64 / self.total_rows as f64;
        (self.total_bytes as f64 * frac) as u64
    }

    pub(crate) fn skip_docs(&mut self, n: u64) -> Result<(), Error> {
        if n == 0 || self.done {
            return Ok(());
        }
        let target = self.row.saturating_add(n);
        // The row group holding `target`, and the row it starts at.
        let mut start = 0u64;
        let mut group = 0usize;
        while group < self.group_rows.len() && start + self.group_rows[group] <= target {
            start += self.group_rows[group];
            group += 1;
        }
        if group >= self.group_rows.len() {
            self.row = target.min(self.total_rows.max(start));
            self.iter = None;
            self.done = true;
            return Ok(());
        }
        if start > self.row {
            // Jump over whole row groups by reopening the file without them.
            self.iter = Some(self.row_iter(group)?);
            self.row = start;
        }
        while self.row < target {
            match self.next_row() {
                None => break,
                Some(Err(e)) => return Err(e),
                Some(Ok(_)) => {}
            }
        }
        Ok(())
    }

    fn next_row(&mut self) -> Option<Result<(u64, Row), Error>> {
        if self.done {
            return None;
        }
        let pos = Some(Pos::Row(self.row));
        let it = self.iter.as_mut()?;
        let next = match catch_unwind(AssertUnwindSafe(|| it.next())) {
            Ok(n) => n,
            Err(p) => {
                self.done = true;
                return Some(Err(panicked(&self.path, pos, p)));
            }
        };
        match next {
            None => {
                self.done = true;
                None
            }
            Some(Err(e)) => {
                self.done = true;
                Some(Err(pq_err(&self.path, pos, e)))
            }
            Some(Ok(row)) => {
                let r = self.row;
                self.row += 1;
                Some(Ok((r, row)))
            }
        }
    }

    pub(crate) fn next_doc(&mut self) -> Option<Result<Doc, Error>> {
        let (r, row) = match self.next_row()? {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        Some(row_to_doc(&self.path, &self.cfg, r, row))
    }
}

fn row_to_doc(path: &Path, cfg: &ReaderConfig, r: u64, row: Row) -> Result<Doc, Error> {
    let pos = Pos::Row(r);
    let mut id = None;
    let mut text = None;
    let mut vector = None;
    let mut source = Vec::with_capacity(256);
    source.push(b'{');
    let mut first = true;
    for (name, value) in row.get_column_iter() {
        let name = name.as_str();
        if name == cfg.id_field {
            id = Some(parse_id(path, pos, name, value)?);
        }
        if cfg.text_field.as_deref() == Some(name) {
            text = parse_text(path, pos, name, value)?;
        }
        if cfg.vector_field.as_deref() == Some(name) {
            vector = Some(parse_vector(path, pos, name, value)?);
        }
        if cfg.in_source(name) && !matches!(value, Field::Null) {
            let mark = source.len();
            if !first {
                source.push(b',');
            }
            write_str(&mut source, name);
            source.push(b':');
            if write_value(&mut source, value) {
                first = false;
            } else {
                source.truncate(mark);
            }
        }
    }
    source.push(b'}');
    let id = id.ok_or_else(|| Error::field(path, pos, &cfg.id_field, "is missing"))?;
    if let (Some(name), None) = (&cfg.vector_field, &vector) {
        return Err(Error::field(path, pos, name, "is missing"));
    }
    Ok(Doc {
        pos: r,
        id,
        text,
        vector,
        source,
    })
}

fn got(f: &Field) -> String {
    let mut b = Vec::new();
    if !write_value(&mut b, f) {
        return "null".to_string();
    }
    excerpt(&String::from_utf8_lossy(&b))
}

fn parse_id(path: &Path, pos: Pos, name: &str, f: &Field) -> Result<DocId, Error> {
    let int = |v: i128| u64::try_from(v).ok().map(DocId::Int);
    let id = match f {
        Field::Null => return Err(Error::field(path, pos, name, "is missing")),
        Field::Byte(v) => int(i128::from(*v)),
        Field::Short(v) => int(i128::from(*v)),
        Field::Int(v) => int(i128::from(*v)),
        Field::Long(v) => int(i128::from(*v)),
        Field::UByte(v) => Some(DocId::Int(u64::from(*v))),
        Field::UShort(v) => Some(DocId::Int(u64::from(*v))),
        Field::UInt(v) => Some(DocId::Int(u64::from(*v))),
        Field::ULong(v) => Some(DocId::Int(*v)),
        Field::Str(s) => Some(DocId::Str(s.clone())),
        Field::Bytes(b) => std::str::from_utf8(b.data())
            .ok()
            .map(|s| DocId::Str(s.to_string())),
        _ => None,
    };
    match id {
        Some(DocId::Str(s)) if s.is_empty() => {
            Err(Error::field(path, pos, name, "is an empty string"))
        }
        Some(id) => Ok(id),
        None => Err(Error::field(
            path,
            pos,
            name,
            format!("must be a string or an unsigned integer, got {}", got(f)),
        )),
    }
}

fn parse_text(path: &Path, pos: Pos, name: &str, f: &Field) -> Result<Option<String>, Error> {
    match f {
        Field::Null => Ok(None),
        Field::Str(s) => Ok(Some(s.clone())),
        Field::Bytes(b) => match std::str::from_utf8(b.data()) {
            Ok(s) => Ok(Some(s.to_string())),
            Err(_) => Err(Error::field(path, pos, name, "is not valid UTF-8")),
        },
        other => Err(Error::field(
            path,
            pos,
            name,
            format!("must be a string, got {}", got(other)),
        )),
    }
}

fn parse_vector(path: &Path, pos: Pos, name: &str, f: &Field) -> Result<Vec<f32>, Error> {
    let list = match f {
        Field::Null => return Err(Error::field(path, pos, name, "is missing")),
        Field::ListInternal(l) => l.elements(),
        other => {
            return Err(Error::field(
                path,
                pos,
                name,
                format!("must be a list of numbers, got {}", got(other)),
            ))
        }
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let v = match e {
            Field::Float(v) => Some(*v),
            Field::Double(v) => Some(*v as f32),
            Field::Float16(v) => Some(v.to_f32()),
            Field::Byte(v) => Some(f32::from(*v)),
            Field::Short(v) => Some(f32::from(*v)),
            Field::Int(v) => Some(*v as f32),
            Field::Long(v) => Some(*v as f32),
            Field::UByte(v) => Some(f32::from(*v)),
            Field::UShort(v) => Some(f32::from(*v)),
            Field::UInt(v) => Some(*v as f32),
            Field::ULong(v) => Some(*v as f32),
            _ => None,
        };
        match v {
            Some(v) if v.is_finite() => out.push(v),
            _ => {
                let what = match e {
                    Field::Float(v) => v.to_string(),
                    Field::Double(v) => v.to_string(),
                    Field::Float16(v) => v.to_f32().to_string(),
                    other => got(other),
                };
                return Err(Error::field(
                    path,
                    pos,
                    name,
                    format!("component {i} must be a finite number, got {what}"),
                ));
            }
        }
    }
    Ok(out)
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    // Serializing a `&str` into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn write_num<T: serde::Serialize>(out: &mut Vec<u8>, v: T) {
    let _ = serde_json::to_writer(&mut *out, &v);
}

fn write_float(out: &mut Vec<u8>, v: f64, as_f32: Option<f32>) -> bool {
    if !v.is_finite() {
        return false;
    }
    match as_f32 {
        Some(f) => write_num(out, f),
        None => write_num(out, v),
    }
    true
}

/// Writes `f` as JSON. Returns false, having written nothing, for a value JSON cannot hold
/// (null, NaN/inf, an oversized decimal): the caller omits it, or writes `null` in a list.
fn write_value(out: &mut Vec<u8>, f: &Field) -> bool {
    match f {
        Field::Null => return false,
        Field::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Field::Byte(v) => write_num(out, v),
        Field::Short(v) => write_num(out, v),
        Field::Int(v) => write_num(out, v),
        Field::Long(v) => write_num(out, v),
        Field::UByte(v) => write_num(out, v),
        Field::UShort(v) => write_num(out, v),
        Field::UInt(v) => write_num(out, v),
        Field::ULong(v) => write_num(out, v),
        Field::Float16(v) => {
            let x = v.to_f32();
            return write_float(out, f64::from(x), Some(x));
        }
        Field::Float(v) => return write_float(out, f64::from(*v), Some(*v)),
        Field::Double(v) => return write_float(out, *v, None),
        Field::Decimal(d) => match decimal_text(d.data(), d.scale()) {
            Some(t) => out.extend_from_slice(t.as_bytes()),
            None => return false,
        },
        Field::Str(s) => write_str(out, s),
        Field::Bytes(b) => match std::str::from_utf8(b.data()) {
            Ok(s) => write_str(out, s),
            Err(_) => write_str(out, &base64(b.data())),
        },
        Field::Date(d) => {
            let (y, m, day) = civil_from_days(i64::from(*d));
            write_str(out, &format!("{y:04}-{m:02}-{day:02}"));
        }
        Field::TimeMillis(ms) => {
            let ms = i64::from(*ms);
            write_str(
                out,
                &format!("{}.{:03}", hms(ms.div_euclid(1000)), ms.rem_euclid(1000)),
            );
        }
        Field::TimeMicros(us) => {
            write_str(
                out,
                &format!(
                    "{}.{:06}",
                    hms(us.div_euclid(1_000_000)),
                    us.rem_euclid(1_000_000)
                ),
            );
        }
        Field::TimestampMillis(ms) => {
            let t = format!(
                "{}.{:03}Z",
                datetime(ms.div_euclid(1000)),
                ms.rem_euclid(1000)
            );
            write_str(out, &t);
        }
        Field::TimestampMicros(us) => {
            let t = format!(
                "{}.{:06}Z",
                datetime(us.div_euclid(1_000_000)),
                us.rem_euclid(1_000_000)
            );
            write_str(out, &t);
        }
        Field::Group(row) => {
            out.push(b'{');
            let mut first = true;
            for (k, v) in row.get_column_iter() {
                let mark = out.len();
                if !first {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                if write_value(out, v) {
                    first = false;
                } else {
                    out.truncate(mark);
                }
            }
            out.push(b'}');
        }
        Field::ListInternal(list) => {
            out.push(b'[');
            for (i, v) in list.elements().iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !write_value(out, v) {
                    out.extend_from_slice(b"null");
                }
            }
            out.push(b']');
        }
        Field::MapInternal(map) => {
            let entries = map.entries();
            if entries.iter().all(|(k, _)| matches!(k, Field::Str(_))) {
                out.push(b'{');
                let mut first = true;
                for (k, v) in entries {
                    let Field::Str(k) = k else { continue };
                    let mark = out.len();
                    if !first {
                        out.push(b',');
                    }
                    write_str(out, k);
                    out.push(b':');
                    if write_value(out, v) {
                        first = false;
                    } else {
                        out.truncate(mark);
                    }
                }
                out.push(b'}');
            } else {
                out.push(b'[');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.push(b'[');
                    if !write_value(out, k) {
                        out.extend_from_slice(b"null");
                    }
                    out.push(b',');
                    if !write_value(out, v) {
                        out.extend_from_slice(b"null");
                    }
                    out.push(b']');
                }
                out.push(b']');
            }
        }
    }
    true
}

/// A decimal's unscaled big-endian two's-complement bytes and scale as JSON number text.
fn decimal_text(data: &[u8], scale: i32) -> Option<String> {
    if data.is_empty() || data.len() > 16 || !(0..=38).contains(&scale) {
        return None;
    }
    let mut v: i128 = if data[0] & 0x80 != 0 { -1 } else { 0 };
    for &b in data {
        v = (v << 8) | i128::from(b);
    }
    let digits = v.unsigned_abs().to_string();
    let scale = scale as usize;
    let sign = if v < 0 { "-" } else { "" };
    if scale == 0 {
        return Some(format!("{sign}{digits}"));
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    Some(format!("{sign}{int}.{frac}"))
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        s.push(T[(n >> 18) as usize & 63] as char);
        s.push(T[(n >> 12) as usize & 63] as char);
        s.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        s.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    s
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn hms(secs: i64) -> String {
    let s = secs.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SS` (UTC).
fn datetime(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}T{}", hms(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_decimals() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(datetime(1_709_210_096), "2024-02-29T12:34:56");
        assert_eq!(decimal_text(&[0x04, 0xD2], 2).as_deref(), Some("12.34"));
        assert_eq!(decimal_text(&[0xFF, 0x85], 3).as_deref(), Some("-0.123"));
        assert_eq!(decimal_text(&[0x07], 0).as_deref(), Some("7"));
        assert_eq!(base64(b"hi!?"), "aGkhPw==");
    }
}
