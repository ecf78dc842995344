# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The contract between bench/energy's simulator and the schedulers it compares.

The simulator (bench/energy/sim.py) owns time, demand (sessions), power and the accounting. A
policy owns one decision: where a new VNF instance goes (and, on scale-in, which instance goes).
Every policy sees the same fleet and the same events; a host the simulator has powered off (or is
draining) is marked ineligible through ``set_eligible`` and takes no placement.

Adapters:
  nomad-binpack / nomad-spread  bench/energy/nomad_policy.py (Nomad's own scheduler, Go, in-process
                                 in nomad_driver/cmd/schedsim)
  nova-default                  bench/energy/nova_policy.py (Nova's filter scheduler, in-process)
  fluidvim / fluidvim-consolidate / milp
                                 bench/energy/sim.py (PlacementEngine; HiGHS)
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from fluidvim.common.measure import quantile


@dataclasses.dataclass(frozen=True)
class Host:
    """One server of the fleet, sized from its SPECpower row."""
    id: str
    model: str            # SPECpower library id (row of shared/data/specpower_curves.csv)
    cores: int            # hardware threads
    mhz: int              # per-core clock in MHz (Nomad's cpu shares = cores * mhz)
    memory_mb: int


@dataclasses.dataclass(frozen=True)
class Shape:
    """What one VNF instance of a service reserves (a Nomad task's resources, a Nova flavor)."""
    service: str
    vcpus: int
    cpu_mhz: int          # Nomad `resources { cpu }`
    memory_mb: int
    slots: int            # sessions one instance serves within its deadline (bench/evaluator)


@dataclasses.dataclass(frozen=True)
class Placement:
    instance: str         # the simulator's instance id
    host: str | None      # None = refused (no host fits): an SLO miss for its sessions


class Policy(Protocol):
    name: str

    def start(self, hosts: list[Host]) -> None:
        """A new run over this fleet; every host eligible, nothing placed."""

    def place(self, shape: Shape, instances: list[str]) -> list[Placement]:
        """Place new instances of one service (one scheduling request, like a job's count going
        up or one `openstack server create --min N`). Returns one Placement per instance."""

    def scale_in(self, service: str, n: int) -> list[str]:
        """Remove n instances of a service; the scheduler's own choice of which (returned).
        They drain sessions-first and keep their place on their hosts until ``gone``: a
        scheduler that frees it at once (Nomad's, whose scale-in stops the allocations) may
        put more VNFs on a host than it has threads while they drain."""

    def gone(self, instances: list[str]) -> None:
        """These scaled-in (or moved, ``rebalance``) instances have drained: free their place.
        Optional; a policy without it freed the place when it chose them."""

    def stop(self, instances: list[str]) -> None:
        """These instances are gone (moved by consolidation, or their host failed)."""

    def set_eligible(self, host: str, eligible: bool) -> None:
        """A host powered off or draining takes no placement; back on, it does."""

    def close(self) -> None:
        """Release what the policy holds (a subprocess, a database)."""


def decision_summary(ms: list, cpu: list) -> dict:
    """p50 and p95 (ms) of a policy's decision wall and CPU times, as the scheduler benches print."""
    return {"decision_ms_p50": round(quantile(ms, 0.5), 3),
            "decision_ms_p95": round(quantile(ms, 0.95, method="nearest"), 3),
            "decision_cpu_ms_p50": round(quantile(cpu, 0.5), 3),
            "decision_cpu_ms_p95": round(quantile(cpu, 0.95, method="nearest"), 3)}
