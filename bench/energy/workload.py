# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The workload: services whose sessions follow a day's load curve.

Services: one per QoS level that ``bench/evaluator`` drove a real VNF to (``bench/results/
evaluator.json``): ``levels[i]`` gives the deadline (``deadline_ms``) at a latency quantile
(``quantile``), ``comparison.<level>.reference_slots`` the sessions one VNF instance serves within
it (the reference sweep: the VNF driven to its deadline), ``session_pps`` the packets/s of one
session and ``environment`` the VNF (1 vCPU, ``memory_mb``) it was measured on.

Demand: sessions arrive (Poisson) at a rate that follows the day's curve and last an exponential
time (mean ``hold_s``), so the concurrent sessions of service s follow
``peak_s * curve(t)`` where ``curve`` is a cosine with its trough at 04:00 and its peak at 16:00,
scaled so that trough / peak = ``TROUGH_PEAK`` (below), with a seeded phase shift per service
(+-90 min) and a seeded slow multiplicative noise (AR(1), sd ``noise``). ``peak_load`` sizes the
peak: at the peak the sessions of all services fill that fraction of the fleet's hardware threads
(one thread = one VNF at its full slots).

TROUGH_PEAK: the Alibaba cluster-trace-v2018 (4,034 machines, 8 days; github.com/alibaba/
clusterdata), machine_usage ``cpu_util_percent`` averaged over the whole cluster per 300 s (the
aggregate published in github.com/alejandrofdez-us/DataCenter-Traces-Datasets, alibaba2018/day_N/
machine_usage_day_N_grouped_300_seconds.csv), hourly means: the lowest over the highest hour per
day is 0.434, 0.486, 0.493, 0.544, 0.480, 0.421, 0.484, 0.538 for days 1-8; median 0.485. (The
daily cycle of that trace is also the first finding of Jiang et al., "Characterizing co-located
workloads in Alibaba cloud datacenters", IEEE TCC 2020.)
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from pathlib import Path

EVALUATOR_JSON = Path(__file__).resolve().parent.parent / "results" / "evaluator.json"
TROUGH_PEAK = 0.485
TROUGH_PEAK_SOURCE = ("Alibaba cluster-trace-v2018, cluster-mean cpu_util_percent, lowest / "
                      "highest hourly mean per day, median of the 8 days (0.421-0.544)")
DAY_S = 86400.0
TROUGH_AT_S = 4 * 3600.0                 # the curve's minimum, 04:00
MIX = {"premium": 0.3, "standard": 0.4, "basic": 0.3}


@dataclasses.dataclass(frozen=True)
class Service:
    name: str
    slots: int                    # sessions one instance serves within the deadline
    deadline_ms: float
    quantile: float
    session_pps: float
    vcpus: int
    memory_mb: int
    share: float                  # of the peak threads
    source: str                   # where slots and deadline come from


def load_services(path: str | Path | None = None) -> tuple[list[Service], dict]:
    """The services of ``evaluator.json`` and the raw measurement (for the probe cache)."""
    path = Path(path or EVALUATOR_JSON)
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ValueError(f"cannot read the evaluator measurement {path}: {e}; run "
                         f"`python -m bench.evaluator` or pass --evaluator PATH") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON ({e}); pass the file bench/evaluator wrote") from None
    try:
        env = data["environment"]
        spp = float(data["session_pps"])
        levels = {lv["name"]: lv for lv in data["levels"]}
        comp = data["comparison"]
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: missing field {e} (need environment, session_pps, levels, "
                         f"comparison.<level>.reference_slots)") from None
    out = []
    for name, share in MIX.items():
        if name not in levels or name not in comp:
            raise ValueError(f"{path}: no level {name!r} in levels/comparison")
        slots = int(comp[name]["reference_slots"])
        if slots < 1:
            raise ValueError(f"{path}: comparison.{name}.reference_slots is {slots}; need >= 1")
        out.append(Service(name=name, slots=slots, deadline_ms=float(levels[name]["deadline_ms"]),
                           quantile=float(levels[name]["quantile"]), session_pps=spp,
                           vcpus=int(env.get("vcpus") or 1), memory_mb=int(env.get("memory_mb") or 32),
                           share=share,
                           source=f"{path.name}: comparison.{name}.reference_slots={slots}, "
                                  f"levels[{name}].deadline_ms={levels[name]['deadline_ms']} at "
                                  f"p{float(levels[name]['quantile']) * 100:g}"))
    return out, data


def curve(t: float, trough_peak: float = TROUGH_PEAK, day_s: float = DAY_S,
          shift_s: float = 0.0) -> float:
    """The day's load, 1.0 at the peak, ``trough_peak`` at the trough (t in seconds of the day)."""
    x = 2 * math.pi * (t - TROUGH_AT_S * day_s / DAY_S - shift_s) / day_s
    return trough_peak + (1 - trough_peak) * (1 - math.cos(x)) / 2


class Demand:
    """The concurrent sessions each service would have at time t (seeded, deterministic)."""

    def __init__(self, services: list[Service], fleet_threads: int, *, peak_load: float,
                 seed: int, trough_peak: float = TROUGH_PEAK, day_s: float = DAY_S,
                 noise: float = 0.03, noise_tau_s: float = 1800.0, step_s: float = 30.0,
                 start_s: float = 0.0, end_s: float = DAY_S):
        if not 0 < peak_load <= 1:
            raise ValueError(f"peak_load {peak_load}: need 0 < peak_load <= 1 (the fraction of "
                             f"the fleet's threads the peak fills)")
        if not 0 < trough_peak <= 1:
            raise ValueError(f"trough_peak {trough_peak}: need 0 < trough/peak <= 1")
        self.services = services
        self.trough_peak, self.day_s, self.step_s = trough_peak, day_s, step_s
        rng = random.Random(f"demand-{seed}")
        self.peak = {s.name: peak_load * fleet_threads * s.share * s.slots for s in services}
        self.shift = {s.name: rng.uniform(-5400.0, 5400.0) * day_s / DAY_S for s in services}
        # AR(1) multiplicative noise on the step grid, per service
        self.noise: dict[str, list[float]] = {}
        n = int(math.ceil((end_s - start_s) / step_s)) + 2
        a = math.exp(-step_s / noise_tau_s)
        for s in services:
            x, xs = 0.0, []
            for _ in range(n):
                x = a * x + math.sqrt(1 - a * a) * rng.gauss(0.0, noise)
                xs.append(x)
            self.noise[s.name] = xs
        self.start_s = start_s

    def sessions(self, name: str, t: float) -> float:
        i = int((t - self.start_s) // self.step_s)
        xs = self.noise[name]
        eps = xs[min(max(i, 0), len(xs) - 1)]
        return max(0.0, self.peak[name] * curve(t % self.day_s, self.trough_peak, self.day_s,
                                                self.shift[name]) * (1.0 + eps))
