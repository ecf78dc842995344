# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""VNF NICs on Open vSwitch bridges through the launch core alone (no Nova): real QEMU, a real
ovsdb-server/ovs-vswitchd of this module (userspace datapath), network namespaces.

Both namespaces sit on one OVS bridge, each on its own VLAN; the VNF's NICs get the same VLANs
(set the way an agent would, by ``iface-id``), so every frame between the namespaces crosses
the VNF.
"""

import shutil
import uuid

import pytest

from fluidvim.common.zonetypes import NicRequest
from fluidvim.vnf import netdev, ovs, testnet
from fluidvim.vnf.control import ControlError

SUBNET = 95
TAGS = (201, 202)
BUMP = "FromDevice(0) -> ToDevice(1); FromDevice(1) -> ToDevice(0);"

pytestmark = pytest.mark.skipif(shutil.which("ovs-vswitchd") is None,
                                reason="Open vSwitch is not installed (tools/bootstrap.sh)")


@pytest.fixture(scope="module")
def ovs_server():
    server = ovs.OvsServer(f"/run/fluidvim-ovs-{uuid.uuid4().hex[:8]}").start()
    ovs.configure(server.connection)
    yield server
    ovs.configure(None)
    server.stop(remove=True)


@pytest.fixture
def ovsnet(ovs_server):
    br = testnet.unique_name("fvk")
    ovs.add_bridge(br)
    net = testnet.TestNet("fvk", SUBNET, bridges=(br, br), ovs_tags=TAGS)
    try:
        with net:
            yield net
    finally:
        ovs.del_bridge(br)


def _ids():
    return [{"iface-id": str(uuid.uuid4()), "vm-uuid": "vnf-under-test"} for _ in range(2)]


def _bind(ids):
    """The agent's part: the Interface with that iface-id goes on its network's VLAN."""
    for one, tag in zip(ids, TAGS):
        name = ovs.vsctl("--bare", "--columns=name", "find", "Interface",
                         f'external_ids:iface-id="{one["iface-id"]}"').stdout.split()
        assert len(name) == 1, name
        ovs.vsctl("set", "Port", name[0], f"tag={tag}")


def _check_ports(net, spec, ids):
    assert sorted(n.tap for n in spec.nics) == sorted(
        set(ovs.list_ports(net.br0)) - {net.host_a, net.host_b})
    for nic, want in zip(spec.nics, ids):
        got = ovs.interface(nic.tap)["external_ids"]
        assert got == {**want, "attached-mac": nic.mac, "iface-status": "active"}


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_ovs_nics_forward_and_go_with_the_vnf(make_manager, ovsnet, warm):
    mgr = make_manager(pool_size=0)
    if warm:
        mgr.fill_pool(1, nics=2)
    ids = _ids()
    taps = [f"fvk{uuid.uuid4().hex[:8]}{i}" for i in range(2)] if warm else [None, None]
    res = mgr.launch(BUMP, name="ovs-vnf", nics=[NicRequest(bridge=br, ovs=o, tap=t) for br, o, t
                                                 in zip([ovsnet.br0, ovsnet.br1], ids, taps)])
    assert res.kind == ("warm" if warm else "cold")
    spec = mgr.get(res.vnf_id).spec
    if warm:
        assert [n.tap for n in spec.nics] == taps          # renamed, then plugged
    assert [n.ovs for n in spec.nics] == ids
    _check_ports(ovsnet, spec, ids)
    assert ovsnet.ping(1, 1) == 0                          # not yet on the networks' VLANs
    _bind(ids)
    before = mgr.stats(res.vnf_id)["nics"]
    assert ovsnet.ping(3) == 3
    after = mgr.stats(res.vnf_id)["nics"]
    assert all(after[i]["rx"] - before[i]["rx"] >= 3 for i in (0, 1))
    mgr.destroy(res.vnf_id)
    assert set(ovs.list_ports(ovsnet.br0)) == {ovsnet.host_a, ovsnet.host_b}
    assert not any(netdev.exists(n.tap) for n in spec.nics)


def test_rejected_config_unplugs_the_warm_shell(make_manager, ovsnet):
    mgr = make_manager(pool_size=0)
    mgr.fill_pool(1, nics=2)
    with pytest.raises(ControlError):
        mgr.launch("FromDevice(0) -> NoSuchElement;",
                   nics=[NicRequest(bridge=br, ovs=o) for br, o in zip([ovsnet.br0, ovsnet.br1],
                                                                        _ids())])
    # the shell went back to the pool and its taps left OVS
    assert [r.status for r in mgr.store.list()] == ["pool"]
    assert set(ovs.list_ports(ovsnet.br0)) == {ovsnet.host_a, ovsnet.host_b}


def test_missing_ovs_bridge_is_refused_before_anything_starts(make_manager, ovs_server):
    mgr = make_manager(pool_size=0)
    with pytest.raises(Exception) as e:
        mgr.launch(BUMP, nics=[NicRequest(bridge="fvk-no-such", ovs={"iface-id": "x"}), None])
    assert "OVS bridge 'fvk-no-such' does not exist" in str(e.value)
    assert mgr.store.list() == []
