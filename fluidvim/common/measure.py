# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Timing and summary statistics used across fluidvim, defined once (a leaf: standard library only).

* :func:`elapsed_ms` — milliseconds since a ``time.perf_counter()`` reading, rounded;
* :func:`quantile` — the q-quantile of samples, linear ("type 7", numpy's default) or nearest rank;
* :func:`median` — the median (mean of the two middle samples for an even count), the one the
  queuing delay is defined with (``contract/PROTOCOL.md`` §6) — the Go driver implements the same.
"""

from __future__ import annotations

import math
import time


def elapsed_ms(t0: float, digits: int = 3) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter()`` value), rounded to ``digits``.

    3 digits (microseconds) for launch phases and placement steps; the callers that report to
    people round coarser (the Nova driver 2, NS operations 1)."""
    return round((time.perf_counter() - t0) * 1000.0, digits)


def quantile(values, q: float, *, method: str = "linear"):
    """The ``q``-quantile (0 <= q <= 1) of ``values`` (any order); None when there are none.

    ``linear``: interpolated between the two samples around rank q·(n−1) (Hyndman & Fan type 7,
    numpy's and R's default): latency quantiles of a load step.
    ``nearest``: the sample at rank q·(n−1) rounded half up — always one of the samples: the
    p90 of launch times in tables, the min/p50/max of a probe's summary.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q!r} is not in [0, 1]")
    s = sorted(values)
    n = len(s)
    if n == 0:
        return None
    pos = (n - 1) * q
    if method == "nearest":
        return s[min(n - 1, int(math.floor(pos + 0.5)))]
    if method != "linear":
        raise ValueError(f"method {method!r} is not one of linear, nearest")
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(values):
    """The median of ``values`` (mean of the two middle ones for an even count); None if empty.

    The same as ``statistics.median`` and ``quantile(values, 0.5)``, without the exception on an
    empty list."""
    s = sorted(values)
    n = len(s)
    if n == 0:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
