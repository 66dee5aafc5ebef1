#!/usr/bin/env bash
# Issue 29's comparison on 1M x 384 synthetic vectors: the partitioned index with the graph
# manager against SQ8 HNSW with disk rescoring and float32 HNSW on mmap, in RAM and under a
# memory cgroup cap (20% of the float32 vectors' bytes by default), uniform and Zipf queries.
#
#     bash bench/partitioned_caps.sh [DATA_DIR] [OUT_PREFIX]
#
# DATA_DIR (default bench/data/synth1m-part) caches the data and indexes between runs:
# `dataset synth` (1M base, 1000 queries, seed 1), `gt` (k=100), hnsw, hnsw+sq8,
# partitioned K=256 overlap 1 with sq8 partitions, and the Zipf stream
# (bench/zipf_queries.py, s=1.1 over partitions; needs numpy: PYTHON=/path/to/python).
# Every measurement is `searchd eval` (in RAM) or `searchd bench memory` (eval in a child
# inside a memory cgroup, page cache dropped first); their JSON goes to
# bench/results/OUT_PREFIX-*.json (default partitioned-caps-synth1m) and the logs beside.
# Knobs: CAP_MB (307 = 20% of 1,536 MB), BUDGET (graph manager's budget under the cap), CAP_TIMEOUT (s),
# NPROBES; PREP_ONLY=1 stops after the data and builds.
set -euo pipefail
cd "$(dirname "$0")/.."
D=${1:-bench/data/synth1m-part}
OUT=bench/results/${2:-partitioned-caps-synth1m}
S=target/release/searchd
PY=${PYTHON:-python3}
CAP_MB=${CAP_MB:-307}
BUDGET=${BUDGET:-230MB}
NPROBES=${NPROBES:-16,32,64,128}
mkdir -p "$D" bench/results
log() { echo "[$(date +%T)] $*" >&2; }

[ -f "$D/base.npy" ] || { log synth; $S dataset synth --n 1000000 --dim 384 --queries 1000 --seed 1 --out "$D"; }
[ -f "$D/gt.npy" ] || { log gt; $S gt --base "$D/base.npy" --queries "$D/queries.npy" --out "$D/gt.npy" --k 100; }
[ -d "$D/part256sq8" ] || { log build part256sq8; /usr/bin/time -v $S build --base "$D/base.npy" --out "$D/part256sq8" \
    --index partitioned --partitions 256 --overlap 1 --quantization sq8 2> "$D/build-part256sq8.time"; }
[ -f "$D/queries-zipf.npy" ] || { log zipf; $PY bench/zipf_queries.py --index "$D/part256sq8" --queries "$D/queries.npy" \
    --gt "$D/gt.npy" --out "$D" > "$D/zipf.json"; }
# Capped runs use the first 300 uniform and 400 Zipf queries: a probe-heavy config under
# the cap answers a few queries a second, and every pass runs each query at least once.
[ -f "$D/queries-z400.npy" ] || $PY - "$D" <<'PYEOF'
import json, sys
import numpy as np
d = sys.argv[1]
for src, gt, n, tag in [("queries.npy", "gt.npy", 300, "u300"), ("queries-zipf.npy", "gt-zipf.npy", 400, "z400")]:
    np.save(f"{d}/queries-{tag}.npy", np.load(f"{d}/{src}")[:n])
    np.save(f"{d}/gt-{tag}.npy", np.load(f"{d}/{gt}")[:n])
    meta = json.load(open(f"{d}/{gt}.meta.json"))
    meta["queries"] = n
    json.dump(meta, open(f"{d}/gt-{tag}.npy.meta.json", "w"), indent=2)
PYEOF
[ -d "$D/hnsw-sq8" ] || { log build hnsw-sq8; /usr/bin/time -v $S build --base "$D/base.npy" --out "$D/hnsw-sq8" \
    --quantization sq8 2> "$D/build-hnsw-sq8.time"; }
[ -d "$D/hnsw" ] || { log build hnsw; /usr/bin/time -v $S build --base "$D/base.npy" --out "$D/hnsw" 2> "$D/build-hnsw.time"; }
[ -z "${PREP_ONLY:-}" ] || exit 0

# The partition size distribution (from the routing file) and the Zipf stream's skew.
$PY - "$D" "$OUT-partitions.json" <<'PYEOF'
import json, sys
import numpy as np
d, out = sys.argv[1], sys.argv[2]
raw = open(f"{d}/part256sq8/partitions.bin", "rb").read()
n, dim, k, m = (int(x) for x in np.frombuffer(raw[16:48], dtype="<u8"))
off = np.frombuffer(raw[64 + 4 * k * dim:64 + 4 * k * dim + 4 * (k + 1)], dtype="<u4").astype(np.int64)
sizes = np.diff(off)
json.dump({"rows": n, "partitions": k, "members": m, "copies": m - n,
           "size_min": int(sizes.min()), "size_median": float(np.median(sizes)), "size_max": int(sizes.max()),
           "max_over_median": float(sizes.max() / np.median(sizes)),
           "zipf": json.load(open(f"{d}/zipf.json"))}, open(out, "w"), indent=1)
PYEOF

# In RAM, no cap: the ratio to plain HNSW at recall 0.95.
if [ -z "${SKIP_RAM:-}" ]; then
  log ram hnsw
  $S eval --index "$D/hnsw" --queries "$D/queries.npy" --gt "$D/gt.npy" --vectors ram --ef 64,128,256 --threads 2 \
      --json "$OUT-ram-hnsw.json" > "$OUT-ram-hnsw.log" 2>&1
  log ram partitioned
  $S eval --index "$D/part256sq8" --queries "$D/queries.npy" --gt "$D/gt.npy" --ef 64,128 --nprobe "$NPROBES" --threads 2 \
      --json "$OUT-ram-part256sq8.json" > "$OUT-ram-part256sq8.log" 2>&1
fi

# Under the cap: each config, uniform and Zipf.
. bench/capped_run.sh
capped() { # name index ef queries gt extra...
  local name=$1
  shift
  capped_run "$OUT-$name" "$CAP_MB" "$@"
}
for stream in zipf uniform; do
  if [ $stream = zipf ]; then q="$D/queries-z400.npy"; gt="$D/gt-z400.npy"; else q="$D/queries-u300.npy"; gt="$D/gt-u300.npy"; fi
  for np in ${CAP_NPROBES:-128 64}; do
    capped "part256sq8-np$np-$stream" "$D/part256sq8" 64 "$q" "$gt" --nprobe "$np" --memory-budget "$BUDGET" --vectors disk
  done
  capped "sq8-disk-ef128-$stream" "$D/hnsw-sq8" 128 "$q" "$gt" --vectors disk --graph mmap --codes mmap
  capped "f32-mmap-ef128-$stream" "$D/hnsw" 128 "$q" "$gt" --vectors mmap
done
log done
