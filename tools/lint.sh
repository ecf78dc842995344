#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# The lint stage (tools/test.sh, `make lint`): the project's habits, each step timed.
#   ruff     style, imports, bugbear, complexity (C901) and argument count (PLR0913): pyproject.toml
#   imports  the import contracts of ARCHITECTURE.md (tools/lint-imports.sh)
#   sizes    modules <= 600 lines, functions <= 60 lines, or listed with a reason (tools/sizes.py)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv/bin}

step() {
  local name=$1 t0=$SECONDS
  shift
  "$@" || { echo "lint: $name failed" >&2; return 1; }
  printf 'lint: %-12s ok (%d s)\n' "$name" $((SECONDS - t0))
}

step ruff "$VENV/ruff" check .
step imports tools/lint-imports.sh
step sizes "$VENV/python" tools/sizes.py
