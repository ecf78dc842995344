#!/usr/bin/env bash
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# A private Open vSwitch (ovsdb-server + ovs-vswitchd, userspace `netdev` datapath) with its
# database, sockets, pid files and logs in one directory: for tests, the demo and a compute host
# without systemd. No kernel module needed (bridges must use datapath_type=netdev).
#
#   tools/ovs.sh start /run/fluidvim-ovs [TCP_PORT]   # prints unix:/run/fluidvim-ovs/db.sock
#   ovs-vsctl --db=unix:/run/fluidvim-ovs/db.sock add-br br-int -- set Bridge br-int datapath_type=netdev
#   tools/ovs.sh stop /run/fluidvim-ovs               # deletes its bridges, stops both daemons
#
# ovs-ofctl/ovs-appctl find the daemons with OVS_RUNDIR=<dir>.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
exec "$PY" -m fluidvim.vnf.ovs "$@"
