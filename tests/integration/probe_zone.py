# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The local zone the evaluator's tests and bench probe: the orchestrator's real LocalZone.

It is extended here (test/bench only) with ``stats(instance_id)``, the VNF's own ``stats``: the
load probe records the VNF's processing-latency histogram next to the round trip when a zone
offers that (see fluidvim.evaluator.probes).
"""

from __future__ import annotations

from fluidvim.orchestrator.zones.local import LocalZone


class ProbeZone(LocalZone):
    def stats(self, instance_id: str) -> dict:
        return self.mgr.stats(instance_id)


def make_zone(name: str, mgr, **kw) -> ProbeZone:
    return ProbeZone(name, mgr, **kw)
