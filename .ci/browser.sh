#!/usr/bin/env bash
# Installs Debian's Chromium and its WebDriver (packages chromium, chromium-driver) when
# missing, and writes their paths to .ci/.chromium and .ci/.chromedriver for
# SEARCHD_TEST_CHROMIUM and SEARCHD_TEST_CHROMEDRIVER (crates/server/tests/console_browser.rs).
# Idempotent. Usable outside CI too:
#   bash .ci/browser.sh && export SEARCHD_TEST_CHROMIUM="$(cat .ci/.chromium)" \
#       SEARCHD_TEST_CHROMEDRIVER="$(cat .ci/.chromedriver)"
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "installing chromium and chromium-driver" >&2
    apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null
fi
command -v chromium > .chromium
command -v chromedriver > .chromedriver
