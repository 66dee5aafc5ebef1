#!/usr/bin/env python3
"""searchd's code kinds on one graph, interleaved: float32, SQ8 and RaBitQ-style 4 and 8 bits,
and (with --peers) the peer libraries in the same rounds.

    python3 bench/codes_ab.py --base B.npy --queries Q.npy --name codes-ab-gcide \
        [--index DIR_OF_AN_HNSW_INDEX] [--rounds 3] [--efs 64,128,256]
    bench/.venv/bin/python bench/codes_ab.py ... --peers hnswlib,faiss-hnsw,faiss-hnsw-sq8

One HNSW graph (built from --base, or --index when given) gets each code kind with
`searchd quantize` (the graph is shared, so only the codes differ). Then, for `--rounds`
rounds, every configuration runs `searchd eval` (one thread, the same queries and exact
ground truth from `searchd gt`) one after another in the same order (A, B, C, D, A, B, ...):
this VM's speed drifts by 10-30% between minutes, so only same-round ratios are evidence.
Each code kind runs twice: rescored with float32 (the default) and alone (`--vectors none`,
recall of the codes without any float32 read). Reports the medians over rounds with the
spread (min-max), recall@10 (tie-aware, from `searchd eval`), code bytes per vector, and the
QPS ratio to SQ8 per round, and for searchd the bytes a query reads (from `searchd eval`'s
distance and expansion counts) and their share of this machine's measured read bandwidth
at the measured QPS. Writes bench/results/NAME.json and NAME.md.

Peers (`--peers`, names as `bench/peers.py` has them; needs the bench venv): each is built
once (M 16, ef_construction 200, 2 threads, on the unit-normalised float32 base) and then,
in every round, searched by a fresh `bench/peers.py` worker process (one thread, one query
at a time, the same ef values and seconds), its recall@10 tie-aware against the same exact
neighbours.
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


def peer_rows(P, lib, work, base_p, queries_p, n, efs, min_seconds, base, queries, kth, rnd):
    """One round of one peer: a fresh search worker; rows by ef with tie-aware recall."""
    import numpy as np

    found = work / f"peer-{lib}-{rnd}.npz"
    res = P.run_worker("search", {"lib": lib, "threads": 1, "efs": efs, "min_seconds": min_seconds,
                                  "queries": str(queries_p), "index_path": str(work / f"peer-{lib}.idx"),
                                  "n": n, "found": str(found)}, 1)
    ids = np.load(found)
    out = {}
    for row in res["rows"]:
        row["recall_at_10"] = P.tie_aware_recall(ids[f"ef{row['ef']}"], base, queries, kth)
        out[row["ef"]] = row
    return out


def read_bandwidth(gib: float = 1.0, repeats: int = 5) -> float:
    """This machine's single-thread sequential read bandwidth, bytes/s: numpy summing a
    `gib` GiB float32 array (touched first, so no page faults are timed), best of
    `repeats`."""
    import numpy as np

    a = np.ones(int(gib * 2**30) // 4, dtype=np.float32)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.add.reduce(a)
        best = min(best, time.perf_counter() - t)
    return a.nbytes / best


def bytes_per_query(row: dict, row_bytes: float, m: int, rescored: int) -> float | None:
    """Bytes a graph search reads per query (a lower bound: no cache-line rounding): every
    distance reads one row of what the walk scores (`row_bytes`), every expansion one
    level-0 neighbour list (2m ids and a count, 4 bytes each), and the rescoring
    `rescored` float32 rows."""
    d, e = row.get("distances_per_query"), row.get("expansions_per_query")
    if d is None or e is None:
        return None
    return d * row_bytes + e * 4 * (2 * m + 1) + rescored


def qps_at_recall(by_ef: dict, target: float) -> float | None:
    """QPS at recall@10 `target` on one round's curve (rows by ef): log-QPS interpolated
    linearly in recall between the two sweep points around the target (the first point
    when it already reaches it); None when no point reaches it."""
    import math

    pts = sorted((r["recall_at_10"], r["qps_1thread"]) for r in by_ef.values())
    for i, (rec, qps) in enumerate(pts):
        if rec >= target:
            if i == 0:
                return qps
            r0, q0 = pts[i - 1]
            t = (target - r0) / (rec - r0) if rec > r0 else 1.0
            return math.exp(math.log(q0) + t * (math.log(qps) - math.log(q0)))
    return None


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
    ap.add_argument("--peers", default="", help="peer libraries, comma-separated (bench/peers.py names)")
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
    bandwidth = read_bandwidth()
    print(f"sequential read bandwidth, one thread: {bandwidth / 1e9:.1f} GB/s", file=sys.stderr, flush=True)
    manifest = json.loads((plain / "manifest.json").read_text())
    dim, m_links = manifest["dim"], manifest.get("params", {}).get("m", 16)
    peers = [p for p in a.peers.split(",") if p]
    configs = CONFIGS + [(p, "peer", "-") for p in peers]
    runs = {name: [] for name, _, _ in configs}
    if peers:
        import numpy as np

        sys.path.insert(0, str(HERE))
        import peers as P

        unit = lambda x: np.ascontiguousarray(x / np.linalg.norm(x, axis=1, keepdims=True), dtype=np.float32)
        base = unit(np.load(a.base).astype(np.float32))
        queries = unit(np.load(a.queries).astype(np.float32))
        base_p, queries_p = work / "peer-base.npy", work / "peer-queries.npy"
        np.save(base_p, base)
        np.save(queries_p, queries)
        gt_ids = np.load(gt)[:, :10].astype(np.int64)
        kth = P.gt_scores(base, queries, gt_ids)[:, 9]
        for lib in peers:
            if not (work / f"peer-{lib}.idx").exists():
                print(f"+ build {lib}", file=sys.stderr, flush=True)
                built = P.run_worker("build", {"lib": lib, "threads": 2, "base": str(base_p),
                                               "index_path": str(work / f"peer-{lib}.idx")}, 2)
                print(f"  {lib} built in {built['build_seconds']:.1f} s", file=sys.stderr, flush=True)
    for r in range(a.rounds):
        for name, q, vectors in configs:
            if q == "peer":
                runs[name].append(peer_rows(P, name, work, base_p, queries_p, base.shape[0], efs,
                                            a.min_seconds, base, queries, kth, r))
                continue
            out = work / f"eval-{r}-{name.replace(' ', '-')}.json"
            run([SEARCHD, "eval", "--index", dirs[q], "--queries", a.queries, "--gt", gt,
                 "--ef", a.efs, "--threads", "1", "--min-seconds", a.min_seconds,
                 "--vectors", vectors, "--json", out])
            rows = json.loads(out.read_text())["rows"]
            runs[name].append({row["ef"]: row for row in rows})
    table = []
    for name, q, vectors in configs:
        for ef in efs:
            qps = [rr[ef]["qps_1thread"] for rr in runs[name]]
            rec = [rr[ef]["recall_at_10"] for rr in runs[name]]
            vs_sq8 = None
            if name != "sq8":
                vs_sq8 = [rr[ef]["qps_1thread"] / s[ef]["qps_1thread"]
                          for rr, s in zip(runs[name], runs["sq8"])]
            touched = None
            if q != "peer":
                cb = code_bytes(dirs[q]) if q != "none" else 4 * dim
                rescored = 4 * 10 * 4 * dim if (q != "none" and vectors != "none") else 0
                per_round = [bytes_per_query(rr[ef], cb, m_links, rescored) for rr in runs[name]]
                if all(b is not None for b in per_round):
                    touched = statistics.median(per_round)
            share = [touched * rr[ef]["qps_1thread"] / bandwidth for rr in runs[name]] if touched else None
            table.append({
                "bytes_per_query": touched,
                "bandwidth_share_per_round": share,
                "bandwidth_share_median": statistics.median(share) if share else None,
                "config": name, "quantization": q, "vectors": vectors, "ef": ef,
                "code_bytes_per_vector": round(code_bytes(dirs[q]), 1) if q in dirs else None,
                "recall_at_10": statistics.median(rec),
                "qps_1thread_median": statistics.median(qps), "qps_1thread_min": min(qps),
                "qps_1thread_max": max(qps),
                "qps_vs_sq8_per_round": vs_sq8,
                "qps_vs_sq8_median": statistics.median(vs_sq8) if vs_sq8 else None,
                "p99_us_median": statistics.median(rr[ef]["p99_us"] for rr in runs[name]),
            })
    # QPS at equal recall: every configuration's curve interpolated per round, then each
    # searchd configuration's ratio to each peer within the round (median, with the rounds).
    targets = [0.90, 0.95, 0.99]
    at_recall = []
    for name, q, _ in configs:
        for tgt in targets:
            per_round = [qps_at_recall(rr, tgt) for rr in runs[name]]
            at_recall.append({"config": name, "recall": tgt, "qps_per_round": per_round,
                              "qps_median": statistics.median(per_round) if None not in per_round else None})
    lookup = {(x["config"], x["recall"]): x for x in at_recall}
    vs_peers = []
    for name, q, _ in configs:
        if q == "peer":
            continue
        for p in peers:
            for tgt in targets:
                mine, theirs = lookup[(name, tgt)]["qps_per_round"], lookup[(p, tgt)]["qps_per_round"]
                if None in mine or None in theirs:
                    continue
                ratios = [x / y for x, y in zip(mine, theirs)]
                vs_peers.append({"config": name, "peer": p, "recall": tgt, "ratio_per_round": ratios,
                                 "ratio_median": statistics.median(ratios)})
    res = {"schema": "searchd.bench.codes_ab.v1", "dataset": a.dataset or Path(a.base).parent.name,
           "base": a.base, "rounds": a.rounds, "efs": efs, "searchd": str(SEARCHD),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "read_bandwidth_bytes_per_s": bandwidth,
           "rows": table, "qps_at_recall": at_recall, "vs_peers": vs_peers,
           "per_round": {name: [{str(ef): {"recall_at_10": rr[ef]["recall_at_10"],
                                           "qps_1thread": rr[ef]["qps_1thread"]} for ef in efs}
                                for rr in runs[name]] for name, _, _ in configs}}
    rdir = HERE / "results"
    (rdir / f"{a.name}.json").write_text(json.dumps(res, indent=1) + "\n")
    md = [f"# Code kinds on one graph, interleaved ({res['dataset']}, {a.rounds} rounds)", "",
          "Produced by `bench/codes_ab.py`: one HNSW graph (m 16, ef_construction 200), each code "
          "kind added with `searchd quantize`; every round runs every configuration one after "
          "another (one thread, `searchd eval`, tie-aware recall@10 against `searchd gt`). "
          "\"alone\": `--vectors none`, no float32 rescoring. QPS: median over rounds (min-max); "
          "the ratio to SQ8 is taken within each round, then the median. "
          f"KB/query: bytes a searchd query reads (distances x row bytes + neighbour lists read "
          f"x list bytes + rescored float32 rows; counted by `searchd eval`, a lower bound with "
          f"no cache-line rounding); bw share: KB/query x QPS over this machine's one-thread "
          f"sequential read bandwidth ({bandwidth / 1e9:.1f} GB/s, numpy sum of 1 GiB, best of 5), "
          f"median over rounds.", "",
          "| config | ef | codes.bin bytes/vector | recall@10 | QPS 1 thread | vs sq8 (per round) | p99 us | KB/query | bw share |",
          "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for t in table:
        ratio = "-" if t["qps_vs_sq8_per_round"] is None else (
            f"{t['qps_vs_sq8_median']:.2f}x ({', '.join(f'{x:.2f}' for x in t['qps_vs_sq8_per_round'])})")
        cb = "-" if t["code_bytes_per_vector"] is None else f"{t['code_bytes_per_vector']:.0f}"
        md.append(f"| {t['config']} | {t['ef']} | {cb} | {t['recall_at_10']:.4f} | "
                  f"{t['qps_1thread_median']:,.0f} ({t['qps_1thread_min']:,.0f}-{t['qps_1thread_max']:,.0f}) | "
                  f"{ratio} | {t['p99_us_median']:.0f} | "
                  + ("-" if t["bytes_per_query"] is None else f"{t['bytes_per_query'] / 1e3:.0f}")
                  + " | " + ("-" if t["bandwidth_share_median"] is None else f"{t['bandwidth_share_median']:.3f}")
                  + " |")
    fmt = lambda x: "-" if x is None else f"{x:,.0f}"
    md += ["", "QPS at equal recall@10 (one thread; each round's curve interpolated between sweep "
           "points, log QPS linear in recall; median over rounds, \"-\": the sweep never reached it):", "",
           "| config | " + " | ".join(f"QPS @ {t:.2f}" for t in targets) + " |",
           "|---|" + "---:|" * len(targets)]
    for name, _, _ in configs:
        md.append(f"| {name} | " + " | ".join(fmt(lookup[(name, t)]["qps_median"]) for t in targets) + " |")
    if vs_peers:
        md += ["", "searchd over each peer at equal recall (ratio within each round; median, then the rounds):", "",
               "| searchd config | peer | recall | ratio | per round |", "|---|---|---:|---:|---|"]
        for v in vs_peers:
            if v["config"] in ("rabitq4", "rabitq4 alone", "sq8"):
                md.append(f"| {v['config']} | {v['peer']} | {v['recall']:.2f} | {v['ratio_median']:.2f}x | "
                          + ", ".join(f"{x:.2f}" for x in v["ratio_per_round"]) + " |")
    (rdir / f"{a.name}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
