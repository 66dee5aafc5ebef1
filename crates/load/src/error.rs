//! The one error type of the crate.

use std::path::PathBuf;

use crate::report::Report;

/// Everything `searchd load` can fail with.
///
/// Problems with the *target* (refused connections, garbage answers, timeouts)
/// are not errors: they are counted per kind in the report. An `Err` means the
/// run could not be set up (usage or input files), an output file could not be
/// written, or `--fail-on-slo` was given and no step passed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A flag value or a combination of flags that does not make sense.
    #[error("usage: {message}")]
    Usage {
        /// What is wrong.
        message: String,
    },

    /// A line of `--body-file` is not valid JSON (or is otherwise unusable).
    #[error("{}:{line}: {message}", path.display())]
    BodyFile {
        /// The body file.
        path: PathBuf,
        /// 1-based line number of the bad line.
        line: usize,
        /// What is wrong with it.
        message: String,
    },

    /// The `--gt` file could not be read or is malformed.
    #[error("{}: {message}", path.display())]
    GroundTruth {
        /// The ground-truth file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },

    /// Reading an input file failed.
    #[error("{}: {source}", path.display())]
    Input {
        /// The input file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },

    /// Writing `--json`, `--csv` or `--html` failed.
    #[error("cannot write {}: {source}", path.display())]
    Output {
        /// The output file.
        path: PathBuf,
        /// The write error.
        #[source]
        source: std::io::Error,
    },

    /// Drawing a chart for the HTML report failed.
    #[error("cannot draw chart {chart}: {message}")]
    Plot {
        /// Name of the chart.
        chart: String,
        /// The plotting error.
        message: String,
    },

    /// The tokio runtime for [`crate::run_blocking`] could not be built.
    #[error("cannot start the async runtime: {source}")]
    Runtime {
        /// The error building the runtime.
        #[source]
        source: std::io::Error,
    },

    /// The preflight could not connect to the target (nothing listens, bad host, no
    /// route): no load was sent.
    #[error("cannot reach {target}: {message} (is the server running? check --url)")]
    Unreachable {
        /// The target's base URL.
        target: String,
        /// The connection error.
        message: String,
    },

    /// The preflight's TLS handshake with an `https://` target failed: its certificate does
    /// not verify against `--ca` (or the system bundle), or it does not speak TLS. No load
    /// was sent.
    #[error("TLS handshake with {target} failed: {message} (check --ca: it must hold the CA that signed the server's certificate, whose names must include the --url host; and the server must speak https)")]
    Tls {
        /// The target's base URL.
        target: String,
        /// The handshake error.
        message: String,
    },

    /// The preflight request was refused with a 4xx answer: the run would only count
    /// errors. The message carries the server's answer.
    #[error("{message}")]
    Refused {
        /// The request's status and the server's answer.
        message: String,
    },

    /// `--fail-on-slo` was given and no step met the SLO. The full report is
    /// carried along so the caller can still print and write it.
    #[error("no step met the SLO (p99 <= {slo_p99_ms} ms, error rate <= {max_error_rate})")]
    SloFailed {
        /// The p99 latency bound of the SLO, ms.
        slo_p99_ms: f64,
        /// The error-rate bound of the SLO (0..=1).
        max_error_rate: f64,
        /// The full report of the run.
        report: Box<Report>,
    },
}

impl LoadError {
    /// Process exit status the CLI should use: 1 for `--fail-on-slo`, 2 for
    /// usage and input-file errors, 1 for anything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            LoadError::SloFailed { .. } => 1,
            LoadError::Usage { .. }
            | LoadError::Refused { .. }
            | LoadError::BodyFile { .. }
            | LoadError::GroundTruth { .. }
            | LoadError::Input { .. } => 2,
            _ => 1,
        }
    }

    /// The report carried by [`LoadError::SloFailed`], if any.
    pub fn report(&self) -> Option<&Report> {
        match self {
            LoadError::SloFailed { report, .. } => Some(report),
            _ => None,
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        LoadError::Usage {
            message: message.into(),
        }
    }
}
