# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Placement step 2: stage-2 analyzers turn probe results, prices and power into a ranking.

Every analyzer has ``analyze(service, candidates, results) -> list[Score]``, best first, each
Score with human-readable ``reasons``; candidates that cannot serve the service come last with
``feasible=False`` and the reason. ``results`` is stage 1's uid -> [ProbeResult].

* :class:`CostBenefitAnalyzer` - slots estimate (from the shared load curve at the service's
  deadline and quantile), boot time, price per slot, marginal power per slot and queuing delay,
  combined with policy weights.
* :class:`QScoreAnalyzer` - QoS levels with a willingness to pay per session-hour; a Q-score per
  level = what the environment's slots at that level earn minus what it costs; level 0 (Q0) is
  guaranteed: a candidate that cannot give Q0 is infeasible.
* :class:`FormulaAnalyzer` - an operator formula (:class:`~fluidvim.evaluator.formula.SafeFormula`)
  over :data:`FORMULA_VARIABLES`.

Every analyzer reads an environment's slots the way its launch's QoE does
(:func:`~fluidvim.evaluator.qoeslots.qoe_capacity`: whole-step quantiles), so an environment
whose probe shows no session within the deadline is infeasible here with the reason the deploy
would refuse it with.

:class:`Stage2Runner` re-runs an analyzer only when its input fingerprint changes (environments,
probe results, prices, power, minimum instances, the service's QoS); otherwise it returns the
previous ranking and says so. Live numbers - free slots, queuing delay - are not part of the
fingerprint: the ranking is of environments, and placement step 3 uses the live numbers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import threading

from .formula import FORMULA_VARIABLES, FormulaError, SafeFormula
from .model import BOOT, LOAD, STATIC, Candidate, ProbeResult, Score, ServiceProfile
from .qoeslots import latest_load, no_capacity_reason, qoe_capacity
from .slots import SlotsError

INFEASIBLE_SCORE = -1e9


@dataclasses.dataclass
class CandidateFacts:
    """What stage 1 and the candidate say about one candidate, for one service."""

    feasible: bool
    reasons: list
    variables: dict
    slots: int | None


def _result(results, uid, kind) -> ProbeResult | None:
    for r in (results or {}).get(uid, []):
        if r.kind == kind:
            return r
    return None


def _env_facts(service: ServiceProfile, uid: str, results: dict, max_loss: float):
    """What stage 1 says about an environment type for a service (the same for every candidate
    of that type): (feasible, reasons, slots, pps, boot_ms, warm_ms)."""
    reasons, feasible = [], True
    static = _result(results, uid, STATIC)
    if static is not None and not static.ok:
        feasible = False
        reasons.append(f"static requirements not met: {static.error}")
    load = latest_load((results or {}).get(uid)) or _result(results, uid, LOAD)
    slots, pps = None, 0.0
    if load is not None and load.ok:
        try:    # the reading the launch's QoE takes (qoeslots.launch_qoe): one figure for both
            est = qoe_capacity(load, service.deadline_ms, service.qos_quantile,
                               service.session_pps, max_loss)
            slots, pps = est.slots, est.pps
        except SlotsError as e:
            reasons.append(f"no slot estimate: {e}")
        else:
            if slots < 1:
                feasible = False
                reasons.append(no_capacity_reason(load.env_uid, service.deadline_ms,
                                                  service.qos_quantile, est.basis))
            else:
                reasons.append(f"slots {slots}: {est.basis}")
    elif load is not None:
        reasons.append(f"load probe failed: {load.error}")
    else:
        reasons.append("no load probe result for this environment type: slots unknown")
    boot = _result(results, uid, BOOT)
    boot_ms = warm_ms = math.inf
    if boot is not None and boot.ok:
        boot_ms = boot.metrics.get("cold_ms", {}).get("p50") or math.inf
        if boot.metrics.get("warm"):
            warm_ms = boot.metrics.get("warm_ms", {}).get("p50") or math.inf
        reasons.append(f"boot p50 {boot_ms:.0f} ms cold" +
                       (f", {warm_ms:.1f} ms warm" if warm_ms < math.inf else "") +
                       f" (probed in {boot.zone})")
    elif boot is not None:
        reasons.append(f"boot probe failed: {boot.error}")
    return feasible, reasons, slots, pps, boot_ms, warm_ms


def candidate_facts(service: ServiceProfile, cand: Candidate, results: dict,
                    max_loss: float = 0.01, memo: dict | None = None) -> CandidateFacts:
    """The numbers every analyzer uses (one place), with reasons. ``memo``: a dict an analyzer
    passes for one ranking, so the facts of an environment type (its slot estimate from the
    load curve, boot times) are worked out once, not once per candidate of that type."""
    uid = cand.env.uid
    key = (uid, service.deadline_ms, service.qos_quantile, service.session_pps, max_loss)
    env = memo.get(key) if memo is not None else None
    if env is None:
        env = _env_facts(service, uid, results, max_loss)
        if memo is not None:
            memo[key] = env
    feasible, env_reasons, slots, pps, boot_ms, warm_ms = env
    reasons = list(env_reasons)
    delay = math.inf if cand.queuing_delay_s is None else float(cand.queuing_delay_s)
    if service.max_queuing_delay_s is not None and cand.free_slots <= 0 and \
            delay > service.max_queuing_delay_s:
        feasible = False
        reasons.append(f"no free slot and queuing delay {delay:g} s exceeds the service's "
                       f"tolerance {service.max_queuing_delay_s:g} s")
    n = slots or 0
    power = float(cand.power_w_marginal or 0.0)
    variables = {
        "slots": float(n), "capacity_pps": float(pps), "has_load_probe": 1.0 if slots is not None else 0.0,
        "boot_ms": float(boot_ms), "warm_boot_ms": float(warm_ms),
        "price_per_hour": float(cand.price_per_hour),
        "price_per_slot": cand.price_per_hour / n if n else math.inf,
        "power_w": power, "power_per_slot_w": power / n if n else math.inf,
        "queuing_delay_s": delay, "free_slots": float(cand.free_slots),
        "deadline_ms": float(service.deadline_ms), "quantile": float(service.qos_quantile),
        "session_pps": float(service.session_pps), "min_instances": float(service.min_instances),
    }
    return CandidateFacts(feasible, reasons, variables, slots)


def _rank(scores: list[Score]) -> list[Score]:
    return sorted(scores, key=lambda s: (not s.feasible, -s.score, s.candidate.key))


def _norm(values: list[float]) -> list[float]:
    """Scale to [0, 1] by the largest finite value; inf -> 1 (worst)."""
    finite = [v for v in values if math.isfinite(v)]
    top = max(finite) if finite else 0.0
    return [1.0 if not math.isfinite(v) else (v / top if top > 0 else 0.0) for v in values]


class Analyzer:
    name = "abstract"

    def analyze(self, service: ServiceProfile, candidates: list[Candidate],
                results: dict) -> list[Score]:
        raise NotImplementedError

    def identity(self) -> str:
        """What makes two analyzers give the same ranking (part of Stage2Runner's fingerprint)."""
        return json.dumps({"name": self.name, **{k: v for k, v in vars(self).items()
                                                 if not k.startswith("_")}},
                          sort_keys=True, default=str)


DEFAULT_WEIGHTS = {"slots": 1.0, "price": 1.0, "power": 0.5, "delay": 0.5, "boot": 0.25}


class CostBenefitAnalyzer(Analyzer):
    """score = w_slots*slots' - w_price*price_per_slot' - w_power*power_per_slot' - w_delay*delay'
    - w_boot*boot', each term scaled to [0, 1] by the largest value among the candidates
    (unknown/infinite = 1, the worst). Weights are the operator's policy."""

    name = "cost-benefit"

    def __init__(self, weights: dict | None = None, max_loss: float = 0.01):
        w = dict(DEFAULT_WEIGHTS)
        for k, v in (weights or {}).items():
            if k not in DEFAULT_WEIGHTS:
                raise ValueError(f"unknown weight {k!r}; known: {sorted(DEFAULT_WEIGHTS)}")
            if not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"weight {k!r} must be a number >= 0, got {v!r}")
            w[k] = float(v)
        self.weights, self.max_loss = w, max_loss

    def analyze(self, service, candidates, results) -> list[Score]:
        # the same numbers as candidate_facts, worked out per environment type once and per
        # candidate only for what differs between hosts (price, power, delay, free slots): a
        # zone of 1,000 hosts is 1,000 candidates of a few types (issue 21: decision <= 20 ms
        # p50 at 1,000 hosts); the reason lines are written when read (_CostBenefitScore)
        envs: dict = {}
        max_delay = service.max_queuing_delay_s
        inf = math.inf
        rows, slots_v, price_v, power_v, delay_v, boot_v = [], [], [], [], [], []
        for c in candidates:
            uid = c.env.uid
            env = envs.get(uid)
            if env is None:
                feasible, reasons, slots, _pps, boot_ms, warm_ms = _env_facts(
                    service, uid, results, self.max_loss)
                n = slots or 0
                env = envs[uid] = (feasible, reasons, slots, n, float(n),
                                   min(float(boot_ms), float(warm_ms)))
            feasible, _reasons, _slots, n, n_f, boot = env
            q = c.queuing_delay_s
            delay = inf if q is None else float(q)
            extra = None
            if max_delay is not None and c.free_slots <= 0 and delay > max_delay:
                feasible = False
                extra = (f"no free slot and queuing delay {delay:g} s exceeds the service's "
                         f"tolerance {max_delay:g} s")
            power = float(c.power_w_marginal or 0.0)
            power_slot = power / n if n else inf
            price_slot = c.price_per_hour / n if n else inf
            rows.append((c, env, feasible, extra, price_slot, power_slot, delay))
            slots_v.append(n_f)
            price_v.append(price_slot)
            power_v.append(power_slot if power else 0.0)
            delay_v.append(delay)
            boot_v.append(boot)
        slots_n, price_n, power_n = _norm(slots_v), _norm(price_v), _norm(power_v)
        delay_n, boot_n = _norm(delay_v), _norm(boot_v)
        w = self.weights
        ws, wp, ww, wd, wb = w["slots"], -w["price"], -w["power"], -w["delay"], -w["boot"]
        out = []
        for i, (c, env, feasible, extra, price_slot, power_slot, delay) in enumerate(rows):
            terms = (ws * slots_n[i], wp * price_n[i], ww * power_n[i], wd * delay_n[i],
                     wb * boot_n[i])
            # the order sum(terms.values()) adds them in: the same float as before
            score = (terms[0] + terms[1] + terms[2] + terms[3] + terms[4] if feasible
                     else INFEASIBLE_SCORE)
            out.append(_CostBenefitScore(c, score, env[2], feasible,
                                         (env[1], extra, price_slot, power_slot, delay, terms)))
        return _rank(out)


_TERMS = ("slots", "price", "power", "delay", "boot")


class _CostBenefitScore(Score):
    """A :class:`CostBenefitAnalyzer` Score whose ``reasons`` are written when first read: a
    ranking of a 1,000-host zone has 1,000 of them, a placement records 20 (``fluidvim
    placement explain``). The same text as writing them at once."""

    def __init__(self, candidate, score, slots_estimate, feasible, why):
        self.candidate = candidate
        self.score = score
        self.slots_estimate = slots_estimate
        self.qscores = {}
        self.feasible = feasible
        self._why = why
        self._reasons = None

    @property
    def reasons(self) -> list:
        if self._reasons is None:
            env_reasons, extra, price_slot, power_slot, delay, terms = self._why
            reasons = list(env_reasons)
            if extra is not None:
                reasons.append(extra)
            reasons.append(
                f"price/slot {price_slot:.4g}/h, power/slot {power_slot:.3g} W, "
                f"queuing delay {delay:.3g} s; score {self.score:.3f} = " +
                " ".join(f"{k}{t:+.3f}" for k, t in zip(_TERMS, terms)))
            self._reasons = reasons
        return self._reasons

    @reasons.setter
    def reasons(self, value) -> None:
        self._reasons = value


@dataclasses.dataclass(frozen=True)
class QoSLevel:
    name: str
    deadline_ms: float
    quantile: float = 0.99
    wtp_per_session_hour: float = 0.0       # what a session at this level is worth per hour

    def __post_init__(self):
        if not self.deadline_ms > 0 or not 0 < self.quantile < 1 or self.wtp_per_session_hour < 0:
            raise ValueError(f"QoS level {self.name!r}: deadline_ms > 0, 0 < quantile < 1 and "
                             f"wtp_per_session_hour >= 0 are required")


class QScoreAnalyzer(Analyzer):
    """Q-score of level L = slots at L x willingness to pay at L - price/h - power x energy price.

    ``levels[0]`` is Q0, the guaranteed level: a candidate with no slot at Q0 is infeasible.
    ``score`` = the best Q-score over the levels the candidate can serve; ``qscores`` has them all
    (None where the candidate has no slot at that level).
    """

    name = "qscore"

    def __init__(self, levels: list[QoSLevel], energy_price_per_kwh: float = 0.0,
                 max_loss: float = 0.01):
        if not levels:
            raise ValueError("QScoreAnalyzer needs at least one QoS level (Q0, guaranteed)")
        names = [lv.name for lv in levels]
        if len(set(names)) != len(names):
            raise ValueError(f"QoS level names must be unique, got {names}")
        self.levels, self.energy_price_per_kwh, self.max_loss = list(levels), energy_price_per_kwh, max_loss

    def analyze(self, service, candidates, results) -> list[Score]:
        out, memo = [], {}
        svcs = [dataclasses.replace(service, deadline_ms=lv.deadline_ms, qos_quantile=lv.quantile)
                for lv in self.levels]
        for c in candidates:
            qscores, reasons, feasible, best, slots0 = {}, [], True, None, None
            power_cost = float(c.power_w_marginal or 0.0) / 1000.0 * self.energy_price_per_kwh
            for i, (lv, svc) in enumerate(zip(self.levels, svcs)):
                f = candidate_facts(svc, c, results, self.max_loss, memo)
                if i == 0:
                    feasible = f.feasible
                    reasons += [r for r in f.reasons if not r.startswith("slots ")]
                    slots0 = f.slots
                if not f.slots:
                    qscores[lv.name] = None
                    reasons.append(f"{lv.name}: no slot at p{lv.quantile * 100:g} <= {lv.deadline_ms:g} ms")
                    continue
                q = f.slots * lv.wtp_per_session_hour - c.price_per_hour - power_cost
                qscores[lv.name] = round(q, 6)
                reasons.append(f"{lv.name}: {f.slots} slots x {lv.wtp_per_session_hour:g}/h - price "
                               f"{c.price_per_hour:g}/h - power {power_cost:.3g}/h = {q:.4g}")
                best = q if best is None else max(best, q)
            if not slots0:
                feasible = False
                reasons.append(f"Q0 ({self.levels[0].name}) is guaranteed and cannot be met here")
            score = best if (feasible and best is not None) else INFEASIBLE_SCORE
            out.append(Score(candidate=c, score=score, slots_estimate=slots0, qscores=qscores,
                             reasons=reasons, feasible=feasible))
        return _rank(out)


class FormulaAnalyzer(Analyzer):
    """score = an operator formula over :data:`FORMULA_VARIABLES` (higher is better)."""

    name = "formula"

    def __init__(self, formula: SafeFormula | str, max_loss: float = 0.01):
        if isinstance(formula, str):
            formula = SafeFormula(formula, variables=FORMULA_VARIABLES)
        unknown = formula.names - set(FORMULA_VARIABLES)
        if unknown:
            raise FormulaError(f"formula uses {sorted(unknown)}, which the analyzer does not "
                               f"provide; available: {', '.join(sorted(FORMULA_VARIABLES))}")
        self.formula, self.max_loss = formula, max_loss

    def identity(self) -> str:
        return json.dumps({"name": self.name, "formula": self.formula.expr, "max_loss": self.max_loss})

    def analyze(self, service, candidates, results) -> list[Score]:
        out, memo = [], {}
        for c in candidates:
            f = candidate_facts(service, c, results, self.max_loss, memo)
            reasons, feasible, score = list(f.reasons), f.feasible, INFEASIBLE_SCORE
            if feasible:
                try:
                    score = self.formula.evaluate(**f.variables)
                    used = ", ".join(f"{n}={f.variables[n]:.4g}" for n in sorted(self.formula.names))
                    reasons.append(f"formula {self.formula.expr!r} with {used} = {score:.4g}")
                    if not math.isfinite(score):
                        feasible, score = False, INFEASIBLE_SCORE
                        reasons.append("the formula gave a non-finite score")
                except FormulaError as e:
                    feasible = False
                    reasons.append(f"formula failed: {e}")
            out.append(Score(candidate=c, score=score, slots_estimate=f.slots, reasons=reasons,
                             feasible=feasible))
        return _rank(out)


# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Stage2Result:
    scores: list
    fingerprint: str
    reused: bool
    reason: str


def fingerprint(analyzer: Analyzer, service: ServiceProfile, candidates: list[Candidate],
                results: dict) -> str:
    """A hash of what the ranking depends on, minus the live numbers (free slots, delay)."""
    from .confirm import confirm_blocks, pending_targets
    # a background confirm lands as the same measurement with its confirm blocks
    probes = sorted((uid, r.kind, r.zone, r.ok, round(r.measured_at, 3),
                     len(confirm_blocks(r.metrics)), len(pending_targets(r.metrics)))
                    for uid, rs in (results or {}).items() for r in rs
                    if r.kind != STATIC)
    static = sorted((uid, r.ok) for uid, rs in (results or {}).items() for r in rs
                    if r.kind == STATIC)
    d = {
        "analyzer": analyzer.identity(),
        "service": [service.name, service.deadline_ms, service.qos_quantile, service.session_pps,
                    service.min_instances, service.max_queuing_delay_s,
                    json.dumps(service.requirements, sort_keys=True, default=str)],
        # a zone of 1,000 hosts is 1,000 candidates: hash them as one string (a JSON list of
        # lists of them took a third of a placement's time)
        "candidates": hashlib.sha256(repr(sorted(
            (c.key, c.env.uid, round(c.price_per_hour, 6),
             None if c.power_w_marginal is None else round(c.power_w_marginal),
             c.queuing_delay_s is None) for c in candidates)).encode()).hexdigest(),
        "probes": probes, "static": static,
    }
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Stage2Runner:
    """Re-runs ``analyzer`` only when its input fingerprint changed (per service name)."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer
        self._last: dict[str, tuple[str, list]] = {}
        self._lock = threading.Lock()

    def run(self, service: ServiceProfile, candidates: list[Candidate],
            results: dict) -> Stage2Result:
        fp = fingerprint(self.analyzer, service, candidates, results)
        with self._lock:
            prev = self._last.get(service.name)
        if prev is not None and prev[0] == fp:
            return Stage2Result(prev[1], fp, True,
                                f"inputs unchanged (fingerprint {fp}): previous ranking reused")
        scores = self.analyzer.analyze(service, candidates, results)
        with self._lock:
            self._last[service.name] = (fp, scores)
        why = ("first ranking for this service" if prev is None else
               f"inputs changed (fingerprint {prev[0]} -> {fp}): re-ranked")
        return Stage2Result(scores, fp, False, why)

    def forget(self, service_name: str | None = None) -> None:
        with self._lock:
            if service_name is None:
                self._last.clear()
            else:
                self._last.pop(service_name, None)
