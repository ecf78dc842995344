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
# release download) into a cache directory outside the repository:
#   $NOMAD_CACHE_DIR (default /var/cache/fluidvim/nomad-v1.11.3)/nomad
# and is not rebuilt if it already exists (~5 min cold on 2 cores). A scratch module is written
# under $NOMAD_CACHE_DIR/src: it requires github.com/hashicorp/nomad at the version the plugin
# links, with nomad's own replace directives copied (they do not apply to dependents).
# nomad's go.mod replaces github.com/hashicorp/nomad/api with its in-tree ./api, which is not
# in the module zip: the api module is pinned to a proxy pseudo-version instead ($NOMAD_API).
# The Nomad binary is BUSL-1.1: never commit it.
#
# If PLUGIN_DIR is given, the plugin is built into PLUGIN_DIR/fluidvim-unikernel (always rebuilt).
# Prints the agent path on the last line of stdout.
set -euo pipefail

NOMAD_VERSION="${NOMAD_VERSION:-v1.11.3}"
# nomad's go.mod requires api v0.0.0-20230103221135-ce00d683f9be (too old to compile: no node
# pools); the proxy refuses the pseudo-version of the v1.11.3 tag commit (173ab08a0210), so the
# newest api pseudo-version it serves is used; it is a superset of what the v1.11.3 CLI calls.
NOMAD_API="${NOMAD_API:-v0.0.0-20260907080526-08ef8f3d26da}"
NOMAD_CACHE_DIR="${NOMAD_CACHE_DIR:-/var/cache/fluidvim/nomad-${NOMAD_VERSION}}"
PLUGIN_DIR="${1:-}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
nomad_bin="$NOMAD_CACHE_DIR/nomad"

if [[ -x "$nomad_bin" ]]; then
    echo "nomad: $nomad_bin exists, not rebuilt" >&2
else
    src="$NOMAD_CACHE_DIR/src"
    mkdir -p "$src"
    cat >"$src/go.mod" <<EOF
module fluidvim.local/nomad-agent

go 1.26

require (
	github.com/hashicorp/nomad ${NOMAD_VERSION}
	github.com/hashicorp/nomad/api ${NOMAD_API}
)

// copied from nomad ${NOMAD_VERSION}'s go.mod (replace directives do not apply to dependents)
replace (
	github.com/Microsoft/go-winio => github.com/endocrimes/go-winio v0.4.13-0.20190628114223-fb47a8b41948
	github.com/hashicorp/hcl => github.com/hashicorp/hcl v1.0.1-nomad-1
)
EOF
    cat >"$src/tools.go" <<'EOF'
//go:build tools

package tools

import _ "github.com/hashicorp/nomad"
EOF
    echo "nomad: building ${NOMAD_VERSION} in $src (takes minutes)" >&2
    start=$(date +%s)
    (
        cd "$src"
        export GOFLAGS=-mod=mod
        go mod tidy -e >/dev/null 2>&1 || true
        go get "github.com/hashicorp/nomad@${NOMAD_VERSION}" "github.com/hashicorp/nomad/api@${NOMAD_API}"
        go build -trimpath -o "$nomad_bin.tmp" github.com/hashicorp/nomad
    )
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
