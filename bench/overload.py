#!/usr/bin/env python3
"""Overload that keeps its goodput: `searchd serve` at 4x its sustainable concurrency, with
clients that resend at once after a 503 and with clients that honour `Retry-After`, refusals
held (`--refusal-hold-ms`, the default) against answered at once (`--refusal-hold-ms 0`, the
old design), in the same run, repeated.

    python3 bench/overload.py --dataset gcide [--runs 3] [--holds 100,0]

Uses bench/data/<dataset>/ as bench/serve_capacity.py does (base.npy, queries.npy, gt.npy,
searchd-hnsw/). Everything runs on this one 2-core box: the load generator shares the cores
with the server, as in the issue's figures. Per run and per hold setting:

 1. a fresh server; `searchd load` closed-loop ramp (rotating queries, SLO p99 <= 100 ms,
    errors <= 5%) -> its best passing step, and C, the highest concurrency that met the SLO;
 2. the sustainable step again at C, alone, with the server's per-thread CPU read from
    /proc around the measured window -> CPU per answered request on the I/O thread;
 3. overload at 4 x C, clients ignore `Retry-After` (resend at once), then honour it:
    goodput (200s per second) / sustainable (target >= 0.90), p99 of the accepted requests
    (target <= 100 ms), refusals per second, and the CPU per refused request on the I/O
    thread: (I/O CPU - answered x I/O CPU per answered request) / refused, against the
    engine's CPU per search (the search threads' CPU per answered request).

Goodput is against the sustainable rate of the same server measured just before and just
after each overload step (their mean: this VM drifts by 10-30% between minutes). Writes
bench/results/overload-<dataset>.{json,md}. Exit 0 when every target passes in at least
`--need` of the runs for the default hold, 1 otherwise, 2 on a setup error.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import serve_capacity as sc  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict:
    """CPU seconds per thread name group (searchd-io, searchd-search, other)."""
    out = {"io": 0.0, "search": 0.0, "other": 0.0}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (t / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        f = stat[stat.rindex(")") + 2:].split()
        sec = (int(f[11]) + int(f[12])) / CLK
        # one I/O thread is the main thread (a current-thread runtime, named after the binary)
        io = name.startswith("searchd-io") or t.name == str(pid)
        key = "io" if io else "search" if name.startswith("searchd-search") else "other"
        out[key] += sec
    return out


def diff(a: dict, b: dict) -> dict:
    return {k: round(b[k] - a[k], 3) for k in a}


def measured(srv, searchd, work: Path, conc: int, args, extra: list[str]) -> dict:
    """One closed-loop step at `conc` with per-thread server CPU over its measured window."""
    warm = float(args.warmup.rstrip("s"))
    dur = float(args.duration.rstrip("s"))
    snaps = {}

    def sampler():
        time.sleep(warm + 0.3)  # the load process's start-up, then its warm-up
        snaps["a"] = (time.time(), thread_cpu(srv.proc.pid))
        time.sleep(dur - 0.6)
        snaps["b"] = (time.time(), thread_cpu(srv.proc.pid))

    th = threading.Thread(target=sampler)
    th.start()
    rep = sc.load(searchd, srv.url, work, str(conc), args, ["--pick", "uniform", *extra])
    th.join()
    step = rep["steps"][0]
    secs = snaps["b"][0] - snaps["a"][0]
    cpu = diff(snaps["a"][1], snaps["b"][1])
    ok_rate = step["ok"] / step["duration_s"]
    refused = sum(v for k, v in (step.get("errors") or {}).items() if "503" in k or "overloaded" in k)
    lat = step["latency_ms"]
    return {
        "concurrency": conc,
        "step": sc.slim_step(step),
        "goodput_qps": round(ok_rate, 1),
        "refused_per_s": round(refused / step["duration_s"], 1),
        "accepted_p99_ms": lat.get("p99"),
        "client_cpu_pct": step.get("client_cpu_pct"),
        "server_cpu_s": cpu,
        "cpu_window_s": round(secs, 3),
        # per second of the window, as rates: answered and refused from the step's own rates
        "io_cpu_per_s": round(cpu["io"] / secs, 4),
        "search_cpu_per_s": round(cpu["search"] / secs, 4),
    }


def one_setting(searchd, index, queries, gt, hold: int, args, work: Path) -> dict:
    extra = ["--refusal-hold-ms", str(hold)] + args.serve_args.split()
    srv = sc.Server(searchd, index, queries, args.ef, args.threads, work / f"serve-h{hold}.log", extra)
    res = {"hold_ms": hold}
    try:
        sc.wait_quiet("ramp", args.quiet_busy, args.quiet_wait)
        ramp = sc.load(searchd, srv.url, work / f"ramp-h{hold}", args.ramp, args,
                       ["--pick", "uniform", "--gt", str(gt)])
        sust = ramp.get("sustainable")
        if not sust:
            res["error"] = "no step met the SLO"
            return res
        # C: the highest concurrency whose step met the SLO (the issue's "sustainable
        # concurrency"; its best step is reported as the ramp's sustainable rate)
        c = max(int(st["concurrency"]) for st in ramp["steps"] if st.get("slo_pass"))
        res["ramp_sustainable"] = {"concurrency": int(sust["concurrency"]), "qps": sust["qps"],
                                   "p99_ms": sust["p99_ms"], "highest_passing_concurrency": c}
        sc.wait_quiet("sustainable", args.quiet_busy, args.quiet_wait)
        s = measured(srv, searchd, work / f"sust-h{hold}", c, args, [])
        res["sustainable"] = s
        io_per_ok = s["io_cpu_per_s"] / max(s["goodput_qps"], 1e-9)
        search_per_ok = s["search_cpu_per_s"] / max(s["goodput_qps"], 1e-9)
        res["io_cpu_per_answer_us"] = round(io_per_ok * 1e6, 1)
        res["search_cpu_per_answer_us"] = round(search_per_ok * 1e6, 1)
        before = s
        for mode in ("ignore", "honor"):
            sc.wait_quiet(f"overload {mode}", args.quiet_busy, args.quiet_wait)
            o = measured(srv, searchd, work / f"over-{mode}-h{hold}", 4 * c, args, ["--retry-after", mode])
            # The same sustainable step again right after: this VM's speed drifts by 10-30%
            # between minutes, so each overload step is judged against the sustainable rate
            # measured on either side of it (their mean).
            sc.wait_quiet(f"sustainable after {mode}", args.quiet_busy, args.quiet_wait)
            after = measured(srv, searchd, work / f"sust-after-{mode}-h{hold}", c, args, [])
            res[f"sustainable_after_{mode}"] = after
            o["sustainable_around_qps"] = [before["goodput_qps"], after["goodput_qps"]]
            o["goodput_ratio"] = round(o["goodput_qps"] / statistics.mean(o["sustainable_around_qps"]), 3)
            before = after
            if o["refused_per_s"] > 0:
                extra_io = o["io_cpu_per_s"] - o["goodput_qps"] * io_per_ok
                o["io_cpu_per_refusal_us"] = round(max(extra_io, 0.0) / o["refused_per_s"] * 1e6, 2)
                o["refusal_vs_search_cpu"] = round(o["io_cpu_per_refusal_us"] / (search_per_ok * 1e6), 4)
            res[f"overload_{mode}"] = o
        st = sc.http_json(srv.url + "/stats")[1]
        res["stats_admission"] = st.get("admission")
    finally:
        srv.stop()
    return res


def spread(xs: list) -> dict:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {}
    return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3),
            "n": len(xs)}


def render_md(res: dict) -> str:
    L = [f"# Overload at 4x the sustainable concurrency ({res['dataset']})", "",
         f"Run {res['started']} .. {res.get('ended', '?')}; {res['searchd']}; {res['runs']} runs; "
         f"ef {res['params']['ef']}, {res['params']['threads']} search threads; load generator on the same "
         "2 cores. Goodput = answers (200) per second / the same server's sustainable rate measured just "
         "before and just after the overload step (their mean). "
         "`ignore`: clients resend a refused request at once; `honor`: they wait `Retry-After` first.", "",
         "| run | hold ms | sustainable q/s before, after (c) | mode | goodput q/s | goodput ratio | "
         "accepted p99 ms | refused /s | I/O CPU per refusal µs | / engine CPU per search | client CPU % |",
         "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        s = r.get("sustainable")
        if not s:
            L.append(f"| {r['run']} | {r['hold_ms']} | {r.get('error')} | | | | | | | | |")
            continue
        for mode in ("ignore", "honor"):
            o = r[f"overload_{mode}"]
            around = ", ".join(f"{q:.0f}" for q in o["sustainable_around_qps"])
            L.append(f"| {r['run']} | {r['hold_ms']} | {around} ({s['concurrency']}) | {mode} | "
                     f"{o['goodput_qps']:.0f} | {o['goodput_ratio']:.3f} | {o['accepted_p99_ms']:.1f} | "
                     f"{o['refused_per_s']:.0f} | {o.get('io_cpu_per_refusal_us', '-')} | "
                     f"{o.get('refusal_vs_search_cpu', '-')} | {o.get('client_cpu_pct') or 0:.0f} |")
    L += ["", "## Summary (median, min..max over runs)", "",
          "| hold ms | mode | goodput ratio | accepted p99 ms | refused /s |", "|---:|---|---|---|---|"]
    for key, sm in res["summary"].items():
        g, p, rf = sm["goodput_ratio"], sm["accepted_p99_ms"], sm["refused_per_s"]
        L.append(f"| {sm['hold_ms']} | {sm['mode']} | {g.get('median')} ({g.get('min')}..{g.get('max')}) | "
                 f"{p.get('median')} ({p.get('min')}..{p.get('max')}) | {rf.get('median')} |")
    L += ["", "## Targets", "", "| target | value | goal | pass |", "|---|---|---|---|"]
    for t in res["targets"]:
        L.append(f"| {t['target']} | {t['value']} | {t['goal']} | {'PASS' if t['pass'] else 'FAIL'} |")
    return "\n".join(L) + "\n"


def add_common_args(ap: argparse.ArgumentParser) -> None:
    """The flags bench/overload.py and bench/front_door.py share."""
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--client-threads", type=int, default=1)
    ap.add_argument("--warmup", default="3s")
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--nq", type=int, default=0)
    ap.add_argument("--serve-args", default="")
    ap.add_argument("--quiet-busy", type=float, default=0.15)
    ap.add_argument("--quiet-wait", type=float, default=120.0)
    ap.add_argument("--searchd", default=str(ROOT / "target/release/searchd"))
    ap.add_argument("--out")


def prepare(args, tag: str):
    """bench/data/<dataset>/'s index, queries and ground truth, a copy of the binary named
    after the bench (so its threads are found by name), the query count, a work directory;
    None (after a message) when the data set is not prepared."""
    ddir = ROOT / "bench/data" / args.dataset
    index, queries, gt = ddir / "searchd-hnsw", ddir / "queries.npy", ddir / "gt.npy"
    for p in (index / "manifest.json", queries, gt):
        if not p.exists():
            print(f"error: {p} is missing; run bench/peers.py --dataset {args.dataset} --libs searchd first",
                  file=sys.stderr)
            return None
    searchd = ddir / f"searchd-{tag}.bin"
    shutil.copy2(args.searchd, searchd)
    if args.nq <= 0:
        hdr = queries.read_bytes()[:256].decode("latin1")
        args.nq = int(hdr.split("'shape': (")[1].split(",")[0])
    work = ddir / f"{tag}-bench"
    work.mkdir(exist_ok=True)
    return index, queries, gt, searchd, work


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="gcide")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--need", type=int, default=0, help="runs that must pass (default: all)")
    ap.add_argument("--holds", default="100,0", help="--refusal-hold-ms settings; the first is the one judged")
    ap.add_argument("--ramp", default="4,8,16,32,64")
    add_common_args(ap)
    args = ap.parse_args()
    prep = prepare(args, "overload")
    if prep is None:
        return 2
    index, queries, gt, searchd, work = prep
    out = Path(args.out) if args.out else HERE / "results" / f"overload-{args.dataset}.json"
    holds = [int(h) for h in args.holds.split(",")]
    res = {"schema": "searchd.bench.overload.v2", "dataset": args.dataset, "runs": args.runs,
           "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "searchd": sc.subprocess.run([str(searchd), "--version"], capture_output=True, text=True).stdout.strip(),
           "params": {"ef": args.ef, "threads": args.threads, "ramp": args.ramp, "warmup": args.warmup,
                      "duration": args.duration, "holds_ms": holds, "queries_rotated": args.nq,
                      "slo_p99_ms": sc.SLO_P99_MS},
           "rows": []}
    for run in range(1, args.runs + 1):
        # Alternate the order so neither setting always runs first.
        order = holds if run % 2 == 1 else list(reversed(holds))
        for h in order:
            sc.log(f"run {run}: --refusal-hold-ms {h}")
            row = one_setting(searchd, index, queries, gt, h, args, work)
            row["run"] = run
            res["rows"].append(row)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(res, indent=1))
    res["summary"] = {}
    for h in holds:
        for mode in ("ignore", "honor"):
            rs = [r[f"overload_{mode}"] for r in res["rows"] if r["hold_ms"] == h and f"overload_{mode}" in r]
            res["summary"][f"h{h}-{mode}"] = {
                "hold_ms": h, "mode": mode,
                "goodput_ratio": spread([o["goodput_ratio"] for o in rs]),
                "accepted_p99_ms": spread([o["accepted_p99_ms"] for o in rs]),
                "refused_per_s": spread([o["refused_per_s"] for o in rs]),
                "io_cpu_per_refusal_us": spread([o.get("io_cpu_per_refusal_us") for o in rs]),
            }
    judged = holds[0]
    need = args.need or args.runs
    res["targets"] = []
    for mode in ("ignore", "honor"):
        rs = [r[f"overload_{mode}"] for r in res["rows"] if r["hold_ms"] == judged and f"overload_{mode}" in r]
        passing = sum(o["goodput_ratio"] >= 0.9 for o in rs)
        res["targets"].append({"target": f"goodput / sustainable, clients {mode} Retry-After (hold {judged} ms)",
                               "value": f"{passing}/{len(rs)} runs >= 0.90 "
                                        f"({', '.join(str(o['goodput_ratio']) for o in rs)})",
                               "goal": f">= 0.90 in {need} runs", "pass": passing >= need})
        passing = sum((o["accepted_p99_ms"] or 1e9) <= sc.SLO_P99_MS for o in rs)
        res["targets"].append({"target": f"p99 of accepted requests, clients {mode} (hold {judged} ms)",
                               "value": f"{passing}/{len(rs)} runs <= 100 ms "
                                        f"({', '.join(str(o['accepted_p99_ms']) for o in rs)})",
                               "goal": f"<= 100 ms in {need} runs", "pass": passing >= need})
    res["ended"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    out.write_text(json.dumps(res, indent=1))
    out.with_suffix(".md").write_text(render_md(res))
    sc.log(f"wrote {out} and {out.with_suffix('.md')}")
    return 0 if all(t["pass"] for t in res["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
