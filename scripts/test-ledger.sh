#!/usr/bin/env bash
# What the tests that need something from the machine did (crates/testkit/src/needs.rs):
# counts the ledger's lines per need and fails when a need CI must provide (the model, the
# Qdrant binary, namespaces, the Elasticsearch clients, redis-server, Chromium) was used
# by no test, or when one of them was skipped. `docs-examples` counts the README's and
# docs/*.md's shell blocks that crates/cli/tests/docs_examples.rs ran (it must be > 0).
#
#   bash scripts/test-ledger.sh target/test-ledger.txt
set -euo pipefail
ledger="${1:?usage: test-ledger.sh LEDGER}"
touch "$ledger"
echo "tests that ran with what they need (from $ledger):"
status=0
for need in model qdrant namespaces es-client redis browser docs-examples cgroup; do
    ran=$(grep -c "^$need " "$ledger" || true)
    skipped=$(grep -c "^skipped:$need " "$ledger" || true)
    printf '  %-13s %3d ran, %d skipped\n' "$need" "$ran" "$skipped"
    if [ "$need" != cgroup ] && { [ "$ran" -eq 0 ] || [ "$skipped" -ne 0 ]; }; then
        echo "  error: the tests that need $need did not all run" >&2
        status=1
    fi
done
exit $status
