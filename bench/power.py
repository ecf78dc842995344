# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Fleet power simulation: PABFD vs first-fit vs worst-fit on real SPECpower curves.

A quick look at the placement helpers alone; the comparison that counts is ``bench/energy``:
sessions, deadlines, boot times, Nomad's and Nova's own schedulers, fluidvim's whole placement
path and a MILP bound, in one run (``python -m bench.energy --help``).

N hosts are drawn (seeded) from the packaged SPECpower_ssj2008 library (499 servers); a host's
capacity is its hardware threads, so a VNF that needs d CPU threads raises utilisation by
d / threads and its power per the server's own 11-point curve. One stream of VNF arrivals and
departures (Poisson arrivals, exponential lifetimes, demand uniform in [--dmin, --dmax] threads) is
replayed against every policy:

* ``first-fit``   the first host in rack order that fits (awake hosts first)
* ``worst-fit``   the host with the most free threads (spreads load)
* ``pabfd``       the host whose power rises least (fluidvim.orchestrator.power.pabfd_choose)
* ``pabfd+cons``  PABFD plus a consolidation pass every --consolidate-every steps (hosts at
                  u <= 0.5 are emptied onto others when that saves power; migrations counted)

A host without VNFs sleeps (0 W) under every policy; a policy wins by packing onto efficient
servers and leaving others empty. Also measures the PABFD decision time for 10/100/1,000 hosts.

Examples::

    .venv/bin/python -m bench.power                       # 40 hosts, 2,000 steps, seed 1
    .venv/bin/python -m bench.power --hosts 100 --steps 5000 --seed 7 --no-plot
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from fluidvim.orchestrator import power

POLICIES = ("first-fit", "worst-fit", "pabfd", "pabfd+cons")
RESULTS = Path(__file__).resolve().parent / "results"


def draw_fleet(lib, n, seed, u_max):
    rng = random.Random(seed)
    ids = rng.sample(lib.ids(), n)
    hosts = []
    for i, sid in enumerate(ids):
        threads = int(float(lib.rows[sid]["threads"]))
        hosts.append(power.FleetHost(f"h{i:03d}-{sid}", lib.curve(sid), capacity=threads, u_max=u_max,
                                     asleep=True))
    return hosts


def make_stream(steps, seed, rate, mean_life, dmin, dmax):
    """[(step, "add"|"del", vnf, demand)] - the same for every policy."""
    rng = random.Random(seed * 7919 + 1)
    events, live, k = [], [], 0
    for t in range(steps):
        for _ in range(_poisson(rng, rate)):
            life = max(1, int(rng.expovariate(1.0 / mean_life)))
            d = round(rng.uniform(dmin, dmax), 2)
            name = f"v{k}"
            k += 1
            events.append((t, "add", name, d))
            live.append((t + life, name))
        for _end, name in [x for x in live if x[0] == t]:
            events.append((t, "del", name, 0.0))
        live = [x for x in live if x[0] != t]
    return events


def _poisson(rng, lam):
    # Knuth; lam is small
    import math
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def run_policy(policy, lib, args, events):
    hosts = draw_fleet(lib, args.hosts, args.seed, args.u_max)
    choose = {"first-fit": power.first_fit, "worst-fit": power.worst_fit,
              "pabfd": power.pabfd_choose, "pabfd+cons": power.pabfd_choose}[policy]
    where = {}
    watts, rejected, migrations, awake = [], 0, 0, []
    by_step = {}
    for e in events:
        by_step.setdefault(e[0], []).append(e)
    for t in range(args.steps):
        for _, kind, vnf, d in by_step.get(t, ()):
            if kind == "add":
                h = choose(hosts, d)
                if h is None:
                    rejected += 1
                    continue
                h.add(vnf, d)
                where[vnf] = h
            elif vnf in where:
                h = where.pop(vnf)
                h.remove(vnf)
                if not h.load:
                    h.asleep = True
        if policy == "pabfd+cons" and t % args.consolidate_every == 0:
            plan = power.consolidation_plan(hosts, u_low=0.5, apply=True)
            for m in plan.migrations:
                where[m.vnf] = next(h for h in hosts if h.name == m.dst)
            migrations += len(plan.migrations)
        watts.append(power.fleet_watts(hosts))
        awake.append(sum(1 for h in hosts if h.load))
    warm = args.steps // 5                      # skip the fill-up
    return {
        "policy": policy,
        "mean_w": statistics.fmean(watts[warm:]),
        "energy_kwh": sum(watts) * args.step_s / 3.6e6,
        "mean_awake_hosts": statistics.fmean(awake[warm:]),
        "rejected": rejected,
        "migrations": migrations,
        "series_w": watts,
    }


def decision_times(lib, sizes, seed, reps=200):
    out = {}
    rng = random.Random(seed)
    for n in sizes:
        ids = [rng.choice(lib.ids()) for _ in range(n)]
        hosts = [power.FleetHost(f"h{i}", lib.curve(s), capacity=int(float(lib.rows[s]["threads"])),
                                 u_max=0.9) for i, s in enumerate(ids)]
        for i, h in enumerate(hosts):
            h.add(f"base{i}", round(h.capacity * rng.uniform(0.0, 0.7), 2))
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            power.pabfd_choose(hosts, 1.0)
            ts.append((time.perf_counter() - t0) * 1000)
        ts.sort()
        out[n] = {"p50_ms": ts[len(ts) // 2], "p90_ms": ts[int(len(ts) * 0.9)]}
    return out


def plot(results, path, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in results:
        ax.plot(range(len(r["series_w"])), r["series_w"], label=f"{r['policy']} (mean "
                f"{r['mean_w']:.0f} W)", linewidth=1)
    ax.set_xlabel(f"step ({args.step_s:g} s)")
    ax.set_ylabel("fleet power (W)")
    ax.set_title(f"{args.hosts} SPECpower hosts, seed {args.seed}: VNF placement policy vs fleet power")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=40, help="fleet size (drawn from the CSV)")
    ap.add_argument("--steps", type=int, default=2000, help="simulation steps")
    ap.add_argument("--step-s", type=float, default=60.0, help="seconds per step (for kWh)")
    ap.add_argument("--rate", type=float, default=3.0, help="mean VNF arrivals per step")
    ap.add_argument("--mean-life", type=float, default=120.0, help="mean VNF lifetime (steps)")
    ap.add_argument("--dmin", type=float, default=0.25, help="min VNF demand (CPU threads)")
    ap.add_argument("--dmax", type=float, default=4.0, help="max VNF demand (CPU threads)")
    ap.add_argument("--u-max", type=float, default=0.9, help="utilisation cap per host")
    ap.add_argument("--consolidate-every", type=int, default=20, help="steps between consolidations")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", default=None, help="power-curve CSV (default: the packaged library)")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "power"), help="output prefix (.json, .png)")
    args = ap.parse_args(argv)
    if args.hosts < 1 or args.steps < 10 or not 0 < args.dmin <= args.dmax or not 0 < args.u_max <= 1:
        ap.error("need --hosts >= 1, --steps >= 10, 0 < --dmin <= --dmax, 0 < --u-max <= 1")
    lib = power.SpecpowerLibrary(args.csv)
    if args.hosts > len(lib):
        ap.error(f"--hosts {args.hosts}: the library has only {len(lib)} systems")
    events = make_stream(args.steps, args.seed, args.rate, args.mean_life, args.dmin, args.dmax)
    results = [run_policy(p, lib, args, events) for p in POLICIES]
    base = results[0]["mean_w"]
    print(f"{args.hosts} hosts, {args.steps} steps, {sum(1 for e in events if e[1] == 'add')} VNFs, "
          f"seed {args.seed}")
    print(f"{'policy':<12} {'mean W':>9} {'vs first-fit':>12} {'kWh':>8} {'awake':>6} "
          f"{'rejected':>8} {'migr.':>6}")
    for r in results:
        print(f"{r['policy']:<12} {r['mean_w']:9.1f} {100 * (r['mean_w'] / base - 1):+11.1f}% "
              f"{r['energy_kwh']:8.2f} {r['mean_awake_hosts']:6.1f} {r['rejected']:8d} "
              f"{r['migrations']:6d}")
    dt = decision_times(lib, (10, 100, 1000), args.seed)
    for n, v in dt.items():
        print(f"pabfd decision, {n:5d} hosts: p50 {v['p50_ms']:.3f} ms, p90 {v['p90_ms']:.3f} ms")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"args": vars(args), "vnfs": sum(1 for e in events if e[1] == "add"),
               "policies": [{k: v for k, v in r.items() if k != "series_w"} for r in results],
               "pabfd_decision_ms": dt}
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    if not args.no_plot:
        plot(results, out.with_suffix(".png"), args)
        print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
