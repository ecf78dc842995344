# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Stage-2 analyzers and the re-run rule."""

import dataclasses

import pytest

from fluidvim.evaluator.analyzers import (
    INFEASIBLE_SCORE,
    CostBenefitAnalyzer,
    FormulaAnalyzer,
    QoSLevel,
    QScoreAnalyzer,
    Stage2Runner,
    candidate_facts,
)
from fluidvim.evaluator.formula import FORMULA_VARIABLES, FormulaError
from fluidvim.evaluator.model import Candidate, EnvironmentType, ProbeResult, ServiceProfile

FAST = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm", cpu_model="fast")
SLOW = EnvironmentType(launcher="qemu", accel="tcg", machine="microvm", cpu_model="slow")


def load(env, scale):
    """A load curve whose p99 reaches 4 ms at 3000*scale pps (see test_evaluator_slots)."""
    steps = [{"offered_pps": p * scale, "loss": 0.0,
              "latency_ms": {"0.5": p50, "0.9": p90, "0.99": p99, "0.999": p99 * 1.5}}
             for p, p50, p90, p99 in ((1000, 0.5, 0.8, 1.0), (2000, 0.6, 1.0, 2.0),
                                      (4000, 1.0, 3.0, 8.0), (8000, 5.0, 30.0, 80.0))]
    return ProbeResult(env.uid, "load", True, {"session_pps": 100, "steps": steps})


def boot(env, cold, warm=None):
    return ProbeResult(env.uid, "boot", True, {"cold_ms": {"p50": cold}, "warm": warm is not None,
                                               "warm_ms": {"p50": warm}}, zone="z")


RESULTS = {FAST.uid: [load(FAST, 2), boot(FAST, 60, 4)], SLOW.uid: [load(SLOW, 1), boot(SLOW, 600)]}
SVC = ServiceProfile(name="fw", click_config="x", deadline_ms=4.0, qos_quantile=0.99,
                     session_pps=100)


def cands(price_fast=1.0, price_slow=1.0):
    return [Candidate(zone="a", env=SLOW, price_per_hour=price_slow, queuing_delay_s=0.6,
                      power_w_marginal=5.0, free_slots=10),
            Candidate(zone="b", env=FAST, price_per_hour=price_fast, queuing_delay_s=0.06,
                      power_w_marginal=5.0, free_slots=10)]


def test_facts_from_probe_results():
    f = candidate_facts(SVC, cands()[1], RESULTS)
    assert f.feasible and f.slots == 60
    v = f.variables
    assert v["capacity_pps"] == pytest.approx(6000) and v["boot_ms"] == 60 and v["warm_boot_ms"] == 4
    assert v["price_per_slot"] == pytest.approx(1 / 60) and set(v) == set(FORMULA_VARIABLES)


def test_cost_benefit_prefers_capacity_and_explains():
    scores = CostBenefitAnalyzer().analyze(SVC, cands(), RESULTS)
    assert [s.candidate.zone for s in scores] == ["b", "a"]
    assert scores[0].slots_estimate == 60 and scores[1].slots_estimate == 30
    text = "\n".join(scores[0].reasons)
    assert "slots 60" in text and "boot p50 60 ms cold, 4.0 ms warm" in text and "score" in text


def test_cost_benefit_price_can_win_with_weights():
    c = cands(price_fast=10.0, price_slow=1.0)      # fast: 5x the price per slot
    assert CostBenefitAnalyzer().analyze(SVC, c, RESULTS)[0].candidate.zone == "b"
    thrifty = CostBenefitAnalyzer(weights={"price": 3.0})
    ranked = thrifty.analyze(SVC, c, RESULTS)
    assert ranked[0].candidate.zone == "a" and "price-0.600" in ranked[0].reasons[-1]
    with pytest.raises(ValueError, match="unknown weight 'cost'"):
        CostBenefitAnalyzer(weights={"cost": 1})


def test_infeasible_candidates_last_with_reasons():
    strict = dataclasses.replace(SVC, max_queuing_delay_s=0.1)
    c = cands()
    c[0].free_slots = 0                      # slow: no free slot and a 0.6 s delay > 0.1 s
    # zone c cannot launch on demand (delay None = infinite) but has free slots now: feasible
    c.append(Candidate(zone="c", env=FAST, price_per_hour=1.0, queuing_delay_s=None,
                       power_w_marginal=5.0, free_slots=5))
    # zone d: the same, without free slots: infeasible for a service that tolerates 0.1 s
    c.append(Candidate(zone="d", env=FAST, price_per_hour=1.0, queuing_delay_s=None))
    scores = CostBenefitAnalyzer().analyze(strict, c, RESULTS)
    assert [(s.candidate.zone, s.feasible) for s in scores] == [
        ("b", True), ("c", True), ("a", False), ("d", False)]
    assert scores[-1].score == INFEASIBLE_SCORE
    assert any("queuing delay inf s exceeds the service's tolerance 0.1 s" in r
               for r in scores[-1].reasons)
    assert "delay-0.500" in scores[1].reasons[-1]         # infinite delay = the worst term


def test_static_failure_and_missing_load_probe():
    other = EnvironmentType(launcher="nomad", accel="kvm", machine="pc", cpu_model="x")
    res = {other.uid: [ProbeResult(other.uid, "static", False, {}, error="accel: no")]}
    s = CostBenefitAnalyzer().analyze(SVC, [Candidate(zone="n", env=other)], res)[0]
    assert not s.feasible and "static requirements not met: accel: no" in s.reasons[0]
    s = CostBenefitAnalyzer().analyze(SVC, [Candidate(zone="n", env=other)], {})[0]
    assert s.feasible and s.slots_estimate is None and "slots unknown" in s.reasons[0]


def test_qscores_per_level_and_q0_guaranteed():
    levels = [QoSLevel("basic", deadline_ms=20.0, quantile=0.99, wtp_per_session_hour=0.01),
              QoSLevel("premium", deadline_ms=2.0, quantile=0.99, wtp_per_session_hour=0.05)]
    scores = QScoreAnalyzer(levels).analyze(SVC, cands(), RESULTS)
    best = scores[0]
    assert best.candidate.zone == "b" and set(best.qscores) == {"basic", "premium"}
    # fast at premium: 2 ms is met exactly at 4000 pps -> 40 slots x 0.05 - 1 = 1.0
    assert best.qscores["premium"] == pytest.approx(40 * 0.05 - 1.0)
    assert best.score == max(best.qscores.values())
    # Q0 stricter than anything the slow one can do -> infeasible
    hard = [QoSLevel("q0", deadline_ms=0.9, wtp_per_session_hour=1.0)]
    s = {x.candidate.zone: x for x in QScoreAnalyzer(hard).analyze(SVC, cands(), RESULTS)}
    assert not s["a"].feasible and "Q0 (q0) is guaranteed" in s["a"].reasons[-1]
    assert s["a"].qscores == {"q0": None}
    with pytest.raises(ValueError, match="at least one QoS level"):
        QScoreAnalyzer([])
    with pytest.raises(ValueError, match="deadline_ms > 0"):
        QoSLevel("x", deadline_ms=0)


def test_formula_analyzer():
    fa = FormulaAnalyzer("slots / max(price_per_hour, 0.01) - 10 * queuing_delay_s")
    scores = fa.analyze(SVC, cands(price_fast=3.0), RESULTS)
    assert [s.candidate.zone for s in scores] == ["a", "b"]    # 30/1 - 6 = 24 > 60/3 - 0.6
    assert scores[0].score == pytest.approx(24.0)
    assert "slots=30" in scores[0].reasons[-1]
    # evaluation errors make the candidate infeasible, with the reason
    fb = FormulaAnalyzer("slots / (price_per_hour - 1)")
    s = {x.candidate.zone: x for x in fb.analyze(SVC, cands(), RESULTS)}
    assert not s["a"].feasible and "divides by zero" in s["a"].reasons[-1]
    with pytest.raises(FormulaError, match="unknown name"):
        FormulaAnalyzer("slots * magic")


def test_stage2_reruns_only_when_inputs_change():
    runner = Stage2Runner(CostBenefitAnalyzer())
    first = runner.run(SVC, cands(), RESULTS)
    assert not first.reused and "first ranking" in first.reason
    live = cands()
    live[0].free_slots, live[1].queuing_delay_s = 0, 0.07       # live numbers: not re-ranked
    again = runner.run(SVC, live, RESULTS)
    assert again.reused and again.scores is first.scores and "unchanged" in again.reason
    for changed in (
        (SVC, cands(price_fast=2.0), RESULTS),                             # price
        (dataclasses.replace(SVC, min_instances=2), cands(), RESULTS),     # min instances
        (SVC, cands()[:1], RESULTS),                                       # environments
        (SVC, cands(), {**RESULTS, FAST.uid: [load(FAST, 3)]}),            # new probe result
    ):
        r = runner.run(*changed)
        assert not r.reused and "changed" in r.reason
        runner.forget()
        runner.run(SVC, cands(), RESULTS)


@pytest.mark.parametrize("make", [
    lambda: CostBenefitAnalyzer(),
    lambda: FormulaAnalyzer("slots - price_per_hour"),
    lambda: QScoreAnalyzer([QoSLevel("q0", 4.0, 0.99, 1.0), QoSLevel("q1", 8.0, 0.9, 0.5)]),
])
def test_an_environment_types_slots_are_estimated_once_per_ranking(make, monkeypatch):
    """A fleet of many hosts of few environment types: the load curve of a type is worked out
    once per ranking (and level), not once per host; the ranking is the same."""
    from fluidvim.evaluator import analyzers
    calls = []
    real = analyzers.qoe_capacity

    def counting(*a, **kw):
        calls.append(a[0].env_uid)
        return real(*a, **kw)

    many = [dataclasses.replace(c, host=f"h{i}") for i in range(50) for c in cands()]
    plain = make().analyze(SVC, many, RESULTS)
    monkeypatch.setattr(analyzers, "qoe_capacity", counting)
    again = make().analyze(SVC, many, RESULTS)
    levels = len(getattr(make(), "levels", [None]))
    assert sorted(calls) == sorted([FAST.uid, SLOW.uid] * levels)
    assert [(s.candidate.key, s.score, s.reasons) for s in again] == \
        [(s.candidate.key, s.score, s.reasons) for s in plain]


def test_stage1_reads_the_whole_step_like_the_launch():
    """Window medians meet the deadline, the whole step (every packet, bursts included) does
    not: stage 1 finds the environment infeasible with the reason the deploy refuses it with
    (qoeslots.launch_qoe), not N slots the launch then refuses."""
    from fluidvim.evaluator.qoeslots import NoQoECapacity, launch_qoe

    bursty = load(FAST, 2)
    for s in bursty.metrics["steps"]:           # each step's pooled p99: 3x its window median
        s["latency_pooled_ms"] = {q: v * 3 for q, v in s["latency_ms"].items()}
        s["loss_pooled"] = s["loss"]
    lowest = min(s["latency_ms"]["0.99"] for s in bursty.metrics["steps"])
    svc = dataclasses.replace(SVC, deadline_ms=lowest * 2)  # medians meet it, whole steps don't
    assert candidate_facts(svc, cands()[1], RESULTS).slots > 0
    results = {FAST.uid: [bursty, boot(FAST, 60, 4)]}
    f = candidate_facts(svc, cands()[1], results)
    assert not f.feasible and f.slots == 0
    with pytest.raises(NoQoECapacity) as e:
        launch_qoe(results[FAST.uid], svc.deadline_ms, svc.qos_quantile, svc.session_pps)
    assert str(e.value) in f.reasons
    assert "relax the service's deadline_ms or qos_quantile" in str(e.value)
    scores = CostBenefitAnalyzer().analyze(svc, cands(), {**RESULTS, **results})
    assert [(s.candidate.zone, s.feasible) for s in scores] == [("a", True), ("b", False)]
    assert str(e.value) in scores[1].reasons
