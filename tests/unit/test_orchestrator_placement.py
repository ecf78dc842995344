# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Placement steps 0-3, queuing delay, service validation and the store, in-process.

Zones here are synthetic fleets (a described set of hosts; they cannot launch). Stage 1 and
stage 2 are the evaluator's real runners over a probe cache seeded with results of the shapes its
probes produce, so these tests exercise the decision, not probing (that is the integration test).
Every test runs on SQLite and on a real PostgreSQL server (the ``db_url`` fixture, conftest.py).
"""

import math

import pytest

from fluidvim.common.zonetypes import HostInfo
from fluidvim.evaluator.model import EnvironmentType
from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.exception import InvalidRequest, NotFound, Refused
from fluidvim.orchestrator.queuing import QueuingEstimator, within
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.slots import SlotReport
from fluidvim.orchestrator.zones.synthetic import SyntheticZone, make_fleet, seed_cache

FW = "FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);"


def linear_power(zone, host: HostInfo):
    """Marginal watts of one more instance on a linear P(u) host (one instance = 5 % CPU)."""
    return (host.labels["max_w"] - host.labels["idle_w"]) * 0.05


def make_orch(db_url, zones, labels=None, power=linear_power, **overrides):
    """An orchestrator on ``db_url`` (conftest: each test runs on SQLite and on PostgreSQL)."""
    conf = orchconf.make_conf(connection=db_url, local_zone=False, **overrides)
    return Orchestrator(conf, zones=zones, power=power, zone_labels=labels)


@pytest.fixture
def fleet(db_url):
    zones, types, labels = make_fleet(40, 4, n_env_types=3)
    orch = make_orch(db_url, zones, labels)
    seed_cache(orch.placement.stage1.cache, zones, types)
    yield orch, zones, types
    orch.close()


def test_place_records_every_step_and_uses_the_cache(fleet):
    orch, zones, types = fleet
    orch.register_service("fw", FW, deadline_ms=1.0, session_pps=100, requirements={"accel": "kvm"})
    p = orch.place("fw")
    assert p["status"] == "decided" and p["zone"] and p["host"]
    ex = orch.explain(p["decision_id"][:8])
    names = [s["name"] for s in ex["steps"]]
    assert names == ["filter", "probe", "analyze", "decide"]
    flt, probe, analyze, decide = (s["record"] for s in ex["steps"])
    # step 0: tcg hosts filtered with the requirement named
    tcg = {h.name for z in zones for h in z.hosts() if h.env.accel == "tcg"}
    assert tcg and {f["candidate"].split("/")[1] for f in flt["filtered"]} == tcg
    assert all("requirement accel" in f["reason"] for f in flt["filtered"])
    # step 1: nothing probed, everything from the cache
    assert probe["env_types"] and all(e["status"] == "cached"
                                      for e in probe["env_types"].values())
    # step 2/3: the winner is in the best band with the least marginal power of that band
    assert analyze["count"] == len(flt["kept"])
    band = decide["band"]
    assert band[0]["candidate"] == f"{p['zone']}/{p['host']}"
    assert band[0]["power_w_marginal"] == min(b["power_w_marginal"] for b in band)
    assert "least marginal power" in decide["rule"]


def test_second_placement_reuses_the_ranking_and_location_filters(fleet):
    orch, zones, _ = fleet
    orch.register_service("fw", FW)
    first = orch.place("fw")
    again = orch.explain(orch.place("fw")["decision_id"])
    assert "reused" in again["steps"][2]["record"]["note"]          # stage 2 not re-run
    assert (again["zone"], again["host"]) == (first["zone"], first["host"])
    p = orch.place("fw", location="loc1")
    ex = orch.explain(p["decision_id"])
    assert "re-ranked" in ex["steps"][2]["record"]["note"]          # other candidates
    assert orch.zone_labels[p["zone"]]["location"] == "loc1"
    assert any("location" in f["reason"] for f in ex["steps"][0]["record"]["filtered"])


def test_consolidation_breaks_power_ties(db_url):
    env = EnvironmentType("qemu", "kvm", "microvm", "cpu")
    hosts = [HostInfo(f"h{i}", env, 100, 100, cpu_util=u, labels={"idle_w": 100, "max_w": 200})
             for i, u in enumerate((0.0, 0.7, 0.3))]
    zone = SyntheticZone("z", hosts, launch_ms=[50.0])
    orch = make_orch(db_url, [zone])
    try:
        seed_cache(orch.placement.stage1.cache, [zone], {env.uid: (env, 20000.0, 60.0)})
        orch.register_service("fw", FW)
        p = orch.place("fw")
        assert p["host"] == "h1"                          # the busiest of equals: idle ones sleep
        assert "consolidation" in orch.explain(p["decision_id"])["rule"]
    finally:
        orch.close()


def test_refusals_and_clear_errors(fleet):
    orch, _, _ = fleet
    orch.register_service("fw", FW, requirements={"accel": "xen"})
    p = orch.place("fw")
    assert p["status"] == "refused" and p["zone"] is None
    with pytest.raises(Refused, match="explain"):
        orch.place("fw", deploy=True)
    with pytest.raises(NotFound, match="service: no service named 'nope'"):
        orch.place("nope")
    with pytest.raises(NotFound, match="decision"):
        orch.explain("00000000-dead")
    with pytest.raises(Refused, match="synthetic"):
        orch.register_service("ok", FW) and orch.place("ok", deploy=True)


@pytest.mark.parametrize("fields,field", [
    ({"name": "bad name"}, "name"),
    ({"click_config": "  "}, "click_config"),
    ({"deadline_ms": -1}, "deadline_ms"),
    ({"deadline_ms": "soon"}, "deadline_ms"),
    ({"qos_quantile": 2}, "qos_quantile"),
    ({"max_queuing_delay_s": math.inf}, "max_queuing_delay_s"),
    ({"aliases": {"premium": 0}}, "aliases.premium"),
    ({"aliases": {"fw": 2}}, "aliases.fw"),
    ({"slots": 2.5}, "slots"),
    ({"formula": "slots +"}, "formula"),
    ({"formula": "__import__('os')"}, "formula"),
    ({"formula": "gold * 2"}, "formula"),
    ({"requirements": ["accel"]}, "requirements"),
    ({"colour": "blue"}, "colour"),
])
def test_malformed_service_names_the_field(fleet, fields, field):
    orch, _, _ = fleet
    args = {"name": "fw", "click_config": FW, **fields}
    with pytest.raises(InvalidRequest) as e:
        orch.register_service(args.pop("name"), args.pop("click_config"), **args)
    assert e.value.field == field, e.value.message
    assert e.value.message.startswith(field)
    assert orch.list_services() == []                    # nothing half-created


def test_state_survives_a_restart(db_url):
    zones, types, labels = make_fleet(8, 2)
    orch = make_orch(db_url, zones, labels)
    seed_cache(orch.placement.stage1.cache, zones, types)
    orch.register_service("basic", FW, aliases={"premium": 3}, max_queuing_delay_s=0.5)
    did = orch.place("basic")["decision_id"]
    rep = SlotReport(zone="z000", host="h00000", instance="i1", service="basic", slots=9,
                     delay_s=0.2, at=orch.registry.clock())
    orch.registry.apply(rep)
    orch.store.save_slot_report(rep)
    lid = orch.store.launch_started("z000", "basic", 0.1)       # in flight when it stops
    orch.close()
    orch = make_orch(db_url, zones, labels)
    try:
        assert orch.list_services()[0]["aliases"] == {"premium": 3.0}
        assert orch.explain(did)["service"] == "basic"
        assert orch.slots("premium", "instance") == {"premium": {"i1": 3}}
        assert orch.store.launches(in_flight=True) == []
        assert [r.error for r in orch.store.launches(limit=5, in_flight=False)] == [] and lid
        # the probe cache is in the same database: still valid, nothing to probe
        p = orch.explain(orch.place("basic")["decision_id"])
        assert all(e["status"] == "cached" for e in p["steps"][1]["record"]["env_types"].values())
    finally:
        orch.close()


def test_queuing_delay_from_history_and_in_flight(db_url):
    env = EnvironmentType("qemu", "kvm", "microvm", "cpu")
    z = SyntheticZone("z", [HostInfo("h", env)], launch_ms=[100.0, 300.0, 200.0])
    never = SyntheticZone("n", [HostInfo("h", env)])
    orch = make_orch(db_url, [z, never])
    try:
        q = QueuingEstimator(orch.store, parallelism=2, default_launch_s=1.0)
        d = q.delay(z, "fw")
        assert d.seconds == pytest.approx(0.2) and d.basis == "measured (zone)" and d.samples == 3
        assert q.delay(never, "fw").seconds is None          # cannot launch: infinite
        a = orch.store.launch_started("z", "fw", 0.2)
        orch.store.launch_started("z", "fw", 0.2)
        assert q.delay(z, "fw").seconds == pytest.approx(0.4)  # two in flight fill one round
        orch.store.launch_finished(a, True, "x")
        d = q.delay(z, "fw")           # our own record (request -> slot) now takes precedence
        assert d.in_flight == 1 and d.samples == 1 and d.basis == "measured (own records)"
        assert within(0.3, 0.5) and not within(None, 0.5) and within(5.0, None)
    finally:
        orch.close()


def test_zone_list_reports_hosts_env_types_and_delays(fleet):
    orch, zones, types = fleet
    orch.register_service("fw", FW)
    listed = orch.list_zones()
    assert [z["name"] for z in listed] == [z.name for z in zones]
    assert sum(len(z["hosts"]) for z in listed) == 40
    assert {h["env_uid"] for z in listed for h in z["hosts"]} == set(types)
    assert all(z["queuing_delay"]["fw"]["seconds"] > 0 for z in listed)
    # the database follows: hosts and their (zone-free) environment types
    assert len(orch.store.hosts()) == 40 and {e.uid for e in orch.store.envs()} == set(types)


def test_zones_without_network_support_say_so(db_url):
    env = EnvironmentType("qemu", "kvm", "microvm", "cpu")
    orch = make_orch(db_url, [SyntheticZone("z", [HostInfo("h", env)])])
    try:
        assert orch.list_networks() == [] and orch.list_networks("z") == []
        with pytest.raises(InvalidRequest) as e:
            orch.create_network("z", "lan")
        assert e.value.field == "network" and "cannot create networks" in e.value.message
        assert "name it in the request" in e.value.message
        with pytest.raises(InvalidRequest) as e:
            orch.create_network("z", "two words")
        assert e.value.field == "name"
        with pytest.raises(NotFound) as e:
            orch.list_networks("nowhere")
        assert e.value.message.startswith("zone: no zone 'nowhere'")
    finally:
        orch.close()
