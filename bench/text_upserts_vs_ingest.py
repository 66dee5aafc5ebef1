#!/usr/bin/env python3
"""Text upserts vs ingest (issue 25): 1,000 dev-gcide-50k passages without vectors upserted over
HTTP (10 requests of 100, the last with wait=true) into a live collection, against `searchd
ingest --model` embedding the same passages (its embed_seconds), same binary, same machine,
interleaved rounds. Also one request of 1,000. Usage:
  python3 bench/text_upserts_vs_ingest.py [--rounds 3] [--model DIR] BIN [BIN ...]
Writes bench/results/one-path-text-upserts.json (per binary and round, and medians)."""
import argparse, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "datasets", "dev-gcide-50k", "passages.jsonl")


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def http_run(bin_, model, base, up, per, work):
    coll = os.path.join(work, "coll")
    shutil.rmtree(coll, ignore_errors=True)
    shutil.copytree(base, coll)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen([bin_, "serve", "--collection", f"t={coll}", "--model", model,
                            "--addr", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(url + "/ready", timeout=1).status == 200:
                    break
            except Exception:
                time.sleep(0.1)
        t = time.time()
        for i in range(0, len(up), per):
            r = post(url + "/collections/t/docs", {"docs": up[i:i + per], "wait": i + per >= len(up)})
            assert r.get("upserted") == len(up[i:i + per]), r
        el = time.time() - t
        st = json.loads(urllib.request.urlopen(url + "/stats").read())
        got = json.loads(urllib.request.urlopen(url + "/collections/t").read())
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait()
    emb = st["embedder"]["batching"]["passages"]
    assert emb["texts"] == len(up), emb
    return {"docs_per_s": len(up) / el, "seconds": el, "embed_ms": emb["embed_ms_total"],
            "docs_after": got.get("docs")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bins", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default=None)
    a = ap.parse_args()
    model = a.model or open(os.path.join(HERE, "..", ".ci", ".model-dir")).read().strip()
    work = tempfile.mkdtemp(prefix="text-upserts-")
    up = []
    with open(DATA) as f:
        for line in f:
            up.append({"id": 100000 + len(up), "text": json.loads(line)["text"]})
            if len(up) == 1000:
                break
    docs = os.path.join(work, "up.jsonl")
    with open(docs, "w") as f:
        for d in up:
            f.write(json.dumps(d) + "\n")
    res = {"schema": "searchd.bench.text-upserts/1", "docs": len(up), "rounds": []}
    for rnd in range(a.rounds):
        for b in a.bins:
            ij = os.path.join(work, "ing.json")
            out = os.path.join(work, "ing")
            subprocess.run([b, "ingest", "--docs", docs, "--model", model, "--out", out, "--force",
                            "--json", ij], check=True, capture_output=True)
            ing = json.load(open(ij))
            ing_rate = len(up) / ing["embed_seconds"]
            # The collection the upserts replace: the ingested passages (same model).
            h100 = http_run(b, model, out, up, 100, work)
            h1000 = http_run(b, model, out, up, 1000, work)
            row = {"bin": b, "round": rnd, "ingest_embed_docs_per_s": ing_rate,
                   "http_100": h100, "http_1000": h1000,
                   "ratio_100": h100["docs_per_s"] / ing_rate,
                   "ratio_1000": h1000["docs_per_s"] / ing_rate}
            res["rounds"].append(row)
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                              for k, v in row.items() if not isinstance(v, dict)}), flush=True)
    res["median"] = {}
    for b in a.bins:
        rows = [r for r in res["rounds"] if r["bin"] == b]
        res["median"][b] = {k: statistics.median(r[k] for r in rows)
                            for k in ["ingest_embed_docs_per_s", "ratio_100", "ratio_1000"]}
        res["median"][b]["http_100_docs_per_s"] = statistics.median(r["http_100"]["docs_per_s"] for r in rows)
    print(json.dumps(res["median"], indent=1))
    with open(os.path.join(HERE, "results", "one-path-text-upserts.json"), "w") as f:
        json.dump(res, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
