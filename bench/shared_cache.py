#!/usr/bin/env python3
"""The shared cache tier (`serve --cache-redis`) against private in-process caches: two front
doors over one backend, a Zipf (s = 1.1) query stream over 100k distinct queries split
between them; hit rate and sustainable QPS of each configuration, cold minute and warm, in
the same run; then Redis killed and restarted mid-run under steady open-loop load.

    python3 bench/shared_cache.py [--cold 60s] [--warm 30s] [--rate 1000] [--ramp 1,2,4,8,16,32,64]

Data: dev-gcide-50k (../shared/datasets/dev-gcide-50k: 50k x 384 MiniLM vectors). One
collection (`searchd ingest`, HNSW m=16) and 100k distinct query vectors: the dataset's 2,000
queries, then 98,000 seeded blends of two passages (normalise(p_a + 0.5 p_b), distinct
pairs), float32 .npy, given to every door with `serve --queries`, so query i is the same
cache key at either door (`searchd load` sends {"qidx": i, "k": 10}).

Backends:
  local:  door A `serve --collection gcide=DIR`, door B the same directory `--read-only`;
  qdrant: a Qdrant node (../shared/qdrant/qdrant, storage in the work dir), the collection
          uploaded by `searchd ingest --docs DIR --to qdrant://...`; both doors serve it.
Configurations per backend (fresh processes, Redis flushed): private = each door
`--cache-bytes 64MiB`; shared = each door `--cache-bytes 64MiB --cache-redis URL`. Both use
`--cache-ttl-s 600` (the default, 60 s, would expire the cold minute's entries during the
warm phase; the same TTL for both configurations).

Phases (both doors driven at once by two `searchd load` processes, one a door, --pick
zipf:1.1, --query-count 100000; the same seeds in every configuration):
  cold: from empty caches, open loop at --rate req/s a door for --cold: the same traffic in
        both configurations, so their hit rates compare at equal requests (a closed loop
        would give the faster configuration more requests, hence warmer caches; the first
        version of this script did that and its hit rates were not comparable);
  warm: right after, the same rate for --warm;
  ramp: right after, a closed-loop ramp (--ramp, --warmup/--step a step, SLO p99 <= 100 ms);
        the combined sustainable QPS is the best step where both doors met the SLO, summed.
Hit rate of a phase, from /stats deltas per door: (cache.hits + cache.shared.hits) / reads,
reads = cache.hits + cache.misses + cache.shared.bypassed (a bypassed read uses no tier).

Kill run (local backend, shared configuration): both doors at --kill-rate req/s open loop
for --kill-duration; redis-server SIGKILLed at --kill-at, restarted on the same port at
--restart-at; /stats sampled every second. Acceptance: 0 failed requests.

Checks (PASS/FAIL): kill run with 0 failed requests (every error kind the load tool counts);
hits resume after the restart (shared hits grow after --restart-at); per backend the shared
tier's combined warm hit rate >= the private caches' (equal traffic); every load run's answers validated
(`searchd load` checks status, JSON shape, hit count, score order and ids < n of every
answer: 0 errors of any kind in the cold, warm and kill runs; in the closed-loop ramp no error
but overload shedding (503, 504, timeouts: counted, and the load tool's 1% cap per step)).

Writes bench/results/shared-cache.{json,md}. Exit 0 when measured (whatever the verdicts),
2 on a setup error. Standard library only. The load generator, both doors, Redis and Qdrant
share the machine's cores: compare figures within the run (ratios), not across runs.
"""

import argparse
import array
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = Path("/work/shared/datasets/dev-gcide-50k")
if not DATA.exists():
    DATA = ROOT.parent / "shared" / "datasets" / "dev-gcide-50k"
NQ = 100_000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class SetupError(Exception):
    pass


def run(cmd, **kw):
    log("+ " + " ".join(str(c) for c in cmd))
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SetupError(f"{cmd[0]} {cmd[1]} failed ({r.returncode}): {r.stderr[-3000:]}")
    return r


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, proc=None, timeout=120):
    t = time.time()
    while time.time() - t < timeout:
        if proc is not None and proc.poll() is not None:
            raise SetupError(f"process for {url} exited: {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.1)
    raise SetupError(f"{url} not ready after {timeout}s")


def get_json(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def git_commit() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip()


# ---------------------------------------------------------------- data


def read_npy(path):
    """Rows of a 2-D float16/float32 .npy as array('f') each, normalised."""
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            raise SetupError(f"{path}: not .npy")
        major = f.read(2)[0]
        hlen = struct.unpack("<H" if major == 1 else "<I", f.read(2 if major == 1 else 4))[0]
        header = f.read(hlen).decode()
        shape = tuple(int(x) for x in header.split("'shape': (")[1].split(")")[0].split(",") if x.strip())
        fmt = "e" if "<f2" in header else "f"
        n, d = shape
        size = 2 if fmt == "e" else 4
        raw = f.read(n * d * size)
    rows = []
    for i in range(n):
        v = struct.unpack_from(f"<{d}{fmt}", raw, i * d * size)
        norm = sum(x * x for x in v) ** 0.5 or 1.0
        rows.append(array.array("f", [x / norm for x in v]))
    return rows, d


def make_queries(out: Path, seed: int = 20261206) -> dict:
    if out.exists():
        return json.loads(out.with_suffix(".json").read_text())
    log(f"making {NQ} distinct query vectors -> {out}")
    qs, d = read_npy(DATA / "queries.f16.npy")
    base, _ = read_npy(DATA / "base.f16.npy")
    rng = random.Random(seed)
    pairs = set()
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (NQ, d)
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for v in qs:
            f.write(v.tobytes())
        n = len(qs)
        while n < NQ:
            a, b = rng.randrange(len(base)), rng.randrange(len(base))
            if a == b or (a, b) in pairs:
                continue
            pairs.add((a, b))
            pa, pb = base[a], base[b]
            v = [x + 0.5 * y for x, y in zip(pa, pb)]
            norm = sum(x * x for x in v) ** 0.5 or 1.0
            f.write(array.array("f", [x / norm for x in v]).tobytes())
            n += 1
    tmp.rename(out)
    meta = {"n": NQ, "dim": d, "seed": seed, "dataset_queries": len(qs),
            "blends": NQ - len(qs), "blend": "normalise(p_a + 0.5 p_b), distinct (a, b), a != b"}
    out.with_suffix(".json").write_text(json.dumps(meta))
    return meta


# ---------------------------------------------------------------- processes


class Redis:
    def __init__(self, work: Path, port: int):
        self.port, self.work, self.proc = port, work, None
        self.url = f"redis://127.0.0.1:{port}"

    def start(self):
        self.log = open(self.work / "redis.log", "a")
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", str(self.work)],
                                     stdout=self.log, stderr=self.log)
        t = time.time()
        while time.time() - t < 20:
            try:
                if self.cmd("PING") == "+PONG":
                    return
            except OSError:
                time.sleep(0.05)
        raise SetupError("redis-server not ready")

    def cmd(self, *args) -> str:
        msg = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(msg.encode())
            data = b""
            while not data.endswith(b"\r\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return data.decode(errors="replace").strip()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Door:
    def __init__(self, name, searchd, serve_args, work: Path, env):
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logf = open(work / f"door-{name}.log", "a")
        cmd = [str(searchd), "serve", "--addr", f"127.0.0.1:{self.port}"] + [str(a) for a in serve_args]
        log("+ " + " ".join(cmd))
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=self.logf, env=env)

    def ready(self):
        wait_http(self.url + "/ready", self.proc)

    def stats(self):
        return get_json(self.url + "/stats")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.logf.close()


def cache_counts(st):
    c = st.get("cache") or {}
    s = c.get("shared") or {}
    keys = ["hits", "misses", "bypassed", "errors", "timeouts", "breaker_trips", "reconnects",
            "stores", "stores_dropped", "invalidations"]
    out = {"proc_hits": c.get("hits", 0), "proc_misses": c.get("misses", 0),
           "proc_entries": c.get("entries", 0), "proc_bytes": c.get("bytes", 0),
           "proc_evictions": c.get("evictions", 0)}
    for k in keys:
        out["shared_" + k] = s.get(k, 0)
    out["shared_connected"] = s.get("connected")
    out["shared_breaker_open"] = s.get("breaker_open")
    return out


def delta(a, b):
    d = {k: b[k] - a[k] for k in a if isinstance(a[k], (int, float)) and not isinstance(a[k], bool)}
    reads = d["proc_hits"] + d["proc_misses"] + d["shared_bypassed"]
    hits = d["proc_hits"] + d["shared_hits"]
    d["reads"] = reads
    d["hits_all_tiers"] = hits
    d["hit_rate"] = hits / reads if reads else 0.0
    return d


def merged(ds):
    reads = sum(d["reads"] for d in ds)
    hits = sum(d["hits_all_tiers"] for d in ds)
    return {"reads": reads, "hits_all_tiers": hits, "hit_rate": hits / reads if reads else 0.0,
            "proc_hits": sum(d["proc_hits"] for d in ds), "shared_hits": sum(d["shared_hits"] for d in ds),
            "shared_bypassed": sum(d["shared_bypassed"] for d in ds)}


def load_cmd(searchd, url, out, seed, extra):
    return [str(searchd), "load", "--url", url, "--query-count", str(NQ), "--pick", "zipf:1.1",
            "--seed", str(seed), "--k", "10", "--slo-p99-ms", "100", "--json", str(out), "--quiet",
            "--threads", "1"] + [str(e) for e in extra]


def run_loads(cmds):
    """Start the load processes together; wait for all; return their reports."""
    procs = []
    for cmd, out in cmds:
        log("+ " + " ".join(cmd))
        procs.append((subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), out))
    reps = []
    for p, out in procs:
        _, err = p.communicate()
        if p.returncode not in (0, 1) or not Path(out).exists():
            raise SetupError(f"searchd load failed ({p.returncode}): {err[-2000:]}")
        reps.append(json.loads(Path(out).read_text()))
    return reps


def errors_of(step):
    return sum(step["errors"].values())


def phase_rate(args, doors, tag, phase, duration, seed0, sample_every=5.0):
    """Both doors at the same open-loop rate for `duration`: the same number of requests in
    every configuration (the same seeds: the same query sequence per door), so hit rates
    compare at equal traffic. /stats is sampled every `sample_every` s for a hit-rate curve."""
    s0 = [cache_counts(d.stats()) for d in doors]
    curve, stop = [], threading.Event()

    def sampler():
        t0, prev = time.time(), s0
        while not stop.wait(sample_every):
            try:
                cur = [cache_counts(d.stats()) for d in doors]
            except Exception:
                continue
            m = merged([delta(a, b) for a, b in zip(prev, cur)])
            curve.append({"t": round(time.time() - t0, 1), "hit_rate": round(m["hit_rate"], 4),
                          "reads": m["reads"], "shared_hits": m["shared_hits"]})
            prev = cur

    th = threading.Thread(target=sampler)
    th.start()
    try:
        reps = run_loads([(load_cmd(args.searchd, d.url, args.work / f"{tag}-{phase}-{d.name}.json", seed0 + i,
                                    ["--rate", args.rate, "--warmup", "0s", "--duration", duration]),
                           args.work / f"{tag}-{phase}-{d.name}.json") for i, d in enumerate(doors)])
    finally:
        stop.set()
        th.join()
    s1 = [cache_counts(d.stats()) for d in doors]
    per = {}
    for d, rep, a, b in zip(doors, reps, s0, s1):
        st = rep["steps"][0]
        per[d.name] = {"qps": st["qps"], "p99_ms": st["latency_ms"]["p99"], "p50_ms": st["latency_ms"]["p50"],
                       "requests": st["requests"], "errors": errors_of(st), "error_kinds": st["errors"],
                       "cache": delta(a, b)}
    comb = merged([p["cache"] for p in per.values()])
    comb["qps"] = sum(p["qps"] for p in per.values())
    comb["errors"] = sum(p["errors"] for p in per.values())
    comb["p99_ms_max"] = max(p["p99_ms"] for p in per.values())
    comb["p50_ms_max"] = max(p["p50_ms"] for p in per.values())
    return {"doors": per, "combined": comb, "hit_rate_curve": curve}, s1


def phase_warm(args, doors, tag, s0):
    reps = run_loads([(load_cmd(args.searchd, d.url, args.work / f"{tag}-warm-{d.name}.json", i + 11,
                                ["--ramp", args.ramp, "--warmup", args.warmup, "--duration", args.step]),
                       args.work / f"{tag}-warm-{d.name}.json") for i, d in enumerate(doors)])
    s1 = [cache_counts(d.stats()) for d in doors]
    steps = []
    nsteps = min(len(r["steps"]) for r in reps)
    for i in range(nsteps):
        sts = [r["steps"][i] for r in reps]
        steps.append({"concurrency_per_door": sts[0]["concurrency"],
                      "qps": [s["qps"] for s in sts], "p99_ms": [s["latency_ms"]["p99"] for s in sts],
                      "errors": [errors_of(s) for s in sts], "slo_pass": [bool(s.get("slo_pass")) for s in sts],
                      "combined_qps": sum(s["qps"] for s in sts)})
    ok = [s for s in steps if all(s["slo_pass"])]
    best = max(ok, key=lambda s: s["combined_qps"]) if ok else None
    # Validation: no wrong answer and no failure other than overload shedding on any step.
    # 503 (admission), 504 (deadline) and client timeouts are the server shedding load past
    # saturation: counted and shown, and the load tool's error cap (1%) keeps a step with
    # more of them from being sustainable.
    shed_kinds = ("http_503", "http_504", "timeout")
    bad = sum(v for r in reps for st in r["steps"] for k, v in st["errors"].items() if k not in shed_kinds)
    shed = sum(v for r in reps for st in r["steps"] for k, v in st["errors"].items() if k in shed_kinds)
    per = {d.name: {"cache": delta(a, b), "sustainable_qps": best["qps"][i] if best else 0.0,
                    "sustainable_p99_ms": best["p99_ms"][i] if best else None,
                    "own_sustainable": (rep.get("sustainable") or {}).get("qps")}
           for i, (d, rep, a, b) in enumerate(zip(doors, reps, s0, s1))}
    comb = merged([p["cache"] for p in per.values()])
    comb["sustainable_qps"] = best["combined_qps"] if best else 0.0
    comb["sustainable_concurrency_per_door"] = best["concurrency_per_door"] if best else None
    comb["unexplained_errors"] = bad
    comb["shed"] = shed
    comb["total_errors"] = sum(errors_of(st) for r in reps for st in r["steps"])
    return {"doors": per, "combined": comb, "steps": steps}


def serve_args(args, backend, shared, read_only):
    a = ["--queries", args.queries, "--cache-bytes", "64MiB", "--cache-ttl-s", "600",
         "--threads", str(args.threads)]
    if backend == "local":
        a += ["--collection", f"gcide={args.coll}"]
        if read_only:
            a += ["--read-only"]
    else:
        a += ["--backend", "qdrant", "--qdrant-url", args.qdrant_grpc, "--qdrant-collection", "gcide"]
    if shared:
        a += ["--cache-redis", args.redis.url]
    return a


def one_config(args, backend, shared):
    tag = f"{backend}-{'shared' if shared else 'private'}"
    log(f"=== {tag}")
    if shared:
        args.redis.cmd("FLUSHALL")
    env = dict(os.environ, RUST_LOG="warn")
    doors = []
    try:
        doors.append(Door("A", args.searchd, serve_args(args, backend, shared, False), args.work, env))
        doors[0].ready()
        doors.append(Door("B", args.searchd, serve_args(args, backend, shared, True), args.work, env))
        doors[1].ready()
        cold, s1 = phase_rate(args, doors, tag, "cold", args.cold, 1)
        log(f"  cold: hit rate {cold['combined']['hit_rate']:.3f}, p99 {cold['combined']['p99_ms_max']:.1f} ms")
        warm_rate, s2 = phase_rate(args, doors, tag, "warmrate", args.warm, 5)
        log(f"  warm (rate): hit rate {warm_rate['combined']['hit_rate']:.3f}, p99 {warm_rate['combined']['p99_ms_max']:.1f} ms")
        warm = phase_warm(args, doors, tag, s2)
        log(f"  ramp: hit rate {warm['combined']['hit_rate']:.3f}, sustainable "
            f"{warm['combined']['sustainable_qps']:.0f} q/s")
        end = {d.name: cache_counts(d.stats()) for d in doors}
    finally:
        for d in doors:
            d.stop()
    return {"config": tag, "cold": cold, "warm_rate": warm_rate, "warm": warm, "end_counters": end}


def kill_run(args):
    log("=== kill run (local, shared)")
    args.redis.cmd("FLUSHALL")
    env = dict(os.environ, RUST_LOG="warn")
    doors = []
    samples = []
    events = {}
    try:
        doors.append(Door("A", args.searchd, serve_args(args, "local", True, False), args.work, env))
        doors[0].ready()
        doors.append(Door("B", args.searchd, serve_args(args, "local", True, True), args.work, env))
        doors[1].ready()
        s0 = [cache_counts(d.stats()) for d in doors]
        stop = threading.Event()

        def sampler():
            t0 = time.time()
            while not stop.is_set():
                row = {"t": round(time.time() - t0, 2)}
                for d in doors:
                    try:
                        row[d.name] = cache_counts(d.stats())
                    except Exception as e:  # a failed /stats is recorded, not fatal
                        row[d.name] = {"error": str(e)}
                samples.append(row)
                stop.wait(1.0)

        cmds = [(load_cmd(args.searchd, d.url, args.work / f"kill-{d.name}.json", i + 21,
                          ["--rate", args.kill_rate, "--warmup", "0s", "--duration", args.kill_duration]),
                 args.work / f"kill-{d.name}.json") for i, d in enumerate(doors)]
        result = {}
        th = threading.Thread(target=lambda: result.update(reps=run_loads(cmds)))
        t0 = time.time()
        th.start()
        smp = threading.Thread(target=sampler)
        smp.start()
        while time.time() - t0 < args.kill_at:
            time.sleep(0.05)
        args.redis.kill()
        events["killed_at_s"] = round(time.time() - t0, 2)
        log(f"  redis killed at {events['killed_at_s']} s")
        while time.time() - t0 < args.restart_at:
            time.sleep(0.05)
        args.redis.start()
        events["restarted_at_s"] = round(time.time() - t0, 2)
        log(f"  redis restarted at {events['restarted_at_s']} s")
        th.join()
        stop.set()
        smp.join()
        s1 = [cache_counts(d.stats()) for d in doors]
    finally:
        for d in doors:
            d.stop()
    reps = result.get("reps")
    if not reps:
        raise SetupError("kill run: the load processes gave no reports")
    per = {}
    for d, rep, a, b in zip(doors, reps, s0, s1):
        st = rep["steps"][0]
        per[d.name] = {"requests": st["requests"], "ok": st["ok"], "errors": errors_of(st),
                       "error_kinds": st["errors"], "qps": st["qps"], "p99_ms": st["latency_ms"]["p99"],
                       "max_ms": st["latency_ms"].get("max"), "cache": delta(a, b)}
    # Shared hits after the restart: counter growth between the first sample past the restart
    # (plus 3 s for the breaker's probe) and the last.
    rs = events["restarted_at_s"]
    after = [s for s in samples if s["t"] >= rs + 3 and all("error" not in s[n] for n in ("A", "B"))]
    before_kill = [s for s in samples if s["t"] <= events["killed_at_s"] and all("error" not in s[n] for n in ("A", "B"))]
    hits_after = (sum(after[-1][n]["shared_hits"] + after[-1][n]["proc_hits"] for n in ("A", "B"))
                  - sum(after[0][n]["shared_hits"] + after[0][n]["proc_hits"] for n in ("A", "B"))) if len(after) >= 2 else 0
    shared_hits_after = (sum(after[-1][n]["shared_hits"] for n in ("A", "B"))
                         - sum(after[0][n]["shared_hits"] for n in ("A", "B"))) if len(after) >= 2 else 0
    timeline = []
    prev = None
    for s in samples:
        if any("error" in s[n] for n in ("A", "B")):
            continue
        tot = {k: sum(s[n][k] for n in ("A", "B")) for k in ("proc_hits", "proc_misses", "shared_hits", "shared_bypassed")}
        if prev is not None:
            timeline.append({"t": s["t"], **{k: tot[k] - prev[k] for k in tot},
                             "connected": [s[n]["shared_connected"] for n in ("A", "B")]})
        prev = tot
    return {"events": events, "rate_per_door": float(args.kill_rate), "duration": args.kill_duration,
            "doors": per, "failed_requests": sum(p["errors"] for p in per.values()),
            "requests": sum(p["requests"] for p in per.values()),
            "hits_after_restart": hits_after, "shared_hits_after_restart": shared_hits_after,
            "samples_before_kill": len(before_kill), "timeline_per_s": timeline}


# ---------------------------------------------------------------- report


def md(res):
    P = res["params"]
    L = ["# Shared cache tier vs private caches: two front doors, Zipf 1.1 over 100k queries", "",
         f"Commit `{res['commit']}`, {res['date']}. `{res['command']}`", "",
         f"dev-gcide-50k (50k x 384), one collection (HNSW m=16); {NQ} distinct query vectors "
         "(2,000 dataset queries + 98,000 seeded blends of two passages), `serve --queries` at both "
         "doors; `searchd load --pick zipf:1.1 --query-count 100000`, one load process per door "
         "(seeds differ between doors, same seeds in every configuration), both at once. Every door "
         "`--cache-bytes 64MiB --cache-ttl-s 600 --threads 2`; shared adds `--cache-redis` (one "
         "redis-server, flushed per configuration); fresh processes per configuration.", "",
         f"- **cold**: from empty caches, open loop at {P['rate']} req/s a door for {P['cold']} (the same "
         "traffic in both configurations, so the hit rates compare at equal requests);",
         f"- **warm**: right after, the same rate for {P['warm']};",
         f"- **ramp**: right after, closed-loop ramp {P['ramp']} connections a door, {P['warmup']} warm-up + "
         f"{P['step']} a step, SLO p99 <= 100 ms; sustainable = best step where both doors met the SLO, summed.",
         "",
         "Hit rate = (in-process hits + shared hits) / reads, reads = in-process hits + misses + shared "
         "bypassed, from /stats deltas over the phase.", "",
         f"**Noise:** {res['cpu']} cores shared by both doors, Redis, Qdrant, the two load generators and a "
         "CI debug build + test run going on at the same time in the same checkout: absolute figures are "
         "noisy; compare within this run (ratios).", ""]
    for be in res["backends"]:
        b = res["backends"][be]
        L += [f"## Backend: {be}", "",
              "| config | phase | door | hit rate | in-proc hits | shared hits | reads | q/s | p50 ms | p99 ms | errors |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
        for cfg in ("private", "shared"):
            r = b[cfg]
            for ph, key in (("cold", "cold"), ("warm", "warm_rate"), ("ramp", "warm")):
                p = r[key]
                for dn, d in p["doors"].items():
                    c = d["cache"]
                    if ph == "ramp":
                        q, p50 = d["sustainable_qps"], None
                        p99, err = d["sustainable_p99_ms"], "-"
                    else:
                        q, p50, p99, err = d["qps"], d["p50_ms"], d["p99_ms"], d["errors"]
                    f1 = lambda x: "-" if x is None else f"{x:.2f}"
                    L.append(f"| {cfg} | {ph} | {dn} | {c['hit_rate']:.4f} | {c['proc_hits']} | {c['shared_hits']} | "
                             f"{c['reads']} | {q:.0f} | {f1(p50)} | {f1(p99)} | {err} |")
                c = p["combined"]
                if ph == "ramp":
                    q = f"**{c['sustainable_qps']:.0f}** sustainable (c={c['sustainable_concurrency_per_door']} a door)"
                    err = f"{c['unexplained_errors']} (+{c['shed']} shed)"
                else:
                    q, err = f"{c['qps']:.0f}", c["errors"]
                L.append(f"| {cfg} | {ph} | **both** | **{c['hit_rate']:.4f}** | {c['proc_hits']} | {c['shared_hits']} | "
                         f"{c['reads']} | {q} | | | {err} |")
        rt = b["ratios"]
        L += ["", f"**Shared vs private ({be})**: cold hit rate {rt['cold_hit_rate']['shared']:.4f} vs "
              f"{rt['cold_hit_rate']['private']:.4f} (misses x{rt['cold_miss_ratio']:.2f}); warm hit rate "
              f"{rt['warm_hit_rate']['shared']:.4f} vs {rt['warm_hit_rate']['private']:.4f} (misses "
              f"x{rt['warm_miss_ratio']:.2f}); cold p99 {rt['cold_p99_ms']['shared']:.1f} vs "
              f"{rt['cold_p99_ms']['private']:.1f} ms; sustainable {rt['sustainable_qps']['shared']:.0f} vs "
              f"{rt['sustainable_qps']['private']:.0f} q/s (x{rt['sustainable_qps_ratio']:.2f}); hit rate during "
              f"the ramp {rt['ramp_hit_rate']['shared']:.4f} vs {rt['ramp_hit_rate']['private']:.4f}.", ""]
        L += ["Cold minute, hit rate per 5 s (both doors): ", ""]
        for cfg in ("private", "shared"):
            L.append(f"- {cfg}: " + ", ".join(f"{x['hit_rate']:.3f}" for x in b[cfg]["cold"]["hit_rate_curve"]))
        L += ["", "Ramp steps (per door: q/s, p99 ms):", ""]
        for cfg in ("private", "shared"):
            st_ = "; ".join(f"c={st['concurrency_per_door']}: {st['qps'][0]:.0f}+{st['qps'][1]:.0f} q/s, p99 "
                            f"{st['p99_ms'][0]:.1f}/{st['p99_ms'][1]:.1f}{'' if all(st['slo_pass']) else ' (SLO fail)'}"
                            for st in b[cfg]["warm"]["steps"])
            L.append(f"- {cfg}: {st_}")
        L.append("")
    k = res.get("kill_run")
    if k:
        L += ["## Redis killed and restarted mid-run (local backend, shared config)", "",
              f"Both doors open loop at {k['rate_per_door']:.0f} req/s for {k['duration']}; redis-server "
              f"SIGKILLed at {k['events']['killed_at_s']} s, restarted on the same port at "
              f"{k['events']['restarted_at_s']} s.", "",
              "| door | requests | ok | failed | p99 ms | max ms | shared hits | bypassed | breaker trips | reconnects | errors | timeouts |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for dn, d in k["doors"].items():
            c = d["cache"]
            L.append(f"| {dn} | {d['requests']} | {d['ok']} | {d['errors']} | {d['p99_ms']:.1f} | {d['max_ms']} | "
                     f"{c['shared_hits']} | {c['shared_bypassed']} | {c['shared_breaker_trips']} | "
                     f"{c['shared_reconnects']} | {c['shared_errors']} | {c['shared_timeouts']} |")
        L += ["", f"**Failed requests: {k['failed_requests']} of {k['requests']}.** Hits (both tiers) from 3 s after "
              f"the restart to the end: {k['hits_after_restart']} (shared hits {k['shared_hits_after_restart']}).", "",
              "Per second, both doors (in-process hits / shared hits / bypassed / misses):", "",
              "```"]
        for t in k["timeline_per_s"]:
            L.append(f"t={t['t']:5.1f}s  hit {t['proc_hits']:4d}  shared {t['shared_hits']:4d}  bypass "
                     f"{t['shared_bypassed']:4d}  miss {t['proc_misses']:4d}  connected {t['connected']}")
        L += ["```", ""]
    L += ["## Verdicts", ""]
    for c in res["checks"]:
        L.append(f"- **{'PASS' if c['pass'] else 'FAIL'}** {c['name']}: {c['detail']}")
    L += ["", f"Overall: **{'PASS' if res['pass'] else 'FAIL'}**.", ""]
    if res.get("notes"):
        L += ["## Notes", ""] + [f"- {n}" for n in res["notes"]] + [""]
    L += ["Reproduce: `cargo build --release -p searchd && python3 bench/shared_cache.py`."]
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--searchd", default=str(ROOT / "target" / "release" / "searchd"))
    ap.add_argument("--qdrant", default=os.environ.get("QDRANT_BIN") or "/work/shared/qdrant/qdrant")
    ap.add_argument("--work", default="/tmp/searchd-shared-cache")
    ap.add_argument("--backends", default="local,qdrant")
    ap.add_argument("--threads", type=int, default=2, help="serve --threads of each door")
    ap.add_argument("--cold", default="60s")
    ap.add_argument("--rate", default="1000", help="open-loop req/s a door in the cold and warm-rate phases")
    ap.add_argument("--warm", default="30s", help="the warm-rate phase (after the cold one)")
    ap.add_argument("--ramp", default="1,2,4,8,16,32,64")
    ap.add_argument("--warmup", default="2s")
    ap.add_argument("--step", default="5s")
    ap.add_argument("--kill-rate", default="300")
    ap.add_argument("--kill-duration", default="40s")
    ap.add_argument("--kill-at", type=float, default=10.0)
    ap.add_argument("--restart-at", type=float, default=25.0)
    ap.add_argument("--no-kill", action="store_true")
    ap.add_argument("--note", action="append", default=[], help="a note for the report (repeatable)")
    ap.add_argument("--out", default=str(HERE / "results" / "shared-cache"))
    args = ap.parse_args()
    args.searchd = Path(args.searchd)
    args.work = Path(args.work)
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.searchd.exists() or not DATA.exists() or not shutil.which("redis-server"):
        print(f"need {args.searchd} (cargo build --release -p searchd), {DATA} and redis-server", file=sys.stderr)
        return 2
    backends = [b for b in args.backends.split(",") if b]
    if "qdrant" in backends and not Path(args.qdrant).exists():
        print(f"need the Qdrant binary at {args.qdrant} (or QDRANT_BIN)", file=sys.stderr)
        return 2
    started = time.time()
    procs = []
    res = {"schema": "searchd.bench.shared-cache.v1", "commit": git_commit(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": " ".join(["python3", "bench/shared_cache.py"] + sys.argv[1:]),
           "cpu": os.cpu_count(),
           "params": {k: str(getattr(args, k)) for k in ("threads", "cold", "rate", "warm", "ramp", "warmup", "step",
                                                         "kill_rate", "kill_duration", "kill_at", "restart_at")},
           "backends": {}, "notes": [
               "With --cache-redis every read first asks Redis for the collection's generation (one MGET, "
               "shared.rs 'A read'), in-process hits included: the shared configuration pays a loopback round "
               "trip on every request, which shows in its q/s when most answers come from a cache.",
               "Each load process runs one client thread (--threads 1); at these rates (sub-ms answers) the "
               "load generators take a large share of the 2 cores, so the q/s figures are the whole machine's "
               "ceiling, not the server's alone.",
               "Closed-loop SLO p99 <= 100 ms is loose for sub-ms answers: the ramp usually ends at its last "
               "step with the SLO still met, so 'sustainable' is the best measured step (saturation).",
               "No ground truth for the 98,000 blended queries (exact search for 100k queries was too slow "
               "for the time given): 'validated' means searchd load's own checks of every answer (status, "
               "JSON shape, k hits, score order, ids < n), not recall.",
           ] + list(args.note)}
    args.redis = Redis(args.work, free_port())
    try:
        args.queries = args.work / "queries-100k.f32.npy"
        res["queries"] = make_queries(args.queries)
        args.coll = args.work / "coll"
        if not (args.coll / "manifest.json").exists() and not args.coll.exists():
            run([args.searchd, "ingest", "--docs", DATA / "passages.jsonl", "--vectors", DATA / "base.f16.npy",
                 "--out", args.coll, "--m", "16", "--ef-construction", "100", "--no-lexical",
                 "--build-threads", "2"])
        args.redis.start()
        procs.append(args.redis)
        if "qdrant" in backends:
            qhttp, qgrpc = free_port(), free_port()
            qdir = args.work / "qdrant"
            shutil.rmtree(qdir, ignore_errors=True)
            qdir.mkdir()
            env = dict(os.environ, QDRANT__SERVICE__HOST="127.0.0.1", QDRANT__SERVICE__HTTP_PORT=str(qhttp),
                       QDRANT__SERVICE__GRPC_PORT=str(qgrpc), QDRANT__STORAGE__STORAGE_PATH=str(qdir / "storage"),
                       QDRANT__TELEMETRY_DISABLED="true", QDRANT__LOG_LEVEL="WARN")
            qlog = open(qdir / "log", "ab")
            qp = subprocess.Popen([args.qdrant], env=env, cwd=qdir, stdout=qlog, stderr=qlog)

            class _Q:
                def stop(self):
                    qp.send_signal(signal.SIGTERM)
                    try:
                        qp.wait(30)
                    except subprocess.TimeoutExpired:
                        qp.kill()
            procs.append(_Q())
            wait_http(f"http://127.0.0.1:{qhttp}/readyz", qp)
            t0 = time.time()
            run([args.searchd, "ingest", "--docs", args.coll, "--to", f"qdrant://127.0.0.1:{qgrpc}/gcide", "--m", "16",
                 "--ef-construction", "100", "--recreate", "--upload-parallel", "2"])
            # Wait until Qdrant has built its index (green, every vector indexed) so neither
            # configuration runs against a collection still being optimised.
            t1 = time.time()
            while time.time() - t1 < 600:
                info = get_json(f"http://127.0.0.1:{qhttp}/collections/gcide")["result"]
                if info.get("status") == "green" and (info.get("indexed_vectors_count") or 0) >= 0.99 * (info.get("points_count") or 1):
                    break
                time.sleep(1)
            else:
                raise SetupError("Qdrant collection never green / indexed")
            res["qdrant_ingest_s"] = round(time.time() - t0, 1)
            res["qdrant_collection"] = {k: info.get(k) for k in ("status", "points_count", "indexed_vectors_count")}
            args.qdrant_grpc = f"http://127.0.0.1:{qgrpc}"
        for be in backends:
            b = {"private": one_config(args, be, False), "shared": one_config(args, be, True)}
            p, s = b["private"], b["shared"]
            div = lambda x, y: x / y if y else float("nan")
            pc = lambda r, ph: r[ph]["combined"]
            b["ratios"] = {
                "cold_hit_rate": {"private": pc(p, "cold")["hit_rate"], "shared": pc(s, "cold")["hit_rate"]},
                "cold_miss_ratio": div(1 - pc(s, "cold")["hit_rate"], 1 - pc(p, "cold")["hit_rate"]),
                "warm_hit_rate": {"private": pc(p, "warm_rate")["hit_rate"], "shared": pc(s, "warm_rate")["hit_rate"]},
                "warm_miss_ratio": div(1 - pc(s, "warm_rate")["hit_rate"], 1 - pc(p, "warm_rate")["hit_rate"]),
                "cold_p99_ms": {"private": pc(p, "cold")["p99_ms_max"], "shared": pc(s, "cold")["p99_ms_max"]},
                "sustainable_qps": {"private": pc(p, "warm")["sustainable_qps"], "shared": pc(s, "warm")["sustainable_qps"]},
                "sustainable_qps_ratio": div(pc(s, "warm")["sustainable_qps"], pc(p, "warm")["sustainable_qps"]),
                "ramp_hit_rate": {"private": pc(p, "warm")["hit_rate"], "shared": pc(s, "warm")["hit_rate"]},
            }
            res["backends"][be] = b
        if not args.no_kill:
            res["kill_run"] = kill_run(args)
    except SetupError as e:
        print(f"setup error: {e}", file=sys.stderr)
        return 2
    finally:
        for p in reversed(procs):
            p.stop()
    checks = []
    for be, b in res["backends"].items():
        p, s = b["private"]["warm_rate"]["combined"], b["shared"]["warm_rate"]["combined"]
        checks.append({"name": f"{be}: shared warm hit rate >= private (equal traffic)",
                       "pass": s["hit_rate"] >= p["hit_rate"],
                       "detail": f"{s['hit_rate']:.4f} vs {p['hit_rate']:.4f}"})
        for cfg in ("private", "shared"):
            r = b[cfg]
            ce, wr = r["cold"]["combined"]["errors"], r["warm_rate"]["combined"]["errors"]
            we = r["warm"]["combined"]["unexplained_errors"]
            sq = r["warm"]["combined"]["sustainable_qps"]
            checks.append({"name": f"{be}/{cfg}: answers validated (0 errors cold and warm; in the ramp no "
                                   "error but overload shedding 503/504/timeout), a sustainable step found",
                           "pass": ce == 0 and wr == 0 and we == 0 and sq > 0,
                           "detail": f"cold errors {ce}, warm errors {wr}, ramp errors other than shedding {we} "
                                     f"(shed {r['warm']['combined']['shed']}), sustainable {sq:.0f} q/s"})
    k = res.get("kill_run")
    if k:
        checks.append({"name": "kill run: 0 failed requests", "pass": k["failed_requests"] == 0 and k["requests"] > 0,
                       "detail": f"{k['failed_requests']} failed of {k['requests']}"})
        checks.append({"name": "kill run: hits resume after the restart", "pass": k["shared_hits_after_restart"] > 0,
                       "detail": f"{k['shared_hits_after_restart']} shared hits, {k['hits_after_restart']} hits in all "
                                 "from 3 s after the restart"})
        trips = sum(d["cache"]["shared_breaker_trips"] for d in k["doors"].values())
        checks.append({"name": "kill run: the outage was seen (breaker tripped, reads bypassed)",
                       "pass": trips > 0 and sum(d["cache"]["shared_bypassed"] for d in k["doors"].values()) > 0,
                       "detail": f"breaker trips {trips}, bypassed "
                                 f"{sum(d['cache']['shared_bypassed'] for d in k['doors'].values())}"})
    res["checks"] = checks
    res["pass"] = all(c["pass"] for c in checks)
    res["wall_s"] = round(time.time() - started)
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    text = md(res)
    out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
