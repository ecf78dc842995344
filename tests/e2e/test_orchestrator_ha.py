# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Two orchestrator processes, active-active, on one real PostgreSQL and one real RabbitMQ,
placing on one real Nomad zone (the dev agent with the unikernel plugin of
tests/e2e/test_zones_nomad.py).

* Sessions resolved through both at once: no slot of any instance is handed out twice.
* ``kill -9`` of one orchestrator while it launches an instance on Nomad: the other notices
  (heartbeat), closes the launch record and finishes the launch (the Nomad job the dead one
  registered but never recorded is adopted if it runs) or rolls it back (the job is removed);
  nothing is left in flight, no instance is unrecorded, and it keeps serving.
"""

from __future__ import annotations

import signal
import textwrap
import threading
import uuid

import pytest

from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.db import LaunchRow, Store, WorkerRow
from fluidvim.orchestrator.rpcapi import OrchestratorAPI
from tests import pgserver
from tests.e2e import orchprocs, test_nomad as tn
from tests.e2e.test_zones_nomad import agent  # noqa: F401 - the Nomad dev agent fixture

pytestmark = [*tn.pytestmark,
              pytest.mark.skipif(pgserver.bindir() is None,
                                 reason="PostgreSQL server binaries not installed")]

CLICK = "FromDevice(0) -> Counter -> Discard;"       # the zone gives one NIC
DEAD_AFTER = 3.0
WAIT_S = 180.0          # an upper bound for a take-over (a loaded host), never a measure


@pytest.fixture
def ha(agent, tmp_path):  # noqa: F811 - the imported fixture
    """Two orchestrators (subprocesses) on a fresh PostgreSQL database; yields (env, procs)."""
    zone, _run_dir = agent
    pg = pgserver.PgServer().start()
    url = pg.create_database()
    tag = uuid.uuid4().hex[:8]
    cfg = tmp_path / "orchestrator.conf"
    cfg.write_text(textwrap.dedent(f"""\
        [DEFAULT]
        log_file = {tmp_path}/orchestrator-%s.log
        [orchestrator]
        connection = {url}
        topic = fvha-{tag}
        notification_topic = fvha_slots_{tag}
        active_active = true
        worker_heartbeat_interval = 0.5
        worker_dead_after = {DEAD_AFTER}
        local_zone = false
        zones = nomad:nomad-ha:address={zone.address},datacenter=dc1
        reservation_ttl = 600
        rpc_timeout = 120
        """))
    Store(url).close()                 # schema at head before two processes race to create it
    procs = []
    for i in range(2):
        text = cfg.read_text().replace("%s", str(i))
        path = tmp_path / f"orchestrator-{i}.conf"
        path.write_text(text)
        procs.append(orchprocs.spawn(path))
    store = Store(url)
    conf = orchconf.make_conf(connection=url, topic=f"fvha-{tag}", rpc_timeout=120.0)
    orchconf.disable_rabbit_heartbeat(conf)
    api = OrchestratorAPI(conf)

    class Env:
        pass
    env = Env()
    env.zone, env.store, env.api, env.procs, env.logs = zone, store, api, procs, tmp_path
    try:
        tn.wait_for("two orchestrator workers", lambda: len(store.workers()) == 2 or
                    _check_alive(procs, tmp_path), WAIT_S, 0.2)
        # both alive and serving (a process that died at start would leave one row, then none)
        tn.wait_for("both orchestrators serving RPC", lambda: not _check_alive(procs, tmp_path)
                    and {p.pid for p in procs} <= set(_workers_by_pid(store))
                    and all(_ping(api, wid) for wid in _workers_by_pid(store).values()), WAIT_S, 0.5)
        yield env
    finally:
        api.close()
        orchprocs.stop(procs)
        for inst in zone.instances():            # the test's jobs, whatever happened
            if inst.service.startswith("ha"):
                zone.terminate(inst.id)
        store.close()
        pg.stop()


def _check_alive(procs, logs):
    for i, p in enumerate(procs):
        if p.poll() is not None:
            log = logs / f"orchestrator-{i}.log"
            raise AssertionError(f"orchestrator {i} exited {p.returncode}: "
                                 f"{log.read_text()[-3000:] if log.exists() else ''}")
    return False


def _workers_by_pid(store) -> dict[int, str]:
    return {w.pid: w.id for w in store.workers()}


def _at(api, worker: str, method: str, timeout: float = 120, **kwargs):
    """An RPC call to one orchestrator (its RPC server name is its worker id)."""
    return api.client.prepare(server=worker, timeout=timeout).call({}, method, **kwargs)


def _ping(api, worker: str):
    try:
        return _at(api, worker, "ping", timeout=3)
    except Exception:  # noqa: BLE001 - not consuming yet: the call times out
        return None


def test_sessions_resolved_through_both_never_share_a_slot(ha):
    ha.api.register_service("ha-fw", CLICK, slots=2, memory_mb=32, max_queuing_delay_s=120)
    results, errors = [], []
    workers = list(_workers_by_pid(ha.store).values())

    def ask(worker):
        try:
            results.append(_at(ha.api, worker, "resolve", service="ha-fw", client_location=None))
        except Exception as e:  # noqa: BLE001 - collected and reported below
            errors.append(e)

    # three sessions asked of each orchestrator at once: 6 sessions, instances of 2 slots
    threads = [threading.Thread(target=ask, args=(workers[i % 2],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert len(results) == 6
    # every session has a slot of its own: per instance, sessions <= its slots
    per_instance: dict[str, int] = {}
    for r in results:
        per_instance[r["instance"]] = per_instance.get(r["instance"], 0) + 1
    totals = {i.id: i.slots_total for i in ha.store.instances()}
    assert set(per_instance) <= set(totals), (per_instance, totals)
    for inst, n in per_instance.items():
        assert n <= totals[inst], (inst, n, totals[inst], results)
    # the slots were handed out through the shared reservations (a launch's own session too)
    assert sum(len(v) for v in ha.store.reservations().values()) == 6


def test_kill_9_during_a_launch_the_survivor_cleans_up(ha):
    ha.api.register_service("ha-kill", CLICK, slots=4, memory_mb=32, max_queuing_delay_s=120)
    victim, survivor = ha.procs
    vid = _workers_by_pid(ha.store)[victim.pid]
    # direct the launch at the victim: a resolve with no free slot launches on demand
    ha.api.client.prepare(server=vid).cast({}, "resolve", service="ha-kill",
                                           client_location=None)

    def registered():
        _check_alive(ha.procs, ha.logs)
        rows = ha.store.launches(in_flight=True, owner=vid, service="ha-kill")
        if not rows:
            return None
        token = rows[0].token
        return rows[0] if any(token in i.name for i in ha.zone.instances()) else None

    # kill it once the Nomad job exists but before the launch is recorded as finished
    row = tn.wait_for("the victim's launch registered in Nomad", registered, WAIT_S, 0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)

    def recovered():
        _check_alive([survivor], ha.logs)
        with ha.store.Session() as s:
            done = s.get(LaunchRow, row.id)
            gone = s.get(WorkerRow, vid) is None
        return gone and done.finished_at is not None and done
    done = tn.wait_for("the survivor to take over", recovered, WAIT_S, 0.2)
    assert done.ok is False and f"orchestrator {vid} died during the launch" in done.error
    # the job the dead one registered was adopted (it ran) or removed (it did not)
    known = {i.id for i in ha.store.instances()}
    mine = [i for i in ha.zone.instances() if row.token in i.name]
    if "adopted" in done.error:
        assert [i.id for i in mine] == [i for i in known if row.token in i]
    else:
        assert "was removed" in done.error, done.error
        tn.wait_for("the orphan job removed", lambda: not any(
            row.token in i.name for i in ha.zone.instances()), 60, 0.5)
    # every instance of the service in the zone is recorded
    assert all(i.id in known for i in ha.zone.instances() if i.service == "ha-kill")
    assert ha.store.launches(in_flight=True) == []
    # the survivor still serves: the same request now succeeds there
    r = ha.api.resolve("ha-kill")
    assert r["kind"] in ("slot", "launched") and r["instance"] in {
        i.id for i in ha.store.instances()}
    assert [w.pid for w in ha.store.workers()] == [survivor.pid]
