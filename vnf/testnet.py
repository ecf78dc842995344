# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A two-host test network in network namespaces, for sending real traffic through a VNF.

::

    ns <prefix>a (10.x.0.1) -- veth -- bridge <prefix>b0 -- tap -- [VNF nic0  nic1] -- tap --
        bridge <prefix>b1 -- veth -- ns <prefix>b (10.x.0.2)

Both namespaces sit in one /24, so the VNF is a bump in the wire: every frame between them, ARP
included, crosses it. Used by the demo, the integration tests and the benchmarks; only addresses
inside these namespaces are ever targeted.
"""

from __future__ import annotations

import subprocess

from . import netdev


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


class TestNet:
    __test__ = False   # not a pytest class

    def __init__(self, prefix: str = "fvt", subnet: int = 99, bridges: tuple | None = None):
        """``bridges``: hang the two namespaces on these existing bridges (e.g. the edge
        networks of a deployed network service) instead of creating ``<prefix>b0/b1``; they
        are not ours, so :meth:`down` leaves them."""
        if len(prefix) > 6:
            raise ValueError("prefix must be at most 6 characters (interface names <= 15)")
        self.prefix = prefix
        self.ns_a, self.ns_b = f"{prefix}a", f"{prefix}b"
        self.own_bridges = bridges is None
        self.br0, self.br1 = bridges if bridges else (f"{prefix}b0", f"{prefix}b1")
        self.ip_a, self.ip_b = f"10.{subnet}.0.1", f"10.{subnet}.0.2"
        self.mask = 24

    @property
    def bridges(self) -> list[str]:
        return [self.br0, self.br1]

    def up(self) -> "TestNet":
        self.down()
        for ns, br, ip, side in ((self.ns_a, self.br0, self.ip_a, "a"),
                                 (self.ns_b, self.br1, self.ip_b, "b")):
            if self.own_bridges:
                netdev.ensure_bridge(br)
                # no STP / forwarding delay: ports forward at once
                _ip("link", "set", br, "type", "bridge", "stp_state", "0", "forward_delay", "0")
            _ip("netns", "add", ns)
            host, peer = f"{self.prefix}{side}h", f"{self.prefix}{side}p"
            _ip("link", "add", host, "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", ns)
            _ip("link", "set", host, "master", br, "up")
            _ip("-n", ns, "addr", "add", f"{ip}/{self.mask}", "dev", peer)
            _ip("-n", ns, "link", "set", peer, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        return self

    def down(self) -> None:
        for ns in (self.ns_a, self.ns_b):
            _ip("netns", "del", ns, check=False)
        own = (self.br0, self.br1) if self.own_bridges else ()
        for name in (f"{self.prefix}ah", f"{self.prefix}bh", *own):
            netdev.delete_link(name)

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    def run(self, side: str, *cmd: str, timeout: float = 30,
            check: bool = False) -> subprocess.CompletedProcess:
        ns = self.ns_a if side == "a" else self.ns_b
        return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True,
                              timeout=timeout, check=check)

    def popen(self, side: str, *cmd: str, **kw) -> subprocess.Popen:
        ns = self.ns_a if side == "a" else self.ns_b
        return subprocess.Popen(["ip", "netns", "exec", ns, *cmd], **kw)

    def ping(self, count: int = 3, timeout_s: int = 2) -> int:
        """Pings from a to b; returns how many replies came back."""
        r = self.run("a", "ping", "-n", "-c", str(count), "-W", str(timeout_s), "-i", "0.2",
                     self.ip_b, timeout=count * (timeout_s + 1) + 5)
        for line in r.stdout.splitlines():
            if "received" in line:
                return int(line.split(",")[1].split()[0])
        return 0

    def tcp_connect(self, port: int, timeout_s: float = 2.0) -> bool:
        """Whether a TCP connection from a to b:port completes (b must listen)."""
        code = ("import socket,sys\n"
                "try:\n"
                f"    socket.create_connection(('{self.ip_b}', {port}), timeout={timeout_s})\n"
                "except OSError: sys.exit(1)\n")
        return self.run("a", "python3", "-c", code, timeout=timeout_s + 10).returncode == 0

    def serve_tcp(self, *ports: int) -> subprocess.Popen:
        """Start a TCP server in b accepting (and holding) connections on ``ports``.

        Returns once it listens (it prints a line when ready). Stop it with ``terminate()``.
        """
        code = ("import socket,selectors,sys\n"
                "sel=selectors.DefaultSelector()\n"
                f"for p in {list(ports)!r}:\n"
                "    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                f"    s.bind(('{self.ip_b}',p)); s.listen(256); sel.register(s,selectors.EVENT_READ)\n"
                "print('listening',flush=True)\n"
                "held=[]\n"
                "while True:\n"
                "    for k,_ in sel.select():\n"
                "        c,_=k.fileobj.accept(); held.append(c)\n")
        proc = self.popen("b", "python3", "-c", code, stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()
        return proc

    def hold_connections(self, port: int, count: int, timeout_s: float = 2.0):
        """Open ``count`` TCP connections from a to b:port and keep them open.

        Returns (number established, Popen holding them); ``terminate()`` the Popen to close them.
        """
        code = (f"import socket,sys\nheld=[];ok=0\nfor i in range({count}):\n"
                f"    try:\n        c=socket.create_connection(('{self.ip_b}',{port}),"
                f"timeout={timeout_s})\n"
                "        held.append(c); ok+=1\n"
                "    except OSError: pass\n"
                "print(ok,flush=True)\nsys.stdin.read()\n")
        proc = self.popen("a", "python3", "-c", code, stdout=subprocess.PIPE,
                          stdin=subprocess.PIPE, text=True)
        return int(proc.stdout.readline() or 0), proc
