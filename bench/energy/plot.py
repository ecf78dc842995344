# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/energy's figure: per fleet, watts over the day per policy, awake hosts, SLO misses."""

from __future__ import annotations

COLORS = {"nomad-binpack": "tab:blue", "nomad-spread": "tab:cyan", "nova-default": "tab:red",
          "nova-ratio1": "tab:purple",
          "fluidvim": "tab:orange", "fluidvim-consolidate": "tab:green", "milp": "black"}


def plot(result: dict, path, size: str | None = None) -> None:
    """``result``: what bench/energy writes (``runs`` with downsampled ``series``); one row per
    fleet kind at ``size`` hosts (default: the size that ran the most policies)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    kinds = [k for k in ("heterogeneous", "homogeneous") if k in runs]
    if size is None:            # the size that ran the most policies, the largest of those
        common = set.intersection(*(set(runs[k]) for k in kinds)) if kinds else set()

        def ran(n):
            return sum(1 for k in kinds for p in runs[k][n].get("policies", {}).values()
                       if p.get("series"))
        size = max(common, key=lambda n: (ran(n), int(n))) if common else None
    if size is None:
        raise ValueError("nothing to plot: no fleet size ran for every fleet kind")
    fig, axes = plt.subplots(len(kinds), 3, figsize=(16, 4.2 * len(kinds)), squeeze=False)
    for row, kind in enumerate(kinds):
        run = runs[kind][str(size)]
        for name, pol in run["policies"].items():
            ser = pol.get("series")
            if not ser:
                continue
            day = run.get("day_s", 86400.0)
            hours = [24.0 * t / day for t in ser["t"]]
            kw = dict(label=name, color=COLORS.get(name), linewidth=1.2,
                      linestyle="--" if name == "milp" else "-")
            axes[row][0].plot(hours, [w / 1000.0 for w in ser["w"]], **kw)
            axes[row][1].plot(hours, ser["awake"], **kw)
            if name != "milp":
                axes[row][2].plot(hours, ser["misses"], **kw)
        fl = run["fleet"]
        title = (f"{kind}, {fl['hosts']} hosts ({fl['models']} model"
                 f"{'s' if fl['models'] != 1 else ''}, {fl['threads']} threads)")
        axes[row][0].set_ylabel("fleet power (kW)")
        axes[row][1].set_ylabel("awake hosts")
        axes[row][2].set_ylabel(f"SLO misses per {run['series_every_s'] / 60:g} min")
        axes[row][2].set_yscale("symlog", linthresh=10)
        for c in range(3):
            axes[row][c].set_xlabel("hour of the day" + (
                "" if run.get("day_s", 86400.0) == 86400.0
                else f" (a day compressed into {run['day_s'] / 3600:g} h)"))
            axes[row][c].set_title(title, fontsize=9)
            axes[row][c].grid(alpha=0.3)
            axes[row][c].set_xlim(0, 24)
        axes[row][0].legend(fontsize=8)
    fig.suptitle("bench/energy: one day of sessions, every policy, same fleet, same rules")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
