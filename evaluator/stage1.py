# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Placement step 1: make sure every candidate environment type has valid stage-1 probe results.

``Stage1Runner(cache, probes).ensure(targets, service)``, with ``targets`` = zone name ->
ZoneAdapter:

1. collects the environment types of every zone and groups them by their zone-free uid, so a type
   offered by 30 zones is one type;
2. runs the service-specific, free probes (:class:`~fluidvim.evaluator.probes.StaticProbe`) on
   every type and drops the types that fail them - no probe VNF is spent on those;
3. plans the deployments with :func:`~fluidvim.evaluator.overhead.probe_plan`: a minimum set of
   (type, zone) pairs covering every type once and every zone at least once (FUSION's
   N ~ max(|V_u|, |Z|), made exact);
4. for each planned pair, runs what is not already valid in the cache: the type probes (boot and
   load: ``per_zone=False`` probes) once per type, in the planned zone or - when a probe cannot run
   there (a load probe outside the local zone) - in another zone offering the same type where it
   can; and the zone probes (``per_zone=True``: boot) for every planned pair, so every zone gets
   at least one measurement of its own;
5. returns uid -> results (cached and new) as a :class:`Stage1Result`, which also says what was
   probed, what came from the cache and what was skipped and why (``explain()``).

Probes run one at a time: a load probe measures latency and must not share the CPU with another.
A failed probe is cached for ``failure_valid_for_s`` (so a broken environment is not hammered on
every placement) and reported, as is a load probe that measured the host's contention rather than
the VNF (``metrics["contended"]``: its VNF waited for a CPU most of the time, so its capacity
is likely too low - an overloaded host's 0 slots must not stand for an hour) or whose confirm
phase stopped on a failed run; a probe that cannot run in any zone of the type is not cached. A
valid cached result the probe does not accept (:meth:`~fluidvim.evaluator.probes.Probe.covers`:
a load probe result without a confirm target configured since) is measured again.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping

from oslo_log import log as logging

from .cache import ProbeCache
from .confirm import SessionTarget, confirm_blocks, confirm_failed, pending_targets
from .model import STATIC, EnvironmentType, ProbeResult, ServiceProfile
from .overhead import probe_plan
from .probes import BootProbe, LoadProbe, Probe, StaticProbe

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class ProbeAction:
    uid: str
    kind: str
    zone: str
    action: str                 # "probed" | "cached" | "skipped"
    ok: bool | None = None
    seconds: float | None = None
    reason: str = ""

    def text(self) -> str:
        if self.action == "probed":
            state = "ok" if self.ok else f"FAILED: {self.reason}"
            return f"probed {self.kind} of {self.uid} in {self.zone} ({self.seconds:.1f} s): {state}"
        if self.action == "cached":
            return f"cached {self.kind} of {self.uid} (from {self.zone}, {self.reason})"
        return f"skipped {self.kind} of {self.uid}: {self.reason}"


class Stage1Result(dict):
    """uid -> list of ProbeResult, plus what stage 1 did (``actions``) and its plan."""

    def __init__(self):
        super().__init__()
        self.actions: list[ProbeAction] = []
        self.plan: list[tuple[str, str]] = []
        self.envs: dict[str, EnvironmentType] = {}
        self.zones_of: dict[str, list[str]] = {}
        self.rejected: dict[str, str] = {}       # uid -> why the static check failed
        self.zone_errors: dict[str, str] = {}
        self.valid = None                        # the cache's valid results of this round

    @property
    def probed(self) -> list[ProbeAction]:
        return [a for a in self.actions if a.action == "probed"]

    @property
    def cached(self) -> list[ProbeAction]:
        return [a for a in self.actions if a.action == "cached"]

    @property
    def skipped(self) -> list[ProbeAction]:
        return [a for a in self.actions if a.action == "skipped"]

    @property
    def deployments(self) -> int:
        """Probe VNF deployments this round (planned pairs where at least one probe ran)."""
        return len({(a.uid, a.zone) for a in self.probed if a.kind != STATIC})

    def result(self, uid: str, kind: str) -> ProbeResult | None:
        for r in self.get(uid, []):
            if r.kind == kind:
                return r
        return None

    def explain(self) -> list[str]:
        zones = {z for zs in self.zones_of.values() for z in zs}
        lines = [f"{len(self.envs)} unique environment type(s) in {len(zones)} zone(s); plan: "
                 f"{len(self.plan)} probe deployment(s) {self.plan}"]
        for z, e in sorted(self.zone_errors.items()):
            lines.append(f"zone {z}: cannot list environments: {e}")
        for uid, why in sorted(self.rejected.items()):
            lines.append(f"{uid}: static requirements not met: {why}")
        lines += [a.text() for a in self.actions if a.kind != STATIC]
        return lines


class Stage1Runner:
    """Runs stage-1 probes only where the cache has no valid result."""

    def __init__(self, cache: ProbeCache, probes: list[Probe] | None = None,
                 failure_valid_for_s: float = 300.0):
        self.cache = cache
        self.probes = list(probes) if probes is not None else [StaticProbe(), BootProbe(),
                                                                LoadProbe()]
        kinds = [p.kind for p in self.probes]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"one probe per kind, got {kinds}")
        self.failure_valid_for_s = failure_valid_for_s

    def ensure(self, targets: Mapping[str, object], service: ServiceProfile | None = None,
               progress: Callable[[dict], None] | None = None) -> Stage1Result:
        out = Stage1Result()
        uids_per_zone: dict[str, set] = {}
        for zname, zone in sorted(targets.items()):
            try:
                envs = zone.environments()
            except Exception as e:  # noqa: BLE001 - a broken zone is reported, others go on
                out.zone_errors[zname] = str(e)
                continue
            uids_per_zone[zname] = set(envs)
            for uid, env in envs.items():
                out.envs.setdefault(uid, env)
                out.zones_of.setdefault(uid, []).append(zname)
        for uid in out.envs:
            out[uid] = []

        # service-specific free probes first; failing types get no probe VNF
        for probe in [p for p in self.probes if not p.cacheable]:
            for uid, env in sorted(out.envs.items()):
                zname = out.zones_of[uid][0]
                r = probe.run(env, targets[zname], service)
                out[uid].append(r)
                out.actions.append(ProbeAction(uid, probe.kind, zname, "probed", r.ok,
                                               r.metrics.get("probe_s", 0.0), r.error or ""))
                if not r.ok:
                    out.rejected[uid] = r.error or "failed"
        live = {z: {u for u in uids if u not in out.rejected} for z, uids in uids_per_zone.items()}
        out.plan = probe_plan(live)
        costly = [p for p in self.probes if p.cacheable]
        total = sum(1 for _ in out.plan) * len(costly)
        step = 0
        done_type: set[tuple[str, str]] = set()
        # one query for every cache lookup of this round (a placement over 1,000 hosts would
        # otherwise ask the database once per planned pair and probe kind)
        out.valid = self.cache.valid_index({u for u, _ in out.plan}, [p.kind for p in costly])
        for uid, zname in out.plan:
            for probe in costly:
                step += 1
                if not probe.per_zone and (uid, probe.kind) in done_type:
                    continue
                if not probe.per_zone:
                    done_type.add((uid, probe.kind))
                self._one(out, targets, uid, zname, probe, service, progress, step, total)
        return out

    @staticmethod
    def _cached(out, uid, zname, probe, service):
        """(the valid cached result of ``probe`` for ``uid`` that answers it as configured for
        ``service`` - ``probe.covers``: e.g. a load probe result with the service's confirm
        target - else None; the cached result it does not cover, else None)."""
        cached = out.valid.get(uid, probe.kind, zone=zname if probe.per_zone else None)
        if cached is not None and not probe.covers(cached, service):
            LOG.info("cached %s of %s does not cover the probe as configured: probing again",
                     probe.kind, uid)
            return None, cached
        return cached, None

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop the probes' background work (a load probe's confirm phase: its VNF and test
        network are torn down); the results it did not finish stay derated in the cache."""
        for p in self.probes:
            close = getattr(p, "close", None)
            if close is not None:
                close(timeout_s)

    def _limit_validity(self, r: ProbeResult) -> None:
        """A failed, contended or unconfirmed result is kept only a failed result's time; the
        fast result of a confirm under way until it should have landed (its runs at most)
        plus that time, so a confirm lost with its process is measured again rather than read
        derated for a whole probe validity."""
        if not r.ok or r.metrics.get("contended") or confirm_failed(r.metrics):  # again soon
            r.valid_for_s = min(r.valid_for_s, self.failure_valid_for_s)
        elif pend := pending_targets(r.metrics):
            runs_s = sum((int(t["runs"]) + int(t["reruns"])) * (float(t["session_s"]) + 2.0)
                         for t in pend)
            r.valid_for_s = min(r.valid_for_s, self.failure_valid_for_s + runs_s)

    def _landed(self, result: ProbeResult) -> None:
        """A background confirm landed: its result replaces the fast one in the cache (newest
        row wins), valid as long as a probe result is, or as a failed one when it failed."""
        if confirm_failed(result.metrics):
            result.valid_for_s = min(result.valid_for_s, self.failure_valid_for_s)
        try:
            self.cache.put(result)
            LOG.info("load probe of %s: confirm landed (%s)", result.env_uid,
                     "failed: the fast reading stays derated" if confirm_failed(result.metrics)
                     else "confirmed")
        except ValueError as e:
            LOG.warning("confirmed probe result of %s not cached: %s", result.env_uid, e)

    @staticmethod
    def _take(out, uid, probe, cached, progress, step, total, note: str = "") -> None:
        out[uid].append(cached)
        age = time.time() - cached.measured_at
        out.actions.append(ProbeAction(uid, probe.kind, cached.zone, "cached", cached.ok,
                                       reason=f"measured {age:.0f} s ago, valid "
                                              f"{cached.valid_until - time.time():.0f} s more"
                                              + note))
        if progress:
            progress({"event": "cached", "uid": uid, "kind": probe.kind, "zone": cached.zone,
                      "step": step, "total": total})

    def _one(self, out, targets, uid, zname, probe, service, progress, step, total):
        env = out.envs[uid]
        cached, stale = self._cached(out, uid, zname, probe, service)
        if cached is not None:
            self._take(out, uid, probe, cached, progress, step, total)
            return
        # type probes may run in any zone offering the type; prefer the planned one
        zones = [zname] + ([z for z in out.zones_of[uid] if z != zname] if not probe.per_zone
                           else [])
        where, why_not = None, []
        for z in zones:
            ok, why = probe.applicable(targets[z])
            if ok:
                where = z
                break
            why_not.append(why)
        if where is None and stale is not None:     # cannot measure it better here: as it is
            self._take(out, uid, probe, stale, progress, step, total,
                       "; does not cover the probe as configured, which cannot run here: "
                       f"{why_not[0] if why_not else 'not applicable'}")
            return
        if where is None:
            out.actions.append(ProbeAction(uid, probe.kind, zname, "skipped",
                                           reason=why_not[0] if why_not else "not applicable"))
            if progress:
                progress({"event": "skipped", "uid": uid, "kind": probe.kind, "zone": zname,
                          "step": step, "total": total, "reason": why_not[0] if why_not else ""})
            return
        if progress:
            progress({"event": "start", "uid": uid, "kind": probe.kind, "zone": where,
                      "step": step, "total": total})
        t = time.perf_counter()
        kw = {}
        if isinstance(probe, LoadProbe):    # keep the levels the replaced result confirmed
            kw = {"also": [t for t in _targets_of(stale)
                           if probe.carries(t) and t not in probe.targets(service)],
                  "on_confirmed": self._landed}
        try:
            r = probe.run(env, targets[where], service, **kw)
        except Exception as e:  # noqa: BLE001 - a probe bug must not stop placement
            LOG.exception("probe %s of %s in %s raised", probe.kind, uid, where)
            r = ProbeResult(env_uid=uid, kind=probe.kind, ok=False, metrics={}, zone=where,
                            error=f"probe raised {type(e).__name__}: {e}")
        secs = time.perf_counter() - t
        self._limit_validity(r)
        try:
            self.cache.put(r)
        except ValueError as e:
            LOG.warning("probe result of %s not cached: %s", uid, e)
        out[uid].append(r)
        out.actions.append(ProbeAction(uid, probe.kind, where, "probed", r.ok, secs,
                                       r.error or ""))
        if progress:
            progress({"event": "done", "uid": uid, "kind": probe.kind, "zone": where,
                      "step": step, "total": total, "ok": r.ok, "seconds": secs})


def _targets_of(result: ProbeResult | None) -> list[SessionTarget]:
    """The SessionTargets a load probe result confirmed or has under way (none for None)."""
    if result is None:
        return []
    dicts = [c.get("target") for c in confirm_blocks(result.metrics)]
    dicts += pending_targets(result.metrics)
    out = []
    for d in dicts:
        try:
            t = SessionTarget(**d)
        except (TypeError, ValueError):     # a block of an older release: not carried over
            continue
        if t not in out:
            out.append(t)
    return out
