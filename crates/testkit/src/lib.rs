//! Test support shared by the workspace's crates (not published).
//!
//! [`layering`]: a crate's module layering read from its source text: no import cycle
//! between its top-level modules, imports by module path, and no file over 1,000 lines.

pub mod layering;
