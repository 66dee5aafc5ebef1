#!/usr/bin/env python3
"""Crash loop (like Qdrant's crasher): a seeded writer of upserts and deletes (vectors,
text, typed fields) against `searchd serve` on a live collection, killed with SIGKILL at
random points while refreshes, merges, commits and snapshots run, then restarted. After
every restart every acknowledged write must be there with its last value, every deleted
id gone, and (every --recall-every kills) searches must answer with recall@10 within 0.01
of a fresh build of the same documents. The one write in flight at the kill (sent, not
acknowledged) may land or not: both are accepted for the ids it touched.

    python3 bench/crash_loop.py --kills 200 [--bin target/release/searchd] [--out bench/results/crash-loop]

Needs numpy (bench/.venv has it). Writes OUT.json and OUT.md.
"""
import argparse, json, os, random, shutil, signal, socket, subprocess, sys, tempfile, time
import http.client

import numpy as np


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


class Client:
    def __init__(self, port):
        self.port = port
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def req(self, method, path, body=None):
        data = None if body is None else json.dumps(body)
        self.c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = self.c.getresponse()
        b = r.read()
        return r.status, (json.loads(b) if b else None)


def start(binary, coll, port, fsync, log, extra=(), env=None):
    p = subprocess.Popen([binary, "serve", "--collection", coll, "--addr", f"127.0.0.1:{port}",
                          "--threads", "1", "--refresh-ms", "100", "--fsync", fsync, *extra],
                         stdout=log, stderr=log, env=env)
    t = time.time()
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/ready"); r = c.getresponse(); r.read()
            if r.status == 200:
                return p, time.time() - t
        except OSError:
            pass
        if p.poll() is not None:
            raise SystemExit(f"server exited with {p.returncode} at start (see the log)")
        if time.time() - t > 120:
            raise SystemExit("server not ready after 120 s")
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--recall-every", type=int, default=25)
    ap.add_argument("--bin", default="target/release/searchd")
    ap.add_argument("--out", default="bench/results/crash-loop")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    nrng = np.random.default_rng(a.seed)
    work = tempfile.mkdtemp(prefix="searchd-crash-")
    log = open(os.path.join(work, "server.log"), "ab")

    def vec():
        v = nrng.standard_normal(a.dim).astype(np.float32)
        return (v / np.linalg.norm(v)).round(6)

    colors = ["red", "green", "blue", "amber"]
    model = {}  # id -> (color, vector, text, n)
    with open(os.path.join(work, "docs.jsonl"), "w") as f:
        for i in range(a.docs):
            v = vec(); c = rng.choice(colors); t = f"passage {i} {c}"
            model[i] = (c, v, t, i % 97)
            f.write(json.dumps({"id": i, "text": t, "color": c, "n": i % 97, "vector": v.tolist()}) + "\n")
    coll = os.path.join(work, "c")
    subprocess.run([a.bin, "ingest", "--docs", os.path.join(work, "docs.jsonl"), "--out", coll,
                    "--vector-field", "vector", "--text-field", "text", "--field-type", "n=integer"],
                   check=True, stdout=subprocess.DEVNULL)
    queries = [vec() for _ in range(100)]
    next_id = a.docs
    deleted = set()
    stats = {"kills": 0, "acked_upserts": 0, "acked_deletes": 0, "ops": 0, "snapshots": 0,
             "lost": 0, "resurrected": 0, "stale": 0, "ambiguous_inflight": 0, "restart_s": [],
             "recall": [], "replayed": [], "cuts": 0, "merges": 0}
    t0 = time.time()
    inflight = None  # (kind, {id: new or None}) of the unacknowledged op at the kill
    for k in range(a.kills + 1):
        port = free_port()
        fsync = ["none", "group", "always"][k % 3]
        proc, ready_s = start(a.bin, coll, port, fsync, log)
        stats["restart_s"].append(ready_s)
        cl = Client(port)
        # The write in flight at the kill (sent, not acknowledged) may have landed or not:
        # read its ids and take whichever of the two states the server holds.
        bad = []
        if inflight is not None:
            change = inflight[1]
            s, r = cl.req("POST", "/c/_mget", {"ids": list(change.keys())})
            assert s == 200, r
            for d in r["docs"]:
                did = int(d["_id"]); new = change[did]
                found = bool(d.get("found"))
                if new is None:
                    if not found and did in model:
                        model.pop(did); deleted.add(did); stats["ambiguous_inflight"] += 1
                elif found and d["_source"].get("color") == new[0] and (did not in model or model[did][0] != new[0]):
                    model[did] = new; deleted.discard(did); stats["ambiguous_inflight"] += 1
        # Verify: every id in the model with its last value, deleted ids gone.
        ids = list(model.keys())
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            s, r = cl.req("POST", "/c/_mget", {"ids": chunk})
            assert s == 200, r
            for d in r["docs"]:
                did = int(d["_id"])
                if not d.get("found"):
                    bad.append(("lost", did)); continue
                c = d["_source"].get("color")
                if c != model[did][0]:
                    bad.append(("stale", did, c, model[did][0]))
        gone = [d for d in deleted if d not in model]
        for i in range(0, len(gone), 500):
            s, r = cl.req("POST", "/c/_mget", {"ids": gone[i:i + 500]})
            for d in r["docs"]:
                if d.get("found"):
                    bad.append(("resurrected", int(d["_id"])))
        s, r = cl.req("POST", "/collections/c/count", {})
        if r["count"] != len(model):
            bad.append(("count", r["count"], len(model)))
        for b in bad:
            stats["lost" if b[0] == "lost" else "resurrected" if b[0] == "resurrected" else "stale"] += 1
        if bad:
            print(f"kill {k}: {len(bad)} problems, first {bad[:5]}", file=sys.stderr)
        s, st = cl.req("GET", "/stats")
        live = None
        for cinfo in (st.get("collections") or {}).values():
            live = cinfo.get("live") or live
        if live is None:
            live = (st.get("index") or {}).get("live")
        if live:
            rec = live.get("recovery", {})
            stats["replayed"].append(rec.get("replayed", 0))
            stats["cuts"] += 1 if rec.get("cut") else 0
        # Recall against exact search over the model, and against a fresh build.
        if k % a.recall_every == 0 or k == a.kills:
            ids_arr = np.array(list(model.keys()))
            mat = np.stack([model[i][1] for i in ids_arr])
            hits_live = 0; truth_n = 0
            truth_all = []
            for q in queries:
                sc = mat @ q
                top = ids_arr[np.argsort(-sc)[:10]]
                kth = np.sort(sc)[-10]
                truth_all.append((set(top.tolist()), kth))
                s, r = cl.req("POST", "/collections/c/search", {"vector": q.tolist(), "k": 10})
                got = [h["id"] for h in r["hits"]]
                hits_live += sum(1 for g in got if g in truth_all[-1][0] or (g in model and float(np.dot(model[g][1], q)) >= kth - 1e-6))
                # A hit for an id the acknowledged state does not hold is resurrected.
                stats["resurrected"] += sum(1 for g in got if g not in model)
                truth_n += 10
            live_recall = hits_live / truth_n
            # Fresh build of the same documents.
            fresh = os.path.join(work, f"fresh-{k}")
            with open(fresh + ".jsonl", "w") as f:
                for i in ids_arr.tolist():
                    c, v, t, n = model[i]
                    f.write(json.dumps({"id": i, "text": t, "color": c, "n": n, "vector": v.tolist()}) + "\n")
            subprocess.run([a.bin, "ingest", "--docs", fresh + ".jsonl", "--out", fresh, "--vector-field",
                            "vector", "--text-field", "text", "--field-type", "n=integer"], check=True,
                           stdout=subprocess.DEVNULL)
            fport = free_port()
            fp, _ = start(a.bin, fresh, fport, "none", log)
            fc = Client(fport)
            hits_fresh = 0
            for q, (tset, kth) in zip(queries, truth_all):
                s, r = fc.req("POST", f"/collections/fresh-{k}/search", {"vector": q.tolist(), "k": 10})
                got = [h["id"] for h in r["hits"]]
                hits_fresh += sum(1 for g in got if g in tset or (g in model and float(np.dot(model[g][1], q)) >= kth - 1e-6))
            fp.terminate(); fp.wait()
            shutil.rmtree(fresh, ignore_errors=True); os.remove(fresh + ".jsonl")
            stats["recall"].append({"kill": k, "docs": len(model), "live": live_recall,
                                    "fresh": hits_fresh / truth_n, "segments": len((live or {}).get("segments", []))})
            print(f"kill {k}: docs {len(model)} recall live {live_recall:.4f} fresh {hits_fresh / truth_n:.4f}", file=sys.stderr)
        if k == a.kills:
            proc.send_signal(signal.SIGKILL); proc.wait()
            break
        # The connection may have idled past the server's read timeout meanwhile.
        cl = Client(port)
        # Write until a random kill time.
        inflight = None
        deadline = time.time() + rng.uniform(0.2, 1.5)
        killer_at = deadline
        while True:
            op = rng.random()
            if op < 0.02:
                s, r = cl.req("POST", "/collections/c/snapshot", {})
                if s == 200:
                    stats["snapshots"] += 1
                    shutil.rmtree(r["path"], ignore_errors=True)
                continue
            if op < 0.25 and model:
                pick = rng.sample(list(model.keys()), min(len(model), rng.randint(1, 5)))
                change = {i: None for i in pick}
                body = {"ids": pick, "wait": rng.random() < 0.2}
                path = "/collections/c/delete"
            else:
                docs = []; change = {}
                for _ in range(rng.randint(1, 20)):
                    if rng.random() < 0.5 and model:
                        i = rng.choice(list(model.keys()))
                    else:
                        i = next_id; next_id += 1
                    v = vec(); c = rng.choice(colors) + str(rng.randint(0, 999)); t = f"passage {i} {c}"
                    change[i] = (c, v, t, rng.randint(0, 96))
                    docs.append({"id": i, "text": t, "vector": v.tolist(), "fields": {"color": c, "n": change[i][3]}})
                body = {"docs": docs, "wait": rng.random() < 0.2}
                path = "/collections/c/docs"
            last = time.time() >= killer_at
            if last:
                # Kill while this one is in flight: send it, then SIGKILL without reading.
                inflight = ("op", change)
                try:
                    cl.c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
                except OSError:
                    pass
                time.sleep(rng.uniform(0, 0.003))
                proc.send_signal(signal.SIGKILL); proc.wait()
                stats["kills"] += 1
                break
            s, r = cl.req("POST", path, body)
            assert s == 200, (s, r)
            stats["ops"] += 1
            for i, val in change.items():
                if val is None:
                    model.pop(i, None); deleted.add(i); stats["acked_deletes"] += 1
                else:
                    model[i] = val; deleted.discard(i); stats["acked_upserts"] += 1
        if k % 20 == 0:
            print(f"kill {k}: {stats['ops']} ops acked, {len(model)} docs, {time.time() - t0:.0f}s", file=sys.stderr)
    rs = sorted(stats["restart_s"])
    out = {
        "schema": "searchd.bench.crash-loop.v1",
        "kills": stats["kills"], "acknowledged_ops": stats["ops"],
        "acknowledged_upserts": stats["acked_upserts"], "acknowledged_deletes": stats["acked_deletes"],
        "snapshots": stats["snapshots"], "lost": stats["lost"], "resurrected": stats["resurrected"],
        "stale": stats["stale"], "inflight_resolved": stats["ambiguous_inflight"],
        "log_cuts_at_start": stats["cuts"], "replayed_ops_mean": float(np.mean(stats["replayed"])) if stats["replayed"] else 0,
        "restart_ready_s": {"p50": rs[len(rs) // 2], "max": rs[-1]},
        "recall": stats["recall"], "docs_final": len(model), "seconds": time.time() - t0,
        "config": {"docs": a.docs, "dim": a.dim, "seed": a.seed, "fsync_modes": "none/group/always by turn"},
        "passed": stats["lost"] == 0 and stats["resurrected"] == 0 and stats["stale"] == 0
                  and all(abs(r["live"] - r["fresh"]) <= 0.01 or r["live"] >= r["fresh"] for r in stats["recall"]),
    }
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    json.dump(out, open(a.out + ".json", "w"), indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(f"# Crash loop: {out['kills']} SIGKILLs of `searchd serve` under writes\n\n")
        f.write(f"{a.docs} documents x {a.dim}-d (vectors, text, typed fields), a seeded writer of upserts "
                f"(1-20 docs) and deletes (1-5 ids), 20% with `wait`, snapshots 2%, --fsync none/group/always in turn; "
                f"killed 0.2-1.5 s after each restart with a request in flight.\n\n")
        f.write(f"| kills | acknowledged ops | upserted docs | deleted docs | lost | resurrected | stale | in-flight ids resolved | restart p50 / max |\n|---|---|---|---|---|---|---|---|---|\n")
        f.write(f"| {out['kills']} | {out['acknowledged_ops']} | {out['acknowledged_upserts']} | {out['acknowledged_deletes']} | "
                f"{out['lost']} | {out['resurrected']} | {out['stale']} | {out['inflight_resolved']} | "
                f"{rs[len(rs) // 2]:.2f} s / {rs[-1]:.2f} s |\n\n")
        f.write("Recall@10 (tie-aware, vs exact over the acknowledged state) of the live collection and of a fresh ingest of the same documents:\n\n| after kill | docs | live | fresh | diff |\n|---|---|---|---|---|\n")
        for r in stats["recall"]:
            f.write(f"| {r['kill']} | {r['docs']} | {r['live']:.4f} | {r['fresh']:.4f} | {r['live'] - r['fresh']:+.4f} |\n")
        f.write(f"\nPassed: **{out['passed']}** (target: 0 lost, 0 resurrected, recall within 0.01 of fresh).\n")
    print(json.dumps({k: out[k] for k in ("kills", "acknowledged_ops", "lost", "resurrected", "stale", "passed")}))
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if out["passed"] else 1)


if __name__ == "__main__":
    main()
