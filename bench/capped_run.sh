# Sourced by the capped benchmarks (partitioned_caps.sh, cold_warm.sh, caps_sweep.sh): one
# `searchd bench memory` run under a memory cgroup cap, its JSON and log beside each other.
#
#     capped_run OUT CAP_MB INDEX EF QUERIES GT [bench memory flags...]
#
# Writes OUT.json and OUT.log; prints the result row (and the cold line, with
# --cold-seconds) to stderr. Needs $S (the searchd binary) and log(); CAP_TIMEOUT (600 s)
# kills a run that does not finish.
capped_run() {
  local out=$1 cap=$2 index=$3 ef=$4 q=$5 gt=$6
  shift 6
  log "cap $cap MB: $(basename "$out")"
  $S bench memory --index "$index" --queries "$q" --gt "$gt" --limits-mb "$cap" --ef "$ef" \
      --min-seconds 10 --timeout-s "${CAP_TIMEOUT:-600}" --json "$out.json" "$@" \
      > "$out.log" 2>&1 || log "$(basename "$out") failed (see $out.log)"
  grep -E "cold:|^ +$cap " "$out.log" >&2 || true
}
