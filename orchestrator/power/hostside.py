# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The latency controller's readers and actuator (:mod:`.controller`): its arithmetic on the
VNF's latency histogram, what it reads of the VNF's cgroup (throttled periods, its QEMU's CPU)
and host taps, and its production actuator (the VNF's CPU quota on a short CFS period)."""

from __future__ import annotations

import math
import os

from .highload import beyond_open, host_over_open
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


def interval_with_wait(b0: list | None, b1: list, waiters: float, gap_ns: float) -> list:
    """The packets between two ``buckets_log2`` histograms (the interval's, as
    :func:`interval_p99` takes them) with ``waiters`` of them moved to the wait a throttled
    vCPU's ring adds: frames that arrived while the cap held the VNF back wait in its RX ring,
    where its histogram (which starts at FromDevice) does not see them, each up to the gap
    (``gap_ns``), spread evenly over ``[0, gap]``. They are taken from the lowest buckets (a
    frame's wait dwarfs its processing) and at most all the interval's packets; the result's
    :func:`interval_p99` (``b0`` None) is the p99 with the ring's wait."""
    b0 = b0 or []
    if len(b0) != len(b1) or any(y < x for x, y in zip(b0, b1)):
        b0 = [0] * len(b1)
    d = [y - x for x, y in zip(b0, b1)]
    w = min(sum(d), max(0, round(waiters)))
    if not d or w < 1 or gap_ns < 1:
        return d
    left = w
    for i, c in enumerate(d):                # take them from the fastest
        take = min(c, left)
        d[i], left = c - take, left - take
    add = [0.0] * len(d)
    for i in range(len(d)):                  # spread over [0, gap]: bucket i is [2**i, 2**i+1)
        lo, hi = (0 if i == 0 else 1 << i), 1 << (i + 1)
        if i == len(d) - 1:
            hi = max(hi, gap_ns)
        add[i] = w * max(0.0, min(hi, gap_ns) - lo) / gap_ns
    carry = 0.0                              # whole frames, the rounding carried upwards
    for i, a in enumerate(add):
        carry += a
        n = int(carry + 1e-9)
        d[i] += n
        carry -= n
    if carry > 0.5:
        d[max(i for i, a in enumerate(add) if a > 0)] += 1
    return d


def group_cpu_stat(name: str) -> dict | None:
    """VNF ``name``'s ``cpu.stat`` read once (:func:`fluidvim.vnf.cgroups.cpu_stat`: all keys,
    the throttling summed with its vCPU sub-group's); None when it has no group here."""
    from fluidvim.vnf import cgroups  # the launch core's cgroup layout
    return cgroups.cpu_stat(name)


def throttled_periods(stat: dict | None) -> int | None:
    """The periods in which a VNF's CPU quota held it back: ``nr_throttled`` of its
    :func:`group_cpu_stat` (cgroup v1 and v2 alike); None when not known."""
    return None if stat is None or "nr_throttled" not in stat else int(stat["nr_throttled"])


def throttled_time_us(stat: dict | None) -> float | None:
    """The time (µs) a VNF has been throttled so far, from its :func:`group_cpu_stat` (v2's
    ``throttled_usec``, v1's ``throttled_time`` in ns; summed over the CPUs its threads were
    throttled on, so an upper bound of the wall time); None when not known."""
    if stat is None:
        return None
    if "throttled_usec" in stat:
        return float(stat["throttled_usec"])
    return stat["throttled_time"] / 1000.0 if "throttled_time" in stat else None


def cpu_throttled(name: str) -> int | None:
    """:func:`throttled_periods` of VNF ``name``'s group (None: no group here)."""
    return throttled_periods(group_cpu_stat(name))


def cpu_throttled_us(name: str) -> float | None:
    """:func:`throttled_time_us` of VNF ``name``'s group (None: no group here)."""
    return throttled_time_us(group_cpu_stat(name))


def group_usage(key: str) -> dict | None:
    from fluidvim.vnf import cgroups  # the launch core's cgroup layout
    return cgroups.cpu_usage(key)


CAP_PERIOD_US = 20_000               # the longest CFS period of a capped VNF's quota (CgroupCap)
MIN_PERIOD_US = 1000                 # CFS's least period, and its least quota
WAIT_SHARE = 0.5                     # the part of a VNF's latency target its cap's gap may take


def least_share(gap_us: float, longest_us: int = CAP_PERIOD_US) -> float:
    """The least share of its flavor's CPU a cap may give a VNF whose throttled gap,
    ``period × (1 − share)``, must stay within ``gap_us``: the quota ``share × period`` is at
    least CFS's 1000 µs, so the shortest period for a share is ``1000 / share`` and its gap
    ``1000 × (1 − share) / share``; within ``gap_us`` from ``1000 / (1000 + gap_us)`` on (95 %
    for 50 µs, 29 % for 2.5 ms), and never below ``1000 / longest_us`` (5 % on 20 ms)."""
    return max(MIN_PERIOD_US / (MIN_PERIOD_US + max(0.0, gap_us)), MIN_PERIOD_US / longest_us)


def cap_period(share: float, gap_us: float, longest_us: int = CAP_PERIOD_US) -> int | None:
    """The CFS period (µs) of a cap of ``share`` (0 < share < 1: of its flavor's quota) whose
    throttled gap ``period × (1 − share)`` is at most ``gap_us``: the longest such period up
    to ``longest_us`` (fewer throttled periods, less of CFS's overhead), at least 1000 µs and
    long enough for a quota of 1000 µs; None when no period does (``share`` below
    :func:`least_share`: the controller does not cap). A whole CPU or more: ``longest_us``."""
    if share >= 1:
        return int(longest_us)
    if share <= 0:
        return None
    hi = int(min(float(longest_us), gap_us / (1.0 - share) + 1e-6))
    lo = max(MIN_PERIOD_US, math.ceil(MIN_PERIOD_US / share - 1e-6))
    return hi if hi >= lo else None


def gap_us(period_us: int | None, quota_us: int, reserved_us: int) -> float:
    """The throttled gap (µs) of a cap of ``quota_us`` of ``reserved_us`` on ``period_us``:
    ``period × (1 − share)``; 0 at the flavor's quota or without a period."""
    if period_us is None or quota_us >= reserved_us:
        return 0.0
    return period_us * (1.0 - quota_us / reserved_us)


def ring_wait(rate: float | None, periods: int | None, spent_us: float | None,
              gap: float) -> float:
    """Frames that waited in a capped VNF's RX ring for its cap in an interval: its offered
    ``rate`` (packets/s) × the wall time it was throttled, ``spent_us`` (``cpu.stat``'s
    throttled time, summed over CPUs) at most its throttled ``periods`` × the ``gap`` (µs);
    without the time, the periods × the gap; 0 without a gap, a rate or either reading."""
    if not gap or rate is None:
        return 0.0
    bound = None if periods is None else periods * gap
    wall = spent_us if bound is None else bound if spent_us is None else min(spent_us, bound)
    return 0.0 if wall is None else rate * wall / 1e6


class CgroupCap:
    """The production actuator: the controller's quota (µs per the flavor's 100 ms period) on
    the VNF's **vCPU threads** (:func:`fluidvim.vnf.cgroups.set_vcpu_quota`), never on QEMU's
    main thread: capping the whole group (as before) let the tap queue frames well beyond the
    throttled gap (bench/powercap, 11-28 16:49: p99 13 ms on a 2.5 ms gap). A cap is written
    as the same share of the CFS period the controller chose for it (:func:`cap_period`: its
    throttled gap, ``period - quota``, within the part of the target the cap may take; at most
    ``period_us``). Whole CPUs (the flavor's quota, a release) lift the vCPUs' cap and put the
    group back at the launch's quota, the flavor's period with QEMU's own allowance on top
    (``QEMU_OVERHEAD_CPU_US``, vnf/cgroups.py). The kernel's 1000 µs minimum quota makes
    ``1000 / period`` the least share of a period."""

    def __init__(self, period_us: int = CAP_PERIOD_US):
        if not MIN_PERIOD_US <= int(period_us) <= 1_000_000:
            raise PowerError(f"cap period {period_us} us is outside the kernel's 1000..1000000 us")
        self.period_us = int(period_us)

    def __call__(self, key: str, quota_us: int, period_us: int | None = None) -> bool:
        """Write ``quota_us`` (per the flavor's period) on ``period_us`` (None: the longest,
        ``self.period_us``)."""
        from fluidvim.vnf import cgroups, limits  # the launch core's cgroup layout
        if quota_us % limits.CPU_PERIOD_US == 0:
            lifted = cgroups.set_vcpu_quota(key, None)
            return cgroups.set_cpu_quota(key, quota_us + limits.QEMU_OVERHEAD_CPU_US) and lifted
        period = min(self.period_us, int(period_us or self.period_us))
        period = max(MIN_PERIOD_US, period)
        share = quota_us / limits.CPU_PERIOD_US
        return cgroups.set_vcpu_quota(key, max(MIN_PERIOD_US, round(share * period)), period)


def set_thread_nice(pid: int | None, nice: int, proc: str = "/proc") -> int:
    """Nice ``nice`` on every thread of QEMU ``pid`` but its main one (its vCPUs and idle
    workers, as ``[vnf] vcpu_nice`` sets them at launch: vnf/backends.py): the threads it
    changed. A thread that just ended, or no process, is skipped."""
    if not pid:
        return 0
    try:
        tids = [int(t) for t in os.listdir(f"{proc}/{pid}/task") if int(t) != int(pid)]
    except OSError:
        return 0
    done = 0
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, int(nice))
            done += 1
        except (ProcessLookupError, PermissionError):
            continue
    return done


def group_procs(key: str) -> list[int]:
    """The processes in VNF ``key``'s cgroup (its QEMU), [] when none here."""
    from fluidvim.vnf import cgroups  # the launch core's cgroup layout
    for d in cgroups.dirs(key):
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
        if pids:
            return pids
    return []


class ThreadNice:
    """The production renicer (``renice`` of :class:`.controller.LatencyController`): ``nice``
    on the threads of VNF ``key``'s QEMU but its main one (:func:`set_thread_nice`: its vCPUs),
    None: back to the nice they had before its first change (``[vnf] vcpu_nice``, 10 by
    default, set at launch). True when a thread was set, or nothing was to be restored."""

    def __init__(self, procs=group_procs):
        self.procs = procs
        self.before: dict = {}       # key -> the nice its threads had before the first change

    def __call__(self, key: str, nice: int | None) -> bool:
        pids = self.procs(key)
        if nice is None and key not in self.before:
            return True
        if nice is not None and key not in self.before:
            found = [thread_nice(p) for p in pids]
            found = [n for n in found if n is not None]
            if not found:
                return False
            self.before[key] = found[0]
        value = self.before.pop(key) if nice is None else nice
        return sum(set_thread_nice(p, value) for p in pids) > 0


def thread_nice(pid: int, proc: str = "/proc") -> int | None:
    """The nice of QEMU ``pid``'s first thread but its main one, None: none readable."""
    try:
        tids = sorted(int(t) for t in os.listdir(f"{proc}/{pid}/task") if int(t) != int(pid))
    except OSError:
        return None
    for tid in tids:
        try:
            return os.getpriority(os.PRIO_PROCESS, tid)
        except OSError:
            continue
    return None


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


def ring_reading(st, stats: dict | None, taps: list | None):
    """(frames the host dropped for the VNF this interval, its ring backlog in frames), each
    None when not known (controller.py's module doc), from its taps' counters
    (:func:`tap_counters`) and its NICs' ``rx``; ``st`` (its :class:`~.ctlstate.VnfState`)
    keeps the last reading and the backlog's offset."""
    if taps is None:
        st.tap_dropped = st.ring_raw = st.ring_base = None
        return None, None
    total = sum(int(t["tx_dropped"]) for t in taps)
    prev, st.tap_dropped = st.tap_dropped, total
    dropped = None if prev is None else (total - prev if total >= prev else total)
    nics = (stats or {}).get("nics") or []
    if stats is None or not taps or len(nics) != len(taps):
        st.ring_raw = st.ring_base = None
        return dropped, None
    cur = [(int(t["tx_packets"]), int(n.get("rx", 0))) for t, n in zip(taps, nics)]
    raw = [tx - rx for tx, rx in cur]
    old = st.ring_raw
    if (st.ring_base is None or old is None or len(old) != len(cur)
            or any(tx < ptx or rx < prx for (tx, rx), (ptx, prx) in zip(cur, old))):
        st.ring_base = list(raw)             # first read, or a counter restarted
    st.ring_base = [min(b, r) for b, r in zip(st.ring_base, raw)]
    st.ring_raw = cur
    return dropped, max(r - b for r, b in zip(raw, st.ring_base))


def vcpu_need(st, stats: dict | None, usage: dict | None) -> float | None:
    """The CPUs the VNF's vCPU needed since the last reading (``st``, its
    :class:`~.ctlstate.VnfState`, keeps it), None when not known: its busy share of the rounds
    it ran (steal-free: ``busy_us`` over ``busy_us + poll_us``, the host's throttled and
    preempted time being ``stolen_us``, PROTOCOL.md) applied to its vCPU threads' host CPU
    (``usage``: :func:`group_usage`; kept as ``st.vcpu_now``), which is what a cap holds (its
    vCPU sub-group; QEMU's main thread runs free); without the host's figures, its busy share
    of the time."""
    st.vcpu_now = None
    cpu = (stats or {}).get("cpu") or {}
    try:
        up, busy, poll = (int(stats["uptime_us"]), int(cpu["busy_us"]),  # type: ignore[index]
                          int(cpu["poll_us"]))
    except (KeyError, TypeError, ValueError):
        st.cpu = None
        return None
    prev, st.cpu = st.cpu, (up, busy, poll, usage)
    if prev is None or up <= prev[0] or busy < prev[1] or poll < prev[2]:
        return None                          # the first reading, or the VNF restarted
    dt, db, dp = up - prev[0], busy - prev[1], poll - prev[2]
    if usage is None or prev[3] is None:
        return db / dt
    vcpu = max(0.0, (usage["vcpu"] - prev[3]["vcpu"]) * 1e6)
    st.vcpu_now = vcpu / dt
    share = db / (db + dp) if db + dp > 0 else 0.0
    return vcpu * share / dt


def offered_rate(st, stats: dict | None, dropped: int | None, span: int):
    """(packets/s offered to the VNF this interval: the frames its NICs took and those the
    host dropped for it, per second of its uptime; the frames it dropped itself (its NICs'
    ``drop``: a TX ring its throttled QEMU did not drain) beyond the largest share of its
    last ``span`` open intervals (a firewall's policy drops are no loss), counted when
    capped; the host's drops, moderated beyond its open share, :func:`.highload.host_over_open`);
    the first two None when not known (the first reading, no ``nics``, a restart)."""
    try:
        nics = stats["nics"]                                  # type: ignore[index]
        cur = (int(stats["uptime_us"]), sum(int(n.get("rx", 0)) for n in nics),  # type: ignore[index]
               sum(int(n.get("drop", 0)) for n in nics))
    except (KeyError, TypeError, ValueError):
        st.rx = st.taken = None
        return None, None, dropped
    prev, st.rx, st.taken = st.rx, cur, None
    if prev is None or cur[0] <= prev[0] or cur[1] < prev[1] or cur[2] < prev[2]:
        return None, None, dropped
    rx, drop = cur[1] - prev[1], cur[2] - prev[2]
    rate = (rx + (dropped or 0)) * 1e6 / (cur[0] - prev[0])
    st.taken = rx * 1e6 / (cur[0] - prev[0])         # of those, the frames its NICs took
    host = host_over_open(st, rx, dropped)
    if st.state == "open":        # controller.OPEN
        st.open_drops = (st.open_drops + [drop / max(1, rx)])[-span:]
        return rate, 0, host
    return rate, beyond_open(drop, st.open_drops, rx), host


def backlog_over_open(st, backlog: int | None, span: int) -> int | None:
    """The ring backlog beyond the largest of the last ``span`` open intervals' (what
    the VNF carries at the flavor's quota is not the cap's doing); an open interval's own
    backlog is kept for that."""
    if backlog is None:
        return None
    base = max(st.open_backlogs, default=0)
    if st.state == "open":
        st.open_backlogs = (st.open_backlogs + [backlog])[-span:]
        base = max(base, backlog)
    return max(0, backlog - base)
