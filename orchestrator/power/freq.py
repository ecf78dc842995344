# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Frequency probing: the lowest CPU frequency cap at which a VNF's throughput holds.

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture).

A software data plane rarely needs the CPU's top frequency: past the point where the NIC side
(taps, the host's stack, the vhost backend) is the limit, a faster core only polls faster. The
prober steps ``scaling_max_freq`` of the chosen CPUs down through the frequencies the cpufreq
driver offers (``scaling_available_frequencies``, else ``cpuinfo_min_freq`` ..
``cpuinfo_max_freq`` in ``step_khz`` steps), measuring throughput at each (a callable: packets
per second of a real load, e.g. the VNF's NIC counters over a few seconds); it keeps the lowest
frequency whose throughput stays within ``tolerance`` of the throughput at the top, and stops at
the first that does not (throughput only falls as the frequency does). The cap is written back
to what it was when anything fails.

Where the kernel has no cpufreq (a VM, like the project's hosts: no
``/sys/devices/system/cpu/cpuN/cpufreq``) :meth:`CpuFreq.why_not` says so and
:func:`probe` returns without acting; per-VNF attribution and the rest of the power package do
not depend on it.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import time

from .models import PowerError

SYSFS_CPU = "/sys/devices/system/cpu"


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


class CpuFreq:
    """The cpufreq files of ``cpus`` (default: every CPU that has them) under ``root``."""

    def __init__(self, root: str = SYSFS_CPU, cpus=None):
        self.root = root
        found = sorted(int(m.group(1)) for d in glob.glob(os.path.join(root, "cpu[0-9]*"))
                       if (m := re.search(r"cpu(\d+)$", d))
                       and os.path.isdir(os.path.join(d, "cpufreq")))
        self.cpus = found if cpus is None else [c for c in cpus if c in found]
        self.missing = [] if cpus is None else [c for c in cpus if c not in found]

    def why_not(self) -> str | None:
        """Why frequencies cannot be capped here (None: they can)."""
        if self.missing:
            return (f"no cpufreq for CPU(s) {', '.join(map(str, self.missing))} under "
                    f"{self.root} (cpuN/cpufreq)")
        if not self.cpus:
            return (f"no cpufreq under {self.root} (no cpuN/cpufreq: a VM, or no cpufreq driver "
                    "loaded): frequencies cannot be capped on this host")
        p = self._path(self.cpus[0], "scaling_max_freq")
        if not os.access(p, os.W_OK):
            return f"{p} is not writable (needs root)"
        return None

    def _path(self, cpu: int, name: str) -> str:
        return os.path.join(self.root, f"cpu{cpu}", "cpufreq", name)

    def read_khz(self, cpu: int, name: str) -> int:
        p = self._path(cpu, name)
        try:
            return int(_read(p))
        except (OSError, ValueError) as e:
            raise PowerError(f"cannot read {p}: {e}") from None

    def steps(self, step_khz: int = 100_000) -> list[int]:
        """The frequencies to try, highest first (kHz)."""
        cpu = self.cpus[0]
        try:
            avail = sorted({int(x) for x in
                            _read(self._path(cpu, "scaling_available_frequencies")).split()},
                           reverse=True)
            if avail:
                return avail
        except (OSError, ValueError):
            pass
        hi, lo = self.read_khz(cpu, "cpuinfo_max_freq"), self.read_khz(cpu, "cpuinfo_min_freq")
        if step_khz <= 0:
            raise PowerError(f"step_khz must be > 0, not {step_khz}")
        out = list(range(hi, lo, -step_khz)) + [lo]
        return out

    def caps(self) -> dict:
        return {c: self.read_khz(c, "scaling_max_freq") for c in self.cpus}

    def set_cap(self, khz: int) -> None:
        for c in self.cpus:
            p = self._path(c, "scaling_max_freq")
            try:
                with open(p, "w") as f:
                    f.write(f"{int(khz)}\n")
            except OSError as e:
                raise PowerError(f"cannot write {p}: {e}") from None

    def restore(self, caps: dict) -> None:
        for c, khz in caps.items():
            with open(self._path(c, "scaling_max_freq"), "w") as f:
                f.write(f"{int(khz)}\n")


@dataclasses.dataclass
class ProbeResult:
    acted: bool
    reason: str | None = None          # why it could not act
    chosen_khz: int | None = None      # the cap left in place
    baseline: float | None = None      # throughput at the top frequency
    trials: list = dataclasses.field(default_factory=list)   # [{khz, throughput, ok}]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def probe(cf: CpuFreq, measure, tolerance: float = 0.02, settle_s: float = 0.5,
          step_khz: int = 100_000, sleep=time.sleep) -> ProbeResult:
    """Step the cap down while ``measure()`` (throughput, higher is better) stays within
    ``tolerance`` of its value at the top frequency; leave the lowest such cap in place."""
    if not 0 <= tolerance < 1:
        raise PowerError(f"tolerance must be in [0, 1), not {tolerance}")
    why = cf.why_not()
    if why:
        return ProbeResult(acted=False, reason=why)
    original = cf.caps()
    steps = cf.steps(step_khz)
    res = ProbeResult(acted=True)
    try:
        cf.set_cap(steps[0])
        sleep(settle_s)
        res.baseline = float(measure())
        res.trials.append({"khz": steps[0], "throughput": res.baseline, "ok": True})
        res.chosen_khz = steps[0]
        floor = (1.0 - tolerance) * res.baseline
        for khz in steps[1:]:
            cf.set_cap(khz)
            sleep(settle_s)
            t = float(measure())
            ok = t >= floor
            res.trials.append({"khz": khz, "throughput": t, "ok": ok})
            if not ok:
                break
            res.chosen_khz = khz
        cf.set_cap(res.chosen_khz)
    except BaseException:
        cf.restore(original)
        raise
    return res
