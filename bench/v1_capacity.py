#!/usr/bin/env python3
"""v1 serving capacity before and after the collections refactor, same run, same index.

`searchd serve --index` (dev-gcide-50k HNSW M=16 ef_c=200, ef=64, qidx queries) ramped by
the same `searchd load` for two binaries: OLD (the commit before collections, built by
this script in a git worktree) and NEW (target/release/searchd), alternated
OLD, NEW, OLD, NEW so drift on this noisy VM hits both. Reports each run's sustainable QPS
and p99, and NEW/OLD of the medians.

Usage: python3 bench/v1_capacity.py [OLD_COMMIT]   (default 3ba52e1)
Writes bench/results/v1-capacity-gcide.{json,md}.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEW = os.path.join(ROOT, "target/release/searchd")
OLD_COMMIT = sys.argv[1] if len(sys.argv) > 1 else "3ba52e1"
WT = "/tmp/searchd-old"
OLD = os.path.join(WT, "target/release/searchd")
DATA = os.environ.get("GCIDE", os.path.join(ROOT, "../shared/datasets/dev-gcide-50k"))
WORK = os.path.join(ROOT, "bench/data/v1-gcide")
RES = os.path.join(ROOT, "bench/results")


def run(args, **kw):
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, check=True, **kw)


def wait_quiet(max_s=60):
    t = time.time()
    while time.time() - t < max_s:
        if os.getloadavg()[0] < 0.5:
            return
        time.sleep(2)


def main():
    os.makedirs(WORK, exist_ok=True)
    if not os.path.exists(OLD):
        if not os.path.exists(WT):
            run(["git", "-C", ROOT, "worktree", "add", "--detach", WT, OLD_COMMIT])
        run(["cargo", "build", "--release", "-p", "searchd"], cwd=WT)
    idx = os.path.join(WORK, "index")
    q = os.path.join(DATA, "queries.f16.npy")
    gt = os.path.join(WORK, "gt.npy")
    if not os.path.exists(gt):
        run([NEW, "gt", "--base", os.path.join(DATA, "base.f16.npy"), "--queries", q, "--out", gt, "--k", "100"])
    if not os.path.exists(idx):
        run([NEW, "build", "--base", os.path.join(DATA, "base.f16.npy"), "--out", idx])
    runs = []
    for name, b in [("old", OLD), ("new", NEW), ("old", OLD), ("new", NEW)]:
        port = 19000 + len(runs)
        url = f"http://127.0.0.1:{port}"
        srv = subprocess.Popen([b, "serve", "--index", idx, "--queries", q, "--addr", f"127.0.0.1:{port}", "--ef", "64"],
                               stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    if urllib.request.urlopen(url + "/ready", timeout=1).status == 200:
                        break
                except Exception:
                    time.sleep(0.1)
            wait_quiet()
            j = os.path.join(WORK, f"load-{len(runs)}-{name}.json")
            run([NEW, "load", "--url", url, "--queries", "2000", "--gt", gt, "--ramp", "1,2,4,8,16,32,64,128",
                 "--warmup", "3s", "--duration", "8s", "--slo-p99-ms", "100", "--json", j])
            r = json.load(open(j))
            s = r.get("sustainable") or {}
            step = next((x for x in r["steps"] if x["concurrency"] == s.get("concurrency")), {})
            runs.append({"binary": name, "sustainable_qps": s.get("qps"), "concurrency": s.get("concurrency"),
                         "p99_ms": s.get("p99_ms"), "recall_at_10": step.get("recall_at_k"),
                         "peak_qps": (r.get("peak") or {}).get("qps")})
        finally:
            srv.send_signal(signal.SIGTERM)
            srv.wait(timeout=30)
    med = {n: statistics.median([r["sustainable_qps"] or 0 for r in runs if r["binary"] == n]) for n in ["old", "new"]}
    git = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    out = {"schema": "searchd.bench-v1-capacity.v1", "old": OLD_COMMIT, "new": git, "runs": runs,
           "median_sustainable": med, "new_over_old": med["new"] / med["old"] if med["old"] else None}
    json.dump(out, open(os.path.join(RES, "v1-capacity-gcide.json"), "w"), indent=1)
    lines = ["# v1 serving capacity before/after collections (dev-gcide-50k, HNSW ef=64, qidx, 2 cores)", "",
             f"OLD = {OLD_COMMIT}, NEW = {git}; alternated runs, same index, same load generator; `bench/v1_capacity.py`.", "",
             "| run | binary | sustainable QPS | at conc | p99 ms | recall@10 | peak QPS |", "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs):
        lines.append(f"| {i+1} | {r['binary']} | {r['sustainable_qps'] or 0:.0f} | {r['concurrency']} | {r['p99_ms'] or 0:.1f} | {r['recall_at_10'] or 0:.3f} | {r['peak_qps'] or 0:.0f} |")
    lines += ["", f"Median sustainable: old {med['old']:.0f}, new {med['new']:.0f}: **new/old = {out['new_over_old']:.3f}** "
              "(this VM's run-to-run noise is +-10-15%)."]
    open(os.path.join(RES, "v1-capacity-gcide.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
