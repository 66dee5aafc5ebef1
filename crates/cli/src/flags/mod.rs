//! Command-line flags: only this binary parses arguments. Each module is clap's view of a
//! library's plain configuration struct and converts into it (ripgrep's
//! `crates/core/flags/` layout: libraries take plain config, the binary owns the flags).

pub mod config;
pub mod demo;
pub mod ingest;
pub mod keys;
pub mod load;
pub mod serve;
