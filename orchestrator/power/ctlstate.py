# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The latency controller's settings and its state per VNF (:mod:`.controller`, whose
docstring says what each field is for)."""

from __future__ import annotations

import dataclasses

from .highload import nap_limit_us
from .hostside import CAP_PERIOD_US, WAIT_SHARE
from .models import PowerError

POLL_DEFAULT_US = 1000               # the VNF's boot default (contract/PROTOCOL.md §4 poll)
COALESCE_MAX_US = 10_000             # the poll op's largest coalesce_us (PROTOCOL.md §4)


@dataclasses.dataclass
class Sizing:
    """min_poll_us, headroom, margin_us, rate_headroom, rate_margin_us, max_ratio,
    throttle_hits, wait_share, cap_period_us, poll_first, min_saving, coalesce_share,
    wake_nice, moderate_at_limit, release_on_queue (module doc)"""
    min_poll_us: int = 0             # the busy-poll window of a capped or poll-only VNF (0:
                                     # it halts at once, and the host does not poll for it)
    headroom: float = 1.5            # a cap is at least its vCPU's need x headroom + margin_us
                                     # ([metrics] cap_headroom)
    margin_us: int = 2_000
    rate_headroom: float = 1.2       # with one: rate / capacity x quota x this + rate_margin_us
    rate_margin_us: int = 5_000
    max_ratio: float = 0.7           # no cap at this share of the capacity (or of the quota)
    throttle_hits: int = 1           # frames in process one throttled period stalls in the VNF
    wait_share: float | None = WAIT_SHARE   # the part of the target a cap's gap may take
                                     # (None: not bounded, every cap on cap_period_us)
    cap_period_us: int = CAP_PERIOD_US   # the longest CFS period of a cap (CgroupCap's)
    poll_first: bool = True          # a quiet open VNF first narrows its window (poll only),
                                     # and is capped only from there, where a cap saves
    min_saving: float = 0.1          # the share of its poll-only vCPU CPU a cap must save
    coalesce_share: float = 0.0      # the part of the target the VNF's interrupt moderation
                                     # may take where its window is narrowed (0: none;
                                     # [metrics] coalesce_share)
    wake_nice: int | None = None     # the nice of its vCPU threads where the window is
                                     # narrowed below high load (it halts, and waits for the
                                     # host's scheduler at each wake-up); None: not changed
                                     # (the default until a quiet run measures it)
    moderate_at_limit: bool = False  # at high load, moderate also while open is at its limit
                                     # (.highload.saturated; bench/powercap --moderate-at-limit)
    release_on_queue: bool = False   # at high load, release moderation on a full ring and judge
                                     # its cost over hold_intervals (the rule before 11-29
                                     # 09:10; .highload.keeps; bench/powercap controller-queue)

    def __post_init__(self):
        if ((self.wait_share is not None and not 0 < self.wait_share <= 1)
                or not 1000 <= self.cap_period_us <= 1_000_000):
            raise PowerError(f"controller sizing needs 0 < wait_share <= 1 and 1000 <= "
                             f"cap_period_us <= 1000000, got {self}")
        if self.wake_nice is not None and not -20 <= self.wake_nice <= 19:
            raise PowerError(f"controller sizing needs -20 <= wake_nice <= 19, got {self}")
        if not 0 <= self.min_saving < 1 or not 0 <= self.coalesce_share < 1:
            raise PowerError(f"controller sizing needs 0 <= min_saving < 1 and 0 <= "
                             f"coalesce_share < 1, got {self}")
        if (self.headroom < 1 or self.rate_headroom < 1 or not 0 < self.max_ratio <= 1
                or min(self.margin_us, self.rate_margin_us, self.throttle_hits,
                       self.min_poll_us) < 0):
            raise PowerError(f"controller sizing needs headroom and rate_headroom >= 1, "
                             f"0 < max_ratio <= 1, margin_us, rate_margin_us, throttle_hits "
                             f"and min_poll_us >= 0, got {self}")


@dataclasses.dataclass
class VnfState:
    reserved_us: int                 # the flavor's quota: vcpus x period
    quota_us: int                    # what is set now
    state: str = "open"              # controller.OPEN, POLL or CAPPED
    poll_us: int = POLL_DEFAULT_US   # the busy-poll window wanted
    poll_applied: int | None = None  # what the VNF last confirmed (None: not yet)
    coalesce_us: int = 0             # its interrupt moderation wanted (the poll op's coalesce_us)
    coalesce_applied: int | None = None  # what was last set (None: not yet)
    good: int = 0                    # quiet intervals in a row
    buckets: list | None = None
    last: dict | None = None         # the last decision
    tap_dropped: int | None = None   # the taps' tx_dropped at the last interval
    ring_raw: list | None = None     # per NIC: (tap tx_packets, VNF rx), last read
    ring_base: list | None = None    # per NIC: the smallest of those (the offset)
    floor_us: int = 0                # learned: no cap below it (see LatencyController._next)
    floor_age: int = 0               # steps down it blocked since it was set or last sank
    throttled: int | None = None     # the group's nr_throttled at the last interval
    throttled_us: float | None = None    # and its throttled time (µs)
    period_us: int | None = None     # the CFS period of the cap in force (None: open)
    least_us: int = 0                # no cap below it: its gap would not fit the target
    waited: float = 0.0              # frames that waited in its ring for the cap (interval)
    held: tuple = ()                 # throttled periods in the last two intervals (None: unknown)
    cpu: tuple | None = None         # (uptime, busy, poll µs; its QEMU's usage) last read
    needs: list = dataclasses.field(default_factory=list)   # need (CPUs) of the quiet streak
    uses: list = dataclasses.field(default_factory=list)    # its vCPU's host CPU (CPUs), too
    vcpu_now: float | None = None    # the vCPU's host CPU (CPUs) this interval
    uncapped: tuple | None = None    # (need, vCPU CPUs) of the last poll-only streak, medians
    rx: tuple | None = None          # (uptime µs, frames its NICs took, dropped) last read
    open_drops: list = dataclasses.field(default_factory=list)    # their drop shares
    rate: float | None = None        # offered packets/s this interval (None: not known)
    taken: float | None = None       # the packets/s its NICs took of them (None: not known)
    rates: list = dataclasses.field(default_factory=list)   # of the quiet streak
    capacity: float | None = None    # packets/s at the flavor's quota (None: not known)
    open_backlogs: list = dataclasses.field(default_factory=list)  # the last open intervals'
    open_over: list = dataclasses.field(default_factory=list)    # p99 > target: open intervals
    capped_over: list = dataclasses.field(default_factory=list)  # and capped, at this quota
    noisy: bool = False              # this interval's breach is the cap's by that comparison
    qemu_now: float | None = None    # its whole QEMU's host CPU (CPUs) this interval
    open_costs: list = dataclasses.field(default_factory=list)   # host CPU µs per frame at high
    mod_costs: list = dataclasses.field(default_factory=list)    # load: open, moderated (.highload)
    open_host_drops: list = dataclasses.field(default_factory=list)  # the host's, open: shares
    mod_block: int = 0               # high-load intervals moderation stays off (the back-off)
    mod_loss_now: float = 0.0        # the host's drop share this interval, moderated, if it counts
    loss_share: float | None = None  # that share at the last release on it (.highload.back_off)
    after_loss: list = dataclasses.field(default_factory=list)   # open drop shares since
    nice: int | None = None          # the nice its vCPU threads were given (None: the launch's)


def judged_ns(st: VnfState, target_us: float) -> float:
    """The target (ns) the VNF's own p99 is judged against: less the nap of its interrupt
    moderation (its histogram starts at its engine's RX: a frame's wait in the ring is not in
    it)."""
    return 1000.0 * (float(target_us) - (st.coalesce_applied or 0))


def coalesce_for(st: VnfState, share: float, target_us: float, quota_us: int,
                 reserved_us: int, ring_frames: int | None = None) -> int:
    """Its interrupt moderation (µs): ``share`` × the target (at most the poll op's 10,000 and,
    with ``ring_frames``, a nap its RX ring holds at its rate: :func:`.highload.nap_limit_us`)
    where its window is narrowed or it is capped (POLL, CAPPED), 0 open."""
    on = quota_us < reserved_us or st.poll_us < POLL_DEFAULT_US
    limit = nap_limit_us(st, ring_frames) if ring_frames else None
    most = COALESCE_MAX_US if limit is None else min(COALESCE_MAX_US, limit)
    return int(min(most, share * float(target_us))) if on else 0
