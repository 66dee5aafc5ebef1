#!/usr/bin/env python3
"""The front door by CPU: what `searchd serve` spends per HTTP search against the engine in process.

    python3 bench/front_door.py --dataset gcide [--runs 3] [--conc 8,32]

Uses bench/data/<dataset>/ as bench/serve_capacity.py does (base.npy, queries.npy, gt.npy,
searchd-hnsw/); same index, same ef, same thread count on both sides. Per run:

 1. engine: `searchd eval --threads T --ef EF` -> queries per second in one thread and in T
    threads. The eval loop never blocks, so its CPU per query is threads / QPS (one thread:
    1 / QPS_1; all threads: T / QPS_T, the like-for-like figure, since the server's T search
    threads also run side by side on the same cores);
 2. server: a fresh `searchd serve --threads T`, then closed-loop steps of `searchd load`
    (rotating queries) at each --conc, with the server's CPU read per thread from
    /proc/<pid>/task around the measured window: the I/O thread (the main thread, or
    `searchd-io*`), the search threads (`searchd-search-*`) and the rest. CPU per answered
    request = server CPU / answers; target <= 1.15 x the engine's CPU per query (T threads).
 3. the throughput ratio (HTTP answers per second / engine QPS with T threads), stated as
    what it is: the load generator shares the same cores (its CPU share is reported).

Writes bench/results/front-door-<dataset>.{json,md}. Exit 0 when the CPU target holds in every
run at the highest --conc, 1 otherwise, 2 on a setup error. Standard library only.
"""

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import overload as ov  # noqa: E402
import serve_capacity as sc  # noqa: E402

TARGET = 1.15


def engine(searchd: Path, index: Path, queries: Path, gt: Path, args, work: Path) -> dict:
    ej = work / "eval.json"
    r = sc.run([searchd, "eval", "--index", index, "--queries", queries, "--gt", gt, "--k", "10",
                "--ef", str(args.ef), "--threads", str(args.threads), "--min-seconds", "5", "--json", ej])
    if r.returncode != 0:
        raise RuntimeError(f"searchd eval failed: {r.stderr[-2000:]}")
    row = json.loads(ej.read_text())["rows"][0]
    return {
        "recall_at_10": row["recall_at_10"],
        "qps_1thread": row["qps_1thread"],
        "qps_all_threads": row["qps_all_threads"],
        "cpu_per_query_us_1thread": round(1e6 / row["qps_1thread"], 1),
        "cpu_per_query_us_all_threads": round(args.threads * 1e6 / row["qps_all_threads"], 1),
    }


def one_run(searchd, index, queries, gt, args, work: Path) -> dict:
    sc.wait_quiet("engine", args.quiet_busy, args.quiet_wait)
    eng = engine(searchd, index, queries, gt, args, work)
    res = {"engine": eng, "steps": []}
    srv = sc.Server(searchd, index, queries, args.ef, args.threads, work / "serve.log", args.serve_args.split())
    try:
        # warm the server (first touches, allocator, connection set-up) before measuring
        sc.load(searchd, srv.url, work / "warm", "8", args, ["--pick", "uniform"])
        for c in [int(x) for x in args.conc.split(",")]:
            sc.wait_quiet(f"c={c}", args.quiet_busy, args.quiet_wait)
            m = ov.measured(srv, searchd, work / f"step-c{c}", c, args, [])
            cpu, secs, ok = m["server_cpu_s"], m["cpu_window_s"], m["goodput_qps"]
            per = {k: round(v / secs / max(ok, 1e-9) * 1e6, 1) for k, v in cpu.items()}
            total = round(sum(per.values()), 1)
            res["steps"].append({
                "concurrency": c,
                "answers_per_s": ok,
                "p99_ms": m["accepted_p99_ms"],
                "errors_per_s": m["refused_per_s"],
                "client_cpu_pct": m["client_cpu_pct"],
                "server_cpu_per_answer_us": {"io": per["io"], "search": per["search"], "other": per["other"],
                                             "total": total},
                "vs_engine_all_threads": round(total / eng["cpu_per_query_us_all_threads"], 3),
                "vs_engine_1thread": round(total / eng["cpu_per_query_us_1thread"], 3),
                "search_threads_vs_engine_all_threads": round(per["search"] / eng["cpu_per_query_us_all_threads"], 3),
                "throughput_vs_engine": round(ok / eng["qps_all_threads"], 3),
            })
    finally:
        srv.stop()
    return res


def render_md(res: dict) -> str:
    L = [f"# The front door by CPU ({res['dataset']})", "",
         f"Run {res['started']} .. {res['ended']}; {res['searchd']}; {res['runs']} runs; ef {res['params']['ef']}, "
         f"{res['params']['threads']} threads on both sides; the same index. Server CPU per answered HTTP search "
         "from /proc per thread over the measured window of a closed-loop `searchd load` step (rotating "
         "queries); engine CPU per query in process = threads / QPS of `searchd eval` (a loop that never "
         "blocks). The load generator runs on the same 2 cores: throughput ratios are of a shared box.", "",
         "| run | engine µs/query (1 thread, all threads) | c | answers/s | p99 ms | server µs/answer: I/O + search + other = total | "
         "total / engine (all threads) | search threads / engine | throughput / engine | client CPU % |",
         "|---|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for i, r in enumerate(res["rows"], 1):
        e = r["engine"]
        for s in r["steps"]:
            p = s["server_cpu_per_answer_us"]
            L.append(f"| {i} | {e['cpu_per_query_us_1thread']:.0f}, {e['cpu_per_query_us_all_threads']:.0f} | "
                     f"{s['concurrency']} | {s['answers_per_s']:.0f} | {s['p99_ms']:.1f} | "
                     f"{p['io']:.0f} + {p['search']:.0f} + {p['other']:.0f} = {p['total']:.0f} | "
                     f"{s['vs_engine_all_threads']:.3f} | {s['search_threads_vs_engine_all_threads']:.3f} | "
                     f"{s['throughput_vs_engine']:.3f} | {s['client_cpu_pct'] or 0:.0f} |")
    L += ["", "## Summary (median, min..max over runs)", "",
          "| c | server CPU / engine CPU per search | throughput / engine |", "|---:|---|---|"]
    for c, sm in res["summary"].items():
        a, t = sm["vs_engine_all_threads"], sm["throughput_vs_engine"]
        L.append(f"| {c} | {a['median']} ({a['min']}..{a['max']}) | {t['median']} ({t['min']}..{t['max']}) |")
    t = res["target"]
    L += ["", f"Target: server CPU per HTTP search <= {TARGET} x the engine's at c={t['concurrency']} in every run: "
          f"{t['value']} -> **{'PASS' if t['pass'] else 'FAIL'}**"]
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="gcide")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--conc", default="8,32", help="closed-loop concurrencies measured; the last is judged")
    ov.add_common_args(ap)
    args = ap.parse_args()
    prep = ov.prepare(args, "front-door")
    if prep is None:
        return 2
    index, queries, gt, searchd, work = prep
    out = Path(args.out) if args.out else HERE / "results" / f"front-door-{args.dataset}.json"
    res = {"schema": "searchd.bench.front_door.v1", "dataset": args.dataset, "runs": args.runs,
           "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "searchd": sc.subprocess.run([str(searchd), "--version"], capture_output=True, text=True).stdout.strip(),
           "params": {"ef": args.ef, "threads": args.threads, "conc": args.conc, "warmup": args.warmup,
                      "duration": args.duration, "queries_rotated": args.nq},
           "rows": []}
    for run in range(1, args.runs + 1):
        sc.log(f"run {run}")
        res["rows"].append(one_run(searchd, index, queries, gt, args, work))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1))
    res["summary"] = {}
    for c in [int(x) for x in args.conc.split(",")]:
        ss = [s for r in res["rows"] for s in r["steps"] if s["concurrency"] == c]
        res["summary"][str(c)] = {k: ov.spread([s[k] for s in ss])
                                  for k in ("vs_engine_all_threads", "throughput_vs_engine")}
    judged = int(args.conc.split(",")[-1])
    vals = [s["vs_engine_all_threads"] for r in res["rows"] for s in r["steps"] if s["concurrency"] == judged]
    res["target"] = {"concurrency": judged, "value": ", ".join(map(str, vals)), "goal": f"<= {TARGET}",
                     "pass": bool(vals) and all(v <= TARGET for v in vals)}
    res["ended"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    out.write_text(json.dumps(res, indent=1))
    out.with_suffix(".md").write_text(render_md(res))
    sc.log(f"wrote {out} and {out.with_suffix('.md')}")
    return 0 if res["target"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
