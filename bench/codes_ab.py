#!/usr/bin/env python3
"""searchd's code kinds on one graph, interleaved: float32, SQ8 and RaBitQ-style 4 and 8 bits.

    python3 bench/codes_ab.py --base B.npy --queries Q.npy --name codes-ab-gcide \
        [--index DIR_OF_AN_HNSW_INDEX] [--rounds 3] [--efs 64,128,256]

One HNSW graph (built from --base, or --index when given) gets each code kind with
`searchd quantize` (the graph is shared, so only the codes differ). Then, for `--rounds`
rounds, every configuration runs `searchd eval` (one thread, the same queries and exact
ground truth from `searchd gt`) one after another in the same order (A, B, C, D, A, B, ...):
this VM's speed drifts by 10-30% between minutes, so only same-round ratios are evidence.
Each code kind runs twice: rescored with float32 (the default) and alone (`--vectors none`,
recall of the codes without any float32 read). Reports the medians over rounds with the
spread (min-max), recall@10 (tie-aware, from `searchd eval`), code bytes per vector, and the
QPS ratio to SQ8 per round. Writes bench/results/NAME.json and NAME.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SEARCHD = ROOT / "target" / "release" / "searchd"

# (config name, --quantization, --vectors)
CONFIGS = [
    ("float32", "none", "mmap"),
    ("sq8", "sq8", "mmap"),
    ("rabitq4", "rabitq:4", "mmap"),
    ("rabitq8", "rabitq:8", "mmap"),
    ("sq8 alone", "sq8", "none"),
    ("rabitq4 alone", "rabitq:4", "none"),
    ("rabitq8 alone", "rabitq:8", "none"),
]


def run(cmd):
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    subprocess.run(list(map(str, cmd)), check=True, stdout=subprocess.DEVNULL)


def code_bytes(index: Path) -> float:
    m = json.loads((index / "manifest.json").read_text())
    files = {f["name"]: f["bytes"] for f in m["files"]}
    return files.get("codes.bin", 0) / m["n"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--index", help="an existing float32 HNSW index of --base (default: built)")
    ap.add_argument("--gt", help="exact ids from `searchd gt` (default: computed)")
    ap.add_argument("--work", default=str(HERE / "data" / "codes-ab"))
    ap.add_argument("--name", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--efs", default="64,128,256")
    ap.add_argument("--min-seconds", type=float, default=2.0)
    ap.add_argument("--dataset", default="")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    plain = Path(a.index) if a.index else work / "float32"
    if not a.index and not plain.exists():
        run([SEARCHD, "build", "--base", a.base, "--out", plain])
    gt = Path(a.gt) if a.gt else work / "gt.npy"
    if not gt.exists():
        run([SEARCHD, "gt", "--base", a.base, "--queries", a.queries, "--out", gt])
    dirs = {"none": plain}
    for _, q, _ in CONFIGS:
        if q not in dirs:
            d = work / ("q-" + q.replace(":", ""))
            run([SEARCHD, "quantize", "--index", plain, "--out", d, "--quantization", q, "--force"])
            dirs[q] = d
    efs = [int(x) for x in a.efs.split(",")]
    runs = {name: [] for name, _, _ in CONFIGS}
    for r in range(a.rounds):
        for name, q, vectors in CONFIGS:
            out = work / f"eval-{r}-{name.replace(' ', '-')}.json"
            run([SEARCHD, "eval", "--index", dirs[q], "--queries", a.queries, "--gt", gt,
                 "--ef", a.efs, "--threads", "1", "--min-seconds", a.min_seconds,
                 "--vectors", vectors, "--json", out])
            rows = json.loads(out.read_text())["rows"]
            runs[name].append({row["ef"]: row for row in rows})
    table = []
    for name, q, vectors in CONFIGS:
        for ef in efs:
            qps = [rr[ef]["qps_1thread"] for rr in runs[name]]
            rec = [rr[ef]["recall_at_10"] for rr in runs[name]]
            vs_sq8 = None
            if name != "sq8":
                vs_sq8 = [rr[ef]["qps_1thread"] / s[ef]["qps_1thread"]
                          for rr, s in zip(runs[name], runs["sq8"])]
            table.append({
                "config": name, "quantization": q, "vectors": vectors, "ef": ef,
                "code_bytes_per_vector": round(code_bytes(dirs[q]), 1),
                "recall_at_10": statistics.median(rec),
                "qps_1thread_median": statistics.median(qps), "qps_1thread_min": min(qps),
                "qps_1thread_max": max(qps),
                "qps_vs_sq8_per_round": vs_sq8,
                "qps_vs_sq8_median": statistics.median(vs_sq8) if vs_sq8 else None,
                "p99_us_median": statistics.median(rr[ef]["p99_us"] for rr in runs[name]),
            })
    res = {"schema": "searchd.bench.codes_ab.v1", "dataset": a.dataset or Path(a.base).parent.name,
           "base": a.base, "rounds": a.rounds, "efs": efs, "searchd": str(SEARCHD),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": table}
    rdir = HERE / "results"
    (rdir / f"{a.name}.json").write_text(json.dumps(res, indent=1) + "\n")
    md = [f"# Code kinds on one graph, interleaved ({res['dataset']}, {a.rounds} rounds)", "",
          "Produced by `bench/codes_ab.py`: one HNSW graph (m 16, ef_construction 200), each code "
          "kind added with `searchd quantize`; every round runs every configuration one after "
          "another (one thread, `searchd eval`, tie-aware recall@10 against `searchd gt`). "
          "\"alone\": `--vectors none`, no float32 rescoring. QPS: median over rounds (min-max); "
          "the ratio to SQ8 is taken within each round, then the median.", "",
          "| config | ef | codes.bin bytes/vector | recall@10 | QPS 1 thread | vs sq8 (per round) | p99 us |",
          "|---|---:|---:|---:|---:|---|---:|"]
    for t in table:
        ratio = "-" if t["qps_vs_sq8_per_round"] is None else (
            f"{t['qps_vs_sq8_median']:.2f}x ({', '.join(f'{x:.2f}' for x in t['qps_vs_sq8_per_round'])})")
        md.append(f"| {t['config']} | {t['ef']} | {t['code_bytes_per_vector']:.0f} | {t['recall_at_10']:.4f} | "
                  f"{t['qps_1thread_median']:,.0f} ({t['qps_1thread_min']:,.0f}-{t['qps_1thread_max']:,.0f}) | "
                  f"{ratio} | {t['p99_us_median']:.0f} |")
    (rdir / f"{a.name}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
