#!/usr/bin/env python3
"""Filtered ANN on dev-gcide-50k: searchd's filter plans vs qdrant-edge-py and faiss HNSW.

    bash bench/setup_venv.sh
    bench/.venv/bin/python bench/filtered_ann.py [--nq 1000] [--skip-rust]

    # 1M x 384 synthetic (`searchd dataset synth`), qdrant-edge only, the filters tied to the
    # queries, the 0.05% one, forced graph plans only from 4%:
    bench/.venv/bin/python bench/filtered_ann.py --base DIR/base.npy --queries DIR/queries.npy \
        --work bench/data/filtered-synth1m --name filtered-ann-synth1m-edge --dataset synth-1m \
        --nq 200 --efs 32,64,128,256 --peer-efs 32,64,128,256,512 --skip-faiss \
        --filters 50pct,10pct,1pct,0.1pct,0.05pct,and-20x20,near-1pct,far-1pct,far-10pct \
        --forced-min-sel 0.04 --payload-members-only

1. Runs `examples/filtered_bench.rs` (release): builds/opens the searchd HNSW index
   (m=16, ef_construction=200), draws the seeded filters (50%, 10%, 1%, 0.1% uniform rows,
   AND of two independent 20% sets), computes exact filtered top-10 by brute force, and
   measures every plan (forced and automatic) over an ef sweep, one thread. It writes the
   filters, ground truth and queries, which this script reuses, so every system sees the
   same rows, the same queries and the same truth.
2. qdrant-edge-py (Qdrant's engine in process): one integer payload field per filter (two
   for the AND), payload indexes on each, HNSW m=16 ef_construct=200, one search thread;
   sweeps hnsw_ef.
3. faiss IndexHNSWFlat (M=16, efConstruction=200, inner product on unit vectors) with an
   IDSelectorBitmap through SearchParametersHNSW(sel=..., efSearch=ef); one OpenMP thread.

Recall@10 is tie-aware: a hit counts when it is in the filter and its score is at least the
10th exact score minus 1e-6 (1e-5 for peers, whose float32 sums differ in the last bits).
Writes bench/results/filtered-ann-gcide.json and .md.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = Path("/work/shared/datasets/dev-gcide-50k")
WORK = HERE / "data" / "filtered-gcide"
K = 10


def load_run(run_dir):
    meta = json.loads((run_dir / "filters.json").read_text())
    res = json.loads((run_dir / "results.json").read_text())
    dim, nq = meta["dim"], meta["nq"]
    q = np.fromfile(run_dir / "queries.f32", dtype="<f4").reshape(nq, dim)
    filters = {}
    for f in meta["filters"]:
        rows = np.fromfile(run_dir / f["file"], dtype="<u4")
        gt_ids = np.fromfile(run_dir / f["gt_ids"], dtype="<u4").reshape(nq, K)
        gt_sc = np.fromfile(run_dir / f["gt_scores"], dtype="<f4").reshape(nq, K)
        filters[f["name"]] = dict(meta=f, rows=rows, gt_ids=gt_ids, gt_scores=gt_sc)
    parts = {
        "a": np.fromfile(run_dir / "filter-and-20x20.a.u32", dtype="<u4"),
        "b": np.fromfile(run_dir / "filter-and-20x20.b.u32", dtype="<u4"),
    }
    return meta, res, q, filters, parts


def recall_of(ids_list, scores_list, f, n, tol):
    mask = np.zeros(n, dtype=bool)
    mask[f["rows"]] = True
    found = wanted = bad = 0
    for qi, (ids, sc) in enumerate(zip(ids_list, scores_list)):
        truth = f["gt_scores"][qi]
        valid = np.isfinite(truth)
        wanted += int(valid.sum())
        if not valid.any():
            continue
        kth = truth[valid][-1]
        got = 0
        for i, s in zip(ids[:K], sc[:K]):
            if i < 0 or not mask[i]:
                bad += 1 if i >= 0 else 0
                continue
            if s >= kth - tol:
                got += 1
        found += min(got, int(valid.sum()))
    return (found / wanted if wanted else 1.0), bad


def timed(fn, queries):
    for q in queries:  # warm-up
        fn(q)
    lat, cpu, out = [], [], []
    t0 = time.perf_counter()
    for q in queries:
        a, c = time.perf_counter(), time.thread_time()
        out.append(fn(q))
        cpu.append(time.thread_time() - c)
        lat.append(time.perf_counter() - a)
    total = time.perf_counter() - t0
    lat = np.array(lat) * 1e6
    cpu = np.array(cpu) * 1e6
    return out, dict(
        qps=len(queries) / total,
        p50_us=float(np.percentile(lat, 50)),
        p99_us=float(np.percentile(lat, 99)),
        cpu_mean_us=float(cpu.mean()),
        cpu_qps=float(1e6 / cpu.mean()),
    )


def run_faiss(base, queries, filters, efs, n):
    import faiss

    faiss.omp_set_num_threads(2)
    t = time.time()
    index = faiss.IndexHNSWFlat(base.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 200
    index.add(base)
    build_s = time.time() - t
    print(f"faiss: built in {build_s:.1f}s", flush=True)
    faiss.omp_set_num_threads(1)
    rows = []
    for name, f in filters.items():
        mask = np.zeros(n, dtype=bool)
        mask[f["rows"]] = True
        bits = np.packbits(mask, bitorder="little")
        sel = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))
        for ef in efs:
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=ef)

            def one(q, params=params):
                d, i = index.search(q[None, :], K, params=params)
                return i[0], d[0]

            out, st = timed(one, queries)
            rec, bad = recall_of([o[0] for o in out], [o[1] for o in out], f, n, 1e-5)
            rows.append(dict(system="faiss-hnsw", filter=name, ef=ef, recall=rec, bad=bad, **st))
            print(f"  faiss {name:10} ef={ef:4} recall={rec:.4f} qps={st['qps']:8.0f} "
                  f"p99={st['p99_us']:8.1f}us cpu_qps={st['cpu_qps']:8.0f}", flush=True)
    return rows, build_s


def run_qdrant(base, queries, filters, parts, efs, n, work, members_only=False, reuse=False):
    import qdrant_edge as qe

    path = work / "qdrant-shard"
    hnsw = qe.HnswIndexConfig(m=16, ef_construct=200, full_scan_threshold=10000,
                              max_indexing_threads=2)
    cfg = qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=base.shape[1], distance=qe.Distance.Cosine),
        hnsw_config=hnsw,
        max_search_threads=1,
        wal_enabled=False,
    )
    fields = {name.replace(".", "_"): f["rows"] for name, f in filters.items() if name != "and-20x20"}
    fields["and_a"] = parts["a"]
    fields["and_b"] = parts["b"]
    stamp = path / "searchd-filters.json"
    want_stamp = {k: [int(len(v)), int(np.asarray(v, dtype=np.int64).sum())] for k, v in fields.items()}
    want_stamp["members_only"] = bool(members_only)
    if reuse and stamp.exists() and json.loads(stamp.read_text()) == want_stamp:
        # The shard a previous run built from the same filters (same rows: counts and sums).
        shard = qe.EdgeShard.load(str(path))
        build_s = None
        print("qdrant: reusing the shard built by an earlier run", flush=True)
    else:
        if path.exists():
            shutil.rmtree(path)
        shard = qe.EdgeShard.create(str(path), cfg)
        member = {}
        for key, rows in fields.items():
            m = np.zeros(n, dtype=np.int64)
            m[rows] = 1
            member[key] = m
        t = time.time()
        for key in fields:
            shard.update(qe.UpdateOperation.create_field_index(f"f_{key}", qe.PayloadSchemaType.Integer))
        B = 1000
        for s in range(0, n, B):
            pts = [
                qe.Point(id=i, vector=base[i].tolist(),
                         payload={f"f_{k}": int(member[k][i]) for k in fields
                                  if not members_only or member[k][i]})
                for i in range(s, min(n, s + B))
            ]
            shard.update(qe.UpdateOperation.upsert_points(pts))
        shard.optimize()
        shard.flush()
        build_s = time.time() - t
        stamp.write_text(json.dumps(want_stamp))
        print(f"qdrant: built in {build_s:.1f}s", flush=True)

    def cond(key):
        return qe.FieldCondition(key=f"f_{key}", match=qe.MatchValue(1))

    rows = []
    for name, f in filters.items():
        if name == "and-20x20":
            flt = qe.Filter(must=[cond("and_a"), cond("and_b")])
        else:
            flt = qe.Filter(must=[cond(name.replace(".", "_"))])  # "." would be a JSON path
        for ef in efs:
            params = qe.SearchParams(hnsw_ef=ef)

            def one(q, flt=flt, params=params):
                hits = shard.search(qe.SearchRequest(query=qe.Query.Nearest(q.tolist()), limit=K,
                                                     filter=flt, params=params))
                return [int(h.id) for h in hits], [float(h.score) for h in hits]

            out, st = timed(one, queries)
            rec, bad = recall_of([o[0] for o in out], [o[1] for o in out], f, n, 1e-5)
            rows.append(dict(system="qdrant-edge", filter=name, ef=ef, recall=rec, bad=bad, **st))
            print(f"  qdrant {name:10} ef={ef:4} recall={rec:.4f} qps={st['qps']:8.0f} "
                  f"p99={st['p99_us']:8.1f}us cpu_qps={st['cpu_qps']:8.0f}", flush=True)
    shard.close()
    return rows, build_s


def best_at(rows, floor=0.95, key="qps"):
    ok = [r for r in rows if r["recall"] >= floor]
    return max(ok, key=lambda r: r[key]) if ok else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--efs", default="16,32,64,128,256")
    ap.add_argument("--peer-efs", default="16,32,64,128,256,512")
    ap.add_argument("--skip-rust", action="store_true")
    ap.add_argument("--skip-qdrant", action="store_true")
    ap.add_argument("--skip-faiss", action="store_true")
    ap.add_argument("--base", default=str(DATA / "base.f16.npy"))
    ap.add_argument("--queries", default=str(DATA / "queries.f16.npy"))
    ap.add_argument("--work", default=str(WORK))
    ap.add_argument("--name", default="filtered-ann-gcide", help="bench/results/NAME.{json,md}")
    ap.add_argument("--dataset", default="dev-gcide-50k")
    ap.add_argument("--filters", help="filtered_bench's --filters (default: its default set)")
    ap.add_argument("--forced-min-sel", help="filtered_bench's --forced-min-sel")
    ap.add_argument("--reuse-qdrant", action="store_true",
                    help="search the qdrant shard an earlier run built from the same filters "
                         "(its build time is then not measured)")
    ap.add_argument("--payload-members-only", action="store_true",
                    help="qdrant: a point has a filter's field only when it passes (no 0 values, "
                         "so no payload-index sub-graphs over the 99%% that fail)")
    args = ap.parse_args()
    work = Path(args.work)
    run_dir = work / "run"
    if not args.skip_rust:
        cmd = ["cargo", "run", "--release", "-q", "-p", "searchd-engine", "--example",
               "filtered_bench", "--", "--base", args.base,
               "--queries", args.queries, "--index", str(work / "hnsw"),
               "--out", str(run_dir), "--nq", str(args.nq), "--efs", args.efs]
        if args.filters:
            cmd += ["--filters", args.filters]
        if args.forced_min_sel:
            cmd += ["--forced-min-sel", args.forced_min_sel]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True)
    meta, res, queries, filters, parts = load_run(run_dir)
    n = meta["n"]
    base = np.load(args.base).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    base = np.ascontiguousarray(base)
    peer_efs = [int(x) for x in args.peer_efs.split(",")]
    peers, builds = [], {}
    if not args.skip_faiss:
        r, builds["faiss-hnsw"] = run_faiss(base, queries, filters, peer_efs, n)
        peers += r
    if not args.skip_qdrant:
        r, builds["qdrant-edge"] = run_qdrant(base, queries, filters, parts, peer_efs, n, work,
                                              args.payload_members_only, args.reuse_qdrant)
        peers += r

    ours = [r for r in res["runs"] if r["filter"] != "none"]
    unf = [r for r in res["runs"] if r["filter"] == "none"]
    out = dict(dataset=args.dataset, n=n, payload_members_only=args.payload_members_only, nq=meta["nq"], k=K, searchd=res["runs"],
               peers=peers, peer_build_s=builds, index=res["index"])
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / f"{args.name}.json").write_text(json.dumps(out, indent=1))

    md = [f"# Filtered ANN, {args.dataset} ({n:,} x {base.shape[1]}, cosine), recall@10, one thread", "",
          f"{meta['nq']} queries; filters are seeded uniform row sets (and the AND of two "
          "independent 20% fields); exact filtered ground truth by brute force. "
          "searchd HNSW m=16 efc=200 (float32); qdrant-edge-py HNSW m=16 ef_construct=200 with "
          "integer payload indexes; faiss IndexHNSWFlat M=16 efC=200 + IDSelectorBitmap. "
          "QPS is wall-clock on a 2-core machine (compare within one table); cpu QPS = 1 / mean thread CPU time per query.", "",
          "Produced by `bench/filtered_ann.py` (runs `crates/engine/examples/filtered_bench.rs`).", ""]
    md.append("## Unfiltered searchd")
    md.append("| ef | recall | QPS | p99 us | cpu QPS |")
    md.append("|---|---|---|---|---|")
    for r in unf:
        md.append(f"| {r['ef']} | {r['recall']:.4f} | {r['qps']:.0f} | {r['p99_us']:.0f} | {r['cpu_qps']:.0f} |")
    md.append("")
    summary = ["## Best QPS at recall@10 >= 0.95", "",
               "| filter | rows | searchd (plan, ef) | recall | QPS | p99 us | qdrant-edge (ef) | recall | QPS | p99 us | faiss (ef) | recall | QPS | ratio vs qdrant | ratio vs faiss | cpu ratio vs qdrant |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, f in filters.items():
        mine = [r for r in ours if r["filter"] == name]
        auto = best_at([r for r in mine if r["plan"] == "auto"])
        q = best_at([r for r in peers if r["system"] == "qdrant-edge" and r["filter"] == name])
        fa = best_at([r for r in peers if r["system"] == "faiss-hnsw" and r["filter"] == name])
        qc = best_at([r for r in peers if r["system"] == "qdrant-edge" and r["filter"] == name], key="cpu_qps")
        ac = best_at([r for r in mine if r["plan"] == "auto"], key="cpu_qps")

        def cell(r, plan=False):
            if r is None:
                return "none >= 0.95 | | | "
            lab = f"{r.get('plan', '')} {r['ef']}" if plan else f"{r['ef']}"
            return f"{lab} | {r['recall']:.4f} | {r['qps']:.0f} | {r['p99_us']:.0f}"

        ratio = lambda a, b, k="qps": f"{a[k] / b[k]:.2f}x" if a and b else "n/a"
        fcell = "none >= 0.95 | | " if fa is None else f"{fa['ef']} | {fa['recall']:.4f} | {fa['qps']:.0f}"
        summary.append(f"| {name} | {f['meta']['rows']} | {cell(auto, True)} | {cell(q)} | {fcell} | "
                       f"{ratio(auto, q)} | {ratio(auto, fa)} | {ratio(ac, qc, 'cpu_qps')} |")
        md.append(f"## {name} ({f['meta']['rows']} rows)")
        md.append("| system | plan | ef | recall | QPS | p50 us | p99 us | cpu QPS | plans used |")
        md.append("|---|---|---|---|---|---|---|---|---|")
        for r in mine:
            md.append(f"| searchd | {r['plan']} | {r['ef']} | {r['recall']:.4f} | {r['qps']:.0f} | "
                      f"{r['p50_us']:.0f} | {r['p99_us']:.0f} | {r['cpu_qps']:.0f} | "
                      f"{json.dumps(r['plans_used'])} |")
        for r in peers:
            if r["filter"] == name:
                md.append(f"| {r['system']} | | {r['ef']} | {r['recall']:.4f} | {r['qps']:.0f} | "
                          f"{r['p50_us']:.0f} | {r['p99_us']:.0f} | {r['cpu_qps']:.0f} | |")
        md.append("")
    text = "\n".join(md[:6] + summary + [""] + md[6:]) + "\n"
    (HERE / "results" / f"{args.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
