//! `ids.bin`: the users' document ids of one segment, in row order (row = the document's
//! position in the segment, which is the "id" the segment's index returns).
//!
//! Layout (little-endian), written once:
//!
//! | bytes | what |
//! |---|---|
//! | 0..8 | magic `SDIDS001` |
//! | 8..12 | format version (1) |
//! | 12..16 | flags (0) |
//! | 16..24 | number of ids `n` |
//! | 24..64 | zero |
//! | 64.. | `n` entries: tag `0` + u64 (integer id), or tag `1` + u32 length + UTF-8 bytes |
//! | last 4 | CRC32 of everything before |
//!
//! The reader keeps the ids in memory with a hash map from id to row, so a lookup by id is
//! one probe and a hit's id is one index.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use searchd_docs::DocId;

use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"SDIDS001";
const VERSIONS: std::ops::RangeInclusive<u32> = 1..=1;
const HEADER: usize = 64;

/// Serialise `ids` into the bytes of `ids.bin`.
pub(crate) fn encode(ids: &[DocId]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + ids.len() * 9 + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    out.resize(HEADER, 0);
    for id in ids {
        match id {
            DocId::Int(v) => {
                out.push(0);
                out.extend_from_slice(&v.to_le_bytes());
            }
            DocId::Str(s) => {
                out.push(1);
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Write `ids.bin` to `path` (fsynced).
pub(crate) fn write(path: &Path, ids: &[DocId]) -> Result<(u64, u32)> {
    let bytes = encode(ids);
    let mut f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    f.write_all(&bytes).map_err(|e| Error::io(path, e))?;
    f.sync_all().map_err(|e| Error::io(path, e))?;
    Ok((bytes.len() as u64, crc32fast::hash(&bytes)))
}

/// The ids of one segment.
#[derive(Debug)]
pub(crate) struct IdMap {
    ids: Vec<DocId>,
    by_id: HashMap<DocId, u32>,
    /// The rows in id order and each row's rank in it ([`searchd_fields::IdOrder`]): a sort of
    /// the segment's ids, 8 bytes a row, built when the segment opens (`Segment::open`; on
    /// first use for a bare index's row-number ids) and kept while it is open.
    order: std::sync::OnceLock<(Vec<u32>, Vec<u32>)>,
}

impl IdMap {
    /// Ids 0..n, as a bare index directory has them (its rows are its ids).
    pub fn rows(n: usize) -> IdMap {
        let ids: Vec<DocId> = (0..n as u64).map(DocId::Int).collect();
        IdMap::from_ids(ids).expect("row numbers are unique")
    }

    /// Ids in row order; `Err(row)` names the first duplicate.
    pub fn from_ids(ids: Vec<DocId>) -> std::result::Result<IdMap, usize> {
        let mut by_id = HashMap::with_capacity(ids.len());
        for (row, id) in ids.iter().enumerate() {
            if by_id.insert(id.clone(), row as u32).is_some() {
                return Err(row);
            }
        }
        Ok(IdMap {
            ids,
            by_id,
            order: std::sync::OnceLock::new(),
        })
    }

    pub fn read(path: &Path) -> Result<IdMap> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::parse(path, &bytes)
    }

    pub fn parse(path: &Path, b: &[u8]) -> Result<IdMap> {
        let bad = |m: String| Error::format(path, m);
        if b.len() < HEADER + 4 || &b[..8] != MAGIC {
            return Err(bad("not an ids.bin file (bad magic or too short)".into()));
        }
        let version = u32::from_le_bytes(b[8..12].try_into().unwrap_or_default());
        if !VERSIONS.contains(&version) {
            return Err(bad(format!(
                "ids format version {version} is not supported (this searchd reads {}..={})",
                VERSIONS.start(),
                VERSIONS.end()
            )));
        }
        let body = &b[..b.len() - 4];
        let crc = u32::from_le_bytes(b[b.len() - 4..].try_into().unwrap_or_default());
        if crc32fast::hash(body) != crc {
            return Err(bad("checksum mismatch; the file is corrupt".into()));
        }
        let n = u64::from_le_bytes(b[16..24].try_into().unwrap_or_default());
        let n = usize::try_from(n).map_err(|_| bad(format!("{n} ids is too many")))?;
        if n > body.len() {
            return Err(bad(format!("says {n} ids but is only {} bytes", b.len())));
        }
        let mut ids = Vec::with_capacity(n);
        let mut at = HEADER;
        let take = |at: &mut usize, len: usize| -> Result<&[u8]> {
            let end = at
                .checked_add(len)
                .filter(|&e| e <= body.len())
                .ok_or_else(|| bad(format!("truncated at byte {at}")))?;
            let s = &body[*at..end];
            *at = end;
            Ok(s)
        };
        for row in 0..n {
            let tag = take(&mut at, 1)?[0];
            let id = match tag {
                0 => DocId::Int(u64::from_le_bytes(
                    take(&mut at, 8)?.try_into().unwrap_or_default(),
                )),
                1 => {
                    let len = u32::from_le_bytes(take(&mut at, 4)?.try_into().unwrap_or_default());
                    let s = take(&mut at, len as usize)?;
                    DocId::Str(
                        String::from_utf8(s.to_vec())
                            .map_err(|_| bad(format!("id of row {row} is not UTF-8")))?,
                    )
                }
                t => return Err(bad(format!("row {row} has unknown id tag {t}"))),
            };
            ids.push(id);
        }
        if at != body.len() {
            return Err(bad(format!("{} trailing bytes", body.len() - at)));
        }
        IdMap::from_ids(ids).map_err(|row| bad(format!("row {row} repeats an earlier id")))
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn id(&self, row: u64) -> Option<&DocId> {
        self.ids.get(usize::try_from(row).ok()?)
    }
    pub fn row(&self, id: &DocId) -> Option<u32> {
        self.by_id.get(id).copied()
    }
    /// The segment's ids in sort order (built once, on first use).
    pub fn order(&self) -> searchd_fields::IdOrder<'_> {
        let (rank, by_rank) = self
            .order
            .get_or_init(|| searchd_fields::IdOrder::build(&self.ids));
        searchd_fields::IdOrder { rank, by_rank }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let ids = vec![
            DocId::Int(7),
            DocId::Str("doc-1".into()),
            DocId::Str(String::new() + "é"),
            DocId::Int(u64::MAX),
        ];
        let b = encode(&ids);
        let m = IdMap::parse(Path::new("ids.bin"), &b).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m.row(&DocId::Str("doc-1".into())), Some(1));
        assert_eq!(m.row(&DocId::Int(u64::MAX)), Some(3));
        assert_eq!(m.id(0), Some(&DocId::Int(7)));
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(
                IdMap::parse(Path::new("ids.bin"), &c).is_err(),
                "flip at {i}"
            );
        }
        for len in 0..b.len() {
            assert!(IdMap::parse(Path::new("ids.bin"), &b[..len]).is_err());
        }
    }

    #[test]
    fn duplicates_are_named() {
        assert_eq!(
            IdMap::from_ids(vec![DocId::Int(1), DocId::Int(2), DocId::Int(1)]).err(),
            Some(2)
        );
    }
}
