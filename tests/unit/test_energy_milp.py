# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/energy's MILP lower bound (bench/energy/milp.py) on fleets small enough to solve by hand
or by enumeration."""

import itertools

import pytest

pytest.importorskip("highspy", reason="HiGHS: pip install -c constraints.txt -e .[test]")

from bench.energy import milp  # noqa: E402
from bench.energy.fleet import Fleet  # noqa: E402
from bench.energy.policy import Host  # noqa: E402
from fluidvim.orchestrator.power import SpecpowerCurve  # noqa: E402


def linear(idle, peak):
    return [idle + (peak - idle) * i / 10 for i in range(11)]


def fleet(*specs):
    """specs: (model, threads, 11 points) per host."""
    hosts = tuple(Host(f"h{i}", model, threads, 2000, 4096)
                  for i, (model, threads, _) in enumerate(specs))
    curves = tuple(SpecpowerCurve(points, system_id=model) for model, _, points in specs)
    return Fleet("heterogeneous", hosts, curves)


# three hosts with straight-line curves: the optimum can be worked out by hand
#   A: 2 threads, 100 W idle, +50 W per busy thread
#   B: 4 threads,  50 W idle, +50 W per busy thread
#   C: 4 threads,  80 W idle, +10 W per busy thread
THREE = fleet(("A", 2, linear(100, 200)), ("B", 4, linear(50, 250)), ("C", 4, linear(80, 120)))


@pytest.mark.parametrize("instances,busy,watts,awake", [
    (0, 0.0, 0.0, 0),             # nothing to run: every host off
    (4, 2.0, 100.0, 1),           # C alone: 80 + 2 x 10 (B alone: 50 + 2 x 50 = 150)
    (4, 4.0, 120.0, 1),           # C alone: 80 + 4 x 10
    (6, 6.0, 270.0, 2),           # C + B: 130 W idle + 4 x 10 + 2 x 50 (C + A: 180 + 40 + 100)
    (6, 1.0, 140.0, 2),           # C + B, the busy thread on C: 130 + 10
    (10, 10.0, 570.0, 3),         # all three: 230 + 4 x 10 + 6 x 50
])
def test_three_hosts_hand_computed(instances, busy, watts, awake):
    r = milp.Bound(THREE).solve(instances, busy)
    assert r["optimal"]
    assert r["watts"] == pytest.approx(watts, abs=1e-6)
    assert r["awake"] == awake


class _StalledOnce:
    """The Highs object of a bound whose first solve is stopped by its time limit before any
    bound (as a process paused mid-solve is), delegating everything else."""

    def __init__(self, h):
        self._h, self.runs, self.limits = h, 0, []

    def run(self):
        self.runs += 1
        self.limits.append(self._h.getOptionValue("time_limit")[1])
        if self.runs == 1:
            self._h.setOptionValue("time_limit", 0.0)
            self._h.clearSolver()
            try:
                return self._h.run()
            finally:
                self._h.setOptionValue("time_limit", self.limits[0])
        return self._h.run()

    def __getattr__(self, name):
        return getattr(self._h, name)


def test_a_solve_stopped_before_any_bound_is_run_once_more_with_twice_the_limit():
    b = milp.Bound(THREE, time_limit_s=7.0)
    b.h = _StalledOnce(b.h)
    r = b.solve(6, 6.0)
    assert b.h.runs == 2 and b.h.limits == [7.0, 14.0]
    assert r["optimal"] and r["watts"] == pytest.approx(270.0, abs=1e-6)
    assert b.h.getOptionValue("time_limit")[1] == 7.0        # the limit is put back


def test_more_instances_than_threads_is_a_clear_error():
    with pytest.raises(ValueError, match="do not fit the fleet's 10 threads; lower --peak-load"):
        milp.Bound(THREE).solve(11, 5.0)


def test_a_curve_that_climbs_steeply_near_full_load_is_best_shared():
    """415 W for one host at 100 %; two hosts at 50 % draw 2 x 200 W: the optimum keeps two
    awake (a curve of a 2019 two-socket server, spec0127, on 10 threads)."""
    hot = fleet(*[("H", 10, [50, 119, 142, 165, 189, 200, 223, 252, 295, 346, 415])] * 2)
    r = milp.Bound(hot).solve(10, 10.0)
    assert r["optimal"] and r["awake"] == 2
    assert r["watts"] == pytest.approx(400.0)


def _best_by_enumeration(fl, instances, busy):
    """The least power over every integer split of instances and busy threads over the hosts,
    each host on its true (interpolated) curve; an off host has neither."""
    best = None
    caps = [h.cores for h in fl.hosts]
    for ns in itertools.product(*(range(c + 1) for c in caps)):
        if sum(ns) != instances:
            continue
        for bs in itertools.product(*(range(n + 1) for n in ns)):
            if sum(bs) != busy:
                continue
            w = sum(c.watts(b / h.cores) for h, c, n, b in zip(fl.hosts, fl.curves, ns, bs) if n)
            best = w if best is None else min(best, w)
    return best


CURVED = fleet(("P", 3, [60, 90, 100, 108, 115, 121, 126, 131, 135, 139, 142]),
               ("Q", 2, [30, 34, 39, 45, 52, 60, 69, 79, 90, 102, 115]),
               ("R", 4, [90, 100, 104, 107, 110, 112, 114, 116, 118, 120, 122]))


@pytest.mark.parametrize("instances,busy", [(1, 1), (3, 2), (5, 5), (6, 3), (9, 9), (7, 1)])
def test_bound_is_the_least_power_of_any_placement_on_the_true_curves(instances, busy):
    r = milp.Bound(CURVED).solve(instances, busy)
    assert r["optimal"]
    assert r["watts"] == pytest.approx(_best_by_enumeration(CURVED, instances, busy), abs=1e-6)


def test_identical_hosts_are_one_group_and_solve_alike():
    same = fleet(*[("S", 4, linear(40, 140))] * 6)
    b = milp.Bound(same)
    assert len(b.groups) == 1
    r = b.solve(10, 7.0)                                    # 3 hosts: 3 x 40 + 7 x 25
    assert r["awake"] == 3
    assert r["watts"] == pytest.approx(120 + 7 * 25)


def test_solve_trace_windows_take_the_minimum_demand():
    trace = [(0.0, [4], [2.0]), (30.0, [6], [6.0]), (60.0, [4], [4.0])]
    per_step = milp.solve_trace(THREE, trace, step_s=30.0, every=1)
    assert per_step["w"] == pytest.approx([100.0, 270.0, 120.0])
    windowed = milp.solve_trace(THREE, trace, step_s=30.0, every=3)
    # one solve for min(N) = 4, min(B) = 2 over the window: a lower bound for each step
    assert windowed["w"] == pytest.approx([100.0] * 3)
    assert windowed["kwh"] <= per_step["kwh"]
