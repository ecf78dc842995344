# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The resolver's session routing ([orchestrator] session_route): the host with the fewest dynamic
watts per thread (efficient) or whose instances report the fewest watts per slot (watts) first,
the fullest instance there first; or the most free slots (free)."""

import pytest

from fluidvim.common.zonetypes import HostInfo
from fluidvim.orchestrator.power import HostMarginalPower
from fluidvim.orchestrator.resolver import Resolver, host_watts, slot_order
from fluidvim.orchestrator.slots import SlotRegistry, SlotReport


def rep(inst, host, w=None, zone="z", region="r"):
    return SlotReport(zone=zone, host=host, instance=inst, service="svc", slots=0, delay_s=0.1,
                      region=region, watts_per_slot=w)


def test_the_host_with_the_fewest_watts_per_slot_first_the_fullest_instance_there_first():
    entries = [(rep("a1", "old", 0.05), 10), (rep("b1", "new", 0.02), 30),
               (rep("b2", "new", 0.03), 4), (rep("c1", "mid", 0.04), 50)]
    order = [r.instance for r, _ in slot_order(entries, "watts")]
    # host "new" (least 0.02) first, and there b2 (4 free) before b1 (30 free)
    assert order == ["b2", "b1", "c1", "a1"]


def test_a_busier_instance_does_not_send_sessions_to_the_emptiest_one_of_its_host():
    # the busy VNF's attributed watts per slot is higher; per host the least figure counts
    assert host_watts([(rep("x", "h", 0.9), 1), (rep("y", "h", 0.1), 99)]) == {("z", "h"): 0.1}
    order = [r.instance for r, _ in slot_order([(rep("x", "h", 0.9), 1),
                                                (rep("y", "h", 0.1), 99)], "watts")]
    assert order == ["x", "y"]


def test_hosts_without_a_figure_come_after_in_the_old_order_and_full_ones_not_at_all():
    entries = [(rep("u1", "u", None), 5), (rep("u2", "u2", None), 9), (rep("k", "k", 3.0), 1),
               (rep("full", "k", 0.1), 0)]
    assert [r.instance for r, _ in slot_order(entries, "watts")] == ["k", "u2", "u1"]


def test_free_route_is_the_most_free_first_and_location_comes_before_watts():
    entries = [(rep("far", "h1", 0.01, zone="z2", region="r2"), 3),
               (rep("near", "h2", 5.0, zone="z1"), 2), (rep("near2", "h3", 6.0, zone="z1"), 8)]
    assert [r.instance for r, _ in slot_order(entries, "watts", "z1")] == \
        ["near", "near2", "far"]
    assert [r.instance for r, _ in slot_order(entries, "free", "z1")] == \
        ["near2", "near", "far"]
    with pytest.raises(ValueError, match="session_route"):
        slot_order(entries, "cheapest")


def test_efficient_ranks_hosts_by_dynamic_watts_per_thread_and_unknown_hosts_last():
    entries = [(rep("a", "old"), 10), (rep("b", "new"), 30), (rep("c", "new"), 4),
               (rep("d", "unknown"), 50), (rep("e", "unknown2"), 60)]
    per_thread = {("z", "old"): 3.0, ("z", "new"): 1.5}
    order = [r.instance for r, _ in slot_order(entries, "efficient", per_thread=per_thread)]
    assert order == ["c", "b", "a", "e", "d"]
    # no figure at all: the most free first, as before the option
    assert [r.instance for r, _ in slot_order(entries, "efficient")] == \
        ["e", "d", "b", "a", "c"]


def test_the_placement_power_model_records_each_hosts_dynamic_watts_per_thread():
    pts = [100.0 + 10.0 * i for i in range(11)]          # 100 W idle, 200 W at full
    host = HostInfo(name="n1", env="vm", labels={"power_points": pts, "cpus": 8})
    pw = HostMarginalPower(None)
    assert pw("z", host) is not None
    assert pw.per_thread == {("z", "n1"): 100.0 / 8}


def test_resolver_free_slot_follows_the_route():
    reg = SlotRegistry(ttl=3600, reservation_ttl=3600)
    for inst, host, free, w in (("a", "dear", 20, 0.08), ("b", "cheap", 3, 0.02),
                                ("c", "cheap", 9, 0.03)):
        reg.apply_message({"zone": "z", "host": host, "instance": inst, "service": "svc",
                           "region": "r", "at": reg.clock() - 1.0, "s": free.bit_length(),
                           "m": 1, "q": 2, "exact": free, "watts_per_slot": w})
    by_watts = Resolver(None, reg, {}, None, route="watts")
    by_free = Resolver(None, reg, {}, None, route="free")
    efficient = Resolver(None, reg, {}, None, per_thread={("z", "dear"): 1.0, ("z", "cheap"): 2.0})
    with reg.decision():
        assert by_watts.free_slot("svc", None)[1].instance == "b"
        assert by_free.free_slot("svc", None)[1].instance == "a"
        assert efficient.free_slot("svc", None)[1].instance == "a"   # the power model's figure
        efficient.per_thread[("z", "dear")] = 3.0
        assert efficient.free_slot("svc", None)[1].instance == "b"
    with pytest.raises(ValueError, match="session_route"):
        Resolver(None, reg, {}, None, route="x")
