//! # searchd-vecio
//!
//! Reading and writing the vector files searchd works with, and the synthetic corpus
//! generator ([`synth`]).
//!
//! Formats (picked by extension; a file with an unknown extension is sniffed for the
//! `.npy` and HDF5 signatures, anything else is an [`Error::Unsupported`]):
//!
//! | extension | vectors ([`read_vectors`]) | ids ([`read_ids`]) | written by |
//! |---|---|---|---|
//! | `.npy` | 2-D C-order `<f4` (zero-copy mmap), `<f2`, `<f8`, `\|u1` | 2-D `<i4`, `<i8` | [`write_vectors`] (`<f4`), [`write_ids`] (`<i4`) |
//! | `.fvecs` | float32 rows | – | [`write_vectors`] |
//! | `.bvecs` | uint8 rows, converted to f32 | – | – |
//! | `.ivecs` | – | int32 rows | [`write_ids`] |
//! | `.hdf5`, `.h5` | dataset `train` (or `test` via [`read_vectors_hdf5_default`]) | dataset `neighbors` | – |
//!
//! HDF5 support needs the cargo feature `hdf5` (and the system library, Debian package
//! `libhdf5-dev`); without it HDF5 files get a clear [`Error::Unsupported`]. In an HDF5 path,
//! `file.hdf5#name` picks the dataset `name`.
//!
//! Every error is one line naming the file (its `Display` already contains the
//! underlying I/O error, so print it alone rather than with its source chain).
//!
//! ## Memory mapping
//!
//! Little-endian float32 `.npy` files are memory-mapped and used in place. The contract of a
//! mapping: **the file must not be truncated or modified by anyone while a [`Vectors`] over
//! it is alive** — truncation makes later reads fault (SIGBUS), modification changes the data
//! under the reader's feet. searchd's own writers never modify a file in place (they write a
//! temporary file and rename it over the old name), so replacing a file with
//! [`write_vectors`] while another process has the old one mapped is safe.
#![warn(missing_docs)]

mod atomic;
#[cfg(feature = "hdf5")]
mod h5;
mod npy;
pub mod synth;
mod vecs;

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Everything that can go wrong reading or writing a vector file. Every variant names the
/// file; `Display` is a complete one-line message such as
/// `data/base.npy: truncated: shape (1000, 384) of '<f4' needs 1536000 data bytes, the file has 4096`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused (not found, permission, disk full...).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file is damaged or not what its extension says (bad magic, truncated,
    /// inconsistent rows, wrong number of dimensions, empty...).
    #[error("{}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A well-formed file this library does not handle (big-endian, Fortran order, unknown
    /// dtype or extension, HDF5 without the `hdf5` feature).
    #[error("{}: {message}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported.
        message: String,
    },
    /// Values or arguments that are not acceptable (NaN/infinity when checked, length
    /// mismatch when writing, dimension 0...).
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file being read or written.
        path: PathBuf,
        /// What is not acceptable, and where.
        message: String,
    },
}

impl Error {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Io { path, .. }
            | Error::Format { path, .. }
            | Error::Unsupported { path, .. }
            | Error::Invalid { path, .. } => path,
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    pub(crate) fn format(path: &Path, message: impl Into<String>) -> Error {
        Error::Format {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
    pub(crate) fn unsupported(path: &Path, message: impl Into<String>) -> Error {
        Error::Unsupported {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
    pub(crate) fn invalid(path: &Path, message: impl Into<String>) -> Error {
        Error::Invalid {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// Result of this crate's operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Row-major `n x dim` f32 matrix: either zero-copy over a memory-mapped little-endian
/// float32 `.npy` file, or owned (decoded from float16 `.npy`, `.fvecs`, `.bvecs`, HDF5...).
pub struct Vectors {
    n: usize,
    dim: usize,
    storage: Storage,
}

enum Storage {
    /// `map[offset .. offset + n*dim*4]` holds the f32 data; `offset` is a multiple of 4.
    Mmap {
        map: memmap2::Mmap,
        offset: usize,
    },
    Owned(Vec<f32>),
}

impl Vectors {
    /// Number of rows.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of columns (dimensions).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// All `n * dim` values, row-major.
    pub fn as_slice(&self) -> &[f32] {
        match &self.storage {
            Storage::Owned(v) => v,
            Storage::Mmap { map, offset } => {
                let len = self.n * self.dim * 4;
                // Alignment and length were checked when the mapping was made.
                bytemuck::cast_slice(&map[*offset..*offset + len])
            }
        }
    }

    /// Row `i` (`dim` values). Panics if `i >= n`.
    pub fn row(&self, i: usize) -> &[f32] {
        assert!(i < self.n, "row {i} out of range (n = {})", self.n);
        &self.as_slice()[i * self.dim..(i + 1) * self.dim]
    }

    /// Wraps an owned buffer. Panics if `data.len() != n * dim` (a programmer error).
    pub fn from_vec(data: Vec<f32>, n: usize, dim: usize) -> Vectors {
        assert_eq!(
            Some(data.len()),
            n.checked_mul(dim),
            "Vectors::from_vec: data has {} values, n * dim = {n} * {dim}",
            data.len()
        );
        Vectors {
            n,
            dim,
            storage: Storage::Owned(data),
        }
    }

    /// The values as an owned `Vec` (copies when memory-mapped).
    pub fn into_owned(self) -> Vec<f32> {
        match self.storage {
            Storage::Owned(v) => v,
            Storage::Mmap { .. } => self.as_slice().to_vec(),
        }
    }

    /// True when the data is used in place from a memory-mapped file.
    pub fn is_mmap(&self) -> bool {
        matches!(self.storage, Storage::Mmap { .. })
    }

    /// Row and column of the first NaN or infinity, if any.
    pub fn find_non_finite(&self) -> Option<(usize, usize)> {
        if self.dim == 0 {
            return None;
        }
        self.as_slice()
            .iter()
            .position(|x| !x.is_finite())
            .map(|p| (p / self.dim, p % self.dim))
    }

    /// `Err(Error::Invalid)` naming `path` and the first NaN/infinity position, if any.
    pub fn ensure_finite(&self, path: &Path) -> Result<()> {
        match self.find_non_finite() {
            None => Ok(()),
            Some((r, c)) => Err(Error::invalid(
                path,
                format!(
                    "row {r}, column {c} is {} (vectors must be finite)",
                    self.row(r)[c]
                ),
            )),
        }
    }

    pub(crate) fn from_mmap(map: memmap2::Mmap, offset: usize, n: usize, dim: usize) -> Vectors {
        debug_assert_eq!(offset % 4, 0);
        debug_assert!(offset + n * dim * 4 <= map.len());
        Vectors {
            n,
            dim,
            storage: Storage::Mmap { map, offset },
        }
    }
}

impl fmt::Debug for Vectors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vectors")
            .field("n", &self.n)
            .field("dim", &self.dim)
            .field("mmap", &self.is_mmap())
            .finish()
    }
}

/// Integer matrix (ground-truth ids), `n` rows of `k`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdMatrix {
    /// Number of rows (one per query).
    pub n: usize,
    /// Ids per row.
    pub k: usize,
    /// `n * k` ids, row-major.
    pub data: Vec<i64>,
}

impl IdMatrix {
    /// Row `i` (`k` ids). Panics if `i >= n`.
    pub fn row(&self, i: usize) -> &[i64] {
        assert!(i < self.n, "row {i} out of range (n = {})", self.n);
        &self.data[i * self.k..(i + 1) * self.k]
    }
}

/// File formats, decided by extension (or sniffed content for unknown extensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Npy,
    Fvecs,
    Bvecs,
    Ivecs,
    Hdf5,
}

const NPY_MAGIC: &[u8] = b"\x93NUMPY";
const HDF5_MAGIC: &[u8] = b"\x89HDF\r\n\x1a\n";

fn extension(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
}

fn kind_by_extension(path: &Path) -> Option<Kind> {
    match extension(path)?.as_str() {
        "npy" => Some(Kind::Npy),
        "fvecs" => Some(Kind::Fvecs),
        "bvecs" => Some(Kind::Bvecs),
        "ivecs" => Some(Kind::Ivecs),
        "hdf5" | "h5" => Some(Kind::Hdf5),
        _ => None,
    }
}

/// Splits `file.hdf5#dataset` into the file and the dataset name. Only done when the part
/// before the last `#` has an HDF5 extension and the whole path is not an existing file.
fn split_dataset(path: &Path) -> (PathBuf, Option<String>) {
    if let Some(s) = path.to_str() {
        if let Some(pos) = s.rfind('#') {
            let (file, name) = (&s[..pos], &s[pos + 1..]);
            let file_path = Path::new(file);
            if !name.is_empty()
                && kind_by_extension(file_path) == Some(Kind::Hdf5)
                && !path.exists()
            {
                return (file_path.to_path_buf(), Some(name.to_string()));
            }
        }
    }
    (path.to_path_buf(), None)
}

fn detect(path: &Path) -> Result<Kind> {
    if let Some(k) = kind_by_extension(path) {
        return Ok(k);
    }
    // Unknown extension: sniff the first bytes.
    use std::io::Read;
    let mut head = Vec::with_capacity(8);
    File::open(path)
        .and_then(|f| f.take(8).read_to_end(&mut head))
        .map_err(|e| Error::io(path, e))?;
    if head.starts_with(NPY_MAGIC) {
        return Ok(Kind::Npy);
    }
    if head.starts_with(HDF5_MAGIC) {
        return Ok(Kind::Hdf5);
    }
    let ext = match path.extension() {
        Some(e) => format!("extension '.{}'", e.to_string_lossy()),
        None => "no extension".to_string(),
    };
    let what = if head.is_empty() {
        "an empty file".to_string()
    } else {
        "content that is neither .npy nor HDF5".to_string()
    };
    Err(Error::unsupported(
        path,
        format!(
            "unknown vector file format ({ext}, {what}); expected .npy, .fvecs, .bvecs, .ivecs or .hdf5/.h5"
        ),
    ))
}

/// Opens and memory-maps a whole file. Empty files are a [`Error::Format`] (nothing to map).
pub(crate) fn map_file(path: &Path) -> Result<memmap2::Mmap> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Err(Error::format(path, "empty file (0 bytes)"));
    }
    // SAFETY: memmap2 requires that the mapped file is not truncated or modified (by this or
    // any other process) while the map is alive; otherwise reads may fault (SIGBUS) or see
    // changing data. This is the documented contract of this crate (see the crate docs):
    // callers must not change vector files in place while they are loaded. searchd's own
    // writers only ever create a new file and rename it over the old name, which leaves
    // existing mappings of the old file intact.
    let map = unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(|e| Error::io(path, e))?;
    Ok(map)
}

/// Reads a float matrix, format by extension: `.npy` (2-D, C order, little-endian `<f4`
/// mapped in place, or `<f2`/`<f8`/`|u1` decoded to f32), `.fvecs`, `.bvecs` (u8 -> f32),
/// `.hdf5`/`.h5` (feature `hdf5`; dataset `train` unless `file.hdf5#name` says otherwise).
///
/// NaN and infinity are not rejected here; see [`Vectors::find_non_finite`].
pub fn read_vectors(path: &Path) -> Result<Vectors> {
    read_vectors_hdf5_default(path, "train")
}

/// Rows of the float matrix [`read_vectors`] would read, without decoding its values:
/// `.npy` from its header, `.fvecs`/`.bvecs` from their row layout (both mapped, not read);
/// HDF5 by reading it.
pub fn count_rows(path: &Path) -> Result<usize> {
    let (file, _) = split_dataset(path);
    match detect(&file)? {
        Kind::Npy => Ok(npy::parse_header(&file, &map_file(&file)?)?.n),
        Kind::Fvecs => vecs::count_rows(&file, 4, "fvecs"),
        Kind::Bvecs => vecs::count_rows(&file, 1, "bvecs"),
        Kind::Ivecs | Kind::Hdf5 => read_vectors(path).map(|v| v.n()),
    }
}

/// Like [`read_vectors`], but for HDF5 files reads `default_dataset` (e.g. `"train"` for
/// base vectors, `"test"` for queries) unless the path says `file.hdf5#name`. For other
/// formats `default_dataset` is ignored, so callers can use this for any path. Without the
/// `hdf5` feature an HDF5 file gives an [`Error::Unsupported`] saying how to enable it.
pub fn read_vectors_hdf5_default(path: &Path, default_dataset: &str) -> Result<Vectors> {
    let (file, dataset) = split_dataset(path);
    match detect(&file)? {
        Kind::Npy => npy::read_vectors(&file),
        Kind::Fvecs => vecs::read_fvecs(&file),
        Kind::Bvecs => vecs::read_bvecs(&file),
        Kind::Ivecs => Err(Error::unsupported(
            &file,
            ".ivecs holds integer ids, not vectors (expected .npy, .fvecs, .bvecs or .hdf5)",
        )),
        Kind::Hdf5 => read_hdf5_vectors(&file, dataset.as_deref().unwrap_or(default_dataset)),
    }
}

/// Reads an integer matrix (ground-truth ids): `.npy` int32/int64 (2-D), `.ivecs`, or
/// `.hdf5` (dataset `neighbors` unless `file.hdf5#name`).
pub fn read_ids(path: &Path) -> Result<IdMatrix> {
    let (file, dataset) = split_dataset(path);
    match detect(&file)? {
        Kind::Npy => npy::read_ids(&file),
        Kind::Ivecs => vecs::read_ivecs(&file),
        Kind::Fvecs | Kind::Bvecs => Err(Error::unsupported(
            &file,
            "holds vectors, not integer ids (expected .npy int32/int64, .ivecs or .hdf5)",
        )),
        Kind::Hdf5 => read_hdf5_ids(&file, dataset.as_deref().unwrap_or("neighbors")),
    }
}

#[cfg(feature = "hdf5")]
fn read_hdf5_vectors(path: &Path, dataset: &str) -> Result<Vectors> {
    h5::read_vectors(path, dataset)
}

#[cfg(feature = "hdf5")]
fn read_hdf5_ids(path: &Path, dataset: &str) -> Result<IdMatrix> {
    h5::read_ids(path, dataset)
}

#[cfg(not(feature = "hdf5"))]
fn hdf5_disabled(path: &Path) -> Error {
    Error::unsupported(
        path,
        "HDF5 support is not compiled in; install the HDF5 library (Debian: apt-get install libhdf5-dev) and rebuild with --features hdf5",
    )
}

#[cfg(not(feature = "hdf5"))]
fn read_hdf5_vectors(path: &Path, _dataset: &str) -> Result<Vectors> {
    Err(hdf5_disabled(path))
}

#[cfg(not(feature = "hdf5"))]
fn read_hdf5_ids(path: &Path, _dataset: &str) -> Result<IdMatrix> {
    Err(hdf5_disabled(path))
}

fn check_shape(path: &Path, len: usize, n: usize, cols: usize, cols_name: &str) -> Result<()> {
    if n.checked_mul(cols) != Some(len) {
        return Err(Error::invalid(
            path,
            format!("data has {len} values, but n * {cols_name} = {n} * {cols}"),
        ));
    }
    if cols == 0 {
        return Err(Error::invalid(
            path,
            format!("cannot write a matrix with {cols_name} = 0"),
        ));
    }
    Ok(())
}

/// Writes an `n x dim` float matrix. `.npy` gives float32 `<f4`, `.fvecs` the fvecs format.
/// The file is written to a temporary file in the same directory, fsync'd and renamed over
/// `path`, so a crash never leaves a partial file under the final name.
pub fn write_vectors(path: &Path, data: &[f32], n: usize, dim: usize) -> Result<()> {
    check_shape(path, data.len(), n, dim, "dim")?;
    match kind_by_extension(path) {
        Some(Kind::Npy) => npy::write_f32(path, data, n, dim),
        Some(Kind::Fvecs) => vecs::write_fvecs(path, data, n, dim),
        _ => Err(Error::unsupported(
            path,
            "cannot write vectors with this extension; use .npy (float32) or .fvecs",
        )),
    }
}

/// Writes an `n x k` id matrix. `.npy` gives int32 `<i4`, `.ivecs` the ivecs format.
/// Atomic like [`write_vectors`].
pub fn write_ids(path: &Path, data: &[i32], n: usize, k: usize) -> Result<()> {
    check_shape(path, data.len(), n, k, "k")?;
    match kind_by_extension(path) {
        Some(Kind::Npy) => npy::write_i32(path, data, n, k),
        Some(Kind::Ivecs) => vecs::write_ivecs(path, data, n, k),
        _ => Err(Error::unsupported(
            path,
            "cannot write ids with this extension; use .npy (int32) or .ivecs",
        )),
    }
}
