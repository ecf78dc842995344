#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# Install and start everything fluidvim needs on a fresh Debian (bookworm) machine, idempotently:
# apt packages, a Python venv with the project (editable), the unikernel build, libvirtd/virtlogd.
# Used by `make demo`, `make test` and .ci/run. Needs root (taps, bridges, namespaces, KVM).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  echo "bootstrap: run as root (VNFs need tap devices, bridges and network namespaces)" >&2
  exit 1
fi

APT_PKGS=(qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-clients libvirt-dev
          pkg-config gcc make iproute2 iputils-ping procps python3-venv python3-dev
          rabbitmq-server tini openvswitch-switch
          ovn-central ovn-host   # OVN NIC test (tests/ovnserver.py); nothing is started by apt
          libyang2-tools   # yanglint: SOL006 cross-check
          shellcheck       # the lint stage's shell check (tools/lint.sh)
          postgresql       # server binaries only: tests start a throwaway cluster (tests/pgserver.py)
          prometheus)      # the server only: tests start their own on a free port, never the service
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python venv with the project and pinned dependencies
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.fluidvim-installed
if [ ! -f "$stamp" ] || [ setup.py -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  # uv (pinned in constraints.txt, one wheel from PyPI) installs the ~230 packages: measured on
  # a new machine's empty caches, 57 s against pip's 410 s (docs/testing.md). Its cache
  # ($UV_CACHE_DIR, default ~/.cache/uv) serves tools/nova-venv.sh and `make dist` later.
  uv_pin=$(grep '^uv==' constraints.txt)
  if [ ! -x .venv/bin/uv ] || [ "$(.venv/bin/uv --version | cut -d' ' -f2)" != "${uv_pin#uv==}" ]; then
    .venv/bin/pip install -q --disable-pip-version-check "$uv_pin"
  fi
  log "uv: installing fluidvim[test,nova,nova-test,e2e] (constraints.txt)"
  uvpip=(.venv/bin/uv pip install -q -p .venv/bin/python -c constraints.txt)
  "${uvpip[@]}" --upgrade pip setuptools wheel
  "${uvpip[@]}" -e ".[test,nova,nova-test,e2e]"
  touch "$stamp"
fi
# Nova's test fixtures read api-paste.ini from <site-packages>/etc/nova (the wheel puts it in
# <venv>/etc/nova)
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -f .venv/etc/nova/api-paste.ini ] && [ ! -f "$site/etc/nova/api-paste.ini" ]; then
  mkdir -p "$site/etc/nova"
  cp .venv/etc/nova/api-paste.ini "$site/etc/nova/"
fi

# Go modules of the Nomad driver plugin (github.com/hashicorp/nomad and friends)
if command -v go >/dev/null; then
  log "go: downloading the Nomad plugin's modules"
  (cd nomad_driver && go mod download)
  log "go: the lint stage's staticcheck (pinned in tools/lint.sh)"
  tools/lint.sh install
fi

# the unikernel
log "building the VNF unikernel (unikernel) and its vhost-user NIC backend (vhost)"
make -s -C unikernel
make -s -C vhost

# /dev/kvm as udev leaves it on a normal host (group kvm, 0660). A new machine without udev has
# root:root 0600: root's QEMU works, but libvirt runs QEMU as libvirt-qemu, finds KVM "gone" and
# re-probes QEMU on every domain start (~56 s each). Done before libvirtd starts, so its first
# probe already sees KVM.
if [ -c /dev/kvm ]; then
  getent group kvm >/dev/null || groupadd --system kvm
  if [ "$(stat -c '%G %a' /dev/kvm)" != "kvm 660" ]; then
    log "/dev/kvm: $(stat -c '%U:%G %a' /dev/kvm) -> root:kvm 660"
    chgrp kvm /dev/kvm
    chmod 0660 /dev/kvm
  fi
  if id libvirt-qemu >/dev/null 2>&1 && ! id -nG libvirt-qemu | grep -qw kvm; then
    usermod -aG kvm libvirt-qemu
  fi
fi

# KSM: idle VNFs share identical pages (their QEMUs are started KSM-mergeable by the launch core,
# [vnf] share_memory); off by default on Debian. Default scan rate (~1 % of a core for ksmd).
if [ -w /sys/kernel/mm/ksm/run ] && [ "$(cat /sys/kernel/mm/ksm/run)" = 0 ]; then
  log "KSM: on (/sys/kernel/mm/ksm/run = 1)"
  echo 1 >/sys/kernel/mm/ksm/run
fi

# libvirt daemons (no systemd in containers/CI: start them directly). Each runs under
# `tini -s` (a child subreaper) because libvirt daemonizes QEMU: a QEMU that exits is re-parented
# and must be reaped before virDomainDestroy returns. systemd reaps at once; a container's PID 1
# may not (measured on a new machine: the zombie lingered ~1.4 s, so every libvirt destroy took
# 1.4-1.6 s instead of ~0.04 s). tini reaps its re-parented orphans immediately.
start_daemon() {
  local name=$1
  if ! pgrep -x "$name" >/dev/null; then
    log "starting $name (under tini -s)"
    mkdir -p /var/log/libvirt
    setsid tini -s -- "$name" </dev/null >>"/var/log/libvirt/$name.fluidvim.log" 2>&1 &
  fi
}
start_daemon virtlogd
start_daemon libvirtd
for _ in $(seq 1 100); do
  virsh -c qemu:///system version >/dev/null 2>&1 && break
  sleep 0.1
done
virsh -c qemu:///system version >/dev/null || { echo "libvirtd did not come up" >&2; exit 1; }

# RabbitMQ for oslo.messaging (orchestrator RPC/notifications, the Nova end-to-end script)
if ! rabbitmqctl -q status >/dev/null 2>&1; then
  log "starting rabbitmq-server"
  rabbitmq-server -detached >/dev/null 2>&1 || true
  for _ in $(seq 1 120); do
    rabbitmqctl -q status >/dev/null 2>&1 && break
    sleep 0.5
  done
  rabbitmqctl -q status >/dev/null 2>&1 || { echo "rabbitmq-server did not come up" >&2; exit 1; }
fi

# fail now, with the cause, rather than in a test 20 minutes later: two timed libvirt domain
# starts, and no QEMU capabilities re-probe during the second (vnf/hostcheck.py)
log "checking libvirt domain start (fluidvim.vnf.hostcheck)"
.venv/bin/python -m fluidvim.vnf.hostcheck

if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
  log "ready: KVM available"
else
  log "ready: no usable /dev/kvm, VNFs run under TCG (slower, still correct)"
fi
