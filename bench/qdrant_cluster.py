#!/usr/bin/env python3
"""searchd in front of Qdrant: one node vs a three-node cluster (2 shards x 2 replicas) on
loopback, then one node of the cluster killed under load and brought back.

  1. a standalone node, the collection uploaded by `searchd ingest --to qdrant://`, a
     closed-loop ramp through `searchd serve --backend qdrant` (the 1-node figure of this run);
  2. three nodes (`QDRANT__CLUSTER__ENABLED=true`, the first with `--uri`, the others with
     `--bootstrap`), `searchd ingest --shards 2 --replicas 2`, the same ramp;
  3. `searchd load --rate R` for --duration against the cluster; node 3 is SIGKILLed at 1/3
     of it and restarted at 2/3; failed requests per phase (from the per-second series), and
     the time until node 1 sees every replica Active again;
  4. bench/results/qdrant-cluster.{json,md}.

COLL is the local collection bench/qdrant_gcide.py makes. All nodes and searchd share this
machine's cores: QPS here says nothing about scaling out, only about the cost of fan-out on
one box and about failures during a replica's loss.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
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


def get_json(url):
    with urllib.request.urlopen(url, timeout=3) as r:
        return json.loads(r.read())


def wait(pred, what, timeout=120):
    t = time.time()
    while time.time() - t < timeout:
        try:
            if pred():
                return time.time() - t
        except Exception:
            pass
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


class Node:
    def __init__(self, qbin, base, i, bootstrap=None):
        self.qbin, self.dir, self.i = qbin, os.path.join(base, f"node{i}"), i
        self.http, self.grpc, self.p2p = free_port(), free_port(), free_port()
        self.bootstrap = bootstrap
        self.proc = None
        os.makedirs(self.dir, exist_ok=True)

    def start(self):
        env = dict(os.environ, QDRANT__SERVICE__HOST="127.0.0.1",
                   QDRANT__SERVICE__HTTP_PORT=str(self.http), QDRANT__SERVICE__GRPC_PORT=str(self.grpc),
                   QDRANT__CLUSTER__ENABLED="true", QDRANT__CLUSTER__P2P__PORT=str(self.p2p),
                   QDRANT__STORAGE__STORAGE_PATH=os.path.join(self.dir, "storage"),
                   QDRANT__TELEMETRY_DISABLED="true", QDRANT__LOG_LEVEL="WARN")
        args = [self.qbin, "--uri", f"http://127.0.0.1:{self.p2p}"]
        if self.bootstrap and not os.path.exists(os.path.join(self.dir, "storage", "raft_state.json")):
            args += ["--bootstrap", f"http://127.0.0.1:{self.bootstrap}"]
        log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(args, env=env, cwd=self.dir, stdout=log, stderr=log)
        wait(lambda: urllib.request.urlopen(f"http://127.0.0.1:{self.http}/readyz", timeout=2).status == 200,
             f"node {self.i} ready")

    def start_plain(self):
        """A standalone node (cluster mode off)."""
        env = dict(os.environ, QDRANT__SERVICE__HOST="127.0.0.1",
                   QDRANT__SERVICE__HTTP_PORT=str(self.http), QDRANT__SERVICE__GRPC_PORT=str(self.grpc),
                   QDRANT__STORAGE__STORAGE_PATH=os.path.join(self.dir, "storage"),
                   QDRANT__TELEMETRY_DISABLED="true", QDRANT__LOG_LEVEL="WARN")
        log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen([self.qbin], env=env, cwd=self.dir, stdout=log, stderr=log)
        wait(lambda: urllib.request.urlopen(f"http://127.0.0.1:{self.http}/readyz", timeout=2).status == 200,
             f"node {self.i} ready")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def replicas(node_http):
    """(active, total) shard replicas of gcide as node 1 sees them (local and remote)."""
    r = get_json(f"http://127.0.0.1:{node_http}/collections/gcide/cluster")["result"]
    states = [x.get("state") for x in r.get("local_shards", [])] + \
             [x.get("state") for x in r.get("remote_shards", [])]
    return sum(1 for x in states if x == "Active"), len(states)


def ramp(a, port, out):
    """Closed-loop ramp against searchd at `port`; the sustainable step."""
    subprocess.run([a.bin, "load", "--url", f"http://127.0.0.1:{port}", "--ramp", a.ramp,
                    "--warmup", "3s", "--duration", "8s", "--slo-p99-ms", "100",
                    "--query-count", "2000", "--ef", str(a.ef), "--json", out, "--quiet"], check=False)
    rep = json.load(open(out))
    best = None
    for st in rep["steps"]:
        if st.get("slo_pass") and (best is None or st["qps"] > best["qps"]):
            best = st
    return {"sustainable_qps": best["qps"] if best else 0.0,
            "at_concurrency": best["concurrency"] if best else None,
            "p99_ms": best["latency_ms"]["p99"] if best else None,
            "steps": [{"concurrency": st["concurrency"], "qps": st["qps"],
                       "p99_ms": st["latency_ms"]["p99"], "errors": st["errors"]} for st in rep["steps"]]}


def serve_front(a, grpc):
    port = free_port()
    p = subprocess.Popen([a.bin, "serve", "--backend", "qdrant", "--qdrant-url",
                          f"http://127.0.0.1:{grpc}", "--qdrant-collection", "gcide",
                          "--queries", f"{DATA}/queries.f16.npy", "--ef", str(a.ef),
                          "--addr", f"127.0.0.1:{port}", "--log", "warn"])
    wait(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2).status == 200, "searchd")
    return p, port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/searchd"))
    ap.add_argument("--qdrant", default=os.environ.get("QDRANT_BIN") or shutil.which("qdrant") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "qdrant", "qdrant"))
    ap.add_argument("--work", default="/tmp/searchd-qdrant-cluster")
    ap.add_argument("--coll", default="/tmp/searchd-qdrant-gcide/coll")
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--duration", type=int, default=45)
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--ramp", default="1,2,4,8,16,32,64")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/qdrant-cluster"))
    a = ap.parse_args()
    subprocess.run(["rm", "-rf", a.work])
    os.makedirs(a.work)
    res = {"schema": "searchd.bench.qdrant_cluster.v2", "rate": a.rate, "duration_s": a.duration,
           "ef": a.ef, "ramp": a.ramp}
    serve = None
    nodes = []
    try:
        # 1. One node (cluster mode off), the same data: the single-node ramp of this run.
        solo = Node(a.qdrant, os.path.join(a.work, "solo"), 0)
        solo.start_plain()
        nodes.append(solo)
        t = time.time()
        subprocess.run([a.bin, "ingest", "--docs", a.coll, "--to", f"qdrant://127.0.0.1:{solo.grpc}/gcide",
                        "--recreate", "--m", "16", "--ef-construction", "200"], check=True)
        res["one_node_ingest_to_green_s"] = time.time() - t
        serve, port = serve_front(a, solo.grpc)
        res["one_node"] = ramp(a, port, os.path.join(a.work, "ramp-1node.json"))
        serve.kill(); serve.wait(); serve = None
        solo.kill(); nodes.remove(solo)
        print("1 node:", json.dumps(res["one_node"]["sustainable_qps"]), flush=True)

        # 2. Three nodes, 2 shards x 2 replicas.
        n1 = Node(a.qdrant, a.work, 1)
        n1.start()
        nodes.append(n1)
        for i in (2, 3):
            n = Node(a.qdrant, a.work, i, bootstrap=n1.p2p)
            n.start()
            nodes.append(n)
        res["cluster_formed_s"] = wait(
            lambda: len(get_json(f"http://127.0.0.1:{n1.http}/cluster")["result"]["peers"]) == 3, "3 peers")
        t = time.time()
        subprocess.run([a.bin, "ingest", "--docs", a.coll, "--to", f"qdrant://127.0.0.1:{n1.grpc}/gcide",
                        "--shards", "2", "--replicas", "2", "--recreate", "--m", "16",
                        "--ef-construction", "200"], check=True)
        res["three_nodes_ingest_to_green_s"] = time.time() - t
        res["replicas_before"] = replicas(n1.http)
        serve, port = serve_front(a, n1.grpc)
        res["three_nodes"] = ramp(a, port, os.path.join(a.work, "ramp-3nodes.json"))
        print("3 nodes:", json.dumps(res["three_nodes"]["sustainable_qps"]), flush=True)

        # 3. A replica's loss under open-loop load: node 3 SIGKILLed at 1/3, restarted at 2/3.
        out = os.path.join(a.work, "load.json")
        load = subprocess.Popen([a.bin, "load", "--url", f"http://127.0.0.1:{port}", "--rate", str(a.rate),
                                 "--warmup", "2s", "--duration", f"{a.duration}s", "--query-count", "2000",
                                 "--ef", str(a.ef), "--json", out, "--quiet"])
        t_measure = time.time() + 2
        time.sleep(2 + a.duration / 3)
        nodes[2].kill()
        t_kill = time.time()
        time.sleep(a.duration / 3)
        t_back = time.time()
        nodes[2].start()
        res["node3_http_ready_after_restart_s"] = time.time() - t_back
        # Recovery: every replica Active again, as node 1 sees it.
        try:
            res["all_replicas_active_after_restart_s"] = wait(
                lambda: (lambda x: x[0] == x[1] and x[1] > 0)(replicas(n1.http)), "replicas active", 180) \
                + res["node3_http_ready_after_restart_s"]
        except SystemExit as e:
            res["all_replicas_active_after_restart_s"] = None
            res["recovery_error"] = str(e)
        load.wait()
        rep = json.load(open(out))
        st = rep["steps"][0]
        kill_s, back_s = t_kill - t_measure, t_back - t_measure
        per = st.get("per_second") or []
        def errs(lo, hi):
            return sum(p["errors"] for p in per if lo <= p["t"] < hi)
        res["load"] = {"qps": st["qps"], "requests": st["requests"], "ok": st["ok"], "errors": st["errors"],
                       "p99_ms": st["latency_ms"]["p99"], "late": st.get("late"), "dropped": st.get("dropped"),
                       "first_errors": st.get("first_errors"),
                       "errors_before_kill": errs(0, int(kill_s)),
                       "errors_while_down": errs(int(kill_s), int(back_s) + 1),
                       "errors_after_restart": errs(int(back_s) + 1, 10**9),
                       "kill_at_s": kill_s, "restart_at_s": back_s,
                       "per_second": per}
        res["replicas_after"] = replicas(n1.http)
        res["cluster_after"] = get_json(f"http://127.0.0.1:{n1.http}/collections/gcide/cluster").get("result")
        print(json.dumps({k: v for k, v in res.items() if k not in ("cluster_after",)}, indent=1)[:3000])
    finally:
        if serve:
            serve.kill()
        for n in nodes:
            if n.proc:
                n.proc.kill()
    with open(a.out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    write_md(res, a)


def write_md(r, a):
    one, three, ld = r["one_node"], r["three_nodes"], r["load"]
    lines = ["# searchd over a Qdrant cluster: 1 node vs 3 nodes, and a replica killed under load (dev-gcide-50k)", "",
             f"`python3 bench/qdrant_cluster.py`: 50,000 x 384 vectors, HNSW m=16 ef_construct=200, ef {r['ef']}; "
             "`searchd serve --backend qdrant` against node 1; closed-loop ramp "
             f"{r['ramp']} (3 s + 8 s per step, p99 <= 100 ms). **Caveat: all nodes, searchd and the load "
             "generator share this machine's 2 cores, so QPS here says nothing about scaling out**; it shows the "
             "cost of fan-out on one box and what happens when a replica dies.", "",
             "| setup | ingest to green s | sustainable QPS | at conc. | p99 ms |", "|---|---|---|---|---|",
             f"| 1 node | {r['one_node_ingest_to_green_s']:.1f} | {one['sustainable_qps']:.0f} | {one['at_concurrency']} | {one['p99_ms'] or 0:.1f} |",
             f"| 3 nodes, 2 shards x 2 replicas | {r['three_nodes_ingest_to_green_s']:.1f} | {three['sustainable_qps']:.0f} | {three['at_concurrency']} | {three['p99_ms'] or 0:.1f} |",
             "", f"3 nodes / 1 node: **{three['sustainable_qps'] / max(one['sustainable_qps'], 1e-9):.2f}x** on shared cores.", "",
             f"## Node 3 SIGKILLed under {r['rate']:g} searches/s (open loop, {r['duration_s']} s)", "",
             f"Killed at {ld['kill_at_s']:.1f} s, restarted at {ld['restart_at_s']:.1f} s of the measured window. "
             f"{ld['ok']:,} of {ld['requests']:,} requests ok; errors before the kill {ld['errors_before_kill']}, "
             f"**while node 3 was down {ld['errors_while_down']}**, after its restart {ld['errors_after_restart']}; "
             f"errors by kind {json.dumps({k: v for k, v in ld['errors'].items() if v})}; p99 {ld['p99_ms']:.1f} ms. "
             f"Node 3 answered /readyz {r['node3_http_ready_after_restart_s']:.1f} s after its restart; every replica "
             f"was Active again (as node 1 sees the collection) after "
             + (f"**{r['all_replicas_active_after_restart_s']:.1f} s**." if r.get('all_replicas_active_after_restart_s') is not None
                else f"(not within 180 s: {r.get('recovery_error')}).")
             + f" Replicas active before / after: {r['replicas_before']} / {r['replicas_after']}.", ""]
    if ld.get("first_errors"):
        lines += [f"First error of each kind: `{json.dumps(ld['first_errors'])[:600]}`", ""]
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
