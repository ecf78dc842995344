# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A zone that describes a fleet without running it: for fleet simulations, benchmarks of the
decision (``bench/placement.py``: 10 to 1,000 hosts) and dry runs.

Hosts, environment types, slots, utilisation and launch times are data. ``launch`` refuses with a
clear ZoneError (nothing can run here), so the zone is never mistaken for a real one; it reports
that it cannot launch on demand unless ``launch_ms`` history is given (queuing delay from data).
"""

from __future__ import annotations

from fluidvim.common import zonetypes
from fluidvim.common.zonetypes import HostInfo, InstanceInfo, LaunchRequest, ZoneAdapter, ZoneError


class SyntheticZone(ZoneAdapter):
    kind = zonetypes.SYNTHETIC

    def __init__(self, name: str, hosts: list[HostInfo], region: str = "default",
                 launch_ms: list[float] | None = None):
        super().__init__(name, region)
        self._hosts = list(hosts)
        self._launch_ms = list(launch_ms or [])

    def hosts(self) -> list[HostInfo]:
        return list(self._hosts)

    def instances(self) -> list[InstanceInfo]:
        return []

    def can_launch_on_demand(self, service: str) -> bool:
        return bool(self._launch_ms)

    def cannot_launch_reason(self, service: str) -> str:
        return "synthetic zone without launch history"

    def launch(self, req: LaunchRequest) -> InstanceInfo:
        raise ZoneError(f"zone {self.name} is synthetic (a described fleet): it cannot launch "
                        f"{req.service}; use a local, nova or nomad zone")

    def terminate(self, instance_id: str) -> None:
        return None

    def launch_times_ms(self, service: str | None = None, limit: int = 20) -> list[float]:
        return self._launch_ms[:limit]


CPU_MODELS = ("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "AMD EPYC 7763 64-Core Processor",
              "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", "Ampere Altra Q80-30")


def make_fleet(n_hosts: int, n_zones: int, n_env_types: int = 4, seed: int = 1,
               launch_ms: float = 60.0):
    """``n_hosts`` hosts spread over ``n_zones`` synthetic zones with ``n_env_types`` environment
    types (deterministic for a seed); each host has a real server's power curve
    (``power_system_id``) and, for simple models, ``idle_w``/``max_w`` labels. Returns (zones,
    {env uid: (EnvironmentType, capacity_pps, boot_ms)}, zone labels {zone: {"price_per_hour",
    "location"}})."""
    import random

    from fluidvim.evaluator.model import EnvironmentType
    from fluidvim.orchestrator.power import library

    rnd = random.Random(seed)
    curves = library().ids()              # real SPECpower_ssj2008 servers (orchestrator/data)
    types = []
    for i in range(n_env_types):
        env = EnvironmentType(launcher="qemu" if i % 2 == 0 else "libvirt",
                              accel="kvm" if i % 3 else "tcg",
                              machine="microvm" if i % 2 == 0 else "pc",
                              cpu_model=CPU_MODELS[i % len(CPU_MODELS)],
                              extra=(("gen", str(i)),))
        types.append((env, 20000.0 * (1 + i % 3) * (0.5 if env.accel == "tcg" else 1.0),
                      60.0 if env.machine == "microvm" else 450.0))
    per_zone: list[list[HostInfo]] = [[] for _ in range(n_zones)]
    for h in range(n_hosts):
        z = h % n_zones
        env, _, _ = types[(h // n_zones + z) % n_env_types]
        total = 1024
        used = rnd.randrange(0, total)
        per_zone[z].append(HostInfo(name=f"h{h:05d}", env=env, slots_total=total,
                                    slots_free=total - used, cpu_util=round(rnd.random(), 3),
                                    power_system_id=curves[rnd.randrange(len(curves))],
                                    labels={"idle_w": 80.0 + 20 * (h % 5),
                                            "max_w": 300.0 + 50 * (h % 4)}))
    zones = [SyntheticZone(f"z{z:03d}", hosts, region=f"r{z % 3}",
                           launch_ms=[launch_ms * (1 + z % 4)])
             for z, hosts in enumerate(per_zone)]
    labels = {z.name: {"price_per_hour": round(0.02 + 0.01 * (i % 7), 3),
                       "location": f"loc{i % 5}"} for i, z in enumerate(zones)}
    return zones, {env.uid: (env, cap, boot) for env, cap, boot in types}, labels


def synthetic_probe_results(env_uid: str, zone: str, capacity_pps: float, boot_ms: float,
                            session_pps: float = 100.0, valid_for_s: float = 86400.0):
    """A load result (latency grows as the load nears ``capacity_pps``) and a boot result with
    the shapes the evaluator's probes produce, for seeding a probe cache."""
    from fluidvim.evaluator.model import BOOT, LOAD, ProbeResult

    steps = []
    for frac in (0.05, 0.25, 0.5, 0.75, 0.9, 1.0, 1.2):
        pps = capacity_pps * frac
        base = 0.05 / max(0.05, 1.0 - min(frac, 0.99))        # ms, rising near saturation
        steps.append({"offered_pps": pps, "sessions": int(pps / session_pps),
                      "loss": 0.0 if frac <= 1.0 else 0.2,
                      "latency_ms": {"0.5": base, "0.9": base * 2, "0.99": base * 4,
                                     "0.999": base * 8}})
    load = ProbeResult(env_uid=env_uid, kind=LOAD, ok=True, zone=zone, valid_for_s=valid_for_s,
                       metrics={"steps": steps, "session_pps": session_pps,
                                "max_sessions": 65536})
    summ = {"p50": boot_ms, "p90": boot_ms * 1.1, "min": boot_ms * 0.9, "n": 3}
    boot = ProbeResult(env_uid=env_uid, kind=BOOT, ok=True, zone=zone, valid_for_s=valid_for_s,
                       metrics={"cold_ms": summ, "cold_zone_ms": summ, "warm": False,
                                "warm_ms": {}, "warm_zone_ms": {}, "launched": 3,
                                "leaked": []})
    return load, boot


def seed_cache(cache, zones, types: dict) -> int:
    """Put a valid boot result per (type, zone) and a load result per type into ``cache``."""
    n = 0
    seen = set()
    for z in zones:
        for uid in {h.env.uid for h in z.hosts()}:
            _, cap, boot_ms = types[uid]
            load, boot = synthetic_probe_results(uid, z.name, cap, boot_ms)
            cache.put(boot)
            n += 1
            if uid not in seen:
                cache.put(load)
                seen.add(uid)
                n += 1
    return n
