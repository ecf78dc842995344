# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""End to end as a user: real Keystone, Placement, Glance, nova-api, nova-conductor,
nova-scheduler and nova-compute (``compute_driver = fluidvim.UnikernelDriver``), each its own
process from the installed PyPI packages, RabbitMQ and SQLite, driven by the unmodified
``openstack`` CLI (see :mod:`tests.e2e.nova_services`; by hand: ``sudo tools/nova-e2e.sh``).

Checks: image upload of the VNF kernel, flavors with ``resources:CUSTOM_VNF_SESSION_SLOT``,
``server create --wait`` → ACTIVE, the VNF answers on its control channel (``fluidvim vnf stats``
against nova-compute's state), ``console log show`` has the VNF's boot lines, Placement shows the
slot inventory and usage, a flavor needing more slots than are free gets NoValidHost, a
nova-compute killed with -9 (a create in flight) re-attaches to the running VNF,
``server stop/start/reboot [--hard]`` act on
the VNF, and ``server delete`` leaves no QEMU, no tap, no VNF record and no Placement usage;
``server create --user-data`` runs the user_data's Click configuration (a bad one: ERROR, the
fault naming line and column) and nova-api refuses an unknown ``fluidvim:`` flavor extra spec.
With the real Neutron (ML2/OVS, its OVS agent, on Open vSwitch with the userspace datapath):
``network create`` ×2, ``subnet create`` ×2, ``server create --nic net-id=… --nic net-id=…`` →
ACTIVE, traffic between two Neutron ports of those networks passes through the VNF (its counters
move), and ``server delete`` leaves no OVS port (:func:`tests.e2e.nova_services.scenario_ovs`).
About 2-3 minutes (about 60 s of it is starting the cloud).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from fluidvim.vnf import conf as vnfconf
from tests import faults
from tests.e2e import nova_services as ns

KERNEL = vnfconf.default_kernel()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),        # setup (the cloud) included: a hang guard, not a deadline
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (taps, QEMU)"),
    pytest.mark.skipif(not os.path.exists(KERNEL),
                       reason="the VNF kernel is not built: run `make -C unikernel`"),
    pytest.mark.skipif(shutil.which("rabbitmqctl") is None,
                       reason="RabbitMQ is not installed: run tools/bootstrap.sh"),
]


@pytest.fixture(scope="module")
def stack():
    # a work dir, ports, vhost and run dir of this run's own: another run, or the services a
    # killed run left, are neither stopped by this one nor in its way (logs stay in the work dir)
    work = tempfile.mkdtemp(prefix="fvn-nova-e2e-pytest-")
    s = ns.Stack(work, kernel=KERNEL, ports=ns.free_ports(ns.SERVICES + ("openflow",)))
    try:
        s.start()
        yield s
    finally:
        s.stop()


def _with_logs(stack, fn, *args, **kw):
    """Run fn; on failure add the tails of the compute-side service logs to the error."""
    try:
        return fn(*args, **kw)
    except AssertionError as e:
        logs = "\n".join(f"--- {svc} ---\n{stack.tail(svc, 25)}"
                         for svc in ("nova-compute", "nova-conductor", "nova-scheduler"))
        raise AssertionError(f"{e}\n{logs}") from None


def test_openstack_cli_scenario(stack):
    times = _with_logs(stack, ns.scenario, stack, KERNEL)
    print("openstack CLI step wall-clock seconds:", times)
    assert set(times) >= {"image create", "server create --wait", "server delete --wait"}


def _firewall_server(cli, name):
    """An ACTIVE server of the firewall image and vnf.small (both made when a test runs alone)."""
    ns._ensure_firewall_image(cli, KERNEL)
    srv = cli("server", "create", "--image", "vnf-firewall", "--flavor", "vnf.small", "--nic",
              "none", "--wait", name)
    assert srv["status"] == "ACTIVE", srv.get("fault")
    return srv


def test_compute_kill_9_under_load_reattaches(stack):
    """nova-compute killed with -9 while a `server create` is in flight (claimed on the
    compute, spawning), then started again
    (issue 26 item 5; bench/results/faults.md): the running server stays ACTIVE on the same
    VNF, the one in flight ends ACTIVE or ERROR (nova's init_host), no QEMU is outside the
    launch core's records, Placement's slot usage is what the VNFs hold, and deleting both
    leaves no VNF, QEMU or usage. Prints ``FAULT nova-compute-kill-9 recovery_ms=<n>``."""
    cli = ns.OpenStackCLI(stack)
    srv = _firewall_server(cli, "fw-restart")
    before = [v for v in ns._fluidvim(stack, "list") if v["name"] == srv["id"]]
    assert len(before) == 1, before
    claims = stack.log("nova-compute").read_text(errors="replace").count("Claim successful")
    inflight = subprocess.Popen(
        [str(ns.BIN / "openstack"), "server", "create", "--image", "vnf-firewall", "--flavor",
         "vnf.small", "--nic", "none", "--wait", "fw-inflight"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=cli.env)
    deadline = time.monotonic() + 120           # kill once the compute has claimed it
    while stack.log("nova-compute").read_text(errors="replace").count("Claim successful") \
            == claims:
        assert time.monotonic() < deadline and inflight.poll() is None, inflight.stdout.read()
        time.sleep(0.05)

    proc = stack.procs["nova-compute"]
    os.kill(proc.pid, signal.SIGKILL)           # the service only: its VNFs run on
    proc.wait(timeout=60)
    stack.log("nova-compute").rename(stack.logs / "nova-compute.before-restart.log")
    t0 = time.monotonic()
    stack._start("nova-compute", [str(ns.BIN / "nova-compute"), "--config-file",
                                  str(stack.compute_conf)])
    stack.wait_log("nova-compute", "launch core on")
    up = time.monotonic()
    out, _ = inflight.communicate(timeout=300)
    settled = _wait_status(stack, "fw-inflight", ("ACTIVE", "ERROR"))
    print(f"\nFAULT nova-compute-kill-9 recovery_ms={(up - t0) * 1000:.0f} (process start "
          f"to its launch core up) in_flight={settled['status']} settled_ms="
          f"{(time.monotonic() - t0) * 1000:.0f} fault={settled.get('fault')}")
    after = [v for v in ns._fluidvim(stack, "list") if v["name"] == srv["id"]]
    assert [(v["id"], v["pid"]) for v in after] == [(v["id"], v["pid"]) for v in before]
    assert ns._fluidvim(stack, "stats", srv["id"])["configured"]
    # the restarted compute reports the instance as running (its power sync saw the VNF)
    deadline = time.monotonic() + 60
    while True:
        shown = stack.server("fw-restart")
        if shown["status"] == "ACTIVE" and shown["OS-EXT-STS:power_state"] == 1:   # running
            break
        assert time.monotonic() < deadline, f"after the restart: {shown}"
        time.sleep(0.5)
    _check_no_orphan_and_slots(stack, {srv["id"], settled["id"]},
                               1 if settled["status"] == "ERROR" else 0, out)
    cli("server", "delete", "--wait", "fw-restart", "fw-inflight", json_out=False)
    assert not [v for v in ns._fluidvim(stack, "list", "--all")], "VNFs left after delete"
    assert not ns._alive(before[0]["pid"])        # gone, or a zombie init has yet to reap
    assert not faults.qemu_pids(stack.run_dir), "QEMU left after delete"
    assert not any(ns._usages(stack)["usages"].values()), "Placement usage after delete"


def _check_no_orphan_and_slots(stack, servers: set[str], errored: int, inflight_out: str
                               ) -> None:
    """Every VNF is a server's; the QEMUs of nova-compute's run dir are exactly the running
    VNFs'; Placement's slot usage is the slots the VNFs report, plus the ``errored`` servers'
    (vnf.small: one slot each; Nova keeps an ERROR server's allocation until it is deleted)."""
    vnfs = ns._fluidvim(stack, "list", "--all")
    assert {v["name"] for v in vnfs} <= servers, (vnfs, inflight_out)
    running = [v for v in vnfs if v["status"] == "running"]
    assert set(faults.qemu_pids(stack.run_dir)) == {v["pid"] for v in running}, vnfs
    slots = sum(ns._fluidvim(stack, "stats", v["name"])["slots"]["total"] for v in running)
    use = ns._usages(stack)["usages"].get("CUSTOM_VNF_SESSION_SLOT", 0)
    assert use == slots + errored, (use, slots, errored, vnfs, inflight_out)


def _wait_status(stack, name, status, timeout=120):
    """Waits for ``status`` (or one of a tuple of them); ERROR fails unless it is one. Polls
    the compute API from this process (what ``openstack server show`` shows)."""
    wanted = status if isinstance(status, tuple) else (status,)
    deadline = time.monotonic() + timeout
    while True:
        shown = stack.server(name)
        if shown["status"] in wanted:
            return shown
        assert shown["status"] != "ERROR", f"{name} went to ERROR: {shown.get('fault')}"
        assert time.monotonic() < deadline, f"{name} not {status} after {timeout}s: {shown}"
        time.sleep(0.5)


def test_stop_start_reboot(stack):
    """`server stop/start/pause/unpause/reboot [--hard]` through the real services, checked on
    the VNF."""
    cli = ns.OpenStackCLI(stack)
    srv = _firewall_server(cli, "fw-power")

    def vnf():
        vnfs = [v for v in ns._fluidvim(stack, "list") if v["name"] == srv["id"]]
        assert len(vnfs) <= 1, vnfs
        return vnfs[0] if vnfs else None

    first = vnf()
    cli("server", "stop", "fw-power", json_out=False)
    _wait_status(stack, "fw-power", "SHUTOFF")
    assert vnf() is None, "the VNF still runs after `server stop`"
    assert not ns._alive(first["pid"])
    cli("server", "start", "fw-power", json_out=False)
    _wait_status(stack, "fw-power", "ACTIVE")
    second = vnf()
    assert second is not None and second["id"] != first["id"]
    cli("server", "pause", "fw-power", json_out=False)                 # the vCPUs stop
    _wait_status(stack, "fw-power", "PAUSED")
    assert vnf()["status"] == "paused" and ns._alive(second["pid"])
    cli("server", "unpause", "fw-power", json_out=False)
    _wait_status(stack, "fw-power", "ACTIVE")
    assert vnf()["status"] == "running" and vnf()["id"] == second["id"]
    assert ns._fluidvim(stack, "stats", srv["id"])["configured"]
    cli("server", "reboot", "--wait", "fw-power", json_out=False)       # soft: reconfigure
    _wait_status(stack, "fw-power", "ACTIVE")
    assert vnf()["id"] == second["id"], "a soft reboot relaunched the VNF"
    cli("server", "reboot", "--hard", "--wait", "fw-power", json_out=False)
    _wait_status(stack, "fw-power", "ACTIVE")
    third = vnf()
    assert third["id"] != second["id"] and ns._fluidvim(stack, "stats", srv["id"])["configured"]
    cli("server", "delete", "--wait", "fw-power", json_out=False)
    assert vnf() is None


def test_user_data_config_and_extra_spec_validation(stack, tmp_path):
    """`server create --user-data` (day-0 Click configuration, over the image's) and
    `flavor set --property fluidvim:…` checked by nova-api (the fluidvim validators)."""
    cli = ns.OpenStackCLI(stack)
    ns._ensure_firewall_image(cli, KERNEL)
    cli("flavor", "create", "--ram", "32", "--vcpus", "1", "--disk", "0", "vnf.day0")

    # nova-api validates extra specs from microversion 2.86 on: a misspelt key is refused
    p = subprocess.run([str(ns.BIN / "openstack"), "--os-compute-api-version", "2.86", "flavor",
                        "set", "--property", "fluidvim:slotz=4", "vnf.day0"],
                       capture_output=True, text=True, env=cli.env, timeout=120)
    assert p.returncode != 0 and "fluidvim:slotz" in p.stdout + p.stderr, (p.stdout, p.stderr)
    cli("--os-compute-api-version", "2.86", "flavor", "set", "--property", "fluidvim:nics=2",
        "--property", "fluidvim:warm=false", "vnf.day0", json_out=False)
    props = cli("flavor", "show", "vnf.day0")["properties"]
    assert props == {"fluidvim:nics": "2", "fluidvim:warm": "false"}, props

    good = tmp_path / "day0.click"
    good.write_text("// day 0\nFromDevice(0) -> day0 :: Counter -> ToDevice(1);\n"
                    "FromDevice(1) -> ToDevice(0);\n")
    srv = cli("server", "create", "--image", "vnf-firewall", "--flavor", "vnf.day0", "--nic",
              "none", "--user-data", str(good), "--wait", "fw-day0")
    assert srv["status"] == "ACTIVE", srv.get("fault")
    names = [e["name"] for e in ns._fluidvim(stack, "stats", srv["id"])["elements"]]
    assert "day0" in names and "fw" not in names, names         # user_data, not the image's

    bad = tmp_path / "bad.click"
    bad.write_text("// day 0\nFromDevice(0) -> ToDevice(1);\n"
                   "FromDevice(1) -> Countr -> ToDevice(0);\n")
    subprocess.run([str(ns.BIN / "openstack"), "server", "create", "--image", "vnf-firewall",
                    "--flavor", "vnf.day0", "--nic", "none", "--user-data", str(bad), "--wait",
                    "fw-day0-bad"], capture_output=True, text=True, env=cli.env, timeout=180)
    shown = stack.server("fw-day0-bad")
    assert shown["status"] == "ERROR", shown
    assert ("the VNF rejected the Click configuration from user_data at line 3, column 18: "
            "unknown element class 'Countr'") in shown["fault"]["message"], shown["fault"]
    vnfs = ns._fluidvim(stack, "list", "--all")
    assert [v["name"] for v in vnfs] == [srv["id"]], vnfs       # nothing of the bad one

    cli("server", "delete", "--wait", "fw-day0", "fw-day0-bad", json_out=False)
    assert not ns._fluidvim(stack, "list", "--all"), "VNFs left after delete"


def test_neutron_ovs_networks(stack):
    """Two Neutron networks, a server on both, traffic through the VNF, delete (real Neutron)."""
    if not stack.neutron:
        pytest.skip(f"no real Neutron here: {ns.real_neutron_missing()}")
    times = _with_logs(stack, ns.scenario_ovs, stack, KERNEL)
    print("ovs scenario:", times)
    assert times["server create --nic net-id x2 --wait"] > 0


def test_load_probe_with_a_generator_vnf(stack):
    """Issue 23 item 2: stage 1's load probe in a Nova zone (the orchestrator's NovaZone over
    openstacksdk). This machine does not put packets on a compute's Neutron networks, so the
    probe takes its traffic from a generator VNF (traffic "auto" -> "vnf"): two Neutron networks
    with port security off made by the zone, the probe server on both, per step a generator
    server pinned to the same host (``az:host``) with its Click configuration as user_data and a
    Neutron port of its fixed MAC, each step read from the server's diagnostics; the servers,
    ports and networks go with the probe."""
    if not stack.neutron:
        pytest.skip(f"no real Neutron here: {ns.real_neutron_missing()}")
    import openstack.connection

    from fluidvim.evaluator import probes
    from fluidvim.orchestrator.zones.nova import NovaZone

    ns._ensure_firewall_image(ns.OpenStackCLI(stack), KERNEL)
    conn = openstack.connection.Connection(session=stack.session(), region_name=ns.REGION)
    flavor = conn.compute.create_flavor(name="vnf.loadprobe", ram=32, vcpus=1, disk=0)
    # the probe's flow table without a Placement claim (the host has 4 slots)
    conn.compute.create_flavor_extra_specs(flavor, {"fluidvim:session_slots": "64"})
    zone = NovaZone("nova-probe", conn, default_flavor="vnf.loadprobe",
                    default_image="vnf-firewall", launch_timeout=120)
    before = set(faults.qemu_pids(stack.run_dir))
    host = zone.hosts()[0]
    probe = probes.LoadProbe(sessions=(2, 16), session_pps=100, step_s=0.6, refine=0, recheck=0,
                             probe_slots=64, prefix="fvnp", traffic="auto")
    assert probe.applicable(zone) == (True, "")
    t0 = time.monotonic()
    r = probe.run(host.env, zone)
    print(f"\nnova zone load probe: {time.monotonic() - t0:.1f} s, steps "
          f"{[(s['sessions'], s['latency_ms'], s['loss']) for s in r.metrics['steps']]}")
    assert r.ok, r.error
    m = r.metrics
    assert m["traffic"] == "vnf" and m["host"] == host.name == ns.COMPUTE_HOST
    assert [s["sessions"] for s in m["steps"]] == [2, 16] or m["stopped"].startswith(
        ("loss", "the traffic generator reached"))          # a busy host's generator
    first = m["steps"][0]
    assert first["received"] > 0 and first["loss"] < 0.05          # 200 pps: nothing lost
    assert 0 < first["latency_ms"]["0.5"] <= first["latency_ms"]["0.99"]
    # gone: servers (so their VNFs and QEMUs), the generators' ports, the two networks
    assert zone.networks() == []
    assert not [n.name for n in conn.network.networks() if "fvnp" in (n.name or "")]
    assert not [p.name for p in conn.network.ports() if (p.name or "").startswith("fluidvim-")]
    assert not [s.name for s in conn.compute.servers() if s.name.startswith("fluidvim-")]
    assert not ns._fluidvim(stack, "list", "--all"), "VNFs left after the probe"
    assert not set(faults.qemu_pids(stack.run_dir)) - before, "QEMU left after the probe"
    conn.compute.delete_flavor(flavor)
