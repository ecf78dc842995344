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

The Nomad client agent is killed with -9 the same way (:func:`test_nomad_client_kill_9_under_load`):
its VNFs keep running (the plugin's QEMUs are not the agent's children), a launch while it is down
either waits for it and completes or fails in one ``ZoneError`` line, and the restarted agent
recovers its allocations (the same QEMUs) with no second QEMU and no plugin process left over.
Both tests share one cluster (its start is most of their time).

No traffic crosses these VNFs (an unplugged NIC): the data path is the QEMU processes, which
the check follows; traffic through a VNF under a dependency's fault is in
tests/integration/test_faults_load.py.
"""

import os
import signal
import time

import pytest

from fluidvim.common.zonetypes import LaunchRequest, ZoneError
from fluidvim.orchestrator.zones.nomad import NomadZone
from tests import faults
from tests.e2e import test_nomad as tn
from tests.e2e.nomad_cluster import NomadCluster

pytestmark = tn.pytestmark

CLICK = "FromDevice(0) -> EtherMirror -> ToDevice(0);"


def _request(i: int) -> LaunchRequest:
    return LaunchRequest(service=f"fns{i}", slots=16, memory_mb=32, click_config=CLICK)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with NomadCluster(tmp_path_factory.mktemp("faults-nomad"), clients=1,
                      warm_pool=None) as c:
        c.wait_ready()
        yield c


@pytest.fixture
def zone(cluster):
    """The cluster's zone; every instance launched through it is terminated at the end."""
    z = NomadZone("nomad-dc1", address=cluster.address, datacenter="dc1")
    yield z
    cluster.wait_ready(180)             # a test that failed half-way may have left it down
    for inst in z.instances():
        try:
            z.terminate(inst.id)
        except ZoneError:
            pass
    # terminate waits for the allocation to stop, within a timeout a loaded host can pass: the
    # next test counts the QEMUs of the client's run dir, so none of this one's may be left
    run_dirs = [c.run_dir for c in cluster.clients]
    tn.wait_for("the test's QEMUs gone", lambda: not tn.qemu_pids(*run_dirs), 120, 0.25)


class Scene:
    """The first VNF (its instance and QEMU) and launches in flight, one done already; then the
    fault (:meth:`killed`, :meth:`down`) and the checks after the restart (:meth:`recovered`)."""

    def __init__(self, zone, run_dir: str):
        self.zone, self.run_dir = zone, run_dir
        self.first = zone.launch(_request(0))
        (self.qemu,) = tn.qemu_pids(run_dir)
        self.load = faults.Outcomes(lambda i: zone.launch(_request(i)), pause=0.2).start()
        self.load.ok_after(0, 120, "a launch before the fault")
        self.n = self.n_down = 0

    def killed(self) -> None:
        self.n = len(self.load.outcomes)

    def down(self) -> None:
        """The dependency is down (and about to be started again): the VNF still runs."""
        assert self.qemu in tn.qemu_pids(self.run_dir), "a running VNF died with the agent"
        self.n_down = len(self.load.outcomes)

    def recovered(self, name: str, t0: float, note: str) -> None:
        load = self.load
        recovered = load.ok_after(self.n_down, 240, "a launch after the restart")
        load.stop()
        errors = load.errors(self.n, self.n_down)
        faults.report(name, t0, recovered, errors, note)
        for err in errors:
            assert isinstance(err, ZoneError) and "\n" not in str(err), repr(err)
        _check(self.zone, self.run_dir, self.first, load, self.qemu)


def test_nomad_server_kill_9_under_load(cluster, zone):
    scene = Scene(zone, cluster.clients[0].run_dir)
    try:
        scene.killed()
        cluster.server_proc.send_signal(signal.SIGKILL)
        cluster.server_proc.wait()
        scene.load.error_after(scene.n, 180, "an error while down")
        scene.down()
        with pytest.raises(ZoneError) as e:
            zone.instances()
        assert "\n" not in str(e.value) and cluster.address in str(e.value), e.value

        t0 = time.monotonic()
        cluster.server_proc = cluster._spawn(cluster.tmp / "server" / "server.hcl", "server")
        scene.recovered("nomad-server-kill-9", t0, "server start, leader election and client "
                        "re-registration included")
    finally:
        scene.load.stop()


def _plugins(cluster) -> list[int]:
    """The unikernel plugin processes of ``cluster`` (its own build: one client, one plugin)."""
    exe = str(cluster.plugin_dir / "fluidvim-unikernel")
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if os.readlink(f"/proc/{p}/exe") == exe:
                    pids.append(int(p))
            except OSError:
                continue
    return pids


def test_nomad_client_kill_9_under_load(cluster, zone):
    client = cluster.clients[0]
    scene = Scene(zone, client.run_dir)
    try:
        scene.killed()
        client.proc.send_signal(signal.SIGKILL)       # the agent only: its plugin lives on
        client.proc.wait()
        time.sleep(3)       # down a while: launches placed meanwhile wait for the client
        scene.down()

        t0 = time.monotonic()
        cluster.power_on_client(client.name)
        scene.recovered("nomad-client-kill-9", t0, "client start and allocation recovery "
                        "included")
        # the killed agent's plugin process ended; the new agent has one
        tn.wait_for("one plugin process", lambda: len(_plugins(cluster)) == 1, 30, 0.25)
    finally:
        scene.load.stop()


def _check(zone, run_dir, first, load, qemu) -> None:
    done = {first.id} | {v.id for v in load.results()}
    live = tn.wait_for("every instance running again", lambda: (
        lambda insts: insts if done <= set(insts) and all(
            i.status == "running" for i in insts.values()) else None)(
        {i.id: i for i in zone.instances()}), 120, 0.5)
    assert qemu in tn.qemu_pids(run_dir), "the first VNF was restarted, not kept"
    # one QEMU per running instance; none of a launch that failed
    try:
        tn.wait_for("one QEMU per instance", lambda: len(tn.qemu_pids(run_dir)) == len(live),
                    60, 0.25)
    except AssertionError as e:
        raise AssertionError(f"{e}: instances {sorted(live)}, QEMUs "
                             f"{[_vnf_of(p) for p in tn.qemu_pids(run_dir)]}") from None
    total = sum(i.slots_total for i in live.values())
    tn.wait_for(f"the node's slots = the instances' ({total})",
                lambda: zone.hosts()[0].slots_total == total, 60, 0.25)


def _vnf_of(pid: int) -> str:
    """A QEMU's VNF directory (its UUID) and age, for the failure message."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        args = f.read().decode(errors="replace").split("\0")
    sock = next((a for a in args if "control" in a or ".sock" in a), "?")
    return f"{pid}:{sock}"
