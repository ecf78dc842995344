# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/placement: how long the orchestrator takes to decide, and how good its queuing delay is.

Part 1 - decision time vs fleet size (10, 100, 1,000 hosts): synthetic zones (a described fleet,
4 environment types, 10 hosts per zone, each host a real server's SPECpower curve for the
marginal power) with valid probe results in the probe cache, so the numbers are the decision, not
probing. In the same run, for each size:

* ``place (fresh)``   - steps 0-3 with stage 2 re-ranking every candidate (inputs changed);
* ``place (reused)``  - steps 0-3 when stage 2's inputs are unchanged (ranking reused);
* ``resolve (slot)``  - the resolver finding an instance with a free slot (one per host).

Part 2 - predicted vs observed queuing delay with real VNFs in the local zone: a service with one
slot per instance, so every resolve is a fast-track on-demand launch; the prediction is what the
queuing estimator said before the launch, the observation is request -> slot. Cold launches
first (no warm pool), then with a warm pool of 2 shells.

Not a test: no thresholds. Part 2 needs root and the VNF kernel (``make -C unikernel``).

    sudo .venv/bin/python -m bench.placement                # ~2 min; bench/results/placement.*
    .venv/bin/python -m bench.placement --no-vnfs           # part 1 only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.slots import SlotReport
from fluidvim.orchestrator.zones.synthetic import make_fleet, seed_cache

from .launch import FORWARD, pct


def bench_decisions(sizes, reps, workdir):
    out = {}
    for n in sizes:
        zones, types, labels = make_fleet(n, max(1, n // 10), n_env_types=4, seed=n)
        conf = orchconf.make_conf(connection=f"sqlite:///{workdir}/decide-{n}.sqlite",
                                  local_zone=False)
        orch = Orchestrator(conf, zones=zones, zone_labels=labels)   # power: HostMarginalPower
        seed_cache(orch.placement.stage1.cache, zones, types)
        orch.register_service("fw", FORWARD, deadline_ms=1.0, session_pps=100)
        now = time.time()
        for z in zones:
            for h in z.hosts():
                orch.registry.apply(SlotReport(zone=z.name, host=h.name, instance=f"i-{h.name}",
                                               service="fw", slots=h.slots_free, delay_s=0.06,
                                               at=now))
        rows = {"place (fresh)": [], "place (reused)": [], "resolve (slot)": []}
        steps = {"fresh": [], "reused": []}
        for i in range(reps):
            # fresh: a price change is a new stage-2 input (the fingerprint includes prices)
            for zl in labels.values():
                zl["price_per_hour"] = round(zl["price_per_hour"] * (1.0 + 1e-6 * (i + 1)), 9)
            t = time.perf_counter()
            p = orch.place("fw")
            rows["place (fresh)"].append((time.perf_counter() - t) * 1000)
            steps["fresh"].append(p["step_ms"])
            t = time.perf_counter()
            p = orch.place("fw")
            rows["place (reused)"].append((time.perf_counter() - t) * 1000)
            steps["reused"].append(p["step_ms"])
            note = orch.explain(p["decision_id"])["steps"][2]["record"]["note"]
            assert "reused" in note, note
            t = time.perf_counter()
            orch.resolve("fw")
            rows["resolve (slot)"].append((time.perf_counter() - t) * 1000)
        orch.close()
        out[n] = {
            "zones": len(zones), "env_types": len(types),
            "paths": {k: {"p50": pct(v, 50), "p90": pct(v, 90), "min": min(v), "n": len(v)}
                      for k, v in rows.items()},
            "steps_p50": {kind: {s: statistics.median(x[s] for x in v) for s in v[0]}
                          for kind, v in steps.items()},
        }
        print(f"{n:>5} hosts / {len(zones):>3} zones: " + ", ".join(
            f"{k} p50 {v['p50']:.1f} ms" for k, v in out[n]["paths"].items()), flush=True)
    return out


def bench_queuing(launches, workdir):
    tag = uuid.uuid4().hex[:6]
    run_dir = f"/run/fluidvim-fvo-bench-{tag}"
    conf = orchconf.make_conf(connection=f"sqlite:///{workdir}/queuing.sqlite",
                              reservation_ttl=3600.0, vnf_state_dir=f"{workdir}/state",
                              vnf_run_dir=run_dir)
    orch = Orchestrator(conf)
    orch.register_service("one", FORWARD, slots=1)
    samples = []
    try:
        for phase in ("cold", "warm"):
            if phase == "warm":
                key = orch.local_zone.start_pool(2)
                orch.manager.wait_pool(key, 2, timeout=120)
            for _ in range(launches):
                before = orch.queuing.delay(orch.local_zone, "one")
                r = orch.resolve("one")
                launch = orch.store.launches(zone="local", service="one", limit=1)[0]
                samples.append({"phase": phase, "predicted_s": r["predicted_delay_s"],
                                "basis": before.basis, "observed_s": r["waited_s"],
                                "launch_s": launch.ms / 1000.0,
                                "kind": orch.manager.store.recent_launches(1)[0].kind})
                orch.terminate(r["instance"])
                if phase == "warm":
                    orch.manager.wait_pool(key, 2, timeout=120)
    finally:
        for rec in orch.manager.store.list():
            orch.manager.destroy(rec.id)
        orch.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    summary = {}
    for phase in ("cold", "warm"):
        ss = [s for s in samples if s["phase"] == phase and s["basis"].startswith("measured")]
        err = [abs(s["predicted_s"] - s["observed_s"]) / s["observed_s"] for s in ss]
        summary[phase] = {
            "n": len(ss), "predicted_p50_ms": pct([s["predicted_s"] for s in ss], 50) * 1000,
            "observed_p50_ms": pct([s["observed_s"] for s in ss], 50) * 1000,
            "observed_p90_ms": pct([s["observed_s"] for s in ss], 90) * 1000,
            "abs_rel_error_p50": pct(err, 50), "abs_rel_error_p90": pct(err, 90),
            "launch_kinds": sorted({s["kind"] for s in ss})}
        print(f"{phase}: predicted p50 {summary[phase]['predicted_p50_ms']:.1f} ms, observed "
              f"p50 {summary[phase]['observed_p50_ms']:.1f} ms, |error| p50 "
              f"{summary[phase]['abs_rel_error_p50']:.0%} p90 "
              f"{summary[phase]['abs_rel_error_p90']:.0%} (n={len(ss)})", flush=True)
    return samples, summary


def plot(decisions, samples, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if samples else 1, figsize=(12 if samples else 6, 4.5),
                             squeeze=False)
    ax = axes[0][0]
    sizes = sorted(decisions, key=int)
    for path_name in next(iter(decisions.values()))["paths"]:
        ax.plot([int(s) for s in sizes], [decisions[s]["paths"][path_name]["p50"] for s in sizes],
                marker="o", label=path_name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("hosts")
    ax.set_ylabel("decision time p50 (ms)")
    ax.set_title("placement decision time vs fleet size")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    if samples:
        ax = axes[0][1]
        for phase, mk in (("cold", "o"), ("warm", "s")):
            ss = [s for s in samples if s["phase"] == phase and s["basis"].startswith("measured")]
            ax.scatter([s["predicted_s"] * 1000 for s in ss],
                       [s["observed_s"] * 1000 for s in ss], marker=mk, label=phase)
        lim = max([s["observed_s"] * 1000 for s in samples] + [1.0])
        ax.plot([0, lim], [0, lim], "k--", lw=0.8, label="predicted = observed")
        ax.set_xlabel("predicted queuing delay (ms)")
        ax.set_ylabel("observed request -> slot (ms)")
        ax.set_title("queuing delay, local zone, real VNFs")
        ax.legend()
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,1000", help="host counts (comma-separated)")
    ap.add_argument("--reps", type=int, default=20, help="decisions per size and path")
    ap.add_argument("--launches", type=int, default=15, help="fast-track launches per phase")
    ap.add_argument("--no-vnfs", action="store_true", help="skip part 2 (real VNFs)")
    ap.add_argument("--out", default="bench/results", help="directory for placement.{json,png}")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="fvo-bench-")
    try:
        decisions = bench_decisions([int(s) for s in args.sizes.split(",")], args.reps, workdir)
        samples, summary = [], {}
        if not args.no_vnfs:
            if os.geteuid() != 0:
                print("part 2 needs root (taps); skipped", file=sys.stderr)
            else:
                samples, summary = bench_queuing(args.launches, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {"decisions": decisions, "queuing": {"summary": summary, "samples": samples},
              "cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg()}
    with open(os.path.join(args.out, "placement.json"), "w") as f:
        json.dump(result, f, indent=2)
    plot(decisions, samples, os.path.join(args.out, "placement.png"))
    print(f"wrote {args.out}/placement.json and placement.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
