# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Host power control: drain a host, power it off through its BMC (Redfish), wake it again.

Each host with a BMC in ``[host_power] bmcs`` has a power state, kept in the orchestrator's
database (table ``host_power``) so that a restarted orchestrator continues where it stopped.
The states and the one map of allowed transitions (as nova's ``virt/ironic/ironic_states.py``)::

            consolidation                 sessions ended,            BMC reports Off
     on ───────────────────▶ draining ──────────────────▶ powering_off ──────────────▶ off
      ▲                          │        instances moved            │                  │
      │ zone lists it again,     │ BMC unreachable / refused:        │                  │ slots
      │ eligible                 ▼ undo (host back in service)       ▼                  │ run out
      └──────────────────── waking ◀─────────────────────────────────────────────────┘
                               │  BMC refuses On / still Off / host not back in time
                               ▼
                 failed  |  bmc_unreachable   (skipped: clear error, nothing lost)

A host without a row (or without a BMC) is ``on``. ``in_service`` (a column next to the state)
says whether the host takes placement: it is True only in ``on`` and in a failure state reached
before the host left service (the power-off was undone); a host that failed to wake stays out.

Sessions first: a host entering ``draining`` stops offering the slots of its VNFs at once (the
slot registry skips it, :meth:`HostPower.unavailable`), its zone's own scheduler stops placing
there (Nomad: ineligible), its VNFs' live sessions end - or ``session_bound`` seconds pass - and
only then does the zone move its instances (Nomad: node drain; its scheduler starts them
elsewhere). The Redfish actions are ``ComputerSystem.Reset`` (``GracefulShutdown``, after
``graceful_timeout`` ``ForceOff``; ``On``) through sushy, each followed by polling the system's
``PowerState``.

:class:`HostPower` is the manager; :meth:`HostPower.round` is one round of its loop (every
``[host_power] interval`` seconds): re-check unreachable BMCs, wake a host when a service's free
slots run low - or ahead of demand, when the instances the services' slot trends forecast one
boot from now (``wake_ahead_s``) exceed the room of the hosts in service and of those waking
(every host that room needs, at once) - else power off what
the consolidation plan (:func:`.power.consolidation_plan`) empties and the forecast does not
need - empty hosts first, one host per round.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from fluidvim.common import instance_states as istates
from fluidvim.common.optgroups import register_group
from fluidvim.common.zonetypes import ZoneError

from .exception import NotFound, invalid

LOG = logging.getLogger(__name__)

# -- host power states (HostPowerRow.state) --

ON = "on"
"""Powered on and in service (the default of every host)."""

DRAINING = "draining"
"""Chosen to power off: takes no placement, its VNFs offer no slots; waiting for their sessions to
end (or ``session_bound``), then for its zone to move its instances elsewhere."""

POWERING_OFF = "powering_off"
"""Empty; the BMC was asked to shut the host down; waiting for ``PowerState`` Off."""

OFF = "off"
"""Powered off (the BMC says Off). Takes no placement; a candidate to wake."""

WAKING = "waking"
"""The BMC was asked to power on; waiting for ``PowerState`` On and for the zone to list the host
again (then it is made eligible and goes ``on``)."""

FAILED = "failed"
"""A power action did not reach its end within its timeout, or the BMC refused it (``error`` says
which). Skipped by consolidation and wake-up until ``failed_retry_after`` passes."""

UNREACHABLE = "bmc_unreachable"
"""The BMC did not answer. Skipped; every round asks it again and the host goes back to what the
BMC then reports."""

STATES = (ON, DRAINING, POWERING_OFF, OFF, WAKING, FAILED, UNREACHABLE)

IN_PROGRESS = (DRAINING, POWERING_OFF, WAKING)
"""States an action is running in; a restarted orchestrator resumes them."""

TRANSITIONS = {
    ON: (DRAINING, OFF, UNREACHABLE),          # OFF: the BMC says so (found off, turned off by hand)
    DRAINING: (POWERING_OFF, ON, FAILED, UNREACHABLE),           # ON: undone
    POWERING_OFF: (OFF, ON, FAILED, UNREACHABLE),
    OFF: (WAKING, ON, UNREACHABLE),
    WAKING: (ON, FAILED, UNREACHABLE),
    FAILED: (ON, OFF, WAKING, DRAINING, UNREACHABLE),
    UNREACHABLE: (ON, OFF, WAKING, FAILED),
}
"""state -> the states it may go to; anything else is a bug (:class:`HostPowerError`)."""

# Redfish ComputerSystem PowerState values and ResetType values (DSP0268)
POWER_ON, POWER_OFF = "On", "Off"
RESET_ON, RESET_GRACEFUL, RESET_FORCE_OFF = "On", "GracefulShutdown", "ForceOff"


class HostPowerError(Exception):
    """A host power action failed; the message names the host and what to do."""


class BMCUnreachable(HostPowerError):
    """The BMC did not answer (connection refused, timeout, DNS)."""


class BMCRefused(HostPowerError):
    """The BMC answered with an error (HTTP 4xx/5xx) or no power state."""


def check_transition(old: str, new: str, host: str = "") -> None:
    if new not in TRANSITIONS.get(old, ()):
        raise HostPowerError(f"host {host}: power state {old} cannot go to {new} (allowed: "
                             f"{', '.join(TRANSITIONS.get(old, ())) or 'none'})")


# -- options --

host_power_group = cfg.OptGroup(
    "host_power", title="Host power control",
    help="Drain hosts, power them off and on through their BMCs (Redfish), wake them before the "
         "session slots run out.")

host_power_opts = [
    cfg.BoolOpt("enabled", default=False,
                help="Manage the power of the hosts listed in bmcs."),
    cfg.MultiStrOpt("bmcs", default=[],
                    help="One per line: ZONE:HOST=URL, the host's Redfish ComputerSystem, e.g. "
                         "nomad-dc1:node-3=https://10.0.0.13/redfish/v1/Systems/1. Hosts not "
                         "listed are never powered off."),
    cfg.StrOpt("username", default=None, help="BMC user (every BMC of bmcs)."),
    cfg.StrOpt("password", default=None, secret=True, help="BMC password."),
    cfg.BoolOpt("verify", default=True, help="Verify the BMCs' TLS certificates."),
    cfg.StrOpt("auth", default="auto", choices=["auto", "basic", "session"],
               help="auto: a Redfish session, else HTTP basic auth; basic; session."),
    cfg.FloatOpt("bmc_timeout", default=10.0, min=0.1,
                 help="Seconds one Redfish request may take before the BMC counts as "
                      "unreachable."),
    cfg.FloatOpt("poll_interval", default=1.0, min=0.01,
                 help="Seconds between two reads of a BMC's PowerState (and of a zone's host) "
                      "while an action waits."),
    cfg.FloatOpt("graceful_timeout", default=120.0, min=0.0,
                 help="Seconds a GracefulShutdown gets before a ForceOff."),
    cfg.FloatOpt("off_timeout", default=60.0, min=0.1,
                 help="Seconds after the ForceOff until the BMC must report Off (else failed)."),
    cfg.FloatOpt("wake_timeout", default=600.0, min=0.1,
                 help="Seconds from the On request until the BMC reports On and the zone lists "
                      "the host again (else failed)."),
    cfg.FloatOpt("session_bound", default=300.0, min=0.0,
                 help="Seconds a draining host's VNFs - and a VNF a rebalancing move takes - "
                      "get for their live sessions to end before they are moved anyway."),
    cfg.FloatOpt("drain_timeout", default=300.0, min=1.0,
                 help="Seconds the zone gets to move a draining host's instances (Nomad: the "
                      "node drain's deadline)."),
    cfg.FloatOpt("interval", default=30.0, min=0.0,
                 help="Seconds between two rounds of the power loop (recheck BMCs, wake, "
                      "consolidate); 0 = no loop (actions only when asked)."),
    cfg.IntOpt("wake_free_slots", default=4, min=0,
               help="Wake a host when a service's free slots on the hosts in service fall below "
                    "this and no awake host has room for another instance."),
    cfg.FloatOpt("wake_ahead_s", default=0.0, min=0.0,
                 help="Also wake a host this many seconds ahead of demand: when the instances "
                      "the services' slot trends forecast for then (power.forecast_instances) "
                      "exceed the room of the hosts in service (power.wake_ahead); a host "
                      "that room needs is then not powered off either. Set it to a server's "
                      "boot time plus a launch (AutoScale measured 260 s for a boot; "
                      "bench/energy runs it at 290 s); 0 (default) = wake only when the free "
                      "slots run low (wake_free_slots)."),
    cfg.IntOpt("wake_ahead_rounds", default=1, min=1,
               help="Wake ahead only once the forecast has wanted a host this many rounds in a "
                    "row (power.WakePersist): a shortfall of one round is the slot trend's "
                    "noise, and the host woken for it boots at peak watts and goes off again. "
                    "A refused placement still wakes a host at once. bench/energy's "
                    "fluidvim-consolidate runs 2 (its steps are 30 s, the default interval); "
                    "1 (default) = at once."),
    cfg.FloatOpt("forecast_window_s", default=900.0, min=1.0,
                 help="Seconds of slot samples whose trend (least-squares slope of the used "
                      "slots) the wake-ahead forecast extrapolates."),
    cfg.BoolOpt("consolidate", default=True,
                help="Let the loop power off what the consolidation plan empties."),
    cfg.FloatOpt("consolidate_u_low", default=0.5, min=0.0, max=1.0,
                 help="Hosts at or below this utilisation may be emptied (the plan's u_low)."),
    cfg.BoolOpt("consolidate_busy", default=False,
                help="Price the consolidation plan by busy threads: each VNF at the share of "
                     "its slots in use (the slot registry's reports; a VNF without one: all "
                     "busy), a receiver taking VNFs up to its threads while its busy threads "
                     "stay within its fill limit (power.Fill busy). Off by default: "
                     "bench/energy measured the rule with receivers up to its placement's "
                     "fills; up to every thread it cost SLO misses on one server model."),
    cfg.FloatOpt("consolidate_trend_s", default=1800.0, min=0.0,
                 help="No host in service is emptied while the instances grew over this many "
                      "seconds (power.consolidation_gate; bench/energy runs the same rule)."),
    cfg.FloatOpt("consolidate_horizon_s", default=3600.0, min=0.0,
                 help="A host is emptied only when the watts it saves over this many seconds "
                      "outweigh waking it again (a boot of wake_ahead_s at its peak watts); "
                      "0 = any saving (power.consolidation_plan's horizon_s)."),
    cfg.IntOpt("rebalance_moves", default=1, min=0,
               help="Rebalancing moves the plan names at most (power.rebalance_moves: a single "
                    "VNF from the host where it costs the most watts to a host in service "
                    "where it costs the fewest, within its fill limit); 0 = none."),
    cfg.BoolOpt("rebalance_busy", default=True,
                help="Price the rebalancing move by busy threads (power.rebalance.BusyLoad): a "
                     "VNF leaving a host whose VNFs are all busy takes its busy share off the "
                     "top of that host's curve, and the share lands on the first host in the "
                     "resolver's order ([orchestrator] session_route = efficient: dynamic watts "
                     "per thread) with idle slots; one such move a round (the next slot reports say "
                     "where its share went), priced by VNFs where nothing can be priced so "
                     "(one server model) or with another session_route. bench/energy, "
                     "heterogeneous 20 hosts: 40.95 -> 40.87 kWh."),
    cfg.FloatOpt("rebalance_gain_w", default=1.0, min=0.0,
                 help="The least watts a rebalancing move must save (its hysteresis: the "
                      "reverse move saves the same negated, so nothing moves back and forth)."),
    cfg.IntOpt("min_hosts_on", default=1, min=0,
               help="Never power off the last this many hosts in service of a zone."),
    cfg.FloatOpt("vnf_vcpus", default=1.0, min=0.01,
                 help="CPU units one VNF instance takes in the consolidation plan and the room "
                      "check (a host has its cpus label / curve's threads of them)."),
    cfg.FloatOpt("failed_retry_after", default=3600.0, min=0.0,
                 help="Seconds after which a failed host is tried again (0 = never)."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register [host_power] on ``conf`` (idempotent)."""
    register_group(conf, host_power_group, host_power_opts)


def list_opts():
    """Entry point for oslo-config-generator (namespace ``fluidvim.hostpower``)."""
    return [(host_power_group, host_power_opts)]


_BMC_RE = re.compile(r"^\s*([^:=\s]+):([^=\s]+)\s*=\s*(https?://\S+/redfish/v1/Systems/[^/\s]+)/?\s*$")


def parse_bmcs(lines) -> dict[tuple[str, str], str]:
    """``[host_power] bmcs`` -> {(zone, host): system URL}; a bad line is an error naming it."""
    out: dict = {}
    for line in lines or ():
        m = _BMC_RE.match(line)
        if not m:
            raise invalid("host_power.bmcs", f"{line!r} is not ZONE:HOST=URL",
                          "e.g. nomad-dc1:node-3=https://10.0.0.13/redfish/v1/Systems/1")
        key = (m.group(1), m.group(2))
        if key in out:
            raise invalid("host_power.bmcs", f"host {key[0]}:{key[1]} is listed twice")
        out[key] = m.group(3)
    return out


# -- a BMC --

class RedfishBMC:
    """One host's Redfish ComputerSystem through sushy: ``power_state()`` and ``reset(type)``.

    Every failure is a :class:`BMCUnreachable` (no answer) or :class:`BMCRefused` (an error
    answer), with the URL in the message. The sushy root is made on first use and again after a
    connection failure (a BMC that restarted)."""

    def __init__(self, url: str, username: str | None = None, password: str | None = None,
                 verify: bool = True, auth: str = "auto", timeout: float = 10.0):
        m = re.match(r"^(https?://[^/]+)(/redfish/v1)(/Systems/[^/]+)/?$", url or "")
        if not m:
            raise invalid("host_power.bmcs", f"{url!r} is not a Redfish system URL",
                          "e.g. https://10.0.0.13/redfish/v1/Systems/1")
        self.url = url
        self.base, self.system_path = m.group(1), m.group(2) + m.group(3)
        self.username, self.password = username, password
        self.verify, self.auth, self.timeout = verify, auth, float(timeout)
        self._root = None
        self._lock = threading.Lock()

    def _system(self):
        import sushy  # lazy: only host power control needs sushy
        from sushy import auth as sauth

        if self._root is None:
            a = ({"auto": sauth.SessionOrBasicAuth, "basic": sauth.BasicAuth,
                  "session": sauth.SessionAuth}[self.auth](self.username, self.password)
                 if self.username else None)
            self._root = sushy.Sushy(self.base, auth=a, verify=self.verify,
                                     read_timeout=self.timeout, connect_timeout=self.timeout,
                                     server_side_retries=0)
        return self._root.get_system(self.system_path)

    def _call(self, what: str, fn):
        import requests
        from sushy import exceptions as sexc

        with self._lock:
            try:
                return fn(self._system())
            except (sexc.ConnectionError, requests.RequestException, OSError) as e:
                self._root = None
                raise BMCUnreachable(f"BMC {self.url} did not answer ({what}): "
                                     f"{type(e).__name__}: {_short(e)}") from None
            except sexc.SushyError as e:
                raise BMCRefused(f"BMC {self.url} refused {what}: {_short(e)}") from None

    def power_state(self) -> str:
        """The system's PowerState: On, Off, PoweringOn, PoweringOff (raises if it has none)."""
        def read(system):
            system.refresh(force=True)
            return system.power_state
        state = self._call("reading PowerState", read)
        if not state:
            raise BMCRefused(f"BMC {self.url} reports no PowerState")
        return _power_name(state)

    def reset(self, reset_type: str) -> None:
        """POST ComputerSystem.Reset with ``reset_type`` (On, GracefulShutdown, ForceOff)."""
        import sushy

        value = sushy.ResetType(reset_type)     # sushy 5 takes its enum, not the string
        self._call(f"Reset {reset_type}", lambda system: system.reset_system(value))


def _power_name(state) -> str:
    """sushy's power state (an enum in sushy 5, a string before) as Redfish spells it."""
    v = getattr(state, "value", state)
    return {"on": POWER_ON, "off": POWER_OFF, "powering on": "PoweringOn",
            "powering off": "PoweringOff"}.get(str(v).lower(), str(v))


def _short(e) -> str:
    return str(e).strip().replace("\n", " ")[:300]


# -- the manager --

@dataclasses.dataclass
class HostPowerView:
    """A host's power record as the CLI and tests see it."""

    zone: str
    host: str
    state: str
    in_service: bool
    power: str | None          # the BMC's last PowerState (None: never read or unknown)
    error: str | None
    since: float
    bmc: str | None
    detail: dict

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class HostPower:
    """Power states of the hosts with a BMC, and the actions between them (module doc).

    ``zones``: name -> zone adapter (drain hooks: ``set_host_eligible``, ``drain_host``,
    ``host_ready``, see :class:`fluidvim.common.zonetypes.ZoneAdapter`); ``registry``: the slot
    registry (free slots, sessions of a draining host's VNFs); ``marginal``: the placement's
    :class:`~.power.HostMarginalPower` (power models of the plan); ``launcher``: ``(zone name,
    host, service name) -> instance`` that starts one instance of a service on a host just woken
    for it (None: waking only). ``bmc_factory(url)`` makes a BMC client (tests may pass another
    Redfish client; production: :class:`RedfishBMC` with the [host_power] credentials)."""

    def __init__(self, conf: cfg.ConfigOpts, store, zones: dict, registry, *, marginal=None,
                 launcher=None, bmc_factory=None, clock=time.time, sleep=time.sleep):
        register_opts(conf)
        self.conf = conf
        self.o = conf.host_power
        self.store, self.zones, self.registry = store, zones, registry
        self.marginal, self.launcher = marginal, launcher
        self.clock, self.sleep = clock, sleep
        self.urls = parse_bmcs(self.o.bmcs)
        for zone, host in self.urls:
            if zone not in zones:
                raise invalid("host_power.bmcs", f"zone {zone!r} of host {host!r} is not a zone "
                              f"of this orchestrator ({', '.join(sorted(zones)) or 'none'})")
        o = self.o
        self.bmc_factory = bmc_factory or (lambda url: RedfishBMC(
            url, o.username, o.password, o.verify, o.auth, o.bmc_timeout))
        self._bmcs: dict = {}
        self._locks: dict = collections.defaultdict(threading.Lock)   # (zone, host) -> action
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy: set = set()                        # hosts an action runs on (this process)
        self._samples: dict = {}                       # service -> deque of demand.Sample
        self._short_peak = None                        # power.ShortfallPeak over a boot
        self._persist = None                           # power.WakePersist (wake_ahead_rounds)
        self._counts: collections.deque = collections.deque()   # (t, live instances)
        self._slots_total: dict = {}                   # instance -> its slots: fleet(), busy()
        self._busy_lock = threading.Lock()
        from .power.moving import Moves
        self.moves = Moves(store, zones, registry, launcher, bound_s=self.o.session_bound,
                           note=self._note_moves, clock=clock)

    # -- records --

    def bmc(self, zone: str, host: str):
        key = (zone, host)
        if key not in self.urls:
            raise NotFound(f"host: {zone}:{host} has no BMC; add it to [host_power] bmcs "
                           "(ZONE:HOST=URL)", field="host")
        if key not in self._bmcs:
            self._bmcs[key] = self.bmc_factory(self.urls[key])
        return self._bmcs[key]

    def view(self, zone: str, host: str) -> HostPowerView:
        row = self.store.host_power_row(zone, host)
        if row is None:
            return HostPowerView(zone, host, ON, True, None, None, 0.0,
                                 self.urls.get((zone, host)), {})
        return HostPowerView(zone, host, row.state, row.in_service, row.power, row.error,
                             row.since, self.urls.get((zone, host)), row.detail)

    def views(self) -> list[HostPowerView]:
        """Every host with a BMC or a record, by zone and name."""
        keys = set(self.urls) | {(r.zone, r.host) for r in self.store.host_power_rows()}
        return [self.view(z, h) for z, h in sorted(keys)]

    def state(self, zone: str, host: str) -> str:
        return self.view(zone, host).state

    def _set(self, zone: str, host: str, state: str, *, in_service: bool, power=..., error=None,
             **detail) -> HostPowerView:
        """Move a host to ``state`` (checked against :data:`TRANSITIONS`) and record it."""
        old = self.view(zone, host)
        if state != old.state:
            check_transition(old.state, state, f"{zone}:{host}")
        # a new state starts from what a record keeps (_keep); the same state adds to it
        det = {**(old.detail if state == old.state else _keep(old.detail)), **detail}
        self.store.set_host_power(zone, host, state, in_service=in_service,
                                  power=old.power if power is ... else power, error=error,
                                  detail=det, since=old.since if state == old.state
                                  else self.clock())
        if state != old.state:
            LOG.info("host %s:%s power %s -> %s%s", zone, host, old.state, state,
                     f": {error}" if error else "")
        return self.view(zone, host)

    def unavailable(self) -> dict[str, str]:
        """{"zone/host": reason} of the hosts that take no placement and offer no slots."""
        out = {}
        for r in self.store.host_power_rows():
            if r.in_service:
                continue
            why = {OFF: "powered off", DRAINING: "draining (to be powered off)",
                   POWERING_OFF: "powering off", WAKING: "waking (powered on, not back yet)",
                   FAILED: "host power failed", UNREACHABLE: "BMC unreachable"}.get(r.state,
                                                                                    r.state)
            out[f"{r.zone}/{r.host}"] = why + (f": {r.error}" if r.error else "")
        return out

    # -- reading the BMC --

    def read_power(self, zone: str, host: str) -> str:
        """The BMC's PowerState now; on no answer the host goes ``bmc_unreachable`` (skipped,
        in service as it was) and :class:`BMCUnreachable` is raised."""
        try:
            return self.bmc(zone, host).power_state()
        except BMCUnreachable as e:
            v = self.view(zone, host)
            self._set(zone, host, UNREACHABLE, in_service=v.in_service, error=str(e),
                      power=v.power)
            raise

    # -- power off --

    def power_off(self, zone: str, host: str, reason: str = "asked") -> HostPowerView:
        """on -> draining -> powering_off -> off, sessions first (module doc). Blocks until done.
        A BMC that does not answer or refuses: the host is put back in service (if it had left
        it) and ends ``bmc_unreachable`` / ``failed``; the error is raised."""
        with self._action(zone, host):
            v = self.view(zone, host)
            if v.state == OFF:
                return v
            if v.state not in (ON, DRAINING, POWERING_OFF, FAILED):
                raise HostPowerError(f"host {zone}:{host} is {v.state}: it cannot be powered off "
                                     "now")
            if v.state in (ON, FAILED):
                self._remember(zone, host)
                power = self.read_power(zone, host)          # BMC answers before we drain
                if power == POWER_OFF:
                    return self._set(zone, host, OFF, in_service=False, power=POWER_OFF)
                v = self._set(zone, host, DRAINING, in_service=False, power=power,
                              held_at=self.clock(), reason=reason)
            try:
                if v.state == DRAINING:
                    self._drain(zone, host, v)
                    v = self._set(zone, host, POWERING_OFF, in_service=False,
                                  shutdown_at=self.clock())
                return self._shutdown(zone, host, v)
            except BMCUnreachable as e:
                return self._undo_off(zone, host, UNREACHABLE, e)
            except (HostPowerError, ZoneError) as e:
                return self._undo_off(zone, host, FAILED, e)

    def _undo_off(self, zone, host, state, exc):
        """A power-off failed: if the BMC still says On (or cannot say), the host goes back in
        service (eligible in its zone, slots offered again) - nothing is lost - and is skipped
        from now on (``state`` with the error)."""
        power = None
        try:
            power = self.bmc(zone, host).power_state()
        except HostPowerError:
            pass
        # on for sure: the BMC says so, or it never got an off request
        sent = self.view(zone, host).detail.get("graceful_sent")
        back = power == POWER_ON or (power is None and not sent)
        if back:
            try:
                self._zone(zone).set_host_eligible(host, True)
            except (ZoneError, NotImplementedError) as e:
                LOG.warning("host %s:%s: cannot make it eligible again: %s", zone, host, e)
        self._set(zone, host, state, in_service=back, power=power, error=str(exc))
        raise exc

    def _zone(self, zone):
        if zone not in self.zones:
            raise HostPowerError(f"zone {zone!r} is gone")
        return self.zones[zone]

    def _drain(self, zone: str, host: str, v: HostPowerView) -> None:
        """Sessions first: ineligible, wait for the VNFs' sessions (or the bound), move them."""
        z = self._zone(zone)
        insts = [i for i in z.instances() if i.host == host and i.status in istates.LIVE]
        if insts and not getattr(z, "can_drain", False):
            raise HostPowerError(f"host {zone}:{host} runs {len(insts)} instance(s) and zone "
                                 f"{zone} ({z.kind}) cannot move them")
        if getattr(z, "can_drain", False):
            z.set_host_eligible(host, False)
        held_at = float(v.detail.get("held_at") or self.clock())
        bound = held_at + self.o.session_bound
        waiting = {i.id: i for i in insts}
        ended, cut = [], []
        while waiting:
            for iid, inst in list(waiting.items()):
                used = z.instance_sessions(iid)          # the VNF's own count, if known
                if self.registry.sessions_done(iid, inst.slots_total, since=held_at, used=used):
                    ended.append(iid)
                    waiting.pop(iid)
            if not waiting:
                break
            if self.clock() >= bound:
                cut = sorted(waiting)
                LOG.warning("host %s:%s: session bound %.0f s passed; moving %s with sessions",
                            zone, host, self.o.session_bound, cut)
                break
            self.sleep(self.o.poll_interval)
        self._set(zone, host, DRAINING, in_service=False, sessions_ended=sorted(ended),
                  bound_passed=cut)
        if insts:
            z.drain_host(host, self.o.drain_timeout)
            moved = {i.id: i.host for i in z.instances() if i.id in {x.id for x in insts}}
            for iid, new_host in moved.items():
                if new_host and new_host != host:
                    self.store.set_instance_host(iid, new_host)
            self._set(zone, host, DRAINING, in_service=False, moved=moved)

    def _wait_power(self, zone, host, want: str, deadline: float) -> str | None:
        power = None
        while True:
            power = self.bmc(zone, host).power_state()
            if power == want:
                return power
            if self.clock() >= deadline:
                return power
            self.sleep(self.o.poll_interval)

    def _shutdown(self, zone: str, host: str, v: HostPowerView) -> HostPowerView:
        bmc = self.bmc(zone, host)
        start = float(v.detail.get("shutdown_at") or self.clock())
        if not v.detail.get("graceful_sent"):
            if bmc.power_state() != POWER_OFF:
                bmc.reset(RESET_GRACEFUL)
            v = self._set(zone, host, POWERING_OFF, in_service=False, graceful_sent=True)
        power = self._wait_power(zone, host, POWER_OFF, start + self.o.graceful_timeout)
        if power != POWER_OFF:
            LOG.warning("host %s:%s still %s %.0f s after GracefulShutdown: ForceOff", zone, host,
                        power, self.o.graceful_timeout)
            bmc.reset(RESET_FORCE_OFF)
            self._set(zone, host, POWERING_OFF, in_service=False, force_sent=True)
            power = self._wait_power(zone, host, POWER_OFF, self.clock() + self.o.off_timeout)
            if power != POWER_OFF:
                raise HostPowerError(f"host {zone}:{host}: the BMC still reports {power} "
                                     f"{self.o.off_timeout:g} s after ForceOff")
        return self._set(zone, host, OFF, in_service=False, power=POWER_OFF,
                         off_at=self.clock())

    # -- wake --

    def wake(self, zone: str, host: str, reason: str = "asked") -> HostPowerView:
        """off -> waking -> on: BMC On, wait for PowerState On and for the zone to list the host,
        make it eligible. Refused, still Off, or not back within ``wake_timeout``: ``failed``
        (never in service; the error is raised); no answer: ``bmc_unreachable``."""
        with self._action(zone, host):
            v = self.view(zone, host)
            if v.state == ON:
                return v
            if v.state not in (OFF, WAKING, FAILED, UNREACHABLE):
                raise HostPowerError(f"host {zone}:{host} is {v.state}: it cannot be woken now")
            if v.state != WAKING:
                v = self._set(zone, host, WAKING, in_service=False, wake_at=self.clock(),
                              reason=reason)
            deadline = float(v.detail.get("wake_at") or self.clock()) + self.o.wake_timeout
            bmc = self.bmc(zone, host)
            try:
                power = bmc.power_state()
                if power != POWER_ON:
                    bmc.reset(RESET_ON)
                power = self._wait_power(zone, host, POWER_ON, deadline)
                if power != POWER_ON:
                    raise HostPowerError(f"host {zone}:{host} failed to wake: the BMC still "
                                         f"reports {power} {self.o.wake_timeout:g} s after On")
                self._set(zone, host, WAKING, in_service=False, power=POWER_ON)
                z = self._zone(zone)
                while not z.host_ready(host):
                    if self.clock() >= deadline:
                        raise HostPowerError(
                            f"host {zone}:{host} failed to wake: powered on but zone {zone} does "
                            f"not list it {self.o.wake_timeout:g} s after On")
                    self.sleep(self.o.poll_interval)
                if getattr(z, "can_drain", False):
                    z.set_host_eligible(host, True)
            except BMCUnreachable as e:
                self._set(zone, host, UNREACHABLE, in_service=False, error=str(e), power=None)
                raise
            except (HostPowerError, ZoneError) as e:
                try:
                    power = bmc.power_state()
                except HostPowerError:
                    power = None
                self._set(zone, host, FAILED, in_service=False, error=str(e), power=power)
                raise HostPowerError(str(e)) from None
            return self._set(zone, host, ON, in_service=True, power=POWER_ON,
                             on_at=self.clock(), reason=reason)

    # -- the loop --

    def _action(self, zone, host):
        mgr = self

        class _Held:
            def __enter__(self):
                mgr._locks[(zone, host)].acquire()
                with mgr._busy_lock:
                    mgr._busy.add((zone, host))

            def __exit__(self, *exc):
                with mgr._busy_lock:
                    mgr._busy.discard((zone, host))
                mgr._locks[(zone, host)].release()
        return _Held()

    def recheck(self) -> dict:
        """Ask the BMC of every unreachable host (and of failed ones after
        ``failed_retry_after``); one that answers goes back to what it reports."""
        out = {}
        now = self.clock()
        for v in self.views():
            retry = (v.state == UNREACHABLE or v.state == FAILED and self.o.failed_retry_after > 0
                     and now - v.since >= self.o.failed_retry_after)
            if not retry or (v.zone, v.host) in self._busy:
                continue
            try:
                power = self.bmc(v.zone, v.host).power_state()
            except HostPowerError as e:
                self._set(v.zone, v.host, v.state, in_service=v.in_service, error=str(e))
                out[f"{v.zone}/{v.host}"] = v.state
                continue
            if power == POWER_OFF:
                new = self._set(v.zone, v.host, OFF, in_service=False, power=power)
            elif v.in_service:
                new = self._set(v.zone, v.host, ON, in_service=True, power=power)
            else:           # on but out of service (a wake that lost its BMC): finish the wake
                new = self._set(v.zone, v.host, WAKING, in_service=False, power=power,
                                wake_at=now)
            out[f"{v.zone}/{v.host}"] = new.state
        return out

    def resume(self) -> list:
        """Continue the actions a stopped orchestrator left (draining, powering_off, waking,
        rebalancing moves: their VNFs are withdrawn again)."""
        done = []
        for v in self.views():
            if v.detail.get("rebalancing"):
                self.moves.load(v.detail["rebalancing"])
            if v.state not in IN_PROGRESS:
                continue
            try:
                if v.state == WAKING:
                    self.wake(v.zone, v.host, reason="resumed")
                else:
                    self.power_off(v.zone, v.host, reason="resumed")
            except HostPowerError as e:
                LOG.warning("resuming %s:%s: %s", v.zone, v.host, e)
            done.append((v.zone, v.host, self.state(v.zone, v.host)))
        return done

    def fleet(self):
        """(FleetHost list of the hosts in service, {zone/host: (zone, HostInfo)}, skipped)."""
        from .power import FleetHost, HostMarginalPower

        marginal = self.marginal or HostMarginalPower(self.conf, vnf_vcpus=self.o.vnf_vcpus)
        out, infos, skipped = [], {}, {}
        self._slots_total = {}                  # the instances of this fleet (busy())
        unavailable = self.unavailable()
        for zname, z in sorted(self.zones.items()):
            try:
                hosts = z.hosts()
                insts = [i for i in z.instances() if i.status in istates.LIVE]
            except Exception as e:  # noqa: BLE001 - a zone that is down is left out
                skipped[zname] = f"zone unavailable: {e}"
                continue
            for h in hosts:
                key = f"{zname}/{h.name}"
                if key in unavailable:
                    continue
                model = marginal.model(h)
                if model is None:
                    skipped[key] = "no power model (set its power_system_id)"
                    continue
                load = {i.id: self.o.vnf_vcpus for i in insts if i.host == h.name}
                self._slots_total.update((i.id, int(i.slots_total or 0)) for i in insts
                                         if i.host == h.name)
                out.append(FleetHost(name=key, model=model, capacity=marginal.cpus(h, model),
                                     load=load))
                infos[key] = (zname, h)
        return out, infos, skipped

    def busy(self, fleet, always: bool = False) -> dict | None:
        """{instance: vCPUs its sessions keep busy} of the VNFs on ``fleet`` whose slots the
        registry reports (``vnf_vcpus`` x used / total slots): what ``consolidate_busy`` prices
        the plan by (None: off, unless ``always``)."""
        if not (self.o.consolidate_busy or always):
            return None
        free: dict = {}
        for r in self.registry.reports():
            free[r.instance] = min(free.get(r.instance, r.slots), r.slots)
        out = {}
        for h in fleet:
            for iid in h.load:
                total = self._slots_total.get(iid, 0)
                if iid in free and total > 0:
                    used = min(total, max(0, total - free[iid]))
                    out[iid] = self.o.vnf_vcpus * used / total
        return out

    def _busy_load(self, fleet):
        """What ``rebalance_busy`` prices the rebalancing move by (None: off, or sessions not
        routed by the hosts' dynamic watts per thread): each host's busy threads (the slot
        registry's, :meth:`busy`; a VNF without a report: all busy, as for ``consolidate_busy``)
        and the resolver's rank of it (:func:`.power.chain.dynamic_per_thread`)."""
        from .power.chain import dynamic_per_thread
        from .power.rebalance import BusyLoad

        route = self.conf.orchestrator.session_route if "orchestrator" in self.conf else None
        if not self.o.rebalance_busy or route != "efficient":
            return None
        busy = self.busy(fleet, always=True)
        vcpus = self.o.vnf_vcpus
        return BusyLoad({h.name: sum(busy.get(i, vcpus) for i in h.load) for h in fleet},
                        {h.name: dynamic_per_thread(h.model, h.capacity) for h in fleet})

    def plan(self, ahead=None) -> dict:
        """The consolidation plan now: which hosts in service can be emptied and powered off
        (with a BMC: else listed but kept), the moves, the watts before/after and per day.
        Hosts that hold VNFs are emptied only when :func:`.power.consolidation_gate` lets them
        (demand not growing, no forecast shortfall in ``ahead``, no host waking: ``held`` says
        why not), and only for a saving that outweighs waking them again."""
        from .power import Fill, consolidation_gate, consolidation_plan, rebalance_moves, unit_watts

        fleet, infos, skipped = self.fleet()
        now, n = self.clock(), sum(len(h.load) for h in fleet)
        self._counts.append((now, n))
        while self._counts and self._counts[0][0] < now - self.o.consolidate_trend_s:
            self._counts.popleft()
        held = consolidation_gate(ahead["shortfall"] if ahead else 0,
                                  waking=any(v.state == WAKING for v in self.views()),
                                  growing=self._counts[0][1] < n)
        boot = self.o.wake_ahead_s
        # the receivers' fill limits are against the best host out of service to wake instead
        # (what bench/energy's placement fills against), not the best host in service
        wake_w = min((unit_watts(h.model, h.capacity) for h in self._asleep()), default=None)
        p = consolidation_plan(fleet, u_low=0.0 if held else self.o.consolidate_u_low,
                               fill=Fill(self.o.vnf_vcpus, wake_w, busy=self.busy(fleet)),
                               horizon_s=self.o.consolidate_horizon_s or None,
                               wake_j=(lambda fh: boot * fh.model.watts(1.0)) if boot > 0 else None)
        # single VNFs from a dear host to a cheaper one that stays in service (power.rebalance:
        # what bench/energy's fluidvim-consolidate moves); the round carries them out sessions
        # first (power.moving: the VNF withdrawn from the slot registry, its replacement
        # launched on the host named, the VNF terminated once its sessions ended). VNFs moving,
        # and replacements started within consolidate_trend_s, are not moved (again).
        emptied = set(p.sleep)
        rebalance = rebalance_moves(
            [h for h in fleet if h.name not in emptied], vnf=self.o.vnf_vcpus,
            max_moves=max(0, self.o.rebalance_moves - len(self.moves.moving)),
            min_gain_w=self.o.rebalance_gain_w,
            pays=(self.o.consolidate_horizon_s, 0.0) if self.o.consolidate_horizon_s else None,
            fill=Fill(self.o.vnf_vcpus, wake_w),
            held=self.moves.held(now - self.o.consolidate_trend_s),
            busy=self._busy_load(fleet))
        empty = [h.name for h in fleet if not h.load]
        per_host = {h.name: {"watts": round(h.watts(), 1), "u": round(h.u, 3),
                             "instances": sorted(h.load), "capacity": h.capacity}
                    for h in fleet}
        candidates = []
        for key in empty + [s for s in p.sleep if s not in empty]:
            zname, h = infos[key]
            candidates.append({"host": key, "empty": key in empty,
                               "bmc": (zname, h.name) in self.urls,
                               "idle_watts": round(next(f for f in fleet if f.name == key)
                                                   .model.watts(0.0), 1)})
        idle_empty = sum(c["idle_watts"] for c in candidates if c["empty"])
        saved = p.saved_watts + idle_empty
        return {"hosts": per_host, "power_off": candidates,
                "moves": [dataclasses.asdict(m) for m in p.migrations],
                "rebalance": [dataclasses.asdict(m) for m in rebalance],
                "watts_before": round(p.watts_before, 1),
                "watts_after": round(p.watts_before - saved, 1),
                "saved_watts": round(saved, 1), "saved_kwh_per_day": round(saved * 24 / 1000, 3),
                "u_low": self.o.consolidate_u_low, "skipped": skipped, "held": held,
                "off": sorted(k for k, r in self.unavailable().items()),
                **self.moves.status()}

    def shortage(self) -> list[tuple[str, int]]:
        """(service, free slots) of the services whose free slots on the hosts in service are
        below ``wake_free_slots`` (and that have instances: a service nobody runs needs none)."""
        out = []
        running = {i.service for i in self.store.instances()}
        for svc in self.store.services():
            if svc.name not in running:
                continue
            free = sum(self.registry.aggregate(svc.name, "host").values())
            if free < self.o.wake_free_slots:
                out.append((svc.name, free))
        return out

    def _room(self, fleet) -> bool:
        return any(h.fits(self.o.vnf_vcpus) for h in fleet)

    def _room_instances(self, fleet) -> int:
        """Instances the hosts in service still take (``vnf_vcpus`` each)."""
        d = self.o.vnf_vcpus
        return sum(int(max(0.0, h.u_max * h.capacity - h.used) / d + 1e-9) for h in fleet)

    def ahead(self, fleet=None) -> dict | None:
        """The wake-ahead forecast (``wake_ahead_s``): per service with instances, a slot
        sample now (free slots from the registry, total from its live instances on hosts in
        service), and the instances its trend says it will want ``wake_ahead_s`` from now
        (:func:`.power.forecast_instances`); the shortfall beyond the instances it has, the
        room of the hosts in service and the off hosts :func:`.power.wake_ahead` would wake
        (None: ``wake_ahead_s`` is 0)."""
        from .demand import Sample
        from .power import ShortfallPeak, forecast_instances, wake_ahead

        if self.o.wake_ahead_s <= 0:
            return None
        now = self.clock()
        if fleet is None:
            fleet = self.fleet()[0]
        away = self.unavailable()
        keep = self.o.forecast_window_s + 2 * max(self.o.interval, 1.0)
        by_svc: dict = collections.defaultdict(list)
        for i in self.store.instances():
            if f"{i.zone}/{i.host}" not in away:
                by_svc[i.service].append(i)
        services, short = {}, 0
        for svc in self.store.services():
            insts = by_svc.get(svc.name)
            if not insts:
                self._samples.pop(svc.name, None)
                continue
            total = sum(int(i.slots_total or 0) for i in insts)
            per = max(int(i.slots_total or 0) for i in insts) or int(svc.profile.get("slots") or 0)
            if per <= 0:
                continue
            free = min(total, sum(self.registry.aggregate(svc.name, "host").values()))
            h = self._samples.setdefault(svc.name, collections.deque())
            h.append(Sample(now, free, total))
            while h and now - h[0].t > keep:
                h.popleft()
            want = forecast_instances(list(h), now, self.o.wake_ahead_s, per,
                                      window_s=self.o.forecast_window_s,
                                      lead_s=self.o.interval, headroom=self.o.wake_free_slots)
            services[svc.name] = {"used": total - free, "instances": len(insts), "want": want,
                                  "per": per}
            short += max(0, want - len(insts))
        room_up = self._room_instances(fleet)
        room = room_up + self._waking_room()
        asleep = self._asleep()
        # the scaler's next step (its headroom in instances, plus one), kept beyond the
        # shortfall by wake_ahead and hosts_to_keep alike (bench/energy runs the same rule)
        keep = max((self.o.wake_free_slots // s["per"] + 1 for s in services.values()),
                   default=0)
        wake = wake_ahead(short, room, asleep, keep=keep,
                          fill=lambda fh: int(fh.capacity / self.o.vnf_vcpus + 1e-9))
        if self._short_peak is None or self._short_peak.window_s != self.o.wake_ahead_s:
            self._short_peak = ShortfallPeak(self.o.wake_ahead_s)
        peak = self._short_peak.note(now, short)
        for v in services.values():
            del v["per"]
        return {"services": services, "shortfall": short, "room": room, "wake": wake,
                "ahead_s": self.o.wake_ahead_s, "keep": keep, "peak": peak, "room_up": room_up}

    def _wake_all(self, keys, reason: str) -> dict:
        """Wake the hosts ``keys`` (``zone/host``) at once - each boot overlaps the others', so
        a ramp that needs several hosts within one boot gets them all one boot later, not one
        boot each (a :meth:`wake` waits for the host to be back: one after the other, the
        ``n``-th came ``n`` boots late; bench/energy wakes every host :func:`.power.wake_ahead`
        names). Returns ``{zone/host: "on" | the error}``; a host that fails to wake does not
        stop the others."""
        out: dict = {}

        def one(key):
            zone, host = key.split("/", 1)
            try:
                out[key] = self.wake(zone, host, reason=reason).state
            except HostPowerError as e:
                out[key] = str(e)
        if len(keys) == 1:
            one(keys[0])
            return out
        threads = [threading.Thread(target=one, args=(k,), name=f"host-power-wake-{k}",
                                    daemon=True) for k in keys]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def _waking_room(self) -> int:
        """Instances the hosts already waking will take once up (their cpus, ``vnf_vcpus``
        each): a round that runs while another wakes hosts (:meth:`demand`) counts them."""
        d = self.o.vnf_vcpus
        return sum(int(float(v.detail.get("cpus") or 0) / d + 1e-9) for v in self.views()
                   if v.state == WAKING)

    def _asleep(self) -> list:
        """FleetHosts of the hosts that are off with a BMC and a known curve (:meth:`_remember`
        kept it), named ``zone/host``."""
        from .power import FleetHost, library

        out = []
        for v in self.views():
            if v.state != OFF or (v.zone, v.host) in self._busy or (v.zone, v.host) not in \
                    self.urls:
                continue
            sid = v.detail.get("power_system_id")
            try:
                model = library(self.conf.power.specpower_csv if "power" in self.conf else None
                                ).curve(sid) if sid else None
            except Exception:  # noqa: BLE001 - an unknown curve: wake it last (shortage path)
                model = None
            if model is None:
                continue
            cpus = v.detail.get("cpus") or (getattr(model, "info", None) or {}).get("threads") or 1
            out.append(FleetHost(name=f"{v.zone}/{v.host}", model=model, capacity=float(cpus)))
        return out

    def _to_wake(self) -> tuple[str, str] | None:
        """The host to wake: off, with a BMC, least idle watts first (its curve, if known)."""
        from .power import library

        cands = []
        for v in self.views():
            if v.state != OFF or (v.zone, v.host) in self._busy:
                continue
            w = math.inf
            sid = v.detail.get("power_system_id")
            if sid:
                try:
                    w = library(self.conf.power.specpower_csv if "power" in self.conf else None
                                ).curve(sid).watts(0.0)
                except Exception:  # noqa: BLE001 - an unknown curve sorts last
                    w = math.inf
            cands.append((w, v.zone, v.host))
        return min(cands)[1:] if cands else None

    def round(self) -> dict:
        """One round of the loop: recheck BMCs; a shortage wakes one host (and starts an instance
        of the short service on it); else a forecast shortage (:meth:`ahead`: the instances the
        slot trends want ``wake_ahead_s`` from now exceed the room in service) wakes the hosts
        :func:`.power.wake_ahead` names, all at once (``did["woken"]``: each one's outcome);
        else, with ``consolidate``, power off one host of the plan (empty ones first, never
        below ``min_hosts_on`` per zone, never one whose room the forecast needs). Returns what
        it did."""
        from .power import hosts_to_keep

        did: dict = {"recheck": self.recheck()}
        finished = self.moves.advance()           # moves whose VNF's sessions ended
        if finished:
            did["rebalanced"] = [m.to_dict() for m in finished]
        short = self.shortage()
        fleet, infos, _ = self.fleet()
        ahead = self.ahead(fleet)
        if ahead is not None:
            if self._persist is None or self._persist.rounds != self.o.wake_ahead_rounds:
                from .power import WakePersist
                self._persist = WakePersist(self.o.wake_ahead_rounds)
            named = ahead["wake"]
            ahead["wake"] = self._persist.note([] if short else named)
            if named and not ahead["wake"] and not short:
                ahead["waiting"] = {"named": named, "rounds": self._persist.seen,
                                    "of": self._persist.rounds}
        if not short and ahead and ahead["wake"]:
            did["ahead"] = ahead
            did["woken"] = self._wake_all(ahead["wake"], reason=(
                f"ahead: {ahead['shortfall']} more instance(s) within {ahead['ahead_s']:g} s, "
                f"room for {ahead['room']}"))
            first = ahead["wake"][0]
            did["wake"] = first if did["woken"][first] == ON else \
                f"{first} failed: {did['woken'][first]}"
            return did
        if ahead and ahead["shortfall"] > ahead["room"]:
            did["ahead"] = ahead                   # short ahead, nothing to wake: shown
        if short:
            did["shortage"] = short
            if self._room(fleet):
                did["wake"] = None
                did["why"] = "an awake host has room for another instance"
                return did
            target = self._to_wake()
            if target is None:
                did["wake"] = None
                did["why"] = "no host to wake (none off with a BMC)"
                return did
            zone, host = target
            try:
                self.wake(zone, host, reason=f"{short[0][0]}: {short[0][1]} free slot(s)")
            except HostPowerError as e:
                did["wake"] = f"{zone}/{host} failed: {e}"
                return did
            did["wake"] = f"{zone}/{host}"
            if self.launcher is not None:
                try:
                    inst = self.launcher(zone, host, short[0][0])
                    did["launched"] = getattr(inst, "id", None)
                except Exception as e:  # noqa: BLE001 - the host is on; placement may use it
                    LOG.warning("host %s:%s woken, launching %s there failed: %s", zone, host,
                                short[0][0], e)
                    did["launched"] = f"failed: {e}"
            return did
        if not self.o.consolidate:
            return did
        plan = self.plan(ahead)
        per_zone = collections.Counter(infos[k][0] for k in infos)
        for c in plan["power_off"]:
            zname, h = infos[c["host"]]
            if not c["bmc"] or (zname, h.name) in self._busy or per_zone[zname] <= \
                    self.o.min_hosts_on:
                continue
            if ahead is not None:
                # keep a host the forecast needs (power.hosts_to_keep, bench/energy's rule):
                # the room left without it - its own, and its VNFs go into the others' - must
                # cover the peak shortfall of the last boot plus the scaler's next step
                ph = plan["hosts"][c["host"]]
                its = int(max(0.0, ph["capacity"] - len(ph["instances"]) * self.o.vnf_vcpus)
                          / self.o.vnf_vcpus + 1e-9) + len(ph["instances"])
                if hosts_to_keep(ahead["peak"], ahead["room"], ahead["room_up"],
                                 [(c["host"], its)], keep=ahead["keep"]):
                    did.setdefault("kept", {})[c["host"]] = (
                        f"the forecast needs it: {ahead['peak']:g} more instance(s) within "
                        f"{ahead['ahead_s']:g} s and the scaler's next step ({ahead['keep']}), "
                        f"room {ahead['room']} ({ahead['room_up']} in service)")
                    continue
            try:
                self.power_off(zname, h.name, reason="consolidation: " + (
                    "empty" if c["empty"] else f"plan saves {plan['saved_watts']} W"))
                did["power_off"] = c["host"]
            except HostPowerError as e:
                did["power_off"] = f"{c['host']} failed: {e}"
            break
        if "power_off" not in did and plan["rebalance"] and self.launcher is not None:
            did["rebalance"] = self._rebalance(plan["rebalance"])
        return did

    def _rebalance(self, moves) -> list:
        """Start the plan's rebalancing moves (:mod:`.power.moving`, sessions first); a move
        that cannot start is logged and listed with its error (its VNF serves on)."""
        from .power.moving import MoveError

        out = []
        for m in moves:
            try:
                out.append(self.moves.start(m["vnf"], m["dst"], reason=(
                    f"rebalance: cheaper on {m['dst']} than on {m['src']}")).to_dict())
            except MoveError as e:
                LOG.warning("rebalancing move %s %s -> %s not started: %s", m["vnf"], m["src"],
                            m["dst"], e)
                out.append({**m, "error": str(e)})
        return out

    def move(self, instance: str, dst: str, reason: str = "asked") -> dict:
        """Start moving ``instance`` to ``dst`` (zone/host), sessions first (what a round does
        with the plan's rebalancing moves); :meth:`round` finishes it. Raises MoveError."""
        return self.moves.start(instance, dst, reason=reason).to_dict()

    def _note_moves(self, zone: str, host: str, moving: list, moved: list) -> None:
        """Keep a source host's moves in its record (``fluidvim power hosts``; resumed)."""
        v = self.view(zone, host)
        self.store.set_host_power(zone, host, v.state, in_service=v.in_service, power=v.power,
                                  error=v.error, since=v.since or self.clock(),
                                  detail={**v.detail, "rebalancing": moving, "rebalanced": moved})

    def _remember(self, zone: str, host: str) -> None:
        """Keep what the zone says of a host about to go off (its power curve and cpus: the
        wake-up order needs them when the zone no longer lists it)."""
        try:
            h = next((x for x in self._zone(zone).hosts() if x.name == host), None)
        except (ZoneError, HostPowerError):
            h = None
        if h is None:
            return
        v = self.view(zone, host)
        self.store.set_host_power(zone, host, v.state, in_service=v.in_service, power=v.power,
                                  error=v.error, since=v.since or self.clock(),
                                  detail={**v.detail, "power_system_id": h.power_system_id,
                                          "cpus": h.labels.get("cpus")})

    def demand(self, service: str, why: str) -> None:
        """Placement of ``service`` was refused: run a round in the background (it wakes a host
        if the slots ran out and no awake host has room)."""
        if self._thread is None and self.o.interval <= 0:
            LOG.info("placement of %s refused (%s); host power loop off: nothing woken",
                     service, why)
            return
        threading.Thread(target=self._safe_round, name="host-power-demand", daemon=True).start()

    def _safe_round(self):
        try:
            return self.round()
        except Exception:  # noqa: BLE001 - the loop goes on
            LOG.exception("host power round failed")
            return None

    def start(self) -> None:
        """Resume unfinished actions, then a round every ``interval`` seconds (0: none)."""
        if self._thread is not None:
            return

        def loop():
            try:
                self.resume()
            except Exception:  # noqa: BLE001
                LOG.exception("host power: resuming failed")
            while not self._stop.wait(self.o.interval):
                self._safe_round()
        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="host-power", daemon=True)
        if self.o.interval > 0:
            self._thread.start()
        else:
            self._thread = None
            threading.Thread(target=self.resume, name="host-power-resume", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, self.o.poll_interval * 2))
            self._thread = None


def _keep(detail: dict) -> dict:
    """What a record keeps from state to state: the host's curve and cpus, the reason, and what
    its last drain did (sessions that ended, those the bound cut, instances moved where)."""
    return {k: detail[k] for k in ("power_system_id", "cpus", "reason", "sessions_ended",
                                   "bound_passed", "moved", "rebalancing", "rebalanced")
            if k in detail}
