# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The policies bench/energy compares, by name, and how to build each."""

from __future__ import annotations

# nova-ratio1: Nova as NFV deployments configure it (no CPU overcommit; the default
# initial_cpu_allocation_ratio 4.0 puts four VNFs on a hardware thread, nova-default)
NAMES = ("nomad-binpack", "nomad-spread", "nova-default", "nova-ratio1", "fluidvim",
         "fluidvim-consolidate", "milp")
EXTRA: tuple = ()
OURS = ("fluidvim", "fluidvim-consolidate", "milp")
BASELINE = "nomad-binpack"
BOUND = "milp"


def make(name: str, *, measurement: dict, services, cfg, seed: int):
    """A Policy for ``name`` (``milp`` is not one: the simulator solves it as a bound)."""
    if name in ("nomad-binpack", "nomad-spread"):
        from .nomad_policy import NomadPolicy
        p = NomadPolicy(algorithm=name.split("-", 1)[1], seed=seed)
        p.name = name
        return p
    if name == "nova-default":
        from .nova_policy import NovaPolicy
        return NovaPolicy(name=name)
    if name == "nova-ratio1":
        from .nova_policy import NovaPolicy
        return NovaPolicy(conf_overrides={None: {"initial_cpu_allocation_ratio": 1.0}},
                          name=name)
    if name in ("fluidvim", "fluidvim-consolidate"):
        from .fluidvim_policy import FluidvimConsolidatePolicy, FluidvimPolicy
        cls = FluidvimConsolidatePolicy if name == "fluidvim-consolidate" else FluidvimPolicy
        route = getattr(cfg, "fluidvim_route", "efficient")
        return cls(measurement, services, launch_ms=cfg.launch_s * 1000.0,
                   launch_cpu_s=cfg.launch_cpu_s, boot_s=cfg.boot_s,
                   session_route=None if route == "shared" else route)
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(NAMES + EXTRA)}")


def available(name: str) -> str | None:
    """None when ``name`` can run here, else why not (and how to fix it)."""
    if name in ("nomad-binpack", "nomad-spread"):
        import shutil
        if shutil.which("go") is None:
            return "needs the Go toolchain (nomad_driver/cmd/schedsim runs Nomad's scheduler)"
        return None
    if name in ("nova-default", "nova-ratio1"):
        try:
            import nova  # noqa: F401
        except ImportError:
            return "needs nova (pip install -c constraints.txt -e .[nova])"
        return None
    if name == "milp":
        try:
            import highspy  # noqa: F401
        except ImportError:
            return "needs highspy (pip install -c constraints.txt -e .[test])"
        return None
    if name in NAMES + EXTRA:
        return None
    return f"unknown policy {name!r}; known: {', '.join(NAMES + EXTRA)}"
