# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Slot estimates from a load curve: interpolation across quantiles and load, loss, edge cases."""

import math

import pytest

from fluidvim.evaluator.model import ProbeResult
from fluidvim.evaluator.slots import SlotsError, estimate_capacity, estimate_slots, latency_at


def step(pps, p50, p90, p99, loss=0.0, session_pps=100):
    return {"sessions": int(pps / session_pps), "offered_pps": pps, "loss": loss,
            "latency_ms": {"0.5": p50, "0.75": (p50 + p90) / 2, "0.9": p90,
                           "0.95": (p90 + p99) / 2, "0.99": p99, "0.999": p99 * 1.5}}


def curve(*steps, session_pps=100, **extra):
    return ProbeResult(env_uid="u1", kind="load", ok=True,
                       metrics={"session_pps": session_pps, "steps": list(steps), **extra})


CURVE = curve(step(1000, 0.5, 0.8, 1.0), step(2000, 0.6, 1.0, 2.0),
              step(4000, 1.0, 3.0, 8.0), step(8000, 5.0, 30.0, 80.0, loss=0.2))


def test_latency_at_interpolates_between_recorded_quantiles():
    s = CURVE.metrics["steps"][1]
    assert latency_at(s, 0.9) == (1.0, False)
    assert latency_at(s, 0.97)[0] == pytest.approx(1.5 + (2.0 - 1.5) * 0.5)   # half-way 0.95..0.99
    assert latency_at(s, 0.9999) == (3.0, True)        # beyond 0.999: extrapolated, flagged
    assert latency_at(s, 0.1) == (0.6, True)


def test_crossing_log_interpolation():
    # p99 <= 4 ms: 2000 pps (2 ms) meets, 4000 pps (8 ms) does not; log-linear crossing:
    # 2000 + (ln4 - ln2) / (ln8 - ln2) * 2000 = 3000 pps -> 30 sessions at 100 pps
    est = estimate_capacity(CURVE, deadline_ms=4.0, quantile=0.99)
    assert est.pps == pytest.approx(3000.0)
    assert est.slots == 30 and est.saturated
    assert "between 2000 pps" in est.basis and "30 slots" in est.basis
    lin = estimate_capacity(CURVE, 4.0, 0.99, interp="linear")
    assert lin.pps == pytest.approx(2000 + (4 - 2) / (8 - 2) * 2000)


def test_service_session_rate_scales_the_same_curve():
    assert estimate_slots(CURVE, 4.0, 0.99, session_pps=10) == 300
    assert estimate_slots(CURVE, 4.0, 0.99, session_pps=1000) == 3


def test_looser_deadline_or_quantile_gives_more_slots():
    tight = estimate_slots(CURVE, 2.0, 0.99)
    loose = estimate_slots(CURVE, 20.0, 0.99)
    median = estimate_slots(CURVE, 2.0, 0.5)
    assert tight == 20                   # exactly at the 2000 pps step
    assert tight < loose and tight < median


def test_loss_bounds_capacity():
    # p50 <= 10 ms holds at 8000 pps (5 ms) but 20 % loss there; loss crosses 1 % at
    # 4000 + 0.01/0.2 * 4000 = 4200 pps
    est = estimate_capacity(CURVE, 10.0, 0.5, max_loss=0.01)
    assert est.pps == pytest.approx(4200.0) and est.slots == 42
    assert estimate_capacity(CURVE, 10.0, 0.5, max_loss=0.5).pps == 8000.0


def test_highest_step_still_meeting_is_a_lower_bound():
    est = estimate_capacity(CURVE, 1000.0, 0.99, max_loss=1.0)
    assert est.pps == 8000.0 and not est.saturated and "at least" in est.basis


def test_nothing_meets():
    est = estimate_capacity(CURVE, 0.1, 0.99)
    assert est.slots == 0 and "no load step meets" in est.basis


def test_noisy_low_load_tail_does_not_hide_the_working_range():
    noisy = curve(step(100, 0.5, 2.0, 40.0), step(1000, 0.5, 1.0, 3.0), step(2000, 0.6, 2.0, 12.0))
    est = estimate_capacity(noisy, 10.0, 0.99, smooth=1)
    assert 1000 < est.pps < 2000 and est.failing_below == [100.0]
    assert "noisy tail" in est.basis


# a curve whose p99 crosses 10 ms between 5000 and 6000 pps, with one outlier step each way
P99 = [(1000, 2.0), (2000, 2.2), (3000, 30.0), (4000, 2.6), (5000, 4.0), (6000, 20.0),
       (7000, 3.0), (8000, 60.0), (9000, 90.0)]


def outlier_curve():
    return curve(*[step(pps, 1.0, 1.5, p99) for pps, p99 in P99])


def test_single_outliers_are_smoothed_away():
    est = estimate_capacity(outlier_curve(), 10.0, 0.99)        # running median of 3
    # smoothed p99 at 1000..9000 pps: 2, 2.2, 2.6, 4, 4, 4, 20, 60, 90: the 3000 spike and the
    # 7000 dip are gone; crossing between 6000 (4 ms) and 7000 (20 ms), log-linear: 6569 pps
    assert est.saturated and est.pps == pytest.approx(6569.3, abs=0.1)
    assert est.failing_below == [] and "running median of 3" in est.basis
    raw = estimate_capacity(outlier_curve(), 10.0, 0.99, smooth=1)
    # unsmoothed, the 7000 pps dip counts as passing: crossing between 7000 and 8000, with the
    # 3000 and 6000 spikes reported as failing below
    assert 7000 < raw.pps < 8000 and raw.failing_below == [3000.0, 6000.0]
    with pytest.raises(SlotsError, match="odd window"):
        estimate_capacity(outlier_curve(), 10.0, 0.99, smooth=2)


def test_two_adjacent_bad_steps_stay_bad():
    pts = [(1000, 2.0), (2000, 2.0), (3000, 30.0), (4000, 30.0), (5000, 2.0), (6000, 2.0)]
    est = estimate_capacity(curve(*[step(p, 1, 1.5, q) for p, q in pts]), 10.0, 0.99)
    # smoothed: 2, 2, 30, 30, 2, 2: the last two pass again, so the highest passing is 6000
    assert est.pps == 6000.0 and not est.saturated and est.failing_below == [3000.0, 4000.0]


def test_flow_table_caps_slots():
    capped = curve(step(1000, 0.5, 0.8, 1.0), step(2000, 0.6, 1.0, 2.0), max_sessions=5)
    assert estimate_slots(capped, 100.0, 0.99) == 5


def test_steps_are_sorted_by_load():
    shuffled = curve(*reversed(CURVE.metrics["steps"]))
    assert estimate_capacity(shuffled, 4.0, 0.99).pps == pytest.approx(3000.0)


@pytest.mark.parametrize("res,kw,match", [
    (ProbeResult("u", "boot", True, {}), {}, "load probe"),
    (ProbeResult("u", "load", False, {}, error="no traffic"), {}, "failed: no traffic"),
    (curve(), {}, "no load steps"),
    (CURVE, {"deadline_ms": 0}, "deadline_ms"),
    (CURVE, {"quantile": 1.0}, "quantile"),
    (CURVE, {"interp": "cubic"}, "interp"),
    (curve(step(1, 1, 1, 1), session_pps=0), {}, "session_pps"),
])
def test_bad_inputs(res, kw, match):
    args = {"deadline_ms": 5.0, "quantile": 0.99, **kw}
    with pytest.raises(SlotsError, match=match):
        estimate_capacity(res, **args)


def test_missing_quantiles_mean_fail():
    res = curve({"offered_pps": 100, "loss": 0.0, "latency_ms": {}})
    assert estimate_slots(res, 5.0, 0.99) == 0
    assert latency_at({"latency_ms": {}}, 0.5) == (math.inf, False)
