# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Orchestrators sharing one database (fluidvim.orchestrator.ha, SharedSlotRegistry): on SQLite
(a file, flock) and on a real PostgreSQL server (advisory locks), with real processes racing."""

import multiprocessing
import time

import pytest

from fluidvim.orchestrator.db import Store
from fluidvim.orchestrator.ha import Membership
from fluidvim.orchestrator.slots import SharedSlotRegistry, SlotRegistry, SlotReport
from tests import pgserver

SLOTS = 12


@pytest.fixture(scope="module")
def pg():
    if pgserver.bindir() is None:
        pytest.skip("PostgreSQL server binaries not installed (tools/bootstrap.sh)")
    server = pgserver.PgServer().start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/orch.sqlite"
    return request.getfixturevalue("pg").create_database()


def _report(slots=SLOTS, at=None):
    return SlotReport(zone="z1", host="h1", instance="i1", service="fw", slots=slots,
                      delay_s=0.1, at=at or time.time(), exact=slots)


def _grab(url, n, out):
    """A separate process: ``n`` times, decide and reserve a slot if one is free."""
    store = Store(url)
    reg = SharedSlotRegistry(store, reservation_ttl=300)
    got = 0
    for _ in range(n):
        with reg.decision():
            free = sum(f for _, f in reg.entries("fw"))
            if free > 0:
                time.sleep(0.002)          # widen the read-then-write window
                reg.reserve("i1", "fw")
                got += 1
    out.put(got)
    store.close()


def test_a_slot_is_never_handed_out_twice_across_processes(url):
    store = Store(url)
    SharedSlotRegistry(store).apply(_report())
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_grab, args=(url, SLOTS, out)) for _ in range(3)]
    for p in procs:
        p.start()
    grants = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert sum(grants) == SLOTS, grants         # 36 asks, 12 slots: each granted once
    assert len(store.reservations()[("i1", "fw")]) == SLOTS
    store.close()


def _notify(url, rank, keys, go, out):
    """A separate process, as an orchestrator at start and then on every slot notification:
    upsert the zone and its hosts, then store each report (every process gets the same ones)."""
    from fluidvim.common.zonetypes import HostInfo
    from fluidvim.evaluator.model import EnvironmentType
    store = Store(url)
    reg = SharedSlotRegistry(store)
    go.wait(30)
    try:
        env = EnvironmentType(launcher="nomad", accel="kvm", machine="microvm", cpu_model="x")
        store.upsert_zone("z1", "nomad", "r1")
        store.sync_hosts("z1", [HostInfo(name=f"h{i}", env=env) for i in range(3)])
        for k in range(keys):
            reg.apply(SlotReport(zone="z1", host="h1", instance=f"i{k}", service="fw",
                                 slots=rank, delay_s=0.1, at=1000.0 + k + rank / 10,
                                 exact=rank))
        out.put(None)
    except Exception as e:  # noqa: BLE001 - reported by the test
        out.put(repr(e))
    store.close()


def test_the_same_rows_written_at_once_by_every_process(url):
    """Each process receives every slot notification and upserts the same zone at start: no
    unique violation, and the newest report of each instance wins whoever wrote last."""
    Store(url).close()
    ctx = multiprocessing.get_context("spawn")
    out, go = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_notify, args=(url, rank, 40, go, out)) for rank in (1, 2, 3)]
    for p in procs:
        p.start()
    time.sleep(1.0)                       # every process imported and connected
    go.set()
    errors = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert errors == [None] * 3, errors
    store = Store(url)
    rows = {r.instance: r for r in store.slot_reports()}
    assert len(rows) == 40
    assert {r.slots for r in rows.values()} == {3}        # the newest (rank 3) of each
    assert [h.name for h in store.hosts("z1")] == ["h0", "h1", "h2"]
    store.close()


def test_what_one_orchestrator_reserves_the_other_sees(url):
    a, b = Store(url), Store(url)
    ra, rb = SharedSlotRegistry(a, reservation_ttl=300), SharedSlotRegistry(b, reservation_ttl=300)
    ra.apply(_report(slots=5))
    ra.reserve("i1", "fw", 2)
    assert [f for _, f in rb.entries("fw")] == [3]
    # an older report (out of order, received by the other) does not win
    rb.apply(_report(slots=5, at=time.time() - 60))
    assert [r.slots for r in ra.reports()] == [5]
    rb.forget("i1")
    assert ra.entries("fw") == [] and a.reservations() == {}
    a.close()
    b.close()


def test_reservations_end_as_in_the_in_memory_registry(url):
    """Same rule: a reservation counts for reservation_ttl, then until a newer report."""
    now = [1000.0]
    store = Store(url)
    shared = SharedSlotRegistry(store, reservation_ttl=5, clock=lambda: now[0])
    local = SlotRegistry(reservation_ttl=5, clock=lambda: now[0])
    for reg in (shared, local):
        reg.apply(_report(slots=4, at=999.0))
        reg.reserve("i1", "fw", 3)
    now[0] = 1010.0                               # past the ttl, but no newer report yet
    assert [f for _, f in shared.entries("fw", now=now[0])] == \
        [f for _, f in local.entries("fw", now=now[0])] == [1]
    for reg in (shared, local):
        reg.apply(_report(slots=2, at=1009.0))   # the instance now shows them used
    assert [f for _, f in shared.entries("fw", now=now[0])] == \
        [f for _, f in local.entries("fw", now=now[0])] == [2]
    assert store.reservations() == {}             # ended reservations are deleted
    store.close()


def test_aliases_come_from_the_services_table(url):
    store = Store(url)
    reg = SharedSlotRegistry(store, reservation_ttl=300)
    store.put_service("fw", {"click_config": "x"}, {"premium": 3.0}, 1.0)
    reg.apply(_report(slots=7))
    assert [f for _, f in reg.entries("premium")] == [2]
    store.close()


def test_a_dead_worker_is_taken_over_once(url):
    stores = [Store(url) for _ in range(3)]
    recovered = []
    dead, a, b = (Membership(s, interval=0.1, dead_after=0.5,
                             recover=lambda wid, me=i: recovered.append((me, wid)))
                  for i, s in enumerate(stores))
    for m in (dead, a, b):
        m.register()
    assert a.reap() == [] and b.reap() == []      # everyone alive
    time.sleep(0.7)
    b.store.heartbeat(b.id)                       # b beats; dead has gone quiet
    assert a.tick() == []                         # not ready (zones unknown): beats only
    a.ready()
    taken = a.tick() + b.reap()                   # a beats and looks, then b looks
    assert taken == [dead.id]
    assert len(recovered) == 1 and recovered[0][1] == dead.id
    assert {w.id for w in stores[0].workers()} == {a.id, b.id}
    # a worker that was declared dead but is alive registers again on its next beat
    assert dead.tick() == []
    assert dead.id in {w.id for w in stores[0].workers()}
    # the oldest live worker leads (runs the NS scaler); it passes on when it leaves
    leader = min((m for m in (dead, a, b)), key=lambda m: next(
        w.started_at for w in stores[0].workers() if w.id == m.id))
    assert [m.is_leader() for m in (dead, a, b)].count(True) == 1 and leader.is_leader()
    leader.stop()
    assert [m.is_leader() for m in (dead, a, b) if m is not leader].count(True) == 1
    for m in (dead, a, b):
        m.stop()
    assert stores[0].workers() == []
    for s in stores:
        s.close()


def test_launch_records_carry_their_owner_and_only_a_dead_owners_are_failed(url):
    s1, s2 = Store(url), Store(url)
    s1.owner, s2.owner = "w1", "w2"
    l1 = s1.launch_started("z1", "fw", 0.1, token="tok1")
    l2 = s2.launch_started("z1", "fw", 0.1, token="tok2")
    assert [(r.owner, r.token) for r in s1.launches(in_flight=True, owner="w1")] == [("w1", "tok1")]
    assert s1.abandon_launch(l1, "orchestrator w1 died") == 1
    assert s1.abandon_launch(l1, "again") == 0    # only once
    assert [r.id for r in s2.launches(in_flight=True)] == [l2]
    assert s2.abandon_in_flight(owners=[None]) == 0   # not a row without owner
    s1.close()
    s2.close()
