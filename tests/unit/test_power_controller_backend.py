# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The latency controller's rule on its VNF's backend thread (orchestrator/power/backend.py):
QEMU's main thread at ``backend_nice`` while the VNF's window is narrowed, its nice before
back once it goes open; read and written on a fake /proc and a fake setpriority."""

from __future__ import annotations

import pytest

from fluidvim.orchestrator import power
from fluidvim.orchestrator.power import backend, controller as ctl

from .test_power_controller import FakeVnf

STAT = "{pid} (qemu-system-x86) S 1 {pid} {pid} 0 -1 4194560 1 0 0 0 5 6 0 0 20 {nice} 4 0 9"


def test_main_nice_reads_the_main_threads_stat_field_19(tmp_path):
    d = tmp_path / "42" / "task" / "42"
    d.mkdir(parents=True)
    (d / "stat").write_text(STAT.format(pid=42, nice=-7))
    assert backend.main_nice(42, proc=str(tmp_path)) == -7
    (d / "stat").write_text("42 (a) b) S 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 3 1 0 9")
    assert backend.main_nice(42, proc=str(tmp_path)) == 3      # a ')' in the command name
    assert backend.main_nice(43, proc=str(tmp_path)) is None   # no such process


def test_main_thread_setter_sets_each_main_thread_and_restores_what_each_had():
    nices = {100: 0, 200: 5}
    writes = []
    m = backend.MainThread(procs=lambda key: [100, 200] if key == "u1" else [],
                           read=nices.get, write=lambda *a: writes.append(a) or True)
    assert m("u1", (-10, None)) and writes == [(100, -10, None), (200, -10, None)]
    assert m("u1", (-5, None)) and writes[-2:] == [(100, -5, None), (200, -5, None)]
    assert m.before == {"u1": {100: 0, 200: 5}}                # the first nice, not the last
    assert m("u1", None) and writes[-2:] == [(100, 0, None), (200, 5, None)]
    assert m.before == {} and m("u1", None) and len(writes) == 6   # nothing to restore
    assert not m("u2", (-10, None))                            # no process: not set
    # a slice alone keeps each thread's nice; back: the nice it had and the default slice (0)
    writes.clear()
    assert m("u1", (None, 200)) and writes == [(100, 0, 200), (200, 5, 200)]
    assert m("u1", None) and writes[-2:] == [(100, 0, 0), (200, 5, 0)]


def test_set_main_uses_sched_setattr_only_for_a_slice(monkeypatch):
    calls = []
    monkeypatch.setattr(backend, "sched_setattr", lambda *a: calls.append(("attr", *a)) or True)
    monkeypatch.setattr(backend.os, "setpriority", lambda w, p, n: calls.append(("nice", p, n)))
    assert backend.set_main(7, -3, None) and backend.set_main(7, 2, 150)
    assert calls == [("nice", 7, -3), ("attr", 7, 2, 150)]


def _controller(**kw):
    sets = []
    c = ctl.LatencyController(lambda k, q, p=None: None, hold_intervals=2, coalesce_share=0.2,
                              poller=lambda k, us, co: us,
                              backend=lambda k, n: sets.append((k, n)) or True, **kw)
    c.cpu_stat = lambda key: {"nr_throttled": 0, "throttled_usec": 0}
    v = FakeVnf()
    c.usage = v.usage
    return c, v, sets


def test_backend_nice_where_the_window_is_narrowed_and_back_open_on_release():
    c, v, sets = _controller(backend_nice=-10, backend_slice_us=200)
    ds = [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(3)]
    assert [(d["state"], d["backend_nice"]) for d in ds] == [
        ("open", None), ("open", None), ("poll only", (-10, 200))], ds
    assert sets == [("u1", (-10, 200))]
    ds = [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.1, 0.3, 0.1)) for _ in range(3)]
    assert sets == [("u1", (-10, 200))] and ds[-1]["backend_nice"] == (-10, 200)   # set once
    d = c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.1, 0.3, 0.1, ns=4_200_000))
    assert (d["action"], d["state"], d["backend_nice"]) == ("release", "open", None), d
    assert sets == [("u1", (-10, 200)), ("u1", None)]
    # a VNF the controller forgets gets its nice back
    [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(3)]
    assert sets[-1] == ("u1", (-10, 200))
    c.forget("u1")
    assert sets[-1] == ("u1", None) and c.backend.now == {}


def test_backend_nice_off_by_default_a_failed_set_is_tried_again_and_bounds_checked():
    c, v, sets = _controller()
    ds = [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(4)]
    assert ds[-1]["state"] == "poll only" and ds[-1]["backend_nice"] is None and sets == []
    fails = []
    c = ctl.LatencyController(lambda k, q, p=None: None, hold_intervals=2, coalesce_share=0.2,
                              poller=lambda k, us, co: us, backend_nice=-5,
                              backend=lambda k, n: fails.append(n) and False)
    c.cpu_stat, v = (lambda key: {"nr_throttled": 0, "throttled_usec": 0}), FakeVnf()
    c.usage = v.usage
    ds = [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(4)]
    assert fails == [(-5, None), (-5, None)] and ds[-1]["backend_nice"] is None
    with pytest.raises(power.PowerError, match="backend_nice"):
        ctl.LatencyController(lambda k, q, p=None: None, backend_nice=-21)
    with pytest.raises(power.PowerError, match="backend_slice_us"):
        ctl.LatencyController(lambda k, q, p=None: None, backend_slice_us=50)


def _splitter(procs=(100,), cpus=(0, 1)):
    masks = {100: set(cpus), 101: set(cpus), 102: set(cpus), 200: set(cpus), 201: set(cpus)}
    tids = {100: [100, 101, 102], 200: [200, 201]}
    puts = []

    def put(tid, cpus):
        if tid not in masks:
            raise ProcessLookupError(tid)
        puts.append((tid, set(cpus)))
        masks[tid] = set(cpus)
    def get(tid):
        if tid not in masks:
            raise ProcessLookupError(tid)
        return set(masks[tid])
    s = backend.Split(procs=lambda key: list(procs) if key == "u1" else [],
                      tids=lambda pid: tids.get(pid, []), get=get, put=put)
    return s, masks, puts


def test_split_puts_the_main_thread_on_its_own_cpu_and_restores_each_threads_cpus():
    s, masks, puts = _splitter(cpus=(0, 1, 2))
    assert s("u1", True)
    assert masks[100] == {2} and masks[101] == masks[102] == {0, 1}
    assert s("u1", True) and masks[100] == {2} and masks[101] == {0, 1}   # the first CPUs kept
    assert s.before == {"u1": {100: {0, 1, 2}, 101: {0, 1, 2}, 102: {0, 1, 2}}}
    assert s("u1", False) and masks[100] == masks[101] == masks[102] == {0, 1, 2}
    assert s.before == {} and s("u1", False)                       # nothing left to restore
    assert not s("u2", True)                                       # no process: not split


def test_split_leaves_a_single_cpu_alone_and_skips_a_thread_that_ended():
    s, masks, puts = _splitter(cpus=(3,))
    assert not s("u1", True) and puts == []
    s, masks, puts = _splitter(procs=(100, 200))
    del masks[102]                                                  # ended meanwhile
    assert s("u1", True) and masks[100] == masks[200] == {1} and masks[201] == {0}
    assert s("u1", False) and masks[100] == masks[201] == {0, 1}


def test_backend_split_where_the_window_is_narrowed_and_undone_open_or_forgotten():
    calls = []
    c, v, _ = _controller(backend_split=True,
                          backend_splitter=lambda k, on: calls.append((k, on)) or True)
    ds = [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(3)]
    assert [d["state"] for d in ds][-1] == "poll only" and calls == [("u1", True)]
    assert c.backend.split_now == {"u1"} and ds[-1]["backend_nice"] is None
    [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.1, 0.3, 0.1)) for _ in range(2)]
    assert calls == [("u1", True)]                                  # set once
    d = c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.1, 0.3, 0.1, ns=4_200_000))
    assert d["state"] == "open" and calls[-1] == ("u1", False) and c.backend.split_now == set()
    [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(3)]
    c.forget("u1")
    assert calls[-2:] == [("u1", True), ("u1", False)] and c.backend.split_now == set()
    c, v, _ = _controller()                                         # off by default
    [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(3)]
    assert c.backend.split_now == set() and c.backend.splitter is None


def test_vcpu_slice_on_every_thread_but_the_main_one_and_back_to_the_default():
    writes = []
    s = backend.VcpuSlice(procs=lambda key: [100] if key == "u1" else [],
                          tids=lambda pid: [100, 101, 102],
                          write=lambda t, us: writes.append((t, us)) or t != 102)
    assert s("u1", 150) and writes == [(101, 150), (102, 150)]     # 102 ended: 101 was set
    assert s("u1", None) and writes[-2:] == [(101, 0), (102, 0)]
    assert not s("u2", 150) and s("u2", None)                      # no process: nothing set


def test_backend_vcpu_slice_where_the_window_is_narrowed_and_undone_open_or_forgotten():
    calls = []
    c, v, _ = _controller(vcpu_slice_us=100,
                          vcpu_slicer=lambda k, us: calls.append((k, us)) or True)
    ds = [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(3)]
    assert ds[-1]["state"] == "poll only" and calls == [("u1", 100)]
    [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.1, 0.3, 0.1)) for _ in range(2)]
    assert calls == [("u1", 100)] and c.backend.sliced_now == {"u1"}
    d = c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.1, 0.3, 0.1, ns=4_200_000))
    assert d["state"] == "open" and calls[-1] == ("u1", None) and c.backend.sliced_now == set()
    [c.step("u1", "fw.1", 5000, 1, v.interval(0.1, 0.5, 0.8, 0.1)) for _ in range(3)]
    c.forget("u1")
    assert calls[-2:] == [("u1", 100), ("u1", None)]
    with pytest.raises(power.PowerError, match="vcpu_slice_us"):
        ctl.LatencyController(lambda k, q, p=None: None, vcpu_slice_us=20)
