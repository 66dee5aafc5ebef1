#!/usr/bin/env python3
"""Power loss: what `--fsync always|group` promises is that an acknowledged write survives
losing every byte the kernel had not synced. This runs `searchd serve` with a recorder of
synced bytes (bench/powerloss/synced.c, LD_PRELOAD) under a seeded writer of upserts,
deletes, `wait` refreshes and snapshots, kills it with SIGKILL at a random point, and
rebuilds the collection directory as a power cut would leave it under the strict POSIX
model: each file cut to what was fsynced/fdatasynced, each directory's entries as of its
last fsync, everything else gone. The next server starts on that image, and every
acknowledged write must be there with its last value, every acknowledged delete gone.

A control runs the same cycles with `--fsync none` (acknowledged = in the log's page cache):
there the recorder must see writes lost, or it would be a test that cannot fail.

    python3 bench/power_loss.py [--cycles 60] [--control 6] [--bin target/release/searchd]

Needs numpy (bench/.venv has it) and gcc. Writes OUT.json and OUT.md.
"""
import argparse, json, os, random, shutil, signal, subprocess, sys, tempfile, time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crash_loop import Client, free_port, start as crash_start  # noqa: E402


def rebuild(shadow, out):
    """The collection directory a power cut leaves, from the recorder's shadow."""
    files = dirs = empty = 0

    def build(key, path):
        nonlocal files, dirs, empty
        os.mkdir(path); dirs += 1
        lf = os.path.join(shadow, "dirs", key)
        if not os.path.exists(lf):
            return  # created, never synced: its entries are not durable
        for line in open(lf):
            t, k, name = line.rstrip("\n").split(" ", 2)
            dst = os.path.join(path, name)
            if t == "d":
                build(k, dst)
                continue
            src = os.path.join(shadow, "files", k)
            if os.path.exists(src):
                shutil.copyfile(src, dst); files += 1
            else:
                open(dst, "wb").close(); empty += 1  # the entry is durable, its data not
    build(open(os.path.join(shadow, "root")).read().strip(), out)
    return {"files": files, "dirs": dirs, "empty_files": empty}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=60)
    ap.add_argument("--control", type=int, default=6, help="cycles with --fsync none")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--bin", default="target/release/searchd")
    ap.add_argument("--out", default="bench/results/power-loss")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    nrng = np.random.default_rng(a.seed)
    work = tempfile.mkdtemp(prefix="searchd-powerloss-")
    log = open(os.path.join(work, "server.log"), "ab")
    so = os.path.join(work, "synced.so")
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", so, os.path.join(here, "powerloss", "synced.c"),
                    "-ldl"], check=True)

    def vec():
        v = nrng.standard_normal(a.dim).astype(np.float32)
        return (v / np.linalg.norm(v)).round(6)

    colors = ["red", "green", "blue", "amber"]

    def fresh_collection(name):
        model = {}
        with open(os.path.join(work, name + ".jsonl"), "w") as f:
            for i in range(a.docs):
                c = rng.choice(colors)
                model[i] = c
                f.write(json.dumps({"id": i, "text": f"passage {i} {c}", "color": c,
                                    "vector": vec().tolist()}) + "\n")
        coll = os.path.join(work, name)
        subprocess.run([a.bin, "ingest", "--docs", os.path.join(work, name + ".jsonl"), "--out", coll,
                        "--vector-field", "vector", "--text-field", "text"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return coll, model

    def run(coll, model, cycles, modes, adopt):
        """`cycles` power cuts; returns per-cycle records. With `adopt`, the model takes what
        the server holds after each check (the control loses writes by design)."""
        name = os.path.basename(coll)
        next_id = max(model) + 1
        deleted = set()
        inflight = None
        recs, acks = [], []
        for k in range(cycles + 1):
            fsync = modes[k % len(modes)]
            shadow = os.path.join(work, f"shadow-{name}-{k}")
            os.mkdir(shadow)
            os.sync()  # the baseline the recorder takes at load is then truly on disk
            env = dict(os.environ, LD_PRELOAD=so, SYNCED_SHADOW=shadow, SYNCED_BASELINE=coll,
                       SEARCHD_LOG="warn")
            port = free_port()
            proc, _ = crash_start(a.bin, coll, port, fsync, log, ["--commit-ms", "700"], env)
            cl = Client(port)
            rec = {"cycle": k, "fsync": modes[(k - 1) % len(modes)] if k else None,
                   "lost": 0, "stale": 0, "resurrected": 0}
            if k > 0:
                # The op in flight at the cut may have landed or not: take what the server holds.
                if inflight:
                    s, r = cl.req("POST", f"/{name}/_mget", {"ids": list(inflight)})
                    assert s == 200, r
                    for d in r["docs"]:
                        did = int(d["_id"]); new = inflight[did]
                        if new is None and not d.get("found"):
                            model.pop(did, None); deleted.add(did)
                        elif new is not None and d.get("found") and d["_source"].get("color") == new:
                            model[did] = new; deleted.discard(did)
                ids = list(model)
                for i in range(0, len(ids), 500):
                    s, r = cl.req("POST", f"/{name}/_mget", {"ids": ids[i:i + 500]})
                    assert s == 200, r
                    for d in r["docs"]:
                        did = int(d["_id"])
                        if not d.get("found"):
                            rec["lost"] += 1
                            if adopt:
                                model.pop(did)
                        elif d["_source"].get("color") != model[did]:
                            rec["stale"] += 1
                            if adopt:
                                model[did] = d["_source"].get("color")
                gone = list(deleted)
                for i in range(0, len(gone), 500):
                    s, r = cl.req("POST", f"/{name}/_mget", {"ids": gone[i:i + 500]})
                    for d in r["docs"]:
                        if d.get("found"):
                            rec["resurrected"] += 1
                            if adopt:
                                model[int(d["_id"])] = d["_source"].get("color")
                                deleted.discard(int(d["_id"]))
                s, st = cl.req("GET", "/stats")
                live = ((st.get("collections") or {}).get(name) or {}).get("live") or {}
                rec["replayed"] = (live.get("recovery") or {}).get("replayed", 0)
                rec["cut"] = bool((live.get("recovery") or {}).get("cut"))
                bad = rec["lost"] + rec["stale"] + rec["resurrected"]
                if bad and not adopt:
                    print(f"cycle {k}: lost {rec['lost']} stale {rec['stale']} "
                          f"resurrected {rec['resurrected']}", file=sys.stderr)
                recs.append(rec)
            if k == cycles:
                proc.send_signal(signal.SIGKILL); proc.wait()
                break
            # Write until the cut (0.3-3 s: commits every 0.7 s, so cuts land before, during
            # and after commits, refreshes and snapshots).
            cl = Client(port)
            acked = 0
            cut_at = time.time() + rng.uniform(0.3, 3.0)
            inflight = None
            while True:
                op = rng.random()
                if op < 0.02:
                    s, r = cl.req("POST", f"/collections/{name}/snapshot", {})
                    continue
                if op < 0.25 and model:
                    pick = rng.sample(list(model), min(len(model), rng.randint(1, 5)))
                    change = {i: None for i in pick}
                    path, body = f"/collections/{name}/delete", {"ids": pick, "wait": rng.random() < 0.1}
                else:
                    docs = []; change = {}
                    for _ in range(rng.randint(1, 10)):
                        i = rng.choice(list(model)) if (rng.random() < 0.5 and model) else next_id
                        if i == next_id:
                            next_id += 1
                        c = rng.choice(colors) + str(rng.randint(0, 999))
                        change[i] = c
                        docs.append({"id": i, "text": f"passage {i} {c}", "vector": vec().tolist(),
                                     "fields": {"color": c}})
                    path, body = f"/collections/{name}/docs", {"docs": docs, "wait": rng.random() < 0.1}
                if time.time() >= cut_at:
                    inflight = change
                    try:
                        cl.c.request("POST", path, body=json.dumps(body),
                                     headers={"Content-Type": "application/json"})
                    except OSError:
                        pass
                    time.sleep(rng.uniform(0, 0.003))
                    proc.send_signal(signal.SIGKILL); proc.wait()
                    break
                s, r = cl.req("POST", path, body)
                assert s == 200, (s, r)
                acked += 1
                for i, val in change.items():
                    if val is None:
                        model.pop(i, None); deleted.add(i)
                    else:
                        model[i] = val; deleted.discard(i)
            img = os.path.join(work, f"image-{name}-{k}")
            info = rebuild(shadow, img)
            shutil.rmtree(coll); os.rename(img, coll); shutil.rmtree(shadow)
            acks.append(acked)
            print(f"{name} cycle {k} ({fsync}): {acked} acked, image {info}", file=sys.stderr)
        return recs, sum(acks)

    t0 = time.time()
    coll, model = fresh_collection("c")
    main_recs, acked = run(coll, model, a.cycles, ["always", "group"], adopt=False)
    ccoll, cmodel = fresh_collection("control")
    ctrl_recs, ctrl_acked = run(ccoll, cmodel, a.control, ["none"], adopt=True)
    tot = lambda rs, f: sum(r[f] for r in rs)
    out = {
        "schema": "searchd.bench.power-loss.v1",
        "model": "strict POSIX: a file keeps the bytes it had when an fsync/fdatasync of it began; "
                 "a directory keeps the entries it had when an fsync of it began",
        "cycles": len(main_recs), "fsync_modes": ["always", "group"],
        "acknowledged_ops": acked,
        "lost": tot(main_recs, "lost"), "stale": tot(main_recs, "stale"),
        "resurrected": tot(main_recs, "resurrected"),
        "log_cuts_at_start": sum(1 for r in main_recs if r.get("cut")),
        "control": {"fsync": "none", "cycles": len(ctrl_recs), "acknowledged_ops": ctrl_acked, "lost": tot(ctrl_recs, "lost"),
                    "stale": tot(ctrl_recs, "stale"), "resurrected": tot(ctrl_recs, "resurrected"),
                    "cycles_with_loss": sum(1 for r in ctrl_recs if r["lost"] + r["stale"] + r["resurrected"])},
        "cycles_detail": main_recs, "control_detail": ctrl_recs,
        "config": {"docs": a.docs, "dim": a.dim, "seed": a.seed, "commit_ms": 700, "refresh_ms": 100},
        "seconds": round(time.time() - t0, 1),
    }
    out["passed"] = (out["lost"] == 0 and out["stale"] == 0 and out["resurrected"] == 0
                     and out["control"]["cycles_with_loss"] > 0)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    json.dump(out, open(a.out + ".json", "w"), indent=1)
    c = out["control"]
    with open(a.out + ".md", "w") as f:
        f.write("# Power loss: only synced bytes survive\n\n"
                f"`searchd serve` under a seeded writer ({a.docs} docs x {a.dim}-d to start; upserts of 1-10 docs, "
                "deletes of 1-5 ids, 10% with `wait`, snapshots 2%; refresh 100 ms, commit 700 ms), "
                "SIGKILLed 0.3-3 s after each start, then restarted on the image a power cut leaves "
                "under the strict POSIX model, rebuilt by a recorder of synced bytes "
                "(`bench/powerloss/synced.c`, LD_PRELOAD on fsync/fdatasync): each file cut to its size "
                "when its last successful sync began, each directory's entries as of its last sync.\n\n"
                "| fsync | power cuts | acknowledged ops | lost | stale | resurrected | cycles with loss |\n"
                "|---|---|---|---|---|---|---|\n"
                f"| always / group (by turn) | {out['cycles']} | {acked} | {out['lost']} | {out['stale']} | "
                f"{out['resurrected']} | {sum(1 for r in main_recs if r['lost'] + r['stale'] + r['resurrected'])} |\n"
                f"| none (control) | {c['cycles']} | {ctrl_acked} | "
                f"{c['lost']} | {c['stale']} | {c['resurrected']} | {c['cycles_with_loss']} |\n\n"
                "The control must lose writes (acknowledged there means written to the log, not synced): "
                "it shows the recorder can see a loss.\n\n"
                f"Passed: **{out['passed']}** (target: 0 lost, stale or resurrected with always/group; "
                "losses seen in the control).\n")
    print(json.dumps({k: out[k] for k in ("cycles", "acknowledged_ops", "lost", "stale", "resurrected", "passed")}
                     | {"control": c}))
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if out["passed"] else 1)


if __name__ == "__main__":
    main()
