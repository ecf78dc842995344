# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The latency controller's capacity of a VNF and its source (orchestrator/power/capacity.py):
the operator's option, else the VNF's QoE sessions x its service's session_pps, else the stage-1
load probe of the host's environment type, from a real orchestrator database (SQLite)."""

from __future__ import annotations

import types

import pytest

from fluidvim.common.zonetypes import HostInfo, QoE
from fluidvim.evaluator.cache import ProbeCache
from fluidvim.evaluator.model import EnvironmentType, ProbeResult
from fluidvim.evaluator.slots import estimate_capacity
from fluidvim.orchestrator.db import Store
from fluidvim.orchestrator.power import capacity, controller as ctl, exporter

ENV = EnvironmentType(launcher="nomad", accel="kvm", machine="microvm", cpu_model="cap-test")


def load_result(uid):
    steps = [{"sessions": pps // 100, "offered_pps": pps, "loss": 0.0,
              "latency_ms": {"0.5": p99 / 4, "0.9": p99 / 2, "0.99": p99, "0.999": p99 * 1.5}}
             for pps, p99 in ((1000, 1.0), (2000, 2.0), (4000, 8.0), (8000, 80.0))]
    return ProbeResult(env_uid=uid, kind="load", ok=True,
                       metrics={"session_pps": 100, "steps": steps})


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path}/orchestrator.sqlite"
    store = Store(url)
    store.put_service("fw", {"name": "fw", "click_config": "x", "deadline_ms": 4.0,
                             "qos_quantile": 0.99, "session_pps": 50.0}, {}, None)
    store.put_service("nat", {"name": "nat", "click_config": "x", "deadline_ms": 4.0}, {}, None)
    store.sync_hosts("z1", [HostInfo(name="h1", env=ENV)])
    ProbeCache(store.engine).put(load_result(ENV.uid))
    yield url
    store.close()


def spec(qoe=None):
    return types.SimpleNamespace(qoe=qoe)


def test_the_option_wins_then_qoe_sessions_then_the_load_probe(db):
    view = capacity.OrchestratorView(db, "z1", "h1")
    c = capacity.Capacities({"dpi": 9000.0}, view)
    assert c("dpi.1", "dpi", spec(), None) == (9000.0, "option", "[metrics] vnf_capacity_pps")
    stats = {"slots": {"qoe": {"probed": 30, "capacity": 21}}}        # told 30, shrunk to 21
    assert c("fw.1", "fw", spec(QoE(12, 4.0, 0.99)), stats)[:2] == (30 * 50.0, "qoe")
    assert c("fw.2", "fw", spec(QoE(12, 4.0, 0.99)), None)[:2] == (12 * 50.0, "qoe")
    want = estimate_capacity(load_result(ENV.uid), 4.0, 0.99).pps     # at fw's deadline
    pps, src, why = c("fw.3", "fw", spec(), {"slots": {"total": 1024}})
    assert (pps, src) == (want, "probe") and why.startswith(f"load probe of {ENV.uid}: ")
    view.close()


def test_no_capacity_says_why(db, tmp_path):
    assert capacity.Capacities({}, "[metrics] orchestrator_connection not set")(
        "fw.1", "fw", spec(QoE(12, 4.0, 0.99)), None) == (
        None, None, "[metrics] orchestrator_connection not set")
    view = capacity.OrchestratorView(db, "z1", "h2")                  # a host it does not know
    c = capacity.Capacities({}, view)
    assert c("fw.1", "fw", spec(), None) == (None, None, "host h2 of zone z1 not in the "
                                                          "orchestrator's hosts")
    assert c("lb.1", "lb", spec(), None) == (None, None, "service 'lb' not in the "
                                                          "orchestrator's database")
    view.close()
    missing = f"sqlite:///{tmp_path}/elsewhere.sqlite"
    with pytest.raises(OSError, match="no such database file on this host"):
        capacity.OrchestratorView(missing, "z1", "h1")
    assert not (tmp_path / "elsewhere.sqlite").exists()               # not created


class Mgr:
    """The launch core as the sampler reads it: one running VNF with a QoE and its stats."""

    def __init__(self, stats):
        from fluidvim.vnf import states
        self.rec = types.SimpleNamespace(
            id="v1", name="fw.1a2b", pid=None, status=states.RUNNING,
            spec=types.SimpleNamespace(uuid="u-1", vcpus=1, net_backend="tap",
                                       nics=[types.SimpleNamespace(tap="fvcapt-gone0")],
                                       qoe=QoE(12, 4.0, 0.99)))
        self.st = stats

    def list(self):
        return [self.rec]

    def stats(self, _id):
        return self.st


def test_the_samplers_decision_records_the_capacity_and_its_source(db):
    """What `fluidvim vnf stats` shows: the capacity the controller was given, and from where."""
    att = types.SimpleNamespace(proc_root="/proc", vnf_counters=lambda *a, **k: a[0])
    c = ctl.LatencyController(lambda k, q, p=None: None)
    c.throttled = c.usage = None
    for caps, view, want in (({"fw": "7000"}, None, (7000.0, "option")),
                             ({}, capacity.OrchestratorView(db, "z1", "local"), (600.0, "qoe")),
                             ({}, "[metrics] orchestrator_connection not set", (None, None))):
        s = exporter.HostSampler(Mgr({"uptime_us": 1}), att, targets={"fw": 500},
                                 controller=c, capacities=caps, view=view)
        assert s.read_vnfs() == ["v1"]
        d = s.control["v1"]
        assert (d["capacity_pps"], d["capacity_source"]) == want, d
        assert d is c.decisions[-1]                               # the decision log holds it
