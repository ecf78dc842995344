# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Orchestrator processes for e2e tests: start one on a config file, stop them all."""

from __future__ import annotations

import signal
import subprocess
import sys


def spawn(config_file) -> subprocess.Popen:
    """`python -m fluidvim.orchestrator.service --config-file config_file` (its log is the
    config's log_file)."""
    return subprocess.Popen([sys.executable, "-m", "fluidvim.orchestrator.service",
                             "--config-file", str(config_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def stop(procs, timeout: float = 60.0) -> None:
    """SIGTERM to every live one at once, then wait for each; one that does not end is killed."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
