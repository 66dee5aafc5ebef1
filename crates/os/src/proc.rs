//! `/proc/PID/stat` and `/proc/PID/status`, read and parsed in one place (Linux; `None`
//! elsewhere or when the process or thread is gone).

/// Whose figures to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Of {
    /// This process (`/proc/self`).
    This,
    /// Another process (`/proc/PID`).
    Process(u32),
    /// One of this process's threads, by kernel id (`/proc/self/task/TID`).
    Thread(i32),
}

impl Of {
    fn dir(self) -> String {
        match self {
            Of::This => "/proc/self".to_string(),
            Of::Process(pid) => format!("/proc/{pid}"),
            Of::Thread(tid) => format!("/proc/self/task/{tid}"),
        }
    }
}

/// The figures searchd uses from `/proc/PID/stat` (see proc(5)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stat {
    /// Minor page faults (field 10).
    pub minor_faults: u64,
    /// Major page faults, each a read from disk (field 12).
    pub major_faults: u64,
    /// User CPU time in clock ticks (field 14).
    pub utime_ticks: u64,
    /// System CPU time in clock ticks (field 15).
    pub stime_ticks: u64,
    /// Nice value (field 19).
    pub nice: i64,
    /// Threads of the process (field 20).
    pub threads: u64,
    /// Resident set in pages (field 24).
    pub rss_pages: u64,
}

impl Stat {
    /// Parse the text of a `stat` file. The command name (field 2) is in parentheses and
    /// may hold spaces and parentheses itself: the fields after it start after the last `)`.
    pub fn parse(text: &str) -> Option<Stat> {
        let rest = &text[text.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] is field 3 (state).
        let u = |field: usize| f.get(field - 3)?.parse::<u64>().ok();
        Some(Stat {
            minor_faults: u(10)?,
            major_faults: u(12)?,
            utime_ticks: u(14)?,
            stime_ticks: u(15)?,
            nice: f.get(19 - 3)?.parse().ok()?,
            threads: u(20)?,
            rss_pages: u(24)?,
        })
    }

    /// User + system CPU seconds.
    pub fn cpu_seconds(&self) -> f64 {
        (self.utime_ticks + self.stime_ticks) as f64 / crate::clock_ticks()
    }
}

/// The memory figures of `/proc/PID/status`, in bytes; `None` for a line the kernel did
/// not write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Resident set now (`VmRSS`).
    pub rss_bytes: Option<u64>,
    /// Peak resident set (`VmHWM`).
    pub peak_rss_bytes: Option<u64>,
    /// Anonymous part of the resident set (`RssAnon`).
    pub rss_anon_bytes: Option<u64>,
    /// File-backed part of the resident set (`RssFile`).
    pub rss_file_bytes: Option<u64>,
}

impl Status {
    /// Parse the text of a `status` file.
    pub fn parse(text: &str) -> Status {
        let kb = |name: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|k| k * 1024)
        };
        Status {
            rss_bytes: kb("VmRSS"),
            peak_rss_bytes: kb("VmHWM"),
            rss_anon_bytes: kb("RssAnon"),
            rss_file_bytes: kb("RssFile"),
        }
    }
}

/// `of`'s `stat` file, parsed.
pub fn stat(of: Of) -> Option<Stat> {
    Stat::parse(&std::fs::read_to_string(format!("{}/stat", of.dir())).ok()?)
}

/// `of`'s `status` file, parsed.
pub fn status(of: Of) -> Option<Status> {
    Some(Status::parse(
        &std::fs::read_to_string(format!("{}/status", of.dir())).ok()?,
    ))
}

/// Whether process `pid` may be alive: on Linux, whether its `/proc` directory exists;
/// elsewhere always `true` (so a caller cleaning up after dead processes removes nothing).
pub fn alive(pid: u32) -> bool {
    !cfg!(target_os = "linux") || std::path::Path::new(&Of::Process(pid).dir()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_come_after_the_last_parenthesis() {
        // A command name with spaces and a parenthesis of its own.
        let line = "42 (a b) c) S 1 42 42 0 -1 4194560 1234 0 56 0 700 300 0 0 20 5 9 0 \
                    100 2000000 333 18446744073709551615";
        let s = Stat::parse(line).unwrap();
        assert_eq!(
            s,
            Stat {
                minor_faults: 1234,
                major_faults: 56,
                utime_ticks: 700,
                stime_ticks: 300,
                nice: 5,
                threads: 9,
                rss_pages: 333,
            }
        );
        assert!(Stat::parse("42 (x) S 1").is_none());
        assert!(Stat::parse("no parenthesis").is_none());
    }

    #[test]
    fn status_reads_kilobyte_lines() {
        let text = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t512 kB\n";
        let s = Status::parse(text);
        assert_eq!(s.rss_bytes, Some(1024 * 1024));
        assert_eq!(s.peak_rss_bytes, Some(2048 * 1024));
        assert_eq!(s.rss_anon_bytes, Some(512 * 1024));
        assert_eq!(s.rss_file_bytes, None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads() {
        let s = stat(Of::This).unwrap();
        assert!(s.threads >= 1 && s.rss_pages > 0);
        let st = status(Of::This).unwrap();
        assert!(st.rss_bytes.unwrap() > 0);
        assert!(st.peak_rss_bytes.unwrap() >= st.rss_bytes.unwrap());
        assert!(alive(std::process::id()));
        assert!(stat(Of::Thread(crate::gettid().unwrap())).is_some());
    }
}
