# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The orchestrator end to end: real RabbitMQ (RPC + slot notifications), real VNFs in the local
zone, real stage-1 probes (boot, load through a network namespace) and the evaluator's analyzer.

Every test uses its own RPC and notification topics, database, run dir and netns prefix.
"""

import json
import shutil
import time
import uuid

import pytest

from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.exception import InvalidRequest, NotFound, Refused
from fluidvim.vnf.manager import VNFManager

from .conftest import leaked_taps, orchestrator_env

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


@pytest.fixture
def env(tmp_path):
    """Factory of orchestrators sharing one database/run dir (restart = a new one)."""
    with orchestrator_env(tmp_path, "fvo", 93) as e:
        yield e


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


def test_local_zone_networks(env):
    """Virtual links of the local zone over RPC: a bridge per (zone, name), its name in the
    bridge's alias (so a restarted orchestrator lists it), VNF NICs on it, deletion refused while
    NICs are attached, nothing left after."""
    from fluidvim.common.zonetypes import LaunchRequest
    from fluidvim.vnf import netdev

    orch = env.start()
    api = env.api()
    name = f"lan-{uuid.uuid4().hex[:6]}"
    zone = orch.local_zone.name
    net = api.create_network(zone, name)
    assert net["name"] == name and net["zone"] == zone and net["ports"] == []
    assert netdev.exists(net["id"]) and len(net["id"]) <= 15
    assert api.create_network(zone, name) == net                     # idempotent
    assert net in api.list_networks(zone)
    try:
        inst = orch.local_zone.launch(LaunchRequest(service="fw", click_config=FORWARD,
                                                    nics=(net["id"], net["id"]), warm=False))
        (listed,) = [n for n in api.list_networks(zone) if n["name"] == name]
        assert len(listed["ports"]) == 2
        with pytest.raises(InvalidRequest) as e:
            api.delete_network(zone, name)
        assert e.value.field == "network" and "still has NICs attached" in e.value.message
        orch.local_zone.terminate(inst.id)
        # a restarted orchestrator finds the network by its alias
        orch.stop()
        env.start()
        api2 = env.api()
        assert any(n["name"] == name for n in api2.list_networks(zone))
        assert api2.delete_network(zone, name) == {"deleted": name}
        assert not netdev.exists(net["id"])
        assert api2.delete_network(zone, name) == {"deleted": name}      # idempotent
    finally:
        netdev.delete_link(net["id"])
    for bad, field in [("has space", "name"), ("", "name"), ("x" * 64, "name")]:
        with pytest.raises(InvalidRequest) as e:
            api2.create_network(zone, bad)
        assert e.value.field == field and e.value.message.startswith(field)
    with pytest.raises(NotFound) as e:
        api2.create_network("atlantis", "lan")
    assert e.value.message.startswith("zone: no zone 'atlantis'")


def test_console_script_and_cli(tmp_path):
    """`fluidvim-orchestrator` as its own process with a config file; the `fluidvim` CLI on top."""
    import os
    import subprocess
    import sys

    tag = uuid.uuid4().hex[:8]
    run_dir = f"/run/fluidvim-fvo-{tag}"
    cfg = tmp_path / "orch.conf"
    cfg.write_text(f"""[orchestrator]
connection = sqlite:///{tmp_path}/orch.sqlite
topic = fvo-cli-{tag}
notification_topic = fvo_cli_slots_{tag}
agent_interval = 0.2
default_launch_time = 0.5
reservation_ttl = 600
[vnf]
state_dir = {tmp_path}/state
run_dir = {run_dir}
""")
    bindir = os.path.dirname(sys.executable)
    server = subprocess.Popen([os.path.join(bindir, "fluidvim-orchestrator"), "--config-file",
                               str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def cli(*argv, ok=True):
        r = subprocess.run([os.path.join(bindir, "fluidvim"), "--config-file", str(cfg), *argv],
                           capture_output=True, text=True, timeout=120)
        assert (r.returncode == 0) == ok, (argv, r.returncode, r.stdout, r.stderr[-2000:])
        return r

    try:
        def up():
            if server.poll() is not None:
                return True                      # died: reported below
            r = subprocess.run([os.path.join(bindir, "fluidvim"), "--config-file", str(cfg),
                                "zone", "list", "--rpc-timeout", "2"], capture_output=True)
            return r.returncode == 0
        wait_for(up, timeout=60, what="the orchestrator")
        assert server.poll() is None, server.stderr.read().decode()[-2000:]
        out = cli("service", "register", "web", "--config", FORWARD, "--slots", "1",
                  "--alias", "gold=1").stdout
        assert "service web registered" in out
        bad = cli("service", "register", "web", "--config", FORWARD, "--alias", "gold=-1",
                  ok=False)
        last = bad.stderr.strip().splitlines()[-1]
        assert bad.returncode == 2 and last.startswith("fluidvim: error: aliases.gold:"), last
        assert "Traceback" not in bad.stderr
        assert "web" in cli("service", "list").stdout
        r1 = cli("resolve", "web").stdout          # nothing runs: fast-track launch
        assert "fast-track launch" in r1
        r2 = cli("resolve", "gold").stdout         # the only slot is handed out: another launch
        assert "fast-track launch" in r2
        inst = json.loads(cli("instance", "list", "--json").stdout)
        assert len(inst) == 2 and {i["service"] for i in inst} == {"web"}
        zones = cli("zone", "list").stdout
        assert "zone local (local" in zones and "queuing delay web:" in zones
        missing = cli("resolve", "nope", ok=False)
        assert "service: no service named 'nope'" in missing.stderr
        assert cli("placement", "list").returncode == 0
        cli("instance", "rm", *[i["id"] for i in inst])
        assert json.loads(cli("instance", "list", "--json").stdout) == []
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        mgr = VNFManager(orchconf.make_conf(vnf_state_dir=str(tmp_path / "state"),
                                            vnf_run_dir=run_dir))
        ids = {r.id for r in mgr.store.list()}
        for rec in mgr.store.list():
            mgr.destroy(rec.id)
        mgr.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        assert not leaked_taps(ids)


@pytest.mark.parametrize("wire", ["compact", "json"])
def test_slot_notifications_compressed_rate_limited_and_gone(wire):
    """SlotPublisher -> RabbitMQ -> SlotListener -> registry, with FUSION's compression rules,
    on either wire (compact batches, or one JSON notification per update)."""
    import oslo_messaging as messaging

    from fluidvim.common.slotnotify import SlotPublisher
    from fluidvim.orchestrator.notify import SlotListener
    from fluidvim.orchestrator.slots import SlotRegistry

    tag = uuid.uuid4().hex[:8]
    conf = orchconf.make_conf()
    orchconf.disable_rabbit_heartbeat(conf)
    transport = messaging.get_notification_transport(conf, url=conf.orchestrator.transport_url)
    reg = SlotRegistry(ttl=3600)
    listener = SlotListener(transport, f"fvo_n_{tag}", reg)
    listener.start()
    pub = SlotPublisher(transport, "fvo.test", f"fvo_n_{tag}", min_interval=30.0, heartbeat=300.0,
                        wire=wire)
    try:
        def free():
            return reg.aggregate("svc", "instance").get("i1")

        where = dict(zone="z", host="h", instance="i1", service="svc", region="r")
        assert pub.publish(slots=50, delay_s=0.3, **where)              # first: exact 50
        wait_for(lambda: free() == 50, what="the first update")
        assert reg.reports()[0].delay_s == pytest.approx(0.4)           # Q = 0.1 * 2^2
        assert not pub.publish(slots=40, delay_s=0.3, **where)          # same bucket: nothing new
        assert not pub.publish(slots=20, delay_s=0.3, **where)          # new bucket: rate limited
        assert pub.publish(slots=5, delay_s=None, **where)              # new magnitude: at once
        wait_for(lambda: free() == 5, what="the exact count of the new magnitude")
        assert reg.reports()[0].delay_s is None                         # infinite
        assert (pub.sent, pub.suppressed) == (2, 2)
        pub.gone(zone="z", instance="i1")
        wait_for(lambda: free() is None, what="the instance to be forgotten")
        assert listener.endpoint.received == 3
        # a tick's updates in one notification (compact): 3 instances, one of them new
        seen = []
        listener.endpoint.on_update = lambda ev, p: seen.append(p)
        with pub.batch():
            for i, n in (("i2", 7), ("i3", 120), ("i4", 0)):
                assert pub.publish(slots=n, delay_s=0.1, zone="z", host="h", instance=i,
                                   service="svc", region="r")
        wait_for(lambda: len(seen) == 3, what="the three updates of one tick")
        assert {p["instance"]: p.get("exact") for p in seen} == {"i2": 7, "i3": 120, "i4": 0}
        assert reg.aggregate("svc", "instance") == {"i2": 7, "i3": 120, "i4": 0}
        assert pub.messages == (4 if wire == "compact" else 6)     # 2 + gone + (1 or 3)
    finally:
        listener.stop()
        transport.cleanup()


def test_active_active_survivor_finishes_or_rolls_back_a_dead_workers_launches(env, tmp_path):
    """What a dead orchestrator left in flight (launch records it owned): an instance that runs
    is adopted, one that does not is removed, a launch that made nothing is just closed. Real
    VNFs in the local zone; the dead worker is a row whose heartbeat stopped (the kill -9 of a
    real process is tests/e2e/test_orchestrator_ha.py)."""
    import os
    import signal

    import sqlalchemy as sa

    from fluidvim.common.zonetypes import LaunchRequest
    from fluidvim.orchestrator.db import LaunchRow, Store, WorkerRow

    orch = env.start(active_active=True, worker_heartbeat_interval=0.2, worker_dead_after=5.0)
    env.api().register_service("fw", FORWARD, slots=8)
    dead = Store(orch.conf.orchestrator.connection)
    dead.owner = "dead-worker"
    dead.register_worker("dead-worker", "elsewhere", 1)
    zone = orch.local_zone
    runs = dead.launch_started("local", "fw", 0.1, token="tokrunok")
    ran = zone.launch(LaunchRequest(service="fw", click_config=FORWARD, slots=8, token="tokrunok"))
    crashed = dead.launch_started("local", "fw", 0.1, token="tokcrash")
    broken = zone.launch(LaunchRequest(service="fw", click_config=FORWARD, token="tokcrash"))
    os.kill(orch.manager.get(broken.id).pid, signal.SIGKILL)
    wait_for(lambda: orch.manager.get(broken.id).status != "running", what="the VNF seen dead")
    nothing = dead.launch_started("local", "fw", 0.1, token="toknoinst")
    dead_ns = dead.add_ns(name="ns-of-the-dead", nsd_id="nsd", zone="local", status="deploying")
    # a running NS whose scale-out the dead one had launched but not recorded yet
    scaling = dead.add_ns(name="ns-scaling", nsd_id="nsd", zone="local", status="running",
                          services=["nsx-fw"], instances=[])
    extra = zone.launch(LaunchRequest(service="nsx-fw", click_config=FORWARD, slots=8))
    dead.add_instance(id=extra.id, zone="local", host=extra.host, service="nsx-fw",
                      name=extra.name, status="running", slots_total=8)
    scale_op = dead.op_started(scaling.id, "scale", aspect="fw/pool", direction="out")
    live = Store(orch.conf.orchestrator.connection)
    live.owner = orch.members.id                   # an NS deploy under way at a live worker
    live_ns = live.add_ns(name="ns-alive", nsd_id="nsd", zone="local", status="deploying")
    peer = env.start(active_active=True, worker_heartbeat_interval=0.2, worker_dead_after=5.0)
    assert live.network_service("ns-alive").status == "deploying"   # a peer's start leaves it
    with dead.Session.begin() as s:                # its heartbeat stopped a while ago
        s.execute(sa.update(WorkerRow).where(WorkerRow.id == "dead-worker")
                  .values(heartbeat_at=0.0))
    wait_for(lambda: "dead-worker" in orch.members.recovered + peer.members.recovered,
             what="the take-over (by exactly one of the two)")
    assert (orch.members.recovered + peer.members.recovered).count("dead-worker") == 1
    # none of them counts as a launch-time sample (those are the successful ones)
    assert dead.launches(in_flight=False, limit=100) == []
    with dead.Session() as s:
        closed = {r.id: r for r in s.scalars(sa.select(LaunchRow))}
    assert all(closed[i].finished_at and closed[i].ok is False for i in (runs, crashed, nothing))
    assert f"instance {ran.id} runs and was adopted" in closed[runs].error
    assert f"instance {broken.id} (error) was removed" in closed[crashed].error
    assert closed[nothing].error == "orchestrator dead-worker died during the launch"
    recorded = {i.id: i for i in orch.store.instances()}
    assert ran.id in recorded and recorded[ran.id].slots_total == 8
    assert broken.id not in recorded
    assert [r.id for r in orch.manager.list()] == [ran.id]     # the scale-out's extra is gone
    assert "dead-worker" not in {w.id for w in orch.store.workers()}
    # the interrupted deploy was rolled back (deleted), the interrupted scale-out lost what it
    # launched, a live worker's deploy was left alone
    assert live.network_service(dead_ns.id).status == "deleted"
    assert live.network_service(scaling.name).status == "running"
    (op,) = live.ns_operations(scaling.id)
    assert (op.id, op.state) == (scale_op, "failed")
    assert extra.id not in {i.id for i in live.instances()}
    assert live.network_service(live_ns.name).status == "deploying"
    dead.close()
    live.close()
