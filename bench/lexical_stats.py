#!/usr/bin/env python3
"""BM25 statistics of a live collection against a fresh build, on dev-gcide-50k.

A collection's lexical scores must not depend on which segment a document sits in or on
deleted rows still held by old segments. This bench:

1. ingests the 50,000 passages (the dataset's MiniLM vectors, BM25 over `text`) once, and
   copies the result: `fresh` (left alone) and `live` (written to);
2. serves both from one `searchd serve` (`--vacuum-ratio 1`, so the base segment keeps its
   deleted rows instead of being rewritten) and replaces 50% of `live` (seeded random ids,
   in batches of 500, upserts of the same documents: same id, text, vector, headword), so
   the final documents of both are the same; waits until the optimizer is idle and checks
   that `live` has several segments and deleted rows in the old one;
3. asks the 2,000 judged queries of queries.jsonl of both collections in three modes:
   hybrid (`/{name}/_search` with `knn` (the query's vector from queries.f16.npy,
   num_candidates 100) and a `match` on `text`, fused by `rank.rrf`: the default RRF,
   k = 60, window 100), lexical (`/collections/{name}/search` `mode: lexical`) and dense
   (`vector`, ef 100); nDCG@10 with binary gains as `searchd eval` computes it;
4. writes `OUT.json` (schema `searchd.bench.lexical-stats.v1`) and `OUT.md`, and exits 1 if
   the hybrid nDCG@10 of `live` differs from `fresh` by more than `--max-gap` (0.005).

Dense search over several segments is not the same walk as over one graph either, so the
dense row shows how much of the gap is not lexical. Only the standard library is needed.

    python3 bench/lexical_stats.py [--bin target/release/searchd] [--out bench/results/lexical-stats-gcide]
        [--before bench/results/lexical-stats-gcide-before.json]   (adds an earlier run's figures to the report)
"""
import argparse, http.client, json, math, os, random, shutil, socket, struct, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("GCIDE", ROOT.parent / "shared/datasets/dev-gcide-50k"))
SCHEMA = "searchd.bench.lexical-stats.v1"
# hybrid@EF: RRF of knn at num_candidates EF and BM25; dense@EF: the vector at ef EF. At ef
# 2000 (of 50,000 rows) the HNSW walks are close to exact on both collections, so what
# differs between them is the lexical side; at ef 100 the dense side differs by itself.
MODES = ["hybrid@2000", "lexical", "dense@2000", "hybrid@100", "dense@100"]
GATED = "hybrid@2000"


class F16Rows:
    """Rows of a float16 .npy file, unit length, as lists of floats (no numpy)."""

    def __init__(self, path):
        self.f = open(path, "rb")
        magic = self.f.read(8)
        assert magic[:6] == b"\x93NUMPY", path
        hlen = struct.unpack("<H", self.f.read(2))[0] if magic[6] == 1 else struct.unpack("<I", self.f.read(4))[0]
        header = self.f.read(hlen).decode()
        assert "'<f2'" in header and "False" in header, header
        shape = header.split("(")[1].split(")")[0].split(",")
        self.n, self.d = int(shape[0]), int(shape[1])
        self.offset = self.f.tell()
        self.fmt = f"<{self.d}e"

    def row(self, i):
        self.f.seek(self.offset + i * self.d * 2)
        v = struct.unpack(self.fmt, self.f.read(self.d * 2))
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [round(x / norm, 6) for x in v]


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def call(self, method, path, body=None):
        data = None if body is None else (body if isinstance(body, (bytes, str)) else json.dumps(body))
        self.c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = self.c.getresponse(); b = r.read()
        out = json.loads(b) if b else None
        if r.status != 200:
            raise SystemExit(f"{method} {path}: HTTP {r.status}: {out}")
        return out


def ndcg_at_10(ranked, relevant):
    """Binary gains, 1/log2(rank+1), ideal = all relevant first (crates/cli/src/quality.rs)."""
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / ideal if ideal > 0 else 0.0


def settle(c, name, quiet_s=5.0, max_s=1800):
    """Waits until the collection has no pending writes, no merge and the same segments for
    `quiet_s` seconds."""
    t0 = time.time(); quiet_since = None; last = None
    while time.time() - t0 < max_s:
        st = c.call("GET", "/stats")["collections"][name]["live"]
        segs = segments_of(st)
        busy = st["optimizer"]["merging"] or st["pending"]["docs"] > 0 or segs != last
        last = segs
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.time()
        elif time.time() - quiet_since >= quiet_s:
            return st, time.time() - t0
        time.sleep(0.5)
    raise SystemExit(f"{name}: the optimizer did not settle in {max_s} s")


def segments_of(st):
    return [{"docs": s["docs"], "deleted": s["deleted"], "index": s.get("index")} for s in st["segments"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/searchd"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/lexical-stats-gcide"))
    ap.add_argument("--replace", type=float, default=0.5, help="share of the documents replaced by upserts")
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--order", choices=["random", "length"], default="length",
                    help="order of the upserts: seeded random, or by text length (shortest first)")
    ap.add_argument("--max-gap", type=float, default=0.005)
    ap.add_argument("--queries", type=int, default=0, help="first N queries only (0: all)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--before", help="an earlier run's JSON, shown beside this one in the report")
    ap.add_argument("--work", help="work directory (default: a temp dir, removed at the end)")
    ap.add_argument("--reuse-ingest", action="store_true", help="keep WORK/fresh if it is there (debugging)")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="searchd-lexstats-"))
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.time()

    passages = [json.loads(l) for l in open(DATA / "passages.jsonl")]
    queries = [json.loads(l) for l in open(DATA / "queries.jsonl")]
    if a.queries:
        queries = queries[: a.queries]
    base = F16Rows(DATA / "base.f16.npy")
    qv = F16Rows(DATA / "queries.f16.npy")
    assert base.n == len(passages)
    n = len(passages)

    def doc(i):
        p = passages[i]
        return {"id": p["id"], "text": p["text"], "headword": p["headword"], "vector": base.row(i)}

    # 1. One ingest, two copies.
    docs_path = work / "docs.jsonl"
    t = time.time()
    if not (a.reuse_ingest and (work / "fresh" / "collection.json").exists()):
        with open(docs_path, "w") as f:
            for i in range(n):
                f.write(json.dumps(doc(i)) + "\n")
        if (work / "fresh").exists():
            shutil.rmtree(work / "fresh")
        subprocess.run([binary, "ingest", "--docs", str(docs_path), "--out", str(work / "fresh"), "--vector-field",
                        "vector", "--text-field", "text"], check=True, stdout=subprocess.DEVNULL)
        docs_path.unlink()
    ingest_s = time.time() - t
    if (work / "live").exists():
        shutil.rmtree(work / "live")
    shutil.copytree(work / "fresh", work / "live")

    # 2. Serve both; replace a share of `live` by upserts of the same documents.
    port = free_port()
    log = open(work / "server.log", "ab")
    server = subprocess.Popen([binary, "serve", "--collection", f"fresh={work / 'fresh'}", "--collection",
                               f"live={work / 'live'}", "--addr", f"127.0.0.1:{port}", "--vacuum-ratio", "1"],
                              stdout=log, stderr=log)
    try:
        t = time.time()
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2); c.request("GET", "/ready")
                r = c.getresponse(); r.read()
                if r.status == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.time() - t > 300:
                raise SystemExit(f"the server did not start (see {work / 'server.log'})")
            time.sleep(0.1)
        c = Client(port)
        rng = random.Random(a.seed)
        replaced = rng.sample(range(n), int(n * a.replace))
        if a.order == "length":
            # Writes that come grouped (here: by text length) make segments whose own
            # statistics (average length, document frequencies) differ most from the whole.
            replaced.sort(key=lambda i: (len(passages[i]["text"]), i))
        t = time.time()
        for s0 in range(0, len(replaced), a.batch):
            chunk = replaced[s0: s0 + a.batch]
            last = s0 + a.batch >= len(replaced)
            body = {"docs": [{"id": passages[i]["id"], "text": passages[i]["text"], "vector": base.row(i),
                              "fields": {"headword": passages[i]["headword"]}} for i in chunk], "wait": last}
            c.call("POST", "/collections/live/docs", body)
        upsert_s = time.time() - t
        st, settle_s = settle(c, "live")
        segs = segments_of(st)
        deleted = sum(s["deleted"] for s in segs)
        alive = sum(s["docs"] - s["deleted"] for s in segs)
        print(f"live: {len(segs)} segments {segs}, {deleted} deleted rows, {alive} alive", flush=True)
        if alive != n or len(segs) < 2 or deleted == 0:
            raise SystemExit(f"live is not what the bench needs: {len(segs)} segments, {deleted} deleted, {alive} alive")

        # 3. The judged queries, both collections, three modes.
        def ask(name, mode, q, v):
            kind, _, ef = mode.partition("@")
            if kind == "hybrid":
                r = c.call("POST", f"/{name}/_search", {
                    "knn": {"field": "vector", "query_vector": v, "k": 10, "num_candidates": int(ef)},
                    "query": {"match": {"text": q}}, "rank": {"rrf": {}}, "size": 10, "_source": False})
                return [int(h["_id"]) for h in r["hits"]["hits"]]
            if kind == "lexical":
                r = c.call("POST", f"/collections/{name}/search", {"text": q, "mode": "lexical", "k": 10})
                scores[name] = [h["score"] for h in r["hits"]]
            else:
                r = c.call("POST", f"/collections/{name}/search", {"vector": v, "k": 10, "ef": int(ef)})
            return [int(h["id"]) for h in r["hits"]]

        modes = {}
        for mode in MODES:
            t = time.time()
            per = {"live": [], "fresh": []}
            same = 0
            same_scores = 0; worst = 0.0
            scores = {}
            for qi, q in enumerate(queries):
                v = qv.row(q["qid"])
                rel = set(q["relevant"])
                got = {}
                for name in ["live", "fresh"]:
                    got[name] = ask(name, mode, q["query"], v)
                    per[name].append(ndcg_at_10(got[name], rel))
                same += got["live"] == got["fresh"]
                if mode == "lexical":
                    a_s, b_s = scores["live"], scores["fresh"]
                    d = max((abs(x - y) / max(abs(y), 1e-9) for x, y in zip(a_s, b_s)), default=0.0)
                    if len(a_s) != len(b_s):
                        d = float("inf")
                    worst = max(worst, d)
                    same_scores += d <= 1e-5
            nd = {k: sum(x) / len(x) for k, x in per.items()}
            diffs = [x - y for x, y in zip(per["live"], per["fresh"])]
            modes[mode] = {"ndcg_at_10_live": nd["live"], "ndcg_at_10_fresh": nd["fresh"],
                           "gap": nd["live"] - nd["fresh"], "queries_with_other_ndcg": sum(1 for d in diffs if abs(d) > 1e-12),
                           "identical_top10": same / len(queries), "seconds": time.time() - t}
            if mode == "lexical":
                # The top-10 BM25 scores, position by position (ids may differ among ties).
                modes[mode]["same_scores"] = same_scores / len(queries)
                modes[mode]["max_relative_score_difference"] = worst
            print(mode, json.dumps(modes[mode]), flush=True)
        st2 = c.call("GET", "/stats")["collections"]["live"]["live"]
        if segments_of(st2) != segs:
            raise SystemExit("live's segments changed while the queries ran; the figures would mix two views")
        version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    finally:
        server.terminate(); server.wait()

    gap = modes[GATED]["gap"]
    ok = abs(gap) <= a.max_gap
    scores_ok = modes["lexical"]["same_scores"] == 1.0
    out = {"schema": SCHEMA, "data": "dev-gcide-50k", "docs": n, "queries": len(queries), "replaced": len(replaced),
           "batch": a.batch, "seed": a.seed, "binary": binary, "version": version,
           "commit": subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                                    text=True).stdout.strip(),
           "live_segments": segs, "live_deleted": deleted, "ingest_s": ingest_s, "upsert_s": upsert_s,
           "settle_s": settle_s, "order": a.order, "modes": modes, "max_gap": a.max_gap, "gated_mode": GATED,
           "hybrid_gap": gap, "lexical_scores_equal": scores_ok, "pass": ok and scores_ok,
           "total_s": time.time() - t_start}
    before = json.load(open(a.before)) if a.before else None
    if before:
        out["before"] = {"commit": before.get("commit"), "modes": before["modes"], "live_segments": before["live_segments"]}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    json.dump(out, open(a.out + ".json", "w"), indent=1)
    with open(a.out + ".md", "w") as f:
        order = "in order of text length, shortest first" if a.order == "length" else "in seeded random order"
        f.write("# BM25 statistics of a live collection vs a fresh build (dev-gcide-50k)\n\n")
        f.write(f"`python3 bench/lexical_stats.py` at {out['commit']}, 2-core VM. {n:,} passages ingested once and "
                f"copied: `fresh` is left alone; `live` gets {len(replaced):,} of its documents ({a.replace:.0%}, seeded "
                f"random ids) upserted again unchanged, {order}, in batches of {a.batch}, so both hold the same "
                f"documents. Both served by one `searchd serve --vacuum-ratio 1` (the base segment keeps its deleted "
                f"rows rather than being rewritten). After the optimizer settled, `live` had {len(segs)} segments "
                f"(documents/deleted: " + ", ".join(f"{s['docs']:,}/{s['deleted']:,}" for s in segs)
                + f"). {len(queries):,} judged headword queries per mode and collection; nDCG@10 with binary gains "
                f"as `searchd eval` computes it.\n\n")
        f.write("Modes: `hybrid@EF` is `_search` with `knn` (the dataset's query vector, `num_candidates` EF) and a "
                "`match` on `text` fused by `rank.rrf` (k 60, window 100); `lexical` is `mode: lexical`; `dense@EF` "
                "the vector at ef EF. At ef 2000 the HNSW walks are nearly exact on both collections (dense@2000: "
                "identical top-10 for most queries), so what differs between `live` and `fresh` is the lexical "
                "side; at ef 100 a dense search over several segments (each walked at ef 100, the base one with "
                "half its rows deleted) is not the walk over one graph, and differs by itself.\n\n")
        rows = [("this run", out)] + ([(f"before ({before.get('commit')})", before)] if before else [])
        f.write("| run | mode | nDCG@10 live | nDCG@10 fresh | gap (live - fresh) | queries whose nDCG@10 differs "
                "| identical top-10 ids | lexical top-10 scores equal (1e-5) |\n|---|---|---|---|---|---|---|---|\n")
        for label, r in rows:
            for mode in MODES:
                m = r["modes"][mode]
                sc = f"{m['same_scores']:.1%} (worst {m['max_relative_score_difference']:.2g})" if "same_scores" in m else ""
                f.write(f"| {label} | {mode} | {m['ndcg_at_10_live']:.4f} | {m['ndcg_at_10_fresh']:.4f} | {m['gap']:+.4f} | "
                        f"{m['queries_with_other_ndcg']} | {m['identical_top10']:.1%} | {sc} |\n")
        f.write(f"\n**Target**: |{GATED} gap| <= {a.max_gap} -> **{'met' if ok else 'missed'}** ({gap:+.4f}); "
                f"lexical top-10 scores of `live` equal to `fresh` for every query -> "
                f"**{'met' if scores_ok else 'missed'}** ({modes['lexical']['same_scores']:.1%}).\n")
        if before:
            f.write("\nBefore: each segment scored BM25 with its own statistics (its documents, document frequencies "
                    "and average length, deleted rows included), so a document's score depended on the segment that "
                    "held it. After: every segment scores with the collection's statistics over live documents "
                    "(`Collection::bm25_stats`: sums over segments, deleted rows subtracted).\n")
    print(json.dumps({k: out[k] for k in ["hybrid_gap", "pass", "live_deleted"]}))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if out["pass"] else 1)


if __name__ == "__main__":
    main()
