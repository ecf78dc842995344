# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/slots qoe: how admitted sessions are judged against the deadline (bench/slotsqoe.py)."""

import argparse

import pytest

from bench.slotsqoe import (
    accounting,
    command,
    drift,
    guest_waits,
    judge_sessions,
    pool_repeats,
    reference_counts,
    session_reference,
    show_accounting,
    sweep_counts,
)
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


def test_guest_waits_are_differences_over_the_run():
    cpu0 = {"halts": 10, "wake_rx": 8, "wake_timer": 0, "wake_other": 2, "rx_no_irq": 0,
            "steal_us": 100, "stalls": 1, "backoffs": 1, "busy_us": 5, "poll_us": 7, "halt_us": 9,
            "steal_max_us": 40, "poll_paused": False}
    cpu1 = dict(cpu0, halts=30, wake_rx=27, steal_us=12_100, stalls=4, backoffs=2,
                steal_max_us=9_000, poll_paused=True)
    out = guest_waits(cpu0, cpu1, {"nr_periods": 5, "nr_throttled": 1, "throttled_time": 10},
                      {"nr_periods": 95, "nr_throttled": 31, "throttled_time": 10 + 2_000_000})
    assert out["halts"] == 20 and out["wake_rx"] == 19 and out["wake_other"] == 0
    assert out["steal_us"] == 12_000 and out["stalls"] == 3 and out["backoffs"] == 1
    assert out["steal_max_us_since_boot"] == 9_000 and out["poll_paused_at_end"] is True
    assert (out["cgroup_nr_periods"], out["cgroup_nr_throttled"],
            out["cgroup_throttled_time"]) == (90, 30, 2_000_000)


def test_guest_waits_without_steal_time_or_cgroup():
    cpu = {"halts": 3, "wake_rx": 2, "wake_timer": 0, "wake_other": 1, "rx_no_irq": 0,
           "busy_us": 1, "poll_us": 1, "halt_us": 1}
    out = guest_waits(cpu, dict(cpu, halts=5), {}, {})
    assert out["halts"] == 2 and "steal_us" not in out and out["steal_max_us_since_boot"] is None
    assert not [k for k in out if k.startswith("cgroup_")]


def pts(*pairs):
    return [{"sessions": n, "over_pct": o} for n, o in pairs]


def test_session_reference_interpolates_the_first_crossing():
    ref = session_reference(pts((100, 0.0), (120, 0.0), (140, 51.0), (160, 100.0)))
    assert ref["bound"] == "between" and (ref["lo"], ref["hi"]) == (120, 140)
    assert ref["slots"] == int(120 + (1.0 / 51.0) * 20)
    # a count past the first one over that happens to pass is noise, not room
    ref = session_reference(pts((100, 0.0), (120, 2.0), (140, 0.0)))
    assert (ref["lo"], ref["hi"]) == (100, 120)
    # within the limit is 1 % or less, not none
    assert session_reference(pts((100, 1.0), (120, 3.0)))["lo"] == 100


def test_repeats_pool_into_one_monotone_reference():
    # the quiet-host record's non-monotone sweep: 100 sessions all over in one run; with a
    # second run of each count (none over), pooled: 100 is 50 % over, so the reference stays
    # below it, whatever 140 and 180 did (one burst cannot make it non-monotone)
    runs = {93: [{"over": 0, "n": 93}, {"over": 0, "n": 93}],
            100: [{"over": 100, "n": 100}, {"over": 0, "n": 100}],
            140: [{"over": 0, "n": 140}, {"over": 0, "n": 140}],
            180: [{"over": 0, "n": 180}, {"over": 1, "n": 180}]}
    pooled = pool_repeats(runs)
    assert [p["over_pct"] for p in pooled] == [0.0, 50.0, 0.0, 0.28]
    assert pooled[1]["over_pct_each"] == [0.0, 100.0] and pooled[1]["over_pct_median"] == 50.0
    ref = session_reference(pooled)
    assert (ref["lo"], ref["hi"]) == (93, 100) and ref["slots"] == 93
    # a few sessions over in one run only: pooled over both runs, within 1 %
    assert pool_repeats({50: [{"over": 1, "n": 50}, {"over": 0, "n": 50}]})[0]["over_pct"] == 1.0
    three = pool_repeats({10: [{"over": 10, "n": 10}, {"over": 0, "n": 10}, {"over": 0, "n": 10}]})
    assert three[0]["over_pct_median"] == 0.0 and three[0]["repeats"] == 3


def test_session_reference_bounds():
    assert session_reference(pts((10, 0.0), (20, 0.5))) == {
        "slots": 20, "bound": "at least", "lo": 20, "hi": None}
    assert session_reference(pts((10, 40.0), (20, 100.0))) == {
        "slots": 0, "bound": "below", "lo": None, "hi": 10}
    with pytest.raises(ValueError, match="sessions, over_pct"):
        session_reference([])


def test_sweep_counts_span_half_to_one_and_a_half_the_estimate():
    assert sweep_counts(100, 6) == [50, 70, 90, 110, 130, 150]
    assert sweep_counts(0, 6) == [1, 2, 3]           # no estimate: the smallest counts
    assert sweep_counts(176, 1) == [88, 264]


def test_sweep_counts_from_half_to_the_whole_fast_estimate():
    # the interleaved reference's grid (INTERLEAVE_LO .. 1 x the fast estimate)
    assert sweep_counts(366, 5, 0.5, 1.0) == [183, 229, 274, 320, 366]


def _drive(counts, holds_up_to, repeats=2, refine=2):
    runs, order = {}, []
    for n in reference_counts(counts, runs, repeats, refine):
        order.append(n)
        runs.setdefault(n, []).append({"over": 0 if n <= holds_up_to else n, "n": n})
    return order, session_reference(pool_repeats(runs))


def test_reference_counts_one_at_a_time_passes_then_bisections():
    order, ref = _drive([10, 20, 30], 24)
    assert order == [10, 20, 30, 10, 20, 30, 25, 25, 22, 22]
    assert (ref["lo"], ref["hi"]) == (22, 25)
    # every count held: 1.5 x the top, three times at most, then nothing to bisect
    order, ref = _drive([10, 20], 1000, repeats=1)
    assert order == [10, 20, 30, 45, 67] and ref["bound"] == "at least"
    # all over: half the lowest until one holds, then the bracket is bisected
    order, ref = _drive([40, 80], 12, repeats=1, refine=1)
    assert order == [40, 80, 20, 10, 15] and (ref["lo"], ref["hi"]) == (10, 15)


def test_drift_pairs_the_same_count_minutes_apart():
    acc = lambda cpu, st: {"client_cpu_share": cpu, "vcpu_steal_share": st}   # noqa: E731
    per_ref = {"points": [
        {"sessions": 100, "runs": [{"t_end_s": 100.0, "over_pct": 0.0, "accounting": acc(0.5, 0.3)},
                                   {"t_end_s": 400.0, "over_pct": 0.0,
                                    "accounting": acc(0.55, 0.35)}]},
        {"sessions": 150, "runs": [{"t_end_s": 120.0, "over_pct": 100.0,
                                    "accounting": acc(0.8, 0.6)}]}]}

    class Probe:
        metrics = {"confirm": {"runs": [
            {"sessions": 90, "over_pct": 0.0, "client_cpu_share": 0.4, "vnf_steal_share": 0.2},
            {"sessions": 90, "over_pct": 0.0, "client_cpu_share": 0.36, "vnf_steal_share": 0.2},
            {"sessions": 120, "over_pct": 100.0, "client_cpu_share": 0.6}]}}

    d = drift(per_ref, Probe)
    assert d["reference_repeats"] == [{
        "sessions": 100, "runs": 2, "t_end_s": [100.0, 400.0], "over_pct": [0.0, 0.0],
        "client_cpu_share": [0.5, 0.55], "vnf_steal_share": [0.3, 0.35],
        "client_cpu_change_pct": 10.0}]
    assert [(p["sessions"], p["t_end_s"], p["client_cpu_change_pct"])
            for p in d["confirm_repeats"]] == [(90, [0, 1], -10.0)]
    assert d["client_cpu_change_pct_max_abs"] == 10.0
    assert drift(None, type("P", (), {"metrics": {}}))["client_cpu_change_pct_max_abs"] is None


def test_accounting_shares_of_the_run():
    waits = {"main_thread": {"on_cpu": 0.5, "waiting": 0.1},
             "vcpu_threads": {"on_cpu": 0.3, "waiting": 0.5}}
    guest = {"steal_us": 4_000_000, "stalls": 7, "cgroup_nr_throttled": 0,
             "cgroup_nr_periods": 80}
    acc = accounting({"client_cpu_share": 0.62}, waits, guest, 8.0)
    assert acc["vcpu_steal_share"] == 0.5 and acc["client_cpu_share"] == 0.62
    assert acc["throttled_periods"] == [0, 80] and acc["stalls"] == 7
    line = show_accounting(acc)
    assert "client CPU 62 %" in line and "vCPU steal 50 %" in line and "0/80" in line
    # no steal reading (no KVM steal time), an old client without its CPU: unknown, not 0
    acc = accounting({}, waits, {}, 8.0)
    assert acc["vcpu_steal_share"] is None and "client CPU ?" in show_accounting(acc)


def test_command_repeats_the_run():
    a = argparse.Namespace(deadline_ms=10.0, quantile=0.99, session_pps=100.0, run_s=16.0,
                           proto="icmp", client_nice=0, probe_step=2.0, pooled=False,
                           vcpu_nice=None, kernel=None, session_points=6, session_refine=3,
                           session_repeats=2, reference_passes=0, points=12, sweep_step=4.0,
                           part="qoe", confirm_runs=5, confirm_margin=0.15,
                           admit_over_s=16.0, unconfirmed="on", interleave="on",
                           admit_at_reference="1.0,1.1")
    assert command(a) == (
        "python -m bench.slots qoe --deadline-ms 10 --quantile 0.99 --session-pps 100 "
        "--run-s 16 --proto icmp --client-nice 0 --probe-step 2 --confirm-runs 5 "
        "--confirm-margin 0.15 --admit-over-s 16 --unconfirmed on --session-points 6 "
        "--session-refine 3 --session-repeats 2 --interleave on --admit-at-reference 1.0,1.1 "
        "--reference-passes 0 --points 12 --sweep-step 4")
    b = argparse.Namespace(**{**vars(a), "vcpu_nice": 0, "part": "qoe_vcpu_nice0",
                              "interleave": "off", "admit_at_reference": ""})
    assert command(b).endswith("--vcpu-nice 0 --session-points 6 --session-refine 3 "
                               "--session-repeats 2 --interleave off --reference-passes 0 "
                               "--points 12 "
                               "--sweep-step 4 "
                               "--part qoe_vcpu_nice0")


def test_confirm_pooled_rule_is_the_a_b_of_the_margin():
    """The quiet-host confirm runs of record (bench/results/slots.md 16:57): the reference's
    pooled rule read 327 (what was announced then), the margin rule 295 on the same runs."""
    from bench.slotsqoe import confirm_pooled_rule
    from fluidvim.evaluator.confirm import SessionTarget, confirm_reading
    from fluidvim.evaluator.model import ProbeResult

    runs = [{"sessions": n, "n": n, "over": o} for n, o in
            ((338, 338), (169, 0), (253, 0), (295, 0), (316, 0), (327, 2), (327, 0))]
    block = {"target": SessionTarget(10.0, 0.99).as_dict(), "estimate": 338, "runs": runs}
    r = ProbeResult(env_uid="u1", kind="load", ok=True, metrics={"confirm": block})
    assert confirm_pooled_rule(r) == 327
    assert confirm_reading(runs)["slots"] == 295
    assert confirm_pooled_rule(ProbeResult(env_uid="u1", kind="load", ok=True, metrics={})) is None
