#!/usr/bin/env python3
"""Recall of each code kind on its own (no float32 rescoring), on one graph.

    python3 bench/codes_recall.py --base B.npy --queries Q.npy --index DIR --gt GT.npy \
        --name codes-recall-gcide [--kinds rabitq:1,rabitq:2,rabitq:4,rabitq:8,sq8,pq:48,binary]

Every kind is added to the same HNSW graph with `searchd quantize`, then `searchd eval
--vectors none` (the walk and the final order both on the codes; recall@10 tie-aware
against `searchd gt`) at each --ef, one thread. Recall is what this measures (the QPS
column is one pass, for orientation only: see bench/codes_ab.py for interleaved speed).
Writes bench/results/NAME.json and NAME.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEARCHD = HERE.parent / "target" / "release" / "searchd"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--index", required=True, help="a float32 HNSW index of --base")
    ap.add_argument("--gt", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--kinds", default="rabitq:1,rabitq:2,rabitq:4,rabitq:8,sq8,pq:48,binary")
    ap.add_argument("--efs", default="64,128,256")
    ap.add_argument("--work", default="/tmp/codes-recall")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for kind in a.kinds.split(","):
        d = work / kind.replace(":", "")
        cmd = [SEARCHD, "quantize", "--index", a.index, "--out", d, "--quantization", kind, "--force"]
        print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
        subprocess.run(list(map(str, cmd)), check=True, stdout=subprocess.DEVNULL)
        out = work / f"eval-{kind.replace(':', '')}.json"
        cmd = [SEARCHD, "eval", "--index", d, "--queries", a.queries, "--gt", a.gt, "--ef", a.efs,
               "--threads", "1", "--min-seconds", "0.5", "--vectors", "none", "--json", out]
        print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
        subprocess.run(list(map(str, cmd)), check=True, stdout=subprocess.DEVNULL)
        m = json.loads((d / "manifest.json").read_text())
        codes = next(f["bytes"] for f in m["files"] if f["name"] == "codes.bin")
        for r in json.loads(out.read_text())["rows"]:
            rows.append({"kind": kind, "ef": r["ef"], "recall_at_10": r["recall_at_10"],
                         "qps_1thread": r["qps_1thread"], "codes_bytes_per_vector": codes / m["n"]})
    res = {"schema": "searchd.bench.codes_recall.v1", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "base": a.base, "index": a.index, "rows": rows}
    rdir = HERE / "results"
    (rdir / f"{a.name}.json").write_text(json.dumps(res, indent=1) + "\n")
    efs = [int(x) for x in a.efs.split(",")]
    graph = json.loads((Path(a.index) / "manifest.json").read_text()).get("params", {})
    md = [f"# Recall of the codes alone ({Path(a.base).parent.name})", "",
          f"Produced by `bench/codes_recall.py`: one HNSW graph (m {graph.get('m')}, "
          f"ef_construction {graph.get('ef_construction')}, `{a.index}`), each kind "
          "added by `searchd quantize`, `searchd eval --vectors none` (no float32 read at all), "
          "tie-aware recall@10 against `searchd gt`, one thread. QPS: one pass, orientation only.", "",
          "| kind | codes.bin bytes/vector | " + " | ".join(f"recall@10 ef {e}" for e in efs) + " | QPS ef "
          + str(efs[len(efs) // 2]) + " |",
          "|---|---:|" + "---:|" * len(efs) + "---:|"]
    for kind in a.kinds.split(","):
        rr = {r["ef"]: r for r in rows if r["kind"] == kind}
        md.append(f"| {kind} | {rr[efs[0]]['codes_bytes_per_vector']:.0f} | "
                  + " | ".join(f"{rr[e]['recall_at_10']:.4f}" for e in efs)
                  + f" | {rr[efs[len(efs) // 2]]['qps_1thread']:,.0f} |")
    (rdir / f"{a.name}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
