# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""NS lifecycle beyond deploy/remove with real VNFs under QEMU and real RabbitMQ (the orchestrator
as a service, its scaler loop and slot agent running):

* a load of sessions (``resolve`` over RPC, each holding a slot) that fills the slots of the
  sample reflector NS (``etc/mano/reflector_ns``, 16 slots per instance, a tolerable queuing delay
  below a launch: a session finding no slot is refused) makes the scaler scale out before any
  session is refused; the new instances' NICs are on the NS's virtual link; when the sessions end
  and the slots stay idle it scales in, and nothing of the removed instances is left (VNF, tap,
  instance, slot entry);
* killing the firewall VNF of the sample chain (its QEMU, SIGKILL) while ping runs through the
  chain: the scaler heals it (a new VNF with its NICs on the same virtual links), the NS record
  and the slot registry follow, and traffic passes again;
* ``fluidvim ns scale`` / ``ns heal`` / ``ns show`` as a user runs them.

Names: NS ``fl<hex>``, netns/veths ``fl<hex>``, run dirs /run/fluidvim-fl-*.
"""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from fluidvim.orchestrator.exception import NotFound, Refused
from fluidvim.orchestrator.mano import descriptors
from fluidvim.orchestrator.mano.rpcapi import NSAPI
from fluidvim.vnf import netdev, spec, testnet

from .conftest import leaked_taps, orchestrator_env
from .test_orchestrator import rabbit_up

pytestmark = pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on "
                                "127.0.0.1:5672: run tools/bootstrap.sh")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANO = os.path.join(REPO, "etc", "mano")
REFL_NSD = os.path.join(MANO, "reflector_ns", "reflector_nsd.yaml")
REFL_VNFD = os.path.join(MANO, "reflector_vnf", "reflector_vnfd.yaml")
CHAIN_NSD = os.path.join(MANO, "fw_chain_ns", "fw_chain_nsd.yaml")
CHAIN_VNFDS = [os.path.join(MANO, "firewall_vnf", "firewall_vnfd.yaml"),
               os.path.join(MANO, "forwarder_vnf", "forwarder_vnfd.yaml")]
WAIT_S = 120.0                  # an upper bound for the scaler to act, never a measured time


@pytest.fixture
def env(tmp_path):
    with orchestrator_env(tmp_path, "fl", 86) as e:
        yield e


def docs(nsd, vnfds, tweak=None):
    _plan, n, vs = descriptors.plan_files(nsd, vnfds)
    vs = [v.to_dict() for v in vs]
    if tweak:
        tweak(vs)
    return n.to_dict(), vs


def wait_for(fn, what):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def ops(shown, type_):
    return [o for o in shown["operations"] if o["type"] == type_]


def remove_ns(orch, name):
    try:
        orch.ns.delete(name)
    except (NotFound, Refused):
        pass


def test_slots_filling_scale_out_before_refusal_then_in_leaving_nothing(env):
    # sessions are held 8 s (reservation_ttl), then the VNFs' own reports (no flows) free them
    orch = env.start(reservation_ttl=8.0, ns_scaler_interval=0.2)
    ns_api = NSAPI(api=env.api())
    api = env.api()
    name = f"fl{uuid.uuid4().hex[:6]}"

    def tweak(vs):
        v = vs[0]["doc"]["vnfd"]
        props = v["configurable-properties"]["additional-configurable-property"]
        props += [{"key": "fluidvim-scale-out-free-slots", "value": 7},   # 1.75 s at 4/s
                  # (at most 7: a scale-in back to one instance of 16 slots must keep > 2 x 7)
                  {"key": "fluidvim-scale-in-idle-s", "value": 2}]
        v["df"][0]["scaling-aspect"][0]["scaling-policy"][0]["cooldown-time"] = 1
    r = ns_api.deploy(*docs(REFL_NSD, [REFL_VNFD], tweak), name=name)
    try:
        svc = r["services"][0]
        (first,) = r["instances"]
        access = r["networks"][0]
        assert r["scaling"][0]["aspect"] == "refl/sessions" and r["scaling"][0]["level"] == 0
        # the load: 4 sessions/s until 24 are held (one instance has 16 slots)
        granted = []
        t0 = time.monotonic()
        for k in range(24):
            time.sleep(max(0.0, t0 + k * 0.25 - time.monotonic()))
            granted.append(api.resolve(svc))          # Refused would fail the test here
        shown = ns_api.show(name)
        outs = [o for o in ops(shown, "scale") if o["detail"]["direction"] == "out"]
        assert outs and all(o["state"] == "completed" for o in outs), shown["operations"]
        assert outs[0]["detail"]["trigger"] == "slots", outs[0]
        assert len(shown["instances"]) >= 2 and shown["scaling"][0]["level"] >= 1
        # sessions went to the new instances too, whose NICs are on the access link
        assert {g["instance"] for g in granted} - {first["id"]}
        ports = next(n for n in shown["networks"] if n["link"] == "access")["ports"]
        for i in shown["instances"]:
            assert orch.manager.get(i["id"]).status == "running"
            assert spec.tap_for(i["id"], 0) in ports
            assert netdev.master_of(spec.tap_for(i["id"], 0)) == access["id"]
        added = [i["id"] for i in shown["instances"] if i["id"] != first["id"]]
        # the sessions end; the slots stay idle: back to level 0, one instance
        # (the level is recorded as a step of the operation, before the operation ends)
        shown = wait_for(lambda: (lambda s: s if s["scaling"][0]["level"] == 0 and all(
            o["state"] != "processing" for o in ops(s, "scale")) else None)(
            ns_api.show(name)), "the scale-in to level 0 and its operation's end")
        ins = [o for o in ops(shown, "scale") if o["detail"]["direction"] == "in"]
        assert ins and all(o["state"] == "completed" and o["detail"]["trigger"] == "slots"
                           for o in ins)
        assert [i["id"] for i in shown["instances"]] == [first["id"]]
        # nothing of the removed instances is left
        assert {rec.id for rec in orch.manager.list()} == {first["id"]}
        assert not leaked_taps(added)
        assert next(n for n in shown["networks"] if n["link"] == "access")["ports"] == [
            spec.tap_for(first["id"], 0)]
        assert [i["id"] for i in api.list_instances(svc)] == [first["id"]]
        assert set(api.slots(svc, level="instance")[svc]) == {first["id"]}
        assert {row.instance for row in orch.store.slot_reports()} == {first["id"]}
        out = ns_api.delete(name)
    finally:
        remove_ns(orch, name)
    assert out["deleted"] == name and orch.manager.list() == []
    assert not leaked_taps(added + [first["id"]])
    assert not netdev.exists(access["id"])
    assert api.list_services() == [] and api.list_instances() == []
    assert ops(ns_api.show(r["id"]), "terminate")[0]["state"] == "completed"


def test_killed_vnf_under_traffic_is_healed_on_the_same_links(env):
    orch = env.start(ns_scaler_interval=0.2)
    ns_api = NSAPI(api=env.api())
    name = f"fl{uuid.uuid4().hex[:6]}"
    r = ns_api.deploy(*docs(CHAIN_NSD, CHAIN_VNFDS), name=name)
    try:
        nets = {n["link"]: n for n in r["networks"]}
        fw = next(i for i in r["instances"] if i["profile"] == "fw")
        with testnet.TestNet("fl", 86, bridges=(nets["left"]["id"], nets["right"]["id"])) as net:
            assert net.ping(count=3) >= 2
            # traffic through the chain while the firewall dies
            pinger = net.popen("a", "ping", "-n", "-i", "0.05", "-W", "1", net.ip_b,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                time.sleep(0.5)
                os.kill(orch.manager.get(fw["id"]).pid, signal.SIGKILL)
                shown = wait_for(lambda: (lambda s: s if [o for o in ops(s, "heal")
                                                          if o["state"] != "processing"]
                                          else None)(ns_api.show(name)), "the heal")
                time.sleep(1.0)
            finally:
                pinger.send_signal(signal.SIGINT)
                summary = pinger.communicate(timeout=30)[0].strip().splitlines()[-2:]
            print(f"ping through the chain while the firewall was killed and healed: {summary}")
            (heal,) = ops(shown, "heal")
            assert (heal["state"], heal["detail"]["trigger"]) == ("completed", "dead"), heal
            assert heal["detail"]["instance"] == fw["name"]
            new = next(i for i in shown["instances"] if i["profile"] == "fw")
            assert new["id"] != fw["id"] and new["status"] == "running"
            assert heal["detail"]["replaced_by"] == new["name"]
            # traffic passes again, through the new firewall on the same links
            assert net.ping(count=5) >= 1
        assert orch.manager.get(new["id"]).status == "running"
        assert netdev.master_of(spec.tap_for(new["id"], 0)) == nets["left"]["id"]
        assert netdev.master_of(spec.tap_for(new["id"], 1)) == nets["middle"]["id"]
        shown = ns_api.show(name)                   # (the namespaces' veths are gone)
        ports = {n["link"]: sorted(n["ports"]) for n in shown["networks"]}
        fwd = next(i for i in shown["instances"] if i["profile"] == "fwd")
        assert ports == {"left": [spec.tap_for(new["id"], 0)],
                         "middle": sorted([spec.tap_for(new["id"], 1),
                                           spec.tap_for(fwd["id"], 0)]),
                         "right": [spec.tap_for(fwd["id"], 1)]}
        # the record and the slot accounting follow: the dead one is gone everywhere
        assert fw["id"] not in {rec.id for rec in orch.manager.list()}
        assert not leaked_taps([fw["id"]])
        api = env.api()
        assert [i["id"] for i in api.list_instances(f"{name}-fw")] == [new["id"]]
        assert set(api.slots(f"{name}-fw", level="instance")[f"{name}-fw"]) == {new["id"]}
        assert counter_out(orch, new["id"]) > 0
        ns_api.delete(name)
    finally:
        remove_ns(orch, name)
    assert orch.manager.list() == []


def counter_out(orch, vid):
    stats = orch.manager.stats(vid)
    return next(e["count"] for e in stats["elements"] if e["name"] == "out")


def test_cli_scale_heal_show(env):
    orch = env.start(ns_scaler_interval=0.0)        # by request only
    exe = os.path.join(os.path.dirname(sys.executable), "fluidvim")
    topic = ["--topic", env.conf.orchestrator.topic]

    def cli(*argv, ok=True):
        r = subprocess.run([exe, *argv, *topic], capture_output=True, text=True, timeout=300)
        assert (r.returncode == 0) == ok, (argv, r.returncode, r.stdout, r.stderr[-2000:])
        return r

    name = f"fl{uuid.uuid4().hex[:6]}"
    try:
        cli("ns", "deploy", REFL_NSD, "--vnfd", MANO, "--name", name)
        out = cli("ns", "scale", name, "sessions", "--out").stdout
        assert f"network service {name}: scaled out refl/sessions to level 1" in out
        show = cli("ns", "show", name).stdout
        assert show.count("  instance ") == 2
        assert "aspect refl/sessions: level 1 of 3, automatic from slots" in show
        assert "scale out refl/sessions 0->1 (request): completed" in show
        inst = orch.ns.show(name)["instances"][1]["name"]
        out = cli("ns", "heal", name, inst).stdout
        assert f"{inst} replaced by {name}-refl." in out
        assert "scaled in" in cli("ns", "scale", name, "sessions", "--in").stdout
        bad = cli("ns", "scale", name, "sessions", "--in", ok=False)
        assert "scale in of refl/sessions refused: aspect sessions is at scale level 0" in \
            bad.stderr
        show = cli("ns", "show", name).stdout
        assert show.count("  instance ") == 1 and "heal " in show and "(request): completed" in show
        cli("ns", "rm", name)
    finally:
        remove_ns(orch, name)
    assert orch.manager.list() == []
