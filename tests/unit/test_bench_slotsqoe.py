# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/slots qoe: how admitted sessions are judged against the deadline (bench/slotsqoe.py)."""

import pytest

from bench.slotsqoe import judge_sessions
from fluidvim.evaluator.qoeslots import sessions_over


def test_judge_sessions_counts_tail_and_loss_and_the_model():
    per = {"latency_ms": [4.0, 12.0, None, 3.0], "loss": [0.0, 0.0, 1.0, 0.02],
           "late": [0, 30, 100, 2], "sent": [100, 100, 100, 100]}
    out = judge_sessions(per, deadline_ms=10.0, quantile=0.99)
    # over: its own p99 (12 ms), nothing received, 2 % lost
    assert out["over_sessions"] == [1, 2, 3] and out["admitted_over_deadline"] == 3
    assert out["pooled_late_fraction"] == pytest.approx(132 / 400)
    assert out["expected_over_pct_if_independent"] == pytest.approx(
        100 * sessions_over(100, 132 / 400, 0.99), abs=0.01)


def test_judge_sessions_without_late_counts():
    out = judge_sessions({"latency_ms": [1.0], "loss": [0.0]}, 10.0, 0.99)
    assert out == {"admitted_over_deadline": 0, "over_sessions": []}
