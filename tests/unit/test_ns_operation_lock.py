# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""One NS lifecycle operation at a time across orchestrators (``ns_locks``), and the survivor's
resumption of a dead orchestrator's operation (fluidvim.orchestrator.mano.resume): on SQLite
and on a real PostgreSQL server, the lock raced by real processes; the resumption with the
in-memory zone of test_mano_service (the real QEMU one is tests/e2e/test_ns_ha.py)."""

import multiprocessing
import threading
import time

import pytest
import sqlalchemy as sa

from fluidvim.orchestrator import conf as orchconf, states
from fluidvim.orchestrator.db import NSOperation, Store, WorkerRow
from fluidvim.orchestrator.exception import Refused
from fluidvim.orchestrator.mano import resume
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.zones.synthetic import make_fleet, seed_cache

from .test_mano_descriptors import pkg  # noqa: F401 - the descriptor package fixture
from .test_mano_scaling import deploy_scaled
from .test_mano_service import MemoryZone, bundle, orch_factory  # noqa: F401 - a fixture


def _store(url, owner):
    s = Store(url)
    s.owner = owner
    return s


def test_the_lock_is_held_renewed_released_and_taken_when_its_lease_expires(db_url):
    a, b = _store(db_url, "worker-a"), _store(db_url, "worker-b")
    assert a.take_ns_lock("ns1", "op-a", "scale", lease=30.0) is None
    held = b.take_ns_lock("ns1", "op-b", "heal", lease=30.0)
    assert (held.op_id, held.op_type, held.owner) == ("op-a", "scale", "worker-a")
    assert b.take_ns_lock("ns2", "op-b2", "heal", lease=30.0) is None     # per NS
    # a's heartbeat renews its leases only
    before = {r.ns_id: r.expires_at for r in a.ns_locks()}
    assert a.renew_ns_locks(60.0) == 1
    after = {r.ns_id: r.expires_at for r in a.ns_locks()}
    assert after["ns1"] > before["ns1"] and after["ns2"] == before["ns2"]
    # releasing needs the operation that holds it
    b.release_ns_lock("ns1", "op-b")
    assert b.take_ns_lock("ns1", "op-b", "heal", lease=30.0).op_id == "op-a"
    a.release_ns_lock("ns1", "op-a")
    assert b.take_ns_lock("ns1", "op-b", "heal", lease=30.0) is None
    # an expired lease is free; a lock without a lease (a lone orchestrator) never expires
    assert a.take_ns_lock("ns3", "op-x", "scale", lease=-1.0) is None
    assert b.take_ns_lock("ns3", "op-y", "scale", lease=30.0) is None
    assert a.take_ns_lock("ns4", "op-z", "scale", lease=None) is None
    assert b.take_ns_lock("ns4", "op-w", "scale", lease=30.0).op_id == "op-z"
    # a survivor takes a dead worker's lock for the operation it resumes, lease or not
    assert a.take_ns_lock("ns2", "op-b2", "heal", lease=30.0, steal_from="worker-b") is None
    assert {r.ns_id: r.owner for r in a.ns_locks()}["ns2"] == "worker-a"
    a.close()
    b.close()


def _race(url, owner, go, out):
    """A separate process: try to take the lock of ns1 once, when told."""
    store = _store(url, owner)
    go.wait(30)
    out.put((owner, store.take_ns_lock("ns1", f"op-{owner}", "scale", lease=30.0) is None))
    store.close()


def test_exactly_one_process_takes_the_lock(db_url):
    Store(db_url).close()                  # the schema, before processes race to create it
    ctx = multiprocessing.get_context("fork")      # nothing to import: they start at once
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(db_url, f"w{k}", go, out)) for k in range(4)]
    for p in procs:
        p.start()
    time.sleep(1.0)                        # all of them importing; then at once
    go.set()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    winners = [w for w, won in results.items() if won]
    assert len(winners) == 1, results
    (row,) = Store(db_url).ns_locks()
    assert (row.owner, row.op_id) == (winners[0], f"op-{winners[0]}")


@pytest.mark.parametrize("op_type,detail,status,expected", [
    ("instantiate", {}, "deploying", resume.RESUME),
    ("instantiate", {}, "failed", resume.ROLL_BACK),
    ("terminate", {}, "deleting", resume.RESUME),
    ("scale", {"direction": "out", "target": {"fw": 2}}, "running", resume.RESUME),
    ("scale", {"direction": "out"}, "running", resume.ROLL_BACK),        # an older record
    ("scale", {"direction": "in", "remove": ["i1"]}, "running", resume.RESUME),
    ("scale", {"direction": "in", "remove": ["i1"]}, "failed", resume.ROLL_BACK),
    ("heal", {"old_id": "i1", "target": {"fw": 1}, "pos": 0}, "running", resume.RESUME),
    ("heal", {"instance": "fw.1"}, "running", resume.ROLL_BACK),
])
def test_what_is_resumed_and_what_is_rolled_back(op_type, detail, status, expected):
    assert resume.action(op_type, detail, status) == expected


@pytest.mark.parametrize("recorded,unrecorded,target,expected", [
    (0, [], 2, ([], [], 2)),                     # nothing done yet: both launches
    (1, [], 2, ([], [], 1)),                     # one recorded: one more
    (1, ["x"], 2, (["x"], [], 0)),               # launched, not recorded: adopted
    (1, ["x", "y"], 2, (["x"], ["y"], 0)),       # beyond the target: terminated
    (2, ["x"], 2, ([], ["x"], 0)),               # all done
    (3, [], 2, ([], [], 0)),                     # never fewer than recorded here
])
def test_reconcile_reaches_the_target_without_losing_or_doubling(recorded, unrecorded, target,
                                                                 expected):
    assert resume.reconcile(recorded, unrecorded, target) == expected


def test_reconcile_refuses_negative_counts():
    with pytest.raises(ValueError, match="target -1"):
        resume.reconcile(0, [], -1)


class Killed(BaseException):
    """A kill -9 in the middle of a step: nothing after it runs, no except/finally of the
    operation (Exception handlers do not catch it; the lock is never released)."""


@pytest.fixture
def pair(db_url):
    """Two active-active orchestrators on one database and one in-memory zone: (a, b, zone).
    Their membership threads do not tick during a test (the test drives the take-over)."""
    zones, types, _labels = make_fleet(1, 1, n_env_types=1)
    zone = MemoryZone("mem", zones[0].hosts())
    made = []
    for _ in range(2):
        conf = orchconf.make_conf(connection=db_url, local_zone=False, active_active=True,
                                  worker_heartbeat_interval=3600, worker_dead_after=5.0)
        o = Orchestrator(conf, zones=[zone], power=lambda z, h: 1.0)
        seed_cache(o.placement.stage1.cache, [zone], types)
        made.append(o)
    yield made[0], made[1], zone
    for o in made:
        o.close()


def _die(orch):
    """``orch`` as killed: its heartbeat stops (the row stays, old), nothing it holds is freed."""
    orch.members._stop.set()
    orch.store.release_ns_lock = lambda *a: None
    with orch.store.Session.begin() as s:
        s.execute(sa.update(WorkerRow).where(WorkerRow.id == orch.members.id)
                  .values(heartbeat_at=0.0))


def _wait(fn, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_second_operation_is_refused_naming_the_one_under_way(pair, pkg):  # noqa: F811
    a, b, _zone = pair
    nsd, vnfds = bundle(pkg, *pkg.docs())
    r = a.ns.deploy(nsd, vnfds, name="locked")
    # an operation under way at b (its lock row), then a heal and a delete asked of a
    assert b.store.take_ns_lock(r["id"], "op-at-b", states.OP_SCALE, 30.0) is None
    for call in (lambda: a.ns.heal("locked", r["instances"][0]["id"]),
                 lambda: a.ns.delete("locked")):
        with pytest.raises(Refused, match="operation op-at-b \\(scale\\) is in progress"):
            call()
    # nothing was started or changed by the refused ones
    assert [o["type"] for o in a.ns.show("locked")["operations"]] == ["instantiate"]
    assert a.ns.show("locked")["status"] == "running"
    b.store.release_ns_lock(r["id"], "op-at-b")
    assert a.ns.delete("locked")["deleted"] == "locked"
    assert a.store.ns_locks() == []


def test_a_deploy_cut_by_a_death_is_resumed_by_the_survivor(pair, pkg):  # noqa: F811
    a, b, zone = pair
    nsd, vnfds = bundle(pkg, *pkg.docs())
    real_update = b.store.update_ns

    def update_ns(ns_id, **fields):
        # b dies once its second instance runs and is recorded as an instance, but before
        # the NS record has it: the survivor must adopt it, not launch a third
        if len(fields.get("instances", [])) == 2:
            _die(b)
            raise Killed()
        return real_update(ns_id, **fields)
    b.store.update_ns = update_ns
    with pytest.raises(Killed):
        b.ns.deploy(nsd, vnfds, name="cut")
    row = a.store.network_service("cut")
    assert row.status == "deploying" and len(row.get("instances")) == 1
    (op,) = a.store.ns_operations(row.id)
    assert op.state == "processing" and op.owner == b.members.id
    assert [lk.owner for lk in a.store.ns_locks()] == [b.members.id]
    # a notices the death and resumes it
    assert a.members.reap() == [b.members.id]
    done = _wait(lambda: a.store.ns_operation(op.id).state != "processing" and
                 a.store.ns_operation(op.id), "the resumed deploy")
    assert done.state == "completed", done.error
    assert done.owner == a.members.id and done.detail["resumed_by"] == a.members.id
    # b's second instance ran and was adopted, not launched again
    assert len(done.detail["adopted"]) == 1 and done.detail["launched"] == []
    shown = a.ns.show("cut")
    assert shown["status"] == "running"
    assert sorted(i["service"] for i in shown["instances"]) == ["cut-fw", "cut-fwd"]
    # no instance lost or doubled: the zone runs exactly the recorded ones
    assert sorted(zone.vnfs) == sorted(i["id"] for i in shown["instances"])
    assert {i.id for i in a.store.instances()} == set(zone.vnfs)
    assert all(n["exists"] for n in shown["networks"]) and len(shown["networks"]) == 3
    assert a.store.ns_locks() == []
    # and the NS works as any other: scale, heal, delete
    assert a.ns.delete("cut")["deleted"] == "cut"
    assert zone.vnfs == {} and zone.nets == {}


def test_an_operation_recorded_without_its_steps_is_rolled_back(pair, pkg):  # noqa: F811
    a, b, zone = pair
    nsd, vnfds = bundle(pkg, *pkg.docs())
    r = b.ns.deploy(nsd, vnfds, name="old")
    # a heal of b's recorded as an older orchestrator did (no old_id/target), then b died
    op = b.store.op_started(r["id"], states.OP_HEAL, instance=r["instances"][0]["name"])
    b.store.take_ns_lock(r["id"], op, states.OP_HEAL, 5.0)
    _die(b)
    assert a.members.reap() == [b.members.id]
    with a.store.Session() as s:
        got = s.get(NSOperation, op)
    assert got.state == "failed" and "stopped during the operation" in got.error
    assert a.store.ns_locks() == []
    assert a.ns.show("old")["status"] == "running"
    assert sorted(zone.vnfs) == sorted(i["id"] for i in a.ns.show("old")["instances"])
    a.ns.delete("old")


def test_a_heal_cut_between_its_removal_and_its_launch_is_resumed(pair, pkg):  # noqa: F811
    a, b, zone = pair
    nsd, vnfds = bundle(pkg, *pkg.docs())
    r = b.ns.deploy(nsd, vnfds, name="healcut")
    old = r["instances"][0]

    def launch(*_a, **_k):
        _die(b)                             # the old VNF is gone, its replacement not started
        raise Killed()
    b.ns._launch = launch
    with pytest.raises(Killed):
        b.ns.heal("healcut", old["id"])
    assert old["id"] not in zone.vnfs and len(zone.vnfs) == 1
    assert a.members.reap() == [b.members.id]
    (op,) = [o for o in a.store.ns_operations(r["id"]) if o.type == "heal"]
    done = _wait(lambda: a.store.ns_operation(op.id).state != "processing" and
                 a.store.ns_operation(op.id), "the resumed heal")
    assert done.state == "completed", done.error
    shown = a.ns.show("healcut")
    new = shown["instances"][0]                 # where the old one was
    assert new["service"] == old["service"] and new["id"] != old["id"]
    assert done.detail["replaced_by"] == new["name"]
    assert sorted(zone.vnfs) == sorted(i["id"] for i in shown["instances"])
    assert a.store.ns_locks() == []
    a.ns.delete("healcut")


def test_an_on_demand_scale_out_waits_where_a_manual_one_is_refused(orch_factory,  # noqa: F811
                                                                     pkg):  # noqa: F811
    # one orchestrator (no lease: held until released); the peer's operation is a lock row
    orch = orch_factory()
    r = deploy_scaled(orch, pkg)
    peer = _store(orch.conf.orchestrator.connection, "peer")
    assert peer.take_ns_lock(r["id"], "op-peer", states.OP_HEAL, None) is None
    with pytest.raises(Refused, match="operation op-peer \\(heal\\) is in progress"):
        orch.ns.scale("sc1", "fw-pool", "out")
    out = []
    t = threading.Thread(target=lambda: out.append(
        orch.ns.scale("sc1", "fw-pool", "out", trigger="resolve")))
    t.start()
    time.sleep(0.5)
    # still waiting: nothing started while the peer's operation holds the NS
    assert t.is_alive() and out == []
    assert [o.type for o in orch.store.ns_operations(r["id"])] == ["instantiate"]
    peer.release_ns_lock(r["id"], "op-peer")
    t.join(timeout=60)
    assert out and out[0]["level"] == 1 and len(out[0]["added"]) == 1
    assert orch.store.ns_locks() == []
    orch.ns.delete("sc1")
    peer.close()


def test_a_scale_out_cut_before_its_record_is_resumed_without_a_second_launch(pair,  # noqa: F811
                                                                               pkg):  # noqa: F811
    a, b, zone = pair
    r = deploy_scaled(b, pkg)
    real_update = b.store.update_ns

    def update_ns(ns_id, **fields):
        if len(fields.get("instances", [])) > len(r["instances"]):
            _die(b)                     # launched and in the instances table, not in the NS
            raise Killed()
        return real_update(ns_id, **fields)
    b.store.update_ns = update_ns
    with pytest.raises(Killed):
        b.ns.scale("sc1", "fw-pool", "out")
    launches = len(zone.launches)
    assert a.members.reap() == [b.members.id]
    (op,) = [o for o in a.store.ns_operations(r["id"]) if o.type == "scale"]
    done = _wait(lambda: a.store.ns_operation(op.id).state != "processing" and
                 a.store.ns_operation(op.id), "the resumed scale-out")
    assert done.state == "completed", done.error
    assert len(zone.launches) == launches          # adopted, not launched again
    shown = a.ns.show("sc1")
    assert shown["scaling"][0]["level"] == 1 == done.detail["to_level"]
    assert len(shown["instances"]) == len(r["instances"]) + 1
    assert sorted(zone.vnfs) == sorted(i["id"] for i in shown["instances"])
    assert a.store.ns_locks() == []
    a.ns.delete("sc1")


# -- fencing: a holder whose lease ran out stops (Store.fenced) --
class FakeClock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def time(self):
        return self.t


def test_a_stalled_holder_whose_lock_was_taken_writes_nothing(db_url, monkeypatch):
    """worker-a's heartbeat stalls past its lease (the fake clock jumps): while nobody took the
    lock it is still a's (its next step renews it); once worker-b took it, a's steps and its
    commit are refused (LeaseLost) and its release leaves b's lock alone."""
    from fluidvim.orchestrator import db
    from fluidvim.orchestrator.exception import LeaseLost

    clock = FakeClock()
    monkeypatch.setattr(db, "time", clock)             # the lock's leases: db.time.time()
    a, b = _store(db_url, "worker-a"), _store(db_url, "worker-b")
    op = a.op_started("ns1", states.OP_SCALE)
    assert a.take_ns_lock("ns1", op, states.OP_SCALE, lease=5.0) is None
    with a.fenced("ns1", op, 5.0):
        a.op_progress(op, step=1)
        clock.t += 6.0                                  # a stalled: its lease expired
        a.check_fence()                                 # not taken: still a's, renewed
        assert b.take_ns_lock("ns1", "op-b", states.OP_HEAL, lease=5.0).op_id == op
        clock.t += 6.0                                  # a stalled again; now b takes it
        assert b.take_ns_lock("ns1", "op-b", states.OP_HEAL, lease=5.0) is None
        for step in (a.check_fence, lambda: a.op_progress(op, step=2),
                     lambda: a.update_ns("ns1", steps=[{"step": "late"}]),
                     lambda: a.op_finished(op, states.OP_COMPLETED)):
            with pytest.raises(LeaseLost, match=f"operation {op} lost its operation lock"):
                step()
    assert a.ns_operation(op).state == states.OP_PROCESSING     # a's commit did not happen
    assert a.ns_operation(op).detail == {"step": 1}
    assert a.op_lost(op, "lost its lock")                # not taken over: a ends it, failed
    assert (a.ns_operation(op).state, a.ns_operation(op).error) == ("failed", "lost its lock")
    a.release_ns_lock("ns1", op)
    a.release_ns_lock("ns1", "op-b")                    # b's operation id, not a's lock
    assert [(r.op_id, r.owner) for r in a.ns_locks()] == [("op-b", "worker-b")]
    a.close()
    b.close()


def test_a_holder_taken_over_as_dead_stops_and_leaves_the_survivors_lock(db_url, monkeypatch):
    from fluidvim.orchestrator import db
    from fluidvim.orchestrator.exception import LeaseLost

    monkeypatch.setattr(db, "time", FakeClock())
    a, b = _store(db_url, "worker-a"), _store(db_url, "worker-b")
    op = a.op_started("ns2", states.OP_HEAL)
    assert a.take_ns_lock("ns2", op, states.OP_HEAL, lease=5.0) is None
    # b declared a dead and resumes its operation: the same op id, under b's name
    assert b.take_ns_lock("ns2", op, states.OP_HEAL, lease=5.0, steal_from="worker-a") is None
    with a.fenced("ns2", op, 5.0), pytest.raises(LeaseLost):
        a.update_ns("ns2", steps=[])
    b.adopt_op(op)
    assert not a.op_lost(op, "lost its lock")            # b runs it now: a leaves it alone
    a.release_ns_lock("ns2", op)
    assert [(r.op_id, r.owner) for r in a.ns_locks()] == [(op, "worker-b")]
    with b.fenced("ns2", op, 5.0):
        b.op_finished(op, states.OP_COMPLETED)          # the survivor's commit, and release
    assert a.ns_locks() == []
    a.close()
    b.close()


def test_a_scale_whose_worker_is_taken_over_mid_way_launches_nothing_more(pair,  # noqa: F811
                                                                          pkg):  # noqa: F811
    """b's heartbeat stalls in a scale-out, before its launch: a declares b dead and resumes
    the scale. When b goes on, its launch is refused (LeaseLost): one instance added, once."""
    from fluidvim.orchestrator.exception import LeaseLost

    a, b, zone = pair
    r = deploy_scaled(b, pkg)
    real_check = b.store.check_fence
    resumed = []

    def stalled_check():
        if not resumed:                 # b stalls here; a takes over meanwhile
            with b.store.Session.begin() as s:
                s.execute(sa.update(WorkerRow).where(WorkerRow.id == b.members.id)
                          .values(heartbeat_at=0.0))
            assert a.members.reap() == [b.members.id]
            (op,) = [o for o in a.store.ns_operations(r["id"]) if o.type == "scale"]
            resumed.append(_wait(lambda: a.store.ns_operation(op.id).state != "processing"
                                 and a.store.ns_operation(op.id), "the resumed scale-out"))
        return real_check()
    b.store.check_fence = stalled_check
    launches = len(zone.launches)
    with pytest.raises(LeaseLost):
        b.ns.scale("sc1", "fw-pool", "out")
    (done,) = resumed
    assert done.state == "completed" and done.owner == a.members.id, done.error
    assert len(zone.launches) == launches + 1      # a's launch; b's never happened
    shown = a.ns.show("sc1")
    assert shown["scaling"][0]["level"] == 1
    assert len(shown["instances"]) == len(r["instances"]) + 1
    assert sorted(zone.vnfs) == sorted(i["id"] for i in shown["instances"])
    assert a.store.ns_locks() == []
    a.ns.delete("sc1")


def test_a_scale_whose_lock_another_operation_took_ends_failed_leaving_nothing(pair,  # noqa: F811
                                                                              pkg):  # noqa: F811
    """b's lease runs out between its launch and its record (its heartbeat stalled) and an
    operation at a takes the lock: b's scale stops (LeaseLost), ends failed, and removes the
    instance it launched but could not record - a's operation does not know it."""
    from fluidvim.orchestrator.db import NSLockRow
    from fluidvim.orchestrator.exception import LeaseLost

    a, b, zone = pair
    r = deploy_scaled(b, pkg)
    real_update = b.store.update_ns

    def update_ns(ns_id, **fields):
        if len(fields.get("instances", [])) > len(r["instances"]):
            with b.store.Session.begin() as s:          # b's lease expired meanwhile
                s.execute(sa.update(NSLockRow).values(expires_at=0.0))
            assert a.store.take_ns_lock(r["id"], "op-at-a", states.OP_HEAL, 30.0) is None
        return real_update(ns_id, **fields)
    b.store.update_ns = update_ns
    with pytest.raises(LeaseLost):
        b.ns.scale("sc1", "fw-pool", "out")
    (op,) = [o for o in a.store.ns_operations(r["id"]) if o.type == "scale"]
    assert op.state == "failed" and "lost its operation lock" in op.error
    assert [(lk.op_id, lk.owner) for lk in a.store.ns_locks()] == [("op-at-a", a.members.id)]
    shown = a.ns.show("sc1")
    assert shown["scaling"][0]["level"] == 0 and len(shown["instances"]) == len(r["instances"])
    assert sorted(zone.vnfs) == sorted(i["id"] for i in shown["instances"])
    a.store.release_ns_lock(r["id"], "op-at-a")
    a.ns.delete("sc1")
