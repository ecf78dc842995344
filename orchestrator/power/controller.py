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
* **observes what it needs** (:func:`vcpu_need`): its steal-free busy share (``stats`` →
  ``cpu``: ``busy_us`` over ``busy_us + poll_us``; the host's throttled or preempted time is
  ``stolen_us``) of its vCPU threads' host CPU (``vcpu_cpus``): ``need`` in CPUs, what a cap
  on those threads holds. Polling is what it does not need;
* **observes its offered rate**: the frames it took (``stats`` → ``nics``: ``rx``) and those the
  host dropped for it (below) per second of its uptime, against its **capacity** (``capacity_pps``
  of :meth:`LatencyController.step`: the packets/s it forwards at the flavor's quota without
  loss; in production ``[metrics] vnf_capacity_pps``, VNF name or service → pps, else the
  VNF's QoE sessions × its service's ``session_pps`` or the stage-1 load probe's, where the
  orchestrator's database is reachable (:mod:`.capacity`); in bench/powercap the one
  it measured; without one the rate is only reported and the need decides); and the frames it
  dropped itself (its NICs' ``drop``: a TX ring its throttled QEMU did not drain) beyond the
  largest share it dropped open (a firewall's policy drops are no loss);
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
  state, :data:`OPEN` (at the flavor's quota), :data:`POLL` (at it, the poll window narrowed: no
  cap fits the target, below) or :data:`CAPPED` (below it):

  ============  =================================================  =======  =========  ========
  event         when                                               OPEN     POLL ONLY  CAPPED
  ============  =================================================  =======  =========  ========
  silent        no stats reply (the VNF stopped answering)         release  release    release
  dropped       frames lost: the host's for it, its own over open  release  release    release
  ring full     ``full`` of the ring more than it carried open     release  release    release
  breach x2     p99 > 2 × target, and the cap's doing (below)      hold     release    release
  breach        p99 > target, and the cap's doing                  hold     release    up
  noise         p99 > target, not the cap's doing                  hold     hold       hold
  backlog       ``high`` of the ring more than it carried open     hold     hold       hold
  high load     rate ≥ ``max_ratio`` × capacity (or need × quota)  narrow   hold       up
  quiet         p99 ≤ target / 2, or too few packets to show one   cap      cap        down
  band          otherwise (p99 within (target / 2, target])        hold     hold       hold
  ============  =================================================  =======  =========  ========

  **The p99 it judges includes its cap's wait**: frames that arrived while throttled wait in
  the ring, unseen by its histogram (:func:`ring_wait`), counted as waiting evenly up to the
  gap ``period × (1 − share)`` (:func:`interval_with_wait`). **The gap is bounded**: a cap goes
  on the longest CFS period (≤ ``cap_period_us``) whose gap is within ``wait_share`` of the
  target (:func:`cap_period`), never below the least share such a period allows
  (:func:`least_share`; a quota is ≥ 1000 µs). Where that is ``max_ratio`` or more the VNF is
  **poll only** (the flavor's quota, the narrow window; docs/power.md).

  The cap's doing: the ring's wait (above), and a throttled period stalls the frame in process
  (``throttle_hits`` frames, in its histogram; more for a chain with Queues), so a breach is the
  cap's when the group was throttled (or that is not known; poll only: always the window's) and
  the VNF's own histogram, less ``throttle_hits`` packets per throttled period, would not
  breach. Otherwise the host did it (the vCPU preempted): a release would not
  help (on a busy host such noise released every cap, bench/powercap), unless the capped VNF
  shows it far more often than open (:meth:`LatencyController._noisier`): a breach after all.

  **High load comes from the offered rate when the capacity is known**, and the cap is then at
  least ``rate / capacity × quota × rate_headroom + rate_margin_us`` (the quiet streak's median
  rate). Without a capacity, high load is a need of ``max_ratio`` of the flavor's quota or more.
  A cap is at most ``max_ratio`` of the flavor's. **At high load: moderation, never a cap**
  (:mod:`.highload`: when it narrows, holds and leaves, on loss only).

  The ring backlog is judged against what it carried **open**: the largest backlog of its last
  ``OPEN_SPAN`` open intervals (the uncapped VNF carries 127-318 frames on a quiet host).

  ``cap`` and ``down`` wait for ``hold_intervals`` quiet intervals in a row; what each action
  sets (``narrow`` with ``poll_first``, the sized cap, ``down``'s search for the least CPU,
  ``up``, ``release``, the back-off's floor): docs/power.md, "The controller's actions";

* **acts** through ``actuator(vnf key, quota µs per 100 ms, CFS period µs or None)``: in
  production :class:`CgroupCap` on the VNF's own group (v2 ``cpu.max``, v1 ``cpu.cfs_*``: a
  cap on the period :func:`cap_period` chose, whole CPUs on the flavor's); and through
  ``poller(vnf key, µs)`` (returning the window the VNF confirms), the VNF's busy-poll window
  (the ``poll`` op, PROTOCOL.md §4): the boot default of 1000 µs when open, ``min_poll_us`` when
  capped (polling spends the quota the frames need), moved by the step factors with the
  quota's steps, restored with a release; with ``coalesce_share`` its **interrupt moderation**
  too (``poller(key, µs, coalesce µs)``, :func:`.ctlstate.coalesce_for`, :func:`.ctlstate.judged_ns`);
  and through ``renice(vnf key, nice or None)`` (:class:`.hostside.ThreadNice`) its **vCPU
  threads' nice**: ``wake_nice`` where it naps below high load (None by default: no benefit
  measured, bench/results/powercap.md), the launch's (``[vnf] vcpu_nice``) open and at high
  load (:meth:`_nice`; why: docs/power.md, the 10 % load analysis).

Its decisions (event, state, ``need``) are logged, kept (``decisions``) and shown in the run
dir's power.json (``fluidvim vnf stats``) and ``fluidvim_vnf_cpu_quota_ratio``. No powercap yet.
"""

from __future__ import annotations

import math
import time

from oslo_log import log as logging

from . import highload
from .backend import Backend
from .ctlstate import POLL_DEFAULT_US, Sizing, VnfState, coalesce_for, judged_ns  # noqa: F401
from .hostside import (  # noqa: F401 - its readers and actuator, exported here too
    CAP_PERIOD_US,
    WAIT_SHARE,
    CgroupCap,
    ThreadNice,
    backlog_over_open,
    cap_period,
    cpu_throttled,
    cpu_throttled_us,
    gap_us,
    group_cpu_stat,
    group_usage,
    interval_over,
    interval_p99,
    interval_with_wait,
    least_share,
    offered_rate,
    ring_reading,
    ring_wait,
    tap_counters,
    throttled_periods,
    throttled_time_us,
    vcpu_need,
)
from .models import PowerError

LOG = logging.getLogger(__name__)


def _capacity(name: str, capacity_pps) -> float | None:
    if capacity_pps is not None and not capacity_pps > 0:
        raise PowerError(f"controller {name}: capacity_pps {capacity_pps} must be > 0 "
                         f"(packets/s at the flavor's quota), or None when not known")
    return None if capacity_pps is None else float(capacity_pps)

# the VNF's states: at its flavor's quota (and the boot's poll window), at it with a narrow
# poll window (its target too tight for any cap), or below it
OPEN, POLL, CAPPED = "open", "poll only", "capped"
# the actions
RELEASE, UP, DOWN, HOLD, CAP, NARROW = "release", "up", "down", "hold", "cap", "narrow"
# the events an interval is classified into, the first that applies (module doc)
SILENT, DROPPED, RING_FULL = "silent", "dropped", "ring full"
BREACH2, BREACH, NOISE = "breach x2", "breach", "noise"
BACKLOG, HIGH_LOAD, QUIET, BAND = "backlog", "high load", "quiet", "band"
EVENTS = (SILENT, DROPPED, RING_FULL, BREACH2, BREACH, NOISE, BACKLOG, HIGH_LOAD, QUIET, BAND)
# the state machine: POLICY[event][state] is the action; the state after it is OPEN when the
# quota is the flavor's, else CAPPED (CAP, DOWN: CAPPED; RELEASE: OPEN; UP: either)
POLICY = {
    SILENT:    {OPEN: RELEASE, POLL: RELEASE, CAPPED: RELEASE},
    DROPPED:   {OPEN: RELEASE, POLL: RELEASE, CAPPED: RELEASE},
    RING_FULL: {OPEN: RELEASE, POLL: RELEASE, CAPPED: RELEASE},
    BREACH2:   {OPEN: HOLD,    POLL: RELEASE, CAPPED: RELEASE},
    BREACH:    {OPEN: HOLD,    POLL: RELEASE, CAPPED: UP},
    NOISE:     {OPEN: HOLD,    POLL: HOLD,    CAPPED: HOLD},
    BACKLOG:   {OPEN: HOLD,    POLL: HOLD,    CAPPED: HOLD},
    HIGH_LOAD: {OPEN: NARROW,  POLL: HOLD,    CAPPED: UP},
    QUIET:     {OPEN: CAP,     POLL: CAP,     CAPPED: DOWN},
    BAND:      {OPEN: HOLD,    POLL: HOLD,    CAPPED: HOLD},
}
# releases that leave a floor: the cap's evidence (a breach only when it was seen throttled)
FLOOR_EVENTS = (DROPPED, RING_FULL, BREACH2)
RING_FRAMES = 256                    # QEMU's virtio-net RX queue size (rx_queue_size default)


class LatencyController:
    FLOOR_AGE = 10                   # steps down a learned floor blocks before it sinks a step
    OPEN_SPAN = 20                   # open intervals whose largest backlog is the open one
    NOISY_SPAN = 4                   # capped intervals whose breaches are compared with open's

    def __init__(self, actuator, min_quota_us: int = 5_000, down: float = 0.8, up: float = 1.5,
                 hold_intervals=3, min_packets=100, poller=None, renice=None, **sizing):
        """``sizing``: the fields of :class:`Sizing`; ``poller``: the VNF's busy-poll window
        (module doc; None: not set); ``renice``: ``(vnf key, nice or None) -> bool``, its vCPU
        threads' nice (None: :class:`.hostside.ThreadNice`); QEMU's main thread's: :class:`Backend`."""
        from fluidvim.vnf import limits  # the launch core's; imported lazily (import contracts)

        self.period_us = limits.CPU_PERIOD_US      # the flavor's quota period (reserved_us)
        if not 0 < down < 1 < up:
            raise PowerError(f"controller steps need 0 < down < 1 < up, got down={down} up={up}")
        if min_quota_us < 1000:
            raise PowerError(f"min_quota_us {min_quota_us} is below the kernel's 1000 us")
        self.backend = Backend.from_sizing(sizing)
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
        self.rate_headroom, self.rate_margin_us = sz.rate_headroom, sz.rate_margin_us
        self.throttle_hits = sz.throttle_hits
        self.wait_share, self.cap_period_us = sz.wait_share, int(sz.cap_period_us)
        self.poll_first = bool(sz.poll_first) and self.min_poll_us < POLL_DEFAULT_US
        self.min_saving = sz.min_saving
        self.coalesce_share, self.moderate_at_limit, self.release_on_queue = (
            sz.coalesce_share, sz.moderate_at_limit, sz.release_on_queue)
        self.wake_nice = sz.wake_nice
        self.renice = ThreadNice() if renice is None else renice
        # (vnf key) -> its cpu.stat (group_cpu_stat: all keys, the vCPU sub-group's throttling
        # summed in), read once per VNF per interval; None when not known
        self.cpu_stat = group_cpu_stat
        # (vnf key) -> its cumulative throttled periods / time (µs), None when not known: when
        # set (tests), read instead of cpu_stat's nr_throttled / throttled time
        self.throttled = self.throttled_time = None
        # (vnf key) -> {"total", "vcpu"} CPU-s of its QEMU, None when not known; likewise
        self.usage = group_usage
        self.set_ring()

    def set_ring(self, frames: int = RING_FRAMES, high: float = 0.25, full: float = 0.75) -> None:
        """The RX ring's size (frames); the backlog shares that hold (``high``), release (``full``)."""
        if not 0 < high <= full <= 1 or frames < 1:
            raise PowerError(f"controller ring thresholds need 0 < high <= full <= 1 and frames "
                             f">= 1, got high={high} full={full} frames={frames}")
        self.ring_high, self.ring_full, self.ring_frames = high * frames, full * frames, frames
        self.state: dict = {}
        self.decisions: list = []

    def forget(self, key: str) -> None:
        self.state.pop(key, None)
        self.backend.forget(key)

    def rebase(self, key: str) -> None:
        """Forget what VNF ``key``'s counters read last but keep what was decided (quota,
        window, state, floor): the next interval must not span a pause (bench/powercap)."""
        st = self.state.get(key)
        if st is not None:
            st.buckets = st.tap_dropped = st.ring_raw = st.ring_base = None
            st.cpu = st.throttled = st.throttled_us = st.rx = st.rate = st.taken = None
            st.held, st.good, st.needs, st.rates, st.uses, st.mod_costs = (), 0, [], [], [], []

    def step(self, key: str, name: str, target_us: float, vcpus: int, stats: dict | None,
             taps: list | None = None, capacity_pps: float | None = None) -> dict:
        """One interval of one VNF: observe ``stats`` (None: it did not answer) and ``taps``
        (:func:`tap_counters` of its NICs' host taps, read just before; None: not known),
        decide, act. ``capacity_pps``: the packets/s it forwards at the flavor's quota (module
        doc; None: not known, its need decides)."""
        reserved = max(1, int(vcpus)) * self.period_us
        st = self.state.get(key)
        if st is None:
            st = self.state[key] = VnfState(reserved_us=reserved, quota_us=reserved)
        st.capacity = _capacity(name, capacity_pps)
        dropped, backlog = ring_reading(st, stats, taps)
        st.rate, own, dropped = offered_rate(st, stats, dropped, self.OPEN_SPAN)
        ring = (backlog, backlog_over_open(st, backlog, self.OPEN_SPAN), own)
        stat = self._read(self.cpu_stat, key, "cpu.stat")     # once per VNF per interval
        held, st.waited = self._held(key, st, stat), self._waited(key, st, stat)
        st.least_us = self.least_quota(target_us, reserved)
        need = self._need(key, st, stats)
        ev, why, p99, packets = self._classify(st, stats, judged_ns(st, target_us), dropped,
                                               ring, held, need, reserved)
        sized = self.sized(st)
        action, why, new = self._next(st, ev, why, reserved, held)
        st.coalesce_us = coalesce_for(st, self.coalesce_share, target_us, new, reserved, self.ring_frames)
        if action != HOLD:          # a new streak in the new setting
            st.good, st.needs, st.uses, st.capped_over, st.mod_costs = 0, [], [], [], []
        if stats is not None:
            self._tell(key, name, st)
        else:   # silent: told when it answers (a stopped VNF's socket blocks a connect)
            st.poll_applied = st.coalesce_applied = None
        st.reserved_us = reserved
        period = None if new >= reserved else cap_period(new / reserved, self.gap_budget(
            target_us), self.cap_period_us)
        if new != st.quota_us or action == RELEASE or period != st.period_us:
            self.actuator(key, new, period)
            st.quota_us, st.period_us = new, period
        st.state = (CAPPED if st.quota_us < reserved else
                    POLL if st.poll_us < POLL_DEFAULT_US else OPEN)
        self._nice(key, name, st, ev, p99)
        d = {"vnf": name, "at": time.time(), "action": action, "event": ev, "why": why,
             "state": st.state, "p99_ns": p99, "packets": packets, "host_dropped": dropped,
             "ring_backlog": backlog, "backlog_over_open": ring[1], "vnf_dropped": own,
             "throttled": st.held[-1] if st.held else None,
             "need_cpus": None if need is None else round(need, 4), "sized_us": sized,
             "vcpu_cpus": None if st.vcpu_now is None else round(st.vcpu_now, 4),
             "rate_pps": None if st.rate is None else round(st.rate),
             "capacity_pps": st.capacity, "floor_us": st.floor_us, "least_us": st.least_us,
             "ring_wait_frames": round(st.waited), "period_us": st.period_us,
             "target_us": target_us, "quota_us": st.quota_us,
             "reserved_us": reserved, "quota_ratio": st.quota_us / reserved,
             "poll_window_us": st.poll_us, "poll_window_applied_us": st.poll_applied,
             "coalesce_us": st.coalesce_us, "coalesce_applied_us": st.coalesce_applied,
             "vcpu_nice": st.nice, "backend_nice": self.backend.step(key, st.state)}
        st.last = d
        self.decisions.append(d)
        del self.decisions[:-1000]
        if action in (RELEASE, UP, DOWN, CAP, NARROW):
            LOG.info("controller %s: %s to %d us of %d (%s: %s)", name, action, st.quota_us,
                     reserved, ev, why)
        return d

    def sized(self, st: VnfState, rate: float | None = None) -> int | None:
        """The cap (µs per period; at most ``max_ratio`` of the flavor's) for ``rate`` or the
        median rate of the quiet streak when the capacity is known, else for the median need of
        the streak; None when not known."""
        lim = int(self.max_ratio * st.reserved_us)
        sizes = []
        if st.capacity is not None and (rate is not None or st.rates):
            r = rate if rate is not None else sorted(st.rates)[len(st.rates) // 2]
            sizes.append(round(r / st.capacity * st.reserved_us * self.rate_headroom)
                         + self.rate_margin_us)
        need = self.need(st) if st.needs else st.uncapped[0] if st.uncapped else None
        if need is not None:     # never below what its vCPU was measured to need
            sizes.append(round(need * self.headroom * self.period_us) + self.margin_us)
        return min(max(sizes), lim) if sizes else None

    def gap_budget(self, target_us: float) -> float:
        """The longest gap (µs) a cap may leave: ``wait_share`` of the target (or none)."""
        return math.inf if self.wait_share is None else self.wait_share * float(target_us)

    def least_quota(self, target_us: float, reserved: int) -> int:
        """The least cap (µs per 100 ms) whose gap fits the target (:func:`least_share`; 0
        without ``wait_share``): at ``max_ratio`` of ``reserved`` or more, POLL."""
        if self.wait_share is None:
            return 0
        return math.ceil(least_share(self.gap_budget(target_us), self.cap_period_us) * reserved)

    @staticmethod
    def rate(st: VnfState) -> float:    # the quiet streak's median offered rate (packets/s)
        return sorted(st.rates)[len(st.rates) // 2]

    @staticmethod
    def need(st: VnfState) -> float:
        """The median need (CPUs) of the quiet streak (one interval's reads high or low)."""
        return sorted(st.needs)[len(st.needs) // 2]

    @staticmethod
    def use(st: VnfState) -> float | None:
        """The median host CPU (CPUs) of its vCPU threads over the quiet streak, None when not
        known."""
        return sorted(st.uses)[len(st.uses) // 2] if st.uses else None

    def _next(self, st: VnfState, ev: str, why: str, reserved: int, held: bool | None):
        """(action, why, quota) of ``POLICY[ev][state]``, the poll window and floor with it."""
        action = POLICY[ev][st.state]
        if ev == HIGH_LOAD:          # moderation, never a cap (.highload)
            action, why = highload.decide(self, st, action, why)
        elif ev == RING_FULL and st.state == POLL:    # moderated at high load: loss releases it
            action, why = highload.keeps(self, st, action, why)
        if action in (CAP, DOWN) and st.good < self.hold_intervals:
            return HOLD, why, st.quota_us                 # a quiet streak not yet long enough
        if action == RELEASE:
            if st.state == POLL and ev != HIGH_LOAD:      # its loss: no moderation for a while
                highload.back_off(st, self.FLOOR_AGE, loss=ev == DROPPED)
            if st.quota_us < reserved and ev in FLOOR_EVENTS and (ev != BREACH2 or held):
                st.floor_us, st.floor_age = min(reserved, int(st.quota_us * self.up)), 0
            st.poll_us = POLL_DEFAULT_US
            return action, why, reserved
        sized = self.sized(st)
        if action == UP:
            now = self.sized(st, st.rate) if st.rate is not None else sized
            new = max(int(st.quota_us * self.up), now or 0)
            if ev == BREACH and (held or st.noisy):       # the cap's: no step down into it
                st.floor_us, st.floor_age = min(reserved, int(st.quota_us * self.up)), 0
            if new >= self.max_ratio * reserved:
                new = reserved
            st.poll_us = (POLL_DEFAULT_US if new >= reserved else
                          min(POLL_DEFAULT_US, max(self.min_poll_us, int(st.poll_us * self.up))))
            return action, why, min(reserved, new)
        if action in (HOLD, NARROW):
            return action, why, st.quota_us
        return self._lower(st, action, why, sized, held)

    def _lower(self, st: VnfState, action: str, why: str, sized: int | None, held: bool | None):
        """CAP (from the flavor's quota: to the sized cap, a step of ``down`` when the VNF
        reports no need) or DOWN (a step of ``down``, or the sized cap when unthrottled and
        lower), never below ``min_quota_us`` nor the learned floor."""
        step = int(st.quota_us * self.down)
        if st.needs:                 # its vCPU's need measured where no cap held it back
            st.uncapped = (self.need(st), self.use(st) if st.state != CAPPED else
                           (st.uncapped or (None, None))[1])
        if action == CAP:
            if st.least_us >= self.max_ratio * st.reserved_us:
                was, st.poll_us = st.poll_us, self.min_poll_us   # POLL: no cap fits the target
                return (action if was != st.poll_us else HOLD), (
                    f"{why}; poll only: a cap's gap within {self.wait_share:g} x "
                    f"the target needs {st.least_us} us or more"), st.quota_us
            if self.poll_first and st.state == OPEN:
                st.poll_us = self.min_poll_us        # the window alone first (POLL)
                return NARROW, (f"{why}; poll window {self.min_poll_us} us first, a cap "
                                f"only where it saves"), st.quota_us
            if sized is None and st.cpu is not None:
                return HOLD, f"{why}; its need not measured yet", st.quota_us
            target = step if sized is None else sized
        else:
            target = sized if sized is not None and not held and sized < step else step
        # never below the cap its offered rate needs (with a capacity: there frames queue in
        # its tap longer than any gap; bench/powercap, 50 % load: 49,839 us, drops, release),
        # nor below its vCPU's measured need with headroom (a cap at the need queues them:
        # bench/powercap, 10 % load: the vCPU used all of a 28.6 % cap, p99 9.8 ms)
        by_size = sized if sized is not None and (st.rates and st.capacity is not None
                                                   or st.needs or st.uncapped) else 0
        new = max(self.min_quota_us, st.floor_us, st.least_us, by_size, target)
        if action == CAP and st.state == POLL and st.uncapped and st.uncapped[1] is not None:
            use_us = st.uncapped[1] * self.period_us
            if new >= (1 - self.min_saving) * use_us:
                return HOLD, (f"{why}; poll only: a cap of {new} us would not save "
                              f"{100 * self.min_saving:g} % of the {use_us:.0f} us its vCPU "
                              f"uses at window {st.poll_us} us"), st.quota_us
        if new >= st.quota_us:
            st.floor_age += 1
            if st.floor_age >= self.FLOOR_AGE:
                st.floor_us, st.floor_age = int(st.floor_us * self.down), 0
            return HOLD, (f"{why}; at the floor "
                          f"{max(st.floor_us, self.min_quota_us, st.least_us, by_size)} us"), \
                st.quota_us
        st.poll_us = (self.min_poll_us if action == CAP and sized is not None
                      else max(self.min_poll_us, int(st.poll_us * self.down)))
        if target == sized and st.capacity is not None and st.rates:
            why = f"{why}; rate {self.rate(st):.0f} of {st.capacity:.0f} pps -> {target} us"
        elif target == sized:
            why = f"{why}; need {self.need(st):.3f} CPU -> {target} us"
        return action, why, new

    def _nice(self, key: str, name: str, st: VnfState, ev: str, p99) -> None:
        """Its vCPU threads' nice: ``wake_nice`` in an interval below high load (``quiet`` or
        ``band``) where its window is narrowed (POLL, CAPPED: it halts at once and wakes on
        its nap's timer or a frame), the launch's back open or at high load (there, as a
        busy-polling vCPU, it yields to QEMU's main thread, which moves the frames: ``[vnf]
        vcpu_nice``); other events keep it. At the launch's nice 10 its group's share of the
        CPU it wakes on is a tenth of a nice-0 thread's, so each wake-up waited behind the
        host's other threads (bench/powercap, module doc of :mod:`.hostside`)."""
        if self.wake_nice is None:
            return
        if st.state == OPEN or ev == HIGH_LOAD:
            want = None
        elif ev in (QUIET, BAND) and p99 is not None and st.poll_us < POLL_DEFAULT_US:
            want = self.wake_nice
        else:
            return
        if want == st.nice:
            return
        if self._read(lambda k: self.renice(k, want), key, "vCPU nice"):
            st.nice = want
            LOG.info("controller %s: vCPU nice %s", name, "the launch's" if want is None else want)

    def _tell(self, key: str, name: str, st: VnfState) -> None:
        """Tell the VNF its busy-poll window (and, with a ``coalesce_share``, its interrupt
        moderation: ``poller(key, window, coalesce_us)``) unless it confirmed them."""
        co = st.coalesce_us if self.coalesce_share else None
        if self.poller is None or (st.poll_applied, st.coalesce_applied) == (st.poll_us, co):
            return
        try:
            got = int(self.poller(key, st.poll_us, *([] if co is None else [co])))
        except Exception as e:       # noqa: BLE001 - the control channel may fail any way
            LOG.debug("controller %s: poll window not set: %s", name, e)
            got = co = None          # not known: a request that timed out may still land
        st.poll_applied, st.coalesce_applied = got, co

    def _held(self, key: str, st: VnfState, stat: dict | None) -> bool | None:
        """Whether the quota held the VNF back (throttled) this interval or the one before;
        None when not known (no group, no reader, the first reading)."""
        cur = (throttled_periods(stat) if self.throttled is None
               else self._read(self.throttled, key, "throttling"))
        prev, st.throttled = st.throttled, cur
        delta = None if cur is None or prev is None or cur < prev else cur - prev
        st.held = (st.held + (delta,))[-2:]
        return None if delta is None else any(d for d in st.held if d)

    @staticmethod
    def _read(fn, key: str, what: str):
        """``fn(key)``, None without ``fn`` or when it fails (an unreadable group: not known)."""
        try:
            return fn(key) if fn is not None else None
        except Exception as e:       # noqa: BLE001 - a group or process gone: not known
            LOG.debug("controller %s: %s not read: %s", key, what, e)
            return None

    def _waited(self, key: str, st: VnfState, stat: dict | None) -> float:
        """Frames that waited in the VNF's RX ring for its cap this interval (:func:`ring_wait`
        of its offered rate, throttled periods and time, and the cap's gap)."""
        cur = (throttled_time_us(stat) if self.throttled_time is None
               else self._read(self.throttled_time, key, "throttled time"))
        prev, st.throttled_us = st.throttled_us, cur
        spent = None if cur is None or prev is None or cur < prev else cur - prev
        return ring_wait(st.rate, st.held[-1] if st.held else None, spent,
                         gap_us(st.period_us, st.quota_us, st.reserved_us))

    def _need(self, key: str, st: VnfState, stats: dict | None) -> float | None:
        """:func:`vcpu_need` (NARROW: CAP from OPEN with poll_first) with its vCPU's CPU now,
        and its whole QEMU's (``st.qemu_now``)."""
        prev, need = st.cpu, vcpu_need(st, stats, self._read(self.usage, key, "CPU usage")
                                       if stats else None)
        st.qemu_now = highload.qemu_cpus(prev, st.cpu)
        return need

    def _cap_did_it(self, st: VnfState, b1: list, ns: float, n: int, held: bool | None) -> bool:
        """Whether a breach of ``ns`` was the cap's doing (module doc): throttled (or not known)
        and no breach left without ``throttle_hits`` packets per throttled period."""
        if held is None or st.state == POLL:     # POLL: the narrow window's (nothing throttles)
            return True
        if not held:
            return False
        hits = self.throttle_hits * sum(d for d in st.held if d)
        return interval_over(st.buckets, b1, ns) - hits <= 0.01 * n

    def _classify(self, st: VnfState, stats: dict | None, target_ns: float,
                  dropped: int | None, ring: tuple, held: bool | None,
                  need: float | None, reserved: int):
        """(event, why, p99 ns, packets) of one interval (:data:`EVENTS`); ``ring``: (its
        backlog, the part over what it carried open, frames it dropped over its open share);
        keeps the quiet streak, its rates and needs (not a capped VNF's need when throttled: the
        cap hid what it wanted)."""
        if stats is None:
            st.good, st.needs, st.uses = 0, [], []
            return SILENT, "no stats reply", None, None
        b1 = list((stats.get("latency_ns") or {}).get("buckets_log2") or [])
        first = st.buckets is None
        p99, packets = (None, 0) if first else interval_p99(None, interval_with_wait(
            st.buckets, b1, st.waited, 1000 * gap_us(st.period_us, st.quota_us, st.reserved_us)))
        b0, st.buckets = st.buckets, b1
        ev, why = self._event(st, (b0, b1), target_ns, (p99, packets, first),
                              (dropped, *ring, held))
        if p99 is not None and packets >= self.min_packets:
            ev, why = self._noisier(st, ev, why, p99 > target_ns)
        # the host's drops open at high load are the default's own (.highload): high load
        if st.capacity is not None and st.rate is not None and (
                ev in (QUIET, BAND) or ev == DROPPED and st.state == OPEN):
            if ev == QUIET:
                st.rates = (st.rates + [st.rate])[-max(1, self.hold_intervals):]
            if st.rate >= self.max_ratio * st.capacity:
                ev, why = HIGH_LOAD, f"offered {st.rate:.0f} of {st.capacity:.0f} pps" + (
                    f", {dropped} dropped open" if ev == DROPPED else "")
        if ev == QUIET and need is not None and not (held and st.state == CAPPED):
            st.needs = (st.needs + [need])[-max(1, self.hold_intervals):]
            if st.vcpu_now is not None:
                st.uses = (st.uses + [st.vcpu_now])[-max(1, self.hold_intervals):]
            if (st.capacity is None or st.rate is None) and \
                    self.need(st) * self.period_us >= self.max_ratio * reserved:
                ev, why = HIGH_LOAD, f"need {self.need(st):.3f} CPU"
        if ev == QUIET:
            st.good += 1
        elif ev == HIGH_LOAD:
            st.good = 0                          # its needs size the step up
            highload.record_cost(st, self.hold_intervals, highload.cost_span(self))
        else:
            st.good, st.needs, st.rates, st.uses = 0, [], [], []
        return ev, why, p99, packets

    def _noisier(self, st: VnfState, ev: str, why: str, over: bool):
        """NOISE (a breach not throttled) that a capped VNF shows far more often than it did
        open is the cap's after all (its frames batched, its halted vCPU waiting for the host's
        scheduler: bench/powercap at 50 % load on a busy host): a BREACH when it was over the
        target in more than a quarter and twice the share of its last open intervals of its
        last ``NOISY_SPAN`` capped intervals at this quota."""
        mine = st.open_over if st.state == OPEN else st.capped_over
        mine[:] = (mine + [over])[-(self.OPEN_SPAN if st.state == OPEN else self.NOISY_SPAN):]
        share = sum(st.open_over) / len(st.open_over) if st.open_over else 0.0
        st.noisy = (ev == NOISE and len(st.capped_over) >= self.NOISY_SPAN and st.state == CAPPED
                    and sum(st.capped_over) / self.NOISY_SPAN > max(0.25, 2 * share))
        if st.noisy:
            return BREACH, (f"{why}, but over target in {sum(st.capped_over)} of the last "
                            f"{self.NOISY_SPAN} capped intervals, {100 * share:.0f} % open")
        return ev, why

    def _event(self, st, hists, target_ns, lat, host):
        """The event and why, before the sizing (:meth:`_classify`): ``hists`` the histograms
        at the interval's start and end, ``lat`` (p99, packets, first observation), ``host``
        (frames dropped, ring backlog, its part over the open one, its own drops over
        the open share, throttled)."""
        (b0, b1), (p99, packets, first), (dropped, backlog, excess, own, held) = hists, lat, host
        if dropped:
            return DROPPED, f"host dropped {dropped} frames for it (ring full)"
        if own:
            return DROPPED, f"it dropped {own} frames more than open"
        if excess is not None and excess >= self.ring_full:
            return RING_FULL, f"ring backlog {backlog} frames, {excess} over its open one"
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
        if excess is not None and excess >= self.ring_high:
            return BACKLOG, f"ring backlog {backlog} frames, {excess} over its open one"
        if not shown or p99 <= target_ns / 2:
            return QUIET, f"p99 {p99} ns <= target / 2" if shown else f"{packets} packets"
        return BAND, f"p99 {p99} ns within (target / 2, target]"
