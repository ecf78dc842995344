# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A launch cut in its middle by the death of its orchestrator (active-active), closed by the
survivor's ``recover_worker`` against the real local zone: the dead process' VNF had its QEMU
started and was still booting (the launch core's record ``booting``) when the process died.
The survivor must find it through the zone, terminate it, and leave no QEMU or tap behind.

The dying process is real (``kill -9``); only its wait for the guest's ``ready`` is made to
last, so that the kill lands in the window a busy host opens by chance (CI saw it: one QEMU
more than the store knew)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.db import LaunchRow, Store
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.vnf import states as vstates
from tests.e2e.test_nomad import qemu_pids

from .conftest import leaked_taps, vnf_ids
from .test_orchestrator import rabbit_up

pytestmark = pytest.mark.skipif(not rabbit_up(), reason="RabbitMQ is not running on "
                                "127.0.0.1:5672: run tools/bootstrap.sh")

# the dead worker's launch core: a real launch whose guest "never" reports ready
DYING = textwrap.dedent("""\
    import sys, time
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.vnf import control
    from fluidvim.vnf.manager import VNFManager
    control.ControlChannel.wait_ready = lambda self, timeout=30.0: time.sleep(3600)
    conf = orchconf.make_conf(vnf_state_dir=sys.argv[1], vnf_run_dir=sys.argv[2])
    VNFManager(conf).launch("FromDevice(0) -> Counter -> ToDevice(0);\\n", name=sys.argv[3],
                            nics=(None, None))
    """)


def test_a_launch_cut_while_booting_is_removed_by_the_survivor(tmp_path):
    tag = uuid.uuid4().hex[:8]
    run_dir = f"/run/fluidvim-frw-{tag}"
    url = f"sqlite:///{tmp_path}/orch.sqlite"
    conf = orchconf.make_conf(connection=url, topic=f"frw-{tag}",
                              notification_topic=f"frw_slots_{tag}",
                              vnf_state_dir=str(tmp_path / "state"), vnf_run_dir=run_dir)
    orchconf.disable_rabbit_heartbeat(conf)
    orch = Orchestrator(conf)             # the survivor (its RPC server is not needed here)
    mgr = orch.manager
    token = uuid.uuid4().hex[:8]
    dead = Store(url)
    dead.owner = "worker-that-died"
    launch_id = dead.launch_started("local", "fw", None, token=token)
    proc = subprocess.Popen([sys.executable, "-c", DYING, str(tmp_path / "state"), run_dir,
                             f"fw.{token}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:                        # its QEMU runs; the record is booting, with its pid
            recs = mgr.store.list(statuses=(vstates.BOOTING,))
            if recs and recs[0].pid and qemu_pids(run_dir):
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the dying launch never spawned its QEMU"
            time.sleep(0.02)
        (rec,) = recs
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert qemu_pids(run_dir), "QEMU outlives its launcher (this is what is cleaned up)"
        ids = vnf_ids(mgr.store)

        out = orch.recover_worker("worker-that-died")

        assert out["removed"] == [rec.id] and out["adopted"] == [] and out["failed"] == 1
        assert mgr.store.list() == [] and qemu_pids(run_dir) == []
        assert not leaked_taps(ids)
        with dead.Session() as s:
            row = s.get(LaunchRow, launch_id)
        assert row.ok is False and "died during the launch" in row.error
        assert rec.id in row.error
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for r in mgr.store.list():
            mgr.destroy(r.id)
        orch.close()
        dead.close()
        for pid in qemu_pids(run_dir):      # after a failure above: leave the host clean
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(run_dir, ignore_errors=True)
