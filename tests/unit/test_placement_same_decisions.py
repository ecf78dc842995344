# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The placement engine's faster stage 0 and stage 2 (issue 21: decision <= 20 ms p50 at 1,000
hosts) decide as the per-candidate code they replaced: that code is kept here as the reference
and run side by side with the engine's on seeded candidates and on a seeded bench/energy fleet."""

import math
import random

import pytest

from fluidvim.evaluator import analyzers
from fluidvim.evaluator.analyzers import (
    INFEASIBLE_SCORE,
    CostBenefitAnalyzer,
    Stage2Runner,
    candidate_facts,
)
from fluidvim.evaluator.model import Candidate, EnvironmentType, ProbeResult, Score, ServiceProfile
from fluidvim.orchestrator.placement import _location, requirement_problem


def reference_cost_benefit(an, service, candidates, results):
    """CostBenefitAnalyzer.analyze as it was before 2026-11-28 20:00 (per candidate)."""
    memo: dict = {}
    facts = [candidate_facts(service, c, results, an.max_loss, memo) for c in candidates]
    v = [f.variables for f in facts]
    norm = analyzers._norm
    slots_n = norm([x["slots"] for x in v])
    price_n = norm([x["price_per_slot"] for x in v])
    power_n = norm([x["power_per_slot_w"] if x["power_w"] else 0.0 for x in v])
    delay_n = norm([x["queuing_delay_s"] for x in v])
    boot_n = norm([min(x["boot_ms"], x["warm_boot_ms"]) for x in v])
    w = an.weights
    out = []
    for i, (c, f) in enumerate(zip(candidates, facts)):
        terms = {"slots": w["slots"] * slots_n[i], "price": -w["price"] * price_n[i],
                 "power": -w["power"] * power_n[i], "delay": -w["delay"] * delay_n[i],
                 "boot": -w["boot"] * boot_n[i]}
        score = sum(terms.values()) if f.feasible else INFEASIBLE_SCORE
        x = f.variables
        reasons = list(f.reasons)
        reasons.append(
            f"price/slot {x['price_per_slot']:.4g}/h, power/slot {x['power_per_slot_w']:.3g} W, "
            f"queuing delay {x['queuing_delay_s']:.3g} s; score {score:.3f} = " +
            " ".join(f"{k}{t:+.3f}" for k, t in terms.items()))
        out.append(Score(candidate=c, score=score, slots_estimate=f.slots, reasons=reasons,
                         feasible=f.feasible))
    return analyzers._rank(out)


class ReferenceCostBenefit(CostBenefitAnalyzer):
    def analyze(self, service, candidates, results):
        return reference_cost_benefit(self, service, candidates, results)


def _load(env, scale, ok=True):
    steps = [{"offered_pps": p * scale, "loss": 0.0,
              "latency_ms": {"0.5": p50, "0.9": p90, "0.99": p99, "0.999": p99 * 1.5}}
             for p, p50, p90, p99 in ((1000, 0.5, 0.8, 1.0), (2000, 0.6, 1.0, 2.0),
                                      (4000, 1.0, 3.0, 8.0), (8000, 5.0, 30.0, 80.0))]
    return ProbeResult(env.uid, "load", ok, {"session_pps": 100, "steps": steps},
                       error=None if ok else "probe failed")


def _seeded_candidates(seed: int, n: int = 400):
    rnd = random.Random(seed)
    envs = [EnvironmentType(launcher="qemu", accel=a, machine="microvm", cpu_model=f"m{i}")
            for i, a in enumerate(("kvm", "kvm", "tcg", "kvm", "kvm"))]
    results = {
        envs[0].uid: [_load(envs[0], 2), ProbeResult(envs[0].uid, "boot", True, {
            "cold_ms": {"p50": 60}, "warm": True, "warm_ms": {"p50": 4}}, zone="z")],
        envs[1].uid: [_load(envs[1], 1), ProbeResult(envs[1].uid, "boot", True, {
            "cold_ms": {"p50": 600}, "warm": False}, zone="z")],
        envs[2].uid: [_load(envs[2], 0.001)],                      # no slot at the deadline
        envs[3].uid: [_load(envs[3], 1, ok=False)],                # load probe failed
        # envs[4]: no result at all
    }
    cands = []
    for i in range(n):
        env = rnd.choice(envs)
        power = rnd.choice([None, 0.0, round(rnd.uniform(0.5, 40.0), 3), rnd.uniform(0.5, 40.0)])
        cands.append(Candidate(zone=f"z{i % 3}", env=env, host=f"h{i:04d}",
                               price_per_hour=rnd.choice([0.0, 0.5, rnd.uniform(0.1, 2.0)]),
                               power_w_marginal=power, free_slots=rnd.choice([0, 0, 3, 10]),
                               queuing_delay_s=rnd.choice([None, 0.06, rnd.uniform(0.01, 9.0)]),
                               labels={"cpu_util": rnd.random()}))
    return cands, results


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("max_delay", [None, 2.0])
def test_cost_benefit_ranks_as_the_per_candidate_code(seed, max_delay):
    cands, results = _seeded_candidates(seed)
    svc = ServiceProfile(name="fw", click_config="x", deadline_ms=4.0, qos_quantile=0.99,
                         session_pps=100, max_queuing_delay_s=max_delay)
    an = CostBenefitAnalyzer(weights={"power": 0.7})
    new = an.analyze(svc, cands, results)
    old = reference_cost_benefit(an, svc, cands, results)
    assert [s.candidate.key for s in new] == [s.candidate.key for s in old]
    for a, b in zip(new, old):
        # the same floats (not approximately): the decision compares them
        assert (a.score, a.feasible, a.slots_estimate, a.qscores) == \
            (b.score, b.feasible, b.slots_estimate, b.qscores)
        assert a.reasons == b.reasons
    assert sum(not s.feasible for s in new) > 0 and sum(s.feasible for s in new) > 0


def reference_candidates(self, svc, extras, location):  # noqa: C901 - the old code as it was
    """PlacementEngine.candidates as it was before 2026-11-28 20:00."""
    kept, filtered, zones_used = [], [], {}
    reqs = dict(svc.requirements or {})
    locs = reqs.get("location")
    if location:
        locs = [location]
    if isinstance(locs, str):
        locs = [locs]
    max_price = extras.get("max_price_per_hour")
    free = self.registry.aggregate(svc.name, "host")
    away = self.host_power.unavailable() if self.host_power is not None else {}
    snap = self.queuing.snapshot()
    for zname, zone in sorted(self.zones.items()):
        zl = self.zone_labels.get(zname, {})
        try:
            hosts = zone.hosts()
        except Exception as e:  # noqa: BLE001
            filtered.append({"candidate": zname, "reason": f"zone unavailable: {e}"})
            continue
        qd = self.queuing.delay(zone, svc.name, snap)
        if away:
            listed = {h.name for h in hosts}
            for key in sorted(k for k in away if k.startswith(f"{zname}/")
                              and k[len(zname) + 1:] not in listed):
                filtered.append({"candidate": key, "reason": away[key]})
        zone_price = zl.get("price_per_hour", 0.0)
        for h in hosts:
            key = f"{zname}/{h.name}"
            price = float(h.labels.get("price_per_hour", zone_price))
            why = away.get(key) if away else None
            if why is None and reqs:
                why = requirement_problem(reqs, h, zone, zl)
            loc = _location(h, zone, zl)
            if why is None and locs and loc not in locs:
                why = f"location {loc!r} not in {sorted(locs)}"
            if why is None and max_price is not None and price > float(max_price):
                why = f"price {price}/h above the service's maximum {max_price}/h"
            if why is None and qd.seconds is None and not free.get(key):
                why = f"no free slot and {qd.basis}"
            if why is not None:
                filtered.append({"candidate": key, "reason": why})
                continue
            power = self.power(zname, h) if self.power else None
            labels = {**zl, **h.labels} if h.labels else dict(zl)
            labels["cpu_util"] = h.cpu_util
            labels["slots_total"] = h.slots_total
            labels["location"] = loc
            kept.append(Candidate(zone=zname, env=h.env, host=h.name, price_per_hour=price,
                                  power_w_marginal=power, free_slots=free.get(key, 0),
                                  queuing_delay_s=qd.seconds, labels=labels))
            zones_used[zname] = zone
    return kept, filtered, zones_used


@pytest.fixture(scope="module")
def energy_services():
    from bench.energy import workload
    return workload.load_services(None)


def _placements(energy_services, fl, reference: bool, n: int):
    """``n`` placements on bench/energy's fluidvim policy over fleet ``fl`` (two thirds of it in
    service, each host taking 3 VNFs so that the hosts fill and change), with today's stage 0
    and stage 2 or the reference code: per placement the host, score, rule and band."""
    import types

    from bench.energy import policies, sim
    from bench.energy.policy import Shape

    services, measurement = energy_services
    pol = policies.make("fluidvim-consolidate", measurement=measurement, services=services,
                        cfg=sim.SimConfig(seed=1), seed=1)
    try:
        pol.start(list(fl.hosts))
        eng = pol.orch.placement
        if reference:
            eng.candidates = types.MethodType(reference_candidates, eng)
            eng.stage2 = Stage2Runner(ReferenceCostBenefit(eng.stage2.analyzer.weights,
                                                           eng.stage2.analyzer.max_loss))
        for h in sorted(fl.hosts, key=lambda h: pol._unit_w[h.id])[len(fl.hosts) * 2 // 3:]:
            pol.set_eligible(h.id, False)
            pol.set_power(h.id, False)
        pol.zone.set_fill({h.id: 3 for h in fl.hosts})
        shapes = [Shape(service=s.name, vcpus=s.vcpus, cpu_mhz=fl.hosts[0].mhz,
                        memory_mb=s.memory_mb, slots=s.slots) for s in services]
        got = []
        for i in range(n):
            service = shapes[i % len(shapes)].service
            p = eng.place(service)
            steps = {s.name: s.record for s in eng.store.decision(p.decision_id).steps}
            got.append((p.host, p.score, p.rule, steps["filter"]["kept"],
                        steps["filter"]["power_w_marginal"], steps["analyze"]["scores"],
                        steps["decide"]["band"]))
            if p.host is not None:
                pol._add(f"i{i}", service, p.host)
        return got
    finally:
        pol.close()


@pytest.mark.parametrize("kind", ["heterogeneous", "homogeneous"])
def test_the_engine_places_as_the_per_candidate_code_on_a_seeded_fleet(energy_services, kind):
    """The same seeded bench/energy fleet and instances, one engine with today's stage 0 and
    stage 2 and one with the reference code above: the same host every time, with the same
    score, rule, candidates, marginal watts, recorded ranking and band."""
    from bench.energy import fleet as fleetmod

    fl = fleetmod.make_fleet(kind, 60, 7, model=None)
    new = _placements(energy_services, fl, False, 90)
    old = _placements(energy_services, fl, True, 90)
    assert new == old
    hosts = [g[0] for g in new]
    assert all(hosts) and len(set(hosts)) >= 20          # the hosts filled and changed


def test_step_0_filters_and_keeps_as_the_per_candidate_code(db_url):
    """Requirements, locations, a price cap and a zone that cannot launch on a synthetic
    fleet: the same candidates (every field) and the same filtered hosts and reasons, twice
    (the second call reuses the unchanged hosts' Candidate objects)."""
    import dataclasses
    import types

    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.deploy import profile_of
    from fluidvim.orchestrator.service import Orchestrator
    from fluidvim.orchestrator.zones.synthetic import make_fleet, seed_cache

    zones, types_, labels = make_fleet(30, 4, n_env_types=3)
    conf = orchconf.make_conf(connection=db_url, local_zone=False)
    orch = Orchestrator(conf, zones=zones, zone_labels=labels,
                        power=lambda z, h: 3.0 + 10.0 * float(h.cpu_util or 0.0))
    try:
        seed_cache(orch.placement.stage1.cache, zones, types_)
        eng = orch.placement
        ref_c = types.MethodType(reference_candidates, eng)
        orch.register_service("fw", "FromDevice(0) -> ToDevice(1);",
                              requirements={"accel": "kvm"})
        svc_row = eng.store.service("fw")
        svc = profile_of(svc_row)
        for extras, location in (({}, None), ({"max_price_per_hour": 0.5}, "loc1"),
                                 ({}, "loc2"), ({}, None)):
            for _ in range(2):
                new = eng.candidates(svc, extras, location)
                old = ref_c(svc, extras, location)
                assert [dataclasses.asdict(c) for c in new[0]] == \
                    [dataclasses.asdict(c) for c in old[0]]
                assert [c.key for c in new[0]] == [c.key for c in old[0]]
                assert new[1] == old[1] and new[2].keys() == old[2].keys()
        assert new[0] and old[1]
    finally:
        orch.close()


def test_a_lazy_reason_is_the_text_and_can_be_set():
    cands, results = _seeded_candidates(5, 20)
    svc = ServiceProfile(name="fw", click_config="x", deadline_ms=4.0, qos_quantile=0.99,
                         session_pps=100)
    s = CostBenefitAnalyzer().analyze(svc, cands, results)[0]
    assert s.reasons[-1].startswith("price/slot") and "score" in s.reasons[-1]
    s.reasons = ["replaced"]
    assert s.reasons == ["replaced"]
    assert math.isfinite(s.score)


def test_step_0_asks_the_power_model_again_only_for_hosts_that_changed(db_url):
    """A power model with ``unchanged`` (HostMarginalPower's) is not asked again for a host
    whose inputs (cpu_util, power_system_id, labels...) are as at the last placement; a host
    whose cpu_util or power_system_id changed is, and the candidates are the reference code's.
    A plain callable is asked for every host every time."""
    import dataclasses
    import types

    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.deploy import profile_of
    from fluidvim.orchestrator.service import Orchestrator
    from fluidvim.orchestrator.zones.synthetic import make_fleet, seed_cache

    class Counting:
        def __init__(self, pure):
            self.asked, self.seen = [], set()
            if pure:
                self.unchanged = lambda z, h: (z, h.name) in self.seen

        def __call__(self, z, h):
            self.asked.append(h.name)
            self.seen.add((z, h.name))
            return 3.0 + 10.0 * float(h.cpu_util or 0.0) + (h.power_system_id == "x")

    for pure in (True, False):
        zones, types_, labels = make_fleet(6, 1, n_env_types=1)
        power = Counting(pure)
        conf = orchconf.make_conf(connection=db_url, local_zone=False)
        orch = Orchestrator(conf, zones=zones, zone_labels=labels, power=power)
        try:
            seed_cache(orch.placement.stage1.cache, zones, types_)
            eng = orch.placement
            ref_c = types.MethodType(reference_candidates, eng)
            orch.register_service("fw", "FromDevice(0) -> ToDevice(1);")
            svc = profile_of(eng.store.service("fw"))
            hosts = [h for z in zones for h in z.hosts()]
            eng.candidates(svc, {}, None)
            assert sorted(power.asked) == sorted(h.name for h in hosts)
            hosts[0].cpu_util = 0.5
            hosts[1].power_system_id = "x"
            power.asked.clear()
            new = eng.candidates(svc, {}, None)
            if pure:
                assert sorted(power.asked) == sorted([hosts[0].name, hosts[1].name])
            else:
                assert sorted(power.asked) == sorted(h.name for h in hosts)
            power.asked.clear()
            old = ref_c(svc, {}, None)
            assert [dataclasses.asdict(c) for c in new[0]] == \
                [dataclasses.asdict(c) for c in old[0]]
            assert {c.host: c.power_w_marginal for c in new[0]}[hosts[1].name] == 4.0 + \
                10.0 * float(hosts[1].cpu_util or 0.0)
        finally:
            orch.close()
