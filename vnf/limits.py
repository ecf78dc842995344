# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The limits and defaults of a VNF, defined once (a leaf module: it imports nothing of fluidvim).

Every check of a VNF's memory, vCPUs, NICs, session slots, flow timeout or Click configuration
size - the launch spec, the ``[vnf]`` options, the Nova driver's placement inventory, the
orchestrator's service registration, MANO descriptors, the OSM VIM - reads these names. The Go
Nomad driver has its own constants (a Go module cannot import Python); its tests load
``contract/vectors/limits.json`` (written from this module by ``tools/gen_vectors.py``) and fail when
one of them differs, and ``tests/unit/test_limits.py`` checks the C kernel's ``#define`` s the
same way. Change a value here, run ``tools/gen_vectors.py``, and every implementation follows
or fails its tests.
"""

from __future__ import annotations

# -- memory (MiB) --
# The image (code, data and a ~4.3 MiB .bss: packet buffers, the flow table) plus the NICs' virtio
# rings and buffers need about 8 MiB.
MEMORY_MB_MIN = 8
# 32 MiB leaves room for 4 KiB mergeable RX buffers on every NIC (virtio.c asks for 8 MiB free).
MEMORY_MB_DEFAULT = 32
# The guest only ever touches the first GiB (boot.S identity-maps 0-1 GiB of RAM and uses a few
# MiB of it), so more memory buys nothing; 4 GiB is the most a flavor may ask for (a 4096 MiB VNF
# boots and is configured; cold launch ~80 ms vs ~60 ms at 32 MiB, one sample each here) - a
# cap on what one VNF can reserve from placement.
MEMORY_MB_MAX = 4096

# -- vCPUs --
VCPUS_MIN = 1
VCPUS_DEFAULT = 1
# The kernel runs on the boot vCPU only (one core polls all NICs; it starts no other CPU), so
# further vCPUs stay halted and cost QEMU a thread and boot time each (cold launch on this host,
# one sample each: 1 vCPU ~60 ms, 2 ~66 ms, 8 ~165 ms). QEMU 7.2 allows 288 (microvm) and 255
# (pc); 8 is accepted so that flavors and descriptors with a few vCPUs still launch, and caps
# what one VNF can reserve from placement for nothing. (The orchestrator and MANO descriptors
# said 4 before this module; every launcher already took 8.)
VCPUS_MAX = 8

# -- resource enforcement (the VNF's QEMU in a cgroup: Nomad task resources, Nova flavor) --
# A QEMU's memory limit (cgroup memory.max) is its guest memory plus this allowance for QEMU
# itself: its binary, heap, the vCPU and I/O thread stacks, virtio rings' shadow state and the
# tap buffers. An idle microvm QEMU for a 32 MiB guest holds ~20-30 MiB beyond the guest pages
# here (RSS); 64 MiB leaves room for a burst of tap/vhost buffers without the OOM killer.
QEMU_OVERHEAD_MB = 64
# The cgroup CPU bandwidth period (cpu.max "quota period", cpu.cfs_period_us), microseconds:
# the kernel's default; a reservation of N cores is a quota of N periods.
CPU_PERIOD_US = 100_000
# What a VNF's CPU quota allows QEMU beyond its vCPUs, per period (as QEMU_OVERHEAD_MB for
# memory): QEMU's main loop moves every frame between tap and guest on another core while the
# vCPU runs, so a quota of exactly one period per vCPU is spent in about half a period when both
# are busy and then stops the whole VNF for the rest of it. Measured on a quiet host with the
# quota at one period: 78 of 84 periods throttled (~16 ms each) at 1,700 pps, every admitted
# session over its 10 ms deadline (bench/slots qoe, 2026-11-28).
QEMU_OVERHEAD_CPU_US = 50_000

# -- NICs --
# The kernel's virtio-net table (unikernel/src/virtio.h NET_MAX_NICS) and its static rings.
MAX_NICS = 4

# The queue of frames a VNF's tap holds for QEMU to read (the tun device's tx_queue_len, which
# sizes its ring; the kernel's default is 500). QEMU's main thread reads a tap only when it is
# scheduled, so at a few tens of kpps a short descheduling overflows 500 frames: the 64-byte
# rate at < 0.1 % loss through a forwarding VNF went 33-39 -> 51-64 kpps with 4096 (two rounds,
# 500/2000/4096/10000, bench/RESULTS.md). 8 bytes of ring per frame: 32 KiB per tap.
TAP_TXQUEUELEN = 4096

# A VNF's vCPU threads run at this nice value (the launchers set it after `ready`; QEMU's main
# thread, which moves every frame between the taps and the rings, and fluidvim-vhost-net stay at
# 0). While frames flow the guest busy-polls its rings (a PVM wake-up from hlt costs ~0.3-1 ms),
# so its vCPU always wants a whole core; at equal priority it took CPU from the threads that do
# the I/O. Forwarding VNF, 70 kpps of 64 B, five 2 s trials each: nice 0 lost 11-27 %; nice 10
# lost 0-1.5 % (0 in three), and 75 kpps passed without loss (bench/RESULTS.md, 2026-11-26).
# An idle VNF is halted and costs nothing either way; a nice-10 thread still gets ~10 % of a
# core against a nice-0 one that wants it all.
VCPU_NICE_DEFAULT = 10
VCPU_NICE_MAX = 19

# -- session slots (flow-table capacity) --
SLOTS_MIN = 1
SLOTS_DEFAULT = 1024
# The kernel's flow table (unikernel/include/click.h CLICK_MAX_SLOTS; FLOW_BUCKETS buckets).
SLOTS_MAX = 65536

# -- flow (session) idle timeout, ms --
FLOW_TIMEOUT_MS_MIN = 1
FLOW_TIMEOUT_MS_DEFAULT = 30_000
FLOW_TIMEOUT_MS_MAX = 86_400_000        # one day: a longer idle flow is a leaked slot

# -- control channel --
# A control line is at most 8192 bytes (unikernel/src/control.c MAX_LINE; PROTOCOL.md §2).
MAX_CONTROL_LINE = 8192
# The Click configuration travels in one `configure` line: 7000 bytes leaves room for the JSON
# framing, the escapes a config's quotes and newlines take, and a `macs` list.
MAX_CLICK_CONFIG_BYTES = 7000

# -- names --
MAX_NAME = 63                           # a VNF name (kernel's vnf_name[64]; libvirt <title>)

# -- TCG clock fallback (kHz) --
TSC_KHZ_MIN = 1_000
TSC_KHZ_MAX = 100_000_000

# -- warm pool (contract/PROTOCOL.md §6) --
# Shells kept per pool key: an idle shell costs 8-19 MiB and ~4 % of a core (bench/density.py).
POOL_SIZE_MAX = 64
# Successful launches of one kind the queuing delay is the median of.
LAUNCH_HISTORY_DEFAULT = 64


def as_dict() -> dict:
    """Every limit above by name (``contract/vectors/limits.json``)."""
    return {k: v for k, v in globals().items() if k.isupper() and isinstance(v, int)}
