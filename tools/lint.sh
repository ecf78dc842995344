#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# The lint stage (tools/test.sh, `make lint`): the project's habits, each step timed.
#   ruff        style, imports, bugbear, complexity (C901) and argument count (PLR0913): pyproject.toml
#   imports     the import contracts of ARCHITECTURE.md (tools/lint-imports.sh)
#   sizes       modules <= 600 lines, functions <= 60 lines, or listed with a reason (tools/sizes.py)
#   types       mypy on the launch core and the orchestrator's core (pyproject.toml [tool.mypy])
#   shell       shellcheck on tools/*.sh, .ci/run and the unikernel's scripts
#   gofmt       gofmt -l on nomad_driver/
#
#   tools/lint.sh               run these steps
#   tools/lint.sh staticcheck   staticcheck on nomad_driver/: in tools/test.sh's go stage, beside
#                               go vet, since a cold run analyses all of Nomad's packages (minutes)
#   tools/lint.sh install       build the pinned staticcheck into build/lint/bin (tools/bootstrap.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv/bin}
STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2
LINT_BIN=$ROOT/build/lint/bin
# the launch core and the orchestrator's core, as installed (fluidvim.vnf = vnf/, ...)
TYPED=(fluidvim/vnf fluidvim/orchestrator/placement.py fluidvim/orchestrator/slots.py
       fluidvim/orchestrator/queuing.py fluidvim/orchestrator/resolver.py)
SHELL_SCRIPTS=(tools/*.sh .ci/run unikernel/scripts/*.sh unikernel/tests/*.sh)

install_staticcheck() {
  local version=${STATICCHECK#*@v}     # `staticcheck -version` ends with "(0.8.2)"
  if [[ "$("$LINT_BIN/staticcheck" -version 2>/dev/null)" != *"($version)" ]]; then
    (cd nomad_driver && GOBIN=$LINT_BIN go install "$STATICCHECK")
  fi
}

if [ "${1:-}" = install ]; then
  install_staticcheck
  exit 0
fi

step() {
  local name=$1 t0=$SECONDS
  shift
  "$@" || { echo "lint: $name failed" >&2; return 1; }
  printf 'lint: %-11s ok (%d s)\n' "$name" $((SECONDS - t0))
}

# mypy resolves fluidvim.* imports on a tree of links in the installed layout (as lint-imports)
types() {
  local tree rc=0
  mkdir -p "$ROOT/build/lint"
  tree=$(mktemp -d "$ROOT/build/lint/tree.XXXXXX")     # per run: two lint runs do not collide
  "$VENV/python" tools/importgraph.py --tree "$tree"
  (cd "$tree" && "$VENV/mypy" --config-file "$ROOT/pyproject.toml" --cache-dir "$ROOT/build/lint/mypy" \
    "${TYPED[@]}") || rc=$?
  rm -rf "$tree"
  return $rc
}

gofmt_check() {
  local unformatted
  unformatted=$(cd nomad_driver && gofmt -l .)
  if [ -n "$unformatted" ]; then
    echo "gofmt: not formatted (run gofmt -w): $unformatted" >&2
    return 1
  fi
}

staticcheck_run() {
  install_staticcheck
  (cd nomad_driver && "$LINT_BIN/staticcheck" ./...)
}

if [ "${1:-}" = staticcheck ]; then
  step staticcheck staticcheck_run
  exit 0
fi

step ruff "$VENV/ruff" check .
step imports tools/lint-imports.sh
step sizes "$VENV/python" tools/sizes.py
step types types
step shell shellcheck "${SHELL_SCRIPTS[@]}"
step gofmt gofmt_check
