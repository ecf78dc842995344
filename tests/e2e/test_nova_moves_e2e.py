# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Cold migrate, resize, evacuate and a refused live migration through the unmodified
``openstack`` CLI, on the real services of :mod:`tests.e2e.nova_services` (Keystone, Placement,
Glance, nova-api/-conductor/-scheduler; Neutron's stand-in: the server has no ports, and without
an Open vSwitch this module runs beside test_nova_e2e.py) with TWO nova-compute processes,
``fvn-e2e-compute`` and ``fvn-e2e-compute2``, each with its own nova state path, launch-core
state dir, run dir and image cache (on this one machine).

One server (``--nic none``: the two computes share this machine's taps) goes through
``server migrate`` + ``server migrate confirm``, ``server resize`` + ``server resize revert``,
``server resize`` + ``server resize confirm``, ``server migrate --live-migration`` (refused, the
CLI printing what to do instead; ACTIVE on the same VNF, the reason in the instance action's event
too), then ``compute service set --down`` of its compute (stopped first) and ``server
evacuate``; that compute is started again and Nova removes the evacuated VNF it still ran. After
every step: the VNF runs on the host Nova names, with the flavor's slots (asked over its control
channel), nothing of it on the other host (``fluidvim vnf list`` against that compute's state),
Placement's usages on both providers. The wall-clock time of
each CLI step and the VNF's own gap (source stopped -> target running, from nova-compute's log)
are printed. About 3 minutes, a minute of it starting the cloud.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from fluidvim.vnf import conf as vnfconf
from tests.e2e import nova_services as ns

KERNEL = vnfconf.default_kernel()
HOST1 = ns.COMPUTE_HOST
HOST2 = ns.COMPUTE_HOST + "2"
SVC = {HOST1: "nova-compute", HOST2: "nova-compute-2"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),        # setup (the cloud) included: a hang guard, not a deadline
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (taps, QEMU)"),
    pytest.mark.skipif(not os.path.exists(KERNEL),
                       reason="the VNF kernel is not built: run `make -C unikernel`"),
    pytest.mark.skipif(shutil.which("rabbitmqctl") is None,
                       reason="RabbitMQ is not installed: run tools/bootstrap.sh"),
]


class TwoComputeStack(ns.Stack):
    """The cloud of :class:`~tests.e2e.nova_services.Stack` plus a second nova-compute."""

    @property
    def compute2_conf(self):
        return self.etc / "nova" / "nova-compute-2.conf"

    def conf_of(self, host: str):
        return self.compute_conf if host == HOST1 else self.compute2_conf

    def write_configs(self) -> None:
        super().write_configs()
        text = self.compute_conf.read_text()
        for old, new in ((f"host = {HOST1}\n", f"host = {HOST2}\n"),
                         (f"state_path = {self.work}/nova\n", f"state_path = {self.work}/nova2\n"),
                         (f"state_dir = {self.work}/vnf\n", f"state_dir = {self.work}/vnf2\n"),
                         (f"run_dir = {self.run_dir}\n", f"run_dir = {self.run_dir}-2\n"),
                         (f"{self.work}/nova/fluidvim-images", f"{self.work}/nova2/fluidvim-images"),
                         (str(self.compute_conf), str(self.compute2_conf))):
            if old not in text and old != str(self.compute_conf):
                raise ns.ServiceError(f"nova-compute.conf has no {old.strip()!r} to change")
            text = text.replace(old, new)
        for d in ("nova2", "vnf2"):
            (self.work / d).mkdir(exist_ok=True)
        self.compute2_conf.write_text(text)

    def start_compute(self, host: str) -> None:
        self._start(SVC[host], [str(ns.BIN / "nova-compute"), "--config-file",
                                str(self.conf_of(host))])

    def _wait_computes(self) -> None:
        """Both computes' records, so that the cloud's one ``discover_hosts`` maps both (a
        ``nova-manage`` run is ~7 CPU-s of imports). The second starts once the first's
        provider has its inventory in Placement: started together, their first reports raced
        in Placement's SQLite ("database is locked", a 500 for one of them)."""
        super()._wait_computes()
        t0 = time.monotonic()

        def inventory():
            rps = self.api("placement", "GET", f"/resource_providers?name={HOST1}").json()
            return rps["resource_providers"] and self.api(
                "placement", "GET", f"/resource_providers/{rps['resource_providers'][0]['uuid']}"
                "/inventories").json()["inventories"]
        _wait(f"{HOST1}'s inventory in Placement", inventory, timeout=300, interval=0.5)
        self.start_compute(HOST2)
        self.wait_log(SVC[HOST2], "Compute node record created")
        self._say(f"second compute {HOST2} up {time.monotonic() - t0:.1f} s after the first")

    def start(self) -> None:
        super().start()
        nm = [str(ns.BIN / "nova-manage"), "--config-file", str(self.nova_conf)]
        deadline = time.monotonic() + 60
        while HOST2 not in self.mapped_hosts():         # mapped by start()'s discover_hosts
            self._run("discover_hosts", nm + ["cell_v2", "discover_hosts"], service=True)
            if time.monotonic() > deadline:
                self._fail(SVC[HOST2], "never became discoverable in cell1")
            time.sleep(1)

    def mapped_hosts(self) -> set:
        """The hosts of nova_api's host mappings (``nova-manage cell_v2 list_hosts``)."""
        import contextlib
        import sqlite3

        db = self.work / "db" / "nova_api.db"
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
            return {h for (h,) in c.execute("SELECT host FROM host_mappings")}

    def stop(self) -> None:
        try:
            super().stop()              # every process (both computes), compute 1's VNFs
        finally:
            _destroy_vnfs_of(self.compute2_conf)
            run2 = f"{self.run_dir}-2"
            if os.path.isdir(run2) and not os.listdir(run2):
                os.rmdir(run2)


def _destroy_vnfs_of(conf) -> None:
    if not conf.exists():
        return
    from oslo_config import cfg

    from fluidvim.vnf.manager import VNFManager
    c = cfg.ConfigOpts()
    vnfconf.register_opts(c)
    c([], default_config_files=[str(conf)])
    mgr = VNFManager(c)
    try:
        mgr.destroy_all()
    finally:
        mgr.close()


@pytest.fixture(scope="module")
def stack():
    work = tempfile.mkdtemp(prefix="fvn-nova-moves-pytest-")
    # Neutron's stand-in (``--nic none`` servers: the two computes share this machine's taps):
    # no Open vSwitch, so this module runs beside test_nova_e2e's (tests/conftest.py)
    s = TwoComputeStack(work, kernel=KERNEL, ports=ns.free_ports(ns.SERVICES + ("openflow",)),
                        neutron=False)
    try:
        s.start()
        yield s
    finally:
        s.stop()


def _vnfs(stack, host, name=None, *extra):
    """``fluidvim vnf list`` against ``host``'s launch-core state (ns.fluidvim_json)."""
    return [v for v in ns.fluidvim_json(stack.conf_of(host), "list", *extra)
            if name is None or v["name"] == name]


def _slots_total(stack, host, name) -> int:
    return ns.fluidvim_json(stack.conf_of(host), "stats", name)["slots"]["total"]


def _usage(stack, host) -> tuple:
    rps = stack.api("placement", "GET", f"/resource_providers?name={host}").json()
    rp = rps["resource_providers"][0]["uuid"]
    u = stack.api("placement", "GET", f"/resource_providers/{rp}/usages").json()["usages"]
    return (u.get("VCPU", 0), u.get("MEMORY_MB", 0), u.get("CUSTOM_VNF_SESSION_SLOT", 0))


def _gap_ms(stack, host, uuid) -> float | None:
    """The VNF's gap of the last migration or resize of ``uuid`` to ``host``, from that
    compute's log (a revert logs none: nothing stamps the target's stop on that path)."""
    found = re.findall(rf"{uuid} started here \(.*?\); ([0-9.]+) ms since its VNF stopped",
                       stack.log(SVC[host]).read_text(errors="replace"))
    return float(found[-1]) if found else None


def _wait(what, fn, timeout=120.0, interval=0.5):
    deadline = time.monotonic() + timeout
    while True:
        out = fn()
        if out:
            return out
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(interval)


def test_migrate_resize_evacuate_live_refused(stack):
    cli = ns.OpenStackCLI(stack)
    times, gaps = {}, {}
    small, big = (1, 32, 1), (2, 64, 2)                  # vCPUs, MB, session slots

    def timed(name, *args, **kw):
        t = time.monotonic()
        out = cli(*args, **kw)
        times[name] = round(time.monotonic() - t, 2)
        return out

    def state(status, host):
        def ok():
            shown = stack.server("mv")             # what `openstack server show` shows
            assert shown["status"] != "ERROR", shown.get("fault")
            return shown if (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == (status, host) \
                else None
        return _wait(f"server mv {status} on {host}", ok)

    def only_on(host, flavor):
        """The server's one VNF runs on ``host`` with the flavor; nothing of it elsewhere."""
        other = HOST2 if host == HOST1 else HOST1
        (vnf,) = _vnfs(stack, host, uuid)
        assert vnf["status"] == "running" and ns._alive(vnf["pid"]), vnf
        assert _slots_total(stack, host, uuid) == flavor[2]
        assert _vnfs(stack, other, uuid, "--all") == []
        return vnf

    def usage(want1, want2):
        got = (_usage(stack, HOST1), _usage(stack, HOST2))
        zero = (0, 0, 0)
        assert got == (want1 or zero, want2 or zero), f"Placement usages (host1, host2): {got}"

    cli("image", "create", "--file", KERNEL, "--disk-format", "aki", "--container-format", "aki",
        "--property", f"fluidvim_click_config={ns.FW_CONFIG}", "vnf-firewall")
    for name, (vcpus, ram, slots) in (("vnf.small", small), ("vnf.big", big)):
        cli("flavor", "create", "--ram", str(ram), "--vcpus", str(vcpus), "--disk", "0",
            "--property", f"resources:CUSTOM_VNF_SESSION_SLOT={slots}", name)
    srv = timed("server create --wait", "server", "create", "--image", "vnf-firewall",
                "--flavor", "vnf.small", "--nic", "none", "--availability-zone",
                f"nova:{HOST1}", "--wait", "mv")
    uuid = srv["id"]
    state("ACTIVE", HOST1)
    first = only_on(HOST1, small)
    usage(small, None)

    # -- cold migrate + confirm
    timed("server migrate --wait", "server", "migrate", "--wait", "mv", json_out=False)
    state("VERIFY_RESIZE", HOST2)
    moved = only_on(HOST2, small)
    assert not ns._alive(first["pid"])
    gaps["migrate"] = _gap_ms(stack, HOST2, uuid)
    usage(small, small)                                   # the migration holds the source's
    timed("server migrate confirm", "server", "migrate", "confirm", "mv", json_out=False)
    state("ACTIVE", HOST2)
    assert only_on(HOST2, small)["id"] == moved["id"]
    usage(None, small)

    # -- resize (to host1, the other compute) + revert, then + confirm
    timed("server resize --wait", "server", "resize", "--flavor", "vnf.big", "--wait", "mv",
          json_out=False)
    state("VERIFY_RESIZE", HOST1)
    only_on(HOST1, big)
    gaps["resize"] = _gap_ms(stack, HOST1, uuid)
    usage(big, small)
    timed("server resize revert", "server", "resize", "revert", "mv", json_out=False)
    state("ACTIVE", HOST2)
    only_on(HOST2, small)
    usage(None, small)
    cli("server", "resize", "--flavor", "vnf.big", "--wait", "mv", json_out=False)
    state("VERIFY_RESIZE", HOST1)
    timed("server resize confirm", "server", "resize", "confirm", "mv", json_out=False)
    shown = state("ACTIVE", HOST1)
    assert "vnf.big" in json.dumps(shown["flavor"]), shown["flavor"]
    resized = only_on(HOST1, big)
    usage(big, None)

    # -- live migration: refused with what to do instead; the server keeps running on its VNF
    t = time.monotonic()
    p = subprocess.run([str(ns.BIN / "openstack"), "server", "migrate", "--live-migration", "mv"],
                       capture_output=True, text=True, env=cli.env, timeout=180)
    times["server migrate --live-migration (refused)"] = round(time.monotonic() - t, 2)
    assert p.returncode != 0 and "cold-migrate: `openstack server migrate SERVER`" in p.stderr, \
        (p.stdout, p.stderr)
    state("ACTIVE", HOST1)
    again = only_on(HOST1, big)
    assert (again["id"], again["pid"]) == (resized["id"], resized["pid"])
    events = [e for e in cli("server", "event", "list", "mv") if e["Action"] == "live-migration"]
    detail = cli("--os-compute-api-version", "2.84", "server", "event", "show", "mv",
                 events[0]["Request ID"])
    assert "cold-migrate: `openstack server migrate SERVER`" in json.dumps(detail), detail
    usage(big, None)

    # -- evacuate: host1's nova-compute stops and is forced down; its VNF still runs
    proc = stack.procs[SVC[HOST1]]
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    stack.log(SVC[HOST1]).rename(stack.logs / "nova-compute.before-evacuate.log")
    cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--down", HOST1,
        "nova-compute", json_out=False)
    t = time.monotonic()
    cli("server", "evacuate", "mv", json_out=False)
    # from microversion 2.95 on (this CLI's default) the server is rebuilt on the target and
    # left SHUTOFF there (Nova powers the new VNF off again); before, it comes back ACTIVE
    shown = _wait("server mv rebuilt on host2", lambda: (lambda s: s if s["status"] in (
        "ACTIVE", "SHUTOFF") and s["OS-EXT-SRV-ATTR:host"] == HOST2 and not s[
        "OS-EXT-STS:task_state"] else None)(stack.server("mv")))
    times[f"server evacuate -> {shown['status']} on host2"] = round(time.monotonic() - t, 2)
    if shown["status"] == "SHUTOFF":
        assert _vnfs(stack, HOST2, uuid, "--all") == []
        timed("server start (evacuated)", "server", "start", "mv", json_out=False)
        state("ACTIVE", HOST2)
    (evac,) = _vnfs(stack, HOST2, uuid)
    assert _slots_total(stack, HOST2, uuid) == big[2]
    assert ns._alive(resized["pid"]), "the down host's VNF stopped without its nova-compute"
    usage(big, big)
    # host1 comes back: Nova finds the evacuated server's VNF there and has the driver remove it
    t = time.monotonic()
    stack.start_compute(HOST1)
    stack.wait_log(SVC[HOST1], "launch core on")
    _wait("host1's evacuated VNF removed", lambda: not _vnfs(stack, HOST1, uuid, "--all"),
          interval=1.0)                         # a fluidvim CLI run per try
    times["source back: evacuated VNF removed (s)"] = round(time.monotonic() - t, 2)
    # Nova lets the host up once its start-up cleanup completed the evacuation's migration
    # (the request of `openstack --os-compute-api-version 2.11 compute service set --up`)
    _wait("compute service set --up", lambda: stack.api(
        "compute", "PUT", "/os-services/force-down", microversion="2.11", raise_exc=False,
        json={"host": HOST1, "binary": "nova-compute", "forced_down": False}).ok)
    assert not ns._alive(resized["pid"])
    assert only_on(HOST2, big)["id"] == evac["id"]
    _wait("host1's allocation removed", lambda: _usage(stack, HOST1) == (0, 0, 0))
    usage(None, big)

    timed("server delete --wait", "server", "delete", "--wait", "mv", json_out=False)
    assert _vnfs(stack, HOST1, None, "--all") == [] and _vnfs(stack, HOST2, None, "--all") == []
    usage(None, None)
    print("openstack CLI move steps (s):", times)
    print("VNF gap source stopped -> target running (ms):", gaps)
    assert all(g is not None for g in gaps.values()), gaps


def test_zone_networks_need_port_security(stack):
    """A Neutron that cannot switch port security off (this cloud's stand-in lists no extension,
    as a Neutron without ML2's port_security extension driver lacks that one): the Nova zone's
    create_network, and so a load probe with a generator VNF, fail before any server with the
    fix named (issue 23 item 2)."""
    import openstack.connection

    from fluidvim.common.zonetypes import ZoneError
    from fluidvim.evaluator import probes
    from fluidvim.evaluator.model import EnvironmentType
    from fluidvim.orchestrator.zones.nova import NovaZone

    conn = openstack.connection.Connection(session=stack.session(), region_name=ns.REGION)
    zone = NovaZone("nova-noportsec", conn, default_flavor="none", default_image="none")
    fix = r"no port-security extension.*\[ml2\] extension_drivers = port_security"
    with pytest.raises(ZoneError, match=fix):
        zone.create_network("probe-a")
    env = EnvironmentType(launcher="nova", accel="kvm", machine="microvm", cpu_model="any",
                          vcpus=1, memory_mb=32)
    r = probes.LoadProbe(sessions=(1,), traffic="vnf", prefix="fvnq").run(env, zone)
    assert not r.ok and re.search(fix, r.error), r.error
    assert not [s.name for s in conn.compute.servers() if s.name.startswith("fluidvim-")]
