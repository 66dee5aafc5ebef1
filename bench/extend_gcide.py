"""A graph extended by new rows vs one built from nothing, on dev-gcide-50k.

Runs `crates/engine/examples/extend_bench.rs` (release) for several shares of the base
graph's rows deleted, with all cores and with one thread, and writes
bench/results/extend-gcide.{jsonl,md}: build seconds, recall@10 at ef 32/64/128 (tie-aware,
against exact search over the same rows) and the share of new rows found by their own
vector, for both indexes of each configuration (built one after the other in the same run).

    python bench/extend_gcide.py [--data bench/data/gcide] [--work /tmp/extend-gcide]
"""
import argparse
import json
import subprocess
from pathlib import Path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="bench/data/gcide")
    ap.add_argument("--work", default="/tmp/extend-gcide")
    ap.add_argument("--new", type=int, default=5000)
    ap.add_argument("--out", default="bench/results/extend-gcide")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "searchd-engine", "--example", "extend_bench"],
                   check=True)
    rows = []
    configs = [(d, 0) for d in (0.0, 0.02, 0.05, 0.10, 0.25)] + [(0.0, 1), (0.10, 1)]
    for deleted, threads in configs:
        out = subprocess.run(["target/release/examples/extend_bench", "--base", f"{a.data}/base.npy",
                              "--queries", f"{a.data}/queries.npy", "--index", a.work, "--new", str(a.new),
                              "--deleted", str(deleted), "--nq", "2000", "--threads", str(threads)],
                             check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            r = json.loads(line)
            r["deleted_share"] = deleted
            rows.append(r)
            print(line, flush=True)
    Path(a.out + ".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with open(a.out + ".md", "w") as f:
        f.write("# Extending a graph vs building it: dev-gcide-50k (MiniLM-L6, 384-d)\n\n")
        f.write(f"`bench/extend_gcide.py`: a base HNSW graph (m 16, ef_construction 200, cosine) over the first "
                f"{50000 - a.new:,} rows; then, for the base rows kept (a seeded share deleted) plus the last "
                f"{a.new:,} rows, one index built from nothing (`build_index`) and one extending the base's graph "
                "(`extend_index`), one after the other in the same run. Recall@10 over 2,000 queries, tie-aware, "
                "against exact search over the same rows; 'own' = share of the new rows found first by their own "
                "vector (ef 64). Threads 0 = both cores.\n\n")
        f.write("| base deleted | threads | rows | build s (full) | build s (extended) | speed-up | recall ef32 full / ext | ef64 full / ext | ef128 full / ext | own full / ext |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|\n")
        for i in range(0, len(rows), 2):
            fu, ex = rows[i], rows[i + 1]
            assert fu["index"] == "full" and ex["index"] == "extended"
            rf, re = fu["recall_at_ef"], ex["recall_at_ef"]
            f.write(f"| {fu['deleted_share']:.0%} | {fu['threads']} | {fu['rows']:,} | {fu['build_seconds']:.2f} | "
                    f"{ex['build_seconds']:.2f} | {fu['build_seconds'] / ex['build_seconds']:.1f}x | "
                    + " | ".join(f"{rf[e]:.4f} / {re[e]:.4f}" for e in ("32", "64", "128"))
                    + f" | {fu['new_rows_found_first']:.4f} / {ex['new_rows_found_first']:.4f} |\n")


if __name__ == "__main__":
    main()
