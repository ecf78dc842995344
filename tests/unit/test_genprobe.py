# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The generator-VNF load probe's pure parts: its configuration, its results, and which zones
can run it (the VNF side is tests/integration/test_traffic_generator.py)."""

import pytest

from fluidvim.common.zonetypes import ZoneAdapter
from fluidvim.evaluator import genprobe, loadgen
from fluidvim.evaluator.model import EnvironmentType
from fluidvim.evaluator.probes import LoadProbe

ENV = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm",
                      cpu_model="Intel(R) Xeon(R) Gold 6248", vcpus=1, memory_mb=32,
                      extra=(("site", "ber1"), ("tier", "edge")))
MACS = dict(src_mac="02:00:00:00:00:01", dst_mac="52:54:00:00:00:02", src_ip="10.0.0.1",
            dst_ip="10.0.0.2")


def test_generator_config_is_one_step():
    cfg = loadgen.generator_config(sessions=10, pps=100, duration=2.0, frame=106, **MACS)
    assert cfg == ("gen :: FastUDPFlows(1000, 2000, 106, 02:00:00:00:00:01, 10.0.0.1, "
                   "52:54:00:00:00:02, 10.0.0.2, 10) -> ToDevice(0);\n"
                   "FromDevice(1) -> meter :: TimestampDiff -> Discard;")


def test_generator_config_can_be_its_own_echo():
    cfg = loadgen.generator_config(sessions=1, pps=10, duration=1.0, rx_nic=0, mirror_nic=1,
                                   **MACS)
    assert cfg.endswith("FromDevice(0) -> meter :: TimestampDiff -> Discard;\n"
                        "FromDevice(1) -> EtherMirror -> ToDevice(1);")


@pytest.mark.parametrize("kw, word", [
    (dict(sessions=1, pps=10, duration=1, mirror_nic=1), "mirror_nic=1"),
    (dict(sessions=0, pps=10, duration=1), "sessions=0"),
    (dict(sessions=70000, pps=1, duration=1), "sessions=70000"),
    (dict(sessions=1000, pps=20000, duration=1), "sessions * pps = 20000000"),
    (dict(sessions=1, pps=10, duration=0), "duration=0"),
    (dict(sessions=1, pps=10, duration=1, frame=59), "frame=59"),
])
def test_generator_config_names_what_is_wrong(kw, word):
    with pytest.raises(ValueError, match=word.replace("*", r"\*")):
        loadgen.generator_config(**kw, **MACS)


def stats(sent, count, missed=0, refused=0, active_ns=999_000_000):
    meter = {"name": "meter", "class": "TimestampDiff", "count": count, "stale": 0, "other": 0,
             "lost": 0, "min_ns": 100_000, "mean_ns": 400_000, "max_ns": 2_000_000,
             "p50_ns": 300_000, "p75_ns": 500_000, "p90_ns": 800_000, "p95_ns": 1_000_000,
             "p99_ns": 1_500_000, "p999_ns": 2_000_000}
    src = {"name": "gen", "class": "FastUDPFlows", "rate": 1000, "flows": 10, "sent": sent,
           "refused": refused, "missed": missed, "active_ns": active_ns}
    return {"elements": [src, meter]}


def test_vnf_result_has_the_client_shape():
    r = loadgen.vnf_result(stats(1000, 990, refused=7), sessions=10, pps=100, duration=1.0)
    assert r["sent"] == 1000 and r["received"] == 990 and r["send_errors"] == 7
    assert r["loss"] == pytest.approx(0.01)
    assert r["achieved_pps"] == pytest.approx(999 / 0.999)
    assert r["latency_ms"] == {"0.5": 0.3, "0.75": 0.5, "0.9": 0.8, "0.95": 1.0, "0.99": 1.5,
                               "0.999": 2.0}
    assert set(r["latency_ms"]) == {str(q) for q in loadgen.QUANTILES}
    assert r["min_ms"] == 0.1 and r["max_ms"] == 2.0
    empty = loadgen.vnf_result(stats(0, 0, missed=1000, active_ns=0), sessions=10, pps=100,
                               duration=1.0)
    assert empty["loss"] == 1.0 and empty["latency_ms"] == {} and empty["achieved_pps"] == 0.0
    with pytest.raises(KeyError):
        loadgen.generator_elements({"elements": []})


class _NoNetworks(ZoneAdapter):
    kind = "nova"

    def hosts(self):
        return []

    def instances(self):
        return []

    def launch(self, req):
        raise AssertionError

    def terminate(self, instance_id):
        pass

    def launch_times_ms(self, service=None, limit=20):
        return []


class _Networks(_NoNetworks):
    kind = "local"

    def create_network(self, name):
        raise AssertionError

    def delete_network(self, network_id):
        pass

    def stats(self, instance_id):
        return {}


def test_which_zones_can_run_a_generator():
    ok, why = genprobe.can_generate(_NoNetworks("z1"))
    assert not ok and "create_network, delete_network, stats" in why and "'z1'" in why
    assert genprobe.can_generate(_Networks("z2")) == (True, "")
    probe = LoadProbe(traffic="vnf")
    assert probe.applicable(_NoNetworks("z1"))[0] is False
    r = probe.run(ENV, _NoNetworks("z1"))
    assert not r.ok and "create_network" in r.error and r.metrics["traffic"] == "vnf"


def test_load_probe_traffic_must_be_known():
    with pytest.raises(ValueError, match="traffic must be 'netns'"):
        LoadProbe(traffic="pktgen")
