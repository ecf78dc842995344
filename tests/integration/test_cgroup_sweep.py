# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A launch core that restarts removes the empty per-VNF cgroups left by VNFs nobody cleaned up
(a core or test killed with -9 whose QEMUs died later), and only those: never a group with a
process in it, one of a VNF in its state store, or one so young that another core on this host
may not yet have moved its QEMU in (vnf/cgroups.py sweep, run by VNFManager.recover)."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest

from fluidvim.vnf import cgroups


@pytest.fixture
def groups():
    version, why = cgroups.mode()
    if not version or os.geteuid() != 0:
        pytest.skip(f"cannot manage cgroups here: {why or 'not root'}")
    made, procs = [], []

    def make(aged: bool, busy: bool = False) -> str:
        name = str(uuid.uuid4())
        dirs = cgroups.create(name, 32, 1)
        made.append(dirs)
        if busy:
            p = subprocess.Popen(["sleep", "600"])
            procs.append(p)
            cgroups.add(dirs, p.pid)
        if aged:            # as if made two hours ago (a leaf group's mtime is its mkdir)
            old = time.time() - 7200
            for d in dirs:
                os.utime(d, (old, old))
        return name

    yield make
    for p in procs:
        p.kill()
        p.wait()
    for dirs in made:
        cgroups.remove(dirs)


def test_restart_sweeps_only_orphaned_empty_groups(make_manager, groups):
    orphan = groups(aged=True)
    young = groups(aged=False)
    busy = groups(aged=True, busy=True)
    mgr = make_manager()
    summary = mgr.recover()
    assert cgroups.dirs(orphan) == []
    assert summary["swept"] >= len(cgroups._slice_dirs())     # at least the orphan's dirs
    assert cgroups.dirs(young), "a group younger than SWEEP_MIN_AGE_S was removed"
    assert cgroups.dirs(busy), "a group with a process in it was removed"


def test_sweep_keeps_the_groups_of_known_vnfs(groups):
    known = groups(aged=True)
    orphan = groups(aged=True)
    cgroups.sweep(keep={known})
    assert cgroups.dirs(known)
    assert cgroups.dirs(orphan) == []
