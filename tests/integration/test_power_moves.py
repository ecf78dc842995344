# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""A rebalancing move, sessions first, on real VNFs with real traffic (issue 21).

Two hosts are two launch cores on this machine (two VNFManagers with their own state and run
dirs), each the one host of a local zone with its own test network (a forwarding VNF between
two namespaces: the same two bridges would make the old VNF and its replacement a loop). A TCP
transfer runs from namespace a to b through the VNF on host ``ha``; the power loop
(``HostPower.move`` then ``round``) moves that VNF to ``hb``: it stops offering slots at once,
its replacement boots on ``hb`` through the zone's launch path (``deploy``), the VNF stays while
the transfer goes on, and it goes once the transfer ended (FIN both ways: the VNF's own session
count is 0). The transfer arrives whole (every byte, in order: its SHA-256) - no session cut.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid

import pytest

from fluidvim.orchestrator import conf as orchconf, hostpower as hp
from fluidvim.orchestrator.db import Store
from fluidvim.orchestrator.deploy import deploy
from fluidvim.orchestrator.slots import SlotRegistry
from fluidvim.orchestrator.zones.local import LocalZone
from fluidvim.vnf import testnet
from fluidvim.vnf.manager import VNFManager, make_conf

from .conftest import leaked_taps, vnf_ids

FORWARD = "FromDevice(0) -> ToDevice(1);\nFromDevice(1) -> ToDevice(0);"

SERVER = ("import socket,hashlib\n"
          "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
          "s.bind(('{ip}',80)); s.listen(1); print('listening',flush=True)\n"
          "c,_=s.accept(); h=hashlib.sha256(); n=0\n"
          "while True:\n"
          "    b=c.recv(1<<20)\n"
          "    if not b: break\n"
          "    h.update(b); n+=len(b)\n"
          "c.close()\n"
          "print(n, h.hexdigest(), flush=True)\n")

# sends without a pause (the flow never idles) until told to finish on stdin, then a last
# 2 MiB, closes its side and waits for the server's close
CLIENT = ("import socket,hashlib,random,select,sys\n"
          "r=random.Random(7); h=hashlib.sha256(); n=0\n"
          "c=socket.create_connection(('{ip}',80),timeout=30); print('connected',flush=True)\n"
          "def send(k):\n"
          "    global n\n"
          "    d=r.randbytes(k); c.sendall(d); h.update(d); n+=len(d)\n"
          "while not select.select([sys.stdin],[],[],0.05)[0]:\n"
          "    send(4096)\n"
          "for _ in range(32): send(65536)\n"
          "c.shutdown(socket.SHUT_WR); c.recv(1); c.close()\n"
          "print(n, h.hexdigest(), flush=True)\n")


def _wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def two_hosts(tmp_path):
    """{host: (VNFManager, TestNet)} for hosts ha and hb; every VNF they leave is destroyed."""
    made, nets = {}, []
    try:
        for host, subnet in (("ha", 83), ("hb", 84)):
            run_dir = f"/run/fluidvim-fpm{host}-{uuid.uuid4().hex[:8]}"
            mgr = VNFManager(make_conf(state_dir=str(tmp_path / host), run_dir=run_dir,
                                       backend="qemu"))
            net = testnet.TestNet(f"fpm{host[1]}", subnet).up()
            nets.append(net)
            made[host] = (mgr, net, run_dir)
        yield {h: (m, n) for h, (m, n, _) in made.items()}
    finally:
        ids: set = set()
        for mgr, _net, run_dir in made.values():
            ids |= vnf_ids(mgr.store)
            for rec in mgr.store.list():
                mgr.destroy(rec.id)
            mgr.close()
            shutil.rmtree(run_dir, ignore_errors=True)
        for net in nets:
            net.down()
        assert not leaked_taps(ids)


def test_move_keeps_a_live_session_intact_and_removes_the_vnf_after_it(two_hosts, tmp_path):
    zones = {f"z{h[1]}": LocalZone(f"z{h[1]}", mgr, bridges=tuple(net.bridges), host_name=h)
             for h, (mgr, net) in two_hosts.items()}
    store = Store(f"sqlite:///{tmp_path}/orch.sqlite")
    registry = SlotRegistry()
    store.put_service("fw", {"click_config": FORWARD, "slots": 16}, {}, 10.0)

    def launcher(zone, host, service):
        return deploy(store, registry, zones[zone], store.service(service), host=host)

    conf = orchconf.make_conf()
    hp.register_opts(conf)
    conf.set_override("session_bound", 120.0, group="host_power")
    power = hp.HostPower(conf, store, zones, registry, launcher=launcher)
    net = two_hosts["ha"][1]
    server = client = None
    try:
        old = launcher("za", "ha", "fw")
        server = net.popen("b", sys.executable, "-c", SERVER.format(ip=net.ip_b),
                           stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "listening"
        client = net.popen("a", sys.executable, "-c", CLIENT.format(ip=net.ip_b),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert client.stdout.readline().strip() == "connected"
        _wait_for(lambda: zones["za"].instance_sessions(old.id) == 1, 10,
                  "the VNF on ha to count the transfer's session")

        m = power.move(old.id, "zb/hb", reason="test")
        new = m["replacement"]
        assert [r.id for r in two_hosts["hb"][0].list()] == [new]      # booted on hb
        offered = registry.aggregate("fw", "instance")
        assert old.id not in offered and offered[new] == 16           # no new session on ha
        plan = power.plan()
        assert [(x["instance"], x["dst"]) for x in plan["rebalancing"]] == [(old.id, "zb/hb")]

        # the transfer still runs (the client sends until told to stop): the VNF stays
        did = power.round()
        assert "rebalanced" not in did
        assert zones["za"].instance_sessions(old.id) == 1
        assert old.id in {r.id for r in two_hosts["ha"][0].list()}

        client.stdin.write("finish\n")
        client.stdin.flush()
        sent = client.stdout.readline().split()
        got = server.stdout.readline().split()
        assert client.wait(timeout=30) == 0 and server.wait(timeout=30) == 0
        assert got == sent and int(sent[0]) > 2 * 1024 * 1024        # every byte, in order

        # FIN both ways ended the session: the next rounds remove the VNF
        done = _wait_for(lambda: power.round().get("rebalanced"), 30,
                         "the move to finish once the session ended")
        assert [(x["instance"], x["replacement"], x["cut"]) for x in done] == \
            [(old.id, new, False)]
        assert two_hosts["ha"][0].list() == []
        assert power.plan()["rebalanced"][0]["instance"] == old.id
        assert registry.aggregate("fw", "instance") == {new: 16}

        # the replacement forwards on hb's network
        net_b = two_hosts["hb"][1]
        srv = net_b.serve_tcp(80)
        try:
            assert net_b.tcp_connect(80) is True
        finally:
            srv.terminate()
            srv.wait()
    finally:
        for p in (client, server):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        store.close()
