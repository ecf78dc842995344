# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Power models: the PowerSource interface, the linear model, SPECpower_ssj2008 curves and their
library.

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture); every
name is importable from there too.
"""

from __future__ import annotations

import abc
import csv
import functools
import importlib.resources
import math

LOAD_POINTS = tuple(range(0, 101, 10))          # SPECpower target loads, percent
CURVE_COLUMNS = tuple(f"w_{p}" for p in LOAD_POINTS)
SOURCES = ("rapl", "redfish", "specpower", "linear")


class PowerError(Exception):
    """A power source cannot be used or a value is invalid; the message says what and how to fix it."""


def _check_u(u: float, what: str = "u") -> float:
    try:
        u = float(u)
    except (TypeError, ValueError):
        raise PowerError(f"{what} must be a number in 0..1, not {u!r}") from None
    if math.isnan(u) or u < 0.0 or u > 1.0:
        raise PowerError(f"{what} must be in 0..1 (CPU utilisation as a fraction), not {u!r}")
    return u


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------

class PowerSource(abc.ABC):
    """One way of knowing a host's power. ``watts(u)`` always works once constructed."""

    source: str = "abstract"

    @abc.abstractmethod
    def watts(self, u: float) -> float:
        """Power (W) at CPU utilisation ``u`` in 0..1."""

    def measured_watts(self) -> float | None:
        """A fresh measurement (W), or None for pure models."""
        return None

    def describe(self) -> str:
        return self.source


class LinearModel(PowerSource):
    """``P_idle + (P_max - P_idle) * u``."""

    source = "linear"

    def __init__(self, idle_w: float, max_w: float):
        if idle_w is None or max_w is None:
            raise PowerError("linear power model needs [power] idle_watts and max_watts")
        idle_w, max_w = float(idle_w), float(max_w)
        if idle_w < 0 or max_w < idle_w:
            raise PowerError(f"linear power model: need 0 <= idle_watts <= max_watts, got "
                             f"idle_watts={idle_w} max_watts={max_w}")
        self.idle_w, self.max_w = idle_w, max_w

    def watts(self, u: float) -> float:
        u = _check_u(u)
        return self.idle_w + (self.max_w - self.idle_w) * u

    def describe(self) -> str:
        return f"linear {self.idle_w:g}-{self.max_w:g} W"


class SpecpowerCurve(PowerSource):
    """An 11-point curve (watts at 0, 10, …, 100 % load), linearly interpolated."""

    source = "specpower"

    def __init__(self, points, system_id: str | None = None, info: dict | None = None):
        try:
            pts = [float(p) for p in points]
        except (TypeError, ValueError):
            raise PowerError(f"specpower curve: points must be 11 numbers (watts at 0,10,..,100 % "
                             f"load), got {points!r}") from None
        if len(pts) != len(LOAD_POINTS):
            raise PowerError(f"specpower curve: need 11 points (watts at 0,10,..,100 % load), "
                             f"got {len(pts)}")
        if any(p < 0 or math.isnan(p) for p in pts):
            raise PowerError(f"specpower curve: watts must be >= 0, got {pts}")
        self.points = tuple(pts)
        self.system_id = system_id
        self.info = info or {}

    @property
    def idle_w(self) -> float:
        return self.points[0]

    @property
    def max_w(self) -> float:
        return self.points[-1]

    def watts(self, u: float) -> float:
        u = _check_u(u)
        x = u * 10.0
        i = min(int(x), 9)
        frac = x - i
        return self.points[i] + (self.points[i + 1] - self.points[i]) * frac

    def describe(self) -> str:
        return f"specpower {self.system_id or 'custom'} {self.idle_w:g}-{self.max_w:g} W"


class SpecpowerLibrary:
    """The curves of a CSV with the columns of ``data/specpower_curves.csv`` (by ``system_id``)."""

    def __init__(self, path: str | None = None):
        self.path = path or default_csv_path()
        try:
            with open(self.path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                missing = [c for c in ("system_id", *CURVE_COLUMNS) if c not in (reader.fieldnames or [])]
                if missing:
                    raise PowerError(f"{self.path}: not a power-curve CSV, missing columns {missing}")
                self.rows = {r["system_id"]: r for r in reader}
        except OSError as e:
            raise PowerError(f"cannot read the power-curve CSV ([power] specpower_csv): {e}") from None

    def __len__(self) -> int:
        return len(self.rows)

    def ids(self) -> list[str]:
        return sorted(self.rows)

    def curve(self, system_id: str) -> SpecpowerCurve:
        row = self.rows.get(system_id)
        if row is None:
            raise PowerError(f"system_id {system_id!r} is not in {self.path} "
                             f"({len(self.rows)} systems, e.g. {', '.join(self.ids()[:3])})")
        info = {k: v for k, v in row.items() if k not in CURVE_COLUMNS}
        return SpecpowerCurve([row[c] for c in CURVE_COLUMNS], system_id=system_id, info=info)


def default_csv_path() -> str:
    return str(importlib.resources.files("fluidvim.orchestrator") / "data" / "specpower_curves.csv")


@functools.lru_cache(maxsize=4)
def library(path: str | None = None) -> SpecpowerLibrary:
    """The (cached) curve library; ``None`` = the packaged CSV."""
    return SpecpowerLibrary(path)
