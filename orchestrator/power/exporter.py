# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Per-host Prometheus ``/metrics``: per-VNF watts and joules by useful work, host watts, free
session slots and the queuing delay (``fluidvim metrics serve``).

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture).

A :class:`HostSampler` reads the host (``/proc``, the power chain's winner) and every running VNF
of this host's launch core (its QEMU's CPU time, its vhost backend's, its ``stats``) every
``[metrics] interval_s`` and hands them to an :class:`~.attribution.Attributor`; the HTTP thread
of ``prometheus_client`` only reads the last interval (a scrape never waits for a VNF). Names
follow Kepler's (``kepler_vm_joules_total``, ...):

=====================================  =======  ===========================================
``fluidvim_vnf_joules_total``          counter  energy attributed to a VNF since the exporter
                                                started (survives the VNF's restart)
``fluidvim_vnf_watts``                 gauge    its watts over the last interval
``fluidvim_vnf_component_watts``       gauge    the same split by ``component`` (busy, poll,
                                                qemu, vhost, softirq, idle)
``fluidvim_host_watts``                gauge    the host's watts (sum of VNFs + unattributed)
``fluidvim_host_unattributed_watts``   gauge    what no VNF was charged
``fluidvim_host_joules_total``         counter  the host's energy since the exporter started
``fluidvim_vnf_free_slots``            gauge    its free session slots (its ``stats``)
``fluidvim_host_queuing_delay_seconds``gauge    time until a new slot exists (the launch core's
                                                estimate; absent while it has no history)
``fluidvim_vnf_cpu_quota_ratio``       gauge    the latency controller's CPU quota of a VNF
                                                with a target, of its flavor's (:mod:`.controller`)
=====================================  =======  ===========================================

Labels: ``vnf`` (name), ``service`` (of a VNF the orchestrator named ``<service>.<token>``,
else empty), ``zone`` and ``host`` (``[metrics]``), and on power figures ``source`` (rapl,
redfish, specpower, linear: which source of the chain produced the host's watts).

The last interval is also written to ``<[vnf] run_dir>/power.json``
(:data:`fluidvim.vnf.manager.POWER_STATE`), which ``VNFManager.power`` reads for ``fluidvim vnf
stats`` and the Nova driver's ``get_diagnostics``.
"""

from __future__ import annotations

import json
import math
import os
import socket
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from fluidvim.common.optgroups import register_group

from .attribution import COMPONENTS, Attributor, Interval, pids_with_arg
from .capacity import Capacities, OrchestratorView
from .chain import build_chain, register_opts as register_power_opts
from .controller import WAIT_SHARE, CgroupCap, LatencyController, tap_counters
from .models import PowerError

LOG = logging.getLogger(__name__)

metrics_group = cfg.OptGroup("metrics", title="Prometheus exporter",
                             help="fluidvim metrics serve: per-host /metrics for Prometheus.")

metrics_opts = [
    cfg.HostAddressOpt("bind_host", default="127.0.0.1",
                       help="Address /metrics listens on (0.0.0.0 or :: for every interface)."),
    cfg.PortOpt("port", default=9417, help="TCP port of /metrics."),
    cfg.FloatOpt("interval_s", default=5.0, min=0.2,
                 help="Attribution interval (seconds): how often the host and every VNF are "
                      "read; a scrape returns the last interval."),
    cfg.StrOpt("zone", default="local",
               help="Value of the zone label (the orchestrator's name for this host's zone)."),
    cfg.StrOpt("host", default=None,
               help="Value of the host label (default: this machine's host name)."),
    cfg.DictOpt("latency_targets", default={},
                help="Latency targets of the controller, VNF name or service: p99 in "
                     "microseconds (e.g. fw:2000,dpi.1a2b3c4d:500). Each interval it lowers "
                     "the CPU quota of a VNF with a target while its p99 holds, and gives the "
                     "flavor's quota back at once when p99 exceeds twice the target; VNFs "
                     "without a target are never touched."),
    cfg.FloatOpt("cap_wait_share", default=WAIT_SHARE, min=0.01, max=1.0,
                 help="The part of a VNF's latency target its CPU cap may add: a cap goes on "
                      "the longest CFS period (at most 20 ms) whose throttled gap, period x "
                      "(1 - the cap's share), is within this share of the target, frames "
                      "waiting in its ring that long; no cap below the least share such a "
                      "period allows (CFS's 1 ms minimum quota), and none at all (the poll "
                      "window only) when that is 70 % of its CPU or more (controller.py)."),
    cfg.FloatOpt("coalesce_share", default=0.2, min=0.0, max=0.9,
                 help="The part of a VNF's latency target its interrupt moderation may add: "
                      "where the controller narrows its busy-poll window it also has the VNF "
                      "nap this share of the target (at most 10 ms) with its receive "
                      "interrupts off and take the frames that came meanwhile in one round, "
                      "one notification per NIC (the poll op's coalesce_us): under PVM "
                      "every VM exit costs tens of microseconds of host CPU, paid per frame "
                      "without it. At high load (its offered rate 70 % of its capacity or more) "
                      "it moderates without a cap where that cuts its host CPU per frame, and "
                      "the nap gathers at most half its RX ring (highload.py). 0: none "
                      "(controller.py)."),
    cfg.IntOpt("controller_backend_nice", default=None, min=-20, max=19,
               help="The nice of a VNF's QEMU main thread (the userspace tap backend, which "
                    "moves every frame) while the controller has its window narrowed (the "
                    "VNF napping); back to its launch nice when open, e.g. -10. Empty (the "
                    "default: the quiet run of 11-29 04:19 showed no gain): left alone "
                    "(backend.py)."),
    cfg.IntOpt("controller_backend_slice_us", default=None, min=100, max=100000,
               help="The scheduler slice (us; EEVDF, Linux 6.12+) of a VNF's QEMU main thread "
                    "while the controller has its window narrowed: a short one lets it preempt "
                    "on its wake-up (bench/powercap at 50 % load: 1 against 11 of 48 intervals "
                    "over the 5 ms target in a development run, with controller_backend_nice; "
                    "not repeated in the quiet run of 11-29 04:19), e.g. 100. Empty (the "
                    "default): left alone (backend.py)."),
    cfg.FloatOpt("cap_headroom", default=1.5, min=1.0,
                 help="The headroom of a VNF's CPU cap over what its vCPU was measured to "
                      "need: the cap on its vCPU threads is at least their host CPU x its "
                      "own busy share (stats cpu, steal-free) x this, plus 2 % of a CPU; a "
                      "cap at the need itself queues the frames (controller.py)."),
    cfg.DictOpt("vnf_capacity_pps", default={},
                help="The controller's capacity of a VNF with a latency target, VNF name or "
                     "service: packets/s it forwards at its flavor's quota (the stage-1 load "
                     "probe's capacity: its slots x the service's session_pps; e.g. "
                     "fw:50000). With one, its offered rate against it judges high load and "
                     "sizes its cap; without, its own busy share does (controller.py). A VNF "
                     "without one takes it from orchestrator_connection (capacity.py)."),
    cfg.StrOpt("orchestrator_connection", default=None,
               help="SQLAlchemy URL of the orchestrator's database (its [orchestrator] "
                    "connection), read for the capacity of a VNF with a latency target and no "
                    "vnf_capacity_pps: its QoE sessions x its service's session_pps, else the "
                    "stage-1 load probe of this host's environment type (the hosts row of "
                    "zone and host) at the service's deadline. Unset: not read."),
]



def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [metrics] (and [power], which it reads) on ``conf`` (idempotent)."""
    register_power_opts(conf)
    register_group(conf, metrics_group, metrics_opts)


def list_opts():
    return [(metrics_group, metrics_opts)]


def service_of(vnf_name: str) -> str:
    """The service of a VNF the orchestrator named ``<service>.<token>`` (the local zone's
    naming, ``zones.local.instance_name``; that module imports this package, so the rule is
    restated here), else ""."""
    return vnf_name.rsplit(".", 1)[0] if "." in vnf_name else ""


class HostSampler:
    """Reads this host and its VNFs (through ``mgr``, a :class:`~fluidvim.vnf.manager.VNFManager`)
    into an :class:`Attributor`; :meth:`step` is one interval."""

    def __init__(self, mgr, attributor: Attributor, state_path: str | None = None,
                 targets: dict | None = None, controller: LatencyController | None = None,
                 capacities: dict | None = None, view=None, **sizing):
        """``view``: the :class:`~.capacity.OrchestratorView` capacities come from when
        ``capacities`` has none for a VNF, or why there is none (a str); ``sizing``: the
        controller's settings (:class:`~.ctlstate.Sizing`): ``wait_share``, the part of a
        target a cap's gap may take (``[metrics] cap_wait_share``), ``headroom``, a cap's over
        its vCPU's measured need (``[metrics] cap_headroom``), ``coalesce_share``, the part
        its interrupt moderation may take (``[metrics] coalesce_share``)."""
        self.mgr, self.att = mgr, attributor
        self.state_path = state_path
        self.targets = {k: float(v) for k, v in (targets or {}).items()}
        try:
            self.capacities = {k: float(v) for k, v in (capacities or {}).items()}
        except ValueError as e:
            raise PowerError(f"[metrics] vnf_capacity_pps: {e}; give VNF name or service: "
                             f"packets/s, e.g. fw:50000") from None
        bad = sorted(k for k, v in self.capacities.items() if not v > 0)
        if bad:
            raise PowerError(f"[metrics] vnf_capacity_pps: {', '.join(bad)} not > 0; give "
                             f"packets/s at the flavor's quota, e.g. fw:50000")
        self.capacity_of = Capacities(self.capacities, view)
        if self.targets and controller is None:
            controller = LatencyController(CgroupCap(), poller=self.set_poll_window, **sizing)
        self.controller = controller
        self._ids: dict = {}                      # VNF uuid -> id (the controller's key)
        self.control: dict = {}                   # VNF id -> the controller's last decision
        self.queuing_delay_s: float | None = None
        self.lock = threading.Lock()
        self.intervals = 0

    def set_poll_window(self, uuid: str, window_us: int, coalesce_us: int | None = None) -> int:
        """The controller's poller: the VNF's busy-poll window (and interrupt moderation,
        unless None) over its control channel."""
        with self.mgr.channel(self._ids[uuid]) as ch:
            return ch.poll(window_us, timeout=2.0, coalesce_us=coalesce_us)["window_us"]

    def _helpers(self, spec) -> list[int]:
        """The VNF's fluidvim-vhost-net (net_backend vhost-user): the process given the tap of
        its first NIC (``<fd>:<tap>``, vnf/backends.py)."""
        if getattr(spec, "net_backend", "tap") != "vhost-user" or not spec.nics:
            return []
        return pids_with_arg(f":{spec.nics[0].tap}", self.att.proc_root)

    def read_vnfs(self):
        from fluidvim.vnf import states
        out = []
        for rec in self.mgr.list():
            if rec.status != states.RUNNING:
                continue
            spec = rec.spec
            target = self.targets.get(rec.name, self.targets.get(service_of(rec.name)))
            # the host's side of its rings, read before its stats: frames that arrive while it
            # answers count in its rx but not here, so the backlog is a lower bound
            taps = (tap_counters([n.tap for n in spec.nics or ()])
                    if target is not None and self.controller is not None else None)
            try:
                st = self.mgr.stats(rec.id)
            except Exception as e:   # noqa: BLE001 - a VNF that does not answer is still read
                LOG.debug("no stats from %s: %s", rec.name, e)
                st = None
            if target is not None and self.controller is not None:
                self._ids[spec.uuid] = rec.id
                try:
                    cap, src, why = self.capacity_of(rec.name, service_of(rec.name), spec, st)
                    d = self.controller.step(spec.uuid, rec.name, target, int(spec.vcpus or 1), st,
                                             taps, cap)
                    d["capacity_source"], d["capacity_basis"] = src, why
                    with self.lock:               # the HTTP thread copies it
                        self.control[rec.id] = d
                except (OSError, ValueError, PowerError) as e:
                    LOG.warning("controller %s: %s", rec.name, e)
            out.append(self.att.vnf_counters(rec.id, rec.name, rec.pid, st,
                                             service=service_of(rec.name),
                                             vcpus=int(getattr(spec, "vcpus", 1) or 1),
                                             helper_pids=self._helpers(spec)))
        return out

    def step(self) -> Interval | None:
        host = self.att.read_host()
        vnfs = self.read_vnfs()
        iv = self.att.sample(host, vnfs)
        try:
            qd = self.mgr.queuing_delay().get("seconds")
        except Exception as e:       # noqa: BLE001 - the estimate is optional
            LOG.debug("no queuing delay: %s", e)
            qd = None
        with self.lock:
            self.queuing_delay_s = qd
            if iv is not None:
                self.intervals += 1
        if iv is not None and self.state_path:
            self.write_state(iv)
        return iv

    def write_state(self, iv: Interval) -> None:
        doc = iv.to_dict()
        doc["at"] = time.time()
        doc["control"] = {k: d for k, d in self.control.items() if k in iv.vnfs}
        tmp = f"{self.state_path}.tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, self.state_path)

    def run(self, interval_s: float, stop: threading.Event) -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                self.step()
            except PowerError as e:
                LOG.warning("attribution interval failed: %s", e)
            stop.wait(max(0.0, interval_s - (time.monotonic() - t0)))


class Collector:
    """A ``prometheus_client`` collector of the sampler's last interval."""

    def __init__(self, sampler: HostSampler, zone: str, host: str):
        self.sampler, self.zone, self.host = sampler, zone, host

    def describe(self):
        return []                      # no scrape at registration time

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self.sampler.lock:
            iv, qd = self.sampler.att.last, self.sampler.queuing_delay_s
            control = dict(self.sampler.control)
        vl = ["vnf", "service", "zone", "host", "source"]
        j = CounterMetricFamily("fluidvim_vnf_joules", "Energy attributed to the VNF (J) by "
                                "useful work, since the exporter started", labels=vl)
        w = GaugeMetricFamily("fluidvim_vnf_watts", "Power attributed to the VNF over the last "
                              "interval (W)", labels=vl)
        cw = GaugeMetricFamily("fluidvim_vnf_component_watts", "The VNF's watts by component: "
                               "busy (its own count), poll, qemu, vhost, softirq (host-side), "
                               "idle", labels=vl + ["component"])
        fs = GaugeMetricFamily("fluidvim_vnf_free_slots", "Free session slots of the VNF",
                               labels=["vnf", "service", "zone", "host"])
        hl = ["zone", "host", "source"]
        hw = GaugeMetricFamily("fluidvim_host_watts", "The host's power over the last interval "
                               "(W)", labels=hl)
        hu = GaugeMetricFamily("fluidvim_host_unattributed_watts", "Host power no VNF was "
                               "charged (W)", labels=hl)
        hj = CounterMetricFamily("fluidvim_host_joules", "The host's energy since the exporter "
                                 "started (J)", labels=hl)
        qdm = GaugeMetricFamily("fluidvim_host_queuing_delay_seconds", "Expected time until a "
                                "new session slot exists on this host (s)", labels=["zone", "host"])
        cq = GaugeMetricFamily("fluidvim_vnf_cpu_quota_ratio", "The latency controller's CPU "
                               "quota of the VNF, a fraction of its flavor's",
                               labels=["vnf", "service", "zone", "host"])
        if iv is not None:
            for k, d in control.items():
                if k in iv.vnfs:
                    s = iv.vnfs[k]
                    cq.add_metric([s.name, s.service, self.zone, self.host], d["quota_ratio"])
            for s in iv.vnfs.values():
                lv = [s.name, s.service, self.zone, self.host, s.source]
                j.add_metric(lv, s.joules)
                w.add_metric(lv, s.watts)
                for c in COMPONENTS:
                    cw.add_metric(lv + [c], s.components.get(c, 0.0))
                if s.free_slots is not None:
                    fs.add_metric([s.name, s.service, self.zone, self.host], s.free_slots)
            hlv = [self.zone, self.host, iv.source]
            hw.add_metric(hlv, iv.host_watts)
            hu.add_metric(hlv, iv.unattributed_watts)
            hj.add_metric(hlv, iv.host_joules)
        if qd is not None and not math.isnan(qd):
            qdm.add_metric([self.zone, self.host], qd)
        yield from (j, w, cw, fs, hw, hu, hj, qdm, cq)


class Exporter:
    """The sampler thread and the HTTP server: :meth:`start`, :meth:`stop`."""

    def __init__(self, conf: cfg.ConfigOpts, mgr, attributor: Attributor | None = None):
        register_opts(conf)
        self.conf, self.mgr = conf, mgr
        o = conf.metrics
        if attributor is None:
            chain = build_chain(conf)
            attributor = Attributor(chain.model, chain.source, proc_root=conf.power.proc_root,
                                    idle_rule=conf.power.idle_rule)
        from fluidvim.vnf.manager import POWER_STATE
        state = os.path.join(mgr.run_dir, POWER_STATE)
        host = o.host or socket.gethostname()
        self.sampler = HostSampler(mgr, attributor, state_path=state,
                                   targets=o.latency_targets, capacities=o.vnf_capacity_pps,
                                   view=self._view(o, host), wait_share=o.cap_wait_share,
                                   headroom=o.cap_headroom, coalesce_share=o.coalesce_share,
                                   backend_nice=o.controller_backend_nice,
                                   backend_slice_us=o.controller_backend_slice_us)
        self.collector = Collector(self.sampler, o.zone, host)
        self._stop = threading.Event()
        self._thread = None
        self._server = None
        self.port = None

    @staticmethod
    def _view(o, host: str):
        """The orchestrator's database for capacities (capacity.py), or why not (a str)."""
        if not o.latency_targets:
            return "no latency targets"
        if not o.orchestrator_connection:
            return "[metrics] orchestrator_connection not set"
        try:
            return OrchestratorView(o.orchestrator_connection, o.zone, host)
        except Exception as e:   # noqa: BLE001 - any driver's error: capacities not known here
            LOG.warning("metrics: the orchestrator's database is not reachable from here (%s): "
                        "VNF capacities only from [metrics] vnf_capacity_pps", e)
            return f"orchestrator's database not reachable: {e}"

    def start(self):
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)
        o = self.conf.metrics
        self._server, _ = start_http_server(o.port, addr=o.bind_host, registry=registry)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self.sampler.run, name="fluidvim-metrics",
                                        args=(o.interval_s, self._stop), daemon=True)
        self._thread.start()
        LOG.info("metrics: http://%s:%d/metrics, every %.1f s, power source %s",
                 o.bind_host, self.port, o.interval_s, self.sampler.att.source)
        return self

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if isinstance(self.sampler.capacity_of.view, OrchestratorView):
            self.sampler.capacity_of.view.close()
