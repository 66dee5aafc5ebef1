//! Where an index file's bytes live: mapped from the page cache (shared by every process
//! that opens the same file) or copied into private memory. Everything above this module
//! sees only `&[u8]` and typed views of it.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

/// Placement of an index file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Map the file: pages come from the page cache and are shared between processes.
    #[default]
    Mmap,
    /// Read the file into private, anonymous memory.
    Ram,
}

impl Placement {
    /// Parse a name as [`Placement::name`] gives it (`mmap`, `ram`); `None` for anything else.
    pub fn parse(s: &str) -> Option<Placement> {
        match s {
            "mmap" => Some(Placement::Mmap),
            "ram" => Some(Placement::Ram),
            _ => None,
        }
    }
}

impl Placement {
    /// The name on the command line and in reports: `mmap` or `ram`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Mmap => "mmap",
            Placement::Ram => "ram",
        }
    }
}

/// Placement of the float32 vectors. Quantized indexes only read them to rescore a few
/// candidates per query, so they may stay on disk (read with `pread`, never mapped, so
/// they do not count in the process's resident set) or be left out altogether.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VectorPlacement {
    /// Map `vectors.bin` (shared page cache).
    #[default]
    Mmap,
    /// Read `vectors.bin` into private memory.
    Ram,
    /// Leave `vectors.bin` on disk and read the rows a search rescores with `pread`
    /// (quantized indexes only). The kernel's page cache still caches them, but those pages
    /// are reclaimable and are not part of the process's resident set.
    Disk,
    /// Do not open `vectors.bin`: quantized indexes answer from their codes alone, with
    /// approximate scores and no rescoring.
    None,
}

impl VectorPlacement {
    /// Parse a name as [`VectorPlacement::name`] gives it; `None` for anything else.
    pub fn parse(s: &str) -> Option<VectorPlacement> {
        match s {
            "mmap" => Some(VectorPlacement::Mmap),
            "ram" => Some(VectorPlacement::Ram),
            "disk" => Some(VectorPlacement::Disk),
            "none" => Some(VectorPlacement::None),
            _ => None,
        }
    }
    /// The name on the command line and in reports: `mmap`, `ram`, `disk` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            VectorPlacement::Mmap => "mmap",
            VectorPlacement::Ram => "ram",
            VectorPlacement::Disk => "disk",
            VectorPlacement::None => "none",
        }
    }
    /// The in-memory placement this stands for, if any.
    pub fn in_memory(self) -> Option<Placement> {
        match self {
            VectorPlacement::Mmap => Some(Placement::Mmap),
            VectorPlacement::Ram => Some(Placement::Ram),
            VectorPlacement::Disk | VectorPlacement::None => None,
        }
    }
}

/// Where each part of an opened index lives, as reported by `/stats` and `eval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PartPlacement {
    /// `vectors.bin`.
    pub vectors: VectorPlacement,
    /// `graph.bin`, `ids.bin` and `ivf.bin`.
    pub graph: Placement,
    /// `codes.bin`.
    pub codes: Placement,
}

/// How to bring an index into memory. Each part (float32 vectors, graph + id map, codes)
/// has its own placement: a quantized index can keep codes and graph hot in RAM while the
/// rescoring vectors stay mapped or on disk.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `vectors.bin` (the float32 rows).
    pub vectors: VectorPlacement,
    /// `graph.bin` and `ids.bin`.
    pub graph: Placement,
    /// `codes.bin` (quantized indexes).
    pub codes: Placement,
    /// Pre-fault every page at open (`MAP_POPULATE`), so the first queries do not pay for
    /// page faults.
    pub populate: bool,
    /// `mlock` the mapping so it cannot be evicted (needs RLIMIT_MEMLOCK).
    pub lock: bool,
    /// Check every file's CRC32 against the manifest (reads every byte once).
    pub verify: bool,
    /// Partitioned indexes: bytes their resident partitions (and routing) may take; the
    /// graph manager ([`crate::index::part_store`]) loads partitions on demand and drops the
    /// least recently used ones to stay within it. `None`: every partition resident.
    /// Ignored by other kinds.
    pub memory_budget: Option<u64>,
    /// A budget shared with other indexes (takes the place of `memory_budget`): every
    /// partitioned index opened with the same pool keeps, with the others, to its one
    /// budget (`serve --memory-budget` makes one for the whole server). `None`: each index
    /// with a `memory_budget` has a pool of its own.
    pub pool: Option<crate::budget::MemoryPool>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions::all(Placement::Mmap)
    }
}

impl LoadOptions {
    /// Every part in `placement`, checksums verified, no pre-faulting or locking.
    pub fn all(placement: Placement) -> LoadOptions {
        LoadOptions {
            vectors: match placement {
                Placement::Mmap => VectorPlacement::Mmap,
                Placement::Ram => VectorPlacement::Ram,
            },
            graph: placement,
            codes: placement,
            populate: false,
            lock: false,
            verify: true,
            memory_budget: None,
            pool: None,
        }
    }

    /// Placement as the command-line flags give it: graph and codes follow `vectors` when
    /// those are in memory and are mapped otherwise, unless given explicitly.
    pub fn with_parts(
        vectors: VectorPlacement,
        graph: Option<Placement>,
        codes: Option<Placement>,
    ) -> LoadOptions {
        let follow = vectors.in_memory().unwrap_or_default();
        LoadOptions {
            vectors,
            graph: graph.unwrap_or(follow),
            codes: codes.unwrap_or(follow),
            ..LoadOptions::default()
        }
    }

    /// The placements alone, as [`PartPlacement`] reports them.
    pub fn parts(&self) -> PartPlacement {
        PartPlacement {
            vectors: self.vectors,
            graph: self.graph,
            codes: self.codes,
        }
    }
}

/// 64-byte aligned owned buffer, so typed views of RAM-placed files are as aligned as
/// mapped ones.
struct AlignedBuf {
    words: Vec<Line>,
    len: usize,
}

#[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The bytes of one index file.
pub struct FileBytes {
    inner: Inner,
}

enum Inner {
    Mmap(memmap2::Mmap),
    Ram(AlignedBuf),
    /// A large file read into an anonymous mapping of its own: private memory like `Ram`,
    /// but dropping it unmaps it, so the memory goes back to the system at once (a heap
    /// buffer's pages can stay with the allocator: a graph manager that loads and drops
    /// partitions under a budget would grow past it).
    Anon(memmap2::Mmap),
}

/// Files at least this large go to their own anonymous mapping under [`Placement::Ram`].
const ANON_MIN: usize = 64 << 10;

impl FileBytes {
    /// Open `path` with the given placement (`opts` gives pre-faulting and locking).
    pub fn open(path: &Path, placement: Placement, opts: &LoadOptions) -> Result<FileBytes> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len() as usize;
        let inner = match placement {
            Placement::Mmap => {
                if len == 0 {
                    return Err(Error::format(path, "file is empty"));
                }
                let mut mo = memmap2::MmapOptions::new();
                if opts.populate {
                    mo.populate();
                }
                // SAFETY: this is the crate's only mapping of a file. Index files are
                // written once into a temporary directory and renamed into place; searchd
                // never modifies or truncates them afterwards. The operator must not
                // modify index files while a process has them open (documented in
                // docs/vectors.md): a truncation would turn reads into SIGBUS, which is the same
                // contract every mmap-based database (LMDB, tantivy) has.
                let map = unsafe { mo.map(&file) }.map_err(|e| Error::io(path, e))?;
                #[cfg(unix)]
                {
                    let _ = map.advise(memmap2::Advice::Random);
                }
                if opts.lock {
                    map.lock().map_err(|e| Error::io(path, e))?;
                }
                Inner::Mmap(map)
            }
            Placement::Ram if len >= ANON_MIN => {
                use std::io::Read;
                let mut map = memmap2::MmapMut::map_anon(len).map_err(|e| Error::io(path, e))?;
                // Searches read these bytes at random: ask for 2 MiB pages (fewer TLB misses)
                // before the read below touches them. Only a hint; where THP is off, nothing.
                #[cfg(target_os = "linux")]
                {
                    let _ = map.advise(memmap2::Advice::HugePage);
                }
                (&file)
                    .read_exact(&mut map[..])
                    .map_err(|e| Error::io(path, e))?;
                Inner::Anon(map.make_read_only().map_err(|e| Error::io(path, e))?)
            }
            Placement::Ram => {
                use std::io::Read;
                let mut buf = AlignedBuf {
                    words: vec![Line([0; 64]); len.div_ceil(64)],
                    len,
                };
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf.words);
                (&file)
                    .read_exact(&mut bytes[..len])
                    .map_err(|e| Error::io(path, e))?;
                Inner::Ram(buf)
            }
        };
        Ok(FileBytes { inner })
    }

    /// Wrap bytes that are already in memory (used by builders and tests).
    pub fn from_vec(data: &[u8]) -> FileBytes {
        let mut buf = AlignedBuf {
            words: vec![Line([0; 64]); data.len().div_ceil(64)],
            len: data.len(),
        };
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut buf.words);
        bytes[..data.len()].copy_from_slice(data);
        FileBytes {
            inner: Inner::Ram(buf),
        }
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.inner {
            Inner::Mmap(m) | Inner::Anon(m) => m,
            Inner::Ram(b) => &bytemuck::cast_slice(&b.words)[..b.len],
        }
    }

    /// True when the file is mapped rather than copied into private memory.
    pub fn is_mmap(&self) -> bool {
        matches!(self.inner, Inner::Mmap(_))
    }
}

/// Float32 rows left on disk (`--vectors disk`) and read on demand with positioned reads.
/// No mapping, so the rows a search reads never enter the process's resident set; the
/// kernel's page cache still keeps recently read pages, reclaimably.
pub struct DiskRows {
    file: File,
    path: std::path::PathBuf,
    /// Byte offset of row 0.
    offset: u64,
    n: usize,
    dim: usize,
}

impl DiskRows {
    /// Rows `n x dim` of little-endian f32 starting at byte `offset` of `path`. The caller
    /// has checked the file's header and size.
    pub fn open(path: &Path, offset: u64, n: usize, dim: usize) -> Result<DiskRows> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(DiskRows {
            file,
            path: path.to_path_buf(),
            offset,
            n,
            dim,
        })
    }

    /// The file the rows are read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read row `row` into `out` (`out.len() == dim`).
    pub fn read_row(&self, row: usize, out: &mut [f32]) -> std::io::Result<()> {
        debug_assert_eq!(out.len(), self.dim);
        if row >= self.n {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("row {row} out of range ({} rows)", self.n),
            ));
        }
        let at = self.offset + (row * self.dim * 4) as u64;
        read_exact_at(&self.file, bytemuck::cast_slice_mut(out), at)
    }

    /// Read `count` consecutive rows from `first` into `out`.
    pub fn read_rows(&self, first: usize, count: usize, out: &mut [f32]) -> std::io::Result<()> {
        debug_assert_eq!(out.len(), count * self.dim);
        if first + count > self.n {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "rows {first}..{} out of range ({} rows)",
                    first + count,
                    self.n
                ),
            ));
        }
        let at = self.offset + (first * self.dim * 4) as u64;
        read_exact_at(&self.file, bytemuck::cast_slice_mut(out), at)
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

#[cfg(not(unix))]
fn read_exact_at(_file: &File, _buf: &mut [u8], _at: u64) -> std::io::Result<()> {
    // Concurrent positioned reads without a shared cursor are unix-only in std.
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "--vectors disk needs positioned reads (unix only)",
    ))
}

/// CRC32 of a whole file, read in 1 MiB chunks (for files that are not brought into
/// memory).
pub(crate) fn file_crc32(path: &Path) -> Result<(u64, u32)> {
    use std::io::Read;
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut crc = crc32fast::Hasher::new();
    let mut total = 0u64;
    loop {
        let got = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if got == 0 {
            break;
        }
        crc.update(&buf[..got]);
        total += got as u64;
    }
    Ok((total, crc.finalize()))
}

/// The first `len` bytes of a file.
pub(crate) fn read_prefix(path: &Path, len: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::with_capacity(len);
    f.take(len as u64)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    Ok(buf)
}
