//! How the load generator's clients behave (`--retry-after`, `--cache`): plain values the
//! run's configuration and its report both name.

/// Client behaviour after `503`/`429` (see `--retry-after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RetryAfter {
    /// Send the next request at once (a client that never backs off).
    Ignore,
    /// Wait the answer's `Retry-After` first (a well-behaved client).
    Honor,
}

/// `--cache`: what the run is labelled as measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// A unique `nonce` query parameter on every request: no answer can come from a cache.
    Cold,
    /// Requests sent as they are: repeated ones may be served from a cache.
    Warm,
}
