//! JSONL input: one JSON object per line.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::doc::{Doc, DocId, ReaderConfig};
use crate::error::{excerpt, Error, Pos};

pub(crate) struct JsonlReader {
    path: PathBuf,
    cfg: ReaderConfig,
    input: BufReader<File>,
    total: u64,
    consumed: u64,
    line_no: u64,
    buf: Vec<u8>,
    done: bool,
}

impl JsonlReader {
    pub(crate) fn open(path: &Path, cfg: &ReaderConfig) -> Result<JsonlReader, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let total = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(JsonlReader {
            path: path.to_path_buf(),
            cfg: cfg.clone(),
            input: BufReader::with_capacity(1 << 16, file),
            total,
            consumed: 0,
            line_no: 0,
            buf: Vec::new(),
            done: false,
        })
    }

    pub(crate) fn total_bytes(&self) -> u64 {
        self.total
    }

    pub(crate) fn bytes_read(&self) -> u64 {
        self.consumed
    }

    pub(crate) fn next_doc(&mut self) -> Option<Result<Doc, Error>> {
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            let n = match self.input.read_until(b'\n', &mut self.buf) {
                Ok(n) => n,
                Err(e) => {
                    self.done = true;
                    return Some(Err(Error::io(&self.path, e)));
                }
            };
            if n == 0 {
                self.done = true;
                return None;
            }
            self.consumed += n as u64;
            self.line_no += 1;
            if is_blank(&self.buf) {
                continue;
            }
            return Some(parse_line(&self.path, &self.cfg, self.line_no, &self.buf));
        }
    }

    pub(crate) fn skip_docs(&mut self, mut n: u64) -> Result<(), Error> {
        // Scan the buffered bytes directly: no copy, no parse; a line counts when it has a
        // non-whitespace byte.
        let mut line_has_content = false;
        while n > 0 && !self.done {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, e)),
            };
            if chunk.is_empty() {
                // EOF: a last line without a newline.
                if line_has_content {
                    self.line_no += 1;
                }
                self.done = true;
                break;
            }
            let mut used = 0;
            for &b in chunk {
                used += 1;
                if b == b'\n' {
                    self.line_no += 1;
                    if line_has_content {
                        n -= 1;
                        line_has_content = false;
                        if n == 0 {
                            break;
                        }
                    }
                } else if !b.is_ascii_whitespace() {
                    line_has_content = true;
                }
            }
            self.input.consume(used);
            self.consumed += used as u64;
        }
        Ok(())
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

/// Parses one non-blank JSONL line into a [`Doc`].
pub(crate) fn parse_line(
    path: &Path,
    cfg: &ReaderConfig,
    line_no: u64,
    line: &[u8],
) -> Result<Doc, Error> {
    let pos = Pos::Line(line_no);
    let text = std::str::from_utf8(line).map_err(|e| Error::InvalidUtf8 {
        path: path.to_path_buf(),
        pos,
        offset: e.valid_up_to(),
    })?;
    let text = text.trim_end_matches(['\n', '\r']);
    // A UTF-8 byte order mark before the first line.
    let text = if line_no == 1 {
        text.strip_prefix('\u{feff}').unwrap_or(text)
    } else {
        text
    };
    let obj: RawObject<'_> = serde_json::from_str(text).map_err(|e| json_error(path, pos, &e))?;

    let mut id_raw: Option<&RawValue> = None;
    let mut text_raw: Option<&RawValue> = None;
    let mut vec_raw: Option<&RawValue> = None;
    let mut source = Vec::with_capacity(text.len());
    source.push(b'{');
    let mut first = true;
    if let Some(dup) = duplicate_key(&obj.0) {
        return Err(Error::field(path, pos, dup, "appears more than once"));
    }
    for (key, value) in &obj.0 {
        let key = key.as_ref();
        if key == cfg.id_field {
            id_raw = Some(value);
        }
        if cfg.text_field.as_deref() == Some(key) {
            text_raw = Some(value);
        }
        if cfg.vector_field.as_deref() == Some(key) {
            vec_raw = Some(value);
        }
        if cfg.in_source(key) {
            if !first {
                source.push(b',');
            }
            first = false;
            // Writing a `&str` to a Vec cannot fail.
            let _ = serde_json::to_writer(&mut source, key);
            source.push(b':');
            source.extend_from_slice(value.get().as_bytes());
        }
    }
    source.push(b'}');

    let id = parse_id(path, pos, &cfg.id_field, id_raw)?;
    let text_val = match (cfg.text_field.as_deref(), text_raw) {
        (Some(name), Some(raw)) => parse_text(path, pos, name, raw)?,
        _ => None,
    };
    let vector = match cfg.vector_field.as_deref() {
        Some(name) => Some(parse_vector(path, pos, name, vec_raw)?),
        None => None,
    };
    Ok(Doc {
        pos: line_no,
        id,
        text: text_val,
        vector,
        source,
    })
}

/// The first key that repeats an earlier one, if any.
fn duplicate_key<'k>(entries: &'k [(Key<'_>, &RawValue)]) -> Option<&'k str> {
    if entries.len() <= 16 {
        for (i, (k, _)) in entries.iter().enumerate() {
            if entries[..i].iter().any(|(o, _)| o.as_ref() == k.as_ref()) {
                return Some(k.as_ref());
            }
        }
        return None;
    }
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    entries
        .iter()
        .map(|(k, _)| k.as_ref())
        .find(|&k| !seen.insert(k))
}

fn json_error(path: &Path, pos: Pos, e: &serde_json::Error) -> Error {
    let full = e.to_string();
    // serde's message ends in " at line L column C"; the line is always 1 here.
    let message = match full.rfind(" at line ") {
        Some(i) => full[..i].to_string(),
        None => full,
    };
    Error::Json {
        path: path.to_path_buf(),
        pos,
        column: e.column(),
        message,
    }
}

fn parse_id(path: &Path, pos: Pos, field: &str, raw: Option<&RawValue>) -> Result<DocId, Error> {
    let raw = raw.ok_or_else(|| Error::field(path, pos, field, "is missing"))?;
    let t = raw.get();
    let bad = || {
        Error::field(
            path,
            pos,
            field,
            format!(
                "must be a string or an unsigned integer, got {}",
                excerpt(t)
            ),
        )
    };
    match t.as_bytes().first() {
        Some(b'"') => {
            let s: String = serde_json::from_str(t).map_err(|_| bad())?;
            if s.is_empty() {
                Err(Error::field(path, pos, field, "is an empty string"))
            } else {
                Ok(DocId::Str(s))
            }
        }
        Some(b'0'..=b'9') if t.bytes().all(|b| b.is_ascii_digit()) => {
            t.parse::<u64>().map(DocId::Int).map_err(|_| bad())
        }
        _ => Err(bad()),
    }
}

fn parse_text(path: &Path, pos: Pos, field: &str, raw: &RawValue) -> Result<Option<String>, Error> {
    let t = raw.get();
    match t.as_bytes().first() {
        Some(b'"') => serde_json::from_str::<String>(t)
            .map(Some)
            .map_err(|e| Error::field(path, pos, field, format!("is not a valid string: {e}"))),
        Some(b'n') if t == "null" => Ok(None),
        _ => Err(Error::field(
            path,
            pos,
            field,
            format!("must be a string, got {}", excerpt(t)),
        )),
    }
}

fn parse_vector(
    path: &Path,
    pos: Pos,
    field: &str,
    raw: Option<&RawValue>,
) -> Result<Vec<f32>, Error> {
    let raw = raw.ok_or_else(|| Error::field(path, pos, field, "is missing"))?;
    let t = raw.get();
    if !t.starts_with('[') {
        return Err(Error::field(
            path,
            pos,
            field,
            format!("must be an array of numbers, got {}", excerpt(t)),
        ));
    }
    let items: Vec<Component> = serde_json::from_str(t)
        .map_err(|e| Error::field(path, pos, field, format!("is not a valid array: {e}")))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, c) in items.into_iter().enumerate() {
        match c {
            Component::Num(v) if (v as f32).is_finite() => out.push(v as f32),
            Component::Num(v) => {
                return Err(Error::field(
                    path,
                    pos,
                    field,
                    format!("component {i} must be a finite number (as f32), got {v}"),
                ))
            }
            Component::Other(what) => {
                return Err(Error::field(
                    path,
                    pos,
                    field,
                    format!("component {i} must be a finite number, got {what}"),
                ))
            }
        }
    }
    Ok(out)
}

/// An object key: borrowed when it has no escapes.
enum Key<'a> {
    Borrowed(&'a str),
    Owned(String),
}

impl AsRef<str> for Key<'_> {
    fn as_ref(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// A JSON object as its entries in document order, values as raw JSON text.
struct RawObject<'a>(Vec<(Key<'a>, &'a RawValue)>);

impl<'de> Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject<'de>, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    entries.push((k, v));
                }
                Ok(RawObject(entries))
            }
        }
        d.deserialize_map(V)
    }
}

/// One vector component: a number, or a description of what was there instead.
enum Component {
    Num(f64),
    Other(String),
}

impl<'de> Deserialize<'de> for Component {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Component;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Component, E> {
                Ok(Component::Num(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Component, E> {
                Ok(Component::Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Component, E> {
                Ok(Component::Num(v as f64))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Component, E> {
                Ok(Component::Other(v.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Component, E> {
                Ok(Component::Other(format!("{:?}", excerpt(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Component, E> {
                Ok(Component::Other("null".to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Component, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Component::Other("an array".to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Component, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Component::Other("an object".to_string()))
            }
        }
        d.deserialize_any(V)
    }
}
