# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/energy: one day of VNF sessions on a fleet of real servers, every placement policy in
the same run - Nomad's scheduler (binpack, spread), Nova's filter scheduler, fluidvim's
orchestrator (PlacementEngine) with and without consolidation - and a MILP lower bound.

Every policy gets the same sessions (seeded), the same autoscaling rule, the same power rules
(a host is powered off once empty for a hold time and woken when a placement is refused; boot
takes time and energy) and the same SLO accounting (refused, late, moved sessions); see
bench/energy/sim.py for the rules and bench/results/energy.md for their sources.

Writes bench/results/energy.json (a ``policies`` map: policy -> fleet -> hosts -> kwh,
slo_misses, awake_hosts_mean, moves, decision_ms_p50, ...) and energy.png.

Examples::

    .venv/bin/python -m bench.energy                               # both fleets, 20/100/1,000 hosts
    .venv/bin/python -m bench.energy --hosts 20 --policies fluidvim fluidvim-consolidate milp
    .venv/bin/python -m bench.energy --fleets homogeneous --hosts 1000 --merge   # add to the file
    .venv/bin/python -m bench.energy --hosts 20 --day-s 7200 --out /tmp/energy    # a compressed day
    .venv/bin/python -m bench.energy --hosts 1000 --policies fluidvim-consolidate nomad-binpack \
        --jobs 2                          # one process per run: Nomad's long day beside ours
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from . import fleet as fleetmod, milp, policies, sim, workload

RESULTS = Path(__file__).resolve().parent.parent / "results"


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.energy", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleets", nargs="+", default=list(fleetmod.KINDS), choices=fleetmod.KINDS)
    ap.add_argument("--hosts", nargs="+", type=int, default=[20, 100, 1000],
                    help="fleet sizes (default: 20 100 1000)")
    ap.add_argument("--policies", nargs="+", default=list(policies.NAMES),
                    metavar="NAME", help=f"policies to run (default: {' '.join(policies.NAMES)}"
                                         + (f"; also: {' '.join(policies.EXTRA)}"
                                            if policies.EXTRA else "") + ")")
    ap.add_argument("--seed", type=int, default=1, help="fleet draw, sessions, Nomad's shuffle")
    ap.add_argument("--model", default=None,
                    help="the homogeneous fleet's SPECpower system_id (default: "
                         f"{fleetmod.HOMOGENEOUS_RULE})")
    ap.add_argument("--peak-load", type=float, default=0.7,
                    help="the peak's sessions fill this fraction of the fleet's threads")
    ap.add_argument("--trough-peak", type=float, default=workload.TROUGH_PEAK,
                    help=f"the day's trough / peak (default {workload.TROUGH_PEAK}: "
                         f"{workload.TROUGH_PEAK_SOURCE})")
    ap.add_argument("--day-s", type=float, default=workload.DAY_S,
                    help="simulated length of the day's curve (default 86400; less compresses "
                         "the day, boot and hold times stay real)")
    ap.add_argument("--step-s", type=float, default=30.0, help="simulation step")
    ap.add_argument("--hold-s", type=float, default=180.0, help="mean session duration")
    ap.add_argument("--boot-s", type=float, default=260.0, help="server boot time")
    ap.add_argument("--drain-bound-s", type=float, default=3600.0,
                    help="consolidation: a drained instance's sessions still running after "
                         "this long are moved (an SLO miss each); until then its host stays "
                         "awake (sessions first: none is cut)")
    ap.add_argument("--off-hold-s", type=float, default=120.0,
                    help="an empty host is powered off after this long")
    ap.add_argument("--route", default="efficient", choices=sim.ROUTES,
                    help="session routing, every policy: 'efficient' (instances on the host "
                         "with the fewest dynamic watts per thread first, the fullest there "
                         "first) or 'fullest' (the fullest instance of all: the rule before "
                         "2026-11-28)")
    ap.add_argument("--fluidvim-route", default="efficient",
                    choices=("efficient", "watts", "free", "shared"),
                    help="fluidvim's session routing: the orchestrator's resolver with that "
                         "[orchestrator] session_route ('efficient', the default; 'watts'; "
                         "'free'), or 'shared': --route, as the baselines")
    ap.add_argument("--milp-max-hosts", type=int, default=1000,
                    help="solve the MILP bound up to this fleet size")
    ap.add_argument("--milp-every", type=int, default=0,
                    help="steps per MILP solve (0: 1 up to 100 hosts - ~20 min at 100 -, 30 "
                         "above); a window takes its least demand: a looser bound (10 steps at "
                         "100 heterogeneous hosts: 2.2 kWh, 1 %% lower)")
    ap.add_argument("--evaluator", default=None, help="evaluator.json with slots and deadlines")
    ap.add_argument("--out", default=str(RESULTS / "energy"), help="output prefix (.json, .png)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the runs of an existing OUT.json that this command does not redo")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--report", action="store_true",
                    help="print OUT.json as Markdown tables (for bench/results/energy.md) and exit")
    ap.add_argument("--combine", nargs="+", metavar="JSON", default=None,
                    help="merge the runs of these result files (runs done apart, e.g. one "
                         "size per machine) into OUT.json and OUT.png, and exit")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs (fleet x size x policy) at once, each in its own process "
                         "(default 1: one after the other). Every run is seeded on its own, so "
                         "the results are the same; the times each reports are taken beside "
                         "the others")
    args = ap.parse_args(argv)
    known = policies.NAMES + policies.EXTRA
    unknown = [p for p in args.policies if p not in known]
    if unknown:
        ap.error(f"--policies: unknown {unknown}; known: {' '.join(known)}")
    if args.jobs < 1:
        ap.error("--jobs must be >= 1")
    if any(n < 1 for n in args.hosts):
        ap.error("--hosts: every size must be >= 1")
    if not 0 < args.peak_load <= 1:
        ap.error("--peak-load must be in (0, 1]")
    if args.step_s <= 0 or args.day_s < 10 * args.step_s:
        ap.error("--step-s must be > 0 and --day-s at least 10 steps")
    return args


def downsample(series: dict, step_s: float, every_s: float) -> dict:
    k = max(1, int(round(every_s / step_s)))
    out = {"t": [], "w": [], "awake": [], "misses": []}
    for i in range(0, len(series["w"]), k):
        out["t"].append(series["t"][i])
        out["w"].append(round(sum(series["w"][i:i + k]) / len(series["w"][i:i + k]), 1))
        out["awake"].append(round(sum(series["awake"][i:i + k]) / len(series["awake"][i:i + k]),
                                  2))
        out["misses"].append(int(sum(series["misses"][i:i + k])) if "misses" in series else 0)
    return out


def series_every(cfg) -> float:
    """The plotted series' resolution: 10 minutes of a real day (144 points per day)."""
    return max(cfg.step_s, cfg.day_s / 144.0)


def accounting(cfg: sim.SimConfig, launch: dict, services) -> list[dict]:
    """The rules, each with its source (bench/results/energy.md prints these)."""
    return [
        {"rule": "awake host power", "value": "SPECpower curve at the host's CPU utilisation "
         "(linear between the 11 points); >= idle (w_0) even when empty",
         "source": "SPECpower_ssj2008 results (shared/data/specpower_curves.csv)"},
        {"rule": "boot (off -> on)", "value": f"{cfg.boot_s:g} s at the server's peak power "
         "(w_100); its instances serve nothing until it has booted",
         "source": "Gandhi et al., AutoScale, ACM TOCS 30(4) 2012, sec. 1 and 2.1: setup "
                   "time 260 s, power during setup the peak 200 W"},
        {"rule": "power off", "value": f"after {cfg.off_hold_s:g} s empty (every policy); "
         f"shutdown {cfg.shutdown_s:g} s at idle watts, then 0 W",
         "source": "hold time: AutoScale's t_wait = 120 s (insensitive 60-260 s, Table II); "
                   "shutdown time and 0 W off: assumptions (AutoScale counts 0 W at once)"},
        {"rule": "wake on refusal", "value": "a refused placement is asked again with the "
         "powered-off hosts eligible; the policy's pick is woken (every policy)",
         "source": "what a cluster autoscaler does (scale up on unschedulable work)"},
        {"rule": "wake ahead", "value": "a policy may also wake hosts before a refusal "
         "(fluidvim: the orchestrator's power loop rule, power.forecast_instances / "
         "wake_ahead, one boot ahead of its services' slot trend); such a wake costs the same "
         "boot, and a woken host nothing uses is powered off by the same hold-time rule",
         "source": "orchestrator/hostpower.py [host_power] wake_ahead_s; bench/energy/sim.py "
                   "_wake_ahead"},
        {"rule": "session routing", "value": (
            "a new session goes to a ready instance with a free slot on the host with the "
            "fewest dynamic watts per hardware thread ((w_100 - w_0) / threads) first, while "
            "that host has an idle thread, the fullest instance there first; the rest to the "
            "fullest instance of all (every policy)" if cfg.route == "efficient" else
            "a new session goes to the fullest ready instance with a free slot (every policy)")
            + ("; fluidvim and fluidvim-consolidate instead route with the orchestrator's "
               f"resolver (resolver.slot_order, [orchestrator] session_route = "
               f"{cfg.fluidvim_route}: with 'efficient' the host with the fewest dynamic "
               "watts per hardware thread on the orchestrator's power model first, the "
               "fullest instance there first)"
               if cfg.fluidvim_route != "shared" else ""),
         "source": "packing as AutoScale's index-packing routes requests (Gandhi et al. 2012); "
                   "the host order: bench/energy/sim.py SimConfig.route; fluidvim's: "
                   "orchestrator/resolver.py slot_order, sim.py _fill_resolver"},
        {"rule": "VNF CPU", "value": "one hardware thread at full slots, sessions/slots of "
         "one in between, ~0 idle", "source": "bench/results/density.json "
                                              "idle_cpu_pct_per_vnf (0.0 at 1,000 idle VNFs)"},
        {"rule": "launch / move cost", "value": f"{launch['launch_cpu_s'] * 1000:.1f} ms CPU "
         f"on the target host per launch; a moved session waits a launch "
         f"({launch['launch_s'] * 1000:.1f} ms, past every deadline): an SLO miss",
         "source": f"{launch['launch_cpu_source']}; {launch['launch_source']}"},
        {"rule": "slots and deadlines", "value": "; ".join(
            f"{s.name}: {s.slots} sessions p{s.quantile * 100:g} <= {s.deadline_ms:g} ms"
            for s in services), "source": "bench/results/evaluator.json "
                                          "comparison.<level>.reference_slots, levels[]"},
        {"rule": "late sessions", "value": "a host whose VNFs want more threads than it has "
         "gives each threads/demand of one: sessions beyond that share of its slots are late",
         "source": "the slots were measured with the VNF on its own vCPU (evaluator.json)"},
        {"rule": "queuing delay", "value": "the scaler's lead = one step + a launch, or + a "
         "boot when no awake host has room for the next instances",
         "source": "orchestrator/mano/scaling.py decide() (lead_s); orchestrator/queuing.py"},
        {"rule": "day", "value": f"trough/peak {cfg_tp(cfg)}; sessions last "
         f"{cfg.hold_s:g} s on average (exponential)",
         "source": workload.TROUGH_PEAK_SOURCE + " (workload.py)"},
    ]


def cfg_tp(cfg) -> str:
    return f"{getattr(cfg, 'trough_peak', workload.TROUGH_PEAK):g}"


def main(argv=None) -> int:
    args = parse(argv)
    if args.combine:
        return combine(args)
    if args.report:
        path = Path(args.out).with_suffix(".json")
        try:
            print(markdown(json.loads(path.read_text())))
        except OSError as e:
            print(f"bench/energy: no results to report: {e}; run the bench first",
                  file=sys.stderr)
            return 2
        return 0
    try:
        services, measurement = workload.load_services(args.evaluator)
    except ValueError as e:
        print(f"bench/energy: {e}", file=sys.stderr)
        return 2
    skipped = {}
    names = []
    for p in args.policies:
        why = policies.available(p)
        if why:
            skipped[p] = why
            print(f"bench/energy: skipping {p}: {why}", file=sys.stderr)
        else:
            names.append(p)
    launch = sim.measured_launch()
    cfg = sim.SimConfig(step_s=args.step_s, day_s=args.day_s, hold_s=args.hold_s,
                        boot_s=args.boot_s, off_hold_s=args.off_hold_s,
                        drain_bound_s=args.drain_bound_s,
                        warmup_s=min(3 * 3600.0, args.day_s / 4),
                        launch_s=launch["launch_s"], launch_cpu_s=launch["launch_cpu_s"],
                        seed=args.seed, route=args.route,
                        fluidvim_route=args.fluidvim_route)
    cfg.trough_peak = args.trough_peak
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    old = {}
    if args.merge and out.with_suffix(".json").exists():
        old = json.loads(out.with_suffix(".json").read_text())
    runs = old.get("runs", {})
    steps = int(round((cfg.warmup_s + cfg.day_s) / cfg.step_s))
    jobs = [(kind, n, name) for kind in args.fleets for n in args.hosts for name in names]
    if args.jobs > 1 and len(jobs) > 1:
        run_parallel(jobs, services, measurement, cfg, args, runs,
                     lambda: write(out, args, cfg, launch, services, runs, skipped))
        jobs = []
    total = len(jobs) * steps
    bar = None
    if jobs and not args.no_progress:
        from tqdm import tqdm
        bar = tqdm(total=total, unit="step", desc="bench/energy", file=sys.stderr)
    for kind, n, name in jobs:
        fl, demand = fleet_and_demand(kind, n, services, cfg, args)
        pols = new_run(runs, kind, n, fl, cfg, args)
        if bar is not None:
            bar.set_description(f"{kind} {n} {name}")
        tick = (lambda k: bar.update(k)) if bar is not None else None
        pols[name] = run_one(name, fl, services, measurement, demand, cfg, args, tick)
        write(out, args, cfg, launch, services, runs, skipped)
    if bar is not None:
        bar.close()
    result = write(out, args, cfg, launch, services, runs, skipped)
    print_table(result)
    if not args.no_plot:
        from .plot import plot
        try:
            plot(result, out.with_suffix(".png"))
            print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
        except ValueError as e:
            print(f"wrote {out.with_suffix('.json')}; no plot: {e}")
    return 0


def fleet_and_demand(kind: str, n: int, services, cfg, args):
    fl = fleetmod.make_fleet(kind, n, args.seed, model=args.model)
    demand = workload.Demand(services, fl.threads, peak_load=args.peak_load, seed=args.seed,
                             trough_peak=args.trough_peak, day_s=args.day_s, step_s=cfg.step_s,
                             start_s=-cfg.warmup_s, end_s=cfg.day_s)
    return fl, demand


def new_run(runs: dict, kind: str, n: int, fl, cfg, args) -> dict:
    """The run of ``kind`` x ``n`` in ``runs`` with this fleet; its policies map."""
    run = runs.setdefault(kind, {}).setdefault(str(n), {})
    run["fleet"] = fl.describe()
    run["series_every_s"] = series_every(cfg)
    run["day_s"] = args.day_s
    return run.setdefault("policies", {})


def _job(kind: str, n: int, name: str, cfg, args) -> dict:
    """One run in a worker process (``--jobs``): the same fleet, sessions and seed as in the
    parent's loop."""
    services, measurement = workload.load_services(args.evaluator)
    fl, demand = fleet_and_demand(kind, n, services, cfg, args)
    return run_one(name, fl, services, measurement, demand, cfg, args, None)


def run_parallel(jobs: list, services, measurement, cfg, args, runs: dict, save) -> None:
    """``--jobs``: the runs in ``args.jobs`` processes at once, each row written as it ends (in
    the order of ``jobs`` within its fleet and size)."""
    import concurrent.futures
    import multiprocessing
    order = {job: i for i, job in enumerate(jobs)}
    ctx = multiprocessing.get_context("spawn")     # no fork of a process holding a scheduler
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=ctx) as ex:
        futs = {ex.submit(_job, kind, n, name, cfg, args): (kind, n, name)
                for kind, n, name in jobs}
        for f in concurrent.futures.as_completed(futs):
            kind, n, name = futs[f]
            row = f.result()
            fl = fleetmod.make_fleet(kind, n, args.seed, model=args.model)
            pols = new_run(runs, kind, n, fl, cfg, args)
            pols[name] = row
            keep = sorted(pols, key=lambda p: order.get((kind, n, p), -1))
            runs[kind][str(n)]["policies"] = {p: pols[p] for p in keep}
            save()
            if not args.no_progress:
                print(f"bench/energy: {kind} {n} {name} done ({row.get('wall_s', '-')} s)",
                      file=sys.stderr, flush=True)


def combine(args) -> int:
    """Merge result files: later files' runs win per fleet, size and policy; the config and
    accounting rules written are the last file's (list the newest run last)."""
    merged, base = {}, None
    for path in args.combine:
        try:
            res = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"bench/energy: --combine {path}: {e}", file=sys.stderr)
            return 2
        base = res                   # the config and accounting of the last (newest) file
        for kind, sizes in res.get("runs", {}).items():
            for n, run in sizes.items():
                dst = merged.setdefault(kind, {}).setdefault(n, {})
                pols = dst.setdefault("policies", {})
                pols.update(run.get("policies", {}))
                dst.update({k: v for k, v in run.items() if k not in ("policies", "ratios")})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    commands = []
    for path in args.combine:
        commands.append(json.loads(Path(path).read_text()).get("command"))
    result = dict(base)
    result["runs"] = merged
    result["command"] = commands
    result["when"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    result["policies"] = by_policy_map(merged)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print_table(result)
    if not args.no_plot:
        from .plot import plot
        plot(result, out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.json')}" + ("" if args.no_plot else
                                                 f" and {out.with_suffix('.png')}"))
    return 0


def stamp() -> dict:
    """When and from which commit a row was run (rows of runs done apart are merged with
    --combine; a row older than the code it describes is told by these)."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", str(here),
                                str(here.parent.parent / "orchestrator")], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", ""
    return {"run_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
            "commit": (commit + ("+changes" if dirty else "")) or None}


def run_one(name, fl, services, measurement, demand, cfg, args, tick) -> dict:
    if name == "milp":
        return {**run_milp(fl, services, demand, cfg, args, tick), **stamp()}
    pol = policies.make(name, measurement=measurement, services=services, cfg=cfg,
                        seed=args.seed)
    r = sim.Simulator(fl, services, demand, cfg, pol, progress=tick).run()
    d = r.summary()
    if hasattr(pol, "steps_ms") and pol.steps_ms:
        import statistics
        d["engine_steps_ms_p50"] = {k: round(statistics.median(v), 3)
                                    for k, v in pol.steps_ms.items()}
    if hasattr(pol, "describe"):
        d.update(pol.describe())           # a policy's own figures (Nomad: its evaluations)
    d["steps"] = int(round((cfg.warmup_s + cfg.day_s) / cfg.step_s))      # warm-up included
    d["wall_s_per_step"] = round(r.wall_s / d["steps"], 4)
    d["series"] = downsample(r.series, cfg.step_s, series_every(cfg))
    d.update(stamp())
    return d


def run_milp(fl, services, demand, cfg, args, tick) -> dict:
    if len(fl) > args.milp_max_hosts:
        return {"skipped": f"{len(fl)} hosts > --milp-max-hosts {args.milp_max_hosts}"}
    t0 = time.perf_counter()
    ideal = sim.Simulator(fl, services, demand, cfg, None)
    r = ideal.run()
    every = args.milp_every or (1 if len(fl) <= 100 else 30)
    steps = int(round((cfg.warmup_s + cfg.day_s) / cfg.step_s))
    if tick is not None:
        tick(steps - len(ideal.ideal_trace))
    b = milp.solve_trace(fl, ideal.ideal_trace, cfg.step_s, every=every, progress=tick)
    import statistics
    series = {"t": [x[0] for x in ideal.ideal_trace], "w": b["w"], "awake": b["awake"]}
    return {"kwh": round(b["kwh"], 4), "slo_misses": 0,
            "awake_hosts_mean": round(sum(b["awake"]) / len(b["awake"]), 2),
            "moves": b["moves"], "decision_ms_p50": round(statistics.median(b["ms"]), 3),
            "bound": "MILP per step, exact on the piecewise-linear SPECpower curves; free "
                     "instant moves and power switches (a lower bound)",
            "solves": b["solves"], "steps_per_solve": every, "model_groups": b["groups"],
            "not_optimal": b["not_optimal"], "ideal_refused": r.refused,
            "sessions": r.sessions, "mean_w": round(sum(b["w"]) / len(b["w"]), 1),
            "wall_s": round(time.perf_counter() - t0, 1),
            "series": downsample(series, cfg.step_s, series_every(cfg))}


def ratios(pols: dict) -> dict:
    out = {}
    base = pols.get(policies.BASELINE, {}).get("kwh")
    bound = pols.get(policies.BOUND, {}).get("kwh")
    for name, p in pols.items():
        if "kwh" not in p:
            continue
        out[name] = {"vs_nomad_binpack": round(p["kwh"] / base, 4) if base else None,
                     "vs_milp": round(p["kwh"] / bound, 4) if bound else None}
    return out


def by_policy_map(runs: dict) -> dict:
    """{policy: {fleet: {hosts: row without its series}}}, each run's ``ratios`` set on the way."""
    by_policy: dict = {}
    for kind, sizes in runs.items():
        for n, run in sizes.items():
            run["ratios"] = ratios(run.get("policies", {}))
            for name, p in run.get("policies", {}).items():
                by_policy.setdefault(name, {}).setdefault(kind, {})[n] = {
                    k: v for k, v in p.items() if k != "series"}
    return by_policy


def write(out: Path, args, cfg, launch, services, runs, skipped) -> dict:
    by_policy = by_policy_map(runs)
    result = {
        "when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python -m bench.energy " + " ".join(sys.argv[1:]),
        "args": vars(args), "config": {k: v for k, v in vars(cfg).items()},
        "services": [vars(s) for s in services], "accounting": accounting(cfg, launch, services),
        "skipped": skipped, "policies": by_policy, "runs": runs,
    }
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def markdown(result: dict) -> str:
    """The results as Markdown: one table per fleet kind, the accounting rules."""
    out = []
    order = [n for n in policies.NAMES]
    for kind in ("heterogeneous", "homogeneous"):
        sizes = result["runs"].get(kind)
        if not sizes:
            continue
        out.append(f"**{kind}** fleet\n")
        out.append("| hosts | policy | kWh/day | vs nomad-binpack | vs milp | SLO misses "
                   "(refused/late/moved) | % of sessions | awake hosts (mean) | moves | "
                   "decision p50 ms | run |")
        out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for n in sorted(sizes, key=int):
            run = sizes[n]
            pols = run.get("policies", {})
            for name in order + [p for p in pols if p not in order]:
                p = pols.get(name)
                if p is None:
                    continue
                if "kwh" not in p:
                    out.append(f"| {n} | {name} | - | - | - | {p.get('skipped', '-')} | | | | | |")
                    continue
                r = run.get("ratios", {}).get(name, {})
                m = p.get("misses") or {}
                split = (f" ({m.get('refused', 0)}/{m.get('late', 0)}/{m.get('moved', 0)})"
                         if m else "")
                pct = (100.0 * p["slo_misses"] / p["sessions"]) if p.get("sessions") else None
                ms = p.get("decision_ms_p50")
                out.append(f"| {n} | {name} | {p['kwh']:.1f} | {_fmt(r.get('vs_nomad_binpack'))}"
                           f" | {_fmt(r.get('vs_milp'))} | {p['slo_misses']}{split} | "
                           f"{'-' if pct is None else f'{pct:.4f}'} | "
                           f"{p['awake_hosts_mean']:.1f} | {p['moves']} | "
                           f"{'-' if ms is None else f'{ms:.2f}'} | {_run(p)} |")
        out.append("")
    out.append("Accounting rules (every policy):\n")
    for a in result.get("accounting", []):
        out.append(f"- **{a['rule']}**: {a['value']}. Source: {a['source']}.")
    return "\n".join(out)


def _run(p: dict) -> str:
    """When and from which commit a row was run (rows older than the stamp: unknown)."""
    if not p.get("run_at"):
        return "before the stamp"
    gc = (p.get("schedsim_gc") or {}).get("GOGC", "")
    gc = f" GOGC={gc}" if gc and not gc.startswith("unset") else ""    # Nomad's times without GC
    if p.get("nomad_recheck") is False:          # ... and without the re-check (nomad_policy.py)
        gc += " no-recheck"
    return f"{p['run_at'][5:16].replace('T', ' ')} {p.get('commit') or ''}{gc}".strip()


def _fmt(x) -> str:
    return f"{x:.3f}" if x is not None else "-"


def print_table(result: dict) -> None:
    print(f"{'fleet':<14} {'hosts':>5} {'policy':<21} {'kWh':>9} {'/binpack':>8} {'/milp':>6} "
          f"{'misses':>9} {'awake':>7} {'moves':>6} {'ms p50':>7}")
    for kind, sizes in result["runs"].items():
        for n in sorted(sizes, key=int):
            run = sizes[n]
            for name, p in run["policies"].items():
                if "kwh" not in p:
                    print(f"{kind:<14} {n:>5} {name:<21} {p.get('skipped', '-')}")
                    continue
                r = run["ratios"].get(name, {})
                ms = p.get("decision_ms_p50")
                print(f"{kind:<14} {n:>5} {name:<21} {p['kwh']:9.2f} "
                      f"{_fmt(r.get('vs_nomad_binpack')):>8} {_fmt(r.get('vs_milp')):>6} "
                      f"{p['slo_misses']:9d} {p['awake_hosts_mean']:7.1f} {p['moves']:6d} "
                      f"{(f'{ms:.2f}' if ms is not None else '-'):>7}")


if __name__ == "__main__":
    sys.exit(main())
