# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The orchestrator end to end: real RabbitMQ (RPC + slot notifications), real VNFs in the local
zone, real stage-1 probes (boot, load through a network namespace) and the evaluator's analyzer.

Every test uses its own RPC and notification topics, database, run dir and netns prefix.
"""

import shutil
import time
import uuid

import pytest
import sqlalchemy as sa

from fluidvim.evaluator import cache as pcache, probes, stage1
from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.db import Store
from fluidvim.orchestrator.exception import InvalidRequest, NotFound, Refused
from fluidvim.orchestrator.rpcapi import OrchestratorAPI
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.vnf.manager import VNFManager
from fluidvim.vnf.state import LaunchRecord

from .conftest import leaked_taps

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"


def rabbit_up() -> bool:
    import socket
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=2).close()
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on "
                                "127.0.0.1:5672: run tools/bootstrap.sh")


def small_stage1(conf, store):  # noqa: ARG001 - same signature as service.default_runners
    """The real stage-1 runner with a short load probe on this test's own netns prefix."""
    load = probes.LoadProbe(sessions=(1, 10, 50), step_s=0.5, warmup_s=0.2, drain_s=0.3,
                            prefix="fvolp", subnet=93, valid_for_s=3600)
    return stage1.Stage1Runner(pcache.ProbeCache(store.engine),
                               [probes.StaticProbe(), probes.BootProbe(n=2), load])


@pytest.fixture
def env(tmp_path):
    """Factory of orchestrators sharing one database/run dir (restart = a new one)."""
    tag = uuid.uuid4().hex[:8]
    run_dir = f"/run/fluidvim-fvo-{tag}"
    opts = dict(connection=f"sqlite:///{tmp_path}/orch.sqlite", topic=f"fvo-{tag}",
                notification_topic=f"fvo_slots_{tag}", agent_interval=0.2,
                slot_update_min_interval=0.1, rpc_timeout=60.0,
                vnf_state_dir=str(tmp_path / "state"), vnf_run_dir=run_dir)
    made, apis = [], []

    class Env:
        conf = None

        def start(self, **kw):
            conf = orchconf.make_conf(**{**opts, **kw})
            orchconf.disable_rabbit_heartbeat(conf)      # fast transport cleanup between tests
            self.conf = conf
            store = Store(conf.orchestrator.connection)
            o = Orchestrator(conf, stage1=small_stage1(conf, store))
            store.close()
            o.start(server=f"fvo-{tag}")
            made.append(o)
            return o

        def api(self):
            a = OrchestratorAPI(self.conf)
            apis.append(a)
            return a

    yield Env()
    for a in apis:
        a.close()
    for o in made:
        o.stop()
    # remove every VNF the local zone started, then check nothing leaked
    conf = orchconf.make_conf(**opts)
    mgr = VNFManager(conf)
    with mgr.store.Session() as s:
        ids = set(s.scalars(sa.select(LaunchRecord.vnf_id)))
    for rec in mgr.store.list():
        ids.add(rec.id)
        mgr.destroy(rec.id)
    mgr.close()
    for o in made:
        o.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    assert not leaked_taps(ids)


def wait_for(pred, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_probe_analyze_place_deploy_resolve(env):
    orch = env.start()
    api = env.api()
    assert api.ping()["zones"] == ["local"]
    svc = api.register_service("fw", FORWARD, slots=8, deadline_ms=100.0, session_pps=100)
    assert svc["slots"] == 8
    placed = api.place("fw", deploy=True)
    assert placed["status"] == "deployed" and placed["zone"] == "local"
    inst = placed["instance"]
    assert inst["slots_total"] == 8 and inst["service"] == "fw"
    ex = api.explain(placed["decision_id"][:8])
    assert [s["name"] for s in ex["steps"]] == ["filter", "probe", "analyze", "decide"]
    probe = ex["steps"][1]["record"]
    (uid, e), = probe["env_types"].items()
    assert e["status"] == "probed" and e["kinds"]["boot"] == "probed" \
        and e["kinds"]["load"] == "probed", probe
    scores = ex["steps"][2]["record"]["scores"]
    assert scores[0]["feasible"] and scores[0]["slots_estimate"] > 0, scores
    # a second placement probes nothing: one probe per environment type, cached
    again = api.explain(api.place("fw")["decision_id"])
    assert again["steps"][1]["record"]["env_types"][uid]["status"] == "cached"
    # the slot agent publishes the VNF's slots as notifications; the listener feeds the registry
    wait_for(lambda: orch._listener.endpoint.received > 0, what="a slot notification")
    assert api.slots("fw", "instance")["fw"].get(inst["id"]) == 8
    r = api.resolve("fw")
    assert r["kind"] == "slot" and r["instance"] == inst["id"] and r["free_slots"] == 7
    zones = api.list_zones()
    assert zones[0]["hosts"][0]["env_uid"] == uid
    assert zones[0]["queuing_delay"]["fw"]["seconds"] > 0


def test_slot_exhaustion_fast_track_launch(env):
    orch = env.start(reservation_ttl=60.0)
    api = env.api()
    api.register_service("tiny", FORWARD, slots=2, max_queuing_delay_s=30.0,
                         aliases={"premium": 2})
    first = api.resolve("tiny")                     # nothing runs yet: fast track
    assert first["kind"] == "launched" and first["waited_s"] > 0
    assert first["predicted_delay_s"] is not None
    assert api.resolve("tiny")["kind"] == "slot"      # the second slot of that instance
    third = api.resolve("tiny")                     # exhausted -> another on-demand launch
    assert third["kind"] == "launched" and third["instance"] != first["instance"]
    premium = api.resolve("premium")                # 1 premium = 2 tiny: a third instance
    assert premium["kind"] == "launched" and premium["via_alias"] == "tiny"
    running = [r for r in orch.manager.list() if r.status == "running"]
    assert len(running) == 3
    # the queuing delay now comes from measured launches (ours and the zone's)
    q = orch.queuing.delay(orch.local_zone, "tiny")
    assert q.basis.startswith("measured (cold launches, own records") and q.samples >= 3
    assert q.in_flight == 0
    launches = orch.store.launches(zone="local", service="tiny", limit=10)
    assert len(launches) == 3 and all(x.ms > 0 and x.predicted_s for x in launches)


def test_refusal_names_the_reason(env):
    env.start(default_launch_time=5.0)
    api = env.api()
    api.register_service("strict", FORWARD, max_queuing_delay_s=0.001)
    with pytest.raises(Refused) as e:
        api.resolve("strict")
    assert "local: queuing delay" in e.value.message and "tolerance" in e.value.message


def test_restarted_orchestrator_keeps_its_state(env):
    orch = env.start()
    api = env.api()
    api.register_service("fw", FORWARD, slots=4, aliases={"gold": 2}, deadline_ms=100.0)
    placed = api.place("fw", deploy=True)
    orch.stop()
    orch2 = env.start()
    api2 = env.api()
    assert [s["name"] for s in api2.list_services()] == ["fw"]
    assert api2.explain(placed["decision_id"])["status"] == "deployed"
    assert [i["id"] for i in api2.list_instances("fw")] == [placed["instance"]["id"]]
    assert orch2.manager.get(placed["instance"]["id"]).status == "running"   # re-attached
    r = api2.resolve("gold")                        # alias, from the persisted slot report
    assert r["kind"] == "slot" and r["instance"] == placed["instance"]["id"]
    api2.terminate(placed["instance"]["id"])
    assert api2.list_instances("fw") == []


def test_malformed_requests_get_clear_errors(env):
    env.start()
    api = env.api()
    cases = [
        (dict(name="fw", click_config=FORWARD, aliases={"premium": -3}), "aliases.premium"),
        (dict(name="fw", click_config=FORWARD, formula="slots * __class__"), "formula"),
        (dict(name="fw", click_config=FORWARD, deadline_ms="fast"), "deadline_ms"),
        (dict(name="no spaces", click_config=FORWARD), "name"),
        (dict(name="fw", click_config=FORWARD, colour="red"), "colour"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidRequest) as e:
            api.register_service(**kwargs)
        assert e.value.field == field and e.value.message.startswith(field), e.value.message
        assert "Traceback" not in e.value.message
    with pytest.raises(NotFound) as e:
        api.resolve("ghost")
    assert e.value.message.startswith("service: no service named 'ghost'")
    with pytest.raises(NotFound):
        api.explain("nope-nope")
    with pytest.raises(InvalidRequest, match="request"):
        api._call("place", service="fw", colour="red")
    with pytest.raises(InvalidRequest, match="level"):
        api.slots(None, "galaxy")
    assert api.list_services() == []
