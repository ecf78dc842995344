# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""What each part of fluidvim's gap to the MILP bound costs: the same day, the same fleet, with
one thing the bound does not pay taken away at a time (issue 21's "within 5 % of the optimum").

The MILP bound (bench/energy/milp.py) places the instances' work anew every step, for free and
at once: no boot, no hold time before a power-off, no room kept awake for the next scale-out,
no hardware thread kept for launches, and the work of a host spread over the hosts as a
fraction. The variants here drop, one at a time, what fluidvim pays for the first four:

  base      fluidvim as bench/energy runs it
  reserve0  no hardware thread kept for the host's launches (``fill_limit(reserve=0)``)
  noahead   no wake one boot ahead of the slot trend (hosts woken only on refusal: the room
            the forecast keeps awake is not kept)
  hold0     an empty host powers off at once (no 120-s hold, no 30-s shutdown)
  boot0     a wake is instant and free (no 260 s at peak power; the scaler's lead never
            includes a boot)
  none      all four at once: what is left is the placement itself against the bound's
            fractional packing

Each run also splits its own energy (``boot_kwh``: hosts booting; ``empty_kwh``: hosts awake
with no VNF, holding before a power-off or shutting down).

    .venv/bin/python -m bench.energy.ablate --fleet homogeneous --hosts 20 \\
        --out bench/results/energy.ablation.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from . import fleet as fleetmod, sim, workload

VARIANTS = {
    "base": ({}, {}),
    "reserve0": ({"reserve": 0.0}, {}),
    "noahead": ({"ahead": False}, {}),
    "hold0": ({}, {"off_hold_s": 0.0, "shutdown_s": 0.0}),
    "boot0": ({}, {"boot_s": 0.0}),
    "none": ({"reserve": 0.0, "ahead": False}, {"off_hold_s": 0.0, "shutdown_s": 0.0,
                                                 "boot_s": 0.0}),
}


def run_variant(name: str, kind: str, hosts: int, seed: int, services, measurement) -> dict:
    from .fluidvim_policy import FluidvimPolicy

    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    pol_kw, cfg_kw = VARIANTS[name]
    launch = sim.measured_launch()
    cfg = dataclasses.replace(sim.SimConfig(launch_s=launch["launch_s"],
                                            launch_cpu_s=launch["launch_cpu_s"], seed=seed),
                              **cfg_kw)
    fl = fleetmod.make_fleet(kind, hosts, seed)
    demand = workload.Demand(services, fl.threads, peak_load=0.7, seed=seed,
                             day_s=cfg.day_s, step_s=cfg.step_s, start_s=-cfg.warmup_s,
                             end_s=cfg.day_s)
    pol = FluidvimPolicy(measurement, services, launch_ms=cfg.launch_s * 1000.0,
                         launch_cpu_s=cfg.launch_cpu_s, boot_s=cfg.boot_s, **pol_kw)
    r = sim.Simulator(fl, services, demand, cfg, pol).run()
    d = r.summary()
    d["variant"] = {"policy": pol_kw, "sim": cfg_kw}
    return d


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleet", default="homogeneous", choices=fleetmod.KINDS)
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), metavar="NAME",
                    help=f"of {', '.join(VARIANTS)}")
    ap.add_argument("--out", default="bench/results/energy.ablation.json",
                    help="JSON file; runs already in it for other variants or fleets are kept")
    args = ap.parse_args(argv)
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad:
        ap.error(f"--variants: unknown {', '.join(bad)}; known: {', '.join(VARIANTS)}")
    services, measurement = workload.load_services()
    out = Path(args.out)
    res = json.loads(out.read_text()) if out.exists() else {}
    runs = res.setdefault("runs", {}).setdefault(args.fleet, {}).setdefault(str(args.hosts), {})
    for v in args.variants:
        d = run_variant(v, args.fleet, args.hosts, args.seed, services, measurement)
        runs[v] = {k: d[k] for k in ("kwh", "slo_misses", "misses", "awake_hosts_mean",
                                     "wakes", "power_offs", "boot_kwh", "empty_kwh",
                                     "wall_s", "variant") if k in d}
        out.write_text(json.dumps(res, indent=1) + "\n")
        print(f"{args.fleet} {args.hosts} {v}: {d['kwh']:.2f} kWh, {d['slo_misses']} misses, "
              f"boot {d.get('boot_kwh')} kWh, empty {d.get('empty_kwh')} kWh", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
