# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Probes without VNFs: the static manifest check, and refusals (real launches: integration)."""

import pytest

from fluidvim.common.zonetypes import ZoneAdapter, ZoneError
from fluidvim.evaluator.model import EnvironmentType, ServiceProfile
from fluidvim.evaluator.probes import BootProbe, LoadProbe, StaticProbe, _hist_delta

ENV = EnvironmentType(launcher="qemu", accel="kvm", machine="microvm",
                      cpu_model="Intel(R) Xeon(R) Gold 6248", vcpus=1, memory_mb=32,
                      extra=(("site", "ber1"), ("tier", "edge")))


def svc(**req):
    return ServiceProfile(name="fw", click_config="FromDevice(0) -> ToDevice(1);", requirements=req)


def test_static_probe_passes_and_lists_checks():
    r = StaticProbe().run(ENV, None, svc(accel=["kvm"], launcher="qemu", cpu_model=["xeon"],
                                         min_memory_mb=16, labels={"tier": "edge"},
                                         location="eu"))
    assert r.ok and r.kind == "static" and r.env_uid == ENV.uid
    assert r.metrics["checked"] == ["accel", "cpu_model", "labels.tier", "launcher",
                                    "min_memory_mb"]


def test_static_probe_says_what_failed():
    r = StaticProbe().run(ENV, None, svc(accel=["xen"], min_vcpus=2, labels={"site": "fra1"}))
    assert not r.ok
    assert "accel: environment has 'kvm', service needs ['xen']" in r.error
    assert "min_vcpus" in r.error and "labels.site" in r.error
    assert len(r.metrics["failed"]) == 3


def test_static_probe_rejects_unknown_requirement_keys():
    r = StaticProbe().run(ENV, None, svc(acel=["kvm"]))
    assert not r.ok and "acel" in r.error and "accel" in r.error and "location" in r.error


def test_static_probe_without_service_passes():
    assert StaticProbe().run(ENV, None).ok


class RemoteZone(ZoneAdapter):
    """A zone this machine cannot reach with traffic (like a Nova AZ); it refuses to launch."""

    kind = "nova"

    def __init__(self):
        super().__init__("nova-az1")
        self.launched = []

    def hosts(self):
        return []

    def instances(self):
        return []

    def launch(self, req):
        self.launched.append(req)
        raise ZoneError("no valid host was found")

    def terminate(self, instance_id):
        pass

    def launch_times_ms(self, service=None, limit=20):
        return []


def test_load_probe_refuses_zones_it_cannot_reach():
    z = RemoteZone()
    r = LoadProbe(prefix="fve").run(ENV, z)
    assert not r.ok and "'nova' zone" in r.error and "local zone" in r.error
    assert z.launched == [] and r.metrics["steps"] == []


def test_boot_probe_reports_a_failing_zone():
    z = RemoteZone()
    r = BootProbe(n=2).run(ENV, z)
    assert not r.ok and "no valid host" in r.error and "nova-az1" in r.error
    assert r.metrics["launched"] == 0 and not r.metrics["pinned"]
    assert len(z.launched) == 1 and z.launched[0].bridges == (None, None)


@pytest.mark.parametrize("kw,match", [
    ({"sessions": ()}, "positive"), ({"sessions": (0, 5)}, "positive"),
    ({"sessions": (10,), "probe_slots": 5}, "probe_slots"), ({"step_s": 0}, "step_s"),
    ({"client_nice": 20}, "client_nice"), ({"client_nice": -21}, "client_nice"),
])
def test_load_probe_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        LoadProbe(**kw)


def test_boot_probe_bad_arguments():
    with pytest.raises(ValueError, match="n must be"):
        BootProbe(n=0)
    with pytest.raises(ValueError, match="1..4 NICs"):
        BootProbe(nics=5)


def test_vnf_histogram_delta():
    before = {"buckets_log2": [0, 5, 5, 0]}
    after = {"buckets_log2": [0, 5, 15, 10, 1]}
    d = _hist_delta(before, after)
    assert d["buckets_log2"] == [0, 0, 10, 10, 1] and d["count"] == 21
    assert d["p50"] == 8 and d["p99"] == 16     # 10 of 21 below 8 ns: the median is in [8, 16)


def _s(n, p99, loss=0.0):
    return {"sessions": n, "latency_ms": {"0.99": p99}, "loss": loss}


def test_suspect_steps_are_the_non_monotone_ones():
    from fluidvim.evaluator.probes import _badness, _suspects
    steps = [_s(1, 2.0), _s(10, 30.0), _s(20, 2.5), _s(50, 3.0, loss=0.05), _s(100, 4.0),
             _s(200, 80.0, loss=0.4)]
    # 10 sessions: 30 ms while 20 sessions had 2.5 ms; 50 sessions: 5 % loss while 100 had none
    assert _suspects(steps) == [1, 3]               # ratio 12 first, then 5 % more loss (ratio 1.2 + 4)
    assert _suspects([_s(1, 2.0), _s(2, 2.5), _s(3, 9.0, 0.2)]) == []    # monotone: nothing
    better = sorted([_s(10, 30.0), _s(10, 3.0)], key=_badness)[0]
    assert better["latency_ms"]["0.99"] == 3.0
    assert sorted([_s(10, 1.0, loss=0.2), _s(10, 9.0)], key=_badness)[0]["loss"] == 0.0


def test_load_probe_confirm_takes_one_target_or_a_list_and_covers_results():
    from fluidvim.evaluator.confirm import SessionTarget
    from fluidvim.evaluator.model import ProbeResult
    from fluidvim.evaluator.probes import LoadProbe
    a, b = SessionTarget(10.0, 0.99), SessionTarget(30.0, 0.95, 4.0)
    assert LoadProbe(confirm=a).confirms == (a,) and LoadProbe().confirms == ()
    both = LoadProbe(confirm=[a, b])
    assert both.confirms == (a, b)
    with pytest.raises(ValueError, match="SessionTarget or a list"):
        LoadProbe(confirm=[a, {"deadline_ms": 10}])

    def result(confirm=None, ok=True, traffic="netns"):
        m = {"session_pps": 100.0, "traffic": traffic, "steps": []}
        if confirm is not None:
            m["confirm"] = confirm
        return ProbeResult("u1", "load", ok, m)

    block = {"target": a.as_dict(), "runs": [], "estimate": 1}
    assert LoadProbe().covers(result())                     # no target: any result answers
    assert not LoadProbe(confirm=a).covers(result())        # measured before a was configured
    assert LoadProbe(confirm=a).covers(result(block))
    assert not both.covers(result(block))                   # b is missing
    assert both.covers(result([block, {"target": b.as_dict(), "runs": []}]))
    # another session length (or runs) is another target
    assert not LoadProbe(confirm=SessionTarget(10.0, 0.99, 2.0)).covers(result(block))
    assert LoadProbe(confirm=a).covers(result(ok=False))   # failures are kept briefly anyway
    assert LoadProbe(confirm=a).covers(result(traffic="vnf"))   # generator traffic: no confirm


def test_load_probe_confirms_the_services_level_and_a_pending_one_covers_it():
    from fluidvim.evaluator.confirm import SessionTarget
    from fluidvim.evaluator.model import ProbeResult
    tmpl = SessionTarget(10.0, 0.99, 2.0, runs=2)
    probe = LoadProbe(confirm_service=tmpl)
    svc = ServiceProfile("fw", "", deadline_ms=40.0, qos_quantile=0.9)
    (mine,) = probe.targets(svc)
    assert mine == SessionTarget(40.0, 0.9, 2.0, runs=2)
    assert probe.targets(None) == ()                                # no service: nothing
    other_rate = ServiceProfile("fw", "", deadline_ms=40.0, session_pps=50.0)
    assert probe.targets(other_rate) == ()      # a confirm at another rate would not be read
    pending = ProbeResult("u1", "load", True, {"session_pps": 100.0, "traffic": "netns",
                                               "steps": [], "confirm_pending": [mine.as_dict()],
                                               "unconfirmed_share": 0.5})
    assert probe.covers(pending, svc)                           # under way: not probed again
    assert not probe.covers(pending, ServiceProfile("fw", "", deadline_ms=5.0))
    legacy = ProbeResult("u1", "load", True, {"session_pps": 100.0, "steps": []})
    assert probe.covers(legacy, svc)        # a probe that confirmed nothing: read until it expires
    with pytest.raises(ValueError, match="confirm_service"):
        LoadProbe(confirm_service={"deadline_ms": 10})
    with pytest.raises(ValueError, match="unconfirmed_share"):
        LoadProbe(unconfirmed_share=0.0)


def test_load_probe_carries_other_services_levels_not_old_configurations():
    from fluidvim.evaluator.confirm import SessionTarget
    probe = LoadProbe(confirm_service=SessionTarget(10.0, 0.99, 2.0, runs=2))
    assert probe.carries(SessionTarget(50.0, 0.9, 2.0, runs=2))      # another service's level
    assert not probe.carries(SessionTarget(50.0, 0.9, 16.0))         # an older configuration
    assert not LoadProbe().carries(SessionTarget(50.0, 0.9))         # no service level
