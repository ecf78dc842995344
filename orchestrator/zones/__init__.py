# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Zone adapters: local (the launch core), nova (openstacksdk), nomad (python-nomad)."""

from __future__ import annotations

from fluidvim.common import zonetypes


def parse_zone_spec(spec: str) -> tuple[str, str, dict]:
    """``KIND:NAME[:KEY=VALUE,...]`` -> (kind, name, options); ValueError names the mistake."""
    parts = spec.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError(f"[orchestrator] zones {spec!r}: expected KIND:NAME[:KEY=VALUE,...]")
    kind, name = parts[0].strip(), parts[1].strip()
    opts = {}
    for item in (parts[2].split(",") if len(parts) == 3 and parts[2] else []):
        if "=" not in item:
            raise ValueError(f"[orchestrator] zones {spec!r}: {item!r} is not KEY=VALUE")
        k, v = item.split("=", 1)
        opts[k.strip()] = v.strip()
    if kind not in zonetypes.CONFIGURED_KINDS:
        raise ValueError(f"[orchestrator] zones {spec!r}: kind must be nova or nomad "
                         "(the local zone is [orchestrator] local_zone)")
    return kind, name, opts


def build_zones(specs, region: str = "default") -> list:
    """Zone adapters for ``[orchestrator] zones``."""
    zones = []
    for spec in specs:
        kind, name, opts = parse_zone_spec(spec)
        try:
            if kind == zonetypes.NOMAD:
                from .nomad import NomadZone
                zones.append(NomadZone(name, region=region, **opts))
            else:
                import openstack  # lazy: openstacksdk is a slow import, only Nova zones need it

                from .nova import NovaZone
                cloud = opts.pop("cloud", None)
                conn = openstack.connect(cloud=cloud) if cloud else openstack.connect()
                zones.append(NovaZone(name, conn, region=region, **opts))
        except TypeError as e:
            raise ValueError(f"[orchestrator] zones {spec!r}: {e}") from None
    return zones
