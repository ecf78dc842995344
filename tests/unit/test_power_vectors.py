# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""contract/vectors/attribution.json is what fluidvim.orchestrator.power.attribution.attribute
gives today (the Go Nomad plugin's port is tested against it: nomad_driver/unikernel/power_test.go),
and every case conserves the host's watts."""

import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_attribution_vectors_are_current():
    tool = os.path.join(ROOT, "tools", "gen_power_vectors.py")
    assert subprocess.run([sys.executable, tool, "--check"]).returncode == 0, \
        "contract/vectors/attribution.json is stale: run tools/gen_power_vectors.py"


def test_attribution_vectors_conserve_the_host_watts():
    with open(os.path.join(ROOT, "contract", "vectors", "attribution.json")) as f:
        cases = json.load(f)["cases"]
    assert len(cases) >= 5
    for c in cases:
        out = c["out"]
        total = sum(v["watts"] for v in out["vnfs"].values()) + out["unattributed_watts"]
        assert abs(total - c["in"]["host_watts"]) <= 1e-9 * c["in"]["host_watts"], c["name"]
        assert set(out["vnfs"]) == {v["key"] for v in c["in"]["vnfs"]}, c["name"]
