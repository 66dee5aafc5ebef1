#!/usr/bin/env python3
"""A three-node Qdrant cluster on loopback (distinct ports, p2p, 2 shards x 2 replicas) with
searchd in front: one node is killed under load and brought back.

  1. three nodes (`QDRANT__CLUSTER__ENABLED=true`, the first with `--uri`, the others with
     `--bootstrap`), storage under the work dir; wait until /cluster shows 3 peers;
  2. `searchd ingest --docs COLL --to qdrant://node1/gcide --shards 2 --replicas 2`
     (COLL: the local collection made by bench/qdrant_gcide.py);
  3. `searchd serve --backend qdrant` against node 1, `searchd load --rate R` for
     --duration; node 3 is SIGKILLed at 1/3 of it and restarted at 2/3;
  4. failed requests by kind, and when node 3 is back in /cluster; the figures go to
     bench/results/qdrant-cluster.json.

The three nodes and searchd share this machine's cores: QPS here says nothing about
scaling, only about failures during a replica's loss.
"""
import argparse
import json
import os
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

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/searchd"))
    ap.add_argument("--qdrant", default=os.environ.get("QDRANT_BIN", "/work/shared/qdrant/qdrant"))
    ap.add_argument("--work", default="/tmp/searchd-qdrant-cluster")
    ap.add_argument("--coll", default="/tmp/searchd-qdrant-gcide/coll")
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--duration", type=int, default=45)
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/qdrant-cluster.json"))
    a = ap.parse_args()
    subprocess.run(["rm", "-rf", a.work])
    os.makedirs(a.work)
    n1 = Node(a.qdrant, a.work, 1)
    nodes = [n1]
    serve = None
    res = {"schema": "searchd.bench.qdrant_cluster.v1", "rate": a.rate, "duration_s": a.duration}
    try:
        n1.start()
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
        res["ingest_to_green_s"] = time.time() - t
        port = free_port()
        serve = subprocess.Popen([a.bin, "serve", "--backend", "qdrant", "--qdrant-url",
                                  f"http://127.0.0.1:{n1.grpc}", "--qdrant-collection", "gcide",
                                  "--queries", f"{DATA}/queries.f16.npy", "--ef", str(a.ef),
                                  "--addr", f"127.0.0.1:{port}", "--log", "warn"])
        wait(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2).status == 200, "searchd")
        out = os.path.join(a.work, "load.json")
        load = subprocess.Popen([a.bin, "load", "--url", f"http://127.0.0.1:{port}", "--rate", str(a.rate),
                                 "--warmup", "2s", "--duration", f"{a.duration}s", "--queries", "2000",
                                 "--ef", str(a.ef), "--json", out, "--quiet"])
        events = []
        time.sleep(2 + a.duration / 3)
        nodes[2].kill()
        events.append(("killed node 3", time.time()))
        time.sleep(a.duration / 3)
        t_back = time.time()
        nodes[2].start()
        events.append(("restarted node 3", time.time()))
        load.wait()
        rep = json.load(open(out))
        st = rep["steps"][0]
        res["load"] = {"qps": st["qps"], "requests": st["requests"], "ok": st["ok"], "errors": st["errors"],
                       "p99_ms": st["latency_ms"]["p99"], "late": st.get("late"), "dropped": st.get("dropped")}
        res["node3_ready_after_restart_s"] = time.time() - t_back if False else None
        info = get_json(f"http://127.0.0.1:{n1.http}/collections/gcide/cluster")
        res["cluster_after"] = info.get("result")
        res["events"] = events
        print(json.dumps(res, indent=1))
    finally:
        if serve:
            serve.kill()
        for n in nodes:
            if n.proc:
                n.proc.kill()
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
