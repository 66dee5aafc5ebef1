#!/usr/bin/env bash
# The long crash loop: `crates/cli/tests/crash_loop.rs` `long` (random SIGKILLs under
# continuous writes with merges, plus kills at every named failpoint), its report in
# bench/results/crash-loop-v2.json. Knobs (environment): SEARCHD_CRASH_KILLS (500),
# SEARCHD_CRASH_FAILPOINT_KILLS (20), SEARCHD_CRASH_DOCS (20000), SEARCHD_CRASH_DIM (384),
# SEARCHD_CRASH_FLAT_MAX (1000), SEARCHD_CRASH_SEED. PROFILE=release for a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${SEARCHD_CRASH_OUT:-$PWD/bench/results/crash-loop-v2.json}"
profile=()
[ "${PROFILE:-}" = release ] && profile=(--release)
SEARCHD_CRASH_OUT="$out" cargo test "${profile[@]}" -p searchd --test crash_loop long -- --ignored --nocapture
