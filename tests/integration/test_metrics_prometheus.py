# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Per-VNF power where operators look: real VNFs (one forwarding pings, one idle), the
``fluidvim metrics serve`` exporter, and a real Prometheus server (Debian's ``prometheus``,
started here on a free port with a temporary configuration, never as a system service) that
scrapes it and answers PromQL through its HTTP API; then ``fluidvim vnf stats`` shows the same
attribution. And the latency controller the exporter runs, on a real VNF's cgroup.

The host's power comes from the chain's linear model (this host has no RAPL and no BMC): the
source label says so.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from fluidvim.cmd import cli
from fluidvim.orchestrator.power import exporter
from tests.bmcserver import free_port

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
ZONE = "promtest"


@contextlib.contextmanager
def prometheus_server(tmp_path, target: str):
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.fail("no prometheus binary: tools/bootstrap.sh installs Debian's prometheus")
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                   "scrape_configs:\n  - job_name: fluidvim\n"
                   f"    static_configs:\n      - targets: ['{target}']\n")
    log = open(tmp_path / "prometheus.log", "wb")
    p = subprocess.Popen([exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path}/tsdb",
                          f"--web.listen-address=127.0.0.1:{port}"], stdout=log,
                         stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if p.poll() is not None:
                pytest.fail(f"prometheus exited: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("prometheus did not become ready in 30 s")
        yield url
    finally:
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()


def promql(url: str, query: str) -> list:
    q = urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=10) as r:
        doc = json.load(r)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def wait_for(url: str, query: str, ok, timeout: float = 60.0) -> list:
    deadline = time.monotonic() + timeout
    res = []
    while time.monotonic() < deadline:
        res = promql(url, query)
        if res and ok(res):
            return res
        time.sleep(0.5)
    pytest.fail(f"PromQL {query!r} never satisfied the check within {timeout:.0f} s: {res}")


def test_prometheus_scrapes_per_vnf_power(make_manager, net, tmp_path):
    mgr = make_manager(backend="qemu")
    fw = mgr.launch(FORWARD, name="fw.0a1b2c3d", nics=net.bridges, warm=False)
    idle = mgr.launch(FORWARD, name="idle.4e5f6071", nics=[None, None], warm=False)
    assert net.ping(2) >= 1
    conf = mgr.conf
    exporter.register_opts(conf)
    for k, v in {"sources": ["linear"], "idle_watts": 40.0, "max_watts": 140.0}.items():
        conf.set_override(k, v, group="power")
    for k, v in {"port": free_port(), "bind_host": "127.0.0.1", "zone": ZONE,
                 "interval_s": 0.5}.items():
        conf.set_override(k, v, group="metrics")
    ex = exporter.Exporter(conf, mgr).start()
    pinger = net.popen("a", "ping", "-n", "-q", "-i", "0.002", "-w", "40", net.ip_b,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with prometheus_server(tmp_path, f"127.0.0.1:{ex.port}") as url:
            sel = f'{{zone="{ZONE}"}}'
            # the forwarding VNF has been charged energy, and its labels say where from
            res = wait_for(url, f"fluidvim_vnf_joules_total{sel}",
                           lambda r: len(r) == 2 and all(float(s["value"][1]) > 0 for s in r))
            labels = {s["metric"]["vnf"]: s["metric"] for s in res}
            assert labels["fw.0a1b2c3d"]["service"] == "fw"
            assert labels["idle.4e5f6071"]["service"] == "idle"
            assert {s["metric"]["source"] for s in res} == {"linear"}
            # conservation, as PromQL: sum(VNFs) + unattributed = host, within 1 %
            gap = wait_for(url, f"abs(sum(fluidvim_vnf_watts{sel}) + "
                                f"sum(fluidvim_host_unattributed_watts{sel}) - "
                                f"sum(fluidvim_host_watts{sel})) / sum(fluidvim_host_watts{sel})",
                           lambda r: True)
            assert float(gap[0]["value"][1]) <= 0.01, gap
            host = promql(url, f"fluidvim_host_watts{sel}")
            assert 40.0 <= float(host[0]["value"][1]) <= 140.0, host
            # the forwarding VNF's own busy work is charged, the idle one's is (nearly) none:
            # it only answers the exporter's stats
            def fw_busier(r):
                b = {s["metric"]["vnf"]: float(s["value"][1]) for s in r}
                return len(b) == 2 and b["fw.0a1b2c3d"] > b["idle.4e5f6071"]

            wait_for(url, f'fluidvim_vnf_component_watts{{zone="{ZONE}",component="busy"}}',
                     fw_busier)
            # idle power by reserved vCPUs: one each of this host's CPUs (or all of it, split
            # evenly, when there are fewer CPUs than VNFs' vCPUs)
            idl = promql(url, f'fluidvim_vnf_component_watts{{zone="{ZONE}",component="idle"}}')
            vals = sorted(float(s["value"][1]) for s in idl)
            assert vals[0] == pytest.approx(vals[1]) and vals[0] > 0, idl
            slots = promql(url, f"fluidvim_vnf_free_slots{sel}")
            assert {s["metric"]["vnf"] for s in slots} == {"fw.0a1b2c3d", "idle.4e5f6071"}
            assert all(float(s["value"][1]) > 0 for s in slots)
            qd = promql(url, f"fluidvim_host_queuing_delay_seconds{sel}")
            assert qd and float(qd[0]["value"][1]) > 0, qd
            # a counter: joules only grow
            j0 = float(promql(url, 'fluidvim_vnf_joules_total{vnf="fw.0a1b2c3d"}')[0]["value"][1])
            wait_for(url, 'fluidvim_vnf_joules_total{vnf="fw.0a1b2c3d"}',
                     lambda r: float(r[0]["value"][1]) > j0)
    finally:
        pinger.terminate()
        pinger.wait()
        ex.stop()

    # the local zone's slot source hands the slot agent each VNF's watts (the exporter's last
    # interval) with its slots: the watts per slot its notifications carry
    from fluidvim.common.slotnotify import watts_per_slot
    from fluidvim.orchestrator.zones.local import LocalZone
    entry = LocalZone(ZONE, mgr).instance_slots()[fw.vnf_id]
    assert entry["watts"] == mgr.power(fw.vnf_id)["watts"] and entry["watts"] > 0, entry
    assert watts_per_slot(entry) == pytest.approx(entry["watts"] / entry["total"])

    # the operator's command line reads the exporter's last interval
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["--state-dir", conf.vnf.state_dir, "--run-dir", conf.vnf.run_dir,
                       "--backend", "qemu", "vnf", "stats", fw.vnf_id])
    text = out.getvalue()
    assert rc == 0, text
    assert "(source linear; `fluidvim metrics serve`" in text, text
    line = next(ln for ln in text.splitlines() if ln.startswith("power: "))
    assert float(line.split()[1]) > 0, line
    # or samples now, over --power seconds, with the [power] chain of its configuration file
    cfg = tmp_path / "fluidvim.conf"
    cfg.write_text("[power]\nsources = linear\nidle_watts = 10\nmax_watts = 50\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["--config-file", str(cfg), "--state-dir", conf.vnf.state_dir,
                       "--run-dir", conf.vnf.run_dir, "--backend", "qemu", "vnf", "stats",
                       "--json", "--power", "0.5", idle.vnf_id])
    assert rc == 0, out.getvalue()
    doc = json.loads(out.getvalue())
    assert doc["power"]["source"] == "linear" and doc["power"]["how"] == "sampled over 0.5 s"
    assert 0 < doc["power"]["watts"] <= doc["power"]["host_watts"] <= 50.0, doc["power"]


def test_latency_controller_caps_a_real_vnf_and_releases_it(make_manager, net):
    """The exporter's sampler with a latency target for service fw: a real VNF forwarding pings
    far under its target has its cgroup's CPU quota cut at once to a cap sized from its offered
    rate against the capacity it was given (its need, its own busy share of its QEMU's real CPU,
    measured beside it; the real cgroup file changes) and its
    busy-poll window narrowed (the VNF reports it); when its QEMU is stopped it stops answering
    and gets its flavor's quota back at once, and its default window as soon as it answers
    again."""
    from fluidvim.orchestrator import power
    from fluidvim.orchestrator.power.controller import CgroupCap, LatencyController
    from fluidvim.vnf import cgroups, limits

    version, why = cgroups.mode()
    if not version:
        pytest.skip(f"no CPU quota to control here: {why}")
    mgr = make_manager(backend="qemu")
    fw = mgr.launch(FORWARD, name="fw.5e6f7a8b", nics=net.bridges, warm=False)
    uid = mgr.get(fw.vnf_id).spec.uuid
    full = limits.CPU_PERIOD_US + limits.QEMU_OVERHEAD_CPU_US    # the launch's quota
    assert cgroups.cpu_quota(uid) == full
    # the production actuator, on the flavor's period: a cap is its share, a release the
    # launch's quota again
    ctl = LatencyController(CgroupCap(limits.CPU_PERIOD_US), hold_intervals=1, min_packets=5,
                            wait_share=None, cap_period_us=limits.CPU_PERIOD_US,
                            poll_first=False)      # straight to a cap (the window first: below)
    sampler = exporter.HostSampler(mgr, power.Attributor(power.LinearModel(30.0, 90.0), "linear"),
                                   targets={"fw": 100_000.0}, controller=ctl,
                                   capacities={"fw": 50_000})
    ctl.poller = sampler.set_poll_window            # the VNF's busy-poll window, `poll` op

    def window(key="window_us"):
        with mgr.channel(fw.vnf_id) as ch:
            return ch.poll().get(key)

    assert window() == 1000
    pinger = net.popen("a", "ping", "-n", "-q", "-i", "0.01", "-w", "30", net.ip_b,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(2):
            sampler.step()
            time.sleep(0.5)
        d = sampler.control[fw.vnf_id]
        assert [x["action"] for x in ctl.decisions] == ["hold", "cap"], ctl.decisions
        assert d["packets"] > 0 and d["p99_ns"] is not None
        # the host's side of its rings is read too (its taps; controller.tap_counters)
        assert d["ring_backlog"] is not None and d["host_dropped"] is not None, d
        # sized from its rate (its NICs' rx: the pings and their replies) against its capacity,
        # not a step; its need (its QEMU's CPU and its own busy share) measured beside it
        assert d["need_cpus"] is not None and d["state"] == "capped", d
        assert d["rate_pps"] > 0 and d["capacity_pps"] == 50_000, d
        assert f"of 50000 pps -> {d['sized_us']} us" in d["why"], d
        assert d["quota_us"] == max(ctl.min_quota_us, d["sized_us"]), d
        assert cgroups.cpu_quota(uid, vcpus=True) == d["quota_us"] < limits.CPU_PERIOD_US
        assert cgroups.cpu_quota(uid) == full            # QEMU's main thread: not capped
        assert window() == d["poll_window_us"] == ctl.min_poll_us == 0   # as the VNF says
        assert window("host_halt_poll") in (None, False)     # window 0: the host's off too
        assert net.ping(2) >= 1                          # still forwarding under the cap
        # QEMU stopped (SIGSTOP): the VNF is still running by the store but does not answer
        pid = mgr.get(fw.vnf_id).pid
        os.kill(pid, signal.SIGSTOP)
        try:
            sampler.step()
        finally:
            os.kill(pid, signal.SIGCONT)
        d = sampler.control[fw.vnf_id]
        assert (d["action"], d["why"]) == ("release", "no stats reply"), d
        assert cgroups.cpu_quota(uid) == full and cgroups.cpu_quota(uid, vcpus=True) is None
        assert (d["poll_window_us"], d["poll_window_applied_us"]) == (1000, None), d
        # answering again: the window it may or may not have taken is told now (with this
        # interval's own decision)
        sampler.step()
        d = sampler.control[fw.vnf_id]
        assert window() == d["poll_window_us"] == d["poll_window_applied_us"], d
        # the default way (poll_first): quiet and open, the window alone first (poll only),
        # the quota the flavor's; the VNF's steal-free shares give its vCPU's need
        first = LatencyController(CgroupCap(), hold_intervals=1, min_packets=5,
                                  wait_share=None, poller=sampler.set_poll_window)
        sampler.controller = first
        for _ in range(3):
            sampler.step()
            time.sleep(0.5)
        d = sampler.control[fw.vnf_id]
        assert "narrow" in [x["action"] for x in first.decisions], first.decisions
        assert d["state"] == "poll only" and d["quota_us"] == limits.CPU_PERIOD_US, d
        assert d["vcpu_cpus"] is not None and d["need_cpus"] is not None, d
        assert cgroups.cpu_quota(uid) == full and window() == 0
        assert "stolen_us" in mgr.stats(fw.vnf_id)["cpu"]
    finally:
        pinger.terminate()
        pinger.wait()


def test_vhost_backend_cpu_is_charged_to_its_vnf(make_manager, net):
    """net_backend vhost-user: the sampler finds the VNF's fluidvim-vhost-net (the process
    given its first NIC's tap) and charges its CPU time (all its threads': /proc/<pid>/stat) to
    that VNF as host-side cost: more with traffic than idle, and every interval still adds up
    to the host's watts."""
    from fluidvim.orchestrator import power

    mgr = make_manager(backend="qemu", net_backend="vhost-user")
    fw = mgr.launch(FORWARD, name="fw.9a8b7c6d", nics=net.bridges, warm=False)
    helper = mgr.backend("qemu")._vhost[fw.vnf_id].pid
    sampler = exporter.HostSampler(mgr, power.Attributor(power.LinearModel(30.0, 90.0), "linear"))
    (c,) = sampler.read_vnfs()
    assert c.helper_pids == (helper,)

    def vhost_s(n):
        """The vhost CPU-seconds charged over ``n`` one-second intervals, each checked."""
        total = 0.0
        for _ in range(n):
            time.sleep(1.0)
            iv = sampler.step()
            iv.check()
            s = iv.vnfs[fw.vnf_id]
            assert s.components["vhost"] == pytest.approx(s.cpu_s["vhost"] * (
                (iv.host_watts - iv.idle_watts) / iv.host_busy_s if iv.host_busy_s else 0.0))
            total += s.cpu_s["vhost"]
        return total

    sampler.step()
    idle = vhost_s(3)
    pinger = net.popen("a", "ping", "-n", "-q", "-i", "0.001", "-s", "1000", "-w", "30",
                       net.ip_b, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        busy = vhost_s(3)
        for _ in range(10):          # a loaded host may give the backend little CPU at first
            if busy > idle and busy > 0:
                break
            busy += vhost_s(1)
        assert busy > idle and busy > 0, (idle, busy)
    finally:
        pinger.terminate()
        pinger.wait()


def test_controller_releases_a_capped_vnf_whose_ring_fills(make_manager, net):
    """The controller's end-to-end signal on a real VNF: capped to 1 % of a CPU (as a quiet
    streak would leave it) and sent 5,000 UDP frames/s, frames pile up in its RX ring and the
    tap behind it while its own latency histogram (from FromDevice; the target here is 10 s,
    out of reach) sees nothing wrong: the host's tap counters do, and the cap is released."""
    import sys

    from fluidvim.orchestrator import power
    from fluidvim.orchestrator.power.controller import CgroupCap, LatencyController
    from fluidvim.vnf import cgroups, limits

    version, why = cgroups.mode()
    if not version:
        pytest.skip(f"no CPU quota to control here: {why}")
    mgr = make_manager(backend="qemu")
    fw = mgr.launch(FORWARD, name="fw.1c2d3e4f", nics=net.bridges, warm=False)
    uid = mgr.get(fw.vnf_id).spec.uuid
    assert net.ping(2) >= 1                         # forwarding, and ARP resolved
    ctl = LatencyController(CgroupCap(limits.CPU_PERIOD_US), hold_intervals=1000,
                            min_quota_us=1000)
    sampler = exporter.HostSampler(mgr, power.Attributor(power.LinearModel(30.0, 90.0), "linear"),
                                   targets={"fw": 10_000_000.0}, controller=ctl)
    sampler.step()
    assert ctl.state[uid].quota_us == limits.CPU_PERIOD_US
    assert cgroups.set_cpu_quota(uid, 1000)
    ctl.state[uid].quota_us, ctl.state[uid].state = 1000, "capped"
    blast = ("import socket, time\n"
             "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             "end = time.monotonic() + 30\n"
             "while time.monotonic() < end:\n"
             "    for _ in range(50):\n"
             f"        s.sendto(b'x' * 18, ('{net.ip_b}', 9))\n"
             "    time.sleep(0.01)\n")
    sender = net.popen("a", sys.executable, "-c", blast, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    try:
        for _ in range(40):
            time.sleep(0.5)
            sampler.step()
            d = sampler.control[fw.vnf_id]
            if d["action"] == "release":
                break
        assert d["action"] == "release", ctl.decisions
        assert d["why"].startswith(("host dropped", "ring backlog")), ctl.decisions
        assert cgroups.cpu_quota(uid) == limits.CPU_PERIOD_US + limits.QEMU_OVERHEAD_CPU_US
    finally:
        sender.terminate()
        sender.wait()
