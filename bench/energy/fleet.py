# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Fleets of real servers: hosts drawn (seeded) from the SPECpower_ssj2008 library.

* ``heterogeneous``  each host an independent draw (with replacement) from the whole library
                     (499 published systems, 2004-2022): a mixed-generation data centre;
* ``homogeneous``    every host one model: by default the library's median two-socket server
                     of 2019 or later by idle watts per hardware thread (``HOMOGENEOUS_RULE``),
                     so "pick the newest server" cannot be the whole win.

A host's capacity is its hardware threads (SPECpower's ``threads``): one VNF (1 vCPU) reserves one
thread under every scheduler. Nomad sizes CPU in MHz (cores x MHz); every host gets the same
nominal ``MHZ`` per thread and a VNF asks for ``MHZ``, so Nomad fits exactly ``threads`` VNFs on a
host as the others do (the library has no clock for most systems).
"""

from __future__ import annotations

import dataclasses
import random

from fluidvim.orchestrator.power import SpecpowerCurve, library

from .policy import Host

KINDS = ("heterogeneous", "homogeneous")
MHZ = 2000
HOMOGENEOUS_RULE = ("the median, by idle watts per hardware thread (w_0 / threads), of the "
                    "library's two-socket systems available 2019 or later")


@dataclasses.dataclass(frozen=True)
class Fleet:
    kind: str
    hosts: tuple[Host, ...]
    curves: tuple[SpecpowerCurve, ...]      # one per host, same order

    def __len__(self) -> int:
        return len(self.hosts)

    @property
    def threads(self) -> int:
        return sum(h.cores for h in self.hosts)

    def describe(self) -> dict:
        models = sorted({h.model for h in self.hosts})
        return {"kind": self.kind, "hosts": len(self.hosts), "threads": self.threads,
                "models": len(models),
                "idle_w_total": round(sum(c.idle_w for c in self.curves), 1),
                "max_w_total": round(sum(c.max_w for c in self.curves), 1),
                **({"model": models[0], "rule": HOMOGENEOUS_RULE} if self.kind == "homogeneous"
                   else {})}


def homogeneous_model(lib=None) -> str:
    lib = lib or library()
    rows = [r for r in lib.rows.values()
            if _year(r) >= 2019 and str(r.get("chips")) == "2" and _threads(r) > 0]
    if not rows:
        raise ValueError("the SPECpower library has no two-socket system of 2019 or later; "
                         "name one with --model SYSTEM_ID")
    rows.sort(key=lambda r: (float(r["w_0"]) / _threads(r), r["system_id"]))
    return rows[len(rows) // 2]["system_id"]


def make_fleet(kind: str, n: int, seed: int, model: str | None = None, lib=None) -> Fleet:
    """``n`` hosts of ``kind`` (seeded). ``model``: the homogeneous fleet's system_id."""
    if kind not in KINDS:
        raise ValueError(f"fleet kind {kind!r}: use one of {', '.join(KINDS)}")
    if n < 1:
        raise ValueError(f"fleet size {n}: need at least one host")
    lib = lib or library()
    if kind == "homogeneous":
        sid = model or homogeneous_model(lib)
        lib.curve(sid)                         # a clear error for an unknown system_id
        ids = [sid] * n
    else:
        rng = random.Random(f"fleet-{seed}")
        pool = lib.ids()
        ids = [rng.choice(pool) for _ in range(n)]
    hosts, curves = [], []
    width = len(str(n - 1))
    for i, sid in enumerate(ids):
        row = lib.rows[sid]
        threads = _threads(row)
        if threads < 1:
            raise ValueError(f"SPECpower system {sid} has no hardware threads in the library")
        mem = int(float(row.get("mem_gb") or 0) * 1024)
        hosts.append(Host(id=f"h{i:0{width}d}", model=sid, cores=threads, mhz=MHZ,
                          memory_mb=mem))
        curves.append(lib.curve(sid))
    return Fleet(kind, tuple(hosts), tuple(curves))


def _threads(row) -> int:
    try:
        return int(float(row.get("threads") or 0))
    except ValueError:
        return 0


def _year(row) -> int:
    try:
        return int(str(row.get("hw_available", ""))[-4:])
    except ValueError:
        return 0
