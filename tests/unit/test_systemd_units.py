# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The example systemd units of etc/systemd/ (docs/operators.md): each ExecStart starts a console
script this package installs (setup.py's entry points, read from the installed metadata), the
entry point's module is there, and the arguments the unit passes are ones the command accepts (its parser
is run on them with --help, which stops before any config file is read or service started)."""

import glob
import importlib.util
import os
import shlex
import subprocess
import sys
from importlib import metadata

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNITS = sorted(glob.glob(os.path.join(ROOT, "etc", "systemd", "*.service"))
               + glob.glob(os.path.join(ROOT, "etc", "systemd", "*.service.d", "*.conf")))
VENV_BIN = "/opt/fluidvim/bin/"     # where docs/operators.md installs the release


def _exec_starts(path):
    # ExecStart= repeats in a drop-in (the empty one resets the distro's): read them by hand
    starts, section = [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "Service" and line.startswith("ExecStart="):
                value = line.split("=", 1)[1].strip()
                if value:
                    starts.append(shlex.split(value))
    return starts


def _console_scripts():
    return {ep.name: ep for ep in metadata.distribution("fluidvim").entry_points
            if ep.group == "console_scripts"}


def test_the_units_are_there():
    names = {os.path.relpath(p, os.path.join(ROOT, "etc", "systemd")) for p in UNITS}
    assert {"fluidvim-orchestrator.service", "fluidvim-api.service", "fluidvim-metrics.service",
            "nova-compute.service.d/fluidvim.conf"} <= names, names


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: os.path.relpath(p, ROOT))
def test_exec_start_is_a_console_script(unit):
    starts = _exec_starts(unit)
    assert len(starts) == 1, f"{unit}: one non-empty ExecStart=, found {starts}"
    argv = starts[0]
    assert argv[0].startswith(VENV_BIN), \
        f"{unit}: ExecStart runs {argv[0]}, not a script of the release venv {VENV_BIN}"
    scripts = _console_scripts()
    name = os.path.basename(argv[0])
    assert name in scripts, f"{unit}: {name} is not a console script of fluidvim ({sorted(scripts)})"
    module, _, func = scripts[name].value.partition(":")
    assert importlib.util.find_spec(module) is not None and func, scripts[name]  # imported below


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: os.path.relpath(p, ROOT))
def test_exec_start_arguments_parse(unit):
    """The unit's arguments with --help appended (after any sub-command, as argparse wants it;
    oslo.config reads --config-file as it parses, so the files are left out: they are the
    operator's). Exit 0 and a usage line: the command took every option the unit gives it."""
    argv = _exec_starts(unit)[0]
    args, it = [], iter(argv[1:])
    for a in it:
        if a == "--config-file":
            next(it)
        elif not a.startswith("--config-file="):
            args.append(a)
    ep = _console_scripts()[os.path.basename(argv[0])]
    module, func = ep.value.split(":")
    code = (f"import sys; from {module} import {func} as m; "
            f"sys.argv = [{os.path.basename(argv[0])!r}] + sys.argv[1:]; sys.exit(m())")
    p = subprocess.run([sys.executable, "-c", code, *args, "--help"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, f"{unit}: {' '.join(argv)} --help: exit {p.returncode}\n{p.stderr[-2000:]}"
    assert "usage:" in p.stdout.lower(), p.stdout[:500]
