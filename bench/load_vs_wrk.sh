#!/usr/bin/env bash
# Is the load generator ever the wall? `searchd load --endpoint 'GET /health'` against wrk,
# on the same trivial endpoint of a real `searchd serve` (a tiny flat index, --io-threads 2),
# on loopback, same connection count, same duration, same box (server, wrk and searchd load
# share the cores: the honest same-box setup; nothing is pinned). A client that burns more
# CPU per request leaves less to the server, so the ratio measures the client's cost.
#
# Rounds alternate wrk and searchd load (which goes first alternates too) so background
# noise hits both; reported: the ratio of the medians and the median of per-round ratios.
# Pass mark: both >= 0.80. Writes bench/results/load-vs-wrk.{json,md}.
#
# Usage: bash bench/load_vs_wrk.sh   (env: CONNS=64 DURATION=10 ROUNDS=5 THREADS=2
#                                     SEARCHD=target/release/searchd
#                                     LOAD="$SEARCHD load", the load lab under test, e.g.
#                                     target/release/examples/load)
# Needs wrk (Debian: apt-get install -y wrk). Exit 0 pass, 1 miss, 2 setup error.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNS=${CONNS:-64}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-2}
SEARCHD=${SEARCHD:-target/release/searchd}
LOAD=${LOAD:-$SEARCHD load}
command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 2; }
[ -x "$SEARCHD" ] || { echo "$SEARCHD not found: cargo build --release" >&2; exit 2; }

TMP=$(mktemp -d)
SERVER=""
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

"$SEARCHD" dataset synth --n 1000 --dim 16 --queries 10 --out "$TMP/data" >/dev/null 2>&1
"$SEARCHD" build --base "$TMP/data/base.npy" --out "$TMP/idx" --index flat >/dev/null 2>&1
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
"$SEARCHD" serve --index "$TMP/idx" --addr "127.0.0.1:$PORT" --io-threads 2 >"$TMP/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do
  curl -sf "$URL/health" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "$URL/health" >/dev/null || { echo "server did not start: $(cat "$TMP/serve.log")" >&2; exit 2; }

run_wrk() {
  wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" "$URL/health" >"$TMP/wrk.txt"
  awk '/Requests\/sec/ {print $2}' "$TMP/wrk.txt"
}
run_lg() {
  local j="$TMP/lg.json"
  $LOAD --url "$URL" --endpoint 'GET /health' --ramp "$CONNS" --warmup 2s \
    --duration "${DURATION}s" --threads "$THREADS" --slo-p99-ms 1000000 --quiet --json "$j" >/dev/null
  python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['steps'][0]; print(round(s['rps'],1), s['requests']-s['ok'], round(s['client_cpu_pct']))" "$j"
}
WRK=() LG=() LGE=() LGC=()
for r in $(seq "$ROUNDS"); do
  if (( r % 2 )); then
    w=$(run_wrk); read -r l e c < <(run_lg)
  else
    read -r l e c < <(run_lg); w=$(run_wrk)
  fi
  echo "round $r: wrk ${w} req/s   searchd load ${l} req/s (errors ${e}, client CPU ${c}%)"
  WRK+=("$w") LG+=("$l") LGE+=("$e") LGC+=("$c")
done

python3 - "$CONNS" "$DURATION" "$THREADS" "${WRK[*]}" "${LG[*]}" "${LGE[*]}" "${LGC[*]}" \
  "$("$SEARCHD" --version)" "$(wrk -v 2>&1 | head -1)" <<'PY'
import json, os, statistics, sys, time
c, d, t = (int(x) for x in sys.argv[1:4])
w = [float(x) for x in sys.argv[4].split()]
l = [float(x) for x in sys.argv[5].split()]
errs = [int(x) for x in sys.argv[6].split()]
cpu = [float(x) for x in sys.argv[7].split()]
mw, ml = statistics.median(w), statistics.median(l)
ratio = ml / mw
per_round = statistics.median(b / a for a, b in zip(w, l))
ok = min(ratio, per_round) >= 0.8 and sum(errs) == 0
res = {"schema": "searchd.bench.load_vs_wrk.v1", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
       "searchd": sys.argv[8], "wrk": sys.argv[9], "nproc": os.cpu_count(),
       "loadavg_end": os.getloadavg(), "connections": c, "duration_s": d, "client_threads": t,
       "server": "searchd serve --io-threads 2, GET /health", "rounds": {"wrk_rps": w,
       "searchd_load_rps": l, "searchd_load_errors": errs, "searchd_load_client_cpu_pct": cpu},
       "median_wrk_rps": mw, "median_searchd_load_rps": ml, "ratio_of_medians": ratio,
       "median_round_ratio": per_round, "goal": ">= 0.80", "pass": ok}
os.makedirs("bench/results", exist_ok=True)
with open("bench/results/load-vs-wrk.json.tmp", "w") as f:
    json.dump(res, f, indent=1)
os.replace("bench/results/load-vs-wrk.json.tmp", "bench/results/load-vs-wrk.json")
md = f"""# searchd load vs wrk on a trivial endpoint

{res['when']}; {res['searchd']}; {res['wrk']}; nproc={res['nproc']}; load average at end {[round(x, 2) for x in res['loadavg_end']]}.
Server: `searchd serve` (tiny flat index, --io-threads 2), `GET /health` on loopback. Both clients:
{c} keep-alive connections, {t} client threads, {d} s per run, {len(w)} alternating rounds, same box.

| round | wrk req/s | searchd load req/s | ratio | searchd load errors | searchd load CPU % |
|---:|---:|---:|---:|---:|---:|
""" + "".join(f"| {i+1} | {a:.0f} | {b:.0f} | {b/a:.2f} | {e} | {p:.0f} |\n" for i, (a, b, e, p) in enumerate(zip(w, l, errs, cpu))) + f"""
Median: wrk {mw:.0f} req/s, searchd load {ml:.0f} req/s; ratio of medians **{ratio:.2f}**, median per-round
ratio **{per_round:.2f}** (goal >= 0.80, no errors): **{'PASS' if ok else 'MISS'}**.

Reproduce: `bash bench/load_vs_wrk.sh` (env CONNS, DURATION, ROUNDS, THREADS).
"""
open("bench/results/load-vs-wrk.md", "w").write(md)
print(md)
sys.exit(0 if ok else 1)
PY
