# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/slots qoe's paced admission (bench/slotsadmit.py): arrivals, the admission rule, the
client's stdin protocol and result line."""

import argparse
import os

from bench.slotsadmit import _result, admit_now, arrival_times, read_admissions
from bench.slotsqoe import judge_sessions


def test_arrivals_spread_evenly_or_all_at_once():
    assert arrival_times(5, 16.0) == [0.0, 4.0, 8.0, 12.0, 16.0]
    assert arrival_times(3, 0.0) == [0.0, 0.0, 0.0]           # the admission before
    assert arrival_times(1, 16.0) == [0.0] and arrival_times(0, 16.0) == []


def test_admit_while_the_vnf_has_room_counting_sessions_not_yet_in_its_table():
    # 10 arrived, the VNF says 4 free and carries all admitted so far: 4 in
    assert admit_now(10, 4, 100, 100) == 4
    # 3 admitted a moment ago have not sent yet (used 97): they take 3 of its 4 free slots
    assert admit_now(10, 4, 97, 100) == 1
    # full (its correction shrank the capacity under what it carries): none
    assert admit_now(5, 0, 120, 120) == 0 and admit_now(5, 2, 90, 100) == 0
    assert admit_now(2, 50, 10, 10) == 2


def test_client_reads_admitted_counts_and_end_from_its_stdin():
    r, w = os.pipe()
    try:
        os.write(w, b"5\n12\n1")
        buf, got = read_admissions(r, b"")
        assert got == [5, 12] and buf == b"1"
        os.write(w, b"5\nend\n")
        buf, got = read_admissions(r, buf)
        assert got == [15, "end"] and buf == b""
        os.close(w)
        w = None
        assert read_admissions(r, b"")[1] == ["end"]          # EOF ends the arrivals
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def test_client_result_judges_the_admitted_sessions_only():
    a = argparse.Namespace(pps=100.0, proto="icmp", duration=16.0, deadline_ms=10.0,
                           per_session_quantile=0.99)
    # 2 admitted of 3 slots: session 0 on time, session 1 with 5 of 100 late and 2 lost
    by = {0: [1.0] * 100, 1: [1.0] * 93 + [20.0] * 5, 2: [50.0]}
    r = _result(a, [100, 100, 0], by, [0.0, 4.0], 0, 1.0, 10.0)
    ps = r["per_session"]
    assert r["sessions"] == 2 and r["sent"] == 200 and r["received"] == 198
    assert ps["late"] == [0, 7] and ps["sent"] == [100, 100]
    assert ps["loss"][0] == 0.0 and abs(ps["loss"][1] - 0.02) < 1e-9
    assert r["started_s"] == [0.0, 4.0] and r["client_cpu_share"] == 0.1
    judged = judge_sessions(ps, 10.0, 0.99)
    assert judged["over_sessions"] == [1]
