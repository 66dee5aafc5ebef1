use std::path::PathBuf;

/// Everything that can go wrong in the engine. Variants name the file involved where there is
/// one, so the CLI can print a single line a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a searchd index file ({message})")]
    Format { path: PathBuf, message: String },
    #[error("{path}: index format version {found} is not supported (this searchd reads versions {oldest} to {newest})")]
    Version {
        path: PathBuf,
        found: u32,
        oldest: u32,
        newest: u32,
    },
    #[error("{path}: checksum mismatch (expected crc32 {expected:08x}, file has {actual:08x}); the index is corrupt, rebuild it or open with --no-verify")]
    Checksum {
        path: PathBuf,
        expected: u32,
        actual: u32,
    },
    #[error("{path}: size is {actual} bytes, the manifest says {expected}; the index is truncated or corrupt")]
    Size {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("invalid input: {message}")]
    InvalidInput { message: String },
    #[error("invalid parameter {name}: {message}")]
    InvalidParam { name: &'static str, message: String },
    #[error("{path} already exists; pass --force to replace it")]
    Exists { path: PathBuf },
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

pub type Result<T> = std::result::Result<T, Error>;

/// Why one search did not produce hits. These are per-request outcomes, kept apart from
/// [`Error`] so a server can map them to HTTP statuses without string matching.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    #[error("vector has {got} dimensions, the index has {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("vector component {index} is not a finite number")]
    NonFinite { index: usize },
    #[error("vector has zero length; cosine similarity is undefined for it")]
    ZeroVector,
    #[error("k must be between 1 and {max}, got {got}")]
    BadK { got: usize, max: usize },
    #[error("the search passed its deadline and was stopped")]
    DeadlineExceeded,
    #[error("oversample must be between 1 and {max}, got {got}")]
    BadOversample { got: f32, max: f32 },
    #[error("the index was opened without its float32 vectors (--vectors none)")]
    NoVectors,
    #[error("reading index vectors failed: {message}")]
    Storage { message: String },
}
