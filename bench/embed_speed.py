#!/usr/bin/env python3
"""Embedding speed: searchd-embed (Rust, candle) vs a numpy forward pass of the same
weights (OpenBLAS), and sentence-transformers/torch when available.

Same texts (the first N dev-gcide passages), same batching for all: tokenise, truncate at
max_length (128), sort by length, batches of 32, pad to the longest in each batch.

  python3 -m venv /tmp/embvenv && /tmp/embvenv/bin/pip install numpy tokenizers safetensors threadpoolctl
  cargo build --release -p searchd-embed --example embed_bench
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /tmp/embvenv/bin/python bench/embed_speed.py \
      --model "$(crates/embed/tests/find_model.sh /tmp/mvenv/bin/python)" \
      --torch-python /tmp/mvenv/bin/python

Writes bench/results/embed-speed-gcide.{md,json} (schema searchd.embed-bench.v1).
FLOP counting (per batch of b rows padded to s tokens, per layer): linear layers
2*b*s*(4*h*h + 2*h*i), attention 4*b*s*s*h (QK^T and PV); embeddings/LN/softmax/GELU are
not counted. Peak = cores x 2 FMA units x 8 f32 lanes x 2 flops x clock.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load_texts(path, n):
    out = []
    with open(path) as f:
        for line in f:
            out.append(json.loads(line)["text"])
            if len(out) >= n:
                break
    return out


def batches_of(lens, batch):
    order = sorted(range(len(lens)), key=lambda i: -lens[i])
    return [order[i:i + batch] for i in range(0, len(order), batch)]


def flops(lens, batch, h, inter, layers):
    total = 0
    padded = 0
    for b in batches_of(lens, batch):
        s = max(lens[i] for i in b)
        n = len(b)
        padded += n * s
        total += layers * (2 * n * s * (4 * h * h + 2 * h * inter) + 4 * n * s * s * h)
    return total, padded


# ---------------------------------------------------------------- numpy forward

def erf(x, np):
    """erf for float32: the rational approximation on [-4, 4] that Eigen/XLA use (and
    searchd-embed's kernel), evaluated in place to keep numpy's temporaries down."""
    x = np.clip(x, -4.0, 4.0)
    x2 = x * x
    p = x2 * np.float32(-2.7261424e-10)
    for c in (2.7706814e-08, -2.101024e-06, -5.6925064e-05, -7.3499063e-04, -2.9546e-03,
              -1.6096033e-02):
        p += np.float32(c)
        if c != -1.6096033e-02:
            p *= x2
    p *= x
    q = x2 * np.float32(-1.4566072e-05)
    for c in (-2.1337406e-04, -1.682827e-03, -7.373329e-03):
        q += np.float32(c)
        q *= x2
    q += np.float32(-1.426474e-02)
    p /= q
    return p


class NumpyBert:
    def __init__(self, model_dir):
        import numpy as np
        from safetensors.numpy import load_file
        self.np = np
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        w = load_file(os.path.join(model_dir, "model.safetensors"))
        w = {k[5:] if k.startswith("bert.") else k: v.astype(np.float32) for k, v in w.items()}
        self.h = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.eps = cfg.get("layer_norm_eps", 1e-12)
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.eln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for l in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{l}."
            g = lambda n: w[p + n]
            wqkv = np.ascontiguousarray(np.concatenate(
                [g("attention.self.query.weight"), g("attention.self.key.weight"),
                 g("attention.self.value.weight")], 0).T)
            bqkv = np.concatenate([g("attention.self.query.bias"), g("attention.self.key.bias"),
                                   g("attention.self.value.bias")])
            self.layers.append(dict(
                wqkv=wqkv, bqkv=bqkv,
                wo=np.ascontiguousarray(g("attention.output.dense.weight").T),
                bo=g("attention.output.dense.bias"),
                ln1=(g("attention.output.LayerNorm.weight"), g("attention.output.LayerNorm.bias")),
                wi=np.ascontiguousarray(g("intermediate.dense.weight").T),
                bi=g("intermediate.dense.bias"),
                wo2=np.ascontiguousarray(g("output.dense.weight").T),
                bo2=g("output.dense.bias"),
                ln2=(g("output.LayerNorm.weight"), g("output.LayerNorm.bias")),
            ))

    def ln(self, x, gb):
        np = self.np
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + self.eps) * gb[0] + gb[1]

    def forward(self, ids, lens):
        """ids: (b, s) int; lens: (b,) real lengths. Returns mean-pooled, normalised (b, h)."""
        np = self.np
        b, s = ids.shape
        h, nh = self.h, self.nh
        hd = h // nh
        x = self.word[ids] + self.pos[:s] + self.type0
        x = self.ln(x, self.eln).reshape(b * s, h)
        valid = np.arange(s)[None, :] < lens[:, None]
        mask = np.where(valid, 0.0, -1e30).astype(np.float32)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(hd))
        for L in self.layers:
            qkv = x @ L["wqkv"] + L["bqkv"]
            qkv = qkv.reshape(b, s, 3, nh, hd).transpose(2, 0, 3, 1, 4)
            q, k, v = (np.ascontiguousarray(qkv[j]) for j in range(3))
            sc = (q @ k.transpose(0, 1, 3, 2)) * scale + mask
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            sc /= sc.sum(-1, keepdims=True)
            ctx = (sc @ v).transpose(0, 2, 1, 3).reshape(b * s, h)
            a = self.ln(ctx @ L["wo"] + L["bo"] + x, L["ln1"])
            u = a @ L["wi"] + L["bi"]
            u = 0.5 * u * (1.0 + erf(u * np.float32(0.7071067811865476), np))
            x = self.ln(u @ L["wo2"] + L["bo2"] + a, L["ln2"])
        x = x.reshape(b, s, h)
        m = valid[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / lens[:, None]
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def run_numpy(args, texts):
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(args.max_length)
    model = NumpyBert(args.model)
    with threadpool_limits(limits=args.threads):
        info = threadpool_info()

        def embed(tx):
            enc = tok.encode_batch(tx)
            lens = [len(e.ids) for e in enc]
            out = np.zeros((len(tx), model.h), np.float32)
            for bidx in batches_of(lens, args.batch):
                s = max(lens[i] for i in bidx)
                ids = np.zeros((len(bidx), s), np.int64)
                for r, i in enumerate(bidx):
                    ids[r, :lens[i]] = enc[i].ids
                out[bidx] = model.forward(ids, np.array([lens[i] for i in bidx], np.float32))
            return out

        embed(texts[:64])
        t0 = time.perf_counter()
        c0 = time.process_time()
        vecs = embed(texts)
        secs = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return secs, cpu, vecs, info


def run_torch_child(args):
    """Runs inside the torch venv; prints one JSON line."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(args.threads)
    texts = load_texts(args.data, args.n)
    m = SentenceTransformer(args.model, device="cpu")
    m.max_seq_length = args.max_length
    m.encode(texts[:64], batch_size=args.batch)
    t0 = time.perf_counter()
    c0 = time.process_time()
    v = m.encode(texts, batch_size=args.batch, convert_to_numpy=True, normalize_embeddings=False)
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0
    np.save(args.torch_out, v.astype(np.float32))
    print(json.dumps({"seconds": secs, "cpu_seconds": cpu, "torch": torch.__version__,
                      "torch_threads": torch.get_num_threads(),
                      "sentence_transformers": __import__("sentence_transformers").__version__,
                      "mkldnn": torch.backends.mkldnn.is_available()}))


def lock_version(name):
    try:
        lines = open(os.path.join(ROOT, "Cargo.lock")).read().splitlines()
    except OSError:
        return None
    for i, line in enumerate(lines):
        if line == f'name = "{name}"' and i + 1 < len(lines):
            return lines[i + 1].split('"')[1]
    return None


def cpu_info():
    model, mhz, flags = "?", None, ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            k = k.strip()
            if k == "model name" and model == "?":
                model = v.strip()
            elif k == "cpu MHz" and mhz is None:
                mhz = float(v)
            elif k == "flags" and not flags:
                flags = v
    return model, mhz, ("avx2" in flags.split()), ("fma" in flags.split()), ("avx512f" in flags.split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("SEARCHD_TEST_MODEL"))
    ap.add_argument("--data", default="/work/shared/datasets/dev-gcide-50k/passages.jsonl")
    ap.add_argument("--refs", default="/work/shared/datasets/dev-gcide-50k/base.f16.npy")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--rust-bin", default=os.path.join(ROOT, "target/release/examples/embed_bench"))
    ap.add_argument("--torch-python", default=None, help="python with sentence-transformers")
    ap.add_argument("--rounds", type=int, default=2,
                    help="run every engine this many times, interleaved; report the fastest")
    ap.add_argument("--out", default=os.path.join(HERE, "results/embed-speed-gcide"))
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--torch-out", default="/tmp/embed_speed_torch.npy", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.model:
        sys.exit("--model DIR or SEARCHD_TEST_MODEL is required")
    if args.torch_child:
        return run_torch_child(args)

    import numpy as np
    import tokenizers
    import threadpoolctl
    texts = load_texts(args.data, args.n)
    cfg = json.load(open(os.path.join(args.model, "config.json")))
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(args.max_length)
    lens = [len(e.ids) for e in tok.encode_batch(texts)]
    total_flops, padded = flops(lens, args.batch, h, inter, layers)
    model_name, mhz, avx2, fma, avx512 = cpu_info()
    cores = args.threads
    peak = cores * 2 * 8 * 2 * mhz / 1000.0  # GFLOP/s
    ref = np.load(args.refs)[: len(texts)].astype(np.float32)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)

    def acc(v):
        return {"max_abs_diff_vs_dataset": float(np.abs(v - ref).max()),
                "min_cosine_vs_dataset": float((v * ref).sum(1).min())}

    rows = []
    load_start = os.getloadavg()

    def rust_once():
        # In a child process so its thread pool does not share the process with OpenBLAS.
        rust_vec = "/tmp/embed_speed_rust.f32"
        cmd = [args.rust_bin, "--model", args.model, "--data", args.data, "--n", str(args.n),
               "--threads", str(args.threads), "--batch", str(args.batch),
               "--max-length", str(args.max_length), "--out-vectors", rust_vec]
        print("running", " ".join(cmd), file=sys.stderr)
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        r["candle"] = lock_version("candle-core")
        r["rustc"] = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
        rv = np.fromfile(rust_vec, np.float32).reshape(len(texts), h)
        return dict(engine="searchd-embed (Rust, candle)", seconds=r["seconds"],
                    cpu_seconds=r.get("cpu_seconds"),
                    detail=f"candle {r.get('candle', '?')}, threads={r['threads']}", **acc(rv)), r

    def numpy_once():
        print("running numpy", file=sys.stderr)
        secs, cpu, nv, info = run_numpy(args, texts)
        blas = [dict(internal_api=i.get("internal_api"), version=i.get("version"),
                     num_threads=i.get("num_threads"), architecture=i.get("architecture"),
                     threading_layer=i.get("threading_layer"), filepath=i.get("filepath"))
                for i in info if i.get("user_api") == "blas"]
        kern = ", ".join(f"{b['internal_api']} {b['version']} {b['architecture']} x{b['num_threads']}"
                         for b in blas)
        return dict(engine="numpy forward (same weights)", seconds=secs, cpu_seconds=cpu,
                    detail=f"numpy {np.__version__}, {kern}", **acc(nv)), (blas, kern)

    def torch_once():
        print("running torch", file=sys.stderr)
        cmd = [args.torch_python, os.path.abspath(__file__), "--torch-child", "--model", args.model,
               "--data", args.data, "--n", str(args.n), "--threads", str(args.threads),
               "--batch", str(args.batch), "--max-length", str(args.max_length),
               "--torch-out", args.torch_out]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print("torch run failed:\n" + p.stderr[-2000:], file=sys.stderr)
            return None, None
        tm = json.loads(p.stdout.strip().splitlines()[-1])
        tv = np.load(args.torch_out)
        tv /= np.linalg.norm(tv, axis=1, keepdims=True)
        return dict(engine="sentence-transformers (torch)", seconds=tm["seconds"],
                    cpu_seconds=tm.get("cpu_seconds"),
                    detail=f"torch {tm['torch']}, st {tm['sentence_transformers']}, "
                           f"set_num_threads({tm['torch_threads']})", **acc(tv)), tm

    engines = [rust_once, numpy_once] + ([torch_once] if args.torch_python else [])
    best = {}
    meta = {}
    history = {}
    for rnd in range(args.rounds):
        for fn in engines:
            row, m = fn()
            if row is None:
                continue
            history.setdefault(row["engine"], []).append(
                {"seconds": row["seconds"], "cpu_seconds": row["cpu_seconds"],
                 "loadavg_1m": os.getloadavg()[0]})
            if row["engine"] not in best or row["seconds"] < best[row["engine"]]["seconds"]:
                best[row["engine"]] = row
                meta[fn.__name__] = m
    rows = [best[k] for k in history]
    for row in rows:
        row["all_runs"] = history[row["engine"]]
    r = meta["rust_once"]
    blas, kern = meta["numpy_once"]
    torch_meta = meta.get("torch_once")

    np_secs = rows[1]["seconds"]
    for row in rows:
        row["passages_per_s"] = len(texts) / row["seconds"]
        row["gflops"] = total_flops / row["seconds"] / 1e9
        row["pct_of_peak"] = 100.0 * row["gflops"] / peak
        row["speed_vs_numpy"] = np_secs / row["seconds"]
        if row.get("cpu_seconds"):
            row["passages_per_cpu_s"] = len(texts) / row["cpu_seconds"]
            row["cpu_per_wall"] = row["cpu_seconds"] / row["seconds"]

    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    out = {
        "schema": "searchd.embed-bench.v1",
        "dataset": "dev-gcide-50k", "texts": len(texts), "threads": args.threads,
        "batch": args.batch, "max_length": args.max_length, "rounds": args.rounds,
        "reported": "fastest of the rounds per engine (engines interleaved)",
        "model": {"dir": args.model, "hidden": h, "intermediate": inter, "layers": layers,
                  "name": r.get("model"), "checksum": r.get("checksum")},
        "tokens": sum(lens), "padded_tokens": padded, "matmul_gflop": total_flops / 1e9,
        "cpu": {"model": model_name, "mhz": mhz, "avx2": avx2, "fma": fma, "avx512f": avx512,
                "peak_gflops": peak, "peak_formula": f"{cores} cores x 2 FMA x 8 f32 x 2 x {mhz} MHz"},
        "env": {k: os.environ.get(k) for k in ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                               "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS",
                                               "OMP_NUM_THREADS"]},
        "blas": blas,
        "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "tokenizers_py": tokenizers.__version__, "threadpoolctl": threadpoolctl.__version__,
                     "rust": r.get("rustc"), "candle": r.get("candle"), "torch": torch_meta},
        "git": git, "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "rows": rows,
    }
    with open(args.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
    md = [f"# Embedding speed: dev-gcide-50k, first {len(texts):,} passages",
          "",
          f"all-MiniLM-L6-v2 ({layers} layers, h={h}, i={inter}), max_length {args.max_length}, "
          f"sorted by length, batch {args.batch}, {args.threads} threads; "
          f"{sum(lens):,} tokens, {padded:,} padded, {total_flops / 1e9:.1f} GFLOP of matmul. "
          f"Fastest of {args.rounds} interleaved rounds per engine (every run is in the .json). "
          f"Timings include tokenisation. Machine: {model_name}, {mhz:.0f} MHz, "
          f"peak {peak:.1f} GFLOP/s for {cores} cores (2 FMA x 8 f32 x 2 flops x clock). "
          f"git {git[:10]}, {out['date']}.",
          "",
          "| engine | seconds | passages/s | vs numpy | GFLOP/s | % peak | CPU s | CPU/wall | passages/CPU-s | max abs diff vs data set | min cosine | detail |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        md.append(f"| {row['engine']} | {row['seconds']:.2f} | {row['passages_per_s']:.0f} | "
                  f"{row['speed_vs_numpy']:.2f}x | {row['gflops']:.1f} | {row['pct_of_peak']:.0f}% | "
                  f"{row.get('cpu_seconds') or 0:.1f} | {row.get('cpu_per_wall') or 0:.2f} | {row.get('passages_per_cpu_s') or 0:.0f} | "
                  f"{row['max_abs_diff_vs_dataset']:.1e} | {row['min_cosine_vs_dataset']:.6f} | {row['detail']} |")
    md += [""] + [f"- {row['engine']}: all runs " + ", ".join(
        f"{x['seconds']:.1f} s (load {x['loadavg_1m']:.1f})" for x in row["all_runs"]) for row in rows]
    md += ["", f"Load average (1/5/15 min) at start {load_start}, at end {out['loadavg_end']} "
           "(other jobs share this 2-core machine; CPU seconds and passages per CPU-second are "
           "less sensitive to that than wall time).",
           "", f"BLAS (threadpoolctl): {kern or 'none found'}. Env for the run: "
           + ", ".join(f"{k}={v}" for k, v in out["env"].items()) + ".",
           "", "Made by `bench/embed_speed.py`; the accuracy columns compare with the data set's "
           "float16 reference vectors (renormalised), so ~1e-4 is float16 rounding.", ""]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
