# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Measured power sources (RAPL powercap sysfs, Redfish through sushy) and /proc: host and
process CPU time, per-VNF attribution.

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture); every
name is importable from there too.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import time

from oslo_log import log as logging

from .models import PowerError, PowerSource, _check_u

LOG = logging.getLogger(__name__)


class MeasuredSource(PowerSource):
    """A source that measures (u, W) pairs and models ``watts(u)`` from them (see the package doc)."""

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

STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclasses.dataclass(frozen=True)
class HostTicks:
    busy: int
    total: int


class ProcReader:
    """CPU time from a proc tree (``/proc`` or a test's fake): host ``stat`` and ``<pid>/stat``."""

    def __init__(self, root: str = "/proc"):
        self.root = root

    def host_fields(self) -> dict[str, int]:
        """The aggregate ``cpu`` line of ``stat`` by field name (clock ticks): user, nice, system,
        idle, iowait, irq, softirq, steal (guest time is already in user/nice)."""
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
        return dict(zip(STAT_FIELDS, (v + [0] * len(STAT_FIELDS))[:len(STAT_FIELDS)]))

    def host_ticks(self) -> HostTicks:
        f = self.host_fields()
        total = sum(f.values())
        return HostTicks(busy=total - f["idle"] - f["iowait"], total=total)

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
