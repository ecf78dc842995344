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

tools/test.sh starts pytest while two things it needs run beside it (:data:`WAITS`): Nova's Open
vSwitch test, which the ``ovs`` group must not overlap, and the Nomad agent's build, which the
modules that run Nomad need. It holds an exclusive ``flock`` on a file for each while it runs
(``$FLUIDVIM_OVS_LOCK``, ``$FLUIDVIM_NOMAD_LOCK``); the first test of a module that needs one
takes it, shared, before it starts (:func:`pytest_runtest_protocol`, outside the test's
timeout), so only those modules wait. Without the variables (pytest run by hand) nothing waits.
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

# what a module may wait for: the variable naming tools/test.sh's lock file, how long to wait (a
# hung stage must not hang pytest), and what holds it. Nova's test_ovs_vifs takes ~30 s; a cold
# Nomad build ~5 min on 2 cores.
WAITS = {
    "ovs": ("FLUIDVIM_OVS_LOCK", 900,
            "Nova's Open vSwitch test (tools/test.sh's nova-ovs stage, its output follows "
            "pytest's): this test's ovs-vswitchd cannot run beside that one"),
    "nomad": ("FLUIDVIM_NOMAD_LOCK", 1800,
              "the Nomad agent's build (tools/build-nomad.sh, started by tools/test.sh; its log "
              "is named at nomad-wait)"),
}
_held: dict = {}        # what -> the open, locked file (held until this process ends)
_refused: dict = {}     # what -> why this process gave up waiting
_nomad_users: dict = {}     # module name -> whether it runs the Nomad agent


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


def _uses_nomad(item) -> bool:
    """A module runs the Nomad agent if it is tests/e2e/test_nomad.py (marked ``nomad``) or holds
    that module (``tn.NOMAD``) or the cluster helper."""
    mod = getattr(item, "module", None)
    if mod is None:
        return False
    if mod.__name__ not in _nomad_users:
        _nomad_users[mod.__name__] = item.get_closest_marker("nomad") is not None or any(
            getattr(v, "__name__", None) == "tests.e2e.test_nomad"
            or getattr(v, "__module__", None) == "tests.e2e.nomad_cluster"
            for v in vars(mod).values())
    return _nomad_users[mod.__name__]


def _needs(item) -> list[str]:
    return [what for what, needed in (("ovs", group_of(item.nodeid) == "ovs"),
                                      ("nomad", _uses_nomad(item))) if needed]


def _wait_for(what: str, path: str) -> None:
    """Take a shared lock on ``path`` (kept), or note why not."""
    env, limit, holder = WAITS[what]
    lock = open(path, "rb")     # held for the rest of the run
    deadline = time.monotonic() + limit
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            _held[what] = lock
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                _refused[what] = f"still held after {limit} s: {env}={path}, by {holder}"
                return
            time.sleep(1)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Before the first test that needs what tools/test.sh still runs: wait for it (outside the
    test's timeout, which starts inside this wrapper)."""
    for what in _needs(item):
        path = os.environ.get(WAITS[what][0])
        if path and what not in _held and what not in _refused:
            _wait_for(what, path)
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for what in _needs(item):
        if what in _refused:
            pytest.fail(_refused[what], pytrace=False)
