# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Faults under load (issue 26 item 5): PostgreSQL as the orchestrator's database
(``[orchestrator] connection``) killed with -9 while the orchestrator serves requests, then
started again under the same orchestrator process (no restart of it).

The database is a server of this test's own (:class:`tests.pgserver.PgServer`, durable: an
acknowledged commit survives the kill), so killing it touches no other test. An orchestrator
(local zone, real VNFs, the host's RabbitMQ) serves RPC while a thread resolves sessions through
it (every second one launches an instance). Checked:

* while the database is down, every request fails with one line naming the database and how to
  start it (``DatabaseDown``, a ``DependencyDown``), within the RPC timeout; the CLI says the
  same in one line (exit 2);
* after ``pg_ctl start`` the same orchestrator serves again (its pool reconnects): the time from
  the start command to the first resolve that completes is printed as
  ``FAULT orchestrator-postgresql-kill-9 recovery_ms=<n>`` (bench/results/faults.md);
* no instance record lost; every session granted names a live instance; the instances are
  exactly the running VNFs and their QEMUs (a launch the kill cut leaves no orphan VNF); the
  orchestrator's slot view is what the VNFs report (tests/faults.py ``check_orchestrator``).
"""

import itertools
import threading
import time

from fluidvim.orchestrator.db import DB_FIX
from fluidvim.orchestrator.exception import DatabaseDown
from tests import faults, pgserver

from .conftest import orchestrator_env
from .test_faults_load import FORWARD, fluidvim_line

RPC_TIMEOUT = 20.0      # a request the kill cut must still end in its one line before this
LIMIT = 6               # sessions granted in all (every second one launches an instance)


def test_orchestrator_postgresql_kill_9_under_load(tmp_path):
    pg = pgserver.PgServer(durable=True).start()
    try:
        url = pg.create_database()
        with orchestrator_env(tmp_path, "ffo", 88) as env:
            _orchdb_fault(env, pg, url, tmp_path)
    finally:
        pg.stop()


def _orchdb_fault(env, pg, url, tmp_path):
    orch = env.start(connection=url, reservation_ttl=600.0, rpc_timeout=RPC_TIMEOUT)
    rpc = env.api()
    o = env.conf.orchestrator
    cli_conf = tmp_path / "cli.conf"
    cli_conf.write_text(f"[orchestrator]\nconnection = {url}\ntransport_url = {o.transport_url}\n"
                        f"topic = {o.topic}\nrpc_timeout = {RPC_TIMEOUT}\n")
    rpc.register_service("fo", FORWARD, slots=2, max_queuing_delay_s=30.0)
    cut_launch = _kill_during_second_launch(orch.local_zone, pg)
    load = faults.Outcomes(lambda i: rpc.resolve("fo"), limit=LIMIT, pause=0.2).start()
    t0 = None
    try:
        load.wait(lambda o: any(k == "ok" and r["kind"] == "launched" for k, r in o),
                  what="a first launch")
        before = {i["id"] for i in rpc.list_instances("fo")}
        n = len(load.outcomes)

        assert cut_launch.wait(60), "no second launch"
        load.error_after(n, RPC_TIMEOUT + 30, "a resolve failing while the database is down")
        rc, err = fluidvim_line(cli_conf, "resolve", "fo")
        assert rc == 2 and len(err) == 1, err
        assert err[0].startswith("fluidvim: error: the orchestrator's database ("), err
        assert err[0].endswith(DB_FIX), err

        n_down = len(load.outcomes)
        t0 = time.monotonic()
        pg.start_again()
        recovered = load.ok_after(n_down, 60, "a resolve after the database's restart")
        errors = load.errors(n, n_down)
        faults.report("orchestrator-postgresql-kill-9", t0, recovered, errors,
                      "pg_ctl start included; the orchestrator not restarted")
        load.wait(lambda o: len(load.results()) >= load.limit, 120, "the rest")
        load.stop()
        assert errors
        cut = _check_errors(load.errors(), pg.port)
        after = {i["id"] for i in rpc.list_instances("fo")}
        assert before <= after, f"instance records lost: {before - after}"
        faults.check_orchestrator(orch, rpc, load, "fo", cut=cut)
        # the cut launch: its VNF terminated, its record closed as failed, none in flight
        assert cut_launch.vnf not in {r.id for r in orch.manager.list()}
        assert orch.store.launches(in_flight=True) == []
        rc, err = fluidvim_line(cli_conf, "instance", "list")
        assert rc == 0 and err == [], err
    finally:
        load.stop()
        if cut_launch.is_set() and t0 is None:     # the teardown needs the database
            pg.start_again()


def _kill_during_second_launch(zone, pg) -> threading.Event:
    """Kills the database while the zone's second launch is in flight - its VNF runs, the
    orchestrator has not recorded it yet - (the event is set then): the launch the kill cuts
    must leave no orphan VNF."""
    real_launch, launches, cut = zone.launch, itertools.count(1), threading.Event()

    def launch(req):
        inst = real_launch(req)
        if next(launches) == 2:
            pg.kill()
            cut.vnf = inst.id
            cut.set()
        return inst
    zone.launch = launch
    return cut


def _check_errors(errors, port: int) -> int:
    """Every request that failed did in one line naming the orchestrator's database (this
    server's port) and how to start it; how many (each may have had its session's slot
    reserved before the kill cut it: that many sessions more may be held)."""
    for e in errors:
        assert isinstance(e, DatabaseDown) and "\n" not in e.message, repr(e)
        assert e.message.startswith("the orchestrator's database (postgresql"), e.message
        assert f"127.0.0.1:{port}/" in e.message and e.message.endswith(DB_FIX), e.message
    return len(errors)
