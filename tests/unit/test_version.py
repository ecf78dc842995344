# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""One version: fluidvim/__init__.py. setup.py reads it, the Nova driver reports it
(hypervisor_version), and the artefacts built outside Python (the Nomad plugin, the VNF kernel)
must say the same."""

import importlib.metadata
import os
import re

import fluidvim

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _grep(path, pattern):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        found = re.findall(pattern, f.read(), re.M)
    assert found, f"no version in {path}"
    return found


def test_installed_metadata_is_the_package_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", fluidvim.__version__)
    assert importlib.metadata.version("fluidvim") == fluidvim.__version__


def test_setup_reads_the_package_version():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        setup_py = f.read()
    assert "version=VERSION," in setup_py and 'version="' not in setup_py


def test_nomad_plugin_and_vnf_kernel_say_the_same():
    assert _grep("nomad_driver/unikernel/driver.go", r'PluginVersion\s*=\s*"([^"]+)"') == \
        [fluidvim.__version__]
    for src in ("vnf/kernel/src/main.c", "vnf/kernel/src/control.c"):
        assert _grep(src, r'^#define VERSION "([^"]+)"') == [fluidvim.__version__], src
