# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The resolver's confirm step: a view that says "full" is checked against the zones' own
reading before a session is refused (or an instance launched)."""

import threading

from fluidvim.common.errors import DependencyDown
from fluidvim.common.zonetypes import ZoneError
from fluidvim.orchestrator.resolver import Resolver, reading_payload
from fluidvim.orchestrator.slots import SlotRegistry, SlotReport


class Zone:
    """A zone whose slot agent reads ``instance_slots`` (the local and Nomad zones' call)."""

    def __init__(self, name, slots, region="r"):
        self.name, self.region, self.slots, self.reads = name, region, slots, 0

    def instance_slots(self):
        self.reads += 1
        if isinstance(self.slots, Exception):
            raise self.slots
        return self.slots


class HostsPublish:
    """A zone whose hosts publish their own slots (a Nova zone): nothing to read here."""

    name, region = "nova", "r"


def resolver(reg, zones, **kw):
    """A resolver whose confirm waits as long as a test's zones take (their readings are
    immediate; a deadline that depended on the test host's load would make the test race)."""
    return Resolver(None, reg, zones, None, **{"confirm_timeout": 60.0, **kw})


def registry_with(*reports, clock=None):
    reg = SlotRegistry(ttl=3600, reservation_ttl=3600, **({"clock": clock} if clock else {}))
    for zone, inst, free, opened in reports:
        reg.apply_message({"zone": zone, "host": "h", "instance": inst, "service": "svc",
                           "region": "r", "at": reg.clock() - 1.0, "s": free.bit_length(), "m": 1,
                           "q": 2, "exact": free, "opened": opened})
    return reg


def test_a_full_view_is_read_again_and_the_freed_slot_used():
    reg = registry_with(("z1", "a", 0, 10))
    z1 = Zone("z1", {"a": {"service": "svc", "free": 2, "opened": 10}})
    res = resolver(reg, {"z1": z1})
    with reg.decision():
        hit = res.free_slot("svc", None)
    assert hit is not None and hit[1].instance == "a" and hit[2] == 2
    assert (res.confirms, res.confirmed_room, z1.reads) == (1, 1, 1)
    rep = reg.reports()[0]
    assert rep.exact == 2 and rep.delay_s == 0.4          # the last report's delay is kept


def test_a_view_with_room_reads_nothing():
    reg = registry_with(("z1", "a", 3, 10))
    z1 = Zone("z1", {"a": {"service": "svc", "free": 0}})
    res = resolver(reg, {"z1": z1})
    assert res.free_slot("svc", None)[1].instance == "a"
    assert (res.confirms, z1.reads) == (0, 0)


def test_confirmed_full_refuses_and_only_zones_running_the_service_are_read():
    reg = registry_with(("z1", "a", 0, 10), ("nova", "b", 0, 4))
    z1 = Zone("z1", {"a": {"service": "svc", "free": 0, "opened": 10},
                     "x": {"service": "other", "free": 9}})
    idle = Zone("z3", {"c": {"service": "svc", "free": 5}})     # no instance in the registry
    res = resolver(reg, {"z1": z1, "nova": HostsPublish(), "z3": idle})
    assert res.free_slot("svc", None) is None
    assert (res.confirms, res.confirmed_room, z1.reads, idle.reads) == (1, 0, 1, 0)
    assert {r.instance for r in reg.reports()} == {"a", "b"}    # "other"'s x not taken in
    only_nova = resolver(reg, {"nova": HostsPublish()})
    assert only_nova.free_slot("svc", None) is None and only_nova.confirms == 0   # none read


def test_slots_handed_out_still_connecting_are_not_handed_out_again():
    t = [2000.0]
    reg = registry_with(("z1", "a", 2, 10), clock=lambda: t[0])
    reg.reserve("a", "svc", 2)                           # two clients given a slot, not connected
    z1 = Zone("z1", {"a": {"service": "svc", "free": 2, "opened": 10}})
    res = resolver(reg, {"z1": z1})
    t[0] = 2001.0
    assert res.free_slot("svc", None) is None            # the VNF's 2 free are theirs
    # one connected (opened 10 -> 11) and another session ended: the VNF has 2 free, 1 pending
    z1.slots = {"a": {"service": "svc", "free": 2, "opened": 11}}
    t[0] = 2002.0
    hit = res.free_slot("svc", None)
    assert hit is not None and hit[2] == 1


def test_a_zone_that_cannot_be_read_is_skipped():
    reg = registry_with(("z1", "a", 0, 10), ("z2", "b", 0, 3), ("z0", "c", 0, 1))
    z1 = Zone("z1", ZoneError("zone z1: Nomad API down"))
    z0 = Zone("z0", DependencyDown("the database", "connect refused", "start it"))
    z2 = Zone("z2", {"b": {"service": "svc", "free": 1, "opened": 3, "delay_s": 1.5}})
    res = resolver(reg, {"z0": z0, "z1": z1, "z2": z2})
    hit = res.free_slot("svc", None)
    assert hit[1].instance == "b" and hit[1].delay_s == 1.6    # the reading's delay, coded
    assert (z0.reads, z1.reads, z2.reads) == (1, 1, 1)


class Stuck(Zone):
    """A zone whose reading does not come back until the test lets it (Nomad's API hung)."""

    def __init__(self, name, slots):
        super().__init__(name, slots)
        self.gate = threading.Event()

    def instance_slots(self):
        self.reads += 1
        self.gate.wait()
        return self.slots


def test_a_zone_that_does_not_answer_in_time_is_skipped_and_not_asked_again_meanwhile():
    reg = registry_with(("slow", "a", 0, 10))
    slow = Stuck("slow", {"a": {"service": "svc", "free": 3, "opened": 10}})
    res = resolver(reg, {"slow": slow}, confirm_timeout=0.05)
    try:
        assert res.free_slot("svc", None) is None        # refused after the deadline
        assert res.free_slot("svc", None) is None        # that reading is still in flight:
        assert (slow.reads, res.confirms, res.confirm_late) == (1, 2, 2)   # not asked again
        slow.gate.set()
        res._reading["slow"].result()                    # the late answer came and was dropped
        assert reg.reports()[0].exact == 0
        res.confirm_timeout = 60.0
        hit = res.free_slot("svc", None)                 # asked again, answers at once now
        assert hit is not None and hit[2] == 3 and slow.reads == 2
    finally:
        slow.gate.set()


def test_reading_payload_is_an_exact_update():
    rep = SlotReport(zone="z", host="h", instance="i", service="s", slots=0, delay_s=None,
                     region="r", watts_per_slot=0.5)
    msg = reading_payload(rep, {"free": 12, "opened": 40, "host": "h2"}, 5.0)
    assert msg == {"zone": "z", "host": "h2", "instance": "i", "service": "s", "region": "r",
                   "at": 5.0, "s": 4, "m": 2, "q": 15, "exact": 12, "opened": 40,
                   "watts_per_slot": 0.5}


def test_first_update_carries_opened_so_later_releases_match():
    """A key's first update carries the VNF's opened counter even when not nearly full: the
    registry's baseline is taken before any of its slots is handed out, so each session that
    connects later releases its own slot (a baseline taken with slots outstanding left one
    counted for good: refused while the instance had room)."""
    import uuid

    import oslo_messaging as messaging
    from oslo_config import cfg

    from fluidvim.common.slotnotify import SlotPublisher

    class Notifier:                       # what the transport carried, decoded by the listener
        def __init__(self):
            self.sent = []

        def info(self, ctxt, event, payload):
            self.sent.append((event, payload))

    conf = cfg.ConfigOpts()
    conf([])
    transport = messaging.get_notification_transport(conf, url="fake:/")
    try:
        pub = SlotPublisher(transport, "fvo.test", f"t_{uuid.uuid4().hex[:8]}",
                            min_interval=0.0, wire="json")
        pub.notifier = Notifier()
        pub.note_opened("i", "svc", 40)
        assert pub.publish(zone="z", host="h", instance="i", service="svc", slots=64,
                           delay_s=0.1)
        pub.note_opened("i", "svc", 41)
        assert pub.publish(zone="z", host="h", instance="i", service="svc", slots=63,
                           delay_s=0.1)
    finally:
        transport.cleanup()
    first, second = (p for _, p in pub.notifier.sent)
    assert (first["exact"], first["opened"]) == (64, 40)
    assert "opened" not in second and "exact" not in second      # a bucket update: 2 bytes
    t = [100.0]
    reg = SlotRegistry(ttl=3600, reservation_ttl=3600, clock=lambda: t[0])
    reg.apply_message(dict(first, at=100.0))
    for at in (101.0, 102.0, 103.0):
        t[0] = at
        reg.reserve("i", "svc")
    t[0] = 104.0
    reg.apply_message({**first, "at": 104.0, "s": 4, "m": 2, "exact": 13, "opened": 43})
    assert reg.aggregate("svc", "instance") == {"i": 13}        # all 3 connected: released
