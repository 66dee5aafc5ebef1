#!/usr/bin/env bash
# Per-request CPU of the server process (from its /stats) and of wrk, per concurrency:
# robust to other jobs on a shared machine, unlike wall-clock QPS. Env INDEX=DIR.
# usage: cpu.sh BIN "FLAGS" "CONCS" DURATION PORT  -> per-request CPU of server and wrk
BIN=$1; FLAGS=$2; CONCS=$3; DUR=$4; PORT=$5
D=/work/shared/datasets/dev-gcide-50k
$BIN --index ${INDEX:-/tmp/sbench/gcide-hnsw} --queries $D/queries.f16.npy --addr 127.0.0.1:$PORT --populate $FLAGS > /tmp/searchd-cpu-$PORT.log 2>&1 &
S=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:$PORT/ready >/dev/null 2>&1 && break; sleep 0.1; done
wrk -t1 -c4 -d2s -s /work/main/crates/server/examples/qidx.lua http://127.0.0.1:$PORT >/dev/null
st() { curl -s http://127.0.0.1:$PORT/stats | python3 -c "import json,sys; s=json.load(sys.stdin); print(s['process']['cpu_seconds'], s['requests']['total'], s['requests']['ok'])"; }
for c in $CONCS; do
  t=2; [ $c -lt 2 ] && t=1
  read c0 n0 ok0 < <(st)
  o=$( { /usr/bin/time -f "WRKCPU %U %S" wrk -t$t -c$c -d${DUR}s --timeout 10s --latency -s /work/main/crates/server/examples/qidx.lua http://127.0.0.1:$PORT; } 2>&1 )
  read c1 n1 ok1 < <(st)
  wc=$(echo "$o" | awk '/WRKCPU/ {print $2+$3}')
  rps=$(echo "$o" | awk '/Requests\/sec/ {print $2}'); p99=$(echo "$o" | awk '$1=="99%" {print $2}')
  python3 -c "
n=$n1-$n0; ok=$ok1-$ok0
print(f'flags[$FLAGS] c=$c rps=$rps ok/s={ok/$DUR:.0f} p99=$p99 requests={n} ok={ok} server_cpu_us/req={($c1-$c0)*1e6/max(n,1):.1f} server_cpu_us/ok={($c1-$c0)*1e6/max(ok,1):.1f} wrk_cpu_us/req={$wc*1e6/max(n,1):.1f} server_cpu_s={$c1-$c0:.2f} wrk_cpu_s=$wc')"
done
kill $S; wait $S 2>/dev/null
