#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# A venv with one supported Nova release (tools/constraints/novaNN.txt) and this tree installed
# editable, for tools/test.sh's nova-slurp stage (docs/nova-releases.md).
#
#   tools/nova-venv.sh NN        (NN = 31, 32 or 33)   prints the venv's bin directory last
#
# Kept outside the checkout like the Nomad agent (tools/build-nomad.sh), in
# $NOVA_VENV_CACHE (default /var/cache/fluidvim)/novaNN-<hash of the constraints>: built once per
# machine and set of pins (~1 min with uv; ~3-4 min it was with pip); after that uv only re-points
# the editable install at this checkout (CI's clone moves) and adds what setup.py's extras gained.
set -euo pipefail
cd "$(dirname "$0")/.."
rel=${1:?usage: tools/nova-venv.sh NN (a file tools/constraints/novaNN.txt)}
pins=tools/constraints/nova$rel.txt
[ -f "$pins" ] || { echo "tools/nova-venv.sh: no $pins (supported: $(ls tools/constraints))" >&2; exit 2; }
key=$(sha256sum "$pins" | cut -c1-12)
dir=${NOVA_VENV_CACHE:-/var/cache/fluidvim}/nova$rel-$key
PY=${PYTHON:-python3}

# the installer of tools/bootstrap.sh (uv, pinned in constraints.txt; its cache holds most of
# these wheels already)
UV=${UV:-.venv/bin/uv}
[ -x "$UV" ] || { echo "tools/nova-venv.sh: no $UV: run tools/bootstrap.sh first" >&2; exit 2; }
uvpip=("$UV" pip install -q -p "$dir/bin/python" -c "$pins")
if [ ! -f "$dir/.complete" ]; then
  echo "nova-venv: building $dir" >&2
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  "$PY" -m venv "$dir"
  "${uvpip[@]}" --upgrade pip setuptools wheel >&2
fi
"${uvpip[@]}" -e ".[nova,nova-test,orchestrator,libvirt]" >&2
touch "$dir/.complete"
# Nova's test fixtures read api-paste.ini from <site-packages>/etc/nova (as tools/bootstrap.sh)
site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/etc/nova"
cp "$dir/etc/nova/api-paste.ini" "$site/etc/nova/"
echo "$dir/bin"
