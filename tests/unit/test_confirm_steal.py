# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The confirm phase and a run spoiled by CPU its VNF was denied: a failed run whose VNF steal
share is far above that of the runs that held at its count (or above) is left out and its count
run again, once per count and at most ``reruns`` times; a count that fails again counts
(issue 23 item 1; bench/results/slots.md, quiet run 2026-11-28 22:40)."""

import pytest

from fluidvim.evaluator import confirm, probes
from fluidvim.evaluator.confirm import (
    STEAL_SPOILED_EXCESS,
    SessionTarget,
    confirm_reading,
    confirmed_capacity,
    counted_runs,
    next_confirm,
    set_aside,
    spoiled_by_steal,
)
from fluidvim.evaluator.model import ProbeResult


def run(n, held, steal=None, contended=False):
    over = 0 if held else n
    r = {"sessions": n, "n": n, "over": over, "over_pct": 100.0 * over / n,
         "contended": contended}
    if steal is not None:
        r["vnf_steal_share"] = steal
    return r


# the quiet run of record 2026-11-28 22:40, in the order the confirm ran them (sessions,
# held, VNF steal share): 212 held twice and failed once, 0.9 x 212 = 190 was announced
QUIET_2240 = [(378, False, 0.6023), (189, True, 0.40), (283, False, 0.5784),
              (236, False, 0.4675), (212, True, 0.4358), (212, True, 0.4655),
              (212, False, 0.5392), (190, True, 0.4194), (190, True, 0.3902)]


def test_a_failure_far_above_the_held_runs_steal_is_spoiled():
    runs = [run(n, h, s) for n, h, s in QUIET_2240[:7]]
    why = spoiled_by_steal(runs[6], runs)
    assert why == {"steal": 0.5392, "held_steal_max": 0.4655, "held_at": [212]}
    # the failures above every held count have nothing to be compared with: they count
    assert all(spoiled_by_steal(r, runs) is None for r in runs[:4])
    # held runs are never spoiled, nor runs without a steal reading
    assert spoiled_by_steal(runs[4], runs) is None
    assert spoiled_by_steal(run(212, False), runs) is None


def test_a_failure_at_the_knee_within_the_excess_counts():
    # 2026-11-28 20:41: 299 held at 0.60 and failed at 0.65 above that run's reference (285)
    runs = [run(299, True, 0.60), run(299, False, 0.60 + STEAL_SPOILED_EXCESS - 0.01)]
    assert spoiled_by_steal(runs[1], runs) is None
    assert counted_runs(runs) == runs
    # a held run at a *higher* count with less steal makes a lower count's failure spoiled
    runs = [run(250, False, 0.55), run(280, True, 0.45)]
    assert spoiled_by_steal(runs[0], runs)["held_at"] == [280]
    # ... but a held run at a lower count says nothing about this count
    runs = [run(250, False, 0.55), run(220, True, 0.30)]
    assert spoiled_by_steal(runs[0], runs) is None


def test_the_reading_leaves_the_spoiled_run_out_and_the_search_runs_its_count_again():
    t = SessionTarget(10.0, 0.99)
    runs = [run(n, h, s) for n, h, s in QUIET_2240[:7]]
    rd = confirm_reading(runs)
    assert rd["dropped"] == 1 and rd["set_aside"][0]["reason"] == "steal"
    assert rd["set_aside"][0]["run"] == 6 and rd["set_aside"][0]["sessions"] == 212
    # 236 failed (counted: no held run at or above it): 0.9 x 236 = 212 held twice
    assert (rd["slots"], rd["hi"], rd["runs_at"]) == (212, 236, 2)
    assert next_confirm(runs, 378, 4096, t) == 212            # its third run, again
    held = confirm_reading(runs + [run(212, True, 0.45)])
    assert (held["slots"], held["runs_at"]) == (212, 3)
    # the same count failing again is counted, steal or not: the margin rule takes over
    again = confirm_reading(runs + [run(212, False, 0.60)])
    assert again["dropped"] == 1 and again["hi"] == 212 and again["slots"] == 189
    # without the steal readings, the run of record's reading (190) is unchanged
    bare = [run(n, h) for n, h, _ in QUIET_2240]
    assert confirm_reading(bare)["slots"] == 190 and confirm_reading(bare)["dropped"] == 0


def test_left_out_runs_are_bounded_by_reruns_and_one_per_count():
    runs = [run(200, True, 0.30), run(200, False, 0.50), run(200, False, 0.50),
            run(180, True, 0.30), run(180, False, 0.50),
            run(160, True, 0.30), run(160, False, 0.50)]
    out = set_aside(runs, reruns=2)
    assert sorted(out) == [1, 4]                          # one per count, two at most
    assert {w["reason"] for w in out.values()} == {"steal"}
    assert sorted(set_aside(runs, reruns=None)) == [1, 4, 6]
    assert set_aside(runs, reruns=0) == {}
    # a busy host's failure and a spoiled one share the budget and the one-per-count rule
    mixed = [run(300, True, 0.3), run(300, False, 0.5, contended=True), run(300, False, 0.5)]
    assert [w["reason"] for w in set_aside(mixed).values()] == ["contended"]


def _search(estimate, capacity, target, spoiled_at=()):
    """next_confirm against a host holding n iff n <= capacity (steal 0.001 x n), whose runs
    number ``spoiled_at`` (0-based) fail whatever their count at steal 0.9."""
    runs = []
    while (n := next_confirm(runs, estimate, 4096, target)) is not None:
        k = len(runs)
        bad = k in spoiled_at
        runs.append(run(n, n <= capacity and not bad, 0.9 if bad else 0.001 * n))
    return runs


@pytest.mark.parametrize("estimate,capacity", [(378, 273), (300, 285), (200, 285)])
def test_a_spoiled_repeat_does_not_cut_the_capacity(estimate, capacity):
    t = SessionTarget(10.0, 0.99)
    quiet = _search(estimate, capacity, t)
    want = confirm_reading(quiet)
    # spoil the first repeat of the count announced (a held count run again)
    k = next(i for i, r in enumerate(quiet)
             if r["sessions"] == want["slots"] and any(p["sessions"] == want["slots"]
                                                      for p in quiet[:i]))
    spoiled = _search(estimate, capacity, t, spoiled_at=(k,))
    assert confirm_reading(spoiled)["slots"] == want["slots"]
    assert len(spoiled) <= t.runs + t.reruns
    assert spoiled[k + 1]["sessions"] == spoiled[k]["sessions"]   # the very next run
    # a host that spoils every repeat: after the reruns they count, the capacity is cut
    every = _search(estimate, capacity, t, spoiled_at=range(k, 100))
    assert len(every) <= t.runs + t.reruns
    assert confirm_reading(every)["slots"] < want["slots"]


def test_confirmed_capacity_says_which_runs_were_left_out_and_why():
    runs = [run(n, h, s) for n, h, s in QUIET_2240[:7]] + [run(212, True, 0.45)]
    t = SessionTarget(10.0, 0.99)
    res = ProbeResult(env_uid="e", kind="load", ok=True,
                      metrics={"session_pps": 100.0, "max_sessions": 4096})
    est = confirmed_capacity(res, {"target": t.as_dict(), "runs": runs, "estimate": 378})
    assert est.slots == 212
    assert "212 at VNF steal 54%, its held runs' at most 47%" in est.basis
    # a block recorded before reruns was a field: the default budget
    old = {k: v for k, v in t.as_dict().items() if k != "reruns"}
    assert confirmed_capacity(res, {"target": old, "runs": runs}).slots == 212


def test_probe_confirm_marks_and_reruns_a_spoiled_run(monkeypatch):
    """LoadProbe._confirm: the spoiled run is marked ``set_aside`` in the block and its count
    run again; the block keeps every run with its steal."""
    plan = list(QUIET_2240[:7]) + [(212, True, 0.45)]
    t = SessionTarget(10.0, 0.99)
    probe = probes.LoadProbe(confirm=t)
    served = []

    def session_run(net, stats_fn, instance_id, n, target):
        want, held, steal = plan[len(served)]
        assert n == want
        served.append(n)
        return run(n, held, steal)

    class Est:
        slots = 378

    monkeypatch.setattr(probe, "_session_run", session_run)
    monkeypatch.setattr(probes.qoeslots, "fast_capacity", lambda *a, **k: Est())
    waited = []
    monkeypatch.setattr(probes, "wait_quiet", lambda fn: waited.append(1) or 0.0)
    seen = []
    env = type("Env", (), {"uid": "e1"})()
    block = probe._confirm(None, None, "i1", env, {"steps": []}, seen.append, t)
    assert [r["sessions"] for r in block["runs"]][:8] == [n for n, _, _ in plan]
    assert block["runs"][6]["set_aside"] == "steal" and waited == [1]
    assert all("vnf_steal_share" in r for r in block["runs"])
    assert seen[6]["set_aside"] == "steal"
    assert confirm_reading(block["runs"])["slots"] >= 212
    assert confirm.CONFIRM_RERUNS == t.reruns


def test_the_reference_sets_aside_by_the_same_steal_rule():
    """bench/slotsqoe.py's per-session reference leaves out the runs the confirm phase would
    (confirm.spoiled_by_steal over its runs so far), so the yardstick and the confirm agree."""
    from bench.slotsqoe import set_aside as ref_set_aside

    def ref_run(n, over_pct, steal, contended=False):
        return {"sessions": n, "over_pct": over_pct,
                "accounting": {"contended": contended, "vcpu_steal_share": steal}}

    runs = {212: [ref_run(212, 0.0, 0.44), ref_run(212, 0.0, 0.47)]}
    assert ref_set_aside(ref_run(212, 100.0, 0.54), [], runs) == "steal"
    assert ref_set_aside(ref_run(212, 100.0, 0.50), [], runs) is None      # within 0.06
    assert ref_set_aside(ref_run(236, 100.0, 0.60), [], runs) is None      # nothing above
    assert ref_set_aside(ref_run(212, 100.0, 0.54), [{"sessions": 212}], runs) is None
    assert ref_set_aside(ref_run(212, 100.0, 0.2, True), [], runs) == "contended"
    assert ref_set_aside(ref_run(212, 0.5, 0.9), [], runs) is None         # held
