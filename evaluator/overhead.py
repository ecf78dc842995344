# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""FUSION's evaluator overhead model, as functions.

Stage 1 (probes) costs resources; stage 2 (analyzers) is a computation over cached numbers and
costs next to nothing. With

* ``N1`` - the number of stage-1 probes run,
* ``E1`` - the effort of one probe relative to the resources the service's instances consume
  (e.g. 1/10,000: a probe of a few seconds against instances that run for hours),
* ``I_A`` - instances placed with the help of one round of probe results (amortisation),
* ``S1`` - services that share the same probe results (one load curve serves every service),

the relative stage-1 overhead is ``R1 = N1 * E1 / (I_A * S1)``, its cost ``C1 = rho1 * R1`` with
``rho1`` the cost of the service's resources, and ``C2 ~ 0``. Solving for ``N1`` gives the
break-even number of probes for a tolerated overhead.

How many probes: one per globally unique environment type, and at least one per zone, so
``N ~ max(|V_u|, |Z|)``. Exactly, it is the size of a *minimum edge cover* of the bipartite graph
"zone offers type": every type and every zone must be covered by at least one (type, zone) probe,
and a probe covers one of each. Its size is ``|V_u| + |Z| - M`` with ``M`` a maximum matching
(Gallai), which equals ``max(|V_u|, |Z|)`` whenever a matching can saturate the smaller side
(for instance when every zone offers every type) and is larger otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not value > 0 or math.isinf(value):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def relative_overhead(n1: float, e1: float, i_a: float, s1: float = 1.0) -> float:
    """R1 = N1 * E1 / (I_A * S1): stage-1 overhead relative to the service's resource use."""
    if n1 < 0:
        raise ValueError(f"n1 (number of probes) must be >= 0, got {n1!r}")
    return float(n1) * _positive("e1", e1) / (_positive("i_a", i_a) * _positive("s1", s1))


def stage1_cost(r1: float, rho1: float) -> float:
    """C1 = rho1 * R1 (rho1 = cost of the resources the service uses, in any currency/unit)."""
    if r1 < 0 or rho1 < 0:
        raise ValueError(f"r1 and rho1 must be >= 0, got r1={r1!r}, rho1={rho1!r}")
    return float(rho1) * float(r1)


def stage2_cost() -> float:
    """C2 ~ 0: stage 2 only combines cached numbers (microseconds of CPU per placement)."""
    return 0.0


def break_even_probes(r1: float, e1: float, i_a: float, s1: float = 1.0) -> float:
    """The N1 at which the overhead reaches ``r1``: N1 = R1 * I_A * S1 / E1."""
    return _positive("r1", r1) * _positive("i_a", i_a) * _positive("s1", s1) / _positive("e1", e1)


def _max_matching(adj: Mapping[str, set]) -> dict:
    """Maximum bipartite matching (Kuhn's augmenting paths, iterative): left -> right."""
    match_right: dict = {}
    order = {u: sorted(vs) for u, vs in adj.items()}
    for root in sorted(adj):
        seen: set = set()
        stack = [(root, iter(order[root]))]     # DFS over alternating paths
        path: list = []                         # right vertices taken on the way down
        while stack:
            u, it = stack[-1]
            for v in it:
                if v in seen:
                    continue
                seen.add(v)
                if v not in match_right:
                    path.append(v)
                    for (uu, _), vv in zip(stack, path):   # flip the path
                        match_right[vv] = uu
                    stack = []
                    break
                path.append(v)
                stack.append((match_right[v], iter(order[match_right[v]])))
                break
            else:
                stack.pop()
                if path:
                    path.pop()
    return {u: v for v, u in match_right.items()}


def probe_plan(env_uids_per_zone: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
    """A minimum set of (env uid, zone) probes covering every unique type and every zone.

    Zones that offer no environment type cannot be probed and are left out. Deterministic: the
    same input gives the same plan (sorted names), so repeated placements probe the same places.
    """
    zones = {z: set(u) for z, u in env_uids_per_zone.items() if u}
    if not zones:
        return []
    types: dict[str, set] = {}
    for z, uids in zones.items():
        for u in uids:
            types.setdefault(u, set()).add(z)
    matching = _max_matching(types)              # type -> zone
    plan = set(matching.items())
    covered_zones = set(matching.values())
    for u in sorted(types):                      # unmatched types: any zone that has them
        if u not in matching:
            plan.add((u, sorted(types[u])[0]))
    for z in sorted(zones):                      # unmatched zones: any type they have
        if z not in covered_zones:
            plan.add((sorted(zones[z])[0], z))
    return sorted(plan, key=lambda p: (p[1], p[0]))


def probes_needed(env_uids_per_zone: Mapping[str, Iterable[str]]) -> int:
    """N = the exact number of stage-1 probes: one per globally unique type, at least one per zone.

    ``env_uids_per_zone`` maps zone name -> the uids of the environment types it offers. The
    result is the minimum edge cover ``|V_u| + |Z| - M`` (see the module docstring), i.e.
    ``max(|V_u|, |Z|)`` when a matching can saturate the smaller side.
    """
    return len(probe_plan(env_uids_per_zone))
