# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Placement, steps 0-3, each recorded so ``fluidvim placement explain <id>`` shows the why.

0. **filter** - every (zone, host) is a candidate; a host out of service (``hostpower``: powered
   off, draining, waking, failed) and static requirements (environment fields, host and zone
   labels), location and cost remove some, each with its reason.
1. **probe** - the stage-1 runner makes sure every environment type of the remaining zones has a
   valid probe result; only new types (or expired results) are probed, the rest comes from the
   cache. The record says which were probed and which were cached.
2. **analyze** - the stage-2 runner ranks the candidates (probe results, prices, power, delay).
3. **decide** - power-aware: among the candidates whose score is within ``decision_tolerance`` of
   the best, the least marginal power wins (PABFD); ties go to the host already carrying load
   (consolidation: idle hosts stay idle and can sleep).

The stage-1 and stage-2 runners are parameters (``fluidvim.evaluator.stage1.Stage1Runner`` and
``fluidvim.evaluator.analyzers.Stage2Runner`` by default): ``stage1.ensure(targets, service)``
returns probe results by environment uid; ``stage2.run(service, candidates, results).scores`` (or
a bare analyzer's ``analyze(...)``) the scores. A service with an operator ``formula`` is ranked
by ``formula_runner(formula)`` (a FormulaAnalyzer's runner) instead. Marginal power is a
callable ``(zone name, HostInfo) -> watts | None``
(``fluidvim.orchestrator.power`` provides one).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Callable

from oslo_log import log as logging

from fluidvim.common.measure import elapsed_ms
from fluidvim.common.zonetypes import HostInfo, ZoneAdapter, ZoneError
from fluidvim.evaluator.model import STATIC, Candidate, ProbeResult, ServiceProfile

from . import states
from .deploy import deploy, profile_of, service_qoe
from .exception import Refused

LOG = logging.getLogger(__name__)

MarginalPower = Callable[[str, HostInfo], "float | None"]
ENV_FIELDS = ("launcher", "accel", "machine", "cpu_model", "vcpus", "memory_mb", "kernel_sha256")


@dataclasses.dataclass
class Placement:
    decision_id: str
    service: str
    status: str                   # states.DECISION_DECIDED | _DEPLOYED | _REFUSED
    zone: str | None
    host: str | None
    rule: str
    score: float | None = None
    instance: dict | None = None
    total_ms: float = 0.0
    step_ms: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)



def _lookup(key: str, host: HostInfo, zone: ZoneAdapter, zone_labels: dict):
    if key in ENV_FIELDS:
        return getattr(host.env, key)
    for src in (host.labels, zone_labels):
        if key in src:
            return src[key]
    if key in ("zone", "region"):
        return zone.name if key == "zone" else zone.region
    return dict(host.env.extra).get(key)


def requirement_problem(reqs: dict, host: HostInfo, zone: ZoneAdapter, zone_labels: dict):
    """None when ``host`` meets every static requirement, else the first reason it does not."""
    for key, want in sorted(reqs.items()):
        if key == "location":
            continue
        # "zones"/"regions" (evaluator PLACEMENT_KEYS) list the allowed zone/region names
        have = _lookup({"zones": "zone", "regions": "region"}.get(key, key), host, zone,
                       zone_labels)
        allowed = want if isinstance(want, (list, tuple, set)) else [want]
        if isinstance(want, dict):                  # {"min": x} / {"max": y}
            try:
                ok = (have is not None and float(have) >= float(want.get("min", float("-inf")))
                      and float(have) <= float(want.get("max", float("inf"))))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                return f"requirement {key} {want}: host has {have!r}"
            continue
        if have is None or str(have) not in {str(a) for a in allowed}:
            return f"requirement {key} in {sorted(map(str, allowed))}: host has {have!r}"
    return None


def _rebind(score, candidate):
    """A copy of a stage-2 Score for this round's live candidate (a shallow copy: thousands per
    placement on a large zone, so not through copy.copy or dataclasses.replace)."""
    new = object.__new__(type(score))
    new.__dict__.update(score.__dict__)
    new.candidate = candidate
    return new


def _location(host: HostInfo, zone: ZoneAdapter, zone_labels: dict) -> str:
    return str(host.labels.get("location") or zone_labels.get("location") or zone.region)


class PlacementEngine:
    def __init__(self, store, registry, zones: dict[str, ZoneAdapter], stage1, stage2, queuing,
                 *, power: MarginalPower | None = None, tolerance: float = 0.05,
                 zone_labels: dict | None = None, formula_runner=None, host_power=None,
                 max_loss: float):
        """``max_loss``: ``[evaluator] max_loss`` (:func:`~.deploy.max_loss_of`), read by a
        launch's QoE as stage 1 reads it."""
        self.store = store
        self.registry = registry
        self.zones = zones
        self.stage1 = stage1
        self.stage2 = stage2
        self.queuing = queuing
        self.power = power
        self.tolerance = tolerance
        self.zone_labels = zone_labels or {}       # zone name -> labels (price, location, ...)
        self.formula_runner = formula_runner        # formula text -> stage-2 runner (per service)
        self.host_power = host_power                # hostpower.HostPower: off hosts, wake-ups
        self.max_loss = max_loss
        self._formula_runners: dict = {}
        # zone/host -> (inputs, Candidate) of the last placement's step 0: a host whose inputs
        # did not change keeps its Candidate object, so a reused stage-2 ranking holds it
        # already (no copy per candidate in analyze; most hosts do not change between two
        # placements on a large zone)
        self._cands: dict = {}

    # -- step 0 --
    def candidates(self, svc: ServiceProfile, extras: dict, location: str | None):
        kept: list[Candidate] = []
        filtered: list[dict] = []
        zones_used: dict = {}
        reqs = dict(svc.requirements or {})
        locs = reqs.get("location")
        if location:
            locs = [location]
        if isinstance(locs, str):
            locs = [locs]
        rules = (reqs, locs, extras.get("max_price_per_hour"),
                 self.registry.aggregate(svc.name, "host"),
                 self.host_power.unavailable() if self.host_power is not None else {})
        away = rules[4]
        snap = self.queuing.snapshot()
        cache: dict = {}
        for zname, zone in sorted(self.zones.items()):
            try:
                hosts = zone.hosts()
            except Exception as e:  # noqa: BLE001 - one broken zone must not stop placement
                filtered.append({"candidate": zname, "reason": f"zone unavailable: {e}"})
                continue
            qd = self.queuing.delay(zone, svc.name, snap)
            if away:
                listed = {h.name for h in hosts}
                for key in sorted(k for k in away if k.startswith(f"{zname}/")
                                  and k[len(zname) + 1:] not in listed):
                    filtered.append({"candidate": key, "reason": away[key]})   # not even listed
            n = len(kept)
            self._zone_candidates(zname, zone, hosts, qd, rules, cache, kept, filtered)
            if len(kept) > n:
                zones_used[zname] = zone
        self._cands = cache
        return kept, filtered, zones_used

    def _zone_candidates(self, zname, zone, hosts, qd, rules, cache, kept, filtered):
        """Step 0 for the hosts of one zone: each kept as a Candidate or filtered with its
        reason. What is the same for every host of the zone is worked out once (a zone of
        1,000 hosts is 1,000 candidates a placement: issue 21, decision <= 20 ms p50 at 1,000
        hosts), and a host whose inputs did not change keeps its Candidate object."""
        reqs, locs, max_price, free, away = rules
        zl = self.zone_labels.get(zname, {})
        zone_price = zl.get("price_per_hour", 0.0)
        zone_loc = zl.get("location") or zone.region                # _location
        no_slot = (f"no free slot and {qd.basis}" if qd.seconds is None else None)
        delay_s, prefix, zone_sig = qd.seconds, f"{zname}/", tuple(zl.items())
        power_of, last = self.power, self._cands
        # a power model that says a host's watts are what they were while its inputs are
        # (HostMarginalPower.unchanged): not asked again for the hosts that did not change
        # since the last placement (all but one or two of a large zone's)
        same = getattr(power_of, "unchanged", None) if power_of else None
        for h in hosts:
            key = prefix + h.name
            hl = h.labels
            price = float(hl.get("price_per_hour", zone_price))
            why = away.get(key) if away else None
            if why is None and reqs:
                why = requirement_problem(reqs, h, zone, zl)
            loc = str(hl.get("location") or zone_loc)
            if why is None and locs and loc not in locs:
                why = f"location {loc!r} not in {sorted(locs)}"
            if why is None and max_price is not None and price > float(max_price):
                why = f"price {price}/h above the service's maximum {max_price}/h"
            if why is None and no_slot is not None and not free.get(key):
                why = no_slot
            if why is not None:
                filtered.append({"candidate": key, "reason": why})
                continue
            free_n = free.get(key, 0)
            sig = (h.env, price, free_n, delay_s, loc, h.cpu_util, h.slots_total,
                   tuple(hl.items()) if hl else (), zone_sig, getattr(h, "power_system_id", None))
            was = last.get(key)
            hit, power = was is not None and was[0] == sig, None
            if power_of and not (hit and same is not None and same(zname, h)):
                power = power_of(zname, h)             # asked once, whatever the outcome
                hit = hit and was[1].power_w_marginal == power
            if hit:
                c = was[1]
            else:
                labels = {**zl, **hl} if hl else dict(zl)
                labels["cpu_util"] = h.cpu_util
                labels["slots_total"] = h.slots_total
                labels["location"] = loc
                c = Candidate(zone=zname, env=h.env, host=h.name, price_per_hour=price,
                              power_w_marginal=power, free_slots=free_n,
                              queuing_delay_s=delay_s, labels=labels)
                # Candidate.key (a cached_property) is this key: set now, not on first read
                # (functools' lock on every first read, thousands per placement)
                if h.name:
                    c.__dict__["key"] = key
            cache[key] = (sig, c)
            kept.append(c)

    # -- step 1 --
    def probe(self, svc: ServiceProfile, zones_used: dict, cands: list[Candidate]):
        t0 = time.time()
        raw = self.stage1.ensure(zones_used, svc) if zones_used else {}
        results: dict[str, list[ProbeResult]] = {}
        for uid, res in (raw or {}).items():
            results[uid] = [res] if isinstance(res, ProbeResult) else list(res)
        actions: dict[str, dict] = {}
        for a in getattr(raw, "actions", []):
            actions.setdefault(a.uid, {})[a.kind] = a.action + (
                "" if a.ok in (None, True) else f" (failed: {a.reason})")
        envs = {}
        for c in cands:
            uid = c.env.uid
            if uid in envs:
                continue
            rs = results.get(uid, [])
            if uid in actions:
                kinds = actions[uid]
            else:       # a runner that does not say: results measured now were probed now
                kinds = {r.kind: "probed" if r.measured_at >= t0 else "cached" for r in rs}
            costly = {k: v for k, v in kinds.items() if k != STATIC}
            status = ("no results" if not rs else
                      "probed" if any(v.startswith("probed") for v in costly.values()) else
                      "cached" if costly else "static only")
            envs[uid] = {"zone": c.zone, "status": status, "kinds": kinds,
                         "env": {k: getattr(c.env, k) for k in ("launcher", "accel", "machine")}}
        record = {"env_types": envs,
                  "actions": raw.explain() if hasattr(raw, "explain") else []}
        return results, record

    # -- step 2 --
    def analyze(self, svc: ServiceProfile, extras: dict, cands: list[Candidate], results: dict):
        runner = self.stage2
        formula = extras.get("formula")
        if formula and self.formula_runner is not None:
            key = (svc.name, formula)
            if key not in self._formula_runners:
                self._formula_runners[key] = self.formula_runner(formula)
            runner = self._formula_runners[key]
        if hasattr(runner, "run"):               # Stage2Runner: re-ranks only on new inputs
            res = runner.run(svc, cands, results)
            scores, note = res.scores, res.reason
        else:                                     # a bare analyzer
            scores, note = runner.analyze(svc, cands, results), "analyzed"
        # a reused ranking holds the candidates of its round: decide on today's live numbers
        live = {c.key: c for c in cands}
        fresh = []
        for sc in scores:
            c = live.get(sc.candidate.key)
            if c is None:
                continue
            if sc.candidate is not c:               # a ranking of this round holds them already
                sc = _rebind(sc, c)
            fresh.append(sc)
        name = getattr(getattr(runner, "analyzer", runner), "name", type(runner).__name__)
        return fresh, name, note

    # -- step 3 --
    def decide(self, scores: list) -> tuple[Any, str, list]:
        ranked = sorted((s for s in scores if getattr(s, "feasible", True)),
                        key=lambda s: s.score, reverse=True)
        if not ranked:
            why = "; ".join(f"{s.candidate.key}: {s.reasons[0] if s.reasons else 'infeasible'}"
                            for s in scores[:5])
            return None, "no feasible candidate" + (f" ({why})" if why else ""), []
        best = ranked[0].score
        floor = best - self.tolerance * abs(best)
        band = [s for s in ranked if s.score >= floor]

        def key(s):
            c = s.candidate
            p = c.power_w_marginal
            return (p is None, p if p is not None else 0.0,
                    -float(c.labels.get("cpu_util", 0.0)), -s.score, c.key)

        band.sort(key=key)
        win = band[0]
        c = win.candidate
        power = (f"least marginal power {c.power_w_marginal:.1f} W" if c.power_w_marginal
                 is not None else "no power model for these hosts")
        rule = (f"best score {best:.4g}; {len(band)} candidate(s) within "
                f"{self.tolerance:.0%} of it; among them {power}, then the busiest host "
                f"(consolidation: cpu_util {float(c.labels.get('cpu_util', 0.0)):.2f}) -> "
                f"{c.key} (score {win.score:.4g})")
        return win, rule, band

    def place(self, service: str, *, location: str | None = None, deploy_it: bool = False,
              request: dict | None = None, bridges=(), pre_steps=()) -> Placement:
        """Steps 0-3; with ``deploy_it`` launch where decided, NICs on ``bridges`` (network ids
        of the zone the service is pinned to; () = the zone's default NICs). ``pre_steps``:
        (name, ms, record) of steps a caller took before (the hierarchy's parent level), recorded
        first and counted in the total."""
        t_all = time.perf_counter()
        row = self.store.service(service)
        svc = profile_of(row)
        extras = row.profile
        steps = list(pre_steps)

        t = time.perf_counter()
        cands, filtered, zones_used = self.candidates(svc, extras, location)
        steps.append(("filter", elapsed_ms(t), {
            "kept": [c.key for c in cands], "filtered": filtered,
            "location": location, "requirements": svc.requirements,
            # marginal watts of one more VNF per kept candidate (None: no power model)
            "power_w_marginal": {c.key: c.power_w_marginal for c in cands}}))

        t = time.perf_counter()
        results, probe_rec = self.probe(svc, zones_used, cands)
        steps.append(("probe", elapsed_ms(t), probe_rec))

        t = time.perf_counter()
        scores, analyzer, note = (self.analyze(svc, extras, cands, results) if cands
                                  else ([], "-", "no candidates"))
        ranked = sorted(scores, key=lambda s: (not getattr(s, "feasible", True), -s.score))
        steps.append(("analyze", elapsed_ms(t), {
            "analyzer": analyzer, "note": note, "count": len(ranked),
            "scores": [{"candidate": s.candidate.key, "score": s.score,
                        "feasible": getattr(s, "feasible", True),
                        "slots_estimate": s.slots_estimate, "qscores": s.qscores,
                        "reasons": list(s.reasons)} for s in ranked[:20]]}))

        t = time.perf_counter()
        win, rule, band = self.decide(ranked)
        steps.append(("decide", elapsed_ms(t), {
            "rule": rule, "band": [{"candidate": s.candidate.key, "score": s.score,
                                    "power_w_marginal": s.candidate.power_w_marginal,
                                    "cpu_util": s.candidate.labels.get("cpu_util")}
                                   for s in band[:20]]}))
        zone = win.candidate.zone if win else None
        host = win.candidate.host if win else None
        status = states.DECISION_DECIDED if win else states.DECISION_REFUSED
        total = round(elapsed_ms(t_all) + sum(ms for _, ms, _ in pre_steps), 3)
        did = self.store.save_decision(service, status, zone, host, rule,
                                       request or {"service": service, "location": location},
                                       steps, total)
        out = Placement(did, service, status, zone, host, rule,
                        win.score if win else None, total_ms=total,
                        step_ms={n: ms for n, ms, _ in steps})
        LOG.info("placement %s of %s: %s (%s ms)", did, service, rule, total)
        if win is None and self.host_power is not None:
            self.host_power.demand(service, rule)     # the slots ran out: maybe wake a host
        if win is None:
            if deploy_it:
                raise Refused(f"placement {did}: {service} cannot be placed: {rule}; "
                              f"see `fluidvim placement explain {did[:8]}`")
            return out
        if deploy_it:
            try:
                qoe = service_qoe(row, results.get(win.candidate.env.uid, ()), self.max_loss)
                inst = deploy(self.store, self.registry, self.zones[win.candidate.zone], row, host=host,
                              decision_id=did, predicted_s=win.candidate.queuing_delay_s,
                              bridges=bridges, qoe=qoe)
            except ZoneError as e:
                self.store.set_decision(did, status=states.DECISION_FAILED)
                raise Refused(f"placement {did}: deploying {service} failed: {e}") from e
            self.store.set_decision(did, status=states.DECISION_DEPLOYED)
            out.status = states.DECISION_DEPLOYED
            out.instance = dataclasses.asdict(inst)
        return out


def explain(store, decision_id: str) -> dict:
    d = store.decision(decision_id)
    return {"id": d.id, "service": d.service, "status": d.status, "zone": d.zone,
            "host": d.host, "rule": d.rule, "request": json.loads(d.request_json),
            "total_ms": d.total_ms, "created_at": d.created_at,
            "steps": [{"name": s.name, "ms": s.ms, "record": s.record} for s in d.steps]}
