//! In-memory columns and their on-disk encoding.

use std::path::Path;

use roaring::RoaringBitmap;

use crate::schema::Schema;
use crate::{Error, Result};

pub(crate) const MAGIC: &[u8; 8] = b"SDFIELDS";
pub(crate) const END_MAGIC: &[u8; 8] = b"SDFEND01";
pub(crate) const VERSION: u32 = 1;
pub(crate) const HEADER: usize = 16;
pub(crate) const FOOTER: usize = 20;

/// A keyword column.
#[derive(Debug, Default)]
pub(crate) struct KeywordCol {
    pub dict: Vec<String>,
    pub postings: Vec<RoaringBitmap>,
    pub offsets: Vec<u32>,
    pub ords: Vec<u32>,
    pub present: RoaringBitmap,
    pub ignored: u64,
}

/// An integer (or datetime) or float column.
#[derive(Debug, Default)]
pub(crate) struct NumCol<T> {
    pub offsets: Vec<u32>,
    pub values: Vec<T>,
    pub sorted_values: Vec<T>,
    pub sorted_rows: Vec<u32>,
    pub present: RoaringBitmap,
}

impl<T: Copy> NumCol<T> {
    pub fn row(&self, row: u32) -> &[T] {
        let r = row as usize;
        if r + 1 >= self.offsets.len() {
            return &[];
        }
        &self.values[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }
}

impl KeywordCol {
    pub fn row(&self, row: u32) -> &[u32] {
        let r = row as usize;
        if r + 1 >= self.offsets.len() {
            return &[];
        }
        &self.ords[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }
}

/// A bool column.
#[derive(Debug, Default)]
pub(crate) struct BoolCol {
    pub t: RoaringBitmap,
    pub f: RoaringBitmap,
    pub present: RoaringBitmap,
}

#[derive(Debug)]
pub(crate) enum Column {
    Keyword(KeywordCol),
    Int(NumCol<i64>),
    Float(NumCol<f64>),
    Bool(BoolCol),
}

impl Column {
    pub fn present(&self) -> &RoaringBitmap {
        match self {
            Column::Keyword(c) => &c.present,
            Column::Int(c) => &c.present,
            Column::Float(c) => &c.present,
            Column::Bool(c) => &c.present,
        }
    }
    /// Whether some row has more than one distinct value.
    pub fn multi(&self) -> bool {
        match self {
            Column::Keyword(c) => c.ords.len() as u64 > c.present.len(),
            Column::Int(c) => c.values.len() as u64 > c.present.len(),
            Column::Float(c) => c.values.len() as u64 > c.present.len(),
            Column::Bool(c) => c.t.intersection_len(&c.f) > 0,
        }
    }
}

// ---------- encoding ----------

pub(crate) struct Out(pub Vec<u8>);

impl Out {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn u32s(&mut self, v: &[u32]) {
        self.u64(v.len() as u64);
        for x in v {
            self.u32(*x);
        }
    }
    fn i64s(&mut self, v: &[i64]) {
        self.u64(v.len() as u64);
        for x in v {
            self.0.extend_from_slice(&x.to_le_bytes());
        }
    }
    fn f64s(&mut self, v: &[f64]) {
        self.u64(v.len() as u64);
        for x in v {
            self.0.extend_from_slice(&x.to_bits().to_le_bytes());
        }
    }
    fn bitmap(&mut self, b: &RoaringBitmap) {
        let mut buf = Vec::with_capacity(b.serialized_size());
        b.serialize_into(&mut buf)
            .expect("writing to a Vec cannot fail");
        self.bytes(&buf);
    }
}

/// Encodes the whole file: header, schema, columns, footer.
pub(crate) fn encode(schema: &Schema, docs: u32, cols: &[Column]) -> Vec<u8> {
    let mut o = Out(Vec::new());
    o.0.extend_from_slice(MAGIC);
    o.u32(VERSION);
    o.u32(0);
    o.u32(docs);
    o.bytes(&serde_json::to_vec(schema).expect("schema serializes"));
    o.u64(cols.len() as u64);
    for col in cols {
        let start = o.0.len();
        o.u64(0); // section length, patched below
        match col {
            Column::Keyword(c) => {
                o.0.push(0);
                o.u64(c.dict.len() as u64);
                for s in &c.dict {
                    o.bytes(s.as_bytes());
                }
                for p in &c.postings {
                    o.bitmap(p);
                }
                o.u32s(&c.offsets);
                o.u32s(&c.ords);
                o.bitmap(&c.present);
                o.u64(c.ignored);
            }
            Column::Int(c) => {
                o.0.push(1);
                o.u32s(&c.offsets);
                o.i64s(&c.values);
                o.i64s(&c.sorted_values);
                o.u32s(&c.sorted_rows);
                o.bitmap(&c.present);
            }
            Column::Float(c) => {
                o.0.push(2);
                o.u32s(&c.offsets);
                o.f64s(&c.values);
                o.f64s(&c.sorted_values);
                o.u32s(&c.sorted_rows);
                o.bitmap(&c.present);
            }
            Column::Bool(c) => {
                o.0.push(3);
                o.bitmap(&c.t);
                o.bitmap(&c.f);
            }
        }
        let len = (o.0.len() - start - 8) as u64;
        o.0[start..start + 8].copy_from_slice(&len.to_le_bytes());
    }
    let body_len = (o.0.len() - HEADER) as u64;
    o.u64(body_len);
    let crc = crc32fast::hash(&o.0);
    o.u32(crc);
    o.0.extend_from_slice(END_MAGIC);
    o.0
}

// ---------- decoding ----------

struct In<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> In<'a> {
    fn err(&self, message: impl Into<String>) -> Error {
        Error::Format {
            path: self.path.to_path_buf(),
            message: message.into(),
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            return Err(self.err(format!("section overruns the file at byte {}", self.pos)));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn len(&mut self, elem: usize) -> Result<usize> {
        let n = self.u64()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(elem as u64) > left {
            return Err(self.err(format!("length {n} overruns the file at byte {}", self.pos)));
        }
        Ok(n as usize)
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.len(1)?;
        self.take(n)
    }
    fn u32s(&mut self) -> Result<Vec<u32>> {
        let n = self.len(4)?;
        let b = self.take(n * 4)?;
        Ok(b.chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }
    fn i64s(&mut self) -> Result<Vec<i64>> {
        let n = self.len(8)?;
        let b = self.take(n * 8)?;
        Ok(b.chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }
    fn f64s(&mut self) -> Result<Vec<f64>> {
        let n = self.len(8)?;
        let b = self.take(n * 8)?;
        Ok(b.chunks_exact(8)
            .map(|c| f64::from_bits(u64::from_le_bytes(c.try_into().unwrap())))
            .collect())
    }
    fn bitmap(&mut self) -> Result<RoaringBitmap> {
        let b = self.bytes()?;
        RoaringBitmap::deserialize_from(b).map_err(|e| self.err(format!("bad bitmap: {e}")))
    }
}

/// The decoded file: schema, document count, columns and each column's
/// (posting bytes, column bytes).
pub(crate) struct Decoded {
    pub schema: Schema,
    pub docs: u32,
    pub cols: Vec<Column>,
    pub sizes: Vec<(u64, u64)>,
}

pub(crate) fn decode(buf: &[u8], path: &Path) -> Result<Decoded> {
    let bad = |m: String| Error::Format {
        path: path.to_path_buf(),
        message: m,
    };
    if buf.len() < HEADER + FOOTER {
        return Err(bad(format!("truncated: {} bytes", buf.len())));
    }
    if &buf[..8] != MAGIC {
        return Err(bad("not a searchd fields file (bad magic)".into()));
    }
    let version = u32::from_le_bytes(buf[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(bad(format!(
            "unsupported format version {version} (expected {VERSION})"
        )));
    }
    let foot = &buf[buf.len() - FOOTER..];
    if &foot[12..] != END_MAGIC {
        return Err(bad("truncated or corrupt: bad footer".into()));
    }
    let body_len = u64::from_le_bytes(foot[..8].try_into().unwrap());
    if body_len != (buf.len() - HEADER - FOOTER) as u64 {
        return Err(bad(format!(
            "truncated or corrupt: footer says {body_len} body bytes, file has {}",
            buf.len() - HEADER - FOOTER
        )));
    }
    let crc = u32::from_le_bytes(foot[8..12].try_into().unwrap());
    let actual = crc32fast::hash(&buf[..buf.len() - 12]);
    if crc != actual {
        return Err(bad(format!(
            "checksum mismatch (stored {crc:08x}, computed {actual:08x})"
        )));
    }
    let body = &buf[..buf.len() - FOOTER];
    let mut r = In {
        buf: body,
        pos: HEADER,
        path,
    };
    let docs = r.u32()?;
    let schema: Schema =
        serde_json::from_slice(r.bytes()?).map_err(|e| bad(format!("bad schema: {e}")))?;
    let n = r.len(9)?;
    if n != schema.fields.len() {
        return Err(bad(format!(
            "{n} columns for {} fields",
            schema.fields.len()
        )));
    }
    let mut cols = Vec::with_capacity(n);
    let mut sizes = Vec::with_capacity(n);
    for spec in &schema.fields {
        let sec_len = r.len(1)?;
        let end = r.pos + sec_len;
        let kind = r.u8()?;
        let (col, post) = match kind {
            0 => {
                let nd = r.len(8)?;
                let mut dict = Vec::with_capacity(nd);
                for _ in 0..nd {
                    let s = std::str::from_utf8(r.bytes()?)
                        .map_err(|_| bad("keyword is not UTF-8".into()))?;
                    dict.push(s.to_string());
                }
                let p0 = r.pos;
                let mut postings = Vec::with_capacity(nd);
                for _ in 0..nd {
                    postings.push(r.bitmap()?);
                }
                let post = (r.pos - p0) as u64;
                let c = KeywordCol {
                    dict,
                    postings,
                    offsets: r.u32s()?,
                    ords: r.u32s()?,
                    present: r.bitmap()?,
                    ignored: r.u64()?,
                };
                check_csr(&c.offsets, c.ords.len(), docs).map_err(bad)?;
                if c.ords.iter().any(|&o| o as usize >= c.dict.len()) {
                    return Err(bad(format!(
                        "field \"{}\": ordinal out of range",
                        spec.name
                    )));
                }
                (Column::Keyword(c), post)
            }
            1 | 2 => {
                let col = if kind == 1 {
                    let c = NumCol {
                        offsets: r.u32s()?,
                        values: r.i64s()?,
                        sorted_values: r.i64s()?,
                        sorted_rows: r.u32s()?,
                        present: r.bitmap()?,
                    };
                    check_num(&c, docs).map_err(bad)?;
                    Column::Int(c)
                } else {
                    let c = NumCol {
                        offsets: r.u32s()?,
                        values: r.f64s()?,
                        sorted_values: r.f64s()?,
                        sorted_rows: r.u32s()?,
                        present: r.bitmap()?,
                    };
                    check_num(&c, docs).map_err(bad)?;
                    Column::Float(c)
                };
                (col, 0)
            }
            3 => {
                let t = r.bitmap()?;
                let f = r.bitmap()?;
                let present = &t | &f;
                (Column::Bool(BoolCol { t, f, present }), sec_len as u64)
            }
            k => {
                return Err(bad(format!(
                    "field \"{}\": unknown column kind {k}",
                    spec.name
                )))
            }
        };
        if r.pos != end {
            return Err(bad(format!(
                "field \"{}\": section length mismatch",
                spec.name
            )));
        }
        if let Some(max) = col.present().max() {
            if max >= docs {
                return Err(bad(format!(
                    "field \"{}\": row {max} >= {docs} docs",
                    spec.name
                )));
            }
        }
        sizes.push((post, sec_len as u64 - post));
        cols.push(col);
    }
    if r.pos != body.len() {
        return Err(bad("trailing bytes after the last section".into()));
    }
    Ok(Decoded {
        schema,
        docs,
        cols,
        sizes,
    })
}

fn check_csr(offsets: &[u32], n: usize, docs: u32) -> std::result::Result<(), String> {
    if offsets.len() != docs as usize + 1
        || offsets[0] != 0
        || *offsets.last().unwrap() as usize != n
        || offsets.windows(2).any(|w| w[0] > w[1])
    {
        return Err("bad per-row offsets".into());
    }
    Ok(())
}

fn check_num<T>(c: &NumCol<T>, docs: u32) -> std::result::Result<(), String> {
    check_csr(&c.offsets, c.values.len(), docs)?;
    if c.sorted_values.len() != c.sorted_rows.len() || c.sorted_values.len() != c.values.len() {
        return Err("bad sorted column".into());
    }
    if c.sorted_rows.iter().any(|&r| r >= docs) {
        return Err("row out of range".into());
    }
    Ok(())
}
