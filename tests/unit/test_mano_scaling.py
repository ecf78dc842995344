# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NS lifecycle beyond deploy/remove, without VNFs:

* the scaling decision (pure: slot history + aspect settings -> out | in | nothing): ahead of
  exhaustion by demand x lead time, hysteresis and cool-down, never beyond the limits;
* the descriptor fields it reads (instantiation levels, vdu-profile min/max, scaling aspects,
  OSM scaling-policy, fluidvim-scale-* properties): the mapping and bad values by field path;
* scale and heal in the orchestrator, in-process on the in-memory zone of test_mano_service:
  limits, instances on the same networks, rollback of a failed scale-out, the resolver's
  on-demand launch as a scale-out, operation occurrences (also after a restart).

With real VNFs and RabbitMQ: tests/integration/test_ns_lifecycle.py.
"""

import time

import pytest

from fluidvim.common.zonetypes import ZoneError
from fluidvim.orchestrator.demand import Sample, demand_rate
from fluidvim.orchestrator.exception import NotFound, Refused
from fluidvim.orchestrator.mano.scaling import Scaler, decide
from fluidvim.orchestrator.slots import SlotReport

from .test_mano_descriptors import only, pkg, problems  # noqa: F401 - fixtures and helpers
from .test_mano_service import bundle, orch_factory  # noqa: F401


# -- the decision --
def ramp(rate, seconds, total=16, start_used=0, dt=0.5, t0=1000.0):
    """Samples of a steady ramp of ``rate`` sessions/s over ``seconds``."""
    out = []
    k = 0
    while k * dt <= seconds + 1e-9:
        used = min(total, start_used + int(rate * k * dt))
        out.append(Sample(t0 + k * dt, total - used, total))
        k += 1
    return out


BASE = dict(cooldown_s=10.0, idle_s=30.0, last_op=None, can_out=True, can_in=True,
            step_in_slots=16)


def test_demand_rate_is_the_growth_of_used_slots():
    h = ramp(4.0, 5.0, total=64)
    assert demand_rate(h, h[-1].t, 5.0) == pytest.approx(4.0, rel=0.1)
    # sessions ending are not demand; a single sample gives no rate
    down = [Sample(1000.0 + k, 10 + k, 64) for k in range(5)]
    assert demand_rate(down, 1004.0, 5.0) == 0.0
    assert demand_rate(h[:1], h[0].t, 5.0) == 0.0


def test_scale_out_before_the_slots_run_out_by_demand_times_lead():
    h = ramp(4.0, 2.0)                              # 8 used, 8 free, 4 sessions/s
    now = h[-1].t
    # a launch of 1 s: 4 sessions arrive meanwhile -> 8 free is enough for now
    assert decide(h, now=now, lead_s=1.0, **BASE).action is None
    # a launch of 2.5 s: 10 sessions would arrive -> out, with 8 still free
    dec = decide(h, now=now, lead_s=2.5, **BASE)
    assert dec.action == "out" and h[-1].free == 8 and dec.threshold == pytest.approx(10, rel=0.1)
    assert "demand" in dec.reason
    # no demand: only an empty aspect scales out (free = 0 <= 0) ...
    flat = [Sample(1000.0 + k, 0, 16) for k in range(5)]
    assert decide(flat, now=1004.0, lead_s=1.0, **BASE).action == "out"
    # ... or one below its headroom
    flat3 = [Sample(1000.0 + k, 3, 16) for k in range(5)]
    assert decide(flat3, now=1004.0, lead_s=1.0, **BASE).action is None
    assert decide(flat3, now=1004.0, lead_s=1.0, headroom=4, **BASE).action == "out"


def test_never_beyond_the_maximum_nor_right_after_a_scale_in():
    h = ramp(4.0, 3.5)                               # 2 free
    now = h[-1].t
    dec = decide(h, now=now, lead_s=1.0, **{**BASE, "can_out": False})
    assert dec.action is None and "maximum" in dec.reason
    dec = decide(h, now=now, lead_s=1.0, **{**BASE, "last_op": ("in", now - 3)})
    assert dec.action is None and "cooling down" in dec.reason
    # after a scale-out, another one may follow at once (its slots are counted already)
    assert decide(h, now=now, lead_s=1.0, **{**BASE, "last_op": ("out", now - 1)}).action == "out"
    assert decide(h, now=now, lead_s=1.0, **{**BASE, "last_op": ("in", now - 11)}).action == "out"


def idle(free, seconds, total=48, t0=1000.0):
    return [Sample(t0 + k, free, total) for k in range(int(seconds) + 1)]


def test_scale_in_only_when_slots_stay_idle_with_hysteresis_and_cooldown():
    h = idle(40, 40)                                  # 40 of 48 free for 40 s, no demand
    now = h[-1].t
    dec = decide(h, now=now, lead_s=1.0, **BASE)
    assert dec.action == "in" and "24 stay free" in dec.reason
    # not idle for long enough (history, or since the last operation)
    assert decide(h[-20:], now=now, lead_s=1.0, **BASE).action is None
    dec = decide(h, now=now, lead_s=1.0, **{**BASE, "last_op": ("out", now - 15)})
    assert dec.action is None and "idle for less" in dec.reason
    dec = decide(h, now=now, lead_s=1.0, **{**BASE, "last_op": ("out", now - 5)})
    assert dec.action is None and "cooling down" in dec.reason
    # a dip in the window counts: 20 free once -> 20 - 16 = 4 stay, but 2 x headroom 3 = 6
    dipped = h[:-10] + [Sample(h[-10].t, 20, 48)] + h[-9:]
    dec = decide(dipped, now=now, lead_s=1.0, headroom=3, **BASE)
    assert dec.action is None and "would leave 4" in dec.reason
    assert decide(dipped, now=now, lead_s=1.0, **BASE).action == "in"
    # removing the step would leave nothing free
    assert decide(idle(16, 40), now=now, lead_s=1.0, **BASE).action is None
    # at the minimum, or the instances to remove still carry sessions
    assert decide(h, now=now, lead_s=1.0, **{**BASE, "can_in": False}).action is None
    dec = decide(h, now=now, lead_s=1.0, in_idle=False, **BASE)
    assert dec.action is None and "idle" in dec.reason


# -- descriptors --
def scaled(pkg):  # noqa: F811
    """The sample chain with a scaling firewall: 1..3 instances, one per step, 2 levels."""
    nsd, fw, fwd = pkg.docs()
    df = fw["vnfd"]["df"][0]
    df["vdu-profile"][0]["max-number-of-instances"] = 3
    df["instantiation-level"] = [
        {"id": "one", "vdu-level": [{"vdu-id": "fw", "number-of-instances": 1}]},
        {"id": "two", "vdu-level": [{"vdu-id": "fw", "number-of-instances": 2}],
         "scaling-info": [{"scaling-aspect-id": "fw-pool", "scale-level": 1}]}]
    df["default-instantiation-level"] = "one"
    df["scaling-aspect"] = [{"id": "fw-pool", "max-scale-level": 2, "aspect-delta-details": {
        "deltas": [{"id": "plus1", "vdu-delta": [{"id": "fw", "number-of-instances": 1}]}],
        "step-deltas": "plus1"}}]
    fw["vnfd"]["configurable-properties"] = {"additional-configurable-property": [
        {"key": "fluidvim-scale-cooldown-s", "value": 7},
        {"key": "fluidvim-scale-out-free-slots", "value": 4}]}
    return nsd, fw, fwd


def test_levels_limits_and_aspects_map(pkg):  # noqa: F811
    nsd, fw, fwd = scaled(pkg)
    plan = pkg.plan(nsd, fw, fwd)
    u = plan.units[0]
    assert (u.instances, u.min_instances, u.max_instances) == (1, 1, 3)
    assert "scale_cooldown_s" not in u.properties and "cooldown_s" not in u.properties
    (a,) = plan.aspects
    assert (a["name"], a["profile"], a["max_scale_level"], a["initial_level"]) == (
        "fw-pool", "fw", 2, 0)
    assert (a["cooldown_s"], a["idle_s"], a["auto"], a["headroom"]) == (7.0, 30.0, True, 4)
    assert a["steps"] == [{"delta": "plus1", "services": {"fw-chain-fw": 1}}]
    # the default level "two": 2 instances at scale level 1
    fw["vnfd"]["df"][0]["default-instantiation-level"] = "two"
    plan = pkg.plan(nsd, fw, fwd)
    assert plan.units[0].instances == 2 and plan.aspects[0]["initial_level"] == 1
    # an OSM IM scaling-policy wins over the properties
    fw["vnfd"]["df"][0]["scaling-aspect"][0]["scaling-policy"] = [
        {"name": "p", "scaling-type": "manual", "cooldown-time": 60, "threshold-time": 12}]
    a = pkg.plan(nsd, fw, fwd).aspects[0]
    assert (a["auto"], a["cooldown_s"], a["idle_s"]) == (False, 60.0, 12.0)
    # the NSD's vnf-profile multiplies
    nsd["nsd"]["nsd"][0]["df"][0]["vnf-profile"][0]["max-number-of-instances"] = 2
    u = pkg.plan(nsd, fw, fwd).units[0]
    assert (u.instances, u.min_instances, u.max_instances) == (2, 1, 6)


BAD = [
    (lambda df: df["vdu-profile"][0].update({"max-number-of-instances": 0}),
     "vnfd.df[0].vdu-profile[0].max-number-of-instances", "less than the minimum"),
    (lambda df: df["vdu-profile"][0].update({"min-number-of-instances": 2,
                                             "max-number-of-instances": 1}),
     "vnfd.df[0].vdu-profile[0].max-number-of-instances", "1 is below min-number-of-instances 2"),
    (lambda df: df["instantiation-level"][1]["vdu-level"][0].update({"number-of-instances": 5}),
     "vnfd.df[0].instantiation-level[1].vdu-level[0].number-of-instances",
     "5 is above max-number-of-instances 3"),
    (lambda df: df["instantiation-level"][0]["vdu-level"][0].update({"vdu-id": "fwx"}),
     "vnfd.df[0].instantiation-level[0].vdu-level[0].vdu-id", "'fwx' is not one of"),
    (lambda df: df.update({"default-instantiation-level": "three"}),
     "vnfd.df[0].default-instantiation-level", "'three' is not one of the instantiation-level"),
    (lambda df: df.pop("default-instantiation-level"),
     "vnfd.df[0].default-instantiation-level", "2 instantiation levels (one, two) and no"),
    (lambda df: df["scaling-aspect"][0]["aspect-delta-details"].update({"step-deltas": "plus2"}),
     "vnfd.df[0].scaling-aspect[0].aspect-delta-details.step-deltas", "'plus2' is not one of"),
    (lambda df: df["scaling-aspect"][0]["aspect-delta-details"]["deltas"][0]["vdu-delta"][0]
     .update({"id": "nope"}),
     "vnfd.df[0].scaling-aspect[0].aspect-delta-details.deltas[0].vdu-delta[0].id",
     "'nope' is not one of"),
    (lambda df: df["scaling-aspect"][0]["aspect-delta-details"]["deltas"][0]["vdu-delta"][0]
     .update({"number-of-instances": 0}),
     "vnfd.df[0].scaling-aspect[0].aspect-delta-details.deltas[0].vdu-delta",
     "the delta adds no instance"),
    (lambda df: df["scaling-aspect"][0].pop("aspect-delta-details"),
     "vnfd.df[0].scaling-aspect[0].aspect-delta-details.deltas", "no scaling delta"),
    (lambda df: df["instantiation-level"][1]["scaling-info"][0].update({"scale-level": 3}),
     "vnfd.df[0].instantiation-level[1].scaling-info[0].scale-level",
     "3 is above max-scale-level 2"),
    (lambda df: df["scaling-aspect"][0].update({"scaling-policy": [{"name": "p",
                                                                   "scaling-type": "sometimes"}]}),
     "vnfd.df[0].scaling-aspect[0].scaling-policy[0].scaling-type", "'sometimes' is not one of"),
    (lambda df: df["scaling-aspect"][0].update({"scaling-policy": [{"name": "p",
                                                                   "cooldown-time": -1}]}),
     "vnfd.df[0].scaling-aspect[0].scaling-policy[0].cooldown-time", "out of range"),
]


@pytest.mark.parametrize("mutate,path,text", BAD, ids=[b[1].split("vnfd.df[0].")[1] + str(i)
                                                       for i, b in enumerate(BAD)])
def test_bad_scaling_fields_are_refused_by_path(pkg, mutate, path, text):  # noqa: F811
    nsd, fw, fwd = scaled(pkg)
    mutate(fw["vnfd"]["df"][0])
    p = problems(pkg, nsd, fw, fwd)[0]                   # the first problem names the field
    assert p.path == path and text in p.message, str(p)


def test_bad_scaling_properties_are_refused_by_path(pkg):  # noqa: F811
    nsd, fw, fwd = scaled(pkg)
    props = fw["vnfd"]["configurable-properties"]["additional-configurable-property"]
    props.append({"key": "fluidvim-autoscale", "value": "perhaps"})
    p = only(pkg, nsd, fw, fwd)
    assert p.path == ("vnfd.configurable-properties.additional-configurable-property[2].value")
    assert "not a boolean" in p.message
    props[2] = {"key": "fluidvim-scale-cooldwn-s", "value": 3}
    p = only(pkg, nsd, fw, fwd)
    assert p.path.endswith("[2].key") and "did you mean 'fluidvim-scale-cooldown-s'" in str(p)


# -- scale and heal in the orchestrator (in-memory zone) --
def deploy_scaled(orch, pkg, **kw):  # noqa: F811
    nsd, fw, fwd = scaled(pkg)
    fw["vnfd"]["df"][0]["scaling-aspect"][0]["scaling-policy"] = [
        {"name": "p", "scaling-type": "manual"}]
    for k, v in kw.items():
        fw["vnfd"]["vdu"][0][k] = v
    return orch.ns.deploy(*bundle(pkg, nsd, fw, fwd), name="sc1")


def test_scale_out_and_in_within_the_limits_with_operations(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    zone = orch_factory.zone
    r = deploy_scaled(orch, pkg)
    assert [o["type"] for o in r["operations"]] == ["instantiate"]
    assert r["operations"][0]["state"] == "completed"
    assert r["scaling"] == [{"aspect": "fw/fw-pool", "level": 0, "max_scale_level": 2,
                             "auto": False, "cooldown_s": 7.0, "idle_s": 30.0, "headroom": 4,
                             "steps": [{"sc1-fw": 1}]}]
    out = orch.ns.scale("sc1", "fw-pool", "out")
    assert out["level"] == 1 and len(out["added"]) == 1
    out = orch.ns.scale("sc1", "fw/fw-pool", "out")
    assert out["level"] == 2
    shown = orch.ns.show("sc1")
    fws = [i for i in shown["instances"] if i["service"] == "sc1-fw"]
    assert len(fws) == 3 and all(i["status"] == "running" for i in fws)
    # every new firewall has its NICs on the NS's networks
    reqs = [zone.vnfs[i["id"]] for i in fws]
    assert {q.bridges for q in reqs} == {("br-sc1-left", "br-sc1-middle")}
    assert {n["link"]: len(n["ports"]) for n in shown["networks"]}["left"] == 3
    # its slots are known at once
    assert sum(f for _, f in orch.registry.entries("sc1-fw")) == 3 * 64
    with pytest.raises(Refused) as e:                         # max-scale-level 2
        orch.ns.scale("sc1", "fw-pool", "out")
    assert "max-scale-level 2" in e.value.message
    assert orch.ns.scale("sc1", "fw-pool", "in")["level"] == 1
    assert orch.ns.scale("sc1", "fw-pool", "in")["level"] == 0
    with pytest.raises(Refused) as e:
        orch.ns.scale("sc1", "fw-pool", "in")
    assert "scale level 0" in e.value.message
    shown = orch.ns.show("sc1")
    assert [i["id"] for i in shown["instances"]] == [i["id"] for i in r["instances"]]
    assert len(zone.vnfs) == 2 and len(orch.store.instances()) == 2
    assert sum(f for _, f in orch.registry.entries("sc1-fw")) == 64
    ops = [(o["type"], o["state"], o["detail"].get("direction"), o["detail"].get("to_level"))
           for o in shown["operations"]]
    assert ops == [("instantiate", "completed", None, None), ("scale", "completed", "out", 1),
                   ("scale", "completed", "out", 2), ("scale", "completed", "in", 1),
                   ("scale", "completed", "in", 0)]
    with pytest.raises(NotFound):
        orch.ns.scale("sc1", "nope", "out")
    orch.ns.delete("sc1")
    assert zone.vnfs == {}
    ops = orch.store.ns_operations(r["id"])
    assert [o.type for o in ops][-1] == "terminate" and ops[-1].state == "completed"


def test_max_number_of_instances_bounds_scaling(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    nsd, fw, fwd = scaled(pkg)
    fw["vnfd"]["df"][0]["vdu-profile"][0]["max-number-of-instances"] = 2
    fw["vnfd"]["df"][0]["instantiation-level"][1]["vdu-level"][0]["number-of-instances"] = 2
    orch.ns.deploy(*bundle(pkg, nsd, fw, fwd), name="sc2")
    orch.ns.scale("sc2", "fw-pool", "out")
    with pytest.raises(Refused) as e:
        orch.ns.scale("sc2", "fw-pool", "out")
    assert "exceed max-number-of-instances 2" in e.value.message
    orch.ns.delete("sc2")


def test_failed_scale_out_is_rolled_back(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    zone = orch_factory.zone
    deploy_scaled(orch, pkg)
    before = set(zone.vnfs)
    real = zone.launch

    def no_room(req):
        raise ZoneError("zone mem: no room")
    zone.launch = no_room
    try:
        with pytest.raises(Refused) as e:
            orch.ns.scale("sc1", "fw-pool", "out")
    finally:
        zone.launch = real
    assert "rolled back" in e.value.message and "no room" in e.value.message
    shown = orch.ns.show("sc1")
    assert set(zone.vnfs) == before and len(shown["instances"]) == 2
    assert shown["scaling"][0]["level"] == 0
    op = shown["operations"][-1]
    assert (op["type"], op["state"]) == ("scale", "rolled_back") and "no room" in op["error"]
    orch.ns.delete("sc1")


def test_a_paused_instance_is_not_healed_a_failed_one_is(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    zone = orch_factory.zone
    r = deploy_scaled(orch, pkg)
    fw = next(i for i in r["instances"] if i["service"] == "sc1-fw")
    sc = Scaler(orch.ns, interval=0.1)
    zone.statuses[fw["id"]] = "paused"               # stopped on purpose (server pause)
    assert sc.tick() == []
    shown = orch.ns.show("sc1")
    assert fw["id"] in [i["id"] for i in shown["instances"]]
    assert "heal" not in [o["type"] for o in shown["operations"]]
    zone.statuses[fw["id"]] = "error"                # failed: replaced
    assert [(n, what) for n, what, _ in sc.tick()] == [("sc1", "heal")]
    assert fw["id"] not in zone.vnfs
    zone.statuses.clear()
    orch.ns.delete("sc1")


def test_heal_replaces_a_dead_instance_on_the_same_networks(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    zone = orch_factory.zone
    r = deploy_scaled(orch, pkg)
    fw = next(i for i in r["instances"] if i["service"] == "sc1-fw")
    zone.vnfs.pop(fw["id"])                      # it died: the zone no longer runs it
    for net in zone.nets.values():
        net.ports = [p for p in net.ports if not p.startswith(fw["id"] + "-")]
    sc = Scaler(orch.ns, interval=0.1)
    done = sc.tick()
    assert [(n, what) for n, what, _ in done] == [("sc1", "heal")]
    shown = orch.ns.show("sc1")
    new = shown["instances"][0]
    assert new["id"] != fw["id"] and new["service"] == "sc1-fw" and new["status"] == "running"
    assert zone.vnfs[new["id"]].bridges == ("br-sc1-left", "br-sc1-middle")
    assert {n["link"]: len(n["ports"]) for n in shown["networks"]} == {
        "left": 1, "middle": 2, "right": 1}
    assert [i.id for i in orch.store.instances("sc1-fw")] == [new["id"]]
    assert [rep.instance for rep, _ in orch.registry.entries("sc1-fw")] == [new["id"]]
    op = shown["operations"][-1]
    assert (op["type"], op["state"], op["detail"]["trigger"]) == ("heal", "completed", "dead")
    assert op["detail"]["replaced_by"] == new["name"]
    assert sc.tick() == []                               # nothing else to heal
    # the record of operations survives a restart
    orch.close()
    orch2 = orch_factory()
    assert [o["type"] for o in orch2.ns.show("sc1")["operations"]] == ["instantiate", "heal"]
    orch2.ns.delete("sc1")


def test_resolver_without_free_slots_scales_the_ns_out(orch_factory, pkg):  # noqa: F811
    orch = orch_factory()
    zone = orch_factory.zone
    nsd, fw, fwd = scaled(pkg)
    fw["vnfd"]["vdu"][0]["configurable-properties"] = [
        {"key": "fluidvim-session-slots", "value": 2}]
    orch.ns.deploy(*bundle(pkg, nsd, fw, fwd), name="sc3")
    got = [orch.resolve("sc3-fw") for _ in range(2)]
    assert {g["kind"] for g in got} == {"slot"}
    third = orch.resolve("sc3-fw")                        # no free slot: the NS scales out
    assert third["kind"] == "launched" and third["zone"] == "mem"
    shown = orch.ns.show("sc3")
    assert third["instance"] in [i["id"] for i in shown["instances"]]
    assert zone.vnfs[third["instance"]].bridges == ("br-sc3-left", "br-sc3-middle")
    assert shown["operations"][-1]["detail"]["trigger"] == "resolve"
    for _ in range(3):                                   # level 2 = 3 instances x 2 slots
        orch.resolve("sc3-fw")
    with pytest.raises(Refused) as e:
        orch.resolve("sc3-fw")
    assert "max-scale-level 2" in e.value.message
    orch.ns.delete("sc3")


def test_scaler_scales_out_ahead_and_in_when_idle(orch_factory, pkg):  # noqa: F811
    """The loop's decisions on the registry's real numbers (time passed in explicitly)."""
    orch = orch_factory()
    nsd, fw, fwd = scaled(pkg)
    fw["vnfd"]["vdu"][0]["configurable-properties"] = [
        {"key": "fluidvim-session-slots", "value": 8}]
    props = fw["vnfd"]["configurable-properties"]["additional-configurable-property"]
    props[:] = [{"key": "fluidvim-scale-out-free-slots", "value": 2},
                {"key": "fluidvim-scale-in-idle-s", "value": 3},
                {"key": "fluidvim-scale-cooldown-s", "value": 1}]
    orch.ns.deploy(*bundle(pkg, nsd, fw, fwd), name="sc4")
    sc = Scaler(orch.ns, interval=0.1)
    t = time.time()
    assert sc.tick(t) == []
    for _ in range(6):                                   # 6 of 8 taken: 2 free = headroom
        orch.resolve("sc4-fw")
    done = sc.tick(t + 1)
    assert [w for _, w, _ in done] == ["scale out"]
    assert len(orch.store.instances("sc4-fw")) == 2
    assert orch.ns.show("sc4")["operations"][-1]["detail"]["trigger"] == "slots"
    # the sessions end: newer reports of both instances say nothing is used
    orch.registry.reservation_ttl = 0.0
    for i in orch.store.instances("sc4-fw"):
        orch.registry.apply(SlotReport(zone="mem", host="h", instance=i.id, service="sc4-fw",
                                       slots=8, delay_s=0.1, at=t + 2))
    did = []
    for k in range(2, 10):                               # ticks 1 s apart: idle for 3 s, then in
        did += [w for _, w, _ in sc.tick(t + k)]
    assert did == ["scale in"]
    ops = [o["detail"].get("direction") for o in orch.ns.show("sc4")["operations"]
           if o["type"] == "scale"]
    assert ops == ["out", "in"] and len(orch.store.instances("sc4-fw")) == 1
    orch.ns.delete("sc4")


def test_an_operation_under_way_when_the_orchestrator_stopped_is_failed(orch_factory,  # noqa: F811
                                                                        pkg):  # noqa: F811
    orch = orch_factory()
    r = deploy_scaled(orch, pkg)
    op = orch.store.op_started(r["id"], "scale", aspect="fw/fw-pool", direction="out")
    orch.close()
    orch2 = orch_factory()
    (rec,) = [o for o in orch2.ns.show("sc1")["operations"] if o["id"] == op]
    assert rec["state"] == "failed" and "stopped during the operation" in rec["error"]
    assert rec["ended_at"] is not None
    orch2.ns.delete("sc1")


def test_a_reader_never_sees_a_new_level_before_its_operation_ends(orch_factory, pkg):  # noqa: F811
    # the scaler's level and its operation's end are one transaction: after every write a
    # reader finds the level equal to the last completed scale's to_level
    orch = orch_factory()
    r = deploy_scaled(orch, pkg)
    seen = []

    def check():
        row = orch.store.network_service(r["id"])
        done = [o for o in orch.store.ns_operations(r["id"]) if o.type == "scale"]
        level = row.get("scale").get("fw/fw-pool", 0)
        finished = [o.detail["to_level"] for o in done if o.state == "completed"]
        seen.append((level, [o.state for o in done]))
        assert level == (finished[-1] if finished else 0), seen

    for name in ("update_ns", "op_started", "op_finished"):
        real = getattr(orch.store, name)

        def spied(*a, _real=real, **k):
            out = _real(*a, **k)
            check()
            return out
        setattr(orch.store, name, spied)
    orch.ns.scale("sc1", "fw-pool", "out")
    orch.ns.scale("sc1", "fw-pool", "in")
    assert (1, ["completed"]) in seen and seen[-1] == (0, ["completed", "completed"])
