# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/energy's simulator (bench/energy/sim.py): the accounting rules every policy gets, the
sessions-first consolidation, and the bench end to end on a tiny fleet.

The policies are the real ones: fluidvim's PlacementEngine (an Orchestrator on an SQLite file),
and, where they can run here, Nova's filter scheduler and Nomad's scheduler (Go); those are
skipped with the reason otherwise (CI has both)."""

import dataclasses
import json

import numpy as np
import pytest

from bench.energy import __main__ as bench_main, fleet as fleetmod, policies, sim, workload

SMALL = "spec0120"          # a 16-thread, 88.5-193 W server of the SPECpower library
ALL = ("fluidvim", "fluidvim-consolidate", "nova-default", "nomad-binpack", "nomad-spread")


class StepDemand:
    """Concurrent sessions per service that jump between levels: [(from_t, fraction)], the
    fraction of ``threads`` VNFs' worth of full slots (spread over the services by their mix)."""

    def __init__(self, services, threads, levels):
        self.services = {s.name: s for s in services}
        self.threads, self.levels = threads, levels

    def sessions(self, name, t):
        frac = 0.0
        for t0, f in self.levels:
            if t >= t0:
                frac = f
        s = self.services[name]
        return frac * self.threads * s.share * s.slots


@pytest.fixture(scope="module")
def services():
    return workload.load_services()


def make_policy(name, services, cfg):
    why = policies.available(name)
    if why:
        pytest.skip(f"{name}: {why}")
    svcs, measurement = services
    return policies.make(name, measurement=measurement, services=svcs, cfg=cfg, seed=1)


# Nova refuses a placement only when a host's vCPUs are used up 4 times over (its default
# initial_cpu_allocation_ratio): the wake test runs it as an NFV deployment sets it, 1.0
NOVA_NFV = "nova (cpu_allocation_ratio 1.0)"


def make_waking_policy(name, services, cfg):
    if name != NOVA_NFV:
        return make_policy(name, services, cfg)
    why = policies.available("nova-default")
    if why:
        pytest.skip(f"nova: {why}")
    from bench.energy.nova_policy import NovaPolicy
    return NovaPolicy(conf_overrides={None: {"initial_cpu_allocation_ratio": 1.0}},
                      name=NOVA_NFV)


def instances_per_host(s):
    ins, v = s.inst, s.inst.view()
    return np.bincount(ins.host[v][ins.alive[v]], minlength=s.H)


@pytest.mark.parametrize("name", ALL)
def test_an_empty_host_powers_off_after_the_hold_time(name, services):
    svcs, _ = services
    fl = fleetmod.make_fleet("homogeneous", 12, 1, model=SMALL)
    cfg = sim.SimConfig(warmup_s=0.0, day_s=1800.0, off_hold_s=120.0, shutdown_s=30.0,
                        idle_s=60.0, cooldown_s=30.0)
    # a busy start, then no session at all: the scaler shrinks every service to the few
    # instances its hysteresis keeps, which leaves hosts empty under any placement
    demand = StepDemand(svcs, fl.threads, [(-1.0, 0.5), (60.0, 0.0)])
    s = sim.Simulator(fl, svcs, demand, cfg, make_policy(name, services, cfg))
    s.begin()
    empty_since = [None] * s.H
    offs = 0
    while s.k < s.steps:
        before = s.state.copy()
        s.advance()
        now = s.now - cfg.step_s                # the time of the step just taken
        count = instances_per_host(s)
        for h in range(s.H):
            if s.state[h] == sim.SHUT and before[h] == sim.ON:
                offs += 1
                assert count[h] == 0, f"{name}: host {h} shut down with {count[h]} instances"
                assert empty_since[h] is not None
                waited = now - empty_since[h]
                assert cfg.off_hold_s <= waited < cfg.off_hold_s + cfg.step_s, (name, h, waited)
            if s.state[h] in (sim.SHUT, sim.OFF):
                assert count[h] == 0
                empty_since[h] = None
            elif count[h] == 0 and s.state[h] == sim.ON:
                empty_since[h] = now if empty_since[h] is None else empty_since[h]
            else:
                empty_since[h] = None
    r = s.finish()
    assert offs >= 1 and r.power_offs >= 1, f"{name}: no host was ever emptied and powered off"
    # shut down hosts draw idle watts for shutdown_s, then nothing
    assert r.awake_hosts_mean < len(fl)


@pytest.mark.parametrize("name", ("fluidvim", "fluidvim-consolidate", NOVA_NFV,
                                  "nomad-binpack", "nomad-spread"))
def test_a_wake_takes_the_boot_time_and_its_instances_serve_nothing_meanwhile(name, services):
    svcs, _ = services
    fl = fleetmod.make_fleet("homogeneous", 24, 1, model=SMALL)
    cfg = sim.SimConfig(warmup_s=0.0, day_s=1500.0, boot_s=260.0, off_hold_s=120.0)
    # a few sessions until 600 s (at most 12 hosts have a VNF, the others power off), then half
    # the fleet's threads: the awake hosts fill, placements are refused, hosts are woken
    demand = StepDemand(svcs, fl.threads, [(-1.0, 0.005), (600.0, 0.5)])
    s = sim.Simulator(fl, svcs, demand, cfg, make_waking_policy(name, services, cfg))
    s.begin()
    woke_at = {}
    refused_while_booting = 0
    while s.k < s.steps:
        before = s.state.copy()
        refused0 = s.count["refused"]
        t = s.now
        s.advance()
        for h in range(s.H):
            if before[h] == sim.OFF and s.state[h] == sim.BOOT:
                woke_at[h] = t
                assert s.until[h] == pytest.approx(t + cfg.boot_s)
            if s.state[h] == sim.BOOT:
                assert t < woke_at[h] + cfg.boot_s
                ins, v = s.inst, s.inst.view()
                mine = ins.alive[v] & (ins.host[v] == h)
                assert ins.sess[v][mine].sum() == 0, f"{name}: a booting host serves sessions"
            if before[h] == sim.BOOT and s.state[h] == sim.ON:
                assert t >= woke_at[h] + cfg.boot_s
                assert t - cfg.step_s < woke_at[h] + cfg.boot_s
        if any(s.state[h] == sim.BOOT for h in woke_at):
            refused_while_booting += s.count["refused"] - refused0
    r = s.finish()
    assert woke_at, f"{name}: no host was woken"
    assert r.wakes == len(woke_at) or r.wakes >= 1
    assert refused_while_booting > 0       # the sessions the boot time costs


def test_consolidation_never_cuts_a_session(services):
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 4, 1, model=SMALL)
    cfg = sim.SimConfig(warmup_s=600.0, day_s=3600.0, consolidate_every_s=120.0,
                        drain_bound_s=300.0)
    demand = StepDemand(svcs, fl.threads, [(-1e9, 0.6), (600.0, 0.2)])
    from bench.energy.fluidvim_policy import FluidvimConsolidatePolicy
    # no wake-ahead forecast: its growth-only trend holds the plan back on a flat load (the
    # drains are what is tested here)
    pol = FluidvimConsolidatePolicy(measurement, svcs, trend_s=300.0, u_low=0.5, ahead=False)
    s = sim.Simulator(fl, svcs, demand, cfg, pol)
    s.begin()
    while s.k < s.steps:
        s.advance()
        # every session admitted is in some instance until it ends: none was dropped
        assert s.sessions_in_instances() == s.ledger["admitted"] - s.ledger["ended"]
        ins, v = s.inst, s.inst.view()
        draining = ins.alive[v] & (ins.drain[v] == sim.DRAIN_MOVE)
        assert (ins.host[v][draining] >= 0).all()
    r = s.finish()
    assert r.moves > 0, "the load drop should have made the policy empty a host"
    assert r.power_offs >= 1
    # sessions still running at the drain bound were handed over, counted as SLO misses
    assert r.moved <= r.slo_misses


def test_a_consolidation_move_starts_the_replacement_before_the_source_stops(services):
    """A drained instance is moved, not dropped: its replacement is placed when the drain
    starts, so each service keeps its slots in service while the drained sessions end (left to
    the scaler's threshold, the drained sessions came back as arrivals faster than its rate
    window saw, and sessions were refused after a drain)."""
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 4, 1, model=SMALL)
    cfg = sim.SimConfig(warmup_s=600.0, day_s=3600.0, consolidate_every_s=120.0)
    demand = StepDemand(svcs, fl.threads, [(-1e9, 0.6), (600.0, 0.2)])
    from bench.energy.fluidvim_policy import FluidvimConsolidatePolicy
    # no wake-ahead forecast: its growth-only trend holds the plan back on a flat load (the
    # drains are what is tested here)
    pol = FluidvimConsolidatePolicy(measurement, svcs, trend_s=300.0, u_low=0.5, ahead=False)
    s = sim.Simulator(fl, svcs, demand, cfg, pol)

    def serving():
        ins, v = s.inst, s.inst.view()
        ok = ins.alive[v] & (ins.drain[v] == sim.DRAIN_NONE)
        return np.bincount(ins.svc[v][ok], minlength=len(svcs))

    drains = []
    consolidate = s._consolidate

    def watched(t):
        before, moves = serving(), s.count["moves"]
        consolidate(t)
        if s.count["moves"] > moves:
            drains.append((before, serving(), s.count["moves"] - moves))
    s._consolidate = watched
    s.run()
    assert drains, "the load drop should have made the policy empty a host"
    for before, after, moved in drains:
        assert (after >= before).all(), (before, after, moved)


def test_bench_end_to_end_on_a_tiny_fleet(tmp_path, services):
    pytest.importorskip("highspy", reason="pip install -c constraints.txt -e .[test]")
    out = tmp_path / "energy"
    rc = bench_main.main(["--fleets", "homogeneous", "--hosts", "4", "--policies", "fluidvim",
                          "fluidvim-consolidate", "milp", "--day-s", "2400", "--milp-every", "4",
                          "--out", str(out), "--no-progress", "--model", SMALL])
    assert rc == 0
    res = json.loads(out.with_suffix(".json").read_text())
    assert out.with_suffix(".png").stat().st_size > 10_000
    for name in ("fluidvim", "fluidvim-consolidate", "milp"):
        for kind in ("homogeneous",):
            row = res["policies"][name][kind]["4"]
            for key in ("kwh", "slo_misses", "awake_hosts_mean", "moves", "decision_ms_p50"):
                assert row[key] is not None, (name, kind, key)
            assert row["kwh"] > 0
            assert 0 < row["awake_hosts_mean"] <= 4
            assert res["runs"][kind]["4"]["ratios"][name]["vs_milp"] > 0
    # every accounting rule says where it comes from
    assert all(r["source"] for r in res["accounting"])


class RampDemand(StepDemand):
    """Sessions that grow linearly from ``lo`` to ``hi`` (fractions as StepDemand's) between
    ``t0`` and ``t1``: a morning ramp, a trend a forecast can follow."""

    def __init__(self, services, threads, lo, hi, t0, t1):
        super().__init__(services, threads, [])
        self.lo, self.hi, self.t0, self.t1 = lo, hi, t0, t1

    def sessions(self, name, t):
        x = min(1.0, max(0.0, (t - self.t0) / (self.t1 - self.t0)))
        s = self.services[name]
        return (self.lo + (self.hi - self.lo) * x) * self.threads * s.share * s.slots


def test_fluidvim_wakes_ahead_of_a_ramp_and_refuses_fewer_sessions(services):
    """The orchestrator's wake-ahead rule (power.forecast_instances / wake_ahead) in the sim:
    on a ramp, hosts are woken before a placement is refused; each such wake is a boot like
    any other (counted, at peak power, serving nothing until up); fewer sessions are refused
    than when hosts are woken only on refusal."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 12, 1, model=SMALL)
    cfg = sim.SimConfig(warmup_s=1200.0, day_s=5400.0, boot_s=260.0, off_hold_s=120.0)
    demand = RampDemand(svcs, fl.threads, 0.05, 0.6, 600.0, 4200.0)
    out = {}
    for ahead in (False, True):
        pol = FluidvimPolicy(measurement, svcs, ahead=ahead, boot_s=cfg.boot_s)
        s = sim.Simulator(fl, svcs, demand, cfg, pol)
        s.begin()
        booting_served = 0
        while s.k < s.steps:
            s.advance()
            ins, v = s.inst, s.inst.view()
            on_boot = ins.alive[v] & (s.state[np.maximum(ins.host[v], 0)] == sim.BOOT)
            booting_served += int(ins.sess[v][on_boot].sum())
        r = s.finish()
        assert booting_served == 0
        out[ahead] = r
    assert "wakes_ahead" not in out[False].extra
    assert out[True].extra["wakes_ahead"] > 0
    assert out[True].wakes >= out[True].extra["wakes_ahead"]
    assert out[True].refused < out[False].refused, (out[True].refused, out[False].refused)
    print(f"\nramp: refused {out[False].refused} -> {out[True].refused} with wake-ahead "
          f"({out[True].extra['wakes_ahead']} hosts woken ahead)")


def test_the_forecast_sees_its_own_window_not_the_scalers(services):
    """A policy's ``ahead`` is handed the slot samples of the last ``trend_keep_s`` (fluidvim
    fits a 15-min trend over them), the scaler keeps only its own few minutes: until
    2026-11-28 the forecast was handed the scaler's 6 min and its 15-min trend was a 6-min
    one - noisier, more hosts woken ahead (bench/energy heterogeneous 20 hosts: 14 wakes,
    42.42 kWh; with the 15 min: 11 wakes, 42.27 kWh)."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 4, 1, model=SMALL)
    cfg = sim.SimConfig(warmup_s=0.0, day_s=2400.0, boot_s=260.0, off_hold_s=120.0)
    demand = RampDemand(svcs, fl.threads, 0.1, 0.3, 0.0, 2400.0)
    spans = []

    class Seeing(FluidvimPolicy):
        def ahead(self, now, services, ahead_s):
            h = next(iter(services.values()))["history"]
            spans.append(h[-1].t - h[0].t)
            return super().ahead(now, services, ahead_s)

    pol = Seeing(measurement, svcs, boot_s=cfg.boot_s)
    s = sim.Simulator(fl, svcs, demand, cfg, pol)
    s.run()
    scaler = max(cfg.idle_s, cfg.window_s) + 2 * cfg.step_s
    assert max(spans) == pytest.approx(min(cfg.trend_keep_s, cfg.day_s - cfg.step_s))
    assert max(spans) > pol.forecast_window_s > scaler
    assert max(len(h) for h in s.history) <= scaler / cfg.step_s + 1   # the scaler's own


def _first_shape(svcs):
    """The first service and the placement shape of one of its instances."""
    from bench.energy.policy import Shape
    svc = svcs[0]
    return svc, Shape(service=svc.name, vcpus=svc.vcpus, cpu_mhz=2000,
                      memory_mb=svc.memory_mb, slots=svc.slots)


def test_fluidvim_puts_no_vnf_on_a_booting_host_while_a_host_in_service_has_room(services):
    """A host woken for a refused placement takes that placement (the instance waits for the
    boot) but stays out of service until it has booted, as the orchestrator's host power loop
    keeps a waking host: later placements go to the hosts that are up while they have room
    (bench/energy at 100 hosts: scale-outs went onto a booting host, near empty and cheapest
    on its curve, while up hosts had room, and their sessions were refused for the boot)."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 3, 1, model=SMALL)
    pol = FluidvimPolicy(measurement, svcs, ahead=False)
    svc, shape = _first_shape(svcs)
    try:
        pol.start(list(fl.hosts))
        off = fl.hosts[2].id
        pol.set_eligible(off, False)            # the simulator powered it off
        pol.set_power(off, False)
        placed = {}
        n = 0
        while True:                              # fill the two hosts in service
            n += 1
            p = pol.place(shape, [f"i{n}"])[0]
            if p.host is None:
                break
            placed[p.instance] = p.host
        assert off not in placed.values()
        pol.set_eligible(off, True)              # the simulator's wake-on-refusal: ask again
        p = pol.place(shape, [f"i{n}"])[0]
        assert p.host == off
        pol.set_power(off, True)                 # the simulator boots it
        assert pol.zone.state(off) == "waking"
        assert pol.room() == 0                   # not in service: its room is not the scaler's
        gone = pol.scale_in(svc.name, 3)         # room on the hosts that are up
        pol.gone(gone)                           # once drained
        freed = [placed[i] for i in gone if i in placed]
        assert freed and off not in freed
        for k in range(len(freed)):
            q = pol.place(shape, [f"j{k}"])[0]
            assert q.host in freed, (q.host, freed)
        q = pol.place(shape, ["j-last"])[0]      # the hosts up are full again: the booting one
        assert q.host == off
        pol.booted(off)
        assert pol.zone.state(off) == "on" and pol.room() > 0
    finally:
        pol.close()


def test_fluidvim_scales_in_first_from_a_host_beyond_its_fill(services):
    """Instances placed while every host was awake (no host to wake: no fill limit) leave hosts
    beyond the fill limit that applies once a host is off; scale-in takes from those first,
    only what is beyond it (power.scale_in_order, power.over_fill)."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    svcs, measurement = services
    # the default homogeneous model (112 threads) runs most efficiently at 80 %: with a host to
    # wake its fill limit is 89 VNFs, with none every thread but one
    fl = fleetmod.make_fleet("homogeneous", 3, 1)
    pol = FluidvimPolicy(measurement, svcs, ahead=False)
    svc, shape = _first_shape(svcs)
    try:
        pol.start(list(fl.hosts))
        placed = pol.place(shape, [f"i{k}" for k in range(300)])
        assert all(p.host is not None for p in placed)
        used = {h: pol.zone.used[h] for h in pol.zone.used}
        spare = min(used, key=lambda h: (used[h], h))
        pol.stop([p.instance for p in placed if p.host == spare])
        pol.set_eligible(spare, False)           # emptied and powered off: the host to wake
        pol.set_power(spare, False)
        over = {h: pol.zone.used[h] - pol.zone.fill[h] for h in pol.zone.used if h != spare}
        assert max(over.values()) > 0, (over, pol.zone.fill)
        n = sum(max(0, v) for v in over.values())
        gone = pol.scale_in(svc.name, n)
        pol.gone(gone)                           # drained: their threads are free
        left = {h: pol.zone.used[h] - pol.zone.fill[h] for h in over}
        assert all(v == min(0, over[h]) for h, v in left.items()), (over, left, gone)
    finally:
        pol.close()


def test_fluidvim_scales_in_the_instances_with_the_fewest_sessions(services):
    """Scale-in takes a host's instances with the fewest sessions first (power.scale_in_pick,
    the counts observe_sessions reports): they drain soonest and free their threads."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 1, 1, model=SMALL)
    pol = FluidvimPolicy(measurement, svcs, ahead=False)
    svc, shape = _first_shape(svcs)
    try:
        pol.start(list(fl.hosts))
        ids = [f"i{k}" for k in range(4)]
        assert all(p.host is not None for p in pol.place(shape, ids))
        pol.observe_sessions({"i0": 9, "i1": 0, "i2": 5, "i3": 2})
        assert pol.scale_in(svc.name, 2) == ["i1", "i3"]
        assert pol.scale_in(svc.name, 1) == ["i2"]          # the draining ones stay out
    finally:
        pol.close()


def test_fluidvim_keeps_an_empty_host_the_scalers_next_step_needs_in_service(services):
    """An empty host is not powered off when the room left in service would be less than the
    scaler's next step, even if a booting host's room covers it: instances placed there wait
    for the boot (bench/energy, heterogeneous 100 hosts: 995 sessions refused so)."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 3, 1, model=SMALL)
    pol = FluidvimPolicy(measurement, svcs)
    try:
        pol.start(list(fl.hosts))
        a, b, c = (h.id for h in fl.hosts)
        pol.set_power(c, False)
        pol.zone.set_power(c, "waking")          # woken ahead, booting
        pol._refill()
        per = pol.zone.fill[a]
        assert pol.zone.room(("on", "waking")) == 3 * per and pol.room() == 2 * per
        pol.short_ahead, pol.keep_ahead = 0, per + 1
        # without b: 2 * per with the booting host (covers the step), per in service (not)
        assert pol.keep_empty([b]) == [b]
        pol.keep_ahead = per
        assert pol.keep_empty([b]) == []
    finally:
        pol.close()


def test_fluidvim_fills_a_host_to_its_threads_like_the_consolidation_plan(services):
    """With no host left to wake, a host in service takes a VNF on every hardware thread its
    curve makes worth it - no thread kept back unless ``reserve`` asks (the orchestrator's
    consolidation plan keeps none either: ``power.Fill``); with ``reserve=1`` one fewer."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    from fluidvim.orchestrator import power
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 2, 1, model=SMALL)
    curve = power.library().curve(SMALL)
    cores = fl.hosts[0].cores
    fills = {}
    for reserve in (None, 1.0):
        pol = FluidvimPolicy(measurement, svcs, **({} if reserve is None else
                                                  {"reserve": reserve}))
        try:
            pol.start(list(fl.hosts))
            fills[reserve] = pol.zone.fill[fl.hosts[0].id]       # every host on: none to wake
        finally:
            pol.close()
    assert fills[None] == power.fill_limit(curve, cores, float("inf"))
    assert fills[None] == cores
    assert fills[1.0] == cores - 1


def test_fluidvim_fills_a_host_of_idle_vnfs_to_its_threads(services):
    """A host whose serving VNFs are idle while the resolver routes sessions to a more
    efficient host first takes VNFs up to its threads, whatever its fill limit: one more there
    costs a thread's allocation, not its watts (``idle_share``); a host of busy VNFs keeps its
    fill limit, so does the idle one once its VNFs are busy, or with ``idle_share=0``; and on
    one server model (no host ranked after another) the rule does nothing."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    svcs, measurement = services
    fl = fleetmod.make_fleet("heterogeneous", 20, 1)
    for share in (0.2, 0.0):
        pol = FluidvimPolicy(measurement, svcs, ahead=False, idle_share=share)
        try:
            pol.start(list(fl.hosts))
            by = sorted(fl.hosts, key=lambda h: pol._per_thread[h.id])
            best = by[0].id
            for h in by[1:4]:                        # powered off: efficient hosts to wake
                pol.set_eligible(h.id, False)
                pol.set_power(h.id, False)
            dear = next(h.id for h in by[4:] if pol.zone.fill[h.id] < h.cores)
            limit, cores = pol.zone.fill[dear], pol.hosts[dear].cores
            pol.observe_busy({best: (39.0, 40), dear: (1.0, 10)})
            assert pol.zone.fill[dear] == (cores if share else limit)
            pol.observe_busy({best: (39.0, 40), dear: (9.0, 10)})
            assert pol.zone.fill[dear] == limit
        finally:
            pol.close()
    homo = fleetmod.make_fleet("homogeneous", 3, 1)
    a, b, c = (h.id for h in homo.hosts)
    pol = FluidvimPolicy(measurement, svcs, ahead=False)
    try:
        pol.start(list(homo.hosts))
        pol.set_eligible(c, False)
        pol.set_power(c, False)
        limit = pol.zone.fill[a]
        assert limit < homo.hosts[0].cores           # the 80 %-efficient model: 89 of 112
        pol.observe_busy({a: (0.0, 40), b: (39.0, 40)})
        assert (pol.zone.fill[a], pol.zone.fill[b]) == (limit, limit)
    finally:
        pol.close()


def test_fluidvim_keeps_a_host_woken_for_a_ramp_through_a_flat_minute(services):
    """An empty host the forecast wanted within the last boot time is not powered off when the
    trend reads flat for a minute (power.ShortfallPeak): the 100-host heterogeneous day powered
    off three hosts woken for the midday ramp in such a minute and refused 3,275 sessions
    while they booted again."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    svcs, measurement = services
    fl = fleetmod.make_fleet("homogeneous", 3, 1, model=SMALL)
    pol = FluidvimPolicy(measurement, svcs, boot_s=260.0)
    try:
        pol.start(list(fl.hosts))
        a, b, c = (h.id for h in fl.hosts)
        per = pol.zone.fill[a]
        assert pol.room() == 3 * per
        pol.keep_ahead = 0
        # the ramp wanted more than the two other hosts take; a minute later the trend is flat
        pol.short_peak.note(0.0, 2 * per + 1)
        pol.short_peak.note(60.0, 0)
        assert pol.keep_empty([b]) == [b]
        # a boot later without a shortfall: it goes off
        pol.short_peak.note(60.0 + 261.0, 0)
        assert pol.keep_empty([b]) == []
    finally:
        pol.close()


@pytest.mark.parametrize("name", ("fluidvim", "fluidvim-consolidate", NOVA_NFV))
def test_a_draining_vnf_holds_its_thread_until_it_is_gone(name, services):
    """A scaled-in instance drains sessions-first and still runs on its host: the scheduler
    counts it until its last session has ended (``Policy.gone``), so a scale-out while it
    drains never puts more VNFs on a host than it has threads (a 64-thread host of the
    heterogeneous 20-host day held 69-72 when the place was freed at the scale-in)."""
    svcs, _ = services
    fl = fleetmod.make_fleet("homogeneous", 3, 1, model=SMALL)
    cfg = sim.SimConfig(warmup_s=0.0, day_s=1500.0, idle_s=60.0, cooldown_s=30.0,
                        off_hold_s=1e9)
    # full, a drop (scale-in: the instances drain for minutes), then full again at once
    demand = StepDemand(svcs, fl.threads, [(-1.0, 0.85), (600.0, 0.3), (900.0, 0.85)])
    s = sim.Simulator(fl, svcs, demand, cfg, make_waking_policy(name, services, cfg))
    s.begin()
    both = 0
    while s.k < s.steps:
        placed = s.count["placements"]
        s.advance()
        ins, v = s.inst, s.inst.view()
        count = instances_per_host(s)
        assert (count <= s.threads).all(), (name, s.now, count, s.threads)
        draining = ins.alive[v] & (ins.drain[v] == sim.DRAIN_SCALE_IN)
        if draining.any() and s.count["placements"] > placed:
            both += 1
    r = s.finish()
    assert both > 0 and r.placements > 0, f"{name}: no scale-out while instances drained"


def test_fluidvim_moves_a_vnf_from_a_dear_host_to_a_cheap_one_with_room(services):
    """Rebalancing (power.rebalance_moves through the policy): VNFs placed on a dear server
    while the cheap one was out of service move to it, one per step, newest first, each
    replacement placed by the PlacementEngine on the host named; the moved VNF keeps its
    thread until it is gone and is not moved again, nor is its replacement for an hour."""
    from bench.energy.fluidvim_policy import FluidvimConsolidatePolicy
    svcs, measurement = services
    # 16 threads each: spec0166 19.6 W a thread over 520 W idle, spec0298 2.5 W over 16 W
    dear = fleetmod.make_fleet("homogeneous", 1, 1, model="spec0166").hosts[0]
    cheap = dataclasses.replace(fleetmod.make_fleet("homogeneous", 1, 1, model="spec0298")
                                .hosts[0], id="h1")
    pol = FluidvimConsolidatePolicy(measurement, svcs, ahead=False, moves_per_step=1)
    svc, shape = _first_shape(svcs)
    try:
        pol.start([dear, cheap])
        pol.set_eligible("h1", False)
        placed = pol.place(shape, [f"i{k}" for k in range(4)])
        assert {p.host for p in placed} == {"h0"}
        pol.set_eligible("h1", True)
        moves = pol.rebalance(0.0)
        assert moves == [("i3", "h1")]
        assert pol.zone.used == {"h0": 4, "h1": 0}          # i3 still runs on h0, draining
        rep = pol.place(shape, ["r3"], on="h1")
        assert rep[0].host == "h1" and pol.zone.used == {"h0": 4, "h1": 1}
        assert pol.rebalance(30.0) == [("i2", "h1")]          # neither i3 nor r3 again
        pol.gone(["i3"])
        assert pol.zone.used == {"h0": 3, "h1": 1}
    finally:
        pol.close()


@pytest.mark.parametrize("route", sim.ROUTES)
def test_sessions_go_to_the_most_efficient_host_first_then_the_fullest_instance(route, services):
    """``SimConfig.route``: a new session goes to an instance on the host with the fewest
    dynamic watts per thread first (``efficient``, the default), the fullest there first; with
    ``fullest`` to the fullest instance of all, wherever it runs. Every policy gets the rule."""
    svcs, _ = services
    fl = fleetmod.make_fleet("heterogeneous", 2, 1)
    cfg = sim.SimConfig(route=route)
    demand = StepDemand(svcs, fl.threads, [(-1e9, 0.5)])
    s = sim.Simulator(fl, svcs, demand, cfg, policy=object())     # no policy is asked here
    rank = (s.w100 - s.w0) / s.threads
    assert rank[0] != rank[1]
    cheap, dear = int(np.argmin(rank)), int(np.argmax(rank))
    slots = svcs[0].slots
    on_dear = s.inst.add("a", 0, dear, 0.0)
    on_cheap = s.inst.add("b", 0, cheap, 0.0)
    on_cheap2 = s.inst.add("c", 0, cheap, 0.0)
    s.inst.sess[on_dear] = slots - 2                # the fullest instance: on the dear host
    s.inst.sess[on_cheap2] = 1
    idx = np.array([on_dear, on_cheap, on_cheap2])
    assert s._fill(idx, 3) == 3
    if route == "efficient":
        # the cheap host's fullest instance first
        assert list(s.inst.sess[idx]) == [slots - 2, 0, 4]
        # once the cheap host's instances are full, the dear host's
        assert s._fill(idx, 2 * slots) == 2 * slots - 4 + 2
        assert list(s.inst.sess[idx]) == [slots, slots, slots]
    else:
        assert list(s.inst.sess[idx]) == [slots, 0, 2]
    if route == "efficient":
        # a host whose hardware threads are all busy takes no more while another has idle ones
        s2 = sim.Simulator(fl, svcs, demand, cfg, policy=object())
        for k in range(int(s2.threads[cheap])):
            s2.inst.sess[s2.inst.add(f"full{k}", 0, cheap, 0.0)] = slots
        spare = [s2.inst.add("x", 0, cheap, 0.0), s2.inst.add("y", 0, dear, 0.0)]
        assert s2._fill(np.array(spare), 3) == 3
        assert list(s2.inst.sess[spare]) == [0, 3]
    with pytest.raises(ValueError, match="route"):
        sim.Simulator(fl, svcs, demand, sim.SimConfig(route="nearest"), policy=object())


def test_fluidvim_fills_the_hosts_in_service_rather_than_wake_one_for_a_few_vnfs(
        services, monkeypatch):
    """When the forecast wants a few VNFs more than the hosts in service take up to their fill
    limits, a server more efficient than the best one to wake is filled beyond its limit while
    a VNF costs less there than on a host woken for those few (``power.wake_unit_watts``), and
    no host is woken; without ``fill_for_need``, or when the host to wake is a server like it
    (it will be filled as demand grows), the host is woken. A shortfall beyond the room wakes
    it too."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    from bench.energy.policy import Host
    from fluidvim.orchestrator import power
    svcs, measurement = services
    lib = power.library()
    turbo, dear = "spec0127", "spec0184"    # 112 threads, best at 70 %; 64, 4.3 W a thread
    assert power.unit_watts(lib.curve(dear), 64) > power.unit_watts(lib.curve(turbo), 112)
    svc = svcs[0]
    want = {"n": 0}
    monkeypatch.setattr(power, "forecast_instances", lambda *args, **kw: want["n"])
    woken = {}
    for case, off_model, few in (("few", dear, True), ("off", dear, False),
                                 ("same", turbo, True)):
        hosts = [Host("a", turbo, 112, 2000, 0), Host("b", off_model, 112 if off_model == turbo
                                                      else 64, 2000, 0)]
        pol = FluidvimPolicy(measurement, svcs, fill_for_need=few)
        try:
            pol.start(hosts)
            pol.set_power("b", False)
            fill = pol.zone.fill["a"]
            wake_w = power.unit_watts(lib.curve(off_model), hosts[1].cores)
            assert fill == power.fill_limit(lib.curve(turbo), 112, wake_w) < 112
            for i in range(fill):
                pol._add(f"v{i}", svc.name, "a")
            assert pol.room() == 0
            view = {svc.name: {"history": [], "slots": svc.slots, "headroom": 0, "lead_s": 30.0}}
            want["n"] = fill + 1                 # one more than there are (+1: the next step)
            woken[case] = pol.ahead(0.0, view, 290.0)
            if case == "few":
                assert pol.zone.state("b") == "off" and pol.room() >= 2
                assert pol.zone.fill["a"] > fill
                want["n"] = 112 + 1              # more than a takes: wake b
                assert pol.ahead(30.0, view, 290.0) == ["b"]
        finally:
            pol.close()
    assert woken == {"few": [], "off": ["b"], "same": ["b"]}


def test_fluidvim_keeps_room_in_service_while_a_host_boots(services, monkeypatch):
    """A waking host takes no placement for a boot: the hosts in service stay filled for the
    forecast's need beyond their fill limits while it boots (``_bridge``), rather than fall
    back to them because the booting host's room covers the need (until 2026-11-28: the room
    in service went to 0 and the next scale-outs waited on the boot - 427 sessions refused in
    the heterogeneous 20-host day); the sessions go in the resolver's order."""
    from bench.energy.fluidvim_policy import FluidvimPolicy
    from bench.energy.policy import Host
    from fluidvim.orchestrator import power, resolver
    svcs, measurement = services
    svc = svcs[0]
    want = {"n": 0}
    monkeypatch.setattr(power, "forecast_instances", lambda *args, **kw: want["n"])
    hosts = [Host("a", "spec0127", 112, 2000, 0), Host("b", "spec0184", 64, 2000, 0)]
    pol = FluidvimPolicy(measurement, svcs)
    try:
        pol.start(hosts)
        pol.set_power("b", False)
        fill = pol.zone.fill["a"]
        for i in range(fill):
            pol._add(f"v{i}", svc.name, "a")
        assert pol._wake_one() == "b" and pol.zone.state("b") == "waking"
        view = {svc.name: {"history": [], "slots": svc.slots, "headroom": 0, "lead_s": 30.0}}
        want["n"] = fill + 2
        assert pol.ahead(0.0, view, 290.0) == []
        assert pol.zone.fill["a"] > fill and pol.room() >= 2      # in service, not on b
        pol.booted("b")
        pol.ahead(30.0, view, 290.0)
        assert pol.wake_need == 0                  # b is up: nothing to bridge any more
        # the resolver's order: the host with the fewest dynamic watts per thread first
        assert pol.session_route == "efficient"
        pol.orch.placement.place(svc.name)         # ranks the hosts: their figures recorded
        assert set(pol.orch.resolver.per_thread) >= {("fleet", "a"), ("fleet", "b")}
        Rep = sim._Rep
        entries = [(Rep("fleet", "b", 1, "r", None), 5), (Rep("fleet", "a", 2, "r", None), 9)]
        cheap = min(("a", "b"), key=lambda h: pol.orch.resolver.per_thread[("fleet", h)])
        assert pol.session_order(entries)[0][0].host == cheap
        assert pol.session_order(entries) == resolver.slot_order(
            entries, "efficient", per_thread=pol.orch.resolver.per_thread)
    finally:
        pol.close()


@pytest.mark.parametrize("route", ("efficient", "watts", "free"))
def test_the_simulators_session_order_is_the_resolvers(route):
    """``sim.resolver_order`` (the order fluidvim's sessions are filled in, on the simulator's
    arrays) is ``resolver.slot_order``'s for the same slot reports: ties of figure and free
    slots, hosts without a figure (efficient), several instances per host."""
    from fluidvim.orchestrator import resolver
    rng = np.random.default_rng(7)
    for trial in range(20):
        n, hosts = int(rng.integers(1, 60)), int(rng.integers(1, 8))
        inst = rng.permutation(1000)[:n]
        host = rng.integers(0, hosts, n)
        free = rng.integers(1, 5, n)
        wps = rng.choice([0.5, 1.0, 1.25, 2.0], n)          # ties on purpose
        figs = rng.choice([0.8, 1.1, 1.1, np.nan], hosts)    # NaN: no figure for the host
        per_thread = {("z", f"h{k}"): float(f) for k, f in enumerate(figs) if not np.isnan(f)}
        entries = [(sim._Rep("z", f"h{hh}", int(j), "r", float(w)), int(f))
                   for j, hh, w, f in zip(inst, host, wps, free)]
        want = [r.instance for r, _ in resolver.slot_order(entries, route, per_thread=per_thread)]
        got = inst[sim.resolver_order(route, inst, free, host, wps, figs)]
        assert list(got) == want, (route, trial)
        if route == "efficient":                             # no figures at all
            want = [r.instance for r, _ in resolver.slot_order(entries, route)]
            assert list(inst[sim.resolver_order(route, inst, free, host, wps, None)]) == want


def test_jobs_run_apart_give_the_rows_of_one_process(tmp_path):
    """``--jobs``: each run in its own process gives the row the loop gives (seeded per run);
    the rows keep their order. (The MILP bound: the cheapest runs to spawn.)"""
    pytest.importorskip("highspy", reason="pip install -c constraints.txt -e .[test]")
    common = ["--fleets", "homogeneous", "--hosts", "2", "3", "--policies", "milp",
              "--day-s", "600", "--milp-every", "5", "--no-progress", "--no-plot",
              "--model", SMALL]
    rows = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"e{jobs}"
        assert bench_main.main(common + ["--jobs", jobs, "--out", str(out)]) == 0
        res = json.loads(out.with_suffix(".json").read_text())
        assert sorted(res["runs"]["homogeneous"]) == ["2", "3"]
        rows[jobs] = {n: {k: r["policies"]["milp"][k] for k in ("kwh", "moves", "awake_hosts_mean",
                                                                "series", "solves")}
                      for n, r in res["runs"]["homogeneous"].items()}
    assert rows["1"] == rows["2"]


@pytest.mark.parametrize("persist", (1, 2))
def test_fluidvim_wakes_ahead_only_for_a_shortfall_that_lasts(services, persist):
    """``wake_persist`` (power.WakePersist): a shortfall the forecast names for one step wakes
    nothing when two are asked (fluidvim-consolidate's default), and a lasting one wakes the
    hosts ``power.wake_ahead`` names; with 1 it wakes at once."""
    from bench.energy.fluidvim_policy import FluidvimConsolidatePolicy, FluidvimPolicy
    from fluidvim.orchestrator.mano.scaling import Sample
    svcs, measurement = services
    cons = FluidvimConsolidatePolicy(measurement, svcs)
    assert cons.wake_persist.rounds == 2
    cons.close()
    fl = fleetmod.make_fleet("homogeneous", 3, 1, model=SMALL)
    pol = FluidvimPolicy(measurement, svcs, boot_s=260.0, wake_persist=persist)
    try:
        pol.start(list(fl.hosts))
        a, b, c = (h.id for h in fl.hosts)
        for h in (b, c):
            pol.set_power(h, False)
        svc = svcs[0]
        used = 2 * pol.zone.fill[a] * svc.slots          # twice what the host in service takes

        def view(t):
            return {svc.name: {"history": [Sample(t - 60.0, 0, used), Sample(t, 0, used)],
                               "slots": svc.slots, "headroom": svc.slots, "lead_s": 30.0}}

        first = pol.ahead(0.0, view(0.0), ahead_s=290.0)
        if persist == 1:
            assert first
            return
        assert first == [] and pol.zone.state(b) == pol.zone.state(c) == "off"
        assert pol.ahead(30.0, {svc.name: {**view(30.0)[svc.name], "history": []}},
                         ahead_s=290.0) == []        # gone: the count starts again
        assert pol.ahead(60.0, view(60.0), ahead_s=290.0) == []
        woken = pol.ahead(90.0, view(90.0), ahead_s=290.0)
        assert woken and all(pol.zone.state(h) == "waking" for h in woken)
    finally:
        pol.close()
