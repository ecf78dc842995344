# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures for tests against real QEMU (KVM or TCG), libvirtd, taps and network namespaces."""

import os
import shutil
import uuid

import pytest
import sqlalchemy as sa

from fluidvim.vnf import conf as vnfconf, netdev, spec, testnet
from fluidvim.vnf.manager import VNFManager, make_conf
from fluidvim.vnf.state import LaunchRecord


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        raise pytest.UsageError("integration tests need root (taps, bridges, namespaces): "
                                "run `sudo make test`")
    if not os.path.exists(vnfconf.default_kernel()):
        raise pytest.UsageError("the VNF kernel is not built: run `make -C vnf/kernel`")


@pytest.fixture
def make_manager(tmp_path):
    """Build VNFManagers on a private state dir and run dir; destroys what they leave."""
    run_dir = f"/run/fluidvim-test-{uuid.uuid4().hex[:8]}"
    made = []

    def factory(**overrides):
        opts = dict(state_dir=str(tmp_path / "state"), run_dir=run_dir)
        opts.update(overrides)
        mgr = VNFManager(make_conf(**opts))
        made.append(mgr)
        return mgr

    yield factory
    for mgr in made:
        mgr.stop_pool()
    ids = set()
    if made:
        last = made[-1]
        ids = vnf_ids(last.store)
        for rec in last.store.list():
            try:
                last.destroy(rec.id)
            except Exception:  # noqa: BLE001 - best effort, then report leaks below
                pass
    for mgr in made:
        mgr.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    leaked = leaked_taps(ids)
    assert not leaked, f"taps leaked: {leaked}"


def vnf_ids(store) -> set:
    """Every VNF a launch core's store knows of: launched (ok or not) or still recorded."""
    with store.Session() as s:
        ids = set(s.scalars(sa.select(LaunchRecord.vnf_id)))
    return ids | {r.id for r in store.list()}


def leaked_taps(ids) -> list:
    """Taps of these VNFs that still exist (other fluidvim users on the host are ignored)."""
    return [tap for vid in ids for i in range(spec.MAX_NICS)
            if netdev.exists(tap := spec.tap_for(vid, i))]


@pytest.fixture(params=["qemu", "libvirt"])
def backend(request):
    return request.param


@pytest.fixture
def mgr(make_manager, backend):
    return make_manager(backend=backend)


@pytest.fixture
def net():
    with testnet.TestNet("fvi", 98) as n:
        yield n
