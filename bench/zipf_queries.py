#!/usr/bin/env python3
"""A Zipf-skewed query stream over a partitioned index's partitions (issue 29's protocol).

Each query's home is its nearest partition centroid (read from the index's
`partitions.bin`); partitions get Zipf weights 1 / rank^s in a seeded random order, and
`--n` queries are drawn with replacement, each with its home's weight shared among the
queries living there. Writes the drawn queries and their rows of the ground truth (with
the `.meta.json` sidecar `searchd eval` checks), so any index can be evaluated on the same
stream: partitioned, HNSW, SQ8 or IVF-PQ.

    python3 bench/zipf_queries.py --index DIR --queries q.npy --gt gt.npy --out DIR [--s 1.1]
"""
import argparse
import json
import pathlib

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, type=pathlib.Path, help="partitioned index directory")
    ap.add_argument("--queries", required=True, type=pathlib.Path)
    ap.add_argument("--gt", required=True, type=pathlib.Path)
    ap.add_argument("--out", required=True, type=pathlib.Path, help="directory for queries-zipf.npy, gt-zipf.npy")
    ap.add_argument("--s", type=float, default=1.1, help="Zipf exponent over partitions")
    ap.add_argument("--n", type=int, default=2000, help="queries drawn")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()

    raw = (a.index / "partitions.bin").read_bytes()
    fields = np.frombuffer(raw[16:64], dtype="<u8")
    n, dim, k = int(fields[0]), int(fields[1]), int(fields[2])
    cents = np.frombuffer(raw[64:64 + 4 * k * dim], dtype="<f4").reshape(k, dim)
    q = np.load(a.queries).astype(np.float32)
    if q.shape[1] != dim:
        raise SystemExit(f"queries have {q.shape[1]} dimensions, the index {dim}")
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    # Nearest centroid by L2, as the index routes.
    d = (cents * cents).sum(1)[None, :] - 2.0 * qn @ cents.T
    home = d.argmin(1)
    rng = np.random.default_rng(a.seed)
    rank = np.empty(k, dtype=np.int64)
    rank[rng.permutation(k)] = np.arange(1, k + 1)
    weight = 1.0 / rank.astype(np.float64) ** a.s
    per_home = np.bincount(home, minlength=k).astype(np.float64)
    w = weight[home] / per_home[home]
    w /= w.sum()
    pick = rng.choice(len(q), size=a.n, replace=True, p=w)
    gt = np.load(a.gt)
    meta = json.loads(pathlib.Path(str(a.gt) + ".meta.json").read_text())
    a.out.mkdir(parents=True, exist_ok=True)
    np.save(a.out / "queries-zipf.npy", q[pick])
    np.save(a.out / "gt-zipf.npy", gt[pick])
    meta["queries"] = int(a.n)
    (a.out / "gt-zipf.npy.meta.json").write_text(json.dumps(meta, indent=2))
    hot = np.bincount(home[pick], minlength=k)
    top = np.sort(hot)[::-1]
    print(json.dumps({
        "partitions": k, "s": a.s, "drawn": a.n, "distinct_queries": int(len(set(pick.tolist()))),
        "homes_reached": int((hot > 0).sum()),
        "share_top_10_partitions": round(float(top[:10].sum()) / a.n, 3),
        "share_top_26_partitions": round(float(top[:26].sum()) / a.n, 3),
    }))


if __name__ == "__main__":
    main()
