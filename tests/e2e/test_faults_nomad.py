# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Faults under load on Nomad (issue 26 item 5): the Nomad server agent of a real cluster
(tests/e2e/nomad_cluster.py: one server, one client with the unikernel plugin) is killed with
-9 while VNFs run and launches through the orchestrator's Nomad zone are in flight, then started
again on its data dir (its Raft state: jobs, allocations). Checked:

* while the server is down a launch fails with one ``ZoneError`` line naming the server, and
  the VNFs already running keep running (same QEMU processes: the client does not stop its
  allocations when it loses its server);
* after recovery every launch that returned is a running instance, the QEMUs of the client's
  run dir are exactly the instances', and the slots the node reports are the instances' sum
  (what each VNF's stats file says);
* the recovery time (server start -> the first launch that completes) printed as
  ``FAULT nomad-server-kill-9 recovery_ms=<n>``.

No traffic crosses these VNFs (an unplugged NIC): the data path is the QEMU processes, which
the check follows; traffic through a VNF under a dependency's fault is in
tests/integration/test_faults_load.py.
"""

import signal
import threading
import time

import pytest

from fluidvim.common.zonetypes import LaunchRequest, ZoneError
from fluidvim.orchestrator.zones.nomad import NomadZone
from tests.e2e import test_nomad as tn
from tests.e2e.nomad_cluster import NomadCluster

pytestmark = tn.pytestmark

CLICK = "FromDevice(0) -> EtherMirror -> ToDevice(0);"


def _request(i: int) -> LaunchRequest:
    return LaunchRequest(service=f"fns{i}", slots=16, memory_mb=32, click_config=CLICK)


class Launches:
    """Launches one after the other in a thread; each outcome ("ok", instance) or ("error", e)."""

    def __init__(self, zone):
        self.zone = zone
        self.outcomes: list[tuple[str, object]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        i = 0
        while not self._stop.is_set():
            i += 1
            try:
                self.outcomes.append(("ok", self.zone.launch(_request(i))))
            except Exception as e:  # noqa: BLE001 - every outcome is checked by the test
                self.outcomes.append(("error", e))
                time.sleep(0.2)

    def wait(self, pred, timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.outcomes):
                return time.monotonic()
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}: {self.outcomes[-3:]}")

    def stop(self):
        self._stop.set()
        self.thread.join(timeout=180)


def test_nomad_server_kill_9_under_load(tmp_path):
    with NomadCluster(tmp_path, clients=1, warm_pool=None) as cluster:
        cluster.wait_ready()
        run_dir = cluster.clients[0].run_dir
        zone = NomadZone("nomad-dc1", address=cluster.address, datacenter="dc1")
        first = zone.launch(_request(0))
        (qemu,) = tn.qemu_pids(run_dir)
        load = Launches(zone)
        try:
            load.thread.start()
            load.wait(lambda o: any(k == "ok" for k, _ in o), 120, "a launch before the fault")
            n = len(load.outcomes)

            cluster.server_proc.send_signal(signal.SIGKILL)
            cluster.server_proc.wait()
            load.wait(lambda o: any(k == "error" for k, _ in o[n:]), 180, "an error while down")
            n_down = len(load.outcomes)
            assert qemu in tn.qemu_pids(run_dir), "a running VNF died with the server"
            with pytest.raises(ZoneError) as e:
                zone.instances()
            assert "\n" not in str(e.value) and cluster.address in str(e.value), e.value

            t0 = time.monotonic()
            cluster.server_proc = cluster._spawn(cluster.tmp / "server" / "server.hcl", "server")
            recovered = load.wait(lambda o: any(k == "ok" for k, _ in o[n_down:]), 240,
                                  "a launch after the restart")
            load.stop()
            errors = [v for k, v in load.outcomes[n:n_down] if k == "error"]
            print(f"\nFAULT nomad-server-kill-9 recovery_ms={(recovered - t0) * 1000:.0f} "
                  f"(server start, leader election and client re-registration included) "
                  f"errors_while_down={len(errors)}")
            for err in errors:
                assert isinstance(err, ZoneError) and "\n" not in str(err), repr(err)
            _check(zone, run_dir, first, load, qemu)
        finally:
            load.stop()
            for inst in [first, *(v for k, v in load.outcomes if k == "ok")]:
                try:
                    zone.terminate(inst.id)
                except ZoneError:
                    pass


def _check(zone, run_dir, first, load, qemu) -> None:
    done = {first.id} | {v.id for k, v in load.outcomes if k == "ok"}
    live = tn.wait_for("every instance running again", lambda: (
        lambda insts: insts if done <= set(insts) and all(
            i.status == "running" for i in insts.values()) else None)(
        {i.id: i for i in zone.instances()}), 120, 0.5)
    assert qemu in tn.qemu_pids(run_dir), "the first VNF was restarted, not kept"
    # one QEMU per running instance; none of a launch that failed
    tn.wait_for("one QEMU per instance", lambda: len(tn.qemu_pids(run_dir)) == len(live), 60,
                0.25)
    total = sum(i.slots_total for i in live.values())
    tn.wait_for(f"the node's slots = the instances' ({total})",
                lambda: zone.hosts()[0].slots_total == total, 60, 0.25)
