# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""hostcheck.kvm_problem on a stand-in device file with the ownerships a host can have."""

import grp
import os
import pwd

import pytest

from fluidvim.vnf import hostcheck

USER = "libvirt-qemu"


@pytest.fixture
def dev(tmp_path):
    try:
        pwd.getpwnam(USER)
        grp.getgrnam("kvm")
    except KeyError:
        pytest.skip(f"needs the {USER} user and the kvm group (libvirt-daemon-system)")
    if os.geteuid() != 0:
        pytest.skip("needs root to chown the stand-in device")
    path = tmp_path / "kvm"
    path.write_text("")
    return str(path)


def test_fresh_machine_root_only_device_is_a_problem_naming_the_fix(dev):
    os.chown(dev, 0, 0)
    os.chmod(dev, 0o600)
    problem = hostcheck.kvm_problem(dev, user=USER)
    assert problem and "root:root 0600" in problem
    assert f"chgrp kvm {dev}; chmod 0660 {dev}" in problem


def test_udev_ownership_is_fine(dev):
    os.chown(dev, 0, grp.getgrnam("kvm").gr_gid)
    os.chmod(dev, 0o660)
    assert hostcheck.kvm_problem(dev, user=USER) is None


def test_group_without_write_is_a_problem(dev):
    os.chown(dev, 0, grp.getgrnam("kvm").gr_gid)
    os.chmod(dev, 0o640)
    assert "0640" in hostcheck.kvm_problem(dev, user=USER)


def test_no_device_means_tcg_not_a_problem(tmp_path):
    assert hostcheck.kvm_problem(str(tmp_path / "absent"), user=USER) is None


def test_caps_cache_stamp_sees_a_rewrite(tmp_path):
    f = tmp_path / "abc.xml"
    f.write_text("<qemuCaps/>")
    before = hostcheck.caps_cache_stamp(str(tmp_path))
    os.utime(f, ns=(1, before[str(f)] + 1_000_000))
    after = hostcheck.caps_cache_stamp(str(tmp_path))
    assert list(before) == [str(f)] and after[str(f)] != before[str(f)]
