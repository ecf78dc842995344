# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/slots qoe: how admitted sessions are judged against the deadline (bench/slotsqoe.py)."""

import math

import pytest

from bench.slotsqoe import binomial_over, judge_sessions


def test_binomial_over_matches_the_distribution():
    # 100 packets, q = 0.99: over = more than 1 late; P(X > 1) = 1 - P(0) - P(1)
    p = 0.02
    want = 1 - (1 - p) ** 100 - 100 * p * (1 - p) ** 99
    assert math.isclose(binomial_over(100, p, 0.99), want, rel_tol=1e-12)
    assert binomial_over(100, 0.0, 0.99) == 0.0 and binomial_over(100, 1.0, 0.99) == 1.0


def test_at_the_quantile_about_half_the_sessions_are_over_by_chance():
    # the pooled p99 exactly at the deadline (1 % late): a session of 800 packets is over when
    # it has more than 8 late ones - close to even odds, not a rare event
    assert 0.35 < binomial_over(800, 0.01, 0.99) < 0.5
    assert binomial_over(800, 0.003, 0.99) < 0.01


def test_judge_sessions_counts_tail_and_loss_and_the_model():
    per = {"latency_ms": [4.0, 12.0, None, 3.0], "loss": [0.0, 0.0, 1.0, 0.02],
           "late": [0, 30, 100, 2], "sent": [100, 100, 100, 100]}
    out = judge_sessions(per, deadline_ms=10.0, quantile=0.99)
    # over: its own p99 (12 ms), nothing received, 2 % lost
    assert out["over_sessions"] == [1, 2, 3] and out["admitted_over_deadline"] == 3
    assert out["pooled_late_fraction"] == pytest.approx(132 / 400)
    assert out["expected_over_pct_if_independent"] == pytest.approx(
        100 * binomial_over(100, 132 / 400, 0.99), abs=0.01)


def test_judge_sessions_without_late_counts():
    out = judge_sessions({"latency_ms": [1.0], "loss": [0.0]}, 10.0, 0.99)
    assert out == {"admitted_over_deadline": 0, "over_sessions": []}
