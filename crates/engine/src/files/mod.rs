//! The files of an index directory, one module each, each with its writer and its reader
//! (the layout comment at the top of each module is the file's specification):
//!
//! | file | module | written by | read by |
//! |---|---|---|---|
//! | `vectors.bin` | [`vectors`] | [`vectors::write`] | [`vectors::Vectors::open`] |
//! | `graph.bin` | [`graph`] | [`graph::write`] | [`graph::GraphFile::open`] |
//! | `ids.bin` | [`ids`] | [`ids::write`] | [`ids::IdMap::open`] |
//! | `codes.bin` | [`codes`] | [`codes::write`], [`codes::write_residuals`] | [`codes::Codes::open`] |
//! | `ivf.bin` | [`lists`] | [`lists::write`] | [`lists::ListsFile::open`] |
//! | `partitions.bin` | [`parts`] | [`parts::write`] | [`parts::PartsFile::open`] |
//!
//! The directory around them (the 64-byte header every file starts with, the manifest, the
//! atomic writer) is [`crate::format`]. Adding a code kind touches [`codes`] and
//! [`crate::format::CodeKind`]; adding an index kind adds a file module here (if it has a
//! file of its own) and one arm to the index's `Structure`.

pub mod codes;
pub mod graph;
pub mod ids;
pub mod lists;
pub mod parts;
pub mod vectors;

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::format::Manifest;
use crate::storage::{FileBytes, LoadOptions, Placement};

/// Open file `name` of the index in `dir` where `placement` says, and check its size and
/// (if `opts.verify`) checksum against the manifest.
pub(crate) fn open_checked(
    dir: &Path,
    manifest: &Manifest,
    name: &str,
    placement: Placement,
    opts: &LoadOptions,
) -> Result<(PathBuf, FileBytes)> {
    let entry = manifest.required(dir, name)?;
    let path = dir.join(name);
    let fb = FileBytes::open(&path, placement, opts)?;
    crate::format::check_file(&path, fb.as_bytes(), entry, opts.verify)?;
    Ok((path, fb))
}

/// `len` little-endian u32 words of `bytes` from byte `start`.
#[inline]
pub(crate) fn words(bytes: &[u8], (start, len): (usize, usize)) -> &[u32] {
    bytemuck::cast_slice(&bytes[start..start + 4 * len])
}
