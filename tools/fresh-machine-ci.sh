#!/bin/bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# Run CI as a new machine would, on a used one: stops libvirtd, virtlogd, RabbitMQ, Nomad and
# PostgreSQL (everything on this host that uses them is interrupted), deletes libvirt's QEMU
# capabilities cache, puts /dev/kvm back to root:root 0600, turns KSM off, clones main into an
# empty directory and runs `.ci/run` there with empty pip, uv, Go, Nomad and Nova-venv caches; removes the clone
# and the caches afterwards (the log stays).
#
#   sudo tools/fresh-machine-ci.sh [REPO]      # REPO defaults to this checkout; log in /tmp/fresh-ci-HHMM.log
set -u
REPO=${1:-$(cd "$(dirname "$0")/.." && pwd)}
D=/tmp/fresh-ci-$(date +%H%M)
pkill -x libvirtd; pkill -x virtlogd; pkill -f "tini -s"
rabbitmqctl stop >/dev/null 2>&1; pkill -f beam.smp; pkill -x epmd
pkill -f "nomad agent"; pkill -x postgres
sleep 3
rm -f /var/cache/libvirt/qemu/capabilities/*.xml
chown root:root /dev/kvm && chmod 0600 /dev/kvm
echo 0 > /sys/kernel/mm/ksm/run 2>/dev/null
git clone -q "$REPO" "$D"
mkdir -p "$D-cache/gomod" "$D-cache/gocache" "$D-cache/nomad" "$D-cache/nova-venvs" "$D-cache/uv"
cd "$D" || exit 1
env GOMODCACHE="$D-cache/gomod" GOCACHE="$D-cache/gocache" NOMAD_CACHE_DIR="$D-cache/nomad" \
    NOVA_VENV_CACHE="$D-cache/nova-venvs" UV_CACHE_DIR="$D-cache/uv" \
    PIP_NO_CACHE_DIR=1 CI=true bash .ci/run > "$D.log" 2>&1
rc=$?
echo "rc=$rc" >> "$D.log"
# the clone and its caches take ~5 GB (venv, Go build cache, the Nomad build): runs add up
cd / && chmod -R u+w "$D" "$D-cache" 2>/dev/null; rm -rf "$D" "$D-cache"
echo "fresh-machine CI: exit $rc, log $D.log"
exit $rc
