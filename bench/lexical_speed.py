#!/usr/bin/env python3
"""searchd-lexical (BM25 over tantivy) against bm25s and tantivy-py on the same texts.

    python3 bench/lexical_speed.py                 # creates bench/.venv-lexical on first use
    python3 bench/lexical_speed.py --only gcide    # skip the 1M synthetic corpus

Datasets
  gcide        dev-gcide-50k passages (`text`) and its 2,000 headword queries (`query`).
  gcide-zipfq  the same passages, 2,000 seeded queries of 2-5 words drawn Zipf(1) over the
               passages' vocabulary ranked by frequency (headwords rarely occur in passages,
               so the real queries match few documents; these exercise long posting lists).
  synth-1m     1,000,000 seeded synthetic documents: words drawn Zipf(1) over the gcide
               vocabulary ranked by frequency, lengths drawn from gcide's token counts;
               2,000 queries of 2-5 words drawn the same way. Written to a temp dir, removed.

Engines (all single-threaded, in process, warm, top-10, queries rotated over `--repeat`
passes after one warm-up pass, each search timed on its own)
  searchd      `cargo run --release -p searchd-lexical --example bm25_bench` (its JSON);
               analyzer `standard`. Build time includes reading the JSONL.
  bm25s        method "lucene" (k1=1.2, b=0.75, Lucene's IDF, the same as tantivy's), fed
               searchd's own tokens (`--dump-tokens`), so the tokenisation is identical;
               backends numpy and numba. Build time = `BM25.index` on token ids.
  tantivy-py   tantivy's Python bindings, default tokenizer (SimpleTokenizer + lowercase: splits
               on every non-alphanumeric char, unlike UAX#29), text indexed with freqs,
               `parse_query_lenient` + `search(count=False)` timed together; writer with one
               thread, 64 MB, default merge policy (so possibly several segments).

Agreement: mean top-10 overlap of searchd vs bm25s, |A n B| / max(|A|, |B|) over queries
where either returns a hit with score > 0, plus a tie-aware version (a searchd row counts
when its bm25s score is >= bm25s's 10th score minus 1e-5 relative). Disagreements left are
tantivy's one-byte fieldnorms (document lengths above 40 tokens are rounded down).

Writes bench/results/lexical-speed.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venv-lexical"
REQS = ["numpy", "scipy", "bm25s==0.3.16", "tantivy==0.27.0", "numba"]
GCIDE = ROOT.parent / "shared" / "datasets" / "dev-gcide-50k"
EXAMPLE = ROOT / "target" / "release" / "examples" / "bm25_bench"
RESULTS = HERE / "results"
K = 10
TIE_REL = 1e-5


def ensure_venv() -> None:
    """Re-exec under bench/.venv-lexical, creating it (PyPI only) when missing."""
    vpy = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not vpy.exists():
        print(f"creating {VENV}", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    probe = "import numpy, scipy, bm25s, tantivy, numba"
    if subprocess.call([str(vpy), "-c", probe], stderr=subprocess.DEVNULL) != 0:
        subprocess.check_call([str(vpy), "-m", "pip", "install", "--quiet", *REQS])
    os.execv(str(vpy), [str(vpy), str(Path(__file__).resolve()), *sys.argv[1:]])


def pct(sorted_ms: list[float], p: float) -> float:
    import math

    if not sorted_ms:
        return 0.0
    rank = min(max(math.ceil(p * len(sorted_ms)), 1), len(sorted_ms))
    return sorted_ms[rank - 1]


def timed_passes(search, queries: list, repeat: int, budget_s: float) -> dict:
    """One warm-up pass, then up to `repeat` timed passes (at least one; no new pass starts
    after `budget_s` seconds of timed searching)."""
    for q in queries:
        search(q)
    times = []
    start = time.perf_counter()
    passes = 0
    for _ in range(repeat):
        for q in queries:
            t = time.perf_counter()
            search(q)
            times.append((time.perf_counter() - t) * 1e3)
        passes += 1
        if time.perf_counter() - start > budget_s:
            break
    times.sort()
    return {
        "p50_ms": pct(times, 0.5),
        "p90_ms": pct(times, 0.9),
        "p99_ms": pct(times, 0.99),
        "mean_ms": sum(times) / len(times),
        "searches": len(times),
        "passes": passes,
    }


def write_jsonl(path: Path, field: str, texts) -> None:
    with open(path, "w") as f:
        for t in texts:
            f.write(json.dumps({field: t}) + "\n")


def read_field(path: Path, field: str) -> list[str]:
    with open(path) as f:
        return [json.loads(line)[field] for line in f if line.strip()]


def read_tokens(path: Path) -> list[list[str]]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def gcide_vocab(tok_path: Path):
    """Distinct gcide tokens by decreasing frequency, and the docs' token counts."""
    counts: dict[str, int] = {}
    lengths = []
    with open(tok_path) as f:
        for line in f:
            toks = json.loads(line)
            lengths.append(len(toks))
            for t in toks:
                counts[t] = counts.get(t, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))
    return words, lengths


def zipf_sampler(n_words: int, rng):
    import numpy as np

    w = 1.0 / np.arange(1, n_words + 1, dtype=np.float64)
    cdf = np.cumsum(w)
    cdf /= cdf[-1]

    def sample(size):
        return np.minimum(np.searchsorted(cdf, rng.random(size)), n_words - 1)

    return sample


def zipf_queries(words: list[str], n: int, seed: int) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    sample = zipf_sampler(len(words), rng)
    lens = rng.integers(2, 6, size=n)
    return [" ".join(words[i] for i in sample(int(m))) for m in lens]


def synth_docs(path: Path, words: list[str], lengths: list[int], n: int, seed: int) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    sample = zipf_sampler(len(words), rng)
    lens = rng.choice(np.asarray(lengths), size=n)
    chunk = 50_000
    with open(path, "w") as f:
        for start in range(0, n, chunk):
            part = lens[start : start + chunk]
            ids = sample(int(part.sum()))
            pos = 0
            lines = []
            for m in part:
                m = int(m)
                lines.append(json.dumps({"text": " ".join(words[i] for i in ids[pos : pos + m])}))
                pos += m
            f.write("\n".join(lines) + "\n")


def run_searchd(docs: Path, queries: Path, work: Path, repeat: int) -> tuple[dict, Path]:
    idx = work / "searchd-idx"
    tok = work / "tokens"
    out = work / "searchd.json"
    shutil.rmtree(idx, ignore_errors=True)
    cmd = [
        str(EXAMPLE), "--docs", str(docs), "--text-field", "text", "--queries", str(queries),
        "--query-field", "query", "--analyzer", "standard", "--out", str(idx),
        "--repeat", str(repeat), "--top", str(K), "--json", str(out), "--dump-tokens", str(tok),
    ]
    subprocess.check_call(cmd)
    res = json.loads(out.read_text())
    shutil.rmtree(idx, ignore_errors=True)
    return res, tok


def run_bm25s(tok: Path, repeat: int, budget_s: float):
    import numpy as np
    import bm25s

    docs = read_tokens(tok / "docs.tokens.jsonl")
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in d] for d in docs]
    del docs
    qtoks = read_tokens(tok / "queries.tokens.jsonl")
    qids = [[vocab[t] for t in q if t in vocab] for q in qtoks]
    # bm25s answers a query with no known token with the "" token; given ids, it adds "" to its
    # vocabulary after building the score matrix, so put it in the vocabulary up front.
    vocab.setdefault("", len(vocab))
    out = {}
    retrievers = {}
    for backend in ["numpy", "numba"]:
        t = time.perf_counter()
        r = bm25s.BM25(method="lucene", k1=1.2, b=0.75, backend=backend)
        r.index((ids, dict(vocab)), show_progress=False)
        build_s = time.perf_counter() - t
        retrievers[backend] = r

        def search(q, r=r):
            return r.retrieve([q], k=K, show_progress=False, n_threads=1, sorted=True)

        # Queries with no known token would score everything 0; bm25s answers them with the
        # empty token. Timed like the others (searchd answers them too).
        qs = [q if q else [r.vocab_dict[""]] for q in qids]
        res = timed_passes(search, qs, repeat, budget_s)
        res["build_s"] = build_s
        out[backend] = res
        print(f"  bm25s[{backend}]: build {build_s:.2f}s p50 {res['p50_ms']:.3f} ms "
              f"p99 {res['p99_ms']:.3f} ms", file=sys.stderr)
    # Reference rankings and full score vectors for agreement (numpy backend).
    r = retrievers["numpy"]
    ref = []
    for q in qids:
        if not q:
            ref.append(None)
            continue
        scores = r.get_scores(q)
        top = np.argsort(-scores, kind="stable")[:K]
        ref.append((scores, [int(i) for i in top if scores[i] > 0]))
    del retrievers
    return out, ref


def agreement(searchd_rows: list[list[int]], ref) -> dict:
    plain, tie, n = 0.0, 0.0, 0
    for rows, rr in zip(searchd_rows, ref):
        if rr is None:
            continue
        scores, top = rr
        if not rows and not top:
            continue
        n += 1
        plain += len(set(rows) & set(top)) / max(len(rows), len(top))
        if top:
            kth = float(scores[top[-1]])
            ok = sum(1 for r in rows if float(scores[r]) >= kth - TIE_REL * abs(kth))
            tie += min(ok, len(top)) / max(len(rows), len(top))
    return {"overlap_at_10": plain / max(n, 1), "overlap_at_10_tie_aware": tie / max(n, 1),
            "queries_compared": n}


def run_tantivy_py(docs: Path, queries: Path, repeat: int, budget_s: float) -> dict:
    import tantivy

    texts = read_field(docs, "text")
    qs = read_field(queries, "query")
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("text", stored=False, tokenizer_name="default", index_option="freq")
    schema = sb.build()
    with tempfile.TemporaryDirectory(prefix="tantivy-py-", dir="/tmp") as d:
        t = time.perf_counter()
        index = tantivy.Index(schema, path=d)
        w = index.writer(heap_size=64 << 20, num_threads=1)
        for text in texts:
            w.add_document(tantivy.Document(text=text))
        w.commit()
        w.wait_merging_threads()
        build_s = time.perf_counter() - t
        del texts
        index.reload()
        searcher = index.searcher()
        nbytes = sum(p.stat().st_size for p in Path(d).iterdir() if p.is_file())

        def search(q):
            query = index.parse_query_lenient(q, ["text"])[0]
            return searcher.search(query, K, count=False).hits

        res = timed_passes(search, qs, repeat, budget_s)
        res.update(build_s=build_s, bytes=nbytes, segments=searcher.num_segments)
    print(f"  tantivy-py: build {build_s:.2f}s p50 {res['p50_ms']:.3f} ms "
          f"p99 {res['p99_ms']:.3f} ms ({res['segments']} segments)", file=sys.stderr)
    return res


def bench_dataset(name: str, docs: Path, queries: Path, work: Path, repeat: int,
                  budget_s: float) -> dict:
    print(f"== {name}", file=sys.stderr)
    load_before = os.getloadavg()
    sd, tok = run_searchd(docs, queries, work, repeat)
    rows = sd.pop("results")
    print(f"  searchd: build {sd['build_s']:.2f}s p50 {sd['p50_ms']:.3f} ms "
          f"p99 {sd['p99_ms']:.3f} ms, {sd['bytes']} bytes", file=sys.stderr)
    bm, ref = run_bm25s(tok, repeat, budget_s)
    agree = agreement(rows, ref)
    del ref
    print(f"  agreement: {agree}", file=sys.stderr)
    tp = run_tantivy_py(docs, queries, repeat, budget_s)
    hits = sum(1 for r in rows if r)
    return {"name": name, "docs": sd["docs"], "queries": sd["queries"],
            "queries_with_hits": hits, "searchd": sd, "bm25s": bm, "tantivy_py": tp,
            "agreement": agree, "loadavg_before": load_before, "loadavg_after": os.getloadavg()}


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def render_md(report: dict) -> str:
    targets = {"gcide": 1.0, "gcide-zipfq": 1.0, "synth-1m": 2.0}
    L = []
    L.append("# Lexical search speed: searchd-lexical vs bm25s vs tantivy-py\n")
    L.append(f"Generated by `bench/lexical_speed.py` on {report['date']} ({report['cpu']}, "
             f"{report['nproc']} cores). Versions: " + ", ".join(
                 f"{k} {v}" for k, v in report["versions"].items()) + ".\n")
    L.append("Single-threaded, in process, warm, top-10; queries rotated, one warm-up pass, then "
             "each search timed on its own. **The VM is shared and noisy: figures vary by "
             "about ±10-15% between runs.**\n")
    L.append("| dataset | engine | build s | index MB | p50 ms | p99 ms | mean ms | p50 vs searchd |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for d in report["datasets"]:
        sd = d["searchd"]
        rows = [("searchd", sd["build_s"], sd["bytes"], sd)]
        for b, r in d["bm25s"].items():
            rows.append((f"bm25s ({b})", r["build_s"], None, r))
        tp = d["tantivy_py"]
        rows.append((f"tantivy-py ({tp['segments']} seg)", tp["build_s"], tp["bytes"], tp))
        for eng, build, nbytes, r in rows:
            mb = f"{nbytes / 1e6:.1f}" if nbytes else "-"
            ratio = r["p50_ms"] / sd["p50_ms"] if sd["p50_ms"] > 0 else float("nan")
            L.append(f"| {d['name']} ({d['docs']:,} docs) | {eng} | {build:.2f} | {mb} | "
                     f"{r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['mean_ms']:.3f} | {ratio:.1f}x |")
    L.append("\n`p50 vs searchd` = the engine's p50 / searchd's p50 (above 1 = slower than searchd). "
             "Load average (1 min) around each dataset's run: " + ", ".join(
                 f"{d['name']} {d['loadavg_before'][0]:.2f} -> {d['loadavg_after'][0]:.2f}"
                 for d in report["datasets"]) + " (this benchmark alone adds about 1.0).\n")
    L.append("Slowest searchd queries (mean ms over the passes) per dataset:\n")
    for d in report["datasets"]:
        slow = d["searchd"].get("slowest", [])[:5]
        L.append(f"- {d['name']}: " + "; ".join(f"`{s['query']}` {s['mean_ms']:.2f}" for s in slow))
    L.append("")
    L.append("## Agreement with bm25s (same tokens, method lucene, k1=1.2, b=0.75)\n")
    L.append("| dataset | queries compared | queries with hits | mean top-10 overlap | tie-aware |")
    L.append("|---|---:|---:|---:|---:|")
    for d in report["datasets"]:
        a = d["agreement"]
        L.append(f"| {d['name']} | {a['queries_compared']} | {d['queries_with_hits']} | "
                 f"{a['overlap_at_10']:.3f} | {a['overlap_at_10_tie_aware']:.3f} |")
    L.append("\n## Targets\n")
    L.append("| dataset | target | measured | result |")
    L.append("|---|---|---|---|")
    for d in report["datasets"]:
        sd, tp = d["searchd"], d["tantivy_py"]
        lim = targets.get(d["name"])
        if lim is not None:
            ok = sd["p50_ms"] <= lim
            L.append(f"| {d['name']} | searchd p50 <= {lim:g} ms | {sd['p50_ms']:.3f} ms | "
                     f"{'PASS' if ok else 'MISS'} |")
        ok = sd["p50_ms"] <= tp["p50_ms"]
        L.append(f"| {d['name']} | not slower than tantivy-py (p50) | {sd['p50_ms']:.3f} vs "
                 f"{tp['p50_ms']:.3f} ms | {'PASS' if ok else 'MISS'} |")
        a = d["agreement"]["overlap_at_10"]
        L.append(f"| {d['name']} | overlap with bm25s >= 0.9 | {a:.3f} | "
                 f"{'PASS' if a >= 0.9 else 'MISS'} |")
    L.append("\n## Notes\n")
    L.extend(f"- {n}" for n in report["notes"])
    return "\n".join(L) + "\n"


NOTES = [
    "searchd: `crates/lexical/examples/bm25_bench.rs`, analyzer `standard` (UAX#29 words, "
    "lowercased), one merged tantivy segment, doc id = row (no fast-field read on the hot "
    "path), block-max WAND through tantivy's `for_each_pruning`. Its build time includes "
    "reading and parsing the JSONL; the peers' build times do not (their texts or tokens are "
    "read before the clock starts), and bm25s' excludes tokenisation (it gets searchd's tokens).",
    "bm25s gets exactly searchd's tokens, so the agreement is about scoring alone. Remaining "
    "differences: tantivy stores document lengths as one-byte fieldnorms (exact up to 40 "
    "tokens, rounded down beyond), bm25s uses exact lengths; ties at the 10th place are "
    "ordered differently (the tie-aware column forgives those). bm25s' scores lack tantivy's "
    "constant (k1 + 1) factor, which does not change rankings. Both count a repeated query "
    "token once per occurrence.",
    "tantivy-py uses its default tokenizer (splits on every non-alphanumeric character, so "
    "`don't` is two tokens) and QueryParser (lenient); its timed search includes query "
    "parsing, as searchd's includes query analysis. `count=False` keeps block-max WAND on.",
    "gcide's own queries are headwords (mostly one word), which match only a few passages "
    "or none (see 'queries with hits'), so its latencies mostly measure the per-query fixed "
    "cost; gcide-zipfq and synth-1m queries hit common words and long posting lists.",
    "The Python peers pay the interpreter and binding cost of each call (a few microseconds), "
    "which dominates their figures when a search itself takes microseconds.",
    "searchd's tail (p99) comes from queries made only of the commonest words (the slowest "
    "list above: `the of to` and the like, each term in a third or more of the documents), "
    "where block-max WAND can skip little and tantivy decodes and scores the whole union; "
    "bm25s computes every (term, document) score at index time, so its per-query cost is "
    "flat. A dense score-accumulator path for such all-frequent-term queries is the known "
    "remedy (not implemented).",
    "bm25s' numpy backend scores every document of every query term's posting list "
    "(`np.add.at`) and then selects the top-k over all documents, so its cost grows with "
    "the corpus; the numba backend is JIT-compiled (compile time spent in the warm-up pass).",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["gcide", "gcide-zipfq", "synth-1m"], action="append")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=60.0,
                    help="per engine: no new timed pass starts after this many seconds")
    ap.add_argument("--synth-docs", type=int, default=1_000_000)
    ap.add_argument("--no-build", action="store_true", help="use the existing example binary")
    ap.add_argument("--out", default=str(RESULTS / "lexical-speed"))
    ap.add_argument("--render", metavar="JSON", help="only re-render the .md of a saved .json")
    ap.add_argument("--note", action="append", default=[], help="extra note for the .md")
    args = ap.parse_args()
    if args.render:
        report = json.loads(Path(args.render).read_text())
        report["notes"] = NOTES + report.get("extra_notes", []) + args.note
        report["extra_notes"] = report.get("extra_notes", []) + args.note
        Path(args.render).write_text(json.dumps(report, indent=1) + "\n")
        Path(args.render).with_suffix(".md").write_text(render_md(report))
        return 0
    for var in ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"]:
        os.environ.setdefault(var, "1")  # single-threaded peers (set before numpy loads)
    if not args.no_build:
        subprocess.check_call(["cargo", "build", "--release", "-p", "searchd-lexical",
                               "--example", "bm25_bench"], cwd=ROOT)
    wanted = args.only or ["gcide", "gcide-zipfq", "synth-1m"]
    import importlib.metadata as md

    report = {
        "schema": "searchd.bench-lexical-peers.v1",
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "nproc": os.cpu_count(),
        "versions": {p: md.version(p) for p in ["bm25s", "tantivy", "numba", "numpy"]},
        "repeat": args.repeat,
        "k": K,
        "datasets": [],
        "notes": NOTES + args.note,
        "extra_notes": args.note,
    }
    with tempfile.TemporaryDirectory(prefix="lexical-bench-", dir="/tmp") as tmp:
        tmp = Path(tmp)
        gdocs, gq = GCIDE / "passages.jsonl", GCIDE / "queries.jsonl"
        # The gcide vocabulary (searchd's tokens) drives the synthetic sets.
        voc_dir = tmp / "vocab"
        voc_dir.mkdir()
        if set(wanted) - {"gcide"}:
            _, tok = run_searchd(gdocs, gq, voc_dir, 0)
            words, lengths = gcide_vocab(tok / "docs.tokens.jsonl")
            shutil.rmtree(tok)
        for name in wanted:
            work = tmp / name
            work.mkdir()
            if name == "gcide":
                d = bench_dataset(name, gdocs, gq, work, args.repeat, args.budget_s)
            elif name == "gcide-zipfq":
                q = work / "queries.jsonl"
                write_jsonl(q, "query", zipf_queries(words, 2000, seed=11))
                d = bench_dataset(name, gdocs, q, work, args.repeat, args.budget_s)
            else:
                docs, q = work / "docs.jsonl", work / "queries.jsonl"
                t = time.perf_counter()
                synth_docs(docs, words, lengths, args.synth_docs, seed=7)
                write_jsonl(q, "query", zipf_queries(words, 2000, seed=13))
                print(f"generated {args.synth_docs} docs in {time.perf_counter() - t:.1f}s "
                      f"({docs.stat().st_size / 1e6:.0f} MB)", file=sys.stderr)
                d = bench_dataset(name, docs, q, work, args.repeat, args.budget_s)
                d["generator"] = {"seed": 7, "query_seed": 13, "zipf_s": 1.0,
                                  "vocabulary": len(words), "lengths": "gcide token counts"}
            report["datasets"].append(d)
            shutil.rmtree(work, ignore_errors=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(render_md(report))
    print(f"wrote {out.with_suffix('.md')} and .json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    ensure_venv()
    sys.exit(main())
