# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/energy/gap.py: the least watts of a policy's own hosts and VNFs (``own_routing``)."""

import pytest

pytest.importorskip("highspy")

from bench.energy import gap  # noqa: E402


def _watts(points, threads, busy):
    x = min(1.0, busy / threads) * 10.0
    i = min(int(x), 9)
    return points[i] + (points[i + 1] - points[i]) * (x - i)


def _brute(points, threads, on, vnfs, busy):
    """The least watts over every split of ``busy`` between two hosts, in hundredths."""
    a, b = on
    best = float("inf")
    for k in range(int(round(busy * 100)) + 1):
        x = k / 100.0
        y = busy - x
        if x <= vnfs[a] + 1e-9 and y <= vnfs[b] + 1e-9:
            best = min(best, _watts(points[a], threads[a], x) + _watts(points[b], threads[b], y))
    return best


def test_own_routing_matches_the_best_split():
    # a host steep at its top and one with a steep first tenth, both awake
    steep_top = (50, 60, 70, 80, 90, 100, 110, 120, 200, 300, 400)
    steep_start = (40, 120, 130, 140, 150, 160, 170, 180, 190, 200, 210)
    points, threads = [steep_top, steep_start], [10, 10]
    for vnfs, busy in (((10, 10), 12.0), ((10, 4), 11.0), ((6, 10), 3.0), ((10, 10), 0.0)):
        got = gap.own_routing(points, threads, [0, 1], vnfs, busy)
        assert got == pytest.approx(_brute(points, threads, [0, 1], vnfs, busy), rel=1e-6)


def test_own_routing_keeps_every_host_awake():
    # no busy thread: both hosts still draw their idle watts
    points = [(50,) + (100,) * 10, (40,) + (90,) * 10]
    assert gap.own_routing(points, [8, 8], [0, 1], (4, 4), 0.0) == pytest.approx(90.0)


def test_hosts_at_lists_the_policys_hosts_against_the_bounds():
    row = {"t": 22 * 3600.0, "w": 1570.0, "w_bound": 1487.0, "w_own": 1495.0, "inst": 9,
           "inst_ideal": 8, "on": [0, 2], "vnfs": [4, 0, 5], "drain_vnfs": [1, 0, 0],
           "per_model": {"old": (0, 0), "new": (1, 8)},
           "per_model_own": {"old": (1, 4), "new": (1, 5)}}
    far = dict(row, t=3 * 3600.0, w=1.0)
    res = {"rows": [far, row], "fleet": [("h0", "old"), ("h1", "new"), ("h2", "new")]}
    lines = gap.hosts_at(res, [22]).splitlines()
    assert lines[0] == ("22.00 h: policy 1570 W, 9 VNFs (ideal 8): h0 old 4 (1 draining) "
                        "h2 new 5")
    assert lines[1].split() == ["bound", "1487", "W:", "new", "8"]
    assert lines[2].split() == ["bound,", "policy's", "VNFs", "1495", "W:", "new", "5",
                                "old", "4"]
