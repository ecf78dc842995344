# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A throwaway one-chassis OVN for tests: the Northbound and Southbound ovsdb-servers, ovn-northd
and ovn-controller, with their databases, sockets, pid files and logs in one directory, on top of a
private Open vSwitch (:class:`fluidvim.vnf.ovs.OvsServer`, userspace ``netdev`` datapath).

This is what Neutron's ML2/OVN deployment runs on a compute node and a controller: Neutron writes
logical switches and ports into the Northbound database; ovn-northd compiles them into logical
flows; ovn-controller claims an OVS Interface whose ``external_ids:iface-id`` names a logical
port (that is all a hypervisor driver does, through os-vif) and programs the integration bridge.
No Neutron here: the tests write the Northbound rows themselves with ``ovn-nbctl``, as its OVN
mechanism driver would. Debian's ``ovn-central`` and ``ovn-host`` provide the binaries
(tools/bootstrap.sh installs them); nothing is started by the packages (no systemd).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid

from fluidvim.vnf import ovs

SCHEMAS = {"nb": "/usr/share/ovn/ovn-nb.ovsschema", "sb": "/usr/share/ovn/ovn-sb.ovsschema"}
TOOLS = ("ovn-northd", "ovn-controller", "ovn-nbctl", "ovn-sbctl", "ovsdb-server", "ovsdb-tool")


def missing() -> str | None:
    """Why OVN cannot run here (a reason for a skip), or None."""
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} not found: apt-get install ovn-central ovn-host (tools/bootstrap.sh)"
    for path in SCHEMAS.values():
        if not os.path.exists(path):
            return f"{path} not found: apt-get install ovn-common"
    return None


class OvnError(RuntimeError):
    pass


class OvnChassis:
    """OVN central (NB, SB, northd) and one chassis (ovn-controller) on ``ovs_server``, whose
    integration bridge is ``bridge`` (created here, datapath ``netdev``)."""

    def __init__(self, run_dir: str, ovs_server: ovs.OvsServer, bridge: str):
        self.run_dir = os.path.abspath(run_dir)
        self.ovs = ovs_server
        self.bridge = bridge
        self.chassis = f"fluidvim-{uuid.uuid4().hex[:8]}"
        self.nb = f"unix:{self._path('nb.sock')}"
        self.sb = f"unix:{self._path('sb.sock')}"
        self._pids: list[str] = []          # pid files of the daemons started, in start order

    def _path(self, name: str) -> str:
        return os.path.join(self.run_dir, name)

    def _daemon(self, name: str, argv: list[str]) -> None:
        # control sockets in OVN_RUNDIR (ovn-controller has no --unixctl); OVS_RUNDIR: where
        # ovn-controller finds the bridges' OpenFlow sockets (<bridge>.mgmt)
        pid = self._path(f"{name}.pid")
        _run([*argv, f"--pidfile={pid}", f"--log-file={self._path(name + '.log')}", "--detach"],
             env=dict(os.environ, OVN_RUNDIR=self.run_dir, OVS_RUNDIR=self.ovs.run_dir))
        self._pids.append(pid)

    def start(self) -> "OvnChassis":
        why = missing()
        if why:
            raise OvnError(why)
        os.makedirs(self.run_dir, exist_ok=True)
        try:
            for db in ("nb", "sb"):
                path = self._path(f"{db}.db")
                _run(["ovsdb-tool", "create", path, SCHEMAS[db]])
                self._daemon(f"ovsdb-{db}", ["ovsdb-server", path,
                                             f"--remote=punix:{self._path(db + '.sock')}"])
            self._daemon("ovn-northd", ["ovn-northd", f"--ovnnb-db={self.nb}",
                                        f"--ovnsb-db={self.sb}"])
            ovs.add_bridge(self.bridge, db=self.ovs.connection)
            # the chassis' identity and where its Southbound database is: what a deployment tool
            # (or Neutron's devstack plugin) writes into the local Open_vSwitch record
            ids = {"system-id": self.chassis, "ovn-remote": self.sb, "ovn-encap-type": "geneve",
                   "ovn-encap-ip": "127.0.0.1", "ovn-bridge": self.bridge,
                   "ovn-bridge-datapath-type": "netdev"}
            ovs.vsctl("set", "Open_vSwitch", ".",
                      *[f"external_ids:{k}={ovs.quote(v)}" for k, v in ids.items()],
                      db=self.ovs.connection)
            self._daemon("ovn-controller", ["ovn-controller", self.ovs.connection])
            self.wait_chassis()
        except BaseException:
            self.stop()
            raise
        return self

    def nbctl(self, *args: str) -> str:
        return _run(["ovn-nbctl", f"--db={self.nb}", *args]).strip()

    def sbctl(self, *args: str) -> str:
        return _run(["ovn-sbctl", f"--db={self.sb}", *args]).strip()

    def wait_chassis(self, timeout_s: float = 30.0) -> None:
        """Until ovn-controller has registered its chassis in the Southbound database."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.sbctl("--bare", "--columns=name", "find", "Chassis",
                          f"name={self.chassis}"):
                return
            time.sleep(0.1)
        raise OvnError(f"ovn-controller did not register chassis {self.chassis} in "
                       f"{timeout_s:.0f} s; see {self._path('ovn-controller.log')}")

    def port_up(self, port: str) -> bool:
        """The logical port's ``up`` column: ovn-controller has claimed and wired it."""
        return self.nbctl("get", "Logical_Switch_Port", port, "up") == "true"

    def bound_chassis(self, port: str) -> str | None:
        """The chassis name the Southbound Port_Binding of ``port`` is bound to, or None."""
        ref = self.sbctl("--bare", "--columns=chassis", "find", "Port_Binding",
                         f"logical_port={port}")
        if not ref:
            return None
        return self.sbctl("get", "Chassis", ref, "name").strip('"')

    def wait_up(self, ports, up: bool = True, timeout_s: float = 30.0) -> None:
        """Until every logical port in ``ports`` has ``up`` = ``up``."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = {p: self.port_up(p) for p in ports}
            if all(v == up for v in state.values()):
                return
            if time.monotonic() > deadline:
                raise OvnError(f"logical ports not up={up} after {timeout_s:.0f} s: {state}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the daemons (last started first), delete the integration bridge and run_dir."""
        for pid_file in reversed(self._pids):
            _kill(pid_file)
        self._pids.clear()
        if self.ovs.running():
            ovs.vsctl("--if-exists", "del-br", self.bridge, db=self.ovs.connection, check=False)
            ovs.vsctl("remove", "Open_vSwitch", ".", "external_ids", "ovn-remote",
                      db=self.ovs.connection, check=False)
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _run(argv: list[str], env: dict | None = None) -> str:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    if res.returncode != 0:
        raise OvnError(f"{' '.join(argv)}: {res.stderr.strip() or res.returncode}")
    return res.stdout


def _kill(pid_file: str) -> None:
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
