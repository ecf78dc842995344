# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The load probe's confirm phase: the QoE capacity's definition itself, measured.

A 2 s probe step does not show what a 16 s session meets at the same rate (bench/results/slots.md,
14:10: 2 s steps at 400-450 sessions p99 7.8-8.9 ms, 16 s runs at 314-343 p99 8-52 ms; the
late-share reading 457 against a 285 reference). So a load probe given a :class:`SessionTarget`
(``LoadProbe(confirm=...)``; stage 1's: ``[evaluator] load_probe_confirm_levels``) then runs
sessions of the target's length from the fast estimate, judged one by one
(:func:`judge_sessions`), bracketed and bisected (:func:`next_confirm`), and the capacity at that
deadline and quantile is read off them by the per-session reference's own rule
(:func:`session_reference`, :func:`confirmed_capacity`). bench/slotsqoe.py's per-session
reference judges by the same functions.

:func:`fluidvim.evaluator.qoeslots.qoe_capacity` reads a confirm block
(:func:`confirm_for`) when it matches the service's deadline, quantile and session rate; the fast
steps otherwise.
"""

from __future__ import annotations

import dataclasses
import math

from .model import ProbeResult
from .qoeslots import sessions_over
from .slots import CapacityEstimate

DEFAULT_SESSION_S = 16.0    # a session's length when the service names none (the bench's runs)
CONFIRM_RUNS = 7            # session-length runs at most: 7 x (16 s + ~1 s) ~ 2 min
CONFIRM_REPEATS = 2         # runs the capacity's own count must hold in (as the reference's)
CONFIRM_TOLERANCE = 0.05    # stop when the bracket is within 5 % of its lower end
CONFIRM_GROW = 1.5          # a confirmed estimate is tried 1.5 x higher, one that fails halved


@dataclasses.dataclass(frozen=True)
class SessionTarget:
    """What a confirm phase measures (:class:`fluidvim.evaluator.probes.LoadProbe` ``confirm``):
    ``session_s`` s sessions of the probe's ``session_pps`` run together, each judged at its own
    ``quantile`` against ``deadline_ms`` (or more than ``max_loss`` lost,
    :func:`judge_sessions`); a count holds when at most ``max_over_pct`` % of them are over.
    ``runs``: session-length runs at most (the phase's time is ~``runs`` x (``session_s`` + 1 s));
    ``tolerance``: the bracket width, as a share of its lower end, at which it stops;
    ``repeats``: the runs the count it ends on must hold in, pooled (one run of a count can be
    0 % or 100 % over on a shared host: bench/results/slots.md)."""

    deadline_ms: float
    quantile: float
    session_s: float = DEFAULT_SESSION_S
    max_over_pct: float = 1.0
    max_loss: float = 0.01
    runs: int = CONFIRM_RUNS
    tolerance: float = CONFIRM_TOLERANCE
    repeats: int = CONFIRM_REPEATS

    def __post_init__(self):
        if not self.deadline_ms > 0:
            raise ValueError(f"SessionTarget deadline_ms must be > 0, got {self.deadline_ms!r}")
        if not 0 < self.quantile < 1:
            raise ValueError(f"SessionTarget quantile must be in (0, 1), got {self.quantile!r}")
        if not self.session_s > 0:
            raise ValueError(f"SessionTarget session_s must be > 0 (seconds one session lasts), "
                             f"got {self.session_s!r}")
        if not 0 <= self.max_over_pct < 100 or not 0 <= self.max_loss < 1:
            raise ValueError("SessionTarget max_over_pct must be in [0, 100) and max_loss in "
                             f"[0, 1), got {self.max_over_pct!r}, {self.max_loss!r}")
        if int(self.runs) < 1 or not 0 <= self.tolerance < 1 or int(self.repeats) < 1:
            raise ValueError(f"SessionTarget runs and repeats must be >= 1 and tolerance in "
                             f"[0, 1), got {self.runs!r}, {self.repeats!r}, {self.tolerance!r}")

    def packets(self, session_pps: float) -> int:
        """Packets one session sends (the ``session_packets`` of :func:`late_capacity`)."""
        return max(1, round(self.session_s * float(session_pps)))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def judge_sessions(per: dict, deadline_ms: float, quantile: float, max_loss: float = 0.01) -> dict:
    """Sessions run together against the deadline (``per``: loadgen's ``per_session``, with
    ``--per-session-quantile``): a session is over when its own quantile exceeds ``deadline_ms``
    (or nothing came back) or it lost more than ``max_loss``. With the late counts (loadgen's
    ``--deadline-ms``) also the pooled late fraction and the share expected over if every packet
    were late independently at it (:func:`sessions_over`). The one rule the confirm phase, the
    bench's per-session reference and its admission judge by."""
    lat, loss = per["latency_ms"], per["loss"]
    over = [i for i, (x, lo) in enumerate(zip(lat, loss))
            if x is None or x > deadline_ms or (lo or 0.0) > max_loss]
    out = {"admitted_over_deadline": len(over), "over_sessions": over}
    late, sent = per.get("late"), per.get("sent")
    if late is not None and sent:
        n_late, n_sent = sum(x or 0 for x in late), sum(sent)
        p = n_late / max(1, n_sent)
        expect = [sessions_over(n, p, quantile) for n in sent if n]
        out.update(late_per_session=late, sent_per_session=sent,
                   pooled_late_fraction=round(p, 5),
                   expected_over_pct_if_independent=round(100.0 * sum(expect)
                                                          / max(1, len(expect)), 2))
    return out


def session_reference(points: list[dict], max_over_pct: float = 1.0) -> dict:
    """The capacity by the target's definition: the largest session count at which at most
    ``max_over_pct`` % of sessions run together are over the deadline (their own quantile, or
    lost), read off runs of such sessions (``points``: ``sessions``, ``over_pct``; with repeats,
    pooled over them: :func:`pool_repeats`). Ascending, the first count over the limit ends it
    (a count past it that happens to pass is noise of the host, not room): so it is the largest
    count such that every count tried up to it met the limit, and one burst cannot make it
    non-monotone. It is interpolated linearly in the over share between the last count within
    the limit and that one. ``bound``: "between" that pair, "at least" (none over: the top
    count), "below" (the lowest count already over: slots 0)."""
    pts = sorted(points, key=lambda p: p["sessions"])
    if not pts:
        raise ValueError("session_reference: the sweep has no points (sessions, over_pct)")
    bad = next((i for i, p in enumerate(pts) if p["over_pct"] > max_over_pct), None)
    if bad is None:
        return {"slots": pts[-1]["sessions"], "bound": "at least", "lo": pts[-1]["sessions"],
                "hi": None}
    if bad == 0:
        return {"slots": 0, "bound": "below", "lo": None, "hi": pts[0]["sessions"]}
    lo, hi = pts[bad - 1], pts[bad]
    f = (max_over_pct - lo["over_pct"]) / (hi["over_pct"] - lo["over_pct"])
    slots = int(lo["sessions"] + f * (hi["sessions"] - lo["sessions"]))
    return {"slots": slots, "bound": "between", "lo": lo["sessions"], "hi": hi["sessions"]}


def pool_repeats(runs: dict[int, list[dict]]) -> list[dict]:
    """Per session count, its runs (``over``: sessions over, ``n``: sessions judged) pooled:
    ``over_pct`` = all sessions over / all judged, the target's own share (sessions served at
    their QoE, whichever run they were in); ``over_pct_each`` per run and ``over_pct_median``
    (the typical run's) next to it."""
    out = []
    for n, rs in sorted(runs.items()):
        over, judged = sum(r["over"] for r in rs), sum(r["n"] for r in rs)
        each = sorted(100.0 * r["over"] / max(1, r["n"]) for r in rs)
        med = (each[(len(each) - 1) // 2] + each[len(each) // 2]) / 2
        out.append({"sessions": n, "over_pct": round(100.0 * over / max(1, judged), 2),
                    "repeats": len(rs), "over_pct_each": [round(x, 2) for x in each],
                    "over_pct_median": round(med, 2)})
    return out


def _by_count(runs: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in runs:
        out.setdefault(int(r["sessions"]), []).append(r)
    return out


def next_confirm(runs: list[dict], estimate: int, max_sessions: int,
                 target: SessionTarget) -> int | None:
    """The next session count the confirm phase runs, None when it is done. ``runs``: the
    session-length runs so far (``sessions``, ``over``, ``n``). First the fast estimate; then,
    pooled per count (:func:`pool_repeats`) and read by :func:`session_reference`: a bracket
    (last count held, first over) is bisected until its width is within ``tolerance`` of its
    lower end; a phase where every count held grows by CONFIRM_GROW (up to ``max_sessions``),
    one where every count was over halves the lowest (down to 1). When the search is done, or
    at its last run, the count it would end on (the bracket's lower end) is run again until it
    has ``target.repeats`` runs: pooled with them it must still hold, else the search goes on
    below it. At most ``target.runs`` runs."""
    if len(runs) >= int(target.runs):
        return None
    if not runs:
        return max(1, min(int(max_sessions), int(estimate)))
    by = _by_count(runs)
    ref = session_reference(pool_repeats(by), target.max_over_pct)
    n: int | None
    if ref["bound"] == "at least":
        top = ref["lo"]
        n = min(int(max_sessions), max(top + 1, math.ceil(top * CONFIRM_GROW)))
    elif ref["bound"] == "below":
        n = max(1, ref["hi"] // 2)
    else:
        lo, hi = ref["lo"], ref["hi"]
        n = None if hi - lo <= max(1.0, target.tolerance * lo) else (lo + hi) // 2
    if n is not None and n in by:
        n = None                                    # run already: the reading would not change
    lo = ref["lo"]
    if (lo is not None and len(by.get(lo, ())) < int(target.repeats)
            and (n is None or len(runs) == int(target.runs) - 1)):
        return lo                                   # the count it ends on, once more
    return n


def confirm_blocks(metrics: dict | None) -> list[dict]:
    """A load probe result's confirm blocks (``metrics["confirm"]``: one block, a dict, for a
    probe with one target - bench/slotsqoe.py's and the usual stage 1's - or a list of them, one
    per target: :class:`fluidvim.evaluator.probes.LoadProbe` ``confirm``)."""
    conf = (metrics or {}).get("confirm")
    if not conf:
        return []
    return [conf] if isinstance(conf, dict) else [c for c in conf if isinstance(c, dict)]


def confirm_failed(metrics: dict | None) -> bool:
    """Whether one of the result's confirm phases stopped on a failed run (its target is read
    off the fast steps): stage 1 keeps such a result only as long as a failed one."""
    return any(c.get("error") for c in confirm_blocks(metrics))


def has_target(result: ProbeResult, target: SessionTarget) -> bool:
    """Whether ``result`` carries a confirm phase run for exactly ``target`` (finished or not):
    a cached load probe result without it was measured before the target was configured, and
    stage 1 probes again rather than announce the fast estimate for an hour."""
    want = target.as_dict()
    return any(c.get("target") == want for c in confirm_blocks(result.metrics))


def confirm_for(result: ProbeResult, deadline_ms: float, quantile: float,
                session_pps: float | None = None,
                session_packets: int | None = None) -> dict | None:
    """The probe's confirm phase (a block of ``metrics["confirm"]``: :func:`confirm_blocks`)
    that measured this deadline, quantile and session rate (and, with ``session_packets``,
    sessions of that many packets); None when none did, or when its runs failed (an unfinished
    search): the fast steps are read."""
    spp = float(session_pps or result.metrics.get("session_pps") or 0)
    if not (spp > 0 and math.isclose(float(result.metrics.get("session_pps") or 0), spp)):
        return None
    for conf in confirm_blocks(result.metrics):
        if not conf.get("runs") or conf.get("error"):
            continue
        t = conf.get("target") or {}
        if not (math.isclose(float(t.get("deadline_ms", -1)), float(deadline_ms))
                and math.isclose(float(t.get("quantile", -1)), float(quantile))):
            continue
        if (session_packets is not None
                and round(float(t["session_s"]) * spp) != int(session_packets)):
            continue
        return conf
    return None


def confirmed_capacity(result: ProbeResult, conf: dict) -> CapacityEstimate:
    """The capacity the confirm phase ``conf`` measured: :func:`session_reference` over its
    session-length runs, pooled per count: the target's own definition, on the probe VNF."""
    spp = float(result.metrics.get("session_pps") or 0)
    t = conf["target"]
    pooled = pool_repeats(_by_count(conf["runs"]))
    ref = session_reference(pooled, float(t.get("max_over_pct", 1.0)))
    slots = int(ref["slots"])
    tried = ", ".join(f"{p['sessions']}: {p['over_pct']:g} %" for p in pooled)
    basis = (f"confirmed by {len(conf['runs'])} run(s) of {t['session_s']:g} s sessions judged "
             f"each at its own p{float(t['quantile']) * 100:g} against {t['deadline_ms']:g} ms "
             f"(over: {tried}; the fast steps' estimate {conf.get('estimate')}): "
             f"{ref['bound']} {ref['lo']}..{ref['hi']} -> {slots} slots")
    cap_sessions = result.metrics.get("max_sessions")
    if cap_sessions is not None and slots > int(cap_sessions):
        basis += f"; capped by the flow table ({cap_sessions} sessions)"
        slots = int(cap_sessions)
    return CapacityEstimate(slots * spp, slots, spp, ref["bound"] != "at least", basis)


