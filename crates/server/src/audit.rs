//! The audit log (`serve --audit-log FILE`): one JSON line per write, delete, snapshot,
//! reload or other change, and per request refused by the key gate or the `Host` check
//! (401, 403), with the time, the key's name (never the key), the peer, the method, the
//! route template, the collection and the status. Appended as each request ends, from the
//! key gate ([`crate::router`]); rotated by size (`FILE` → `FILE.1` → ... → `FILE.5`, the
//! oldest dropped). A line that cannot be written is counted in `/metrics`
//! (`searchd_audit_errors`) and logged, never failing the request.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::Serialize;

use crate::error::ServerError;

/// Old files kept beside the current one.
pub const KEEP: usize = 5;

/// One line of the audit log.
#[derive(Serialize)]
pub(crate) struct Entry<'a> {
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// The API key's name (`null` without keys or without a valid key).
    pub key: Option<&'a str>,
    pub peer: String,
    pub method: &'a str,
    /// The route template (`/collections/{name}/docs`), or the path when none matched.
    pub route: &'a str,
    pub collection: Option<&'a str>,
    pub status: u16,
    /// The error code of a refusal or failure (`unauthorized`, `forbidden`, ...).
    pub code: Option<&'a str>,
}

/// The open audit log.
pub(crate) struct Audit {
    path: PathBuf,
    max_bytes: u64,
    file: Mutex<(File, u64)>,
    /// Lines that could not be written.
    pub errors: AtomicU64,
    /// Lines written.
    pub lines: AtomicU64,
}

impl Audit {
    /// Open (append) or create the file; an error refuses the start.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Audit, ServerError> {
        let file = append(path)
            .map_err(|e| ServerError::Config(format!("--audit-log {}: {e}", path.display())))?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Audit {
            path: path.to_path_buf(),
            max_bytes,
            file: Mutex::new((file, len)),
            errors: AtomicU64::new(0),
            lines: AtomicU64::new(0),
        })
    }

    /// Append one line (rotating first when it would pass the size).
    pub fn record(&self, entry: &Entry<'_>) {
        let mut line = match serde_json::to_vec(entry) {
            Ok(l) => l,
            Err(_) => return,
        };
        line.push(b'\n');
        let mut f = self.file.lock();
        if f.1 > 0 && f.1 + line.len() as u64 > self.max_bytes {
            match self.rotate() {
                Ok(new) => *f = (new, 0),
                Err(e) => {
                    self.errors.fetch_add(1, Relaxed);
                    tracing::error!("--audit-log {}: cannot rotate: {e}", self.path.display());
                }
            }
        }
        match f.0.write_all(&line) {
            Ok(()) => {
                f.1 += line.len() as u64;
                self.lines.fetch_add(1, Relaxed);
            }
            Err(e) => {
                self.errors.fetch_add(1, Relaxed);
                tracing::error!("--audit-log {}: {e}", self.path.display());
            }
        }
    }

    fn rotate(&self) -> std::io::Result<File> {
        let name = |i: usize| {
            let mut p = self.path.clone().into_os_string();
            p.push(format!(".{i}"));
            PathBuf::from(p)
        };
        for i in (1..KEEP).rev() {
            let from = name(i);
            if from.exists() {
                std::fs::rename(&from, name(i + 1))?;
            }
        }
        std::fs::rename(&self.path, name(1))?;
        append(&self.path)
    }
}

fn append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Now as RFC 3339 UTC with milliseconds (`2026-12-05T14:03:07.123Z`).
pub(crate) fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs() as i64, d.subsec_millis())
}

fn rfc3339(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_796_479_387, 123), "2026-12-05T14:03:07.123Z");
    }

    #[test]
    fn lines_rotate_by_size_and_old_files_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.jsonl");
        let a = Audit::open(&p, 4096).unwrap();
        let e = Entry {
            time: now_rfc3339(),
            key: Some("ops"),
            peer: "127.0.0.1:5".into(),
            method: "POST",
            route: "/collections/{name}/docs",
            collection: Some("docs"),
            status: 200,
            code: None,
        };
        for _ in 0..1000 {
            a.record(&e);
        }
        assert_eq!(a.lines.load(Relaxed), 1000);
        assert_eq!(a.errors.load(Relaxed), 0);
        for i in 1..=KEEP {
            let old = dir.path().join(format!("audit.jsonl.{i}"));
            assert!(std::fs::metadata(&old).unwrap().len() <= 4096, "{i}");
        }
        assert!(!dir
            .path()
            .join(format!("audit.jsonl.{}", KEEP + 1))
            .exists());
        let text = std::fs::read_to_string(&p).unwrap();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["key"], "ops");
            assert_eq!(v["status"], 200);
        }
    }
}
