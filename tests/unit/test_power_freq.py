# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Frequency probing (fluidvim.orchestrator.power.freq) against a fake cpufreq sysfs tree: the
files a cpufreq driver exposes, and a throughput that, like a software switch's, stops growing
with the frequency once the I/O side is the limit. Real cpufreq does not exist on the project's
hosts (VMs), where the prober must say it cannot act."""

from __future__ import annotations

import pytest

from fluidvim.orchestrator import power
from fluidvim.orchestrator.power import freq


def fake_sysfs(tmp_path, cpus=2, avail=(3000000, 2600000, 2200000, 1800000, 1400000, 1000000),
               with_avail=True):
    root = tmp_path / "cpu"
    for c in range(cpus):
        d = root / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "cpuinfo_max_freq").write_text(f"{max(avail)}\n")
        (d / "cpuinfo_min_freq").write_text(f"{min(avail)}\n")
        (d / "scaling_max_freq").write_text(f"{max(avail)}\n")
        if with_avail:
            (d / "scaling_available_frequencies").write_text(" ".join(map(str, avail)) + " \n")
    (root / "cpufreq").mkdir(exist_ok=True)                # not a cpuN directory
    return root


def switch(root, knee_khz=1800000, io_limit=1e6):
    """Throughput of a data plane: CPU-bound below the knee, I/O-bound at io_limit above it;
    reads the cap the prober wrote (cpu0's)."""
    def measure():
        khz = int((root / "cpu0" / "cpufreq" / "scaling_max_freq").read_text())
        return io_limit * min(1.0, khz / knee_khz) * (0.999 if khz < 2600000 else 1.0)
    return measure


def test_keeps_the_lowest_frequency_that_holds_throughput(tmp_path):
    root = fake_sysfs(tmp_path)
    cf = freq.CpuFreq(str(root))
    assert cf.cpus == [0, 1] and cf.why_not() is None
    res = freq.probe(cf, switch(root), tolerance=0.02, settle_s=0, sleep=lambda s: None)
    assert res.acted and res.chosen_khz == 1800000
    assert [t["khz"] for t in res.trials] == [3000000, 2600000, 2200000, 1800000, 1400000]
    assert [t["ok"] for t in res.trials] == [True, True, True, True, False]
    for c in (0, 1):                                      # the cap is left on every CPU
        assert (root / f"cpu{c}" / "cpufreq" / "scaling_max_freq").read_text() == "1800000\n"


def test_steps_from_cpuinfo_range_without_available_frequencies(tmp_path):
    root = fake_sysfs(tmp_path, avail=(3000000, 1000000), with_avail=False)
    cf = freq.CpuFreq(str(root), cpus=[1])
    assert cf.steps(500000) == [3000000, 2500000, 2000000, 1500000, 1000000]
    res = freq.probe(cf, lambda: 5.0, settle_s=0, step_khz=500000, sleep=lambda s: None)
    assert res.chosen_khz == 1000000                      # flat throughput: the bottom
    assert (root / "cpu1" / "cpufreq" / "scaling_max_freq").read_text() == "1000000\n"
    assert (root / "cpu0" / "cpufreq" / "scaling_max_freq").read_text() == "3000000\n"


def test_a_failing_measurement_puts_the_caps_back(tmp_path):
    root = fake_sysfs(tmp_path)
    calls = []

    def measure():
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("traffic generator died")
        return 100.0

    with pytest.raises(RuntimeError, match="generator died"):
        freq.probe(freq.CpuFreq(str(root)), measure, settle_s=0, sleep=lambda s: None)
    assert (root / "cpu0" / "cpufreq" / "scaling_max_freq").read_text() == "3000000\n"


def test_no_cpufreq_means_it_cannot_act(tmp_path):
    root = tmp_path / "cpu"
    (root / "cpu0").mkdir(parents=True)
    res = freq.probe(freq.CpuFreq(str(root)), lambda: pytest.fail("must not measure"))
    assert not res.acted and res.chosen_khz is None
    assert "no cpufreq under" in res.reason and "cannot be capped" in res.reason
    res = freq.probe(freq.CpuFreq(str(fake_sysfs(tmp_path / "x")), cpus=[0, 7]), lambda: 1.0)
    assert not res.acted and "no cpufreq for CPU(s) 7" in res.reason


def test_bad_tolerance_is_refused(tmp_path):
    with pytest.raises(power.PowerError, match=r"tolerance must be in \[0, 1\), not 1.5"):
        freq.probe(freq.CpuFreq(str(fake_sysfs(tmp_path))), lambda: 1.0, tolerance=1.5)
