#!/usr/bin/env bash
# Server throughput over HTTP vs the engine in process, on one index and query file.
#
#   crates/server/examples/bench_http.sh INDEX_DIR QUERIES.npy [OUT_DIR]
#
# Needs wrk (Debian: apt-get install -y wrk) and the release examples:
#   cargo build --release -p searchd-server --example bench_engine && cargo build --release
# Env: CONCS="1 2 8 32 128 512" DURATION=10 EF=64 PORT=18090 SERVE_FLAGS="..." NQ=2000
# Each step waits (up to 60 s) for the machine to be idle first: server, wrk and the engine
# run share the cores, and other jobs on the box would otherwise be measured too.
set -euo pipefail
INDEX=$1; QUERIES=$2; OUT=${3:-/tmp/searchd-bench}
CONCS=${CONCS:-"1 2 8 32 128 512"}; DURATION=${DURATION:-10}; EF=${EF:-64}; PORT=${PORT:-18090}
BIN=${BIN:-target/release/examples}; SEARCHD=${SEARCHD:-target/release/searchd}
SCRIPT=$(dirname "$0")/qidx.lua
mkdir -p "$OUT"

idle_pct() { # CPU idle percentage over 1 s
  read -r _ a b c d e f g _ < /proc/stat; t1=$((a+b+c+d+e+f+g)); i1=$((d+e))
  sleep 1
  read -r _ a b c d e f g _ < /proc/stat; t2=$((a+b+c+d+e+f+g)); i2=$((d+e))
  echo $(( 100 * (i2 - i1) / (t2 - t1 + 1) ))
}
wait_quiet() {
  for _ in $(seq 60); do [ "$(idle_pct)" -ge 85 ] && return 0; done
  echo "warning: machine still busy ($(idle_pct)% idle)" >&2
}

wait_quiet
echo "engine: $("$BIN/bench_engine" /dev/null "$QUERIES" "$INDEX" "$EF" "$(nproc)" 5 2>/dev/null || true)"

"$SEARCHD" serve --index "$INDEX" --queries "$QUERIES" --addr "127.0.0.1:$PORT" --ef "$EF" \
  --populate ${SERVE_FLAGS:-} > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1 && break; sleep 0.1; done
wrk -t1 -c4 -d2s -s "$SCRIPT" "http://127.0.0.1:$PORT" > /dev/null # warm-up

printf "%6s %10s %10s %10s %10s %10s\n" conc req/s good/s p50_ms p99_ms non2xx
for c in $CONCS; do
  t=2; [ "$c" -lt 2 ] && t=1
  wait_quiet
  wrk -t$t -c"$c" -d"${DURATION}s" --timeout 10s --latency -s "$SCRIPT" "http://127.0.0.1:$PORT" > "$OUT/wrk-c$c.txt"
  rps=$(awk '/Requests\/sec/ {print $2}' "$OUT/wrk-c$c.txt")
  total=$(awk '/requests in/ {print $1}' "$OUT/wrk-c$c.txt")
  bad=$(awk '/Non-2xx/ {print $5}' "$OUT/wrk-c$c.txt"); bad=${bad:-0}
  good=$(awk -v r="$rps" -v t="$total" -v b="$bad" 'BEGIN { printf "%.0f", r * (t - b) / t }')
  p50=$(awk '$1 == "50%" {print $2}' "$OUT/wrk-c$c.txt")
  p99=$(awk '$1 == "99%" {print $2}' "$OUT/wrk-c$c.txt")
  printf "%6s %10s %10s %10s %10s %10s\n" "$c" "$rps" "$good" "$p50" "$p99" "$bad"
done
curl -s "http://127.0.0.1:$PORT/stats" > "$OUT/stats.json"
