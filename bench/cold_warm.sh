#!/usr/bin/env bash
# The cold/warm protocol (issue "Indexes larger than memory", item 4) on the data of
# bench/partitioned_caps.sh: under the memory cgroup cap, the page cache dropped, the first
# COLD_S seconds after the index opens are searched on one thread and reported apart
# (`bench memory --cold-seconds`, `cold` in each row), then the warm figures as usual.
# Target: cold p99 <= 5x warm p99.
#
#     bash bench/cold_warm.sh [DATA_DIR] [OUT_PREFIX]
#
# DATA_DIR as bench/partitioned_caps.sh (run that first: it makes the data, the indexes and
# the Zipf / uniform query subsets). Results: bench/results/OUT_PREFIX-NAME.json
# (default cold-warm-synth1m). Knobs: CAP_MB (307), BUDGET (230MB), COLD_S (60), NPROBE (16),
# CAP_TIMEOUT (900 s).
set -euo pipefail
cd "$(dirname "$0")/.."
D=${1:-bench/data/synth1m-part}
OUT=bench/results/${2:-cold-warm-synth1m}
S=target/release/searchd
CAP_MB=${CAP_MB:-307}
BUDGET=${BUDGET:-230MB}
COLD_S=${COLD_S:-60}
NPROBE=${NPROBE:-16}
log() { echo "[$(date +%T)] $*" >&2; }
CAP_TIMEOUT=${CAP_TIMEOUT:-900}
. bench/capped_run.sh
run() { # name index ef queries gt extra...
  local name=$1
  shift
  capped_run "$OUT-$name" "$CAP_MB" "$@" --cold-seconds "$COLD_S"
}
for stream in zipf uniform; do
  if [ $stream = zipf ]; then q="$D/queries-z400.npy"; gt="$D/gt-z400.npy"; else q="$D/queries-u300.npy"; gt="$D/gt-u300.npy"; fi
  run "part256sq8-np$NPROBE-$stream" "$D/part256sq8" 64 "$q" "$gt" --nprobe "$NPROBE" --memory-budget "$BUDGET" --vectors disk
  run "sq8-disk-ef128-$stream" "$D/hnsw-sq8" 128 "$q" "$gt" --vectors disk --graph mmap --codes mmap
done
log done
