# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Every sample in etc/ is what oslo-config-generator makes from the code (one test per
etc/oslo-config-generator/*.conf, which names the namespaces and the output file)."""

import configparser
import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
GEN_CONFIGS = sorted(glob.glob(os.path.join(ROOT, "etc", "oslo-config-generator", "*.conf")))


def test_there_are_generator_configs():
    names = {os.path.basename(p) for p in GEN_CONFIGS}
    assert {"fluidvim.conf", "fluidvim-orchestrator.conf"} <= names


@pytest.mark.parametrize("gen_conf", GEN_CONFIGS, ids=os.path.basename)
def test_sample_config_is_current(gen_conf, tmp_path):
    cp = configparser.ConfigParser(strict=False)
    with open(gen_conf) as f:                      # namespace= repeats: read it by hand
        namespaces = [line.split("=", 1)[1].strip() for line in f
                      if line.split("=", 1)[0].strip() == "namespace"]
    cp.read(gen_conf)
    sample = os.path.join(ROOT, cp["DEFAULT"]["output_file"])
    out = tmp_path / "sample"
    gen = os.path.join(os.path.dirname(sys.executable), "oslo-config-generator")
    args = [gen, "--wrap-width", cp["DEFAULT"].get("wrap_width", "79"), "--output-file", str(out)]
    for ns in namespaces:
        args += ["--namespace", ns]
    subprocess.run(args, check=True, capture_output=True)
    with open(sample) as f:
        assert f.read() == out.read_text(), \
            f"regenerate: oslo-config-generator --config-file {os.path.relpath(gen_conf, ROOT)}"
