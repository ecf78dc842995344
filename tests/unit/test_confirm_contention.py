# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The confirm phase and the per-session reference on a host busy with other work: a run that
failed while other processes took the CPU is run again once per count (issue 23 item 1;
bench/results/slots.md 2026-11-28 19:18)."""

import time

import pytest

from fluidvim.evaluator import confirm, probes
from fluidvim.evaluator.confirm import (
    SessionTarget,
    confirm_reading,
    counted_runs,
    next_confirm,
)


def run(n, held, contended=False):
    over = 0 if held else n
    return {"sessions": n, "n": n, "over": over, "over_pct": 100.0 * over / n,
            "contended": contended}


def test_a_first_failure_on_a_busy_host_is_left_out_a_second_counts():
    runs = [run(300, True), run(400, False, contended=True), run(400, True)]
    assert counted_runs(runs) == [runs[0], runs[2]]
    rd = confirm_reading(runs)
    assert rd["slots"] == 400 and rd["bound"] == "at least" and rd["dropped"] == 1
    again = runs + [run(450, False, contended=True), run(450, False, contended=True)]
    rd = confirm_reading(again)                     # a host that stays busy reads as its own
    assert rd["hi"] == 450 and rd["dropped"] == 2
    # a held run counts whatever the host did; a failure on a quiet host always counts
    assert counted_runs([run(300, True, contended=True)]) == [run(300, True, contended=True)]
    assert confirm_reading([run(300, True), run(400, False)])["hi"] == 400


def _search(estimate, capacity, target, busy_at=()):
    """next_confirm against a host holding n iff n <= capacity, whose runs number ``busy_at``
    (0-based, over all runs) fail whatever their count and are flagged contended."""
    runs = []
    while (n := next_confirm(runs, estimate, 4096, target)) is not None:
        k = len(runs)
        runs.append(run(n, n <= capacity and k not in busy_at, contended=k in busy_at))
    return runs


@pytest.mark.parametrize("estimate,capacity,busy_at", [
    (375, 285, (1,)), (375, 285, (3, 6)), (200, 285, (0,)), (457, 180, (2, 4))])
def test_busy_runs_are_run_again_and_the_reading_is_the_quiet_one(estimate, capacity, busy_at):
    t = SessionTarget(10.0, 0.99)
    quiet = _search(estimate, capacity, t)
    busy = _search(estimate, capacity, t, busy_at)
    assert confirm_reading(busy)["slots"] == confirm_reading(quiet)["slots"]
    assert len(busy) == len(quiet) + len(busy_at) <= t.runs + t.reruns
    for k in busy_at:                                    # the very next run is that count
        assert busy[k + 1]["sessions"] == busy[k]["sessions"]


def test_a_busy_host_costs_at_most_reruns_more_runs():
    t = SessionTarget(10.0, 0.99, runs=5, reruns=2)
    runs = _search(300, 285, t, busy_at=range(100))      # every run fails, flagged
    assert len(runs) == 7
    assert confirm_reading(runs)["slots"] == 0           # counted after the reruns: no room
    with pytest.raises(ValueError, match="reruns"):
        SessionTarget(10.0, 0.99, reruns=-1)
    assert SessionTarget(10.0, 0.99).as_dict()["reruns"] == confirm.CONFIRM_RERUNS


def test_others_cpu_takes_the_vnf_this_process_and_the_client_off():
    # (monotonic s, host busy s, softirq s, VNF s, this process s) once a second
    samples = [(0.0, 0.0, 0.0, 0.0, 0.0), (1.0, 1.5, 0.2, 0.8, 0.05),
               (2.0, 3.0, 0.4, 1.6, 0.10), (3.0, 5.0, 0.6, 2.2, 0.15)]
    r = probes.others_cpu(samples, client_share=0.4)
    # per second: 1.5 - 0.8 - 0.05 - 0.4 = 0.25 (twice), then 2.0 - 0.6 - 0.05 - 0.4 = 0.95
    assert r["max"] == pytest.approx(0.95) and r["mean"] == pytest.approx(1.45 / 3, abs=1e-3)
    assert r["softirq"] == pytest.approx(0.2) and r["ticks"] == 3
    assert probes.contended_run(r)
    assert not probes.contended_run(probes.others_cpu(samples[:3], 0.4))
    assert probes.others_cpu(samples[:1], 0.4) is None and not probes.contended_run(None)


def test_others_meter_samples_until_the_run_ends(monkeypatch):
    clock = {"busy": 0.0}

    def host():
        clock["busy"] += 0.02
        return {"busy": clock["busy"], "softirq": 0.0}

    monkeypatch.setattr(probes, "host_cpu_s", host)
    with probes.OthersMeter(lambda: 0.0, tick_s=0.01, skip_s=0.0) as m:
        time.sleep(0.08)
    n = len(m.samples)
    assert n >= 2 and m.result(0.0)["ticks"] == n - 1
    time.sleep(0.03)
    assert len(m.samples) == n                           # stopped with the run
    # without a reading of the VNF's CPU (a zone without host_cpu) nothing is read
    with probes.OthersMeter(lambda: None, tick_s=0.01, skip_s=0.0) as m:
        time.sleep(0.03)
    assert m.result(0.0) is None


def test_probe_session_run_records_others_cpu(monkeypatch):
    probe = probes.LoadProbe(confirm=SessionTarget(10.0, 0.99, 16.0))
    monkeypatch.setattr(probes, "OthersMeter", _FakeMeter)

    def step(net, n, duration=None, windows=None, per_session=None):
        assert windows == 160                            # 100 ms windows: the run's time line
        return {"offered_pps": n * 100.0, "loss_pooled": 0.0, "client_cpu_share": 0.3,
                "latency_pooled_ms": {"0.99": 30.0}, "window_p99_ms": [30.0] * 160,
                "per_session": {"latency_ms": [30.0] * n, "loss": [0.0] * n}}

    monkeypatch.setattr(probe, "_step", step)
    r = probe._session_run(None, None, "i1", 10, probe.confirms[0])
    assert r["over"] == 10 and r["contended"] and r["others_cpu"]["max"] == 0.9
    assert len(r["window_p99_ms"]) == 160


class _FakeMeter:
    def __init__(self, vnf_run_s, **kw):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def result(self, client_share):
        assert client_share == 0.3
        return {"mean": 0.5, "max": 0.9, "softirq": 0.1, "ticks": 15}


def test_reference_sets_aside_one_busy_failure_per_count():
    from bench.slotsqoe import REFERENCE_RERUNS, set_aside

    def ref_run(n, over_pct, contended):
        return {"sessions": n, "over_pct": over_pct,
                "accounting": {"contended": contended, "others_cpu": {"max": 0.9}}}

    dropped = []
    assert set_aside(ref_run(280, 100.0, True), dropped)
    dropped.append({"sessions": 280})
    assert not set_aside(ref_run(280, 100.0, True), dropped)       # its second: counted
    assert not set_aside(ref_run(315, 0.5, True), dropped)         # held: counted
    assert not set_aside(ref_run(315, 100.0, False), dropped)      # quiet host: counted
    dropped += [{"sessions": 350 + k} for k in range(REFERENCE_RERUNS)]
    assert not set_aside(ref_run(400, 100.0, True), dropped)       # budget spent


def test_bench_counts_the_busy_runs_of_confirm_and_reference(monkeypatch):
    from bench import slotsqoe
    from fluidvim.evaluator.model import ProbeResult

    runs = [run(300, True), run(400, False, contended=True), run(400, True, contended=True)]
    probe = ProbeResult(env_uid="u1", kind="load", ok=True, metrics={
        "confirm": {"target": SessionTarget(10.0, 0.99).as_dict(), "runs": runs}})
    ref = {"points": [{"runs": [{"accounting": {"contended": True}},
                                {"accounting": {"contended": False}}]}],
           "dropped_runs": [{"sessions": 280}]}
    assert slotsqoe.contended_counts(probe, ref) == {
        "confirm": 2, "confirm_left_out": 1, "reference": 2, "reference_left_out": 1}
    empty = ProbeResult(env_uid="u1", kind="load", ok=True, metrics={})
    assert slotsqoe.contended_counts(empty, None) == {
        "confirm": 0, "confirm_left_out": 0, "reference": 0, "reference_left_out": 0}
    busy = iter(range(0, 100, 1))
    monkeypatch.setattr(probes, "host_cpu_s", lambda: {"busy": float(next(busy)), "softirq": 0.0})
    monkeypatch.setattr(slotsqoe, "OthersMeter", lambda f, skip_s: probes.OthersMeter(
        f, tick_s=0.01, skip_s=skip_s))
    r = slotsqoe.host_others(0.05)                       # 1 s of CPU per 10 ms: busy
    assert r["ticks"] >= 1 and probes.contended_run(r)


def test_wait_quiet_until_others_leave_the_cpu(monkeypatch):
    # others take 1 core (busy +0.01 s per 10 ms tick) three ticks, then nothing
    steps = iter([0.0, 0.01, 0.02, 0.03, 0.03, 0.03, 0.03])
    monkeypatch.setattr(probes, "host_cpu_s", lambda: {"busy": next(steps), "softirq": 0.0})
    monkeypatch.setattr(probes, "_self_cpu_s", lambda: 0.0)
    t0 = time.monotonic()
    waited = probes.wait_quiet(lambda: 0.0, max_s=5.0, tick_s=0.01)
    assert 0.03 <= waited < 1.0 and time.monotonic() - t0 < 1.0
    # a host that stays busy: at most max_s; no reading of the VNF: no wait
    monkeypatch.setattr(probes, "host_cpu_s", lambda: {"busy": time.monotonic() * 2,
                                                       "softirq": 0.0})
    assert 0.05 <= probes.wait_quiet(lambda: 0.0, max_s=0.05, tick_s=0.01) < 0.5
    assert probes.wait_quiet(lambda: None, max_s=5.0, tick_s=0.01) < 0.1


def test_confirm_waits_for_a_quiet_host_before_running_a_count_again(monkeypatch):
    probe = probes.LoadProbe(confirm=SessionTarget(10.0, 0.99, 16.0, runs=2, reruns=1,
                                                   repeats=1))
    results = iter([(250, True, True), (250, False, False), (375, True, False)])

    def session_run(net, stats_fn, instance_id, n, t):
        _, failed, contended = next(results)
        over = n if failed else 0
        return {"sessions": n, "n": n, "over": over, "over_pct": 100.0 * over / n,
                "contended": contended}

    waits = []
    monkeypatch.setattr(probe, "_session_run", session_run)
    monkeypatch.setattr(probes, "wait_quiet", lambda f: waits.append(f) or 2.5)
    monkeypatch.setattr(probes.qoeslots, "fast_capacity",
                        lambda *a, **k: type("E", (), {"slots": 250})())
    env = type("Env", (), {"uid": "u1"})()
    conf = probe._confirm(None, None, "i1", env, {"steps": []}, None, probe.confirms[0])
    assert [r["sessions"] for r in conf["runs"]] == [250, 250, 375]
    assert len(waits) == 1 and conf["runs"][0]["waited_s"] == 2.5
    assert all("waited_s" not in r for r in conf["runs"][1:])   # held, quiet failure: none



def test_confirm_does_not_wait_after_a_counted_busy_failure(monkeypatch):
    probe = probes.LoadProbe(confirm=SessionTarget(10.0, 0.99, 16.0, runs=2, reruns=2))

    def session_run(net, stats_fn, instance_id, n, t):       # every run fails, host busy
        return {"sessions": n, "n": n, "over": n, "over_pct": 100.0, "contended": True}

    waits = []
    monkeypatch.setattr(probe, "_session_run", session_run)
    monkeypatch.setattr(probes, "wait_quiet", lambda f: waits.append(f) or 1.0)
    monkeypatch.setattr(probes.qoeslots, "fast_capacity",
                        lambda *a, **k: type("E", (), {"slots": 200})())
    env = type("Env", (), {"uid": "u1"})()
    conf = probe._confirm(None, None, "i1", env, {"steps": []}, None, probe.confirms[0])
    # 200 left out, 200 counted, 100 left out, 100 counted: waits before the reruns only
    assert [r["sessions"] for r in conf["runs"]] == [200, 200, 100, 100]
    assert [r.get("waited_s") for r in conf["runs"]] == [1.0, None, 1.0, None]


def test_reference_runs_again_a_failure_under_a_count_that_held():
    from bench.slotsqoe import set_aside

    def ref_run(n, over_pct):
        return {"sessions": n, "over_pct": over_pct, "n": n, "over": over_pct * n / 100.0,
                "accounting": {"contended": False, "vcpu_steal_share": 0.4}}

    held = {186: [ref_run(186, 0.0)], 232: [ref_run(232, 0.0)], 278: [ref_run(278, 0.0)]}
    assert set_aside(ref_run(232, 100.0), [], held) == "non-monotonic"
    assert set_aside(ref_run(232, 100.0), [{"sessions": 232}], held) is None  # once per count
    failed_above = {186: [ref_run(186, 0.0)], 278: [ref_run(278, 0.0), ref_run(278, 50.0)]}
    assert set_aside(ref_run(232, 100.0), [], failed_above) is None   # 278 did not hold in all
    assert set_aside(ref_run(325, 100.0), [], held) is None           # nothing held above it
