# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Attribution by useful work (fluidvim.orchestrator.power.attribution): conservation every
interval, the idle rules, busy vs poll vs host-side, softirq by packets, counter wrap and reset."""

from __future__ import annotations

import itertools

import pytest

from fluidvim.orchestrator import power
from fluidvim.orchestrator.power import attribution as att

TCK = att.CLK_TCK


def _d(key, cpu, busy=None, poll=None, helper=0.0, packets=0, vcpus=1):
    return att.VnfDelta(key=key, name=key, service="svc", vcpus=vcpus, cpu_s=cpu, busy_s=busy,
                        poll_s=poll, helper_s=helper, packets=packets)


def test_conservation_over_many_intervals():
    """sum(VNFs) + unattributed = host watts within 1 %, and nothing negative, whatever the
    inputs: VNFs using more CPU than the host counted, no busy time at all, idle above the
    host's watts, no VNFs, every idle rule."""
    cases = 0
    for host_w, idle_w, busy_s, soft_s, rule, n, over in itertools.product(
            (0.0, 35.0, 180.0), (0.0, 30.0, 200.0), (0.0, 0.4, 1.9), (0.0, 0.3),
            att.IDLE_RULES, (0, 1, 3), (0.5, 1.0, 3.0)):
        vnfs = [_d(f"v{i}", cpu=over * busy_s / max(1, n), busy=0.1 * i, poll=0.5,
                   helper=0.05 * i, packets=1000 * i, vcpus=1 + i % 2) for i in range(n)]
        iv = att.attribute(host_w, idle_w, "linear", 1.0, busy_s, soft_s, 1500, 2, vnfs, rule)
        assert iv.check(0.01) <= 0.01
        assert iv.unattributed_watts >= 0
        for s in iv.vnfs.values():
            assert s.watts >= 0 and all(w >= 0 for w in s.components.values())
            assert s.source == "linear"
            assert s.watts == pytest.approx(sum(s.components.values()))
        cases += 1
    assert cases == 3 * 3 * 3 * 2 * 3 * 3 * 3


def test_busy_poll_and_host_side_split():
    """A polling VNF: its QEMU used 1 CPU-second, it was busy 0.1 s and polled 0.8 s by its own
    count; the rest (0.1 s) is QEMU's. One CPU-second costs (W - W0) / host busy seconds."""
    iv = att.attribute(60.0, 20.0, "rapl", 1.0, host_busy_s=2.0, softirq_s=0.0,
                       host_rx_packets=0, host_cpus=4, vnfs=[_d("p", 1.0, busy=0.1, poll=0.8)],
                       idle_rule="none")
    s = iv.vnfs["p"]
    price = (60.0 - 20.0) / 2.0
    assert s.components["busy"] == pytest.approx(0.1 * price)
    assert s.components["poll"] == pytest.approx(0.8 * price)
    assert s.components["qemu"] == pytest.approx(0.1 * price)
    assert s.host_side_watts == pytest.approx(0.9 * price)
    assert s.watts == pytest.approx(1.0 * price)
    assert iv.unattributed_watts == pytest.approx(60.0 - price)
    # the ratio method gives the whole host's watts by QEMU CPU time: idle power included
    assert att.ratio_watts(60.0, 2.0, {"p": 1.0})["p"] == pytest.approx(30.0)


def test_guest_time_beyond_what_qemu_got_is_split_by_proportion():
    """A guest clock that ran while its vCPU thread was preempted reports more busy + poll time
    than the host gave its QEMU: QEMU's CPU is split busy : poll as the guest saw it, nothing is
    left for qemu."""
    iv = att.attribute(50.0, 10.0, "linear", 1.0, 1.0, 0.0, 0, 2,
                       [_d("a", 0.5, busy=0.4, poll=1.6)], "none")
    cpu = iv.vnfs["a"].cpu_s
    assert cpu["busy"] == pytest.approx(0.1)
    assert cpu["poll"] == pytest.approx(0.4)
    assert cpu["qemu"] == pytest.approx(0.0)


def test_no_stats_means_all_qemu_cpu_is_host_side():
    iv = att.attribute(50.0, 10.0, "linear", 1.0, 1.0, 0.0, 0, 2, [_d("a", 0.5)], "none")
    assert iv.vnfs["a"].cpu_s["busy"] == 0.0
    assert iv.vnfs["a"].cpu_s["qemu"] == pytest.approx(0.5)


def test_softirq_by_packet_share():
    """Softirq seconds go by packets: over the VNFs' packets while they are all the host
    carries, over the host's received packets when it carries more."""
    vnfs = [_d("a", 0.2, packets=3000), _d("b", 0.2, packets=1000)]
    iv = att.attribute(100.0, 0.0, "linear", 1.0, 1.0, 0.4, 2000, 2, vnfs, "none")
    assert iv.vnfs["a"].cpu_s["softirq"] == pytest.approx(0.3)
    assert iv.vnfs["b"].cpu_s["softirq"] == pytest.approx(0.1)
    iv = att.attribute(100.0, 0.0, "linear", 1.0, 1.0, 0.4, 8000, 2, vnfs, "none")
    assert iv.vnfs["a"].cpu_s["softirq"] == pytest.approx(0.15)
    assert iv.vnfs["b"].cpu_s["softirq"] == pytest.approx(0.05)


def test_overcount_is_scaled_to_the_host_busy_time():
    vnfs = [_d("a", 1.5, busy=1.0), _d("b", 1.5)]
    iv = att.attribute(100.0, 40.0, "linear", 1.0, 2.0, 0.0, 0, 2, vnfs, "none")
    assert sum(sum(s.cpu_s.values()) for s in iv.vnfs.values()) == pytest.approx(2.0)
    assert iv.unattributed_watts == pytest.approx(40.0)        # idle only: rule none


@pytest.mark.parametrize("rule,cpus,vcpus,want", [
    ("vcpus", 8, (1, 2), (10.0, 20.0)),       # reserved CPUs' idle; 5/8 of it unattributed
    ("vcpus", 2, (1, 1, 2), (20.0, 20.0, 40.0)),  # overcommitted: all of it, by vCPUs
    ("equal", 8, (1, 2), (40.0, 40.0)),
    ("none", 8, (1, 2), (0.0, 0.0)),
])
def test_idle_rules(rule, cpus, vcpus, want):
    vnfs = [_d(f"v{i}", 0.0, vcpus=v) for i, v in enumerate(vcpus)]
    iv = att.attribute(80.0, 80.0, "specpower", 1.0, 0.0, 0.0, 0, cpus, vnfs, rule)
    assert [round(iv.vnfs[f"v{i}"].components["idle"], 6) for i in range(len(vcpus))] == \
        list(want)
    assert iv.unattributed_watts == pytest.approx(80.0 - sum(want))


def test_bad_idle_rule_names_the_option():
    with pytest.raises(power.PowerError, match=r"\[power\] idle_rule: 'cores' is not one of "
                                               r"vcpus, equal, none"):
        att.attribute(10.0, 5.0, "linear", 1.0, 1.0, 0.0, 0, 2, [_d("a", 0.1)], "cores")


def test_counter_delta_wrap_and_reset():
    assert att.counter_delta(None, 5) == (0, False)
    assert att.counter_delta(5, 12) == (7, False)
    # a 32-bit counter near its top wraps
    assert att.counter_delta(2 ** 32 - 10, 5, modulus=2 ** 32) == (15, False)
    # going back from low in its range is a restart: the new value is what happened since
    assert att.counter_delta(1000, 40, modulus=2 ** 32) == (40, True)
    assert att.counter_delta(1000, 40) == (40, True)
    with pytest.raises(power.PowerError, match="negative"):
        att.counter_delta(1, -1)


class FakeProc:
    """A proc tree (stat, net/dev, <pid>/stat) whose counters the test advances."""

    def __init__(self, tmp_path):
        self.root = tmp_path / "proc"
        (self.root / "net").mkdir(parents=True)
        self.cpu = [1000, 0, 500, 8000, 100, 0, 50, 0]   # user nice system idle iowait irq softirq
        self.rx = 0
        self.procs = {}
        self.write()

    def write(self):
        (self.root / "stat").write_text("cpu  " + " ".join(map(str, self.cpu)) + "\n")
        (self.root / "net" / "dev").write_text(
            "Inter-|   Receive\n face |bytes    packets errs\n"
            f"    lo: 100 7 0 0 0 0 0 0 100 7 0 0 0 0 0 0\n"
            f"  eth0: 9999 {self.rx} 0 0 0 0 0 0 10 1 0 0 0 0 0 0\n")
        for pid, ticks in self.procs.items():
            (self.root / str(pid)).mkdir(exist_ok=True)
            fields = ["S"] + ["0"] * 10 + [str(ticks), "0"] + ["0"] * 8
            (self.root / str(pid) / "stat").write_text(f"{pid} (qemu) " + " ".join(fields) + "\n")

    def advance(self, busy, idle, softirq=0, rx=0, procs=None):
        self.cpu[0] += busy - softirq
        self.cpu[6] += softirq
        self.cpu[3] += idle
        self.rx += rx
        for pid, t in (procs or {}).items():
            self.procs[pid] = self.procs.get(pid, 0) + t
        self.write()


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _stats(uptime, busy, poll, pkts, free=10):
    return {"uptime_us": uptime, "cpu": {"busy_us": busy, "poll_us": poll, "halt_us": 0},
            "nics": [{"rx": pkts // 2, "tx": pkts - pkts // 2}], "slots": {"free": free}}


def test_attributor_restart_keeps_joules_and_adds_up(tmp_path):
    """Three intervals of a linear-model host with one VNF: its QEMU restarts (new pid, VNF
    uptime from 0) in the third; the interval counts what the new one did, joules only grow,
    and every interval adds up."""
    fp = FakeProc(tmp_path)
    fp.procs = {4242: 500}
    fp.write()
    clock = Clock()
    a = att.Attributor(power.LinearModel(20.0, 120.0), "linear", proc_root=str(fp.root),
                       idle_rule="vcpus", host_cpus=2, clock=clock)

    def read(pid, st):
        return a.sample(a.read_host(), [a.vnf_counters("v1", "fw.1", pid, st, service="fw")])

    assert read(4242, _stats(10_000_000, 1_000_000, 2_000_000, 100)) is None
    clock.t += 1.0
    fp.advance(busy=TCK, idle=TCK, softirq=TCK // 10, rx=2000, procs={4242: TCK // 2})
    iv = read(4242, _stats(11_000_000, 1_100_000, 2_350_000, 2100))
    s = iv.vnfs["v1"]
    assert iv.host_watts == pytest.approx(20.0 + 100.0 * 0.5)
    assert s.cpu_s["busy"] == pytest.approx(0.1)
    assert s.cpu_s["poll"] == pytest.approx(0.35)
    assert s.cpu_s["qemu"] == pytest.approx(0.05, abs=1.0 / TCK)
    assert s.cpu_s["softirq"] == pytest.approx(0.1)             # all of the host's packets
    assert s.components["idle"] == pytest.approx(10.0)          # 1 vCPU of 2 CPUs of 20 W
    assert s.free_slots == 10 and s.source == "linear" and not s.reset
    iv.check()
    j1 = s.joules
    assert j1 == pytest.approx(s.watts * 1.0)

    # restart: a new QEMU (pid 5151) that has used 0.2 s so far, VNF uptime 0.3 s
    fp.procs.pop(4242)
    fp.procs[5151] = 0
    clock.t += 1.0
    fp.advance(busy=TCK // 2, idle=3 * TCK // 2, procs={5151: TCK // 5})
    iv = read(5151, _stats(300_000, 50_000, 100_000, 40))
    s = iv.vnfs["v1"]
    assert s.reset
    assert s.cpu_s["busy"] == pytest.approx(0.05)
    assert s.cpu_s["poll"] == pytest.approx(0.1)
    assert s.cpu_s["busy"] + s.cpu_s["poll"] + s.cpu_s["qemu"] == pytest.approx(0.2)
    assert s.joules == pytest.approx(j1 + s.watts * 1.0)
    assert a.host_joules == pytest.approx(70.0 + iv.host_watts)
    iv.check()
    # the VNF stops answering: its QEMU CPU is all host-side, nothing is lost
    clock.t += 1.0
    fp.advance(busy=TCK // 2, idle=3 * TCK // 2, procs={5151: TCK // 4})
    iv = read(5151, None)
    assert iv.vnfs["v1"].cpu_s["qemu"] == pytest.approx(0.25) and iv.vnfs["v1"].cpu_s["busy"] == 0
    iv.check()


def test_attributor_with_rapl_counter_wrap(tmp_path):
    """Host watts from a RAPL package counter that wraps inside the interval (its
    max_energy_range_uj): the source name is rapl on every figure."""
    fp = FakeProc(tmp_path)
    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "max_energy_range_uj").write_text("1000000000\n")
    (zone / "energy_uj").write_text("999000000\n")                # 1 J below the top
    clock = Clock()
    rapl = power.RaplSource(str(tmp_path / "powercap"), proc_root=str(fp.root),
                            prior=power.LinearModel(10.0, 110.0), clock=clock)
    a = att.Attributor(rapl, "rapl", proc_root=str(fp.root), host_cpus=2, clock=clock)
    fp.procs = {7: 0}
    fp.write()
    a.sample(a.read_host(), [a.vnf_counters("v", "v", 7, _stats(1, 0, 0, 0))])
    clock.t += 2.0
    (zone / "energy_uj").write_text("99000000\n")                 # wrapped: +1 J + 99 J
    fp.advance(busy=TCK, idle=3 * TCK, procs={7: TCK})
    iv = a.sample(a.read_host(), [a.vnf_counters("v", "v", 7, _stats(2_000_001, 400_000,
                                                                         1_500_000, 0))])
    assert iv.host_watts == pytest.approx(50.0)
    assert iv.source == "rapl" and iv.vnfs["v"].source == "rapl"
    assert iv.check() < 1e-9
    # RAPL's model went through its one measurement: idle = prior's 10 W scaled by 50/(10+100*.25)
    assert iv.idle_watts == pytest.approx(10.0 * 50.0 / 35.0)


def test_helper_processes_found_by_their_tap_argument(tmp_path):
    root = tmp_path / "proc"
    for pid, argv in {10: [b"/usr/bin/qemu", b"-name", b"x"],
                      11: [b"fluidvim-vhost-net", b"5:fvabcdef0123n0", b"6:fvabcdef0123n1"],
                      12: [b"fluidvim-vhost-net", b"5:fvabcdef0123n00"]}.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    (root / "self").mkdir()
    assert att.pids_with_arg(":fvabcdef0123n0", str(root)) == [11]
    assert att.pids_with_arg(":fvother", str(root)) == []
