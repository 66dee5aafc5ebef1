#!/usr/bin/env python3
"""Search under memory caps: float32 in RAM, float32 mapped, SQ8 with rescoring vectors
mapped or on disk, each at caps from 30% to 120% of the float32 index's size.

Every run is `searchd bench memory`: `searchd eval` in a child process inside a memory
cgroup (v1 or v2), page cache dropped before each run. This script only picks the configs
and caps, runs them one after the other, and renders one table per config.

    python3 bench/memory_caps.py --dataset synth1m
    python3 bench/memory_caps.py --dataset gcide --caps-pct 30,50,70,90,120

Inputs come from bench/peers.py's data preparation (bench/data/<dataset>/: base, queries,
gt, searchd-hnsw and searchd-hnsw-sq8 index directories). Writes
bench/results/memory-caps-<dataset>.{json,md}.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SEARCHD = ROOT / "target" / "release" / "searchd"

# name, index directory, placement flags, what it shows
CONFIGS = [
    ("float32-ram", "searchd-hnsw", ["--vectors", "ram"],
     "vectors and graph copied into private memory"),
    ("float32-mmap", "searchd-hnsw", ["--vectors", "mmap"],
     "vectors and graph mapped from the page cache"),
    ("sq8-ram+vectors-mmap", "searchd-hnsw-sq8", ["--vectors", "mmap", "--graph", "ram", "--codes", "ram"],
     "SQ8 codes and graph in RAM, float32 rescoring rows mapped"),
    ("sq8-ram+vectors-disk", "searchd-hnsw-sq8", ["--vectors", "disk", "--graph", "ram", "--codes", "ram"],
     "SQ8 codes and graph in RAM, float32 rescoring rows read with pread"),
    ("sq8-mmap+vectors-disk", "searchd-hnsw-sq8", ["--vectors", "disk", "--graph", "mmap", "--codes", "mmap"],
     "SQ8 codes and graph mapped, float32 rescoring rows read with pread"),
]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def index_bytes(d: Path) -> int:
    m = json.loads((d / "manifest.json").read_text())
    return sum(f["bytes"] for f in m["files"])


def subset(ddir: Path, nq: int) -> tuple[Path, Path]:
    """The first `nq` queries and their ground truth, so a run under a tight cap (every
    query a handful of disk reads) ends in minutes."""
    q = np.load(ddir / "queries.npy")
    gt = np.load(ddir / "gt.npy")
    if len(q) <= nq:
        return ddir / "queries.npy", ddir / "gt.npy"
    qp, gp = ddir / f"queries-{nq}.npy", ddir / f"gt-{nq}.npy"
    if not qp.exists():
        np.save(qp, np.ascontiguousarray(q[:nq]))
        np.save(gp, np.ascontiguousarray(gt[:nq]))
    return qp, gp


def render(res: dict) -> str:
    out = [f"# Search under memory caps: {res['dataset']}", ""]
    out.append(
        f"`searchd bench memory`, ef={res['ef']}, k=10, {res['queries']} rotating queries, "
        f"{res['min_seconds']} s per timed pass, cgroup {res['cgroup']}, page cache dropped "
        f"before each run: {res['page_cache_dropped']}. Float32 index (vectors + graph + ids): "
        f"{res['f32_bytes'] / 1e6:.0f} MB; caps are percentages of it. Machine: {res['machine']}."
    )
    out.append("")
    out.append("RSS is the searching process's resident set at the end of the run (mapped file "
               "pages it touched count, page-cache pages read with pread do not); cgroup peak is "
               "everything the cap limits (RSS plus page cache the run faulted in). Major faults "
               "are reads from disk. QPS and latencies are single-thread; the all-thread column "
               "uses every core.")
    out.append("")
    for cfg in res["configs"]:
        out.append(f"## {cfg['name']}: {cfg['what']}")
        out.append("")
        out.append(f"Index files: {cfg['index_bytes'] / 1e6:.0f} MB. Flags: `{' '.join(cfg['flags'])}`.")
        out.append("")
        out.append("| cap | outcome | recall@10 | QPS 1 thr | p50 ms | p99 ms | QPS all thr | RSS MB | cgroup peak MB | major faults |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for r in cfg["rows"]:
            cap = "none" if r["limit_mb"] is None else f"{r['limit_mb']} MB ({r['pct']}%)"
            f = lambda v, s: "-" if v is None else format(v, s)
            mb = lambda v: "-" if v is None else f"{v / 1e6:.0f}"
            out.append(
                f"| {cap} | {r['outcome']} | {f(r['recall_at_10'], '.4f')} | {f(r['qps_1thread'], '.0f')} | "
                f"{f(None if r['p50_us'] is None else r['p50_us'] / 1e3, '.2f')} | "
                f"{f(None if r['p99_us'] is None else r['p99_us'] / 1e3, '.2f')} | {f(r['qps_all_threads'], '.0f')} | "
                f"{mb(r['rss_bytes'])} | {mb(r['cgroup_peak_bytes'])} | {f(r['major_faults'], 'd')} |"
            )
        out.append("")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--caps-pct", default="30,50,70,90,120")
    ap.add_argument("--ef", type=int, default=128)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--min-seconds", type=float, default=3.0)
    ap.add_argument("--timeout-s", type=int, default=900)
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()
    ddir = ROOT / "bench" / "data" / a.dataset
    f32 = index_bytes(ddir / "searchd-hnsw")
    pcts = [int(p) for p in a.caps_pct.split(",")]
    caps = [max(1, round(f32 * p / 100 / 1e6)) for p in pcts]
    qp, gp = subset(ddir, a.queries)
    wanted = a.configs.split(",")
    res = {
        "schema": "searchd.bench-memory-caps.v1",
        "dataset": a.dataset,
        "ef": a.ef,
        "queries": a.queries,
        "min_seconds": a.min_seconds,
        "f32_bytes": f32,
        "caps_pct": pcts,
        "machine": f"{os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
        "configs": [],
    }
    for name, idx, flags, what in CONFIGS:
        if name not in wanted:
            continue
        tmp = Path(f"/tmp/memory-caps-{a.dataset}-{name}.json")
        cmd = [str(SEARCHD), "bench", "memory", "--index", str(ddir / idx), "--queries", str(qp),
               "--gt", str(gp), "--ef", str(a.ef), "--min-seconds", str(a.min_seconds),
               "--timeout-s", str(a.timeout_s), "--limits-mb", ",".join(["max"] + [str(c) for c in caps]),
               "--json", str(tmp)] + flags
        log(f"{name}: {' '.join(cmd)}")
        subprocess.run(cmd, check=True)
        doc = json.loads(tmp.read_text())
        for r, p in zip(doc["rows"], [None] + pcts):
            r["pct"] = p
        res["cgroup"] = doc["cgroup"]["version"]
        res["page_cache_dropped"] = doc["page_cache_dropped"]
        res["configs"].append({"name": name, "what": what, "flags": flags,
                               "index_bytes": doc["index_bytes"], "rows": doc["rows"]})
    out = Path(a.out)
    (out / f"memory-caps-{a.dataset}.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / f"memory-caps-{a.dataset}.md").write_text(render(res))
    log(f"wrote {out}/memory-caps-{a.dataset}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
