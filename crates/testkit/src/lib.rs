//! Test support shared by the workspace's crates (not published).
//!
//! [`layering`]: a crate's module layering read from its source text: no import cycle
//! between its top-level modules, imports by module path, and no file over 1,000 lines.
//!
//! [`needs`]: what a test needs from the machine (the model, the Qdrant binary, namespaces):
//! a visible skip in a user's clone, a failure under `CI=true`, a ledger of what ran.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod layering;
pub mod needs;
