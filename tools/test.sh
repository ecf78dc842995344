#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# `make test` (and so .ci/run): every stage of the test suite, each timed; the table at the end
# (also on failure) is the run's record (docs/testing.md describes the stages).
#
#   tools/test.sh            NOVA_TESTS (space-separated testtools ids) and the rest from the Makefile
#   PYTEST_WORKERS=N         pytest's xdist workers (Makefile default; 1 = serial, no xdist)
#
# The Nomad agent build (tools/build-nomad.sh: ~5 min cold, cached after) runs in the background
# from the very start (it needs only Go, which the machine has before the bootstrap) and overlaps
# the bootstrap, C, lint and Go stages; pytest (whose e2e modules look for the agent when they are
# collected) waits for it. The Nova stages run in the background from after lint, one after the
# other, beside Go and pytest: first `nova-ovs` (NOVA_OVS_TESTS, ~30 s), under an exclusive flock
# on $FLUIDVIM_OVS_LOCK, then `nova` (the rest of NOVA_TESTS) and `nova33`. Nova's test_ovs_vifs
# and pytest's OVS modules each start an ovs-vswitchd with the userspace datapath, one host device,
# so they must not overlap: pytest's "ovs" group takes the same lock before its first test
# (tests/conftest.py) and so starts after `nova-ovs`; everything else in pytest does not wait.
# The Nova output is printed, and its times added to the table, after pytest (`nova-wait`).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv/bin
: "${NOVA_TESTS:?set by the Makefile}" "${PYTEST_WORKERS:=1}" "${NOVA_SLURP:?set by the Makefile}" "${NOVA_SLURP_TESTS:?set by the Makefile}"
: "${NOVA_OVS_TESTS:?set by the Makefile}"

declare -a TIMES=()
start=$SECONDS
summary() {
  local rc=$?
  echo
  echo "make test: stage times (s)"
  for t in "${TIMES[@]}"; do echo "  $t"; done
  printf '  %-12s %5d   (%s)\n' total $((SECONDS - start)) "$([ $rc = 0 ] && echo passed || echo "FAILED, exit $rc")"
}
trap summary EXIT

stage() {
  local name=$1 t0=$SECONDS rc=0
  shift
  printf '\033[1m=== %s\033[0m\n' "$name"
  "$@" || rc=$?
  TIMES+=("$(printf '%-12s %5d%s' "$name" $((SECONDS - t0)) "$([ $rc = 0 ] || echo "   FAILED")")")
  return "$rc"
}

# the Nomad agent first: Go is on the machine before the bootstrap (which only downloads modules)
nomad_log=$(mktemp /tmp/fluidvim-nomad-build.XXXXXX)
nomad_t0=$SECONDS
start_nomad_build() {
  tools/build-nomad.sh >"$nomad_log" 2>&1 &
  nomad_pid=$!
}
nomad_pid=
command -v go >/dev/null && start_nomad_build
wait_nomad() {
  [ -n "$nomad_pid" ] || start_nomad_build      # no Go before the bootstrap: built from here
  if ! wait "$nomad_pid"; then
    echo "tools/build-nomad.sh failed:" >&2
    tail -40 "$nomad_log" >&2
    return 1
  fi
  echo "nomad agent: $(tail -1 "$nomad_log") (built or found in $((SECONDS - nomad_t0)) s, overlapped)"
}

# the Nova stages in the background: their lines go to a log (printed when they end) and their
# times to a file of table rows, so they overlap the Go stage and pytest
bg_log=$(mktemp /tmp/fluidvim-nova-stages.XXXXXX)
bg_times=$(mktemp /tmp/fluidvim-nova-times.XXXXXX)
ovs_lock=$(mktemp /tmp/fluidvim-ovs-lock.XXXXXX)
ovs_free=$(mktemp /tmp/fluidvim-ovs-free.XXXXXX)
nova_stages() {
  local rc=0 t n0=${#TIMES[@]}
  # NOVA_OVS_TESTS first, then the lock goes (its fd closed: the only other holder, the parent,
  # closed its copy when this subshell started); the command itself runs without the fd, so no
  # process it leaves behind can keep the lock
  # shellcheck disable=SC2086 # one test id per word
  stage nova-ovs $VENV/python -m testtools.run $NOVA_OVS_TESTS {ovs_fd}>&- || rc=$?
  exec {ovs_fd}>&-
  echo $SECONDS >"$ovs_free"
  local rest=()
  for t in $NOVA_TESTS; do
    [[ " $NOVA_OVS_TESTS " == *" $t "* ]] || rest+=("$t")
  done
  [ ${#rest[@]} = 0 ] || stage nova $VENV/python -m testtools.run "${rest[@]}" || rc=$?
  stage "nova$NOVA_SLURP" nova_slurp || rc=$?
  # stage() appends to TIMES in this subshell: copy the rows out for the parent's table
  printf '%s\n' "${TIMES[@]:$n0}" >"$bg_times"
  return "$rc"
}
wait_nova() {
  local rc=0
  wait "$nova_bg_pid" || rc=$?
  cat "$bg_log"
  mapfile -t -O "${#TIMES[@]}" TIMES <"$bg_times"
  local free
  free=$(cat "$ovs_free")
  [ -z "$free" ] || echo "nova-ovs released $FLUIDVIM_OVS_LOCK $((free - start)) s into the run," \
    "pytest started at $((pytest_t0 - start)) s: its \"ovs\" group could not start in pytest's" \
    "first $((free > pytest_t0 ? free - pytest_t0 : 0)) s (its other tests did not wait)"
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

stage bootstrap tools/bootstrap.sh
stage c make -s -C unikernel test
stage lint tools/lint.sh   # ruff, import contracts, sizes, mypy, shellcheck, gofmt (tools/lint.sh)
# the lock is taken here, before the Nova subshell starts, so pytest can never get it first
exec {ovs_fd}>"$ovs_lock"
flock -x "$ovs_fd"
nova_stages >"$bg_log" 2>&1 &
nova_bg_pid=$!
exec {ovs_fd}>&-
export FLUIDVIM_OVS_LOCK=$ovs_lock
stage go bash -c 'tools/lint.sh staticcheck && cd nomad_driver && go vet ./... && go test -count=1 ./...'
stage nomad-wait wait_nomad
# tests/conftest.py: one module (or shared group) per worker, the longest first; the "ovs" group
# waits for $FLUIDVIM_OVS_LOCK
xdist=()
[ "$PYTEST_WORKERS" -gt 1 ] && xdist=(-n "$PYTEST_WORKERS" --dist loadgroup)
pytest_t0=$SECONDS
pytest_rc=0
stage pytest $VENV/python -m pytest "${xdist[@]}" --durations=15 tests || pytest_rc=$?
stage nova-wait wait_nova     # its output and rows; a failed Nova stage fails the run
(exit "$pytest_rc")
