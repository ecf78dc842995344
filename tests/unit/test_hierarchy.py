# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Hierarchical placement (FUSION §2.1): topologies from topohub, the parent's pure decision
(:func:`choose_zones`) and the placer over the flat engine, in-process on synthetic zones laid on
Abilene (the evaluator's real runners over a seeded probe cache, as in test_orchestrator_placement).
"""

import dataclasses
import math

import pytest

from fluidvim.orchestrator import conf as orchconf, topology
from fluidvim.orchestrator.exception import InvalidRequest, Refused
from fluidvim.orchestrator.hierarchy import (
    NoZone,
    Weights,
    ZoneSummary,
    choose_zones,
    compress,
    register_opts,
    zone_latencies,
    zone_problem,
)
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.slots import SlotReport
from fluidvim.orchestrator.zones.synthetic import make_fleet, seed_cache

FW = "FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);"


# -- topology --

def test_abilene_from_topohub_offline_and_shortest_paths():
    t = topology.load("sndlib/abilene")
    assert len(t.nodes) == 12 and len(t.links) == 15
    # New York - Washington is one link: its length in km over the speed of light in fibre
    km = next(k for a, b, k in t.links if {a, b} == {"NYCMng", "WASHng"})
    assert t.latency_ms("NYCMng", "WASHng") == pytest.approx(km / topology.KM_PER_MS)
    # symmetric, triangle inequality, the path's links add up
    for a, b, c in (("NYCMng", "DNVRng", "LOSAng"), ("STTLng", "ATLAM5", "HSTNng")):
        assert t.latency_ms(a, b) == pytest.approx(t.latency_ms(b, a))
        assert t.latency_ms(a, c) <= t.latency_ms(a, b) + t.latency_ms(b, c) + 1e-9
        path = t.path(a, c)
        assert path[0] == a and path[-1] == c
        assert sum(t.link_ms(x, y) for x, y in zip(path, path[1:])) == \
            pytest.approx(t.latency_ms(a, c))
    # the coasts are farther apart than neighbours
    assert t.latency_ms("NYCMng", "WASHng") < t.latency_ms("NYCMng", "CHINng") < \
        t.latency_ms("NYCMng", "LOSAng")


def test_geant_and_topology_zoo_load_and_unknown_names_say_what_exists():
    g = topology.load("sndlib/geant")
    assert len(g.nodes) == 22
    z = topology.load("topozoo/Abilene")
    assert "New York" in z.nodes
    with pytest.raises(topology.TopologyError, match="not in topohub .* sndlib/abilene"):
        topology.load("sndlib/nosuchnet")
    with pytest.raises(topology.TopologyError, match="'Atlantis' is not a site of .*NYCMng"):
        g = topology.load("sndlib/abilene")
        g.latency_ms("NYCMng", "Atlantis")


def test_node_link_file_duplicate_names_and_great_circle(tmp_path):
    import json
    data = {"graph": {"name": "tiny"},
            "nodes": [{"id": 0, "name": "A", "pos": [0.0, 0.0]},
                      {"id": 1, "name": "B", "pos": [1.0, 0.0]},
                      {"id": 2, "name": "B", "pos": [2.0, 0.0]},
                      {"id": 3, "name": "C"}],
            "edges": [{"source": 0, "target": 1},                   # no dist: great circle
                      {"source": 1, "target": 2, "dist": 500.0}]}
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(data))
    t = topology.load(str(p))
    assert set(t.nodes) == {"A", "B#1", "B#2", "C"}
    assert t.latency_ms("A", "B#1") == pytest.approx(111.19 / topology.KM_PER_MS, rel=1e-3)
    assert t.latency_ms("A", "B#2") == pytest.approx((111.19 + 500) / topology.KM_PER_MS,
                                                     rel=1e-3)
    assert t.latency_ms("A", "C") is None and t.path("A", "C") == []   # not connected


# -- the parent's decision (pure) --

def S(zone, site=None, free=0, delay=0.1, power=None, hosts=2, error=None, basis="measured"):
    return ZoneSummary(zone, site or zone, hosts, free, delay, basis, power, 0.5, error)


def test_bound_and_tolerance_filter_with_reasons():
    sums = [S("near", free=5), S("mid", free=0, delay=0.5), S("far", free=100),
            S("slow", free=0, delay=3.0), S("dead", free=0, delay=None, basis="cannot launch: x"),
            S("empty", free=0, hosts=0), S("down", error="connection refused"),
            S("nosite", site=None)]
    sums[-1].site = None
    lat = {"near": 2.0, "mid": 6.0, "far": 25.0, "slow": 3.0, "dead": 1.0, "empty": 1.0,
           "down": 1.0, "nosite": None}
    d = choose_zones(sums, lat, ingress="X", bound_ms=10.0, tolerance_s=1.0, fanout=1)
    assert [c.zone for c in d.ranked] == ["near", "mid"]
    assert [c.zone for c in d.chosen] == ["near"]
    why = {r["zone"]: r["reason"] for r in d.rejected}
    assert "latency 25.00 ms from X to far exceeds the service's bound 10 ms" in why["far"]
    assert "queuing delay 3.000 s exceeds the service's tolerable 1 s" in why["slow"]
    assert why["dead"] == "no free slot and cannot launch: x"
    assert why["empty"] == "the zone has no hosts"
    assert why["down"] == "zone unavailable: connection refused"
    assert "no site on the topology" in why["nosite"]
    # the wait is 0 with a free slot, the queuing delay without
    assert d.ranked[0].wait_s == 0.0 and d.ranked[1].wait_s == 0.5


def test_no_zone_names_every_reason_and_what_was_asked():
    sums = [S("a", free=3), S("b", free=0, delay=2.0)]
    with pytest.raises(NoZone) as e:
        choose_zones(sums, {"a": 30.0, "b": 1.0}, ingress="NYC", bound_ms=10.0,
                     tolerance_s=0.5, service="fw")
    msg = str(e.value)
    assert msg.startswith("no zone can take fw (latency <= 10 ms from NYC, a free slot or a "
                          "queuing delay <= 0.5 s): ")
    assert "a: latency 30.00 ms from NYC to a exceeds" in msg
    assert "b: no free slot and queuing delay 2.000 s exceeds" in msg
    assert isinstance(e.value, Refused) and len(e.value.rejected) == 2


def test_ranking_trades_latency_wait_power_and_slots():
    lat = {"a": 2.0, "b": 2.0, "c": 8.0}
    # same latency: the one with a free slot beats the one that must launch
    d = choose_zones([S("a", free=0, delay=0.4), S("b", free=3)], lat, ingress="X",
                     bound_ms=10.0, tolerance_s=1.0)
    assert [c.zone for c in d.ranked] == ["b", "a"]
    assert d.ranked[1].terms["wait"] == pytest.approx(0.4)
    # same latency and slots: least marginal power first
    d = choose_zones([S("a", free=3, power=40.0), S("b", free=3, power=10.0)], lat,
                     ingress="X", bound_ms=10.0)
    assert [c.zone for c in d.ranked] == ["b", "a"]
    assert d.ranked[1].terms["power"] == 0.75 and d.ranked[0].terms["power"] == 0.0
    # latency dominates by default; weight 0 on latency lets power decide
    sums = [S("a", free=3, power=90.0), S("c", free=3, power=10.0)]
    assert choose_zones(sums, lat, ingress="X", bound_ms=10.0).ranked[0].zone == "a"
    assert choose_zones(sums, lat, ingress="X", bound_ms=10.0,
                        weights=Weights(latency=0.0)).ranked[0].zone == "c"
    # no bound: latency scaled by the farthest eligible zone; fanout cuts the list
    d = choose_zones([S("a", free=1), S("b", free=1), S("c", free=1)], lat, ingress="X",
                     fanout=2)
    assert d.ranked[-1].zone == "c" and d.ranked[-1].terms["latency"] == 1.0
    assert [c.zone for c in d.chosen] == ["a", "b"]
    assert [[c.zone for c in g] for g in d.rounds(5)] == [["a", "b"], ["c"]]
    assert d.rounds(1) == [d.chosen]
    # more free slots = less scarcity
    d = choose_zones([S("a", free=1), S("b", free=1000)], lat, ingress="X", bound_ms=10.0)
    assert d.ranked[0].zone == "b" and d.ranked[0].terms["slots"] == 0.0


def test_without_ingress_latency_is_not_asked_and_record_is_json():
    import json
    d = choose_zones([S("a", free=1)], {}, ingress=None)
    assert d.ranked[0].latency_ms is None
    json.dumps(d.to_record())
    assert zone_problem(S("a", free=1), None, None, None, None) == (None, 0.0)
    assert zone_problem(S("a", free=0, delay=0.2), None, None, None, None) == (None, 0.2)


def test_compressed_summaries_are_conservative():
    assert compress(S("a", free=0, delay=None)).free_slots == 0
    assert compress(S("a", free=0, delay=None)).queuing_delay_s is None
    c = compress(S("a", free=37, delay=0.13))
    assert (c.free_slots, c.queuing_delay_s) == (32, 0.2)        # bucket 32-63; q=1: 0.2 s
    for free in (1, 2, 3, 5, 100, 4096, 70000):
        for delay in (0.0, 0.05, 0.1, 0.11, 0.7, 3.0, 100.0):
            c = compress(S("a", free=free, delay=delay))
            assert c.free_slots <= free                              # never more than there is
            assert c.free_slots > free / 2 or c.free_slots == 1 << 14  # (the top bucket is open)
            assert c.queuing_delay_s >= delay                        # never sooner than it is
            # so eligibility on the compressed summary implies eligibility on the exact one
            for tol in (0.1, 0.2, 1.0):
                ok_c = zone_problem(dataclasses.replace(c, free_slots=0), 1.0, 5.0, tol, "X")
                ok = zone_problem(S("a", free=0, delay=delay), 1.0, 5.0, tol, "X")
                assert ok_c[0] is not None or ok[0] is None


def test_zone_latencies_from_the_graph():
    t = topology.load("sndlib/abilene")
    lat = zone_latencies(t, {"east": "WASHng", "west": "LOSAng"}, "NYCMng")
    assert lat["east"] < lat["west"]
    assert lat["west"] == pytest.approx(t.latency_ms("NYCMng", "LOSAng"))
    assert zone_latencies(t, {"east": "WASHng"}, None) == {}


def test_register_opts_once():
    from oslo_config import cfg
    conf = cfg.ConfigOpts()
    register_opts(conf)
    register_opts(conf)                 # a second call is a no-op, not DuplicateOptError
    conf([])
    assert conf.hierarchy.enabled is False and conf.hierarchy.fanout == 2


# -- the placer over the flat engine, in-process (synthetic zones on Abilene) --

SITES = {"z000": "NYCMng", "z001": "WASHng", "z002": "CHINng", "z003": "DNVRng",
         "z004": "LOSAng", "z005": "SNVAng"}


@pytest.fixture
def hier(tmp_path):
    zones, types, labels = make_fleet(24, 6, n_env_types=2)
    conf = orchconf.make_conf(connection=f"sqlite:///{tmp_path}/o.sqlite", local_zone=False,
                              hierarchy_enabled=True, hierarchy_topology="sndlib/abilene",
                              hierarchy_zone_sites=SITES, hierarchy_fanout=1,
                              hierarchy_summary_ttl=0.0)
    orch = Orchestrator(conf, zones=zones, zone_labels=labels,
                        power=lambda z, h: (h.labels["max_w"] - h.labels["idle_w"]) * 0.05)
    seed_cache(orch.placement.stage1.cache, zones, types)
    yield orch, zones
    orch.close()


def report(orch, zone, free):
    import time
    for h in orch.zones[zone].hosts():
        orch.registry.apply(SlotReport(zone=zone, host=h.name, instance=f"i-{h.name}",
                                       service="fw", slots=free, delay_s=0.06, at=time.time()))


def test_orchestrator_places_in_the_nearest_zone_with_slots(hier):
    orch, zones = hier
    orch.register_service("fw", FW, max_latency_ms=8.0, max_queuing_delay_s=0.5)
    for z in SITES:
        report(orch, z, 10)
    p = orch.place("fw", location="NYCMng")
    assert p["status"] == "decided" and p["zone"] == "z000"           # the ingress's own site
    ex = orch.explain(p["decision_id"])
    assert [s["name"] for s in ex["steps"]] == ["parent", "filter", "probe", "analyze", "decide"]
    parent = ex["steps"][0]["record"]
    assert parent["ingress"] == "NYCMng" and parent["chosen"] == ["z000"]
    assert ex["request"]["placement"] == "hierarchical"
    far = {r["zone"]: r["reason"] for r in parent["rejected"]}
    assert set(far) == {"z003", "z004", "z005"}                        # > 8 ms from New York
    assert all("exceeds the service's bound 8 ms" in r for r in far.values())
    # only the chosen zone's hosts were candidates of the flat steps
    assert {k.split("/")[0] for k in ex["steps"][1]["record"]["kept"]} == {"z000"}
    # `fluidvim placement explain` prints the parent's ranking and reasons
    import io

    from fluidvim.orchestrator.cli import print_explanation
    buf = io.StringIO()
    print_explanation(ex, buf)
    text = buf.getvalue()
    assert "step parent" in text and "ingress NYCMng, bound 8.0 ms" in text
    assert "round 1 chose z000" in text and "z000 at NYCMng: 0.0 ms" in text
    assert "rejected z004: latency 22.07 ms from NYCMng to LOSAng exceeds" in text, text
    # the user in Los Angeles gets the west coast
    p = orch.place("fw", location="LOSAng")
    assert p["zone"] in ("z004", "z005")
    # New York full (no slot) and its zone's queuing delay above the tolerance -> Washington
    report(orch, "z000", 0)
    orch.register_service("fw", FW, max_latency_ms=8.0, max_queuing_delay_s=0.0)
    p = orch.place("fw", location="NYCMng")
    assert p["zone"] == "z001"


def test_next_zones_are_tried_when_the_chosen_have_no_feasible_host(hier):
    orch, _ = hier
    # the nearest zone passes the parent but none of its hosts passes step 0
    orch.register_service("fw", FW, max_latency_ms=8.0, requirements={"zones": ["z001", "z002"]})
    for z in SITES:
        report(orch, z, 10)
    p = orch.place("fw", location="NYCMng")
    assert p["status"] == "decided" and p["zone"] == "z001"
    parent = orch.explain(p["decision_id"])["steps"][0]["record"]
    assert parent["round"] == 2 and parent["tried"] == [["z000"], ["z001"]]
    first = orch.list_decisions(2)[1]                 # round 1: refused, with its own record
    assert first["status"] == "refused" and first["zone"] is None
    ex = orch.explain(first["id"])
    assert ex["steps"][0]["record"]["chosen"] == ["z000"]
    assert all("requirement zones" in f["reason"] for f in ex["steps"][1]["record"]["filtered"])
    # with deploy, the last round's refusal is raised (synthetic zones cannot launch anyway)
    orch.register_service("fw", FW, max_latency_ms=8.0, requirements={"zones": ["z005"]})
    with pytest.raises(Refused, match="cannot be placed"):
        orch.place("fw", location="NYCMng", deploy=True)


def test_orchestrator_refuses_with_reasons_and_bad_locations(hier):
    orch, _ = hier
    orch.register_service("fw", FW, max_latency_ms=0.5, max_queuing_delay_s=0.01)
    for z in SITES:
        report(orch, z, 0)                       # no free slot anywhere, delays ~60-240 ms
    p = orch.place("fw", location="NYCMng")
    assert p["status"] == "refused" and p["zone"] is None
    assert "no zone can take fw" in p["rule"]
    ex = orch.explain(p["decision_id"])
    assert [s["name"] for s in ex["steps"]] == ["parent"]
    assert ex["steps"][0]["record"]["rejected_count"] == 6
    with pytest.raises(Refused, match="no zone can take fw .* placement explain"):
        orch.place("fw", location="NYCMng", deploy=True)
    with pytest.raises(InvalidRequest, match="location: ingress site 'Gotham' is not a site of "
                                             "topology sndlib/abilene"):
        orch.place("fw", location="Gotham")
    with pytest.raises(InvalidRequest, match="latency bound of 0.5 ms but no ingress site"):
        orch.place("fw")
    with pytest.raises(InvalidRequest, match="max_latency_ms"):
        orch.register_service("bad", FW, max_latency_ms=-1)


def test_flat_stays_the_default(tmp_path):
    zones, types, labels = make_fleet(8, 2, n_env_types=1)
    conf = orchconf.make_conf(connection=f"sqlite:///{tmp_path}/o.sqlite", local_zone=False)
    orch = Orchestrator(conf, zones=zones, zone_labels=labels, power=lambda z, h: 1.0)
    try:
        assert orch.hierarchy is None
        seed_cache(orch.placement.stage1.cache, zones, types)
        orch.register_service("fw", FW, max_latency_ms=5.0)   # stored; flat does not use it
        p = orch.place("fw")
        assert p["status"] == "decided"
        names = [s["name"] for s in orch.explain(p["decision_id"])["steps"]]
        assert names == ["filter", "probe", "analyze", "decide"]
        assert orch.list_services()[0]["max_latency_ms"] == 5.0
    finally:
        orch.close()


def test_unknown_zone_site_is_a_clear_error(tmp_path):
    zones, _, labels = make_fleet(4, 1, n_env_types=1)
    conf = orchconf.make_conf(connection=f"sqlite:///{tmp_path}/o.sqlite", local_zone=False,
                              hierarchy_enabled=True, hierarchy_zone_sites={"z000": "Paris"})
    with pytest.raises(topology.TopologyError, match="site of zone z000 'Paris' is not a site"):
        Orchestrator(conf, zones=zones, zone_labels=labels, power=lambda z, h: 1.0)
    assert math.isfinite(topology.KM_PER_MS)
