//! `searchd demo`: the whole pipeline on built-in synthetic data, in one process: on
//! vectors with the local engine ([`vectors`]), with Qdrant as the engine ([`qdrant`]), or on
//! documents with the built-in embedder ([`text`]). [`common`] holds what they share.

mod common;
mod qdrant;
mod text;
mod vectors;

use crate::flags::demo::DemoArgs;
use crate::flags::serve::BackendKind;
use crate::util::CmdResult;

/// Run the demo `a` asks for.
pub fn demo(a: &DemoArgs) -> CmdResult {
    if a.backend == BackendKind::Qdrant {
        return qdrant::run(a);
    }
    if a.text {
        return text::run(a);
    }
    vectors::run(a)
}
