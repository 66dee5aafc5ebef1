#!/usr/bin/env python3
"""Reranker latency: searchd-embed's CrossEncoder scoring (query, top N passages) on real
dev-gcide-50k texts, N in 10/20/50/100, threads 2 and 1.

No cross-encoder ships on PyPI here, so crates/embed/examples/rerank_bench.rs builds one of
exactly the shape of cross-encoder/ms-marco-MiniLM-L-6-v2 (6 layers, hidden 384, 12 heads,
intermediate 1536, vocab 30522, pooler + 1-label classifier) from the all-MiniLM-L6-v2
embedding model: its encoder, pooler and tokenizer, plus a seeded random classifier. Same
compute as the real reranker; the scores are meaningless (this measures cost, not quality).

  bash .ci/model.sh
  cargo build --release -p searchd-embed --example rerank_bench
  python3 bench/rerank_speed.py [--model DIR] [--seconds 20]

Writes bench/results/rerank-speed.{md,json} (schema searchd.bench-rerank.v1). Standard
library only.
"""
import argparse
import json
import os
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cpu_info():
    model, mhz = "?", None
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            k = k.strip()
            if k == "model name" and model == "?":
                model = v.strip()
            elif k == "cpu MHz" and mhz is None:
                mhz = float(v)
    return {"model": model, "mhz": mhz, "cpus": os.cpu_count()}


def machine_busy():
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def proc_cpu(pid):
    """utime + stime jiffies of process pid (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read()
    f = st[st.rfind(")") + 2:].split()
    return int(f[11]) + int(f[12])


def wait_quiet(limit, busy_max=0.15):
    """Waits (up to limit seconds) until the machine is <busy_max busy over 5 s."""
    t0 = time.time()
    while True:
        b0, t_0 = machine_busy()
        time.sleep(5)
        b1, t_1 = machine_busy()
        frac = (b1 - b0) / max(1, t_1 - t_0)
        if frac < busy_max or time.time() - t0 > limit:
            return frac, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    model_file = os.path.join(ROOT, ".ci", ".model-dir")
    default_model = open(model_file).read().strip() if os.path.exists(model_file) else None
    ap.add_argument("--model", default=default_model,
                    help="all-MiniLM-L6-v2 model dir (default: .ci/.model-dir)")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "datasets", "dev-gcide-50k"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "examples", "rerank_bench"))
    ap.add_argument("--threads", default="2,1")
    ap.add_argument("--ns", default="10,20,50,100")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=20.0, help="time budget per (N, threads)")
    ap.add_argument("--min-samples", type=int, default=30)
    ap.add_argument("--max-samples", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "rerank-speed"))
    ap.add_argument("--wait-quiet", type=float, default=900,
                    help="wait up to this many seconds for the machine to go idle first")
    ap.add_argument("--busy-max", type=float, default=0.15,
                    help="idle means less than this fraction of all CPUs busy over 5 s")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite the .md (next to JSON) from an earlier run's .json")
    a = ap.parse_args()
    if a.render:
        with open(a.render) as f:
            render(json.load(f), a.render[:-len(".json")] if a.render.endswith(".json") else a.render)
        return
    if not a.model:
        raise SystemExit("--model DIR required (or run bash .ci/model.sh first)")

    quiet_busy, waited = (wait_quiet(a.wait_quiet, a.busy_max) if a.wait_quiet > 0
                          else (None, 0))
    load_start = os.getloadavg()
    t0 = time.time()
    cmd = [a.bin, "--model", a.model, "--data", a.data, "--threads", a.threads, "--ns", a.ns,
           "--batch", str(a.batch), "--seconds", str(a.seconds), "--min-samples",
           str(a.min_samples), "--max-samples", str(a.max_samples), "--warmup", str(a.warmup)]
    # Other jobs' CPU use during the run: machine busy time minus the benchmark's own.
    hz = os.sysconf("SC_CLK_TCK")
    m0 = machine_busy()[0]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    own = 0
    while p.poll() is None:
        try:
            own = proc_cpu(p.pid)
        except (OSError, IndexError, ValueError):
            pass
        time.sleep(0.5)
    m1 = machine_busy()[0]
    stdout, stderr = p.communicate()
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({p.returncode}):\n{stderr}")
    r = json.loads(stdout.strip().splitlines()[-1])
    elapsed = time.time() - t0
    others = max(0.0, (m1 - m0 - own) / hz) / elapsed
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    out = {
        "schema": "searchd.bench-rerank.v1",
        "dataset": "dev-gcide-50k",
        "what": "CrossEncoder::score(query, top N passages) latency; random classifier weights "
                "on the all-MiniLM-L6-v2 encoder (shape of cross-encoder/ms-marco-MiniLM-L-6-v2): "
                "measures cost, not quality",
        "command": cmd,
        **r,
        "cpu": cpu_info(),
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "idle_before_start": {"busy_fraction": quiet_busy, "waited_seconds": waited},
        "other_jobs_cpu_per_wall_second": others,
        "elapsed_seconds": elapsed,
        "rust": rustc,
        "git": git,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    with open(a.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    render(out, a.out)


def render(out, path):
    """Writes path.md from the results dict (also: --render FILE.json)."""
    r = out
    git, elapsed, others = out["git"], out["elapsed_seconds"], out["other_jobs_cpu_per_wall_second"]
    load_start = out["loadavg_start"]
    quiet_busy = out["idle_before_start"]["busy_fraction"]
    waited = out["idle_before_start"]["waited_seconds"]
    runs = r["runs"]
    threads = sorted({x["threads"] for x in runs}, reverse=True)
    ns = sorted({x["n"] for x in runs})
    by = {(x["threads"], x["n"]): x for x in runs}
    m = r["model"]
    md = [
        "# Reranker latency: dev-gcide-50k, score(query, top N)",
        "",
        f"`CrossEncoder::score` on (query, passage) pairs: a headword query from `queries.jsonl` "
        f"(rotating over {r['data']['queries']:,} queries) against N passages from `passages.jsonl` "
        f"(its judged passages first, then others at a rotating offset). "
        f"{r['tokens_per_pair']:.1f} tokens per pair on average "
        f"({100 * r['truncated_pairs_fraction']:.1f}% over the {m['window']}-token window), "
        f"batch {r['batch']} (sorted by length, packed: no pad rows), "
        f"{r['warmup']} warm-up calls per cell, then calls rotating over all cells (N x threads) "
        f"so machine noise spreads evenly, at least {r['min_samples']} per cell and "
        f"{r['seconds_per_n']:g} s x cells in all (at most {r['max_samples']} per cell). "
        f"Timings include tokenisation. Machine: {out['cpu']['model']}, {out['cpu']['cpus']} cores. "
        f"git {git[:10]}, {out['date']}.",
        "",
        "**The classifier weights are random** (seeded) on top of the all-MiniLM-L6-v2 encoder"
        + (" and its pooler" if m.get("pooler_from_file") else "")
        + ": the model has exactly the shape and compute of cross-encoder/ms-marco-MiniLM-L-6-v2 "
        "(6 layers, hidden 384, 12 heads, intermediate 1536), so this measures cost, not "
        "ranking quality. The VM is shared and noisy: expect ±10-15% between runs. "
        "Cost grows with tokens per pair: GCIDE definitions are short "
        f"({r['tokens_per_pair']:.0f} tokens per pair here); MS MARCO-style passages of "
        "60-100 words make ~100-150-token pairs, i.e. roughly 3-4x these latencies.",
        "",
        "| N | " + " | ".join(f"p50 ms (t={t}) | p99 ms (t={t}) | min ms (t={t}) | pairs/s (t={t}) "
                             f"| pairs/CPU-s (t={t})" for t in threads)
        + " | samples |",
        "|---:|" + "---:|---:|---:|---:|---:|" * len(threads) + "---:|",
    ]
    for n in ns:
        cells = []
        for t in threads:
            x = by[(t, n)]
            cells.append(f"{x['p50_ms']:.1f} | {x['p99_ms']:.1f} | {x['min_ms']:.1f} | "
                         f"{x['pairs_per_s']:.0f} | "
                         f"{x['pairs_per_s'] / max(1e-9, x['cpu_seconds_per_wall_second']):.0f}")
        samples = "/".join(str(by[(t, n)]["samples"]) for t in threads)
        md.append(f"| {n} | " + " | ".join(cells) + f" | {samples} |")
    hist = out.get("earlier_runs") or []
    if hist:
        md += ["", "Earlier runs of this script (same code, `--min-samples` 30-60), p50 ms at "
               "t=2 / t=1, with the CPU other jobs took meanwhile; the table above is the one "
               "run on an idle machine:", "",
               "| run | other jobs CPU/s | " + " | ".join(f"N={n}" for n in ns) + " |",
               "|---|---:|" + "---:|" * len(ns)]
        for h in hist:
            hb = {(x["threads"], x["n"]): x for x in h["runs"]}
            md.append(f"| {h['date']} | {h['other_jobs_cpu_per_wall_second']:.2f} | " + " | ".join(
                "/".join(f"{hb[(t, n)]['p50_ms']:.0f}" for t in threads) for n in ns) + " |")
    md += [
        "",
        "p99 is nearest-rank over the samples (with ~30-60 samples it is close to the maximum). "
        "min is the quietest call (closest to the uncontended cost). pairs/CPU-s divides by "
        "the CPU the benchmark actually got, so it moves less with other jobs' load. "
        "pairs/s = N x calls / time inside `score`. CPU seconds per second inside `score`: "
        + ", ".join(f"t={x['threads']} N={x['n']}: {x['cpu_seconds_per_wall_second']:.2f}" for x in runs)
        + ".",
        "",
        f"Load average (1/5/15 min) at start {tuple(round(v, 2) for v in load_start)}, at end "
        f"{tuple(round(v, 2) for v in out['loadavg_end'])}; other jobs used "
        f"{others:.2f} CPU-seconds per second during the run (machine busy time minus the "
        f"benchmark's own; other engineers' builds share the 2 cores)"
        + (f", after waiting {waited:.0f} s for an idle machine ({100 * quiet_busy:.0f}% busy at start)"
           if quiet_busy is not None else "")
        + f". Model load {r['load_seconds']:.2f} s. Whole run {elapsed:.0f} s.",
        "",
        "Made by `bench/rerank_speed.py` (runs `crates/embed/examples/rerank_bench.rs`); every "
        "sample's summary is in `rerank-speed.json`. For real scores, download "
        "cross-encoder/ms-marco-MiniLM-L-6-v2 (config.json, model.safetensors, tokenizer.json) "
        "and point `--rerank-model DIR` at it; see the `searchd-embed` crate docs.",
        "",
    ]
    with open(path + ".md", "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
