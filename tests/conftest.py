# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""How the suite runs in parallel (``pytest -n N --dist loadgroup``, what tools/test.sh does).

Every test of one module runs on one worker, in order, so a module's fixtures (a Nova stack, a
Nomad cluster, an agent) are made once, as in a serial run; modules listed in
:data:`SHARED_GROUPS` share a worker (and so a session fixture) with the others of their group.
Host objects already have names unique per run (``testnet.unique_name``, free ports, per-run
RabbitMQ topics and vhosts, private run dirs), so modules on different workers do not meet; a
module that must not run beside another one goes into a group with it here, with the reason.

The grouping is this file's scheduler (:func:`pytest_xdist_make_scheduler`), not
``xdist_group`` marks: pytest-xdist 3.8 marks a group by rewriting the test's node id, which
pytest 9.2 no longer reads (pytest-dev/pytest-xdist#1386), so such marks are silently ignored.

The modules that take longest go to the workers first (:data:`LONGEST_FIRST`), so the run does
not end with one worker busy on a Nova stack while the others idle.
"""

import os

import pytest

# modules that run on one worker together (one session fixture for all of them), and why
SHARED_GROUPS = {
    # a private Open vSwitch each (vnf/ovs.py OvsServer: ovs-vswitchd with the userspace
    # datapath), and the userspace datapath's port is one host device, ``ovs-netdev``: a second
    # ovs-vswitchd beside a running one cannot open its datapath ("failed to open datapath of
    # type netdev: No such device"), so its bridges never come up. Measured: in a parallel run
    # without this group test_ovs_nics (0 of 3 pings) and test_ovn_nics (logical ports never
    # up) failed next to test_nova_e2e's Neutron OVS agent; alone they pass.
    # (test_nova_moves_e2e.py's cloud has Neutron's stand-in, no OVS: it runs on a worker of
    # its own, beside this group; its ports, vhost, run dirs and work dir are its own too.)
    "tests/e2e/test_nova_e2e.py": "ovs",
    "tests/integration/test_ovs_nics.py": "ovs",
    "tests/integration/test_ovn_nics.py": "ovs",
    # one Keystone for both (the session-scoped ``keystone`` fixture of
    # tests/integration/conftest.py) instead of one each
    "tests/integration/test_api_keystone.py": "keystone",
    "tests/integration/test_osc_plugin.py": "keystone",
}

# measured in a parallel run (docs/testing.md): the longest units first (the "ovs" group with
# test_nova_e2e's cloud, then test_nova_moves_e2e's, on two workers at once)
LONGEST_FIRST = (
    "tests/e2e/test_nova_e2e.py",
    "tests/e2e/test_nova_moves_e2e.py",
    "tests/integration/test_ovs_nics.py",
    "tests/integration/test_ovn_nics.py",
    "tests/e2e/test_nomad_multihost.py",
    "tests/integration/test_install.py",
    "tests/integration/test_vnf.py",
)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def group_of(nodeid: str) -> str:
    """The scheduling unit of a test: its module, or the module's shared group."""
    module = _module(nodeid)
    return SHARED_GROUPS.get(module, module)


def _rank(item) -> int:
    try:
        return LONGEST_FIRST.index(_module(item.nodeid))
    except ValueError:
        return len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """On an xdist worker: the longest modules first (a stable sort, so each module's tests
    keep their order). Every worker sorts alike, so the collections still agree."""
    if hasattr(config, "workerinput"):
        items.sort(key=_rank)


@pytest.hookimpl(optionalhook=True)                # xdist's hook: absent without it (tox -e docs)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: xdist's scope scheduler with :func:`group_of` as the scope, units
    handed out in collection order (longest first), not by size."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return ModuleGroupScheduling(config, log)


def pytest_configure(config):
    """``FLUIDVIM_CPU_PROFILE=PATH``: the CPU profile of tests/cpuprofile.py (docs/ci.md)."""
    path = os.environ.get("FLUIDVIM_CPU_PROFILE")
    if path:
        from tests.cpuprofile import CpuProfile

        config.pluginmanager.register(CpuProfile(path), "fluidvim-cpuprofile")
