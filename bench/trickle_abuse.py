#!/usr/bin/env python3
"""Many connections trickling 1 MiB bodies at `searchd serve` (issue 14, D1/D2/D4).

Python 3 standard library only. Starts `searchd serve` on a small synthetic index, measures
a baseline (RSS, QPS of a well-behaved search client), then opens up to --conns connections
(raising the open-files limit to its hard limit; fewer if the hard limit is lower) that each
send a POST /search head announcing a 1 MiB body and then trickle it (--chunk bytes every
--every seconds), reconnecting when the server closes them. Throughout, a prober opens a new
connection for GET /health every 100 ms and times it, a search client keeps sending
{"qidx": i} on keep-alive connections, and the server's RSS is sampled. After --attack-s the
attack stops; RSS is sampled for --after-s more.

  python3 bench/trickle_abuse.py --searchd target/release/searchd --out bench/results/trickle-abuse
"""

import argparse
import errno
import http.client
import json
import multiprocessing
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class Searcher(threading.Thread):
    """A well-behaved client: keep-alive, one request at a time, honours Retry-After."""

    def __init__(self, port, rows, stop):
        super().__init__(daemon=True)
        self.port, self.rows, self.stop = port, rows, stop
        self.ok = 0
        self.errors = {}
        self.window = []  # (time, ok) per answer

    def run(self):
        conn = None
        i = 0
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                body = json.dumps({"qidx": i % self.rows, "k": 10})
                conn.request("POST", "/search", body, {"content-type": "application/json"})
                r = conn.getresponse()
                r.read()
                if r.status == 200:
                    self.ok += 1
                    self.window.append(time.monotonic())
                else:
                    self.errors[str(r.status)] = self.errors.get(str(r.status), 0) + 1
                    if r.getheader("connection", "").lower() == "close":
                        conn.close()
                        conn = None
                    if r.status == 503:
                        time.sleep(float(r.getheader("retry-after", "1")) / 10)
            except Exception as e:  # noqa: BLE001 - counted, then reconnect
                k = type(e).__name__
                self.errors[k] = self.errors.get(k, 0) + 1
                if conn is not None:
                    conn.close()
                conn = None
            i += 1

    def qps_between(self, t0, t1):
        n = sum(1 for t in self.window if t0 <= t < t1)
        return n / max(t1 - t0, 1e-9)


class Prober(threading.Thread):
    """GET /health on a new connection every 100 ms; records latency or failure."""

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.port, self.stop = port, stop
        self.samples = []  # (t, ms or None, status)

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                c.close()
                self.samples.append((t, (time.monotonic() - t) * 1e3, r.status))
            except Exception as e:  # noqa: BLE001
                self.samples.append((t, None, type(e).__name__))
            time.sleep(max(0.0, 0.1 - (time.monotonic() - t)))


class Attacker(multiprocessing.Process):
    """Up to `conns` non-blocking sockets trickling 1 MiB bodies; reconnects closed ones.

    A process of its own (not a thread of the measuring process: its busy loop would hold
    the GIL and starve the prober and the search clients, charging the client's own stall to
    the server), at a lower priority (`nice`), standing in for an attacker on another machine:
    on this 2-core box it would otherwise take a core from the server under test."""

    HEAD = (b"POST /search HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: 1048576\r\n\r\n")

    def __init__(self, port, conns, chunk, every, stop, nice):
        super().__init__(daemon=True)
        self.port, self.conns, self.chunk, self.every, self.stop = port, conns, chunk, every, stop
        self.nice = nice
        self._open = multiprocessing.Value("q", 0)
        self._peak_open = multiprocessing.Value("q", 0)
        self._connects = multiprocessing.Value("q", 0)
        self._refused_503 = multiprocessing.Value("q", 0)
        self._closed_by_server = multiprocessing.Value("q", 0)
        self._errors = multiprocessing.Queue()
        self.connect_errors = {}

    peak_open = property(lambda self: self._peak_open.value)
    connects = property(lambda self: self._connects.value)
    refused_503 = property(lambda self: self._refused_503.value)
    closed_by_server = property(lambda self: self._closed_by_server.value)

    def join(self, timeout=None):
        try:
            self.connect_errors = self._errors.get(timeout=30)
        except Exception:
            pass
        super().join(timeout)

    def run(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        if self.nice == "idle":
            # SCHED_IDLE: runs only on CPU nobody else wants, the nearest a shared box gets
            # to an attacker on another machine (nice 10 still took ~0.4 of a core here).
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        elif self.nice:
            os.nice(int(self.nice))
        self.open = self.peak_open_ = self.connects_ = self.refused_503_ = self.closed_ = 0
        try:
            self._loop()
        finally:
            self._errors.put(self.connect_errors)

    def _sync(self):
        self._open.value = self.open
        self._peak_open.value = self.peak_open_
        self._connects.value = self.connects_
        self._refused_503.value = self.refused_503_
        self._closed_by_server.value = self.closed_

    def _loop(self):
        sel = selectors.DefaultSelector()
        socks = {}  # fd -> [sock, sent, next_time, connected]
        payload = b" " * self.chunk
        last_fill = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            # Open (or reopen) connections, a few hundred per pass.
            if len(socks) < self.conns and now - last_fill > 0.02:
                last_fill = now
                for _ in range(min(500, self.conns - len(socks))):
                    s = socket.socket()
                    s.setblocking(False)
                    try:
                        s.connect(("127.0.0.1", self.port))
                    except BlockingIOError:
                        pass
                    except OSError as e:
                        self.connect_errors[errno.errorcode.get(e.errno, str(e.errno))] = \
                            self.connect_errors.get(errno.errorcode.get(e.errno, str(e.errno)), 0) + 1
                        s.close()
                        break
                    socks[s.fileno()] = [s, 0, now, False]
                    sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
                    self.connects_ += 1
            # Readable: the server answered (503) or closed; writable: connected.
            for key, ev in sel.select(timeout=0.01):
                st = socks.get(key.fd)
                if st is None:
                    continue
                s = st[0]
                if ev & selectors.EVENT_READ:
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                    if data.startswith(b"HTTP/1.1 503"):
                        self.refused_503_ += 1
                    self.closed_ += 1
                    sel.unregister(s)
                    s.close()
                    del socks[key.fd]
                    continue
                if ev & selectors.EVENT_WRITE and not st[3]:
                    st[3] = True
                    try:
                        s.send(self.HEAD)
                    except OSError:
                        pass
                    sel.modify(s, selectors.EVENT_READ)
            # Trickle.
            now = time.monotonic()
            for fd, st in list(socks.items()):
                if st[3] and now >= st[2]:
                    st[2] = now + self.every
                    if st[1] + self.chunk < 1048576:
                        try:
                            st[1] += st[0].send(payload)
                        except OSError:
                            pass
            self.open = len(socks)
            self.peak_open_ = max(self.peak_open_, self.open)
            self._sync()
        for st in socks.values():
            st[0].close()
        self.open = 0
        self._sync()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--searchd", default="target/release/searchd")
    ap.add_argument("--examples", default=None,
                    help="use searchd-server's examples in this directory (serve, make_index) "
                         "instead of the searchd binary")
    ap.add_argument("--out", default="bench/results/trickle-abuse")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--conns", type=int, default=20000)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--baseline-s", type=float, default=15)
    ap.add_argument("--attack-s", type=float, default=60)
    ap.add_argument("--after-s", type=float, default=30)
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--attacker-nice", default="idle",
                    help="the attacker process's priority: `idle` (SCHED_IDLE, default) or a "
                    "nice value; it stands in for another machine")
    ap.add_argument("--serve-args", default="", help="extra `searchd serve` flags")
    ap.add_argument("--no-heap-tuning", action="store_true",
                    help="serve with SEARCHD_NO_HEAP_TUNING=1 (no mmap threshold, no malloc_trim)")
    ap.add_argument("--work", default=None, help="reuse this directory for data and index")
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    conns = min(a.conns, hard - 200)
    work = a.work or tempfile.mkdtemp(prefix="trickle-")
    idx = os.path.join(work, "idx")
    if not os.path.exists(idx):
        os.makedirs(work, exist_ok=True)
        if a.examples:
            subprocess.run([os.path.join(a.examples, "make_index"), work, str(a.n), str(a.dim)],
                           check=True, capture_output=True)
        else:
            subprocess.run([a.searchd, "dataset", "synth", "--n", str(a.n), "--dim", str(a.dim),
                            "--queries", "1000", "--out", work], check=True, capture_output=True)
            subprocess.run([a.searchd, "build", "--base", os.path.join(work, "base.npy"),
                            "--out", idx], check=True, capture_output=True)
    serve = [os.path.join(a.examples, "serve")] if a.examples else [a.searchd, "serve"]
    env = dict(os.environ)
    if a.no_heap_tuning:
        env["SEARCHD_NO_HEAP_TUNING"] = "1"
    port = free_port()
    log = open(os.path.join(work, "serve.log"), "w")
    srv = subprocess.Popen(serve + ["--index", idx, "--queries",
                            os.path.join(work, "queries.npy"), "--addr", f"127.0.0.1:{port}"]
                           + a.serve_args.split(), stderr=log, env=env)
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/ready")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        time.sleep(0.05)
    idx_bytes = sum(os.path.getsize(os.path.join(idx, f)) for f in os.listdir(idx))

    stop_all = threading.Event()
    stop_attack = multiprocessing.Event()
    searchers = [Searcher(port, 1000, stop_all) for _ in range(a.searchers)]
    prober = Prober(port, stop_all)
    for t in searchers:
        t.start()
    prober.start()
    rss = []  # (t, bytes)

    def sample(until):
        while time.monotonic() < until:
            rss.append((time.monotonic(), rss_bytes(srv.pid)))
            time.sleep(0.25)

    t0 = time.monotonic()
    sample(t0 + a.baseline_s)
    base_rss = pct([r for t, r in rss if t > t0 + a.baseline_s / 3], 0.5)
    t1 = time.monotonic()
    attacker = Attacker(port, conns, a.chunk, a.every, stop_attack, a.attacker_nice)
    attacker.start()
    sample(t1 + a.attack_s)
    open_during = attacker.peak_open
    stop_attack.set()
    attacker.join()
    t2 = time.monotonic()
    sample(t2 + a.after_s)
    t3 = time.monotonic()
    stop_all.set()
    for t in searchers:
        t.join(timeout=15)
    prober.join(timeout=10)
    metrics = ""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/metrics")
        metrics = c.getresponse().read().decode()
    except OSError:
        pass
    srv.terminate()
    srv.wait(timeout=60)

    def health(t_from, t_to):
        xs = [s for s in prober.samples if t_from <= s[0] < t_to]
        ok = [ms for _, ms, st in xs if st == 200]
        return {"probes": len(xs), "ok": len(ok), "failed": len(xs) - len(ok),
                "p50_ms": pct(ok, 0.5), "p99_ms": pct(ok, 0.99), "max_ms": max(ok) if ok else None,
                "over_50ms": sum(1 for x in ok if x > 50)}

    qps_base = sum(s.qps_between(t0 + 2, t1) for s in searchers)
    qps_attack = sum(s.qps_between(t1 + 2, t2) for s in searchers)
    rss_attack = [r for t, r in rss if t1 <= t < t2]
    rss_end = pct([r for t, r in rss if t >= t3 - 2], 0.5)
    counters = {}
    for line in metrics.splitlines():
        for name in ("searchd_refused_connections_total", "searchd_refused_over_budget_total",
                     "searchd_heap_trims_total"):
            if line.startswith(name + " "):
                counters[name] = float(line.split()[-1])
    res = {
        "config": {"n": a.n, "dim": a.dim, "conns_asked": a.conns, "conns_possible": conns,
                   "nofile_hard": hard, "chunk": a.chunk, "every_s": a.every,
                   "attack_s": a.attack_s, "after_s": a.after_s, "searchers": a.searchers,
                   "serve_args": a.serve_args, "attacker_nice": a.attacker_nice, "heap_tuning": not a.no_heap_tuning,
                   "server": " ".join(serve),
                   "cores": os.cpu_count()},
        "index_bytes": idx_bytes,
        "rss": {"baseline": base_rss, "peak_attack": max(rss_attack) if rss_attack else None,
                "over_baseline_peak": (max(rss_attack) - base_rss) if rss_attack else None,
                "end": rss_end, "end_vs_baseline": rss_end / base_rss if base_rss else None,
                "series": [(round(t - t0, 2), r) for t, r in rss]},
        "attacker": {"peak_open": open_during, "connects": attacker.connects,
                     "answered_503": attacker.refused_503,
                     "closed_by_server": attacker.closed_by_server,
                     "connect_errors": attacker.connect_errors},
        "health": {"baseline": health(t0, t1), "attack": health(t1, t2), "after": health(t2, t3)},
        "search": {"qps_baseline": qps_base, "qps_attack": qps_attack,
                   "ratio": qps_attack / qps_base if qps_base else None,
                   "errors": [s.errors for s in searchers]},
        "server_counters": counters,
    }
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    summary = {k: v for k, v in res.items() if k != "rss"}
    summary["rss"] = {k: v for k, v in res["rss"].items() if k != "series"}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    sys.exit(main())
