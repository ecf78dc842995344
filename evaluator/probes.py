# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Stage-1 probes: what one environment type can do, measured once and shared by every service.

* :class:`StaticProbe` - a manifest check of a service's static requirements against the
  environment type (no launch, nothing cached: it depends on the service).
* :class:`BootProbe` - launches a probe VNF through the zone (pinned to a host of that type when
  the zone allows), measures request -> ready (wall time here and the zone's own ``launch_ms``),
  cold and, when the zone serves warm launches, warm; terminates every instance it made.
* :class:`LoadProbe` - launches a probe VNF with its two NICs on a :class:`~fluidvim.vnf.testnet.
  TestNet`, sends sessions through it at increasing counts (each its own flow in the VNF's flow
  table, i.e. one session slot, at a fixed packet rate each) to the far namespace and back, and
  records the curve: sessions, offered packets/s, latency quantiles, loss
  (:mod:`fluidvim.evaluator.loadgen`). The latency is the round trip a session's packet sees from
  the near namespace (through the VNF both ways), timestamped by the kernel on arrival: what a
  session experiences, not only the VNF's own processing time. By default (``proto="icmp"``) a
  session is an ICMP echo flow with its own identifier (the VNF keys ICMP flows on it) answered
  by the far namespace's kernel, so no user-space echo competes with the VNF for this machine's
  two cores and sits in the measured path; ``proto="udp"`` uses one UDP socket (5-tuple) per
  session and a user-space UDP echo instead - on this machine that echo costs a good part of a
  core at 20k packets/s and lowers the measured capacity. The VNF's internal processing-latency
  histogram (its ``stats``) is recorded next to the round trip where the zone exposes
  ``stats(instance_id)``, but not used for slots: it stops at the VNF's rings, so it hides
  queueing in front of the guest. Only possible where this machine can put traffic on the
  zone's hosts: zones whose VNFs run on this host (``in_process``: the local zone); elsewhere
  ``ok=False`` with the reason.

Every probe returns a :class:`~fluidvim.evaluator.model.ProbeResult` and never raises for a
failure of the environment (``ok=False``, ``error`` says what); it raises ``ValueError`` for bad
arguments.
"""

from __future__ import annotations

import abc
import atexit
import dataclasses
import json
import math
import os
import resource
import statistics
import sys
import threading
import time

from oslo_log import log as logging

from fluidvim.common import instance_states as istates
from fluidvim.common.measure import quantile
from fluidvim.common.zonetypes import LaunchRequest
from fluidvim.vnf import limits, states as vstates
from fluidvim.vnf.testnet import MAX_PREFIX, TestNet, stop as stop_proc

from . import confirm as confirming, genprobe, qoeslots
from .model import BOOT, LOAD, STATIC, EnvironmentType, ProbeResult, ServiceProfile

LOG = logging.getLogger(__name__)

FORWARD_CONFIG = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);\n"
PROBE_SERVICE = "fluidvim-probe"
# LoadProbe traffic: host namespaces, a generator VNF, or the first of the two the zone allows
NETNS, VNF, AUTO = "netns", "vnf", "auto"


def _summary(values) -> dict:
    def p(q):
        return round(quantile(values, q, method="nearest"), 3) if values else None

    return {"n": len(values), "p50": p(0.5), "min": p(0.0),
            "max": p(1.0), "mean": round(statistics.fmean(values), 3) if values else None,
            "samples": [round(v, 3) for v in values]}


def host_for(zone, env: EnvironmentType) -> str | None:
    """A host of ``zone`` whose environment type is ``env`` (None if the zone lists none)."""
    try:
        for h in zone.hosts():
            if h.env.uid == env.uid:
                return h.name
    except Exception as e:  # noqa: BLE001 - a zone failing to list hosts is reported by launch
        LOG.warning("zone %s: cannot list hosts: %s", getattr(zone, "name", zone), e)
    return None


class Probe(abc.ABC):
    """One kind of stage-1 probe. ``run`` measures ``env`` in ``zone`` (a ZoneAdapter)."""

    kind: str = "abstract"
    cacheable: bool = True           # results are shared across services (StaticProbe: no)
    per_zone: bool = False           # says something about the zone, not only the type (boot)
    valid_for_s: float = 3600.0

    def applicable(self, zone) -> tuple[bool, str]:
        """Whether this probe can run in ``zone`` at all (and why not)."""
        return True, ""

    def covers(self, result: ProbeResult, service: ServiceProfile | None = None) -> bool:
        """Whether a valid cached ``result`` of this kind answers this probe as configured, for
        ``service`` (stage 1 probes again when not; :meth:`LoadProbe.covers`)."""
        return True

    @abc.abstractmethod
    def run(self, env: EnvironmentType, zone, service: ServiceProfile | None = None) -> ProbeResult:
        """Measure; never raises for an environment failure (``ok=False`` and ``error``)."""

    def _result(self, env, zone, ok, metrics, error=None, t0=None) -> ProbeResult:
        if t0 is not None:
            metrics = dict(metrics, probe_s=round(time.perf_counter() - t0, 3))
        return ProbeResult(env_uid=env.uid, kind=self.kind, ok=ok, metrics=metrics,
                           valid_for_s=self.valid_for_s, zone=getattr(zone, "name", "") or "",
                           error=error)


# --------------------------------------------------------------------------------------------
# static manifest check
# --------------------------------------------------------------------------------------------

#: requirement keys StaticProbe checks against the environment type
STATIC_KEYS = {
    "accel": "allowed accelerators, e.g. [\"kvm\"]",
    "launcher": "allowed launchers, e.g. [\"qemu\", \"nomad\"]",
    "machine": "allowed QEMU machines, e.g. [\"microvm\"]",
    "cpu_model": "substrings one of which the CPU model must contain",
    "min_memory_mb": "minimum memory (MiB) of the environment's instances",
    "min_vcpus": "minimum vCPUs",
    "kernel_sha256": "the VNF image the environment must run",
    "labels": "{key: value} pairs the environment's extra fields must have",
}
#: requirement keys that are not about the environment type (placement step 0 checks them)
PLACEMENT_KEYS = ("location", "zones", "max_price_per_hour", "max_power_w", "regions")


def _as_list(v):
    return [v] if isinstance(v, (str, int, float)) else list(v)


class StaticProbe(Probe):
    """Checks ``service.requirements`` against the environment type's manifest; launches nothing."""

    kind = STATIC
    cacheable = False

    def run(self, env, zone=None, service=None) -> ProbeResult:
        t0 = time.perf_counter()
        reqs = dict(service.requirements) if service is not None else {}
        unknown = sorted(k for k in reqs if k not in STATIC_KEYS and k not in PLACEMENT_KEYS)
        if unknown:
            return self._result(env, zone, False, {"checked": [], "failed": []},
                                f"unknown requirement(s) {unknown} in service "
                                f"{service.name!r}; known: {sorted(STATIC_KEYS)} (environment) and "
                                f"{list(PLACEMENT_KEYS)} (placement)", t0)
        checked, failed = [], []

        def check(key, ok, have, want):
            checked.append(key)
            if not ok:
                failed.append(f"{key}: environment has {have!r}, service needs {want!r}")

        labels = dict(env.extra)
        for key, want in sorted(reqs.items()):
            if key in PLACEMENT_KEYS:
                continue
            if key in ("accel", "launcher", "machine"):
                have = getattr(env, key)
                check(key, have in _as_list(want), have, _as_list(want))
            elif key == "cpu_model":
                check(key, any(str(w).lower() in env.cpu_model.lower() for w in _as_list(want)),
                      env.cpu_model, _as_list(want))
            elif key == "min_memory_mb":
                check(key, env.memory_mb >= int(want), env.memory_mb, f">= {want}")
            elif key == "min_vcpus":
                check(key, env.vcpus >= int(want), env.vcpus, f">= {want}")
            elif key == "kernel_sha256":
                check(key, not env.kernel_sha256 or env.kernel_sha256 == want,
                      env.kernel_sha256, want)
            elif key == "labels":
                if not isinstance(want, dict):
                    return self._result(env, zone, False, {"checked": checked, "failed": failed},
                                        f"requirement 'labels' must be a mapping, got {want!r}", t0)
                for lk, lv in sorted(want.items()):
                    check(f"labels.{lk}", str(labels.get(lk)) == str(lv), labels.get(lk), lv)
        ok = not failed
        return self._result(env, zone, ok, {"checked": checked, "failed": failed,
                                            "service": service.name if service else None},
                            None if ok else "; ".join(failed), t0)


# --------------------------------------------------------------------------------------------
# boot probe
# --------------------------------------------------------------------------------------------

class BootProbe(Probe):
    """Launch ``n`` probe VNFs cold (and ``n`` warm where the zone serves warm launches).

    A launch is warm when the zone's InstanceInfo carries ``kind == WARM`` (an optional
    attribute zone adapters may set; without it the zone is treated as having no warm pool).
    The probe VNF has ``nics`` NICs (default 2, the shape of the launch core's warm shells) on
    ``bridges`` - by default ``None`` each, i.e. unplugged: a boot probe measures instantiation,
    not traffic, so it needs no network of the zone.
    """

    kind = BOOT
    per_zone = True

    def __init__(self, n: int = 3, click_config: str = FORWARD_CONFIG, memory_mb: int | None = None,
                 kernel: str | None = None, valid_for_s: float = 3600.0, warm: bool = True,
                 nics: int = 2, bridges: tuple | None = None):
        if n < 1:
            raise ValueError(f"BootProbe n must be >= 1, got {n}")
        self.bridges = tuple(bridges) if bridges is not None else (None,) * nics
        if not 1 <= len(self.bridges) <= 4:
            raise ValueError(f"BootProbe needs 1..4 NICs, got {len(self.bridges)}")
        self.n, self.click_config, self.memory_mb, self.kernel = n, click_config, memory_mb, kernel
        self.valid_for_s, self.try_warm = valid_for_s, warm

    def _one(self, zone, env, host, warm, made):
        req = LaunchRequest(service=PROBE_SERVICE, click_config=self.click_config,
                            name=f"probe-boot-{env.uid[:8]}-{len(made)}", host=host,
                            memory_mb=self.memory_mb or env.memory_mb or None, vcpus=env.vcpus,
                            kernel=self.kernel, warm=warm, nics=self.bridges)
        t = time.perf_counter()
        inst = zone.launch(req)
        wall = (time.perf_counter() - t) * 1000.0
        made.append(inst.id)
        zone.terminate(inst.id)
        return wall, inst

    def run(self, env, zone, service=None) -> ProbeResult:
        t0 = time.perf_counter()
        host = host_for(zone, env)
        made, cold, cold_zone, warm_w, warm_zone = [], [], [], [], []
        metrics = {"host": host, "pinned": host is not None, "n": self.n}
        error = None
        try:
            for _ in range(self.n):
                wall, inst = self._one(zone, env, host, False, made)
                cold.append(wall)
                if inst.launch_ms is not None:
                    cold_zone.append(float(inst.launch_ms))
            if self.try_warm:
                for _ in range(self.n):
                    wall, inst = self._one(zone, env, host, True, made)
                    if getattr(inst, "kind", None) != vstates.WARM:
                        break          # the zone served it cold: no warm pool (or it is empty)
                    warm_w.append(wall)
                    if inst.launch_ms is not None:
                        warm_zone.append(float(inst.launch_ms))
        except Exception as e:  # noqa: BLE001 - a failing environment is a probe result
            error = f"launch in zone {getattr(zone, 'name', '?')} failed: {e}"
        leaked = self._leaked(zone, made)
        metrics.update(cold_ms=_summary(cold), cold_zone_ms=_summary(cold_zone),
                       warm=bool(warm_w), warm_ms=_summary(warm_w), warm_zone_ms=_summary(warm_zone),
                       launched=len(made), leaked=leaked)
        if leaked and error is None:
            error = f"instances left behind after terminate: {leaked}"
        ok = error is None and bool(cold)
        return self._result(env, zone, ok, metrics, error, t0)

    @staticmethod
    def _leaked(zone, made) -> list:
        if not made:
            return []
        try:
            alive = {i.id for i in zone.instances() if i.status != istates.DELETED}
        except Exception as e:  # noqa: BLE001
            LOG.warning("zone %s: cannot list instances to check for leaks: %s", zone.name, e)
            return []
        left = [i for i in made if i in alive]
        for i in left:                 # try once more, then report
            try:
                zone.terminate(i)
            except Exception:  # noqa: BLE001
                pass
        return left


# --------------------------------------------------------------------------------------------
# load probe
# --------------------------------------------------------------------------------------------

# a step whose probe VNF's threads waited for a CPU more than this share of their runnable time
# measured the host's other work (:func:`contended_steps`)
CONTENDED_WAIT_SHARE = 0.5
DEFAULT_SESSIONS = (1, 2, 5, 10, 20, 50, 100, 150, 200, 300, 400, 600, 900, 1350, 2000)
# one load probe per prefix at a time in this process (the names are unique per run anyway, see
# TestNet; two probes at once would measure each other's traffic)
_NET_LOCKS: dict[str, threading.Lock] = {}


def can_inject(zone) -> tuple[bool, str]:
    """Whether this machine can put traffic on ``zone``'s hosts (and why not)."""
    if not getattr(zone, "in_process", False):
        return False, (f"zone {getattr(zone, 'name', '?')!r} is a {getattr(zone, 'kind', '?')!r} "
                       "zone: this machine cannot inject traffic into its hosts (load probes run "
                       "only in the local zone); its slots come from a load probe of the same "
                       "environment type elsewhere, or from the VNFs' own slot reports")
    if os.geteuid() != 0:
        return False, "load probes need root (network namespaces, bridges)"
    return True, ""


# a confirm run during which processes other than the probe VNF, its traffic client and this
# process took more than this many cores in some second of it measured the host's other work
# (:class:`OthersMeter`; bench/results/slots.md 2026-11-28 19:18: other helpers' tests took ~1
# core, runs of 238-295 sessions failed that the reference held minutes later)
CONTENDED_OTHERS_CORES = 0.5
OTHERS_TICK_S = 1.0


def host_cpu_s() -> dict | None:
    """This host's CPU seconds so far over all its CPUs (``/proc/stat``): ``busy`` (user, nice,
    system, irq, steal; guest time is inside user) and ``softirq`` apart (packet processing of
    every namespace, the probe's own traffic included). None where there is no such file."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    return {"busy": (v[0] + v[1] + v[2] + v[5] + v[7]) / hz, "softirq": v[6] / hz}


def _self_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class OthersMeter:
    """The CPU that processes other than the VNF under test, its traffic client and this process
    take during a run: every ``tick_s`` the host's busy CPU (:func:`host_cpu_s`, softirq left
    out) less the VNF's QEMU threads' (``vnf_run_s()``: the zone stats' ``host_cpu`` ``run_s``)
    and this process's; the client's (its ``client_cpu_share`` of the run) is taken off at the
    end. The first ``skip_s`` (the client's start-up: its imports, before its warm-up) are not
    read. :meth:`result`: ``mean`` and ``max`` cores per tick, ``ticks``; None without a reading
    (no /proc/stat, or no VNF CPU: zones without ``host_cpu``). On a 2-core host a second in
    which others take half a core (CONTENDED_OTHERS_CORES) is a second the VNF and the client
    share 1.5: a run that fails then measured the host's other work, not the VNF."""

    def __init__(self, vnf_run_s, tick_s: float = OTHERS_TICK_S, skip_s: float = 0.6):
        self.vnf_run_s, self.tick_s, self.skip_s = vnf_run_s, float(tick_s), float(skip_s)
        self.samples: list[tuple] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="others-meter", daemon=True)

    def _sample(self):
        h, v = host_cpu_s(), self.vnf_run_s()
        if h is not None and v is not None:
            self.samples.append((time.monotonic(), h["busy"], h["softirq"], v, _self_cpu_s()))

    def _loop(self):
        if self._stop.wait(self.skip_s):
            return
        while True:
            self._sample()
            if self._stop.wait(self.tick_s):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)

    def result(self, client_share: float | None) -> dict | None:
        """Others' cores per tick, with the client's average share (of one core) taken off."""
        return others_cpu(self.samples, client_share)


def others_cpu(samples: list[tuple], client_share: float | None) -> dict | None:
    """:class:`OthersMeter`'s reading of its samples (monotonic s, host busy s, softirq s, VNF
    s, this process's s): per interval, (host busy - VNF - this process) / interval - the
    client's share; ``mean``, ``max`` (cores), ``softirq`` (mean cores), ``ticks``."""
    if len(samples) < 2:
        return None
    c = float(client_share or 0.0)
    per = []
    for a, b in zip(samples, samples[1:]):
        dt = b[0] - a[0]
        if dt <= 0:
            continue
        per.append(max(0.0, ((b[1] - a[1]) - (b[3] - a[3]) - (b[4] - a[4])) / dt - c))
    if not per:
        return None
    span = samples[-1][0] - samples[0][0]
    return {"mean": round(statistics.fmean(per), 3), "max": round(max(per), 3),
            "softirq": round((samples[-1][2] - samples[0][2]) / span, 3), "ticks": len(per)}


QUIET_WAIT_S = 10.0     # before a count is run again after a busy host failed it, at most


def wait_quiet(vnf_run_s, max_s: float = QUIET_WAIT_S, tick_s: float = OTHERS_TICK_S) -> float:
    """Before a count is run again because the host's other work failed it: wait for a tick in
    which other processes take at most CONTENDED_OTHERS_CORES (:func:`others_cpu`, no client
    running), at most ``max_s``. Returns the seconds waited (0 without a reading)."""
    t0 = time.monotonic()
    prev = None
    while time.monotonic() - t0 < max_s:
        h, v = host_cpu_s(), vnf_run_s()
        if h is None or v is None:
            break
        cur = (time.monotonic(), h["busy"], h["softirq"], v, _self_cpu_s())
        if prev is not None and not contended_run(others_cpu([prev, cur], 0.0)):
            break
        prev = cur
        time.sleep(tick_s)
    return round(time.monotonic() - t0, 2)


def contended_run(others: dict | None) -> bool:
    """Whether a run's :func:`others_cpu` reading says the host was busy with other work."""
    return bool(others) and others["max"] > CONTENDED_OTHERS_CORES


def _badness(step: dict) -> tuple:
    return (step["loss"] > 0.01, step["latency_ms"].get("0.99", math.inf), step["loss"])


SUSPECT_RATIO = 1.25     # a step's p99 this much above a higher load's: measured once more


def _p99(step: dict) -> float:
    """A step's p99 over all its packets when it has one (``latency_pooled_ms``: what sessions
    live through, and what the QoE capacity reads), else its window median."""
    return (step.get("latency_pooled_ms") or step["latency_ms"]).get("0.99", math.inf)


def _suspects(steps: list[dict]) -> list[int]:
    """Steps (indices, most suspect first) that look worse than a step at a higher load: more
    than SUSPECT_RATIO x its p99 (whole-step, :func:`_p99`) or 1 % more loss. More load cannot
    make a VNF faster, so such a step was most likely hit by someone else's CPU use; the probe
    measures it once more."""
    out = []
    for i, s in enumerate(steps):
        above = steps[i + 1:]
        if not above or s.get("rechecked"):
            continue
        p99 = _p99(s)
        best = min(_p99(a) for a in above)
        least_loss = min(a["loss"] for a in above)
        ratio = p99 / best if best > 0 else 0.0
        if ratio > SUSPECT_RATIO or s["loss"] > least_loss + 0.01:
            out.append((-(ratio + 100 * (s["loss"] - least_loss)), i))
    return [i for _, i in sorted(out)]


# what a recheck keeps of the measurement it discards: its tail and loss, window medians and
# over all its packets (the QoE capacity counts the discarded step's late packets at the host's
# burst rate: evaluator/qoeslots.py burst_share)
DISCARDED_KEYS = ("latency_ms", "loss", "latency_pooled_ms", "loss_pooled", "max_ms",
                  "received", "sent", "duration_s", "offered_pps", "achieved_pps")


def _jump(a: dict, b: dict) -> float:
    """How much the curve changes from step ``a`` to the next step ``b`` (log latency, loss)."""
    j = 0.0
    for q in ("0.5", "0.9", "0.99"):
        la, lb = a["latency_ms"].get(q), b["latency_ms"].get(q)
        if la and lb and la > 0 and lb > 0:
            j = max(j, math.log(lb / la))
        elif la and not lb:
            j = max(j, 5.0)          # b lost everything
    return j + 5.0 * max(0.0, b["loss"] - a["loss"])


class LoadProbe(Probe):
    """Latency and loss at increasing session counts through a probe VNF.

    The session counts ``sessions`` are measured in ascending order (``step_s`` seconds each after
    ``warmup_s``), stopping after the first step that loses more than ``stop_loss`` (the default
    ladder reaches 2,000 sessions, far beyond what one VNF here takes, so it ends at saturation);
    with ``extend=True`` a ladder that ends unsaturated goes on in steps of x1.5 up to
    ``max_sessions``. It stops early when the traffic generator cannot offer 90 % of a step's
    rate (then the capacity is "at least" the last load). A step's latency quantiles and loss are
    the medians over its ``window_s`` windows (see :mod:`~fluidvim.evaluator.loadgen`); the
    pooled figures are kept next to them. Then ``refine`` more steps are measured, each at the
    midpoint of the interval where the curve changes most (log latency at p50/p90/p99, loss)
    among the intervals that start below saturation (loss <= ``knee_loss``): that is the knee,
    where services' deadlines are crossed, so the curve is dense where slot estimates
    interpolate. Last, up to ``recheck`` steps that look worse than a step at a higher load (p99
    over all its packets more than ``SUSPECT_RATIO`` = 1.25x, or 1 % more loss: more load cannot
    make the VNF faster, so a burst of someone else's CPU use hit them) are measured once more
    and the better of the two kept (the other is recorded as ``recheck_discarded``, with its
    pooled figures: its late packets still count at the host's burst rate in the QoE capacity,
    :func:`fluidvim.evaluator.qoeslots.burst_share`).

    The test network's namespaces, veths and bridges are named ``prefix`` plus a random tag per
    run (see :class:`~fluidvim.vnf.testnet.TestNet`): the probes of two orchestrators on one host,
    or a leftover of a killed run, do not collide.

    ``client_nice``: the nice value the traffic client runs at (netns traffic; 0 = this
    process's). The client takes its send time just before each send and the kernel's receive
    time, so its own scheduling can only add latency, never hide it; but it shares the host's
    cores with the VNF under test, whose vCPU runs at ``[vnf] vcpu_nice`` - a client at that
    nice competes with the VNF as an equal, not above it.

    ``confirm``: a :class:`~fluidvim.evaluator.confirm.SessionTarget` (deadline, quantile,
    session length), a list of them, or None (no confirm phase): with targets, the fast steps are
    followed, per target, by session-length runs judged per session (:meth:`_confirm`,
    ``metrics["confirm"]``: one block, or a list of blocks for several targets), which the QoE
    capacity at that deadline and quantile is read off; host namespaces only.
    ``confirm_service``: a SessionTarget whose deadline and quantile are replaced by those of
    the service a run is for (:meth:`targets`: stage 1's default, ``service`` in ``[evaluator]
    load_probe_confirm_levels``, evaluator/conf.py); :meth:`covers` tells the runner a cached
    result measured without one of them. ``background``: the confirm runs in a thread after
    :meth:`run` returned the fast steps (:meth:`run`); ``unconfirmed_share``: the share of the
    fast reading a result of a probe that confirms announces at a level it has not confirmed
    (:func:`~fluidvim.evaluator.confirm.unconfirmed_capacity`).

    ``traffic="auto"`` takes host namespaces where this machine can put packets on the zone's
    hosts (the local zone) and a generator VNF elsewhere (Nomad zones whose clients make private
    bridges; zones with networks and VNF stats); ``traffic="netns"`` (the default, and
    ``[evaluator] load_probe_traffic``'s: opt in, a probe launches ~20 VNFs in the zone) or
    ``"vnf"`` forces one. ``traffic="vnf"``: no namespaces; the zone runs the traffic itself -
    two networks of the zone, the probe VNF on them and per step a generator VNF on the same host
    (:mod:`~fluidvim.evaluator.genprobe`): for zones this machine cannot put packets into, where
    the zone can create networks and show a VNF's ``stats``. ``proto`` does not apply (UDP).
    """

    kind = LOAD

    def __init__(self, sessions=DEFAULT_SESSIONS, session_pps: float = 100.0, step_s: float = 2.0,
                 warmup_s: float = 0.3, drain_s: float = 0.5, payload: int = 64,
                 stop_loss: float = 0.3, prefix: str = "fvlp", subnet: int = 96,
                 click_config: str = FORWARD_CONFIG, probe_slots: int = limits.SLOTS_MAX,
                 kernel: str | None = None, valid_for_s: float = 3600.0, python: str | None = None,
                 refine: int = 3, knee_loss: float = 0.01, proto: str = "icmp",
                 window_s: float = 0.4, extend: bool = False, max_sessions: int = 4096,
                 recheck: int = 3, traffic: str = NETNS, client_nice: int = 0,
                 confirm=None, confirm_service=None, background: bool = False,
                 unconfirmed_share: float = confirming.UNCONFIRMED_SHARE):
        sessions = sorted({int(s) for s in sessions})
        if not sessions or sessions[0] < 1:
            raise ValueError(f"LoadProbe sessions must be positive counts, got {sessions}")
        if sessions[-1] > probe_slots:
            raise ValueError(f"LoadProbe sessions up to {sessions[-1]} exceed probe_slots "
                             f"{probe_slots} (the probe VNF's flow table)")
        if not session_pps > 0 or not step_s > 0:
            raise ValueError("LoadProbe session_pps and step_s must be > 0")
        self.sessions, self.session_pps, self.step_s = sessions, float(session_pps), float(step_s)
        self.warmup_s, self.drain_s, self.payload = float(warmup_s), float(drain_s), int(payload)
        if not 1 <= len(prefix) <= MAX_PREFIX:
            raise ValueError(f"LoadProbe prefix must be 1 to {MAX_PREFIX} characters, got {prefix!r}")
        self.stop_loss, self.prefix, self.subnet = stop_loss, prefix, subnet
        self.click_config, self.probe_slots, self.kernel = click_config, probe_slots, kernel
        self.valid_for_s = valid_for_s
        self.python = python or sys.executable
        if refine < 0:
            raise ValueError(f"LoadProbe refine must be >= 0, got {refine}")
        self.refine, self.knee_loss = refine, knee_loss
        if proto not in ("icmp", "udp"):
            raise ValueError(f"LoadProbe proto must be 'icmp' or 'udp', got {proto!r}")
        self.proto = proto
        if not window_s > 0:
            raise ValueError(f"LoadProbe window_s must be > 0, got {window_s!r}")
        self.windows = max(1, round(self.step_s / window_s))
        self.extend, self.max_sessions = extend, min(int(max_sessions), probe_slots)
        if recheck < 0:
            raise ValueError(f"LoadProbe recheck must be >= 0, got {recheck}")
        self.recheck = recheck
        if traffic not in (NETNS, VNF, AUTO):
            raise ValueError(f"LoadProbe traffic must be {NETNS!r} (host namespaces), {VNF!r} "
                             f"(a generator VNF in the zone) or {AUTO!r} (namespaces where this "
                             f"machine reaches the zone's hosts, else a generator VNF), got "
                             f"{traffic!r}")
        self.traffic = traffic
        if not -20 <= int(client_nice) <= 19:
            raise ValueError(f"LoadProbe client_nice must be -20..19 (a nice value), got "
                             f"{client_nice!r}")
        self.client_nice = int(client_nice)
        self._set_confirm(confirm, confirm_service, background, unconfirmed_share)

    def _set_confirm(self, confirm, confirm_service, background, unconfirmed_share) -> None:
        """The confirm phase's arguments of :meth:`__init__`, checked."""
        confirms = () if confirm is None else (
            (confirm,) if isinstance(confirm, confirming.SessionTarget) else tuple(confirm))
        if not all(isinstance(t, confirming.SessionTarget) for t in confirms):
            raise ValueError(f"LoadProbe confirm must be a SessionTarget or a list of them, got "
                             f"{confirm!r}")
        self.confirms = confirms
        if confirm_service is not None and not isinstance(confirm_service,
                                                          confirming.SessionTarget):
            raise ValueError(f"LoadProbe confirm_service must be a SessionTarget (its session "
                             f"length, runs and margin; the service gives the deadline and "
                             f"quantile) or None, got {confirm_service!r}")
        self.confirm_service = confirm_service
        if not 0 < float(unconfirmed_share) <= 1:
            raise ValueError(f"LoadProbe unconfirmed_share must be in (0, 1], got "
                             f"{unconfirmed_share!r}")
        self.unconfirmed_share = float(unconfirmed_share)
        self.background = bool(background)
        self._pending: list[threading.Thread] = []
        self._stop = threading.Event()

    def targets(self, service: ServiceProfile | None = None) -> tuple:
        """The SessionTargets a run for ``service`` confirms: the configured ones
        (``confirm``) and, with ``confirm_service``, the service's own deadline and quantile at
        the template's session length, runs and margin (only when the service's sessions send
        at the probe's ``session_pps``: a confirm at another rate is not read,
        :func:`~fluidvim.evaluator.confirm.confirm_for`)."""
        out = list(self.confirms)
        t = self.confirm_service
        if (t is not None and service is not None
                and math.isclose(float(service.session_pps), self.session_pps)):
            mine = dataclasses.replace(t, deadline_ms=float(service.deadline_ms),
                                       quantile=float(service.qos_quantile))
            if mine not in out:
                out.append(mine)
        return tuple(out)

    def carries(self, target) -> bool:
        """Whether a target of a result this probe replaces is measured again with it: another
        service's level at this probe's ``confirm_service`` session length, runs and margin
        (stage 1; a target of an older configuration is not)."""
        t = self.confirm_service
        return t is not None and dataclasses.replace(
            target, deadline_ms=t.deadline_ms, quantile=t.quantile) == t

    def _mode(self, zone) -> tuple[str, bool, str]:
        """(traffic this run uses in ``zone``, whether it can, why not)."""
        if self.traffic != AUTO:
            ok, why = (genprobe.can_generate if self.traffic == VNF else can_inject)(zone)
            return self.traffic, ok, why
        ok, why = can_inject(zone)
        if ok:
            return NETNS, True, ""
        gen_ok, gen_why = genprobe.can_generate(zone)
        return VNF, gen_ok, "" if gen_ok else f"{why}; and {gen_why}"

    def applicable(self, zone) -> tuple[bool, str]:
        return self._mode(zone)[1:]

    def run(self, env, zone, service=None, progress=None, also=(),
            on_confirmed=None) -> ProbeResult:
        """The probe's result (module docstring). Confirm targets: :meth:`targets` of
        ``service`` plus ``also`` (stage 1's: those of the cached result this run replaces, so
        one service's probe does not drop another's confirmed level). With ``background``
        (and ``on_confirmed``), the result of the fast steps is returned at once, its targets in
        ``metrics["confirm_pending"]``, while a thread runs the confirm phase on the same probe
        VNF and test network and then calls ``on_confirmed(result)`` with the confirmed result
        (same measurement time) and tears the VNF and network down; meanwhile the QoE capacity
        reads the fast steps derated (:func:`~fluidvim.evaluator.confirm.unconfirmed_capacity`).
        Probes of this prefix wait for it (one load measurement at a time)."""
        t0 = time.perf_counter()
        targets = list(self.targets(service))
        targets += [t for t in also if t not in targets]
        mode, ok, why = self._mode(zone)
        base = {"session_pps": self.session_pps, "step_s": self.step_s,
                "payload_bytes": self.payload, "client_nice": self.client_nice,
                "max_sessions": self.probe_slots,
                "windows_per_step": self.windows,
                "proto": self.proto, "traffic": mode,
                "latency": "round trip near namespace -> VNF -> far namespace -> VNF, kernel rx "
                           "timestamp (" + ("far kernel's ICMP echo" if self.proto == "icmp"
                                            else "user-space UDP echo") + ")",
                "steps": []}
        if mode == VNF:
            base.update(proto="udp", windows_per_step=1,
                        latency="round trip generator VNF -> probe VNF -> generator VNF, the "
                                "generator's engine receive time (its vCPU's delays included)")
        if not ok:
            return self._result(env, zone, False, base, why, t0)
        if targets:
            base["unconfirmed_share"] = self.unconfirmed_share
        lock = _NET_LOCKS.setdefault(self.prefix, threading.Lock())
        lock.acquire()
        handed = False
        try:
            r, handed = self._run_locked(env, zone, base, t0, progress, mode, targets,
                                         lock if self.background and on_confirmed else None,
                                         on_confirmed)
            return r
        finally:
            if not handed:
                lock.release()

    def _run_locked(self, env, zone, base, t0, progress, mode, targets, lock, on_confirmed):
        """(the result, whether a background confirm took the VNF, network and ``lock``)."""
        host = host_for(zone, env)
        metrics = dict(base, host=host)
        inst = echo = None
        error = None
        handed = False
        gen = genprobe.GeneratorTraffic(self, zone, host) if mode == VNF else None
        net = gen or TestNet(self.prefix, self.subnet)

        def teardown(error):
            if echo is not None:
                stop_proc(echo)
            if inst is not None:
                try:
                    zone.terminate(inst.id)
                except Exception as e:  # noqa: BLE001
                    error = error or f"could not terminate the probe VNF {inst.id}: {e}"
            down_error = net.down()             # TestNet: None; the generator's networks: why not
            return error or down_error

        try:
            if gen is None:
                net.up()
            req = LaunchRequest(service=PROBE_SERVICE, click_config=self.click_config,
                                name=f"probe-load-{env.uid[:8]}", slots=self.probe_slots,
                                memory_mb=env.memory_mb or None, vcpus=env.vcpus,
                                kernel=self.kernel, host=host,
                                nics=gen.networks() if gen else tuple(net.bridges))
            inst = zone.launch(req)
            metrics["instance"] = inst.id
            if gen is not None:
                gen.check(inst)
            elif self.proto == "udp":
                echo = net.start_udp_echo(self.python)
            if gen is None and net.ping(3, 1) == 0:
                raise RuntimeError("no ping through the probe VNF between the test namespaces")
            stats_fn = getattr(zone, "stats", None)
            ladder = list(self.sessions)
            while ladder:
                n = ladder.pop(0)
                step = self._measure(net, stats_fn, inst.id, n, env, progress)
                metrics["steps"].append(step)
                if step["loss"] > self.stop_loss:
                    metrics["stopped"] = f"loss {step['loss']:.0%} > {self.stop_loss:.0%} at {n} sessions"
                    break
                if step.get("achieved_pps", step["offered_pps"]) < 0.9 * step["offered_pps"]:
                    metrics["stopped"] = (f"the traffic generator reached only "
                                          f"{step['achieved_pps']:.0f} of {step['offered_pps']:.0f} "
                                          f"pps at {n} sessions: capacity is at least that")
                    break
                if not ladder and self.extend and n < self.max_sessions:
                    ladder.append(min(self.max_sessions, int(n * 1.5)))   # not saturated yet
            else:
                metrics["stopped"] = metrics.get("stopped") or "end of the ladder (not saturated)"
            for _ in range(self.refine):
                steps = sorted(metrics["steps"], key=lambda s: s["sessions"])
                # only below saturation: an interval whose lower end already loses packets is
                # beyond every service's capacity
                gaps = [(_jump(a, b), a["sessions"], b["sessions"]) for a, b in zip(steps, steps[1:])
                        if b["sessions"] - a["sessions"] >= 2 and a["loss"] <= self.knee_loss]
                if not gaps:
                    break
                _, lo, hi = max(gaps)
                step = self._measure(net, stats_fn, inst.id, (lo + hi) // 2, env, progress)
                step["refined"] = True
                metrics["steps"].append(step)
            metrics["steps"].sort(key=lambda s: s["sessions"])
            for i in _suspects(metrics["steps"])[:self.recheck]:
                old = metrics["steps"][i]
                again = self._measure(net, stats_fn, inst.id, old["sessions"], env, progress)
                keep, drop = sorted((old, again), key=_badness)
                keep = dict(keep, rechecked=True,
                            recheck_discarded={k: drop[k] for k in DISCARDED_KEYS if k in drop})
                metrics["steps"][i] = keep
            if targets and gen is None and lock is not None and metrics["steps"]:
                metrics["confirm_pending"] = [t.as_dict() for t in targets]
                self._mark_contended(metrics)
                fast = self._result(env, zone, True, metrics, None, t0)

                def confirm_then_teardown():
                    try:
                        final = self._confirmed(fast, net, stats_fn, inst.id, env, targets)
                    except Exception as e:  # noqa: BLE001 - the fast result stands, derated
                        LOG.exception("load probe %s: background confirm raised", env.uid)
                        final = None
                        err = f"background confirm raised {type(e).__name__}: {e}"
                    try:
                        err2 = teardown(None)
                        if err2:
                            LOG.warning("load probe %s: %s", env.uid, err2)
                    finally:
                        lock.release()
                    if final is None:
                        final = dataclasses.replace(fast, valid_for_s=self.valid_for_s,
                                                    metrics=_without_pending(
                            fast.metrics, {"target": fast.metrics["confirm_pending"][0],
                                           "runs": [], "error": err}))
                    try:
                        on_confirmed(final)
                    except Exception:  # noqa: BLE001 - the caller's cache; logged
                        LOG.exception("load probe %s: storing the confirmed result failed",
                                      env.uid)

                th = threading.Thread(target=confirm_then_teardown, daemon=True,
                                      name=f"confirm-{env.uid[:8]}")
                self._pending = [t for t in self._pending if t.is_alive()] + [th]
                _PENDING.add(self)
                handed = True
                th.start()
                return fast, True
            if targets and gen is None:
                blocks = [self._confirm(net, stats_fn, inst.id, env, metrics, progress, t)
                          for t in targets]
                metrics["confirm"] = blocks[0] if len(blocks) == 1 else blocks
        except Exception as e:  # noqa: BLE001 - the environment failed: a probe result
            error = f"load probe in zone {zone.name} failed: {e}"
        finally:
            if not handed:
                error = teardown(error)
        ok = error is None and bool(metrics["steps"])
        self._mark_contended(metrics)
        return self._result(env, zone, ok, metrics, error, t0), False

    @staticmethod
    def _mark_contended(metrics: dict) -> None:
        if busy := contended_steps(metrics["steps"]):
            metrics["contended"] = (f"the probe VNF waited for a CPU more than "
                                    f"{CONTENDED_WAIT_SHARE:.0%} of its runnable time at "
                                    f"{busy} sessions: the host was busy with other work")

    def _confirmed(self, fast: ProbeResult, net, stats_fn, instance_id, env,
                   targets) -> ProbeResult:
        """The background confirm phase: ``fast`` (the fast steps' result) with its confirm
        blocks, one per target, in place of ``confirm_pending``. :meth:`close` stops it
        between runs (the block then says so: the fast reading stands, derated)."""
        metrics = dict(fast.metrics)
        blocks = []
        for t in targets:
            if self._stop.is_set():
                blocks.append({"target": t.as_dict(), "runs": [],
                               "error": "stopped: the probe was closed before this target"})
                continue
            blocks.append(self._confirm(net, stats_fn, instance_id, env, metrics, None, t))
        return dataclasses.replace(fast, valid_for_s=self.valid_for_s, metrics=_without_pending(
            metrics, blocks[0] if len(blocks) == 1 else blocks))

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the background confirm phases under way to land (True when none is left)."""
        for th in list(self._pending):
            th.join(timeout_s)
        return not any(th.is_alive() for th in self._pending)

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop background confirm phases between runs and wait for their teardown (at most
        ``timeout_s``): a process that exits leaves no probe VNF or test network behind."""
        self._stop.set()
        for th in self._pending:
            th.join(timeout_s)
        self._pending = []
        _PENDING.discard(self)

    def _measure(self, net, stats_fn, instance_id, n, env, progress) -> dict:
        before = self._vnf_stats(stats_fn, instance_id)
        step = self._step(net, n)
        after = self._vnf_stats(stats_fn, instance_id)
        steal = _steal_share(before.get("cpu"), after.get("cpu"), self.step_s + self.warmup_s)
        if steal is not None:
            step["vnf_steal_share"] = steal
        if before.get("latency_ns") is not None and after.get("latency_ns") is not None:
            step["vnf_latency_ns"] = _hist_delta(before["latency_ns"], after["latency_ns"])
        share = _wait_share(before.get("host_cpu"), after.get("host_cpu"))
        if share is not None:
            step["vnf_cpu_wait_share"] = share
        if progress:
            progress(step)
        LOG.info("load probe %s: %d sessions, %.0f pps: p99 %.2f ms, loss %.1f%%",
                 env.uid, n, step["offered_pps"], step["latency_ms"].get("0.99", float("nan")),
                 step["loss"] * 100)
        return step

    def covers(self, result: ProbeResult, service: ServiceProfile | None = None) -> bool:
        """Whether a cached result of this kind answers this probe for ``service``: a
        successful one must carry a confirm phase (done or under way) for each of its targets
        (:meth:`targets`, :func:`~fluidvim.evaluator.confirm.has_target`), else it was measured
        before they were configured (or for other services) and its slots would be the fast
        estimate, derated, until it expires. Failed results stand (they are kept only
        ``[evaluator] probe_failure_valid_for``)."""
        targets = self.targets(service)
        if not result.ok or not targets or result.metrics.get("traffic") == VNF:
            return True
        if "unconfirmed_share" not in result.metrics:
            # measured by a probe that confirms nothing (before an upgrade to the default, or
            # seeded): the configured levels are measured again, the service's own is not -
            # the result is read as it is until it expires (probe_validity)
            targets = self.confirms
        return all(confirming.has_target(result, t) for t in targets)

    def _confirm(self, net, stats_fn, instance_id, env, metrics, progress, t) -> dict:
        """The confirm phase for target ``t`` (a :class:`~fluidvim.evaluator.confirm.SessionTarget`):
        from the fast steps' estimate, runs of ``session_s`` s sessions judged one by one at the
        target's deadline and quantile, bracketed and bisected
        (:func:`~fluidvim.evaluator.confirm.next_confirm`). A 2 s step does not show what a
        16 s session meets at the same rate (bench/results/slots.md: 2 s steps at 400-450
        sessions p99 7.8-8.9 ms, 16 s at 314-343 p99 8-52 ms); these runs measure the
        definition itself. The capacity is read off them by
        :func:`~fluidvim.evaluator.confirm.confirmed_capacity`."""
        fast = ProbeResult(env_uid=env.uid, kind=LOAD, ok=True, metrics=metrics)
        try:
            est = qoeslots.fast_capacity(fast, t.deadline_ms, t.quantile, self.session_pps,
                                         session_packets=t.packets(self.session_pps))
            estimate = est.slots
        except qoeslots.SlotsError as e:
            LOG.warning("load probe %s: no fast estimate to confirm (%s)", env.uid, e)
            estimate = 1
        runs: list[dict] = []
        t0 = time.perf_counter()
        out = {"target": t.as_dict(), "estimate": estimate, "runs": runs}
        while (n := confirming.next_confirm(runs, estimate, self.max_sessions, t)) is not None:
            if self._stop.is_set():
                out["error"] = "stopped: the probe was closed during its confirm phase"
                break
            try:
                runs.append(self._session_run(net, stats_fn, instance_id, n, t))
            except RuntimeError as e:       # the fast steps stand; the confirm is not read
                out["error"] = f"confirm run of {n} sessions failed: {e}"
                LOG.warning("load probe %s: %s", env.uid, out["error"])
                break
            aside = confirming.set_aside(runs, t.max_over_pct, int(t.reruns))
            for i, r in enumerate(runs):    # why a run is left out (a steal reason can come late)
                if i in aside:
                    r["set_aside"] = aside[i]["reason"]
                else:
                    r.pop("set_aside", None)
            if len(runs) - 1 in aside and len(runs) < int(t.runs) + int(t.reruns):  # run again
                runs[-1]["waited_s"] = wait_quiet(lambda: self._vnf_run_s(stats_fn, instance_id))
            if progress:
                progress(dict(runs[-1], confirm=True))
            LOG.info("load probe %s confirm: %d sessions of %g s, %.1f%% over", env.uid, n,
                     t.session_s, runs[-1]["over_pct"])
        return dict(out, seconds=round(time.perf_counter() - t0, 1))

    def _session_run(self, net, stats_fn, instance_id, n: int, t) -> dict:
        """``n`` sessions of target ``t``'s length through the probe VNF, judged one by one
        (:func:`~fluidvim.evaluator.confirm.judge_sessions`)."""
        before = self._vnf_stats(stats_fn, instance_id)
        with OthersMeter(lambda: self._vnf_run_s(stats_fn, instance_id)) as meter:
            r = self._step(net, n, duration=t.session_s, windows=max(1, round(10 * t.session_s)),
                           per_session=(t.quantile, t.deadline_ms))
        after = self._vnf_stats(stats_fn, instance_id)
        others = meter.result(r.get("client_cpu_share"))
        judged = confirming.judge_sessions(r["per_session"], t.deadline_ms, t.quantile, t.max_loss)
        over = judged["admitted_over_deadline"]
        out = {"sessions": n, "n": n, "over": over, "over_pct": round(100.0 * over / max(1, n), 2),
               "offered_pps": r.get("offered_pps"), "loss": r.get("loss_pooled", r.get("loss")),
               "latency_pooled_ms": r.get("latency_pooled_ms"),
               "pooled_late_fraction": judged.get("pooled_late_fraction"),
               "client_cpu_share": r.get("client_cpu_share"),
               "window_p99_ms": r.get("window_p99_ms"),
               # other processes' CPU during the run (cores): a run that failed while they took
               # more than CONTENDED_OTHERS_CORES is run again (confirm.counted_runs)
               "others_cpu": others, "contended": contended_run(others)}
        steal = _steal_share(before.get("cpu"), after.get("cpu"), t.session_s + self.warmup_s)
        if steal is not None:
            out["vnf_steal_share"] = steal
        return out

    def _step(self, net, sessions: int, duration: float | None = None,
              windows: int | None = None, per_session: tuple | None = None) -> dict:
        if isinstance(net, genprobe.GeneratorTraffic):
            return net.load_step(sessions)
        nice = ["nice", "-n", str(self.client_nice)] if self.client_nice else []
        args = [*nice, self.python, "-m", "fluidvim.evaluator.loadgen", "client", "--src", net.ip_a,
                "--dst", net.ip_b, "--sessions", str(sessions), "--pps", str(self.session_pps),
                "--duration", str(duration or self.step_s), "--warmup", str(self.warmup_s),
                "--drain", str(self.drain_s), "--size", str(self.payload), "--proto", self.proto,
                "--windows", str(windows or self.windows)]
        if per_session is not None:                 # (quantile, deadline_ms): judged per session
            args += ["--per-session-quantile", str(per_session[0]),
                     "--deadline-ms", str(per_session[1])]
        r = net.run("a", *args,
                    timeout=(duration or self.step_s) + self.warmup_s + self.drain_s + 60)
        if r.returncode != 0 or not r.stdout.strip():
            raise RuntimeError(f"load generator failed ({r.returncode}): {r.stderr.strip()[-500:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def _vnf_run_s(self, stats_fn, instance_id) -> float | None:
        """The VNF's QEMU threads' CPU seconds so far (zone stats' ``host_cpu``; polled once a
        second during a confirm run, as the bench's reference polls its VNF)."""
        return (self._vnf_stats(stats_fn, instance_id).get("host_cpu") or {}).get("run_s")

    @staticmethod
    def _vnf_stats(stats_fn, instance_id) -> dict:
        if stats_fn is None:
            return {}
        try:
            return stats_fn(instance_id) or {}
        except Exception:  # noqa: BLE001 - optional extra
            return {}


# LoadProbes with a confirm phase under way in the background: stopped at the process's exit
_PENDING: set = set()


@atexit.register
def _close_pending() -> None:
    for p in list(_PENDING):
        p.close(timeout_s=30.0)


def _without_pending(metrics: dict, confirm) -> dict:
    """``metrics`` with ``confirm`` (a block or a list of blocks) in place of the targets
    the background confirm had under way."""
    out = {k: v for k, v in metrics.items() if k != "confirm_pending"}
    out["confirm"] = confirm
    return out


def _wait_share(before: dict | None, after: dict | None) -> float | None:
    """Of the time the probe VNF's threads were runnable during a step, the share they waited
    for a CPU (zone stats' ``host_cpu``; None when the zone has no such reading)."""
    if not before or not after:
        return None
    run, wait = after["run_s"] - before["run_s"], after["wait_s"] - before["wait_s"]
    return round(wait / (run + wait), 3) if run + wait > 0 else None


def _steal_share(before: dict | None, after: dict | None, loaded_s: float) -> float | None:
    """The probe VNF's KVM steal time during a step (its ``stats`` ``cpu`` ``steal_us``) as a
    share of the step's loaded time: what its QoE correction compares with ``wait_ppm``
    (:func:`fluidvim.evaluator.qoeslots.qoe_params`); None without a steal reading."""
    if not before or not after or "steal_us" not in after or "steal_us" not in before:
        return None
    steal_s = max(0, after["steal_us"] - before["steal_us"]) / 1e6   # may run past the loaded
    return round(min(1.0, steal_s / loaded_s), 4)                     # time (start, drain)


def contended_steps(steps: list[dict]) -> list[int]:
    """Sessions of the steps whose probe VNF waited for a CPU more than ``CONTENDED_WAIT_SHARE``
    of the time it was runnable: their latency is the host's contention (other processes on
    its CPUs), not the VNF's capacity, and a result holding one is re-measured soon
    (:class:`fluidvim.evaluator.stage1.Stage1Runner` caches it as briefly as a failure)."""
    return [s["sessions"] for s in steps
            if s.get("vnf_cpu_wait_share", 0.0) > CONTENDED_WAIT_SHARE]


def _hist_delta(before: dict, after: dict) -> dict:
    """The VNF's per-packet processing-latency histogram for one step (cumulative counters)."""
    b = before.get("buckets_log2") or []
    a = after.get("buckets_log2") or []
    d = [x - (b[i] if i < len(b) else 0) for i, x in enumerate(a)]
    total = sum(d)
    out = {"count": total, "buckets_log2": d}
    for q in (0.5, 0.99):
        acc = 0
        for i, c in enumerate(d):
            acc += c
            if total and acc >= q * total:
                out[f"p{int(q * 100)}"] = 2 ** i      # lower bound of the bucket, like the VNF
                break
    return out
