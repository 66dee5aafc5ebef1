#!/usr/bin/env bash
# One memory budget for a whole server (issue "Indexes larger than memory", item 3): three
# partitioned collections whose partitions together are about 3x `serve --memory-budget`,
# searched in turn; the server's resident set is sampled every 10 ms against the budget.
#
#     PYTHON=/path/to/python-with-numpy bash bench/memory_pool.sh [DATA_DIR]
#
# DATA_DIR (default bench/data/memory-pool) caches `dataset synth` (100k x 384, 300 queries,
# seed 42), `gt` (k=10) and one collection made by `searchd ingest --index partitioned
# --partitions 32 --overlap 1`, copied to three directories (the same rows three times: the
# budget, not the data, is under test). Runs bench/memory_pool.py with 2 and 8 clients;
# results in bench/results/memory-pool-3x-c{2,8}.json. Knobs: BUDGET (240MB), NPROBE (8).
set -euo pipefail
cd "$(dirname "$0")/.."
D=${1:-bench/data/memory-pool}
S=target/release/searchd
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-240MB}
NPROBE=${NPROBE:-8}
mkdir -p "$D" bench/results
log() { echo "[$(date +%T)] $*" >&2; }

[ -f "$D/base.npy" ] || { log synth; $S dataset synth --n 100000 --dim 384 --queries 300 --out "$D"; }
[ -f "$D/gt.npy" ] || { log gt; $S gt --base "$D/base.npy" --queries "$D/queries.npy" --out "$D/gt.npy" --k 10; }
[ -f "$D/ids.jsonl" ] || $PY -c "
import json, sys
with open(sys.argv[1], 'w') as f:
    for i in range(100000):
        f.write(json.dumps({'id': i}) + '\n')
" "$D/ids.jsonl"
if [ ! -d "$D/c1" ]; then
  log ingest
  $S ingest --docs "$D/ids.jsonl" --vectors "$D/base.npy" --out "$D/c1" --index partitioned \
     --partitions 32 --overlap 1 --no-lexical --fields none --name c1
fi
for c in c2 c3; do [ -d "$D/$c" ] || cp -r "$D/c1" "$D/$c"; done
for clients in 2 8; do
  log "serve, $clients clients"
  $PY bench/memory_pool.py --bin $S --collection a="$D/c1" --collection b="$D/c2" \
      --collection c="$D/c3" --queries "$D/queries.npy" --gt "$D/gt.npy" --budget "$BUDGET" \
      --nprobe "$NPROBE" --clients "$clients" --out "bench/results/memory-pool-3x-c$clients.json" \
      > /dev/null
  $PY -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(f\"clients {r['clients']}: peak RSS {r['peak_rss_sampled']/1e6:.1f} MB (VmHWM {r['vm_hwm']/1e6:.1f}) for a budget of {r['budget']/1e6:.0f} MB: {r['peak_over_budget']}x, partitions {r['indexes_over_budget']}x the budget, recall {r['recall_at_10']}, {r['qps']} q/s, p99 {r['p99_ms']} ms, loads {r['partitions']['loads']}, evictions {r['partitions']['evictions']}, met {r['met']}\")
" "bench/results/memory-pool-3x-c$clients.json"
done
