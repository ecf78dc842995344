# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A real multi-node Nomad cluster on this one machine, for tests: one server agent and N client
agents, each client with the fluidvim ``unikernel`` plugin.

Every agent has its own data dir and ports (free ports in 20000-29999 chosen per run);
every client has its own node name, plugin process (Nomad starts one per client), ``run_dir``
under /run, warm pool (the plugin's ``warm_pool`` block) and cpuset ``cgroup_parent``, and
optionally its own network namespace (``netns``: a veth to a bridge the server listens on, its
own IP address; its VNFs' taps and QEMUs live in that namespace). Names carry
a random tag (:func:`fluidvim.vnf.testnet.unique_name`), so two runs (or a leftover of a killed
one) do not meet. :meth:`NomadCluster.close` stops the clients and the server, kills any QEMU
left under the clients' run dirs (pool shells outlive a client by design) and removes the run
dirs, cgroups, namespaces, veths and the bridge.

Usage (a pytest fixture does this)::

    with NomadCluster(tmp_path, clients=3, warm_pool=(1, 1)) as cluster:
        nodes = cluster.wait_ready()          # {client name: node dict}
        zone = NomadZone("nomad-dc1", address=cluster.address)

The agent is the one tests/e2e/test_nomad.py uses (``$FLUIDVIM_NOMAD``, built by
tools/build-nomad.sh); the plugin is built from nomad_driver/ once per cluster.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

from fluidvim.vnf import testnet
from tests.e2e import test_nomad as tn

CGROUP_ROOT = Path("/sys/fs/cgroup")
PLUGIN_BLOCK_RE = r'(?ms)^plugin "fluidvim-unikernel" \{.*?^\}\n'


@dataclasses.dataclass
class Client:
    name: str                   # the Nomad node name (node.unique.name)
    run_dir: str                # the plugin's run_dir (QEMU sockets, console logs)
    data_dir: Path
    ports: tuple                # http, rpc, serf
    cgroup_parent: str
    config: Path
    netns: str | None = None    # the client's own network namespace (None: this one)
    ip: str = "127.0.0.1"       # what it binds and advertises
    proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"http://{self.ip}:{self.ports[0]}"

    def links(self) -> set[str]:
        """Names of the network interfaces in the client's namespace."""
        if self.netns is None:
            return set(os.listdir("/sys/class/net"))
        r = subprocess.run(["ip", "netns", "exec", self.netns, "ls", "/sys/class/net"],
                           capture_output=True, text=True, check=True, timeout=10)
        return set(r.stdout.split())


def _plugin_block(tmp: Path, plugin_dir: Path, run_dir: str, warm_pool: str | None) -> str:
    """The plugin block of etc/nomad/client.hcl as test_nomad.client_config adapts it (kernel,
    run_dir, 1 s fingerprint, the warm pool)."""
    text = tn.client_config(tmp, plugin_dir, run_dir, warm_pool)
    m = re.search(PLUGIN_BLOCK_RE, text)
    assert m and run_dir in m.group(0), "etc/nomad/client.hcl changed: no plugin block"
    return m.group(0)


def _free_subnet() -> str:
    """A 10.250.x /24 prefix no interface of this namespace has an address in."""
    import random
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True,
                          check=True).stdout
    for _ in range(100):
        net = f"10.250.{random.randrange(1, 255)}"
        if f" {net}." not in used:
            return net
    raise RuntimeError("no free 10.250.x.0/24")


class NomadCluster:
    """One Nomad server and ``clients`` client agents with the unikernel plugin (see module doc).

    ``warm_pool``: (size, nics) of every client's warm pool, or None for no pool; ``meta``: a
    callable client index -> node meta dict (e.g. a power curve per node); ``netns``: per client
    (or for all), run it in a network namespace of its own, on a veth to a bridge the server
    listens on (its own IP address; its VNFs' taps live there, so NICs it plugs name bridges in
    that namespace - unplugged NICs need none)."""

    def __init__(self, tmp: Path, clients: int = 3, warm_pool: tuple | None = (1, 1),
                 meta=None, datacenter: str = "dc1", netns: bool | tuple = False):
        self.tmp = Path(tmp)
        self.tag = testnet.unique_name("fvmc", room=3)       # <tag>br, <tag>n<i>, <tag>v<i>
        netns = tuple(netns) if isinstance(netns, (tuple, list)) else (bool(netns),) * clients
        assert len(netns) == clients and clients <= 10, netns
        self.bridge = self.subnet = None
        if any(netns):
            self.bridge, self.subnet = f"{self.tag}br", _free_subnet()
        self.server_ip = f"{self.subnet}.1" if self.subnet else "127.0.0.1"
        self._made: list[tuple[str, str]] = []                 # ("netns" | "link", name)
        self.datacenter = datacenter
        self.warm_pool = warm_pool
        self.meta = meta or (lambda i: {})
        self.plugin_dir = self.tmp / "plugins"
        self.server_ports = tuple(tn.free_ports(3))
        self.server_proc: subprocess.Popen | None = None
        self.clients: list[Client] = []
        used = set(self.server_ports)
        for i in range(clients):
            ports = ()
            while len(ports) < 3:
                p = tn.free_ports(1)[0]
                if p not in used:
                    ports += (p,)
                    used.add(p)
            name = f"{self.tag}-c{i}"
            self.clients.append(Client(
                name=name, run_dir=f"/run/fluidvim-{name}", data_dir=self.tmp / name / "data",
                ports=ports, cgroup_parent=f"/fluidvim-{name}", config=self.tmp / name / "client.hcl",
                netns=f"{self.tag}n{i}" if netns[i] else None,
                ip=f"{self.subnet}.{10 + i}" if netns[i] else "127.0.0.1"))
        self._logs: list = []
        self._leaders: list[int] = []         # every agent spawned (a session leader)
        self._token = uuid.uuid4().hex          # in their environment (tn.agent_env)

    # -- addresses, logs ---------------------------------------------------------------------

    @property
    def address(self) -> str:
        """The server's HTTP API (what a NomadZone and the CLI talk to)."""
        return f"http://{self.server_ip}:{self.server_ports[0]}"

    def log_tail(self, name: str = "server", n: int = 3000) -> str:
        p = self.tmp / f"{name}.log"
        return p.read_text(errors="replace")[-n:] if p.exists() else ""

    def api(self, path: str, body=None, method=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.address + path, data=data, method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def cli(self, *args: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([tn.NOMAD, *args], capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "NOMAD_ADDR": self.address})
        if check:
            assert r.returncode == 0, f"nomad {' '.join(args)}: rc={r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    # -- configs -----------------------------------------------------------------------------

    def _common(self, data_dir: Path, ports: tuple, name: str, ip: str) -> str:
        http, rpc, serf = ports
        return (f'name = "{name}"\ndatacenter = "{self.datacenter}"\ndata_dir = "{data_dir}"\n'
                f'bind_addr = "{ip}"\n'
                f'ports {{\n  http = {http}\n  rpc  = {rpc}\n  serf = {serf}\n}}\n'
                f'advertise {{\n  http = "{ip}"\n  rpc = "{ip}"\n  serf = "{ip}"\n}}\n'
                'log_level = "DEBUG"\ndisable_update_check = true\n')

    def server_config(self) -> str:
        return (self._common(self.tmp / "server" / "data", self.server_ports, f"{self.tag}-server",
                             self.server_ip)
                + 'server {\n  enabled = true\n  bootstrap_expect = 1\n}\n'
                + 'client {\n  enabled = false\n}\n')

    def client_config(self, i: int) -> str:
        c = self.clients[i]
        pool = tn.warm_pool_block(*self.warm_pool) if self.warm_pool else None
        meta = "".join(f'    {k} = "{v}"\n' for k, v in sorted(self.meta(i).items()))
        return (self._common(c.data_dir, c.ports, c.name, c.ip)
                + f'plugin_dir = "{self.plugin_dir}"\n'
                + 'server {\n  enabled = false\n}\n'
                + 'client {\n  enabled = true\n'
                + f'  servers = ["{self.server_ip}:{self.server_ports[1]}"]\n'
                + (f'  network_interface = "{c.netns}p"\n' if c.netns else '')
                + f'  cgroup_parent = "{c.cgroup_parent}"\n'
                + f'  alloc_dir = "{c.data_dir / "alloc"}"\n'
                + f'  state_dir = "{c.data_dir / "client"}"\n'
                + '  options = {\n'
                + '    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"\n'
                + '  }\n'
                + (f'  meta {{\n{meta}  }}\n' if meta else '')
                + '}\n'
                + _plugin_block(self.tmp / c.name, self.plugin_dir, c.run_dir, pool))

    # -- lifecycle ---------------------------------------------------------------------------

    def _spawn(self, cfg: Path, log_name: str, *extra: str, netns: str | None = None
               ) -> subprocess.Popen:
        log = open(self.tmp / f"{log_name}.log", "a")
        self._logs.append(log)
        pre = ["ip", "netns", "exec", netns] if netns else []     # ip execs the agent: same pid
        proc = subprocess.Popen([*pre, tn.NOMAD, "agent", "-config", str(cfg), *extra],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=tn.agent_env(self._token))
        self._leaders.append(proc.pid)      # what is left of its session goes at close()
        return proc

    def _ip(self, *args: str) -> None:
        r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, f"ip {' '.join(args)}: {r.stderr.strip()}"

    def _network(self) -> None:
        """The bridge the server listens on and, per netns client, its namespace and veth."""
        if not self.bridge:
            return
        self._ip("link", "add", self.bridge, "type", "bridge")
        self._made.append(("link", self.bridge))
        self._ip("addr", "add", f"{self.server_ip}/24", "dev", self.bridge)
        self._ip("link", "set", self.bridge, "up")
        for i, c in enumerate(self.clients):
            if not c.netns:
                continue
            host_end, peer = f"{self.tag}v{i}", f"{c.netns}p"
            self._ip("netns", "add", c.netns)
            self._made.append(("netns", c.netns))
            self._ip("link", "add", host_end, "type", "veth", "peer", "name", peer)
            self._made.append(("link", host_end))
            self._ip("link", "set", host_end, "master", self.bridge, "up")
            self._ip("link", "set", peer, "netns", c.netns)
            for cmd in (("addr", "add", f"{c.ip}/24", "dev", peer), ("link", "set", peer, "up"),
                        ("link", "set", "lo", "up")):
                self._ip("-n", c.netns, *cmd)

    def start(self) -> NomadCluster:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(self.plugin_dir / "fluidvim-unikernel"), "."],
                       cwd=tn.REPO / "nomad_driver", check=True, timeout=600)
        self._network()
        (self.tmp / "server" / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.tmp / "server" / "server.hcl"
        cfg.write_text(self.server_config())
        self.server_proc = self._spawn(cfg, "server")
        # clients that register before the leader's keyring exists are told to retry ~15 s later
        tn.wait_for("the server's leader with its keyring", self._keyring_ready, 60, 0.1)
        for i, c in enumerate(self.clients):
            c.data_dir.mkdir(parents=True, exist_ok=True)
            c.config.write_text(self.client_config(i))
            c.proc = self._spawn(c.config, c.name, "-plugin-dir", str(self.plugin_dir),
                                 netns=c.netns)
        return self

    def _keyring_ready(self) -> bool:
        assert self.server_proc.poll() is None, \
            f"server exited rc={self.server_proc.returncode}\n{self.log_tail('server')}"
        try:
            keys = self.api("/v1/operator/keyring/keys")
        except OSError:                   # not listening yet, or no leader (HTTP 500)
            return False
        return any(k.get("State") == "active" for k in keys or [])

    def _check_alive(self) -> None:
        assert self.server_proc.poll() is None, \
            f"server exited rc={self.server_proc.returncode}\n{self.log_tail('server')}"
        for c in self.clients:
            assert c.proc.poll() is None, f"{c.name} exited rc={c.proc.returncode}\n{self.log_tail(c.name)}"

    def nodes(self) -> dict[str, dict]:
        """{client name: node stub} of this cluster's nodes that are ready with a healthy
        unikernel driver."""
        out = {}
        for n in self.api("/v1/nodes"):
            drv = (n.get("Drivers") or {}).get("unikernel") or {}
            if n["Status"] == "ready" and drv.get("Healthy"):
                out[n["Name"]] = n
        return out

    def wait_ready(self, timeout: float = 90) -> dict[str, dict]:
        """Every client's node ready with a healthy driver (and its warm pool full, if any)."""
        want = {c.name for c in self.clients}

        def ready():
            self._check_alive()
            nodes = self.nodes()
            if set(nodes) != want:
                return None
            if self.warm_pool:
                for n in nodes.values():
                    a = self.api(f"/v1/node/{n['ID']}")["Attributes"]
                    if a.get(tn.PRE + "warm_pool.ready") != str(self.warm_pool[0]):
                        return None
            return nodes
        return tn.wait_for(f"{len(want)} client nodes ready (healthy unikernel driver"
                           + (", warm pool full)" if self.warm_pool else ")"), ready, timeout, 0.25)

    def node_attrs(self, name: str) -> dict:
        nid = self.nodes()[name]["ID"]
        return self.api(f"/v1/node/{nid}")["Attributes"]

    def client(self, name: str) -> Client:
        return next(c for c in self.clients if c.name == name)

    # -- a client's power, as its BMC switches it (tests/bmcserver.py PowerHook callbacks) ---

    def power_off_client(self, name: str) -> None:
        """The client's machine loses power: its agent, plugin and QEMUs end at once (SIGKILL to
        the agent's process group and every QEMU under its run dir); its data dir stays."""
        c = self.client(name)
        if c.proc is not None and c.proc.poll() is None:
            try:
                os.killpg(c.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            c.proc.wait(10)
        c.proc = None
        for pid in tn.qemu_pids(c.run_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while tn.qemu_pids(c.run_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        # the tmpfs of its allocations' secrets/private dirs go with the power
        with open("/proc/self/mounts") as f:
            mounts = [line.split()[1] for line in f]
        for m in sorted((m for m in mounts if m.startswith(str(c.data_dir) + "/")), reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True, timeout=10)

    def power_on_client(self, name: str) -> None:
        """The client's machine boots: its agent starts again with its config and data dir (the
        same Nomad node)."""
        c = self.client(name)
        if c.proc is None or c.proc.poll() is not None:
            c.proc = self._spawn(c.config, c.name, "-plugin-dir", str(self.plugin_dir),
                                 netns=c.netns)

    def qemu_pids(self) -> dict[str, list[int]]:
        """{client name: QEMU pids under its run_dir}."""
        return {c.name: tn.qemu_pids(c.run_dir) for c in self.clients}

    def close(self) -> None:
        procs = [c.proc for c in self.clients if c.proc is not None]
        for p in procs:                   # clients first (they stop their plugins), in parallel
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            tn.Agents.stop(p)
        if self.server_proc is not None:
            tn.Agents.stop(self.server_proc)
        tn.end_sessions(self._leaders, [tn.NOMAD, self.plugin_dir / "fluidvim-unikernel"],
                        self._token)
        for log in self._logs:
            log.close()
        for c in self.clients:
            for pid in tn.qemu_pids(c.run_dir):   # pool shells outlive the client by design
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        while any(tn.qemu_pids(c.run_dir) for c in self.clients) and time.monotonic() < deadline:
            time.sleep(0.05)
        for kind, name in reversed(self._made):    # a namespace takes its taps and veth end
            subprocess.run(["ip", "netns", "del", name] if kind == "netns"
                           else ["ip", "link", "del", name], capture_output=True, timeout=10)
        for c in self.clients:
            shutil.rmtree(c.run_dir, ignore_errors=True)
            for sub in CGROUP_ROOT.iterdir():     # cgroup v1 hierarchies (cpuset) or v2 root
                top = sub / c.cgroup_parent.lstrip("/")
                if top.is_dir():
                    for d in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True):
                        try:
                            d.rmdir()
                        except OSError:
                            pass
                    try:
                        top.rmdir()
                    except OSError:
                        pass

    def leftovers(self) -> list[str]:
        """What close() should have removed and did not (for the test's final assertion)."""
        out = []
        for c in self.clients:
            if c.proc is not None and c.proc.poll() is None:
                out.append(f"agent {c.name}")
            out += [f"QEMU {pid} of {c.name}" for pid in tn.qemu_pids(c.run_dir)]
            if os.path.exists(c.run_dir):
                out.append(c.run_dir)
            out += [str(sub / c.cgroup_parent.lstrip("/")) for sub in CGROUP_ROOT.iterdir()
                    if (sub / c.cgroup_parent.lstrip("/")).exists()]
        if self.server_proc is not None and self.server_proc.poll() is None:
            out.append("the server agent")
        out += [f"{kind} {name}" for kind, name in self._made
                if os.path.exists(f"/run/netns/{name}" if kind == "netns" else f"/sys/class/net/{name}")]
        return out

    def __enter__(self) -> NomadCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()
