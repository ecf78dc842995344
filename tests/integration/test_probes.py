# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Stage-1 probes against real VNFs (QEMU/KVM or TCG), taps, bridges and network namespaces."""

import os
import shutil
import subprocess
import uuid

import pytest

from fluidvim.evaluator.analyzers import CostBenefitAnalyzer, Stage2Runner
from fluidvim.evaluator.cache import ProbeCache
from fluidvim.evaluator.model import Candidate, ServiceProfile
from fluidvim.evaluator.probes import BootProbe, LoadProbe, StaticProbe, contended_steps
from fluidvim.evaluator.slots import estimate_capacity, estimate_slots
from fluidvim.evaluator.stage1 import Stage1Runner
from fluidvim.orchestrator.zones.local import LocalZone as make_zone
from fluidvim.vnf import testnet
from fluidvim.vnf.manager import VNFManager, make_conf

from .conftest import leaked_taps, vnf_ids


@pytest.fixture
def prefix():
    """This test's own load-probe prefix (LoadProbe adds a tag per run): whatever starts with it
    on the host is this test's."""
    return testnet.unique_name("fe", room=testnet.TAG_LEN + 2)


@pytest.fixture
def mgr(tmp_path):
    run_dir = f"/run/fluidvim-fve-{uuid.uuid4().hex[:8]}"
    m = VNFManager(make_conf(state_dir=str(tmp_path / "state"), run_dir=run_dir, backend="qemu"))
    yield m
    m.stop_pool()
    ids = vnf_ids(m.store)
    m.drain_pool()
    left = [r.name for r in m.list()]
    for rec in m.store.list():
        m.destroy(rec.id)
    m.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    assert not left, f"VNFs left running: {left}"
    assert not leaked_taps(ids), "taps leaked"


def netns_starting(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [w for w in (line.split()[0] for line in out.splitlines() if line.strip())
            if w.startswith(prefix)]


def links_starting(prefix: str) -> list[str]:
    return [n for n in os.listdir("/sys/class/net") if n.startswith(prefix)]


def test_boot_probe_cold_and_warm(mgr):
    zone = make_zone("local-a", mgr)
    env = zone.env()
    key = mgr.start_pool(2, nics=2, memory_mb=env.memory_mb)
    assert mgr.wait_pool(key, 2, timeout=60)
    r = BootProbe(n=2).run(env, zone)
    assert r.ok, r.error
    m = r.metrics
    assert r.kind == "boot" and r.env_uid == env.uid and r.zone == "local-a"
    assert m["pinned"] and m["host"] == zone.host_name
    assert m["cold_ms"]["n"] == 2 and m["cold_zone_ms"]["n"] == 2
    assert all(w >= z for w, z in zip(m["cold_ms"]["samples"], m["cold_zone_ms"]["samples"]))
    assert m["warm"] is True and m["warm_ms"]["n"] == 2
    assert m["launched"] == 4 and m["leaked"] == []
    assert zone.instances() == []


def test_boot_probe_without_pool_reports_cold_only(mgr):
    zone = make_zone("local-a", mgr)
    r = BootProbe(n=1).run(zone.env(), zone)
    assert r.ok, r.error
    assert r.metrics["warm"] is False and r.metrics["warm_ms"]["n"] == 0
    assert r.metrics["launched"] == 2        # one cold, one attempt at warm that came back cold
    assert zone.instances() == [] and mgr.list() == []


def test_boot_probe_of_a_broken_environment_fails_cleanly(mgr):
    zone = make_zone("local-a", mgr)
    r = BootProbe(n=2, click_config="FromDevice(0) -> Countr -> ToDevice(0);").run(zone.env(), zone)
    assert not r.ok
    assert "Countr" in r.error and "local-a" in r.error
    assert r.metrics["launched"] == 0 and mgr.list() == []


@pytest.mark.parametrize("proto", ["icmp", "udp"])
def test_load_probe_records_a_curve_and_cleans_up(mgr, prefix, proto):
    zone = make_zone("local-a", mgr)
    env = zone.env()
    probe = LoadProbe(sessions=(1, 10, 60), session_pps=100, step_s=1.0, prefix=prefix, subnet=95,
                      refine=1, proto=proto, extend=False, recheck=0)
    seen = []
    r = probe.run(env, zone, progress=seen.append)
    assert r.ok, r.error
    steps = r.metrics["steps"]
    assert r.metrics["proto"] == proto and len(seen) == 4
    # the ladder ran to its end; at its top step a generator sharing a busy host's CPU (a
    # parallel test run) may not offer the whole rate, which the probe says instead
    assert r.metrics["stopped"] == "end of the ladder (not saturated)" or (
        r.metrics["stopped"].startswith("the traffic generator reached only")
        and r.metrics["stopped"].endswith("pps at 60 sessions: capacity is at least that")), \
        r.metrics["stopped"]
    plain = [s["sessions"] for s in steps if not s.get("refined")]
    refined = [s["sessions"] for s in steps if s.get("refined")]
    assert plain == [1, 10, 60] and len(refined) == 1 and 1 < refined[0] < 60
    assert [s["sessions"] for s in steps] == sorted(s["sessions"] for s in steps)
    for s in steps:
        assert s["offered_pps"] == s["sessions"] * 100
        assert s["received"] > 0 and 0.0 <= s["loss"] <= 1.0
        for key in ("latency_ms", "latency_pooled_ms"):
            lat = s[key]
            assert 0 < lat["0.5"] <= lat["0.9"] <= lat["0.99"] <= lat["0.999"]
        assert s["windows"] == 2                         # step_s 1.0 / window_s 0.4 -> 2
        assert s["loss_worst_window"] >= s["loss"] >= 0.0
        # the VNF saw the traffic: its own processing-latency histogram grew in this step
        assert s["vnf_latency_ns"]["count"] >= s["received"]
        # and its QEMU threads' waits for a CPU were read from its cgroup's schedstat
        assert 0.0 <= s["vnf_cpu_wait_share"] <= 1.0
    assert ("contended" in r.metrics) == bool(contended_steps(steps)), r.metrics.get("contended")
    est = estimate_capacity(r, deadline_ms=1000.0, quantile=0.5)
    assert est.slots >= 1 and est.basis
    assert estimate_slots(r, 1000.0, 0.5, session_pps=50) >= est.slots
    # nothing left: probe VNF terminated, namespaces, veths and bridges removed
    assert mgr.list() == [] and zone.instances() == []
    assert netns_starting(prefix) == [] and links_starting(prefix) == []


def test_stage1_two_zones_one_type_then_cache_then_rank(mgr, prefix, tmp_path):
    za, zb = make_zone("local-a", mgr), make_zone("local-b", mgr)
    assert za.env().uid == zb.env().uid               # the same type in two zones
    cache = ProbeCache(f"sqlite:///{tmp_path}/probes.sqlite")
    load = LoadProbe(sessions=(1, 20), step_s=0.5, prefix=prefix, subnet=95, refine=0, extend=False)
    runner = Stage1Runner(cache, [StaticProbe(), BootProbe(n=1, warm=False), load])
    svc = ServiceProfile(name="fw", click_config="FromDevice(0) -> ToDevice(1);",
                         deadline_ms=1000.0, qos_quantile=0.5, requirements={"accel": ["kvm", "tcg"]})
    events = []
    res = runner.ensure({"local-a": za, "local-b": zb}, svc, progress=events.append)
    uid = za.env().uid
    assert set(res) == {uid} and {r.kind for r in res[uid]} == {"static", "boot", "load"}
    assert len(res.plan) == 2                         # one type, two zones: N = max(1, 2)
    kinds = sorted((a.kind, a.zone) for a in res.probed)
    assert kinds == [("boot", "local-a"), ("boot", "local-b"), ("load", "local-a"),
                     ("static", "local-a")]
    assert all(a.ok for a in res.probed), res.explain()
    assert {e["event"] for e in events} >= {"start", "done"}
    # a second round (another service, or a restart of the orchestrator) probes nothing
    res2 = Stage1Runner(ProbeCache(f"sqlite:///{tmp_path}/probes.sqlite"),
                        [StaticProbe(), BootProbe(n=1, warm=False), load]).ensure(
        {"local-a": za, "local-b": zb}, svc)
    assert [a.kind for a in res2.probed] == ["static"]
    assert sorted(a.kind for a in res2.cached) == ["boot", "boot", "load"]
    assert "cached load" in "\n".join(res2.explain())
    # stage 2 on the real results
    cands = [Candidate(zone="local-a", env=za.env(), price_per_hour=1.0, queuing_delay_s=0.06),
             Candidate(zone="local-b", env=zb.env(), price_per_hour=2.0, queuing_delay_s=0.06)]
    s2 = Stage2Runner(CostBenefitAnalyzer())
    first = s2.run(svc, cands, res2)
    assert not first.reused and first.scores[0].candidate.zone == "local-a"
    assert first.scores[0].slots_estimate >= 1
    assert s2.run(svc, cands, res2).reused
    assert mgr.list() == []


def test_stage1_from_conf_confirms_a_level_and_the_launch_reads_it(mgr, prefix, tmp_path):
    """The product path of the confirm phase: [evaluator] load_probe_confirm_levels builds stage
    1's load probe with a session target (short here: 2 s sessions, 2 runs), the probe runs its
    session-length runs on the real probe VNF after its fast steps, and the launch's QoE
    (qoeslots.launch_qoe, what orchestrator/deploy.py sends the VNF) is the confirmed count for a
    service at that level's deadline and quantile; a conf naming no level takes the cached result
    as it is, one naming another session length measures again."""
    from fluidvim.evaluator import conf as evconf
    from fluidvim.evaluator.qoeslots import launch_qoe
    from fluidvim.orchestrator.conf import make_conf as orch_conf

    def stage1(**kw):
        conf = orch_conf()
        evconf.register_opts(conf)
        for k, v in dict(load_probe_sessions=["1", "20"], load_probe_step=0.5,
                         load_probe_refine=0, load_probe_netns_prefix=prefix,
                         load_probe_subnet=95, boot_probe_launches=1,
                         qos_levels=["lax=0.5:1000:0.01"], **kw).items():
            conf.set_override(k, v, group="evaluator")
        return evconf.make_stage1(conf, f"sqlite:///{tmp_path}/probes.sqlite", valid_for_s=600)

    zone = make_zone("local-a", mgr)
    svc = ServiceProfile(name="fw", click_config="FromDevice(0) -> ToDevice(1);",
                         deadline_ms=1000.0, qos_quantile=0.5, requirements={"accel": ["kvm", "tcg"]})
    res = stage1(load_probe_confirm_levels=["lax"], load_probe_session_s=2.0,
                 load_probe_confirm_runs=2, load_probe_confirm_background=False
                 ).ensure({"local-a": zone}, svc)
    uid = zone.env().uid
    load = res.result(uid, "load")
    assert load is not None and load.ok, res.explain()
    conf = load.metrics["confirm"]
    assert conf["target"]["session_s"] == 2.0 and conf["target"]["deadline_ms"] == 1000.0
    assert "error" not in conf, conf.get("error")
    # 2 runs counted; a run that failed while other processes took the CPU is run again
    assert 1 <= len(conf["runs"]) <= 2 + conf["target"]["reruns"]
    assert all(r["n"] == r["sessions"] for r in conf["runs"])
    qoe, basis = launch_qoe(res[uid], svc.deadline_ms, svc.qos_quantile, svc.session_pps)
    assert qoe is not None and qoe.capacity >= 1 and "confirmed by" in basis, basis
    # another deadline than the confirmed level's: the fast steps
    assert "confirmed by" not in launch_qoe(res[uid], 500.0, 0.5, svc.session_pps)[1]
    # the cached result covers a probe without targets; not one with another session length
    again = stage1(load_probe_confirm_levels=[]).ensure({"local-a": zone}, svc)
    assert [a.kind for a in again.cached if a.kind == "load"] == ["load"]
    other = stage1(load_probe_confirm_levels=["lax"], load_probe_session_s=1.0,
                   load_probe_confirm_runs=1, load_probe_confirm_background=False
                   ).ensure({"local-a": zone}, svc)
    assert [a.kind for a in other.probed if a.kind == "load"] == ["load"], other.explain()
    assert other.result(uid, "load").metrics["confirm"]["target"]["session_s"] == 1.0
    assert mgr.list() == [] and netns_starting(prefix) == [] and links_starting(prefix) == []


def test_stage1_default_confirms_the_services_level_in_the_background(mgr, prefix, tmp_path):
    """The default (load_probe_confirm_levels = service, in the background): the placement
    gets the fast steps at once, its launch QoE derated (unconfirmed_share); the confirm phase
    runs the service's own deadline and quantile on the same probe VNF meanwhile, lands in the
    cache, and the next placement's launch reads the confirmed count. Short here: 1 s sessions,
    1 run. Nothing is left on the host once it landed."""
    from fluidvim.evaluator import conf as evconf
    from fluidvim.evaluator.qoeslots import launch_qoe
    from fluidvim.orchestrator.conf import make_conf as orch_conf

    conf = orch_conf()
    evconf.register_opts(conf)
    for k, v in dict(load_probe_sessions=["1", "20"], load_probe_step=0.5, load_probe_refine=0,
                     load_probe_netns_prefix=prefix, load_probe_subnet=95, boot_probe_launches=1,
                     load_probe_session_s=1.0, load_probe_confirm_runs=1).items():
        conf.set_override(k, v, group="evaluator")
    runner = evconf.make_stage1(conf, f"sqlite:///{tmp_path}/probes.sqlite", valid_for_s=600)
    zone = make_zone("local-a", mgr)
    svc = ServiceProfile(name="fw", click_config="FromDevice(0) -> ToDevice(1);",
                         deadline_ms=1000.0, qos_quantile=0.5, requirements={"accel": ["kvm", "tcg"]})
    uid = zone.env().uid
    try:
        first = runner.ensure({"local-a": zone}, svc)
        load = first.result(uid, "load")
        assert load is not None and load.ok, first.explain()
        assert load.metrics["confirm_pending"][0]["deadline_ms"] == 1000.0
        qoe, basis = launch_qoe(first[uid], svc.deadline_ms, svc.qos_quantile, svc.session_pps)
        assert qoe is not None and "unconfirmed" in basis, basis
        assert runner.probes[2].wait(120), "the background confirm did not land"
        second = runner.ensure({"local-a": zone}, svc)
        assert [a.kind for a in second.cached if a.kind == "load"] == ["load"], second.explain()
        landed = second.result(uid, "load")
        assert "confirm_pending" not in landed.metrics and landed.metrics["confirm"]["runs"]
        qoe2, basis2 = launch_qoe(second[uid], svc.deadline_ms, svc.qos_quantile,
                                  svc.session_pps)
        assert qoe2 is not None and "confirmed by" in basis2, basis2
    finally:
        runner.close()
    assert mgr.list() == [] and netns_starting(prefix) == [] and links_starting(prefix) == []
