#!/usr/bin/env python3
"""Search under writes on 1M vectors: p50/p99 of searches at a fixed (open-loop) rate with
and without a concurrent stream of upserts and deletes, while the optimizer refreshes,
merges and commits. Target (issue 13): p99 under writes <= 2x idle.

1. `searchd dataset synth` 1M x 384 and `searchd ingest` with HNSW M=16, ef_construction=200
   (cached under --work, so a rerun skips them);
2. the collection is hard-link copied (segment files are write-once) so every run starts
   from the same state;
3. `searchd serve` (release build; the merge thread niced by --optimizer-nice), then
   `searchd load` in three phases of --duration each at --search-rate searches/s:
   idle, writes (the same searches plus upserts of 10 documents with new vectors and
   deletes of 5 ids: --mix), idle-after (the optimizer may still be merging);
4. recall@10 of the live collection after the writes, against exact search over what it
   holds (numpy, tie-aware), and of the idle collection before them.

    bench/.venv/bin/python bench/search_under_writes.py [--n 1000000] [--work /tmp/suw]
"""
import argparse, http.client, json, os, shutil, subprocess, sys, time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_writes import free_port, serve  # noqa: E402,F401


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path); r = c.getresponse(); b = r.read()
    return json.loads(b) if b else None


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse(); b = r.read()
    return r.status, (json.loads(b) if b else None)


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid):
    """CPU seconds per thread name (searchd-merger, searchd-refresher, search pool, ...)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            f = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out


def probe_segments(port, name, qv, ef, n=200):
    """Where a search's time goes after a phase: `n` sequential searches with `explain`
    (queries rotated), the median wall-clock microseconds of each segment's search and of the
    dense stage, with each segment's rows, deleted rows and plan."""
    per, dense = {}, []
    for i in range(n):
        _, r = post(port, f"/collections/{name}/search",
                    {"vector": [float(x) for x in qv[(i * 7) % len(qv)]], "k": 10, "ef": ef, "explain": True})
        e = r["explain"]
        dense.append(e["stages_us"]["dense"])
        for sg in e["segments"]:
            per.setdefault(sg["id"], {"us": [], "plan": sg["plan"]})["us"].append(sg["us"])
    # `/stats` lists the view's segments in the order searches go through them.
    st = get(port, "/stats")
    stats = ((st.get("collections") or {}).get(name, {}).get("live") or {}).get("segments") or []
    if len(stats) != len(per):
        stats = [{}] * len(per)
    return {"dense_us_median": float(np.median(dense)),
            "segments": [{"id": k, "us_median": float(np.median(v["us"])), "plan": v["plan"],
                          "docs": sg.get("docs"), "deleted": sg.get("deleted"), "index": sg.get("index")}
                         for (k, v), sg in zip(per.items(), stats)]}


def endpoint(step, name):
    eps = step.get("endpoints") or {}
    if isinstance(eps, dict):
        return eps.get(name)
    return next((e for e in eps if e.get("name") == name), None)


def slow_seconds(step, events):
    """Seconds of the measured window whose p99 (all requests of the mix) is over 3x the
    median second's and over 10 ms, each with the optimizer steps that overlapped it."""
    ps = [x for x in step.get("per_second") or [] if x.get("p99_ms") is not None]
    t0 = step.get("measure_start_unix_s")
    if not ps or t0 is None:
        return []
    med = float(np.median([x["p99_ms"] for x in ps]))
    out = []
    for x in ps:
        if x["p99_ms"] > max(3 * med, 10.0):
            a, b = t0 + x["t"], t0 + x["t"] + 1
            over = [f'{e["kind"]}@{e["start_unix_ms"] / 1e3 - t0:.1f}s+{e["ms"]:.0f}ms'
                    f'({",".join(f"{k}={v:.0f}" for k, v in e["phases"])})'
                    for e in events if e["start_unix_ms"] / 1e3 < b and e["start_unix_ms"] / 1e3 + e["ms"] / 1e3 > a]
            out.append({"t": x["t"], "p99_ms": x["p99_ms"], "p50_ms": x["p50_ms"], "median_second_p99_ms": med,
                        "events": over})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/searchd")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--work", default="/tmp/searchd-suw")
    ap.add_argument("--search-rate", type=float, default=500.0)
    ap.add_argument("--upserts-per-s", type=float, default=10.0, help="requests of 10 docs (10: 100 docs/s)")
    ap.add_argument("--deletes-per-s", type=float, default=5.0, help="requests of 5 ids (5: 25 ids/s)")
    ap.add_argument("--duration", default="90s")
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--extra", default="", help="more `serve` flags, space separated")
    ap.add_argument("--out", default="bench/results/search-under-writes-synth1m")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    work = Path(a.work); work.mkdir(parents=True, exist_ok=True)
    log = open(work / "server.log", "ab")
    data = work / "data"
    if not (data / "base.npy").exists():
        subprocess.run([binary, "dataset", "synth", "--n", str(a.n), "--dim", str(a.dim), "--queries", "2000",
                        "--out", str(data)], check=True)
    base = np.load(data / "base.npy", mmap_mode="r")
    qv = np.load(data / "queries.npy")
    n = base.shape[0]
    src = work / "coll"
    ingest_s = None
    if not (src / "collection.json").exists():
        with open(work / "docs.jsonl", "w") as f:
            for i in range(n):
                f.write(f'{{"id":{i},"g":{i % 16}}}\n')
        t = time.time()
        subprocess.run([binary, "ingest", "--docs", str(work / "docs.jsonl"), "--vectors", str(data / "base.npy"),
                        "--out", str(src), "--m", "16", "--ef-construction", "200", "--force"], check=True)
        ingest_s = time.time() - t
    coll = work / "run"
    if coll.exists():
        shutil.rmtree(coll)
    subprocess.run(["cp", "-al", str(src), str(coll)], check=True)
    # Only segment files are write-once: the log is appended in place and the manifest and
    # deleted sets replaced, so those are copied, never shared with the cached collection
    # (a shared log would carry this run's writes back into it).
    for p in [coll / "collection.json", coll / "LOCK", *coll.glob("wal/*"), *coll.glob("*/deleted-*.bin")]:
        if p.is_file():
            data = p.read_bytes(); p.unlink(); p.write_bytes(data)
    if (coll / "wal").exists() or any(coll.glob("seg-*/deleted-*")):
        print("note: the cached collection has a log or deleted rows; idle is not a fresh ingest", file=sys.stderr)
    name = "run"
    rng = np.random.default_rng(5)

    # Request files for `searchd load --mix`: searches rotate over 2,000 queries; upserts
    # replace random ids with other rows' vectors (so deletes sets grow and vacuums run);
    # deletes remove random ids.
    def vec(j):
        return [round(float(x), 5) for x in base[j]]
    srch, ups, dels = work / "search.txt", work / "upsert.txt", work / "delete.txt"
    with open(srch, "w") as f:
        for q in qv:
            f.write(f"POST /collections/{name}/search " +
                    json.dumps({"vector": [round(float(x), 5) for x in q], "k": 10, "ef": a.ef}) + "\n")
    secs = float(a.duration.rstrip("s")) + 10  # the writes phase and its warm-up
    upsert_lines = int(a.upserts_per_s * secs * 1.05) + 1
    touched = []
    with open(ups, "w") as f:
        for _ in range(upsert_lines):
            ids = rng.integers(0, n, 10); rows = rng.integers(0, n, 10)
            touched += list(zip(ids.tolist(), rows.tolist()))
            f.write(f"POST /collections/{name}/docs " + json.dumps(
                {"docs": [{"id": int(i), "vector": vec(j), "fields": {"g": int(i % 16)}} for i, j in zip(ids, rows)]}) + "\n")
    with open(dels, "w") as f:
        for _ in range(int(a.deletes_per_s * secs * 1.05) + 1):
            f.write(f"POST /collections/{name}/delete " + json.dumps({"ids": rng.integers(0, n, 5).tolist()}) + "\n")

    extra = a.extra.split() if a.extra else []
    p, port = serve(binary, coll, extra, log)
    open_s = None
    runs = {}
    tot = a.search_rate + a.upserts_per_s + a.deletes_per_s
    phases = [("idle", f"search={srch}:1", a.search_rate),
              ("writes", f"search={srch}:{a.search_rate / tot:.4f},upsert={ups}:{a.upserts_per_s / tot:.4f},"
                         f"delete={dels}:{a.deletes_per_s / tot:.4f}", tot),
              ("idle-after", f"search={srch}:1", a.search_rate)]
    for phase, mix, rate in phases:
        jp = work / f"load-{phase}.json"
        cpu0, th0, t0 = cpu_seconds(p.pid), thread_cpu(p.pid), time.time()
        subprocess.run([binary, "load", "--url", f"http://127.0.0.1:{port}", "--mix", mix, "--rate", str(rate),
                        "--warmup", "10s", "--duration", a.duration, "--json", str(jp), "--quiet"], check=False,
                       stdout=subprocess.DEVNULL, stderr=log)
        wall = time.time() - t0
        cpu1, th1 = cpu_seconds(p.pid), thread_cpu(p.pid)
        rep = json.load(open(jp))
        step = rep["steps"][-1]
        st = get(port, "/stats")
        live = (st.get("collections") or {}).get(name, {}).get("live")
        runs[phase] = {
            "rate": rate, "mix": mix.replace(str(work) + "/", ""),
            "search": endpoint(step, "search"), "upsert": endpoint(step, "upsert"),
            "delete": endpoint(step, "delete"),
            "server_cpu_cores": (cpu1 - cpu0) / wall,
            "thread_cpu_s": {k: round(th1.get(k, 0) - th0.get(k, 0), 2) for k in th1 if th1.get(k, 0) - th0.get(k, 0) > 0.05},
            "live": {"segments": live.get("segments"), "optimizer": live.get("optimizer"),
                     "docs_upserted": live.get("docs_upserted"), "docs_deleted": live.get("docs_deleted")} if live else None,
        }
        t0 = step.get("measure_start_unix_s")
        evs = [e for e in (live or {}).get("events", [])
               if t0 is not None and e["start_unix_ms"] / 1e3 >= t0 - 15]
        runs[phase]["measure_start_unix_s"] = t0
        # The server's own histogram of successful searches over its last 60 s (inside this
        # phase): latency from the parsed request head to the reply, without the load
        # generator's send lag (which rises when the box is busy: both share 2 cores).
        runs[phase]["server_search_ms"] = st.get("latency_ms")
        runs[phase]["server_stages"] = st.get("stages")
        runs[phase]["client_send_lag_us"] = step.get("send_error_us")
        runs[phase]["per_second"] = step.get("per_second")
        runs[phase]["events"] = evs
        runs[phase]["slow_seconds"] = slow_seconds(step, evs)
        runs[phase]["segment_us"] = probe_segments(port, name, qv, a.ef)
        n_ok = (runs[phase]["search"] or {}).get("ok") or 0
        srch_cpu = sum(v for k, v in runs[phase]["thread_cpu_s"].items() if k.startswith("searchd-search"))
        runs[phase]["search_thread_cpu_ms_per_search"] = srch_cpu / n_ok * 1e3 if n_ok else None
        s = runs[phase]["search"] or {}
        print(f"{phase}: search p50 {s.get('p50_ms')} p99 {s.get('p99_ms')} ms, errors {s.get('errors')}, "
              f"cpu {runs[phase]['server_cpu_cores']:.2f} cores, threads {runs[phase]['thread_cpu_s']}", flush=True)

    # Recall of the live collection after the writes: exact search over what it holds. The
    # state is rebuilt from the ids the load sent (upserts in file order, cycled) and the
    # deletes; ids touched by both in an unknown order are left out of the truth and of the hits.
    post(port, f"/collections/{name}/docs", {"docs": [{"id": 0, "vector": vec(0), "fields": {"g": 0}}], "wait": True})
    ambiguous = set(i for i, _ in touched)
    for line in open(dels):
        ambiguous.update(json.loads(line.split(" ", 2)[2])["ids"])
    ambiguous.discard(0)
    qs = qv[:200]
    amb = np.fromiter(ambiguous, dtype=np.int64)
    scores = np.empty((n, len(qs)), np.float32)
    for r0 in range(0, n, 100_000):
        scores[r0:r0 + 100_000] = base[r0:r0 + 100_000] @ qs.T
    scores[amb] = -np.inf
    hits = total = 0
    for qi, q in enumerate(qs):
        sc = scores[:, qi]
        top = np.argpartition(-sc, 10)[:10]
        kth = np.sort(sc[top])[0]
        s_, r = post(port, f"/collections/{name}/search", {"vector": q.tolist(), "k": 40, "ef": max(a.ef, 40)})
        got = [h["id"] for h in r["hits"] if h["id"] not in ambiguous][:10]
        hits += sum(1 for g in got if sc[g] >= kth - 1e-5)
        total += 10
    recall_after = hits / total
    p.terminate(); p.wait()

    idle, wr = runs["idle"]["search"], runs["writes"]["search"]
    ratio = wr["p99_ms"] / idle["p99_ms"] if idle and wr and idle.get("p99_ms") else None
    si, sw = runs["idle"].get("server_search_ms") or {}, runs["writes"].get("server_search_ms") or {}
    server_ratio = sw["p99"] / si["p99"] if si.get("p99") and sw.get("p99") else None
    p50_ratio = wr["p50_ms"] / idle["p50_ms"] if idle and wr and idle.get("p50_ms") else None
    server_p50_ratio = sw["p50"] / si["p50"] if si.get("p50") and sw.get("p50") else None
    out = {
        "schema": "searchd.bench.search-under-writes.v1",
        "data": f"synth {n} x {a.dim}", "index": "hnsw M=16 ef_construction=200", "ef": a.ef,
        "search_rate": a.search_rate, "upserts_per_s": a.upserts_per_s, "docs_per_upsert": 10,
        "deletes_per_s": a.deletes_per_s, "ids_per_delete": 5, "duration": a.duration,
        "serve_extra": extra, "ingest_s": ingest_s, "runs": runs,
        "p99_ratio_writes_vs_idle": ratio, "server_p99_ratio_writes_vs_idle": server_ratio,
        "p50_ratio_writes_vs_idle": p50_ratio, "server_p50_ratio_writes_vs_idle": server_p50_ratio, "recall_after_writes_at_k40_ef": recall_after,
        "passed": ratio is not None and ratio <= 2.0 and (wr.get("errors") or 0) == 0,
    }
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    json.dump(out, open(a.out + ".json", "w"), indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(f"# Search under writes: {n:,} x {a.dim} (synthetic), HNSW M=16 ef_construction=200, ef {a.ef}\n\n"
                f"`searchd load --mix` open loop, {a.duration} per phase after 10 s warm-up; searches rotate over "
                f"2,000 queries at {a.search_rate:g}/s. The writes phase adds {a.upserts_per_s:g} upserts/s of 10 documents "
                f"(new vectors for random ids) and {a.deletes_per_s:g} deletes/s of 5 ids, while the optimizer refreshes, "
                f"merges and commits (`serve` flags: `{' '.join(extra) or 'defaults'}`).\n\n"
                "| phase | search p50 ms | search p99 ms | search max ms | search errors | upsert p50 / p99 ms | delete p50 / p99 ms | server CPU (cores) | merge CPU s |\n"
                "|---|---|---|---|---|---|---|---|---|\n")
        for ph, r in runs.items():
            s = r["search"] or {}; u = r["upsert"] or {}; d = r["delete"] or {}
            mcpu = r["thread_cpu_s"].get("searchd-merger", 0)
            f.write(f"| {ph} | {s.get('p50_ms', float('nan')):.2f} | {s.get('p99_ms', float('nan')):.2f} | "
                    f"{s.get('max_ms', float('nan')):.1f} | {s.get('errors')} | "
                    f"{u.get('p50_ms', float('nan')):.2f} / {u.get('p99_ms', float('nan')):.2f} | "
                    f"{d.get('p50_ms', float('nan')):.2f} / {d.get('p99_ms', float('nan')):.2f} | "
                    f"{r['server_cpu_cores']:.2f} | {mcpu:.1f} |\n")
        f.write(f"\np99 under writes / idle: **{ratio:.2f}x** (target <= 2x). Passed: **{out['passed']}**.\n\n")
        f.write("The server's own search latency (its histogram of the last 60 s of each phase, from the "
                "parsed request to the reply; no client send lag):\n\n| phase | server p50 ms | server p99 ms | "
                "client send lag p50 / p99 us |\n|---|---|---|---|\n")
        for ph, r in runs.items():
            sv = r.get("server_search_ms") or {}; lag = r.get("client_send_lag_us") or {}
            f.write(f"| {ph} | {sv.get('p50', float('nan')):.2f} | {sv.get('p99', float('nan')):.2f} | "
                    f"{lag.get('p50_us', float('nan')):.0f} / {lag.get('p99_us', float('nan')):.0f} |\n")
        f.write(f"\nServer-side p99 under writes / idle: **{server_ratio:.2f}x**.\n\n" if server_ratio else "\n")
        f.write(f"p50 under writes / idle: client **{p50_ratio:.2f}x**, server "
                f"**{(server_p50_ratio or float('nan')):.2f}x** (target <= 1.3x).\n\n")
        f.write("Where a search's time goes at the end of each phase (200 sequential searches with `explain`, "
                "median wall-clock us per segment; search threads' CPU per search over the phase):\n\n"
                "| phase | search-thread CPU ms / search | dense stage us | segments: id (rows, deleted, index, plan): us |\n"
                "|---|---|---|---|\n")
        for ph, r in runs.items():
            sg = r.get("segment_us") or {}
            cpu = r.get("search_thread_cpu_ms_per_search")
            f.write(f"| {ph} | {cpu if cpu is None else f'{cpu:.3f}'} | {sg.get('dense_us_median', float('nan')):.0f} | " + "; ".join(
                f"{x['id']} ({x['docs']}, {x['deleted']}, {x['index']}, {x['plan']}): {x['us_median']:.0f}"
                for x in sg.get("segments", [])) + " |\n")
        f.write("\n")
        lw = runs["writes"]["live"] or {}
        f.write(f"Segments after the writes phase: {json.dumps(lw.get('segments'))}\n\n"
                f"Optimizer: {json.dumps(lw.get('optimizer'))}\n\n"
                f"Recall@10 after the writes (k 40 fetched, ids with an unknown final state dropped from truth and hits): "
                f"{recall_after:.4f}\n")
    with open(a.out + ".md", "a") as f:
        for ph, r in runs.items():
            f.write(f"\nSlow seconds of `{ph}` (p99 over 3x the median second's and over 10 ms) and the "
                    f"optimizer steps overlapping them (start s into the window + ms, phases in ms):\n\n")
            for x in r["slow_seconds"] or []:
                f.write(f"- t={x['t']} s: p99 {x['p99_ms']:.1f} ms (median second {x['median_second_p99_ms']:.1f}); "
                        f"{'; '.join(x['events']) or 'no optimizer step'}\n")
            if not r["slow_seconds"]:
                f.write("- none\n")
            kinds = {}
            for e in r["events"]:
                k = kinds.setdefault(e["kind"], [0, 0.0, 0.0])
                k[0] += 1; k[1] += e["ms"]; k[2] = max(k[2], e["ms"])
            f.write("\nOptimizer steps in this phase: " + (", ".join(
                f"{k} x{v[0]} ({v[1] / 1e3:.1f} s, longest {v[2]:.0f} ms)" for k, v in kinds.items()) or "none") + "\n")
    print(json.dumps({"ratio": ratio, "passed": out["passed"], "recall_after": recall_after}))
    sys.exit(0 if out["passed"] else 1)


if __name__ == "__main__":
    main()
