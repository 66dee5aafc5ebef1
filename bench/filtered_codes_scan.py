#!/usr/bin/env python3
"""Selective filters on quantized indexes: the automatic scan of the passing rows' codes
(then float32 rescoring) against the forced float32 scan, in the same process.

    python3 bench/filtered_codes_scan.py --base B.npy --queries Q.npy \
        --index sq8=DIR --index rabitq4=DIR [--rounds 3] --name filtered-codes-scan-synth1m

Runs `examples/filtered_bench.rs` (release) once per index per round, indexes alternating
(A, B, A, B, ...; this VM's speed drifts between minutes, so only same-run ratios count).
In each run the forced `exact` plan scans float32 rows (the exact answer) and the automatic
plan (ef 128) takes the codes scan for filters passing >= 2,048 rows; both over the same
200 queries, one thread, after a warm-up pass. Reports per filter: QPS of both, their
ratio per run (median and spread), the automatic plan's recall@10 and p99, and the
unfiltered p99 at ef 128 (the issue's "p99 at 1% <= 2x unfiltered p99").
Writes bench/results/NAME.json, NAME.md and NAME.log (the raw output).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCH = ROOT / "target" / "release" / "examples" / "filtered_bench"
FILTERS = "1pct,near-1pct,far-1pct,0.1pct,0.05pct"
LINE = re.compile(r"^\s*(exact|auto)\s+ef=\s*(\d+) nq=\d+ recall=([\d.]+) qps=\s*(\d+) p50=\s*([\d.]+)us p99=\s*([\d.]+)us")
UNF = re.compile(r"^unfiltered ef=\s*(\d+) recall=([\d.]+) qps=\s*(\d+) p50=\s*([\d.]+)us p99=\s*([\d.]+)us")
FIL = re.compile(r"^filter (\S+): (\d+) rows")


def parse(text):
    out, cur = {"filters": {}}, None
    for line in text.splitlines():
        if m := UNF.match(line):
            out["unfiltered"] = {"ef": int(m[1]), "recall": float(m[2]), "qps": int(m[3]), "p99_us": float(m[5])}
        elif m := FIL.match(line):
            cur = m[1]
            out["filters"][cur] = {"rows": int(m[2])}
        elif (m := LINE.match(line)) and cur:
            out["filters"][cur][m[1]] = {"recall": float(m[3]), "qps": int(m[4]), "p50_us": float(m[5]),
                                        "p99_us": float(m[6])}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--index", action="append", required=True, help="NAME=DIR of a quantized HNSW index")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--filters", default=FILTERS)
    ap.add_argument("--name", required=True)
    ap.add_argument("--work", default="/tmp/filtered-codes-scan")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-p", "searchd-engine", "--example", "filtered_bench"],
                   cwd=ROOT, check=True)
    indexes = [tuple(x.split("=", 1)) for x in a.index]
    runs, log = {n: [] for n, _ in indexes}, []
    for r in range(a.rounds):
        for name, d in indexes:
            cmd = [str(BENCH), "--base", a.base, "--queries", a.queries, "--index", d, "--out",
                   f"{a.work}-{name}", "--nq", "200", "--efs", "128", "--filters", a.filters,
                   "--forced-min-sel", "0.5"]
            print("+", " ".join(cmd), file=sys.stderr, flush=True)
            text = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True).stdout
            log.append(f"### round {r + 1} index {name}\n{text}")
            runs[name].append(parse(text))
    rows = []
    for name, _ in indexes:
        unf_p99 = [x["unfiltered"]["p99_us"] for x in runs[name]]
        for f in a.filters.split(","):
            per = [x["filters"][f] for x in runs[name]]
            ratio = [p["auto"]["qps"] / p["exact"]["qps"] for p in per]
            p99_vs_unf = [p["auto"]["p99_us"] / u for p, u in zip(per, unf_p99)]
            rows.append({
                "index": name, "filter": f, "rows": per[0]["rows"],
                "float32_scan_qps": [p["exact"]["qps"] for p in per],
                "auto_qps": [p["auto"]["qps"] for p in per],
                "auto_recall": [p["auto"]["recall"] for p in per],
                "auto_p99_us": [p["auto"]["p99_us"] for p in per],
                "ratio": ratio, "ratio_median": statistics.median(ratio),
                "p99_vs_unfiltered": p99_vs_unf, "p99_vs_unfiltered_median": statistics.median(p99_vs_unf),
            })
    res = {"schema": "searchd.bench.filtered_codes_scan.v1", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "base": a.base, "rounds": a.rounds, "indexes": dict(indexes),
           "unfiltered": {n: [x["unfiltered"] for x in runs[n]] for n, _ in indexes}, "rows": rows}
    rdir = HERE / "results"
    (rdir / f"{a.name}.json").write_text(json.dumps(res, indent=1) + "\n")
    (rdir / f"{a.name}.log").write_text("\n".join(log))
    fmt = lambda xs, f="{:.2f}": ", ".join(f.format(x) for x in xs)
    md = [f"# Selective filters: codes scan vs float32 scan ({a.rounds} rounds)", "",
          "Produced by `bench/filtered_codes_scan.py` (`examples/filtered_bench.rs`, one thread, 200 "
          "queries, ef 128). `float32 scan`: the forced exact plan; `auto`: the automatic plan, which "
          "scans the passing rows' codes and rescores with float32 (from 2,048 passing rows). Ratios "
          "are within one run; p99 vs unfiltered: the automatic plan's p99 over the same run's "
          "unfiltered p99 at ef 128.", "",
          "| index | filter | rows | float32 scan QPS | auto QPS | auto / float32 (median; runs) | auto recall@10 | auto p99 us | p99 / unfiltered p99 (median; runs) |",
          "|---|---|---:|---|---|---|---|---|---|"]
    for t in rows:
        md.append(f"| {t['index']} | {t['filter']} | {t['rows']:,} | {fmt(t['float32_scan_qps'], '{:,}')} | "
                  f"{fmt(t['auto_qps'], '{:,}')} | **{t['ratio_median']:.2f}x**; {fmt(t['ratio'])} | "
                  f"{fmt(t['auto_recall'], '{:.3f}')} | {fmt(t['auto_p99_us'], '{:.0f}')} | "
                  f"{t['p99_vs_unfiltered_median']:.2f}x; {fmt(t['p99_vs_unfiltered'])} |")
    md.append("")
    md.append("Unfiltered at ef 128 (recall@10, QPS, p99 us) per run: " + "; ".join(
        f"{n}: " + ", ".join(f"{u['recall']:.3f}/{u['qps']:,}/{u['p99_us']:.0f}" for u in res["unfiltered"][n])
        for n, _ in indexes))
    (rdir / f"{a.name}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
