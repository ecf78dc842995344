# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A latency-target controller: the least CPU that keeps each VNF's p99 within its target
(PRESTO's observe - decide - act loop, per host).

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture).

Every interval, for each VNF with a target (``[metrics] latency_targets``: VNF name or service →
p99 in microseconds), the controller

* **observes** the VNF's own latency histogram (``stats`` → ``latency_ns.buckets_log2``, PROTOCOL.md)
  over the interval (the difference of two replies) and takes its p99 the way the VNF does (the
  lower bound of the bucket holding it), its packets, and how many of them were over the target;
* **observes what it needs**: its own busy share (``stats`` → ``cpu``: ``busy_us`` over
  ``busy_us + poll_us``, the rounds that moved frames of those it ran) applied to the host CPU
  of its vCPU threads, plus its QEMU's own CPU beside them (the main thread's tap I/O, which the
  VNF cannot see), both from its group's processes (:func:`fluidvim.vnf.cgroups.cpu_usage`):
  ``need`` in CPUs. Polling is what it does not need. Without the host's figures, its busy share
  twice (QEMU's share taken as equal to it: bench/powercap measured them alike at a cap);
* **observes the host's side** (``taps``: its NICs' host taps, :func:`tap_counters`), because
  the histogram starts at FromDevice and is blind to a frame that waits in the RX ring while the
  capped vCPU is throttled or halted: the tap's ``tx_dropped`` (frames the host had for the VNF
  and dropped, its ring and the tap's queue full) and the **ring backlog**, ``tx_packets`` of the
  tap (frames the backend put into the guest's ring) minus the VNF's own ``rx`` of that NIC
  (frames it took; the taps read just before its ``stats``, so frames that arrive meanwhile do
  not count: a lower bound, never a false release at a high rate), less the smallest difference
  seen (an offset: frames before its driver counted, a restart resets it; TSO superframes count
  once on the tap and per segment in the VNF, so with TCP it reads low and the drops remain);
* **observes whether the cap held it back**: the periods its group was throttled in
  (``nr_throttled`` of its cgroup's ``cpu.stat``, :func:`cpu_throttled`), this interval and the
  one before (a frame held at the end of one is counted in the next);
* **decides** from one table, :data:`POLICY`: the interval is classified into the first
  :data:`EVENTS` entry that applies, and ``POLICY[event][state]`` is the action in the VNF's
  state, :data:`OPEN` (at the flavor's quota) or :data:`CAPPED` (below it):

  ============  =====================================================  ========  ========
  event         when                                                   OPEN      CAPPED
  ============  =====================================================  ========  ========
  silent        no stats reply (the VNF stopped answering)             release   release
  dropped       the host dropped frames for it (its ring was full)     release   release
  ring full     a ring backlog of ``full`` of the ring or more         release   release
  breach x2     p99 > 2 × target, and the cap's doing (below)          hold      release
  breach        p99 > target, and the cap's doing                      hold      up
  noise         p99 > target, not the cap's doing                      hold      hold
  backlog       a ring backlog of ``high`` of the ring or more         hold      hold
  high load     its need ≥ ``max_ratio`` of the flavor's quota         hold      up
  quiet         p99 ≤ target / 2, or too few packets to show one       cap       down
  band          otherwise (p99 within (target / 2, target])            hold      hold
  ============  =====================================================  ========  ========

  The cap's doing: a throttled period (the quota ran out) stalls the frame in process
  (``throttle_hits`` frames; raise it for a chain with Queues, whose frames wait in them; the
  histogram does not count a frame still in the ring), so a breach is the cap's when the group
  was throttled (or that is not known) and the packets over the target less ``throttle_hits``
  per throttled period would no longer breach: more quota would buy it back. Otherwise the
  latency came from the host (the vCPU preempted by other work, the generator): a release
  would not help, and on a busy host such noise made the controller release, again and again,
  every cap it set (bench/powercap).

  ``cap`` and ``down`` wait for ``hold_intervals`` quiet intervals in a row. **cap** jumps from
  the flavor's quota straight to ``need × headroom + margin_us`` (the median ``need`` of the
  quiet streak; a step of ``down`` when ``need`` is not known; at most ``max_ratio`` of the
  flavor's quota) and narrows the busy-poll window to ``min_poll_us``; it stays open (**high
  load**) when the need itself is ``max_ratio`` of the flavor's or more: little to save, much
  to lose (the frames no longer fit in the stalls of a 20 ms period). **down** then looks for
  the least CPU that keeps the target: a step of ``down`` (or the sized cap, if lower, from
  intervals it was not throttled in: a throttled VNF cannot show what it would use),
  throttled or not. A VNF that halts after each frame pays a wake-up per frame (VM exits:
  ~0.3 ms of host CPU under nested KVM); a throttled one finds its frames batched in its
  ring, which its own latency does not count and the ring's signals guard (bench/powercap: a
  fixed 10 % cap at 10 % load cut host CPU 69 % with every interval within target, where the
  VNF's need read 0.2 CPU). **up** takes the larger of ``quota × up`` and the sized cap (the
  flavor's quota, and the state OPEN, when that reaches ``max_ratio``). **release** goes back
  to the flavor's quota and the 1 ms window at once; a release the ring forced, or a breach
  seen throttled, sets a floor one step up from the quota that caused it, which later caps
  respect, and which sinks a step after ``FLOOR_AGE`` steps down it blocked (without it, at
  high load the controller capped into losses, released, and did it again);

* **acts** through ``actuator(vnf key, quota µs per period)``: in production
  :class:`CgroupCap` on the VNF's own group (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` and
  ``cpu.cfs_period_us``: a cap on a 20 ms period, not the flavor's 100 ms); and through
  ``poller(vnf key, µs)`` (returning the window the VNF confirms), the VNF's busy-poll window
  (the ``poll`` op, PROTOCOL.md §4): the boot default of 1000 µs when open, ``min_poll_us`` when
  capped (polling spends the quota the frames need), moved by the step factors with the
  quota's steps, restored with a release.

Its decisions (with the event, the state and ``need``) are logged and kept
(:attr:`LatencyController.decisions`), and the exporter shows them in ``<run_dir>/power.json``
(``fluidvim vnf stats``) and as ``fluidvim_vnf_cpu_quota_ratio``. Not yet: powercap limits; a
view of the ring itself (the backlog is inferred from counters).
"""

from __future__ import annotations

import dataclasses
import os
import time

from oslo_log import log as logging

from .models import PowerError

LOG = logging.getLogger(__name__)

# the VNF's states: at its flavor's quota, or below it
OPEN, CAPPED = "open", "capped"
# the actions
RELEASE, UP, DOWN, HOLD, CAP = "release", "up", "down", "hold", "cap"
# the events an interval is classified into, the first that applies (module doc)
SILENT, DROPPED, RING_FULL = "silent", "dropped", "ring full"
BREACH2, BREACH, NOISE = "breach x2", "breach", "noise"
BACKLOG, HIGH_LOAD, QUIET, BAND = "backlog", "high load", "quiet", "band"
EVENTS = (SILENT, DROPPED, RING_FULL, BREACH2, BREACH, NOISE, BACKLOG, HIGH_LOAD, QUIET, BAND)
# the state machine: POLICY[event][state] is the action; the state after it is OPEN when the
# quota is the flavor's, else CAPPED (CAP, DOWN: CAPPED; RELEASE: OPEN; UP: either)
POLICY = {
    SILENT:    {OPEN: RELEASE, CAPPED: RELEASE},
    DROPPED:   {OPEN: RELEASE, CAPPED: RELEASE},
    RING_FULL: {OPEN: RELEASE, CAPPED: RELEASE},
    BREACH2:   {OPEN: HOLD,    CAPPED: RELEASE},
    BREACH:    {OPEN: HOLD,    CAPPED: UP},
    NOISE:     {OPEN: HOLD,    CAPPED: HOLD},
    BACKLOG:   {OPEN: HOLD,    CAPPED: HOLD},
    HIGH_LOAD: {OPEN: HOLD,    CAPPED: UP},
    QUIET:     {OPEN: CAP,     CAPPED: DOWN},
    BAND:      {OPEN: HOLD,    CAPPED: HOLD},
}
# releases that leave a floor: the cap's evidence (a breach only when it was seen throttled)
FLOOR_EVENTS = (DROPPED, RING_FULL, BREACH2)


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


def _group_usage(key: str) -> dict | None:
    from fluidvim.vnf import cgroups  # the launch core's cgroup layout
    return cgroups.cpu_usage(key)


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
class Sizing:
    """min_poll_us, headroom, margin_us, max_ratio, throttle_hits (module doc)"""
    min_poll_us: int = 50            # the busy-poll window of a capped VNF
    headroom: float = 1.5            # a cap is need x headroom + margin_us
    margin_us: int = 2_000
    max_ratio: float = 0.7           # no cap when the need is this share of the flavor's
    throttle_hits: int = 1           # frames one throttled period can stall in the VNF

    def __post_init__(self):
        if (self.headroom < 1 or not 0 < self.max_ratio <= 1 or self.margin_us < 0
                or self.throttle_hits < 0 or self.min_poll_us < 0):
            raise PowerError(f"controller sizing needs headroom >= 1, 0 < max_ratio <= 1, "
                             f"margin_us, throttle_hits and min_poll_us >= 0, "
                             f"got {self}")


@dataclasses.dataclass
class VnfState:
    reserved_us: int                 # the flavor's quota: vcpus x period
    quota_us: int                    # what is set now
    state: str = OPEN                # OPEN (the flavor's quota) or CAPPED
    poll_us: int = POLL_DEFAULT_US   # the busy-poll window wanted
    poll_applied: int | None = None  # what the VNF last confirmed (None: not yet)
    good: int = 0                    # quiet intervals in a row
    buckets: list | None = None
    last: dict | None = None         # the last decision
    tap_dropped: int | None = None   # the taps' tx_dropped at the last interval
    ring_raw: list | None = None     # per NIC: (tap tx_packets, VNF rx), last read
    ring_base: list | None = None    # per NIC: the smallest of those (the offset)
    floor_us: int = 0                # learned: no cap below it (see LatencyController._next)
    floor_age: int = 0               # steps down it blocked since it was set or last sank
    throttled: int | None = None     # the group's nr_throttled at the last interval
    held: tuple = ()                 # throttled periods in the last two intervals (None: unknown)
    cpu: tuple | None = None         # (uptime, busy, poll µs; its QEMU's usage) last read
    needs: list = dataclasses.field(default_factory=list)   # need (CPUs) of the quiet streak


class LatencyController:
    FLOOR_AGE = 10                   # steps down a learned floor blocks before it sinks a step

    def __init__(self, actuator, min_quota_us: int = 5_000, down: float = 0.8, up: float = 1.5,
                 hold_intervals: int = 3, min_packets: int = 100, poller=None, **sizing):
        """``sizing``: the fields of :class:`Sizing` (``min_poll_us``, ``headroom``,
        ``margin_us``, ``max_ratio``, ``throttle_hits``)."""
        from fluidvim.vnf import limits  # the launch core's; imported lazily (import contracts)

        self.period_us = limits.CPU_PERIOD_US      # the flavor's quota period (reserved_us)
        if not 0 < down < 1 < up:
            raise PowerError(f"controller steps need 0 < down < 1 < up, got down={down} up={up}")
        if min_quota_us < 1000:
            raise PowerError(f"min_quota_us {min_quota_us} is below the kernel's 1000 us")
        try:
            sz = Sizing(**sizing)
        except TypeError as e:
            raise PowerError(f"controller: {e}; its settings are {Sizing.__doc__}") from None
        self.actuator = actuator
        self.min_quota_us = min_quota_us
        self.down, self.up, self.hold_intervals = down, up, hold_intervals
        self.min_packets = min_packets
        self.poller, self.min_poll_us = poller, int(sz.min_poll_us)
        self.headroom, self.margin_us, self.max_ratio = sz.headroom, sz.margin_us, sz.max_ratio
        self.throttle_hits = sz.throttle_hits
        # (vnf key) -> its cumulative throttled periods, None when not known; tests replace it
        self.throttled = cpu_throttled
        # (vnf key) -> {"total", "vcpu"} CPU-s of its QEMU, None when not known; likewise
        self.usage = _group_usage
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

    def rebase(self, key: str) -> None:
        """Forget what VNF ``key``'s counters read last (its histogram, taps, CPU, throttling)
        but keep what was decided (quota, window, state, floor): after a pause in which it was
        not observed, the next interval must not span the gap (bench/powercap's other modes)."""
        st = self.state.get(key)
        if st is not None:
            st.buckets = st.tap_dropped = st.ring_raw = st.ring_base = None
            st.cpu = st.throttled = None
            st.held, st.good, st.needs = (), 0, []

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
        need = self._need(key, st, stats)
        ev, why, p99, packets = self._classify(st, stats, float(target_us) * 1000.0,
                                               dropped, backlog, held, need, reserved)
        sized = self.sized(st)
        action, why, new = self._next(st, ev, why, reserved, held)
        if action != HOLD:
            st.good, st.needs = 0, []            # a new streak in the new setting
        self._apply_poll(key, name, st)
        st.reserved_us = reserved
        if new != st.quota_us or action == RELEASE:
            self.actuator(key, new)
            st.quota_us = new
        st.state = OPEN if st.quota_us >= reserved else CAPPED
        d = {"vnf": name, "at": time.time(), "action": action, "event": ev, "why": why,
             "state": st.state, "p99_ns": p99, "packets": packets, "host_dropped": dropped,
             "ring_backlog": backlog, "throttled": st.held[-1] if st.held else None,
             "need_cpus": None if need is None else round(need, 4), "sized_us": sized,
             "floor_us": st.floor_us,
             "target_us": target_us, "quota_us": st.quota_us,
             "reserved_us": reserved, "quota_ratio": st.quota_us / reserved,
             "poll_window_us": st.poll_us, "poll_window_applied_us": st.poll_applied}
        st.last = d
        self.decisions.append(d)
        del self.decisions[:-1000]
        if action in (RELEASE, UP, DOWN, CAP):
            LOG.info("controller %s: %s to %d us of %d (%s: %s)", name, action, st.quota_us,
                     reserved, ev, why)
        return d

    def sized(self, st: VnfState) -> int | None:
        """The cap for the median need of the quiet streak (µs per period; at most
        ``max_ratio`` of the flavor's), None unknown."""
        if not st.needs:
            return None
        return min(round(self.need(st) * self.headroom * self.period_us) + self.margin_us,
                   int(self.max_ratio * st.reserved_us))

    @staticmethod
    def need(st: VnfState) -> float:
        """The median need (CPUs) of the quiet streak (on a busy host one interval's reads
        high or low by half)."""
        return sorted(st.needs)[len(st.needs) // 2]

    def _next(self, st: VnfState, ev: str, why: str, reserved: int, held: bool | None):
        """(action, why, the quota) of ``POLICY[ev][state]``; moves the poll window with it and
        keeps the learned floor (module doc)."""
        action = POLICY[ev][st.state]
        if action in (CAP, DOWN) and st.good < self.hold_intervals:
            return HOLD, why, st.quota_us                 # a quiet streak not yet long enough
        if action == RELEASE:
            if st.quota_us < reserved and ev in FLOOR_EVENTS and (ev != BREACH2 or held):
                st.floor_us, st.floor_age = min(reserved, int(st.quota_us * self.up)), 0
            st.poll_us = POLL_DEFAULT_US
            return action, why, reserved
        sized = self.sized(st)
        if action == UP:
            new = max(int(st.quota_us * self.up), sized or 0)
            if new >= self.max_ratio * reserved:
                new = reserved
            st.poll_us = (POLL_DEFAULT_US if new >= reserved else
                          min(POLL_DEFAULT_US, max(self.min_poll_us, int(st.poll_us * self.up))))
            return action, why, min(reserved, new)
        if action == HOLD:
            return action, why, st.quota_us
        return self._lower(st, action, why, sized, held)

    def _lower(self, st: VnfState, action: str, why: str, sized: int | None, held: bool | None):
        """CAP (from the flavor's quota: to the sized cap, a step of ``down`` when the VNF
        reports no need) or DOWN (a step of ``down``, or the sized cap when unthrottled and
        lower), never below ``min_quota_us`` nor the learned floor."""
        step = int(st.quota_us * self.down)
        if action == CAP:
            if sized is None and st.cpu is not None:
                return HOLD, f"{why}; its need not measured yet", st.quota_us
            target = step if sized is None else sized
        else:
            target = sized if sized is not None and not held and sized < step else step
        new = max(self.min_quota_us, st.floor_us, target)
        if new >= st.quota_us:
            st.floor_age += 1
            if st.floor_age >= self.FLOOR_AGE:
                st.floor_us, st.floor_age = int(st.floor_us * self.down), 0
            return HOLD, f"{why}; at the floor {max(st.floor_us, self.min_quota_us)} us", \
                st.quota_us
        st.poll_us = (self.min_poll_us if action == CAP and sized is not None
                      else max(self.min_poll_us, int(st.poll_us * self.down)))
        if target == sized:
            why = f"{why}; need {self.need(st):.3f} CPU -> {target} us"
        return action, why, new

    def _apply_poll(self, key: str, name: str, st: VnfState) -> None:
        """Tell the VNF its busy-poll window when it differs from what it last confirmed; a VNF
        that does not answer is told again next interval, whatever the window then (a stopped
        VNF may still act on the request it did not answer)."""
        if self.poller is None or st.poll_applied == st.poll_us:
            return
        try:
            st.poll_applied = int(self.poller(key, st.poll_us))
        except Exception as e:       # noqa: BLE001 - the control channel may fail any way
            LOG.debug("controller %s: poll window not set: %s", name, e)
            st.poll_applied = None   # not known: a request that timed out may still land

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

    def _need(self, key: str, st: VnfState, stats: dict | None) -> float | None:
        """The CPUs the VNF needed this interval (module doc), None when not known: its busy
        share of the rounds it ran applied to its vCPU threads' host CPU, plus its QEMU's own;
        without those, twice its busy share of the time."""
        cpu = (stats or {}).get("cpu") or {}
        try:
            up, busy, poll = (int(stats["uptime_us"]), int(cpu["busy_us"]),  # type: ignore[index]
                              int(cpu["poll_us"]))
        except (KeyError, TypeError, ValueError):
            st.cpu = None
            return None
        try:
            usage = self.usage(key) if self.usage is not None else None
        except Exception as e:       # noqa: BLE001 - an unreadable process: not known
            LOG.debug("controller %s: CPU usage not read: %s", key, e)
            usage = None
        prev, st.cpu = st.cpu, (up, busy, poll, usage)
        if prev is None or up <= prev[0] or busy < prev[1] or poll < prev[2]:
            return None                          # the first reading, or the VNF restarted
        dt, db, dp = up - prev[0], busy - prev[1], poll - prev[2]
        if usage is None or prev[3] is None:
            return 2.0 * db / dt
        vcpu = (usage["vcpu"] - prev[3]["vcpu"]) * 1e6
        qemu = (usage["total"] - usage["vcpu"] - prev[3]["total"] + prev[3]["vcpu"]) * 1e6
        share = db / (db + dp) if db + dp > 0 else 0.0
        return max(0.0, vcpu * share + qemu) / dt

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

    def _cap_did_it(self, st: VnfState, b1: list, ns: float, n: int, held: bool | None) -> bool:
        """Whether a breach of ``ns`` was the cap's doing (module doc): throttled (or not known)
        and no breach left without ``throttle_hits`` packets per throttled period."""
        if held is None:
            return True
        if not held:
            return False
        hits = self.throttle_hits * sum(d for d in st.held if d)
        return interval_over(st.buckets, b1, ns) - hits <= 0.01 * n

    def _classify(self, st: VnfState, stats: dict | None, target_ns: float,
                  dropped: int | None, backlog: int | None, held: bool | None,
                  need: float | None, reserved: int):
        """(event, why, p99 ns, packets) of one interval (:data:`EVENTS`); keeps the quiet
        streak and its needs (not a capped VNF's when throttled: the cap hid what it wanted)."""
        if stats is None:
            st.good, st.needs = 0, []
            return SILENT, "no stats reply", None, None
        b1 = list((stats.get("latency_ns") or {}).get("buckets_log2") or [])
        first = st.buckets is None
        p99, packets = (None, 0) if first else interval_p99(st.buckets, b1)
        b0, st.buckets = st.buckets, b1
        ev, why = self._event(st, (b0, b1), target_ns, (p99, packets, first),
                              (dropped, backlog, held))
        if ev == QUIET and need is not None and not (held and st.state == CAPPED):
            st.needs = (st.needs + [need])[-max(1, self.hold_intervals):]
            if self.need(st) * self.period_us >= self.max_ratio * reserved:
                ev, why = HIGH_LOAD, f"need {self.need(st):.3f} CPU"
        if ev == QUIET:
            st.good += 1
        elif ev == HIGH_LOAD:
            st.good = 0                          # its needs size the step up
        else:
            st.good, st.needs = 0, []
        return ev, why, p99, packets

    def _event(self, st, hists, target_ns, lat, host):
        """The event and why, before the sizing (:meth:`_classify`): ``hists`` the histograms
        at the interval's start and end, ``lat`` (p99, packets, first observation), ``host``
        (frames dropped, ring backlog, throttled)."""
        (b0, b1), (p99, packets, first), (dropped, backlog, held) = hists, lat, host
        if dropped:
            return DROPPED, f"host dropped {dropped} frames for it (ring full)"
        if backlog is not None and backlog >= self.ring_full:
            return RING_FULL, f"ring backlog {backlog} frames"
        if first:
            return BAND, "first observation"
        shown = p99 is not None and packets >= self.min_packets
        for k, ev in ((2, BREACH2), (1, BREACH)):
            if p99 is not None and (shown or k == 2) and p99 > k * target_ns:
                st.buckets = b0                  # _cap_did_it reads the interval's start
                mine = self._cap_did_it(st, b1, k * target_ns, packets, held)
                st.buckets = b1
                if mine:
                    return ev, f"p99 {p99} ns > {k} x target"
                return NOISE, (f"p99 {p99} ns > {k} x target, not throttled" if held is False
                               else f"p99 {p99} ns > {k} x target, not the cap's")
        if backlog is not None and backlog >= self.ring_high:
            return BACKLOG, f"ring backlog {backlog} frames"
        if not shown or p99 <= target_ns / 2:
            return QUIET, f"p99 {p99} ns <= target / 2" if shown else f"{packets} packets"
        return BAND, f"p99 {p99} ns within (target / 2, target]"
