# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Fixtures for tests against real QEMU (KVM or TCG), libvirtd, taps and network namespaces."""

import contextlib
import os
import shutil
import uuid

import pytest
import sqlalchemy as sa

from fluidvim.vnf import conf as vnfconf, limits, netdev, spec, testnet
from fluidvim.vnf.manager import VNFManager, make_conf


def host_missing() -> str | None:
    """Why no integration test can run on this host (None: they can)."""
    if os.geteuid() != 0:
        return "integration tests need root (taps, bridges, namespaces): run `sudo make test`"
    if not os.path.exists(vnfconf.default_kernel()):
        return "the VNF kernel is not built: run `make -C unikernel`"
    return None


def libvirt_missing(uri: str = "qemu:///system") -> str | None:
    """Why the libvirt backend cannot run here (None: libvirtd answers on ``uri``)."""
    try:
        import libvirt
    except ImportError:
        return "libvirt-python is not installed: pip install -c constraints.txt 'fluidvim[libvirt]'"
    try:
        libvirt.open(uri).close()
    except libvirt.libvirtError as e:
        return f"libvirtd does not answer on {uri} ({e}): tools/bootstrap.sh starts it"
    return None


def uses_libvirt(item) -> bool:
    """A test of the libvirt backend: parametrized with backend=libvirt, or marked ``libvirt``."""
    callspec = getattr(item, "callspec", None)
    return (callspec is not None and callspec.params.get("backend") == "libvirt") or \
        item.get_closest_marker("libvirt") is not None


def pytest_collection_modifyitems(config, items):
    """Skip, with the reason, what this host cannot run: every test without root or the VNF
    kernel, the libvirt backend's without libvirtd. KVM is not a prerequisite: without a working
    /dev/kvm the launch core uses TCG and every test still runs. Under CI (CI set) a missing
    prerequisite is an error, not a skip: CI's machine is set up by tools/bootstrap.sh, and a run
    that skipped its integration tests must not pass."""
    why = host_missing()
    libvirt_items = [i for i in items if uses_libvirt(i)]
    why_libvirt = libvirt_missing() if libvirt_items and why is None else None
    if os.environ.get("CI") and (why or why_libvirt):
        raise pytest.UsageError(f"CI: {why or why_libvirt}")
    if why:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=why))
    elif why_libvirt:
        for item in libvirt_items:
            item.add_marker(pytest.mark.skip(reason=why_libvirt))


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
    with store.engine.connect() as conn:
        ids = set(conn.execute(sa.text("SELECT vnf_id FROM launches")).scalars())
    return ids | {r.id for r in store.list()}


def leaked_taps(ids) -> list:
    """Taps of these VNFs that still exist (other fluidvim users on the host are ignored)."""
    return [tap for vid in ids for i in range(limits.MAX_NICS)
            if netdev.exists(tap := spec.tap_for(vid, i))]


PASSWORD = "fva-secret"       # of the Keystone users below


@pytest.fixture(scope="session")
def keystone(tmp_path_factory):
    """Keystone alone (tests/e2e/nova_services.Stack.start_keystone: SQLite, Fernet tokens), one
    per test run (per worker under xdist; tests/conftest.py puts its users in one group), with
    projects A and B and the users of tests/integration/test_api_keystone.py's docstring. Names
    carry a random tag; a catalog entry a test registers it deletes again.
    """
    from tests.e2e import nova_services as ns

    work = tmp_path_factory.mktemp("keystone")
    stack = ns.Stack(work / "cloud", ports=ns.free_ports(("keystone",)), neutron=False)
    try:
        stack.start_keystone()
        s = stack.session()
        kw = {"endpoint_filter": {"service_type": "identity", "interface": "public"}}
        tag = uuid.uuid4().hex[:6]
        roles = {r["name"]: r["id"] for r in s.get("/roles", **kw).json()["roles"]}
        projects = {}
        for p in ("a", "b"):
            projects[p] = s.post("/projects", json={"project": {
                "name": f"fva-{p}-{tag}", "domain_id": "default"}}, **kw).json()["project"]
        users = {}
        for name, project, role in (("alice", "a", "member"), ("rita", "a", "reader"),
                                    ("bob", "b", "member")):
            u = s.post("/users", json={"user": {"name": f"{name}-{tag}", "password": PASSWORD,
                                                "domain_id": "default"}}, **kw).json()["user"]
            s.put(f"/projects/{projects[project]['id']}/users/{u['id']}/roles/{roles[role]}",
                  **kw)
            users[name] = (u["name"], projects[project]["name"])
        users["admin"] = ("admin", "admin")
        stack.users, stack.projects = users, projects
        yield stack
    finally:
        stack.stop()


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


@contextlib.contextmanager
def orchestrator_env(tmp_path, prefix: str, subnet: int):
    """Factory of orchestrators (real RabbitMQ, local zone) sharing one database and run dir, so
    a restart is ``start()`` again. Topics, run dir (/run/fluidvim-<prefix>-*) and the load
    probe's netns use ``prefix``; on exit every VNF the local zone started is removed and no tap
    may be left."""
    from fluidvim.evaluator import cache as pcache, probes, stage1
    from fluidvim.orchestrator import conf as orchconf
    from fluidvim.orchestrator.db import Store
    from fluidvim.orchestrator.rpcapi import OrchestratorAPI
    from fluidvim.orchestrator.service import Orchestrator

    tag = uuid.uuid4().hex[:8]
    run_dir = f"/run/fluidvim-{prefix}-{tag}"
    opts = dict(connection=f"sqlite:///{tmp_path}/orch.sqlite", topic=f"{prefix}-{tag}",
                notification_topic=f"{prefix}_slots_{tag}", agent_interval=0.2,
                slot_update_min_interval=0.1, rpc_timeout=60.0,
                vnf_state_dir=str(tmp_path / "state"), vnf_run_dir=run_dir)
    made, apis = [], []

    def small_stage1(store):
        """The real stage-1 runner with a short load probe on this prefix's own netns."""
        load = probes.LoadProbe(sessions=(1, 10, 50), step_s=0.5, warmup_s=0.2, drain_s=0.3,
                                prefix=f"{prefix}lp", subnet=subnet, valid_for_s=3600)
        return stage1.Stage1Runner(pcache.ProbeCache(store.engine),
                                   [probes.StaticProbe(), probes.BootProbe(n=2), load])

    class Env:
        conf = None
        name = tag

        def start(self, **kw):
            conf = orchconf.make_conf(**{**opts, **kw})
            orchconf.disable_rabbit_heartbeat(conf)      # fast transport cleanup between tests
            self.conf = conf
            store = Store(conf.orchestrator.connection)
            o = Orchestrator(conf, stage1=small_stage1(store))
            store.close()
            o.start(server=f"{prefix}-{tag}")
            made.append(o)
            return o

        def api(self):
            a = OrchestratorAPI(self.conf)
            apis.append(a)
            return a

    ids: list = []
    try:
        yield Env()
    finally:
        # also when the test failed: its VNFs, run dir and cgroups must not outlive it
        try:
            for a in apis:
                a.close()
            for o in made:
                o.stop()
        finally:
            mgr = VNFManager(orchconf.make_conf(**opts))
            ids = vnf_ids(mgr.store)
            for rec in mgr.store.list():
                mgr.destroy(rec.id)
            mgr.close()
            for o in made:
                o.close()
            shutil.rmtree(run_dir, ignore_errors=True)
    assert not leaked_taps(ids)
