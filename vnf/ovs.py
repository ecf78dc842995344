# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Open vSwitch ports for VNF NICs, and a private Open vSwitch for tests and the demo.

A NIC whose :class:`~fluidvim.vnf.spec.NicSpec` has ``ovs`` (the Interface's external ids) is
attached to the OVS bridge ``bridge`` instead of a Linux bridge: its tap becomes an OVS port with
``iface-id`` (the Neutron port), ``attached-mac`` (the NIC's MAC), ``vm-uuid`` and
``iface-status=active`` — what libvirt's ``<virtualport type='openvswitch'>`` sets, and what the
Neutron OVS agent and ovn-controller look for to bind the port. Like libvirt this runs
``ovs-vsctl``, after the tap exists (a cold VNF has booted, a warm shell's tap has been renamed),
and waits until ovs-vswitchd has applied it. The OVS database is ``[vnf] ovsdb_connection``
(:func:`configure`; default: ovs-vsctl's own, ``unix:/var/run/openvswitch/db.sock``).

:class:`OvsServer` runs ovsdb-server and ovs-vswitchd in a directory of their own, with the
userspace (``netdev``) datapath where the kernel has no openvswitch module
(``python -m fluidvim.vnf.ovs start|stop DIR``, ``tools/ovs.sh``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

LOG = logging.getLogger(__name__)

VSCTL_TIMEOUT = 10            # seconds ovs-vsctl waits for ovsdb-server / ovs-vswitchd
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"

_db: str | None = None        # [vnf] ovsdb_connection; None = ovs-vsctl's default


class OvsError(RuntimeError):
    pass


def configure(connection: str | None) -> None:
    """Use the OVS database at ``connection`` (``unix:PATH`` or ``tcp:IP:PORT``)."""
    global _db
    _db = connection or None


def connection() -> str | None:
    return _db


def vsctl(*args: str, db: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    db = db or _db
    argv = ["ovs-vsctl", f"--timeout={VSCTL_TIMEOUT}"] + ([f"--db={db}"] if db else []) + list(args)
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=VSCTL_TIMEOUT + 5)
    except FileNotFoundError:
        raise OvsError("ovs-vsctl is not installed (apt-get install openvswitch-switch)") from None
    except subprocess.TimeoutExpired:
        raise OvsError(f"{' '.join(argv)} timed out: is ovs-vswitchd running?") from None
    if check and res.returncode != 0:
        raise OvsError(f"{' '.join(argv)}: {res.stderr.strip() or res.returncode}")
    return res


def quote(value: str) -> str:
    # ovs-vsctl parses values as OVSDB atoms: quote so ':' '=' ',' survive
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def external_ids(ids: dict, mac: str) -> dict:
    """The external ids of a VNF NIC's Interface: the caller's, plus ``attached-mac`` (the NIC's
    MAC) and ``iface-status`` unless given."""
    out = {"attached-mac": mac, "iface-status": "active"}
    out.update({str(k): str(v) for k, v in ids.items()})
    return out


def add_port(bridge: str, port: str, ids: dict, db: str | None = None) -> None:
    """Make ``port`` (an existing network device) a port of OVS bridge ``bridge`` with Interface
    external ids ``ids``. A port of that name may exist already: Nova hands ``ovs`` VIFs to
    os-vif with ``create_port`` (``delegate_create``), so os-vif made the port (same ids) before
    the tap existed; it is kept (no delete and re-add that the agent would see as a new port)
    and its ids are set again."""
    args = ["--", "--may-exist", "add-port", bridge, port, "--", "set", "Interface", port]
    args += [f"external-ids:{quote(k)}={quote(v)}" for k, v in sorted(ids.items())]
    vsctl(*args, db=db)


def del_port(bridge: str | None, port: str, db: str | None = None) -> None:
    """Remove ``port`` (from ``bridge``, or from whichever bridge has it); no error if absent."""
    vsctl("--if-exists", "del-port", *([bridge] if bridge else []), port, db=db)


def bridge_exists(bridge: str, db: str | None = None) -> bool:
    res = vsctl("br-exists", bridge, db=db, check=False)
    if res.returncode not in (0, 2):
        raise OvsError(f"ovs-vsctl br-exists {bridge}: {res.stderr.strip()}")
    return res.returncode == 0


def list_ports(bridge: str, db: str | None = None) -> list[str]:
    res = vsctl("list-ports", bridge, db=db, check=False)
    return sorted(res.stdout.split()) if res.returncode == 0 else []


def interface(port: str, db: str | None = None) -> dict | None:
    """{column: value} of Interface ``port`` (ofport, external_ids, error, ...) or None."""
    res = vsctl("--format=json", "--", "--if-exists", "list", "Interface", port, db=db)
    data = json.loads(res.stdout or "{}")
    if not data.get("data"):
        return None
    return {h: _atom(v) for h, v in zip(data["headings"], data["data"][0])}


def _atom(v):
    if isinstance(v, list) and v and v[0] == "map":
        return {k: _atom(x) for k, x in v[1]}
    if isinstance(v, list) and v and v[0] == "set":
        return [_atom(x) for x in v[1]]
    if isinstance(v, list) and v and v[0] == "uuid":
        return v[1]
    return v


def add_bridge(bridge: str, datapath_type: str = "netdev", db: str | None = None) -> None:
    vsctl("--may-exist", "add-br", bridge, "--", "set", "Bridge", bridge,
          f"datapath_type={datapath_type}", db=db)


def del_bridge(bridge: str, db: str | None = None) -> None:
    vsctl("--if-exists", "del-br", bridge, db=db)


class OvsServer:
    """ovsdb-server + ovs-vswitchd with their database, sockets, pid files and logs in ``run_dir``.

    ``connection`` is the database for ovs-vsctl, os-vif (``[os_vif_ovs] ovsdb_connection``)
    and the Neutron agent; ``tcp_port`` also listens on ``ptcp:PORT:127.0.0.1``. Bridges made on
    it are host network devices (their internal ports): give them unique names.
    """

    def __init__(self, run_dir: str, tcp_port: int | None = None):
        self.run_dir = os.path.abspath(run_dir)
        self.tcp_port = tcp_port
        self.db_sock = os.path.join(self.run_dir, "db.sock")
        self.connection = f"unix:{self.db_sock}"

    def _path(self, name: str) -> str:
        return os.path.join(self.run_dir, name)

    @property
    def env(self) -> dict:
        """Environment for ovs-ofctl/ovs-appctl and the daemons: OVS_RUNDIR = run_dir."""
        return dict(os.environ, OVS_RUNDIR=self.run_dir, OVS_DBDIR=self.run_dir,
                    OVS_LOGDIR=self.run_dir)

    def running(self) -> bool:
        return all(self._alive(d) for d in ("ovsdb-server", "ovs-vswitchd"))

    def _pid(self, daemon: str) -> int | None:
        try:
            with open(self._path(f"{daemon}.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def _alive(self, daemon: str) -> bool:
        pid = self._pid(daemon)
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True

    def start(self) -> "OvsServer":
        for tool in ("ovsdb-server", "ovs-vswitchd", "ovsdb-tool", "ovs-vsctl"):
            if shutil.which(tool) is None:
                raise OvsError(f"{tool} not found: apt-get install openvswitch-switch")
        os.makedirs(self.run_dir, exist_ok=True)
        if self.running():
            return self
        db = self._path("conf.db")
        if not os.path.exists(db):
            _run(["ovsdb-tool", "create", db, SCHEMA])
        remotes = [f"--remote=punix:{self.db_sock}",
                   "--remote=db:Open_vSwitch,Open_vSwitch,manager_options"]
        if self.tcp_port:
            remotes.append(f"--remote=ptcp:{self.tcp_port}:127.0.0.1")
        env = self.env
        _run(["ovsdb-server", db, *remotes, f"--pidfile={self._path('ovsdb-server.pid')}",
              f"--unixctl={self._path('ovsdb-server.ctl')}",
              f"--log-file={self._path('ovsdb-server.log')}", "--detach"], env=env)
        vsctl("--no-wait", "init", db=self.connection)
        _run(["ovs-vswitchd", self.connection, f"--pidfile={self._path('ovs-vswitchd.pid')}",
              f"--unixctl={self._path('ovs-vswitchd.ctl')}",
              f"--log-file={self._path('ovs-vswitchd.log')}", "--detach"], env=env)
        # without --no-wait ovs-vsctl returns once ovs-vswitchd has applied the change: ready
        vsctl("set", "Open_vSwitch", ".", "external_ids:fluidvim-run-dir=" + quote(self.run_dir),
              db=self.connection)
        return self

    def stop(self, remove: bool = False) -> None:
        """Delete its bridges, stop both daemons; ``remove`` deletes run_dir too."""
        if self._alive("ovsdb-server") and self._alive("ovs-vswitchd"):
            res = vsctl("list-br", db=self.connection, check=False)
            for br in res.stdout.split():
                vsctl("--if-exists", "del-br", br, db=self.connection, check=False)
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pid = self._pid(daemon)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
        if remove:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop(remove=True)


def _run(argv, env=None) -> None:
    res = subprocess.run(argv, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise OvsError(f"{' '.join(argv)}: {res.stderr.strip() or res.returncode}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ("start", "stop", "status"):
        print("usage: python -m fluidvim.vnf.ovs start|stop|status DIR [TCP_PORT]\n"
              "  start: ovsdb-server + ovs-vswitchd (userspace datapath) with their files in DIR;\n"
              "         prints the database connection (unix:DIR/db.sock)\n"
              "  stop:  delete its bridges, stop both daemons", file=sys.stderr)
        return 2
    server = OvsServer(argv[1], int(argv[2]) if len(argv) > 2 else None)
    if argv[0] == "start":
        server.start()
        print(server.connection)
    elif argv[0] == "stop":
        server.stop()
    else:
        print("running" if server.running() else "stopped")
        return 0 if server.running() else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
