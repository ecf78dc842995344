# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""FUSION's overhead model and the exact probe count."""

import itertools
import random

import pytest

from fluidvim.evaluator import overhead as oh


def test_fusion_table_break_even_1000_probes():
    # E1 = 1/10,000, R1 = 1 %, S1 = 1, I_A = 10 -> N1 = 1,000 probes
    assert oh.break_even_probes(r1=0.01, e1=1 / 10_000, i_a=10, s1=1) == pytest.approx(1000)
    assert oh.relative_overhead(n1=1000, e1=1 / 10_000, i_a=10, s1=1) == pytest.approx(0.01)


@pytest.mark.parametrize("e1,r1,s1,i_a,n1", [
    (1 / 10_000, 0.01, 1, 10, 1_000),
    (1 / 10_000, 0.01, 10, 10, 10_000),      # ten services share the results: 10x the probes
    (1 / 10_000, 0.01, 1, 100, 10_000),      # more instances amortise the probes
    (1 / 1_000, 0.01, 1, 10, 100),           # costlier probes: fewer fit in the budget
    (1 / 10_000, 0.001, 1, 10, 100),         # a stricter overhead target
])
def test_break_even_rows_round_trip(e1, r1, s1, i_a, n1):
    assert oh.break_even_probes(r1, e1, i_a, s1) == pytest.approx(n1)
    assert oh.relative_overhead(n1, e1, i_a, s1) == pytest.approx(r1)


def test_costs():
    r1 = oh.relative_overhead(1000, 1e-4, 10, 1)
    assert oh.stage1_cost(r1, rho1=250.0) == pytest.approx(2.5)   # 1 % of 250/h
    assert oh.stage2_cost() == 0.0


@pytest.mark.parametrize("call", [
    lambda: oh.relative_overhead(-1, 1e-4, 10),
    lambda: oh.relative_overhead(10, 0, 10),
    lambda: oh.relative_overhead(10, 1e-4, 0),
    lambda: oh.break_even_probes(0.01, 1e-4, 10, s1=0),
    lambda: oh.break_even_probes(float("inf"), 1e-4, 10),
    lambda: oh.stage1_cost(-0.1, 2),
])
def test_bad_arguments_are_named(call):
    with pytest.raises(ValueError, match=r"n1|e1|i_a|s1|r1|rho1"):
        call()


def test_dedup_example_40_types_in_30_zones():
    # 30 zones, each offering the same 40 environment types (same hardware/hypervisor/image
    # everywhere): 1,200 (zone, type) pairs, but only 40 globally unique types. Every type must be
    # probed once and every zone at least once: 30 of the 40 probes go one to each zone, the 10
    # left over go anywhere - 40 probes, not 1,200.
    types = [f"type{j:02d}" for j in range(40)]
    zones = {f"zone{i:02d}": set(types) for i in range(30)}
    assert sum(len(t) for t in zones.values()) == 1200
    plan = oh.probe_plan(zones)
    assert oh.probes_needed(zones) == len(plan) == 40
    assert {u for u, _ in plan} == set(types)                 # every type once
    assert {z for _, z in plan} == set(zones)                 # every zone at least once
    assert len({u for u, _ in plan}) == len(plan)             # no type twice


def test_dedup_example_realistic_subsets():
    # the same 40 types spread over 30 zones: each zone offers 8 of them (overlapping windows)
    types = [f"t{j}" for j in range(40)]
    zones = {f"z{i}": {types[(i + k) % 40] for k in range(8)} for i in range(30)}
    assert len(set().union(*zones.values())) == 37            # 3 types in no zone
    n = oh.probes_needed(zones)
    assert n == 37 == max(37, 30)


def test_more_zones_than_types():
    zones = {f"z{i}": {"only"} for i in range(30)}
    assert oh.probes_needed(zones) == 30                      # one per zone, same type
    assert oh.probes_needed({"a": {"x", "y", "z"}}) == 3      # one zone, three types


def test_max_is_not_always_exact():
    # z1 has t1, t2, t3; z2 and z3 have only t1. max(|V|, |Z|) = 3, but t2 and t3 can only be
    # probed in z1 and z2, z3 can only probe t1 -> 4 probes.
    zones = {"z1": {"t1", "t2", "t3"}, "z2": {"t1"}, "z3": {"t1"}}
    assert oh.probes_needed(zones) == 4
    assert sorted(oh.probe_plan(zones)) == sorted(
        [("t2", "z1"), ("t3", "z1"), ("t1", "z2"), ("t1", "z3")])


def test_empty_zones_are_ignored():
    assert oh.probes_needed({}) == 0
    assert oh.probes_needed({"empty": set(), "a": {"x"}}) == 1


def _brute_force_min_cover(zones):
    edges = sorted((u, z) for z, us in zones.items() for u in us)
    types = {u for u, _ in edges}
    zs = {z for z, us in zones.items() if us}
    for k in range(1, len(edges) + 1):
        for combo in itertools.combinations(edges, k):
            if {u for u, _ in combo} == types and {z for _, z in combo} == zs:
                return k
    return 0


def test_matches_brute_force_on_random_small_instances():
    rng = random.Random(7)
    for _ in range(150):
        nz, nt = rng.randint(1, 4), rng.randint(1, 4)
        zones = {f"z{i}": {f"t{j}" for j in range(nt) if rng.random() < 0.5} for i in range(nz)}
        plan = oh.probe_plan(zones)
        assert len(plan) == _brute_force_min_cover(zones), zones
        assert max(len(set().union(*zones.values())),
                   sum(1 for v in zones.values() if v)) <= len(plan)


def test_large_instance_is_fast_enough_to_run_per_placement():
    # 1,000 zones x 200 types, every zone offering 5: exercises the matching without recursion limits
    rng = random.Random(1)
    zones = {f"z{i}": {f"t{rng.randrange(200)}" for _ in range(5)} for i in range(1000)}
    n = oh.probes_needed(zones)
    assert 1000 <= n <= 1200
