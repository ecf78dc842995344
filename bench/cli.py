# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""bench/cli: wall time of the ``fluidvim`` command itself, as a user runs it (issue 11).

Runs, in rounds so that load from elsewhere on the host hits every command alike:

* ``python -c pass``          - the interpreter's own start (the baseline; same venv);
* ``fluidvim --help``         - the dispatcher alone;
* ``fluidvim vnf list``       - the launch core's store, read after recovery;
* ``fluidvim vnf run --cold`` - a cold launch of a forwarder with 2 NICs on 2 bridges; its
  ``--json`` result gives the launch's own time, so the CLI's overhead is wall - launch;
* ``fluidvim vnf rm``         - destroying that VNF.

Prints the median, p90 and minimum wall time and the median CPU time (user + system) per command,
the ratio to the baseline's median, and writes ``cli.json``. Every command is a fresh process
through the ``fluidvim`` console script of this interpreter's environment; the state and run
directories are this benchmark's own. The package's bytecode is compiled first, as an installed
package has it (``--no-compile``: measure as the source tree is, e.g. under
PYTHONDONTWRITEBYTECODE=1, where every run compiles the project's modules again).

Not a test: no thresholds (the targets of issue 11, list <= 150 ms and run <= 250 ms wall, are
printed next to the numbers). Needs root (taps, bridges) and the VNF kernel.

    sudo .venv/bin/python -m bench.cli --runs 10    # ~15 s; writes bench/results/cli.json
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from bench.launch import pct
from fluidvim.vnf import netdev

FORWARD = "FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);"
BRIDGES = ("fvbcli0", "fvbcli1")
TARGETS_MS = {"vnf list": 150.0, "vnf run": 250.0}



def timed(argv) -> tuple[float, float, str]:
    """(wall ms, CPU ms of the child, its stdout) of one command; raises if it fails."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = (time.perf_counter() - t) * 1000
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000
    return wall, cpu, proc.stdout


def compile_package() -> list[str]:
    """Compile the fluidvim package's modules (its sub-packages may live in other directories:
    an editable install maps them from the source tree)."""
    import fluidvim
    import fluidvim.evaluator
    import fluidvim.orchestrator
    import fluidvim.vnf

    dirs = sorted({os.path.dirname(m.__file__) for m in (fluidvim, fluidvim.vnf,
                                                          fluidvim.orchestrator,
                                                          fluidvim.evaluator)})
    for d in dirs:
        compileall.compile_dir(d, quiet=1)
    return dirs


def summarize(name, runs, baseline_ms=None):
    wall = [r["wall_ms"] for r in runs]
    out = {"command": name, "n": len(runs), "p50_ms": statistics.median(wall),
           "p90_ms": pct(wall, 90), "min_ms": min(wall),
           "cpu_p50_ms": statistics.median(r["cpu_ms"] for r in runs)}
    if baseline_ms:
        out["x_baseline_p50"] = out["p50_ms"] / baseline_ms
    if "launch_ms" in runs[0]:
        out["launch_p50_ms"] = statistics.median(r["launch_ms"] for r in runs)
        out["overhead_p50_ms"] = statistics.median(r["wall_ms"] - r["launch_ms"] for r in runs)
    if name in TARGETS_MS:
        out["target_ms"] = TARGETS_MS[name]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="rounds (default 10)")
    ap.add_argument("--out", default="bench/results", help="directory for cli.json")
    ap.add_argument("--no-compile", action="store_true",
                    help="do not compile the package's bytecode first")
    ap.add_argument("--state-dir", default="/var/lib/fluidvim-bench-cli")
    ap.add_argument("--run-dir", default="/run/fluidvim-bench-cli")
    args = ap.parse_args(argv)
    exe = os.path.join(os.path.dirname(sys.executable), "fluidvim")
    if not os.path.exists(exe):
        ap.error(f"{exe} does not exist: pip install -e . in this environment")
    compiled = [] if args.no_compile else compile_package()
    fv = [exe, "--state-dir", args.state_dir, "--run-dir", args.run_dir]
    commands = {
        "python -c pass": lambda i: [sys.executable, "-c", "pass"],
        "fluidvim --help": lambda i: [exe, "--help"],
        "vnf list": lambda i: fv + ["vnf", "list"],
        "vnf run": lambda i: fv + ["vnf", "run", "--cold", "--json", "--name", f"bench-cli-{i}",
                                   "--nic", BRIDGES[0], "--nic", BRIDGES[1], "--config", FORWARD],
        "vnf rm": lambda i: fv + ["vnf", "rm", f"bench-cli-{i}"],
    }
    made = [b for b in BRIDGES if not netdev.exists(b)]
    for b in BRIDGES:
        netdev.ensure_bridge(b)
    timed(fv + ["vnf", "rm", "--all"])             # leftovers of an interrupted run
    load0 = os.getloadavg()
    results = {name: [] for name in commands}
    try:
        for i in range(-1, args.runs):             # round -1 warms the page cache: not counted
            for name, argv_of in commands.items():
                wall, cpu, out = timed(argv_of(i))
                if i < 0:
                    continue
                run = {"wall_ms": wall, "cpu_ms": cpu}
                if name == "vnf run":
                    res = json.loads(out)
                    run["launch_ms"] = res["total_ms"]
                    run["phases_ms"] = res["phases_ms"]
                results[name].append(run)
    finally:
        subprocess.run(fv + ["vnf", "rm", "--all"], capture_output=True)
        for b in made:
            netdev.delete_link(b)
    load1 = os.getloadavg()
    base = statistics.median(r["wall_ms"] for r in results["python -c pass"])
    summary = [summarize(name, runs, base) for name, runs in results.items()]
    print(f"\nbench/cli: {args.runs} rounds, load average {load0[0]:.2f} -> {load1[0]:.2f}, "
          f"bytecode {'compiled first' if compiled else 'as found'}")
    print("| command | p50 ms | p90 ms | min ms | CPU p50 ms | x python -c pass (p50) | "
          "target ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in summary:
        print(f"| {s['command']} | {s['p50_ms']:.1f} | {s['p90_ms']:.1f} | {s['min_ms']:.1f} | "
              f"{s['cpu_p50_ms']:.1f} | {s['x_baseline_p50']:.1f} | "
              f"{s.get('target_ms', '')} |")
    run = next(s for s in summary if s["command"] == "vnf run")
    print(f"\nvnf run: launch itself p50 {run['launch_p50_ms']:.1f} ms, the CLI around it p50 "
          f"{run['overhead_p50_ms']:.1f} ms")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "cli.json")
    with open(path, "w") as f:
        json.dump({"runs_per_command": args.runs, "loadavg_start_end": [list(load0), list(load1)],
                   "bytecode_compiled": bool(compiled), "python": sys.version.split()[0],
                   "fluidvim": exe, "summary": summary,
                   "runs": results}, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
