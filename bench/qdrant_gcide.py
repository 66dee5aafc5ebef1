#!/usr/bin/env python3
"""searchd in front of Qdrant vs Qdrant's own REST API vs searchd's local engine, on
dev-gcide-50k, HNSW m=16 ef_construct=200, the same ef, in one run.

Steps (everything through the `searchd` binary, nothing but the standard library here):
  1. exact ground truth (`searchd gt`, k=10) and a local collection (`searchd ingest
     --vectors base.f16.npy`, HNSW m=16 efc=200, no lexical index);
  2. a Qdrant node on free loopback ports (storage in the work dir), the collection uploaded
     by `searchd ingest --docs COLL --to qdrant://...` (time to green and fully indexed);
  3. for each trial, in turn: `searchd serve --backend qdrant` loaded by `searchd load`
     (qidx bodies, rotating queries, recall checked), Qdrant's REST search loaded by the same
     `searchd load` (`--body-file` of {"vector", "limit", "params": {"hnsw_ef"}} bodies, the
     same queries, recall checked the same way), and `searchd serve --collection` (local);
  4. bench/results/qdrant-gcide.{json,md}.

Usage: python3 bench/qdrant_gcide.py [--ef 64] [--trials 1] [--ramp 1,2,4,8,16,32]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = "/work/shared/datasets/dev-gcide-50k"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_http(url, timeout=120):
    t = time.time()
    while time.time() - t < timeout:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} not ready after {timeout}s")


def read_npy_f16_or_f32(path):
    with open(path, "rb") as f:
        magic = f.read(6)
        assert magic == b"\x93NUMPY", path
        major = f.read(2)[0]
        hlen = struct.unpack("<H" if major == 1 else "<I", f.read(2 if major == 1 else 4))[0]
        header = f.read(hlen).decode()
        shape = tuple(int(x) for x in header.split("'shape': (")[1].split(")")[0].split(",") if x.strip())
        fmt = "e" if "<f2" in header else "f"
        n, d = shape
        size = 2 if fmt == "e" else 4
        rows = []
        for _ in range(n):
            v = struct.unpack(f"<{d}{fmt}", f.read(d * size))
            norm = sum(x * x for x in v) ** 0.5 or 1.0
            rows.append([x / norm for x in v])
        return rows


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def grpc_bytes(port):
    """Bytes sent and received over established TCP connections to `port` (ss -ti counters
    of the client side: searchd's gRPC channels to Qdrant)."""
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True).stdout
    sent = recv = 0
    for tok in out.split():
        if tok.startswith("bytes_sent:"):
            sent += int(tok.split(":")[1])
        elif tok.startswith("bytes_received:"):
            recv += int(tok.split(":")[1])
    return sent, recv


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def load(b, url, args, out_json, extra):
    cmd = args.tool["load"] + ["--url", url, "--ramp", args.ramp, "--warmup", args.warmup,
           "--duration", args.duration, "--slo-p99-ms", "100", "--gt", args.gt,
           "--k", "10", "--pick", "uniform", "--json", out_json, "--quiet"] + extra
    run(cmd)
    with open(out_json) as f:
        return json.load(f)


def summary(rep):
    s = rep.get("sustainable") or {}
    steps = rep["steps"]
    best = None
    for st in steps:
        if st.get("slo_pass") and (best is None or st["qps"] > best["qps"]):
            best = st
    return {
        "sustainable_qps": best["qps"] if best else 0.0,
        "at_concurrency": best["concurrency"] if best else None,
        "p99_ms": best["latency_ms"]["p99"] if best else None,
        "recall_at_10": best["recall_at_k"] if best else None,
        "server_rss_mb": (best["server"]["rss_bytes"] or 0) / 2**20 if best else None,
        "server_cpu_pct": best["server"]["cpu_pct"] if best else None,
        "errors": {k: sum(st["errors"][k] for st in steps) for k in steps[0]["errors"]},
        "sustainable": s,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/searchd"),
                    help="the searchd binary; when it does not exist, the examples of "
                         "--examples (qdrant_prep, serve, load) are used instead")
    ap.add_argument("--examples", default=os.path.join(ROOT, "target/debug/examples"))
    ap.add_argument("--qdrant", default=os.environ.get("QDRANT_BIN") or shutil.which("qdrant") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "qdrant", "qdrant"))
    ap.add_argument("--work", default="/tmp/searchd-qdrant-gcide")
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--ramp", default="1,2,4,8,16,32,64")
    ap.add_argument("--warmup", default="3s")
    ap.add_argument("--duration", default="8s")
    ap.add_argument("--channels", type=int, default=2)
    ap.add_argument("--overload-queue", type=int, default=None,
                    help="`serve --queue` for the overload phase (default: serve's own)")
    ap.add_argument("--local-ef-match", type=int, default=96,
                    help="also load the local engine at this ef (the ratio at equal recall)")
    ap.add_argument("--overload-only", default=None, metavar="RESULT_JSON",
                    help="skip the trials: take the sustainable point from this earlier result and run only the overload phases")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/qdrant-gcide"))
    args = ap.parse_args()
    b, w = args.bin, args.work
    full = os.path.exists(b)
    ex = args.examples
    tool = {"serve": [b, "serve"] if full else [os.path.join(ex, "serve")],
            "load": [b, "load"] if full else [os.path.join(ex, "load")]}
    args.tool = tool
    senv = dict(os.environ, RUST_LOG="warn")
    os.makedirs(w, exist_ok=True)
    args.gt = os.path.join(w, "gt.npy")
    if not os.path.exists(args.gt):
        if full:
            run([b, "gt", "--base", f"{DATA}/base.f16.npy", "--queries", f"{DATA}/queries.f16.npy",
                 "--out", args.gt, "--k", "10"])
        else:
            run([os.path.join(ex, "qdrant_prep"), "gt", f"{DATA}/base.f16.npy", f"{DATA}/queries.f16.npy",
                 args.gt, "10"])
    coll = os.path.join(w, "coll")
    if not os.path.exists(coll):
        if full:
            run([b, "ingest", "--docs", f"{DATA}/passages.jsonl", "--vectors", f"{DATA}/base.f16.npy",
                 "--out", coll, "--m", "16", "--ef-construction", "200", "--no-lexical",
                 "--build-threads", "2"])
        else:
            run([os.path.join(ex, "qdrant_prep"), "collection", f"{DATA}/passages.jsonl",
                 f"{DATA}/base.f16.npy", coll])
    bodies = os.path.join(w, f"qdrant-bodies-ef{args.ef}.jsonl")
    if not os.path.exists(bodies):
        qs = read_npy_f16_or_f32(f"{DATA}/queries.f16.npy")
        with open(bodies, "w") as f:
            for i, v in enumerate(qs):
                f.write(json.dumps({"vector": [round(x, 7) for x in v], "limit": 10,
                                    "params": {"hnsw_ef": args.ef}, "qidx": i, "k": 10}) + "\n")

    qhttp, qgrpc = free_port(), free_port()
    qdir = os.path.join(w, "qdrant")
    env = dict(os.environ, QDRANT__SERVICE__HOST="127.0.0.1", QDRANT__SERVICE__HTTP_PORT=str(qhttp),
               QDRANT__SERVICE__GRPC_PORT=str(qgrpc), QDRANT__STORAGE__STORAGE_PATH=os.path.join(qdir, "storage"),
               QDRANT__TELEMETRY_DISABLED="true", QDRANT__LOG_LEVEL="WARN")
    os.makedirs(qdir, exist_ok=True)
    qlog = open(os.path.join(qdir, "log"), "ab")
    qp = subprocess.Popen([args.qdrant], env=env, cwd=qdir, stdout=qlog, stderr=qlog)
    procs = [qp]
    result = {"schema": "searchd.bench.qdrant_gcide.v1", "ef": args.ef, "ramp": args.ramp,
              "warmup": args.warmup, "duration": args.duration, "channels": args.channels,
              "trials": []}
    try:
        wait_http(f"http://127.0.0.1:{qhttp}/readyz")
        ij = os.path.join(w, "ingest.json")
        t0 = time.time()
        if full:
            run([b, "ingest", "--docs", coll, "--to", f"qdrant://127.0.0.1:{qgrpc}/gcide", "--m", "16",
                 "--ef-construction", "200", "--recreate", "--upload-parallel", "2", "--json", ij])
        else:
            with open(ij, "w") as f:
                run([os.path.join(ex, "qdrant_prep"), "upload", coll, f"qdrant://127.0.0.1:{qgrpc}/gcide"],
                    stdout=f)
        with open(ij) as f:
            result["ingest"] = json.load(f)
        result["ingest_wall_s"] = time.time() - t0
        result["tools"] = "searchd" if full else "examples (debug profile: deps opt-level 2, workspace 1)"
        result["qdrant_rss_mb_after_ingest"] = rss_bytes(qp.pid) / 2**20
        while not os.path.exists(tool["load"][0]):  # the load binary may still be building
            time.sleep(2)
        if args.overload_only:
            with open(args.overload_only) as f:
                result["trials"] = json.load(f)["trials"]
            result["overload_from"] = os.path.basename(args.overload_only)
        for t in range(0 if args.overload_only else args.trials):
            trial = {}
            # 1. searchd over Qdrant.
            port = free_port()
            sp = subprocess.Popen(tool["serve"] + ["--backend", "qdrant", "--qdrant-url",
                                   f"http://127.0.0.1:{qgrpc}", "--qdrant-collection", "gcide",
                                   "--qdrant-channels", str(args.channels),
                                   "--queries", f"{DATA}/queries.f16.npy", "--ef", str(args.ef),
                                   "--addr", f"127.0.0.1:{port}"], env=senv)
            procs.append(sp)
            wait_http(f"http://127.0.0.1:{port}/ready")
            q0, s0 = cpu_seconds(qp.pid), cpu_seconds(sp.pid)
            rep = load(b, f"http://127.0.0.1:{port}", args, os.path.join(w, f"load-front-{t}.json"),
                       ["--query-count", "2000", "--ef", str(args.ef)])
            q1, s1 = cpu_seconds(qp.pid), cpu_seconds(sp.pid)
            ok = sum(st["ok"] for st in rep["steps"])
            trial["searchd_over_qdrant"] = summary(rep)
            # Bytes per query on the gRPC channels: a short run with no warm-up, so every
            # request sent is counted, between two readings of the sockets' counters.
            b0 = grpc_bytes(qgrpc)
            bj = os.path.join(w, f"load-bytes-{t}.json")
            subprocess.run(args.tool["load"] + ["--url", f"http://127.0.0.1:{port}", "--ramp", "4",
                           "--warmup", "0s", "--duration", "3s", "--json", bj, "--quiet",
                           "--query-count", "2000", "--ef", str(args.ef)], check=False)
            b1 = grpc_bytes(qgrpc)
            with open(bj) as f:
                nb = json.load(f)["steps"][0]["requests"]
            trial["searchd_over_qdrant"].update({
                "grpc_bytes_per_query_sent": (b1[0] - b0[0]) / max(nb, 1),
                "grpc_bytes_per_query_received": (b1[1] - b0[1]) / max(nb, 1),
                "bytes_run_requests": nb})
            trial["searchd_over_qdrant"].update({
                "front_cpu_ms_per_request_all_steps": 1e3 * (s1 - s0) / max(ok, 1),
                "qdrant_cpu_ms_per_request_all_steps": 1e3 * (q1 - q0) / max(ok, 1),
                "front_rss_mb_end": rss_bytes(sp.pid) / 2**20})
            sp.send_signal(signal.SIGTERM)
            sp.wait(30)
            procs.remove(sp)
            # 2. Qdrant's REST API, directly.
            q0 = cpu_seconds(qp.pid)
            rep = load(b, f"http://127.0.0.1:{qhttp}", args, os.path.join(w, f"load-rest-{t}.json"),
                       ["--endpoint", "POST /collections/gcide/points/search", "--body-file", bodies,
                        "--server-pid", str(qp.pid), "--n-max", "50000"])
            q1 = cpu_seconds(qp.pid)
            ok = sum(st["ok"] for st in rep["steps"])
            trial["qdrant_rest"] = summary(rep)
            trial["qdrant_rest"]["qdrant_cpu_ms_per_request_all_steps"] = 1e3 * (q1 - q0) / max(ok, 1)
            # 3. searchd's local engine, same data.
            port = free_port()
            sp = subprocess.Popen(tool["serve"] + ["--collection", f"gcide={coll}",
                                   "--queries", f"{DATA}/queries.f16.npy", "--ef", str(args.ef),
                                   "--addr", f"127.0.0.1:{port}"], env=senv)
            procs.append(sp)
            wait_http(f"http://127.0.0.1:{port}/ready")
            s0 = cpu_seconds(sp.pid)
            rep = load(b, f"http://127.0.0.1:{port}", args, os.path.join(w, f"load-local-{t}.json"),
                       ["--query-count", "2000", "--ef", str(args.ef)])
            s1 = cpu_seconds(sp.pid)
            ok = sum(st["ok"] for st in rep["steps"])
            trial["searchd_local"] = summary(rep)
            trial["searchd_local"]["cpu_ms_per_request_all_steps"] = 1e3 * (s1 - s0) / max(ok, 1)
            # The same server at a higher ef, for the ratio at equal recall: the two HNSW
            # implementations reach different recall at the same ef.
            if args.local_ef_match and args.local_ef_match != args.ef:
                rep = load(b, f"http://127.0.0.1:{port}", args,
                           os.path.join(w, f"load-local-ef{args.local_ef_match}-{t}.json"),
                           ["--query-count", "2000", "--ef", str(args.local_ef_match)])
                trial["searchd_local_ef_match"] = summary(rep)
                trial["searchd_local_ef_match"]["ef"] = args.local_ef_match
            sp.send_signal(signal.SIGTERM)
            sp.wait(30)
            procs.remove(sp)
            result["trials"].append(trial)
            print(json.dumps(trial, indent=1), flush=True)
        # 4. Overload: 4x the sustainable concurrency of searchd over Qdrant, clients that
        # honour Retry-After; goodput against the sustainable QPS, p99 of accepted answers.
        front = result["trials"][-1]["searchd_over_qdrant"]
        c4 = 4 * (front["at_concurrency"] or 1)
        # Twice, in the same run: admission bounded by count only (`--max-queue-wait-ms 0`,
        # the behaviour before the time bound), then with serve's defaults (the wait bound).
        variants = [("overload_count_only", ["--max-queue-wait-ms", "0"]), ("overload", [])]
        for key, vflags in variants:
            port = free_port()
            qflags = (["--queue", str(args.overload_queue)] if args.overload_queue else []) + vflags
            sp = subprocess.Popen(tool["serve"] + ["--backend", "qdrant", "--qdrant-url",
                                   f"http://127.0.0.1:{qgrpc}", "--qdrant-collection", "gcide",
                                   "--qdrant-channels", str(args.channels),
                                   "--queries", f"{DATA}/queries.f16.npy", "--ef", str(args.ef),
                                   "--addr", f"127.0.0.1:{port}"] + qflags, env=senv)
            procs.append(sp)
            wait_http(f"http://127.0.0.1:{port}/ready")
            oj = os.path.join(w, f"load-{key}.json")
            cmd = args.tool["load"] + ["--url", f"http://127.0.0.1:{port}", "--ramp", str(c4),
                   "--warmup", args.warmup, "--duration", "15s", "--slo-p99-ms", "100", "--gt", args.gt,
                   "--k", "10", "--pick", "uniform", "--json", oj, "--quiet", "--retry-after", "honor",
                   "--max-error-rate", "1", "--query-count", "2000", "--ef", str(args.ef)]
            subprocess.run(cmd, check=False)
            with open(oj) as f:
                st = json.load(f)["steps"][0]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as r:
                adm = json.load(r).get("admission")
            result[key] = {
                "concurrency": c4, "sustainable_qps": front["sustainable_qps"],
                "goodput_qps": st["qps"], "goodput_ratio": st["qps"] / max(front["sustainable_qps"], 1e-9),
                "accepted_p99_ms": st["latency_ms"]["p99"], "accepted_p50_ms": st["latency_ms"]["p50"],
                "errors": st["errors"], "requests": st["requests"], "ok": st["ok"], "serve_flags": qflags,
                "admission": adm}
            print(json.dumps(result[key], indent=1), flush=True)
            sp.send_signal(signal.SIGTERM)
            sp.wait(30)
            procs.remove(sp)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    write_md(result, args)
    print(f"wrote {args.out}.json and .md")


def write_md(r, args):
    ing = (r.get("ingest") or {}).get("report") or {}
    lines = [f"# searchd in front of Qdrant vs Qdrant's REST API vs searchd's local engine (dev-gcide-50k)", "",
             f"`python3 bench/qdrant_gcide.py --trials {args.trials} --ramp {args.ramp}`: 50,000 x 384 "
             f"all-MiniLM-L6-v2 vectors, HNSW m=16 ef_construct=200, ef {r['ef']}, k 10; closed-loop ramp "
             f"{r['ramp']} ({r['warmup']} warm-up + {r['duration']} per step), p99 <= 100 ms, errors <= 1%, "
             "2,000 rotating queries, every answer checked and recall@10 computed against exact ground truth. "
             "One Qdrant node (the release binary in ../shared/qdrant) on loopback; the three servers take turns "
             "in each trial, on the same 2 cores as the load generator.", "",
             f"Ingest (`searchd ingest --to qdrant:// --upload-parallel 2`): {ing.get('points', 0):,} points, upload "
             f"{ing.get('upload_s', 0):.1f} s, then {ing.get('index_wait_s', 0):.1f} s to green with "
             f"{ing.get('indexed_vectors', 0):,} vectors indexed; {ing.get('retries', 0)} retries; wall "
             f"{r.get('ingest_wall_s', 0):.1f} s.", "",
             "| trial | server | sustainable QPS | at conc. | p99 ms | recall@10 | front RSS MB | front CPU ms/req | Qdrant CPU ms/req |",
             "|---|---|---|---|---|---|---|---|---|"]
    ratios, local, matched = [], [], []
    for i, t in enumerate(r["trials"]):
        f, q, l = t["searchd_over_qdrant"], t["qdrant_rest"], t["searchd_local"]
        fmt = lambda x, d=2: "-" if x is None else f"{x:.{d}f}"
        lines.append(f"| {i} | searchd over Qdrant (gRPC) | {f['sustainable_qps']:.0f} | {f['at_concurrency']} | {fmt(f['p99_ms'])} | {fmt(f['recall_at_10'], 4)} | {fmt(f.get('front_rss_mb_end'), 1)} | {fmt(f.get('front_cpu_ms_per_request_all_steps'), 3)} | {fmt(f.get('qdrant_cpu_ms_per_request_all_steps'), 3)} |")
        lines.append(f"| {i} | Qdrant REST, directly | {q['sustainable_qps']:.0f} | {q['at_concurrency']} | {fmt(q['p99_ms'])} | {fmt(q['recall_at_10'], 4)} | - | - | {fmt(q.get('qdrant_cpu_ms_per_request_all_steps'), 3)} |")
        lines.append(f"| {i} | searchd local engine | {l['sustainable_qps']:.0f} | {l['at_concurrency']} | {fmt(l['p99_ms'])} | {fmt(l['recall_at_10'], 4)} | {fmt(l.get('server_rss_mb'), 1)} | {fmt(l.get('cpu_ms_per_request_all_steps'), 3)} | - |")
        m = t.get("searchd_local_ef_match")
        if m:
            lines.append(f"| {i} | searchd local engine, ef {m['ef']} | {m['sustainable_qps']:.0f} | {m['at_concurrency']} | {fmt(m['p99_ms'])} | {fmt(m['recall_at_10'], 4)} | - | - | - |")
            if m["recall_at_10"] is not None and q["recall_at_10"] is not None and m["recall_at_10"] >= q["recall_at_10"]:
                matched.append(m["sustainable_qps"] / max(q["sustainable_qps"], 1e-9))
        ratios.append(f["sustainable_qps"] / max(q["sustainable_qps"], 1e-9))
        local.append(l["sustainable_qps"] / max(q["sustainable_qps"], 1e-9))
    lines += ["", f"Front-door efficiency (searchd over Qdrant / Qdrant REST, same trial): "
              f"**{', '.join(f'{x:.2f}x' for x in ratios)}** (target >= 0.95x). "
              f"searchd's local engine / Qdrant REST at the same ef: **{', '.join(f'{x:.2f}x' for x in local)}**"
              + (f"; at equal or higher recall (local ef {args.local_ef_match}): **{', '.join(f'{x:.2f}x' for x in matched)}**."
                 if matched else ".")]
    f0 = r["trials"][0]["searchd_over_qdrant"]
    if "grpc_bytes_per_query_sent" in f0:
        lines += ["", f"Bytes per query on searchd's gRPC channels to Qdrant (`ss -ti` counters around a 3 s run, "
                  f"{f0['bytes_run_requests']:,} requests): **{f0['grpc_bytes_per_query_sent']:.0f} B sent, "
                  f"{f0['grpc_bytes_per_query_received']:.0f} B received** (HTTP/2 frames, headers and TCP "
                  "payload; TCP/IP headers not counted)."]
    for key in ["overload_count_only", "overload"]:
        o = r.get(key)
        if not o:
            continue
        adm = o.get("admission") or {}
        lines += ["", f"Overload ({'count bound only' if key == 'overload_count_only' else 'serve defaults: count and wait bounds'}): {o['concurrency']} clients (4x the sustainable concurrency) honouring Retry-After against "
                  f"searchd over Qdrant (`serve {' '.join(o.get('serve_flags') or []) or 'defaults'}`) for 15 s: goodput {o['goodput_qps']:.0f} q/s = **{o['goodput_ratio']:.2f}x** the "
                  f"sustainable {o['sustainable_qps']:.0f} (target >= 0.9x); accepted p99 **{o['accepted_p99_ms']:.1f} ms** "
                  f"(SLO 100 ms), p50 {o.get('accepted_p50_ms') or 0:.1f} ms; {o['ok']:,} ok of {o['requests']:,} requests, "
                  f"errors {json.dumps({k: v for k, v in o['errors'].items() if v})}; refused by the wait bound "
                  f"{adm.get('shed_by_wait', 0):,}, completion interval under saturation "
                  f"{adm.get('completion_interval_ms') or 0:.3f} ms."]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
