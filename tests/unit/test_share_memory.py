# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""share_vnf_memory sets the prctl flags QEMU inherits, and clears them (in a child process, so the
test runner's own flags stay as they were)."""

import subprocess
import sys

import pytest

PROBE = """
import sys
from fluidvim.vnf.backends import share_vnf_memory
def thp():
    for line in open("/proc/self/status"):
        if line.startswith("THP_enabled:"):
            return line.split()[1]
failed = share_vnf_memory(True)
if failed:
    print("refused", failed); sys.exit(3)
on = thp()
# a child started now inherits it (fork + exec), as every QEMU does
child = __import__("subprocess").run(["grep", "THP_enabled", "/proc/self/status"],
                                      capture_output=True, text=True).stdout.split()[1]
share_vnf_memory(False)
print(on, child, thp())
"""


def test_flags_set_inherited_by_children_and_cleared():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    if r.returncode == 3 or "THP_enabled" not in open("/proc/self/status").read():
        pytest.skip(f"prctl refused or unsupported here: {r.stdout.strip()}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "0", "1"]
