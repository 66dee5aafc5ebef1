#!/usr/bin/env python3
"""1M x 384 into Qdrant and searchd in front of it, in one run (issue 15's 1M figures).

Phases (each result is written to OUT.json as soon as it exists, so a run cut short keeps
what it measured):
  0. data, cached in --work: `searchd dataset synth --n 1000000 --dim 384 --queries 2000`, a
     flat searchd collection of it (`searchd ingest --index flat`, the upload's source), exact
     ground truth (`searchd gt`, k 10);
  1. one Qdrant node (../shared/qdrant or QDRANT_BIN) on free loopback ports, storage in
     --work;
  2. upload sweep: `searchd ingest --docs COLL --to qdrant://... --defer-indexing --no-wait`
     for every --batches x --parallels (the upload alone: HNSW indexing off, so the transport
     and Qdrant's write path are what is measured, not the optimizer competing for the 2
     cores), and qdrant-client's `upload_points` (bench/.venv) at its defaults (64 per batch,
     parallel 1) and at searchd's best setting, also with indexing off;
  3. to green: the whole ingest, until Qdrant reports the collection green with every vector
     in HNSW segments (the same rule for all: green, indexed == points or only
     below-threshold leftovers, three polls 200 ms apart), at the sweep's best batch and
     parallelism: qdrant-client, `searchd ingest` (indexing while points arrive, Qdrant's
     default), `searchd ingest --defer-indexing` (indexing switched on after the upload);
  4. front door: `searchd serve --backend qdrant` and Qdrant's REST search loaded by the same
     `searchd load` ramp (rotating queries, every answer checked, recall@10 against the exact
     ground truth), alternated --trials times on the collection left by phase 3.

Usage: python3 bench/qdrant_synth1m.py [--phases sweep,green,front] [--batches 64,256,1024]
       [--parallels 1,2,4,8] [--trials 2] [--out bench/results/qdrant-synth1m]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from qdrant_gcide import cpu_seconds, free_port, load, rss_bytes, run, wait_http
from qdrant_gcide import summary as gcide_summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PY = os.path.join(ROOT, "bench/.venv/bin/python")


def http(method, url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def wait_green(qhttp, name, dim, timeout=7200):
    """The rule of `searchd ingest --to qdrant`: green, and every vector indexed or only what
    fits in segments below the indexing threshold left, three polls in a row."""
    t0, streak = time.time(), 0
    while True:
        r = http("GET", f"http://127.0.0.1:{qhttp}/collections/{name}")["result"]
        pts = r.get("points_count") or 0
        idx = r.get("indexed_vectors_count") or 0
        thr = (r.get("config", {}).get("optimizer_config", {}).get("indexing_threshold")) or 10000
        small = (pts - idx) * dim * 4 / 1024 < thr * max(r.get("segments_count") or 1, 1)
        if r.get("status") == "green" and (idx >= pts or small):
            streak += 1
            if streak >= 3:
                return {"points": pts, "indexed": idx, "segments": r.get("segments_count"),
                        "wait_s": time.time() - t0}
        else:
            streak = 0
        if time.time() - t0 > timeout:
            raise SystemExit(f"{name} not green after {timeout} s: {r}")
        time.sleep(0.2)


PEER = r'''
import json, sys, time
import numpy as np
from qdrant_client import QdrantClient, models
port, name, base, batch, parallel, defer = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
x = np.load(base, mmap_mode="r")
n, d = x.shape
c = QdrantClient(host="127.0.0.1", grpc_port=int(port), prefer_grpc=True, timeout=600)
t0 = time.time()
if c.collection_exists(name):
    c.delete_collection(name)
c.create_collection(name, vectors_config=models.VectorParams(size=d, distance=models.Distance.COSINE),
                    hnsw_config=models.HnswConfigDiff(m=16, ef_construct=200),
                    optimizers_config=models.OptimizersConfigDiff(indexing_threshold=0) if defer else None)
t1 = time.time()
# The same payload as searchd's points: the stored document under _src.
c.upload_collection(name, vectors=x, ids=range(n), payload=({"_src": '{"id":%d}' % i} for i in range(n)),
                    batch_size=batch, parallel=parallel, wait=True)
t2 = time.time()
print(json.dumps({"create_s": t1 - t0, "upload_s": t2 - t1, "points": n}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/searchd"))
    ap.add_argument("--qdrant", default=os.environ.get("QDRANT_BIN") or shutil.which("qdrant") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "qdrant", "qdrant"))
    ap.add_argument("--work", default="/tmp/q1m")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--phases", default="sweep,green,front")
    ap.add_argument("--batches", default="64,256,1024")
    ap.add_argument("--parallels", default="1,2,4,8")
    ap.add_argument("--best", default=None, help="BATCH,PARALLEL for the green runs (default: the sweep's best)")
    ap.add_argument("--green-runs", default="peer,searchd,searchd-deferred")
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--count-only-variant", action="store_true",
                    help="front phase: also serve with --max-queue-wait-ms 0 (admission by count only)")
    ap.add_argument("--ramp", default="1,2,4,8,16,32,64")
    ap.add_argument("--warmup", default="3s")
    ap.add_argument("--duration", default="8s")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/qdrant-synth1m"))
    ap.add_argument("--md-only", action="store_true", help="rewrite OUT.md from OUT.json and stop")
    args = ap.parse_args()
    if args.md_only:
        with open(args.out + ".json") as f:
            write_md(json.load(f), args)
        return
    b, w = args.bin, args.work
    os.makedirs(w, exist_ok=True)
    data = os.path.join(w, "data")
    base, queries = os.path.join(data, "base.npy"), os.path.join(data, "queries.npy")
    if not os.path.exists(queries):
        run([b, "dataset", "synth", "--n", args.n, "--dim", 384, "--queries", 2000, "--out", data])
    ids = os.path.join(w, "ids.jsonl")
    if not os.path.exists(ids):
        with open(ids, "w") as f:
            for i in range(args.n):
                f.write('{"id":%d}\n' % i)
    coll = os.path.join(w, "coll")
    if not os.path.exists(coll):
        run([b, "ingest", "--docs", ids, "--vectors", base, "--out", coll, "--index", "flat", "--no-lexical"])
    gt = args.gt = os.path.join(w, "gt.npy")
    args.tool = {"load": [b, "load"]}  # what qdrant_gcide.load runs
    if not os.path.exists(gt):
        run([b, "gt", "--base", base, "--queries", queries, "--out", gt, "--k", 10])
    bodies = os.path.join(w, f"qdrant-bodies-ef{args.ef}.jsonl")
    if not os.path.exists(bodies):
        import struct
        with open(queries, "rb") as f:
            f.read(8)
            hlen = struct.unpack("<H", f.read(2))[0]
            f.read(hlen)
            with open(bodies, "w") as out:
                for i in range(2000):
                    v = struct.unpack("<384f", f.read(384 * 4))
                    out.write(json.dumps({"vector": [round(x, 7) for x in v], "limit": 10,
                                          "params": {"hnsw_ef": args.ef}, "qidx": i, "k": 10}) + "\n")

    result = {"schema": "searchd.bench.qdrant_synth1m.v1", "n": args.n, "dim": 384, "ef": args.ef,
              "ramp": args.ramp, "warmup": args.warmup, "duration": args.duration}
    if os.path.exists(args.out + ".json"):
        with open(args.out + ".json") as f:
            result.update({k: v for k, v in json.load(f).items() if k in ("sweep", "green", "front")})

    def save():
        with open(args.out + ".json", "w") as f:
            json.dump(result, f, indent=1)
        write_md(result, args)

    qhttp, qgrpc = free_port(), free_port()
    qdir = os.path.join(w, "qdrant")
    env = dict(os.environ, QDRANT__SERVICE__HOST="127.0.0.1", QDRANT__SERVICE__HTTP_PORT=str(qhttp),
               QDRANT__SERVICE__GRPC_PORT=str(qgrpc), QDRANT__STORAGE__STORAGE_PATH=os.path.join(qdir, "storage"),
               QDRANT__TELEMETRY_DISABLED="true", QDRANT__LOG_LEVEL="WARN")
    os.makedirs(qdir, exist_ok=True)
    qlog = open(os.path.join(qdir, "log"), "ab")
    qp = subprocess.Popen([args.qdrant], env=env, cwd=qdir, stdout=qlog, stderr=qlog)
    procs = [qp]
    senv = dict(os.environ, RUST_LOG="warn")
    target = lambda name: f"qdrant://127.0.0.1:{qgrpc}/{name}"

    def drop(name):
        try:
            http("DELETE", f"http://127.0.0.1:{qhttp}/collections/{name}")
        except Exception:
            pass

    def searchd_ingest(name, batch, par, extra):
        j = os.path.join(w, f"ingest-{name}.json")
        c0, t0 = cpu_seconds(qp.pid), time.time()
        run([b, "ingest", "--docs", coll, "--to", target(name), "--recreate", "--m", 16,
             "--ef-construction", 200, "--upload-batch", batch, "--upload-parallel", par, "--json", j,
             "--log", "warn"] + extra, env=senv)
        wall = time.time() - t0
        with open(j) as f:
            rep = json.load(f)["report"]
        return {"tool": "searchd ingest", "batch": batch, "parallel": par, "flags": extra,
                "upload_s": rep["upload_s"], "points_per_s": rep["points"] / rep["upload_s"],
                "index_wait_s": rep["index_wait_s"], "wall_s": wall, "retries": rep["retries"],
                "indexed": rep["indexed_vectors"], "points": rep["points_in_collection"],
                "qdrant_cpu_s": cpu_seconds(qp.pid) - c0, "qdrant_rss_mb": rss_bytes(qp.pid) / 2**20}

    def peer_upload(name, batch, par, defer):
        c0, t0 = cpu_seconds(qp.pid), time.time()
        out = subprocess.run([VENV_PY, "-c", PEER, str(qgrpc), name, base, str(batch), str(par),
                              "1" if defer else "0"], check=True, capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        return {"tool": "qdrant-client upload_collection", "batch": batch, "parallel": par,
                "upload_s": r["upload_s"], "points_per_s": r["points"] / r["upload_s"],
                "create_s": r["create_s"], "t0": t0, "c0": c0}

    try:
        wait_http(f"http://127.0.0.1:{qhttp}/readyz")
        result["qdrant_version"] = http("GET", f"http://127.0.0.1:{qhttp}/")["version"]
        phases = args.phases.split(",")
        if "sweep" in phases:
            result["sweep"] = []
            for batch in [int(x) for x in args.batches.split(",")]:
                for par in [int(x) for x in args.parallels.split(",")]:
                    r = searchd_ingest("sweep", batch, par, ["--defer-indexing", "--no-wait"])
                    print(json.dumps(r), flush=True)
                    result["sweep"].append(r)
                    drop("sweep")
                    save()
            best = max(result["sweep"], key=lambda r: r["points_per_s"])
            for batch, par in [(64, 1), (best["batch"], best["parallel"])]:
                r = peer_upload("sweep", batch, par, True)
                r["qdrant_cpu_s"] = cpu_seconds(qp.pid) - r.pop("c0")
                r.pop("t0")
                print(json.dumps(r), flush=True)
                result["sweep"].append(r)
                drop("sweep")
                save()
        if "green" in phases:
            if args.best:
                bb, bp = (int(x) for x in args.best.split(","))
            else:
                best = max((r for r in result["sweep"] if r["tool"] == "searchd ingest"),
                           key=lambda r: r["points_per_s"])
                bb, bp = best["batch"], best["parallel"]
            result.setdefault("green", [])
            for kind in args.green_runs.split(","):
                if kind == "peer":
                    r = peer_upload("synth", bb, bp, False)
                    g = wait_green(qhttp, "synth", 384)
                    r.update({"index_wait_s": g["wait_s"], "wall_s": time.time() - r.pop("t0"),
                              "indexed": g["indexed"], "points": g["points"], "segments": g["segments"],
                              "qdrant_cpu_s": cpu_seconds(qp.pid) - r.pop("c0"),
                              "qdrant_rss_mb": rss_bytes(qp.pid) / 2**20})
                else:
                    r = searchd_ingest("synth", bb, bp, ["--defer-indexing"] if kind == "searchd-deferred" else [])
                    r["segments"] = http("GET", f"http://127.0.0.1:{qhttp}/collections/synth")["result"].get("segments_count")
                r["kind"] = kind
                print(json.dumps(r), flush=True)
                result["green"] = [x for x in result["green"] if x.get("kind") != kind] + [r]
                save()
        if "front" in phases:
            result["front"] = []
            # searchd with serve's defaults, and with admission bounded by count only
            # (`--max-queue-wait-ms 0`): at 1M, Qdrant's ~0.9 ms per search makes 64 closed-loop
            # clients queue ~56 ms, past the default 50 ms wait bound.
            variants = [("searchd_over_qdrant", [])]
            if args.count_only_variant:
                variants.append(("searchd_over_qdrant_count_only", ["--max-queue-wait-ms", "0"]))
            for t in range(args.trials):
                trial = {}
                for key, vflags in variants:
                    port = free_port()
                    sp = subprocess.Popen([b, "serve", "--backend", "qdrant", "--qdrant-url", f"http://127.0.0.1:{qgrpc}",
                                           "--qdrant-collection", "synth", "--queries", queries, "--ef", str(args.ef),
                                           "--addr", f"127.0.0.1:{port}", "--log", "warn"] + vflags, env=senv)
                    procs.append(sp)
                    wait_http(f"http://127.0.0.1:{port}/ready")
                    q0, s0 = cpu_seconds(qp.pid), cpu_seconds(sp.pid)
                    rep = load(b, f"http://127.0.0.1:{port}", args, os.path.join(w, f"load-{key}-{t}.json"),
                               ["--query-count", "2000", "--ef", str(args.ef)])
                    q1, s1 = cpu_seconds(qp.pid), cpu_seconds(sp.pid)
                    ok = max(sum(st["ok"] for st in rep["steps"]), 1)
                    trial[key] = dict(summary(rep), front_cpu_ms_per_request=1e3 * (s1 - s0) / ok,
                                      qdrant_cpu_ms_per_request=1e3 * (q1 - q0) / ok,
                                      front_rss_mb=rss_bytes(sp.pid) / 2**20, serve_flags=vflags)
                    sp.send_signal(signal.SIGTERM)
                    sp.wait(30)
                    procs.remove(sp)
                q0 = cpu_seconds(qp.pid)
                rep = load(b, f"http://127.0.0.1:{qhttp}", args, os.path.join(w, f"load-rest-{t}.json"),
                           ["--endpoint", "POST /collections/synth/points/search", "--body-file", bodies,
                            "--server-pid", str(qp.pid), "--n-max", str(args.n)])
                ok = max(sum(st["ok"] for st in rep["steps"]), 1)
                trial["qdrant_rest"] = dict(summary(rep), qdrant_cpu_ms_per_request=1e3 * (cpu_seconds(qp.pid) - q0) / ok)
                trial["qdrant_rss_mb"] = rss_bytes(qp.pid) / 2**20
                print(json.dumps(trial), flush=True)
                result["front"].append(trial)
                save()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    save()
    print(f"wrote {args.out}.json and .md")


def summary(rep):
    """qdrant_gcide's summary of a ramp, with every step's QPS and p99."""
    return dict(gcide_summary(rep), steps=[{"c": st["concurrency"], "qps": st["qps"], "p99_ms": st["latency_ms"]["p99"],
                                            "slo_pass": st.get("slo_pass")} for st in rep["steps"]])


def write_md(r, args):
    f2 = lambda x, d=1: "-" if x is None else f"{x:,.{d}f}"
    lines = [f"# {r['n']:,} x 384 into Qdrant, and searchd in front of it (synthetic, one node)", "",
             f"`python3 bench/qdrant_synth1m.py`: {r['n']:,} x 384 vectors from `searchd dataset synth` "
             "(clustered, unit length, cosine), HNSW m=16 ef_construct=200; Qdrant "
             f"{r.get('qdrant_version', '?')} (the release binary in ../shared/qdrant), one node on loopback, "
             "on the same 2 cores as the uploader and the load generator. Release build of searchd.", ""]
    sw = r.get("sweep") or []
    if sw:
        lines += ["## Upload sweep (HNSW indexing off during the upload)", "",
                  "Every point carries the same payload (`_src`, the stored document, as searchd's "
                  "ingest writes it). Each upload goes into a fresh collection; upserts wait for Qdrant to "
                  "apply them. searchd's upload time includes connecting, creating the collection and "
                  "switching indexing off; qdrant-client's starts after its create_collection.", "",
                  "| uploader | batch | parallel | upload s | points/s | Qdrant CPU s |", "|---|---|---|---|---|---|"]
        for x in sw:
            lines.append(f"| {x['tool']} | {x['batch']} | {x['parallel']} | {x['upload_s']:.1f} | "
                         f"{x['points_per_s']:,.0f} | {f2(x.get('qdrant_cpu_s'))} |")
        s_best = max((x for x in sw if x["tool"] == "searchd ingest"), key=lambda x: x["points_per_s"])
        peers = [x for x in sw if x["tool"] != "searchd ingest"]
        lines += ["", f"Best searchd setting: **{s_best['batch']} x {s_best['parallel']}** at "
                  f"{s_best['points_per_s']:,.0f} points/s."]
        for p in peers:
            lines.append(f"searchd best / qdrant-client at {p['batch']} x {p['parallel']}: "
                         f"**{s_best['points_per_s'] / p['points_per_s']:.2f}x** ({p['points_per_s']:,.0f} points/s).")
    gr = r.get("green") or []
    if gr:
        lines += ["", "## To green and fully indexed", "",
                  "Wall time from the first request to Qdrant reporting the collection green with every "
                  "vector indexed (or only below-threshold leftovers), polled every 200 ms, three polls in a row.", "",
                  "| run | batch x parallel | upload s | then to green s | **total s** | indexed / points | segments | Qdrant CPU s | Qdrant RSS MB |",
                  "|---|---|---|---|---|---|---|---|---|"]
        names = {"peer": "qdrant-client upload_collection, indexing on (Qdrant's default)",
                 "searchd": "searchd ingest, indexing on (Qdrant's default)",
                 "searchd-deferred": "searchd ingest --defer-indexing"}
        for x in gr:
            lines.append(f"| {names.get(x['kind'], x['kind'])} | {x['batch']} x {x['parallel']} | {x['upload_s']:.1f} | "
                         f"{x['index_wait_s']:.1f} | **{x['wall_s']:.1f}** | {x['indexed']:,} / {x['points']:,} | "
                         f"{x.get('segments', '-')} | {f2(x.get('qdrant_cpu_s'))} | {f2(x.get('qdrant_rss_mb'))} |")
        by = {x["kind"]: x for x in gr}
        if "peer" in by:
            for k in ("searchd", "searchd-deferred"):
                if k in by:
                    lines.append("")
                    lines.append(f"{names[k]} / qdrant-client, time to green: **{by[k]['wall_s'] / by['peer']['wall_s']:.2f}x** "
                                 "(below 1 is faster).")
    fr = r.get("front") or []
    if fr:
        lines += ["", f"## Front door at {r['n']:,} (ef {r['ef']})", "",
                  f"Closed-loop ramp {r['ramp']} ({r['warmup']} warm-up + {r['duration']} per step), p99 <= 100 ms, "
                  "2,000 rotating queries, every answer checked, recall@10 against exact ground truth; the two "
                  "servers take turns in each trial.", "",
                  "| trial | server | sustainable QPS | at conc. | p99 ms | recall@10 | front RSS MB | front CPU ms/req | Qdrant CPU ms/req | 503s in the ramp |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        ratios, ratios_c = [], []
        for i, t in enumerate(fr):
            f, q = t["searchd_over_qdrant"], t["qdrant_rest"]
            for key, label in [("searchd_over_qdrant", "searchd over Qdrant (gRPC), serve defaults"),
                               ("searchd_over_qdrant_count_only", "searchd over Qdrant, `--max-queue-wait-ms 0`")]:
                x = t.get(key)
                if not x:
                    continue
                e503 = x["errors"].get("http_503", 0)
                lines.append(f"| {i} | {label} | {x['sustainable_qps']:,.0f} | {x['at_concurrency']} | {f2(x['p99_ms'], 2)} | "
                             f"{f2(x['recall_at_10'], 4)} | {f2(x['front_rss_mb'])} | {f2(x['front_cpu_ms_per_request'], 3)} | "
                             f"{f2(x['qdrant_cpu_ms_per_request'], 3)} | {e503:,} |")
                if key.endswith("count_only"):
                    ratios_c.append(x["sustainable_qps"] / max(q["sustainable_qps"], 1e-9))
            lines.append(f"| {i} | Qdrant REST, directly | {q['sustainable_qps']:,.0f} | {q['at_concurrency']} | {f2(q['p99_ms'], 2)} | "
                         f"{f2(q['recall_at_10'], 4)} | - | - | {f2(q['qdrant_cpu_ms_per_request'], 3)} | {q['errors'].get('http_503', 0):,} |")
            ratios.append(f["sustainable_qps"] / max(q["sustainable_qps"], 1e-9))
        lines += ["", f"Front-door efficiency (searchd over Qdrant / Qdrant REST, same trial): "
                  f"**{', '.join(f'{x:.2f}x' for x in ratios)}** with serve's defaults"
                  + (f", **{', '.join(f'{x:.2f}x' for x in ratios_c)}** with admission by count only" if ratios_c else "")
                  + " (target >= 0.95x). Qdrant RSS with the collection: "
                  f"{f2(fr[-1].get('qdrant_rss_mb'))} MB."]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
