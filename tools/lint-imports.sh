#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# The import contracts of ARCHITECTURE.md (lint stage of tools/test.sh, next to ruff):
#   1. no production module imports a test or bench module (tools/importgraph.py --check-tests);
#   2. import-linter's contracts in .importlinter (layers, independence, forbidden dependencies).
#
# import-linter (grimp) finds a package's modules by walking its directory, but the source tree is
# not the installed layout (setup.py maps vnf/ to fluidvim.vnf, ...; the editable install maps
# them at import time). So it runs on a tree of symlinks in the installed layout, from a
# directory where the repo's own fluidvim/ is not on sys.path.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
PY=${PY:-$repo/.venv/bin/python}

"$PY" tools/importgraph.py --check-tests

tree=$(mktemp -d /tmp/fluidvim-lint-imports.XXXXXX)
trap 'rm -rf "$tree"' EXIT
"$PY" tools/importgraph.py --tree "$tree"
cd "$tree"
PYTHONPATH="$tree" "$(dirname "$PY")/lint-imports" --config "$repo/.importlinter" --no-cache "$@"
