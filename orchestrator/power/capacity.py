# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The latency controller's capacity of a VNF (packets/s at its flavor's quota) and where it came
from (:mod:`.controller`, ``capacity_pps`` of its ``step``), for :mod:`.exporter`.

The first source that gives one wins, and its name is kept with the controller's decision
(``capacity_source``, shown by ``fluidvim vnf stats``):

``option``  ``[metrics] vnf_capacity_pps``, VNF name or service → pps (the operator's);
``qoe``     the VNF's own QoE capacity in sessions (``stats`` → ``slots.qoe.probed``, the stage-1
            capacity it was told with ``qoe``; else its launch's ``spec.qoe.capacity``) × its
            service's ``session_pps`` (the orchestrator's service record);
``probe``   the stage-1 load probe cached for this host's environment type (the orchestrator's
            ``hosts`` row of ``[metrics] zone`` and ``host``; :class:`~fluidvim.evaluator.cache.
            ProbeCache`), at the service's deadline and quantile
            (:func:`~fluidvim.evaluator.slots.estimate_capacity`);
``None``    none of these: the controller's need rule decides, as without a capacity.

Only the option is known on the host itself: a session's packet rate, the service's deadline and
the probe cache live in the orchestrator's database, which the exporter reads only when
``[metrics] orchestrator_connection`` names it (read-only; its tables are read by name here, as
:mod:`fluidvim.orchestrator.db` defines them: this package may not import that module).
"""

from __future__ import annotations

import json
import os
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

REFRESH_S = 60.0                     # a VNF's capacity from the database is read again after


class OrchestratorView:
    """What the exporter may read of the orchestrator's database (``url``): a service's profile
    and the load probe cached for the environment type of host ``host`` of zone ``zone``.
    Raises on construction when the database cannot be reached (a SQLite file that does not
    exist on this host is not created)."""

    def __init__(self, url: str, zone: str, host: str):
        import sqlalchemy as sa

        from fluidvim.common.sql import make_engine
        if url.startswith("sqlite:///") and not os.path.exists(url[len("sqlite:///"):]):
            raise OSError(f"no such database file on this host: {url}")
        self.engine = make_engine(url)
        names = set(sa.inspect(self.engine).get_table_names())
        missing = {"services", "hosts"} - names
        if missing:
            self.engine.dispose()
            raise OSError(f"{url} is not the orchestrator's database (no {', '.join(missing)})")
        self.probes = None
        if "evaluator_probe_results" in names:
            from fluidvim.evaluator.cache import ProbeCache
            self.probes = ProbeCache(self.engine)
        self.zone, self.host, self.sa = zone, host, sa

    def profile(self, service: str) -> dict | None:
        with self.engine.connect() as c:
            row = c.execute(self.sa.text("SELECT profile_json FROM services WHERE name = :n"),
                            {"n": service}).first()
        return None if row is None else json.loads(row[0])

    def load_probe(self):
        """This host's environment type's valid load probe result, or (None, why)."""
        from fluidvim.evaluator.model import LOAD
        if self.probes is None:
            return None, "no probe cache in the orchestrator's database"
        with self.engine.connect() as c:
            row = c.execute(self.sa.text("SELECT env_uid FROM hosts WHERE zone = :z AND "
                                         "name = :h"), {"z": self.zone, "h": self.host}).first()
        if row is None:
            return None, f"host {self.host} of zone {self.zone} not in the orchestrator's hosts"
        r = self.probes.get_valid(row[0], LOAD)
        return (r, "") if r is not None else (None, f"no valid load probe of {row[0]}")

    def close(self) -> None:
        self.engine.dispose()


class Capacities:
    """``(name, service, spec, stats) -> (pps or None, source or None, why)`` (module doc);
    ``view``: an :class:`OrchestratorView`, or the reason there is none (a str)."""

    def __init__(self, configured: dict, view=None):
        self.configured, self.view = configured, view
        self._cache: dict = {}               # VNF name -> (at, qoe sessions, result)

    def __call__(self, name: str, service: str, spec, stats: dict | None):
        pps = self.configured.get(name, self.configured.get(service))
        if pps is not None:
            return pps, "option", "[metrics] vnf_capacity_pps"
        sessions = qoe_sessions(spec, stats)
        hit = self._cache.get(name)
        if hit is not None and hit[1] == sessions and time.monotonic() - hit[0] < REFRESH_S:
            return hit[2]
        out = self._from_view(service, sessions)
        self._cache[name] = (time.monotonic(), sessions, out)
        return out

    def _from_view(self, service: str, sessions: int | None):
        if isinstance(self.view, str) or self.view is None:
            return None, None, self.view or "the orchestrator's database is not configured"
        try:
            prof = self.view.profile(service) if service else None
            if prof is None:
                return None, None, f"service {service!r} not in the orchestrator's database"
            spp = float(prof.get("session_pps") or 0)
            if sessions is not None and spp > 0:
                return sessions * spp, "qoe", f"{sessions} QoE sessions x {spp:g} pps"
            return self._probe(prof)
        except Exception as e:   # noqa: BLE001 - a database that went away: not known now
            LOG.warning("capacity of service %s: orchestrator's database: %s", service, e)
            return None, None, f"orchestrator's database: {e}"

    def _probe(self, prof: dict):
        from fluidvim.evaluator.slots import SlotsError, estimate_capacity
        r, why = self.view.load_probe()
        if r is None:
            return None, None, why
        try:
            est = estimate_capacity(r, float(prof.get("deadline_ms", 10.0)),
                                    float(prof.get("qos_quantile", 0.99)),
                                    prof.get("session_pps"))
        except SlotsError as e:
            return None, None, f"load probe unusable: {e}"
        if not est.pps > 0:
            return None, None, f"load probe shows no capacity: {est.basis}"
        return est.pps, "probe", f"load probe of {r.env_uid}: {est.basis}"


def qoe_sessions(spec, stats: dict | None) -> int | None:
    """The VNF's QoE capacity in sessions: what its ``stats`` show it was told (``slots.qoe
    .probed``), else its launch's ``spec.qoe``; None without one."""
    q = ((stats or {}).get("slots") or {}).get("qoe") or {}
    try:
        if int(q.get("probed") or 0) > 0:
            return int(q["probed"])
    except (TypeError, ValueError):
        pass
    qoe = getattr(spec, "qoe", None)
    return int(qoe.capacity) if qoe is not None else None
