//! The log's records: an operation ([`Op`]) as the write-ahead log holds it, and the
//! helpers that read operations and ids (the text of a stored document, the ids an
//! operation writes, an id in the collection's form, the alive copy of an id).

use std::collections::HashMap;

use searchd_docs::DocId;

use crate::collection::Collection;
use crate::manifest::IdKind;
use crate::rows::DocRef;
use crate::segwrite::NewDoc;

/// One logged operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Insert or replace these documents, by id.
    Upsert(Vec<NewDoc>),
    /// Delete the documents with these ids.
    Delete(Vec<DocId>),
}

const OP_UPSERT: u8 = 1;
const OP_DELETE: u8 = 2;

fn put_id(b: &mut Vec<u8>, id: &DocId) {
    match id {
        DocId::Int(v) => {
            b.push(0);
            b.extend_from_slice(&v.to_le_bytes());
        }
        DocId::Str(s) => {
            b.push(1);
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        }
    }
}

impl Op {
    /// The log payload of the operation.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Op::Upsert(docs) => {
                b.push(OP_UPSERT);
                b.extend_from_slice(&(docs.len() as u32).to_le_bytes());
                for d in docs {
                    put_id(&mut b, &d.id);
                    b.extend_from_slice(&(d.vector.len() as u32).to_le_bytes());
                    for x in &d.vector {
                        b.extend_from_slice(&x.to_le_bytes());
                    }
                    b.extend_from_slice(&(d.source.len() as u32).to_le_bytes());
                    b.extend_from_slice(&d.source);
                }
            }
            Op::Delete(ids) => {
                b.push(OP_DELETE);
                b.extend_from_slice(&(ids.len() as u32).to_le_bytes());
                for id in ids {
                    put_id(&mut b, id);
                }
            }
        }
        b
    }

    /// Decode a payload; `text_field` names the stored field the lexical index gets.
    pub fn decode(b: &[u8], text_field: Option<&str>) -> std::result::Result<Op, String> {
        struct R<'a>(&'a [u8]);
        impl R<'_> {
            fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
                if self.0.len() < n {
                    return Err("truncated operation".into());
                }
                let (a, rest) = self.0.split_at(n);
                self.0 = rest;
                Ok(a)
            }
            fn u32(&mut self) -> std::result::Result<u32, String> {
                Ok(u32::from_le_bytes(
                    self.take(4)?.try_into().unwrap_or_default(),
                ))
            }
            fn id(&mut self) -> std::result::Result<DocId, String> {
                match self.take(1)?[0] {
                    0 => Ok(DocId::Int(u64::from_le_bytes(
                        self.take(8)?.try_into().unwrap_or_default(),
                    ))),
                    1 => {
                        let n = self.u32()? as usize;
                        String::from_utf8(self.take(n)?.to_vec())
                            .map(DocId::Str)
                            .map_err(|_| "an id is not UTF-8".to_string())
                    }
                    t => Err(format!("unknown id tag {t}")),
                }
            }
        }
        let mut r = R(b);
        let kind = r.take(1)?[0];
        let n = r.u32()? as usize;
        match kind {
            OP_UPSERT => {
                let mut docs = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    let id = r.id()?;
                    let dim = r.u32()? as usize;
                    let raw = r.take(dim * 4)?;
                    let vector = raw
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    let sl = r.u32()? as usize;
                    let source = r.take(sl)?.to_vec();
                    let text = text_of(&source, text_field);
                    docs.push(NewDoc {
                        id,
                        vector,
                        text,
                        source,
                    });
                }
                Ok(Op::Upsert(docs))
            }
            OP_DELETE => {
                let mut ids = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    ids.push(r.id()?);
                }
                Ok(Op::Delete(ids))
            }
            k => Err(format!("unknown operation kind {k}")),
        }
    }
}

/// The text field's string value in a stored JSON object.
pub(crate) fn text_of(source: &[u8], text_field: Option<&str>) -> Option<String> {
    let f = text_field?;
    let v: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(source).ok()?;
    match v.get(f) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// Rebuild pending operations from a collapsed batch (a refresh that failed).
pub(super) fn latest_back(
    order: Vec<DocId>,
    mut latest: HashMap<DocId, Option<NewDoc>>,
    seq: u64,
) -> Vec<(u64, Op)> {
    let mut ups = Vec::new();
    let mut dels = Vec::new();
    for id in order {
        match latest.remove(&id).flatten() {
            Some(d) => ups.push(d),
            None => dels.push(id),
        }
    }
    let mut out = Vec::new();
    if !dels.is_empty() {
        out.push((seq, Op::Delete(dels)));
    }
    if !ups.is_empty() {
        out.push((seq, Op::Upsert(ups)));
    }
    out
}

pub(super) fn note_ids(map: &mut HashMap<DocId, bool>, op: &Op) {
    match op {
        Op::Upsert(docs) => {
            for d in docs {
                map.insert(d.id.clone(), true);
            }
        }
        Op::Delete(ids) => {
            for id in ids {
                map.insert(id.clone(), false);
            }
        }
    }
}

/// An id in the form the collection keeps: in a collection of integer ids a string that
/// spells one (`"777"`, as Elasticsearch clients always send ids) is that integer, and in
/// a collection of string ids an integer is its decimal string. Mixed collections keep ids
/// as given (either form may already exist there).
pub fn canonical_id(kind: IdKind, id: DocId) -> DocId {
    match (kind, id) {
        (IdKind::Int, DocId::Str(s)) => match s.parse::<u64>() {
            Ok(v) if v.to_string() == s => DocId::Int(v),
            _ => DocId::Str(s),
        },
        (IdKind::Str, DocId::Int(v)) => DocId::Str(v.to_string()),
        (_, id) => id,
    }
}

/// Where the alive copy of exactly this id is (no int/string equivalence).
pub(super) fn lookup_exact(c: &Collection, id: &DocId) -> Option<DocRef> {
    c.segments.iter().enumerate().find_map(|(i, s)| {
        s.ids
            .row(id)
            .map(|row| DocRef {
                segment: i as u32,
                row: row as u64,
            })
            .filter(|r| c.is_live(*r))
    })
}
