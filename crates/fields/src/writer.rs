//! Building a segment's field file.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::Path;

use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::format::{self, BoolCol, Column, KeywordCol, NumCol};
use crate::schema::{parse_datetime, FieldSpec, FieldType, FieldsConfig, Schema, Skipped};
use crate::value::{num_to_i64, str_to_i64, TypedValue};
use crate::{Error, Result, FIELDS_FILE, IGNORE_ABOVE};

/// What [`FieldsWriter::finish`] wrote.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldsMeta {
    /// The segment's schema (also stored in the file).
    pub schema: Schema,
    /// Total bytes written.
    pub bytes: u64,
    /// Each file written: name inside the directory, bytes, CRC32 of the whole file.
    pub files: Vec<(String, u64, u32)>,
}

const K_STR: u8 = 1;
const K_INT: u8 = 2;
const K_FLOAT: u8 = 4;
const K_BOOL: u8 = 8;

#[derive(Default)]
struct Acc {
    declared: Option<FieldType>,
    vals: Vec<(u32, TypedValue)>,
    array: bool,
    kinds: u8,
    all_dt: bool,
    skipped: Option<String>,
    seen: bool,
}

/// Collects the fields of a segment's documents in memory and writes them with
/// [`FieldsWriter::finish`].
pub struct FieldsWriter {
    skip: HashSet<String>,
    fields: BTreeMap<String, Acc>,
    next: u32,
    scratch: Vec<Value>,
}

impl FieldsWriter {
    /// A writer with these declared and skipped fields.
    pub fn new(cfg: FieldsConfig) -> FieldsWriter {
        let mut fields = BTreeMap::new();
        for (name, ty) in cfg.declared {
            fields.insert(
                name,
                Acc {
                    declared: Some(ty),
                    all_dt: true,
                    ..Acc::default()
                },
            );
        }
        let skip: HashSet<String> = cfg.skip.into_iter().collect();
        for s in &skip {
            fields.remove(s);
        }
        FieldsWriter {
            skip,
            fields,
            next: 0,
            scratch: Vec::new(),
        }
    }

    /// Adds the fields of the document at `row` (rows must increase; gaps are documents
    /// without fields). A value that does not convert to its field's declared type is an
    /// [`Error::Field`] and the document is not added (nothing of it is kept).
    pub fn add(&mut self, row: u32, doc: &Map<String, Value>) -> Result<()> {
        if row < self.next || row == u32::MAX {
            return Err(Error::Field {
                field: String::new(),
                row,
                message: format!(
                    "rows must arrive in increasing order (expected >= {})",
                    self.next
                ),
            });
        }
        // Validate declared fields first so a rejected document leaves no trace.
        let mut converted: Vec<(&str, Vec<TypedValue>)> = Vec::new();
        for (name, v) in doc {
            if let Some(Acc {
                declared: Some(ty), ..
            }) = self.fields.get(name.as_str())
            {
                let mut flat = std::mem::take(&mut self.scratch);
                flat.clear();
                let mut object = false;
                flatten(v, &mut flat, &mut object);
                let mut out = Vec::with_capacity(flat.len());
                for x in &flat {
                    match convert(*ty, x) {
                        Some(val) => out.push(val),
                        None => {
                            return Err(Error::Field {
                                field: name.clone(),
                                row,
                                message: format!("cannot index {x} as {ty}"),
                            })
                        }
                    }
                }
                if object {
                    return Err(Error::Field {
                        field: name.clone(),
                        row,
                        message: format!("cannot index an object as {ty}"),
                    });
                }
                self.scratch = flat;
                converted.push((name.as_str(), out));
            }
        }
        self.next = row + 1;
        let mut conv = converted.into_iter().peekable();
        for (name, v) in doc {
            if self.skip.contains(name) {
                continue;
            }
            if conv.peek().map(|c| c.0) == Some(name.as_str()) {
                let (_, vals) = conv.next().unwrap();
                let acc = self.fields.get_mut(name.as_str()).unwrap();
                acc.array |= v.is_array();
                acc.seen = true;
                acc.vals.extend(vals.into_iter().map(|x| (row, x)));
                continue;
            }
            let acc = self.fields.entry(name.clone()).or_insert_with(|| Acc {
                all_dt: true,
                ..Acc::default()
            });
            acc.seen = true;
            if acc.skipped.is_some() {
                continue;
            }
            acc.array |= v.is_array();
            let mut flat = std::mem::take(&mut self.scratch);
            flat.clear();
            let mut object = false;
            flatten(v, &mut flat, &mut object);
            if object {
                acc.skipped = Some("object values are not indexed".into());
                acc.vals = Vec::new();
                self.scratch = flat;
                continue;
            }
            for x in flat.drain(..) {
                let val = match x {
                    Value::String(s) => {
                        acc.kinds |= K_STR;
                        if acc.all_dt && parse_datetime(&s).is_none() {
                            acc.all_dt = false;
                        }
                        TypedValue::Keyword(s)
                    }
                    Value::Number(n) => match n.as_i64() {
                        Some(i) => {
                            acc.kinds |= K_INT;
                            TypedValue::Int(i)
                        }
                        None => {
                            acc.kinds |= K_FLOAT;
                            TypedValue::Float(n.as_f64().unwrap_or(f64::NAN))
                        }
                    },
                    Value::Bool(b) => {
                        acc.kinds |= K_BOOL;
                        TypedValue::Bool(b)
                    }
                    _ => continue,
                };
                acc.vals.push((row, val));
            }
            self.scratch = flat;
        }
        Ok(())
    }

    /// The fields the documents added so far bring beyond the declared ones, with the type
    /// [`FieldsWriter::finish`] would infer for each, by name; fields it would skip (mixed
    /// value types, objects, only nulls) are left out. What a live collection's dynamic
    /// mapping adds.
    pub fn inferred(&self) -> Vec<(String, FieldType)> {
        self.fields
            .iter()
            .filter(|(_, a)| a.declared.is_none() && a.skipped.is_none())
            .filter_map(|(n, a)| infer(a.kinds, a.all_dt).ok().map(|t| (n.clone(), t)))
            .collect()
    }

    /// Builds the columns and writes [`FIELDS_FILE`] into `dir` (which must exist) for a
    /// segment of `docs` documents (every added row must be below `docs`).
    pub fn finish(self, dir: &Path, docs: u32) -> Result<FieldsMeta> {
        if self.next > docs {
            return Err(Error::Field {
                field: String::new(),
                row: self.next - 1,
                message: format!("row is beyond the segment's {docs} documents"),
            });
        }
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut schema = Schema::default();
        let mut cols = Vec::new();
        for (name, acc) in self.fields {
            if let Some(reason) = acc.skipped {
                schema.skipped.push(Skipped { name, reason });
                continue;
            }
            let ty = match acc.declared {
                Some(t) => t,
                None => match infer(acc.kinds, acc.all_dt) {
                    Ok(t) => t,
                    Err(reason) => {
                        schema.skipped.push(Skipped { name, reason });
                        continue;
                    }
                },
            };
            let mut vals = acc.vals;
            if acc.declared.is_none() {
                for (_, v) in vals.iter_mut() {
                    *v = match (ty, std::mem::replace(v, TypedValue::Bool(false))) {
                        (FieldType::Datetime, TypedValue::Keyword(s)) => {
                            TypedValue::Int(parse_datetime(&s).unwrap())
                        }
                        (FieldType::Float, TypedValue::Int(i)) => TypedValue::Float(i as f64),
                        (_, x) => x,
                    };
                }
            }
            let (col, docs_with, values) = build(ty, vals, docs);
            schema.fields.push(FieldSpec {
                name,
                ty,
                array: acc.array,
                docs: docs_with,
                values,
                declared: acc.declared.is_some(),
            });
            cols.push(col);
        }
        for s in self.skip {
            schema.skipped.push(Skipped {
                name: s,
                reason: "excluded from field indexing by configuration (the id, text or vector field, or a --fields selection)".into(),
            });
        }
        schema.skipped.sort_by(|a, b| a.name.cmp(&b.name));
        let bytes = format::encode(&schema, docs, &cols);
        let crc = crc32fast::hash(&bytes);
        write_atomic(dir, FIELDS_FILE, &bytes)?;
        Ok(FieldsMeta {
            schema,
            bytes: bytes.len() as u64,
            files: vec![(FIELDS_FILE.to_string(), bytes.len() as u64, crc)],
        })
    }
}

fn infer(kinds: u8, all_dt: bool) -> std::result::Result<FieldType, String> {
    Ok(match kinds {
        0 => return Err("no values (only nulls or empty arrays)".into()),
        K_STR if all_dt => FieldType::Datetime,
        K_STR => FieldType::Keyword,
        K_INT => FieldType::Integer,
        k if k & !(K_INT | K_FLOAT) == 0 => FieldType::Float,
        K_BOOL => FieldType::Bool,
        k => {
            let mut names = Vec::new();
            for (bit, n) in [
                (K_STR, "string"),
                (K_INT | K_FLOAT, "number"),
                (K_BOOL, "bool"),
            ] {
                if k & bit != 0 {
                    names.push(n);
                }
            }
            return Err(format!(
                "mixed value types ({}) are not indexed",
                names.join(" and ")
            ));
        }
    })
}

fn flatten(v: &Value, out: &mut Vec<Value>, object: &mut bool) {
    match v {
        Value::Null => {}
        Value::Array(a) => a.iter().for_each(|x| flatten(x, out, object)),
        Value::Object(_) => *object = true,
        x => out.push(x.clone()),
    }
}

pub(crate) fn flatten_pub(v: &Value, out: &mut Vec<Value>, object: &mut bool) {
    flatten(v, out, object)
}

/// Converts one scalar to a declared type, as Elasticsearch coerces.
pub(crate) fn convert(ty: FieldType, v: &Value) -> Option<TypedValue> {
    Some(match (ty, v) {
        (FieldType::Keyword, Value::String(s)) => TypedValue::Keyword(s.clone()),
        (FieldType::Keyword, Value::Number(n)) => TypedValue::Keyword(n.to_string()),
        (FieldType::Keyword, Value::Bool(b)) => TypedValue::Keyword(b.to_string()),
        (FieldType::Integer, Value::Number(n)) => TypedValue::Int(num_to_i64(n)?),
        (FieldType::Integer, Value::String(s)) => TypedValue::Int(str_to_i64(s.trim())?),
        (FieldType::Float, Value::Number(n)) => TypedValue::Float(n.as_f64()?),
        (FieldType::Float, Value::String(s)) => {
            let f: f64 = s.trim().parse().ok()?;
            if !f.is_finite() {
                return None;
            }
            TypedValue::Float(f)
        }
        (FieldType::Bool, Value::Bool(b)) => TypedValue::Bool(*b),
        (FieldType::Bool, Value::String(s)) if s == "true" => TypedValue::Bool(true),
        (FieldType::Bool, Value::String(s)) if s == "false" => TypedValue::Bool(false),
        (FieldType::Datetime, Value::String(s)) => TypedValue::Int(parse_datetime(s)?),
        (FieldType::Datetime, Value::Number(n)) => TypedValue::Int(num_to_i64(n)?),
        _ => return None,
    })
}

/// Builds one column from (row, value) pairs in row order; returns it with the number of
/// documents with a value and the number of values.
fn build(ty: FieldType, vals: Vec<(u32, TypedValue)>, docs: u32) -> (Column, u64, u64) {
    match ty {
        FieldType::Keyword => {
            let mut ignored = 0u64;
            let vals: Vec<(u32, String)> = vals
                .into_iter()
                .filter_map(|(r, v)| match v {
                    TypedValue::Keyword(s) if s.len() <= IGNORE_ABOVE => Some((r, s)),
                    TypedValue::Keyword(_) => {
                        ignored += 1;
                        None
                    }
                    _ => unreachable!("keyword values are strings"),
                })
                .collect();
            let mut dict: Vec<String> = vals.iter().map(|(_, s)| s.clone()).collect();
            dict.sort_unstable();
            dict.dedup();
            let ids: HashMap<&str, u32> = dict
                .iter()
                .enumerate()
                .map(|(i, s)| (s.as_str(), i as u32))
                .collect();
            let mut rows_of: Vec<Vec<u32>> = vec![Vec::new(); dict.len()];
            let mut offsets = Vec::with_capacity(docs as usize + 1);
            let mut ords = Vec::with_capacity(vals.len());
            let mut present = RoaringBitmap::new();
            offsets.push(0);
            let mut i = 0;
            for row in 0..docs {
                let start = ords.len();
                while i < vals.len() && vals[i].0 == row {
                    ords.push(ids[vals[i].1.as_str()]);
                    i += 1;
                }
                let s = &mut ords[start..];
                s.sort_unstable();
                let mut w = start;
                for k in start..ords.len() {
                    if k == start || ords[k] != ords[w - 1] {
                        ords[w] = ords[k];
                        w += 1;
                    }
                }
                ords.truncate(w);
                for &o in &ords[start..] {
                    rows_of[o as usize].push(row);
                }
                if ords.len() > start {
                    present.insert(row);
                }
                offsets.push(ords.len() as u32);
            }
            let postings = rows_of
                .into_iter()
                .map(|r| RoaringBitmap::from_sorted_iter(r).unwrap())
                .collect();
            let n = vals.len() as u64;
            let docs_with = present.len();
            let col = KeywordCol {
                dict,
                postings,
                offsets,
                ords,
                present,
                ignored,
            };
            (Column::Keyword(col), docs_with, n)
        }
        FieldType::Integer | FieldType::Datetime => {
            let n = vals.len() as u64;
            let v: Vec<(u32, i64)> = vals
                .into_iter()
                .map(|(r, v)| match v {
                    TypedValue::Int(i) => (r, i),
                    _ => unreachable!("integer values"),
                })
                .collect();
            let col = num_col(v, docs, |a, b| a.cmp(b));
            let d = col.present.len();
            (Column::Int(col), d, n)
        }
        FieldType::Float => {
            let n = vals.len() as u64;
            let v: Vec<(u32, f64)> = vals
                .into_iter()
                .map(|(r, v)| match v {
                    TypedValue::Float(f) => (r, if f == 0.0 { 0.0 } else { f }),
                    TypedValue::Int(i) => (r, i as f64),
                    _ => unreachable!("float values"),
                })
                .collect();
            let col = num_col(v, docs, |a, b| a.total_cmp(b));
            let d = col.present.len();
            (Column::Float(col), d, n)
        }
        FieldType::Bool => {
            let mut c = BoolCol::default();
            let n = vals.len() as u64;
            for (r, v) in vals {
                match v {
                    TypedValue::Bool(true) => c.t.insert(r),
                    TypedValue::Bool(false) => c.f.insert(r),
                    _ => unreachable!("bool values"),
                };
            }
            c.present = &c.t | &c.f;
            let d = c.present.len();
            (Column::Bool(c), d, n)
        }
    }
}

fn num_col<T: Copy + PartialEq>(
    vals: Vec<(u32, T)>,
    docs: u32,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
) -> NumCol<T> {
    let mut offsets = Vec::with_capacity(docs as usize + 1);
    let mut values: Vec<T> = Vec::with_capacity(vals.len());
    let mut present = RoaringBitmap::new();
    let mut pairs = Vec::with_capacity(vals.len());
    offsets.push(0);
    let mut i = 0;
    for row in 0..docs {
        let start = values.len();
        while i < vals.len() && vals[i].0 == row {
            values.push(vals[i].1);
            i += 1;
        }
        values[start..].sort_unstable_by(&cmp);
        let mut w = start;
        for k in start..values.len() {
            if k == start || cmp(&values[k], &values[w - 1]) != std::cmp::Ordering::Equal {
                values[w] = values[k];
                w += 1;
            }
        }
        values.truncate(w);
        for &v in &values[start..] {
            pairs.push((v, row));
        }
        if values.len() > start {
            present.insert(row);
        }
        offsets.push(values.len() as u32);
    }
    pairs.sort_unstable_by(|a, b| cmp(&a.0, &b.0).then(a.1.cmp(&b.1)));
    NumCol {
        offsets,
        values,
        sorted_values: pairs.iter().map(|p| p.0).collect(),
        sorted_rows: pairs.iter().map(|p| p.1).collect(),
        present,
    }
}

fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| Error::Io { path: p, source }
    };
    let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io(&path))?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
