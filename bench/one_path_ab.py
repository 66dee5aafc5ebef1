#!/usr/bin/env python3
"""Before/after of the issue "One request path" on dev-gcide-50k, same run, same machine.

Two release binaries (`--old BIN`, `--new BIN`; build the old one from the commit before the
redesign) serve copies of one collection: the 50k passages with their all-MiniLM-L6-v2
vectors (base.f16.npy), a BM25 index of `text`, and an integer field `bucket` = id % 100
(so `bucket < 1` passes 1% of the documents). Rounds alternate old, new, old, new, ...; each
round on a fresh copy of the collection measures:

1. vector search: `searchd load` closed-loop ramp 1..64 of `{"qidx": i, "k": 10}` over the
   2,000 query vectors (p99 <= 100 ms): sustainable QPS.
2. hybrid text search: the same ramp of `--text-queries queries.jsonl --text-mode hybrid`
   (the server embeds each query with `--model`): sustainable QPS.
3. filtered search at 1%: 8 closed-loop clients for 10 s of
   `{"qidx": i, "k": 10, "filter": {"range": {"bucket": {"lt": 1}}}}`: p50/p99 ms.
4. write throughput: 20,000 documents with vectors upserted in requests of 200
   (`POST /collections/g/docs`, 2 writers, `"wait": false`, then one `"wait": true`): docs/s.
5. text upserts: 1,000 passages without vectors (the server embeds them), in requests of
   100, one writer: docs/s; compared with `searchd ingest --model` embedding the same 1,000
   passages (its own `embed_seconds`, which leaves out model loading and index building,
   so the ratio is conservative for HTTP).

Writes bench/results/one-path-ab.{json,md}. The VM is noisy (+-10-15%): the verdicts use
the median over rounds of each binary.

    python3 bench/one_path_ab.py --old /work/ab/searchd-old --new /work/ab/searchd-new [--rounds 2]
    python3 bench/one_path_ab.py --old X --new Y --from-log RUN.log   # a run cut short: its rows
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get("GCIDE", os.path.join(ROOT, "../shared/datasets/dev-gcide-50k"))
WORK = os.path.join(ROOT, "bench/data/one-path-ab")
RES = os.path.join(ROOT, "bench/results")
PARTS = {"search", "text", "writes"}  # --parts
WRITE_REPS = 1  # --write-reps


def model_dir():
    p = os.path.join(ROOT, ".ci/.model-dir")
    if not os.path.exists(p):
        subprocess.run(["bash", os.path.join(ROOT, ".ci/model.sh")], check=True)
    return open(p).read().strip()


def run(args, **kw):
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, check=True, **kw)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_quiet(max_s=60):
    t = time.time()
    while time.time() - t < max_s:
        if os.getloadavg()[0] < 0.7:
            return
        time.sleep(2)
    print(f"warning: load average {os.getloadavg()[0]:.2f}", flush=True)


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def prepare(new_bin):
    os.makedirs(WORK, exist_ok=True)
    docs = os.path.join(WORK, "passages.jsonl")
    texts = []
    with open(os.path.join(DATA, "passages.jsonl")) as f, open(docs, "w") as out:
        for line in f:
            d = json.loads(line)
            d["bucket"] = d["id"] % 100
            out.write(json.dumps(d) + "\n")
            texts.append(d["text"])
    base = os.path.join(WORK, "base")
    if not os.path.exists(os.path.join(base, "collection.json")):
        run([new_bin, "ingest", "--docs", docs, "--vectors", os.path.join(DATA, "base.f16.npy"),
             "--out", base, "--name", "g", "--force", "--json", os.path.join(WORK, "ingest.json")])
    # Bodies of the filtered run.
    with open(os.path.join(WORK, "filtered.jsonl"), "w") as f:
        for i in range(2000):
            f.write(json.dumps({"qidx": i, "k": 10, "filter": {"range": {"bucket": {"lt": 1}}}}) + "\n")
    # The 1,000 passages of the text-upsert run (ids past the collection's), and the same
    # as an ingest input.
    up = [{"id": 100000 + i, "text": texts[i]} for i in range(1000)]
    with open(os.path.join(WORK, "upsert-1000.jsonl"), "w") as f:
        for d in up:
            f.write(json.dumps(d) + "\n")
    return base, up


def load(bin_, url, args, name):
    lj = os.path.join(WORK, f"{name}.json")
    wait_quiet()
    run([bin_, "load", "--url", url, "--json", lj, "--slo-p99-ms", "100",
         "--retry-after", "honor"] + args, stdout=subprocess.DEVNULL)
    return json.load(open(lj))


def one_round(label, bin_, base, up, model, rnd, result):
    coll = os.path.join(WORK, f"coll-{label}-{rnd}")
    shutil.rmtree(coll, ignore_errors=True)
    shutil.copytree(base, coll)
    # Text upserts need a collection embedded by the server's model: a copy of the 1,000
    # passages ingest embedded (the upserts replace them, embedding the same texts again).
    tcoll = os.path.join(WORK, f"text-{label}-{rnd}")
    shutil.rmtree(tcoll, ignore_errors=True)
    shutil.copytree(os.path.join(WORK, "ingest-1000"), tcoll)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen([bin_, "serve", "--collection", f"g={coll}", "--collection", f"t={tcoll}",
                            "--model", model,
                            "--queries", os.path.join(DATA, "queries.f16.npy"),
                            "--addr", f"127.0.0.1:{port}", "--ef", "64"],
                           stderr=open(os.path.join(WORK, f"serve-{label}-{rnd}.log"), "w"))
    row = {"binary": label, "round": rnd}
    try:
        for _ in range(1200):
            try:
                if urllib.request.urlopen(url + "/ready", timeout=1).status == 200:
                    break
            except Exception:
                time.sleep(0.1)
        ramp = ["--ramp", "1,2,4,8,16,32,64", "--warmup", "2s", "--duration", "5s"]
        ep = ["--endpoint", "POST /collections/g/search"]
        if "search" in PARTS:
            search_parts(bin_, url, label, rnd, ramp, ep, row)
        if "text" in PARTS:
            text_parts(url, up, row)
        if "writes" in PARTS:
            write_parts(url, row)
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
        shutil.rmtree(coll, ignore_errors=True)
        shutil.rmtree(tcoll, ignore_errors=True)
    print(json.dumps(row), flush=True)
    result["rounds"].append(row)


def search_parts(bin_, url, label, rnd, ramp, ep, row):
    r = load(bin_, url, ep + ramp + ["--query-count", "2000"], f"vector-{label}-{rnd}")
    row["vector_qps"] = (r.get("sustainable") or {}).get("qps")
    r = load(bin_, url, ep + ramp + ["--text-queries", os.path.join(DATA, "queries.jsonl"),
                                    "--text-mode", "hybrid"], f"hybrid-{label}-{rnd}")
    row["hybrid_qps"] = (r.get("sustainable") or {}).get("qps")
    r = load(bin_, url, ep + ["--ramp", "8", "--warmup", "2s", "--duration", "10s",
                              "--body-file", os.path.join(WORK, "filtered.jsonl")],
             f"filtered-{label}-{rnd}")
    step = r["steps"][0]
    row["filtered_p50_ms"] = step["latency_ms"]["p50"]
    row["filtered_p99_ms"] = step["latency_ms"]["p99"]
    row["filtered_errors"] = step.get("errors")
    row["filtered_qps"] = step.get("qps")


def text_parts(url, up, row):
    # Text upserts before the vector writes, on a quiet server: after those writes the
    # optimizer merges the written segments for a while, which would be measured too.
    wait_quiet()
    # Text upserts without vectors, in requests of 100 (the last waits for visibility).
    t = time.time()
    for i in range(0, 1000, 100):
        post(url + "/collections/t/docs", {"docs": up[i:i + 100], "wait": i + 100 >= 1000})
    row["text_upsert_docs_per_s"] = 1000 / (time.time() - t)
    # Spot check: the first upserted passage is found by its own text.
    hit = post(url + "/collections/t/search", {"text": up[0]["text"], "mode": "dense", "k": 1})
    row["text_upsert_found"] = hit["hits"][0]["id"] == up[0]["id"]
    # The same 1,000 passages again, in one request.
    wait_quiet()
    t = time.time()
    post(url + "/collections/t/docs", {"docs": up, "wait": True})
    row["text_upsert_1x1000_docs_per_s"] = 1000 / (time.time() - t)


def write_parts(url, row):
    # Writes with vectors: 20,000 docs (copies of stored vectors under new ids), WRITE_REPS
    # times.
    import numpy as np  # noqa: E402 (only this part needs numpy)
    vecs = np.load(os.path.join(DATA, "base.f16.npy")).astype(np.float32)
    wait_quiet()
    rates = []
    for rep in range(WRITE_REPS):
        rates.append(write_once(url, vecs, 200000 + rep * 20000))
        wait_quiet()
    row["write_docs_per_s"] = statistics.median(r for r, _ in rates)
    row["write_docs_per_s_reps"] = [round(r) for r, _ in rates]
    row["write_errors"] = sum(e for _, e in rates)


def write_once(url, vecs, first_id):
    batches = []
    for b in range(100):
        batches.append([{"id": first_id + b * 200 + j,
                         "vector": [round(float(x), 6) for x in vecs[(b * 200 + j) % len(vecs)]],
                         "fields": {"bucket": j % 100}} for j in range(200)])
    bodies = [json.dumps({"docs": d, "wait": False}).encode() for d in batches]
    errors = []

    def writer(part):
        for body in part:
            req = urllib.request.Request(url + "/collections/g/docs", data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=120).read()
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))
    t = time.time()
    ths = [threading.Thread(target=writer, args=(bodies[i::2],)) for i in range(2)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    post(url + "/collections/g/docs", {"docs": [batches[0][0]], "wait": True})
    return 20000 / (time.time() - t), len(errors)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--old-label", default="old")
    ap.add_argument("--new-label", default="new")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prepare-only", action="store_true",
                    help="make the collection and the bodies, measure nothing")
    ap.add_argument("--from-log", metavar="FILE",
                    help="summarize the rows a run cut short printed (its stdout) instead of measuring")
    ap.add_argument("--parts", default="search,text,writes",
                    help="what each round measures: search (vector, hybrid, filtered), text "
                         "(upserts without vectors, embedded by the server), writes (upserts "
                         "with vectors)")
    ap.add_argument("--write-reps", type=int, default=1,
                    help="runs of 20,000 writes per round (the round's figure is their median)")
    ap.add_argument("--tag", default="",
                    help="suffix of the result files (one-path-ab<TAG>.json/.md)")
    a = ap.parse_args()
    global WRITE_REPS
    PARTS.clear()
    PARTS.update(a.parts.split(","))
    WRITE_REPS = a.write_reps
    result = {"schema": "searchd.bench.one-path-ab.v1", "old": a.old_label, "new": a.new_label,
              "git": subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                                    capture_output=True, text=True).stdout.strip(),
              "parts": sorted(PARTS), "write_reps": WRITE_REPS, "rounds": []}
    ij = os.path.join(WORK, "ingest-1000.json")
    if a.from_log:
        with open(a.from_log) as f:
            result["rounds"] = [json.loads(l) for l in f if l.startswith('{"binary"')]
        a.rounds = len({r["round"] for r in result["rounds"]})
        result["cut_short"] = True
    else:
        model = model_dir()
        base, up = prepare(a.new)
        if a.prepare_only:
            return
        # Ingest's embedding of the same 1,000 passages (new binary: ingest did not change).
        wait_quiet()
        run([a.new, "ingest", "--docs", os.path.join(WORK, "upsert-1000.jsonl"), "--model", model,
             "--out", os.path.join(WORK, "ingest-1000"), "--force", "--json", ij],
            stdout=subprocess.DEVNULL)
    ing = json.load(open(ij))
    result["ingest_1000"] = {"embed_seconds": ing["embed_seconds"],
                             "total_seconds": ing["total_seconds"],
                             "embed_docs_per_s": 1000 / ing["embed_seconds"]}
    if not a.from_log:
        for rnd in range(a.rounds):
            for label, b in ((a.old_label, a.old), (a.new_label, a.new)):
                one_round(label, b, base, up, model, rnd, result)
    keys = ["vector_qps", "hybrid_qps", "filtered_p99_ms", "filtered_p50_ms", "write_docs_per_s",
            "text_upsert_docs_per_s", "text_upsert_1x1000_docs_per_s"]
    keys = [k for k in keys if any(r.get(k) is not None for r in result["rounds"])]
    med = {}
    for label in (a.old_label, a.new_label):
        rows = [r for r in result["rounds"] if r["binary"] == label]
        med[label] = {k: statistics.median([r[k] for r in rows if r.get(k) is not None] or [0])
                      for k in keys}
    result["median"] = med
    ratio = {k: (med[a.new_label][k] / med[a.old_label][k]) if med[a.old_label][k] else None
             for k in keys}
    result["ratio_new_over_old"] = ratio
    higher_better = {"vector_qps", "hybrid_qps", "write_docs_per_s", "text_upsert_docs_per_s",
                     "text_upsert_1x1000_docs_per_s"}
    result["within_5pct"] = {k: (ratio[k] >= 0.95 if k in higher_better else ratio[k] <= 1.05)
                             for k in keys if ratio[k] is not None}
    emb = result["ingest_1000"]["embed_docs_per_s"]
    if "text_upsert_docs_per_s" in keys:
        result["text_upsert_vs_ingest"] = med[a.new_label]["text_upsert_docs_per_s"] / emb
    if "text_upsert_1x1000_docs_per_s" in keys:
        result["text_upsert_1x1000_vs_ingest"] = (
            med[a.new_label]["text_upsert_1x1000_docs_per_s"] / emb)
    os.makedirs(RES, exist_ok=True)
    out = os.path.join(RES, f"one-path-ab{a.tag}")
    json.dump(result, open(out + ".json", "w"), indent=1)
    md = ["# One request path: before/after on dev-gcide-50k", "",
          f"`python3 bench/one_path_ab.py` at {result['git']}: `{a.old_label}` = the commit before "
          f"the redesign, `{a.new_label}` = this one; release builds, same machine (2 cores, the "
          "load generator shares them), same run, rounds alternated; medians over "
          f"{a.rounds} rounds per binary.", "",
          "| figure | " + a.old_label + " | " + a.new_label + " | new/old | within 5% |",
          "|---|---|---|---|---|"]
    for k in keys:
        md.append(f"| {k} | {med[a.old_label][k]:.2f} | {med[a.new_label][k]:.2f} | "
                  f"{ratio[k]:.3f} | {result['within_5pct'].get(k)} |")
    md += ["", "Every round:", "", "| binary | round | " + " | ".join(keys) + " |",
           "|---|---|" + "---|" * len(keys)]
    for r in result["rounds"]:
        cells = [f"{r[k]:.1f}" if isinstance(r.get(k), float) else str(r.get(k)) for k in keys]
        md.append(f"| {r['binary']} | {r['round']} | " + " | ".join(cells) + " |")
    if any("write_docs_per_s_reps" in r for r in result["rounds"]):
        md += ["", "Writes, every run of 20,000 (a round's figure is its median): " + "; ".join(
            f"{r['binary']}#{r['round']} {r.get('write_docs_per_s_reps')}" for r in result["rounds"])]
    ing = result["ingest_1000"]
    for key, what in (("text_upsert_vs_ingest", "text_upsert_docs_per_s", ),
                      ("text_upsert_1x1000_vs_ingest", "text_upsert_1x1000_docs_per_s")):
        if key in result:
            md += ["", f"Text upserts ({what}) vs `searchd ingest --model` embedding the same 1,000 "
                   f"passages: ingest embedded {ing['embed_docs_per_s']:.1f} docs/s (its "
                   f"`embed_seconds` {ing['embed_seconds']:.1f} s, total {ing['total_seconds']:.1f} s); "
                   f"HTTP upserts of the new binary {med[a.new_label][what]:.1f} docs/s: "
                   f"**{result[key]:.2f}x** (target >= 0.8x)."]
    open(out + ".md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
