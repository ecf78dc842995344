# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/evaluator: is a stage-1 load probe's slot estimate right, and what does it save?

For one environment type (this machine's launch core, QEMU direct), in one run:

1. the **stage-1 load probe** (:class:`fluidvim.evaluator.probes.LoadProbe`, its defaults: a
   coarse ladder of session counts, 2 s each, plus 3 refinement steps at the saturation knee)
   gives one latency/loss curve; :func:`fluidvim.evaluator.slots.estimate_slots` turns it into
   session slots for each QoS level (deadline at a quantile);
2. the **reference**: a real VNF driven with a fine, even sweep of session counts (longer steps,
   every step measured in every pass, never stopping at loss), and its capacity per level = the
   largest load whose tail meets the deadline with loss <= 1 %, read off that dense curve;
3. both are compared (target: estimate within +-15 % of the reference) together with what each
   cost in seconds; and the boot probe's cost is reported next to it.

Probe runs and reference passes are interleaved (probe, pass, probe, pass, probe) so that both
see the same machine; the reference curve is the per-step median over the passes, and every
probe run's estimate is reported, plus their median. Everything goes through the same traffic
generator (:mod:`fluidvim.evaluator.loadgen`: UDP sessions from a network namespace through the
VNF to an echo, kernel receive timestamps). On a shared 2-core machine with kvm_pvm the VNF
saturates at a few ten thousand packets/s and the tail is noisy: say so when quoting numbers.

Examples::

    sudo .venv/bin/python -m bench.evaluator                         # ~7 min, default levels
    sudo .venv/bin/python -m bench.evaluator --level gold=0.99:10 --level bronze=0.5:30
    sudo .venv/bin/python -m bench.evaluator --passes 1 --points 12 --probe-runs 1   # quick look
    .venv/bin/python -m bench.evaluator --replot bench/results/evaluator.json        # redraw
    sudo .venv/bin/python -m bench.evaluator --zone nomad --clients 2    # in a Nomad cluster

Writes bench/results/evaluator.json and bench/results/evaluator.png (``--zone nomad``:
evaluator-nomad.json/.png). Not a test: no thresholds.

``--zone nomad`` (issue 23 item 2): the same comparison in a real Nomad cluster
(tests/e2e/nomad_cluster.py: one server, ``--clients`` clients on this machine, the unikernel
plugin with ``private_bridges``), through the orchestrator's Nomad zone. This machine does not
put packets on a Nomad client's host, so probe and reference both take their traffic from a
generator VNF on the probe VNF's client (``LoadProbe(traffic="vnf")``,
evaluator/genprobe.py); the boot probe is not run there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import time
import uuid as uuidlib

from fluidvim.evaluator.model import ProbeResult
from fluidvim.evaluator.probes import DEFAULT_SESSIONS, BootProbe, LoadProbe
from fluidvim.evaluator.slots import estimate_capacity
from fluidvim.vnf.limits import VCPU_NICE_DEFAULT
from fluidvim.vnf.manager import VNFManager, make_conf

QUANTILE_KEYS = ("0.5", "0.75", "0.9", "0.95", "0.99", "0.999")
DEFAULT_LEVELS = ("premium=0.99:10", "standard=0.9:10", "basic=0.5:20")


def parse_level(text: str) -> dict:
    """``name=quantile:deadline_ms`` -> {"name", "quantile", "deadline_ms"}."""
    try:
        name, rest = text.split("=", 1)
        q, d = rest.split(":", 1)
        level = {"name": name.strip(), "quantile": float(q), "deadline_ms": float(d)}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--level {text!r}: expected NAME=QUANTILE:DEADLINE_MS, e.g. premium=0.99:20") from None
    if not 0 < level["quantile"] < 1 or level["deadline_ms"] <= 0 or not level["name"]:
        raise argparse.ArgumentTypeError(f"--level {text!r}: 0 < quantile < 1, deadline > 0")
    return level


def make_zone(mgr):
    """The orchestrator's local zone over this launch core."""
    from fluidvim.orchestrator.zones.local import LocalZone
    return LocalZone("local", mgr)


@contextlib.contextmanager
def local_environment(a):
    """(zone, environment type, accel) of this machine's launch core (QEMU direct)."""
    run_dir = f"/run/fluidvim-{a.prefix}-bench-{uuidlib.uuid4().hex[:6]}"
    state = f"/tmp/fluidvim-{a.prefix}-bench-{uuidlib.uuid4().hex[:6]}"
    overrides = {} if a.vcpu_nice is None else {"vcpu_nice": a.vcpu_nice}
    mgr = VNFManager(make_conf(state_dir=state, run_dir=run_dir, backend="qemu", **overrides))
    try:
        zone = make_zone(mgr)
        yield zone, zone.env(), mgr.accel
    finally:
        mgr.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


@contextlib.contextmanager
def nomad_environment(a):
    """(zone, environment type, accel) of the first client of a fresh Nomad cluster."""
    import tempfile
    from pathlib import Path

    from fluidvim.orchestrator.zones.nomad import NomadZone
    from tests.e2e.nomad_cluster import NomadCluster

    tmp = Path(tempfile.mkdtemp(prefix="fvbn-"))
    try:
        with NomadCluster(tmp, clients=a.clients, warm_pool=None) as cluster:
            cluster.wait_ready()
            zone = NomadZone("nomad", address=cluster.address, slot_interval=0)
            host = sorted(zone.hosts(), key=lambda h: h.name)[0]
            yield zone, host.env, host.env.accel
    finally:
        # Nomad's task dirs leave secrets/ and private/ mounts behind a killed client
        shutil.rmtree(tmp, ignore_errors=True)


def median_curve(passes: list[list[dict]], session_pps: float) -> ProbeResult:
    """One curve from several sweep passes: per session count, the median of each quantile/loss."""
    by_n: dict[int, list[dict]] = {}
    for steps in passes:
        for s in steps:
            by_n.setdefault(s["sessions"], []).append(s)
    steps = []
    for n, ss in sorted(by_n.items()):
        lat = {}
        for k in QUANTILE_KEYS:
            vals = [s["latency_ms"][k] for s in ss if s["latency_ms"].get(k) is not None]
            if vals:
                lat[k] = statistics.median(vals)
        steps.append({"sessions": n, "offered_pps": ss[0]["offered_pps"],
                      "achieved_pps": statistics.median(s["achieved_pps"] for s in ss),
                      "loss": statistics.median(s["loss"] for s in ss), "latency_ms": lat,
                      "passes": len(ss)})
    return ProbeResult(env_uid="reference", kind="load", ok=True,
                       metrics={"session_pps": session_pps, "steps": steps})


def show(label: str):
    """A progress callback printing one load step."""
    def progress(s):
        lat = s["latency_ms"]
        print(f"  {label}: {s['sessions']:4d} sessions {s['offered_pps']:7.0f} pps  p50 "
              f"{lat.get('0.5', float('nan')):7.2f}  p90 {lat.get('0.9', float('nan')):7.2f}  p99 "
              f"{lat.get('0.99', float('nan')):7.2f} ms  loss {s['loss']:.1%} "
              f"(pooled {s.get('loss_pooled', s['loss']):.1%})", flush=True)
    return progress


def sweep_points(estimates: list[float], points: int, probe_steps: list[dict]) -> list[int]:
    """Evenly spaced session counts from well below to well above the probes' estimates."""
    top = max(s["sessions"] for s in probe_steps)
    lo = max(1, int(0.4 * min(estimates))) if estimates else 1
    hi = int(1.6 * max(estimates)) if estimates and max(estimates) > 0 else top
    hi = max(hi, lo + points)
    step = (hi - lo) / (points - 1)
    return sorted({max(1, int(round(lo + i * step))) for i in range(points)})


def plot(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = result["levels"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]})
    ref = result["reference"]["curve"]
    colors = {}
    for i, lv in enumerate(levels):
        colors[lv["name"]] = f"C{i}"
        q = str(lv["quantile"]) if str(lv["quantile"]) in QUANTILE_KEYS else None
        if q:
            xs = [s["offered_pps"] for s in ref if q in s["latency_ms"]]
            ys = [s["latency_ms"][q] for s in ref if q in s["latency_ms"]]
            ax.plot(xs, ys, "-", color=colors[lv["name"]], lw=1.5,
                    label=f"reference sweep p{float(q) * 100:g}")
            for j, run in enumerate(result["probe_runs"]):
                ps = [s for s in run["steps"] if q in s["latency_ms"]]
                ax.plot([s["offered_pps"] for s in ps], [s["latency_ms"][q] for s in ps], "o",
                        mfc="none", color=colors[lv["name"]], ms=6,
                        label=f"probe p{float(q) * 100:g}" if j == 0 else None)
        ax.axhline(lv["deadline_ms"], color=colors[lv["name"]], ls=":", lw=1)
        cmp = result["comparison"][lv["name"]]
        ax.axvline(cmp["reference_pps"], color=colors[lv["name"]], ls="-", lw=0.8, alpha=0.5)
        ax.axvline(cmp["estimate_pps_median"], color=colors[lv["name"]], ls="--", lw=0.8)
    pts = result["reference"].get("points") or []
    if pts:
        ax.set_xlim(0, max(pts) * result["session_pps"] * 1.05)
    ax.set_yscale("log")
    ax.set_xlabel("offered load (packets/s; sessions x %g pps)" % result["session_pps"])
    ax.set_ylabel("round-trip latency through the VNF (ms)")
    ax.set_title("load curve: probe points vs reference sweep\n"
                 "dotted: deadlines, dashed: probe capacity, solid: reference capacity", fontsize=9)
    ax.legend(fontsize=7)
    names = [lv["name"] for lv in levels]
    est = [result["comparison"][n]["estimate_slots_median"] for n in names]
    refs = [result["comparison"][n]["reference_slots"] for n in names]
    x = range(len(names))
    bx.bar([i - 0.2 for i in x], refs, 0.4, label="reference (fine sweep)", color="0.6",
           yerr=[[r * 0.15 for r in refs], [r * 0.15 for r in refs]], capsize=4)
    bx.bar([i + 0.2 for i in x], est, 0.4, label="stage-1 probe estimate (median)", color="C0")
    bx.set_xticks(list(x))
    bx.set_xticklabels([f"{lv['name']}\np{lv['quantile'] * 100:g} <= {lv['deadline_ms']:g} ms"
                        for lv in levels], fontsize=8)
    bx.set_ylabel("session slots (error bars: reference +-15 %)")
    c = result["cost"]
    bx.set_title(f"probe {c['load_probe_s_median']:.0f} s vs reference {c['reference_s']:.0f} s "
                 f"({c['reference_per_pass_s']:.0f} s/pass)", fontsize=9)
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.evaluator", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--level", action="append", type=parse_level, default=None,
                    help="QoS level NAME=QUANTILE:DEADLINE_MS (repeatable; default "
                         "premium=0.99:10, standard=0.9:10, basic=0.5:20)")
    ap.add_argument("--session-pps", type=float, default=100.0, help="packets/s per session")
    ap.add_argument("--probe-runs", type=int, default=3, help="stage-1 load probe runs (default 3)")
    ap.add_argument("--passes", type=int, default=2, help="reference sweep passes (default 2)")
    ap.add_argument("--points", type=int, default=24, help="session counts in the sweep")
    ap.add_argument("--sweep-step", type=float, default=4.0, help="seconds per sweep step")
    ap.add_argument("--max-loss", type=float, default=0.01, help="loss a level tolerates")
    ap.add_argument("--prefix", default="fvebn", help="netns/bridge prefix (<= 6 chars)")
    ap.add_argument("--subnet", type=int, default=93, help="10.<subnet>.0.0/24 for the test net")
    ap.add_argument("--nice", type=int, default=0,
                    help="niceness increment for this run and what it starts (QEMU, traffic); "
                         "e.g. -5 on a machine shared with other work (default 0)")
    ap.add_argument("--vcpu-nice", type=int, default=None,
                    help="[vnf] vcpu_nice of the VNFs (default: the configuration's, "
                         f"{VCPU_NICE_DEFAULT})")
    ap.add_argument("--zone", choices=("local", "nomad"), default="local",
                    help="where: this machine's launch core (default) or a Nomad cluster")
    ap.add_argument("--clients", type=int, default=2, help="--zone nomad: client agents")
    ap.add_argument("--traffic", choices=("netns", "vnf"), default="netns",
                    help="--zone local: traffic from namespaces (default) or a generator VNF "
                         "(what a Nomad zone uses: compare the two here)")
    ap.add_argument("--out", default="bench/results", help="directory for evaluator.json/.png")
    ap.add_argument("--replot", metavar="JSON", help="only redraw the PNG of a saved run")
    a = ap.parse_args(argv)
    if a.replot:
        with open(a.replot) as f:
            plot(json.load(f), os.path.splitext(a.replot)[0] + ".png")
        return 0
    levels = a.level or [parse_level(t) for t in DEFAULT_LEVELS]
    if os.geteuid() != 0:
        ap.error("needs root (network namespaces, bridges, taps)")
    if a.nice:
        os.nice(a.nice)          # inherited by the VNFs' QEMU and the traffic processes

    environment = nomad_environment if a.zone == "nomad" else local_environment
    traffic = "vnf" if a.zone == "nomad" else a.traffic
    t_all = time.perf_counter()
    load0 = os.getloadavg()
    with environment(a) as (zone, env, accel):
        print(f"environment {env.uid}: {env.launcher}/{env.accel}/{env.machine}, "
              f"{env.cpu_model}; zone {zone.name} ({zone.kind}), traffic {traffic}", flush=True)
        if a.zone == "nomad":
            boot = None
        else:
            boot = BootProbe(n=3, warm=False).run(env, zone)
            print(f"boot probe: {'ok' if boot.ok else boot.error}, cold p50 "
                  f"{boot.metrics['cold_ms']['p50']} ms, probe took "
                  f"{boot.metrics['probe_s']:.1f} s", flush=True)

        def probe_run(i):
            p = LoadProbe(session_pps=a.session_pps, prefix=a.prefix, subnet=a.subnet,
                          traffic=traffic)
            r = p.run(env, zone, progress=show(f"probe {i}"))
            if not r.ok:
                raise SystemExit(f"load probe failed: {r.error}")
            est = {lv["name"]: estimate_capacity(r, lv["deadline_ms"], lv["quantile"],
                                                 a.session_pps, a.max_loss) for lv in levels}
            for n, e in est.items():
                print(f"  probe {i} {n}: {e.slots} slots ({e.basis})", flush=True)
            return {"seconds": r.metrics["probe_s"], "steps": r.metrics["steps"],
                    "estimates": {n: {"slots": e.slots, "pps": e.pps, "basis": e.basis,
                                      "saturated": e.saturated} for n, e in est.items()}}

        def sweep_pass(i, points):
            p = LoadProbe(sessions=points, session_pps=a.session_pps, step_s=a.sweep_step,
                          prefix=a.prefix, subnet=a.subnet, stop_loss=1.01, refine=0,
                          traffic=traffic)
            r = p.run(env, zone, progress=show(f"sweep {i}"))
            if not r.ok:
                raise SystemExit(f"reference sweep failed: {r.error}")
            return {"seconds": r.metrics["probe_s"], "steps": r.metrics["steps"]}

        probes, passes = [], []
        print("load probe 1", flush=True)
        probes.append(probe_run(1))
        est_sessions = [probes[0]["estimates"][lv["name"]]["slots"] for lv in levels]
        points = sweep_points([e for e in est_sessions if e > 0], a.points, probes[0]["steps"])
        print(f"reference sweep points (sessions): {points}", flush=True)
        for k in range(max(a.passes, a.probe_runs - 1)):
            if k < a.passes:
                print(f"reference pass {k + 1}", flush=True)
                passes.append(sweep_pass(k + 1, points))
            if len(probes) < a.probe_runs:
                print(f"load probe {len(probes) + 1}", flush=True)
                probes.append(probe_run(len(probes) + 1))
        ref = median_curve([p["steps"] for p in passes], a.session_pps)
        comparison = {}
        for lv in levels:
            n = lv["name"]
            r = estimate_capacity(ref, lv["deadline_ms"], lv["quantile"], a.session_pps,
                                  a.max_loss, interp="linear")
            slots = [p["estimates"][n]["slots"] for p in probes]
            pps = [p["estimates"][n]["pps"] for p in probes]
            med = statistics.median(slots)
            err = (med - r.slots) / r.slots if r.slots else None
            comparison[n] = {
                "level": lv, "reference_slots": r.slots, "reference_pps": r.pps,
                "reference_basis": r.basis, "reference_saturated": r.saturated,
                "estimate_slots": slots, "estimate_slots_median": med,
                "estimate_pps_median": statistics.median(pps),
                "error_median": err,
                "errors": [(s - r.slots) / r.slots if r.slots else None for s in slots],
                "within_15pct": err is not None and abs(err) <= 0.15,
            }
            print(f"{n} (p{lv['quantile'] * 100:g} <= {lv['deadline_ms']:g} ms): reference "
                  f"{r.slots} slots ({r.pps:.0f} pps), probe estimates {slots} -> median {med} "
                  f"({'n/a' if err is None else f'{err:+.1%}'})", flush=True)
        probe_s = [p["seconds"] for p in probes]
        ref_s = sum(p["seconds"] for p in passes)
        result = {
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": "python -m bench.evaluator " + " ".join(argv if argv is not None else sys.argv[1:]),
            "environment": env.to_dict(), "accel": accel, "zone": a.zone, "traffic": traffic,
            "loadavg_start_end": [list(load0), list(os.getloadavg())],
            "session_pps": a.session_pps, "max_loss": a.max_loss, "levels": levels,
            "nice": a.nice,
            "probe_defaults": {"sessions": list(DEFAULT_SESSIONS), "step_s": 2.0, "refine": 3},
            "boot_probe": boot.metrics if boot else None,
            "probe_runs": probes,
            "reference": {"points": points, "step_s": a.sweep_step, "passes": passes,
                          "curve": ref.metrics["steps"]},
            "comparison": comparison,
            "cost": {"load_probe_s": probe_s, "load_probe_s_median": statistics.median(probe_s),
                     "boot_probe_s": boot.metrics["probe_s"] if boot else None,
                     "reference_s": ref_s,
                     "reference_per_pass_s": ref_s / max(1, len(passes)),
                     "total_bench_s": time.perf_counter() - t_all},
        }
        os.makedirs(a.out, exist_ok=True)
        base = "evaluator" + ("-nomad" if a.zone == "nomad" else "")
        jp, pp = os.path.join(a.out, base + ".json"), os.path.join(a.out, base + ".png")
        with open(jp, "w") as f:
            json.dump(result, f, indent=1)
        plot(result, pp)
        c = result["cost"]
        boot_s = "n/a" if boot is None else f"{c['boot_probe_s']:.1f} s"
        print(f"cost: load probe {c['load_probe_s_median']:.1f} s (median of {len(probe_s)}), "
              f"boot probe {boot_s}, reference {ref_s:.1f} s "
              f"({c['reference_per_pass_s']:.1f} s per pass); wrote {jp} and {pp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
