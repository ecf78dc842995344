# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""power.rebalance_moves: single VNFs from a dear host to a cheaper one in service, on small
fleets whose answer is known from their curves."""

import pytest

from fluidvim.orchestrator import power


def host(name, model, n, capacity=10.0, prefix=None):
    return power.FleetHost(name, model, capacity=capacity,
                           load={f"{prefix or name}{k}": 1.0 for k in range(n)})


# 10 W a VNF (100 W idle) and 3 W a VNF (50 W idle): a move from the first saves 7 W
DEAR = power.LinearModel(100.0, 200.0)
CHEAP = power.LinearModel(50.0, 80.0)
# cheap up to half load, then 55 W a VNF: its efficient utilisation is 0.5
KNEE = power.SpecpowerCurve([50, 53, 56, 59, 62, 65, 120, 175, 230, 285, 340])
STEEP = power.LinearModel(100.0, 1100.0)             # 100 W a VNF


def test_a_vnf_moves_from_the_dear_host_to_the_cheap_one():
    a, b = host("a", DEAR, 4), host("b", CHEAP, 2)
    moves = power.rebalance_moves([a, b], max_moves=1)
    assert [(m.vnf, m.src, m.dst) for m in moves] == [("a3", "a", "b")]
    assert (len(a.load), len(b.load)) == (4, 2)          # the hosts are left as they were


def test_moves_stop_at_the_bound_and_when_the_source_is_empty():
    a, b = host("a", DEAR, 4), host("b", CHEAP, 2)
    assert len(power.rebalance_moves([a, b], max_moves=2)) == 2
    moves = power.rebalance_moves([a, b], max_moves=50)
    assert sorted(m.vnf for m in moves) == ["a0", "a1", "a2", "a3"]   # then only b -> a: -7 W
    assert all((m.src, m.dst) == ("a", "b") for m in moves)


def test_hysteresis_nothing_moves_for_less_than_min_gain_or_back():
    a, b = host("a", DEAR, 4), host("b", CHEAP, 2)
    assert power.rebalance_moves([a, b], max_moves=5, min_gain_w=7.5) == []
    # equal curves: moving gains nothing
    assert power.rebalance_moves([host("a", CHEAP, 4), host("b", CHEAP, 2)], max_moves=5,
                                 min_gain_w=0.0) == []
    # applied, the moves are not undone by the next round
    for m in power.rebalance_moves([a, b], max_moves=50):
        b.add(m.vnf, a.remove(m.vnf))
    assert power.rebalance_moves([a, b], max_moves=50, min_gain_w=0.0) == []


def test_the_receiver_stops_at_its_fill_limit():
    a, b = host("a", STEEP, 8), host("b", KNEE, 2)
    # without a fill limit b takes VNFs up to its last thread (55 W each beats 100 W)
    assert len(power.rebalance_moves([a, b], max_moves=50)) == 8
    # against a host to wake at 20 W a VNF, b stops at its efficient 5 VNFs: 3 moves
    fill = power.Fill(1.0, 20.0)
    assert power.fill_limit(KNEE, 10.0, 20.0) == 5
    moves = power.rebalance_moves([a, b], max_moves=50, fill=fill)
    assert [(m.src, m.dst) for m in moves] == [("a", "b")] * 3


def test_the_best_pair_first_and_never_onto_a_sleeping_host():
    a, b = host("a", STEEP, 3), host("b", DEAR, 3)
    c = host("c", CHEAP, 1)
    off = power.FleetHost("off", CHEAP, capacity=10.0, asleep=True)
    m = power.rebalance_moves([b, a, c, off], max_moves=1)
    assert [(x.src, x.dst) for x in m] == [("a", "c")]    # 100 - 3 W beats 10 - 3 W


def test_a_move_must_pay_for_itself_over_the_horizon():
    a, b = host("a", DEAR, 4), host("b", CHEAP, 2)
    assert power.rebalance_moves([a, b], pays=(10.0, 70.0)) == []   # 7 W x 10 s
    assert len(power.rebalance_moves([a, b], pays=(10.0, 69.0))) == 1


def test_held_vnfs_stay_and_pick_chooses_which_goes():
    a, b = host("a", DEAR, 3), host("b", CHEAP, 2)
    m = power.rebalance_moves([a, b], max_moves=5, held={"a0", "a2"})
    assert [x.vnf for x in m] == ["a1"]
    m = power.rebalance_moves([a, b], max_moves=1, pick=lambda h, movable: movable[0])
    assert [x.vnf for x in m] == ["a0"]


@pytest.mark.parametrize("kw, field", [({"max_moves": -1}, "max_moves"),
                                       ({"min_gain_w": -1.0}, "min_gain_w"),
                                       ({"vnf": 0.0}, "vnf")])
def test_bad_input_names_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        power.rebalance_moves([host("a", DEAR, 1)], **kw)


def test_no_vnf_goes_onto_a_host_dearer_per_vnf_than_its_source():
    """Marginal watts alone would move a VNF from a host on the steep top of its curve (55 W)
    to an idle host of the same model (3 W); but that host then runs one VNF on its idle watts,
    53 W for it, where the source runs 28.75 W a VNF: scale-in would empty it again. A host
    with one VNF already is cheaper per VNF after the move (28 W): that one receives."""
    a, b = host("a", KNEE, 8), host("b", KNEE, 0)
    assert power.rebalance_moves([a, b], max_moves=5) == []
    b = host("b", KNEE, 1)
    moves = power.rebalance_moves([a, b], max_moves=1)
    assert [(m.src, m.dst) for m in moves] == [("a", "b")]


def test_many_moves_are_those_of_one_move_at_a_time():
    """rebalance_moves keeps each host's figures from one move to the next, dropping those of
    a move's two hosts: the moves are those of asking for one move at a time on the fleet the
    previous moves left (seeded mixed fleets, caps from a fill limit, held VNFs)."""
    import random

    from fluidvim.orchestrator.power import rebalance

    lib = power.library()
    models = [lib.curve(s) for s in sorted(lib.ids())[:12]]
    rng = random.Random(5)
    for trial in range(15):
        fleet = [host(f"h{i:02d}", rng.choice(models), rng.randint(0, 9), prefix=f"h{i:02d}-")
                 for i in range(rng.randint(2, 25))]
        held = {h.name + "-0" for h in fleet if rng.random() < 0.3}
        fill = power.Fill(1.0, None) if trial % 2 else None
        got = rebalance.rebalance_moves(fleet, max_moves=8, min_gain_w=0.1, held=held, fill=fill)
        caps = rebalance._caps(fleet, fill)
        want, held2 = [], set(held)
        saved = {h.name: dict(h.load) for h in fleet}
        while len(want) < 8:
            m = rebalance._best_move(fleet, 1.0, caps, held2, None)     # no memo: all anew
            if m is None or m[0] <= 1e-9 or m[0] < 0.1 - 1e-9:
                break
            gain, src, dst, v = m
            dst.add(v, src.remove(v))
            held2.add(v)
            want.append(power.Migration(v, 1.0, src.name, dst.name))
        for h in fleet:
            h.load = saved[h.name]
        assert got == want, trial
        assert len(got) > 0 or trial % 5


def test_priced_by_busy_threads_a_busy_vnf_leaves_a_steep_top_for_idle_room():
    # a: 8 VNFs all busy, in KNEE's 55-W tenth, first in the resolver's order; b: the same
    # server, 5 VNFs that idle
    a, b = host("a", KNEE, 8), host("b", KNEE, 5)
    busy = power.rebalance.BusyLoad({"a": 8.0, "b": 0.0}, {"a": 1.0, "b": 2.0})
    # priced by VNFs as busy threads b's sixth VNF climbs the same 55 W: no move
    assert power.rebalance_moves([a, b], max_moves=5) == []
    # by busy threads a's busy thread goes to b's idle slots, in its 3-W tenth: 52 W saved
    moves = power.rebalance_moves([a, b], max_moves=1, busy=busy)
    assert [(m.src, m.dst) for m in moves] == [("a", "b")]
    # one a call by default; the busy threads follow the moves: once a is on its flat part
    # (5 busy), no more
    assert len(power.rebalance_moves([a, b], max_moves=50, busy=busy)) == 1
    busy = power.rebalance.BusyLoad({"a": 8.0, "b": 0.0}, {"a": 1.0, "b": 2.0}, moves=50)
    moves = power.rebalance_moves([a, b], max_moves=50, busy=busy)
    assert [(m.src, m.dst) for m in moves] == [("a", "b")] * 3
    assert (len(a.load), len(b.load)) == (8, 5)          # the hosts are left as they were


def test_priced_by_busy_threads_the_busy_lands_where_the_resolver_sends_it():
    # c ranks before b and has idle slots: a's busy thread lands on c's steep top, not on b
    a, b = host("a", KNEE, 8), host("b", KNEE, 5)
    c = host("c", KNEE, 9)
    busy = power.rebalance.BusyLoad({"a": 8.0, "b": 0.0, "c": 7.5}, {"a": 1, "c": 2, "b": 3})
    assert power.rebalance_moves([a, b, c], max_moves=5, busy=busy) == []
    # a source with idle slots saves nothing: they take its sessions' place
    busy = power.rebalance.BusyLoad({"a": 6.0, "b": 0.0}, {"a": 1, "b": 2})
    assert power.rebalance_moves([a, b], max_moves=5, busy=busy) == []


def test_priced_by_busy_threads_no_move_between_hosts_the_resolver_ranks_alike():
    # one server model: the resolver's order among the hosts is its fullest instance's, not a
    # host's curve, so where a's busy thread would land is not known - no busy-priced move,
    # the call is priced by VNFs (b's sixth VNF climbs the same 55 W: none)
    a, b = host("a", KNEE, 8), host("b", KNEE, 5)
    busy = power.rebalance.BusyLoad({"a": 8.0, "b": 0.0}, {"a": 2.5, "b": 2.5})
    assert power.rebalance_moves([a, b], max_moves=5, busy=busy) == []
    # ... as the dear host's VNFs move to the cheap one without busy
    a, b = host("a", DEAR, 4), host("b", CHEAP, 2)
    busy = power.rebalance.BusyLoad({"a": 4.0, "b": 2.0}, {"a": 1.0, "b": 1.0})
    assert power.rebalance_moves([a, b], max_moves=2, busy=busy) == \
        power.rebalance_moves([a, b], max_moves=2)
