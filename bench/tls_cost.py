#!/usr/bin/env python3
"""What HTTPS costs: sustainable QPS of `searchd serve` over HTTPS vs plain HTTP, same index,
same run, interleaved (HTTP, HTTPS, HTTPS, HTTP, ...), measured with `searchd load`.

    python3 bench/tls_cost.py [--rounds 3] [--threads 2] [--ef 64]

Data: dev-gcide-50k (../shared/datasets/dev-gcide-50k: 50k x 384 MiniLM vectors, float16),
built once into an HNSW index under bench/data/tls/. Certificates: a throwaway CA and a
server certificate for 127.0.0.1 made with `openssl` (the system binary). Each round starts
the server fresh with or without --tls-cert/--tls-key and runs a closed-loop ramp
(`searchd load --ramp ... --ca ca.pem` for HTTPS) with rotating queries, warm-up per step,
SLO p99 <= 100 ms; the load generator keeps its connections (keep-alive), so the handshake
is paid once per connection and the figure is the steady cost of encryption. Reported:
median sustainable QPS of each and their ratio (with every round's figures), and the p50 at
a fixed concurrency. Writes bench/results/tls-cost.{json,md}.
Exit 0 when measured, 2 on a setup error. Standard library only.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT.parent / "shared" / "datasets" / "dev-gcide-50k"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certs(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    if (d / "cert.pem").exists():
        return
    steps = [
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", d / "ca.key", "-out", d / "ca.pem", "-days", "30",
         "-subj", "/CN=searchd bench CA"],
        ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", d / "key.pem", "-out", d / "req.csr", "-subj", "/CN=127.0.0.1"],
    ]
    for c in steps:
        r = run(c)
        if r.returncode != 0:
            raise SystemExit(f"openssl failed: {r.stderr}")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    r = run(["openssl", "x509", "-req", "-in", d / "req.csr", "-CA", d / "ca.pem", "-CAkey",
             d / "ca.key", "-CAcreateserial", "-out", d / "cert.pem", "-days", "30",
             "-extfile", d / "ext.cnf"])
    if r.returncode != 0:
        raise SystemExit(f"openssl failed: {r.stderr}")


class Server:
    def __init__(self, searchd, index, queries, port, args, tls: Path | None, logf: Path):
        cmd = [searchd, "serve", "--index", index, "--queries", queries, "--addr",
               f"127.0.0.1:{port}", "--threads", str(args.threads), "--ef", str(args.ef)]
        if tls:
            cmd += ["--tls-cert", tls / "cert.pem", "--tls-key", tls / "key.pem"]
        self.log = open(logf, "w")
        self.proc = subprocess.Popen([str(c) for c in cmd], stdout=self.log, stderr=self.log)
        self.port = port

    def wait_ready(self, tls: Path | None) -> None:
        t = time.time()
        while time.time() - t < 60:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited: {self.proc.returncode}")
            try:
                if tls:
                    import ssl
                    ctx = ssl.create_default_context(cafile=str(tls / "ca.pem"))
                    urllib.request.urlopen(f"https://127.0.0.1:{self.port}/ready", context=ctx, timeout=1)
                else:
                    urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ready", timeout=1)
                return
            except Exception:
                time.sleep(0.1)
        raise SystemExit("server never ready")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def one(searchd, index, queries, args, tls, out: Path) -> dict:
    port = free_port()
    s = Server(searchd, index, queries, port, args, tls, out.with_suffix(".log"))
    try:
        s.wait_ready(tls)
        scheme = "https" if tls else "http"
        cmd = [searchd, "load", "--url", f"{scheme}://127.0.0.1:{port}", "--ramp", args.ramp,
               "--warmup", args.warmup, "--duration", args.duration, "--queries", str(args.nq),
               "--k", "10", "--slo-p99-ms", "100", "--json", out, "--quiet"]
        if tls:
            cmd += ["--ca", tls / "ca.pem"]
        r = run(cmd)
        if r.returncode not in (0, 1):
            raise SystemExit(f"searchd load failed ({r.returncode}): {r.stderr[-2000:]}")
        rep = json.loads(out.read_text())
    finally:
        s.stop()
    steps = rep["steps"]
    sust = rep.get("sustainable")
    fixed = next((st for st in steps if st["concurrency"] == args.fixed_c), None)
    return {
        "scheme": scheme,
        "sustainable_qps": sust["qps"] if sust else 0.0,
        "sustainable_concurrency": sust["concurrency"] if sust else None,
        "sustainable_p99_ms": sust["p99_ms"] if sust else float("nan"),
        "fixed_c_p50_ms": fixed["latency_ms"]["p50"] if fixed else None,
        "fixed_c_qps": fixed["qps"] if fixed else None,
        "errors": sum(sum(st["errors"].values()) for st in steps),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--ramp", default="1,2,4,8,16,32")
    ap.add_argument("--fixed-c", type=int, default=4)
    ap.add_argument("--warmup", default="2s")
    ap.add_argument("--duration", default="5s")
    ap.add_argument("--nq", type=int, default=2000)
    ap.add_argument("--searchd", default=str(ROOT / "target" / "release" / "searchd"))
    args = ap.parse_args()
    searchd = Path(args.searchd)
    if not searchd.exists() or not DATA.exists():
        print(f"need {searchd} (cargo build --release) and {DATA}", file=sys.stderr)
        return 2
    work = HERE / "data" / "tls"
    work.mkdir(parents=True, exist_ok=True)
    index = work / "hnsw"
    if not (index / "meta.json").exists() and not index.exists():
        log("building the index (dev-gcide-50k, HNSW M=16)")
        r = run([searchd, "build", "--base", DATA / "base.f16.npy", "--out", index, "--index",
                 "hnsw", "--metric", "cosine", "--threads", str(args.threads)])
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 2
    certs = work / "certs"
    make_certs(certs)
    queries = DATA / "queries.f16.npy"
    rounds = []
    order = []
    for i in range(args.rounds):
        order += [False, True] if i % 2 == 0 else [True, False]
    for n, tls in enumerate(order):
        label = "https" if tls else "http"
        log(f"run {n + 1}/{len(order)}: {label}")
        r = one(searchd, index, queries, args, certs if tls else None, work / f"load-{n}-{label}.json")
        log(f"  sustainable {r['sustainable_qps']:.0f} q/s at c={r['sustainable_concurrency']}")
        rounds.append(r)
    med = lambda xs: statistics.median(xs) if xs else None
    http = [r["sustainable_qps"] for r in rounds if r["scheme"] == "http"]
    https = [r["sustainable_qps"] for r in rounds if r["scheme"] == "https"]
    p50h = [r["fixed_c_p50_ms"] for r in rounds if r["scheme"] == "http" and r["fixed_c_p50_ms"]]
    p50s = [r["fixed_c_p50_ms"] for r in rounds if r["scheme"] == "https" and r["fixed_c_p50_ms"]]
    res = {
        "schema": "searchd.bench.tls-cost.v1",
        "dataset": "dev-gcide-50k",
        "threads": args.threads,
        "ef": args.ef,
        "ramp": args.ramp,
        "warmup": args.warmup,
        "duration": args.duration,
        "runs": rounds,
        "http_sustainable_qps_median": med(http),
        "https_sustainable_qps_median": med(https),
        "ratio_https_over_http": (med(https) / med(http)) if http and med(http) else None,
        "fixed_c": args.fixed_c,
        "http_p50_ms_median": med(p50h),
        "https_p50_ms_median": med(p50s),
        "cpu": os.cpu_count(),
    }
    out = HERE / "results" / "tls-cost"
    out.with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
    L = ["# HTTPS vs HTTP: sustainable QPS, same index, same run", "",
         f"dev-gcide-50k (50k x 384, HNSW), `serve --threads {args.threads} --ef {args.ef}`, "
         f"`searchd load` closed-loop ramp {args.ramp}, warm-up {args.warmup}, {args.duration} a step, "
         f"SLO p99 <= 100 ms, rotating queries; {args.rounds} rounds interleaved (ABBA). "
         "Keep-alive connections: the steady cost of encryption, not of handshakes. "
         f"Load generator and server share {os.cpu_count()} cores.", "",
         "| run | scheme | sustainable q/s | at c | p99 ms | p50 ms at c=%d | errors |" % args.fixed_c,
         "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rounds):
        L.append(f"| {i + 1} | {r['scheme']} | {r['sustainable_qps']:.0f} | {r['sustainable_concurrency']} | "
                 f"{r['sustainable_p99_ms']:.2f} | {r['fixed_c_p50_ms'] or float('nan'):.3f} | {r['errors']} |")
    L += ["", f"Median sustainable: HTTP {res['http_sustainable_qps_median']:.0f} q/s, HTTPS "
          f"{res['https_sustainable_qps_median']:.0f} q/s: **HTTPS / HTTP = {res['ratio_https_over_http']:.3f}**.",
          f"Median p50 at c={args.fixed_c}: HTTP {res['http_p50_ms_median']} ms, HTTPS {res['https_p50_ms_median']} ms.",
          "", "Reproduce: `cargo build --release && python3 bench/tls_cost.py`."]
    out.with_suffix(".md").write_text("\n".join(L) + "\n")
    print("\n".join(L))
    return 0


if __name__ == "__main__":
    sys.exit(main())
