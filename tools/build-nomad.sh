#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# Builds a Nomad agent (for the end-to-end test, tests/e2e/test_nomad.py) and the fluidvim
# unikernel task driver plugin.
#
#   tools/build-nomad.sh [PLUGIN_DIR]
#
# The agent is built from source with the Go toolchain (Go module proxy only; no GitHub
# release download) from nomad_driver's own module: its go.mod lists github.com/hashicorp/nomad
# as a `tool`, so the agent links exactly the dependency versions the plugin does, and is built
# with the flags of `go vet`/`go test` there (no flags of its own: $GOFLAGS and CGO_ENABLED,
# which tools/test.sh sets for every Go command). One GOCACHE then serves both: the ~600
# packages the plugin and its tests share with the agent are compiled once. The agent goes into
# a cache directory outside the repository:
#   $NOMAD_CACHE_DIR (default /var/cache/fluidvim/nomad-<version in nomad_driver/go.mod>)/nomad
# and is not rebuilt if it already exists (~5 min cold on 2 cores).
# The Nomad binary is BUSL-1.1: never commit it.
#
# If PLUGIN_DIR is given, the plugin is built into PLUGIN_DIR/fluidvim-unikernel (always rebuilt).
# Prints the agent path on the last line of stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NOMAD_VERSION=$(cd "$here/nomad_driver" && go list -m -f '{{.Version}}' github.com/hashicorp/nomad)
NOMAD_CACHE_DIR="${NOMAD_CACHE_DIR:-/var/cache/fluidvim/nomad-${NOMAD_VERSION}}"
PLUGIN_DIR="${1:-}"
nomad_bin="$NOMAD_CACHE_DIR/nomad"

if [[ -x "$nomad_bin" ]]; then
    echo "nomad: $nomad_bin exists, not rebuilt" >&2
else
    echo "nomad: building ${NOMAD_VERSION} from nomad_driver/go.mod (takes minutes)" >&2
    mkdir -p "$NOMAD_CACHE_DIR"
    start=$(date +%s)
    (cd "$here/nomad_driver" && go build -o "$nomad_bin.tmp" github.com/hashicorp/nomad)
    mv "$nomad_bin.tmp" "$nomad_bin"
    echo "nomad: built in $(( $(date +%s) - start ))s" >&2
fi
"$nomad_bin" version >&2

if [[ -n "$PLUGIN_DIR" ]]; then
    mkdir -p "$PLUGIN_DIR"
    (cd "$here/nomad_driver" && go build -o "$PLUGIN_DIR/fluidvim-unikernel" .)
    echo "plugin: $PLUGIN_DIR/fluidvim-unikernel" >&2
fi
echo "$nomad_bin"
