# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""One cloud of real services for both Nova end-to-end modules of a test run.

``test_nova_e2e`` and ``test_nova_moves_e2e`` started a cloud each (on CI's 2-core machine
150-176 s of a test's setup each: the Keystone, Placement, Glance, Nova and Neutron database
syncs, then the services); they now share the one :class:`TwoComputeStack` of
:data:`SHARED` (tests/conftest.py runs both modules on one worker, test_nova_e2e first).
test_nova_e2e's tests are about one compute: they run with the second one disabled, so the
scheduler never places on it; test_nova_moves_e2e enables it and, as the last user, stops the
cloud when its module ends (a run of either module alone still gets a cloud of its own).
"""

from __future__ import annotations

import os
import tempfile
import time

from fluidvim.vnf import conf as vnfconf
from tests.e2e import nova_services as ns

HOST1 = ns.COMPUTE_HOST
HOST2 = ns.COMPUTE_HOST + "2"
SVC = {HOST1: "nova-compute", HOST2: "nova-compute-2"}
DISABLED = "COMPUTE_STATUS_DISABLED"       # the trait Nova puts on a disabled compute's provider


class TwoComputeStack(ns.Stack):
    """The cloud of :class:`~tests.e2e.nova_services.Stack` plus a second nova-compute."""

    @property
    def compute2_conf(self):
        return self.etc / "nova" / "nova-compute-2.conf"

    def conf_of(self, host: str):
        return self.compute_conf if host == HOST1 else self.compute2_conf

    def write_configs(self) -> None:
        super().write_configs()
        text = self.compute_conf.read_text()
        for old, new in ((f"host = {HOST1}\n", f"host = {HOST2}\n"),
                         (f"state_path = {self.work}/nova\n", f"state_path = {self.work}/nova2\n"),
                         (f"state_dir = {self.work}/vnf\n", f"state_dir = {self.work}/vnf2\n"),
                         (f"run_dir = {self.run_dir}\n", f"run_dir = {self.run_dir}-2\n"),
                         (f"{self.work}/nova/fluidvim-images", f"{self.work}/nova2/fluidvim-images"),
                         (str(self.compute_conf), str(self.compute2_conf))):
            if old not in text and old != str(self.compute_conf):
                raise ns.ServiceError(f"nova-compute.conf has no {old.strip()!r} to change")
            text = text.replace(old, new)
        for d in ("nova2", "vnf2"):
            (self.work / d).mkdir(exist_ok=True)
        self.compute2_conf.write_text(text)

    def start_compute(self, host: str) -> None:
        self._start(SVC[host], [str(ns.BIN / "nova-compute"), "--config-file",
                                str(self.conf_of(host))])

    def start(self) -> None:
        super().start()
        t0 = time.monotonic()
        self.start_compute(HOST2)
        self.wait_log(SVC[HOST2], "Compute node record created", timeout=120)
        nm = [str(ns.BIN / "nova-manage"), "--config-file", str(self.nova_conf)]
        deadline = time.monotonic() + 60
        while HOST2 not in self._run("list_hosts", nm + ["cell_v2", "list_hosts"]):
            self._run("discover_hosts", nm + ["cell_v2", "discover_hosts"], service=True)
            if time.monotonic() > deadline:
                self._fail(SVC[HOST2], "never became discoverable in cell1")
            time.sleep(1)
        self._say(f"second compute {HOST2} up in {time.monotonic() - t0:.1f} s")

    def stop(self) -> None:
        try:
            super().stop()              # every process (both computes), compute 1's VNFs
        finally:
            _destroy_vnfs_of(self.compute2_conf)
            run2 = f"{self.run_dir}-2"
            if os.path.isdir(run2) and not os.listdir(run2):
                os.rmdir(run2)

    def set_enabled(self, host: str, enabled: bool, timeout: float = 60.0) -> None:
        """``openstack compute service set --enable/--disable`` of ``host``'s nova-compute,
        then wait until its Placement provider carries (or no longer carries) the
        COMPUTE_STATUS_DISABLED trait: the scheduler's view, not only the service record."""
        ns.OpenStackCLI(self)("compute", "service", "set", "--enable" if enabled else "--disable",
                              host, "nova-compute", json_out=False)
        s, ep = self.session(), {"service_type": "placement"}
        rp = s.get(f"/resource_providers?name={host}",
                   endpoint_filter=ep).json()["resource_providers"][0]["uuid"]
        deadline = time.monotonic() + timeout
        while True:
            traits = s.get(f"/resource_providers/{rp}/traits", endpoint_filter=ep,
                           headers={"OpenStack-API-Version": "placement 1.6"}).json()["traits"]
            if (DISABLED in traits) != enabled:
                return
            if time.monotonic() > deadline:
                self._fail(SVC[host], f"{DISABLED} still {'on' if enabled else 'off'} its "
                                      f"provider {timeout:.0f} s after the service was "
                                      f"{'enabled' if enabled else 'disabled'}")
            time.sleep(0.5)


def _destroy_vnfs_of(conf) -> None:
    if not conf.exists():
        return
    from oslo_config import cfg

    from fluidvim.vnf.manager import VNFManager
    c = cfg.ConfigOpts()
    vnfconf.register_opts(c)
    c([], default_config_files=[str(conf)])
    mgr = VNFManager(c)
    try:
        mgr.destroy_all()
    finally:
        mgr.close()


class SharedCloud:
    """The run's cloud, started by its first user, stopped by :meth:`close` (or at exit)."""

    def __init__(self) -> None:
        self.stack: TwoComputeStack | None = None

    def get(self) -> TwoComputeStack:
        if self.stack is None:
            # a work dir, ports, vhost and run dir of this run's own: another run, or the
            # services a killed run left, are neither stopped by this one nor in its way
            work = tempfile.mkdtemp(prefix="fvn-nova-e2e-pytest-")
            s = TwoComputeStack(work, kernel=vnfconf.default_kernel(),
                                ports=ns.free_ports(ns.SERVICES + ("openflow",)))
            try:
                s.start()
            except BaseException:
                s.stop()                # the next user starts a cloud of its own
                raise
            self.stack = s
        return self.stack

    def close(self) -> None:
        s, self.stack = self.stack, None
        if s is not None:
            s.stop()


SHARED = SharedCloud()
