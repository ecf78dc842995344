# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The VNF's batch window (contract/PROTOCOL.md §4 ``poll``: ``batch_us``), the latency
controller's knob for notifications per frame, on a real VNF with real traffic: it naps while
frames come faster than the window, forwards every frame, and still wakes on a frame's
interrupt once the traffic stops. Timing figures are bench/powercap's, not asserted here."""

from __future__ import annotations

import time

import pytest

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"


def _pings(net, count: int, interval_s: float) -> int:
    r = net.run("a", "ping", "-n", "-q", "-c", str(count), "-W", "2", "-i", str(interval_s),
                net.ip_b, timeout=count * interval_s + 20)
    for line in r.stdout.splitlines():
        if "received" in line:
            return int(line.split(",")[1].split()[0])
    return 0


@pytest.mark.parametrize("backend", ["qemu"])
def test_the_batch_window_naps_between_frames_and_forwards_every_one(mgr, net):
    res = mgr.launch(FORWARD, nics=net.bridges, warm=False)
    with mgr.channel(res.vnf_id) as ch:
        assert ch.poll()["batch_us"] == 0                          # the boot default: off
        st0 = ch.stats()["cpu"]
    assert _pings(net, 20, 0.01) == 20
    with mgr.channel(res.vnf_id) as ch:
        st1 = ch.stats()["cpu"]
        assert st1["naps"] == st0["naps"] == 0                     # off: it never naps
        # each echo request's reply follows it within the window: the round after the reply
        # naps (and the next request, 5 ms later, finds it napping)
        assert ch.poll(batch_us=10_000) == {"window_us": 1000, "batch_us": 10_000}
    assert _pings(net, 40, 0.005) == 40                          # every frame, in naps too
    full = mgr.stats(res.vnf_id)
    st2 = full["cpu"]
    assert st2["naps"] > st1["naps"], (st1, st2)
    assert st2["busy_us"] + st2["poll_us"] + st2["halt_us"] <= full["uptime_us"]
    # traffic stopped: after a quiet second a single frame still wakes it (its interrupt)
    time.sleep(1.0)
    assert _pings(net, 1, 0.2) == 1
    with mgr.channel(res.vnf_id) as ch:
        st3 = ch.stats()["cpu"]
        assert ch.poll(batch_us=0)["batch_us"] == 0
    assert st3["wake_rx"] > st2["wake_rx"], (st2, st3)

