#!/usr/bin/env python3
"""Write throughput through searchd's Qdrant backend, against writing to Qdrant directly, in
one run, on dev-gcide-50k (384-d MiniLM vectors, real texts):

- a Qdrant node on free loopback ports; the first 40,000 documents ingested by `searchd
  ingest --to qdrant://` (payload indexes of the mapping, waited for green);
- `searchd serve --backend qdrant`; upserts of new documents (the last 10,000, then ids
  beyond, cycling the vectors) through `POST /collections/gcide/docs` with `"wait": true`
  (Qdrant's wait=true: applied before the reply), batches of 1, 100 and 1,000, one client and
  (batch 1) 8 concurrent clients;
- the same points written to Qdrant directly, same batches and clients, with wait=true: by
  qdrant-client over gRPC (bench/.venv) and by Qdrant's REST API (`PUT
  /collections/gcide/points?wait=true`, JSON like searchd's bodies);
- the phases take turns per configuration (searchd, REST, gRPC client), --trials times;
- writes not waited for (`"wait": false`) through searchd: throughput, and the time until a
  document is visible to a count by id.

    bench/.venv/bin/python bench/qdrant_writes.py [--trials 2] [--out bench/results/qdrant-writes]
"""
import argparse, http.client, json, os, socket, subprocess, tempfile, threading, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared/datasets/dev-gcide-50k"


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def req(self, method, path, body=None):
        data = body if body is None or isinstance(body, (bytes, str)) else json.dumps(body)
        self.c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = self.c.getresponse(); b = r.read()
        try:
            return r.status, json.loads(b) if b else None
        except ValueError:
            return r.status, b.decode(errors="replace")


def wait_http(port, path, timeout=120):
    t = time.time()
    while time.time() - t < timeout:
        try:
            s, _ = Client(port).req("GET", path)
            if s == 200:
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise SystemExit(f"port {port}{path} not ready after {timeout}s")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def drive(bodies, conc, send):
    """Send every body, `conc` threads each with its own connection; (seconds, latencies)."""
    lat, lock, it, failed = [], threading.Lock(), iter(bodies), []

    def worker():
        try:
            c = send()
            while True:
                with lock:
                    b = next(it, None)
                if b is None:
                    return
                t = time.perf_counter(); c(b)
                with lock:
                    lat.append(time.perf_counter() - t)
        except Exception as e:  # a failed write fails the run
            failed.append(repr(e))
    t = time.perf_counter()
    th = [threading.Thread(target=worker) for _ in range(conc)]
    [x.start() for x in th]; [x.join() for x in th]
    if failed or len(lat) != len(bodies):
        raise SystemExit(f"{len(bodies) - len(lat)} writes failed: {failed[:3]}")
    return time.perf_counter() - t, lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/searchd"))
    ap.add_argument("--qdrant", default=os.environ.get("QDRANT_BIN", str(ROOT.parent / "shared/qdrant/qdrant")))
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench/results/qdrant-writes"))
    a = ap.parse_args()
    from qdrant_client import QdrantClient, models

    work = Path(tempfile.mkdtemp(prefix="searchd-qwrites-"))
    log = open(work / "log", "ab")
    base = np.load(DATA / "base.f16.npy").astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    passages = [json.loads(l) for l in open(DATA / "passages.jsonl")]
    n = len(passages)
    texts = [p["text"] for p in passages]; heads = [p["headword"] for p in passages]
    n0 = 40000
    with open(work / "base.jsonl", "w") as f:
        for i in range(n0):
            f.write(json.dumps({"id": i, "text": texts[i], "headword": heads[i],
                                "vector": [round(float(x), 6) for x in base[i]]}) + "\n")
    subprocess.run([a.bin, "ingest", "--docs", work / "base.jsonl", "--vector-field", "vector", "--index", "flat",
                    "--no-lexical", "--out", work / "coll", "--log", "warn"], check=True, stdout=log, stderr=log)

    qhttp, qgrpc = free_port(), free_port()
    env = dict(os.environ, QDRANT__SERVICE__HOST="127.0.0.1", QDRANT__SERVICE__HTTP_PORT=str(qhttp),
               QDRANT__SERVICE__GRPC_PORT=str(qgrpc), QDRANT__STORAGE__STORAGE_PATH=str(work / "storage"),
               QDRANT__TELEMETRY_DISABLED="true", QDRANT__LOG_LEVEL="WARN")
    procs = [subprocess.Popen([a.qdrant], env=env, cwd=work, stdout=log, stderr=log)]
    out = {"schema": "searchd.bench.qdrant_writes.v1", "data": "dev-gcide-50k", "base_docs": n0, "rows": []}
    try:
        wait_http(qhttp, "/readyz")
        time.sleep(0.5)
        t0 = time.time()
        subprocess.run([a.bin, "ingest", "--docs", work / "coll", "--to", f"qdrant://127.0.0.1:{qgrpc}/gcide",
                        "--log", "warn"], check=True, stdout=log, stderr=log)
        out["ingest_s"] = time.time() - t0
        port = free_port()
        procs.append(subprocess.Popen([a.bin, "serve", "--backend", "qdrant", "--qdrant-url", f"http://127.0.0.1:{qgrpc}",
                                       "--qdrant-collection", "gcide", "--addr", f"127.0.0.1:{port}", "--log", "warn"],
                                      stdout=log, stderr=log))
        wait_http(port, "/ready")
        qc = QdrantClient(host="127.0.0.1", grpc_port=qgrpc, prefer_grpc=True, timeout=120)
        next_id = [n0]

        def ids_for(batch):
            ids = list(range(next_id[0], next_id[0] + batch)); next_id[0] += batch
            return ids

        def doc(i):
            j = i % n if i < n else n0 + i % (n - n0)
            return j, {"id": i, "text": texts[j], "fields": {"headword": heads[j]},
                       "vector": [round(float(x), 6) for x in base[j]]}

        def searchd_body(ids, wait):
            return json.dumps({"docs": [doc(i)[1] for i in ids], "wait": wait})

        def rest_body(ids):
            pts = []
            for i in ids:
                j, d = doc(i)
                src = json.dumps({"id": i, "text": d["text"], "headword": heads[j]})
                pts.append({"id": i, "vector": d["vector"], "payload": {"_src": src, "headword": heads[j]}})
            return json.dumps({"points": pts})

        def grpc_points(ids):
            pts = []
            for i in ids:
                j, d = doc(i)
                src = json.dumps({"id": i, "text": d["text"], "headword": heads[j]})
                pts.append(models.PointStruct(id=i, vector=d["vector"], payload={"_src": src, "headword": heads[j]}))
            return pts

        def searchd_send():
            c = Client(port)
            def f(b):
                s, r = c.req("POST", "/collections/gcide/docs", b)
                assert s == 200 and r["status"] in ("applied", "acknowledged"), (s, r)
            return f

        def rest_send():
            c = Client(qhttp)
            def f(b):
                s, r = c.req("PUT", "/collections/gcide/points?wait=true", b)
                assert s == 200 and r["result"]["status"] == "completed", (s, r)
            return f

        def grpc_send():
            def f(pts):
                r = qc.upsert("gcide", points=pts, wait=True)
                assert r.status == models.UpdateStatus.COMPLETED, r
            return f

        configs = [(1, 400, 1), (1, 1600, 8), (100, 40, 1), (1000, 8, 1)]
        for trial in range(a.trials):
            for batch, reqs, conc in configs:
                for engine in ["searchd over Qdrant", "Qdrant REST", "qdrant-client gRPC"]:
                    idss = [ids_for(batch) for _ in range(reqs)]
                    if engine == "searchd over Qdrant":
                        bodies, send = [searchd_body(x, True) for x in idss], searchd_send
                    elif engine == "Qdrant REST":
                        bodies, send = [rest_body(x) for x in idss], rest_send
                    else:
                        bodies, send = [grpc_points(x) for x in idss], grpc_send
                    el, lat = drive(bodies, conc, send)
                    row = {"trial": trial, "engine": engine, "batch": batch, "clients": conc, "requests": reqs,
                           "docs_per_s": reqs * batch / el, "ack_p50_ms": pct(lat, 0.5) * 1e3,
                           "ack_p99_ms": pct(lat, 0.99) * 1e3}
                    out["rows"].append(row); print(row, flush=True)
        # Writes not waited for, through searchd: throughput at batch 100, then visibility.
        idss = [ids_for(100) for _ in range(40)]
        el, lat = drive([searchd_body(x, False) for x in idss], 1, searchd_send)
        out["no_wait"] = {"batch": 100, "requests": 40, "docs_per_s": 4000 / el,
                          "ack_p50_ms": pct(lat, 0.5) * 1e3, "ack_p99_ms": pct(lat, 0.99) * 1e3}
        c = Client(port)
        vis = []
        for _ in range(50):
            i = ids_for(1)[0]
            c.req("POST", "/collections/gcide/docs", searchd_body([i], False))
            t = time.perf_counter()
            while True:
                s, r = c.req("POST", "/collections/gcide/count", {"filter": {"ids": {"values": [i]}}})
                if s == 200 and r["count"] == 1:
                    break
                if time.perf_counter() - t > 10:
                    raise SystemExit(f"document {i} not visible after 10 s")
            vis.append(time.perf_counter() - t)
        out["no_wait"].update({"visible_p50_ms": pct(vis, 0.5) * 1e3, "visible_max_ms": max(vis) * 1e3,
                               "visibility_trials": len(vis)})
        s, r = c.req("POST", "/collections/gcide/count", {})
        out["final_count"] = r["count"]
        out["expected_count"] = next_id[0]
        assert r["count"] == next_id[0], (r, next_id[0])
    finally:
        for p in procs:
            p.kill(); p.wait()
    with open(a.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
    lines = ["# Writes through searchd's Qdrant backend vs writing to Qdrant directly (dev-gcide-50k)", "",
             "`bench/.venv/bin/python bench/qdrant_writes.py`: 40,000 documents ingested into one Qdrant node "
             "(loopback, same 2 cores as the clients), then upserts of new 384-d documents with text and a "
             "keyword field, every write waited for (applied before the reply). searchd: `POST "
             "/collections/gcide/docs` with `\"wait\": true` (searchd checks each document, types the fields "
             "and sends one gRPC upsert); Qdrant REST: `PUT /collections/gcide/points?wait=true` with the same "
             "payload layout; qdrant-client: `upsert(wait=True)` over gRPC from Python. The three take turns "
             "for each configuration.", "",
             "| trial | batch | clients | writer | docs/s | ack p50 ms | ack p99 ms | searchd / REST |",
             "|---|---|---|---|---|---|---|---|"]
    rows = out["rows"]
    for r in rows:
        rest = next(x for x in rows if x["trial"] == r["trial"] and x["batch"] == r["batch"]
                    and x["clients"] == r["clients"] and x["engine"] == "Qdrant REST")
        ratio = f"**{r['docs_per_s'] / rest['docs_per_s']:.2f}x**" if r["engine"] == "searchd over Qdrant" else ""
        lines.append(f"| {r['trial']} | {r['batch']} | {r['clients']} | {r['engine']} | {r['docs_per_s']:,.0f} | "
                     f"{r['ack_p50_ms']:.2f} | {r['ack_p99_ms']:.2f} | {ratio} |")
    nw = out["no_wait"]
    lines += ["", f"Not waited for (`\"wait\": false`, batch 100, one client): {nw['docs_per_s']:,.0f} docs/s, ack p50 "
              f"{nw['ack_p50_ms']:.2f} ms, p99 {nw['ack_p99_ms']:.2f} ms; a single document became visible to a count "
              f"by id after p50 {nw['visible_p50_ms']:.1f} ms, max {nw['visible_max_ms']:.1f} ms "
              f"({nw['visibility_trials']} trials). Final count {out['final_count']:,} = documents written "
              f"{out['expected_count']:,}."]
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {a.out}.json and .md")


if __name__ == "__main__":
    main()
