# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""VNF NICs on an OVN integration bridge, bound by a real ovn-controller (tests/ovnserver.py):
what Neutron's ML2/OVN gives a compute host. The launch core plugs each NIC's tap into the
integration bridge with the logical port's name as ``iface-id`` (as os-vif does for Nova's
``ovs`` VIFs); OVN does the rest: ovn-controller claims the port for its chassis, the logical
port goes ``up``, and OVN's flows carry frames.

Two logical switches, as two Neutron networks: ``left`` (namespace a, the VNF's NIC 0) and
``right`` (namespace b, NIC 1). Nothing joins them but the VNF, so every ping crosses it. The
namespace ports have ``MAC IP`` addresses (a Neutron port); the VNF's ports ``unknown`` (a
Neutron port with port security off, as a bump in the wire needs).
"""

import json
import uuid

import pytest

from fluidvim.common.zonetypes import NicRequest
from fluidvim.vnf import netdev, ovs, testnet
from tests import ovnserver

SUBNET = 94
BUMP = "FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);"

pytestmark = pytest.mark.skipif(ovnserver.missing() is not None,
                                reason=str(ovnserver.missing()))


@pytest.fixture(scope="module")
def ovn():
    server = ovs.OvsServer(f"/run/fluidvim-ovs-{uuid.uuid4().hex[:8]}").start()
    ovs.configure(server.connection)
    chassis = ovnserver.OvnChassis(server.run_dir + "-ovn", server, testnet.unique_name("fvi"))
    try:
        with chassis:
            yield chassis
    finally:
        ovs.configure(None)
        server.stop(remove=True)


def _mac(net, side, dev):
    return json.loads(net.run(side, "ip", "-j", "link", "show", dev, check=True).stdout)[0]["address"]


@pytest.fixture
def ovnnet(ovn):
    """Namespaces a and b on the integration bridge, each bound to its own logical switch; the
    VNF's logical ports (``vnf0`` on left, ``vnf1`` on right) exist but nothing has claimed them."""
    net = testnet.TestNet("fvo", SUBNET, bridges=(ovn.bridge, ovn.bridge), ovs_tags=(None, None))
    tag = net.prefix
    names = {"left": f"{tag}-left", "right": f"{tag}-right", "a": f"{tag}-a", "b": f"{tag}-b",
             "vnf0": f"{tag}-vnf0", "vnf1": f"{tag}-vnf1"}
    with net:
        for side, ls, host, peer, ip in (("a", names["left"], net.host_a, net.peer_a, net.ip_a),
                                         ("b", names["right"], net.host_b, net.peer_b, net.ip_b)):
            ovn.nbctl("ls-add", ls)
            lsp = names[side]
            ovn.nbctl("lsp-add", ls, lsp, "--", "lsp-set-addresses", lsp,
                      f"{_mac(net, side, peer)} {ip}")
            vnf_lsp = names["vnf0" if side == "a" else "vnf1"]
            ovn.nbctl("lsp-add", ls, vnf_lsp, "--", "lsp-set-addresses", vnf_lsp, "unknown")
            ovs.vsctl("set", "Interface", host, f"external_ids:iface-id={ovs.quote(lsp)}")
        ovn.wait_up([names["a"], names["b"]])
        net.lsp = names
        try:
            yield net
        finally:
            for ls in (names["left"], names["right"]):
                ovn.nbctl("--if-exists", "ls-del", ls)


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_ovn_binds_the_vnf_nics_and_traffic_crosses_the_vnf(make_manager, ovn, ovnnet, warm):
    lsp = ovnnet.lsp
    assert ovnnet.ping(1, 1) == 0                   # the two logical switches are not joined
    mgr = make_manager(pool_size=0)
    if warm:
        mgr.fill_pool(1, nics=2)
    ids = [{"iface-id": lsp["vnf0"], "vm-uuid": "vnf-under-test"},
           {"iface-id": lsp["vnf1"], "vm-uuid": "vnf-under-test"}]
    res = mgr.launch(BUMP, name="ovn-vnf", nics=[NicRequest(bridge=ovn.bridge, ovs=o) for o in ids])
    assert res.kind == ("warm" if warm else "cold")
    spec = mgr.get(res.vnf_id).spec

    # ovn-controller claimed both NICs for this chassis: the logical ports went up
    ovn.wait_up([lsp["vnf0"], lsp["vnf1"]])
    assert ovn.bound_chassis(lsp["vnf0"]) == ovn.bound_chassis(lsp["vnf1"]) == ovn.chassis
    for nic, want in zip(spec.nics, ids):
        got = ovs.interface(nic.tap)["external_ids"]
        assert got["iface-id"] == want["iface-id"] and got["attached-mac"] == nic.mac
        assert ovs.interface(nic.tap)["ofport"] > 0      # OVS opened the tap

    before = mgr.stats(res.vnf_id)["nics"]
    assert ovnnet.ping(3) == 3
    after = mgr.stats(res.vnf_id)["nics"]
    assert all(after[i]["rx"] - before[i]["rx"] >= 3 for i in (0, 1))

    mgr.destroy(res.vnf_id)
    # the NICs left the bridge and OVN released the logical ports; the namespaces' ports stay
    ovn.wait_up([lsp["vnf0"], lsp["vnf1"]], up=False)
    assert ovn.bound_chassis(lsp["vnf0"]) is None and ovn.bound_chassis(lsp["vnf1"]) is None
    assert set(ovs.list_ports(ovn.bridge)) == {ovnnet.host_a, ovnnet.host_b}
    assert not any(netdev.exists(n.tap) for n in spec.nics)
    assert ovnnet.ping(1, 1) == 0
