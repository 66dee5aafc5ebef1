#!/usr/bin/env python3
"""Freshness while a merge runs: dev-gcide vectors, a 20k-document collection, 8,000 of its
documents replaced (so the optimizer vacuums the base segment: an HNSW build on one thread),
then un-waited upserts timed until a search finds them, sampling /stats for the merger.

    bench/.venv/bin/python bench/freshness_merge.py [--bin B] [--out bench/results/freshness-merge]
"""
import argparse, http.client, json, socket, subprocess, sys, tempfile, time, shutil
from pathlib import Path
import numpy as np

DATA = Path(__file__).resolve().parent.parent.parent / "shared/datasets/dev-gcide-50k"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/searchd")
    ap.add_argument("--out", default="bench/results/freshness-merge")
    ap.add_argument("--docs", type=int, default=20000)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="searchd-fresh-"))
    base = np.load(DATA / "base.f16.npy").astype(np.float32)[: a.docs + 10000]
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    with open(work / "d.jsonl", "w") as f:
        for i in range(a.docs):
            f.write(json.dumps({"id": i, "vector": [round(float(x), 6) for x in base[i]]}) + "\n")
    subprocess.run([a.bin, "ingest", "--docs", str(work / "d.jsonl"), "--out", str(work / "c"), "--vector-field", "vector"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    log = open(work / "log", "wb")
    p = subprocess.Popen([a.bin, "serve", "--collection", str(work / "c"), "--addr", f"127.0.0.1:{port}", "--refresh-ms", "1000"],
                         stdout=log, stderr=log)
    c = None
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60); c.request("GET", "/ready")
            r = c.getresponse(); r.read()
            if r.status == 200:
                break
        except OSError:
            time.sleep(0.1)

    def post(path, body):
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse(); return r.status, json.loads(r.read())

    def merging():
        c.request("GET", "/stats"); r = c.getresponse(); st = json.loads(r.read())
        return st["collections"]["c"]["live"]["optimizer"]["merging"]

    n_rep = int(a.docs * 0.4)
    for s0 in range(0, n_rep, 500):
        post("/collections/c/docs", {"docs": [{"id": i, "vector": [round(float(x), 6) for x in base[a.docs + (i % 10000)]]}
                                              for i in range(s0, min(n_rep, s0 + 500))], "wait": True})
    rng = np.random.default_rng(1)
    vis, during = [], 0
    t_wait = time.time()
    while not merging() and time.time() - t_wait < 20:
        time.sleep(0.1)
    for j in range(30):
        v = rng.standard_normal(base.shape[1]).astype(np.float32); v /= np.linalg.norm(v)
        m = merging()
        t = time.perf_counter()
        post("/collections/c/docs", {"docs": [{"id": 5_000_000 + j, "vector": v.tolist()}]})
        while True:
            s_, r = post("/collections/c/search", {"vector": v.tolist(), "k": 1})
            if r["hits"] and r["hits"][0]["id"] == 5_000_000 + j:
                break
            time.sleep(0.005)
        vis.append(time.perf_counter() - t)
        during += int(m)
    p.terminate(); p.wait()
    vis.sort()
    out = {"schema": "searchd.bench.freshness-merge.v1", "docs": a.docs, "replaced": n_rep, "refresh_ms": 1000,
           "upserts": len(vis), "while_merging": during, "visible_p50_ms": vis[len(vis) // 2] * 1e3,
           "visible_max_ms": vis[-1] * 1e3}
    json.dump(out, open(a.out + ".json", "w"), indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(f"# Freshness while the optimizer merges\n\n{a.docs} dev-gcide documents, {n_rep} replaced by upserts (the base segment is vacuumed: an HNSW build on one thread), "
                f"then {len(vis)} upserts without `wait` at `--refresh-ms 1000`, each timed until a search finds it; "
                f"{during} of them were sent while /stats said a merge was running.\n\n"
                f"Visible after p50 **{out['visible_p50_ms']:.0f} ms**, max **{out['visible_max_ms']:.0f} ms** (bound: the refresh interval plus one refresh).\n\n"
                f"Binary: `{a.bin}`; 2-core VM shared with the test suite.\n")
    print(json.dumps(out))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
