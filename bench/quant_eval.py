#!/usr/bin/env python3
"""searchd's own codes side by side on one index graph: float32, SQ8, PQ and binary, each
with an oversample sweep, plus exact search, all measured by `searchd eval` in one run.

The quantized indexes are made from the float32 index with `searchd quantize` (same graph,
so only the traversal distance and the rescoring differ). Exact search is a flat index
over the same vectors, timed the same way.

    python3 bench/quant_eval.py --dataset synth1m

Writes bench/results/quant-<dataset>.{json,md}.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEARCHD = ROOT / "target" / "release" / "searchd"

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402  (same quiet-machine rule as the peer runs)
from peers import wait_quiet  # noqa: E402

peers.QUIET["max_busy"] = 0.15
peers.QUIET["max_wait"] = 300.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd: list) -> None:
    log(" ".join(map(str, cmd)))
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)


def code_bytes(manifest: dict) -> int:
    q = manifest["params"].get("quantization")
    d = manifest["dim"]
    if q is None:
        return 4 * d
    return {"sq8": d, "pq": q.get("m", 0), "binary": (d + 63) // 64 * 8}[q["kind"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--queries", type=int, default=1000, help="first N queries (queries-N.npy, gt-N.npy)")
    ap.add_argument("--exact-queries", type=int, default=200)
    ap.add_argument("--efs", default="64,128,256")
    ap.add_argument("--min-seconds", type=float, default=2.0)
    ap.add_argument("--pq-m", type=int, default=64)
    ap.add_argument("--variants",
                    default="f32:-,sq8:2,sq8:4,pq:16,pq:24,pq:32,binary:32,binary:64,binary:96,"
                            "ivfpq:24@8;16;32;64;128;256",
                    help="kind:oversample[@ef;ef;...] (ivfpq: ef is nprobe, the lists probed)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()
    ddir = ROOT / "bench" / "data" / a.dataset
    base_idx = ddir / "searchd-hnsw"
    import numpy as np
    q = np.load(ddir / "queries.npy")
    gt = np.load(ddir / "gt.npy")
    paths = {}
    for n in {a.queries, a.exact_queries}:
        qp, gp = ddir / f"queries-{n}.npy", ddir / f"gt-{n}.npy"
        if not qp.exists():
            np.save(qp, np.ascontiguousarray(q[:n]))
            np.save(gp, np.ascontiguousarray(gt[:n]))
        paths[n] = (qp, gp)
    dirs = {"f32": base_idx, "sq8": ddir / "searchd-hnsw-sq8", "pq": ddir / f"searchd-hnsw-pq{a.pq_m}",
            "binary": ddir / "searchd-hnsw-binary", "flat": ddir / "searchd-flat",
            "ivfpq": ddir / f"searchd-ivfpq{a.pq_m}"}
    for kind, quant in [("sq8", "sq8"), ("pq", f"pq:{a.pq_m}"), ("binary", "binary")]:
        if not (dirs[kind] / "manifest.json").exists():
            run([SEARCHD, "quantize", "--index", base_idx, "--out", dirs[kind], "--quantization", quant, "--force"])
    if "ivfpq" in a.variants and not (dirs["ivfpq"] / "manifest.json").exists():
        run([SEARCHD, "build", "--base", ddir / "base.npy", "--out", dirs["ivfpq"], "--index", "ivfpq",
             "--quantization", f"pq:{a.pq_m}"])
    if not (dirs["flat"] / "manifest.json").exists():
        run([SEARCHD, "build", "--base", ddir / "base.npy", "--out", dirs["flat"], "--index", "flat"])
    res = {"schema": "searchd.bench.quant.v1", "dataset": a.dataset, "queries": a.queries,
           "exact_queries": a.exact_queries, "min_seconds": a.min_seconds,
           "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpus": os.cpu_count(), "rows": []}
    tmp = Path("/tmp/quant-eval.json")
    qp, gp = paths[a.queries]
    for spec in a.variants.split(","):
        kind, over = spec.split(":")
        over, _, efs = over.partition("@")
        efs = efs.replace(";", ",") or a.efs
        d = dirs[kind]
        manifest = json.loads((d / "manifest.json").read_text())
        cmd = [SEARCHD, "eval", "--index", d, "--queries", qp, "--gt", gp, "--ef", efs,
               "--min-seconds", a.min_seconds, "--threads", "0", "--json", tmp]
        if over != "-":
            cmd += ["--oversample", over]
        wait_quiet(f"eval {spec}")
        run(cmd)
        doc = json.loads(tmp.read_text())
        for r in doc["rows"]:
            res["rows"].append({"kind": kind, "oversample": None if over == "-" else float(over),
                                "code_bytes": code_bytes(manifest), "index_bytes": doc["index"]["bytes"], **r})
    eqp, egp = paths[a.exact_queries]
    wait_quiet("exact")
    run([SEARCHD, "eval", "--index", dirs["flat"], "--queries", eqp, "--gt", egp, "--ef", "10",
         "--min-seconds", a.min_seconds, "--threads", "0", "--json", tmp])
    ex = json.loads(tmp.read_text())["rows"][0]
    res["exact"] = ex
    # Targets: first ef reaching recall@10 >= 0.95 per variant.
    def first(kind, over):
        rows = [r for r in res["rows"] if r["kind"] == kind and r["oversample"] == over
                and (r["recall_at_10"] or 0) >= 0.95]
        return min(rows, key=lambda r: r["ef"]) if rows else None
    f32 = first("f32", None)
    lines = [f"# searchd codes on one graph: {a.dataset}", "",
             f"`searchd eval`, k=10, first {a.queries} queries rotating, {a.min_seconds} s per timed pass, "
             f"{os.cpu_count()} CPUs; quantized indexes made with `searchd quantize` from the float32 index "
             f"(same HNSW graph, M=16, ef_construction=200). Rescoring reads float32 rows from the mapped "
             f"vectors. Exact search: flat index, {a.exact_queries} queries: "
             f"{ex['qps_1thread']:.1f} q/s on 1 thread, {ex['qps_all_threads']:.1f} q/s on all.", "",
             "ivfpq rows: ef is nprobe (lists scanned, of the nlist in the index's params).", "",
             "| codes | bytes/vector | oversample | ef | recall@10 | QPS 1 thr | p99 ms | QPS all thr | x float32 (1 thr) | x exact (1 thr) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(
            f"| {r['kind']} | {r['code_bytes']} | {r['oversample'] or '-'} | {r['ef']} | {r['recall_at_10']:.4f} | "
            f"{r['qps_1thread']:.0f} | {r['p99_us'] / 1e3:.2f} | {r['qps_all_threads']:.0f} | "
            f"{r['qps_1thread'] / f32['qps_1thread']:.2f} | {r['qps_1thread'] / ex['qps_1thread']:.0f} |"
            if f32 else "")
    lines += ["", "## At the first ef with recall@10 >= 0.95", "",
              "| codes | oversample | ef | recall@10 | QPS 1 thr | vs float32 at its first 0.95 | vs exact |", "|---|---|---|---|---|---|---|"]
    targets = []
    for spec in a.variants.split(","):
        kind, over = spec.split(":")
        over = over.partition("@")[0]
        o = None if over == "-" else float(over)
        r = first(kind, o)
        if r is None:
            lines.append(f"| {kind} | {over} | - | never >= 0.95 | - | - | - |")
            continue
        vs_f32 = r["qps_1thread"] / f32["qps_1thread"] if f32 else None
        vs_ex = r["qps_1thread"] / ex["qps_1thread"]
        lines.append(f"| {kind} | {over} | {r['ef']} | {r['recall_at_10']:.4f} | {r['qps_1thread']:.0f} | "
                     f"{vs_f32:.2f}x | {vs_ex:.0f}x |")
        targets.append({"kind": kind, "oversample": o, "ef": r["ef"], "recall_at_10": r["recall_at_10"],
                        "qps_1thread": r["qps_1thread"], "vs_f32": vs_f32, "vs_exact": vs_ex})
    res["at_095"] = targets
    best = lambda k: max((t for t in targets if t["kind"] == k), key=lambda t: t["qps_1thread"], default=None)
    goals = []
    s, p, iv = best("sq8"), best("pq"), best("ivfpq")
    if s:
        goals.append(("SQ8 + rescoring: 1-thread QPS / float32 at recall >= 0.95", f"{s['vs_f32']:.2f}x", ">= 1.3x", s["vs_f32"] >= 1.3))
    if p:
        goals.append((f"PQ (m={a.pq_m}, {a.pq_m} B/vector) + rescoring: recall >= 0.95, 1-thread QPS / exact", f"{p['vs_exact']:.0f}x", ">= 20x", p["vs_exact"] >= 20))
    if iv:
        goals.append((f"IVF-PQ (m={a.pq_m}) + rescoring: recall >= 0.95, 1-thread QPS / exact", f"{iv['vs_exact']:.0f}x", ">= 20x", iv["vs_exact"] >= 20))
    res["targets"] = [{"target": g[0], "value": g[1], "goal": g[2], "pass": g[3]} for g in goals]
    lines += ["", "## Targets", "", "| target | value | goal | |", "|---|---|---|---|"]
    lines += [f"| {g[0]} | {g[1]} | {g[2]} | {'PASS' if g[3] else 'MISS'} |" for g in goals]
    out = Path(a.out)
    (out / f"quant-{a.dataset}.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / f"quant-{a.dataset}.md").write_text("\n".join(lines) + "\n")
    log(f"wrote {out}/quant-{a.dataset}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
