#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# The packet engine's differential run: the engine of git revision REF (default HEAD) and the one in
# the work tree each run every config of the C unit tests, the contract vectors and the fuzz seeds
# (tests/replay_corpus.py) through tests/replay.c; their outputs (errors, stats) must be identical.
# For a refactor of the engine (e.g. the element table): `make -C unikernel differential REF=<rev>`.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:-HEAD}
out=build/differential
rm -rf "$out"
mkdir -p "$out/ref"
git archive "$ref" -- src include tests.mk | tar -x -C "$out/ref"
python3 tests/replay_corpus.py "$out/corpus" >/dev/null
cc=${TEST_CC:-gcc}
flags=(-std=gnu11 -O1 -g -Wall -Wextra -Wno-unused-parameter -DFLUIDVIM_HOST)
engine() {  # the host sources of the engine under $1: its tests.mk's VT_SRCS
  # shellcheck disable=SC2016 # $(VT_SRCS) is make's, not the shell's
  make -s --no-print-directory -C "$1" -f tests.mk --eval 'vt-srcs: ; @echo $(VT_SRCS)' vt-srcs |
    tr ' ' '\n' | sed "s|^\./|$1/|"
}
# shellcheck disable=SC2046 # one source file per word
"$cc" "${flags[@]}" -I"$out/ref/include" -I"$out/ref/src" -o "$out/replay-ref" $(engine "$out/ref") tests/replay.c
# shellcheck disable=SC2046
"$cc" "${flags[@]}" -Iinclude -Isrc -o "$out/replay-new" $(engine .) tests/replay.c
"$out/replay-ref" "$out"/corpus/* >"$out/ref.txt"
"$out/replay-new" "$out"/corpus/* >"$out/new.txt"
n=$(grep -c '^== ' "$out/new.txt")
if ! diff -u "$out/ref.txt" "$out/new.txt" >"$out/diff.txt"; then
  echo "differential: the engine's output changed against $ref ($out/diff.txt):" >&2
  head -40 "$out/diff.txt" >&2
  exit 1
fi
echo "differential: $n inputs, errors and stats identical to $ref ($(grep -c '^error' "$out/new.txt") rejected, $(grep -c '^stats' "$out/new.txt") run)"
