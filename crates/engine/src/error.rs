//! The engine's errors: [`Error`] for building, opening and evaluating indexes, and
//! [`SearchError`] for why one search produced no hits.

use std::path::PathBuf;

/// Everything that can go wrong in the engine. Variants name the file involved where there is
/// one, so the CLI can print a single line a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on `path` failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `path` is not a valid searchd index file: bad magic or header, a malformed
    /// manifest, or contents that contradict the manifest.
    #[error("{path}: not a searchd index file ({message})")]
    Format {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A manifest or file header records a format version outside
    /// [`crate::format::READ_VERSIONS`].
    #[error("{path}: index format version {found} is not supported (this searchd reads versions {oldest} to {newest})")]
    Version {
        /// The manifest or index file.
        path: PathBuf,
        /// The version the file records.
        found: u32,
        /// The oldest version this searchd reads.
        oldest: u32,
        /// The newest version this searchd reads.
        newest: u32,
    },
    /// A file's CRC32 differs from the one its manifest records (checked when the index
    /// is opened with verification).
    #[error("{path}: checksum mismatch (expected crc32 {expected:08x}, file has {actual:08x}); the index is corrupt, rebuild it or open with --no-verify")]
    Checksum {
        /// The corrupt file.
        path: PathBuf,
        /// CRC32 the manifest records.
        expected: u32,
        /// CRC32 of the file's bytes.
        actual: u32,
    },
    /// A file's size differs from its manifest entry or from the size its header implies
    /// (truncated or corrupt).
    #[error("{path}: size is {actual} bytes, the manifest says {expected}; the index is truncated or corrupt")]
    Size {
        /// The truncated or corrupt file.
        path: PathBuf,
        /// Size the manifest or header implies, in bytes.
        expected: u64,
        /// Size of the file, in bytes.
        actual: u64,
    },
    /// Input that cannot be used: no vectors, non-finite values, a zero row under cosine,
    /// an unusable path, ground truth that does not fit the queries...
    #[error("invalid input: {message}")]
    InvalidInput {
        /// What is wrong, naming the row or value where there is one.
        message: String,
    },
    /// A build or open parameter is out of range or does not fit the index (`m`,
    /// `ef_construction`, `quantization`, `pq`, `nlist`, `vectors`...).
    #[error("invalid parameter {name}: {message}")]
    InvalidParam {
        /// The parameter's name, e.g. `m` or `quantization`.
        name: &'static str,
        /// Why the value is refused (and what would work, where that is known).
        message: String,
    },
    /// The output directory already exists and replacing it was not asked for (`force`).
    #[error("{path} already exists; pass --force to replace it")]
    Exists {
        /// The existing directory.
        path: PathBuf,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Error {
        Error::Format {
            path: path.into(),
            message: message.into(),
        }
    }
    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidInput {
            message: message.into(),
        }
    }
}

/// Result of the engine's fallible operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Why one search did not produce hits. These are per-request outcomes, kept apart from
/// [`Error`] so a server can map them to HTTP statuses without string matching.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    /// The query's length differs from the index's dimension.
    #[error("vector has {got} dimensions, the index has {expected}")]
    Dimension {
        /// The index's dimension.
        expected: usize,
        /// The query's length.
        got: usize,
    },
    /// A query component is NaN or infinite.
    #[error("vector component {index} is not a finite number")]
    NonFinite {
        /// Position of the first non-finite component.
        index: usize,
    },
    /// The query is all zeros under the cosine metric, so it cannot be normalised.
    #[error("vector has zero length; cosine similarity is undefined for it")]
    ZeroVector,
    /// `k` is 0 or above [`crate::MAX_K`].
    #[error("k must be between 1 and {max}, got {got}")]
    BadK {
        /// The `k` asked for.
        got: usize,
        /// The largest `k` allowed.
        max: usize,
    },
    /// The search's deadline ([`crate::SearchParams::deadline`]) passed before it finished.
    #[error("the search passed its deadline and was stopped")]
    DeadlineExceeded,
    /// The oversample factor is not between 1 and [`crate::MAX_OVERSAMPLE`].
    #[error("oversample must be between 1 and {max}, got {got}")]
    BadOversample {
        /// The oversample asked for (or recorded in the manifest).
        got: f32,
        /// The largest oversample allowed.
        max: f32,
    },
    /// The search needs the float32 vectors, but the index was opened without them
    /// (`--vectors none`).
    #[error("the index was opened without its float32 vectors (--vectors none)")]
    NoVectors,
    /// Reading vectors from disk (`--vectors disk`) failed, or the opened index's parts do
    /// not fit together.
    #[error("reading index vectors failed: {message}")]
    Storage {
        /// What failed, naming the file where there is one.
        message: String,
    },
}
