# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The traffic-generator VNF (issue 23 item 2): two real VNFs on two bridges,

::

    bridge <p>0: [generator nic0] -> [forwarder nic0]
    bridge <p>1: [forwarder nic1] -> [generator nic1]

The generator's FastUDPFlows sends stamped UDP sessions through the forwarder (the VNF under
test) and its TimestampDiff measures what comes back; every figure is read from the two VNFs'
``stats``. A step is one ``configure`` of the generator (loadgen.generator_config), as the load
probe does it where no host namespace reaches the VNF under test.
"""

import time
import uuid

import pytest

from fluidvim.evaluator import loadgen
from fluidvim.evaluator.probes import LoadProbe
from fluidvim.orchestrator.zones.local import LocalZone
from fluidvim.vnf import netdev, testnet

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
SRC_IP, DST_IP = "10.97.0.1", "10.97.0.2"


@pytest.fixture
def bridges():
    base = testnet.unique_name("fvtg", room=1)
    names = [base + "0", base + "1"]
    for b in names:
        netdev.ensure_bridge(b)
    yield names
    for b in names:
        netdev.delete_link(b)


@pytest.fixture
def pair(make_manager, bridges):
    """(manager, generator id, forwarder id, generator MACs, forwarder MACs)."""
    mgr = make_manager(backend="qemu")
    fwd = mgr.launch(FORWARD, nics=bridges, slots=256).vnf_id
    gen = mgr.launch(FORWARD, nics=bridges, slots=256).vnf_id
    macs = [[n["mac"] for n in mgr.stats(v)["nics"]] for v in (gen, fwd)]
    return mgr, gen, fwd, macs[0], macs[1]


def run_step(mgr, gen, gmacs, fmacs, sessions, pps, duration, quiet=False):
    """Configure one step, wait until every frame of it is made and the meter stops moving.
    ``quiet``: no request reaches the generator during the step (a request wakes its vCPU,
    which would hide a source that does not wake it by itself)."""
    mgr.configure(gen, loadgen.generator_config(
        sessions=sessions, pps=pps, duration=duration, src_mac=gmacs[0], dst_mac=fmacs[0],
        src_ip=SRC_IP, dst_ip=DST_IP))
    if quiet:
        time.sleep(duration + 0.3)
    limit = round(sessions * pps * duration)
    deadline = time.monotonic() + duration + 10
    last = None
    while time.monotonic() < deadline:
        time.sleep(0.25)
        src, meter = loadgen.generator_elements(mgr.stats(gen))
        made = src["sent"] + src["missed"]
        now = (made, meter["count"])
        if made == limit and now == last:
            break
        last = now
    st = mgr.stats(gen)
    return st, loadgen.vnf_result(st, sessions=sessions, pps=pps, duration=duration)


def test_generator_measures_the_round_trip_through_a_forwarder(pair):
    mgr, gen, fwd, gmacs, fmacs = pair
    st, r = run_step(mgr, gen, gmacs, fmacs, sessions=8, pps=50, duration=1.0)
    src, meter = loadgen.generator_elements(st)
    # every frame of the step is accounted for at the source: sent, or skipped because the
    # generator fell > 200 ms behind (a frame its TX ring refuses is tried again)
    assert src["sent"] + src["missed"] == 400
    assert src["rate"] == 400 and src["flows"] == 8
    assert src["sent"] > 0
    # what came back crossed the forwarder: its NIC 0 received at least that many frames, and it
    # carries the generator's 8 sessions (source ports 1024..1031 to port 7)
    fst = mgr.stats(fwd)
    assert fst["nics"][0]["rx"] >= meter["count"] > 0
    assert fst["nics"][1]["tx"] >= meter["count"]
    assert fst["slots"]["used"] == 8
    # measured round trips: ordered quantiles, none from a previous graph, loss from the
    # sequence numbers within what was sent
    assert meter["stale"] == 0
    assert 0 < meter["min_ns"] <= meter["p50_ns"] <= meter["p99_ns"] <= meter["max_ns"]
    assert meter["count"] + meter["lost"] <= src["sent"]
    # the step's result in the netns client's shape, quantiles included
    assert set(r["latency_ms"]) == {str(q) for q in loadgen.QUANTILES}
    assert r["sent"] == src["sent"] and r["received"] == meter["count"]
    assert r["loss"] == pytest.approx(1 - meter["count"] / src["sent"])
    # the generator's frames leave by its NIC 0 and come back on its NIC 1
    assert st["nics"][0]["tx"] >= src["sent"]
    assert st["nics"][1]["rx"] >= meter["count"]


def test_a_new_step_starts_a_new_measurement_and_more_sessions(pair):
    mgr, gen, fwd, gmacs, fmacs = pair
    run_step(mgr, gen, gmacs, fmacs, sessions=4, pps=50, duration=0.5)
    assert mgr.stats(fwd)["slots"]["used"] == 4
    st, r = run_step(mgr, gen, gmacs, fmacs, sessions=12, pps=20, duration=0.5)
    src, meter = loadgen.generator_elements(st)
    assert src["sent"] + src["missed"] == 120      # this step's frames only
    assert meter["count"] <= src["sent"]
    assert mgr.stats(fwd)["slots"]["used"] == 12                     # ports 1024..1035
    # a slow source (a frame every 250 ms) with no request in between keeps sending (the kernel
    # polls while a source has frames to send; without that or its timer wake-up only the frame
    # due at configure would go, the 3 others would be found > 200 ms late and skipped), and the
    # VNF halts again once the source is done
    halts = mgr.stats(gen)["cpu"]["halts"]
    st, r = run_step(mgr, gen, gmacs, fmacs, sessions=1, pps=4, duration=1.0, quiet=True)
    src, meter = loadgen.generator_elements(st)
    assert st["cpu"]["halts"] > halts
    assert src["sent"] + src["missed"] == 4
    assert src["sent"] >= 2
    assert meter["count"] >= 1


def test_load_probe_with_a_generator_vnf_in_the_local_zone(make_manager):
    """LoadProbe(traffic="vnf") through the zone adapter only: networks, the probe VNF, one
    generator VNF per step; nothing is left afterwards."""
    mgr = make_manager(backend="qemu")
    zone = LocalZone("tg-" + uuid.uuid4().hex[:8], mgr)
    probe = LoadProbe(sessions=(1, 10, 40), session_pps=50, step_s=0.5, drain_s=0.3,
                      prefix="fvtgp", refine=0, extend=False, recheck=0, traffic="vnf")
    assert probe.applicable(zone) == (True, "")
    r = probe.run(zone.env(), zone)
    assert r.ok, r.error
    assert r.metrics["traffic"] == "vnf" and r.metrics["proto"] == "udp"
    steps = r.metrics["steps"]
    # the whole ladder, unless a generator sharing a busy host's CPU could not offer a step's rate
    assert [s["sessions"] for s in steps] == [1, 10, 40][:len(steps)] and steps
    assert len(steps) == 3 or r.metrics["stopped"].startswith("the traffic generator reached")
    for s in steps:
        assert s["source"] == "vnf" and s["offered_pps"] == s["sessions"] * 50
        assert s["sent"] > 0 and s["received"] > 0 and 0.0 <= s["loss"] <= 1.0
        lat = s["latency_ms"]
        assert 0 < lat["0.5"] <= lat["0.9"] <= lat["0.99"] <= lat["0.999"]
        # the probe VNF carried the generator's frames: its own histogram grew in the step
        assert s["vnf_latency_ns"]["count"] >= s["received"]
    assert mgr.list() == [] and zone.instances() == [] and zone.networks() == []
