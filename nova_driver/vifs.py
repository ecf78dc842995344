# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Neutron VIFs → VNF NICs: which bridge, which MAC, which tap name, which events to wait for.

Supported VIF types (what the hypervisor must do for each, as in Nova's libvirt driver):

``bridge``  a tap named ``vif['devname']`` plugged into ``vif['network']['bridge']`` (Neutron's
            Linux-bridge binding). The bridge must exist: it is created by the network's agent
            (or the operator), not by the driver.
``tap``     a tap named ``vif['devname']`` left unplugged: Neutron's agent wires it (the ``tap``
            binding of e.g. networking-calico and SR-IOV-less routed setups).

Anything else (``ovs``, ``vhostuser``, …) is refused with VirtualInterfaceCreateException naming
the port. Plugging is the launch core's ioctl path (:func:`fluidvim.vnf.netdev.plug`): the os-vif
in this Nova (5.3.0) ships only the ``noop`` and ``ovs`` plugins — its Linux-bridge plugin left
with Neutron's linuxbridge driver — and for both bridge and tap VIFs the hypervisor side (create the
tap, enslave it) is ours anyway, exactly what libvirt does for ``<interface type='bridge'>``.

Tap names: Neutron's agents find a port's device by ``devname`` (``tap`` + the port id's first 11
characters), so the VNF's tap gets that name when the VIF has one. The launch core names taps
itself (``fv<vnf>n<i>``) unless the launch passes ``taps=`` (one name or None per NIC). Ports with
a devname and a MAC still get a warm shell when one of the same shape is ready (same kernel,
flavor memory and vCPUs, NIC count = number of VIFs = ``[vnf] pool_nics``): the launch core
renames the shell's taps to the devnames and tells the VNF its MACs in ``configure``. A devname
that already exists on the host is refused (BuildAbortException naming ``taps[i]``).
"""

from __future__ import annotations

from nova import exception
from nova.network import model as network_model

from fluidvim.vnf import spec as specmod

SUPPORTED_TYPES = (network_model.VIF_TYPE_BRIDGE, network_model.VIF_TYPE_TAP)


class Nic:
    """What one VIF becomes: a NIC of the VNF."""

    __slots__ = ("bridge", "mac", "tap", "port_id")

    def __init__(self, bridge, mac, tap, port_id):
        self.bridge, self.mac, self.tap, self.port_id = bridge, mac, tap, port_id

    def __repr__(self):
        return f"Nic(port={self.port_id}, tap={self.tap}, bridge={self.bridge}, mac={self.mac})"


def nics_for(instance_uuid: str, network_info) -> list[Nic]:
    """The NICs of a server's VIFs, in order; refuses what fluidvim cannot plug."""
    nics = []
    for i, vif in enumerate(network_info or []):
        port = vif.get("id")
        vtype = vif.get("type")
        if vtype not in SUPPORTED_TYPES:
            raise exception.VirtualInterfaceCreateException(
                f"fluidvim plugs VIFs of type {' or '.join(map(repr, SUPPORTED_TYPES))} only; "
                f"port {port} of {instance_uuid} is of type {vtype!r}")
        bridge = None
        if vtype == network_model.VIF_TYPE_BRIDGE:
            bridge = (vif.get("network") or {}).get("bridge")
            if not bridge:
                raise exception.VirtualInterfaceCreateException(
                    f"port {port} of {instance_uuid} is a bridge VIF that names no bridge "
                    f"(network_info[{i}]['network']['bridge'])")
        tap = vif.get("devname") or None
        if tap is not None and not specmod._IFNAME_RE.fullmatch(tap):
            raise exception.VirtualInterfaceCreateException(
                f"port {port} of {instance_uuid}: devname {tap!r} is not a valid interface name "
                "(1-15 characters of A-Z a-z 0-9 _ . -)")
        if tap is None and vtype == network_model.VIF_TYPE_TAP:
            raise exception.VirtualInterfaceCreateException(
                f"port {port} of {instance_uuid} is a tap VIF without a devname: the agent "
                "could not find its device")
        nics.append(Nic(bridge, vif.get("address"), tap, port))
    taps = [n.tap for n in nics if n.tap]
    if len(set(taps)) != len(taps):
        raise exception.VirtualInterfaceCreateException(
            f"two ports of {instance_uuid} have the same devname: {taps}")
    return nics


def plug_events(network_info) -> list[tuple[str, str]]:
    """``network-vif-plugged`` events to wait for: VIFs Neutron reports down (``active`` False)
    will go up once their agent sees the tap; the rest are up already (or stale: do not block)."""
    return [("network-vif-plugged", vif["id"]) for vif in network_info or []
            if vif.get("active", True) is False
            and vif.get("vnic_type") != network_model.VNIC_TYPE_REMOTE_MANAGED]

