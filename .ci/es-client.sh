#!/usr/bin/env bash
# Installs the official Elasticsearch Python client, 8.x and 9.x, each into its own venv
# (.ci/.venv-es8, .ci/.venv-es9), and writes their pythons to .ci/.es-pythons (one line,
# space-separated) for SEARCHD_TEST_ES_PYTHON (crates/server/tests/es_client.rs).
# Idempotent. Usable outside CI too:
#   bash .ci/es-client.sh && export SEARCHD_TEST_ES_PYTHON="$(cat .ci/.es-pythons)"
set -euo pipefail
cd "$(dirname "$0")"
out=""
for major in 8 9; do
    VENV=".venv-es$major"
    if [ ! -x "$VENV/bin/python" ]; then
        if ! python3 -m venv "$VENV" 2>/dev/null; then
            rm -rf "$VENV"
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
            python3 -m venv "$VENV"
        fi
    fi
    if ! "$VENV/bin/python" -c "import elasticsearch, sys; sys.exit(elasticsearch.__version__[0] != $major)" 2>/dev/null; then
        "$VENV/bin/python" -m pip install --quiet "elasticsearch>=$major,<$((major + 1))"
    fi
    out="$out $(cd "$VENV/bin" && pwd)/python"
done
echo "${out# }" > .es-pythons
