# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""``nomad-binpack`` / ``nomad-spread``: Nomad's own scheduler, in process, on mock nodes sized
like the fleet.

What runs is Nomad's code at the version the task driver links (nomad_driver/go.mod,
github.com/hashicorp/nomad v1.11.3): ``nomad_driver/cmd/schedsim``, a small Go program, keeps a
Nomad state store with one node per Host (``mock.Node``: cpu shares = cores x mhz from a one-socket
topology, memory_mb, nothing reserved, the plugin's ``unikernel`` driver healthy, one datacenter)
and the cluster's ``SchedulerConfiguration`` with ``binpack`` or ``spread`` (what ``nomad
operator scheduler set-config -scheduler-algorithm`` sets). Each VNF service is one service job
with one task group (``resources { cpu = Shape.cpu_mhz  memory = Shape.memory_mb }``); a
``place`` registers the job with its count raised (``nomad job run`` the first time, ``nomad
job scale`` after) and processes one evaluation with Nomad's ``NewServiceScheduler``; the plan
is applied to the state store by the PlanBuilder the scheduler's test harness is made of, and
the new allocations are reported running. So every Nomad rule applies as in a cluster:
feasibility (driver, resources, eligibility), the algorithm's fit score, the job
anti-affinity penalty for instances of one service on one node, and the candidate limit
(``max(2, ceil(log2 nodes))`` nodes scored per placement, after a shuffle seeded by the
evaluation ID; IDs come from ``seed``, so a run is reproducible).

Operational choices the simulator's contract makes:

* **Refused is refused.** What does not fit is returned with ``host=None`` and the job's count
  goes back to what runs (Nomad would keep a blocked evaluation and place it later).
* **Scale-in is Nomad's choice**: the count is lowered and the scheduler stops the allocations
  it picks (the highest name indexes).
* **stop** marks the allocations stopped (desired status stop, then client status complete),
  lowers the count to what runs, and garbage-collects them, as ``nomad system gc`` would.
* **Ineligible** is ``nomad node eligibility -disable``: no new placement, nothing moved.

``decision_ms`` holds, per placed-or-refused instance, Nomad's time for the evaluation that
decided it (``Scheduler.Process``: reconcile, feasibility, ranking, plan apply) divided among
the instances of that request; ``decision_cpu_ms`` the same in CPU time of the schedsim process
(what a loaded machine inflates far less than wall time); the simulator times the whole call
(incl. the pipe) itself. Nomad's time grows with the service's instances (a scale is a new job
version: every running allocation of the job is re-checked for an in-place update on its node)
and with the allocations per node (each fit check sums them), not with the fleet's size.

What a step costs (profiled 2026-11-28, ``SCHEDSIM_CPUPROFILE=/tmp/go.prof`` makes schedsim write
a CPU profile): the harness is not the cost - schedsim holds the cluster across the run and
updates it incrementally, and the pipe and the simulator's Python side take ~2-4 % of a run -,
**Nomad's evaluation is**: ~98 % of schedsim's CPU is ``Scheduler.Process``, of which ~60 % is
the reconciler re-checking every running allocation of the scaled job for an in-place update on
its node (``genericAllocUpdateFn``: one ``stack.Select`` per allocation, because a count change
is a new job version, as ``nomad job scale`` makes it), and 25-40 % is Go's garbage collector
(more at 100 hosts: the live heap grows with the allocations). So an evaluation costs the job's
allocations times the allocations per node: ~11x per step from 20 to 100 hosts. The one knob
that changes no decision is the Go runtime's: schedsim inherits the environment, so
``GOGC=off GOMEMLIMIT=4GiB python -m bench.energy ...`` runs the same placements (a rerun
reproduces every number but the times) with ~30 % less CPU at 20 hosts; the times it reports
then leave out most of the collector's share a Nomad server (Go's default, GOGC=100) pays, and
each row records the setting it ran with (``schedsim_gc``).

At 1,000 hosts that cost is the whole run (measured 2026-11-29 on 1,000 mock nodes of 64
threads, binpack, ``GOGC=off``, three services): one evaluation scaling a job up by one
instance took 276, 750 and 1,383 ms of schedsim's CPU with 640, 1,280 and 2,560 allocations
per job - ~0.55 ms per allocation of the job, every evaluation, almost all of it in
``Scheduler.Process`` (``BinPackIterator`` over each allocation's in-place update; ~6 % is the
harness). The heterogeneous 1,000-host day holds 9,700-13,300 allocations per job from its
first step and makes about three evaluations a step: its first scale evaluations took 4.5-11.8
s of CPU each (recorded with ``SCHEDSIM_TRACE``, 2026-11-29): ~20 s a step at that rate, many hours a day. The
Go collector is not the cause: its live heap is 60-330 MB through the 34,553 first placements
(``GODEBUG=gctrace=1``), so with ``GOGC=off`` and any ``GOMEMLIMIT`` of a few GiB a collection
is rare; with Go's default (``GOGC=100``) it took ~30 % of the CPU.

**Recheck off** (``FLUIDVIM_NOMAD_RECHECK=0``; default 1) removes that re-check without
changing a decision: on a count change schedsim re-points the job's allocations to the new job
version (same state-store index, so Nomad's shuffle seeds stay the same), the reconciler then
ignores them instead of re-checking each in place - a re-check that, for a count-only change on
nodes that never change, always ends "in place, same node" and enters no placement or scale-in
choice (``Sim.repoint`` in schedsim). Proof that no decision changed: the 20-host days of both
fleets recorded with the re-check (``SCHEDSIM_TRACE``) replay through schedsim with it off
reply for reply (950 and 1,080 replies, 0 differ), as do the first 14 of the 1,000-host day
(34,553 first placements, 10 scale evaluations); the 20-host days rerun with it off give the
same rows field for field but the times (kWh, misses, awake hosts, placements, refusals...);
and ``TestRecheckOffDecidesTheSame`` drives a filled 6-node fleet through 120 mixed operations
both ways. What remains of a 1,000-host evaluation is Nomad placing: ~12 ms of CPU an instance
(binpack keeps nodes full, so each placement ranks many full nodes before it has
``log2(nodes)`` that fit), 0.9-2.9 s for the day's first scale evaluations (were 4.5-11.8 s),
plus ~0.5 s of the harness's re-pointing, since cut to the new allocations (``Sim.repoint``).
Nomad's Process time then leaves the re-check out (a Nomad server pays it), so a row records
``nomad_recheck`` and the table marks it ``no-recheck``; keep the default for the 20- and
100-host rows, whose decision times are compared, and use it for 1,000 hosts, where the
re-check alone would take many hours. At 20 hosts (heterogeneous) the day's Process CPU falls from
94.9 s to 3.8 s.

Run alone for the decision time per place request::

    .venv/bin/python -m bench.energy.nomad_policy --hosts 20 100 1000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .policy import Host, Placement, Shape, decision_summary

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "nomad_driver"
PACKAGE = "./cmd/schedsim"
ALGORITHMS = ("binpack", "spread")


class SchedsimError(RuntimeError):
    """schedsim refused a request (its message names the op and the field) or died."""


def cache_dir() -> Path:
    """Where the built binary is kept: $FLUIDVIM_SCHEDSIM_DIR, else ~/.cache/fluidvim/schedsim."""
    env = os.environ.get("FLUIDVIM_SCHEDSIM_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fluidvim" / "schedsim"


def _sources() -> list[Path]:
    src = MODULE / PACKAGE
    return [MODULE / "go.mod", MODULE / "go.sum",
            *(p for p in src.glob("*.go") if not p.name.endswith("_test.go"))]


def build(out_dir: Path | None = None) -> Path:
    """The schedsim binary, rebuilt when a source (its package, go.mod, go.sum) is newer."""
    exe = (out_dir or cache_dir()) / "schedsim"
    newest = max(p.stat().st_mtime for p in _sources())
    if exe.exists() and exe.stat().st_mtime >= newest:
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(f".schedsim.{os.getpid()}")
    try:
        subprocess.run(["go", "build", "-o", str(tmp), PACKAGE], cwd=MODULE, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except FileNotFoundError:
        raise SchedsimError("nomad policy: `go` is not on PATH; install Go (nomad_driver/go.mod "
                            "names the version) to build nomad_driver/cmd/schedsim") from None
    except subprocess.CalledProcessError as e:
        raise SchedsimError(f"nomad policy: go build {PACKAGE} failed:\n{e.stderr[-4000:]}") from None
    os.replace(tmp, exe)        # atomic: a concurrent build never leaves a half-written binary
    return exe


RECHECK_ENV = "FLUIDVIM_NOMAD_RECHECK"


def recheck_from_env() -> bool:
    """$FLUIDVIM_NOMAD_RECHECK: ``1`` (default) or ``0``; see the module doc."""
    v = os.environ.get(RECHECK_ENV, "1").strip().lower()
    if v not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise ValueError(f"{RECHECK_ENV}={v!r}: use 1 (Nomad re-checks every allocation on a "
                         "count change, as a server does) or 0 (same decisions, without it)")
    return v in ("1", "true", "yes", "on")


class NomadPolicy:
    """bench/energy Policy: Nomad's service scheduler with ``binpack`` or ``spread``."""

    def __init__(self, algorithm: str = "binpack", seed: int = 0, binary: Path | None = None,
                 recheck: bool | None = None):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm {algorithm!r}: use one of {ALGORITHMS} (Nomad's "
                             "scheduler_algorithm)")
        self.algorithm = algorithm
        self.name = f"nomad-{algorithm}"
        self.seed = seed
        self.recheck = recheck_from_env() if recheck is None else bool(recheck)
        self._binary = binary
        self._proc: subprocess.Popen | None = None
        self._stderr = None
        self.decision_ms: list[float] = []     # one per place()d instance (see the module doc)
        self.decision_cpu_ms: list[float] = []
        self.evaluations = {"n": 0, "ms": 0.0, "cpu_ms": 0.0}   # every Process (place, scale_in)

    # ------------------------------------------------------------------ the pipe
    def _spawn(self):
        exe = self._binary or build()
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, text=True, bufsize=1)

    def _ask(self, req: dict) -> dict:
        if self._proc is None:
            raise SchedsimError(f"nomad policy: {req['op']} before start(); start the run first")
        try:
            self._proc.stdin.write(json.dumps(req, separators=(",", ":")) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            raise SchedsimError(f"nomad policy: schedsim exited (rc={self._proc.poll()}) during "
                                f"{req['op']}: {self._stderr_tail()}")
        rep = json.loads(line)
        if "error" in rep:
            raise SchedsimError(f"nomad policy: {rep['error']}")
        return rep

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-2000:].strip() or "(no stderr)"

    # ------------------------------------------------------------------ Policy
    def start(self, hosts: list[Host]) -> None:
        if self._proc is None or self._proc.poll() is not None:
            self._spawn()
        self._ask({"op": "start", "algorithm": self.algorithm, "seed": self.seed,
                   "recheck": self.recheck,
                   "hosts": [{"id": h.id, "cores": h.cores, "mhz": h.mhz,
                              "memory_mb": h.memory_mb} for h in hosts]})
        self.decision_ms, self.decision_cpu_ms = [], []
        self.evaluations = {"n": 0, "ms": 0.0, "cpu_ms": 0.0}

    def _count(self, rep: dict) -> dict:
        ev = self.evaluations
        ev["n"], ev["ms"], ev["cpu_ms"] = ev["n"] + 1, ev["ms"] + rep["ms"], ev["cpu_ms"] + rep["cpu_ms"]
        return rep

    def describe(self) -> dict:
        """What a run's row records besides the simulator's summary: Nomad's evaluations (count,
        total and mean Process time) and the Go collector setting schedsim ran with."""
        ev = self.evaluations
        return {"nomad_evaluations": ev["n"], "nomad_process_s": round(ev["ms"] / 1000.0, 3),
                "nomad_process_cpu_s": round(ev["cpu_ms"] / 1000.0, 3),
                "nomad_process_ms_mean": round(ev["ms"] / ev["n"], 2) if ev["n"] else None,
                "nomad_recheck": self.recheck,
                "schedsim_gc": {k: os.environ.get(k, "unset (Go's default)")
                                for k in ("GOGC", "GOMEMLIMIT")}}

    def place(self, shape: Shape, instances: list[str]) -> list[Placement]:
        if not instances:
            return []
        rep = self._count(self._ask({"op": "place", "service": shape.service,
                                     "cpu_mhz": shape.cpu_mhz, "memory_mb": shape.memory_mb,
                                     "count": len(instances), "instances": list(instances)}))
        self.decision_ms.extend([rep["ms"] / len(instances)] * len(instances))
        self.decision_cpu_ms.extend([rep["cpu_ms"] / len(instances)] * len(instances))
        return [Placement(p["instance"], p["host"]) for p in rep["placements"]]

    def scale_in(self, service: str, n: int) -> list[str]:
        if n == 0:
            return []
        return self._count(self._ask({"op": "scale_in", "service": service, "n": n}))["instances"]

    def stop(self, instances: list[str]) -> None:
        if instances:
            self._ask({"op": "stop", "instances": list(instances)})

    def set_eligible(self, host: str, eligible: bool) -> None:
        self._ask({"op": "eligible", "host": host, "eligible": bool(eligible)})

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.stdin.write('{"op":"close"}\n')
                proc.stdin.flush()
            proc.wait(timeout=10)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        finally:
            for f in (proc.stdin, proc.stdout, self._stderr):
                f.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Nomad scheduler decision time per place request "
                                 "(fleets of equal hosts, one instance of one core per request, "
                                 "services in turn)")
    ap.add_argument("--hosts", type=int, nargs="+", default=[20, 100, 1000])
    ap.add_argument("--placements", type=int, default=2000)
    ap.add_argument("--services", type=int, default=20)
    ap.add_argument("--cores", type=int, default=64)
    ap.add_argument("--mhz", type=int, default=2000)
    ap.add_argument("--memory-mb", type=int, default=256 * 1024)
    ap.add_argument("--prefill", type=float, default=0.0,
                    help="fraction of the fleet's cores filled first, one request per service "
                         "(not timed): the instances per service the timed requests then scale")
    ap.add_argument("--algorithm", choices=ALGORITHMS, nargs="+", default=list(ALGORITHMS))
    args = ap.parse_args(argv)
    for algorithm in args.algorithm:
        for n in args.hosts:
            pol = NomadPolicy(algorithm)
            pol.start([Host(f"h{i:04d}", "bench", args.cores, args.mhz, args.memory_mb)
                       for i in range(n)])
            per_service = int(args.prefill * n * args.cores / args.services)
            for s in range(args.services if per_service else 0):
                pol.place(Shape(f"vnf{s}", 1, args.mhz, 512, 64), [f"p{s}.{k}" for k in range(per_service)])
            pol.decision_ms, pol.decision_cpu_ms = [], []
            wall, placed = [], 0
            for k in range(args.placements):
                shape = Shape(f"vnf{k % args.services}", 1, args.mhz, 512, 64)
                t0 = time.perf_counter()
                placed += pol.place(shape, [f"i{k}"])[0].host is not None
                wall.append((time.perf_counter() - t0) * 1000.0)
            ms, cpu, wall = sorted(pol.decision_ms), sorted(pol.decision_cpu_ms), sorted(wall)
            pol.close()
            print(json.dumps({
                "policy": pol.name, "hosts": n, "placements": args.placements, "placed": placed,
                "services": args.services, "prefilled_per_service": per_service,
                "load1": round(os.getloadavg()[0], 1),
                **decision_summary(ms, cpu),
                "call_ms_p50": round(statistics.median(wall), 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
