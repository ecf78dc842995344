# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Opt-in CPU profile of the test suite: where CI's CPU-seconds go (docs/ci.md).

Enabled by ``FLUIDVIM_CPU_PROFILE=PATH`` (tests/conftest.py registers :class:`CpuProfile`).
Each test, setup and teardown included (so a module fixture's cost lands on the module's first
and last test), appends one JSON line to PATH:

* ``self``: CPU seconds (user + system) of the pytest process (the xdist worker);
* ``children``: of its children that ended and were reaped meanwhile (``RUSAGE_CHILDREN``:
  the ``openstack``/``fluidvim`` CLI runs, a Keystone or Nova service the fixture stopped);
* ``cgroup``: the CPU seconds of every process in the worker's cgroup (cgroup v1
  ``cpuacct.usage`` or v2 ``cpu.stat``): the daemons a test starts (a Nomad agent and its
  QEMUs, a Nova cloud's services) while they run, which ``RUSAGE_CHILDREN`` counts only once
  reaped and never for grandchildren. It is the whole run's tree when the run has a cgroup of
  its own (docs/ci.md: how); the host's when the run sits in the root cgroup;
* ``host``: the host's busy CPU seconds (``/proc/stat``), which also holds what no
  cgroup of the run sees (QEMU under libvirtd); on a host shared with other work, that work too;
* ``wall``: seconds.

Every process appends its own lines (one ``write`` each, ``O_APPEND``), so xdist workers can
share PATH. ``python -m tests.cpuprofile PATH [N]`` prints the top N modules and tests by
``self + children`` as Markdown tables.
"""

import collections
import json
import os
import resource
import sys
import time

import pytest

_TICKS = os.sysconf("SC_CLK_TCK")


def host_busy() -> float:
    """The host's busy CPU seconds so far: /proc/stat's first line minus idle and iowait
    (what tools/test.sh's ``busy`` counts)."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / _TICKS


def _cgroup_usage() -> tuple[str, str, float] | None:
    """(file, key, seconds per unit) of this process's cgroup CPU counter, or None."""
    with open("/proc/self/cgroup", encoding="ascii") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "cpuacct" in controllers.split(","):
            return f"/sys/fs/cgroup/cpuacct{path}/cpuacct.usage", "", 1e-9
    for hierarchy, _, path in lines:
        if hierarchy == "0":
            for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                if os.path.exists(f"{root}{path}/cpu.stat"):
                    return f"{root}{path}/cpu.stat", "usage_usec", 1e-6
    return None


_CGROUP = _cgroup_usage()


def cgroup_cpu() -> float:
    """CPU seconds of every process in this process's cgroup (0 where there is none)."""
    if _CGROUP is None:
        return 0.0
    path, key, unit = _CGROUP
    with open(path, encoding="ascii") as f:
        if not key:
            return int(f.read()) * unit
        for line in f:
            name, value = line.split()
            if name == key:
                return int(value) * unit
    return 0.0


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def sample() -> dict:
    return {
        "self": _cpu(resource.RUSAGE_SELF),
        "children": _cpu(resource.RUSAGE_CHILDREN),
        "cgroup": cgroup_cpu(),
        "host": host_busy(),
        "wall": time.monotonic(),
    }


def delta(before: dict, after: dict) -> dict:
    return {k: round(after[k] - before[k], 3) for k in before}


class CpuProfile:
    """The pytest plugin: one JSON line per test (see the module docstring)."""

    def __init__(self, path: str):
        self.path = path
        self.start = sample()

    def _write(self, record: dict) -> None:
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        before = sample()
        yield
        record = delta(before, sample())
        record.update(nodeid=item.nodeid, module=item.nodeid.split("::", 1)[0], pid=os.getpid())
        self._write(record)

    def pytest_sessionfinish(self, session):
        """The process's whole run too (collection, plugins, imports: outside any test)."""
        record = delta(self.start, sample())
        record.update(nodeid="<session>", module="<session>", pid=os.getpid())
        self._write(record)


def load(path: str) -> list:
    """The records of PATH; a test run again (another run into the same file) counts once,
    as last run."""
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    last = {r["nodeid"]: r for r in records if r["module"] != "<session>"}
    return list(last.values()) + [r for r in records if r["module"] == "<session>"]


def _key(r: dict) -> float:
    """Largest first: by the cgroup's CPU where measured, else by self + children."""
    return -max(r.get("cgroup", 0), r["self"] + r["children"])


def by_module(records: list) -> list:
    """Per module: the sums of its tests' records plus a count, largest own CPU first."""
    sums: dict = collections.defaultdict(lambda: collections.Counter())
    for r in records:
        if r["module"] == "<session>":
            continue
        sums[r["module"]].update({k: r.get(k, 0) for k in ("self", "children", "cgroup", "host",
                                                           "wall")})
        sums[r["module"]]["tests"] += 1
    rows = [dict(module=m, **c) for m, c in sums.items()]
    return sorted(rows, key=_key)


def _table(rows: list, name: str, n: int) -> str:
    lines = [
        f"| # | {name} | tests | cgroup CPU-s | self + children | host busy CPU-s | wall s |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rows[:n], 1):
        lines.append(
            f"| {i} | `{r[name]}` | {r.get('tests', 1)} | {r.get('cgroup', 0):.1f} "
            f"| {r['self'] + r['children']:.1f} | {r['host']:.1f} | {r['wall']:.1f} |"
        )
    return "\n".join(lines)


def report(path: str, n: int = 25) -> str:
    records = load(path)
    tests = [dict(r, test=r["nodeid"]) for r in records if r["module"] != "<session>"]
    tests.sort(key=_key)
    own = sum(r["self"] + r["children"] for r in tests)
    tree = sum(r.get("cgroup", 0) for r in tests)
    host = sum(r["host"] for r in tests)
    return "\n\n".join([
        f"{len(tests)} tests: cgroup CPU {tree:.0f} s, self + children {own:.0f} s, "
        f"host busy {host:.0f} s",
        _table(by_module(records), "module", n),
        _table(tests, "test", n),
    ])


if __name__ == "__main__":
    print(report(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25))
