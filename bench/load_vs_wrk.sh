#!/usr/bin/env bash
# Is the load generator ever the wall? Compare its request rate with wrk's
# against a trivial endpoint (GET /health -> 200 "ok") on loopback, same
# connection count, same duration, same box (server, wrk and the load
# generator share the cores: the honest same-box setup; nothing is pinned).
#
# Rounds alternate wrk and the load generator (which goes first alternates
# too) so background noise hits both; reported: the ratio of the medians and
# the median of the per-round ratios. Pass mark: ratio >= 0.80.
#
# Usage: bench/load_vs_wrk.sh            (env: CONNS=64 DURATION=10 ROUNDS=5
#                                          THREADS=2 SERVER_THREADS=2)
# Needs wrk (Debian: apt-get install -y wrk).
#
# TODO(cli): once `searchd load` is wired, replace LOADGEN below with
#   searchd load --url "$URL" --endpoint 'GET /health' --ramp "$CONNS" \
#     --warmup 2s --duration "${DURATION}s" --threads "$THREADS" --slo-p99-ms 1000000 --json "$J"
set -euo pipefail
cd "$(dirname "$0")/.."

CONNS=${CONNS:-64}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-2}
SERVER_THREADS=${SERVER_THREADS:-2}
PORT=${PORT:-18181}

command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 2; }

cargo build --release -q -p searchd-load --example hello_server --example loadgen_health
BIN=target/release/examples

"$BIN/hello_server" "127.0.0.1:$PORT" "$SERVER_THREADS" >/dev/null &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
URL="http://127.0.0.1:$PORT"
for _ in $(seq 50); do
  curl -sf "$URL/health" >/dev/null 2>&1 && break
  sleep 0.1
done

TMP=$(mktemp -d)
WRK=()
LG=()
run_wrk() {
  wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" "$URL/health" | awk '/Requests\/sec/ {print $2}'
}
run_lg() {
  local j="$TMP/lg.json"
  "$BIN/loadgen_health" --url "$URL" --connections "$CONNS" --warmup 2s \
    --duration "${DURATION}s" --threads "$THREADS" --json "$j" >/dev/null 2>&1
  python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['steps'][0]; print(round(s['rps'],1), s['requests']-s['ok'])" "$j"
}
for r in $(seq "$ROUNDS"); do
  if (( r % 2 )); then
    w=$(run_wrk); read -r l e < <(run_lg)
  else
    read -r l e < <(run_lg); w=$(run_wrk)
  fi
  echo "round $r: wrk ${w} req/s   searchd-load ${l} req/s (errors ${e})"
  WRK+=("$w")
  LG+=("$l")
done

python3 - "$CONNS" "$DURATION" "$THREADS" "${WRK[*]}" "${LG[*]}" <<'PY'
import statistics, sys
c, d, t = sys.argv[1:4]
w = [float(x) for x in sys.argv[4].split()]
l = [float(x) for x in sys.argv[5].split()]
mw, ml = statistics.median(w), statistics.median(l)
ratio = ml / mw
per_round = statistics.median(b / a for a, b in zip(w, l))
print(f"connections {c}, {d}s per run, {t} client threads, {len(w)} rounds")
print(f"wrk          median {mw:10.1f} req/s")
print(f"searchd-load median {ml:10.1f} req/s")
print(f"ratio of medians {ratio:.2f}, median per-round ratio {per_round:.2f} "
      f"({'PASS' if min(ratio, per_round) >= 0.8 else 'FAIL'}: need >= 0.80)")
PY
rm -rf "$TMP"
