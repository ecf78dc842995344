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


def test_hand_written_nova_snippet_names_only_real_options():
    """etc/nova/nova-compute.conf.sample (what to set, by hand) names only options that exist in
    the generated etc/nova/nova-fluidvim.conf.sample, set or commented out."""
    from oslo_config import cfg

    from fluidvim.nova_driver import conf as nconf
    from fluidvim.vnf import conf as vconf

    conf = cfg.ConfigOpts()
    vconf.register_opts(conf)
    nconf.register_opts(conf)
    group, seen = None, 0
    with open(os.path.join(ROOT, "etc", "nova", "nova-compute.conf.sample")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                group = line[1:-1]
                continue
            key = line.lstrip("#").split("=", 1)[0].strip()
            if group in ("vnf", "fluidvim") and "=" in line and " " not in key:
                assert key in conf[group], f"[{group}] {key} is not an option"
                seen += 1
    assert seen >= 5
