# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Session slots at the service's QoE: what a VNF is told to announce (issue 23).

A slot is one more session a VNF can serve with the service's deadline met at its quantile. The
VNF announces ``free = min(flow-table free, capacity - used)`` in its ``stats`` (the one number the
launch core, the Nova driver, the Nomad fingerprint and the slot updates read) once a launcher
sent it ``qoe`` (contract/PROTOCOL.md §4) with:

* ``capacity``: the sessions the stage-1 load probe of the VNF's environment type measured at the
  service's deadline and quantile (:func:`fluidvim.evaluator.slots.estimate_capacity`);
* ``budget_ns``: the VNF's *own* processing-time tail at that quantile that goes with meeting the
  deadline. The VNF only sees its own latency histogram (receive to transmit, nanoseconds), not
  the service's end-to-end latency (milliseconds), so the budget comes from the same probe: the
  highest in-VNF tail (log2 bucket holding the quantile) over the load steps at or below the
  capacity, times 2 (the bucket's upper bound). A tail past it means the VNF itself slows down
  beyond anything seen while the deadline was met;
* ``quantile_ppm``: the quantile in parts per million.

A session meets its QoE when *its own* packets meet the deadline at the quantile. The probe's
curve gives quantiles over every packet of a step (pooled). Where the pooled quantile sits exactly
at the deadline, a session of n packets is over it by chance about half the time (more than
(1 - q)·n of its packets late; binomial). With ``session_packets`` the capacity is taken where
the pooled late fraction is low enough that at most ``sessions_over`` (1 %) of sessions of that
many packets are over by chance (:func:`session_quantile`: e.g. p99 for 800-packet sessions ->
the pooled p99.56); without it, at the pooled quantile itself.

* ``wait_ppm``: the host-wait budget. The VNF's histogram cannot see a frame waiting in a ring
  or the tap while the host keeps its vCPU off a CPU, and on a shared host that is where the
  end-to-end tail comes from (bench/results/slots.md: in-VNF p99 1 us, end-to-end 55 ms, the
  vCPU waiting 4.6 s of 9). The probe records each step's KVM steal share
  (``vnf_steal_share``); the budget is WAIT_MARGIN x the highest at the steps that met the
  deadline (:func:`wait_budget_ppm`).

The capacity is read off the probe's *whole-step* quantiles (:func:`whole_steps`), not the
medians over its windows: a session lives through every window.

The VNF corrects the capacity at run time from its histogram and its steal time (shrink when
the tail or the wait passes its budget under load, grow back with hysteresis:
``unikernel/include/qoe.h``); this module only derives the parameters, so the rule lives in one
place (the VNF).
"""

from __future__ import annotations

import dataclasses
import math

from fluidvim.common.zonetypes import QoE

from .model import LOAD, ProbeResult
from .slots import CapacityEstimate, SlotsError, estimate_capacity


@dataclasses.dataclass(frozen=True)
class QoEParams:
    capacity: int           # sessions at the deadline and quantile (the probe's)
    budget_ns: int          # the VNF's own tail at the quantile that goes with meeting it
    quantile_ppm: int
    basis: str
    wait_ppm: int = 0       # host-wait budget: the vCPU's steal share of a window (0 = off)

    def request(self) -> dict:
        """The fields of the VNF's ``qoe`` request (``wait_ppm`` only when there is one)."""
        out = {"capacity": self.capacity, "budget_ns": self.budget_ns,
               "quantile_ppm": self.quantile_ppm}
        return {**out, "wait_ppm": self.wait_ppm} if self.wait_ppm else out


def quantile_ppm(quantile: float) -> int:
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), e.g. 0.99, got {quantile!r}")
    return max(1, min(999_999, round(quantile * 1_000_000)))


def bucket_tail_ns(buckets: list[int], q_ppm: int) -> int | None:
    """Lower bound (ns) of the log2 bucket holding quantile ``q_ppm`` of a VNF latency histogram
    (``stats`` ``latency_ns.buckets_log2``), as the VNF computes it; None when the histogram has
    too few packets to show that quantile (not one packet beyond it)."""
    n = sum(buckets)
    if n * (1_000_000 - q_ppm) < 1_000_000:
        return None
    rank = max(1, -(-n * q_ppm // 1_000_000))
    cum = 0
    for i, c in enumerate(buckets):
        cum += c
        if cum >= rank:
            return 1 << i if i else 0
    return 1 << (len(buckets) - 1)        # pragma: no cover - cum reaches n


def sessions_over(packets: int, late: float, quantile: float) -> float:
    """P(a session of ``packets`` packets, each late with probability ``late`` independently,
    has more than (1 - quantile) * packets late ones): the share of sessions over the deadline at
    the quantile by chance alone."""
    k = math.floor((1.0 - quantile) * packets + 1e-9)
    if late <= 0.0:
        return 0.0
    if late >= 1.0:
        return 1.0
    below = sum(math.comb(packets, i) * late ** i * (1.0 - late) ** (packets - i)
                for i in range(k + 1))
    return max(0.0, 1.0 - below)


def session_quantile(quantile: float, packets: int, share: float = 0.01) -> float:
    """The pooled quantile whose deadline keeps sessions of ``packets`` packets within their own
    ``quantile`` but for ``share`` of them (:func:`sessions_over`); ValueError on bad input."""
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), e.g. 0.99, got {quantile!r}")
    if int(packets) < 1:
        raise ValueError(f"session_packets must be >= 1 (packets one session sends), got {packets!r}")
    if not 0 < share < 1:
        raise ValueError(f"share of sessions over must be in (0, 1), e.g. 0.01, got {share!r}")
    lo, hi = 0.0, 1.0 - quantile             # the pooled late fraction: bisection on P(over)
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sessions_over(int(packets), mid, quantile) <= share else (lo, mid)
    return 1.0 - lo


WAIT_MARGIN = 1.25          # wait budget = this x the highest steal share that met the deadline
WAIT_FLOOR_PPM = 50_000     # ... and never under 5 % of a window (an idle host's steal is ~0)


def wait_budget_ppm(steal_shares: list[float]) -> int:
    """The VNF's host-wait budget (``qoe`` ``wait_ppm``) from the probe VNF's steal shares at the
    steps that met the deadline: WAIT_MARGIN x the highest, at least WAIT_FLOOR_PPM, at most a
    whole window; 0 (no wait rule) when the probe has no steal reading."""
    if not steal_shares:
        return 0
    if any(not s >= 0.0 for s in steal_shares):          # negative or NaN: not a share
        raise ValueError(f"vnf_steal_share must be a share of a step >= 0, got {steal_shares}")
    top = min(1.0, max(steal_shares))
    return int(min(1_000_000, max(WAIT_FLOOR_PPM, round(WAIT_MARGIN * top * 1e6))))


def whole_steps(result: ProbeResult) -> ProbeResult:
    """``result`` with each load step's quantiles and loss over *all* its packets (the client's
    ``latency_pooled_ms``/``loss_pooled``) in place of the medians over its windows.

    The window medians are made to rank environments: a burst of another tenant's CPU use moves
    one window, not the step. A session lives through every window of a step, bursts included,
    so its own tail is the whole step's: capacity for sessions is read off the whole-step curve
    (on the quiet host of bench/results/slots.md, 176 sessions at the probe's window-median p99
    became 55 ms p99 over an 8 s admitted run). Steps without pooled figures (a generator VNF's,
    one window) keep theirs."""
    steps = []
    for s in result.metrics.get("steps") or []:
        lat, loss = s.get("latency_pooled_ms"), s.get("loss_pooled")
        steps.append({**s, **({"latency_ms": lat} if lat else {}),
                      **({"loss": loss} if loss is not None else {})})
    return dataclasses.replace(result, metrics={**result.metrics, "steps": steps})


def qoe_capacity(result: ProbeResult, deadline_ms: float, quantile: float,
                 session_pps: float | None = None, max_loss: float = 0.01,
                 session_packets: int | None = None) -> CapacityEstimate:
    """The sessions ``result``'s environment serves within the deadline at the quantile, read off
    the whole-step curve (:func:`whole_steps`); with ``session_packets``, at the pooled quantile
    that keeps 99 % of such sessions within their own (:func:`session_quantile`). The one reading
    of a load probe: stage 1's slots and feasibility (``analyzers``) and the launch's ``qoe``
    capacity (:func:`launch_qoe`) both come from here. SlotsError as estimate_capacity."""
    pooled_q = quantile if session_packets is None else session_quantile(quantile, session_packets)
    est = estimate_capacity(whole_steps(result), deadline_ms, pooled_q, session_pps, max_loss)
    if session_packets is None:
        return est
    per = (f"sessions of {int(session_packets)} packets: the pooled p{pooled_q * 100:.4g} keeps "
           f"99 % of them within their own p{quantile * 100:g}; ")
    return dataclasses.replace(est, basis=per + est.basis)


def no_capacity_reason(env_uid: str, deadline_ms: float, quantile: float, basis: str) -> str:
    """Why an environment whose probe shows no session within the deadline is refused, and the
    fix: stage 1's infeasibility reason and :class:`NoQoECapacity`'s message (one text)."""
    return (f"the load probe of environment {env_uid} shows no session within "
            f"{deadline_ms:g} ms at p{quantile * 100:g} ({basis}): a VNF launched there would "
            "announce sessions that miss the deadline; relax the service's deadline_ms or "
            "qos_quantile, or place it on a faster environment type")


def latest_load(results) -> ProbeResult | None:
    """The newest successful load probe result among ``results`` (an environment's stage-1
    ProbeResults, any kinds): the one stage 1 and the launch read; None without one."""
    loads = [r for r in results or () if r.kind == LOAD and r.ok]
    return max(loads, key=lambda r: r.measured_at) if loads else None


def qoe_params(result: ProbeResult, deadline_ms: float, quantile: float,
               session_pps: float | None = None, max_loss: float = 0.01,
               session_packets: int | None = None) -> QoEParams:
    """The ``qoe`` parameters of a service (deadline, quantile) on a load probe's environment;
    with ``session_packets``, the capacity that keeps 99 % of sessions of that many packets
    within their own quantile (module docstring)."""
    est = qoe_capacity(result, deadline_ms, quantile, session_pps, max_loss, session_packets)
    return _params_at(result, est, deadline_ms, quantile)


def _params_at(result: ProbeResult, est: CapacityEstimate, deadline_ms: float,
               quantile: float) -> QoEParams:
    """The ``qoe`` parameters that go with the capacity ``est`` (:func:`qoe_capacity`)."""
    qp = quantile_ppm(quantile)
    tails, steals = [], []
    for s in result.metrics.get("steps") or []:
        load = min(float(s["offered_pps"]), float(s.get("achieved_pps") or s["offered_pps"]))
        if load > est.pps + 1e-9:
            continue
        if s.get("vnf_steal_share") is not None:
            steals.append(float(s["vnf_steal_share"]))
        hist = (s.get("vnf_latency_ns") or {}).get("buckets_log2")
        if hist:
            t = bucket_tail_ns(hist, qp)
            if t is not None:
                tails.append(t)
    if tails:
        budget = 2 * max(max(tails), 512)
        why = (f"VNF tail budget {budget} ns = 2 x the highest in-VNF p{quantile * 100:g} bucket "
               f"({max(tails)} ns) over {len(tails)} step(s) at or below the capacity")
    else:     # no histogram (an old probe result): only the end-to-end deadline bounds it
        budget = int(deadline_ms * 1e6)
        why = "no VNF latency histogram in the probe: budget = the service's deadline"
    wait = wait_budget_ppm(steals)
    if wait:
        why += (f"; host-wait budget {wait} ppm = max({WAIT_FLOOR_PPM}, {WAIT_MARGIN} x the "
                f"highest steal share {max(steals):.3f} over {len(steals)} step(s))")
    return QoEParams(est.slots, budget, qp, f"{est.basis}; {why}", wait)


class NoQoECapacity(SlotsError):
    """The environment's load probe shows no session within the service's deadline at its
    quantile: a VNF launched there would announce slots whose sessions miss the deadline."""


def launch_qoe(results, deadline_ms: float, quantile: float,
               session_pps: float | None = None) -> tuple[QoE | None, str]:
    """The QoE a launch on an environment carries (``LaunchRequest.qoe``), from the environment's
    stage-1 results (``results``: its ProbeResults, any kinds) and the service's deadline and
    quantile; (None, why) when there is no usable load probe result (nothing is known: the VNF
    then announces its flow table's slots).

    Raises :class:`NoQoECapacity` when the probe shows no session within the deadline. A VNF
    cannot announce "0 at the QoE" (``qoe`` capacity 0 turns the rule off, so it would announce
    its whole flow table: sessions the probe says miss the deadline), and stage 1 already finds
    such an environment infeasible with the same reason (:func:`no_capacity_reason`), so the
    launch is refused with the probe's reason and the fix."""
    r = latest_load(results)
    if r is None:
        return None, "no successful load probe result for the environment"
    try:
        est = qoe_capacity(r, deadline_ms, quantile, session_pps)
    except SlotsError as e:
        return None, f"load probe result unusable: {e}"
    if est.slots < 1:
        raise NoQoECapacity(no_capacity_reason(r.env_uid, deadline_ms, quantile, est.basis))
    p = _params_at(r, est, deadline_ms, quantile)
    return QoE(p.capacity, float(deadline_ms), float(quantile), p.budget_ns, p.wait_ppm), p.basis
