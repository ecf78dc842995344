# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``milp``: the energy lower bound, a MILP per time step solved with HiGHS (``highspy``).

For each step the ideal run (``Simulator(policy=None)``: the same sessions and autoscaling rule,
every instance placed at once) gives N, the instances the services run, and B, the hardware
threads their sessions keep busy (sessions / slots). A SPECpower curve is linear between its
11 points, so a host whose load lies in segment k (between k and k+1 tenths of its threads)
draws ``c_k + a_k * load``: an idle on-cost plus a linear dynamic term, exact on that segment.
The MILP chooses, per server model m and segment k, how many hosts run in that segment
(y_mk, integer) and the busy threads they carry together (L_mk), and the instances per model:

    min  sum_mk (c_k * y_mk + a_k * L_mk)
    s.t. lo_k * y_mk <= L_mk <= hi_k * y_mk          (each of those hosts within its segment)
         sum_k y_mk <= count_m,   sum_mk L_mk = B,   sum_k L_mk <= n_m <= T_m * sum_k y_mk,
         sum_m n_m = N,   y_mk, n_m integer >= 0

(T_m: hardware threads of model m; one VNF per thread, a VNF keeps at most one busy). Hosts of
one model in one segment are interchangeable (their power is linear in their shared load), so
this is exactly the least power of any placement of N instances doing B threads of work on the
true curves - an awake host draws at least its idle watts (segment 0 at no load). It ignores
what any real policy pays: moves are free and instant, hosts switch on and off instantly and
for free, no hold time, no headroom of awake hosts.

With ``every`` > 1 steps are solved in windows for the componentwise minimum of (N, B) over the
window, still a lower bound (the optimum grows with N and B). When a solve stops at its time limit
the MILP's dual bound is used (a lower bound too) and the run counts it (``not_optimal``); a
solved step reports the dual bound too (within ``gap``, 0.5 %, of the optimum, never above it).
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np


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

    def __init__(self, fleet, time_limit_s: float = 20.0, gap: float = 5e-3):
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
        integer = highspy.HighsVarType.kInteger
        self.cols = {}                        # model -> (n, [(y, L) per segment])
        col = 0

        def add(cost, lo, hi, is_int=False):
            nonlocal col
            h.addCol(float(cost), float(lo), float(hi), 0, [], [])
            if is_int:
                h.changeColIntegrality(col, integer)
            col += 1
            return col - 1

        def row(lo, hi, idx, val):
            h.addRow(lo, hi, len(idx), np.array(idx, np.int32), np.array(val, float))

        for m, g in groups.items():
            T, pts = float(g["threads"]), [float(p) for p in g["points"]]
            n = add(0.0, 0.0, T * g["count"], True)
            segs = []
            for k in range(10):
                lo, hi = T * k / 10.0, T * (k + 1) / 10.0
                a = (pts[k + 1] - pts[k]) / (hi - lo)           # W per busy thread
                c = pts[k] - a * lo                              # W of a host in segment k
                y = add(c, 0.0, g["count"], True)
                L = add(a, 0.0, inf)
                row(0.0, inf, [L, y], [1.0, -lo])               # L >= lo * y
                row(-inf, 0.0, [L, y], [1.0, -hi])              # L <= hi * y
                segs.append((y, L))
            ys, Ls = [y for y, _ in segs], [L for _, L in segs]
            row(-inf, float(g["count"]), ys, [1.0] * len(ys))    # hosts of the model
            row(-inf, 0.0, [n] + ys, [1.0] + [-T] * len(ys))     # n <= T * awake
            row(-inf, 0.0, Ls + [n], [1.0] * len(Ls) + [-1.0])   # busy <= instances
            self.cols[m] = (n, segs)
        self.row_n = h.getNumRow()
        row(0.0, 0.0, [v[0] for v in self.cols.values()], [1.0] * len(self.cols))
        self.row_b = h.getNumRow()
        row(0.0, 0.0, [L for v in self.cols.values() for _, L in v[1]],
            [1.0] * (10 * len(self.cols)))
        self.capacity = sum(g["count"] * g["threads"] for g in groups.values())

    def _run(self) -> str:
        """Solve; when the time limit (wall clock) stopped HiGHS before it had any bound, once
        more with twice the limit. Why: a process stopped mid-solve (SIGSTOP around a quiet
        bench run) spends the limit asleep; the 1,000-host day of 2026-11-29 03:39 died so
        after 1,933 of 3,240 steps."""
        h = self.h
        h.run()
        status = h.modelStatusToString(h.getModelStatus())
        if status == "Time limit reached" and not np.isfinite(h.getInfo().mip_dual_bound):
            limit = h.getOptionValue("time_limit")[1]
            h.setOptionValue("time_limit", 2.0 * limit)
            try:
                h.run()
            finally:
                h.setOptionValue("time_limit", limit)
            status = h.modelStatusToString(h.getModelStatus())
        return status

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
        status = self._run()
        ms = (time.perf_counter() - t) * 1000.0
        info = h.getInfo()
        sol = h.getSolution().col_value
        optimal = status == "Optimal"
        # the dual bound: at most the optimum (within mip_rel_gap of it when solved, whatever
        # the search reached when the time limit stopped it)
        watts = float(info.mip_dual_bound)
        if not np.isfinite(watts):
            if not optimal:
                raise RuntimeError(f"HiGHS found no bound for N={instances}, B={busy:.1f}: "
                                   f"{status}")
            watts = float(info.objective_function_value)
        per_model = {}
        if len(sol):
            for m, (n, segs) in self.cols.items():
                per_model[m] = (sum(round(sol[y]) for y, _ in segs), round(sol[n]))
        awake = sum(v[0] for v in per_model.values()) if per_model else None
        return {"watts": watts, "awake": awake, "ms": ms, "status": status,
                "optimal": optimal, "per_model": per_model}


def solve_trace(fleet, trace, step_s: float, every: int = 1, time_limit_s: float = 20.0,
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
