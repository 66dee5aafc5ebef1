#!/usr/bin/env python3
"""Live writes on dev-gcide-50k (384-d MiniLM vectors, real texts):

1. write throughput: upserts/s and ack p50/p99 for batches of 1, 100 and 1,000 documents,
   per --fsync mode (none, group, always), one client and (batch 1) 8 concurrent clients;
   peer: qdrant-edge-py's upserts of the same vectors in process, same batches;
2. freshness: with "wait": true a search right after the reply finds the document (must be
   100%); without wait, the time until it is visible (bounded by --refresh-ms);
3. search under writes: `searchd load --mix` open loop at a fixed search rate, idle vs with
   an upsert stream (replacing documents, so the optimizer vacuums and merges): p50/p99;
4. recall after 50% of the collection was replaced by upserts, against a fresh build.

    bench/.venv/bin/python bench/live_writes.py [--bin target/release/searchd] [--out bench/results/live-writes]
"""
import argparse, http.client, json, os, random, shutil, socket, subprocess, sys, tempfile, threading, time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent.parent.parent / "shared/datasets/dev-gcide-50k"


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(self, path, body):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        self.c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        r = self.c.getresponse(); b = r.read()
        return r.status, json.loads(b) if b else None

    def get(self, path):
        self.c.request("GET", path); r = self.c.getresponse(); b = r.read()
        return r.status, json.loads(b) if b else None


def serve(binary, coll, extra, log):
    port = free_port()
    p = subprocess.Popen([binary, "serve", "--collection", str(coll), "--addr", f"127.0.0.1:{port}"] + extra,
                         stdout=log, stderr=log)
    t = time.time()
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2); c.request("GET", "/ready")
            r = c.getresponse(); r.read()
            if r.status == 200:
                return p, port
        except OSError:
            pass
        if p.poll() is not None or time.time() - t > 300:
            raise SystemExit("server did not start")
        time.sleep(0.05)


def pct(xs, q):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def ingest(binary, docs_path, out):
    if out.exists():
        shutil.rmtree(out)
    t = time.time()
    subprocess.run([binary, "ingest", "--docs", str(docs_path), "--out", str(out), "--vector-field", "vector",
                    "--text-field", "text"], check=True, stdout=subprocess.DEVNULL)
    return time.time() - t


def write_docs(path, ids, vecs, texts, heads):
    with open(path, "w") as f:
        for i, v, t, h in zip(ids, vecs, texts, heads):
            f.write(json.dumps({"id": int(i), "text": t, "headword": h, "vector": [round(float(x), 6) for x in v]}) + "\n")


def recall(port, name, queries, truth_ids, truth_kth, vec_of, k=10):
    c = Client(port); hit = 0
    for q, tset, kth in zip(queries, truth_ids, truth_kth):
        s, r = c.post(f"/collections/{name}/search", {"vector": q.tolist(), "k": k, "ef": 64})
        for h in r["hits"]:
            if h["id"] in tset or float(vec_of(h["id"]) @ q) >= kth - 1e-6:
                hit += 1
    return hit / (k * len(queries))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/searchd")
    ap.add_argument("--out", default="bench/results/live-writes")
    ap.add_argument("--search-rate", type=float, default=200.0)
    ap.add_argument("--duration", default="20s")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    work = Path(tempfile.mkdtemp(prefix="searchd-live-"))
    log = open(work / "server.log", "ab")
    base = np.load(DATA / "base.f16.npy").astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    qv = np.load(DATA / "queries.f16.npy").astype(np.float32)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    passages = [json.loads(l) for l in open(DATA / "passages.jsonl")]
    n = len(passages)
    texts = [p["text"] for p in passages]; heads = [p["headword"] for p in passages]
    rng = np.random.default_rng(3)
    out = {"schema": "searchd.bench.live-writes.v1", "data": "dev-gcide-50k", "n": n, "dim": base.shape[1]}

    # Base collection: the first 40k documents; the rest are new documents for upserts.
    n0 = 40000
    write_docs(work / "base.jsonl", range(n0), base[:n0], texts[:n0], heads[:n0])
    out["ingest_s"] = ingest(binary, work / "base.jsonl", work / "gcide")
    coll = work / "gcide"

    def body(ids, wait=False):
        return json.dumps({"docs": [{"id": int(i), "text": texts[i % n], "vector": [round(float(x), 6) for x in base[i % n]],
                                     "fields": {"headword": heads[i % n]}} for i in ids], "wait": wait})

    # 1. Throughput.
    rows = []
    next_id = [n0]
    for fsync in ["none", "group", "always"]:
        p, port = serve(binary, coll, ["--fsync", fsync, "--threads", "1"], log)
        for batch, reqs, conc in [(1, 400, 1), (1, 1600, 8), (100, 40, 1), (1000, 8, 1)]:
            bodies = []
            for _ in range(reqs):
                ids = list(range(next_id[0], next_id[0] + batch)); next_id[0] += batch
                bodies.append(body([i if i < n else i % n0 for i in ids]))
            lat = []; lock = threading.Lock()
            it = iter(bodies)

            def worker():
                c = Client(port)
                while True:
                    with lock:
                        b = next(it, None)
                    if b is None:
                        return
                    t = time.perf_counter(); s, r = c.post("/collections/gcide/docs", b)
                    assert s == 200, r
                    with lock:
                        lat.append(time.perf_counter() - t)
            t = time.perf_counter()
            th = [threading.Thread(target=worker) for _ in range(conc)]
            [x.start() for x in th]; [x.join() for x in th]
            el = time.perf_counter() - t
            row = {"engine": "searchd", "fsync": fsync, "batch": batch, "clients": conc, "requests": reqs,
                   "docs_per_s": reqs * batch / el, "ack_p50_ms": pct(lat, 0.5) * 1e3, "ack_p99_ms": pct(lat, 0.99) * 1e3}
            rows.append(row); print(row, flush=True)
        p.terminate(); p.wait()
    # Peer: qdrant-edge in process (no HTTP, no JSON): an upper bound for its server.
    try:
        import qdrant_edge as qe
        for wal in [True]:
            path = work / "qe"
            shutil.rmtree(path, ignore_errors=True)
            cfg = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=base.shape[1], distance=qe.Distance.Cosine),
                                hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=200, full_scan_threshold=10000,
                                                               max_indexing_threads=1),
                                max_search_threads=1, wal_enabled=wal)
            shard = qe.EdgeShard.create(str(path), cfg)
            i0 = 0
            for batch, reqs in [(1, 400), (100, 40), (1000, 8)]:
                pts_all = [[qe.Point(id=i0 + j * batch + b, vector=base[(i0 + j * batch + b) % n].tolist(),
                                     payload={"headword": heads[(i0 + j * batch + b) % n]}) for b in range(batch)]
                           for j in range(reqs)]
                i0 += batch * reqs
                lat = []
                t = time.perf_counter()
                for pts in pts_all:
                    t1 = time.perf_counter(); shard.update(qe.UpdateOperation.upsert_points(pts)); lat.append(time.perf_counter() - t1)
                el = time.perf_counter() - t
                row = {"engine": "qdrant-edge (in process)", "fsync": f"wal={wal}", "batch": batch, "clients": 1,
                       "requests": reqs, "docs_per_s": reqs * batch / el, "ack_p50_ms": pct(lat, 0.5) * 1e3,
                       "ack_p99_ms": pct(lat, 0.99) * 1e3}
                rows.append(row); print(row, flush=True)
    except ImportError as e:
        print(f"qdrant-edge not available: {e}", file=sys.stderr)
    out["throughput"] = rows

    # 2. Freshness.
    p, port = serve(binary, coll, ["--refresh-ms", "1000", "--threads", "1"], log)
    c = Client(port)
    seen = 0; trials = 100
    for j in range(trials):
        i = 1_000_000 + j
        v = rng.standard_normal(base.shape[1]).astype(np.float32); v /= np.linalg.norm(v)
        s, r = c.post("/collections/gcide/docs", {"docs": [{"id": i, "vector": v.tolist()}], "wait": True})
        assert s == 200 and r["status"] == "applied", r
        s, r = c.post("/collections/gcide/search", {"vector": v.tolist(), "k": 1})
        seen += int(r["hits"] and r["hits"][0]["id"] == i)
    vis = []
    for j in range(30):
        i = 2_000_000 + j
        v = rng.standard_normal(base.shape[1]).astype(np.float32); v /= np.linalg.norm(v)
        t = time.perf_counter()
        s, r = c.post("/collections/gcide/docs", {"docs": [{"id": i, "vector": v.tolist()}]})
        while True:
            s, r = c.post("/collections/gcide/search", {"vector": v.tolist(), "k": 1})
            if r["hits"] and r["hits"][0]["id"] == i:
                break
            time.sleep(0.002)
        vis.append(time.perf_counter() - t)
    out["freshness"] = {"wait_true_visible": seen / trials, "trials": trials, "refresh_ms": 1000,
                        "no_wait_visible_p50_ms": pct(vis, 0.5) * 1e3, "no_wait_visible_max_ms": max(vis) * 1e3}
    print(out["freshness"], flush=True)
    p.terminate(); p.wait()

    # 3. Search under writes: searchd load --mix, open loop, same search rate.
    p, port = serve(binary, coll, ["--threads", "1"], log)
    srch = work / "search.txt"; ups = work / "upsert.txt"
    with open(srch, "w") as f:
        for q in qv[:1000]:
            f.write("POST /collections/gcide/search " + json.dumps({"vector": [round(float(x), 6) for x in q], "k": 10, "ef": 64}) + "\n")
    with open(ups, "w") as f:
        for j in range(2000):
            ids = rng.integers(0, n0, 10)
            f.write("POST /collections/gcide/docs " + body(ids) + "\n")
    runs = {}
    for name, mix, rate in [("idle", f"search={srch}:1", a.search_rate),
                            ("writes", f"search={srch}:4,upsert={ups}:1", a.search_rate * 1.25),
                            ("idle-after", f"search={srch}:1", a.search_rate)]:
        jp = work / f"load-{name}.json"
        subprocess.run([binary, "load", "--url", f"http://127.0.0.1:{port}", "--mix", mix, "--rate", str(rate),
                        "--warmup", "3s", "--duration", a.duration, "--json", str(jp), "--quiet"], check=False,
                       stdout=subprocess.DEVNULL, stderr=log)
        rep = json.load(open(jp))
        step = rep["steps"][-1]
        eps = step.get("endpoints") or {}
        s_ep = eps.get("search") if isinstance(eps, dict) else next((e for e in eps if e.get("name") == "search"), None)
        u_ep = eps.get("upsert") if isinstance(eps, dict) else next((e for e in eps if e.get("name") == "upsert"), None)
        s, st = Client(port).get("/stats")
        runs[name] = {"search": s_ep, "upsert": u_ep, "rate": rate,
                      "live": [c_.get("live") for c_ in st.get("collections", {}).values()]}
        print(name, json.dumps(s_ep)[:300], flush=True)
    out["search_under_writes"] = runs
    p.terminate(); p.wait()

    # 4. Recall after 50% of the documents were replaced by upserts (new vectors: rows of
    # the other documents), against a fresh build of the same state.
    p, port = serve(binary, coll, ["--threads", "1"], log)
    c = Client(port)
    # The collection holds ids 0..n0 plus what the runs above added: read them back by
    # scrolling. Documents whose vector cannot be rebuilt here (the random ones of section
    # 2) are deleted first, so both sides hold exactly the known state.
    all_ids = []
    after = None
    while True:
        q = {"size": 10000, "sort": [{"id": "asc"}], "fields": []}
        if after is not None:
            q["after"] = after
        s, r = c.post("/collections/gcide/scroll", q)
        hits = r["hits"]
        all_ids += [h["id"] for h in hits]
        if len(hits) < 10000:
            break
        after = r["next"]
    unknown = [i for i in all_ids if i >= 1_000_000]
    if unknown:
        c.post("/collections/gcide/delete", {"ids": unknown, "wait": True})
    known = np.array([i for i in all_ids if i < 1_000_000])
    # Every id below 1,000,000 holds row i % n (sections 1 and 3 upsert row i % n as id i).
    vec_of_id = {int(i): base[int(i) % n] for i in known}
    # Replace half of the collection with other rows' vectors.
    repl = rng.choice(known, len(known) // 2, replace=False)
    src = rng.permutation(n)[: len(repl)] if len(repl) <= n else rng.integers(0, n, len(repl))
    for s0 in range(0, len(repl), 500):
        docs = [{"id": int(i), "text": texts[j], "vector": [round(float(x), 6) for x in base[j]], "fields": {"headword": heads[j]}}
                for i, j in zip(repl[s0:s0 + 500], src[s0:s0 + 500])]
        st_, r_ = c.post("/collections/gcide/docs", {"docs": docs})
        assert st_ == 200, r_
    for i, j in zip(repl, src):
        vec_of_id[int(i)] = base[j]
    c.post("/collections/gcide/docs", {"docs": [{"id": 0, "vector": base[0].tolist(), "text": texts[0]}], "wait": True})
    vec_of_id[0] = base[0]
    ids_arr = np.array(sorted(vec_of_id)); mat = np.stack([vec_of_id[i] for i in ids_arr])
    time.sleep(3)
    queries = qv[:300]
    truth_ids, truth_kth = [], []
    for q in queries:
        sc = mat @ q; top = np.argsort(-sc)[:10]
        truth_ids.append(set(ids_arr[top].tolist())); truth_kth.append(float(sc[top[-1]]))
    s, st = c.get("/stats")
    live_info = [c_.get("live") for c_ in st.get("collections", {}).values()]
    r_live = recall(port, "gcide", queries, truth_ids, truth_kth, lambda i: vec_of_id[i])
    p.terminate(); p.wait()
    write_docs(work / "fresh.jsonl", ids_arr, mat, [texts[i % n] for i in ids_arr], [heads[i % n] for i in ids_arr])
    ingest(binary, work / "fresh.jsonl", work / "fresh")
    p, port = serve(binary, work / "fresh", ["--threads", "1"], log)
    r_fresh = recall(port, "fresh", queries, truth_ids, truth_kth, lambda i: vec_of_id[i])
    p.terminate(); p.wait()
    out["recall_after_replace"] = {"replaced": int(len(repl)), "docs": int(len(ids_arr)), "ef": 64,
                                   "live": r_live, "fresh": r_fresh, "diff": r_live - r_fresh,
                                   "segments": (live_info[0] or {}).get("segments") if live_info else None}
    print(out["recall_after_replace"], flush=True)

    json.dump(out, open(a.out + ".json", "w"), indent=1, default=float)
    with open(a.out + ".md", "w") as f:
        f.write("# Live writes on dev-gcide-50k (384-d)\n\n2-core VM shared with other work; same-run ratios only.\n\n")
        f.write("## Write throughput\n\n| engine | fsync | batch | clients | docs/s | ack p50 ms | ack p99 ms |\n|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['engine']} | {r['fsync']} | {r['batch']} | {r['clients']} | {r['docs_per_s']:.0f} | {r['ack_p50_ms']:.2f} | {r['ack_p99_ms']:.2f} |\n")
        fr = out["freshness"]
        f.write(f"\n## Freshness\n\n- `wait: true`: visible to the next search in {fr['wait_true_visible'] * 100:.0f}% of {fr['trials']} upserts (target 100%).\n"
                f"- no wait (`--refresh-ms 1000`): visible after p50 {fr['no_wait_visible_p50_ms']:.0f} ms, max {fr['no_wait_visible_max_ms']:.0f} ms.\n")
        f.write("\n## Search under writes (`searchd load --mix`, open loop)\n\n| run | search rate | search p50 ms | search p99 ms | upsert p50 ms | upsert p99 ms |\n|---|---|---|---|---|---|\n")
        for name, r in runs.items():
            s_ = r["search"] or {}; u_ = r["upsert"] or {}
            f.write(f"| {name} | {a.search_rate:.0f}/s | {s_.get('p50_ms', float('nan')):.2f} | {s_.get('p99_ms', float('nan')):.2f} | "
                    f"{u_.get('p50_ms', float('nan')) if u_ else float('nan'):.2f} | {u_.get('p99_ms', float('nan')) if u_ else float('nan'):.2f} |\n")
        try:
            ratio = runs["writes"]["search"]["p99_ms"] / runs["idle"]["search"]["p99_ms"]
            f.write(f"\np99 under writes / idle: **{ratio:.2f}x** (target <= 2x).\n")
            out["p99_ratio"] = ratio
        except (TypeError, KeyError, ZeroDivisionError):
            pass
        rr = out["recall_after_replace"]
        f.write(f"\n## Recall after replacing 50%\n\n{rr['replaced']} of the collection's {rr['docs']} documents upserted with new vectors (other rows of the dataset); recall@10 at ef 64 (tie-aware, vs exact over the new state): live **{rr['live']:.4f}**, fresh build {rr['fresh']:.4f} (diff {rr['diff']:+.4f}).\n")
    json.dump(out, open(a.out + ".json", "w"), indent=1, default=float)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
