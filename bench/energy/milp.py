# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``milp``: the energy lower bound, a MILP per time step solved with HiGHS (``highspy``).

For each step the ideal run (``Simulator(policy=None)``: the same sessions and autoscaling rule,
every instance placed at once) gives N, the instances the services run, and B, the hardware
threads their sessions keep busy (sessions / slots). The MILP chooses how many hosts of each server
model are awake and how many instances and how much of the busy load each model carries:

    min  sum_m z_m
    s.t. sum_m n_m = N,  sum_m b_m = B,  0 <= b_m <= n_m,  n_m <= T_m * y_m,
         z_m >= a_k * b_m + c_k * y_m          for every segment k of model m's power curve
         y_m in {0..count_m}, n_m integer >= 0

(T_m: hardware threads of model m, one VNF per thread.) ``a_k * u + c_k`` are the segments of
the lower convex envelope of the model's 11 SPECpower points (u in busy threads), so
``y * f(b / y) = max_k(a_k b + c_k y)`` is exactly the power of y equal hosts sharing b, and
the envelope lies on or below the curve: the optimum is a true lower bound on the power of any
placement of N instances doing B threads of work on this fleet (an awake host still draws at least
its idle watts: the envelope passes through w_0). Hosts of one model are interchangeable, so
grouping them loses nothing. The bound ignores what any real policy pays: moves are free and
instant, hosts switch on and off instantly and for free, no hold time, no headroom of awake hosts.

With ``every`` > 1 steps are solved in windows for the componentwise minimum of (N, B) over the
window, still a lower bound (the optimum grows with N and B). When a solve stops at its time limit
the MILP's dual bound is used (a lower bound too) and the run says so.
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np


def lower_envelope(points, threads: float):
    """Segments (slope W per busy thread, intercept W) of the lower convex hull of the 11 points
    (0, 10, .., 100 % of ``threads``)."""
    xs = [threads * i / 10.0 for i in range(11)]
    pts = list(zip(xs, [float(p) for p in points]))
    hull: list = []
    for p in pts:
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            # keep the hull convex from below: drop hull[-1] if it lies above segment hull[-2]->p
            if (y2 - y1) * (p[0] - x1) >= (p[1] - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append(p)
    segs = []
    for (x1, y1), (x2, y2) in zip(hull, hull[1:]):
        a = (y2 - y1) / (x2 - x1)
        segs.append((a, y1 - a * x1))
    return segs


@contextlib.contextmanager
def _quiet():
    """HiGHS prints a banner on stdout when created; keep the bench's output clean."""
    fd = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(fd, 1)
        os.close(fd)


class Bound:
    """The per-step MILP for one fleet (built once; each solve changes two right-hand sides)."""

    def __init__(self, fleet, time_limit_s: float = 30.0, gap: float = 1e-4):
        import highspy

        groups: dict = {}
        for h, c in zip(fleet.hosts, fleet.curves):
            g = groups.setdefault(h.model, {"count": 0, "threads": h.cores, "points": c.points})
            g["count"] += 1
        self.groups = groups
        with _quiet():
            self.h = highspy.Highs()
        h = self.h
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", float(time_limit_s))
        h.setOptionValue("mip_rel_gap", float(gap))
        inf = highspy.kHighsInf
        self.cols = {}
        col = 0
        for m, g in groups.items():
            segs = lower_envelope(g["points"], g["threads"])
            y, n, b, z = col, col + 1, col + 2, col + 3
            h.addCol(0.0, 0.0, float(g["count"]), 0, [], [])          # y_m
            h.addCol(0.0, 0.0, inf, 0, [], [])                        # n_m
            h.addCol(0.0, 0.0, inf, 0, [], [])                        # b_m
            h.addCol(1.0, 0.0, inf, 0, [], [])                        # z_m (watts)
            h.changeColIntegrality(y, highspy.HighsVarType.kInteger)
            h.changeColIntegrality(n, highspy.HighsVarType.kInteger)
            col += 4
            self.cols[m] = (y, n, b, z)
            h.addRow(-inf, 0.0, 2, np.array([b, n], np.int32), np.array([1.0, -1.0]))
            h.addRow(-inf, 0.0, 2, np.array([n, y], np.int32),
                     np.array([1.0, -float(g["threads"])]))
            for a, c in segs:      # a*b + c*y - z <= 0
                h.addRow(-inf, 0.0, 3, np.array([b, y, z], np.int32), np.array([a, c, -1.0]))
        self.row_n = h.getNumRow()
        ys = [v[1] for v in self.cols.values()]
        h.addRow(0.0, 0.0, len(ys), np.array(ys, np.int32), np.ones(len(ys)))
        self.row_b = h.getNumRow()
        bs = [v[2] for v in self.cols.values()]
        h.addRow(0.0, 0.0, len(bs), np.array(bs, np.int32), np.ones(len(bs)))
        self.capacity = sum(g["count"] * g["threads"] for g in groups.values())

    def solve(self, instances: int, busy: float) -> dict:
        """The least power (W) for ``instances`` VNFs doing ``busy`` threads of work."""
        if instances > self.capacity:
            raise ValueError(f"{instances} instances do not fit the fleet's {self.capacity} "
                             f"threads; lower --peak-load")
        busy = min(float(busy), float(instances))
        h = self.h
        h.changeRowBounds(self.row_n, float(instances), float(instances))
        h.changeRowBounds(self.row_b, busy, busy)
        t = time.perf_counter()
        h.run()
        ms = (time.perf_counter() - t) * 1000.0
        info = h.getInfo()
        status = h.modelStatusToString(h.getModelStatus())
        sol = h.getSolution().col_value
        optimal = status == "Optimal"
        if optimal:
            watts = float(info.objective_function_value)
        else:
            watts = float(info.mip_dual_bound)
            if not np.isfinite(watts):
                raise RuntimeError(f"HiGHS found no bound for N={instances}, B={busy:.1f}: "
                                   f"{status}")
        awake = sum(round(sol[v[0]]) for v in self.cols.values()) if len(sol) else None
        per_model = {m: (round(sol[v[0]]), round(sol[v[1]])) for m, v in self.cols.items()} \
            if len(sol) else {}
        return {"watts": watts, "awake": awake, "ms": ms, "status": status,
                "optimal": optimal, "per_model": per_model}


def solve_trace(fleet, trace, step_s: float, every: int = 1, time_limit_s: float = 30.0,
                progress=None) -> dict:
    """The bound over an ideal run's trace [(t, instances[s], busy[s])]."""
    bound = Bound(fleet, time_limit_s=time_limit_s)
    watts, awake, ms, moves, not_optimal = [], [], [], 0, 0
    prev = None
    for k in range(0, len(trace), every):
        win = trace[k:k + every]
        n = min(sum(x[1]) for x in win)
        b = min(sum(x[2]) for x in win)
        r = bound.solve(n, b)
        watts.extend([r["watts"]] * len(win))
        awake.extend([r["awake"]] * len(win))
        ms.append(r["ms"])
        not_optimal += not r["optimal"]
        if prev is not None and r["per_model"]:
            grown = sum(max(0, r["per_model"][m][1] - prev[m][1]) for m in prev)
            moves += max(0, grown - max(0, n - sum(v[1] for v in prev.values())))
        prev = r["per_model"] or prev
        if progress is not None:
            progress(len(win))
    return {"w": watts, "awake": awake, "ms": ms, "moves": moves, "not_optimal": not_optimal,
            "kwh": sum(watts) * step_s / 3.6e6, "groups": len(bound.groups),
            "solves": len(ms)}
