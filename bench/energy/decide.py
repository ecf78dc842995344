# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""fluidvim's decision time alone at a fleet size, without simulating a day (issue 21:
"decision <= 20 ms p50 at 1,000 hosts").

bench/energy's fluidvim-consolidate policy (a real ``Orchestrator``: ``PlacementEngine.place``
with its stage-1 cache, stage 2 and decide) on the fleet of ``--hosts`` hosts, with ``--awake``
of them in service - the best per VNF (``power.unit_watts``), as a day's consolidation keeps
them; the others powered off, as the hold-time rule leaves them - places ``--placements``
instances of the services in turn; the second half is counted (the first fills the caches).
Prints the engine's own time per placement (wall) and this process's CPU for it, p50, and the
engine's steps.

    .venv/bin/python -m bench.energy.decide --hosts 1000 --awake 280
    .venv/bin/python -m bench.energy.decide --hosts 1000 --awake 1000 --compare 6

``--compare N``: N blocks of ``--placements`` each, alternately with the engine's step 0 and
stage 2 and with the per-candidate code they replaced (kept as the reference of
tests/unit/test_placement_same_decisions.py), in one process: the p50 of each on the same
loaded host (the first two placements of a block are not counted: they re-rank).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from . import fleet as fleetmod, policies, sim, workload
from .policy import Shape


def _started(kind: str, hosts: int, awake: int, seed: int):
    """(the services' shapes, a started fluidvim-consolidate policy on a ``kind`` fleet of
    ``hosts``, the ``awake`` most efficient of them in service)."""
    services, measurement = workload.load_services(None)
    launch = sim.measured_launch()
    cfg = sim.SimConfig(launch_s=launch["launch_s"], launch_cpu_s=launch["launch_cpu_s"],
                        seed=seed)
    fl = fleetmod.make_fleet(kind, hosts, seed, model=None)
    shapes = [Shape(service=s.name, vcpus=s.vcpus, cpu_mhz=fl.hosts[0].mhz,
                    memory_mb=s.memory_mb, slots=s.slots) for s in services]
    pol = policies.make("fluidvim-consolidate", measurement=measurement, services=services,
                        cfg=cfg, seed=seed)
    try:
        pol.start(list(fl.hosts))
        for h in sorted(fl.hosts, key=lambda h: pol._unit_w[h.id])[awake:]:
            pol.set_eligible(h.id, False)
            pol.set_power(h.id, False)
    except BaseException:
        pol.close()
        raise
    return shapes, pol


def measure(kind: str, hosts: int, awake: int, placements: int, seed: int = 1) -> dict:
    shapes, pol = _started(kind, hosts, awake, seed)
    try:
        pol.decision_ms.clear()
        pol.decision_cpu_ms.clear()
        pol.steps_ms.clear()
        t0 = time.perf_counter()
        for i in range(placements):
            pol.place(shapes[i % len(shapes)], [f"i{i}"])
        wall = time.perf_counter() - t0
        half = placements // 2
        return {"fleet": kind, "hosts": hosts, "awake": min(awake, hosts),
                "placements": placements, "counted": placements - half, "wall_s": round(wall, 1),
                "decision_ms_p50": round(statistics.median(pol.decision_ms[half:]), 2),
                "decision_cpu_ms_p50": round(statistics.median(pol.decision_cpu_ms[half:]), 2),
                "steps_ms_p50": {k: round(statistics.median(v[half:]), 2)
                                 for k, v in pol.steps_ms.items()}}
    finally:
        pol.close()


def compare(kind: str, hosts: int, awake: int, blocks: int, per: int, seed: int = 1) -> dict:
    """Old (the reference code of tests/unit/test_placement_same_decisions.py) and new stage 0
    and stage 2, interleaved blocks of ``per`` placements."""
    import pathlib
    import types

    from fluidvim.evaluator.analyzers import Stage2Runner

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "unit"))
    import test_placement_same_decisions as ref

    shapes, pol = _started(kind, hosts, awake, seed)
    try:
        eng = pol.orch.placement
        modes = {"new": (eng.candidates, eng.stage2),
                 "old": (types.MethodType(ref.reference_candidates, eng),
                         Stage2Runner(ref.ReferenceCostBenefit(eng.stage2.analyzer.weights,
                                                               eng.stage2.analyzer.max_loss)))}
        got: dict = {m: {"wall": [], "cpu": [], "steps": {}} for m in modes}
        i = 0
        for _ in range(blocks):
            for mode in ("old", "new"):
                eng.candidates, eng.stage2 = modes[mode]
                for j in range(per):
                    cpu = time.process_time()
                    pol.place(shapes[i % len(shapes)], [f"i{i}"])
                    i += 1
                    if j < 2:
                        continue
                    g = got[mode]
                    g["wall"].append(pol.decision_ms[-1])
                    g["cpu"].append((time.process_time() - cpu) * 1000.0)
                    for k, v in pol.steps_ms.items():
                        g["steps"].setdefault(k, []).append(v[-1])
        return {"fleet": kind, "hosts": hosts, "awake": min(awake, hosts),
                **{m: {"counted": len(g["wall"]),
                       "decision_ms_p50": round(statistics.median(g["wall"]), 2),
                       "decision_cpu_ms_p50": round(statistics.median(g["cpu"]), 2),
                       "steps_ms_p50": {k: round(statistics.median(v), 2)
                                        for k, v in g["steps"].items()}}
                   for m, g in got.items()}}
    finally:
        pol.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.energy.decide", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleet", default="heterogeneous", choices=fleetmod.KINDS)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--awake", type=int, default=280,
                    help="hosts in service (energy.json's 1,000-host awake_hosts_mean: ~280)")
    ap.add_argument("--placements", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compare", type=int, default=0, metavar="BLOCKS",
                    help="old vs new stage 0 and stage 2, this many blocks of --placements")
    args = ap.parse_args(argv)
    if args.hosts < 1 or args.awake < 1 or args.placements < 2:
        ap.error("--hosts and --awake must be >= 1, --placements >= 2")
    if args.compare:
        print(compare(args.fleet, args.hosts, args.awake, args.compare, args.placements,
                      args.seed))
        return 0
    print(measure(args.fleet, args.hosts, args.awake, args.placements, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
