# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Warm launches for NICs with a given MAC and tap name (Neutron ports), against real QEMU/KVM,
real taps, bridges and network namespaces.

A warm shell booted with generated MACs and tap names gets the requested ones at claim: its taps
are renamed, the VNF is told its MACs in ``configure`` and answers ARP with them.
"""

import json
import os
import shutil
import subprocess
import uuid

import pytest

from fluidvim.common.zonetypes import NicRequest
from fluidvim.vnf import netdev, spec as specmod, testnet
from fluidvim.vnf.control import ControlError
from fluidvim.vnf.manager import WARM_PHASES, VNFManager, make_conf

from .conftest import leaked_taps, vnf_ids

SUBNET = 97
ARP_A, ARP_B = f"10.{SUBNET}.0.9", f"10.{SUBNET}.0.10"      # answered by the VNF itself
# NIC 0 answers ARP for ARP_A, NIC 1 for ARP_B; everything else is a bump in the wire
RESPONDER = (f"FromDevice(0) -> r0 :: ARPResponder({ARP_A}) -> ToDevice(0); r0[1] -> ToDevice(1);\n"
             f"FromDevice(1) -> r1 :: ARPResponder({ARP_B}) -> ToDevice(1); r1[1] -> ToDevice(0);")
MACS = ["fa:16:3e:5a:00:01", "fa:16:3e:5a:00:02"]


def _ports(bridges, macs=None, taps=None):
    """NIC requests as Neutron ports give them: per NIC a bridge, a MAC and a devname."""
    n = len(bridges)
    return [NicRequest(bridge=b, mac=m, tap=t)
            for b, m, t in zip(bridges, macs or [None] * n, taps or [None] * n)]


def _names():
    """Two Neutron-style devnames of this test (``fw`` prefix: this suite's own names)."""
    h = uuid.uuid4().hex[:8]
    return [f"fwtap{h}-0", f"fwtap{h}-1"]


@pytest.fixture
def fw_managers(tmp_path):
    """VNFManagers on one private state dir and a /run/fluidvim-fw-* run dir; checks for leaks."""
    run_dir = f"/run/fluidvim-fw-{uuid.uuid4().hex[:8]}"
    made, names = [], set()

    def factory(backend="qemu"):
        mgr = VNFManager(make_conf(state_dir=str(tmp_path / "state"), run_dir=run_dir,
                                   backend=backend))
        made.append(mgr)
        return mgr

    factory.names = names           # requested tap names a test used, checked for leaks
    yield factory
    last = made[-1]
    ids = vnf_ids(last.store)
    last.destroy_all()
    for mgr in made:
        mgr.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    assert leaked_taps(ids) == [], "generated taps leaked"
    assert [n for n in names if netdev.exists(n)] == [], "requested taps leaked"


@pytest.fixture
def fwnet():
    with testnet.TestNet("fwn", SUBNET) as n:
        yield n


def _shell(mgr, nics=2):
    mgr.fill_pool(1, nics=nics)
    key = mgr.pool_key(mgr.conf.vnf.backend, mgr.conf.vnf.memory_mb, 1, nics)
    (shell,) = mgr.store.list(statuses=("pool",))
    return key, shell


def _neighbour_mac(net, side, ip):
    """Ask for ``ip`` from namespace ``side`` and return the MAC its ARP reply carried."""
    net.run(side, "ping", "-n", "-c", "1", "-W", "1", ip)     # no ICMP answer: only ARP
    out = net.run(side, "ip", "neigh", "show", ip).stdout
    words = out.split()
    return words[words.index("lladdr") + 1] if "lladdr" in words else out


def test_warm_launch_takes_the_given_macs_and_tap_names(fw_managers, fwnet):
    mgr = fw_managers()
    key, shell = _shell(mgr)
    taps = _names()
    fw_managers.names.update(taps)
    res = mgr.launch(RESPONDER, name="port-vnf", nics=_ports(fwnet.bridges, MACS, taps))
    assert res.kind == "warm" and list(res.phases_ms) == list(WARM_PHASES)
    assert res.vnf_id == shell.id and mgr.store.count_pool(key, ("pool",)) == 0
    rec = mgr.get("port-vnf")
    assert [(n.tap, n.mac, n.bridge) for n in rec.spec.nics] == list(zip(taps, MACS,
                                                                         fwnet.bridges))
    # the taps carry the requested names and sit on the requested bridges; the shell's are gone
    assert [netdev.master_of(t) for t in taps] == fwnet.bridges
    assert not any(netdev.exists(n.tap) for n in shell.spec.nics)
    # spec.json next to the VNF (what adopting an orphan reads) follows
    with open(os.path.join(mgr.run_dir, shell.id, "spec.json")) as f:
        assert [n["tap"] for n in json.load(f)["nics"]] == taps
    # the VNF answers ARP with its new MACs, as the namespaces see it
    assert _neighbour_mac(fwnet, "a", ARP_A) == MACS[0]
    assert _neighbour_mac(fwnet, "b", ARP_B) == MACS[1]
    assert fwnet.ping(2) == 2                               # and forwards between a and b
    # unicast frames to the new MAC reach the VNF (QEMU's device filters nothing)
    before = {e["name"]: e["other"] for e in mgr.stats("port-vnf")["elements"]}["r0"]
    fwnet.run("a", "ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", ARP_A)
    after = {e["name"]: e["other"] for e in mgr.stats("port-vnf")["elements"]}["r0"]
    assert after - before >= 3
    st = mgr.stats("port-vnf")
    assert [n["mac"] for n in st["nics"]] == MACS
    assert all(e["replies"] >= 1 for e in st["elements"]), st["elements"]
    # a MAC for one NIC only: the other keeps the shell's
    key, shell2 = _shell(mgr)
    taps2 = [None, _names()[1]]
    fw_managers.names.add(taps2[1])
    res2 = mgr.launch(RESPONDER, nics=_ports([None, None], [None, "fa:16:3e:5a:00:03"], taps2))
    assert res2.kind == "warm"
    assert [n["mac"] for n in mgr.stats(res2.vnf_id)["nics"]] == [shell2.spec.nics[0].mac,
                                                                  "fa:16:3e:5a:00:03"]
    assert netdev.exists(shell2.spec.nics[0].tap) and netdev.exists(taps2[1])
    mgr.destroy(res.vnf_id)
    mgr.destroy(res2.vnf_id)
    assert [t for t in taps + taps2[1:] if netdev.exists(t)] == []


def test_existing_tap_name_is_refused_before_claiming(fw_managers):
    mgr = fw_managers()
    key, shell = _shell(mgr)
    taken = _names()
    netdev.ensure_bridge(taken[1])               # something of that name exists on the host
    try:
        with pytest.raises(specmod.SpecError) as e:
            mgr.launch(RESPONDER, nics=_ports([None, None], taps=taken))
        assert e.value.field == "nics[1].tap" and taken[1] in str(e.value)
        assert "already exists" in str(e.value)
        # nothing was taken from the pool or renamed
        assert mgr.store.count_pool(key, ("pool",)) == 1
        assert all(netdev.exists(n.tap) for n in shell.spec.nics)
        assert not netdev.exists(taken[0])
        with pytest.raises(specmod.SpecError) as e:
            mgr.launch(RESPONDER, nics=_ports([None, None], taps=[taken[0], taken[0]]))
        assert e.value.field == "nics[1].tap"
    finally:
        netdev.delete_link(taken[1])


def test_name_taken_during_the_claim_returns_the_shell(fw_managers, monkeypatch):
    """The name appears between launch()'s check and the rename: the first tap is renamed back,
    the shell returns to the pool, the error names the tap."""
    mgr = fw_managers()
    key, shell = _shell(mgr)
    taps = _names()
    fw_managers.names.update(taps)
    real_rename = netdev.rename

    def rename_racing(old, new):
        if new == taps[1]:
            netdev.ensure_bridge(taps[1])        # another agent was faster
        return real_rename(old, new)

    monkeypatch.setattr(netdev, "rename", rename_racing)
    try:
        with pytest.raises(specmod.SpecError) as e:
            mgr.launch(RESPONDER, nics=_ports([None, None], taps=taps))
    finally:
        netdev.delete_link(taps[1])
    assert e.value.field == "nics[1].tap" and "already exists" in str(e.value)
    assert mgr.store.count_pool(key, ("pool",)) == 1
    assert [netdev.exists(n.tap) for n in shell.spec.nics] == [True, True]
    assert not netdev.exists(taps[0])
    monkeypatch.setattr(netdev, "rename", real_rename)
    assert mgr.launch(RESPONDER, nics=_ports([None, None], taps=taps)).kind == "warm"


def test_bad_macs_and_rejected_configs_keep_the_shell(fw_managers):
    mgr = fw_managers()
    key, shell = _shell(mgr)
    taps = _names()
    fw_managers.names.update(taps)
    # refused by the launch core before a shell is taken
    for macs, field in (([MACS[0], "01:00:5e:00:00:01"], "nics[1].mac"),
                        (["fa:16:3e:5a", None], "nics[0].mac"),
                        ([MACS[0], "00:00:00:00:00:00"], "nics[1].mac")):
        with pytest.raises(specmod.SpecError) as e:
            mgr.launch(RESPONDER, nics=_ports([None, None], macs, taps))
        assert e.value.field == field, e.value
        assert mgr.store.count_pool(key, ("pool",)) == 1
    # refused by the VNF itself (same rules): the error names the field, nothing changes
    with mgr.channel(shell.id) as ch:
        with pytest.raises(ControlError) as e:
            ch.configure(RESPONDER, macs=[MACS[0], "03:00:00:00:00:01"])
        assert (e.value.code, e.value.field) == ("config", "macs[1]")
        with pytest.raises(ControlError) as e:
            ch.configure(RESPONDER, macs=MACS[:1])
        assert (e.value.code, e.value.field) == ("config", "macs")
        st = ch.stats()
    assert st["configured"] is False
    assert [n["mac"] for n in st["nics"]] == [n.mac for n in shell.spec.nics]
    # a config the VNF rejects after the taps were renamed: back to the pool, own tap names
    with pytest.raises(ControlError) as e:
        mgr.launch("FromDevice(0) -> Countr -> ToDevice(1);", nics=_ports([None, None], MACS, taps))
    assert e.value.code == "config" and "Countr" in e.value.message
    assert mgr.store.count_pool(key, ("pool",)) == 1
    (back,) = mgr.store.list(statuses=("pool",))
    assert back.id == shell.id and back.spec == shell.spec
    assert all(netdev.exists(n.tap) for n in shell.spec.nics)
    assert not any(netdev.exists(t) for t in taps)
    with mgr.channel(shell.id) as ch:
        st = ch.stats()
    assert st["configured"] is False
    assert [n["mac"] for n in st["nics"]] == [n.mac for n in shell.spec.nics]   # not applied
    # and the same shell serves the next launch
    res = mgr.launch(RESPONDER, nics=_ports([None, None], MACS, taps))
    assert res.kind == "warm" and res.vnf_id == shell.id
    assert [n["mac"] for n in mgr.stats(res.vnf_id)["nics"]] == MACS


def test_bridge_vanishing_after_the_rename_leaves_nothing(fw_managers, monkeypatch):
    mgr = fw_managers()
    key, shell = _shell(mgr, nics=1)
    (tap,) = _names()[:1]
    fw_managers.names.add(tap)
    gone = testnet.unique_name("fwgone")
    netdev.ensure_bridge(gone)
    real_plug = netdev.plug

    def plug_after_bridge_vanished(t, bridge):
        netdev.delete_link(gone)
        return real_plug(t, bridge)

    monkeypatch.setattr(netdev, "plug", plug_after_bridge_vanished)
    try:
        with pytest.raises(netdev.NetdevError, match=gone):
            mgr.launch(RESPONDER.split("\n")[0].replace("ToDevice(1)", "Discard"),
                       nics=_ports([gone], MACS[:1], [tap]))
    finally:
        netdev.delete_link(gone)
    assert mgr.store.list() == []
    assert not netdev.exists(tap) and not netdev.exists(shell.spec.nics[0].tap)


def test_recover_after_a_restart_finds_the_renamed_taps(fw_managers, fwnet):
    first = fw_managers()
    _shell(first)
    taps = _names()
    fw_managers.names.update(taps)
    res = first.launch(RESPONDER, name="keeper", nics=_ports(fwnet.bridges, MACS, taps))
    assert res.kind == "warm"
    first.close()
    second = fw_managers()
    assert second.recover()["reattached"] == 1
    rec = second.get("keeper")
    assert [(n.tap, n.mac) for n in rec.spec.nics] == list(zip(taps, MACS))
    assert [netdev.master_of(t) for t in taps] == fwnet.bridges
    assert [n["mac"] for n in second.stats("keeper")["nics"]] == MACS
    assert fwnet.ping(1) == 1
    second.destroy("keeper")
    assert not any(netdev.exists(t) for t in taps)
    assert subprocess.run(["ip", "link", "show", taps[0]], capture_output=True).returncode != 0


@pytest.mark.libvirt
def test_libvirt_shell_takes_the_names_and_is_adopted_with_them(fw_managers, fwnet):
    """The libvirt backend (libvirt created the taps), and the orphan path of recover(): a VNF
    the store lost is adopted from its run directory's spec, with the requested names."""
    mgr = fw_managers(backend="libvirt")
    key, shell = _shell(mgr)
    taps = _names()
    fw_managers.names.update(taps)
    res = mgr.launch(RESPONDER, name="lv-port", nics=_ports(fwnet.bridges, MACS, taps))
    assert res.kind == "warm" and res.backend == "libvirt"
    assert [netdev.master_of(t) for t in taps] == fwnet.bridges
    assert _neighbour_mac(fwnet, "a", ARP_A) == MACS[0]
    mgr.store.delete(res.vnf_id)                 # the store forgot it; the domain runs on
    mgr.close()
    second = fw_managers(backend="libvirt")
    assert second.recover()["adopted"] == 1
    rec = second.get(res.vnf_id)
    assert [(n.tap, n.mac) for n in rec.spec.nics] == list(zip(taps, MACS))
    assert rec.name == "lv-port"
    second.destroy(res.vnf_id)
    assert not any(netdev.exists(t) for t in taps + [n.tap for n in shell.spec.nics])
