# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""The README's main command, `fluidvim demo` (what `make demo` runs), end to end from the
checkout: VNFs launched cold and warm, traffic through them, the orchestrator's placement, and
the network service from the sample SOL006 descriptors in etc/mano. It found the descriptors
by a path that broke when the entry points moved to fluidvim/cmd/ and nothing noticed."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the demo needs root (namespaces, taps)")


def test_the_demo_runs_from_the_checkout(tmp_path):
    cli = os.path.join(os.path.dirname(sys.executable), "fluidvim")
    r = subprocess.run([cli, "demo", "--launches", "3", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "network service from SOL006 descriptors" in out
    assert "ping 3/3, tcp/80 connected, tcp/22 blocked" in out
    assert "VNFs, bridges and services removed" in out
    assert any(f.endswith(".png") for f in os.listdir(tmp_path)), os.listdir(tmp_path)
