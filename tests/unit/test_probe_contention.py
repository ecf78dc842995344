# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A load probe that measured the host's contention instead of the VNF: the VNF's threads'
waits for a CPU (schedstat of its cgroup's processes), the steps they make suspect, and stage 1
caching such a result only as long as a failure (an overloaded host's 0 slots must not stand
for an hour)."""

import pytest

from fluidvim.evaluator import probes
from fluidvim.evaluator.cache import ProbeCache
from fluidvim.evaluator.model import EnvironmentType, ProbeResult
from fluidvim.evaluator.stage1 import Stage1Runner
from fluidvim.vnf import cgroups

from .test_evaluator_stage1 import Zone


@pytest.fixture
def fs(tmp_path, monkeypatch):
    """A cgroup v2 tree with VNF u1's group holding QEMU pid 42, and a /proc for its threads."""
    root, proc = tmp_path / "cgroup", tmp_path / "proc"
    (root / cgroups.SLICE / "u1").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / cgroups.SLICE / "u1" / "cgroup.procs").write_text("42\n")
    for tid, (run, wait) in {"42": (3_000_000_000, 1_000_000_000),
                             "43": (500_000_000, 2_500_000_000)}.items():
        (proc / "42" / "task" / tid).mkdir(parents=True)
        (proc / "42" / "task" / tid / "schedstat").write_text(f"{run} {wait} 17\n")
    monkeypatch.setattr(cgroups, "ROOT", str(root))
    monkeypatch.setattr(cgroups, "PROC", str(proc))
    return root, proc


def test_cpu_waits_sums_the_groups_threads(fs):
    assert cgroups.cpu_waits("u1") == {"run_s": 3.5, "wait_s": 3.5}
    assert cgroups.cpu_waits("gone") is None                 # no group: no reading
    (fs[0] / cgroups.SLICE / "u1" / "cgroup.procs").write_text("")
    assert cgroups.cpu_waits("u1") is None                   # no process in it


def test_wait_share_of_a_step_and_the_contended_steps():
    before, after = {"run_s": 1.0, "wait_s": 0.5}, {"run_s": 1.5, "wait_s": 2.0}
    assert probes._wait_share(before, after) == 0.75        # waited 1.5 s of 2.0 s runnable
    assert probes._wait_share(None, after) is None           # a zone without the reading
    assert probes._wait_share(before, before) is None        # idle all step: nothing to judge
    steps = [{"sessions": 1, "vnf_cpu_wait_share": 0.1}, {"sessions": 5},
             {"sessions": 10, "vnf_cpu_wait_share": probes.CONTENDED_WAIT_SHARE},
             {"sessions": 20, "vnf_cpu_wait_share": 0.8}]
    assert probes.contended_steps(steps) == [20]


class Contended(probes.Probe):
    kind = "load"

    def run(self, env, zone, service=None):
        return ProbeResult(env.uid, self.kind, True, {"steps": [], "contended": "busy host"},
                           zone=zone.name)


def test_a_contended_result_is_cached_as_briefly_as_a_failure(tmp_path):
    cache = ProbeCache(f"sqlite:///{tmp_path}/p.sqlite")
    e = EnvironmentType(launcher="nova", accel="kvm", machine="pc", cpu_model="c", memory_mb=32)
    res = Stage1Runner(cache, [Contended()], failure_valid_for_s=60).ensure(
        {"a": Zone("a", [e])})
    assert res.probed[0].ok                                  # still used for this placement
    assert cache.history()[0].valid_for_s == 60              # and measured again in a minute
