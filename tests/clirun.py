# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A console script's entry point run in the test's own process.

Each ``openstack`` process loads every installed client plugin: ~1.6 CPU-s a run on a quiet
2-core host, ~3 at load 6, a ``fluidvim`` one ~1-1.8 (docs/ci.md). A test that runs them many
times runs the first call as the console script (a subprocess: the program as the user has it)
and the others through :func:`run_in_process` (:func:`run` does both): the same entry point
(``openstackclient.shell.main``, ``fluidvim.cmd.cli.main``), the same argv, the given
environment as the whole ``os.environ``, stdout and stderr captured, the exit status as the
process would have it. Users:
tests/integration/test_osc_plugin.py, tests/e2e/nova_services.py (``OpenStackCLI``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from unittest import mock


def main_of(prog: str):
    """The function the console script ``prog`` calls (setup.py / python-openstackclient)."""
    if prog == "openstack":
        from openstackclient import shell
        from openstackclient.common.clientmanager import ClientManager
        from osc_lib.clientmanager import ClientCache

        # osc keeps each plugin's client on the ClientManager class (ClientCache), made once
        # per process as a console script runs once: each run here makes its own
        for cls in ClientManager.__mro__:
            for attr in vars(cls).values():
                if isinstance(attr, ClientCache):
                    attr._handle = None
        return shell.main
    from fluidvim.cmd import cli
    return cli.main


def run_in_process(prog: str, argv, env: dict) -> subprocess.CompletedProcess:
    """``prog argv`` as its console script runs it, in this process: ``env`` as the whole
    environment, stdout and stderr captured, the exit status from the return or SystemExit;
    the root logger (which both programs configure) as it was before. No timeout: the
    caller's test has pytest-timeout's."""
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    try:
        with mock.patch.dict(os.environ, env, clear=True), _closing_managers(prog), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main_of(prog)(list(argv))
            except SystemExit as e:        # what the interpreter makes of sys.exit(e.code)
                code = e.code if isinstance(e.code, int) or e.code is None else 1
                if code == 1 and not isinstance(e.code, int):
                    print(e.code, file=sys.stderr)
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers
    return subprocess.CompletedProcess([prog, *argv], code or 0, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _closing_managers(prog: str):
    """``fluidvim``'s commands leave their VNFManager to the process's exit, which ends its
    QEMU watchers (a VNF dying later must not be recorded by a CLI that has returned): here
    each manager a command made is closed when it returns."""
    if prog != "fluidvim":
        yield
        return
    from fluidvim.vnf import manager

    made, init = [], manager.VNFManager.__init__

    def recording_init(self, *args, **kw):
        init(self, *args, **kw)
        made.append(self)
    with mock.patch.object(manager.VNFManager, "__init__", recording_init):
        try:
            yield
        finally:
            for mgr in made:
                mgr.close()


_console_script_ran: set = set()


def run(prog: str, argv, env: dict | None = None, timeout: float = 180
        ) -> subprocess.CompletedProcess:
    """``prog argv`` with ``env`` (default: this process's): the first run of ``prog`` in this
    process as its console script (beside ``sys.executable``; ``timeout`` applies to it), the
    others through :func:`run_in_process`."""
    env = dict(os.environ) if env is None else env
    if prog in _console_script_ran:
        return run_in_process(prog, argv, env)
    _console_script_ran.add(prog)
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), prog), *argv],
                          capture_output=True, text=True, env=env, timeout=timeout)
