# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""fluidvim.common.measure: the one elapsed-time, quantile and median helper."""

import random
import statistics
import time

import pytest

from fluidvim.common import measure


def test_elapsed_ms_rounds_to_the_callers_digits():
    t0 = time.perf_counter() - 0.0123456789
    v3, v2, v1 = measure.elapsed_ms(t0), measure.elapsed_ms(t0, 2), measure.elapsed_ms(t0, 1)
    assert 12.345 <= v3 and v3 == round(v3, 3)
    assert 12.34 <= v2 and v2 == round(v2, 2)
    assert 12.3 <= v1 and v1 == round(v1, 1)


def test_quantile_interpolates():
    # the load generator's latency quantiles (formerly loadgen.quantile)
    v = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert measure.quantile(v, 0.5) == 3.0
    assert measure.quantile(v, 0.9) == pytest.approx(4.6)
    assert measure.quantile(v, 0.0) == 1.0 and measure.quantile(v, 1.0) == 5.0
    assert measure.quantile([7.0], 0.99) == 7.0
    assert measure.quantile([5.0, 1.0, 4.0, 2.0, 3.0], 0.9) == pytest.approx(4.6)   # any order


def test_quantile_nearest_rank_rounds_half_up_and_is_a_sample():
    v = [10.0, 20.0, 30.0, 40.0]
    # rank q*(n-1): 0.5 -> 1.5 -> 2; 0.9 -> 2.7 -> 3; 1/6 -> 0.5 -> 1 (half up)
    assert measure.quantile(v, 0.5, method="nearest") == 30.0
    assert measure.quantile(v, 0.9, method="nearest") == 40.0
    assert measure.quantile(v, 1 / 6, method="nearest") == 20.0
    assert measure.quantile([2.0, 1.0], 0.5, method="nearest") == 2.0
    assert measure.quantile(v, 0.0, method="nearest") == 10.0
    assert measure.quantile(v, 1.0, method="nearest") == 40.0
    rnd = random.Random(7)
    for n in range(1, 40):
        xs = [rnd.random() for _ in range(n)]
        for q in (0.0, 0.25, 0.5, 0.9, 0.99, 1.0):
            assert measure.quantile(xs, q, method="nearest") in xs


def test_quantile_of_nothing_and_bad_arguments():
    assert measure.quantile([], 0.5) is None
    assert measure.quantile([], 0.5, method="nearest") is None
    with pytest.raises(ValueError, match="not in"):
        measure.quantile([1.0], 1.5)
    with pytest.raises(ValueError, match="method"):
        measure.quantile([1.0], 0.5, method="mean")


def test_median():
    # formerly loadgen._median
    assert measure.median([3, 1, 2]) == 2
    assert measure.median([4, 1, 2, 3]) == 2.5
    assert measure.median([]) is None
    assert measure.median(x for x in (5.0, 1.0)) == 3.0
    rnd = random.Random(3)
    for n in range(1, 30):
        xs = [rnd.uniform(0, 100) for _ in range(n)]
        assert measure.median(xs) == statistics.median(xs) == pytest.approx(measure.quantile(xs, 0.5))
