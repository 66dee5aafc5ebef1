use std::path::PathBuf;

/// Everything that can go wrong opening, reading or ingesting a collection. Input problems
/// ([`Error::is_input`]) are the user's to fix (exit status 2); the rest are I/O or
/// corruption (exit status 1 from the CLI... see `searchd`'s exit codes).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error on `path`.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `path` is not a searchd collection, or its manifest or files are malformed.
    #[error("{path}: not a searchd collection ({message})")]
    Format {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// An error of the vector index (`searchd-engine`).
    #[error(transparent)]
    Engine(#[from] searchd_engine::Error),
    /// An error reading documents or the document store.
    #[error(transparent)]
    Docs(#[from] searchd_docs::Error),
    /// A document or parameter the user must fix; the message names the file, line and field.
    #[error("{0}")]
    Input(String),
    /// The embedder failed (its message).
    #[error("embedder: {0}")]
    Embed(String),
    /// An error of the lexical index.
    #[error(transparent)]
    Lexical(#[from] searchd_lexical::Error),
    /// An error of the field indexes.
    #[error(transparent)]
    Fields(#[from] searchd_fields::Error),
    /// The output already exists (and, for ingest, `force` was not given).
    #[error("{path} already exists; remove it or choose another path")]
    Exists {
        /// The existing path.
        path: PathBuf,
    },
    /// A write to a collection that is not open for writing (HTTP 409).
    #[error("{0}")]
    ReadOnly(String),
    /// Writes are held back while the optimizer catches up (HTTP 503, retry later).
    #[error("{0}")]
    Busy(String),
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
    /// Whether the disk (or a quota) is full: the write was refused and nothing
    /// acknowledged before it is lost (HTTP 507).
    pub fn is_disk_full(&self) -> bool {
        let io = match self {
            Error::Io { source, .. } => Some(source),
            Error::Docs(searchd_docs::Error::Io { source, .. }) => Some(source),
            Error::Fields(searchd_fields::Error::Io { source, .. }) => Some(source),
            Error::Lexical(searchd_lexical::Error::Io { source, .. }) => Some(source),
            // tantivy wraps the I/O error of a full disk in its own (a segment's lexical
            // index written by a refresh): its message is all that is left of it.
            Error::Lexical(e @ searchd_lexical::Error::Tantivy { .. }) => {
                let m = e.to_string();
                return m.contains("StorageFull") || m.contains("No space left on device");
            }
            _ => None,
        };
        io.is_some_and(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) || e.raw_os_error() == Some(28)
        })
    }
    /// Whether this is bad input (a document, a flag, a file of the wrong kind) rather than
    /// an I/O failure: the CLI exits 2 for these and 1 for the rest.
    pub fn is_input(&self) -> bool {
        match self {
            Error::Input(_) | Error::Format { .. } | Error::Exists { .. } => true,
            Error::Engine(e) => !matches!(e, searchd_engine::Error::Io { .. }),
            Error::Docs(searchd_docs::Error::Io { source, .. }) => {
                source.kind() == std::io::ErrorKind::NotFound
            }
            Error::Docs(_) => true,
            // A path that does not exist is the user's to fix, not a failing disk.
            Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            Error::Embed(_) => false,
            Error::Lexical(_) => false,
            Error::Fields(searchd_fields::Error::Io { source, .. }) => {
                source.kind() == std::io::ErrorKind::NotFound
            }
            Error::Fields(_) => true,
            Error::ReadOnly(_) => true,
            Error::Busy(_) => false,
        }
    }
}

/// This crate's `Result`, with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
