#!/usr/bin/env bash
# Memory sharing of `searchd serve` processes on one index directory.
#
#   bash bench/memory_share.sh --index bench/data/gcide/searchd-hnsw \
#        --queries bench/data/gcide/queries.npy --dataset gcide [--searches 3000] [--threads 2]
#        [--extra-serve-args "--storage mmap"]
#
# 1. starts `searchd serve --index DIR --queries F --addr 127.0.0.1:P1`, waits for /ready,
#    sends --searches POST /search {"qidx": i % nq, "k": 10} (rotating qidx, keep-alive),
#    records RSS / Pss / Private (Clean+Dirty) / Shared (Clean+Dirty) from /proc/PID/smaps_rollup;
# 2. starts a SECOND serve on the same DIR and another port, warms it the same way, records
#    the same for both processes;
# 3. reports the second process's private memory (target <= 50 MB) and the first's RSS
#    against vectors.bin + graph.bin (target <= 1.1x);
# 4. writes bench/results/memory-<dataset>.{json,md} and stops both servers (by their PIDs).
#
# Exit status: 0 when both targets pass, 1 when one misses, 2 on a usage or setup error.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SEARCHD="${SEARCHD:-$ROOT/target/release/searchd}"
PY=python3
[ -x "$HERE/.venv/bin/python" ] && PY="$HERE/.venv/bin/python"

INDEX="" QUERIES="" DATASET="" SEARCHES=3000 THREADS=2 EXTRA="" OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --index) INDEX="$2"; shift 2 ;;
        --queries) QUERIES="$2"; shift 2 ;;
        --dataset) DATASET="$2"; shift 2 ;;
        --searches) SEARCHES="$2"; shift 2 ;;
        --threads) THREADS="$2"; shift 2 ;;
        --extra-serve-args) EXTRA="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
if [ -z "$INDEX" ] || [ -z "$QUERIES" ]; then
    echo "usage: $0 --index DIR --queries F [--dataset NAME] [--searches N] [--threads T]" >&2
    exit 2
fi
[ -z "$DATASET" ] && DATASET="$(basename "$(dirname "$(cd "$INDEX" && pwd)")")"
[ -z "$OUT" ] && OUT="$HERE/results/memory-$DATASET"
if [ ! -x "$SEARCHD" ]; then
    echo "error: $SEARCHD not found (cargo build --release)" >&2
    exit 2
fi
if ! "$SEARCHD" --help 2>/dev/null | grep -qE '^\s+serve\b'; then
    echo "error: $SEARCHD has no serve command yet" >&2
    exit 2
fi

exec "$PY" - "$SEARCHD" "$INDEX" "$QUERIES" "$DATASET" "$SEARCHES" "$THREADS" "$OUT" "$EXTRA" <<'PYEOF'
import ast, datetime, http.client, json, os, shlex, signal, socket, subprocess, sys, time

searchd, index, queries, dataset, searches, threads, out, extra = sys.argv[1:9]
searches, threads = int(searches), int(threads)
extra = shlex.split(extra)


def log(m):
    print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True)


def npy_rows(path):
    with open(path, "rb") as f:
        magic = f.read(6)
        if magic != b"\x93NUMPY":
            raise SystemExit(f"error: {path} is not .npy")
        major = f.read(2)[0]
        hlen = int.from_bytes(f.read(2 if major == 1 else 4), "little")
        hdr = ast.literal_eval(f.read(hlen).decode("latin1"))
    return int(hdr["shape"][0])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def smaps(pid):
    r = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                r[parts[0].rstrip(":")] = int(parts[1]) * 1024
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:", "RssAnon:", "RssFile:", "RssShmem:")):
                k, v = line.split(":")
                r["status_" + k] = int(v.split()[0]) * 1024
    return {
        "rss_bytes": r.get("Rss"),
        "pss_bytes": r.get("Pss"),
        "private_bytes": r.get("Private_Clean", 0) + r.get("Private_Dirty", 0),
        "private_clean_bytes": r.get("Private_Clean"),
        "private_dirty_bytes": r.get("Private_Dirty"),
        "shared_bytes": r.get("Shared_Clean", 0) + r.get("Shared_Dirty", 0),
        "anonymous_bytes": r.get("Anonymous"),
        "rss_anon_bytes": r.get("status_RssAnon"),
        "rss_file_bytes": r.get("status_RssFile"),
        "vm_hwm_bytes": r.get("status_VmHWM"),
    }


def rss_by_mapping(pid):
    """Rss summed per mapped file (anonymous, heap and stack grouped) from /proc/PID/smaps."""
    out, cur = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split()[0] if line.strip() else ""
            if "-" in first and not first.endswith(":"):
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) > 5 else ""
                cur = os.path.basename(path) if path.startswith("/") else (path or "[anon]")
            elif first == "Rss:" and cur is not None:
                out[cur] = out.get(cur, 0) + int(line.split()[1]) * 1024
    return dict(sorted(((k, v) for k, v in out.items() if v > 0), key=lambda kv: -kv[1]))


def wait_ready(port, proc, timeout=600):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"error: serve on port {port} exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/ready")
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                return time.time() - t0
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"error: serve on port {port} not ready after {timeout}s")


def drive(port, n, nq):
    """n searches over one keep-alive connection, qidx rotating; bounded in count and time."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    ok = bad = 0
    t0 = time.time()
    for i in range(n):
        body = json.dumps({"qidx": i % nq, "k": 10})
        c.request("POST", "/search", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        if r.status == 200 and b"hits" in data:
            ok += 1
        else:
            bad += 1
            if bad <= 3:
                log(f"search {i}: HTTP {r.status} {data[:200]!r}")
        if time.time() - t0 > 300:
            log("stopping early: 300 s budget")
            break
    c.close()
    el = time.time() - t0
    return {"sent": ok + bad, "ok": ok, "errors": bad, "seconds": el, "qps": (ok + bad) / el if el else None}


files = {f: os.path.getsize(os.path.join(index, f)) for f in os.listdir(index)
         if os.path.isfile(os.path.join(index, f))}
vg = files.get("vectors.bin", 0) + files.get("graph.bin", 0)
nq = npy_rows(queries)
procs = []


def stop_all():
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def start(port):
    cmd = [searchd, "serve", "--index", index, "--queries", queries, "--addr", f"127.0.0.1:{port}",
           "--threads", str(threads), *extra]
    log(" ".join(cmd))
    env = dict(os.environ)
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(v, None)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(f"/tmp/memory_share_{port}.log", "w"),
                         env=env)
    procs.append(p)
    return p


res = {"schema": "searchd.memory.v1", "dataset": dataset, "index": index, "queries": queries,
       "started": datetime.datetime.now().isoformat(timespec="seconds"),
       "loadavg_start": [round(x, 2) for x in os.getloadavg()], "searches_per_process": searches,
       "threads": threads, "extra_serve_args": extra, "index_files_bytes": files,
       "vectors_plus_graph_bytes": vg}
try:
    res["searchd_version"] = subprocess.run([searchd, "--version"], capture_output=True, text=True).stdout.strip()
    p1port, p2port = free_port(), free_port()
    p1 = start(p1port)
    res["first_ready_seconds"] = wait_ready(p1port, p1)
    res["first_load"] = drive(p1port, searches, nq)
    res["first_after_warm"] = smaps(p1.pid)
    res["first_rss_by_mapping"] = rss_by_mapping(p1.pid)
    log(f"first: {res['first_after_warm']}")
    p2 = start(p2port)
    res["second_ready_seconds"] = wait_ready(p2port, p2)
    res["second_after_ready"] = smaps(p2.pid)
    res["second_load"] = drive(p2port, searches, nq)
    res["second_after_warm"] = smaps(p2.pid)
    res["first_with_second_running"] = smaps(p1.pid)
    log(f"second: {res['second_after_warm']}")
finally:
    stop_all()

second_private = res["second_after_warm"]["private_bytes"]
first_rss = res["first_after_warm"]["rss_bytes"]
ratio = first_rss / vg if vg else None
res["targets"] = [
    {"target": "second process private memory (Private_Clean + Private_Dirty)",
     "value_mb": second_private / 1e6, "goal": "<= 50 MB", "pass": second_private <= 50e6},
    {"target": "first process RSS / (vectors.bin + graph.bin)", "ratio": ratio, "goal": "<= 1.1",
     "pass": ratio is not None and ratio <= 1.1,
     "detail": f"RSS {first_rss / 1e6:.1f} MB vs vectors+graph {vg / 1e6:.1f} MB"},
]
res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
res["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(out + ".json", "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")

MB = lambda b: "-" if b is None else f"{b / 1e6:.1f}"
L = [f"# searchd serve memory sharing: {dataset}", "",
     f"Index `{index}` (vectors.bin {MB(files.get('vectors.bin'))} MB + graph.bin {MB(files.get('graph.bin'))} MB "
     f"= {MB(vg)} MB; all files {MB(sum(files.values()))} MB). {searches} searches per process "
     f"(POST /search, rotating qidx over {nq} queries, one keep-alive connection). "
     f"serve --threads {threads} {' '.join(extra)}. Load average at start {res['loadavg_start']}, at end {res['loadavg_end']}. "
     f"{res.get('searchd_version', '')}.", "",
     "| process / moment | RSS MB | Pss MB | Private MB | Shared MB | RssAnon MB | RssFile MB |",
     "|---|---:|---:|---:|---:|---:|---:|"]
for label, key in (("first, after warm-up", "first_after_warm"), ("second, just ready", "second_after_ready"),
                   ("second, after warm-up", "second_after_warm"), ("first, with second running", "first_with_second_running")):
    s = res[key]
    L.append(f"| {label} | {MB(s['rss_bytes'])} | {MB(s['pss_bytes'])} | {MB(s['private_bytes'])} | "
             f"{MB(s['shared_bytes'])} | {MB(s['rss_anon_bytes'])} | {MB(s['rss_file_bytes'])} |")
L += ["", f"Warm-up: first {res['first_load']['ok']} ok / {res['first_load']['errors']} errors "
      f"({res['first_load']['qps']:.0f} q/s); second {res['second_load']['ok']} ok / {res['second_load']['errors']} errors "
      f"({res['second_load']['qps']:.0f} q/s). Ready after {res['first_ready_seconds']:.1f} s / {res['second_ready_seconds']:.1f} s.",
      "", "| target | value | goal | result |", "|---|---:|---|---|",
      f"| second process private memory | {second_private / 1e6:.1f} MB | <= 50 MB | {'PASS' if res['targets'][0]['pass'] else 'MISS'} |",
      f"| first RSS / (vectors + graph bytes) | {ratio:.2f}x | <= 1.1x | {'PASS' if res['targets'][1]['pass'] else 'MISS'} |",
      "", "First process RSS by mapping (after warm-up): "
      + ", ".join(f"{k} {MB(v)} MB" for k, v in list(res["first_rss_by_mapping"].items())[:8]) + ".",
      ""]
md = "\n".join(L)
with open(out + ".md", "w") as f:
    f.write(md)
print(md)
log(f"wrote {out}.json and {out}.md")
errors = res["first_load"]["errors"] + res["second_load"]["errors"]
if errors:
    log(f"FAILED: {errors} searches failed")
    sys.exit(1)
sys.exit(0 if all(t["pass"] for t in res["targets"]) else 1)
PYEOF
