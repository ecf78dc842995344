# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A two-host test network in network namespaces, for sending real traffic through a VNF.

::

    ns <p>a (10.x.0.1) -- veth <p>ah/<p>ap -- bridge <p>b0 -- tap -- [VNF nic0  nic1] -- tap --
        bridge <p>b1 -- veth <p>bh/<p>bp -- ns <p>b (10.x.0.2)

Both namespaces sit in one /24, so the VNF is a bump in the wire: every frame between them, ARP
included, crosses it. Used by the demo, the integration tests, the load probe and the benchmarks;
only addresses inside these namespaces are ever targeted.

Every name is unique on the host: ``<p>`` is the caller's prefix plus a random tag that no link
or namespace starts with (:func:`unique_name`), so two test runs, two orchestrators' load probes,
or what a killed run left behind never meet. The addresses need no such care: they exist only
inside the namespaces (the bridges and veths in the root namespace carry none), so two networks
with the same subnet do not see each other. Callers read the names from the object (``prefix``,
``ns_a``, ``br0``, ``host_a``, ...) instead of building them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys

from . import netdev, ovs

IFNAMSIZ = 15                 # longest Linux interface name
MAX_PREFIX = 6                # the caller's part of a TestNet prefix
TAG_LEN = 4                   # random base36 characters after it: 36**4 = 1.7 million
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def _host_names() -> set[str]:
    """Names of the links in this network namespace and of the named network namespaces."""
    names = set()
    for d in ("/sys/class/net", "/run/netns"):
        try:
            names.update(os.listdir(d))
        except FileNotFoundError:
            pass
    return names


def unique_name(prefix: str, tag_len: int = TAG_LEN, room: int = 0) -> str:
    """``prefix`` plus ``tag_len`` random base36 characters, such that no link and no named
    network namespace on the host starts with the result (so names derived from it by appending
    up to ``room`` characters are free too). The result plus ``room`` fits in an interface name.

    For host objects a test creates (``netdev.ensure_bridge(unique_name("fvgone"))``): two runs
    at once, or a leftover of a killed run, cannot hold the same name.
    """
    if len(prefix) + tag_len + room > IFNAMSIZ:
        raise ValueError(f"{prefix!r} + {tag_len} random characters + {room} more exceeds the "
                         f"{IFNAMSIZ} characters of an interface name")
    for _ in range(100):
        name = prefix + "".join(secrets.choice(_B36) for _ in range(tag_len))
        if not any(n.startswith(name) for n in _host_names()):
            return name
    raise RuntimeError(f"no free name starting with {prefix!r} after 100 tries")


class TestNet:
    __test__ = False   # not a pytest class

    def __init__(self, prefix: str = "fvt", subnet: int = 99, bridges: tuple | None = None,
                 ovs_tags: tuple | None = None):
        """``prefix``: what the names start with (at most 6 characters); a random tag follows
        it, see :func:`unique_name`. ``bridges``: hang the two namespaces on these existing
        bridges (e.g. the edge networks of a deployed network service) instead of creating
        ``<p>b0/b1``; they are not ours, so :meth:`down` leaves them. ``ovs_tags`` (VLAN tag
        of side a, of side b; None = untagged): the ``bridges`` are Open vSwitch bridges (may
        be the same one, e.g. an integration bridge with a local VLAN per network, as the
        Neutron OVS agent makes) and the namespaces' veths become OVS ports with those tags."""
        if not 1 <= len(prefix) <= MAX_PREFIX:
            raise ValueError(f"prefix must be 1 to {MAX_PREFIX} characters (interface names "
                             f"<= {IFNAMSIZ}), got {prefix!r}")
        self.prefix = p = unique_name(prefix, room=2)
        self.ns_a, self.ns_b = f"{p}a", f"{p}b"
        self.host_a, self.host_b = f"{p}ah", f"{p}bh"          # veth ends on the bridges
        self.peer_a, self.peer_b = f"{p}ap", f"{p}bp"          # veth ends in the namespaces
        self.own_bridges = bridges is None
        self.ovs_tags = ovs_tags
        if ovs_tags is not None and bridges is None:
            raise ValueError("ovs_tags needs the OVS bridges to hang the namespaces on")
        self.br0, self.br1 = bridges if bridges else (f"{p}b0", f"{p}b1")
        self.ip_a, self.ip_b = f"10.{subnet}.0.1", f"10.{subnet}.0.2"
        self.mask = 24
        self._made: list[tuple[str, str]] = []        # ("netns" | "link", name), what up() made

    @property
    def bridges(self) -> list[str]:
        return [self.br0, self.br1]

    def up(self) -> "TestNet":
        """Create the namespaces, veths and (own) bridges. Nothing of these names may exist:
        ``ip`` refuses to create any of them twice, so an object of someone else is never
        taken over (or, by :meth:`down`, deleted). On an error what was made is removed."""
        if self._made:
            raise RuntimeError(f"test network {self.prefix} is already up")
        sides = ((self.ns_a, self.br0, self.ip_a, self.host_a, self.peer_a),
                 (self.ns_b, self.br1, self.ip_b, self.host_b, self.peer_b))
        try:
            for ns, br, ip, host, peer in sides:
                if self.own_bridges:
                    # no STP / forwarding delay: ports forward at once
                    self._add("link", br, "link", "add", br, "type", "bridge", "stp_state", "0",
                              "forward_delay", "0")
                    _ip("link", "set", br, "up")
                self._add("netns", ns, "netns", "add", ns)
                self._add("link", host, "link", "add", host, "type", "veth", "peer", "name", peer)
                _ip("link", "set", peer, "netns", ns)
                if self.ovs_tags is None:
                    _ip("link", "set", host, "master", br, "up")
                else:
                    tag = self.ovs_tags[0 if ns == self.ns_a else 1]
                    ovs.vsctl("add-port", br, host, *([f"tag={tag}"] if tag is not None else []))
                    self._made.append(("ovsport", host))
                    _ip("link", "set", host, "up")
                _ip("-n", ns, "addr", "add", f"{ip}/{self.mask}", "dev", peer)
                _ip("-n", ns, "link", "set", peer, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except subprocess.CalledProcessError as e:
            self.down()
            raise RuntimeError(f"test network {self.prefix}: `{' '.join(e.cmd)}` failed: "
                               f"{(e.stderr or '').strip()}") from None
        except BaseException:
            self.down()
            raise
        return self

    def _add(self, kind: str, name: str, *args: str) -> None:
        _ip(*args)
        self._made.append((kind, name))

    def down(self) -> None:
        """Remove what :meth:`up` made (a veth goes with its namespace or its host end), and
        nothing else; idempotent."""
        while self._made:
            kind, name = self._made.pop()
            if kind == "netns":
                _ip("netns", "del", name, check=False)
            elif kind == "ovsport":
                ovs.vsctl("--if-exists", "del-port", name, check=False)
            else:
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

    def start_udp_echo(self, python: str = sys.executable) -> subprocess.Popen:
        """Start the load generator's user-space UDP echo in b; returns once it is ready.

        Raises RuntimeError if it did not start. Stop it with :func:`stop`.
        """
        proc = self.popen("b", python, "-m", "fluidvim.evaluator.loadgen", "echo",
                          "--bind", self.ip_b, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None      # stdout=PIPE
        if proc.stdout.readline().strip() != "ready":
            stop(proc)
            raise RuntimeError("the UDP echo in the far namespace did not start")
        return proc

    @contextlib.contextmanager
    def udp_echo(self, wanted: bool = True, python: str = sys.executable):
        """The UDP echo in b for the body of a ``with`` (nothing if not ``wanted``)."""
        proc = self.start_udp_echo(python) if wanted else None
        try:
            yield proc
        finally:
            if proc is not None:
                stop(proc)

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
        assert proc.stdout is not None      # stdout=PIPE
        proc.stdout.readline()
        return proc

    def hold_connections(self, port: int, count: int, timeout_s: float = 2.0,
                         keepalive_s: int | None = None):
        """Open ``count`` TCP connections from a to b:port and keep them open.

        ``keepalive_s``: TCP keepalive probes every that many seconds of idleness (a held
        connection carries no data: a VNF frees its session after ``flow_timeout_ms`` idle, 30 s
        by default; a test that holds sessions longer than that keeps them alive this way).
        Returns (number established, Popen holding them); ``terminate()`` the Popen to close them.
        """
        alive = "" if keepalive_s is None else (
            "        c.setsockopt(socket.SOL_SOCKET,socket.SO_KEEPALIVE,1)\n"
            f"        c.setsockopt(socket.IPPROTO_TCP,socket.TCP_KEEPIDLE,{keepalive_s})\n"
            f"        c.setsockopt(socket.IPPROTO_TCP,socket.TCP_KEEPINTVL,{keepalive_s})\n"
            "        c.setsockopt(socket.IPPROTO_TCP,socket.TCP_KEEPCNT,100)\n")
        code = (f"import socket,sys\nheld=[];ok=0\nfor i in range({count}):\n"
                f"    try:\n        c=socket.create_connection(('{self.ip_b}',{port}),"
                f"timeout={timeout_s})\n"
                + alive +
                "        held.append(c); ok+=1\n"
                "    except OSError: pass\n"
                "print(ok,flush=True)\nsys.stdin.read()\n")
        proc = self.popen("a", "python3", "-c", code, stdout=subprocess.PIPE,
                          stdin=subprocess.PIPE, text=True)
        assert proc.stdout is not None      # stdout=PIPE
        return int(proc.stdout.readline() or 0), proc


def stop(proc: subprocess.Popen, timeout_s: float = 5) -> None:
    """Terminate a helper process started in a namespace; kill it if it lingers."""
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
