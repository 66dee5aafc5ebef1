//! The document store: write-once, block-compressed, memory-mapped.
//!
//! # File layout (format version 1)
//!
//! All integers are little-endian. Offsets are absolute file offsets.
//!
//! ```text
//! [0, 64)        header
//!                  0  magic  b"SDDOCS01"
//!                  8  u32    format version (1)
//!                 12  u32    flags (bit 0: blocks are lz4 block-format; always set in v1)
//!                 16  u64    doc count
//!                 24  u64    block count
//!                 32  u64    offset of the doc-offset table
//!                 40  u64    offset of the block index
//!                 48  u64    raw bytes (sum of all docs' lengths)
//!                 56  u32    CRC32 of header bytes [0, 56)
//!                 60  u32    zero (checked)
//! [64, T)        blocks, back to back: each is lz4_flex *block* format compression of the
//!                concatenated raw docs of consecutive rows (~16 KiB raw; a larger doc gets a
//!                block of its own; a block never splits a doc)
//! [T, I)         doc-offset table: one u32 per doc, the doc's start inside its block's
//!                decompressed bytes (a doc ends where the next doc of the same block starts,
//!                or at the block's raw length)
//! [I, F)         block index: one 32-byte entry per block
//!                  0  u64    file offset of the compressed block
//!                  8  u64    first row in the block
//!                 16  u32    compressed length
//!                 20  u32    raw (decompressed) length
//!                 24  u32    CRC32 of the compressed bytes
//!                 28  u32    zero
//! [F, F+32)      footer (the last 32 bytes of the file)
//!                  0  u32    footer version (1)
//!                  4  u32    CRC32 of the doc-offset table and block index, [T, F)
//!                  8  u64    file length
//!                 16  u32    CRC32 of every byte before this field, [0, F+16)
//!                 20  u32    zero (checked)
//!                 24  magic  b"SDDOCEND"
//! ```
//!
//! [`StoreReader::open`] checks the magics, versions, header CRC, table/index CRC, the file
//! length and every offset (blocks in bounds and in order, rows contiguous, doc offsets inside
//! their block), so a truncated or corrupt file is refused up front; each block's CRC is checked
//! on [`StoreReader::get`], so a flipped bit in a block is an error, not garbage.
//! [`StoreReader::verify`] checks the whole-file CRC. A reader accepts versions
//! `MIN_VERSION..=VERSION`; a future version 2 adds a branch to `open`, keeping v1 files
//! readable (see the `store-v1.bin` fixture test).

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// Header magic.
pub const MAGIC: &[u8; 8] = b"SDDOCS01";
/// Footer magic.
pub const FOOTER_MAGIC: &[u8; 8] = b"SDDOCEND";
/// The format version this build writes.
pub const VERSION: u32 = 1;
/// The oldest format version this build reads.
pub const MIN_VERSION: u32 = 1;
/// Raw bytes per block the writer aims at.
pub const BLOCK_SIZE: usize = 16 * 1024;

const HEADER_LEN: usize = 64;
const FOOTER_LEN: usize = 32;
const INDEX_ENTRY_LEN: usize = 32;
const FLAG_LZ4: u32 = 1;
const KNOWN_FLAGS: u32 = FLAG_LZ4;

/// What [`StoreWriter::finish`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreInfo {
    /// Documents stored.
    pub docs: u64,
    /// File size in bytes.
    pub bytes: u64,
    /// Sum of the documents' lengths.
    pub raw_bytes: u64,
    /// CRC32 of the whole file but the footer's last 16 bytes (the footer's file CRC).
    pub crc32: u32,
}

struct BlockEntry {
    offset: u64,
    first_row: u64,
    comp_len: u32,
    raw_len: u32,
    crc: u32,
}

/// Writes a document store. Writes to `path + ".tmp"`; [`finish`](Self::finish) renames it to
/// `path`. Dropped unfinished, it removes the temporary file.
pub struct StoreWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
    /// CRC of every byte written after the header.
    body_crc: crc32fast::Hasher,
    offset: u64,
    docs: u64,
    raw_bytes: u64,
    block: Vec<u8>,
    block_first_row: u64,
    block_rows: u64,
    doc_offsets: Vec<u32>,
    index: Vec<BlockEntry>,
    compressed: Vec<u8>,
}

impl StoreWriter {
    /// Creates the temporary file `path + ".tmp"` (replacing any left by an earlier run).
    pub fn create(path: &Path) -> Result<StoreWriter, Error> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&[0u8; HEADER_LEN])
            .map_err(|e| Error::io(&tmp, e))?;
        Ok(StoreWriter {
            path: path.to_path_buf(),
            tmp,
            out: Some(out),
            body_crc: crc32fast::Hasher::new(),
            offset: HEADER_LEN as u64,
            docs: 0,
            raw_bytes: 0,
            block: Vec::with_capacity(BLOCK_SIZE * 2),
            block_first_row: 0,
            block_rows: 0,
            doc_offsets: Vec::new(),
            index: Vec::new(),
            compressed: Vec::new(),
        })
    }

    /// Appends one document; returns its row (0, 1, 2, ...).
    pub fn add(&mut self, source: &[u8]) -> Result<u32, Error> {
        let row = u32::try_from(self.docs).map_err(|_| Error::StoreRow {
            path: self.path.clone(),
            row: self.docs,
            problem: "a store holds at most 2^32 documents".to_string(),
        })?;
        if source.len() > u32::MAX as usize / 2 {
            return Err(Error::StoreRow {
                path: self.path.clone(),
                row: self.docs,
                problem: format!("document of {} bytes is too large", source.len()),
            });
        }
        if self.block_rows > 0 && self.block.len() + source.len() > BLOCK_SIZE {
            self.flush_block()?;
        }
        if self.block_rows == 0 {
            self.block_first_row = self.docs;
        }
        self.doc_offsets.push(self.block.len() as u32);
        self.block.extend_from_slice(source);
        self.block_rows += 1;
        self.docs += 1;
        self.raw_bytes += source.len() as u64;
        if self.block.len() >= BLOCK_SIZE {
            self.flush_block()?;
        }
        Ok(row)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let Some(out) = self.out.as_mut() else {
            return Err(Error::io(&self.tmp, std::io::ErrorKind::BrokenPipe.into()));
        };
        out.write_all(bytes).map_err(|e| Error::io(&self.tmp, e))?;
        self.body_crc.update(bytes);
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), Error> {
        if self.block_rows == 0 {
            return Ok(());
        }
        let mut compressed = std::mem::take(&mut self.compressed);
        compressed.resize(
            lz4_flex::block::get_maximum_output_size(self.block.len()),
            0,
        );
        let n = lz4_flex::block::compress_into(&self.block, &mut compressed).map_err(|e| {
            Error::StoreRow {
                path: self.path.clone(),
                row: self.block_first_row,
                problem: format!("lz4 compression failed: {e}"),
            }
        })?;
        let entry = BlockEntry {
            offset: self.offset,
            first_row: self.block_first_row,
            comp_len: n as u32,
            raw_len: self.block.len() as u32,
            crc: crc32fast::hash(&compressed[..n]),
        };
        self.write(&compressed[..n])?;
        self.index.push(entry);
        self.compressed = compressed;
        self.block.clear();
        self.block_rows = 0;
        Ok(())
    }

    /// Writes the tables and footer, fsyncs the file, renames it into place and fsyncs the
    /// directory.
    pub fn finish(mut self) -> Result<StoreInfo, Error> {
        self.flush_block()?;
        let table_off = self.offset;
        let mut table = Vec::with_capacity(self.doc_offsets.len() * 4);
        for o in &self.doc_offsets {
            table.extend_from_slice(&o.to_le_bytes());
        }
        let index_off = table_off + table.len() as u64;
        for b in &self.index {
            table.extend_from_slice(&b.offset.to_le_bytes());
            table.extend_from_slice(&b.first_row.to_le_bytes());
            table.extend_from_slice(&b.comp_len.to_le_bytes());
            table.extend_from_slice(&b.raw_len.to_le_bytes());
            table.extend_from_slice(&b.crc.to_le_bytes());
            table.extend_from_slice(&0u32.to_le_bytes());
        }
        let table_crc = crc32fast::hash(&table);
        self.write(&table)?;

        let mut header = [0u8; HEADER_LEN];
        header[0..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&FLAG_LZ4.to_le_bytes());
        header[16..24].copy_from_slice(&self.docs.to_le_bytes());
        header[24..32].copy_from_slice(&(self.index.len() as u64).to_le_bytes());
        header[32..40].copy_from_slice(&table_off.to_le_bytes());
        header[40..48].copy_from_slice(&index_off.to_le_bytes());
        header[48..56].copy_from_slice(&self.raw_bytes.to_le_bytes());
        let hcrc = crc32fast::hash(&header[..56]);
        header[56..60].copy_from_slice(&hcrc.to_le_bytes());

        let file_len = self.offset + FOOTER_LEN as u64;
        let mut footer = [0u8; FOOTER_LEN];
        footer[0..4].copy_from_slice(&VERSION.to_le_bytes());
        footer[4..8].copy_from_slice(&table_crc.to_le_bytes());
        footer[8..16].copy_from_slice(&file_len.to_le_bytes());
        self.body_crc.update(&footer[..16]);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        crc.combine(&self.body_crc);
        let file_crc = crc.finalize();
        footer[16..20].copy_from_slice(&file_crc.to_le_bytes());
        footer[24..32].copy_from_slice(FOOTER_MAGIC);

        let tmp = self.tmp.clone();
        let io = |e| Error::io(&tmp, e);
        let Some(mut out) = self.out.take() else {
            return Err(io(std::io::ErrorKind::BrokenPipe.into()));
        };
        out.write_all(&footer).map_err(io)?;
        let mut file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&header).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(&dir, e))?;
        Ok(StoreInfo {
            docs: self.docs,
            bytes: file_len,
            raw_bytes: self.raw_bytes,
            crc32: file_crc,
        })
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A document store opened read-only through a memory map. `Send + Sync`: share it with an
/// `Arc` across threads.
pub struct StoreReader {
    path: PathBuf,
    map: memmap2::Mmap,
    docs: usize,
    table_off: usize,
    index: Vec<BlockEntry>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

impl StoreReader {
    /// Maps `path` and validates its header, footer, tables and offsets.
    pub fn open(path: &Path) -> Result<StoreReader, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let bad = |p: String| Error::corrupt(path, p);
        if len < (HEADER_LEN + FOOTER_LEN) as u64 {
            return Err(bad(format!(
                "file is {len} bytes, shorter than a header and footer ({} bytes)",
                HEADER_LEN + FOOTER_LEN
            )));
        }
        // SAFETY: memmap2 requires that the mapped file is not truncated or modified (by this or
        // another process) while mapped. Store files are written once, to a temporary name, and
        // renamed into place by `StoreWriter::finish`; nothing writes them afterwards. All reads
        // below are bounds-checked against the map's length taken at open.
        let map =
            unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(|e| Error::io(path, e))?;
        let b: &[u8] = &map;
        let len = b.len();
        if len < HEADER_LEN + FOOTER_LEN {
            return Err(bad(format!("file shrank to {len} bytes while opening")));
        }
        if &b[0..8] != MAGIC {
            return Err(bad("bad magic (not a searchd document store)".to_string()));
        }
        let version = u32_at(b, 8);
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(Error::StoreVersion {
                path: path.to_path_buf(),
                found: version,
                min: MIN_VERSION,
                max: VERSION,
            });
        }
        // Version 1 is the only layout so far; a later version branches here.
        if crc32fast::hash(&b[..56]) != u32_at(b, 56) {
            return Err(bad("header CRC mismatch".to_string()));
        }
        if u32_at(b, 60) != 0 {
            return Err(bad("reserved header bytes are not zero".to_string()));
        }
        let flags = u32_at(b, 12);
        if flags & !KNOWN_FLAGS != 0 || flags & FLAG_LZ4 == 0 {
            return Err(bad(format!("unknown flags {flags:#x}")));
        }
        let foot = len - FOOTER_LEN;
        if &b[foot + 24..foot + 32] != FOOTER_MAGIC {
            return Err(bad(
                "bad footer magic (truncated or unfinished file?)".to_string()
            ));
        }
        if u32_at(b, foot + 20) != 0 {
            return Err(bad("reserved footer bytes are not zero".to_string()));
        }
        let footer_version = u32_at(b, foot);
        if footer_version != version {
            return Err(bad(format!(
                "footer version {footer_version} does not match header version {version}"
            )));
        }
        let recorded_len = u64_at(b, foot + 8);
        if recorded_len != len as u64 {
            return Err(bad(format!(
                "file is {len} bytes but its footer says {recorded_len} (truncated?)"
            )));
        }
        let docs = u64_at(b, 16);
        let blocks = u64_at(b, 24);
        let table_off = u64_at(b, 32);
        let index_off = u64_at(b, 40);
        let expect_index = docs.checked_mul(4).and_then(|t| t.checked_add(table_off));
        let expect_foot = blocks
            .checked_mul(INDEX_ENTRY_LEN as u64)
            .and_then(|t| t.checked_add(index_off));
        if table_off < HEADER_LEN as u64
            || expect_index != Some(index_off)
            || expect_foot != Some(foot as u64)
        {
            return Err(bad(format!(
                "tables do not fit: {docs} docs, {blocks} blocks, table at {table_off}, index at {index_off}, footer at {foot}"
            )));
        }
        let (table_off, index_off) = (table_off as usize, index_off as usize);
        if crc32fast::hash(&b[table_off..foot]) != u32_at(b, foot + 4) {
            return Err(bad(
                "doc-offset table / block index CRC mismatch".to_string()
            ));
        }
        if docs > u64::from(u32::MAX) + 1 || (docs == 0) != (blocks == 0) || blocks > docs {
            return Err(bad(format!("{docs} docs in {blocks} blocks")));
        }
        let docs = docs as usize;
        let mut index = Vec::with_capacity(blocks as usize);
        let mut next_offset = HEADER_LEN as u64;
        for i in 0..blocks as usize {
            let e = index_off + i * INDEX_ENTRY_LEN;
            let entry = BlockEntry {
                offset: u64_at(b, e),
                first_row: u64_at(b, e + 8),
                comp_len: u32_at(b, e + 16),
                raw_len: u32_at(b, e + 20),
                crc: u32_at(b, e + 24),
            };
            let end = entry.offset.checked_add(u64::from(entry.comp_len));
            if entry.offset != next_offset || end.is_none_or(|e| e > table_off as u64) {
                return Err(bad(format!("block {i} is out of place")));
            }
            next_offset = entry.offset + u64::from(entry.comp_len);
            let expected_first = index.last().map_or(0, |p: &BlockEntry| p.first_row + 1);
            if (i == 0 && entry.first_row != 0)
                || entry.first_row < expected_first
                || entry.first_row >= docs as u64
            {
                return Err(bad(format!(
                    "block {i} has a bad first row {}",
                    entry.first_row
                )));
            }
            index.push(entry);
        }
        if next_offset != table_off as u64 {
            return Err(bad(
                "blocks do not end where the doc-offset table starts".to_string()
            ));
        }
        // Doc offsets: 0 at each block's first row, non-decreasing, within the raw length.
        for (i, blk) in index.iter().enumerate() {
            let first = blk.first_row as usize;
            let end = index.get(i + 1).map_or(docs, |n| n.first_row as usize);
            let mut prev = 0u32;
            for row in first..end {
                let o = u32_at(b, table_off + row * 4);
                if (row == first && o != 0) || o < prev || o > blk.raw_len {
                    return Err(bad(format!("row {row} has a bad offset {o} in block {i}")));
                }
                prev = o;
            }
        }
        Ok(StoreReader {
            path: path.to_path_buf(),
            map,
            docs,
            table_off,
            index,
        })
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs
    }

    /// Whether the store holds no document.
    pub fn is_empty(&self) -> bool {
        self.docs == 0
    }

    /// File size in bytes.
    pub fn bytes(&self) -> u64 {
        self.map.len() as u64
    }

    /// The document at `row`, decompressing only its block (whose CRC is checked).
    pub fn get(&self, row: u32) -> Result<Vec<u8>, Error> {
        let r = row as usize;
        let err = |p: String| Error::StoreRow {
            path: self.path.clone(),
            row: u64::from(row),
            problem: p,
        };
        if r >= self.docs {
            return Err(err(format!("out of range ({} docs)", self.docs)));
        }
        let bi = self
            .index
            .partition_point(|b| b.first_row <= u64::from(row))
            - 1;
        let blk = &self.index[bi];
        let raw = self.block(bi).map_err(err)?;
        let start = self.doc_offset(r) as usize;
        let block_end_row = self
            .index
            .get(bi + 1)
            .map_or(self.docs, |n| n.first_row as usize);
        let end = if r + 1 == block_end_row {
            blk.raw_len as usize
        } else {
            self.doc_offset(r + 1) as usize
        };
        Ok(raw[start..end].to_vec())
    }

    fn doc_offset(&self, row: usize) -> u32 {
        u32_at(&self.map, self.table_off + row * 4)
    }

    /// Decompresses block `bi`, checking its CRC and length.
    fn block(&self, bi: usize) -> Result<Vec<u8>, String> {
        let blk = &self.index[bi];
        let start = blk.offset as usize;
        let comp = &self.map[start..start + blk.comp_len as usize];
        if crc32fast::hash(comp) != blk.crc {
            return Err(format!("block {bi} is corrupt (CRC mismatch)"));
        }
        let mut raw = vec![0u8; blk.raw_len as usize];
        match lz4_flex::block::decompress_into(comp, &mut raw) {
            Ok(n) if n == raw.len() => Ok(raw),
            Ok(n) => Err(format!(
                "block {bi} is corrupt (decompressed to {n} bytes, expected {})",
                raw.len()
            )),
            Err(e) => Err(format!("block {bi} is corrupt ({e})")),
        }
    }

    /// Checks the whole-file CRC and decompresses every block (reads the whole file).
    pub fn verify(&self) -> Result<(), Error> {
        let b: &[u8] = &self.map;
        let foot = b.len() - FOOTER_LEN;
        if crc32fast::hash(&b[..foot + 16]) != u32_at(b, foot + 16) {
            return Err(Error::corrupt(&self.path, "file CRC mismatch"));
        }
        for (bi, blk) in self.index.iter().enumerate() {
            self.block(bi).map_err(|p| Error::StoreRow {
                path: self.path.clone(),
                row: blk.first_row,
                problem: p,
            })?;
        }
        Ok(())
    }
}
