# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The states of a VNF in the launch core's store, and the kinds of launch.

One definition of each (as nova's ``virt/ironic/ironic_states.py``): the values are the strings
stored in the ``vnfs.status`` and ``launches.kind`` columns and shown by ``fluidvim vnf list``,
so they never change (no migration). Callers compare with these names, never with literals.

Mappings to other vocabularies live with the code that speaks them, one each: the Nova driver's
VNF status -> Nova power state (``fluidvim.nova_driver.driver.POWER_STATE``), the local zone's
VNF status -> orchestrator instance status (``fluidvim.orchestrator.zones.local``), the warm
pool's shell state -> VNF status (``fluidvim.vnf.manager``, contract/PROTOCOL.md §6.3).
"""

# -- VNF statuses (VNFRecord.status) --

BOOTING = "booting"
"""Being created: its QEMU/domain is starting and the guest has not reported ``ready`` yet. A
record left in this state by a crash of the launch core is half-created and removed on recovery."""

POOL = "pool"
"""A warm-pool shell: booted and waiting, unconfigured, under a pool key, for a launch to claim it.
It has no user-given name and is not listed as a VNF."""

RUNNING = "running"
"""Launched (cold, or a claimed shell) and, as far as the launch core knows, alive."""

PAUSED = "paused"
"""Its vCPUs are stopped on purpose (``VNFManager.pause``: QMP ``stop`` / libvirt suspend): memory,
flow table, taps and counters are kept, it forwards nothing and answers no request until
``unpause``; its session slots are not offered meanwhile."""

CRASHED = "crashed"
"""Was running and died on its own (its process/domain exited, or it was gone when the launch
core restarted); ``reason`` says why. Kept until destroyed so its owner sees the failure."""

STOPPED = "stopped"
"""Stopped on purpose but kept (not written by the launch core today; its readers treat it as
a VNF that exists but does not run)."""

STATUSES = (BOOTING, POOL, RUNNING, PAUSED, CRASHED, STOPPED)

UNKNOWN = "unknown"
"""Shown, never stored: ``fluidvim vnf list`` cannot check the VNF because its backend's daemon
is down (libvirtd); the store's last status is shown beside it."""

LISTED = (RUNNING, PAUSED, CRASHED)
"""What ``VNFManager.list()`` shows: the VNFs someone launched (shells and half-created
records are the launch core's own business)."""

# -- launch kinds (LaunchResult.kind, LaunchRecord.kind, InstanceInfo.kind) --

COLD = "cold"
"""A new QEMU/domain booted for the launch (the kernel boots inside it)."""

WARM = "warm"
"""A ready warm-pool shell claimed and configured (no boot in the launch)."""

LAUNCH_KINDS = (COLD, WARM)

# -- backends: how the launch core starts a VNF ([vnf] backend, VNFRecord.backend, Backend.name) --

QEMU = "qemu"
"""One QEMU process per VNF on the ``microvm`` machine, started directly (QMP socket, pidfd
watch)."""

LIBVIRT = "libvirt"
"""One libvirt domain per VNF (``pc`` + qboot; libvirt 9 has no microvm)."""

BACKENDS = (QEMU, LIBVIRT)
