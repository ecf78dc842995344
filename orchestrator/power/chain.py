# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The ``[power]`` options and the fallback chain: which source wins on a host, and the marginal
power placement asks for (:class:`HostMarginalPower`).

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture); every
name is importable from there too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

from oslo_config import cfg
from oslo_log import log as logging

from fluidvim.common.optgroups import register_group

from .fleet import marginal_watts
from .models import SOURCES, LinearModel, PowerError, PowerSource, SpecpowerCurve, library
from .sources import RaplSource, RedfishSource

LOG = logging.getLogger(__name__)


power_group = cfg.OptGroup("power", title="Host power models",
                           help="Where host power comes from, for power-aware placement.")

power_opts = [
    cfg.ListOpt("sources", default=list(SOURCES), item_type=cfg.types.String(choices=SOURCES),
                help="Power sources to try, best first; the first that works wins. rapl and "
                     "redfish measure; specpower and linear model (and are the measured "
                     "sources' prior until they have measurements at several utilisations)."),
    cfg.StrOpt("rapl_root", default="/sys/class/powercap",
               help="powercap sysfs root with intel-rapl:N/energy_uj."),
    cfg.FloatOpt("rapl_interval_s", default=1.0, min=0.01,
                 help="Sampling interval of one RAPL measurement (seconds)."),
    cfg.StrOpt("proc_root", default="/proc",
               help="proc filesystem root (host and VNF CPU time)."),
    cfg.URIOpt("redfish_url", default=None,
               help="Redfish service of the host's BMC, e.g. https://10.0.0.5/redfish/v1."),
    cfg.StrOpt("redfish_username", default=None, help="BMC user (HTTP basic auth)."),
    cfg.StrOpt("redfish_password", default=None, secret=True, help="BMC password."),
    cfg.StrOpt("redfish_system_id", default=None,
               help="Redfish system path, e.g. /redfish/v1/Systems/1 (default: the first system)."),
    cfg.BoolOpt("redfish_verify", default=True, help="Verify the BMC's TLS certificate."),
    cfg.StrOpt("redfish_auth", default="auto", choices=["auto", "basic", "session"],
               help="auto: a Redfish session, else HTTP basic auth; basic; session."),
    cfg.StrOpt("specpower_csv", default=None,
               help="Power-curve CSV (columns system_id, w_0..w_100); default: the packaged "
                    "SPECpower_ssj2008 library of 499 servers."),
    cfg.StrOpt("specpower_system_id", default=None,
               help="This host's row of the power-curve CSV (e.g. spec0120)."),
    cfg.ListOpt("specpower_points", default=None, item_type=cfg.types.Float(min=0),
                help="This host's own curve: 11 watts at 0,10,...,100 % load (instead of a "
                     "system id)."),
    cfg.FloatOpt("idle_watts", default=None, min=0,
                 help="Linear model: power at idle (W)."),
    cfg.FloatOpt("max_watts", default=None, min=0,
                 help="Linear model: power at 100 % CPU (W)."),
    cfg.StrOpt("idle_rule", default="vcpus", choices=["vcpus", "equal", "none"],
               help="How per-VNF attribution shares the host's idle power: vcpus, by the "
                    "vCPUs reserved for each VNF out of the host's CPUs (the rest stays "
                    "unattributed; all of it by vCPUs when overcommitted); equal, all of it "
                    "equally among the VNFs; none, all of it unattributed."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [power] on ``conf`` (idempotent)."""
    register_group(conf, power_group, power_opts)


def list_opts():
    return [(power_group, power_opts)]


@dataclasses.dataclass
class ChainResult:
    model: PowerSource
    source: str
    reasons: dict                 # source -> why it did not win ("" for the winner)
    order: list

    def report(self) -> str:
        lines = [f"power source: {self.source} ({self.model.describe()})"]
        for s in self.order:
            if s != self.source:
                lines.append(f"  {s}: {self.reasons.get(s, 'not tried (a better source won)')}")
        return "\n".join(lines)


def _opts(conf):
    if conf is None:
        conf = cfg.ConfigOpts()
    register_opts(conf)
    return conf.power


def _model_source(name, o, system_id=None, points=None):
    if name == "specpower":
        pts = points if points is not None else o.specpower_points
        if pts:
            return SpecpowerCurve(pts, system_id="host")
        sid = system_id or o.specpower_system_id
        if not sid:
            raise PowerError("no curve: set [power] specpower_system_id (a system_id of the CSV) or "
                             "specpower_points (11 watts)")
        return library(o.specpower_csv).curve(sid)
    if name == "linear":
        return LinearModel(o.idle_watts, o.max_watts)
    raise PowerError(f"unknown power source {name!r} (one of {', '.join(SOURCES)})")


def build_chain(conf: cfg.ConfigOpts | None = None, system_id: str | None = None,
                points=None, sleep=time.sleep) -> ChainResult:
    """Try ``[power] sources`` in order; the first that works wins (see :class:`ChainResult`).

    ``system_id`` / ``points`` (e.g. from a :class:`HostInfo`) override the configured curve.
    Raises :class:`PowerError` listing every source's reason when none works.
    """
    o = _opts(conf)
    order = list(o.sources)
    for name in order:
        if name not in SOURCES:
            raise PowerError(f"[power] sources: unknown source {name!r} (one of {', '.join(SOURCES)})")
    reasons: dict = {}
    # the best model source is every measured source's prior
    prior = None
    for name in order:
        if name in ("specpower", "linear"):
            try:
                prior = _model_source(name, o, system_id, points)
                break
            except PowerError:
                continue
    for name in order:
        try:
            if name == "rapl":
                model = RaplSource(o.rapl_root, o.rapl_interval_s, o.proc_root, prior=prior, sleep=sleep)
                model.sample()
            elif name == "redfish":
                model = RedfishSource(o.redfish_url, o.redfish_username, o.redfish_password,
                                      o.redfish_system_id, o.redfish_verify, prior=prior,
                                      auth=o.redfish_auth)
            else:
                model = _model_source(name, o, system_id, points)
        except PowerError as e:
            reasons[name] = str(e)
            LOG.debug("power source %s unusable: %s", name, e)
            continue
        reasons[name] = ""
        res = ChainResult(model=model, source=name, reasons=reasons, order=order)
        LOG.info("%s", res.report().replace("\n", "; "))
        return res
    raise PowerError("no power source works: " + "; ".join(f"{k}: {v}" for k, v in reasons.items()))


def model_for_host(host, conf: cfg.ConfigOpts | None = None) -> PowerSource:
    """A model for an orchestrator :class:`HostInfo`: its ``power_system_id`` curve, else
    ``labels['power_points']`` (11 watts), else the configured chain's model sources.
    """
    pts = (getattr(host, "labels", None) or {}).get("power_points")
    sid = getattr(host, "power_system_id", None)
    o = _opts(conf)
    if pts is not None:
        return SpecpowerCurve(pts, system_id=host.name)
    if sid:
        return library(o.specpower_csv).curve(sid)
    for name in o.sources:
        if name in ("specpower", "linear"):
            try:
                return _model_source(name, o)
            except PowerError:
                continue
    raise PowerError(f"host {host.name}: no power curve (set its power_system_id, or [power] "
                     "specpower_system_id / idle_watts+max_watts)")


def dynamic_per_thread(model, cpus: float) -> float:
    """A host's dynamic watts per hardware thread (its curve's full load less its idle, over
    its threads): the figure ``[orchestrator] session_route = efficient`` ranks hosts by
    (:attr:`HostMarginalPower.per_thread`) and the busy-priced rebalancing move orders them by."""
    return max(0.0, model.watts(1.0) - model.watts(0.0)) / cpus


class HostMarginalPower:
    """The orchestrator's ``(zone name, HostInfo) -> extra watts | None`` for one more VNF.

    The host's model is :func:`model_for_host` (its ``power_system_id`` curve, ``power_points``
    label, or the configured model sources); its utilisation ``HostInfo.cpu_util``; one VNF adds
    ``vnf_vcpus / cpus`` where ``cpus`` is the host's ``labels['cpus']``, else the curve's
    hardware threads, else ``default_cpus``. ``None`` when no model exists for the host (the
    placement then says so instead of guessing).
    """

    def __init__(self, conf: cfg.ConfigOpts | None = None, vnf_vcpus: float = 1.0,
                 default_cpus: int | None = None):
        self.conf = conf
        self.vnf_vcpus = float(vnf_vcpus)
        self.default_cpus = default_cpus or os.cpu_count() or 1
        self._models: dict = {}
        self._marginal: dict = {}               # (model, u, cpus) -> watts
        self._hosts: dict = {}                  # (system id, points, cpus label) -> model, cpus
        # (zone, host) -> the host's dynamic watts per hardware thread, (w(1) - w(0)) / cpus, of
        # every host this was asked about (placement asks it of each candidate): what one more
        # busy thread costs there, the resolver's session order (session_route = efficient)
        self.per_thread: dict = {}

    def unchanged(self, zone_name: str, host) -> bool:
        """Whether this answers for ``host`` what it answered last time its
        ``power_system_id``, labels and ``cpu_util`` were what they are: always, the answer is
        a function of those (models never change), once its per-thread figure is recorded
        (placement then skips asking again for a host none of those changed for)."""
        return (zone_name, host.name) in self.per_thread

    def model(self, host) -> PowerSource | None:
        labels = getattr(host, "labels", None) or {}
        return self._model(host, getattr(host, "power_system_id", None),
                           labels.get("power_points"))

    def _model(self, host, sid, points) -> PowerSource | None:
        key = (sid, tuple(points) if points else ())
        if key not in self._models:
            try:
                self._models[key] = model_for_host(host, self.conf)
            except PowerError as e:
                LOG.debug("no power model for %s: %s", host.name, e)
                self._models[key] = None
        return self._models[key]

    def cpus(self, host, model) -> float:
        return self._cpus((getattr(host, "labels", None) or {}).get("cpus"), model)

    def _cpus(self, cpus, model) -> float:
        if not cpus and isinstance(model, SpecpowerCurve):
            cpus = (model.info or {}).get("threads")
        try:
            return max(1.0, float(cpus)) if cpus else float(self.default_cpus)
        except (TypeError, ValueError):
            return float(self.default_cpus)

    def __call__(self, zone_name: str, host) -> float | None:
        labels = getattr(host, "labels", None) or {}
        sid = getattr(host, "power_system_id", None)
        pts = labels.get("power_points")
        cpus_label = labels.get("cpus")
        # a fleet has few models and utilisations repeat (empty, full, k of n CPUs): a placement
        # over 1,000 hosts asks this for each, so the answers are kept (models never change)
        hkey = (sid, tuple(pts) if pts else (), cpus_label)
        known = self._hosts.get(hkey)
        if known is None:
            model = self._model(host, sid, pts)
            known = self._hosts[hkey] = (model, self._cpus(cpus_label, model)
                                         if model is not None else None)
        model, cpus = known
        if model is None:
            return None
        hk = (zone_name, host.name)
        if hk not in self.per_thread:
            if len(self.per_thread) >= 65536:
                self.per_thread.clear()
            self.per_thread[hk] = dynamic_per_thread(model, cpus)
        u = min(1.0, max(0.0, float(getattr(host, "cpu_util", 0.0) or 0.0)))
        key = (id(model), u, cpus)
        m = self._marginal.get(key)
        if m is None:
            m = marginal_watts(model, u, self.vnf_vcpus / cpus)
            if math.isinf(m):                # the host is (nearly) saturated: the rest of 0..1
                m = model.watts(1.0) - model.watts(u)
            if len(self._marginal) >= 65536:
                self._marginal.clear()
            self._marginal[key] = m
        return m
