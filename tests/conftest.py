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

The ``ovs`` group waits for the Nova stage's Open vSwitch test: tools/test.sh runs it beside
pytest and holds an exclusive ``flock`` on ``$FLUIDVIM_OVS_LOCK`` while it does; the first test
of the group takes the lock before it starts (:func:`pytest_runtest_protocol`). Without that
variable (pytest run by hand) nothing waits.
"""

import fcntl
import os
import time

import pytest

# modules that run on one worker together (one session fixture for all of them), and why
SHARED_GROUPS = {
    # a private Open vSwitch each (vnf/ovs.py OvsServer: ovs-vswitchd with the userspace
    # datapath), and the userspace datapath's port is one host device, ``ovs-netdev``: a second
    # ovs-vswitchd beside a running one cannot open its datapath ("failed to open datapath of
    # type netdev: No such device"), so its bridges never come up. Measured: in a parallel run
    # without this group test_ovs_nics (0 of 3 pings) and test_ovn_nics (logical ports never
    # up) failed next to test_nova_e2e's Neutron OVS agent; alone they pass.
    "tests/e2e/test_nova_e2e.py": "ovs",
    "tests/e2e/test_nova_moves_e2e.py": "ovs",
    "tests/integration/test_ovs_nics.py": "ovs",
    "tests/integration/test_ovn_nics.py": "ovs",
    # one Keystone for both (the session-scoped ``keystone`` fixture of
    # tests/integration/conftest.py) instead of one each
    "tests/integration/test_api_keystone.py": "keystone",
    "tests/integration/test_osc_plugin.py": "keystone",
}

# the longest scheduling units first, measured (Σ of each module's test durations, parallel runs of
# docs/testing.md): the "ovs" group (both Nova e2e stacks, then the OVS and OVN tests: the longest
# chain, so it must start first), the "keystone" group, then the longest modules
LONGEST_FIRST = (
    "tests/e2e/test_nova_e2e.py",
    "tests/e2e/test_nova_moves_e2e.py",
    "tests/integration/test_ovs_nics.py",
    "tests/integration/test_ovn_nics.py",
    "tests/integration/test_osc_plugin.py",
    "tests/integration/test_api_keystone.py",
    "tests/integration/test_install.py",
    "tests/integration/test_vnf.py",
    "tests/e2e/test_nomad_multihost.py",
    "tests/unit/test_api_fuzz.py",
    "tests/integration/test_ns_lifecycle.py",
    "tests/integration/test_orchestrator.py",
    "tests/integration/test_mano.py",
    "tests/integration/test_faults_load.py",
    "tests/unit/test_ns_operation_lock.py",
    "tests/unit/test_orchestrator_ha.py",
    "tests/unit/test_orchestrator_placement.py",
    "tests/e2e/test_nomad.py",
    "tests/integration/test_hostpower.py",
    "tests/e2e/test_orchestrator_ha.py",
)

# the variable tools/test.sh sets to its lock file while Nova's test_ovs_vifs runs, and how long
# the "ovs" group waits for it (that stage takes ~30 s; a Nova test that hangs must not hang pytest)
OVS_LOCK_ENV = "FLUIDVIM_OVS_LOCK"
OVS_LOCK_WAIT_S = 900
_ovs = {"lock": None, "refused": None}


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


def _wait_for_ovs(path: str) -> None:
    """Take a shared lock on ``path`` (held until this process ends), or note why not."""
    lock = open(path, "rb")     # held for the rest of the run
    deadline = time.monotonic() + OVS_LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            _ovs["lock"] = lock
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                _ovs["refused"] = (
                    f"Nova's Open vSwitch test still holds {OVS_LOCK_ENV}={path} after "
                    f"{OVS_LOCK_WAIT_S} s (tools/test.sh's nova-ovs stage: its output follows "
                    "pytest's): this test's ovs-vswitchd cannot run beside that one")
                return
            time.sleep(1)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Before the first test of the ``ovs`` group: wait until Nova's OVS test is over (outside
    the test's timeout, which starts inside this wrapper)."""
    path = os.environ.get(OVS_LOCK_ENV)
    if path and group_of(item.nodeid) == "ovs" and _ovs["lock"] is None and not _ovs["refused"]:
        _wait_for_ovs(path)
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if _ovs["refused"] and group_of(item.nodeid) == "ovs":
        pytest.fail(_ovs["refused"], pytrace=False)
