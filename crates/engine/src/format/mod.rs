//! On-disk layout of an index directory.
//!
//! ```text
//! DIR/manifest.json   format version, kind, metric, dim, n, params, and each file's size and CRC32
//! DIR/vectors.bin     64-byte header + n x dim little-endian f32 rows (cosine: already unit length)
//! DIR/graph.bin       64-byte header + HNSW links (hnsw kind only)
//! DIR/ids.bin         64-byte header + external id of each stored row, then the stored row
//!                     of each external id (hnsw kind: rows are stored in graph BFS order)
//! DIR/codes.bin       64-byte header + quantizer parameters, squared norms and one code per
//!                     stored row (quantized indexes; layout in `build::write_codes`)
//! DIR/ivf.bin         64-byte header + coarse centroids, list offsets and row ids in list
//!                     order (ivfpq kind; see `ivf`)
//! DIR/partitions.bin  64-byte header + centroids, member offsets and each partition's rows
//!                     (partitioned kind; see `partition`)
//! DIR/parts/pNNNNN/   partition NNNNN's own HNSW index directory (partitioned kind)
//! ```
//! Every binary file starts with a 64-byte header: 8-byte magic, u32 format version, u32
//! header length, then six little-endian u64 fields whose meaning depends on the file.
//! Payloads start at byte 64, so typed views of a page-aligned mapping are 64-byte aligned.
//!
//! A directory is written into `DIR.tmp-<pid>` and renamed into place only when complete,
//! so a crash mid-build never leaves something under DIR that opens.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod manifest;

pub use manifest::{CodeKind, CodesParams, FileEntry, IndexKind, Manifest, Params};

/// The version this searchd writes.
pub const FORMAT_VERSION: u32 = 1;
/// The versions this searchd reads (manifests and file headers). A format change that old
/// readers cannot follow bumps [`FORMAT_VERSION`]; readers keep opening every version in
/// this range (`tests/fixtures/format-v1/` holds directories of version 1 that must open).
pub const READ_VERSIONS: std::ops::RangeInclusive<u32> = 1..=FORMAT_VERSION;
/// Quantized indexes rescore the best `oversample * k` candidates of the traversal with
/// float32 vectors; this is the default `oversample` (a manifest may record another, a
/// search may ask for another).
pub const DEFAULT_OVERSAMPLE: f32 = 4.0;
/// Length of the [`Header`] every binary index file starts with, in bytes.
pub const HEADER_LEN: usize = 64;
/// Magic of `vectors.bin` (every index).
pub const VECTORS_MAGIC: [u8; 8] = *b"SRCHDVEC";
/// Magic of `graph.bin` (HNSW indexes).
pub const GRAPH_MAGIC: [u8; 8] = *b"SRCHDHNS";
/// Magic of `ids.bin` (HNSW indexes).
pub const IDS_MAGIC: [u8; 8] = *b"SRCHDIDS";
/// `codes.bin` of quantized indexes.
pub const CODES_MAGIC: [u8; 8] = *b"SRCHDCOD";
/// `ivf.bin` of IVF-PQ indexes.
pub const IVF_MAGIC: [u8; 8] = *b"SRCHDIVF";
/// `partitions.bin` of partitioned indexes.
pub const PARTS_MAGIC: [u8; 8] = *b"SRCHDPRT";
/// `codes.bin` header field 2: the kind of codes.
pub const CODES_SQ8: u64 = 1;
/// Product-quantization codes (header field 3: m).
pub const CODES_PQ: u64 = 2;
/// Binary (sign after centring) codes.
pub const CODES_BINARY: u64 = 3;
/// RaBitQ-style codes (header field 3: bits per dimension).
pub const CODES_RABITQ: u64 = 4;
/// File name of the manifest in an index directory.
pub const MANIFEST: &str = "manifest.json";
/// The `format` value of every manifest: what marks a directory as a searchd index.
pub const MANIFEST_FORMAT: &str = "searchd-index";

/// Fixed-size header of every binary index file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Which file this is (e.g. [`VECTORS_MAGIC`]).
    pub magic: [u8; 8],
    /// Format version the file was written in.
    pub version: u32,
    /// Six values whose meaning depends on the file (counts, dimensions...; see its module).
    pub fields: [u64; 6],
}

impl Header {
    /// A header of the current [`FORMAT_VERSION`].
    pub fn new(magic: [u8; 8], fields: [u64; 6]) -> Header {
        Header {
            magic,
            version: FORMAT_VERSION,
            fields,
        }
    }

    /// The 64 bytes on disk: magic, version, header length, then the fields, little-endian.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(&self.magic);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        for (i, f) in self.fields.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&f.to_le_bytes());
        }
        b
    }

    /// Parse and check the header of `bytes` (the whole file), expecting `magic`.
    pub fn parse(path: &Path, bytes: &[u8], magic: [u8; 8]) -> Result<Header> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::format(
                path,
                format!("{} bytes is shorter than the 64-byte header", bytes.len()),
            ));
        }
        if bytes[..8] != magic {
            return Err(Error::format(
                path,
                format!(
                    "bad magic {:?}, expected {:?}",
                    String::from_utf8_lossy(&bytes[..8]),
                    String::from_utf8_lossy(&magic)
                ),
            ));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        check_version(path, version)?;
        let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
        if hlen as usize != HEADER_LEN {
            return Err(Error::format(
                path,
                format!("header length {hlen}, expected 64"),
            ));
        }
        let mut fields = [0u64; 6];
        for (i, f) in fields.iter_mut().enumerate() {
            *f = u64::from_le_bytes(bytes[16 + 8 * i..24 + 8 * i].try_into().unwrap());
        }
        Ok(Header {
            magic,
            version,
            fields,
        })
    }
}

/// Writes the files of an index directory into a temporary sibling directory and renames
/// it into place on [`DirWriter::commit`]. Dropped without commit, it removes the
/// temporary directory.
pub struct DirWriter {
    tmp: PathBuf,
    out: PathBuf,
    files: Vec<FileEntry>,
    committed: bool,
}

impl DirWriter {
    /// The temporary directory being written (renamed to `out` on commit): where an index
    /// of several directories puts the others.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Start writing `out`. Fails if `out` exists and `force` is false.
    pub fn create(out: &Path, force: bool) -> Result<DirWriter> {
        if out.exists() && !force {
            return Err(Error::Exists {
                path: out.to_path_buf(),
            });
        }
        let name = out
            .file_name()
            .ok_or_else(|| Error::invalid(format!("{} is not a directory name", out.display())))?;
        let mut tmp_name = name.to_os_string();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = out.with_file_name(tmp_name);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        Ok(DirWriter {
            tmp,
            out: out.to_path_buf(),
            files: Vec::new(),
            committed: false,
        })
    }

    /// Write one binary file: header then payload parts, computing size and CRC32.
    pub fn write_file(&mut self, name: &str, header: &Header, parts: &[&[u8]]) -> Result<()> {
        let path = self.tmp.join(name);
        let f = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let mut crc = crc32fast::Hasher::new();
        let mut bytes = 0u64;
        let h = header.to_bytes();
        for part in std::iter::once(&h[..]).chain(parts.iter().copied()) {
            w.write_all(part).map_err(|e| Error::io(&path, e))?;
            crc.update(part);
            bytes += part.len() as u64;
        }
        let f = w
            .into_inner()
            .map_err(|e| Error::io(&path, e.into_error()))?;
        f.sync_all().map_err(|e| Error::io(&path, e))?;
        self.files.push(FileEntry {
            name: name.to_string(),
            bytes,
            crc32: crc.finalize(),
        });
        Ok(())
    }

    /// Add an existing, checked file of another index under `name` with its manifest
    /// `entry`: a hard link where the filesystem allows (index files are write-once, so
    /// sharing the inode is safe), a copy otherwise.
    pub fn link_file(&mut self, name: &str, src: &Path, entry: &FileEntry) -> Result<()> {
        let path = self.tmp.join(name);
        if std::fs::hard_link(src, &path).is_err() {
            std::fs::copy(src, &path).map_err(|e| Error::io(src, e))?;
        }
        self.files.push(FileEntry {
            name: name.to_string(),
            ..entry.clone()
        });
        Ok(())
    }

    /// Write the manifest (with the files written so far) and rename the directory into
    /// place, replacing an existing one.
    pub fn commit(mut self, mut manifest: Manifest) -> Result<()> {
        manifest.files = std::mem::take(&mut self.files);
        let path = self.tmp.join(MANIFEST);
        let text = serde_json::to_string_pretty(&manifest).expect("manifest serialises");
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        if let Ok(d) = std::fs::File::open(&self.tmp) {
            let _ = d.sync_all();
        }
        if self.out.exists() {
            // Move the old index aside first: rename cannot replace a non-empty directory.
            let mut old = self.out.clone().into_os_string();
            old.push(format!(".old-{}", std::process::id()));
            let old = PathBuf::from(old);
            std::fs::rename(&self.out, &old).map_err(|e| Error::io(&self.out, e))?;
            std::fs::rename(&self.tmp, &self.out).map_err(|e| Error::io(&self.out, e))?;
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&self.tmp, &self.out).map_err(|e| Error::io(&self.out, e))?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for DirWriter {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Refuse a format version outside [`READ_VERSIONS`].
pub fn check_version(path: &Path, found: u32) -> Result<()> {
    if READ_VERSIONS.contains(&found) {
        return Ok(());
    }
    Err(Error::Version {
        path: path.to_path_buf(),
        found,
        oldest: *READ_VERSIONS.start(),
        newest: *READ_VERSIONS.end(),
    })
}

/// Check a file's size and (if `verify`) CRC32 against its manifest entry.
pub fn check_file(path: &Path, bytes: &[u8], entry: &FileEntry, verify: bool) -> Result<()> {
    if bytes.len() as u64 != entry.bytes {
        return Err(Error::Size {
            path: path.to_path_buf(),
            expected: entry.bytes,
            actual: bytes.len() as u64,
        });
    }
    if verify {
        let actual = crc32fast::hash(bytes);
        if actual != entry.crc32 {
            return Err(Error::Checksum {
                path: path.to_path_buf(),
                expected: entry.crc32,
                actual,
            });
        }
    }
    Ok(())
}
