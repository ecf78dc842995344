# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Where a policy's energy goes against the MILP bound, hour by hour (issue 21's "within 5 %").

One policy's day and the bound on the same fleet and workload as ``python -m bench.energy``;
the bound is solved every ``--every`` steps twice: for the ideal run's instances (the bound
bench/energy reports) and for the policy's own instances and busy threads at that step (so the
gap splits into *how many* VNFs the policy runs - scale-in drains, replacements of moves - and
*where*: which hosts are awake and how loaded). Per hour: watts (policy, bound, bound for the
policy's instances), awake hosts (the same three), the policy's hosts awake with no VNF and
with only draining VNFs, its instances against the ideal run's, and the draining ones; then
each host's share of the day awake against the bound's per server model. ``--split`` also
solves, per sampled step, the least power of the policy's own hosts in service with its own VNFs
on them for the same busy threads (``own_routing``: each host's busy threads at most its VNFs,
its power on its curve): the policy's watts above that are *routing* (which VNFs the sessions
keep busy), that above the bound *placement* (which hosts are awake, how many VNFs each holds).

    .venv/bin/python -m bench.energy.gap --fleet heterogeneous --hosts 20 --every 10
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import numpy as np

from . import fleet as fleetmod, milp, policies, sim, workload


class _Recording(sim.Simulator):
    """The simulator, keeping each counted step's host states and VNFs per host."""

    def advance(self) -> None:
        super().advance()
        if self.counting and not self.ideal:
            ins, v = self.inst, self.inst.view()
            alive = ins.alive[v]
            self.rec.append({
                "t": self.now - self.cfg.step_s, "w": self.series["w"][-1],
                "state": self.state.copy(),
                "per_host": np.bincount(ins.host[v][alive], minlength=self.H),
                "drain": np.bincount(ins.host[v][alive & (ins.drain[v] != 0)],
                                     minlength=self.H),
                "busy": float(self._demand.sum()), "serving": self.state == sim.ON})


def own_routing(curves, threads, on, vnfs, busy: float) -> float:
    """The least watts of hosts ``on`` (indices, all awake) holding ``vnfs[h]`` VNFs each when
    their VNFs keep ``busy`` hardware threads busy in all, each VNF at most one: a MILP over the
    hosts' curve segments (HiGHS), as ``milp.Bound`` but for these hosts and VNFs only."""
    import highspy

    with milp._quiet():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    cols: list = []

    def add(cost, lo, hi, integer=False):
        h.addCol(float(cost), float(lo), float(hi), 0, [], [])
        if integer:
            h.changeColIntegrality(len(cols), highspy.HighsVarType.kInteger)
        cols.append(None)
        return len(cols) - 1

    def row(lo, hi, idx, val):
        h.addRow(float(lo), float(hi), len(idx), np.array(idx, np.int32), np.array(val, float))

    loads = []
    for i in on:
        T, pts = float(threads[i]), [float(x) for x in curves[i]]
        zs, ls = [], []
        for k in range(10):
            lo, hi = T * k / 10.0, T * (k + 1) / 10.0
            a = (pts[k + 1] - pts[k]) / (hi - lo)
            z, L = add(pts[k] - a * lo, 0, 1, True), add(a, 0.0, inf)
            row(0.0, inf, [L, z], [1.0, -lo])
            row(-inf, 0.0, [L, z], [1.0, -hi])
            zs.append(z)
            ls.append(L)
        row(1.0, 1.0, zs, [1.0] * 10)                       # awake: one segment
        row(-inf, float(vnfs[i]), ls, [1.0] * 10)           # busy <= its VNFs
        loads += ls
    row(busy, busy, loads, [1.0] * len(loads))
    h.run()
    return float(h.getInfo().objective_function_value)


def run(kind: str, hosts: int, policy: str, every: int, seed: int = 1,
        route: str = "efficient", split: bool = False) -> dict:
    services, measurement = workload.load_services(None)
    launch = sim.measured_launch()
    cfg = sim.SimConfig(warmup_s=3 * 3600.0, launch_s=launch["launch_s"],
                        launch_cpu_s=launch["launch_cpu_s"], seed=seed, route=route)
    fl = fleetmod.make_fleet(kind, hosts, seed, model=None)
    demand = workload.Demand(services, fl.threads, peak_load=0.7, seed=seed,
                             trough_peak=workload.TROUGH_PEAK, day_s=cfg.day_s,
                             step_s=cfg.step_s, start_s=-cfg.warmup_s, end_s=cfg.day_s)
    pol = policies.make(policy, measurement=measurement, services=services, cfg=cfg, seed=seed)
    t0 = time.perf_counter()
    s = _Recording(fl, services, demand, cfg, pol)
    s.rec = []
    r = s.run()
    wall = time.perf_counter() - t0
    ideal = sim.Simulator(fl, services, demand, cfg, None)
    ideal.run()
    bound = milp.Bound(fl)
    points = [c.points for c in fl.curves]
    threads = [h.cores for h in fl.hosts]
    rows = []
    for rec, x in zip(s.rec[::every], ideal.ideal_trace[::every]):
        b = bound.solve(sum(x[1]), sum(x[2]))
        own = bound.solve(int(rec["per_host"].sum()), rec["busy"])
        st, per, dr = rec["state"], rec["per_host"], rec["drain"]
        # a step with a host booting or shutting down: its watts are not a placement's
        clean = bool(np.all((st == sim.OFF) | (st == sim.ON)))
        on = np.nonzero(rec["serving"])[0]
        w_routing = (own_routing(points, threads, on, per,
                                 min(rec["busy"], float(per[on].sum())))
                     if split and clean else None)
        rows.append({"t": rec["t"], "w": rec["w"], "w_bound": b["watts"], "w_own": own["watts"],
                     "awake": int(np.count_nonzero(st != sim.OFF)), "awake_bound": b["awake"],
                     "awake_own": own["awake"],
                     "empty": int(np.count_nonzero((st != sim.OFF) & (per == 0))),
                     "drain_only": int(np.count_nonzero((per > 0) & (per == dr))),
                     "w_routing": w_routing, "inst": int(per.sum()), "inst_ideal": sum(x[1]),
                     "draining": int(dr.sum()),
                     "per_model": b["per_model"], "per_model_own": own["per_model"],
                     "vnfs": per.tolist(), "drain_vnfs": dr.tolist(),
                     "on": [h for h in range(len(st)) if st[h] != sim.OFF]})
    return {"kind": kind, "hosts": hosts, "policy": policy, "kwh": r.kwh,
            "slo_misses": r.slo_misses, "extra": r.extra, "wall_s": wall, "rows": rows,
            "fleet": [(h.id, h.model) for h in fl.hosts]}


def report(res: dict) -> str:
    rows = res["rows"]
    keys = ("w", "w_bound", "w_own", "awake", "awake_bound", "awake_own", "empty",
            "drain_only", "inst", "inst_ideal", "draining")
    a = {k: np.array([r[k] for r in rows], float) for k in keys}
    out = [f"{res['kind']} {res['hosts']} hosts, {res['policy']}: {res['kwh']:.2f} kWh, "
           f"{res['slo_misses']} SLO misses, {res['extra']} ({res['wall_s']:.0f} s)",
           f"mean W: policy {a['w'].mean():.0f}, bound {a['w_bound'].mean():.0f} "
           f"({a['w'].mean() / a['w_bound'].mean():.3f}x), bound for the policy's instances "
           f"{a['w_own'].mean():.0f}",
           "hour  W: policy bound own | awake: policy bound own | empty drain-only | "
           "instances: policy ideal draining"]
    t = np.array([r["t"] for r in rows])
    for hh in range(24):
        sel = (t >= hh * 3600) & (t < (hh + 1) * 3600)
        if not sel.any():
            continue
        m = {k: v[sel].mean() for k, v in a.items()}
        out.append(f"{hh:4d} {m['w']:6.0f} {m['w_bound']:6.0f} {m['w_own']:6.0f} | "
                   f"{m['awake']:5.1f} {m['awake_bound']:5.1f} {m['awake_own']:5.1f} | "
                   f"{m['empty']:4.2f} {m['drain_only']:4.2f} | {m['inst']:6.0f} "
                   f"{m['inst_ideal']:6.0f} {m['draining']:5.1f}")
    n = len(rows)
    models = dict(res["fleet"])
    awake = collections.Counter(h for r in rows for h in r["on"])
    by_model = collections.Counter()
    for r in rows:
        for model, (k, _) in (r["per_model"] or {}).items():
            by_model[model] += k
    ids = [h for h, _ in res["fleet"]]
    out.append("share of the day awake, policy (host model) vs bound (hosts of that model):")
    for i in sorted(awake, key=lambda i: -awake[i]):
        m = models[ids[i]]
        out.append(f"  {ids[i]} {m}: {awake[i] / n:.2f} vs {by_model[m] / n:.2f}")
    extra = sorted(m for m in by_model if m not in {models[ids[i]] for i in awake})
    for m in extra:
        out.append(f"  (not used) {m}: bound {by_model[m] / n:.2f}")
    split = [r for r in rows if r.get("w_routing") is not None]
    if split:
        w, wr, wb = (np.array([r[k] for r in split]) for k in ("w", "w_routing", "w_bound"))
        out.append(f"split over the {len(split)} sampled steps with no host booting or shutting "
                   f"down: policy {w.mean():.0f} W, its own hosts and VNFs with the best "
                   f"routing {wr.mean():.0f} W (routing {w.mean() - wr.mean():.0f} W), bound "
                   f"{wb.mean():.0f} W (placement {wr.mean() - wb.mean():.0f} W); boots "
                   f"{res['extra'].get('boot_kwh', 0):.2f} kWh, hosts awake empty "
                   f"{res['extra'].get('empty_kwh', 0):.2f} kWh of the day")
    return "\n".join(out)


def hosts_at(res: dict, hours) -> str:
    """At the sampled step nearest each of ``hours`` (of the simulated day, 0-24; 24 is its
    start, 00:00, as the curve repeats), the policy's awake hosts - VNFs there (of them
    draining) - against the hosts per server model the bound runs for the ideal run's
    instances and for the policy's own: which host is the one too many
    (bench/results/energy.md, 2026-11-29 05:31-06:30)."""
    rows, out = res["rows"], []
    ids = [h for h, _ in res["fleet"]]
    models = dict(res["fleet"])
    t = np.array([r["t"] for r in rows])
    for hh in hours:
        r = rows[int(np.argmin(np.abs(t - (hh % 24) * 3600.0)))]
        mine = " ".join(f"{ids[h]} {models[ids[h]]} {r['vnfs'][h]}"
                        + (f" ({r['drain_vnfs'][h]} draining)" if r["drain_vnfs"][h] else "")
                        for h in r["on"])
        out.append(f"{r['t'] / 3600:5.2f} h: policy {r['w']:.0f} W, {r['inst']} VNFs "
                   f"(ideal {r['inst_ideal']}): {mine}")
        for what, key, w in (("bound", "per_model", "w_bound"),
                             ("bound, policy's VNFs", "per_model_own", "w_own")):
            runs = " ".join(f"{m} {v[1]}" for m, v in sorted((r[key] or {}).items()) if v[0])
            out.append(f"         {what} {r[w]:.0f} W: {runs}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.energy.gap", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleet", default="heterogeneous", choices=fleetmod.KINDS)
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--policy", default="fluidvim-consolidate",
                    choices=[p for p in policies.NAMES if p != policies.BOUND])
    ap.add_argument("--every", type=int, default=10,
                    help="solve the bound every this many steps (1: every 30-s step)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--route", default="efficient", choices=sim.ROUTES,
                    help="session routing (bench.energy --route)")
    ap.add_argument("--split", action="store_true",
                    help="split the gap into routing and placement (a MILP per sampled step)")
    ap.add_argument("--at", type=float, nargs="+", default=[], metavar="HOUR",
                    help="also list, at these hours of the day (0-24), the policy's awake "
                         "hosts and VNFs against the bound's per server model")
    args = ap.parse_args(argv)
    if args.every < 1 or args.hosts < 1:
        ap.error("--every and --hosts must be >= 1")
    res = run(args.fleet, args.hosts, args.policy, args.every, args.seed, args.route,
              args.split)
    print(report(res))
    if args.at:
        print(hosts_at(res, args.at))
    return 0


if __name__ == "__main__":
    sys.exit(main())
