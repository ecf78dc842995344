#!/bin/sh
# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
#
# Nova end to end, by hand: start real Keystone, Placement, Glance, nova-api, nova-conductor,
# nova-scheduler and nova-compute (compute_driver = fluidvim.UnikernelDriver) on
# 127.0.0.1:18700-18704, then boot, inspect and delete a VNF with the unmodified openstack CLI.
#
#   sudo tools/nova-e2e.sh            # the scenario; everything is stopped and removed at the end
#   sudo tools/nova-e2e.sh --keep     # leave the cloud (and server fw1) up, print the OS_* exports
#   sudo .venv/bin/python -m tests.e2e.nova_services stop     # stop a --keep cloud
#   sudo tools/nova-e2e.sh --help     # all options (--workdir, --kernel, --accel, -v)
#
# Needs root, the VNF kernel (make -C unikernel) and RabbitMQ (tools/bootstrap.sh).
set -e
cd "$(dirname "$0")/.."
exec .venv/bin/python -m tests.e2e.nova_services run "$@"
