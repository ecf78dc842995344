# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Slot samples and the demand trend read from them: what the NS scaler (``mano.scaling``) and the
host power loop (``hostpower``, ``power.fleet``) both forecast from, so it sits in the core layer
below both."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Sample:
    t: float                # time.time() of the reading
    free: int               # free slots of the aspect's instances
    total: int              # their slots in all

    @property
    def used(self) -> int:
        return max(0, self.total - self.free)


def demand_rate(history: list[Sample], now: float, window_s: float) -> float:
    """Growth of the used slots (sessions/s) over the last ``window_s``: the least-squares slope of
    used(t), never negative (sessions ending are not demand)."""
    pts = [s for s in history if now - s.t <= window_s]
    if len(pts) < 2:
        return 0.0
    n = len(pts)
    mt = sum(s.t for s in pts) / n
    mu = sum(s.used for s in pts) / n
    var = sum((s.t - mt) ** 2 for s in pts)
    if var <= 0:
        return 0.0
    slope = sum((s.t - mt) * (s.used - mu) for s in pts) / var
    return max(0.0, slope)
