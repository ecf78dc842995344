# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""SlotPublisher's rules on oslo.messaging's in-process transport (the notifier and listener
are the real ones; tests/integration/test_orchestrator.py runs them over RabbitMQ): nearly full
counts travel exact and every change of one is sent; the urgent ones pass the rate limit."""

import time
import uuid

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fluidvim.common.slotnotify import SlotPublisher
from fluidvim.orchestrator.notify import SlotListener
from fluidvim.orchestrator.slots import SlotRegistry


def wait_for(pred, what, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def bus():
    conf = cfg.ConfigOpts()
    conf([])
    transport = messaging.get_notification_transport(conf, url="fake:/")
    topic = f"slots_{uuid.uuid4().hex[:8]}"
    reg = SlotRegistry(ttl=3600)
    listener = SlotListener(transport, topic, reg)
    listener.start()
    now = [100.0]
    pub = SlotPublisher(transport, "fvo.test", topic, min_interval=30.0, heartbeat=300.0,
                        clock=lambda: now[0])
    yield pub, reg, listener, now
    listener.stop()
    transport.cleanup()


WHERE = dict(zone="z", host="h", instance="i1", service="svc", region="r")


def test_nearly_full_changes_are_sent_exact(bus):
    pub, reg, listener, now = bus

    def free():
        return reg.aggregate("svc", "instance").get("i1")

    assert pub.publish(slots=40, delay_s=0.2, **WHERE)
    wait_for(lambda: free() == 40, "the first update")
    listener_seen = [reg.reports()[0].at]
    assert not pub.publish(slots=35, delay_s=0.2, **WHERE)     # a change, but rate limited
    now[0] += 30.0
    assert pub.publish(slots=35, delay_s=0.2, **WHERE)         # the same bucket, fresh: sent
    wait_for(lambda: reg.reports()[0].at > listener_seen[0], "the bucket's refresh")
    # the bucket alone (32-63): no slot was handed out since the exact 40, which it still holds
    assert free() == 40 and reg.reports()[0].at > listener_seen[0]
    assert not pub.publish(slots=35, delay_s=0.2, **WHERE)     # unchanged: nothing new
    assert pub.publish(slots=12, delay_s=0.2, **WHERE)         # into nearly full: at once
    wait_for(lambda: free() == 12, "the exact count of nearly full")
    now[0] += 30.0                                            # past the rate limit
    assert pub.publish(slots=11, delay_s=0.2, **WHERE)        # a change within bucket 8-15
    wait_for(lambda: free() == 11, "11, not the bucket's 8")
    assert not pub.publish(slots=11, delay_s=0.2, **WHERE)     # unchanged: nothing new
    assert not pub.publish(slots=10, delay_s=0.2, **WHERE)     # changed, but rate limited
    assert pub.publish(slots=0, delay_s=0.2, **WHERE)          # full: at once
    wait_for(lambda: free() == 0, "full")
    assert pub.publish(slots=1, delay_s=0.2, **WHERE)          # room again: at once
    wait_for(lambda: free() == 1, "room again")
    assert (pub.sent, pub.suppressed) == (6, 4)
    assert listener.endpoint.received == 6


class _Source:
    """A zone-like source (SlotAgent): one VNF with its attributed watts and slot capacity."""
    name, region, host_name = "z", "r", "h"

    def __init__(self):
        self.slots = {"i1": {"service": "svc", "free": 900, "total": 1000, "watts": 12.5},
                      "i2": {"service": "svc", "free": 100, "total": 1000, "watts": None}}

    def instance_slots(self):
        return self.slots


@pytest.mark.parametrize("wire", ["compact", "json"])
def test_watts_per_slot_travel_with_the_updates_into_the_registry(bus, wire):
    """The agent's watts per slot (watts / total) ride on each update, compact (the batch's
    separate ``w`` field) or JSON (``watts_per_slot``); the registry keeps them per instance and
    a level's figure is weighted by free slots; an instance with no power figure has None."""
    from fluidvim.common.slotnotify import SlotAgent
    pub, reg, listener, now = bus
    pub.wire = wire
    src = _Source()
    agent = SlotAgent(src, pub)
    assert agent.tick() == 2
    wait_for(lambda: len(reg.reports()) == 2, "both updates")
    assert {r.instance: r.watts_per_slot for r in reg.reports()} == {
        "i1": pytest.approx(0.0125), "i2": None}
    assert reg.aggregate("svc", "instance", watts=True) == {
        "i1": {"free": 900, "watts_per_slot": pytest.approx(0.0125)},
        "i2": {"free": 100, "watts_per_slot": None}}
    src.slots["i2"]["watts"] = 50.0                 # a change of watts alone sends nothing
    assert agent.tick() == 0
    now[0] += 300.0                                 # the heartbeat carries the new figure
    assert agent.tick() == 2
    wait_for(lambda: all(r.watts_per_slot for r in reg.reports()), "the heartbeat")
    # the zone's W/slot: 900 free at 0.0125 and 100 at 0.05, weighted by free slots
    (z,) = reg.aggregate("svc", "zone", watts=True).values()
    assert z == {"free": 1000, "watts_per_slot": pytest.approx((900 * 0.0125 + 100 * 0.05) / 1000)}
    assert reg.aggregate("svc", "zone") == {"z": 1000}      # without watts: as before


def test_watts_per_slot_bad_value_names_the_field():
    from fluidvim.orchestrator.slots import SlotRegistry
    reg = SlotRegistry()
    with pytest.raises(ValueError, match="watts_per_slot"):
        reg.apply_message({**WHERE, "at": 1.0, "s": 3, "m": 1, "q": 0, "watts_per_slot": -1})


def test_shared_registry_keeps_watts_per_slot_in_the_database(tmp_path):
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.slots import SharedSlotRegistry, SlotReport
    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    try:
        SharedSlotRegistry(store).apply(SlotReport(zone="z", host="h", instance="i1",
                                                   service="svc", slots=7, delay_s=0.1,
                                                   watts_per_slot=0.25))
        other = SharedSlotRegistry(store)               # another orchestrator reads it
        assert other.aggregate("svc", "host", watts=True) == {
            "z/h": {"free": 7, "watts_per_slot": 0.25}}
    finally:
        store.close()


def test_fluidvim_slots_watts_shows_each_levels_watts_per_slot(capsys):
    """``fluidvim slots --watts`` prints each level's free slots and W/slot ('-' where no VNF
    reported one); without it, the free slots alone as before."""
    import argparse

    from fluidvim.orchestrator import cli
    from fluidvim.orchestrator.slots import SlotRegistry, SlotReport
    reg = SlotRegistry()
    reg.apply(SlotReport(zone="z", host="h1", instance="i1", service="svc", slots=10,
                         delay_s=0.1, watts_per_slot=0.02))
    reg.apply(SlotReport(zone="z", host="h2", instance="i2", service="svc", slots=5, delay_s=0.1))

    class Api:
        def slots(self, service=None, level="zone", watts=False):
            return {"svc": reg.aggregate("svc", level, watts=watts)}

    p = argparse.ArgumentParser()
    cli.slots_parser(p)
    cli.cmd_slots.__wrapped__(p.parse_args(["svc", "--level", "host", "--watts"]), Api())
    assert capsys.readouterr().out == "svc: z/h1 10 (0.0200 W/slot), z/h2 5 (- W/slot)\n"
    cli.cmd_slots.__wrapped__(p.parse_args(["svc", "--level", "host"]), Api())
    assert capsys.readouterr().out == "svc: z/h1 10, z/h2 5\n"
