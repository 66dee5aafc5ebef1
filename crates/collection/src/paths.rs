//! Paths given by users for directories that do not exist yet (snapshots, restores),
//! compared with existing directories after resolving symlinks and `..`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Refuse a path that holds a NUL byte: no file system takes one, and the system calls
/// would fail later with an I/O error instead of saying what is wrong.
pub fn check_nul(p: &Path) -> Result<()> {
    if p.as_os_str().as_bytes().contains(&0) {
        return Err(Error::Input(format!(
            "the path {:?} contains a NUL byte",
            p.as_os_str()
        )));
    }
    Ok(())
}

/// The canonical form of `p`, whose last components may not exist yet: its longest
/// existing prefix with symlinks and `..` resolved, then the rest appended (a `..` in the
/// rest is taken lexically: nothing there exists to be a symlink). Relative paths are taken
/// from the working directory.
pub fn resolve(p: &Path) -> Result<PathBuf> {
    check_nul(p)?;
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::io(p, e))?
            .join(p)
    };
    // The components above the existing prefix, last first (`None` for `..`).
    let mut rest: Vec<Option<OsString>> = Vec::new();
    let mut base = abs.as_path();
    let mut out = loop {
        match base.canonicalize() {
            Ok(c) => break c,
            Err(e) => {
                let (Some(parent), Some(last)) = (base.parent(), base.components().next_back())
                else {
                    return Err(Error::io(p, e));
                };
                match last {
                    Component::ParentDir => rest.push(None),
                    Component::Normal(n) => rest.push(Some(n.to_owned())),
                    _ => {}
                }
                base = parent;
            }
        }
    };
    for c in rest.into_iter().rev() {
        match c {
            Some(n) => out.push(n),
            None => {
                out.pop();
            }
        }
    }
    Ok(out)
}

/// Whether `p` (which may not exist yet) is `dir` or lies inside it, symlinks and `..`
/// resolved on both sides.
pub fn is_inside(p: &Path, dir: &Path) -> Result<bool> {
    let dir = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
    Ok(resolve(p)?.starts_with(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_what_does_not_exist_yet() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("link")).unwrap();
        let r = |p: PathBuf| resolve(&p).unwrap();
        assert_eq!(r(root.join("a/new/x")), root.join("a/new/x"));
        assert_eq!(r(root.join("link/new")), root.join("a/new"));
        assert_eq!(r(root.join("a/../a/./new")), root.join("a/new"));
        assert_eq!(r(root.join("new/../other")), root.join("other"));
        assert!(is_inside(&root.join("link/x/y"), &root.join("a")).unwrap());
        assert!(is_inside(&root.join("a"), &root.join("link")).unwrap());
        assert!(!is_inside(&root.join("a/../b"), &root.join("a")).unwrap());
        assert!(!is_inside(&root.join("ab"), &root.join("a")).unwrap());
        let e = resolve(Path::new("/tmp/a\0b")).unwrap_err();
        assert!(e.is_input() && e.to_string().contains("NUL"), "{e}");
    }
}
