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

The VNF corrects the capacity at run time from its histogram (shrink when the tail passes the
budget under load, grow back with hysteresis: ``unikernel/include/qoe.h``); this module only
derives the parameters, so the rule lives in one place (the VNF).
"""

from __future__ import annotations

import dataclasses

from fluidvim.common.zonetypes import QoE

from .model import LOAD, ProbeResult
from .slots import SlotsError, estimate_capacity


@dataclasses.dataclass(frozen=True)
class QoEParams:
    capacity: int           # sessions at the deadline and quantile (the probe's)
    budget_ns: int          # the VNF's own tail at the quantile that goes with meeting it
    quantile_ppm: int
    basis: str

    def request(self) -> dict:
        """The fields of the VNF's ``qoe`` request."""
        return {"capacity": self.capacity, "budget_ns": self.budget_ns,
                "quantile_ppm": self.quantile_ppm}


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


def qoe_params(result: ProbeResult, deadline_ms: float, quantile: float,
               session_pps: float | None = None, max_loss: float = 0.01) -> QoEParams:
    """The ``qoe`` parameters of a service (deadline, quantile) on a load probe's environment."""
    est = estimate_capacity(result, deadline_ms, quantile, session_pps, max_loss)
    qp = quantile_ppm(quantile)
    tails = []
    for s in result.metrics.get("steps") or []:
        load = min(float(s["offered_pps"]), float(s.get("achieved_pps") or s["offered_pps"]))
        hist = (s.get("vnf_latency_ns") or {}).get("buckets_log2")
        if load <= est.pps + 1e-9 and hist:
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
    return QoEParams(est.slots, budget, qp, f"{est.basis}; {why}")


def launch_qoe(results, deadline_ms: float, quantile: float,
               session_pps: float | None = None) -> tuple[QoE | None, str]:
    """The QoE a launch on an environment carries (``LaunchRequest.qoe``), from the environment's
    stage-1 results (``results``: its ProbeResults, any kinds) and the service's deadline and
    quantile; (None, why) when there is no usable load probe result or it shows no capacity at
    the deadline (the VNF then announces its flow table's slots)."""
    loads = [r for r in results or () if r.kind == LOAD and r.ok]
    if not loads:
        return None, "no successful load probe result for the environment"
    r = max(loads, key=lambda r: r.measured_at)
    try:
        p = qoe_params(r, deadline_ms, quantile, session_pps)
    except SlotsError as e:
        return None, f"load probe result unusable: {e}"
    if p.capacity < 1:
        return None, f"the load probe shows no session within {deadline_ms} ms ({p.basis})"
    return QoE(p.capacity, float(deadline_ms), float(quantile), p.budget_ns), p.basis
