# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""One version: fluidvim/__init__.py. setup.py reads it, the Nova driver reports it
(hypervisor_version), and the artefacts built outside Python (the Nomad plugin, the VNF kernel)
must say the same."""

import importlib.metadata
import json
import os
import re
import subprocess
import sys

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
    # the plugin's constant (its own Go test checks it against contract/vectors/limits.json too)
    assert _grep("nomad_driver/unikernel/driver.go", r'PluginVersion\s*=\s*"([^"]+)"') == \
        [fluidvim.__version__]
    # the kernel has no copy: its Makefile reads fluidvim/__init__.py into -DFLUIDVIM_VERSION
    assert _grep("unikernel/Makefile", r"^VERSION_PY := .*(fluidvim/__init__\.py)\)$") == \
        ["fluidvim/__init__.py"]
    assert _grep("unikernel/src/version.h", r"^#define VERSION (FLUIDVIM_VERSION)$") == \
        ["FLUIDVIM_VERSION"]
    src = os.path.join(ROOT, "unikernel", "src")
    for d, _, names in os.walk(src):             # src/elements/ too
        for name in names:
            with open(os.path.join(d, name), encoding="utf-8") as f:
                assert not re.search(r'#define\s+VERSION\s+"', f.read()), name


def test_protocol_vectors_ready_example_says_the_package_version():
    """contract/vectors/protocol.json's `ready` line is written with fluidvim.__version__."""
    tool = os.path.join(ROOT, "tools", "gen_protocol_vectors.py")
    assert subprocess.run([sys.executable, tool, "--check"]).returncode == 0, \
        "contract/vectors/protocol.json is stale: run tools/gen_protocol_vectors.py"
    with open(os.path.join(ROOT, "contract", "vectors", "protocol.json")) as f:
        ready = json.loads(json.load(f)["guest_lines"][0]["line"])
    assert ready["ev"] == "ready" and ready["version"] == fluidvim.__version__


def test_built_kernel_says_the_package_version():
    """What `make -C unikernel` put into the image (`ready`'s version, the console line)."""
    result = subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "unikernel")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    with open(os.path.join(ROOT, "unikernel", "build", "fluidvim-vnf.elf"), "rb") as f:
        image = f.read()
    assert b"\0" + fluidvim.__version__.encode() + b"\0" in image
