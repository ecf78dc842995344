# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The qoe parameters a VNF is given: capacity from the load curve, its own latency budget."""

import math

import pytest

from fluidvim.evaluator.model import ProbeResult
from fluidvim.evaluator.qoeslots import (
    WAIT_FLOOR_PPM,
    WAIT_LOAD_SHARE,
    WAIT_MARGIN,
    bucket_tail_ns,
    burst_share,
    late_share,
    monotone_fit,
    qoe_params,
    qoe_params_at,
    quantile_ppm,
    session_quantile,
    sessions_over,
    wait_budget_ppm,
    wait_steps,
    whole_steps,
)
from fluidvim.evaluator.slots import SlotsError, estimate_capacity


def hist(n, bucket, tail=0, tail_bucket=0):
    h = [0] * 24
    h[bucket] = n - tail
    h[tail_bucket] += tail
    return h


def step(pps, p99, vnf=None, loss=0.0):
    s = {"sessions": int(pps / 100), "offered_pps": pps, "loss": loss,
         "latency_ms": {"0.5": p99 / 4, "0.9": p99 / 2, "0.99": p99, "0.999": p99 * 1.5}}
    if vnf is not None:
        s["vnf_latency_ns"] = {"buckets_log2": vnf, "count": sum(vnf)}
    return s


def curve(*steps):
    return ProbeResult(env_uid="u1", kind="load", ok=True,
                       metrics={"session_pps": 100, "steps": list(steps)})


def test_bucket_tail_is_the_vnfs_quantile_rule():
    assert bucket_tail_ns(hist(1000, 10), 990000) == 1024
    assert bucket_tail_ns(hist(1000, 10, 5, 16), 990000) == 1024       # 0.5 % beyond: p99 ok
    assert bucket_tail_ns(hist(1000, 10, 20, 16), 990000) == 65536     # 2 % beyond
    assert bucket_tail_ns(hist(99, 10), 990000) is None                 # cannot show a p99
    assert bucket_tail_ns(hist(2, 0), 500000) == 0


def test_quantile_ppm_names_the_field():
    assert quantile_ppm(0.99) == 990000
    assert quantile_ppm(0.999) == 999000
    with pytest.raises(ValueError, match="quantile"):
        quantile_ppm(1.0)


def test_params_capacity_and_budget_from_the_same_probe():
    # p99 <= 4 ms: 2000 pps meets, 4000 does not; log crossing at 3000 pps = 30 sessions.
    # in-VNF p99: 2048 ns and 1024 ns at the meeting steps, 65536 past the knee
    c = curve(step(1000, 1.0, hist(5000, 11)), step(2000, 2.0, hist(9000, 10)),
              step(4000, 8.0, hist(20000, 10, 400, 16)))
    p = qoe_params(c, deadline_ms=4.0, quantile=0.99)
    assert p.capacity == 30
    assert p.budget_ns == 4096                   # 2 x the highest meeting tail (2048)
    assert p.quantile_ppm == 990000
    assert p.request() == {"capacity": 30, "budget_ns": 4096, "quantile_ppm": 990000}
    assert "VNF tail budget 4096 ns" in p.basis
    # a looser service: more sessions, and the knee's tail joins the budget
    loose = qoe_params(c, deadline_ms=10.0, quantile=0.99)
    assert loose.capacity == 40 and loose.budget_ns == 2 * 65536


def test_params_at_a_given_capacity_derive_the_budgets_for_it():
    c = curve(step(1000, 1.0, hist(5000, 11)), step(2000, 2.0, hist(9000, 10)),
              step(4000, 8.0, hist(20000, 10, 400, 16)))
    # at 20 sessions only the steps up to 2000 pps set the tail budget; at 40 the knee's too
    low = qoe_params_at(c, 20, 4.0, 0.99, basis="half")
    assert (low.capacity, low.budget_ns) == (20, 4096) and low.basis.startswith("half;")
    assert qoe_params_at(c, 40, 4.0, 0.99).budget_ns == 2 * 65536
    with pytest.raises(SlotsError, match="session rate"):
        qoe_params_at(ProbeResult(env_uid="u", kind="load", ok=True, metrics={}), 5, 4.0, 0.99)


def test_params_without_histogram_fall_back_to_the_deadline():
    p = qoe_params(curve(step(1000, 1.0), step(2000, 8.0)), deadline_ms=4.0, quantile=0.99)
    assert p.budget_ns == 4_000_000 and "no VNF latency histogram" in p.basis


def test_sessions_over_is_the_binomial_tail():
    # 100 packets, q = 0.99: over = more than 1 late; P(X > 1) = 1 - P(0) - P(1)
    p = 0.02
    want = 1 - (1 - p) ** 100 - 100 * p * (1 - p) ** 99
    assert math.isclose(sessions_over(100, p, 0.99), want, rel_tol=1e-12)
    assert sessions_over(100, 0.0, 0.99) == 0.0 and sessions_over(100, 1.0, 0.99) == 1.0
    # the pooled p99 exactly at the deadline (1 % late): an 800-packet session is over (more
    # than 8 late) at close to even odds
    assert 0.35 < sessions_over(800, 0.01, 0.99) < 0.5


def test_session_quantile_keeps_99_percent_of_sessions_within_their_own():
    q = session_quantile(0.99, 800)
    assert 0.99 < q < 0.999
    assert math.isclose(sessions_over(800, 1 - q, 0.99), 0.01, rel_tol=1e-3)
    assert session_quantile(0.99, 100) > q            # shorter sessions: more chance, more margin
    for kw, field in (({"packets": 0}, "session_packets"), ({"quantile": 1.0}, "quantile"),
                      ({"share": 0.0}, "share")):
        args = {"quantile": 0.99, "packets": 800, **kw}
        with pytest.raises(ValueError, match=field):
            session_quantile(**args)


def test_params_per_session_take_the_stricter_pooled_quantile():
    # p99 and p99.9 recorded: 2000 pps meets both at 4 ms; 4000 pps has p99 8, p99.9 12 ms
    c = curve(step(1000, 1.0), step(2000, 2.0), step(4000, 8.0))
    pooled = qoe_params(c, deadline_ms=4.0, quantile=0.99)
    per = qoe_params(c, deadline_ms=4.0, quantile=0.99, session_packets=800)
    assert per.capacity < pooled.capacity == 30 and per.capacity >= 20
    assert "sessions of 800 packets" in per.basis and per.quantile_ppm == 990000


def test_capacity_from_whole_step_quantiles_not_window_medians():
    # window medians meet 4 ms up to 4000 pps; over every packet of a step (the bursts a
    # session lives through) 2000 pps is the last that meets it
    c = curve(step(1000, 1.0), dict(step(2000, 2.0), latency_pooled_ms={"0.99": 3.0}),
              dict(step(4000, 3.0), latency_pooled_ms={"0.99": 12.0}),
              dict(step(8000, 8.0), latency_pooled_ms={"0.99": 30.0}))
    assert whole_steps(c).metrics["steps"][1]["latency_ms"] == {"0.99": 3.0}
    assert whole_steps(c).metrics["steps"][0]["latency_ms"] == step(1000, 1.0)["latency_ms"]
    assert c.metrics["steps"][1]["latency_ms"]["0.99"] == 2.0         # the input is unchanged
    p = qoe_params(c, deadline_ms=4.0, quantile=0.99)
    assert 20 <= p.capacity < 40


def test_whole_steps_take_the_pooled_loss():
    c = curve(dict(step(1000, 1.0), loss_pooled=0.05), step(2000, 2.0))
    assert [s["loss"] for s in whole_steps(c).metrics["steps"]] == [0.05, 0.0]


def test_wait_budget_from_the_steal_well_under_capacity():
    assert WAIT_MARGIN == 1 / WAIT_LOAD_SHARE == 2.0     # scaled from half the load to all of it
    assert wait_budget_ppm([]) == 0                                  # no reading: no rule
    assert wait_budget_ppm([0.0, 0.01]) == WAIT_FLOOR_PPM            # an idle host: the floor
    assert wait_budget_ppm([0.1, 0.3, 0.2]) == round(WAIT_MARGIN * 0.3 * 1e6)
    assert wait_budget_ppm([0.6]) == 1_000_000                        # at most a whole window
    assert wait_budget_ppm([1.06]) == 1_000_000     # steal in a step's start-up and drain too
    with pytest.raises(ValueError, match="vnf_steal_share"):
        wait_budget_ppm([float("nan")])
    with pytest.raises(ValueError, match="vnf_steal_share"):
        wait_budget_ppm([-0.1])


def test_wait_steps_are_the_light_ones_or_the_lowest():
    steps = [step(1000, 1.0), step(3000, 2.0), step(500, 1.0), step(6000, 3.0)]
    assert [s["offered_pps"] for s in wait_steps(steps, 6000)] == [500, 1000, 3000]
    assert [s["offered_pps"] for s in wait_steps(steps, 400)] == [500]       # none that light
    assert wait_steps([], 6000) == []


def test_params_wait_budget_only_from_steps_well_under_capacity():
    # capacity 30 sessions (3000 pps): only the 1000 pps step is at or below half of it; the
    # 2000 pps step (the probe's own contention near the capacity) and the 4000 one are left out
    c = curve(dict(step(1000, 1.0, hist(5000, 11)), vnf_steal_share=0.1),
              dict(step(2000, 2.0, hist(9000, 10)), vnf_steal_share=0.2),
              dict(step(4000, 8.0, hist(20000, 10, 400, 16)), vnf_steal_share=0.6))
    p = qoe_params(c, deadline_ms=4.0, quantile=0.99)
    assert p.capacity == 30
    assert p.wait_ppm == round(WAIT_MARGIN * 0.1 * 1e6)
    assert p.request()["wait_ppm"] == p.wait_ppm and "host-wait budget" in p.basis
    # the budget does not grow with the steal of the steps near the capacity
    hot = curve(dict(step(1000, 1.0, hist(5000, 11)), vnf_steal_share=0.1),
                dict(step(2000, 2.0, hist(9000, 10)), vnf_steal_share=0.9),
                dict(step(4000, 8.0, hist(20000, 10, 400, 16)), vnf_steal_share=0.9))
    assert qoe_params(hot, deadline_ms=4.0, quantile=0.99).wait_ppm == p.wait_ppm
    # a probe without steal readings: no wait rule, and the request has no such field
    assert "wait_ppm" not in qoe_params(curve(step(1000, 1.0), step(2000, 8.0)), 4.0,
                                        0.99).request()


def full(pps, pooled, window=None, loss=0.0, seconds=2.0):
    """A step as the client reports it: window medians and pooled quantiles (ms), max, counts."""
    window = window or pooled
    qs = ("0.5", "0.9", "0.99", "0.999")
    sent = int(pps * seconds)
    return {"sessions": int(pps / 100), "offered_pps": pps, "loss": loss, "loss_pooled": loss,
            "latency_ms": dict(zip(qs, window)), "latency_pooled_ms": dict(zip(qs, pooled)),
            "max_ms": pooled[-1] * 1.2, "received": sent, "sent": sent, "duration_s": seconds}


def test_late_share_interpolates_the_tail():
    s = full(1000, (1.0, 2.0, 4.0, 8.0))
    assert late_share(s, 4.0) == pytest.approx(0.01)
    assert late_share(s, 8.0) == pytest.approx(0.001)
    assert 0.001 < late_share(s, 6.0) < 0.01                         # log-log between them
    assert late_share(s, 100.0) == 0.0                               # past the largest one
    assert late_share(s, 0.5) == pytest.approx(0.5)                  # below p50: at least half
    lossy = dict(s, loss_pooled=0.02)
    assert late_share(lossy, 100.0) == pytest.approx(0.02)           # lost packets are late
    # the typical window: the window medians, at most the pooled share
    burst = full(1000, (1.0, 2.0, 20.0, 40.0), window=(1.0, 2.0, 4.0, 8.0))
    assert late_share(burst, 10.0) > 0.01 and late_share(burst, 10.0, pooled=False) < 0.001
    assert late_share({"latency_ms": {}}, 4.0) == 1.0                # nothing measured


def test_monotone_fit_pools_violators_by_weight():
    assert monotone_fit([1, 2, 3], [1, 1, 1]) == [1, 2, 3]
    assert monotone_fit([1, 4, 2, 5], [1, 1, 3, 1]) == [1, 2.5, 2.5, 5]
    assert monotone_fit([3, 1], [1, 1]) == [2, 2]


def test_burst_share_is_the_hosts_rate_over_the_probes_time():
    quiet = (1.0, 2.0, 4.0, 6.0)
    burst = (1.0, 2.0, 12.0, 20.0)                     # a step a burst hit: its whole-step tail
    steps = [full(1000, quiet), full(2000, burst, window=quiet), full(3000, quiet),
             full(3500, burst, window=quiet), full(4000, (5.0, 20.0, 40.0, 50.0))]  # past knee
    excess = late_share(steps[1], 10.0) - late_share(steps[1], 10.0, pooled=False)
    assert excess > 0.01                                    # the burst step's extra late share
    # two bursts in four steps below the knee: the one with the most is left out, the other
    # counts over the three steps' time left
    assert burst_share(steps, 10.0, 0.005) == pytest.approx(excess / 3)
    # one burst: left out, however long (it moves a rate over the probe's time by one step's)
    one = [steps[0], steps[1], steps[2]]
    assert burst_share(one, 10.0, 0.005) == 0.0
    assert burst_share(steps[:2], 10.0, 0.005) == pytest.approx(excess / 2)   # too few to trim
    # a recheck's discarded measurement counts as another measurement of its step
    rechecked = dict(steps[1], latency_pooled_ms=steps[0]["latency_pooled_ms"],
                     recheck_discarded=steps[1])
    assert burst_share([steps[0], rechecked, steps[2], steps[3]], 10.0, 0.005) == pytest.approx(
        excess / 4)


def test_per_session_capacity_robust_to_one_burst():
    # late shares at 10 ms: 0 below 150 sessions; the 200-session step is over; one step (100
    # sessions) had a burst: its pooled p99 is over the deadline, its typical window is not
    quiet = (1.0, 2.0, 4.0, 8.0)
    steps = [full(2000, quiet), full(5000, quiet),
             full(10000, (1.5, 3.0, 11.0, 15.0), window=quiet),
             full(15000, (2.0, 3.5, 8.0, 9.5)), full(20000, (4.0, 7.0, 12.5, 15.6)),
             full(25000, (26.0, 53.0, 74.0, 77.0))]
    whole = qoe_params(curve(*steps), 10.0, 0.99, session_packets=1600)
    assert 150 <= whole.capacity < 200, whole.basis
    assert "host's bursts" in whole.basis
    # the whole-step reading at the pooled quantile (the one before) is held down by the burst
    old = estimate_capacity(whole_steps(curve(*steps)), 10.0,
                            session_quantile(0.99, 1600), 100)
    assert old.slots < whole.capacity
    # bursts at the host's rate count: the same burst in every step below the knee lowers it
    bursty = [full(s["offered_pps"], (1.5, 3.0, 11.0, 15.0), window=quiet) if i < 4 else s
              for i, s in enumerate(steps)]
    assert qoe_params(curve(*bursty), 10.0, 0.99, session_packets=1600).capacity < 150


def test_per_session_capacity_none_and_all():
    quiet = (1.0, 2.0, 4.0, 8.0)
    assert qoe_params(curve(full(1000, (20, 30, 40, 50))), 10.0, 0.99,
                      session_packets=1600).capacity == 0
    p = qoe_params(curve(full(1000, quiet), full(2000, quiet)), 10.0, 0.99, session_packets=1600)
    assert p.capacity == 20 and "at least" in p.basis
    with pytest.raises(SlotsError, match="session_packets"):
        qoe_params(curve(full(1000, quiet)), 10.0, 0.99, session_packets=0)


def test_probe_step_steal_share():
    from fluidvim.evaluator.probes import _steal_share

    assert _steal_share({"steal_us": 1_000}, {"steal_us": 1_151_000}, 2.3) == 0.5
    assert _steal_share({"steal_us": 0}, {"steal_us": 9_000_000}, 2.3) == 1.0    # at most all
    assert _steal_share({}, {"steal_us": 5}, 2.3) is None           # no KVM steal time
    assert _steal_share(None, {"steal_us": 5}, 2.3) is None


def test_probe_rechecks_by_the_whole_step_tail():
    from fluidvim.evaluator.probes import DISCARDED_KEYS, SUSPECT_RATIO, _suspects

    # window medians monotone; over all its packets the 100-session step's p99 is 1.37 x the
    # 150-session step's (the quiet-host record): a burst the capacity would read, rechecked
    steps = [full(5000, (1.0, 2.0, 6.0, 9.0)),
             full(10000, (1.8, 5.0, 11.2, 15.2), window=(1.5, 4.0, 7.0, 9.0)),
             full(15000, (2.0, 3.6, 8.2, 12.7), window=(1.9, 3.5, 7.3, 9.5))]
    assert 11.2 / 8.2 > SUSPECT_RATIO
    assert _suspects(steps) == [1]
    assert _suspects([steps[0], steps[2]]) == []
    # what a recheck keeps of the discarded one is what the burst share reads
    assert {"latency_pooled_ms", "loss_pooled", "max_ms", "received", "duration_s"} <= set(
        DISCARDED_KEYS)


# -- the confirm phase: session-length runs judged per session (issue 23 item 1) ---------------

def _search(estimate, true_capacity, target, max_sessions=4096):
    """The counts next_confirm runs against a host where a count holds iff <= true_capacity."""
    from fluidvim.evaluator.confirm import next_confirm

    runs = []
    while (n := next_confirm(runs, estimate, max_sessions, target)) is not None:
        over = 0 if n <= true_capacity else n
        runs.append({"sessions": n, "n": n, "over": over, "over_pct": 100.0 * over / n})
    return runs


def _confirmed(runs, target, max_sessions=4096):
    from fluidvim.evaluator.confirm import confirmed_capacity

    r = ProbeResult(env_uid="u1", kind="load", ok=True,
                    metrics={"session_pps": 100, "max_sessions": max_sessions, "steps": []})
    return confirmed_capacity(r, {"target": target.as_dict(), "estimate": None, "runs": runs})


@pytest.mark.parametrize("estimate,truth", [(457, 285), (92, 180), (200, 200), (300, 12)])
def test_confirm_brackets_and_bisects_to_the_definition(estimate, truth):
    from fluidvim.evaluator.confirm import SessionTarget

    t = SessionTarget(10.0, 0.99, 16.0, runs=10)
    runs = _search(estimate, truth, t)
    assert runs[0]["sessions"] == estimate and len(runs) <= 10
    # the count it ends on held in CONFIRM_REPEATS runs
    assert sum(1 for r in runs if r["sessions"] == _confirmed(runs, t).slots) >= 2 or truth < 1
    est = _confirmed(runs, t)
    # never above what held; within the tolerance (or the run budget's bracket) below it
    assert est.slots <= truth
    assert est.slots >= truth * (1 - 0.1), [r["sessions"] for r in runs]


def test_confirm_run_budget_and_bracket():
    from fluidvim.evaluator.confirm import SessionTarget, next_confirm

    t = SessionTarget(10.0, 0.99, 16.0)
    assert t.runs == 9 and t.repeats == 3 and t.margin == 0.1
    # the 14:10 quiet-host case as a clean knee at 285: 457 fails, 228 holds, bisect 342
    # (fails: the candidate is 0.9 x 342 = 307), 285 holds, 307 fails (candidate 276 <= 285
    # held): 276 itself, three times
    assert [r["sessions"] for r in _search(457, 285, t)] == [457, 228, 342, 285, 307, 276,
                                                              276, 276]
    # ... and where a repeat of the candidate fails, it is the new smallest failure
    runs = [{"sessions": 228, "n": 228, "over": 0}, {"sessions": 285, "n": 285, "over": 0},
            {"sessions": 307, "n": 307, "over": 307}, {"sessions": 276, "n": 276, "over": 0},
            {"sessions": 276, "n": 276, "over": 276}]
    # (a first failure under a count that held is run again: confirm.held_above)
    assert next_confirm(runs, 457, 4096, t) == 276
    runs.append({"sessions": 276, "n": 276, "over": 276})
    assert next_confirm(runs, 457, 4096, t) == 248           # 0.9 x 276, under 285 held
    # too slow a host: halved to 1, then done (capacity 0, nothing to repeat)
    runs = _search(8, 0, SessionTarget(10.0, 0.99, runs=10))
    assert [r["sessions"] for r in runs] == [8, 4, 2, 1]
    assert _confirmed(runs, t).slots == 0
    # everything held up to the flow table: 200 until it has its repeats; at least that
    runs = _search(100, 10_000, SessionTarget(10.0, 0.99, runs=10), max_sessions=200)
    assert [r["sessions"] for r in runs] == [100, 150, 200, 200, 200]
    est = _confirmed(runs, t, max_sessions=200)
    assert est.slots == 200 and not est.saturated
    # the candidate held already: only its repeats are left; with repeats=1 it is done
    pts = [{"sessions": 100, "n": 100, "over": 0}, {"sessions": 104, "n": 104, "over": 50}]
    assert next_confirm(pts, 100, 4096, t) == 93               # 0.9 x 104, under 100 held
    pts.append({"sessions": 93, "n": 93, "over": 0})
    assert next_confirm(pts, 100, 4096, t) == 93
    assert next_confirm(pts, 100, 4096, SessionTarget(10.0, 0.99, repeats=1)) is None
    # margin 0: the candidate is the count under the first failure, bisected towards it
    assert next_confirm(pts[:2], 100, 4096, SessionTarget(10.0, 0.99, margin=0.0)) == 102
    # the budget is the budget
    assert next_confirm(pts, 100, 4096, SessionTarget(10.0, 0.99, runs=3)) is None
    # at the last runs a bisection step gives way to the limit 0.9 x 200 = 180 itself when
    # the count announced is more than the margin under it (test_confirm_budget_end.py) ...
    pts = [{"sessions": 100, "n": 100, "over": 0}, {"sessions": 200, "n": 200, "over": 200}]
    assert next_confirm(pts, 100, 4096, SessionTarget(10.0, 0.99, runs=5)) == 150
    assert next_confirm(pts, 100, 4096, SessionTarget(10.0, 0.99, runs=4)) == 180
    # ... but not the candidate itself (it is announced after two holds rather than 100)
    pts.append({"sessions": 170, "n": 170, "over": 0})
    assert next_confirm(pts, 100, 4096, SessionTarget(10.0, 0.99, runs=4)) == 180


def test_confirm_reading_every_run_must_hold():
    """A count holds only when every run of it held (not pooled): 0.6 % and 0 % hold, one
    run 100 % over of two fails it however the other went."""
    from fluidvim.evaluator.confirm import SessionTarget, confirm_reading

    t = SessionTarget(10.0, 0.99)
    runs = [{"sessions": 200, "n": 200, "over": 1}, {"sessions": 300, "n": 300, "over": 0},
            {"sessions": 200, "n": 200, "over": 0}, {"sessions": 300, "n": 300, "over": 300}]
    rd = confirm_reading(runs, t.max_over_pct, t.margin)
    assert rd == {"slots": 200, "bound": "margin", "lo": 200, "hi": 300, "limit": 270,
                  "runs_at": 2, "dropped": 0}
    est = _confirmed(runs, t)
    assert est.slots == 200 and est.saturated and est.pps == 200 * 100
    assert "(1 - 0.1) x 300" in est.basis and "300: 0/100 %" in est.basis


# The quiet-host run of record (bench/results/slots.md, 2026-11-28 16:57): the confirm phase's
# runs and the per-session reference's, in the order they ran (sessions, sessions over).
QUIET_CONFIRM = [(338, 338), (169, 0), (253, 0), (295, 0), (316, 0), (327, 2), (327, 0)]
QUIET_REFERENCE = [(164, 0), (245, 0), (286, 0), (306, 306), (327, 327), (164, 0), (245, 0),
                   (286, 0), (306, 306), (327, 327)]


def _runs(seq):
    return [{"sessions": n, "n": n, "over": o} for n, o in seq]


def test_confirm_reading_of_the_bimodal_knee_on_record():
    """The recorded runs read by the new rule: the confirm's 327 (held twice, 338 failed)
    is not announced - 0.9 x 338 = 304 caps it, 295 is (+3.1 % against the reference's 286,
    where the old reading said 327, +14.3 %); the reference's own runs (306 failed) read 245,
    and a search on them would have run 0.9 x 306 = 275."""
    from fluidvim.evaluator.confirm import SessionTarget, confirm_reading, next_confirm

    t = SessionTarget(10.0, 0.99)
    assert confirm_reading(_runs(QUIET_CONFIRM), 1.0, t.margin)["slots"] == 295
    ref = confirm_reading(_runs(QUIET_REFERENCE), 1.0, t.margin)
    assert ref["slots"] == 245 and ref["limit"] == 275
    assert next_confirm(_runs(QUIET_REFERENCE[:4]), 338, 4096, t) == 275


def _outcomes(estimate, target, p_hold):
    """Every path of the confirm search on a host where a run of n sessions holds with
    probability p_hold(n) (all its sessions within, else all over: the bimodal knee), with its
    probability: {(slots announced, runs): probability}."""
    from fluidvim.evaluator.confirm import confirm_reading, next_confirm

    out: dict = {}

    def walk(runs, prob):
        n = next_confirm(runs, estimate, 4096, target)
        if n is None:
            key = (confirm_reading(runs, 1.0, target.margin)["slots"], len(runs))
            out[key] = out.get(key, 0.0) + prob
            return
        p = p_hold(n)
        if p > 0:
            walk(runs + [{"sessions": n, "n": n, "over": 0}], prob * p)
        if p < 1:
            walk(runs + [{"sessions": n, "n": n, "over": n}], prob * (1 - p))
    walk([], 1.0)
    return out


@pytest.mark.parametrize("estimate", [338, 457, 254, 200])
def test_confirm_at_a_bimodal_knee_stays_in_band_and_off_the_knee(estimate):
    """The recorded knee as a model: a run of n sessions holds for all of them or fails for
    all, with a chance falling linearly from 1 at 286 (held in every reference run) to 0 at
    338 (306 failed once, 316 held once, 327 held 2 of 4). Over every path of the search
    (exact probabilities): within the run budget, inside ±10 % of 286 but on paths of < 1 %
    together, and the announced count fails a run with a small chance (< 10 %: the
    admission's risk; the old pooled reading's, 7 runs, repeats 2: 21-28 %, and outside ±10 %
    on 2-40 % of its paths)."""
    from fluidvim.evaluator.confirm import SessionTarget

    def p_hold(n):
        return 1.0 if n <= 286 else 0.0 if n >= 338 else (338 - n) / (338 - 286)

    t = SessionTarget(10.0, 0.99)
    out = _outcomes(estimate, t, p_hold)
    assert math.isclose(sum(out.values()), 1.0)
    assert max(runs for _, runs in out) <= t.runs + t.reruns
    p_over = sum(p for (s, _), p in out.items() if s > 1.1 * 286)
    p_under = sum(p for (s, _), p in out.items() if s < 0.9 * 286)
    risk = sum(p * (1 - p_hold(s)) for (s, _), p in out.items())
    assert p_over < 0.001 and p_under < 0.01 and risk < 0.1, (p_over, p_under, risk)


def test_session_target_checks_its_fields():
    from fluidvim.evaluator.confirm import SessionTarget

    assert SessionTarget(10.0, 0.99, 16.0).packets(100) == 1600
    for bad in ({"deadline_ms": 0}, {"quantile": 1.0}, {"session_s": 0}, {"runs": 0},
                {"repeats": 0},
                {"max_over_pct": 100}, {"margin": 1.0}, {"margin": -0.1}):
        kw = {"deadline_ms": 10.0, "quantile": 0.99, **bad}
        with pytest.raises(ValueError):
            SessionTarget(**kw)


def _probe_with_confirm(steps, runs, deadline=10.0, quantile=0.99, session_s=16.0):
    from fluidvim.evaluator.confirm import SessionTarget

    t = SessionTarget(deadline, quantile, session_s)
    return ProbeResult(env_uid="u1", kind="load", ok=True, metrics={
        "session_pps": 100, "max_sessions": 4096, "steps": steps,
        "confirm": {"target": t.as_dict(), "estimate": 457, "runs": runs}})


def test_capacity_reads_the_confirm_phase_for_its_own_target_only():
    from fluidvim.common.zonetypes import QoE
    from fluidvim.evaluator.qoeslots import fast_capacity, launch_qoe, qoe_capacity

    quiet = (1.0, 2.0, 4.0, 8.0)
    steps = [full(10000, quiet), full(40000, quiet), full(50000, (20, 30, 40, 50))]
    runs = [{"sessions": 457, "n": 457, "over": 457}, {"sessions": 228, "n": 228, "over": 0},
            {"sessions": 342, "n": 342, "over": 342}, {"sessions": 285, "n": 285, "over": 0},
            {"sessions": 313, "n": 313, "over": 313}, {"sessions": 281, "n": 281, "over": 0}]
    r = _probe_with_confirm(steps, runs)
    fast = fast_capacity(r, 10.0, 0.99, session_packets=1600).slots
    assert fast >= 400                                   # the 2 s steps' optimistic reading
    est = qoe_capacity(r, 10.0, 0.99, session_packets=1600)
    assert est.slots == 281 and "confirmed by 6 run(s)" in est.basis
    assert qoe_params(r, 10.0, 0.99, session_packets=1600).capacity == 281
    # another deadline, quantile or session length: the fast steps, as before
    assert qoe_capacity(r, 20.0, 0.99, session_packets=1600).slots != 281
    assert qoe_capacity(r, 10.0, 0.999).slots != 281
    assert qoe_capacity(r, 10.0, 0.99, session_packets=800).slots == fast_capacity(
        r, 10.0, 0.99, session_packets=800).slots
    # a launch (no session length) at the confirmed deadline and quantile reads the confirm
    qoe, basis = launch_qoe([r], 10.0, 0.99)
    assert isinstance(qoe, QoE) and qoe.capacity == 281 and "confirmed" in basis
    # a failed probe is still refused before its confirm block is read
    with pytest.raises(SlotsError):
        qoe_capacity(ProbeResult(env_uid="u1", kind="load", ok=False, metrics=r.metrics,
                                 error="x"), 10.0, 0.99)


def test_probe_confirm_phase_runs_sessions_and_judges_each(monkeypatch):
    from fluidvim.evaluator.confirm import SessionTarget
    from fluidvim.evaluator.probes import LoadProbe

    probe = LoadProbe(confirm=SessionTarget(10.0, 0.99, 16.0, runs=6))
    calls = []

    def fake_step(net, n, duration=None, windows=None, per_session=None):
        calls.append((n, duration, per_session))
        p99 = 4.0 if n <= 150 else 30.0              # this host holds 150 sessions of 16 s
        return {"offered_pps": n * 100.0, "loss_pooled": 0.0,
                "latency_pooled_ms": {"0.99": p99},
                "per_session": {"latency_ms": [p99] * n, "loss": [0.0] * n,
                                "late": [0 if p99 < 10 else 40] * n, "sent": [1600] * n}}

    monkeypatch.setattr(probe, "_step", fake_step)
    quiet = (1.0, 2.0, 4.0, 8.0)
    metrics = {"session_pps": 100.0, "max_sessions": 4096,
               "steps": [full(10000, quiet), full(20000, quiet), full(30000, (20, 30, 40, 50))]}
    env = type("Env", (), {"uid": "u1"})()            # the probe reads only its uid here
    conf = probe._confirm(None, None, "i1", env, metrics, None, probe.confirms[0])
    assert conf["estimate"] > 150 and calls[0][0] == conf["estimate"]
    assert all(d == 16.0 and ps == (0.99, 10.0) for _, d, ps in calls)
    assert len(conf["runs"]) <= 6 and conf["runs"][0]["over_pct"] == 100.0
    r = ProbeResult(env_uid="u1", kind="load", ok=True, metrics={**metrics, "confirm": conf})
    assert 140 <= qoe_params(r, 10.0, 0.99, session_packets=1600).capacity <= 150


def test_probe_confirm_run_that_fails_leaves_the_fast_reading(monkeypatch):
    from fluidvim.evaluator.confirm import SessionTarget
    from fluidvim.evaluator.probes import LoadProbe
    from fluidvim.evaluator.qoeslots import fast_capacity

    probe = LoadProbe(confirm=SessionTarget(10.0, 0.99, 16.0))
    ok = {"offered_pps": 100.0, "per_session": {"latency_ms": [1.0], "loss": [0.0]}}
    answers = iter([ok])

    def step(net, n, **kw):
        try:
            return dict(next(answers), per_session={"latency_ms": [30.0] * n,
                                                    "loss": [0.0] * n})
        except StopIteration:
            raise RuntimeError("load generator failed (1): boom") from None

    monkeypatch.setattr(probe, "_step", step)
    quiet = (1.0, 2.0, 4.0, 8.0)
    metrics = {"session_pps": 100.0, "max_sessions": 4096,
               "steps": [full(10000, quiet), full(20000, (20, 30, 40, 50))]}
    conf = probe._confirm(None, None, "i1", type("Env", (), {"uid": "u1"})(), metrics, None,
                          probe.confirms[0])
    assert len(conf["runs"]) == 1 and "boom" in conf["error"]
    r = ProbeResult(env_uid="u1", kind="load", ok=True, metrics={**metrics, "confirm": conf})
    assert qoe_params(r, 10.0, 0.99, session_packets=1600).capacity == fast_capacity(
        r, 10.0, 0.99, session_packets=1600).slots


def test_capacity_reads_each_level_of_a_multi_target_confirm():
    """A probe confirming two levels records a list of blocks (one per target); each service
    reads the block of its own deadline and quantile, a failed one leaves its fast reading."""
    from fluidvim.evaluator.confirm import SessionTarget, confirm_failed, has_target
    from fluidvim.evaluator.qoeslots import fast_capacity, launch_qoe, qoe_capacity

    quiet = (1.0, 2.0, 4.0, 8.0)
    steps = [full(10000, quiet), full(40000, quiet), full(50000, (20, 30, 40, 50))]
    gold, bronze, broken = (SessionTarget(10.0, 0.99), SessionTarget(30.0, 0.9),
                            SessionTarget(5.0, 0.99))

    def runs(held, over):
        return [{"sessions": held, "n": held, "over": 0}, {"sessions": held, "n": held, "over": 0},
                {"sessions": over, "n": over, "over": over}]

    blocks = [{"target": gold.as_dict(), "estimate": 400, "runs": runs(200, 250)},
              {"target": bronze.as_dict(), "estimate": 400, "runs": runs(300, 375)},
              {"target": broken.as_dict(), "estimate": 400, "runs": runs(100, 110),
               "error": "confirm run of 110 sessions failed: boom"}]
    r = ProbeResult(env_uid="u1", kind="load", ok=True, metrics={
        "session_pps": 100, "max_sessions": 4096, "steps": steps, "confirm": blocks})
    assert qoe_capacity(r, 10.0, 0.99).slots == 200
    assert qoe_capacity(r, 30.0, 0.9).slots == 300
    assert launch_qoe([r], 30.0, 0.9)[0].capacity == 300
    assert qoe_capacity(r, 5.0, 0.99).slots == fast_capacity(r, 5.0, 0.99).slots
    # another session rate than the probe's: no block answers it
    assert "confirmed" not in qoe_capacity(r, 10.0, 0.99, session_pps=50).basis
    assert has_target(r, gold) and has_target(r, broken)
    assert not has_target(r, SessionTarget(10.0, 0.99, 2.0))
    assert confirm_failed(r.metrics) and not confirm_failed({"confirm": blocks[:2]})
    assert not confirm_failed({}) and not confirm_failed({"confirm": blocks[0]})


def test_wait_budget_raised_to_the_steal_of_confirm_runs_that_held():
    # the quiet run of record (bench/results/slots.md, 2026-11-28 20:41): the light steps' steal
    # (17 %) scaled linearly gave 34 %, while runs of the announced count held at 48-57 %
    quiet = (1.0, 2.0, 4.0, 8.0)
    steps = [dict(full(10000, quiet), vnf_steal_share=0.17), full(40000, quiet),
             full(50000, (20, 30, 40, 50))]

    def run(n, over, steal):
        return {"sessions": n, "n": n, "over": over, "vnf_steal_share": steal}

    runs = [run(333, 333, 0.60), run(166, 0, 0.34), run(249, 0, 0.55), run(291, 0, 0.58),
            run(299, 0, 0.60), run(299, 299, 0.65), run(269, 0, 0.57), run(269, 0, 0.56),
            run(269, 0, 0.48)]
    r = _probe_with_confirm(steps, runs)
    p = qoe_params(r, 10.0, 0.99, session_packets=1600)
    assert p.capacity == 269
    # the held runs at or below 269 only: 291 and 299 held above it, 299 and 333 failed
    assert p.wait_ppm == 570000 and "confirm run(s) that held" in p.basis
    # runs without a steal reading (an older probe): the steps' budget, as before
    bare = _probe_with_confirm(steps, [{k: v for k, v in x.items() if k != "vnf_steal_share"}
                                       for x in runs])
    assert qoe_params(bare, 10.0, 0.99, session_packets=1600).wait_ppm == round(
        WAIT_MARGIN * 0.17 * 1e6)
    # another deadline has no confirm: the steps' budget
    assert qoe_params(r, 20.0, 0.99).wait_ppm == round(WAIT_MARGIN * 0.17 * 1e6)


def test_unconfirmed_reading_of_a_probe_that_confirms_is_derated():
    """A probe that confirms marks its result (``unconfirmed_share``): a deadline it has not
    confirmed (yet) reads that share of the fast steps, at least 1 slot; the confirmed level
    reads its runs; a probe that does not confirm keeps the fast reading (the A/B figure)."""
    from fluidvim.evaluator.qoeslots import fast_capacity, launch_qoe, qoe_capacity

    quiet = (1.0, 2.0, 4.0, 8.0)
    steps = [full(10000, quiet), full(40000, quiet), full(50000, (20, 30, 40, 50))]
    plain = ProbeResult(env_uid="u1", kind="load", ok=True,
                        metrics={"session_pps": 100.0, "max_sessions": 4096, "steps": steps})
    fast = fast_capacity(plain, 10.0, 0.99).slots
    assert fast > 10 and qoe_capacity(plain, 10.0, 0.99).slots == fast
    pending = ProbeResult(env_uid="u1", kind="load", ok=True, metrics={
        **plain.metrics, "unconfirmed_share": 0.5,
        "confirm_pending": [{"deadline_ms": 10.0, "quantile": 0.99}]})
    est = qoe_capacity(pending, 10.0, 0.99)
    assert est.slots == fast // 2 and "under way in the background" in est.basis
    qoe, basis = launch_qoe([pending], 10.0, 0.99)
    assert qoe.capacity == fast // 2 and "unconfirmed" in basis
    runs = [{"sessions": 300, "n": 300, "over": 0}] * 3
    done = _probe_with_confirm(steps, runs)
    done.metrics["unconfirmed_share"] = 0.5
    assert qoe_capacity(done, 10.0, 0.99, session_packets=1600).slots == 300    # confirmed
    assert (qoe_capacity(done, 20.0, 0.99).slots            # another level: derated
            == fast_capacity(done, 20.0, 0.99).slots // 2)
    tiny = ProbeResult(env_uid="u1", kind="load", ok=True, metrics={
        "session_pps": 20000.0, "unconfirmed_share": 0.5, "steps": steps})
    assert fast_capacity(tiny, 10.0, 0.99).slots == 2 and qoe_capacity(tiny, 10.0, 0.99).slots == 1


def test_background_confirm_replaces_pending_and_stage1_keeps_it_briefly(monkeypatch, tmp_path):
    """The background confirm's result (LoadProbe._confirmed) drops ``confirm_pending`` for
    the blocks and the probe's full validity; stage 1 keeps the pending fast result only until
    the confirm should have landed plus a failed result's time, stores the landed one over it,
    and carries the targets of a replaced result into the next probe."""
    from fluidvim.evaluator.cache import ProbeCache
    from fluidvim.evaluator.confirm import SessionTarget
    from fluidvim.evaluator.probes import LoadProbe
    from fluidvim.evaluator.stage1 import Stage1Runner, _targets_of

    t = SessionTarget(10.0, 0.99, 2.0, runs=2)
    probe = LoadProbe(confirm_service=t, valid_for_s=3600.0)

    def fake_step(net, n, duration=None, windows=None, per_session=None):
        return {"offered_pps": n * 100.0, "loss_pooled": 0.0, "latency_pooled_ms": {"0.99": 2.0},
                "per_session": {"latency_ms": [2.0] * n, "loss": [0.0] * n}}

    monkeypatch.setattr(probe, "_step", fake_step)
    quiet = (1.0, 2.0, 4.0, 8.0)
    metrics = {"session_pps": 100.0, "max_sessions": 4096, "unconfirmed_share": 0.5,
               "steps": [full(10000, quiet), full(20000, (20, 30, 40, 50))],
               "confirm_pending": [t.as_dict()]}
    fast = ProbeResult(env_uid="u1", kind="load", ok=True, metrics=metrics, valid_for_s=3600.0)
    runner = Stage1Runner(ProbeCache(f"sqlite:///{tmp_path}/p.sqlite"), [probe],
                          failure_valid_for_s=300.0)
    runner._limit_validity(fast)
    assert fast.valid_for_s == 300.0 + (2 + t.reruns) * (2.0 + 2.0)
    runner.cache.put(fast)
    final = probe._confirmed(fast, None, None, "i1", type("Env", (), {"uid": "u1"})(), [t])
    assert "confirm_pending" not in final.metrics and final.valid_for_s == 3600.0
    assert final.metrics["confirm"]["target"] == t.as_dict() and final.metrics["confirm"]["runs"]
    runner._landed(final)
    got = runner.cache.get_valid("u1", "load")
    assert "confirm" in got.metrics and got.valid_for_s == 3600.0
    assert _targets_of(got) == [t] and _targets_of(fast) == [t] and _targets_of(None) == []
    probe.close()                                       # stopped: the next confirm does not run
    stopped = probe._confirmed(fast, None, None, "i1", type("Env", (), {"uid": "u1"})(), [t])
    assert "stopped" in stopped.metrics["confirm"]["error"]
