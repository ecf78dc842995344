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
  (``vnf_steal_share``); the budget is read from the steps at or below *half* the capacity
  (:data:`WAIT_LOAD_SHARE`), times 2 = capacity / half (:func:`wait_budget_ppm`). Not from the
  steps near the capacity: there the steal is the probe's own contention (its traffic client
  and QEMU's main loop beside the vCPU on the same cores) and, taken as the budget, it grew
  with exactly what it should judge (bench/results/slots.md: 758,625 ppm from a 4 s probe
  whose steps at its capacity stole 61 %, a rule that never fired while every admitted session
  was over).

The capacity is read off the probe's *whole-step* quantiles (:func:`whole_steps`), not the
medians over its windows: a session lives through every window. With ``session_packets``
(sessions of a known length) it is read off the *late share* instead
(:func:`late_capacity`): each step's share of packets later than the deadline (lost ones
included, :func:`late_share`) in its typical window (the window medians: one burst moves one
window) plus the host's burst rate (:func:`burst_share`: the packets late beyond the typical
window over all the probe's steps below the knee, per second of them: a session lives through
the bursts at that rate, whichever step one fell in), a monotone fit over the steps (more load
cannot make the path faster), and the capacity where that share passes the one that keeps 99 %
of such sessions within their own quantile (:func:`session_quantile`). On the quiet-host probe
of bench/results/slots.md the whole-step reading gave 92 slots against a 180 reference (one
2 s step with a burst decided it); this one gives 150.

A 2 s probe step does not show what a 16 s session meets at the same rate; a probe given a
session target (``LoadProbe(confirm=...)``) then *measures the definition* with session-length
runs judged one by one, and :func:`qoe_capacity` reads the capacity off them where the target
matches (:mod:`fluidvim.evaluator.confirm`).

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
from .slots import CapacityEstimate, SlotsError, _crossing, _load, estimate_capacity, load_steps


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


WAIT_LOAD_SHARE = 0.5       # the wait budget reads the steps at or below this share of capacity
WAIT_MARGIN = 1.0 / WAIT_LOAD_SHARE   # ... scaled to the capacity: own contention ~ own load
WAIT_FLOOR_PPM = 50_000     # ... and never under 5 % of a window (an idle host's steal is ~0)


def wait_budget_ppm(steal_shares: list[float]) -> int:
    """The VNF's host-wait budget (``qoe`` ``wait_ppm``) from the probe VNF's steal shares at the
    steps at or below WAIT_LOAD_SHARE of the capacity (:func:`wait_steps`): WAIT_MARGIN x the
    highest (the steal the VNF's own contention explains, scaled from half its load to all of
    it), at least WAIT_FLOOR_PPM, at most a whole window; 0 (no wait rule) when the probe has no
    steal reading."""
    if not steal_shares:
        return 0
    if any(not s >= 0.0 for s in steal_shares):          # negative or NaN: not a share
        raise ValueError(f"vnf_steal_share must be a share of a step >= 0, got {steal_shares}")
    top = min(1.0, max(steal_shares))
    return int(min(1_000_000, max(WAIT_FLOOR_PPM, round(WAIT_MARGIN * top * 1e6))))


def wait_steps(steps: list[dict], capacity_pps: float) -> list[dict]:
    """The steps whose steal shares set the wait budget: those at or below WAIT_LOAD_SHARE of
    the capacity's load (well under it: the host's steal plus a light load of the VNF's own,
    not the probe's contention at the knee); the lowest step when none is that light."""
    steps = sorted(steps, key=_load)
    light = [s for s in steps if _load(s) <= WAIT_LOAD_SHARE * capacity_pps + 1e-9]
    return light or steps[:1]


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


def late_share(step: dict, deadline_ms: float, pooled: bool = True) -> float:
    """The share of a step's packets later than ``deadline_ms``, lost ones included: over all
    its packets (``pooled``: the quantiles ``latency_pooled_ms`` and ``loss_pooled``; a step
    without them, e.g. a generator VNF's, its own), or in its typical window (the window
    medians ``latency_ms`` and ``loss``, at most the pooled share: one burst moves one window,
    not the median). Between two recorded quantiles the tail share is
    interpolated log-log (latency, 1 - quantile); past the highest one, towards the step's
    largest round trip (``max_ms``: one packet of ``received``), beyond which none is late
    (without ``max_ms``: the highest quantile's tail share, an upper bound); below the lowest,
    that quantile's tail share (a lower bound, far past any QoE)."""
    if not pooled:
        window = {"latency_ms": step.get("latency_ms"), "loss": step.get("loss", 0.0),
                  "max_ms": step.get("max_ms"), "received": step.get("received")}
        return min(late_share(window, deadline_ms), late_share(step, deadline_ms))
    lat = step.get("latency_pooled_ms") or step.get("latency_ms") or {}
    pts, top = [], 0.0
    for q, x in sorted((float(q), x) for q, x in lat.items()):
        if x is None or not math.isfinite(float(x)) or not 0 < q < 1:
            continue
        top = max(top, float(x))                 # quantiles are monotone; keep them so
        pts.append((top, 1.0 - q))
    loss = step.get("loss_pooled")
    loss = float(step.get("loss", 0.0) if loss is None else loss)
    if not pts:
        return 1.0                              # nothing received or recorded: none served
    mx, got = step.get("max_ms"), step.get("received")
    if mx is not None and got and float(mx) > pts[-1][0] and 1.0 / got < pts[-1][1]:
        pts.append((float(mx), 1.0 / got))
    if deadline_ms < pts[0][0]:
        tail = pts[0][1]
    elif deadline_ms >= pts[-1][0]:
        tail = 0.0 if mx is not None and deadline_ms >= float(mx) else pts[-1][1]  # at most
    else:
        i = next(i for i in range(len(pts) - 1) if pts[i][0] <= deadline_ms < pts[i + 1][0])
        (x0, t0), (x1, t1) = pts[i], pts[i + 1]
        if x0 > 0 and x1 > x0:
            f = math.log(deadline_ms / x0) / math.log(x1 / x0) if deadline_ms > 0 else 0.0
            tail = math.exp(math.log(t0) + max(0.0, f) * (math.log(t1) - math.log(t0)))
        else:
            tail = t1
    return min(1.0, loss + (1.0 - loss) * tail)


def monotone_fit(values: list[float], weights: list[float]) -> list[float]:
    """The non-decreasing sequence closest to ``values`` in weighted least squares (pool
    adjacent violators): a value above a later one is averaged with it, weighted."""
    blocks: list[list[float]] = []          # [weighted mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([float(v), max(1e-12, float(w)), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, w1, n1), (m2, w2, n2) = blocks.pop(-2), blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return [m for m, _, n in blocks for _ in range(n)]


def _packets(step: dict) -> float:
    """A step's measured packets (its weight in :func:`monotone_fit`)."""
    if step.get("sent"):
        return float(step["sent"])
    return _load(step) * float(step.get("duration_s") or 1.0)


def _seconds(step: dict) -> float:
    """A step's measured time (its weight in :func:`burst_share`)."""
    return float(step.get("duration_s") or 1.0)


def burst_share(steps: list[dict], deadline_ms: float, limit: float) -> float:
    """The host's burst rate as a late share: over the steps whose typical window is within
    ``limit`` (below the knee: their extra tail is the host's, not their load's), the packets
    late beyond the typical window's share (:func:`late_share` pooled minus not pooled), as a
    share of their time: sum(excess x seconds) / sum(seconds), leaving out the one measurement
    with the most (of three or more): one burst, however long, moves the rate by at most its
    share of one step's time, not by the burst itself. A step's discarded recheck
    (``recheck_discarded``, its pooled figures) counts as another measurement of that step. A
    session lives through the host's bursts at this rate, whatever step one happened to hit."""
    runs = []                               # (late seconds beyond the typical window, seconds)
    for s in steps:
        typical = late_share(s, deadline_ms, pooled=False)
        if typical > limit:
            continue
        for m in (s, s.get("recheck_discarded")):
            if m and (m.get("latency_pooled_ms") or m is s):
                secs = _seconds(m)
                runs.append((max(0.0, late_share(m, deadline_ms) - typical) * secs, secs))
    if len(runs) >= 3:
        runs.remove(max(runs, key=lambda r: r[0] / r[1]))
    total = sum(t for _, t in runs)
    return sum(x for x, _ in runs) / total if total else 0.0


LATE_FLOOR = 1e-6       # late shares are interpolated in log; 0 is read as this


def late_capacity(result: ProbeResult, deadline_ms: float, quantile: float,
                  session_packets: int, session_pps: float | None = None,
                  share: float = 0.01) -> CapacityEstimate:
    """The sessions of ``session_packets`` packets the probed environment serves with at most
    ``share`` of them over ``deadline_ms`` at their own ``quantile``.

    A session's late packets are its load's (the tail of a typical window at that load) plus
    the host's bursts at their rate (a session lives through them wherever they fall). So each
    step reads ``late_share(step, pooled=False) + burst_share(steps)``: one burst neither
    decides the step it fell in (it moves one window of its median) nor is it lost (it counts
    at its rate over all the probe's time, as over a session's). Then a monotone fit over the
    steps (:func:`monotone_fit`, weighted by their packets: more load cannot make the path
    faster) and the load where it passes ``1 - session_quantile`` (the late share that keeps
    ``1 - share`` of such sessions within their own quantile, binomial), interpolated between
    the two steps around it, linear in load and log in the late share. SlotsError as
    estimate_capacity."""
    steps, spp = load_steps(result, deadline_ms, quantile, session_pps)
    try:
        pooled_q = session_quantile(quantile, session_packets, share)
    except ValueError as e:
        raise SlotsError(str(e)) from None
    limit = 1.0 - pooled_q
    burst = burst_share(steps, deadline_ms, limit)
    raw = [min(1.0, late_share(s, deadline_ms, pooled=False) + burst) for s in steps]
    fit = monotone_fit(raw, [_packets(s) for s in steps])
    loads = [_load(s) for s in steps]
    passing = [i for i, f in enumerate(fit) if f <= limit]
    per = (f"sessions of {int(session_packets)} packets: late share <= {limit:.3%} (the pooled "
           f"p{pooled_q * 100:.4g}) keeps {1 - share:.0%} of them within their own "
           f"p{quantile * 100:g}; a step's late share = its typical window's + the host's "
           f"bursts {burst:.3%}; ")
    pooled_note = ("" if fit == raw else
                   f" (monotone fit: {sum(1 for a, b in zip(raw, fit) if a != b)} step(s) "
                   "pooled with a higher load)")
    if not passing:
        return CapacityEstimate(0.0, 0, spp, True,
                                per + f"no load step within it (lowest {loads[0]:g} pps: late "
                                f"{fit[0]:.3%}){pooled_note}")
    i = passing[-1]
    if i == len(steps) - 1:
        pps, saturated = loads[i], False
        basis = (f"highest measured step {loads[i]:g} pps is within it (late {fit[i]:.3%}); "
                 "capacity is at least that")
    else:
        pps = _crossing(loads[i], max(LATE_FLOOR, fit[i]), loads[i + 1],
                        max(LATE_FLOOR, fit[i + 1]), max(LATE_FLOOR, limit), log=True)
        saturated = True
        basis = (f"late share crosses it between {loads[i]:g} pps ({fit[i]:.3%}) and "
                 f"{loads[i + 1]:g} pps ({fit[i + 1]:.3%}): {pps:.0f} pps")
    slots = int(math.floor(pps / spp + 1e-9))
    cap_sessions = result.metrics.get("max_sessions")
    if cap_sessions is not None and slots > int(cap_sessions):
        basis += f"; capped by the flow table ({cap_sessions} sessions)"
        slots = int(cap_sessions)
    return CapacityEstimate(pps, slots, spp, saturated,
                            per + basis + pooled_note + f"; / {spp:g} pps per session = "
                            f"{slots} slots")


def qoe_capacity(result: ProbeResult, deadline_ms: float, quantile: float,
                 session_pps: float | None = None, max_loss: float = 0.01,
                 session_packets: int | None = None) -> CapacityEstimate:
    """The sessions ``result``'s environment serves within the deadline at the quantile: where
    the probe confirmed sessions at this deadline, quantile and rate (a
    :class:`~fluidvim.evaluator.confirm.SessionTarget`,
    its ``confirm`` block; with ``session_packets``, also of that many packets), the capacity
    those session-length runs show (``confirmed_capacity``, the target's own definition);
    else read off the fast steps: the whole-step curve (:func:`whole_steps`), or with
    ``session_packets`` the late share that keeps 99 % of sessions of that many packets within
    their own quantile (:func:`late_capacity`); from a probe that confirms, derated until its
    confirm lands (:func:`~fluidvim.evaluator.confirm.unconfirmed_capacity`). The one reading
    of a load probe: stage 1's slots and feasibility (``analyzers``) and the launch's ``qoe``
    capacity (:func:`launch_qoe`) both come from here. SlotsError as estimate_capacity."""
    from .confirm import (  # confirm.py builds on this module
        confirm_for,
        confirmed_capacity,
        unconfirmed_capacity,
    )
    load_steps(result, deadline_ms, quantile, session_pps)      # SlotsError on bad input
    conf = confirm_for(result, deadline_ms, quantile, session_pps, session_packets)
    if conf is not None:
        return confirmed_capacity(result, conf)
    return unconfirmed_capacity(result, fast_capacity(result, deadline_ms, quantile, session_pps,
                                                      max_loss, session_packets))


def fast_capacity(result: ProbeResult, deadline_ms: float, quantile: float,
                  session_pps: float | None = None, max_loss: float = 0.01,
                  session_packets: int | None = None) -> CapacityEstimate:
    """The capacity read off the probe's fast (``step_s``) steps alone (:func:`qoe_capacity`
    without its confirm phase): where the confirm phase starts, and the A/B next to it."""
    if session_packets is not None:
        return late_capacity(result, deadline_ms, quantile, session_packets, session_pps)
    return estimate_capacity(whole_steps(result), deadline_ms, quantile, session_pps, max_loss)


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


def qoe_params_at(result: ProbeResult, slots: int, deadline_ms: float, quantile: float,
                  session_pps: float | None = None, basis: str = "given") -> QoEParams:
    """The ``qoe`` parameters a VNF gets for a capacity of ``slots`` sessions on this probe's
    environment (tail and host-wait budgets as :func:`qoe_params` derives them for it): the
    bench's admission at a capacity other than the one read (bench/slotsqoe.py
    ``admit_at_reference``)."""
    spp = float(session_pps or result.metrics.get("session_pps") or 0)
    if not spp > 0:
        raise SlotsError("qoe_params_at: no session rate (session_pps)")
    est = CapacityEstimate(int(slots) * spp, int(slots), spp, True, basis)
    return _params_at(result, est, deadline_ms, quantile)


def _params_at(result: ProbeResult, est: CapacityEstimate, deadline_ms: float,
               quantile: float) -> QoEParams:
    """The ``qoe`` parameters that go with the capacity ``est`` (:func:`qoe_capacity`)."""
    qp = quantile_ppm(quantile)
    tails = []
    steps = result.metrics.get("steps") or []
    for s in steps:
        if _load(s) > est.pps + 1e-9:
            continue
        hist = (s.get("vnf_latency_ns") or {}).get("buckets_log2")
        if hist:
            t = bucket_tail_ns(hist, qp)
            if t is not None:
                tails.append(t)
    light = wait_steps([s for s in steps if s.get("vnf_steal_share") is not None], est.pps)
    steals = [float(s["vnf_steal_share"]) for s in light]
    if tails:
        budget = 2 * max(max(tails), 512)
        why = (f"VNF tail budget {budget} ns = 2 x the highest in-VNF p{quantile * 100:g} bucket "
               f"({max(tails)} ns) over {len(tails)} step(s) at or below the capacity")
    else:     # no histogram (an old probe result): only the end-to-end deadline bounds it
        budget = int(deadline_ms * 1e6)
        why = "no VNF latency histogram in the probe: budget = the service's deadline"
    wait = wait_budget_ppm(steals)
    if wait:
        why += (f"; host-wait budget {wait} ppm = max({WAIT_FLOOR_PPM}, {WAIT_MARGIN:g} x the "
                f"highest steal share {max(steals):.3f} over {len(steals)} step(s) at or below "
                f"{WAIT_LOAD_SHARE:g} x the capacity)")
    held = confirmed_waits(result, deadline_ms, quantile, est.slots)
    if held and round(max(held) * 1e6) > wait:
        wait = int(min(1_000_000, round(max(held) * 1e6)))
        why += (f"; raised to {wait} ppm, the highest steal share of the {len(held)} confirm "
                f"run(s) that held at or below {est.slots} sessions (the linear scaling "
                "under-reads the wait a held count shows)")
    return QoEParams(est.slots, budget, qp, f"{est.basis}; {why}", wait)


def confirmed_waits(result: ProbeResult, deadline_ms: float, quantile: float,
                    slots: int) -> list[float]:
    """The vCPU steal shares of the probe's confirm runs at this deadline and quantile
    (:func:`~fluidvim.evaluator.confirm.confirm_for`) that held (at most the target's
    ``max_over_pct`` % of their sessions over) with at most ``slots`` sessions: waits the
    VNF's deadline is known to survive. The host-wait budget of :func:`wait_budget_ppm` scales
    the steal of light steps linearly to the capacity, but the wait grows faster than the load:
    on the quiet host of bench/results/slots.md (2026-11-28 20:41) the budget read 34 % where
    runs of the announced 269 sessions held at 48-57 %, and the VNF shrank its capacity to 138
    at 158 sessions, every one of them within the deadline. [] without such runs."""
    from .confirm import confirm_for  # confirm.py builds on this module
    conf = confirm_for(result, deadline_ms, quantile)
    if conf is None:
        return []
    limit = float((conf.get("target") or {}).get("max_over_pct", 1.0))
    return [float(r["vnf_steal_share"]) for r in conf["runs"]
            if r.get("vnf_steal_share") is not None and int(r.get("sessions", 0)) <= slots
            and 100.0 * r["over"] / max(1, r["n"]) <= limit]


class NoQoECapacity(SlotsError):
    """The environment's load probe shows no session within the service's deadline at its
    quantile: a VNF launched there would announce slots whose sessions miss the deadline."""


def launch_qoe(results, deadline_ms: float, quantile: float,
               session_pps: float | None = None, max_loss: float = 0.01
               ) -> tuple[QoE | None, str]:
    """The QoE a launch on an environment carries (``LaunchRequest.qoe``), from the environment's
    stage-1 results (``results``: its ProbeResults, any kinds) and the service's deadline and
    quantile; (None, why) when there is no usable load probe result (nothing is known: the VNF
    then announces its flow table's slots). ``max_loss``: as stage 1's (``[evaluator]
    max_loss``), so the launch reads the capacity stage 1 found.

    Raises :class:`NoQoECapacity` when the probe shows no session within the deadline. A VNF
    cannot announce "0 at the QoE" (``qoe`` capacity 0 turns the rule off, so it would announce
    its whole flow table: sessions the probe says miss the deadline), and stage 1 already finds
    such an environment infeasible with the same reason (:func:`no_capacity_reason`), so the
    launch is refused with the probe's reason and the fix."""
    r = latest_load(results)
    if r is None:
        return None, "no successful load probe result for the environment"
    try:
        est = qoe_capacity(r, deadline_ms, quantile, session_pps, max_loss)
    except SlotsError as e:
        return None, f"load probe result unusable: {e}"
    if est.slots < 1:
        raise NoQoECapacity(no_capacity_reason(r.env_uid, deadline_ms, quantile, est.basis))
    p = _params_at(r, est, deadline_ms, quantile)
    return QoE(p.capacity, float(deadline_ms), float(quantile), p.budget_ns, p.wait_ppm), p.basis
