# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Host power models, per-VNF power attribution and power-aware placement helpers.

A power model answers ``watts(u)``: the electrical power of a host at CPU utilisation ``u`` (0..1).
Every source has the same interface (:class:`PowerSource`): ``watts(u)``, ``measured_watts()``
(``None`` when the source only models) and ``source`` (its name). The sources, best first:

``rapl``       Intel RAPL through the powercap sysfs (``<root>/intel-rapl:N/energy_uj``), sampled
               over an interval together with ``/proc/stat``, so every measurement is a (u, W) pair.
``redfish``    the BMC's power reading through sushy (``Power`` → ``PowerControl[].PowerConsumedWatts``
               of the system's chassis, else the newer ``EnvironmentMetrics`` → ``PowerWatts.Reading``).
``specpower``  an 11-point SPECpower_ssj2008 curve (0, 10, …, 100 % load), linearly interpolated:
               a row of ``data/specpower_curves.csv`` by ``system_id`` or the host's own 11 points.
``linear``     ``P_idle + (P_max - P_idle) * u``.

A measured source turns its (u, W) observations into ``watts(u)``: with observations at two or more
distinct utilisations it fits a line; with one, it scales its *prior* (the best model source after
it in the chain) through that point; with none it is its prior. :func:`build_chain` tries the
configured sources in order (``[power] sources``) and reports which one won and why each other did
not (:class:`ChainResult`).

Per-VNF attribution (the Kepler / DEEP-mon ratio idea): a VNF is a QEMU process, so its power over
an interval is ``host watts * (VNF CPU time / host busy CPU time)`` from ``/proc/<pid>/stat`` and
``/proc/stat`` (:class:`ProcReader`, :func:`attribute_watts`, :func:`sample_vnf_power`).

Placement: :func:`marginal_watts` (the extra watts of adding load to a host), :func:`pabfd_choose`
(power-aware best-fit decreasing: the host with the least power increase that fits),
:func:`first_fit` / :func:`worst_fit` for comparison and :func:`consolidation_plan` (which hosts can
be emptied onto the others and sleep). ``bench/power.py`` compares them on a fleet drawn from the CSV.
"""

from __future__ import annotations

import abc
import csv
import dataclasses
import functools
import glob
import importlib.resources
import math
import os
import time

from oslo_config import cfg
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

LOAD_POINTS = tuple(range(0, 101, 10))          # SPECpower target loads, percent
CURVE_COLUMNS = tuple(f"w_{p}" for p in LOAD_POINTS)
SOURCES = ("rapl", "redfish", "specpower", "linear")


class PowerError(Exception):
    """A power source cannot be used or a value is invalid; the message says what and how to fix it."""


def _check_u(u: float, what: str = "u") -> float:
    try:
        u = float(u)
    except (TypeError, ValueError):
        raise PowerError(f"{what} must be a number in 0..1, not {u!r}") from None
    if math.isnan(u) or u < 0.0 or u > 1.0:
        raise PowerError(f"{what} must be in 0..1 (CPU utilisation as a fraction), not {u!r}")
    return u


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------

class PowerSource(abc.ABC):
    """One way of knowing a host's power. ``watts(u)`` always works once constructed."""

    source: str = "abstract"

    @abc.abstractmethod
    def watts(self, u: float) -> float:
        """Power (W) at CPU utilisation ``u`` in 0..1."""

    def measured_watts(self) -> float | None:
        """A fresh measurement (W), or None for pure models."""
        return None

    def describe(self) -> str:
        return self.source


class LinearModel(PowerSource):
    """``P_idle + (P_max - P_idle) * u``."""

    source = "linear"

    def __init__(self, idle_w: float, max_w: float):
        if idle_w is None or max_w is None:
            raise PowerError("linear power model needs [power] idle_watts and max_watts")
        idle_w, max_w = float(idle_w), float(max_w)
        if idle_w < 0 or max_w < idle_w:
            raise PowerError(f"linear power model: need 0 <= idle_watts <= max_watts, got "
                             f"idle_watts={idle_w} max_watts={max_w}")
        self.idle_w, self.max_w = idle_w, max_w

    def watts(self, u: float) -> float:
        u = _check_u(u)
        return self.idle_w + (self.max_w - self.idle_w) * u

    def describe(self) -> str:
        return f"linear {self.idle_w:g}-{self.max_w:g} W"


class SpecpowerCurve(PowerSource):
    """An 11-point curve (watts at 0, 10, …, 100 % load), linearly interpolated."""

    source = "specpower"

    def __init__(self, points, system_id: str | None = None, info: dict | None = None):
        try:
            pts = [float(p) for p in points]
        except (TypeError, ValueError):
            raise PowerError(f"specpower curve: points must be 11 numbers (watts at 0,10,..,100 % "
                             f"load), got {points!r}") from None
        if len(pts) != len(LOAD_POINTS):
            raise PowerError(f"specpower curve: need 11 points (watts at 0,10,..,100 % load), "
                             f"got {len(pts)}")
        if any(p < 0 or math.isnan(p) for p in pts):
            raise PowerError(f"specpower curve: watts must be >= 0, got {pts}")
        self.points = tuple(pts)
        self.system_id = system_id
        self.info = info or {}

    @property
    def idle_w(self) -> float:
        return self.points[0]

    @property
    def max_w(self) -> float:
        return self.points[-1]

    def watts(self, u: float) -> float:
        u = _check_u(u)
        x = u * 10.0
        i = min(int(x), 9)
        frac = x - i
        return self.points[i] + (self.points[i + 1] - self.points[i]) * frac

    def describe(self) -> str:
        return f"specpower {self.system_id or 'custom'} {self.idle_w:g}-{self.max_w:g} W"


class SpecpowerLibrary:
    """The curves of a CSV with the columns of ``data/specpower_curves.csv`` (by ``system_id``)."""

    def __init__(self, path: str | None = None):
        self.path = path or default_csv_path()
        try:
            with open(self.path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                missing = [c for c in ("system_id", *CURVE_COLUMNS) if c not in (reader.fieldnames or [])]
                if missing:
                    raise PowerError(f"{self.path}: not a power-curve CSV, missing columns {missing}")
                self.rows = {r["system_id"]: r for r in reader}
        except OSError as e:
            raise PowerError(f"cannot read the power-curve CSV ([power] specpower_csv): {e}") from None

    def __len__(self) -> int:
        return len(self.rows)

    def ids(self) -> list[str]:
        return sorted(self.rows)

    def curve(self, system_id: str) -> SpecpowerCurve:
        row = self.rows.get(system_id)
        if row is None:
            raise PowerError(f"system_id {system_id!r} is not in {self.path} "
                             f"({len(self.rows)} systems, e.g. {', '.join(self.ids()[:3])})")
        info = {k: v for k, v in row.items() if k not in CURVE_COLUMNS}
        return SpecpowerCurve([row[c] for c in CURVE_COLUMNS], system_id=system_id, info=info)


def default_csv_path() -> str:
    return str(importlib.resources.files("fluidvim.orchestrator") / "data" / "specpower_curves.csv")


@functools.lru_cache(maxsize=4)
def library(path: str | None = None) -> SpecpowerLibrary:
    """The (cached) curve library; ``None`` = the packaged CSV."""
    return SpecpowerLibrary(path)


class MeasuredSource(PowerSource):
    """A source that measures (u, W) pairs and models ``watts(u)`` from them (see module doc)."""

    def __init__(self, prior: PowerSource | None = None, max_samples: int = 256):
        self.prior = prior
        self.samples: list[tuple[float, float]] = []
        self.max_samples = max_samples

    def observe(self, u: float, w: float) -> None:
        self.samples.append((_check_u(u), float(w)))
        del self.samples[:-self.max_samples]

    def _fit(self):
        us = [u for u, _ in self.samples]
        if len(self.samples) >= 2 and max(us) - min(us) >= 0.05:
            n = len(self.samples)
            mu = sum(us) / n
            mw = sum(w for _, w in self.samples) / n
            sxx = sum((u - mu) ** 2 for u in us)
            slope = sum((u - mu) * (w - mw) for u, w in self.samples) / sxx
            return mw - slope * mu, slope
        return None

    def watts(self, u: float) -> float:
        u = _check_u(u)
        fit = self._fit()
        if fit is not None:
            return max(0.0, fit[0] + fit[1] * u)
        if self.samples:
            u0, w0 = self.samples[-1]
            if self.prior is None:
                return w0
            p0 = self.prior.watts(u0)
            return self.prior.watts(u) * (w0 / p0) if p0 > 0 else w0
        if self.prior is not None:
            return self.prior.watts(u)
        raise PowerError(f"{self.source}: no measurement yet and no prior model to fall back on")

    def describe(self) -> str:
        basis = ("fit" if self._fit() else f"{len(self.samples)} sample(s)"
                 + (f", prior {self.prior.describe()}" if self.prior else ""))
        return f"{self.source} ({basis})"


class RaplSource(MeasuredSource):
    """Intel RAPL package energy from the powercap sysfs, sampled over ``interval_s``.

    Sums the top-level ``intel-rapl:N`` zones (packages; their ``intel-rapl:N:M`` subzones are
    part of them). Counter wrap-around uses ``max_energy_range_uj``. Host utilisation over the
    same interval comes from ``<proc_root>/stat``.
    """

    source = "rapl"

    def __init__(self, root: str = "/sys/class/powercap", interval_s: float = 1.0,
                 proc_root: str = "/proc", prior: PowerSource | None = None, sleep=time.sleep,
                 clock=time.monotonic):
        super().__init__(prior)
        self.root, self.interval_s = root, float(interval_s)
        self.proc = ProcReader(proc_root)
        self._sleep, self._clock = sleep, clock
        self.zones = []
        for d in sorted(glob.glob(os.path.join(root, "intel-rapl:*"))):
            if os.path.basename(d).count(":") != 1:
                continue                                  # a subzone (core/uncore/dram)
            if os.path.exists(os.path.join(d, "energy_uj")):
                self.zones.append(d)
        if not self.zones:
            raise PowerError(f"no RAPL zones under {root} (no <root>/intel-rapl:N/energy_uj; "
                             "needs an Intel/AMD CPU with the intel_rapl_common module, and root)")
        self.max_range = {}
        for d in self.zones:
            try:
                self.max_range[d] = int(_read(os.path.join(d, "max_energy_range_uj")))
            except (OSError, ValueError):
                self.max_range[d] = None
            self._energy(d)                               # readable now, or fail here

    def _energy(self, d: str) -> int:
        p = os.path.join(d, "energy_uj")
        try:
            return int(_read(p))
        except PermissionError:
            raise PowerError(f"cannot read {p}: permission denied (RAPL energy is root-only since "
                             "Linux 5.10; run as root or chmod the file)") from None
        except (OSError, ValueError) as e:
            raise PowerError(f"cannot read {p}: {e}") from None

    def _delta(self, d: str, e0: int, e1: int) -> int:
        if e1 >= e0:
            return e1 - e0
        mr = self.max_range[d]
        if not mr:
            raise PowerError(f"{d}: energy counter went backwards and max_energy_range_uj is "
                             "unknown, cannot unwrap")
        return mr - e0 + e1

    def snapshot(self) -> tuple[dict, float]:
        """Energy counters of every zone and the clock, for :meth:`watts_between`."""
        return {d: self._energy(d) for d in self.zones}, self._clock()

    def watts_between(self, s0, s1) -> float:
        (e0, t0), (e1, t1) = s0, s1
        if t1 - t0 <= 0:
            raise PowerError("RAPL sample: the clock did not advance")
        return sum(self._delta(d, e0[d], e1[d]) for d in self.zones) / 1e6 / (t1 - t0)

    def sample(self) -> tuple[float, float]:
        """One interval: (host utilisation, average watts)."""
        s0, c0 = self.snapshot(), self.proc.host_ticks()
        self._sleep(self.interval_s)
        s1, c1 = self.snapshot(), self.proc.host_ticks()
        w = self.watts_between(s0, s1)
        u = host_utilisation(c0, c1)
        self.observe(u, w)
        return u, w

    def measured_watts(self) -> float:
        return self.sample()[1]


class RedfishSource(MeasuredSource):
    """The BMC's power reading via sushy (Redfish).

    sushy 5.14 parses the ``Power`` resource's power supplies but not ``PowerControl``, and has no
    ``EnvironmentMetrics`` class, so both are read from the resources' JSON that sushy fetched:
    ``Chassis/<id>/Power`` → ``PowerControl[*].PowerConsumedWatts`` (summed), else
    ``Chassis/<id>/EnvironmentMetrics`` → ``PowerWatts.Reading``. The chassis is the system's
    (``Links.Chassis``) or, without a system id, the first of the chassis collection.
    ``observe(u, W)`` with the host's utilisation (a BMC cannot know it) is done by
    :meth:`measure_at`.
    """

    source = "redfish"

    AUTH = ("auto", "basic", "session")

    def __init__(self, url: str, username: str | None = None, password: str | None = None,
                 system_id: str | None = None, verify: bool = True, prior: PowerSource | None = None,
                 timeout: float = 10.0, auth: str = "auto"):
        super().__init__(prior)
        if not url:
            raise PowerError("set [power] redfish_url (e.g. https://bmc.example/redfish/v1)")
        if auth not in self.AUTH:
            raise PowerError(f"redfish auth must be one of {', '.join(self.AUTH)}, not {auth!r}")
        import sushy  # lazy: only the Redfish source needs sushy
        from sushy import auth as sauth
        base, prefix = url.rstrip("/"), "/redfish/v1/"
        if base.endswith("/redfish/v1"):
            base = base[: -len("/redfish/v1")]
        # auto: a Redfish session (X-Auth-Token), falling back to basic auth if the BMC has none
        a = ({"auto": sauth.SessionOrBasicAuth, "basic": sauth.BasicAuth,
              "session": sauth.SessionAuth}[auth](username, password) if username else None)
        self.url, self.root = url, None
        try:
            self.root = sushy.Sushy(base, auth=a, root_prefix=prefix, verify=verify,
                                    read_timeout=timeout, connect_timeout=timeout,
                                    server_side_retries=0)
            self.chassis = self._find_chassis(system_id)
            self._reading()                              # fail at construction, not later
        except Exception as e:                           # sushy raises many kinds
            self.close()                                 # no BMC session left behind
            if isinstance(e, PowerError):
                raise
            raise PowerError(f"redfish {url}: {type(e).__name__}: {e}") from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _find_chassis(self, system_id):
        if system_id is not None or self._has_systems():
            sid = system_id or self.root.get_system_collection().members_identities[0]
            sysres = self.root.get_system(sid)
            chassis = sysres.chassis
            if chassis:
                return chassis[0]
        coll = self.root.get_chassis_collection()
        if not coll.members_identities:
            raise PowerError("redfish: the service has no chassis, so no power reading")
        return self.root.get_chassis(coll.members_identities[0])

    def _has_systems(self):
        try:
            return bool(self.root.get_system_collection().members_identities)
        except Exception:
            return False

    def _reading(self) -> float:
        ch = self.chassis
        ch.refresh(force=True)
        links = ch.json or {}
        if "Power" in links:
            pw = ch.power
            pw.refresh(force=True)
            vals = [pc.get("PowerConsumedWatts") for pc in (pw.json or {}).get("PowerControl", [])]
            vals = [float(v) for v in vals if isinstance(v, (int, float))]
            if vals:
                return sum(vals)
        em = (links.get("EnvironmentMetrics") or {}).get("@odata.id")
        if em:
            doc = self.root._conn.get(path=em).json()
            reading = (doc.get("PowerWatts") or {}).get("Reading")
            if isinstance(reading, (int, float)):
                return float(reading)
        raise PowerError(f"redfish: chassis {ch.identity} reports no PowerConsumedWatts and no "
                         "EnvironmentMetrics PowerWatts reading")

    def measured_watts(self) -> float:
        try:
            return self._reading()
        except PowerError:
            raise
        except Exception as e:
            raise PowerError(f"redfish {self.url}: {type(e).__name__}: {e}") from None

    def close(self) -> None:
        """End the BMC session (if any); the source cannot measure after this."""
        try:
            # sushy keeps the session in its auth object (and logs out in __del__ otherwise,
            # whenever the garbage collector gets to it)
            auth = getattr(self.root, "_auth", None)
            if auth is not None:
                auth.close()
        except Exception as e:                           # best effort, like logging out
            LOG.debug("redfish close: %s", e)

    def measure_at(self, u: float) -> float:
        """Read the BMC now and record it as the power at the host's utilisation ``u``."""
        w = self.measured_watts()
        self.observe(u, w)
        return w


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


# ---------------------------------------------------------------------------------------------
# /proc: host and process CPU time, attribution
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class HostTicks:
    busy: int
    total: int


class ProcReader:
    """CPU time from a proc tree (``/proc`` or a test's fake): host ``stat`` and ``<pid>/stat``."""

    def __init__(self, root: str = "/proc"):
        self.root = root

    def host_ticks(self) -> HostTicks:
        path = os.path.join(self.root, "stat")
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("cpu "):
                        v = [int(x) for x in line.split()[1:]]
                        break
                else:
                    raise PowerError(f"{path}: no aggregate 'cpu' line")
        except OSError as e:
            raise PowerError(f"cannot read {path}: {e}") from None
        # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
        v = (v + [0] * 8)[:8]
        idle = v[3] + v[4]
        total = sum(v)
        return HostTicks(busy=total - idle, total=total)

    def process_ticks(self, pid: int) -> int:
        """utime + stime of a process (clock ticks), children not included."""
        path = os.path.join(self.root, str(int(pid)), "stat")
        try:
            text = _read(path)
        except FileNotFoundError:
            raise PowerError(f"process {pid} does not exist ({path}); is the VNF still running?") \
                from None
        except OSError as e:
            raise PowerError(f"cannot read {path}: {e}") from None
        rest = text[text.rfind(")") + 2:].split()      # fields from 3 (state) on
        try:
            return int(rest[11]) + int(rest[12])       # fields 14 utime, 15 stime
        except (IndexError, ValueError):
            raise PowerError(f"{path}: not a /proc/<pid>/stat line: {text[:80]!r}") from None


def host_utilisation(t0: HostTicks, t1: HostTicks) -> float:
    dt = t1.total - t0.total
    if dt <= 0:
        return 0.0
    return min(1.0, max(0.0, (t1.busy - t0.busy) / dt))


def attribute_watts(host_w: float, vnf_ticks: float, host_busy_ticks: float,
                    idle_w: float | None = None) -> float:
    """Power of a VNF: ``host_w * vnf_ticks / host_busy_ticks`` over the same interval.

    With ``idle_w`` only the dynamic part (host_w - idle_w) is shared by CPU time (the idle power
    is the host's, not any VNF's). A VNF that used no CPU gets 0 W.
    """
    if host_w < 0 or vnf_ticks < 0 or host_busy_ticks < 0:
        raise PowerError(f"attribution needs non-negative values, got host_w={host_w} "
                         f"vnf_ticks={vnf_ticks} host_busy_ticks={host_busy_ticks}")
    if host_busy_ticks == 0 or vnf_ticks == 0:
        return 0.0
    share = min(1.0, vnf_ticks / host_busy_ticks)
    base = host_w if idle_w is None else max(0.0, host_w - idle_w)
    return base * share


@dataclasses.dataclass
class VnfPower:
    pid: int
    watts: float
    share: float                 # VNF CPU time / host busy CPU time
    host_watts: float
    host_util: float
    interval_s: float


def sample_vnf_power(model: PowerSource, pids, interval_s: float = 1.0, proc_root: str = "/proc",
                     idle_w: float | None = None, sleep=time.sleep) -> dict[int, VnfPower]:
    """Sample host and VNF (QEMU) CPU time over ``interval_s`` and attribute the host's power.

    The host's watts are measured over the same interval when the model is a
    :class:`RaplSource` (and recorded as one of its samples), else the model's at the measured
    utilisation.
    """
    proc = ProcReader(proc_root)
    pids = [int(p) for p in pids]
    rapl = model if isinstance(model, RaplSource) else None
    e0 = rapl.snapshot() if rapl else None
    h0 = proc.host_ticks()
    p0 = {p: proc.process_ticks(p) for p in pids}
    sleep(interval_s)
    e1 = rapl.snapshot() if rapl else None
    h1 = proc.host_ticks()
    p1 = {}
    for p in pids:
        try:
            p1[p] = proc.process_ticks(p)
        except PowerError:
            p1[p] = p0[p]                              # exited during the interval: no share
    u = host_utilisation(h0, h1)
    if rapl:
        host_w = rapl.watts_between(e0, e1)
        rapl.observe(u, host_w)
    else:
        host_w = model.watts(u)
    busy = h1.busy - h0.busy
    out = {}
    for p in pids:
        d = max(0, p1[p] - p0[p])
        out[p] = VnfPower(pid=p, watts=attribute_watts(host_w, d, busy, idle_w),
                          share=(d / busy if busy else 0.0), host_watts=host_w, host_util=u,
                          interval_s=interval_s)
    return out


# ---------------------------------------------------------------------------------------------
# Configuration and the fallback chain
# ---------------------------------------------------------------------------------------------

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
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # a fresh OptGroup per ConfigOpts: oslo.config keeps overrides in the group object
    conf.register_group(cfg.OptGroup(power_group.name, title=power_group.title, help=power_group.help))
    conf.register_opts(power_opts, group=power_group.name)


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
    if "power" not in conf:
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

    def model(self, host) -> PowerSource | None:
        key = (getattr(host, "power_system_id", None),
               tuple((getattr(host, "labels", None) or {}).get("power_points") or ()))
        if key not in self._models:
            try:
                self._models[key] = model_for_host(host, self.conf)
            except PowerError as e:
                LOG.debug("no power model for %s: %s", host.name, e)
                self._models[key] = None
        return self._models[key]

    def cpus(self, host, model) -> float:
        cpus = (getattr(host, "labels", None) or {}).get("cpus")
        if not cpus and isinstance(model, SpecpowerCurve):
            cpus = (model.info or {}).get("threads")
        try:
            return max(1.0, float(cpus)) if cpus else float(self.default_cpus)
        except (TypeError, ValueError):
            return float(self.default_cpus)

    def __call__(self, zone_name: str, host) -> float | None:
        model = self.model(host)
        if model is None:
            return None
        u = min(1.0, max(0.0, float(getattr(host, "cpu_util", 0.0) or 0.0)))
        m = marginal_watts(model, u, self.vnf_vcpus / self.cpus(host, model))
        if math.isinf(m):                    # the host is (nearly) saturated: the rest of 0..1
            m = model.watts(1.0) - model.watts(u)
        return m


# ---------------------------------------------------------------------------------------------
# Power-aware placement
# ---------------------------------------------------------------------------------------------

def marginal_watts(model: PowerSource, u_now: float, u_added: float) -> float:
    """Extra watts when a host at ``u_now`` takes ``u_added`` more; ``inf`` if it does not fit."""
    u_now = _check_u(u_now, "u_now")
    if u_added < 0 or math.isnan(u_added):
        raise PowerError(f"u_added must be >= 0, not {u_added!r}")
    if u_now + u_added > 1.0 + 1e-9:
        return math.inf
    return model.watts(min(1.0, u_now + u_added)) - model.watts(u_now)


@dataclasses.dataclass
class FleetHost:
    """A host as the placement helpers see it: a model, capacity and the load on it."""

    name: str
    model: PowerSource
    capacity: float = 1.0                   # CPU units (e.g. hardware threads); loads are in them
    u_max: float = 1.0                      # utilisation cap (PABFD's upper threshold)
    load: dict = dataclasses.field(default_factory=dict)   # vnf -> CPU units
    asleep: bool = False                    # an empty host that sleeps draws 0 W

    @property
    def used(self) -> float:
        return sum(self.load.values())

    @property
    def u(self) -> float:
        return self.used / self.capacity

    def fits(self, demand: float) -> bool:
        return self.used + demand <= self.u_max * self.capacity + 1e-9

    def watts(self) -> float:
        if self.asleep and not self.load:
            return 0.0
        return self.model.watts(min(1.0, self.u))

    def add(self, vnf: str, demand: float) -> None:
        if vnf in self.load:
            raise PowerError(f"{vnf} is already on {self.name}")
        self.load[vnf] = demand
        self.asleep = False

    def remove(self, vnf: str) -> float:
        return self.load.pop(vnf)


def host_marginal(h: FleetHost, demand: float, count_wake: bool = True) -> float:
    """Extra watts of ``demand`` CPU units on ``h``; a sleeping host also costs its idle power."""
    if not h.fits(demand):
        return math.inf
    m = marginal_watts(h.model, min(1.0, h.u), demand / h.capacity)
    if count_wake and h.asleep and not h.load:
        m += h.model.watts(0.0)
    return m


def pabfd_choose(hosts, demand: float, exclude=()) -> FleetHost | None:
    """PABFD: the host with the least power increase that fits ``demand`` (ties: fuller host)."""
    best, key = None, None
    for h in hosts:
        if h.name in exclude:
            continue
        m = host_marginal(h, demand)
        if math.isinf(m):
            continue
        k = (m, -h.u, h.name)
        if key is None or k < key:
            best, key = h, k
    return best


def first_fit(hosts, demand: float, exclude=()) -> FleetHost | None:
    """The first host (in the given order) that fits, awake hosts before sleeping ones."""
    ordered = [h for h in hosts if not h.asleep or h.load] + [h for h in hosts if h.asleep and not h.load]
    for h in ordered:
        if h.name not in exclude and h.fits(demand):
            return h
    return None


def worst_fit(hosts, demand: float, exclude=()) -> FleetHost | None:
    """The host with the most free capacity (spreads load; the classic anti-consolidation)."""
    cands = [h for h in hosts if h.name not in exclude and h.fits(demand)]
    if not cands:
        return None
    return max(cands, key=lambda h: (h.u_max * h.capacity - h.used, h.name))


@dataclasses.dataclass
class Migration:
    vnf: str
    demand: float
    src: str
    dst: str


@dataclasses.dataclass
class ConsolidationPlan:
    sleep: list                        # host names that can be emptied and sleep
    migrations: list                   # Migration, in order
    watts_before: float
    watts_after: float

    @property
    def saved_watts(self) -> float:
        return self.watts_before - self.watts_after


def consolidation_plan(hosts, u_low: float = 0.5, apply: bool = False) -> ConsolidationPlan:
    """Which lightly loaded hosts (u <= ``u_low``) can move all their VNFs elsewhere (PABFD, never
    onto a host being emptied or a sleeping one) and sleep, least loaded first. A host is only
    emptied when it saves power. With ``apply`` the fleet is changed, else it is left as it was.
    """
    before = sum(h.watts() for h in hosts)
    state = {h.name: (dict(h.load), h.asleep) for h in hosts}
    by_name = {h.name: h for h in hosts}
    sleeping = {h.name for h in hosts if h.asleep and not h.load}
    emptied: list = []
    migrations: list = []
    for src in sorted((h for h in hosts if h.load and h.u <= u_low), key=lambda h: (h.u, h.name)):
        if not src.load or src.u > u_low:           # it took VNFs from an emptied host meanwhile
            continue
        snapshot = {h.name: dict(h.load) for h in hosts}
        w0 = sum(h.watts() for h in hosts)
        moves = []
        ok = True
        for vnf, d in sorted(src.load.items(), key=lambda kv: -kv[1]):
            dst = pabfd_choose(hosts, d, exclude={src.name, *emptied, *sleeping})
            if dst is None:
                ok = False
                break
            dst.add(vnf, d)
            moves.append(Migration(vnf, d, src.name, dst.name))
        if ok:
            src.load.clear()
            src.asleep = True
            if sum(h.watts() for h in hosts) < w0:
                emptied.append(src.name)
                migrations.extend(moves)
                continue
        for h in hosts:                               # undo this host's attempt
            h.load = snapshot[h.name]
        src.asleep = False
    after = sum(h.watts() for h in hosts)
    plan = ConsolidationPlan(sleep=emptied, migrations=migrations, watts_before=before, watts_after=after)
    if not apply:
        for name, (load, asleep) in state.items():
            by_name[name].load, by_name[name].asleep = load, asleep
    return plan


def fleet_watts(hosts) -> float:
    return sum(h.watts() for h in hosts)


# ---------------------------------------------------------------------------------------------
# command line: which source wins here, and what it says
# ---------------------------------------------------------------------------------------------

EXAMPLES = """examples:
  # which power source works on this host, and why the others do not
  python -m fluidvim.orchestrator.power --config-file /etc/fluidvim/fluidvim.conf
  # a SPECpower curve by system id: watts at 0, 50 and 100 % CPU
  python -m fluidvim.orchestrator.power --system-id spec0120 --at 0 0.5 1
  # per-VNF power of two QEMU processes over 2 s (host power by the winning source)
  python -m fluidvim.orchestrator.power --system-id spec0120 --attribute 4242 4343 --interval 2
  # search the curve library
  python -m fluidvim.orchestrator.power --find 'PowerEdge R640'
"""


def main(argv=None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m fluidvim.orchestrator.power",
                                 description="Host power models of fluidvim: the [power] fallback "
                                             "chain, P(u), per-VNF attribution.",
                                 epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config-file", help="oslo.config file with a [power] section")
    ap.add_argument("--system-id", help="use this row of the curve library (overrides the config)")
    ap.add_argument("--at", type=float, nargs="+", metavar="U", help="print watts at utilisations U (0..1)")
    ap.add_argument("--attribute", type=int, nargs="+", metavar="PID",
                    help="attribute host power to these processes (QEMU VNFs) over --interval")
    ap.add_argument("--interval", type=float, default=1.0, help="attribution interval (s)")
    ap.add_argument("--find", metavar="TEXT", help="list library systems whose vendor/model/cpu contain TEXT")
    args = ap.parse_args(argv)
    if args.find is not None:
        lib = library(None)
        needle = args.find.lower()
        for sid in lib.ids():
            r = lib.rows[sid]
            text = f"{r['vendor']} {r['model']} {r['cpu']}"
            if needle in text.lower():
                print(f"{sid}  {text}  threads={r['threads']}  {r['w_0']}-{r['w_100']} W")
        return 0
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf([] if not args.config_file else ["--config-file", args.config_file], project="fluidvim",
         default_config_files=[])
    try:
        res = build_chain(conf, system_id=args.system_id)
    except PowerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(res.report())
    for u in args.at or ():
        try:
            print(f"P({u:g}) = {res.model.watts(u):.1f} W")
        except PowerError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    if args.attribute:
        try:
            out = sample_vnf_power(res.model, args.attribute, args.interval, conf.power.proc_root)
        except PowerError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        for pid, v in out.items():
            print(f"pid {pid}: {v.watts:.2f} W ({100 * v.share:.1f} % of host CPU time; host "
                  f"{v.host_watts:.1f} W at u={v.host_util:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
