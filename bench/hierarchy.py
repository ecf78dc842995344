# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/hierarchy: hierarchical placement across zones (FUSION §2.1) against flat placement, on
real topologies, 10 ... 100 zones, in the same run.

Zones sit at sites of a real graph from topohub (offline: SNDlib, Topology Zoo): by default
``topozoo/TataNld`` (143 sites, a global carrier) with 10, 25, 50 and 100 zones at seeded random
sites, plus SNDlib's Abilene (12 zones) and GEANT (22 zones) with a zone at every site. Each zone
is a synthetic fleet of 10 hosts (``make_fleet``: 4 environment types, a real SPECpower curve per
host for the marginal power) with valid probe results in the probe cache, so the numbers are the
decision, not probing. Zone state, seeded: 60 % of zones have free slots for the service (0-50
per host), 30 % are full but can launch on demand (queuing delay 60-240 ms from their launch
history), 10 % are full and cannot launch (infinite delay). The service: one-way latency bound
``--bound-ms`` from the user's ingress site, tolerable queuing delay ``--tolerance-s``.

Each decision draws a user ingress site uniformly from all sites of the graph and asks, on the
same orchestrator (one store, registry, probe cache, stage-2 runner):

* ``flat``            - today's default: steps 0-3 over every host of every zone (it knows no
                        latency; the location filter is a label);
* ``flat, eligible``  - the flat engine over every host of every zone the parent finds eligible
                        (latency and wait within the service's bounds): the exhaustive reference;
* ``hier, fresh``     - the parent over zone summaries rebuilt on each decision, then the flat
                        engine in ``--fanout`` zones;
* ``hier, cached``    - the same with summaries reused (``[hierarchy] summary_ttl``), as a parent
                        acting on the zones' last announcements.

Stage 2's inputs change before every decision (a price moves), so no path reuses an old
ranking. Quality of the chosen host: one-way latency from the ingress (graph shortest path at
204.2 km/ms), latency-bound violations, wait for a slot (0 with a free slot, else the zone's queuing
delay; a violation when above the tolerance or infinite), marginal power, free slots there.
Not a test: no thresholds.

    .venv/bin/python -m bench.hierarchy --reps 30       # ~30 s; bench/results/hierarchy.{json,png}
    .venv/bin/python -m bench.hierarchy --reps 5 --zones 10,25 --no-named
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

from fluidvim.orchestrator import conf as orchconf, topology
from fluidvim.orchestrator.exception import Refused
from fluidvim.orchestrator.hierarchy import HierarchicalPlacer
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.slots import SlotReport
from fluidvim.orchestrator.zones.synthetic import make_fleet, seed_cache

from .launch import FORWARD, pct

POLICIES = ("flat", "flat, eligible", "hier, fresh", "hier, cached")


def setup(topo_key: str, n_zones: int, seed: int, workdir: str, fanout: int):
    topo = topology.load(topo_key)
    rnd = random.Random(seed)
    sites_all = sorted(topo.nodes)
    n = min(n_zones, len(sites_all))
    picked = rnd.sample(sites_all, n)
    zones, types, labels = make_fleet(10 * n, n, n_env_types=4, seed=seed)
    sites = {z.name: s for z, s in zip(zones, picked)}
    states = {}
    for z in zones:
        r = rnd.random()
        states[z.name] = "free" if r < 0.6 else "launch" if r < 0.9 else "dead"
        if states[z.name] == "dead":
            z._launch_ms = []                    # cannot launch on demand: infinite delay
    conf = orchconf.make_conf(connection=f"sqlite:///{workdir}/h-{topo_key.replace('/', '_')}"
                                         f"-{n}.sqlite", local_zone=False)
    orch = Orchestrator(conf, zones=zones, zone_labels=labels)   # power: HostMarginalPower
    seed_cache(orch.placement.stage1.cache, zones, types)
    now = time.time()
    for z in zones:
        for h in z.hosts():
            free = rnd.randrange(0, 51) if states[z.name] == "free" else 0
            orch.registry.apply(SlotReport(zone=z.name, host=h.name, instance=f"i-{h.name}",
                                           service="fw", slots=free, delay_s=0.06, at=now))
    fresh = HierarchicalPlacer(orch.placement, topo, sites, fanout=fanout, summary_ttl=0.0)
    cached = HierarchicalPlacer(orch.placement, topo, sites, fanout=fanout, summary_ttl=1e9)
    wide = HierarchicalPlacer(orch.placement, topo, sites, fanout=10 ** 6, summary_ttl=0.0)
    return topo, orch, sites, states, {"hier, fresh": fresh, "hier, cached": cached,
                                       "flat, eligible": wide}


def quality(orch, topo, sites, ingress, zone, host, bound, tol):
    if zone is None:
        return None
    lat = topo.latency_ms(ingress, sites[zone])
    free = orch.registry.aggregate("fw", "host").get(f"{zone}/{host}", 0)
    if free > 0:
        wait = 0.0
    else:
        wait = orch.queuing.delay(orch.zones[zone], "fw").seconds
    h = next(x for x in orch.zones[zone].hosts() if x.name == host)
    power = orch.placement.power(zone, h)
    return {"latency_ms": lat, "bound_violation": lat is None or lat > bound,
            "wait_s": wait, "wait_violation": wait is None or wait > tol,
            "power_w": power, "free_slots": free}


def bench_one(topo_key, n_zones, reps, bound, tol, seed, workdir, fanout):
    topo, orch, sites, states, placers = setup(topo_key, n_zones, seed, workdir, fanout)
    orch.register_service("fw", FORWARD, deadline_ms=1.0, session_pps=100,
                          max_latency_ms=bound, max_queuing_delay_s=tol)
    rnd = random.Random(seed + 1)
    all_sites = sorted(topo.nodes)
    times = {p: [] for p in POLICIES}
    qual = {p: [] for p in POLICIES}
    refused = {p: 0 for p in POLICIES}
    steps = {p: [] for p in POLICIES}
    placers["hier, cached"].summaries("fw")          # the zones' last announcement
    for _ in range(reps):
        ingress = rnd.choice(all_sites)
        order = list(POLICIES)
        rnd.shuffle(order)                            # no fixed order against caches / GC
        for pol in order:
            for zl in orch.zone_labels.values():      # a new stage-2 input: no reused ranking
                zl["price_per_hour"] = round(zl["price_per_hour"] * (1.0 + 1e-6), 12)
            t = time.perf_counter()
            try:
                if pol == "flat":
                    p = orch.placement.place("fw")
                else:
                    p = placers[pol].place("fw", location=ingress)
            except Refused:
                p = None
            times[pol].append((time.perf_counter() - t) * 1000.0)
            if p is not None and p.status != "refused":
                steps[pol].append(p.step_ms)
            if p is None or p.status == "refused":
                refused[pol] += 1
                qual[pol].append(None)
                continue
            qual[pol].append(quality(orch, topo, sites, ingress, p.zone, p.host, bound, tol))
    orch.close()

    def summ(pol):
        qs = [q for q in qual[pol] if q is not None]
        lats = [q["latency_ms"] for q in qs if q["latency_ms"] is not None]
        pw = [q["power_w"] for q in qs if q["power_w"] is not None]
        return {
            "decision_ms": {"p50": pct(times[pol], 50), "p90": pct(times[pol], 90),
                            "mean": statistics.fmean(times[pol]), "n": len(times[pol])},
            "steps_p50_ms": {k: statistics.median(x.get(k, 0.0) for x in steps[pol])
                             for k in sorted({k for x in steps[pol] for k in x})},
            "placed": len(qs), "refused": refused[pol],
            "latency_ms": {"mean": statistics.fmean(lats) if lats else None,
                           "p90": pct(lats, 90) if lats else None},
            "bound_violations": sum(q["bound_violation"] for q in qs),
            "wait_violations": sum(q["wait_violation"] for q in qs),
            "launch_needed": sum(q["wait_s"] != 0.0 for q in qs),
            "wait_s_mean": statistics.fmean([q["wait_s"] if q["wait_s"] is not None
                                             else math.inf for q in qs]) if qs else None,
            "power_w_mean": statistics.fmean(pw) if pw else None,
            "free_slots_mean": statistics.fmean([q["free_slots"] for q in qs]) if qs else None,
        }

    out = {"topology": topo_key, "zones": len(sites), "hosts": 10 * len(sites),
           "sites_in_graph": len(topo.nodes), "bound_ms": bound, "tolerance_s": tol,
           "zone_states": {s: sum(v == s for v in states.values())
                           for s in ("free", "launch", "dead")},
           "policies": {p: summ(p) for p in POLICIES}}
    f, h = out["policies"]["flat"], out["policies"]["hier, fresh"]
    out["ratios"] = {
        "time_flat_over_hier_fresh": f["decision_ms"]["p50"] / h["decision_ms"]["p50"],
        "time_flat_over_hier_cached": f["decision_ms"]["p50"]
        / out["policies"]["hier, cached"]["decision_ms"]["p50"],
        "latency_hier_over_flat": (h["latency_ms"]["mean"] / f["latency_ms"]["mean"]
                                   if h["latency_ms"]["mean"] and f["latency_ms"]["mean"]
                                   else None),
    }
    line = f"{topo_key:>18} {len(sites):>3} zones: " + "; ".join(
        f"{p} {s['decision_ms']['p50']:.1f} ms, lat "
        f"{(s['latency_ms']['mean'] or float('nan')):.1f} ms, viol {s['bound_violations']}"
        f"+{s['wait_violations']}, refused {s['refused']}"
        for p, s in out["policies"].items())
    r = out["ratios"]
    print(line + f" | flat/hier time x{r['time_flat_over_hier_fresh']:.1f} (cached "
          f"x{r['time_flat_over_hier_cached']:.1f})", flush=True)
    return out


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = [r for r in rows if r.get("sweep")]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    ax = axes[0]
    for pol, mk in zip(POLICIES, "osD^"):
        ax.plot([r["zones"] for r in sweep],
                [r["policies"][pol]["decision_ms"]["p50"] for r in sweep], marker=mk, label=pol)
    ax.set_xlabel("zones (10 hosts each)")
    ax.set_ylabel("decision time p50 (ms)")
    ax.set_yscale("log")
    ax.set_title(f"decision time, {sweep[0]['topology'] if sweep else ''}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax = axes[1]
    for pol, mk in zip(POLICIES, "osD^"):
        ax.plot([r["zones"] for r in sweep],
                [r["policies"][pol]["latency_ms"]["mean"] or 0 for r in sweep], marker=mk,
                label=pol)
    if sweep:
        ax.axhline(sweep[0]["bound_ms"], color="k", ls="--", lw=0.8, label="bound")
    ax.set_xlabel("zones")
    ax.set_ylabel("mean one-way latency to the user (ms)")
    ax.set_title("latency of the chosen zone")
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax = axes[2]
    labels = [f"{r['topology'].split('/')[-1]}\n{r['zones']}z" for r in rows]
    x = range(len(rows))
    width = 0.2
    for k, pol in enumerate(POLICIES):
        n = [max(1, r["policies"][pol]["placed"] + r["policies"][pol]["refused"]) for r in rows]
        v = [100.0 * (r["policies"][pol]["bound_violations"] + r["policies"][pol]["wait_violations"])
             / nn for r, nn in zip(rows, n)]
        ax.bar([i + (k - 1.5) * width for i in x], v, width, label=pol)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("decisions violating a bound (%)")
    ax.set_title("latency-bound + tolerable-delay violations")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topology", default="topozoo/TataNld", help="graph of the zone sweep")
    ap.add_argument("--zones", default="10,25,50,100", help="zone counts of the sweep")
    ap.add_argument("--no-named", action="store_true",
                    help="skip sndlib/abilene and sndlib/geant (a zone at every site)")
    ap.add_argument("--reps", type=int, default=20, help="decisions per size and policy")
    ap.add_argument("--bound-ms", type=float, default=5.0, help="service latency bound (one way)")
    ap.add_argument("--tolerance-s", type=float, default=0.15, help="tolerable queuing delay")
    ap.add_argument("--fanout", type=int, default=2, help="zones the parent hands down")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default="bench/results", help="directory for hierarchy.{json,png}")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="fvo-hier-")
    rows = []
    try:
        for n in [int(s) for s in args.zones.split(",") if s]:
            r = bench_one(args.topology, n, args.reps, args.bound_ms, args.tolerance_s,
                          args.seed + n, workdir, args.fanout)
            r["sweep"] = True
            rows.append(r)
        if not args.no_named:
            for key in ("sndlib/abilene", "sndlib/geant"):
                rows.append(bench_one(key, 1000, args.reps, args.bound_ms, args.tolerance_s,
                                      args.seed, workdir, args.fanout))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {"rows": rows, "args": vars(args), "cpus": os.cpu_count(),
              "loadavg_at_end": os.getloadavg()}
    with open(os.path.join(args.out, "hierarchy.json"), "w") as f:
        json.dump(result, f, indent=2)
    plot(rows, os.path.join(args.out, "hierarchy.png"))
    print(f"wrote {args.out}/hierarchy.json and hierarchy.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
