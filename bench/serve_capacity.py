#!/usr/bin/env python3
"""Serving capacity of `searchd serve`, measured with `searchd load`, against the engine itself.

    python3 bench/serve_capacity.py --dataset gcide   [--ef 64] [--threads 2]
    python3 bench/serve_capacity.py --dataset synth1m

Uses what bench/peers.py left in bench/data/<dataset>/: base.npy, queries.npy, gt.npy and the
searchd-hnsw index directory. Everything runs on this one box (server, load generator, engine
eval share the cores), one step after the other:

 1. engine: `searchd eval --threads T --ef EF` -> all-thread QPS of the engine in process;
 2. server: `searchd serve --index DIR --queries F --ef EF --threads T`, /ready, RSS;
 3. ramp: `searchd load` closed loop, rotating qidx (uniform over all queries), warm-up per
    step, SLO p99 <= 100 ms and errors <= 5% -> sustainable QPS (target >= 0.85 x engine),
    and the best step with p99 <= 10 ms;
 4. fixed body: `--pick fixed:0` at the sustainable concurrency, labelled optimistic;
 5. overload: 4 x the sustainable concurrency -> goodput (200/s) vs sustainable (target >= 0.9),
    p99 of the accepted requests (target <= SLO), the rest 503 overloaded;
 6. memory: server RSS vs index bytes (vectors + graph + ids) + 100 MB (target <= 1.1x);
 7. index swap under load: `POST /admin/reload` between two copies of the index every
    --reload-every seconds while `searchd load` runs at the sustainable concurrency;
    target: no non-200 answers other than 503 overloaded.

Writes bench/results/serve-<dataset>.{json,md} (and the load reports as .html beside them).
Exit status 0 when every target passes, 1 when one misses, 2 on a setup error.
Standard library only: system python3 is enough.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SLO_P99_MS = 100.0
MAX_ERR = 0.05


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def loadavg() -> list[float]:
    return [round(float(x), 2) for x in Path("/proc/loadavg").read_text().split()[:3]]


def cpu_busy(window: float = 2.0) -> float:
    def snap():
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = f[3] + f[4]
        return sum(f), idle
    t0, i0 = snap()
    time.sleep(window)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(what: str, busy: float, wait: float) -> dict:
    t0 = time.time()
    b = cpu_busy()
    while b > busy and time.time() - t0 < wait:
        b = cpu_busy()
    waited = time.time() - t0
    if b > busy:
        log(f"{what}: machine still busy ({b:.2f}) after {waited:.0f} s; measuring anyway")
    return {"waited_s": round(waited, 1), "busy": round(b, 3), "quiet": b <= busy}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url: str, body: dict | None = None, timeout: float = 60.0) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET",
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"{}")
        except ValueError:
            return e.code, {}


def proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    log(" ".join(map(str, cmd)))
    return subprocess.run([str(c) for c in cmd], text=True, capture_output=True, **kw)


class Server:
    def __init__(self, searchd: Path, index: Path, queries: Path, ef: int, threads: int,
                 log_path: Path, extra: list[str]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [str(searchd), "serve", "--index", str(index), "--queries", str(queries),
                    "--addr", f"127.0.0.1:{self.port}", "--ef", str(ef), "--threads", str(threads),
                    *extra]
        log(" ".join(self.cmd))
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        t0 = time.time()
        while time.time() - t0 < 300:
            if self.proc.poll() is not None:
                raise RuntimeError(f"searchd serve exited with {self.proc.returncode}; see {log_path}")
            try:
                if http_json(self.url + "/ready", timeout=2)[0] == 200:
                    self.ready_s = time.time() - t0
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("searchd serve not ready after 300 s")

    def rss(self) -> int:
        return proc_kb(self.proc.pid, "VmRSS") * 1024

    def hwm(self) -> int:
        return proc_kb(self.proc.pid, "VmHWM") * 1024

    def stop(self) -> int | None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None
        finally:
            self.log.close()


def load(searchd: Path, url: str, out: Path, ramp: str, args, extra: list[str]) -> dict:
    cmd = [searchd, "load", "--url", url, "--ramp", ramp, "--warmup", args.warmup,
           "--duration", args.duration, "--queries", str(args.nq), "--k", "10",
           "--slo-p99-ms", str(SLO_P99_MS), "--max-error-rate", str(MAX_ERR),
           "--json", out.with_suffix(".json"), "--quiet", *extra]
    if args.client_threads:
        cmd += ["--threads", str(args.client_threads)]
    r = run(cmd)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"searchd load failed ({r.returncode}): {r.stderr[-2000:]}")
    rep = json.loads(out.with_suffix(".json").read_text())
    if rep.get("schema") != "searchd.load.v1":
        raise RuntimeError(f"{out}: unexpected schema {rep.get('schema')!r}")
    rep["_stdout"] = r.stdout
    return rep


def slim_step(s: dict | None) -> dict | None:
    if s is None:
        return None
    keep = ["concurrency", "duration_s", "requests", "ok", "errors", "error_rate", "qps", "rps",
            "latency_ms", "recall_at_k", "server", "slo_pass", "client_cpu_pct", "client_saturated",
            "note"]
    out = {k: s.get(k) for k in keep}
    out["errors"] = {k: v for k, v in (s.get("errors") or {}).items() if v}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="gcide, glove or synth1m (bench/data/<dataset>)")
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="server search threads and eval threads")
    ap.add_argument("--client-threads", type=int, default=1, help="searchd load --threads (0 = its default)")
    ap.add_argument("--ramp", default="1,2,4,8,16,24,32,48,64,96,128,192,256")
    ap.add_argument("--warmup", default="3s")
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--nq", type=int, default=0, help="queries to rotate over (default: all)")
    ap.add_argument("--reload-seconds", type=float, default=20.0)
    ap.add_argument("--reload-every", type=float, default=2.0)
    ap.add_argument("--serve-args", default="", help="extra `searchd serve` arguments")
    ap.add_argument("--index-name", default="searchd-hnsw",
                    help="index directory under bench/data/<dataset> (e.g. searchd-hnsw-sq8)")
    ap.add_argument("--open-args", default="",
                    help="placement flags given to both `searchd eval` and `searchd serve`, "
                         "e.g. '--vectors disk --graph ram --codes ram'")
    ap.add_argument("--only-ramp", action="store_true",
                    help="engine + ramp only (for comparing serve knobs); no targets except the ratio")
    ap.add_argument("--quiet-busy", type=float, default=0.15)
    ap.add_argument("--quiet-wait", type=float, default=300.0)
    ap.add_argument("--searchd", default=str(ROOT / "target/release/searchd"))
    ap.add_argument("--out", help="default bench/results/serve-<dataset>.json")
    args = ap.parse_args()

    ddir = ROOT / "bench/data" / args.dataset
    index = ddir / args.index_name
    queries, gt = ddir / "queries.npy", ddir / "gt.npy"
    for p in (index / "manifest.json", queries, gt):
        if not p.exists():
            print(f"error: {p} is missing; run bench/peers.py --dataset {args.dataset} first", file=sys.stderr)
            return 2
    src = Path(args.searchd)
    if not src.exists():
        print(f"error: {src} not found (cargo build --release)", file=sys.stderr)
        return 2
    searchd = ddir / "searchd-serve.bin"  # a copy: a rebuild during the run does not mix binaries
    shutil.copy2(src, searchd)
    out = Path(args.out) if args.out else HERE / "results" / f"serve-{args.dataset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    work = ddir / "serve-bench"
    work.mkdir(exist_ok=True)
    if args.nq <= 0:
        # queries.npy header: the row count is the first shape entry.
        hdr = queries.read_bytes()[:256].decode("latin1")
        args.nq = int(hdr.split("'shape': (")[1].split(",")[0])
    manifest = json.loads((index / "manifest.json").read_text())
    files = {f.name: f.stat().st_size for f in index.iterdir() if f.is_file()}
    index_bytes = sum(v for k, v in files.items() if k.endswith(".bin"))
    open_extra = args.open_args.split()
    serve_extra = args.serve_args.split() + open_extra
    res: dict = {
        "schema": "searchd.bench.serve.v1",
        "dataset": args.dataset,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "loadavg_start": loadavg(),
        "machine": {"nproc": os.cpu_count(), "cpu": next((l.split(":", 1)[1].strip() for l in
                    Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), None)},
        "searchd": subprocess.run([str(searchd), "--version"], capture_output=True, text=True).stdout.strip(),
        "params": {"ef": args.ef, "threads": args.threads, "client_threads": args.client_threads,
                   "ramp": args.ramp, "warmup": args.warmup, "duration": args.duration,
                   "queries_rotated": args.nq, "slo_p99_ms": SLO_P99_MS, "max_error_rate": MAX_ERR,
                   "serve_args": serve_extra},
        "index": {"dir": str(index.relative_to(ROOT)), "n": manifest.get("n"), "dim": manifest.get("dim"),
                  "files_bytes": files, "bytes": index_bytes},
        "quiet": {},
    }

    # 1. engine
    res["quiet"]["engine"] = wait_quiet("engine eval", args.quiet_busy, args.quiet_wait)
    ej = work / "engine-eval.json"
    r = run([searchd, "eval", "--index", index, "--queries", queries, "--gt", gt, "--k", "10",
             "--ef", str(args.ef), "--threads", str(args.threads), "--min-seconds", "5", "--json", ej]
            + open_extra)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 2
    erow = json.loads(ej.read_text())["rows"][0]
    res["engine"] = {k: erow.get(k) for k in ("ef", "recall_at_10", "qps_1thread", "p50_us", "p99_us",
                                              "qps_all_threads")}
    engine_qps = erow["qps_all_threads"]
    log(f"engine: {engine_qps:.0f} q/s all-thread, recall@10 {erow['recall_at_10']:.4f}")

    srv = Server(searchd, index, queries, args.ef, args.threads, work / "serve.log", serve_extra)
    try:
        res["server_ready_s"] = round(srv.ready_s, 2)
        res["rss_after_open"] = srv.rss()

        # 3. ramp (rotating queries)
        res["quiet"]["ramp"] = wait_quiet("ramp", args.quiet_busy, args.quiet_wait)
        ramp = load(searchd, srv.url, work / "ramp", args.ramp, args, ["--pick", "uniform", "--gt", str(gt),
                    "--html", str(out.with_name(out.stem + "-ramp.html"))])
        sust = ramp.get("sustainable")
        steps = ramp["steps"]
        res["ramp"] = {"steps": [slim_step(s) for s in steps], "sustainable": sust, "peak": ramp.get("peak"),
                       "table": ramp["_stdout"]}
        best10 = max((s for s in steps if s["slo_pass"] and s["latency_ms"]["p99"] is not None
                      and s["latency_ms"]["p99"] <= 10.0), key=lambda s: s["qps"], default=None)
        res["ramp"]["best_p99_10ms"] = slim_step(best10)
        if not sust:
            log("no step met the SLO; stopping")
            res["targets"] = []
            write(res, out)
            return 1
        c_sust = int(sust["concurrency"])
        sust_qps = float(sust["qps"])
        log(f"sustainable: {sust_qps:.0f} q/s at concurrency {c_sust}, p99 {sust['p99_ms']:.1f} ms")
        if args.only_ramp:
            res["rss_after_load"] = srv.rss()
            res["hwm"] = srv.hwm()
            res["targets"] = [{"target": "sustainable QPS / engine all-thread QPS",
                               "value": round(sust_qps / engine_qps, 3), "goal": ">= 0.85",
                               "pass": sust_qps / engine_qps >= 0.85,
                               "detail": f"{sust_qps:.0f} vs {engine_qps:.0f} q/s (ramp only)"}]
            write(res, out)
            return 0 if sust_qps / engine_qps >= 0.85 else 1

        # 4. fixed body (optimistic)
        res["quiet"]["fixed"] = wait_quiet("fixed", args.quiet_busy, args.quiet_wait)
        fixed = load(searchd, srv.url, work / "fixed", str(c_sust), args, ["--pick", "fixed:0"])
        res["fixed_body"] = {"step": slim_step(fixed["steps"][0]),
                             "note": "one query body repeated (fixed:0): optimistic, caches see one query"}

        # 5. overload: 4 x the highest concurrency that met the SLO. On a flat plateau the
        # best-QPS (sustainable) step can be a low concurrency that happened to measure
        # fastest; overload means well past the plateau's end, not 4 x that.
        c_knee = max(int(s["concurrency"]) for s in steps if s["slo_pass"])
        res["ramp"]["highest_passing_concurrency"] = c_knee
        plateau = sorted(float(s["qps"]) for s in steps if s["slo_pass"] and int(s["concurrency"]) >= 4)
        if plateau:
            res["ramp"]["plateau_median_qps"] = plateau[len(plateau) // 2]
        c_over = 4 * c_knee
        res["quiet"]["overload"] = wait_quiet("overload", args.quiet_busy, args.quiet_wait)
        over = load(searchd, srv.url, work / "overload", str(c_over), args, ["--pick", "uniform"])
        ostep = over["steps"][0]
        res["overload"] = {"concurrency": c_over, "step": slim_step(ostep),
                           "note": "clients ignore Retry-After: every refused slot resends at once"}
        # The same overload with clients that wait the server's Retry-After after a 503.
        res["quiet"]["overload_honor"] = wait_quiet("overload honor", args.quiet_busy, args.quiet_wait)
        overh = load(searchd, srv.url, work / "overload-honor", str(c_over), args,
                     ["--pick", "uniform", "--retry-after", "honor"])
        hstep = overh["steps"][0]
        res["overload_honor"] = {"concurrency": c_over, "step": slim_step(hstep),
                                 "note": "clients honour Retry-After (1 s) after a 503"}

        # 6. memory after all that traffic
        res["rss_after_load"] = srv.rss()
        res["hwm"] = srv.hwm()
        code, stats = http_json(srv.url + "/stats")
        res["stats_after_load"] = stats if code == 200 else None

        # 7. swap under load: reload between the index and a copy of it
        copy = ddir / "searchd-hnsw-copy"
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(index, copy)
        res["quiet"]["reload"] = wait_quiet("reload", args.quiet_busy, args.quiet_wait)
        reloads: list[dict] = []
        stop = threading.Event()

        def reloader():
            targets = [copy, index]
            i = 0
            time.sleep(2.0)  # let the load start
            while not stop.is_set():
                t0 = time.time()
                code, body = http_json(srv.url + "/admin/reload", {"index": str(targets[i % 2])}, timeout=120)
                reloads.append({"status": code, "seconds": round(time.time() - t0, 3),
                                "took_ms": body.get("took_ms")})
                i += 1
                stop.wait(args.reload_every)

        th = threading.Thread(target=reloader, daemon=True)
        th.start()
        rl_args = argparse.Namespace(**{**vars(args), "warmup": "1s", "duration": f"{args.reload_seconds}s"})
        rl = load(searchd, srv.url, work / "reload", str(c_knee), rl_args, ["--pick", "uniform", "--gt", str(gt)])
        stop.set()
        th.join()
        rstep = rl["steps"][0]
        res["reload"] = {"reloads": reloads, "step": slim_step(rstep)}
        shutil.rmtree(copy, ignore_errors=True)
    finally:
        res["server_exit"] = srv.stop()
    res["ended"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    res["loadavg_end"] = loadavg()

    # targets
    t = []

    def add(name, value, goal, ok, detail):
        t.append({"target": name, "value": value, "goal": goal, "pass": bool(ok), "detail": detail})

    pm = res["ramp"].get("plateau_median_qps")
    if pm:
        add("plateau median QPS / engine all-thread QPS (informational)", round(pm / engine_qps, 3), ">= 0.85",
            pm / engine_qps >= 0.85,
            f"median ok/s of the passing steps at concurrency >= 4: {pm:.0f} q/s vs engine {engine_qps:.0f} q/s; "
            "less sensitive to one lucky step than the best step")
    ratio = sust_qps / engine_qps
    add("sustainable QPS / engine all-thread QPS", round(ratio, 3), ">= 0.85", ratio >= 0.85,
        f"{sust_qps:.0f} q/s at concurrency {c_sust} (p99 {sust['p99_ms']:.1f} ms) vs engine {engine_qps:.0f} q/s "
        f"(searchd eval --threads {args.threads}, ef={args.ef})")
    for label, st in (("clients honour Retry-After", hstep), ("clients ignore Retry-After", ostep)):
        og = float(st["qps"]) / sust_qps
        add(f"overload goodput / sustainable ({label})", round(og, 3), ">= 0.90", og >= 0.9,
            f"concurrency {c_over}: {st['qps']:.0f} ok/s, {st['errors'].get('http_503', 0)} x 503, "
            f"other errors {sum(v for k, v in st['errors'].items() if k != 'http_503')}; "
            f"client CPU {st.get('client_cpu_pct', 0):.0f}%, server CPU {(st.get('server') or {}).get('cpu_pct') or 0:.0f}%")
        op99 = st["latency_ms"]["p99"]
        add(f"overload p99 of accepted requests, ms ({label})", op99, f"<= {SLO_P99_MS:.0f}",
            op99 is not None and op99 <= SLO_P99_MS, f"p50 {st['latency_ms']['p50']} ms, p99 {op99} ms")
    rss = res["rss_after_load"]
    budget = index_bytes + 100 * 2**20
    add("server RSS / (index bytes + 100 MB)", round(rss / budget, 3), "<= 1.10", rss <= 1.1 * budget,
        f"RSS {rss / 2**20:.1f} MB after the ramp (peak {res['hwm'] / 2**20:.1f} MB); index files {index_bytes / 2**20:.1f} MB")
    bad = sum(v for k, v in rstep["errors"].items() if k != "http_503")
    ok_reloads = sum(1 for x in reloads if x["status"] == 200)
    add("non-200 answers other than 503 during index swaps", bad, "== 0", bad == 0 and ok_reloads >= 2,
        f"{ok_reloads}/{len(reloads)} reloads answered 200 during {args.reload_seconds:.0f} s of load at concurrency "
        f"{c_knee}; {rstep['ok']} ok, {rstep['errors'].get('http_503', 0)} x 503")
    res["targets"] = t
    # Where the CPU goes at the sustainable step: the engine spends `threads` cores on
    # engine_qps queries per second; the server and the load generator share the box.
    srv_cpu = (sust_step_of(res) or {}).get("server", {}).get("cpu_pct")
    cli_cpu = (sust_step_of(res) or {}).get("client_cpu_pct")
    if srv_cpu:
        res["cpu_per_request_us"] = {
            "engine": round(args.threads * 1e6 / engine_qps, 1),
            "server": round(srv_cpu / 100 * 1e6 / sust_qps, 1),
            "client": round((cli_cpu or 0) / 100 * 1e6 / sust_qps, 1),
        }
    write(res, out)
    return 0 if all(x["pass"] for x in t) else 1


def sust_step_of(res: dict) -> dict | None:
    sust = res["ramp"]["sustainable"]
    return next((s for s in res["ramp"]["steps"] if sust and s["concurrency"] == sust["concurrency"]), None)


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def step_row(label: str, s: dict | None) -> str:
    if s is None:
        return f"| {label} | - | - | - | - | - | - | - |"
    lat = s["latency_ms"]
    errs = ", ".join(f"{k} {v}" for k, v in s["errors"].items()) or "0"
    srv = s.get("server") or {}
    return (f"| {label} | {s['concurrency']} | {fmt(s['qps'], '.0f')} | {fmt(lat['p50'], '.2f')} | "
            f"{fmt(lat['p99'], '.2f')} | {errs} | {fmt(srv.get('cpu_pct'), '.0f')} | "
            f"{fmt(s.get('client_cpu_pct'), '.0f')} |")


def render_md(res: dict) -> str:
    p = res["params"]
    L = [f"# searchd serve capacity: {res['dataset']} "
         f"({res['index']['n']:,} x {res['index']['dim']}, HNSW, ef={p['ef']})", ""]
    L.append(f"Run {res['started']} .. {res.get('ended', '?')}; {res['searchd']}; machine {res['machine']['cpu']}, "
             f"nproc={res['machine']['nproc']}. Server, load generator and engine eval share these cores "
             f"(server --threads {p['threads']}, searchd load --threads {p['client_threads']}). "
             f"Load average at start {res['loadavg_start']}, at end {res.get('loadavg_end')}.")
    L.append(f"Queries: uniform over {p['queries_rotated']:,} qidx (rotating); warm-up {p['warmup']} then "
             f"{p['duration']} per step; SLO p99 <= {p['slo_p99_ms']:.0f} ms, errors <= {p['max_error_rate']:.0%}.")
    L.append("")
    e = res["engine"]
    L.append(f"Engine in process (`searchd eval --threads {p['threads']} --ef {p['ef']}`): recall@10 "
             f"{e['recall_at_10']:.4f}, {e['qps_all_threads']:.0f} q/s all-thread, {e['qps_1thread']:.0f} q/s "
             f"single-thread (p50 {e['p50_us']:.0f} µs, p99 {e['p99_us']:.0f} µs).")
    L.append("")
    L.append("| step | concurrency | ok/s | p50 ms | p99 ms | errors | server CPU % | client CPU % |")
    L.append("|---|---:|---:|---:|---:|---|---:|---:|")
    for s in res["ramp"]["steps"]:
        L.append(step_row("ramp" + (" (SLO pass)" if s["slo_pass"] else " (SLO fail)"), s))
    L.append("")
    L.append("| row | concurrency | ok/s | p50 ms | p99 ms | errors | server CPU % | client CPU % |")
    L.append("|---|---:|---:|---:|---:|---|---:|---:|")
    sust = res["ramp"]["sustainable"]
    sust_step = next((s for s in res["ramp"]["steps"] if sust and s["concurrency"] == sust["concurrency"]), None)
    L.append(step_row("**sustainable** (rotating, SLO 100 ms)", sust_step))
    L.append(step_row("best step with p99 <= 10 ms", res["ramp"].get("best_p99_10ms")))
    pk = res["ramp"].get("peak")
    pk_step = next((s for s in res["ramp"]["steps"] if pk and s["concurrency"] == pk["concurrency"]), None)
    L.append(step_row("peak (any p99)", pk_step))
    if "fixed_body" in res:
        L.append(step_row("fixed body (optimistic: one query repeated)", res["fixed_body"]["step"]))
    if "overload" in res:
        L.append(step_row("overload (4 x highest passing concurrency), clients ignore Retry-After", res["overload"]["step"]))
    if "overload_honor" in res:
        L.append(step_row("overload (4 x highest passing concurrency), clients honour Retry-After", res["overload_honor"]["step"]))
    if "reload" in res:
        L.append(step_row(f"index swaps under load ({len(res['reload']['reloads'])} reloads)", res["reload"]["step"]))
    L.append("")
    if sust_step and sust_step.get("recall_at_k") is not None:
        L.append(f"Recall@10 of the answers under load at the sustainable step: {sust_step['recall_at_k']:.4f} "
                 f"(not tie-aware; the engine's tie-aware recall@10 is {e['recall_at_10']:.4f}).")
    L.append(f"Server memory: RSS {res.get('rss_after_open', 0) / 2**20:.1f} MB after open, "
             f"{res.get('rss_after_load', 0) / 2**20:.1f} MB after the ramp; index files "
             f"{res['index']['bytes'] / 2**20:.1f} MB ({', '.join(f'{k} {v / 2**20:.1f} MB' for k, v in res['index']['files_bytes'].items() if k.endswith('.bin'))}).")
    cpu = res.get("cpu_per_request_us")
    if cpu:
        L.append(f"CPU per request at the sustainable step: server {cpu['server']:.0f} µs, load generator "
                 f"{cpu['client']:.0f} µs; the engine in process spends {cpu['engine']:.0f} µs per query. "
                 f"Both share {res['machine']['nproc']} cores, so the HTTP path (parsing, loopback TCP on both "
                 f"ends, hand-off to the search pool) and the client come out of the same budget as the searches.")
    if "reload" in res:
        rl = res["reload"]["reloads"]
        took = [x["took_ms"] for x in rl if x.get("took_ms") is not None]
        if took:
            L.append(f"Reloads: {len(rl)}, statuses {sorted({x['status'] for x in rl})}, open+swap "
                     f"{min(took):.0f}..{max(took):.0f} ms.")
    L.append("")
    L.append("## Targets")
    L.append("")
    L.append("| target | value | goal | result | detail |")
    L.append("|---|---:|---|---|---|")
    for x in res.get("targets", []):
        L.append(f"| {x['target']} | {x['value']} | {x['goal']} | {'PASS' if x['pass'] else 'MISS'} | {x['detail']} |")
    L.append("")
    L.append("Reproduce: `python3 bench/serve_capacity.py --dataset " + res["dataset"] + "` (after "
             "`bench/peers.py --dataset " + res["dataset"] + "` made the data and the index).")
    return "\n".join(L) + "\n"


def write(res: dict, out: Path) -> None:
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(res, indent=1) + "\n")
    os.replace(tmp, out)
    md = render_md(res)
    out.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    sys.exit(main())
