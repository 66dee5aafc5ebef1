#!/usr/bin/env python3
"""The aggregation bomb of issue 27 ("Exposed safely") and its variants against `searchd serve`.

    python3 bench/agg_bomb.py [--copies 4] [--rounds 3] [--burst 8] [--storm-s 15]

Issue text: a 115 KB `_search` with 2,000 `terms` aggregations of size 10,000 each answered
200 with a 169 MB body after 19.6 s (deadline 1 s), RSS 37 MB -> 4.19 GB and stayed at 4.0 GB,
`/health` timed out three times in a row. Acceptance measured here: "a 4xx or a bounded reply
within the deadline, RSS growth < 256 MB during and back within 10% after, `/health` p99 < 50 ms
meanwhile".

Data: the 50,000 dev-gcide-50k passages (../shared/datasets/dev-gcide-50k/passages.jsonl)
repeated --copies times (default 4: 200,000 documents) with synthetic fields: `uid` (keyword,
unique per document, so a `terms` aggregation over it walks 200,000 values), `headword`
(keyword, the passage's headword, ~30k distinct), `tags` (array of 3 keywords of 20,000),
`color` (keyword, 12), `price` (float), `stock` (integer); stored text is the passage (so
`_source` hits weigh what real documents weigh). Vectors are 16-d deterministic pseudo-random
(the bench is about aggregations: small vectors keep the mapped vector file out of RSS, so
the baseline is the server's own memory and the 10% check is not loosened by it). Ingested
once (`--index flat --no-lexical`) under bench/data/agg-bomb/.

Server: `searchd serve --collection bomb=DIR --timeout-ms 1000`, every other limit at its
default (--max-buckets 65,536, --max-reply-bytes 64 MiB, --body-limit 1 MiB,
--max-pending-bytes 64 MiB, threads = cores).

Timeline: warm-up (--warmup-s of ordinary traffic on every route and field: searches with a
facet, /facet size 10, /count, /scroll pages of 100, `_search` with small aggs), --idle-s idle
(the RSS baseline is the median of the last 3 s of it: the server after it has served normal
traffic, with its field indexes, stored-field pages and per-thread allocator arenas in place),
then the bombs: each variant --rounds times one after the other and once as a burst of
--burst in parallel, then a storm of --burst clients sending random variants for --storm-s;
then --after-s with no traffic. Meanwhile a separate process sends `GET /health` every 20 ms
on a new connection (timeout 1 s: a timeout or error is a failure and counts as an infinite
latency in the percentiles), and a thread samples VmRSS/RssAnon/RssFile of the server every
50 ms.

Checks (exit 1 and a line per failed check):
  replies   every bomb reply is a 4xx, or a 200/503/504 (bounded: at most --max-reply-bytes)
            within --timeout-ms + --slack-ms of being sent; no connection errors, no 5xx other
            than 503 overloaded / 504 deadline_exceeded
  rss_peak  peak VmRSS during the bombs - baseline < 256 MiB
  rss_after VmRSS --after-s (30 s) after the last bomb <= 1.10 x baseline
  health    /health p99 < 50 ms during the bombs (failures count as infinite)
Exit 0 when every check passes, 1 when one fails, 2 on a setup error.
Writes bench/results/agg-bomb.{json,md} (--out). Standard library only.
"""

import argparse
import http.client
import json
import multiprocessing as mp
import os
import platform
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT.parent / "shared" / "datasets" / "dev-gcide-50k"
NAME = "bomb"
DIM = 16
COLORS = ["red", "green", "blue", "black", "white", "grey", "orange", "yellow", "purple",
          "pink", "brown", "cyan"]
MIB = 1 << 20


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def fin(x):
    """JSON-safe: infinities (failed probes) as None."""
    return None if x is None or x == float("inf") else round(x, 3)


# ----------------------------------------------------------------------------- data


def write_npy_f32(path: Path, rows: int, dim: int, seed: int) -> None:
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, dim)
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    rng = random.Random(seed)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        fmt = "<%df" % dim
        for _ in range(rows):
            v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
            n = sum(x * x for x in v) ** 0.5 or 1.0
            f.write(struct.pack(fmt, *[x / n for x in v]))


def prepare(searchd: Path, work: Path, copies: int) -> Path:
    coll = work / f"coll-{copies}"
    if (coll / ".agg-bomb-done").exists():
        return coll
    work.mkdir(parents=True, exist_ok=True)
    passages = [json.loads(l) for l in open(DATA / "passages.jsonl")]
    n = len(passages) * copies
    docs = work / "docs.jsonl"
    rng = random.Random(27)
    log(f"writing {n} documents")
    with open(docs, "w") as f:
        for c in range(copies):
            for p in passages:
                i = c * len(passages) + p["id"]
                f.write(json.dumps({
                    "id": i,
                    "text": p["text"],
                    "headword": p["headword"],
                    "uid": f"user-{i:08d}-{(i * 2654435761) % (1 << 32):08x}",
                    "tags": [f"t{rng.randrange(20000):05d}" for _ in range(3)],
                    "color": COLORS[rng.randrange(len(COLORS))],
                    "price": round(rng.uniform(1.0, 1000.0), 2),
                    "stock": rng.randrange(500),
                }) + "\n")
    vec = work / "vectors.npy"
    write_npy_f32(vec, n, DIM, 27)
    log("ingesting (flat, no lexical index)")
    if coll.exists():
        subprocess.run(["rm", "-rf", str(coll)], check=True)
    r = subprocess.run([str(searchd), "ingest", "--docs", str(docs), "--vectors", str(vec),
                        "--out", str(coll), "--index", "flat", "--no-lexical",
                        "--field-type", "uid=keyword,headword=keyword,tags=keyword,"
                        "color=keyword,price=float,stock=integer"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"ingest failed ({r.returncode}): {r.stderr[-3000:]}")
    (coll / ".agg-bomb-done").write_text("ok\n")
    docs.unlink()
    vec.unlink()
    return coll


# ----------------------------------------------------------------------------- server


class Server:
    def __init__(self, searchd: Path, coll: Path, port: int, timeout_ms: int, logf: Path,
                 extra: list):
        self.cmd = [str(searchd), "serve", "--collection", f"{NAME}={coll}", "--addr",
                    f"127.0.0.1:{port}", "--timeout-ms", str(timeout_ms)] + extra
        self.logf = open(logf, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.logf, stderr=self.logf)
        self.port = port

    def wait_ready(self) -> None:
        t = time.time()
        while time.time() - t < 120:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited: {self.proc.returncode}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                c.request("GET", "/ready")
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("server never ready")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.logf.close()


def proc_status(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "VmHWM", "Threads"):
                out[k] = int(v.split()[0]) * (1024 if k != "Threads" else 1)
    return out


def cpu_jiffies(pid: int) -> tuple[int, int]:
    """(busy jiffies of the whole machine, jiffies of process `pid`)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = sum(v) - v[3] - (v[4] if len(v) > 4 else 0)  # minus idle and iowait
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return busy, int(st[11]) + int(st[12])


class RssSampler(threading.Thread):
    def __init__(self, pid: int, every: float, stop: threading.Event):
        super().__init__(daemon=True)
        self.pid, self.every, self.stop = pid, every, stop
        self.samples = []  # (t, rss, anon, file)

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            try:
                s = proc_status(self.pid)
                self.samples.append((t, s["VmRSS"], s.get("RssAnon", 0), s.get("RssFile", 0)))
            except OSError:
                return
            time.sleep(max(0.0, self.every - (time.monotonic() - t)))

    def between(self, t0, t1):
        return [s for s in self.samples if t0 <= s[0] <= t1]


def health_prober(port: int, every: float, timeout: float, stop, q) -> None:
    """A process of its own (not a thread of the process sending the bombs, whose GIL would
    delay it): GET /health on a new connection every `every` seconds."""
    samples = []
    nxt = time.monotonic()
    while not stop.is_set():
        t = time.monotonic()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            c.close()
            ms = (time.monotonic() - t) * 1e3
            samples.append((t, ms if r.status == 200 else None, r.status))
        except Exception as e:  # noqa: BLE001 - a failed probe is a sample
            samples.append((t, None, type(e).__name__))
        nxt += every
        time.sleep(max(0.0, nxt - time.monotonic()))
        if nxt < time.monotonic() - every:
            nxt = time.monotonic()
    q.put(samples)


# ----------------------------------------------------------------------------- requests


def send(port: int, method: str, path: str, body: bytes | None, timeout: float = 120) -> dict:
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = {"content-type": "application/json"} if body is not None else {}
        c.request(method, path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        ms = (time.monotonic() - t) * 1e3
        code = None
        if r.status >= 400:
            try:
                code = json.loads(data)["error"]["code"]
            except Exception:  # noqa: BLE001
                code = "?"
        return {"t": t, "status": r.status, "code": code, "bytes": len(data), "ms": ms}
    except Exception as e:  # noqa: BLE001 - recorded as a failed reply
        return {"t": t, "status": None, "code": type(e).__name__, "bytes": 0,
                "ms": (time.monotonic() - t) * 1e3}
    finally:
        c.close()


def aggs(n: int, size: int, fields=("uid",)) -> dict:
    return {f"a{i}": {"terms": {"field": fields[i % len(fields)], "size": size}} for i in range(n)}


def variants(copies: int) -> list:
    """(name, what, method, path, body): the bomb of the issue and its variants."""
    es = f"/{NAME}/_search"
    col = f"/collections/{NAME}"
    n = 50_000 * copies
    rng = random.Random(5)
    many_uids = [f"user-{i:08d}-{(i * 2654435761) % (1 << 32):08x}"
                 for i in rng.sample(range(n), 30_000)]
    hi = ("uid", "headword", "tags")
    v = [
        ("bomb_2000x10000", "the issue's bomb: 2,000 terms aggs of size 10,000 (20M buckets)",
         "POST", es, {"size": 0, "aggs": aggs(2000, 10_000, ("color",))}),
        ("bomb_200x10000", "the issue's smaller one: 200 terms aggs of size 10,000 (2M buckets)",
         "POST", es, {"size": 0, "aggs": aggs(200, 10_000, ("color",))}),
        ("single_terms_10M", "one terms agg of size 10,000,000 on the unique field",
         "POST", es, {"size": 0, "aggs": aggs(1, 10_000_000)}),
        ("nested_terms", "terms within terms (sub-aggregations multiplying buckets)",
         "POST", es, {"size": 0, "aggs": {"by_uid": {
             "terms": {"field": "uid", "size": 10_000},
             "aggs": {"by_tag": {"terms": {"field": "tags", "size": 10_000},
                                 "aggs": {"by_hw": {"terms": {"field": "headword",
                                                              "size": 10_000}}}}}}}}),
        ("under_cap_2000x32", "2,000 terms aggs of size 32 over high-cardinality fields "
         "(64,000 buckets: under --max-buckets, real work; the deadline must stop it)",
         "POST", es, {"size": 0, "aggs": aggs(2000, 32, hi)}),
        ("under_cap_6553x10", "6,553 terms aggs of size 10 (65,530 buckets, a 300 KB body)",
         "POST", es, {"size": 0, "aggs": aggs(6553, 10, hi)}),
        ("under_cap_6x10000", "6 terms aggs of size 10,000 on the 200k-value field "
         "(60,000 buckets, a multi-MB reply)",
         "POST", es, {"size": 0, "aggs": aggs(6, 10_000, ("uid",))}),
        ("hits_10000_source", "_search size 10,000 with _source and 6 aggs of 10,000",
         "POST", es, {"size": 10_000, "_source": True, "aggs": aggs(6, 10_000, hi)}),
        ("hits_from_10M", "_search from 10,000,000", "POST", es,
         {"from": 10_000_000, "size": 10}),
        ("hits_size_10M", "_search size 10,000,000", "POST", es, {"size": 10_000_000}),
        ("facet_size_10M", "/facet size 10,000,000", "POST", col + "/facet",
         {"field": "uid", "size": 10_000_000}),
        ("facet_size_10000", "/facet size 10,000 on the unique field (the largest allowed)",
         "POST", col + "/facet", {"field": "uid", "size": 10_000}),
        ("scroll_size_10M", "/scroll size 10,000,000", "POST", col + "/scroll",
         {"size": 10_000_000, "sort": [{"price": "desc"}], "fields": True}),
        ("scroll_size_10000", "/scroll size 10,000, all fields, sorted by price, with total",
         "POST", col + "/scroll",
         {"size": 10_000, "sort": [{"price": "desc"}], "fields": True, "total": True}),
        ("search_facets_2000x32", "/search (kNN k=1000) with 2,000 facets of size 32",
         "POST", col + "/search",
         {"id": 7, "k": 1000, "fields": True,
          "facets": [{"field": hi[i % 3], "size": 32} for i in range(2000)]}),
        ("es_terms_filter_30k", "_search filtered by terms of 30,000 uids, size 10,000, "
         "_source, and 6 aggs of 10,000 (~700 KB body)",
         "POST", es, {"size": 10_000, "_source": True,
                      "query": {"bool": {"filter": [{"terms": {"uid": many_uids}}]}},
                      "aggs": aggs(6, 10_000, hi)}),
    ]
    return [(a, b, c, d, json.dumps(e, separators=(",", ":")).encode()) for a, b, c, d, e in v]


def warmup(port: int, seconds: float, copies: int) -> dict:
    """Ordinary traffic on every route and field, two clients."""
    es = f"/{NAME}/_search"
    col = f"/collections/{NAME}"
    stop = time.monotonic() + seconds
    counts = {}
    lock = threading.Lock()

    def client(seed):
        rng = random.Random(seed)
        while time.monotonic() < stop:
            i = rng.randrange(50_000 * copies)
            k = rng.randrange(6)
            if k == 0:
                r = send(port, "POST", col + "/search",
                         json.dumps({"id": i, "k": 10, "fields": True, "facets": ["color"]}).encode())
            elif k == 1:
                f = rng.choice(["uid", "headword", "tags", "color"])
                r = send(port, "POST", col + "/facet", json.dumps(
                    {"field": f, "size": 10, "filter": {"range": {"price": {"lt": 500}}}}).encode())
            elif k == 2:
                r = send(port, "POST", col + "/count", json.dumps(
                    {"filter": {"term": {"color": rng.choice(COLORS)}}}).encode())
            elif k == 3:
                r = send(port, "POST", col + "/scroll", json.dumps(
                    {"size": 100, "sort": [{"price": "desc"}], "fields": True,
                     "filter": {"range": {"stock": {"gte": rng.randrange(400)}}}}).encode())
            elif k == 4:
                r = send(port, "POST", es, json.dumps(
                    {"size": 10, "query": {"term": {"color": rng.choice(COLORS)}},
                     "aggs": {"t": {"terms": {"field": "tags", "size": 10}},
                              "h": {"terms": {"field": "headword", "size": 10}}}}).encode())
            else:
                r = send(port, "POST", es, json.dumps(
                    {"size": 20, "sort": [{"stock": "asc"}], "_source": True}).encode())
            with lock:
                key = str(r["status"])
                counts[key] = counts.get(key, 0) + 1

    ts = [threading.Thread(target=client, args=(s,)) for s in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return counts


def run_parallel(port, items, n):
    """Send `items` ((variant, method, path, body), ...) on `n` threads; results in order."""
    out = [None] * len(items)
    idx = iter(range(len(items)))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next(idx, None)
            if i is None:
                return
            name, method, path, body = items[i]
            r = send(port, method, path, body)
            r["variant"] = name
            r["mode"] = "burst"
            out[i] = r

    ts = [threading.Thread(target=worker) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def storm(port, vs, n, seconds):
    stop = time.monotonic() + seconds
    out = []
    lock = threading.Lock()

    def worker(seed):
        rng = random.Random(seed)
        while time.monotonic() < stop:
            name, _, method, path, body = rng.choice(vs)
            r = send(port, method, path, body)
            r["variant"] = name
            r["mode"] = "storm"
            with lock:
                out.append(r)

    ts = [threading.Thread(target=worker, args=(s,)) for s in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


# ----------------------------------------------------------------------------- report


def machine() -> dict:
    info = {"nproc": os.cpu_count(), "platform": platform.platform(),
            "python": sys.version.split()[0]}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        info["mem_total_kb"] = int(open("/proc/meminfo").readline().split()[1])
    except OSError:
        pass
    try:
        info["glibc"] = platform.libc_ver()[1]
    except Exception:  # noqa: BLE001
        pass
    return info


def git(*a) -> str:
    r = subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True)
    return r.stdout.strip()


def reply_ok(r: dict, limit_ms: float, max_reply: int) -> tuple[bool, str]:
    s = r["status"]
    if s is None:
        return False, f"no reply ({r['code']}) after {r['ms']:.0f} ms"
    if r["ms"] > limit_ms:
        return False, f"{s} after {r['ms']:.0f} ms (> {limit_ms:.0f} ms)"
    if 400 <= s < 500:
        return True, ""
    if s in (200, 503, 504):
        if r["bytes"] > max_reply:
            return False, f"{s} with {r['bytes']} bytes (> --max-reply-bytes)"
        if s == 503 and r["code"] != "overloaded":
            return False, f"503 {r['code']}"
        return True, ""
    return False, f"status {s} {r['code']}"


def summarize(rs: list, limit_ms: float, max_reply: int) -> dict:
    statuses, codes, bad = {}, {}, []
    for r in rs:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
        if r["code"]:
            codes[r["code"]] = codes.get(r["code"], 0) + 1
        ok, why = reply_ok(r, limit_ms, max_reply)
        if not ok:
            bad.append(why)
    ms = [r["ms"] for r in rs]
    by = [r["bytes"] for r in rs]
    return {
        "n": len(rs), "statuses": statuses, "codes": codes,
        "ms_p50": fin(statistics.median(ms)) if ms else None, "ms_max": fin(max(ms)) if ms else None,
        "bytes_max": max(by) if by else 0, "bytes_p50": int(statistics.median(by)) if by else 0,
        "bad": bad[:10], "bad_n": len(bad),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--searchd", default=str(ROOT / "target" / "release" / "searchd"))
    ap.add_argument("--commit", default=None,
                    help="commit the binary was built from (default: HEAD of this tree)")
    ap.add_argument("--work", default=str(HERE / "data" / "agg-bomb"))
    ap.add_argument("--copies", type=int, default=4, help="dev-gcide-50k passages x N")
    ap.add_argument("--timeout-ms", type=int, default=1000)
    ap.add_argument("--slack-ms", type=int, default=250)
    ap.add_argument("--max-reply-bytes", type=int, default=64 * MIB,
                    help="the server's --max-reply-bytes (its default; only used by the check)")
    ap.add_argument("--warmup-s", type=float, default=15)
    ap.add_argument("--idle-s", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--burst", type=int, default=8)
    ap.add_argument("--storm-s", type=float, default=15)
    ap.add_argument("--after-s", type=float, default=30)
    ap.add_argument("--health-every-ms", type=float, default=20)
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="extra `serve` argument (repeatable, e.g. --serve-arg=--max-buckets=1000)")
    ap.add_argument("--out", default=str(HERE / "results" / "agg-bomb"))
    args = ap.parse_args()

    searchd = Path(args.searchd)
    if not searchd.exists() or not (DATA / "passages.jsonl").exists():
        print(f"need {searchd} (cargo build --release) and {DATA}", file=sys.stderr)
        return 2
    coll = prepare(searchd, Path(args.work), args.copies)
    vs = variants(args.copies)
    port = free_port()
    srv = Server(searchd, coll, port, args.timeout_ms, Path(args.work) / "serve.log",
                 args.serve_arg)
    stop_rss = threading.Event()
    stop_probe = mp.Event()
    q = mp.Queue()
    prober = None
    try:
        srv.wait_ready()
        pid = srv.proc.pid
        rss = RssSampler(pid, 0.05, stop_rss)
        rss.start()
        at_ready = proc_status(pid)
        prober = mp.Process(target=health_prober,
                            args=(port, args.health_every_ms / 1e3, 1.0, stop_probe, q),
                            daemon=True)
        prober.start()
        log(f"ready (RSS {at_ready['VmRSS'] / MIB:.0f} MiB); warm-up {args.warmup_s:.0f} s")
        t_warm = time.monotonic()
        warm_counts = warmup(port, args.warmup_s, args.copies)
        t_idle = time.monotonic()
        time.sleep(args.idle_s)
        t_bomb = time.monotonic()
        cpu0 = cpu_jiffies(pid)
        me0 = sum(os.times()[:2])
        base_s = rss.between(t_bomb - 3.0, t_bomb)
        baseline = statistics.median(s[1] for s in base_s)
        baseline_anon = statistics.median(s[2] for s in base_s)
        baseline_file = statistics.median(s[3] for s in base_s)
        log(f"warm-up replies {warm_counts}; baseline RSS {baseline / MIB:.1f} MiB "
            f"(anon {baseline_anon / MIB:.1f}, file {baseline_file / MIB:.1f})")

        results = []
        windows = {}
        for name, what, method, path, body in vs:
            t0 = time.monotonic()
            for _ in range(args.rounds):
                r = send(port, method, path, body)
                r["variant"], r["mode"] = name, "sequential"
                results.append(r)
            results += run_parallel(port, [(name, method, path, body)] * args.burst, args.burst)
            windows[name] = (t0, time.monotonic())
            last = [r for r in results if r["variant"] == name]
            log(f"{name:24s} {len(body):>8d} B body: "
                + ", ".join(f"{k} x{v}" for k, v in summarize(last, 1e12, 1 << 62)["statuses"].items())
                + f"; max {max(r['ms'] for r in last):.0f} ms, "
                f"max reply {max(r['bytes'] for r in last)} B")
        log(f"storm: {args.burst} clients, random variants, {args.storm_s:.0f} s")
        t_storm = time.monotonic()
        results += storm(port, vs, args.burst, args.storm_s)
        t_end = time.monotonic()
        cpu1 = cpu_jiffies(pid)
        me1 = sum(os.times()[:2])
        windows["storm"] = (t_storm, t_end)
        log(f"bombs done; watching RSS for {args.after_s:.0f} s")
        time.sleep(args.after_s + 0.6)
        stop_probe.set()
        probes = q.get(timeout=30)
        prober.join(timeout=10)
        stop_rss.set()
        rss.join(timeout=5)
        server_alive = srv.proc.poll() is None
    finally:
        stop_probe.set()
        stop_rss.set()
        srv.stop()

    # -------------------------------------------------------------- figures
    limit_ms = args.timeout_ms + args.slack_ms
    per_variant = {}
    for name, what, method, path, body in vs:
        rs = [r for r in results if r["variant"] == name]
        w = windows[name]
        # The window widened by one sampling period at each end: a variant refused in a few
        # ms may fall between two samples.
        peak = max((s[1] for s in rss.between(w[0] - 0.05, w[1] + 0.05)), default=None)
        per_variant[name] = {
            "what": what, "route": f"{method} {path}", "body_bytes": len(body),
            **summarize(rs, limit_ms, args.max_reply_bytes),
            "sequential": summarize([r for r in rs if r["mode"] == "sequential"], limit_ms,
                                    args.max_reply_bytes),
            "burst": summarize([r for r in rs if r["mode"] == "burst"], limit_ms,
                               args.max_reply_bytes),
            "storm": summarize([r for r in rs if r["mode"] == "storm"], limit_ms,
                               args.max_reply_bytes),
            "rss_peak_in_window_mib": round(peak / MIB, 1) if peak else None,
        }
    storm_summary = summarize([r for r in results if r["mode"] == "storm"], limit_ms,
                              args.max_reply_bytes)

    during = rss.between(t_bomb, t_end)
    peak = max(s[1] for s in during)
    peak_anon = max(s[2] for s in during)
    t_peak = next(s[0] for s in during if s[1] == peak) - t_bomb

    def rss_at(dt):
        xs = rss.between(t_end + dt - 0.5, t_end + dt + 0.5)
        return statistics.median(s[1] for s in xs) if xs else None, \
            statistics.median(s[2] for s in xs) if xs else None

    after5, after5_anon = rss_at(5.0)
    after30, after30_anon = rss_at(args.after_s)

    def health(t0, t1):
        xs = [p for p in probes if t0 <= p[0] <= t1]
        lat = [p[1] if p[1] is not None else float("inf") for p in xs]
        ok = [p[1] for p in xs if p[1] is not None]
        fails = {}
        for p in xs:
            if p[1] is None:
                fails[str(p[2])] = fails.get(str(p[2]), 0) + 1
        run, worst = 0, 0
        for p in xs:
            run = run + 1 if p[1] is None else 0
            worst = max(worst, run)
        return {"n": len(xs), "p50_ms": fin(pct(lat, 0.5)), "p99_ms": fin(pct(lat, 0.99)),
                "p99_is_failure": pct(lat, 0.99) == float("inf") if lat else False,
                "max_ok_ms": fin(max(ok)) if ok else None, "failures": sum(fails.values()),
                "failure_kinds": fails, "longest_failure_run": worst}

    hz = os.sysconf("SC_CLK_TCK")
    span = t_end - t_bomb
    cpu = {
        "machine_cores_busy": round((cpu1[0] - cpu0[0]) / hz / span, 2),
        "server_cores": round((cpu1[1] - cpu0[1]) / hz / span, 2),
        "bench_client_cores": round((me1 - me0) / span, 2),
    }
    cpu["other_cores"] = round(max(0.0, cpu["machine_cores_busy"] - cpu["server_cores"]
                                   - cpu["bench_client_cores"]), 2)
    cpu["note"] = ("mean cores busy during the bombs; other = everything but the server and "
                   "this script's bomb clients (the /health prober, and other users of the VM)")
    h_idle = health(t_idle + 1.0, t_bomb)
    h_bomb = health(t_bomb, t_end)
    h_after = health(t_end, t_end + args.after_s)

    bad_replies = [f"{r['variant']} ({r['mode']}): {why}" for r in results
                   for ok, why in [reply_ok(r, limit_ms, args.max_reply_bytes)] if not ok]
    checks = {
        "replies": {
            "pass": not bad_replies and server_alive,
            "rule": f"every bomb reply a 4xx, or 200/503 overloaded/504 within "
                    f"{args.timeout_ms} + {args.slack_ms} ms and <= --max-reply-bytes; "
                    "the server still running",
            "value": f"{len(results) - len(bad_replies)}/{len(results)} replies ok"
                     + ("" if server_alive else "; the server died"),
            "failures": bad_replies[:20],
        },
        "rss_peak": {
            "pass": peak - baseline < 256 * MIB,
            "rule": "peak VmRSS during the bombs - baseline < 256 MiB",
            "value": f"{(peak - baseline) / MIB:+.1f} MiB (peak {peak / MIB:.1f}, "
                     f"baseline {baseline / MIB:.1f})",
        },
        "rss_after": {
            "pass": after30 is not None and after30 <= 1.10 * baseline,
            "rule": f"VmRSS {args.after_s:.0f} s after the last bomb <= 1.10 x baseline",
            "value": (f"{after30 / MIB:.1f} MiB = {after30 / baseline:.3f} x baseline"
                      if after30 else "no sample"),
        },
        "health": {
            "pass": h_bomb["n"] > 0 and not h_bomb["p99_is_failure"]
                    and h_bomb["p99_ms"] is not None and h_bomb["p99_ms"] < 50.0,
            "rule": "/health p99 < 50 ms during the bombs (a failed probe counts as infinite)",
            "value": f"p99 {h_bomb['p99_ms']} ms over {h_bomb['n']} probes, "
                     f"{h_bomb['failures']} failures",
        },
    }
    verdict = all(c["pass"] for c in checks.values())

    commit = args.commit or git("rev-parse", "HEAD")
    res = {
        "schema": "searchd.bench.agg-bomb.v1",
        "issue": "27 Exposed safely: the aggregation bomb",
        "commit": commit,
        "searchd": str(searchd),
        "serve_cmd": srv.cmd,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "data": {"dataset": "dev-gcide-50k passages", "copies": args.copies,
                 "docs": 50_000 * args.copies, "vector_dim": DIM,
                 "fields": "uid keyword unique; headword keyword; tags keyword[3] of 20,000; "
                           "color keyword of 12; price float; stock integer",
                 "index": "flat, no lexical"},
        "params": {k: getattr(args, k) for k in
                   ("timeout_ms", "slack_ms", "max_reply_bytes", "warmup_s", "idle_s", "rounds",
                    "burst", "storm_s", "after_s", "health_every_ms", "serve_arg")},
        "warmup_replies": warm_counts,
        "rss": {
            "at_ready_mib": round(at_ready["VmRSS"] / MIB, 1),
            "baseline_mib": round(baseline / MIB, 1),
            "baseline_anon_mib": round(baseline_anon / MIB, 1),
            "baseline_file_mib": round(baseline_file / MIB, 1),
            "baseline_rule": "median VmRSS over the last 3 s of the idle pause after the "
                             "warm-up traffic",
            "peak_mib": round(peak / MIB, 1),
            "peak_anon_mib": round(peak_anon / MIB, 1),
            "peak_at_s": round(t_peak, 1),
            "growth_mib": round((peak - baseline) / MIB, 1),
            "after_5s_mib": round(after5 / MIB, 1) if after5 else None,
            "after_5s_anon_mib": round(after5_anon / MIB, 1) if after5_anon else None,
            "after_5s_ratio": round(after5 / baseline, 3) if after5 else None,
            "after_30s_mib": round(after30 / MIB, 1) if after30 else None,
            "after_30s_anon_mib": round(after30_anon / MIB, 1) if after30_anon else None,
            "after_30s_ratio": round(after30 / baseline, 3) if after30 else None,
            "samples": len(rss.samples),
        },
        "health": {"idle": h_idle, "during_bombs": h_bomb, "after": h_after,
                   "how": f"GET /health on a new connection every {args.health_every_ms:.0f} ms "
                          "from a separate process, 1 s timeout"},
        "bombs_s": round(t_end - t_bomb, 1),
        "cpu_during_bombs": cpu,
        "requests": len(results),
        "variants": per_variant,
        "storm": storm_summary,
        "checks": checks,
        "pass": verdict,
    }
    out = Path(args.out)
    out = out.resolve()
    res["out"] = str(out.relative_to(ROOT)) if ROOT in out.parents else str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(res))
    for k, c in checks.items():
        log(f"{'PASS' if c['pass'] else 'FAIL'} {k}: {c['value']}  [{c['rule']}]")
        for f in c.get("failures", [])[:10]:
            log(f"    {f}")
    log(f"wrote {out.with_suffix('.json')} and .md")
    return 0 if verdict else 1


def markdown(r: dict) -> str:
    rs, h = r["rss"], r["health"]
    p = r["params"]
    L = [
        "# The aggregation bomb (issue 27 \"Exposed safely\")",
        "",
        f"`bench/agg_bomb.py`, commit `{r['commit'][:12]}`, {r['date_utc']}, "
        f"{r['machine'].get('nproc')} cores ({r['machine'].get('cpu', '?')}), "
        f"{r['machine'].get('mem_total_kb', 0) // 1024} MiB RAM. The VM is shared and noisy and "
        "has 2 cores: the server's search pool, its I/O threads, the bomb clients and the "
        "/health prober all share them.",
        "",
        "The issue: a 115 KB `_search` with 2,000 `terms` aggregations of size 10,000 answered "
        "200 with a 169 MB body after 19.6 s (deadline 1 s), RSS 37 MB -> 4.19 GB and stayed at "
        "4.0 GB, `/health` timed out three times in a row; 200 aggregations (11 KB): 2.0 s, "
        "+400 MB kept. Acceptance: a 4xx or a bounded reply within the deadline, RSS growth "
        "< 256 MB during and back within 10% after, `/health` p99 < 50 ms meanwhile.",
        "",
        f"## Verdict: {'PASS' if r['pass'] else 'FAIL'}",
        "",
        "| check | rule | measured | verdict |",
        "|---|---|---|---|",
    ]
    for k, c in r["checks"].items():
        L.append(f"| {k} | {c['rule']} | {c['value']} | {'pass' if c['pass'] else '**FAIL**'} |")
    for k, c in r["checks"].items():
        if c.get("failures"):
            L += ["", f"{k} failures (first 20):", ""] + [f"- {f}" for f in c["failures"]]
    L += [
        "",
        "## Setup",
        "",
        f"- Data: {r['data']['docs']:,} documents (dev-gcide-50k passages x {r['data']['copies']}) "
        f"with {r['data']['fields']}; {r['data']['vector_dim']}-d vectors; {r['data']['index']}.",
        f"- Server: `{' '.join(Path(r['serve_cmd'][0]).name if i == 0 else a for i, a in enumerate(r['serve_cmd']))}` "
        "(every other limit at its default: --max-buckets 65,536, --max-reply-bytes 64 MiB, "
        "--body-limit 1 MiB, --max-pending-bytes 64 MiB, search threads = cores).",
        f"- Warm-up: {p['warmup_s']:.0f} s of ordinary traffic from 2 clients on every route and "
        f"field (replies {r['warmup_replies']}), then {p['idle_s']:.0f} s idle. **Baseline** = "
        "median VmRSS over the last 3 s of that pause: the server after it has served normal "
        "traffic (field indexes, stored-field pages and the search threads' allocator arenas "
        "in place), not the RSS of a server that has never answered a request (that is "
        f"{rs['at_ready_mib']} MiB here, given for reference).",
        f"- Bombs: each variant {p['rounds']} x one after the other, then {p['burst']} at once "
        f"(a burst on {p['burst']} connections); then a storm of {p['burst']} clients sending "
        f"random variants for {p['storm_s']:.0f} s; {r['requests']} bomb requests in "
        f"{r['bombs_s']} s. A reply is ok when it is a 4xx, or a 200 / 503 `overloaded` / 504 "
        f"`deadline_exceeded` within {p['timeout_ms']} + {p['slack_ms']} ms of being sent "
        "(client clock, so queueing and transfer are included) and at most --max-reply-bytes.",
        f"- CPU during the bombs (mean cores of {r['machine'].get('nproc')}): machine "
        f"{r['cpu_during_bombs']['machine_cores_busy']}, server {r['cpu_during_bombs']['server_cores']}, "
        f"bomb clients {r['cpu_during_bombs']['bench_client_cores']}, other "
        f"{r['cpu_during_bombs']['other_cores']} (the prober and anything else on the VM, e.g. "
        "another build: above ~0.1 the figures are noisier).",
        f"- Meanwhile: {h['during_bombs'].get('n')} `GET /health` probes ({h['how']}); VmRSS "
        "(and RssAnon / RssFile) of the server every 50 ms.",
        "",
        "## Memory",
        "",
        "| | VmRSS MiB | RssAnon MiB |",
        "|---|---|---|",
        f"| at /ready (no request served yet) | {rs['at_ready_mib']} | |",
        f"| baseline (after warm-up) | {rs['baseline_mib']} | {rs['baseline_anon_mib']} |",
        f"| peak during the bombs (at +{rs['peak_at_s']} s) | {rs['peak_mib']} | {rs['peak_anon_mib']} |",
        f"| 5 s after the last bomb | {rs['after_5s_mib']} ({rs['after_5s_ratio']} x) | {rs['after_5s_anon_mib']} |",
        f"| {p['after_s']:.0f} s after the last bomb | {rs['after_30s_mib']} ({rs['after_30s_ratio']} x) | {rs['after_30s_anon_mib']} |",
        "",
        "## /health",
        "",
        "| window | probes | p50 ms | p99 ms | max (ok) ms | failures | longest failure run |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in ("idle", "during_bombs", "after"):
        x = h[k]
        L.append(f"| {k.replace('_', ' ')} | {x['n']} | {x['p50_ms']} | "
                 f"{x['p99_ms'] if not x['p99_is_failure'] else 'failure'} | {x['max_ok_ms']} | "
                 f"{x['failures']} {x['failure_kinds'] or ''} | {x['longest_failure_run']} |")
    L += [
        "",
        "## Variants",
        "",
        "Elapsed is client-side (connect to last byte). \"Burst\" is the max over the "
        f"{p['burst']} parallel sends; storm counts are over the storm phase.",
        "",
        "| variant | route | body | statuses (codes) | p50 ms | max ms | burst max ms | max reply bytes | RSS peak in window MiB | ok |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, v in r["variants"].items():
        st = ", ".join(f"{k} x{n}" for k, n in v["statuses"].items())
        cd = ", ".join(f"{k}" for k in v["codes"])
        L.append(f"| `{name}` | `{v['route']}` | {v['body_bytes']:,} B | {st}"
                 f"{' (' + cd + ')' if cd else ''} | {v['ms_p50']} | {v['ms_max']} | "
                 f"{v['burst']['ms_max']} | {v['bytes_max']:,} | {v['rss_peak_in_window_mib']} | "
                 f"{'yes' if v['bad_n'] == 0 else 'NO (' + str(v['bad_n']) + ')'} |")
    L += ["", "What each variant is:", ""]
    for name, v in r["variants"].items():
        L.append(f"- `{name}`: {v['what']}")
    s = r["storm"]
    L += [
        "",
        f"Storm: {s['n']} requests, statuses {s['statuses']}, codes {s['codes']}, p50 "
        f"{s['ms_p50']} ms, max {s['ms_max']} ms.",
        "",
        "## Rerun",
        "",
        "```sh",
        "cargo build --release            # target/release/searchd; nothing else compiling meanwhile",
        "python3 bench/agg_bomb.py        # builds bench/data/agg-bomb/ once (about a minute), then ~3 min",
        "```",
        "",
        "Exit status 0 when every check passes, 1 when one fails (the failed checks are printed), "
        "2 on a setup error. `--serve-arg=--io-threads=2` and the like pass flags to `serve`; "
        "`--searchd BIN --commit SHA` measure another binary (the committed figures come from a "
        "release build of `git archive` of the commit named above, so a dirty work tree is not "
        "measured).",
        "",
    ]
    notes = Path(r["out"] + ".notes.md")
    if not notes.is_absolute():
        notes = ROOT / notes
    if notes.exists():
        L += ["", notes.read_text()]
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
