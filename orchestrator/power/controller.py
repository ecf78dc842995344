# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A latency-target controller: the least CPU that keeps each VNF's p99 within its target
(PRESTO's observe - decide - act loop, per host).

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture).

Every interval, for each VNF with a target (``[metrics] latency_targets``: VNF name or service →
p99 in microseconds), the controller

* **observes** the VNF's own latency histogram (``stats`` → ``latency_ns.buckets_log2``, PROTOCOL.md)
  over the interval (the difference of two replies) and takes its p99 the way the VNF does (the
  lower bound of the bucket holding it), and its packets;
* **observes the host's side too** (``taps``: its NICs' host taps, :func:`tap_counters`), because
  the histogram starts at FromDevice and is blind to a frame that waits in the RX ring while the
  capped vCPU is throttled or halted: the tap's ``tx_dropped`` (frames the host had for the VNF
  and dropped, its ring and the tap's queue full) and the **ring backlog**, ``tx_packets`` of the
  tap (frames the backend put into the guest's ring) minus the VNF's own ``rx`` of that NIC
  (frames it took; the taps read just before its ``stats``, so frames that arrive meanwhile do
  not count: a lower bound, never a false release at a high rate), less the smallest difference
  seen (an offset: frames before its driver
  counted, a restart resets it; TSO superframes count once on the tap and per segment in the VNF,
  so with TCP it reads low and the drops remain);
* **observes whether the cap held it back**: the periods its group was throttled in
  (``nr_throttled`` of its cgroup's ``cpu.stat``, :func:`cpu_throttled`), this interval or the
  one before (a frame held at the end of one is counted in the next);
* **decides**, with hysteresis:

  - no reply (the VNF stopped answering), frames dropped for it on the host, or a backlog of
    ``full`` of the ring (:meth:`LatencyController.set_ring`) or more: **release** at once, back
    to the CPU quota its flavor reserved;
  - p99 > 2 × target: **release**, and p99 > target: **up** one step (quota × ``up``), when the
    quota held it back (throttled; or not known); when it did not, the latency came from
    elsewhere (the host's other work preempting the vCPU) and more quota cannot buy it back:
    **hold**. On a busy host that noise, not the cap, made the controller release the cap it
    had stepped down to, again and again (bench/powercap);
  - a backlog of ``high`` of the ring or more: **hold** (no step down however good p99);
  - p99 ≤ target / 2, or too few packets to show a p99, ``hold_intervals`` intervals in a row:
    **down** one step (quota × ``down``, never below ``min_quota_us``, nor below a floor learned
    from the last release the ring forced: one step up from where it was, sinking a step
    after ``FLOOR_AGE`` blocked steps; without it, at high load the controller stepped down
    into losses, released, and did it again);
  - otherwise **hold** (between target / 2 and target);

* **acts** through ``actuator(vnf key, quota µs per period)``: in production
  :class:`CgroupCap` on the VNF's own group (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` and
  ``cpu.cfs_period_us``: a cap on a 20 ms period, not the flavor's 100 ms); and through
  ``poller(vnf key, µs)`` (returning the window the VNF confirms), the VNF's busy-poll window
  (the ``poll`` op, PROTOCOL.md §4), moved by the same factors between ``min_poll_us`` and the
  boot default of 1000 µs and restored with a release.

Its decisions are logged and kept (:attr:`LatencyController.decisions`), and the exporter shows
them in ``<run_dir>/power.json`` (``fluidvim vnf stats``) and as ``fluidvim_vnf_cpu_quota_ratio``.
Not yet: powercap limits; a view of the ring itself (the backlog is inferred from counters).
"""

from __future__ import annotations

import dataclasses
import os
import time

from oslo_log import log as logging

from .models import PowerError

LOG = logging.getLogger(__name__)

RELEASE, UP, DOWN, HOLD = "release", "up", "down", "hold"
RING_WHY = ("host dropped", "ring backlog")   # the reasons of the ring's releases


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


POLL_DEFAULT_US = 1000               # the VNF's boot default (contract/PROTOCOL.md §4 poll)
RING_FRAMES = 256                    # QEMU's virtio-net RX queue size (rx_queue_size default)


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


CAP_PERIOD_US = 20_000               # the CFS period of a capped VNF's quota (CgroupCap)


class CgroupCap:
    """The production actuator: the controller's quota (µs per the flavor's 100 ms period) on
    the VNF's own cgroup (:func:`fluidvim.vnf.cgroups.set_cpu_quota`). A cap is written as the
    same share of a ``period_us`` period: a throttled VNF stalls for up to ``period - quota``,
    95 ms at a 5 % cap on the flavor's 100 ms period, long enough to blow its p99 in most
    intervals at 10 % load, and 19 ms on 20 ms, which kept it within target (bench/powercap).
    Whole CPUs (the flavor's quota, a release) go back on the flavor's period. The kernel's
    1000 µs minimum makes ``1000 / period_us`` the least share (5 % on 20 ms)."""

    def __init__(self, period_us: int = CAP_PERIOD_US):
        if not 1000 <= int(period_us) <= 1_000_000:
            raise PowerError(f"cap period {period_us} us is outside the kernel's 1000..1000000 us")
        self.period_us = int(period_us)

    def __call__(self, key: str, quota_us: int) -> bool:
        from fluidvim.vnf import cgroups, limits  # the launch core's cgroup layout
        if quota_us % limits.CPU_PERIOD_US == 0:
            return cgroups.set_cpu_quota(key, quota_us)
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


@dataclasses.dataclass
class VnfState:
    reserved_us: int                 # the flavor's quota: vcpus x period
    quota_us: int                    # what is set now
    poll_us: int = POLL_DEFAULT_US   # the busy-poll window wanted
    poll_applied: int | None = None  # what the VNF last confirmed (None: not yet)
    good: int = 0                    # intervals in a row at or under target / 2
    buckets: list | None = None
    last: dict | None = None         # the last decision
    tap_dropped: int | None = None   # the taps' tx_dropped at the last interval
    ring_raw: list | None = None     # per NIC: (tap tx_packets, VNF rx), last read
    ring_base: list | None = None    # per NIC: the smallest of those (the offset)
    floor_us: int = 0                # learned: no step down below it (see LatencyController._next)
    floor_age: int = 0               # steps down it blocked since it was set or last sank
    throttled: int | None = None     # the group's nr_throttled at the last interval
    held: tuple = ()                 # throttled periods in the last two intervals (None: unknown)


class LatencyController:
    period_us = 100_000              # the cgroup period (vnf/limits.py CPU_PERIOD_US)
    FLOOR_AGE = 10                   # steps down a learned floor blocks before it sinks a step

    def __init__(self, actuator, min_quota_us: int = 5_000, down: float = 0.8, up: float = 1.5,
                 hold_intervals: int = 3, min_packets: int = 100, poller=None,
                 min_poll_us: int = 50):
        if not 0 < down < 1 < up:
            raise PowerError(f"controller steps need 0 < down < 1 < up, got down={down} up={up}")
        if min_quota_us < 1000:
            raise PowerError(f"min_quota_us {min_quota_us} is below the kernel's 1000 us")
        self.actuator = actuator
        self.min_quota_us = min_quota_us
        self.down, self.up, self.hold_intervals = down, up, hold_intervals
        self.min_packets = min_packets
        self.poller, self.min_poll_us = poller, int(min_poll_us)
        # (vnf key) -> its cumulative throttled periods, None when not known; tests replace it
        self.throttled = cpu_throttled
        self.set_ring()

    def set_ring(self, frames: int = RING_FRAMES, high: float = 0.25, full: float = 0.75) -> None:
        """The RX ring's size in frames and the fractions of it at which a backlog holds the
        cap (``high``) and releases it (``full``)."""
        if not 0 < high <= full <= 1 or frames < 1:
            raise PowerError(f"controller ring thresholds need 0 < high <= full <= 1 and frames "
                             f">= 1, got high={high} full={full} frames={frames}")
        self.ring_high, self.ring_full = high * frames, full * frames
        self.state: dict = {}
        self.decisions: list = []

    def forget(self, key: str) -> None:
        self.state.pop(key, None)

    def step(self, key: str, name: str, target_us: float, vcpus: int, stats: dict | None,
             taps: list | None = None) -> dict:
        """One interval of one VNF: observe ``stats`` (None: it did not answer) and ``taps``
        (:func:`tap_counters` of its NICs' host taps, read just before; None: not known),
        decide, act."""
        reserved = max(1, int(vcpus)) * self.period_us
        st = self.state.get(key)
        if st is None:
            st = self.state[key] = VnfState(reserved_us=reserved, quota_us=reserved)
        dropped, backlog = self._ring(st, stats, taps)
        held = self._held(key, st)
        action, why, p99, packets = self._decide(st, stats, float(target_us) * 1000.0,
                                                 dropped, backlog, held)
        if action != DOWN and action != HOLD:
            st.good = 0
        action, why, new = self._next(st, action, why, reserved)
        self._apply_poll(key, name, st)
        st.reserved_us = reserved
        if new != st.quota_us or action == RELEASE:
            self.actuator(key, new)
            st.quota_us = new
        d = {"vnf": name, "at": time.time(), "action": action, "why": why, "p99_ns": p99,
             "packets": packets, "host_dropped": dropped, "ring_backlog": backlog,
             "throttled": st.held[-1] if st.held else None, "floor_us": st.floor_us,
             "target_us": target_us, "quota_us": st.quota_us,
             "reserved_us": reserved, "quota_ratio": st.quota_us / reserved,
             "poll_window_us": st.poll_us, "poll_window_applied_us": st.poll_applied}
        st.last = d
        self.decisions.append(d)
        del self.decisions[:-1000]
        if action in (RELEASE, UP, DOWN):
            LOG.info("controller %s: %s to %d us of %d (%s)", name, action, st.quota_us,
                     reserved, why)
        return d

    def _next(self, st: VnfState, action: str, why: str, reserved: int):
        """(action, why, the quota) after ``action``; moves the poll window with it and keeps
        the learned floor: a release the VNF's ring forced (frames dropped or a full ring: the
        end-to-end evidence; a p99 breach may be the host's noise) sets the floor one step up
        from the quota that caused it, so the next descent stops there
        instead of repeating the loss; it sinks one step down after ``FLOOR_AGE`` steps down
        it blocked."""
        new = st.quota_us
        if action == RELEASE:
            if st.quota_us < reserved and why.startswith(RING_WHY):
                st.floor_us = min(reserved, int(st.quota_us * self.up))
                st.floor_age = 0
            new, st.poll_us = reserved, POLL_DEFAULT_US
        elif action == UP:
            new = min(reserved, int(st.quota_us * self.up))
            st.poll_us = min(POLL_DEFAULT_US, max(self.min_poll_us, int(st.poll_us * self.up)))
        elif action == DOWN:
            st.good = 0
            new = max(self.min_quota_us, st.floor_us, int(st.quota_us * self.down))
            if new >= st.quota_us:
                st.floor_age += 1
                if st.floor_age >= self.FLOOR_AGE:
                    st.floor_us, st.floor_age = int(st.floor_us * self.down), 0
                return HOLD, f"{why}; at the floor {st.floor_us} us", st.quota_us
            st.poll_us = max(self.min_poll_us, int(st.poll_us * self.down))
        return action, why, new

    def _apply_poll(self, key: str, name: str, st: VnfState) -> None:
        """Tell the VNF its busy-poll window when it differs from what it last confirmed; a VNF
        that does not answer is told again next interval."""
        if self.poller is None or st.poll_applied == st.poll_us:
            return
        try:
            st.poll_applied = int(self.poller(key, st.poll_us))
        except Exception as e:       # noqa: BLE001 - the control channel may fail any way
            LOG.debug("controller %s: poll window not set: %s", name, e)

    def _held(self, key: str, st: VnfState) -> bool | None:
        """Whether the quota held the VNF back (throttled) this interval or the one before;
        None when not known (no group, no reader, the first reading)."""
        try:
            cur = self.throttled(key) if self.throttled is not None else None
        except Exception as e:       # noqa: BLE001 - an unreadable group: not known
            LOG.debug("controller %s: throttling not read: %s", key, e)
            cur = None
        prev, st.throttled = st.throttled, cur
        delta = None if cur is None or prev is None or cur < prev else cur - prev
        st.held = (st.held + (delta,))[-2:]
        return None if delta is None else any(d for d in st.held if d)

    @staticmethod
    def _ring(st: VnfState, stats: dict | None, taps: list | None):
        """(frames the host dropped for the VNF this interval, its ring backlog in frames), each
        None when not known (see the module doc)."""
        if taps is None:
            st.tap_dropped = st.ring_raw = st.ring_base = None
            return None, None
        total = sum(int(t["tx_dropped"]) for t in taps)
        prev, st.tap_dropped = st.tap_dropped, total
        dropped = None if prev is None else (total - prev if total >= prev else total)
        nics = (stats or {}).get("nics") or []
        if stats is None or len(nics) != len(taps):
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

    def _decide(self, st: VnfState, stats: dict | None, target_ns: float,
                dropped: int | None = None, backlog: int | None = None,
                held: bool | None = None):
        """(action, why, p99 ns, packets) of one interval; ``held``: whether the quota held the
        VNF back lately (None: not known, taken as yes)."""
        if stats is None:
            return RELEASE, "no stats reply", None, None
        b1 = list((stats.get("latency_ns") or {}).get("buckets_log2") or [])
        first = st.buckets is None
        p99, packets = (None, 0) if first else interval_p99(st.buckets, b1)
        st.buckets = b1
        if dropped:
            return RELEASE, f"host dropped {dropped} frames for it (ring full)", p99, packets
        if backlog is not None and backlog >= self.ring_full:
            return RELEASE, f"ring backlog {backlog} frames", p99, packets
        if first:
            return HOLD, "first observation", None, 0
        shown = p99 is not None and packets >= self.min_packets
        if p99 is not None and p99 > 2 * target_ns:
            if held is False:
                st.good = 0
                return HOLD, f"p99 {p99} ns > 2 x target, not throttled", p99, packets
            return RELEASE, f"p99 {p99} ns > 2 x target", p99, packets
        if backlog is not None and backlog >= self.ring_high:
            st.good = 0
            return HOLD, f"ring backlog {backlog} frames", p99, packets
        if shown and p99 > target_ns:
            if held is False:
                st.good = 0
                return HOLD, f"p99 {p99} ns > target, not throttled", p99, packets
            return UP, f"p99 {p99} ns > target", p99, packets
        if not shown or p99 <= target_ns / 2:
            st.good += 1
            why = f"p99 {p99} ns <= target / 2" if shown else f"{packets} packets"
            return (DOWN if st.good >= self.hold_intervals else HOLD), why, p99, packets
        st.good = 0
        return HOLD, f"p99 {p99} ns within (target / 2, target]", p99, packets

