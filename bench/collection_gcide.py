#!/usr/bin/env python3
"""Collections on dev-gcide-50k, end to end, with the real all-MiniLM-L6-v2 weights.

1. ingest: passages.jsonl -> collection (embed with --model, HNSW M=16 ef_c=200), wall time
   and peak RSS; then the same ingest killed with SIGKILL about half way through the
   embedding phase and resumed by the same command: total time against the uninterrupted
   run (target <= 1.15x) and the resumed collection's files compared byte for byte
   (--build-threads 1 makes the graph deterministic).
2. text-query capacity: `searchd serve --collection --model` ramped by `searchd load
   --text-queries` (p99 <= 100 ms), against the in-process batched throughput of the same
   queries (embedder at batch 32 + search on all threads); target >= 0.8x. Vector (qidx)
   capacity of the same server in the same run, and the batch sizes the server saw.

Usage:  python3 bench/collection_gcide.py [--quick]
Needs target/release/searchd and the model (bash .ci/model.sh). Writes
bench/results/collection-gcide.{json,md}.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.join(ROOT, "target/release/searchd")
DATA = os.environ.get("GCIDE", os.path.join(ROOT, "../shared/datasets/dev-gcide-50k"))
WORK = os.path.join(ROOT, "bench/data/coll-gcide")
RES = os.path.join(ROOT, "bench/results")
QUICK = "--quick" in sys.argv
# Keep part 1 (ingest, kill and resume) from the last run's bench/results/collection-gcide.json
# and its collections under bench/data/coll-gcide; run parts 2 and 3 again.
SERVE_ONLY = "--serve-only" in sys.argv
CKPT = 2000


def model_dir():
    p = os.path.join(ROOT, ".ci/.model-dir")
    if not os.path.exists(p):
        subprocess.run(["bash", os.path.join(ROOT, ".ci/model.sh")], check=True)
    return open(p).read().strip()


def run(args, **kw):
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, check=True, **kw)


def ingest_args(docs, out, model, json_out):
    return [B, "ingest", "--docs", docs, "--out", out, "--model", model, "--max-length", "128",
            "--checkpoint-every", str(CKPT), "--batch", "256", "--build-threads", "1",
            "--name", "gcide", "--force", "--json", json_out]


def head_npy_rows(src, dst, rows):
    """The first `rows` rows of a 2-D .npy file (version 1 header), without numpy."""
    b = open(src, "rb").read()
    hlen = int.from_bytes(b[8:10], "little")
    header = b[10:10 + hlen].decode()
    shape = header.split("'shape': (")[1].split(")")[0]
    n, d = [int(x) for x in shape.split(",")[:2]]
    item = 2 if "<f2" in header else 4
    new = header.replace(f"({n}, {d})", f"({rows}, {d})")
    new = new.rstrip("\n").rstrip() + " "
    while (10 + len(new) + 1) % 64:
        new += " "
    new += "\n"
    with open(dst, "wb") as f:
        f.write(b[:8] + len(new).to_bytes(2, "little") + new.encode())
        f.write(b[10 + hlen:10 + hlen + rows * d * item])


def wait_quiet(max_s=60):
    """Wait until the 1-minute load average is low (nothing else compiling)."""
    t = time.time()
    while time.time() - t < max_s:
        if os.getloadavg()[0] < 0.5:
            return
        time.sleep(2)


def main():
    os.makedirs(WORK, exist_ok=True)
    os.makedirs(RES, exist_ok=True)
    model = model_dir()
    docs = os.path.join(DATA, "passages.jsonl")
    if QUICK:
        docs_q = os.path.join(WORK, "passages-5k.jsonl")
        with open(docs) as f, open(docs_q, "w") as g:
            for i, line in enumerate(f):
                if i >= 5000:
                    break
                g.write(line)
        docs = docs_q
    n_docs = sum(1 for _ in open(docs))
    result = {"schema": "searchd.bench-collection.v1", "docs": n_docs, "model": model,
              "git": subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                                    capture_output=True, text=True).stdout.strip()}

    clean = os.path.join(WORK, "clean")
    resumed = os.path.join(WORK, "resumed")
    if SERVE_ONLY:
        prev = json.load(open(os.path.join(RES, "collection-gcide.json")))
        result["ingest"], result["resume"] = prev["ingest"], prev["resume"]
        result["part1_git"] = prev.get("part1_git") or prev["git"]
        result["resume"]["files_identical"] = compare(clean, resumed)
    else:
        result["part1_git"] = result["git"]
        ingest_and_resume(result, docs, n_docs, model, clean, resumed)
    serve_part(result, model, n_docs, clean)


def compare(clean: str, resumed: str) -> dict:
    """Files of the resumed collection against the uninterrupted one's. collection.json is
    compared without its ingest record, without the lexical index's meta file entry and
    without its own CRC (which covers that entry): tantivy names its segment files with
    random UUIDs, so the meta file differs between two builds of the same documents; the
    lexical postings themselves are not compared."""
    identical = {}
    for f in ["collection.json", "seg-000000/ids.bin", "seg-000000/docs.bin",
              "seg-000000/index/vectors.bin", "seg-000000/index/graph.bin",
              "seg-000000/index/ids.bin"]:
        a = open(os.path.join(clean, f), "rb").read()
        b = open(os.path.join(resumed, f), "rb").read()
        if f == "collection.json":
            ja, jb = json.loads(a), json.loads(b)
            for j in (ja, jb):
                j.pop("ingest", None)
                j.pop("crc32", None)
                for seg in j.get("segments", []):
                    (seg.get("lexical") or {}).pop("meta", None)
            identical[f] = ja == jb
        else:
            identical[f] = a == b
    return identical


def ingest_and_resume(result, docs, n_docs, model, clean, resumed):
    # 1a. Uninterrupted ingest.
    wait_quiet()
    t = time.time()
    run(ingest_args(docs, clean, model, os.path.join(WORK, "clean.json")))
    t_clean = time.time() - t
    rep = json.load(open(os.path.join(WORK, "clean.json")))
    result["ingest"] = {"wall_s": t_clean, "report": rep}

    # 1b. Killed about half way through the embedding, then resumed.
    wait_quiet()
    ck = resumed + ".ingest"
    subprocess.run(["rm", "-rf", resumed, ck])
    chunks = (n_docs + CKPT - 1) // CKPT
    want = chunks // 2
    t = time.time()
    p = subprocess.Popen(ingest_args(docs, resumed, model, os.path.join(WORK, "killed.json")),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        have = len([f for f in os.listdir(ck) if f.endswith(".f32")]) if os.path.isdir(ck) else 0
        if have >= want:
            break
        if p.poll() is not None:
            raise SystemExit("the ingest ended before it was killed")
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    t_killed = time.time() - t
    t = time.time()
    r2 = run(ingest_args(docs, resumed, model, os.path.join(WORK, "resumed.json")),
             capture_output=True, text=True)
    t_resume = time.time() - t
    identical = compare(clean, resumed)
    result["resume"] = {"killed_after_checkpoints": want, "of_chunks": chunks,
                        "killed_run_s": t_killed, "resumed_run_s": t_resume,
                        "total_s": t_killed + t_resume,
                        "ratio_to_uninterrupted": (t_killed + t_resume) / t_clean,
                        "files_identical": identical,
                        "resumed_report": json.load(open(os.path.join(WORK, "resumed.json")))}



def serve_part(result, model, n_docs, clean):
    # 2. Queries: embedded offline (for qidx and the in-process figure), exact ground truth.
    qjsonl = os.path.join(DATA, "queries.jsonl")
    qnpy = os.path.join(WORK, "queries.npy")
    gt = os.path.join(WORK, "gt.npy")
    wait_quiet()
    out = run([B, "embed", "--model", model, "--input", qjsonl, "--text-field", "query",
               "--out", qnpy, "--kind", "query", "--batch", "32", "--max-length", "128"],
              capture_output=True, text=True).stdout
    print(out)
    embed_rate = float(out.split("(")[1].split(" texts/s")[0])
    base = os.path.join(DATA, "base.f16.npy")
    if QUICK:
        base = os.path.join(WORK, "base-5k.f16.npy")
        head_npy_rows(os.path.join(DATA, "base.f16.npy"), base, n_docs)
    run([B, "gt", "--base", base, "--queries", qnpy, "--out", gt, "--k", "100"], capture_output=True)
    ev = os.path.join(WORK, "eval.json")
    wait_quiet()
    run([B, "eval", "--index", os.path.join(clean, "seg-000000/index"), "--queries", qnpy,
         "--gt", gt, "--ef", "64", "--threads", "2", "--json", ev], capture_output=True)
    erow = json.load(open(ev))["rows"][0]
    search_rate = erow["qps_all_threads"]
    inproc = 1.0 / (1.0 / embed_rate + 1.0 / search_rate)
    result["in_process"] = {"embed_texts_per_s_batch32": embed_rate,
                            "search_qps_all_threads_ef64": search_rate,
                            "recall_at_10_ef64": erow["recall_at_10"],
                            "embed_plus_search_qps": inproc}

    # 3. The server: text and vector ramps, same process, same run.
    port = 18000 + os.getpid() % 1000
    url = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen([B, "serve", "--collection", f"gcide={clean}", "--model", model,
                            "--queries", qnpy, "--addr", f"127.0.0.1:{port}", "--ef", "64"],
                           stderr=open(os.path.join(WORK, "serve.log"), "w"))
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(url + "/ready", timeout=1).status == 200:
                    break
            except Exception:
                time.sleep(0.1)
        common = ["--url", url, "--warmup", "3s", "--duration", "6s" if QUICK else "10s",
                  "--slo-p99-ms", "100", "--gt", gt, "--retry-after", "honor"]
        wait_quiet()
        tj = os.path.join(WORK, "load-text.json")
        # Dense: the bound is embed + vector search (a collection with a lexical index answers
        # text with hybrid by default, whose recall against the dense ground truth is lower).
        run([B, "load", "--endpoint", "POST /collections/gcide/search", "--text-queries", qjsonl,
             "--text-mode", "dense",
             "--ramp", "1,2,4,8,16,32,64,128", "--json", tj,
             "--html", os.path.join(RES, "collection-gcide-text.html")] + common)
        st = json.load(urllib.request.urlopen(url + "/stats"))
        wait_quiet()
        vj = os.path.join(WORK, "load-vector.json")
        run([B, "load", "--endpoint", "POST /search", "--queries", "2000",
             "--ramp", "1,2,4,8,16,32,64,128", "--json", vj] + common)
        text, vec = json.load(open(tj)), json.load(open(vj))
        result["serve"] = {"text": text, "vector": vec, "embedder_stats": st.get("embedder")}
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)

    sus_t = (text.get("sustainable") or {}).get("qps") or 0.0
    sus_v = (vec.get("sustainable") or {}).get("qps") or 0.0
    result["ratios"] = {"text_sustainable_over_in_process": sus_t / inproc,
                        "resume_total_over_uninterrupted": result["resume"]["ratio_to_uninterrupted"]}
    json.dump(result, open(os.path.join(RES, "collection-gcide.json"), "w"), indent=1)

    rs = result["resume"]
    ing = result["ingest"]["report"]
    bs = (st.get("embedder") or {}).get("batching", {})
    lines = [
        "# Collections on dev-gcide-50k (all-MiniLM-L6-v2, 2 cores)", "",
        f"git {result['git']} (ingest rows: {result['part1_git']}); {n_docs} passages; `bench/collection_gcide.py`; "
        "text queries sent with `mode: dense`.", "",
        "## Ingest (JSONL -> embedded, indexed collection)", "",
        "| run | wall s | embed s | build s | peak RSS MiB |", "|---|---|---|---|---|",
        f"| uninterrupted | {result['ingest']['wall_s']:.1f} | {ing['embed_seconds']:.1f} | {ing['build_seconds']:.1f} | {ing['peak_rss_bytes']/2**20:.0f} |",
        f"| killed after {rs['killed_after_checkpoints']}/{rs['of_chunks']} checkpoints | {rs['killed_run_s']:.1f} | | | |",
        f"| resumed | {rs['resumed_run_s']:.1f} | {rs['resumed_report']['embed_seconds']:.1f} | {rs['resumed_report']['build_seconds']:.1f} | {rs['resumed_report']['peak_rss_bytes']/2**20:.0f} |",
        "",
        f"Killed + resumed total {rs['total_s']:.1f} s = **{rs['ratio_to_uninterrupted']:.3f}x** the uninterrupted run (target <= 1.15). "
        f"Resumed from {rs['resumed_report']['resumed']} checkpointed documents. Files identical to the uninterrupted run: "
        + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in rs["files_identical"].items()) + ".", "",
        "## Text-query capacity (HTTP, p99 <= 100 ms, rotating queries, recall checked)", "",
        "| what | QPS | p99 ms | recall@10 |", "|---|---|---|---|",
        f"| in process: embed (batch 32) + search (ef 64, 2 threads) | {inproc:.0f} | | {erow['recall_at_10']:.3f} |",
    ]
    for name, r in [("text queries over HTTP (sustainable)", text), ("vector (qidx) queries over HTTP (sustainable)", vec)]:
        s = r.get("sustainable") or {}
        step = next((x for x in r["steps"] if x["concurrency"] == s.get("concurrency")), {})
        lines.append(f"| {name} | {s.get('qps', 0):.0f} | {s.get('p99_ms') or 0:.1f} | {step.get('recall_at_k') or 0:.3f} |")
    lines += ["",
              f"Text sustainable / in-process = **{sus_t / inproc:.2f}x** (target >= 0.8). "
              f"In-process parts: embedder {embed_rate:.0f} texts/s at batch 32, search {search_rate:.0f} q/s.", "",
              f"Batches the server formed during the text ramp: {bs.get('batches')} batches, {bs.get('texts')} texts, "
              f"mean {bs.get('mean_batch', 0):.1f}, max {bs.get('max_batch')}; by size {bs.get('batch_sizes')}.", "",
              "Steps (text):", "", "| conc | QPS | p50 ms | p99 ms | errors | recall |", "|---|---|---|---|---|---|"]
    for x in text["steps"]:
        lines.append(f"| {x['concurrency']} | {x['qps']:.0f} | {x['latency_ms']['p50']:.2f} | {x['latency_ms']['p99']:.2f} | {x['error_rate']:.3f} | {x.get('recall_at_k') or 0:.3f} |")
    open(os.path.join(RES, "collection-gcide.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
