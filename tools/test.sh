#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# `make test` (and so .ci/run): every stage of the test suite, each timed; the table at the end
# (also on failure) is the run's record (docs/testing.md describes the stages).
#
#   tools/test.sh            NOVA_TESTS (space-separated testtools ids) comes from the Makefile
#   PYTEST_WORKERS=N         pytest's xdist workers (Makefile default; 1 = serial, no xdist)
#
# The Nomad agent build (tools/build-nomad.sh: ~5 min cold, cached after) runs in the background
# from the start and overlaps the C, lint and Nova stages; the Go stage waits for it, since it
# compiles the ~600 packages the plugin shares with the agent into the one build cache (two Go
# commands compiling them at once would each do the work), and so does pytest (whose e2e tests
# need the agent). The two Nova stages run in the background too, one after the other, beside
# that wait and the Go stage; their output is printed, and their times added to the table, before
# pytest starts (not beside it: Nova's test_ovs_vifs and pytest's OVS tests each start an
# ovs-vswitchd with the userspace datapath, one host device; tests/conftest.py).
# Each row: wall seconds, then the host's busy CPU-seconds in that window (/proc/stat: all
# processes, so overlapping stages each count what ran beside them) and that as % of all cores.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv/bin
: "${NOVA_TESTS:?set by the Makefile}" "${PYTEST_WORKERS:=1}" "${NOVA_SLURP:?set by the Makefile}" "${NOVA_SLURP_TESTS:?set by the Makefile}"

declare -a TIMES=()
CORES=$(nproc)
TICKS=$(getconf CLK_TCK)
# the host's busy CPU time so far, in ticks: /proc/stat's first line minus idle and iowait
busy() {
  local _cpu user nice sys _idle _iowait irq softirq steal _rest
  read -r _cpu user nice sys _idle _iowait irq softirq steal _rest </proc/stat
  echo $((user + nice + sys + irq + softirq + steal))
}
# a table row: name, wall seconds, busy CPU-seconds and % of the cores since (t0, busy0)
row() {
  local name=$1 t0=$2 b0=$3 wall cpu
  wall=$((SECONDS - t0))
  cpu=$((($(busy) - b0) / TICKS))
  printf '%-12s %5d %6d %3d%%' "$name" "$wall" "$cpu" $((wall ? 100 * cpu / (wall * CORES) : 0))
}
start=$SECONDS
start_busy=$(busy)
summary() {
  local rc=$?
  echo
  echo "make test: stage times (s) and host CPU (busy CPU-s, % of $CORES cores)"
  printf '  %-12s %5s %6s %4s\n' stage wall cpu-s cpu%
  for t in "${TIMES[@]}"; do echo "  $t"; done
  echo "  $(row total "$start" "$start_busy")   ($([ $rc = 0 ] && echo passed || echo "FAILED, exit $rc"))"
}
trap summary EXIT

stage() {
  local name=$1 t0=$SECONDS b0 rc=0
  b0=$(busy)
  shift
  printf '\033[1m=== %s\033[0m\n' "$name"
  "$@" || rc=$?
  TIMES+=("$(row "$name" "$t0" "$b0")$([ $rc = 0 ] || echo "   FAILED")")
  return "$rc"
}

stage bootstrap tools/bootstrap.sh

# one set of Go build flags for every Go command of the run (the go stage with staticcheck's
# `go list -export`, the Nomad agent build, the e2e tests' plugin builds, test_install's `make
# dist`), so they share one build cache's packages: -trimpath and CGO_ENABLED=0 as the release
# build has them (make dist's plugin then links from that cache instead of recompiling what
# imports net); -gcflags=all=-N -l (no optimisation, no inlining) and -ldflags=-s -w (no symbol
# tables): the tests need Go code that works, not fast code, and the compiler's optimisation
# is ~40 % of the cold agent build. Cold, all of it: 975 -> 574 CPU-s (docs/ci.md).
# shellcheck disable=SC2089,SC2090 # the quotes are for Go: GOFLAGS entries may be quoted
GOFLAGS="$(go env GOFLAGS) -trimpath '-gcflags=all=-N -l' '-ldflags=-s -w'"
CGO_ENABLED=0
# shellcheck disable=SC2090
export GOFLAGS CGO_ENABLED

nomad_log=$(mktemp /tmp/fluidvim-nomad-build.XXXXXX)
nomad_row=$(mktemp /tmp/fluidvim-nomad-row.XXXXXX)
build_nomad() {     # its table row (background: host CPU of what ran beside it too) to a file
  local t0=$SECONDS b0 rc=0
  b0=$(busy)
  tools/build-nomad.sh || rc=$?
  row nomad-build "$t0" "$b0" >"$nomad_row"
  return "$rc"
}
build_nomad >"$nomad_log" 2>&1 &
nomad_pid=$!
wait_nomad() {
  local rc=0
  wait "$nomad_pid" || rc=$?
  TIMES+=("$(cat "$nomad_row")   (background)")
  if [ "$rc" != 0 ]; then
    echo "tools/build-nomad.sh failed:" >&2
    tail -40 "$nomad_log" >&2
    return 1
  fi
  echo "nomad agent: $(tail -1 "$nomad_log") (built or found, overlapped)"
}

# the Nova stages in the background: their lines go to a log (printed when they end) and their
# times to a file of table rows, so they overlap the Go stage and the Nomad build
bg_log=$(mktemp /tmp/fluidvim-nova-stages.XXXXXX)
bg_times=$(mktemp /tmp/fluidvim-nova-times.XXXXXX)
nova_stages() {
  local rc=0
  # stage() appends to TIMES in this subshell: copy the rows out for the parent's table
  # shellcheck disable=SC2086 # one test id per word
  stage nova $VENV/python -m testtools.run $NOVA_TESTS || rc=$?
  stage "nova$NOVA_SLURP" nova_slurp || rc=$?
  printf '%s\n' "${TIMES[@]: -2}" >"$bg_times"
  return "$rc"
}
wait_nova() {
  local rc=0
  wait "$nova_bg_pid" || rc=$?
  cat "$bg_log"
  mapfile -t -O "${#TIMES[@]}" TIMES <"$bg_times"
  return "$rc"
}
# the same driver on a SLURP release (Makefile NOVA_SLURP), the tests of what differs; its venv is
# cached outside the checkout by tools/nova-venv.sh (~3 min once per machine, then seconds)
nova_slurp() {
  local bin
  bin=$(tools/nova-venv.sh "$NOVA_SLURP" | tail -1)
  # shellcheck disable=SC2086 # one test id per word
  "$bin/python" -m testtools.run $NOVA_SLURP_TESTS
}

stage c make -s -C unikernel test
stage lint tools/lint.sh   # ruff, import contracts, sizes, mypy, shellcheck, gofmt (tools/lint.sh)
nova_stages >"$bg_log" 2>&1 &
nova_bg_pid=$!
nomad_rc=0
stage nomad-wait wait_nomad || nomad_rc=$?
stage go bash -c 'tools/lint.sh staticcheck && cd nomad_driver && go vet ./... && go test -count=1 ./...'
nova_rc=0
stage nova-wait wait_nova || nova_rc=$?
(exit "$nomad_rc")    # no agent: no pytest (its e2e tests need it)
# tests/conftest.py: one module (or shared group) per worker, the longest modules first
xdist=()
[ "$PYTEST_WORKERS" -gt 1 ] && xdist=(-n "$PYTEST_WORKERS" --dist loadgroup)
stage pytest $VENV/python -m pytest "${xdist[@]}" --durations=15 tests
(exit "$nova_rc")     # a failed Nova stage fails the run, after pytest has run too
