# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The confirm phase against the per-session reference on the *same* knee (issue 23 item 1;
docs/slots.md "The reference interleaved with the confirm"): what ``bench.slots qoe
--interleave on`` compares when the host's drift hits both alike. The reference is the bench's
own procedure (bench/slotsqoe.py :func:`reference_counts` over :func:`sweep_counts` from half
to the whole fast estimate, :func:`session_reference` of :func:`pool_repeats`), the confirm the
product's (:func:`next_confirm`, :func:`confirm_reading`); a run of n sessions holds (all its
sessions within) with a chance ``p_hold(n)``, else fails for all of them, as on the 2-core host
of bench/results/slots.md.

``PYTHONPATH=. python tests/unit/test_confirm_interleaved.py [trials]`` prints the Monte Carlo
table docs/slots.md quotes (margins 0.10, 0.05, 0 on knee bands read off the quiet runs)."""

import random
import sys

from bench.slotsqoe import INTERLEAVE_LO, reference_counts, sweep_counts
from fluidvim.evaluator import confirm as confirming
from fluidvim.evaluator.confirm import (
    SessionTarget,
    confirm_reading,
    next_confirm,
    pool_repeats,
    session_reference,
)


def linear_knee(lo, hi):
    """A run of n sessions holds surely up to ``lo``, never from ``hi``, linearly between."""
    def p_hold(n):
        return 1.0 if n <= lo else 0.0 if n >= hi else (hi - n) / (hi - lo)
    return p_hold


def repeat_at_budget_end(runs, estimate, max_sessions, target):
    """:func:`next_confirm` as it was before session 26: where the budget left cannot afford a
    bisection step and the repeats, the count announced once more instead of the limit c
    (docs/slots.md "The last runs of the budget"), for the table's comparison."""
    n = next_confirm(runs, estimate, max_sessions, target)
    kept = confirming.counted_runs(runs, target.max_over_pct, int(target.reruns))
    if n is None or not kept:
        return n
    rd = confirming._reading(kept, target.max_over_pct, target.margin)
    step, bisecting = confirming._search_step(confirming._by_count(kept), rd, max_sessions,
                                              target.max_over_pct)
    if bisecting and step is not None and n != step and n == rd["limit"]:
        return rd["slots"]
    return n


def confirmed(estimate, target, p_hold, rng, search=next_confirm):
    runs = []
    while (n := search(runs, estimate, 4096, target)) is not None:
        held = rng.random() < p_hold(n)
        runs.append({"sessions": n, "n": n, "over": 0 if held else n})
    return confirm_reading(runs, target.max_over_pct, target.margin, target.reruns)["slots"]


def referenced(estimate, p_hold, rng, points=5, repeats=2, refine=2):
    runs: dict = {}
    for n in reference_counts(sweep_counts(estimate, points, INTERLEAVE_LO, 1.0), runs,
                              repeats, refine):
        held = rng.random() < p_hold(n)
        runs.setdefault(n, []).append({"over": 0 if held else n, "n": n})
    return session_reference(pool_repeats(runs))["slots"]


def test_on_a_clean_knee_the_fair_comparison_is_in_band():
    # a count holds iff it is at most C: the confirm reads within its margin under C and the
    # interleaved reference at C (within its bisection), so the error is inside +-10 %
    rng = random.Random(0)
    for c in (40, 180, 291, 324):
        for est in (int(1.13 * c), int(1.57 * c)):
            ref = referenced(est, linear_knee(c, c + 1), rng)
            assert 0.9 * c <= ref <= 1.05 * c, (c, est, ref)
            got = confirmed(est, SessionTarget(10.0, 0.99), linear_knee(c, c + 1), rng)
            assert 0.9 * c - 1 <= got <= c, (c, est, got)
            assert abs(got / ref - 1) <= 0.10 + 1e-9, (c, est, got, ref)


def test_the_reference_grows_when_the_fast_estimate_is_under_the_knee():
    # the fast steps read under the knee (as on another machine, 49 % under): every grid
    # count holds, the sweep grows 1.5 x until one fails, then bisects
    ref = referenced(100, linear_knee(180, 181), random.Random(1))
    assert 150 <= ref <= 181


def test_the_old_budget_end_repeats_the_count_announced():
    # the table's "repeat" rule: 212 held once, 299 failed, 2 runs left -> 212, not 269
    runs = [{"sessions": n, "n": n, "over": 0 if h else n} for n, h in
            ((425, False), (212, True), (371, False), (333, False), (340, False), (350, False),
             (299, False))]
    t = SessionTarget(10.0, 0.99)
    assert next_confirm(runs, 425, 4096, t) == 269
    assert repeat_at_budget_end(runs, 425, 4096, t) == 212
    assert repeat_at_budget_end(runs[:5], 425, 4096, t) == next_confirm(runs[:5], 425, 4096, t)


BANDS = ((286, 338, (366, 457)), (255, 320, (366, 457)), (230, 320, (366, 457)),
         (300, 345, (366, 457)), (280, 300, (366, 457)), (260, 330, (425,)))


def table(trials=1000, seed=23):
    """Per knee band and fast estimate: the reference's mean, and per rule the confirm's mean
    error against the same trial's reference, the share within +-10 %, under, over, and the
    chance that a run at the count announced fails ("risk"). Rules: margin 0.10 with the last
    runs on the limit (the product's) or repeating the count announced (before session 26,
    the same random draws per trial), and margins 0.05 and 0."""
    rules = (("0.10 limit", 0.10, next_confirm), ("0.10 repeat", 0.10, repeat_at_budget_end),
             ("0.05 limit", 0.05, next_confirm), ("0.00 limit", 0.0, next_confirm))
    for lo, hi, ests in BANDS:
        p_hold = linear_knee(lo, hi)
        for est in ests:
            rng = random.Random(seed * 7919 + lo * 131 + est)
            refs = [referenced(est, p_hold, rng) for _ in range(trials)]
            for name, margin, search in rules:
                t = SessionTarget(10.0, 0.99, margin=margin)
                errs, risk = [], 0.0
                for i, r in enumerate(refs):
                    c = confirmed(est, t, p_hold, random.Random(seed * 104729 + i), search)
                    errs.append(100.0 * (c / r - 1) if r else 0.0)
                    risk += 1.0 - p_hold(c)
                print(f"| {lo}-{hi} | {est} | {sum(refs) / trials:.0f} | {name} | "
                      f"{sum(errs) / trials:+.1f} % | {sum(abs(e) <= 10 for e in errs) / trials:.3f} | "
                      f"{sum(e < -10 for e in errs) / trials:.3f} | "
                      f"{sum(e > 10 for e in errs) / trials:.3f} | {risk / trials:.3f} |",
                      flush=True)


if __name__ == "__main__":
    table(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
