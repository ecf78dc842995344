# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Where the launch core looks for its kernel and vhost-user backend by default (vnf/conf.py):
the wheel's images, then the source-tree build, then the distro path; [vnf] options override."""

import os

import pytest

from fluidvim.vnf import conf as vnfconf
from fluidvim.vnf.manager import VNFManager, make_conf


@pytest.fixture
def places(tmp_path, monkeypatch):
    paths = {}
    for where in ("PACKAGED", "SOURCE", "INSTALLED"):
        for what, name in (("KERNEL", "fluidvim-vnf.elf"), ("VHOST_NET", "fluidvim-vhost-net")):
            path = tmp_path / where.lower() / name
            monkeypatch.setattr(vnfconf, f"{where}_{what}", str(path))
            paths[where, what] = path
    return paths


def _make(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF")


@pytest.mark.parametrize("what,default", [("KERNEL", vnfconf.default_kernel),
                                          ("VHOST_NET", vnfconf.default_vhost_net)])
def test_the_first_present_of_wheel_source_distro(places, what, default):
    # none there: the source-tree path (its error says to run make)
    assert default() == str(places["SOURCE", what])
    _make(places["INSTALLED", what])
    assert default() == str(places["INSTALLED", what])
    _make(places["SOURCE", what])
    assert default() == str(places["SOURCE", what])
    _make(places["PACKAGED", what])
    assert default() == str(places["PACKAGED", what])


def test_packaged_dir_is_inside_the_package():
    pkg = os.path.dirname(os.path.abspath(vnfconf.__file__))
    assert vnfconf.PACKAGED_DIR == os.path.join(pkg, "images")
    assert os.path.dirname(vnfconf.PACKAGED_KERNEL) == vnfconf.PACKAGED_DIR


def test_vnf_kernel_option_overrides_the_wheels(places, tmp_path):
    _make(places["PACKAGED", "KERNEL"])
    own = tmp_path / "own.elf"
    _make(own)
    mgr = VNFManager(make_conf(state_dir=str(tmp_path / "state"), run_dir=str(tmp_path / "run"),
                               kernel=str(own)))
    mgr.stop_pool()
    assert mgr.kernel == str(own)
    mgr = VNFManager(make_conf(state_dir=str(tmp_path / "state2"), run_dir=str(tmp_path / "run2")))
    mgr.stop_pool()
    assert mgr.kernel == str(places["PACKAGED", "KERNEL"])
