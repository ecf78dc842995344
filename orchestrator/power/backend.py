# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The latency controller's rule on its VNF's **host backend thread** (:mod:`.controller`).

Without vhost-net (this host has none) the tap's frames are moved between the tap and the
guest's rings by QEMU's **main thread** (the userspace tap backend): every frame waits for it.
Where the controller has the VNF napping (its window narrowed: ``poll only`` or capped; the
vCPU halts and wakes on its nap's timer or a frame) the main thread waits for a CPU more:
bench/powercap's quiet run 11-29 03:50 at 50 % load, 70 ms per 0.5 s step in the controller's
intervals over the 5 ms end-to-end target against 35 ms in the others.

So, where its window is narrowed, the controller gives that thread (only it: Linux's nice and
slice are per thread) ``backend_nice`` and a scheduler slice of ``backend_slice_us``
(``[metrics] controller_backend_nice`` / ``controller_backend_slice_us``; None: that one left
alone), and puts back the nice it had and the kernel's default slice once it goes open
(:class:`MainThread`; :class:`Backend` decides). Why both:

* a nice only ranks threads of one scheduling group, here QEMU's main thread against its own
  vCPU and worker threads in the VNF's cgroup (and through the group's weight on each CPU);
  alone (-10) it did not shorten the main thread's waits (bench/powercap 11-29 04:02, A/B
  ``controller-backend`` against ``controller`` in one run: 32.7 against 31.9 ms per step in
  the intervals within the target; 4 and 5 of 36 intervals over);
* a **short slice** (EEVDF, Linux 6.12+, ``sched_setattr``'s ``sched_runtime``) gives the
  thread an earlier deadline, so on its wake-up it preempts the running task, in any group
  (a group's slice is its shortest queued child's): 200 µs alone, 04:07: waits 25.5 against
  41.1 ms, 5 against 9 of 36 over; with nice -10 and 100 µs, 04:10: 13.9 against 30.8 ms,
  **1 against 11 of 48 over** (97.9 % within; the default 95.8 %), CPU per frame alike
  (14.6 against 14.8 CPU-s/Mpkt, the default 22.9: 36 % saved).

Only where the VNF naps: open (the default's busy-polling vCPU) the main thread keeps the
launch's settings, the vCPU's nice (``[vnf] vcpu_nice``) already yielding to it there. A
preempting backend thread costs the host's other work its CPU for the frames' sake; it runs
~0.4 CPU at 50 % load here (bench/powercap's ``QEMU/s main``). Second run (04:13, its capacity
found 28 % lower, so a lower rate): 2 against 0 of 48 over, the main thread's median wait 23.6
against 35.2 ms; the four development runs together, with a slice: 8 against 20 of 132 over.

**Off by default** since the quiet run of record 11-29 04:19 (bench/results/powercap.md): with
the rule (nice -10, 100 µs) the controller had 3 of 24 intervals over at 10 % and 2 at 50 %,
without it (``controller-plain``, same run) 0 and 1; the main thread's waits were shorter with
it, the end-to-end tail no better. ``bench.powercap --backend-nice -10 --backend-slice-us 100``
runs it again.

**Two more rules, also off** (helper 97, 11-29 05:38-05:54, A/Bs at 50 % load in one run each,
modes alternating, nice >= 10 processes stopped, also those started meanwhile):

* :class:`Split` (``split``; bench/powercap's ``controller-split``): the main thread on one CPU,
  the vCPUs on the others. Neither thread's wait for a CPU fell (the main thread's median
  39-46 against 37-41 ms per 0.5 s step), so they were not waiting for each other; intervals
  over 5 ms 3/1/1/8 against the controller's 9/1/1/8 (of 48, 48, 48, 72): 14 against 19 of 216,
  within the runs' noise, at 1-3 points less CPU saved.
* :class:`VcpuSlice` (``vcpu_slice_us``; ``controller-vslice``): a 100 µs slice on the vCPU
  threads. It halved their wait (49 against 106 ms per step) and raised the main thread's
  (62 against 37): the vCPU then preempted the backend, and the tail is the backend's (3
  against 1 of 48 over).

Both together with the main thread's 100 µs slice (``controller-latency``, 06:02, a busier
host, the default 77 % within): 19 of 48 over at 30.9 % saved, against 16 with none and 9 with
the main thread's slice alone; the next run (06:22, 72 intervals a mode) 17 with that slice
alone against 7 with none, its wait 24 against 42 ms: the backend's wait shortened, not the tail.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import struct

OPEN = "open"
# sched_setattr(2)'s number (struct sched_attr VER1: 56 B); None: not known here, no slice set
SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}.get(platform.machine())
BACKEND_NICE, BACKEND_SLICE_US = None, None    # the product's ([metrics] controller_backend_*)
TRIED_NICE, TRIED_SLICE_US = -10, 100         # the setting of the development runs and 04:19
MIN_SLICE_US, MAX_SLICE_US = 100, 100_000    # the kernel clamps a custom slice to these


def main_nice(pid: int, proc: str = "/proc") -> int | None:
    """The nice of QEMU ``pid``'s main thread (tid ``pid``), None: not readable."""
    try:
        with open(f"{proc}/{pid}/task/{pid}/stat") as f:
            text = f.read()
        return int(text[text.rfind(")") + 2:].split()[16])   # field 19, nice
    except (OSError, ValueError, IndexError):
        return None


def sched_setattr(tid: int, nice: int, slice_us: int) -> bool:
    """SCHED_OTHER at ``nice`` with a scheduler slice of ``slice_us`` (0: the kernel's default;
    EEVDF, Linux 6.12+: a shorter slice, an earlier deadline: it preempts the running task on
    its wake-up); False when the thread ended or the kernel refused."""
    if SYS_SCHED_SETATTR is None:
        return False
    attr = ctypes.create_string_buffer(struct.pack("IIQiIQQQII", 56, 0, 0, int(nice), 0,
                                                   int(slice_us) * 1000, 0, 0, 0, 0), 56)
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(SYS_SCHED_SETATTR, int(tid), attr, 0) == 0


def set_main(pid: int, nice: int, slice_us: int | None) -> bool:
    """Nice ``nice`` (and with ``slice_us``, that slice; 0: the default) on QEMU ``pid``'s main
    thread only (Linux's nice and slice are per thread); False when it ended."""
    try:
        if slice_us is not None:
            return sched_setattr(pid, nice, slice_us)
        os.setpriority(os.PRIO_PROCESS, int(pid), int(nice))
        return True
    except (ProcessLookupError, PermissionError):
        return False


class MainThread:
    """The production setter: ``(vnf key, (nice or None, slice_us or None) or None) -> bool``
    on the main thread of each process in VNF ``key``'s cgroup (a None in the pair: that one
    kept); None: back to the nice it had before the first change and the default slice."""

    def __init__(self, procs=None, read=main_nice, write=set_main):
        procs = _group_procs() if procs is None else procs
        self.procs, self.read, self.write = procs, read, write
        self.before: dict = {}       # key -> {pid: the nice its main thread had}
        self.sliced: set = set()     # keys whose main threads got a slice

    def __call__(self, key: str, want: tuple | None) -> bool:
        if want is None:
            before = self.before.pop(key, {})
            sl = 0 if key in self.sliced else None
            self.sliced.discard(key)
            return all([self.write(p, n, sl) for p, n in before.items()]) if before else True
        pids = self.procs(key)
        seen = self.before.setdefault(key, {})
        for p in pids:
            if p not in seen and (n := self.read(p)) is not None:
                seen[p] = n
        nice, slice_us = want
        if slice_us is not None:
            self.sliced.add(key)
        return sum(bool(self.write(p, seen[p] if nice is None else nice, slice_us))
                   for p in pids if p in seen) > 0


def _group_procs():
    """The production ``procs``: the QEMU processes in a VNF's cgroup (imported late: the
    host side reads /proc and cgroupfs)."""
    from .hostside import group_procs
    return group_procs


def _applied(fn, *args) -> bool:
    """``fn(*args)``'s result, False when it raised OSError (tried again next interval)."""
    try:
        return bool(fn(*args))
    except OSError:
        return False


def threads(pid: int, proc: str = "/proc") -> list[int]:
    """The thread ids of process ``pid`` ([] when it ended)."""
    try:
        return sorted(int(t) for t in os.listdir(f"{proc}/{pid}/task"))
    except (OSError, ValueError):
        return []


class Split:
    """The production splitter (``split`` of :class:`Backend`): ``(vnf key, on) -> bool``. On:
    QEMU's main thread of each process in the VNF's cgroup on one CPU of those it may use (the
    highest), its other threads (the vCPUs) on the rest, so that a vCPU waking from its nap
    never queues the backend thread behind it (nor the other way round); off: each thread back
    to the CPUs it had before the first change. Nothing is split on a single CPU."""

    def __init__(self, procs=None, tids=threads, get=os.sched_getaffinity,
                 put=os.sched_setaffinity):
        procs = _group_procs() if procs is None else procs
        self.procs, self.tids, self.get, self.put = procs, tids, get, put
        self.before: dict = {}       # key -> {tid: the CPUs it had before the first change}

    def plan(self, key: str) -> dict:
        """tid -> the CPUs it gets while split (none: a single CPU or no process)."""
        seen, out = self.before.get(key, {}), {}
        for pid in self.procs(key):
            try:
                allowed = set(seen.get(pid) or self.get(pid))
            except OSError:
                continue
            if len(allowed) < 2:
                continue
            main = max(allowed)
            out.update({t: allowed - {main} for t in self.tids(pid) if t != pid})
            out[pid] = {main}
        return out

    def __call__(self, key: str, on: bool) -> bool:
        if not on:
            for tid, cpus in self.before.pop(key, {}).items():
                try:
                    self.put(tid, cpus)
                except OSError:             # the thread ended: nothing to restore
                    pass
            return True
        seen, done = self.before.setdefault(key, {}), 0
        for tid, cpus in self.plan(key).items():
            try:
                if tid not in seen:
                    seen[tid] = set(self.get(tid))
                self.put(tid, cpus)
                done += 1
            except OSError:
                continue
        return done > 0


def set_slice(tid: int, slice_us: int) -> bool:
    """Thread ``tid``'s scheduler slice (0: the default), its nice kept; False when it ended."""
    try:
        return sched_setattr(tid, os.getpriority(os.PRIO_PROCESS, int(tid)), slice_us)
    except OSError:
        return False


class VcpuSlice:
    """The production slicer (``vcpu_slice`` of :class:`Backend`): ``(vnf key, slice_us or
    None) -> bool``: that scheduler slice on every thread of the VNF's QEMU but its main one
    (its vCPUs), their nice kept; None: the default slice back. A napping vCPU runs ~150 µs
    per wake-up; a short slice gives it an earlier deadline, so the wake-up at its nap's end
    preempts what runs (EEVDF), instead of waiting its turn."""

    def __init__(self, procs=None, tids=threads, write=set_slice):
        procs = _group_procs() if procs is None else procs
        self.procs, self.tids, self.write = procs, tids, write

    def __call__(self, key: str, slice_us: int | None) -> bool:
        done = [self.write(t, 0 if slice_us is None else int(slice_us))
                for p in self.procs(key) for t in self.tids(p) if t != p]
        return any(done) or (slice_us is None)


class Backend:
    """Where the controller narrows, ``nice`` and/or ``slice_us`` on the VNF's backend thread
    (module doc) and, with ``split``, its threads split between CPUs (:class:`Split`);
    ``setter``, ``splitter``: :class:`MainThread`, :class:`Split` or a test's. :attr:`now`: vnf
    key -> what it set, ``(nice, slice_us)``; :attr:`split_now`: the keys it split."""

    def __init__(self, nice: int | None = None, slice_us: int | None = None, setter=None,
                 split: bool = False, splitter=None, vcpu_slice_us: int | None = None,
                 slicer=None):
        from .models import PowerError
        if nice is not None and not -20 <= int(nice) <= 19:
            raise PowerError(f"controller backend_nice needs -20 <= nice <= 19, got {nice}")
        for name, v in (("backend_slice_us", slice_us), ("vcpu_slice_us", vcpu_slice_us)):
            if v is not None and not MIN_SLICE_US <= int(v) <= MAX_SLICE_US:
                raise PowerError(f"controller {name} needs {MIN_SLICE_US} <= slice <= "
                                 f"{MAX_SLICE_US}, got {v}")
        self.want = None if nice is None and slice_us is None else (
            None if nice is None else int(nice), None if slice_us is None else int(slice_us))
        self.setter = MainThread() if setter is None and self.want else setter
        self.now: dict = {}
        self.split = bool(split)
        self.splitter = Split() if splitter is None and self.split else splitter
        self.split_now: set = set()
        self.vcpu_slice = None if vcpu_slice_us is None else int(vcpu_slice_us)
        self.slicer = VcpuSlice() if slicer is None and self.vcpu_slice else slicer
        self.sliced_now: set = set()

    @classmethod
    def from_sizing(cls, sizing: dict) -> Backend:
        """The controller's, from (and taken out of) its ``sizing`` keywords ``backend_nice``,
        ``backend_slice_us`` and ``backend`` (the setter)."""
        return cls(sizing.pop("backend_nice", None), sizing.pop("backend_slice_us", None),
                   sizing.pop("backend", None), sizing.pop("backend_split", False),
                   sizing.pop("backend_splitter", None), sizing.pop("vcpu_slice_us", None),
                   sizing.pop("vcpu_slicer", None))

    def step(self, key: str, state: str) -> tuple | None:
        """After the controller's decision (its VNF in ``state``): what its main thread should
        have, set when it changed (a setter that fails is tried again next interval)."""
        napping = state != OPEN
        if self.split and napping != (key in self.split_now) \
                and _applied(self.splitter, key, napping):
            self.split_now ^= {key}
        if self.vcpu_slice and napping != (key in self.sliced_now) \
                and _applied(self.slicer, key, self.vcpu_slice if napping else None):
            self.sliced_now ^= {key}
        if self.want is None:
            return None
        want = self.want if napping else None
        if want != self.now.get(key) and _applied(self.setter, key, want):
            self.now[key] = want
        return self.now.get(key)

    def forget(self, key: str) -> None:
        if key in self.sliced_now:
            self.sliced_now.discard(key)
            with contextlib.suppress(OSError):
                self.slicer(key, None)
        if key in self.split_now:
            self.split_now.discard(key)
            with contextlib.suppress(OSError):
                self.splitter(key, False)
        if self.now.pop(key, None) is not None:
            with contextlib.suppress(OSError):
                self.setter(key, None)
