# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``fluidvim`` and ``fluidvim-consolidate``: the orchestrator's own placement path.

Every placement is ``PlacementEngine.place`` of a real ``Orchestrator`` (its database, slot
registry, queuing estimator, stage-1 runner over its probe cache, the configured stage-2 analyzer,
``HostMarginalPower`` and the decide step) over one zone that presents the simulated fleet
(:class:`FleetZone`, a ``SyntheticZone``: each host with its SPECpower ``power_system_id``, its
hardware threads as ``cpus`` and its vCPU allocation as ``cpu_util``). The probe cache holds this
project's own measurements: the load probe and boot probe of ``bench/results/evaluator.json``.

The zone lists the hosts that can take the VNF (eligible, a free hardware thread); the decision
is the engine's. Scale-in (which instance goes) and consolidation (which hosts to empty) are the
orchestrator's power helpers (``fluidvim.orchestrator.power``).
"""

from __future__ import annotations

import collections
import math
import tempfile
import time

from fluidvim.common import zonetypes
from fluidvim.common.zonetypes import HostInfo
from fluidvim.evaluator.model import BOOT, LOAD, EnvironmentType, ProbeResult
from fluidvim.orchestrator import conf as orchconf, power, resolver
from fluidvim.orchestrator.power.rebalance import BusyLoad
from fluidvim.orchestrator.service import Orchestrator
from fluidvim.orchestrator.zones.synthetic import SyntheticZone

from .policy import Host, Placement, Shape

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"
ZONE = "fleet"
VALID_S = 30 * 86400.0            # the probe results outlive any run


def environment(measurement: dict) -> EnvironmentType:
    env = dict(measurement["environment"])
    env.pop("uid", None)
    return EnvironmentType.from_dict(env)


def probe_results(measurement: dict, env: EnvironmentType, zone: str) -> list[ProbeResult]:
    """The evaluator's own load and boot probe results (bench/results/evaluator.json)."""
    run = measurement["probe_runs"][0]
    load = ProbeResult(env_uid=env.uid, kind=LOAD, ok=True, zone=zone, valid_for_s=VALID_S,
                       metrics={"steps": run["steps"],
                                "session_pps": measurement["session_pps"],
                                "max_sessions": max(s["sessions"] for s in run["steps"])})
    bp = measurement["boot_probe"]
    boot = ProbeResult(env_uid=env.uid, kind=BOOT, ok=True, zone=zone, valid_for_s=VALID_S,
                       metrics={k: bp[k] for k in ("cold_ms", "cold_zone_ms", "warm", "warm_ms",
                                                   "warm_zone_ms", "launched", "leaked")})
    return [load, boot]


class FleetZone(SyntheticZone):
    """The simulated fleet as one synthetic zone; the policy keeps its allocation current."""

    kind = zonetypes.SYNTHETIC

    def __init__(self, hosts: list[Host], env: EnvironmentType, launch_ms: float,
                 fill: dict | None = None):
        """``fill``: host -> the VNFs it takes before the orchestrator wakes another host
        (default: all its threads); beyond it only while ``overflow`` is set."""
        infos = [HostInfo(name=h.id, env=env, slots_total=0, slots_free=0, cpu_util=0.0,
                          power_system_id=h.model, labels={"cpus": h.cores}) for h in hosts]
        super().__init__(ZONE, infos, region="sim", launch_ms=[launch_ms])
        self.env = env
        self.info = {i.name: i for i in infos}
        self.threads = {h.id: h.cores for h in hosts}
        self.fill = dict(fill or self.threads)
        self.overflow = False
        self.used = {h.id: 0 for h in hosts}
        self.eligible = {h.id: True for h in hosts}
        self._open = {h.id: None for h in hosts}           # hosts that can take one more VNF
        self._asleep_open: dict = {}                        # powered off, offered to wake
        self.list_off = False                               # list powered-off hosts as hosts()
        self.only: str | None = None                        # a move's target: the one host listed

    def environments(self):
        return {self.env.uid: self.env}

    def hosts(self) -> list[HostInfo]:
        if self.only is not None:
            return [self.info[self.only]] if self.only in self._open else []
        return [self.info[h] for h in self._open]

    def asleep(self) -> list[str]:
        """Powered-off hosts the simulator offers to wake (eligible, with room)."""
        return [h for h in self._asleep_open]

    def _refresh(self, host: str):
        info = self.info[host]
        info.cpu_util = min(1.0, self.used[host] / self.threads[host])
        cap = self.threads[host] if self.overflow else self.fill[host]
        room = self.eligible[host] and self.used[host] < cap
        state = info.labels.get("power_state")
        off = state == "off"
        if state == "waking":                               # booting, woken ahead of demand
            self._open.pop(host, None)
            self._asleep_open.pop(host, None)
            return
        if room and (not off or self.list_off):
            self._open[host] = None
        else:
            self._open.pop(host, None)
        if room and off:
            self._asleep_open[host] = None
        else:
            self._asleep_open.pop(host, None)

    def add(self, host: str, k: int = 1):
        self.used[host] += k
        self._refresh(host)

    def set_eligible(self, host: str, ok: bool):
        self.eligible[host] = ok
        self._refresh(host)

    def set_power(self, host: str, on):
        """``on``: True (in service), False (off) or ``"waking"`` (booting: no placement
        until it is up, unless a placement finds no other room)."""
        self.info[host].labels["power_state"] = (on if isinstance(on, str)
                                                 else "on" if on else "off")
        self._refresh(host)

    def state(self, host: str) -> str:
        return self.info[host].labels.get("power_state") or "on"

    def set_fill(self, fill: dict):
        self.fill = dict(fill)
        for h in self.info:
            self._refresh(h)

    def set_overflow(self, on: bool):
        if self.overflow != on:
            self.overflow = on
            for h in self.info:
                self._refresh(h)

    def room(self, states=("on",)) -> int:
        """VNFs the eligible hosts in ``states`` still take (up to their fill)."""
        return sum(max(0, self.fill[h] - self.used[h]) for h in self.info
                   if self.eligible[h] and self.state(h) in states)

    def any_off(self) -> bool:
        return any(i.labels.get("power_state") == "off" for i in self.info.values())


class FluidvimPolicy:
    """The orchestrator's placement (and, with ``consolidate``, its consolidation)."""

    WAKE_RULES = ("order", "idle", "engine")
    FILL_RULES = ("wake-cost", "full", "efficient")

    def __init__(self, measurement: dict, services, *, consolidate: bool = False,
                 launch_ms: float = 61.6, launch_cpu_s: float = 0.0296, u_low: float = 0.5,
                 horizon_s: float = 3600.0, boot_s: float = 260.0, trend_s: float = 900.0,
                 wake: str = "order", fill: str = "wake-cost", ahead: bool = True,
                 forecast_window_s: float = 900.0, reserve: float = 0.0,
                 fill_for_need: bool = True, workdir: str | None = None,
                 session_route: str | None = "efficient", idle_share: float = 0.2,
                 wake_persist: int = 1):
        """``wake``: which powered-off host a refused placement wakes - ``order``
        (``power.wake_order``: fewest watts per thread at 70 % load), ``idle`` (the least idle
        watts), ``engine`` (the off hosts are candidates of the placement itself).
        ``fill``: how many VNFs (one thread each) a host in service takes before the
        orchestrator wakes another - ``wake-cost`` (``power.fill_limit``: up to its efficient
        utilisation, beyond while a VNF costs it less than on the best host to wake), ``full``
        (every thread), ``efficient`` (its efficient utilisation; beyond only when every host
        is awake). ``ahead``: wake hosts one boot ahead of the demand the services' slot
        trend forecasts (``power.forecast_instances`` over ``forecast_window_s``, then
        ``power.wake_ahead``), as the orchestrator's host power loop does
        (``[host_power] wake_ahead_s``); else only when a placement is refused.
        ``reserve``: hardware threads of a host never filled with VNFs (its launches' CPU;
        ``power.fill_limit``). None by default, as the orchestrator's own consolidation plan
        keeps none (``HostPower``: ``power.Fill`` without a reserve): a launch is 29.6 ms of
        CPU, 0.1 % of a thread over a 30-s step. (1 until 2026-11-28, when full hosts served
        sessions late; with the simulator's later fixes none is late without it, and the
        kept thread cost a host at the peak: heterogeneous 20 hosts 42.27 -> 42.05 kWh.)
        ``fill_for_need``: when the forecast wants ``need`` VNFs more than the room in service
        and waking holds, the hosts in service more efficient than the best host to wake are
        first filled beyond their fill limits against what a VNF costs on the best host woken
        for those ``need`` VNFs (``power.wake_unit_watts``: its idle watts shared by only
        them), and a host is woken only if that room is not enough (the orchestrator's own
        wake-ahead counts the room of its hosts up to their threads). Without it (until
        2026-11-28) the fill limits stood against the best host's efficient load and the peak
        woke a 109-W-idle server for one or two VNFs, which stood empty for three hours
        (heterogeneous 20 hosts, with efficient session routing: 41.68 -> 41.37 kWh; a server
        like the one to wake is not filled beyond its limit - it would be filled as demand
        grows: homogeneous 20 hosts 99.21 -> 100.03 kWh when it was).
        ``session_route``: the simulator routes this policy's sessions with the
        orchestrator's resolver in that ``[orchestrator] session_route``
        (``resolver.slot_order``: ``efficient``, the product's default, ``watts`` or
        ``free``); None: the
        simulator's shared rule (``SimConfig.route``), as the baselines'.
        ``idle_share``: a host in service whose serving VNFs keep at most this share of a
        thread busy each on average (sessions / slots, what the slot registry reports;
        ``observe_busy``) takes VNFs up to its threads, whatever its fill limit: the resolver
        routes sessions to the hosts with the fewest dynamic watts per thread first, so the
        VNFs of a host it routes few to stay idle and one more there costs a thread's
        allocation, not its watts - the fill limit prices every VNF as a busy thread, and
        stopped the fleet's dearest awake servers at 50-70 % of their threads holding the
        scaler's idle headroom while another was woken for the rest (heterogeneous 100 hosts at
        15:30: eight such servers, ~100 threads free among them, four hosts more awake than the
        MILP bound, which puts the idle instances on the hosts it keeps awake anyway). 0: off
        (the fill limit alone, before 2026-11-28 22:00; bench/results/energy.md). Its VNFs
        drain first on scale-in (``power.over_fill``) once they are busy and the fill limit
        is back.
        ``wake_persist``: a wake ahead only once ``power.wake_ahead`` has named hosts that
        many steps in a row (``power.WakePersist``): a one-step shortfall is the slot trend's
        noise (1: at once, the rule until 2026-11-29; bench/results/energy.md)."""
        if session_route is not None and session_route not in resolver.SESSION_ROUTES:
            raise ValueError(f"session_route={session_route!r}: use one of "
                             f"{', '.join(resolver.SESSION_ROUTES)} or None")
        self.session_route = session_route
        if wake not in self.WAKE_RULES:
            raise ValueError(f"wake={wake!r}: use one of {', '.join(self.WAKE_RULES)}")
        self.wake = wake
        if fill not in self.FILL_RULES:
            raise ValueError(f"fill={fill!r}: use one of {', '.join(self.FILL_RULES)}")
        self.fill = fill
        self.name = "fluidvim-consolidate" if consolidate else "fluidvim"
        self.measurement = measurement
        self.services = {s.name: s for s in services}
        self.do_consolidate = consolidate
        self.launch_ms = launch_ms
        self.u_low, self.horizon_s, self.boot_s, self.trend_s = u_low, horizon_s, boot_s, trend_s
        self.launch_cpu_s = launch_cpu_s
        self.do_ahead, self.forecast_window_s = ahead, forecast_window_s
        self.reserve = reserve
        self.short_ahead = 0            # instances the forecast wants beyond those there are
        # the largest of those over the last boot: what keep_empty keeps room for (a host woken
        # for a ramp stays through a minute's flat trend; power.ShortfallPeak)
        self.short_peak = power.ShortfallPeak(boot_s)
        self.keep_ahead = 0             # room wake_ahead keeps beyond it: the scaler's next step
        self.fill_for_need = fill_for_need
        if not 0.0 <= idle_share <= 1.0:
            raise ValueError(f"idle_share={idle_share!r}: use a share of a thread, 0 to 1")
        self.idle_share = idle_share
        self.wake_persist = power.WakePersist(wake_persist)
        self._idle_hosts: frozenset = frozenset()     # hosts filled to their threads (idle VNFs)
        self.busy: dict = {}            # host -> (busy threads, serving VNFs): observe_busy
        self.wake_need = 0              # VNFs a wake would be for now (fill_for_need), else 0
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="fluidvim-energy-")
        self.workdir = workdir or self._tmp.name
        self.orch = None
        self.steps_ms: dict = collections.defaultdict(list)   # engine step -> [ms]
        self.decision_ms: list = []                             # engine total per instance
        self.decision_cpu_ms: list = []                         # this process's CPU for it

    # -- Policy --
    def start(self, hosts: list[Host]) -> None:
        self.hosts = {h.id: h for h in hosts}
        lib = power.library()
        self.curves = {h.id: lib.curve(h.model) for h in hosts}
        # a move costs the launch that replaces the VNF: its CPU time at the fleet's mean
        # dynamic watts per hardware thread
        per_thread = [(c.max_w - c.idle_w) / self.hosts[h].cores for h, c in self.curves.items()]
        self.move_j = self.launch_cpu_s * sum(per_thread) / len(per_thread)
        env = environment(self.measurement)
        self.zone = FleetZone(hosts, env, self.launch_ms)
        self._unit_w = {h.id: power.unit_watts(self.curves[h.id], h.cores) for h in hosts}
        self._per_thread = {h.id: (self.curves[h.id].max_w - self.curves[h.id].idle_w) / h.cores
                            for h in hosts}
        self._fills: dict = {}
        self._refill()
        self.zone.list_off = self.wake == "engine"
        conf = orchconf.make_conf(connection=f"sqlite:///{self.workdir}/orchestrator.sqlite",
                                  local_zone=False)
        self.orch = Orchestrator(conf, zones=[self.zone],
                                 zone_labels={ZONE: {"price_per_hour": 0.0, "location": "dc"}},
                                 power=power.HostMarginalPower(conf, vnf_vcpus=1.0))
        for r in probe_results(self.measurement, env, ZONE):
            self.orch.placement.stage1.cache.put(r)
        for s in self.services.values():
            self.orch.register_service(s.name, FORWARD, deadline_ms=s.deadline_ms,
                                       qos_quantile=s.quantile, session_pps=s.session_pps,
                                       slots=s.slots, vcpus=s.vcpus, memory_mb=s.memory_mb)
        self.where: dict = {}                                 # instance -> (service, host)
        self.by_service: dict = collections.defaultdict(dict)  # service -> {instance: host}
        self.on_host: dict = collections.defaultdict(set)     # host -> instances
        self.leaving: set = set()          # scaled in or moved, draining: on their host still
        self.moved_in: dict = {}           # a move's replacement -> when (held from moving)
        self.sessions: dict = {}           # instance -> sessions (observe_sessions)
        self.count_log: collections.deque = collections.deque()
        self.now = 0.0

    def place(self, shape: Shape, instances: list[str], on: str | None = None) -> list[Placement]:
        """``on``: a rebalancing move's replacement, for that host - the zone lists only it, so
        the engine's filter, probe, analysis and decision run on the launch a deployment makes
        there (``deploy(..., host=)``); should it refuse, the placement is the engine's own."""
        out = []
        for n, inst in enumerate(instances):
            cpu = time.process_time()
            p = None
            if on is not None:
                self.zone.only = on
                try:
                    p = self.orch.placement.place(shape.service)
                finally:
                    self.zone.only = None
                if p.host is None:
                    p = None
                else:
                    self.moved_in[inst] = self.now
            if p is None:
                p = self.orch.placement.place(shape.service)
            self.decision_cpu_ms.append((time.process_time() - cpu) * 1000.0)
            self.decision_ms.append(p.total_ms)
            for k, ms in p.step_ms.items():
                self.steps_ms[k].append(ms)
            host = p.host
            if host is None and self._beyond_fill(len(instances) - n):
                p = self.orch.placement.place(shape.service)
                self.decision_ms[-1] += p.total_ms
                host = p.host
            if host is None:
                host = self._wake_one()        # the hosts in service are full: wake one
            if host is None and self.fill == "efficient" and not self.zone.any_off():
                # every host is awake and at its efficient load: fill beyond it
                self.zone.set_overflow(True)
                try:
                    p = self.orch.placement.place(shape.service)
                finally:
                    self.zone.set_overflow(False)
                self.decision_ms[-1] += p.total_ms
                host = p.host
            if host is None:
                out.append(Placement(inst, None))
                continue
            self._add(inst, shape.service, host)
            out.append(Placement(inst, host))
        return out

    session_zone = ZONE

    def session_order(self, entries: list) -> list:
        """(slot report, free slots) pairs in the order this policy's orchestrator's resolver
        hands sessions out (``resolver.slot_order`` with its ``session_route`` and the dynamic
        watts per thread its placement's power model has recorded)."""
        return resolver.slot_order(entries, self.session_route,
                                   per_thread=self.orch.resolver.per_thread)

    def session_per_thread(self) -> dict:
        """The figures ``session_order`` gives the resolver ({(zone, host): dynamic watts per
        hardware thread}): the simulator orders its arrays with them as ``resolver.slot_order``
        does (``sim.resolver_order``), without a slot report object per instance."""
        return self.orch.resolver.per_thread

    def _beyond_fill(self, need: int) -> bool:
        """``fill_for_need``: the hosts in service are at their fill limits and ``need`` more
        VNFs are to be placed: raise the limits against a host woken for just those
        (``power.wake_unit_watts``) if that makes room in service (True), else leave them."""
        if not (self.fill_for_need and self.fill == "wake-cost") or need <= 0:
            return False
        if not any(self.zone.state(h) != "on" for h in self.zone.info):
            return False
        before = self.zone.room()
        was = self.wake_need
        self.wake_need = max(was, need)
        self._refill()
        if self.zone.room() > before:
            return True
        self.wake_need = was
        self._refill()
        return False

    def _wake_one(self) -> str | None:
        """The host for a placement the hosts in service refused: one already booting (woken
        ahead or for an earlier refusal: the soonest room there is), else the powered-off host
        to wake (the orchestrator wakes one when the slots run out). The instance waits for
        the boot there; the host stays out of service until it has booted (``booted``), as
        the orchestrator's host power loop keeps a waking host (``in_service`` False) - so the
        engine does not pick it, near empty and cheapest on its curve, for placements the
        hosts that are up still have room for. (It did, until 2026-11-27: at 100 hosts whole
        scale-outs went onto booting hosts while up hosts had room, and their sessions were
        refused for the boot: issue 21's 100-host SLO misses.)"""
        waking = [h for h in self.zone.info if self.zone.state(h) == "waking"
                  and self.zone.eligible[h] and self.zone.used[h] < self.zone.fill[h]]
        if waking:
            return power.wake_order([self._fleet_host(h) for h in waking])[0]
        off = self.zone.asleep()
        if not off or self.wake == "engine":
            return None
        if self.wake == "idle":
            h = min(off, key=lambda h: (self.curves[h].idle_w, h))
        else:
            h = power.wake_order([self._fleet_host(h) for h in off])[0]
        self.zone.set_power(h, "waking")
        self._refill()
        return h

    def scale_in(self, service: str, n: int) -> list[str]:
        """Which ``n`` instances of ``service`` go: ``power.scale_in_pick`` - the hosts in
        ``power.scale_in_order``, the instances with the fewest sessions first on each (the
        counts ``observe_sessions`` last reported)."""
        mine = self.by_service.get(service, {})
        if n > len(mine):
            raise ValueError(f"scale_in({service!r}, {n}): only {len(mine)} instance(s)")
        hosts = [self._fleet_host(h) for h in sorted(set(mine.values()))]
        out = power.scale_in_pick(hosts, n, mine, sessions=self.sessions, leaving=self.leaving)
        for inst in out:
            self._leave(inst)
        return out

    def observe_sessions(self, sessions: dict) -> None:
        """``sessions``: instance -> the sessions it serves (what the slot registry's reports
        say), for the instances of the service about to scale in."""
        self.sessions = dict(sessions)

    def gone(self, instances: list[str]) -> None:
        """Scaled-in or moved instances whose sessions have drained: their thread is free now
        (until then the host counts them: a draining VNF still runs there)."""
        self.stop(instances)

    def stop(self, instances: list[str]) -> None:
        for inst in instances:
            if inst in self.where:
                self._remove(inst)

    def set_eligible(self, host: str, eligible: bool) -> None:
        self.zone.set_eligible(host, eligible)
        self._refill()

    def room(self) -> int:
        """VNFs the hosts in service still take before the orchestrator wakes another (the
        zone's queuing delay is a boot beyond that)."""
        return self.zone.room()

    def set_power(self, host: str, on: bool) -> None:
        if on and self.zone.state(host) == "waking":
            return                                  # woken by this policy: in service once booted
        self.zone.set_power(host, on)
        self._refill()

    def booted(self, host: str) -> None:
        """A host has finished booting: one woken ahead of demand goes in service now."""
        if self.zone.state(host) == "waking":
            self.zone.set_power(host, True)
            self._refill()

    def observe_busy(self, busy: dict) -> None:
        """``busy``: host -> (threads its serving VNFs' sessions keep busy, serving VNFs), the
        hosts that have any (``idle_share``; the consolidation plan's ``plan_busy``)."""
        self.busy = dict(busy)
        if self.idle_share <= 0:
            return
        # a host stays in the set while it holds more VNFs than its fill limit: the room it
        # gave is in use, and taking it back at once left the room in service short of what
        # the wake-ahead had counted (homogeneous 100 hosts: 467 sessions refused at 06:10)
        # only hosts the resolver ranks after another one in service (more dynamic watts per
        # thread): on one server model no host's VNFs are idle because another's are busy, and
        # the rule refused 467 sessions at 06:10 of the homogeneous 100-host day
        per = {h: self._per_thread[h] for h in busy if h in self.hosts}
        low = min(per.values(), default=0.0)
        idle = frozenset(h for h, (b, n) in busy.items() if h in per and n > 0 and
                         per[h] > low * (1 + 1e-9) and (
            b <= self.idle_share * n or (h in self._idle_hosts and self.zone.used[h] >
                                         self._fills.get(h, self.hosts[h].cores))))
        if idle != self._idle_hosts:
            self._idle_hosts = idle
            self._fills = {}                        # recompute: the limits change
            self._refill()

    def ahead(self, now: float, services: dict, ahead_s: float) -> list[str]:
        """Powered-off hosts to wake now so that they are up when the demand the services'
        slot trends forecast ``ahead_s`` from now needs them (``power.forecast_instances``,
        ``power.wake_ahead``): the instances each service will want beyond those it has,
        against the room of the hosts in service and of those already waking, by the
        policy's own fill. ``services``: name -> {history: slot samples, slots, headroom,
        lead_s} (what the scaler sees)."""
        if not self.do_ahead:
            return []
        self.short_ahead = short = 0
        for name, v in services.items():
            want = power.forecast_instances(v["history"], now, ahead_s, v["slots"],
                                            window_s=self.forecast_window_s,
                                            lead_s=v["lead_s"], headroom=v["headroom"])
            short += max(0, want - len(self.by_service.get(name, ())))
        self.short_ahead = short
        self.short_peak.note(now, short)
        keep = self.keep_ahead = max((v["headroom"] // v["slots"] + 1
                                      for v in services.values()), default=0)
        off = [h for h in self.zone.info if self.zone.state(h) == "off"]
        need = max(short, self.short_peak.peak()) + keep
        self._fill_for(need, bool(off))
        if not short:
            self.wake_persist.note([])
            self._bridge(need)
            return []
        room = self.zone.room(("on", "waking"))
        wake = power.wake_ahead(short, room, [self._fleet_host(h) for h in off],
                                fill=lambda fh: self.zone.fill[fh.name], keep=keep)
        wake = self.wake_persist.note(wake)
        for h in wake:
            self.zone.set_power(h, "waking")
        if wake:
            self._refill()
        self._bridge(need)
        return wake

    def _fill_for(self, need: float, any_off: bool) -> None:
        """``fill_for_need``: the fills for ``need`` VNFs (the forecast's shortfall, its peak
        over the last boot - the limits do not drop back in a flat minute -, plus the
        scaler's next step) where the room in service and waking holds fewer: a wake for the
        few beyond it comes after the hosts in service are filled beyond their fill limits,
        while a VNF costs less there than on a host woken for just those."""
        if not (self.fill_for_need and self.fill == "wake-cost"):
            return
        if self.wake_need:
            self.wake_need = 0
            self._refill()
        room = self.zone.room(("on", "waking"))
        if not any_off or need <= room:
            return
        self.wake_need = need - room
        self._refill()
        if self.zone.room(("on", "waking")) <= room:
            self.wake_need = 0
            self._refill()

    def _bridge(self, need: float) -> None:
        """``fill_for_need``, after the wakes are decided: while a host is waking it takes no
        placement for a boot, so the hosts in service are filled for ``need`` against their
        own room (beyond their fill limits, as far as a VNF costs less there than on a host
        woken for just those). (Until 2026-11-28 the room of a waking host counted: the moment
        a host began to wake for a few VNFs the others' raised fills fell back, the room in
        service went to 0 and the next scale-outs waited on the booting host - heterogeneous
        20 hosts, plain fluidvim, 427 sessions refused at 17:22. Counting only the room in
        service in ``_fill_for`` instead fixed that day but woke fewer hosts ahead of a steep
        ramp: 1,255 refused at 12:56 of the 100-host day. So the wakes are decided as before
        and this only bridges their boot.)"""
        if not (self.fill_for_need and self.fill == "wake-cost"):
            return
        if not any(self.zone.state(h) == "waking" for h in self.zone.info):
            return
        room = self.zone.room()
        if need <= room:
            return
        was = self.wake_need
        self.wake_need = max(was, need - room)
        self._refill()
        if self.zone.room() <= room:
            self.wake_need = was
            self._refill()

    def keep_empty(self, hosts: list[str]) -> list[str]:
        """Of the empty hosts the simulator would power off now, those the orchestrator keeps
        awake: the room the wake-ahead forecast needs (``power.keep_awake``; the power loop
        powers off no host whose room the forecast needs either)."""
        if not self.do_ahead:
            return []
        room = self.zone.room(("on", "waking"))
        up = self.zone.room()
        # what powering a host off takes from the room: its own, and - on a mixed fleet -
        # what the others' fill limits lose when it becomes the best host to wake (fill_limit
        # is against the cheapest host out of service: the 100-host heterogeneous day powered
        # off its most efficient host and the others' room fell from 155 to 3 instances)
        loses, loses_up = [], []
        for h in hosts:
            if not self.zone.eligible[h]:
                continue
            self.zone.set_eligible(h, False)
            self._refill()
            loses.append((h, room - self.zone.room(("on", "waking"))))
            loses_up.append((h, up - self.zone.room()))
            self.zone.set_eligible(h, True)
        self._refill()
        # the scaler's next step kept, as wake_ahead keeps it, and kept in service (a power-off
        # that leaves less is undone by the next wake_ahead; a step placed on a booting host
        # waits for it); the forecast's shortfall is its peak over the last boot - the 100-host
        # heterogeneous day powered off three hosts woken for the midday ramp when the trend
        # read flat for two minutes, and refused 3,275 sessions while they booted again
        return power.hosts_to_keep(self.short_peak.peak(), room, up, loses, loses_up,
                                   keep=self.keep_ahead)

    def _refill(self):
        """How many VNFs each host takes before a wake is better (``fill``); with wake-cost it
        depends on the best host there is to wake, so it changes as hosts sleep and wake."""
        if self.fill == "full":
            return
        if self.fill == "efficient":
            fills = {h: max(1, int(c.cores * power.efficient_utilisation(self.curves[h]) + 1e-9))
                     for h, c in self.hosts.items()}
        else:
            # the hosts to wake are those out of service: off, waking, or on their way off
            # (draining, shutting down) - a host being emptied is the next to wake again
            off = [self._unit_w[h] for h in self.zone.info
                   if self.zone.state(h) != "on" or not self.zone.eligible[h]]
            best = base = min(off) if off else math.inf
            if self.wake_need and off:
                # a host woken for ``wake_need`` VNFs shares its idle watts among only them -
                # against it fill only the servers more efficient than the best to wake (a
                # server like the one woken is filled to its efficient load, as that one will
                # be as demand grows: homogeneous 20 hosts 99.21 -> 100.03 kWh otherwise)
                best = max(best, power.wake_unit_watts(
                    [power.FleetHost(h, self.curves[h], capacity=float(self.hosts[h].cores))
                     for h in self.zone.info
                     if self.zone.state(h) != "on" or not self.zone.eligible[h]],
                    self.wake_need))
            if self._fills.get("_best") == best and self._fills.get("_base") == base:
                return
            memo: dict = {}
            fills = {}
            for h, c in self.hosts.items():
                w = best if self._unit_w[h] < base else base
                key = (c.model, c.cores, w)
                if key not in memo:
                    memo[key] = max(1, int(power.fill_limit(self.curves[h], c.cores, w,
                                                            reserve=self.reserve)))
                fills[h] = memo[key]
            fills["_best"], fills["_base"] = best, base
        self._fills = fills
        fill = {h: v for h, v in fills.items() if not h.startswith("_")}
        for h in self._idle_hosts:
            fill[h] = self.hosts[h].cores
        self.zone.set_fill(fill)

    def close(self) -> None:
        if self.orch is not None:
            self.orch.close()
            self.orch = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- bookkeeping --
    def _fleet_host(self, h: str) -> power.FleetHost:
        """A host as the orchestrator's power helpers see it: one vCPU per VNF, filled up to
        the load the zone fills it to."""
        cores = float(self.hosts[h].cores)
        return power.FleetHost(h, self.curves[h], capacity=cores,
                               u_max=max(1.0, self.zone.fill[h]) / cores,
                               load={i: 1.0 for i in self.on_host[h]})

    def _add(self, inst: str, service: str, host: str):
        self.where[inst] = (service, host)
        self.by_service[service][inst] = host
        self.on_host[host].add(inst)
        self.zone.add(host, 1)

    def _leave(self, inst: str):
        """``inst`` drains: no longer its service's (not scaled in or moved again), still on
        its host until ``gone``."""
        service, _host = self.where[inst]
        del self.by_service[service][inst]
        self.leaving.add(inst)

    def _remove(self, inst: str):
        service, host = self.where.pop(inst)
        self.by_service[service].pop(inst, None)
        self.leaving.discard(inst)
        self.on_host[host].discard(inst)
        self.zone.add(host, -1)


class FluidvimConsolidatePolicy(FluidvimPolicy):
    """``fluidvim-consolidate``: the same placement plus periodic consolidation."""

    def __init__(self, measurement: dict, services, *, moves_per_step: int | None = None,
                 move_gain_w: float = 1.0, move_hold_s: float = 1800.0, plan_busy: bool = True,
                 rebalance_busy: bool = True, **kw):
        """``moves_per_step``: rebalancing moves a step at most (``power.rebalance_moves``;
        default one per 20 hosts, 0: none); ``move_gain_w``: the least watts a move saves (its
        hysteresis); ``move_hold_s``: a moved VNF's replacement is not moved again for this
        long. ``plan_busy``: the consolidation plan priced by busy threads (``power.Fill``
        with ``busy``: each VNF at its host's busy threads per serving VNF, what
        ``observe_busy`` reports; receivers up to the VNFs this placement gives them - their
        fill, a host of idle VNFs its threads - with their busy load within their fill
        limits); False: every VNF priced as a busy thread, receivers up to their fill limits
        in VNFs (the rule until 2026-11-29; heterogeneous 20 hosts 41.01 -> 40.95 kWh with it
        and the emptiest-first scale-in, homogeneous 20 hosts 99.13 both;
        bench/results/energy.md). ``rebalance_busy``: the moves priced by busy threads
        (``power.rebalance_moves`` with ``power.rebalance.BusyLoad``: the hosts' busy threads
        from ``observe_busy``, the resolver's per-host figure for where a busy share lands),
        one a step; by VNFs as before where nothing can be priced so (one server model).
        bench/results/energy.md 2026-11-29 11:25."""
        self.plan_busy = plan_busy
        self.rebalance_busy = rebalance_busy
        # hosts at most 50 % allocated are emptied - the power loop's own default
        # ([host_power] consolidate_u_low) -, only after 30 min without growth. (0.3 until
        # 2026-11-29: 0.5 had refused more sessions before the rules since - wake ahead, keep,
        # fills -; now it refuses none and empties the evening's half-full hosts sooner:
        # heterogeneous 20 / 100 hosts / seed 2 41.23 -> 41.02, 215.08 -> 215.04, 53.72 ->
        # 53.71 kWh, homogeneous 20 / 100 hosts 99.104 -> 99.108, 492.76 -> 492.83, 0 SLO
        # misses; 15 min without growth instead of 30: 41.25)
        kw.setdefault("u_low", 0.5)
        kw.setdefault("trend_s", 1800.0)
        # a wake ahead once the shortfall has lasted two steps (power.WakePersist; bench/energy
        # heterogeneous 100 / 20 hosts / seed 2: 215.23 -> 215.08, 41.23 -> 41.23, 53.91 ->
        # 53.72 kWh, 0 SLO misses; 3 steps: 215.00, 41.16, 54.10; 5: 327 refused at 20 hosts).
        # Plain fluidvim keeps 1 (its rows were not rerun with it; bench/results/energy.md)
        kw.setdefault("wake_persist", 2)
        super().__init__(measurement, services, consolidate=True, **kw)
        if moves_per_step is not None and moves_per_step < 0:
            raise ValueError(f"moves_per_step={moves_per_step}: use 0 (no rebalancing moves) "
                             "or more")
        self.moves_per_step = moves_per_step
        self.move_gain_w, self.move_hold_s = move_gain_w, move_hold_s

    def rebalance(self, now: float) -> list[tuple[str, str]]:
        """Rebalancing moves now, [(instance, target host)]: ``power.rebalance_moves`` over the
        hosts in service (eligible, up), its receivers within their fill limits (the zone's:
        against the best host to wake, a thread kept for launches), each move worth more over
        ``horizon_s`` than its launch, at least ``move_gain_w``; never a VNF draining already,
        nor a replacement moved in within ``move_hold_s``. The instances named drain from now
        (sessions first) and stay on their hosts until ``gone``."""
        self.now = now
        k = self.moves_per_step
        if k is None:
            k = max(1, len(self.hosts) // 20)
        if not k:
            return []
        for inst, t in list(self.moved_in.items()):
            if now - t >= self.move_hold_s or inst not in self.where:
                del self.moved_in[inst]
        fleet = [self._fleet_host(h) for h in self.zone.info
                 if self.zone.eligible[h] and self.zone.state(h) == "on"]
        held = self.leaving | set(self.moved_in)
        newest = lambda h, movable: max(movable, key=lambda i: (len(i), i))   # noqa: E731
        busy = BusyLoad({h: b for h, (b, _n) in self.busy.items()}, self._per_thread) \
            if self.rebalance_busy else None
        moves = power.rebalance_moves(
            fleet, max_moves=k, min_gain_w=self.move_gain_w, pays=(self.horizon_s, self.move_j),
            held=held, pick=newest, busy=busy)
        for m in moves:
            self._leave(m.vnf)
        return [(m.vnf, m.dst) for m in moves]

    def consolidate(self, now: float) -> list[str]:
        """Hosts to empty now: the orchestrator's consolidation plan over the awake eligible
        hosts, only while demand is not rising, only when the watts it saves over
        ``horizon_s`` outweigh the moves and a later wake of those hosts (a boot at peak
        power), not while the forecast wants more instances within a boot than there are or
        a host is waking, and only as long as the hosts left keep the room the forecast wants
        within a wake-up (``keep``: the instances ``ahead`` found missing); a receiver takes VNFs
        only up to its fill limit against the best host to wake (``fill``), never into the
        steep top of its curve."""
        total = len(self.where)
        self.count_log.append((now, total))
        while self.count_log and self.count_log[0][0] < now - self.trend_s:
            self.count_log.popleft()
        # the power loop's rule: not while demand grows, the forecast wants more instances
        # within a boot, or a host is waking for it (what is emptied then is woken again)
        if power.consolidation_gate(
                self.short_ahead, growing=self.count_log[0][1] < total,
                waking=any(self.zone.state(h) == "waking" for h in self.zone.info)):
            return []
        fleet = [self._fleet_host(h) for h, info in self.zone.info.items()
                 if self.zone.eligible[h] and info.labels.get("power_state") != "off"]
        busy = None
        if self.plan_busy:
            busy = {}
            for fh in fleet:
                b, n = self.busy.get(fh.name, (0.0, 0))
                busy.update(dict.fromkeys(fh.load, b / n if n else 0.0))
        plan = power.consolidation_plan(
            fleet, u_low=self.u_low, horizon_s=self.horizon_s, move_j=self.move_j,
            wake_j=lambda fh: self.boot_s * fh.model.watts(1.0), keep=self.short_ahead,
            fill=power.Fill(1.0, self._fills.get("_best"), busy=busy))
        return list(plan.sleep)
