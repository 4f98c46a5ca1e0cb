#!/usr/bin/env bash
# Set up anchorlog on a fresh machine: Graphviz (for `anchorlog draw`) from Debian's packages when missing,
# a virtual environment in .venv, and the package (with test tools when called with --dev).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v dot >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq graphviz >/dev/null) || echo "setup: could not install graphviz; 'anchorlog draw' will say how to get it" >&2
  else
    echo "setup: graphviz missing; install it (apt-get install graphviz) for 'anchorlog draw'" >&2
  fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if [ "${1:-}" = "--dev" ]; then
  .venv/bin/python -m pip install -q -e '.[dev]'
else
  .venv/bin/python -m pip install -q -e .
fi
