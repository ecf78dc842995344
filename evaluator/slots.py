# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Session slots from a load probe's curve, for any service's deadline and QoS quantile.

A load probe records, per load step, the offered packet rate and the latency quantiles and loss
its packets saw (:mod:`fluidvim.evaluator.probes`). A service asks: at which load does my quantile
``q`` of per-packet latency still meet my deadline, with (almost) no loss? Its slots are that
packet rate divided by the packets/s one of its sessions sends. The curve is shared, so one load
probe answers every service.

How the crossing is found (:func:`estimate_capacity`):

1. the latency at quantile ``q`` of a step is interpolated linearly between the quantiles the
   probe recorded (0.5, 0.75, 0.9, 0.95, 0.99, 0.999); beyond 0.999 the 0.999 value is used
   (reported as extrapolated);
   The load of a step is its offered packet rate, or the rate the generator achieved if that was
   lower (a generator that cannot keep up must not inflate the capacity).
   Each step's latency (at ``q``) and loss are then replaced by the median of the step and its
   two neighbours in load order (``smooth=3``; ``smooth=1`` turns it off): a single step hit by
   a burst of someone else's CPU use - common on a shared machine - neither ends the working
   range early nor extends it past a real failure; two adjacent bad steps remain bad.
2. a step *meets* the service when that latency <= deadline and its loss <= ``max_loss``;
3. the capacity lies between the **highest load that meets** and the next (failing) step above
   it - a failing step *below* it (e.g. a low-load tail caused by an idle VNF's wake-up latency)
   does not hide the working range above it, but is reported;
4. between those two steps the load is interpolated where latency crosses the deadline - linearly
   in ``log(latency)`` by default (queueing delay grows roughly exponentially as the VNF nears
   saturation), or linearly (``interp="linear"``) - and, if loss crosses ``max_loss`` between them,
   where loss (linear) crosses it; the lower of the two;
5. if the highest step still meets, the capacity is that step's load (not extrapolated:
   ``saturated=False`` says the true capacity is at least that); if no step meets, 0.
"""

from __future__ import annotations

import dataclasses
import math

from .model import LOAD, ProbeResult


class SlotsError(ValueError):
    """The probe result cannot give a slot estimate (wrong kind, failed probe, no steps)."""


@dataclasses.dataclass
class CapacityEstimate:
    pps: float                      # the packet rate at which the service's tail meets its deadline
    slots: int                      # pps / session_pps, floored
    session_pps: float
    saturated: bool                 # True: the curve crossed the deadline (else capacity >= pps)
    basis: str                      # human-readable: which steps and how
    extrapolated_quantile: bool = False
    failing_below: list = dataclasses.field(default_factory=list)  # loads that failed below pps


def latency_at(step: dict, quantile: float) -> tuple[float, bool]:
    """(latency ms at ``quantile`` for one step, whether it had to be extrapolated)."""
    lat = {float(k): float(v) for k, v in (step.get("latency_ms") or {}).items()
           if v is not None and not (isinstance(v, float) and math.isnan(v))}
    if not lat:
        return math.inf, False
    qs = sorted(lat)
    if quantile <= qs[0]:
        return lat[qs[0]], quantile < qs[0]
    if quantile >= qs[-1]:
        return lat[qs[-1]], quantile > qs[-1]
    for lo, hi in zip(qs, qs[1:]):
        if lo <= quantile <= hi:
            f = (quantile - lo) / (hi - lo)
            return lat[lo] + f * (lat[hi] - lat[lo]), False
    return lat[qs[-1]], True        # pragma: no cover - unreachable


def _load(step: dict) -> float:
    """A step's load: the packet rate the generator achieved (if it fell short), else offered."""
    offered = float(step["offered_pps"])
    achieved = step.get("achieved_pps")
    return min(offered, float(achieved)) if achieved else offered


def _crossing(x0, y0, x1, y1, target, log=False) -> float:
    if log and y0 > 0 and y1 > 0 and target > 0:
        y0, y1, target = math.log(y0), math.log(y1), math.log(target)
    if y1 == y0:
        return x0
    f = (target - y0) / (y1 - y0)
    return x0 + max(0.0, min(1.0, f)) * (x1 - x0)


def _smooth(values: list[float], window: int) -> list[float]:
    """Running median over ``window`` neighbours (odd; the ends keep fewer)."""
    if window <= 1 or len(values) < 3:
        return list(values)
    h = window // 2
    out = []
    for i in range(len(values)):
        if i == 0 or i == len(values) - 1:
            out.append(values[i])
            continue
        w = sorted(values[max(0, i - h):i + h + 1])
        out.append(w[len(w) // 2])
    return out


def load_steps(result: ProbeResult, deadline_ms: float, quantile: float,
               session_pps: float | None = None) -> tuple[list[dict], float]:
    """The checked input of a capacity reading: the load probe's steps by load and the packets
    per second of one session (``session_pps``, else the probe's). SlotsError naming what is
    wrong: not a successful load probe, no steps, a deadline, quantile or rate out of range."""
    if result.kind != LOAD:
        raise SlotsError(f"slots come from a load probe, got a {result.kind!r} probe result")
    if not result.ok:
        raise SlotsError(f"the load probe of {result.env_uid} failed: {result.error}")
    if not deadline_ms > 0:
        raise SlotsError(f"deadline_ms must be > 0, got {deadline_ms!r}")
    if not 0 < quantile < 1:
        raise SlotsError(f"quantile must be in (0, 1), e.g. 0.99, got {quantile!r}")
    steps = sorted(result.metrics.get("steps") or [], key=_load)
    if not steps:
        raise SlotsError(f"the load probe of {result.env_uid} has no load steps")
    spp = float(session_pps or result.metrics.get("session_pps") or 0)
    if not spp > 0:
        raise SlotsError("session_pps must be > 0 (packets/s one session sends)")
    return steps, spp


def estimate_capacity(result: ProbeResult, deadline_ms: float, quantile: float,
                      session_pps: float | None = None, max_loss: float = 0.01,
                      interp: str = "log", smooth: int = 3) -> CapacityEstimate:
    if interp not in ("log", "linear"):
        raise SlotsError(f"interp must be 'log' or 'linear', got {interp!r}")
    steps, spp = load_steps(result, deadline_ms, quantile, session_pps)
    cap_sessions = result.metrics.get("max_sessions")
    if smooth < 1 or smooth % 2 == 0:
        raise SlotsError(f"smooth must be an odd window >= 1, got {smooth!r}")
    extrap = False
    lats, losses = [], []
    for s in steps:
        lat, ex = latency_at(s, quantile)
        extrap |= ex
        lats.append(lat)
        losses.append(float(s.get("loss", 0.0)))
    lats, losses = _smooth(lats, smooth), _smooth(losses, smooth)
    evals = [(_load(s), lat, loss, lat <= deadline_ms and loss <= max_loss)
             for s, lat, loss in zip(steps, lats, losses)]
    passing = [i for i, e in enumerate(evals) if e[3]]
    qname = f"p{quantile * 100:g}"
    if not passing:
        x, lat, loss, _ = evals[0]
        return CapacityEstimate(0.0, 0, spp, True,
                                f"no load step meets {qname} <= {deadline_ms:g} ms with loss <= "
                                f"{max_loss:.0%} (lowest step {x:g} pps: {qname} {lat:.2f} ms, "
                                f"loss {loss:.1%})", extrap)
    i = passing[-1]
    x0, y0, l0, _ = evals[i]
    failing_below = [e[0] for e in evals[:i] if not e[3]]
    if i == len(evals) - 1:
        pps, saturated = x0, False
        basis = (f"highest measured step {x0:g} pps still meets {qname} <= {deadline_ms:g} ms "
                 f"({y0:.2f} ms, loss {l0:.1%}); capacity is at least that")
    else:
        x1, y1, l1, _ = evals[i + 1]
        cands = []
        if y1 > deadline_ms:
            cands.append(_crossing(x0, y0, x1, y1, deadline_ms, log=(interp == "log")))
        if l1 > max_loss:
            cands.append(_crossing(x0, l0, x1, l1, max_loss))
        pps, saturated = min(cands), True
        sm = f" (running median of {smooth})" if smooth > 1 else ""
        basis = (f"{qname}{sm} crosses {deadline_ms:g} ms between {x0:g} pps ({y0:.2f} ms, loss "
                 f"{l0:.1%}) and {x1:g} pps ({y1:.2f} ms, loss {l1:.1%}); {interp} interpolation "
                 f"gives {pps:.0f} pps")
    slots = int(math.floor(pps / spp + 1e-9))
    if cap_sessions is not None and slots > int(cap_sessions):
        basis += f"; capped by the flow table ({cap_sessions} sessions)"
        slots = int(cap_sessions)
    basis += f"; / {spp:g} pps per session = {slots} slots"
    if failing_below:
        basis += f" (note: lower loads {failing_below} missed the deadline: noisy tail)"
    return CapacityEstimate(pps, slots, spp, saturated, basis, extrap, failing_below)


def estimate_slots(result: ProbeResult, deadline_ms: float, quantile: float,
                   session_pps: float | None = None, max_loss: float = 0.01,
                   interp: str = "log", smooth: int = 3) -> int:
    """The largest number of sessions whose tail latency at ``quantile`` meets ``deadline_ms``.

    ``session_pps`` = packets/s of one of the service's sessions (default: the probe's own), so the
    same curve gives every service its slots. See the module docstring for the interpolation.
    """
    return estimate_capacity(result, deadline_ms, quantile, session_pps, max_loss, interp,
                             smooth).slots
