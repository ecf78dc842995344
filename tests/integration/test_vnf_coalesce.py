# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The VNF's interrupt moderation (the ``poll`` op's ``coalesce_us``, contract/PROTOCOL.md §4):
a real VNF forwards with it on, naps on its timer (``stats`` → ``cpu.naps``), ends it when the
traffic stops, and naps no more once it is off. Behaviour only: what it saves is measured by
bench/powercap, not here."""

from __future__ import annotations

import time

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"


def test_a_vnf_with_moderation_forwards_naps_and_stops_napping_when_off(make_manager, net):
    mgr = make_manager(backend="qemu")
    fw = mgr.launch(FORWARD, name="coalesce", nics=net.bridges, warm=False)
    with mgr.channel(fw.vnf_id) as ch:
        assert ch.poll()["coalesce_us"] == 0                       # the boot default: off
        assert ch.poll(0, coalesce_us=1000)["coalesce_us"] == 1000
    naps0 = mgr.stats(fw.vnf_id)["cpu"]["naps"]
    assert net.ping(10) == 10                 # every echo through it and back, 200 ms apart
    cpu = mgr.stats(fw.vnf_id)["cpu"]
    # each request and each reply took a round, then a nap; the nap after the last one found
    # nothing and ended it (the interrupt-driven halt until the next)
    assert cpu["naps"] - naps0 >= 10, cpu
    assert cpu["naps_empty"] >= 1, cpu
    with mgr.channel(fw.vnf_id) as ch:
        assert ch.poll(coalesce_us=0)["coalesce_us"] == 0
    naps1 = mgr.stats(fw.vnf_id)["cpu"]["naps"]
    assert net.ping(3) == 3
    time.sleep(0.1)
    assert mgr.stats(fw.vnf_id)["cpu"]["naps"] == naps1               # off: no nap
