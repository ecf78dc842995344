# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A launch's QoE (issue 23 item 1): LaunchRequest.qoe validated once, and the orchestrator
filling it at deploy time from the chosen environment's stage-1 load probe and the service's
deadline and quantile. The VNF side (the ``qoe`` op) is tests/integration/test_slots_qoe.py."""

import dataclasses
import itertools
import json
import pathlib
import types

import pytest

from fluidvim.common.zonetypes import InstanceInfo, LaunchRequest, QoE, ZoneError
from fluidvim.evaluator.model import BOOT, ProbeResult
from fluidvim.evaluator.qoeslots import NoQoECapacity, launch_qoe, qoe_params
from fluidvim.orchestrator import conf as orchconf
from fluidvim.orchestrator.deploy import max_loss_of, service_qoe
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.zones.synthetic import (
    SyntheticZone,
    make_fleet,
    seed_cache,
    synthetic_probe_results,
)

FW = "FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);"


@pytest.mark.parametrize("kw,field", [
    (dict(capacity=0, deadline_ms=5, quantile=0.99), "qoe.capacity"),
    (dict(capacity=2.5, deadline_ms=5, quantile=0.99), "qoe.capacity"),
    (dict(capacity=True, deadline_ms=5, quantile=0.99), "qoe.capacity"),
    (dict(capacity=8, deadline_ms=0, quantile=0.99), "qoe.deadline_ms"),
    (dict(capacity=8, deadline_ms="5", quantile=0.99), "qoe.deadline_ms"),
    (dict(capacity=8, deadline_ms=float("inf"), quantile=0.99), "qoe.deadline_ms"),
    (dict(capacity=8, deadline_ms=5, quantile=1.0), "qoe.quantile"),
    (dict(capacity=8, deadline_ms=5, quantile=0), "qoe.quantile"),
    (dict(capacity=8, deadline_ms=5, quantile=0.99, budget_ns=0), "qoe.budget_ns"),
    (dict(capacity=8, deadline_ms=5, quantile=0.99, wait_ppm=-1), "qoe.wait_ppm"),
    (dict(capacity=8, deadline_ms=5, quantile=0.99, wait_ppm=1_000_001), "qoe.wait_ppm"),
    (dict(capacity=8, deadline_ms=5, quantile=0.99, wait_ppm=0.5), "qoe.wait_ppm"),
])
def test_qoe_validation_names_the_field(kw, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        QoE(**kw)


def test_qoe_request_is_the_vnf_op():
    assert QoE(12, 4.0, 0.99, budget_ns=4096).request() == {
        "capacity": 12, "budget_ns": 4096, "quantile_ppm": 990000}
    # no probe budget (a Nova flavor's QoE): the VNF's budget is the whole deadline
    assert QoE(12, 4.0, 0.999).request() == {
        "capacity": 12, "budget_ns": 4_000_000, "quantile_ppm": 999000}
    # the host-wait budget rides along only when there is one
    assert QoE(12, 4.0, 0.99, budget_ns=4096, wait_ppm=250_000).request() == {
        "capacity": 12, "budget_ns": 4096, "quantile_ppm": 990000, "wait_ppm": 250_000}


def test_launch_request_takes_only_a_qoe():
    assert LaunchRequest("fw", FW).qoe is None
    q = QoE(3, 1.0, 0.9)
    assert LaunchRequest("fw", FW, qoe=q).qoe is q
    with pytest.raises(ValueError, match="^qoe: "):
        LaunchRequest("fw", FW, qoe={"capacity": 3})


def test_launch_qoe_from_the_load_probe_only():
    load, boot = synthetic_probe_results("u1", "z", 20000.0, 50.0)
    qoe, why = launch_qoe([boot, load], 1.0, 0.99, 100.0)
    p = qoe_params(load, 1.0, 0.99, 100.0)
    assert qoe == QoE(p.capacity, 1.0, 0.99, p.budget_ns, p.wait_ppm) and why == p.basis
    # the probe's steal shares become the launch's host-wait budget
    steps = [dict(s, vnf_steal_share=0.2) for s in load.metrics["steps"]]
    stolen = dataclasses.replace(load, metrics={**load.metrics, "steps": steps})
    assert launch_qoe([stolen], 1.0, 0.99, 100.0)[0].wait_ppm == 400_000   # 2 x 0.2
    assert 1 <= qoe.capacity < 200          # below the 20000 pps / 100 pps knee
    assert launch_qoe([boot], 1.0, 0.99) == (None, "no successful load probe result for the "
                                                   "environment")
    failed = ProbeResult(env_uid="u1", kind=load.kind, ok=False, metrics={}, error="boom")
    assert launch_qoe([failed], 1.0, 0.99)[0] is None
    assert boot.kind == BOOT


def test_launch_qoe_refuses_a_deadline_the_probe_never_meets():
    """No capacity at the deadline is not "unknown": a VNF cannot announce 0 at the QoE (qoe
    capacity 0 = off = its whole flow table), so the launch is refused with the probe's reason
    and the fix, as stage 1 finds the environment infeasible."""
    load, _ = synthetic_probe_results("u1", "z", 20000.0, 50.0)
    lowest = min(float(s["latency_ms"]["0.99"]) for s in load.metrics["steps"])
    with pytest.raises(NoQoECapacity) as e:
        launch_qoe([load], lowest / 2, 0.99, 100.0)
    msg = str(e.value)
    assert "environment u1 shows no session within" in msg and "no load step meets" in msg
    assert "relax the service's deadline_ms or qos_quantile" in msg
    # the deploy path turns it into a refused launch naming the service (ZoneError: every
    # caller - placement, the resolver's fast track, a woken host - reports it as a failed launch)
    row = types.SimpleNamespace(name="fw", profile={"name": "fw", "click_config": FW,
                                                    "deadline_ms": lowest / 2,
                                                    "qos_quantile": 0.99, "session_pps": 100.0})
    with pytest.raises(ZoneError, match="^fw not launched: the load probe of environment u1"):
        service_qoe(row, [load], 0.01)
    assert service_qoe(row, [], 0.01) is None          # no probe: nothing known, the flow table's


class LaunchingZone(SyntheticZone):
    """A described fleet that records what it is asked to launch."""

    _ids = itertools.count(1)

    def __init__(self, name, hosts, **kw):
        super().__init__(name, hosts, launch_ms=[50.0], **kw)
        self.launches = []

    def launch(self, req):
        self.launches.append(req)
        return InstanceInfo(id=f"i{next(self._ids)}", name=req.name or req.service,
                            service=req.service, host=req.host, status="running",
                            slots_total=req.qoe.capacity if req.qoe else 64)


def test_deploy_fills_the_qoe_from_the_chosen_environments_probe(db_url):
    zones, types, labels = make_fleet(8, 2, n_env_types=2)
    zones = [LaunchingZone(z.name, z.hosts()) for z in zones]
    conf = orchconf.make_conf(connection=db_url, local_zone=False)
    orch = Orchestrator(conf, zones=zones, zone_labels=labels)
    try:
        seed_cache(orch.placement.stage1.cache, zones, types)
        orch.register_service("fw", FW, deadline_ms=1.0, qos_quantile=0.99, session_pps=100)
        p = orch.place("fw", deploy=True)
        assert p["status"] == "deployed"
        (req,) = [r for z in zones for r in z.launches]
        env = next(h.env for z in zones for h in z.hosts() if h.name == p["host"])
        load, _ = synthetic_probe_results(env.uid, p["zone"], types[env.uid][1],
                                          types[env.uid][2])
        want = qoe_params(load, 1.0, 0.99, 100.0)
        assert req.qoe == QoE(want.capacity, 1.0, 0.99, want.budget_ns)
        # the registry got the instance's slots at the QoE
        assert p["instance"]["slots_total"] == want.capacity
    finally:
        orch.close()


def test_nomad_job_carries_the_qoe_block():
    """The JSON job's task config has the qoe block the unikernel task driver decodes
    (nomad_driver/unikernel/driver_test.go TestQoEBlockSetsTheVNFsSlots decodes this form)."""
    from fluidvim.orchestrator.zones.nomad import NomadZone

    z = NomadZone("n")
    cfg = z.job_spec(LaunchRequest("fw", FW, qoe=QoE(10, 5.0, 0.99, 4096)),
                     "j")["TaskGroups"][0]["Tasks"][0]["Config"]
    assert cfg["qoe"] == [{"capacity": 10, "deadline_ms": "5.0", "quantile": "0.99",
                           "budget_ns": 4096}]
    cfg = z.job_spec(LaunchRequest("fw", FW, qoe=QoE(3, 0.5, 0.999)),
                     "j")["TaskGroups"][0]["Tasks"][0]["Config"]
    assert cfg["qoe"] == [{"capacity": 3, "deadline_ms": "0.5", "quantile": "0.999"}]
    # the host-wait budget goes with the block when there is one (the driver's qoe.wait_ppm)
    cfg = z.job_spec(LaunchRequest("fw", FW, qoe=QoE(10, 5.0, 0.99, 4096, wait_ppm=250_000)),
                     "j")["TaskGroups"][0]["Tasks"][0]["Config"]
    assert cfg["qoe"] == [{"capacity": 10, "deadline_ms": "5.0", "quantile": "0.99",
                           "budget_ns": 4096, "wait_ppm": 250_000}]
    assert "qoe" not in z.job_spec(LaunchRequest("fw", FW), "j")["TaskGroups"][0]["Tasks"][0][
        "Config"]


def test_qoe_vectors_python_side():
    """contract/vectors/qoe.json: the qoe request the launch core sends for a QoE and the block
    the Nomad zone writes for it (whose request the Go driver checks against the same file)."""
    from fluidvim.orchestrator.zones.nomad import NomadZone

    vec = json.loads((pathlib.Path(__file__).parents[2] / "contract/vectors/qoe.json").read_text())
    assert len(vec["cases"]) >= 4
    for case in vec["cases"]:
        q = QoE(**case["qoe"])
        assert q.request() == case["request"], case
        cfg = NomadZone("n").job_spec(LaunchRequest("fw", FW, qoe=q), "j")
        assert cfg["TaskGroups"][0]["Tasks"][0]["Config"]["qoe"] == [case["nomad_block"]], case


def test_fast_track_launch_fills_the_qoe_of_the_zones_environment(db_url):
    """The resolver's on-demand launch has no placement decision: a zone of one environment
    type gets that type's cached load probe's QoE; a zone of several types gets none."""
    zones, types, labels = make_fleet(4, 2, n_env_types=1)
    zones = [LaunchingZone(z.name, z.hosts()) for z in zones]
    conf = orchconf.make_conf(connection=db_url, local_zone=False)
    orch = Orchestrator(conf, zones=zones, zone_labels=labels)
    try:
        seed_cache(orch.placement.stage1.cache, zones, types)
        orch.register_service("fw", FW, deadline_ms=1.0, qos_quantile=0.99, session_pps=100)
        r = orch.resolve("fw")
        assert r["kind"] == "launched"
        (req,) = [q for z in zones for q in z.launches]
        (uid,) = types
        load, _ = synthetic_probe_results(uid, r["zone"], types[uid][1], types[uid][2])
        want = qoe_params(load, 1.0, 0.99, 100.0)
        assert req.qoe == QoE(want.capacity, 1.0, 0.99, want.budget_ns)
    finally:
        orch.close()
    from fluidvim.orchestrator.deploy import zone_qoe
    many, mtypes, _ = make_fleet(8, 1, n_env_types=3)
    assert len({h.env.uid for h in many[0].hosts()}) > 1
    assert zone_qoe(orch.placement.stage1, many[0], orch.store.service("fw"),
                    max_loss=orch.placement.max_loss) is None


def test_fast_track_refuses_a_launch_whose_probe_misses_the_deadline(db_url):
    """The resolver's on-demand launch on a zone whose environment's probe never meets the
    service's deadline: no VNF is started (it would announce its whole flow table) and the
    client is refused with the probe's reason."""
    from fluidvim.orchestrator.exception import Refused

    zones, types_, labels = make_fleet(4, 2, n_env_types=1)
    zones = [LaunchingZone(z.name, z.hosts()) for z in zones]
    conf = orchconf.make_conf(connection=db_url, local_zone=False)
    orch = Orchestrator(conf, zones=zones, zone_labels=labels)
    try:
        seed_cache(orch.placement.stage1.cache, zones, types_)
        (uid,) = types_
        load, _ = synthetic_probe_results(uid, zones[0].name, types_[uid][1], types_[uid][2])
        lowest = min(float(s["latency_ms"]["0.99"]) for s in load.metrics["steps"])
        orch.register_service("fw", FW, deadline_ms=lowest / 2, qos_quantile=0.99,
                              session_pps=100)
        with pytest.raises(Refused, match="every on-demand launch failed: fw not launched: the "
                                          f"load probe of environment {uid} shows no session"):
            orch.resolve("fw")
        assert [r for z in zones for r in z.launches] == []
    finally:
        orch.close()


def test_the_launch_reads_the_capacity_with_stage_1s_max_loss(db_url):
    """A launch's QoE capacity is read off the load probe with ``[evaluator] max_loss``, the
    loss stage 1 reads the same probe with (not a default of its own): a probe losing 5 % from
    10,000 pps has fewer sessions at 1 % than at 10 %."""
    load, _ = synthetic_probe_results("u1", "z", 20000.0, 50.0)
    steps = [dict(s, loss=0.05 if s["offered_pps"] >= 10000 else 0.0)
             for s in load.metrics["steps"]]
    lossy = dataclasses.replace(load, metrics={**load.metrics, "steps": steps})
    row = types.SimpleNamespace(name="fw", profile={"name": "fw", "click_config": FW,
                                                    "deadline_ms": 1.0, "qos_quantile": 0.99,
                                                    "session_pps": 100.0})
    strict, loose = service_qoe(row, [lossy], 0.01), service_qoe(row, [lossy], 0.1)
    assert strict.capacity < 100 <= loose.capacity, (strict, loose)
    conf = orchconf.make_conf(connection=db_url, local_zone=False)
    assert service_qoe(row, [lossy], max_loss_of(conf)) == strict      # the option's default: 1 %
    conf.set_override("max_loss", 0.1, group="evaluator")
    orch = Orchestrator(conf, zones=[])
    try:
        assert orch.placement.max_loss == 0.1           # what placement and the resolver pass
    finally:
        orch.close()
