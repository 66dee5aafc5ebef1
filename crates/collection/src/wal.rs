//! The write-ahead log of a live collection: `DIR/wal/FIRSTSEQ.log` files of records
//!
//! ```text
//! file:   "SDWAL001" record*
//! record: len u32 LE | crc32 u32 LE (of seq and payload) | seq u64 LE | payload (len bytes)
//! ```
//!
//! Sequence numbers are consecutive across files; a file's name is the sequence number of
//! its first record. A torn or corrupt record (short, bad checksum, out of sequence) ends
//! the log: start-up cuts the file there, reports it, and moves any later files aside
//! (`wal/corrupt-*`) since applying them after a gap would reorder operations.
//!
//! Continuity: the log must start at or before the manifest's `wal_seq + 1` (a first file
//! deleted by hand would otherwise skip acknowledged operations silently), and `wal/LAST`
//! names the newest file (rewritten at each rotation), so a deleted newest file is found
//! too. Either gap fails the open with an error naming what is missing ([`Error::Format`]):
//! the operations in it were acknowledged and are gone, which no cut may hide. A newest file
//! cut short at a record boundary cannot be told from one a killed process stopped writing.
//!
//! Durability ([`Fsync`]): an appended record is in the kernel's page cache before
//! [`Wal::append`] returns, so it survives the process being killed (`kill -9`). With
//! [`Fsync::Always`] the append also `fdatasync`s; with [`Fsync::Group`] the caller calls
//! [`GroupSync::wait`] after releasing the writer lock, and one sync covers every writer
//! that appended before it started (group commit). Both survive power loss.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::{Error, Result};
use crate::files::sync_dir;

const MAGIC: &[u8; 8] = b"SDWAL001";
const HEADER: u64 = 8;
const RECORD_HEADER: usize = 16;
/// Largest payload a record may have (a batch of documents).
pub const MAX_RECORD: usize = 256 << 20;
/// A log file is closed and a new one started once it passes this size.
pub const FILE_BYTES: u64 = 64 << 20;

/// When an acknowledged write is synced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// Written to the log (the page cache) before the reply: survives `kill -9`, not power
    /// loss. The default.
    #[default]
    None,
    /// `fdatasync` of the log before each reply.
    Always,
    /// One `fdatasync` shared by the writers waiting at the same time.
    Group,
}

impl Fsync {
    /// Parses a setting (`none`/`off`, `always`, `group`); `None` for anything else.
    pub fn parse(s: &str) -> Option<Fsync> {
        match s {
            "none" | "off" => Some(Fsync::None),
            "always" => Some(Fsync::Always),
            "group" => Some(Fsync::Group),
            _ => None,
        }
    }
    /// The setting's name, as [`Fsync::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Fsync::None => "none",
            Fsync::Always => "always",
            Fsync::Group => "group",
        }
    }
}

/// What start-up found in the log.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Recovery {
    /// Log files found.
    pub files: usize,
    /// Records read (including those already in the segments).
    pub records: u64,
    /// Records after the manifest's `wal_seq`, handed back to be applied again.
    pub replayed: u64,
    /// Where the log was cut, and why (a torn write of a killed process, or corruption).
    pub cut: Option<String>,
    /// Files moved aside after a cut in an earlier file.
    pub moved_aside: Vec<PathBuf>,
}

/// Records handed back at open: (sequence number, payload).
pub type Replay = Vec<(u64, Vec<u8>)>;

struct LogFile {
    first: u64,
    path: PathBuf,
}

/// The open log (owned by the collection's writer, behind its lock).
pub struct Wal {
    dir: PathBuf,
    files: Vec<LogFile>,
    file: Arc<File>,
    len: u64,
    next_seq: u64,
    fsync: Fsync,
    group: Arc<GroupSync>,
    read_only: bool,
}

fn log_name(first: u64) -> String {
    format!("{first:020}.log")
}

/// The file naming the newest log file.
const LAST: &str = "LAST";

/// Record `first`'s file as the newest (temp file and rename; the caller syncs the dir).
fn write_last(dir: &Path, first: u64) -> Result<()> {
    let p = dir.join(LAST);
    let tmp = dir.join("LAST.tmp");
    {
        let f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all_at(format!("{}\n", log_name(first)).as_bytes(), 0)
            .and_then(|_| f.sync_all())
            .map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::rename(&tmp, &p).map_err(|e| Error::io(&p, e))
}

/// The first sequence number of the newest file as `wal/LAST` names it (None: no such
/// file, from a log written before it).
fn read_last(dir: &Path) -> Option<u64> {
    let t = std::fs::read_to_string(dir.join(LAST)).ok()?;
    t.trim().strip_suffix(".log")?.parse().ok()
}

fn list(dir: &Path) -> Result<Vec<LogFile>> {
    let mut files = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for e in rd {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".log") {
            if let Ok(first) = stem.parse::<u64>() {
                files.push(LogFile {
                    first,
                    path: e.path(),
                });
            }
        }
    }
    files.sort_by_key(|f| f.first);
    Ok(files)
}

/// Encode one record.
fn record(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(RECORD_HEADER + payload.len());
    b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    b.extend_from_slice(&h.finalize().to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

/// Parse the records of one file: the good ones, and where (and why) parsing stopped
/// early, if it did.
fn parse(bytes: &[u8], expect_first: u64) -> (Replay, u64, Option<String>) {
    if bytes.len() < HEADER as usize || &bytes[..8] != MAGIC {
        return (
            Vec::new(),
            0,
            Some("the file header is missing or wrong".into()),
        );
    }
    let mut out = Vec::new();
    let mut at = HEADER as usize;
    let mut want = expect_first;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < RECORD_HEADER {
            return (
                out,
                at as u64,
                Some(format!("a torn record header at byte {at}")),
            );
        }
        let len = u32::from_le_bytes(rest[..4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().unwrap_or_default());
        let seq = u64::from_le_bytes(rest[8..16].try_into().unwrap_or_default());
        if len > MAX_RECORD || rest.len() < RECORD_HEADER + len {
            return (out, at as u64, Some(format!("a torn record at byte {at}")));
        }
        let payload = &rest[RECORD_HEADER..RECORD_HEADER + len];
        let mut h = crc32fast::Hasher::new();
        h.update(&seq.to_le_bytes());
        h.update(payload);
        if h.finalize() != crc {
            return (
                out,
                at as u64,
                Some(format!("a record with a bad checksum at byte {at}")),
            );
        }
        if seq != want {
            return (
                out,
                at as u64,
                Some(format!(
                    "record at byte {at} has sequence number {seq}, expected {want}"
                )),
            );
        }
        out.push((seq, payload.to_vec()));
        want += 1;
        at += RECORD_HEADER + len;
    }
    (out, at as u64, None)
}

impl Wal {
    /// Open (or create) the log in `dir`, returning the records after `after` to apply
    /// again. With `read_only` nothing is cut, moved or created.
    pub fn open(
        dir: &Path,
        after: u64,
        fsync: Fsync,
        read_only: bool,
    ) -> Result<(Wal, Replay, Recovery)> {
        if !read_only {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let mut files = list(dir)?;
        let mut rec = Recovery {
            files: files.len(),
            ..Recovery::default()
        };
        let mut replay = Vec::new();
        let mut next = None::<u64>;
        let mut keep = files.len();
        for (i, f) in files.iter().enumerate() {
            let bytes = std::fs::read(&f.path).map_err(|e| Error::io(&f.path, e))?;
            let (records, good, problem) = parse(&bytes, f.first);
            if let Some(n) = next {
                if f.first != n && !records.is_empty() {
                    rec.cut = Some(format!(
                        "{}: starts at sequence number {}, the previous file ended before {n}",
                        f.path.display(),
                        f.first
                    ));
                    keep = i;
                    break;
                }
            }
            rec.records += records.len() as u64;
            next = Some(f.first + records.len() as u64);
            for r in records {
                if r.0 > after {
                    replay.push(r);
                }
            }
            if let Some(p) = problem {
                rec.cut = Some(format!(
                    "{}: {p}; the log is cut there (byte {good})",
                    f.path.display()
                ));
                if !read_only {
                    if good < HEADER {
                        // Not even a header: rewrite one so the file can take appends.
                        std::fs::write(&f.path, MAGIC).map_err(|e| Error::io(&f.path, e))?;
                    } else {
                        let file = std::fs::OpenOptions::new()
                            .write(true)
                            .open(&f.path)
                            .map_err(|e| Error::io(&f.path, e))?;
                        file.set_len(good).map_err(|e| Error::io(&f.path, e))?;
                        file.sync_all().map_err(|e| Error::io(&f.path, e))?;
                    }
                }
                keep = i + 1;
                break;
            }
        }
        if keep < files.len() {
            if !read_only {
                let aside = dir.join(format!("corrupt-{}", std::process::id()));
                std::fs::create_dir_all(&aside).map_err(|e| Error::io(&aside, e))?;
                for f in &files[keep..] {
                    let to = aside.join(f.path.file_name().unwrap_or_default());
                    std::fs::rename(&f.path, &to).map_err(|e| Error::io(&f.path, e))?;
                    rec.moved_aside.push(to);
                }
            }
            files.truncate(keep);
        }
        // Continuity with the manifest: the first file must start at or before the first
        // operation not in the segments.
        if let Some(f) = files.first() {
            if f.first > after + 1 {
                return Err(Error::format(
                    &f.path,
                    format!(
                        "the write-ahead log starts at operation {}, but the collection's segments hold operations up to {after} only: \
                         operations {}..={} are missing (a log file was deleted or lost); restore the collection from a snapshot",
                        f.first,
                        after + 1,
                        f.first - 1
                    ),
                ));
            }
        }
        // The newest file `LAST` names must be there (unless a cut moved it aside).
        if let Some(last) = read_last(dir) {
            let end = next.unwrap_or(after + 1);
            let named = files.iter().any(|f| f.first == last);
            if !named && rec.moved_aside.is_empty() {
                return Err(Error::format(
                    dir.join(log_name(last)),
                    format!(
                        "the write-ahead log's newest file is missing (wal/LAST names it; the files left end at operation {}): \
                         the acknowledged operations it held are lost; restore the collection from a snapshot",
                        end.saturating_sub(1)
                    ),
                ));
            }
        }
        rec.replayed = replay.len() as u64;
        let next_seq = next.unwrap_or(after + 1).max(after + 1);
        let (file, len) = match files.last() {
            Some(last) if !read_only && next.is_some_and(|n| n > after) => {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&last.path)
                    .map_err(|e| Error::io(&last.path, e))?;
                let len = f.metadata().map_err(|e| Error::io(&last.path, e))?.len();
                (f, len)
            }
            _ if read_only => {
                let p = dir.join(".read-only");
                (
                    File::open("/dev/null").map_err(|e| Error::io(p, e))?,
                    HEADER,
                )
            }
            _ => {
                // Every record of the files left is in the segments already. The new file
                // (and `LAST` naming it) comes first, so a kill in between leaves a log
                // that still passes the continuity checks.
                let path = dir.join(log_name(next_seq));
                let f = create_log(&path)?;
                write_last(dir, next_seq)?;
                sync_dir(dir);
                for f in files.drain(..) {
                    std::fs::remove_file(&f.path).map_err(|e| Error::io(&f.path, e))?;
                }
                files.push(LogFile {
                    first: next_seq,
                    path,
                });
                (f, HEADER)
            }
        };
        if !read_only {
            if let Some(f) = files.last() {
                if read_last(dir) != Some(f.first) {
                    // Best effort: a start on a full disk must still serve reads; a
                    // missing LAST only skips one check at the next start.
                    match write_last(dir, f.first) {
                        Ok(()) => sync_dir(dir),
                        Err(e) => {
                            tracing::warn!(error = %e, "could not record the newest log file")
                        }
                    }
                }
            }
        }
        let file = Arc::new(file);
        let wal = Wal {
            dir: dir.to_path_buf(),
            files,
            file: file.clone(),
            len,
            next_seq,
            fsync,
            group: Arc::new(GroupSync::new(file, next_seq - 1)),
            read_only,
        };
        Ok((wal, replay, rec))
    }

    /// The sequence number the next append gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
    /// When appends are synced to disk.
    pub fn fsync(&self) -> Fsync {
        self.fsync
    }
    /// The group-commit syncer ([`Fsync::Group`]): wait on it after releasing the lock.
    pub fn group(&self) -> Arc<GroupSync> {
        self.group.clone()
    }
    /// Bytes of all log files.
    pub fn bytes(&self) -> u64 {
        self.files
            .iter()
            .map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len()))
            .sum()
    }
    /// Number of log files.
    pub fn files(&self) -> usize {
        self.files.len()
    }

    /// Append one record and return its sequence number. On failure (a full disk) the file
    /// is cut back to where it was, so a failed append leaves no partial record, and the
    /// sequence number is not used.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64> {
        if self.read_only {
            return Err(Error::ReadOnly(
                "the collection is open read-only".to_string(),
            ));
        }
        if payload.len() > MAX_RECORD {
            return Err(Error::Input(format!(
                "a write of {} bytes is over the log's record limit of {MAX_RECORD}",
                payload.len()
            )));
        }
        if self.len >= FILE_BYTES {
            self.rotate()?;
        }
        let seq = self.next_seq;
        let rec = record(seq, payload);
        let path = &self
            .files
            .last()
            .map(|f| f.path.clone())
            .unwrap_or_default();
        if let Err(e) = self.file.write_all_at(&rec, self.len) {
            let _ = self.file.set_len(self.len);
            return Err(Error::io(path, e));
        }
        if self.fsync == Fsync::Always {
            if let Err(e) = self.file.sync_data() {
                let _ = self.file.set_len(self.len);
                return Err(Error::io(path, e));
            }
        }
        self.len += rec.len() as u64;
        self.next_seq += 1;
        self.group.appended(seq);
        crate::failpoint::hit("wal.after_append");
        Ok(seq)
    }

    /// Start a new log file (the old one synced first, so group syncs of the new file
    /// cover everything before it).
    fn rotate(&mut self) -> Result<()> {
        let cur = self
            .files
            .last()
            .map(|f| f.path.clone())
            .unwrap_or_default();
        self.file.sync_data().map_err(|e| Error::io(&cur, e))?;
        let path = self.dir.join(log_name(self.next_seq));
        let f = Arc::new(create_log(&path)?);
        write_last(&self.dir, self.next_seq)?;
        sync_dir(&self.dir);
        self.files.push(LogFile {
            first: self.next_seq,
            path,
        });
        self.file = f.clone();
        self.len = HEADER;
        self.group.switch(f);
        crate::failpoint::hit("wal.after_rotate");
        Ok(())
    }

    /// Drop the log files whose records are all at or before `seq` (they are in committed
    /// segments). The current file is rotated first when all of it is.
    pub fn truncate_through(&mut self, seq: u64) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        if self.len > HEADER && self.next_seq - 1 <= seq {
            self.rotate()?;
        }
        while self.files.len() > 1 && self.files[1].first <= seq + 1 {
            let f = self.files.remove(0);
            std::fs::remove_file(&f.path).map_err(|e| Error::io(&f.path, e))?;
        }
        Ok(())
    }

    /// The log files and the byte length of the current one, for a snapshot: copying each
    /// file (the last up to `len`) gives a log that ends at a record boundary.
    pub fn extent(&self) -> (Vec<PathBuf>, u64) {
        (
            self.files.iter().map(|f| f.path.clone()).collect(),
            self.len,
        )
    }
}

fn create_log(path: &Path) -> Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    f.write_all_at(MAGIC, 0).map_err(|e| Error::io(path, e))?;
    f.sync_all().map_err(|e| Error::io(path, e))?;
    Ok(f)
}

/// Group commit: writers wait here for a sync that covers their record; one of them runs
/// it for all.
pub struct GroupSync {
    state: Mutex<GroupState>,
    cv: Condvar,
}

struct GroupState {
    file: Arc<File>,
    appended: u64,
    synced: u64,
    syncing: bool,
    syncs: u64,
}

impl GroupSync {
    fn new(file: Arc<File>, last: u64) -> GroupSync {
        GroupSync {
            state: Mutex::new(GroupState {
                file,
                appended: last,
                synced: last,
                syncing: false,
                syncs: 0,
            }),
            cv: Condvar::new(),
        }
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, GroupState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn appended(&self, seq: u64) {
        let mut g = self.lock();
        g.appended = g.appended.max(seq);
    }
    fn switch(&self, file: Arc<File>) {
        // Everything before the new file was synced by the rotation.
        let mut g = self.lock();
        g.synced = g.synced.max(g.appended);
        g.file = file;
    }
    /// Syncs run so far.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }
    /// Return once record `seq` is synced.
    pub fn wait(&self, seq: u64) -> std::io::Result<()> {
        let mut g = self.lock();
        loop {
            if g.synced >= seq {
                return Ok(());
            }
            if !g.syncing {
                g.syncing = true;
                let target = g.appended;
                let file = g.file.clone();
                drop(g);
                let r = file.sync_data();
                g = self.lock();
                g.syncing = false;
                if r.is_ok() {
                    g.synced = g.synced.max(target);
                    g.syncs += 1;
                }
                self.cv.notify_all();
                r?;
                continue;
            }
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_reopen_replay_and_cut_a_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        let (mut w, replay, rec) = Wal::open(&dir, 0, Fsync::None, false).unwrap();
        assert!(replay.is_empty());
        assert_eq!(rec.records, 0);
        for i in 0..10u8 {
            assert_eq!(w.append(&[i; 5]).unwrap(), i as u64 + 1);
        }
        drop(w);
        let (w, replay, rec) = Wal::open(&dir, 4, Fsync::None, false).unwrap();
        assert_eq!(rec.records, 10);
        assert_eq!(replay.len(), 6);
        assert_eq!(replay[0], (5, vec![4u8; 5]));
        assert_eq!(w.next_seq(), 11);
        drop(w);
        // A torn last record: the file is cut at the last good one.
        let f = list(&dir).unwrap().pop().unwrap().path;
        let len = std::fs::metadata(&f).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        file.set_len(len - 3).unwrap();
        drop(file);
        let (mut w, replay, rec) = Wal::open(&dir, 0, Fsync::None, false).unwrap();
        assert_eq!(replay.len(), 9);
        assert!(rec.cut.as_deref().unwrap().contains("torn"), "{rec:?}");
        assert_eq!(w.append(b"x").unwrap(), 10);
        drop(w);
        let (_, replay, rec) = Wal::open(&dir, 0, Fsync::Group, false).unwrap();
        assert_eq!(replay.len(), 10);
        assert!(rec.cut.is_none());
        assert_eq!(replay[9], (10, b"x".to_vec()));
    }

    #[test]
    fn a_flipped_byte_cuts_the_log_there() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        let (mut w, _, _) = Wal::open(&dir, 0, Fsync::Always, false).unwrap();
        for i in 0..5u8 {
            w.append(&[i; 100]).unwrap();
        }
        drop(w);
        let f = list(&dir).unwrap().pop().unwrap().path;
        let mut b = std::fs::read(&f).unwrap();
        let third = 8 + 2 * (16 + 100) + 20;
        b[third] ^= 0xff;
        std::fs::write(&f, &b).unwrap();
        let (_, replay, rec) = Wal::open(&dir, 0, Fsync::None, false).unwrap();
        assert_eq!(replay.len(), 2);
        assert!(rec.cut.unwrap().contains("checksum"));
    }

    #[test]
    fn truncation_drops_committed_files_and_group_sync_covers_writers() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        let (mut w, _, _) = Wal::open(&dir, 0, Fsync::Group, false).unwrap();
        for _ in 0..3 {
            w.append(b"abc").unwrap();
        }
        w.truncate_through(3).unwrap();
        assert_eq!(w.files(), 1);
        let s = w.append(b"d").unwrap();
        assert_eq!(s, 4);
        w.group().wait(s).unwrap();
        assert!(w.group().syncs() >= 1);
        drop(w);
        let (_, replay, _) = Wal::open(&dir, 3, Fsync::None, false).unwrap();
        assert_eq!(replay, vec![(4, b"d".to_vec())]);
    }

    /// Two files: records 1..=3 in the first, 4..=5 in the second.
    fn two_files(dir: &Path) {
        let (mut w, _, _) = Wal::open(dir, 0, Fsync::None, false).unwrap();
        for _ in 0..3 {
            w.append(b"abc").unwrap();
        }
        w.rotate().unwrap();
        for _ in 0..2 {
            w.append(b"de").unwrap();
        }
    }

    #[test]
    fn a_deleted_first_file_is_a_gap_not_a_silent_skip() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        two_files(&dir);
        std::fs::remove_file(dir.join(log_name(1))).unwrap();
        // The segments hold operations up to 1: 2 and 3 are gone.
        let e = Wal::open(&dir, 1, Fsync::None, false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("operations 2..=3 are missing"), "{e}");
        // Up to 3 in the segments: nothing is missing.
        let (_, replay, rec) = Wal::open(&dir, 3, Fsync::None, false).unwrap();
        assert_eq!(replay.len(), 2);
        assert!(rec.cut.is_none());
    }

    #[test]
    fn a_deleted_newest_file_is_found_through_last() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        two_files(&dir);
        std::fs::remove_file(dir.join(log_name(4))).unwrap();
        let e = Wal::open(&dir, 0, Fsync::None, false)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("newest file is missing"), "{e}");
        assert!(e.contains(&log_name(4)), "{e}");
    }

    #[test]
    fn a_middle_file_cut_at_a_record_boundary_is_reported() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("wal");
        two_files(&dir);
        // Drop the last record of the first file, at its boundary.
        let f = dir.join(log_name(1));
        let len = std::fs::metadata(&f).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        file.set_len(len - (16 + 3)).unwrap();
        drop(file);
        let (_, replay, rec) = Wal::open(&dir, 0, Fsync::None, false).unwrap();
        assert_eq!(replay.len(), 2);
        let cut = rec.cut.unwrap();
        assert!(cut.contains("starts at sequence number 4"), "{cut}");
        assert_eq!(rec.moved_aside.len(), 1);
        // The log goes on from the cut, and the next open is clean.
        drop(Wal::open(&dir, 0, Fsync::None, false).unwrap());
        let (_, _, rec) = Wal::open(&dir, 0, Fsync::None, false).unwrap();
        assert!(rec.cut.is_none(), "{rec:?}");
    }
}
