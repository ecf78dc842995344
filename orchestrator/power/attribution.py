# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Per-VNF power by useful work: the VNF's own busy time, its host-side cost, a share of idle
power, and what is left unattributed - every interval adding up to the host's power.

Part of :mod:`fluidvim.orchestrator.power` (whose docstring has the whole picture); every
name is importable from there too.

The ratio method (:func:`~.sources.attribute_watts`, Kepler's) shares the host's watts by the QEMU
process's CPU time. A VNF busy-polls for up to 1 ms after each frame, so at low load its vCPU
thread reads ~100 % of a core while the VNF is a few % busy by its own count; the host's
per-frame network work (softirq, the vhost backend) is charged to nobody, and idle power is
handed to whoever used CPU. Here, over one interval of ``dt`` seconds:

* **host watts** ``W`` come from the power chain (:func:`~.chain.build_chain`: RAPL measured over
  the same interval, Redfish read at its end, else the SPECpower / linear model at the measured
  utilisation), and every figure carries that source's name;
* **idle watts** ``W0 = model.watts(0)`` (for a measured source: its fit, or its prior scaled
  through its measurement); **dynamic watts** ``D = max(0, W - W0)`` (``W0`` is capped at ``W``);
* one **CPU-second** of host work costs ``c = D / B`` watts, ``B`` the host's busy CPU-seconds
  (``/proc/stat``: all but idle and iowait);
* a VNF's **busy** share: ``c *`` its busy seconds (``stats`` → ``cpu.busy_us``, PROTOCOL.md);
* its **host-side** cost, ``c *`` the CPU the host spent for it beyond that: ``poll`` (its own
  ``poll_us``), ``qemu`` (the rest of its QEMU process's CPU: VM exits, the main loop and I/O
  threads; all of it when the VNF did not answer ``stats``). The guest's clock runs on while its
  vCPU thread waits for a host CPU, so on a busy host busy + poll can exceed what its QEMU
  process got: then that CPU time is split in the guest's busy : poll proportion and nothing
  is left for ``qemu``; ``vhost`` (its fluidvim-vhost-net process, if any) and ``softirq`` (the
  host's ``/proc/stat`` softirq seconds times its packet share: its NICs' rx + tx over
  ``max(all VNFs' packets, the packets the host's interfaces received)``, so the VNFs share all
  softirq work only while their traffic is all the host carries);
* its **idle** share, by ``[power] idle_rule``: ``vcpus`` (default) ``W0 * vcpus / max(host
  CPUs, sum of the VNFs' vCPUs)`` - a VNF holds the idle power of the CPUs reserved for it, and
  an overcommitted host splits all of it by vCPUs; ``equal``: ``W0`` split equally among the
  VNFs; ``none``: idle power stays unattributed;
* **unattributed** = ``W -`` the sum of the VNFs: the host's own work, other processes, idle
  power of unreserved CPUs. Should the VNFs' CPU-seconds exceed ``B`` (counters read a few
  milliseconds apart) they are scaled down to ``B``, so the VNFs never get more than ``W`` and
  ``sum(VNFs) + unattributed = W`` holds every interval.

Counters that go backwards are a restart (a new QEMU pid, a VNF ``uptime_us`` that went down:
the new counters are what happened since, so they are the interval's) or a wrap (a counter of
known width near its top: :func:`counter_delta`). Joules are ``watts * dt`` summed per VNF, and
survive its restart (a Prometheus counter must not go down).
"""

from __future__ import annotations

import dataclasses
import os
import time

from .models import PowerError, PowerSource
from .sources import ProcReader, RaplSource, RedfishSource

IDLE_RULES = ("vcpus", "equal", "none")
COMPONENTS = ("busy", "poll", "qemu", "vhost", "softirq", "idle")
HOST_SIDE = ("poll", "qemu", "vhost", "softirq")

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def counter_delta(prev: int | None, cur: int, modulus: int | None = None) -> tuple[int, bool]:
    """``(increase, reset)`` of a monotonic counter between two reads.

    ``cur < prev`` is a wrap when the counter has a known width (``modulus``) and ``prev`` was in
    its upper half: the increase is ``modulus - prev + cur``. Otherwise it is a reset (the
    process restarted) and the counter counts from 0 again: the increase is ``cur``, and the
    second value is True. ``prev`` None (first read) gives ``(0, False)``.
    """
    if cur < 0:
        raise PowerError(f"counter value {cur} is negative")
    if prev is None:
        return 0, False
    if cur >= prev:
        return cur - prev, False
    if modulus and prev >= modulus // 2 and cur < modulus // 2:
        return modulus - prev + cur, False
    return cur, True


@dataclasses.dataclass
class VnfCounters:
    """What is read of one VNF at one instant (``None``: not known)."""

    key: str                         # VNF id
    name: str
    service: str = ""
    pid: int | None = None           # its QEMU process
    vcpus: int = 1
    proc_ticks: int | None = None    # the QEMU process's utime + stime (all threads)
    helper_ticks: int = 0            # its vhost backend process(es)
    helper_pids: tuple = ()
    uptime_us: int | None = None     # from its `stats` (None: it did not answer)
    busy_us: int | None = None
    poll_us: int | None = None
    packets: int | None = None       # NICs' rx + tx
    free_slots: int | None = None


@dataclasses.dataclass
class HostCounters:
    t: float                         # monotonic clock
    busy_ticks: int
    softirq_ticks: int
    rx_packets: int
    cpus: int
    energy: object = None            # a RaplSource snapshot


@dataclasses.dataclass
class VnfDelta:
    """One VNF over one interval, in CPU-seconds (what :func:`attribute` shares power by)."""

    key: str
    name: str
    service: str = ""
    vcpus: int = 1
    cpu_s: float = 0.0               # its QEMU process
    busy_s: float | None = None      # its own count (None: no `stats`)
    poll_s: float | None = None
    helper_s: float = 0.0            # vhost backend
    packets: int = 0
    reset: bool = False


@dataclasses.dataclass
class VnfShare:
    key: str
    name: str
    service: str
    source: str
    watts: float
    components: dict                 # COMPONENTS -> watts
    cpu_s: dict                      # busy, poll, qemu, vhost, softirq -> CPU-seconds charged
    joules: float = 0.0              # cumulative (set by Attributor)
    reset: bool = False
    free_slots: int | None = None

    @property
    def host_side_watts(self) -> float:
        return sum(self.components[c] for c in HOST_SIDE)


@dataclasses.dataclass
class Interval:
    """One attribution interval: the host, every VNF, and the remainder."""

    source: str
    dt: float
    host_watts: float
    idle_watts: float
    host_busy_s: float
    softirq_s: float
    vnfs: dict                       # key -> VnfShare
    unattributed_watts: float
    idle_rule: str
    host_joules: float = 0.0         # cumulative (set by Attributor)
    unattributed_joules: float = 0.0

    def check(self, tolerance: float = 0.01) -> float:
        """The relative gap of ``sum(VNFs) + unattributed`` to the host's watts; raises
        :class:`PowerError` beyond ``tolerance``."""
        total = sum(v.watts for v in self.vnfs.values()) + self.unattributed_watts
        gap = abs(total - self.host_watts) / self.host_watts if self.host_watts > 0 else abs(total)
        if gap > tolerance:
            raise PowerError(f"attribution does not add up: VNFs + unattributed = {total:.3f} W, "
                             f"host {self.host_watts:.3f} W ({100 * gap:.2f} %)")
        return gap

    def to_dict(self) -> dict:
        return {"source": self.source, "dt_s": round(self.dt, 4),
                "host_watts": round(self.host_watts, 4), "idle_watts": round(self.idle_watts, 4),
                "unattributed_watts": round(self.unattributed_watts, 4),
                "host_joules": round(self.host_joules, 3), "idle_rule": self.idle_rule,
                "host_busy_s": round(self.host_busy_s, 4), "softirq_s": round(self.softirq_s, 4),
                "vnfs": {k: {"name": v.name, "service": v.service, "source": v.source,
                             "watts": round(v.watts, 4), "joules": round(v.joules, 3),
                             "host_side_watts": round(v.host_side_watts, 4),
                             "components": {c: round(w, 4) for c, w in v.components.items()},
                             "cpu_s": {c: round(s, 5) for c, s in v.cpu_s.items()},
                             "reset": v.reset, "free_slots": v.free_slots}
                         for k, v in self.vnfs.items()}}


def _check_rule(rule: str) -> str:
    if rule not in IDLE_RULES:
        raise PowerError(f"[power] idle_rule: {rule!r} is not one of {', '.join(IDLE_RULES)}")
    return rule


def idle_shares(idle_w: float, vnfs, host_cpus: int, rule: str = "vcpus") -> dict:
    """Idle watts of each VNF (key -> W) by ``rule`` (see the module doc); their sum is at most
    ``idle_w``."""
    _check_rule(rule)
    vnfs = list(vnfs)
    if not vnfs or idle_w <= 0 or rule == "none":
        return {v.key: 0.0 for v in vnfs}
    if rule == "equal":
        return {v.key: idle_w / len(vnfs) for v in vnfs}
    for v in vnfs:
        if v.vcpus < 1:
            raise PowerError(f"VNF {v.name}: vcpus {v.vcpus} < 1")
    denom = max(float(host_cpus), float(sum(v.vcpus for v in vnfs)))
    return {v.key: idle_w * v.vcpus / denom for v in vnfs}


def attribute(host_watts: float, idle_watts: float, source: str, dt: float, host_busy_s: float,
              softirq_s: float, host_rx_packets: int, host_cpus: int, vnfs,
              idle_rule: str = "vcpus") -> Interval:
    """Share ``host_watts`` over one interval among ``vnfs`` (:class:`VnfDelta`); see the module
    doc for the rule. Pure arithmetic: no clock, no /proc."""
    if host_watts < 0 or idle_watts < 0 or host_busy_s < 0 or softirq_s < 0 or dt <= 0:
        raise PowerError(f"attribution needs non-negative inputs and dt > 0, got host_watts="
                         f"{host_watts} idle_watts={idle_watts} host_busy_s={host_busy_s} "
                         f"softirq_s={softirq_s} dt={dt}")
    vnfs = list(vnfs)
    idle_w = min(idle_watts, host_watts)
    dyn_w = host_watts - idle_w
    # softirq by packet share
    all_pkts = sum(max(0, v.packets) for v in vnfs)
    denom_pkts = max(all_pkts, int(host_rx_packets))
    softirq_busy = min(softirq_s, host_busy_s)
    cpu = {}
    for v in vnfs:
        q = max(0.0, v.cpu_s)
        busy, poll = max(0.0, v.busy_s or 0.0), max(0.0, v.poll_s or 0.0)
        if busy + poll > q:
            # the guest's clock ran while its vCPU thread waited for a host CPU: what QEMU got
            # is split in the guest's own busy : poll proportion, nothing is left for qemu
            busy, poll = q * busy / (busy + poll), q * poll / (busy + poll)
        cpu[v.key] = {"busy": busy, "poll": poll, "qemu": max(0.0, q - busy - poll),
                      "vhost": max(0.0, v.helper_s),
                      "softirq": softirq_busy * v.packets / denom_pkts if denom_pkts > 0 and
                      v.packets > 0 else 0.0}
    total = sum(sum(c.values()) for c in cpu.values())
    scale = host_busy_s / total if total > host_busy_s and total > 0 else 1.0
    price = dyn_w / host_busy_s if host_busy_s > 0 else 0.0
    idle = idle_shares(idle_w, vnfs, host_cpus, idle_rule)
    shares = {}
    for v in vnfs:
        c = {k: s * scale for k, s in cpu[v.key].items()}
        comp = {k: price * s for k, s in c.items()}
        comp["idle"] = idle[v.key]
        shares[v.key] = VnfShare(key=v.key, name=v.name, service=v.service, source=source,
                                 watts=sum(comp.values()), components=comp, cpu_s=c,
                                 reset=v.reset)
    rest = host_watts - sum(s.watts for s in shares.values())
    if rest < 0:                       # float rounding only: the construction keeps it >= 0
        rest = 0.0
    return Interval(source=source, dt=dt, host_watts=host_watts, idle_watts=idle_w,
                    host_busy_s=host_busy_s, softirq_s=softirq_s, vnfs=shares,
                    unattributed_watts=rest, idle_rule=idle_rule)


def ratio_watts(host_watts: float, host_busy_s: float, vnf_cpu_s: dict) -> dict:
    """The CPU-time-ratio method (Kepler's, :func:`~.sources.attribute_watts` without an idle
    split): key -> ``host_watts * cpu_s / host_busy_s``. For comparison (bench/attribution)."""
    if host_busy_s <= 0:
        return {k: 0.0 for k in vnf_cpu_s}
    return {k: host_watts * min(1.0, max(0.0, s) / host_busy_s) for k, s in vnf_cpu_s.items()}


# ---------------------------------------------------------------------------------------------
# reading the host and the VNFs
# ---------------------------------------------------------------------------------------------

def net_rx_packets(proc_root: str = "/proc") -> int:
    """Packets the host's interfaces received (``<proc_root>/net/dev``, ``lo`` excluded)."""
    path = os.path.join(proc_root, "net", "dev")
    total = 0
    try:
        with open(path) as f:
            for line in f.readlines()[2:]:
                name, _, rest = line.partition(":")
                if name.strip() == "lo" or not rest:
                    continue
                total += int(rest.split()[1])
    except (OSError, ValueError, IndexError) as e:
        raise PowerError(f"cannot read {path}: {e}") from None
    return total


def pids_with_arg(needle: str, proc_root: str = "/proc") -> list[int]:
    """Processes with an argument that ends with ``needle`` (``:<tap>`` of a VNF's first NIC:
    its fluidvim-vhost-net, whose arguments are ``<socket fd>:<tap>``)."""
    out = []
    for d in os.listdir(proc_root):
        if not d.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, d, "cmdline"), "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(needle.encode()) for a in args[1:]):
            out.append(int(d))
    return sorted(out)


def stats_counters(st: dict | None) -> dict:
    """The fields of a VNF's `stats` reply (PROTOCOL.md) that attribution reads."""
    if not st:
        return {}
    cpu = st.get("cpu") or {}
    return {"uptime_us": st.get("uptime_us"), "busy_us": cpu.get("busy_us"),
            "poll_us": cpu.get("poll_us"),
            "packets": sum(int(n.get("rx", 0)) + int(n.get("tx", 0)) for n in st.get("nics", [])),
            "free_slots": (st.get("slots") or {}).get("free")}


class Attributor:
    """Attribution over consecutive intervals: keeps the last counters and the joules.

    ``model`` is the chain's winner (``ChainResult.model``), ``source`` its name. Call
    :meth:`sample` with the counters of every VNF now (:meth:`read_host`,
    :func:`stats_counters`); from the second call on it returns an :class:`Interval`.
    """

    def __init__(self, model: PowerSource, source: str, proc_root: str = "/proc",
                 idle_rule: str = "vcpus", host_cpus: int | None = None, clock=time.monotonic):
        self.model, self.source = model, source
        self.proc = ProcReader(proc_root)
        self.proc_root = proc_root
        self.idle_rule = _check_rule(idle_rule)
        self.host_cpus = host_cpus or os.cpu_count() or 1
        self.clock = clock
        self._host: HostCounters | None = None
        self._vnfs: dict = {}
        self.joules: dict = {}                     # key -> J (never reset)
        self.host_joules = 0.0
        self.unattributed_joules = 0.0
        self.last: Interval | None = None

    def read_host(self) -> HostCounters:
        f = self.proc.host_fields()
        total = sum(f.values())
        return HostCounters(t=self.clock(), busy_ticks=total - f["idle"] - f["iowait"],
                            softirq_ticks=f["softirq"], rx_packets=net_rx_packets(self.proc_root),
                            cpus=self.host_cpus,
                            energy=(self.model.snapshot() if isinstance(self.model, RaplSource)
                                    else None))

    def read_process(self, pid: int | None) -> int | None:
        if pid is None:
            return None
        try:
            return self.proc.process_ticks(pid)
        except PowerError:
            return None

    def vnf_counters(self, key: str, name: str, pid: int | None, st: dict | None, *,
                     service: str = "", vcpus: int = 1, helper_pids=()) -> VnfCounters:
        """A VNF's counters now: its QEMU (and helper) processes from /proc, the rest from its
        `stats` reply ``st`` (None when it did not answer)."""
        helper = 0
        for p in helper_pids:
            helper += self.read_process(p) or 0
        return VnfCounters(key=key, name=name, service=service, pid=pid, vcpus=vcpus,
                           proc_ticks=self.read_process(pid), helper_ticks=helper,
                           helper_pids=tuple(helper_pids), **stats_counters(st))

    def _host_watts(self, h0: HostCounters, h1: HostCounters, u: float) -> float:
        """The host's watts over the interval at utilisation ``u``: RAPL's energy between the
        two reads (recorded as one of its samples), the BMC's reading now, else the model."""
        if isinstance(self.model, RaplSource) and h0.energy and h1.energy:
            w = self.model.watts_between(h0.energy, h1.energy)
            self.model.observe(u, w)
            return w
        if isinstance(self.model, RedfishSource):
            return self.model.measure_at(u)
        return self.model.watts(u)

    def _delta(self, prev: VnfCounters | None, cur: VnfCounters) -> VnfDelta:
        reset = False
        if prev is None or prev.pid != cur.pid or cur.proc_ticks is None:
            # first read of this VNF, or a new QEMU: its CPU time so far is all since the last
            # interval only if it is new; a first read counts nothing
            if prev is not None and cur.proc_ticks is not None and prev.pid != cur.pid:
                cpu, reset = cur.proc_ticks, True
            else:
                cpu = 0
        else:
            cpu, r = counter_delta(prev.proc_ticks, cur.proc_ticks)
            reset = reset or r
        helper = 0
        if prev is not None:
            if prev.helper_pids == cur.helper_pids:
                helper, _ = counter_delta(prev.helper_ticks, cur.helper_ticks)
            else:
                helper = cur.helper_ticks            # a new backend: all its time is new
        busy = poll = None
        pkts = 0
        if prev is not None and cur.uptime_us is not None and prev.uptime_us is not None:
            restarted = cur.uptime_us < prev.uptime_us or reset
            if restarted:
                busy, poll, pkts, reset = cur.busy_us, cur.poll_us, cur.packets or 0, True
            else:
                busy, _ = counter_delta(prev.busy_us, cur.busy_us or 0)
                poll, _ = counter_delta(prev.poll_us, cur.poll_us or 0)
                pkts, _ = counter_delta(prev.packets, cur.packets or 0)
        return VnfDelta(key=cur.key, name=cur.name, service=cur.service, vcpus=cur.vcpus,
                        cpu_s=cpu / CLK_TCK, helper_s=helper / CLK_TCK,
                        busy_s=None if busy is None else busy / 1e6,
                        poll_s=None if poll is None else poll / 1e6, packets=pkts, reset=reset)

    def sample(self, host: HostCounters, vnfs) -> Interval | None:
        """Attribute the interval since the previous call (None on the first)."""
        vnfs = {v.key: v for v in vnfs}
        h0, self._host = self._host, host
        prev, self._vnfs = self._vnfs, vnfs
        if h0 is None:
            return None
        dt = host.t - h0.t
        if dt <= 0:
            raise PowerError("attribution: the clock did not advance between two samples")
        busy_ticks, _ = counter_delta(h0.busy_ticks, host.busy_ticks)
        soft_ticks, _ = counter_delta(h0.softirq_ticks, host.softirq_ticks)
        rx, _ = counter_delta(h0.rx_packets, host.rx_packets)
        host_busy_s = busy_ticks / CLK_TCK
        u = min(1.0, max(0.0, host_busy_s / (dt * host.cpus)))
        host_w = self._host_watts(h0, host, u)
        idle_w = self.model.watts(0.0)
        deltas = [self._delta(prev.get(k), v) for k, v in vnfs.items()]
        iv = attribute(host_w, idle_w, self.source, dt, host_busy_s, soft_ticks / CLK_TCK, rx,
                       host.cpus, deltas, self.idle_rule)
        for k, s in iv.vnfs.items():
            self.joules[k] = self.joules.get(k, 0.0) + s.watts * dt
            s.joules = self.joules[k]
            s.free_slots = vnfs[k].free_slots
        self.host_joules += iv.host_watts * dt
        self.unattributed_joules += iv.unattributed_watts * dt
        iv.host_joules, iv.unattributed_joules = self.host_joules, self.unattributed_joules
        self.last = iv
        return iv
