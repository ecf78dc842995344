# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The orchestrator's read-only ``fluidvim`` commands while its broker is down (a transport URL
where nothing listens: the shared RabbitMQ is not stopped): each answers from the orchestrator's
database (SQLite, then PostgreSQL) with one warning line naming what is down and how to bring it
back, and its answer is the orchestrator's own where the database has it; what only the zones
know now is None, and the slot figures are the last reports with their time. Every other
command says the same in one error line, exit 2, nothing on stdout."""

import json
import time
import uuid

import pytest

from fluidvim.cmd import cli
from fluidvim.orchestrator.slots import SlotReport
from tests.integration.test_orchestrator import rabbit_up

from .test_mano_descriptors import pkg  # noqa: F401 - fixture
from .test_mano_scaling import deploy_scaled
from .test_mano_service import orch_factory  # noqa: F401 - fixture

DEAD = "rabbit://guest:guest@127.0.0.1:1/"
DOWN = "fluidvim: warning: cannot reach the message broker (127.0.0.1:1: "


def run(capsys, conf, *argv):
    rc = cli.main(["--config-file", str(conf), *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return rc, out, err.strip().splitlines()


def answered(capsys, conf, *argv, json_out=True):
    rc, out, err = run(capsys, conf, *argv, *(["--json"] if json_out else []))
    assert rc == 0 and len(err) == 1, (argv, err)
    assert err[0].startswith(DOWN) and "start RabbitMQ (systemctl start rabbitmq-server)" in \
        err[0] and err[0].endswith("listed from the orchestrator's database, as last stored"), err
    return json.loads(out) if json_out else out


def same(live):
    return json.loads(json.dumps(live, default=str))


@pytest.fixture
def stored(orch_factory, pkg, tmp_path):  # noqa: F811
    """An orchestrator that deployed and scaled an NS and placed a service; its database; a
    CLI configuration naming that database and a dead broker."""
    orch = orch_factory()
    deploy_scaled(orch, pkg)
    ns = orch.ns.show("sc1")
    orch.ns.scale("sc1", ns["scaling"][0]["aspect"], "out")
    orch.place(ns["services"][0])
    # a slot update with the VNF's watts per slot, as the notification listener applies it
    inst = orch.store.instances()[0]
    rep = SlotReport(zone=inst.zone, host=inst.host, instance=inst.id, service=inst.service,
                     slots=inst.slots_total - 1, delay_s=0.1, at=time.time(),
                     exact=inst.slots_total - 1, watts_per_slot=0.25)
    orch.registry.apply(rep)
    orch.store.save_slot_report(rep)
    # a host drained for power-off, as host power control records it
    orch.store.set_host_power(inst.zone, inst.host, "draining", in_service=False, power="On",
                              error=None, detail={"reason": "consolidate"}, since=time.time())
    conf = tmp_path / "down.conf"
    conf.write_text(f"[orchestrator]\nconnection = {orch.conf.orchestrator.connection}\n"
                    f"transport_url = {DEAD}\n")
    return orch, conf


def test_read_only_commands_answer_from_the_database(stored, capsys):
    orch, conf = stored
    assert answered(capsys, conf, "service", "list") == same(orch.list_services())
    assert answered(capsys, conf, "instance", "list") == same(orch.list_instances())
    decisions = answered(capsys, conf, "placement", "list")
    assert decisions == same(orch.list_decisions()) and decisions
    did = decisions[0]["id"]
    assert answered(capsys, conf, "placement", "explain", did[:8]) == same(orch.explain(did))
    assert answered(capsys, conf, "ns", "list") == same(orch.ns.list())
    hosts = answered(capsys, conf, "power", "hosts")
    assert hosts == same(orch.power_hosts()) and [h["state"] for h in hosts] == ["draining"]

    # ns show: the record as the orchestrator shows it; the zone's networks are not checked
    live, shown = same(orch.ns.show("sc1")), answered(capsys, conf, "ns", "show", "sc1")
    assert [(n["exists"], n["ports"]) for n in shown["networks"]] == \
        [(None, None)] * len(live["networks"])
    for n in live["networks"]:
        n["exists"] = n["ports"] = None
    assert shown == live and len(shown["operations"]) == 2
    text = answered(capsys, conf, "ns", "show", "sc1", json_out=False)
    assert "not checked in the zone" in text and "GONE" not in text

    # zones: as last synced; CPU load, slots and queuing delay only the zone knows: None
    zones = answered(capsys, conf, "zone", "list")
    live = orch.list_zones()
    assert [(z["name"], z["kind"], z["region"]) for z in zones] == \
        [(z["name"], z["kind"], z["region"]) for z in live]
    for z, lz in zip(zones, live):
        assert z["queuing_delay"] is None
        assert [(h["name"], h["env_uid"]) for h in z["hosts"]] == \
            [(h["name"], h["env_uid"]) for h in lz["hosts"]]
        for h in z["hosts"]:
            mine = [i for i in orch.store.instances(zone=z["name"]) if i.host == h["name"]]
            reps = [r for r in orch.store.slot_reports() if (r.zone, r.host) ==
                    (z["name"], h["name"])]
            assert (h["cpu_util"], h["slots_free"], h["slots_total"]) == (None, None, None)
            assert h["instances"] == len(mine) and h["instance_slots"] == sum(
                i.slots_total for i in mine)
            assert h["reported_free"] == (sum(r.slots for r in reps) if reps else None)
    assert sum(h["instances"] for z in zones for h in z["hosts"]) == len(orch.list_instances())
    text = answered(capsys, conf, "zone", "list", json_out=False)
    assert "cpu not known" in text and "as last reported (" in text and \
        "queuing delay: not known" in text

    # slots: the last reports' figures with their time (nothing handed out here, so they are
    # the orchestrator's own counts)
    for level in ("instance", "host", "zone", "region"):
        got = answered(capsys, conf, "slots", "--level", level)
        assert {s: {k: v["free"] for k, v in per.items()} for s, per in got.items()} == \
            orch.slots(level=level), level
        at = {r.instance: r.at for r in orch.store.slot_reports()}
        if level == "instance":
            assert all(v["reported_at"] == at[k] for per in got.values()
                       for k, v in per.items())
    text = answered(capsys, conf, "slots", json_out=False)
    assert "(as last reported, " in text and " s ago)" in text
    got = answered(capsys, conf, "slots", "--level", "host", "--watts")
    assert got == {svc: {k: {**v, "reported_at": got[svc][k]["reported_at"]} for k, v in
                         per.items()} for svc, per in orch.slots(level="host", watts=True).items()}
    assert {v["watts_per_slot"] for per in got.values() for v in per.values()} == {None, 0.25}
    text = answered(capsys, conf, "slots", "--watts", json_out=False)
    assert "(0.2500 W/slot) (as last reported, " in text, text

    # a record the database does not have: the warning, then one error line
    rc, out, err = run(capsys, conf, "placement", "explain", "ffffffff")
    assert rc == 2 and out == "" and len(err) == 2 and err[0].startswith(DOWN)
    assert err[1] == ("fluidvim: error: decision: no placement decision 'ffffffff' (see "
                      "`fluidvim placement list`)"), err


def test_other_commands_say_what_is_down_in_one_line(stored, capsys):
    for argv in (("resolve", "x"), ("service", "rm", "x"), ("place", "x"), ("ns", "rm", "x"),
                 ("ns", "scale", "x", "a", "--out"), ("instance", "rm", "x"),
                 ("network", "list"), ("power", "plan")):
        rc, out, err = run(capsys, stored[1], *argv)
        assert rc == 2 and out == "" and len(err) == 1, (argv, err)
        assert err[0].startswith("fluidvim: error: cannot reach the message broker "
                                 "(127.0.0.1:1: "), err
        assert err[0].endswith("start RabbitMQ (systemctl start rabbitmq-server), or fix "
                               "[orchestrator] transport_url / --transport-url"), err


@pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on 127.0.0.1:5672")
def test_no_orchestrator_on_the_topic_answers_from_the_database(stored, capsys):
    # the broker answers, no orchestrator consumes the topic: the read-only command's ping
    # times out (at most --rpc-timeout), not its whole call, and the database answers
    orch, conf = stored
    conf.write_text(f"[orchestrator]\nconnection = {orch.conf.orchestrator.connection}\n")
    rc, out, err = run(capsys, conf, "service", "list", "--json", "--rpc-timeout", "1",
                       "--topic", f"fvo-unit-nobody-{uuid.uuid4().hex[:8]}")
    assert rc == 0 and len(err) == 1, err
    assert err[0].startswith("fluidvim: warning: no reply from the orchestrator on topic "
                             "'fvo-unit-nobody-") and "is fluidvim-orchestrator running" in err[0]
    assert json.loads(out) == same(orch.list_services())


def test_api_down_answers_from_the_database(stored, capsys):
    # through fluidvim-api (--api-url) with nothing listening there: the same answers
    orch, conf = stored
    url = "http://127.0.0.1:1"
    for argv, live in ((("ns", "list"), orch.ns.list()),
                       (("placement", "list"), orch.list_decisions())):
        rc, out, err = run(capsys, conf, *argv, "--json", "--api-url", url)
        assert rc == 0 and len(err) == 1, err
        assert err[0].startswith(f"fluidvim: warning: cannot reach fluidvim-api at {url} ("), err
        assert err[0].endswith("listed from the orchestrator's database, as last stored"), err
        assert json.loads(out) == same(live)
    rc, out, err = run(capsys, conf, "zone", "list", "--api-url", url)
    assert rc == 0 and "cpu not known" in out and len(err) == 1, err
