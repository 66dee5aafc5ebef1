#!/usr/bin/env python3
"""Render bench/partitioned_caps.sh's JSON into one Markdown page (and a combined JSON).

    python3 bench/partitioned_caps_report.py [OUT_PREFIX]

Reads bench/results/OUT_PREFIX-*.json (default partitioned-caps-synth1m), writes
OUT_PREFIX.md and OUT_PREFIX.json. Only the standard library.
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
prefix = sys.argv[1] if len(sys.argv) > 1 else "partitioned-caps-synth1m"
res = ROOT / "bench" / "results"


def load(name):
    p = res / f"{prefix}-{name}.json"
    return json.loads(p.read_text()) if p.exists() else None


out = {"schema": "searchd.partitioned-caps.v1", "ram": {}, "capped": {}}
lines = [f"# Partitioned index vs HNSW, in RAM and under a memory cap ({prefix})", "",
         "Produced by `bench/partitioned_caps.sh` then `bench/partitioned_caps_report.py`; "
         "1M x 384 `dataset synth` (seed 1), exact ground truth, k=10, release build, 2-core VM.", ""]

lines += ["## In RAM, no cap (1,000 uniform queries)", "",
          "| index | nprobe | ef | recall@10 | q/s 1 thread | p99 ms | q/s 2 threads |", "|---|---|---|---|---|---|---|"]
for name in ["ram-hnsw", "ram-part256sq8"]:
    d = load(name)
    if not d:
        continue
    out["ram"][name] = d
    for r in d["rows"]:
        lines.append(f"| {name[4:]} | {r.get('nprobe') or '-'} | {r['ef']} | {r['recall_at_10']:.4f} | "
                     f"{r['qps_1thread']:,.0f} | {r['p99_us'] / 1e3:.1f} | {r['qps_all_threads']:,.0f} |")
    if d.get("partitions"):
        out["ram"][name + "-partitions"] = d["partitions"]
lines.append("")

sizes = load("partitions")
if sizes:
    out["partitions"] = sizes
    z = sizes["zipf"]
    lines += ["## Partitions", "",
              f"{sizes['partitions']} partitions over {sizes['rows']:,} rows, {sizes['copies']:,} boundary copies "
              f"(overlap 1): sizes min / median / max {sizes['size_min']:,} / {sizes['size_median']:,.0f} / "
              f"{sizes['size_max']:,} (max/median {sizes['max_over_median']:.2f}). The Zipf stream: {z['drawn']:,} "
              f"draws of {z['distinct_queries']} distinct queries, homes in {z['homes_reached']} partitions, "
              f"the top 10 partitions home {z['share_top_10_partitions']:.0%} of the draws.", ""]

caps = sorted(res.glob(f"{prefix}-*.json"))
rows = []
for p in caps:
    name = p.stem[len(prefix) + 1:]
    if name.startswith("ram-") or name == "partitions":
        continue
    d = json.loads(p.read_text())
    if "rows" not in d or not d["rows"]:
        continue
    r = d["rows"][0]
    out["capped"][name] = d
    stream = "zipf" if name.endswith("zipf") else "uniform"
    parts = r.get("partitions") or {}
    rows.append((stream, name.rsplit("-", 1)[0], r, parts, d))
if rows:
    cap = rows[0][2]["limit_mb"]
    lines += [f"## Under a {cap} MB cgroup cap (20% of the float32 vectors' 1,536 MB)", "",
              "`searchd bench memory`: eval in a child inside a memory cgroup, page cache dropped first; "
              "uniform = the first 300 queries, zipf = the first 400 of a Zipf (s=1.1 over partitions) "
              "stream (`bench/zipf_queries.py`). q/s is closed-loop, each pass at least 10 s.", "",
              "| stream | config | outcome | recall@10 | q/s 1 thread | p50 ms | p99 ms | q/s 2 threads | peak RSS MB | cgroup peak MB | major faults | loads | evictions | resident | load p99 ms |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for stream, cfg, r, parts, d in sorted(rows, key=lambda x: (x[0], x[1])):
        f = lambda v, fmt: (fmt.format(v) if v is not None else "-")
        lines.append(
            f"| {stream} | {cfg} | {r['outcome']} | {f(r.get('recall_at_10'), '{:.4f}')} | "
            f"{f(r.get('qps_1thread'), '{:,.1f}')} | {f(r.get('p50_us') and r['p50_us'] / 1e3, '{:.1f}')} | "
            f"{f(r.get('p99_us') and r['p99_us'] / 1e3, '{:.1f}')} | {f(r.get('qps_all_threads'), '{:,.1f}')} | "
            f"{f(r.get('peak_rss_bytes') and r['peak_rss_bytes'] / 1e6, '{:.0f}')} | "
            f"{f(r.get('cgroup_peak_bytes') and r['cgroup_peak_bytes'] / 1e6, '{:.0f}')} | "
            f"{f(r.get('major_faults'), '{:,}')} | {f(parts.get('loads'), '{:,}')} | "
            f"{f(parts.get('evictions'), '{:,}')} | {f(parts.get('resident'), '{}')} | "
            f"{f(parts.get('load_ms_p99'), '{:.1f}')} |")
    lines.append("")
(res / f"{prefix}.md").write_text("\n".join(lines) + "\n")
(res / f"{prefix}.json").write_text(json.dumps(out, indent=1) + "\n")
print("\n".join(lines))
