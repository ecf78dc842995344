# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The load probe's confirm phase: the QoE capacity's definition itself, measured.

A 2 s probe step does not show what a 16 s session meets at the same rate (bench/results/slots.md,
14:10: 2 s steps at 400-450 sessions p99 7.8-8.9 ms, 16 s runs at 314-343 p99 8-52 ms; the
late-share reading 457 against a 285 reference). So a load probe given a :class:`SessionTarget`
(``LoadProbe(confirm=...)``; stage 1's: ``[evaluator] load_probe_confirm_levels``) then runs
sessions of the target's length from the fast estimate, judged one by one
(:func:`judge_sessions`, the per-session reference's rule), bracketed and bisected
(:func:`next_confirm`), and the capacity at that deadline and quantile is read off them with a
margin under the smallest count that ever failed and repeated holds at the count announced
(:func:`confirm_reading`, :func:`confirmed_capacity`): safe at a knee where a run holds or fails
for all its sessions at random. bench/slotsqoe.py's per-session reference judges sessions by the
same function and reads its sweep by :func:`session_reference`.

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
CONFIRM_RUNS = 9            # session-length runs at most: 9 x (16 s + ~1 s) ~ 2.5 min
CONFIRM_REPEATS = 3         # runs the announced count must hold in, every one of them
# announce at most (1 - margin) x the smallest count that ever failed. Against a reference run
# on the same host state (bench.slots qoe --interleave on; tests/unit/test_confirm_interleaved.py)
# it costs ~5 points on average, 0.05 ~2-4 at about twice the chance a run at the announced count
# fails: it stays until a quiet run admits at the reference itself within 1 % over
# (--admit-at-reference, docs/slots.md "The reference interleaved with the confirm")
CONFIRM_MARGIN = 0.10
CONFIRM_GROW = 1.5          # a confirmed estimate is tried 1.5 x higher, one that fails halved
CONFIRM_RERUNS = 2          # runs more, at most, for failed runs spoiled by others (set_aside)
# A failed run whose VNF's steal share is this much (a share of the run: 0.06 = ~1 s of a 16 s
# run) above every run that held at its count or above is run again (spoiled_by_steal). Set
# between the two failures of held counts recorded on the quiet 2-core host: 22:40's 212 at
# +0.073 (22 % under that run's reference: spoiled) and 20:41's 299 at +0.05 (over that run's
# reference 285: a real failure at the knee, which must count)
STEAL_SPOILED_EXCESS = 0.06
# Until a confirm lands, a probe that confirms announces this share of the fast steps' reading
# (:func:`unconfirmed_capacity`). Measured: the fast reading was 17-57 % over the per-session
# reference on the quiet 2-core host of bench/results/slots.md (quiet run of record: 418 against
# 267, i.e. the reference is 0.64 x the fast reading); half of it is under the reference with
# room (209 of 267: every confirm run of 209 held), and the admission at it is benched
# (bench/slotsqoe.py ``unconfirmed``). On a host where the fast reading is under the reference
# (49 % under on another machine) the half is lower still: safe, not accurate, until the
# confirm lands.
UNCONFIRMED_SHARE = 0.5


@dataclasses.dataclass(frozen=True)
class SessionTarget:
    """What a confirm phase measures (:class:`fluidvim.evaluator.probes.LoadProbe` ``confirm``):
    ``session_s`` s sessions of the probe's ``session_pps`` run together, each judged at its own
    ``quantile`` against ``deadline_ms`` (or more than ``max_loss`` lost,
    :func:`judge_sessions`); a run holds when at most ``max_over_pct`` % of its sessions are
    over. ``runs``: session-length runs at most (the phase's time is ~``runs`` x (``session_s``
    + 1 s)), plus ``reruns`` at most for runs whose failure was not their count's (another
    process took the host's CPU, far more steal, or a higher count held: :func:`set_aside`);
    ``margin``: the count announced is at most
    (1 - ``margin``) x the smallest count that failed in any run, and ``repeats``: it held in
    that many runs, every one of them (:func:`confirm_reading`; one run of a count near the
    knee can be 0 % or 100 % over on a shared host: bench/results/slots.md)."""

    deadline_ms: float
    quantile: float
    session_s: float = DEFAULT_SESSION_S
    max_over_pct: float = 1.0
    max_loss: float = 0.01
    runs: int = CONFIRM_RUNS
    margin: float = CONFIRM_MARGIN
    repeats: int = CONFIRM_REPEATS
    reruns: int = CONFIRM_RERUNS

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
        if int(self.runs) < 1 or not 0 <= self.margin < 1 or int(self.repeats) < 1:
            raise ValueError(f"SessionTarget runs and repeats must be >= 1 and margin in "
                             f"[0, 1), got {self.runs!r}, {self.repeats!r}, {self.margin!r}")
        if int(self.reruns) < 0:
            raise ValueError(f"SessionTarget reruns must be >= 0, got {self.reruns!r}")

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


def _run_held(run: dict, max_over_pct: float) -> bool:
    return 100.0 * run["over"] / max(1, run["n"]) <= max_over_pct


def spoiled_by_steal(run: dict, runs: list[dict], max_over_pct: float = 1.0) -> dict | None:
    """Whether the failed run ``run`` is spoiled by CPU its VNF was denied rather than by its
    count: its VNF's steal share (``vnf_steal_share``, the host's run delay of its vCPU over
    the run) is at least :data:`STEAL_SPOILED_EXCESS` above that of *every* run in ``runs``
    that held at the same count or a higher one (a higher count that held is at least as hard).
    None when it is not (held, no steal reading, no such held run, or not that far above);
    else {"steal", "held_steal_max", "held_at"}: what it was compared with.

    Why: on the 2-core host of bench/results/slots.md (quiet run 2026-11-28 22:40) 212
    sessions held twice at steal 0.44 / 0.47 and failed once at 0.54 (+0.073), a single
    ~0.4 s stall making every session late, and the margin rule then cut the capacity to
    0.9 x 212 = 190 against a reference of 273. A failure at the knee looks otherwise: the
    20:41 run's 299 failed at 0.65 after holding at 0.60 (+0.05) above that run's reference
    (285), and the 22:40 reference's 285 failed at 0.49 and held at 0.48; those must count.
    The rule is weak evidence all the same: held runs of one count spread by up to ~0.08 in
    steal on that host (the reference's 261: 0.43 / 0.51). Steal also rises when a VNF falls behind (its
    vCPU stops halting), so a high steal alone says nothing: only a failure well above runs of
    the same load that held is read as the run's own bad luck, and only once per count
    (:func:`counted_runs`)."""
    steal = run.get("vnf_steal_share")
    if steal is None or _run_held(run, max_over_pct):
        return None
    n = int(run["sessions"])
    held = [(float(r["vnf_steal_share"]), int(r["sessions"])) for r in runs
            if r is not run and int(r["sessions"]) >= n and r.get("vnf_steal_share") is not None
            and _run_held(r, max_over_pct)]
    if not held:
        return None
    top = max(s for s, _ in held)
    if float(steal) < top + STEAL_SPOILED_EXCESS - 1e-9:
        return None
    return {"steal": float(steal), "held_steal_max": round(top, 4),
            "held_at": sorted({m for _, m in held})}


def held_above(run: dict, runs: list[dict], max_over_pct: float = 1.0) -> list[int]:
    """The counts above the failed run ``run``'s that held in *every* run of them in ``runs``
    (ascending; [] when ``run`` held or none did): a failure under a count that held is not
    monotone in the load, so the knee's noise rather than the count's capacity - once.

    Why: the quiet run of record 2026-11-29 01:38 (docs/slots.md) ran 274 sessions
    (held), then 259, which failed for all its sessions at a steal share 0.04 above 274's (under
    :data:`STEAL_SPOILED_EXCESS`); counted, 259 set the ceiling (0.9 x 259 = 233) against a
    reference of 291 that held 291 twice (-19.9 %). One failure under a hold says the knee's band
    reaches down to it, as one hold under a failure says nothing of a count's room; which of the
    two was luck only a rerun tells (:func:`set_aside`: the count is run again, and a second
    failure counts)."""
    if _run_held(run, max_over_pct):
        return []
    n = int(run["sessions"])
    by = _by_count([r for r in runs if int(r["sessions"]) > n])
    return sorted(m for m, rs in by.items() if all(_run_held(r, max_over_pct) for r in rs))


def set_aside(runs: list[dict], max_over_pct: float = 1.0,
              reruns: int | None = CONFIRM_RERUNS) -> dict[int, dict]:
    """The runs a reading leaves out, by index into ``runs``: {index: why}. A run is left
    out when it failed and

    - the host was busy with other work (``contended``: processes other than the probe VNF,
      its traffic client and the probe itself took more than
      :data:`fluidvim.evaluator.probes.CONTENDED_OTHERS_CORES` in some second of it;
      ``why["reason"]`` "contended"). Such a run measured the other work: on the 2-core host
      of bench/results/slots.md (2026-11-28 19:18) the confirm's runs failed at 238-295
      sessions while other helpers' tests ran, with stalls of 0.1-0.5 s hitting every
      session at once, and the reference held 280 twice minutes later; or
    - its VNF's steal share was far above that of the runs that held at that count or above
      (:func:`spoiled_by_steal`; "steal"); or
    - a higher count held in every run of it (:func:`held_above`; "non-monotonic": the failure
      contradicts that hold, and a rerun decides which was the knee's luck);

    and it is the first failure of its count (a second failure of the same count is counted,
    busy host or not, so a host that stays busy reads as its own, lower, capacity rather than
    as no failure at all), and fewer than ``reruns`` runs were left out before it (None: no
    such cap; the search runs a count left out again: :func:`next_confirm`). A held run always
    counts (it held even so)."""
    out: dict[int, dict] = {}
    counts: set[int] = set()
    for i, r in enumerate(runs):
        n = int(r["sessions"])
        if _run_held(r, max_over_pct) or n in counts:
            continue
        if reruns is not None and len(out) >= int(reruns):
            break
        if r.get("contended"):
            why = {"reason": "contended"}
        elif (st := spoiled_by_steal(r, runs, max_over_pct)) is not None:
            why = {"reason": "steal", **st}
        elif above := held_above(r, runs, max_over_pct):
            why = {"reason": "non-monotonic", "held_at": above}
        else:
            continue
        counts.add(n)
        out[i] = dict(why, sessions=n)
    return out


def counted_runs(runs: list[dict], max_over_pct: float = 1.0,
                 reruns: int | None = CONFIRM_RERUNS) -> list[dict]:
    """The runs a reading counts: all but those :func:`set_aside` leaves out."""
    out = set_aside(runs, max_over_pct, reruns)
    return [r for i, r in enumerate(runs) if i not in out]


def margin_limit(first_failed: int, margin: float) -> int:
    """The largest count the confirm phase may announce below ``first_failed`` (the smallest
    count that failed in any run): (1 - ``margin``) x it, and below it whatever the margin."""
    return max(0, min(int(first_failed) - 1, math.floor((1.0 - margin) * first_failed + 1e-9)))


def confirm_reading(runs: list[dict], max_over_pct: float = 1.0,
                    margin: float = CONFIRM_MARGIN, reruns: int | None = CONFIRM_RERUNS) -> dict:
    """The capacity the confirm phase's session-length runs (``sessions``, ``over``, ``n``)
    show, safe at a bimodal knee: the largest count that held in *every* run of it (at most
    ``max_over_pct`` % of its sessions over) and is at most (1 - ``margin``) x the smallest
    count that failed in *any* run (:func:`margin_limit`).

    Why not the reference's rule (:func:`session_reference`, pooled, interpolated up to the
    first count over): on the 2-core host of bench/results/slots.md (2026-11-28 16:57) a run
    between 286 and 338 sessions either held (p99 8-9 ms) or failed for all its sessions
    (15-26 ms) at the same steal share. The confirm saw 327 hold twice and announced it; the
    reference saw 306 fail and 327 fail twice (reference 286), and all 327 admitted sessions
    were over. A count that held in a few runs right under one that failed is luck at such a
    knee; a count ``margin`` under the smallest failure is not in the band (here 0.9 x 338 =
    304, 0.9 x 306 = 275). On a clean (unimodal) knee C the smallest failure is > C, so the
    announced count is >= (1 - ``margin``) x C: with the default 10 %, never under the issue's
    ±10 % band by the rule itself.

    ``bound``: "at least" (no run failed: the top count), "margin" (below the first failure,
    ``hi``), "below" (nothing held under the limit: 0). ``runs_at``: the runs of the count
    announced (``repeats`` when the search finished). Failed runs spoiled by something other
    than their count (a busy host, far more steal than runs of that count that held) are left
    out by :func:`set_aside`, at most ``reruns`` of them (``dropped``: how many, ``set_aside``:
    which and why)."""
    out = set_aside(runs, max_over_pct, reruns)
    kept = [r for i, r in enumerate(runs) if i not in out]
    if not kept:                                    # only busy failures: they count
        kept, out = runs, {}
    rd = _reading(kept, max_over_pct, margin)
    rd["dropped"] = len(out)
    if out:
        rd["set_aside"] = [dict(w, run=i) for i, w in sorted(out.items())]
    return rd


def _reading(kept: list[dict], max_over_pct: float, margin: float) -> dict:
    """:func:`confirm_reading` of the runs it counts."""
    by = _by_count(kept)
    if not by:
        raise ValueError("confirm_reading: no runs (sessions, over, n)")
    held = sorted(n for n, rs in by.items() if all(_run_held(r, max_over_pct) for r in rs))
    failed = sorted(set(by) - set(held))
    if not failed:
        top = held[-1]
        return {"slots": top, "bound": "at least", "lo": top, "hi": None, "limit": None,
                "runs_at": len(by[top])}
    first = failed[0]
    limit = margin_limit(first, margin)
    ok = [n for n in held if n <= limit]
    if not ok:
        return {"slots": 0, "bound": "below", "lo": None, "hi": first, "limit": limit,
                "runs_at": 0}
    return {"slots": ok[-1], "bound": "margin", "lo": ok[-1], "hi": first, "limit": limit,
            "runs_at": len(by[ok[-1]])}


def next_confirm(runs: list[dict], estimate: int, max_sessions: int,
                 target: SessionTarget) -> int | None:
    """The next session count the confirm phase runs, None when it is done. ``runs``: the
    session-length runs so far (``sessions``, ``over``, ``n``); read by
    :func:`confirm_reading`. First the fast estimate; then :func:`_search_step` (grow, halve,
    bisect towards the candidate c = (1 - ``margin``) x the smallest count that failed). The
    count the reading would announce is run again until it has ``target.repeats`` runs (a
    failure among them makes it the new smallest failure). When the budget left cannot afford
    a bisection step and those repeats, the last runs go to c itself: a c that held twice (or
    once, with one run left) is announced rather than a count far under it held three times
    (a bisection step is due only while the count announced, lo, is under 2c - F < (1 -
    ``margin``) x c). Why: the quiet run of record 2026-11-29 03:39 (docs/slots.md) held 299
    once, then failed it twice, so c = 269; with 7 of 9 counted runs spent its last two
    repeated 212 (-24.0 % against a reference of 279) instead of running 269 (-3.6 % had it
    held twice). On the Monte Carlo model (tests/unit/test_confirm_interleaved.py) "within
    +-10 %" rises by 0-8 points per knee band, the chance that a run at the count announced
    fails by at most ~0.01. At most ``target.runs`` runs counted
    (:func:`counted_runs`: a first failure of a count spoiled by a busy host, by far more
    steal than its held runs, or under a count that held is not, at most ``target.reruns`` of
    them, and the search runs that count again) and ``target.runs + target.reruns`` in all."""
    if len(runs) >= int(target.runs) + int(target.reruns):
        return None
    if not runs:
        return max(1, min(int(max_sessions), int(estimate)))
    total = len(runs)
    runs = counted_runs(runs, target.max_over_pct, int(target.reruns))
    if len(runs) >= int(target.runs):
        return None
    if not runs:                                    # only a dropped run: that count again
        return max(1, min(int(max_sessions), int(estimate)))
    rd = _reading(runs, target.max_over_pct, target.margin)
    n, bisecting = _search_step(_by_count(runs), rd, int(max_sessions), target.max_over_pct)
    cand = rd["slots"]
    need = int(target.repeats) - rd["runs_at"] if cand > 0 else 0
    left = min(int(target.runs) - len(runs), int(target.runs) + int(target.reruns) - total)
    if need > 0 and (n is None or (bisecting and left <= need)):
        # the last runs of the budget: c itself rather than the count announced once more
        return rd["limit"] if n is not None and rd["limit"] else cand
    return n


def _search_step(by: dict[int, list[dict]], rd: dict, max_sessions: int,
                 max_over_pct: float) -> tuple[int | None, bool]:
    """:func:`next_confirm`'s search step on the counted runs ``by`` (count: runs) and their
    reading ``rd``, and whether it is a bisection step (not c itself): while every count held,
    1.5 x the top (CONFIRM_GROW, up to ``max_sessions``); while nothing held below the smallest
    count that failed (F), half of F (down to 1). Then the candidate c (``rd["limit"]``,
    :func:`margin_limit`): with the largest count held below F (lo) under c, the midpoint of lo
    and F, but never above c (a failure there lowers F and c, a hold raises lo); once lo >= c,
    c itself. None: a count already run (only the repeats are left), or nothing to run."""
    first = rd["hi"]
    n: int | None
    bisecting = True
    if first is None:                               # every count held: grow
        top = rd["lo"]
        n = min(max_sessions, max(top + 1, math.ceil(top * CONFIRM_GROW)))
        n = None if n <= top else n
    else:
        held = [m for m, rs in by.items() if m < first
                and all(_run_held(r, max_over_pct) for r in rs)]
        c = rd["limit"]
        if not held:
            n = max(1, first // 2) if first > 1 else None
        elif c < 1:
            n = None
        else:
            lo = max(held)
            n = c if lo >= c else min(c, (lo + first) // 2)
            bisecting = n != c
        if n is not None and n in by:
            n = None                                # held already: only its repeats are left
    return n, bisecting


def _why_left_out(w: dict) -> str:
    """One :func:`set_aside` reason, as the capacity's basis names it."""
    if w["reason"] == "contended":
        return f"{w['sessions']} while other processes took the host's CPU"
    if w["reason"] == "steal":
        return (f"{w['sessions']} at VNF steal {w['steal']:.0%}, its held runs' at most "
                f"{w['held_steal_max']:.0%}")
    return f"{w['sessions']} under {', '.join(map(str, w['held_at']))} held"


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


def pending_targets(metrics: dict | None) -> list[dict]:
    """The targets (``SessionTarget.as_dict``) whose confirm phase a load probe result's probe
    runs in the background (``metrics["confirm_pending"]``): the result in hand is its fast
    steps; the confirmed one replaces it in the cache when the runs land."""
    return [t for t in (metrics or {}).get("confirm_pending") or () if isinstance(t, dict)]


def has_target(result: ProbeResult, target: SessionTarget) -> bool:
    """Whether ``result`` carries a confirm phase run for exactly ``target`` (finished or not,
    or under way in the background: :func:`pending_targets`): a cached load probe result
    without it was measured before the target was configured (or for other services), and
    stage 1 probes again rather than announce the fast estimate for an hour."""
    want = target.as_dict()
    return (any(c.get("target") == want for c in confirm_blocks(result.metrics))
            or want in pending_targets(result.metrics))


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
    """The capacity the confirm phase ``conf`` measured: :func:`confirm_reading` over its
    session-length runs (a block recorded before the margin was: the default margin)."""
    spp = float(result.metrics.get("session_pps") or 0)
    t = conf["target"]
    runs = conf["runs"]
    margin = float(t.get("margin", CONFIRM_MARGIN))
    rd = confirm_reading(runs, float(t.get("max_over_pct", 1.0)), margin,
                         int(t.get("reruns", CONFIRM_RERUNS)))
    slots = int(rd["slots"])
    tried = ", ".join(f"{p['sessions']}: {'/'.join(f'{x:g}' for x in p['over_pct_each'])} %"
                      for p in pool_repeats(_by_count(runs)))
    if rd["bound"] == "at least":
        how = f"none failed: at least {slots}"
    elif rd["bound"] == "below":
        how = (f"nothing held at or under {rd['limit']} = (1 - {margin:g}) x {rd['hi']}, the "
               "smallest count that failed: 0")
    else:
        how = (f"the largest count held in every run ({rd['runs_at']}) at or under "
               f"{rd['limit']} = (1 - {margin:g}) x {rd['hi']}, the smallest count that failed")
    if rd.get("dropped"):
        why = "; ".join(_why_left_out(w) for w in rd["set_aside"])
        how += f" ({rd['dropped']} failed run(s) left out, their counts run again: {why})"
    basis = (f"confirmed by {len(runs)} run(s) of {t['session_s']:g} s sessions judged "
             f"each at its own p{float(t['quantile']) * 100:g} against {t['deadline_ms']:g} ms "
             f"(over per run: {tried}; the fast steps' estimate {conf.get('estimate')}): "
             f"{how} -> {slots} slots")
    cap_sessions = result.metrics.get("max_sessions")
    if cap_sessions is not None and slots > int(cap_sessions):
        basis += f"; capped by the flow table ({cap_sessions} sessions)"
        slots = int(cap_sessions)
    return CapacityEstimate(slots * spp, slots, spp, rd["bound"] != "at least", basis)


def unconfirmed_capacity(result: ProbeResult, est: CapacityEstimate) -> CapacityEstimate:
    """The capacity announced off the fast steps ``est`` of a probe that confirms
    (``metrics["unconfirmed_share"]``, set by a :class:`~fluidvim.evaluator.probes.LoadProbe`
    with confirm targets) for a deadline and quantile it has not confirmed (yet: a confirm
    under way in the background, one that failed, or another service's level): that share of
    it (:data:`UNCONFIRMED_SHARE`, measured), at least 1 slot where the fast steps show one
    (0 means "no session within the deadline": the launch is refused). ``est`` as it is for a
    probe that does not confirm (no share: the A/B figure and the old behaviour)."""
    share = result.metrics.get("unconfirmed_share")
    if share is None or float(share) >= 1.0:
        return est
    share = float(share)
    slots = max(1, math.floor(est.slots * share + 1e-9)) if est.slots >= 1 else 0
    pending = pending_targets(result.metrics)
    why = ("its confirm phase is under way in the background" if pending else
           "not confirmed at this deadline and quantile")
    return CapacityEstimate(est.pps * share, slots, est.session_pps, est.saturated,
                            f"{est.basis}; unconfirmed ({why}): {share:g} x {est.slots} = "
                            f"{slots} slots (the fast steps read up to 57 % over the "
                            "per-session reference, bench/results/slots.md)")
