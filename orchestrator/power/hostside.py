# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The latency controller's readers and actuator (:mod:`.controller`): its arithmetic on the
VNF's latency histogram, what it reads of the VNF's cgroup (throttled periods, its QEMU's CPU)
and host taps, and its production actuator (the VNF's CPU quota on a short CFS period)."""

from __future__ import annotations

import os

from .models import PowerError


def interval_p99(b0: list | None, b1: list, quantile: float = 0.99) -> tuple[int | None, int]:
    """(p99 in ns or None, packets) of the packets between two ``buckets_log2`` histograms: the
    lower bound ``2**i`` of the bucket holding the quantile, as the VNF reports its own p99. A
    histogram that went down (the VNF restarted) counts from zero."""
    b0 = b0 or []
    if len(b0) != len(b1) or any(y < x for x, y in zip(b0, b1)):
        b0 = [0] * len(b1)
    d = [y - x for x, y in zip(b0, b1)]
    n = sum(d)
    if n == 0:
        return None, 0
    rank, acc = quantile * n, 0
    for i, c in enumerate(d):
        acc += c
        if acc >= rank:
            return 1 << i, n
    return 1 << (len(d) - 1), n


def interval_over(b0: list | None, b1: list, ns: float) -> int:
    """Packets between two ``buckets_log2`` histograms in buckets whose lower bound is over
    ``ns`` (consistent with :func:`interval_p99`: p99 > ns exactly when they are over 1 %)."""
    b0 = b0 or []
    if len(b0) != len(b1) or any(y < x for x, y in zip(b0, b1)):
        b0 = [0] * len(b1)
    return sum(y - x for i, (x, y) in enumerate(zip(b0, b1)) if (1 << i) > ns)


def cpu_throttled(name: str) -> int | None:
    """The periods in which VNF ``name``'s CPU quota held it back (``nr_throttled`` of its
    group's ``cpu.stat``, cgroup v1 and v2 alike); None when it has no group here."""
    from fluidvim.vnf import cgroups  # the launch core's cgroup layout
    for d in cgroups.dirs(name):
        try:
            with open(os.path.join(d, "cpu.stat")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "nr_throttled":
                        return int(value)
        except (OSError, ValueError):
            continue                           # v1's memory group has no cpu.stat
    return None


def group_usage(key: str) -> dict | None:
    from fluidvim.vnf import cgroups  # the launch core's cgroup layout
    return cgroups.cpu_usage(key)


CAP_PERIOD_US = 20_000               # the CFS period of a capped VNF's quota (CgroupCap)


class CgroupCap:
    """The production actuator: the controller's quota (µs per the flavor's 100 ms period) on
    the VNF's own cgroup (:func:`fluidvim.vnf.cgroups.set_cpu_quota`). A cap is written as the
    same share of a ``period_us`` period: a throttled VNF stalls for up to ``period - quota``,
    95 ms at a 5 % cap on the flavor's 100 ms period, long enough to blow its p99 in most
    intervals at 10 % load, and 19 ms on 20 ms, which kept it within target (bench/powercap).
    Whole CPUs (the flavor's quota, a release) go back on the flavor's period with QEMU's own
    allowance on top (``QEMU_OVERHEAD_CPU_US``: the quota the launch set, vnf/cgroups.py). The
    kernel's 1000 µs minimum makes ``1000 / period_us`` the least share (5 % on 20 ms)."""

    def __init__(self, period_us: int = CAP_PERIOD_US):
        if not 1000 <= int(period_us) <= 1_000_000:
            raise PowerError(f"cap period {period_us} us is outside the kernel's 1000..1000000 us")
        self.period_us = int(period_us)

    def __call__(self, key: str, quota_us: int) -> bool:
        from fluidvim.vnf import cgroups, limits  # the launch core's cgroup layout
        if quota_us % limits.CPU_PERIOD_US == 0:
            return cgroups.set_cpu_quota(key, quota_us + limits.QEMU_OVERHEAD_CPU_US)
        share = quota_us / limits.CPU_PERIOD_US
        return cgroups.set_cpu_quota(key, max(1000, round(share * self.period_us)),
                                     self.period_us)


def tap_counters(taps, sys_root: str = "/sys/class/net") -> list | None:
    """Per tap (a VNF's NICs, in order) ``{"tx_packets", "tx_dropped"}`` from
    ``<sys_root>/<tap>/statistics``: what the host handed the VNF's backend and what it dropped
    for it; None when one cannot be read (a tap in another namespace, gone)."""
    out = []
    for tap in taps:
        d = {}
        for f in ("tx_packets", "tx_dropped"):
            try:
                with open(os.path.join(sys_root, tap, "statistics", f)) as fh:
                    d[f] = int(fh.read())
            except (OSError, ValueError):
                return None
        out.append(d)
    return out
