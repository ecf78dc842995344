# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A VNF's QEMU in a cgroup of its own, limited to what was reserved for it (the one place the
Python side handles cgroups; the Nomad plugin's twin is nomad_driver/qemu/cgroup.go).

The group is ``fluidvim.slice/<vnf uuid>``: memory limit = guest memory + ``QEMU_OVERHEAD_MB``,
CPU quota = one ``CPU_PERIOD_US`` per vCPU the flavor reserved plus ``QEMU_OVERHEAD_CPU_US``
for QEMU's own threads (vnf/limits.py). cgroup v2
(``memory.max``, ``cpu.max``; the memory and cpu controllers are enabled in ``subtree_control``
on the way down) or, on a host with the v1 hierarchies, ``memory.limit_in_bytes`` and
``cpu.cfs_quota_us``. A host with neither: :func:`create` returns None and says why in a
warning - the limits are then not enforced, never silently.
"""

from __future__ import annotations

import logging
import os
import stat
import time

from fluidvim.vnf import limits

LOG = logging.getLogger(__name__)

ROOT = "/sys/fs/cgroup"
SLICE = "fluidvim.slice"
PROC = "/proc"
VCPU_GROUP = "vcpus"     # the sub-group of a VNF's cpu group for its vCPU threads (a cap's)


# cgroup files are read and written with os-level calls, and directories tested with os.stat:
# besides needing no buffering, these are not the calls Nova's test fixtures poison for /sys
# (builtins.open, os.path.isdir, os.listdir; the Nova driver's tests run real QEMU here).
def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536).decode()
    finally:
        os.close(fd)


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)     # as `echo v > file`; kernfs ignores it
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _isdir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _mkdirs(path: str) -> None:
    """os.makedirs(path, exist_ok=True) without os.path.isdir."""
    if _isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        _mkdirs(parent)
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        if not _isdir(path):
            raise


def mode() -> tuple[int, str]:
    """(2 or 1, "") for the cgroup version offering memory and cpu here, else (0, why not)."""
    try:
        have = _read(os.path.join(ROOT, "cgroup.controllers")).split()
    except OSError:
        have = None
    if have is not None:
        if "memory" in have and "cpu" in have:
            return 2, ""
        return 0, f"cgroup v2 at {ROOT} offers controllers {have}, not memory and cpu"
    if (os.path.exists(os.path.join(ROOT, "memory", "memory.limit_in_bytes"))
            and os.path.exists(os.path.join(ROOT, "cpu", "cpu.cfs_quota_us"))):
        return 1, ""
    return 0, (f"neither cgroup v2 ({ROOT}/cgroup.controllers) nor v1 memory and cpu "
               f"hierarchies ({ROOT}/memory, {ROOT}/cpu) are mounted")


def limits_for(memory_mb: int, vcpus: int) -> tuple[int, int]:
    """(memory limit in bytes, CPU quota in microseconds per CPU_PERIOD_US) of a VNF of
    ``memory_mb`` guest memory and ``vcpus`` reserved vCPUs."""
    return ((int(memory_mb) + limits.QEMU_OVERHEAD_MB) << 20,
            max(1, int(vcpus)) * limits.CPU_PERIOD_US + limits.QEMU_OVERHEAD_CPU_US)


def dirs(name: str) -> list[str]:
    """The group directories of VNF ``name`` (its uuid) that exist."""
    m, _ = mode()
    cand = ([os.path.join(ROOT, SLICE, name)] if m == 2 else
            [os.path.join(ROOT, c, SLICE, name) for c in ("memory", "cpu")] if m == 1 else [])
    return [d for d in cand if _isdir(d)]


def _enable_v2(path: str) -> None:
    on = _read(os.path.join(path, "cgroup.subtree_control")).split()
    for c in ("memory", "cpu"):
        if c not in on:
            _write(os.path.join(path, "cgroup.subtree_control"), "+" + c)


def create(name: str, memory_mb: int, vcpus: int) -> list[str] | None:
    """Make VNF ``name``'s group with its limits; its directories, or None (and a warning) when
    this host cannot enforce them. Other failures raise OSError."""
    m, why = mode()
    mem, quota = limits_for(memory_mb, vcpus)
    made: list[str] = []
    try:
        if m == 2:
            _enable_v2(ROOT)
            _mkdirs(os.path.join(ROOT, SLICE))
            _enable_v2(os.path.join(ROOT, SLICE))
            d = os.path.join(ROOT, SLICE, name)
            _mkdirs(d)
            made.append(d)
            _write(os.path.join(d, "memory.max"), str(mem))
            _write(os.path.join(d, "cpu.max"), f"{quota} {limits.CPU_PERIOD_US}")
            if os.path.exists(os.path.join(d, "memory.swap.max")):
                _write(os.path.join(d, "memory.swap.max"), "0")
        elif m == 1:
            md = os.path.join(ROOT, "memory", SLICE, name)
            cd = os.path.join(ROOT, "cpu", SLICE, name)
            for d in (md, cd):
                _mkdirs(d)
                made.append(d)
            _write(os.path.join(md, "memory.limit_in_bytes"), str(mem))
            _write(os.path.join(cd, "cpu.cfs_period_us"), str(limits.CPU_PERIOD_US))
            _write(os.path.join(cd, "cpu.cfs_quota_us"), str(quota))
        else:
            LOG.warning("VNF %s: resource limits NOT enforced: %s", name, why)
            return None
    except OSError:
        remove(made)
        raise
    return made


def add(group: list[str], pid: int) -> None:
    """Move ``pid`` (all its threads) into the group."""
    for d in group:
        _write(os.path.join(d, "cgroup.procs"), str(pid))


def remove(group: list[str], wait_s: float = 1.0) -> None:
    """Delete the group's directories (its processes gone; a QEMU just killed may take a
    moment to leave them, so a busy group is retried for ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    for d in group:
        try:
            os.rmdir(os.path.join(d, VCPU_GROUP))   # a cap's vCPU sub-group goes first
        except OSError:
            pass
        while True:
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if time.monotonic() >= deadline:
                    LOG.warning("cannot remove cgroup %s: %s", d, e)
                    break
                time.sleep(0.02)


SWEEP_MIN_AGE_S = 60.0   # an empty group younger than this may be a launch between mkdir and add


def _slice_dirs() -> list[str]:
    """The fluidvim.slice directories of this host's hierarchies (v2: one; v1: memory, cpu)."""
    m, _ = mode()
    return ([os.path.join(ROOT, SLICE)] if m == 2 else
            [os.path.join(ROOT, c, SLICE) for c in ("memory", "cpu")] if m == 1 else [])


def sweep(keep: set | frozenset = frozenset(), min_age_s: float = SWEEP_MIN_AGE_S) -> list[str]:
    """Remove the empty ``fluidvim.slice/<uuid>`` groups left by VNFs nobody cleaned up (a launch
    core or test killed with -9, its QEMUs killed later): run when a launch core starts, after
    recovery. Safe beside other launch cores and Nomad plugins on this host: a group with a
    process in it is never removed (the kernel refuses: EBUSY), nor one named in ``keep`` (the
    VNFs of this core's state store), nor one younger than ``min_age_s`` (another core may have
    made it and not yet moved its QEMU in). The removed directories are returned."""
    gone = []
    now = time.time()
    for sl in _slice_dirs():
        try:
            with os.scandir(sl) as it:          # not os.listdir: Nova's test fixtures forbid it
                names = [e.name for e in it]
        except OSError:
            continue
        for name in names:
            d = os.path.join(sl, name)
            try:
                st = os.stat(d)
            except OSError:
                continue
            if (name in keep or not stat.S_ISDIR(st.st_mode)
                    or now - st.st_mtime < min_age_s):     # a leaf group's mtime: its mkdir
                continue
            try:
                if _read(os.path.join(d, "cgroup.procs")).split():
                    continue
                if _isdir(os.path.join(d, VCPU_GROUP)):
                    os.rmdir(os.path.join(d, VCPU_GROUP))   # a cap's vCPU sub-group, empty
                os.rmdir(d)
            except OSError as e:            # EBUSY: a process moved in meanwhile; ENOENT: gone
                LOG.debug("cgroup %s kept: %s", d, e)
                continue
            gone.append(d)
    if gone:
        LOG.warning("removed %d empty cgroups of VNFs no longer running: %s", len(gone), gone)
    return gone


def _cpu_dir(name: str) -> tuple[str, int] | None:
    """(directory, version) of VNF ``name``'s cpu group (None: no cgroups here)."""
    m, _ = mode()
    if m == 2:
        return os.path.join(ROOT, SLICE, name), m
    if m == 1:
        return os.path.join(ROOT, "cpu", SLICE, name), m
    return None


def _cpu_file(name: str, sub: str = "") -> tuple[str, int] | None:
    """(path, version) of VNF ``name``'s CPU quota file (``sub``: of that sub-group), None
    when it has no such group."""
    d = _cpu_dir(name)
    if d is None:
        return None
    p = os.path.join(d[0], sub, "cpu.max" if d[1] == 2 else "cpu.cfs_quota_us")
    return (p, d[1]) if os.path.exists(p) else None


def cpu_quota(name: str, vcpus: bool = False) -> int | None:
    """VNF ``name``'s CPU quota in microseconds per its period (None: unlimited or no group);
    ``vcpus``: its vCPU threads' cap (:func:`set_vcpu_quota`; None: not capped)."""
    f = _cpu_file(name, VCPU_GROUP if vcpus else "")
    if f is None:
        return None
    text = _read(f[0]).split()
    q = text[0] if text else "max"
    return None if q in ("max", "-1") else int(q)


def _write_cpu(path: str, m: int, quota_us: int | None, period_us: int) -> None:
    """Write a quota per ``period_us`` (None: unlimited) to ``path``: v2's ``cpu.max``, or
    v1's ``cpu.cfs_quota_us`` beside its ``cpu.cfs_period_us``."""
    if quota_us is not None and quota_us < 1000:
        raise ValueError(f"CPU quota {quota_us} us is below the kernel's 1000 us minimum")
    if not 1000 <= period_us <= 1_000_000:
        raise ValueError(f"CPU period {period_us} us is outside the kernel's 1000..1000000 us")
    if m == 2:
        _write(path, f"{'max' if quota_us is None else int(quota_us)} {int(period_us)}")
        return
    pfile = os.path.join(os.path.dirname(path), "cpu.cfs_period_us")
    if os.path.exists(pfile) and _read(pfile).strip() != str(int(period_us)):
        _write(path, "-1")                 # v1 checks the quota against the period it has
        _write(pfile, str(int(period_us)))
    _write(path, str(-1 if quota_us is None else int(quota_us)))


def set_cpu_quota(name: str, quota_us: int | None,
                  period_us: int = limits.CPU_PERIOD_US) -> bool:
    """Set VNF ``name``'s CPU quota per ``period_us`` (None: unlimited): the whole group, QEMU
    and its vCPUs (a cap on the vCPUs alone: :func:`set_vcpu_quota`). False when the VNF has
    no group here (limits not enforced on this host)."""
    f = _cpu_file(name)
    if f is None:
        return False
    _write_cpu(f[0], f[1], quota_us, period_us)
    return True


def _vcpu_tids(pid: str) -> list[str]:
    """The threads of QEMU ``pid`` that ran guest code (guest_time > 0): its vCPUs; when none
    has yet (an idle VNF's vCPU halts, and guest time is counted in ticks; TCG never counts
    it), every thread but the main one, which moves the frames and must stay uncapped."""
    out: list[str] = []
    others: list[str] = []
    try:
        with os.scandir(os.path.join(PROC, pid, "task")) as it:
            tids = [e.name for e in it]
    except OSError:
        return out                                   # it just ended
    for tid in tids:
        try:
            text = _read(os.path.join(PROC, pid, "task", tid, "stat"))
        except OSError:
            continue                                 # a thread that just ended
        if int(text[text.rfind(")") + 2:].split()[40]):     # field 43, guest_time
            out.append(tid)
        elif tid != pid:
            others.append(tid)
    return out or others


def set_vcpu_quota(name: str, quota_us: int | None,
                   period_us: int = limits.CPU_PERIOD_US) -> bool:
    """Cap only VNF ``name``'s vCPU threads: a quota per ``period_us`` (None: unlimited) on
    the ``vcpus`` sub-group of its cpu group, made on first use (cgroup v2: a threaded group),
    with the threads that ran guest code moved in. The group keeps the launch's quota (the
    flavor's CPUs and QEMU's allowance), so QEMU's main thread, which moves the frames between
    the tap and the ring, is never held back by a cap: frames then wait in the ring at most a
    throttled gap, where a cap on the whole group queued them in the tap for longer
    (bench/results/powercap.md). False when the VNF has no group or no vCPU thread here."""
    d = _cpu_dir(name)
    if d is None or not _isdir(d[0]):
        return False
    parent, m = d
    child = os.path.join(parent, VCPU_GROUP)
    if not _isdir(child):
        if quota_us is None:
            return True                              # never capped: nothing to release
        os.mkdir(child, 0o755)
    if m == 2 and _read(os.path.join(child, "cgroup.type")).strip() != "threaded":
        _write(os.path.join(child, "cgroup.type"), "threaded")
        if "cpu" not in _read(os.path.join(parent, "cgroup.subtree_control")).split():
            _write(os.path.join(parent, "cgroup.subtree_control"), "+cpu")
    quota_file = os.path.join(child, "cpu.max" if m == 2 else "cpu.cfs_quota_us")
    if quota_us is None:                             # a release: the threads may stay
        _write_cpu(quota_file, m, None, period_us)
        return True
    moved = 0
    for tid in (t for pid in _group_pids(name) for t in _vcpu_tids(pid)):
        try:                                         # again each time: idempotent, cheap
            _write(os.path.join(child, "cgroup.threads" if m == 2 else "tasks"), tid)
            moved += 1
        except OSError:         # a thread that ended, or KVM's kernel worker listed with them
            continue
    if not moved:
        return False
    _write_cpu(quota_file, m, quota_us, period_us)
    return True


def _per_thread(pid: str, name: str):
    """The text of ``/proc/<pid>/task/<tid>/<name>`` of each thread of ``pid`` (threads and
    processes that just ended are skipped)."""
    try:
        tids = os.listdir(os.path.join(PROC, pid, "task"))
    except OSError:
        return                                   # it just ended
    for tid in tids:
        try:
            yield _read(os.path.join(PROC, pid, "task", tid, name))
        except OSError:
            continue                             # a thread that just ended


def _thread_cpu(pid: str) -> tuple[int, int]:
    """(ticks of all threads, ticks of the threads that ran guest code: the vCPUs) of ``pid``."""
    total = vcpu = 0
    for text in _per_thread(pid, "stat"):
        rest = text[text.rfind(")") + 2:].split()   # fields from 3 (state) on
        ticks = int(rest[11]) + int(rest[12])       # 14 utime, 15 stime
        total += ticks
        if int(rest[40]):                           # 43 guest_time: a vCPU thread
            vcpu += ticks
    return total, vcpu


def _group_pids(name: str) -> list[str]:
    """The processes in VNF ``name``'s group (its QEMU), from the first of its directories
    that has any; [] when it has no group or no process here."""
    for d in dirs(name):
        try:
            pids = _read(os.path.join(d, "cgroup.procs")).split()
        except OSError:
            continue
        if pids:
            return pids
    return []


# cpu.stat's bandwidth (throttling) keys: each group's own CFS quota counts its own, so a VNF's
# are its group's plus its vCPU sub-group's (a cap's, set_vcpu_quota); the usage keys
# (usage_usec, user_usec, system_usec) are hierarchical: the group's include the sub-group's
THROTTLE_KEYS = ("nr_periods", "nr_throttled", "throttled_usec", "throttled_time",
                 "nr_bursts", "burst_usec", "burst_time")


def _stat_lines(path: str) -> dict | None:
    """``key -> int`` of a ``cpu.stat`` file, None when there is none (or it is malformed)."""
    try:
        return {k: int(v) for k, v in (ln.split() for ln in _read(path).splitlines() if ln)}
    except (OSError, ValueError):
        return None


def cpu_stat(name: str, keys: tuple | None = None):
    """VNF ``name``'s ``cpu.stat``, read once: a dict of all its keys (``keys`` None), with the
    throttling keys (:data:`THROTTLE_KEYS`) summed over its group and its vCPU sub-group, the
    usage keys its group's (they include the sub-group's), and the sub-group's own lines again
    as ``vcpus.<key>``; None when it has no group with a ``cpu.stat`` (v1's memory group has
    none). With ``keys``: (key, value) of the first of them present (for one key: (value,)),
    None when none is."""
    got: dict | None = None
    for d in dirs(name):
        top = _stat_lines(os.path.join(d, "cpu.stat"))
        if top is None:
            continue
        got = dict(top)
        sub = _stat_lines(os.path.join(d, VCPU_GROUP, "cpu.stat")) or {}
        for k, v in sub.items():
            got[f"{VCPU_GROUP}.{k}"] = v
            if k in THROTTLE_KEYS:
                got[k] = got.get(k, 0) + v
        break
    if got is None or keys is None:
        return got
    key = next((k for k in keys if k in got), None)
    if key is None:
        return None
    return (got[key],) if len(keys) == 1 else (key, got[key])


def cpu_usage(name: str) -> dict | None:
    """Host CPU-seconds so far of the processes in VNF ``name``'s group (``cgroup.procs``: its
    QEMU): ``total`` and ``vcpu``, the part of its vCPU threads (those with guest time), so that
    ``total - vcpu`` is QEMU's own share (the main thread's tap I/O, its workers), which the
    VNF's own ``stats`` cannot see. From ``/proc/<pid>/task/*/stat`` (cgroup v1's cpu hierarchy
    has no usage counter); None when it has no group or no process here."""
    pids = _group_pids(name)
    if not pids:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    total = vcpu = 0
    for pid in pids:
        t, v = _thread_cpu(pid)
        total, vcpu = total + t, vcpu + v
    return {"total": total / hz, "vcpu": vcpu / hz}


def cpu_waits(name: str) -> dict | None:
    """Seconds so far that the threads of VNF ``name``'s group ran on a CPU (``run_s``) and
    waited for one while runnable (``wait_s``), from ``/proc/<pid>/task/*/schedstat``: a VNF
    whose threads wait more than they run is measured against the host's contention, not its
    own capacity. None when it has no group, no process, or the kernel keeps no schedstat."""
    run = wait = 0
    seen = False
    for pid in _group_pids(name):
        for text in _per_thread(pid, "schedstat"):
            f = text.split()
            run, wait, seen = run + int(f[0]), wait + int(f[1]), True
    return {"run_s": run / 1e9, "wait_s": wait / 1e9} if seen else None
