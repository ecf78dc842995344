# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""`fluidvim vnf stats`: the power lines and the latency controller's last decision, as the
exporter's state file gives them (``fluidvim metrics serve``)."""

import time
import types

from fluidvim.cmd import cli


class Manager:
    """What the CLI asks the launch core for: the VNF's record and the exporter's last state."""

    def __init__(self, state):
        self.state = state

    def get(self, name):
        return types.SimpleNamespace(id="u-1", name=name)

    def power_state(self, max_age_s):
        return self.state


def state(control):
    comps = {"busy": 1.25, "poll": 0.5, "qemu": 0.25, "vhost": 0.0, "softirq": 0.125,
             "idle": 2.0}
    return {"at": time.time() - 3, "host_watts": 80.0, "unattributed_watts": 70.0,
            "idle_rule": "reserved",
            "vnfs": {"u-1": {"watts": 4.125, "joules": 12.5, "source": "specpower",
                             "host_side_watts": 0.875, "components": comps}},
            "control": control}


def test_the_controllers_state_event_need_and_window_are_shown(capsys):
    d = {"action": "cap", "event": "open-quiet", "why": "p99 2048 ns <= target / 2",
         "state": "capped", "quota_us": 30000, "reserved_us": 100000, "need_cpus": 0.1234,
         "poll_window_us": 50, "target_us": 100.0}
    cli._print_vnf_power(Manager(state({"u-1": d})), types.SimpleNamespace(vnf="fw", power=None))
    out = capsys.readouterr().out
    assert "power: 4.12 W, 12.5 J (source specpower" in out
    assert ("latency controller: capped, cap on open-quiet (p99 2048 ns <= target / 2), CPU "
            "quota 30000 us of 100000 per 100 ms, need 0.123 CPUs, poll window 50 us, p99 "
            "target 100 us") in out


def test_a_decision_without_the_newer_fields_still_prints(capsys):
    d = {"action": "hold", "why": "first observation", "quota_us": 100000,
         "reserved_us": 100000, "target_us": 250.0}
    cli._print_vnf_power(Manager(state({"u-1": d})), types.SimpleNamespace(vnf="fw", power=None))
    assert ("latency controller: ?, hold on ? (first observation), CPU quota 100000 us of "
            "100000 per 100 ms, poll window ? us, p99 target 250 us") in capsys.readouterr().out


def test_the_capacity_the_controller_judged_load_by_and_its_source_are_shown(capsys):
    base = {"action": "hold", "why": "band", "quota_us": 100000, "reserved_us": 100000,
            "target_us": 250.0}
    for extra, want in (({"capacity_pps": 1500.0, "capacity_source": "qoe",
                          "capacity_basis": "30 QoE sessions x 50 pps"},
                         "  capacity 1500 pps from qoe (30 QoE sessions x 50 pps)"),
                        ({"capacity_pps": None, "capacity_source": None,
                          "capacity_basis": "[metrics] orchestrator_connection not set"},
                         "  capacity none ([metrics] orchestrator_connection not set)")):
        cli._print_vnf_power(Manager(state({"u-1": {**base, **extra}})),
                             types.SimpleNamespace(vnf="fw", power=None))
        assert want in capsys.readouterr().out.splitlines()
