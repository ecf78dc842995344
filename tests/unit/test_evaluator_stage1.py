# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Stage 1 planning and caching over many zones (real probes against real VNFs: integration).

The zones here stand for remote Nova/Nomad zones that cannot exist on this machine; the probes
record where they ran instead of launching, so the test checks *what stage 1 decides to probe*.
"""

import pytest

from fluidvim.common.zonetypes import HostInfo, ZoneAdapter
from fluidvim.evaluator.cache import ProbeCache
from fluidvim.evaluator.model import EnvironmentType, ProbeResult, ServiceProfile
from fluidvim.evaluator.overhead import probes_needed
from fluidvim.evaluator.probes import Probe, StaticProbe
from fluidvim.evaluator.stage1 import Stage1Runner


def env(i, accel="kvm"):
    return EnvironmentType(launcher="nova", accel=accel, machine="pc", cpu_model=f"cpu-{i}",
                           memory_mb=32)


class Zone(ZoneAdapter):
    def __init__(self, name, envs, kind="nova", broken=False):
        super().__init__(name)
        self.kind, self._envs, self.broken = kind, envs, broken

    def hosts(self):
        if self.broken:
            raise ConnectionError("endpoint unreachable")
        return [HostInfo(name=f"{self.name}-h{i}", env=e) for i, e in enumerate(self._envs)]

    def instances(self):
        return []

    def launch(self, req):
        raise AssertionError("recording probes do not launch")

    def terminate(self, instance_id):
        pass

    def launch_times_ms(self, service=None, limit=20):
        return []


class Recording(Probe):
    def __init__(self, kind, per_zone=False, only_kind=None, fail_in=()):
        self.kind, self.per_zone, self.only_kind, self.fail_in = kind, per_zone, only_kind, fail_in
        self.runs = []

    def applicable(self, zone):
        if self.only_kind and zone.kind != self.only_kind:
            return False, f"needs a {self.only_kind} zone"
        return True, ""

    def run(self, env, zone, service=None):
        self.runs.append((env.uid, zone.name))
        if zone.name in self.fail_in:
            return ProbeResult(env.uid, self.kind, False, {}, zone=zone.name, error="boom")
        return ProbeResult(env.uid, self.kind, True, {"where": zone.name}, zone=zone.name)


@pytest.fixture
def cache(tmp_path):
    return ProbeCache(f"sqlite:///{tmp_path}/p.sqlite")


def test_40_types_in_30_zones_probe_40_times_then_never(cache):
    types = [env(i) for i in range(40)]
    zones = {f"z{i:02d}": Zone(f"z{i:02d}", types) for i in range(30)}
    boot, load = Recording("boot", per_zone=True), Recording("load")
    res = Stage1Runner(cache, [boot, load]).ensure(zones)
    assert len(res.envs) == 40 and len(res.plan) == 40 == probes_needed(
        {z: set(a.environments()) for z, a in zones.items()})
    assert len(load.runs) == 40 and len({u for u, _ in load.runs}) == 40   # once per type
    assert len(boot.runs) == 40 and {z for _, z in boot.runs} == set(zones)  # every zone
    assert res.deployments == 40
    assert all(len(rs) == 2 for rs in res.values())
    # the next placement (any service) probes nothing
    res2 = Stage1Runner(cache, [boot, load]).ensure(zones)
    assert len(load.runs) == 40 and len(boot.runs) == 40
    assert len(res2.cached) == 80 and not res2.probed
    assert all(len(rs) == 2 for rs in res2.values())


def test_new_environment_type_is_the_only_thing_probed(cache):
    zones = {"a": Zone("a", [env(1)]), "b": Zone("b", [env(1)])}
    load = Recording("load")
    boot = Recording("boot", per_zone=True)
    Stage1Runner(cache, [boot, load]).ensure(zones)
    assert len(load.runs) == 1 and len(boot.runs) == 2
    zones["b"] = Zone("b", [env(1), env(2)])
    res = Stage1Runner(cache, [boot, load]).ensure(zones)
    assert load.runs[1:] == [(env(2).uid, "b")] and boot.runs[2:] == [(env(2).uid, "b")]
    assert {a.uid for a in res.probed} == {env(2).uid}


def test_type_probe_runs_where_it_can(cache):
    # the type is in a Nova zone (planned first: 'a' < 'b') and in the local zone: the load probe
    # goes to the local zone, the boot probe stays in the planned zone
    zones = {"a-nova": Zone("a-nova", [env(1)]), "b-local": Zone("b-local", [env(1)], kind="local")}
    load = Recording("load", only_kind="local")
    boot = Recording("boot", per_zone=True)
    res = Stage1Runner(cache, [boot, load]).ensure(zones)
    assert load.runs == [(env(1).uid, "b-local")]
    assert sorted(boot.runs) == [(env(1).uid, "a-nova"), (env(1).uid, "b-local")]
    assert res.result(env(1).uid, "load").zone == "b-local"


def test_probe_that_can_run_nowhere_is_skipped_not_cached(cache):
    zones = {"a": Zone("a", [env(1)])}
    load = Recording("load", only_kind="local")
    res = Stage1Runner(cache, [load]).ensure(zones)
    assert load.runs == [] and [a.action for a in res.actions] == ["skipped"]
    assert "needs a local zone" in res.explain()[-1]
    assert cache.history() == []


def test_failures_are_cached_briefly_and_reported(cache):
    zones = {"a": Zone("a", [env(1)])}
    load = Recording("load", fail_in=("a",))
    res = Stage1Runner(cache, [load], failure_valid_for_s=60).ensure(zones)
    assert not res.probed[0].ok and "FAILED: boom" in res.explain()[-1]
    assert cache.history()[0].valid_for_s == 60


def test_static_failures_spend_no_probe(cache):
    zones = {"a": Zone("a", [env(1, "kvm"), env(2, "tcg")])}
    load = Recording("load")
    svc = ServiceProfile(name="fw", click_config="x", requirements={"accel": ["kvm"]})
    res = Stage1Runner(cache, [StaticProbe(), load]).ensure(zones, svc)
    assert load.runs == [(env(1, "kvm").uid, "a")]
    assert env(2, "tcg").uid in res.rejected and "accel" in res.rejected[env(2, "tcg").uid]
    assert res.result(env(2, "tcg").uid, "static").ok is False


def test_broken_zone_is_reported_others_go_on(cache):
    zones = {"a": Zone("a", [env(1)]), "down": Zone("down", [env(2)], broken=True)}
    load = Recording("load")
    events = []
    res = Stage1Runner(cache, [load]).ensure(zones, progress=events.append)
    assert load.runs == [(env(1).uid, "a")]
    assert "unreachable" in res.zone_errors["down"]
    assert [e["event"] for e in events] == ["start", "done"]


def test_one_probe_per_kind():
    with pytest.raises(ValueError, match="one probe per kind"):
        Stage1Runner(None, [Recording("load"), Recording("load")])


def test_cache_lookups_are_one_query_per_round(cache):
    import sqlalchemy as sa

    types = [env(i) for i in range(40)]
    zones = {f"z{i:02d}": Zone(f"z{i:02d}", types) for i in range(30)}
    probes = [Recording("boot", per_zone=True), Recording("load")]
    Stage1Runner(cache, probes).ensure(zones)              # fills the cache
    selects = []
    sa.event.listen(cache.engine, "before_cursor_execute",
                    lambda conn, cursor, stmt, *a: selects.append(stmt)
                    if stmt.lstrip().upper().startswith("SELECT") else None)
    res = Stage1Runner(cache, probes).ensure(zones)
    assert len(res.cached) == 80 and not res.probed
    assert len(selects) == 1


def test_a_cached_result_the_probe_does_not_cover_is_measured_again(cache):
    """A load probe result cached before a confirm target was configured would give the fast
    estimate until it expires: the probe (``covers``) says so and stage 1 measures again; a
    result whose confirm failed is kept only as long as a failed one."""
    zones = {"a": Zone("a", [env(1)])}

    class Confirming(Recording):
        want, fail = None, False

        def covers(self, result, service=None):
            return self.want is None or result.metrics.get("confirm") == self.want

        def run(self, env, zone, service=None):
            r = super().run(env, zone, service)
            if self.want:
                r.metrics["confirm"] = dict(self.want, error="boom") if self.fail else self.want
            return r

    load = Confirming("load")
    Stage1Runner(cache, [load]).ensure(zones)
    assert len(load.runs) == 1
    Stage1Runner(cache, [load]).ensure(zones)
    assert len(load.runs) == 1                              # covered: cached
    load.want = {"target": {"deadline_ms": 10.0}, "runs": []}
    res = Stage1Runner(cache, [load]).ensure(zones)
    assert len(load.runs) == 2 and [a.action for a in res.actions] == ["probed"]
    assert res.result(env(1).uid, "load").metrics["confirm"] == load.want
    Stage1Runner(cache, [load]).ensure(zones)
    assert len(load.runs) == 2                              # the new result covers it
    load.fail = True
    res = Stage1Runner(cache, [load], failure_valid_for_s=60).ensure(
        {"b": Zone("b", [env(2)])})
    assert res.result(env(2).uid, "load").valid_for_s == 60
