# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The confirm phase's last runs (issue 23 item 1; docs/slots.md "The last runs of the
budget"): when the budget left cannot afford a bisection step and the repeats of the count
announced, :func:`next_confirm` runs the limit c = (1 - margin) x the smallest failure itself
rather than that count once more (the quiet run of record 2026-11-29 03:39 repeated 212 where
c was 269). The recorded 03:39 runs are replayed in test_confirm_nonmonotonic.py."""

from fluidvim.evaluator.confirm import SessionTarget, confirm_reading, next_confirm


def run(n, held):
    return {"sessions": n, "n": n, "over": 0 if held else n}


def search(runs, target):
    """The count next_confirm asks for after ``runs`` (the fast estimate 425)."""
    return next_confirm(runs, 425, 4096, target)


def test_the_last_runs_go_to_the_limit_not_the_count_far_under_it():
    t = SessionTarget(10.0, 0.99)                     # 9 runs, 3 repeats, margin 0.1
    # 212 held once, 299 failed (counted), the rest spent: 7 counted, 2 left (< 1 + 2)
    runs = [run(425, False), run(212, True), run(371, False), run(333, False), run(340, False),
            run(350, False), run(299, False)]
    assert confirm_reading(runs)["slots"] == 212 and confirm_reading(runs)["limit"] == 269
    assert search(runs, t) == 269                     # was 212 (a bisection step is 255)
    # held: c again for its second run, then done with c announced after two holds
    held = runs + [run(269, True)]
    assert search(held, t) == 269
    assert search(held + [run(269, True)], t) is None
    assert confirm_reading(held + [run(269, True)])["slots"] == 269
    # failed (under nothing held above it: it counts): the new limit 242 with the last run
    failed = runs + [run(269, False)]
    assert confirm_reading(failed)["limit"] == 242
    assert search(failed, t) == 242
    assert confirm_reading(failed + [run(242, False)])["slots"] == 212


def test_with_budget_for_a_step_and_its_repeats_it_still_bisects():
    t = SessionTarget(10.0, 0.99)
    runs = [run(425, False), run(212, True), run(371, False), run(333, False), run(299, False)]
    # 5 counted, 4 left >= 1 + 2: the midpoint of 212 and 299, under c = 269
    assert search(runs, t) == 255
    # a budget of 7: 2 left, c itself
    assert search(runs, SessionTarget(10.0, 0.99, runs=7)) == 269


def test_repeats_of_a_count_at_the_limit_and_growth_are_unchanged():
    t = SessionTarget(10.0, 0.99, runs=4)
    # lo at or over c: c is the search step itself, and its repeats follow
    runs = [run(300, False), run(150, True), run(270, True)]
    assert search(runs, t) == 270
    # every count held, no limit: the top again for its repeats at the budget's end
    grown = [run(100, True), run(150, True)]
    assert next_confirm(grown, 100, 4096, SessionTarget(10.0, 0.99, runs=3)) == 150
    # nothing held under the failure: halving, with nothing to repeat
    assert next_confirm([run(100, False)], 100, 4096, SessionTarget(10.0, 0.99, runs=2)) == 50


def test_margin_zero_runs_the_count_under_the_failure():
    t = SessionTarget(10.0, 0.99, runs=4, margin=0.0)
    runs = [run(100, True), run(200, False)]
    # 2 left: 199 (the limit with no margin) rather than 100 again; bisection would be 150
    assert search(runs, t) == 199
    assert search(runs, SessionTarget(10.0, 0.99, runs=5, margin=0.0)) == 150
