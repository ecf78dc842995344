# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""etc/fluidvim.conf.sample is what oslo-config-generator makes from the code."""

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_sample_config_is_current(tmp_path):
    out = tmp_path / "sample"
    gen = os.path.join(os.path.dirname(sys.executable), "oslo-config-generator")
    subprocess.run([gen, "--namespace", "fluidvim.vnf", "--namespace", "oslo.log",
                    "--wrap-width", "79", "--output-file", str(out)], check=True)
    with open(os.path.join(ROOT, "etc", "fluidvim.conf.sample")) as f:
        assert f.read() == out.read_text(), \
            "regenerate: oslo-config-generator --config-file etc/oslo-config-generator/fluidvim.conf"
